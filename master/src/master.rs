//! The master's state and the request dispatch: every request on the ret port is parsed once
//! here (envelope, then command) and handed to its handler in [`crate::handlers`].

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brine_protocol::config::{JobCache, MasterConfig};
use brine_protocol::crypt::{EncAlgo, PublicKey, SigAlgo};
use brine_protocol::loads::{
    AesCmd, ClearCmd, Enc, MinionEventLoad, PublishRequest, RequestEnvelope, ReturnLoad,
};
use brine_protocol::payload::{bytes_of, dumps, get_str, map, remove, Value};
use brine_transport::eventbus::EventBus;
use brine_transport::{LateReply, Reply};

use crate::datacache::DataCache;
use crate::jobstore::pgjsonb::PgStore;
use crate::jobstore::{JobStore, SqliteStore};
use crate::keys::{invalid_id_reason, KeyStore};
use crate::secrets::Secrets;

/// Where the master's publishes go: the publisher process in the daemon, a recorder in tests.
pub trait PublishSink: Send + Sync {
    /// Queue one message (its frames: `[payload]` or `[topic, payload]`).
    fn send(&self, frames: Vec<Vec<u8>>);

    /// Start the publisher again if it died; what happened, if anything did.
    fn restart_if_exited(&self) -> Option<String> {
        None
    }
}

impl PublishSink for brine_transport::Publisher {
    fn send(&self, frames: Vec<Vec<u8>>) {
        brine_transport::Publisher::send(self, frames)
    }

    fn restart_if_exited(&self) -> Option<String> {
        brine_transport::Publisher::restart_if_exited(self)
    }
}

pub struct Master {
    pub cfg: MasterConfig,
    pub keys: KeyStore,
    pub secrets: Secrets,
    pub bus: EventBus,
    pub store: Arc<dyn JobStore>,
    /// Stores returns off the request workers and acknowledges them once committed.
    pub returns: crate::handlers::returns::ReturnWriter,
    pub publisher: Box<dyn PublishSink>,
    pub cache: DataCache,
    pub rt: tokio::runtime::Handle,
    pub started: Instant,
    /// A handle on the `Arc` this master lives in, for work that outlives a request.
    self_ref: std::sync::Weak<Master>,
    /// Publishes leave in the order of their serials: minions drop a publish whose serial is
    /// not above the last one they saw.
    pub publish_order: PublishOrder,
    /// Minion keys and request tokens already verified (see [`VerifiedTokens`]).
    pub verified: VerifiedTokens,
    /// Jids published lately, so that no caller can publish into another's job.
    pub recent_jids: RecentJids,
    /// Jobs published to minions that had not signed in yet, for their start.
    pub late: crate::late_publishes::LatePublishes,
    /// Nonces of aes requests seen lately, so that none is processed twice.
    pub replay: crate::replay::ReplayGuard,
    /// The file server (`file_roots`), with its cached lists and hashes.
    pub fileserver: Arc<crate::fileserver::FileServer>,
    /// The pillar compiler (`pillar_roots`, `ext_pillar`, `pillar_cache`).
    pub pillars: crate::pillar::Pillars,
    /// The reactor, once started (the `reactor.*` runners manage it).
    pub reactor: std::sync::OnceLock<Arc<crate::reactor::Reactor>>,
    /// What went wrong, counted for salt-api's `/metrics`.
    pub stats: MasterStats,
    /// Records of jobs published while the job store could not be reached (jid, load,
    /// minions), oldest first, written by the maintenance loop once it is back.
    pub waiting_loads: std::sync::Mutex<std::collections::VecDeque<(String, Value, Vec<String>)>>,
    /// The publishing of the bus to NATS (`brine_nats`), once started.
    pub nats: std::sync::OnceLock<brine_transport::nats::Forwarder>,
    /// The sending of published jobs to the other masters (`brine_nats.jobs_subject`).
    pub job_share: std::sync::OnceLock<brine_transport::nats::JobShare>,
    /// The jobs this master published and sent to the other masters: their minions' returns
    /// are fired on this master's bus too.
    pub shared_jids: RecentJids,
}

