//! Persisted grains, end to end: Brine's minion reads `<config dir>/grains` at start, changes
//! it with `grains.setval`/`append`/`set`/`delval` as Salt 3007 does, and the next job, the
//! master's grain targeting (`salt -G`) and `saltutil.refresh_grains` see the new values.
//!
//! With BRINE_SALT3007 (set by scripts/test), a real salt-minion 3007 on the same Brine master
//! runs the same calls: the same returns and the same grains file.

use std::fs;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use brine_e2e::real::Fleet;
use brine_e2e::{bin, wait_until, Stack};
use serde_json::{json, Value};

const REAL: &str = "real7";
const BRINE: &str = "brine1";

/// The configuration directory of a minion started by `Stack::start_minion` (or written by
/// `real::write_minion_conf` under the same root).
fn etc(st: &Stack, id: &str) -> PathBuf {
    st.dir.path().join(format!("minion-{id}")).join("etc")
}

fn grains_file(st: &Stack, id: &str) -> String {
    fs::read_to_string(etc(st, id).join("grains")).unwrap_or_default()
}

/// `salt -t 30 <tgt> <fun> <args>`: the parsed output.
fn salt(st: &Stack, tgt: &[&str], fun: &str, args: &[&str]) -> Value {
    let mut a = vec!["-t", "30"];
    a.extend_from_slice(tgt);
    a.push(fun);
    a.extend_from_slice(args);
    st.salt_json(&a).0
}

/// `salt -t 30 brine1 <fun> <args>`: the Brine minion's return.
fn one(st: &Stack, fun: &str, args: &[&str]) -> Value {
    salt(st, &[BRINE], fun, args)[BRINE].clone()
}

/// Wait until `grains.get key` answers `want` on every minion of `ids` (a real minion collects
/// its grains again after the job that changed them has returned).
fn wait_grain(st: &Stack, ids: &[&str], key: &str, want: &Value) {
    let list = ids.join(",");
    let mut last = Value::Null;
    wait_until(Duration::from_secs(60), || {
        last = salt(st, &["-L", &list], "grains.get", &[key]);
        ids.iter().all(|id| &last[*id] == want)
    })
    .unwrap_or_else(|| {
        panic!(
            "grains.get {key} never answered {want} on {ids:?}: {last}\n{}",
            st.logs()
        )
    });
}

/// Wait until `salt -G <expr> test.ping` is answered by exactly `ids`.
fn wait_targeted(st: &Stack, expr: &str, ids: &[&str]) {
    let want: serde_json::Map<String, Value> = ids
        .iter()
        .map(|id| (id.to_string(), Value::Bool(true)))
        .collect();
    let mut last = Value::Null;
    wait_until(Duration::from_secs(60), || {
        let out = st.tool(
            "salt",
            &[
                "--out",
                "json",
                "--static",
                "-t",
                "10",
                "-G",
                expr,
                "test.ping",
            ],
        );
        last = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        last == Value::Object(want.clone())
    })
    .unwrap_or_else(|| panic!("salt -G {expr} answered {last}, not {ids:?}\n{}", st.logs()));
}

