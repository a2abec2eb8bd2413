//! NATS decentralised auth for tests: an operator, a system account, an account with
//! JetStream and a user in it, each with its own nkey, their JWTs signed as NATS v2 JWTs are
//! (`ed25519-nkey`: the key of the issuer signs `header.claims`, base64url without padding).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use nkeys::KeyPair;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub struct Chain {
    operator: String,
    system: (String, String),
    account: (String, String),
    user_jwt: String,
    user_seed: String,
}

/// A JWT of `claims` (`iss` and `jti` filled in) signed by `issuer`.
fn sign(issuer: &KeyPair, mut claims: Value) -> String {
    claims["iss"] = json!(issuer.public_key());
    claims["iat"] = json!(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs());
    let id = Sha256::digest(claims.to_string().as_bytes());
    claims["jti"] = json!(hex(&id[..20]));
    let header = URL_SAFE_NO_PAD.encode(r#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{body}");
    let sig = issuer.sign(signed.as_bytes()).expect("nkey signature");
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

fn account_claims(key: &KeyPair, name: &str) -> Value {
    json!({
        "name": name,
        "sub": key.public_key(),
        "nats": {
            "limits": {
                "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                "wildcards": true, "conn": -1, "leaf": -1,
                "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1
            },
            "default_permissions": {"pub": {}, "sub": {}},
            "type": "account",
            "version": 2
        }
    })
}

impl Chain {
    pub fn new() -> Chain {
        let operator = KeyPair::new_operator();
        let system = KeyPair::new_account();
        let account = KeyPair::new_account();
        let user = KeyPair::new_user();
        let op_jwt = sign(
            &operator,
            json!({
                "name": "brine-test",
                "sub": operator.public_key(),
                "nats": {"system_account": system.public_key(), "type": "operator", "version": 2}
            }),
        );
        let mut system_claims = account_claims(&system, "SYS");
        // The system account has no JetStream.
        for k in ["mem_storage", "disk_storage", "streams", "consumer"] {
            system_claims["nats"]["limits"][k] = json!(0);
        }
        let user_jwt = sign(
            &account,
            json!({
                "name": "brine",
                "sub": user.public_key(),
                "nats": {
                    "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                    "type": "user", "version": 2
                }
            }),
        );
        Chain {
            operator: op_jwt,
            system: (system.public_key(), sign(&operator, system_claims)),
            account: (
                account.public_key(),
                sign(&operator, account_claims(&account, "BRINE")),
            ),
            user_jwt,
            user_seed: user.seed().expect("seed"),
        }
    }

    /// The server's lines: the operator, the system account, both accounts preloaded.
    pub fn server_config(&self) -> String {
        format!(
            "operator: \"{}\"\nsystem_account: \"{}\"\nresolver: MEMORY\n\
             resolver_preload: {{\n  {}: \"{}\"\n  {}: \"{}\"\n}}\n",
            self.operator,
            self.system.0,
            self.system.0,
            self.system.1,
            self.account.0,
            self.account.1
        )
    }

    /// The user's `.creds` file, as `nsc` writes it.
    pub fn creds(&self) -> String {
        format!(
            "-----BEGIN NATS USER JWT-----\n{}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\
             NKEYs are sensitive and should be treated as secrets.\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n\n\
             *************************************************************\n",
            self.user_jwt, self.user_seed
        )
    }
}

impl Default for Chain {
    fn default() -> Chain {
        Chain::new()
    }
}
