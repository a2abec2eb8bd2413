//! The swarm: start the simulated minions at `--connect-rate`, print progress, stop on
//! request, and summarise.

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::Settings;
use crate::keys::MinionKey;
use crate::sim::{Shared, Sim};

/// Why the swarm could not start.
#[derive(Debug, thiserror::Error)]
pub enum SwarmError {
    #[error(transparent)]
    Settings(#[from] crate::config::SettingsError),
    #[error("cannot resolve the master address {0}: {1}")]
    Resolve(String, String),
}

/// Resolve `host:port` once (the first address).
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, SwarmError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| SwarmError::Resolve(host.to_string(), e.to_string()))?
        .next()
        .ok_or_else(|| SwarmError::Resolve(host.to_string(), "no address".into()))
}

/// Run `keys.len()` minions until `stop` completes (or `--duration` passes) and return the
/// JSON summary. Progress lines go to stderr every `--progress-secs`.
pub async fn run(
    settings: Settings,
    keys: Vec<MinionKey>,
    stop: impl Future<Output = ()>,
) -> Result<serde_json::Value, SwarmError> {
    let checked = settings.check()?;
    let addr = resolve(&settings.master, settings.master_port)?;
    let (tx, rx) = watch::channel(false);
    let total = keys.len() as u64;
    let shared = Arc::new(Shared::new(
        settings.clone(),
        addr,
        checked.enc_algo,
        checked.sig_algo,
        checked.grains,
        checked.threads,
        checked.master_pub,
        rx,
    ));

    // Launch at the connect rate: minion i starts at t0 + i / rate.
    let launcher = {
        let shared = shared.clone();
        let start = settings.start_index;
        let rate = settings.connect_rate;
        tokio::spawn(async move {
            let t0 = tokio::time::Instant::now();
            for (i, key) in keys.into_iter().enumerate() {
                let at = t0 + Duration::from_secs_f64(i as f64 / rate);
                let mut rx = shared.shutdown.clone();
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = rx.wait_for(|v| *v) => return,
                }
                let sim = Arc::new(Sim::new(start + i, key, shared.clone()));
                tokio::spawn(sim.run());
            }
        })
    };

    // The moments every minion signed in and was ready are noted by the minions themselves.
    let progress = {
        let shared = shared.clone();
        let every = settings.progress_secs;
        tokio::spawn(async move {
            if every == 0 {
                return;
            }
            let mut interval = tokio::time::interval(Duration::from_secs(every));
            // The first tick is at once: the first line comes after `every` seconds.
            interval.tick().await;
            loop {
                interval.tick().await;
                eprintln!(
                    "{}",
                    shared.stats.progress_line(total, shared.started.elapsed())
                );
            }
        })
    };

    let limit = async {
        match settings.duration {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = stop => {}
        _ = limit => {}
    }
    // Returns on their way when the stop came are waited for (five seconds at most): an
    // acknowledgement in flight is not a missing one.
    let settle = Instant::now() + Duration::from_secs(5);
    let in_flight = || {
        use std::sync::atomic::Ordering::Relaxed;
        let stats = &shared.stats;
        stats.returns_sent.load(Relaxed) > stats.returns_acked.load(Relaxed)
    };
    while in_flight() && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Summarise before the minions wind down, so the gauges show the running swarm.
    let summary = shared.stats.summary(total, shared.started.elapsed());
    let _ = tx.send(true);
    launcher.abort();
    progress.abort();
    Ok(summary)
}
