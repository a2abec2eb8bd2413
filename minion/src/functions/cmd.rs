//! The `cmd` execution module: run shell commands (`cmd.run`, `cmd.run_all`, ...).
//!
//! Follows Salt's `cmdmod._run`: default cwd is the user's home, commands are split
//! with shlex unless `python_shell` (true by default for published jobs), the locale
//! is reset to C, output is right-stripped, and the job retcode is the exit code.
//! Not supported (accepted and ignored): `template`, `umask`, `output_encoding`,
//! `log_callback`, `use_vt`, `password`, `encoded_cmd`, `saltenv`, `bg`.
//!
//! A plain `test`/`[` condition run through bash or dash by a call that shows no process id
//! (`cmd.retcode`, the states' `unless`/`onlyif`, `cmd.run`) is answered as the shell's
//! builtin answers it, without starting the shell (`inline`); one plain file command
//! (`touch`, `mkdir`, `rm`, ...) run through either shell starts the program the shell would
//! replace itself with, without the shell (`direct`).
//!
//! `cmd.script` takes its script from the master (`salt://`, rendered when a template is
//! asked for), over `http://`/`https://` (fetched into the cache's `extrn_files` on every
//! call, as Salt does) or from this machine's disk.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmpv::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::args::{
    is_true, py_float_of, py_repr, py_str, shlex_split, split_input, Bound, Signature,
};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::payload::map;

mod direct;
mod inline;

/// The shell used when a call names none: the minion's `SHELL` environment variable, else
/// `/bin/sh`, as Salt's `shell` grain and `cmd` module take it (a minion under systemd has no
/// `SHELL`; one started from a login shell runs commands in that shell).
pub fn default_shell() -> &'static str {
    static SHELL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        std::env::var("SHELL")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "/bin/sh".to_string())
    })
}

/// The functions of the `cmd` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    HasExec,
    Retcode,
    Run,
    RunAll,
    RunStderr,
    RunStdout,
    Script,
    ScriptRetcode,
    Shell,
    Which,
    WhichBin,
    Shells,
    ShellInfo,
    ExecCode,
    ExecCodeAll,
    RunBg,
    Tty,
}

const RUN_PARAMS: &[&str] = &[
    "cmd",
    "cwd",
    "stdin",
    "runas",
    "group",
    "shell",
    "python_shell",
    "env",
    "clean_env",
    "template",
    "rstrip",
    "umask",
    "output_encoding",
    "output_loglevel",
    "log_callback",
    "hide_output",
    "timeout",
    "reset_system_locale",
    "ignore_retcode",
    "saltenv",
    "use_vt",
    "redirect_stderr",
    "bg",
    "password",
    "encoded_cmd",
    "raise_err",
    "prepend_path",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
];
const RUN_ALL_PARAMS: &[&str] = &[
    "cmd",
    "cwd",
    "stdin",
    "runas",
    "group",
    "shell",
    "python_shell",
    "env",
    "clean_env",
    "template",
    "rstrip",
    "umask",
    "output_encoding",
    "output_loglevel",
    "log_callback",
    "hide_output",
    "timeout",
    "reset_system_locale",
    "ignore_retcode",
    "saltenv",
    "use_vt",
    "redirect_stderr",
    "password",
    "encoded_cmd",
    "prepend_path",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
];
const RETCODE_PARAMS: &[&str] = &[
    "cmd",
    "cwd",
    "stdin",
    "runas",
    "group",
    "shell",
    "python_shell",
    "env",
    "clean_env",
    "template",
    "umask",
    "output_encoding",
    "output_loglevel",
    "log_callback",
    "timeout",
    "reset_system_locale",
    "ignore_retcode",
    "saltenv",
    "use_vt",
    "password",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
];
const RUN_STD_PARAMS: &[&str] = &[
    "cmd",
    "cwd",
    "stdin",
    "runas",
    "group",
    "shell",
    "python_shell",
    "env",
    "clean_env",
    "template",
    "rstrip",
    "umask",
    "output_encoding",
    "output_loglevel",
    "log_callback",
    "hide_output",
    "timeout",
    "reset_system_locale",
    "ignore_retcode",
    "saltenv",
    "use_vt",
    "password",
    "prepend_path",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
];
const SHELL_PARAMS: &[&str] = &[
    "cmd",
    "cwd",
    "stdin",
    "runas",
    "group",
    "shell",
    "env",
    "clean_env",
    "template",
    "rstrip",
    "umask",
    "output_encoding",
    "output_loglevel",
    "log_callback",
    "hide_output",
    "timeout",
    "reset_system_locale",
    "ignore_retcode",
    "saltenv",
    "use_vt",
    "bg",
    "password",
    "prepend_path",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
];

