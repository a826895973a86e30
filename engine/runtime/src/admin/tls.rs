//! HTTPS for the endpoint (rustls with the ring provider): its certificate and key, and the
//! CAs whose client certificates it requires when asked to.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The acceptor of `certificate` (a PEM chain) and `key`; with `client_ca`, clients must
/// present a certificate one of its CAs signed.
pub(super) fn acceptor(
    certificate: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<tokio_rustls::TlsAcceptor, String> {
    let chain = certificates(certificate, "tls.certificate")?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "admin: `tls.key` {}: no private key in PEM ({e})",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("admin: TLS: {e}"))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for ca in certificates(path, "tls.client.ca")? {
                roots
                    .add(ca)
                    .map_err(|e| format!("admin: `tls.client.ca` {}: {e}", path.display()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| format!("admin: `tls.client.ca` {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("admin: `tls.certificate` and `tls.key` do not go together: {e}"))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// The certificates of a PEM file (at least one).
fn certificates(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let read = CertificateDer::pem_file_iter(path)
        .and_then(|all| all.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("admin: `{key}` {}: {e}", path.display()))?;
    if read.is_empty() {
        return Err(format!(
            "admin: `{key}` {}: no certificate in PEM",
            path.display()
        ));
    }
    Ok(read)
}
