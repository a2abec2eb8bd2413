//! `GET /jobs` (`jobs.list_jobs`) and `GET /jobs/<jid>` (`jobs.list_job`), through the runner
//! client, which must be enabled, as with Salt.

use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{json, Map, Value as Json};

use super::call_client;
use crate::auth::acl;
use crate::error::ApiError;
use crate::extract::{Negotiated, Session, Shared};

pub(super) async fn list(
    State(st): State<Shared>,
    fmt: Negotiated,
    session: Session,
) -> Result<Response, ApiError> {
    let jobs = call_client(&st, &session.caller, "runner", "jobs.list_jobs", vec![]).await?;
    Ok(fmt.returned(Json::Array(vec![jobs])))
}

pub(super) async fn one(
    State(st): State<Shared>,
    Path(jid): Path<String>,
    fmt: Negotiated,
    session: Session,
) -> Result<Response, ApiError> {
    let mut caller = session.caller;
    if !acl::may_read_job(&caller.acl, &jid) && crate::stream::may_read_job(&st, &caller, &jid) {
        // The caller's own job: readable without the runner right.
        caller.acl = vec![json!({"@jobs": ["list_job"]})];
    }
    let info = call_client(
        &st,
        &caller,
        "runner",
        "jobs.list_job",
        vec![("jid", json!(jid))],
    )
    .await?;
    let mut ret = Map::new();
    if let Some(Json::Object(result)) = info.get("Result") {
        for (id, r) in result {
            ret.insert(id.clone(), r.get("return").cloned().unwrap_or(Json::Null));
        }
    }
    Ok(fmt.ok(&json!({"info": [info], "return": [ret]})))
}
