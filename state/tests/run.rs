//! Differential: every case of `tests/run_cases/` (a state tree and how to apply it) run by
//! Brine's engine and by Salt 3007's own (`HighState.render_highstate` + `State.call_high` in
//! the real-Salt venv) on this machine must give the same results: per state `result`,
//! `changes` (a command's `pid` aside), `comment`, `name`, `__run_num__`, `__sls__`, `__id__`,
//! `__state_ran__`, `skip_watch`, `warnings` and `__parallel__`, and the same errors.
//!
//! Both runs see one HTTP server on 127.0.0.1 (serving `tests/http_files/`, see
//! [`serve_http`]) as the grain `http`, its base URL, for cases with http(s) sources, and an
//! HTTP proxy ([`serve_proxy`]) whose port a case's options name as `{proxy_port}`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use brine_master::fileserver::FileServer;
use brine_minion::fileclient::split_url;
use brine_render::Context;
use brine_state::states::MasterList;
use brine_state::{call_high, verify_high, Compiler, Host, Options};
use common::Dir;
use serde_json::{json, Map, Value};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The minion's own execution functions on this machine, files from the case's tree (served
/// by the master's file server code, as the `base` root).
struct LocalHost {
    functions: brine_minion::functions::TemplateFunctions,
    grains: Value,
    pillar: Value,
    tree: PathBuf,
    files: FileServer,
    cache: PathBuf,
    http: brine_state::url::HttpOptions,
}

impl Host for LocalHost {
    fn call(
        &self,
        fun: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Result<Value, String> {
        let kwargs = kwargs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        brine_render::Functions::call(&self.functions, fun, args, &kwargs)
            .unwrap_or_else(|| Err(format!("'{fun}' is not available.")))
    }

    fn grains(&self) -> &Value {
        &self.grains
    }

    fn pillar(&self) -> &Value {
        &self.pillar
    }

    fn fetch(&self, source: &str, saltenv: &str) -> Result<Option<Vec<u8>>, String> {
        if !source.starts_with("salt://") {
            return brine_state::states::read_local(source);
        }
        let (rel, saltenv) = split_url(source, saltenv);
        brine_state::states::read_local(&self.tree.join(saltenv).join(rel).display().to_string())
    }

    fn render_template(
        &self,
        text: &str,
        source: &str,
        saltenv: &str,
        vars: Map<String, Value>,
    ) -> Result<String, String> {
        let ctx = Context {
            grains: self.grains.clone(),
            pillar: self.pillar.clone(),
            opts: json!({"id": "m1"}),
            saltenv: saltenv.into(),
            vars,
            ..Context::default()
        };
        brine_render::render_template(
            text,
            &split_url(source, saltenv).0,
            &ctx,
            Arc::new(Dir(self.tree.clone())),
            Arc::new(brine_render::NoFunctions),
        )
        .map_err(|e| e.to_string())
    }

    fn cachedir(&self) -> PathBuf {
        self.cache.clone()
    }

    fn http_options(&self) -> brine_state::url::HttpOptions {
        self.http.clone()
    }

    fn params(&self, fun: &str) -> Option<brine_state::states::Params> {
        brine_minion::functions::params(fun)
    }

    fn list_master(&self, saltenv: &str, prefix: &str) -> Result<MasterList, String> {
        let Some(lists) = self.files.lists(saltenv) else {
            return Ok(MasterList::default());
        };
        let list = MasterList {
            files: lists.files.clone(),
            dirs: lists.dirs.clone(),
            links: lists.links.clone(),
        };
        Ok(list.under(prefix))
    }

    fn fire_event(&self, tag: &str, _data: Value, _jid: &str) {
        // Runs here have no job, as Salt's here have no master: an event is a bug.
        panic!("a state run without a job fired {tag}");
    }
}

/// The case's own minion options (`opts` in case.json), `{work}` in a text value standing for
/// the case's work directory and `{proxy_port}` for the port of the cases' proxy.
fn proxy_port() -> String {
    std::env::var("BRINE_HTTP_PROXY_PORT").unwrap_or_default()
}

fn case_opts(meta: &Value, work: &Path) -> Map<String, Value> {
    let work = work.display().to_string();
    meta["opts"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| {
            let value = match value {
                Value::String(s) => Value::String(
                    s.replace("{work}", &work)
                        .replace("{proxy_port}", &proxy_port()),
                ),
                other => other.clone(),
            };
            (key.clone(), value)
        })
        .collect()
}

/// A small HTTP/1.1 file server on 127.0.0.1 for the cases, started once: `GET` and `HEAD`
/// of the files in `dir` (the query ignored) with an `ETag` (a `304` to a matching
/// `If-None-Match`), `404 File not found` (as Python's `http.server`) otherwise, and
/// `/redirect/<path>` answered with a `302` to `/<path>`. Its base URL.
fn serve_http(dir: PathBuf) -> String {
    serve(move |req| {
        let path = req.target.split('?').next().unwrap_or("");
        file_answer(&dir, path, req)
    })
}

/// An HTTP proxy on 127.0.0.1 for the cases (its port): absolute-URI requests with
/// `Proxy-Authorization` for `pu:pp` are answered as [`serve_http`] answers their path, and
/// `/proxy-only.txt` with `through the proxy` (which the file server does not have); a `407`
/// without those credentials, a `400` to an origin-form request. It contacts no origin, so a
/// host name it is asked for needs no resolving.
fn serve_proxy(dir: PathBuf) -> u16 {
    let base = serve(move |req| {
        if req.header("proxy-authorization") != Some("Basic cHU6cHA=") {
            return answer("407 Proxy Authentication Required", "", b"");
        }
        let Some(rest) = req.target.strip_prefix("http://") else {
            return answer("400 Bad Request", "", b"not an absolute URI\n");
        };
        let path = rest.find('/').map_or("/", |i| &rest[i..]);
        let path = path.split('?').next().unwrap_or("");
        if path == "/proxy-only.txt" {
            return answer("200 OK", "", b"through the proxy\n");
        }
        file_answer(&dir, path, req)
    });
    base.rsplit(':').next().unwrap().parse().unwrap()
}

/// A request as the case servers read it.
struct Request {
    target: String,
    headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The answer head and body (`Connection: close`).
fn answer(status: &str, extra: &str, body: &[u8]) -> (String, Vec<u8>) {
    let head = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n",
        body.len()
    );
    (head, body.to_vec())
}

/// [`serve_http`]'s answer to a path.
fn file_answer(dir: &Path, path: &str, req: &Request) -> (String, Vec<u8>) {
    if let Some(rest) = path.strip_prefix("/redirect/") {
        return answer("302 Found", &format!("Location: /{rest}\r\n"), b"");
    }
    let rel = path.trim_start_matches('/');
    match std::fs::read(dir.join(rel)) {
        Ok(bytes) if !rel.is_empty() && !rel.contains("..") => {
            let tag = format!(
                "\"{}\"",
                &brine_protocol::crypt::hash_hex(&bytes, brine_protocol::crypt::HashType::Sha256)
                    [..16]
            );
            let extra = format!("ETag: {tag}\r\n");
            if req.header("if-none-match") == Some(tag.as_str()) {
                answer("304 Not Modified", &extra, b"")
            } else {
                answer("200 OK", &extra, &bytes)
            }
        }
        _ => answer("404 File not found", "", b"File not found\n"),
    }
}

/// A server on 127.0.0.1:0 answering each connection's one request with `handler`: its base
/// URL.
fn serve(handler: impl Fn(&Request) -> (String, Vec<u8>) + Send + 'static) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            let mut reader = BufReader::new(clone);
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut headers = Vec::new();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
                    break;
                }
                if let Some((k, v)) = header.split_once(':') {
                    headers.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or("").to_string();
            let target = parts.next().unwrap_or("").to_string();
            let (head, body) = handler(&Request { target, headers });
            let _ = stream.write_all(head.as_bytes());
            if method != "HEAD" {
                let _ = stream.write_all(&body);
            }
        }
    });
    base
}

