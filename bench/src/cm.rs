//! Configuration management on the master: W8 (`_serve_file` throughput), W9 (highstate of
//! real minions), W10 (pillar compiled for a swarm refreshing at once) and W12 (an
//! orchestration), on the tree of [`crate::tree`] that both masters serve.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::procs::{spawn, Proc, RssSampler};
use crate::report::{Better, Report};
use crate::stack::{login_blocking, minion_config, Kind, Stack};
use crate::swarm::{forget_swarm_keys, local_call, Launched, NotReady, SwarmOpts};

/// Ids of the real minions of W9 (`hs0`, `hs1`, ...).
const HS_PREFIX: &str = "hs";

pub(crate) fn http(timeout: Duration) -> anyhow::Result<reqwest::blocking::Client> {
    Ok(reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()?)
}

pub(crate) fn token(http: &reqwest::blocking::Client, st: &Stack) -> anyhow::Result<String> {
    login_blocking(http, &st.url("/login")).map_err(|e| anyhow::anyhow!("login: {e}"))
}

/// A swarm of `n` minions named `prefix<i>` on a freshly started stack, signed in and ready.
fn fresh_swarm(
    st: &mut Stack,
    opts: &SwarmOpts,
    prefix: &str,
    n: usize,
    extra: &[&str],
) -> anyhow::Result<Launched> {
    st.stop();
    forget_swarm_keys(&st.accepted_dir(), prefix)?;
    st.start()?;
    let mut swarm = Launched::start(st, opts, prefix, n, extra)?;
    swarm
        .wait_ready(opts)
        .map_err(|NotReady { why, .. }| anyhow::anyhow!(why))?;
    // Let the last subscriptions settle.
    std::thread::sleep(Duration::from_secs(2));
    Ok(swarm)
}

/// A fresh swarm whose minions have the pillar top's `web` grains, skip the startup pillar
/// (the workloads time their own requests) and wait long for answers from a loaded master.
fn web_swarm(st: &mut Stack, opts: &SwarmOpts, prefix: &str, n: usize) -> anyhow::Result<Launched> {
    fresh_swarm(
        st,
        opts,
        prefix,
        n,
        &[
            "--no-startup",
            "--request-timeout",
            "600",
            "--grains",
            r#"{"benchrole": "web", "os_family": "Debian"}"#,
        ],
    )
}

/// Stop the stack and forget the swarm's keys, so that later workloads target only their own.
fn forget(st: &mut Stack, prefix: &str) -> anyhow::Result<()> {
    st.stop();
    forget_swarm_keys(&st.accepted_dir(), prefix)
}

/// W8: one swarm minion fetches a file of `mib` MiB with `_serve_file`, chunk by chunk.
pub(crate) fn serve_file(
    st: &mut Stack,
    opts: &SwarmOpts,
    mib: usize,
    runs: usize,
    kind: Kind,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let bytes = mib * 1024 * 1024;
    crate::tree::big_file(&st.srv().join("salt/big.bin"), bytes)?;
    let swarm = fresh_swarm(st, opts, "w8-", 1, &["--request-timeout", "600"])?;
    let master = st
        .master_pid()
        .ok_or_else(|| anyhow::anyhow!("no master"))?;
    let http = http(Duration::from_secs(900))?;
    let tok = token(&http, st)?;
    let name = format!("{mib} MiB file");
    for _ in 0..runs {
        let sampler = RssSampler::start(master, Duration::from_millis(100));
        let call = local_call(
            &http,
            st,
            &tok,
            &json!({"client": "local", "tgt": "w8-*", "fun": "swarm.fetch_file",
                    "arg": ["salt://big.bin"], "timeout": 600}),
        );
        let (peak, _) = sampler.stop();
        let call = call?;
        let got = call.returns.get("w8-0").cloned().unwrap_or(Value::Null);
        anyhow::ensure!(
            got == json!(bytes),
            "the swarm minion got {got} instead of {bytes} bytes"
        );
        let mb = bytes as f64 / 1e6;
        rep.add(
            "W8",
            &format!("{name}: throughput"),
            "MB/s",
            Better::Higher,
            kind,
            mb / call.seconds,
        );
        rep.add(
            "W8",
            &format!("{name}: master CPU per 100 MB"),
            "CPU s",
            Better::Lower,
            kind,
            call.master_cpu * 100.0 / mb,
        );
        rep.add(
            "W8",
            &format!("{name}: master peak RSS while serving"),
            "MiB",
            Better::Lower,
            kind,
            peak,
        );
        crate::log(format!(
            "  W8 {mib} MiB in {:.2} s, master CPU {:.2} s, peak RSS {peak:.0} MiB",
            call.seconds, call.master_cpu
        ));
    }
    swarm.stop();
    forget(st, "w8-")
}

