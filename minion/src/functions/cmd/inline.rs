//! Conditions the shell answers itself, answered without starting it.
//!
//! `unless: test -e /etc/app.conf` and `onlyif: [ -d /srv/data ]` are the most common
//! checks in state trees, and run on every state run. `bash -c 'test -e x'` (or dash's)
//! runs its `test` builtin in the shell's own process: nothing is started but the shell,
//! nothing is printed, and the exit status is all there is to see. When the command is one
//! plain `test`/`[` with literal words, the options give it nothing the shell would read at
//! start (no `BASH_ENV`, `ENV`, `SHELLOPTS`, exported functions, ...), it runs as the
//! minion's own user and its caller never shows a process id, the minion computes that exit
//! status as the shell's builtin does. Everything else, including every form the builtin
//! would answer with an error message, goes to the shell.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use nix::unistd::AccessFlags;

/// The shells whose `test` builtin is answered here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shell {
    Bash,
    Dash,
}

impl Shell {
    /// The shell a path starts (`/bin/sh` is whichever it links to).
    pub(super) fn of(path: &str) -> Option<Shell> {
        let real = std::fs::canonicalize(path).ok()?;
        match real.file_name()?.to_str()? {
            "bash" => Some(Shell::Bash),
            "dash" => Some(Shell::Dash),
            _ => None,
        }
    }
}

/// Environment variables a starting shell reads that could make it print or run anything
/// before the command (startup files, options), or make one of `commands` something else
/// (an exported function of that name; other exported functions are only defined).
fn shell_reads(name: &str, commands: &[&str]) -> bool {
    matches!(
        name,
        "BASH_ENV" | "ENV" | "SHELLOPTS" | "BASHOPTS" | "BASH_XTRACEFD" | "POSIXLY_CORRECT"
    ) || name
        .strip_prefix("BASH_FUNC_")
        .and_then(|f| f.strip_suffix("%%"))
        .is_some_and(|f| commands.contains(&f))
}

/// Whether an environment (its variables' names) leaves the shell's start plain and the
/// `commands` what their names say.
pub(super) fn plain_environment<'a>(
    mut names: impl Iterator<Item = &'a str>,
    commands: &[&str],
) -> bool {
    !names.any(|n| shell_reads(n, commands))
}

/// The words of a command made only of literal words (unquoted safe characters, single
/// quotes, double quotes without expansions), separated by blanks; `None` for anything the
/// shell would expand, redirect, chain or treat as syntax.
pub(super) fn literal_words(cmd: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = cmd.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut word = String::new();
        let mut quoted = false;
        while let Some(&c) = chars.peek() {
            match c {
                ' ' | '\t' => break,
                '\'' => {
                    chars.next();
                    quoted = true;
                    loop {
                        match chars.next()? {
                            '\'' => break,
                            '\n' | '\0' => return None,
                            c => word.push(c),
                        }
                    }
                }
                '"' => {
                    chars.next();
                    quoted = true;
                    loop {
                        match chars.next()? {
                            '"' => break,
                            '$' | '`' | '\\' | '\n' | '\0' => return None,
                            c => word.push(c),
                        }
                    }
                }
                c if c.is_ascii_alphanumeric() || "_./,:@%+=!-".contains(c) => {
                    chars.next();
                    word.push(c);
                }
                _ => {
                    chars.next();
                    // Brackets are plain words only on their own (`[` alone is no pattern).
                    let alone = word.is_empty()
                        && !quoted
                        && matches!(chars.peek(), None | Some(' ' | '\t'));
                    if alone && matches!(c, '[' | ']') {
                        word.push(c);
                    } else {
                        return None;
                    }
                }
            }
        }
        words.push(word);
    }
    Some(words)
}

/// The exit status of `words` (a command's literal words) when they are one `test` or `[`
/// the shell's builtin answers without a message; relative paths are taken from `cwd`.
pub(super) fn test_status(words: &[String], shell: Shell, cwd: &Path) -> Option<i64> {
    let (first, rest) = words.split_first()?;
    let args: &[String] = match first.as_str() {
        "test" => rest,
        "[" => match rest.split_last() {
            Some((last, inner)) if last == "]" => inner,
            _ => return None,
        },
        _ => return None,
    };
    let t = Test { shell, cwd };
    let truth = t.eval(args)?;
    Some(if truth { 0 } else { 1 })
}

struct Test<'a> {
    shell: Shell,
    cwd: &'a Path,
}

