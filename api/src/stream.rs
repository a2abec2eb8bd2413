//! What feeds the event streams of `GET /events` (Server-Sent Events, Salt's wire format plus
//! `id:` lines and keep-alive comments) and `GET /ws` (WebSocket, `data: ` framed events). Both
//! carry only the events the caller's ACL lets it see, end when its token expires or is
//! revoked, and end cleanly when the server shuts down.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket};
use serde_json::Value as Json;
use tokio::sync::broadcast::error::RecvError;

use crate::auth::acl;
use crate::error::ApiError;
use crate::limits::{Held, Refusals};
use crate::link::BusEvent;
use crate::state::{AppState, Caller};

static REFUSED_STREAMS: Refusals = Refusals::new("event streams over brine_max_streams_per_token");

const KEEPALIVE: Duration = Duration::from_secs(15);

/// A place for one more stream with `token`, or 429 when it has `max_streams_per_token` open.
pub fn stream_slot(st: &AppState, token: &str) -> Result<Held<String>, ApiError> {
    st.streams.acquire(token.to_string()).ok_or_else(|| {
        let max = st.api.limits.max_streams_per_token;
        REFUSED_STREAMS.refused(format_args!("{max} open with its token already"));
        ApiError::too_many(
            format!("This token has {max} event streams open already (brine_max_streams_per_token): close one first"),
            1,
        )
    })
}

fn visible(st: &AppState, caller: &Caller, ev: &BusEvent) -> bool {
    if let Some(jid) = acl::job_of_event(&ev.tag) {
        return may_read_job(st, caller, jid);
    }
    let view = &st.minions;
    let expand = |expr: &str| view.expand_compound(expr);
    acl::may_see_event(&caller.acl, &ev.tag, ev.data(), &expand)
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
    let style = brine_protocol::pyjson::JsonStyle::new(None, false);
    let tag = Json::String(ev.tag.clone());
    brine_protocol::pyjson::dumps_object(&[("tag", &tag), ("data", ev.data())], &style)
}

fn sse_block(ev: &BusEvent) -> String {
    format!(
        "id: {}\ntag: {}\ndata: {}\n\n",
        ev.id,
        ev.tag,
        event_json(ev)
    )
}

/// Feed one SSE stream from `rx`, a subscription taken before the response was sent (so that
/// a client that has the headers sees every event fired after them).
pub(crate) async fn pump_sse(
    st: &Arc<AppState>,
    caller: &Caller,
    token: &str,
    last_id: Option<u64>,
    mut rx: tokio::sync::broadcast::Receiver<Arc<BusEvent>>,
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let send = |s: String| {
        let tx = tx.clone();
        async move { tx.send(Ok(Bytes::from(s))).await.is_ok() }
    };
    if !send("retry: 400\n".into()).await {
        return;
    }
    // The newest event sent: live events the subscription also holds are not sent twice.
    let mut sent = 0;
    if let Some(last) = last_id {
        for ev in st.bus.replay_after(last).await {
            sent = ev.id;
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
                    if ev.id > sent && visible(st, caller, &ev) {
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

pub(crate) async fn pump_ws(
    st: &Arc<AppState>,
    caller: &Caller,
    token: &str,
    mut socket: WebSocket,
) {
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

/// Wait for the shutdown signal.
pub async fn shutting_down(mut rx: tokio::sync::watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// How long until a token's expiry.
pub fn until_expiry(caller: &Caller) -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    caller
        .claims
        .as_ref()
        .map(|c| Duration::from_secs_f64((c.expire - now).max(0.0)))
        .unwrap_or(Duration::from_secs(365 * 86400))
}
