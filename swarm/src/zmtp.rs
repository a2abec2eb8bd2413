//! A minimal ZMTP 3.x client with the NULL mechanism, over any async byte stream.
//!
//! Just enough of ZeroMQ for a Salt minion: a REQ peer of the master's ROUTER (ret port)
//! and a SUB peer of its PUB (publish port). One tokio task per connection instead of
//! libzmq's poller, so tens of thousands of connections fit in one process.
//!
//! What is spoken (RFC 23/ZMTP 3.0, 37/ZMTP 3.1; bytes as libzmq 4.3 sends them):
//! * the 64-byte greeting, version 3.1, mechanism `NULL`, as-server 0;
//! * a `READY` command with `Socket-Type` (`REQ` or `SUB`), plus an empty `Identity` for REQ;
//! * frames: flags (`MORE` 1, `LONG` 2, `COMMAND` 4), a 1-byte or 8-byte big-endian size;
//! * REQ: an empty delimiter frame before the body, and the same envelope on the reply;
//! * SUB: a subscription is a data frame `0x01` + prefix (what libzmq 4.3 sends);
//! * `PING` is answered with `PONG` carrying the ping's context; other commands are ignored.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// Size of the greeting both peers send first.
pub const GREETING_LEN: usize = 64;
/// Frame flag: more frames of this message follow.
pub const FLAG_MORE: u8 = 0x01;
/// Frame flag: the size is 8 bytes.
pub const FLAG_LONG: u8 = 0x02;
/// Frame flag: a command frame.
pub const FLAG_COMMAND: u8 = 0x04;
/// Bytes buffered per connection for reading (large bodies bypass the buffer).
const READ_BUFFER: usize = 512;

/// The socket type this client plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketType {
    /// A request socket: talks to ROUTER or REP.
    Req,
    /// A subscriber: talks to PUB or XPUB.
    Sub,
}

impl SocketType {
    /// The name sent in `Socket-Type`.
    pub fn name(self) -> &'static str {
        match self {
            SocketType::Req => "REQ",
            SocketType::Sub => "SUB",
        }
    }

    /// Whether a peer announcing `peer` as its socket type may talk to us (RFC 28/29).
    pub fn accepts(self, peer: &[u8]) -> bool {
        match self {
            SocketType::Req => matches!(peer, b"ROUTER" | b"REP"),
            SocketType::Sub => matches!(peer, b"PUB" | b"XPUB"),
        }
    }
}

/// Why a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ZmtpError {
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("the peer is not a ZMTP 3 peer: {0}")]
    BadGreeting(String),
    #[error("the peer wants mechanism {0:?}; only NULL is supported")]
    Mechanism(String),
    #[error("malformed command from the peer: {0}")]
    BadCommand(String),
    #[error("the peer is a {peer} socket, which a {ours} socket cannot talk to")]
    IncompatibleSocket { peer: String, ours: &'static str },
    #[error("the peer refused the handshake: {0}")]
    PeerError(String),
    #[error("frame of {size} bytes is over the limit of {limit} bytes")]
    TooLarge { size: u64, limit: usize },
    #[error("reply without the empty delimiter frame")]
    NoDelimiter,
}

/// Our greeting: signature, version 3.1, `NULL`, as-server 0. The padding carries what libzmq
/// puts there for an empty identity (identity length + 1); peers ignore it.
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0] = 0xff;
    g[8] = 0x01;
    g[9] = 0x7f;
    g[10] = 3;
    g[11] = 1;
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// Check the peer's greeting; returns its (major, minor) version.
pub fn check_greeting(g: &[u8; GREETING_LEN]) -> Result<(u8, u8), ZmtpError> {
    if g[0] != 0xff || g[9] & 0x01 == 0 {
        return Err(ZmtpError::BadGreeting(
            "signature is not FF ... 7F".to_string(),
        ));
    }
    let (major, minor) = (g[10], g[11]);
    if major < 3 {
        return Err(ZmtpError::BadGreeting(format!(
            "version {major}.{minor}; 3.0 or later is needed"
        )));
    }
    let mech = &g[12..32];
    let end = mech.iter().position(|b| *b == 0).unwrap_or(mech.len());
    if &mech[..end] != b"NULL" || mech[end..].iter().any(|b| *b != 0) {
        return Err(ZmtpError::Mechanism(
            String::from_utf8_lossy(&mech[..end]).into_owned(),
        ));
    }
    Ok((major, minor))
}

