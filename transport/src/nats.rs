//! Bus events on NATS JetStream (`brine_nats`): every master publishes each event of its bus to
//! one stream and every salt-api reads that stream, so that several masters and API replicas
//! see the same events, each master's in the order it fired them, numbered by the stream's
//! sequence (which every replica shares, so `Last-Event-ID` resumes on any of them).
//!
//! A message's payload is the event's body as Salt's bus carries it (tag, `"\n\n"`, msgpack
//! data). Its subject is `<subject>.<master id>.<the tag's words>`, the tag split on `/` and
//! each word escaped so that any tag or id makes a valid subject: `.`, `*`, `>`, `%`, spaces
//! and control characters become `%` and two hex digits, and an empty word is `%`.
//!
//! A master holds what the stream has not acknowledged (up to `buffer` events, the oldest going
//! first beyond it) and sends it again with the same message id until it is taken, so a NATS
//! restart neither loses nor repeats events.
//!
//! With `jobs_subject`, masters also share the jobs they publish (core NATS, beside the
//! stream: [`Events::share_jobs`]), and each fires on its own bus the returns other masters'
//! minions sent for its shared jobs ([`Events::relay_returns`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use brine_protocol::config::NatsOptions;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::{broadcast, mpsc, Notify};

use crate::eventbus::EventBus;

/// A NATS failure, in one line naming the servers.
#[derive(Debug, thiserror::Error)]
#[error("NATS at {servers}: {message}")]
pub struct NatsError {
    servers: String,
    message: String,
}

/// How long connecting to NATS may take at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Events published before their acknowledgements are awaited.
const WINDOW: usize = 512;
/// How long a published event waits for the stream's acknowledgement before it is sent again.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// The window in which JetStream drops a message sent again with the same id.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// The nkey seed in `path`: its one non-empty line, checked to be a user's seed (an `SU`
/// seed), so a wrong file is named at start rather than refused by the server as bad
/// credentials.
fn read_seed(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("nkey_seed_file {}: {e}", path.display()))?;
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    match (lines.next(), lines.next()) {
        (Some(seed), None) if seed.starts_with("SU") => {
            nkeys::KeyPair::from_seed(seed).map_err(|e| {
                format!(
                    "nkey_seed_file {}: not a user nkey seed: {e}",
                    path.display()
                )
            })?;
            Ok(seed.to_string())
        }
        _ => Err(format!(
            "nkey_seed_file {}: expected one line holding a user's nkey seed (SU...)",
            path.display()
        )),
    }
}

/// Fail with a line naming the option when `path` cannot be read (the NATS client would
/// only say that its TLS set-up failed).
fn readable(path: &std::path::Path, option: &str) -> Result<(), String> {
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| format!("{option} {}: {e}", path.display()))
}

/// The events stream, connected.
pub struct Events {
    client: async_nats::Client,
    js: jetstream::Context,
    stream: stream::Stream,
    opts: NatsOptions,
}

