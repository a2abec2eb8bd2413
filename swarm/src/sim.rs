//! One simulated minion: sign-in, the request channel, the publish subscription, and jobs.
//!
//! The wire behaviour follows Brine's own minion (`minion/src/channel.rs`, `daemon.rs`),
//! which follows Salt 3007: a clear `_auth` with the public key, `enc: aes` requests with
//! the session key, `nonce` and `tok`, replies bound to the nonce, publishes decrypted with
//! the cluster AES key, and a new sign-in when a publish does not decrypt (key rotation).
//!
//! Each minion is one REQ and one SUB connection ([`crate::zmtp`]) and a few tokio tasks.
//! RSA private-key work runs on the blocking pool, a few at a time ([`Shared::crypto`]),
//! so that it never stalls the connections of the others.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use brine_protocol::crypt::{
    clean_key, hash_hex, Crypticle, EncAlgo, HashType, PublicKey, SerialGuard, SigAlgo,
};
use brine_protocol::payload::{bytes_of as bytes, dumps, get, get_str, loads, map, set, Value};
use brine_protocol::target::{matches, MinionData};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};

use crate::config::Settings;
use crate::functions::{self, Function};
use crate::keys::MinionKey;
use crate::stats::Stats;
use crate::zmtp::{Connection, SocketType, ZmtpError};

/// Largest frame accepted from the master.
const MAX_FRAME: usize = 256 * 1024 * 1024;
/// Recent jids remembered to drop a publish seen twice.
const RECENT_JIDS: usize = 32;
/// Longest pause between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Why one exchange with the master failed.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Zmtp(#[from] ZmtpError),
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("the key is pending on the master")]
    Pending,
    #[error("the master rejected the key")]
    Rejected,
    #[error("the master is full (max_minions)")]
    Full,
    #[error("invalid answer from the master: {0}")]
    Invalid(String),
    #[error("shutting down")]
    Shutdown,
}

fn invalid(why: impl Into<String>) -> SimError {
    SimError::Invalid(why.into())
}

/// What every simulated minion shares.
pub struct Shared {
    pub settings: Settings,
    pub ret_addr: SocketAddr,
    pub enc_algo: EncAlgo,
    pub sig_algo: SigAlgo,
    /// Extra grains from `--grains`.
    pub extra_grains: Vec<(Value, Value)>,
    pub stats: Stats,
    /// Limits RSA private-key operations in flight (one per core).
    pub crypto: Semaphore,
    pub shutdown: watch::Receiver<bool>,
    pub started: Instant,
    /// The master key a minion knows before its first sign-in (`--master-pub`).
    known_master_pub: Option<PublicKey>,
    /// The master key as last seen (`clean_key` text, parsed), so that 10,000 sign-ins parse it once.
    master_key: Mutex<Option<(String, PublicKey)>>,
}

impl Shared {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        settings: Settings,
        ret_addr: SocketAddr,
        enc_algo: EncAlgo,
        sig_algo: SigAlgo,
        extra_grains: Vec<(Value, Value)>,
        crypto_permits: usize,
        known_master_pub: Option<PublicKey>,
        shutdown: watch::Receiver<bool>,
    ) -> Shared {
        Shared {
            settings,
            ret_addr,
            enc_algo,
            sig_algo,
            extra_grains,
            stats: Stats::default(),
            crypto: Semaphore::new(crypto_permits.max(1)),
            shutdown,
            started: Instant::now(),
            known_master_pub,
            master_key: Mutex::new(None),
        }
    }

    fn is_shutdown(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Sleep for `d`; `false` if the swarm is shutting down meanwhile.
    async fn pause(&self, d: Duration) -> bool {
        let mut rx = self.shutdown.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => !self.is_shutdown(),
            _ = rx.wait_for(|v| *v) => false,
        }
    }

    /// Run RSA private-key work on the blocking pool, a bounded number at a time.
    async fn crypto<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, SimError> {
        let _permit = self
            .crypto
            .acquire()
            .await
            .map_err(|_| SimError::Shutdown)?;
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| invalid(format!("crypto task failed: {e}")))
    }

    /// The master's public key for this PEM text, parsed once.
    fn master_key(&self, pem: &str) -> Result<PublicKey, SimError> {
        let clean = clean_key(pem);
        let mut cached = self.master_key.lock().expect("master key lock");
        if let Some((text, key)) = cached.as_ref() {
            if *text == clean {
                return Ok(key.clone());
            }
        }
        let key = PublicKey::from_pem(pem).map_err(|e| invalid(format!("master pub_key: {e}")))?;
        *cached = Some((clean, key.clone()));
        Ok(key)
    }

    async fn connect(
        &self,
        addr: SocketAddr,
        socket: SocketType,
    ) -> Result<Connection<TcpStream>, SimError> {
        let stream = TcpStream::connect(addr).await.map_err(ZmtpError::Io)?;
        stream.set_nodelay(true).map_err(ZmtpError::Io)?;
        Ok(Connection::handshake(stream, socket, MAX_FRAME).await?)
    }
}

