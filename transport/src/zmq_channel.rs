//! ZeroMQ channels as Salt uses them (libzmq, ZMTP 3.x, NULL mechanism).
//!
//! * [`RequestServer`]: the master's ROUTER on the ret port, feeding a pool of worker threads.
//! * [`ReqClient`]: a REQ client with a deadline per request; a request that times out throws the
//!   socket away (a REQ socket whose reply was lost is stuck otherwise), as Salt's client does.
//! * [`Publisher`]: the master's PUB on the publish port.
//! * [`Subscriber`]: a minion's SUB, delivering each message's frames to a callback.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Sender};

use crate::job_queue::{JobQueue, Lane, PopError, PushError};

/// How long blocking loops wait before looking at their stop flag.
const POLL_MS: i64 = 100;

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("zeromq error on {endpoint}: {source}")]
    Zmq {
        endpoint: String,
        #[source]
        source: zmq::Error,
    },
    #[error("no reply from {endpoint} within {timeout:?}")]
    Timeout { endpoint: String, timeout: Duration },
    #[error("publisher process for {endpoint}: {why}")]
    PublisherProcess { endpoint: String, why: String },
}

fn zerr(endpoint: &str) -> impl Fn(zmq::Error) -> TransportError + '_ {
    move |source| TransportError::Zmq {
        endpoint: endpoint.to_string(),
        source,
    }
}

/// Handles one request body and says what to reply. Called on a worker thread.
pub type ReplyHandler = Arc<dyn Fn(&[u8]) -> Reply + Send + Sync>;

/// What a [`ReplyHandler`] makes of one request.
pub enum Reply {
    /// The reply body, sent as soon as the handler returns.
    Now(Vec<u8>),
    /// The reply comes later. The closure runs on the worker and is handed the way back to the
    /// sender, to use from any thread; the worker goes on with the next request meanwhile (a
    /// master acknowledging a return once the disk has it does not hold a worker while it
    /// waits).
    Later(Box<dyn FnOnce(LateReply) + Send>),
}

/// The way back to the sender of one request, for a reply given after its handler returned.
/// Dropped unsent, the request gets no reply: its client times out as when a reply is lost.
pub struct LateReply {
    route: Vec<Vec<u8>>,
    tx: Sender<Vec<Vec<u8>>>,
}

impl LateReply {
    /// A way back delivering `route` plus the reply on `tx` (the server makes these; a caller
    /// of a handler outside the server can wait on one).
    pub fn new(route: Vec<Vec<u8>>, tx: Sender<Vec<Vec<u8>>>) -> LateReply {
        LateReply { route, tx }
    }

    pub fn send(mut self, body: Vec<u8>) {
        self.route.push(body);
        // The server is stopping when nothing receives: the reply is dropped with it.
        let _ = self.tx.send(self.route);
    }
}

#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// `tcp://host:port`.
    pub bind: String,
    /// Worker threads running the handler.
    pub workers: usize,
    /// Largest message accepted; a peer sending more is disconnected by libzmq.
    pub max_message_size: i64,
    /// Requests waiting for a worker; beyond this, new requests are dropped (and logged): the
    /// client times out and retries, as it would with an overloaded Salt master.
    pub queue_len: usize,
    /// Sign-ins (clear `_auth` requests) waiting for a worker, in a queue of their own: a flood
    /// of them is dropped there and never delays the requests of minions already signed in.
    /// At most all workers but one handle sign-ins at once.
    pub sign_in_queue_len: usize,
    /// Connections the kernel holds for the socket until it accepts them (`zmq_backlog`).
    pub backlog: i32,
    pub ipv6: bool,
}

/// The master's publish socket's settings.
#[derive(Debug, Clone, Copy)]
pub struct PubOptions {
    /// Messages queued per subscriber (`pub_hwm`).
    pub hwm: i32,
    /// Connections the kernel holds until they are accepted (`zmq_backlog`).
    pub backlog: i32,
    pub ipv6: bool,
}

struct Job {
    route: Vec<Vec<u8>>,
    /// The request as libzmq received it (not copied: a large frame costs its size once).
    body: zmq::Message,
    /// Holds the body's bytes in the server's count of queued bytes until the job is done.
    _queued: QueuedBytes,
}

