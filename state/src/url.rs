//! Files over HTTP and HTTPS, as Salt's file client fetches them (`Client.get_url` through
//! `salt.utils.http.query`): into the minion's cache at `extrn_files/<saltenv>/<host>/<path>`
//! ([`cache_url`], [`extrn_path`]), written to a `.part` file that is renamed into place once
//! the whole body is in, and not fetched at all when the cached copy already has the
//! `source_hash` asked for; or to a path of one's own ([`download_to`]) or into memory
//! ([`fetch_bytes`]); [`head_ok`] tells whether a URL exists. Credentials in the URL are sent as HTTP Basic auth and never leave the URL otherwise
//! ([`redact_http_basic_auth`] for messages); up to 5 redirects are followed, dropping the
//! credentials on a redirect to another origin; `If-None-Match` with a stored ETag when
//! `use_etag` is asked for; connect and request timeouts and a body size limit from the
//! minion's options ([`HttpOptions`]). TLS is verified against the minion's `ca_bundle` or the
//! system's bundle unless `verify_ssl` is off. With Salt's `proxy_host` and `proxy_port` set
//! ([`HttpProxy`]), requests go through that HTTP proxy as Salt's `requests` backend sends
//! them: `http://` URLs as absolute-URI requests to the proxy (`Proxy-Authorization: Basic`
//! from `proxy_username`/`proxy_password`), `https://` URLs through a `CONNECT` tunnel (the
//! credentials in the `CONNECT` only); hosts named in `no_proxy` are fetched directly, and an
//! error status through the proxy reads as `requests` words it. No proxy is read from the
//! environment.
//!
//! Errors have Salt's texts: `Error: HTTP 404: File not found reading /path` (the status,
//! the server's reason phrase and only the URL's path), `Error: [Errno 111] Connection
//! refused reading /path` for socket errors.
//!
//! `ftp://`, `s3://` and `swift://` are refused by name ([`refused`]).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use brine_protocol::crypt::{hash_hex, HashType};
use brine_protocol::pyrepr::os_error;
use serde_json::{Map, Value};

/// What Salt's `http.query` sends as its `User-agent`.
pub const USER_AGENT: &str = "Salt/3007.15 http.query()";

/// Redirects followed before a redirect is an error (tornado's `max_redirects`).
const MAX_REDIRECTS: usize = 5;

/// Salt's longest cache file name before it is replaced by its sha256.
const MAX_FILENAME_LENGTH: usize = 255;

/// The system CA bundles looked for, in Salt's order (`salt.utils.http.get_ca_bundle`).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/tls/certs/ca-bundle.trust.crt",
    "/etc/ssl/certs/ca-bundle.crt",
    "/var/lib/ca-certificates/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The minion's options for HTTP: Salt's `ca_bundle`, `http_connect_timeout` (20 s),
/// `http_request_timeout` (3600 s) and `http_max_body` (100 GiB).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpOptions {
    pub ca_bundle: Option<PathBuf>,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub max_body: u64,
    pub proxy: Option<HttpProxy>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            ca_bundle: None,
            connect_timeout: Duration::from_secs(20),
            request_timeout: Duration::from_secs(3600),
            max_body: 100 * 1024 * 1024 * 1024,
            proxy: None,
        }
    }
}

/// An HTTP proxy from the minion's options: Salt's `proxy_host` and `proxy_port` (both set, or
/// no proxy), `proxy_username` and `proxy_password` (sent only when both are set) and
/// `no_proxy` (host names fetched directly; a text is read as a comma-separated list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpProxy {
    pub host: String,
    /// As the options give it; checked when a request is made.
    pub port: String,
    pub credentials: Option<(String, String)>,
    pub no_proxy: Vec<String>,
}

