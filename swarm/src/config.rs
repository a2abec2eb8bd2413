//! `brine-swarm` settings: flags (each with a `BRINE_SWARM_*` environment variable).

use std::path::PathBuf;

use brine_protocol::crypt::{EncAlgo, PublicKey, SigAlgo};
use brine_protocol::payload::Value;

/// N simulated Salt minions in one process, speaking the real protocol to a master.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "brine-swarm", version)]
pub struct Settings {
    /// The master's address (an IP or a host name, resolved once).
    #[arg(long, env = "BRINE_SWARM_MASTER", default_value = "127.0.0.1")]
    pub master: String,
    /// The master's ret port (request server).
    #[arg(long, env = "BRINE_SWARM_MASTER_PORT", default_value_t = 4506)]
    pub master_port: u16,
    /// The publish port; by default the one the master announces at sign-in.
    #[arg(long, env = "BRINE_SWARM_PUBLISH_PORT")]
    pub publish_port: Option<u16>,
    /// How many minions to simulate.
    #[arg(short = 'n', long, env = "BRINE_SWARM_COUNT", default_value_t = 100)]
    pub count: usize,
    /// Index of the first minion (ids are prefix + index; keys are cached by index).
    #[arg(long, env = "BRINE_SWARM_START_INDEX", default_value_t = 0)]
    pub start_index: usize,
    /// Minion id prefix.
    #[arg(long, env = "BRINE_SWARM_PREFIX", default_value = "swarm-")]
    pub prefix: String,
    /// Key cache directory [default: ~/.cache/brine-swarm/keys-<bits>].
    #[arg(long, env = "BRINE_SWARM_KEYS_DIR")]
    pub keys_dir: Option<PathBuf>,
    /// RSA key size (1024 is much faster to generate; Brine and Salt both accept it).
    #[arg(long, env = "BRINE_SWARM_KEY_BITS", default_value_t = 2048)]
    pub key_bits: usize,
    /// New minions started (and signing in) per second.
    #[arg(long, env = "BRINE_SWARM_CONNECT_RATE", default_value_t = 100.0)]
    pub connect_rate: f64,
    /// Seconds between sign-in attempts while the key is pending (Salt's acceptance_wait_time).
    #[arg(long, env = "BRINE_SWARM_AUTO_ACCEPT_WAIT", default_value_t = 10)]
    pub auto_accept_wait: u64,
    /// Seconds to wait for a sign-in reply.
    #[arg(long, env = "BRINE_SWARM_AUTH_TIMEOUT", default_value_t = 60)]
    pub auth_timeout: u64,
    /// Seconds to wait for the reply to other requests (returns, events, pillar).
    #[arg(long, env = "BRINE_SWARM_REQUEST_TIMEOUT", default_value_t = 60)]
    pub request_timeout: u64,
    /// Tries to deliver one return.
    #[arg(long, env = "BRINE_SWARM_RETURN_TRIES", default_value_t = 3)]
    pub return_tries: u32,
    /// Extra grains, a JSON object, e.g. '{"role":"swarm"}'.
    #[arg(long, env = "BRINE_SWARM_GRAINS", default_value = "{}")]
    pub grains: String,
    /// Size in bytes of the string `test.blob` returns without an argument.
    #[arg(long, env = "BRINE_SWARM_RETURN_SIZE", default_value_t = 1024)]
    pub return_size: usize,
    /// Verify the master's signature on publishes (master `sign_pub_messages`).
    #[arg(long, env = "BRINE_SWARM_VERIFY_PUB")]
    pub verify_pub: bool,
    /// Subscribe to "broadcast" and the id's SHA-1 topic (master `zmq_filtering: True`).
    #[arg(long, env = "BRINE_SWARM_ZMQ_FILTERING")]
    pub zmq_filtering: bool,
    /// Skip the `_pillar` request and start events after sign-in.
    #[arg(long, env = "BRINE_SWARM_NO_STARTUP")]
    pub no_startup: bool,
    /// RSA-OAEP variant for sign-in (OAEP-SHA1 or OAEP-SHA224; 1024-bit keys need SHA1).
    #[arg(long, env = "BRINE_SWARM_ENC_ALGO", default_value = "OAEP-SHA1")]
    pub enc_algo: String,
    /// Signature algorithm (PKCS1v15-SHA1 or PKCS1v15-SHA224).
    #[arg(long, env = "BRINE_SWARM_SIG_ALGO", default_value = "PKCS1v15-SHA1")]
    pub sig_algo: String,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, env = "BRINE_SWARM_DURATION")]
    pub duration: Option<u64>,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, env = "BRINE_SWARM_PROGRESS_SECS", default_value_t = 5)]
    pub progress_secs: u64,
    /// The master's public key (PEM) as a minion that met its master before caches it
    /// (`minion_master.pub`): then every sign-in, the first one too, carries a token the master
    /// decrypts with its private key. Without it the first sign-in carries none, as a new
    /// minion's does.
    #[arg(long, env = "BRINE_SWARM_MASTER_PUB")]
    pub master_pub: Option<PathBuf>,
    /// Runtime threads, also the RSA key generation threads (0: one per core).
    #[arg(long, env = "BRINE_SWARM_THREADS", default_value_t = 0)]
    pub threads: usize,
}

