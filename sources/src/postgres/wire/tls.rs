//! TLS for the SQL connection (rustls), following libpq's `sslmode` semantics: `require`
//! encrypts without verifying the server, `verify-ca` checks the chain against
//! `database.sslrootcert`, `verify-full` also checks the host name (the engine's `tls`).

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ClientConfig;
use sluice_engine::tls::{client_builder, roots, Verify};

use crate::postgres::error::PgError;

/// The rustls client configuration for an sslmode (`verify` = check the chain, `host` = check
/// the name too).
pub(crate) fn client_config(
    verify: bool,
    host: bool,
    root_cert: Option<&Path>,
    client: Option<(&Path, &Path)>,
) -> Result<ClientConfig, PgError> {
    let level = match (verify, host) {
        (false, _) => Verify::Nothing,
        (true, false) => Verify::Chain,
        (true, true) => Verify::Full,
    };
    let store = match (verify, root_cert) {
        (false, _) => None,
        (true, Some(path)) => Some(roots(path, "database.sslrootcert").map_err(PgError::Setup)?),
        (true, None) => return Err(PgError::Setup("`database.sslmode` verify-ca and verify-full need `database.sslrootcert` (the CA's PEM file)".into())),
    };
    with_client(
        client_builder(level, store).map_err(PgError::Setup)?,
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
