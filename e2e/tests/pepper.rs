//! The real `pepper` CLI (salt-pepper from PyPI) against master + two minions + salt-api.
//!
//! pepper lives in the Python venv that scripts/test builds (.venv-test/, exported as
//! BRINE_TEST_VENV). Without that variable the test says so and returns, so a plain
//! `cargo test` stays usable; under scripts/test it always runs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use brine_e2e::{free_port, test_venv, Stack};
use serde_json::{json, Value};

struct Pepper {
    st: Stack,
    bin: PathBuf,
    url: String,
    home: PathBuf,
    runs: std::cell::Cell<u32>,
}

/// What one pepper run gave.
struct Run {
    code: i32,
    out: String,
    err: String,
}

impl Run {
    /// pepper prints one JSON document per result (several when polling with
    /// --fail-if-incomplete).
    fn docs(&self) -> Vec<Value> {
        serde_json::Deserializer::from_str(&self.out)
            .into_iter::<Value>()
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("pepper output is not JSON ({e}):\n{self}"))
    }

    fn json(&self) -> Value {
        let mut d = self.docs();
        assert_eq!(d.len(), 1, "one JSON document expected:\n{self}");
        d.remove(0)
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.out, self.err
        )
    }
}

fn stack(venv: &Path) -> Pepper {
    let bin = venv.join("bin/pepper");
    assert!(
        bin.exists(),
        "{} is missing: rerun scripts/test to rebuild the venv",
        bin.display()
    );
    let port = free_port();
    let conf = format!(
        "auto_accept: True
timeout: 5
gather_job_timeout: 3
token_expire_user_override: True
netapi_enable_clients: [local, local_async, local_batch, local_subset, runner, runner_async, wheel, wheel_async]
external_auth:
  auto:
    alice: ['.*', '@runner', '@wheel', '@jobs']
    bob:
      - 'web*':
        - 'test.*'
rest_cherrypy:
  port: {port}
  host: 127.0.0.1
  disable_ssl: True
"
    );
    let mut st = Stack::new(&conf);
    st.start_master();
    st.start_minion("web1", "grains:\n  role: web\n");
    st.start_minion("db1", "grains:\n  role: db\n");
    st.wait_answering(&["web1", "db1"]);
    st.start_api(port);
    let home = st.dir.path().join("home");
    fs::create_dir_all(&home).unwrap();
    Pepper {
        st,
        bin,
        url: format!("http://127.0.0.1:{port}/"),
        home,
        runs: std::cell::Cell::new(0),
    }
}

impl Pepper {
    /// Run pepper with the SALTAPI_* variables for `user` (None: no credentials in the
    /// environment at all, so only a pepperrc or a cached token can authenticate).
    fn run(&self, user: Option<&str>, args: &[&str]) -> Run {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let out_path = self.st.dir.path().join(format!("pepper-{n}.out"));
        let err_path = self.st.dir.path().join(format!("pepper-{n}.err"));
        let mut cmd = Command::new(&self.bin);
        // A clean environment: no proxy, no PYTHONPATH reaching a Salt install, a private HOME.
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .env("NO_PROXY", "*")
            .env("PYTHONDONTWRITEBYTECODE", "1");
        if let Some(user) = user {
            cmd.env("SALTAPI_URL", &self.url)
                .env("SALTAPI_USER", user)
                .env("SALTAPI_PASS", "secret")
                .env("SALTAPI_EAUTH", "auto");
        }
        cmd.arg("--non-interactive")
            .args(args)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out_path).unwrap())
            .stderr(fs::File::create(&err_path).unwrap());
        let mut child = cmd.spawn().expect("start pepper");
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "pepper {args:?} did not finish in 120 s\n{}",
                    fs::read_to_string(&err_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Run {
            code: status.code().unwrap_or(-1),
            out: fs::read_to_string(out_path).unwrap_or_default(),
            err: fs::read_to_string(err_path).unwrap_or_default(),
        }
    }

    /// Run as alice and expect exit 0 and a single JSON document.
    fn ok(&self, args: &[&str]) -> Value {
        let r = self.run(Some("alice"), args);
        assert_eq!(r.code, 0, "pepper {args:?}\n{r}");
        r.json()
    }
}

/// `{"return": [{<minion>: {"ret": ..., "retcode": ..., "jid": ...}}]}` (pepper always asks
/// for full_return on local clients): the minion's `ret`.
fn full_ret<'a>(v: &'a Value, minion: &str) -> &'a Value {
    let m = &v["return"][0][minion];
    assert!(m.is_object(), "no full return for {minion} in {v}");
    assert_eq!(m["retcode"], json!(0), "{v}");
    assert!(m["jid"].as_str().is_some_and(|j| j.len() == 20), "{v}");
    &m["ret"]
}

