//! The master's state and its request handlers: everything that arrives on the ret port.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brine_protocol::config::MasterConfig;
use brine_protocol::crypt::{EncAlgo, PublicKey, SigAlgo};
use brine_protocol::jid::gen_jid;
use brine_protocol::payload::{bytes_of, dumps, get, get_str, map, remove, set, Value};
use brine_transport::eventbus::EventBus;
use brine_transport::Publisher;

use crate::datacache::DataCache;
use crate::jobstore::JobStore;
use crate::keys::{invalid_id_reason, KeyState, KeyStore};
use crate::secrets::Secrets;

/// Top-level `salt/<x>` tag families that only the master fires: sign-ins and keys, jobs
/// (but see [`minion_may_fire`]), runners, wheel calls, presence, cloud, cluster and stats.
const MASTER_TAGS: &[&str] = &[
    "auth", "key", "job", "run", "wheel", "presence", "cloud", "cluster", "stats",
];

/// May minion `id` fire `tag` on the master's bus through `_minion_event`? Not the master's own
/// families (a forged `salt/auth` could make a reactor accept a key; a forged
/// `salt/job/<jid>/ret/<id>` a return in another's name), not a bare jid, and events naming a
/// minion (`salt/minion/<id>/..`, `salt/beacon/<id>/..`, `minion/refresh/<id>`, a state run's
/// `salt/job/<jid>/prog/<id>/..`) only in its own name.
pub fn minion_may_fire(id: &str, tag: &str) -> bool {
    if brine_protocol::jid::is_jid(tag) {
        return false;
    }
    let parts: Vec<&str> = tag.split('/').collect();
    match parts.as_slice() {
        ["salt", "job", _jid, "prog", who, ..] => *who == id,
        ["salt", "minion" | "beacon", who, ..] | ["minion", "refresh", who, ..] => *who == id,
        ["salt", family, ..] => !MASTER_TAGS.contains(family),
        _ => true,
    }
}

pub struct Master {
    pub cfg: MasterConfig,
    pub keys: KeyStore,
    pub secrets: Secrets,
    pub bus: EventBus,
    pub store: Arc<dyn JobStore>,
    pub publisher: Publisher,
    pub cache: DataCache,
    pub rt: tokio::runtime::Handle,
    pub started: Instant,
    /// A handle on the `Arc` this master lives in, for work that outlives a request.
    pub self_ref: std::sync::OnceLock<std::sync::Weak<Master>>,
    /// Publishes leave in the order of their serials: minions drop a publish whose serial is
    /// not above the last one they saw.
    pub publish_order: PublishOrder,
    /// Minion keys and request tokens already verified (see [`VerifiedTokens`]).
    pub verified: VerifiedTokens,
    /// Jids published lately, so that no caller can publish into another's job.
    pub recent_jids: RecentJids,
    /// Nonces of aes requests seen lately, so that none is processed twice.
    pub replay: crate::replay::ReplayGuard,
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
            if hit.pub_text == pub_text && hit.tok == tok {
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

pub fn str_value(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => s.as_str(),
        _ => None,
    }
}

pub fn int_value(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Integer(i) => i.as_i64(),
        Value::String(s) => s.as_str()?.trim().parse().ok(),
        Value::F64(f) => Some(*f as i64),
        _ => None,
    }
}

impl Master {
    /// Largest request handled (`brine_max_request_size`, default 64 MiB). libzmq cuts off
    /// peers sending more than twice this, before the bytes are held in memory.
    pub fn max_request_size(&self) -> usize {
        crate::daemon::max_request_size(&self.cfg)
    }

    pub fn arc(&self) -> Option<Arc<Master>> {
        self.self_ref.get().and_then(std::sync::Weak::upgrade)
    }

    /// Handle one request from the ret port and produce the reply bytes. Never panics on input.
    pub fn handle_request(&self, body: &[u8]) -> Vec<u8> {
        match self.dispatch(body) {
            Ok(reply) => reply,
            Err(Refused(why)) => {
                tracing::warn!("request refused: {why}");
                dumps(&Value::from("bad load"))
            }
        }
    }

