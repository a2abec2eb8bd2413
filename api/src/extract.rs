//! The axum extractors every handler is written with: the negotiated response format
//! ([`Negotiated`]), the session's caller ([`Session`]), lowstate credentials ([`Credentials`]),
//! and the request body, read within `max_request_body_size` ([`RawBody`]) and parsed as
//! rest_cherrypy parses it ([`Parsed`], [`Lowstates`]).

use std::marker::PhantomData;
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
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::negotiate::{choose, respond, Format};
use crate::state::{AppState, Caller};

/// The state every handler shares.
pub type Shared = Arc<AppState>;

/// `{"return": ret}`, built around `ret` (`json!` would copy it).
pub fn returned(ret: Json) -> Json {
    Json::Object(serde_json::Map::from_iter([("return".to_string(), ret)]))
}

/// The response format the caller accepts. The negotiation itself (CherryPy's rules, 406 for
/// an `Accept` that allows neither JSON nor YAML) runs first, in [`crate::middleware::guard`],
/// which stores the result in the request's extensions; endpoints whose answers are not
/// negotiated (streams, metrics, the key tarball) do not take this extractor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated(pub Format);

impl Negotiated {
    /// `200` with `body` in this format.
    pub fn ok(self, body: &Json) -> Response {
        respond(self.0, StatusCode::OK, body)
    }

    /// `200` with `{"return": ret}` (`ret` moved in, not copied).
    pub fn returned(self, ret: Json) -> Response {
        self.ok(&returned(ret))
    }

    /// `200` with `{"return": rets}`, each element written as it is held.
    pub fn returned_list(self, rets: Vec<crate::clients::Returned>) -> Response {
        crate::negotiate::respond_returned(self.0, StatusCode::OK, rets)
    }

    /// `status` with `body` in this format.
    pub fn reply(self, status: StatusCode, body: &Json) -> Response {
        respond(self.0, status, body)
    }
}

/// The client's address, when the server knows it (a router driven without a listener, as in
/// unit tests, does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|c| c.0.ip()),
        ))
    }
}

/// The guard's choice; without the guard (a router built without it), the `Accept` header is
/// negotiated here, with the same rules and the same 406.
impl<S: Send + Sync> FromRequestParts<S> for Negotiated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        if let Some(chosen) = parts.extensions.get::<Negotiated>() {
            return Ok(*chosen);
        }
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        choose(accept).map(Negotiated)
    }
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

/// A setting that turns authentication off for an endpoint.
pub trait AuthSwitch {
    /// Is authentication off?
    fn disabled(api: &ApiConfig) -> bool;
}

/// `webhook_disable_auth`.
pub struct HookAuth;

impl AuthSwitch for HookAuth {
    fn disabled(api: &ApiConfig) -> bool {
        api.webhook_disable_auth
    }
}

/// `stats_disable_auth`.
pub struct StatsAuth;

impl AuthSwitch for StatsAuth {
    fn disabled(api: &ApiConfig) -> bool {
        api.stats_disable_auth
    }
}

/// The [`Session`], unless the setting `A` turns authentication off for the endpoint (then
/// `None`, and no token is looked at).
pub struct SessionUnless<A>(pub Option<Session>, PhantomData<A>);

impl<A: AuthSwitch> FromRequestParts<Shared> for SessionUnless<A> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &Shared) -> Result<Self, Self::Rejection> {
        let session = if A::disabled(&st.api) {
            None
        } else {
            Some(Session::from_request_parts(parts, st).await?)
        };
        Ok(SessionUnless(session, PhantomData))
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