/// W10: `n` swarm minions refresh their pillar at once (`saltutil.refresh_pillar` published
/// to all); each `_pillar` exchange is timed by the swarm.
pub(crate) fn pillar_refresh(
    st: &mut Stack,
    opts: &SwarmOpts,
    n: usize,
    runs: usize,
    kind: Kind,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let swarm = web_swarm(st, opts, "w10-", n)?;
    let http = http(opts.limit + Duration::from_secs(120))?;
    let tok = token(&http, st)?;
    let mut failure = None;
    for _ in 0..runs {
        let call = local_call(
            &http,
            st,
            &tok,
            &json!({"client": "local", "tgt": "w10-*", "fun": "saltutil.refresh_pillar",
                    "timeout": opts.limit.as_secs()}),
        )?;
        let ok = call.count(&json!(true));
        crate::log(format!(
            "  W10 {ok}/{n} refreshed in {:.2} s, master CPU {:.2} s",
            call.seconds, call.master_cpu
        ));
        if ok < n {
            failure = Some(format!(
                "{ok} of {n} minions refreshed their pillar within {:.0} s",
                call.seconds
            ));
            break;
        }
        rep.add(
            "W10",
            &format!("{n} minions: all refreshed after"),
            "s",
            Better::Lower,
            kind,
            call.seconds,
        );
        rep.add(
            "W10",
            &format!("{n} minions: master CPU per pillar"),
            "CPU ms",
            Better::Lower,
            kind,
            call.master_cpu * 1000.0 / n as f64,
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    // Each swarm process times its own minions' exchanges; with several processes the
    // slowest process's percentile is the figure.
    let summaries = swarm.stop();
    let worst = |key: &str| {
        summaries
            .iter()
            .filter_map(|s| s["pillar_refresh"][key].as_f64())
            .reduce(f64::max)
    };
    if let Some(f) = failure {
        rep.fail(
            "W10",
            &format!("{n} minions: pillar p50"),
            "ms",
            Better::Lower,
            kind,
            &f,
        );
    } else if let (Some(p50), Some(p99)) = (worst("p50_ms"), worst("p99_ms")) {
        rep.add(
            "W10",
            &format!("{n} minions: pillar p50"),
            "ms",
            Better::Lower,
            kind,
            p50,
        );
        rep.add(
            "W10",
            &format!("{n} minions: pillar p99"),
            "ms",
            Better::Lower,
            kind,
            p99,
        );
    }
    forget(st, "w10-")
}

/// W12: the orchestration `orch.bench` (two jobs to `n` swarm minions, a runner and a wheel
/// function) run through salt-api's `runner` client, which answers when it is done.
pub(crate) fn orchestrate(
    st: &mut Stack,
    opts: &SwarmOpts,
    n: usize,
    runs: usize,
    kind: Kind,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let swarm = fresh_swarm(st, opts, "w12-", n, &["--no-startup"])?;
    let http = http(opts.limit + Duration::from_secs(120))?;
    let tok = token(&http, st)?;
    let body = json!({"client": "runner", "fun": "state.orchestrate", "mods": "orch.bench"});
    let mut outcome = Ok(());
    for _ in 0..runs {
        let call = local_call(&http, st, &tok, &body)?;
        let states = call
            .returns
            .get("data")
            .and_then(|d| d.as_object())
            .and_then(|d| d.values().next().and_then(Value::as_object).cloned());
        let retcode = call.returns.get("retcode").cloned();
        let ok = states
            .as_ref()
            .is_some_and(|s| s.len() == 4 && s.values().all(|r| r["result"] == json!(true)));
        if !ok || retcode != Some(json!(0)) {
            outcome = Err(anyhow::anyhow!(
                "the orchestration failed (retcode {retcode:?}): {:?}",
                call.returns
            ));
            break;
        }
        // Salt's salt-api runs a runner in its own process: both processes' CPU counts.
        let cpu = call.master_cpu + call.api_cpu;
        crate::log(format!(
            "  W12 orchestration of 4 steps, {n} minions: {:.3} s, master and API CPU {cpu:.3} s",
            call.seconds
        ));
        rep.add(
            "W12",
            &format!("orchestration (2 jobs to {n} minions, a runner, a wheel): wall time"),
            "s",
            Better::Lower,
            kind,
            call.seconds,
        );
        rep.add(
            "W12",
            &format!(
                "orchestration (2 jobs to {n} minions, a runner, a wheel): master and API CPU"
            ),
            "CPU ms",
            Better::Lower,
            kind,
            cpu * 1000.0,
        );
    }
    swarm.stop();
    forget(st, "w12-")?;
    outcome
}

/// W9, swarm: `n` swarm minions make the master-side requests of a highstate of the bench
/// formula at once (`swarm.highstate_requests`: pillar, file list, hash and content of every
/// file of the formula, directory list), so that only the master's work is timed.
pub(crate) fn swarm_highstate(
    st: &mut Stack,
    opts: &SwarmOpts,
    n: usize,
    runs: usize,
    kind: Kind,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let swarm = web_swarm(st, opts, "w9-", n)?;
    let http = http(opts.limit + Duration::from_secs(120))?;
    let tok = token(&http, st)?;
    for _ in 0..runs {
        let call = local_call(
            &http,
            st,
            &tok,
            &json!({"client": "local", "tgt": "w9-*", "fun": "swarm.highstate_requests",
                    "arg": ["top.sls", "bench/"], "timeout": opts.limit.as_secs()}),
        )?;
        let complete = call
            .returns
            .values()
            .filter(|r| r["files"].as_u64().is_some_and(|f| f > 1))
            .count();
        let files = call
            .returns
            .values()
            .find_map(|r| r["files"].as_u64())
            .unwrap_or(0);
        crate::log(format!(
            "  W9 swarm: {complete}/{n} minions fetched {files} files each in {:.2} s, \
             master CPU {:.2} s",
            call.seconds, call.master_cpu
        ));
        if complete < n {
            let odd = call
                .returns
                .values()
                .find(|r| r["files"].as_u64().is_none());
            anyhow::bail!("{complete} of {n} swarm minions completed (e.g. {odd:?})");
        }
        rep.add(
            "W9",
            &format!("{n} swarm minions, a highstate's requests at once: wall time"),
            "s",
            Better::Lower,
            kind,
            call.seconds,
        );
        rep.add(
            "W9",
            &format!("{n} swarm minions, a highstate's requests at once: master CPU per minion"),
            "CPU ms",
            Better::Lower,
            kind,
            call.master_cpu * 1000.0 / n as f64,
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    swarm.stop();
    forget(st, "w9-")
}

/// The states of one minion's highstate return: (states, failed, changed), or why the
/// return is not a highstate (a render error comes back as a list of strings).
pub(crate) fn highstate_counts(ret: &Value) -> Result<(usize, usize, usize), String> {
    let states = ret
        .as_object()
        .ok_or_else(|| format!("not a highstate return: {ret}"))?;
    let failed = states
        .values()
        .filter(|s| s["result"] != json!(true))
        .count();
    let changed = states
        .values()
        .filter(|s| s["changes"].as_object().is_some_and(|c| !c.is_empty()))
        .count();
    Ok((states.len(), failed, changed))
}

/// The real minions of W9, started from the Salt venv against `st`'s master.
struct RealMinions {
    procs: Vec<Proc>,
    dirs: Vec<PathBuf>,
}

impl RealMinions {
    fn start(st: &Stack, venv: &Path, n: usize) -> anyhow::Result<RealMinions> {
        let mut m = RealMinions {
            procs: vec![],
            dirs: vec![],
        };
        for i in 0..n {
            let id = format!("{HS_PREFIX}{i}");
            let d = st.dir.join(&id);
            fs::create_dir_all(d.join("etc"))?;
            fs::write(
                d.join("etc/minion"),
                format!(
                    "{}grains:\n  benchdest: {}/out\n  benchrole: web\n",
                    minion_config(&d, &id, st.ret_port),
                    d.display()
                ),
            )?;
            let conf = d.join("etc").to_string_lossy().to_string();
            m.procs.push(spawn(
                &id,
                &venv.join("bin/salt-minion"),
                &["-c", &conf, "-l", "warning"],
                &d.join("stderr"),
            )?);
            m.dirs.push(d);
        }
        Ok(m)
    }

    /// Forget what the last highstate did: the files it wrote and the minions' file cache.
    fn reset(&self) -> anyhow::Result<()> {
        for d in &self.dirs {
            for sub in ["out", "cache/files"] {
                let p = d.join(sub);
                if p.exists() {
                    fs::remove_dir_all(&p)?;
                }
            }
        }
        Ok(())
    }
}

/// W9: `n` real salt-minions (from the Salt venv, the same for both masters) apply the
/// formula: a first highstate that changes everything, then one that changes nothing.
pub(crate) fn highstate(
    st: &mut Stack,
    venv: &Path,
    n: usize,
    runs: usize,
    kind: Kind,
    rep: &mut Report,
) -> anyhow::Result<()> {
    if !st.running() {
        st.start()?;
    }
    let minions = RealMinions::start(st, venv, n)?;
    let http = http(Duration::from_secs(900))?;
    let tok = token(&http, st)?;
    let tgt = format!("{HS_PREFIX}*");
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let ping = local_call(
            &http,
            st,
            &tok,
            &json!({"client": "local", "tgt": tgt, "fun": "test.ping", "timeout": 2}),
        )?;
        if ping.count(&json!(true)) >= n {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {n} real minions answered test.ping; logs under {}",
            ping.count(&json!(true)),
            st.dir.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let apply = json!({"client": "local", "tgt": tgt, "fun": "state.apply", "timeout": 600});
    for _ in 0..runs {
        minions.reset()?;
        for (pass, label) in [(0, "first"), (1, "second")] {
            let call = local_call(&http, st, &tok, &apply)?;
            anyhow::ensure!(
                call.returns.len() == n,
                "{} of {n} minions returned the {label} highstate",
                call.returns.len()
            );
            let mut total = (0, 0, 0);
            for (id, ret) in &call.returns {
                let (s, f, c) = highstate_counts(ret).map_err(|e| anyhow::anyhow!("{id}: {e}"))?;
                anyhow::ensure!(f == 0, "{id}: {f} of {s} states failed: {ret}");
                anyhow::ensure!(
                    (pass == 0) == (c > 0),
                    "{id}: the {label} highstate changed {c} of {s} states"
                );
                total = (total.0 + s, total.1 + f, total.2 + c);
            }
            crate::log(format!(
                "  W9 {label} highstate: {} states on {n} minions ({} changed) in {:.2} s, \
                 master CPU {:.3} s",
                total.0, total.2, call.seconds, call.master_cpu
            ));
            let what = if pass == 0 {
                "first highstate (everything changes)"
            } else {
                "second highstate (nothing changes)"
            };
            rep.add(
                "W9",
                &format!("{what}: wall time, {n} minions"),
                "s",
                Better::Lower,
                kind,
                call.seconds,
            );
            rep.add(
                "W9",
                &format!("{what}: master CPU per minion"),
                "CPU ms",
                Better::Lower,
                kind,
                call.master_cpu * 1000.0 / n as f64,
            );
        }
    }
    drop(minions);
    st.stop();
    forget_swarm_keys(&st.accepted_dir(), HS_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highstate_returns_are_counted() {
        let ret = json!({
            "file_|-a_|-/a_|-managed": {"result": true, "changes": {"diff": "new"}},
            "cmd_|-b_|-echo_|-run": {"result": true, "changes": {}},
            "cmd_|-c_|-false_|-run": {"result": false, "changes": {}},
        });
        assert_eq!(highstate_counts(&ret), Ok((3, 1, 1)));
        assert!(highstate_counts(&json!(["Rendering SLS 'base:bench' failed"])).is_err());
    }
}
