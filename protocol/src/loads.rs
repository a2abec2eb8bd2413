//! Salt's request and publish loads, typed.
//!
//! Each load is parsed once, where its bytes arrive, into a struct whose fields are the keys Salt
//! gives a meaning to; the keys it does not model are kept, in order, in `extra` (Salt tolerates
//! and forwards unknown keys, so must we). Each load is written back to msgpack in one place, its
//! `to_value`, in the key order Salt itself sends. `Value` stays only where Salt's data is
//! open-ended: function arguments, keyword arguments and returns.

use crate::payload::Value;

/// Why a load was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("{0} is not a map")]
    NotAMap(&'static str),
    #[error("{load} has no {field}")]
    Missing {
        load: &'static str,
        field: &'static str,
    },
    #[error("{load}: {field} is not {expected}")]
    WrongType {
        load: &'static str,
        field: &'static str,
        expected: &'static str,
    },
}

/// Map entries a load does not model, kept in their order.
pub type Extra = Vec<(Value, Value)>;

/// The text of a map key (Salt sends keys as str or, from older peers, as raw bytes).
fn key_text(k: &Value) -> Option<&str> {
    match k {
        Value::String(s) => s.as_str(),
        Value::Binary(b) => std::str::from_utf8(b).ok(),
        _ => None,
    }
}

/// The entries of a map load, taken out one by one; what is left is the load's `extra`.
struct Fields {
    load: &'static str,
    pairs: Vec<(Value, Value)>,
}

impl Fields {
    fn new(load: &'static str, v: Value) -> Result<Fields, LoadError> {
        match v {
            Value::Map(pairs) => Ok(Fields { load, pairs }),
            _ => Err(LoadError::NotAMap(load)),
        }
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        let idx = self
            .pairs
            .iter()
            .position(|(k, _)| key_text(k) == Some(key))?;
        Some(self.pairs.remove(idx).1)
    }

    fn wrong(&self, field: &'static str, expected: &'static str) -> LoadError {
        LoadError::WrongType {
            load: self.load,
            field,
            expected,
        }
    }

    fn missing(&self, field: &'static str) -> LoadError {
        LoadError::Missing {
            load: self.load,
            field,
        }
    }

    /// A string field; `None` when absent or nil.
    fn opt_str(&mut self, key: &'static str) -> Result<Option<String>, LoadError> {
        match self.take(key) {
            None | Some(Value::Nil) => Ok(None),
            Some(v) => text(v).map(Some).ok_or_else(|| self.wrong(key, "a string")),
        }
    }

    fn str_or(&mut self, key: &'static str, default: &str) -> Result<String, LoadError> {
        Ok(self.opt_str(key)?.unwrap_or_else(|| default.to_string()))
    }

    fn req_str(&mut self, key: &'static str) -> Result<String, LoadError> {
        self.opt_str(key)?.ok_or_else(|| self.missing(key))
    }

    /// A list field (absent or nil: empty).
    fn list(&mut self, key: &'static str) -> Result<Vec<Value>, LoadError> {
        match self.take(key) {
            None | Some(Value::Nil) => Ok(Vec::new()),
            Some(Value::Array(a)) => Ok(a),
            Some(_) => Err(self.wrong(key, "a list")),
        }
    }

    fn opt_int(&mut self, key: &'static str) -> Result<Option<i64>, LoadError> {
        match self.take(key) {
            None | Some(Value::Nil) => Ok(None),
            Some(v) => int(&v)
                .map(Some)
                .ok_or_else(|| self.wrong(key, "an integer")),
        }
    }

    fn dict(&mut self, key: &'static str) -> Result<Dict, LoadError> {
        match self.take(key) {
            None | Some(Value::Nil) => Ok(Dict::default()),
            Some(v) => Dict::from_value(v).ok_or_else(|| self.wrong(key, "a map")),
        }
    }

    fn done(self) -> Extra {
        self.pairs
    }
}

fn text(v: Value) -> Option<String> {
    match v {
        Value::String(s) => s.into_str(),
        Value::Binary(b) => String::from_utf8(b).ok(),
        _ => None,
    }
}

/// Python's `int()` of what Salt peers send as a number: an integer, a whole float or numeric text.
pub fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(i) => i.as_i64(),
        Value::F64(f) if f.fract() == 0.0 && f.is_finite() => Some(*f as i64),
        Value::String(s) => s.as_str()?.trim().parse().ok(),
        _ => None,
    }
}

/// Writes a load's entries in order, skipping the optional ones that are absent.
struct Writer(Vec<(Value, Value)>);

impl Writer {
    fn new() -> Writer {
        Writer(Vec::new())
    }
    fn put(&mut self, k: &str, v: impl Into<Value>) -> &mut Self {
        self.0.push((Value::from(k), v.into()));
        self
    }
    fn opt<T: Into<Value>>(&mut self, k: &str, v: Option<T>) -> &mut Self {
        if let Some(v) = v {
            self.put(k, v);
        }
        self
    }
    fn finish(mut self, extra: Extra) -> Value {
        self.0.extend(extra);
        Value::Map(self.0)
    }
}

// ---------------------------------------------------------------------------
// Shared field types

