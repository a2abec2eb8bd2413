//! The minion's request channel to the master's ret port: sign-in (`_auth`), encrypted
//! requests with their nonce and `tok`, `send_private` replies, and re-authentication when the
//! master no longer knows our session (a restart or a key rotation).
//!
//! Up to [`SOCKETS`] requests in flight at once, each on a REQ socket of its own (a Salt
//! minion's job processes each open their own channel), so that the returns of jobs that
//! end together reach the master together; callers run on blocking threads. Sign-ins are
//! one at a time, and a session the master refuses is forgotten only by a request that used
//! it (another may already have signed in again).

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use brine_protocol::crypt::{
    clean_key, hash_hex, pem_finger, Crypticle, EncAlgo, HashType, PrivateKey, PublicKey, SigAlgo,
};
use brine_protocol::payload::{bytes_of, dumps, get, get_str, loads, map, set, Value};
use brine_transport::{tcp_endpoint, ReqClient};

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("{0}")]
    Transport(#[from] brine_transport::TransportError),
    #[error("this minion's key is pending acceptance on the master")]
    Pending,
    #[error("the master rejected this minion's key")]
    Rejected,
    #[error("the master is full (max_minions)")]
    Full,
    #[error("invalid answer from the master: {0}")]
    Invalid(String),
    #[error("the master's public key differs from the cached one; refusing it")]
    MasterKeyChanged,
    #[error("master_finger does not match the master's key")]
    FingerMismatch,
    #[error("not signed in")]
    NotSignedIn,
}

/// What a successful sign-in gives: the cluster AES key and our session key.
#[derive(Clone)]
pub struct Creds {
    pub aes: Crypticle,
    pub session: Crypticle,
    pub publish_port: u16,
    pub master_pub: PublicKey,
}

pub struct Identity {
    pub id: String,
    pub key: PrivateKey,
    pub pub_clean: String,
    /// X9.31 of "salt" with our key: the `tok` of every aes request.
    pub tok: Vec<u8>,
    pub enc_algo: EncAlgo,
    pub sig_algo: SigAlgo,
    pub pki_dir: PathBuf,
    pub master_finger: String,
}

/// Most requests in flight at once.
pub const SOCKETS: usize = 8;

/// The REQ sockets not in use, and how many there are in all.
struct Pool {
    idle: Vec<ReqClient>,
    open: usize,
}

/// A socket taken from the pool, given back when dropped.
struct Lease<'a> {
    channel: &'a Channel,
    req: Option<ReqClient>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(req) = self.req.take() {
            self.channel.pool.lock().expect("pool lock").idle.push(req);
            self.channel.freed.notify_one();
        }
    }
}