/// The session with the master after a sign-in.
pub struct Creds {
    pub aes: Crypticle,
    pub session: Crypticle,
    pub publish_port: u16,
    pub master_pub: PublicKey,
}

/// The request side: one REQ connection, one request at a time.
#[derive(Default)]
struct ReqSide {
    conn: Option<Connection<TcpStream>>,
    /// Set once the master's key is known: later sign-ins carry a `token` it must decrypt.
    master_pub: Option<PublicKey>,
}

/// One simulated minion.
pub struct Sim {
    pub id: String,
    key: Arc<MinionKey>,
    grains: Value,
    shared: Arc<Shared>,
    req: tokio::sync::Mutex<ReqSide>,
    creds: Mutex<Option<Arc<Creds>>>,
    pillar: Mutex<Value>,
    /// Jobs running: jid and publish load (for `saltutil.find_job`).
    running: Mutex<Vec<(String, Value)>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn nonce() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

impl Sim {
    pub fn new(index: usize, key: MinionKey, shared: Arc<Shared>) -> Sim {
        let id = shared.settings.minion_id(index);
        let mut grains = vec![
            (Value::from("id"), Value::from(id.clone())),
            (Value::from("host"), Value::from(id.clone())),
            (Value::from("nodename"), Value::from(id.clone())),
            (Value::from("kernel"), Value::from("Linux")),
            (Value::from("os"), Value::from("BrineSwarm")),
            (Value::from("os_family"), Value::from("BrineSwarm")),
            (
                Value::from("saltversion"),
                Value::from(brine_protocol::SALT_VERSION),
            ),
            (Value::from("swarm_index"), Value::from(index as u64)),
        ];
        for (k, v) in &shared.extra_grains {
            match grains.iter_mut().find(|(gk, _)| gk == k) {
                Some(slot) => slot.1 = v.clone(),
                None => grains.push((k.clone(), v.clone())),
            }
        }
        let req = ReqSide {
            conn: None,
            master_pub: shared.known_master_pub.clone(),
        };
        Sim {
            id,
            key: Arc::new(key),
            grains: Value::Map(grains),
            shared,
            req: tokio::sync::Mutex::new(req),
            creds: Mutex::new(None),
            pillar: Mutex::new(Value::Map(vec![])),
            running: Mutex::new(Vec::new()),
        }
    }

    fn current_creds(&self) -> Option<Arc<Creds>> {
        self.creds.lock().expect("creds lock").clone()
    }

