//! State modules: each file is one Salt state module (`test`, `cmd`, `file`), its functions
//! listed in a `FUNCTIONS` table; registering a module is one line in [`MODULES`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::low::Low;

pub mod alternatives;
pub mod archive;
pub mod checks;
pub mod cmd;
pub mod cron;
pub mod file;
pub mod git;
pub mod grains;
pub mod group;
pub mod host;
pub mod ini;
pub mod locale;
pub mod module;
pub mod mount;
pub mod pkg;
pub mod pkgrepo;
pub mod salt;
pub mod service;
pub(crate) mod source_hash;
pub mod ssh_auth;
pub mod ssh_known_hosts;
pub mod sysctl;
pub mod test;
pub mod timezone;
pub mod user;

/// What a state run acts through: execution functions, the file server, the templates.
/// States run with `parallel: True` call it from their own threads at the same time as the
/// rest of the run, hence `Sync`.
pub trait Host: Sync {
    /// An execution function (`cmd.run_all`, `cmd.retcode`, ...) with positional and keyword
    /// arguments; its error text when it fails.
    fn call(&self, fun: &str, args: &[Value], kwargs: &Map<String, Value>)
        -> Result<Value, String>;
    /// The minion's grains.
    fn grains(&self) -> &Value;
    /// The minion's pillar.
    fn pillar(&self) -> &Value;
    /// The bytes of a state's `source` (`salt://path`, `/abs/path`, `file:///path`) in
    /// `saltenv`; `None` when there is no such file.
    fn fetch(&self, source: &str, saltenv: &str) -> Result<Option<Vec<u8>>, String>;
    /// A Jinja template rendered with the minion's context and `vars` (a state's
    /// `defaults` and `context`).
    fn render_template(
        &self,
        text: &str,
        source: &str,
        saltenv: &str,
        vars: Map<String, Value>,
    ) -> Result<String, String>;
    /// The minion's cache directory (backups, cached files).
    fn cachedir(&self) -> PathBuf;
    /// The parameters of an execution function (`module.run` binds arguments to them);
    /// `None` when the minion has no such function.
    fn params(&self, fun: &str) -> Option<Params>;
    /// What the file server holds in `saltenv` under `prefix` (Salt's `cp.list_master`,
    /// `cp.list_master_dirs` and `cp.list_master_symlinks`), filtered as
    /// [`MasterList::under`] filters.
    fn list_master(&self, saltenv: &str, prefix: &str) -> Result<MasterList, String>;
    /// Fire `tag` with `data` on the master's event bus for job `jid` (Salt's
    /// `event.fire_master` with the jid preloaded); a failure is only logged.
    fn fire_event(&self, tag: &str, data: Value, jid: &str);
    /// A watch on the master's event bus from now on (Salt's `get_event(listen=True)`):
    /// only the master has one.
    fn watch_events(&self) -> Option<Box<dyn EventWatch + '_>> {
        None
    }
    /// The jid of the orchestration this run is (Salt's `__orchestration_jid__`): only the
    /// master's orchestrate runners have one.
    fn orchestration_jid(&self) -> Option<String> {
        None
    }
    /// The minion's options for http(s) sources (`ca_bundle`, `http_connect_timeout`,
    /// `http_request_timeout`, `http_max_body`); Salt's defaults unless the host has options.
    fn http_options(&self) -> crate::url::HttpOptions {
        crate::url::HttpOptions::default()
    }
    /// A `salt://` file copied into the cache directory as Salt's `cp.cache_file` copies it
    /// (`<cachedir>/files/<saltenv>/<path>`): the copy's path, `None` when the file server
    /// has no such file.
    fn cache_file(&self, source: &str, saltenv: &str) -> Result<Option<PathBuf>, String> {
        let (rel, env) = crate::url::split_salt_url(source, saltenv);
        if rel.split('/').any(|part| part == "..") {
            return Err(format!("Invalid path {rel:?}"));
        }
        let Some(bytes) = self.fetch(source, saltenv)? else {
            return Ok(None);
        };
        let dest = self
            .cachedir()
            .join("files")
            .join(env)
            .join(rel.trim_start_matches('/'));
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::write(&dest, bytes).map_err(|e| e.to_string())?;
        Ok(Some(dest))
    }
    /// An `http://` or `https://` URL fetched into the cache directory as Salt's
    /// `cp.cache_file` fetches it ([`crate::url::cache_url`]): the cached file's path, or
    /// Salt's error text.
    fn cache_url(
        &self,
        url: &str,
        saltenv: &str,
        fetch: &crate::url::Fetch,
    ) -> Result<PathBuf, String> {
        crate::url::cache_url(&self.http_options(), &self.cachedir(), url, saltenv, fetch)
    }
    /// Whether an `http://` or `https://` URL answers a HEAD with success (how a `source`
    /// list picks its first URL that exists).
    fn url_exists(&self, url: &str) -> bool {
        crate::url::head_ok(&self.http_options(), url)
    }
}

