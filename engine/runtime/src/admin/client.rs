//! Clients of a running endpoint: `sluice signal`, `sluice status` and `sluice tap`, over HTTP
//! or HTTPS.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::check_signal;

/// Why a client cannot do what it was asked: one line that says so, with the cause kept.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The file of trusted certificates cannot be used (`--cacert`).
    #[error("{0}")]
    Trusted(String),
    /// The client's own certificate or key cannot be read (`flag`: `--cert`, `--key`).
    #[error("{flag} {}: {source}", path.display())]
    Identity {
        flag: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate and the key do not go together.
    #[error("--cert and --key do not go together: {0}")]
    Mismatched(#[source] rustls::Error),
    /// No runtime could be made for the request.
    #[error("no runtime for the client: {0}")]
    Runtime(#[source] std::io::Error),
    /// Nothing listens at the endpoint's address.
    #[error(
        "cannot reach the admin endpoint at {bind} ({source}): is pipeline `{pipeline}` running?"
    )]
    Unreachable {
        bind: String,
        pipeline: String,
        #[source]
        source: std::io::Error,
    },
    /// The endpoint's host cannot be a certificate's name.
    #[error("`{host}` is no name a certificate can have: {source}")]
    ServerName {
        host: String,
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// The TLS handshake failed.
    #[error("TLS to {bind}: {source}")]
    Handshake {
        bind: String,
        #[source]
        source: std::io::Error,
    },
    /// The request could not be made.
    #[error("the request to {bind}: {source}")]
    Request {
        bind: String,
        #[source]
        source: hyper::http::Error,
    },
    /// The HTTP exchange failed (`what`: `talking to`, `sending the request to`, ...).
    #[error("{what} {bind}: {source}")]
    Http {
        what: &'static str,
        bind: String,
        #[source]
        source: hyper::Error,
    },
    /// The endpoint did not answer within the request's time.
    #[error("the admin endpoint at {bind} did not answer in time")]
    Timeout { bind: String },
    /// The signal is not one a pipeline can take.
    #[error("{0}")]
    BadSignal(String),
    /// The pipeline refused the signal.
    #[error("the pipeline refused the signal ({status}): {body}")]
    Refused { status: u16, body: String },
    /// The endpoint answered with an error.
    #[error("the endpoint at {bind} answered {status}: {body}")]
    Answered {
        bind: String,
        status: u16,
        body: String,
    },
    /// The endpoint's answer is no status document.
    #[error("the endpoint at {bind} answered no status ({source})")]
    NoStatus {
        bind: String,
        #[source]
        source: serde_json::Error,
    },
    /// What came could not be written out (`sluice tap`'s output).
    #[error("writing the events: {0}")]
    Output(#[source] std::io::Error),
}

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

/// One request a client makes.
pub(crate) struct Call<'a> {
    /// The pipeline it is about (named when the endpoint cannot be reached).
    pub(crate) pipeline: &'a str,
    pub(crate) method: &'static str,
    /// The path and query, encoded.
    pub(crate) target: &'a str,
    /// A JSON body.
    pub(crate) body: Option<&'a str>,
    /// How long the answer may take (`None`: as long as it streams).
    pub(crate) timeout: Option<Duration>,
}

/// A connection to an endpoint, plain or TLS.
trait Connection: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Connection for T {}

impl Endpoint {
    /// An HTTPS client configuration trusting the CAs (or self-signed certificates) of the PEM
    /// file `trusted`, and showing the certificate and key of `identity` when given.
    pub fn https(
        trusted: &Path,
        identity: Option<(&Path, &Path)>,
    ) -> Result<ClientTls, ClientError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let roots = sluice_engine::tls::roots(trusted, "--cacert").map_err(ClientError::Trusted)?;
        let builder =
            sluice_engine::tls::client_builder(sluice_engine::tls::Verify::Full, Some(roots))
                .map_err(ClientError::Trusted)?;
        let unreadable = |flag, path: &Path| {
            let path = path.to_owned();
            move |source| ClientError::Identity { flag, path, source }
        };
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((certificate, key)) => {
                let chain = CertificateDer::pem_file_iter(certificate)
                    .and_then(|all| all.collect::<Result<Vec<_>, _>>())
                    .map_err(unreadable("--cert", certificate))?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(unreadable("--key", key))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(ClientError::Mismatched)?
            }
        };
        Ok(Arc::new(config))
    }

    /// A connection for a request about `pipeline`.
    async fn connect(&self, pipeline: &str) -> Result<Box<dyn Connection>, ClientError> {
        let bind = &self.bind;
        let tcp = (tokio::net::TcpStream::connect(bind).await).map_err(|source| {
            ClientError::Unreachable {
                bind: bind.clone(),
                pipeline: pipeline.to_owned(),
                source,
            }
        })?;
        let Some(config) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let host = match bind.rsplit_once(':') {
            Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
            None => bind.as_str(),
        };
        let name = rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|source| {
            ClientError::ServerName {
                host: host.to_owned(),
                source,
            }
        })?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(name, tcp)
            .await
            .map_err(|source| ClientError::Handshake {
                bind: bind.clone(),
                source,
            })?;
        Ok(Box::new(tls))
    }

    /// Makes `call`, handing the body's bytes to `each` as they come when the answer is `200`;
    /// returns the status and, for any other, its body.
    pub(crate) fn stream(
        &self,
        call: &Call<'_>,
        each: &mut dyn FnMut(&[u8]) -> Result<(), ClientError>,
    ) -> Result<(u16, String), ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ClientError::Runtime)?;
        let exchange = self.exchange(call, each);
        runtime.block_on(async {
            match call.timeout {
                Some(limit) => tokio::time::timeout(limit, exchange).await.map_err(|_| {
                    ClientError::Timeout {
                        bind: self.bind.clone(),
                    }
                })?,
                None => exchange.await,
            }
        })
    }

    async fn exchange(
        &self,
        call: &Call<'_>,
        each: &mut dyn FnMut(&[u8]) -> Result<(), ClientError>,
    ) -> Result<(u16, String), ClientError> {
        use http_body_util::BodyExt;
        let bind = &self.bind;
        let http = |what| {
            move |source| ClientError::Http {
                what,
                bind: bind.clone(),
                source,
            }
        };
        let connection = self.connect(call.pipeline).await?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(connection))
                .await
                .map_err(http("talking to"))?;
        let driven = tokio::spawn(connection);
        let mut request = hyper::Request::builder()
            .method(call.method)
            .uri(call.target)
            .header(hyper::header::HOST, bind.as_str());
        if let Some(token) = &self.token {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if call.body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let body =
            http_body_util::Full::new(bytes::Bytes::from(call.body.unwrap_or_default().to_owned()));
        let request = request.body(body).map_err(|source| ClientError::Request {
            bind: bind.clone(),
            source,
        })?;
        let mut answer =
            (sender.send_request(request).await).map_err(http("sending the request to"))?;
        let status = answer.status().as_u16();
        let mut text = Vec::new();
        while let Some(frame) = answer.body_mut().frame().await {
            let frame = match frame {
                Ok(frame) => frame,
                // A TLS peer that closed without its close_notify, the answer sent.
                Err(e) if e.is_incomplete_message() && status == 200 && call.timeout.is_none() => {
                    break
                }
                Err(e) => return Err(http("reading the answer from")(e)),
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if status == 200 && call.timeout.is_none() {
                each(&data)?;
            } else {
                text.extend_from_slice(&data);
            }
        }
        driven.abort();
        Ok((status, String::from_utf8_lossy(&text).into_owned()))
    }
}

