//! The optional static files (`static`, served under `static_path`) and app page (`app`,
//! served at `app_path` and below), mounted where the config says.

use axum::Router;

use crate::config::ApiConfig;
use crate::extract::Shared;

pub(super) fn mount(mut r: Router<Shared>, api: &ApiConfig) -> Router<Shared> {
    if let Some(dir) = &api.static_dir {
        r = r.nest_service(&api.static_path, tower_http::services::ServeDir::new(dir));
    }
    if let Some(app) = &api.app {
        let svc = tower_http::services::ServeFile::new(app);
        r = r
            .route_service(&api.app_path, svc.clone())
            .route_service(&format!("{}/{{*rest}}", api.app_path), svc);
    }
    r
}
