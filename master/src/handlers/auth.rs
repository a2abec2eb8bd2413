//! `_auth`: a minion signs in (key states, autosign/autoreject, the AES and session keys), and
//! the root-key check of local clients' clear requests.

use std::time::Duration;

use brine_protocol::crypt::{EncAlgo, PublicKey, SigAlgo};
use brine_protocol::payload::{bytes_of, dumps, get, get_str, map, Value};

use crate::keys::{invalid_id_reason, KeyState, KeyStore};
use crate::master::Master;

impl Master {
    /// Authenticate a local tool's clear request by the root key. Returns the user name.
    pub fn authenticate_key(&self, key: Option<&str>, user: Option<&str>) -> Option<String> {
        if self.secrets.check_root_key(key?) {
            Some(user.unwrap_or("root").to_string())
        } else {
            None
        }
    }

    /// [`Master::authenticate_key`] of a load's `key` and `user` (runner and wheel calls).
    pub fn authenticate_load(&self, load: &Value) -> Option<String> {
        self.authenticate_key(get_str(load, "key"), get_str(load, "user"))
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

    // ---- _auth --------------------------------------------------------------------------

    pub(crate) fn auth(&self, load: &Value, version: i64) -> Value {
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
        // Read once: the checks below and the acceptance at the end both use it.
        let accepted = ks.read(KeyState::Accepted, id);
        if !self.cfg.open_mode {
            if ks.exists(KeyState::Rejected, id) {
                tracing::info!("sign-in of {id}: key rejected");
                self.auth_event(Value::from(false), "reject", id, pub_text);
                return answer(Value::from(false));
            }
            if let Some(acc) = &accepted {
                if !KeyStore::same_key(acc, pub_text) {
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
        if accepted.as_deref().map(|s| KeyStore::same_key(s, pub_text)) != Some(true) {
            if accepted.is_some() && !self.cfg.open_mode {
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
        let Ok(sig) = self.secrets.aes_signature(&aes) else {
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
        self.late.signed_in(id);
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
