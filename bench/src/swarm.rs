//! W4: fan-out. `brine-swarm` (N simulated minions per process; as many processes as the
//! open-files limit requires) signs in to a master; then
//! one `local` test.ping to all of them through the API, timed from submission to the answer
//! holding every return, with the master's CPU seconds and peak RSS (whole process tree).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::procs::{cpu_seconds, spawn_logged, Proc, RssSampler};
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

/// The JSON summary brine-swarm prints when it stops.
pub(crate) fn summary(log: &str) -> Option<Value> {
    log.lines()
        .rev()
        .filter(|l| l.starts_with('{'))
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
}

/// Remove the accepted keys of the swarm minions named `prefix<n>` so that the next size
/// starts from nothing (master stopped).
pub(crate) fn forget_swarm_keys(accepted: &Path, prefix: &str) -> anyhow::Result<()> {
    if let Ok(rd) = fs::read_dir(accepted) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(prefix) {
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
    forget_swarm_keys(&st.accepted_dir(), PREFIX)?;
    st.start()?;
    let master = st
        .master_pid()
        .ok_or_else(|| anyhow::anyhow!("no master"))?;
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
    let mut swarm = Launched::start(st, opts, PREFIX, minions, &[])?;
    match swarm.wait_ready(opts) {
        Ok(secs) => res.sign_in = Some(secs),
        Err(NotReady { why, too_slow }) => {
            res.failure = Some(why);
            res.too_slow = too_slow;
        }
    }
    if res.failure.is_none() {
        let (http, tok) = fan_out_session(st, opts)?;
        for _ in 0..runs {
            let body = json!({"client": "local", "tgt": format!("{PREFIX}*"), "fun": "test.ping",
                              "timeout": opts.limit.as_secs()});
            let call = match local_call(&http, st, &tok, &body) {
                Ok(c) => c,
                Err(e) => {
                    res.failure = Some(format!("the fan-out request failed: {e:#}"));
                    break;
                }
            };
            let (seconds, returns) = (call.seconds, call.count(&json!(true)));
            res.runs.push(FanOut {
                seconds,
                returns,
                master_cpu: call.master_cpu,
                api_cpu: call.api_cpu,
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
    let summaries = swarm.stop();
    if res.sign_in.is_some() {
        let secs: Vec<f64> = summaries
            .iter()
            .filter_map(|v| v["all_ready_secs"].as_f64())
            .collect();
        if secs.len() == summaries.len() {
            res.sign_in = secs.into_iter().reduce(f64::max);
        }
    }
    Ok(res)
}

/// Once a swarm is ready: a pause for its last subscriptions to settle, then an HTTP client
/// that waits as long as a fan-out may take, and a token from the stack's API.
pub(crate) fn fan_out_session(
    st: &Stack,
    opts: &SwarmOpts,
) -> anyhow::Result<(reqwest::blocking::Client, String)> {
    std::thread::sleep(Duration::from_secs(2));
    let http = reqwest::blocking::Client::builder()
        .timeout(opts.limit + Duration::from_secs(120))
        .build()?;
    let tok = crate::stack::login_blocking(&http, &st.url("/login"))
        .map_err(|e| anyhow::anyhow!("login: {e}"))?;
    Ok((http, tok))
}

/// One `local` call through the API, timed, with the CPU seconds of the master and the API.
pub(crate) struct Call {
    /// `return[0]` of the answer: minion id → return.
    pub returns: serde_json::Map<String, Value>,
    pub seconds: f64,
    pub master_cpu: f64,
    pub api_cpu: f64,
}

impl Call {
    /// Minions whose return equals `want`.
    pub(crate) fn count(&self, want: &Value) -> usize {
        self.returns.values().filter(|v| *v == want).count()
    }
}

/// Send `body` (a lowstate chunk) to `POST /` and wait for the answer.
pub(crate) fn local_call(
    http: &reqwest::blocking::Client,
    st: &Stack,
    tok: &str,
    body: &Value,
) -> anyhow::Result<Call> {
    let master = st
        .master_pid()
        .ok_or_else(|| anyhow::anyhow!("no master"))?;
    let api = st.api_pid().ok_or_else(|| anyhow::anyhow!("no api"))?;
    let (c0, a0) = (cpu_seconds(master), cpu_seconds(api));
    let t = Instant::now();
    let answer = http
        .post(st.url("/"))
        .header("X-Auth-Token", tok)
        .header("Accept", "application/json")
        .json(body)
        .send()
        .and_then(|r| r.error_for_status())
        .and_then(|r| r.json::<Value>());
    let seconds = t.elapsed().as_secs_f64();
    let (c1, a1) = (cpu_seconds(master), cpu_seconds(api));
    let v = answer.map_err(|e| anyhow::anyhow!("after {seconds:.1} s: {e}"))?;
    let returns = v["return"][0]
        .as_object()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("unexpected answer {v}"))?;
    Ok(Call {
        returns,
        seconds,
        master_cpu: c1 - c0,
        api_cpu: a1 - a0,
    })
}

/// Swarm processes started against one stack, `minions` minions with ids `prefix<n>`.
pub(crate) struct Launched {
    procs: Vec<Proc>,
    logs: Vec<PathBuf>,
    minions: usize,
}

/// Why a swarm did not get ready; `too_slow` when it was only slower than the limit.
pub(crate) struct NotReady {
    pub why: String,
    pub too_slow: bool,
}

impl Launched {
    /// Start as many brine-swarm processes as the open-files limit requires, consecutive id
    /// ranges each, with `extra` arguments; logs go to the stack's directory.
    pub(crate) fn start(
        st: &Stack,
        opts: &SwarmOpts,
        prefix: &str,
        minions: usize,
        extra: &[&str],
    ) -> anyhow::Result<Launched> {
        Launched::start_range(&st.dir, st.ret_port, opts, prefix, 0..minions, extra)
    }

    /// The same for the minions numbered `ids`, signing in to the master whose ret port is
    /// `port`; logs go to `dir`.
    pub(crate) fn start_range(
        dir: &Path,
        port: u16,
        opts: &SwarmOpts,
        prefix: &str,
        ids: std::ops::Range<usize>,
        extra: &[&str],
    ) -> anyhow::Result<Launched> {
        let minions = ids.len();
        let procs = minions.div_ceil(opts.per_process.max(1)).max(1);
        let mut swarm = Launched {
            procs: vec![],
            logs: vec![],
            minions,
        };
        let tag = prefix.trim_end_matches('-');
        let first = if ids.start == 0 {
            String::new()
        } else {
            format!("from{}-", ids.start)
        };
        for i in 0..procs {
            let start = minions * i / procs;
            let count = minions * (i + 1) / procs - start;
            let start = ids.start + start;
            let log = if procs == 1 {
                dir.join(format!("swarm-{tag}-{first}{minions}.log"))
            } else {
                dir.join(format!("swarm-{tag}-{first}{minions}-{i}.log"))
            };
            let _ = fs::remove_file(&log);
            let mut args: Vec<String> = vec![
                "--master".into(),
                "127.0.0.1".into(),
                "--master-port".into(),
                port.to_string(),
                "--count".into(),
                count.to_string(),
                "--start-index".into(),
                start.to_string(),
                "--prefix".into(),
                prefix.into(),
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
            args.extend(extra.iter().map(|a| a.to_string()));
            swarm
                .procs
                .push(spawn_logged("brine-swarm", &opts.binary, &args, &log)?);
            swarm.logs.push(log);
        }
        Ok(swarm)
    }

    fn logs_shown(&self) -> String {
        self.logs
            .iter()
            .map(|l| l.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Wait until every minion is signed in and subscribed: the seconds from the first
    /// launch (key generation, on first use of a key cache, is not the master's time).
    pub(crate) fn wait_ready(&mut self, opts: &SwarmOpts) -> Result<f64, NotReady> {
        let minions = self.minions;
        let t0 = Instant::now();
        let mut launched_at: Option<Instant> = None;
        loop {
            if let Some(status) = self.procs.iter_mut().find_map(|s| s.exited()) {
                return Err(NotReady {
                    why: format!("brine-swarm exited ({status}); logs {}", self.logs_shown()),
                    too_slow: false,
                });
            }
            let texts: Vec<String> = self
                .logs
                .iter()
                .map(|l| fs::read_to_string(l).unwrap_or_default())
                .collect();
            let ready: usize = texts.iter().map(|t| ready_count(t).unwrap_or(0)).sum();
            if launched_at.is_none() && texts.iter().any(|t| t.contains("launched")) {
                launched_at = Some(Instant::now());
            }
            if ready >= minions {
                return Ok(launched_at.unwrap_or(t0).elapsed().as_secs_f64());
            }
            let budget = opts.limit + Duration::from_secs_f64(minions as f64 / opts.connect_rate);
            if let Some(t) = launched_at.filter(|t| t.elapsed() > budget) {
                return Err(NotReady {
                    why: format!(
                        "only {ready} of {minions} minions signed in after {:.0} s",
                        t.elapsed().as_secs_f64()
                    ),
                    too_slow: true,
                });
            }
            if launched_at.is_none() && t0.elapsed() > Duration::from_secs(3600) {
                return Err(NotReady {
                    why: "swarm keys not ready after an hour".into(),
                    too_slow: false,
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Minions signed in and subscribed now, by the newest progress line of each process.
    pub(crate) fn ready(&self) -> usize {
        self.logs
            .iter()
            .map(|l| ready_count(&fs::read_to_string(l).unwrap_or_default()).unwrap_or(0))
            .sum()
    }

    /// Stop the processes; the JSON summary each printed as it stopped.
    pub(crate) fn stop(self) -> Vec<Value> {
        let logs = self.logs;
        drop(self.procs);
        logs.iter()
            .filter_map(|l| summary(&fs::read_to_string(l).unwrap_or_default()))
            .collect()
    }
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
        assert_eq!(summary(&end).unwrap()["all_ready_secs"], 1.5);
        assert_eq!(summary(log), None);
    }

    #[test]
    fn only_swarm_keys_are_forgotten() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("m1"), "k").unwrap();
        fs::write(d.path().join(format!("{PREFIX}7")), "k").unwrap();
        forget_swarm_keys(d.path(), PREFIX).unwrap();
        assert!(d.path().join("m1").exists());
        assert!(!d.path().join(format!("{PREFIX}7")).exists());
        forget_swarm_keys(&d.path().join("absent"), PREFIX).unwrap();
    }
}