impl HttpProxy {
    fn from_opts(opts: &Map<String, Value>) -> Option<HttpProxy> {
        let text = |key: &str| match opts.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let host = text("proxy_host")?;
        let port = text("proxy_port").filter(|p| p != "0")?;
        let credentials = text("proxy_username").zip(text("proxy_password"));
        let no_proxy = match opts.get("no_proxy") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(Value::String(s)) => s
                .split(',')
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .collect(),
            _ => Vec::new(),
        };
        Some(HttpProxy {
            host,
            port,
            credentials,
            no_proxy,
        })
    }

    /// Whether a request to `url` goes through the proxy: its host is not in `no_proxy`
    /// (compared as Salt compares, with the URL's lowercased host name).
    fn applies_to(&self, url: &url::Url) -> bool {
        let host = url
            .host_str()
            .unwrap_or("")
            .trim_start_matches('[')
            .trim_end_matches(']');
        !self.no_proxy.iter().any(|h| h == host)
    }

    /// The proxy for ureq; the port checked.
    fn for_agent(&self) -> Result<ureq::Proxy, String> {
        let port: u16 = self
            .port
            .trim()
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("invalid proxy_port {:?}", self.port))?;
        let creds = match &self.credentials {
            Some((user, password)) => format!("{user}:{password}@"),
            None => String::new(),
        };
        ureq::Proxy::new(format!("http://{creds}{}:{port}", self.host))
            .map_err(|e| format!("invalid proxy {}:{port}: {e}", self.host))
    }

    /// The `Proxy-Authorization` header an `http://` request through the proxy carries.
    fn authorization(&self) -> Option<String> {
        let (user, password) = self.credentials.as_ref()?;
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        ))
    }
}

impl HttpOptions {
    /// The options from a minion's options map; Salt's defaults for what it does not set.
    pub fn from_opts(opts: &Map<String, Value>) -> HttpOptions {
        let mut out = HttpOptions::default();
        let secs = |key: &str| {
            opts.get(key)
                .and_then(|v| v.as_f64().or_else(|| v.as_str()?.trim().parse().ok()))
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
        };
        if let Some(d) = secs("http_connect_timeout") {
            out.connect_timeout = d;
        }
        if let Some(d) = secs("http_request_timeout") {
            out.request_timeout = d;
        }
        if let Some(n) = opts.get("http_max_body").and_then(Value::as_u64) {
            out.max_body = n;
        }
        out.ca_bundle = opts
            .get("ca_bundle")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        out.proxy = HttpProxy::from_opts(opts);
        out
    }

    /// The proxy a request to `url` goes through, if any.
    fn proxy_for(&self, url: &url::Url) -> Option<&HttpProxy> {
        self.proxy.as_ref().filter(|p| p.applies_to(url))
    }
}

/// How a URL is fetched into the cache (the arguments of Salt's `cp.cache_file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// A hash (`<type>=<hex>` or bare hex) the cached copy is checked against first: when it
    /// has it, nothing is fetched.
    pub source_hash: Option<String>,
    pub verify_ssl: bool,
    /// Send the stored ETag as `If-None-Match` and keep the cached copy on a 304.
    pub use_etag: bool,
}

impl Default for Fetch {
    fn default() -> Self {
        Fetch {
            source_hash: None,
            verify_ssl: true,
            use_etag: false,
        }
    }
}

/// The scheme of a URL as Python's `urlparse` reads it: letters, digits, `+`, `-` and `.`
/// before the first `:`, starting with a letter; lowercased. Empty when there is none.
pub fn url_scheme(url: &str) -> String {
    let Some((scheme, _)) = url.split_once(':') else {
        return String::new();
    };
    let valid = scheme.starts_with(|ch: char| ch.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "+-.".contains(ch));
    if valid {
        scheme.to_ascii_lowercase()
    } else {
        String::new()
    }
}

/// A `salt://` URL's path and saltenv (`?saltenv=` in the URL, else `saltenv`).
pub fn split_salt_url(source: &str, saltenv: &str) -> (String, String) {
    let rest = source.strip_prefix("salt://").unwrap_or(source);
    match rest.split_once("?saltenv=") {
        Some((p, env)) => (p.to_string(), env.to_string()),
        None => (rest.to_string(), saltenv.to_string()),
    }
}