/// An ordered map with string keys: Salt's keyword arguments and other small dicts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dict(pub Vec<(String, Value)>);

impl Dict {
    /// A msgpack map whose keys are all text; `None` otherwise.
    pub fn from_value(v: Value) -> Option<Dict> {
        match v {
            Value::Map(pairs) => pairs
                .into_iter()
                .map(|(k, v)| text(k).map(|k| (k, v)))
                .collect::<Option<Vec<_>>>()
                .map(Dict),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    pub fn insert(&mut self, key: &str, v: Value) {
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = v,
            None => self.0.push((key.to_string(), v)),
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let idx = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(idx).1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn to_value(&self) -> Value {
        Value::Map(
            self.0
                .iter()
                .map(|(k, v)| (Value::from(k.as_str()), v.clone()))
                .collect(),
        )
    }
}

/// A job's target: one expression, or a list of ids (`tgt_type: list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tgt {
    Expr(String),
    List(Vec<String>),
}

/// A field that is one string or a list of strings (`tgt`, `fun`).
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn parse(f: &Fields, field: &'static str, v: Value) -> Result<OneOrMany, LoadError> {
        let parsed = match v {
            Value::Array(items) => items
                .into_iter()
                .map(text)
                .collect::<Option<Vec<_>>>()
                .map(OneOrMany::Many),
            other => text(other).map(OneOrMany::One),
        };
        parsed.ok_or_else(|| f.wrong(field, "a string or a list of strings"))
    }

    fn value(one: Option<&str>, many: &[String]) -> Value {
        match one {
            Some(s) => Value::from(s),
            None => Value::Array(many.iter().map(|s| Value::from(s.as_str())).collect()),
        }
    }
}

impl Tgt {
    fn parse(f: &Fields, v: Value) -> Result<Tgt, LoadError> {
        Ok(match OneOrMany::parse(f, "tgt", v)? {
            OneOrMany::One(s) => Tgt::Expr(s),
            OneOrMany::Many(l) => Tgt::List(l),
        })
    }

    pub fn to_value(&self) -> Value {
        match self {
            Tgt::Expr(s) => OneOrMany::value(Some(s), &[]),
            Tgt::List(l) => OneOrMany::value(None, l),
        }
    }
}

impl std::fmt::Display for Tgt {
    /// As Salt names a target in messages: a list joined with commas.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tgt::Expr(s) => f.write_str(s),
            Tgt::List(l) => f.write_str(&l.join(",")),
        }
    }
}

/// A job's function: one, or several (a compound job: `arg` then holds one list per function).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fun {
    One(String),
    Many(Vec<String>),
}

impl Fun {
    fn parse(f: &Fields, v: Value) -> Result<Fun, LoadError> {
        Ok(match OneOrMany::parse(f, "fun", v)? {
            OneOrMany::One(s) => Fun::One(s),
            OneOrMany::Many(l) => Fun::Many(l),
        })
    }

    pub fn to_value(&self) -> Value {
        match self {
            Fun::One(s) => OneOrMany::value(Some(s), &[]),
            Fun::Many(l) => OneOrMany::value(None, l),
        }
    }

    /// The function's name (a compound job's names joined with commas).
    pub fn name(&self) -> String {
        match self {
            Fun::One(s) => s.clone(),
            Fun::Many(l) => l.join(","),
        }
    }
}

// ---------------------------------------------------------------------------
// Envelopes and commands

/// How a request's load travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enc {
    Clear,
    Aes,
}

/// A request on the ret port: `{"enc", "load", "version", ...}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestEnvelope {
    pub enc: Enc,
    /// A map for `clear`; the ciphertext (bin or str) for `aes`.
    pub load: Value,
    /// Absent: 0 (Salt before 3006 sent no version).
    pub version: i64,
    /// `id` of an aes request (3006+ send it beside the load).
    pub id: Option<String>,
    pub extra: Extra,
}

impl RequestEnvelope {
    pub fn parse(v: Value) -> Result<RequestEnvelope, LoadError> {
        let mut f = Fields::new("payload", v)?;
        let enc = match f.opt_str("enc")?.as_deref() {
            Some("clear") => Enc::Clear,
            Some("aes") => Enc::Aes,
            Some(_) => return Err(f.wrong("enc", "clear or aes")),
            None => return Err(f.missing("enc")),
        };
        let load = f.take("load").ok_or_else(|| f.missing("load"))?;
        let version = f.opt_int("version")?.unwrap_or(0);
        let id = match f.take("id") {
            Some(v) => text(v),
            None => None,
        };
        Ok(RequestEnvelope {
            enc,
            load,
            version,
            id,
            extra: f.done(),
        })
    }

    pub fn to_value(&self) -> Value {
        let mut w = Writer::new();
        w.put(
            "enc",
            match self.enc {
                Enc::Clear => "clear",
                Enc::Aes => "aes",
            },
        )
        .put("load", self.load.clone())
        .put("version", self.version)
        .opt("id", self.id.as_deref());
        w.finish(self.extra.clone())
    }

    /// A clear request as local clients send it (version 3).
    pub fn clear(load: Value) -> RequestEnvelope {
        RequestEnvelope {
            enc: Enc::Clear,
            load,
            version: 3,
            id: None,
            extra: Vec::new(),
        }
    }
}

