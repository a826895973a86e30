//! `admin:` in a pipeline file: where the admin endpoint listens and who may call it (the
//! endpoint itself is the runtime's).

use serde::Deserialize;

/// `admin:` in a pipeline file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Address to listen on, e.g. `127.0.0.1:8083`.
    pub bind: String,
    /// The bearer token every request but the health checks must carry (`${VAR}` reads it
    /// from the environment); required to listen on an address other than this machine's.
    #[serde(default)]
    pub token: Option<super::Secret>,
    /// A file whose first line is the token, instead of `token`.
    #[serde(rename = "token.file", default)]
    pub token_file: Option<std::path::PathBuf>,
    /// HTTPS: the endpoint's certificate chain (PEM), with `tls.key`.
    #[serde(rename = "tls.certificate", default)]
    pub tls_certificate: Option<std::path::PathBuf>,
    /// HTTPS: the endpoint's private key (PEM).
    #[serde(rename = "tls.key", default)]
    pub tls_key: Option<std::path::PathBuf>,
    /// HTTPS with client certificates: the CAs (PEM) whose certificates a client must present
    /// (then no token is needed beyond this machine).
    #[serde(rename = "tls.client.ca", default)]
    pub tls_client_ca: Option<std::path::PathBuf>,
}

impl AdminConfig {
    /// The token, from `token` or `token.file` (`None`: no token asked for).
    pub fn token(&self) -> Result<Option<String>, String> {
        let token = match (&self.token, &self.token_file) {
            (Some(_), Some(_)) => {
                return Err("admin: give `token` or `token.file`, not both".into())
            }
            (Some(t), None) => t.expose().trim().to_owned(),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map_err(|e| format!("admin: cannot read `token.file` `{}`: {e}", path.display()))?
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned(),
            (None, None) => return Ok(None),
        };
        if token.len() < 16 {
            return Err("admin: the token is shorter than 16 characters: use a long random one (`openssl rand -hex 32`)".into());
        }
        Ok(Some(token))
    }

    /// An endpoint of `bind` with no token and no TLS.
    pub fn plain(bind: &str) -> Self {
        AdminConfig {
            bind: bind.to_owned(),
            token: None,
            token_file: None,
            tls_certificate: None,
            tls_key: None,
            tls_client_ca: None,
        }
    }

    /// Checks that an endpoint reachable from other machines has a token or asks for client
    /// certificates, and that its TLS settings go together.
    pub fn check(&self) -> Result<(), String> {
        let token = self.token()?;
        match (&self.tls_certificate, &self.tls_key, &self.tls_client_ca) {
            (Some(_), None, _) | (None, Some(_), _) => {
                return Err("admin: give `tls.certificate` and `tls.key` together".into())
            }
            (None, None, Some(_)) => {
                return Err("admin: `tls.client.ca` needs `tls.certificate` and `tls.key` (client certificates are asked for over TLS)".into())
            }
            _ => {}
        }
        if token.is_none() && self.tls_client_ca.is_none() && !is_local(&self.bind) {
            return Err(format!(
                "admin: `bind: {}` listens beyond this machine: set `token` (or `token.file`) so that requests must carry `Authorization: Bearer <token>`, or `tls.client.ca` so that they present a client certificate, or bind 127.0.0.1",
                self.bind
            ));
        }
        Ok(())
    }
}

/// Whether `bind` (`host:port`) is this machine's own address only.
pub fn is_local(bind: &str) -> bool {
    let host = match bind.rsplit_once(':') {
        Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
        None => bind,
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_beyond_this_machine_needs_a_long_token() {
        let config = |bind: &str, token: Option<&str>| AdminConfig {
            token: token.map(|t| super::super::Secret::from(t.to_owned())),
            ..AdminConfig::plain(bind)
        };
        for local in ["127.0.0.1:8083", "localhost:1", "[::1]:8083", "127.1.2.3:9"] {
            assert_eq!(config(local, None).check(), Ok(()), "{local}");
        }
        let e = config("0.0.0.0:8083", None).check().unwrap_err();
        assert!(e.contains("set `token`"), "{e}");
        assert!(config("0.0.0.0:8083", Some("short")).check().is_err());
        assert_eq!(
            config("0.0.0.0:8083", Some("0123456789abcdef")).check(),
            Ok(())
        );
        // Client certificates instead of a token; TLS settings go together.
        let tls = |ca: Option<&str>, cert: bool| AdminConfig {
            tls_certificate: cert.then(|| "s.pem".into()),
            tls_key: cert.then(|| "s.key".into()),
            tls_client_ca: ca.map(Into::into),
            ..AdminConfig::plain("0.0.0.0:8083")
        };
        assert_eq!(tls(Some("ca.pem"), true).check(), Ok(()));
        assert!(tls(None, true)
            .check()
            .unwrap_err()
            .contains("tls.client.ca"));
        assert!(tls(Some("ca.pem"), false)
            .check()
            .unwrap_err()
            .contains("needs `tls.certificate`"));
        let half = AdminConfig {
            tls_certificate: Some("s.pem".into()),
            ..AdminConfig::plain("127.0.0.1:1")
        };
        assert!(half.check().unwrap_err().contains("together"));
    }
}
