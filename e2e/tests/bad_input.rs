//! Hostile and broken input: the master refuses it with a logged reason and keeps serving;
//! broken config files stop a daemon with a one-line error.

use std::io::Write;
use std::time::Duration;

use brine_e2e::wire::{clear, request};
use brine_e2e::{bin, children_of, process_gone, stderr, stdout, wait_until, Stack};
use brine_protocol::payload::{dumps, get, get_str, loads, map, Value};
use serde_json::json;

#[test]
fn hostile_requests_are_refused_and_the_master_keeps_serving() {
    let mut st = Stack::new("auto_accept: True\n");
    st.start_master();
    st.start_minion("m1", "");
    st.wait_answering(&["m1"]);
    let ctx = zmq::Context::new();
    let port = st.ret_port;
    let bad_load = dumps(&Value::from("bad load"));

    // A job in flight while the abuse goes on must still come back.
    let a = st.tool("salt", &["--async", "m1", "test.sleep", "2"]);
    let jid = stdout(&a).trim().rsplit(' ').next().unwrap().to_string();

    // Garbage, truncated msgpack, a non-map, wrong enc, old versions.
    assert_eq!(
        request(&ctx, port, b"\xff\xfe garbage", 5000).unwrap(),
        bad_load
    );
    let valid = clear(map(vec![("cmd", Value::from("ping"))]));
    assert_eq!(
        request(&ctx, port, &valid[..valid.len() / 2], 5000).unwrap(),
        bad_load
    );
    assert_eq!(
        request(&ctx, port, &dumps(&Value::from(7)), 5000).unwrap(),
        bad_load
    );
    let wrong_enc = dumps(&map(vec![
        ("enc", Value::from("rot13")),
        ("load", Value::Map(vec![])),
        ("version", Value::from(3)),
    ]));
    assert_eq!(request(&ctx, port, &wrong_enc, 5000).unwrap(), bad_load);
    let v2 = dumps(&map(vec![
        ("enc", Value::from("clear")),
        ("load", map(vec![("cmd", Value::from("ping"))])),
        ("version", Value::from(2)),
    ]));
    assert_eq!(request(&ctx, port, &v2, 5000).unwrap(), bad_load);

    // An unknown clear command gets {}; ping echoes.
    let unknown = request(
        &ctx,
        port,
        &clear(map(vec![("cmd", Value::from("nope"))])),
        5000,
    )
    .unwrap();
    assert_eq!(loads(&unknown).unwrap(), Value::Map(vec![]));
    let ping = request(&ctx, port, &valid, 5000).unwrap();
    assert_eq!(get_str(&loads(&ping).unwrap(), "cmd"), Some("ping"));

    // A tampered AES load, and an aes request for an id with no session.
    for id in ["m1", "ghost"] {
        let body = dumps(&map(vec![
            ("enc", Value::from("aes")),
            ("load", Value::Binary(vec![7u8; 96])),
            ("version", Value::from(3)),
            ("id", Value::from(id)),
        ]));
        assert_eq!(request(&ctx, port, &body, 5000).unwrap(), bad_load, "{id}");
    }

    // A publish with a wrong root key.
    let publish = clear(map(vec![
        ("cmd", Value::from("publish")),
        ("tgt", Value::from("*")),
        ("fun", Value::from("cmd.run")),
        (
            "arg",
            Value::Array(vec![Value::from("touch /tmp/brine-should-not-exist")]),
        ),
        ("key", Value::from("not-the-root-key")),
        ("tgt_type", Value::from("glob")),
        ("jid", Value::from("")),
        ("ret", Value::from("")),
        ("user", Value::from("root")),
    ]));
    let r = loads(&request(&ctx, port, &publish, 5000).unwrap()).unwrap();
    assert_eq!(
        get_str(get(&r, "error").unwrap(), "name"),
        Some("AuthenticationError"),
        "{r}"
    );

    // Sign-ins with ids that would escape pki_dir.
    let pub_text = std::fs::read_to_string(st.dir.path().join("minion-m1/pki/minion.pub")).unwrap();
    for id in ["a/b", "a\\b", "..", "../evil", "nul\0byte"] {
        let body = clear(map(vec![
            ("cmd", Value::from("_auth")),
            ("id", Value::from(id)),
            ("nonce", Value::from("0123456789abcdef0123456789abcdef")),
            ("enc_algo", Value::from("OAEP-SHA1")),
            ("sig_algo", Value::from("PKCS1v15-SHA1")),
            ("pub", Value::from(pub_text.clone())),
        ]));
        let r = loads(&request(&ctx, port, &body, 5000).unwrap()).unwrap();
        let inner = match get(&r, "load").unwrap() {
            Value::Binary(b) => loads(b).unwrap(),
            other => panic!("unsigned reply {other}"),
        };
        assert_eq!(get(&inner, "ret"), Some(&Value::from(false)), "{id:?}");
    }
    assert!(!st.master_root().join("pki/evil").exists());

    // An accepted id signing in with another key is refused, and that key recorded as denied.
    let other = brine_protocol::crypt::PrivateKey::generate(2048)
        .unwrap()
        .public()
        .to_pem();
    let body = clear(map(vec![
        ("cmd", Value::from("_auth")),
        ("id", Value::from("m1")),
        ("nonce", Value::from("0123456789abcdef0123456789abcdef")),
        ("enc_algo", Value::from("OAEP-SHA1")),
        ("sig_algo", Value::from("PKCS1v15-SHA1")),
        ("pub", Value::from(other.clone())),
    ]));
    let r = loads(&request(&ctx, port, &body, 5000).unwrap()).unwrap();
    let inner = match get(&r, "load").unwrap() {
        Value::Binary(b) => loads(b).unwrap(),
        other => panic!("unsigned reply {other}"),
    };
    assert_eq!(get(&inner, "ret"), Some(&Value::from(false)));
    let denied = std::fs::read_to_string(st.master_root().join("pki/minions_denied/m1")).unwrap();
    assert_eq!(denied, other);
    // The real m1 keeps its accepted key.
    assert_eq!(
        std::fs::read_to_string(st.master_root().join("pki/minions/m1")).unwrap(),
        pub_text.trim()
    );
    assert!(!st.master_root().join("evil").exists());

    // A 100 MB frame is refused with a reason; one over twice the limit cuts the peer off
    // before it is held in memory. Nobody else notices either.
    let huge = vec![0x90u8; 100 * 1024 * 1024];
    assert_eq!(request(&ctx, port, &huge, 30000).unwrap(), bad_load);
    let huger = vec![0x90u8; 140 * 1024 * 1024];
    assert!(request(&ctx, port, &huger, 3000).is_none());
    drop((huge, huger));

    // Truncated ZMTP: half a greeting, then a hang-up.
    {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(&[0xff, 0, 0, 0, 0, 0, 0, 0, 1]).unwrap();
    }
    {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    }

    // Everyone else is still served, and the job in flight came back.
    let (v, _) = st.salt_json(&["m1", "test.ping"]);
    assert_eq!(v, json!({"m1": true}));
    let mut looked = serde_json::Value::Null;
    wait_until(Duration::from_secs(20), || {
        let o = st.tool("salt-run", &["--out", "json", "jobs.lookup_jid", &jid]);
        looked = serde_json::from_slice(&o.stdout).unwrap_or_default();
        looked == json!({"m1": true})
    })
    .unwrap_or_else(|| panic!("the job in flight was lost: {looked}\n{}", st.logs()));
    assert!(!std::path::Path::new("/tmp/brine-should-not-exist").exists());

    // Each refusal was logged with its reason.
    let log = st.master_log();
    for reason in [
        "over brine_max_request_size",
        "undecodable payload",
        "payload is not a map",
        "enc is not clear or aes",
        "below minimum_auth_version",
        "does not decrypt",
        "which has no session",
        "bad root key",
        "path separator",
        "relative path component",
        "null byte",
    ] {
        assert!(log.contains(reason), "no log line for {reason:?}\n{log}");
    }
}

