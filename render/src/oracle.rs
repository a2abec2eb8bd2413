//! Real Salt as the oracle of the differential tests: the render corpus, the highstate
//! compiler (`brine-state`) and the pillar compiler (`brine-master`) each run a script with
//! Salt 3007's Python from the repository's `.venv-salt3007` (made by `scripts/salt-venvs`)
//! and compare what it prints with Brine's result.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python of the repository's `.venv-salt3007`, if it has been made.
pub fn salt_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-salt3007/bin/python");
    python.exists().then_some(python)
}

/// What `python script arg` printed to stdout with real Salt's Python. `None` when the venv
/// is missing and the caller should skip; under `CI=true` a missing venv panics instead, and
/// a script that fails always does.
pub fn run(script: &Path, arg: &Path) -> Option<Vec<u8>> {
    run_with(script, &[arg])
}

/// [`run`] with several arguments.
pub fn run_with(script: &Path, args: &[&Path]) -> Option<Vec<u8>> {
    let Some(python) = salt_python() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real-Salt venv .venv-salt3007 is missing"
        );
        eprintln!("skipped: the real-Salt venv .venv-salt3007 is missing");
        return None;
    };
    let output = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(output.stdout)
}
