//! `salt-master`: wire the pieces together and run until SIGTERM.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brine_protocol::config::{JobCache, MasterConfig};
use brine_protocol::payload::{map, Value};
use brine_transport::eventbus::EventBus;
use brine_transport::nats::Events;
use brine_transport::{tcp_endpoint, Publisher, RequestServer, ServerOptions};

use crate::jobstore::pgjsonb::PgStore;
use crate::jobstore::JobStore;
use crate::master::Master;

/// Where the embedded job store lives: `brine_job_store: {path: ...}` or `cachedir/jobs.sqlite`.
pub fn job_store_path(cfg: &MasterConfig) -> std::path::PathBuf {
    cfg.job_store
        .get("path")
        .and_then(|p| p.as_str())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| cfg.cachedir.join("jobs.sqlite"))
}

/// Like Salt's master: raise the soft `RLIMIT_NOFILE` to `max_open_files` (default 100000),
/// capped by the hard limit. Every minion holds a connection to the request port, so the
/// usual soft limit of 1024 would stop a master near 1000 minions. Returns (soft, hard).
pub fn raise_open_files(cfg: &MasterConfig) -> std::io::Result<(u64, u64)> {
    let want = cfg.max_open_files;
    brine_transport::limits::raise_open_files(want)
}

/// Build a master from its config and start serving. Returns when SIGTERM or SIGINT arrives.
pub fn run(cfg: MasterConfig) -> anyhow::Result<()> {
    match raise_open_files(&cfg) {
        Ok((soft, hard)) => tracing::info!("max open files: {soft} (hard limit {hard})"),
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
    for d in [&cfg.pki_dir, &cfg.cachedir, &cfg.sock_dir] {
        std::fs::create_dir_all(d)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", d.display()))?;
    }
    // Before any thread, key, socket or database exists: all of them then belong to `user`.
    let store = job_store_path(&cfg);
    let owned = [
        cfg.pki_dir.as_path(),
        cfg.cachedir.as_path(),
        cfg.sock_dir.as_path(),
        cfg.log_file.as_path(),
        store.as_path(),
    ];
    match crate::privileges::become_user(&cfg.user, &owned) {
        Ok(Some(a)) => tracing::info!("running as user {} (uid {})", a.name, a.uid),
        Ok(None) => {}
        Err(e) => anyhow::bail!("{e}"),
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("master-rt")
        .enable_all()
        .build()?;
    rt.block_on(async move { serve(cfg).await })
}

async fn serve(cfg: MasterConfig) -> anyhow::Result<()> {
    let bus = EventBus::bind(&cfg.sock_dir)
        .await
        .map_err(|e| anyhow::anyhow!("event bus in {}: {e}", cfg.sock_dir.display()))?;
    // Every event from the first on goes to the NATS stream too, with `brine_nats`.
    let nats_events = match &cfg.nats {
        Some(opts) => Some(Arc::new(
            Events::connect(opts, &format!("salt-master {}", cfg.id))
                .await
                .map_err(|e| anyhow::anyhow!("brine_nats: {e}"))?,
        )),
        None => None,
    };
    let forwarder = nats_events.as_ref().map(|e| e.forward(&bus, &cfg.id));
    let shared_jobs = match &nats_events {
        Some(events) => events
            .share_jobs(&cfg.id)
            .await
            .map_err(|e| anyhow::anyhow!("brine_nats: {e}"))?,
        None => None,
    };
    let ctx = zmq::Context::new();
    let pub_ep = tcp_endpoint(&cfg.interface, cfg.publish_port);
    // The publish port lives in its own process (this binary, run with PUBLISHER_FLAG), as
    // in Salt: every minion holds a connection to each port, and a process's open-files
    // limit then covers one connection per minion instead of two.
    let feed = format!("ipc://{}", cfg.sock_dir.join("publish_pull.ipc").display());
    let exe = std::env::current_exe().map_err(|e| anyhow::anyhow!("own executable: {e}"))?;
    let args = [
        PUBLISHER_FLAG,
        &feed,
        &pub_ep,
        &cfg.pub_hwm.to_string(),
        &cfg.zmq_backlog.to_string(),
        if cfg.ipv6 { "ipv6" } else { "ipv4" },
    ]
    .map(String::from);
    let publisher = Publisher::start_child(&ctx, &exe, &args, &feed, &pub_ep)?;
    let ret_ep = tcp_endpoint(&cfg.interface, cfg.ret_port);
    let workers = cfg.worker_threads.max(1);
    let master = Master::new(cfg, Box::new(publisher), bus)?;
    if let Some(forwarder) = forwarder {
        let _ = master.nats.set(forwarder);
    }
    let mut relay = None;
    if let (Some((share, mut peer_jobs)), Some(events)) = (shared_jobs, nats_events) {
        let _ = master.job_share.set(share);
        let m = master.clone();
        relay = Some(tokio::spawn(async move {
            let shared = |jid: &str| m.shared_jids.contains(jid);
            events.relay_returns(&m.cfg.id, &m.bus, shared).await
        }));
        // Publishing writes to the job store and the publisher: off the async workers.
        let m = master.clone();
        std::thread::Builder::new()
            .name("peer-jobs".into())
            .spawn(move || {
                while let Some(job) = peer_jobs.blocking_recv() {
                    m.publish_peer_job(&job.origin, &job.body);
                }
            })?;
    }
    let m = master.clone();
    let server = RequestServer::start(
        &ctx,
        ServerOptions {
            bind: ret_ep.clone(),
            workers,
            max_message_size: (master.cfg.max_request_size as i64).saturating_mul(2),
            queue_len: 100_000,
            sign_in_queue_len: 10_000,
            backlog: master.cfg.zmq_backlog,
            ipv6: master.cfg.ipv6,
        },
        Arc::new(move |body: &[u8]| m.handle(body)),
    )?;
    tracing::warn!(
        "salt-master (Brine {}) serving on {ret_ep} and {pub_ep}",
        env!("CARGO_PKG_VERSION")
    );
    master.bus.fire(
        "salt/master/online",
        map(vec![("id", Value::from(master.cfg.id.clone()))]),
    );
    let maint = tokio::spawn(maintenance(master.clone()));
    let keywatch = tokio::spawn(watch_key_events(master.clone()));
    let reactor = crate::reactor::spawn(&master);
    let recorder =
        event_stores(&master)?.map(|stores| tokio::spawn(record_events(master.clone(), stores)));
    let lost_jobs = (master.cfg.job_cache && master.cfg.lost_job_check > 0)
        .then(|| tokio::spawn(crate::lost_jobs::watch(master.clone())));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::warn!("salt-master shutting down");
    maint.abort();
    keywatch.abort();
    if let Some(r) = reactor {
        r.abort();
    }
    for task in [recorder, lost_jobs, relay].into_iter().flatten() {
        task.abort();
    }
    tokio::task::spawn_blocking(move || server.stop()).await?;
    if let Some(forwarder) = master.nats.get() {
        forwarder.flush(Duration::from_secs(2)).await;
    }
    for f in [
        brine_transport::eventbus::PUB_SOCK,
        brine_transport::eventbus::PULL_SOCK,
    ] {
        let _ = std::fs::remove_file(master.cfg.sock_dir.join(f));
    }
    Ok(())
}

/// Salt's Maintenance process: job retention, the AES drop file, presence events.
async fn maintenance(master: Arc<Master>) {
    let every = Duration::from_secs(master.cfg.loop_interval.max(1));
    let mut present: Vec<String> = Vec::new();
    let mut last = Instant::now();
    let mut metrics = String::new();
    loop {
        // The drop file is looked at every second, so that a key removed with salt-key takes
        // effect at once; the rest runs every loop_interval.
        tokio::time::sleep(Duration::from_secs(1)).await;
        check_dropfile(&master);
        if !master
            .waiting_loads
            .lock()
            .expect("waiting loads lock")
            .is_empty()
        {
            let m = master.clone();
            let _ = tokio::task::spawn_blocking(move || m.store_waiting_loads()).await;
        }
        let now = master.metrics_text();
        if now != metrics {
            write_metrics(&master.cfg.cachedir, &now);
            metrics = now;
        }
        // Restarting waits for the new process to bind: off the async threads.
        let m = master.clone();
        if let Ok(Some(what)) =
            tokio::task::spawn_blocking(move || m.publisher.restart_if_exited()).await
        {
            tracing::error!("{what}");
        }
        if last.elapsed() < every {
            continue;
        }
        last = Instant::now();
        let m = master.clone();
        let _ = tokio::task::spawn_blocking(move || clean_old_jobs(&m)).await;
        if master.cfg.presence_events {
            let now = master.connected_ids();
            let new: Vec<Value> = now
                .iter()
                .filter(|i| !present.contains(i))
                .cloned()
                .map(Value::from)
                .collect();
            let lost: Vec<Value> = present
                .iter()
                .filter(|i| !now.contains(i))
                .cloned()
                .map(Value::from)
                .collect();
            if !new.is_empty() || !lost.is_empty() {
                master.bus.fire(
                    "salt/presence/change",
                    map(vec![
                        ("new", Value::Array(new)),
                        ("lost", Value::Array(lost)),
                    ]),
                );
            }
            master.bus.fire(
                "salt/presence/present",
                map(vec![(
                    "present",
                    Value::Array(now.iter().cloned().map(Value::from).collect()),
                )]),
            );
            present = now;
        }
    }
}

/// Replace the metrics file in `cachedir` with `text` (whole, never half-written).
fn write_metrics(cachedir: &std::path::Path, text: &str) {
    let path = cachedir.join(crate::master::METRICS_FILE);
    let tmp = path.with_extension("prom.tmp");
    if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)) {
        tracing::debug!("{}: {e}", path.display());
    }
}