/// One request to a running pipeline's endpoint: the status code and the body, or a one-line
/// reason.
fn call(endpoint: &Endpoint, call: &Call<'_>) -> Result<(u16, String), ClientError> {
    let (status, body) = endpoint.stream(call, &mut |_| Ok(()))?;
    Ok((status, body.trim().to_owned()))
}

/// Sends `signal` to a running pipeline's endpoint (`sluice signal`); returns the server's
/// answer, or a one-line reason.
pub fn send_signal(
    endpoint: &Endpoint,
    pipeline: &str,
    signal: &str,
) -> Result<String, ClientError> {
    check_signal(signal).map_err(ClientError::BadSignal)?;
    let target = format!("/pipelines/{}/signals", crate::tap_http::encode(pipeline));
    let request = Call {
        pipeline,
        method: "POST",
        target: &target,
        body: Some(signal),
        timeout: Some(Duration::from_secs(10)),
    };
    let (status, body) = call(endpoint, &request)?;
    if status == 202 {
        Ok(body)
    } else {
        Err(ClientError::Refused { status, body })
    }
}

/// A running pipeline's status (`sluice status`), or a one-line reason.
pub fn status(endpoint: &Endpoint, pipeline: &str) -> Result<serde_json::Value, ClientError> {
    let bind = &endpoint.bind;
    let target = format!("/pipelines/{}", crate::tap_http::encode(pipeline));
    let request = Call {
        pipeline,
        method: "GET",
        target: &target,
        body: None,
        timeout: Some(Duration::from_secs(10)),
    };
    let (status, body) = call(endpoint, &request)?;
    if status != 200 {
        return Err(ClientError::Answered {
            bind: bind.clone(),
            status,
            body,
        });
    }
    serde_json::from_str(&body).map_err(|source| ClientError::NoStatus {
        bind: bind.clone(),
        source,
    })
}