macro_rules! commands {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum $name {
            $($variant,)*
            /// A command Brine does not know, by its name.
            Other(String),
        }

        impl $name {
            pub fn parse(cmd: &str) -> $name {
                match cmd {
                    $($text => $name::$variant,)*
                    other => $name::Other(other.to_string()),
                }
            }

            /// The `cmd` of a decoded load (absent or not text: `Other("")`).
            pub fn of(load: &Value) -> $name {
                $name::parse(crate::payload::get_str(load, "cmd").unwrap_or(""))
            }

            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $text,)*
                    $name::Other(s) => s,
                }
            }
        }
    };
}

commands!(
    /// The `cmd` of a clear request.
    ClearCmd {
        Auth = "_auth",
        Publish = "publish",
        Ping = "ping",
        Runner = "runner",
        Wheel = "wheel",
    }
);

commands!(
    /// The `cmd` of an aes request from a minion.
    AesCmd {
        Return = "_return",
        MinionEvent = "_minion_event",
        Pillar = "_pillar",
        MasterOpts = "_master_opts",
        FileEnvs = "_file_envs",
        FileList = "_file_list",
        FileListEmptydirs = "_file_list_emptydirs",
        DirList = "_dir_list",
        SymlinkList = "_symlink_list",
        FileHash = "_file_hash",
        FileHashAndStat = "_file_hash_and_stat",
        FileFind = "_file_find",
        ServeFile = "_serve_file",
        MasterTops = "_master_tops",
        Mine = "_mine",
        MineGet = "_mine_get",
        MineDelete = "_mine_delete",
        MineFlush = "_mine_flush",
        FileRecv = "_file_recv",
    }
);

// ---------------------------------------------------------------------------
// file server requests: `_file_list`, `_serve_file`, `_file_hash`, ...

/// The arguments of a minion's file server request (every `_file_*`, `_dir_list`,
/// `_symlink_list` and `_serve_file` load). Absent keys stay `None`: Salt answers a request
/// without `path`, `saltenv` or `loc` with its empty answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileRequest {
    /// `path` (a `salt://` path without the scheme, possibly with `?saltenv=...`).
    pub path: Option<String>,
    /// `saltenv`, as Python's `str()` of what was sent (a number is accepted).
    pub saltenv: Option<String>,
    /// `prefix`, with the surrounding `/` stripped as Salt strips them.
    pub prefix: String,
    /// `loc`: the offset of the chunk asked for.
    pub loc: Option<i64>,
    /// `gzip`: the compression level asked for, when one is.
    pub gzip: Option<i64>,
}

impl FileRequest {
    pub fn parse(load: &Value) -> FileRequest {
        let text = |k: &str| match crate::payload::get(load, k) {
            Some(Value::String(s)) => s.as_str().map(str::to_string),
            Some(v @ Value::Integer(_)) => int(v).map(|i| i.to_string()),
            Some(Value::Binary(b)) => std::str::from_utf8(b).ok().map(str::to_string),
            _ => None,
        };
        FileRequest {
            path: text("path"),
            saltenv: text("saltenv"),
            prefix: text("prefix")
                .map(|p| p.trim_matches('/').to_string())
                .unwrap_or_default(),
            loc: crate::payload::get(load, "loc").and_then(int),
            gzip: crate::payload::get(load, "gzip")
                .and_then(int)
                .filter(|level| *level != 0),
        }
    }
}

// ---------------------------------------------------------------------------
// `_file_recv`: one chunk of a file a minion pushes (`cp.push`)

/// One chunk of `cp.push`: the file's path on the minion as a list of components, where the
/// chunk goes (`loc`) and its bytes. Salt answers `False` to anything else.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRecvLoad {
    pub path: Vec<String>,
    pub loc: i64,
    pub data: Vec<u8>,
}

impl FileRecvLoad {
    pub fn parse(load: &Value) -> Option<FileRecvLoad> {
        let Some(Value::Array(parts)) = crate::payload::get(load, "path") else {
            return None;
        };
        let path = parts
            .iter()
            .map(|p| match p {
                Value::String(s) => s.as_str().map(str::to_string),
                Value::Binary(b) => std::str::from_utf8(b).ok().map(str::to_string),
                _ => None,
            })
            .collect::<Option<Vec<String>>>()?;
        let loc = crate::payload::get(load, "loc").and_then(int)?;
        let data = match crate::payload::get(load, "data")? {
            Value::Binary(b) => b.clone(),
            Value::String(s) => s.as_bytes().to_vec(),
            _ => return None,
        };
        Some(FileRecvLoad { path, loc, data })
    }
}

// ---------------------------------------------------------------------------
// `_pillar`: a minion asks for its compiled pillar

/// A minion's `_pillar` request (`RemotePillar.compile_pillar`): its grains and the
/// environments it asks for. Salt answers `False` to a load without `id` or `grains`.
#[derive(Debug, Clone, PartialEq)]
pub struct PillarLoad {
    /// The minion's grains (a map).
    pub grains: Value,
    /// `saltenv` (older minions send `env`).
    pub saltenv: Option<String>,
    /// `pillarenv`.
    pub pillarenv: Option<String>,
    /// `pillar_override`: pillar the caller passed on the command line (`pillar=...`).
    pub pillar_override: Dict,
    /// `clean_cache`: drop the master's pillar cache of this minion first.
    pub clean_cache: bool,
    pub extra: Extra,
}

