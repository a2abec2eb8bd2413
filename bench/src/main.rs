//! brine-bench: Brine and real Salt 3007 side by side on this machine, same config, same
//! workloads, each repeated; writes BENCHMARKS.md with medians, spreads, ratios and a plot.
//!
//!   brine-bench --salt-venv /path/to/venv [--runs 3] [--out BENCHMARKS.md]
//!   brine-bench --smoke            (Brine only, a few seconds: what CI runs)

mod baseline;
mod cm;
mod jobs;
mod load;
mod minions;
mod pg;
mod procs;
mod report;
mod split;
mod stack;
mod swarm;
mod tree;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;

use report::{Better, Report};
use stack::{Kind, Stack};

#[derive(Parser, Clone, Debug)]
#[command(
    name = "brine-bench",
    about = "Benchmark Brine against real Salt 3007 on this machine and write BENCHMARKS.md"
)]
struct Cli {
    /// Venv holding real Salt (salt==3007.15 and cherrypy); without it only Brine is measured.
    #[arg(long)]
    salt_venv: Option<PathBuf>,
    /// Repetitions of every workload (at least 3 for a real report).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds each time-boxed workload runs.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Concurrent clients of W2, W3, W5 and the login workload.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Swarm sizes for the fan-out workload (W4), ascending.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,5000,10000")]
    swarm: Vec<usize>,
    /// Seconds after which a fan-out size is the last one tried for an implementation (also
    /// the sign-in budget beyond the launch time).
    #[arg(long, default_value_t = 240)]
    swarm_limit: u64,
    /// RSA key size of the swarm's minions (their keys are generated once and cached; the
    /// masters' own keys are 2048 bits either way).
    #[arg(long, default_value_t = 1024)]
    swarm_key_bits: usize,
    /// Swarm minions started per second.
    #[arg(long, default_value_t = 200.0)]
    swarm_rate: f64,
    /// Key cache of the swarm (default: brine-swarm's own, ~/.cache/brine-swarm).
    #[arg(long)]
    swarm_keys_dir: Option<PathBuf>,
    /// Jobs stored for the job-store workload (W6).
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    stored: Vec<usize>,
    /// Jobs stored in PostgreSQL for the reads of W13.
    #[arg(long, default_value_t = 1_000_000)]
    pg_stored: usize,
    /// Swarm minions whose returns W13 stores (0: no ingest).
    #[arg(long, default_value_t = 10_000)]
    pg_minions: usize,
    /// Swarm minions of the fleet split over two masters (W14; 0: none).
    #[arg(long, default_value_t = 20_000)]
    split_minions: usize,
    /// Size in MiB of the file one minion fetches from the file server (W8).
    #[arg(long, default_value_t = 100)]
    serve_mib: usize,
    /// Real salt-minions (from --salt-venv) applying the formula for both masters (W9).
    #[arg(long, default_value_t = 4)]
    highstate_minions: usize,
    /// Swarm minions making a highstate's requests at once (W9; 0: none).
    #[arg(long, default_value_t = 100)]
    highstate_swarm: usize,
    /// Minions of each kind applying W11's 200-state tree at once (after one of each alone).
    #[arg(long, default_value_t = 20)]
    state_minions: usize,
    /// Swarm minions refreshing their pillar at once (W10).
    #[arg(long, default_value_t = 1000)]
    pillar_minions: usize,
    /// Swarm minions the orchestration's jobs go to (W12).
    #[arg(long, default_value_t = 100)]
    orchestrate_minions: usize,
    /// Seconds of idleness before the idle memory is read (W7).
    #[arg(long, default_value_t = 10.0)]
    idle: f64,
    /// Only these workloads (e.g. W1,W4); default all.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Where the report goes (default BENCHMARKS.md; with --smoke a temp file). The plot is
    /// written next to it as <name>-fanout.svg.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Keep the daemons' directories and logs (printed at the end).
    #[arg(long)]
    keep: bool,
    /// A few seconds, Brine only, tiny sizes: keeps the harness working in CI.
    #[arg(long)]
    smoke: bool,
}

