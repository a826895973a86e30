//! Finding the ODBC driver's library. The driver manager is compiled into Sluice (unixODBC's,
//! without libltdl): it loads a driver registered under a bare file name (Debian registers
//! `Driver=psqlodbcw.so`, found by the system's libodbc in its own driver directory) only from
//! the loader's default path. A connection string naming a registered driver is given the
//! library's full path instead, looked up in the directories the system's driver managers
//! search.

use std::path::PathBuf;

/// The directories a driver registered by bare file name is looked for in, in order.
fn driver_directories() -> Vec<PathBuf> {
    let arch = std::env::consts::ARCH;
    [
        format!("/usr/lib/{arch}-linux-gnu/odbc"),
        "/usr/lib64/odbc".to_owned(),
        "/usr/lib/odbc".to_owned(),
        "/usr/local/lib/odbc".to_owned(),
        format!("/usr/lib/{arch}-linux-gnu"),
        "/usr/lib64".to_owned(),
        "/usr/lib".to_owned(),
        "/usr/local/lib".to_owned(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// The value of the `DRIVER` attribute of a connection string (braces taken off), with the
/// byte range it takes in the string.
fn driver_attribute(connection: &str) -> Option<(String, std::ops::Range<usize>)> {
    let mut at = 0;
    while at < connection.len() {
        let rest = &connection[at..];
        let (key, after_key) = rest.split_once('=')?;
        let value_at = at + key.len() + 1;
        let (value, end) = if after_key.starts_with('{') {
            // A braced value ends at the first `}` not doubled.
            let bytes = after_key.as_bytes();
            let mut i = 1;
            loop {
                match bytes.get(i) {
                    Some(b'}') if bytes.get(i + 1) == Some(&b'}') => i += 2,
                    Some(b'}') => break,
                    Some(_) => i += 1,
                    None => return None,
                }
            }
            (after_key[1..i].replace("}}", "}"), value_at + i + 1)
        } else {
            let len = after_key.find(';').unwrap_or(after_key.len());
            (after_key[..len].to_owned(), value_at + len)
        };
        if key.trim().eq_ignore_ascii_case("driver") {
            return Some((value, value_at..end));
        }
        at = connection[end..]
            .find(';')
            .map_or(connection.len(), |i| end + i + 1);
    }
    None
}

/// `connection` with its `DRIVER` naming a library file where the registered driver is a bare
/// file name found in `directories`; as it is otherwise. `registered`: the `Driver` attribute
/// of the driver of that name in `odbcinst.ini`.
fn with_driver_path(
    connection: &str,
    registered: impl Fn(&str) -> Option<String>,
    directories: &[PathBuf],
) -> String {
    let Some((name, range)) = driver_attribute(connection) else {
        return connection.to_owned();
    };
    let Some(library) = registered(&name) else {
        return connection.to_owned();
    };
    if library.contains('/') {
        return connection.to_owned();
    }
    match directories
        .iter()
        .map(|d| d.join(&library))
        .find(|p| p.is_file())
    {
        Some(path) => format!(
            "{}{{{}}}{}",
            &connection[..range.start],
            path.display(),
            &connection[range.end..]
        ),
        None => connection.to_owned(),
    }
}

/// `connection` with the full path of its registered driver's library (see the module's
/// documentation); as it is when the driver is not registered or not found.
pub(super) fn resolve(env: &odbc_api::Environment, connection: &str) -> String {
    let drivers = env.drivers().unwrap_or_default();
    let registered = |name: &str| {
        drivers
            .iter()
            .find(|d| d.description.eq_ignore_ascii_case(name))
            .and_then(|d| d.attributes.get("Driver").cloned())
    };
    with_driver_path(connection, registered, &driver_directories())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_attribute_is_found_braced_or_not_in_any_case() {
        let s = "Driver={PostgreSQL Unicode};Server=x;";
        let (name, range) = driver_attribute(s).unwrap();
        assert_eq!(name, "PostgreSQL Unicode");
        assert_eq!(&s[range], "{PostgreSQL Unicode}");
        let s = "Uid=a;DRIVER=IBM;Pwd={x;y}";
        assert_eq!(driver_attribute(s).unwrap().0, "IBM");
        let s = "Pwd={a}}b;Driver=no};driver={D}}2}";
        assert_eq!(driver_attribute(s).unwrap().0, "D}2");
        assert_eq!(driver_attribute("Server=x;Uid=y"), None);
    }

    #[test]
    fn a_bare_library_name_becomes_the_path_it_is_found_at() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libdrv.so"), b"").unwrap();
        let dirs = vec![PathBuf::from("/nonexistent"), dir.path().to_path_buf()];
        let registered = |name: &str| (name == "My Driver").then(|| "libdrv.so".to_owned());
        let out = with_driver_path("Driver={My Driver};Database=d;", registered, &dirs);
        assert_eq!(
            out,
            format!(
                "Driver={{{}}};Database=d;",
                dir.path().join("libdrv.so").display()
            )
        );
        // Not registered, or not found: as it is.
        let s = "Driver={Other};Database=d;";
        assert_eq!(with_driver_path(s, registered, &dirs), s);
        let missing = |_: &str| Some("libmissing.so".to_owned());
        assert_eq!(
            with_driver_path("Driver={My Driver};", missing, &dirs),
            "Driver={My Driver};"
        );
        // Registered by path: the driver manager finds it as it is.
        let by_path = |_: &str| Some("/opt/ibm/lib/libdb2o.so".to_owned());
        assert_eq!(
            with_driver_path("Driver=IBM;X=1", by_path, &dirs),
            "Driver=IBM;X=1"
        );
    }
}