/// The option list every command runner shares, appended to its docstring.
macro_rules! with_options {
    ($doc:literal) => {
        concat!(
            $doc,
            "Options: cwd (default: the user's home), stdin, runas, shell (default /bin/sh),
    python_shell (run through the shell; default True for published jobs),
    env (a dict, or a list of dicts), clean_env, rstrip, hide_output, timeout
    (seconds; the process group is killed), reset_system_locale, ignore_retcode,
    prepend_path, success_retcodes, success_stdout, success_stderr.
    "
        )
    };
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::HasExec,
        Fun::Retcode,
        Fun::Run,
        Fun::RunAll,
        Fun::RunStderr,
        Fun::RunStdout,
        Fun::Script,
        Fun::ScriptRetcode,
        Fun::Shell,
        Fun::Which,
        Fun::WhichBin,
        Fun::Shells,
        Fun::ShellInfo,
        Fun::ExecCode,
        Fun::ExecCodeAll,
        Fun::RunBg,
        Fun::Tty,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::HasExec => (
                "cmd.has_exec",
                "has_exec",
                Signature::new(&["cmd"], 1, false, false),
                "
    Return True if the given executable is found on the PATH.

    CLI Example:

        salt '*' cmd.has_exec cat
    ",
            ),
            Fun::Retcode => (
                "cmd.retcode",
                "retcode",
                Signature::new(RETCODE_PARAMS, 1, false, true),
                with_options!(
                    "
    Run a command and return only its exit code.

    CLI Example:

        salt '*' cmd.retcode 'test -f /etc/hosts'
    "
                ),
            ),
            Fun::Run => (
                "cmd.run",
                "run",
                Signature::new(RUN_PARAMS, 1, false, true),
                with_options!(
                    "
    Run a command and return its output, stdout and stderr merged, with trailing
    whitespace removed. The job retcode is the command's exit code.

    CLI Example:

        salt '*' cmd.run 'ls -l /etc' cwd=/tmp
    "
                ),
            ),
            Fun::RunAll => (
                "cmd.run_all",
                "run_all",
                Signature::new(RUN_ALL_PARAMS, 1, false, true),
                with_options!(
                    "
    Run a command and return a dict with its pid, retcode, stdout and stderr.

    CLI Example:

        salt '*' cmd.run_all 'ls /nonexistent'
    "
                ),
            ),
            Fun::RunStderr => (
                "cmd.run_stderr",
                "run_stderr",
                Signature::new(RUN_STD_PARAMS, 1, false, true),
                with_options!(
                    "
    Run a command and return only its standard error.

    CLI Example:

        salt '*' cmd.run_stderr 'ls /nonexistent'
    "
                ),
            ),
            Fun::RunStdout => (
                "cmd.run_stdout",
                "run_stdout",
                Signature::new(RUN_STD_PARAMS, 1, false, true),
                with_options!(
                    "
    Run a command and return only its standard output.

    CLI Example:

        salt '*' cmd.run_stdout 'ls -l /etc'
    "
                ),
            ),
            Fun::Script | Fun::ScriptRetcode => {
                let retcode = self == Fun::ScriptRetcode;
                (
                    if retcode {
                        "cmd.script_retcode"
                    } else {
                        "cmd.script"
                    },
                    if retcode { "script_retcode" } else { "script" },
                    Signature::new(SCRIPT_PARAMS, 1, false, true),
                    if retcode {
                        "
    Run a script as cmd.script does and return only its exit code. The script is rendered
    with the jinja template engine unless template is set otherwise.

    CLI Example:

        salt '*' cmd.script_retcode salt://scripts/check.sh
    "
                    } else {
                        "
    Fetch a script from the master (salt://) or this minion's disk and run it with its
    arguments: it is written to a temporary file (in cwd when given), run and removed.
    Returns pid, retcode, stdout and stderr; when the script cannot be fetched, retcode 1
    and cache_error True.

    source
        The script: salt://path or a local path.
    args
        Its arguments, a string (split as a shell would) or a list.
    template
        Render the script with this engine first (jinja).
    cwd, stdin, runas, shell, python_shell, env, umask, timeout, hide_output,
    reset_system_locale, saltenv, success_retcodes, success_stdout, success_stderr
        As for cmd.run_all.

    CLI Example:

        salt '*' cmd.script salt://scripts/runme.sh
        salt '*' cmd.script salt://scripts/runme.sh 'arg1 arg2 \"arg 3\"'
    "
                    },
                )
            }
            Fun::Shell => (
                "cmd.shell",
                "shell",
                Signature::new(SHELL_PARAMS, 1, false, true),
                with_options!(
                    "
    Run a command through the shell (python_shell=True) and return its output.

    CLI Example:

        salt '*' cmd.shell 'echo $HOME | wc -c'
    "
                ),
            ),
            Fun::Which => (
                "cmd.which",
                "which",
                Signature::new(&["cmd"], 1, false, false),
                "
    Return the full path of the given executable found on the PATH, or None.

    CLI Example:

        salt '*' cmd.which cat
    ",
            ),
            Fun::WhichBin => (
                "cmd.which_bin",
                "which_bin",
                Signature::new(&["cmds"], 1, false, false),
                "
    Return the full path of the first of the given executables found on the PATH,
    or None when there is none.

    CLI Example:

        salt '*' cmd.which_bin '[pip3, pip]'
    ",
            ),
            Fun::Shells => (
                "cmd.shells",
                "shells",
                Signature::NONE,
                "
    Return the login shells this machine lists in /etc/shells.

    CLI Example:

        salt '*' cmd.shells
    ",
            ),
            Fun::ShellInfo => (
                "cmd.shell_info",
                "shell_info",
                Signature::new(&["shell", "list_modules"], 1, false, false),
                "
    Report whether a shell or script interpreter (bash, zsh, tcsh, perl, python,
    ruby, php, ...) is installed: its path, its version as it prints it
    (version_raw) and its version as up to three numbers (version). installed is
    True, False, or None when the version could not be read; an error key says
    what went wrong. list_modules is accepted for powershell and ignored.

    CLI Example:

        salt '*' cmd.shell_info bash
    ",
            ),
            Fun::ExecCode | Fun::ExecCodeAll => {
                let all = self == Fun::ExecCodeAll;
                (
                    if all {
                        "cmd.exec_code_all"
                    } else {
                        "cmd.exec_code"
                    },
                    if all { "exec_code_all" } else { "exec_code" },
                    Signature::new(&["lang", "code", "cwd", "args"], 2, false, true),
                    if all {
                        "
    Write the code to a temporary file and run it with the given interpreter
    (python3, perl, ruby, ...), with args (a string or a list) after the file.
    Returns pid, retcode, stdout and stderr. The options of cmd.run_all apply,
    except python_shell.

    CLI Example:

        salt '*' cmd.exec_code_all python3 'print(1 + 1)'
        salt '*' cmd.exec_code_all perl 'print \"@ARGV\\n\"' args='[a, b]'
    "
                    } else {
                        "
    Write the code to a temporary file, run it with the given interpreter
    (python3, perl, ruby, ...) and return its standard output. args (a string or
    a list) come after the file. The options of cmd.run_all apply, except
    python_shell.

    CLI Example:

        salt '*' cmd.exec_code python3 'print(1 + 1)'
    "
                    },
                )
            }
            Fun::RunBg => (
                "cmd.run_bg",
                "run_bg",
                Signature::new(RUN_BG_PARAMS, 1, false, true),
                "
    Start a command and return at once with its pid; it keeps running on its own,
    its output going where the minion's goes. Its exit code is not waited for.
    Options: cwd, runas, shell, python_shell, env, clean_env, reset_system_locale,
    prepend_path, as for cmd.run.

    CLI Example:

        salt '*' cmd.run_bg 'sleep 600; touch /tmp/done'
    ",
            ),
            Fun::Tty => (
                "cmd.tty",
                "tty",
                Signature::new(&["device", "echo"], 1, false, false),
                "
    Write a message to a terminal: /dev/ttyN for ttyN, /dev/pts/N for ptsN.

    CLI Example:

        salt '*' cmd.tty pts3 'Hello there'
    ",
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        match self {
            Fun::Which => {
                Ok(which(&py_str(b.get("cmd").unwrap_or(&Value::Nil)))
                    .map_or(Value::Nil, Value::from))
            }
            Fun::HasExec => Ok(Value::Boolean(
                which(&py_str(b.get("cmd").unwrap_or(&Value::Nil))).is_some(),
            )),
            Fun::Run | Fun::Shell => {
                let mut opts = RunOpts::from_bound(b, self == Fun::Shell)?;
                opts.merge_stderr = b.get("redirect_stderr").is_none_or(is_true_v);
                opts.pid_unseen = true;
                let out = execute(&opts).await?;
                st.retcode = out.job_retcode(&opts);
                if out.retcode != 0
                    && !opts.ignore_retcode
                    && b.get("raise_err").is_some_and(is_true_v)
                {
                    return Err(FnError::Execution(out.stdout));
                }
                Ok(Value::from(if opts.hide_output {
                    String::new()
                } else {
                    out.stdout
                }))
            }
            Fun::RunAll => run_all(b, st).await,
            Fun::WhichBin => Ok(which_bin(b.get("cmds").unwrap_or(&Value::Nil))),
            Fun::Shells => Ok(Value::Array(
                shells().into_iter().map(Value::from).collect(),
            )),
            Fun::ShellInfo => shell_info(b.get("shell").unwrap_or(&Value::Nil)).await,
            Fun::ExecCode => {
                let ret = exec_code_all(b, st).await?;
                Ok(brine_protocol::payload::get(&ret, "stdout")
                    .cloned()
                    .unwrap_or(Value::Nil))
            }
            Fun::ExecCodeAll => exec_code_all(b, st).await,
            Fun::RunBg => run_bg(b),
            Fun::Tty => tty(b),
            Fun::Retcode => {
                let mut opts = RunOpts::from_bound(b, false)?;
                opts.merge_stderr = true;
                opts.pid_unseen = true;
                let out = execute(&opts).await?;
                st.retcode = out.job_retcode(&opts);
                Ok(Value::from(out.retcode))
            }
            Fun::Script | Fun::ScriptRetcode => {
                let out = script(ctx, b, self == Fun::ScriptRetcode, st).await?;
                if self == Fun::ScriptRetcode {
                    return Ok(brine_protocol::payload::get(&out, "retcode")
                        .cloned()
                        .unwrap_or(Value::from(1)));
                }
                Ok(out)
            }
            Fun::RunStdout | Fun::RunStderr => {
                let mut opts = RunOpts::from_bound(b, false)?;
                opts.pid_unseen = true;
                let out = execute(&opts).await?;
                st.retcode = out.job_retcode(&opts);
                let text = if self == Fun::RunStdout {
                    out.stdout
                } else {
                    out.stderr
                };
                Ok(Value::from(if opts.hide_output {
                    String::new()
                } else {
                    text
                }))
            }
        }
    }
}

/// `cmd.run_all` on bound arguments.
async fn run_all(b: &Bound, st: &mut CallState) -> Result<Value, FnError> {
    let mut opts = RunOpts::from_bound(b, false)?;
    opts.merge_stderr = b.get("redirect_stderr").is_some_and(is_true_v);
    let out = execute(&opts).await?;
    st.retcode = out.job_retcode(&opts);
    Ok(out.into_map(opts.hide_output))
}

/// The name Python gives a function of Salt's `cmdmod` in its `TypeError`s.
const CMDMOD: &str = "salt.loaded.int.module.cmdmod";

/// `salt.utils.path.which_bin`: a string is one name, a list its items, a dict its keys;
/// anything else finds nothing.
fn which_bin(cmds: &Value) -> Value {
    let names: Vec<String> = match cmds {
        Value::String(_) => vec![py_str(cmds)],
        Value::Array(items) => items.iter().map(py_str).collect(),
        Value::Map(entries) => entries.iter().map(|(k, _)| py_str(k)).collect(),
        _ => Vec::new(),
    };
    names
        .iter()
        .find_map(|name| which(name))
        .map_or(Value::Nil, Value::from)
}

/// The shells listed in /etc/shells (none when it cannot be read).
fn shells() -> Vec<String> {
    let text = match std::fs::read("/etc/shells") {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::error!("File '/etc/shells' was not found");
            }
            return Vec::new();
        }
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// How `cmd.shell_info` asks each shell it knows for its version: the pattern its output is
/// searched with (case-insensitively) and the command.
const SHELL_VERSIONS: &[(&str, &str, &[&str])] = &[
    ("bash", r"version (\d\S*)", &["bash", "--version"]),
    (
        "bash-test-error",
        r"versioZ ([-\w.]+)",
        &["bash", "--version"],
    ),
    ("bash-test-env", r"(HOME=.*)", &["bash", "-c", "declare"]),
    ("zsh", r"^zsh (\d\S*)", &["zsh", "--version"]),
    ("tcsh", r"^tcsh (\d\S*)", &["tcsh", "--version"]),
    ("cmd", r"Version ([\d.]+)", &["cmd.exe", "/C", "ver"]),
    (
        "powershell",
        r"PSVersion\s+(\d\S*)",
        &["powershell", "-NonInteractive", "$PSVersionTable"],
    ),
    (
        "perl",
        r"^(\d\S*)",
        &["perl", "-e", "printf \"%vd\n\", $^V;"],
    ),
    ("python", r"^Python (\d\S*)", &["python", "-V"]),
    ("ruby", r"^ruby (\d\S*)", &["ruby", "-v"]),
    ("php", r"^PHP (\d\S*)", &["php", "-v"]),
];

/// `cmd.shell_info`: run the shell's version command (output and errors together, the
/// minion's own environment, 10 seconds at most) and read its version.
async fn shell_info(shell: &Value) -> Result<Value, FnError> {
    let name = shell.as_str().unwrap_or_default();
    let Some((_, pattern, argv)) = SHELL_VERSIONS
        .iter()
        .find(|(n, _, _)| *n == name && shell.is_str())
    else {
        return Ok(map([
            (
                "error",
                Value::from(format!(
                    "Salt does not know how to get the version number for {}",
                    py_str(shell)
                )),
            ),
            ("installed", Value::Nil),
        ]));
    };
    let joined = argv.join(" ");
    let (ours, theirs) = StdUnixStream::pair().map_err(|e| FnError::Execution(e.to_string()))?;
    let theirs2 = theirs
        .try_clone()
        .map_err(|e| FnError::Execution(e.to_string()))?;
    let mut command = tokio::process::Command::new(argv[0]);
    command
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stderr(Stdio::from(std::os::fd::OwnedFd::from(theirs2)))
        .process_group(0)
        .kill_on_drop(true);
    if std::env::var_os("HOME").is_none() {
        command.env("HOME", current_home());
    }
    let spawned = command.spawn();
    drop(command);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return Ok(map([
                (
                    "error",
                    Value::from(format!(
                        "Unable to run command '{joined}' Reason: {}",
                        brine_protocol::pyrepr::os_error(&e, Some(argv[0]))
                    )),
                ),
                ("installed", Value::Boolean(false)),
            ]))
        }
    };
    let guard = GroupGuard(child.id());
    ours.set_nonblocking(true)
        .map_err(|e| FnError::Execution(e.to_string()))?;
    let reader =
        tokio::net::UnixStream::from_std(ours).map_err(|e| FnError::Execution(e.to_string()))?;
    let run = async {
        let out = read_all(Some(reader)).await;
        let _ = child.wait().await;
        out
    };
    let Ok(out) = tokio::time::timeout(Duration::from_secs(10), run).await else {
        drop(guard);
        return Ok(map([
            (
                "error",
                Value::from(format!(
                    "Unable to run command '{joined}' Reason: Timed out."
                )),
            ),
            ("installed", Value::Boolean(false)),
        ]));
    };
    drop(guard);
    let stdout = String::from_utf8_lossy(&out).into_owned();
    let mut ret: Vec<(Value, Value)> = vec![
        (Value::from("installed"), Value::Boolean(false)),
        (
            Value::from("path"),
            which(argv[0]).map_or(Value::Nil, Value::from),
        ),
    ];
    let re = regex::Regex::new(&format!("(?i){pattern}"))
        .map_err(|e| FnError::Exception(e.to_string()))?;
    let version_raw = re
        .captures(&stdout)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_string());
    let mut version = None;
    match &version_raw {
        Some(raw) => {
            ret.push((Value::from("version_raw"), Value::from(raw.as_str())));
            let digits: String = if raw.starts_with(|c: char| c.is_ascii_digit()) {
                raw.chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect()
            } else {
                String::new()
            };
            if !digits.is_empty() {
                ret[0].1 = Value::Boolean(true);
                let mut parts: Vec<&str> = digits.split('.').take(3).collect();
                if parts.len() == 1 {
                    parts.push("0");
                }
                version = Some(parts.join("."));
            }
        }
        None => ret[0].1 = Value::Nil,
    }
    match version {
        Some(v) => ret.push((Value::from("version"), Value::from(v))),
        None => {
            let error = format!(
                "The version regex pattern for shell {name}, could not find the version string"
            );
            tracing::error!("{error}");
            ret.push((Value::from("error"), Value::from(error)));
            ret.push((Value::from("stdout"), Value::from(stdout)));
        }
    }
    Ok(Value::Map(ret))
}

/// Python's `TypeError` for a value that should have been text (`to_bytes`, `to_str`).
fn not_text(v: &Value) -> FnError {
    FnError::InvalidArgs(format!(
        "expected str, bytes, or bytearray not {}",
        super::args::py_type(v)
    ))
}

