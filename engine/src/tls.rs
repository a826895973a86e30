//! TLS client settings shared by the sources and sinks that speak a database's protocol
//! (rustls with the ring provider), with libpq's `sslmode` levels: encrypt without verifying
//! the server, verify its chain against given roots without its name, or verify both.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WantsClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ConfigBuilder, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// How much of the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Nothing (`sslmode=require`): encrypted, the server not authenticated.
    Nothing,
    /// Its chain to the given roots, not its name (`verify-ca`).
    Chain,
    /// Its chain and its name (`verify-full`).
    Full,
}

/// Accepts any certificate but still checks the handshake signatures (`sslmode=require`).
#[derive(Debug)]
struct EncryptOnly(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Verifies the chain against the roots but not the host name (`sslmode=verify-ca`).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of the PEM file `path` as roots; `key` names the property in errors.
pub fn roots(path: &Path, key: &str) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read `{key}` {}: {e}", path.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("`{key}` {}: {e}", path.display()))?;
        store
            .add(cert)
            .map_err(|e| format!("`{key}` {}: {e}", path.display()))?;
    }
    if store.is_empty() {
        return Err(format!(
            "`{key}` {} holds no PEM certificate",
            path.display()
        ));
    }
    Ok(store)
}

/// A client configuration checking the server as `verify` says against `roots` (required
/// unless `Nothing`), waiting for its client authentication.
pub fn client_builder(
    verify: Verify,
    roots: Option<RootCertStore>,
) -> Result<ConfigBuilder<ClientConfig, WantsClientCert>, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let roots = match (verify, roots) {
        (Verify::Nothing, _) => {
            return Ok(builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider))))
        }
        (_, Some(roots)) => Arc::new(roots),
        (_, None) => {
            return Err("checking the server's certificate needs its CA's certificate".into())
        }
    };
    if verify == Verify::Full {
        return Ok(builder.with_root_certificates(roots));
    }
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .map_err(|e| format!("TLS: {e}"))?;
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki))))
}
