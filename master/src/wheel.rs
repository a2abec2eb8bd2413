//! Wheel functions: master-side management run synchronously in a request worker
//! (`key.*`, `minions.connected`, `config.values`).

use brine_protocol::crypt::HashType;
use brine_protocol::jid::gen_jid;
use brine_protocol::payload::{from_json, get, get_str, map, Value};
use brine_protocol::target::fnmatch;

use crate::keys::KeyState;
use crate::master::{str_value, Master};

/// Keys of a wheel/runner clear load that are not function arguments.
pub const NON_ARG_KEYS: &[&str] = &[
    "cmd",
    "fun",
    "key",
    "user",
    "client",
    "token",
    "eauth",
    "username",
    "password",
    "arg",
    "kwarg",
    "__kwarg__",
    "print_event",
    "full_return",
    "__jid__",
    "__user__",
];

/// Every wheel function Brine has, with its documentation (`doc.wheel`).
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("config.values", "Return the master's configuration, with Salt's defaults for what it leaves out and without secrets.\n\nCLI Example:\n\n    salt-run wheel config.values\n"),
    ("key.accept", "Accept the pending (or, with include_rejected/include_denied, rejected or denied) keys whose ids match a glob.\n\nCLI Example:\n\n    wheel key.accept match='minion1'\n"),
    ("key.delete", "Delete the keys whose ids match a glob, in every state.\n\nCLI Example:\n\n    wheel key.delete match='minion1'\n"),
    ("key.finger", "Return the fingerprints of the keys whose ids match a glob, by state.\n\nCLI Example:\n\n    wheel key.finger match='minion1'\n"),
    ("key.gen_accept", "Make a key pair for an id, accept its public key and return both keys.\n\nCLI Example:\n\n    wheel key.gen_accept id_=minion1\n"),
    ("key.list", "Return the ids of the keys in one state (pre/unaccepted, acc/accepted, rej/rejected, den/denied, or all).\n\nCLI Example:\n\n    wheel key.list match='accepted'\n"),
    ("key.list_all", "Return the ids of every key, by state.\n\nCLI Example:\n\n    wheel key.list_all\n"),
    ("key.name_match", "Return the ids matching a glob, by key state.\n\nCLI Example:\n\n    wheel key.name_match 'minion*'\n"),
    ("key.reject", "Reject the pending (or, with include_accepted/include_denied, accepted or denied) keys whose ids match a glob.\n\nCLI Example:\n\n    wheel key.reject match='minion1'\n"),
    ("minions.connected", "Return the minions connected to the master now.\n\nCLI Example:\n\n    wheel minions.connected\n"),
];

/// Defaults of Salt 3007's master options (as JSON) that `config.values` reports when the
/// config leaves them out.
const SALT_MASTER_DEFAULTS: &[(&str, &str)] = &[
    ("state_verbose", "true"),
    ("state_output", "\"full\""),
    ("state_output_diff", "false"),
    ("state_output_profile", "true"),
    ("state_auto_order", "true"),
    ("state_events", "false"),
    ("state_aggregate", "false"),
    ("state_top", "\"top.sls\""),
    ("state_top_saltenv", "null"),
    ("top_file_merging_strategy", "\"merge\""),
    ("env_order", "[]"),
    ("default_top", "\"base\""),
    ("fileserver_backend", "[\"roots\"]"),
    ("renderer", "\"jinja|yaml\""),
    ("failhard", "false"),
];

/// The arguments of a wheel call: `arg` list, `kwarg` map, and any other top-level key.
#[derive(Default)]
pub struct Args {
    pub args: Vec<Value>,
    pub kwargs: Vec<(String, Value)>,
}

impl Args {
    pub fn from_flat_load(load: &Value) -> Args {
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        if let Some(Value::Array(a)) = get(load, "arg") {
            for v in a {
                match v {
                    Value::Map(m)
                        if m.iter().any(|(k, v)| {
                            str_value(k) == Some("__kwarg__") && v == &Value::from(true)
                        }) =>
                    {
                        for (k, v) in m {
                            if let Some(k) = str_value(k).filter(|k| *k != "__kwarg__") {
                                kwargs.push((k.to_string(), v.clone()));
                            }
                        }
                    }
                    v => args.push(v.clone()),
                }
            }
        }
        if let Some(Value::Map(m)) = get(load, "kwarg") {
            for (k, v) in m {
                if let Some(k) = str_value(k) {
                    kwargs.push((k.to_string(), v.clone()));
                }
            }
        }
        if let Value::Map(m) = load {
            for (k, v) in m {
                if let Some(k) = str_value(k) {
                    if !NON_ARG_KEYS.contains(&k) {
                        kwargs.push((k.to_string(), v.clone()));
                    }
                }
            }
        }
        Args { args, kwargs }
    }

