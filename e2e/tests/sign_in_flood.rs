//! A flood of sign-ins on the master's request port does not starve the minions already
//! signed in.
//!
//! Anyone who reaches the port can send `_auth`, and each one costs the master up to two
//! private-key operations when it names an accepted minion with that minion's (public) key: the
//! attacker cannot read the reply, but the master does the work. The flood below sends several
//! times what the master's workers can sign, for as long as the test runs; meanwhile jobs are
//! published and answered by the accepted minion as usual, because sign-ins wait in a queue of
//! their own and never take the last worker.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brine_e2e::wire::clear;
use brine_e2e::Stack;
use brine_protocol::payload::{map, Value};

/// Sign-ins sent per second: several times what the three workers of the test stack sign (a
/// sign-in whose token does not decrypt costs one private-key operation, about 0.25 ms).
const FLOOD_PER_SECOND: u64 = 16_000;

/// Send `_auth` for `id` with its public key from a few DEALER sockets until `stop`, throwing
/// the replies away; the number sent.
fn flood(port: u16, id: String, pub_text: String, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) {
    let ctx = zmq::Context::new();
    let sockets: Vec<zmq::Socket> = (0..4)
        .map(|_| {
            let s = ctx.socket(zmq::DEALER).unwrap();
            s.set_linger(0).unwrap();
            s.set_sndhwm(100_000).unwrap();
            s.connect(&format!("tcp://127.0.0.1:{port}")).unwrap();
            s
        })
        .collect();
    let body = clear(map(vec![
        ("cmd", Value::from("_auth")),
        ("id", Value::from(id)),
        ("pub", Value::from(pub_text)),
        ("token", Value::Binary(vec![0x42; 256])),
        ("nonce", Value::from("0123456789abcdef0123456789abcdef")),
    ]));
    let started = Instant::now();
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let due = started.elapsed().as_millis() as u64 * FLOOD_PER_SECOND / 1000;
        while n < due {
            let s = &sockets[(n % 4) as usize];
            // [empty delimiter, body], as a REQ socket would frame it.
            if s.send_multipart([&b""[..], &body], zmq::DONTWAIT).is_ok() {
                n += 1;
            } else {
                break;
            }
        }
        for s in &sockets {
            while s.recv_multipart(zmq::DONTWAIT).is_ok() {}
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    sent.store(n, Ordering::Relaxed);
}

#[test]
fn accepted_minions_are_served_through_a_sign_in_flood() {
    let mut st = Stack::new("auto_accept: True\ntimeout: 10\n");
    st.start_master();
    st.start_minion("web1", "");
    st.wait_answering(&["web1"]);
    let pub_text = std::fs::read_to_string(st.master_root().join("pki/minions/web1")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let flooder = {
        let (stop, sent, port) = (stop.clone(), sent.clone(), st.ret_port);
        std::thread::spawn(move || flood(port, "web1".into(), pub_text, stop, sent))
    };
    // Let a backlog build: by now thousands of sign-ins wait.
    std::thread::sleep(Duration::from_secs(4));
    let mut answered = Vec::new();
    for _ in 0..5 {
        let (out, code) = st.salt_json(&["-t", "10", "web1", "test.ping"]);
        answered.push((out, code));
    }
    stop.store(true, Ordering::Relaxed);
    flooder.join().unwrap();
    let sent = sent.load(Ordering::Relaxed);
    let log = st.master_log();
    for (out, code) in &answered {
        assert_eq!(
            (out, *code),
            (&serde_json::json!({"web1": true}), 0),
            "a job during the flood ({sent} sign-ins sent)\n{}",
            st.logs()
        );
    }
    // The flood was more than the master could sign: its queue filled and it dropped some.
    assert!(
        log.contains("sign-ins dropped: their queue is full"),
        "{sent} sign-ins sent, none dropped\n{log}"
    );
    eprintln!("{sent} sign-ins sent during the test");
    // The minion itself can still sign in afterwards (its key is unchanged).
    st.restart_minion("web1");
    st.wait_answering(&["web1"]);
}
