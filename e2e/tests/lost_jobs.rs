//! Every job ends with a return or a recorded failure for every minion it targets, whatever is
//! killed on the way: 200 `local_async` jobs through salt-api while the master, salt-api and a
//! minion are each killed -9 and started again. What each part keeps: the master stores a job
//! before publishing it and a return before acknowledging it; a minion keeps a return it could
//! not deliver in its outbox, and answers a job it died in with a failure; and the master
//! records a failure for a targeted minion that answers it is not running a job it never
//! returned (`brine_lost_job_check`): the job was published while the minion was away.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use brine_e2e::http::{api_stack_config, Api};
use brine_e2e::{async_jid, stdout, wait_until, Stack};
use brine_master::jobstore::{JobStore, SqliteStore};
use brine_protocol::payload::{get, Value};
use serde_json::{json, Value as Json};

const NO_RETURN: &str = "never returned it";

/// Each jid's stored returns: minion id → (return, a failure the master recorded).
fn stored(st: &Stack, jids: &[String]) -> BTreeMap<String, BTreeMap<String, (Value, bool)>> {
    let store = SqliteStore::open(&st.master_root().join("cache/jobs.sqlite")).expect("job store");
    jids.iter()
        .map(|jid| {
            let rets = store
                .get_returns(jid)
                .unwrap_or_default()
                .into_iter()
                .map(|r| {
                    let ret = get(&r.full_ret, "return").cloned().unwrap_or(Value::Nil);
                    let recorded = get(&r.full_ret, "brine_no_return") == Some(&Value::from(true));
                    (r.id, (ret, recorded))
                })
                .collect();
            (jid.clone(), rets)
        })
        .collect()
}

