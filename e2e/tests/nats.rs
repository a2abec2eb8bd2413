//! `brine_nats`: two masters, each with a minion of its own, and two salt-apis, sharing events
//! through a real NATS JetStream server and jobs through a real PostgreSQL, both started (and
//! stopped) by the test.

use std::process::Command;
use std::time::{Duration, Instant};

use brine_e2e::http::{api_stack_config, sse, Api, Sse};
use brine_e2e::nats::{Nats, Secure};
use brine_e2e::postgres::Postgres;
use brine_e2e::{bin, stderr, Stack};
use serde_json::json;

const USERS: &str = "alice:alicepw\n";
const ACL: &str = "    alice: ['.*', '@runner', '@wheel', '@jobs']";

/// A master named `id` with its salt-api, on the shared PostgreSQL and NATS; the API signs
/// tokens with the key of `key_of` when given (replicas share it).
fn site(id: &str, pg: &Postgres, nats: &Nats, key_of: Option<&Api>) -> Api {
    let (mut st, port) = api_stack_config(
        &format!(
            "id: {id}\nauto_accept: True\ntimeout: 10\n\
             netapi_enable_clients: [local, local_async, runner, wheel]\n{}{}",
            pg.master_config(),
            nats.master_config()
        ),
        USERS,
        ACL,
    );
    st.start_master();
    if let Some(other) = key_of {
        let key = "pki/brine_api_token.key";
        std::fs::copy(other.st.master_root().join(key), st.master_root().join(key))
            .expect("copy the token key");
    }
    st.start_api(port);
    Api::new(st, port)
}