/// Bytes of requests received and not yet handled, across the queue and the workers: a flood of
/// large frames is dropped once they add up to [`QUEUED_BYTES_LIMIT`], so memory stays bounded
/// whatever the number of senders.
struct QueuedBytes {
    total: Arc<std::sync::atomic::AtomicUsize>,
    n: usize,
}

/// Request bytes queued or being handled at once (a few of the largest requests).
const QUEUED_BYTES_LIMIT: usize = 256 * 1024 * 1024;
/// The same for sign-ins, counted apart: a sign-in is a few KiB, and a flood of padded ones
/// must not use up the budget of the other requests.
const QUEUED_SIGN_IN_BYTES_LIMIT: usize = 32 * 1024 * 1024;

impl QueuedBytes {
    /// Count `n` more bytes, unless that would pass the limit while others are queued (a single
    /// request under the size limit is always taken).
    fn take(
        total: &Arc<std::sync::atomic::AtomicUsize>,
        n: usize,
        limit: usize,
    ) -> Option<QueuedBytes> {
        let before = total.fetch_add(n, Ordering::SeqCst);
        if before > 0 && before + n > limit {
            total.fetch_sub(n, Ordering::SeqCst);
            return None;
        }
        Some(QueuedBytes {
            total: total.clone(),
            n,
        })
    }
}

impl Drop for QueuedBytes {
    fn drop(&mut self) {
        self.total.fetch_sub(self.n, Ordering::SeqCst);
    }
}

/// One multipart message, each part as libzmq holds it.
fn recv_parts(sock: &zmq::Socket, flags: i32) -> Result<Vec<zmq::Message>, zmq::Error> {
    let mut parts = vec![sock.recv_msg(flags)?];
    while sock.get_rcvmore()? {
        parts.push(sock.recv_msg(0)?);
    }
    Ok(parts)
}

/// The master's request server: a ROUTER socket and a pool of workers.
pub struct RequestServer {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl RequestServer {
    pub fn start(
        ctx: &zmq::Context,
        opts: ServerOptions,
        handler: ReplyHandler,
    ) -> Result<Self, TransportError> {
        let ep = opts.bind.as_str();
        let router = ctx.socket(zmq::ROUTER).map_err(zerr(ep))?;
        router.set_router_handover(true).map_err(zerr(ep))?;
        router.set_linger(1000).map_err(zerr(ep))?;
        router
            .set_maxmsgsize(opts.max_message_size)
            .map_err(zerr(ep))?;
        router.set_backlog(opts.backlog).map_err(zerr(ep))?;
        router.set_tcp_keepalive(1).map_err(zerr(ep))?;
        router.set_tcp_keepalive_idle(60).map_err(zerr(ep))?;
        router.set_tcp_keepalive_intvl(15).map_err(zerr(ep))?;
        router.set_tcp_keepalive_cnt(3).map_err(zerr(ep))?;
        router.set_rcvhwm(0).map_err(zerr(ep))?;
        if opts.ipv6 {
            router.set_ipv6(true).map_err(zerr(ep))?;
        }
        router.bind(ep).map_err(zerr(ep))?;

        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let inproc = format!(
            "inproc://brine-replies-{}",
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let replies = ctx.socket(zmq::PULL).map_err(zerr(&inproc))?;
        replies.bind(&inproc).map_err(zerr(&inproc))?;

        let stop = Arc::new(AtomicBool::new(false));
        let queue = Arc::new(JobQueue::<Job>::new(
            opts.queue_len,
            opts.sign_in_queue_len,
            opts.workers.max(2) - 1,
        ));
        let mut threads = Vec::new();
        // Late replies reach the router through a socket of their own, from one thread.
        let (late_tx, late_rx) = crossbeam_channel::unbounded::<Vec<Vec<u8>>>();
        let late_push = ctx.socket(zmq::PUSH).map_err(zerr(&inproc))?;
        late_push.set_linger(0).map_err(zerr(&inproc))?;
        late_push.connect(&inproc).map_err(zerr(&inproc))?;
        let late_stop = stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name("req-late".into())
                .spawn(move || late_loop(late_push, late_rx, late_stop))
                .expect("spawn late reply thread"),
        );
        for n in 0..opts.workers.max(1) {
            let push = ctx.socket(zmq::PUSH).map_err(zerr(&inproc))?;
            push.set_linger(0).map_err(zerr(&inproc))?;
            push.connect(&inproc).map_err(zerr(&inproc))?;
            let rx = queue.clone();
            let handler = handler.clone();
            let stop = stop.clone();
            let late = late_tx.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("mworker-{n}"))
                    .spawn(move || worker_loop(push, rx, handler, late, stop))
                    .expect("spawn worker thread"),
            );
        }
        let stop2 = stop.clone();
        let endpoint = opts.bind.clone();
        threads.push(
            std::thread::Builder::new()
                .name("req-router".into())
                .spawn(move || router_loop(router, replies, queue, stop2, endpoint))
                .expect("spawn router thread"),
        );
        Ok(RequestServer { stop, threads })
    }

    /// Stop accepting, let the workers finish what they hold, and join the threads.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Requests dropped for want of room, per lane; logged at each power of two.
