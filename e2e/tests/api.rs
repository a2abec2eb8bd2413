//! salt-api end to end: master, two minions and the API as real processes, driven over HTTP.

use std::io::Read;
use std::time::{Duration, Instant};

use brine_e2e::http::{assert_error, sse, Api};
use brine_e2e::{free_port, wait_until, Stack};
use reqwest::blocking::Client;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::{json, Value};

fn api_stack(extra: &str) -> Api {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let eauth_file = dir.path().join("eauth.txt");
    std::fs::write(&eauth_file, "dave:davepw\n").unwrap();
    let conf = format!(
        "auto_accept: True
timeout: 5
gather_job_timeout: 3
sharedsecret: s3cret
token_expire_user_override: True
netapi_enable_clients: [local, local_async, local_batch, local_subset, runner, runner_async, wheel, wheel_async]
external_auth:
  auto:
    alice: ['.*', '@runner', '@wheel', '@jobs']
    bob:
      - 'web*':
        - 'test.*'
  sharedsecret:
    carol: ['.*', '@runner']
  file:
    '^filename': {eauth}
    dave: ['test.ping']
rest_cherrypy:
  port: {port}
  host: 127.0.0.1
  disable_ssl: True
  collect_stats: True
  max_request_body_size: 65536
{extra}
",
        eauth = eauth_file.display()
    );
    let mut st = Stack::new(&conf);
    // Keep the eauth file alive with the stack.
    std::fs::rename(&eauth_file, st.dir.path().join("eauth.txt")).unwrap();
    let conf_path = st.master_conf_dir().join("master");
    let text = std::fs::read_to_string(&conf_path).unwrap().replace(
        &eauth_file.display().to_string(),
        &st.dir.path().join("eauth.txt").display().to_string(),
    );
    std::fs::write(conf_path, text).unwrap();
    st.start_master();
    st.start_minion("web1", "grains:\n  role: web\n");
    st.start_minion("db1", "grains:\n  role: db\n");
    st.wait_answering(&["web1", "db1"]);
    st.start_api(port);
    Api::new(st, port)
}