#[test]
fn wheel_and_runner_functions() {
    let mut st = Stack::new("auto_accept: True\nbrine_store_events: True\n");
    st.pillar(&[
        ("top.sls", "base:\n  'm1':\n    - app\n"),
        ("app.sls", "app:\n  port: 80\nsecret: hunter2\n"),
    ]);
    st.start_master();
    st.start_minion("m1", "");
    st.wait_answering(&["m1"]);
    let ctx = zmq::Context::new();
    let key = std::fs::read_to_string(st.master_root().join("cache/.root_key")).unwrap();
    let wheel = |fun: &str, extra: Vec<(&str, Value)>| {
        let mut l = vec![
            ("cmd", Value::from("wheel")),
            ("fun", Value::from(fun)),
            ("key", Value::from(key.trim())),
            ("user", Value::from("root")),
        ];
        l.extend(extra);
        let r = loads(&request(&ctx, st.ret_port, &clear(map(l)), 10000).unwrap()).unwrap();
        let data = get(&r, "data")
            .unwrap_or_else(|| panic!("{fun}: {r}"))
            .clone();
        assert_eq!(get_str(&data, "fun"), Some(format!("wheel.{fun}").as_str()));
        brine_protocol::payload::to_json(get(&data, "return").unwrap())
    };
    let all = wheel("key.list_all", vec![]);
    assert_eq!(all["minions"], json!(["m1"]));
    assert_eq!(all["local"], json!(["master.pem", "master.pub"]));
    let finger = wheel("key.finger", vec![("match", Value::from("m1"))]);
    let f = finger["minions"]["m1"].as_str().unwrap();
    assert_eq!(f.len(), 95, "sha256 with colons: {f}");
    let out = st.tool("salt-key", &["-f", "m1", "--out", "json"]);
    let cli: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli["minions"]["m1"], json!(f));
    assert_eq!(wheel("minions.connected", vec![]), json!(["m1"]));
    let values = wheel("config.values", vec![]);
    assert_eq!(values["ret_port"], json!(st.ret_port));
    assert!(values.get("external_auth").is_none());
    // Salt's defaults for what the config leaves out (SaltGUI reads these).
    assert_eq!(values["state_output"], json!("full"));
    assert_eq!(values["state_verbose"], json!(true));
    assert_eq!(values["renderer"], json!("jinja|yaml"));
    assert_eq!(values["state_top"], json!("top.sls"));
    assert!(wheel("nope.nope", vec![])
        .as_str()
        .unwrap()
        .contains("is not available"));
    // A wheel call with a wrong root key is refused.
    let bad = clear(map(vec![
        ("cmd", Value::from("wheel")),
        ("fun", Value::from("key.list_all")),
        ("key", Value::from("wrong")),
    ]));
    let r = loads(&request(&ctx, st.ret_port, &bad, 10000).unwrap()).unwrap();
    assert!(get(&r, "error").is_some(), "{r}");

    // Jobs published at the same time from several clients all reach the minion (publish
    // serials must leave the master in order, or minions drop the late ones as replays).
    let answers: Vec<serde_json::Value> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..12)
            .map(|_| s.spawn(|| st.salt_json(&["-t", "10", "m1", "test.ping"]).0))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for a in &answers {
        assert_eq!(
            a,
            &json!({"m1": true}),
            "a concurrent job got lost: {answers:?}"
        );
    }

    let run = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["--out", "json"];
        a.extend_from_slice(args);
        let o = st.tool("salt-run", &a);
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("salt-run {args:?}: {e}: {}", stdout(&o)))
    };
    assert_eq!(run(&["manage.present"]), json!(["m1"]));
    assert_eq!(run(&["manage.up"]), json!(["m1"]));
    assert_eq!(run(&["manage.down"]), json!([]));
    let versions = run(&["manage.versions"]);
    assert_eq!(versions["Up to date"]["m1"], json!("3007.15"));
    assert_eq!(versions["Master"], json!("3007.15"));
    let a = st.tool("salt", &["--async", "m1", "test.sleep", "3"]);
    let jid = stdout(&a).trim().rsplit(' ').next().unwrap().to_string();
    let active = run(&["jobs.active"]);
    assert_eq!(active[&jid]["Function"], json!("test.sleep"), "{active}");
    assert!(active[&jid]["Running"][0]["m1"].is_number(), "{active}");
    let job = run(&["jobs.list_job", &jid]);
    assert_eq!(job["Minions"], json!(["m1"]));
    // The pillar module, with the pillar the master compiled for m1 (SaltGUI's pillar page
    // calls pillar.obfuscate).
    let (v, _) = st.salt_json(&["m1", "pillar.obfuscate"]);
    assert_eq!(
        v,
        json!({"m1": {"app": {"port": "<int>"}, "secret": "<str>"}})
    );
    let (v, _) = st.salt_json(&["m1", "pillar.get", "app:port"]);
    assert_eq!(v, json!({"m1": 80}));
    let (v, _) = st.salt_json(&["m1", "pillar.items"]);
    assert_eq!(v, json!({"m1": {"app": {"port": 80}, "secret": "hunter2"}}));
    // Salt's test runner.
    assert_eq!(
        run(&["test.arg", "a", "2", "k=v"]),
        json!({"args": ["a", 2], "kwargs": {"k": "v"}})
    );
    assert_eq!(
        run(&["test.metasyntactic", "locality=uk"]),
        json!(["wibble", "wobble", "wubble", "flob"])
    );
    assert_eq!(run(&["test.metasyntactic"])[13], json!("thud"));
    assert_eq!(run(&["test.sleep", "0.2"]), json!(true));
    assert_eq!(
        run(&["test.raw_arg", "a", "k=v"]),
        json!({"args": ["a"], "kwargs": {"k": "v"}})
    );
    let opts = run(&["test.get_opts"]);
    assert_eq!(opts["ret_port"], json!(st.ret_port));
    assert!(opts.get("external_auth").is_none(), "secrets stay out");
    // doc.runner and doc.wheel list exactly the functions Brine has, and each one runs.
    let documented =
        |v: serde_json::Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    let runners = documented(run(&["doc.runner"]));
    let runner_names: Vec<String> = brine_master::runners::all()
        .iter()
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(runners, runner_names);
    let wheel_names: Vec<String> = brine_master::wheel::all()
        .iter()
        .map(|w| w.name.to_string())
        .collect();
    assert_eq!(documented(run(&["doc.wheel"])), wheel_names);
    for fun in runners.iter().filter(|f| *f != "test.sleep") {
        let o = st.tool("salt-run", &["--out", "json", fun]);
        assert!(
            !stdout(&o).contains("is not available"),
            "{fun}: {}",
            stdout(&o)
        );
    }
    for fun in &wheel_names {
        let ret = wheel(fun, vec![]);
        assert!(
            !ret.to_string().contains("is not available"),
            "{fun}: {ret}"
        );
    }
    // brine_store_events: the bus is recorded in salt_events.
    use brine_master::jobstore::JobStore;
    let store =
        brine_master::jobstore::SqliteStore::open(&st.master_root().join("cache/jobs.sqlite"))
            .unwrap();
    let events = store.recent_events(10_000).unwrap();
    assert!(
        events
            .iter()
            .any(|(t, _)| t == &format!("salt/job/{jid}/new")),
        "{events:?}"
    );
    assert!(events.iter().any(|(t, _)| t == "salt/auth"));
    let unknown = st.tool("salt-run", &["no.such"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stdout(&unknown).contains("'no.such' is not available."),
        "{}",
        stdout(&unknown)
    );
}