impl Events {
    /// Connect (failing after a few seconds when no server answers), and find the stream,
    /// creating it when missing. A stream that exists but does not take this configuration's
    /// subjects is an error, never silently bypassed.
    pub async fn connect(opts: &NatsOptions, name: &str) -> Result<Events, NatsError> {
        let err = |message: String| NatsError {
            servers: opts.servers.join(","),
            message,
        };
        let mut options = async_nats::ConnectOptions::new()
            .name(name)
            .connection_timeout(CONNECT_TIMEOUT)
            .event_callback(|event| async move {
                match event {
                    async_nats::Event::Connected => tracing::info!("NATS connected"),
                    async_nats::Event::Disconnected => {
                        tracing::warn!("NATS disconnected; reconnecting")
                    }
                    // Each failed reconnection attempt: the disconnection was logged.
                    async_nats::Event::ClientError(e) => tracing::debug!("NATS: {e}"),
                    // Closed by this process: at exit, or after a refusal it reports itself.
                    async_nats::Event::Closed => tracing::debug!("NATS connection closed"),
                    other => tracing::warn!("NATS: {other}"),
                }
            });
        if let (Some(user), Some(password)) = (&opts.user, &opts.password) {
            options = options.user_and_password(user.clone(), password.clone());
        }
        if let Some(token) = &opts.token {
            options = options.token(token.clone());
        }
        if let Some(path) = &opts.credentials {
            options = options
                .credentials_file(path)
                .await
                .map_err(|e| err(format!("credentials: {e}")))?;
        }
        if let Some(path) = &opts.nkey_seed_file {
            options = options.nkey(read_seed(path).map_err(err)?);
        }
        if let Some(ca) = &opts.tls_ca {
            readable(ca, "tls_ca").map_err(err)?;
            options = options.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&opts.tls_cert, &opts.tls_key) {
            readable(cert, "tls_cert").map_err(err)?;
            readable(key, "tls_key").map_err(err)?;
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        if opts.tls_required {
            options = options.require_tls(true);
        }
        let client = tokio::time::timeout(
            CONNECT_TIMEOUT * 2,
            options.connect(opts.servers.as_slice()),
        )
        .await
        .map_err(|_| err("no answer".into()))?
        .map_err(|e| err(one_line(&e)))?;
        let js = jetstream::ContextBuilder::new()
            .ack_timeout(ACK_TIMEOUT)
            .build(client.clone());
        let wanted = subjects(opts);
        let mut stream = js
            .get_or_create_stream(stream::Config {
                name: opts.stream.clone(),
                subjects: vec![wanted.clone()],
                max_age: Duration::from_secs(opts.max_age),
                max_bytes: i64::try_from(opts.max_bytes).unwrap_or(i64::MAX),
                storage: stream::StorageType::File,
                discard: stream::DiscardPolicy::Old,
                duplicate_window: DUPLICATE_WINDOW,
                ..Default::default()
            })
            .await
            .map_err(|e| stream_error(opts, &e))?;
        let info = stream.info().await.map_err(|e| stream_error(opts, &e))?;
        let subjects = &info.config.subjects;
        if !subjects.iter().any(|s| *s == wanted || s == ">") {
            return Err(err(format!(
                "stream {} takes {subjects:?}, not {wanted}: name another stream or subject",
                opts.stream
            )));
        }
        Ok(Events {
            client,
            js,
            stream,
            opts: opts.clone(),
        })
    }

    /// Publish every event of `bus` to the stream from now on, as master `master_id`.
    pub fn forward(self: &Arc<Self>, bus: &EventBus, master_id: &str) -> Forwarder {
        let outbox = Arc::new(Outbox {
            queue: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            dropped: AtomicU64::new(0),
            capacity: self.opts.buffer.max(1),
        });
        let prefix = format!("{}.{}", self.opts.subject, escape_word(master_id));
        let take = tokio::spawn(take_events(bus.subscribe(), outbox.clone(), prefix));
        let boot = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros();
        let run_id = format!("{}:{boot}", escape_word(master_id));
        let send = tokio::spawn(publish_events(self.clone(), outbox.clone(), run_id));
        Forwarder {
            outbox,
            tasks: [take, send],
        }
    }

    /// With `jobs_subject`: send the jobs this master publishes to `<jobs_subject>.<master id>`
    /// through the returned [`JobShare`], and receive every other master's from the returned
    /// channel. `None` without `jobs_subject`. Core NATS: a master that is down when a job is
    /// sent does not get it, as a minion that is down misses a publish.
    pub async fn share_jobs(
        &self,
        master_id: &str,
    ) -> Result<Option<(JobShare, mpsc::Receiver<PeerJob>)>, NatsError> {
        let Some(jobs) = &self.opts.jobs_subject else {
            return Ok(None);
        };
        let own = escape_word(master_id);
        let mut sub = self
            .client
            .subscribe(format!("{jobs}.*"))
            .await
            .map_err(|e| NatsError {
                servers: self.opts.servers.join(","),
                message: format!("subscribing to {jobs}.*: {}", one_line(&e)),
            })?;
        let (in_tx, in_rx) = mpsc::channel(SHARED_JOBS);
        let prefix = format!("{jobs}.");
        let me = own.clone();
        let receive = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let origin = msg.subject.as_str().strip_prefix(&prefix).unwrap_or("");
                if origin == me || origin.is_empty() {
                    continue;
                }
                if msg.payload.len() > MAX_SHARED_JOB {
                    tracing::warn!(
                        "a job of {} bytes from master {origin} ignored: over {MAX_SHARED_JOB}",
                        msg.payload.len()
                    );
                    continue;
                }
                let job = PeerJob {
                    origin: unescape_word(origin),
                    body: msg.payload,
                };
                if in_tx.try_send(job).is_err() {
                    tracing::error!("a job from master {origin} dropped: {SHARED_JOBS} wait");
                }
            }
        });
        let (out_tx, mut out_rx) = mpsc::channel::<Bytes>(SHARED_JOBS);
        let client = self.client.clone();
        let subject = format!("{jobs}.{own}");
        let send = tokio::spawn(async move {
            while let Some(body) = out_rx.recv().await {
                if let Err(e) = client.publish(subject.clone(), body).await {
                    tracing::error!("a job not sent to the other masters: {}", one_line(&e));
                }
            }
        });
        Ok(Some((
            JobShare {
                out: out_tx,
                tasks: [receive, send],
            },
            in_rx,
        )))
    }

    /// [`Events::last_sequence`], asked again every half second until NATS answers (each
    /// failure logged): where a reader that starts now begins.
    pub async fn end(&self) -> u64 {
        loop {
            match self.last_sequence().await {
                Ok(n) => return n,
                Err(e) => tracing::warn!("{e}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The stream's last sequence number (0 when it is empty).
    pub async fn last_sequence(&self) -> Result<u64, NatsError> {
        let mut stream = self.stream.clone();
        let info = stream.info().await.map_err(|e| self.error(&e))?;
        Ok(info.state.last_sequence)
    }

    /// Follow the stream from just after `after`, handing each event to `on_event` with its
    /// sequence number, forever: a consumer that fails is created again from the last event
    /// seen. `on_state` hears whether events are flowing.
    pub async fn follow(
        &self,
        after: u64,
        mut on_event: impl FnMut(u64, &[u8]),
        on_state: impl Fn(bool),
    ) {
        let every = subjects(&self.opts);
        self.follow_subjects(after, &every, |seq, _, body| on_event(seq, body), on_state)
            .await
    }

    /// With `jobs_subject`: fire on `bus` the returns other masters' minions sent for the jobs
    /// this master shared (`shared(jid)`), from now on, so that this master's own readers (the
    /// `salt` command, runners, orchestrations) gather them as they gather its own minions'.
    pub async fn relay_returns(
        &self,
        master_id: &str,
        bus: &EventBus,
        shared: impl Fn(&str) -> bool,
    ) {
        let after = self.end().await;
        let own = format!("{}.{}.", self.opts.subject, escape_word(master_id));
        let returns = format!("{}.*.salt.job.*.ret.>", self.opts.subject);
        let relay = |_: u64, subject: &str, body: &[u8]| {
            if subject.starts_with(&own) {
                return;
            }
            let jid = brine_protocol::event::split_body(body)
                .ok()
                .map(|(tag, _)| tag)
                .and_then(|tag| tag.strip_prefix("salt/job/"))
                .and_then(|rest| rest.split_once("/ret/"))
                .map(|(jid, _)| jid);
            if jid.is_some_and(&shared) {
                bus.relay(body.to_vec());
            }
        };
        self.follow_subjects(after, &returns, relay, |_| {}).await
    }

    /// [`Events::follow`] for the events of `filter` (a subject pattern), with each one's
    /// subject.
    async fn follow_subjects(
        &self,
        mut after: u64,
        filter: &str,
        mut on_event: impl FnMut(u64, &str, &[u8]),
        on_state: impl Fn(bool),
    ) {
        loop {
            match self.read_from(after + 1, filter).await {
                Ok(mut messages) => {
                    on_state(true);
                    while let Some(next) = messages.next().await {
                        match next {
                            Ok(msg) => match msg.info() {
                                Ok(info) => {
                                    after = info.stream_sequence;
                                    on_event(after, msg.subject.as_str(), &msg.payload);
                                }
                                Err(e) => tracing::warn!("NATS message without its position: {e}"),
                            },
                            Err(e) => {
                                tracing::warn!("reading the events stream: {}", one_line(&e));
                                break;
                            }
                        }
                    }
                    on_state(false);
                }
                Err(e) => tracing::debug!("{e}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The events numbered `first..=last`, at most `limit` of them (the newest), in order.
    pub async fn range(
        &self,
        first: u64,
        last: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Bytes)>, NatsError> {
        let last = last.min(self.last_sequence().await?);
        let first = first.max(last.saturating_sub(limit as u64).saturating_add(1));
        if first > last || limit == 0 {
            return Ok(Vec::new());
        }
        let mut messages = self.read_from(first, &subjects(&self.opts)).await?;
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while let Ok(Some(next)) = tokio::time::timeout_at(deadline, messages.next()).await {
            let msg = next.map_err(|e| self.error(&e))?;
            let seq = msg.info().map_err(|e| self.error(&*e))?.stream_sequence;
            if seq > last {
                break;
            }
            out.push((seq, msg.payload.clone()));
            if seq == last {
                break;
            }
        }
        Ok(out)
    }

    async fn read_from(
        &self,
        start: u64,
        filter: &str,
    ) -> Result<consumer::pull::Ordered, NatsError> {
        let consumer = self
            .stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: filter.to_string(),
                deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: start.max(1),
                },
                ..Default::default()
            })
            .await
            .map_err(|e| self.error(&e))?;
        consumer.messages().await.map_err(|e| self.error(&e))
    }

    fn error(&self, e: &dyn std::error::Error) -> NatsError {
        stream_error(&self.opts, e)
    }
}

/// The subjects of every master's events: `<subject>.>`.
fn subjects(opts: &NatsOptions) -> String {
    format!("{}.>", opts.subject)
}

/// A failure about the configured stream.
fn stream_error(opts: &NatsOptions, e: &dyn std::error::Error) -> NatsError {
    NatsError {
        servers: opts.servers.join(","),
        message: format!("stream {}: {}", opts.stream, one_line(e)),
    }
}

/// Jobs received from other masters that wait for this one to publish them.
const SHARED_JOBS: usize = 10_000;
/// The largest job body taken from another master (a master's `max_request_size` default).
const MAX_SHARED_JOB: usize = 100 * 1024 * 1024;

/// A job another master published: its id (unescaped) and the publish load it sent, msgpack.
#[derive(Debug, Clone)]
pub struct PeerJob {
    pub origin: String,
    pub body: Bytes,
}

/// A master's sending of its jobs to the other masters; stops when dropped.
pub struct JobShare {
    out: mpsc::Sender<Bytes>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl JobShare {
    /// Send one published job (its clear publish load, msgpack) to the other masters. Never
    /// blocks: beyond [`SHARED_JOBS`] waiting, the job is not shared (logged).
    pub fn send(&self, body: Vec<u8>) {
        if self.out.try_send(Bytes::from(body)).is_err() {
            tracing::error!("a job not sent to the other masters: {SHARED_JOBS} wait already");
        }
    }
}

impl Drop for JobShare {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A master's publishing of its bus to the stream; stops when dropped.
pub struct Forwarder {
    outbox: Arc<Outbox>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Forwarder {
    /// Events dropped so far because the stream did not take them in time.
    pub fn dropped(&self) -> u64 {
        self.outbox.dropped.load(Ordering::Relaxed)
    }

    /// Events waiting for the stream.
    pub fn waiting(&self) -> usize {
        self.outbox.queue.lock().expect("outbox lock").len()
    }

    /// Wait until the stream has taken every event fired so far, or `timeout` passed.
    pub async fn flush(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.waiting() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if self.waiting() > 0 {
            tracing::warn!("{} events not published to NATS", self.waiting());
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

struct Outbox {
    queue: Mutex<VecDeque<Outgoing>>,
    ready: Notify,
    dropped: AtomicU64,
    capacity: usize,
}

#[derive(Clone)]
struct Outgoing {
    /// This master's count of events, for the message id.
    n: u64,
    subject: String,
    body: Bytes,
}

async fn take_events(
    mut rx: broadcast::Receiver<Arc<crate::eventbus::Event>>,
    outbox: Arc<Outbox>,
    prefix: String,
) {
    let mut n = 0u64;
    loop {
        let ev = match rx.recv().await {
            Ok(ev) => ev,
            Err(broadcast::error::RecvError::Lagged(k)) => {
                outbox.dropped.fetch_add(k, Ordering::Relaxed);
                tracing::error!("{k} events not published to NATS: the bus outran the publisher");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        // Another master's event, on the stream already.
        if ev.relayed {
            continue;
        }
        n += 1;
        let out = Outgoing {
            n,
            subject: subject_of(&prefix, &ev.tag),
            body: Bytes::copy_from_slice(&ev.body),
        };
        let dropped = {
            let mut q = outbox.queue.lock().expect("outbox lock");
            let over = q.len() >= outbox.capacity;
            if over {
                q.pop_front();
            }
            q.push_back(out);
            over
        };
        if dropped
            && outbox
                .dropped
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(10_000)
        {
            tracing::error!(
                "NATS has not taken the last {} events: the oldest are dropped ({} so far)",
                outbox.capacity,
                outbox.dropped.load(Ordering::Relaxed)
            );
        }
        outbox.ready.notify_one();
    }
}

async fn publish_events(events: Arc<Events>, outbox: Arc<Outbox>, run_id: String) {
    let mut failing: Option<String> = None;
    let mut backoff = Duration::from_millis(100);
    loop {
        let batch: Vec<Outgoing> = {
            let q = outbox.queue.lock().expect("outbox lock");
            q.iter().take(WINDOW).cloned().collect()
        };
        if batch.is_empty() {
            outbox.ready.notified().await;
            continue;
        }
        let mut acks = Vec::with_capacity(batch.len());
        let mut failure = None;
        for out in batch {
            let msg = jetstream::message::PublishMessage::build()
                .payload(out.body)
                .message_id(format!("{run_id}:{}", out.n));
            match events.js.send_publish(out.subject, msg).await {
                Ok(ack) => acks.push((out.n, ack)),
                Err(e) => {
                    failure = Some(one_line(&e));
                    break;
                }
            }
        }
        let mut taken = None;
        for (n, ack) in acks {
            match ack.await {
                Ok(_) => taken = Some(n),
                Err(e) => {
                    failure.get_or_insert_with(|| one_line(&e));
                    break;
                }
            }
        }
        if let Some(n) = taken {
            let mut q = outbox.queue.lock().expect("outbox lock");
            while q.front().is_some_and(|o| o.n <= n) {
                q.pop_front();
            }
        }
        match failure {
            Some(e) => {
                if failing.is_none() {
                    tracing::error!(
                        "events not yet on the NATS stream {}: {e}; held and sent again",
                        events.opts.stream
                    );
                }
                failing = Some(e);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
            None => {
                if failing.take().is_some() {
                    tracing::warn!("the NATS stream {} takes events again", events.opts.stream);
                }
                backoff = Duration::from_millis(100);
            }
        }
    }
}

/// The subject of an event with `tag`, under `prefix` (`<subject>.<master id>`).
pub fn subject_of(prefix: &str, tag: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + tag.len() + 1);
    out.push_str(prefix);
    for word in tag.split('/') {
        out.push('.');
        out.push_str(&escape_word(word));
    }
    out
}

/// One subject word for `word`: see the module's documentation.
fn escape_word(word: &str) -> String {
    if word.is_empty() {
        return "%".into();
    }
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        if matches!(c, '.' | '*' | '>' | '%') || c.is_whitespace() || c.is_control() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The text a subject word stands for (the inverse of [`escape_word`]).
fn unescape_word(word: &str) -> String {
    if word == "%" {
        return String::new();
    }
    let bytes = word.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| word.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An error and its causes on one line.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let full = cause.to_string();
        let more = full.strip_prefix("nats: ").unwrap_or(&full);
        if !text.contains(more) {
            text.push_str(": ");
            text.push_str(more);
        }
        source = cause.source();
    }
    text.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tag_makes_a_valid_subject() {
        assert_eq!(
            subject_of("salt.events.m1", "salt/job/20261127/ret/web1.example.com"),
            "salt.events.m1.salt.job.20261127.ret.web1%2Eexample%2Ecom"
        );
        assert_eq!(subject_of("p.m", "a//b c"), "p.m.a.%.b%20c");
        assert_eq!(subject_of("p.m", "x*>%y"), "p.m.x%2A%3E%25y");
        assert_eq!(subject_of("p.m", "/"), "p.m.%.%");
        assert_eq!(subject_of("p.m", "tab\there"), "p.m.tab%09here");
        assert_eq!(escape_word("é.ü"), "é%2Eü");
        for word in [
            "",
            "m1",
            "web1.example.com",
            "x*>%y",
            "tab\there",
            "é.ü",
            "100%",
        ] {
            assert_eq!(unescape_word(&escape_word(word)), word);
        }
    }
}
