//! Salt's worst advisories replayed against Brine, each with the request shapes of its public
//! exploits: the refusal, its logged reason, and no side effect (no file written, no job run,
//! no key accepted or leaked).
//!
//! - CVE-2020-11651: ClearFuncs methods called without authentication on the request port
//!   (`_prep_auth_info` leaked the root key; `_send_pub` published jobs; `wheel`/`runner`
//!   without a key).
//! - CVE-2020-11652: path traversal through wheel functions and minion ids.
//! - CVE-2021-25281: salt-api's `wheel_async` without authentication.
//! - CVE-2021-25282: `pillar_roots.write` / `file_roots.write` writing outside the roots.
//! - CVE-2021-25283: server-side template injection through Jinja in rendered pillar.
//! - CVE-2020-16846, CVE-2020-25592: shell injection and the eauth bypass of the `ssh` client.

use std::path::{Path, PathBuf};
use std::time::Duration;

use brine_e2e::http::{assert_error, Api};
use brine_e2e::wire::{clear, request};
use brine_e2e::Stack;
use brine_protocol::payload::{get, get_str, loads, map, Value};
use serde_json::{json, Value as Json};

/// A master with one minion and salt-api; `admin` may use the wheel and runners, `limited`
/// only `test.*`. Every client is enabled, `ssh` too, as on a site that turned it on.
fn api_stack(pillar: &[(&str, &str)]) -> Api {
    let (mut st, port) = brine_e2e::http::api_stack_config(
        "auto_accept: True
timeout: 6
gather_job_timeout: 3
netapi_enable_clients: [local, local_async, runner, runner_async, wheel, wheel_async, ssh]",
        "admin:adminpw\nlimited:limitedpw\n",
        "    admin: ['.*', '@runner', '@wheel', '@jobs']
    limited:
      - 'test.*'",
    );
    if !pillar.is_empty() {
        st.pillar(pillar);
    }
    st.start_master();
    st.start_minion("web1", "");
    st.wait_answering(&["web1"]);
    st.start_api(port);
    Api::new(st, port)
}

/// A file no refused request may create, under the test's own directory.
fn marker(st: &Stack, name: &str) -> PathBuf {
    st.dir.path().join(name)
}

/// `../` enough times to reach `/` from anywhere under the test directory, then `target`.
fn escape_to(target: &Path) -> String {
    format!(
        "{}{}",
        "../".repeat(30),
        target.display().to_string().trim_start_matches('/')
    )
}

/// Give a wrongly published job the time to run on the minion before checking it did not.
fn settle() {
    std::thread::sleep(Duration::from_secs(4));
}

fn unsigned_or_plain(reply: &[u8]) -> Value {
    loads(reply).expect("a msgpack reply")
}

#[test]
fn cve_2020_11651_clear_funcs_need_authentication() {
    let api = api_stack(&[]);
    let st = &api.st;
    let root_key = std::fs::read_to_string(st.master_root().join("cache/.root_key"))
        .expect("the master's root key");
    assert!(root_key.len() >= 20);
    let pwned = marker(st, "pwned-11651");
    let touch = Value::Array(vec![Value::from(format!("touch {}", pwned.display()))]);
    let ctx = zmq::Context::new();
    let jid = Value::from("20301231235959000000");
    let shapes: Vec<(&str, Value)> = vec![
        // The root key leak.
        (
            "_prep_auth_info",
            map(vec![("cmd", Value::from("_prep_auth_info"))]),
        ),
        // A job published without authentication.
        (
            "_send_pub",
            map(vec![
                ("cmd", Value::from("_send_pub")),
                ("fun", Value::from("cmd.run")),
                ("arg", touch.clone()),
                ("tgt", Value::from("*")),
                ("tgt_type", Value::from("glob")),
                ("ret", Value::from("")),
                ("jid", jid.clone()),
                ("user", Value::from("root")),
                (
                    "kwargs",
                    map(vec![
                        ("show_jid", Value::from(false)),
                        ("show_timeout", Value::from(false)),
                    ]),
                ),
            ]),
        ),
        (
            "_mk_token",
            map(vec![
                ("cmd", Value::from("_mk_token")),
                ("eauth", Value::from("auto")),
                ("username", Value::from("root")),
            ]),
        ),
        (
            "_get_token",
            map(vec![
                ("cmd", Value::from("_get_token")),
                ("token", Value::from("x")),
            ]),
        ),
        // publish, wheel and runner without the root key (eauth fields in the load are no key).
        (
            "publish",
            map(vec![
                ("cmd", Value::from("publish")),
                ("fun", Value::from("cmd.run")),
                ("arg", touch.clone()),
                ("tgt", Value::from("*")),
                ("tgt_type", Value::from("glob")),
                ("jid", jid.clone()),
                ("ret", Value::from("")),
                ("user", Value::from("root")),
                ("eauth", Value::from("auto")),
                ("username", Value::from("root")),
            ]),
        ),
        (
            "wheel",
            map(vec![
                ("cmd", Value::from("wheel")),
                ("fun", Value::from("key.gen_accept")),
                ("id_", Value::from("intruder")),
                ("user", Value::from("root")),
                ("eauth", Value::from("auto")),
                ("username", Value::from("root")),
                ("password", Value::from("")),
            ]),
        ),
        (
            "runner",
            map(vec![
                ("cmd", Value::from("runner")),
                ("fun", Value::from("salt.cmd")),
                (
                    "kwarg",
                    map(vec![
                        ("fun", Value::from("cmd.run")),
                        ("arg", touch.clone()),
                    ]),
                ),
                ("user", Value::from("root")),
                ("key", Value::from("not-the-root-key")),
            ]),
        ),
    ];
    for (name, load) in shapes {
        let raw = request(&ctx, st.ret_port, &clear(load), 20_000).expect("the master answers");
        assert!(
            !String::from_utf8_lossy(&raw).contains(root_key.trim()),
            "{name}: the root key leaked"
        );
        let reply = unsigned_or_plain(&raw);
        match name {
            "publish" | "wheel" | "runner" => assert_eq!(
                get(&reply, "error").and_then(|e| get_str(e, "name")),
                Some("AuthenticationError"),
                "{name}: {reply}"
            ),
            _ => assert_eq!(reply, Value::Map(vec![]), "{name}: {reply}"),
        }
    }
    settle();
    assert!(!pwned.exists(), "a job ran from an unauthenticated request");
    assert!(!st.master_root().join("pki/minions/intruder").exists());
    let log = st.master_log();
    for reason in [
        "unsupported clear command \"_prep_auth_info\"",
        "unsupported clear command \"_send_pub\"",
        "wheel call refused: bad root key",
        "runner call refused: bad root key",
    ] {
        assert!(log.contains(reason), "no log line for {reason:?}\n{log}");
    }
    // The minion still takes real jobs.
    let (v, _) = st.salt_json(&["web1", "test.ping"]);
    assert_eq!(v, json!({"web1": true}));
}

