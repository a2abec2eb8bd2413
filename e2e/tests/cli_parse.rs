//! The seven tools parse their command lines as Salt 3007's do: the same argv gives the same
//! options and arguments, the same error text and status, the same `--version` line.
//!
//! Salt's side runs the option parsers of `salt.utils.parsers` in the venv named by
//! BRINE_SALT3007 (made by scripts/salt-venvs): optparse's own `parse_args` on an empty
//! `Values`, without Salt's config-loading hooks, so only what the command line set is
//! reported. Brine's side is each binary run with BRINE_PRINT_OPTPARSE=1. Without the venv
//! the comparison says so and returns; the error-text test needs only the binaries.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use brine_e2e::bin;
use serde_json::{json, Value};

const TOOLS: [&str; 7] = [
    "salt",
    "salt-run",
    "salt-key",
    "salt-call",
    "salt-api",
    "salt-master",
    "salt-minion",
];

/// Command lines for each tool: options before, between and after the arguments, every
/// spelling optparse knows, and its errors.
fn cases() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut c: Vec<(&str, Vec<&str>)> = vec![
        (
            "salt",
            vec!["*", "cmd.run", "echo hi", "--out", "json", "-t", "15"],
        ),
        (
            "salt",
            vec![
                "m1",
                "test.echo",
                "hello",
                "--out",
                "json",
                "--static",
                "-t",
                "10",
            ],
        ),
        ("salt", vec!["m1", "test.echo", "--", "--out"]),
        ("salt", vec!["--out=json", "-t10", "-L", "a,b", "test.ping"]),
        ("salt", vec!["-Lt10", "a,b", "test.ping"]),
        (
            "salt",
            vec!["-Ls", "a,b", "-v", "test.ping", "-", "--", "-t", "--", "x"],
        ),
        ("salt", vec!["-t", "0x10", "*", "test.ping"]),
        ("salt", vec!["-t", "010", "*", "test.ping"]),
        ("salt", vec!["-t", "08", "*", "test.ping"]),
        ("salt", vec!["-t", "-5", "*", "test.ping"]),
        ("salt", vec!["-t", " 1_0 ", "*", "test.ping"]),
        ("salt", vec!["-t", "x"]),
        ("salt", vec!["-t"]),
        ("salt", vec!["*", "test.ping", "--timeout"]),
        (
            "salt",
            vec!["--out-indent=-1", "--no-colour", "*", "test.ping"],
        ),
        ("salt", vec!["--ou", "json"]),
        ("salt", vec!["--outp", "json", "--stati", "--conf", "/x"]),
        (
            "salt",
            vec!["--config-di", "/x", "--hide", "--show-j", "*", "test.ping"],
        ),
        ("salt", vec!["--async=yes", "*", "test.ping"]),
        ("salt", vec!["-l", "debug", "-l", "info", "*", "test.ping"]),
        ("salt", vec!["-l", "loud", "*", "test.ping"]),
        (
            "salt",
            vec!["--log-level=trace", "--log-file", "salt.log", "*", "x"],
        ),
        ("salt", vec!["--log-file-level", "nope"]),
        (
            "salt",
            vec!["-G", "os:Debian", "-b", "10%", "--batch-wait", "1.5", "x"],
        ),
        ("salt", vec!["--batch-wait", "soon"]),
        ("salt", vec!["-C", "G@os:* and web*", "-d", "test.ping"]),
        (
            "salt",
            vec!["-I", "-J", "-S", "-E", "-N", "-P", "-R", "-H", "x"],
        ),
        (
            "salt",
            vec!["--return", "mysql", "--return_config", "a", "*", "x"],
        ),
        (
            "salt",
            vec![
                "-a",
                "pam",
                "-T",
                "--username",
                "u",
                "--password=p",
                "*",
                "x",
            ],
        ),
        ("salt", vec!["--bogus", "*", "test.ping"]),
        ("salt", vec!["*", "test.ping", "-X"]),
        ("salt", vec!["-sX"]),
        ("salt", vec!["---out", "json"]),
        ("salt", vec!["-V"]),
        ("salt", vec!["--version", "--bogus"]),
        ("salt", vec!["x", "--help"]),
        (
            "salt-run",
            vec!["jobs.lookup_jid", "20240101000000000000", "--out", "json"],
        ),
        (
            "salt-run",
            vec!["--async", "test.sleep", "s_time=1", "-t", "5"],
        ),
        (
            "salt-run",
            vec!["manage.up", "--out=yaml", "--quiet", "-l", "error"],
        ),
        ("salt-run", vec!["-d", "--jid", "1", "--skip-grains", "x"]),
        (
            "salt-run",
            vec!["--out-file", "/tmp/o", "--out-file-append", "x"],
        ),
        ("salt-run", vec!["--bogus"]),
        ("salt-run", vec!["--version"]),
        ("salt-key", vec!["-L"]),
        ("salt-key", vec!["-Ly", "--out", "json"]),
        ("salt-key", vec!["-l", "acc"]),
        ("salt-key", vec!["--list=all", "-q"]),
        ("salt-key", vec!["-ya", "web*", "--include-rej"]),
        ("salt-key", vec!["-yaweb*"]),
        ("salt-key", vec!["-d", "m1", "-y", "--include-all"]),
        ("salt-key", vec!["-Ayq"]),
        ("salt-key", vec!["-f", "*", "-F", "-p", "m1", "-P"]),
        (
            "salt-key",
            vec![
                "--gen-keys",
                "k",
                "--keysize=4096",
                "--gen-keys-dir",
                "/tmp",
            ],
        ),
        ("salt-key", vec!["--keysize", "big"]),
        (
            "salt-key",
            vec!["--log-level", "info", "--log-file", "k.log"],
        ),
        ("salt-key", vec!["-a"]),
        ("salt-key", vec!["--c", "/etc/salt"]),
        ("salt-key", vec!["--in"]),
        ("salt-key", vec!["--bogus"]),
        (
            "salt-call",
            vec!["--local", "test.echo", "hi", "--out", "json"],
        ),
        ("salt-call", vec!["test.echo", "--local", "--", "--local"]),
        (
            "salt-call",
            vec!["-g", "--local", "--id", "m9", "--retcode-passthrough"],
        ),
        (
            "salt-call",
            vec!["--local", "-m", "/a", "--module-dirs=/b", "-md", "x"],
        ),
        (
            "salt-call",
            vec!["--file-root", "/srv/salt", "--pillar-root=/srv/p", "x"],
        ),
        (
            "salt-call",
            vec!["-t", "30", "--priv", "root", "--set-metadata", "m", "x"],
        ),
        ("salt-call", vec!["--metadata", "--master", "m", "x"]),
        ("salt-call", vec!["--bogus"]),
        ("salt-api", vec!["-c", "/etc/salt", "-l", "info"]),
        (
            "salt-api",
            vec![
                "-d",
                "--pid-file=/run/api.pid",
                "--log-file",
                "/var/log/api",
            ],
        ),
        ("salt-api", vec!["-dl", "debug"]),
        ("salt-api", vec!["--disable-k"]),
        ("salt-api", vec!["-u", "salt"]),
        ("salt-api", vec!["--bogus"]),
        ("salt-master", vec!["-c", "/etc/salt", "-l", "info"]),
        (
            "salt-master",
            vec!["-d", "-u", "salt", "--pid-file", "/run/m.pid"],
        ),
        ("salt-master", vec!["-cl"]),
        ("salt-master", vec!["--log-level"]),
        ("salt-master", vec!["--bogus"]),
        ("salt-minion", vec!["-c/etc/salt", "-ldebug"]),
        (
            "salt-minion",
            vec!["--config-dir=/etc/salt", "--daemon", "--disable-keepalive"],
        ),
        ("salt-minion", vec!["-d=1"]),
        ("salt-minion", vec!["--daemon=1"]),
        ("salt-minion", vec!["--bogus"]),
    ];
    for t in TOOLS {
        c.push((t, vec!["--version"]));
        c.push((t, vec!["-h"]));
        c.push((t, vec!["-V"]));
    }
    c
}

