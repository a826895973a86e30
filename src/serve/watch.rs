//! The watched directory: every `*.yaml` / `*.yml` file is a pipeline. A new file starts its
//! pipeline, a changed one restarts it from its committed position (a file that no longer
//! loads leaves the running version alone, and says why), a removed one stops it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::manager::{check, Manager, Origin, Target};

/// The files seen, with their text.
pub(crate) type Watched = BTreeMap<PathBuf, String>;

/// Looks at `dir` once: what changed since `seen` is applied; returns what is seen now.
pub(crate) fn scan(dir: &Path, seen: Watched, manager: &Manager) -> Watched {
    let mut now = Watched::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
                let pipeline = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
                let hidden = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_none_or(|n| n.starts_with('.'));
                if !pipeline || hidden {
                    continue;
                }
                // A file being written may not read yet: it is looked at again next time.
                if let Ok(text) = std::fs::read_to_string(&path) {
                    now.insert(path, text);
                }
            }
        }
        Err(e) => {
            tracing::error!(directory = %dir.display(), error = %e, "Cannot read the pipelines' directory.");
            return seen;
        }
    }
    for path in seen.keys().filter(|p| !now.contains_key(*p)) {
        if let Some(name) = manager.name_of_file(path) {
            tracing::info!(file = %path.display(), pipeline = %name, "Pipeline file removed: stopping it.");
            let _ = manager.remove(&name);
        }
    }
    for (path, text) in &now {
        if seen.get(path) != Some(text) {
            apply(path, text, manager);
        }
    }
    now
}

/// A new or changed file.
fn apply(path: &Path, text: &str, manager: &Manager) {
    let earlier = manager.name_of_file(path);
    let config = match check(path, text) {
        Ok(config) => config,
        Err(e) => {
            tracing::error!("{e}");
            if earlier.is_none() {
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("pipeline");
                manager.broken(stem, path, &e);
            }
            return;
        }
    };
    if let Some(earlier) = earlier.filter(|n| *n != config.name) {
        let _ = manager.remove(&earlier);
    }
    let origin = Origin::File(path.to_owned());
    match manager.put(&config.name, origin, text.to_owned(), Target::Running) {
        Ok(true) => {
            tracing::info!(file = %path.display(), pipeline = %config.name, "Pipeline started.")
        }
        Ok(false) => {
            tracing::info!(file = %path.display(), pipeline = %config.name, "Pipeline file changed: restarted from its committed position.")
        }
        Err(e) => tracing::error!(file = %path.display(), "Pipeline not started: {e}"),
    }
}
