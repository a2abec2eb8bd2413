//! `publish`: a local client (salt, salt-api, a runner) asks for a job. The master resolves
//! the target, stores the job, fires its events and sends the publish to the minions.

use std::collections::BTreeMap;

use brine_protocol::crypt::SigAlgo;
use brine_protocol::jid::gen_jid;
use brine_protocol::loads::{PublishLoad, PublishRefused, PublishReply, PublishRequest};
use brine_protocol::payload::{dumps, map, remove, set, Value};
use std::sync::atomic::Ordering;

use crate::jobstore::StoreError;
use crate::master::Master;

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
        match self.publish_job(req, expected.minions, expected.missing) {
            Ok(reply) => reply.to_value(),
            Err(PublishRefused::Error { name, message }) => map(vec![(
                "error",
                map(vec![
                    ("name", Value::from(name)),
                    ("message", Value::from(message)),
                ]),
            )]),
            Err(other) => map(vec![("error", Value::from(other.to_string()))]),
        }
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
    /// publish it. `req` is an authenticated request (`user` set, `key` gone). Refused (as
    /// Salt refuses a publish when its job cache fails) when the job store cannot be reached:
    /// a job published then would have no record.
    pub fn publish_job(
        &self,
        mut req: PublishRequest,
        minions: Vec<String>,
        missing: Vec<String>,
    ) -> Result<PublishReply, PublishRefused> {
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
            match self.store.save_load(&jid, &saved, &minions) {
                Ok(()) => {}
                Err(e @ StoreError::Unavailable(_)) => {
                    self.stats.store_unavailable.fetch_add(1, Ordering::Relaxed);
                    tracing::error!("job {jid} not published: the job store: {e}");
                    return Err(PublishRefused::Error {
                        name: "SaltMasterError".into(),
                        message: format!(
                            "Failed to allocate a jid: the job store cannot be reached ({e})"
                        ),
                    });
                }
                Err(e) => tracing::error!("job {jid} not stored: {e}"),
            }
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
        self.bus
            .fire(&format!("salt/job/{jid}/publish"), pub_load.to_value());
        self.send_publish(pub_load, &minions);
        Ok(PublishReply {
            jid,
            minions,
            missing,
        })
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
