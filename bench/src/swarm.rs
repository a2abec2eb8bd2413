//! W4: fan-out. `brine-swarm` (N simulated minions per process; as many processes as the
//! open-files limit requires) signs in to a master; then
//! one `local` test.ping to all of them through the API, timed from submission to the answer
//! holding every return, with the master's CPU seconds and peak RSS (whole process tree).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::procs::{cpu_seconds, spawn_logged, RssSampler};
use crate::stack::Stack;

/// Id prefix of the swarm's minions (their accepted keys are removed between sizes).
pub(crate) const PREFIX: &str = "w4-";

#[derive(Debug, Clone)]
pub(crate) struct SwarmOpts {
    pub binary: PathBuf,
    pub keys_dir: Option<PathBuf>,
    pub key_bits: usize,
    pub connect_rate: f64,
    /// Most minions one brine-swarm process simulates (two open files each); larger sizes
    /// are split over several processes with consecutive id ranges.
    pub per_process: usize,
    /// A size that takes longer than this (sign-in or one fan-out) is the last one tried.
    pub limit: Duration,
}

/// One fan-out measurement.
#[derive(Debug, Clone)]
pub(crate) struct FanOut {
    pub seconds: f64,
    pub returns: usize,
    pub master_cpu: f64,
    pub api_cpu: f64,
}

/// What happened at one size for one implementation.
#[derive(Debug, Clone)]
pub(crate) struct SizeResult {
    pub minions: usize,
    /// Seconds until every swarm minion was signed in and subscribed.
    pub sign_in: Option<f64>,
    pub runs: Vec<FanOut>,
    /// Largest sampled RSS of the master's process tree, sign-in and fan-outs included, MiB.
    pub peak_rss: f64,
    /// The same for PSS (shared pages split between the processes sharing them).
    pub peak_pss: f64,
    /// Why this size did not complete, if it did not.
    pub failure: Option<String>,
    /// Completed but slower than the limit: larger sizes are not tried.
    pub too_slow: bool,
}

impl SizeResult {
    pub(crate) fn ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// The "ready" count of the newest progress line in a swarm log
/// (`[  1.0s] launched 5/5 signed_in 5 ready 5 sub 5 ...`).
pub(crate) fn ready_count(log: &str) -> Option<usize> {
    log.lines().rev().find_map(|l| {
        let mut it = l.split_whitespace();
        while let Some(w) = it.next() {
            if w == "ready" {
                return it.next().and_then(|n| n.parse().ok());
            }
        }
        None
    })
}

/// `all_ready_secs` of the JSON summary brine-swarm prints when it stops.
pub(crate) fn summary_ready_secs(log: &str) -> Option<f64> {
    log.lines()
        .rev()
        .filter(|l| l.starts_with('{'))
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["all_ready_secs"].as_f64())
}

/// Remove the swarm's accepted keys so that the next size starts from nothing (master stopped).
pub(crate) fn forget_swarm_keys(accepted: &Path) -> anyhow::Result<()> {
    if let Ok(rd) = fs::read_dir(accepted) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(PREFIX) {
                fs::remove_file(e.path())?;
            }
        }
    }
    Ok(())
}

