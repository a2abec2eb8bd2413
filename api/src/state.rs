//! What every request handler shares.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brine_master::datacache::DataCache;
use brine_master::keys::KeyStore;
use brine_protocol::config::MasterConfig;
use brine_protocol::payload::Value;

use crate::auth::tokens::{Claims, TokenKeeper};
use crate::config::ApiConfig;
use crate::limits::{Gauge, LoginThrottle};
use crate::link::Bus;
use crate::metrics::Metrics;
use brine_client::MasterLink;

pub struct AppState {
    pub cfg: MasterConfig,
    pub api: ApiConfig,
    pub tokens: TokenKeeper,
    pub master: Arc<MasterLink>,
    pub bus: Arc<Bus>,
    pub minions: MinionView,
    pub metrics: Metrics,
    /// Failed sign-ins per user name and address.
    pub logins: LoginThrottle,
    /// `/events` and `/ws` streams open per token.
    pub streams: Arc<Gauge<String>>,
    pub started: Instant,
    /// Flips to true when the server shuts down: streams end cleanly.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

/// Who is calling, once authenticated.
#[derive(Debug, Clone)]
pub struct Caller {
    pub name: String,
    pub eauth: String,
    pub groups: Vec<String>,
    /// The eauth ACL (Salt's auth_list), computed from the current config.
    pub acl: Vec<serde_json::Value>,
    /// The token the caller came with, if any.
    pub claims: Option<Claims>,
}

/// The master's view of its minions, read from the pki dir and the minion data cache, for
/// target expansion in ACL checks. Refreshed at most every two seconds.
pub struct MinionView {
    keys: KeyStore,
    cachedir: std::path::PathBuf,
    nodegroups: std::collections::BTreeMap<String, Value>,
    cache: Mutex<Option<(Instant, Arc<DataCache>)>>,
}

impl MinionView {
    pub fn new(cfg: &MasterConfig) -> std::io::Result<MinionView> {
        Ok(MinionView {
            keys: KeyStore::open(&cfg.pki_dir)?,
            cachedir: cfg.cachedir.clone(),
            nodegroups: cfg.nodegroups.clone(),
            cache: Mutex::new(None),
        })
    }

    fn data(&self) -> Arc<DataCache> {
        let mut c = self.cache.lock().expect("view lock");
        match &*c {
            Some((t, d)) if t.elapsed() < Duration::from_secs(2) => d.clone(),
            _ => {
                let d = Arc::new(DataCache::open(&self.cachedir, true));
                *c = Some((Instant::now(), d.clone()));
                d
            }
        }
    }

    /// The accepted minions a target designates. The data cache is read only when the
    /// target matches on grains or pillar (a glob or a list of 20,000 minions needs ids only).
    pub fn expand(&self, tgt: &Value, tgt_type: &str) -> Vec<String> {
        let ids = self.keys.accepted();
        let data = std::cell::OnceCell::new();
        let lookup = |id: &str| {
            data.get_or_init(|| self.data())
                .get(id)
                .map(|d| (d.grains, d.pillar))
        };
        brine_protocol::target::check_minions(tgt, tgt_type, ":", &ids, &lookup, &self.nodegroups)
            .map(|e| e.minions)
            .unwrap_or_default()
    }

    pub fn expand_compound(&self, expr: &str) -> Vec<String> {
        self.expand(&Value::from(expr), "compound")
    }

    pub fn keys(&self) -> &KeyStore {
        &self.keys
    }
}