/// Salt's `cp.is_cached`: the local path of a cached master file
/// (`<cachedir>/files/<saltenv>/...`), a local file cached with `cp.cache_local_file`
/// (`localfiles/`) or a cached URL (`extrn_files/`), `|`-escaped paths kept escaped; `""`
/// when it is not cached.
pub fn is_cached(cachedir: &Path, path: &str, saltenv: &str) -> String {
    let (path, saltenv, escaped) = if path.starts_with("salt://") {
        let (rel, env) = split_salt_url(path, saltenv);
        let escaped = rel.starts_with('|');
        (rel, env, escaped)
    } else {
        (
            path.to_string(),
            saltenv.to_string(),
            url_scheme(path).is_empty() && path.starts_with('|'),
        )
    };
    let rel = path.trim_start_matches(['|', '/']);
    let escape = |p: PathBuf| {
        let p = p.display().to_string();
        if escaped {
            format!("|{p}")
        } else {
            p
        }
    };
    let files = cachedir.join("files").join(&saltenv).join(rel);
    let local = cachedir.join("localfiles").join(rel);
    if files.exists() {
        escape(files)
    } else if local.exists() {
        escape(local)
    } else {
        extrn_path(cachedir, &path, &saltenv)
            .ok()
            .filter(|p| p.exists())
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }
}

/// The scheme of a URL, lowercased, when it is one Salt fetches over the network (`http`,
/// `https`, `ftp`, `s3`, `swift`).
pub fn remote_scheme(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    ["http", "https", "ftp", "s3", "swift"]
        .contains(&scheme.as_str())
        .then_some(scheme)
}

/// Whether Brine fetches this URL itself: `http://` and `https://`.
pub fn is_http(url: &str) -> bool {
    matches!(remote_scheme(url).as_deref(), Some("http" | "https"))
}

/// The message for a source over a protocol Brine does not fetch (`ftp`, `s3`, `swift`).
pub fn refused(source: &str) -> String {
    format!(
        "Source {source} cannot be fetched: Brine's minion fetches http:// and https:// sources, reads sources from the master (salt://) and from its own disk, and does not support ftp://, s3:// or swift://"
    )
}

/// Salt's `redact_http_basic_auth`: `http(s)://` up to the last `@` of a line becomes
/// `http(s)://<redacted>@`.
pub fn redact_http_basic_auth(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&redact_line(line));
    }
    out
}

fn redact_line(line: &str) -> String {
    let lower = line.to_ascii_lowercase();
    // The regex's first match: the leftmost `http://` or `https://` with an `@` after it.
    let Some(at) = line.rfind('@') else {
        return line.to_string();
    };
    let mut start = None;
    let mut i = 0;
    while let Some(pos) = lower[i..].find("http") {
        let p = i + pos;
        let rest = &lower[p + 4..];
        let scheme_end = if rest.starts_with("s://") {
            Some(p + 5)
        } else if rest.starts_with("://") {
            Some(p + 4)
        } else {
            None
        };
        if let Some(end) = scheme_end {
            if end + 3 <= at {
                start = Some((p, end));
                break;
            }
        }
        i = p + 4;
        if i >= lower.len() {
            break;
        }
    }
    let Some((p, end)) = start else {
        return line.to_string();
    };
    format!(
        "{}{}://<redacted>{}",
        &line[..p],
        &line[p..end],
        &line[at..]
    )
}

/// Python's `urlparse(url).netloc` (userinfo kept) and the rest after it.
fn split_netloc(url: &str) -> (&str, &str) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    (&rest[..end], &rest[end..])
}

/// A URL's path as Salt's error messages give it (`urlparse(url, allow_fragments=False).path`):
/// no scheme, host, query or `;params`.
pub fn url_path(url: &str) -> String {
    let (_, rest) = split_netloc(url);
    let path = rest.split('?').next().unwrap_or("");
    // Without fragments a `#` stays in the path.
    let (head, last) = path.rsplit_once('/').unwrap_or(("", path));
    match last.split_once(';') {
        Some((seg, _)) if path.contains('/') => format!("{head}/{seg}"),
        Some((seg, _)) => seg.to_string(),
        None => path.to_string(),
    }
}