/// `cmd.exec_code_all`: the code in a private temporary file (`__salt.tmp.*`, `.ps1` for
/// powershell), run as `run_all([lang, file, *args], cwd=cwd, python_shell=False,
/// **kwargs)`, the file removed afterwards.
async fn exec_code_all(b: &Bound, st: &mut CallState) -> Result<Value, FnError> {
    use std::io::Write;
    let lang_v = b.get("lang").unwrap_or(&Value::Nil);
    let Some(lang) = lang_v.as_str() else {
        return Err(FnError::Exception(format!(
            "AttributeError: '{}' object has no attribute 'lower'",
            super::args::py_type_name(lang_v)
        )));
    };
    let powershell = lang.to_lowercase().starts_with("powershell");
    let code = match b.get("code").unwrap_or(&Value::Nil) {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Binary(bytes) => bytes.clone(),
        other => return Err(not_text(other)),
    };
    let (path, mut file) = script_file(
        &std::env::temp_dir(),
        "__salt.tmp.",
        if powershell { ".ps1" } else { "" },
    )
    .map_err(|e| FnError::Exception(format!("OSError: {e}")))?;
    let written = file.write_all(&code);
    drop(file);
    let result = async {
        written.map_err(|e| FnError::Exception(format!("OSError: {e}")))?;
        let path_text = path.display().to_string();
        let mut cmd = vec![Value::from(lang)];
        if powershell {
            cmd.push(Value::from("-File"));
        }
        cmd.push(Value::from(path_text.as_str()));
        match b.get("args") {
            Some(arg @ Value::String(s)) if s.as_str().is_some() => cmd.push(arg.clone()),
            Some(Value::Array(items)) => cmd.extend(items.iter().map(|v| Value::from(py_str(v)))),
            _ => {}
        }
        if let Some(user) = b.opt("runas") {
            let uid = lookup_user(&py_str(user)).map(|u| u.uid).ok_or_else(|| {
                FnError::InvalidArgs("'str' object cannot be interpreted as an integer".into())
            })?;
            std::os::unix::fs::chown(&path, Some(uid), None)
                .map_err(|e| FnError::Exception(format!("PermissionError: {e}")))?;
        }
        if b.kwarg("python_shell").is_some() {
            return Err(FnError::InvalidArgs(format!(
                "{CMDMOD}.run_all() got multiple values for keyword argument 'python_shell'"
            )));
        }
        let mut kwargs = vec![
            (
                "cwd".to_string(),
                b.get("cwd").cloned().unwrap_or(Value::Nil),
            ),
            ("python_shell".to_string(), Value::Boolean(false)),
        ];
        kwargs.extend(b.kwargs.iter().cloned());
        let sig = Fun::RunAll.spec().sig;
        let bound = super::args::bind(&sig, "run_all", vec![Value::Array(cmd)], kwargs)
            .map_err(FnError::InvalidArgs)?;
        run_all(&bound, st).await
    }
    .await;
    if let Err(e) = std::fs::remove_file(&path) {
        tracing::error!(
            "cmd.exec_code_all: Unable to clean tempfile '{}': {e}",
            path.display()
        );
    }
    result
}

/// The parameters of `cmd.run_bg`.
const RUN_BG_PARAMS: &[&str] = &[
    "cmd",
    "cwd",
    "runas",
    "group",
    "shell",
    "python_shell",
    "env",
    "clean_env",
    "template",
    "umask",
    "timeout",
    "output_encoding",
    "output_loglevel",
    "log_callback",
    "reset_system_locale",
    "ignore_retcode",
    "saltenv",
    "password",
    "prepend_path",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
];

/// `cmd.run_bg`: start the command with the minion's own standard streams and return its
/// pid without waiting (the runtime reaps it when it ends); `timeout` is checked but, as in
/// Salt, never applied.
fn run_bg(b: &Bound) -> Result<Value, FnError> {
    // Salt passes these to `_run` itself, so they cannot come in **kwargs as well.
    const FIXED: &[&str] = &[
        "stdin",
        "stderr",
        "stdout",
        "use_vt",
        "bg",
        "with_communicate",
        "rstrip",
    ];
    if let Some((k, _)) = b.kwargs.iter().find(|(k, _)| FIXED.contains(&k.as_str())) {
        return Err(FnError::InvalidArgs(format!(
            "{CMDMOD}._run() got multiple values for keyword argument '{k}'"
        )));
    }
    let mut opts = RunOpts::from_bound(b, false)?;
    opts.ignore_retcode = true;
    opts.stdin = None;
    let Prepared {
        mut command,
        shown,
        prog,
        cwd,
        ..
    } = prepare(&opts, false)?;
    command
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    let child = command.spawn().map_err(|e| {
        FnError::Execution(format!(
            "Unable to run command '{shown}' with the context '{}', reason: {}",
            spawn_context(&opts, &cwd, true),
            brine_protocol::pyrepr::os_error(&e, Some(&prog))
        ))
    })?;
    let pid = child.id().unwrap_or(0);
    // Dropped without kill_on_drop: the process runs on and is reaped when it exits.
    drop(child);
    Ok(map([("pid", Value::from(pid))]))
}

/// `cmd.tty`: write `echo` to /dev/ttyN or /dev/pts/N (opened as Python's `open(path, "wb")`
/// opens it: created when missing, emptied).
fn tty(b: &Bound) -> Result<Value, FnError> {
    use std::io::Write;
    let device_v = b.get("device").unwrap_or(&Value::Nil);
    let Some(device) = device_v.as_str() else {
        return Err(FnError::Exception(format!(
            "AttributeError: '{}' object has no attribute 'startswith'",
            super::args::py_type_name(device_v)
        )));
    };
    let teletype = if device.starts_with("tty") {
        format!("/dev/{device}")
    } else if device.starts_with("pts") {
        format!("/dev/{}", device.replace("pts", "pts/"))
    } else {
        return Ok(map([(
            "Error",
            Value::from("The specified device is not a valid TTY"),
        )]));
    };
    let failed = || {
        Ok(map([(
            "Error",
            Value::from(format!("Echoing to {teletype} returned error")),
        )]))
    };
    let Ok(mut file) = std::fs::File::create(&teletype) else {
        return failed();
    };
    let echo = match b.get("echo") {
        None => Vec::new(),
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        Some(Value::Binary(bytes)) => bytes.clone(),
        Some(other) => return Err(not_text(other)),
    };
    if file.write_all(&echo).and_then(|()| file.flush()).is_err() {
        return failed();
    }
    Ok(map([(
        "Success",
        Value::from(format!("Message was successfully echoed to {teletype}")),
    )]))
}

/// The parameters of `cmd.script` and `cmd.script_retcode`.
const SCRIPT_PARAMS: &[&str] = &[
    "source",
    "args",
    "cwd",
    "stdin",
    "runas",
    "group",
    "shell",
    "python_shell",
    "env",
    "template",
    "umask",
    "output_encoding",
    "output_loglevel",
    "log_callback",
    "hide_output",
    "timeout",
    "reset_system_locale",
    "saltenv",
    "use_vt",
    "bg",
    "password",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
];

/// What `cmd.script` answers when the script cannot be fetched.
fn cache_error() -> Value {
    map([
        ("pid", Value::from(0)),
        ("retcode", Value::from(1)),
        ("stdout", Value::from("")),
        ("stderr", Value::from("")),
        ("cache_error", Value::Boolean(true)),
    ])
}

/// The script's text: from the master's file server (rendered when a template is asked for),
/// over http(s) (through the cache's `extrn_files`) or from this machine's disk; `None` when
/// there is no such file.
async fn script_text(
    ctx: &Context,
    source: &str,
    saltenv: &str,
    template: Option<&str>,
    vars: serde_json::Map<String, serde_json::Value>,
) -> Result<Option<Vec<u8>>, FnError> {
    if let Some(engine) = template.filter(|t| *t != "jinja") {
        return Err(FnError::Execution(format!(
            "Attempted to render file paths with unavailable engine {engine}"
        )));
    }
    if brine_state::url::is_http(source) {
        if template.is_some() {
            return Err(FnError::Execution(format!(
                "Rendering a script from {source} as a template is not supported by Brine's cmd.script; serve it from the master (salt://)"
            )));
        }
        // As Salt: fetched into extrn_files on every call (no source_hash to check a cached
        // copy against); a failed fetch is Salt's MinionError.
        let opts = brine_state::url::HttpOptions::from_opts(&ctx.services.opts);
        let (cachedir, url, env) = (
            ctx.services.cachedir.clone(),
            source.to_string(),
            saltenv.to_string(),
        );
        let fetched = tokio::task::spawn_blocking(move || {
            let fetch = brine_state::url::Fetch::default();
            brine_state::url::cache_url(&opts, &cachedir, &url, &env, &fetch)
        })
        .await
        .map_err(|e| FnError::Exception(e.to_string()))?;
        let path =
            fetched.map_err(|e| FnError::Exception(format!("salt.exceptions.MinionError: {e}")))?;
        return std::fs::read(path)
            .map(Some)
            .map_err(|e| FnError::Execution(e.to_string()));
    }
    if !source.starts_with("salt://") {
        let bytes = brine_state::states::read_local(source).map_err(FnError::Execution)?;
        let Some(bytes) = bytes else { return Ok(None) };
        if template.is_none() {
            return Ok(Some(bytes));
        }
        return Err(FnError::Execution(format!(
            "Rendering a local script ({source}) as a template is not supported by Brine's cmd.script; serve it from the master (salt://)"
        )));
    }
    let Some(master) = ctx.services.file_source() else {
        return Err(FnError::Execution(
            "cmd.script needs the master's file server for salt:// sources (this minion has no master)".into(),
        ));
    };
    let client = std::sync::Arc::new(crate::fileclient::FileClient::new(
        master,
        &ctx.services.cachedir,
    ));
    let (source, saltenv, template) = (source.to_string(), saltenv.to_string(), template.is_some());
    let ctx = ctx.clone();
    tokio::task::spawn_blocking(move || -> Result<Option<Vec<u8>>, String> {
        if template {
            return Ok(
                super::cp::render_master_file(&client, &ctx, &source, &saltenv, vars)?
                    .map(String::into_bytes),
            );
        }
        match client.cache_file(&source, &saltenv)? {
            Some(path) => std::fs::read(path).map(Some).map_err(|e| e.to_string()),
            None => Ok(None),
        }
    })
    .await
    .map_err(|e| FnError::Exception(e.to_string()))?
    .map_err(FnError::Execution)
}

