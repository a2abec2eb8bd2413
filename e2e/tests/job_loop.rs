//! The job loop end to end: a master and three minions as real processes.

use std::time::{Duration, Instant};

use brine_e2e::{async_jid, stderr, stdout, wait_until, Stack};
use serde_json::json;

#[test]
fn master_three_minions_whole_loop() {
    let mut st = Stack::new("timeout: 5\ngather_job_timeout: 3\n");
    st.start_master();
    for (id, role) in [("m1", "web"), ("m2", "web"), ("m3", "db")] {
        st.start_minion(id, &format!("grains:\n  role: {role}\n"));
    }

    // Keys stay pending until salt-key -A; the minions wait politely.
    st.wait_pending(&["m1", "m2", "m3"]);
    let none = st.tool("salt", &["-t", "2", "*", "test.ping"]);
    assert_eq!(none.status.code(), Some(2), "nothing accepted yet");
    assert!(stdout(&none).starts_with("No minions matched the target."));
    let acc = st.tool("salt-key", &["-A", "-y"]);
    assert!(acc.status.success(), "{}", stderr(&acc));
    let text = stdout(&acc);
    assert!(
        text.contains("The following keys are going to be accepted:"),
        "{text}"
    );
    for id in ["m1", "m2", "m3"] {
        assert!(
            text.contains(&format!("Key for minion {id} accepted.")),
            "{text}"
        );
    }
    let list = st.tool("salt-key", &["-L", "--out", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(list["minions"], json!(["m1", "m2", "m3"]));
    assert_eq!(list["minions_pre"], json!([]));
    st.wait_answering(&["m1", "m2", "m3"]);

    // test.ping and test.echo to everyone.
    let (v, code) = st.salt_json(&["*", "test.ping"]);
    assert_eq!(code, 0);
    assert_eq!(v, json!({"m1": true, "m2": true, "m3": true}));
    let (v, _) = st.salt_json(&["*", "test.echo", "hello world"]);
    assert_eq!(v["m2"], json!("hello world"));

    // cmd.run with its exit code.
    let (v, code) = st.salt_json(&["m1", "cmd.run", "echo out; echo err >&2"]);
    assert_eq!(code, 0);
    assert_eq!(v, json!({"m1": "out\nerr"}));
    // --static exits 0 whatever the retcodes (as Salt's salt does); without it, 1.
    let (v, code) = st.salt_json(&["m1", "cmd.run", "exit 3"]);
    assert_eq!((v, code), (json!({"m1": ""}), 0));
    let out = st.tool("salt", &["--out", "json", "m1", "cmd.run", "exit 3"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failing command makes salt exit 1: {}",
        stdout(&out)
    );

    // Grains, grain targeting, compound and list targets.
    let (v, _) = st.salt_json(&["m3", "grains.item", "role", "id"]);
    assert_eq!(v, json!({"m3": {"role": "db", "id": "m3"}}));
    let (v, _) = st.salt_json(&["-G", "role:web", "test.ping"]);
    assert_eq!(v, json!({"m1": true, "m2": true}));
    let (v, _) = st.salt_json(&["-C", "G@role:db or m1", "test.ping"]);
    assert_eq!(v, json!({"m1": true, "m3": true}));
    let (v, _) = st.salt_json(&["-C", "m* and not G@role:web", "test.ping"]);
    assert_eq!(v, json!({"m3": true}));
    let (v, _) = st.salt_json(&["-L", "m1,m3", "test.ping"]);
    assert_eq!(v, json!({"m1": true, "m3": true}));
    let (v, _) = st.salt_json(&["m2", "test.arg", "a", "1", "foo=bar"]);
    assert_eq!(v["m2"]["args"], json!(["a", 1]));
    assert_eq!(v["m2"]["kwargs"]["foo"], json!("bar"));
    let none = st.tool("salt", &["nomatch*", "test.ping"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(stdout(&none).contains("No minions matched the target."));

    // Nested output, Salt's default.
    let nested = st.tool("salt", &["m1", "test.ping"]);
    assert_eq!(stdout(&nested), "m1:\n    True\n");

    // An async job, read back with salt-run jobs.lookup_jid.
    let a = st.tool("salt", &["--async", "*", "test.echo", "later"]);
    assert!(a.status.success());
    let jid = async_jid(&a);
    let mut looked = serde_json::Value::Null;
    wait_until(Duration::from_secs(20), || {
        let o = st.tool("salt-run", &["--out", "json", "jobs.lookup_jid", &jid]);
        looked = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
        looked.as_object().is_some_and(|m| m.len() == 3)
    })
    .unwrap_or_else(|| panic!("lookup_jid never had 3 returns: {looked}\n{}", st.logs()));
    assert_eq!(looked, json!({"m1": "later", "m2": "later", "m3": "later"}));
    let jobs = st.tool("salt-run", &["--out", "json", "jobs.list_jobs"]);
    let jobs: serde_json::Value = serde_json::from_slice(&jobs.stdout).unwrap();
    assert_eq!(jobs[&jid]["Function"], json!("test.echo"));
    assert_eq!(jobs[&jid]["Arguments"], json!(["later"]));
    // search_function / search_target: a glob, a list of globs or comma-separated globs, any of
    // which may match (as SaltGUI's Highstate page asks for several functions at once).
    for (search, found) in [
        ("search_function=[\"state.apply\", \"test.ec*\"]", true),
        ("search_function=state.apply,test.echo", true),
        (
            "search_function=[\"state.apply\", \"state.highstate\"]",
            false,
        ),
        ("search_target=[\"nobody\", \"*\"]", true),
        ("search_target=nobody", false),
    ] {
        let o = st.tool("salt-run", &["--out", "json", "jobs.list_jobs", search]);
        let jobs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "{search}: {e}: {} (exit {:?}, stderr: {})",
                stdout(&o),
                o.status.code(),
                stderr(&o)
            )
        });
        assert_eq!(jobs.get(&jid).is_some(), found, "{search}: {jobs}");
    }
    // Salt's paged form: the newest `count` jobs, oldest first, each with its JID.
    let o = st.tool(
        "salt-run",
        &["jobs.list_jobs_filter", "1000", "--out", "json"],
    );
    let page: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&o), stderr(&o)));
    let ours = page
        .iter()
        .find(|j| j["JID"] == json!(jid))
        .unwrap_or_else(|| panic!("{jid} not in {page:?}"));
    assert_eq!(ours["Function"], json!("test.echo"));
    assert_eq!(ours["Target"], json!("*"));
    assert!(ours["StartTime"].is_string(), "{ours}");
    let jids: Vec<&str> = page.iter().filter_map(|j| j["JID"].as_str()).collect();
    assert!(
        jids.windows(2).all(|w| w[0] < w[1]),
        "oldest first: {jids:?}"
    );
    assert!(page
        .iter()
        .all(|j| j["Function"] != json!("saltutil.find_job")));
    let o = st.tool("salt-run", &["--out", "json", "jobs.list_jobs_filter", "2"]);
    let newest: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let last: Vec<&str> = newest.iter().filter_map(|j| j["JID"].as_str()).collect();
    assert_eq!(last.len(), 2, "{newest:?}");
    assert!(
        last[1] >= *jids.last().unwrap(),
        "{last:?} against {jids:?}"
    );
    let o = st.tool("salt-run", &["--out", "json", "jobs.list_jobs_filter", "0"]);
    assert_eq!(stdout(&o).trim(), "[]");
    let o = st.tool("salt-run", &["jobs.list_jobs_filter", "many"]);
    assert!(
        stdout(&o).contains("count must be an integer"),
        "{} {}",
        stdout(&o),
        stderr(&o)
    );
    let o = st.tool("salt-run", &["jobs.list_jobs_filter"]);
    assert!(
        format!("{}{}", stdout(&o), stderr(&o)).contains("count"),
        "{} {}",
        stdout(&o),
        stderr(&o)
    );

    let status = st.tool("salt-run", &["--out", "json", "manage.status"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status, json!({"up": ["m1", "m2", "m3"], "down": []}));

    // A killed minion is reported as not returned, within the timeout.
    st.kill_minion("m3");
    let t0 = Instant::now();
    let out = st.tool("salt", &["-t", "2", "*", "test.ping"]);
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("m3:\n    Minion did not return. [No response]"),
        "{text}"
    );
    assert!(text.contains("m1:\n    True"), "{text}");
    assert!(took < Duration::from_secs(20), "gave up after {took:?}");
    st.restart_minion("m3");
    st.wait_answering(&["m3"]);

    // The master restarts; the minions come back by themselves.
    st.stop_master();
    st.start_master();
    st.wait_answering(&["m1", "m2", "m3"]);

    // A deleted key: that minion gets nothing any more, the others go on.
    let del = st.tool("salt-key", &["-d", "m2", "-y"]);
    assert!(
        stdout(&del).contains("Key for minion m2 deleted."),
        "{}",
        stdout(&del)
    );
    // The AES key rotates; the remaining minions sign in again on the very next publish and
    // still run it. Every minion that can read the publish appends a line: m2 must not.
    wait_until(Duration::from_secs(10), || {
        st.master_log().contains("AES key rotated")
    })
    .unwrap_or_else(|| panic!("the AES key did not rotate\n{}", st.logs()));
    let marker = st.dir.path().join("ran");
    let cmd = format!("echo x >> {}", marker.display());
    let (v, _) = st.salt_json(&["-t", "3", "*", "cmd.run", &cmd]);
    assert_eq!(v, json!({"m1": "", "m3": ""}));
    std::thread::sleep(Duration::from_secs(2));
    let lines = std::fs::read_to_string(&marker)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(
        lines,
        2,
        "a minion whose key was deleted still ran a job ({lines} lines)\n{}",
        st.logs()
    );
    let pend = st.tool("salt-key", &["-l", "pre", "--out", "json"]);
    let pend: serde_json::Value = serde_json::from_slice(&pend.stdout).unwrap();
    assert!(
        pend["minions_pre"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("m2"))),
        "m2 signs in again and waits as pending: {pend}"
    );
}
