//! The axum extractors every handler is written with: the negotiated response format
//! ([`Negotiated`]), the session's caller ([`Session`]), lowstate credentials ([`Credentials`]),
//! and the request body, read within `max_request_body_size` ([`RawBody`]) and parsed as
//! rest_cherrypy parses it ([`Parsed`], [`Lowstates`]).

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value as Json};

use crate::auth::{acl, eauth, tokens};
use crate::body::{lowstates, parse_body, Lowstate};
use crate::error::ApiError;
use crate::negotiate::{respond, Format};
use crate::state::{AppState, Caller};

/// The state every handler shares.
pub type Shared = Arc<AppState>;

/// The response format the caller accepts. The negotiation itself (CherryPy's rules, 406 for
/// an `Accept` that allows neither JSON nor YAML) runs first, in [`crate::middleware::guard`],
/// which stores the result in the request's extensions; endpoints whose answers are not
/// negotiated (streams, metrics, the key tarball) get JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated(pub Format);

impl Negotiated {
    /// `200` with `body` in this format.
    pub fn ok(self, body: &Json) -> Response {
        respond(self.0, StatusCode::OK, body)
    }

    /// `status` with `body` in this format.
    pub fn reply(self, status: StatusCode, body: &Json) -> Response {
        respond(self.0, status, body)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Negotiated {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(negotiated(&parts.extensions))
    }
}

/// The format the guard chose for this request (JSON when it chose none).
pub fn negotiated(extensions: &axum::http::Extensions) -> Negotiated {
    extensions
        .get::<Negotiated>()
        .copied()
        .unwrap_or(Negotiated(Format::Json))
}

/// The session token: `X-Auth-Token`, else the `session_id` cookie.
pub fn session_token(h: &HeaderMap) -> Option<String> {
    if let Some(t) = h.get("x-auth-token").and_then(|v| v.to_str().ok()) {
        if !t.trim().is_empty() {
            return Some(t.trim().to_string());
        }
    }
    for c in h.get_all(header::COOKIE) {
        let Ok(c) = c.to_str() else { continue };
        for part in c.split(';') {
            if let Some(v) = part.trim().strip_prefix("session_id=") {
                if !v.is_empty() {
                    return Some(v.to_string());
                }
            }
        }
    }
    None
}

/// The caller a token stands for (a session header or cookie, a lowstate `token`, a `/ws/<token>`).
pub fn caller_from_token(st: &AppState, token: &str) -> Result<Caller, ApiError> {
    let claims = st.tokens.verify(token).map_err(|e| match e {
        tokens::TokenError::Expired => ApiError::unauthorized(format!(
            "{} (the token has expired)",
            crate::error::NO_PERMISSION
        )),
        tokens::TokenError::Revoked => ApiError::unauthorized(format!(
            "{} (the token was revoked)",
            crate::error::NO_PERMISSION
        )),
        _ => ApiError::no_permission(),
    })?;
    let id = eauth::Identity {
        name: claims.name.clone(),
        eauth: claims.eauth.clone(),
        groups: claims.groups.clone(),
    };
    Ok(Caller {
        acl: acl::auth_list(&st.cfg, &id),
        name: id.name,
        eauth: id.eauth,
        groups: id.groups,
        claims: Some(claims),
    })
}

/// The caller of a session-protected endpoint: the token of `X-Auth-Token` or the `session_id`
/// cookie, verified. Rejected with 401 "No permission -- see authorization schemes".
#[derive(Debug, Clone)]
pub struct Session {
    pub caller: Caller,
    /// The token the caller came with (streams re-check it while they last).
    pub token: String,
}

impl FromRequestParts<Shared> for Session {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &Shared) -> Result<Self, Self::Rejection> {
        let token = session_token(&parts.headers).ok_or_else(ApiError::no_permission)?;
        let caller = caller_from_token(st, &token)?;
        Ok(Session { caller, token })
    }
}

/// Credentials carried in a lowstate chunk, where Salt takes them (`POST /run`, `POST /keys`):
/// a `token` (from `POST /token`), or `username`, `password` and `eauth`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    Token(String),
    Eauth {
        username: String,
        password: String,
        eauth: String,
    },
}