impl PillarLoad {
    pub fn parse(v: Value) -> Result<PillarLoad, LoadError> {
        let mut f = Fields::new("_pillar load", v)?;
        let grains = match f.take("grains") {
            Some(g @ Value::Map(_)) => g,
            Some(_) => return Err(f.wrong("grains", "a map")),
            None => return Err(f.missing("grains")),
        };
        let saltenv = match f.opt_str("saltenv")? {
            Some(env) => Some(env),
            None => f.opt_str("env")?,
        };
        let pillarenv = f.opt_str("pillarenv")?;
        // Salt logs and ignores a pillar_override that is not a map.
        let pillar_override = match f.take("pillar_override") {
            Some(v) => Dict::from_value(v).unwrap_or_default(),
            None => Dict::default(),
        };
        let clean_cache = matches!(f.take("clean_cache"), Some(Value::Boolean(true)));
        Ok(PillarLoad {
            grains,
            saltenv,
            pillarenv,
            pillar_override,
            clean_cache,
            extra: f.done(),
        })
    }
}

// ---------------------------------------------------------------------------
// publish: a local client asks the master to run a job

/// A clear `publish` request from a local client (`salt`, salt-api's `local*`, runners).
#[derive(Debug, Clone, PartialEq)]
pub struct PublishRequest {
    pub tgt: Tgt,
    pub fun: Fun,
    pub arg: Vec<Value>,
    pub tgt_type: String,
    pub ret: String,
    /// Empty: the master allocates one.
    pub jid: String,
    /// The caller's root key (local tools); absent from eauth requests.
    pub key: Option<String>,
    pub kwargs: Dict,
    pub user: Option<String>,
    /// The caller's timeout, forwarded to the minions.
    pub to: Option<i64>,
    pub extra: Extra,
}

impl PublishRequest {
    /// A request for `fun`, without arguments, to the same target as the same caller (the
    /// probes a batch or a subset sends first: `test.ping`, `sys.list_functions`).
    pub fn probe(&self, fun: &str) -> PublishRequest {
        let mut probe = PublishRequest::new(
            self.tgt.clone(),
            Fun::One(fun.to_string()),
            Vec::new(),
            &self.tgt_type,
        );
        probe.user = self.user.clone();
        probe.key = self.key.clone();
        probe.kwargs = self.kwargs.clone();
        probe
    }

    pub fn new(tgt: Tgt, fun: Fun, arg: Vec<Value>, tgt_type: &str) -> PublishRequest {
        PublishRequest {
            tgt,
            fun,
            arg,
            tgt_type: tgt_type.to_string(),
            ret: String::new(),
            jid: String::new(),
            key: None,
            kwargs: Dict::default(),
            user: None,
            to: None,
            extra: Vec::new(),
        }
    }

    pub fn parse(v: Value) -> Result<PublishRequest, LoadError> {
        let mut f = Fields::new("publish load", v)?;
        // `cmd` is what routed the load here.
        f.take("cmd");
        let tgt = match f.take("tgt") {
            Some(v) => Tgt::parse(&f, v)?,
            None => return Err(f.missing("tgt")),
        };
        let fun = match f.take("fun") {
            Some(v) => Fun::parse(&f, v)?,
            None => return Err(f.missing("fun")),
        };
        Ok(PublishRequest {
            tgt,
            fun,
            arg: f.list("arg")?,
            tgt_type: f.str_or("tgt_type", "glob")?,
            ret: ret_text(&mut f)?,
            jid: f.str_or("jid", "")?,
            key: f.opt_str("key")?,
            kwargs: f.dict("kwargs")?,
            user: f.opt_str("user")?,
            to: f.opt_int("to")?,
            extra: f.done(),
        })
    }

    /// The request as the salt CLI sends it (key order of `LocalClient.pub`).
    pub fn to_value(&self) -> Value {
        let mut w = Writer::new();
        w.put("cmd", "publish")
            .put("tgt", self.tgt.to_value())
            .put("fun", self.fun.to_value())
            .put("arg", Value::Array(self.arg.clone()))
            .opt("key", self.key.as_deref())
            .put("tgt_type", self.tgt_type.as_str())
            .put("ret", self.ret.as_str())
            .put("jid", self.jid.as_str());
        if !self.kwargs.is_empty() {
            w.put("kwargs", self.kwargs.to_value());
        }
        w.opt("user", self.user.as_deref()).opt("to", self.to);
        w.finish(self.extra.clone())
    }
}

/// `ret` is a returner name, a comma-separated list, or (from some clients) a list of names.
fn ret_text(f: &mut Fields) -> Result<String, LoadError> {
    match f.take("ret") {
        None | Some(Value::Nil) => Ok(String::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(text)
            .collect::<Option<Vec<_>>>()
            .map(|l| l.join(","))
            .ok_or_else(|| f.wrong("ret", "a string")),
        Some(v) => text(v).ok_or_else(|| f.wrong("ret", "a string")),
    }
}

/// The master's answer to a `publish`: `{"enc": "clear", "load": {"jid", "minions", "missing"}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishReply {
    pub jid: String,
    pub minions: Vec<String>,
    pub missing: Vec<String>,
}

