//! The master's event bus (`master_event_pub.ipc`) as the API reads it: once, fanned out
//! in-process, with a bounded replay buffer for SSE clients that reconnect. Requests to the
//! master go through [`brine_client::MasterLink`].
//!
//! An event's id is its `_stamp` in microseconds since the epoch (raised to one more than the
//! previous id when it would not grow), so ids mean the same thing to every salt-api process:
//! a reader that comes back with `Last-Event-ID` after salt-api restarted gets the events it
//! missed from the master's job store (`salt_events`, kept when the master has
//! `brine_store_events: True`), then from the buffer.
//!
//! With `brine_nats`, the events are those of every master, read from the NATS JetStream
//! stream they all publish to, and an event's id is its sequence number in that stream: the
//! same on every API replica, so a reader may resume on any of them, from the stream itself.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use brine_protocol::event::{split_body, PubDecoder};
use brine_transport::nats::Events;
use tokio::io::AsyncReadExt;
use tokio::sync::broadcast;

/// One bus event as the API hands it around, with its position in the stream. Its data stays
/// packed until someone reads it (a runner's answer of many megabytes is decoded once, by the
/// request waiting for it, unless an event stream shows it too).
#[derive(Debug)]
pub struct BusEvent {
    pub id: u64,
    pub tag: String,
    /// The event's body as it came on the bus, its data (msgpack, checked well-formed) from
    /// `data_at` on; empty when the event was made from JSON.
    body: Vec<u8>,
    data_at: usize,
    data: OnceLock<serde_json::Value>,
}

impl BusEvent {
    /// An event whose data is already JSON.
    pub fn new(id: u64, tag: String, data: serde_json::Value) -> BusEvent {
        BusEvent {
            id,
            tag,
            body: Vec::new(),
            data_at: 0,
            data: OnceLock::from(data),
        }
    }

    /// An event of `body` (its tag, then its data as the bus packs it from `data_at` on),
    /// kept as it came; `None` if the data is not one msgpack object.
    pub(crate) fn packed(id: u64, tag: String, body: Vec<u8>, data_at: usize) -> Option<BusEvent> {
        if let Err(e) = brine_protocol::payload::check(body.get(data_at..)?) {
            tracing::warn!("event {tag} with malformed data dropped: {e}");
            return None;
        }
        Some(BusEvent {
            id,
            tag,
            body,
            data_at,
            data: OnceLock::new(),
        })
    }

    /// The data as the bus packed it (empty for an event made from JSON).
    fn packed_data(&self) -> &[u8] {
        &self.body[self.data_at..]
    }

    /// The event's data as JSON (decoded at the first call; `null` for data nested too deep).
    pub fn data(&self) -> &serde_json::Value {
        self.data.get_or_init(|| self.decode())
    }

    /// A JSON tree of the data that the caller owns: decoded from the packed bytes again
    /// rather than copied from the shared tree when nobody has decoded that yet.
    pub fn data_owned(&self) -> serde_json::Value {
        match self.data.get() {
            Some(data) => data.clone(),
            None => self.decode(),
        }
    }

    fn decode(&self) -> serde_json::Value {
        brine_protocol::payload::loads_json(self.packed_data()).unwrap_or(serde_json::Value::Null)
    }

    /// The fields `keys` of the data as the bus packed it (found in one walk), for a reader
    /// that passes them on without decoding them; `None` once the data was decoded, or when
    /// it is not a map holding the key once.
    pub fn packed_fields<const N: usize>(
        self: &Arc<Self>,
        keys: [&str; N],
    ) -> [Option<PackedField>; N] {
        if self.data.get().is_some() {
            return std::array::from_fn(|_| None);
        }
        let fields = brine_protocol::payload::map_fields(self.packed_data(), keys);
        fields.map(|field| {
            let field = field?;
            let start = field.as_ptr() as usize - self.body.as_ptr() as usize;
            Some(PackedField {
                event: self.clone(),
                range: start..start + field.len(),
            })
        })
    }

    /// A string field of the data, read without decoding the rest.
    fn field(&self, key: &str) -> Option<&str> {
        match self.data.get() {
            Some(data) => data.get(key)?.as_str(),
            None => brine_protocol::payload::map_str(self.packed_data(), key),
        }
    }
}

/// One field of an event's data, still packed (see [`BusEvent::packed_fields`]).
#[derive(Debug)]
pub struct PackedField {
    event: Arc<BusEvent>,
    range: std::ops::Range<usize>,
}

