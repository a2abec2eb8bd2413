//! Client side of the HTTP workloads: one request shape, repeated sequentially (latency) or
//! by N concurrent clients (throughput), and /events readers that count what they receive.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::stack::USER;

/// One request of a workload: resolves to whether it succeeded (status and body checked).
pub(crate) type Req = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Send + Sync>;

/// What a successful answer looks like.
pub(crate) type Check = fn(&Value) -> bool;

pub(crate) fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .pool_max_idle_per_host(64)
        .build()
        .expect("HTTP client")
}

/// POST a JSON body (with the token, if any); succeeded when the status is 2xx and, with a
/// check, the JSON answer passes it.
pub(crate) fn post_json(
    http: &reqwest::Client,
    url: String,
    tok: Option<String>,
    body: Value,
    check: Option<Check>,
) -> Req {
    let http = http.clone();
    Arc::new(move || {
        let (http, url, tok, body) = (http.clone(), url.clone(), tok.clone(), body.clone());
        Box::pin(async move {
            let mut rq = http
                .post(url)
                .header("Accept", "application/json")
                .json(&body);
            if let Some(t) = tok {
                rq = rq.header("X-Auth-Token", t);
            }
            finish(rq.send().await, check).await
        })
    })
}

/// GET; succeeded as for [`post_json`].
pub(crate) fn get(
    http: &reqwest::Client,
    url: String,
    tok: Option<String>,
    check: Option<Check>,
) -> Req {
    let http = http.clone();
    Arc::new(move || {
        let (http, url, tok) = (http.clone(), url.clone(), tok.clone());
        Box::pin(async move {
            let mut rq = http.get(url).header("Accept", "application/json");
            if let Some(t) = tok {
                rq = rq.header("X-Auth-Token", t);
            }
            finish(rq.send().await, check).await
        })
    })
}

async fn finish(r: reqwest::Result<reqwest::Response>, check: Option<Check>) -> bool {
    let Ok(r) = r else { return false };
    let ok = r.status().is_success();
    let Ok(body) = r.bytes().await else {
        return false;
    };
    match check {
        None => ok,
        Some(c) => ok && serde_json::from_slice::<Value>(&body).is_ok_and(|v| c(&v)),
    }
}

/// `return[0].m1 == true`: the one-minion test.ping answered.
pub(crate) fn pinged_m1(v: &Value) -> bool {
    v["return"][0]["m1"] == json!(true)
}

/// `return[0].jid` is a string: a job was accepted.
pub(crate) fn got_jid(v: &Value) -> bool {
    v["return"][0]["jid"].is_string()
}

/// `return[0].token` is a string: logged in.
pub(crate) fn got_token(v: &Value) -> bool {
    v["return"][0]["token"].is_string()
}

pub(crate) async fn login(http: &reqwest::Client, base: &str) -> anyhow::Result<String> {
    let v: Value = http
        .post(format!("{base}/login"))
        .header("Accept", "application/json")
        .json(&json!({"username": USER, "password": "x", "eauth": "auto"}))
        .send()
        .await?
        .json()
        .await?;
    v["return"][0]["token"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow::anyhow!("login refused: {v}"))
}

/// Percentile `p` (0..=1) of sorted samples, nearest rank.
pub(crate) fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub samples: usize,
    pub failures: usize,
}

/// One client, sequential requests for `seconds` (and at least `min_samples` successful
/// ones, at most a minute past the deadline): latency percentiles of the successful ones.
pub(crate) async fn latency(
    req: &Req,
    seconds: f64,
    min_samples: usize,
) -> anyhow::Result<Latency> {
    let mut lat = Vec::new();
    let mut failures = 0;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let hard_end = end + Duration::from_secs(60);
    while (Instant::now() < end || lat.len() < min_samples) && Instant::now() < hard_end {
        let t = Instant::now();
        if req().await {
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
        } else {
            failures += 1;
            if failures > 20 && lat.is_empty() {
                anyhow::bail!("every request failed");
            }
        }
        if lat.len() >= 1_000_000 {
            break;
        }
    }
    anyhow::ensure!(!lat.is_empty(), "no request succeeded");
    lat.sort_by(f64::total_cmp);
    Ok(Latency {
        p50_ms: pct(&lat, 0.5),
        p99_ms: pct(&lat, 0.99),
        samples: lat.len(),
        failures,
    })
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    pub per_second: f64,
    pub failures: u64,
    /// Successful requests in all.
    pub done: u64,
}

/// `clients` concurrent loops of `req` for `seconds`: successful requests per second.
/// Requests still in flight at the deadline are waited for and counted (their time too).
pub(crate) async fn throughput(req: &Req, clients: usize, seconds: f64) -> Rate {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (req, done, failed, stop) = (req.clone(), done.clone(), failed.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if req().await {
                    done.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    // Do not spin on a refusing server.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let done = done.load(Ordering::Relaxed);
    Rate {
        per_second: done as f64 / t0.elapsed().as_secs_f64(),
        failures: failed.load(Ordering::Relaxed),
        done,
    }
}

/// Counts server-sent events (`data:` lines) read from one /events stream.
async fn read_events(
    url: String,
    tok: String,
    connected: Arc<AtomicU64>,
    count: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    let http = reqwest::Client::new();
    let Ok(mut r) = http
        .get(url)
        .header("X-Auth-Token", tok)
        .header("Accept", "text/event-stream")
        .send()
        .await
    else {
        return;
    };
    if !r.status().is_success() {
        return;
    }
    connected.fetch_add(1, Ordering::Relaxed);
    let mut pending: Vec<u8> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(200), r.chunk()).await {
            Ok(Ok(Some(b))) => {
                pending.extend_from_slice(&b);
                let n = count_data_lines(&mut pending);
                count.fetch_add(n, Ordering::Relaxed);
            }
            Ok(_) => return,
            Err(_) => {}
        }
    }
}