/// `salt-key` (ours or Salt's) works on the pki dir directly and announces what it did with a
/// `salt/key` event: a deleted or rejected key takes effect at once (the drop file is the
/// fallback when the bus is not reachable).
async fn watch_key_events(master: Arc<Master>) {
    let mut rx = master.bus.subscribe();
    loop {
        let ev = match rx.recv().await {
            Ok(ev) => ev,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => return,
        };
        if !ev.external || ev.tag != "salt/key" {
            continue;
        }
        let act = brine_protocol::payload::get_str(&ev.data, "act").unwrap_or("");
        let Some(id) = brine_protocol::payload::get_str(&ev.data, "id") else {
            continue;
        };
        if matches!(act, "delete" | "reject")
            && !master.keys.exists(crate::keys::KeyState::Accepted, id)
        {
            master.keys_removed(&[id.to_string()], true);
        }
    }
}

/// Where every bus event is written: the job store with `brine_store_events: True`, and
/// PostgreSQL with `event_return: pgjsonb` (the job store itself when `master_job_cache` is
/// the same `pgjsonb`). `None`: nowhere.
fn event_stores(master: &Master) -> anyhow::Result<Option<Vec<Arc<dyn JobStore>>>> {
    let cfg = &master.cfg;
    let mut stores: Vec<Arc<dyn JobStore>> = Vec::new();
    if cfg.store_events {
        stores.push(master.store.clone());
    }
    if let Some(opts) = &cfg.event_return {
        if cfg.master_job_cache == JobCache::Pgjsonb(Box::new(opts.clone())) {
            if !cfg.store_events {
                stores.push(master.store.clone());
            }
        } else {
            let pg = PgStore::open(opts).map_err(|e| anyhow::anyhow!("event_return: {e}"))?;
            stores.push(Arc::new(pg));
        }
    }
    Ok((!stores.is_empty()).then_some(stores))
}