/// A new private file named as Python's `mkstemp` names them (`<prefix><8 random>.<ext>`),
/// in `dir`.
fn script_file(
    dir: &Path,
    prefix: &str,
    ext: &str,
) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789_";
    let mut last = None;
    for _ in 0..100 {
        let seed: [u8; 8] = rand::random();
        let stem: String = seed
            .iter()
            .map(|b| LETTERS[*b as usize % LETTERS.len()] as char)
            .collect();
        let path = dir.join(format!("{prefix}{stem}{ext}"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary file name")))
}

/// Salt's `cmd.script`: fetch the script (rendered when `template` is set), write it to a
/// private temporary file (mode 0500, owned by `runas`), run it with `args`, remove it.
async fn script(
    ctx: &Context,
    b: &Bound,
    retcode_only: bool,
    st: &mut CallState,
) -> Result<Value, FnError> {
    use std::io::Write;
    let source = py_str(b.get("source").unwrap_or(&Value::Nil));
    let saltenv = b
        .opt("saltenv")
        .map(py_str)
        .or_else(|| {
            ctx.services
                .opts
                .get("saltenv")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| "base".into());
    // cmd.script_retcode renders with jinja unless told otherwise.
    let template = match b.get("template") {
        None if retcode_only => Some("jinja".to_string()),
        None => None,
        Some(v) if brine_protocol::payload::py_truthy(v) => Some(py_str(v)),
        Some(_) => None,
    };
    let (rel, _) = crate::fileclient::split_url(&source, &saltenv);
    let ext = Path::new(&rel)
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let dir = match b
        .get("cwd")
        .filter(|v| brine_protocol::payload::py_truthy(v))
    {
        Some(cwd) => std::path::PathBuf::from(py_str(cwd)),
        None => std::env::temp_dir(),
    };
    let vars = b
        .kwargs
        .iter()
        .filter(|(k, _)| !k.starts_with("__"))
        .map(|(k, v)| (k.clone(), brine_protocol::payload::to_json(v)))
        .collect();
    let text = script_text(ctx, &source, &saltenv, template.as_deref(), vars).await?;
    let Some(text) = text else {
        return Ok(cache_error());
    };
    let (path, mut file) = script_file(&dir, "tmp", &ext).map_err(|e| {
        FnError::Execution(format!(
            "The script could not be written in {}: {e}",
            dir.display()
        ))
    })?;
    let mut opts = RunOpts::from_bound(b, false)?;
    let runas_uid = match &opts.runas {
        Some(name) => lookup_user(name).map(|u| u.uid),
        None => None,
    };
    let prepared = file
        .write_all(&text)
        .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o500)))
        .and_then(|()| match runas_uid {
            Some(uid) => std::os::unix::fs::chown(&path, Some(uid), None),
            None => Ok(()),
        });
    drop(file);
    if let Err(e) = prepared {
        let _ = std::fs::remove_file(&path);
        return Err(FnError::Execution(format!(
            "The script could not be written to {}: {e}",
            path.display()
        )));
    }
    let args: Vec<String> = match b.get("args") {
        None | Some(Value::Nil) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(py_str).collect(),
        Some(v) => {
            shlex_split(&py_str(v)).map_err(|e| FnError::Exception(format!("ValueError: {e}")))?
        }
    };
    if !args.is_empty() {
        opts.python_shell = false;
    }
    let mut argv = vec![Value::from(path.display().to_string())];
    argv.extend(args.into_iter().map(Value::from));
    opts.cmd = Value::Array(argv);
    let out = execute(&opts).await;
    let _ = std::fs::remove_file(&path);
    match out {
        Ok(out) => {
            st.retcode = out.job_retcode(&opts);
            Ok(out.into_map(opts.hide_output))
        }
        // Salt logs a command that cannot be started and answers an empty dict.
        Err(e) => {
            tracing::error!(
                "cmd.script: unable to run script '{}': {e:?}",
                path.display()
            );
            Ok(Value::Map(Vec::new()))
        }
    }
}

fn is_true_v(v: &Value) -> bool {
    is_true(Some(v))
}

/// Everything `execute` needs, resolved from the call's arguments.
#[derive(Debug, Clone)]
pub(crate) struct RunOpts {
    cmd: Value,
    cwd: Option<String>,
    stdin: Option<String>,
    runas: Option<String>,
    shell: Option<String>,
    python_shell: bool,
    env: Vec<(String, String)>,
    clean_env: bool,
    rstrip: bool,
    timeout: Option<Value>,
    reset_system_locale: bool,
    ignore_retcode: bool,
    merge_stderr: bool,
    /// `stdin_raw_newlines` as given, shown in the error context when it was.
    stdin_raw_newlines: Option<Value>,
    prepend_path: Option<String>,
    success_retcodes: Vec<i64>,
    success_stdout: Vec<String>,
    success_stderr: Vec<String>,
    hide_output: bool,
    /// The caller shows the output and exit code but never the process id, so a condition
    /// the shell answers itself may be answered without starting it (see `inline`).
    pid_unseen: bool,
}

impl RunOpts {
    fn from_bound(b: &Bound, shell_default: bool) -> Result<RunOpts, FnError> {
        let python_shell = match b.opt("python_shell").or_else(|| b.kwarg("python_shell")) {
            Some(v) => is_true_v(v),
            // Salt: True when run from a published job (there is a jid), else False.
            None => {
                shell_default
                    || b.kwarg("__pub_jid")
                        .is_some_and(brine_protocol::payload::py_truthy)
            }
        };
        let stdin = b.opt("stdin").map(|v| {
            let text = py_str(v);
            if b.kwarg("stdin_raw_newlines").is_some_and(is_true_v) {
                text
            } else {
                text.replace("\\n", "\n")
            }
        });
        Ok(RunOpts {
            cmd: b.get("cmd").cloned().unwrap_or(Value::Nil),
            cwd: b
                .get("cwd")
                .filter(|v| brine_protocol::payload::py_truthy(v))
                .map(py_str),
            stdin,
            runas: b.opt("runas").map(py_str).filter(|s| !s.is_empty()),
            shell: match b.get("shell") {
                None => Some(default_shell().to_string()),
                Some(v) if brine_protocol::payload::py_truthy(v) => Some(py_str(v)),
                Some(_) => None,
            },
            python_shell,
            env: parse_env(b.get("env")),
            clean_env: b.get("clean_env").is_some_and(is_true_v),
            rstrip: b.get("rstrip").is_none_or(is_true_v),
            timeout: b.opt("timeout").cloned(),
            reset_system_locale: b.get("reset_system_locale").is_none_or(is_true_v),
            ignore_retcode: b.get("ignore_retcode").is_some_and(is_true_v),
            merge_stderr: false,
            stdin_raw_newlines: b.kwarg("stdin_raw_newlines").cloned(),
            prepend_path: b.opt("prepend_path").map(py_str),
            success_retcodes: match b.opt("success_retcodes") {
                None => vec![0],
                Some(v) => split_input(v)
                    .iter()
                    .map(|s| s.trim().parse::<i64>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| {
                        FnError::Invocation("success_retcodes must be a list of integers".into())
                    })?,
            },
            success_stdout: b.opt("success_stdout").map(split_input).unwrap_or_default(),
            success_stderr: b.opt("success_stderr").map(split_input).unwrap_or_default(),
            hide_output: b.get("hide_output").is_some_and(is_true_v),
            pid_unseen: false,
        })
    }

    /// A command with every option at its default and no shell.
    fn plain(cmd: Value) -> RunOpts {
        RunOpts {
            cmd,
            cwd: None,
            stdin: None,
            runas: None,
            shell: None,
            python_shell: false,
            env: Vec::new(),
            clean_env: false,
            rstrip: true,
            timeout: None,
            reset_system_locale: true,
            ignore_retcode: false,
            merge_stderr: false,
            stdin_raw_newlines: None,
            prepend_path: None,
            success_retcodes: vec![0],
            success_stdout: Vec::new(),
            success_stderr: Vec::new(),
            hide_output: false,
            pid_unseen: false,
        }
    }
}

/// `cmdmod._parse_env`: a dict, or a list of single-key dicts; values become strings.
fn parse_env(env: Option<&Value>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |entries: &[(Value, Value)]| {
        for (k, v) in entries {
            let key = py_str(k);
            let val = match v {
                Value::Nil => String::new(),
                other => py_str(other),
            };
            match out.iter_mut().find(|(k2, _)| *k2 == key) {
                Some(slot) => slot.1 = val,
                None => out.push((key, val)),
            }
        }
    };
    match env {
        Some(Value::Map(entries)) => add(entries),
        Some(Value::Array(items)) => {
            for item in items {
                if let Value::Map(entries) = item {
                    add(entries);
                }
            }
        }
        _ => {}
    }
    out
}

/// The result of one command.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunOutput {
    pid: u32,
    retcode: i64,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

impl RunOutput {
    fn job_retcode(&self, opts: &RunOpts) -> i32 {
        if opts.ignore_retcode {
            0
        } else {
            self.exit_code()
        }
    }

    pub(crate) fn into_map(self, hide_output: bool) -> Value {
        let (stdout, stderr) = if hide_output {
            (String::new(), String::new())
        } else {
            (self.stdout, self.stderr)
        };
        if self.timed_out {
            // Salt builds the timeout reply in this key order.
            map([
                ("stdout", Value::from(stdout)),
                ("stderr", Value::from(stderr)),
                ("retcode", Value::from(self.retcode)),
                ("pid", Value::from(self.pid)),
            ])
        } else {
            map([
                ("pid", Value::from(self.pid)),
                ("retcode", Value::from(self.retcode)),
                ("stdout", Value::from(stdout)),
                ("stderr", Value::from(stderr)),
            ])
        }
    }
}

impl RunOutput {
    /// The exit code.
    pub(crate) fn retcode(&self) -> i64 {
        self.retcode
    }

    /// The exit code as the job's retcode (what Salt's `cmd` functions leave in
    /// `__context__["retcode"]` unless told to ignore it).
    pub(crate) fn exit_code(&self) -> i32 {
        i32::try_from(self.retcode).unwrap_or(1)
    }

    /// Standard output, trailing whitespace removed.
    pub(crate) fn stdout(&self) -> &str {
        &self.stdout
    }

    /// Standard error, trailing whitespace removed.
    pub(crate) fn stderr(&self) -> &str {
        &self.stderr
    }
}

/// The context Salt's `cmdmod._run` names when a command cannot be started: the keyword
/// arguments it gives `subprocess` (`env` and `stdin` left out), in its order. `stdout` and
/// `stderr` are `subprocess.PIPE` (-1), `stderr` `subprocess.STDOUT` (-2) when merged.
/// In the background (`cmd.run_bg`) the streams are inherited (`None`) and nothing is read.
fn spawn_context(opts: &RunOpts, cwd: &str, bg: bool) -> String {
    let py_bool = |b: bool| if b { "True" } else { "False" };
    let (stdout, stderr) = match (bg, opts.merge_stderr) {
        (true, _) => ("None", "None"),
        (false, true) => ("-1", "-2"),
        (false, false) => ("-1", "-1"),
    };
    let mut ctx = vec![
        format!("'cwd': {}", py_repr(&Value::from(cwd))),
        format!("'shell': {}", py_bool(opts.python_shell)),
        format!("'stdout': {stdout}"),
        format!("'stderr': {stderr}"),
        format!("'with_communicate': {}", py_bool(!bg)),
        format!(
            "'timeout': {}",
            opts.timeout
                .as_ref()
                .map_or_else(|| "None".to_string(), py_repr)
        ),
        format!("'bg': {}", py_bool(bg)),
    ];
    if let Some(v) = &opts.stdin_raw_newlines {
        ctx.push(format!("'stdin_raw_newlines': {}", py_repr(v)));
    }
    if let Some(user) = &opts.runas {
        // Salt's is a functools.partial of its own function; its address is Python's.
        ctx.push(format!(
            "'preexec_fn': functools.partial(<function chugid_and_umask>, {}, None, None)",
            py_repr(&Value::from(user.as_str()))
        ));
    }
    if opts.python_shell {
        let shell = opts.shell.as_deref().unwrap_or(default_shell());
        ctx.push(format!("'executable': {}", py_repr(&Value::from(shell))));
    }
    ctx.push("'close_fds': True".to_string());
    format!("{{{}}}", ctx.join(", "))
}

/// Run `argv` without a shell as other modules do through `cmd.run_all` with
/// `python_shell=False`: Salt's locale reset, `env` added to the environment.
pub(crate) async fn run_argv(argv: &[String], env: &[(&str, &str)]) -> Result<RunOutput, FnError> {
    run_argv_with(argv, env, None, false).await
}

/// [`run_argv`] with `stdin` written to the command's standard input.
pub(crate) async fn run_argv_stdin(
    argv: &[String],
    env: &[(&str, &str)],
    stdin: &str,
) -> Result<RunOutput, FnError> {
    run_argv_with(argv, env, Some(stdin), false).await
}

