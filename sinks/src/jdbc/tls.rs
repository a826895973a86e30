//! TLS to the target, from `connection.url`'s parameters as the JDBC drivers name them:
//! PostgreSQL's `sslmode` (`disable`, `prefer`, the default, `require`, `verify-ca`,
//! `verify-full`), `sslrootcert` and `ssl=true` (pgjdbc's `verify-full`); MySQL Connector/J's
//! `sslMode` (`DISABLED`, the default here, `PREFERRED`, `REQUIRED`, `VERIFY_CA`,
//! `VERIFY_IDENTITY`) and `useSSL`, MariaDB Connector/J's `sslMode` (`disable`, `trust`,
//! `verify-ca`, `verify-full`) and `serverSslCert` (a PEM file: the CA or the server's
//! certificate). Any other parameter is refused rather than ignored.

use std::path::PathBuf;

use super::config::Dialect;

/// How the connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    Disable,
    /// TLS when the server offers it, not verified; else plain.
    Prefer,
    /// TLS, the server not verified.
    Require,
    /// TLS, the server's chain checked against the roots, not its name.
    VerifyCa,
    /// TLS, the chain and the name checked.
    VerifyFull,
}

/// TLS to the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    pub mode: TlsMode,
    /// The PEM file of the CA (or the server's certificate) the server's chain ends at.
    pub root_cert: Option<PathBuf>,
}

/// The TLS `params` (`a=b&c=d`) ask for on `dialect`.
pub(super) fn parse(dialect: Dialect, params: Option<&str>) -> Result<Tls, String> {
    let mut tls = Tls {
        mode: match dialect {
            Dialect::Postgres => TlsMode::Prefer,
            Dialect::MySql => TlsMode::Disable,
        },
        root_cert: None,
    };
    for pair in params.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let bad = || format!("`connection.url`: `{pair}` is not a value this sink reads");
        match (dialect, key) {
            (Dialect::Postgres, "sslmode") => {
                tls.mode = match value {
                    "disable" => TlsMode::Disable,
                    "allow" | "prefer" => TlsMode::Prefer,
                    "require" => TlsMode::Require,
                    "verify-ca" => TlsMode::VerifyCa,
                    "verify-full" => TlsMode::VerifyFull,
                    _ => return Err(bad()),
                }
            }
            (Dialect::Postgres, "ssl") => {
                tls.mode = match value {
                    "true" => TlsMode::VerifyFull,
                    "false" => TlsMode::Disable,
                    _ => return Err(bad()),
                }
            }
            (Dialect::Postgres, "sslrootcert") | (Dialect::MySql, "serverSslCert") => {
                tls.root_cert = Some(PathBuf::from(value));
            }
            (Dialect::MySql, "sslMode") => {
                tls.mode = match value.to_ascii_lowercase().replace('_', "-").as_str() {
                    "disabled" | "disable" => TlsMode::Disable,
                    "preferred" => TlsMode::Prefer,
                    "required" | "trust" => TlsMode::Require,
                    "verify-ca" => TlsMode::VerifyCa,
                    "verify-identity" | "verify-full" => TlsMode::VerifyFull,
                    _ => return Err(bad()),
                }
            }
            (Dialect::MySql, "useSSL") => {
                tls.mode = match value {
                    "true" => TlsMode::Require,
                    "false" => TlsMode::Disable,
                    _ => return Err(bad()),
                }
            }
            (Dialect::MySql, "trustCertificateKeyStoreUrl") => {
                return Err("`connection.url`: a Java trust store is not read; name the CA's PEM file with `serverSslCert`".into())
            }
            _ => {
                return Err(format!(
                    "`connection.url`: the parameter `{key}` is not read by this sink (it reads sslmode, sslrootcert and ssl for PostgreSQL; sslMode, useSSL and serverSslCert for MySQL and MariaDB)"
                ))
            }
        }
    }
    if tls.mode == TlsMode::VerifyCa && tls.root_cert.is_none() {
        return Err("`connection.url`: verifying the server's chain without its name needs the CA's PEM file (`sslrootcert` for PostgreSQL, `serverSslCert` for MySQL and MariaDB)".into());
    }
    Ok(tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parameters_name_the_tls_as_the_drivers_do() {
        let pg = |p| parse(Dialect::Postgres, Some(p));
        let my = |p| parse(Dialect::MySql, Some(p));
        assert_eq!(
            parse(Dialect::Postgres, None).unwrap().mode,
            TlsMode::Prefer
        );
        assert_eq!(parse(Dialect::MySql, None).unwrap().mode, TlsMode::Disable);
        assert_eq!(pg("sslmode=require").unwrap().mode, TlsMode::Require);
        assert_eq!(pg("ssl=true").unwrap().mode, TlsMode::VerifyFull);
        let full = pg("sslmode=verify-full&sslrootcert=/ca.pem").unwrap();
        assert_eq!(full.root_cert, Some(PathBuf::from("/ca.pem")));
        assert!(pg("sslmode=verify-ca").is_err(), "no CA");
        assert_eq!(
            my("sslMode=VERIFY_IDENTITY").unwrap().mode,
            TlsMode::VerifyFull
        );
        assert_eq!(my("sslMode=trust").unwrap().mode, TlsMode::Require);
        assert_eq!(my("useSSL=true").unwrap().mode, TlsMode::Require);
        assert!(my("trustCertificateKeyStoreUrl=file:/ks.jks")
            .unwrap_err()
            .contains("serverSslCert"));
        assert!(pg("currentSchema=x")
            .unwrap_err()
            .contains("`currentSchema` is not read"));
        assert!(pg("sslmode=sometimes").is_err());
    }
}