impl Cli {
    fn wants(&self, w: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o.eq_ignore_ascii_case(w))
    }

    fn smoke_sized(mut self) -> Cli {
        if self.smoke {
            self.salt_venv = None;
            self.runs = 1;
            self.seconds = 0.5;
            self.clients = 4;
            self.swarm = vec![5];
            self.swarm_limit = 60;
            self.swarm_key_bits = 1024;
            self.stored = vec![50];
            self.pg_stored = 50;
            self.pg_minions = 5;
            self.split_minions = 6;
            self.idle = 0.5;
            self.serve_mib = 1;
            self.pillar_minions = 5;
            self.orchestrate_minions = 3;
            self.highstate_swarm = 5;
        }
        self
    }
}

fn log(msg: impl AsRef<str>) {
    eprintln!(
        "[brine-bench {}] {}",
        chrono::Local::now().format("%H:%M:%S"),
        msg.as_ref()
    );
}

fn main() {
    let cli = Cli::parse().smoke_sized();
    match run(&cli) {
        Ok(path) => println!("report: {}", path.display()),
        Err(e) => {
            eprintln!("brine-bench: {e:#}");
            std::process::exit(1);
        }
    }
}

/// Raise this process's open-file limit (inherited by the daemons and the swarm): thousands
/// of minions mean tens of thousands of sockets.
fn raise_nofile() -> String {
    let pid = std::process::id().to_string();
    for limit in ["1048576", "262144", "65536"] {
        let ok = Command::new("prlimit")
            .args(["--pid", &pid, &format!("--nofile={limit}:{limit}")])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return limit.to_string();
        }
    }
    nofile_limit().map_or_else(
        || "unknown".into(),
        |n| format!("{n} (could not be raised)"),
    )
}

/// Minions one brine-swarm process can hold under an open-files limit of `nofile` (two
/// connections each, and some room for everything else).
fn per_swarm_process(nofile: u64) -> usize {
    usize::try_from(nofile.saturating_sub(500) / 2)
        .unwrap_or(usize::MAX)
        .clamp(100, 1_000_000)
}

/// The soft open-files limit of this process, from /proc/self/limits.
fn nofile_limit() -> Option<u64> {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse().ok())
        })
}

fn command_line() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let (Some(first), Ok(cwd)) = (args.first_mut(), std::env::current_dir()) {
        if let Ok(rel) = Path::new(first.as_str()).strip_prefix(&cwd) {
            *first = rel.display().to_string();
        }
    }
    args.join(" ")
}

