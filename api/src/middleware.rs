//! What runs around every handler: Accept negotiation (decided once, before the handler, and
//! applied to error answers after it), rest_cherrypy's `html_override`, CORS, the concurrency
//! limit and the metrics; and the answers for unknown paths (404) and methods (405).

use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::CorsOrigins;
use crate::error::ApiError;
use crate::extract::{Negotiated, Shared};
use crate::negotiate::{choose, rerender, wants_html, Format};

/// Every request: Accept negotiation, CORS, the concurrency limit, metrics.
pub async fn guard(State(st): State<Shared>, mut req: Request, next: Next) -> Response {
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
                req.extensions_mut().insert(Negotiated(fmt));
                let streaming = route.ends_with("/events") || route.contains("/ws");
                let in_flight = st.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
                let resp = if !streaming && in_flight as usize >= st.api.max_concurrent_requests {
                    ApiError::unavailable("Too many requests at once; try again shortly")
                        .into_response_with(fmt)
                } else {
                    // Errors leave the handlers as JSON; they are answered in the chosen format.
                    rerender(next.run(req).await, fmt)
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
            ApiError::not_found(format!("The app page {} is missing", app.display()))
                .into_response()
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

/// Any path no route serves: 404.
pub async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!("The path '{}' was not found.", req.uri().path()))
}

/// A served path with a method it does not take: 405.
pub async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::method_not_allowed(req.method(), req.uri().path())
}