/// The file in the master's cachedir that salt-api's `/metrics` adds to its own: the
/// master's counters, in Prometheus' text format, written every second when they change.
pub const METRICS_FILE: &str = "brine_master.prom";

/// Counters of the master's failures, written for salt-api's `/metrics` (see
/// [`Master::metrics_text`]).
#[derive(Default)]
pub struct MasterStats {
    /// Returns not acknowledged and job records held because the job store could not be
    /// reached.
    pub store_unavailable: Arc<std::sync::atomic::AtomicU64>,
}

impl Master {
    /// The master's counters, for [`METRICS_FILE`].
    pub fn metrics_text(&self) -> String {
        use std::fmt::Write;
        use std::sync::atomic::Ordering;
        let id = self.cfg.id.replace('\\', "\\\\").replace('"', "\\\"");
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{master=\"{id}\"}} {value}\n"
            );
        };
        metric(
            "brine_master_store_unavailable_total",
            "counter",
            "Returns left unacknowledged (their minions send them again) and job records held because the job store could not be reached.",
            self.stats.store_unavailable.load(Ordering::Relaxed),
        );
        metric(
            "brine_master_job_records_waiting",
            "gauge",
            "Records of jobs published while the job store could not be reached, not yet written.",
            self.waiting_loads.lock().expect("waiting loads lock").len() as u64,
        );
        if let Some(nats) = self.nats.get() {
            metric(
                "brine_master_nats_events_waiting",
                "gauge",
                "Bus events waiting for the NATS stream to take them.",
                nats.waiting() as u64,
            );
            metric(
                "brine_master_nats_events_dropped_total",
                "counter",
                "Bus events dropped because the NATS stream did not take them in time.",
                nats.dropped(),
            );
        }
        out
    }
}

impl Master {
    /// A master over `cfg`'s pki dir, cache dir and job store, publishing through `publisher`
    /// and firing on `bus`. Must be called inside a tokio runtime (runners run on it).
    pub fn new(
        cfg: MasterConfig,
        publisher: Box<dyn PublishSink>,
        bus: EventBus,
    ) -> anyhow::Result<Arc<Master>> {
        let keys = KeyStore::open(&cfg.pki_dir)?;
        let secrets = Secrets::load(
            &cfg.pki_dir,
            &cfg.cachedir,
            cfg.keysize,
            Duration::from_secs(cfg.publish_session),
            &cfg.user,
        )?;
        let store: Arc<dyn JobStore> = match &cfg.master_job_cache {
            JobCache::Local => {
                let store_path = crate::daemon::job_store_path(&cfg);
                Arc::new(
                    SqliteStore::open(&store_path)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", store_path.display()))?
                        .sync_returns(cfg.job_store_sync_full),
                )
            }
            JobCache::Pgjsonb(opts) => {
                Arc::new(PgStore::open(opts).map_err(|e| anyhow::anyhow!("master_job_cache: {e}"))?)
            }
        };
        let stats = MasterStats::default();
        let returns = crate::handlers::returns::ReturnWriter::start(
            store.clone(),
            stats.store_unavailable.clone(),
        );
        let cache = DataCache::open(&cfg.cachedir, cfg.minion_data_cache);
        let replay = crate::replay::ReplayGuard::new(cfg.request_server_ttl);
        let fileserver = Arc::new(crate::fileserver::FileServer::new(&cfg));
        let pillars = crate::pillar::Pillars::new(&cfg);
        Ok(Arc::new_cyclic(|me| Master {
            cfg,
            keys,
            secrets,
            bus,
            store,
            returns,
            publisher,
            cache,
            rt: tokio::runtime::Handle::current(),
            started: Instant::now(),
            self_ref: me.clone(),
            publish_order: Default::default(),
            verified: Default::default(),
            recent_jids: Default::default(),
            late: Default::default(),
            replay,
            fileserver,
            pillars,
            reactor: std::sync::OnceLock::new(),
            stats,
            waiting_loads: Default::default(),
            nats: std::sync::OnceLock::new(),
            job_share: std::sync::OnceLock::new(),
            shared_jids: Default::default(),
        }))
    }
}

