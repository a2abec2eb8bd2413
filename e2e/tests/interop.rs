//! Live interoperability with real Salt 3007 and 3006 (from PyPI, in the venvs made by
//! scripts/salt-venvs), in both directions, on 127.0.0.1:
//! - Brine's master with real 3007 and 3006 minions and two Brine minions (mixed fleet), read by
//!   Salt's own `salt-run state.event`;
//! - a real 3007 master with Brine's minion (and a real minion to compare shapes with), and
//!   Brine's salt-api in front of that real master.
//!
//! The tests need BRINE_SALT3007 and BRINE_SALT3006 (set by scripts/test); without them they
//! print one line and return.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use brine_e2e::real::{self, parse_json, Fleet, RealMaster};
use brine_e2e::{free_port, stderr, stdout, wait_until, Stack};
use serde_json::{json, Value};

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

/// Core grains every Salt minion reports, with their JSON kinds.
const CORE_GRAINS: &[(&str, &str)] = &[
    ("id", "string"),
    ("os", "string"),
    ("os_family", "string"),
    ("kernel", "string"),
    ("kernelrelease", "string"),
    ("cpuarch", "string"),
    ("num_cpus", "number"),
    ("mem_total", "number"),
    ("ipv4", "array"),
    ("saltversion", "string"),
    ("saltversioninfo", "array"),
    ("master", "string"),
    ("host", "string"),
    ("localhost", "string"),
];

// ---- Brine master, real minions (parts 1, 3, 5) ----------------------------------------------

