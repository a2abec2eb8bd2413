//! The hand-written ZMTP client against real libzmq sockets (the `zmq` crate): a ROUTER as
//! the master's ret port and a PUB as its publish port.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brine_swarm::zmtp::{Connection, SocketType};
use tokio::net::TcpStream;

/// Bind `sock` on 127.0.0.1 with a kernel-chosen port and return the port.
fn bind_any(sock: &zmq::Socket) -> u16 {
    sock.bind("tcp://127.0.0.1:*").unwrap();
    let ep = sock.get_last_endpoint().unwrap().unwrap();
    ep.rsplit(':').next().unwrap().parse().unwrap()
}

async fn connect(port: u16, ty: SocketType) -> Connection<TcpStream> {
    let s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    Connection::handshake(s, ty, 64 << 20).await.unwrap()
}

#[tokio::test]
async fn req_client_talks_to_a_libzmq_router() {
    let ctx = zmq::Context::new();
    let router = ctx.socket(zmq::ROUTER).unwrap();
    router.set_router_handover(true).unwrap();
    let port = bind_any(&router);
    // The ROUTER answers each request with "re:" + body, and a big body for "big".
    let server = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..3 {
            let frames = router.recv_multipart(0).unwrap();
            assert_eq!(frames.len(), 3, "identity, empty delimiter, body");
            assert!(frames[1].is_empty());
            let body = frames[2].clone();
            let reply = if body == b"big" {
                vec![7u8; 300_000]
            } else {
                [b"re:".as_slice(), &body].concat()
            };
            router
                .send_multipart([frames[0].clone(), vec![], reply], 0)
                .unwrap();
            seen.push(body);
        }
        seen
    });
    let mut conn = connect(port, SocketType::Req).await;
    assert_eq!(conn.request(b"hello").await.unwrap(), b"re:hello");
    let big_request = vec![b'q'; 70_000];
    let mut expect = b"re:".to_vec();
    expect.extend_from_slice(&big_request);
    assert_eq!(conn.request(&big_request).await.unwrap(), expect);
    assert_eq!(conn.request(b"big").await.unwrap(), vec![7u8; 300_000]);
    let seen = tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap();
    assert_eq!(seen[0], b"hello");
    assert_eq!(seen[1].len(), 70_000);
}

/// Publish `msg` every 20 ms until `stop` is set (PUB drops messages sent before the
/// subscription arrives, so a single send could be lost).
fn keep_publishing(
    publisher: zmq::Socket,
    msgs: Vec<Vec<Vec<u8>>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            for m in &msgs {
                publisher.send_multipart(m.clone(), 0).unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

#[tokio::test]
async fn sub_client_gets_publishes_from_libzmq_pub_with_prefix_filtering() {
    let ctx = zmq::Context::new();
    let publisher = ctx.socket(zmq::PUB).unwrap();
    let port = bind_any(&publisher);
    let stop = Arc::new(AtomicBool::new(false));
    let long = vec![b'L'; 1000];
    let feeder = keep_publishing(
        publisher,
        vec![
            vec![b"other-topic".to_vec(), b"not for us".to_vec()],
            vec![b"broadcast".to_vec(), long.clone()],
        ],
        stop.clone(),
    );
    let mut conn = connect(port, SocketType::Sub).await;
    conn.subscribe(b"broadcast").await.unwrap();
    // libzmq's PUB filters on the subscription it parsed from our data frame: only
    // "broadcast" messages may arrive, as two-frame messages.
    for _ in 0..5 {
        let msg = tokio::time::timeout(Duration::from_secs(10), conn.recv_message())
            .await
            .expect("a publish within 10 s")
            .unwrap();
        assert_eq!(msg, vec![b"broadcast".to_vec(), long.clone()]);
    }
    stop.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || feeder.join().unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn sub_client_answers_libzmq_heartbeats() {
    let ctx = zmq::Context::new();
    let publisher = ctx.socket(zmq::PUB).unwrap();
    // libzmq pings every 100 ms and drops a peer that has not answered within 400 ms.
    publisher.set_heartbeat_ivl(100).unwrap();
    publisher.set_heartbeat_timeout(400).unwrap();
    let port = bind_any(&publisher);
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = keep_publishing(publisher, vec![vec![b"tick".to_vec()]], stop.clone());
    let mut conn = connect(port, SocketType::Sub).await;
    conn.subscribe(b"").await.unwrap();
    let t0 = Instant::now();
    let mut got = 0;
    // Two seconds is five heartbeat timeouts: publishes keep coming only if PONGs are right.
    while t0.elapsed() < Duration::from_secs(2) {
        let msg = tokio::time::timeout(Duration::from_secs(5), conn.recv_message())
            .await
            .expect("the connection stays alive")
            .unwrap();
        assert_eq!(msg, vec![b"tick".to_vec()]);
        got += 1;
    }
    assert!(got > 10, "only {got} publishes");
    assert!(
        conn.pings_answered() >= 5,
        "{} pings",
        conn.pings_answered()
    );
    stop.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || feeder.join().unwrap())
        .await
        .unwrap();
}
