//! Several masters: minions in hot multi-master mode (`master` a list) connected to two Brine
//! masters that share a pki dir, a PostgreSQL job store and a NATS events stream, each with its
//! salt-api; and a minion failing over from one master to the other and back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use brine_e2e::http::{api_stack_config, sse, Api};
use brine_e2e::nats::Nats;
use brine_e2e::postgres::Postgres;
use brine_e2e::real::{self, Fleet};
use brine_e2e::{wait_until, Stack};
use serde_json::{json, Value};

const USERS: &str = "alice:alicepw\n";
const ACL: &str = "    alice: ['.*', '@runner', '@wheel', '@jobs']";

/// A master named `id` listening on `host` with its salt-api, its keys in `pki` (shared), on
/// `extra`'s stores.
fn site(id: &str, host: &str, pki: &Path, extra: &str) -> Api {
    let (mut st, port) = api_stack_config(
        &format!(
            "id: {id}\nauto_accept: True\ntimeout: 10\n\
             netapi_enable_clients: [local, local_async, runner, wheel]\n{extra}"
        ),
        USERS,
        ACL,
    );
    // Salt puts an absolute pki_dir under root_dir: each master's own pki dir is a link to
    // the shared one, as a shared mount would be.
    std::fs::create_dir_all(pki).unwrap();
    std::os::unix::fs::symlink(pki, st.master_root().join("pki")).unwrap();
    st.listen_on(host);
    st.start_master();
    st.start_api(port);
    Api::new(st, port)
}

/// A minion's directory under `st`'s (so that its logs show with the stack's), its config
/// naming `masters`, with `extra` lines.
fn minion_root(st: &Stack, id: &str, masters: &[&Stack], extra: &str) -> PathBuf {
    let root = st.dir.path().join(format!("minion-{id}"));
    real::write_minion_conf(&root, id, st.ret_port, st.publish_port, extra);
    let list: Vec<String> = masters
        .iter()
        .map(|m| format!("'{}:{}'", m.host, m.ret_port))
        .collect();
    let conf = root.join("etc/minion");
    let text = std::fs::read_to_string(&conf).unwrap().replace(
        &format!(
            "master: 127.0.0.1\nmaster_port: {}\npublish_port: {}\n",
            st.ret_port, st.publish_port
        ),
        &format!("master: [{}]\n", list.join(", ")),
    );
    assert!(text.contains("master: ['"), "{text}");
    std::fs::write(&conf, text).unwrap();
    root
}

fn local(api: &Api, token: &str, client: &str, tgt: &[&str], arg: &str) -> Value {
    let (status, body) = api.post(
        "/",
        token,
        json!([{"client": client, "tgt": tgt, "tgt_type": "list", "fun": "test.echo",
                "arg": [arg]}]),
    );
    assert_eq!(status, 200, "{body}\n{}", api.st.logs());
    body["return"][0].clone()
}

#[test]
fn hot_minions_serve_both_masters_and_outlive_one() {
    let Some(pg) = Postgres::start() else { return };
    let Some(nats) = Nats::start() else { return };
    let shared = tempfile::tempdir().unwrap();
    let pki = shared.path().join("pki");
    let stores = format!("{}{}", pg.master_config(), nats.master_config());
    // Each master on an address of its own, as Salt's minion needs to tell them apart.
    let mut a = site("master-a", "127.0.0.1", &pki, &stores);
    let b = site("master-b", "127.0.0.2", &pki, &stores);
    let ids = ["hot1", "hot2"];
    // Stopped when dropped, a failing test's too (before the stacks).
    let mut minions = Fleet::default();
    for id in ids {
        let root = minion_root(&a.st, id, &[&a.st, &b.st], "");
        minions.0.push(real::start_brine_minion(&root));
    }
    // Salt's own minion in the same mode.
    let mut all = ids.to_vec();
    if let Some((venv, _)) = brine_e2e::real::venvs() {
        all.push("real-hot");
        let root = minion_root(&a.st, "real-hot", &[&a.st, &b.st], "");
        minions.0.push(real::start_real_minion(&venv, &root));
    }
    a.st.wait_answering(&all);
    b.st.wait_answering(&all);
    // One pki dir: one token key, so either API takes the other's tokens.
    let token = a.login("alice", "alicepw", "file");

    // Each master reaches every minion, and each minion answers the master that asked.
    let want: Value = all.iter().map(|id| (id.to_string(), json!("hi"))).collect();
    assert_eq!(local(&a, &token, "local", &all, "hi"), want);
    assert_eq!(local(&b, &token, "local", &all, "hi"), want);
    let jid = local(&a, &token, "local_async", &all, "on a")["jid"]
        .as_str()
        .unwrap()
        .to_string();
    let stored = format!("SELECT count(*) FROM salt_returns WHERE jid = '{jid}'");
    wait_until(Duration::from_secs(30), || {
        pg.psql(&stored) == all.len().to_string()
    })
    .unwrap_or_else(|| panic!("returns of {jid} not stored\n{}", a.st.logs()));
    // A job submitted on API A, read on API B.
    let (status, job) = b.get(&format!("/jobs/{jid}"), &token);
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["return"][0]["hot1"], json!("on a"), "{job}");

    // Master A killed while master B's jobs run: every return B took is stored, and new jobs
    // keep flowing through B.
    let mut jids = Vec::new();
    for n in 0..6 {
        if n == 3 {
            a.st.kill_master();
        }
        let ret = local(&b, &token, "local_async", &all, &format!("job {n}"));
        jids.push(ret["jid"].as_str().unwrap().to_string());
    }
    for jid in &jids {
        let stored = format!("SELECT count(*) FROM salt_returns WHERE jid = '{jid}'");
        wait_until(Duration::from_secs(30), || {
            pg.psql(&stored) == all.len().to_string()
        })
        .unwrap_or_else(|| panic!("returns of {jid} lost\n{}", b.st.logs()));
    }
    assert_eq!(local(&b, &token, "local", &all, "after"), {
        let v: Value = all
            .iter()
            .map(|id| (id.to_string(), json!("after")))
            .collect();
        v
    });
}

