//! An HTTP client for salt-api under test: login, JSON requests, error shapes, `/events`.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, Response};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::{json, Value};

use crate::Stack;

/// A stack whose master config carries `extra_master`, a `file` eauth backend with
/// `users` (`name:password` lines) and the ACL lines `acl` (YAML under `file:`), and a
/// plain-HTTP `rest_cherrypy` block on a free port. Nothing is started yet.
pub fn api_stack_config(extra_master: &str, users: &str, acl: &str) -> (Stack, u16) {
    let port = crate::free_port();
    let st = Stack::new(&format!(
        "{extra_master}
external_auth:
  file:
    '^filename': EAUTH_FILE
{acl}
rest_cherrypy:
  port: {port}
  host: 127.0.0.1
  disable_ssl: True
"
    ));
    let eauth = st.dir.path().join("eauth.txt");
    std::fs::write(&eauth, users).unwrap();
    for line in users.lines() {
        if let Some((_, password)) = line.split_once(':') {
            st.secret(password.trim());
        }
    }
    let conf = st.master_conf_dir().join("master");
    let text = std::fs::read_to_string(&conf)
        .unwrap()
        .replace("EAUTH_FILE", &eauth.display().to_string());
    std::fs::write(conf, text).unwrap();
    (st, port)
}

pub struct Api {
    pub st: Stack,
    pub port: u16,
    pub http: Client,
}

impl Api {
    /// A client for the salt-api of `st` (already started) on `port`.
    pub fn new(st: Stack, port: u16) -> Api {
        let http = Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("HTTP client");
        Api { st, port, http }
    }

    pub fn url(&self, p: &str) -> String {
        format!("http://127.0.0.1:{}{p}", self.port)
    }

    pub fn login(&self, user: &str, pass: &str, eauth: &str) -> String {
        let r = self
            .http
            .post(self.url("/login"))
            .json(&json!({"username": user, "password": pass, "eauth": eauth}))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "login {user}");
        let header = r.headers()["x-auth-token"].to_str().unwrap().to_string();
        let body: Value = r.json().unwrap();
        assert_eq!(body["return"][0]["token"], json!(header));
        self.st.secret(pass);
        self.st.secret(&header);
        header
    }

    pub fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.url(path))
            .header("X-Auth-Token", token)
            .json(&body)
            .send()
            .unwrap();
        let s = r.status().as_u16();
        (s, r.json().unwrap_or(Value::Null))
    }

    pub fn get(&self, path: &str, token: &str) -> (u16, Value) {
        let r = self
            .http
            .get(self.url(path))
            .header("X-Auth-Token", token)
            .send()
            .unwrap();
        let s = r.status().as_u16();
        (s, r.json().unwrap_or(Value::Null))
    }
}

pub fn assert_error(status: u16, body: &Value, want: u16) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["status"], json!(want), "{body}");
    assert!(body["return"].is_string(), "{body}");
    assert!(body["error"]["code"].is_string(), "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
}

/// A reader of `/events` on its own thread.
pub struct Sse {
    pub rx: std::sync::mpsc::Receiver<(String, String)>,
    pub raw: std::sync::Arc<std::sync::Mutex<String>>,
}

pub fn sse(api: &Api, token: &str, last_id: Option<u64>) -> Sse {
    let mut req = Client::builder()
        .timeout(None)
        .build()
        .unwrap()
        .get(api.url("/events"))
        .header(ACCEPT, "text/event-stream")
        .header("X-Auth-Token", token);
    if let Some(id) = last_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let resp: Response = req.send().unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()[CONTENT_TYPE],
        "text/event-stream;charset=utf-8"
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let raw = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let raw2 = raw.clone();
    std::thread::spawn(move || {
        let mut r = BufReader::new(resp);
        let mut line = String::new();
        let (mut id, mut tag) = (String::new(), String::new());
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(("".into(), "EOF".into()));
                    return;
                }
                Ok(_) => {}
            }
            raw2.lock().unwrap().push_str(&line);
            if let Some(v) = line.strip_prefix("id: ") {
                id = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("tag: ") {
                tag = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                let _ = tx.send((format!("{id} {tag}"), v.trim().to_string()));
            }
        }
    });
    Sse { rx, raw }
}

impl Sse {
    /// The next event for which `f(tag, data)` holds (panics after 30 s).
    pub fn until(&mut self, f: impl Fn(&str, &Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (head, data) = self.rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no matching event; stream so far:\n{}",
                    self.raw.lock().unwrap()
                )
            });
            assert_ne!(
                data,
                "EOF",
                "stream ended; so far:\n{}",
                self.raw.lock().unwrap()
            );
            let v: Value = serde_json::from_str(&data).unwrap();
            let tag = head.split_once(' ').map(|x| x.1).unwrap_or("");
            assert_eq!(v["tag"], json!(tag), "the tag line repeats the event's tag");
            if f(tag, &v) {
                let mut v = v;
                v["_id"] = json!(head.split(' ').next().unwrap().parse::<u64>().unwrap());
                return v;
            }
        }
    }

    /// True if the stream ends within `limit`.
    pub fn ends_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            match self.rx.recv_timeout(Duration::from_millis(200)) {
                Ok((_, d)) if d == "EOF" => return true,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return true,
                _ => {}
            }
        }
        false
    }
}
