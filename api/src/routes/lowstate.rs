//! `GET /` and `GET /run` (the welcome document), `POST /` (lowstate chunks run with the
//! session's token) and `POST /run` (chunks that carry their own credentials).

use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Value as Json};

use crate::body::Lowstate;
use crate::clients::{self, Returned};
use crate::error::ApiError;
use crate::extract::{lowstate_caller, Lowstates, Negotiated, Peer, Session, Shared};
use crate::state::Caller;

pub(super) async fn index(fmt: Negotiated) -> Response {
    fmt.ok(&json!({"return": "Welcome", "clients": clients::CLIENTS}))
}

/// Run the chunks in order, as `caller`; the `return` list.
pub(super) async fn run_as(
    st: &Shared,
    caller: &Caller,
    chunks: Vec<Lowstate>,
) -> Result<Vec<Returned>, ApiError> {
    let mut out = Vec::new();
    for mut low in chunks {
        low.remove("token");
        out.extend(clients::run(st, caller, low).await?);
    }
    Ok(out)
}

pub(super) async fn run_with_session(
    State(st): State<Shared>,
    fmt: Negotiated,
    session: Session,
    Lowstates(chunks): Lowstates,
) -> Result<Response, ApiError> {
    let ret = run_as(&st, &session.caller, chunks).await?;
    Ok(fmt.returned_list(ret))
}

/// Each chunk is checked as Salt's `NetapiClient.run` checks it: a known client, enabled by
/// `netapi_enable_clients` (400), then credentials (401), then the call.
pub(super) async fn run_with_credentials(
    State(st): State<Shared>,
    peer: Peer,
    fmt: Negotiated,
    Lowstates(chunks): Lowstates,
) -> Result<Response, ApiError> {
    let mut out = Vec::new();
    for low in chunks {
        clients::check_enabled(&st, low.get("client").and_then(Json::as_str))?;
        let caller = lowstate_caller(&st, peer, &low).await?;
        out.extend(clients::run(&st, &caller, low).await?);
    }
    Ok(fmt.returned_list(out))
}