/// [`run_argv`] with standard error merged into standard output in the order written
/// (Salt's `redirect_stderr=True`).
pub(crate) async fn run_argv_merged(
    argv: &[String],
    env: &[(&str, &str)],
) -> Result<RunOutput, FnError> {
    run_argv_with(argv, env, None, true).await
}

async fn run_argv_with(
    argv: &[String],
    env: &[(&str, &str)],
    stdin: Option<&str>,
    merge_stderr: bool,
) -> Result<RunOutput, FnError> {
    let opts = RunOpts {
        stdin: stdin.map(str::to_string),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ignore_retcode: true,
        merge_stderr,
        ..RunOpts::plain(Value::Array(
            argv.iter().map(|a| Value::from(a.as_str())).collect(),
        ))
    };
    execute(&opts).await
}

/// `salt.utils.path.which`.
pub(crate) use brine_render::which;

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A user from /etc/passwd.
#[derive(Debug, Clone)]
struct User {
    name: String,
    uid: u32,
    gid: u32,
    home: String,
}

fn lookup_user(name: &str) -> Option<User> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 6 && f[0] == name).then(|| User {
            name: f[0].to_string(),
            uid: f[2].parse().unwrap_or(u32::MAX),
            gid: f[3].parse().unwrap_or(u32::MAX),
            home: f[5].to_string(),
        })
    })
}

fn current_home() -> String {
    if let Ok(home) = std::env::var("HOME") {
        if !home.is_empty() {
            return home;
        }
    }
    let uid = crate::grains_core::current_uid();
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|p| {
            p.lines().find_map(|line| {
                let f: Vec<&str> = line.split(':').collect();
                (f.len() >= 6 && f[2].parse::<u32>().ok() == Some(uid)).then(|| f[5].to_string())
            })
        })
        .unwrap_or_else(|| "/".to_string())
}

/// Kill a whole process group (the command and everything it started).
#[allow(unsafe_code)]
fn kill_process_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; a negative pid
    // addresses the process group we created for the child (process_group(0)).
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Kills the child's process group when a job is dropped mid-run (timeout or abort).
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            kill_process_group(pgid);
        }
    }
}

async fn read_all<R: AsyncRead + Unpin>(r: Option<R>) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(mut r) = r {
        // A read error ends the output; what was read so far is kept.
        let _ = r.read_to_end(&mut buf).await;
    }
    buf
}

fn decode(buf: &[u8], rstrip: bool) -> String {
    let text = String::from_utf8_lossy(buf).into_owned();
    if rstrip {
        text.trim_end().to_string()
    } else {
        text
    }
}

/// Resolve the argv to execute, Salt-style.
fn argv(opts: &RunOpts) -> Result<Vec<String>, FnError> {
    let shell = opts.shell.clone();
    match (&opts.cmd, opts.python_shell, shell) {
        (Value::Array(items), true, Some(sh)) => {
            let mut v = vec![sh, "-c".to_string()];
            v.extend(items.iter().map(py_str));
            Ok(v)
        }
        (Value::Array(items), _, _) => Ok(items.iter().map(py_str).collect()),
        (cmd, true, Some(sh)) => Ok(vec![sh, "-c".to_string(), py_str(cmd)]),
        (cmd, false, Some(_)) => {
            shlex_split(&py_str(cmd)).map_err(|e| FnError::Exception(format!("ValueError: {e}")))
        }
        (cmd, _, None) => Ok(vec![py_str(cmd)]),
    }
}

/// A command ready to start, as `cmdmod._run` sets it up (user, cwd, shell, timeout,
/// environment checked and applied); its standard streams are left to the caller.
struct Prepared {
    command: tokio::process::Command,
    /// The command as Salt's messages show it.
    shown: String,
    /// The program started.
    prog: String,
    cwd: String,
    timeout: Option<Duration>,
    /// What the minion does itself in the shell's place.
    shortcut: Option<Shortcut>,
}

/// Check the options and build the command as `cmdmod._run` does, up to starting it; with
/// `shortcuts`, a plain condition is answered and a plain file command built without its
/// shell.
fn prepare(opts: &RunOpts, shortcuts: bool) -> Result<Prepared, FnError> {
    let user = match &opts.runas {
        Some(name) => Some(
            lookup_user(name)
                .ok_or_else(|| FnError::Execution(format!("User '{name}' is not available")))?,
        ),
        None => None,
    };
    let cwd = match &opts.cwd {
        Some(cwd) => cwd.clone(),
        None => {
            let home = user.as_ref().map_or_else(current_home, |u| u.home.clone());
            if std::fs::read_dir(&home).is_ok() {
                home
            } else {
                "/".to_string()
            }
        }
    };
    if let Some(sh) = &opts.shell {
        if !is_executable(Path::new(sh)) {
            return Err(FnError::Execution(format!(
                "The shell {sh} is not available"
            )));
        }
    }
    let timeout = match &opts.timeout {
        None => None,
        Some(v @ (Value::Integer(_) | Value::F32(_) | Value::F64(_) | Value::Boolean(_))) => {
            let secs = py_float_of(v).map_err(FnError::Exception)?;
            Some(Duration::from_secs_f64(secs.max(0.0)))
        }
        Some(v) => {
            return Err(FnError::Exception(format!(
                "TimedProcTimeoutError: Error: timeout {} must be a number",
                py_str(v)
            )))
        }
    };
    if !Path::new(&cwd).is_absolute() || !Path::new(&cwd).is_dir() {
        return Err(FnError::Execution(format!(
            "Specified cwd '{cwd}' either not absolute or does not exist"
        )));
    }
    let argv = argv(opts)?;
    // Salt's messages show the command as Python saw it: the string, or the split list.
    let shown = if opts.python_shell || opts.shell.is_none() {
        py_str(&opts.cmd)
    } else {
        py_repr(&Value::Array(
            argv.iter().map(|s| Value::from(s.as_str())).collect(),
        ))
    };
    let Some((prog, rest)) = argv.split_first() else {
        return Err(FnError::Exception(
            "IndexError: list index out of range".into(),
        ));
    };

    let shortcut = shortcuts.then(|| shortcut(opts, &cwd)).flatten();
    let mut command = match &shortcut {
        Some(Shortcut::Program(file, words)) => {
            let mut c = tokio::process::Command::new(file);
            c.arg0(&words[0]).args(&words[1..]);
            c
        }
        _ => {
            let mut c = tokio::process::Command::new(prog);
            c.args(rest);
            c
        }
    };
    command.current_dir(&cwd);
    if opts.clean_env {
        command.env_clear();
    }
    if std::env::var_os("NOTIFY_SOCKET").is_some()
        && !opts.env.iter().any(|(k, _)| k == "NOTIFY_SOCKET")
    {
        command.env_remove("NOTIFY_SOCKET");
    }
    if opts.reset_system_locale {
        for key in [
            "LC_CTYPE",
            "LC_NUMERIC",
            "LC_TIME",
            "LC_COLLATE",
            "LC_MONETARY",
            "LC_MESSAGES",
            "LC_PAPER",
            "LC_NAME",
            "LC_ADDRESS",
            "LC_TELEPHONE",
            "LC_MEASUREMENT",
            "LC_IDENTIFICATION",
            "LANGUAGE",
        ] {
            if !opts.env.iter().any(|(k, _)| k == key) {
                command.env(key, "C");
            }
        }
    }
    if let Some(u) = &user {
        command.uid(u.uid).gid(u.gid);
        command
            .env("HOME", &u.home)
            .env("USER", &u.name)
            .env("LOGNAME", &u.name);
    }
    for (k, v) in &opts.env {
        command.env(k, v);
    }
    if opts.prepend_path.is_some() {
        command.env("PATH", child_path(opts).unwrap_or_default());
    }
    Ok(Prepared {
        command,
        shown,
        prog: prog.clone(),
        cwd,
        timeout,
        shortcut,
    })
}

/// The `PATH` a command's process starts with: the call's, or the minion's unless
/// `clean_env`, behind `prepend_path` (which always sets one).
fn child_path(opts: &RunOpts) -> Option<String> {
    let base = match opts.env.iter().find(|(k, _)| k == "PATH") {
        Some((_, v)) => Some(v.clone()),
        None if opts.clean_env => None,
        None => std::env::var("PATH").ok(),
    };
    match &opts.prepend_path {
        Some(prefix) => Some(format!("{prefix}:{}", base.unwrap_or_default())),
        None => base,
    }
}

/// Run one command as `cmdmod._run` does.
pub(crate) async fn execute(opts: &RunOpts) -> Result<RunOutput, FnError> {
    if let Some(done) = execute_with(opts, true).await? {
        return Ok(done);
    }
    // The program could not be started directly: nothing ran, so the shell is asked.
    execute_with(opts, false).await?.ok_or_else(|| {
        FnError::Execution(format!("Unable to run command '{}'", py_str(&opts.cmd)))
    })
}

/// Run one command; `None` when it was to start without its shell and could not.
async fn execute_with(opts: &RunOpts, shortcuts: bool) -> Result<Option<RunOutput>, FnError> {
    let Prepared {
        mut command,
        shown,
        prog,
        cwd,
        timeout,
        shortcut,
    } = prepare(opts, shortcuts)?;
    let direct = match shortcut {
        Some(Shortcut::Status(status)) => {
            let done = finished_run(opts, 0, status, String::new(), String::new());
            return Ok(Some(done));
        }
        Some(Shortcut::Program(..)) => true,
        None => false,
    };
    command.process_group(0).kill_on_drop(true);
    command.stdin(if opts.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    // Merged output needs one channel for both streams, so the child's writes interleave
    // as they happen; a socket pair gives that without unsafe pipe plumbing.
    let mut merged_reader = None;
    if opts.merge_stderr {
        let (ours, theirs) =
            StdUnixStream::pair().map_err(|e| FnError::Execution(e.to_string()))?;
        let theirs2 = theirs
            .try_clone()
            .map_err(|e| FnError::Execution(e.to_string()))?;
        command.stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)));
        command.stderr(Stdio::from(std::os::fd::OwnedFd::from(theirs2)));
        ours.set_nonblocking(true)
            .map_err(|e| FnError::Execution(e.to_string()))?;
        merged_reader = Some(
            tokio::net::UnixStream::from_std(ours)
                .map_err(|e| FnError::Execution(e.to_string()))?,
        );
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
    }

    let spawned = command.spawn();
    // Our copies of the child's ends must be closed, or reading never sees EOF.
    drop(command);
    if direct && spawned.is_err() {
        return Ok(None);
    }
    let mut child = spawned.map_err(|e| {
        FnError::Execution(format!(
            "Unable to run command '{shown}' with the context '{}', reason: {}",
            spawn_context(opts, &cwd, false),
            brine_protocol::pyrepr::os_error(&e, Some(&prog))
        ))
    })?;
    let pid = child.id().unwrap_or(0);
    let mut guard = GroupGuard(Some(pid));

    let stdin_data = opts.stdin.clone();
    let stdin_pipe = child.stdin.take();
    let stdout_pipe = child.stdout.take();
    let stderr_pipe = child.stderr.take();
    let run = async {
        let feed = async move {
            if let (Some(mut pipe), Some(data)) = (stdin_pipe, stdin_data) {
                // The child may exit without reading its input; that is not an error.
                let _ = pipe.write_all(data.as_bytes()).await;
            }
        };
        let (_, out, err, merged) = tokio::join!(
            feed,
            read_all(stdout_pipe),
            read_all(stderr_pipe),
            read_all(merged_reader)
        );
        let status = child.wait().await;
        (out, err, merged, status)
    };
    let finished = match timeout {
        Some(limit) => tokio::time::timeout(limit, run).await.ok(),
        None => Some(run.await),
    };
    let Some((out, err, merged, status)) = finished else {
        drop(guard);
        let _ = child.kill().await;
        let limit = opts.timeout.as_ref().map_or_else(String::new, py_str);
        return Ok(Some(RunOutput {
            pid,
            retcode: 1,
            stdout: format!("{shown} : Timed out after {limit} seconds"),
            stderr: String::new(),
            timed_out: true,
        }));
    };
    // The command finished: anything it left running in the background stays.
    guard.0 = None;
    let status = status.map_err(|e| FnError::Execution(e.to_string()))?;
    let retcode = match status.code() {
        Some(code) => i64::from(code),
        None => {
            use std::os::unix::process::ExitStatusExt;
            -i64::from(status.signal().unwrap_or(0))
        }
    };
    let (stdout, stderr) = if opts.merge_stderr {
        (decode(&merged, opts.rstrip), String::new())
    } else {
        (decode(&out, opts.rstrip), decode(&err, opts.rstrip))
    };
    Ok(Some(finished_run(opts, pid, retcode, stdout, stderr)))
}

