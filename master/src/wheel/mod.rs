//! Wheel functions: master-side management run synchronously in a request worker.
//!
//! As with runners ([`crate::runners`]), each Salt wheel module is one file whose `FUNCTIONS`
//! lists its functions ([`Wheel`]: name, arguments, documentation, code), and [`MODULES`] lists
//! the modules; `doc.wheel` reads this registry.

/// Declares the wheel modules: each name is a file here and its whole registration.
macro_rules! wheel_modules {
    ($($module:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every wheel module's functions.
        pub const MODULES: &[&[Wheel]] = &[$($module::FUNCTIONS),*];
    };
}

wheel_modules![config, file_roots, key, minions, pillar_roots];

use brine_protocol::jid::gen_jid;
use brine_protocol::payload::{get, get_str, map, Value};
use brine_protocol::target::fnmatch;

use crate::keys::KeyState;
use crate::master::Master;

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

/// One wheel function.
pub struct Wheel {
    pub name: &'static str,
    /// Its arguments as Salt documents them (`match`, `include_rejected=False`).
    pub args: &'static [&'static str],
    pub doc: &'static str,
    pub run: fn(&Master, &Args) -> Result<Value, String>,
}

/// Every wheel function, sorted by name.
pub fn all() -> Vec<&'static Wheel> {
    let mut v: Vec<&Wheel> = MODULES.iter().flat_map(|m| m.iter()).collect();
    v.sort_by_key(|w| w.name);
    v
}

/// The wheel function called `name`.
pub fn find(name: &str) -> Option<&'static Wheel> {
    MODULES
        .iter()
        .flat_map(|m| m.iter())
        .find(|w| w.name == name)
}

/// The arguments of a wheel call: `arg` list, `kwarg` map, and any other top-level key.
#[derive(Debug, Clone, Default, PartialEq)]
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
                            k.as_str() == Some("__kwarg__") && v == &Value::from(true)
                        }) =>
                    {
                        for (k, v) in m {
                            if let Some(k) = k.as_str().filter(|k| *k != "__kwarg__") {
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
                if let Some(k) = k.as_str() {
                    kwargs.push((k.to_string(), v.clone()));
                }
            }
        }
        if let Value::Map(m) = load {
            for (k, v) in m {
                if let Some(k) = k.as_str() {
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
            Value::Array(a) => Some(
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
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
                self.get(pos, name).and_then(Value::as_str),
                Some("True" | "true")
            )
    }
}

pub(crate) fn ids(list: Vec<String>) -> Value {
    Value::Array(list.into_iter().map(Value::from).collect())
}

impl Master {
    /// `{state_dir: [ids]}` for the keys matching a glob, plus `local` files if asked.
    pub(crate) fn name_match(&self, pattern: &str, with_local: bool) -> Vec<(String, Vec<String>)> {
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

    pub(crate) fn status_map(groups: Vec<(String, Vec<String>)>) -> Value {
        Value::Map(
            groups
                .into_iter()
                .map(|(k, v)| (Value::from(k), ids(v)))
                .collect(),
        )
    }

    pub(crate) fn list_keys(&self) -> Vec<(String, Vec<String>)> {
        KeyState::ALL
            .iter()
            .map(|s| (s.dir().to_string(), self.keys.list(*s)))
            .collect()
    }

    pub(crate) fn key_event(&self, act: &str, id: &str) {
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
        match find(fun) {
            Some(w) => (w.run)(self, a),
            None => Err(format!("'{fun}' is not available.")),
        }
    }

    /// The clear `wheel` command: authenticate, run, answer `{tag, data}` as Salt does.
    pub fn clear_wheel(&self, load: Value) -> Value {
        let Some(user) = self.authenticate_load(&load) else {
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
        let args = Args::from_flat_load(&load);
        let data = self.run_wheel_job(&jid, &fun, &args, &user);
        map(vec![("tag", Value::from(tag)), ("data", data)])
    }

    /// Run a wheel function as a job: events `salt/wheel/<jid>/new` and `/ret` fired by
    /// `user`; the `ret` event's data (with its `_stamp`) is returned.
    pub fn run_wheel_job(&self, jid: &str, fun: &str, args: &Args, user: &str) -> Value {
        let tag = format!("salt/wheel/{jid}");
        let base = |extra: Vec<(&str, Value)>| {
            let mut v = vec![
                ("fun", Value::from(format!("wheel.{fun}"))),
                ("jid", Value::from(jid)),
                ("tag", Value::from(tag.clone())),
                ("user", Value::from(user)),
            ];
            v.extend(extra);
            map(v)
        };
        self.bus.fire(&format!("{tag}/new"), base(vec![]));
        let (ret, success) = match self.run_wheel(fun, args) {
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
        data
    }

    /// Run a wheel function as Salt's `WheelClient.low` does (the reactor): the events
    /// `salt/wheel/<jid>/new` and `/ret` carry `fun_args` (the arguments, then the keyword
    /// arguments as one map) and no `tag`, unlike the clear `wheel` command's
    /// ([`Master::run_wheel_job`]); the job is kept in the job store. Returns the `ret` data.
    pub fn run_wheel_low_job(&self, jid: &str, fun: &str, args: &Args, user: &str) -> Value {
        let mut fun_args = args.args.clone();
        if !args.kwargs.is_empty() {
            fun_args.push(map(args
                .kwargs
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))));
        }
        let head = vec![
            ("fun", Value::from(format!("wheel.{fun}"))),
            ("jid", Value::from(jid)),
            ("user", Value::from(user)),
            ("fun_args", Value::Array(fun_args.clone())),
        ];
        self.bus
            .fire(&format!("salt/wheel/{jid}/new"), map(head.clone()));
        let (ret, success) = match self.run_wheel(fun, args) {
            Ok(v) => (v, true),
            Err(msg) => (Value::from(msg), false),
        };
        let mut data = head;
        data.push(("return", ret));
        data.push(("success", Value::from(success)));
        let data = map(data);
        self.bus
            .fire(&format!("salt/wheel/{jid}/ret"), data.clone());
        if self.cfg.job_cache {
            let id = Value::from(self.cfg.id.as_str());
            let load = map(vec![
                ("id", id.clone()),
                ("tgt", id.clone()),
                ("jid", Value::from(jid)),
                ("fun", Value::from(format!("wheel.{fun}"))),
                ("arg", Value::Array(fun_args)),
                ("tgt_type", Value::from("list")),
                ("user", Value::from(user)),
            ]);
            if let Err(e) = self.store.save_load(jid, &load, &[]) {
                tracing::error!("wheel job {jid} not stored: {e}");
            }
            let ret = map(vec![
                ("id", id),
                ("jid", Value::from(jid)),
                ("fun", Value::from(format!("wheel.{fun}"))),
                ("return", data.clone()),
                ("success", Value::from(success)),
            ]);
            if let Err(e) = self.store.save_return(&ret) {
                tracing::error!("wheel job {jid}: return not stored: {e}");
            }
        }
        data
    }
}
