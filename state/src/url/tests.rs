use super::*;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::sync::Mutex;

/// A request as the test server saw it: method, path, headers (names lowercased).
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

type Handler = dyn Fn(&Seen) -> Vec<u8> + Send + Sync;

/// The request line and headers read from a connection.
fn read_request(stream: &std::net::TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Some(Seen {
        method,
        path,
        headers,
    })
}

/// A server on 127.0.0.1:0 answering every connection's one request with `handler`; the
/// requests seen.
fn serve(handler: Box<Handler>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Some(req) = read_request(&stream) else {
                continue;
            };
            log.lock().unwrap().push(req.clone());
            let _ = stream.write_all(&handler(&req));
        }
    });
    (base, seen)
}

fn response(status: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    out.push_str(body);
    out.into_bytes()
}

fn files() -> Box<Handler> {
    Box::new(|req: &Seen| {
        let path = req.path.split('?').next().unwrap_or("");
        match path {
            "/a.txt" => response("200 OK", &[], "hello\n"),
            "/r" => response("302 Found", &[("Location", "/a.txt")], ""),
            p if p.starts_with("/loop") => {
                let n: u32 = p[5..].parse().unwrap_or(0);
                response("302 Found", &[("Location", &format!("/loop{}", n + 1))], "")
            }
            "/etag" => {
                if req.header("if-none-match") == Some("\"v1\"") {
                    response("304 Not Modified", &[("ETag", "\"v1\"")], "")
                } else {
                    response("200 OK", &[("ETag", "\"v1\"")], "tagged\n")
                }
            }
            "/short" => response("200 OK", &[("Content-Length", "10")], "abc"),
            _ => response("404 File not found", &[], "nope"),
        }
    })
}

#[test]
fn the_cache_path_is_salts_extrn_path() {
    let c = Path::new("/var/cache/salt/minion");
    let p = |u: &str| extrn_path(c, u, "base").unwrap().display().to_string();
    assert_eq!(
        p("http://127.0.0.1:8000/a/b.txt"),
        "/var/cache/salt/minion/extrn_files/base/127.0.0.18000/a/b.txt"
    );
    assert_eq!(
        p("https://user:pw@Example.com/f.txt?v=1&x=2#frag"),
        "/var/cache/salt/minion/extrn_files/base/Example.com/f.txt-v=1&x=2"
    );
    assert_eq!(p("http://h/"), "/var/cache/salt/minion/extrn_files/base/h");
    assert_eq!(
        p("http://h/d/?q=a/b"),
        "/var/cache/salt/minion/extrn_files/base/h/d/-q=a/b"
    );
    let long = format!("/{}", "x".repeat(255));
    assert_eq!(
        p(&format!("http://h{long}")),
        format!(
            "/var/cache/salt/minion/extrn_files/base/h/{}",
            hash_hex(long.as_bytes(), HashType::Sha256)
        )
    );
    assert_eq!(
        extrn_path(c, "http://h/../../x", "base"),
        Err("Invalid path".to_string())
    );
}

#[test]
fn credentials_are_redacted_as_salt_redacts_them() {
    assert_eq!(
        redact_http_basic_auth("http://u:p@h/a"),
        "http://<redacted>@h/a"
    );
    assert_eq!(
        redact_http_basic_auth("Failed to cache HTTPS://u:p@h/a@b: x"),
        "Failed to cache HTTPS://<redacted>@b: x"
    );
    assert_eq!(redact_http_basic_auth("http://h/a"), "http://h/a");
    assert_eq!(
        redact_http_basic_auth("a http://u@h\nhttp://x/y"),
        "a http://<redacted>@h\nhttp://x/y"
    );
    assert_eq!(url_path("http://u:p@h:1/a/b;p?q=1"), "/a/b");
    assert_eq!(url_path("http://h"), "");
}