    /// Positional argument `pos` or keyword `name`.
    pub fn get(&self, pos: usize, name: &str) -> Option<&Value> {
        self.kwargs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .or_else(|| self.args.get(pos))
    }

    pub fn get_str(&self, pos: usize, name: &str) -> Option<String> {
        match self.get(pos, name)? {
            Value::String(s) => s.as_str().map(str::to_string),
            Value::Integer(i) => Some(i.to_string()),
            Value::Array(a) => Some(a.iter().filter_map(str_value).collect::<Vec<_>>().join(",")),
            _ => None,
        }
    }

    /// Salt's `split_input`: a list as it is, anything else as text split on commas (each
    /// piece stripped).
    pub fn get_list(&self, pos: usize, name: &str) -> Option<Vec<String>> {
        let text = |v: &Value| match v {
            Value::String(s) => s.as_str().unwrap_or_default().to_string(),
            other => other.to_string(),
        };
        Some(match self.get(pos, name)? {
            Value::Nil => return None,
            Value::Array(items) => items.iter().map(text).collect(),
            other => text(other)
                .split(',')
                .map(|p| p.trim().to_string())
                .collect(),
        })
    }

    pub fn get_bool(&self, pos: usize, name: &str) -> bool {
        matches!(self.get(pos, name), Some(Value::Boolean(true)))
            || matches!(
                self.get(pos, name).and_then(str_value),
                Some("True" | "true")
            )
    }
}

fn ids(list: Vec<String>) -> Value {
    Value::Array(list.into_iter().map(Value::from).collect())
}

