//! The master event bus, byte-compatible with Salt 3007's.
//!
//! Two Unix stream sockets in `sock_dir`: publishers write length-prefixed frames to
//! `master_event_pull.ipc`; every subscriber of `master_event_pub.ipc` receives every event as
//! a bare msgpack `{"head": {}, "body": tag "\n\n" msgpack(data)}` map. Salt's own readers
//! (`salt-run state.event`, a real salt-api) can attach to ours.

use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brine_protocol::event::{
    pack_body, pub_frame, pull_frame, unpack_body, PubDecoder, PullDecoder,
};
use rmpv::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::sync::broadcast;

pub const PUB_SOCK: &str = "master_event_pub.ipc";
pub const PULL_SOCK: &str = "master_event_pull.ipc";
/// Largest event frame the bus carries (and its readers accept): the sockets are local and
/// owner-only, and a runner's return travels in one event (`jobs.list_jobs` of 1,000,000
/// jobs is about 130 MB packed). Readers grow their buffer as bytes arrive.
pub const MAX_EVENT_FRAME: usize = 1024 * 1024 * 1024;
const CHANNEL_DEPTH: usize = 65536;
const PROBE_DEPTH: usize = 1024;

/// One event: its tag, its data map, and the encoded body as it travels.
#[derive(Debug)]
pub struct Event {
    pub tag: String,
    pub data: Value,
    pub body: Vec<u8>,
    /// Fired by another process through `master_event_pull.ipc` (not by this one).
    pub external: bool,
    /// Another master's event, fired here again (see [`EventBus::relay`]).
    pub relayed: bool,
}

impl Event {
    /// Build an event as Salt's `fire_event` does: `_stamp` set to now (UTC, no zone).
    pub fn new(tag: &str, mut data: Value) -> Event {
        if !matches!(data, Value::Map(_)) {
            data = Value::Map(vec![(Value::from("data"), data)]);
        }
        brine_protocol::payload::set(
            &mut data,
            "_stamp",
            Value::from(brine_protocol::jid::stamp_now()),
        );
        let body = pack_body(tag, &data);
        Event {
            tag: tag.to_string(),
            data,
            body,
            external: false,
            relayed: false,
        }
    }

    fn from_body(body: Vec<u8>) -> Option<Event> {
        match unpack_body(&body) {
            Ok((tag, data)) => Some(Event {
                tag,
                data,
                body,
                external: true,
                relayed: false,
            }),
            Err(e) => {
                tracing::warn!("event with a malformed body dropped: {e}");
                None
            }
        }
    }
}

/// The master side of the bus: fire events in-process, and serve both Unix sockets.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<Event>>,
    /// Listeners' probe events: echoed to the socket's subscribers only, never to the
    /// master's own (reactor, runners, recorders).
    probes: broadcast::Sender<Arc<Event>>,
    sock_dir: Option<PathBuf>,
    /// [`MAX_EVENT_FRAME`] (smaller in tests).
    max_frame: usize,
}

impl EventBus {
    /// A bus that only has in-process subscribers (tests, tools).
    pub fn local() -> EventBus {
        let (tx, _) = broadcast::channel(CHANNEL_DEPTH);
        let (probes, _) = broadcast::channel(PROBE_DEPTH);
        EventBus {
            tx,
            probes,
            sock_dir: None,
            max_frame: MAX_EVENT_FRAME,
        }
    }