fn strings(v: Option<Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => a.into_iter().filter_map(text).collect(),
        _ => Vec::new(),
    }
}

impl PublishReply {
    pub fn to_value(&self) -> Value {
        let list = |l: &[String]| Value::Array(l.iter().map(|s| Value::from(s.as_str())).collect());
        let mut w = Writer::new();
        w.put("jid", self.jid.as_str())
            .put("minions", list(&self.minions))
            .put("missing", list(&self.missing));
        let load = w.finish(Vec::new());
        let mut env = Writer::new();
        env.put("enc", "clear").put("load", load);
        env.finish(Vec::new())
    }

    /// Read the master's answer: a job, or the error the master gave instead.
    pub fn parse(v: Value) -> Result<PublishReply, PublishRefused> {
        let load = match v {
            Value::Map(_) => match crate::payload::get(&v, "load") {
                Some(l) => l.clone(),
                None => v,
            },
            // Salt's master answers an empty string when the publish could not be done.
            _ => return Err(PublishRefused::NoJob(String::new())),
        };
        if let Some(err) = crate::payload::get(&load, "error") {
            return Err(match err {
                Value::Map(_) => PublishRefused::Error {
                    name: crate::payload::get_str(err, "name")
                        .unwrap_or("")
                        .to_string(),
                    message: crate::payload::get_str(err, "message")
                        .unwrap_or("")
                        .to_string(),
                },
                other => PublishRefused::NoJob(match other {
                    Value::String(s) => s.as_str().unwrap_or("").to_string(),
                    o => o.to_string(),
                }),
            });
        }
        let mut f =
            Fields::new("publish reply", load).map_err(|_| PublishRefused::NoJob(String::new()))?;
        let jid = match f.take("jid") {
            Some(v) => text(v).unwrap_or_default(),
            None => String::new(),
        };
        if jid.is_empty() {
            return Err(PublishRefused::NoJob(String::new()));
        }
        Ok(PublishReply {
            jid,
            minions: strings(f.take("minions")),
            missing: strings(f.take("missing")),
        })
    }
}

/// Why the master published nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishRefused {
    /// `{"error": {"name", "message"}}`: authentication, authorization, a bad jid.
    #[error("{name}: {message}")]
    Error { name: String, message: String },
    /// No job: no minion matched (the text is the master's, when it gave one).
    #[error("{0}")]
    NoJob(String),
}

/// The load minions receive on the publish port (before `serial` and encryption).
#[derive(Debug, Clone, PartialEq)]
pub struct PublishLoad {
    pub fun: Fun,
    pub arg: Vec<Value>,
    pub tgt: Tgt,
    pub jid: String,
    pub ret: String,
    pub tgt_type: String,
    pub user: Option<String>,
    /// A grain/pillar delimiter other than `:`.
    pub delimiter: Option<String>,
    pub master_id: Option<String>,
    pub to: Option<i64>,
    /// Entries copied from the request's kwargs (`id`, `ret_config`, `metadata`, ...).
    pub kw: Dict,
    pub serial: Option<i64>,
    pub extra: Extra,
}

/// The request kwargs Salt copies into the publish load, in its order.
const PUBLISHED_KWARGS: [&str; 6] = [
    "id",
    "ret_config",
    "metadata",
    "module_executors",
    "executor_opts",
    "ret_kwargs",
];

impl PublishLoad {
    /// What the master publishes for a request it accepted (`jid` allocated).
    pub fn from_request(req: &PublishRequest, jid: &str) -> PublishLoad {
        let mut kw = Dict::default();
        for k in PUBLISHED_KWARGS {
            if let Some(v) = req.kwargs.get(k) {
                kw.insert(k, v.clone());
            }
        }
        let master_id = req
            .extra
            .iter()
            .find(|(k, _)| key_text(k) == Some("master_id"))
            .and_then(|(_, v)| v.as_str().map(str::to_string));
        PublishLoad {
            fun: req.fun.clone(),
            arg: req.arg.clone(),
            tgt: req.tgt.clone(),
            jid: jid.to_string(),
            ret: req.ret.clone(),
            tgt_type: req.tgt_type.clone(),
            user: req.user.clone(),
            delimiter: req
                .kwargs
                .get_str("delimiter")
                .filter(|d| *d != ":")
                .map(str::to_string),
            master_id,
            to: req.to,
            kw,
            serial: None,
            extra: Vec::new(),
        }
    }

