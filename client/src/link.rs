//! The tools' and salt-api's link to the master they run next to: clear requests on its ret
//! port, authenticated by the root key the master keeps in its cachedir.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use brine_protocol::loads::{PublishReply, PublishRequest, RequestEnvelope};
use brine_protocol::payload::{dumps, loads, Value};
use brine_transport::{tcp_endpoint, ReqClient};

use crate::{ClientError, Publish};

/// How long a publish may take to be accepted by the master.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Clear requests to the master, over a small pool of REQ sockets (one request in flight each).
///
/// Locks: `pool` and `key` are held only to take or put a socket or a string, never across
/// a request.
pub struct MasterLink {
    ctx: zmq::Context,
    endpoint: String,
    pool: Mutex<Vec<ReqClient>>,
    key_path: PathBuf,
    key: Mutex<String>,
}

/// The address local tools use for a master listening on `interface`.
pub fn local_host(interface: &str) -> &str {
    match interface {
        "0.0.0.0" => "127.0.0.1",
        "::" => "::1",
        other => other,
    }
}

impl MasterLink {
    /// A link to `host:port`, authenticated with `cachedir/.<key_user>_key` (the root key,
    /// `.root_key`, when that user has none).
    pub fn new(host: &str, port: u16, cachedir: &Path, key_user: &str) -> MasterLink {
        let own = cachedir.join(format!(".{key_user}_key"));
        let key_path = if own.exists() {
            own
        } else {
            cachedir.join(".root_key")
        };
        let key = std::fs::read_to_string(&key_path)
            .map(|k| k.trim().to_string())
            .unwrap_or_default();
        MasterLink {
            ctx: zmq::Context::new(),
            endpoint: tcp_endpoint(host, port),
            pool: Mutex::new(Vec::new()),
            key_path,
            key: Mutex::new(key),
        }
    }

    /// The key (re-read when the master wrote a new one, as it does at its first start).
    pub fn key(&self) -> String {
        let mut k = self.key.lock().expect("key lock");
        if let Ok(text) = std::fs::read_to_string(&self.key_path) {
            let t = text.trim();
            if !t.is_empty() && t != *k {
                *k = t.to_string();
            }
        }
        k.clone()
    }

    /// Send one clear load and decode the reply, blocking the calling thread.
    pub fn clear_blocking(&self, load: Value, timeout: Duration) -> Result<Value, ClientError> {
        let mut client = self
            .pool
            .lock()
            .expect("pool lock")
            .pop()
            .unwrap_or_else(|| ReqClient::new(&self.ctx, &self.endpoint));
        let env = RequestEnvelope::clear(load).to_value();
        match client.request(&dumps(&env), timeout) {
            Ok(bytes) => {
                self.pool.lock().expect("pool lock").push(client);
                loads(&bytes).map_err(|e| ClientError::Undecodable(e.to_string()))
            }
            // A REQ socket that timed out is in the wrong state: it is dropped, not pooled.
            Err(e) => Err(ClientError::Unavailable(e.to_string())),
        }
    }

    /// [`MasterLink::clear_blocking`] off the async workers.
    pub async fn clear(
        self: &Arc<Self>,
        load: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.clear_blocking(load, timeout))
            .await
            .map_err(|e| ClientError::Unavailable(format!("request task failed: {e}")))?
    }

    /// Publishes as `user` through this link.
    pub fn as_user(self: &Arc<Self>, user: &str) -> LinkPublisher {
        LinkPublisher {
            link: self.clone(),
            user: user.to_string(),
        }
    }
}

/// Publishes through a [`MasterLink`] with its key, in the name of one user.
#[derive(Clone)]
pub struct LinkPublisher {
    pub link: Arc<MasterLink>,
    pub user: String,
}

impl Publish for LinkPublisher {
    async fn publish(&self, mut req: PublishRequest) -> Result<PublishReply, ClientError> {
        req.key = Some(self.link.key());
        req.user = Some(self.user.clone());
        let reply = self.link.clear(req.to_value(), PUBLISH_TIMEOUT).await?;
        match PublishReply::parse(reply) {
            Ok(r) => Ok(r),
            // Nothing matched: a job with no minions, as Salt's LocalClient reports it.
            Err(brine_protocol::loads::PublishRefused::NoJob(_)) => Ok(PublishReply {
                jid: String::new(),
                minions: Vec::new(),
                missing: Vec::new(),
            }),
            Err(e) => Err(e.into()),
        }
    }
}
