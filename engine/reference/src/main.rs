//! `cargo run -p sluice-reference`: writes `docs/reference/` from the config types.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let reference = match sluice_reference::generate(&root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice-reference: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = root.join(sluice_reference::DIR);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("sluice-reference: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for (name, text) in &reference.files {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("sluice-reference: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    for key in &reference.undocumented {
        eprintln!("sluice-reference: `{key}` has no doc comment");
    }
    println!(
        "wrote {} files to {}",
        reference.files.len(),
        sluice_reference::DIR
    );
    ExitCode::SUCCESS
}
