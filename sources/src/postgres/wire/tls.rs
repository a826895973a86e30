//! TLS for the SQL connection (rustls), following libpq's `sslmode` semantics: `require`
//! encrypts without verifying the server, `verify-ca` checks the chain against
//! `database.sslrootcert`, `verify-full` also checks the host name.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::postgres::error::PgError;

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

fn roots(path: &Path) -> Result<RootCertStore, PgError> {
    let mut store = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(|e| {
        PgError::Setup(format!(
            "cannot read `database.sslrootcert` {}: {e}",
            path.display()
        ))
    })?;
    for cert in certs {
        let cert = cert.map_err(|e| {
            PgError::Setup(format!("`database.sslrootcert` {}: {e}", path.display()))
        })?;
        store.add(cert).map_err(|e| {
            PgError::Setup(format!("`database.sslrootcert` {}: {e}", path.display()))
        })?;
    }
    Ok(store)
}

/// The rustls client configuration for an sslmode (`verify` = check the chain, `host` = check
/// the name too).
pub(crate) fn client_config(
    verify: bool,
    host: bool,
    root_cert: Option<&Path>,
    client: Option<(&Path, &Path)>,
) -> Result<ClientConfig, PgError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| PgError::Setup(format!("TLS: {e}")))?;
    if !verify {
        return with_client(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider))),
            client,
        );
    }
    let root_cert = root_cert.ok_or_else(|| {
        PgError::Setup("`database.sslmode` verify-ca and verify-full need `database.sslrootcert` (the CA's PEM file)".into())
    })?;
    let store = Arc::new(roots(root_cert)?);
    if host {
        return with_client(builder.with_root_certificates(store), client);
    }
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(store, provider)
        .build()
        .map_err(|e| PgError::Setup(format!("TLS: {e}")))?;
    with_client(
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki))),
        client,
    )
}

/// Finishes the configuration with the client certificate, when one is set.
fn with_client(
    builder: rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>,
    client: Option<(&Path, &Path)>,
) -> Result<ClientConfig, PgError> {
    let Some((cert, key)) = client else {
        return Ok(builder.with_no_client_auth());
    };
    let (chain, key) = client_identity(cert, key)?;
    builder.with_client_auth_cert(chain, key).map_err(|e| {
        PgError::Setup(format!(
            "`database.sslcert` / `database.sslkey` cannot be used: {e}"
        ))
    })
}

/// Reads the client certificate chain and its key, with errors naming the property.
fn client_identity(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), PgError> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            PgError::Setup(format!(
                "cannot read `database.sslcert` {}: {e}",
                cert.display()
            ))
        })?;
    if chain.is_empty() {
        return Err(PgError::Setup(format!(
            "`database.sslcert` {} holds no PEM certificate",
            cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        PgError::Setup(format!(
            "cannot read `database.sslkey` {} (an unencrypted PEM key): {e}",
            key.display()
        ))
    })?;
    Ok((chain, key))
}
