//! No acknowledged job loses its return to a fault: a minion whose master is killed while a job
//! runs keeps the return in its outbox (on disk, so its own kill -9 loses nothing either) and
//! delivers it once the master is back, where Salt's minion drops it after
//! `return_retry_tries`; and a job the minion itself is killed in gets a failed return from the
//! next minion process instead of none.

use std::path::Path;
use std::time::Duration;

use brine_e2e::{async_jid, stdout, wait_until, Stack};
use serde_json::{json, Value};

fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_return_survives_a_master_and_a_minion_killed() {
    let mut st = Stack::new("auto_accept: True\ntimeout: 5\n");
    st.start_master();
    // One try of two seconds per return: Salt's minion would drop the return right away.
    st.start_minion(
        "web1",
        "return_retry_tries: 1\nreturn_retry_timer: 1\nreturn_retry_timer_max: 1\nrequest_channel_tries: 1",
    );
    let conf = st.dir.path().join("minion-web1/etc/minion");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        text.replace("request_channel_timeout: 10", "request_channel_timeout: 2"),
    )
    .unwrap();
    st.kill_minion("web1");
    st.restart_minion("web1");
    st.wait_answering(&["web1"]);

    let jid = publish_async(&st, &["web1", "cmd.run", "sleep 3; echo finished"]);
    // The master goes while the job runs; the return finds nobody and is kept.
    std::thread::sleep(Duration::from_millis(500));
    st.kill_master();
    let outbox = st.dir.path().join("minion-web1/cache/outbox");
    wait_until(Duration::from_secs(30), || !files_in(&outbox).is_empty())
        .unwrap_or_else(|| panic!("the return was not kept\n{}", st.logs()));
    let kept = files_in(&outbox);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].ends_with(&format!("-{jid}")), "{kept:?} {jid}");
    let minion_log =
        std::fs::read_to_string(st.dir.path().join("minion-web1/minion.log")).unwrap_or_default();
    assert!(
        minion_log.contains(&format!("return of {jid} kept in")),
        "{minion_log}"
    );

    // The minion is killed too; both come back, and the kept return is delivered.
    st.kill_minion("web1");
    st.start_master();
    st.restart_minion("web1");
    let mut last = Value::Null;
    wait_until(Duration::from_secs(60), || {
        let out = st.tool("salt-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
        last = serde_json::from_str(stdout(&out).trim()).unwrap_or(Value::Null);
        last == json!({"web1": "finished"})
    })
    .unwrap_or_else(|| panic!("lookup_jid {jid}: {last}\n{}", st.logs()));
    wait_until(Duration::from_secs(10), || files_in(&outbox).is_empty())
        .unwrap_or_else(|| panic!("delivered, still kept: {:?}", files_in(&outbox)));
}

/// `salt <args> --async`: the jid.
fn publish_async(st: &Stack, args: &[&str]) -> String {
    let mut argv = args.to_vec();
    argv.push("--async");
    async_jid(&st.tool("salt", &argv))
}

#[test]
fn a_job_the_minion_is_killed_in_ends_with_a_failed_return() {
    let mut st = Stack::new("auto_accept: True\ntimeout: 5\n");
    st.start_master();
    st.start_minion("web1", "");
    st.wait_answering(&["web1"]);
    let jid = publish_async(&st, &["web1", "test.sleep", "60"]);
    let procs = st.dir.path().join("minion-web1/cache/proc");
    wait_until(Duration::from_secs(20), || {
        files_in(&procs) == [jid.clone()]
    })
    .unwrap_or_else(|| panic!("no proc file for {jid}: {:?}", files_in(&procs)));
    st.kill_minion("web1");
    st.restart_minion("web1");
    let mut last = Value::Null;
    wait_until(Duration::from_secs(60), || {
        let out = st.tool("salt-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
        last = serde_json::from_str(stdout(&out).trim()).unwrap_or(Value::Null);
        last["web1"]
            .as_str()
            .is_some_and(|s| s.contains("while this job ran"))
    })
    .unwrap_or_else(|| panic!("lookup_jid {jid}: {last}\n{}", st.logs()));
    assert!(files_in(&procs).is_empty(), "{:?}", files_in(&procs));
    // A job that ends normally leaves no file behind, and reports no failure at the next start.
    let jid = publish_async(&st, &["web1", "test.echo", "fine"]);
    wait_until(Duration::from_secs(30), || {
        let out = st.tool("salt-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
        serde_json::from_str::<Value>(stdout(&out).trim()).ok() == Some(json!({"web1": "fine"}))
    })
    .unwrap_or_else(|| panic!("lookup_jid {jid}\n{}", st.logs()));
    wait_until(Duration::from_secs(10), || files_in(&procs).is_empty())
        .unwrap_or_else(|| panic!("{:?}", files_in(&procs)));
}