/// Brine's `salt-call --local -c <etc> --out json <args>`: the parsed output.
fn salt_call_local(etc: &Path, args: &[&str]) -> Value {
    let out = Command::new(bin("salt-call"))
        .arg("--local")
        .arg("-c")
        .arg(etc)
        .args(["--out", "json"])
        .args(args)
        .output()
        .expect("run salt-call");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "salt-call {args:?}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn brines_minion_keeps_grains_in_its_grains_file() {
    let mut st = Stack::new("auto_accept: True\ntimeout: 20\n");
    st.start_master();
    // The static grains file is there before the minion starts; the config's `grains` win.
    fs::create_dir_all(etc(&st, BRINE)).unwrap();
    fs::write(
        etc(&st, BRINE).join("grains"),
        "static_role: fromfile\nshadowed: fromfile\n",
    )
    .unwrap();
    let mut bus = UnixStream::connect(st.master_root().join("sock/master_event_pub.ipc")).unwrap();
    bus.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    st.start_minion(
        BRINE,
        "grains:\n  shadowed: fromconf\nstart_event_grains: [static_role, shadowed, nosuch]\n",
    );
    // The start event carries the grains `start_event_grains` names, as Salt's does.
    let start = brine_e2e::event_data(&mut bus, &format!("salt/minion/{BRINE}/start"));
    assert_eq!(
        start["grains"],
        json!({"static_role": "fromfile", "shadowed": "fromconf"}),
        "{start}"
    );
    st.wait_answering(&[BRINE]);
    assert_eq!(one(&st, "grains.get", &["static_role"]), json!("fromfile"));
    assert_eq!(one(&st, "grains.get", &["shadowed"]), json!("fromconf"));

    // A set grain is written to the file, seen by the next job and by the master's targeting.
    assert_eq!(
        one(&st, "grains.setval", &["role", "web"]),
        json!({"role": "web"})
    );
    assert_eq!(
        grains_file(&st, BRINE),
        "role: web\nshadowed: fromfile\nstatic_role: fromfile\n"
    );
    assert_eq!(one(&st, "grains.get", &["role"]), json!("web"));
    wait_targeted(&st, "role:web", &[BRINE]);
    wait_targeted(&st, "static_role:fromfile", &[BRINE]);

    assert_eq!(
        one(&st, "grains.append", &["roles", "a"]),
        json!({"roles": ["a"]})
    );
    assert_eq!(
        one(&st, "grains.append", &["roles", "a"]),
        json!("The val a was already in the list roles")
    );
    wait_targeted(&st, "roles:a", &[BRINE]);
    assert_eq!(
        one(&st, "grains.delval", &["role"]),
        json!({"comment": "", "changes": {"role": null}, "result": true})
    );
    assert_eq!(one(&st, "grains.get", &["role"]), Value::Null);
    let (v, _) = st.salt_json(&["-t", "30", BRINE, "grains.set", "roles", "[x]"]);
    assert_eq!(
        v[BRINE],
        json!({"comment": "The key 'roles' exists but is a dict or a list. Use 'force=True' to overwrite.", "changes": {}, "result": false})
    );
    let out = st.tool("salt", &["-t", "30", BRINE, "grains.set", "roles", "[x]"]);
    assert_ne!(
        out.status.code(),
        Some(0),
        "a refused grains.set is a failed job"
    );

    // The file edited by hand: saltutil.refresh_grains reads it again.
    fs::write(etc(&st, BRINE).join("grains"), "role: edited\n").unwrap();
    assert_eq!(one(&st, "grains.get", &["role"]), Value::Null);
    assert_eq!(one(&st, "saltutil.refresh_grains", &[]), json!(true));
    assert_eq!(one(&st, "grains.get", &["role"]), json!("edited"));
    assert_eq!(one(&st, "grains.get", &["static_role"]), json!(""));
    wait_targeted(&st, "role:edited", &[BRINE]);

    // After a restart the file's grains are there again.
    st.kill_minion(BRINE);
    st.restart_minion(BRINE);
    st.wait_answering(&[BRINE]);
    assert_eq!(one(&st, "grains.get", &["role"]), json!("edited"));

    // salt-call --local reads and writes the same file.
    assert_eq!(
        salt_call_local(&etc(&st, BRINE), &["grains.get", "role"]),
        json!({"local": "edited"})
    );
    assert_eq!(
        salt_call_local(&etc(&st, BRINE), &["grains.setval", "via_call", "yes"]),
        json!({"local": {"via_call": true}})
    );
    assert_eq!(grains_file(&st, BRINE), "role: edited\nvia_call: true\n");
}