/// The last [`RecentJids::CAPACITY`] jids published (older ones are found in the job store).
#[derive(Default)]
pub struct RecentJids {
    inner: std::sync::Mutex<(
        std::collections::HashSet<String>,
        std::collections::VecDeque<String>,
    )>,
}

impl RecentJids {
    const CAPACITY: usize = 100_000;

    /// Record `jid`; false when it was already recorded.
    pub fn claim(&self, jid: &str) -> bool {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (set, order) = &mut *guard;
        if !set.insert(jid.to_string()) {
            return false;
        }
        order.push_back(jid.to_string());
        if order.len() > Self::CAPACITY {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
        true
    }

    /// Whether `jid` is recorded.
    pub fn contains(&self, jid: &str) -> bool {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.contains(jid)
    }
}

/// The `tok` a minion puts in every aes request is its X9.31 signature of `salt`, the same
/// bytes every time for one key. Remembering the (accepted key text, tok) pair that last
/// verified for each minion saves parsing the key and an RSA operation per request; the key
/// file is still read every time, so a deleted, rejected or replaced key takes effect at once.
#[derive(Default)]
pub struct VerifiedTokens {
    map: std::sync::Mutex<HashMap<String, Arc<VerifiedKey>>>,
}

pub struct VerifiedKey {
    pub_text: String,
    tok: Vec<u8>,
    pub key: PublicKey,
}

impl VerifiedTokens {
    /// Forget everything beyond this many minions (ids of deleted keys would pile up).
    const MAX: usize = 1 << 17;

    /// The minion's public key if `tok` verifies with `pub_text`.
    fn check(&self, id: &str, pub_text: &str, tok: &[u8]) -> Result<Arc<VerifiedKey>, String> {
        if let Some(hit) = self.map.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
            if hit.pub_text == pub_text && brine_protocol::crypt::ct_eq(&hit.tok, tok) {
                return Ok(hit.clone());
            }
        }
        let key = PublicKey::from_pem(pub_text)
            .map_err(|e| format!("accepted key of {id} unreadable: {e}"))?;
        match key.x931_decrypt(tok) {
            Ok(t) if t == b"salt" => {}
            _ => return Err(format!("aes request from {id}: tok does not verify")),
        }
        let entry = Arc::new(VerifiedKey {
            pub_text: pub_text.to_string(),
            tok: tok.to_vec(),
            key,
        });
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= Self::MAX {
            map.clear();
        }
        map.insert(id.to_string(), entry.clone());
        Ok(entry)
    }
}

/// Tickets that let several workers encrypt and sign publishes at the same time (the RSA
/// signature is most of a publish's cost) while the frames still leave in serial order.
#[derive(Default)]
pub struct PublishOrder {
    /// (next ticket to hand out, ticket whose frame may be queued now)
    state: std::sync::Mutex<(u64, u64)>,
    turn: std::sync::Condvar,
}

/// One publish's place in line. Dropping it (after queueing the frame, or on unwind) lets
/// the next one go, after waiting for its own turn so the line never stalls.
pub struct PublishTurn<'a> {
    order: &'a PublishOrder,
    ticket: u64,
}

impl PublishOrder {
    /// Take the next ticket and run `f` (which takes the serial) while no other ticket can
    /// be taken, so serials and tickets follow the same order.
    pub fn enter<T>(&self, f: impl FnOnce() -> T) -> (PublishTurn<'_>, T) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = st.0;
        st.0 += 1;
        let out = f();
        (
            PublishTurn {
                order: self,
                ticket,
            },
            out,
        )
    }
}

