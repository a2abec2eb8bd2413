//! `POST <webhook_url>` and `POST <webhook_url>/<path>`: the request, as an event on the
//! master's bus tagged `salt/netapi/hook[/<path>]`.

use axum::extract::{Path, State};
use axum::response::Response;
use serde_json::{json, Map};

use crate::body::hook_post;
use crate::error::ApiError;
use crate::extract::{HookAuth, Negotiated, RawBody, SessionUnless, Shared};

/// The session is checked (unless `webhook_disable_auth`) before the body is read.
pub(super) async fn fire(
    State(st): State<Shared>,
    fmt: Negotiated,
    _: SessionUnless<HookAuth>,
    body: RawBody,
) -> Result<Response, ApiError> {
    fire_tagged(st, fmt, body, None).await
}

pub(super) async fn fire_at(
    State(st): State<Shared>,
    Path(path): Path<String>,
    fmt: Negotiated,
    _: SessionUnless<HookAuth>,
    body: RawBody,
) -> Result<Response, ApiError> {
    fire_tagged(st, fmt, body, Some(path)).await
}

async fn fire_tagged(
    st: Shared,
    fmt: Negotiated,
    body: RawBody,
    path: Option<String>,
) -> Result<Response, ApiError> {
    let mut tag = "salt/netapi/hook".to_string();
    for seg in path
        .unwrap_or_default()
        .split('/')
        .filter(|s| !s.is_empty())
    {
        tag.push('/');
        tag.push_str(seg);
    }
    // Secrets never travel on the bus.
    let mut headers = Map::new();
    for (k, v) in body.headers.iter() {
        let name = k.as_str();
        if matches!(
            name,
            "x-auth-token" | "cookie" | "authorization" | "proxy-authorization"
        ) {
            continue;
        }
        let title = name
            .split('-')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("-");
        headers.insert(title, json!(String::from_utf8_lossy(v.as_bytes())));
    }
    let data = json!({
        "body": String::from_utf8_lossy(&body.bytes),
        "post": hook_post(body.content_type(), &body.bytes),
        "headers": headers,
    });
    let sock = st.cfg.sock_dir.clone();
    let fired = tokio::task::spawn_blocking(move || {
        brine_transport::eventbus::fire_event(
            &sock,
            &tag,
            brine_protocol::payload::from_json(&data),
        )
    })
    .await;
    let success = matches!(fired, Ok(Ok(())));
    Ok(fmt.ok(&json!({"success": success})))
}