    /// Check them: the caller, or 401 (429 while sign-ins are throttled).
    pub async fn caller(self, st: &Shared, peer: Peer) -> Result<Caller, ApiError> {
        match self {
            Credentials::Token(t) => caller_from_token(st, &t),
            Credentials::Eauth {
                username,
                password,
                eauth,
            } => {
                let id = authenticate(st, peer, &eauth, &username, &password)
                    .await
                    .map_err(|e| e.or(|| ApiError::auth_failure("eauth", &username)))?;
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
pub async fn lowstate_caller(st: &Shared, peer: Peer, low: &Lowstate) -> Result<Caller, ApiError> {
    Credentials::from_lowstate(low)
        .ok_or_else(ApiError::no_credentials)?
        .caller(st, peer)
        .await
}

/// Why a sign-in did not give an identity.
#[derive(Debug)]
pub enum SignInError {
    /// The backend refused the credentials.
    Refused,
    /// Too many failures for this name or address lately: not checked (429).
    Throttled(ApiError),
}

impl SignInError {
    /// The answer: the throttle's 429, or the caller's own refusal.
    pub fn or(self, refused: impl FnOnce() -> ApiError) -> ApiError {
        match self {
            SignInError::Refused => refused(),
            SignInError::Throttled(e) => e,
        }
    }
}

static THROTTLED_BY_USER: crate::limits::Refusals =
    crate::limits::Refusals::new("sign-ins: too many failures from this user");
static THROTTLED_BY_ADDRESS: crate::limits::Refusals =
    crate::limits::Refusals::new("sign-ins: too many failures from this address");

/// Check a user's password with an eauth backend (off the async workers), counting logins;
/// refused without a check while the name or the address has failed too often
/// ([`crate::limits::LoginThrottle`]).
pub async fn authenticate(
    st: &Shared,
    Peer(peer): Peer,
    backend: &str,
    user: &str,
    pass: &str,
) -> Result<eauth::Identity, SignInError> {
    if let Err(t) = st.logins.check(user, peer) {
        st.metrics.login_failures.fetch_add(1, Ordering::Relaxed);
        let refusals = if t.what == "user" {
            &THROTTLED_BY_USER
        } else {
            &THROTTLED_BY_ADDRESS
        };
        refusals.refused(format_args!(
            "{:?} from {} (retry in {} s)",
            crate::limits::short(user),
            peer.map_or("an unknown address".to_string(), |p| p.to_string()),
            t.retry_after
        ));
        return Err(SignInError::Throttled(ApiError::too_many(
            format!(
                "Too many failed sign-ins for this {}; try again in {} seconds",
                t.what, t.retry_after
            ),
            t.retry_after,
        )));
    }
    let st2 = st.clone();
    let (b, u, p) = (backend.to_string(), user.to_string(), pass.to_string());
    let res = tokio::task::spawn_blocking(move || eauth::authenticate(&st2.cfg, &b, &u, &p))
        .await
        .unwrap_or(Err(eauth::EauthError::BadCredentials));
    st.logins.record(user, peer, res.is_ok());
    match &res {
        Ok(_) => st.metrics.logins.fetch_add(1, Ordering::Relaxed),
        Err(_) => st.metrics.login_failures.fetch_add(1, Ordering::Relaxed),
    };
    res.map_err(|_| SignInError::Refused)
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
                    let _ = tokio::time::timeout(
                        st.api.limits.body_timeout,
                        axum::body::to_bytes(body, len),
                    )
                    .await;
                }
                return Err(ApiError::payload_too_large(format!(
                    "The request body ({len} bytes) is over max_request_body_size ({limit} bytes)"
                )));
            }
        }
        let wait = st.api.limits.body_timeout;
        let bytes = tokio::time::timeout(wait, axum::body::to_bytes(body, limit))
            .await
            .map_err(|_| {
                ApiError::request_timeout(format!(
                    "The request body did not arrive within {} seconds (brine_body_timeout)",
                    wait.as_secs()
                ))
            })?
            .map_err(|_| {
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
        Ok(Parsed(parse_body(raw.content_type(), &raw.bytes)?))
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
        Ok(Lowstates(lowstates(
            body,
            st.api.limits.max_lowstate_chunks,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn negotiate(accept: Option<&str>, chosen: Option<Format>) -> Result<Format, ApiError> {
        let mut builder = axum::http::Request::builder();
        if let Some(a) = accept {
            builder = builder.header(header::ACCEPT, a);
        }
        let (mut parts, ()) = builder.body(()).expect("request").into_parts();
        if let Some(f) = chosen {
            parts.extensions.insert(Negotiated(f));
        }
        Negotiated::from_request_parts(&mut parts, &())
            .await
            .map(|n| n.0)
    }

    #[tokio::test]
    async fn negotiated_takes_the_guards_choice_else_negotiates_itself() {
        assert_eq!(
            negotiate(Some("text/html"), Some(Format::Yaml)).await,
            Ok(Format::Yaml)
        );
        assert_eq!(negotiate(None, None).await, Ok(Format::Json));
        assert_eq!(
            negotiate(Some("application/x-yaml"), None).await,
            Ok(Format::Yaml)
        );
        let refused = negotiate(Some("text/html"), None).await.expect_err("406");
        assert_eq!(refused.status, StatusCode::NOT_ACCEPTABLE);
    }

    #[test]
    fn session_token_from_header_then_cookie_and_lowstate_credentials() {
        let mut h = HeaderMap::new();
        assert_eq!(session_token(&h), None);
        h.insert(
            header::COOKIE,
            "a=1; session_id=fromcookie".parse().unwrap(),
        );
        assert_eq!(session_token(&h).as_deref(), Some("fromcookie"));
        h.insert("x-auth-token", " fromheader ".parse().unwrap());
        assert_eq!(session_token(&h).as_deref(), Some("fromheader"));

        let low = |v: Json| v.as_object().cloned().expect("object");
        assert_eq!(
            Credentials::from_lowstate(&low(
                serde_json::json!({"token": "t", "username": "u", "password": "p", "eauth": "pam"})
            )),
            Some(Credentials::Token("t".into()))
        );
        assert_eq!(
            Credentials::from_lowstate(&low(
                serde_json::json!({"username": "u", "password": "p", "eauth": "pam"})
            )),
            Some(Credentials::Eauth {
                username: "u".into(),
                password: "p".into(),
                eauth: "pam".into()
            })
        );
        assert_eq!(
            Credentials::from_lowstate(&low(serde_json::json!({"username": "u", "eauth": "pam"}))),
            None
        );
    }
}
