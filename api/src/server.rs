//! The HTTP surface of salt-api (rest_cherrypy's), built from [`crate::routes::ROUTES`].

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value as Json};

use crate::auth::{acl, eauth, tokens};
use crate::body::{hook_post, lowstates, parse_body};
use crate::clients;
use crate::config::CorsOrigins;
use crate::error::ApiError;
use crate::negotiate::{choose, respond, wants_html, Format};
use crate::state::{AppState, Caller};

pub type Shared = Arc<AppState>;

/// The response format the caller accepts, decided before anything else.
#[derive(Clone, Copy)]
struct Fmt(Format);

fn fail(fmt: Format, e: ApiError) -> Response {
    e.into_response_with(fmt)
}

fn ok(fmt: Format, status: StatusCode, body: &Json) -> Response {
    respond(fmt, status, body)
}

/// Build the router (with every middleware) for these settings.
pub fn router(state: Shared) -> Router {
    let api = &state.api;
    let mut r: Router<Shared> = Router::new()
        .route("/", get(index).post(lowstate_root))
        .route("/run", get(index).post(run))
        .route("/token", post(token))
        .route("/keys", get(keys).post(keys_post))
        .route("/keys/{mid}", get(keys_one))
        .route("/events", get(crate::stream::events))
        .route("/ws", get(crate::stream::ws_session))
        .route("/ws/{token}", get(crate::stream::ws_token))
        .route("/stats", get(stats))
        .route("/metrics", get(metrics));
    if api.enable_sessions {
        r = r
            .route("/login", get(login_get).post(login))
            .route("/logout", post(logout))
            .route("/minions", get(minions_all).post(minions_post))
            .route("/minions/{mid}", get(minions_one))
            .route("/jobs", get(jobs))
            .route("/jobs/{jid}", get(job));
    }
    let hook = api.webhook_url.clone();
    r = r
        .route(&hook, post(hook_root))
        .route(&format!("{hook}/{{*path}}"), post(hook_path));
    if let Some(dir) = &api.static_dir {
        r = r.nest_service(&api.static_path, tower_http::services::ServeDir::new(dir));
    }
    if let Some(app) = &api.app {
        let svc = tower_http::services::ServeFile::new(app);
        r = r
            .route_service(&api.app_path, svc.clone())
            .route_service(&format!("{}/{{*rest}}", api.app_path), svc);
    }
    let r = r
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
            ApiError::internal("An unexpected error occurred").into_response()
        }))
        .with_state(state.clone());
    if state.api.root_prefix.is_empty() {
        r
    } else {
        Router::new()
            .nest(&state.api.root_prefix, r)
            .fallback(not_found)
    }
}

/// Every request: Accept negotiation, CORS, the concurrency limit, metrics.
async fn guard(State(st): State<Shared>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let origin = req.headers().get(header::ORIGIN).cloned();
    let read_bytes = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let path = req.uri().path();
    let app_or_static = path.starts_with(&st.api.app_path) || path.starts_with(&st.api.static_path);
    // rest_cherrypy's html_override: a browser (a request that takes text/html, unless its
    // Accept is exactly */*) gets the app page on every path but the app's and the static
    // files'. Only when an app is configured: the JSON path never reads the file.
    if let Some(app) = &st.api.app {
        if !app_or_static && wants_html(accept.as_deref()) {
            let resp = app_page(app).await;
            st.metrics.observe(
                method.as_str(),
                &route,
                resp.status().as_u16(),
                started.elapsed(),
            );
            return resp;
        }
    }
    // Streams, the metrics text, the key tarball and the app's files are not negotiated (as
    // with Salt, where output negotiation is off for /events, POST /keys, /app and /static).
    let negotiated = !(route.ends_with("/events")
        || route.contains("/ws")
        || route.ends_with("/metrics")
        || app_or_static
        || (route.ends_with("/keys") && method == Method::POST));
    let chosen = if negotiated {
        choose(accept.as_deref())
    } else {
        Ok(Format::Json)
    };
    let mut resp = if method == Method::OPTIONS {
        preflight(req.headers(), &st.api.cors)
    } else {
        match chosen {
            Err(e) => e.into_response_with(Format::Json),
            Ok(fmt) => {
                req.extensions_mut().insert(Fmt(fmt));
                let streaming = route.ends_with("/events") || route.contains("/ws");
                let in_flight = st.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
                let resp = if !streaming && in_flight as usize >= st.api.max_concurrent_requests {
                    fail(
                        fmt,
                        ApiError::unavailable("Too many requests at once; try again shortly"),
                    )
                } else {
                    next.run(req).await
                };
                st.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
                resp
            }
        }
    };
    cors(resp.headers_mut(), &st.api.cors, origin.as_ref());
    let m = &st.metrics;
    m.bytes_read.fetch_add(read_bytes, Ordering::Relaxed);
    if let Some(n) = axum::body::HttpBody::size_hint(resp.body()).exact() {
        m.bytes_written.fetch_add(n, Ordering::Relaxed);
    }
    m.busy_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    st.metrics.observe(
        method.as_str(),
        &route,
        resp.status().as_u16(),
        started.elapsed(),
    );
    resp
}