impl PackedField {
    /// Its msgpack bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.event.body[self.range.clone()]
    }

    /// As JSON (`null` for data nested too deep).
    pub fn decode(&self) -> serde_json::Value {
        brine_protocol::payload::loads_json(self.bytes()).unwrap_or(serde_json::Value::Null)
    }
}

impl brine_client::JobEvent for BusEvent {
    fn tag(&self) -> &str {
        &self.tag
    }
    fn reports_running(&self) -> bool {
        matches!(self.data().get("return"), Some(serde_json::Value::Object(m)) if !m.is_empty())
    }
}

/// The master's event bus, read by one task and fanned out.
pub struct Bus {
    tx: broadcast::Sender<Arc<BusEvent>>,
    replay: Mutex<VecDeque<Arc<BusEvent>>>,
    replay_len: usize,
    next_id: Mutex<u64>,
    source: Source,
    /// Whether events flow now (the master's bus or the NATS stream is being read).
    connected: tokio::sync::watch::Sender<bool>,
    owners: Mutex<JobOwners>,
}

/// Who published each recent job (the `user` of its `salt/job/<jid>/new` event), so that a
/// user may follow their own jobs. Bounded: the oldest entries go first.
#[derive(Default)]
struct JobOwners {
    by_jid: std::collections::HashMap<String, String>,
    order: VecDeque<String>,
}

impl JobOwners {
    const CAPACITY: usize = 100_000;

    fn record(&mut self, jid: &str, user: &str) {
        if self.by_jid.contains_key(jid) {
            // The first publish of a jid owns it.
            return;
        }
        self.by_jid.insert(jid.to_string(), user.to_string());
        self.order.push_back(jid.to_string());
        if self.order.len() > Self::CAPACITY {
            if let Some(old) = self.order.pop_front() {
                self.by_jid.remove(&old);
            }
        }
    }
}

/// Where the API reads events.
pub enum Source {
    /// The master's bus (`sock_dir/master_event_pub.ipc`), and its job store when it keeps
    /// every event.
    Local {
        sock_dir: PathBuf,
        stored_events: Option<PathBuf>,
    },
    /// The NATS events stream every master publishes to.
    Nats(Arc<Events>),
}

impl Bus {
    /// Start reading `source`, and keep reading it (reconnecting when the master or NATS
    /// restarts).
    pub fn start(source: Source, replay_len: usize) -> Arc<Bus> {
        let (tx, _) = broadcast::channel(16384);
        let bus = Arc::new(Bus {
            tx,
            replay: Mutex::new(VecDeque::with_capacity(replay_len)),
            replay_len,
            next_id: Mutex::new(0),
            source,
            connected: tokio::sync::watch::Sender::new(false),
            owners: Mutex::new(JobOwners::default()),
        });
        let b = bus.clone();
        tokio::spawn(async move {
            match &b.source {
                Source::Local { sock_dir, .. } => b.run(sock_dir).await,
                Source::Nats(events) => b.follow(events).await,
            }
        });
        bus
    }

    pub fn is_connected(&self) -> bool {
        *self.connected.borrow()
    }

    /// A subscription taken once events flow, waiting for that (at most `within`; just
    /// started, salt-api may be reading the master's bus a moment after it answers): a job
    /// published before would have its returns go by unseen. `None` if they still do not.
    pub async fn subscribe_when_up(
        &self,
        within: Duration,
    ) -> Option<broadcast::Receiver<Arc<BusEvent>>> {
        let mut up = self.connected.subscribe();
        tokio::time::timeout(within, up.wait_for(|up| *up))
            .await
            .ok()?
            .ok()?;
        Some(self.tx.subscribe())
    }