/// Events seen on a bus since the watch began.
pub trait EventWatch {
    /// The next event (its tag and data) within `wait`; `None` when none came.
    fn next(&mut self, wait: std::time::Duration) -> Option<(String, Value)>;
}

/// An execution function's parameters, as Python's argspec gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Every named parameter, in order.
    pub args: Vec<String>,
    /// How many of them come first without a default.
    pub required: usize,
    /// Takes `*args`.
    pub varargs: bool,
    /// Takes `**kwargs`.
    pub keywords: bool,
}

/// The paths of a saltenv on the file server, relative to its roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MasterList {
    /// Files (symlinks to files among them), sorted.
    pub files: Vec<String>,
    /// Directories (symlinks to directories among them), sorted.
    pub dirs: Vec<String>,
    /// Symlinks: path → the link's text.
    pub links: BTreeMap<String, String>,
}

impl MasterList {
    /// Only the paths that start with `prefix` once its surrounding `/` are stripped: Salt's
    /// file server compares strings, so `a/` also takes `ab/c`.
    pub fn under(mut self, prefix: &str) -> MasterList {
        let prefix = prefix.trim_matches('/');
        self.files.retain(|f| f.starts_with(prefix));
        self.dirs.retain(|d| d.starts_with(prefix));
        self.links.retain(|l, _| l.starts_with(prefix));
        self
    }
}