#[test]
fn api_endpoints_and_clients() {
    let api = api_stack("");
    // GET / needs no auth.
    let r: Value = api.http.get(api.url("/")).send().unwrap().json().unwrap();
    assert_eq!(r["return"], json!("Welcome"));
    assert!(r["clients"]
        .as_array()
        .unwrap()
        .contains(&json!("local_async")));

    // Login: body, header and cookie.
    let r = api
        .http
        .post(api.url("/login"))
        .json(&json!({"username": "alice", "password": "x", "eauth": "auto"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    let body: Value = r.json().unwrap();
    let tok = body["return"][0]["token"].as_str().unwrap().to_string();
    assert!(cookie.starts_with(&format!("session_id={tok}")), "{cookie}");
    let ret = &body["return"][0];
    assert_eq!(ret["user"], json!("alice"));
    assert_eq!(ret["eauth"], json!("auto"));
    assert_eq!(ret["perms"], json!([".*", "@jobs", "@runner", "@wheel"]));
    let ttl = ret["expire"].as_f64().unwrap() - ret["start"].as_f64().unwrap();
    assert!((ttl - 43200.0).abs() < 1.0, "{ttl}");

    // local with the header, then with the cookie.
    let (s, v) = api.post(
        "/",
        &tok,
        json!({"client": "local", "tgt": "*", "fun": "test.ping"}),
    );
    assert_eq!(s, 200);
    assert_eq!(v, json!({"return": [{"web1": true, "db1": true}]}));
    let r: Value = api
        .http
        .post(api.url("/"))
        .header("Cookie", format!("session_id={tok}"))
        .json(&json!([{"client": "local", "tgt": "web1", "fun": "test.echo", "arg": "hi"}]))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r, json!({"return": [{"web1": "hi"}]}));
    // full_return, kwarg, list target, tgt_type and the old expr_form.
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "local", "tgt": "web1,db1", "expr_form": "list", "fun": "test.arg", "arg": ["a"], "kwarg": {"k": 1}, "full_return": true}),
    );
    assert_eq!(v["return"][0]["web1"]["ret"]["args"], json!(["a"]));
    assert_eq!(v["return"][0]["web1"]["ret"]["kwargs"]["k"], json!(1));
    assert_eq!(v["return"][0]["web1"]["retcode"], json!(0));
    assert!(v["return"][0]["db1"]["jid"].is_string());
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "local", "tgt": "role:db", "tgt_type": "grain", "fun": "test.ping"}),
    );
    assert_eq!(v, json!({"return": [{"db1": true}]}));

    // Form bodies: repeated arg, YAML-ified values.
    let r: Value = api
        .http
        .post(api.url("/"))
        .header("X-Auth-Token", &tok)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body("client=local&tgt=web1&fun=test.arg&arg=2&arg=x&arg=%5B1%2C2%5D")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r["return"][0]["web1"]["args"], json!([2, "x", [1, 2]]));
    // YAML in, YAML out.
    let r = api
        .http
        .post(api.url("/"))
        .header("X-Auth-Token", &tok)
        .header(CONTENT_TYPE, "application/x-yaml")
        .header(ACCEPT, "application/x-yaml")
        .body("- client: local\n  tgt: db1\n  fun: test.echo\n  arg: [yaml]\n")
        .send()
        .unwrap();
    assert_eq!(r.headers()[CONTENT_TYPE], "application/x-yaml");
    let text = r.text().unwrap();
    assert!(text.contains("db1: yaml"), "{text}");
    // text/plain holding JSON (SaltGUI).
    let r: Value = api
        .http
        .post(api.url("/"))
        .header("X-Auth-Token", &tok)
        .header(CONTENT_TYPE, "text/plain")
        .body(r#"{"client": "local", "tgt": "web1", "fun": "test.ping"}"#)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r, json!({"return": [{"web1": true}]}));

    // local_async, then /jobs/<jid> until both returned; POST /minions.
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "local_async", "tgt": "*", "fun": "test.echo", "arg": ["bg"]}),
    );
    let jid = v["return"][0]["jid"].as_str().unwrap().to_string();
    assert_eq!(v["return"][0]["minions"], json!(["db1", "web1"]));
    let mut job = Value::Null;
    wait_until(Duration::from_secs(20), || {
        job = api.get(&format!("/jobs/{jid}"), &tok).1;
        job["return"][0].as_object().is_some_and(|m| m.len() == 2)
    })
    .unwrap_or_else(|| panic!("job never complete: {job}"));
    assert_eq!(job["return"][0], json!({"web1": "bg", "db1": "bg"}));
    assert_eq!(job["info"][0]["Function"], json!("test.echo"));
    assert_eq!(job["info"][0]["User"], json!("alice"));
    assert_eq!(job["info"][0]["Minions"], json!(["db1", "web1"]));
    let (s, v) = api.post(
        "/minions",
        &tok,
        json!({"tgt": "web1", "fun": "test.ping", "client": "local"}),
    );
    assert_eq!(s, 202);
    let jid2 = v["return"][0]["jid"].as_str().unwrap();
    assert_eq!(
        v["_links"]["jobs"][0]["href"],
        json!(format!("/jobs/{jid2}"))
    );
    let (s, v) = api.post(
        "/minions",
        &tok,
        json!({"tgt": "nomatch", "fun": "test.ping"}),
    );
    assert_eq!(
        (s, v),
        (202, json!({"return": [{}], "_links": {"jobs": []}}))
    );
    let (_, v) = api.get("/jobs", &tok);
    assert_eq!(v["return"][0][&jid]["Function"], json!("test.echo"));
    let (s, v) = api.get("/jobs/20000101000000000000", &tok);
    assert_eq!(s, 200);
    // Salt's answer for an unknown jid, key for key.
    assert_eq!(
        v,
        json!({"return": [{}], "info": [{
            "jid": "20000101000000000000",
            "Error": "Cannot contact returner or no job with this jid",
            "StartTime": "2000, Jan 01 00:00:00.000000",
            "Result": {}
        }]})
    );

    // Minions and their grains.
    let (_, v) = api.get("/minions/web1", &tok);
    assert_eq!(v["return"][0]["web1"]["role"], json!("web"));
    let (_, v) = api.get("/minions", &tok);
    assert_eq!(v["return"][0].as_object().unwrap().len(), 2);
    let (_, v) = api.get("/minions/nomatch", &tok);
    assert_eq!(v, json!({"return": [{}]}));

    // Runners and wheel, sync and async.
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "runner", "fun": "manage.status"}),
    );
    assert_eq!(v, json!({"return": [{"up": ["db1", "web1"], "down": []}]}));
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "runner", "fun": "jobs.lookup_jid", "jid": jid}),
    );
    assert_eq!(v["return"][0], json!({"web1": "bg", "db1": "bg"}));
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "runner", "fun": "manage.up", "full_return": true}),
    );
    assert_eq!(v["return"][0]["data"]["return"], json!(["db1", "web1"]));
    assert!(v["return"][0]["tag"].as_str().unwrap().ends_with("/ret"));
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "runner_async", "fun": "manage.present"}),
    );
    assert!(v["return"][0]["tag"]
        .as_str()
        .unwrap()
        .starts_with("salt/run/"));
    let (_, v) = api.post("/", &tok, json!({"client": "wheel", "fun": "key.list_all"}));
    let data = &v["return"][0]["data"];
    assert_eq!(data["fun"], json!("wheel.key.list_all"));
    assert_eq!(data["user"], json!("alice"));
    assert_eq!(data["success"], json!(true));
    assert_eq!(data["return"]["minions"], json!(["db1", "web1"]));
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "wheel_async", "fun": "key.list_all"}),
    );
    assert!(v["return"][0]["tag"]
        .as_str()
        .unwrap()
        .starts_with("salt/wheel/"));

    // local_batch and local_subset.
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "local_batch", "tgt": "*", "fun": "test.ping", "batch": "1"}),
    );
    let mut got: Vec<Value> = v["return"].as_array().unwrap().clone();
    got.sort_by_key(|x| x.to_string());
    assert_eq!(got, vec![json!({"db1": true}), json!({"web1": true})]);
    let (s, v) = api.post(
        "/",
        &tok,
        json!({"client": "local_batch", "tgt": "*", "fun": "test.ping", "batch": "0"}),
    );
    assert_eq!(s, 400, "{v}");
    assert_eq!(
        v["return"],
        "Invalid batch data sent: 0\nData must be in the form of %10, 10% or 3"
    );
    let (_, v) = api.post(
        "/",
        &tok,
        json!({"client": "local_subset", "tgt": "*", "fun": "test.ping", "subset": 1}),
    );
    assert_eq!(v["return"][0].as_object().unwrap().len(), 1, "{v}");

    // Keys: list, finger, and a new key pair as a tarball, accepted on the master.
    let (_, v) = api.get("/keys", &tok);
    assert_eq!(v["return"]["minions"], json!(["db1", "web1"]));
    assert_eq!(v["return"]["local"], json!(["master.pem", "master.pub"]));
    let (_, v) = api.get("/keys/web1", &tok);
    assert_eq!(v["return"]["minions"]["web1"].as_str().unwrap().len(), 95);
    let r = api
        .http
        .post(api.url("/keys"))
        .json(&json!({"mid": "newbie", "username": "alice", "password": "x", "eauth": "auto"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[CONTENT_TYPE], "application/x-tar");
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains("saltkeys-newbie.tar"));
    let bytes = r.bytes().unwrap();
    let mut ar = tar::Archive::new(&bytes[..]);
    let mut names = Vec::new();
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let mut text = String::new();
        e.read_to_string(&mut text).unwrap();
        if name == "minion.pub" {
            let on_master =
                std::fs::read_to_string(api.st.master_root().join("pki/minions/newbie")).unwrap();
            assert_eq!(on_master, text);
        }
        names.push(name);
    }
    assert_eq!(names, vec!["minion.pem", "minion.pub"]);

    // /run: credentials or a token in the lowstate, no session.
    let (_, v) = api.post("/run", "", json!({"client": "local", "tgt": "web1", "fun": "test.ping", "username": "carol", "password": "s3cret", "eauth": "sharedsecret"}));
    assert_eq!(v, json!({"return": [{"web1": true}]}));
    let r = api
        .http
        .post(api.url("/token"))
        .json(&json!({"username": "dave", "password": "davepw", "eauth": "file"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let t: Value = r.json().unwrap();
    assert!(t.is_array(), "/token answers a bare list: {t}");
    assert_eq!(t[0]["name"], json!("dave"));
    let raw = t[0]["token"].as_str().unwrap();
    let (_, v) = api.post(
        "/run",
        "",
        json!({"client": "local", "tgt": "db1", "fun": "test.ping", "token": raw}),
    );
    assert_eq!(v, json!({"return": [{"db1": true}]}));
    let (s, v) = api.post(
        "/run",
        "",
        json!({"client": "local", "tgt": "db1", "fun": "test.echo", "arg": ["x"], "token": raw}),
    );
    assert_error(s, &v, 401);

    // Hooks: the event carries the body and the headers, without secrets.
    let mut events = sse(&api, &tok, None);
    let r: Value = api
        .http
        .post(api.url("/hook/my/tag"))
        .header("X-Auth-Token", &tok)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body("a=1&a=2&b=3")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(r, json!({"success": true}));
    let ev = events.until(|tag, _| tag == "salt/netapi/hook/my/tag");
    assert_eq!(ev["data"]["post"], json!({"a": ["1", "2"], "b": "3"}));
    assert_eq!(ev["data"]["body"], json!("a=1&a=2&b=3"));
    let headers = ev["data"]["headers"].as_object().unwrap();
    assert!(
        headers
            .keys()
            .all(|k| !k.eq_ignore_ascii_case("x-auth-token")),
        "{headers:?}"
    );

    // Stats and metrics.
    let (_, v) = api.get("/stats", &tok);
    // The keys of CherryPy's cpstats application block that SaltGUI's stats page reads.
    let app = &v["CherryPy Applications"];
    assert!(app["Total Requests"].as_u64().unwrap() > 10, "{v}");
    assert!(app["Total Bytes Read"].as_u64().unwrap() > 100, "{v}");
    assert!(app["Total Bytes Written"].as_u64().unwrap() > 100, "{v}");
    for k in [
        "Bytes Read/Request",
        "Bytes Written/Second",
        "Current Time",
        "Start Time",
        "Uptime",
        "Requests/Second",
        "Total Time",
    ] {
        assert!(app[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {v}");
    }
    assert_eq!(app["Enabled"], json!(true));
    let m = api
        .http
        .get(api.url("/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        m.contains("brine_api_requests_total{method=\"POST\",route=\"/\",status=\"200\"}"),
        "{m}"
    );
    assert!(m.contains("brine_connected_minions 2"), "{m}");

    // Logout: the token is dead everywhere.
    let (s, v) = api.post("/logout", &tok, json!({}));
    assert_eq!(
        (s, v),
        (200, json!({"return": "Your token has been cleared"}))
    );
    let (s, v) = api.post(
        "/",
        &tok,
        json!({"client": "local", "tgt": "*", "fun": "test.ping"}),
    );
    assert_error(s, &v, 401);
}

#[test]
fn api_streams_acl_and_token_lifecycle() {
    let mut api = api_stack("");
    let alice = api.login("alice", "x", "auto");
    let bob = api.login("bob", "x", "auto");

    // SSE wire format: the retry line first, then tag/data lines with ids.
    let mut a_events = sse(&api, &alice, None);
    let mut b_events = sse(&api, &bob, None);
    let (_, v) = api.post(
        "/",
        &alice,
        json!({"client": "local", "tgt": "*", "fun": "test.ping"}),
    );
    let jid_all = {
        let ev = a_events.until(|tag, _| tag.ends_with("/ret/db1"));
        ev["data"]["jid"].as_str().unwrap().to_string()
    };
    assert_eq!(v["return"][0].as_object().unwrap().len(), 2);
    assert!(a_events.raw.lock().unwrap().starts_with("retry: 400\n"));

    // bob's ACL: web* only, test.* only.
    let (s, v) = api.post(
        "/",
        &bob,
        json!({"client": "local", "tgt": "db1", "fun": "test.ping"}),
    );
    assert_error(s, &v, 401);
    let (s, v) = api.post(
        "/",
        &bob,
        json!({"client": "local", "tgt": "web1", "fun": "cmd.run", "arg": ["id"]}),
    );
    assert_error(s, &v, 401);
    let (s, v) = api.post(
        "/",
        &bob,
        json!({"client": "runner", "fun": "manage.status"}),
    );
    assert_error(s, &v, 401);
    let (_, v) = api.post(
        "/",
        &bob,
        json!({"client": "local", "tgt": "web1", "fun": "test.ping"}),
    );
    assert_eq!(v, json!({"return": [{"web1": true}]}));
    // bob's stream shows web1's return of his job and never a db1 return.
    let ev = b_events.until(|tag, _| tag.contains("/ret/"));
    assert_eq!(ev["data"]["id"], json!("web1"));
    assert!(!b_events
        .raw
        .lock()
        .unwrap()
        .contains(&format!("salt/job/{jid_all}/ret/db1")));
    assert!(!b_events.raw.lock().unwrap().contains("/ret/db1"));

    // Last-Event-ID: a reconnecting reader gets what it missed.
    let first = a_events.until(|tag, _| tag.contains("/ret/web1"));
    let last_id = first["_id"].as_u64().unwrap();
    let (_, v) = api.post(
        "/",
        &alice,
        json!({"client": "local_async", "tgt": "db1", "fun": "test.echo", "arg": ["missed"]}),
    );
    let jid = v["return"][0]["jid"].as_str().unwrap().to_string();
    a_events.until(|tag, _| tag == format!("salt/job/{jid}/ret/db1"));
    let mut resumed = sse(&api, &alice, Some(last_id));
    let ev = resumed.until(|tag, _| tag == format!("salt/job/{jid}/ret/db1"));
    assert!(ev["_id"].as_u64().unwrap() > last_id);

    // WebSocket: the handshake, then data-framed events.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = format!("ws://127.0.0.1:{}/ws/{alice}", api.port);
    let alice2 = alice.clone();
    let port = api.port;
    let got = rt.block_on(async move {
        use futures::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        ws.send(Message::Text("websocket client ready".into()))
            .await
            .unwrap();
        let ack = ws.next().await.unwrap().unwrap();
        assert_eq!(ack.into_text().unwrap().as_str(), "server received message");
        let client = reqwest::Client::new();
        client
            .post(format!("http://127.0.0.1:{port}/"))
            .header("X-Auth-Token", alice2)
            .json(&json!({"client": "local_async", "tgt": "web1", "fun": "test.ping"}))
            .send()
            .await
            .unwrap();
        loop {
            let m = tokio::time::timeout(Duration::from_secs(20), ws.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            let t = m.into_text().unwrap().to_string();
            if t.contains("/ret/web1") {
                return t;
            }
        }
    });
    assert!(
        got.starts_with("data: {") && got.ends_with("}\n\n"),
        "{got:?}"
    );

    // A token that expires mid-stream ends the stream.
    let r: Value = api
        .http
        .post(api.url("/login"))
        .json(&json!({"username": "alice", "password": "x", "eauth": "auto", "token_expire": 3}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let short = r["return"][0]["token"].as_str().unwrap().to_string();
    let mut s_events = sse(&api, &short, None);
    assert!(
        s_events.ends_within(Duration::from_secs(10)),
        "stream outlived its token"
    );
    let (s, v) = api.get("/minions", &short);
    assert_error(s, &v, 401);

    // Logout ends the streams of that token.
    let mut b2 = sse(&api, &bob, None);
    api.post("/logout", &bob, json!({}));
    api.post(
        "/",
        &alice,
        json!({"client": "local", "tgt": "web1", "fun": "test.ping"}),
    );
    assert!(
        b2.ends_within(Duration::from_secs(20)),
        "stream outlived logout"
    );

    // The API restarts: the same token still works (signed with a key in the pki dir).
    api.st.stop_api();
    api.st.start_api(api.port);
    let (s, v) = api.post(
        "/",
        &alice,
        json!({"client": "local", "tgt": "web1", "fun": "test.ping"}),
    );
    assert_eq!((s, v), (200, json!({"return": [{"web1": true}]})));
    // ...and the revoked one stays revoked.
    let (s, v) = api.get("/jobs", &bob);
    assert_error(s, &v, 401);
}

#[test]
fn api_bad_input_gets_json_errors() {
    let api = api_stack("");
    let tok = api.login("alice", "x", "auto");
    let raw = |ct: &str, body: &str| -> (u16, Value) {
        let r = api
            .http
            .post(api.url("/"))
            .header("X-Auth-Token", &tok)
            .header(CONTENT_TYPE, ct)
            .body(body.to_string())
            .send()
            .unwrap();
        let s = r.status().as_u16();
        (s, r.json().unwrap_or(Value::Null))
    };
    let (s, v) = raw("application/json", "{not json");
    assert_error(s, &v, 400);
    let (s, v) = raw("application/x-yaml", "a: [unclosed");
    assert_error(s, &v, 400);
    let (s, v) = raw("application/json", "42");
    assert_error(s, &v, 400);
    let (s, v) = raw("application/json", "[1, 2]");
    assert_error(s, &v, 400);
    let (s, v) = raw("application/xml", "<a/>");
    assert_error(s, &v, 406);
    let (s, v) = raw("application/json", "");
    assert_error(s, &v, 400);
    let (s, v) = api.post(
        "/",
        &tok,
        json!({"client": "nope", "tgt": "*", "fun": "test.ping"}),
    );
    assert_error(s, &v, 400);
    assert!(v["return"]
        .as_str()
        .unwrap()
        .contains("Invalid client specified: 'nope'"));
    let (s, v) = api.post("/", &tok, json!({"tgt": "*", "fun": "test.ping"}));
    assert_error(s, &v, 400);
    let (s, v) = api.post(
        "/",
        &tok,
        json!({"client": "ssh", "tgt": "*", "fun": "test.ping"}),
    );
    assert_error(s, &v, 400);
    assert!(v["return"]
        .as_str()
        .unwrap()
        .contains("Client disabled: 'ssh'"));
    let (s, v) = api.post("/", &tok, json!({"client": "local", "tgt": "*"}));
    assert_error(s, &v, 400);
    let (s, v) = api.post("/", &tok, json!({"client": "local", "fun": "test.ping"}));
    assert_error(s, &v, 400);
    let (s, v) = api.post("/", &tok, json!({"client": "runner"}));
    assert_error(s, &v, 400);
    let (s, v) = api.post("/", &tok, json!({"client": "runner", "fun": "no.such"}));
    assert_error(s, &v, 400);
    let big = "x".repeat(70_000);
    let (s, v) = api.post(
        "/",
        &tok,
        json!({"client": "local", "tgt": "*", "fun": "test.echo", "arg": [big]}),
    );
    assert_error(s, &v, 413);
    let (s, v) = api.post(
        "/",
        "not-a-token",
        json!({"client": "local", "tgt": "*", "fun": "test.ping"}),
    );
    assert_error(s, &v, 401);
    let (s, v) = api.post(
        "/",
        "",
        json!({"client": "local", "tgt": "*", "fun": "test.ping"}),
    );
    assert_error(s, &v, 401);
    let r = api
        .http
        .post(api.url("/login"))
        .json(&json!({"username": "carol", "password": "wrong", "eauth": "sharedsecret"}))
        .send()
        .unwrap();
    let s = r.status().as_u16();
    assert_error(s, &r.json().unwrap(), 401);
    let r = api
        .http
        .post(api.url("/login"))
        .json(&json!({"username": "x", "password": "y", "eauth": "nosuch"}))
        .send()
        .unwrap();
    let s = r.status().as_u16();
    assert_error(s, &r.json().unwrap(), 401);
    let r = api
        .http
        .get(api.url("/"))
        .header(ACCEPT, "text/html")
        .send()
        .unwrap();
    let s = r.status().as_u16();
    assert_error(s, &r.json().unwrap(), 406);
    let r = api.http.get(api.url("/nowhere")).send().unwrap();
    let s = r.status().as_u16();
    assert_error(s, &r.json().unwrap(), 404);
    let r = api
        .http
        .get(api.url("/events?token=x"))
        .header("X-Auth-Token", &tok)
        .send()
        .unwrap();
    let s = r.status().as_u16();
    assert_error(s, &r.json().unwrap(), 400);
    // A target that matches nothing keeps Salt's answer.
    let (s, v) = api.post(
        "/",
        &tok,
        json!({"client": "local", "tgt": "nomatch", "fun": "test.ping"}),
    );
    assert_eq!((s, v), (200, json!({"return": [{}]})));
    // ...and the server still serves.
    let (s, v) = api.post(
        "/",
        &tok,
        json!({"client": "local", "tgt": "web1", "fun": "test.ping"}),
    );
    assert_eq!((s, v), (200, json!({"return": [{"web1": true}]})));
}

#[test]
fn api_tls_cors_static_and_graceful_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = (dir.path().join("api.crt"), dir.path().join("api.key"));
    let ok = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("openssl");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("hello.txt"), "static hello").unwrap();
    std::fs::write(dir.path().join("index.html"), "<html>app</html>").unwrap();
    let port = free_port();
    let mut st = Stack::new(&format!(
        "auto_accept: True
netapi_enable_clients: [local]
external_auth:
  auto:
    alice: ['.*']
rest_cherrypy:
  port: {port}
  host: 127.0.0.1
  ssl_crt: {crt}
  ssl_key: {key}
  static: {www}
  app: {app}
  root_prefix: /salt
  cors_origin: [https://gui.example]
",
        crt = crt.display(),
        key = key.display(),
        www = www.display(),
        app = dir.path().join("index.html").display(),
    ));
    st.start_master();
    st.start_api(port);
    let curl = |args: &[&str]| -> (String, String) {
        let o = std::process::Command::new("curl")
            .args(["-sk", "--max-time", "20", "-D", "-"])
            .args(args)
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (head.to_string(), body.to_string())
    };
    let base = format!("https://127.0.0.1:{port}/salt");
    let (head, body) = curl(&[&format!("{base}/"), "-H", "Origin: https://gui.example"]);
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/2 200"),
        "{head}"
    );
    assert!(body.contains("Welcome"), "{body}");
    let lower = head.to_lowercase();
    assert!(
        lower.contains("access-control-allow-origin: https://gui.example"),
        "{head}"
    );
    assert!(
        lower.contains("access-control-allow-credentials: true"),
        "{head}"
    );
    // An origin not listed gets no CORS headers.
    let (head, _) = curl(&[&format!("{base}/"), "-H", "Origin: https://evil.example"]);
    assert!(!head.to_lowercase().contains("access-control-"), "{head}");
    // CORS preflight answers 200 (Salt's answers 500).
    let (head, _) = curl(&[
        "-X",
        "OPTIONS",
        &format!("{base}/login"),
        "-H",
        "Origin: https://gui.example",
        "-H",
        "Access-Control-Request-Method: POST",
    ]);
    assert!(head.contains(" 200"), "{head}");
    assert!(
        head.to_lowercase()
            .contains("access-control-allow-headers: content-type, x-auth-token"),
        "{head}"
    );
    // static files and the single-page app.
    let (_, body) = curl(&[&format!("{base}/static/hello.txt")]);
    assert_eq!(body, "static hello");
    let (_, body) = curl(&[&format!("{base}/app/some/route")]);
    assert_eq!(body, "<html>app</html>");
    // A browser gets the app on every other path (rest_cherrypy's html_override), and the app's
    // and static files whatever it accepts; curl's */* keeps the API.
    let browser = "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    for path in ["/", "/login", "/minions", "/jobs/123"] {
        let (head, body) = curl(&[&format!("{base}{path}"), "-H", browser]);
        assert!(head.contains(" 200"), "{path}: {head}");
        assert!(
            head.to_lowercase().contains("content-type: text/html"),
            "{head}"
        );
        assert_eq!(body, "<html>app</html>", "{path}");
    }
    let (_, body) = curl(&[&format!("{base}/"), "-H", "Accept: */*"]);
    assert!(body.contains("Welcome"), "{body}");
    for accept in ["Accept: text/html", "Accept: text/plain"] {
        let (head, body) = curl(&[&format!("{base}/static/hello.txt"), "-H", accept]);
        assert!(head.contains(" 200"), "{accept}: {head}");
        assert_eq!(body, "static hello");
        let (head, _) = curl(&[&format!("{base}/static/missing.txt"), "-H", accept]);
        assert!(head.contains(" 404"), "{accept}: {head}");
        let (head, body) = curl(&[&format!("{base}/app"), "-H", accept]);
        assert!(head.contains(" 200"), "{accept}: {head}");
        assert_eq!(body, "<html>app</html>");
    }
    // Plain HTTP on the TLS port is refused; outside the prefix is a 404.
    let (head, _) = curl(&[&format!("https://127.0.0.1:{port}/login")]);
    assert!(head.contains(" 404"), "{head}");

    // Graceful shutdown: an open event stream ends cleanly.
    let (_, login) = curl(&[
        "-X",
        "POST",
        &format!("{base}/login"),
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"username":"alice","password":"x","eauth":"auto"}"#,
    ]);
    let v: Value = serde_json::from_str(&login).unwrap();
    let tok = v["return"][0]["token"].as_str().unwrap().to_string();
    let mut stream = std::process::Command::new("curl")
        .args(["-skN", "--max-time", "60", &format!("{base}/events"), "-H"])
        .arg(format!("X-Auth-Token: {tok}"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let t0 = Instant::now();
    st.stop_api();
    let status = stream.wait().unwrap();
    let mut out = String::new();
    stream
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(out.starts_with("retry: 400\n"), "{out:?}");
    assert!(
        status.success(),
        "the stream did not end cleanly: {status:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(15));
}

#[test]
fn api_concurrency_limit_answers_503() {
    let api = api_stack("  brine_max_concurrent_requests: 1\n");
    let tok = api.login("alice", "x", "auto");
    let url = api.url("/");
    let tok2 = tok.clone();
    let slow = std::thread::spawn(move || {
        Client::new()
            .post(url)
            .header("X-Auth-Token", tok2)
            .json(&json!({"client": "local", "tgt": "web1", "fun": "test.sleep", "arg": [3]}))
            .timeout(Duration::from_secs(30))
            .send()
            .unwrap()
            .status()
            .as_u16()
    });
    std::thread::sleep(Duration::from_millis(800));
    let r = api.http.get(api.url("/")).send().unwrap();
    let s = r.status().as_u16();
    assert_error(s, &r.json().unwrap(), 503);
    assert_eq!(slow.join().unwrap(), 200);
    let r = api.http.get(api.url("/")).send().unwrap();
    assert_eq!(r.status(), 200);
}
