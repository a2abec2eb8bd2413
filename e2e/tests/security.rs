//! Regression tests for security defects, each sending exactly the hostile request: salt-api
//! bodies nested 50,000 deep and out-of-range numbers; an element flood, replayed requests and
//! forged events on the master's request port; a spoofed caller, a reused jid and job events
//! shown to users who may not read the job; CORS headers nobody asked for.

use std::path::Path;
use std::time::{Duration, Instant};

use brine_e2e::http::{assert_error, sse, Api};
use brine_e2e::wire::request;
use brine_e2e::{proc_kib, wait_until, Stack};
use brine_minion::channel::{Channel, Identity};
use brine_protocol::crypt::{clean_key, load_or_generate_keypair, EncAlgo, SigAlgo};
use brine_protocol::payload::{loads, map, Value};
use brine_transport::eventbus::EventListener;
use reqwest::header::{CONTENT_TYPE, ORIGIN};
use serde_json::{json, Value as Json};

fn api_stack() -> Api {
    let (mut st, port) = brine_e2e::http::api_stack_config(
        "auto_accept: True
timeout: 6
gather_job_timeout: 3
netapi_enable_clients: [local, local_async, runner, runner_async, wheel, wheel_async]",
        "admin:adminpw\nlimited:limitedpw\n",
        "    admin: ['.*', '@runner', '@wheel', '@jobs']
    limited:
      - 'web1':
        - 'test.*'",
    );
    st.start_master();
    st.start_minion("web1", "");
    st.start_minion("db1", "");
    st.wait_answering(&["web1", "db1"]);
    st.start_api(port);
    Api::new(st, port)
}

/// A POST the typed helpers do not cover: any body, any content type, maybe no token.
fn raw(api: &Api, path: &str, ctype: &str, body: Vec<u8>, token: Option<&str>) -> (u16, Json) {
    // A server may answer an oversized or malformed body early and close the connection
    // without reading the rest: never reuse such a connection for the next request.
    let mut req = api
        .http
        .post(api.url(path))
        .header(CONTENT_TYPE, ctype)
        .header(reqwest::header::CONNECTION, "close")
        .body(body);
    if let Some(t) = token {
        req = req.header("X-Auth-Token", t);
    }
    let r = req.send().expect("salt-api answers");
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Json::Null))
}

/// salt-api still serves: `GET /` answers its welcome document.
fn still_serving(api: &Api) {
    let r: Json = api.http.get(api.url("/")).send().unwrap().json().unwrap();
    assert_eq!(r["return"], json!("Welcome"), "salt-api stopped serving");
}

#[test]
fn deeply_nested_bodies_get_400_and_salt_api_survives() {
    let api = api_stack();

    // 1. A YAML sequence nested 50,000 deep, unauthenticated, on every endpoint that reads a
    //    body (this aborted the whole process with a stack overflow).
    let deep_yaml = "- ".repeat(50_000).into_bytes();
    for path in [
        "/login", "/", "/run", "/minions", "/token", "/keys", "/hook/x",
    ] {
        for ctype in ["application/x-yaml", "text/yaml"] {
            let (s, v) = raw(&api, path, ctype, deep_yaml.clone(), None);
            assert!(
                s == 400 || s == 401,
                "{path} {ctype}: {s} {v}\n{}",
                api.st.logs()
            );
            if s == 400 {
                assert_error(s, &v, 400);
            }
        }
        still_serving(&api);
    }
    // The same through JSON, and through a form value that is YAML-ified.
    let deep_json = "[".repeat(50_000).into_bytes();
    let (s, v) = raw(&api, "/login", "application/json", deep_json, None);
    assert_error(s, &v, 400);
    let form = format!(
        "client=local&tgt=web1&fun=test.arg&arg={}&username=admin&password=adminpw&eauth=file",
        "%5B".repeat(50_000)
    );
    let (s, _) = raw(
        &api,
        "/run",
        "application/x-www-form-urlencoded",
        form.into_bytes(),
        None,
    );
    assert!(s < 500, "{s}");
    still_serving(&api);
}

#[test]
fn out_of_range_numbers_get_400() {
    let api = api_stack();
    // Numbers out of range (this panicked in the return gathering: a 500).
    let admin = api.login("admin", "adminpw", "file");
    for timeout in [
        json!(1e30),
        json!(18446744073709551615u64),
        json!(-1),
        json!("NaN"),
    ] {
        let (s, v) = api.post(
            "/run",
            "",
            json!({"client": "local", "tgt": "web1", "fun": "test.ping", "timeout": timeout,
                   "username": "admin", "password": "adminpw", "eauth": "file"}),
        );
        assert_error(s, &v, 400);
        assert!(v["return"].as_str().unwrap().contains("timeout"), "{v}");
        let (s, v) = api.post(
            "/",
            &admin,
            json!({"client": "local", "tgt": "web1", "fun": "test.ping", "gather_job_timeout": timeout}),
        );
        assert_error(s, &v, 400);
    }
    let (s, v) = api.post(
        "/login",
        "",
        json!({"username": "admin", "password": "adminpw", "eauth": "file", "token_expire": 1e300}),
    );
    assert_error(s, &v, 400);
    still_serving(&api);
}

