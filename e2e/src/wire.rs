//! Raw requests on a master's request port, as a hostile or a hand-written peer sends them.

use brine_protocol::payload::{dumps, map, Value};

/// One request on the ret port (a ZeroMQ REQ socket): the raw reply, or `None` when none comes
/// within `wait_ms` milliseconds.
pub fn request(ctx: &zmq::Context, port: u16, body: &[u8], wait_ms: i64) -> Option<Vec<u8>> {
    let s = ctx.socket(zmq::REQ).unwrap();
    s.set_linger(0).unwrap();
    s.connect(&format!("tcp://127.0.0.1:{port}")).unwrap();
    s.send(body, 0).unwrap();
    if s.poll(zmq::POLLIN, wait_ms).unwrap() == 0 {
        return None;
    }
    Some(s.recv_bytes(0).unwrap())
}

/// A clear request (protocol version 3) carrying `load`.
pub fn clear(load: Value) -> Vec<u8> {
    dumps(&map(vec![
        ("enc", Value::from("clear")),
        ("load", load),
        ("version", Value::from(3)),
    ]))
}