impl PublishTurn<'_> {
    /// Block until every earlier ticket is done.
    pub fn wait(&self) {
        let mut st = self.order.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.1 != self.ticket {
            st = self.order.turn.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for PublishTurn<'_> {
    fn drop(&mut self) {
        self.wait();
        let mut st = self.order.state.lock().unwrap_or_else(|e| e.into_inner());
        st.1 += 1;
        drop(st);
        self.order.turn.notify_all();
    }
}

/// Log a request Brine does not handle once per command name (a peer retrying, or a minion
/// running the same function again, does not flood the log). At most 256 names are remembered.
fn log_unsupported_once(kind: &str, cmd: &str, from: &str) {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let key = format!("{kind} {cmd}");
    if seen.len() < 256 && seen.insert(key) {
        tracing::info!(
            "unsupported {kind} command {cmd:?} from {from}: answered {{}} as Salt's master does (logged once)"
        );
    }
}

/// A refused request: the reason is logged, the peer gets Salt's `"bad load"`.
#[derive(Debug)]
pub struct Refused(pub String);

fn refuse<T>(why: impl Into<String>) -> Result<T, Refused> {
    Err(Refused(why.into()))
}

/// Run one handler; a panic is logged with the command's name and becomes `None`, so the
/// worker lives on and the peer gets Salt's answer for a failed handler.
fn guarded<T>(kind: &str, cmd: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            tracing::error!("{kind} command {cmd:?} failed: handler panicked: {why}");
            None
        }
    }
}

/// What a clear request gets when its handler failed: an error as Salt's master reports one.
pub fn handler_error(cmd: &str) -> Value {
    map(vec![(
        "error",
        map(vec![
            ("name", Value::from("SaltMasterError")),
            (
                "message",
                Value::from(format!(
                    "An error occurred handling the {cmd:?} command; see the master log"
                )),
            ),
        ]),
    )])
}

impl Master {
    /// Largest request handled (`brine_max_request_size`, default 64 MiB). libzmq cuts off
    /// peers sending more than twice this, before the bytes are held in memory.
    pub fn max_request_size(&self) -> usize {
        self.cfg.max_request_size
    }

    pub fn arc(&self) -> Option<Arc<Master>> {
        self.self_ref.upgrade()
    }

    /// Handle one request from the ret port: the reply, or a reply sent once the request's
    /// work is done (a return is acknowledged once stored). Never panics: a refused request
    /// gets `"bad load"`, a failed handler Salt's answer for one.
    pub fn handle(&self, body: &[u8]) -> Reply {
        let res = guarded("request", "(dispatch)", || self.dispatch(body))
            .unwrap_or_else(|| Err(Refused("request dispatch panicked".into())));
        match res {
            Ok(reply) => reply,
            Err(Refused(why)) => {
                tracing::warn!("request refused: {why}");
                Reply::Now(dumps(&Value::from("bad load")))
            }
        }
    }

    /// [`Master::handle`], waiting for a late reply.
    #[cfg(test)]
    pub(crate) fn handle_request(&self, body: &[u8]) -> Vec<u8> {
        match self.handle(body) {
            Reply::Now(reply) => reply,
            Reply::Later(then) => {
                let (tx, rx) = crossbeam_channel::bounded(1);
                then(LateReply::new(Vec::new(), tx));
                rx.recv_timeout(Duration::from_secs(30))
                    .ok()
                    .and_then(|mut frames| frames.pop())
                    .expect("a late reply")
            }
        }
    }

    fn dispatch(&self, body: &[u8]) -> Result<Reply, Refused> {
        if body.len() > self.max_request_size() {
            return refuse(format!(
                "request of {} bytes is over brine_max_request_size ({} bytes)",
                body.len(),
                self.max_request_size()
            ));
        }
        let raw = match brine_protocol::payload::loads_bounded(body) {
            Ok(v) => v,
            Err(e) => return refuse(format!("undecodable payload ({} bytes): {e}", body.len())),
        };
        let env = RequestEnvelope::parse(raw).map_err(|e| Refused(e.to_string()))?;
        if self.cfg.minimum_auth_version > 0 && env.version < self.cfg.minimum_auth_version {
            return refuse(format!(
                "envelope version {} is below minimum_auth_version {}",
                env.version, self.cfg.minimum_auth_version
            ));
        }
        match env.enc {
            Enc::Clear => self.clear(env),
            Enc::Aes => self.aes(env),
        }
    }