fn jid_of(api: &Api, token: &str, tgt: &str, arg: &str) -> String {
    let (status, body) = api.post(
        "/",
        token,
        json!([{"client": "local_async", "tgt": tgt, "fun": "test.echo", "arg": [arg]}]),
    );
    assert_eq!(status, 200, "{body}\n{}", api.st.logs());
    body["return"][0]["jid"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_string()
}

/// The events `stream` delivers within `within` whose tag is `tag`.
fn count(stream: &mut Sse, tag: &str, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    let mut n = 0;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match stream.rx.recv_timeout(left) {
            Ok((head, _)) if head.split_once(' ').map(|h| h.1) == Some(tag) => n += 1,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    n
}

#[test]
fn two_masters_and_two_apis_share_events_through_nats() {
    let Some(pg) = Postgres::start() else { return };
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let mut a = site("master-a", &pg, &nats, None);
    let mut b = site("master-b", &pg, &nats, Some(&a));
    a.st.start_minion("web-a", "");
    b.st.start_minion("web-b", "");
    a.st.wait_answering(&["web-a"]);
    b.st.wait_answering(&["web-b"]);
    let (ta, tb) = (
        a.login("alice", "alicepw", "file"),
        b.login("alice", "alicepw", "file"),
    );
    let mut on_a = sse(&a, &ta, None);

    // A job published through API B to master B's minion: API A sees its events, in order.
    let jid = jid_of(&b, &tb, "web-b", "via b");
    let new = on_a.until(|tag, _| tag == format!("salt/job/{jid}/new"));
    let ret = on_a.until(|tag, _| tag == format!("salt/job/{jid}/ret/web-b"));
    assert_eq!(ret["data"]["return"], json!("via b"), "{ret}");
    assert!(ret["_id"].as_u64() > new["_id"].as_u64(), "{new}\n{ret}");

    // API A answers for that job from the job store both masters share.
    let (status, job) = a.get(&format!("/jobs/{jid}"), &ta);
    assert_eq!(status, 200, "{job}");
    assert_eq!(
        job["return"][0]["web-b"],
        json!("via b"),
        "{job}\n{}",
        a.st.logs()
    );

    // A synchronous `local` call on API A gathers its return from the stream.
    let (status, body) = a.post(
        "/",
        &ta,
        json!([{"client": "local", "tgt": "web-a", "fun": "test.echo", "arg": ["via a"]}]),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["return"][0], json!({"web-a": "via a"}), "{body}");

    // Ids are the stream's: API B resumes after an event API A numbered, with the same ids.
    let mut on_b = sse(&b, &tb, new["_id"].as_u64());
    let first = on_b.until(|_, _| true);
    assert!(first["_id"].as_u64() > new["_id"].as_u64(), "{first}");
    let again = if first["tag"] == ret["tag"] {
        first
    } else {
        on_b.until(|tag, _| tag == format!("salt/job/{jid}/ret/web-b"))
    };
    assert_eq!(again["_id"], ret["_id"], "{again}\n{ret}");

    // NATS stops for a while: master B holds what it fires and sends it once NATS is back;
    // both APIs then see those events once each.
    nats.stop_server();
    let held = jid_of(&b, &tb, "web-b", "while down");
    // Longer than the wait for an acknowledgement: the event is sent again.
    std::thread::sleep(Duration::from_secs(7));
    nats.start_server();
    let tag = format!("salt/job/{held}/ret/web-b");
    let seen = on_a.until(|t, _| t == tag);
    assert_eq!(seen["data"]["return"], json!("while down"), "{seen}");
    on_b.until(|t, _| t == tag);
    assert_eq!(
        count(&mut on_a, &tag, Duration::from_secs(3)),
        0,
        "sent twice"
    );
    let logs = b.st.master_log();
    assert!(
        logs.contains("events not yet on the NATS stream SALT_EVENTS"),
        "{logs}"
    );
    assert!(
        logs.contains("the NATS stream SALT_EVENTS takes events again"),
        "{logs}"
    );

    // salt-api's /metrics carries its master's counters: nothing waits, nothing was dropped.
    let metrics = b
        .http
        .get(b.url("/metrics"))
        .send()
        .and_then(|r| r.text())
        .unwrap();
    assert!(
        metrics.contains("brine_master_nats_events_dropped_total{master=\"master-b\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("brine_master_store_unavailable_total{master=\"master-b\"} 0"),
        "{metrics}"
    );

    // One key: a token API A issued works on API B; its /logout on A holds on B too (B reads
    // the revocations in PostgreSQL every second).
    let (status, _) = b.get("/minions/web-b", &ta);
    assert_eq!(status, 200, "A's token on B");
    let (status, body) = a.post("/logout", &ta, json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(a.get("/minions/web-b", &ta).0, 401);
    let refused = brine_e2e::wait_until(Duration::from_secs(5), || {
        b.get("/minions/web-b", &ta).0 == 401
    });
    assert!(refused.is_some(), "B still takes a token revoked on A");
    assert_eq!(
        b.get("/minions/web-b", &tb).0,
        200,
        "B's own token still works"
    );
    assert_eq!(
        pg.psql("SELECT count(*) FROM brine_revoked_tokens"),
        "1",
        "the revocation is in the store"
    );
}

/// The first line salt-master (or salt-api) prints when it refuses to start with `conf`.
fn refused(daemon: &str, conf: &str) -> String {
    let (st, _) = api_stack_config(conf, USERS, ACL);
    let out = Command::new(bin(daemon))
        .arg("-c")
        .arg(st.master_conf_dir())
        .output()
        .expect(daemon);
    assert!(!out.status.success(), "{daemon} started with {conf}");
    let text = stderr(&out);
    // The stack logs at `info`: those lines aside, one line says why.
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("INFO"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    lines[0].to_string()
}

#[test]
fn a_master_or_api_that_cannot_use_nats_stops_at_start_in_one_line() {
    let Some(nats) = Nats::start_with_user("brine", "natspw") else {
        return;
    };
    let nobody = brine_e2e::free_port();
    let conf = format!("brine_nats:\n  servers: nats://127.0.0.1:{nobody}\n");
    for daemon in ["salt-master", "salt-api"] {
        let line = refused(daemon, &conf);
        assert!(
            line.contains(&format!("brine_nats: NATS at nats://127.0.0.1:{nobody}: ")),
            "{line}"
        );
    }

    let wrong = nats.master_config().replace("natspw", "not-the-password");
    for daemon in ["salt-master", "salt-api"] {
        let line = refused(daemon, &wrong);
        assert!(line.contains("authorization violation"), "{line}");
        assert!(!line.contains("not-the-password"), "{line}");
    }

    // The stream exists and takes other subjects: named, not bypassed.
    let mut st = Stack::new(&nats.master_config());
    st.start_master();
    st.stop_master();
    let other = format!("{}  subject: other.events\n", nats.master_config());
    let line = refused("salt-master", &other);
    assert!(
        line.contains(r#"stream SALT_EVENTS takes ["salt.events.>"], not other.events.>"#),
        "{line}"
    );

    let line = refused(
        "salt-master",
        "brine_nats:\n  servers: ws://127.0.0.1:4222\n",
    );
    assert!(
        line.contains("'ws://127.0.0.1:4222' is not a NATS server URL"),
        "{line}"
    );
}

/// A master and its salt-api on a NATS that talks TLS only, signing in with a user nkey, a
/// client certificate, or a `.creds` file: events go master → NATS → API (a `local` call
/// gathers its return from the stream). Each refusal stops both daemons in one line.
#[test]
fn a_master_and_api_use_a_nats_with_tls_nkeys_and_credentials() {
    for secure in [Secure::Nkey, Secure::NkeyAndClientCert, Secure::Credentials] {
        let Some(nats) = Nats::start_secure(secure) else {
            return;
        };
        let conf = nats.master_config();
        let (mut st, port) = api_stack_config(
            &format!("auto_accept: True\nnetapi_enable_clients: [local]\n{conf}"),
            USERS,
            ACL,
        );
        st.start_master();
        st.start_api(port);
        let api = Api::new(st, port);
        let mut api = api;
        api.st.start_minion("m1", "");
        api.st.wait_answering(&["m1"]);
        let token = api.login("alice", "alicepw", "file");
        let (status, body) = api.post(
            "/",
            &token,
            json!([{"client": "local", "tgt": "m1", "fun": "test.echo", "arg": ["over tls"]}]),
        );
        assert_eq!(status, 200, "{secure:?}: {body}");
        assert_eq!(
            body["return"][0],
            json!({"m1": "over tls"}),
            "{secure:?}: {body}\n{}",
            api.st.logs()
        );
        drop(api);

        // The same server refuses what does not sign in right, named at start.
        let mut refusals = vec![
            // Not the CA that signed the server's certificate.
            (
                conf.replace(
                    nats.file("ca.pem").to_str().unwrap(),
                    "/etc/ssl/certs/ca-certificates.crt",
                ),
                "",
            ),
        ];
        match secure {
            Secure::Nkey => {
                // The config with its seed file replaced by one holding `text`.
                let seed_file = |name: &str, text: &str| {
                    std::fs::write(nats.file(name), text).unwrap();
                    conf.replace(
                        nats.file("user.nk").to_str().unwrap(),
                        nats.file(name).to_str().unwrap(),
                    )
                };
                let another = nkeys::KeyPair::new_user().seed().unwrap();
                refusals.push((seed_file("other.nk", &another), "authorization violation"));
                refusals.push((
                    seed_file("junk.nk", "not a seed\n"),
                    "expected one line holding a user's nkey seed",
                ));
            }
            Secure::NkeyAndClientCert => {
                let without = conf
                    .lines()
                    .filter(|l| !l.contains("tls_cert") && !l.contains("tls_key"))
                    .map(|l| format!("{l}\n"))
                    .collect::<String>();
                refusals.push((without, ""));
            }
            Secure::Credentials => {
                let missing = conf.replace("user.creds", "missing.creds");
                refusals.push((missing, "missing.creds"));
            }
        }
        for (wrong, says) in refusals {
            for daemon in ["salt-master", "salt-api"] {
                let line = refused(daemon, &wrong);
                assert!(
                    line.contains(&format!(
                        "brine_nats: NATS at tls://127.0.0.1:{}",
                        nats.port
                    )),
                    "{secure:?} {daemon}: {line}\n{wrong}"
                );
                assert!(line.contains(says), "{secure:?} {daemon}: {line}\n{wrong}");
            }
        }
    }
    // `tls_required` never talks in clear, even to a server that would.
    let Some(plain) = Nats::start() else { return };
    let conf = format!("{}  tls_required: true\n", plain.master_config());
    for daemon in ["salt-master", "salt-api"] {
        let line = refused(daemon, &conf);
        assert!(
            line.contains(&format!(
                "brine_nats: NATS at nats://127.0.0.1:{}",
                plain.port
            )),
            "{daemon}: {line}"
        );
        // The TLS handshake meets the server's plain INFO line.
        assert!(
            line.contains("received corrupt message"),
            "{daemon}: {line}"
        );
    }
}