    pub fn parse(v: Value) -> Result<PublishLoad, LoadError> {
        let mut f = Fields::new("publish load", v)?;
        let fun = match f.take("fun") {
            Some(v) => Fun::parse(&f, v)?,
            None => return Err(f.missing("fun")),
        };
        let arg = match f.take("arg") {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(f.wrong("arg", "a list")),
            None => return Err(f.missing("arg")),
        };
        let tgt = match f.take("tgt") {
            Some(v) => Tgt::parse(&f, v)?,
            None => return Err(f.missing("tgt")),
        };
        let jid = f.req_str("jid")?;
        let ret = ret_text(&mut f)?;
        let tgt_type = f.str_or("tgt_type", "glob")?;
        let user = f.opt_str("user")?;
        let delimiter = f.opt_str("delimiter")?;
        let master_id = f.opt_str("master_id")?;
        let to = f.opt_int("to")?;
        let mut kw = Dict::default();
        for k in PUBLISHED_KWARGS {
            if let Some(v) = f.take(k) {
                kw.insert(k, v);
            }
        }
        let serial = f.opt_int("serial")?;
        Ok(PublishLoad {
            fun,
            arg,
            tgt,
            jid,
            ret,
            tgt_type,
            user,
            delimiter,
            master_id,
            to,
            kw,
            serial,
            extra: f.done(),
        })
    }

    /// Salt's key order: `fun, arg, tgt, jid, ret, tgt_type, user`, then the optional keys.
    pub fn to_value(&self) -> Value {
        let mut w = Writer::new();
        w.put("fun", self.fun.to_value())
            .put("arg", Value::Array(self.arg.clone()))
            .put("tgt", self.tgt.to_value())
            .put("jid", self.jid.as_str())
            .put("ret", self.ret.as_str())
            .put("tgt_type", self.tgt_type.as_str())
            .put("user", self.user.as_deref().map_or(Value::Nil, Value::from))
            .opt("delimiter", self.delimiter.as_deref())
            .opt("master_id", self.master_id.as_deref())
            .opt("to", self.to);
        for (k, v) in &self.kw.0 {
            w.put(k, v.clone());
        }
        w.opt("serial", self.serial);
        w.finish(self.extra.clone())
    }
}

// ---------------------------------------------------------------------------
// _return: a minion's result

/// A minion's `_return` (and a `salt-call` or scheduled job's).
#[derive(Debug, Clone, PartialEq)]
pub struct ReturnLoad {
    pub id: String,
    /// A real jid, `req` (the master allocates one) or `nocache` (announce, do not store).
    pub jid: String,
    pub fun: Fun,
    pub fun_args: Vec<Value>,
    /// The function's return (any value; a map per function for a compound job).
    pub ret: Value,
    /// An integer, or a map per function for a compound job.
    pub retcode: Option<Value>,
    /// A bool, or a map per function for a compound job.
    pub success: Option<Value>,
    pub user: Option<String>,
    pub out: Option<String>,
    pub stamp: Option<String>,
    pub extra: Extra,
}

impl ReturnLoad {
    /// A return of `fun` called with `fun_args` for job `jid`; the result fields are filled in
    /// by the caller.
    pub fn new(id: &str, jid: &str, fun: Fun, fun_args: Vec<Value>) -> ReturnLoad {
        ReturnLoad {
            id: id.to_string(),
            jid: jid.to_string(),
            fun,
            fun_args,
            ret: Value::Nil,
            retcode: None,
            success: None,
            user: None,
            out: None,
            stamp: None,
            extra: Vec::new(),
        }
    }

    pub fn parse(v: Value) -> Result<ReturnLoad, LoadError> {
        let mut f = Fields::new("_return load", v)?;
        f.take("cmd");
        let id = f.req_str("id")?;
        let jid = f.req_str("jid")?;
        let ret = f.take("return").ok_or_else(|| f.missing("return"))?;
        let fun = match f.take("fun") {
            Some(v) => Fun::parse(&f, v)?,
            None => Fun::One(String::new()),
        };
        Ok(ReturnLoad {
            id,
            jid,
            fun,
            ret,
            fun_args: f.list("fun_args")?,
            retcode: f.take("retcode"),
            success: f.take("success"),
            user: f.opt_str("user")?,
            out: f.opt_str("out")?,
            stamp: f.opt_str("_stamp")?,
            extra: f.done(),
        })
    }

    /// Salt's minion key order: `cmd, id, success, return, retcode, jid, fun, fun_args, ...`.
    pub fn to_value(&self) -> Value {
        self.write()
    }

    /// The load without `_stamp` (the bus stamps its events itself): what Salt's master fires
    /// as `salt/job/<jid>/ret/<id>` and stores, `cmd` included.
    pub fn event_data(&self) -> Value {
        let mut me = self.clone();
        me.stamp = None;
        me.write()
    }

    fn write(&self) -> Value {
        let mut w = Writer::new();
        w.put("cmd", "_return");
        w.put("id", self.id.as_str())
            .opt("success", self.success.clone())
            .put("return", self.ret.clone())
            .opt("retcode", self.retcode.clone())
            .put("jid", self.jid.as_str())
            .put("fun", self.fun.to_value())
            .put("fun_args", Value::Array(self.fun_args.clone()))
            .opt("user", self.user.as_deref())
            .opt("out", self.out.as_deref())
            .opt("_stamp", self.stamp.as_deref());
        w.finish(self.extra.clone())
    }
}

// ---------------------------------------------------------------------------
// _minion_event: events a minion fires on the master's bus