    // ---- clear requests ---------------------------------------------------------------

    fn clear(&self, env: RequestEnvelope) -> Result<Reply, Refused> {
        let load = env.load;
        if !matches!(load, Value::Map(_)) {
            return refuse("clear load is not a map");
        }
        let cmd = ClearCmd::of(&load);
        let name = cmd.as_str().to_string();
        let reply = guarded("clear", &name, || match cmd {
            ClearCmd::Auth => self.auth(&load, env.version),
            ClearCmd::Publish => match PublishRequest::parse(load.clone()) {
                Ok(req) => self.clear_publish(req),
                // Only an authenticated caller learns what is wrong with its request.
                Err(e) if self.authenticate_load(&load).is_some() => {
                    tracing::warn!("publish refused: {e}");
                    map(vec![(
                        "error",
                        map(vec![
                            ("name", Value::from("SaltInvocationError")),
                            ("message", Value::from(e.to_string())),
                        ]),
                    )])
                }
                Err(e) => {
                    tracing::warn!("publish refused: bad root key ({e})");
                    Master::auth_error("AuthenticationError")
                }
            },
            ClearCmd::Ping => load,
            ClearCmd::Runner => self.clear_runner(load),
            ClearCmd::Wheel => self.clear_wheel(load),
            ClearCmd::Other(other) => {
                log_unsupported_once("clear", &other, "a local client");
                Value::Map(vec![])
            }
        });
        Ok(Reply::Now(dumps(
            &reply.unwrap_or_else(|| handler_error(&name)),
        )))
    }

    // ---- aes requests -------------------------------------------------------------------