#[derive(Default)]
struct Dropped {
    main: u64,
    sign_ins: u64,
}

impl Dropped {
    fn count(&mut self, lane: Lane, why: impl FnOnce() -> String) {
        let n = match lane {
            Lane::Main => &mut self.main,
            Lane::SignIn => &mut self.sign_ins,
        };
        *n += 1;
        if n.is_power_of_two() {
            tracing::warn!("{} ({n} so far)", why());
        }
    }
}

fn router_loop(
    router: zmq::Socket,
    replies: zmq::Socket,
    tx: Arc<JobQueue<Job>>,
    stop: Arc<AtomicBool>,
    endpoint: String,
) {
    let mut dropped = Dropped::default();
    let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let queued_sign_ins = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        let (r_in, p_in) = {
            let mut items = [
                router.as_poll_item(zmq::POLLIN),
                replies.as_poll_item(zmq::POLLIN),
            ];
            if let Err(e) = zmq::poll(&mut items, POLL_MS) {
                if e == zmq::Error::EINTR {
                    continue;
                }
                tracing::error!("poll on {endpoint} failed: {e}");
                break;
            }
            (items[0].is_readable(), items[1].is_readable())
        };
        if p_in {
            while let Ok(frames) = replies.recv_multipart(zmq::DONTWAIT) {
                if let Err(e) = router.send_multipart(frames, zmq::DONTWAIT) {
                    tracing::debug!("reply not sent (peer gone?): {e}");
                }
            }
        }
        if r_in {
            while let Ok(mut frames) = recv_parts(&router, zmq::DONTWAIT) {
                // [identity, (empty delimiter), body]: REQ peers send the delimiter, DEALERs may not.
                let Some(body) = frames.pop() else { continue };
                let frames: Vec<Vec<u8>> = frames.iter().map(|f| f.to_vec()).collect();
                if frames.is_empty() {
                    tracing::warn!("request without a routing identity dropped");
                    continue;
                }
                if frames.len() > 2 || (frames.len() == 2 && !frames[1].is_empty()) {
                    tracing::warn!(
                        "request with {} frames dropped: one body frame expected",
                        frames.len() + 1
                    );
                    continue;
                }
                let lane = match brine_protocol::payload::clear_cmd(&body) {
                    Some(b"_auth") => Lane::SignIn,
                    _ => Lane::Main,
                };
                let (budget, limit, what) = match lane {
                    Lane::Main => (&queued, QUEUED_BYTES_LIMIT, "requests"),
                    Lane::SignIn => (&queued_sign_ins, QUEUED_SIGN_IN_BYTES_LIMIT, "sign-ins"),
                };
                let Some(hold) = QueuedBytes::take(budget, body.len(), limit) else {
                    dropped.count(lane, || {
                        format!(
                            "{what} dropped: {} MiB of them already waiting",
                            limit >> 20
                        )
                    });
                    continue;
                };
                match tx.push(
                    Job {
                        route: frames,
                        body,
                        _queued: hold,
                    },
                    lane,
                ) {
                    Ok(()) => {}
                    Err(PushError::Full) => {
                        dropped.count(lane, || format!("{what} dropped: their queue is full"));
                    }
                    Err(PushError::Closed) => return,
                }
            }
        }
    }
    tx.close();
    // Deliver the replies of requests still being handled.
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match replies.poll(zmq::POLLIN, POLL_MS) {
            Ok(n) if n > 0 => {
                while let Ok(frames) = replies.recv_multipart(zmq::DONTWAIT) {
                    let _ = router.send_multipart(frames, zmq::DONTWAIT);
                }
            }
            _ => break,
        }
    }
}

