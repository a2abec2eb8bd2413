//! `brine-swarm`: N simulated minions against a Salt-compatible master.

use std::process::ExitCode;

use brine_swarm::config::Settings;
use brine_swarm::{keys, swarm};
use clap::Parser;

fn main() -> ExitCode {
    let settings = Settings::parse();
    let checked = match settings.check() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("brine-swarm: {e}");
            return ExitCode::from(2);
        }
    };
    match brine_transport::limits::raise_open_files(u64::MAX) {
        Ok((soft, _)) => {
            let need = settings.count as u64 * 2 + 64;
            if soft < need {
                eprintln!(
                    "brine-swarm: warning: the open-file limit is {soft}, {need} are needed \
                     for {} minions (raise it with `ulimit -n`, see swarm/README.md)",
                    settings.count
                );
            }
        }
        Err(e) => eprintln!("brine-swarm: warning: cannot raise the open-file limit: {e}"),
    }
    let dir = settings
        .keys_dir
        .clone()
        .unwrap_or_else(|| keys::default_dir(settings.key_bits));
    let t0 = std::time::Instant::now();
    eprintln!(
        "brine-swarm: loading {} keys ({} bits) from {}",
        settings.count,
        settings.key_bits,
        dir.display()
    );
    let keys = match keys::load_all(
        &dir,
        settings.key_bits,
        settings.start_index,
        settings.count,
        checked.threads,
        &|n| eprintln!("brine-swarm: {n} keys ready"),
    ) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("brine-swarm: keys in {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    };
    eprintln!(
        "brine-swarm: {} keys ready in {:.1}s; starting {} minions at {}/s against {}:{}",
        keys.len(),
        t0.elapsed().as_secs_f64(),
        settings.count,
        settings.connect_rate,
        settings.master,
        settings.master_port
    );
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(checked.threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("brine-swarm: {e}");
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(swarm::run(settings, keys, stop_signal()));
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("brine-swarm: {e}");
            ExitCode::from(2)
        }
    }
}

/// SIGINT or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
