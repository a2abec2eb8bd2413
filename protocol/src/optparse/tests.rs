use super::tools;
use super::*;

fn parse(p: &Parser, argv: &[&str]) -> Parsed {
    p.parse(argv).unwrap_or_else(|e| panic!("{argv:?}: {e:?}"))
}

fn err(p: &Parser, argv: &[&str]) -> String {
    match p.parse(argv) {
        Err(Stop::Error(m)) => m,
        other => panic!("{argv:?}: expected an error, got {other:?}"),
    }
}

#[test]
fn options_anywhere_on_the_line() {
    let p = tools::salt();
    let r = parse(
        &p,
        &["*", "cmd.run", "echo hi", "--out", "json", "-t", "15"],
    );
    assert_eq!(r.args, ["*", "cmd.run", "echo hi"]);
    assert_eq!(r.str("output"), Some("json"));
    assert_eq!(r.int("timeout"), Some(15));
    let r = parse(
        &p,
        &["m1", "--static", "test.echo", "-t10", "hello", "--out=json"],
    );
    assert_eq!(r.args, ["m1", "test.echo", "hello"]);
    assert!(r.flag("static"));
    assert_eq!(r.int("timeout"), Some(10));
    assert_eq!(r.str("output"), Some("json"));
}

#[test]
fn double_dash_ends_options_and_lone_dash_is_an_argument() {
    let p = tools::salt();
    let r = parse(&p, &["m1", "test.echo", "--", "--out", "-t"]);
    assert_eq!(r.args, ["m1", "test.echo", "--out", "-t"]);
    assert!(r.values.is_empty());
    let r = parse(&p, &["-", "--", "--"]);
    assert_eq!(r.args, ["-", "--"]);
}

#[test]
fn grouped_short_options() {
    let p = tools::salt_key();
    let r = parse(&p, &["-Ly"]);
    assert!(r.flag("list_all") && r.flag("yes"));
    // A value-taking option ends the group and takes the rest.
    let r = parse(&p, &["-ya", "web*"]);
    assert_eq!(r.str("accept"), Some("web*"));
    let r = parse(&p, &["-yaweb*"]);
    assert_eq!(r.str("accept"), Some("web*"));
    assert!(r.flag("yes"));
    let r = parse(&tools::salt(), &["-Lt10", "a,b", "test.ping"]);
    assert!(r.flag("list"));
    assert_eq!(r.int("timeout"), Some(10));
    assert_eq!(err(&p, &["-yX"]), "no such option: -X");
}

#[test]
fn values_are_the_next_word_whatever_it_looks_like() {
    let p = tools::salt();
    let r = parse(&p, &["--out-indent", "-1", "-t", "-5"]);
    assert_eq!(r.int("output_indent"), Some(-1));
    assert_eq!(r.int("timeout"), Some(-5));
    let r = parse(&p, &["--return", "--out"]);
    assert_eq!(r.str("return"), Some("--out"));
    let r = parse(&p, &["--out="]);
    assert_eq!(r.str("output"), Some(""));
}

#[test]
fn long_prefixes() {
    let p = tools::salt();
    assert_eq!(
        parse(&p, &["--config-di", "/x"]).str("config_dir"),
        Some("/x")
    );
    assert_eq!(parse(&p, &["--stati"]).spelling("static"), "--static");
    // An exact name wins over the longer names it starts.
    assert_eq!(parse(&p, &["--out", "json"]).str("output"), Some("json"));
    assert_eq!(
        err(&p, &["--ou", "json"]),
        "ambiguous option: --ou (--out, --out-file, --out-file-append, --out-indent, --output, \
         --output-diff, --output-file, --output-file-append, --output-indent?)"
    );
    assert_eq!(err(&p, &["--bogus"]), "no such option: --bogus");
}

