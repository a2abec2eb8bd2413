//! `GET /events`: the master's events the caller may see, as Server-Sent Events.

use std::sync::atomic::Ordering;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Uri};
use axum::response::Response;

use crate::error::ApiError;
use crate::extract::{Session, Shared};
use crate::stream::{pump_sse, stream_slot};

pub(super) async fn stream(
    State(st): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    session: Result<Session, ApiError>,
) -> Result<Response, ApiError> {
    if uri.query().is_some_and(|q| !q.is_empty()) {
        return Err(ApiError::bad_request(
            "The /events endpoint takes no query parameters: send the token in the X-Auth-Token header or the session_id cookie",
        ));
    }
    let Session { caller, token } = session?;
    let last_id: Option<u64> = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let slot = stream_slot(&st, &token)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    // Subscribed before the headers go out: every event fired after them is seen.
    let bus = st.bus.subscribe();
    let st2 = st.clone();
    tokio::spawn(async move {
        let _slot = slot;
        st2.metrics.event_streams.fetch_add(1, Ordering::Relaxed);
        pump_sse(&st2, &caller, &token, last_id, bus, tx).await;
        st2.metrics.event_streams.fetch_sub(1, Ordering::Relaxed);
    });
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream;charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(r)
}
