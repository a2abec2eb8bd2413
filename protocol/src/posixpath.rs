//! Python's `posixpath` on text paths: what Salt computes paths with, for messages and file
//! decisions that must come out as Salt's do.

/// `posixpath.normpath`: POSIX keeps exactly two leading slashes, three or more become one.
pub fn normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let initial = match path.len() - path.trim_start_matches('/').len() {
        0 => 0,
        2 => 2,
        _ => 1,
    };
    let mut parts: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        if comp.is_empty() || comp == "." {
            continue;
        }
        if comp != ".." || (initial == 0 && parts.is_empty()) || parts.last() == Some(&"..") {
            parts.push(comp);
        } else if !parts.is_empty() {
            parts.pop();
        }
    }
    let joined = format!("{}{}", "/".repeat(initial), parts.join("/"));
    if joined.is_empty() {
        ".".into()
    } else {
        joined
    }
}

/// `posixpath.abspath`, against the process's working directory.
pub fn abspath(path: &str) -> String {
    if path.starts_with('/') {
        return normpath(path);
    }
    let cwd = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into());
    normpath(&format!("{cwd}/{path}"))
}

/// `posixpath.dirname`.
pub fn dirname(path: &str) -> String {
    let head = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    if !head.is_empty() && head.chars().any(|c| c != '/') {
        head.trim_end_matches('/').to_string()
    } else {
        head.to_string()
    }
}

/// `posixpath.basename`.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `posixpath.split`.
pub fn split(path: &str) -> (String, String) {
    (dirname(path), basename(path).to_string())
}

/// `posixpath.join(a, b)`.
pub fn join(a: &str, b: &str) -> String {
    if b.starts_with('/') || a.is_empty() {
        b.to_string()
    } else if a.ends_with('/') {
        format!("{a}{b}")
    } else {
        format!("{a}/{b}")
    }
}

/// `os.path.realpath` (not strict: missing parts are kept as they are).
pub fn realpath(path: &str) -> String {
    let mut todo: std::collections::VecDeque<String> = abspath(path)
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect();
    let mut current = String::new();
    let mut links = 0;
    while let Some(comp) = todo.pop_front() {
        if comp == "." {
            continue;
        }
        if comp == ".." {
            current.truncate(current.rfind('/').unwrap_or(0));
            continue;
        }
        let next = format!("{current}/{comp}");
        match std::fs::read_link(&next) {
            Ok(target) if links < 40 => {
                links += 1;
                let target = target.to_string_lossy().into_owned();
                if target.starts_with('/') {
                    current.clear();
                }
                for part in target.split('/').rev().filter(|c| !c.is_empty()) {
                    todo.push_front(part.to_string());
                }
            }
            _ => current = next,
        }
    }
    if current.is_empty() {
        "/".into()
    } else {
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_come_out_as_pythons_posixpath_gives_them() {
        for (path, norm) in [
            ("", "."),
            ("a/../..", ".."),
            ("/../a", "/a"),
            ("//a//b/", "//a/b"),
            ("///a", "/a"),
            ("./a/./b/..", "a"),
            ("../../x", "../../x"),
        ] {
            assert_eq!(normpath(path), norm, "{path}");
        }
        assert_eq!(dirname("/a/b//c"), "/a/b");
        assert_eq!(dirname("//c"), "//");
        assert_eq!(dirname("c"), "");
        assert_eq!(basename("/a/b/"), "");
        assert_eq!(split("/a/b"), ("/a".into(), "b".into()));
        assert_eq!(join("/a", "b"), "/a/b");
        assert_eq!(join("/a/", "/b"), "/b");
    }
}