#[test]
fn broken_config_files_give_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path();
    std::fs::write(etc.join("master"), "ret_port: not-a-port\n").unwrap();
    let out = std::process::Command::new(bin("salt-master"))
        .arg("-c")
        .arg(etc)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("ret_port") && err.contains(&etc.join("master").display().to_string()),
        "{err}"
    );

    std::fs::write(etc.join("master"), "interface: [unclosed\n").unwrap();
    let out = std::process::Command::new(bin("salt-master"))
        .arg("-c")
        .arg(etc)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&etc.join("master").display().to_string()),
        "{err}"
    );

    std::fs::write(etc.join("minion"), "master_port: 99999\n").unwrap();
    let out = std::process::Command::new(bin("salt-minion"))
        .arg("-c")
        .arg(etc)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("master_port"), "{err}");
}

/// The publish port lives in a child process of the master; it never outlives the master,
/// whether the master is stopped or killed, so a restart can bind the port again.
#[test]
fn publisher_process_goes_with_the_master() {
    let mut st = Stack::new("");
    for kill in [false, true] {
        st.start_master();
        let master = st.master_pid().unwrap();
        let children = children_of(master);
        assert_eq!(children.len(), 1, "one publisher process: {children:?}");
        let (publisher, cmdline) = children[0].clone();
        assert!(cmdline.contains("--brine-publisher-process"), "{cmdline}");
        assert!(std::net::TcpStream::connect(("127.0.0.1", st.publish_port)).is_ok());
        if kill {
            st.kill_master();
        } else {
            st.stop_master();
        }
        wait_until(Duration::from_secs(10), || process_gone(publisher))
            .unwrap_or_else(|| panic!("publisher {publisher} outlived the master (kill: {kill})"));
    }
    // Both times the port was free again for the next start; once more to be sure.
    st.start_master();
    assert!(std::net::TcpStream::connect(("127.0.0.1", st.publish_port)).is_ok());
    st.stop_master();
}

