//! The README's first command on a bare Debian machine: the binaries need no library that
//! scripts/build-deps does not install (nothing from a -dev package, not libpam), and
//! `scripts/dev-stack` starts a stack that answers a login and a `test.ping` through the API.

use brine_e2e::{bin, children_of, free_port, process_gone, wait_until};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BINARIES: &[&str] = &[
    "salt-api",
    "salt-master",
    "salt-minion",
    "salt",
    "salt-key",
    "salt-run",
    "salt-call",
];

/// Shared libraries of a bare Debian 12 (glibc, libgcc-s1, libstdc++6, libcrypt1, which the
/// essential perl-base and login need), plus libssl3, which scripts/build-deps installs with
/// libssl-dev (and the Dockerfile's runtime image has).
fn runtime_library(name: &str) -> bool {
    const GLIBC: &[&str] = &[
        "libc.so.6",
        "libm.so.6",
        "libpthread.so.0",
        "libdl.so.2",
        "librt.so.1",
        "libutil.so.1",
    ];
    GLIBC.contains(&name)
        || name.starts_with("ld-linux")
        || matches!(
            name,
            "libgcc_s.so.1" | "libstdc++.so.6" | "libcrypt.so.1" | "libssl.so.3" | "libcrypto.so.3"
        )
}

/// The `NEEDED` entries of an ELF file's dynamic section.
fn needed(path: &Path) -> Vec<String> {
    let out = Command::new("readelf")
        .args(["-d", "-W"])
        .arg(path)
        .output()
        .expect("readelf (binutils, installed with gcc) runs");
    assert!(out.status.success(), "readelf -d {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_string()))
        .collect()
}

#[test]
fn binaries_link_only_what_a_bare_machine_has() {
    let debug_dir = bin("salt").parent().expect("profile dir").to_path_buf();
    // The release binaries too, when they were built (scripts/dev-stack builds them).
    let release_dir = debug_dir.with_file_name("release");
    let mut bad = Vec::new();
    for dir in [debug_dir, release_dir] {
        for name in BINARIES {
            let path = dir.join(name);
            if !path.exists() {
                continue;
            }
            let libs = needed(&path);
            assert!(libs.iter().any(|l| l == "libc.so.6"), "{libs:?}");
            for lib in libs.into_iter().filter(|l| !runtime_library(l)) {
                bad.push(format!("{} needs {lib}", path.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "libraries a bare Debian machine (plus scripts/build-deps) does not have:\n{}",
        bad.join("\n")
    );
}

/// `scripts/dev-stack`, in its own process group. [`DevStack::stop`] stops the script as
/// Ctrl-C would, and the script stops its stack; dropped, whatever is left of the group (a
/// build the script was running when a test failed) is killed as well.
struct DevStack {
    child: Child,
}

impl DevStack {
    fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let stopped = wait_until(Duration::from_secs(15), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        });
        if stopped.is_none() {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            let _ = self.child.wait();
        }
    }
}

impl Drop for DevStack {
    fn drop(&mut self) {
        self.stop();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn dev_stack_starts_a_working_stack() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    // The debug binaries the tests run: the script's build is then a no-op.
    let target = bin("salt")
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    let dir = tempfile::tempdir().expect("temp dir");
    let (ret, publish, api) = (free_port(), free_port(), free_port());
    let mut child = {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(repo.join("scripts/dev-stack"));
        // What cargo sets for a test (ring's build script reruns when CARGO_PKG_NAME changes).
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("CARGO_")
                && !matches!(key.as_ref(), "CARGO_HOME" | "CARGO_TARGET_DIR")
                && !key.starts_with("CARGO_BUILD_")
                && !key.starts_with("CARGO_PROFILE_")
            {
                cmd.env_remove(key.as_ref());
            }
        }
        cmd.arg(dir.path().join("stack"))
            .env("CARGO_TARGET_DIR", &target)
            .env("BRINE_PROFILE", "dev")
            .env("BRINE_RET_PORT", ret.to_string())
            .env("BRINE_PUBLISH_PORT", publish.to_string())
            .env("BRINE_API_PORT", api.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .expect("scripts/dev-stack starts")
    };
    let stdout = child.stdout.take().expect("stdout");
    let mut stack = DevStack { child };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("dev-stack: {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The script prints its help once the keys are accepted and both minions answer.
    let ready = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(180)).ok())
        .any(|line| line.starts_with("Brine is running in"));
    assert!(ready, "scripts/dev-stack did not report a running stack");

    let base = format!("http://127.0.0.1:{api}");
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client");
    let login: Value = http
        .post(format!("{base}/login"))
        .json(&json!({"username": "dev", "password": "dev", "eauth": "auto"}))
        .send()
        .and_then(|r| r.error_for_status())
        .and_then(|r| r.json())
        .expect("the dev login works");
    let token = login["return"][0]["token"]
        .as_str()
        .expect("a token")
        .to_string();
    let ping: Value = http
        .post(format!("{base}/"))
        .header("X-Auth-Token", &token)
        .json(&json!({"client": "local", "tgt": "*", "fun": "test.ping"}))
        .send()
        .and_then(|r| r.error_for_status())
        .and_then(|r| r.json())
        .expect("test.ping through the API");
    assert_eq!(
        ping["return"][0],
        json!({"minion1": true, "minion2": true}),
        "{ping}"
    );

    // Stopping the script stops the whole stack.
    let daemons: Vec<u32> = children_of(stack.child.id())
        .into_iter()
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(daemons.len(), 4, "master, two minions and salt-api");
    stack.stop();
    assert!(
        wait_until(Duration::from_secs(10), || daemons
            .iter()
            .all(|&p| process_gone(p)))
        .is_some(),
        "daemons left running after the script stopped"
    );
}
