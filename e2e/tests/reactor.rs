//! The reactor as Salt's runs it: the same `reactor:` map and reaction files (those of
//! `orchestration-spec.md` §9, adapted) on Brine's master and on a real salt-master 3007, each
//! with the same two minions (Brine's), and the same events fired on each master's bus. The
//! jobs the reactions start must be the same: the local jobs (their `new`, `publish` and
//! return events, in publish order), the runner and wheel jobs (`salt/run|wheel/<jid>/new|ret`,
//! user `Reactor`), and none at all for a render error, a missing file, invalid high data or
//! an event of the reactor's own jobs; and both masters' logs name those failures alike.
//!
//! Events are fired on the bus's pull socket as Salt's `event.send` runner fires them (the
//! same on both masters, without a runner job's own events). What differs by nature is normalised: jids, `_stamp`, key
//! fingerprints. The runner and wheel jobs run in a pool, so their order is not compared.
//!
//! Needs BRINE_SALT3007 (set by scripts/test).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use brine_e2e::masters::{events_until_quiet, write, Master};
use brine_e2e::real;
use brine_e2e::wait_until;
use serde_json::{json, Map, Value};

const MASTER_ID: &str = "reactor_master";
const MINIONS: [&str; 2] = ["m1", "m2"];

/// The reaction files: read from disk (`reactor/`) and from the file server (`salt/`).
fn write_reactions(reactor: &Path, salt: &Path) {
    let files: &[(&str, &str)] = &[
        (
            "react.sls",
            "react_ping:\n  local.test.ping:\n    - tgt: {{ data.get('target', 'm1') }}\n\n\
             react_runner:\n  runner.test.arg:\n    - args:\n      - tag: {{ tag }}\n\
             \x20     - payload: {{ data.get('payload', 'none') }}\n\n\
             react_wheel:\n  wheel.key.list_all: []\n\n\
             react_legacy_local:\n  cmd.test.echo:\n    - tgt: m2\n    - arg:\n      - legacy {{ tag }}\n",
        ),
        (
            "multi_a.sls",
            "zz_from_a:\n  local.test.echo:\n    - tgt: m1\n    - args:\n      - text: from_a\n",
        ),
        (
            "multi_b.sls",
            "aa_from_b:\n  local.test.echo:\n    - tgt: m1\n    - arg:\n      - from_b\n",
        ),
        (
            "legacy.sls",
            "legacy_runner:\n  runner.test.arg:\n    - foo: bar\n    - tgt: ignored\n\n\
             legacy_runner_lookup:\n  runner.jobs.list_jobs:\n    - search_function: test.nothing\n\n\
             legacy_wheel:\n  wheel.key.finger:\n    - match: m2\n\n\
             local_kwarg:\n  local.test.arg:\n    - tgt: m1\n    - arg: [a, b]\n    - kwarg:\n\
             \x20       k: v\n    - tgt_type: glob\n    - ret: ''\n\n\
             local_list_tgt:\n  local.test.ping:\n    - tgt: [m1, m2]\n    - tgt_type: list\n",
        ),
        (
            "ctx.sls",
            "ctx_dump:\n  runner.test.arg:\n    - args:\n      - tag: {{ tag | json }}\n\
             \x20     - data: {{ data | json }}\n      - grains_id: {{ grains.get('id') | json }}\n\
             \x20     - opts_id: {{ opts.get('id') | json }}\n      - pillar: {{ pillar | json }}\n\
             \x20     - salt_echo: {{ salt['test.echo']('hi') | json }}\n\
             \x20     - sls: {{ sls | default('undef') | json }}\n\
             \x20     - saltenv: {{ saltenv | default('undef') | json }}\n",
        ),
        (
            "order.sls",
            "z_first:\n  local.test.echo:\n    - tgt: m1\n    - arg: [z_first]\n    - order: 1\n\
             a_last:\n  local.test.echo:\n    - tgt: m1\n    - arg: [a_last]\n    - order: last\n\
             m_middle:\n  local.test.echo:\n    - tgt: m2\n    - arg: [m_middle]\n\
             b_middle:\n  local.test.echo:\n    - tgt: m2\n    - arg: [b_middle]\n",
        ),
        (
            "broken.sls",
            "x:\n  local.test.ping:\n    - tgt: {{ data['nope']['deeper'] }}\n",
        ),
        ("invalid.sls", "nofun:\n  local:\n    - tgt: m1\n"),
        ("caller.sls", "caller_ping:\n  caller.test.ping: []\n"),
    ];
    for (name, text) in files {
        write(&reactor.join(name), text);
    }
    write(
        &salt.join("reactor/other.sls"),
        "other_echo:\n  local.test.echo:\n    - tgt: m1\n    - args:\n      - text: from_salt_url\n",
    );
}