#[test]
fn urls_are_fetched_into_the_cache() {
    let (base, seen) = serve(files());
    let dir = tempfile::tempdir().unwrap();
    let opts = HttpOptions::default();
    let get = |url: &str, fetch: &Fetch| cache_url(&opts, dir.path(), url, "base", fetch);
    let host = base.trim_start_matches("http://").replace(':', "");
    // 200: into the cache, no .part left.
    let got = get(&format!("{base}/a.txt"), &Fetch::default()).unwrap();
    assert_eq!(
        got,
        dir.path().join(format!("extrn_files/base/{host}/a.txt"))
    );
    assert_eq!(std::fs::read(&got).unwrap(), b"hello\n");
    assert!(!PathBuf::from(format!("{}.part", got.display())).exists());
    assert_eq!(
        seen.lock().unwrap().last().unwrap().header("user-agent"),
        Some(USER_AGENT)
    );
    // A cached copy with the hash asked for: no request.
    let n = seen.lock().unwrap().len();
    let sha = hash_hex(b"hello\n", HashType::Sha256);
    let fetch = Fetch {
        source_hash: Some(format!("sha256={sha}")),
        ..Fetch::default()
    };
    assert_eq!(get(&format!("{base}/a.txt"), &fetch).unwrap(), got);
    assert_eq!(seen.lock().unwrap().len(), n);
    // 404: Salt's text, the path only, the credentials sent as Basic auth.
    let url = format!(
        "{}/missing.txt?x=1",
        base.replace("http://", "http://user:s3cret@")
    );
    assert_eq!(
        get(&url, &Fetch::default()),
        Err("Error: HTTP 404: File not found reading /missing.txt".to_string())
    );
    let last = seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(last.header("authorization"), Some("Basic dXNlcjpzM2NyZXQ="));
    assert_eq!(last.path, "/missing.txt?x=1");
    // A redirect: cached under the URL asked for.
    let got = get(&format!("{base}/r"), &Fetch::default()).unwrap();
    assert!(got.ends_with("r"));
    assert_eq!(std::fs::read(&got).unwrap(), b"hello\n");
    // Too many redirects: the last one is the error.
    assert_eq!(
        get(&format!("{base}/loop0"), &Fetch::default()),
        Err("Error: HTTP 302: Found reading /loop0".to_string())
    );
    assert!(seen.lock().unwrap().iter().any(|s| s.path == "/loop5"));
    assert!(!seen.lock().unwrap().iter().any(|s| s.path == "/loop6"));
    // ETag: stored, sent back, a 304 keeps the cached copy.
    let etag = Fetch {
        use_etag: true,
        ..Fetch::default()
    };
    let got = get(&format!("{base}/etag"), &etag).unwrap();
    assert_eq!(
        std::fs::read_to_string(format!("{}.etag", got.display())).unwrap(),
        "\"v1\""
    );
    std::fs::write(&got, "kept\n").unwrap();
    assert_eq!(get(&format!("{base}/etag"), &etag).unwrap(), got);
    assert_eq!(std::fs::read(&got).unwrap(), b"kept\n");
    let last = seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(last.header("if-none-match"), Some("\"v1\""));
    assert_eq!(last.method, "GET");
    // A body shorter than its Content-Length.
    assert_eq!(
        get(&format!("{base}/short"), &Fetch::default()),
        Err(format!("Failed to download {base}/short: expected 10 bytes but received 3 bytes (truncated download)"))
    );
    // HEAD for source lists.
    assert!(head_ok(&opts, &format!("{base}/a.txt")));
    assert!(!head_ok(&opts, &format!("{base}/missing.txt")));
}

#[test]
fn errors_on_the_way_have_pythons_texts() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/x");
    assert_eq!(
        cache_url(
            &HttpOptions::default(),
            dir.path(),
            &url,
            "base",
            &Fetch::default()
        ),
        Err("Error: [Errno 111] Connection refused reading /x".to_string())
    );
    assert!(cache_url(
        &HttpOptions::default(),
        dir.path(),
        "ftp://h/x",
        "base",
        &Fetch::default()
    )
    .unwrap_err()
    .contains("cannot be fetched"));
}

#[test]
fn options_come_from_the_minions() {
    let opts: Map<String, Value> = serde_json::from_value(serde_json::json!({
        "ca_bundle": "/etc/my.pem", "http_connect_timeout": 1.5, "http_request_timeout": 30,
        "http_max_body": 10
    }))
    .unwrap();
    let o = HttpOptions::from_opts(&opts);
    assert_eq!(o.ca_bundle, Some(PathBuf::from("/etc/my.pem")));
    assert_eq!(o.connect_timeout, Duration::from_millis(1500));
    assert_eq!(o.request_timeout, Duration::from_secs(30));
    assert_eq!(o.max_body, 10);
}

/// A self-signed certificate for 127.0.0.1 made by the `openssl` command in `dir`: the
/// certificate's and the key's paths; `None` without the command.
fn self_signed(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let ok = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some((cert, key))
}

/// An HTTPS server on 127.0.0.1:0 with the certificate given, answering every request with
/// `hello\n`; its base URL.
fn serve_tls(cert: &Path, key: &Path) -> String {
    let certs: Vec<_> = rustls_pemfile::certs(&mut std::fs::read(cert).unwrap().as_slice())
        .map(Result::unwrap)
        .collect();
    let key = rustls_pemfile::private_key(&mut std::fs::read(key).unwrap().as_slice())
        .unwrap()
        .unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, stream);
            let mut reader = BufReader::new(&mut tls);
            let mut line = String::new();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
            }
            let _ = tls.write_all(&response("200 OK", &[], "hello\n"));
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    base
}

