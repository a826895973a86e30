//! TLS as SQL Server serves it before TDS 8.0: after the pre-login exchange the TLS handshake's
//! records travel inside TDS pre-login packets; once it is done, the TDS packets themselves
//! travel inside TLS.

use std::io;
use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::tds;

/// A server configuration with a fresh self-signed certificate for `localhost` and
/// `127.0.0.1`, and that certificate in PEM.
pub fn self_signed() -> (Arc<rustls::ServerConfig>, String) {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(names).expect("a self-signed certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        // TLS 1.2, as SQL Server before TDS 8.0 (its TLS 1.3 needs strict mode).
        .with_protocol_versions(&[&rustls::version::TLS12])
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(cert.der().to_vec())], key)
        .expect("the certificate and its key");
    (Arc::new(config), cert.pem())
}

/// The TLS handshake inside pre-login packets; the stream the session then runs on.
pub fn accept(
    mut tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> io::Result<rustls::StreamOwned<rustls::ServerConnection, TcpStream>> {
    let mut tls = rustls::ServerConnection::new(config).map_err(io::Error::other)?;
    loop {
        if tls.wants_write() {
            let mut out = Vec::new();
            while tls.wants_write() {
                tls.write_tls(&mut out)?;
            }
            tds::write_message(&mut tcp, tds::PRELOGIN, &out)?;
            continue;
        }
        if !tls.is_handshaking() {
            break;
        }
        let Some((_, data)) = tds::read_message(&mut tcp)? else {
            return Err(io::ErrorKind::UnexpectedEof.into());
        };
        let mut rest = data.as_slice();
        while !rest.is_empty() {
            tls.read_tls(&mut rest)?;
            tls.process_new_packets().map_err(io::Error::other)?;
        }
    }
    Ok(rustls::StreamOwned::new(tls, tcp))
}