/// The `reactor:` map over the files of [`write_reactions`].
fn reactor_conf(reactor: &Path) -> String {
    let r = reactor.display();
    format!(
        "reactor:\n\
         \x20 - 'brine/test/*':\n    - {r}/react.sls\n\
         \x20 - 'brine/other':\n    - salt://reactor/other.sls\n\
         \x20 - 'brine/broken':\n    - {r}/broken.sls\n\
         \x20 - 'brine/missing':\n    - {r}/does_not_exist.sls\n\
         \x20 - 'brine/multi':\n    - {r}/multi_a.sls\n    - {r}/multi_b.sls\n\
         \x20 - 'brine/legacy':\n    - {r}/legacy.sls\n\
         \x20 - 'brine/invalid':\n    - {r}/invalid.sls\n\
         \x20 - 'brine/ctx':\n    - {r}/ctx.sls\n\
         \x20 - 'brine/order':\n    - {r}/order.sls\n\
         \x20 - 'brine/caller':\n    - {r}/caller.sls\n"
    )
}

/// The reaction files under a master's root and the map over them; where they are.
fn setup(root: &Path) -> (String, PathBuf) {
    let reactor = root.join("reactor");
    write_reactions(&reactor, &root.join("srv/salt"));
    (reactor_conf(&reactor), reactor)
}

/// `master` with minions m1 and m2, set up by [`setup`]: the master and where its reaction
/// files are.
fn start(master: impl FnOnce(&dyn Fn(&Path) -> String) -> Master) -> (Master, PathBuf) {
    let place = std::cell::RefCell::new(PathBuf::new());
    let m = master(&|root: &Path| {
        let (conf, reactor) = setup(root);
        *place.borrow_mut() = reactor;
        conf
    });
    (m, place.into_inner())
}

/// What stays the same from one run to the next and from one master to the other.
fn normal(v: &Value) -> Value {
    let jid = regex::Regex::new(r"^\d{20}$").unwrap();
    let finger = regex::Regex::new(r"^([0-9a-f]{2}:){15,}[0-9a-f]{2}$").unwrap();
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "_stamp" | "ts"))
                .map(|(k, v)| (k.clone(), normal(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normal).collect()),
        Value::String(s) if jid.is_match(s) => json!("<JID>"),
        Value::String(s) if finger.is_match(s) => json!("<FINGER>"),
        other => other.clone(),
    }
}