/// Settings that do not make sense together.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("--grains must be a JSON object: {0}")]
    Grains(String),
    #[error("unsupported --enc-algo {0}")]
    EncAlgo(String),
    #[error("unsupported --sig-algo {0}")]
    SigAlgo(String),
    #[error("--connect-rate must be a positive number")]
    Rate,
    #[error("--key-bits must be between 1024 and 4096")]
    KeyBits,
    #[error("--count must be at least 1")]
    Count,
    #[error("--key-bits 1024 cannot carry a 76-byte key with OAEP-SHA224; use OAEP-SHA1")]
    SmallKeyOaep,
    #[error("--master-pub {0}: {1}")]
    MasterPub(PathBuf, String),
}

/// What the settings resolve to.
#[derive(Debug, Clone)]
pub struct Checked {
    pub enc_algo: EncAlgo,
    pub sig_algo: SigAlgo,
    /// The extra grains as (key, value) pairs.
    pub grains: Vec<(Value, Value)>,
    pub threads: usize,
    /// The master's key from `--master-pub`.
    pub master_pub: Option<PublicKey>,
}

impl Settings {
    /// Validate and resolve.
    pub fn check(&self) -> Result<Checked, SettingsError> {
        let enc_algo =
            EncAlgo::parse(&self.enc_algo).ok_or(SettingsError::EncAlgo(self.enc_algo.clone()))?;
        let sig_algo =
            SigAlgo::parse(&self.sig_algo).ok_or(SettingsError::SigAlgo(self.sig_algo.clone()))?;
        if !(self.connect_rate.is_finite() && self.connect_rate > 0.0) {
            return Err(SettingsError::Rate);
        }
        if !(1024..=4096).contains(&self.key_bits) {
            return Err(SettingsError::KeyBits);
        }
        if self.count == 0 {
            return Err(SettingsError::Count);
        }
        // OAEP overhead is 2 * hash + 2 bytes; the key strings are 76 bytes.
        if self.key_bits / 8 < 76 + 2 * 28 + 2 && enc_algo == EncAlgo::OaepSha224 {
            return Err(SettingsError::SmallKeyOaep);
        }
        let json: serde_json::Value =
            serde_json::from_str(&self.grains).map_err(|e| SettingsError::Grains(e.to_string()))?;
        let grains = match brine_protocol::payload::from_json(&json) {
            Value::Map(m) => m,
            _ => return Err(SettingsError::Grains("not an object".into())),
        };
        let threads = if self.threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            self.threads
        };
        let master_pub = match &self.master_pub {
            None => None,
            Some(path) => {
                let fail = |e: String| SettingsError::MasterPub(path.clone(), e);
                let pem = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
                Some(PublicKey::from_pem(&pem).map_err(|e| fail(e.to_string()))?)
            }
        };
        Ok(Checked {
            enc_algo,
            sig_algo,
            grains,
            threads,
            master_pub,
        })
    }

    /// The id of minion number `index`.
    pub fn minion_id(&self, index: usize) -> String {
        format!("{}{index}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Settings {
        let mut v = vec!["brine-swarm"];
        v.extend_from_slice(args);
        Settings::try_parse_from(v).unwrap()
    }

    #[test]
    fn defaults_and_checks() {
        let s = parse(&[]);
        assert_eq!((s.master_port, s.count, s.key_bits), (4506, 100, 2048));
        assert_eq!(s.minion_id(7), "swarm-7");
        let c = s.check().unwrap();
        assert!(c.grains.is_empty() && c.threads >= 1);

        let c = parse(&["--grains", r#"{"role":"swarm"}"#]).check().unwrap();
        assert_eq!(c.grains, vec![(Value::from("role"), Value::from("swarm"))]);
        assert!(matches!(
            parse(&["--grains", "[1]"]).check(),
            Err(SettingsError::Grains(_))
        ));
        assert!(matches!(
            parse(&["--connect-rate", "0"]).check(),
            Err(SettingsError::Rate)
        ));
        assert!(matches!(
            parse(&["--key-bits", "1024", "--enc-algo", "OAEP-SHA224"]).check(),
            Err(SettingsError::SmallKeyOaep)
        ));
        assert!(parse(&["--key-bits", "2048", "--enc-algo", "OAEP-SHA224"])
            .check()
            .is_ok());
        assert!(matches!(
            parse(&["--sig-algo", "md5"]).check(),
            Err(SettingsError::SigAlgo(_))
        ));

        let dir = tempfile::tempdir().unwrap();
        let pem = brine_protocol::crypt::PrivateKey::generate(1024)
            .unwrap()
            .public()
            .to_pem();
        let good = dir.path().join("minion_master.pub");
        std::fs::write(&good, pem).unwrap();
        let c = parse(&["--master-pub", good.to_str().unwrap()])
            .check()
            .unwrap();
        assert!(c.master_pub.is_some());
        let bad = dir.path().join("bad.pub");
        std::fs::write(&bad, "not a key").unwrap();
        for path in [bad, dir.path().join("missing.pub")] {
            assert!(matches!(
                parse(&["--master-pub", path.to_str().unwrap()]).check(),
                Err(SettingsError::MasterPub(..))
            ));
        }
    }
}
