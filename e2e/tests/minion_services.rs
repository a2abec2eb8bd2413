//! The minion's schedule, beacons and mine, end to end: a master and minions as real
//! processes, driven with `salt` and salt-api as users drive them.

use std::time::Duration;

use brine_e2e::http::{sse, Api};
use brine_e2e::{wait_until, Stack};
use serde_json::{json, Value};

/// `salt --out json --static <args>`: the parsed output.
fn salt(st: &Stack, args: &[&str]) -> Value {
    st.salt_json(args).0
}

/// The jids of `fun` jobs whose return came from a schedule (`jobs.list_jobs`).
fn jobs_of(st: &Stack, fun: &str) -> Vec<String> {
    let out = st.tool(
        "salt-run",
        &[
            "--out",
            "json",
            "jobs.list_jobs",
            &format!("search_function={fun}"),
        ],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn lookup(st: &Stack, jid: &str) -> Value {
    let out = st.tool("salt-run", &["--out", "json", "jobs.lookup_jid", jid]);
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

#[test]
fn schedule_runs_jobs_returns_them_and_persists_changes() {
    let mut st = Stack::new("auto_accept: True\ntimeout: 8\n");
    st.start_master();
    st.start_minion(
        "m1",
        "schedule:\n  fromconf:\n    function: test.echo\n    args: [from-config]\n    seconds: 1\n",
    );
    st.wait_answering(&["m1"]);

    // The config's job is listed as Salt lists it, and runs: its returns reach the job cache
    // under a jid the master allocates.
    let listed = salt(&st, &["m1", "schedule.list", "return_yaml=False"]);
    assert_eq!(
        listed["m1"],
        json!({"fromconf": {"function": "test.echo", "args": ["from-config"], "seconds": 1, "enabled": true}})
    );
    wait_until(Duration::from_secs(20), || {
        !jobs_of(&st, "test.echo").is_empty()
    })
    .unwrap_or_else(|| panic!("no scheduled return\n{}", st.logs()));
    let jid = jobs_of(&st, "test.echo").pop().unwrap();
    assert_eq!(lookup(&st, &jid), json!({"m1": "from-config"}));
    let yaml = salt(&st, &["m1", "schedule.list"]);
    assert_eq!(
        yaml["m1"],
        json!("schedule:\n  fromconf:\n    args:\n    - from-config\n    enabled: true\n    function: test.echo\n    saved: false\n    seconds: 1\n")
    );

    // add / list / modify / disable / enable / run_job / delete, with Salt's answers.
    let add = salt(
        &st,
        &[
            "m1",
            "schedule.add",
            "job1",
            "function=test.arg",
            "job_args=[a, 2]",
            "job_kwargs={k: v}",
            "seconds=3600",
        ],
    );
    assert_eq!(
        add["m1"],
        json!({"comment": "Added job: job1 to schedule.", "result": true, "changes": {"job1": "added"}})
    );
    let again = st.salt_json(&[
        "m1",
        "schedule.add",
        "job1",
        "function=test.ping",
        "seconds=5",
    ]);
    assert_eq!(
        again.0["m1"]["comment"],
        json!("Job job1 already exists in schedule.")
    );
    // --static exits 0 whatever the retcodes (as Salt's salt does); without it, 1.
    assert_eq!(again.1, 0);
    let plain = st.tool(
        "salt",
        &[
            "m1",
            "schedule.add",
            "job1",
            "function=test.ping",
            "seconds=5",
        ],
    );
    assert_eq!(plain.status.code(), Some(1), "a failed add is a failed job");
    let conflict = salt(
        &st,
        &[
            "m1",
            "schedule.add",
            "j2",
            "function=test.ping",
            "seconds=5",
            "when=10:00",
        ],
    );
    assert_eq!(
        conflict["m1"]["comment"],
        json!("Error: Unable to use \"seconds\", \"minutes\", \"hours\", or \"days\" with \"when\" or \"cron\" options.")
    );
    let cron = salt(
        &st,
        &[
            "m1",
            "schedule.add",
            "j3",
            "function=test.ping",
            "cron=* * * * *",
        ],
    );
    assert_eq!(cron["m1"]["result"], json!(false));
    assert!(
        cron["m1"]["comment"].as_str().unwrap().contains("\"cron\""),
        "{cron}"
    );

    let listed = salt(&st, &["m1", "schedule.list", "return_yaml=False"]);
    assert_eq!(
        listed["m1"]["job1"],
        json!({"function": "test.arg", "seconds": 3600, "args": ["a", 2], "kwargs": {"k": "v"},
               "maxrunning": 1, "name": "job1", "enabled": true, "jid_include": true})
    );
    let yaml = salt(&st, &["m1", "schedule.list"]);
    let text = yaml["m1"].as_str().unwrap();
    assert!(
        text.starts_with(
            "schedule:\n  fromconf:\n    args:\n    - from-config\n    enabled: true\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  job1:\n    args:\n    - a\n    - 2\n    enabled: true\n"),
        "{text}"
    );
    assert!(
        text.contains("    name: job1\n    saved: true\n    seconds: 3600\n"),
        "{text}"
    );
    assert!(
        !text.contains("saved: false"),
        "add persisted the whole schedule: {text}"
    );

    // Like Salt, modify rebuilds the job from what it is given (and keeps the function).
    let modify = salt(
        &st,
        &[
            "m1",
            "schedule.modify",
            "job1",
            "job_args=[a, 2]",
            "job_kwargs={k: v}",
            "seconds=7200",
        ],
    );
    assert_eq!(
        modify["m1"]["comment"],
        json!("Modified job: job1 in schedule.")
    );
    assert_eq!(
        modify["m1"]["changes"]["job1"]["old"]["seconds"],
        json!(3600)
    );
    assert_eq!(
        modify["m1"]["changes"]["job1"]["new"]["seconds"],
        json!(7200)
    );
    let missing = salt(
        &st,
        &["m1", "schedule.modify", "nojob", "function=test.ping"],
    );
    assert_eq!(
        missing["m1"],
        json!({"comment": "Job nojob does not exist in schedule.", "changes": {}, "result": false})
    );

    let dis = salt(&st, &["m1", "schedule.disable_job", "job1"]);
    assert_eq!(
        dis["m1"],
        json!({"comment": "Disabled Job job1 in schedule.", "result": true, "changes": {"job1": "disabled"}})
    );
    let run = salt(&st, &["m1", "schedule.run_job", "job1"]);
    assert_eq!(
        run["m1"],
        json!({"comment": "Job job1 is disabled.", "result": true})
    );
    salt(&st, &["m1", "schedule.enable_job", "job1"]);
    let run = salt(&st, &["m1", "schedule.run_job", "job1"]);
    assert_eq!(
        run["m1"],
        json!({"comment": "Scheduling Job job1 on minion.", "result": true})
    );
    wait_until(Duration::from_secs(20), || {
        !jobs_of(&st, "test.arg").is_empty()
    })
    .unwrap_or_else(|| panic!("run_job did not run job1\n{}", st.logs()));
    let jid = jobs_of(&st, "test.arg").pop().unwrap();
    let ret = lookup(&st, &jid);
    assert_eq!(ret["m1"]["args"], json!(["a", 2]), "{ret}");
    assert_eq!(ret["m1"]["kwargs"]["k"], json!("v"), "{ret}");
    assert_eq!(
        ret["m1"]["kwargs"]["__pub_schedule"],
        json!("job1"),
        "{ret}"
    );
    let nojob = salt(&st, &["m1", "schedule.run_job", "nojob"]);
    assert_eq!(
        nojob["m1"],
        json!({"comment": "Job nojob does not exist.", "result": false})
    );

    // return_job: nocache runs the job and announces its return without storing it.
    let mark = st.dir.path().join("nocache-mark");
    let job_args = format!("job_args=[touch {}]", mark.display());
    let add = salt(
        &st,
        &[
            "m1",
            "schedule.add",
            "quiet",
            "function=cmd.run",
            &job_args,
            "return_job=nocache",
            "seconds=3600",
        ],
    );
    assert_eq!(add["m1"]["result"], json!(true), "{add}");
    salt(&st, &["m1", "schedule.run_job", "quiet"]);
    wait_until(Duration::from_secs(20), || mark.exists())
        .unwrap_or_else(|| panic!("the nocache job did not run\n{}", st.logs()));
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        jobs_of(&st, "cmd.run").is_empty(),
        "a nocache return was stored"
    );

    let off = salt(&st, &["m1", "schedule.disable"]);
    assert_eq!(
        off["m1"],
        json!({"comment": "Disabled schedule on minion.", "changes": {"schedule": "disabled"}, "result": true})
    );
    assert_eq!(
        salt(&st, &["m1", "schedule.is_enabled"])["m1"],
        json!(false)
    );
    salt(&st, &["m1", "schedule.enable"]);

    // Added jobs survive a restart (minion.d/_schedule.conf); deleted ones do not.
    let conf = st.dir.path().join("minion-m1/etc/minion.d/_schedule.conf");
    let saved = std::fs::read_to_string(&conf).unwrap();
    assert!(saved.starts_with("schedule:\n"), "{saved}");
    assert!(saved.contains("  job1:\n"), "{saved}");
    st.kill_minion("m1");
    st.restart_minion("m1");
    st.wait_answering(&["m1"]);
    let listed = salt(&st, &["m1", "schedule.list", "return_yaml=False"]);
    assert_eq!(listed["m1"]["job1"]["seconds"], json!(7200));
    let del = salt(&st, &["m1", "schedule.delete", "job1"]);
    assert_eq!(
        del["m1"],
        json!({"comment": "Deleted Job job1 from schedule.", "result": true, "changes": {"job1": "removed"}})
    );
    assert!(!std::fs::read_to_string(&conf).unwrap().contains("job1"));
    // SaltGUI asks this of every master; with no SLS, Salt's answer is an error list.
    let out = st.tool(
        "salt-run",
        &["state.orchestrate_show_sls", "*", "--out", "json"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (_, errors) = v.as_object().unwrap().iter().next().unwrap();
    assert_eq!(
        errors,
        &json!(["No matching sls found for '*' in env 'base'"])
    );
    let hidden = salt(
        &st,
        &["m1", "schedule.list", "show_all=True", "return_yaml=False"],
    );
    assert_eq!(
        hidden["m1"]["__mine_interval"]["function"],
        json!("mine.update")
    );
}

#[test]
fn mine_stores_serves_and_forgets_data() {
    let mut st = Stack::new("auto_accept: True\ntimeout: 8\n");
    st.start_master();
    let functions = "mine_functions:\n  test.ping: []\n  grains.item: [os]\n  greeting:\n    - mine_function: test.echo\n    - hello\n";
    st.start_minion("m1", functions);
    st.start_minion(
        "m2",
        "mine_functions:\n  secret:\n    mine_function: test.echo\n    text: m2-only\n    allow_tgt: m2\n",
    );
    st.wait_answering(&["m1", "m2"]);

    let valid = salt(&st, &["m1", "mine.valid"]);
    assert_eq!(
        valid["m1"],
        json!({"test.ping": [], "grains.item": ["os"], "greeting": {"test.echo": ["hello"]}})
    );
    // The minions send their mine at start (Salt's __mine_interval job runs on start).
    wait_until(Duration::from_secs(20), || {
        salt(&st, &["m2", "mine.get", "*", "test.ping"])["m2"] == json!({"m1": true})
    })
    .unwrap_or_else(|| panic!("m1's mine never arrived\n{}", st.logs()));
    let os = salt(&st, &["m2", "mine.get", "m1", "grains.item"]);
    assert_eq!(
        os["m2"]["m1"]["os"].as_str().map(str::is_empty),
        Some(false)
    );
    let two = salt(&st, &["m2", "mine.get", "*", "greeting,test.ping"]);
    assert_eq!(
        two["m2"],
        json!({"greeting": {"m1": "hello"}, "test.ping": {"m1": true}})
    );
    let listed = st.salt_json(&["m2", "mine.get", "*", "[\"greeting\"]"]).0;
    assert_eq!(listed["m2"], json!({"greeting": {"m1": "hello"}}));

    // An entry with allow_tgt is served only to the minions it names.
    wait_until(Duration::from_secs(20), || {
        salt(&st, &["m2", "mine.get", "*", "secret"])["m2"] == json!({"m2": "m2-only"})
    })
    .unwrap_or_else(|| panic!("m2's secret never arrived\n{}", st.logs()));
    assert_eq!(
        salt(&st, &["m1", "mine.get", "*", "secret"])["m1"],
        json!({})
    );
    let excl = salt(
        &st,
        &["m2", "mine.get", "*", "secret", "exclude_minion=True"],
    );
    assert_eq!(excl["m2"], json!({}));

    // send / delete / flush, and the data survives a master restart.
    assert_eq!(
        salt(&st, &["m1", "mine.send", "test.echo", "hi"])["m1"],
        json!(true)
    );
    assert_eq!(
        salt(&st, &["m2", "mine.get", "m1", "test.echo"])["m2"],
        json!({"m1": "hi"})
    );
    st.stop_master();
    st.start_master();
    wait_until(Duration::from_secs(30), || {
        salt(&st, &["m2", "mine.get", "m1", "test.echo"])["m2"] == json!({"m1": "hi"})
    })
    .unwrap_or_else(|| panic!("mine lost over a master restart\n{}", st.logs()));
    assert_eq!(
        salt(&st, &["m1", "mine.delete", "test.echo"])["m1"],
        json!(true)
    );
    assert_eq!(
        salt(&st, &["m2", "mine.get", "m1", "test.echo"])["m2"],
        json!({})
    );
    assert_eq!(salt(&st, &["m1", "mine.flush"])["m1"], json!(true));
    assert_eq!(
        salt(&st, &["m2", "mine.get", "m1", "test.ping"])["m2"],
        json!({})
    );
    assert_eq!(salt(&st, &["m1", "mine.update"])["m1"], json!(true));
    assert_eq!(
        salt(&st, &["m2", "mine.get", "m1", "greeting"])["m2"],
        json!({"m1": "hello"})
    );
}

#[test]
fn beacons_fire_events_and_are_managed_at_run_time() {
    let (mut st, port) = brine_e2e::http::api_stack_config(
        "auto_accept: True\ntimeout: 8",
        "admin:adminpw\n",
        "    admin: ['.*', '@runner', '@wheel', '@jobs']",
    );
    st.start_master();
    // Thresholds no load average can stay inside: the beacon fires on every pass.
    st.start_minion(
        "m1",
        "beacons:\n  load:\n    - averages: {1m: [-1.0, -0.5], 5m: [-1.0, -0.5], 15m: [-1.0, -0.5]}\n    - interval: 1\n",
    );
    st.wait_answering(&["m1"]);
    st.start_api(port);
    let api = Api::new(st, port);
    let token = api.login("admin", "adminpw", "file");
    let mut events = sse(&api, &token, None);
    let ev = events.until(|tag, _| tag == "salt/beacon/m1/load/");
    assert_eq!(ev["data"]["id"], json!("m1"));
    assert!(ev["data"]["1m"].is_number(), "{ev}");
    assert!(ev["data"]["_stamp"].is_string(), "{ev}");

    let st = &api.st;
    let avail = salt(st, &["m1", "beacons.list_available", "return_yaml=False"]);
    assert_eq!(
        avail["m1"],
        json!(["diskusage", "load", "memusage", "service"])
    );
    let add = salt(
        st,
        &[
            "m1",
            "beacons.add",
            "diskusage",
            "[{'/': '0%'}, {'interval': 1}]",
        ],
    );
    assert_eq!(
        add["m1"],
        json!({"comment": "Added beacon: diskusage.", "result": true})
    );
    let ev = events.until(|tag, _| tag == "salt/beacon/m1/diskusage/");
    assert_eq!(ev["data"]["mount"], json!("/"));
    assert!(ev["data"]["diskusage"].is_number(), "{ev}");
    let add = salt(
        st,
        &[
            "m1",
            "beacons.add",
            "watch",
            "[{'beacon_module': 'service'}, {'services': {'brine-no-such-service': {}}}]",
        ],
    );
    assert_eq!(add["m1"]["result"], json!(true), "{add}");
    let ev = events.until(|tag, _| tag == "salt/beacon/m1/watch/brine-no-such-service");
    assert_eq!(
        ev["data"]["brine-no-such-service"],
        json!({"running": false})
    );
    assert_eq!(ev["data"]["service_name"], json!("brine-no-such-service"));

    let bad = salt(st, &["m1", "beacons.add", "nosuch", "[{'x': 1}]"]);
    assert_eq!(
        bad["m1"],
        json!({"comment": "Beacon \"nosuch\" is not available.", "result": false})
    );
    let invalid = salt(
        st,
        &[
            "m1",
            "beacons.add",
            "load2",
            "[{'beacon_module': 'load'}, {'interval': 5}]",
        ],
    );
    assert_eq!(
        invalid["m1"]["comment"],
        json!("Beacon load2 configuration invalid, not adding.\nAverages configuration is required for load beacon.")
    );
    let dup = salt(st, &["m1", "beacons.add", "load", "[{'averages': {}}]"]);
    assert_eq!(
        dup["m1"],
        json!({"comment": "Beacon load is already configured.", "result": true})
    );

    let off = salt(st, &["m1", "beacons.disable_beacon", "diskusage"]);
    assert_eq!(
        off["m1"],
        json!({"comment": "Disabled beacon diskusage on minion.", "result": true})
    );
    let listed = salt(st, &["m1", "beacons.list", "return_yaml=False"]);
    assert_eq!(
        listed["m1"]["diskusage"],
        json!([{"/": "0%"}, {"interval": 1}, {"enabled": false}])
    );
    let modify = salt(
        st,
        &[
            "m1",
            "beacons.modify",
            "diskusage",
            "[{'/': '0%'}, {'interval': 2}, {'enabled': False}]",
        ],
    );
    assert_eq!(
        modify["m1"]["comment"],
        json!("Modified beacon: diskusage.")
    );
    assert_eq!(
        modify["m1"]["changes"]["diff"],
        json!("--- \n+++ \n@@ -1,3 +1,3 @@\n /:0%\n-interval:1\n+interval:2\n enabled:False\n")
    );
    let all_off = salt(st, &["m1", "beacons.disable"]);
    assert_eq!(
        all_off["m1"],
        json!({"comment": "Disabled beacons on minion.", "result": true})
    );
    let listed = salt(st, &["m1", "beacons.list", "return_yaml=False"]);
    assert_eq!(listed["m1"]["enabled"], json!(false));
    salt(st, &["m1", "beacons.enable"]);
    let del = salt(st, &["m1", "beacons.delete", "watch"]);
    assert_eq!(
        del["m1"],
        json!({"comment": "Deleted beacon: watch.", "result": true})
    );
    let yaml = salt(st, &["m1", "beacons.list"]);
    let text = yaml["m1"].as_str().unwrap();
    assert!(
        text.starts_with(
            "beacons:\n  diskusage:\n  - /: 0%\n  - interval: 2\n  - enabled: false\n"
        ),
        "{text}"
    );
    let save = salt(st, &["m1", "beacons.save"]);
    assert_eq!(save["m1"]["result"], json!(true), "{save}");
    let saved =
        std::fs::read_to_string(st.dir.path().join("minion-m1/etc/minion.d/beacons.conf")).unwrap();
    assert!(saved.starts_with("beacons:\n"), "{saved}");
    assert!(saved.contains("  load:\n"), "{saved}");
}