/// Every bus event goes to the `salt_events` table of each of `stores`, as Salt's SQL event
/// returners write it. Events that arrived while the last ones were written are written
/// together, in order, in one commit.
async fn record_events(master: Arc<Master>, stores: Vec<Arc<dyn JobStore>>) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    /// The most events one commit takes.
    const BATCH: usize = 1024;
    let mut rx = master.bus.subscribe();
    loop {
        let first = match rx.recv().await {
            Ok(ev) => ev,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!("{n} events not stored: the store is too slow");
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        let mut batch = vec![(first.tag.clone(), first.data.clone())];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(ev) => batch.push((ev.tag.clone(), ev.data.clone())),
                Err(TryRecvError::Lagged(n)) => {
                    tracing::warn!("{n} events not stored: the store is too slow")
                }
                Err(_) => break,
            }
        }
        let (id, stores) = (master.cfg.id.clone(), stores.clone());
        let res = tokio::task::spawn_blocking(move || {
            for store in stores {
                if let Err(e) = store.save_events(&batch, &id) {
                    tracing::error!("events not stored: {e}");
                }
            }
        })
        .await;
        if let Err(e) = res {
            tracing::error!("events not stored: {e}");
        }
    }
}

pub fn clean_old_jobs(master: &Master) {
    let keep = master.cfg.keep_jobs_seconds;
    if keep == 0 {
        return;
    }
    let cutoff_jid = brine_protocol::jid::jid_ago(std::time::Duration::from_secs(keep));
    match master.store.clean_before(&cutoff_jid) {
        Ok(0) => {}
        Ok(n) => tracing::info!("{n} jobs older than {keep}s removed"),
        Err(e) => tracing::error!("job retention: {e}"),
    }
}