#[test]
fn no_cors_headers_without_cors_origin() {
    let api = api_stack();
    // 8. No cors_origin configured: no CORS headers, whatever the Origin.
    let r = api
        .http
        .get(api.url("/"))
        .header(ORIGIN, "https://evil.example")
        .send()
        .unwrap();
    let cors: Vec<_> = r
        .headers()
        .keys()
        .filter(|k| k.as_str().starts_with("access-control-"))
        .collect();
    assert!(cors.is_empty(), "{cors:?}");
    // Nor on a preflight.
    let r = api
        .http
        .request(reqwest::Method::OPTIONS, api.url("/login"))
        .header(ORIGIN, "https://evil.example")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .unwrap();
    assert!(!r
        .headers()
        .keys()
        .any(|k| k.as_str().starts_with("access-control-")));
}

#[test]
fn the_recorded_caller_is_the_authenticated_one() {
    let api = api_stack();
    let admin = api.login("admin", "adminpw", "file");
    // 5. A client-supplied "user" is not recorded: the wheel events name the caller.
    let mut admin_events = sse(&api, &admin, None);
    let (s, _) = api.post(
        "/",
        &admin,
        json!({"client": "wheel", "fun": "key.list_all", "user": "root"}),
    );
    assert_eq!(s, 200);
    let new = admin_events.until(|tag, _| tag.starts_with("salt/wheel/") && tag.ends_with("/new"));
    assert_eq!(new["data"]["user"], json!("admin"), "{new}");
    let ret = admin_events.until(|tag, _| tag.starts_with("salt/wheel/") && tag.ends_with("/ret"));
    assert_eq!(ret["data"]["user"], json!("admin"), "{ret}");
}

#[test]
fn a_jid_in_use_is_refused() {
    let api = api_stack();
    let admin = api.login("admin", "adminpw", "file");
    // 6. A second user publishing with the jid of a running job is refused, and the job keeps
    //    only the returns of its own publish.
    let limited = api.login("limited", "limitedpw", "file");
    let (_, v) = api.post(
        "/",
        &admin,
        json!({"client": "local_async", "tgt": "web1", "fun": "test.sleep", "arg": [3]}),
    );
    let jid = v["return"][0]["jid"].as_str().unwrap().to_string();
    let (s, v) = api.post(
        "/",
        &limited,
        json!({"client": "local_async", "tgt": "web1", "fun": "test.echo", "arg": ["hijacked"], "jid": jid}),
    );
    assert_error(s, &v, 400);
    assert!(
        v["return"].as_str().unwrap().contains("already in use"),
        "{v}"
    );
    // A jid that is not a jid's shape is refused too.
    let (s, v) = api.post(
        "/",
        &limited,
        json!({"client": "local_async", "tgt": "web1", "fun": "test.ping", "jid": "x/ret/db1"}),
    );
    assert_error(s, &v, 400);
    let record = wait_until(Duration::from_secs(20), || {
        let (_, v) = api.get(&format!("/jobs/{jid}"), &admin);
        v["return"][0].get("web1").is_some()
    });
    assert!(record.is_some(), "the job never got web1's return");
    let (_, v) = api.get(&format!("/jobs/{jid}"), &admin);
    assert_eq!(v["return"][0]["web1"], json!(true), "{v}");
}

