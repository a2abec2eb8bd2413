//! salt-call --local runs a function on the spot, with Salt's output and exit codes; without a
//! master to sign in to, salt-call stops as Salt's does.

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

    // Without --local and with no master answering: Salt's one-line message and exit code 2
    // once the sign-in times out, not a hang.
    let conf = std::fs::read_to_string(d.path().join("minion")).unwrap();
    std::fs::write(
        d.path().join("minion"),
        format!(
            "{conf}master: 127.0.0.1\nmaster_port: {}\nauth_timeout: 1\n",
            brine_e2e::free_port()
        ),
    )
    .unwrap();
    let o = std::process::Command::new(bin("salt-call"))
        .arg("-c")
        .arg(d.path())
        .arg("test.ping")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        "Minion failed to authenticate with the master, has the minion key been accepted?"
    );
}

/// Grains Salt computes that Brine does not report, each for a reason: the Python interpreter
/// running Salt (`pythonexecutable`, `pythonpath`, `pythonversion`) and how Salt was packaged
/// (`package`) do not exist in Brine; `fqdns` needs reverse DNS lookups of every address.
const GRAINS_NOT_REPORTED: &[&str] = &[
    "fqdns",
    "package",
    "pythonexecutable",
    "pythonpath",
    "pythonversion",
];

#[test]
fn core_grains_are_those_salt_reports() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("minion"),
        format!(
            "id: caller\nroot_dir: {0}\nfile_client: local\n",
            d.path().display()
        ),
    )
    .unwrap();
    let real = std::process::Command::new(salt3007.join("bin/salt-call"))
        .arg("-c")
        .arg(d.path())
        .args(["--local", "--out", "json", "grains.items"])
        .output()
        .unwrap();
    let real: serde_json::Value = serde_json::from_slice(&real.stdout)
        .unwrap_or_else(|e| panic!("real salt-call: {e}: {}", stderr(&real)));
    let ours = salt_call(d.path(), &["--out", "json", "grains.items"]);
    let ours: serde_json::Value = serde_json::from_slice(&ours.stdout).unwrap();
    let (real, ours) = (
        real["local"].as_object().unwrap(),
        ours["local"].as_object().unwrap(),
    );
    let missing: Vec<&String> = real
        .keys()
        .filter(|k| !ours.contains_key(*k) && !GRAINS_NOT_REPORTED.contains(&k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "grains Salt reports and Brine does not: {missing:?}"
    );
    // Host facts read from the same machine agree.
    for k in [
        "disks",
        "ssds",
        "dns",
        "efi",
        "fibre_channel_host",
        "ip_gw",
        "ip4_gw",
        "ip6_gw",
        "num_gpus",
        "zfs_support",
        "transactional",
        "ps",
    ] {
        if real.contains_key(k) {
            assert_eq!(real[k], ours[k], "grain {k}");
        }
    }
}