impl Master {
    /// `{state_dir: [ids]}` for the keys matching a glob, plus `local` files if asked.
    fn name_match(&self, pattern: &str, with_local: bool) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = self
            .keys
            .name_match(pattern)
            .into_iter()
            .map(|(s, ids)| (s.dir().to_string(), ids))
            .collect();
        if with_local {
            let pats: Vec<&str> = pattern.split(',').collect();
            let local: Vec<String> = self
                .keys
                .local_keys()
                .into_iter()
                .filter(|f| pats.iter().any(|p| fnmatch(p, f)))
                .collect();
            if !local.is_empty() {
                out.push(("local".into(), local));
            }
        }
        out
    }

    fn status_map(groups: Vec<(String, Vec<String>)>) -> Value {
        Value::Map(
            groups
                .into_iter()
                .map(|(k, v)| (Value::from(k), ids(v)))
                .collect(),
        )
    }

    fn list_keys(&self) -> Vec<(String, Vec<String>)> {
        KeyState::ALL
            .iter()
            .map(|s| (s.dir().to_string(), self.keys.list(*s)))
            .collect()
    }

    fn key_event(&self, act: &str, id: &str) {
        self.bus.fire(
            "salt/key",
            map(vec![
                ("result", Value::from(true)),
                ("act", Value::from(act)),
                ("id", Value::from(id)),
            ]),
        );
    }

    /// After keys were rejected or deleted: events, caches, sessions, and the AES key.
    pub fn forget_minions(&self, act: &str, ids: &[String], rotate: bool) {
        for id in ids {
            self.key_event(act, id);
        }
        self.keys_removed(ids, rotate);
    }

    /// Forget the caches and sessions of minions whose keys are gone; rotate the AES key if
    /// one of them was accepted, so that it can no longer read publishes.
    pub fn keys_removed(&self, ids: &[String], rotate: bool) {
        for id in ids {
            self.cache.remove(id);
            self.secrets.drop_session(id);
        }
        if rotate {
            self.rotate_after_key_removal();
        }
    }

    /// Run one wheel function. `Err` carries Salt's message for an unknown function or bad
    /// arguments.
    pub fn run_wheel(&self, fun: &str, a: &Args) -> Result<Value, String> {
        let need_match = || {
            a.get_str(0, "match")
                .ok_or_else(|| format!("{fun} requires a 'match' argument"))
        };
        match fun {
            "key.list_all" => {
                let mut all = self.list_keys();
                all.push(("local".into(), self.keys.local_keys()));
                Ok(Master::status_map(all))
            }
            "key.list" => {
                let m = need_match()?;
                if m.starts_with("all") {
                    let mut all = self.list_keys();
                    all.push(("local".into(), self.keys.local_keys()));
                    return Ok(Master::status_map(all));
                }
                let state = ["acc", "pre", "un", "rej", "den"]
                    .iter()
                    .find(|p| m.starts_with(*p))
                    .and_then(|p| KeyState::parse(p));
                Ok(match state {
                    Some(s) => Master::status_map(vec![(s.dir().into(), self.keys.list(s))]),
                    None => Value::Map(vec![]),
                })
            }
            "key.name_match" => Ok(Master::status_map(self.name_match(&need_match()?, false))),
            "key.accept" => {
                let m = need_match()?;
                let mut from = vec![KeyState::Pending];
                if a.get_bool(1, "include_rejected") {
                    from.push(KeyState::Rejected);
                }
                if a.get_bool(2, "include_denied") {
                    from.push(KeyState::Denied);
                }
                for id in self.keys.accept(&m, &from) {
                    self.key_event("accept", &id);
                }
                Ok(Master::status_map(self.name_match(&m, false)))
            }
            "key.reject" => {
                let m = need_match()?;
                let mut from = vec![KeyState::Pending];
                if a.get_bool(1, "include_accepted") {
                    from.push(KeyState::Accepted);
                }
                if a.get_bool(2, "include_denied") {
                    from.push(KeyState::Denied);
                }
                let (done, was_accepted) = self.keys.reject(&m, &from);
                self.forget_minions("reject", &done, was_accepted);
                Ok(Master::status_map(self.name_match(&m, false)))
            }
            "key.delete" => {
                let m = need_match()?;
                let (done, was_accepted) = self.keys.delete(&m);
                self.forget_minions("delete", &done, was_accepted);
                Ok(Master::status_map(self.name_match(&m, false)))
            }
            "key.finger" => {
                let m = need_match()?;
                let hash = a
                    .get_str(1, "hash_type")
                    .unwrap_or_else(|| self.cfg.hash_type.clone());
                let hash =
                    HashType::parse(&hash).ok_or_else(|| format!("unknown hash_type {hash}"))?;
                let mut out = Vec::new();
                for (dir, idl) in self.name_match(&m, true) {
                    let mut fingers = Vec::new();
                    for id in idl {
                        let text = if dir == "local" {
                            std::fs::read_to_string(self.keys.pki_dir().join(&id)).ok()
                        } else {
                            KeyState::parse(&dir).and_then(|s| self.keys.read(s, &id))
                        };
                        if let Some(t) = text {
                            fingers.push((
                                Value::from(id),
                                Value::from(brine_protocol::crypt::pem_finger(&t, hash)),
                            ));
                        }
                    }
                    out.push((Value::from(dir), Value::Map(fingers)));
                }
                Ok(Value::Map(out))
            }
            "key.gen_accept" => {
                // A new key pair for a minion, accepted at once (the private half goes back to
                // the caller, e.g. salt-api's POST /keys tarball).
                let id = a
                    .get_str(0, "id_")
                    .or_else(|| a.get_str(0, "id"))
                    .ok_or_else(|| format!("{fun} requires an 'id_' argument"))?;
                if let Some(why) = crate::keys::invalid_id_reason(&id) {
                    return Err(format!("invalid minion id {id:?}: {why}"));
                }
                let bits = a
                    .get(1, "keysize")
                    .and_then(|v| crate::master::int_value(Some(v)))
                    .unwrap_or(2048);
                if !(2048..=4096).contains(&bits) {
                    return Err(format!("keysize {bits}: use 2048 to 4096 bits"));
                }
                let force = a.get_bool(2, "force");
                if !force && self.keys.state_of(&id).is_some() {
                    return Err(format!(
                        "a key for {id} already exists; pass force=True to replace it"
                    ));
                }
                let key = brine_protocol::crypt::PrivateKey::generate(bits as usize)
                    .map_err(|e| e.to_string())?;
                let public = key.public().to_pem();
                for state in KeyState::ALL {
                    let _ = self.keys.remove(state, &id);
                }
                self.keys
                    .write(KeyState::Accepted, &id, &public)
                    .map_err(|e| e.to_string())?;
                self.key_event("accept", &id);
                Ok(map(vec![
                    ("priv", Value::from(key.to_pem())),
                    ("pub", Value::from(public)),
                ]))
            }
            "minions.connected" => Ok(ids(self.connected_ids())),
            "config.values" => {
                let mut v = from_json(&serde_json::Value::Object(self.cfg.opts().clone()));
                for (k, val) in [
                    ("id", Value::from(self.cfg.id.clone())),
                    ("interface", Value::from(self.cfg.interface.clone())),
                    ("publish_port", Value::from(self.cfg.publish_port)),
                    ("ret_port", Value::from(self.cfg.ret_port)),
                    (
                        "pki_dir",
                        Value::from(self.cfg.pki_dir.display().to_string()),
                    ),
                    (
                        "cachedir",
                        Value::from(self.cfg.cachedir.display().to_string()),
                    ),
                    (
                        "sock_dir",
                        Value::from(self.cfg.sock_dir.display().to_string()),
                    ),
                    (
                        "root_dir",
                        Value::from(self.cfg.root_dir.display().to_string()),
                    ),
                    ("timeout", Value::from(self.cfg.timeout)),
                    ("keep_jobs_seconds", Value::from(self.cfg.keep_jobs_seconds)),
                    (
                        "worker_threads",
                        Value::from(self.cfg.worker_threads as u64),
                    ),
                    ("auto_accept", Value::from(self.cfg.auto_accept)),
                    ("open_mode", Value::from(self.cfg.open_mode)),
                    ("hash_type", Value::from(self.cfg.hash_type.clone())),
                ] {
                    brine_protocol::payload::set(&mut v, k, val);
                }
                // Salt's master defaults for what the config does not set (SaltGUI reads the
                // state output settings from here).
                for (k, default) in SALT_MASTER_DEFAULTS {
                    if get(&v, k).is_none() {
                        let default: serde_json::Value =
                            serde_json::from_str(default).expect("static JSON");
                        brine_protocol::payload::set(&mut v, k, from_json(&default));
                    }
                }
                // Secrets stay out.
                for k in ["external_auth", "key_pass", "signing_key_pass"] {
                    brine_protocol::payload::remove(&mut v, k);
                }
                Ok(v)
            }
            other => Err(format!("'{other}' is not available.")),
        }
    }

    /// The clear `wheel` command: authenticate, run, answer `{tag, data}` as Salt does.
    pub fn clear_wheel(&self, load: Value) -> Value {
        let Some(user) = self.authenticate_key(&load) else {
            tracing::warn!("wheel call refused: bad root key");
            return Master::auth_error("AuthenticationError");
        };
        // Salt's internal `__user__`/`__jid__` (which Salt's master drops before calling the
        // function; salt-api sends them) name the caller and the jid when `user`/`jid` are absent.
        let user = match (get(&load, "user"), get_str(&load, "__user__")) {
            (None, Some(u)) => u.to_string(),
            _ => user,
        };
        let fun = get_str(&load, "fun").unwrap_or("").to_string();
        let jid = match get_str(&load, "jid").or_else(|| get_str(&load, "__jid__")) {
            Some(j) if brine_protocol::jid::is_jid(j) => j.to_string(),
            _ => gen_jid(),
        };
        let tag = format!("salt/wheel/{jid}");
        let base = |extra: Vec<(&str, Value)>| {
            let mut v = vec![
                ("fun", Value::from(format!("wheel.{fun}"))),
                ("jid", Value::from(jid.clone())),
                ("tag", Value::from(tag.clone())),
                ("user", Value::from(user.clone())),
            ];
            v.extend(extra);
            map(v)
        };
        self.bus.fire(&format!("{tag}/new"), base(vec![]));
        let args = Args::from_flat_load(&load);
        let (ret, success) = match self.run_wheel(&fun, &args) {
            Ok(v) => (v, true),
            Err(msg) => (Value::from(msg), false),
        };
        let data = base(vec![("return", ret), ("success", Value::from(success))]);
        self.bus.fire(&format!("{tag}/ret"), data.clone());
        let mut data = data;
        brine_protocol::payload::set(
            &mut data,
            "_stamp",
            Value::from(brine_protocol::jid::stamp_now()),
        );
        map(vec![("tag", Value::from(tag)), ("data", data)])
    }

    /// Minions with a live connection to the publish port: accepted minions whose cached
    /// IP grains include the address of an established peer (Salt's `connected_ids`).
    pub fn connected_ids(&self) -> Vec<String> {
        let peers = crate::presence::publish_peers(self.cfg.publish_port);
        if peers.is_empty() {
            return vec![];
        }
        let mut out = Vec::new();
        for id in self.keys.accepted() {
            let Some(grains) = self.cache.get(&id).and_then(|d| d.grains) else {
                continue;
            };
            let mut ips: Vec<String> = Vec::new();
            for k in ["ipv4", "ipv6"] {
                if let Some(Value::Array(a)) = get(&grains, k) {
                    ips.extend(a.iter().filter_map(str_value).map(str::to_string));
                }
            }
            let hit = peers.iter().any(|p| {
                ips.iter().any(|ip| ip == p)
                    || (crate::presence::is_loopback(p)
                        && ips.iter().any(|ip| crate::presence::is_loopback(ip)))
            });
            if hit {
                out.push(id);
            }
        }
        out
    }
}