fn salt_version(venv: &Path) -> String {
    Command::new(venv.join("bin/python"))
        .args(["-c", "import salt.version, cherrypy; print(salt.version.__version__, 'cherrypy', cherrypy.__version__)"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn brine_version() -> String {
    let rev = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| !o.stdout.is_empty());
    let profile = std::env::current_exe()
        .ok()
        .and_then(|p| {
            p.parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().to_string())
        })
        .unwrap_or_default();
    format!(
        "{} {}{}, {profile} build",
        env!("CARGO_PKG_VERSION"),
        rev.map(|r| format!("commit {r}"))
            .unwrap_or_else(|| "no git".into()),
        if dirty { " + uncommitted changes" } else { "" }
    )
}

fn run(cli: &Cli) -> anyhow::Result<PathBuf> {
    anyhow::ensure!(cli.runs >= 1, "--runs must be at least 1");
    let t_start = Instant::now();
    let out = match (&cli.out, cli.smoke) {
        (Some(p), _) => p.clone(),
        (None, false) => PathBuf::from("BENCHMARKS.md"),
        (None, true) => {
            let d = std::env::temp_dir().join(format!("brine-bench-smoke-{}", std::process::id()));
            std::fs::create_dir_all(&d)?;
            d.join("BENCHMARKS.md")
        }
    };
    let nofile = raise_nofile();
    let load_start = report::loadavg();
    let mut kinds = vec![Kind::Brine];
    if let Some(v) = &cli.salt_venv {
        anyhow::ensure!(
            v.join("bin/salt-master").exists() && v.join("bin/salt-api").exists(),
            "{} has no bin/salt-master and bin/salt-api",
            v.display()
        );
        kinds.push(Kind::Salt);
    }
    let mut rep = Report::new(kinds.clone());
    rep.smoke = cli.smoke;
    rep.runs = cli.runs;
    rep.seconds = cli.seconds;
    rep.clients = cli.clients;
    rep.command = command_line();
    rep.started = chrono::Local::now()
        .format("%Y-%m-%d %H:%M:%S %z")
        .to_string();
    rep.machine = report::machine();
    rep.machine.push(("Brine".into(), brine_version()));
    if let Some(v) = &cli.salt_venv {
        rep.machine.push((
            "Salt".into(),
            format!("{} (venv {})", salt_version(v), v.display()),
        ));
    }
    rep.machine.push(("Open files limit".into(), nofile));
    if cli.salt_venv.is_none() {
        rep.note(
            "general",
            "No --salt-venv: only Brine was measured (no ratios).",
        );
    }
    let root = tempfile::Builder::new().prefix("brine-bench-").tempdir()?;
    log(format!("work directory {}", root.path().display()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    if cli.wants("baselines") || cli.wants("W1") || cli.only.is_empty() {
        baselines(cli, &rt, &mut rep);
    }
    for kind in &kinds {
        log(format!("=== {} ===", kind.name()));
        if let Err(e) = system(cli, *kind, root.path(), &rt, &mut rep) {
            log(format!("{}: {e:#}", kind.name()));
            rep.note(
                "general",
                format!("{}: the run stopped early: {e:#}", kind.name()),
            );
        }
    }
    rep.took = t_start.elapsed().as_secs_f64();
    rep.machine.push((
        "Load average (1/5/15 min) at start → end".into(),
        format!("{load_start} → {}", report::loadavg()),
    ));
    let svg_path = out.with_file_name(format!(
        "{}-fanout.svg",
        out.file_stem()
            .map_or("BENCHMARKS".into(), |s| s.to_string_lossy().to_string())
    ));
    let svg_name = match report::fanout_svg(&rep.fanout) {
        Some(svg) => {
            std::fs::write(&svg_path, svg)?;
            svg_path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
        }
        None => None,
    };
    std::fs::write(&out, rep.markdown(svg_name.as_deref(), &cli.swarm))?;
    if cli.keep {
        let kept = root.keep();
        log(format!(
            "daemons' directories and logs kept in {}",
            kept.display()
        ));
    }
    Ok(out)
}

fn baselines(cli: &Cli, rt: &tokio::runtime::Runtime, rep: &mut Report) {
    log("baselines");
    let mut p50 = vec![];
    let mut p99 = vec![];
    let mut rate = vec![];
    let mut zp50 = vec![];
    let mut zp99 = vec![];
    let mut zrate = vec![];
    let mut sign_openssl = vec![];
    let mut sign_rsa = vec![];
    for _ in 0..cli.runs {
        match baseline::rsa_signing(cli.seconds) {
            Ok((fast, pure)) => {
                sign_openssl.push(fast);
                sign_rsa.push(pure);
            }
            Err(e) => rep.note("Baselines", format!("RSA signing failed: {e:#}")),
        }
        match rt.block_on(baseline::axum_hello(cli.seconds, cli.clients)) {
            Ok((l, r)) => {
                p50.push(l.p50_ms);
                p99.push(l.p99_ms);
                rate.push(r.per_second);
            }
            Err(e) => rep.note("Baselines", format!("axum hello-world failed: {e:#}")),
        }
        match baseline::zmq_round_trip(cli.seconds) {
            Ok(z) => {
                zp50.push(z.p50_us);
                zp99.push(z.p99_us);
                zrate.push(z.per_second);
            }
            Err(e) => rep.note("Baselines", format!("ZeroMQ round trip failed: {e:#}")),
        }
    }
    let c = cli.clients;
    rep.baselines
        .push(("axum hello-world, 1 client: p50 latency".into(), "ms", p50));
    rep.baselines
        .push(("axum hello-world, 1 client: p99 latency".into(), "ms", p99));
    rep.baselines.push((
        format!("axum hello-world, {c} clients: requests/s"),
        "req/s",
        rate,
    ));
    rep.baselines.push((
        "RSA-2048 publish signature, OpenSSL (Brine's master)".into(),
        "ms",
        sign_openssl,
    ));
    rep.baselines.push((
        "RSA-2048 publish signature, `rsa` crate".into(),
        "ms",
        sign_rsa,
    ));
    rep.baselines
        .push(("ZeroMQ REQ/REP round trip: p50".into(), "µs", zp50));
    rep.baselines
        .push(("ZeroMQ REQ/REP round trip: p99".into(), "µs", zp99));
    rep.baselines.push((
        "ZeroMQ REQ/REP, 1 client: round trips/s".into(),
        "1/s",
        zrate,
    ));
}

/// Record a failed figure and go on.
fn failed(
    rep: &mut Report,
    section: &'static str,
    name: &str,
    unit: &'static str,
    better: Better,
    kind: Kind,
    e: &anyhow::Error,
) {
    log(format!("{} {section} {name}: {e:#}", kind.name()));
    rep.fail(section, name, unit, better, kind, &format!("{e:#}"));
}

/// Every workload against one implementation.
fn system(
    cli: &Cli,
    kind: Kind,
    root: &Path,
    rt: &tokio::runtime::Runtime,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let mut st = Stack::create(kind, root, cli.salt_venv.as_deref())?;
    let secs = cli.seconds;
    let clients = cli.clients;

    // W7: starts (one fresh, then restarts) and idle memory after each.
    log("W7 footprint: starts and idle memory");
    for i in 0..=cli.runs {
        if i > 0 && !cli.wants("W7") {
            break;
        }
        let t = st.start()?;
        let name = if i == 0 {
            "start to first test.ping through the API (fresh install)"
        } else {
            "start to first test.ping through the API (restart, keys in place)"
        };
        rep.add("W7", name, "s", Better::Lower, kind, t);
        log(format!("  start {i}: first ping after {t:.2} s"));
        if i == 0 {
            continue;
        }
        std::thread::sleep(Duration::from_secs_f64(cli.idle));
        let parts = [
            ("master", st.master_pid()),
            ("salt-api", st.api_pid()),
            ("minion (m1)", st.minion_pid()),
        ];
        for (what, pid) in parts {
            if let Some(pid) = pid {
                rep.add(
                    "W7",
                    &format!("{what} idle RSS"),
                    "MiB",
                    Better::Lower,
                    kind,
                    procs::rss_mib(pid),
                );
                rep.add(
                    "W7",
                    &format!("{what} idle PSS"),
                    "MiB",
                    Better::Lower,
                    kind,
                    procs::pss_mib(pid),
                );
            }
        }
        if let Some(pid) = st.master_pid() {
            rep.add(
                "W7",
                "master processes",
                "count",
                Better::Lower,
                kind,
                procs::tree(pid).len() as f64,
            );
        }
        if i < cli.runs {
            st.stop();
        }
    }
    if !st.running() {
        st.start()?;
    }

    let http = load::client(Duration::from_secs(60));
    let base = st.url("");
    let tok = rt.block_on(load::login(&http, &base))?;
    let ping_m1 = load::post_json(
        &http,
        st.url("/"),
        Some(tok.clone()),
        json!({"client": "local", "tgt": "m1", "fun": "test.ping"}),
        Some(load::pinged_m1),
    );
    let async_m1 = load::post_json(
        &http,
        st.url("/"),
        Some(tok.clone()),
        json!({"client": "local_async", "tgt": "m1", "fun": "test.ping"}),
        Some(load::got_jid),
    );

    if cli.wants("W1") {
        log("W1 latency, one client");
        for _ in 0..cli.runs {
            match rt.block_on(load::latency(&ping_m1, secs, 30)) {
                Ok(l) => {
                    rep.add("W1", "p50 latency", "ms", Better::Lower, kind, l.p50_ms);
                    rep.add("W1", "p99 latency", "ms", Better::Lower, kind, l.p99_ms);
                    rep.add(
                        "W1",
                        "requests per run",
                        "count",
                        Better::Higher,
                        kind,
                        l.samples as f64,
                    );
                    if l.failures > 0 {
                        rep.fail(
                            "W1",
                            "p50 latency",
                            "ms",
                            Better::Lower,
                            kind,
                            &format!("{} failed requests", l.failures),
                        );
                    }
                }
                Err(e) => failed(rep, "W1", "p50 latency", "ms", Better::Lower, kind, &e),
            }
        }
    }

    let rate_row = |rep: &mut Report, section: &'static str, name: &str, req: &load::Req| {
        for _ in 0..cli.runs {
            let r = rt.block_on(load::throughput(req, clients, secs));
            if r.per_second > 0.0 {
                rep.add(section, name, "req/s", Better::Higher, kind, r.per_second);
            }
            if r.failures > 0 {
                rep.fail(
                    section,
                    name,
                    "req/s",
                    Better::Higher,
                    kind,
                    &format!("{} failed requests in a run", r.failures),
                );
            }
        }
    };

    if cli.wants("W2") {
        log("W2 throughput");
        rate_row(
            rep,
            "W2",
            &format!("requests/s ({clients} clients)"),
            &ping_m1,
        );
    }
    if cli.wants("Login") {
        log("POST /login throughput");
        let login = load::post_json(
            &http,
            st.url("/login"),
            None,
            json!({"username": stack::USER, "password": "x", "eauth": "auto"}),
            Some(load::got_token),
        );
        rate_row(
            rep,
            "Login",
            &format!("POST /login per second ({clients} clients)"),
            &login,
        );
    }
    if cli.wants("W3") {
        log("W3 submissions");
        let minions = load::post_json(
            &http,
            st.url("/minions"),
            Some(tok.clone()),
            json!({"tgt": "m1", "fun": "test.ping"}),
            Some(load::got_jid),
        );
        for (how, req) in [("local_async", &async_m1), ("POST /minions", &minions)] {
            for _ in 0..cli.runs {
                let before = jobs::stored_returns(&st, kind);
                let r = rt.block_on(load::throughput(req, clients, secs));
                let name = format!("{how} submissions/s ({clients} clients)");
                if r.per_second > 0.0 {
                    rep.add("W3", &name, "req/s", Better::Higher, kind, r.per_second);
                }
                if r.failures > 0 {
                    let why = format!("{} failed requests in a run", r.failures);
                    rep.fail("W3", &name, "req/s", Better::Higher, kind, &why);
                }
                // Let the minion work through what was submitted: until every return is in.
                let Ok(before) = before else { continue };
                let drained = jobs::returns_drained(&st, kind, before + r.done, 120.0);
                match drained {
                    Ok((at_end, after)) if r.done > 0 => {
                        let share = 100.0 * at_end.saturating_sub(before) as f64 / r.done as f64;
                        let what = format!("{how}: returns stored by the end of the submissions");
                        rep.add("W3", &what, "%", Better::Higher, kind, share.min(100.0));
                        let what = format!(
                            "{how}: seconds after the submissions until every return is stored"
                        );
                        rep.add("W3", &what, "s", Better::Lower, kind, after);
                        // Jobs finished (returns stored) per second, from the first submission
                        // to the last return.
                        let window = r.done as f64 / r.per_second;
                        let what =
                            format!("{how}: jobs finished per second (submissions and returns)");
                        let rate = r.done as f64 / (window + after);
                        rep.add("W3", &what, "jobs/s", Better::Higher, kind, rate);
                    }
                    Ok(_) => {}
                    Err(e) => log(format!("  W3 {how}: returns not counted: {e}")),
                }
            }
        }
    }
    if cli.wants("W5") {
        log("W5 events under W3 load");
        let events = st.url("/events");
        for readers in [1usize, 10] {
            for _ in 0..cli.runs {
                let r = rt.block_on(load::events_under_load(
                    &events, &tok, readers, &async_m1, clients, secs,
                ));
                match r {
                    Ok(r) => {
                        let total: f64 = r.per_reader.iter().sum();
                        if readers == 1 {
                            rep.add(
                                "W5",
                                "1 client: events/s received",
                                "events/s",
                                Better::Higher,
                                kind,
                                total,
                            );
                        } else {
                            rep.add(
                                "W5",
                                "10 clients: events/s per client (mean)",
                                "events/s",
                                Better::Higher,
                                kind,
                                total / readers as f64,
                            );
                            rep.add(
                                "W5",
                                "10 clients: total events/s received",
                                "events/s",
                                Better::Higher,
                                kind,
                                total,
                            );
                        }
                        rep.add(
                            "W5",
                            &format!(
                                "local_async submissions/s meanwhile ({readers} reader{})",
                                if readers == 1 { "" } else { "s" }
                            ),
                            "req/s",
                            Better::Higher,
                            kind,
                            r.load.per_second,
                        );
                    }
                    Err(e) => failed(
                        rep,
                        "W5",
                        &format!("{readers} client(s): events/s"),
                        "events/s",
                        Better::Higher,
                        kind,
                        &e,
                    ),
                }
                std::thread::sleep(Duration::from_secs_f64(secs.min(5.0)));
            }
        }
    }

    if cli.wants("W6") {
        for &n in &cli.stored {
            if let Err(e) = job_store(cli, kind, &mut st, rt, rep, n) {
                failed(
                    rep,
                    "W6",
                    &format!("runner jobs.list_jobs, {n} stored"),
                    "s",
                    Better::Lower,
                    kind,
                    &e,
                );
            }
        }
    }

    if cli.wants("W13") {
        let opts = pg::PgOpts {
            kind,
            stored: cli.pg_stored,
            minions: cli.pg_minions,
            runs: cli.runs,
            seconds: cli.seconds,
            swarm: swarm_opts(cli),
        };
        if let Err(e) = pg::measure(&mut st, &opts, rt, rep) {
            let name = format!("GET /jobs/<jid> p50, {} stored", cli.pg_stored);
            failed(rep, "W13", &name, "ms", Better::Lower, kind, &e);
        }
    }

    if cli.wants("W14") && cli.split_minions > 0 {
        let n = cli.split_minions;
        let name = format!("{n} minions over two masters: fan-out time");
        match (kind, swarm_opts(cli)) {
            (Kind::Salt, _) => rep.note(
                "W14",
                "Salt: not measured: Salt reaches a fleet split over masters through syndics \
                 (a master of masters), which this bench does not set up.",
            ),
            (Kind::Brine, None) => rep.note(
                "W14",
                "Brine: not measured: the brine-swarm binary is not built.",
            ),
            (Kind::Brine, Some(sw)) => {
                if let Err(e) = split::measure(&mut st, &sw, n, cli.runs, rep) {
                    failed(rep, "W14", &name, "s", Better::Lower, kind, &e);
                }
            }
        }
    }

    config_management(cli, kind, &mut st, rep);

    if cli.wants("W4") {
        fan_out(cli, kind, &mut st, rep)?;
    }
    st.stop();
    Ok(())
}

/// How W4, W8 and W10 run brine-swarm; `None` when it is not built.
fn swarm_opts(cli: &Cli) -> Option<swarm::SwarmOpts> {
    let binary = procs::sibling("brine-swarm")?;
    Some(swarm::SwarmOpts {
        binary,
        keys_dir: cli.swarm_keys_dir.clone(),
        key_bits: cli.swarm_key_bits,
        connect_rate: cli.swarm_rate,
        per_process: per_swarm_process(nofile_limit().unwrap_or(u64::MAX)),
        limit: Duration::from_secs(cli.swarm_limit),
    })
}

/// W8 to W12: the file server, highstate, pillar, the minions' state runs, orchestration.
fn config_management(cli: &Cli, kind: Kind, st: &mut Stack, rep: &mut Report) {
    let opts = swarm_opts(cli);
    if cli.wants("W8") {
        log(format!("W8 _serve_file: {} MiB", cli.serve_mib));
        let r = match &opts {
            Some(o) => cm::serve_file(st, o, cli.serve_mib, cli.runs, kind, rep),
            None => Err(anyhow::anyhow!("the brine-swarm binary is not built")),
        };
        if let Err(e) = r {
            let name = format!("{} MiB file: throughput", cli.serve_mib);
            failed(rep, "W8", &name, "MB/s", Better::Higher, kind, &e);
        }
    }
    if cli.wants("W9") {
        match (&cli.salt_venv, cli.highstate_minions) {
            (Some(venv), n) if n > 0 => {
                log(format!("W9 highstate: {n} real minions"));
                if let Err(e) = cm::highstate(st, venv, n, cli.runs, kind, rep) {
                    let name = "first highstate (everything changes): wall time";
                    failed(rep, "W9", name, "s", Better::Lower, kind, &e);
                }
            }
            _ => rep.note(
                "W9",
                format!(
                    "{}: not measured: the real minions come from --salt-venv.",
                    kind.name()
                ),
            ),
        }
        let n = cli.highstate_swarm;
        if n > 0 {
            log(format!("W9 highstate requests: {n} swarm minions"));
            let r = match &opts {
                Some(o) => cm::swarm_highstate(st, o, n, cli.runs, kind, rep),
                None => Err(anyhow::anyhow!("the brine-swarm binary is not built")),
            };
            if let Err(e) = r {
                let name = format!("{n} swarm minions, a highstate's requests at once: wall time");
                failed(rep, "W9", &name, "s", Better::Lower, kind, &e);
            }
        }
    }
    if cli.wants("W11") && kind == Kind::Brine {
        match &cli.salt_venv {
            Some(venv) => {
                log(format!(
                    "W11 state runs: Brine's and Salt's minions, then {} of each",
                    cli.state_minions
                ));
                if let Err(e) = minions::measure(st, venv, cli.state_minions, rep) {
                    let name = "one minion, first run (everything changes): wall time";
                    failed(rep, "W11", name, "s", Better::Lower, kind, &e);
                }
            }
            None => rep.note("W11", "not measured: salt-minion comes from --salt-venv."),
        }
    }
    if cli.wants("W12") {
        let n = cli.orchestrate_minions;
        log(format!("W12 orchestration: {n} swarm minions"));
        let r = match &opts {
            Some(o) => cm::orchestrate(st, o, n, cli.runs, kind, rep),
            None => Err(anyhow::anyhow!("the brine-swarm binary is not built")),
        };
        if let Err(e) = r {
            let name =
                format!("orchestration (2 jobs to {n} minions, a runner, a wheel): wall time");
            failed(rep, "W12", &name, "s", Better::Lower, kind, &e);
        }
    }
    if cli.wants("W10") {
        let n = cli.pillar_minions;
        log(format!("W10 pillar: {n} minions refreshing"));
        let r = match &opts {
            Some(o) => cm::pillar_refresh(st, o, n, cli.runs, kind, rep),
            None => Err(anyhow::anyhow!("the brine-swarm binary is not built")),
        };
        if let Err(e) = r {
            let name = format!("{n} minions: pillar p50");
            failed(rep, "W10", &name, "ms", Better::Lower, kind, &e);
        }
    }
}

/// Remove every stored job (master stopped).
fn clear_job_store(st: &Stack) -> anyhow::Result<()> {
    let c = st.cachedir();
    for f in ["jobs.sqlite", "jobs.sqlite-wal", "jobs.sqlite-shm"] {
        let p = c.join(f);
        if p.exists() {
            std::fs::remove_file(p)?;
        }
    }
    if c.join("jobs").is_dir() {
        std::fs::remove_dir_all(c.join("jobs"))?;
    }
    Ok(())
}

fn job_store(
    cli: &Cli,
    kind: Kind,
    st: &mut Stack,
    rt: &tokio::runtime::Runtime,
    rep: &mut Report,
    n: usize,
) -> anyhow::Result<()> {
    log(format!("W6 job store: filling {n} jobs"));
    st.stop();
    clear_job_store(st)?;
    let jids = jobs::synthetic_jids(n);
    let t = Instant::now();
    match kind {
        Kind::Brine => jobs::fill_brine(&st.cachedir(), &jids)?,
        Kind::Salt => jobs::fill_salt(
            cli.salt_venv
                .as_deref()
                .ok_or_else(|| anyhow::anyhow!("no venv"))?,
            &st.master_conf_dir().join("master"),
            &st.cachedir(),
            &jids,
        )?,
    }
    log(format!(
        "  filled in {:.1} s; starting",
        t.elapsed().as_secs_f64()
    ));
    st.start()?;
    let http = load::client(Duration::from_secs(cli.swarm_limit.max(60) + 300));
    let tok = rt.block_on(load::login(&http, &st.url("")))?;
    let jid = &jids[jids.len() / 2];
    let get_job = load::get(
        &http,
        st.url(&format!("/jobs/{jid}")),
        Some(tok.clone()),
        Some(|v: &serde_json::Value| {
            v["info"][0]["Result"]["m1"].is_object() || v["return"][0]["m1"] == json!(true)
        }),
    );
    let list = st.url("/");
    for _ in 0..cli.runs {
        match rt.block_on(load::latency(&get_job, (cli.seconds / 2.0).min(3.0), 5)) {
            Ok(l) => rep.add(
                "W6",
                &format!("GET /jobs/<jid> p50, {n} stored"),
                "ms",
                Better::Lower,
                kind,
                l.p50_ms,
            ),
            Err(e) => failed(
                rep,
                "W6",
                &format!("GET /jobs/<jid> p50, {n} stored"),
                "ms",
                Better::Lower,
                kind,
                &e,
            ),
        }
    }
    let name = format!("runner jobs.list_jobs, {n} stored");
    let body = json!({"client": "runner", "fun": "jobs.list_jobs"});
    let fail = |rep: &mut Report, why: &str| rep.fail("W6", &name, "s", Better::Lower, kind, why);
    for _ in 0..cli.runs {
        let secs = match rt.block_on(load::listed(&http, &list, &tok, &body)) {
            Ok((secs, listed)) if listed >= n => {
                rep.add("W6", &name, "s", Better::Lower, kind, secs);
                secs
            }
            Ok((secs, listed)) => {
                fail(rep, &format!("listed {listed} of {n} jobs"));
                secs
            }
            Err(e) => {
                failed(rep, "W6", &name, "s", Better::Lower, kind, &e);
                break;
            }
        };
        if secs > cli.swarm_limit as f64 {
            fail(rep, "one call took over the time limit: fewer runs");
            break;
        }
    }
    Ok(())
}

fn fan_out(cli: &Cli, kind: Kind, st: &mut Stack, rep: &mut Report) -> anyhow::Result<()> {
    let Some(opts) = swarm_opts(cli) else {
        rep.note(
            "W4",
            format!(
                "{}: not measured: the brine-swarm binary is not built next to brine-bench \
                 (cargo build --release --workspace --bins).",
                kind.name()
            ),
        );
        return Ok(());
    };
    st.stop();
    clear_job_store(st)?;
    let nofile = nofile_limit().unwrap_or(u64::MAX);
    let mut results = vec![];
    for &n in &cli.swarm {
        // Each minion holds one connection to each master port. Both masters keep the two
        // ports in different processes, so one process needs about one open file per minion;
        // beyond the open-files limit a size fails for that reason alone.
        let files = n as u64 + 500;
        if files > nofile {
            rep.note(
                "W4",
                format!(
                    "{}: {n} minions not attempted: a master process needs about {files} open \
                     files (one connection per minion on each port) and this machine's \
                     open-files limit is {nofile} and cannot be raised here.",
                    kind.name()
                ),
            );
            break;
        }
        log(format!("W4 fan-out: {n} minions"));
        let r = swarm::measure(st, &opts, n, cli.runs)?;
        for f in &r.runs {
            if f.returns >= n {
                rep.add(
                    "W4",
                    &format!("{n} minions: fan-out time"),
                    "s",
                    Better::Lower,
                    kind,
                    f.seconds,
                );
                rep.add(
                    "W4",
                    &format!("{n} minions: master CPU during fan-out"),
                    "CPU s",
                    Better::Lower,
                    kind,
                    f.master_cpu,
                );
                rep.add(
                    "W4",
                    &format!("{n} minions: salt-api CPU during fan-out"),
                    "CPU s",
                    Better::Lower,
                    kind,
                    f.api_cpu,
                );
            }
        }
        if let Some(s) = r.sign_in {
            rep.add(
                "W4",
                &format!("{n} minions: all signed in after"),
                "s",
                Better::Lower,
                kind,
                s,
            );
        }
        rep.add(
            "W4",
            &format!("{n} minions: master peak RSS"),
            "MiB",
            Better::Lower,
            kind,
            r.peak_rss,
        );
        rep.add(
            "W4",
            &format!("{n} minions: master peak PSS"),
            "MiB",
            Better::Lower,
            kind,
            r.peak_pss,
        );
        if let Some(f) = &r.failure {
            rep.fail(
                "W4",
                &format!("{n} minions: fan-out time"),
                "s",
                Better::Lower,
                kind,
                f,
            );
        }
        log(format!(
            "  {n}: sign-in {:?} s, runs {:?}, peak RSS {:.0} MiB, failure {:?}",
            r.sign_in,
            r.runs
                .iter()
                .map(|f| (f.seconds, f.returns))
                .collect::<Vec<_>>(),
            r.peak_rss,
            r.failure
        ));
        let stop = !r.ok() || r.too_slow;
        results.push(r);
        if stop {
            break;
        }
    }
    rep.fanout.insert(kind, results);
    st.stop();
    Ok(())
}