fn brine(case: &Path, work: &Path, meta: &Value, http: &str) -> Value {
    let grains = json!({"id": "m1", "os_family": "Debian", "os": "Debian", "oscodename": "bookworm", "kernel": "Linux", "osarch": "amd64", "cpuarch": "x86_64", "shell": "/bin/sh", "work": work.display().to_string(), "http": http});
    let tree = Arc::new(Dir(case.join("")));
    let ctx = Context {
        grains: grains.clone(),
        pillar: json!({}),
        opts: json!({"id": "m1"}),
        ..Context::default()
    };
    let mods: Vec<String> = serde_json::from_value(meta["mods"].clone()).unwrap();
    let mut compiler = Compiler::new(
        tree,
        &["base".to_string()],
        Arc::new(brine_render::NoFunctions),
        ctx,
    );
    let (high, mut errors) = compiler.render_highstate(&[("base".to_string(), mods)]);
    errors.extend(verify_high(&high));
    if !errors.is_empty() {
        return json!({"errors": errors});
    }
    let mut services = brine_minion::functions::Services::detached();
    services.opts = case_opts(meta, work);
    // The minion's own cache (cmd.script's downloads) stays in the case's directory, or
    // where the case's `cachedir` option puts it (as Salt's run takes it).
    let cache = services
        .opts
        .get("cachedir")
        .and_then(Value::as_str)
        .map_or_else(|| work.join(".cache"), PathBuf::from);
    services.cachedir = cache.clone();
    let http_options = brine_state::url::HttpOptions::from_opts(&services.opts);
    let minion = brine_minion::functions::Context {
        id: "m1".into(),
        grains: Arc::new(brine_protocol::payload::from_json(&grains)),
        running: Arc::default(),
        pub_load: brine_protocol::payload::Value::Map(Vec::new()),
        pillar: Arc::new(brine_protocol::payload::Value::Map(Vec::new())),
        services: Arc::new(services),
    };
    let host = LocalHost {
        functions: brine_minion::functions::TemplateFunctions::new(minion, |_| true)
            .in_test_run(meta["test"].as_bool().unwrap_or(false)),
        grains,
        pillar: json!({}),
        tree: case.to_path_buf(),
        files: FileServer::over(
            &brine_protocol::config::MasterConfig::default(),
            [(
                "base".to_string(),
                vec![case.join("base").display().to_string()],
            )]
            .into(),
        ),
        cache,
        http: http_options,
    };
    // No job: Salt's engine fires no events here either (no master to fire them to).
    let opts = Options {
        test: meta["test"].as_bool().unwrap_or(false),
        failhard: meta["failhard"].as_bool().unwrap_or(false),
        job: None,
    };
    let mut last = json!(null);
    for _ in 0..meta["runs"].as_u64().unwrap_or(1) {
        last = match call_high(&high, &host, opts.clone()) {
            Ok(ret) => json!({"ret": ret}),
            Err(brine_state::RunError::High(errors)) => json!({"errors": errors}),
            Err(brine_state::RunError::Refused(why)) => return json!({"refused": why}),
        };
    }
    last
}