/// Measure one size: restart the stack clean, sign the swarm in, fan out `runs` times.
pub(crate) fn measure(
    st: &mut Stack,
    opts: &SwarmOpts,
    minions: usize,
    runs: usize,
) -> anyhow::Result<SizeResult> {
    st.stop();
    forget_swarm_keys(&st.accepted_dir())?;
    st.start()?;
    let master = st
        .master_pid()
        .ok_or_else(|| anyhow::anyhow!("no master"))?;
    let api = st.api_pid().ok_or_else(|| anyhow::anyhow!("no api"))?;
    let mut res = SizeResult {
        minions,
        sign_in: None,
        runs: vec![],
        peak_rss: 0.0,
        peak_pss: 0.0,
        failure: None,
        too_slow: false,
    };
    let sampler = RssSampler::start(master, Duration::from_millis(100));
    let procs = minions.div_ceil(opts.per_process.max(1)).max(1);
    let mut swarms = vec![];
    let mut logs = vec![];
    for i in 0..procs {
        let start = minions * i / procs;
        let count = minions * (i + 1) / procs - start;
        let log = if procs == 1 {
            st.dir.join(format!("swarm-{minions}.log"))
        } else {
            st.dir.join(format!("swarm-{minions}-{i}.log"))
        };
        let _ = fs::remove_file(&log);
        let mut args: Vec<String> = vec![
            "--master".into(),
            "127.0.0.1".into(),
            "--master-port".into(),
            st.ret_port.to_string(),
            "--count".into(),
            count.to_string(),
            "--start-index".into(),
            start.to_string(),
            "--prefix".into(),
            PREFIX.into(),
            "--key-bits".into(),
            opts.key_bits.to_string(),
            "--connect-rate".into(),
            (opts.connect_rate / procs as f64).to_string(),
            "--auto-accept-wait".into(),
            "1".into(),
            "--progress-secs".into(),
            "1".into(),
        ];
        if let Some(k) = &opts.keys_dir {
            args.push("--keys-dir".into());
            args.push(k.to_string_lossy().to_string());
        }
        swarms.push(spawn_logged("brine-swarm", &opts.binary, &args, &log)?);
        logs.push(log);
    }
    let logs_shown = || {
        logs.iter()
            .map(|l| l.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let t0 = Instant::now();
    // Key generation (first use of a key cache) is not the master's time: the clock for the
    // sign-in limit starts when the first minion is launched.
    let mut launched_at: Option<Instant> = None;
    loop {
        if let Some(status) = swarms.iter_mut().find_map(|s| s.exited()) {
            res.failure = Some(format!(
                "brine-swarm exited ({status}); logs {}",
                logs_shown()
            ));
            break;
        }
        let texts: Vec<String> = logs
            .iter()
            .map(|l| fs::read_to_string(l).unwrap_or_default())
            .collect();
        let ready: usize = texts.iter().map(|t| ready_count(t).unwrap_or(0)).sum();
        if launched_at.is_none() && texts.iter().any(|t| t.contains("launched")) {
            launched_at = Some(Instant::now());
        }
        if ready >= minions {
            res.sign_in = Some(launched_at.unwrap_or(t0).elapsed().as_secs_f64());
            break;
        }
        let budget = opts.limit + Duration::from_secs_f64(minions as f64 / opts.connect_rate);
        if launched_at.is_some_and(|t| t.elapsed() > budget) {
            res.failure = Some(format!(
                "only {ready} of {minions} minions signed in after {:.0} s",
                launched_at.map_or(0.0, |t| t.elapsed().as_secs_f64())
            ));
            res.too_slow = true;
            break;
        }
        if launched_at.is_none() && t0.elapsed() > Duration::from_secs(3600) {
            res.failure = Some("swarm keys not ready after an hour".into());
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    if res.failure.is_none() {
        // Let the last subscriptions settle.
        std::thread::sleep(Duration::from_secs(2));
        let http = reqwest::blocking::Client::builder()
            .timeout(opts.limit + Duration::from_secs(120))
            .build()?;
        let tok = crate::stack::login_blocking(&http, &st.url("/login"))
            .map_err(|e| anyhow::anyhow!("login: {e}"))?;
        for _ in 0..runs {
            let (c0, a0) = (cpu_seconds(master), cpu_seconds(api));
            let t = Instant::now();
            let answer = http
                .post(st.url("/"))
                .header("X-Auth-Token", &tok)
                .header("Accept", "application/json")
                .json(
                    &json!({"client": "local", "tgt": format!("{PREFIX}*"), "fun": "test.ping",
                              "timeout": opts.limit.as_secs()}),
                )
                .send()
                .and_then(|r| r.json::<Value>());
            let seconds = t.elapsed().as_secs_f64();
            let (c1, a1) = (cpu_seconds(master), cpu_seconds(api));
            let returns = match answer {
                Ok(v) => v["return"][0]
                    .as_object()
                    .map_or(0, |m| m.values().filter(|x| **x == json!(true)).count()),
                Err(e) => {
                    res.failure = Some(format!(
                        "the fan-out request failed after {seconds:.1} s: {e}"
                    ));
                    break;
                }
            };
            res.runs.push(FanOut {
                seconds,
                returns,
                master_cpu: c1 - c0,
                api_cpu: a1 - a0,
            });
            if returns < minions {
                res.failure = Some(format!(
                    "{returns} of {minions} returns after {seconds:.1} s"
                ));
                break;
            }
            if seconds > opts.limit.as_secs_f64() {
                res.too_slow = true;
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    (res.peak_rss, res.peak_pss) = sampler.stop();
    // Stopped, each swarm process prints its summary: its own clock of "everyone signed in
    // and ready"; the slowest process is the swarm's figure.
    drop(swarms);
    if res.sign_in.is_some() {
        let secs: Vec<f64> = logs
            .iter()
            .filter_map(|l| summary_ready_secs(&fs::read_to_string(l).unwrap_or_default()))
            .collect();
        if secs.len() == logs.len() {
            res.sign_in = secs.into_iter().reduce(f64::max);
        }
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_count_reads_the_newest_progress_line() {
        let log = "generating keys\n\
            [    1.0s] launched 5/10 signed_in 3 ready 2 sub 2 pending 0\n\
            [    2.0s] launched 10/10 signed_in 10 ready 9 sub 9 pending 0\n";
        assert_eq!(ready_count(log), Some(9));
        assert_eq!(ready_count("nothing yet"), None);
        let end = format!("{log}{{\"minions\":10,\"all_ready_secs\":1.5}}\n");
        assert_eq!(summary_ready_secs(&end), Some(1.5));
        assert_eq!(summary_ready_secs(log), None);
    }

    #[test]
    fn only_swarm_keys_are_forgotten() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("m1"), "k").unwrap();
        fs::write(d.path().join(format!("{PREFIX}7")), "k").unwrap();
        forget_swarm_keys(d.path()).unwrap();
        assert!(d.path().join("m1").exists());
        assert!(!d.path().join(format!("{PREFIX}7")).exists());
        forget_swarm_keys(&d.path().join("absent")).unwrap();
    }
}