/// `cachedir/.dfn` (mode 0400, holding the master id), written by Salt's key tools: rotate.
fn check_dropfile(master: &Master) {
    let p = master.cfg.cachedir.join(".dfn");
    if p.exists() {
        let _ = std::fs::remove_file(&p);
        master.rotate_after_key_removal();
    }
}

/// Load the config, log, run. The one-line error for a broken config comes back as `Err`.
/// First argument that makes `salt-master` the publisher process (see [`publisher_main`]).
pub const PUBLISHER_FLAG: &str = "--brine-publisher-process";

/// `salt-master --brine-publisher-process FEED BIND HWM BACKLOG ipv4|ipv6`: the master's publish
/// socket, started by the master itself. Returns the exit code.
pub fn publisher_main(args: &[String]) -> i32 {
    let [feed, bind, hwm, backlog, family] = args else {
        eprintln!("salt-master: {PUBLISHER_FLAG} FEED BIND HWM BACKLOG ipv4|ipv6");
        return 2;
    };
    let (Ok(hwm), Ok(backlog)) = (hwm.parse::<i32>(), backlog.parse::<i32>()) else {
        eprintln!("salt-master: publisher: bad high-water mark or backlog {hwm:?} {backlog:?}");
        return 2;
    };
    let opts = brine_transport::zmq_channel::PubOptions {
        hwm,
        backlog,
        ipv6: family == "ipv6",
    };
    match brine_transport::zmq_channel::run_publisher_child(feed, bind, opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("salt-master: publisher: {e}");
            1
        }
    }
}

pub fn main_with(config_dir: &Path, log_level: Option<&str>) -> anyhow::Result<()> {
    let cfg = MasterConfig::load(config_dir)?;
    let console = log_level
        .and_then(brine_transport::logging::level)
        .unwrap_or_else(|| {
            brine_transport::logging::level(&cfg.log_level)
                .unwrap_or(tracing_subscriber::filter::LevelFilter::WARN)
        });
    let file_level = cfg
        .log_level_logfile
        .as_deref()
        .or(Some(cfg.log_level.as_str()))
        .and_then(brine_transport::logging::level)
        .unwrap_or(tracing_subscriber::filter::LevelFilter::WARN);
    brine_transport::logging::init(console, Some((&cfg.log_file, file_level)));
    run(cfg)
}