/// What is compared of one state's result.
fn comparable(ret: &Value) -> Value {
    let mut out = Map::new();
    for key in [
        "result",
        "changes",
        "comment",
        "name",
        "__run_num__",
        "__sls__",
        "__id__",
        "__state_ran__",
        "skip_watch",
        "warnings",
        "__parallel__",
    ] {
        if let Some(v) = ret.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(Value::Object(ch)) = out.get_mut("changes") {
        ch.remove("pid");
        // A command run by `module.run` keeps its pid one level down.
        for inner in ch.values_mut() {
            if let Value::Object(inner) = inner {
                inner.remove("pid");
            }
        }
    }
    Value::Object(out)
}

/// The lock `brine_e2e::system_files_lock` takes (the same file): the state cases change apt's
/// sources, locales, the time zone, alternatives and packages, which salt-call comparisons
/// in other test binaries read.
fn hold_system_files() -> std::fs::File {
    let path = std::env::temp_dir().join("brine-test-system-files.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .expect("lock file");
    file.lock().expect("lock");
    file
}

#[test]
fn cases_run_as_salt_runs_them() {
    let _system = hold_system_files();
    let work = tempfile::tempdir().unwrap();
    let cases = tests_dir().join("run_cases");
    let http = serve_http(tests_dir().join("http_files"));
    let proxy = serve_proxy(tests_dir().join("http_files"));
    // salt_run.py gives Salt's run the same grain and proxy.
    std::env::set_var("BRINE_HTTP", &http);
    std::env::set_var("BRINE_HTTP_PROXY_PORT", proxy.to_string());
    let Some(out) =
        brine_render::oracle::run_with(&tests_dir().join("salt_run.py"), &[&cases, work.path()])
    else {
        return;
    };
    let salt: Map<String, Value> = serde_json::from_slice(&out).expect("salt's json");
    let mut failures = Vec::new();
    for (name, expected) in &salt {
        let case = cases.join(name);
        let meta: Value =
            serde_json::from_str(&std::fs::read_to_string(case.join("case.json")).unwrap())
                .unwrap();
        // "like": another case's tree and setup.sh.
        let case = meta["like"]
            .as_str()
            .map_or(case.clone(), |other| cases.join(other));
        let case_work = work.path().join(name);
        let _ = std::fs::remove_dir_all(&case_work);
        std::fs::create_dir_all(&case_work).unwrap();
        if case.join("setup.sh").exists() {
            let ok = std::process::Command::new("sh")
                .arg(case.join("setup.sh"))
                .arg(&case_work)
                .status()
                .unwrap()
                .success();
            assert!(ok, "{name}: setup.sh failed");
        }
        let got = brine(&case, &case_work, &meta, &http);
        let _ = std::fs::remove_dir_all(&case_work);
        if expected.get("refused") != got.get("refused") {
            failures.push(format!(
                "{name}: refused\n  salt:  {}\n  brine: {}",
                expected["refused"], got["refused"]
            ));
            continue;
        }
        if expected.get("errors") != got.get("errors") {
            failures.push(format!(
                "{name}: errors\n  salt:  {}\n  brine: {}",
                expected["errors"], got["errors"]
            ));
            continue;
        }
        let (Some(want), Some(have)) = (expected["ret"].as_object(), got["ret"].as_object()) else {
            continue;
        };
        for (tag, w) in want {
            match have.get(tag) {
                None => failures.push(format!("{name}: {tag} missing in Brine's run")),
                Some(h) if comparable(h) != comparable(w) => failures.push(format!(
                    "{name}: {tag}\n  salt:  {}\n  brine: {}",
                    comparable(w),
                    comparable(h)
                )),
                Some(_) => {}
            }
        }
        for tag in have.keys().filter(|t| !want.contains_key(*t)) {
            failures.push(format!("{name}: {tag} only in Brine's run"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
