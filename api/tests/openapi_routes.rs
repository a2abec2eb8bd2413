//! `openapi.yaml` (repository root) must describe exactly the routes the API serves, each with a
//! documented client error and only status codes the API can produce.
//!
//! The routes are checked three ways: `brine_api::routes::ROUTES` (the table the router is built
//! from) must equal the documented paths and methods; every documented path and method is asked
//! of the real router, which must not answer 404 or 405; and the sources must add routes only
//! through that table (so a `.route(...)` written anywhere else fails here).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::StatusCode;
use serde_yaml::Value;

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Every status the API answers with (101 for the WebSocket upgrade).
const SANE_STATUSES: &[&str] = &[
    "101", "200", "202", "400", "401", "404", "405", "406", "408", "413", "429", "500", "503",
    "504",
];

fn spec() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../openapi.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// The router's `{*rest}` catch-all is an ordinary `{rest}` parameter in OpenAPI.
fn openapi_path(route: &str) -> String {
    route.replace("{*", "{")
}

/// (METHOD, path) -> operation object.
fn operations(spec: &Value) -> BTreeMap<(String, String), Value> {
    let paths = spec
        .get("paths")
        .and_then(Value::as_mapping)
        .expect("openapi.yaml has no paths");
    let mut out = BTreeMap::new();
    for (path, item) in paths {
        let path = path.as_str().expect("path keys are strings").to_string();
        let item = item
            .as_mapping()
            .unwrap_or_else(|| panic!("{path}: not a mapping"));
        for (method, operation) in item {
            let method = method.as_str().expect("method keys are strings");
            if METHODS.contains(&method) {
                out.insert(
                    (method.to_ascii_uppercase(), path.clone()),
                    operation.clone(),
                );
            }
        }
    }
    out
}

/// Response codes of an operation, with `$ref`'d responses counted as documented.
fn response_codes(operation: &Value) -> Vec<String> {
    operation
        .get("responses")
        .and_then(Value::as_mapping)
        .map(|responses| {
            responses
                .keys()
                .map(|code| match code {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    other => format!("{other:?}"),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn openapi_describes_exactly_the_router_routes() {
    let spec = spec();
    let documented: BTreeSet<(String, String)> = operations(&spec).into_keys().collect();
    let routed: BTreeSet<(String, String)> = brine_api::routes::ROUTES
        .iter()
        .map(|r| (r.method.to_string(), openapi_path(r.path)))
        .collect();
    let missing: Vec<_> = routed.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&routed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "openapi.yaml and routes::ROUTES differ.\n  routed but not documented: {missing:?}\n  documented but not routed: {extra:?}"
    );
}

/// A documented path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{mid}", "web1")
        .replace("{jid}", "20240101000000000000")
        .replace("{token}", "not-a-token")
        .replace("{path}", "some/where")
}

#[tokio::test]
async fn the_router_serves_every_documented_operation() {
    let api = support::Api::new("");
    let mut problems = Vec::new();
    for (method, path) in operations(&spec()).into_keys() {
        let uri = concrete(&path);
        let request = support::req(&method, &uri)
            .body(Body::empty())
            .expect("request");
        let response = api.send(request).await;
        let status = response.status();
        if status == StatusCode::NOT_FOUND || status == StatusCode::METHOD_NOT_ALLOWED {
            problems.push(format!("{method} {path} ({uri}): {status}"));
        }
    }
    // ...and a path or method nobody documented is not served.
    for (method, uri) in [
        ("GET", "/undocumented"),
        ("DELETE", "/run"),
        ("PUT", "/login"),
    ] {
        let request = support::req(method, uri)
            .body(Body::empty())
            .expect("request");
        let status = api.send(request).await.status();
        if status != StatusCode::NOT_FOUND && status != StatusCode::METHOD_NOT_ALLOWED {
            problems.push(format!(
                "{method} {uri} is served ({status}) but not documented"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "documented in openapi.yaml but not served by the router:\n  {}",
        problems.join("\n  ")
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Routes are added in one place: the loop over `ROUTES` in `routes/mod.rs` (and the static
/// files and app page, at configured paths, in `routes/app.rs`). A `.route(` anywhere else would
/// serve a path that the two tests above cannot see.
#[test]
fn routes_are_added_only_through_the_table() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read source");
        let name = file
            .strip_prefix(&src)
            .expect("under src")
            .display()
            .to_string();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for call in [
                ".route(",
                ".route_service(",
                ".nest(",
                ".nest_service(",
                ".merge(",
            ] {
                if code.contains(call) {
                    found.push(format!("{name}: {call}"));
                }
            }
        }
    }
    found.sort();
    let expected = [
        // The static files and the app page, at their configured paths.
        "routes/app.rs: .nest_service(",
        "routes/app.rs: .route_service(",
        "routes/app.rs: .route_service(",
        // The loop over ROUTES, and the configured root_prefix.
        "routes/mod.rs: .nest(",
        "routes/mod.rs: .route(",
    ];
    assert_eq!(
        found, expected,
        "routes must be added through brine_api::routes::ROUTES (and documented in openapi.yaml)"
    );
}

#[test]
fn every_operation_documents_a_client_error_and_only_sane_statuses() {
    let spec = spec();
    let mut problems = Vec::new();
    let mut operation_ids = BTreeSet::new();
    for ((method, path), operation) in operations(&spec) {
        let codes = response_codes(&operation);
        if !codes.iter().any(|c| c.starts_with('4')) {
            problems.push(format!("{method} {path}: no 4xx response documented"));
        }
        if !codes.iter().any(|c| c.starts_with('2') || c == "101") {
            problems.push(format!("{method} {path}: no success response documented"));
        }
        for code in codes
            .iter()
            .filter(|c| !SANE_STATUSES.contains(&c.as_str()))
        {
            problems.push(format!("{method} {path}: unexpected status {code}"));
        }
        match operation.get("operationId").and_then(Value::as_str) {
            None => problems.push(format!("{method} {path}: no operationId")),
            Some(id) if !operation_ids.insert(id.to_string()) => {
                problems.push(format!("{method} {path}: duplicate operationId {id}"))
            }
            Some(_) => {}
        }
        if operation
            .get("summary")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            problems.push(format!("{method} {path}: no summary"));
        }
    }
    assert!(
        problems.is_empty(),
        "openapi.yaml problems:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn error_schema_matches_the_api_error_body() {
    let spec = spec();
    let schema = &spec["components"]["schemas"]["Error"];
    let required = |v: &Value| -> BTreeSet<String> {
        v["required"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let body = brine_api::error::ApiError::bad_request("x").body();
    let top: BTreeSet<String> = body.as_object().expect("object").keys().cloned().collect();
    assert_eq!(required(schema), top, "Error.required vs ApiError::body()");
    let inner: BTreeSet<String> = body["error"]
        .as_object()
        .expect("object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        required(&schema["properties"]["error"]),
        inner,
        "Error.error.required vs ApiError::body()"
    );
}