impl Test<'_> {
    /// POSIX's rules by argument count, the forms bash and dash agree on.
    fn eval(&self, args: &[String]) -> Option<bool> {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        match a.as_slice() {
            [] => Some(false),
            [x] => Some(!operand(x)?.is_empty()),
            ["!", x] => Some(operand(x)?.is_empty()),
            [op, x] => self.unary(op, operand(x)?),
            ["!", op, x] if !is_binary(op) => Some(!self.unary(op, operand(x)?)?),
            [x, op, y] => self.binary(operand(x)?, op, operand(y)?),
            ["!", x, op, y] => Some(!self.binary(operand(x)?, op, operand(y)?)?),
            _ => None,
        }
    }

    fn unary(&self, op: &str, x: &str) -> Option<bool> {
        if matches!(op, "-n" | "-z") {
            return Some((op == "-n") != x.is_empty());
        }
        let path = self.path(x)?;
        let stat = || std::fs::metadata(&path).ok();
        Some(match op {
            "-e" => stat().is_some(),
            "-a" if self.shell == Shell::Bash => stat().is_some(),
            "-f" => stat().is_some_and(|m| m.is_file()),
            "-d" => stat().is_some_and(|m| m.is_dir()),
            "-s" => stat().is_some_and(|m| m.len() > 0),
            "-b" => stat().is_some_and(|m| m.file_type().is_block_device()),
            "-c" => stat().is_some_and(|m| m.file_type().is_char_device()),
            "-p" => stat().is_some_and(|m| m.file_type().is_fifo()),
            "-S" => stat().is_some_and(|m| m.file_type().is_socket()),
            "-u" => stat().is_some_and(|m| m.mode() & 0o4000 != 0),
            "-g" => stat().is_some_and(|m| m.mode() & 0o2000 != 0),
            "-k" => stat().is_some_and(|m| m.mode() & 0o1000 != 0),
            "-L" | "-h" => std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()),
            "-r" => access(&path, AccessFlags::R_OK),
            "-w" => access(&path, AccessFlags::W_OK),
            "-x" => access(&path, AccessFlags::X_OK),
            _ => return None,
        })
    }

    fn binary(&self, x: &str, op: &str, y: &str) -> Option<bool> {
        let int = |s: &str| -> Option<i64> {
            (!s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())?
        };
        Some(match op {
            "=" => x == y,
            "==" if self.shell == Shell::Bash => x == y,
            "!=" => x != y,
            "-eq" => int(x)? == int(y)?,
            "-ne" => int(x)? != int(y)?,
            "-lt" => int(x)? < int(y)?,
            "-le" => int(x)? <= int(y)?,
            "-gt" => int(x)? > int(y)?,
            "-ge" => int(x)? >= int(y)?,
            _ => return None,
        })
    }

    /// The file a test names; the shells read `/dev/fd/N` and `/dev/std*` specially.
    fn path(&self, x: &str) -> Option<std::path::PathBuf> {
        if x.starts_with("/dev/fd/") || x.starts_with("/dev/std") {
            return None;
        }
        if x.is_empty() {
            // stat("") fails: every file test of an empty name is false.
            return Some(std::path::PathBuf::new());
        }
        Some(self.cwd.join(x))
    }
}

/// An operand both shells read as a plain string (not one of the test's own operators,
/// which their parsers may take as syntax in some positions).
fn operand(x: &str) -> Option<&str> {
    let syntax = x.starts_with('-') || matches!(x, "!" | "(" | ")" | "=" | "==" | "!=");
    (!syntax).then_some(x)
}

/// Operators the shells read between two operands (`-a` and `-o` join them there).
fn is_binary(op: &str) -> bool {
    matches!(
        op,
        "=" | "=="
            | "!="
            | "-eq"
            | "-ne"
            | "-lt"
            | "-le"
            | "-gt"
            | "-ge"
            | "-nt"
            | "-ot"
            | "-ef"
            | "-a"
            | "-o"
    )
}