/// A finished command's output, its exit code read through `success_retcodes`,
/// `success_stdout` and `success_stderr`.
fn finished_run(
    opts: &RunOpts,
    pid: u32,
    mut retcode: i64,
    stdout: String,
    stderr: String,
) -> RunOutput {
    if opts.success_retcodes.contains(&retcode)
        || opts
            .success_stdout
            .iter()
            .any(|s| stdout.contains(s.as_str()))
        || opts
            .success_stderr
            .iter()
            .any(|s| stderr.contains(s.as_str()))
    {
        retcode = 0;
    }
    RunOutput {
        pid,
        retcode,
        stdout,
        stderr,
        timed_out: false,
    }
}

/// What a plain command asks of its shell that the minion does itself, when nothing about
/// the call can tell the difference.
#[derive(Debug)]
enum Shortcut {
    /// A `test`/`[` condition the shell would answer in its own process without a word of
    /// output (`inline`), for a call that never shows a process id: its exit status.
    Status(i64),
    /// A plain file command the shell would only replace itself with (`direct`): the
    /// program file and the words.
    Program(std::path::PathBuf, Vec<String>),
}

/// The shortcut for a command run from `cwd`, read once per run; `None` to start the shell.
fn shortcut(opts: &RunOpts, cwd: &str) -> Option<Shortcut> {
    let (Value::String(cmd), true, Some(shell), None) =
        (&opts.cmd, opts.python_shell, &opts.shell, &opts.runas)
    else {
        return None;
    };
    // Most commands are neither: the words say so before anything else is read.
    let words = inline::literal_words(cmd.as_str()?)?;
    let program = if matches!(words.first()?.as_str(), "test" | "[") {
        if !opts.pid_unseen || opts.stdin.is_some() || opts.clean_env {
            return None;
        }
        None
    } else {
        Some(direct::program(&words, child_path(opts).as_deref())?)
    };
    let shell = inline::Shell::of(shell)?;
    let one;
    let functions: &[&str] = match &program {
        Some((_, name)) => {
            one = [*name];
            &one
        }
        None => &["test", "["],
    };
    if !inline::plain_environment(
        child_env_names(opts).iter().map(String::as_str),
        functions,
    ) {
        return None;
    }
    match program {
        Some((file, _)) => Some(Shortcut::Program(file, words)),
        None => inline::test_status(&words, shell, Path::new(cwd)).map(Shortcut::Status),
    }
}