    fn dispatch(&self, body: &[u8]) -> Result<Vec<u8>, Refused> {
        if body.len() > self.max_request_size() {
            return refuse(format!(
                "request of {} bytes is over brine_max_request_size ({} bytes)",
                body.len(),
                self.max_request_size()
            ));
        }
        let env = match brine_protocol::payload::loads_bounded(body) {
            Ok(v) => v,
            Err(e) => return refuse(format!("undecodable payload ({} bytes): {e}", body.len())),
        };
        if !matches!(env, Value::Map(_)) {
            return refuse("payload is not a map");
        }
        let Some(enc) = get(&env, "enc") else {
            return refuse("payload has no enc");
        };
        let Some(load) = get(&env, "load") else {
            return refuse("payload has no load");
        };
        let version = int_value(get(&env, "version")).unwrap_or(0);
        if self.cfg.minimum_auth_version > 0 && version < self.cfg.minimum_auth_version {
            return refuse(format!(
                "envelope version {version} is below minimum_auth_version {}",
                self.cfg.minimum_auth_version
            ));
        }
        match str_value(enc) {
            Some("clear") => self.clear(load, version),
            Some("aes") => self.aes(&env, load, version),
            _ => refuse(format!("unknown enc {enc}")),
        }
    }

    // ---- clear requests ---------------------------------------------------------------

    fn clear(&self, load: &Value, version: i64) -> Result<Vec<u8>, Refused> {
        if !matches!(load, Value::Map(_)) {
            return refuse("clear load is not a map");
        }
        let cmd = get_str(load, "cmd").unwrap_or("");
        let reply = match cmd {
            "_auth" => return Ok(dumps(&self.auth(load, version))),
            "publish" => self.clear_publish(load.clone()),
            "ping" => load.clone(),
            "runner" => self.clear_runner(load.clone()),
            "wheel" => self.clear_wheel(load.clone()),
            other => {
                log_unsupported_once("clear", other, "a local client");
                Value::Map(vec![])
            }
        };
        Ok(dumps(&reply))
    }

    /// Authenticate a local tool's clear request by the root key. Returns the user name.
    pub fn authenticate_key(&self, load: &Value) -> Option<String> {
        let key = get_str(load, "key")?;
        if self.secrets.check_root_key(key) {
            Some(get_str(load, "user").unwrap_or("root").to_string())
        } else {
            None
        }
    }

    pub fn auth_error(name: &str) -> Value {
        let message = match name {
            "AuthenticationError" => "Authentication error occurred.",
            _ => "Authorization error occurred.",
        };
        map(vec![(
            "error",
            map(vec![
                ("name", Value::from(name)),
                ("message", Value::from(message)),
            ]),
        )])
    }