/// Salt's `salt.utils.path.join`: each part normalised, later parts without their leading
/// `/`, the whole normalised again.
fn salt_path_join(parts: &[&str]) -> String {
    let mut joined = String::new();
    for (i, part) in parts.iter().enumerate() {
        let norm = brine_protocol::posixpath::normpath(part);
        let piece = if i == 0 {
            norm.as_str()
        } else {
            norm.trim_start_matches('/')
        };
        if i == 0 {
            joined.push_str(piece);
        } else {
            joined = brine_protocol::posixpath::join(&joined, piece);
        }
    }
    brine_protocol::posixpath::normpath(&joined)
}

/// Salt's `_extrn_path`: where a URL is cached, `<cachedir>/extrn_files/<saltenv>/<host>/<path>`
/// with the userinfo dropped, every `:` taken out of a host with a port, `-<query>` after the
/// path, and a name longer than 255 characters replaced by its sha256. A path that would
/// leave the host's directory is refused.
pub fn extrn_path(cachedir: &Path, url: &str, saltenv: &str) -> Result<PathBuf, String> {
    let (netloc, rest) = split_netloc(url);
    let mut netloc = netloc.rsplit('@').next().unwrap_or("").to_string();
    // `urlparse(url).port`: digits after the last `:` outside an IPv6 literal.
    let hostport = netloc.rsplit(']').next().unwrap_or("");
    if let Some((_, port)) = hostport.rsplit_once(':') {
        if port.parse::<u32>().is_ok_and(|p| p > 0) {
            netloc = netloc.replace(':', "");
        }
    }
    // Default parsing: a fragment is dropped.
    let rest = rest.split('#').next().unwrap_or("");
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut file_name = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}-{query}")
    };
    let cachedir = cachedir.display().to_string();
    let root = salt_path_join(&[&cachedir, "extrn_files", saltenv, &netloc]);
    let candidate = brine_protocol::posixpath::normpath(&format!("{root}/{file_name}"));
    if !root.starts_with('/') || !candidate.starts_with(&root) {
        return Err("Invalid path".into());
    }
    if file_name.chars().count() > MAX_FILENAME_LENGTH {
        file_name = hash_hex(file_name.as_bytes(), HashType::Sha256);
    }
    Ok(PathBuf::from(salt_path_join(&[
        &cachedir,
        "extrn_files",
        saltenv,
        &netloc,
        &file_name,
    ])))
}

/// Whether the file at `path` has the hash `source_hash` (`<type>=<hex>` or bare hex; the type
/// is taken from the digest's length).
fn has_hash(path: &Path, source_hash: &str) -> bool {
    let hsum = source_hash.rsplit('=').next().unwrap_or("");
    let Some(t) = crate::states::source_hash::type_of_length(hsum.len()) else {
        return false;
    };
    std::fs::read(path).is_ok_and(|bytes| hash_hex(&bytes, t) == hsum)
}

/// Fetch an http(s) URL into the cache (Salt's `cp.cache_file` of a URL): the cached file's
/// path. `Err` carries Salt's `MinionError` text.
pub fn cache_url(
    opts: &HttpOptions,
    cachedir: &Path,
    url: &str,
    saltenv: &str,
    fetch: &Fetch,
) -> Result<PathBuf, String> {
    match remote_scheme(url).as_deref() {
        Some("http" | "https") => {}
        Some(_) => return Err(refused(url)),
        None => return Err(format!("{url} is not an http:// or https:// URL")),
    }
    let dest = extrn_path(cachedir, url, saltenv)?;
    if let Some(h) = fetch.source_hash.as_deref() {
        if has_hash(&dest, h) {
            return Ok(dest);
        }
    }
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(|e| os_error(&e, None))?;
    }
    download(opts, url, &dest, fetch)?;
    Ok(dest)
}

/// Whether a HEAD of `url` ends (after redirects) in a 2xx answer: how a `source` list picks
/// its first http(s) entry that exists.
pub fn head_ok(opts: &HttpOptions, url: &str) -> bool {
    let Ok(target) = Target::parse(url) else {
        return false;
    };
    let proxy = opts.proxy_for(&target.url);
    let Ok(agent) = agent(opts, true, proxy) else {
        return false;
    };
    matches!(send(&agent, "HEAD", &target, &[], proxy), Ok(resp) if (200..300).contains(&resp.status()))
}