/// Count complete `data:` lines in `buf` and keep the unfinished last line there.
fn count_data_lines(buf: &mut Vec<u8>) -> u64 {
    let Some(last_nl) = buf.iter().rposition(|b| *b == b'\n') else {
        return 0;
    };
    let n = buf[..last_nl]
        .split(|b| *b == b'\n')
        .filter(|l| l.starts_with(b"data:"))
        .count() as u64;
    buf.drain(..=last_nl);
    n
}

#[derive(Debug, Clone)]
pub(crate) struct EventRates {
    /// Events per second received by each reader.
    pub per_reader: Vec<f64>,
    /// Submissions per second of the load that ran meanwhile.
    pub load: Rate,
}

/// `readers` clients on /events while `load` runs with `clients` clients for `seconds`.
pub(crate) async fn events_under_load(
    events_url: &str,
    tok: &str,
    readers: usize,
    load: &Req,
    clients: usize,
    seconds: f64,
) -> anyhow::Result<EventRates> {
    let stop = Arc::new(AtomicBool::new(false));
    let connected = Arc::new(AtomicU64::new(0));
    let counts: Vec<Arc<AtomicU64>> = (0..readers).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut tasks = Vec::new();
    for c in &counts {
        tasks.push(tokio::spawn(read_events(
            events_url.to_string(),
            tok.to_string(),
            connected.clone(),
            c.clone(),
            stop.clone(),
        )));
    }
    let t = Instant::now();
    while connected.load(Ordering::Relaxed) < readers as u64 && t.elapsed().as_secs() < 30 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let n = connected.load(Ordering::Relaxed);
    if n < readers as u64 {
        stop.store(true, Ordering::Relaxed);
        anyhow::bail!("only {n} of {readers} /events streams opened");
    }
    // Let the streams settle (Salt sends a retry hint first), then count only under load.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let t0 = Instant::now();
    let rate = throughput(load, clients, seconds).await;
    let elapsed = t0.elapsed().as_secs_f64();
    let after: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    Ok(EventRates {
        per_reader: before
            .iter()
            .zip(&after)
            .map(|(b, a)| (a - b) as f64 / elapsed)
            .collect(),
        load: rate,
    })
}

/// One runner call listing jobs through `POST /`: seconds until the last byte of the answer
/// arrived (what the server took; the client's parsing is not timed), and how many jobs it
/// held.
pub(crate) async fn listed(
    http: &reqwest::Client,
    url: &str,
    tok: &str,
    body: &Value,
) -> anyhow::Result<(f64, usize)> {
    let t = Instant::now();
    let bytes = http
        .post(url)
        .header("X-Auth-Token", tok)
        .header("Accept", "application/json")
        .json(body)
        .send()
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    let secs = t.elapsed().as_secs_f64();
    let v: Value = serde_json::from_slice(&bytes)?;
    match &v["return"][0] {
        Value::Object(m) => Ok((secs, m.len())),
        Value::Array(a) => Ok((secs, a.len())),
        // Salt answers a runner's exception with its traceback: its last line says it.
        Value::String(text) => anyhow::bail!(
            "the answer holds no job list: {}",
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
        ),
        other => anyhow::bail!("the answer holds no job list: {:.300}", other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(pct(&v, 0.5), 51.0);
        assert_eq!(pct(&v, 0.99), 99.0);
        assert_eq!(pct(&v, 1.0), 100.0);
        assert!(pct(&[], 0.5).is_nan());
    }

    #[test]
    fn data_lines_are_counted_across_chunks() {
        let mut b = b"retry: 400\n\ntag: a\nda".to_vec();
        assert_eq!(count_data_lines(&mut b), 0);
        assert_eq!(b, b"da");
        b.extend_from_slice(b"ta: {}\n\ntag: b\ndata: {\"x\": 1}\n\ndata: ");
        assert_eq!(count_data_lines(&mut b), 2);
        assert_eq!(b, b"data: ");
    }

    #[test]
    fn checks_recognise_salt_answers() {
        assert!(pinged_m1(&json!({"return": [{"m1": true}]})));
        assert!(!pinged_m1(&json!({"return": [{}]})));
        assert!(got_jid(
            &json!({"return": [{"jid": "1", "minions": ["m1"]}]})
        ));
        assert!(got_token(&json!({"return": [{"token": "t"}]})));
        assert!(!got_token(&json!({"return": []})));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn throughput_and_latency_against_a_local_server() {
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(|| async { "{\"return\": [{\"m1\": true}]}" }),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await });
        let http = client(Duration::from_secs(5));
        let req = get(&http, format!("http://{addr}/"), None, Some(pinged_m1));
        let lat = latency(&req, 0.2, 10).await.unwrap();
        assert!(lat.samples >= 10 && lat.failures == 0);
        assert!(lat.p50_ms <= lat.p99_ms);
        let r = throughput(&req, 4, 0.2).await;
        assert!(r.per_second > 0.0 && r.failures == 0);
        let bad = get(&http, format!("http://{addr}/nope"), None, None);
        assert!(latency(&bad, 0.1, 1).await.is_err());
    }
}