/// Append one frame (flags + size + body) to `out`; `LONG` is added when the body needs it.
pub fn encode_frame(out: &mut Vec<u8>, flags: u8, body: &[u8]) {
    if body.len() > 255 {
        out.push(flags | FLAG_LONG);
        out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    } else {
        out.push(flags & !FLAG_LONG);
        out.push(body.len() as u8);
    }
    out.extend_from_slice(body);
}

/// Append a whole message: every frame but the last carries `MORE`.
pub fn encode_message(out: &mut Vec<u8>, frames: &[&[u8]]) {
    for (i, f) in frames.iter().enumerate() {
        let more = if i + 1 < frames.len() { FLAG_MORE } else { 0 };
        encode_frame(out, more, f);
    }
}

/// The command body (without the frame header): short name, then data.
fn command_body(name: &str, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(1 + name.len() + data.len());
    b.push(name.len() as u8);
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(data);
    b
}

/// Our `READY` command frame: `Socket-Type`, and for REQ an empty `Identity` (as libzmq).
pub fn ready_command(socket: SocketType) -> Vec<u8> {
    let mut props = Vec::new();
    let mut prop = |name: &str, value: &[u8]| {
        props.push(name.len() as u8);
        props.extend_from_slice(name.as_bytes());
        props.extend_from_slice(&(value.len() as u32).to_be_bytes());
        props.extend_from_slice(value);
    };
    prop("Socket-Type", socket.name().as_bytes());
    if socket == SocketType::Req {
        prop("Identity", b"");
    }
    let mut out = Vec::new();
    encode_frame(&mut out, FLAG_COMMAND, &command_body("READY", &props));
    out
}

/// The data frame that subscribes to `prefix` (`0x01` + prefix).
pub fn subscribe_frame(prefix: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(prefix.len() + 1);
    body.push(0x01);
    body.extend_from_slice(prefix);
    let mut out = Vec::new();
    encode_frame(&mut out, 0, &body);
    out
}

/// Split a command body into (name, data).
pub fn parse_command(body: &[u8]) -> Result<(&[u8], &[u8]), ZmtpError> {
    let Some((&len, rest)) = body.split_first() else {
        return Err(ZmtpError::BadCommand("empty command".into()));
    };
    let len = len as usize;
    if rest.len() < len {
        return Err(ZmtpError::BadCommand("command name is cut short".into()));
    }
    Ok(rest.split_at(len))
}

/// Parse `READY` metadata: (name, value) pairs.
pub fn parse_properties(mut data: &[u8]) -> Result<Vec<(String, Vec<u8>)>, ZmtpError> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let nlen = data[0] as usize;
        if data.len() < 1 + nlen + 4 {
            return Err(ZmtpError::BadCommand("property is cut short".into()));
        }
        let name = String::from_utf8_lossy(&data[1..1 + nlen]).into_owned();
        let v = &data[1 + nlen..];
        let vlen = u32::from_be_bytes([v[0], v[1], v[2], v[3]]) as usize;
        if v.len() < 4 + vlen {
            return Err(ZmtpError::BadCommand(format!(
                "property {name} value is cut short"
            )));
        }
        out.push((name, v[4..4 + vlen].to_vec()));
        data = &v[4 + vlen..];
    }
    Ok(out)
}

/// One frame as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub more: bool,
    pub command: bool,
    pub body: Vec<u8>,
}

