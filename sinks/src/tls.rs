//! The TLS client settings of the sinks' HTTP clients (the schema registry, the `http` sink) and
//! of the `jdbc` sink's `verify-full` without a CA file:
//! rustls with the ring provider and the system's trust roots.

use std::sync::Arc;

use sluice_engine::ComponentError;

/// A client configuration that verifies servers against the platform's roots.
pub(crate) fn client_config() -> Result<rustls::ClientConfig, ComponentError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ComponentError::fatal(format!("TLS setup failed: {e}")).with_source(e))?;
    Ok(
        rustls_platform_verifier::BuilderVerifierExt::with_platform_verifier(tls)
            .map_err(|e| ComponentError::fatal(format!("TLS setup failed: {e}")).with_source(e))?
            .with_no_client_auth(),
    )
}
