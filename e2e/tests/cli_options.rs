//! Options anywhere on the command line, against a running master and minion: the exact
//! command lines of issue 9 do what Salt's tools do with them.

use std::time::Duration;

use brine_e2e::{async_jid, stderr, stdout, wait_until, Stack};
use serde_json::{json, Value};

fn json_of(st: &Stack, what: &str, out: &std::process::Output) -> Value {
    serde_json::from_str(stdout(out).trim()).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {}\nstderr: {}\n{}",
            stdout(out),
            stderr(out),
            st.logs()
        )
    })
}

#[test]
fn options_after_the_arguments() {
    let mut st = Stack::new("timeout: 5\n");
    st.start_master();
    st.start_minion("m1", "");
    st.wait_pending(&["m1"]);
    // Grouped switches: -A and -y.
    let acc = st.tool("salt-key", &["-Ay"]);
    assert!(acc.status.success(), "{}", stderr(&acc));
    st.wait_answering(&["m1"]);

    // The options after the command's argument are options, not a shell named 15.
    let out = st.tool(
        "salt",
        &["*", "cmd.run", "echo hi", "--out", "json", "-t", "15"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&st, "cmd.run", &out), json!({"m1": "hi"}));

    // ... and not three more arguments of test.echo.
    let out = st.tool(
        "salt",
        &[
            "m1",
            "test.echo",
            "hello",
            "--out",
            "json",
            "--static",
            "-t",
            "10",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&st, "test.echo", &out), json!({"m1": "hello"}));

    // `--out=json`, `-t10`, and `--` before an argument that looks like an option.
    let out = st.tool(
        "salt",
        &[
            "--out=json",
            "m1",
            "-t10",
            "test.echo",
            "--static",
            "--",
            "--out",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&st, "test.echo --", &out), json!({"m1": "--out"}));

    // salt-run honours --out after its arguments.
    let jid = async_jid(&st.tool("salt", &["m1", "test.echo", "looked up", "--async"]));
    let mut last = Value::Null;
    wait_until(Duration::from_secs(30), || {
        let out = st.tool("salt-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
        last = serde_json::from_str(stdout(&out).trim()).unwrap_or(Value::Null);
        last == json!({"m1": "looked up"})
    })
    .unwrap_or_else(|| {
        panic!(
            "salt-run jobs.lookup_jid {jid} --out json: {last}\n{}",
            st.logs()
        )
    });

    // salt-key: options after options' values, and a grouped switch.
    let out = st.tool("salt-key", &["-L", "--out", "json"]);
    assert_eq!(json_of(&st, "salt-key -L", &out)["minions"], json!(["m1"]));
    let out = st.tool("salt-key", &["--out", "json", "-p", "m1"]);
    let printed = json_of(&st, "salt-key -p", &out);
    assert!(
        printed["minions"]["m1"]
            .as_str()
            .is_some_and(|k| k.starts_with("-----BEGIN PUBLIC KEY-----")),
        "{printed}"
    );

    // salt-call: --local and --out after the function's argument.
    let minion_conf = st.dir.path().join("minion-m1/etc");
    let out = std::process::Command::new(brine_e2e::bin("salt-call"))
        .arg("test.echo")
        .arg("-c")
        .arg(&minion_conf)
        .args(["called", "--local", "--out=json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_of(&st, "salt-call", &out), json!({"local": "called"}));
}

#[test]
fn options_brine_does_not_implement_are_refused() {
    let st = Stack::new("");
    for (tool, args, opt) in [
        (
            "salt",
            &["--batch-safe-size", "3", "*", "test.ping"][..],
            "--batch-safe-size",
        ),
        (
            "salt",
            &["*", "test.ping", "--batch-safe-l", "1"],
            "--batch-safe-limit",
        ),
        (
            "salt-run",
            &["manage.up", "--out-file", "/tmp/x"],
            "--out-file",
        ),
        ("salt-key", &["--gen-keys", "k"], "--gen-keys"),
    ] {
        let out = st.tool(tool, args);
        assert_eq!(out.status.code(), Some(2), "{tool} {args:?}");
        assert_eq!(
            stderr(&out),
            format!("{tool}: {opt} is not supported by Brine\n"),
            "{tool} {args:?}"
        );
    }
}

/// The test runners that talk to the terminal, as real salt-run shows them: what
/// `test.stdout_print` prints, then its return; `test.stream`'s progress events as
/// `{suffix, event}`, then `True`.
#[test]
fn salt_run_prints_runner_output_and_progress_events() {
    let mut st = Stack::new("");
    st.start_master();
    let out = st.tool("salt-run", &["test.stdout_print"]);
    assert!(out.status.success(), "{}", brine_e2e::stderr(&out));
    assert_eq!(brine_e2e::stdout(&out), "foo\nbar\n");

    let out = st.tool("salt-run", &["test.stream", "--out", "json"]);
    assert!(out.status.success(), "{}", brine_e2e::stderr(&out));
    let text = brine_e2e::stdout(&out);
    let docs: Vec<Value> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(docs.len(), 100, "99 progress events and the return: {text}");
    assert_eq!(docs[0]["suffix"], "progress");
    assert_eq!(docs[0]["event"]["message"], "Runner is 1% done");
    assert!(docs[0]["event"]["_stamp"].is_string());
    assert_eq!(docs[98]["event"]["message"], "Runner is 99% done");
    assert_eq!(docs[99], Value::Bool(true));

    let out = st.tool("salt-run", &["--quiet", "test.stream"]);
    assert!(out.status.success());
    assert_eq!(brine_e2e::stdout(&out), "", "--quiet shows nothing");
}