/// A publisher process that dies is started again by the master, and jobs reach the
/// minions again.
#[test]
fn dead_publisher_process_is_restarted() {
    let mut st = Stack::new("auto_accept: True\n");
    st.start_master();
    st.start_minion("p1", "");
    st.wait_answering(&["p1"]);
    let master = st.master_pid().unwrap();
    let (old, _) = children_of(master)[0].clone();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &old.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    wait_until(Duration::from_secs(15), || {
        children_of(master).iter().any(|(pid, _)| *pid != old)
    })
    .unwrap_or_else(|| panic!("no new publisher process\n{}", st.logs()));
    // The master starts the new process before it logs that it did.
    wait_until(Duration::from_secs(10), || {
        st.master_log().contains("restarted")
    })
    .unwrap_or_else(|| panic!("restart not logged\n{}", st.master_log()));
    st.wait_answering(&["p1"]);
    st.stop_master();
}

/// `user`: a master started as root runs as that user, owns its directories, and serves.
#[test]
fn master_started_as_root_runs_as_its_user() {
    const USER: &str = "brinemastertest";
    let root = std::process::Command::new("id").arg("-u").output().unwrap();
    if stdout(&root).trim() != "0" {
        brine_e2e::missing_dependency("switching users needs root");
        return;
    }
    let userdel = || {
        let _ = std::process::Command::new("userdel").arg(USER).output();
    };
    userdel();
    let made = std::process::Command::new("useradd")
        .args(["-M", "-r", USER])
        .output()
        .unwrap();
    if !made.status.success() {
        brine_e2e::missing_dependency(&format!("cannot create the test user: {}", stderr(&made)));
        return;
    }
    struct Cleanup<F: FnMut()>(F);
    impl<F: FnMut()> Drop for Cleanup<F> {
        fn drop(&mut self) {
            (self.0)()
        }
    }
    let _cleanup = Cleanup(userdel);
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let uid: u32 = passwd
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{USER}:x:")))
        .and_then(|rest| rest.split(':').next())
        .and_then(|u| u.parse().ok())
        .expect("uid of the test user");

    let mut st = Stack::new("auto_accept: True\n");
    let conf = st.master_conf_dir().join("master");
    let text = std::fs::read_to_string(&conf).unwrap();
    let text: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("user:") {
                format!("user: {USER}")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&conf, text.join("\n")).unwrap();
    // The user must be able to reach its directories inside the temp dir.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for d in [st.dir.path().to_path_buf(), st.master_root()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    st.start_master();
    let pid = st.master_pid().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uids.split_whitespace()
            .skip(1)
            .all(|u| u == uid.to_string()),
        "master runs as {uids}, want {uid}"
    );
    let pem = st.master_root().join("pki/master.pem");
    wait_until(Duration::from_secs(10), || pem.exists()).unwrap();
    assert_eq!(std::fs::metadata(&pem).unwrap().uid(), uid);
    assert_eq!(
        std::fs::metadata(st.master_root().join("cache"))
            .unwrap()
            .uid(),
        uid
    );
    st.start_minion("u1", "");
    st.wait_answering(&["u1"]);
    st.stop_master();

    // Started as another unprivileged user, the master (`user: root` here) refuses with
    // one line.
    let mut other = Stack::new("");
    for d in [other.dir.path().to_path_buf(), other.master_root()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let out = std::process::Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
        ])
        .arg(bin("salt-master"))
        .arg("-c")
        .arg(other.master_conf_dir())
        .output();
    if let Ok(out) = out {
        if out.status.code() != Some(127) && !stderr(&out).contains("setpriv:") {
            assert!(!out.status.success());
            assert!(
                stderr(&out)
                    .contains("Salt configured to run as user \"root\" but unable to switch."),
                "{}",
                stderr(&out)
            );
        }
    }
    other.stop_master();
}