/// Hands late replies to the router until the server stops (and for a moment after, as the
/// router still delivers replies then), or until no [`LateReply`] can be made any more.
fn late_loop(
    push: zmq::Socket,
    rx: crossbeam_channel::Receiver<Vec<Vec<u8>>>,
    stop: Arc<AtomicBool>,
) {
    let _ = push.set_sndtimeo(1000);
    let mut stopped_at = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(POLL_MS as u64)) {
            Ok(frames) => {
                if let Err(e) = push.send_multipart(frames, 0) {
                    tracing::error!("a late reply could not be handed back: {e}");
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
        if stop.load(Ordering::SeqCst) {
            let since = *stopped_at.get_or_insert_with(Instant::now);
            if since.elapsed() > Duration::from_secs(1) {
                return;
            }
        }
    }
}

fn worker_loop(
    push: zmq::Socket,
    rx: Arc<JobQueue<Job>>,
    handler: ReplyHandler,
    late: Sender<Vec<Vec<u8>>>,
    stop: Arc<AtomicBool>,
) {
    // A reply that cannot be handed back within a second (the router is gone) is dropped
    // rather than blocking the worker for ever.
    let _ = push.set_sndtimeo(1000);
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let (job, lane) = match rx.pop(Duration::from_millis(POLL_MS as u64)) {
            Ok(popped) => popped,
            Err(PopError::Timeout) => {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                continue;
            }
            Err(PopError::Closed) => return,
        };
        let reply = handler(&job.body);
        rx.done(lane);
        let mut frames = job.route;
        drop(job.body);
        drop(job._queued);
        match reply {
            Reply::Now(body) => {
                frames.push(body);
                if let Err(e) = push.send_multipart(frames, 0) {
                    tracing::error!("worker could not hand back a reply: {e}");
                }
            }
            Reply::Later(then) => then(LateReply::new(frames, late.clone())),
        }
    }
}

/// A REQ client: one request in flight, a deadline per request, a fresh socket after a timeout.
pub struct ReqClient {
    ctx: zmq::Context,
    endpoint: String,
    sock: Option<zmq::Socket>,
}

impl ReqClient {
    pub fn new(ctx: &zmq::Context, endpoint: &str) -> Self {
        ReqClient {
            ctx: ctx.clone(),
            endpoint: endpoint.to_string(),
            sock: None,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn socket(&mut self) -> Result<&zmq::Socket, TransportError> {
        if self.sock.is_none() {
            let ep = self.endpoint.as_str();
            let s = self.ctx.socket(zmq::REQ).map_err(zerr(ep))?;
            s.set_linger(0).map_err(zerr(ep))?;
            s.set_reconnect_ivl_max(5000).map_err(zerr(ep))?;
            s.set_tcp_keepalive(1).map_err(zerr(ep))?;
            if ep.contains('[') {
                s.set_ipv6(true).map_err(zerr(ep))?;
            }
            s.connect(ep).map_err(zerr(ep))?;
            self.sock = Some(s);
        }
        Ok(self.sock.as_ref().expect("socket just created"))
    }

    /// Send one request and wait up to `timeout` for its reply.
    pub fn request(&mut self, body: &[u8], timeout: Duration) -> Result<Vec<u8>, TransportError> {
        let endpoint = self.endpoint.clone();
        let result = (|| {
            let s = self.socket()?;
            s.set_sndtimeo(timeout.as_millis().min(i32::MAX as u128) as i32)
                .map_err(zerr(&endpoint))?;
            s.send(body, 0).map_err(|e| match e {
                zmq::Error::EAGAIN => TransportError::Timeout {
                    endpoint: endpoint.clone(),
                    timeout,
                },
                e => zerr(&endpoint)(e),
            })?;
            let deadline = Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(TransportError::Timeout {
                        endpoint: endpoint.clone(),
                        timeout,
                    });
                }
                match s.poll(zmq::POLLIN, left.as_millis().max(1) as i64) {
                    Ok(0) => continue,
                    Ok(_) => {
                        let mut frames = s.recv_multipart(0).map_err(zerr(&endpoint))?;
                        return Ok(frames.pop().unwrap_or_default());
                    }
                    Err(zmq::Error::EINTR) => continue,
                    Err(e) => return Err(zerr(&endpoint)(e)),
                }
            }
        })();
        if result.is_err() {
            self.sock = None;
        }
        result
    }
}