#[test]
fn streams_show_a_user_only_the_jobs_they_may_read() {
    let api = api_stack();
    let admin = api.login("admin", "adminpw", "file");
    let limited = api.login("limited", "limitedpw", "file");
    let mut limited_events = sse(&api, &limited, None);
    let (_, v) = api.post(
        "/",
        &admin,
        json!({"client": "local_async", "tgt": "web1", "fun": "test.ping"}),
    );
    let jid = v["return"][0]["jid"].as_str().unwrap().to_string();
    // 7. The limited user may not read the admin's job, nor see its events; their own job
    //    they may read and follow.
    let (s, v) = api.get(&format!("/jobs/{jid}"), &limited);
    assert_error(s, &v, 401);
    let (_, v) = api.post(
        "/",
        &admin,
        json!({"client": "local", "tgt": "web1", "fun": "test.echo", "arg": ["admin-only"]}),
    );
    assert_eq!(v["return"][0]["web1"], json!("admin-only"));
    let (_, v) = api.post(
        "/",
        &limited,
        json!({"client": "local", "tgt": "web1", "fun": "test.echo", "arg": ["mine"]}),
    );
    assert_eq!(v["return"][0]["web1"], json!("mine"));
    let own = limited_events
        .until(|tag, data| tag.contains("/ret/web1") && data["data"]["return"] == json!("mine"));
    let own_jid = own["data"]["jid"].as_str().unwrap().to_string();
    let seen = limited_events.raw.lock().unwrap().clone();
    assert!(!seen.contains("admin-only"), "{seen}");
    assert!(!seen.contains(&jid), "{seen}");
    // The return event may come before the job store has the return (as in Salt, which
    // fires it first): the job is read until it has it.
    let mut last = json!(null);
    let read = wait_until(Duration::from_secs(10), || {
        let (s, v) = api.get(&format!("/jobs/{own_jid}"), &limited);
        assert_eq!(s, 200, "{v}");
        last = v.clone();
        v["return"][0]["web1"] == json!("mine")
    });
    assert!(read.is_some(), "{last}");

    still_serving(&api);
}

// ---- the master's request port -------------------------------------------------------------

/// A reader of the master's event bus, taken in by the master before it is used (it waits
/// for its own probe event, so that no event fired after `connect` is missed).
struct Bus(EventListener);

impl Bus {
    fn connect(sock_dir: &Path) -> Bus {
        Bus(EventListener::connect(sock_dir).expect("the master's event bus"))
    }

    /// Every tag seen until `last` arrives (panics after 20 s).
    fn tags_until(&mut self, last: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut tags = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.next(left).expect("the master's bus") {
                Some(ev) => {
                    let done = ev.tag == last;
                    tags.push(ev.tag);
                    if done {
                        return tags;
                    }
                }
                None => panic!("{last} never came; saw {tags:?}"),
            }
        }
    }
}

/// A minion of our own, signed in through Brine's minion channel.
fn sign_in(ctx: &zmq::Context, st: &Stack, id: &str) -> (Channel, brine_minion::channel::Creds) {
    let pki = st.dir.path().join(format!("{id}-pki"));
    std::fs::create_dir_all(&pki).unwrap();
    let (key, public) = load_or_generate_keypair(&pki, "minion", 2048).unwrap();
    let ident = Identity {
        id: id.to_string(),
        tok: key.x931_encrypt(b"salt").unwrap(),
        key,
        pub_clean: clean_key(&public.to_pem()),
        enc_algo: EncAlgo::parse("OAEP-SHA1").unwrap(),
        sig_algo: SigAlgo::parse("PKCS1v15-SHA1").unwrap(),
        pki_dir: pki,
        master_finger: String::new(),
    };
    let ch = Channel::new(
        ctx,
        "127.0.0.1",
        st.ret_port,
        ident,
        Duration::from_secs(10),
        1,
    );
    let creds = ch.sign_in(Duration::from_secs(10)).expect("sign-in");
    (ch, creds)
}

fn event_load(id: &str, tag: &str) -> Value {
    map(vec![
        ("cmd", Value::from("_minion_event")),
        ("id", Value::from(id)),
        ("tag", Value::from(tag)),
        ("data", map(vec![("probe", Value::from(true))])),
    ])
}

fn master_only() -> Stack {
    let mut st = Stack::new("auto_accept: True\n");
    st.start_master();
    st
}

fn nil_flood(n: u32) -> Vec<u8> {
    let mut flood = Vec::with_capacity(n as usize + 5);
    flood.push(0xdd);
    flood.extend_from_slice(&n.to_be_bytes());
    flood.resize(n as usize + 5, 0xc0);
    flood
}

