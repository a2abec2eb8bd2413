//! The minion's request channel to the master's ret port: sign-in (`_auth`), encrypted
//! requests with their nonce and `tok`, `send_private` replies, and re-authentication when the
//! master no longer knows our session (a restart or a key rotation).
//!
//! One REQ socket, one request at a time: callers are serialised by a mutex and run on
//! blocking threads.

use std::path::PathBuf;
use std::sync::Mutex;
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

struct State {
    req: ReqClient,
    creds: Option<Creds>,
}

pub struct Channel {
    pub ident: Identity,
    state: Mutex<State>,
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
            state: Mutex::new(State {
                req: ReqClient::new(ctx, &tcp_endpoint(master, port)),
                creds: None,
            }),
            timeout,
            tries: tries.max(1),
            token: Crypticle::generate_key_string(),
        }
    }

    pub fn creds(&self) -> Option<Creds> {
        self.state.lock().expect("channel lock").creds.clone()
    }

    fn cached_master_pub_path(&self) -> PathBuf {
        self.ident.pki_dir.join("minion_master.pub")
    }

    /// Send `body` and wait for the reply, re-sending on a fresh socket up to `tries` times.
    fn roundtrip(
        &self,
        st: &mut State,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, ChannelError> {
        let mut last = None;
        for _ in 0..self.tries {
            match st.req.request(body, timeout) {
                Ok(r) => return Ok(r),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one try").into())
    }

    /// Sign in once. `Ok` with credentials, or why not.
    pub fn sign_in(&self, auth_timeout: Duration) -> Result<Creds, ChannelError> {
        let mut st = self.state.lock().expect("channel lock");
        self.sign_in_locked(&mut st, auth_timeout)
    }

    fn sign_in_locked(
        &self,
        st: &mut State,
        auth_timeout: Duration,
    ) -> Result<Creds, ChannelError> {
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
        let reply = self.roundtrip(st, &dumps(&env), auth_timeout)?;
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
        st.creds = Some(creds.clone());
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
        let mut st = self.state.lock().expect("channel lock");
        for attempt in 0..2 {
            let creds = match st.creds.clone() {
                Some(c) => c,
                None => self.sign_in_locked(&mut st, self.timeout)?,
            };
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            let body = self.aes_envelope(&creds, load, &nonce);
            let reply = self.roundtrip(&mut st, &body, self.timeout)?;
            let decoded = loads(&reply).ok();
            let ct = decoded.as_ref().and_then(bytes_of);
            match ct.map(|ct| creds.session.loads(ct, Some(&nonce))) {
                Some(Ok(Some(v))) => return Ok(v),
                Some(Ok(None)) => return Ok(Value::Map(vec![])),
                _ if attempt == 0 => {
                    tracing::info!("the master did not accept our session; signing in again");
                    st.creds = None;
                }
                _ => return Err(ChannelError::Invalid("reply does not decrypt".into())),
            }
        }
        Err(ChannelError::NotSignedIn)
    }

    /// A request answered with `send_private` (the pillar): `{key, pillar}` in clear, the
    /// payload encrypted with a one-time key for us and signed by the master.
    pub fn request_private(&self, load: &Value, field: &str) -> Result<Value, ChannelError> {
        let mut st = self.state.lock().expect("channel lock");
        for attempt in 0..2 {
            let creds = match st.creds.clone() {
                Some(c) => c,
                None => self.sign_in_locked(&mut st, self.timeout)?,
            };
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            let body = self.aes_envelope(&creds, load, &nonce);
            let reply = self.roundtrip(&mut st, &body, self.timeout)?;
            let reply = loads(&reply).map_err(|e| ChannelError::Invalid(e.to_string()))?;
            let Some(key_ct) = get(&reply, "key").and_then(bytes_of) else {
                if attempt == 0 {
                    st.creds = None;
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
        self.state.lock().expect("channel lock").creds = None;
    }
}
