//! Floors to compare with: an axum hello-world in this process, measured with the same client
//! code as the API workloads, and a raw ZeroMQ REQ/REP round trip over loopback TCP.

use std::time::{Duration, Instant};

use crate::load::{self, Latency, Rate};

/// Serve `GET /` → "Hello, World!" on a loopback port until the returned sender is dropped.
pub(crate) async fn hello_world() -> anyhow::Result<(String, tokio::sync::oneshot::Sender<()>)> {
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "Hello, World!" }));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = l.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(l, app)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await;
    });
    Ok((format!("http://{addr}/"), tx))
}

/// Sequential latency and 16-client throughput of the hello-world.
pub(crate) async fn axum_hello(seconds: f64, clients: usize) -> anyhow::Result<(Latency, Rate)> {
    let (url, _stop) = hello_world().await?;
    let http = load::client(Duration::from_secs(10));
    let req = load::get(&http, url, None, None);
    let lat = load::latency(&req, seconds, 50).await?;
    let rate = load::throughput(&req, clients, seconds).await;
    Ok((lat, rate))
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ZmqRoundTrip {
    pub p50_us: f64,
    pub p99_us: f64,
    pub per_second: f64,
}

/// One REQ socket sending a small message to a REP socket that echoes it, for `seconds`.
pub(crate) fn zmq_round_trip(seconds: f64) -> anyhow::Result<ZmqRoundTrip> {
    let ctx = zmq::Context::new();
    let rep = ctx.socket(zmq::REP)?;
    rep.bind("tcp://127.0.0.1:*")?;
    let endpoint = rep
        .get_last_endpoint()?
        .map_err(|_| anyhow::anyhow!("REP endpoint is not UTF-8"))?;
    let server = std::thread::spawn(move || -> anyhow::Result<()> {
        loop {
            let msg = rep.recv_bytes(0)?;
            rep.send(&msg, 0)?;
            if msg == b"stop" {
                return Ok(());
            }
        }
    });
    let req = ctx.socket(zmq::REQ)?;
    req.set_rcvtimeo(5000)?;
    req.connect(&endpoint)?;
    let payload = vec![0x5a_u8; 64];
    let mut lat = Vec::new();
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        let t = Instant::now();
        req.send(&payload, 0)?;
        let back = req.recv_bytes(0)?;
        anyhow::ensure!(back == payload, "REP answered something else");
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    req.send("stop", 0)?;
    let _ = req.recv_bytes(0)?;
    server
        .join()
        .map_err(|_| anyhow::anyhow!("REP thread panicked"))??;
    let n = lat.len();
    lat.sort_by(f64::total_cmp);
    Ok(ZmqRoundTrip {
        p50_us: load::pct(&lat, 0.5),
        p99_us: load::pct(&lat, 0.99),
        per_second: n as f64 / elapsed,
    })
}

/// Milliseconds per RSA-2048 PKCS#1 v1.5 SHA-1 signature of a 1 KiB message (what every
/// publish carries), made through OpenSSL and through the `rsa` crate, each for half of
/// `seconds`.
pub(crate) fn rsa_signing(seconds: f64) -> anyhow::Result<(f64, f64)> {
    use brine_protocol::crypt::{set_openssl, PrivateKey, SigAlgo};
    let key = PrivateKey::generate(2048).map_err(|e| anyhow::anyhow!("{e}"))?;
    let msg = vec![0x5a_u8; 1024];
    let per_signature = |openssl: bool| {
        set_openssl(openssl);
        let t0 = Instant::now();
        let mut n = 0u32;
        while n == 0 || t0.elapsed().as_secs_f64() < seconds / 2.0 {
            std::hint::black_box(key.sign(&msg, SigAlgo::Pkcs1v15Sha1));
            n += 1;
        }
        t0.elapsed().as_secs_f64() * 1e3 / f64::from(n)
    };
    let fast = per_signature(true);
    let pure = per_signature(false);
    set_openssl(true);
    Ok((fast, pure))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_signing_runs() {
        let (openssl, rsa_crate) = rsa_signing(0.02).unwrap();
        assert!(openssl > 0.0 && rsa_crate > 0.0);
    }

    #[test]
    fn zmq_round_trip_runs() {
        let r = zmq_round_trip(0.1).unwrap();
        assert!(r.per_second > 0.0);
        assert!(r.p50_us <= r.p99_us);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn axum_hello_runs() {
        let (lat, rate) = axum_hello(0.1, 2).await.unwrap();
        assert!(lat.samples >= 50);
        assert!(rate.per_second > 0.0 && rate.failures == 0);
    }
}
