//! Transports: the ZeroMQ request/reply and publish channels of Salt's ports 4505/4506, and the
//! master event bus on Unix sockets.
//!
//! Everything that touches a socket lives here, behind a few small types, so that the master,
//! the minion and the tools deal only in bytes and Salt loads.

pub mod eventbus;
mod job_queue;
pub mod limits;
pub mod logging;
pub mod nats;
pub mod zmq_channel;

pub use zmq_channel::{
    LateReply, Publisher, Reply, ReplyHandler, ReqClient, RequestServer, ServerOptions, Subscriber,
    TransportError,
};

/// Format a `tcp://` endpoint, bracketing IPv6 addresses as libzmq wants.
pub fn tcp_endpoint(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("tcp://[{host}]:{port}")
    } else {
        format!("tcp://{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::tcp_endpoint;

    #[test]
    fn endpoints() {
        assert_eq!(tcp_endpoint("127.0.0.1", 4506), "tcp://127.0.0.1:4506");
        assert_eq!(tcp_endpoint("::1", 4505), "tcp://[::1]:4505");
        assert_eq!(tcp_endpoint("[::1]", 4505), "tcp://[::1]:4505");
    }
}
