//! salt-api's settings: the `rest_cherrypy` block of the master config (or `rest_tornado` as
//! a fallback), with Salt's defaults, plus the master options the API uses.

use std::path::PathBuf;

use brine_protocol::config::MasterConfig;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub port: u16,
    pub host: String,
    pub disable_ssl: bool,
    pub ssl_crt: Option<PathBuf>,
    pub ssl_key: Option<PathBuf>,
    pub debug: bool,
    pub root_prefix: String,
    pub static_dir: Option<PathBuf>,
    pub static_path: String,
    pub app: Option<PathBuf>,
    pub app_path: String,
    pub webhook_url: String,
    pub webhook_disable_auth: bool,
    pub collect_stats: bool,
    pub stats_disable_auth: bool,
    pub expire_responses: bool,
    pub max_request_body_size: usize,
    /// Requests served at once; beyond this the API answers 503 (Brine).
    pub max_concurrent_requests: usize,
    /// Events kept for `Last-Event-ID` resumption (Brine).
    pub event_replay: usize,
    /// What one peer may hold (Brine).
    pub limits: Limits,
    /// Seconds a synchronous runner call waits (`rest_timeout`).
    pub rest_timeout: u64,
    pub enable_sessions: bool,
    /// Origins allowed to read answers cross-site (`cors_origin`, as rest_tornado reads it):
    /// none by default, so no CORS headers are sent.
    pub cors: CorsOrigins,
}

/// Bounds a hostile or broken peer cannot exceed, all Brine settings (`brine_` keys of the
/// same block). Salt's salt-api has none of them but CherryPy's socket timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Connections open at once (`brine_max_connections`); beyond it new ones are closed.
    pub max_connections: usize,
    /// Connections open at once from one address (`brine_max_connections_per_address`).
    pub max_connections_per_address: usize,
    /// Time a client has to send a request's headers, and the longest a kept-alive connection
    /// stays idle (`brine_header_timeout`, seconds); TLS handshakes get the same.
    pub header_timeout: std::time::Duration,
    /// Time a client has to send a request's body (`brine_body_timeout`, seconds): 408 after.
    pub body_timeout: std::time::Duration,
    /// `/events` and `/ws` streams open at once with one token (`brine_max_streams_per_token`):
    /// 429 beyond it.
    pub max_streams_per_token: usize,
    /// Failed sign-ins for one user name in a minute before its sign-ins get 429 for the rest
    /// of that minute (`brine_login_failures_per_user`).
    pub login_failures_per_user: u32,
    /// The same for one client address (`brine_login_failures_per_address`).
    pub login_failures_per_address: u32,
    /// Lowstate chunks in one request (`brine_max_lowstate_chunks`): each may publish a job,
    /// so a body full of small chunks is 400 beyond it.
    pub max_lowstate_chunks: usize,
}

/// The `cors_origin` setting.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum CorsOrigins {
    /// Not configured: no CORS headers at all.
    #[default]
    None,
    /// `'*'`: any origin, never with credentials.
    Any,
    /// These origins exactly (scheme://host[:port]), with credentials.
    List(Vec<String>),
}

impl CorsOrigins {
    fn from_value(v: Option<&Value>) -> Result<CorsOrigins, &'static str> {
        let origins: Vec<String> = match v {
            None => return Ok(CorsOrigins::None),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or("expected an origin or a list of origins")?,
            Some(_) => return Err("expected an origin or a list of origins"),
        };
        let origins: Vec<String> = origins
            .into_iter()
            .map(|o| o.trim().trim_end_matches('/').to_string())
            .filter(|o| !o.is_empty())
            .collect();
        Ok(if origins.iter().any(|o| o == "*") {
            CorsOrigins::Any
        } else if origins.is_empty() {
            CorsOrigins::None
        } else {
            CorsOrigins::List(origins)
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiConfigError {
    #[error("{file}: no rest_cherrypy (or rest_tornado) block with a port: salt-api has nothing to serve")]
    NoApi { file: String },
    #[error("{file}: key '{section}.{key}': {msg}")]
    Bad {
        file: String,
        section: &'static str,
        key: String,
        msg: String,
    },
}

fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Some(true),
            "false" | "no" | "off" | "0" => Some(false),
            _ => None,
        },
        Value::Number(n) => n.as_i64().map(|i| i != 0),
        _ => None,
    }
}

fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl ApiConfig {
    pub fn from_master(cfg: &MasterConfig) -> Result<ApiConfig, ApiConfigError> {
        let (section, block) = if cfg.rest_cherrypy.get("port").is_some() {
            ("rest_cherrypy", &cfg.rest_cherrypy)
        } else if cfg.rest_tornado.get("port").is_some() {
            ("rest_tornado", &cfg.rest_tornado)
        } else {
            let file = cfg
                .source_of("rest_cherrypy")
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "master config".into());
            return Err(ApiConfigError::NoApi { file });
        };
        let file = cfg
            .source_of(section)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "master config".into());
        let bad = |key: &str, msg: &str| ApiConfigError::Bad {
            file: file.clone(),
            section,
            key: key.to_string(),
            msg: msg.to_string(),
        };
        let get = |k: &str| block.get(k).filter(|v| !v.is_null());
        let boolean = |k: &str, default: bool| -> Result<bool, ApiConfigError> {
            match get(k) {
                None => Ok(default),
                Some(v) => as_bool(v).ok_or_else(|| bad(k, "expected a boolean")),
            }
        };
        let string = |k: &str, default: &str| -> Result<String, ApiConfigError> {
            match get(k) {
                None => Ok(default.to_string()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(Value::Number(n)) => Ok(n.to_string()),
                Some(_) => Err(bad(k, "expected a string")),
            }
        };
        let number = |k: &str, default: u64| -> Result<u64, ApiConfigError> {
            match get(k) {
                None => Ok(default),
                Some(v) => as_u64(v).ok_or_else(|| bad(k, "expected a non-negative integer")),
            }
        };
        // A timeout: whole seconds, 1 to a day.
        let seconds = |k: &str, default: u64| -> Result<std::time::Duration, ApiConfigError> {
            match number(k, default)? {
                n @ 1..=86_400 => Ok(std::time::Duration::from_secs(n)),
                _ => Err(bad(k, "expected a number of seconds from 1 to 86400")),
            }
        };
        let port = number("port", 0)?;
        if port == 0 || port > 65535 {
            return Err(bad("port", "expected a port number (1-65535)"));
        }
        let path = |k: &str| -> Result<Option<PathBuf>, ApiConfigError> {
            Ok(match get(k) {
                None => None,
                Some(Value::String(s)) if s.is_empty() => None,
                Some(Value::String(s)) => Some(PathBuf::from(s)),
                Some(_) => return Err(bad(k, "expected a path")),
            })
        };
        let host_key = if section == "rest_tornado" {
            "address"
        } else {
            "host"
        };
        let mut root_prefix = string("root_prefix", "/")?;
        if !root_prefix.starts_with('/') {
            root_prefix.insert(0, '/');
        }
        let root_prefix = root_prefix.trim_end_matches('/').to_string();
        let norm = |p: String| {
            let p = if p.starts_with('/') {
                p
            } else {
                format!("/{p}")
            };
            p.trim_end_matches('/').to_string()
        };
        let rest_timeout = cfg.rest_timeout;
        let api = ApiConfig {
            port: port as u16,
            host: string(host_key, "0.0.0.0")?,
            disable_ssl: boolean("disable_ssl", false)?,
            ssl_crt: path("ssl_crt")?,
            ssl_key: path("ssl_key")?,
            debug: boolean("debug", false)?,
            root_prefix,
            static_dir: path("static")?,
            static_path: norm(string("static_path", "/static")?),
            app: path("app")?,
            app_path: norm(string("app_path", "/app")?),
            webhook_url: norm(string("webhook_url", "/hook")?),
            webhook_disable_auth: boolean("webhook_disable_auth", false)?,
            collect_stats: boolean("collect_stats", false)?,
            stats_disable_auth: boolean("stats_disable_auth", false)?,
            expire_responses: boolean("expire_responses", true)?,
            max_request_body_size: number("max_request_body_size", 1_048_576)? as usize,
            max_concurrent_requests: number("brine_max_concurrent_requests", 1024)?.max(1) as usize,
            event_replay: number("brine_event_replay", 1000)? as usize,
            limits: Limits {
                max_connections: number("brine_max_connections", 4096)?.max(1) as usize,
                max_connections_per_address: number("brine_max_connections_per_address", 256)?
                    .max(1) as usize,
                header_timeout: seconds("brine_header_timeout", 10)?,
                body_timeout: seconds("brine_body_timeout", 30)?,
                max_streams_per_token: number("brine_max_streams_per_token", 16)?.max(1) as usize,
                login_failures_per_user: number("brine_login_failures_per_user", 10)?
                    .clamp(1, u32::MAX as u64) as u32,
                login_failures_per_address: number("brine_login_failures_per_address", 30)?
                    .clamp(1, u32::MAX as u64) as u32,
                max_lowstate_chunks: number("brine_max_lowstate_chunks", 256)?.max(1) as usize,
            },
            rest_timeout,
            enable_sessions: boolean("enable_sessions", true)?,
            cors: CorsOrigins::from_value(get("cors_origin")).map_err(|m| bad("cors_origin", m))?,
        };
        if !api.disable_ssl && (api.ssl_crt.is_none() || api.ssl_key.is_none()) {
            return Err(bad(
                "ssl_crt",
                "ssl_crt and ssl_key are required unless disable_ssl is True",
            ));
        }
        Ok(api)
    }
}