/// A URL to request, its credentials taken out.
struct Target {
    url: url::Url,
    /// `Authorization: Basic ...` from the URL's userinfo.
    auth: Option<String>,
}

impl Target {
    fn parse(raw: &str) -> Result<Target, String> {
        let mut url = url::Url::parse(raw).map_err(|e| format!("{e}"))?;
        let auth = if url.username().is_empty() {
            None
        } else {
            let creds = format!("{}:{}", url.username(), url.password().unwrap_or(""));
            Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(creds)
            ))
        };
        let _ = url.set_username("");
        let _ = url.set_password(None);
        Ok(Target { url, auth })
    }
}

/// A request with Salt's redirect handling: up to 5 redirects (301, 302, 303, 307, 308 with
/// a `Location`), the credentials sent only to the first URL's origin. The last response
/// whatever its status, or the transport error's text.
/// Through a `proxy` (the one the agent was built with), an `http://` request carries the
/// proxy's credentials in `Proxy-Authorization`; an `https://` one has them in its tunnel's
/// `CONNECT` only.
fn send(
    agent: &ureq::Agent,
    method: &str,
    target: &Target,
    headers: &[(&str, String)],
    proxy: Option<&HttpProxy>,
) -> Result<ureq::Response, String> {
    let origin = target.url.origin();
    let mut current = target.url.clone();
    let mut hops = 0;
    loop {
        let mut req = agent
            .request_url(method, &current)
            .set("User-agent", USER_AGENT);
        if let Some(auth) = proxy
            .filter(|_| current.scheme() == "http")
            .and_then(HttpProxy::authorization)
        {
            req = req.set("Proxy-Authorization", &auth);
        }
        if let Some(auth) = target
            .auth
            .as_deref()
            .filter(|_| current.origin() == origin)
        {
            req = req.set("Authorization", auth);
        }
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let resp = match req.call() {
            Ok(resp) | Err(ureq::Error::Status(_, resp)) => resp,
            Err(ureq::Error::Transport(t)) => return Err(transport_text(&t, proxy)),
        };
        let redirect = matches!(resp.status(), 301 | 302 | 303 | 307 | 308);
        let next = resp.header("location").and_then(|l| current.join(l).ok());
        match next {
            Some(next) if redirect && hops < MAX_REDIRECTS => {
                hops += 1;
                current = next;
            }
            _ => return Ok(resp),
        }
    }
}

/// A blocking client with the minion's timeouts and TLS settings; redirects are followed by
/// [`send`].
fn agent(
    opts: &HttpOptions,
    verify_ssl: bool,
    proxy: Option<&HttpProxy>,
) -> Result<ureq::Agent, String> {
    let mut builder = ureq::AgentBuilder::new()
        .timeout_connect(opts.connect_timeout)
        .timeout(opts.request_timeout)
        .redirects(0)
        .tls_config(tls_config(opts, verify_ssl)?);
    if let Some(proxy) = proxy {
        builder = builder.proxy(proxy.for_agent()?);
    }
    Ok(builder.build())
}