    /// One request/reply on the REQ connection (connecting first if needed). Any failure
    /// drops the connection, as Salt's client throws away a REQ socket that timed out.
    async fn roundtrip(
        &self,
        st: &mut ReqSide,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, SimError> {
        let shared = &self.shared;
        let attempt = async {
            if st.conn.is_none() {
                st.conn = Some(shared.connect(shared.ret_addr, SocketType::Req).await?);
            }
            let conn = st.conn.as_mut().expect("connected just above");
            Ok::<_, SimError>(conn.request(body).await?)
        };
        let result = match tokio::time::timeout(timeout, attempt).await {
            Ok(r) => r,
            Err(_) => {
                Stats::inc(&shared.stats.timeouts);
                Err(SimError::Timeout(timeout))
            }
        };
        if result.is_err() {
            st.conn = None;
            Stats::inc(&shared.stats.errors);
        }
        result
    }

    /// One `_auth` exchange. On success the credentials are installed.
    async fn sign_in_locked(&self, st: &mut ReqSide) -> Result<Arc<Creds>, SimError> {
        let shared = &self.shared;
        let stats = &shared.stats;
        let (enc_algo, sig_algo) = (shared.enc_algo, shared.sig_algo);
        let nonce = nonce();
        let token = Crypticle::generate_key_string();
        let mut load = vec![
            ("cmd", Value::from("_auth")),
            ("id", Value::from(self.id.clone())),
            ("nonce", Value::from(nonce.clone())),
            ("enc_algo", Value::from(enc_algo.as_str())),
            ("sig_algo", Value::from(sig_algo.as_str())),
        ];
        let sent_token = match &st.master_pub {
            Some(k) => match k.encrypt(token.as_bytes(), enc_algo) {
                Ok(t) => {
                    load.push(("token", Value::Binary(t)));
                    true
                }
                Err(_) => false,
            },
            None => false,
        };
        load.push(("pub", Value::from(self.key.pub_clean.clone())));
        let env = map(vec![
            ("enc", Value::from("clear")),
            ("load", map(load)),
            ("version", Value::from(3)),
        ]);
        let timeout = Duration::from_secs(shared.settings.auth_timeout.max(1));
        let reply = self.roundtrip(st, &dumps(&env), timeout).await?;
        let reply = loads(&reply).map_err(|e| invalid(e.to_string()))?;
        let load = get(&reply, "load").ok_or_else(|| invalid("sign-in reply without load"))?;
        if let Some(ret) = get_str(load, "ret") {
            return Err(invalid(format!("master says {ret}")));
        }
        let sig = get(&reply, "sig")
            .and_then(bytes)
            .ok_or_else(|| invalid("sign-in reply is not signed"))?;
        let raw = bytes(load).ok_or_else(|| invalid("sign-in reply load is not bytes"))?;
        let inner = loads(raw).map_err(|e| invalid(e.to_string()))?;
        let master_pub = match get_str(&inner, "pub_key") {
            Some(pem) => Some(shared.master_key(pem)?),
            None => st.master_pub.clone(),
        };
        if let Some(mp) = &master_pub {
            if !mp.verify(raw, sig, sig_algo) {
                return Err(invalid("sign-in reply signature does not verify"));
            }
        }
        if get_str(&inner, "nonce") != Some(nonce.as_str()) {
            return Err(invalid("sign-in reply nonce mismatch"));
        }
        match get(&inner, "ret") {
            Some(Value::Boolean(false)) => {
                Stats::inc(&stats.rejected);
                return Err(SimError::Rejected);
            }
            Some(v) if v == &Value::from("full") => {
                Stats::inc(&stats.rejected);
                return Err(SimError::Full);
            }
            Some(_) => {
                Stats::inc(&stats.pending);
                return Err(SimError::Pending);
            }
            None => {}
        }
        let master_pub = master_pub.ok_or_else(|| invalid("no master key"))?;
        let field = |k: &str| -> Result<Vec<u8>, SimError> {
            get(&inner, k)
                .and_then(bytes)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| invalid(format!("sign-in reply without {k}")))
        };
        let (aes_ct, session_ct, aes_sig) = (field("aes")?, field("session")?, field("sig")?);
        let token_ct = if sent_token {
            get(&inner, "token").and_then(bytes).map(<[u8]>::to_vec)
        } else {
            None
        };
        let key = self.key.clone();
        let (aes, session, token_back) = shared
            .crypto(move || {
                let dec = |ct: &[u8]| -> Result<String, String> {
                    let pt = key.key.decrypt(ct, enc_algo).map_err(|e| e.to_string())?;
                    String::from_utf8(pt).map_err(|_| "not text".to_string())
                };
                let aes = dec(&aes_ct)?;
                let session = dec(&session_ct)?;
                let token = token_ct.as_deref().map(dec).transpose()?;
                Ok::<_, String>((aes, session, token))
            })
            .await?
            .map_err(|e| invalid(format!("sign-in keys: {e}")))?;
        let expect = hash_hex(aes.as_bytes(), HashType::Sha256);
        match master_pub.x931_decrypt(&aes_sig) {
            Ok(d) if d == expect.as_bytes() => {}
            _ => return Err(invalid("AES key signature does not verify")),
        }
        if let Some(t) = token_back {
            if t != token {
                return Err(invalid("token mismatch"));
            }
        }
        let publish_port = get(&inner, "publish_port")
            .and_then(|v| v.as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(4505);
        let creds = Arc::new(Creds {
            aes: Crypticle::new(&aes).map_err(|e| invalid(e.to_string()))?,
            session: Crypticle::new(&session).map_err(|e| invalid(e.to_string()))?,
            publish_port,
            master_pub: master_pub.clone(),
        });
        st.master_pub = Some(master_pub);
        *self.creds.lock().expect("creds lock") = Some(creds.clone());
        Stats::inc(&stats.auths);
        Ok(creds)
    }

    /// Sign in, waiting while the key is pending and retrying failures, until the
    /// swarm shuts down.
    async fn sign_in(&self) -> Result<Arc<Creds>, SimError> {
        let wait = Duration::from_secs(self.shared.settings.auto_accept_wait.max(1));
        let mut backoff = Duration::from_secs(1);
        loop {
            if self.shared.is_shutdown() {
                return Err(SimError::Shutdown);
            }
            let res = {
                let mut st = self.req.lock().await;
                match self.current_creds() {
                    Some(c) => Ok(c),
                    None => self.sign_in_locked(&mut st).await,
                }
            };
            let pause = match res {
                Ok(c) => return Ok(c),
                Err(SimError::Pending | SimError::Rejected | SimError::Full) => wait,
                Err(_) => {
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    backoff
                }
            };
            if !self.shared.pause(jitter(pause)).await {
                return Err(SimError::Shutdown);
            }
        }
    }

    /// Replace credentials that stopped working (unless someone already did).
    async fn renew(&self, stale: &Arc<Creds>) -> Result<Arc<Creds>, SimError> {
        let mut st = self.req.lock().await;
        if let Some(c) = self.current_creds() {
            if !Arc::ptr_eq(&c, stale) {
                return Ok(c);
            }
        }
        *self.creds.lock().expect("creds lock") = None;
        Stats::inc(&self.shared.stats.reauths);
        self.sign_in_locked(&mut st).await
    }

    fn aes_envelope(&self, creds: &Creds, load: &Value, nonce: &str) -> Vec<u8> {
        let mut inner = load.clone();
        set(&mut inner, "nonce", Value::from(nonce));
        set(&mut inner, "ts", Value::from(now_secs()));
        set(&mut inner, "tok", Value::Binary(self.key.tok.clone()));
        set(&mut inner, "id", Value::from(self.id.clone()));
        dumps(&map(vec![
            ("enc", Value::from("aes")),
            ("load", Value::Binary(creds.session.dumps(&inner, None))),
            ("version", Value::from(3)),
            ("id", Value::from(self.id.clone())),
            ("enc_algo", Value::from(self.shared.enc_algo.as_str())),
            ("sig_algo", Value::from(self.shared.sig_algo.as_str())),
        ]))
    }

    /// An encrypted request; the reply is decrypted with the session key and must carry
    /// our nonce. If the master does not know our session, sign in again and resend once.
    async fn request(&self, load: &Value) -> Result<Value, SimError> {
        let timeout = Duration::from_secs(self.shared.settings.request_timeout.max(1));
        let mut st = self.req.lock().await;
        for attempt in 0..2 {
            let creds = match self.current_creds() {
                Some(c) => c,
                None => self.sign_in_locked(&mut st).await?,
            };
            let nonce = nonce();
            let body = self.aes_envelope(&creds, load, &nonce);
            let reply = self.roundtrip(&mut st, &body, timeout).await?;
            let decoded = loads(&reply).ok();
            match decoded
                .as_ref()
                .and_then(bytes)
                .map(|ct| creds.session.loads(ct, Some(&nonce)))
            {
                Some(Ok(v)) => return Ok(v.unwrap_or(Value::Map(vec![]))),
                _ if attempt == 0 => {
                    Stats::inc(&self.shared.stats.reauths);
                    *self.creds.lock().expect("creds lock") = None;
                }
                _ => break,
            }
        }
        Stats::inc(&self.shared.stats.errors);
        Err(invalid("the reply does not decrypt with our session key"))
    }

    /// `_pillar`: answered with `send_private` (a one-time key for us, signed data).
    async fn fetch_pillar(&self) -> Result<Value, SimError> {
        let load = map(vec![
            ("cmd", Value::from("_pillar")),
            ("id", Value::from(self.id.clone())),
            ("grains", self.grains.clone()),
            ("saltenv", Value::Nil),
            ("pillarenv", Value::Nil),
            ("pillar_override", Value::Map(vec![])),
            ("extra_minion_data", Value::Map(vec![])),
            ("ver", Value::from("2")),
        ]);
        let timeout = Duration::from_secs(self.shared.settings.request_timeout.max(1));
        let (reply, nonce, creds) = {
            let mut st = self.req.lock().await;
            let creds = match self.current_creds() {
                Some(c) => c,
                None => self.sign_in_locked(&mut st).await?,
            };
            let nonce = nonce();
            let body = self.aes_envelope(&creds, &load, &nonce);
            (self.roundtrip(&mut st, &body, timeout).await?, nonce, creds)
        };
        let reply = loads(&reply).map_err(|e| invalid(e.to_string()))?;
        let key_ct = get(&reply, "key")
            .and_then(bytes)
            .ok_or_else(|| invalid("pillar reply without key"))?
            .to_vec();
        let blob = get(&reply, "pillar")
            .and_then(bytes)
            .ok_or_else(|| invalid("pillar reply without pillar"))?;
        let key = self.key.clone();
        let enc_algo = self.shared.enc_algo;
        let ct = key_ct.clone();
        let one_time = self
            .shared
            .crypto(move || key.key.decrypt(&ct, enc_algo))
            .await?
            .map_err(|e| invalid(format!("pillar key: {e}")))?;
        let c = Crypticle::new(std::str::from_utf8(&one_time).unwrap_or(""))
            .map_err(|e| invalid(e.to_string()))?;
        let outer = c
            .loads(blob, None)
            .map_err(|e| invalid(e.to_string()))?
            .ok_or_else(|| invalid("pillar payload is not Salt's"))?;
        let (Some(data), Some(sig)) = (
            get(&outer, "data").and_then(bytes),
            get(&outer, "sig").and_then(bytes),
        ) else {
            return Err(invalid("pillar payload without data/sig"));
        };
        if !creds.master_pub.verify(data, sig, self.shared.sig_algo) {
            return Err(invalid("pillar signature does not verify"));
        }
        let d = loads(data).map_err(|e| invalid(e.to_string()))?;
        if get(&d, "key").and_then(bytes) != Some(&key_ct[..])
            || get_str(&d, "nonce") != Some(&nonce)
        {
            return Err(invalid("pillar payload is not bound to this request"));
        }
        Ok(get(&d, "pillar").cloned().unwrap_or(Value::Map(vec![])))
    }

    async fn fire_master(&self, tag: &str, data: Value) -> Result<(), SimError> {
        let load = map(vec![
            ("id", Value::from(self.id.clone())),
            ("cmd", Value::from("_minion_event")),
            ("pretag", Value::Nil),
            ("data", data),
            ("tag", Value::from(tag)),
        ]);
        self.request(&load).await.map(|_| ())
    }

    /// What a minion does once after its first sign-in: pillar, then the start events.
    async fn startup(&self) {
        let stats = &self.shared.stats;
        match self.fetch_pillar().await {
            Ok(p) => {
                *self.pillar.lock().expect("pillar lock") = p;
                Stats::inc(&stats.other_acked);
            }
            Err(_) => Stats::inc(&stats.errors),
        }
        let msg = Value::from(format!(
            "Minion {} started at {}",
            self.id,
            brine_protocol::jid::asctime_now()
        ));
        for tag in [
            "minion_start".to_string(),
            format!("salt/minion/{}/start", self.id),
        ] {
            match self.fire_master(&tag, msg.clone()).await {
                Ok(()) => Stats::inc(&stats.other_acked),
                Err(_) => Stats::inc(&stats.errors),
            }
        }
    }

    /// Connect and subscribe the SUB side, retrying until it works or the swarm stops.
    async fn subscribe(&self, creds: &Creds) -> Option<Connection<TcpStream>> {
        let port = self
            .shared
            .settings
            .publish_port
            .unwrap_or(creds.publish_port);
        let addr = SocketAddr::new(self.shared.ret_addr.ip(), port);
        let mut backoff = Duration::from_millis(500);
        loop {
            let attempt = async {
                let mut conn = self.shared.connect(addr, SocketType::Sub).await?;
                if self.shared.settings.zmq_filtering {
                    conn.subscribe(b"broadcast").await?;
                    conn.subscribe(hash_hex(self.id.as_bytes(), HashType::Sha1).as_bytes())
                        .await?;
                } else {
                    conn.subscribe(b"").await?;
                }
                Ok::<_, SimError>(conn)
            };
            match tokio::time::timeout(Duration::from_secs(30), attempt).await {
                Ok(Ok(conn)) => return Some(conn),
                _ => Stats::inc(&self.shared.stats.errors),
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            if !self.shared.pause(jitter(backoff)).await {
                return None;
            }
        }
    }

    /// The minion's life: sign in, subscribe, start up, then serve publishes until shutdown.
    pub async fn run(self: Arc<Self>) {
        let stats = &self.shared.stats;
        Stats::inc(&stats.launched);
        let mut started = false;
        let mut serials = SerialGuard::default();
        let mut recent: VecDeque<String> = VecDeque::with_capacity(RECENT_JIDS);
        let mut shutdown = self.shared.shutdown.clone();
        loop {
            let Ok(creds) = self.sign_in().await else {
                return;
            };
            let total = self.shared.settings.count as u64;
            if !started {
                Stats::inc(&stats.signed_in);
                stats.mark(total, self.shared.started);
            }
            let Some(mut sub) = self.subscribe(&creds).await else {
                return;
            };
            Stats::inc(&stats.subscribed);
            if !started {
                if !self.shared.settings.no_startup {
                    self.startup().await;
                }
                started = true;
                Stats::inc(&stats.ready);
                stats.mark(total, self.shared.started);
            }
            loop {
                let msg = tokio::select! {
                    m = sub.recv_message() => m,
                    _ = shutdown.wait_for(|v| *v) => {
                        Stats::dec(&stats.subscribed);
                        return;
                    }
                };
                match msg {
                    Ok(frames) => self.on_publish(frames, &mut serials, &mut recent).await,
                    Err(_) => {
                        Stats::inc(&stats.errors);
                        break;
                    }
                }
            }
            Stats::dec(&stats.subscribed);
            // The publisher went away (a master restart?): start over after a pause.
            if !self.shared.pause(jitter(Duration::from_secs(1))).await {
                return;
            }
        }
    }

    /// Decrypt and check one publish; `None` if it is not for us or unreadable.
    async fn open_publish(&self, frame: &[u8], serials: &mut SerialGuard) -> Option<Value> {
        let stats = &self.shared.stats;
        let env = match loads(frame) {
            Ok(v @ Value::Map(_)) => v,
            // With zmq_filtering the topic frame comes first; only the last frame is read.
            _ => {
                Stats::inc(&stats.errors);
                return None;
            }
        };
        if get_str(&env, "enc") != Some("aes") {
            return None;
        }
        let ct = get(&env, "load").and_then(bytes)?;
        let mut creds = self.current_creds()?;
        for attempt in 0..2 {
            if self.shared.settings.verify_pub {
                let algo = get_str(&env, "sig_algo")
                    .and_then(SigAlgo::parse)
                    .unwrap_or(SigAlgo::Pkcs1v15Sha1);
                let ok = get(&env, "sig")
                    .and_then(bytes)
                    .is_some_and(|sig| creds.master_pub.verify(ct, sig, algo));
                if !ok {
                    Stats::inc(&stats.errors);
                    return None;
                }
            }
            match creds.aes.loads(ct, None) {
                Ok(Some(mut load)) => {
                    if !serials.accept(&mut load) {
                        return None;
                    }
                    return Some(load);
                }
                Ok(None) => return None,
                Err(_) if attempt == 0 => {
                    // The AES key rotated: sign in again and retry this publish once.
                    creds = match self.renew(&creds).await {
                        Ok(c) => c,
                        Err(_) => return None,
                    };
                    *serials = SerialGuard::default();
                }
                Err(_) => {}
            }
        }
        Stats::inc(&stats.errors);
        None
    }

    fn targets_me(&self, load: &Value) -> bool {
        let (Some(tgt), Some(_), Some(_)) = (get(load, "tgt"), get(load, "jid"), get(load, "fun"))
        else {
            return false;
        };
        let tgt_type = get_str(load, "tgt_type").unwrap_or("glob");
        let delimiter = get_str(load, "delimiter").unwrap_or(":");
        let pillar = self.pillar.lock().expect("pillar lock");
        let me = MinionData {
            id: &self.id,
            grains: Some(&self.grains),
            pillar: Some(&pillar),
        };
        matches(tgt, tgt_type, delimiter, &me).unwrap_or(false)
    }

    async fn on_publish(
        self: &Arc<Self>,
        frames: Vec<Vec<u8>>,
        serials: &mut SerialGuard,
        recent: &mut VecDeque<String>,
    ) {
        let stats = &self.shared.stats;
        Stats::inc(&stats.publishes_received);
        let Some(frame) = frames.last() else { return };
        let Some(load) = self.open_publish(frame, serials).await else {
            return;
        };
        if !self.targets_me(&load) {
            return;
        }
        let jid = get_str(&load, "jid").unwrap_or("").to_string();
        if recent.contains(&jid) {
            return;
        }
        if recent.len() == RECENT_JIDS {
            recent.pop_front();
        }
        recent.push_back(jid);
        Stats::inc(&stats.publishes_matched);
        tokio::spawn(self.clone().run_job(load));
    }

    /// Run one job and send its return.
    async fn run_job(self: Arc<Self>, load: Value) {
        let stats = &self.shared.stats;
        Stats::inc(&stats.jobs_running);
        let jid = get_str(&load, "jid").unwrap_or("").to_string();
        self.running
            .lock()
            .expect("running lock")
            .push((jid.clone(), load.clone()));
        let fun = get(&load, "fun").cloned().unwrap_or(Value::Nil);
        let arg = get(&load, "arg").cloned().unwrap_or(Value::Array(vec![]));
        let mut ret = vec![
            ("cmd", Value::from("_return")),
            ("id", Value::from(self.id.clone())),
        ];
        match (&fun, &arg) {
            (Value::Array(funs), Value::Array(args)) => {
                // A multi-function job: one map per field, keyed by function.
                let (mut rets, mut codes, mut oks) = (Vec::new(), Vec::new(), Vec::new());
                for (i, f) in funs.iter().enumerate() {
                    let name = f.as_str().unwrap_or("").to_string();
                    let a = match args.get(i) {
                        Some(Value::Array(a)) => a.clone(),
                        _ => vec![],
                    };
                    let out = self.call(&name, &a).await;
                    rets.push((Value::from(name.clone()), out.ret));
                    codes.push((Value::from(name.clone()), Value::from(out.retcode)));
                    oks.push((Value::from(name), Value::from(out.retcode == 0)));
                }
                ret.push(("success", Value::Map(oks)));
                ret.push(("return", Value::Map(rets)));
                ret.push(("retcode", Value::Map(codes)));
            }
            _ => {
                let a = match &arg {
                    Value::Array(a) => a.clone(),
                    other => vec![other.clone()],
                };
                let out = self.call(fun.as_str().unwrap_or(""), &a).await;
                ret.push(("success", Value::from(out.retcode == 0)));
                ret.push(("return", out.ret));
                ret.push(("retcode", Value::from(out.retcode)));
            }
        }
        ret.push(("jid", Value::from(jid.clone())));
        ret.push(("fun", fun));
        ret.push(("fun_args", arg));
        for k in ["user", "master_id", "metadata"] {
            if let Some(v) = get(&load, k) {
                ret.push((k, v.clone()));
            }
        }
        ret.push(("_stamp", Value::from(brine_protocol::jid::stamp_now())));
        self.running
            .lock()
            .expect("running lock")
            .retain(|(j, _)| *j != jid);
        self.send_return(map(ret)).await;
        Stats::dec(&stats.jobs_running);
    }

    async fn call(&self, name: &str, args: &[Value]) -> functions::Outcome {
        let running = |jid: &str| {
            let list = self.running.lock().expect("running lock");
            list.iter().find(|(j, _)| j == jid).map(|(_, l)| {
                let mut info = vec![(Value::from("pid"), Value::from(std::process::id()))];
                for k in ["jid", "fun", "arg", "tgt", "tgt_type", "user"] {
                    if let Some(v) = get(l, k) {
                        info.push((Value::from(k), v.clone()));
                    }
                }
                Value::Map(info)
            })
        };
        match Function::parse(name) {
            Function::RefreshPillar => {
                let t0 = Instant::now();
                match self.fetch_pillar().await {
                    Ok(p) => {
                        self.shared.stats.pillar_refreshed(t0.elapsed());
                        *self.pillar.lock().expect("pillar lock") = p;
                        functions::Outcome::ok(Value::Boolean(true))
                    }
                    Err(e) => functions::Outcome::fail(format!("pillar refresh failed: {e}")),
                }
            }
            Function::FetchFile => {
                let Some(path) = functions::arg(args, 0, "path").and_then(Value::as_str) else {
                    return functions::Outcome::fail("swarm.fetch_file needs a path".into());
                };
                let saltenv = functions::arg(args, 1, "saltenv")
                    .and_then(Value::as_str)
                    .unwrap_or("base");
                match self.fetch_file(path, saltenv).await {
                    Ok(n) => functions::Outcome::ok(Value::from(n)),
                    Err(e) => functions::Outcome::fail(format!("{path}: {e}")),
                }
            }
            Function::HighstateRequests => {
                let saltenv = functions::arg(args, usize::MAX, "saltenv")
                    .and_then(Value::as_str)
                    .unwrap_or("base")
                    .to_string();
                let prefixes: Vec<String> = args
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect();
                match self.highstate_requests(&prefixes, &saltenv).await {
                    Ok(v) => functions::Outcome::ok(v),
                    Err(e) => functions::Outcome::fail(format!("highstate requests: {e}")),
                }
            }
            f => functions::call(&f, args, self.shared.settings.return_size, running).await,
        }
    }

    /// The requests of a highstate (see [`Function::HighstateRequests`]).
    async fn highstate_requests(
        &self,
        prefixes: &[String],
        saltenv: &str,
    ) -> Result<Value, SimError> {
        let pillar = self.fetch_pillar().await?;
        *self.pillar.lock().expect("pillar lock") = pillar;
        let list_load = |cmd: &str| {
            map(vec![
                ("cmd", Value::from(cmd)),
                ("saltenv", Value::from(saltenv)),
                ("prefix", Value::from("")),
            ])
        };
        let listed = self.request(&list_load("_file_list")).await?;
        let files: Vec<String> = match &listed {
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .filter(|f| {
                    prefixes.is_empty() || prefixes.iter().any(|p| f.starts_with(p.as_str()))
                })
                .map(str::to_string)
                .collect(),
            _ => return Err(invalid("_file_list did not answer a list")),
        };
        if files.is_empty() {
            return Err(invalid("no file of the master matches the prefixes"));
        }
        let mut bytes = 0u64;
        for f in &files {
            let hash = self
                .request(&map(vec![
                    ("cmd", Value::from("_file_hash")),
                    ("path", Value::from(f.as_str())),
                    ("saltenv", Value::from(saltenv)),
                ]))
                .await?;
            if get_str(&hash, "hsum").is_none() {
                return Err(invalid(format!("no hash for {f}")));
            }
            bytes += self.fetch_file(f, saltenv).await?;
        }
        self.request(&list_load("_dir_list")).await?;
        Ok(map(vec![
            ("files", Value::from(files.len() as u64)),
            ("bytes", Value::from(bytes)),
        ]))
    }

    /// A file from the master's file server, chunk by chunk with `_serve_file` as a minion's
    /// file client fetches it; the bytes are counted and dropped.
    async fn fetch_file(&self, path: &str, saltenv: &str) -> Result<u64, SimError> {
        let rel = path.strip_prefix("salt://").unwrap_or(path);
        let mut loc: u64 = 0;
        loop {
            let load = map(vec![
                ("cmd", Value::from("_serve_file")),
                ("path", Value::from(rel)),
                ("loc", Value::from(loc)),
                ("saltenv", Value::from(saltenv)),
            ]);
            let reply = self.request(&load).await?;
            let n = match get(&reply, "data") {
                Some(Value::String(s)) => s.as_bytes().len(),
                Some(Value::Binary(b)) => b.len(),
                _ => 0,
            };
            if n == 0 {
                let dest = get_str(&reply, "dest").unwrap_or("");
                if loc == 0 && dest.is_empty() {
                    return Err(invalid("the master has no such file"));
                }
                return Ok(loc);
            }
            loc += n as u64;
        }
    }

    async fn send_return(&self, ret: Value) {
        let stats = &self.shared.stats;
        Stats::inc(&stats.returns_sent);
        let tries = self.shared.settings.return_tries.max(1);
        for n in 1..=tries {
            if self.request(&ret).await.is_ok() {
                Stats::inc(&stats.returns_acked);
                return;
            }
            if n < tries && !self.shared.pause(jitter(Duration::from_secs(1))).await {
                return;
            }
        }
    }
}

/// `d` stretched by a random 0-50 %, so that thousands of minions do not retry in step.
fn jitter(d: Duration) -> Duration {
    d + d.mul_f64(rand::random::<f64>() * 0.5)
}