/// A small deterministic generator (xorshift64*), so a failing stream can be replayed from
/// its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A ZMTP 3.0 greeting (NULL mechanism) followed by a READY command for `socket_type`.
fn zmtp_hello(socket_type: &str) -> Vec<u8> {
    let mut g = vec![0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0];
    let mut mech = b"NULL".to_vec();
    mech.resize(20, 0);
    g.extend(mech);
    g.push(0); // as-server
    g.extend([0u8; 31]);
    let mut ready = vec![5];
    ready.extend(b"READY");
    ready.push(11);
    ready.extend(b"Socket-Type");
    ready.extend((socket_type.len() as u32).to_be_bytes());
    ready.extend(socket_type.as_bytes());
    g.push(0x04);
    g.push(ready.len() as u8);
    g.extend(ready);
    g
}

/// One frame: short or long size, with the MORE flag when asked.
fn zmtp_frame(body: &[u8], more: bool, long: bool) -> Vec<u8> {
    let flags = u8::from(more) | if long { 0x02 } else { 0 };
    let mut f = vec![flags];
    if long {
        f.extend((body.len() as u64).to_be_bytes());
    } else {
        f.push(body.len() as u8);
    }
    f.extend(body);
    f
}

/// A hostile ZMTP stream: a well-formed opening then mutations (flipped bytes, cut short,
/// declared sizes far beyond what follows, unknown commands, endless empty frames).
fn zmtp_stream(rng: &mut Rng, socket_type: &str) -> Vec<u8> {
    let mut s = zmtp_hello(socket_type);
    match rng.below(7) {
        // A declared long frame far larger than what follows, up to sizes whose sum with a
        // buffer position overflows (the shape of libzmq's CVE-2019-6250).
        0 => {
            let size = match rng.below(4) {
                0 => u64::MAX,
                1 => u64::MAX - 63,
                2 => 1 << 63,
                _ => (rng.next() >> 1) | (1 << 40),
            };
            s.push(0x02);
            s.extend(size.to_be_bytes());
            s.extend([0x90; 64]);
        }
        // A command frame with an unknown or broken name.
        1 => {
            let mut body = vec![rng.below(256) as u8];
            body.extend((0..rng.below(40)).map(|_| rng.below(256) as u8));
            s.push(0x04);
            s.push(body.len() as u8);
            s.extend(body);
        }
        // Many empty frames, all with MORE set: a message that never ends.
        2 => {
            for _ in 0..2000 {
                s.extend(zmtp_frame(&[], true, false));
            }
        }
        // A message of random frames (short and long sizes) with random bodies.
        3 => {
            let n = 1 + rng.below(6);
            for i in 0..n {
                let body: Vec<u8> = (0..rng.below(300)).map(|_| rng.below(256) as u8).collect();
                s.extend(zmtp_frame(&body, i + 1 < n, rng.below(2) == 0));
            }
        }
        // A valid request frame, then random trailing bytes.
        4 => {
            s.extend(zmtp_frame(&[], true, false));
            s.extend(zmtp_frame(
                &[0x81, 0xa3, b'c', b'm', b'd', 0xa4, b'p', b'i', b'n', b'g'],
                false,
                false,
            ));
            s.extend((0..rng.below(100)).map(|_| rng.below(256) as u8));
        }
        _ => {}
    }
    // Flip a few bytes anywhere (the greeting too), and maybe cut the stream short.
    for _ in 0..rng.below(4) {
        let i = rng.below(s.len());
        s[i] ^= 1 << rng.below(8);
    }
    if rng.below(3) == 0 {
        let cut = rng.below(s.len());
        s.truncate(cut.max(1));
    }
    s
}

