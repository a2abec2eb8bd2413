//! `GET /ws` (token in the session header or cookie) and `GET /ws/<token>`: the master's events
//! the caller may see, over a WebSocket.

use std::sync::atomic::Ordering;

use axum::extract::ws::rejection::WebSocketUpgradeRejection as WsRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, State};
use axum::response::Response;

use crate::error::ApiError;
use crate::extract::{caller_from_token, Session, Shared};
use crate::state::Caller;
use crate::stream::{pump_ws, stream_slot};

pub(super) async fn with_session(
    State(st): State<Shared>,
    session: Result<Session, ApiError>,
    ws: Result<WebSocketUpgrade, WsRejection>,
) -> Result<Response, ApiError> {
    let Session { caller, token } = session?;
    upgrade(st, ws, caller, token)
}

pub(super) async fn with_token(
    State(st): State<Shared>,
    Path(token): Path<String>,
    ws: Result<WebSocketUpgrade, WsRejection>,
) -> Result<Response, ApiError> {
    let caller = caller_from_token(&st, &token)?;
    upgrade(st, ws, caller, token)
}

fn upgrade(
    st: Shared,
    ws: Result<WebSocketUpgrade, WsRejection>,
    caller: Caller,
    token: String,
) -> Result<Response, ApiError> {
    let ws = ws.map_err(|_| ApiError::websocket_upgrade_required())?;
    let slot = stream_slot(&st, &token)?;
    Ok(ws.on_upgrade(move |socket| async move {
        let _slot = slot;
        st.metrics.event_streams.fetch_add(1, Ordering::Relaxed);
        pump_ws(&st, &caller, &token, socket).await;
        st.metrics.event_streams.fetch_sub(1, Ordering::Relaxed);
    }))
}
