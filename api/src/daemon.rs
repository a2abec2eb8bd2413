//! `salt-api -c DIR`: read the master config, connect to the master, serve HTTP(S) until
//! SIGTERM, then end every stream cleanly.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use brine_master::jobstore::pgjsonb::PgStore;
use brine_protocol::config::{JobCache, MasterConfig};

use crate::auth::revocations::PgRevocations;
use crate::auth::tokens::TokenKeeper;
use crate::config::ApiConfig;
use crate::link::{Bus, Source};
use crate::metrics::Metrics;
use crate::state::{AppState, MinionView};
use brine_client::link::{local_host, MasterLink};
use brine_transport::nats::Events;

/// Build the shared state for a master config (the API runs next to that master), reading
/// events from `nats` when the config has `brine_nats` (connected by [`connect_events`]).
pub fn state(
    cfg: MasterConfig,
    api: ApiConfig,
    shutdown: tokio::sync::watch::Receiver<bool>,
    nats: Option<Arc<Events>>,
) -> anyhow::Result<Arc<AppState>> {
    // Replicas on one PostgreSQL share their revocations there; otherwise they are files.
    let tokens = match &cfg.master_job_cache {
        JobCache::Pgjsonb(opts) => {
            let store = PgStore::open(opts)
                .map_err(|e| anyhow::anyhow!("master_job_cache: job store: {e}"))?;
            TokenKeeper::open_shared(&cfg.pki_dir, Arc::new(PgRevocations(store)))
        }
        JobCache::Local => TokenKeeper::open(&cfg.pki_dir, &cfg.cachedir),
    }
    .map_err(|e| anyhow::anyhow!("token key in {}: {e}", cfg.pki_dir.display()))?;
    let master = Arc::new(MasterLink::new(
        local_host(&cfg.interface),
        cfg.ret_port,
        &cfg.cachedir,
        "root",
    ));
    let source = match nats {
        Some(events) => Source::Nats(events),
        // With `brine_store_events`, events from before this process (a restart) are
        // resumed from the master's job store.
        None => Source::Local {
            sock_dir: cfg.sock_dir.clone(),
            stored_events: cfg
                .store_events
                .then(|| brine_master::daemon::job_store_path(&cfg)),
        },
    };
    let bus = Bus::start(source, api.event_replay);
    let minions = MinionView::new(&cfg)
        .map_err(|e| anyhow::anyhow!("pki dir {}: {e}", cfg.pki_dir.display()))?;
    Ok(Arc::new(AppState {
        cfg,
        tokens,
        master,
        bus,
        minions,
        metrics: Metrics::default(),
        logins: crate::limits::LoginThrottle::new(&api.limits),
        streams: crate::limits::Gauge::new(usize::MAX, api.limits.max_streams_per_token),
        started: Instant::now(),
        api,
        shutdown,
    }))
}

/// The NATS events stream of `brine_nats`, connected; `None` without it.
pub async fn connect_events(cfg: &MasterConfig) -> anyhow::Result<Option<Arc<Events>>> {
    let Some(opts) = &cfg.nats else {
        return Ok(None);
    };
    let events = Events::connect(opts, &format!("salt-api {}", cfg.id))
        .await
        .map_err(|e| anyhow::anyhow!("brine_nats: {e}"))?;
    Ok(Some(Arc::new(events)))
}

pub fn main_with(config_dir: &Path, log_level: Option<&str>) -> anyhow::Result<()> {
    let cfg = MasterConfig::load(config_dir)?;
    let api = ApiConfig::from_master(&cfg)?;
    let console = log_level
        .and_then(brine_transport::logging::level)
        .or_else(|| brine_transport::logging::level(&cfg.log_level))
        .unwrap_or(tracing_subscriber::filter::LevelFilter::WARN);
    let api_log = cfg
        .api_logfile
        .clone()
        .unwrap_or_else(|| cfg.log_file.with_file_name("api"));
    brine_transport::logging::init(console, Some((&api_log, console)));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(crate::server::serve(cfg, api))
}
