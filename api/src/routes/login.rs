//! `GET /login` (the prompt), `POST /login` (a session token), `POST /logout` (its revocation)
//! and `POST /token` (raw eauth tokens for `POST /run`).

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::Response;
use brine_api_input::fields::{bounded, MAX_SECONDS};
use serde_json::{json, Map, Value as Json};

use crate::auth::acl;
use crate::error::ApiError;
use crate::extract::{authenticate, Negotiated, Parsed, Peer, Session, Shared};
use crate::state::AppState;

pub(super) async fn prompt(fmt: Negotiated) -> Response {
    let mut r = fmt.ok(&json!({"status": null, "return": "Please log in"}));
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Session"),
    );
    r
}

/// The token lifetime: the master's `token_expire`, or the caller's `token_expire` when
/// `token_expire_user_override` allows it.
fn token_ttl(st: &AppState, low: &Map<String, Json>) -> Result<u64, ApiError> {
    let v = &st.cfg.token_expire_user_override;
    let allow = v.as_bool() == Some(true) || v.is_object() || v.is_array();
    // Checked even when overrides are off: a malformed field is a client error either way.
    match bounded(low, "token_expire", MAX_SECONDS)? {
        Some(t) if allow && t > 0 => Ok(t),
        _ => Ok(st.cfg.token_expire),
    }
}

fn text_field(low: &Map<String, Json>, k: &str) -> Option<String> {
    low.get(k).and_then(Json::as_str).map(str::to_string)
}

pub(super) async fn login(
    State(st): State<Shared>,
    peer: Peer,
    fmt: Negotiated,
    body: Parsed,
) -> Result<Response, ApiError> {
    let low = body
        .first_object()
        .ok_or_else(|| ApiError::bad_request("Send username, password and eauth to log in"))?;
    let (Some(user), Some(pass), Some(backend)) = (
        text_field(&low, "username"),
        text_field(&low, "password"),
        text_field(&low, "eauth"),
    ) else {
        return Err(ApiError::login_failed());
    };
    let id = authenticate(&st, peer, &backend, &user, &pass)
        .await
        .map_err(|e| e.or(ApiError::login_failed))?;
    let perms = acl::login_perms(&st.cfg, &id);
    let (token, claims) = st.tokens.issue(&id, token_ttl(&st, &low)?);
    let body = json!({"return": [{
        "token": token, "expire": claims.expire, "start": claims.start,
        "user": claims.name, "eauth": claims.eauth, "perms": perms,
    }]});
    let mut r = fmt.ok(&body);
    let max_age = (claims.expire - claims.start).max(0.0) as u64;
    if let Ok(v) = HeaderValue::from_str(&token) {
        r.headers_mut().insert("x-auth-token", v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!(
        "session_id={token}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Lax"
    )) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(r)
}

pub(super) async fn logout(
    State(st): State<Shared>,
    fmt: Negotiated,
    session: Session,
) -> Result<Response, ApiError> {
    if let Some(claims) = &session.caller.claims {
        st.tokens
            .revoke(claims)
            .map_err(|e| ApiError::internal(format!("the token could not be revoked: {e}")))?;
    }
    let mut r = fmt.ok(&json!({"return": "Your token has been cleared"}));
    r.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "session_id=; Max-Age=0; expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/",
        ),
    );
    Ok(r)
}

const TOKEN_FIELDS: &str = "Require \"username\", \"password\", and \"eauth\" params";

pub(super) async fn token(
    State(st): State<Shared>,
    peer: Peer,
    fmt: Negotiated,
    Parsed(body): Parsed,
) -> Result<Response, ApiError> {
    let items = match body {
        Json::Array(a) => a,
        o @ Json::Object(_) => vec![o],
        _ => vec![],
    };
    if items.is_empty() {
        return Err(ApiError::bad_request(TOKEN_FIELDS));
    }
    let mut out = Vec::new();
    for item in items {
        let Json::Object(obj) = item else {
            return Err(ApiError::bad_request(TOKEN_FIELDS));
        };
        let (Some(user), Some(pass), Some(backend)) = (
            text_field(&obj, "username"),
            text_field(&obj, "password"),
            text_field(&obj, "eauth"),
        ) else {
            return Err(ApiError::bad_request(TOKEN_FIELDS));
        };
        let id = authenticate(&st, peer, &backend, &user, &pass)
            .await
            .map_err(|e| e.or(ApiError::login_failed))?;
        let (token, c) = st.tokens.issue(&id, token_ttl(&st, &obj)?);
        out.push(json!({"start": c.start, "expire": c.expire, "name": c.name, "eauth": c.eauth, "token": token}));
    }
    Ok(fmt.ok(&Json::Array(out)))
}
