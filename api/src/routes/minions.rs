//! `GET /minions`, `GET /minions/<mid>` (grains, through the `local` client) and
//! `POST /minions` (jobs started with `local_async`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Map, Value as Json};

use super::lowstate::run_as;
use crate::clients::{self, Returned};
use crate::error::ApiError;
use crate::extract::{returned, Lowstates, Negotiated, Session, Shared};

async fn grains(
    st: &Shared,
    fmt: Negotiated,
    session: &Session,
    tgt: &str,
) -> Result<Response, ApiError> {
    let mut low = Map::new();
    low.insert("client".into(), json!("local"));
    low.insert("tgt".into(), json!(tgt));
    low.insert("fun".into(), json!("grains.items"));
    let ret = clients::run(st, &session.caller, low).await?;
    Ok(fmt.returned_list(ret))
}

pub(super) async fn all(
    State(st): State<Shared>,
    fmt: Negotiated,
    session: Session,
) -> Result<Response, ApiError> {
    grains(&st, fmt, &session, "*").await
}

pub(super) async fn one(
    State(st): State<Shared>,
    Path(mid): Path<String>,
    fmt: Negotiated,
    session: Session,
) -> Result<Response, ApiError> {
    grains(&st, fmt, &session, &mid).await
}

pub(super) async fn publish(
    State(st): State<Shared>,
    fmt: Negotiated,
    session: Session,
    Lowstates(mut chunks): Lowstates,
) -> Result<Response, ApiError> {
    for c in &mut chunks {
        c.insert("client".into(), json!("local_async"));
    }
    let ret: Vec<Json> = run_as(&st, &session.caller, chunks)
        .await?
        .into_iter()
        .map(Returned::into_json)
        .collect();
    let links: Vec<Json> = ret
        .iter()
        .filter_map(|r| r.get("jid").and_then(Json::as_str))
        .map(|jid| json!({"href": format!("/jobs/{jid}")}))
        .collect();
    let mut body = returned(Json::Array(ret));
    body["_links"] = json!({"jobs": links});
    Ok(fmt.reply(StatusCode::ACCEPTED, &body))
}