#[test]
fn brine_master_with_real_3007_and_3006_minions() {
    let Some((v7, v6)) = real::venvs() else {
        return;
    };
    let mut st = Stack::new("timeout: 15\ngather_job_timeout: 5\n");
    st.start_master();
    let mut fleet = Fleet::default();
    let reals = [("real3007", &v7, "web"), ("real3006", &v6, "db")];
    for (id, venv, role) in reals {
        let root = st.dir.path().join(format!("minion-{id}"));
        real::write_minion_conf(
            &root,
            id,
            st.ret_port,
            st.publish_port,
            &format!("grains:\n  role: {role}\n  kind: real\n"),
        );
        fleet.0.push(real::start_real_minion(venv, &root));
    }
    st.start_minion("brine1", "grains:\n  role: web\n  kind: brine\n");
    st.start_minion("brine2", "grains:\n  role: db\n  kind: brine\n");
    let all = ["brine1", "brine2", "real3006", "real3007"];

    // Part 1: the real keys show as pending in Brine's salt-key and are accepted.
    st.wait_pending(&all);
    for id in all {
        let out = st.tool("salt-key", &["-y", "-a", id]);
        assert!(
            stdout(&out).contains(&format!("Key for minion {id} accepted.")),
            "{}{}",
            stdout(&out),
            stderr(&out)
        );
    }
    st.wait_answering(&all);
    let both = "real3007,real3006";

    let (v, code) = st.salt_json(&["-L", both, "test.ping"]);
    assert_eq!((v, code), (json!({"real3007": true, "real3006": true}), 0));
    let (v, _) = st.salt_json(&["-L", both, "test.echo", "hello world"]);
    assert_eq!(
        v,
        json!({"real3007": "hello world", "real3006": "hello world"})
    );
    let (v, code) = st.salt_json(&["-L", both, "cmd.run", "echo out; echo err >&2"]);
    assert_eq!(
        (v, code),
        (json!({"real3007": "out\nerr", "real3006": "out\nerr"}), 0)
    );
    // --static exits 0 whatever the retcodes (as Salt's salt does); without it, 1.
    let (v, code) = st.salt_json(&["real3006", "cmd.run", "exit 3"]);
    assert_eq!((v, code), (json!({"real3006": ""}), 0));
    let out = st.tool("salt", &["--out", "json", "real3006", "cmd.run", "exit 3"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failing command on a real minion makes salt exit 1: {}",
        stdout(&out)
    );
    let (v, _) = st.salt_json(&["-L", both, "cmd.run_all", "echo hi; exit 4"]);
    for id in ["real3007", "real3006"] {
        assert_eq!(v[id]["retcode"], json!(4), "{v}");
        assert_eq!(v[id]["stdout"], json!("hi"), "{v}");
        assert!(v[id]["pid"].is_number(), "{v}");
    }
    let (v, _) = st.salt_json(&["-L", both, "test.arg", "a", "1", "foo=bar"]);
    for id in ["real3007", "real3006"] {
        assert_eq!(v[id]["args"], json!(["a", 1]), "{v}");
        assert_eq!(v[id]["kwargs"]["foo"], json!("bar"), "{v}");
        assert_eq!(v[id]["kwargs"]["__pub_fun"], json!("test.arg"), "{v}");
    }

    // grains.items with the real minions' types intact.
    let (v, _) = st.salt_json(&["-L", both, "grains.items"]);
    for (id, version) in [("real3007", "3007.15"), ("real3006", "3006.")] {
        for (g, k) in CORE_GRAINS {
            assert_eq!(kind(&v[id][g]), *k, "{id} grain {g}: {}", v[id][g]);
        }
        assert_eq!(v[id]["id"], json!(id));
        assert_eq!(v[id]["kind"], json!("real"));
        assert!(v[id]["saltversion"].as_str().unwrap().starts_with(version));
    }
    let (v, _) = st.salt_json(&["-L", both, "sys.list_functions"]);
    for id in ["real3007", "real3006"] {
        let funs = v[id].as_array().unwrap_or_else(|| panic!("{v}"));
        for f in ["test.ping", "cmd.run", "state.single", "grains.items"] {
            assert!(funs.contains(&json!(f)), "{id} lacks {f}");
        }
    }

    // An async job, read back with salt-run jobs.lookup_jid.
    let a = st.tool("salt", &["--async", "-L", both, "test.echo", "later"]);
    let jid = stdout(&a).trim().rsplit(' ').next().unwrap().to_string();
    assert!(
        jid.len() == 20 && jid.bytes().all(|b| b.is_ascii_digit()),
        "{}",
        stdout(&a)
    );
    let mut got = Value::Null;
    wait_until(Duration::from_secs(30), || {
        let out = st.tool("salt-run", &["--out", "json", "jobs.lookup_jid", &jid]);
        got = parse_json(&out);
        got == json!({"real3007": "later", "real3006": "later"})
    })
    .unwrap_or_else(|| panic!("jobs.lookup_jid {jid}: {got}\n{}", st.logs()));

    // A state run.
    let (v, code) = st.salt_json(&[
        "-L",
        both,
        "state.single",
        "test.succeed_without_changes",
        "name=x",
    ]);
    assert_eq!(code, 0, "{v}");
    for id in ["real3007", "real3006"] {
        let r = &v[id]["test_|-x_|-x_|-succeed_without_changes"];
        assert_eq!(r["result"], json!(true), "{v}");
        assert_eq!(r["changes"], json!({}), "{v}");
        assert_eq!(r["__run_num__"], json!(0), "{v}");
    }

    // Part 3: the mixed fleet.
    let (v, code) = st.salt_json(&["*", "test.version"]);
    assert_eq!(code, 0);
    assert_eq!(keys(&v), all.map(String::from).to_vec(), "{v}");
    assert_eq!(v["real3007"], json!("3007.15"));
    assert!(v["real3006"].as_str().unwrap().starts_with("3006."), "{v}");
    assert!(v["brine1"].is_string() && v["brine2"].is_string(), "{v}");
    let (v, _) = st.salt_json(&["-G", "role:web", "test.ping"]);
    assert_eq!(v, json!({"brine1": true, "real3007": true}));
    let (v, _) = st.salt_json(&["-G", "kind:real", "test.ping"]);
    assert_eq!(v, json!({"real3006": true, "real3007": true}));
    let (v, _) = st.salt_json(&["-C", "G@role:db and not G@kind:brine", "test.ping"]);
    assert_eq!(v, json!({"real3006": true}));

    // Part 5: Salt's own salt-run state.event on Brine master's bus prints Brine's events.
    let ev_out = st.dir.path().join("state.event.out");
    let mut ev_cmd = Command::new(v7.join("bin/salt-run"));
    ev_cmd
        .arg("-c")
        .arg(st.master_conf_dir())
        .args(["state.event", "salt/job/*", "count=-1"])
        .stdin(Stdio::null())
        .stdout(fs::File::create(&ev_out).unwrap())
        .stderr(fs::File::create(st.dir.path().join("state.event.err")).unwrap())
        .process_group(0);
    let ev_proc = ev_cmd.spawn().expect("salt-run state.event");
    let mut ev_jid = String::new();
    let seen = wait_until(Duration::from_secs(60), || {
        let a = st.tool("salt", &["--async", "real3007", "test.echo", "bus"]);
        ev_jid = stdout(&a)
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or("")
            .to_string();
        std::thread::sleep(Duration::from_secs(2));
        let text = real::tail(&ev_out, 1000);
        text.contains(&format!("salt/job/{ev_jid}/ret/real3007\t"))
            && text.contains(&format!("salt/job/{ev_jid}/new\t"))
    });
    let text = fs::read_to_string(&ev_out).unwrap_or_default();
    kill_group(ev_proc);
    seen.unwrap_or_else(|| {
        panic!(
            "salt-run state.event never printed job {ev_jid}:\n{text}\n{}\n{}",
            real::tail(&st.dir.path().join("state.event.err"), 40),
            st.logs()
        )
    });
    let event = |tag: &str| -> Value {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{tag}\t")))
            .unwrap();
        serde_json::from_str(line.split_once('\t').unwrap().1).unwrap()
    };
    let new = event(&format!("salt/job/{ev_jid}/new"));
    assert_eq!(new["jid"], json!(ev_jid));
    assert_eq!(new["fun"], json!("test.echo"));
    assert_eq!(new["arg"], json!(["bus"]));
    assert_eq!(new["minions"], json!(["real3007"]));
    assert_eq!(new["tgt"], json!("real3007"));
    assert_eq!(new["tgt_type"], json!("glob"));
    assert!(
        new["user"].is_string() && new["_stamp"].is_string(),
        "{new}"
    );
    let ret = event(&format!("salt/job/{ev_jid}/ret/real3007"));
    assert_eq!(ret["return"], json!("bus"));
    assert_eq!(ret["id"], json!("real3007"));
    assert_eq!(ret["retcode"], json!(0));
    assert_eq!(ret["success"], json!(true));
    assert_eq!(ret["fun"], json!("test.echo"));
    assert_eq!(ret["fun_args"], json!(["bus"]));
    assert!(ret["_stamp"].is_string(), "{ret}");

    // A request Brine's master does not handle (publish.runner sends minion_runner): answered
    // as Salt's master without peer_run does ({}), logged once, and the minion goes on.
    for _ in 0..2 {
        let (v, _) = st.salt_json(&["-L", both, "publish.runner", "manage.up"]);
        assert_eq!(v, json!({"real3007": {}, "real3006": {}}), "{v}");
    }
    let log = st.master_log();
    assert_eq!(
        log.matches("unsupported aes command \"minion_runner\" from real")
            .count(),
        1,
        "logged once:\n{}",
        st.logs()
    );

    // The mine between real and Brine minions, kept by Brine's master (_mine, _mine_get).
    let (v, _) = st.salt_json(&["real3007", "mine.send", "test.echo", "from-real"]);
    assert_eq!(v, json!({"real3007": true}));
    let (v, _) = st.salt_json(&["brine1", "mine.send", "test.echo", "from-brine"]);
    assert_eq!(v, json!({"brine1": true}));
    let both_entries = json!({"brine1": "from-brine", "real3007": "from-real"});
    wait_until(Duration::from_secs(20), || {
        st.salt_json(&["brine2", "mine.get", "*", "test.echo"]).0["brine2"] == both_entries
    })
    .unwrap_or_else(|| panic!("mine entries never met\n{}", st.logs()));
    let (v, _) = st.salt_json(&["real3006", "mine.get", "*", "test.echo"]);
    assert_eq!(v["real3006"], both_entries, "a real minion reads the mine");
    let (v, _) = st.salt_json(&["real3007", "mine.delete", "test.echo"]);
    assert_eq!(v, json!({"real3007": true}));
    wait_until(Duration::from_secs(20), || {
        st.salt_json(&["brine2", "mine.get", "*", "test.echo"]).0["brine2"]
            == json!({"brine1": "from-brine"})
    })
    .unwrap_or_else(|| {
        panic!(
            "a real minion's mine.delete was not honoured\n{}",
            st.logs()
        )
    });

    // Part 1: Brine's master restarts; the real minions reconnect and answer again.
    st.stop_master();
    st.start_master();
    st.wait_answering(&all);
    let (v, _) = st.salt_json(&["-L", both, "test.echo", "again"]);
    assert_eq!(v, json!({"real3007": "again", "real3006": "again"}));

    // Deleting one real minion's key: it stops receiving jobs, the rest go on.
    let out = st.tool("salt-key", &["-y", "-d", "real3006"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let marks = st.dir.path().join("marks");
    fs::create_dir_all(&marks).unwrap();
    let touch = format!("touch {}/{{{{ grains.id }}}}", marks.display());
    let (v, _) = st.salt_json(&["-G", "kind:real", "cmd.run", &touch, "template=jinja"]);
    assert_eq!(v, json!({"real3007": ""}), "{v}");
    let (v, _) = st.salt_json(&["*", "test.ping"]);
    assert_eq!(
        v,
        json!({"brine1": true, "brine2": true, "real3007": true}),
        "{v}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(marks.join("real3007").exists());
    assert!(
        !marks.join("real3006").exists(),
        "the minion whose key was deleted still ran a job\n{}",
        st.logs()
    );
    let none = st.tool("salt", &["-L", "real3006", "test.ping"]);
    assert_eq!(none.status.code(), Some(2), "{}", stdout(&none));
}

fn kill_group(mut c: std::process::Child) {
    real::kill_group(c.id() as i32, "KILL");
    let _ = c.wait();
}

// ---- Real master, Brine minion; Brine's salt-api in front of the real master (parts 2, 4) -----

fn api_conf(port: u16) -> String {
    format!(
        "timeout: 15
gather_job_timeout: 5
netapi_enable_clients: [local, local_async, runner, runner_async, wheel, wheel_async]
external_auth:
  auto:
    dave: ['.*', '@runner', '@wheel', '@jobs']
rest_cherrypy:
  port: {port}
  host: 127.0.0.1
  disable_ssl: True
"
    )
}

#[test]
fn real_3007_master_with_brine_minion_and_brine_api() {
    let Some((v7, _)) = real::venvs() else {
        return;
    };
    let api_port = free_port();
    let mut rm = RealMaster::new(&v7, &api_conf(api_port));
    rm.start();
    rm.start_brine_minion("brine1", "grains:\n  role: web\n  kind: brine\n");
    rm.start_real_minion(&v7, "real1", "grains:\n  role: db\n  kind: real\n");
    rm.accept(&["brine1", "real1"]);
    rm.wait_answering(&["brine1", "real1"]);
    let pair = "brine1,real1";

    // Part 2: the real salt CLI sees Brine's answers in the shapes Salt's minion gives.
    let (v, code) = rm.salt_json(&["-L", pair, "test.ping"]);
    assert_eq!((v, code), (json!({"brine1": true, "real1": true}), 0));
    let (v, _) = rm.salt_json(&["-L", pair, "test.echo", "hello world"]);
    assert_eq!(v["brine1"], json!("hello world"));
    assert_eq!(v["brine1"], v["real1"]);
    let (v, _) = rm.salt_json(&["-L", pair, "test.arg", "a", "1", "foo=bar"]);
    assert_eq!(v["brine1"]["args"], json!(["a", 1]), "{v}");
    assert_eq!(v["brine1"]["kwargs"]["foo"], json!("bar"), "{v}");
    assert_eq!(keys(&v["brine1"]), keys(&v["real1"]), "{v}");
    assert_eq!(
        keys(&v["brine1"]["kwargs"]),
        keys(&v["real1"]["kwargs"]),
        "{v}"
    );
    assert_eq!(v["brine1"]["kwargs"]["__pub_fun"], json!("test.arg"));
    let (v, code) = rm.salt_json(&["-L", pair, "cmd.run", "echo out; echo err >&2"]);
    assert_eq!(
        (v, code),
        (json!({"brine1": "out\nerr", "real1": "out\nerr"}), 0)
    );
    for id in ["brine1", "real1"] {
        // Without --static: the real salt CLI ignores retcodes with --static.
        let out = rm.tool(
            "salt",
            &[
                "--out",
                "json",
                id,
                "cmd.run_all",
                "echo hi; echo no >&2; exit 3",
            ],
        );
        let (v, code) = (parse_json(&out), out.status.code().unwrap_or(-1));
        assert_eq!(v[id]["retcode"], json!(3), "{v}");
        assert_eq!(v[id]["stdout"], json!("hi"), "{v}");
        assert_eq!(v[id]["stderr"], json!("no"), "{v}");
        assert_eq!(keys(&v[id]), ["pid", "retcode", "stderr", "stdout"], "{v}");
        assert_eq!(code, 1, "{id}: a failing cmd.run_all makes salt exit 1");
    }
    let (v, _) = rm.salt_json(&["-L", pair, "grains.items"]);
    for (g, k) in CORE_GRAINS {
        assert_eq!(kind(&v["real1"][g]), *k, "real1 grain {g}");
        assert_eq!(
            kind(&v["brine1"][g]),
            *k,
            "brine1 grain {g}: {}",
            v["brine1"][g]
        );
    }
    for g in ["os", "os_family", "kernel", "cpuarch", "num_cpus"] {
        assert_eq!(v["brine1"][g], v["real1"][g], "grain {g} on the same host");
    }
    assert_eq!(v["brine1"]["role"], json!("web"));
    let (v, _) = rm.salt_json(&["-L", pair, "grains.item", "os"]);
    assert_eq!(keys(&v["brine1"]), ["os"], "{v}");
    assert_eq!(v["brine1"], v["real1"]);

    // saltutil.find_job: nothing for an unknown jid; the running job's data otherwise.
    let (v, _) = rm.salt_json(&["-L", pair, "saltutil.find_job", "20000101000000000000"]);
    assert_eq!(v, json!({"brine1": {}, "real1": {}}));
    let a = rm.tool("salt", &["--async", "-L", pair, "test.sleep", "6"]);
    let jid = stdout(&a).trim().rsplit(' ').next().unwrap().to_string();
    std::thread::sleep(Duration::from_secs(1));
    let (v, _) = rm.salt_json(&["-L", pair, "saltutil.find_job", &jid]);
    for id in ["brine1", "real1"] {
        assert_eq!(v[id]["jid"], json!(jid), "{v}");
        assert_eq!(v[id]["fun"], json!("test.sleep"), "{v}");
        assert!(v[id]["pid"].is_number(), "{v}");
    }
    for k in ["arg", "fun", "jid", "pid", "tgt", "tgt_type", "user"] {
        assert!(v["brine1"].get(k).is_some(), "find_job lacks {k}: {v}");
    }

    // Compound targeting with Brine's grains.
    let (v, _) = rm.salt_json(&["-C", "G@role:web and G@kind:brine", "test.ping"]);
    assert_eq!(v, json!({"brine1": true}));
    let (v, _) = rm.salt_json(&["-C", "G@kind:brine or real1", "test.ping"]);
    assert_eq!(v, json!({"brine1": true, "real1": true}));

    // A function neither minion has: the same answer from both.
    let (v, _) = rm.salt_json(&["-L", pair, "nosuch.function"]);
    assert_eq!(v["brine1"], v["real1"], "{v}");
    assert!(
        v["brine1"]
            .as_str()
            .unwrap_or("")
            .contains("is not available"),
        "{v}"
    );

    // Part 4: Brine's salt-api in front of the real master.
    api_against_real_master(&mut rm, api_port);

    // Part 2: the real master restarts; Brine's minion reconnects.
    rm.stop();
    rm.start();
    rm.wait_answering(&["brine1", "real1"]);
    let (v, _) = rm.salt_json(&["brine1", "test.echo", "back"]);
    assert_eq!(v, json!({"brine1": "back"}));
}

fn api_against_real_master(rm: &mut RealMaster, port: u16) {
    rm.start_brine_api(port);
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let url = |p: &str| format!("http://127.0.0.1:{port}{p}");
    let r = http
        .post(url("/login"))
        .json(&json!({"username": "dave", "password": "x", "eauth": "auto"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let tok = r.headers()["x-auth-token"].to_str().unwrap().to_string();
    let post = |body: Value| -> Value {
        let r = http
            .post(url("/"))
            .header("X-Auth-Token", &tok)
            .json(&body)
            .send()
            .unwrap();
        let s = r.status().as_u16();
        let v: Value = r.json().unwrap_or(Value::Null);
        assert_eq!(s, 200, "{body} -> {v}\n{}", rm.logs());
        v
    };

    // /events, opened first so that it sees the jobs below.
    let (tx, rx) = std::sync::mpsc::channel::<(String, Value)>();
    let resp = reqwest::blocking::Client::builder()
        .timeout(None)
        .build()
        .unwrap()
        .get(url("/events"))
        .header("Accept", "text/event-stream")
        .header("X-Auth-Token", &tok)
        .send()
        .unwrap();
    assert_eq!(resp.status(), 200);
    std::thread::spawn(move || {
        let mut tag = String::new();
        for line in BufReader::new(resp).lines() {
            let Ok(line) = line else { return };
            if let Some(t) = line.strip_prefix("tag: ") {
                tag = t.trim().to_string();
            } else if let Some(d) = line.strip_prefix("data: ") {
                let v = serde_json::from_str(d).unwrap_or(Value::Null);
                if tx.send((tag.clone(), v)).is_err() {
                    return;
                }
            }
        }
    });

    let v = post(json!({"client": "local", "tgt": "*", "fun": "test.ping"}));
    assert_eq!(v, json!({"return": [{"brine1": true, "real1": true}]}));
    let v = post(
        json!({"client": "local", "tgt": "brine1", "fun": "test.arg", "arg": ["a"], "kwarg": {"k": 1}}),
    );
    assert_eq!(v["return"][0]["brine1"]["args"], json!(["a"]), "{v}");
    assert_eq!(v["return"][0]["brine1"]["kwargs"]["k"], json!(1), "{v}");

    let v = post(json!({"client": "local_async", "tgt": "*", "fun": "test.echo", "arg": ["api"]}));
    let jid = v["return"][0]["jid"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string();
    let mut minions = v["return"][0]["minions"].clone();
    minions
        .as_array_mut()
        .unwrap()
        .sort_by_key(|m| m.to_string());
    assert_eq!(minions, json!(["brine1", "real1"]));

    // The real master's job events reach /events.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        let (tag, data) = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "/events: missing events of {jid}, saw {seen:?}\n{}",
                rm.logs()
            )
        });
        if tag == format!("salt/job/{jid}/new") {
            assert_eq!(data["data"]["fun"], json!("test.echo"), "{data}");
            seen.push(tag);
        } else if tag.starts_with(&format!("salt/job/{jid}/ret/")) {
            assert_eq!(data["data"]["return"], json!("api"), "{data}");
            seen.push(tag);
        }
    }

    let mut got = Value::Null;
    wait_until(Duration::from_secs(20), || {
        got = post(json!({"client": "runner", "fun": "jobs.lookup_jid", "jid": jid}));
        got == json!({"return": [{"brine1": "api", "real1": "api"}]})
    })
    .unwrap_or_else(|| panic!("jobs.lookup_jid: {got}\n{}", rm.logs()));
    let v = post(json!({"client": "runner", "fun": "jobs.list_jobs"}));
    let rec = &v["return"][0][&jid];
    assert_eq!(rec["Function"], json!("test.echo"), "{v}");
    assert_eq!(
        rec["User"],
        json!("dave"),
        "the API caller in the real master's job record"
    );
    let v = post(json!({"client": "runner", "fun": "manage.status"}));
    assert_eq!(v["return"][0]["up"], json!(["brine1", "real1"]), "{v}");
    assert_eq!(v["return"][0]["down"], json!([]), "{v}");
    let v = post(json!({"client": "wheel", "fun": "key.list_all"}));
    let data = &v["return"][0]["data"];
    assert_eq!(data["success"], json!(true), "{v}");
    assert_eq!(data["return"]["minions"], json!(["brine1", "real1"]), "{v}");
    // Salt's master takes every extra key of a wheel load as an argument of the function, so
    // the caller's name cannot travel as `user`: it records the user it runs as.
    assert_eq!(data["user"], json!(brine_e2e::whoami()), "{v}");
}