/// A source on this machine's disk (`/abs/path` or `file:///abs/path`): its bytes, `None`
/// when there is no such file.
///
/// Sources over the network are not read here: `http://` and `https://` are fetched into the
/// cache by [`Host::cache_url`], and `ftp://`, `s3://` and `swift://` are refused by name
/// ([`crate::url::refused`]).
pub fn read_local(source: &str) -> Result<Option<Vec<u8>>, String> {
    if crate::url::remote_scheme(source).is_some() {
        return Err(crate::url::refused(source));
    }
    let path = source.strip_prefix("file://").unwrap_or(source);
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The text `file.accumulated` states gathered during a run (Salt's accumulators, which live
/// as long as the run): by file, each accumulator's chunks and the states it was declared
/// for (`require_in`/`watch_in`), in the order they came.
#[derive(Debug, Default)]
pub struct Accumulators(std::sync::Mutex<AccumulatorData>);

/// The accumulators of the files: file → accumulator → chunks, and file → accumulator → the
/// names its requisites give.
#[derive(Debug, Default, Clone)]
pub struct AccumulatorData {
    pub text: Map<String, Value>,
    pub deps: Map<String, Value>,
}

impl Accumulators {
    /// The accumulators gathered so far.
    pub fn get(&self) -> AccumulatorData {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Adds `chunks` not there yet to accumulator `name` of `file`, and `deps` to the names
    /// it was declared for; whether a chunk was added.
    pub fn charge(&self, file: &str, name: &str, deps: Vec<Value>, chunks: Vec<Value>) -> bool {
        let mut data = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = |m: &mut Map<String, Value>| -> Vec<Value> {
            let accs = m
                .entry(file.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            let list = accs.as_object_mut().map(|a| {
                a.entry(name.to_string())
                    .or_insert_with(|| Value::Array(Vec::new()))
            });
            list.and_then(|l| l.as_array().cloned()).unwrap_or_default()
        };
        let put = |m: &mut Map<String, Value>, list: Vec<Value>| {
            if let Some(accs) = m.get_mut(file).and_then(Value::as_object_mut) {
                accs.insert(name.to_string(), Value::Array(list));
            }
        };
        let mut known = entry(&mut data.deps);
        known.extend(deps);
        put(&mut data.deps, known);
        let mut list = entry(&mut data.text);
        let mut added = false;
        for chunk in chunks {
            if !list.contains(&chunk) {
                list.push(chunk);
                added = true;
            }
        }
        put(&mut data.text, list);
        added
    }
}

/// One state function being called.
pub struct Call<'a> {
    /// The chunk: `name` and the function's arguments.
    pub low: &'a Low,
    /// `test=True` (or a `prereq` check).
    pub test: bool,
    pub host: &'a dyn Host,
    /// The results so far (for `mod_watch`).
    pub running: &'a Map<String, Value>,
    pub saltenv: &'a str,
    /// The run's file accumulators.
    pub accumulators: &'a Accumulators,
}

impl<'a> Call<'a> {
    /// The same call for another chunk (a state function calling another one, Salt's
    /// `__states__`).
    pub fn with_low<'b>(&'b self, low: &'b Low) -> Call<'b>
    where
        'a: 'b,
    {
        Call {
            low,
            test: self.test,
            host: self.host,
            running: self.running,
            saltenv: self.saltenv,
            accumulators: self.accumulators,
        }
    }

    /// An argument of the state, `None` when absent or null.
    pub fn arg(&self, key: &str) -> Option<&Value> {
        self.low.get(key).filter(|v| !v.is_null())
    }

    /// An argument as text (Python's `str()`).
    pub fn text(&self, key: &str) -> Option<String> {
        self.arg(key).map(crate::verify::py_text)
    }

    /// A boolean argument with Salt's truthiness.
    pub fn flag(&self, key: &str, default: bool) -> bool {
        self.arg(key)
            .map_or(default, brine_protocol::payload::json_truthy)
    }

    /// The state's own arguments: the chunk without the engine's keys.
    pub fn state_kwargs(&self) -> Vec<(&String, &Value)> {
        self.low
            .iter()
            .filter(|(k, _)| !crate::low::is_internal(k))
            .collect()
    }

    /// `name` as text.
    pub fn name(&self) -> String {
        self.text("name").unwrap_or_default()
    }
}

/// Python's `str()` of the exception behind a failed execution call, from the error text the
/// minion gives it (`ERROR: <message>`, `ERROR executing '<fun>': <message>`, an exception's
/// line).
pub fn exc_text(e: &str) -> &str {
    if let Some(message) = e.strip_prefix("ERROR: ") {
        return message;
    }
    if let Some((_, message)) = e
        .strip_prefix("ERROR executing '")
        .and_then(|rest| rest.split_once("': "))
    {
        return message;
    }
    e.strip_prefix("The minion function caused an exception: ")
        .unwrap_or(e)
}

/// A state function's return: `name`, `changes`, `result`, `comment`.
pub fn ret(
    name: &str,
    result: Value,
    comment: impl Into<String>,
    changes: Value,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("name".into(), Value::String(name.to_string()));
    m.insert("changes".into(), changes);
    m.insert("result".into(), result);
    m.insert("comment".into(), Value::String(comment.into()));
    m
}

/// A state function: the chunk's arguments it must have, the ones it takes, and what it does.
pub struct Spec {
    pub name: &'static str,
    pub required: &'static [&'static str],
    pub accepts: Accepts,
    pub run: fn(&Call) -> Result<Map<String, Value>, String>,
}

/// The arguments a state function takes besides the engine's own (Salt's argspec of the
/// function).
#[derive(Debug, Clone, Copy)]
pub enum Accepts {
    /// Any argument (the function takes `**kwargs`).
    Any,
    /// Only these: Salt refuses a run whose state gives such a function another argument
    /// ("'x' is an invalid keyword argument for 'host.present'").
    Only(&'static [&'static str]),
}

impl Spec {
    /// Salt's `format_call` check for the state `full` (`module.function`) called with the
    /// chunk `low`: the refusal of the arguments the function does not take, if any.
    pub fn refused_arguments(&self, full: &str, low: &Low) -> Option<String> {
        let Accepts::Only(params) = self.accepts else {
            return None;
        };
        let extra: Vec<&String> = low
            .keys()
            .filter(|k| !crate::low::is_internal(k) && !params.contains(&k.as_str()))
            .collect();
        match extra.as_slice() {
            [] => None,
            [one] => Some(format!(
                "'{one}' is an invalid keyword argument for '{full}'"
            )),
            [most @ .., last] => Some(format!(
                "{} and '{last}' are invalid keyword arguments for '{full}'",
                most.iter()
                    .map(|k| format!("'{k}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// Every state module: its name and its functions.
#[rustfmt::skip]
const MODULES: &[(&str, &[Spec])] = &[
    ("test", test::FUNCTIONS),
    ("cmd", cmd::FUNCTIONS),
    ("file", file::FUNCTIONS),
    ("user", user::FUNCTIONS),
    ("group", group::FUNCTIONS),
    ("module", module::FUNCTIONS),
    ("pkg", pkg::FUNCTIONS),
    ("service", service::FUNCTIONS),
    ("cron", cron::FUNCTIONS),
    ("host", host::FUNCTIONS),
    ("git", git::FUNCTIONS),
    ("salt", salt::FUNCTIONS),
    ("archive", archive::FUNCTIONS),
    ("ssh_auth", ssh_auth::FUNCTIONS),
    ("grains", grains::FUNCTIONS),
    ("alternatives", alternatives::FUNCTIONS),
    ("sysctl", sysctl::FUNCTIONS),
    ("ini", ini::FUNCTIONS),
    ("pkgrepo", pkgrepo::FUNCTIONS),
    ("ssh_known_hosts", ssh_known_hosts::FUNCTIONS),
    ("timezone", timezone::FUNCTIONS),
    ("mount", mount::FUNCTIONS),
    ("locale", locale::FUNCTIONS),
];

/// A module's initialiser.
pub type ModInit = fn(&Call) -> bool;

/// Module initialisers (Salt's `mod_init`): run before a module's first state of a run; the
/// module counts as initialised when one returns true.
#[rustfmt::skip]
const MOD_INIT: &[(&str, ModInit)] = &[
    ("pkg", pkg::mod_init),
];

/// The `mod_init` of a state module, if it has one.
pub fn mod_init(module: &str) -> Option<ModInit> {
    MOD_INIT.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

/// The state function `module.function`.
pub fn lookup(full: &str) -> Option<&'static Spec> {
    let (module, fun) = full.split_once('.')?;
    MODULES
        .iter()
        .find(|(m, _)| *m == module)?
        .1
        .iter()
        .find(|s| s.name == fun)
}

/// Whether the state function `module.function` runs `check_cmd` itself (Salt's
/// `file.managed` and `file.serialize`, whose module has a `mod_run_check_cmd` and which take
/// `check_cmd` as an argument), so the engine's own `check_cmd` does not run after it.
pub fn own_check_cmd(full: &str) -> bool {
    matches!(full, "file.managed" | "file.serialize")
}

/// Every state function's name (`module.function`), sorted.
pub fn list() -> Vec<String> {
    let mut names: Vec<String> = MODULES
        .iter()
        .flat_map(|(m, funs)| funs.iter().map(move |f| format!("{m}.{}", f.name)))
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    #[test]
    fn network_sources_are_refused_by_name() {
        for source in [
            "https://example.com/a.tgz",
            "HTTP://h/x",
            "ftp://h/x",
            "s3://b/k",
        ] {
            let err = super::read_local(source).unwrap_err();
            assert!(
                err.starts_with(&format!("Source {source} cannot be fetched")),
                "{err}"
            );
        }
        assert_eq!(super::read_local("file:///nonexistent/brine"), Ok(None));
        assert_eq!(super::read_local("/nonexistent/brine"), Ok(None));
    }
}

/// A host whose execution functions are a script: for tests of state modules whose real
/// functions this machine cannot run (systemd's, the hardware clock's).
#[cfg(test)]
pub(crate) mod scripted {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use serde_json::{json, Map, Value};

    use super::{Accumulators, Call, Host, MasterList, Params};
    use crate::low::Low;

    /// Answers `fun(args)` calls from `answer`, and keeps the calls made.
    pub(crate) struct Scripted<F: Fn(&str, &[Value]) -> Result<Value, String> + Sync> {
        pub answer: F,
        pub calls: Mutex<Vec<String>>,
        grains: Value,
    }

    impl<F: Fn(&str, &[Value]) -> Result<Value, String> + Sync> Scripted<F> {
        pub(crate) fn new(answer: F) -> Self {
            Scripted {
                answer,
                calls: Mutex::default(),
                grains: json!({"id": "m1", "os_family": "Debian"}),
            }
        }

        /// Runs the state function `run` on `low` (with `test`), its return.
        pub(crate) fn run(
            &self,
            run: fn(&Call) -> Result<Map<String, Value>, String>,
            low: Value,
            test: bool,
        ) -> Result<Map<String, Value>, String> {
            let low: Low = low.as_object().cloned().unwrap_or_default();
            let (running, accumulators) = (Map::new(), Accumulators::default());
            run(&Call {
                low: &low,
                test,
                host: self,
                running: &running,
                saltenv: "base",
                accumulators: &accumulators,
            })
        }
    }

    impl<F: Fn(&str, &[Value]) -> Result<Value, String> + Sync> Host for Scripted<F> {
        fn call(
            &self,
            fun: &str,
            args: &[Value],
            _kw: &Map<String, Value>,
        ) -> Result<Value, String> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("{fun}{}", Value::Array(args.to_vec())));
            (self.answer)(fun, args)
        }
        fn grains(&self) -> &Value {
            &self.grains
        }
        fn pillar(&self) -> &Value {
            &Value::Null
        }
        fn fetch(&self, _: &str, _: &str) -> Result<Option<Vec<u8>>, String> {
            Ok(None)
        }
        fn render_template(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: Map<String, Value>,
        ) -> Result<String, String> {
            Err("no templates here".into())
        }
        fn cachedir(&self) -> PathBuf {
            PathBuf::from("/nonexistent")
        }
        fn params(&self, _: &str) -> Option<Params> {
            None
        }
        fn list_master(&self, _: &str, _: &str) -> Result<MasterList, String> {
            Ok(MasterList::default())
        }
        fn fire_event(&self, _: &str, _: Value, _: &str) {}
    }
}
