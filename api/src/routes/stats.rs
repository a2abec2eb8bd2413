//! `GET /stats` (CherryPy's cpstats block, which SaltGUI reads, from Brine's counters) and
//! `GET /metrics` (Prometheus text).

use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use serde_json::json;

use crate::error::ApiError;
use crate::extract::{Negotiated, SessionUnless, Shared, StatsAuth};

pub(super) async fn stats(
    State(st): State<Shared>,
    fmt: Negotiated,
    // Checked unless `stats_disable_auth`.
    _: SessionUnless<StatsAuth>,
) -> Result<Response, ApiError> {
    if !st.api.collect_stats {
        return Ok(fmt.ok(&json!({})));
    }
    let m = &st.metrics;
    let up = st.started.elapsed().as_secs_f64();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let total = m.total_requests();
    let (read, written) = (
        m.bytes_read.load(Ordering::Relaxed),
        m.bytes_written.load(Ordering::Relaxed),
    );
    let per = |n: u64, d: f64| if d > 0.0 { n as f64 / d } else { 0.0 };
    // The keys of CherryPy's cpstats application block, which SaltGUI's stats page reads,
    // from Brine's own counters, plus Brine's event streams and published jobs.
    Ok(fmt.ok(&json!({"CherryPy Applications": {
        "Enabled": true,
        "Bytes Read/Request": per(read, total as f64),
        "Bytes Read/Second": per(read, up),
        "Bytes Written/Request": per(written, total as f64),
        "Bytes Written/Second": per(written, up),
        "Current Time": now,
        "Current Requests": m.in_flight.load(Ordering::Relaxed),
        "Requests/Second": per(total, up),
        "Server Version": format!("Brine {}", env!("CARGO_PKG_VERSION")),
        "Start Time": now - up,
        "Total Bytes Read": read,
        "Total Bytes Written": written,
        "Total Requests": total,
        "Total Time": m.busy_micros.load(Ordering::Relaxed) as f64 / 1e6,
        "Uptime": up,
        "Event Streams": m.event_streams.load(Ordering::Relaxed),
        "Jobs Published": m.jobs_published.load(Ordering::Relaxed),
    }})))
}

pub(super) async fn metrics(State(st): State<Shared>) -> Response {
    let connected = brine_master::presence::publish_connections(st.cfg.publish_port).len();
    let mut text = st.metrics.render(connected, st.started.elapsed());
    // The master's own counters, when it runs on this host.
    let master = st.cfg.cachedir.join(brine_master::master::METRICS_FILE);
    if let Ok(more) = tokio::fs::read_to_string(master).await {
        text.push_str(&more);
    }
    let mut r = Response::new(Body::from(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}