fn tls_config(opts: &HttpOptions, verify_ssl: bool) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = if verify_ssl {
        let mut roots = rustls::RootCertStore::empty();
        let bundle = opts.ca_bundle.clone().or_else(|| {
            SYSTEM_BUNDLES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
        });
        if let Some(bundle) = bundle {
            let pem = std::fs::read(&bundle)
                .map_err(|e| os_error(&e, Some(&bundle.display().to_string())))?;
            let mut slice = pem.as_slice();
            let certs: Vec<_> = rustls_pemfile::certs(&mut slice)
                .filter_map(Result::ok)
                .collect();
            roots.add_parsable_certificates(certs);
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// `verify_ssl: False`: any certificate is taken; signatures are still checked, so the
/// handshake is sound against the certificate shown.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The text of an error on the way to an answer, as Python's socket and ssl modules word it
/// where the error allows.
fn transport_text(t: &ureq::Transport, proxy: Option<&HttpProxy>) -> String {
    let Some(proxy) = proxy else {
        return direct_transport_text(t);
    };
    match t.kind() {
        ureq::ErrorKind::ProxyUnauthorized => {
            "Tunnel connection failed: 407 Proxy Authentication Required".into()
        }
        ureq::ErrorKind::ProxyConnect => "Tunnel connection failed".into(),
        ureq::ErrorKind::ConnectionFailed | ureq::ErrorKind::Dns => format!(
            "Unable to connect to proxy {}:{}: {}",
            proxy.host,
            proxy.port,
            direct_transport_text(t)
        ),
        _ => direct_transport_text(t),
    }
}

fn direct_transport_text(t: &ureq::Transport) -> String {
    use std::error::Error as _;
    let mut source = t.source();
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(tls) = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                return tls_text(tls);
            }
            if matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) {
                return if t.kind() == ureq::ErrorKind::ConnectionFailed {
                    "HTTP 599: Timeout while connecting".into()
                } else {
                    "HTTP 599: Timeout during request".into()
                };
            }
            if io.raw_os_error().is_some() {
                return os_error(io, None);
            }
            let text = io.to_string();
            if let Some(gai) = text.strip_prefix("failed to lookup address information: ") {
                return match gai {
                    "Name or service not known" => format!("[Errno -2] {gai}"),
                    "Temporary failure in name resolution" => format!("[Errno -3] {gai}"),
                    "No address associated with hostname" => format!("[Errno -5] {gai}"),
                    _ => gai.to_string(),
                };
            }
            return text;
        }
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return tls_text(tls);
        }
        source = err.source();
    }
    match t.message() {
        Some(m) => m.to_string(),
        None => t.kind().to_string(),
    }
}

fn tls_text(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(reason) => {
            use rustls::CertificateError as C;
            // OpenSSL's words, as Python's ssl module reports them.
            let why = match reason {
                C::UnknownIssuer => "unable to get local issuer certificate".to_string(),
                C::Expired | C::ExpiredContext { .. } => "certificate has expired".to_string(),
                C::NotValidYet | C::NotValidYetContext { .. } => {
                    "certificate is not yet valid".to_string()
                }
                C::Revoked => "certificate revoked".to_string(),
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    "Hostname mismatch, certificate is not valid for this host".to_string()
                }
                other => format!("{other:?}"),
            };
            format!("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {why}")
        }
        other => format!("[SSL] {other}"),
    }
}

/// The body of an answer copied to `out`, at most `limit` bytes: how many bytes, or the
/// read error.
fn copy_body(resp: ureq::Response, out: &mut dyn Write, limit: u64) -> Result<u64, std::io::Error> {
    let mut reader = resp.into_reader().take(limit.saturating_add(1));
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(std::io::Error::new(e.kind(), BodyError { total, inner: e }));
            }
        };
        total += n as u64;
        if total > limit {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                "body too large",
            ));
        }
        out.write_all(&buf[..n])?;
    }
}

