//! The watched directory: every `*.yaml` / `*.yml` file is a pipeline. A new file starts its
//! pipeline, a changed one restarts it from its committed position (a file that no longer
//! loads leaves the running version alone, and says why), a removed one stops it. A file whose
//! pipeline's name is taken is tried again at every look until the name is free.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::manager::{check, same_origin, Manager, Origin, Refusal, Target};

/// What the watcher has seen.
#[derive(Default)]
pub(crate) struct Watched {
    /// The files seen, with their text.
    texts: BTreeMap<PathBuf, String>,
    /// Files whose pipeline's name was taken (tried again each time).
    refused: BTreeSet<PathBuf>,
}

/// The pipeline files of `dir` and their text; `None`: the directory cannot be read. A file
/// that does not read now (being written) keeps its earlier text.
fn files(dir: &Path, seen: &Watched) -> Option<BTreeMap<PathBuf, String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::error!(directory = %dir.display(), error = %e, "Cannot read the pipelines' directory.");
            return None;
        }
    };
    let mut now = BTreeMap::new();
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let pipeline = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        let hidden = (path.file_name())
            .and_then(|n| n.to_str())
            .is_none_or(|n| n.starts_with('.'));
        if !pipeline || hidden {
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                now.insert(path, text);
            }
            Err(_) => {
                if let Some(text) = seen.texts.get(&path) {
                    now.insert(path, text.clone());
                }
            }
        }
    }
    Some(now)
}

/// Looks at `dir` once and applies what changed since `seen`.
pub(crate) fn scan(dir: &Path, seen: &mut Watched, manager: &Manager) {
    let Some(now) = files(dir, seen) else { return };
    for path in seen.texts.keys().filter(|p| !now.contains_key(*p)) {
        if let Some(name) = manager.name_of_file(path) {
            tracing::info!(file = %path.display(), pipeline = %name, "Pipeline file removed: stopping it.");
            let _ = manager.remove(&name, false);
        }
    }
    seen.refused.retain(|p| now.contains_key(p));
    for (path, text) in &now {
        let retry = seen.refused.contains(path);
        if seen.texts.get(path) != Some(text) || retry {
            let quiet = retry && seen.texts.get(path) == Some(text);
            if apply(path, text, manager, quiet) {
                seen.refused.remove(path);
            } else {
                seen.refused.insert(path.clone());
            }
        }
    }
    seen.texts = now;
}

/// A new or changed file; `false`: its pipeline's name is taken (`quiet`: said before).
fn apply(path: &Path, text: &str, manager: &Manager, quiet: bool) -> bool {
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
            return true;
        }
    };
    let origin = Origin::File(path.to_owned());
    let name = config.name.as_str();
    // A name another file or the API has: this file waits, and its earlier pipeline runs on.
    if let Some(other) = manager.origin_of(name).filter(|o| !same_origin(o, &origin)) {
        if !quiet {
            let taken = super::manager::describe(&other);
            tracing::error!(file = %path.display(), "Pipeline `{name}` not started: the name comes from {taken}; it starts once the name is free");
        }
        return false;
    }
    if let Some(earlier) = earlier.filter(|n| n != name) {
        let _ = manager.remove(&earlier, false);
    }
    match manager.put(name, (origin, text.to_owned()), Target::Running, false) {
        Ok(true) => tracing::info!(file = %path.display(), pipeline = %name, "Pipeline started."),
        Ok(false) => {
            tracing::info!(file = %path.display(), pipeline = %name, "Pipeline file changed: restarted from its committed position.")
        }
        Err(Refusal::Conflict(e)) => {
            tracing::error!(file = %path.display(), "Pipeline not started: {e}");
            return false;
        }
        Err(e) => tracing::error!(file = %path.display(), "Pipeline not started: {e}"),
    }
    true
}