#[test]
fn element_floods_on_the_request_port_do_not_amplify_memory() {
    let st = master_only();
    let pid = st.master_pid().unwrap();
    let ctx = zmq::Context::new();

    // 2. One 16 MiB frame holding an array of 16 Mi nils, unauthenticated (this raised the
    //    master's peak RSS by about 655 MiB).
    let before = proc_kib(pid, "VmHWM");
    let flood = nil_flood(16 << 20);
    let reply = request(&ctx, st.ret_port, &flood, 20_000).expect("the master answers the flood");
    assert_eq!(loads(&reply).unwrap(), Value::from("bad load"));
    let grown_kib = proc_kib(pid, "VmHWM").saturating_sub(before);
    let frame_kib = flood.len() as u64 / 1024;
    eprintln!("peak RSS growth for a {frame_kib} KiB frame: {grown_kib} KiB");
    assert!(
        grown_kib <= 2 * frame_kib,
        "peak RSS grew by {grown_kib} KiB for a {frame_kib} KiB frame"
    );
    assert!(st
        .master_log()
        .contains("holds more elements than its size allows"));
    // Six at once (these reached about 2 GiB).
    let before = proc_kib(pid, "VmHWM");
    let port = st.ret_port;
    let senders: Vec<_> = (0..6)
        .map(|_| {
            let ctx = ctx.clone();
            let flood = flood.clone();
            std::thread::spawn(move || request(&ctx, port, &flood, 20_000))
        })
        .collect();
    for s in senders {
        let reply = s.join().unwrap().expect("the master answers every flood");
        assert_eq!(loads(&reply).unwrap(), Value::from("bad load"));
    }
    let grown_kib = proc_kib(pid, "VmHWM").saturating_sub(before);
    eprintln!("peak RSS growth for six {frame_kib} KiB frames: {grown_kib} KiB");
    assert!(
        grown_kib <= 2 * 6 * frame_kib,
        "peak RSS grew by {grown_kib} KiB for six {frame_kib} KiB frames"
    );
    // The master kept serving: a sign-in and a request work.
    let (ch, _) = sign_in(&ctx, &st, "m1");
    ch.request(&event_load("m1", "probe/alive")).unwrap();
}

#[test]
fn replayed_aes_requests_are_processed_once() {
    let st = master_only();
    let ctx = zmq::Context::new();
    // 3. A captured aes request sent twice is processed once.
    let (ch, creds) = sign_in(&ctx, &st, "m1");
    let mut bus = Bus::connect(&st.master_root().join("sock"));
    let body = ch.aes_envelope(
        &creds,
        &event_load("m1", "probe/replayed"),
        "0123456789abcdef0123456789abcdef",
    );
    let first = request(&ctx, st.ret_port, &body, 20_000).expect("first answer");
    assert!(
        matches!(loads(&first).unwrap(), Value::Binary(_)),
        "an encrypted answer"
    );
    let second = request(&ctx, st.ret_port, &body, 20_000).expect("second answer");
    assert_eq!(loads(&second).unwrap(), Value::from("bad load"));
    ch.request(&event_load("m1", "probe/end-of-replay"))
        .unwrap();
    let tags = bus.tags_until("probe/end-of-replay");
    assert_eq!(
        tags.iter().filter(|t| *t == "probe/replayed").count(),
        1,
        "{tags:?}"
    );
    assert!(st.master_log().contains("nonce already used"));
}

#[test]
fn minions_cannot_fire_the_masters_events() {
    let st = master_only();
    let ctx = zmq::Context::new();
    let (ch, _) = sign_in(&ctx, &st, "m1");
    let mut bus = Bus::connect(&st.master_root().join("sock"));
    // 4. Tags the master owns, or naming another minion, never reach the bus from a minion.
    let forged = [
        "salt/auth",
        "salt/key",
        "salt/job/20250101000000000000/ret/m2",
        "salt/job/20250101000000000000/new",
        "salt/run/20250101000000000000/new",
        "salt/wheel/20250101000000000000/new",
        "salt/presence/present",
        "salt/cloud/vm/created",
        "salt/minion/m2/start",
    ];
    for tag in forged {
        ch.request(&event_load("m1", tag)).unwrap();
    }
    // A batch with a pretag that would turn an allowed tag into a forged one.
    let batch = map(vec![
        ("cmd", Value::from("_minion_event")),
        ("id", Value::from("m1")),
        ("pretag", Value::from("salt/auth")),
        (
            "events",
            Value::Array(vec![map(vec![
                ("tag", Value::from("x")),
                ("data", Value::Map(vec![])),
            ])]),
        ),
    ]);
    ch.request(&batch).unwrap();
    ch.request(&event_load("m1", "salt/minion/m1/probe"))
        .unwrap();
    ch.request(&event_load("m1", "probe/end-of-forged"))
        .unwrap();
    let tags = bus.tags_until("probe/end-of-forged");
    for tag in forged.iter().chain(&["salt/auth/x"]) {
        assert!(
            !tags.iter().any(|t| t == tag),
            "{tag} reached the bus: {tags:?}"
        );
    }
    assert!(tags.iter().any(|t| t == "salt/minion/m1/probe"), "{tags:?}");

    // The master kept serving throughout: a fresh sign-in and request work.
    let (ch2, _) = sign_in(&ctx, &st, "m2");
    ch2.request(&event_load("m2", "probe/alive")).unwrap();
}