/// A minion's `_minion_event`: one event (the whole load is its data) or a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct MinionEventLoad {
    pub id: String,
    pub events: MinionEvents,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MinionEvents {
    /// `{"tag": ..., ...}`: Salt fires the load itself (without `cmd`, `tok`, `nonce`, `_stamp`).
    Single { tag: String, data: Value },
    /// `{"events": [{"tag", "data"}, ...], "pretag": ...}`.
    Batch {
        events: Vec<(String, Value)>,
        pretag: Option<String>,
    },
}

impl MinionEventLoad {
    /// One event as a minion fires it: `{"cmd", "id", "pretag", "data", "tag"}`.
    pub fn single(id: &str, tag: &str, data: Value) -> MinionEventLoad {
        MinionEventLoad {
            id: id.to_string(),
            events: MinionEvents::Single {
                tag: tag.to_string(),
                data: Value::Map(vec![
                    (Value::from("id"), Value::from(id)),
                    (Value::from("pretag"), Value::Nil),
                    (Value::from("data"), data),
                    (Value::from("tag"), Value::from(tag)),
                ]),
            },
        }
    }

    pub fn parse(v: Value) -> Result<MinionEventLoad, LoadError> {
        let mut f = Fields::new("_minion_event load", v)?;
        let id = match f.pairs.iter().find(|(k, _)| key_text(k) == Some("id")) {
            Some((_, v)) => text(v.clone()).ok_or_else(|| f.wrong("id", "a string"))?,
            None => String::new(),
        };
        if let Some(events) = f.take("events") {
            let Value::Array(items) = events else {
                return Err(f.wrong("events", "a list"));
            };
            let pretag = f.opt_str("pretag")?;
            let events = items
                .into_iter()
                .filter_map(|ev| {
                    let tag = crate::payload::get_str(&ev, "tag")?.to_string();
                    let data = crate::payload::get(&ev, "data")
                        .cloned()
                        .unwrap_or(Value::Map(vec![]));
                    Some((tag, data))
                })
                .collect();
            return Ok(MinionEventLoad {
                id,
                events: MinionEvents::Batch { events, pretag },
            });
        }
        let tag = match f.pairs.iter().find(|(k, _)| key_text(k) == Some("tag")) {
            Some((_, v)) => text(v.clone()).ok_or_else(|| f.wrong("tag", "a string"))?,
            None => return Err(f.missing("tag")),
        };
        // Salt fires the load itself as the event's data, `cmd` included.
        for k in ["_stamp", "tok", "nonce"] {
            f.take(k);
        }
        Ok(MinionEventLoad {
            id,
            events: MinionEvents::Single {
                tag,
                data: Value::Map(f.done()),
            },
        })
    }

    /// The (tag, data) pairs to fire, pretagged copies included.
    pub fn fired(&self) -> Vec<(String, Value)> {
        match &self.events {
            MinionEvents::Single { tag, data } => vec![(tag.clone(), data.clone())],
            MinionEvents::Batch { events, pretag } => {
                let mut out = Vec::with_capacity(events.len());
                for (tag, data) in events {
                    out.push((tag.clone(), data.clone()));
                    if let Some(p) = pretag {
                        out.push((format!("{p}/{tag}"), data.clone()));
                    }
                }
                out
            }
        }
    }

