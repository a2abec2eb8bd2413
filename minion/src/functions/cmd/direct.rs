//! Simple file commands started without the shell in front of them.
//!
//! `cmd.run: touch /srv/app/.done` and `mkdir -p /srv/data` are as common in state trees as
//! the `test -e` conditions that guard them. `bash -c 'touch x'` (or dash's) starts the
//! shell, which finds `touch` on `PATH` and replaces itself with it: the program runs with
//! the same process id, streams, directory, user and limits, argv[0] as written. When the
//! command is one such program with literal words (see `inline::literal_words`), the shell
//! would read nothing at start (`inline::plain_environment`), and the program is one whose
//! work does not depend on what else the shell does on the way (it exports `_`, `SHLVL` and
//! `PWD` and orders the environment its own way), the minion starts the program itself, as
//! the shell would find it. The programs are the coreutils that change files and print
//! only their own errors: none of them prints its environment or starts another program.
//! Anything else about the command, a `PATH` the minion cannot read exactly as the shell
//! does (a relative or `%` entry, no `PATH` at all), or a name that does not resolve to an
//! executable ELF file where the shell would look first, leaves it to the shell.

use std::io::Read;
use std::path::{Path, PathBuf};

use nix::unistd::AccessFlags;

/// The programs started directly: none is a bash or dash builtin or keyword.
const PROGRAMS: &[&str] = &[
    "touch", "mkdir", "rmdir", "rm", "ln", "chmod", "chown", "chgrp", "cp", "mv",
];

/// The program the shell would execute for `words` (a command's literal words) and the
/// name it is listed under, given the `PATH` the shell starts with; `None` when the shell
/// should run the command.
pub(super) fn program(words: &[String], path: Option<&str>) -> Option<(PathBuf, &'static str)> {
    let first = words.first()?;
    let name = first.rsplit('/').next()?;
    let listed = PROGRAMS.iter().find(|p| **p == name)?;
    let file = if first.contains('/') {
        let p = PathBuf::from(first);
        p.is_absolute().then_some(p)?
    } else {
        search(name, path?)?
    };
    executable_elf(&file).then_some((file, listed))
}

/// The first existing `dir/name` along `path`, as the shell's search finds it; `None` when
/// an entry is not an absolute directory name the shell and the minion read alike.
fn search(name: &str, path: &str) -> Option<PathBuf> {
    for dir in path.split(':') {
        if !dir.starts_with('/') || dir.contains('%') {
            return None;
        }
        let candidate = Path::new(dir).join(name);
        if std::fs::symlink_metadata(&candidate).is_ok() {
            return Some(candidate);
        }
    }
    None
}

/// A regular file (through its links) this process may execute, starting with ELF's magic.
fn executable_elf(file: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(file) else {
        return false;
    };
    if !meta.is_file() || nix::unistd::access(file, AccessFlags::X_OK).is_err() {
        return false;
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    fn touch_bin() -> PathBuf {
        ["/usr/bin/touch", "/bin/touch"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .expect("touch is installed")
    }

    #[test]
    fn programs_are_found_where_the_shell_looks() {
        let real = touch_bin();
        let dir = real.parent().unwrap().to_str().unwrap().to_string();
        let d = tempfile::tempdir().unwrap();
        let tmp = d.path().to_str().unwrap();
        let got = program(&words(&["touch", "x"]), Some(&dir));
        assert_eq!(got, Some((real.clone(), "touch")));
        // An absolute name is taken as written; a relative one goes to the shell.
        let abs = real.to_str().unwrap();
        assert_eq!(
            program(&words(&[abs, "x"]), None),
            Some((real.clone(), "touch"))
        );
        assert_eq!(program(&words(&["./touch", "x"]), Some(&dir)), None);
        // Unlisted programs, builtins and empty commands go to the shell.
        for w in [&["env"][..], &["echo", "x"], &["test", "-e", "x"], &[]] {
            assert_eq!(program(&words(w), Some(&dir)), None, "{w:?}");
        }
        // No PATH, a relative or empty entry, or dash's `%` entries before the program.
        assert_eq!(program(&words(&["touch"]), None), None);
        for p in [
            format!(":{dir}"),
            format!("bin:{dir}"),
            format!("{tmp}%builtin:{dir}"),
        ] {
            assert_eq!(program(&words(&["touch"]), Some(&p)), None, "{p}");
        }
        // Entries after the one that holds the program are not read.
        assert!(program(&words(&["touch"]), Some(&format!("{dir}:relative"))).is_some());
        // What the first entry holds decides: a directory, a file not executable, a script
        // (the shell runs those itself) or a dangling link send the command to the shell.
        let first = d.path().join("first");
        std::fs::create_dir_all(&first).unwrap();
        let path = format!("{}:{dir}", first.display());
        assert!(program(&words(&["touch"]), Some(&path)).is_some());
        let shadow = first.join("touch");
        std::fs::create_dir(&shadow).unwrap();
        assert_eq!(program(&words(&["touch"]), Some(&path)), None);
        std::fs::remove_dir(&shadow).unwrap();
        std::fs::copy(&real, &shadow).unwrap();
        std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o644)).unwrap();
        // (root may execute a file only when some execute bit is set.)
        assert_eq!(program(&words(&["touch"]), Some(&path)), None);
        std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            program(&words(&["touch"]), Some(&path)),
            Some((shadow.clone(), "touch"))
        );
        std::fs::write(&shadow, "#!/bin/sh\nenv\n").unwrap();
        assert_eq!(program(&words(&["touch"]), Some(&path)), None);
        std::fs::remove_file(&shadow).unwrap();
        std::os::unix::fs::symlink(d.path().join("nowhere"), &shadow).unwrap();
        assert_eq!(program(&words(&["touch"]), Some(&path)), None);
        std::fs::remove_file(&shadow).unwrap();
        std::os::unix::fs::symlink(&real, &shadow).unwrap();
        assert_eq!(
            program(&words(&["touch"]), Some(&path)),
            Some((shadow, "touch"))
        );
    }
}
