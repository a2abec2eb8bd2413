//! `salt-api -c DIR`: read the master config, connect to the master, serve HTTP(S) until
//! SIGTERM, then end every stream cleanly.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brine_protocol::config::MasterConfig;

use crate::auth::tokens::TokenKeeper;
use crate::config::ApiConfig;
use crate::link::{Bus, MasterLink};
use crate::metrics::Metrics;
use crate::state::{AppState, MinionView};

/// Build the shared state for a master config (the API runs next to that master).
pub fn state(
    cfg: MasterConfig,
    api: ApiConfig,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Arc<AppState>> {
    let tokens = TokenKeeper::open(&cfg.pki_dir, &cfg.cachedir)
        .map_err(|e| anyhow::anyhow!("token key in {}: {e}", cfg.pki_dir.display()))?;
    let host = match cfg.interface.as_str() {
        "0.0.0.0" => "127.0.0.1",
        "::" => "::1",
        other => other,
    }
    .to_string();
    let master = Arc::new(MasterLink::new(&host, cfg.ret_port, &cfg.cachedir));
    let bus = Bus::start(cfg.sock_dir.clone(), api.event_replay);
    let minions = MinionView::new(&cfg)
        .map_err(|e| anyhow::anyhow!("pki dir {}: {e}", cfg.pki_dir.display()))?;
    Ok(Arc::new(AppState {
        cfg,
        api,
        tokens,
        master,
        bus,
        minions,
        metrics: Metrics::default(),
        started: Instant::now(),
        shutdown,
    }))
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
    rt.block_on(serve(cfg, api))
}

async fn serve(cfg: MasterConfig, api: ApiConfig) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let addr: SocketAddr = format!(
        "{}:{}",
        if api.host.contains(':') {
            format!("[{}]", api.host)
        } else {
            api.host.clone()
        },
        api.port
    )
    .parse()
    .map_err(|e| anyhow::anyhow!("bad bind address {}:{}: {e}", api.host, api.port))?;
    let st = state(cfg, api.clone(), stop_rx)?;
    let prune = st.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(600)).await;
            let _ = prune.tokens.prune();
        }
    });
    // Trailing slashes are tolerated, as with Salt (`/minions/` is `/minions`).
    let app = tower::Layer::layer(
        &tower_http::normalize_path::NormalizePathLayer::trim_trailing_slash(),
        crate::server::router(st.clone()),
    );
    let app = axum::ServiceExt::<axum::extract::Request>::into_make_service_with_connect_info::<
        SocketAddr,
    >(app);
    let signal = async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::warn!("salt-api shutting down");
        let _ = stop_tx.send(true);
    };
    if api.disable_ssl {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        tracing::warn!(
            "salt-api (Brine {}) listening on http://{addr}",
            env!("CARGO_PKG_VERSION")
        );
        axum::serve(listener, app)
            .with_graceful_shutdown(signal)
            .await?;
    } else {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (crt, key) = (
            api.ssl_crt.clone().expect("checked by ApiConfig"),
            api.ssl_key.clone().expect("checked by ApiConfig"),
        );
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(&crt, &key)
            .await
            .map_err(|e| {
                anyhow::anyhow!("TLS with {} and {}: {e}", crt.display(), key.display())
            })?;
        let handle = axum_server::Handle::new();
        let h2 = handle.clone();
        tokio::spawn(async move {
            signal.await;
            h2.graceful_shutdown(Some(Duration::from_secs(10)));
        });
        tracing::warn!(
            "salt-api (Brine {}) listening on https://{addr}",
            env!("CARGO_PKG_VERSION")
        );
        axum_server::bind_rustls(addr, tls)
            .handle(handle)
            .serve(app)
            .await?;
    }
    Ok(())
}
