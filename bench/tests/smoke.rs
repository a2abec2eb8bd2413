//! CI keeps the harness working: `brine-bench --smoke` (Brine only, tiny sizes, a few seconds)
//! must produce a report with every section. Nothing about timing is asserted.
//!
//! Builds nothing itself: it runs the `brine-bench` binary (and the daemons next to it) from
//! this test's target directory (`cargo build --workspace --bins` first).

use std::process::Command;

use brine_e2e::bin;

#[test]
fn smoke_run_writes_a_report_with_every_section() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("SMOKE.md");
    let run = Command::new(bin("brine-bench"))
        .arg("--smoke")
        .arg("--out")
        .arg(&out)
        .current_dir(dir.path())
        .output()
        .expect("run brine-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "brine-bench --smoke failed:\n{stderr}"
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains(&format!("report: {}", out.display())),
        "{stdout}"
    );
    let md = std::fs::read_to_string(&out).expect("report written");
    for section in [
        "## Machine",
        "## Method",
        "## Headline",
        "## W1:",
        "## W2:",
        "## POST /login throughput",
        "## W3:",
        "## W4:",
        "## W5:",
        "## W6:",
        "## W7:",
        "## W8:",
        "## W9:",
        "## W10:",
        "## W12:",
        "## Baselines",
    ] {
        assert!(md.contains(section), "missing {section}:\n{md}\n{stderr}");
    }
    // Each measured workload has its table with a Brine value (not "Not measured").
    for figure in [
        "| p50 latency (ms, ↓) |",
        "| POST /login per second",
        "| local_async submissions/s",
        "| 1 client: events/s received",
        "| GET /jobs/<jid> p50, 50 stored",
        "| runner jobs.list_jobs, 50 stored",
        "| master idle RSS",
        "| start to first test.ping through the API (fresh install)",
        "| 1 MiB file: throughput (MB/s, ↑) |",
        "| 1 MiB file: master CPU per 100 MB",
        "| 5 minions: pillar p50 (ms, ↓) |",
        "| 5 minions: all refreshed after",
        "| 5 swarm minions, a highstate's requests at once: wall time (s, ↓) |",
        "| orchestration (2 jobs to 3 minions, a runner, a wheel): wall time (s, ↓) |",
        "| axum hello-world, 1 client: p50 latency",
        "| ZeroMQ REQ/REP round trip: p50",
    ] {
        assert!(md.contains(figure), "missing {figure}:\n{md}");
    }
    // The fan-out either ran (a table row and the plot) or says why not.
    let svg = dir.path().join("SMOKE-fanout.svg");
    if md.contains("| 5 minions: fan-out time") {
        let plot = std::fs::read_to_string(&svg).expect("plot written");
        assert!(plot.starts_with("<svg") && plot.contains("</svg>"));
        assert!(md.contains("(SMOKE-fanout.svg)"));
    } else {
        assert!(
            md.contains("brine-swarm"),
            "W4 neither ran nor said why:\n{md}"
        );
    }
    // W9's real minions come from a Salt venv, which smoke runs have not.
    assert!(
        md.contains("not measured: the real minions come from --salt-venv"),
        "{md}"
    );
    // Smoke is Brine only and never touches BENCHMARKS.md.
    assert!(!md.contains("| Salt 3007.15: median"));
    assert!(!dir.path().join("BENCHMARKS.md").exists());
}
