//! Events a minion fires on the master's bus: `event.send` and `event.fire_master` run on
//! Brine's minion and on a real salt-minion 3007 (both signed in to Brine's master), by
//! `salt` and by `salt-call`, give the same returns and the same events (tag and data, with
//! each minion's id, jids and times taken out).
//!
//! Needs BRINE_SALT3007 (set by scripts/test).

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;

use brine_e2e::real::{self, Fleet};
use brine_e2e::{bin, event_data, Stack};
use serde_json::{json, Value};

const REAL: &str = "real7";
const BRINE: &str = "brine1";

/// One call: the function and its arguments after the minion id; the tag it fires.
const CASES: &[(&str, &[&str])] = &[
    ("brine/t/plain", &["event.send"]),
    (
        "brine/t/data",
        &[
            "event.send",
            r#"{"a": 1, "b": [1, 2], "c": "from data"}"#,
            "c=3",
            "d=4",
        ],
    ),
    (
        "brine/t/grains",
        &[
            "event.send",
            "with_grains=[os, os_family, nosuch]",
            "with_pillar=True",
        ],
    ),
    ("brine/t/opts", &["event.send", "with_env_opts=True"]),
    (
        "brine/t/preload",
        &["event.send", "preload={extra: 1}", "k=v"],
    ),
    ("brine/t/fire", &["event.fire_master", r#"{"x": 1}"#]),
    ("brine/t/fire_empty", &["event.fire_master", ""]),
    ("brine/t/fire_list", &["event.fire_master", "[1, 2]"]),
];

/// What stays the same from one minion to the other: the minion's id (as a key or a value),
/// jids, times and the process id Salt's publish data carries are taken out.
fn normal(v: &Value, id: &str) -> Value {
    let jid = regex::Regex::new(r"^\d{20}$").unwrap();
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "_stamp" | "ts" | "tok" | "__pub_pid"))
                .map(|(k, v)| {
                    let k = if k == id {
                        "<ID>".to_string()
                    } else {
                        k.clone()
                    };
                    (k, normal(v, id))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| normal(v, id)).collect()),
        Value::String(s) if s == id => json!("<ID>"),
        Value::String(s) if jid.is_match(s) => json!("<JID>"),
        other => other.clone(),
    }
}

/// Each case on minion `id` through `salt`, then `event.send` through `salt-call` (the
/// minion's own, from `venv` for the real one): each return and the event it fired.
fn run(st: &Stack, bus: &mut UnixStream, id: &str, venv: Option<&Path>) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for (tag, call) in CASES {
        let mut args = vec![id, call[0]];
        // event.send takes the tag first, event.fire_master last.
        if call[0] == "event.send" {
            args.push(tag);
            args.extend_from_slice(&call[1..]);
        } else {
            args.extend_from_slice(&call[1..]);
            args.push(tag);
        }
        let (ret, _) = st.salt_json(&args);
        let data = event_data(bus, tag);
        out.push((normal(&ret, id), normal(&data, id)));
    }
    let etc = st.dir.path().join(format!("minion-{id}/etc"));
    let mut cmd = match venv {
        Some(v) => Command::new(v.join("bin/salt-call")),
        None => Command::new(bin("salt-call")),
    };
    let tag = "brine/t/salt_call";
    let o = cmd
        .arg("-c")
        .arg(&etc)
        .args(["--out", "json", "event.send", tag, "{k: v}", "n=1"])
        .output()
        .expect("salt-call");
    let ret: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "salt-call on {id}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    out.push((normal(&ret, id), normal(&event_data(bus, tag), id)));
    out
}

#[test]
fn minions_fire_events_on_the_master_as_salt_minion_does() {
    let Some((v7, _)) = real::venvs() else {
        return;
    };
    let mut st = Stack::new("timeout: 30\n");
    st.start_master();
    let fleet = Fleet(vec![st.start_real_minion(&v7, REAL, "")]);
    st.start_minion(BRINE, "");
    st.accept(&[REAL, BRINE]);
    let mut bus = UnixStream::connect(st.master_root().join("sock/master_event_pub.ipc")).unwrap();
    let theirs = run(&st, &mut bus, REAL, Some(&v7));
    let ours = run(&st, &mut bus, BRINE, None);
    drop(fleet);
    let names = CASES
        .iter()
        .map(|(tag, _)| *tag)
        .chain(["brine/t/salt_call"]);
    let diffs: Vec<String> = names
        .zip(ours.iter().zip(&theirs))
        .filter(|(_, (o, t))| o != t)
        .map(|(tag, (o, t))| {
            format!(
                "{tag}:\nBrine: {}\nSalt:  {}",
                serde_json::to_string(o).unwrap(),
                serde_json::to_string(t).unwrap()
            )
        })
        .collect();
    assert!(diffs.is_empty(), "{}", diffs.join("\n\n"));
}