impl Credentials {
    /// The chunk's credentials, if it carries any (a `token` wins over eauth fields).
    pub fn from_lowstate(low: &Lowstate) -> Option<Credentials> {
        if let Some(t) = low.get("token").and_then(Json::as_str) {
            return Some(Credentials::Token(t.to_string()));
        }
        let field = |k: &str| low.get(k).and_then(Json::as_str).map(str::to_string);
        Some(Credentials::Eauth {
            username: field("username")?,
            password: field("password")?,
            eauth: field("eauth")?,
        })
    }

    /// Check them: the caller, or 401.
    pub async fn caller(self, st: &Shared) -> Result<Caller, ApiError> {
        match self {
            Credentials::Token(t) => caller_from_token(st, &t),
            Credentials::Eauth {
                username,
                password,
                eauth,
            } => {
                let id = authenticate(st, &eauth, &username, &password)
                    .await
                    .map_err(|_| ApiError::auth_failure("eauth", &username))?;
                Ok(Caller {
                    acl: acl::auth_list(&st.cfg, &id),
                    name: id.name,
                    eauth: id.eauth,
                    groups: id.groups,
                    claims: None,
                })
            }
        }
    }
}

/// The caller of a chunk that must carry its own credentials: 401 "No authentication
/// credentials given" when it carries none.
pub async fn lowstate_caller(st: &Shared, low: &Lowstate) -> Result<Caller, ApiError> {
    Credentials::from_lowstate(low)
        .ok_or_else(ApiError::no_credentials)?
        .caller(st)
        .await
}

/// Check a user's password with an eauth backend (off the async workers), counting logins.
pub async fn authenticate(
    st: &Shared,
    backend: &str,
    user: &str,
    pass: &str,
) -> Result<eauth::Identity, eauth::EauthError> {
    let st2 = st.clone();
    let (b, u, p) = (backend.to_string(), user.to_string(), pass.to_string());
    let res = tokio::task::spawn_blocking(move || eauth::authenticate(&st2.cfg, &b, &u, &p))
        .await
        .unwrap_or(Err(eauth::EauthError::BadCredentials));
    match &res {
        Ok(_) => st.metrics.logins.fetch_add(1, Ordering::Relaxed),
        Err(_) => st.metrics.login_failures.fetch_add(1, Ordering::Relaxed),
    };
    res
}

/// Oversized bodies up to this much beyond the limit are read and dropped before the 413.
const DRAIN_LIMIT: usize = 8 * 1024 * 1024;

/// The request body, read within `max_request_body_size` (413 beyond it), with the request's
/// headers (the hook passes them on).
pub struct RawBody {
    pub headers: HeaderMap,
    pub bytes: Bytes,
}

impl RawBody {
    /// The request's Content-Type, if it is text.
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }
}

impl FromRequest<Shared> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Shared) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let limit = st.api.max_request_body_size;
        if let Some(len) = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
        {
            if len > limit {
                // Read (and drop) a moderately oversized body so the client sees the 413 rather
                // than a connection cut while it is still sending.
                if len <= limit.saturating_add(DRAIN_LIMIT) {
                    let _ = axum::body::to_bytes(body, len).await;
                }
                return Err(ApiError::payload_too_large(format!(
                    "The request body ({len} bytes) is over max_request_body_size ({limit} bytes)"
                )));
            }
        }
        let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
            ApiError::payload_too_large(format!(
                "The request body is over max_request_body_size ({limit} bytes)"
            ))
        })?;
        Ok(RawBody {
            headers: parts.headers,
            bytes,
        })
    }
}

/// The body parsed by its Content-Type ([`parse_body`]: JSON, YAML, form, text).
pub struct Parsed(pub Json);

impl FromRequest<Shared> for Parsed {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Shared) -> Result<Self, Self::Rejection> {
        let raw = RawBody::from_request(req, st).await?;
        parse_body(raw.content_type(), &raw.bytes).map(Parsed)
    }
}

impl Parsed {
    /// The first object of the body (the object itself, or the first element of a list).
    pub fn first_object(self) -> Option<Map<String, Json>> {
        match self.0 {
            Json::Object(m) => Some(m),
            Json::Array(mut a) if !a.is_empty() => match a.swap_remove(0) {
                Json::Object(m) => Some(m),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The body as lowstate chunks ([`lowstates`]): 400 "Lowstates must be a list" for anything
/// that is not an object or a list of objects.
pub struct Lowstates(pub Vec<Lowstate>);

impl FromRequest<Shared> for Lowstates {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Shared) -> Result<Self, Self::Rejection> {
        let Parsed(body) = Parsed::from_request(req, st).await?;
        lowstates(body).map(Lowstates)
    }
}
