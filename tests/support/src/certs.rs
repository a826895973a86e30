//! Test certificates made by `openssl`: a CA, and a server certificate for 127.0.0.1 and
//! localhost it signs (for the servers the TLS tests start).

use std::path::Path;
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA named `name` (`<name>.pem`, `<name>.key`) in `dir`.
pub fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// `server.pem` and `server.key` for 127.0.0.1 and localhost, signed by CA `ca`.
pub fn server_certificate(dir: &Path, ca: &str) {
    signed(
        dir,
        (ca, "server", "/CN=localhost"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    );
}

/// `<name>.pem` and `<name>.key`: a client certificate (common name `name`) signed by CA `ca`.
pub fn client_certificate(dir: &Path, ca: &str, name: &str) {
    signed(
        dir,
        (ca, name, &format!("/CN={name}")),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    );
}

/// `<name>.pem` and `<name>.key` with `subject` and the X.509 extensions `extensions`, signed
/// by CA `ca`.
fn signed(dir: &Path, (ca, name, subject): (&str, &str, &str), extensions: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            subject,
        ],
    );
    let ext = format!("{name}-ext.cnf");
    std::fs::write(dir.join(&ext), extensions).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-extfile",
            &ext,
        ],
    );
}