    /// The user who published job `jid`, when this API saw its `new` event.
    pub fn job_owner(&self, jid: &str) -> Option<String> {
        self.owners
            .lock()
            .expect("owners lock")
            .by_jid
            .get(jid)
            .cloned()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<BusEvent>> {
        self.tx.subscribe()
    }

    /// Events after `last_id` (for `Last-Event-ID`): those the replay buffer holds and, for
    /// the time before the buffer's first event (before this process started, or evicted),
    /// the newest `replay_len` events of the NATS stream, or of the master's job store when
    /// it keeps them.
    pub async fn replay_after(&self, last_id: u64) -> Vec<Arc<BusEvent>> {
        let (held, first) = {
            let r = self.replay.lock().expect("replay lock");
            let held: Vec<_> = r.iter().filter(|e| e.id > last_id).cloned().collect();
            (held, r.front().map(|e| e.id))
        };
        let gap = first.is_none_or(|first| first > last_id.saturating_add(1));
        if !gap || self.replay_len == 0 {
            return held;
        }
        let limit = self.replay_len;
        let before = first.unwrap_or(u64::MAX);
        let earlier = match &self.source {
            Source::Local {
                stored_events: Some(path),
                ..
            } => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || stored_after(&path, limit, last_id, before))
                    .await
                    .unwrap_or_default()
            }
            Source::Local { .. } => Vec::new(),
            Source::Nats(events) => {
                let range = events.range(last_id.saturating_add(1), before - 1, limit);
                match range.await {
                    Ok(found) => found
                        .into_iter()
                        .filter_map(|(id, body)| self.event(&body, id))
                        .collect(),
                    Err(e) => {
                        tracing::warn!("events for Last-Event-ID not read: {e}");
                        Vec::new()
                    }
                }
            }
        };
        earlier.into_iter().chain(held).collect()
    }

    /// Read the NATS stream from its end at start, forever.
    async fn follow(self: &Arc<Self>, events: &Events) {
        let after = events.end().await;
        tracing::info!("reading every master's events from the NATS stream");
        events
            .follow(
                after,
                |id, body| self.publish(body.to_vec(), Some(id)),
                |up| {
                    self.connected.send_replace(up);
                },
            )
            .await
    }

    async fn run(&self, sock_dir: &Path) {
        let path = sock_dir.join(brine_transport::eventbus::PUB_SOCK);
        // Tried again soon while the master starts, then every 200 ms.
        let mut pause = Duration::from_millis(10);
        loop {
            match tokio::net::UnixStream::connect(&path).await {
                Ok(mut stream) => {
                    pause = Duration::from_millis(10);
                    tracing::info!("reading the master's events from {}", path.display());
                    probe_until_up(sock_dir, self.connected.subscribe());
                    let mut dec = PubDecoder::new(brine_transport::eventbus::MAX_EVENT_FRAME);
                    let mut buf = vec![0u8; 64 * 1024];
                    'read: loop {
                        let n = match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        dec.push(&buf[..n]);
                        loop {
                            match dec.next_body() {
                                Ok(Some(body)) => {
                                    // Events flow: the master has taken this connection in.
                                    self.connected
                                        .send_if_modified(|up| !std::mem::replace(up, true));
                                    self.publish(body, None)
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    // The stream is out of sync after a bad frame: read the
                                    // bus again from a new connection.
                                    tracing::warn!("bad frame on the master's bus: {e}");
                                    break 'read;
                                }
                            }
                        }
                    }
                    self.connected.send_replace(false);
                    tracing::warn!("lost the master's event bus; reconnecting");
                }
                Err(e) => {
                    tracing::debug!("master event bus {}: {e}", path.display());
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// An event read from the stream, numbered `id`.
    fn event(&self, body: &[u8], id: u64) -> Option<Arc<BusEvent>> {
        decode(body.to_vec(), id).map(Arc::new)
    }

    /// Hand an event to every reader: numbered `id` (the NATS stream's sequence), or by its
    /// stamp.
    fn publish(&self, body: Vec<u8>, id: Option<u64>) {
        let Some(mut ev) = decode(body, 0) else {
            return;
        };
        // Recorded before the event (and so before any of the job's returns) goes out.
        if let Some(jid) = ev
            .tag
            .strip_prefix("salt/job/")
            .and_then(|rest| rest.strip_suffix("/new"))
        {
            if let Some(user) = ev.field("user") {
                self.owners.lock().expect("owners lock").record(jid, user);
            }
        }
        let mut next = self.next_id.lock().expect("id lock");
        *next = id
            .or_else(|| ev.field("_stamp").and_then(stamp_micros))
            .unwrap_or_else(now_micros)
            .max(*next + 1);
        ev.id = *next;
        let ev = Arc::new(ev);
        {
            let mut r = self.replay.lock().expect("replay lock");
            if r.len() == self.replay_len {
                r.pop_front();
            }
            if self.replay_len > 0 {
                r.push_back(ev.clone());
            }
        }
        drop(next);
        let _ = self.tx.send(ev);
    }
}

/// Fire probe events through the master's pull socket until events flow on a new bus
/// connection (`up`): an event fired before the master took the connection in never reaches
/// it, and one fired after does (Salt's listeners wait for their probe the same way).
fn probe_until_up(sock_dir: &Path, mut up: tokio::sync::watch::Receiver<bool>) {
    let dir = sock_dir.to_path_buf();
    tokio::spawn(async move {
        for _ in 0..600 {
            let d = dir.clone();
            let _ = tokio::task::spawn_blocking(move || {
                brine_transport::eventbus::fire_event(
                    &d,
                    brine_protocol::event::LISTENER_PROBE_TAG,
                    rmpv::Value::Map(vec![]),
                )
            })
            .await;
            if tokio::time::timeout(Duration::from_millis(50), up.wait_for(|up| *up))
                .await
                .is_ok()
            {
                return;
            }
        }
    });
}

/// A bus event's tag and data; `None` for a body that is not an event, or a tool's probe (for
/// the tool that fired it, not for the API's clients).
fn decode(body: Vec<u8>, id: u64) -> Option<BusEvent> {
    let (tag, packed) = split_body(&body).ok()?;
    if tag == brine_protocol::event::LISTENER_PROBE_TAG {
        return None;
    }
    let (tag, data_at) = (tag.to_string(), body.len() - packed.len());
    BusEvent::packed(id, tag, body, data_at)
}

fn now_micros() -> u64 {
    u64::try_from(chrono::Utc::now().timestamp_micros()).unwrap_or_default()
}

/// An event's `_stamp` (Salt's UTC `YYYY-MM-DDTHH:MM:SS.ffffff`) in microseconds since the
/// epoch; `None` without one, or for one more than a minute ahead of this clock.
pub fn stamp_id(data: &serde_json::Value) -> Option<u64> {
    stamp_micros(data.get("_stamp")?.as_str()?)
}

/// [`stamp_id`] of the stamp's text.
fn stamp_micros(stamp: &str) -> Option<u64> {
    let t = chrono::NaiveDateTime::parse_from_str(stamp, "%Y-%m-%dT%H:%M:%S%.f").ok()?;
    let id = u64::try_from(t.and_utc().timestamp_micros()).ok()?;
    (id <= now_micros() + 60_000_000).then_some(id)
}

/// The stored events with an id in `(after, before)`, oldest first, among the newest `limit`.
fn stored_after(path: &Path, limit: usize, after: u64, before: u64) -> Vec<Arc<BusEvent>> {
    use brine_master::jobstore::{JobStore, SqliteStore};
    let events = SqliteStore::open_read_only(path).and_then(|store| store.recent_events(limit));
    let events = match events {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!("stored events for Last-Event-ID not read: {e}");
            return Vec::new();
        }
    };
    events
        .into_iter()
        .filter_map(|(tag, data)| {
            let data = brine_protocol::payload::to_json(&data);
            let id = stamp_id(&data)?;
            (id > after && id < before).then(|| Arc::new(BusEvent::new(id, tag, data)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A bad frame on the master's bus makes the API read it again from a new connection:
    /// the events that follow still arrive (a reader left on the broken stream saw none).
    #[tokio::test]
    async fn a_bad_frame_is_followed_by_a_new_connection() {
        let dir = tempfile::tempdir().unwrap();
        let listener =
            tokio::net::UnixListener::bind(dir.path().join(brine_transport::eventbus::PUB_SOCK))
                .unwrap();
        let bus = Bus::start(
            Source::Local {
                sock_dir: dir.path().to_path_buf(),
                stored_events: None,
            },
            16,
        );
        let mut rx = bus.subscribe();
        let event = |tag: &str| {
            let data = brine_protocol::payload::map(vec![("n", rmpv::Value::from(1))]);
            brine_protocol::event::pub_frame(&brine_protocol::event::pack_body(tag, &data))
        };
        let (mut first, _) = listener.accept().await.unwrap();
        // A msgpack string where a frame map belongs, then a good event on the same stream.
        first.write_all(&[0xa3, b'b', b'a', b'd']).await.unwrap();
        first.write_all(&event("test/after/bad")).await.unwrap();
        let (mut second, _) = tokio::time::timeout(Duration::from_secs(5), listener.accept())
            .await
            .expect("the API connects again after a bad frame")
            .unwrap();
        second.write_all(&event("test/next")).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("an event after the reconnection")
            .unwrap();
        assert_eq!(got.tag, "test/next");
        drop(first);
    }

    #[test]
    fn ids_are_stamps_in_microseconds() {
        let data = serde_json::json!({"_stamp": "2020-01-01T00:00:00.000042"});
        assert_eq!(stamp_id(&data), Some(1_577_836_800_000_042));
        assert_eq!(stamp_id(&serde_json::json!({})), None);
        assert_eq!(stamp_id(&serde_json::json!({"_stamp": "yesterday"})), None);
        let far = serde_json::json!({"_stamp": "9999-01-01T00:00:00.000000"});
        assert_eq!(
            stamp_id(&far),
            None,
            "a stamp from the future is not trusted"
        );
    }
}