/// A read error in a body after `total` bytes.
#[derive(Debug)]
struct BodyError {
    total: u64,
    inner: std::io::Error,
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl std::error::Error for BodyError {}

/// Salt's `get_url` for http(s) once the cache path is known: the body into `<dest>.part`,
/// renamed to `dest` when it is all there; with `use_etag`, the ETag kept in `<dest>.etag`
/// and a 304 leaving `dest` as it is.
fn download(opts: &HttpOptions, url: &str, dest: &Path, fetch: &Fetch) -> Result<(), String> {
    let part = PathBuf::from(format!("{}.part", dest.display()));
    let mut out = std::fs::File::create(&part).map_err(|e| os_error(&e, None))?;
    let etag = fetch.use_etag.then_some(dest);
    // As Salt: on an error the .part file stays, holding what the server sent with it.
    let modified = get(opts, url, fetch, etag, &mut out)?;
    drop(out);
    if !modified {
        let _ = std::fs::remove_file(&part);
        return Ok(());
    }
    std::fs::rename(&part, dest)
        .map_err(|e| format!("Error: {} reading {}", os_error(&e, None), url_path(url)))
}

/// An http(s) URL fetched to `dest` (not the cache; Salt's `get_url` with a `dest`): written
/// to `<dest>.part` and renamed into place.
pub fn download_to(
    opts: &HttpOptions,
    url: &str,
    dest: &Path,
    fetch: &Fetch,
) -> Result<(), String> {
    if !is_http(url) {
        return Err(refused(url));
    }
    download(opts, url, dest, fetch)
}

/// The body of an http(s) URL (Salt's `get_url` with no cache).
pub fn fetch_bytes(opts: &HttpOptions, url: &str, fetch: &Fetch) -> Result<Vec<u8>, String> {
    if !is_http(url) {
        return Err(refused(url));
    }
    let mut out = Vec::new();
    get(opts, url, fetch, None, &mut out)?;
    Ok(out)
}

/// A GET of `url` with its body written to `out`: whether there was a body (`false` for a
/// 304 to the `If-None-Match` sent from `<etag_of>.etag`, when `etag_of` names the cached
/// file). `Err` carries Salt's `MinionError` text.
fn get(
    opts: &HttpOptions,
    url: &str,
    fetch: &Fetch,
    etag_of: Option<&Path>,
    out: &mut dyn Write,
) -> Result<bool, String> {
    let path = url_path(url);
    let fail = |e: String| format!("Error: {e} reading {path}");
    let etag_file = etag_of.map(|d| (d, PathBuf::from(format!("{}.etag", d.display()))));
    let mut headers = Vec::new();
    if let Some((dest, etag_file)) = &etag_file {
        if etag_file.exists() && dest.exists() {
            if let Ok(tag) = std::fs::read_to_string(etag_file) {
                headers.push(("If-None-Match", tag.replace('\n', "").trim().to_string()));
            }
        }
    }
    let target = Target::parse(url).map_err(fail)?;
    let proxy = opts.proxy_for(&target.url);
    let agent = agent(opts, fetch.verify_ssl, proxy).map_err(fail)?;
    let resp = send(&agent, "GET", &target, &headers, proxy).map_err(fail)?;
    let status = resp.status();
    if let Some((_, etag_file)) = &etag_file {
        if let Some(tag) = resp.header("etag") {
            let _ = std::fs::write(etag_file, tag);
        }
        if status == 304 {
            return Ok(false);
        }
    }
    if !(200..300).contains(&status) {
        let error = match proxy {
            // requests' words (Salt fetches through a proxy with it).
            Some(_) if (400..600).contains(&status) => format!(
                "{status} {} Error: {} for url: {}",
                if status < 500 { "Client" } else { "Server" },
                resp.status_text(),
                resp.get_url()
            ),
            _ => format!("HTTP {status}: {}", resp.status_text()),
        };
        let _ = copy_body(resp, out, opts.max_body);
        return Err(fail(error));
    }
    let expected: Option<u64> = resp
        .header("content-length")
        .and_then(|l| l.trim().parse().ok());
    if expected.is_some_and(|n| n > opts.max_body) {
        return Err(fail("Content-Length too long".into()));
    }
    let received = match copy_body(resp, out, opts.max_body) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            return Err(fail("body too large".into()))
        }
        Err(e) => {
            let body = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<BodyError>());
            match body {
                Some(b) if b.inner.kind() == std::io::ErrorKind::UnexpectedEof => b.total,
                Some(b)
                    if matches!(
                        b.inner.kind(),
                        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                    ) =>
                {
                    return Err(fail("HTTP 599: Timeout during request".into()))
                }
                Some(b) => return Err(fail(os_error(&b.inner, None))),
                None => return Err(fail(os_error(&e, None))),
            }
        }
    };
    if let Some(expected) = expected.filter(|n| *n != received) {
        return Err(format!("Failed to download {url}: expected {expected} bytes but received {received} bytes (truncated download)"));
    }
    out.flush().map_err(|e| fail(os_error(&e, None)))?;
    Ok(true)
}

#[cfg(test)]
mod tests;