#[test]
fn cve_2020_11652_traversal_in_wheel_functions_and_ids() {
    let api = api_stack(&[]);
    let st = &api.st;
    let token = api.login("admin", "adminpw", "file");
    let outside = marker(st, "pwned-11652");
    let wheel = |fun: &str, kw: Json| {
        let mut low = json!({"client": "wheel", "fun": fun});
        low.as_object_mut()
            .unwrap()
            .extend(kw.as_object().unwrap().clone());
        let (status, body) = api.post("/", &token, json!([low]));
        assert_eq!(status, 200, "{fun}: {body}");
        body["return"][0]["data"].clone()
    };
    for fun in ["file_roots.write", "pillar_roots.write"] {
        let data = wheel(
            fun,
            json!({"data": "owned", "path": escape_to(&outside), "saltenv": "base"}),
        );
        assert_eq!(data["success"], json!(false), "{fun}: {data}");
        assert!(
            data["return"].as_str().unwrap().contains("refused"),
            "{data}"
        );
    }
    for id in [
        "../../../../tmp/brine-evil",
        "..",
        "a/b",
        "a\\b",
        "nul\0byte",
        &"x".repeat(256),
    ] {
        let data = wheel("key.gen_accept", json!({"id_": id}));
        assert_eq!(data["success"], json!(false), "{id:?}: {data}");
        let (status, body) = {
            let r = api
                .http
                .post(api.url("/keys"))
                .json(&json!({"mid": id, "username": "admin", "password": "adminpw", "eauth": "file"}))
                .send()
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Json>().unwrap_or(Json::Null))
        };
        assert_error(status, &body, 400);
    }
    assert!(!outside.exists());
    assert!(!Path::new("/tmp/brine-evil").exists());
    let listed = wheel("key.list_all", json!({}));
    assert_eq!(listed["return"]["minions"], json!(["web1"]), "{listed}");
}

