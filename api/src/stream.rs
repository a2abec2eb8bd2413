//! Event streams: `GET /events` (Server-Sent Events, Salt's wire format plus `id:` lines and
//! keep-alive comments) and `GET /ws` (WebSocket, `data: ` framed events). Both carry only the
//! events the caller's ACL lets it see, end when its token expires or is revoked, and end
//! cleanly when the server shuts down.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::ws::rejection::WebSocketUpgradeRejection as WsRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use crate::auth::acl;
use crate::error::ApiError;
use crate::link::BusEvent;
use crate::negotiate::Format;
use crate::server::{
    caller_from_token, session_caller, session_token, shutting_down, until_expiry, Shared,
};
use crate::state::{AppState, Caller};

const KEEPALIVE: Duration = Duration::from_secs(15);

fn visible(st: &AppState, caller: &Caller, ev: &BusEvent) -> bool {
    if let Some(jid) = acl::job_of_event(&ev.tag) {
        return may_read_job(st, caller, jid);
    }
    let view = &st.minions;
    let expand = |expr: &str| view.expand_compound(expr);
    acl::may_see_event(&caller.acl, &ev.tag, &ev.data, &expand)
}

/// May `caller` read job `jid`: its record through `GET /jobs/<jid>` and its events on the
/// streams? With the runner right `jobs.list_job`, or when the caller published it.
pub fn may_read_job(st: &AppState, caller: &Caller, jid: &str) -> bool {
    acl::may_read_job(&caller.acl, jid)
        || st
            .bus
            .job_owner(jid)
            .is_some_and(|owner| owner == caller.name)
}

/// The token is still good (not revoked, not expired).
fn still_valid(st: &AppState, caller: &Caller, token: &str) -> bool {
    caller.claims.is_none() || st.tokens.verify(token).is_ok()
}

/// `{"tag": ..., "data": ...}` as Salt writes it (Python's json.dumps).
fn event_json(ev: &BusEvent) -> String {
    let bytes = crate::negotiate::to_python_json(&json!({"tag": ev.tag, "data": ev.data}))
        .unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

fn sse_block(ev: &BusEvent) -> String {
    format!(
        "id: {}\ntag: {}\ndata: {}\n\n",
        ev.id,
        ev.tag,
        event_json(ev)
    )
}

pub async fn events(State(st): State<Shared>, req: Request) -> Response {
    if req.uri().query().is_some_and(|q| !q.is_empty()) {
        return ApiError::bad_request(
            "The /events endpoint takes no query parameters: send the token in the X-Auth-Token header or the session_id cookie",
        )
        .into_response_with(Format::Json);
    }
    let caller = match session_caller(&st, req.headers()) {
        Ok(c) => c,
        Err(e) => return e.into_response_with(Format::Json),
    };
    let token = session_token(req.headers()).unwrap_or_default();
    let last_id: Option<u64> = req
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let st2 = st.clone();
    tokio::spawn(async move {
        st2.metrics.event_streams.fetch_add(1, Ordering::Relaxed);
        pump_sse(&st2, &caller, &token, last_id, tx).await;
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
    r
}

async fn pump_sse(
    st: &Arc<AppState>,
    caller: &Caller,
    token: &str,
    last_id: Option<u64>,
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let mut rx = st.bus.subscribe();
    let send = |s: String| {
        let tx = tx.clone();
        async move { tx.send(Ok(Bytes::from(s))).await.is_ok() }
    };
    if !send("retry: 400\n".into()).await {
        return;
    }
    if let Some(last) = last_id {
        for ev in st.bus.replay_after(last) {
            if visible(st, caller, &ev) {
                if !send(sse_block(&ev)).await {
                    return;
                }
                st.metrics.events_delivered.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let expiry = tokio::time::sleep(until_expiry(caller));
    tokio::pin!(expiry);
    let stop = shutting_down(st.shutdown.clone());
    tokio::pin!(stop);
    let mut keepalive = tokio::time::interval(KEEPALIVE);
    keepalive.tick().await;
    loop {
        tokio::select! {
            _ = &mut expiry => return,
            _ = &mut stop => return,
            _ = tx.closed() => return,
            _ = keepalive.tick() => {
                if !still_valid(st, caller, token) || !send(": keep-alive\n\n".into()).await {
                    return;
                }
            }
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    if !still_valid(st, caller, token) {
                        return;
                    }
                    if visible(st, caller, &ev) {
                        if !send(sse_block(&ev)).await {
                            return;
                        }
                        st.metrics.events_delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    if !send(format!(": {n} events were dropped (slow reader)\n\n")).await {
                        return;
                    }
                }
                Err(RecvError::Closed) => return,
            }
        }
    }
}

pub async fn ws_session(
    State(st): State<Shared>,
    ws: Result<WebSocketUpgrade, WsRejection>,
    req: Request,
) -> Response {
    let token = session_token(req.headers());
    ws_common(st, ws.ok(), token).await
}

pub async fn ws_token(
    State(st): State<Shared>,
    Path(token): Path<String>,
    ws: Result<WebSocketUpgrade, WsRejection>,
) -> Response {
    ws_common(st, ws.ok(), Some(token)).await
}

async fn ws_common(st: Shared, ws: Option<WebSocketUpgrade>, token: Option<String>) -> Response {
    let Some(token) = token else {
        return ApiError::unauthorized("No permission -- see authorization schemes")
            .into_response_with(Format::Json);
    };
    let caller = match caller_from_token(&st, &token) {
        Ok(c) => c,
        Err(e) => return e.into_response_with(Format::Json),
    };
    let Some(ws) = ws else {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "websocket_upgrade_required",
            "This endpoint speaks WebSocket: send an Upgrade request",
        )
        .into_response_with(Format::Json);
    };
    ws.on_upgrade(move |socket| async move {
        st.metrics.event_streams.fetch_add(1, Ordering::Relaxed);
        pump_ws(&st, &caller, &token, socket).await;
        st.metrics.event_streams.fetch_sub(1, Ordering::Relaxed);
    })
}

async fn pump_ws(st: &Arc<AppState>, caller: &Caller, token: &str, mut socket: WebSocket) {
    let mut rx = st.bus.subscribe();
    // Wait for the client to say it is ready (answering every message it sends).
    loop {
        match socket.recv().await {
            Some(Ok(Message::Text(t))) => {
                let ready = t.as_str().trim() == "websocket client ready";
                if socket
                    .send(Message::Text("server received message".into()))
                    .await
                    .is_err()
                {
                    return;
                }
                if ready {
                    break;
                }
            }
            Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
            Some(Ok(_)) => {}
        }
    }
    let expiry = tokio::time::sleep(until_expiry(caller));
    tokio::pin!(expiry);
    let stop = shutting_down(st.shutdown.clone());
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut expiry => break,
            _ = &mut stop => break,
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(_))) => {
                    if socket.send(Message::Text("server received message".into())).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
            ev = rx.recv() => match ev {
                Ok(ev) => {
                    if !still_valid(st, caller, token) {
                        break;
                    }
                    if visible(st, caller, &ev) {
                        let frame = format!("data: {}\n\n", event_json(&ev));
                        if socket.send(Message::Text(frame.into())).await.is_err() {
                            return;
                        }
                        st.metrics.events_delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            }
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}
