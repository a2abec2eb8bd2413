//! What the differential tests share: a state tree on disk.

use std::path::{Path, PathBuf};

use brine_render::Loader;
use brine_state::high::SlsFile;
use brine_state::Tree;

/// A state tree on disk: `<dir>/<saltenv>/...`.
pub(crate) struct Dir(pub(crate) PathBuf);

impl Loader for Dir {
    fn load(&self, saltenv: &str, path: &str) -> Result<Option<String>, String> {
        match std::fs::read_to_string(self.0.join(saltenv).join(path)) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().into_string().unwrap();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if e.path().is_dir() {
            walk(&e.path(), &rel, out);
        } else {
            out.push(rel);
        }
    }
}

impl Tree for Dir {
    fn sls_names(&self, saltenv: &str) -> Option<Vec<String>> {
        let root = self.0.join(saltenv);
        if !root.is_dir() {
            return None;
        }
        let mut files = Vec::new();
        walk(&root, "", &mut files);
        Some(brine_state::high::sls_names_of(&files))
    }

    fn sls_file(&self, sls: &str, saltenv: &str) -> Option<SlsFile> {
        brine_state::high::sls_file_in(sls, |rel| self.0.join(saltenv).join(rel).is_file())
    }
}