const SALT_SIDE: &str = r#"
import contextlib, io, json, optparse, sys
import salt.utils.parsers as parsers

classes = {
    "salt": parsers.SaltCMDOptionParser,
    "salt-run": parsers.SaltRunOptionParser,
    "salt-key": parsers.SaltKeyOptionParser,
    "salt-call": parsers.SaltCallOptionParser,
    "salt-api": parsers.SaltAPIParser,
    "salt-master": parsers.MasterOptionParser,
    "salt-minion": parsers.MinionOptionParser,
}
results = []
for prog, argv in json.load(sys.stdin):
    parser = classes[prog](prog=prog)
    out, err = io.StringIO(), io.StringIO()
    res = {}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            values, args = optparse.OptionParser.parse_args(parser, list(argv), optparse.Values())
        res = {"code": 0, "parse": {"options": vars(values), "args": args}}
    except SystemExit as e:
        res = {"code": e.code if isinstance(e.code, int) else 1}
    res["stdout"] = out.getvalue()
    res["stderr"] = err.getvalue()
    results.append(res)
print(json.dumps(results))
"#;

fn salt_side(venv: &Path, cases: &[(&str, Vec<&str>)]) -> Vec<Value> {
    let mut child = Command::new(venv.join("bin/python"))
        .args(["-c", SALT_SIDE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the venv's python");
    let input = serde_json::to_vec(&json!(cases)).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Salt's parsers failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("Salt's side prints JSON")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn brine(tool: &str, argv: &[&str]) -> Run {
    let out = Command::new(bin(tool))
        .args(argv)
        .env(brine_protocol::optparse::PRINT_ENV, "1")
        .env("COLUMNS", "80")
        .stdin(Stdio::null())
        .output()
        .expect("run the tool");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Each binary prints its parse with BRINE_PRINT_OPTPARSE. Checked first with an option the
/// binaries have only since they parse as Salt's (a binary that does not know the variable
/// rejects it without doing anything), so that the other command lines never start a daemon
/// or act on /etc/salt.
fn assert_prints_its_parse(tool: &str) {
    let got = brine(tool, &["--log-file-level=info"]);
    let parse: Option<Value> = serde_json::from_str(&got.stdout).ok();
    assert_eq!(
        parse,
        Some(json!({"options": {"log_level_logfile": "info"}, "args": []})),
        "{tool} does not print its parse with BRINE_PRINT_OPTPARSE: exit {}, stderr {:?}",
        got.code,
        got.stderr
    );
}

#[test]
fn the_same_argv_parses_as_salt_3007_parses_it() {
    for tool in TOOLS {
        assert_prints_its_parse(tool);
    }
    let Some(venv) = std::env::var_os("BRINE_SALT3007").map(PathBuf::from) else {
        brine_e2e::missing_dependency(
            "cli_parse: the comparison with Salt needs BRINE_SALT3007 (scripts/salt-venvs)",
        );
        return;
    };
    let cases = cases();
    let salt = salt_side(&venv, &cases);
    let mut failures = Vec::new();
    for ((tool, argv), want) in cases.iter().zip(&salt) {
        let got = brine(tool, argv);
        let code = want["code"].as_i64().unwrap() as i32;
        let help = argv.iter().any(|a| *a == "-h" || *a == "--help");
        let ok = if code != 0 {
            got.code == code && got.stderr == want["stderr"].as_str().unwrap()
        } else if help {
            // Same first lines (usage); the option help is Brine's own prose.
            got.code == 0
                && got.stdout.lines().next() == want["stdout"].as_str().unwrap().lines().next()
        } else if want["parse"].is_null() {
            // --version
            got.code == 0 && got.stdout == want["stdout"].as_str().unwrap()
        } else {
            got.code == 0
                && serde_json::from_str::<Value>(&got.stdout).ok().as_ref() == Some(&want["parse"])
        };
        if !ok {
            failures.push(format!(
                "{tool} {argv:?}\n  Salt:  {want}\n  Brine: exit {} stdout {:?} stderr {:?}",
                got.code, got.stdout, got.stderr
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} command lines differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn an_unknown_option_is_optparses_usage_error() {
    for tool in TOOLS {
        let usage = match tool {
            "salt" => "salt [options] '<target>' <function> [arguments]".to_string(),
            "salt-run" | "salt-call" => format!("{tool} [options] <function> [arguments]"),
            _ => format!("{tool} [options]"),
        };
        for argv in [
            &["--bogus"][..],
            &["-c", "/nonexistent", "x", "--bogus", "y"],
        ] {
            let out = Command::new(bin(tool))
                .args(argv)
                .stdin(Stdio::null())
                .output()
                .expect("run the tool");
            assert_eq!(
                String::from_utf8_lossy(&out.stderr),
                format!("Usage: {usage}\n\n{tool}: error: no such option: --bogus\n"),
                "{tool} {argv:?}"
            );
            assert_eq!(
                out.status.code(),
                Some(64),
                "{tool} {argv:?}: Salt's EX_USAGE"
            );
            assert!(out.stdout.is_empty(), "{tool} {argv:?}");
        }
    }
}
