//! Property-based API testing: the schemathesis CLI (from PyPI) drives the live salt-api with
//! requests generated from openapi.yaml and checks every response against it.
//!
//! schemathesis lives in the Python venv that scripts/test builds (.venv-test/, exported as
//! BRINE_TEST_VENV). Without that variable the test says so and returns, so a plain
//! `cargo test` stays usable; under scripts/test it always runs.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use brine_e2e::{free_port, test_venv, Stack};
use serde_json::json;

/// Master, two minions and salt-api with every client enabled and a user with full rights.
fn api_stack() -> (Stack, u16) {
    let port = free_port();
    let conf = format!(
        "auto_accept: True
timeout: 3
gather_job_timeout: 2
token_expire_user_override: True
netapi_enable_clients: [local, local_async, local_batch, local_subset, runner, runner_async, wheel, wheel_async, ssh]
external_auth:
  auto:
    alice: ['.*', '@runner', '@wheel', '@jobs']
rest_cherrypy:
  port: {port}
  host: 127.0.0.1
  disable_ssl: True
  collect_stats: True
  max_request_body_size: 65536
"
    );
    let mut st = Stack::new(&conf);
    st.start_master();
    st.start_minion("web1", "grains:\n  role: web\n");
    st.start_minion("db1", "grains:\n  role: db\n");
    st.wait_answering(&["web1", "db1"]);
    st.start_api(port);
    (st, port)
}

fn login(port: u16) -> String {
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let r = http
        .post(format!("http://127.0.0.1:{port}/login"))
        .json(&json!({"username": "alice", "password": "x", "eauth": "auto"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200, "login");
    r.headers()["x-auth-token"].to_str().unwrap().to_string()
}

/// Run `st` with `args` in `cwd` (so no schemathesis.toml of the repo or of the user is
/// read), in a clean environment, killed after `limit`.
fn schemathesis(venv: &Path, cwd: &Path, args: &[String], limit: Duration) -> (i32, String) {
    let bin = venv.join("bin/schemathesis");
    assert!(
        bin.exists(),
        "{} is missing: rerun scripts/test to rebuild the venv",
        bin.display()
    );
    let log = cwd.join("schemathesis.out");
    let mut child = Command::new(&bin)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", cwd)
        .env("LANG", "C.UTF-8")
        .env("NO_PROXY", "*")
        .env("COLUMNS", "160")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&log).unwrap())
        .stderr(fs::File::options().append(true).open(&log).unwrap())
        .spawn()
        .expect("start schemathesis");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = fs::read_to_string(&log).unwrap_or_default();
    match status {
        Some(s) => (s.code().unwrap_or(-1), out),
        None => panic!("schemathesis did not finish in {limit:?}:\n{out}"),
    }
}

/// True when schemathesis failed only because its own test-case generator raised (a
/// "Runtime Error" whose traceback is Hypothesis's flaky-generation error), with no failed
/// check and no error talking to the API.
fn only_generator_faults(out: &str) -> bool {
    let errors = out.matches("\nRuntime Error").count();
    errors > 0
        && !out.contains("= FAILURES =")
        && !out.contains("Network Error")
        && out.matches("hypothesis.errors.FlakyFailure:").count() >= errors
        && out.contains(&format!(" {errors} error"))
}

#[test]
fn openapi_schema_holds_against_live_api() {
    let Some(venv) = test_venv("openapi_schema_holds_against_live_api") else {
        return;
    };
    let t0 = Instant::now();
    let (st, port) = api_stack();
    let token = login(port);
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi.yaml");
    let work = st.dir.path().join("schemathesis");
    fs::create_dir_all(&work).unwrap();
    let args: Vec<String> = [
        "run",
        spec.to_str().unwrap(),
        "--url",
        &format!("http://127.0.0.1:{port}"),
        "--header",
        &format!("X-Auth-Token: {token}"),
        // Every check: no 5xx; documented status, content type, headers and body; data the
        // schema forbids is refused; missing or bad auth is refused; and so on. Except
        // positive_data_acceptance: the schema is looser than Salt's input validation in
        // places where Brine keeps Salt's 400s (an empty lowstate or credentials list, an
        // empty text/plain body, empty username/password/eauth strings), so "schema-valid
        // data was rejected" is expected there.
        "--checks",
        "all",
        "--exclude-checks",
        "positive_data_acceptance",
        // Bounded: a fixed number of cases per operation, a fixed seed, no example database.
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        "50",
        "--seed",
        "20240601",
        "--generation-database",
        "none",
        // One worker: Hypothesis's internal caches are not safe for schemathesis's worker
        // threads (two workers made its generator raise FlakyFailure now and then on CI).
        "--workers",
        "1",
        // Never leave 127.0.0.1: no redirects are followed.
        "--max-redirects",
        "0",
        "--request-timeout",
        "60",
        "--max-response-time",
        "30",
        "--no-color",
        "--suppress-health-check",
        "all",
        // Streams that never end by design: /events (SSE) and the WebSocket endpoints.
        "--exclude-path",
        "/events",
        "--exclude-path",
        "/ws",
        "--exclude-path",
        "/ws/{token}",
        // /logout revokes the token every other request carries (each later case would
        // only see 401s).
        "--exclude-path",
        "/logout",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (mut code, mut out) = schemathesis(&venv, &work, &args, Duration::from_secs(420));
    if code != 0 && only_generator_faults(&out) {
        // Hypothesis sometimes trips over its own example generation on a loaded machine
        // (a "FlakyFailure" raised inside schemathesis, before any request is sent). That
        // says nothing about the API: run once more. Failed checks and network errors are
        // never retried.
        println!("{out}\nschemathesis failed inside its own generator; running it once more");
        (code, out) = schemathesis(&venv, &work, &args, Duration::from_secs(420));
    }
    println!("{out}");
    assert_eq!(code, 0, "schemathesis reported failures:\n{out}");
    assert!(
        out.contains("passed") && !out.contains("No operations"),
        "schemathesis ran nothing:\n{out}"
    );
    drop(st);
    eprintln!(
        "openapi_schema_holds_against_live_api: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn only_schemathesis_own_generator_faults_are_run_again() {
    // The shape of the report the CI machine printed when Hypothesis tripped over itself.
    let generator = "==== ERRORS ====\n____ POST / ____\nRuntime Error\n\nInconsistent results\n\
         | hypothesis.errors.FlakyFailure: Inconsistent results: ...\n\
         ==== 1 error, 2 warnings in 31.12s ====\n";
    assert!(only_generator_faults(generator));
    // A failed check, a network error or another runtime error is a real failure.
    let failure = format!("==== FAILURES ====\n____ GET /jobs ____\n{generator}");
    assert!(!only_generator_faults(&failure));
    let network = generator.replace("Runtime Error", "Network Error");
    assert!(!only_generator_faults(&network));
    let other = "==== ERRORS ====\nRuntime Error\nKeyError: 'x'\n==== 1 error in 3s ====\n";
    assert!(!only_generator_faults(other));
    let two = format!("{generator}\nRuntime Error\nValueError\n==== 2 errors in 9s ====\n");
    assert!(!only_generator_faults(&two));
    assert!(!only_generator_faults("==== 19 passed in 30s ====\n"));
}