/// The jobs one event started, from the events that followed it: the local jobs in publish
/// order (each with its `new`, `publish` and minion-count events and what its minions
/// returned), the runner and wheel jobs sorted, and whether the event itself was seen.
fn jobs(fired: &str, events: &[(String, Value)]) -> Value {
    let jid = regex::Regex::new(r"^\d{20}$").unwrap();
    let mut local: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut master_jobs: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut seen_fired = false;
    let slot = |list: &mut Vec<(String, Map<String, Value>)>, j: &str| -> usize {
        match list.iter().position(|(k, _)| k == j) {
            Some(i) => i,
            None => {
                list.push((j.to_string(), Map::new()));
                list.len() - 1
            }
        }
    };
    for (tag, data) in events {
        let parts: Vec<&str> = tag.split('/').collect();
        match parts.as_slice() {
            [t] if jid.is_match(t) => {
                let i = slot(&mut local, t);
                local[i].1.insert("minions".into(), normal(data));
            }
            ["salt", "job", j, "new" | "publish"] => {
                let i = slot(&mut local, j);
                local[i].1.insert(parts[3].into(), normal(data));
            }
            ["salt", "job", j, "ret", id] => {
                let i = slot(&mut local, j);
                let keep: Map<String, Value> = ["return", "success", "retcode", "fun", "fun_args"]
                    .iter()
                    .filter_map(|k| data.get(*k).map(|v| (k.to_string(), normal(v))))
                    .collect();
                let rets = local[i].1.entry("returns").or_insert_with(|| json!({}));
                rets[*id] = Value::Object(keep);
            }
            ["salt", kind @ ("run" | "wheel"), j, stage @ ("new" | "ret")] => {
                let i = slot(&mut master_jobs, &format!("{kind}/{j}"));
                master_jobs[i].1.insert(stage.to_string(), normal(data));
            }
            _ if tag == fired => seen_fired = true,
            _ => {}
        }
    }
    let mut on_master: Vec<Value> = master_jobs
        .into_iter()
        .map(|(k, v)| json!({"kind": k.split('/').next(), "events": v}))
        .collect();
    on_master.sort_by_key(|v| v.to_string());
    json!({
        "event seen": seen_fired,
        "local": local.into_iter().map(|(_, v)| Value::Object(v)).collect::<Vec<_>>(),
        "runner and wheel": on_master,
    })
}