#[test]
fn a_failover_minion_moves_to_the_next_master_and_back() {
    let shared = tempfile::tempdir().unwrap();
    let pki = shared.path().join("pki");
    let mut a = site("master-a", "127.0.0.1", &pki, "");
    let b = site("master-b", "127.0.0.2", &pki, "");
    let root = minion_root(
        &a.st,
        "fo1",
        &[&a.st, &b.st],
        "master_type: failover\nmaster_alive_interval: 1\nmaster_failback: True\n\
         master_failback_interval: 1\n",
    );
    let _minion = Fleet(vec![real::start_brine_minion(&root)]);
    a.st.wait_answering(&["fo1"]);
    // Connected to A only: B does not reach it.
    let (pinged, _) = b.st.salt_json(&["-t", "3", "fo1", "test.ping"]);
    assert_ne!(pinged["fo1"], json!(true), "{pinged}");

    a.st.kill_master();
    b.st.wait_answering(&["fo1"]);
    let log = std::fs::read_to_string(root.join("minion.log")).unwrap_or_default();
    assert!(log.contains("is gone: failing over"), "{log}");

    a.st.start_master();
    a.st.wait_answering(&["fo1"]);
    let log = std::fs::read_to_string(root.join("minion.log")).unwrap_or_default();
    assert!(log.contains("answers again: going back to it"), "{log}");
}

#[test]
fn a_fleet_split_over_two_masters_is_reached_from_either_with_jobs_subject() {
    let Some(nats) = Nats::start() else { return };
    let shared = tempfile::tempdir().unwrap();
    let pki = shared.path().join("pki");
    let stores = format!("{}  jobs_subject: salt.jobs\n", nats.master_config());
    let a = site("master-a", "127.0.0.1", &pki, &stores);
    let b = site("master-b", "127.0.0.2", &pki, &stores);
    // Half of the fleet on each master, and minions on both (which get every job twice).
    let mut minions = Fleet::default();
    let mut roots = Vec::new();
    for (id, masters) in [
        ("half-a", vec![&a.st]),
        ("half-b", vec![&b.st]),
        ("hot", vec![&a.st, &b.st]),
    ] {
        let root = minion_root(&a.st, id, &masters, "");
        minions.0.push(real::start_brine_minion(&root));
        roots.push((id, root));
    }
    if let Some((venv, _)) = brine_e2e::real::venvs() {
        let root = minion_root(&a.st, "real-hot", &[&a.st, &b.st], "");
        minions.0.push(real::start_real_minion(&venv, &root));
        roots.push(("real-hot", root));
    }
    let all: Vec<&str> = roots.iter().map(|(id, _)| *id).collect();
    a.st.wait_answering(&["half-a", "hot"]);
    b.st.wait_answering(&["half-b", "hot"]);
    if all.contains(&"real-hot") {
        a.st.wait_answering(&["real-hot"]);
        b.st.wait_answering(&["real-hot"]);
    }
    let token = a.login("alice", "alicepw", "file");

    // Through either API, one job reaches the whole fleet, and each minion runs it once: each
    // adds a line to one file.
    for (n, api) in [&a, &b].into_iter().enumerate() {
        let runs = a.st.dir.path().join(format!("runs-{n}"));
        let (status, body) = api.post(
            "/",
            &token,
            json!([{"client": "local", "tgt": "*", "fun": "cmd.run",
                    "arg": [format!("echo ran >> {}; echo done", runs.display())]}]),
        );
        assert_eq!(status, 200, "{body}");
        for id in &all {
            assert_eq!(
                body["return"][0][id],
                json!("done"),
                "{id} through API {n}: {body}\n{}\n{}",
                a.st.logs(),
                b.st.logs()
            );
        }
        let lines = std::fs::read_to_string(&runs).unwrap_or_default();
        assert_eq!(lines.lines().count(), all.len(), "{lines}");
    }

    // A target on the other master's half, through API A.
    assert_eq!(
        local(&a, &token, "local", &["half-b"], "over there"),
        json!({"half-b": "over there"})
    );

    // The salt command on master A gathers from A's bus: master B's minions' returns come to
    // it from the stream.
    let (pinged, _) = a.st.salt_json(&["-t", "20", "*", "test.ping"]);
    for id in &all {
        assert_eq!(pinged[id], json!(true), "{id}: {pinged}\n{}", a.st.logs());
    }
    // Fired on A's bus, B's minions' returns are not sent to the stream again: a reader of it
    // sees each return once.
    let mut stream = sse(&b, &token, None);
    let jid = local(&a, &token, "local_async", &["half-b"], "once")["jid"]
        .as_str()
        .unwrap()
        .to_string();
    let tag = format!("salt/job/{jid}/ret/half-b");
    stream.until(|t, _| t == tag);
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match stream.rx.recv_timeout(left) {
            Ok((head, _)) => assert_ne!(head.split_once(' ').map(|h| h.1), Some(tag.as_str())),
            Err(_) => break,
        }
    }
}

