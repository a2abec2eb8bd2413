//! brine-swarm against Brine's real salt-master (the binaries in target/, see
//! `brine_e2e::bin`), driven by Brine's own `salt` CLI.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use brine_e2e::{stdout, wait_until, Stack};
use serde_json::Value as Json;

const N: usize = 50;

fn salt(stack: &Stack, args: &[&str]) -> Json {
    let mut a = vec!["--out", "json", "--static", "-t", "30"];
    a.extend_from_slice(args);
    let out = stack.tool("salt", &a);
    serde_json::from_str(stdout(&out).trim()).unwrap_or_else(|e| {
        panic!(
            "salt {args:?}: not JSON ({e}): {}\n{}",
            stdout(&out),
            brine_e2e::stderr(&out)
        )
    })
}

#[test]
fn fifty_simulated_minions_answer_glob_list_and_grain_targets() {
    let mut stack = Stack::new("auto_accept: True\n");
    stack.start_master();
    // Keys persist between runs in cargo's scratch directory; 1024 bits keeps the first run quick.
    let keys = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("swarm-keys-1024");
    let log_path = stack.dir.path().join("swarm.stderr");
    let log = std::fs::File::create(&log_path).unwrap();
    let swarm = Command::new(env!("CARGO_BIN_EXE_brine-swarm"))
        .args(["--master", "127.0.0.1", "--master-port"])
        .arg(stack.ret_port.to_string())
        .args([
            "--count",
            &N.to_string(),
            "--key-bits",
            "1024",
            "--keys-dir",
        ])
        .arg(&keys)
        .args(["--connect-rate", "200", "--auto-accept-wait", "1"])
        .args(["--grains", r#"{"role":"swarm","rack":"r7"}"#])
        .args([
            "--return-size",
            "3000",
            "--progress-secs",
            "1",
            "--duration",
            "600",
        ])
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("start brine-swarm");

    let ready = format!(" ready {N} ");
    wait_until(Duration::from_secs(120), || {
        brine_e2e::read(&log_path).contains(&ready)
    })
    .unwrap_or_else(|| {
        panic!(
            "the swarm never got {N} minions ready:\n{}\n{}",
            brine_e2e::read(&log_path),
            stack.logs()
        )
    });

    let pings = salt(&stack, &["*", "test.ping"]);
    let pings = pings.as_object().expect("a map of answers");
    assert_eq!(pings.len(), N, "{pings:?}");
    assert!(pings.values().all(|v| *v == Json::Bool(true)), "{pings:?}");
    assert!(pings.contains_key("swarm-0") && pings.contains_key("swarm-49"));

    let echo = salt(&stack, &["-G", "role:swarm", "test.echo", "hello"]);
    let echo = echo.as_object().expect("a map of answers");
    assert_eq!(echo.len(), N, "{echo:?}");
    assert!(echo.values().all(|v| v == "hello"), "{echo:?}");

    let none = stack.tool(
        "salt",
        &[
            "--out",
            "json",
            "--static",
            "-t",
            "5",
            "-G",
            "role:web",
            "test.ping",
        ],
    );
    assert!(!stdout(&none).contains("swarm-"), "{}", stdout(&none));

    // swarm-1 and swarm-10..19; test.blob without an argument returns --return-size bytes.
    let blobs = salt(&stack, &["swarm-1*", "test.blob"]);
    let blobs = blobs.as_object().expect("a map of answers");
    assert_eq!(blobs.len(), 11, "{blobs:?}");
    assert!(blobs
        .values()
        .all(|v| v.as_str().is_some_and(|s| s.len() == 3000)));

    let slow = salt(&stack, &["-L", "swarm-3,swarm-4", "test.sleep", "2"]);
    assert_eq!(slow["swarm-3"], Json::Bool(true), "{slow}");
    assert_eq!(slow["swarm-4"], Json::Bool(true), "{slow}");

    let version = salt(&stack, &["swarm-7", "test.version"]);
    assert_eq!(version["swarm-7"], brine_protocol::SALT_VERSION);

    // SIGTERM: the swarm prints its JSON summary and exits 0.
    let pid = swarm.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = swarm.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let summary: Json = serde_json::from_str(stdout(&out).trim()).expect("JSON summary");
    assert_eq!(summary["signed_in"], N, "{summary}");
    assert_eq!(summary["ready"], N, "{summary}");
    assert!(summary["all_ready_secs"].as_f64().is_some(), "{summary}");
    let expected_returns = (N + N + 11 + 2 + 1) as u64;
    assert!(
        summary["returns_acked"].as_u64().unwrap() >= expected_returns,
        "{summary}"
    );
    assert_eq!(
        summary["returns_acked"], summary["returns_sent"],
        "{summary}"
    );
    assert_eq!(summary["errors"], 0, "{summary}");
    // Pillar and two start events per minion.
    assert_eq!(summary["other_requests_acked"], 3 * N, "{summary}");
}
