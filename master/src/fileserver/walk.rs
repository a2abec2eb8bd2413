//! The file lists of one saltenv: files, directories, empty directories and symlinks of all
//! its roots, merged and sorted, with the modification times of every directory read, so a
//! cached list can tell whether it is still current.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::Ignore;

#[derive(Debug, Default)]
pub struct Lists {
    pub files: Vec<String>,
    pub dirs: Vec<String>,
    pub empty_dirs: Vec<String>,
    /// Symlinks inside the roots whose target stays inside: relative path → link text.
    pub links: BTreeMap<String, String>,
    /// Every directory read, with its modification time then.
    stamps: Vec<(PathBuf, Option<SystemTime>)>,
}

impl Lists {
    /// Whether no directory read has changed since (an added, removed or renamed entry
    /// changes its directory's modification time).
    pub fn current(&self) -> bool {
        self.stamps
            .iter()
            .all(|(dir, mtime)| mtime_of(dir) == *mtime)
    }
}

fn mtime_of(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Walk `roots` (first root first; one relative path is listed once). With `follow`, a
/// directory reached through several symlinks is listed under each path, as Salt's
/// `os.walk(followlinks=True)` lists it; a link back to one of its own ancestors is listed
/// but not entered (Salt would descend until the path is too long).
pub fn walk(roots: &[PathBuf], ignore: &Ignore, follow: bool, ignore_links: bool) -> Lists {
    let mut files = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    let mut empty = BTreeSet::new();
    let mut links = BTreeMap::new();
    let mut stamps = Vec::new();
    for root in roots {
        stamps.push((root.clone(), mtime_of(root)));
        let Ok(croot) = root.canonicalize() else {
            continue;
        };
        // Each directory to read, with the real paths of the directories above it.
        let mut stack = vec![(root.clone(), String::new(), vec![croot.clone()])];
        while let Some((dir, prefix, ancestors)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            if dir != *root {
                stamps.push((dir.clone(), mtime_of(&dir)));
            }
            for entry in entries.flatten() {
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    continue; // not UTF-8: a minion could not name it
                };
                let abs = dir.join(&name);
                let rel = format!("{prefix}{name}");
                let Ok(lmeta) = std::fs::symlink_metadata(&abs) else {
                    continue;
                };
                let is_link = lmeta.file_type().is_symlink();
                if (is_link && ignore_links) || ignore.matches(&rel) {
                    continue;
                }
                let Ok(real) = abs.canonicalize() else {
                    continue; // a dangling symlink names nothing that can be served
                };
                if !real.starts_with(&croot) {
                    continue; // leaves the root: never listed, never served
                }
                if is_link {
                    if let Ok(text) = std::fs::read_link(&abs) {
                        links.insert(rel.clone(), text.to_string_lossy().into_owned());
                    }
                }
                if real.is_dir() {
                    if std::fs::read_dir(&abs).is_ok_and(|mut d| d.next().is_none()) {
                        empty.insert(rel.clone());
                    }
                    dirs.insert(rel.clone());
                    if (!is_link || follow) && !ancestors.contains(&real) {
                        let mut below = ancestors.clone();
                        below.push(real);
                        stack.push((abs, format!("{rel}/"), below));
                    }
                } else {
                    files.insert(rel);
                }
            }
        }
    }
    Lists {
        files: files.into_iter().collect(),
        dirs: dirs.into_iter().collect(),
        empty_dirs: empty.into_iter().collect(),
        links,
        stamps,
    }
}
