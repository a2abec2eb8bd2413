//! Serving the API: listen (HTTP, or HTTPS with rustls), the router of [`crate::routes`] behind
//! trailing-slash normalisation, token pruning, and a graceful shutdown on SIGTERM/SIGINT that
//! ends every stream cleanly.

use std::net::SocketAddr;
use std::time::Duration;

use brine_protocol::config::MasterConfig;

use crate::config::ApiConfig;

pub async fn serve(cfg: MasterConfig, api: ApiConfig) -> anyhow::Result<()> {
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
    let st = crate::daemon::state(cfg, api.clone(), stop_rx)?;
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
        crate::routes::router(st.clone()),
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
