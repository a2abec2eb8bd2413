//! Resource limits a hostile peer cannot exceed on salt-api, each tested with the hostile
//! traffic itself: memory left behind by floods of large bodies, failed sign-ins per user name
//! and per address (429), streams per token (429), headers and bodies sent slowly, connections
//! left idle and connections opened by the hundred from one address.
//!
//! Several tests act as a second client address: on Linux every 127.0.0.0/8 address is
//! loopback, so a client bound to 127.0.0.2 reaches the API on 127.0.0.1 from another address.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use brine_e2e::http::{assert_error, Api};
use brine_e2e::{proc_kib, wait_until};
use reqwest::blocking::Client;
use reqwest::header::CONTENT_TYPE;
use serde_json::{json, Value as Json};

/// A stack (master, one minion, salt-api) with these lines added to the `rest_cherrypy` block.
fn limited_api(limits: &str) -> Api {
    let (mut st, port) = brine_e2e::http::api_stack_config(
        "auto_accept: True\ntimeout: 6\ngather_job_timeout: 3\nnetapi_enable_clients: [local, local_async, runner, wheel]",
        "admin:adminpw\nlimited:limitedpw\n",
        "    admin: ['.*', '@runner', '@wheel', '@jobs']
    limited:
      - 'test.*'",
    );
    let conf = st.master_conf_dir().join("master");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.trim_end().ends_with("disable_ssl: True"), "{text}");
    text.push_str(limits);
    std::fs::write(conf, text).unwrap();
    st.start_master();
    st.start_minion("web1", "");
    st.wait_answering(&["web1"]);
    st.start_api(port);
    Api::new(st, port)
}

/// An HTTP client whose connections come from `addr`.
fn client_from(addr: &str) -> Client {
    Client::builder()
        .local_address(addr.parse::<IpAddr>().unwrap())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn sign_in(http: &Client, api: &Api, user: &str, pass: &str) -> (u16, Option<String>, Json) {
    let r = http
        .post(api.url("/login"))
        .json(&json!({"username": user, "password": pass, "eauth": "file"}))
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry, r.json().unwrap_or(Json::Null))
}

/// Until the peer closes: `Some(bytes read)`, or `None` when it is still open after `limit`.
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(got),
        }
    }
    None
}