/// The names of the variables a command's process starts with: the minion's (unless
/// `clean_env`) and the call's `env` (names that are not text cannot be any the shell reads).
fn child_env_names(opts: &RunOpts) -> Vec<String> {
    let inherited = std::env::vars_os()
        .filter(|_| !opts.clean_env)
        .filter_map(|(k, _)| k.into_string().ok());
    inherited.chain(opts.env.iter().map(|(k, _)| k.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{call, CallResult, Context};
    use super::*;
    use brine_protocol::payload::get;

    /// A context as for a published job (so python_shell defaults to True).
    fn job_ctx(fun: &str) -> Context {
        ctx_with_load(publish_load(fun, vec![], "20260101000000000001"))
    }

    async fn run(fun: &str, arg: &[Value]) -> CallResult {
        call(&job_ctx(fun), fun, arg).await
    }

    #[tokio::test]
    async fn run_merges_output_and_sets_retcode() {
        let r = run("cmd.run", &[s("echo out; echo err >&2; exit 3")]).await;
        assert_eq!(r.ret, s("out\nerr"));
        assert_eq!(r.retcode, 3);
        assert_eq!(r.out, None);
        let r = run("cmd.run", &[s("echo hi")]).await;
        assert_eq!((r.ret, r.retcode), (s("hi"), 0));
    }

    #[tokio::test]
    async fn run_all_shape_and_retcode() {
        let r = run("cmd.run_all", &[s("echo o; echo e >&2; exit 4")]).await;
        assert_eq!(r.retcode, 4);
        let m = r.ret.as_map().unwrap();
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_str().unwrap()).collect();
        assert_eq!(keys, ["pid", "retcode", "stdout", "stderr"]);
        assert!(get(&r.ret, "pid").unwrap().as_u64().unwrap() > 0);
        assert_eq!(get(&r.ret, "retcode"), Some(&Value::from(4)));
        assert_eq!(get(&r.ret, "stdout"), Some(&s("o")));
        assert_eq!(get(&r.ret, "stderr"), Some(&s("e")));
        let r = run(
            "cmd.run_all",
            &[
                s("echo o; echo e >&2"),
                kw(&[("redirect_stderr", Value::Boolean(true))]),
            ],
        )
        .await;
        assert_eq!(get(&r.ret, "stdout"), Some(&s("o\ne")));
        assert_eq!(get(&r.ret, "stderr"), Some(&s("")));
    }

    #[tokio::test]
    async fn retcode_stdout_stderr_variants() {
        let r = run("cmd.retcode", &[s("exit 7")]).await;
        assert_eq!((r.ret, r.retcode), (Value::from(7), 7));
        let r = run("cmd.run_stdout", &[s("echo a; echo b >&2")]).await;
        assert_eq!(r.ret, s("a"));
        let r = run("cmd.run_stderr", &[s("echo a; echo b >&2")]).await;
        assert_eq!(r.ret, s("b"));
        let r = run("cmd.shell", &[s("echo $((1+2))")]).await;
        assert_eq!(r.ret, s("3"));
    }

    /// What a directory holds, as text: names, kinds, modes, owners, link targets, sizes.
    fn tree_text(root: &Path) -> String {
        use std::os::unix::fs::MetadataExt;
        let mut lines = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let p = e.path();
                let m = std::fs::symlink_metadata(&p).unwrap();
                let link = std::fs::read_link(&p).map(|t| t.display().to_string());
                lines.push(format!(
                    "{} {:o} {}:{} {} {}",
                    p.strip_prefix(root).unwrap().display(),
                    m.mode(),
                    m.uid(),
                    m.gid(),
                    if m.is_file() { m.len() } else { 0 },
                    link.unwrap_or_default()
                ));
                if m.is_dir() {
                    stack.push(p);
                }
            }
        }
        lines.sort();
        lines.join("\n")
    }

    #[tokio::test]
    async fn plain_file_commands_start_without_the_shell_as_the_shell_starts_them() {
        // The same steps in two directories, one through the shell and one without it:
        // every answer and what is left on disk are the same.
        let steps = [
            "touch new",
            "touch new 'with space'",
            "touch missing/x",
            "touch ''",
            "touch --bogus",
            "mkdir d",
            "mkdir d",
            "mkdir -p a/b/c",
            "mkdir -m 700 m",
            "rmdir a",
            "rmdir m",
            "rm",
            "rm gone",
            "rm -f gone",
            "rm d",
            "cp new copy",
            "cp gone x",
            "cp -r a a2",
            "mv copy moved",
            "mv gone x",
            "ln -s new link",
            "ln -s new link",
            "ln new hard",
            "chmod 600 new",
            "chmod 999 new",
            "chmod u+x gone",
            "chown root hard",
            "chown no-such-user-here hard",
            "chgrp root moved",
            "rm -r a2 d",
            "/bin/mkdir -p abs/dir",
        ];
        let shells: Vec<&str> = ["/bin/bash", "/bin/dash"]
            .into_iter()
            .filter(|p| Path::new(p).exists())
            .collect();
        for shell in shells {
            let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
            for step in steps {
                let mut answers = Vec::new();
                for (root, direct) in roots.iter().zip([true, false]) {
                    let opts = RunOpts {
                        cwd: Some(root.path().to_str().unwrap().to_string()),
                        shell: Some(shell.into()),
                        python_shell: true,
                        rstrip: true,
                        ..RunOpts::plain(s(step))
                    };
                    let cwd = opts.cwd.clone().unwrap();
                    assert!(
                        matches!(shortcut(&opts, &cwd), Some(Shortcut::Program(..))),
                        "{step}"
                    );
                    let out = execute_with(&opts, direct).await.unwrap().unwrap();
                    answers.push((out.retcode, out.stdout, out.stderr));
                }
                assert_eq!(answers[0], answers[1], "{shell}: {step}");
            }
            assert_eq!(
                tree_text(roots[0].path()),
                tree_text(roots[1].path()),
                "{shell}"
            );
        }
    }

    #[tokio::test]
    async fn only_plain_calls_start_a_file_command_without_the_shell() {
        // A shell named bash that leaves a mark, then is bash (bash passes exported
        // functions on; dash would drop them).
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().to_str().unwrap().to_string();
        let mark = dir.path().join("shell-started");
        let fake = dir.path().join("bin/bash");
        std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
        std::fs::write(
            &fake,
            format!("#!/bin/bash\necho x >> {}\nexec /bin/bash \"$@\"\n", mark.display()),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let started = |with: &[(&str, Value)]| {
            let _ = std::fs::remove_file(&mark);
            let mut args = vec![("shell", s(fake.to_str().unwrap())), ("cwd", s(&cwd))];
            args.extend(with.iter().cloned());
            (kw(&args), mark.clone())
        };
        let (opts, m) = started(&[]);
        let r = run("cmd.run_all", &[s("touch made"), opts]).await;
        assert_eq!(get(&r.ret, "retcode"), Some(&Value::from(0)));
        assert!(get(&r.ret, "pid").unwrap().as_u64().unwrap() > 0);
        assert!(dir.path().join("made").exists());
        assert!(!m.exists(), "touch went through the shell");
        // Anything the shell would read or expand starts the shell.
        for (cmd, with) in [
            ("touch $HOME/x", vec![]),
            ("touch a; touch b", vec![]),
            ("touch made > out", vec![]),
            ("echo made", vec![]),
            (
                "touch made",
                vec![("env", map([("BASH_ENV", s("/dev/null"))]))],
            ),
            ("touch made", vec![("env", map([("PATH", s("bin:/usr/bin:/bin"))]))]),
            ("touch made", vec![("python_shell", Value::Boolean(false))]),
        ] {
            let (opts, m) = started(&with);
            let r = run("cmd.run_all", &[s(cmd), opts]).await;
            assert_eq!(get(&r.ret, "retcode"), Some(&Value::from(0)), "{cmd}");
            // (python_shell=False runs no shell at all.)
            let shell = !with.iter().any(|(k, _)| *k == "python_shell");
            assert_eq!(m.exists(), shell, "{cmd} {with:?}");
        }
        // An exported function named as the program is what the shell runs.
        let func = map([("BASH_FUNC_touch%%", s("() {  echo function\n}"))]);
        let (opts, m) = started(&[("env", func)]);
        let r = run("cmd.run", &[s("touch made"), opts]).await;
        assert_eq!(r.ret, s("function"));
        assert!(m.exists());
    }

    #[tokio::test]
    async fn shell_conditions_answered_without_the_shell_as_it_answers_them() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().to_str().unwrap().to_string();
        std::fs::write(dir.path().join("here"), "x").unwrap();
        let marker = dir.path().join("started");
        let env_file = dir.path().join("bash_env");
        std::fs::write(&env_file, format!("touch {}\n", marker.display())).unwrap();
        let bash_with = |extra: (&str, Value)| {
            kw(&[("shell", s("/bin/bash")), ("cwd", s(&cwd)), extra])
        };
        let bash = bash_with(("rstrip", Value::Boolean(true)));
        for (cmd, code) in [
            ("test -e here", 0),
            ("[ -f here ]", 0),
            ("test ! -e here", 1),
            ("[ -d missing ]", 1),
        ] {
            let r = run("cmd.retcode", &[s(cmd), bash.clone()]).await;
            assert_eq!((r.ret, r.retcode), (Value::from(code), code), "{cmd}");
            let r = run("cmd.run_all", &[s(cmd), bash.clone()]).await;
            assert_eq!(get(&r.ret, "retcode"), Some(&Value::from(code)), "{cmd}");
            assert!(get(&r.ret, "pid").unwrap().as_u64().unwrap() > 0, "{cmd}");
        }
        // success_retcodes read the answer as they read an exit code.
        let ok_if_missing = bash_with(("success_retcodes", Value::from(1)));
        let r = run("cmd.retcode", &[s("test -e missing"), ok_if_missing]).await;
        assert_eq!(r.ret, Value::from(0));
        // A shell that would read a startup file is started.
        let startup = map([("BASH_ENV", s(env_file.to_str().unwrap()))]);
        let r = run("cmd.retcode", &[s("test -e here"), bash_with(("env", startup))]).await;
        assert_eq!(r.ret, Value::from(0));
        assert!(marker.exists());
        // Errors are the shell's own.
        let r = run("cmd.run", &[s("test x y"), bash.clone()]).await;
        assert_eq!(r.retcode, 2);
        assert!(py_str(&r.ret).contains("unary operator expected"), "{:?}", r.ret);
        // Which calls are answered in the minion: those that never show a process id.
        let opts = |python_shell: bool, pid_unseen: bool, runas: Option<&str>| RunOpts {
            cwd: Some(cwd.clone()),
            runas: runas.map(str::to_string),
            shell: Some("/bin/bash".into()),
            python_shell,
            pid_unseen,
            ..RunOpts::plain(s("test -e here"))
        };
        // (Unless the tests themselves run with a variable the shell would read at start.)
        let plain = inline::plain_environment(
            child_env_names(&opts(true, true, None))
                .iter()
                .map(String::as_str),
            &["test", "["],
        );
        let inline_status = |o: &RunOpts| match shortcut(o, &cwd) {
            Some(Shortcut::Status(status)) => Some(status),
            _ => None,
        };
        assert_eq!(inline_status(&opts(true, true, None)), plain.then_some(0));
        assert_eq!(inline_status(&opts(true, false, None)), None);
        assert_eq!(inline_status(&opts(false, true, None)), None);
        assert_eq!(inline_status(&opts(true, true, Some("root"))), None);
    }

    #[tokio::test]
    async fn cwd_env_stdin() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap().to_string();
        let r = run("cmd.run", &[s("pwd"), kw(&[("cwd", s(&path))])]).await;
        assert_eq!(
            r.ret,
            s(&std::fs::canonicalize(&path).unwrap().to_string_lossy())
        );
        // cwd also binds positionally, as in Salt.
        let r = run("cmd.run", &[s("pwd"), s(&path)]).await;
        assert_eq!(
            r.ret,
            s(&std::fs::canonicalize(&path).unwrap().to_string_lossy())
        );
        let r = run(
            "cmd.run",
            &[
                s("echo $FOO-$BAR-$LC_ALL-$LC_CTYPE"),
                kw(&[("env", map([("FOO", s("x")), ("BAR", Value::from(2))]))]),
            ],
        )
        .await;
        assert_eq!(r.ret, s("x-2--C"));
        let env_list = Value::Array(vec![map([("A", s("1"))]), map([("B", s("2"))])]);
        let r = run("cmd.run", &[s("echo $A$B"), kw(&[("env", env_list)])]).await;
        assert_eq!(r.ret, s("12"));
        let r = run(
            "cmd.run",
            &[s("cat"), kw(&[("stdin", s("line1\\nline2\n"))])],
        )
        .await;
        assert_eq!(r.ret, s("line1\nline2"));
        let r = run("cmd.run", &[s("cat")]).await;
        assert_eq!((r.ret, r.retcode), (s(""), 0), "no stdin means /dev/null");
    }

    #[tokio::test]
    async fn default_cwd_is_home() {
        let home = current_home();
        let expected = if std::fs::read_dir(&home).is_ok() {
            home
        } else {
            "/".into()
        };
        let r = run("cmd.run", &[s("pwd -P")]).await;
        assert_eq!(
            r.ret,
            s(&std::fs::canonicalize(&expected).unwrap().to_string_lossy())
        );
    }

    #[tokio::test]
    async fn missing_cwd_is_an_error() {
        let r = run(
            "cmd.run",
            &[s("true"), kw(&[("cwd", s("/nonexistent/dir"))])],
        )
        .await;
        assert_eq!(
            r.ret,
            s("ERROR: Specified cwd '/nonexistent/dir' either not absolute or does not exist")
        );
        assert_eq!((r.retcode, r.out.as_deref()), (1, Some("nested")));
        let r = run("cmd.run", &[s("true"), kw(&[("cwd", s("relative"))])]).await;
        assert_eq!(r.retcode, 1);
    }

    #[tokio::test]
    async fn timeout_kills_the_group_and_reports_like_salt() {
        let start = std::time::Instant::now();
        let r = run(
            "cmd.run_all",
            &[
                s("sleep 30 & sleep 30; echo never"),
                kw(&[("timeout", Value::F64(0.3))]),
            ],
        )
        .await;
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(r.retcode, 1);
        assert_eq!(
            get(&r.ret, "stdout"),
            Some(&s(
                "sleep 30 & sleep 30; echo never : Timed out after 0.3 seconds"
            ))
        );
        assert_eq!(get(&r.ret, "retcode"), Some(&Value::from(1)));
        let r = run(
            "cmd.run",
            &[s("sleep 30"), kw(&[("timeout", Value::from(0))])],
        )
        .await;
        assert_eq!(r.ret, s("sleep 30 : Timed out after 0 seconds"));
        let r = run("cmd.run", &[s("true"), kw(&[("timeout", s("soon"))])]).await;
        assert_eq!(r.retcode, 1);
        assert!(r.ret.as_str().unwrap().contains("must be a number"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commands_that_cannot_start_fail_as_in_salt_3007() {
        let case = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = [
            case(&["cmd.run", "nosuch-binary-xyz arg", "python_shell=False"]),
            case(&[
                "cmd.run_all",
                "nosuch-binary-xyz",
                "cwd=/tmp",
                "timeout=5",
                "python_shell=False",
            ]),
            case(&[
                "cmd.run_stdout",
                "nosuch-binary-xyz",
                "stdin_raw_newlines=True",
                "python_shell=False",
            ]),
            case(&["cmd.retcode", "nosuch-binary-xyz", "python_shell=False"]),
        ];
        crate::functions::network::tests::compare_with_salt(&cases, |_, _| {}).await;
    }

    #[tokio::test]
    async fn without_a_jid_commands_are_split_not_shelled() {
        // salt-call without a jid in the load (and module-to-module calls) use shlex.
        let r = call(&ctx(), "cmd.run", &[s("echo 'a  b' | c")]).await;
        assert_eq!(r.ret, s("a  b | c"));
        let r = call(&ctx(), "cmd.run", &[s("nosuch-binary-xyz arg")]).await;
        assert_eq!(r.retcode, 1);
        let text = r.ret.as_str().unwrap();
        assert!(
            text.starts_with("ERROR: Unable to run command '['nosuch-binary-xyz', 'arg']'"),
            "{text}"
        );
        assert!(
            text.ends_with("[Errno 2] No such file or directory: 'nosuch-binary-xyz'"),
            "{text}"
        );
        let r = call(
            &ctx(),
            "cmd.run",
            &[
                s("echo $HOME"),
                kw(&[("python_shell", Value::Boolean(true))]),
            ],
        )
        .await;
        assert!(!r.ret.as_str().unwrap().contains('$'));
    }

    #[tokio::test]
    async fn shell_option_and_bad_shell() {
        let r = run("cmd.run", &[s("echo $0"), kw(&[("shell", s("/bin/sh"))])]).await;
        assert_eq!(r.ret, s("/bin/sh"));
        // Without `shell`, the minion's own SHELL runs the command, as in Salt.
        let own = std::env::var("SHELL")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "/bin/sh".into());
        let r = run("cmd.run", &[s("echo $0")]).await;
        assert_eq!(r.ret, s(&own));
        let r = run(
            "cmd.run",
            &[s("true"), kw(&[("shell", s("/no/such/shell"))])],
        )
        .await;
        assert_eq!(r.ret, s("ERROR: The shell /no/such/shell is not available"));
        assert_eq!(r.retcode, 1);
    }

    #[tokio::test]
    async fn retcode_options() {
        let r = run(
            "cmd.run",
            &[s("exit 2"), kw(&[("ignore_retcode", Value::Boolean(true))])],
        )
        .await;
        assert_eq!(r.retcode, 0);
        let r = run(
            "cmd.run_all",
            &[
                s("exit 2"),
                kw(&[("success_retcodes", Value::Array(vec![Value::from(2)]))]),
            ],
        )
        .await;
        assert_eq!(
            (get(&r.ret, "retcode"), r.retcode),
            (Some(&Value::from(0)), 0)
        );
        let r = run("cmd.run", &[s("echo ok; exit 5"), s("success_stdout=ok")]).await;
        assert_eq!(r.retcode, 0);
        let r = run(
            "cmd.run",
            &[s("exit 1"), kw(&[("success_retcodes", s("x"))])],
        )
        .await;
        assert_eq!(
            r.ret,
            s("ERROR executing 'cmd.run': success_retcodes must be a list of integers")
        );
        let r = run(
            "cmd.run",
            &[
                s("echo secret; exit 3"),
                kw(&[("hide_output", Value::Boolean(true))]),
            ],
        )
        .await;
        assert_eq!((r.ret, r.retcode), (s(""), 3));
        let r = run(
            "cmd.run",
            &[
                s("echo bad; exit 3"),
                kw(&[("raise_err", Value::Boolean(true))]),
            ],
        )
        .await;
        assert_eq!(r.ret, s("ERROR: bad"));
        let r = run(
            "cmd.run",
            &[
                s("printf 'x  \\n\\n'"),
                kw(&[("rstrip", Value::Boolean(false))]),
            ],
        )
        .await;
        assert_eq!(r.ret, s("x  \n\n"));
    }

    #[tokio::test]
    async fn killed_by_signal_is_negative_retcode() {
        let r = run("cmd.retcode", &[s("kill -TERM $$")]).await;
        assert_eq!(r.ret, Value::from(-15));
    }

    #[tokio::test]
    async fn runas_unknown_user() {
        let r = run(
            "cmd.run",
            &[s("id"), kw(&[("runas", s("no-such-user-xyz"))])],
        )
        .await;
        assert_eq!(r.ret, s("ERROR: User 'no-such-user-xyz' is not available"));
    }

    #[tokio::test]
    async fn which_and_has_exec() {
        let r = call(&ctx(), "cmd.which", &[s("sh")]).await;
        assert!(r.ret.as_str().unwrap().ends_with("/sh"));
        assert_eq!(
            call(&ctx(), "cmd.which", &[s("no-such-binary-xyz")])
                .await
                .ret,
            Value::Nil
        );
        assert_eq!(
            call(&ctx(), "cmd.has_exec", &[s("sh")]).await.ret,
            Value::Boolean(true)
        );
    }

    #[tokio::test]
    async fn missing_cmd_argument() {
        let r = run("cmd.run", &[]).await;
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .starts_with("Passed invalid arguments to cmd.run: run() missing 1 required positional argument: 'cmd'"));
    }

    // Unless said otherwise, expected values are what Salt 3007.15's salt-call returned.
    #[tokio::test]
    async fn which_bin_and_shells() {
        let c = ctx();
        let sh = call(&c, "cmd.which", &[s("sh")]).await.ret;
        let list = Value::Array(vec![s("no-such-binary-xyz"), s("sh"), s("bash")]);
        assert_eq!(call(&c, "cmd.which_bin", &[list]).await.ret, sh);
        assert_eq!(call(&c, "cmd.which_bin", &[s("sh")]).await.ret, sh);
        // A dict gives its keys; a number finds nothing.
        let dict = map([
            ("no-such-binary-xyz", Value::from(1)),
            ("sh", Value::from(2)),
        ]);
        assert_eq!(call(&c, "cmd.which_bin", &[dict]).await.ret, sh);
        assert_eq!(
            call(&c, "cmd.which_bin", &[Value::from(5)]).await.ret,
            Value::Nil
        );
        let none = Value::Array(vec![s("no-such-binary-xyz")]);
        assert_eq!(call(&c, "cmd.which_bin", &[none]).await.ret, Value::Nil);
        let r = call(&c, "cmd.shells", &[]).await;
        let listed = r.ret.as_array().unwrap();
        assert!(listed
            .iter()
            .all(|v| v.as_str().is_some_and(|p| p.starts_with('/'))));
        if std::fs::read_to_string("/etc/shells")
            .is_ok_and(|t| t.lines().any(|l| l.trim() == "/bin/sh"))
        {
            assert!(listed.contains(&s("/bin/sh")));
        }
    }

    #[tokio::test]
    async fn shell_info_reports_versions_and_errors() {
        let c = ctx();
        let r = call(&c, "cmd.shell_info", &[s("foo")]).await;
        assert_eq!(
            r.ret,
            map([
                (
                    "error",
                    s("Salt does not know how to get the version number for foo")
                ),
                ("installed", Value::Nil),
            ])
        );
        if which("zsh").is_none() {
            let r = call(&c, "cmd.shell_info", &[s("zsh")]).await;
            assert_eq!(
                r.ret,
                map([
                    ("error", s("Unable to run command 'zsh --version' Reason: [Errno 2] No such file or directory: 'zsh'")),
                    ("installed", Value::Boolean(false)),
                ])
            );
        }
        if which("bash").is_some() {
            // Salt 3007 fails here with a TypeError (it searches bytes with a text pattern);
            // this is the answer its code is written to give.
            let r = call(&c, "cmd.shell_info", &[s("bash")]).await;
            assert_eq!(get(&r.ret, "installed"), Some(&Value::Boolean(true)));
            assert_eq!(get(&r.ret, "path").cloned(), which("bash").map(Value::from));
            let raw = get(&r.ret, "version_raw").and_then(Value::as_str).unwrap();
            let version = get(&r.ret, "version").and_then(Value::as_str).unwrap();
            assert!(raw.starts_with(version), "{raw} {version}");
            assert_eq!(version.split('.').count(), 3);
            let r = call(&c, "cmd.shell_info", &[s("bash-test-error")]).await;
            let keys: Vec<&str> = r
                .ret
                .as_map()
                .unwrap()
                .iter()
                .map(|(k, _)| k.as_str().unwrap())
                .collect();
            assert_eq!(keys, ["installed", "path", "error", "stdout"]);
            assert_eq!(get(&r.ret, "installed"), Some(&Value::Nil));
        }
    }

    #[tokio::test]
    async fn exec_code_runs_the_code_from_a_temporary_file() {
        let r = run(
            "cmd.exec_code_all",
            &[
                s("sh"),
                s("echo $0; echo \"$@\"; echo e >&2; exit 3"),
                kw(&[("args", Value::Array(vec![s("a"), Value::from(2)]))]),
            ],
        )
        .await;
        assert_eq!(r.retcode, 3);
        assert_eq!(get(&r.ret, "retcode"), Some(&Value::from(3)));
        assert_eq!(get(&r.ret, "stderr"), Some(&s("e")));
        let out = get(&r.ret, "stdout").and_then(Value::as_str).unwrap();
        let (file, args) = out.split_once('\n').unwrap();
        assert_eq!(args, "a 2");
        let name = Path::new(file).file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("__salt.tmp.") && name.len() == 19,
            "{name}"
        );
        assert!(!Path::new(file).exists(), "the file is removed");
        // A string is one argument; cwd and env as for run_all; exec_code gives stdout.
        let dir = tempfile::tempdir().unwrap();
        let r = run(
            "cmd.exec_code",
            &[
                s("sh"),
                s("echo \"$1\" $FOO; pwd -P"),
                kw(&[
                    ("args", s("x y")),
                    ("cwd", s(dir.path().to_str().unwrap())),
                    ("env", map([("FOO", s("bar"))])),
                ]),
            ],
        )
        .await;
        let real = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(r.ret, s(&format!("x y bar\n{}", real.display())));
        let r = run("cmd.exec_code", &[s("sh"), s("exit 4")]).await;
        assert_eq!((r.ret, r.retcode), (s(""), 4));
        let r = run(
            "cmd.exec_code_all",
            &[
                s("sh"),
                s("x"),
                kw(&[("python_shell", Value::Boolean(true))]),
            ],
        )
        .await;
        assert!(r.ret.as_str().unwrap().starts_with("Passed invalid arguments to cmd.exec_code_all: salt.loaded.int.module.cmdmod.run_all() got multiple values for keyword argument 'python_shell'\n"));
        let r = run(
            "cmd.exec_code_all",
            &[s("sh"), s("x"), kw(&[("cmd", s("y"))])],
        )
        .await;
        assert!(r.ret.as_str().unwrap().starts_with("Passed invalid arguments to cmd.exec_code_all: run_all() got multiple values for argument 'cmd'\n"));
        let r = run("cmd.exec_code", &[s("sh"), Value::from(5)]).await;
        assert!(r.ret.as_str().unwrap().starts_with("Passed invalid arguments to cmd.exec_code: expected str, bytes, or bytearray not <class 'int'>\n"));
        let r = run("cmd.exec_code", &[Value::from(5), s("x")]).await;
        assert_eq!(r.ret, s("The minion function caused an exception: AttributeError: 'int' object has no attribute 'lower'"));
        let r = run("cmd.exec_code_all", &[s("nosuchlang-xyz"), s("x")]).await;
        let text = r.ret.as_str().unwrap();
        assert!(
            text.starts_with("ERROR: Unable to run command '['nosuchlang-xyz', '"),
            "{text}"
        );
        assert!(
            text.ends_with("', reason: [Errno 2] No such file or directory: 'nosuchlang-xyz'"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn run_bg_returns_the_pid_of_a_running_process() {
        let r = run("cmd.run_bg", &[s("exec sleep 60")]).await;
        assert_eq!(r.retcode, 0);
        let keys: Vec<&str> = r
            .ret
            .as_map()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str().unwrap())
            .collect();
        assert_eq!(keys, ["pid"]);
        let pid = get(&r.ret, "pid").and_then(Value::as_u64).unwrap();
        // Still running (as sh, or as sleep once sh has exec'd it): it was not waited for.
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_string()
        };
        assert!(!field("State:").starts_with('Z'), "{status}");
        assert_eq!(field("PPid:"), std::process::id().to_string(), "{status}");
        #[allow(unsafe_code)]
        // SAFETY: kill(2) with plain integers, on the process this test started.
        unsafe {
            libc::kill(libc::pid_t::try_from(pid).unwrap(), libc::SIGKILL);
        }
        let r = run("cmd.run_bg", &[s("true"), kw(&[("stdin", s("x"))])]).await;
        assert!(r.ret.as_str().unwrap().starts_with("Passed invalid arguments to cmd.run_bg: salt.loaded.int.module.cmdmod._run() got multiple values for keyword argument 'stdin'\n"));
        let r = run(
            "cmd.run_bg",
            &[s("true"), kw(&[("cwd", s("/nonexistent/dir"))])],
        )
        .await;
        assert_eq!(
            r.ret,
            s("ERROR: Specified cwd '/nonexistent/dir' either not absolute or does not exist")
        );
        let r = run(
            "cmd.run_bg",
            &[
                s("nosuch-binary-xyz"),
                kw(&[("python_shell", Value::Boolean(false)), ("cwd", s("/"))]),
            ],
        )
        .await;
        assert_eq!(r.ret, s("ERROR: Unable to run command '['nosuch-binary-xyz']' with the context '{'cwd': '/', 'shell': False, 'stdout': None, 'stderr': None, 'with_communicate': False, 'timeout': None, 'bg': True, 'close_fds': True}', reason: [Errno 2] No such file or directory: 'nosuch-binary-xyz'"));
    }

    #[tokio::test]
    async fn tty_writes_to_the_named_terminal() {
        let c = ctx();
        let r = call(&c, "cmd.tty", &[s("foo"), s("hi")]).await;
        assert_eq!(
            r.ret,
            map([("Error", s("The specified device is not a valid TTY"))])
        );
        let r = call(
            &c,
            "cmd.tty",
            &[s("pts/../../nonexistent-brine-dir/x"), s("hi")],
        )
        .await;
        assert_eq!(
            r.ret,
            map([(
                "Error",
                s("Echoing to /dev/pts//../../nonexistent-brine-dir/x returned error")
            )])
        );
        let r = call(&c, "cmd.tty", &[Value::from(5), s("hi")]).await;
        assert_eq!(r.ret, s("The minion function caused an exception: AttributeError: 'int' object has no attribute 'startswith'"));
        // Through /dev/pts/.. a path that is no terminal shows what is written (not in Salt's
        // answers: it needs a writable place under /dev).
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let rel = target.to_str().unwrap().trim_start_matches('/');
        if Path::new("/dev/pts").is_dir() && !rel.contains("pts") {
            let device = format!("pts/../../{rel}");
            let r = call(&c, "cmd.tty", &[s(&device), s("hello")]).await;
            let teletype = format!("/dev/pts//../../{rel}");
            assert_eq!(
                r.ret,
                map([(
                    "Success",
                    s(&format!("Message was successfully echoed to {teletype}"))
                )])
            );
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "hello");
        }
    }
}