    fn clear_publish(&self, mut load: Value) -> Value {
        let tgt = get(&load, "tgt").cloned().unwrap_or(Value::from(""));
        let tgt_type = get_str(&load, "tgt_type").unwrap_or("glob").to_string();
        let delimiter = get(&load, "kwargs")
            .and_then(|k| get_str(k, "delimiter"))
            .unwrap_or(":")
            .to_string();
        let expected = match self.check_minions(&tgt, &tgt_type, &delimiter) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("publish with a bad target {tgt}: {e}");
                brine_protocol::target::Expected {
                    minions: vec![],
                    missing: vec![],
                }
            }
        };
        let Some(user) = self.authenticate_key(&load) else {
            let mut ev = load.clone();
            remove(&mut ev, "key");
            if let Some(Value::Map(kw)) = get(&load, "kwargs") {
                let kw: Vec<_> = kw
                    .iter()
                    .filter(|(k, _)| !matches!(str_value(k), Some("password" | "token")))
                    .cloned()
                    .collect();
                set(&mut ev, "kwargs", Value::Map(kw));
            }
            set(&mut ev, "error", Master::auth_error("AuthenticationError"));
            let jid = get_str(&load, "jid").unwrap_or("");
            let tag = if jid.is_empty() {
                "salt/job/error".to_string()
            } else {
                format!("salt/job/{jid}/error")
            };
            self.bus.fire(&tag, ev);
            tracing::warn!("publish refused: bad root key");
            return Master::auth_error("AuthenticationError");
        };
        remove(&mut load, "key");
        set(&mut load, "user", Value::from(user));
        if let Some(jid) = get_str(&load, "jid").filter(|j| !j.is_empty()) {
            // A caller may name the jid, but never one that is taken: the job's record and
            // returns belong to the publish that created it.
            if let Err(why) = self.claim_jid(jid) {
                tracing::warn!("publish refused: {why}");
                return map(vec![(
                    "error",
                    map(vec![
                        ("name", Value::from("SaltInvocationError")),
                        ("message", Value::from(why)),
                    ]),
                )]);
            }
        }
        if expected.minions.is_empty() {
            return map(vec![
                ("enc", Value::from("clear")),
                (
                    "load",
                    map(vec![
                        ("jid", Value::Nil),
                        ("minions", Value::Array(vec![])),
                        (
                            "error",
                            Value::from(format!(
                                "Master could not resolve minions for target {}",
                                display_tgt(&tgt)
                            )),
                        ),
                    ]),
                ),
            ]);
        }
        let jid = self.publish_job(load, expected.minions.clone(), expected.missing.clone());
        map(vec![
            ("enc", Value::from("clear")),
            (
                "load",
                map(vec![
                    ("jid", Value::from(jid)),
                    (
                        "minions",
                        Value::Array(expected.minions.into_iter().map(Value::from).collect()),
                    ),
                    (
                        "missing",
                        Value::Array(expected.missing.into_iter().map(Value::from).collect()),
                    ),
                ]),
            ),
        ])
    }

    /// Which accepted minions a target designates (greedy, from the data cache).
    pub fn check_minions(
        &self,
        tgt: &Value,
        tgt_type: &str,
        delimiter: &str,
    ) -> Result<brine_protocol::target::Expected, brine_protocol::target::TargetError> {
        let ids = self.keys.accepted();
        let lookup = |id: &str| self.cache.get(id).map(|d| (d.grains, d.pillar));
        let nodegroups: &BTreeMap<String, Value> = &self.cfg.nodegroups;
        brine_protocol::target::check_minions(tgt, tgt_type, delimiter, &ids, &lookup, nodegroups)
    }

    /// Reserve a jid a caller asked for: it must have a jid's shape and be unused (neither
    /// published lately nor in the job store).
    fn claim_jid(&self, jid: &str) -> Result<(), String> {
        let shaped = brine_protocol::jid::is_jid(jid)
            && jid
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !shaped {
            return Err(format!("'{jid}' is not a valid jid"));
        }
        let stored = !matches!(self.store.get_load(jid), Ok(None));
        if stored || !self.recent_jids.claim(jid) {
            return Err(format!("The jid {jid} is already in use"));
        }
        Ok(())
    }

    /// Allocate a jid, fire the job events, store the job and publish it. `load` is an
    /// authenticated clear publish load (`fun`, `arg`, `tgt`, `tgt_type`, `ret`, `user`, ...).
    pub fn publish_job(
        &self,
        mut load: Value,
        minions: Vec<String>,
        missing: Vec<String>,
    ) -> String {
        let jid = match get_str(&load, "jid") {
            Some(j) if !j.is_empty() => j.to_string(),
            _ => gen_jid(),
        };
        self.recent_jids.claim(&jid);
        set(&mut load, "jid", Value::from(jid.clone()));
        let minion_values = || Value::Array(minions.iter().cloned().map(Value::from).collect());
        let field = |k: &str| get(&load, k).cloned().unwrap_or(Value::Nil);
        self.bus.fire(&jid, map(vec![("minions", minion_values())]));
        self.bus.fire(
            &format!("salt/job/{jid}/new"),
            map(vec![
                ("jid", Value::from(jid.clone())),
                ("tgt_type", field("tgt_type")),
                ("tgt", field("tgt")),
                ("user", field("user")),
                ("fun", field("fun")),
                ("arg", field("arg")),
                ("minions", minion_values()),
                (
                    "missing",
                    Value::Array(missing.iter().cloned().map(Value::from).collect()),
                ),
            ]),
        );
        // Secrets never reach the job store.
        let mut saved = load.clone();
        remove(&mut saved, "key");
        if let Some(kw) = get(&saved, "kwargs").cloned() {
            let mut kw = kw;
            for k in ["password", "token"] {
                remove(&mut kw, k);
            }
            set(&mut saved, "kwargs", kw);
        }
        if self.cfg.job_cache {
            if let Err(e) = self.store.save_load(&jid, &saved, &minions) {
                tracing::error!("job {jid} not stored: {e}");
            }
        }
        let pub_load = minion_publish_load(&load);
        self.bus
            .fire(&format!("salt/job/{jid}/publish"), pub_load.clone());
        let tgt_type = get_str(&pub_load, "tgt_type").unwrap_or("glob").to_string();
        self.send_publish(pub_load, &tgt_type, &minions);
        jid
    }

    /// Encrypt, sign and send one publish load to the minions.
    pub fn send_publish(&self, mut pub_load: Value, tgt_type: &str, minions: &[String]) {
        let (turn, (serial, aes)) = self
            .publish_order
            .enter(|| (self.secrets.next_serial(), self.secrets.aes()));
        set(&mut pub_load, "serial", Value::from(serial));
        let ct = aes.dumps(&pub_load, None);
        let mut env = vec![
            (Value::from("enc"), Value::from("aes")),
            (Value::from("load"), Value::Binary(ct.clone())),
        ];
        if self.cfg.sign_pub_messages {
            let algo = SigAlgo::parse(&self.cfg.publish_signing_algorithm)
                .unwrap_or(SigAlgo::Pkcs1v15Sha1);
            env.push((Value::from("sig_algo"), Value::from(algo.as_str())));
            env.push((
                Value::from("sig"),
                Value::Binary(self.secrets.master_key.sign(&ct, algo)),
            ));
        }
        let frame = dumps(&Value::Map(env));
        turn.wait();
        if !self.cfg.zmq_filtering {
            self.publisher.send(vec![frame]);
        } else if matches!(tgt_type, "glob" | "pcre" | "list") {
            for id in minions {
                let topic = brine_protocol::crypt::hash_hex(
                    id.as_bytes(),
                    brine_protocol::crypt::HashType::Sha1,
                );
                self.publisher.send(vec![topic.into_bytes(), frame.clone()]);
            }
        } else {
            self.publisher.send(vec![b"broadcast".to_vec(), frame]);
        }
    }

    // ---- _auth --------------------------------------------------------------------------

    fn auth(&self, load: &Value, version: i64) -> Value {
        let id = get_str(load, "id").unwrap_or("");
        let nonce = get(load, "nonce").cloned().unwrap_or(Value::Nil);
        let enc_algo = match get_str(load, "enc_algo") {
            None => Some(EncAlgo::OaepSha1),
            Some(s) => EncAlgo::parse(s),
        };
        let sig_algo = match get_str(load, "sig_algo") {
            None => Some(SigAlgo::Pkcs1v15Sha1),
            Some(s) => SigAlgo::parse(s),
        };
        let Some(sig_algo) = sig_algo else {
            tracing::warn!("sign-in from {id:?} refused: unsupported sig_algo");
            return map(vec![
                ("enc", Value::from("clear")),
                ("load", map(vec![("ret", Value::from("bad sig algo"))])),
            ]);
        };
        let Some(enc_algo) = enc_algo else {
            tracing::warn!("sign-in from {id:?} refused: unsupported enc_algo");
            return map(vec![
                ("enc", Value::from("clear")),
                ("load", map(vec![("ret", Value::from("bad enc algo"))])),
            ]);
        };
        let inner = self.auth_decision(load, id, &nonce, enc_algo);
        if version < 2 {
            return map(vec![("enc", Value::from("clear")), ("load", inner)]);
        }
        let bytes = dumps(&inner);
        let sig = self.secrets.master_key.sign(&bytes, sig_algo);
        map(vec![
            ("enc", Value::from("clear")),
            ("load", Value::Binary(bytes)),
            ("sig", Value::Binary(sig)),
        ])
    }

    fn auth_event(&self, result: Value, act: &str, id: &str, pub_text: &str) {
        if self.cfg.auth_events {
            self.bus.fire(
                "salt/auth",
                map(vec![
                    ("result", result),
                    ("act", Value::from(act)),
                    ("id", Value::from(id)),
                    ("pub", Value::from(pub_text)),
                ]),
            );
        }
    }

    fn auth_decision(&self, load: &Value, id: &str, nonce: &Value, enc_algo: EncAlgo) -> Value {
        let answer = |ret: Value| map(vec![("ret", ret), ("nonce", nonce.clone())]);
        let pub_text = get_str(load, "pub").unwrap_or("");
        if let Some(why) = invalid_id_reason(id) {
            tracing::warn!("sign-in refused: {why}: {id:?}");
            return answer(Value::from(false));
        }
        if self.cfg.max_minions > 0 {
            let accepted = self.keys.accepted();
            if accepted.len() >= self.cfg.max_minions && !accepted.iter().any(|a| a == id) {
                self.auth_event(Value::from("full"), "full", id, pub_text);
                return answer(Value::from("full"));
            }
        }
        let ks = &self.keys;
        let write = |state: KeyState| match ks.write(state, id, pub_text) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("cannot write key of {id}: {e}");
                false
            }
        };
        if !self.cfg.open_mode {
            if ks.exists(KeyState::Rejected, id) {
                tracing::info!("sign-in of {id}: key rejected");
                self.auth_event(Value::from(false), "reject", id, pub_text);
                return answer(Value::from(false));
            }
            if let Some(acc) = ks.read(KeyState::Accepted, id) {
                if !KeyStore::same_key(&acc, pub_text) {
                    tracing::warn!(
                        "sign-in of {id}: its key changed; the new key is recorded as denied"
                    );
                    write(KeyState::Denied);
                    self.auth_event(Value::from(false), "denied", id, pub_text);
                    return answer(Value::from(false));
                }
            } else if let Some(pre) = ks.read(KeyState::Pending, id) {
                if self.autoreject(id) {
                    let _ = ks.transition(id, KeyState::Pending, KeyState::Rejected);
                    self.auth_event(Value::from(false), "reject", id, pub_text);
                    return answer(Value::from(false));
                }
                let same = KeyStore::same_key(&pre, pub_text);
                if !self.autosign(id) {
                    if !same {
                        write(KeyState::Denied);
                        self.auth_event(Value::from(false), "denied", id, pub_text);
                        return answer(Value::from(false));
                    }
                    self.auth_event(Value::from(true), "pend", id, pub_text);
                    return answer(Value::from(true));
                }
                if !same {
                    write(KeyState::Denied);
                    self.auth_event(Value::from(false), "denied", id, pub_text);
                    return answer(Value::from(false));
                }
                let _ = ks.remove(KeyState::Pending, id);
            } else {
                // A new minion.
                if ks.pki_dir().join("minions_pre").join(id).is_dir() {
                    return answer(Value::from(false));
                }
                if self.autoreject(id) {
                    write(KeyState::Rejected);
                    self.auth_event(Value::from(false), "reject", id, pub_text);
                    return answer(Value::from(false));
                }
                if !self.autosign(id) {
                    tracing::info!("new minion {id}: key pending");
                    write(KeyState::Pending);
                    self.auth_event(Value::from(true), "pend", id, pub_text);
                    return answer(Value::from(true));
                }
            }
        }
        // Accept. A key that cannot be stored is not accepted: the minion's requests would be
        // refused afterwards.
        let stored = ks.read(KeyState::Accepted, id);
        if stored.as_deref().map(|s| KeyStore::same_key(s, pub_text)) != Some(true) {
            if stored.is_some() && !self.cfg.open_mode {
                return answer(Value::from(false));
            }
            if !write(KeyState::Accepted) {
                return answer(Value::from(false));
            }
        }
        let minion_pub = match PublicKey::from_pem(pub_text) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!("sign-in of {id}: unreadable public key: {e}");
                return answer(Value::from(false));
            }
        };
        let session = match self.secrets.session(id) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("session key for {id}: {e}");
                return answer(Value::from(false));
            }
        };
        let aes = self.secrets.aes();
        let enc = |data: &[u8]| minion_pub.encrypt(data, enc_algo);
        let (Ok(aes_enc), Ok(session_enc)) = (
            enc(aes.key_string().as_bytes()),
            enc(session.key_string().as_bytes()),
        ) else {
            return answer(Value::from(false));
        };
        let digest = brine_protocol::crypt::hash_hex(
            aes.key_string().as_bytes(),
            brine_protocol::crypt::HashType::Sha256,
        );
        let Ok(sig) = self.secrets.master_key.x931_encrypt(digest.as_bytes()) else {
            return answer(Value::from(false));
        };
        let mut inner = vec![
            (Value::from("enc"), Value::from("pub")),
            (
                Value::from("pub_key"),
                Value::from(self.secrets.master_pub_clean.clone()),
            ),
            (
                Value::from("publish_port"),
                Value::from(self.cfg.publish_port),
            ),
        ];
        if let Some(token) = get(load, "token").and_then(bytes_of) {
            match self.secrets.master_key.decrypt(token, enc_algo) {
                Ok(t) => match enc(&t) {
                    Ok(t) => inner.push((Value::from("token"), Value::Binary(t))),
                    Err(_) => return answer(Value::from(false)),
                },
                Err(_) => {
                    tracing::warn!("sign-in of {id}: token does not decrypt with our key");
                }
            }
        }
        inner.push((Value::from("aes"), Value::Binary(aes_enc)));
        inner.push((Value::from("session"), Value::Binary(session_enc)));
        inner.push((Value::from("sig"), Value::Binary(sig)));
        inner.push((Value::from("nonce"), nonce.clone()));
        tracing::info!("minion {id} authenticated");
        self.auth_event(Value::from(true), "accept", id, pub_text);
        Value::Map(inner)
    }

    fn autosign(&self, id: &str) -> bool {
        if self.cfg.auto_accept {
            return true;
        }
        if self
            .keys
            .take_autosign_stub(id, Duration::from_secs(120 * 60))
        {
            return true;
        }
        self.cfg
            .autosign_file
            .as_deref()
            .is_some_and(|f| id_listed_in(f, id))
    }

    fn autoreject(&self, id: &str) -> bool {
        self.cfg
            .autoreject_file
            .as_deref()
            .is_some_and(|f| id_listed_in(f, id))
    }

    // ---- aes requests -------------------------------------------------------------------

    fn aes(&self, env: &Value, load: &Value, version: i64) -> Result<Vec<u8>, Refused> {
        let Some(id) = get(env, "id").and_then(str_value) else {
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
        let Some(ct) = bytes_of(load) else {
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
        let nonce = remove(&mut inner, "nonce").and_then(|n| str_value(&n).map(str::to_string));
        if get_str(&inner, "id") != Some(id) {
            return refuse(format!(
                "aes request: inner id differs from outer id {id:?}"
            ));
        }
        let Some(tok) = remove(&mut inner, "tok") else {
            return refuse(format!("aes request from {id} without tok"));
        };
        let Some(pub_text) = self.keys.read(KeyState::Accepted, id) else {
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
        let (Some(nonce_text), Some(ts)) = (nonce.as_deref(), int_value(get(&inner, "ts"))) else {
            return refuse(format!("aes request from {id} without nonce or ts"));
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        if let Err(why) = self.replay.check(id, nonce_text, ts, now) {
            return refuse(format!("aes request from {id}: {why}"));
        }
        let cmd = get_str(&inner, "cmd").unwrap_or("").to_string();
        let ret = match cmd.as_str() {
            "_return" => self.on_return(inner),
            "_minion_event" => self.on_minion_event(inner),
            "_pillar" => {
                let enc_algo = get_str(env, "enc_algo")
                    .and_then(EncAlgo::parse)
                    .unwrap_or(EncAlgo::OaepSha1);
                let sig_algo = get_str(env, "sig_algo")
                    .and_then(SigAlgo::parse)
                    .unwrap_or(SigAlgo::Pkcs1v15Sha1);
                return Ok(self.on_pillar(
                    id,
                    inner,
                    nonce.as_deref(),
                    minion_pub,
                    enc_algo,
                    sig_algo,
                ));
            }
            "_master_opts" => self.master_opts(&inner),
            "_file_envs" => Value::Array(vec![Value::from("base")]),
            "_file_list" | "_file_list_emptydirs" | "_dir_list" => Value::Array(vec![]),
            "_symlink_list" | "_file_hash" | "_file_find" | "_master_tops" => Value::Map(vec![]),
            "_file_hash_and_stat" => Value::Map(vec![]),
            "_serve_file" => map(vec![("data", Value::from("")), ("dest", Value::from(""))]),
            "_mine" => self.on_mine(id, &inner),
            "_mine_delete" => self.on_mine_delete(id, &inner),
            "_mine_flush" => self.on_mine_flush(id),
            "_mine_get" => self.on_mine_get(id, &inner),
            other => {
                // Salt's master answers an unknown aes command with an empty dict.
                log_unsupported_once("aes", other, id);
                Value::Map(vec![])
            }
        };
        Ok(dumps(&Value::Binary(session.dumps(&ret, nonce.as_deref()))))
    }

    fn on_return(&self, mut load: Value) -> Value {
        let (Some(_), Some(jid), Some(id)) = (
            get(&load, "return"),
            get_str(&load, "jid").map(str::to_string),
            get_str(&load, "id").map(str::to_string),
        ) else {
            tracing::warn!("return without return/jid/id ignored");
            return Value::Nil;
        };
        let jid = if jid == "req" {
            let new = gen_jid();
            set(&mut load, "jid", Value::from(new.clone()));
            let mut saved = load.clone();
            set(
                &mut saved,
                "arg",
                get(&load, "fun_args")
                    .cloned()
                    .unwrap_or(Value::Array(vec![])),
            );
            set(&mut saved, "tgt_type", Value::from("glob"));
            set(&mut saved, "tgt", Value::from(id.clone()));
            remove(&mut saved, "return");
            if let Err(e) = self
                .store
                .save_load(&new, &saved, std::slice::from_ref(&id))
            {
                tracing::error!("job {new} not stored: {e}");
            }
            new
        } else {
            jid
        };
        // A scheduled job with `return_job: nocache`: its return is announced, not stored.
        let nocache = jid == "nocache";
        let jid = if nocache {
            let new = gen_jid();
            set(&mut load, "jid", Value::from(new.clone()));
            new
        } else {
            jid
        };
        remove(&mut load, "_stamp");
        self.bus
            .fire(&format!("salt/job/{jid}/ret/{id}"), load.clone());
        if self.cfg.job_cache && !nocache {
            match self.store.save_return(&load) {
                Ok(true) => {}
                Ok(false) => tracing::info!("duplicate return of {id} for {jid} ignored"),
                Err(e) => tracing::error!("return of {id} for {jid} not stored: {e}"),
            }
        }
        Value::Nil
    }

    fn on_minion_event(&self, load: Value) -> Value {
        let id = get_str(&load, "id").unwrap_or("").to_string();
        let allowed = |tag: &str| {
            let ok = minion_may_fire(&id, tag);
            if !ok {
                tracing::warn!("minion {id} may not fire {tag:?}: event dropped");
            }
            ok
        };
        if let Some(Value::Array(events)) = get(&load, "events") {
            let pretag = get_str(&load, "pretag").map(str::to_string);
            for ev in events {
                let Some(tag) = get_str(ev, "tag") else {
                    continue;
                };
                let pretagged = pretag.as_ref().map(|p| format!("{p}/{tag}"));
                if !allowed(tag) || pretagged.as_deref().is_some_and(|t| !allowed(t)) {
                    continue;
                }
                let data = get(ev, "data").cloned().unwrap_or(Value::Map(vec![]));
                self.bus.fire(tag, data.clone());
                if let Some(t) = &pretagged {
                    self.bus.fire(t, data);
                }
            }
        } else if let Some(tag) = get_str(&load, "tag") {
            if allowed(tag) {
                let mut data = load.clone();
                remove(&mut data, "_stamp");
                self.bus.fire(tag, data);
            }
        }
        Value::Nil
    }

    fn on_pillar(
        &self,
        id: &str,
        load: Value,
        nonce: Option<&str>,
        minion_pub: &PublicKey,
        enc_algo: EncAlgo,
        sig_algo: SigAlgo,
    ) -> Vec<u8> {
        let grains = get(&load, "grains").cloned().unwrap_or(Value::Map(vec![]));
        let pillar = self.compile_pillar(id, &grains);
        self.cache.update(id, grains, pillar.clone());
        self.bus.fire(
            &format!("minion/refresh/{id}"),
            map(vec![("Minion data cache refresh", Value::from(id))]),
        );
        let Some(nonce) = nonce else {
            return dumps(&map(vec![(
                "error",
                Value::from("Nonce not included in request"),
            )]));
        };
        let key_string = brine_protocol::crypt::Crypticle::generate_key_string();
        let (Ok(key_enc), Ok(crypticle)) = (
            minion_pub.encrypt(key_string.as_bytes(), enc_algo),
            brine_protocol::crypt::Crypticle::new(&key_string),
        ) else {
            return dumps(&map(vec![("error", Value::from("AES key not found"))]));
        };
        let data = dumps(&map(vec![
            ("key", Value::Binary(key_enc.clone())),
            ("pillar", pillar),
            ("nonce", Value::from(nonce)),
        ]));
        let sig = self.secrets.master_key.sign(&data, sig_algo);
        let blob = crypticle.dumps(
            &map(vec![
                ("data", Value::Binary(data)),
                ("sig", Value::Binary(sig)),
            ]),
            None,
        );
        dumps(&map(vec![
            ("key", Value::Binary(key_enc)),
            ("pillar", Value::Binary(blob)),
        ]))
    }

    /// Pillar data for a minion. Brine has no pillar compiler yet: the master config's
    /// `pillar_data` map (if any) is given to every minion, else an empty map.
    fn compile_pillar(&self, _id: &str, _grains: &Value) -> Value {
        self.cfg
            .pillar_data
            .as_ref()
            .map(brine_protocol::payload::from_json)
            .filter(|v| matches!(v, Value::Map(_)))
            .unwrap_or(Value::Map(vec![]))
    }

    fn master_opts(&self, load: &Value) -> Value {
        let file_roots = map(vec![("base", Value::Array(vec![]))]);
        let mut opts = vec![
            ("file_roots", file_roots),
            ("top_file_merging_strategy", Value::from("merge")),
            ("env_order", Value::Array(vec![])),
            ("default_top", Value::from("base")),
        ];
        if get(load, "env_only").is_none_or(|v| v != &Value::from(true)) {
            opts.extend([
                ("renderer", Value::from("jinja|yaml")),
                ("failhard", Value::from(false)),
                ("state_top", Value::from("salt://top.sls")),
                ("state_top_saltenv", Value::Nil),
                ("nodegroups", Value::Map(vec![])),
                ("state_auto_order", Value::from(true)),
                ("state_events", Value::from(false)),
                ("state_aggregate", Value::from(false)),
                ("jinja_env", Value::Map(vec![])),
                ("jinja_sls_env", Value::Map(vec![])),
                ("jinja_lstrip_blocks", Value::from(false)),
                ("jinja_trim_blocks", Value::from(false)),
            ]);
        }
        map(opts)
    }

    // ---- key management shared by wheel functions --------------------------------------

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

fn display_tgt(tgt: &Value) -> String {
    match tgt {
        Value::String(s) => s.as_str().unwrap_or("").to_string(),
        Value::Array(a) => a.iter().filter_map(str_value).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Lines of an autosign/autoreject file: globs or regexes matched against the id.
fn id_listed_in(path: &std::path::Path, id: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .any(|line| {
            line == id
                || brine_protocol::target::fnmatch(line, id)
                || regex::Regex::new(&format!("^(?:{line})$")).is_ok_and(|r| r.is_match(id))
        })
}

/// The load minions receive: only the keys Salt publishes.
pub fn minion_publish_load(load: &Value) -> Value {
    let mut out = Vec::new();
    for k in ["fun", "arg", "tgt", "jid", "ret", "tgt_type", "user"] {
        let default = match k {
            "arg" => Value::Array(vec![]),
            "ret" => Value::from(""),
            "tgt_type" => Value::from("glob"),
            _ => Value::Nil,
        };
        out.push((Value::from(k), get(load, k).cloned().unwrap_or(default)));
    }
    let kwargs = get(load, "kwargs");
    if let Some(delim) = kwargs.and_then(|k| get_str(k, "delimiter")) {
        if delim != ":" {
            out.push((Value::from("delimiter"), Value::from(delim)));
        }
    }
    for k in ["master_id", "to"] {
        if let Some(v) = get(load, k) {
            out.push((Value::from(k), v.clone()));
        }
    }
    if let Some(kw) = kwargs {
        if let Some(v) = get(kw, "id") {
            out.push((Value::from("id"), v.clone()));
        }
        for k in [
            "ret_config",
            "metadata",
            "module_executors",
            "executor_opts",
            "ret_kwargs",
        ] {
            if let Some(v) = get(kw, k) {
                out.push((Value::from(k), v.clone()));
            }
        }
    }
    Value::Map(out)
}

#[cfg(test)]
mod tests {
    use super::{minion_may_fire, PublishOrder, VerifiedTokens};
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