/// An established ZMTP connection (handshake done).
pub struct Connection<S> {
    io: BufReader<S>,
    socket: SocketType,
    peer_version: (u8, u8),
    max_frame: usize,
    pings: u64,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// Greet, exchange `READY`, and check the peer's socket type. `max_frame` bounds what
    /// one incoming frame may allocate.
    pub async fn handshake(
        stream: S,
        socket: SocketType,
        max_frame: usize,
    ) -> Result<Self, ZmtpError> {
        let mut io = BufReader::with_capacity(READ_BUFFER, stream);
        io.write_all(&greeting()).await?;
        io.flush().await?;
        let mut peer = [0u8; GREETING_LEN];
        io.read_exact(&mut peer).await?;
        let peer_version = check_greeting(&peer)?;
        io.write_all(&ready_command(socket)).await?;
        io.flush().await?;
        let mut conn = Connection {
            io,
            socket,
            peer_version,
            max_frame,
            pings: 0,
        };
        let frame = conn.read_frame().await?;
        if !frame.command {
            return Err(ZmtpError::BadCommand(
                "expected READY, got a data frame".into(),
            ));
        }
        let (name, data) = parse_command(&frame.body)?;
        match name {
            b"READY" => {}
            b"ERROR" => return Err(ZmtpError::PeerError(error_reason(data))),
            other => {
                return Err(ZmtpError::BadCommand(format!(
                    "expected READY, got {}",
                    String::from_utf8_lossy(other)
                )))
            }
        }
        let props = parse_properties(data)?;
        let peer_type = props
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("Socket-Type"))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| ZmtpError::BadCommand("READY without Socket-Type".into()))?;
        if !socket.accepts(&peer_type) {
            return Err(ZmtpError::IncompatibleSocket {
                peer: String::from_utf8_lossy(&peer_type).into_owned(),
                ours: socket.name(),
            });
        }
        Ok(conn)
    }

    /// The peer's ZMTP version from its greeting.
    pub fn peer_version(&self) -> (u8, u8) {
        self.peer_version
    }

    /// How many `PING`s were answered.
    pub fn pings_answered(&self) -> u64 {
        self.pings
    }

    /// Read one frame (data or command).
    pub async fn read_frame(&mut self) -> Result<Frame, ZmtpError> {
        let flags = self.io.read_u8().await?;
        let size = if flags & FLAG_LONG != 0 {
            self.io.read_u64().await?
        } else {
            u64::from(self.io.read_u8().await?)
        };
        if size > self.max_frame as u64 {
            return Err(ZmtpError::TooLarge {
                size,
                limit: self.max_frame,
            });
        }
        let mut body = vec![0u8; size as usize];
        self.io.read_exact(&mut body).await?;
        Ok(Frame {
            more: flags & FLAG_MORE != 0,
            command: flags & FLAG_COMMAND != 0,
            body,
        })
    }

    /// Read the next whole message (its frames), answering `PING`s on the way.
    pub async fn recv_message(&mut self) -> Result<Vec<Vec<u8>>, ZmtpError> {
        let mut frames = Vec::new();
        loop {
            let frame = self.read_frame().await?;
            if frame.command {
                self.on_command(&frame.body).await?;
                continue;
            }
            frames.push(frame.body);
            if !frame.more {
                return Ok(frames);
            }
        }
    }

    async fn on_command(&mut self, body: &[u8]) -> Result<(), ZmtpError> {
        let (name, data) = parse_command(body)?;
        match name {
            b"PING" => {
                // PING = TTL (2 bytes) + context (up to 16 bytes); PONG echoes the context.
                let context = data.get(2..).unwrap_or(&[]);
                let mut out = Vec::new();
                encode_frame(&mut out, FLAG_COMMAND, &command_body("PONG", context));
                self.io.write_all(&out).await?;
                self.io.flush().await?;
                self.pings += 1;
                Ok(())
            }
            b"ERROR" => Err(ZmtpError::PeerError(error_reason(data))),
            _ => Ok(()),
        }
    }

    /// Send one message.
    pub async fn send_message(&mut self, frames: &[&[u8]]) -> Result<(), ZmtpError> {
        let mut out = Vec::with_capacity(frames.iter().map(|f| f.len() + 9).sum());
        encode_message(&mut out, frames);
        self.io.write_all(&out).await?;
        self.io.flush().await?;
        Ok(())
    }

    /// SUB: subscribe to messages whose first frame starts with `prefix` (empty: all).
    pub async fn subscribe(&mut self, prefix: &[u8]) -> Result<(), ZmtpError> {
        self.io.write_all(&subscribe_frame(prefix)).await?;
        self.io.flush().await?;
        Ok(())
    }

    /// REQ: send `body` behind the empty delimiter and wait for the reply body.
    pub async fn request(&mut self, body: &[u8]) -> Result<Vec<u8>, ZmtpError> {
        debug_assert_eq!(self.socket, SocketType::Req);
        self.send_message(&[b"", body]).await?;
        let mut reply = self.recv_message().await?;
        if reply.len() < 2 || !reply[0].is_empty() {
            return Err(ZmtpError::NoDelimiter);
        }
        Ok(reply.swap_remove(1))
    }
}

