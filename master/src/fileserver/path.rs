//! Turning a minion's requested path into a file inside a root, or nothing.
//!
//! Every rule here refuses rather than repairs: a path with a NUL byte, an absolute path, a
//! `..` component anywhere (Salt refuses any `../`), or an empty one names no file. A path
//! that passes is joined under a root and canonicalized; the result must still lie under the
//! root's own canonical path (a symlink that leaves the root names no file, whatever
//! `fileserver_followsymlinks` says), and be a regular file. Percent escapes are not decoded
//! (Salt does not decode them either): `%2e%2e` is a literal file name.

use std::path::{Path, PathBuf};

/// A requested `salt://` path split into its relative path and the `saltenv` its query
/// string names, if any (`top.sls?saltenv=dev`). A leading `|` marks a path whose `?` is part
/// of the name (Salt's escaped URLs).
pub fn split_query(path: &str) -> (&str, Option<&str>) {
    if let Some(literal) = path.strip_prefix('|') {
        return (literal, None);
    }
    let Some((path, query)) = path.split_once('?') else {
        return (path, None);
    };
    let saltenv = query
        .rsplit('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "saltenv")
        .map(|(_, v)| v);
    (path, saltenv)
}

/// The normalized relative form of a requested path, `None` when it is refused.
pub fn clean_relative(path: &str) -> Option<String> {
    if path.contains('\0') || path.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join("/"))
}

/// A saltenv name usable in place of `__env__` in a root's path: no separators, no dot-dirs.
pub fn plain_saltenv(saltenv: &str) -> bool {
    !saltenv.is_empty() && saltenv != "." && saltenv != ".." && !saltenv.contains(['/', '\0'])
}

/// Where `rel` (already [`clean_relative`]) lies under the canonical root `croot`, with its
/// metadata, when it is a regular file there and stays inside the root (as Salt's
/// `fileserver_followsymlinks: False` check does; Brine applies it always). Without a
/// symlink among `rel`'s components the joined path is already canonical (one `lstat` per
/// component); with one, the whole path is canonicalized and must stay under `croot`.
pub fn resolve_in_root(croot: &Path, rel: &str) -> Option<(PathBuf, std::fs::Metadata)> {
    let mut path = croot.to_path_buf();
    let mut parts = rel.split('/').peekable();
    while let Some(part) = parts.next() {
        path.push(part);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if meta.file_type().is_symlink() {
            let real = croot.join(rel).canonicalize().ok()?;
            if !real.starts_with(croot) {
                return None;
            }
            let meta = std::fs::metadata(&real).ok()?;
            return meta.is_file().then_some((real, meta));
        }
        if parts.peek().is_none() {
            return meta.is_file().then_some((path, meta));
        }
    }
    None
}

/// Whether canonical `real` lies under `root` (canonicalized here).
pub fn inside(root: &Path, real: &Path) -> bool {
    root.canonicalize().is_ok_and(|c| real.starts_with(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dangerous_paths_are_refused() {
        for bad in [
            "../etc/passwd",
            "../../etc/passwd",
            "a/../../etc/passwd",
            "a/../b",
            "..",
            "a/..",
            "/etc/passwd",
            "//etc/passwd",
            "top.sls\0.png",
            "",
            ".",
            "./",
        ] {
            assert_eq!(clean_relative(bad), None, "{bad:?}");
        }
        assert_eq!(clean_relative("a//b/./c").as_deref(), Some("a/b/c"));
        // Percent escapes are a literal name, never decoded into `..`.
        assert_eq!(
            clean_relative("%2e%2e/%2e%2e/etc/passwd").as_deref(),
            Some("%2e%2e/%2e%2e/etc/passwd")
        );
    }

    #[test]
    fn query_strings_name_a_saltenv() {
        assert_eq!(split_query("top.sls?saltenv=dev"), ("top.sls", Some("dev")));
        assert_eq!(split_query("a?b=c"), ("a", None));
        assert_eq!(split_query("|a?saltenv=x"), ("a?saltenv=x", None));
    }

    #[test]
    fn saltenvs_in_root_paths_are_plain_names() {
        assert!(plain_saltenv("dev"));
        for bad in ["", ".", "..", "a/b", "x\0"] {
            assert!(!plain_saltenv(bad));
        }
    }

    #[test]
    fn symlinks_that_leave_the_root_resolve_to_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let outside = tmp.path().join("secret");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(&outside, "secret").unwrap();
        std::fs::write(root.join("sub/in.txt"), "in").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out-link")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), root.join("up")).unwrap();
        std::os::unix::fs::symlink("sub/in.txt", root.join("in-link")).unwrap();
        let root = root.canonicalize().unwrap();
        let resolve = |rel: &str| resolve_in_root(&root, rel).map(|(p, _)| p);
        assert_eq!(resolve("out-link"), None);
        assert_eq!(resolve("up/secret"), None);
        assert_eq!(resolve("up/root/sub/in.txt"), Some(root.join("sub/in.txt")));
        assert_eq!(resolve("sub"), None, "a directory");
        assert_eq!(resolve("missing"), None);
        assert_eq!(resolve("sub/in.txt/x"), None, "below a file");
        let inside_link = resolve("in-link").unwrap();
        assert!(inside_link.ends_with("sub/in.txt"));
        assert_eq!(resolve("sub/in.txt"), Some(root.join("sub/in.txt")));
    }
}