/// The master's PUB socket, owned by one thread and fed through a channel; or, with
/// [`Publisher::start_child`], owned by a child process fed over IPC.
pub struct Publisher {
    tx: Option<Sender<Vec<Vec<u8>>>>,
    thread: Option<JoinHandle<()>>,
    child: Option<PublisherChild>,
}

/// The publisher process and how to start it again.
struct PublisherChild {
    program: std::path::PathBuf,
    args: Vec<String>,
    bind: String,
    process: std::sync::Mutex<Option<std::process::Child>>,
}

impl PublisherChild {
    /// Start the process and wait for its `ready` line.
    fn spawn(&self) -> Result<std::process::Child, TransportError> {
        use std::io::BufRead;
        use std::process::Stdio;
        let fail = |why: String| TransportError::PublisherProcess {
            endpoint: self.bind.clone(),
            why,
        };
        let mut child = std::process::Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (line_tx, line_rx) = bounded::<String>(1);
        std::thread::spawn(move || {
            // The first `ready` line, or what ended the output.
            let mut lines = std::io::BufReader::new(stdout).lines();
            let end = loop {
                match lines.next() {
                    Some(Ok(l)) if l.trim() == "ready" => break l,
                    Some(Ok(_)) => continue,
                    _ => break String::new(),
                }
            };
            let _ = line_tx.send(end);
        });
        match line_rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) if l.trim() == "ready" => Ok(child),
            Ok(_) => {
                let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                Err(fail(format!("exited before binding ({status})")))
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(fail("not ready after 20 s".into()))
            }
        }
    }

    /// SIGTERM (the child sends what it holds and exits), then SIGKILL after 3 s.
    fn stop(mut child: std::process::Child) {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: a signal to our own child, which has not been reaped yet.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

/// A bound PUB socket with the master's options.
fn pub_socket(
    ctx: &zmq::Context,
    bind: &str,
    opts: PubOptions,
) -> Result<zmq::Socket, TransportError> {
    let PubOptions { hwm, backlog, ipv6 } = opts;
    let s = ctx.socket(zmq::PUB).map_err(zerr(bind))?;
    s.set_sndhwm(hwm).map_err(zerr(bind))?;
    s.set_rcvhwm(hwm).map_err(zerr(bind))?;
    s.set_backlog(backlog).map_err(zerr(bind))?;
    s.set_linger(1000).map_err(zerr(bind))?;
    s.set_tcp_keepalive(1).map_err(zerr(bind))?;
    // Subscription messages are tiny; anything large on a PUB socket is hostile.
    s.set_maxmsgsize(64 * 1024).map_err(zerr(bind))?;
    if ipv6 {
        s.set_ipv6(true).map_err(zerr(bind))?;
    }
    s.bind(bind).map_err(zerr(bind))?;
    Ok(s)
}

/// A thread that sends every message of the channel on `s`.
fn feed_thread(s: zmq::Socket) -> (Sender<Vec<Vec<u8>>>, JoinHandle<()>) {
    let (tx, rx) = crossbeam_channel::unbounded::<Vec<Vec<u8>>>();
    let thread = std::thread::Builder::new()
        .name("publisher".into())
        .spawn(move || {
            for frames in rx {
                if let Err(e) = s.send_multipart(frames, 0) {
                    tracing::error!("publish failed: {e}");
                }
            }
        })
        .expect("spawn publisher thread");
    (tx, thread)
}

impl Publisher {
    /// The PUB socket in this process.
    pub fn start(ctx: &zmq::Context, bind: &str, opts: PubOptions) -> Result<Self, TransportError> {
        let (tx, thread) = feed_thread(pub_socket(ctx, bind, opts)?);
        Ok(Publisher {
            tx: Some(tx),
            thread: Some(thread),
            child: None,
        })
    }

    /// The PUB socket in a child process, as Salt's master has its publisher process: the
    /// subscribers' connections then do not count against this process's open-files limit.
    /// `program args` must run [`run_publisher_child`] with the same `feed` (an `ipc://`
    /// endpoint); it prints `ready` once both sockets are bound, and this waits for that
    /// line. See [`Publisher::restart_if_exited`].
    pub fn start_child(
        ctx: &zmq::Context,
        program: &std::path::Path,
        args: &[String],
        feed: &str,
        bind: &str,
    ) -> Result<Self, TransportError> {
        let child = PublisherChild {
            program: program.to_path_buf(),
            args: args.to_vec(),
            bind: bind.to_string(),
            process: std::sync::Mutex::new(None),
        };
        // The publisher of a master killed a moment ago holds the port until it sees its
        // parent gone and its queue lingers out (about two seconds): a restart right after a
        // crash tries again for a few seconds instead of failing.
        let deadline = Instant::now() + Duration::from_secs(6);
        let process = loop {
            match child.spawn() {
                Ok(p) => break p,
                Err(e) if Instant::now() < deadline => {
                    tracing::warn!("{e}; trying again");
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => return Err(e),
            }
        };
        let s = ctx.socket(zmq::PUSH).map_err(zerr(feed))?;
        // The PUB socket applies the high-water mark per subscriber; the feed never drops,
        // and holds messages while the publisher process restarts.
        let setup = s
            .set_sndhwm(0)
            .and_then(|()| s.set_linger(1000))
            .and_then(|()| s.connect(feed));
        if let Err(e) = setup {
            PublisherChild::stop(process);
            return Err(zerr(feed)(e));
        }
        *child.process.lock().unwrap_or_else(|e| e.into_inner()) = Some(process);
        let (tx, thread) = feed_thread(s);
        Ok(Publisher {
            tx: Some(tx),
            thread: Some(thread),
            child: Some(child),
        })
    }

    /// If the publisher process has died, start it again (what was published meanwhile is
    /// sent when it is back). Returns what happened, for the log.
    pub fn restart_if_exited(&self) -> Option<String> {
        let child = self.child.as_ref()?;
        let mut process = child.process.lock().unwrap_or_else(|e| e.into_inner());
        let status = match process.as_mut().map(|p| p.try_wait()) {
            Some(Ok(None)) => return None,
            Some(Ok(Some(status))) => status.to_string(),
            Some(Err(e)) => e.to_string(),
            None => "not running".to_string(),
        };
        *process = None;
        Some(match child.spawn() {
            Ok(p) => {
                *process = Some(p);
                format!(
                    "publisher process for {} ended ({status}); restarted",
                    child.bind
                )
            }
            Err(e) => format!("publisher process ended ({status}); restart failed: {e}"),
        })
    }

    /// Queue one message (one or more frames) for every subscriber.
    pub fn send(&self, frames: Vec<Vec<u8>>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(frames);
        }
    }

    /// The publisher process, when there is one.
    pub fn child_pid(&self) -> Option<u32> {
        let child = self.child.as_ref()?;
        let process = child.process.lock().unwrap_or_else(|e| e.into_inner());
        process.as_ref().map(std::process::Child::id)
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(child) = self.child.take() {
            let process = child
                .process
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(p) = process {
                PublisherChild::stop(p);
            }
        }
    }
}

static CHILD_STOP: AtomicBool = AtomicBool::new(false);

/// The body of the publisher process (see [`Publisher::start_child`]): bind the PUB socket
/// and the `feed` PULL socket, print `ready`, and forward every message until SIGTERM, or
/// until the parent process is gone.
pub fn run_publisher_child(feed: &str, bind: &str, opts: PubOptions) -> Result<(), TransportError> {
    extern "C" fn on_term(_: libc::c_int) {
        CHILD_STOP.store(true, Ordering::SeqCst);
    }
    let parent = std::os::unix::process::parent_id();
    // SAFETY: prctl and signal with constant arguments; the handler only stores an atomic.
    #[allow(unsafe_code)]
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    if std::os::unix::process::parent_id() != parent {
        return Ok(());
    }
    let ctx = zmq::Context::new();
    let publisher = pub_socket(&ctx, bind, opts)?;
    if let Some(path) = feed.strip_prefix("ipc://") {
        let _ = std::fs::remove_file(path);
    }
    let pull = ctx.socket(zmq::PULL).map_err(zerr(feed))?;
    pull.set_rcvhwm(0).map_err(zerr(feed))?;
    pull.set_linger(0).map_err(zerr(feed))?;
    pull.bind(feed).map_err(zerr(feed))?;
    {
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }
    while !CHILD_STOP.load(Ordering::SeqCst) && std::os::unix::process::parent_id() == parent {
        match pull.poll(zmq::POLLIN, 1000) {
            Ok(0) | Err(zmq::Error::EINTR) => continue,
            Ok(_) => {
                while let Ok(frames) = pull.recv_multipart(zmq::DONTWAIT) {
                    if let Err(e) = publisher.send_multipart(frames, 0) {
                        eprintln!("publisher: publish failed: {e}");
                    }
                }
            }
            Err(e) => return Err(zerr(feed)(e)),
        }
    }
    // Whatever arrived before the stop still goes out (the PUB socket lingers).
    while let Ok(frames) = pull.recv_multipart(zmq::DONTWAIT) {
        let _ = publisher.send_multipart(frames, 0);
    }
    if let Some(path) = feed.strip_prefix("ipc://") {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// A minion's SUB socket; every message received is handed to `on_message` on the socket's thread.
pub struct Subscriber {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Subscriber {
    pub fn start<F>(
        ctx: &zmq::Context,
        endpoint: &str,
        subscriptions: &[Vec<u8>],
        identity: Option<&[u8]>,
        reconnect_ivl_ms: i32,
        reconnect_ivl_max_ms: i32,
        mut on_message: F,
    ) -> Result<Self, TransportError>
    where
        F: FnMut(Vec<Vec<u8>>) + Send + 'static,
    {
        let s = ctx.socket(zmq::SUB).map_err(zerr(endpoint))?;
        s.set_linger(1).map_err(zerr(endpoint))?;
        s.set_tcp_keepalive(1).map_err(zerr(endpoint))?;
        s.set_reconnect_ivl(reconnect_ivl_ms)
            .map_err(zerr(endpoint))?;
        s.set_reconnect_ivl_max(reconnect_ivl_max_ms)
            .map_err(zerr(endpoint))?;
        s.set_rcvhwm(0).map_err(zerr(endpoint))?;
        if let Some(id) = identity {
            s.set_identity(id).map_err(zerr(endpoint))?;
        }
        if endpoint.contains('[') {
            s.set_ipv6(true).map_err(zerr(endpoint))?;
        }
        for sub in subscriptions {
            s.set_subscribe(sub).map_err(zerr(endpoint))?;
        }
        s.connect(endpoint).map_err(zerr(endpoint))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let ep = endpoint.to_string();
        let thread = std::thread::Builder::new()
            .name("subscriber".into())
            .spawn(move || {
                while !stop2.load(Ordering::SeqCst) {
                    match s.poll(zmq::POLLIN, POLL_MS) {
                        Ok(0) => {}
                        Ok(_) => {
                            while let Ok(frames) = s.recv_multipart(zmq::DONTWAIT) {
                                on_message(frames);
                            }
                        }
                        Err(zmq::Error::EINTR) => {}
                        Err(e) => {
                            tracing::error!("subscriber on {ep} failed: {e}");
                            return;
                        }
                    }
                }
            })
            .expect("spawn subscriber thread");
        Ok(Subscriber {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port the kernel picks (bound, then released for the server to bind).
    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port")
    }

    /// A server on `ep` with `workers` workers, 1 KiB requests at most.
    fn test_server(
        ctx: &zmq::Context,
        ep: &str,
        workers: usize,
        handler: ReplyHandler,
    ) -> RequestServer {
        let opts = ServerOptions {
            bind: ep.to_string(),
            workers,
            max_message_size: 1024,
            queue_len: 16,
            sign_in_queue_len: 16,
            backlog: 100,
            ipv6: false,
        };
        RequestServer::start(ctx, opts, handler).unwrap()
    }

    #[test]
    fn request_reply_and_timeout() {
        let ctx = zmq::Context::new();
        let port = free_port();
        let ep = format!("tcp://127.0.0.1:{port}");
        let handler: ReplyHandler = Arc::new(|body: &[u8]| {
            if body == b"slow" {
                std::thread::sleep(Duration::from_millis(600));
            }
            let mut r = b"re:".to_vec();
            r.extend_from_slice(body);
            Reply::Now(r)
        });
        let server = test_server(&ctx, &ep, 2, handler);
        let mut c = ReqClient::new(&ctx, &ep);
        assert_eq!(c.request(b"a", Duration::from_secs(5)).unwrap(), b"re:a");
        let err = c.request(b"slow", Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, TransportError::Timeout { .. }));
        // After a timeout the client starts over on a fresh socket.
        assert_eq!(c.request(b"b", Duration::from_secs(5)).unwrap(), b"re:b");
        // A message over the size limit gets the peer disconnected, not an answer...
        let mut big = ReqClient::new(&ctx, &ep);
        assert!(big
            .request(&vec![b'x'; 4096], Duration::from_millis(300))
            .is_err());
        // ...and the server goes on serving everyone else.
        assert_eq!(c.request(b"c", Duration::from_secs(5)).unwrap(), b"re:c");
        server.stop();
    }

    #[test]
    fn a_late_reply_does_not_hold_the_worker() {
        let ctx = zmq::Context::new();
        let ep = format!("tcp://127.0.0.1:{}", free_port());
        // One worker. "later" is answered by another thread once "now" was answered.
        let (answered_tx, answered_rx) = crossbeam_channel::unbounded::<()>();
        let handler: ReplyHandler = Arc::new(move |body: &[u8]| {
            if body == b"later" {
                let answered = answered_rx.clone();
                Reply::Later(Box::new(move |late: LateReply| {
                    std::thread::spawn(move || {
                        let waited = answered.recv_timeout(Duration::from_secs(5)).is_ok();
                        late.send(if waited {
                            b"late".to_vec()
                        } else {
                            b"alone".to_vec()
                        });
                    });
                }))
            } else {
                answered_tx.send(()).unwrap();
                Reply::Now(b"now".to_vec())
            }
        });
        let server = test_server(&ctx, &ep, 1, handler);
        let ep2 = ep.clone();
        let first = std::thread::spawn(move || {
            let ctx = zmq::Context::new();
            ReqClient::new(&ctx, &ep2).request(b"later", Duration::from_secs(10))
        });
        std::thread::sleep(Duration::from_millis(200));
        let mut c = ReqClient::new(&ctx, &ep);
        assert_eq!(c.request(b"now", Duration::from_secs(5)).unwrap(), b"now");
        assert_eq!(first.join().unwrap().unwrap(), b"late");
        server.stop();
    }

    #[test]
    fn publish_subscribe() {
        let ctx = zmq::Context::new();
        let port = free_port();
        let ep = format!("tcp://127.0.0.1:{port}");
        let publisher = Publisher::start(
            &ctx,
            &ep,
            PubOptions {
                hwm: 1000,
                backlog: 100,
                ipv6: false,
            },
        )
        .unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let _sub = Subscriber::start(&ctx, &ep, &[b"".to_vec()], None, 100, 1000, move |f| {
            let _ = tx.send(f);
        })
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            publisher.send(vec![b"hello".to_vec()]);
            if let Ok(f) = rx.recv_timeout(Duration::from_millis(100)) {
                assert_eq!(f, vec![b"hello".to_vec()]);
                break;
            }
            assert!(Instant::now() < deadline, "nothing received");
        }
    }
}
