//! Serving the API: one accept loop for HTTP and HTTPS (rustls) that bounds what a peer may
//! hold ([`crate::config::Limits`]: connections in all and per address, the time to send a
//! request's headers, which also closes idle kept-alive connections, and the TLS handshake),
//! the router of [`crate::routes`] behind trailing-slash normalisation, token pruning, the
//! release of freed memory, and a graceful shutdown on SIGTERM/SIGINT that ends every stream
//! cleanly.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use brine_protocol::config::MasterConfig;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;

use crate::config::{ApiConfig, Limits};
use crate::limits::{Gauge, Refusals};

/// How long open connections get to finish after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(10);

static REFUSED_CONNECTIONS: Refusals = Refusals::new("connections over the connection limits");
static HANDSHAKE_FAILURES: Refusals = Refusals::new("TLS handshakes");

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
    let tls = if api.disable_ssl {
        None
    } else {
        let (crt, key) = (
            api.ssl_crt.as_deref().expect("checked by ApiConfig"),
            api.ssl_key.as_deref().expect("checked by ApiConfig"),
        );
        Some(tls_acceptor(crt, key).map_err(|e| {
            anyhow::anyhow!("TLS with {} and {}: {e}", crt.display(), key.display())
        })?)
    };
    let nats = crate::daemon::connect_events(&cfg).await?;
    let st = crate::daemon::state(cfg, api.clone(), stop_rx, nats)?;
    // Expired revocations are forgotten every ten minutes.
    let prune = st.tokens.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(600)).await;
            let prune = prune.clone();
            let _ = tokio::task::spawn_blocking(move || prune.prune()).await;
        }
    });
    // Revocations other replicas recorded in the shared store are learnt every second.
    if st.tokens.is_shared() {
        let tokens = st.tokens.clone();
        tokio::spawn(async move {
            let mut failing = false;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let tokens = tokens.clone();
                match tokio::task::spawn_blocking(move || tokens.refresh()).await {
                    Ok(Err(e)) if !failing => {
                        failing = true;
                        tracing::warn!("revoked tokens not read (the last list read holds): {e}");
                    }
                    Ok(Ok(())) if failing => {
                        failing = false;
                        tracing::warn!("revoked tokens read again");
                    }
                    _ => {}
                }
            }
        });
    }
    tokio::spawn(crate::memory::release_freed());
    // Trailing slashes are tolerated, as with Salt (`/minions/` is `/minions`).
    let app = tower::Layer::layer(
        &tower_http::normalize_path::NormalizePathLayer::trim_trailing_slash(),
        crate::routes::router(st.clone()),
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    tracing::warn!(
        "salt-api (Brine {}) listening on {}://{addr}",
        env!("CARGO_PKG_VERSION"),
        if tls.is_some() { "https" } else { "http" }
    );
    let limits = api.limits.clone();
    let conns: Arc<Gauge<IpAddr>> =
        Gauge::new(limits.max_connections, limits.max_connections_per_address);
    let mut stop = std::pin::pin!(shutdown_signal());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, never spin.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let Some(slot) = conns.acquire(peer.ip()) else {
            REFUSED_CONNECTIONS.refused(format_args!("{peer}, {} open in all", conns.total()));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (app, tls, limits, stop) = (
            app.clone(),
            tls.clone(),
            limits.clone(),
            st.shutdown.clone(),
        );
        tokio::spawn(async move {
            let _slot = slot;
            match tls {
                None => connection(stream, peer, app, &limits, false, stop).await,
                Some(tls) => {
                    match tokio::time::timeout(limits.header_timeout, tls.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                            connection(stream, peer, app, &limits, h2, stop).await
                        }
                        Ok(Err(e)) => HANDSHAKE_FAILURES.refused(format_args!("{peer}: {e}")),
                        Err(_) => HANDSHAKE_FAILURES.refused(format_args!("{peer}: timed out")),
                    }
                }
            }
        });
    }
    tracing::warn!("salt-api shutting down");
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = crate::limits::wait_for(DRAIN, || conns.total() == 0).await;
    if !drained {
        tracing::warn!(
            "{} connections still open after {DRAIN:?}: closing them",
            conns.total()
        );
    }
    Ok(())
}

/// SIGTERM or SIGINT.
async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Serve one connection until it closes: HTTP/1.1 with upgrades (for `/ws`), or HTTP/2 when
/// TLS negotiated it. The protocol is known before the first byte is read, so the header
/// timeout runs from the start: a connection that never sends anything is closed too.
async fn connection<I, S>(io: I, peer: SocketAddr, app: S, limits: &Limits, h2: bool, stop: Stop)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<
            axum::extract::Request,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let svc = TowerToHyperService::new(tower::ServiceExt::map_request(
        app,
        move |req: hyper::Request<Incoming>| {
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut().insert(ConnectInfo(peer));
            req
        },
    ));
    let io = TokioIo::new(io);
    let served = if h2 {
        let mut b = http2::Builder::new(TokioExecutor::new());
        b.timer(TokioTimer::new())
            .keep_alive_interval(limits.header_timeout)
            .keep_alive_timeout(limits.header_timeout)
            .enable_connect_protocol();
        until_stopped(b.serve_connection(io, svc), stop, |c| c.graceful_shutdown()).await
    } else {
        let mut b = http1::Builder::new();
        b.timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        let conn = b.serve_connection(io, svc).with_upgrades();
        until_stopped(conn, stop, |c| c.graceful_shutdown()).await
    };
    if let Err(e) = served {
        tracing::debug!("connection from {peer}: {e}");
    }
}

/// The server's shutdown flag.
type Stop = tokio::sync::watch::Receiver<bool>;

/// Drive a connection; when the server stops, ask it to finish what it is doing and close.
async fn until_stopped<C, E>(conn: C, mut stop: Stop, shut: fn(Pin<&mut C>)) -> Result<(), E>
where
    C: Future<Output = Result<(), E>>,
{
    let mut conn = std::pin::pin!(conn);
    let mut asked = *stop.borrow();
    if asked {
        shut(conn.as_mut());
    }
    loop {
        tokio::select! {
            r = conn.as_mut() => return r,
            changed = stop.changed(), if !asked => {
                asked = true;
                if changed.is_ok() {
                    shut(conn.as_mut());
                }
            }
        }
    }
}

/// A TLS acceptor for the certificate chain and key in these PEM files (HTTP/2 and HTTP/1.1
/// offered by ALPN).
fn tls_acceptor(crt: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = rustls_pemfile::certs(&mut std::io::BufReader::new(std::fs::File::open(crt)?))
        .collect::<Result<Vec<_>, _>>()?;
    if certs.is_empty() {
        anyhow::bail!("no certificate in {}", crt.display());
    }
    let key = rustls_pemfile::private_key(&mut std::io::BufReader::new(std::fs::File::open(key)?))?
        .ok_or_else(|| anyhow::anyhow!("no private key in {}", key.display()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