/// The configured `app` page, as html_override serves it.
async fn app_page(app: &std::path::Path) -> Response {
    match tokio::fs::read(app).await {
        Ok(bytes) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html;charset=utf-8"),
            )],
            bytes,
        )
            .into_response(),
        Err(e) => {
            tracing::warn!("app page {}: {e}", app.display());
            fail(
                Format::Json,
                ApiError::not_found(format!("The app page {} is missing", app.display())),
            )
        }
    }
}

/// CORS headers for an allowed `Origin` (see [`CorsOrigins`]); nothing otherwise.
fn cors(h: &mut HeaderMap, allowed: &CorsOrigins, origin: Option<&HeaderValue>) {
    let Some(origin) = origin else { return };
    match allowed {
        CorsOrigins::None => return,
        CorsOrigins::Any => {
            h.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
        }
        CorsOrigins::List(list) => {
            let listed = origin
                .to_str()
                .is_ok_and(|o| list.iter().any(|l| l.eq_ignore_ascii_case(o)));
            if !listed {
                return;
            }
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            h.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
            h.append(header::VARY, HeaderValue::from_static("Origin"));
        }
    }
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("X-Auth-Token, Content-Type"),
    );
}

/// An `OPTIONS` request: the preflight headers when the origin is allowed (the CORS headers
/// themselves are added by [`cors`]).
fn preflight(req: &HeaderMap, allowed: &CorsOrigins) -> Response {
    let mut r = StatusCode::OK.into_response();
    let origin_allowed = {
        let mut probe = HeaderMap::new();
        cors(&mut probe, allowed, req.get(header::ORIGIN));
        probe.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
    };
    let h = r.headers_mut();
    if origin_allowed
        && matches!(
            req.get(header::ACCESS_CONTROL_REQUEST_METHOD)
                .and_then(|v| v.to_str().ok()),
            Some("GET" | "POST")
        )
    {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Content-Type, X-Auth-Token, X-Requested-With"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("1400"),
        );
    }
    r
}

async fn not_found(req: Request) -> Response {
    let fmt = req
        .extensions()
        .get::<Fmt>()
        .map(|f| f.0)
        .unwrap_or(Format::Json);
    fail(
        fmt,
        ApiError::not_found(format!("The path '{}' was not found.", req.uri().path())),
    )
}

async fn method_not_allowed(req: Request) -> Response {
    let fmt = req
        .extensions()
        .get::<Fmt>()
        .map(|f| f.0)
        .unwrap_or(Format::Json);
    fail(
        fmt,
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!(
                "The method {} is not allowed for '{}'.",
                req.method(),
                req.uri().path()
            ),
        ),
    )
}

/// Oversized bodies up to this much beyond the limit are read and dropped before the 413.
const DRAIN_LIMIT: usize = 8 * 1024 * 1024;

/// Read the body within `max_request_body_size`: 413 beyond it.
async fn body_bytes(st: &AppState, req: Request) -> Result<(HeaderMap, Bytes), ApiError> {
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
    Ok((parts.headers, bytes))
}