/// An HTTPS server ([`serve_tls`]) with a certificate made in `dir`: the certificate's path
/// and the server's base URL; `None` (the test skipped) without the `openssl` command, which
/// CI must have.
fn tls_origin(dir: &Path) -> Option<(PathBuf, String)> {
    let Some((cert, key)) = self_signed(dir) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the openssl command is missing"
        );
        eprintln!("skipped: no openssl command");
        return None;
    };
    let base = serve_tls(&cert, &key);
    Some((cert, base))
}

#[test]
fn tls_is_verified_unless_verify_ssl_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let Some((cert, base)) = tls_origin(dir.path()) else {
        return;
    };
    let url = format!("{base}/a.txt");
    let cache = dir.path().join("cache");
    // Against the system's bundle: refused.
    let err = cache_url(
        &HttpOptions::default(),
        &cache,
        &url,
        "base",
        &Fetch::default(),
    )
    .unwrap_err();
    assert!(
        err.starts_with("Error: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
            && err.ends_with(" reading /a.txt"),
        "{err}"
    );
    // verify_ssl off.
    let off = Fetch {
        verify_ssl: false,
        ..Fetch::default()
    };
    let got = cache_url(&HttpOptions::default(), &cache, &url, "base", &off).unwrap();
    assert_eq!(std::fs::read(&got).unwrap(), b"hello\n");
    // The minion's ca_bundle trusts it.
    std::fs::remove_file(&got).unwrap();
    let opts = HttpOptions {
        ca_bundle: Some(cert.clone()),
        ..HttpOptions::default()
    };
    let got = cache_url(&opts, &cache, &url, "base", &Fetch::default()).unwrap();
    assert_eq!(std::fs::read(&got).unwrap(), b"hello\n");
}

/// What the test proxies take as `Proxy-Authorization` (`pu:pp`).
const PROXY_AUTH: &str = "Basic cHU6cHA=";

/// An HTTP proxy's handler for absolute-URI requests: the path answered by [`files`], a
/// `407` without [`PROXY_AUTH`], a `400` to an origin-form request. Its origin is never
/// contacted, so a URL whose host does not resolve is fetched only through it.
fn proxy_files() -> Box<Handler> {
    let files = files();
    Box::new(move |req: &Seen| {
        if req.header("proxy-authorization") != Some(PROXY_AUTH) {
            return response("407 Proxy Authentication Required", &[], "");
        }
        let Some(rest) = req.path.strip_prefix("http://") else {
            return response("400 Bad Request", &[], "not an absolute URI");
        };
        let path = rest.find('/').map_or("/", |i| &rest[i..]);
        files(&Seen {
            path: path.to_string(),
            ..req.clone()
        })
    })
}

fn proxy_opts(port: impl Into<Value>, password: &str) -> HttpOptions {
    let opts: Map<String, Value> = serde_json::from_value(serde_json::json!({
        "proxy_host": "127.0.0.1", "proxy_port": port.into(), "proxy_username": "pu",
        "proxy_password": password, "no_proxy": ["127.0.0.1"]
    }))
    .unwrap();
    HttpOptions::from_opts(&opts)
}