    pub fn to_value(&self) -> Value {
        match &self.events {
            MinionEvents::Single { data, .. } => {
                let w = Writer::new();
                let mut rest = match data {
                    Value::Map(pairs) => pairs.clone(),
                    _ => Vec::new(),
                };
                rest.retain(|(k, _)| key_text(k) != Some("cmd"));
                // Salt's minion sends `id` first, then `cmd`, then the rest.
                let at = rest
                    .iter()
                    .position(|(k, _)| key_text(k) == Some("id"))
                    .map_or(0, |i| i + 1);
                rest.insert(at, (Value::from("cmd"), Value::from("_minion_event")));
                w.finish(rest)
            }
            MinionEvents::Batch { events, pretag } => {
                let list = events
                    .iter()
                    .map(|(t, d)| {
                        Value::Map(vec![
                            (Value::from("tag"), Value::from(t.as_str())),
                            (Value::from("data"), d.clone()),
                        ])
                    })
                    .collect();
                let mut w = Writer::new();
                w.put("cmd", "_minion_event")
                    .put("id", self.id.as_str())
                    .put("events", Value::Array(list))
                    .opt("pretag", pretag.as_deref());
                w.finish(Vec::new())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{get, get_str, map};

    fn observed_cli_publish() -> Value {
        map(vec![
            ("cmd", Value::from("publish")),
            ("tgt", Value::from("*")),
            ("fun", Value::from("test.ping")),
            ("arg", Value::Array(vec![])),
            ("key", Value::from("K")),
            ("tgt_type", Value::from("glob")),
            ("ret", Value::from("")),
            ("jid", Value::from("")),
            (
                "kwargs",
                map(vec![
                    ("show_timeout", Value::from(true)),
                    ("show_jid", Value::from(false)),
                    ("delimiter", Value::from(":")),
                ]),
            ),
            ("user", Value::from("root")),
        ])
    }

    #[test]
    fn a_cli_publish_round_trips_in_salts_key_order() {
        let v = observed_cli_publish();
        let req = PublishRequest::parse(v.clone()).unwrap();
        assert_eq!(req.tgt, Tgt::Expr("*".into()));
        assert_eq!(req.fun, Fun::One("test.ping".into()));
        assert_eq!(req.key.as_deref(), Some("K"));
        assert!(req.extra.is_empty());
        assert_eq!(req.to_value(), v);
    }

    #[test]
    fn the_published_load_is_salts() {
        let req = PublishRequest::parse(observed_cli_publish()).unwrap();
        let load = PublishLoad::from_request(&req, "20261122101715645321");
        let v = load.to_value();
        let keys: Vec<&str> = match &v {
            Value::Map(p) => p.iter().filter_map(|(k, _)| k.as_str()).collect(),
            _ => panic!(),
        };
        assert_eq!(
            keys,
            ["fun", "arg", "tgt", "jid", "ret", "tgt_type", "user"]
        );
        assert_eq!(PublishLoad::parse(v.clone()).unwrap().to_value(), v);
    }

    #[test]
    fn unknown_keys_are_kept_and_wrong_types_named() {
        let mut v = observed_cli_publish();
        crate::payload::set(&mut v, "future_key", Value::from(7));
        let req = PublishRequest::parse(v).unwrap();
        assert_eq!(req.extra, vec![(Value::from("future_key"), Value::from(7))]);
        let mut bad = observed_cli_publish();
        crate::payload::set(&mut bad, "arg", Value::from("x"));
        assert_eq!(
            PublishRequest::parse(bad).unwrap_err().to_string(),
            "publish load: arg is not a list"
        );
        assert_eq!(
            PublishRequest::parse(Value::from(1)).unwrap_err(),
            LoadError::NotAMap("publish load")
        );
    }

    #[test]
    fn a_minion_return_parses_and_fires_without_its_stamp() {
        let v = map(vec![
            ("cmd", Value::from("_return")),
            ("id", Value::from("m1")),
            ("success", Value::from(true)),
            ("return", Value::from(true)),
            ("retcode", Value::from(0)),
            ("jid", Value::from("20261122101715645321")),
            ("fun", Value::from("test.ping")),
            ("fun_args", Value::Array(vec![])),
            ("user", Value::from("root")),
            ("_stamp", Value::from("2026-11-22T10:17:15.725014")),
            ("ts", Value::from(1795342635)),
        ]);
        let r = ReturnLoad::parse(v.clone()).unwrap();
        assert_eq!(r.to_value(), v);
        let ev = r.event_data();
        assert!(get(&ev, "_stamp").is_none());
        assert_eq!(get_str(&ev, "cmd"), Some("_return"));
        assert_eq!(get_str(&ev, "id"), Some("m1"));
        assert_eq!(get(&ev, "ts"), Some(&Value::from(1795342635)));
        let no_return = map(vec![("id", Value::from("m1")), ("jid", Value::from("1"))]);
        assert_eq!(
            ReturnLoad::parse(no_return).unwrap_err().to_string(),
            "_return load has no return"
        );
    }

    #[test]
    fn minion_events_single_and_batch() {
        let single = map(vec![
            ("cmd", Value::from("_minion_event")),
            ("id", Value::from("m1")),
            ("tag", Value::from("custom/x")),
            ("data", Value::from("d")),
            ("tok", Value::Binary(vec![1])),
        ]);
        let ev = MinionEventLoad::parse(single).unwrap();
        let fired = ev.fired();
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].0, "custom/x");
        assert!(get(&fired[0].1, "tok").is_none());
        assert_eq!(get_str(&fired[0].1, "data"), Some("d"));
        let batch = map(vec![
            ("id", Value::from("m1")),
            ("pretag", Value::from("p")),
            (
                "events",
                Value::Array(vec![map(vec![
                    ("tag", Value::from("a")),
                    ("data", Value::from(1)),
                ])]),
            ),
        ]);
        let tags: Vec<String> = MinionEventLoad::parse(batch)
            .unwrap()
            .fired()
            .into_iter()
            .map(|(t, _)| t)
            .collect();
        assert_eq!(tags, ["a", "p/a"]);
    }

    #[test]
    fn commands_by_name() {
        assert_eq!(ClearCmd::parse("publish"), ClearCmd::Publish);
        assert_eq!(AesCmd::parse("_mine_get"), AesCmd::MineGet);
        assert_eq!(AesCmd::parse("_nope"), AesCmd::Other("_nope".into()));
        assert_eq!(AesCmd::MinionEvent.as_str(), "_minion_event");
    }

    #[test]
    fn publish_replies() {
        let ok = PublishReply {
            jid: "1".into(),
            minions: vec!["m1".into()],
            missing: vec![],
        };
        assert_eq!(PublishReply::parse(ok.to_value()).unwrap(), ok);
        let err = map(vec![(
            "error",
            map(vec![
                ("name", Value::from("AuthenticationError")),
                ("message", Value::from("Authentication error occurred.")),
            ]),
        )]);
        assert!(matches!(
            PublishReply::parse(err),
            Err(PublishRefused::Error { .. })
        ));
        assert_eq!(
            PublishReply::parse(Value::from("")),
            Err(PublishRefused::NoJob(String::new()))
        );
    }
}