/// Send `stream` as a libzmq peer does, one step of the handshake at a time: the 10-byte
/// signature, then the rest of the 64-byte greeting and the READY command once the other
/// side's signature came, then the messages once the other side's READY came (libzmq drops a
/// peer whose messages arrive before its handshake is done). A side that hangs up or stays
/// silent for `patience` ends it early; what the other side sent comes back.
fn send_as_peer(s: &mut std::net::TcpStream, stream: &[u8], patience: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = s.set_read_timeout(Some(patience));
    // Read until `done` says enough came; false when the other side hung up or went quiet.
    let read_until =
        |s: &mut std::net::TcpStream, got: &mut Vec<u8>, done: &dyn Fn(&[u8]) -> bool| {
            let mut buf = [0u8; 512];
            while !done(got) {
                match std::io::Read::read(s, &mut buf) {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => got.extend(&buf[..n]),
                }
            }
            true
        };
    let ready_end = if stream.len() > 65 {
        (66 + stream[65] as usize).min(stream.len())
    } else {
        stream.len()
    };
    let steps = [0, stream.len().min(10), ready_end, stream.len()];
    for (i, w) in steps.windows(2).enumerate() {
        if s.write_all(&stream[w[0]..w[1]]).is_err() {
            return got;
        }
        let enough: &dyn Fn(&[u8]) -> bool = match i {
            0 => &|g: &[u8]| g.len() >= 10,
            1 => &|g: &[u8]| g.len() > 65 && g.len() >= 66 + g[65] as usize,
            _ => return got,
        };
        if !read_until(s, &mut got, enough) {
            return got;
        }
    }
    got
}

