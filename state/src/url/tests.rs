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
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
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
            let req = Seen {
                method,
                path,
                headers,
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

#[test]
fn tls_is_verified_unless_verify_ssl_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let Some((cert, key)) = self_signed(dir.path()) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the openssl command is missing"
        );
        eprintln!("skipped: no openssl command");
        return;
    };
    let base = serve_tls(&cert, &key);
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