/// One call both minions make: the function, its arguments, the return, and the grain (and
/// value) both must show before the next call.
type Step<'a> = (&'a str, &'a [&'a str], Value, Option<(&'a str, Value)>);

/// The real Salt 3007 venv, or `None` (with a note) when BRINE_SALT3007 is not set.
fn salt3007() -> Option<PathBuf> {
    match std::env::var_os("BRINE_SALT3007") {
        Some(v) if !v.is_empty() => {
            let v = PathBuf::from(v);
            assert!(
                v.join("bin/salt-minion").exists(),
                "{} has no bin/salt-minion: run scripts/salt-venvs",
                v.display()
            );
            Some(v)
        }
        _ => {
            brine_e2e::missing_dependency(
                "the grains comparison needs real Salt (BRINE_SALT3007): run scripts/test",
            );
            None
        }
    }
}

#[test]
fn brines_minion_changes_grains_as_salt_minion_does() {
    let Some(v7) = salt3007() else {
        return;
    };
    let mut st = Stack::new("timeout: 30\n");
    st.start_master();
    let fleet = Fleet(vec![st.start_real_minion(&v7, REAL, "")]);
    st.start_minion(BRINE, "");
    st.accept(&[REAL, BRINE]);
    let both = [REAL, BRINE];
    let list = both.join(",");

    // Each call runs on both minions; the returns must be the same. `then` is the grain and
    // value both must show before the next call (a real minion collects its grains again
    // after the job returned).
    let steps: &[Step] = &[
        (
            "grains.setval",
            &["role", "web"],
            json!({"role": "web"}),
            Some(("role", json!("web"))),
        ),
        (
            "grains.append",
            &["roles", "a"],
            json!({"roles": ["a"]}),
            Some(("roles", json!(["a"]))),
        ),
        (
            "grains.append",
            &["roles", "a"],
            json!("The val a was already in the list roles"),
            None,
        ),
        (
            "grains.append",
            &["roles", "[b, c]"],
            json!({"roles": ["a", "b", "c"]}),
            Some(("roles", json!(["a", "b", "c"]))),
        ),
        (
            "grains.append",
            &["role", "x"],
            json!("The key role is not a valid list"),
            None,
        ),
        (
            "grains.set",
            &["apps:web:port", "8080"],
            json!({"comment": "", "changes": {"apps": {"web": {"port": 8080}}}, "result": true}),
            Some(("apps:web:port", json!(8080))),
        ),
        (
            "grains.set",
            &["apps:web", "{port: 1}"],
            json!({"comment": "The key 'apps:web' exists but is a dict or a list. Use 'force=True' to overwrite.", "changes": {}, "result": false}),
            None,
        ),
        (
            "grains.remove",
            &["roles", "b"],
            json!({"roles": ["a", "c"]}),
            Some(("roles", json!(["a", "c"]))),
        ),
        (
            "grains.delval",
            &["role"],
            json!({"comment": "", "changes": {"role": null}, "result": true}),
            Some(("role", Value::Null)),
        ),
        (
            "grains.delkey",
            &["apps"],
            json!({"comment": "The key 'apps' exists but is a dict or a list. Use 'force=True' to overwrite.", "changes": {}, "result": false}),
            None,
        ),
        (
            "grains.delkey",
            &["apps", "force=True"],
            json!({"comment": "", "changes": {"apps": null}, "result": true}),
            Some(("apps", json!(""))),
        ),
        ("grains.has_value", &["roles:1"], json!(true), None),
        ("grains.equals", &["roles:1", "c"], json!(true), None),
    ];
    for (fun, args, want, then) in steps {
        let got = salt(&st, &["-L", &list], fun, args);
        for id in both {
            assert_eq!(&got[id], want, "{id}: {fun} {args:?}\n{}", st.logs());
        }
        if let Some((key, value)) = then {
            wait_grain(&st, &both, key, value);
        }
    }
    let written = grains_file(&st, REAL);
    assert_eq!(written, "role: null\nroles:\n- a\n- c\n");
    assert_eq!(grains_file(&st, BRINE), written);

    // The master targets both by the grains they set, and only the Brine minion by its own.
    wait_targeted(&st, "roles:c", &both);
    let only = salt(&st, &[BRINE], "grains.setval", &["only", "brine"]);
    assert_eq!(only[BRINE], json!({"only": "brine"}));
    wait_targeted(&st, "only:brine", &[BRINE]);

    // saltutil.refresh_grains after the files were edited by hand.
    for id in both {
        fs::write(etc(&st, id).join("grains"), "edited: byhand\n").unwrap();
    }
    let got = salt(&st, &["-L", &list], "saltutil.refresh_grains", &[]);
    assert_eq!(got, json!({REAL: true, BRINE: true}));
    wait_grain(&st, &both, "edited", &json!("byhand"));
    wait_grain(&st, &both, "roles", &json!(""));
    wait_targeted(&st, "edited:byhand", &both);
    drop(fleet);
}