fn port_of(base: &str) -> u16 {
    base.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn proxy_options_are_salts() {
    let read = |v: Value| HttpOptions::from_opts(&serde_json::from_value(v).unwrap()).proxy;
    assert_eq!(
        read(serde_json::json!({"proxy_host": "px", "proxy_port": "3128",
            "proxy_username": "u", "proxy_password": "p", "no_proxy": "a.example, b"})),
        Some(HttpProxy {
            host: "px".into(),
            port: "3128".into(),
            credentials: Some(("u".into(), "p".into())),
            no_proxy: vec!["a.example".into(), "b".into()],
        })
    );
    // Both host and port, or no proxy; credentials only as a pair.
    assert_eq!(read(serde_json::json!({"proxy_host": "px"})), None);
    assert_eq!(read(serde_json::json!({"proxy_port": 3128})), None);
    assert_eq!(
        read(serde_json::json!({"proxy_host": "px", "proxy_port": 3128, "proxy_username": "u"}))
            .unwrap()
            .credentials,
        None
    );
}

#[test]
fn http_urls_go_through_the_proxy_with_its_credentials() {
    let (proxy, seen) = serve(proxy_files());
    let opts = proxy_opts(port_of(&proxy), "pp");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // origin.invalid does not resolve: only the proxy can answer.
    let got = cache_url(
        &opts,
        &cache,
        "http://user:pw@origin.invalid/a.txt?v=1",
        "base",
        &Fetch::default(),
    )
    .unwrap();
    assert_eq!(std::fs::read(&got).unwrap(), b"hello\n");
    {
        let seen = seen.lock().unwrap();
        let req = seen.last().unwrap();
        assert_eq!(req.path, "http://origin.invalid/a.txt?v=1");
        assert_eq!(req.header("proxy-authorization"), Some(PROXY_AUTH));
        // The URL's own credentials go to the origin, as without a proxy.
        assert_eq!(req.header("authorization"), Some("Basic dXNlcjpwdw=="));
    }
    // Redirects are followed through the proxy.
    let body = fetch_bytes(&opts, "http://origin.invalid/r", &Fetch::default()).unwrap();
    assert_eq!(body, b"hello\n");
    assert_eq!(
        seen.lock().unwrap().last().unwrap().path,
        "http://origin.invalid/a.txt"
    );
    // Error statuses in requests' words.
    let err = fetch_bytes(&opts, "http://origin.invalid/missing", &Fetch::default()).unwrap_err();
    assert_eq!(
        err,
        "Error: 404 Client Error: File not found for url: http://origin.invalid/missing reading /missing"
    );
    let wrong = proxy_opts(port_of(&proxy), "nope");
    let err = fetch_bytes(&wrong, "http://origin.invalid/a.txt", &Fetch::default()).unwrap_err();
    assert_eq!(
        err,
        "Error: 407 Client Error: Proxy Authentication Required for url: http://origin.invalid/a.txt reading /a.txt"
    );
    // A host in no_proxy is fetched directly.
    let (origin, origin_seen) = serve(files());
    let before = seen.lock().unwrap().len();
    let body = fetch_bytes(&opts, &format!("{origin}/a.txt"), &Fetch::default()).unwrap();
    assert_eq!(body, b"hello\n");
    assert_eq!(seen.lock().unwrap().len(), before);
    let direct = origin_seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(direct.path, "/a.txt");
    assert_eq!(direct.header("proxy-authorization"), None);
    // A proxy that is not there, and one whose port is not a port.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let err = fetch_bytes(
        &proxy_opts(closed, "pp"),
        "http://origin.invalid/a.txt",
        &Fetch::default(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        format!("Error: Unable to connect to proxy 127.0.0.1:{closed}: [Errno 111] Connection refused reading /a.txt")
    );
    let err = fetch_bytes(
        &proxy_opts("31x", "pp"),
        "http://origin.invalid/a.txt",
        &Fetch::default(),
    )
    .unwrap_err();
    assert_eq!(err, "Error: invalid proxy_port \"31x\" reading /a.txt");
    assert!(!head_ok(&wrong, "http://origin.invalid/a.txt"));
    assert!(head_ok(&opts, "http://origin.invalid/a.txt"));
}

/// A proxy on 127.0.0.1:0 that opens `CONNECT` tunnels (a `407` without [`PROXY_AUTH`]): its
/// base URL and the requests it saw.
fn serve_connect() -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut client) = stream else { return };
            // Nothing follows the CONNECT's head until it is answered.
            let Some(req) = read_request(&client) else {
                continue;
            };
            log.lock().unwrap().push(req.clone());
            // ureq writes the scheme in lower case; HTTP takes it in any case.
            let authorized = req
                .header("proxy-authorization")
                .is_some_and(|a| a.eq_ignore_ascii_case(PROXY_AUTH));
            let upstream = (req.method == "CONNECT")
                .then(|| std::net::TcpStream::connect(&req.path).ok())
                .flatten();
            let (true, Some(upstream)) = (authorized, upstream) else {
                let _ = client.write_all(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n",
                );
                continue;
            };
            let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
            let (mut c2, mut u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
            let mut upstream = upstream;
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut u2, &mut c2);
                let _ = c2.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut client, &mut upstream);
                let _ = upstream.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (base, seen)
}

#[test]
fn https_urls_go_through_a_connect_tunnel() {
    let dir = tempfile::tempdir().unwrap();
    let Some((cert, origin)) = tls_origin(dir.path()) else {
        return;
    };
    let (proxy, seen) = serve_connect();
    let mut opts = proxy_opts(port_of(&proxy), "pp");
    opts.proxy.as_mut().unwrap().no_proxy.clear();
    opts.ca_bundle = Some(cert.clone());
    let url = format!("{origin}/a.txt");
    let body = fetch_bytes(&opts, &url, &Fetch::default()).unwrap();
    assert_eq!(body, b"hello\n");
    let req = seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("CONNECT", origin.trim_start_matches("https://"))
    );
    assert!(req
        .header("proxy-authorization")
        .is_some_and(|a| a.eq_ignore_ascii_case(PROXY_AUTH)));
    // Wrong credentials: the tunnel is refused.
    let mut wrong = opts.clone();
    wrong.proxy.as_mut().unwrap().credentials = Some(("pu".into(), "nope".into()));
    let err = fetch_bytes(&wrong, &url, &Fetch::default()).unwrap_err();
    assert_eq!(
        err,
        "Error: Tunnel connection failed: 407 Proxy Authentication Required reading /a.txt"
    );
}