    fn aes(&self, env: RequestEnvelope) -> Result<Reply, Refused> {
        let version = env.version;
        let Some(id) = env.id.as_deref() else {
            return refuse("aes request without an outer id");
        };
        if let Some(why) = invalid_id_reason(id) {
            return refuse(format!("aes request: {why}: {id:?}"));
        }
        if version <= 2 {
            return refuse(format!(
                "aes request from {id} with envelope version {version}"
            ));
        }
        let Some(session) = self.secrets.existing_session(id) else {
            return refuse(format!("aes request from {id}, which has no session"));
        };
        let Some(ct) = bytes_of(&env.load) else {
            return refuse(format!("aes request from {id}: load is not bytes"));
        };
        let mut inner = match session.loads(ct, None) {
            Ok(Some(v)) => v,
            Ok(None) => return refuse(format!("aes request from {id}: not a Salt payload")),
            Err(e) => return refuse(format!("aes request from {id} does not decrypt: {e}")),
        };
        if !matches!(inner, Value::Map(_)) {
            return refuse(format!("aes request from {id}: load is not a map"));
        }
        let nonce = remove(&mut inner, "nonce").and_then(|n| n.as_str().map(str::to_string));
        if get_str(&inner, "id") != Some(id) {
            return refuse(format!(
                "aes request: inner id differs from outer id {id:?}"
            ));
        }
        let Some(tok) = remove(&mut inner, "tok") else {
            return refuse(format!("aes request from {id} without tok"));
        };
        let Some(pub_text) = self.keys.read_accepted(id) else {
            return refuse(format!("aes request from {id}, whose key is not accepted"));
        };
        let Some(tok) = bytes_of(&tok) else {
            return refuse(format!("aes request from {id}: tok does not verify"));
        };
        let verified = match self.verified.check(id, &pub_text, tok) {
            Ok(v) => v,
            Err(why) => return refuse(why),
        };
        let minion_pub = &verified.key;
        let (Some(nonce_text), Some(ts)) = (
            nonce.as_deref(),
            brine_protocol::payload::get(&inner, "ts").and_then(brine_protocol::loads::int),
        ) else {
            return refuse(format!("aes request from {id} without nonce or ts"));
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        if let Err(why) = self.replay.check(id, nonce_text, ts, now) {
            return refuse(format!("aes request from {id}: {why}"));
        }
        let cmd = AesCmd::of(&inner);
        let name = cmd.as_str().to_string();
        let answer = |ret: &Value| dumps(&Value::Binary(session.dumps(ret, nonce.as_deref())));
        if cmd == AesCmd::Pillar {
            let extra_str = |k: &str| {
                env.extra
                    .iter()
                    .find(|(key, _)| key.as_str() == Some(k))
                    .and_then(|(_, v)| v.as_str())
            };
            let enc_algo = extra_str("enc_algo")
                .and_then(EncAlgo::parse)
                .unwrap_or(EncAlgo::OaepSha1);
            let sig_algo = extra_str("sig_algo")
                .and_then(SigAlgo::parse)
                .unwrap_or(SigAlgo::Pkcs1v15Sha1);
            let reply = guarded("aes", &name, || {
                self.on_pillar(id, inner, nonce.as_deref(), minion_pub, enc_algo, sig_algo)
            });
            // Salt answers a failed handler with an empty string.
            return Ok(Reply::Now(
                reply.unwrap_or_else(|| answer(&Value::from(""))),
            ));
        }
        if cmd == AesCmd::Return {
            let stored = guarded("aes", &name, || match ReturnLoad::parse(inner) {
                Ok(r) => self.on_return(r),
                Err(e) => {
                    tracing::warn!("return from {id} ignored: {e}");
                    None
                }
            });
            return Ok(match stored {
                // Acknowledged (with nothing, as Salt does) once the job store has it.
                Some(Some(ret)) => {
                    let ack = answer(&Value::Nil);
                    let writer = self.returns.clone();
                    Reply::Later(Box::new(move |late: LateReply| {
                        writer.save(ret, Box::new(move || late.send(ack)));
                    }))
                }
                Some(None) => Reply::Now(answer(&Value::Nil)),
                None => Reply::Now(answer(&Value::from(""))),
            });
        }
        // (Returns were answered above.)
        let ret = guarded("aes", &name, || match cmd {
            AesCmd::MinionEvent => match MinionEventLoad::parse(inner) {
                Ok(ev) => self.on_minion_event(ev),
                Err(e) => {
                    tracing::warn!("event from {id} ignored: {e}");
                    Value::Nil
                }
            },
            AesCmd::MasterOpts => self.master_opts(&inner),
            AesCmd::Mine => self.on_mine(id, &inner),
            AesCmd::MineDelete => self.on_mine_delete(id, &inner),
            AesCmd::MineFlush => self.on_mine_flush(id),
            AesCmd::MineGet => self.on_mine_get(id, &inner),
            AesCmd::FileRecv => self.on_file_recv(id, &inner),
            other => match self.on_file_request(&other, &inner) {
                Some(v) => v,
                None => {
                    // Salt's master answers an unknown aes command with an empty dict.
                    log_unsupported_once("aes", other.as_str(), id);
                    Value::Map(vec![])
                }
            },
        });
        // Salt answers a failed handler with an empty string.
        Ok(Reply::Now(answer(&ret.unwrap_or_else(|| Value::from("")))))
    }

    /// An accepted key was deleted or rejected: as Salt does with `rotate_aes_key`, rotate the
    /// AES key so that minion can no longer read publishes.
    pub fn rotate_after_key_removal(&self) {
        if self.cfg.rotate_aes_key {
            self.secrets.rotate_aes();
            self.bus
                .fire("key", map(vec![("rotate_aes_key", Value::from(true))]));
            tracing::info!("AES key rotated after a minion key was removed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{PublishOrder, VerifiedTokens};
    use crate::handlers::events::minion_may_fire;
    use brine_protocol::crypt::PrivateKey;

    #[test]
    fn minions_fire_only_their_own_events_and_never_the_masters() {
        for tag in [
            "salt/auth",
            "salt/auth/creds",
            "salt/key",
            "salt/key/accept",
            "salt/job/20250101000000000000/ret/m2",
            "salt/job/20250101000000000000/ret/m1",
            "salt/job/20250101000000000000/new",
            "salt/job/20250101000000000000/publish",
            "salt/job/20250101000000000000/prog/m2/0",
            "salt/state_result/20250101000000000000/m2/web",
            "salt/run/20250101000000000000/new",
            "salt/wheel/20250101000000000000/ret",
            "salt/presence/present",
            "salt/cloud/vm/created",
            "20250101000000000000",
            "salt/minion/m2/start",
            "salt/beacon/m2/load/",
            "minion/refresh/m2",
        ] {
            assert!(!minion_may_fire("m1", tag), "{tag}");
        }
        for tag in [
            "salt/minion/m1/start",
            "minion_start",
            "salt/job/20250101000000000000/prog/m1/0",
            "salt/state_result/20250101000000000000/m1/custom/tag",
            "salt/beacon/m1/load/",
            "minion/refresh/m1",
            "my/custom/tag",
            "salt/custom",
        ] {
            assert!(minion_may_fire("m1", tag), "{tag}");
        }
    }

    #[test]
    fn request_tokens_are_verified_against_the_current_key() {
        let cache = VerifiedTokens::default();
        let (k1, k2) = (
            PrivateKey::generate(1024).unwrap(),
            PrivateKey::generate(1024).unwrap(),
        );
        let (p1, p2) = (k1.public().to_pem(), k2.public().to_pem());
        let (t1, t2) = (
            k1.x931_encrypt(b"salt").unwrap(),
            k2.x931_encrypt(b"salt").unwrap(),
        );
        assert!(cache.check("m1", &p1, &t1).is_ok());
        // Cached: the same pair again.
        assert!(cache.check("m1", &p1, &t1).is_ok());
        // Another key's token never passes, cached pair or not.
        assert!(cache.check("m1", &p1, &t2).is_err());
        // The accepted key was replaced: the old token no longer verifies.
        assert!(cache.check("m1", &p2, &t1).is_err());
        assert!(cache.check("m1", &p2, &t2).is_ok());
        let forged = k1.x931_encrypt(b"pepper").unwrap();
        assert!(cache.check("m2", &p1, &forged).is_err());
        assert!(cache.check("m2", "not a key", &t1).is_err());
    }
    use std::sync::{Arc, Mutex};

    /// Workers finish their (simulated) signing in any order; frames still leave in ticket
    /// order, and a worker that panics mid-publish does not stall the ones behind it.
    #[test]
    fn publishes_leave_in_ticket_order() {
        let order = Arc::new(PublishOrder::default());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let serial = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let handles: Vec<_> = (0..8u64)
            .map(|i| {
                let (order, sent, serial) = (order.clone(), sent.clone(), serial.clone());
                std::thread::spawn(move || {
                    for j in 0..25u64 {
                        let (turn, s) = order
                            .enter(|| serial.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1);
                        // Later tickets often finish their work first.
                        std::thread::sleep(std::time::Duration::from_micros(
                            (i * 37 + j * 11) % 300,
                        ));
                        if i == 3 && j == 7 {
                            panic!("worker dies holding a turn");
                        }
                        turn.wait();
                        sent.lock().unwrap().push(s);
                    }
                })
            })
            .collect();
        let panicked = handles.into_iter().filter_map(|h| h.join().err()).count();
        assert_eq!(panicked, 1);
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), 8 * 25 - (25 - 7));
        assert!(
            sent.windows(2).all(|w| w[0] < w[1]),
            "out of order: {sent:?}"
        );
    }
}