#[test]
fn optparse_messages() {
    let p = tools::salt();
    assert_eq!(err(&p, &["-t"]), "-t option requires 1 argument");
    assert_eq!(err(&p, &["--time"]), "--timeout option requires 1 argument");
    assert_eq!(
        err(&p, &["-t", "x"]),
        "option -t: invalid integer value: 'x'"
    );
    assert_eq!(
        err(&p, &["-t", "08"]),
        "option -t: invalid integer value: '08'"
    );
    assert_eq!(
        err(&p, &["--async=1"]),
        "--async option does not take a value"
    );
    assert_eq!(
        err(&p, &["-l", "foo"]),
        "option -l: invalid choice: 'foo' (choose from 'all', 'debug', 'error', 'critical', \
         'garbage', 'info', 'profile', 'quiet', 'trace', 'warning')"
    );
    assert_eq!(
        err(&p, &["--batch-wait", "x"]),
        "option --batch-wait: invalid floating-point value: 'x'"
    );
    assert_eq!(
        p.error_text("no such option: --bogus"),
        "Usage: salt [options] '<target>' <function> [arguments]\n\nsalt: error: no such option: --bogus\n"
    );
}

#[test]
fn python_integers() {
    for (s, v) in [
        ("15", 15),
        ("0x10", 16),
        ("0X1f", 31),
        ("010", 8),
        ("0", 0),
        ("0b101", 5),
        ("0b", 0),
        (" 7 ", 7),
        ("-3", -3),
        ("+3", 3),
        ("1_000", 1000),
        ("0o17", 15),
    ] {
        assert_eq!(py_optparse_int(s), Some(v), "{s}");
    }
    for s in ["", "x", "08", "1__0", "_1", "1_", "1.5", "-0x10", "0b2"] {
        assert_eq!(py_optparse_int(s), None, "{s}");
    }
}

#[test]
fn actions() {
    let p = tools::salt_call();
    let r = parse(&p, &["-m", "/a", "--module-dirs=/b", "test.ping"]);
    assert_eq!(r.list("module_dirs"), ["/a", "/b"]);
    let r = parse(&tools::salt(), &["--hide-timeout"]);
    assert!(r.is_set("show_timeout"));
    assert!(!r.bool_or("show_timeout", true));
    let r = parse(&tools::salt_master(), &["--log-file", "m.log"]);
    assert_eq!(r.str("log_file"), Some("./m.log"));
    let r = parse(&tools::salt_key(), &["--log-file", "/var/log/k"]);
    assert_eq!(r.str("key_logfile"), Some("/var/log/k"));
    assert_eq!(
        r.to_json(),
        serde_json::json!({"options": {"key_logfile": "/var/log/k"}, "args": []})
    );
}

#[test]
fn help_and_version_stop_at_once() {
    let p = tools::salt_run();
    assert_eq!(
        p.parse(&["--version", "--bogus"]),
        Err(Stop::Version(format!(
            "salt-run {} (Chlorine)",
            crate::SALT_VERSION
        )))
    );
    let Err(Stop::Help(h)) = p.parse(&["x", "-h"]) else {
        panic!("no help")
    };
    assert!(h.starts_with("Usage: salt-run [options] <function> [arguments]\n\n"));
    assert!(
        h.contains("\n  -c CONFIG_DIR, --config-dir=CONFIG_DIR\n"),
        "{h}"
    );
    assert!(h.contains("\n  --async               Run the job"), "{h}");
    // -V is a switch; the tool prints the report after a successful parse.
    assert!(parse(&p, &["-V"]).flag("versions_report"));
}

#[test]
fn every_tool_has_unique_names() {
    for name in [
        "salt",
        "salt-run",
        "salt-key",
        "salt-call",
        "salt-api",
        "salt-master",
        "salt-minion",
    ] {
        let p = tools::by_name(name).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for o in &p.options {
            for n in o.names {
                assert!(seen.insert(*n), "{name}: {n} twice");
            }
        }
        assert_eq!(p.prog, name);
    }
}
