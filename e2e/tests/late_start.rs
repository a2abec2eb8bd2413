//! A job published while its minions were still starting (the master restarted, the minions
//! not up yet) reaches each of them once it has started, within the job's timeout: Brine's
//! minion and Salt 3007's. A minion that was up when a job was published, and restarted after
//! running it, does not run it again.

use std::time::Duration;

use brine_e2e::real::{self, Fleet};
use brine_e2e::{wait_until, Stack};
use serde_json::{json, Value};

fn async_jid(st: &Stack, args: &[&str]) -> String {
    let o = st.tool("salt", args);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{args:?}: {text}\n{}", st.logs());
    text.split_whitespace()
        .last()
        .unwrap_or_default()
        .to_string()
}

fn lookup(st: &Stack, jid: &str) -> Value {
    let o = st.tool("salt-run", &["jobs.lookup_jid", jid, "--out", "json"]);
    serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
}

#[test]
fn minions_starting_after_a_job_run_it_once() {
    let mut st = Stack::new("auto_accept: True\ntimeout: 60\n");
    st.start_master();
    st.start_minion("m1", "");
    let salt = real::venvs().map(|(v3007, _)| v3007);
    let mut fleet = Fleet::default();
    let mut ids = vec!["m1"];
    if let Some(venv) = &salt {
        fleet.0.push(st.start_real_minion(venv, "s1", ""));
        ids.push("s1");
    }
    st.wait_answering(&ids);

    // Everything stops; the master starts again with the keys in place, and publishes a job
    // before any minion is back.
    st.kill_minion("m1");
    for p in std::mem::take(&mut fleet.0) {
        p.stop();
    }
    st.stop_master();
    st.start_master();
    let jid = async_jid(&st, &["--async", "*", "test.echo", "late"]);
    st.restart_minion("m1");
    if let Some(venv) = &salt {
        fleet.0.push(st.start_real_minion(venv, "s1", ""));
    }
    let expected: serde_json::Map<String, Value> = ids
        .iter()
        .map(|id| (id.to_string(), json!("late")))
        .collect();
    let mut got = Value::Null;
    wait_until(Duration::from_secs(60), || {
        got = lookup(&st, &jid);
        got == Value::Object(expected.clone())
    })
    .unwrap_or_else(|| {
        panic!(
            "the minions that started after job {jid}: {got}\n{}",
            st.logs()
        )
    });
    assert!(
        st.master_log()
            .contains(&format!("job {jid} sent again to m1")),
        "{}",
        st.master_log()
    );

    // A job the minion ran before it restarted is not sent to it again.
    let file = st.master_root().join("ran-once");
    let jid = async_jid(
        &st,
        &[
            "--async",
            "m1",
            "cmd.run",
            &format!("echo ran >> {}", file.display()),
        ],
    );
    wait_until(Duration::from_secs(30), || {
        lookup(&st, &jid)["m1"].is_string()
    })
    .unwrap_or_else(|| panic!("m1 never ran {jid}\n{}", st.logs()));
    st.restart_minion("m1");
    st.wait_answering(&["m1"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "ran\n");
    assert!(!st.master_log().contains(&format!("job {jid} sent again")));
}