#[test]
fn floods_of_large_bodies_give_their_memory_back() {
    let api = limited_api("");
    let token = api.login("admin", "adminpw", "file");
    let pid = api.st.api_pid().unwrap();
    // Warm up the paths the flood takes, then read the settled size.
    let (status, _) = api.post("/", &token, json!([{"a": 1}]));
    assert_eq!(status, 400);
    std::thread::sleep(Duration::from_secs(3));
    let idle = proc_kib(pid, "VmRSS");
    // 80,000 small objects: under the 1 MiB body limit, and a lowstate list the API refuses
    // only after parsing all of it (each chunk lacks a client).
    let objects: Vec<String> = (0..80_000).map(|i| format!("{{\"a\":{i}}}")).collect();
    let big = format!("[{}]", objects.join(",")).into_bytes();
    let malformed = [b"[{\"a\":\"".as_slice(), &vec![b'x'; 1_000_000]].concat();
    let senders: Vec<_> = (0..8)
        .map(|t| {
            let (url, token) = (api.url("/"), token.clone());
            let body = if t % 4 == 3 {
                malformed.clone()
            } else {
                big.clone()
            };
            std::thread::spawn(move || {
                let http = Client::new();
                (0..5)
                    .map(|_| {
                        http.post(&url)
                            .header(CONTENT_TYPE, "application/json")
                            .header("X-Auth-Token", &token)
                            .body(body.clone())
                            .send()
                            .unwrap()
                            .status()
                            .as_u16()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for s in senders {
        assert!(s.join().unwrap().iter().all(|c| *c == 400));
    }
    let peak = proc_kib(pid, "VmHWM");
    eprintln!("salt-api idle {idle} KiB, peak in the flood {peak} KiB");
    assert!(
        peak > idle + 64 * 1024,
        "the flood did not allocate enough to test anything: idle {idle} KiB, peak {peak} KiB"
    );
    let mut now = 0;
    let settled = wait_until(Duration::from_secs(30), || {
        now = proc_kib(pid, "VmRSS");
        now < idle + 32 * 1024
    });
    assert!(
        settled.is_some(),
        "salt-api kept {now} KiB resident after the flood (idle: {idle} KiB, peak {peak} KiB)"
    );
    let (status, body) = api.post(
        "/",
        &token,
        json!([{"client": "local", "tgt": "web1", "fun": "test.ping"}]),
    );
    assert_eq!((status, &body["return"][0]["web1"]), (200, &json!(true)));
}

#[test]
fn failed_sign_ins_are_throttled_per_user_and_per_address() {
    let api =
        limited_api("  brine_login_failures_per_user: 3\n  brine_login_failures_per_address: 5\n");
    let (here, there) = (client_from("127.0.0.1"), client_from("127.0.0.2"));
    for _ in 0..3 {
        let (status, _, body) = sign_in(&here, &api, "admin", "wrong");
        assert_error(status, &body, 401);
    }
    // The name is locked for the minute, even with its right password, from anywhere; the
    // password is not even checked.
    for http in [&here, &there] {
        let (status, retry, body) = sign_in(http, &api, "admin", "adminpw");
        assert_error(status, &body, 429);
        assert_eq!(body["error"]["code"], json!("too_many_requests"));
        assert!(
            body["return"].as_str().unwrap().contains("this user"),
            "{body}"
        );
        let retry: u64 = retry.expect("Retry-After").parse().unwrap();
        assert!((1..=60).contains(&retry), "{retry}");
    }
    // ... on every path that signs in: /token and /run's own credentials.
    let r = there
        .post(api.url("/token"))
        .json(&json!({"username": "admin", "password": "adminpw", "eauth": "file"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 429);
    let r = there
        .post(api.url("/run"))
        .json(
            &json!([{"client": "local", "tgt": "web1", "fun": "test.ping",
                        "username": "admin", "password": "adminpw", "eauth": "file"}]),
        )
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 429);
    // Other names sign in; two more failures from 127.0.0.1 reach its address limit (5).
    let (status, _, _) = sign_in(&here, &api, "limited", "limitedpw");
    assert_eq!(status, 200);
    for user in ["nobody1", "nobody2"] {
        let (status, _, body) = sign_in(&here, &api, user, "x");
        assert_error(status, &body, 401);
    }
    let (status, _, body) = sign_in(&here, &api, "limited", "limitedpw");
    assert_error(status, &body, 429);
    assert!(
        body["return"].as_str().unwrap().contains("this address"),
        "{body}"
    );
    // Another address is not affected, and a token from before still works.
    let (status, _, _) = sign_in(&there, &api, "limited", "limitedpw");
    assert_eq!(status, 200);
    let log = api.st.api_log();
    assert!(
        log.contains(
            "refused 1 sign-ins: too many failures from this user (last: \"admin\" from 127.0.0.1"
        ),
        "{log}"
    );
    // One line per kind of refusal and ten seconds, with a count: the three refusals of
    // "admin" above make one line.
    assert_eq!(
        log.matches("too many failures from this user").count(),
        1,
        "{log}"
    );
    assert!(
        log.contains("refused 1 sign-ins: too many failures from this address (last: \"limited\" from 127.0.0.1"),
        "{log}"
    );
    for secret in ["adminpw", "limitedpw", "wrong"] {
        assert!(!log.contains(secret), "a password in salt-api's log: {log}");
    }
}

#[test]
fn streams_per_token_and_chunks_per_request_are_capped() {
    let api = limited_api("  brine_max_streams_per_token: 2\n  brine_max_lowstate_chunks: 3\n");
    let token = api.login("admin", "adminpw", "file");
    let open = |token: &str| {
        Client::builder()
            .timeout(None)
            .build()
            .unwrap()
            .get(api.url("/events"))
            .header("X-Auth-Token", token)
            .send()
            .unwrap()
    };
    let first = open(&token);
    let second = open(&token);
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = open(&token);
    assert_eq!(third.status().as_u16(), 429);
    assert!(third.headers().contains_key("retry-after"));
    let body: Json = third.json().unwrap();
    assert_error(429, &body, 429);
    // A WebSocket with the same token is a stream too: refused before the upgrade.
    let ws = reqwest::blocking::Client::new()
        .get(api.url(&format!("/ws/{token}")))
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Version", "13")
        .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .unwrap();
    assert_eq!(ws.status().as_u16(), 429);
    // Another token has its own allowance.
    let other = api.login("limited", "limitedpw", "file");
    assert_eq!(open(&other).status().as_u16(), 200);
    // A closed stream gives its place back.
    drop(first);
    let mut again = None;
    wait_until(Duration::from_secs(10), || {
        let r = open(&token);
        let ok = r.status().as_u16() == 200;
        again = Some(r);
        ok
    })
    .expect("a place after a stream closed");
    drop((second, again));

    // Each lowstate chunk may publish a job: a body of more chunks than the cap runs none.
    let chunk = json!({"client": "local_async", "tgt": "web1", "fun": "test.ping"});
    let post = |n: usize| {
        let r = Client::new()
            .post(api.url("/"))
            .header("X-Auth-Token", &token)
            .header("Accept", "application/json")
            .json(&vec![chunk.clone(); n])
            .send()
            .unwrap();
        (r.status().as_u16(), r.json::<Json>().unwrap())
    };
    let (status, body) = post(4);
    assert_error(status, &body, 400);
    assert!(
        body["return"]
            .as_str()
            .unwrap()
            .contains("4 lowstate chunks in one request; at most 3"),
        "{body}"
    );
    let (status, body) = post(3);
    assert_eq!(status, 200, "{body}");
    let jids: Vec<&str> = body["return"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["jid"].as_str().unwrap())
        .collect();
    assert_eq!(jids.len(), 3, "{body}");
    // Only those three jobs were published: the refused body left no job behind.
    let jobs: Json = Client::new()
        .get(api.url("/jobs"))
        .header("X-Auth-Token", &token)
        .header("Accept", "application/json")
        .send()
        .unwrap()
        .json()
        .unwrap();
    let listed = jobs["return"][0].as_object().unwrap();
    let pings = listed
        .values()
        .filter(|j| j["Function"] == json!("test.ping") && j["User"] == json!("admin"))
        .count();
    assert_eq!(pings, 3, "{jobs}");
}

#[test]
fn slow_and_idle_connections_are_closed() {
    let api = limited_api(
        "  brine_header_timeout: 2\n  brine_body_timeout: 2\n  brine_max_connections_per_address: 20\n",
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], api.port));
    // Headers that never end: closed after the header timeout.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    let started = Instant::now();
    read_until_closed(&mut s, Duration::from_secs(8)).expect("an unfinished head is cut off");
    eprintln!(
        "an unfinished head was cut off after {:?}",
        started.elapsed()
    );
    // Dribbled a byte every 300 ms: the timeout is for the whole head, so still cut off.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    let started = Instant::now();
    let mut closed = false;
    for b in b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "
        .iter()
        .chain([b'a'; 64].iter())
    {
        if s.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        if started.elapsed() > Duration::from_secs(8) {
            break;
        }
    }
    assert!(
        closed || read_until_closed(&mut s, Duration::from_secs(1)).is_some(),
        "a dribbled head kept its connection for {:?}",
        started.elapsed()
    );
    // A body that stops coming: 408 with the JSON error after the body timeout.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(
        b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"user",
    )
    .unwrap();
    let answer = read_until_closed(&mut s, Duration::from_secs(10)).expect("answered and closed");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"request_timeout\""), "{answer}");
    // A kept-alive connection left idle is closed too.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let answer = read_until_closed(&mut s, Duration::from_secs(8)).expect("idle connection closed");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    // Connections by the hundred from one address: past 20, closed at once; another address
    // is still served meanwhile, and so is this one once they are gone.
    let mut held: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(addr).unwrap();
    assert!(
        read_until_closed(&mut extra, Duration::from_secs(1)).is_some(),
        "the 21st connection from one address was kept (the header timeout is 2 s)"
    );
    let r = client_from("127.0.0.2").get(api.url("/")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(api
        .st
        .api_log()
        .contains("connections over the connection limits"));
    for s in &mut held {
        read_until_closed(s, Duration::from_secs(8)).expect("idle connections are closed");
    }
    held.clear();
    let r = Client::new().get(api.url("/")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
}
