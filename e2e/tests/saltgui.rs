//! SaltGUI, unchanged, in a real browser: salt-api serves SaltGUI's app (from
//! `../shared/saltgui`, as a site configures `app:` and `static:`), and Debian's Chromium,
//! driven by puppeteer-core (`e2e/saltgui/drive.mjs`), logs in through `GET /` and checks the
//! minions, keys, jobs, job detail, events, grains, pillars, schedules, beacons and mine pages
//! show the stack's data without a browser error.
//!
//! Needs `/usr/bin/chromium` (or `CHROMIUM`) and `npm ci` in `e2e/saltgui`; `scripts/test`
//! prepares both and sets `BRINE_REQUIRE_BROWSER=1`, which turns a missing piece into a failure
//! instead of a skip.

use std::path::PathBuf;
use std::process::Command;

use brine_e2e::http::api_stack_config;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the e2e crate is in the repository")
        .to_path_buf()
}

#[test]
fn saltgui_pages_show_the_stack_in_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let saltgui = repo().join("../shared/saltgui");
    let driver = repo().join("e2e/saltgui");
    let missing: Vec<String> = [
        (PathBuf::from(&chromium), "Chromium"),
        (saltgui.join("index.html"), "SaltGUI in ../shared/saltgui"),
        (
            driver.join("node_modules/puppeteer-core"),
            "npm ci in e2e/saltgui",
        ),
    ]
    .into_iter()
    .filter(|(p, _)| !p.exists())
    .map(|(p, what)| format!("{what} ({})", p.display()))
    .collect();
    if !missing.is_empty() {
        let why = format!("SaltGUI browser test needs: {}", missing.join(", "));
        assert!(std::env::var_os("BRINE_REQUIRE_BROWSER").is_none(), "{why}");
        brine_e2e::missing_dependency(&why);
        return;
    }
    let saltgui = saltgui.canonicalize().unwrap();

    let (mut st, port) = api_stack_config(
        "auto_accept: True\ntimeout: 8\n\
         netapi_enable_clients: [local, local_async, runner, runner_async, wheel, wheel_async]\n",
        "admin:adminpw\n",
        "    admin: ['.*', '@runner', '@wheel', '@jobs']",
    );
    // SaltGUI's files, served by salt-api as rest_cherrypy's app/static options serve them.
    let conf = st.master_conf_dir().join("master");
    let text = std::fs::read_to_string(&conf).unwrap().replace(
        "  disable_ssl: True\n",
        &format!(
            "  disable_ssl: True\n  app: {dir}/index.html\n  static: {dir}/static\n  static_path: /static\n",
            dir = saltgui.display()
        ),
    );
    std::fs::write(&conf, text).unwrap();
    st.pillar(&[
        ("top.sls", "base:\n  '*':\n    - roles\n"),
        ("roles.sls", "brine_role: web\nbrine_ports: [80, 443]\n"),
    ]);
    st.start_master();
    st.start_minion(
        "m1",
        "schedule:\n  nightly:\n    function: test.ping\n    hours: 24\n\
         beacons:\n  load:\n    - averages: {1m: [-1.0, -0.5], 5m: [-1.0, -0.5], 15m: [-1.0, -0.5]}\n    - interval: 2\n\
         mine_functions:\n  test.ping: []\n  greeting:\n    - mine_function: test.echo\n    - hello\n",
    );
    st.start_minion("m2", "");
    st.wait_answering(&["m1", "m2"]);
    st.start_api(port);

    let shots = st.dir.path().join("shots");
    std::fs::create_dir_all(&shots).unwrap();
    let out = Command::new("node")
        .arg(driver.join("drive.mjs"))
        .env("SALTGUI_URL", format!("http://127.0.0.1:{port}"))
        .env("SALTGUI_USER", "admin")
        .env("SALTGUI_PASS", "adminpw")
        .env("SALTGUI_EAUTH", "file")
        .env("CHROMIUM", &chromium)
        .env("SALTGUI_SHOTS", &shots)
        .output()
        .expect("run node");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "SaltGUI checks failed:\n{report}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        st.logs()
    );
    let v: serde_json::Value = serde_json::from_str(&report).expect("the driver's JSON report");
    let checks: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.as_str())
        .collect();
    for page in [
        "minions",
        "keys",
        "command-box",
        "jobs",
        "job-detail",
        "events",
        "grains",
        "grains-minion",
        "pillars",
        "pillars-minion",
        "schedules",
        "schedules-minion",
        "beacons",
        "beacons-minion",
        "mine",
        "mine-minion",
    ] {
        assert!(checks.contains(&page), "{page} not checked: {report}");
    }
    assert_eq!(v["console"], serde_json::json!([]), "{report}");
}