/// `eaccess`, as bash calls it for `-r`/`-w`/`-x`: the effective ids (root reads and writes
/// everything, and executes what has an execute bit or is a directory).
fn access(path: &Path, mode: AccessFlags) -> bool {
    nix::unistd::eaccess(path, mode).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn words(cmd: &str) -> Option<Vec<String>> {
        literal_words(cmd)
    }

    #[test]
    fn only_literal_words_are_read() {
        assert_eq!(
            words("  test  -e\t/srv/a-b_c.d,e:f@g%h+i=j  ").unwrap(),
            ["test", "-e", "/srv/a-b_c.d,e:f@g%h+i=j"]
        );
        assert_eq!(
            words(r#"[ ! -f 'a b'"c d" ]"#).unwrap(),
            ["[", "!", "-f", "a bc d", "]"]
        );
        assert_eq!(words("test '' = \"\"").unwrap(), ["test", "", "=", ""]);
        // No history expansion in a shell that is not interactive.
        assert_eq!(words("test a!b != \"!\"").unwrap(), ["test", "a!b", "!=", "!"]);
        for shell_syntax in [
            "test -e /a; rm x",
            "test -e /a && b",
            "test -e /a | b",
            "test -e /a > f",
            "test -e $HOME",
            "test -e \"$HOME\"",
            "test -e `id`",
            "test -e ~/x",
            "test -e /a*",
            "test -e /a[b]",
            "test -e /a\\ b",
            "test -e /a # comment",
            "test -e /a\ntrue",
            "test -e {a,b}",
            "test -e (a)",
            "test -e 'unterminated",
        ] {
            assert_eq!(words(shell_syntax), None, "{shell_syntax:?}");
        }
    }

    /// Every condition answered here gets the exit status bash and dash give it, on files of
    /// every kind; the forms left to the shell include each one that makes it complain.
    #[test]
    fn answers_are_the_shells() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::write(p.join("file"), "x").unwrap();
        std::fs::write(p.join("empty"), "").unwrap();
        std::fs::write(p.join("exec"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p.join("exec"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(p.join("suid"), "x").unwrap();
        std::fs::set_permissions(p.join("suid"), std::fs::Permissions::from_mode(0o6000))
            .unwrap();
        std::fs::create_dir(p.join("dir")).unwrap();
        std::fs::set_permissions(p.join("dir"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        std::os::unix::fs::symlink("file", p.join("link")).unwrap();
        std::os::unix::fs::symlink("nowhere", p.join("dangling")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(p.join("fifo"))
            .status()
            .unwrap();
        assert!(fifo.success());
        let names = [
            "file", "empty", "exec", "suid", "dir", "link", "dangling", "fifo", "missing",
        ];
        let mut cmds: Vec<String> = Vec::new();
        for op in [
            "-e", "-a", "-f", "-d", "-s", "-b", "-c", "-p", "-S", "-u", "-g", "-k", "-L", "-h",
            "-r", "-w", "-x", "-n", "-z", "-t", "-O", "-q",
        ] {
            for name in names.iter().chain(&["/dev/null", "''", "/dev/stdin"]) {
                cmds.push(format!("test {op} {name}"));
                cmds.push(format!("[ ! {op} {name} ]"));
                cmds.push(format!("[ {op} {name}"));
            }
        }
        for (x, y) in [("a", "a"), ("a", "b"), ("''", "''"), ("12", "012"), ("3", "x")] {
            for op in [
                "=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-a", "-o",
            ] {
                cmds.push(format!("test {x} {op} {y}"));
                cmds.push(format!("[ ! {x} {op} {y} ]"));
            }
        }
        for other in [
            "test", "[ ]", "test x", "test ''", "test ! ''", "test ! x", "test -e", "test !",
            "test x y", "test x y z w", "test -e file -a -e dir", "test ! ! x",
        ] {
            cmds.push(other.to_string());
        }
        let mut answered = 0;
        for (shell_path, shell) in [("/bin/bash", Shell::Bash), ("/bin/dash", Shell::Dash)] {
            if !Path::new(shell_path).exists() {
                continue;
            }
            for cmd in &cmds {
                let Some(ours) = test_status(&literal_words(cmd).expect(cmd), shell, p) else {
                    continue;
                };
                answered += 1;
                let out = std::process::Command::new(shell_path)
                    .args(["-c", cmd])
                    .current_dir(p)
                    .output()
                    .unwrap();
                assert_eq!(
                    (ours, String::from_utf8_lossy(&out.stderr).to_string()),
                    (i64::from(out.status.code().unwrap()), String::new()),
                    "{shell_path} -c {cmd:?}"
                );
            }
        }
        assert!(answered > 300, "{answered}");
        for left in [
            "test -t 1",
            "test -O file",
            "test 3 -eq x",
            "test x y",
            "[ -e file",
            "test -e file -a -e dir",
            "test -e /dev/stdin",
            "echo -e file",
        ] {
            assert_eq!(
                test_status(&literal_words(left).unwrap(), Shell::Bash, p),
                None,
                "{left}"
            );
        }
    }

    #[test]
    fn shells_and_environments() {
        assert_eq!(Shell::of("/bin/bash"), Some(Shell::Bash));
        assert_eq!(Shell::of("/nonexistent/bash"), None);
        assert_eq!(Shell::of("/usr/bin/env"), None);
        let conditions = ["test", "["];
        assert!(plain_environment(["PATH", "HOME", "LANG"].into_iter(), &conditions));
        for name in ["BASH_ENV", "ENV", "SHELLOPTS", "BASH_FUNC_test%%", "BASH_FUNC_[%%"] {
            assert!(
                !plain_environment(["PATH", name].into_iter(), &conditions),
                "{name}"
            );
        }
        // Other exported functions are only defined when bash starts.
        assert!(plain_environment(
            ["BASH_FUNC_run_binary%%", "BASH_FUNC_test%"].into_iter(),
            &conditions
        ));
        assert!(!plain_environment(
            ["BASH_FUNC_touch%%"].into_iter(),
            &["touch"]
        ));
    }
}