const CASES: &[(&str, &str)] = &[
    ("brine/test/one", r#"{"target": "m2", "payload": "p1"}"#),
    ("brine/other", r#"{"x": 1}"#),
    ("brine/multi", r#"{"k": "v"}"#),
    ("brine/legacy", r#"{"k": "v"}"#),
    ("brine/ctx", r#"{"k": "v", "nested": {"a": [1, 2]}}"#),
    ("brine/order", r#"{}"#),
    ("brine/broken", r#"{"k": "v"}"#),
    ("brine/missing", r#"{"k": "v"}"#),
    ("brine/invalid", r#"{"k": "v"}"#),
    // An event of a job the reactor started: never reacted to.
    ("brine/test/loop", r#"{"user": "Reactor", "target": "m1"}"#),
    ("brine/unmatched", r#"{}"#),
];

fn run_cases(m: &Master) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (tag, data) in CASES {
        let mut bus = m.bus();
        // Let the bus register the subscriber before the event goes out.
        std::thread::sleep(Duration::from_millis(300));
        m.fire(tag, &serde_json::from_str(data).unwrap());
        let events = events_until_quiet(&mut bus, Duration::from_secs(3));
        out.push((tag.to_string(), jobs(tag, &events)));
    }
    out
}

/// `salt-run --out json reactor.*` calls on `m`: each call's last JSON document (Salt's
/// salt-run prints the request event, root key and all, before the answer) with the reaction
/// directory's path replaced, and its exit code.
fn manage_cases(m: &Master, reactor: &Path) -> Vec<(String, Value, i32)> {
    let calls: &[&[&str]] = &[
        &["reactor.list"],
        &[
            "reactor.add",
            "brine/new",
            "reactors=salt://reactor/other.sls",
        ],
        &[
            "reactor.add",
            "brine/new",
            "reactors=salt://reactor/other.sls",
        ],
        &["reactor.delete", "brine/none"],
        &["reactor.is_leader"],
        &["reactor.set_leader", "False"],
        &["reactor.is_leader"],
        &["reactor.set_leader"],
        &["reactor.delete", "brine/new"],
        &["reactor.list"],
    ];
    let mut out = Vec::new();
    for call in calls {
        let mut argv = vec!["--out", "json"];
        argv.extend_from_slice(call);
        let o = m.tool("salt-run", &argv);
        let text =
            String::from_utf8_lossy(&o.stdout).replace(&reactor.display().to_string(), "<R>");
        let last = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .filter_map(Result::ok)
            .last()
            .unwrap_or_else(|| panic!("salt-run {call:?} printed no JSON:\n{text}"));
        out.push((call.join(" "), last, o.status.code().unwrap_or(-1)));
    }
    out
}

/// What each master's log must say about the reactions that could not run.
fn expected_log_lines(reactor: &Path) -> Vec<String> {
    let r = reactor.display();
    vec![
        format!(
            "Can not render SLS {r}/does_not_exist.sls for tag brine/missing. File missing or not found."
        ),
        format!("Failed to render \"{r}/broken.sls\": "),
        format!(
            "Unable to render reactions for event brine/invalid due to errors ([\"No function \
             declared in state 'nofun' in SLS '{r}/invalid.sls'\"]) in one or more of the sls \
             files (['{r}/invalid.sls'])"
        ),
    ]
}

fn master_log(m: &Master) -> String {
    fs::read_to_string(m.root().join("master.log")).unwrap_or_default()
}

#[test]
fn the_reactor_starts_the_jobs_salts_reactor_starts() {
    let Some((v7, _)) = real::venvs() else {
        return;
    };
    let conf = format!("id: {MASTER_ID}\n");
    let (brine, brine_reactor) = start(|setup| Master::brine_with_minions(&conf, &MINIONS, setup));
    let brine_cases = run_cases(&brine);
    let brine_manage = manage_cases(&brine, &brine_reactor);
    let brine_log = master_log(&brine);
    for line in expected_log_lines(&brine_reactor) {
        assert!(
            brine_log.contains(&line),
            "Brine's log lacks {line:?}:\n{brine_log}"
        );
    }
    // A caller reaction is refused with a log line, and the reactor goes on.
    let mut bus = brine.bus();
    std::thread::sleep(Duration::from_millis(300));
    brine.fire("brine/caller", &json!({}));
    brine.fire("brine/multi", &json!({"k": "v"}));
    let after = jobs(
        "brine/multi",
        &events_until_quiet(&mut bus, Duration::from_secs(3)),
    );
    assert_eq!(after["local"].as_array().map(Vec::len), Some(2), "{after}");
    wait_until(Duration::from_secs(10), || {
        master_log(&brine).contains("Reactor 'caller_ping' failed to execute caller 'test.ping'")
    })
    .unwrap_or_else(|| panic!("no caller refusal in the log:\n{}", master_log(&brine)));
    drop(brine);

    let (real, real_reactor) =
        start(|setup| Master::real_with_minions(&v7, &conf, &MINIONS, setup));
    let real_cases = run_cases(&real);
    let real_manage = manage_cases(&real, &real_reactor);
    let real_log = master_log(&real);
    drop(real);
    for line in expected_log_lines(&real_reactor) {
        assert!(
            real_log.contains(&line),
            "Salt's log lacks {line:?} (the spec is stale?)"
        );
    }

    let mut diffs = Vec::new();
    for ((tag, b), (_, r)) in brine_cases.iter().zip(&real_cases) {
        if b != r {
            diffs.push(format!(
                "{tag}:\nBrine: {}\nSalt:  {}",
                serde_json::to_string_pretty(b).unwrap(),
                serde_json::to_string_pretty(r).unwrap()
            ));
        }
    }
    for (b, r) in brine_manage.iter().zip(&real_manage) {
        if b != r {
            diffs.push(format!("salt-run {}:\nBrine: {:?}\nSalt:  {:?}", b.0, b, r));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n\n"));
    // The comparison is not vacuous: the first case started two local jobs, a runner job and
    // a wheel job; the failing cases started nothing.
    let first = &brine_cases[0].1;
    assert_eq!(first["local"].as_array().map(Vec::len), Some(2), "{first}");
    assert_eq!(
        first["runner and wheel"].as_array().map(Vec::len),
        Some(2),
        "{first}"
    );
    for (tag, v) in &brine_cases[6..] {
        assert_eq!(v["local"], json!([]), "{tag}: {v}");
        assert_eq!(v["runner and wheel"], json!([]), "{tag}: {v}");
        assert_eq!(v["event seen"], json!(true), "{tag}: {v}");
    }
}
