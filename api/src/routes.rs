//! Every route the API serves, relative to `root_prefix`. The router is built from this table
//! and `openapi.yaml` must describe exactly these (a test keeps them in step).

/// (method, path). `{name}` is a path parameter; `{*rest}` matches the rest of the path.
/// `/hook` stands for the configured `webhook_url`.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("POST", "/"),
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    ("POST", "/token"),
    ("GET", "/run"),
    ("POST", "/run"),
    ("GET", "/minions"),
    ("POST", "/minions"),
    ("GET", "/minions/{mid}"),
    ("GET", "/jobs"),
    ("GET", "/jobs/{jid}"),
    ("GET", "/keys"),
    ("POST", "/keys"),
    ("GET", "/keys/{mid}"),
    ("GET", "/events"),
    ("GET", "/ws"),
    ("GET", "/ws/{token}"),
    ("POST", "/hook"),
    ("POST", "/hook/{*path}"),
    ("GET", "/stats"),
    ("GET", "/metrics"),
];