fn content_type(h: &HeaderMap) -> Option<String> {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn fmt_of(req: &Request) -> Format {
    req.extensions()
        .get::<Fmt>()
        .map(|f| f.0)
        .unwrap_or(Format::Json)
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

fn caller_from_claims(st: &AppState, claims: tokens::Claims) -> Caller {
    let id = eauth::Identity {
        name: claims.name.clone(),
        eauth: claims.eauth.clone(),
        groups: claims.groups.clone(),
    };
    Caller {
        acl: acl::auth_list(&st.cfg, &id),
        name: id.name,
        eauth: id.eauth,
        groups: id.groups,
        claims: Some(claims),
    }
}

/// Check a token (from a session header/cookie or a lowstate).
pub fn caller_from_token(st: &AppState, token: &str) -> Result<Caller, ApiError> {
    match st.tokens.verify(token) {
        Ok(c) => Ok(caller_from_claims(st, c)),
        Err(tokens::TokenError::Expired) => Err(ApiError::unauthorized(
            "No permission -- see authorization schemes (the token has expired)",
        )),
        Err(tokens::TokenError::Revoked) => Err(ApiError::unauthorized(
            "No permission -- see authorization schemes (the token was revoked)",
        )),
        Err(_) => Err(ApiError::unauthorized(
            "No permission -- see authorization schemes",
        )),
    }
}

/// The caller of a session-protected endpoint.
pub fn session_caller(st: &AppState, h: &HeaderMap) -> Result<Caller, ApiError> {
    let Some(t) = session_token(h) else {
        return Err(ApiError::unauthorized(
            "No permission -- see authorization schemes",
        ));
    };
    caller_from_token(st, &t)
}

/// Credentials carried in a lowstate chunk (`/run`, `/token`, `POST /keys`).
async fn caller_from_chunk(st: &Shared, low: &Map<String, Json>) -> Result<Caller, ApiError> {
    if let Some(t) = low.get("token").and_then(Json::as_str) {
        return caller_from_token(st, t);
    }
    let field = |k: &str| low.get(k).and_then(Json::as_str).map(str::to_string);
    let (Some(user), Some(pass), Some(backend)) =
        (field("username"), field("password"), field("eauth"))
    else {
        return Err(ApiError::unauthorized(
            "No authentication credentials given",
        ));
    };
    let id = authenticate(st, &backend, &user, &pass)
        .await
        .map_err(|_| {
            ApiError::unauthorized(format!(
                "Authentication failure of type \"eauth\" occurred for user {user}."
            ))
        })?;
    Ok(Caller {
        acl: acl::auth_list(&st.cfg, &id),
        name: id.name,
        eauth: id.eauth,
        groups: id.groups,
        claims: None,
    })
}

async fn authenticate(
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

// ---- handlers ---------------------------------------------------------------------------

async fn index(req: Request) -> Response {
    ok(
        fmt_of(&req),
        StatusCode::OK,
        &json!({"return": "Welcome", "clients": clients::CLIENTS}),
    )
}

async fn run_lowstates(
    st: &Shared,
    caller: Option<&Caller>,
    chunks: Vec<Map<String, Json>>,
) -> Result<Vec<Json>, ApiError> {
    let mut out = Vec::new();
    for mut low in chunks {
        let chunk_caller;
        let c = match caller {
            Some(c) => {
                low.remove("token");
                c
            }
            None => {
                chunk_caller = caller_from_chunk(st, &low).await?;
                &chunk_caller
            }
        };
        out.extend(clients::run(st, c, low).await?);
    }
    Ok(out)
}

async fn lowstate_root(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let res = async {
        let caller = session_caller(&st, req.headers())?;
        let (h, body) = body_bytes(&st, req).await?;
        let chunks = lowstates(parse_body(content_type(&h).as_deref(), &body)?)?;
        run_lowstates(&st, Some(&caller), chunks).await
    }
    .await;
    match res {
        Ok(ret) => ok(fmt, StatusCode::OK, &json!({"return": ret})),
        Err(e) => fail(fmt, e),
    }
}

async fn run(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let res = async {
        let (h, body) = body_bytes(&st, req).await?;
        let chunks = lowstates(parse_body(content_type(&h).as_deref(), &body)?)?;
        run_lowstates(&st, None, chunks).await
    }
    .await;
    match res {
        Ok(ret) => ok(fmt, StatusCode::OK, &json!({"return": ret})),
        Err(e) => fail(fmt, e),
    }
}

async fn login_get(req: Request) -> Response {
    let mut r = ok(
        fmt_of(&req),
        StatusCode::OK,
        &json!({"status": null, "return": "Please log in"}),
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Session"),
    );
    r
}

fn first_object(v: Json) -> Option<Map<String, Json>> {
    match v {
        Json::Object(m) => Some(m),
        Json::Array(mut a) if !a.is_empty() => match a.swap_remove(0) {
            Json::Object(m) => Some(m),
            _ => None,
        },
        _ => None,
    }
}

fn token_ttl(st: &AppState, low: &Map<String, Json>) -> Result<u64, ApiError> {
    let v = &st.cfg.token_expire_user_override;
    let allow = v.as_bool() == Some(true) || v.is_object() || v.is_array();
    // Checked even when overrides are off: a malformed field is a client error either way.
    match clients::bounded(low, "token_expire", clients::MAX_SECONDS)? {
        Some(t) if allow && t > 0 => Ok(t),
        _ => Ok(st.cfg.token_expire),
    }
}

async fn login(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let res = async {
        let (h, body) = body_bytes(&st, req).await?;
        let low = first_object(parse_body(content_type(&h).as_deref(), &body)?)
            .ok_or_else(|| ApiError::bad_request("Send username, password and eauth to log in"))?;
        let field = |k: &str| low.get(k).and_then(Json::as_str).map(str::to_string);
        let (Some(user), Some(pass), Some(backend)) =
            (field("username"), field("password"), field("eauth"))
        else {
            return Err(ApiError::unauthorized(
                "Could not authenticate using provided credentials",
            ));
        };
        let id = authenticate(&st, &backend, &user, &pass)
            .await
            .map_err(|_| {
                ApiError::unauthorized("Could not authenticate using provided credentials")
            })?;
        let perms = acl::login_perms(&st.cfg, &id);
        let (token, claims) = st.tokens.issue(&id, token_ttl(&st, &low)?);
        Ok((token, claims, perms))
    }
    .await;
    match res {
        Ok((token, claims, perms)) => {
            let body = json!({"return": [{
                "token": token, "expire": claims.expire, "start": claims.start,
                "user": claims.name, "eauth": claims.eauth, "perms": perms,
            }]});
            let mut r = ok(fmt, StatusCode::OK, &body);
            let max_age = (claims.expire - claims.start).max(0.0) as u64;
            if let Ok(v) = HeaderValue::from_str(&token) {
                r.headers_mut().insert("x-auth-token", v);
            }
            if let Ok(v) = HeaderValue::from_str(&format!(
                "session_id={token}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Lax"
            )) {
                r.headers_mut().append(header::SET_COOKIE, v);
            }
            r
        }
        Err(e) => fail(fmt, e),
    }
}

async fn logout(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let caller = match session_caller(&st, req.headers()) {
        Ok(c) => c,
        Err(e) => return fail(fmt, e),
    };
    if let Some(claims) = &caller.claims {
        if let Err(e) = st.tokens.revoke(claims) {
            return fail(
                fmt,
                ApiError::internal(format!("the token could not be revoked: {e}")),
            );
        }
    }
    let mut r = ok(
        fmt,
        StatusCode::OK,
        &json!({"return": "Your token has been cleared"}),
    );
    r.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "session_id=; Max-Age=0; expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/",
        ),
    );
    r
}

async fn token(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let res = async {
        let (h, body) = body_bytes(&st, req).await?;
        let items = match parse_body(content_type(&h).as_deref(), &body)? {
            Json::Array(a) => a,
            o @ Json::Object(_) => vec![o],
            _ => vec![],
        };
        if items.is_empty() {
            return Err(ApiError::bad_request(
                "Require \"username\", \"password\", and \"eauth\" params",
            ));
        }
        let mut out = Vec::new();
        for item in items {
            let field = |k: &str| item.get(k).and_then(Json::as_str).map(str::to_string);
            let (Some(user), Some(pass), Some(backend)) =
                (field("username"), field("password"), field("eauth"))
            else {
                return Err(ApiError::bad_request(
                    "Require \"username\", \"password\", and \"eauth\" params",
                ));
            };
            let id = authenticate(&st, &backend, &user, &pass).await.map_err(|_| {
                ApiError::unauthorized("Could not authenticate using provided credentials")
            })?;
            let obj = item.as_object().cloned().unwrap_or_default();
            let (token, c) = st.tokens.issue(&id, token_ttl(&st, &obj)?);
            out.push(json!({"start": c.start, "expire": c.expire, "name": c.name, "eauth": c.eauth, "token": token}));
        }
        Ok(Json::Array(out))
    }
    .await;
    match res {
        Ok(v) => ok(fmt, StatusCode::OK, &v),
        Err(e) => fail(fmt, e),
    }
}

async fn minions_query(st: &Shared, h: &HeaderMap, tgt: &str) -> Result<Json, ApiError> {
    let caller = session_caller(st, h)?;
    let mut low = Map::new();
    low.insert("client".into(), json!("local"));
    low.insert("tgt".into(), json!(tgt));
    low.insert("fun".into(), json!("grains.items"));
    let ret = clients::run(st, &caller, low).await?;
    Ok(json!({"return": ret}))
}

async fn minions_all(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    match minions_query(&st, req.headers(), "*").await {
        Ok(v) => ok(fmt, StatusCode::OK, &v),
        Err(e) => fail(fmt, e),
    }
}

async fn minions_one(State(st): State<Shared>, Path(mid): Path<String>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    match minions_query(&st, req.headers(), &mid).await {
        Ok(v) => ok(fmt, StatusCode::OK, &v),
        Err(e) => fail(fmt, e),
    }
}

async fn minions_post(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let res = async {
        let caller = session_caller(&st, req.headers())?;
        let (h, body) = body_bytes(&st, req).await?;
        let mut chunks = lowstates(parse_body(content_type(&h).as_deref(), &body)?)?;
        for c in &mut chunks {
            c.insert("client".into(), json!("local_async"));
            c.remove("token");
        }
        run_lowstates(&st, Some(&caller), chunks).await
    }
    .await;
    match res {
        Ok(ret) => {
            let links: Vec<Json> = ret
                .iter()
                .filter_map(|r| r.get("jid").and_then(Json::as_str))
                .map(|jid| json!({"href": format!("/jobs/{jid}")}))
                .collect();
            ok(
                fmt,
                StatusCode::ACCEPTED,
                &json!({"return": ret, "_links": {"jobs": links}}),
            )
        }
        Err(e) => fail(fmt, e),
    }
}

async fn runner_call(
    st: &Shared,
    caller: &Caller,
    fun: &str,
    kw: Vec<(&'static str, Json)>,
) -> Result<Json, ApiError> {
    // As with Salt, the runner client must be enabled for /jobs.
    call_client(st, caller, "runner", fun, kw).await
}

/// One lowstate chunk for an endpoint that wraps a client (`/jobs`, `/keys`); its first element.
async fn call_client(
    st: &Shared,
    caller: &Caller,
    client: &'static str,
    fun: &str,
    kw: Vec<(&'static str, Json)>,
) -> Result<Json, ApiError> {
    let mut low = Map::new();
    low.insert("client".into(), json!(client));
    low.insert("fun".into(), json!(fun));
    for (k, v) in kw {
        low.insert(k.into(), v);
    }
    let out = clients::run(st, caller, low).await?;
    Ok(out.into_iter().next().unwrap_or(Json::Null))
}

async fn jobs(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let headers = req.headers().clone();
    let res = async {
        let caller = session_caller(&st, &headers)?;
        runner_call(&st, &caller, "jobs.list_jobs", vec![]).await
    }
    .await;
    match res {
        Ok(v) => ok(fmt, StatusCode::OK, &json!({"return": [v]})),
        Err(e) => fail(fmt, e),
    }
}

async fn job(State(st): State<Shared>, Path(jid): Path<String>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let headers = req.headers().clone();
    let res = async {
        let mut caller = session_caller(&st, &headers)?;
        if !acl::may_read_job(&caller.acl, &jid) && crate::stream::may_read_job(&st, &caller, &jid)
        {
            // The caller's own job: readable without the runner right.
            caller.acl = vec![json!({"@jobs": ["list_job"]})];
        }
        runner_call(&st, &caller, "jobs.list_job", vec![("jid", json!(jid))]).await
    }
    .await;
    match res {
        Ok(info) => {
            let mut ret = Map::new();
            if let Some(Json::Object(result)) = info.get("Result") {
                for (id, r) in result {
                    ret.insert(id.clone(), r.get("return").cloned().unwrap_or(Json::Null));
                }
            }
            ok(
                fmt,
                StatusCode::OK,
                &json!({"info": [info], "return": [ret]}),
            )
        }
        Err(e) => fail(fmt, e),
    }
}

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

async fn keys(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let headers = req.headers().clone();
    let res = async {
        let caller = session_caller(&st, &headers)
            .map_err(|_| ApiError::unauthorized("No authentication credentials given"))?;
        wheel_call(&st, &caller, "key.list_all", vec![]).await
    }
    .await;
    match res {
        Ok(v) => ok(fmt, StatusCode::OK, &json!({"return": v})),
        Err(e) => fail(fmt, e),
    }
}

async fn keys_one(State(st): State<Shared>, Path(mid): Path<String>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let headers = req.headers().clone();
    let res = async {
        let caller = session_caller(&st, &headers)
            .map_err(|_| ApiError::unauthorized("No authentication credentials given"))?;
        wheel_call(&st, &caller, "key.finger", vec![("match", json!(mid))]).await
    }
    .await;
    match res {
        Ok(v) => ok(fmt, StatusCode::OK, &json!({"return": v})),
        Err(e) => fail(fmt, e),
    }
}

/// `POST /keys`: a new key pair for `mid`, accepted on the master, as an uncompressed tar.
async fn keys_post(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    let res = async {
        let (h, body) = body_bytes(&st, req).await?;
        let low = first_object(parse_body(content_type(&h).as_deref(), &body)?)
            .ok_or_else(|| ApiError::bad_request("Send mid, username, password and eauth"))?;
        let caller = caller_from_chunk(&st, &low).await?;
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
        Ok((mid, tar))
    }
    .await;
    match res {
        Ok((mid, tar)) => {
            let mut r = Response::new(Body::from(tar));
            let h = r.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-tar"),
            );
            if let Ok(v) =
                HeaderValue::from_str(&format!("attachment; filename=\"saltkeys-{mid}.tar\""))
            {
                h.insert(header::CONTENT_DISPOSITION, v);
            }
            r
        }
        Err(e) => fail(fmt, e),
    }
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

async fn fire_hook(st: Shared, req: Request, path: Option<String>) -> Response {
    let fmt = fmt_of(&req);
    if !st.api.webhook_disable_auth {
        if let Err(e) = session_caller(&st, req.headers()) {
            return fail(fmt, e);
        }
    }
    let (h, body) = match body_bytes(&st, req).await {
        Ok(x) => x,
        Err(e) => return fail(fmt, e),
    };
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
    for (k, v) in h.iter() {
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
        "body": String::from_utf8_lossy(&body),
        "post": hook_post(content_type(&h).as_deref(), &body),
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
    ok(fmt, StatusCode::OK, &json!({"success": success}))
}

async fn hook_root(State(st): State<Shared>, req: Request) -> Response {
    fire_hook(st, req, None).await
}

async fn hook_path(State(st): State<Shared>, Path(path): Path<String>, req: Request) -> Response {
    fire_hook(st, req, Some(path)).await
}

async fn stats(State(st): State<Shared>, req: Request) -> Response {
    let fmt = fmt_of(&req);
    if !st.api.stats_disable_auth {
        if let Err(e) = session_caller(&st, req.headers()) {
            return fail(fmt, e);
        }
    }
    if !st.api.collect_stats {
        return ok(fmt, StatusCode::OK, &json!({}));
    }
    let m = &st.metrics;
    let up = st.started.elapsed().as_secs_f64();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let total = m.total_requests();
    let (read, written) = (
        m.bytes_read.load(Ordering::Relaxed),
        m.bytes_written.load(Ordering::Relaxed),
    );
    let per = |n: u64, d: f64| if d > 0.0 { n as f64 / d } else { 0.0 };
    // The keys of CherryPy's cpstats application block, which SaltGUI's stats page reads,
    // from Brine's own counters, plus Brine's event streams and published jobs.
    ok(
        fmt,
        StatusCode::OK,
        &json!({"CherryPy Applications": {
            "Enabled": true,
            "Bytes Read/Request": per(read, total as f64),
            "Bytes Read/Second": per(read, up),
            "Bytes Written/Request": per(written, total as f64),
            "Bytes Written/Second": per(written, up),
            "Current Time": now,
            "Current Requests": m.in_flight.load(Ordering::Relaxed),
            "Requests/Second": per(total, up),
            "Server Version": format!("Brine {}", env!("CARGO_PKG_VERSION")),
            "Start Time": now - up,
            "Total Bytes Read": read,
            "Total Bytes Written": written,
            "Total Requests": total,
            "Total Time": m.busy_micros.load(Ordering::Relaxed) as f64 / 1e6,
            "Uptime": up,
            "Event Streams": m.event_streams.load(Ordering::Relaxed),
            "Jobs Published": m.jobs_published.load(Ordering::Relaxed),
        }}),
    )
}

async fn metrics(State(st): State<Shared>) -> Response {
    let connected = brine_master::presence::publish_connections(st.cfg.publish_port).len();
    let text = st.metrics.render(connected, st.started.elapsed());
    let mut r = Response::new(Body::from(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    r
}

/// Wait for the shutdown signal (for streams).
pub async fn shutting_down(mut rx: tokio::sync::watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// How long until a token's expiry (for streams).
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