/// The reason text of an `ERROR` command (1-byte length + text).
fn error_reason(data: &[u8]) -> String {
    let text = data
        .split_first()
        .map(|(len, rest)| &rest[..(*len as usize).min(rest.len())])
        .unwrap_or(&[]);
    String::from_utf8_lossy(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value as Json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn vectors() -> Json {
        // pyzmq/libzmq 4.3.4 bytes, from the shared reference vectors next to the repository.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/reference/vectors/zmtp_handshake.json"
        );
        let text = std::fs::read_to_string(path).expect("../shared/reference/vectors");
        serde_json::from_str(&text).expect("vector JSON")
    }

    fn hx(v: &Json) -> Vec<u8> {
        hex::decode(v.as_str().expect("hex string")).expect("hex")
    }

    #[test]
    fn greeting_is_libzmq_req_greeting() {
        let v = vectors();
        assert_eq!(
            greeting().to_vec(),
            hx(&v["req_to_router"]["client_greeting_hex"])
        );
    }

    #[test]
    fn ready_commands_match_libzmq() {
        let v = vectors();
        assert_eq!(
            ready_command(SocketType::Req),
            hx(&v["req_to_router"]["client_ready_command_hex"])
        );
        assert_eq!(
            ready_command(SocketType::Sub),
            hx(&v["sub_unfiltered"]["client_ready_command_hex"])
        );
    }

    #[test]
    fn subscriptions_match_libzmq() {
        let v = vectors();
        for case in ["sub_unfiltered", "sub_filtered"] {
            let prefix = v[case]["subscribe_prefix"].as_str().unwrap();
            assert_eq!(
                subscribe_frame(prefix.as_bytes()),
                hx(&v[case]["client_frames_hex"][0]),
                "{case}"
            );
        }
    }

    #[test]
    fn req_envelope_matches_libzmq() {
        let v = vectors();
        let frames = &v["req_to_router"]["client_frames_hex"];
        let body = hx(&frames[1]);
        let mut out = Vec::new();
        encode_message(&mut out, &[b"", &body[2..]]);
        let mut expect = hx(&frames[0]);
        expect.extend(hx(&frames[1]));
        assert_eq!(out, expect);
    }

    #[test]
    fn server_greetings_and_ready_parse() {
        let v = vectors();
        for (case, ty) in [("req_to_router", "ROUTER"), ("sub_unfiltered", "PUB")] {
            let g: [u8; 64] = hx(&v[case]["server_greeting_sent_hex"]).try_into().unwrap();
            assert_eq!(check_greeting(&g).unwrap(), (3, 0));
            let ready = hx(&v[case]["server_ready_sent_hex"]);
            assert_eq!(ready[0], FLAG_COMMAND);
            let (name, data) = parse_command(&ready[2..]).unwrap();
            assert_eq!(name, b"READY");
            let props = parse_properties(data).unwrap();
            assert_eq!(
                props,
                vec![("Socket-Type".to_string(), ty.as_bytes().to_vec())]
            );
        }
    }

    #[test]
    fn bad_greetings_are_refused() {
        let mut g = greeting();
        g[10] = 2;
        assert!(matches!(check_greeting(&g), Err(ZmtpError::BadGreeting(_))));
        let mut g = greeting();
        g[12..17].copy_from_slice(b"CURVE");
        assert!(matches!(check_greeting(&g), Err(ZmtpError::Mechanism(m)) if m == "CURVE"));
        let mut g = greeting();
        g[0] = 0;
        assert!(check_greeting(&g).is_err());
    }

    #[test]
    fn short_and_long_frames() {
        let mut out = Vec::new();
        encode_frame(&mut out, FLAG_MORE, &[7u8; 255]);
        assert_eq!(&out[..2], &[0x01, 0xff]);
        let mut out = Vec::new();
        encode_frame(&mut out, 0, &[7u8; 256]);
        assert_eq!(&out[..9], &[0x02, 0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(out.len(), 9 + 256);
    }

    #[test]
    fn truncated_properties_are_errors() {
        assert!(parse_properties(&[11, b'S']).is_err());
        assert!(parse_properties(&[1, b'a', 0, 0, 0, 5, b'x']).is_err());
        assert!(parse_command(&[]).is_err());
        assert!(parse_command(&[9, b'P']).is_err());
    }

    /// Play the server side from the vectors' bytes; the client must send libzmq's bytes.
    #[tokio::test]
    async fn req_handshake_and_request_against_recorded_router() {
        let v = vectors();
        let case = &v["req_to_router"];
        let (client, mut server) = tokio::io::duplex(4096);
        let mut script = hx(&case["server_greeting_sent_hex"]);
        script.extend(hx(&case["server_ready_sent_hex"]));
        for f in case["server_frames_sent_hex"].as_array().unwrap() {
            script.extend(hx(f));
        }
        let mut expect = hx(&case["client_greeting_hex"]);
        expect.extend(hx(&case["client_ready_command_hex"]));
        for f in case["client_frames_hex"].as_array().unwrap() {
            expect.extend(hx(f));
        }
        let body = hx(&case["client_frames_hex"][1])[2..].to_vec();
        let server_task = tokio::spawn(async move {
            server.write_all(&script).await.unwrap();
            let mut got = vec![0u8; expect.len()];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(hex::encode(got), hex::encode(expect));
        });
        let mut conn = Connection::handshake(client, SocketType::Req, 1 << 20)
            .await
            .unwrap();
        assert_eq!(conn.peer_version(), (3, 0));
        let reply = conn.request(&body).await.unwrap();
        assert_eq!(reply, b"\xa4pong");
        server_task.await.unwrap();
    }

    #[tokio::test]
    async fn sub_receives_filtered_multipart_and_answers_ping() {
        let v = vectors();
        let case = &v["sub_filtered"];
        let (client, mut server) = tokio::io::duplex(4096);
        let mut script = hx(&case["server_greeting_sent_hex"]);
        script.extend(hx(&case["server_ready_sent_hex"]));
        // A PING (TTL 0x0bb8, context "ab") in the middle of the stream.
        script.extend([
            0x04, 0x09, 0x04, b'P', b'I', b'N', b'G', 0x0b, 0xb8, b'a', b'b',
        ]);
        for f in case["server_frames_sent_hex"].as_array().unwrap() {
            script.extend(hx(f));
        }
        let mut expect = hx(&case["client_greeting_hex"]);
        expect[8] = 0x01; // libzmq's padding carried the SUB identity length; ours is empty
        expect.extend(hx(&case["client_ready_command_hex"]));
        expect.extend(hx(&case["client_frames_hex"][0]));
        expect.extend([0x04, 0x07, 0x04, b'P', b'O', b'N', b'G', b'a', b'b']);
        let server_task = tokio::spawn(async move {
            server.write_all(&script).await.unwrap();
            let mut got = vec![0u8; expect.len()];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(hex::encode(got), hex::encode(expect));
            server
        });
        let mut conn = Connection::handshake(client, SocketType::Sub, 1 << 20)
            .await
            .unwrap();
        conn.subscribe(b"broadcast").await.unwrap();
        let msg = conn.recv_message().await.unwrap();
        let want: Vec<Vec<u8>> = case["multipart_received_by_pyzmq_hex"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(hx)
            .collect();
        assert_eq!(msg, want);
        assert_eq!(conn.pings_answered(), 1);
        let _server = server_task.await.unwrap();
    }

    #[tokio::test]
    async fn wrong_peer_type_and_oversized_frames_are_refused() {
        let (client, mut server) = tokio::io::duplex(4096);
        let mut script = greeting().to_vec();
        script.extend(ready_command(SocketType::Sub));
        tokio::spawn(async move {
            server.write_all(&script).await.unwrap();
            let mut sink = vec![0u8; 1024];
            while server.read(&mut sink).await.is_ok_and(|n| n > 0) {}
        });
        let err = Connection::handshake(client, SocketType::Req, 1024)
            .await
            .err()
            .unwrap();
        assert!(matches!(err, ZmtpError::IncompatibleSocket { .. }), "{err}");

        let (client, mut server) = tokio::io::duplex(4096);
        let mut script = greeting().to_vec();
        let mut ready = Vec::new();
        encode_frame(
            &mut ready,
            FLAG_COMMAND,
            &command_body("READY", b"\x0bSocket-Type\x00\x00\x00\x03PUB"),
        );
        script.extend(ready);
        script.extend([FLAG_LONG, 0, 0, 0, 0, 0x10, 0, 0, 0]);
        tokio::spawn(async move {
            server.write_all(&script).await.unwrap();
            let mut sink = vec![0u8; 1024];
            while server.read(&mut sink).await.is_ok_and(|n| n > 0) {}
        });
        let mut conn = Connection::handshake(client, SocketType::Sub, 1024)
            .await
            .unwrap();
        let err = conn.recv_message().await.unwrap_err();
        assert!(matches!(err, ZmtpError::TooLarge { .. }), "{err}");
    }
}