/// Hundreds of hostile ZMTP streams against the request port and the publish port (as each
/// socket type a peer may claim): the master drops each peer, stays up, keeps its memory
/// bounded, and answers its minion afterwards.
#[test]
fn hostile_zmtp_streams_never_stop_the_master() {
    let mut st = Stack::new("auto_accept: True\n");
    st.start_master();
    st.start_minion("m1", "");
    st.wait_answering(&["m1"]);
    let pid = st.master_pid().expect("master pid");
    let rss = |pid: u32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    };
    // The master and its publisher process.
    let total = || -> u64 {
        rss(pid)
            + children_of(pid)
                .iter()
                .map(|(child, _)| rss(*child))
                .sum::<u64>()
    };
    let before = total();

    // The streams start from a well-formed opening: as is, it gets the master's answer.
    let ping = clear(map(vec![("cmd", Value::from("ping"))]));
    let mut good = zmtp_hello("REQ");
    good.extend(zmtp_frame(&[], true, false));
    good.extend(zmtp_frame(&ping, false, ping.len() > 255));
    let mut s = std::net::TcpStream::connect(("127.0.0.1", st.ret_port)).unwrap();
    let mut got = send_as_peer(&mut s, &good, Duration::from_secs(5));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    let answer = loads(&request(&zmq::Context::new(), st.ret_port, &ping, 5000).unwrap()).unwrap();
    let want = dumps(&answer);
    while !got.windows(want.len()).any(|w| w == want.as_slice()) {
        match std::io::Read::read(&mut s, &mut buf) {
            Ok(n) if n > 0 => got.extend(&buf[..n]),
            other => panic!("no answer to a well-formed ZMTP request ({other:?}): {got:?}"),
        }
    }
    drop(s);

    let mut rng = Rng(0x5eed_2026_1128_0001);
    let ports = [st.ret_port, st.publish_port];
    let types = [
        "REQ", "DEALER", "ROUTER", "SUB", "XSUB", "PUB", "PAIR", "NOPE",
    ];
    for round in 0..400 {
        let port = ports[round % 2];
        let kind = types[rng.below(types.len())];
        let stream = zmtp_stream(&mut rng, kind);
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        // The master may hang up mid-stream: that is what it should do.
        send_as_peer(&mut s, &stream, Duration::from_millis(100));
        if round % 50 == 0 {
            // Some peers hold their connection open a moment before vanishing.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(!process_gone(pid), "the master died\n{}", st.logs());
    let (v, code) = st.salt_json(&["m1", "test.ping"]);
    assert_eq!((v, code), (json!({"m1": true}), 0), "{}", st.logs());
    let after = total();
    assert!(
        after < before + 64 * 1024,
        "the master's RSS grew from {before} kB to {after} kB"
    );
    assert_eq!(children_of(pid).len(), 1, "the publisher process is gone");
}
