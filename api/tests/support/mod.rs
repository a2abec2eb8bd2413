//! A salt-api router built from a master config in a temporary directory, driven in-process
//! with `tower::ServiceExt::oneshot` (no process, no socket). The master link points at a port
//! where nothing listens: only paths that fail before needing the master are asked here.

#![allow(dead_code)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use axum::Router;
use brine_api::auth::eauth::Identity;
use brine_api::state::AppState;
use serde_json::Value;
use tower::ServiceExt;

pub(crate) struct Api {
    pub router: Router,
    pub state: Arc<AppState>,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::watch::Sender<bool>,
}

/// The master config every test starts from; `extra` is appended (YAML).
const BASE: &str = "
sharedsecret: s3cret
external_auth:
  sharedsecret:
    alice:
      - 'test.*'
    admin:
      - '.*'
      - '@runner'
      - '@wheel'
";

/// The clients enabled unless `extra` says otherwise.
const CLIENTS: &str = "netapi_enable_clients: [local, local_async, runner, wheel]\n";

/// A port nothing listens on (bound, then released).
fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Api {
    /// The router for the base config plus `extra` (which may add a `rest_cherrypy` block;
    /// without one, the API listens on the defaults with `disable_ssl` and a 1 KiB body limit).
    pub(crate) fn new(extra: &str) -> Api {
        Api::with_ret_port(extra, unused_port())
    }

    /// The router with its master link on `ret_port`.
    pub(crate) fn with_ret_port(extra: &str, ret_port: u16) -> Api {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let rest = if extra.contains("rest_cherrypy:") {
            String::new()
        } else {
            "rest_cherrypy:\n  port: 8000\n  disable_ssl: true\n  max_request_body_size: 1024\n"
                .to_string()
        };
        let clients = if extra.contains("netapi_enable_clients:") {
            ""
        } else {
            CLIENTS
        };
        let config = format!(
            "root_dir: {root}\npki_dir: {root}/pki\ncachedir: {root}/cache\nsock_dir: {root}/sock\n\
             interface: 127.0.0.1\nret_port: {ret}\npublish_port: {publish}\n{BASE}{clients}{rest}{extra}\n",
            root = root.display(),
            ret = ret_port,
            publish = unused_port(),
        );
        for sub in ["pki", "cache", "sock"] {
            std::fs::create_dir_all(root.join(sub)).expect("mkdir");
        }
        std::fs::write(root.join("master"), config).expect("write master config");
        let cfg = brine_protocol::config::MasterConfig::load(root).expect("master config");
        let api = brine_api::config::ApiConfig::from_master(&cfg).expect("api config");
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let state = brine_api::daemon::state(cfg, api, stop_rx, None).expect("state");
        Api {
            router: brine_api::routes::router(state.clone()),
            state,
            _dir: dir,
            _stop: stop,
        }
    }

    /// A valid token for `name` (eauth `sharedsecret`).
    pub(crate) fn token(&self, name: &str) -> String {
        let id = Identity {
            name: name.into(),
            eauth: "sharedsecret".into(),
            groups: vec![],
        };
        self.state.tokens.issue(&id, 3600).0
    }

    /// Send one request through the real router.
    pub(crate) async fn send(&self, request: Request<Body>) -> Response<Body> {
        self.router
            .clone()
            .oneshot(request)
            .await
            .expect("the router never fails")
    }

    /// Send one request; status, Content-Type and the body parsed (JSON or YAML).
    pub(crate) async fn call(&self, request: Request<Body>) -> (StatusCode, String, Value) {
        let response = self.send(request).await;
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let value = if content_type.contains("yaml") {
            serde_yaml::from_slice(&bytes).expect("yaml body")
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        (status, content_type, value)
    }
}

/// A request builder: `req("POST", "/run")`.
pub(crate) fn req(method: &str, uri: &str) -> axum::http::request::Builder {
    Request::builder().method(method).uri(uri)
}

/// A JSON request with an optional session token.
pub(crate) fn json_req(
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: &Value,
) -> Request<Body> {
    let mut b = req(method, uri).header("content-type", "application/json");
    if let Some(t) = token {
        b = b.header("x-auth-token", t);
    }
    b.body(Body::from(body.to_string())).expect("request")
}

/// A "master" on a free port that answers every request with `reply` (a REP socket, for the
/// API's REQ sockets); its port.
pub(crate) fn fake_master(reply: &'static [u8]) -> u16 {
    let ctx = zmq::Context::new();
    let socket = ctx.socket(zmq::REP).expect("REP socket");
    socket.bind("tcp://127.0.0.1:0").expect("bind");
    let endpoint = socket
        .get_last_endpoint()
        .expect("endpoint")
        .expect("utf-8 endpoint");
    let port = endpoint
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    std::thread::spawn(move || {
        let _ctx = ctx;
        while socket.recv_bytes(0).is_ok() {
            if socket.send(reply, 0).is_err() {
                break;
            }
        }
    });
    port
}
