//! Clients of a running endpoint: `sluice signal`, `sluice status` and `sluice tap`, over HTTP
//! or HTTPS.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::check_signal;

/// An HTTPS client's configuration (what it trusts, what it shows).
pub type ClientTls = Arc<rustls::ClientConfig>;

/// Where a client reaches an endpoint: its address, its token, and for HTTPS what the client
/// trusts and shows.
#[derive(Clone, Default)]
pub struct Endpoint {
    /// `host:port`.
    pub bind: String,
    /// The bearer token, when the endpoint asks for one.
    pub token: Option<String>,
    /// HTTPS (`None`: plain HTTP).
    pub tls: Option<ClientTls>,
}

/// A connection to an endpoint, plain or TLS.
pub trait Connection: Read + Write + Send {}
impl<T: Read + Write + Send> Connection for T {}

impl Endpoint {
    /// An HTTPS client configuration trusting the CAs (or self-signed certificates) of the PEM
    /// file `trusted`, and showing the certificate and key of `identity` when given.
    pub fn https(trusted: &Path, identity: Option<(&Path, &Path)>) -> Result<ClientTls, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let roots = sluice_engine::tls::roots(trusted, "--cacert")?;
        let builder =
            sluice_engine::tls::client_builder(sluice_engine::tls::Verify::Full, Some(roots))?;
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((certificate, key)) => {
                let chain = CertificateDer::pem_file_iter(certificate)
                    .and_then(|all| all.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("--cert {}: {e}", certificate.display()))?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("--key {}: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("--cert and --key do not go together: {e}"))?
            }
        };
        Ok(Arc::new(config))
    }

    /// A connection for a request about `pipeline`; `timeout`: how long a read may wait.
    pub(crate) fn connect(
        &self,
        pipeline: &str,
        timeout: Option<Duration>,
    ) -> Result<Box<dyn Connection>, String> {
        let bind = &self.bind;
        let tcp = std::net::TcpStream::connect(bind).map_err(|e| {
            format!(
                "cannot reach the admin endpoint at {bind} ({e}): is pipeline `{pipeline}` running?"
            )
        })?;
        let _ = tcp.set_read_timeout(timeout);
        let Some(config) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let host = match bind.rsplit_once(':') {
            Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
            None => bind.as_str(),
        };
        let name = rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(|e| format!("`{host}` is no name a certificate can have: {e}"))?;
        let connection = rustls::ClientConnection::new(Arc::clone(config), name)
            .map_err(|e| format!("TLS to {bind}: {e}"))?;
        Ok(Box::new(rustls::StreamOwned::new(connection, tcp)))
    }

    /// The `authorization` header line (empty without a token).
    pub(crate) fn bearer(&self) -> String {
        (self.token.as_deref()).map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"))
    }
}

/// One request to a running pipeline's endpoint: the status code and the body, or a one-line
/// reason.
fn call(endpoint: &Endpoint, pipeline: &str, request: &str) -> Result<(String, String), String> {
    let bind = &endpoint.bind;
    let mut stream = endpoint.connect(pipeline, Some(Duration::from_secs(10)))?;
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("sending the request to {bind}: {e}"))?;
    let mut response = Vec::new();
    match stream.read_to_end(&mut response) {
        Ok(_) => {}
        // A TLS peer that closed without its close_notify, after answering: the answer stands.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {}
        Err(e) => return Err(format!("reading the answer from {bind}: {e}")),
    }
    let response = String::from_utf8_lossy(&response);
    let status = response.split_whitespace().nth(1).unwrap_or("").to_owned();
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .trim()
        .to_owned();
    Ok((status, body))
}

/// Sends `signal` to a running pipeline's endpoint (`sluice signal`); returns the server's
/// answer, or a one-line reason.
pub fn send_signal(endpoint: &Endpoint, pipeline: &str, signal: &str) -> Result<String, String> {
    check_signal(signal)?;
    let request = format!(
        "POST /pipelines/{pipeline}/signals HTTP/1.1\r\nhost: {}\r\n{}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{signal}",
        endpoint.bind,
        endpoint.bearer(),
        signal.len()
    );
    let (status, body) = call(endpoint, pipeline, &request)?;
    if status == "202" {
        Ok(body)
    } else {
        Err(format!(
            "the pipeline refused the signal ({status}): {body}"
        ))
    }
}

/// A running pipeline's status (`sluice status`), or a one-line reason.
pub fn status(endpoint: &Endpoint, pipeline: &str) -> Result<serde_json::Value, String> {
    let bind = &endpoint.bind;
    let request = format!(
        "GET /pipelines/{pipeline} HTTP/1.1\r\nhost: {bind}\r\n{}connection: close\r\n\r\n",
        endpoint.bearer()
    );
    let (status, body) = call(endpoint, pipeline, &request)?;
    if status != "200" {
        return Err(format!("the endpoint at {bind} answered {status}: {body}"));
    }
    serde_json::from_str(&body)
        .map_err(|e| format!("the endpoint at {bind} answered no status ({e})"))
}
