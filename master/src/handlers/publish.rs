//! `publish`: a local client (salt, salt-api, a runner) asks for a job. The master resolves
//! the target, stores the job, fires its events and sends the publish to the minions.

use std::collections::BTreeMap;

use brine_protocol::crypt::SigAlgo;
use brine_protocol::jid::gen_jid;
use brine_protocol::loads::{PublishLoad, PublishReply, PublishRequest};
use brine_protocol::payload::{dumps, map, remove, set, Value};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::jobstore::StoreError;
use crate::master::Master;

/// Job records held at most while the job store cannot be reached; the oldest go beyond.
const WAITING_LOADS: usize = 100_000;

impl Master {
    /// The clear `publish` command: authenticate by the root key, resolve the target, publish.
    pub(crate) fn clear_publish(&self, mut req: PublishRequest) -> Value {
        let delimiter = req.kwargs.get_str("delimiter").unwrap_or(":").to_string();
        let expected = match self.check_minions(&req.tgt.to_value(), &req.tgt_type, &delimiter) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("publish with a bad target {}: {e}", req.tgt);
                brine_protocol::target::Expected {
                    minions: vec![],
                    missing: vec![],
                }
            }
        };
        let Some(user) = self.authenticate_key(req.key.as_deref(), req.user.as_deref()) else {
            let mut ev = req.to_value();
            remove(&mut ev, "key");
            let mut kw = req.kwargs.clone();
            kw.remove("password");
            kw.remove("token");
            set(&mut ev, "kwargs", kw.to_value());
            set(&mut ev, "error", Master::auth_error("AuthenticationError"));
            let tag = if req.jid.is_empty() {
                "salt/job/error".to_string()
            } else {
                format!("salt/job/{}/error", req.jid)
            };
            self.bus.fire(&tag, ev);
            tracing::warn!("publish refused: bad root key");
            return Master::auth_error("AuthenticationError");
        };
        req.key = None;
        req.user = Some(user);
        if !req.jid.is_empty() {
            // A caller may name the jid, but never one that is taken: the job's record and
            // returns belong to the publish that created it.
            if let Err(why) = self.claim_jid(&req.jid) {
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
                                req.tgt
                            )),
                        ),
                    ]),
                ),
            ]);
        }
        self.publish_job(req, expected.minions, expected.missing)
            .to_value()
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

    /// Allocate a jid (unless the request names one), store the job, fire the job events and
    /// publish it. `req` is an authenticated request (`user` set, `key` gone). When the job
    /// store cannot be reached the job is still published, as Salt publishes it when its job
    /// cache fails, and its record waits in memory until the store is back
    /// ([`Master::store_waiting_loads`]).
    pub fn publish_job(
        &self,
        mut req: PublishRequest,
        minions: Vec<String>,
        missing: Vec<String>,
    ) -> PublishReply {
        if req.jid.is_empty() {
            req.jid = gen_jid();
        }
        let jid = req.jid.clone();
        self.recent_jids.claim(&jid);
        if self.cfg.job_cache {
            // Secrets never reach the job store.
            let mut saved = req.clone();
            saved.key = None;
            saved.kwargs.remove("password");
            saved.kwargs.remove("token");
            let saved = saved.to_value();
            self.save_load_or_hold(&jid, saved, &minions);
        }
        let ids = |l: &[String]| Value::Array(l.iter().cloned().map(Value::from).collect());
        self.bus.fire(&jid, map(vec![("minions", ids(&minions))]));
        self.bus.fire(
            &format!("salt/job/{jid}/new"),
            map(vec![
                ("jid", Value::from(jid.clone())),
                ("tgt_type", Value::from(req.tgt_type.as_str())),
                ("tgt", req.tgt.to_value()),
                ("user", req.user.as_deref().map_or(Value::Nil, Value::from)),
                ("fun", req.fun.to_value()),
                ("arg", Value::Array(req.arg.clone())),
                ("minions", ids(&minions)),
                ("missing", ids(&missing)),
            ]),
        );
        let pub_load = PublishLoad::from_request(&req, &jid);
        let value = pub_load.to_value();
        if let Some(share) = self.job_share.get() {
            self.shared_jids.claim(&jid);
            share.send(dumps(&value));
        }
        self.bus.fire(&format!("salt/job/{jid}/publish"), value);
        self.publish_to_minions(pub_load, &minions);
        PublishReply {
            jid,
            minions,
            missing,
        }
    }

    /// A job another master published and sent on `brine_nats.jobs_subject`: publish it to
    /// this master's minions too, under the same jid, once (a jid this master published or
    /// received already is skipped). Its record is stored as well, so that this master's job
    /// store knows the job its minions return (a store shared with the other master keeps the
    /// first record).
    pub fn publish_peer_job(&self, origin: &str, body: &[u8]) {
        let load = match brine_protocol::payload::loads(body)
            .map_err(|e| e.to_string())
            .and_then(|v| PublishLoad::parse(v).map_err(|e| e.to_string()))
        {
            Ok(load) => load,
            Err(e) => {
                tracing::warn!("a job from master {origin} ignored: {e}");
                return;
            }
        };
        let jid = load.jid.clone();
        if !brine_protocol::jid::is_jid(&jid) {
            tracing::warn!("a job from master {origin} ignored: '{jid}' is not a jid");
            return;
        }
        if !self.recent_jids.claim(&jid) {
            return;
        }
        let delimiter = load.delimiter.as_deref().unwrap_or(":");
        let minions = match self.check_minions(&load.tgt.to_value(), &load.tgt_type, delimiter) {
            Ok(e) => e.minions,
            Err(e) => {
                tracing::warn!("job {jid} from master {origin} ignored: {e}");
                return;
            }
        };
        tracing::debug!("job {jid} from master {origin}: {} minions", minions.len());
        if minions.is_empty() {
            return;
        }
        if self.cfg.job_cache {
            self.save_load_or_hold(&jid, load.to_value(), &minions);
        }
        self.publish_to_minions(load, &minions);
    }

    /// Send a job to this master's minions, and keep it for those that start late (for the
    /// job's `to`, or the master's `timeout`).
    fn publish_to_minions(&self, load: PublishLoad, minions: &[String]) {
        let timeout = load
            .to
            .and_then(|to| u64::try_from(to).ok())
            .unwrap_or(self.cfg.timeout);
        self.late
            .published(&load, minions, Duration::from_secs(timeout));
        self.send_publish(load, minions);
    }

    /// Store a job's record, or hold it (counted, logged) while the store cannot be reached.
    fn save_load_or_hold(&self, jid: &str, load: Value, minions: &[String]) {
        match self.store.save_load(jid, &load, minions) {
            Ok(()) => {}
            Err(e @ StoreError::Unavailable(_)) => {
                self.stats.store_unavailable.fetch_add(1, Ordering::Relaxed);
                tracing::error!("job {jid} published; its record waits for the job store: {e}");
                let mut waiting = self.waiting_loads.lock().expect("waiting loads lock");
                if waiting.len() >= WAITING_LOADS {
                    if let Some((lost, _, _)) = waiting.pop_front() {
                        tracing::error!(
                            "record of job {lost} dropped: {WAITING_LOADS} records wait already"
                        );
                    }
                }
                waiting.push_back((jid.to_string(), load, minions.to_vec()));
            }
            Err(e) => tracing::error!("job {jid} not stored: {e}"),
        }
    }

    /// Write the job records held while the store could not be reached, oldest first, until
    /// it still cannot be reached (they wait for the next call).
    pub fn store_waiting_loads(&self) {
        loop {
            let Some((jid, load, minions)) = self
                .waiting_loads
                .lock()
                .expect("waiting loads lock")
                .pop_front()
            else {
                return;
            };
            match self.store.save_load(&jid, &load, &minions) {
                Ok(()) => tracing::warn!("record of job {jid} stored, the job store is back"),
                Err(StoreError::Unavailable(_)) => {
                    let mut waiting = self.waiting_loads.lock().expect("waiting loads lock");
                    waiting.push_front((jid, load, minions));
                    return;
                }
                Err(e) => tracing::error!("job {jid} not stored: {e}"),
            }
        }
    }

    /// Encrypt, sign and send one publish load to the minions.
    pub fn send_publish(&self, mut pub_load: PublishLoad, minions: &[String]) {
        let (turn, (serial, aes)) = self
            .publish_order
            .enter(|| (self.secrets.next_serial(), self.secrets.aes()));
        pub_load.serial = Some(serial as i64);
        let ct = aes.dumps(&pub_load.to_value(), None);
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
        } else if matches!(pub_load.tgt_type.as_str(), "glob" | "pcre" | "list") {
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
}