#[test]
fn a_job_published_while_a_minion_was_away_gets_a_recorded_failure() {
    let mut st = Stack::new(
        "auto_accept: True\ntimeout: 5\ngather_job_timeout: 3\nbrine_lost_job_check: 2\n",
    );
    st.start_master();
    st.start_minion("web1", "");
    st.start_minion("web2", "");
    st.wait_answering(&["web1", "web2"]);
    st.kill_minion("web2");
    let jid = async_jid(&st.tool("salt", &["*", "test.echo", "hello", "--async"]));
    st.restart_minion("web2");
    let mut last = BTreeMap::new();
    wait_until(Duration::from_secs(60), || {
        last = stored(&st, std::slice::from_ref(&jid))
            .remove(&jid)
            .unwrap_or_default();
        last.len() == 2
    })
    .unwrap_or_else(|| panic!("{jid}: {last:?}\n{}", st.logs()));
    assert_eq!(last["web1"], (Value::from("hello"), false));
    let (text, recorded) = &last["web2"];
    assert!(recorded, "{last:?}");
    assert!(
        text.as_str().is_some_and(|t| t.contains(NO_RETURN)),
        "{text:?}"
    );
    // jobs.lookup_jid shows it as Salt shows any return.
    let out = st.tool("salt-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
    let shown: Json = serde_json::from_str(stdout(&out).trim()).unwrap_or(Json::Null);
    assert_eq!(shown["web1"], json!("hello"), "{shown}");
    assert!(
        shown["web2"]
            .as_str()
            .is_some_and(|t| t.contains(NO_RETURN)),
        "{shown}"
    );
    assert!(
        st.master_log().contains("recorded as failed"),
        "{}",
        st.master_log()
    );
}

#[test]
fn two_hundred_jobs_through_kills_of_the_master_the_api_and_a_minion_all_end() {
    let (mut st, port) = api_stack_config(
        "auto_accept: True\ntimeout: 5\ngather_job_timeout: 3\nbrine_lost_job_check: 3\n\
         netapi_enable_clients: [local_async]\n",
        "ops:opspass\n",
        "    ops:\n      - '.*'\n",
    );
    st.start_master();
    for id in ["web1", "web2"] {
        st.start_minion(id, "return_retry_timer: 1\nreturn_retry_timer_max: 2\n");
    }
    st.wait_answering(&["web1", "web2"]);
    st.start_api(port);
    let mut api = Api::new(st, port);
    let token = api.login("ops", "opspass", "file");

    let mut jids: Vec<String> = Vec::new();
    let mut refused = 0;
    let started = Instant::now();
    while jids.len() < 200 {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "submissions stalled at {}",
            jids.len()
        );
        let n = jids.len();
        let body = json!({"client": "local_async", "tgt": "*", "fun": "test.arg",
                          "arg": [n], "kwarg": {"job": n}});
        let answer = api
            .http
            .post(api.url("/"))
            .header("X-Auth-Token", &token)
            .json(&body)
            .send();
        let jid = answer.ok().and_then(|r| {
            let ok = r.status().as_u16() == 200;
            let v: Json = r.json().ok()?;
            ok.then(|| v["return"][0]["jid"].as_str().map(str::to_string))?
        });
        let Some(jid) = jid else {
            // The master or salt-api is down: nothing handed out, try again.
            refused += 1;
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        jids.push(jid);
        match jids.len() {
            50 => {
                api.st.kill_master();
                api.st.start_master();
            }
            100 => {
                api.st.kill_api();
                api.st.start_api(port);
            }
            150 => {
                api.st.kill_minion("web2");
                api.st.restart_minion("web2");
            }
            _ => {}
        }
    }
    let unique: BTreeSet<&String> = jids.iter().collect();
    assert_eq!(unique.len(), 200, "jids handed out twice");

    let both: BTreeSet<String> = ["web1", "web2"].iter().map(|s| s.to_string()).collect();
    let mut last = BTreeMap::new();
    wait_until(Duration::from_secs(120), || {
        last = stored(&api.st, &jids);
        last.values()
            .all(|rets| rets.keys().cloned().collect::<BTreeSet<_>>() == both)
    })
    .unwrap_or_else(|| {
        let incomplete: Vec<_> = last
            .iter()
            .filter(|(_, r)| r.len() < 2)
            .map(|(jid, r)| format!("{jid}: {:?}", r.keys().collect::<Vec<_>>()))
            .collect();
        panic!(
            "{} jobs without every return: {incomplete:?}\n{}",
            incomplete.len(),
            api.st.logs()
        )
    });
    // Real returns carry the job's own argument; the others say why they are failures.
    let mut failures = 0;
    for (i, jid) in jids.iter().enumerate() {
        for (id, (ret, recorded)) in &last[jid] {
            let real = get(ret, "args") == Some(&Value::Array(vec![Value::from(i as i64)]));
            let text = ret.as_str().unwrap_or_default();
            let minion_failure = text.contains("while this job ran");
            assert!(
                real || (*recorded && text.contains(NO_RETURN)) || minion_failure,
                "job {i} ({jid}) on {id}: {ret:?}"
            );
            if !real {
                failures += 1;
            }
        }
    }
    eprintln!(
        "200 jobs: {} returns, {failures} recorded failures, {refused} submissions refused while down",
        400 - failures
    );
}

/// A reader of `/events` that comes back with `Last-Event-ID` after salt-api was killed gets
/// the events fired while salt-api was down (from the master's `salt_events`), once each and in
/// order, and nothing it had already seen.
#[test]
fn an_event_reader_resumes_across_a_salt_api_restart() {
    let (mut st, port) = api_stack_config(
        "auto_accept: True\ntimeout: 5\nbrine_store_events: True\n\
         netapi_enable_clients: [local_async]\n",
        "ops:opspass\n",
        "    ops:\n      - '.*'\n      - '@jobs'\n",
    );
    st.start_master();
    st.start_minion("web1", "");
    st.wait_answering(&["web1"]);
    st.start_api(port);
    let mut api = Api::new(st, port);
    let token = api.login("ops", "opspass", "file");
    let mut reader = brine_e2e::http::sse(&api, &token, None);
    let (_, v) = api.post(
        "/",
        &token,
        json!({"client": "local_async", "tgt": "web1", "fun": "test.echo", "arg": ["before"]}),
    );
    let seen = v["return"][0]["jid"].as_str().unwrap().to_string();
    let ev = reader.until(|tag, _| tag == format!("salt/job/{seen}/ret/web1"));
    let last_id = ev["_id"].as_u64().unwrap();

    api.st.kill_api();
    let missed = async_jid(
        &api.st
            .tool("salt", &["web1", "test.echo", "during", "--async"]),
    );
    wait_until(Duration::from_secs(30), || {
        stored(&api.st, std::slice::from_ref(&missed))[&missed].contains_key("web1")
    })
    .unwrap_or_else(|| panic!("no return for {missed}\n{}", api.st.logs()));
    // The stored event of that return is written in its own batch: give it a moment.
    std::thread::sleep(Duration::from_millis(500));
    api.st.start_api(port);

    let mut resumed = brine_e2e::http::sse(&api, &token, Some(last_id));
    let new = resumed.until(|tag, _| tag == format!("salt/job/{missed}/new"));
    let ret = resumed.until(|tag, _| tag == format!("salt/job/{missed}/ret/web1"));
    assert_eq!(ret["data"]["return"], json!("during"), "{ret}");
    let (new_id, ret_id) = (new["_id"].as_u64().unwrap(), ret["_id"].as_u64().unwrap());
    assert!(
        last_id < new_id && new_id < ret_id,
        "{last_id} {new_id} {ret_id}"
    );
    let raw = resumed.raw.lock().unwrap().clone();
    assert!(
        !raw.contains(&format!("salt/job/{seen}/")),
        "seen before: {raw}"
    );
    assert_eq!(
        raw.matches(&format!("tag: salt/job/{missed}/ret/web1\n"))
            .count(),
        1,
        "{raw}"
    );
}

/// A master started right after one was killed -9 serves, although the killed master's
/// publisher process may still hold the publish port for a moment (here the test holds it for
/// two seconds).
#[test]
fn a_master_restarted_while_its_publish_port_is_still_held_serves() {
    let mut st = Stack::new("auto_accept: True\ntimeout: 5\n");
    st.start_master();
    st.start_minion("web1", "");
    st.wait_answering(&["web1"]);
    st.kill_master();
    wait_until(Duration::from_secs(10), || {
        std::net::TcpListener::bind(("127.0.0.1", st.publish_port)).is_ok()
    })
    .expect("the killed master's publisher let the port go");
    let holder = std::net::TcpListener::bind(("127.0.0.1", st.publish_port)).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        drop(holder);
    });
    st.start_master();
    release.join().unwrap();
    st.wait_answering(&["web1"]);
    assert!(
        st.master_log().contains("trying again"),
        "{}",
        st.master_log()
    );
}
