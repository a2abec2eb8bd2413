//! Every route the API serves, and the router built from them.
//!
//! [`ROUTES`] is the only place a route is added: [`router`] mounts exactly its entries (plus
//! the optional static files and app page, which live at configured paths), and
//! `api/tests/openapi_routes.rs` checks that `openapi.yaml` documents exactly these, by the table
//! and by asking the real router.

mod app;
mod events;
mod hook;
mod jobs;
mod keys;
mod login;
mod lowstate;
mod minions;
mod stats;
mod ws;

use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use serde_json::{json, Map, Value as Json};

use crate::clients;
use crate::error::ApiError;
use crate::extract::Shared;
use crate::middleware;
use crate::state::Caller;

/// When a route is mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mount {
    /// Always.
    Always,
    /// Only with `enable_sessions` (rest_cherrypy's session endpoints).
    Sessions,
    /// At the configured `webhook_url` (`/hook` in the table and in `openapi.yaml`).
    Hook,
}

/// One route: method, path (relative to `root_prefix`; `{name}` is a path parameter and
/// `{*rest}` matches the rest of the path) and its handler.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub mount: Mount,
    handler: fn(MethodFilter) -> MethodRouter<Shared>,
}

impl Route {
    /// The path this route is mounted at for a given `webhook_url`.
    pub fn mounted_path(&self, webhook_url: &str) -> String {
        match self.mount {
            Mount::Hook => self.path.replacen("/hook", webhook_url, 1),
            _ => self.path.to_string(),
        }
    }
}

macro_rules! route {
    ($method:ident $path:literal, $mount:ident => $handler:path) => {
        Route {
            method: Method::$method,
            path: $path,
            mount: Mount::$mount,
            handler: |filter| on(filter, $handler),
        }
    };
}

/// Every route, in `openapi.yaml`'s order.
pub static ROUTES: &[Route] = &[
    route!(GET "/", Always => lowstate::index),
    route!(POST "/", Always => lowstate::run_with_session),
    route!(GET "/login", Sessions => login::prompt),
    route!(POST "/login", Sessions => login::login),
    route!(POST "/logout", Sessions => login::logout),
    route!(POST "/token", Always => login::token),
    route!(GET "/run", Always => lowstate::index),
    route!(POST "/run", Always => lowstate::run_with_credentials),
    route!(GET "/minions", Sessions => minions::all),
    route!(POST "/minions", Sessions => minions::publish),
    route!(GET "/minions/{mid}", Sessions => minions::one),
    route!(GET "/jobs", Sessions => jobs::list),
    route!(GET "/jobs/{jid}", Sessions => jobs::one),
    route!(GET "/keys", Always => keys::list),
    route!(POST "/keys", Always => keys::generate),
    route!(GET "/keys/{mid}", Always => keys::finger),
    route!(GET "/events", Always => events::stream),
    route!(GET "/ws", Always => ws::with_session),
    route!(GET "/ws/{token}", Always => ws::with_token),
    route!(POST "/hook", Hook => hook::fire),
    route!(POST "/hook/{*path}", Hook => hook::fire_at),
    route!(GET "/stats", Always => stats::stats),
    route!(GET "/metrics", Always => stats::metrics),
];

/// The router (with every middleware) for these settings.
pub fn router(state: Shared) -> Router {
    let api = &state.api;
    let mut r: Router<Shared> = Router::new();
    for route in ROUTES {
        if route.mount == Mount::Sessions && !api.enable_sessions {
            continue;
        }
        let filter =
            MethodFilter::try_from(route.method.clone()).expect("routes use standard methods");
        r = r.route(
            &route.mounted_path(&api.webhook_url),
            (route.handler)(filter),
        );
    }
    let r = app::mount(r, api)
        .fallback(middleware::not_found)
        .method_not_allowed_fallback(middleware::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::guard,
        ))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
            axum::response::IntoResponse::into_response(ApiError::unexpected())
        }))
        .with_state(state.clone());
    if state.api.root_prefix.is_empty() {
        r
    } else {
        Router::new()
            .nest(&state.api.root_prefix, r)
            .fallback(middleware::not_found)
    }
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
    let out = clients::run_json(st, caller, low).await?;
    Ok(out.into_iter().next().unwrap_or(Json::Null))
}
