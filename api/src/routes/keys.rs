//! `GET /keys`, `GET /keys/<mid>` (through the wheel client) and `POST /keys` (a new key pair,
//! accepted on the master, as a tarball; credentials in the body, as with Salt).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use serde_json::{json, Value as Json};

use super::call_client;
use crate::error::ApiError;
use crate::extract::{lowstate_caller, Negotiated, Parsed, Peer, Session, Shared};
use crate::state::Caller;

async fn wheel_call(
    st: &Shared,
    caller: &Caller,
    fun: &str,
    kw: Vec<(&'static str, Json)>,
) -> Result<Json, ApiError> {
    let full = call_client(st, caller, "wheel", fun, kw).await?;
    let data = full.get("data").cloned().unwrap_or(Json::Null);
    if data.get("success") == Some(&Json::Bool(false)) {
        return Err(ApiError::bad_request(
            data.get("return")
                .and_then(Json::as_str)
                .unwrap_or("the wheel function failed")
                .to_string(),
        ));
    }
    Ok(data.get("return").cloned().unwrap_or(Json::Null))
}

/// The session's caller; any failure is Salt's 401 "No authentication credentials given".
fn keys_caller(session: Result<Session, ApiError>) -> Result<Caller, ApiError> {
    session
        .map(|s| s.caller)
        .map_err(|_| ApiError::no_credentials())
}

pub(super) async fn list(
    State(st): State<Shared>,
    fmt: Negotiated,
    session: Result<Session, ApiError>,
) -> Result<Response, ApiError> {
    let caller = keys_caller(session)?;
    let keys = wheel_call(&st, &caller, "key.list_all", vec![]).await?;
    Ok(fmt.returned(keys))
}

pub(super) async fn finger(
    State(st): State<Shared>,
    Path(mid): Path<String>,
    fmt: Negotiated,
    session: Result<Session, ApiError>,
) -> Result<Response, ApiError> {
    let caller = keys_caller(session)?;
    let finger = wheel_call(&st, &caller, "key.finger", vec![("match", json!(mid))]).await?;
    Ok(fmt.ok(&json!({"return": finger})))
}

/// `POST /keys`: a new key pair for `mid`, accepted on the master, as an uncompressed tar.
pub(super) async fn generate(
    State(st): State<Shared>,
    peer: Peer,
    body: Parsed,
) -> Result<Response, ApiError> {
    let low = body
        .first_object()
        .ok_or_else(|| ApiError::bad_request("Send mid, username, password and eauth"))?;
    let caller = lowstate_caller(&st, peer, &low).await?;
    let Some(mid) = low.get("mid").and_then(Json::as_str).map(str::to_string) else {
        return Err(ApiError::bad_request(
            "POST /keys needs 'mid': the new minion's id",
        ));
    };
    let mut kw = vec![("id_", json!(mid))];
    if let Some(k) = low.get("keysize") {
        kw.push(("keysize", k.clone()));
    }
    if let Some(f) = low.get("force") {
        kw.push(("force", f.clone()));
    }
    let pair = wheel_call(&st, &caller, "key.gen_accept", kw).await?;
    let (Some(private), Some(public)) = (
        pair.get("priv").and_then(Json::as_str),
        pair.get("pub").and_then(Json::as_str),
    ) else {
        return Err(ApiError::internal("the master did not return a key pair"));
    };
    let tar = tarball(&[
        ("minion.pem", private, 0o600),
        ("minion.pub", public, 0o644),
    ])
    .map_err(|e| ApiError::internal(format!("cannot build the tarball: {e}")))?;
    let mut r = Response::new(Body::from(tar));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"saltkeys-{mid}.tar\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(r)
}

fn tarball(files: &[(&str, &str, u32)]) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for (name, text, mode) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(*mode);
        h.set_mtime(now);
        h.set_cksum();
        b.append_data(&mut h, name, text.as_bytes())?;
    }
    b.into_inner()
}