/// A minion's masters named in `list` (entries as in `master:`), with `extra` lines.
fn named_masters_root(st: &Stack, id: &str, list: &[String], extra: &str) -> PathBuf {
    let root = minion_root(st, id, &[st], extra);
    let conf = root.join("etc/minion");
    let text = std::fs::read_to_string(&conf).unwrap().replace(
        &format!("master: ['127.0.0.1:{}']\n", st.ret_port),
        &format!("master: [{}]\n", list.join(", ")),
    );
    assert!(!text.contains("127.0.0.1:"), "{text}");
    std::fs::write(&conf, text).unwrap();
    root
}

/// Masters named by host name are looked up before signing in (`retry_dns`). `a..b` is a
/// name the resolver refuses by itself (an empty label), so nothing leaves the machine.
#[test]
fn master_names_are_looked_up_and_a_name_that_does_not_resolve_is_given_up() {
    let mut st = Stack::new("auto_accept: True\n");
    st.start_master();
    let port = st.ret_port;
    let unknown = format!("'a..b:{port}'");
    let named = format!("'localhost:{port}'");

    // One master that never resolves: tried retry_dns_count more times, then a one-line
    // reason and Salt's exit code 42.
    let root = named_masters_root(
        &st,
        "lost",
        std::slice::from_ref(&unknown),
        "retry_dns: 0.2\nretry_dns_count: 2\n",
    );
    let conf = root.join("etc/minion");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        text.replace(&format!("master: [{unknown}]"), "master: 'a..b'"),
    )
    .unwrap();
    let mut lost = Fleet(vec![real::start_brine_minion(&root)]);
    let mut code = None;
    wait_until(Duration::from_secs(30), || {
        code = lost.0[0].exit_code();
        code.is_some()
    })
    .unwrap_or_else(|| panic!("the minion did not give up\n{}", st.logs()));
    assert_eq!(code, Some(42));
    let log = std::fs::read_to_string(root.join("minion.log")).unwrap_or_default();
    assert!(
        log.contains("Master address: 'a..b' could not be resolved"),
        "{log}"
    );
    let retried = "Master hostname: 'a..b' not found or not responsive. Retrying in 0.2 seconds";
    assert_eq!(log.matches(retried).count(), 2, "{log}");
    drop(lost);

    // Hot: the master that does not resolve is given up, the one named `localhost` served.
    let hot = named_masters_root(
        &st,
        "hot",
        &[unknown.clone(), named.clone()],
        "retry_dns_count: 0\n",
    );
    // Failover: the name that does not resolve is passed over.
    let fo = named_masters_root(
        &st,
        "fo",
        &[unknown, named],
        "master_type: failover\nretry_dns: 0\n",
    );
    let _minions = Fleet(vec![
        real::start_brine_minion(&hot),
        real::start_brine_minion(&fo),
    ]);
    st.wait_answering(&["hot", "fo"]);
    let log = std::fs::read_to_string(hot.join("minion.log")).unwrap_or_default();
    assert!(
        log.contains("Master address: 'a..b' could not be resolved"),
        "{log}"
    );
}