/// pepper asks for full_return on runners too, so the runner client answers with the whole
/// return event `{"tag": "salt/run/<jid>/ret", "data": {"return": ..., "success": ...}}`.
fn runner_ret(v: &Value, fun: &str) -> Value {
    let ev = &v["return"][0];
    assert!(
        ev["tag"]
            .as_str()
            .is_some_and(|t| t.starts_with("salt/run/") && t.ends_with("/ret")),
        "{v}"
    );
    assert_eq!(ev["data"]["fun"], json!(format!("runner.{fun}")), "{v}");
    assert_eq!(ev["data"]["success"], json!(true), "{v}");
    assert_eq!(ev["data"]["user"], json!("alice"), "{v}");
    ev["data"]["return"].clone()
}

#[test]
fn pepper_cli_against_brine() {
    let Some(venv) = test_venv("pepper_cli_against_brine") else {
        return;
    };
    let t0 = Instant::now();
    let mut p = stack(&venv);

    let r = p.run(None, &["--version"]);
    assert_eq!(r.code, 0, "{r}");
    assert!(r.out.contains("0.7.6"), "{r}");

    // local: test.ping on every minion.
    let v = p.ok(&["*", "test.ping"]);
    assert_eq!(full_ret(&v, "web1"), &json!(true));
    assert_eq!(full_ret(&v, "db1"), &json!(true));
    assert_eq!(v["return"].as_array().unwrap().len(), 1, "{v}");

    // local: cmd.run with a positional argument, on one minion.
    let v = p.ok(&["web1", "cmd.run", "echo hello from pepper"]);
    assert_eq!(full_ret(&v, "web1"), &json!("hello from pepper"));
    assert!(v["return"][0].get("db1").is_none(), "{v}");

    // List targeting.
    let v = p.ok(&["-L", "web1,db1", "test.ping"]);
    assert_eq!(full_ret(&v, "web1"), &json!(true));
    assert_eq!(full_ret(&v, "db1"), &json!(true));
    let v = p.ok(&["-L", "db1", "test.arg", "a", "k=v"]);
    let ret = full_ret(&v, "db1");
    assert_eq!(ret["args"], json!(["a"]), "{v}");
    assert_eq!(ret["kwargs"]["k"], json!("v"), "{v}");
    // Grain targeting.
    let v = p.ok(&["-G", "role:web", "test.ping"]);
    assert_eq!(full_ret(&v, "web1"), &json!(true));
    assert!(v["return"][0].get("db1").is_none(), "{v}");

    // Runners.
    let v = p.ok(&["--client", "runner", "manage.status"]);
    let st = &runner_ret(&v, "manage.status");
    let mut up: Vec<&str> = st["up"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    up.sort();
    assert_eq!(up, ["db1", "web1"], "{v}");
    assert_eq!(st["down"], json!([]), "{v}");

    let v = p.ok(&["--client", "runner", "jobs.list_jobs"]);
    let jobs = runner_ret(&v, "jobs.list_jobs");
    let jobs = jobs.as_object().unwrap_or_else(|| panic!("{v}"));
    assert!(
        jobs.values()
            .any(|j| j["Function"] == json!("cmd.run") && j["Target"] == json!("web1")),
        "the cmd.run job is not listed: {v}"
    );
    assert!(jobs.keys().all(|k| k.len() == 20), "{v}");

    // Wheel.
    let v = p.ok(&["--client", "wheel", "key.list_all"]);
    let data = &v["return"][0]["data"];
    assert_eq!(data["success"], json!(true), "{v}");
    let mut accepted: Vec<&str> = data["return"]["minions"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    accepted.sort();
    assert_eq!(accepted, ["db1", "web1"], "{v}");
    assert!(
        v["return"][0]["tag"]
            .as_str()
            .is_some_and(|t| t.starts_with("salt/wheel/")),
        "{v}"
    );

    // local_async, then the job's returns through a runner with a keyword argument
    // (pepper turns `jid=<JSON>` into a lowstate key; the jid is quoted to stay a string, as
    // a bare 20-digit number does not fit in 64 bits).
    let v = p.ok(&["--client", "local_async", "*", "test.echo", "async"]);
    let jid = v["return"][0]["jid"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string();
    let mut minions: Vec<&str> = v["return"][0]["minions"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    minions.sort();
    assert_eq!(minions, ["db1", "web1"], "{v}");
    let jid_arg = format!("jid=\"{jid}\"");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = p.ok(&["--client", "runner", "jobs.lookup_jid", &jid_arg]);
        let r = &runner_ret(&v, "jobs.lookup_jid");
        if r["web1"] == json!("async") && r["db1"] == json!("async") {
            break;
        }
        assert!(Instant::now() < deadline, "job {jid} never completed: {v}");
        std::thread::sleep(Duration::from_millis(300));
    }

    // --fail-if-incomplete: local_async + polling jobs.lookup_jid; one document per minion.
    let r = p.run(
        Some("alice"),
        &[
            "--fail-if-incomplete",
            "-t",
            "30",
            "*",
            "test.echo",
            "polled",
        ],
    );
    assert_eq!(r.code, 0, "{r}");
    let docs = r.docs();
    let mut seen: Vec<String> = Vec::new();
    for d in &docs {
        let m = d[0].as_object().unwrap_or_else(|| panic!("{r}"));
        assert!(!m.contains_key("Failed"), "{r}");
        for (id, ret) in m {
            assert_eq!(ret, &json!("polled"), "{r}");
            seen.push(id.clone());
        }
    }
    seen.sort();
    assert_eq!(seen, ["db1", "web1"], "{r}");

    // The /run URL with a raw eauth token from /token.
    let v = p.ok(&["--run-uri", "-L", "web1", "test.echo", "via-run"]);
    assert_eq!(full_ret(&v, "web1"), &json!("via-run"));
    let v = p.ok(&["-r", "--client", "runner", "manage.up"]);
    let up = runner_ret(&v, "manage.up");
    let mut up: Vec<&str> = up
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    up.sort();
    assert_eq!(up, ["db1", "web1"], "{v}");

    // Token mode: -T saves the session token in the -x file; the next run reuses it and
    // needs no credentials at all.
    let cache = p.home.join("session-token");
    let v = p.ok(&["-T", "-x", cache.to_str().unwrap(), "web1", "test.ping"]);
    assert_eq!(full_ret(&v, "web1"), &json!(true));
    let saved: Value = serde_json::from_str(&fs::read_to_string(&cache).unwrap()).unwrap();
    let token = saved["token"].as_str().unwrap_or_else(|| panic!("{saved}"));
    assert!(!token.is_empty(), "{saved}");
    assert_eq!(saved["user"], json!("alice"), "{saved}");
    assert_eq!(saved["eauth"], json!("auto"), "{saved}");
    assert!(saved["expire"].as_f64().unwrap() > saved["start"].as_f64().unwrap());
    let r = p.run(
        None,
        &[
            "-u",
            &p.url,
            "-T",
            "-x",
            cache.to_str().unwrap(),
            "db1",
            "test.echo",
            "cached",
        ],
    );
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(full_ret(&r.json(), "db1"), &json!("cached"));
    // Without the cache and without credentials pepper refuses before any request.
    let r = p.run(None, &["-u", &p.url, "db1", "test.ping"]);
    assert_ne!(r.code, 0, "{r}");
    assert!(r.err.contains("SALTAPI_USER required"), "{r}");

    // Token mode with /run: the cached token is a raw eauth token from /token.
    let run_cache = p.home.join("run-token");
    let v = p.ok(&[
        "-r",
        "-T",
        "-x",
        run_cache.to_str().unwrap(),
        "web1",
        "test.ping",
    ]);
    assert_eq!(full_ret(&v, "web1"), &json!(true));
    let saved: Value = serde_json::from_str(&fs::read_to_string(&run_cache).unwrap()).unwrap();
    assert_eq!(saved["name"], json!("alice"), "{saved}");
    let r = p.run(
        None,
        &[
            "-u",
            &p.url,
            "-r",
            "-T",
            "-x",
            run_cache.to_str().unwrap(),
            "web1",
            "test.echo",
            "cached-run",
        ],
    );
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(full_ret(&r.json(), "web1"), &json!("cached-run"));

    // A pepperrc in HOME, with a second profile.
    fs::write(
        p.home.join(".pepperrc"),
        format!(
            "[main]\nSALTAPI_URL={url}\nSALTAPI_USER=alice\nSALTAPI_PASS=secret\nSALTAPI_EAUTH=auto\n\n\
             [limited]\nSALTAPI_URL={url}\nSALTAPI_USER=bob\nSALTAPI_PASS=secret\nSALTAPI_EAUTH=auto\n",
            url = p.url
        ),
    )
    .unwrap();
    let r = p.run(None, &["db1", "test.echo", "rc"]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(full_ret(&r.json(), "db1"), &json!("rc"));
    // bob may only run test.* on web*: allowed, then refused.
    let r = p.run(None, &["-p", "limited", "web1", "test.echo", "bob"]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(full_ret(&r.json(), "web1"), &json!("bob"));
    let r = p.run(None, &["-p", "limited", "db1", "cmd.run", "id"]);
    assert_ne!(r.code, 0, "bob ran cmd.run on db1:\n{r}");
    assert!(r.err.contains("Authentication denied"), "{r}");

    // Bad credentials: a user the eauth backend does not know.
    let r = p.run(Some("mallory"), &["web1", "test.ping"]);
    assert_ne!(r.code, 0, "{r}");
    assert!(r.err.contains("Authentication denied"), "{r}");

    // --fail-if-incomplete with a minion gone: exit 1 and a "Failed" document naming it.
    p.st.kill_minion("db1");
    let r = p.run(
        Some("alice"),
        &[
            "--fail-if-incomplete",
            "-t",
            "8",
            "*",
            "test.echo",
            "partial",
        ],
    );
    assert_eq!(r.code, 1, "{r}");
    let docs = r.docs();
    assert!(docs.iter().any(|d| d[0]["web1"] == json!("partial")), "{r}");
    assert_eq!(docs.last().unwrap(), &json!([{"Failed": ["db1"]}]), "{r}");

    eprintln!(
        "pepper_cli_against_brine: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
