//! salt-call --local runs a function on the spot, with Salt's output and exit codes.

use brine_e2e::{bin, stderr, stdout};

fn salt_call(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(bin("salt-call"))
        .arg("-c")
        .arg(dir)
        .arg("--local")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn salt_call_local() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("minion"),
        format!(
            "id: caller\nroot_dir: {0}\ngrains:\n  role: tester\n",
            d.path().display()
        ),
    )
    .unwrap();
    let o = salt_call(d.path(), &["test.ping"]);
    assert_eq!(stdout(&o), "local:\n    True\n", "{}", stderr(&o));
    assert!(o.status.success());

    let o = salt_call(d.path(), &["--out", "json", "grains.item", "role", "id"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"local": {"role": "tester", "id": "caller"}})
    );

    let o = salt_call(
        d.path(),
        &["--out", "json", "cmd.run_all", "echo hi; exit 4"],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["local"]["stdout"], "hi");
    assert_eq!(v["local"]["retcode"], 4);
    assert_eq!(o.status.code(), Some(1));
    let o = salt_call(
        d.path(),
        &["--retcode-passthrough", "cmd.retcode", "exit 5"],
    );
    assert_eq!(o.status.code(), Some(5));

    let o = salt_call(d.path(), &["nosuch.func"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("'nosuch.func' is not available."),
        "{}",
        stdout(&o)
    );

    // Without --local: a one-line refusal, not a hang.
    let o = std::process::Command::new(bin("salt-call"))
        .arg("-c")
        .arg(d.path())
        .arg("test.ping")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).trim().lines().count(), 1);
}