#[test]
fn cve_2021_25281_25282_wheel_through_salt_api_needs_credentials_and_stays_in_the_roots() {
    let api = api_stack(&[]);
    let st = &api.st;
    let outside = marker(st, "pwned-25282");
    let write = json!({"client": "wheel_async", "fun": "pillar_roots.write", "data": "owned",
                       "path": escape_to(&outside)});
    // The exploit: /run with no credentials at all, or eauth fields without a password.
    for chunk in [write.clone(), {
        let mut c = write.clone();
        c["eauth"] = json!("file");
        c["username"] = json!("admin");
        c
    }] {
        let r = api
            .http
            .post(api.url("/run"))
            .json(&json!([chunk]))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        let body: Json = r.json().unwrap();
        assert_error(status, &body, 401);
    }
    // POST / without a session, and with a token nobody issued.
    for token in ["", "0123456789abcdef"] {
        let (status, body) = api.post("/", token, json!([write]));
        assert_error(status, &body, 401);
    }
    // A user without @wheel is refused the wheel.
    let mut limited = write.clone();
    limited["eauth"] = json!("file");
    limited["username"] = json!("limited");
    limited["password"] = json!("limitedpw");
    let r = api
        .http
        .post(api.url("/run"))
        .json(&json!([limited]))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let body: Json = r.json().unwrap();
    assert_error(status, &body, 401);
    // And a user with @wheel cannot write outside (or inside) the roots either.
    let token = api.login("admin", "adminpw", "file");
    let mut sync = write.clone();
    sync["client"] = json!("wheel");
    let (status, body) = api.post("/", &token, json!([sync]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["return"][0]["data"]["success"], json!(false), "{body}");
    settle();
    assert!(!outside.exists());
}

#[test]
fn cve_2021_25283_jinja_in_pillar_cannot_reach_the_host() {
    let probe = std::env::temp_dir().join(format!("brine-ssti-{}", std::process::id()));
    let touch = format!("touch {}", probe.display());
    let payloads = [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}".to_string(),
        "{{ self.__init__.__globals__ }}".to_string(),
        format!("{{{{ cycler.__init__.__globals__.os.popen('{touch}').read() }}}}"),
        format!("{{{{ lipsum.__globals__['os'].popen('{touch}').read() }}}}"),
        format!("{{{{ config.__class__.__init__.__globals__['os'].popen('{touch}').read() }}}}"),
        format!("{{{{ request.application.__globals__.__builtins__.__import__('os').popen('{touch}').read() }}}}"),
    ];
    let mut files: Vec<(String, String)> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("ssti{i}.sls"), format!("ssti{i}: \"{p}\"\n")))
        .collect();
    let top = format!(
        "base:\n  '*':\n{}",
        (0..payloads.len())
            .map(|i| format!("    - ssti{i}\n"))
            .collect::<String>()
    );
    files.push(("top.sls".into(), top));
    files.push(("plain.sls".into(), "plain: yes\n".into()));
    let pillar: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let api = api_stack(&pillar);
    let (items, _) = api.st.salt_json(&["web1", "pillar.items"]);
    let text = items.to_string();
    eprintln!("pillar of web1: {text}");
    for leak in [
        "<class",
        "__builtins__",
        "subclasses",
        "<module",
        "function",
    ] {
        assert!(
            !text.contains(leak),
            "the template reached Python objects ({leak}): {text}"
        );
    }
    assert!(!probe.exists(), "a template ran a command on the master");
    assert_eq!(
        items["web1"]["_errors"].as_array().map(Vec::len),
        Some(payloads.len()),
        "{text}"
    );
    let log = api.st.master_log();
    let reasons: Vec<&str> = log.lines().filter(|l| l.contains("ssti")).collect();
    eprintln!("{}", reasons.join("\n"));
    assert!(
        reasons.len() >= payloads.len(),
        "no logged reason for each refused template\n{log}"
    );
    let _ = std::fs::remove_file(&probe);
    // The minion and the master keep serving.
    let (v, _) = api.st.salt_json(&["web1", "test.ping"]);
    assert_eq!(v, json!({"web1": true}));
}

#[test]
fn cve_2020_16846_25592_the_ssh_client_is_not_run() {
    let api = api_stack(&[]);
    let pwned = marker(&api.st, "pwned-16846");
    let inject = format!("aaa|touch {};", pwned.display());
    let shapes = [
        // Shell injection through ssh_priv and other ssh options.
        json!({"client": "ssh", "tgt": "*", "fun": "test.ping", "ssh_priv": inject,
               "eauth": "file", "username": "admin", "password": "adminpw"}),
        json!({"client": "ssh", "tgt": format!("x;touch {}", pwned.display()), "fun": "test.ping",
               "ssh_port": inject, "roster_file": "../../../../etc/passwd",
               "eauth": "file", "username": "admin", "password": "adminpw"}),
        // The eauth bypass: ssh chunks with an eauth and no (or an empty) password.
        json!({"client": "ssh", "tgt": "*", "fun": "cmd.run", "arg": format!("touch {}", pwned.display()),
               "eauth": "file", "username": "admin", "password": ""}),
        json!({"client": "ssh", "tgt": "*", "fun": "cmd.run", "eauth": "file"}),
    ];
    for chunk in &shapes {
        let r = api
            .http
            .post(api.url("/run"))
            .json(&json!([chunk]))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        let body: Json = r.json().unwrap();
        assert_error(status, &body, 400);
        assert!(
            body["return"]
                .as_str()
                .unwrap()
                .contains("ssh client is not supported"),
            "{body}"
        );
    }
    let token = api.login("admin", "adminpw", "file");
    let (status, body) = api.post("/", &token, json!([shapes[0]]));
    assert_error(status, &body, 400);
    settle();
    assert!(!pwned.exists());
}