pub struct Channel {
    pub ident: Identity,
    /// The session; held while signing in, so that sign-ins are one at a time.
    creds: Mutex<Option<Arc<Creds>>>,
    pool: Mutex<Pool>,
    freed: Condvar,
    ctx: zmq::Context,
    endpoint: String,
    timeout: Duration,
    tries: u32,
    /// Per sign-in random token, proving the master can decrypt with the key we cached.
    token: String,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Channel {
    pub fn new(
        ctx: &zmq::Context,
        master: &str,
        port: u16,
        ident: Identity,
        timeout: Duration,
        tries: u32,
    ) -> Channel {
        Channel {
            ident,
            creds: Mutex::new(None),
            pool: Mutex::new(Pool {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
            ctx: ctx.clone(),
            endpoint: tcp_endpoint(master, port),
            timeout,
            tries: tries.max(1),
            token: Crypticle::generate_key_string(),
        }
    }

    pub fn creds(&self) -> Option<Creds> {
        self.creds_lock().as_deref().cloned()
    }

    fn creds_lock(&self) -> MutexGuard<'_, Option<Arc<Creds>>> {
        self.creds.lock().expect("channel lock")
    }

    /// A free socket, a new one while there are fewer than [`SOCKETS`], or the next one
    /// given back.
    fn lease(&self) -> Lease<'_> {
        let mut pool = self.pool.lock().expect("pool lock");
        loop {
            if let Some(req) = pool.idle.pop() {
                return Lease {
                    channel: self,
                    req: Some(req),
                };
            }
            if pool.open < SOCKETS {
                pool.open += 1;
                return Lease {
                    channel: self,
                    req: Some(ReqClient::new(&self.ctx, &self.endpoint)),
                };
            }
            pool = self.freed.wait(pool).expect("pool lock");
        }
    }

    /// The session to send with: the current one, unless it is `refused` (the master could
    /// not read a request made with it) or there is none, and then a new sign-in's.
    fn session(&self, refused: Option<&Arc<Creds>>) -> Result<Arc<Creds>, ChannelError> {
        let mut creds = self.creds_lock();
        match &*creds {
            Some(c) if !refused.is_some_and(|r| Arc::ptr_eq(r, c)) => Ok(c.clone()),
            _ => {
                if refused.is_some() {
                    tracing::info!("the master did not accept our session; signing in again");
                }
                *creds = None;
                let fresh = Arc::new(self.sign_in_unlocked(self.timeout)?);
                *creds = Some(fresh.clone());
                Ok(fresh)
            }
        }
    }

    fn cached_master_pub_path(&self) -> PathBuf {
        self.ident.pki_dir.join("minion_master.pub")
    }

    /// Send `body` and wait for the reply, re-sending on a fresh socket up to `tries` times.
    fn roundtrip(&self, body: &[u8], timeout: Duration) -> Result<Vec<u8>, ChannelError> {
        let mut lease = self.lease();
        let req = lease.req.as_mut().expect("a leased socket");
        let mut last = None;
        for _ in 0..self.tries {
            match req.request(body, timeout) {
                Ok(r) => return Ok(r),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one try").into())
    }

    /// Sign in once. `Ok` with credentials, or why not.
    pub fn sign_in(&self, auth_timeout: Duration) -> Result<Creds, ChannelError> {
        let mut creds = self.creds_lock();
        let fresh = self.sign_in_unlocked(auth_timeout)?;
        *creds = Some(Arc::new(fresh.clone()));
        Ok(fresh)
    }

    /// One sign-in exchange; the caller holds the session's lock and keeps what it gives.
    fn sign_in_unlocked(&self, auth_timeout: Duration) -> Result<Creds, ChannelError> {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let cached = std::fs::read_to_string(self.cached_master_pub_path())
            .ok()
            .and_then(|t| PublicKey::from_pem(&t).ok().map(|k| (t, k)));
        let mut load = vec![
            ("cmd", Value::from("_auth")),
            ("id", Value::from(self.ident.id.clone())),
            ("nonce", Value::from(nonce.clone())),
            ("enc_algo", Value::from(self.ident.enc_algo.as_str())),
            ("sig_algo", Value::from(self.ident.sig_algo.as_str())),
        ];
        if let Some((_, k)) = &cached {
            if let Ok(t) = k.encrypt(self.token.as_bytes(), self.ident.enc_algo) {
                load.push(("token", Value::Binary(t)));
            }
        }
        load.push(("pub", Value::from(self.ident.pub_clean.clone())));
        let env = map(vec![
            ("enc", Value::from("clear")),
            ("load", map(load)),
            ("version", Value::from(3)),
        ]);
        let reply = self.roundtrip(&dumps(&env), auth_timeout)?;
        let reply = loads(&reply).map_err(|e| ChannelError::Invalid(e.to_string()))?;
        let Some(load) = get(&reply, "load") else {
            return Err(ChannelError::Invalid("sign-in reply without load".into()));
        };
        if let Some(ret) = get_str(load, "ret") {
            if ret == "bad enc algo" || ret == "bad sig algo" {
                return Err(ChannelError::Invalid(format!("master says {ret}")));
            }
        }
        let Some(sig) = get(&reply, "sig").and_then(bytes_of) else {
            return Err(ChannelError::Invalid("sign-in reply is not signed".into()));
        };
        let Some(raw) = bytes_of(load) else {
            return Err(ChannelError::Invalid(
                "sign-in reply load is not bytes".into(),
            ));
        };
        let inner = loads(raw).map_err(|e| ChannelError::Invalid(e.to_string()))?;
        // The master key: trust on first use, then it must not change.
        let master_pub = if let Some(pk) = get_str(&inner, "pub_key") {
            let offered = PublicKey::from_pem(pk)
                .map_err(|e| ChannelError::Invalid(format!("master pub_key: {e}")))?;
            match &cached {
                Some((text, _)) if clean_key(text) != clean_key(pk) => {
                    return Err(ChannelError::MasterKeyChanged)
                }
                Some(_) => {}
                None => {
                    let _ = std::fs::write(self.cached_master_pub_path(), clean_key(pk));
                }
            }
            Some(offered)
        } else {
            cached.as_ref().map(|(_, k)| k.clone())
        };
        if let Some(mp) = &master_pub {
            if !mp.verify(raw, sig, self.ident.sig_algo) {
                return Err(ChannelError::Invalid(
                    "sign-in reply signature does not verify".into(),
                ));
            }
        }
        if get_str(&inner, "nonce") != Some(nonce.as_str()) {
            return Err(ChannelError::Invalid("sign-in reply nonce mismatch".into()));
        }
        match get(&inner, "ret") {
            Some(Value::Boolean(false)) => return Err(ChannelError::Rejected),
            Some(v) if v == &Value::from("full") => return Err(ChannelError::Full),
            Some(_) => return Err(ChannelError::Pending),
            None => {}
        }
        let master_pub = master_pub.ok_or_else(|| ChannelError::Invalid("no master key".into()))?;
        if !self.ident.master_finger.is_empty() {
            let finger = pem_finger(&master_pub.to_pem(), HashType::Sha256);
            if finger != self.ident.master_finger {
                return Err(ChannelError::FingerMismatch);
            }
        }
        let dec = |k: &str| -> Result<String, ChannelError> {
            let ct = get(&inner, k)
                .and_then(bytes_of)
                .ok_or_else(|| ChannelError::Invalid(format!("sign-in reply without {k}")))?;
            let pt = self
                .ident
                .key
                .decrypt(ct, self.ident.enc_algo)
                .map_err(|e| ChannelError::Invalid(format!("{k}: {e}")))?;
            String::from_utf8(pt).map_err(|_| ChannelError::Invalid(format!("{k} is not text")))
        };
        let aes = dec("aes")?;
        let session = dec("session")?;
        let aes_sig = get(&inner, "sig")
            .and_then(bytes_of)
            .ok_or_else(|| ChannelError::Invalid("sign-in reply without sig".into()))?;
        let expect = hash_hex(aes.as_bytes(), HashType::Sha256);
        match master_pub.x931_decrypt(aes_sig) {
            Ok(d) if d == expect.as_bytes() => {}
            _ => {
                return Err(ChannelError::Invalid(
                    "AES key signature does not verify".into(),
                ))
            }
        }
        if get(&inner, "token").is_some() && cached.is_some() {
            let t = dec("token")?;
            if t != self.token {
                return Err(ChannelError::Invalid("token mismatch".into()));
            }
        }
        let publish_port = get(&inner, "publish_port")
            .and_then(brine_protocol::loads::int)
            .unwrap_or(4505) as u16;
        let creds = Creds {
            aes: Crypticle::new(&aes).map_err(|e| ChannelError::Invalid(e.to_string()))?,
            session: Crypticle::new(&session).map_err(|e| ChannelError::Invalid(e.to_string()))?,
            publish_port,
            master_pub,
        };
        Ok(creds)
    }

    /// The bytes of one aes request carrying `load` (with our nonce, ts, tok and id).
    pub fn aes_envelope(&self, creds: &Creds, load: &Value, nonce: &str) -> Vec<u8> {
        let mut inner = load.clone();
        set(&mut inner, "nonce", Value::from(nonce));
        set(&mut inner, "ts", Value::from(now_secs()));
        set(&mut inner, "tok", Value::Binary(self.ident.tok.clone()));
        set(&mut inner, "id", Value::from(self.ident.id.clone()));
        let env = map(vec![
            ("enc", Value::from("aes")),
            ("load", Value::Binary(creds.session.dumps(&inner, None))),
            ("version", Value::from(3)),
            ("id", Value::from(self.ident.id.clone())),
            ("enc_algo", Value::from(self.ident.enc_algo.as_str())),
            ("sig_algo", Value::from(self.ident.sig_algo.as_str())),
        ]);
        dumps(&env)
    }

    /// An encrypted request whose reply is encrypted with our session key and bound to the
    /// nonce. If the master cannot read us any more, sign in again and resend once.
    pub fn request(&self, load: &Value) -> Result<Value, ChannelError> {
        let mut refused = None;
        for attempt in 0..2 {
            let creds = self.session(refused.as_ref())?;
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            let body = self.aes_envelope(&creds, load, &nonce);
            let reply = self.roundtrip(&body, self.timeout)?;
            let decoded = loads(&reply).ok();
            let ct = decoded.as_ref().and_then(bytes_of);
            match ct.map(|ct| creds.session.loads(ct, Some(&nonce))) {
                Some(Ok(Some(v))) => return Ok(v),
                Some(Ok(None)) => return Ok(Value::Map(vec![])),
                _ if attempt == 0 => refused = Some(creds),
                _ => return Err(ChannelError::Invalid("reply does not decrypt".into())),
            }
        }
        Err(ChannelError::NotSignedIn)
    }

    /// A request answered with `send_private` (the pillar): `{key, pillar}` in clear, the
    /// payload encrypted with a one-time key for us and signed by the master.
    pub fn request_private(&self, load: &Value, field: &str) -> Result<Value, ChannelError> {
        let mut refused = None;
        for attempt in 0..2 {
            let creds = self.session(refused.as_ref())?;
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            let body = self.aes_envelope(&creds, load, &nonce);
            let reply = self.roundtrip(&body, self.timeout)?;
            let reply = loads(&reply).map_err(|e| ChannelError::Invalid(e.to_string()))?;
            let Some(key_ct) = get(&reply, "key").and_then(bytes_of) else {
                if attempt == 0 {
                    refused = Some(creds);
                    continue;
                }
                return Err(ChannelError::Invalid("private reply without key".into()));
            };
            let k = self
                .ident
                .key
                .decrypt(key_ct, self.ident.enc_algo)
                .map_err(|e| ChannelError::Invalid(format!("private key: {e}")))?;
            let c = Crypticle::new(std::str::from_utf8(&k).unwrap_or(""))
                .map_err(|e| ChannelError::Invalid(e.to_string()))?;
            let blob = get(&reply, field)
                .and_then(bytes_of)
                .ok_or_else(|| ChannelError::Invalid(format!("private reply without {field}")))?;
            let outer = c
                .loads(blob, None)
                .map_err(|e| ChannelError::Invalid(e.to_string()))?
                .ok_or_else(|| ChannelError::Invalid("private payload is not Salt's".into()))?;
            let (Some(data), Some(sig)) = (
                get(&outer, "data").and_then(bytes_of),
                get(&outer, "sig").and_then(bytes_of),
            ) else {
                return Err(ChannelError::Invalid(
                    "private payload without data/sig".into(),
                ));
            };
            if !creds.master_pub.verify(data, sig, self.ident.sig_algo) {
                return Err(ChannelError::Invalid(
                    "private payload signature does not verify".into(),
                ));
            }
            let d = loads(data).map_err(|e| ChannelError::Invalid(e.to_string()))?;
            if get(&d, "key").and_then(bytes_of) != Some(key_ct) {
                return Err(ChannelError::Invalid("private payload key mismatch".into()));
            }
            if get_str(&d, "nonce") != Some(nonce.as_str()) {
                return Err(ChannelError::Invalid(
                    "private payload nonce mismatch".into(),
                ));
            }
            return Ok(get(&d, field).cloned().unwrap_or(Value::Map(vec![])));
        }
        Err(ChannelError::NotSignedIn)
    }

    /// Forget the credentials (the next request signs in again).
    pub fn reset(&self) {
        *self.creds_lock() = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(ctx: &zmq::Context, port: u16) -> Channel {
        let key = PrivateKey::generate(1024).unwrap();
        let ident = Identity {
            id: "pool".into(),
            pub_clean: clean_key(&key.public().to_pem()),
            key,
            tok: Vec::new(),
            enc_algo: EncAlgo::OaepSha1,
            sig_algo: SigAlgo::Pkcs1v15Sha1,
            pki_dir: PathBuf::from("/nonexistent"),
            master_finger: String::new(),
        };
        Channel::new(ctx, "127.0.0.1", port, ident, Duration::from_secs(20), 1)
    }

    /// A ROUTER on a free loopback port.
    fn router(ctx: &zmq::Context) -> (zmq::Socket, u16) {
        let s = ctx.socket(zmq::ROUTER).unwrap();
        s.set_linger(0).unwrap();
        s.set_rcvtimeo(10_000).unwrap();
        s.bind("tcp://127.0.0.1:*").unwrap();
        let ep = s.get_last_endpoint().unwrap().unwrap();
        let port = ep.rsplit(':').next().unwrap().parse().unwrap();
        (s, port)
    }

    /// Receive `n` requests, then answer each with its own body.
    fn answer_when_waiting(s: &zmq::Socket, n: usize) -> Vec<Vec<u8>> {
        let held: Vec<Vec<Vec<u8>>> = (0..n).map(|_| s.recv_multipart(0).unwrap()).collect();
        let bodies = held.iter().map(|f| f.last().unwrap().clone()).collect();
        for frames in held {
            s.send_multipart(frames, 0).unwrap();
        }
        bodies
    }

    #[test]
    fn requests_are_in_flight_together_up_to_the_pool() {
        let ctx = zmq::Context::new();
        let (master, port) = router(&ctx);
        let ch = Arc::new(channel(&ctx, port));
        // A master that answers only once SOCKETS requests wait: with one socket at a time
        // it would wait in vain (here: 10 s, then the test fails).
        let senders: Vec<_> = (0..SOCKETS + 1)
            .map(|i| {
                let ch = ch.clone();
                std::thread::spawn(move || {
                    ch.roundtrip(format!("r{i}").as_bytes(), Duration::from_secs(20))
                })
            })
            .collect();
        let mut seen = answer_when_waiting(&master, SOCKETS);
        // The one request more waited for a socket and comes now.
        seen.extend(answer_when_waiting(&master, 1));
        let mut got: Vec<Vec<u8>> = senders
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect();
        got.sort();
        seen.sort();
        assert_eq!(got, seen);
        assert_eq!(got.len(), SOCKETS + 1);
        let pool = ch.pool.lock().unwrap();
        assert_eq!((pool.open, pool.idle.len()), (SOCKETS, SOCKETS));
    }

    #[test]
    fn a_refused_session_is_replaced_once() {
        let ctx = zmq::Context::new();
        let (_master, port) = router(&ctx);
        let ch = channel(&ctx, port);
        let make = || {
            Arc::new(Creds {
                aes: Crypticle::new(&Crypticle::generate_key_string()).unwrap(),
                session: Crypticle::new(&Crypticle::generate_key_string()).unwrap(),
                publish_port: 4505,
                master_pub: ch.ident.key.public(),
            })
        };
        let (old, new) = (make(), make());
        *ch.creds_lock() = Some(new.clone());
        // A request that used the old session finds the new one: no sign-in.
        let got = ch.session(Some(&old)).unwrap();
        assert!(Arc::ptr_eq(&got, &new));
        assert!(Arc::ptr_eq(&ch.session(None).unwrap(), &new));
    }
}
