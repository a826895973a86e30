//! The API's connectors, kept across restarts of the server: `connectors/<name>.json` under
//! the server's data directory (`{"name", "config", "state"}`), written whole and renamed into
//! place; and the targets of file pipelines paused or stopped through the API (`targets/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::manager::Target;

/// What is kept of a connector.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Kept {
    name: String,
    config: BTreeMap<String, String>,
    state: Target,
}

/// A kept connector: its name, configuration and target.
pub(crate) type KeptConnector = (String, BTreeMap<String, String>, Target);

/// A connector's name must be usable as a file name: letters, digits, `.`, `_`, `-`, not
/// starting with `.`.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let fine = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if fine {
        Ok(())
    } else {
        Err(format!("connector name `{name}`: use 1 to 200 letters, digits, `.`, `_` or `-`, not starting with `.`"))
    }
}

fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join("connectors").join(format!("{name}.json"))
}

/// Keeps connector `name`'s configuration and target: readable by this user only (it holds
/// the connector's secrets), written whole, synced, then renamed into place.
pub(crate) fn save(
    dir: &Path,
    name: &str,
    (config, state): &(BTreeMap<String, String>, Target),
) -> std::io::Result<()> {
    use std::io::Write;
    let path = file(dir, name);
    if let Some(parent) = path.parent() {
        private_dir(parent)?;
    }
    let kept = Kept {
        name: name.to_owned(),
        config: config.clone(),
        state: *state,
    };
    let text = serde_json::to_vec_pretty(&kept).map_err(std::io::Error::other)?;
    let temporary = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&temporary)?;
    out.write_all(&text)?;
    out.sync_all()?;
    drop(out);
    std::fs::rename(&temporary, &path)
}

/// `dir`, made readable by this user only when this makes it.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Forgets connector `name` (nothing to forget is fine).
pub(crate) fn delete(dir: &Path, name: &str) -> std::io::Result<()> {
    match std::fs::remove_file(file(dir, name)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Where a file pipeline's target is kept: `targets/<name>` with every byte but letters,
/// digits, `.`, `_` and `-` written `%XX` (a pipeline's name is any text).
fn target_file(dir: &Path, name: &str) -> PathBuf {
    let mut file = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || (matches!(b, b'_' | b'-' | b'.') && !file.is_empty()) {
            file.push(char::from(b));
        } else {
            file.push_str(&format!("%{b:02X}"));
        }
    }
    dir.join("targets").join(file)
}

/// Keeps the target of a pipeline whose definition is a file (paused or stopped through the
/// API, it stays so across restarts of the server); running, the default, is kept as nothing.
pub(crate) fn save_target(dir: &Path, name: &str, target: Target) -> std::io::Result<()> {
    let path = target_file(dir, name);
    if target == Target::Running {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    if let Some(parent) = path.parent() {
        private_dir(parent)?;
    }
    let text = serde_json::to_vec(&target).map_err(std::io::Error::other)?;
    let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, &path)
}

/// The kept target of the file pipeline `name`, if it is not running; a file that does not
/// read says why.
pub(crate) fn kept_target(dir: &Path, name: &str) -> Result<Option<Target>, String> {
    let path = target_file(dir, name);
    match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
    }
}

/// Forgets the kept targets of file pipelines other than `names` (their files went while the
/// server was down); what cannot be removed is named with why.
pub(crate) fn prune_targets(dir: &Path, names: &[String]) -> Vec<String> {
    let keep: Vec<PathBuf> = names.iter().map(|n| target_file(dir, n)).collect();
    let Ok(entries) = std::fs::read_dir(dir.join("targets")) else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if !keep.contains(&path) {
            if let Err(e) = std::fs::remove_file(&path) {
                problems.push(format!("{}: {e}", path.display()));
            }
        }
    }
    problems
}

/// The connectors kept under `dir`, by name; a file that does not read is named with why.
pub(crate) fn load(dir: &Path) -> (Vec<KeptConnector>, Vec<String>) {
    let (mut found, mut problems) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir.join("connectors")) else {
        return (found, problems);
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let read = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice::<Kept>(&bytes).map_err(|e| e.to_string()));
        match read {
            Ok(kept) => found.push((kept.name, kept.config, kept.state)),
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    (found, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_connectors_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let config: BTreeMap<String, String> =
            [("connector.class".to_owned(), "PostgresConnector".to_owned())].into();
        save(dir.path(), "a", &(config.clone(), Target::Paused)).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&dir.path().join("connectors/a.json")), 0o600);
            assert_eq!(mode(&dir.path().join("connectors")), 0o700);
        }
        save(dir.path(), "b", &(config.clone(), Target::Running)).unwrap();
        delete(dir.path(), "b").unwrap();
        delete(dir.path(), "never").unwrap();
        std::fs::write(dir.path().join("connectors/bad.json"), "{").unwrap();
        let (found, problems) = load(dir.path());
        assert_eq!(found, vec![("a".to_owned(), config, Target::Paused)]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(check_name("inventory-connector.v2").is_ok());
        for bad in ["", ".hidden", "a/b", "a b", "..", "é"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn file_pipelines_targets_are_kept_under_any_name() {
        let dir = tempfile::tempdir().unwrap();
        let names = ["orders", "../up", ".", "a/b c", "é", "orders."];
        for name in names {
            assert_eq!(kept_target(dir.path(), name), Ok(None));
            save_target(dir.path(), name, Target::Paused).unwrap();
        }
        let files = std::fs::read_dir(dir.path().join("targets"))
            .unwrap()
            .count();
        assert_eq!(files, names.len(), "one file each, all in targets/");
        for name in names {
            assert_eq!(kept_target(dir.path(), name), Ok(Some(Target::Paused)));
        }
        save_target(dir.path(), "orders", Target::Stopped).unwrap();
        assert_eq!(kept_target(dir.path(), "orders"), Ok(Some(Target::Stopped)));
        save_target(dir.path(), "orders", Target::Running).unwrap();
        save_target(dir.path(), "never", Target::Running).unwrap();
        assert_eq!(kept_target(dir.path(), "orders"), Ok(None));
        std::fs::write(target_file(dir.path(), "bad"), "{").unwrap();
        assert!(kept_target(dir.path(), "bad").is_err());
        let problems = prune_targets(dir.path(), &["../up".to_owned(), "é".to_owned()]);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(kept_target(dir.path(), "../up"), Ok(Some(Target::Paused)));
        assert_eq!(kept_target(dir.path(), "é"), Ok(Some(Target::Paused)));
        assert_eq!(kept_target(dir.path(), "a/b c"), Ok(None), "pruned");
        assert_eq!(
            std::fs::read_dir(dir.path().join("targets"))
                .unwrap()
                .count(),
            2
        );
    }
}