    /// Bind both sockets in `sock_dir` and serve them on the current tokio runtime.
    pub async fn bind(sock_dir: &Path) -> io::Result<EventBus> {
        std::fs::create_dir_all(sock_dir)?;
        let mut bus = EventBus::local();
        bus.sock_dir = Some(sock_dir.to_path_buf());
        let pull_path = sock_dir.join(PULL_SOCK);
        let pub_path = sock_dir.join(PUB_SOCK);
        for p in [&pull_path, &pub_path] {
            if p.exists() {
                std::fs::remove_file(p)?;
            }
        }
        let pull = UnixListener::bind(&pull_path)?;
        std::fs::set_permissions(&pull_path, std::fs::Permissions::from_mode(0o600))?;
        let publ = UnixListener::bind(&pub_path)?;
        std::fs::set_permissions(&pub_path, std::fs::Permissions::from_mode(0o660))?;

        let b = bus.clone();
        tokio::spawn(async move {
            loop {
                match pull.accept().await {
                    Ok((stream, _)) => {
                        let b = b.clone();
                        tokio::spawn(async move { b.serve_publisher(stream).await });
                    }
                    Err(e) => {
                        tracing::error!("event bus pull accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        let b = bus.clone();
        tokio::spawn(async move {
            loop {
                match publ.accept().await {
                    Ok((stream, _)) => {
                        let rx = b.tx.subscribe();
                        let probes = b.probes.subscribe();
                        tokio::spawn(serve_subscriber(stream, rx, probes));
                    }
                    Err(e) => {
                        tracing::error!("event bus pub accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok(bus)
    }

    pub fn sock_dir(&self) -> Option<&Path> {
        self.sock_dir.as_deref()
    }

    /// Fire an event to every subscriber; the event as it went out (`None` with an empty tag
    /// or a body over [`MAX_EVENT_FRAME`], which is not fired).
    pub fn fire(&self, tag: &str, data: Value) -> Option<Arc<Event>> {
        if tag.is_empty() {
            tracing::warn!("event with an empty tag not fired");
            return None;
        }
        let ev = Arc::new(Event::new(tag, data));
        // The frame adds a few bytes of msgpack around the body.
        if ev.body.len() + 64 > self.max_frame {
            tracing::error!(
                "event {tag} not fired: its {} bytes exceed the bus's {} byte limit",
                ev.body.len(),
                self.max_frame
            );
            return None;
        }
        self.publish(ev.clone());
        Some(ev)
    }

    /// Fire another master's event (its body as it travelled) to this bus's readers, marked
    /// relayed so that it is not sent on to NATS again.
    pub fn relay(&self, body: Vec<u8>) -> Option<Arc<Event>> {
        let mut ev = Event::from_body(body)?;
        ev.external = false;
        ev.relayed = true;
        let ev = Arc::new(ev);
        self.publish(ev.clone());
        Some(ev)
    }

    fn publish(&self, ev: Arc<Event>) {
        tracing::trace!(tag = %ev.tag, "event");
        // No subscriber is not an error.
        if ev.tag == PROBE_TAG {
            let _ = self.probes.send(ev);
        } else {
            let _ = self.tx.send(ev);
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    async fn serve_publisher(&self, mut stream: tokio::net::UnixStream) {
        let mut dec = PullDecoder::new(MAX_EVENT_FRAME);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match stream.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!("event publisher connection: {e}");
                    return;
                }
            };
            dec.push(&buf[..n]);
            loop {
                match dec.next_body() {
                    Ok(Some(body)) => {
                        if let Some(ev) = Event::from_body(body) {
                            self.publish(Arc::new(ev));
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!("event publisher sent a bad frame, disconnected: {e}");
                        return;
                    }
                }
            }
        }
    }
}

async fn serve_subscriber(
    mut stream: tokio::net::UnixStream,
    mut rx: broadcast::Receiver<Arc<Event>>,
    mut probes: broadcast::Receiver<Arc<Event>>,
) {
    loop {
        let next = tokio::select! {
            ev = rx.recv() => ev,
            ev = probes.recv() => ev,
        };
        match next {
            Ok(ev) => {
                if stream.write_all(&pub_frame(&ev.body)).await.is_err() {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!("slow event subscriber missed {n} events");
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

pub use brine_protocol::event::LISTENER_PROBE_TAG as PROBE_TAG;

/// How long a new listener waits to see its own probe event, and how often it fires it.
const PROBE_WAIT: Duration = Duration::from_secs(30);
const PROBE_AGAIN: Duration = Duration::from_millis(250);

/// A reader of a master's bus (ours or Salt's), for tools running next to the master.
pub struct EventListener {
    stream: StdUnixStream,
    dec: PubDecoder,
    /// Events read while waiting for the probe, given out first.
    early: std::collections::VecDeque<Event>,
}

impl EventListener {
    /// Connect to the bus and return once the master publishes to this connection: a
    /// connection the master's publisher has not yet taken in would miss the events fired
    /// meanwhile (a job's return), so the listener fires a probe event of its own through
    /// the master's pull socket and reads until it comes back.
    pub fn connect(sock_dir: &Path) -> io::Result<EventListener> {
        let stream = StdUnixStream::connect(sock_dir.join(PUB_SOCK))?;
        let mut listener = EventListener {
            stream,
            dec: PubDecoder::new(MAX_EVENT_FRAME),
            early: std::collections::VecDeque::new(),
        };
        let token = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let deadline = Instant::now() + PROBE_WAIT;
        // The probe is fired again until it is seen: the master may take in the probe
        // before this connection (both wait in its accept queues while it starts).
        loop {
            let probe =
                brine_protocol::payload::map(vec![("listener", Value::from(token.as_str()))]);
            fire_event(sock_dir, PROBE_TAG, probe)?;
            let round = (Instant::now() + PROBE_AGAIN).min(deadline);
            loop {
                let left = round.saturating_duration_since(Instant::now());
                let Some(ev) = listener.read_event(left)? else {
                    break;
                };
                let ours = ev.tag == PROBE_TAG
                    && brine_protocol::payload::get_str(&ev.data, "listener")
                        == Some(token.as_str());
                if ours {
                    return Ok(listener);
                }
                if ev.tag != PROBE_TAG {
                    listener.early.push_back(ev);
                }
            }
            if Instant::now() >= deadline {
                tracing::warn!("the master's event bus did not echo this listener's probe");
                return Ok(listener);
            }
        }
    }

    /// The next event, or `None` if `timeout` passes first.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Option<Event>> {
        if let Some(ev) = self.early.pop_front() {
            return Ok(Some(ev));
        }
        // Other listeners' probes are skipped.
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.read_event(left)? {
                Some(ev) if ev.tag == PROBE_TAG => continue,
                other => return Ok(other),
            }
        }
    }

    /// The next event on the connection, or `None` if `timeout` passes first.
    fn read_event(&mut self, timeout: Duration) -> io::Result<Option<Event>> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match self.dec.next_body() {
                Ok(Some(body)) => {
                    if let Some(ev) = Event::from_body(body) {
                        return Ok(Some(ev));
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the master closed its event bus",
                    ))
                }
                Ok(n) => self.dec.push(&buf[..n]),
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::TimedOut =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Fire one event on a master's bus from another process, as Salt's tools do.
pub fn fire_event(sock_dir: &Path, tag: &str, data: Value) -> io::Result<()> {
    let ev = Event::new(tag, data);
    let mut s = StdUnixStream::connect(sock_dir.join(PULL_SOCK))?;
    s.write_all(&pull_frame(&ev.body))?;
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::payload::{get_str, map};

    /// An event over the frame limit is not fired (its readers would refuse the frame and
    /// read the bus again from a new connection); smaller ones are.
    #[test]
    fn an_event_over_the_frame_limit_is_not_fired() {
        let mut bus = EventBus::local();
        bus.max_frame = 1000;
        let mut rx = bus.subscribe();
        let big = map(vec![("return", Value::from("x".repeat(2000)))]);
        assert!(bus.fire("salt/run/1/ret", big).is_none());
        let small = map(vec![("return", Value::from("x".repeat(500)))]);
        assert!(bus.fire("salt/run/2/ret", small).is_some());
        assert_eq!(rx.try_recv().unwrap().tag, "salt/run/2/ret");
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fire_and_listen_over_the_sockets() {
        let dir = tempfile::tempdir().unwrap();
        let bus = EventBus::bind(dir.path()).await.unwrap();
        let path = dir.path().to_path_buf();
        let got = tokio::task::spawn_blocking(move || {
            // Connected means subscribed: an event fired right away is seen.
            let mut l = EventListener::connect(&path).unwrap();
            fire_event(&path, "custom/test", map(vec![("x", Value::from(1))])).unwrap();
            l.next(Duration::from_secs(5)).unwrap().unwrap()
        })
        .await
        .unwrap();
        assert_eq!(got.tag, "custom/test");
        assert!(get_str(&got.data, "_stamp").is_some());
        let mut rx = bus.subscribe();
        // Probes reach the socket's subscribers only.
        fire_event(
            dir.path(),
            PROBE_TAG,
            map(vec![("listener", Value::from("t"))]),
        )
        .unwrap();
        bus.fire("a/b", map(vec![("k", Value::from("v"))]));
        let ev = rx.recv().await.unwrap();
        assert_eq!(ev.tag, "a/b");
        assert_eq!(get_str(&ev.data, "k"), Some("v"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            rx.try_recv().is_err(),
            "a probe reached an in-process subscriber"
        );
    }
}
