//! The execution modules a job runs (`test.*`, `cmd.*`, `grains.*`, `sys.*`,
//! `saltutil.*`, `status.*`), and [`call`], which runs one of them the way a Salt minion
//! does: Salt's argument handling, Salt's error texts and Salt's retcode rules.
//!
//! Function names are resolved into the closed [`Function`] enum; each module file owns
//! its own enum of functions with their signatures and docstrings.

mod args;

/// Salt's `yamlify_arg`: a command-line word as the value Salt's tools send for it.
pub use args::yamlify_arg;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmpv::Value;

use args::{Bound, Signature};
use brine_protocol::payload::get;

/// The Salt version Brine speaks (`test.version`, the `saltversion` grain).
pub use brine_protocol::SALT_VERSION;

/// A job being run, as the executor registers it (for `saltutil.running`, `find_job`,
/// `kill_job`).
#[derive(Debug)]
pub struct RunningJob {
    /// The publish load map.
    pub load: Value,
    /// Stops the job's task; `None` when the job cannot be stopped.
    pub abort: Option<tokio::task::AbortHandle>,
}

/// The jobs this minion is running, keyed by jid.
#[derive(Debug, Default)]
pub struct RunningJobs {
    jobs: Mutex<HashMap<String, RunningJob>>,
}

impl RunningJobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RunningJob>> {
        // A panic while holding this lock leaves the map consistent, so keep using it.
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a job (replaces an entry with the same jid).
    pub fn insert(&self, jid: &str, job: RunningJob) {
        self.lock().insert(jid.to_string(), job);
    }

    /// Forget a job (it finished).
    pub fn remove(&self, jid: &str) {
        self.lock().remove(jid);
    }

    /// Every running job as Salt's proc file shows it: `{"pid": <this process>, ...load}`,
    /// ordered by jid.
    pub fn list(&self) -> Vec<Value> {
        let jobs = self.lock();
        let mut jids: Vec<&String> = jobs.keys().collect();
        jids.sort();
        jids.into_iter()
            .map(|jid| proc_entry(&jobs[jid].load))
            .collect()
    }

    /// One running job as [`RunningJobs::list`] shows it.
    pub fn get(&self, jid: &str) -> Option<Value> {
        self.lock().get(jid).map(|job| proc_entry(&job.load))
    }

    /// Stop a job: aborts its task and forgets it. Returns false when there is no such job
    /// or it has no abort handle (it is then left registered: it is still running).
    pub fn kill(&self, jid: &str) -> bool {
        let mut jobs = self.lock();
        let abortable = jobs.get(jid).is_some_and(|job| job.abort.is_some());
        if !abortable {
            return false;
        }
        if let Some(handle) = jobs.remove(jid).and_then(|job| job.abort) {
            handle.abort();
        }
        true
    }
}

fn proc_entry(load: &Value) -> Value {
    let mut entries = vec![(Value::from("pid"), Value::from(std::process::id()))];
    if let Value::Map(load) = load {
        entries.extend(
            load.iter()
                .filter(|(k, _)| k.as_str() != Some("pid"))
                .cloned(),
        );
    }
    Value::Map(entries)
}

/// What a function call can see of the minion.
#[derive(Debug, Clone)]
pub struct Context {
    /// The minion id.
    pub id: String,
    /// The minion's grains (a map).
    pub grains: Arc<Value>,
    /// The jobs being run.
    pub running: Arc<RunningJobs>,
    /// The publish load of this job (`{}` for salt-call; Salt's salt-call passes
    /// `{"fun", "pid", "jid", "tgt": "salt-call"}`). Its keys become `__pub_<key>` kwargs.
    pub pub_load: Value,
    /// The minion's pillar, as the master compiled it (fetched afresh before a job that calls
    /// a `pillar.*` function).
    pub pillar: Arc<Value>,
    /// The schedule, beacons and master link the `schedule`, `beacons` and `mine` modules
    /// act on.
    pub services: Arc<Services>,
}

/// The `opts` a template rendered on the minion sees: its `id`, and the render budget
/// (`brine_jinja_fuel`) when the minion's options set one.
pub(crate) fn template_opts(ctx: &Context) -> serde_json::Map<String, serde_json::Value> {
    let mut opts = serde_json::Map::new();
    opts.insert("id".into(), ctx.id.clone().into());
    if let Some(fuel) = ctx.services.opts.get("brine_jinja_fuel") {
        opts.insert("brine_jinja_fuel".into(), fuel.clone());
    }
    opts
}

/// What the `schedule`, `beacons` and `mine` modules change or talk to.
pub struct Services {
    pub schedule: Arc<crate::schedule::Schedule>,
    pub beacons: Arc<crate::beacons::Beacons>,
    /// The request channel to the master; `None` without one (`salt-call --local`).
    pub master: Option<Arc<crate::channel::Channel>>,
    /// The file server of a minion without a master (its own `file_roots`).
    pub local_files: Option<Arc<dyn crate::fileclient::FileSource>>,
    /// `mine_functions` from the minion's options.
    pub mine_functions: serde_json::Value,
    /// `cachedir`: where the file client keeps the master's files.
    pub cachedir: std::path::PathBuf,
    /// The minion's options with their effective values (Salt's `__opts__`, without its
    /// `grains` and `pillar`: see `config::opts`), as `MinionConfig::effective_opts` gives them.
    pub opts: serde_json::Map<String, serde_json::Value>,
    /// The minion's pillar as the master last compiled it.
    pillar: std::sync::RwLock<Arc<Value>>,
    /// The minion's grains now.
    grains: std::sync::RwLock<Arc<Value>>,
    /// Where the grains are collected from again; `None`: they only change by `set_grains`.
    grains_source: Option<GrainsSource>,
    /// Held while the grains file changes and the grains are collected again, so that
    /// concurrent changes land one after the other.
    grains_update: Mutex<()>,
}

/// Where a minion's grains come from (Salt's loader): the core grains, the static grains of
/// `<config dir>/grains` over them, and the `grains` option of the minion's configuration over
/// both.
#[derive(Debug, Clone)]
pub struct GrainsSource {
    pub core: CoreGrains,
    /// The minion's configuration directory: the `grains` file is there, and the `minion`
    /// file whose `grains` option is read again at each collection, as Salt reads it.
    pub config_dir: Option<std::path::PathBuf>,
    /// The `grains` option the minion started with (used when the configuration cannot be
    /// read again).
    pub config_grains: Value,
}

/// The core grains of a [`GrainsSource`].
#[derive(Debug, Clone)]
pub enum CoreGrains {
    /// Detected on this host, for the minion `id` whose master is `master`.
    Host { id: String, master: String },
    /// A fixed set (tools and tests).
    Fixed(Value),
}

impl GrainsSource {
    /// The static grains file, `<config dir>/grains`.
    pub fn grains_file(&self) -> Option<std::path::PathBuf> {
        self.config_dir.as_ref().map(|d| d.join("grains"))
    }

    /// Collect the grains (blocking: it reads the host and may run commands).
    pub fn collect(&self) -> Value {
        let config = self
            .config_dir
            .as_deref()
            .and_then(
                |dir| match brine_protocol::config::load_raw(dir, "minion") {
                    Ok(raw) => Some(match raw.values.get("grains") {
                        Some(g @ serde_json::Value::Object(_)) => {
                            brine_protocol::payload::from_json(g)
                        }
                        // Salt replaces a non-mapping `grains` with an empty one.
                        _ => Value::Map(vec![]),
                    }),
                    Err(e) => {
                        tracing::warn!("minion configuration not read again for its grains: {e}");
                        None
                    }
                },
            )
            .unwrap_or_else(|| self.config_grains.clone());
        let file = self.grains_file();
        match &self.core {
            CoreGrains::Host { id, master } => {
                crate::grains_core::grains_load(id, master, file.as_deref(), &config)
            }
            CoreGrains::Fixed(core) => {
                let mut grains = core.as_map().cloned().unwrap_or_default();
                let extra = crate::grains_core::grains_extra(file.as_deref(), &config);
                crate::grains_core::dict_update(&mut grains, &extra);
                Value::Map(grains)
            }
        }
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("schedule", &self.schedule)
            .field("beacons", &self.beacons)
            .field("master", &self.master.is_some())
            .finish()
    }
}

impl Services {
    /// Services read from a minion's configuration. Changes the modules make persist under
    /// `config_dir/minion.d/`.
    pub fn from_config(
        cfg: &brine_protocol::config::MinionConfig,
        config_dir: Option<&std::path::Path>,
        master: Option<Arc<crate::channel::Channel>>,
    ) -> Services {
        let dropin = |name: &str| config_dir.map(|d| d.join("minion.d").join(name));
        Services {
            schedule: Arc::new(crate::schedule::Schedule::new(
                Some(&cfg.schedule),
                dropin("_schedule.conf"),
            )),
            beacons: Arc::new(crate::beacons::Beacons::new(
                Some(&cfg.beacons),
                dropin("beacons.conf"),
            )),
            master,
            local_files: None,
            mine_functions: cfg.mine_functions.clone(),
            cachedir: cfg.cachedir.clone(),
            opts: cfg.effective_opts(),
            pillar: std::sync::RwLock::new(Arc::new(Value::Map(vec![]))),
            grains: std::sync::RwLock::new(Arc::new(Value::Map(vec![]))),
            grains_source: None,
            grains_update: Mutex::new(()),
        }
        .with_grains(GrainsSource {
            core: CoreGrains::Host {
                id: cfg.id.clone(),
                master: cfg.master.first().cloned().unwrap_or_else(|| "salt".into()),
            },
            config_dir: config_dir.map(std::path::Path::to_path_buf),
            config_grains: brine_protocol::payload::from_json(&cfg.grains),
        })
    }

    /// Empty services with nothing persisted and no master (tests, tools).
    pub fn detached() -> Services {
        Services {
            schedule: Arc::new(crate::schedule::Schedule::new(None, None)),
            beacons: Arc::new(crate::beacons::Beacons::new(None, None)),
            master: None,
            local_files: None,
            mine_functions: serde_json::Value::Null,
            cachedir: std::env::temp_dir().join("brine-minion-cache"),
            opts: serde_json::Map::new(),
            pillar: std::sync::RwLock::new(Arc::new(Value::Map(vec![]))),
            grains: std::sync::RwLock::new(Arc::new(Value::Map(vec![]))),
            grains_source: None,
            grains_update: Mutex::new(()),
        }
    }

    /// These services with a file server of their own (a masterless minion's `file_roots`).
    pub fn with_local_files(mut self, files: Arc<dyn crate::fileclient::FileSource>) -> Services {
        self.local_files = Some(files);
        self
    }

    /// The file server: the master's, else the minion's own; `None` when there is neither.
    pub fn file_source(&self) -> Option<Arc<dyn crate::fileclient::FileSource>> {
        match &self.master {
            Some(m) => Some(m.clone() as Arc<dyn crate::fileclient::FileSource>),
            None => self.local_files.clone(),
        }
    }

    /// These services with grains collected from `source` (and collected again from it).
    pub fn with_grains(mut self, source: GrainsSource) -> Services {
        self.set_grains(source.collect());
        self.grains_source = Some(source);
        self
    }

    /// The minion's grains now.
    pub fn grains(&self) -> Arc<Value> {
        // A panic while holding the lock leaves whole grains in place: keep using them.
        self.grains
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replace the minion's grains.
    pub fn set_grains(&self, grains: Value) -> Arc<Value> {
        let grains = Arc::new(grains);
        *self.grains.write().unwrap_or_else(|e| e.into_inner()) = grains.clone();
        grains
    }

    /// The static grains file (`<config dir>/grains`), `None` without a configuration directory.
    pub fn grains_file(&self) -> Option<std::path::PathBuf> {
        self.grains_source
            .as_ref()
            .and_then(GrainsSource::grains_file)
    }

    /// Run `edit` on the grains file (its path, `None` without one), then, when it succeeds,
    /// collect the grains again; both under one lock. Blocking.
    pub fn update_grains<T, E>(
        &self,
        edit: impl FnOnce(Option<&std::path::Path>) -> Result<T, E>,
    ) -> Result<(T, Arc<Value>), E> {
        let _one_at_a_time = self.grains_update.lock().unwrap_or_else(|e| e.into_inner());
        let done = edit(self.grains_file().as_deref())?;
        let grains = match &self.grains_source {
            Some(source) => self.set_grains(source.collect()),
            None => self.grains(),
        };
        Ok((done, grains))
    }

    /// Salt's `saltutil.refresh_grains`: collect the grains again and, with `refresh_pillar`
    /// and a master, fetch the pillar with them (which is also how the master learns the
    /// grains it targets with). A pillar that does not come is logged.
    pub async fn refresh_grains(self: &Arc<Self>, id: &str, refresh_pillar: bool) -> Arc<Value> {
        let services = self.clone();
        let reloaded = tokio::task::spawn_blocking(move || {
            services.update_grains(|_| Ok::<(), std::convert::Infallible>(()))
        })
        .await;
        let grains = match reloaded {
            Ok(Ok(((), grains))) => grains,
            Ok(Err(never)) => match never {},
            Err(e) => {
                tracing::warn!("grains not collected again: {e}");
                self.grains()
            }
        };
        self.grains_changed(id, &grains, refresh_pillar).await;
        grains
    }

    /// After the grains changed: with `refresh_pillar` and a master, fetch the pillar with them.
    pub async fn grains_changed(&self, id: &str, grains: &Value, refresh_pillar: bool) {
        if refresh_pillar && self.master.is_some() {
            if let Err(e) = self.refresh_pillar(id, grains).await {
                tracing::warn!("pillar not refreshed after the grains changed: {e}");
            }
        }
    }

    /// The minion's pillar as the master last compiled it (empty before the first refresh).
    pub fn pillar(&self) -> Arc<Value> {
        // A panic while holding the lock leaves a whole pillar in place: keep using it.
        self.pillar
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keep a pillar compiled without a master (`salt-call --local`).
    pub fn set_pillar(&self, pillar: Value) -> Arc<Value> {
        let json = brine_protocol::payload::to_json(&pillar);
        self.schedule.set_pillar(json.get("schedule"));
        self.beacons.set_pillar(json.get("beacons"));
        let p = Arc::new(pillar);
        *self.pillar.write().unwrap_or_else(|e| e.into_inner()) = p.clone();
        p
    }

    /// Ask the master for this minion's pillar (Salt's `_pillar` request, with `grains`) and
    /// keep it; the schedule and beacons take their pillar parts from it.
    pub async fn refresh_pillar(&self, id: &str, grains: &Value) -> Result<Arc<Value>, String> {
        let Some(master) = self.master.clone() else {
            return Err("the pillar comes from the master (this minion has no master)".into());
        };
        let load = brine_protocol::payload::map(vec![
            ("cmd", Value::from("_pillar")),
            ("id", Value::from(id)),
            ("grains", grains.clone()),
            ("saltenv", Value::Nil),
            ("pillarenv", Value::Nil),
            ("pillar_override", Value::Map(vec![])),
            ("extra_minion_data", Value::Map(vec![])),
            ("ver", Value::from("2")),
        ]);
        let p = tokio::task::spawn_blocking(move || master.request_private(&load, "pillar"))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(self.set_pillar(p))
    }
}

/// Salt's `clean_kwargs`: the call's keyword arguments without the `__pub_*` and other `__`
/// keys, as JSON.
pub(crate) fn clean_kwargs(b: &args::Bound) -> serde_json::Map<String, serde_json::Value> {
    b.kwargs
        .iter()
        .filter(|(k, _)| !k.starts_with("__"))
        .map(|(k, v)| (k.clone(), brine_protocol::payload::to_json(v)))
        .collect()
}

impl Context {
    /// The jid of the job this call runs in, if any.
    fn jid(&self) -> Option<&str> {
        get(&self.pub_load, "jid").and_then(Value::as_str)
    }
}

/// The outcome of [`call`], as the minion puts it in its `_return` load.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// `return`.
    pub ret: Value,
    /// `retcode` (`success` is `retcode == 0`).
    pub retcode: i32,
    /// `out`, the outputter Salt names for this function or error.
    pub out: Option<String>,
    /// What failed, for salt-call, which shows these failures as Salt's does instead of
    /// a return; `None` when the function returned (whatever its retcode).
    pub failure: Option<Failure>,
}

/// A function that did not return, as salt-call shows it (Salt's caller catches these
/// before it prints or sends any return).
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Wrong arguments (`TypeError`, `SaltInvocationError`): "Passed invalid arguments:
    /// <message>." and the function's documentation.
    InvalidArguments { message: String, doc: &'static str },
    /// `CommandExecutionError`: "Error running '<function>': <message>".
    Execution(String),
}

/// The ways a function fails, each with Salt's wording in the return.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum FnError {
    /// Python `TypeError` from calling with the wrong arguments.
    #[error("{0}")]
    InvalidArgs(String),
    /// `SaltInvocationError`.
    #[error("{0}")]
    Invocation(String),
    /// `CommandExecutionError`.
    #[error("{0}")]
    Execution(String),
    /// Any other exception (Python's `Exception: <message>` line).
    #[error("{0}")]
    Exception(String),
}

impl FnError {
    /// Salt's `CommandExecutionError(message, info)`: when `info` is truthy, the message (with
    /// a full stop) then "Additional info follows:" and `info` as the nested outputter shows it.
    pub(crate) fn with_info(message: &str, info: &Value) -> FnError {
        if !brine_protocol::payload::py_truthy(info) {
            return FnError::Execution(message.to_string());
        }
        let mut text = message.to_string();
        if !text.is_empty() {
            if !text.ends_with(['.', '?', '!']) {
                text.push('.');
            }
            text.push(' ');
        }
        text.push_str("Additional info follows:\n\n");
        let colors = brine_protocol::nested::Colors::new(false);
        let json = brine_protocol::payload::to_json(info);
        text.push_str(brine_protocol::nested::python_rstrip(
            &brine_protocol::nested::nested(&json, &colors, 0),
        ));
        FnError::Execution(text)
    }
}

/// The description of one function: name, Python name, signature, docstring, outputter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub name: &'static str,
    /// The name Python would print in a `TypeError` (`true_` for `test.true`).
    pub pyname: &'static str,
    pub sig: Signature,
    pub doc: &'static str,
    pub out: Option<&'static str>,
}

/// Per-call state a function may change (Salt's `__context__["retcode"]`).
#[derive(Debug, Default)]
pub(crate) struct CallState {
    pub retcode: i32,
    /// Salt's `__opts__["test"]` during the call: the minion's `test` option for a job, the
    /// run's test mode for a function a state run under `test=True` calls.
    pub test: bool,
}

/// Declares a module's `Fun` enum and its `spec()` from one line per function:
/// `Variant => ("mod.fun", "pyname", [params], required, varargs, kwargs, "doc")`, with
/// `, out = "txt"` after the doc for a function Salt prints with another outputter.
macro_rules! spec_table {
    ($(#[$meta:meta])* $($variant:ident => ($name:literal, $py:literal, [$($p:literal),*], $req:expr, $var:expr, $kw:expr, $doc:literal $(, out = $out:literal)?),)*) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Fun { $($variant,)* }

        impl Fun {
            pub(crate) const ALL: &'static [Fun] = &[$(Fun::$variant,)*];

            pub(crate) fn spec(self) -> Spec {
                match self {
                    $(Fun::$variant => Spec {
                        name: $name,
                        pyname: $py,
                        sig: Signature::new(&[$($p),*], $req, $var, $kw),
                        doc: $doc,
                        out: None $(.or(Some($out)))?,
                    },)*
                }
            }
        }
    };
}
pub(crate) use spec_table;

/// Declares the execution modules: each `Variant => module` line is the module's file
/// (`functions/<module>.rs`, whose `Fun` enum lists its functions with `ALL`, `spec` and `run`)
/// and its whole registration.
macro_rules! modules {
    ($($variant:ident => $module:ident,)*) => {
        $(pub mod $module;)*

        /// Every function this minion offers.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Function {
            $($variant($module::Fun),)*
        }

        impl Function {
            fn all() -> impl Iterator<Item = Function> {
                std::iter::empty()
                    $(.chain($module::Fun::ALL.iter().map(|f| Function::$variant(*f))))*
            }

            pub(crate) fn spec(self) -> Spec {
                match self {
                    $(Function::$variant(f) => f.spec(),)*
                }
            }

            async fn run(
                self,
                ctx: &Context,
                b: &Bound,
                st: &mut CallState,
            ) -> Result<Value, FnError> {
                match self {
                    $(Function::$variant(f) => f.run(ctx, b, st).await,)*
                }
            }
        }
    };
}

modules! {
    Test => test,
    Cmd => cmd,
    Grains => grains,
    Pillar => pillar,
    Schedule => schedule,
    Beacons => beacons,
    Mine => mine,
    Sys => sys,
    Saltutil => saltutil,
    Status => status,
    Pkg => pkg,
    Service => service,
    State => state,
    Cp => cp,
    User => user,
    Group => group,
    Shadow => shadow,
    File => file,
    Cron => cron,
    Hosts => hosts,
    Network => network,
    Disk => disk,
    Archive => archive,
    Config => config,
    Git => git,
    Event => event,
    Match => matching,
    Slsutil => slsutil,
    Defaults => defaults,
    Sysctl => sysctl,
    Ssh => ssh,
    Alternatives => alternatives,
    Ini => ini,
    Timezone => timezone,
    Mount => mount,
    Locale => locale,
}

impl Function {
    pub(crate) fn from_name(name: &str) -> Option<Function> {
        Self::all().find(|f| f.spec().name == name)
    }
}

/// The file Salt's loader names as a module's provider (`test.provider`): Salt's own module
/// file for each module this minion has, where it differs from the module's name.
const PROVIDER_FILES: &[(&str, &str)] = &[
    ("cmd", "cmdmod"),
    ("sys", "sysmod"),
    ("user", "useradd"),
    ("group", "groupadd"),
    ("sysctl", "linux_sysctl"),
    ("ini", "ini_manage"),
    ("locale", "localemod"),
];

/// The provider of `module`, or `None` when this minion has no such module. `pkg` and
/// `service` depend on the machine, as Salt's loader picks `aptpkg` or `yumpkg`,
/// `systemd_service` or `debian_service`.
pub(crate) fn provider(module: &str, ctx: &Context) -> Option<&'static str> {
    let name = Function::all()
        .map(|f| f.spec().name)
        .find(|n| n.split('.').next() == Some(module))?
        .split('.')
        .next()?;
    let by_machine = match name {
        "pkg" => pkg::provider(ctx),
        "service" => service::provider(ctx),
        _ => None,
    };
    Some(by_machine.unwrap_or_else(|| {
        PROVIDER_FILES
            .iter()
            .find(|(m, _)| *m == name)
            .map_or(name, |(_, file)| file)
    }))
}

/// The parameters of the execution function `name`, `None` when there is no such function.
pub fn params(name: &str) -> Option<brine_state::states::Params> {
    let sig = Function::from_name(name)?.spec().sig;
    Some(brine_state::states::Params {
        args: sig.params.iter().map(|p| p.to_string()).collect(),
        required: sig.required,
        varargs: sig.varargs,
        keywords: sig.kwargs,
    })
}

/// All function names, sorted (`"mod.fun"`).
pub fn list_functions() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Function::all().map(|f| f.spec().name).collect();
    names.sort_unstable();
    names
}

fn error_result(fun: &str, doc: &'static str, err: FnError) -> CallResult {
    let failure = match &err {
        FnError::InvalidArgs(message) | FnError::Invocation(message) => {
            Some(Failure::InvalidArguments {
                message: message.clone(),
                doc,
            })
        }
        FnError::Execution(message) => Some(Failure::Execution(message.clone())),
        FnError::Exception(_) => None,
    };
    let text = match err {
        FnError::InvalidArgs(msg) => format!("Passed invalid arguments to {fun}: {msg}\n{doc}"),
        FnError::Invocation(msg) => format!("ERROR executing '{fun}': {msg}"),
        FnError::Execution(msg) => format!("ERROR: {msg}"),
        FnError::Exception(msg) => format!("The minion function caused an exception: {msg}"),
    };
    CallResult {
        ret: Value::from(text),
        retcode: 1,
        out: Some("nested".into()),
        failure,
    }
}

/// Salt's rule after a normal return: a map with a falsy `result` or `success` fails.
fn return_failed(ret: &Value) -> bool {
    ["result", "success"]
        .iter()
        .any(|key| get(ret, key).is_some_and(|v| !brine_protocol::payload::py_truthy(v)))
}

/// Run another function of this minion from within a function (boxed: `call` is recursive
/// through its callers).
pub(crate) fn call_boxed<'a>(
    ctx: &'a Context,
    fun: &'a str,
    args: Vec<Value>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = CallResult> + Send + 'a>> {
    Box::pin(async move { call(ctx, fun, &args).await })
}

/// Another function of this minion called with keyword arguments only (a positional text
/// with `=` in it would be read as a keyword, as on the command line): its answer, or its
/// error text as a `CommandExecutionError`.
pub(crate) async fn call_kwargs(
    ctx: &Context,
    fun: &str,
    kwargs: &[(&str, Value)],
) -> Result<Value, FnError> {
    let mut map = vec![(Value::from("__kwarg__"), Value::Boolean(true))];
    map.extend(kwargs.iter().map(|(k, v)| (Value::from(*k), v.clone())));
    let got = call_boxed(ctx, fun, vec![Value::Map(map)]).await;
    if got.retcode != 0 {
        return Err(FnError::Execution(args::py_str(&got.ret)));
    }
    Ok(got.ret)
}

/// `cp.cache_file` of `source` in `saltenv` as another function calls it: the cached path,
/// `None` when there is no such file (its answer `False`), its error text otherwise.
pub(crate) async fn cache_file(
    ctx: &Context,
    source: Value,
    saltenv: Value,
) -> Result<Option<String>, FnError> {
    // As keywords: a source with `=` in it would be read as one.
    let kwargs = vec![
        (Value::from("__kwarg__"), Value::Boolean(true)),
        (Value::from("path"), source),
        (Value::from("saltenv"), saltenv),
    ];
    let got = call_boxed(ctx, "cp.cache_file", vec![Value::Map(kwargs)]).await;
    if got.retcode != 0 && !matches!(got.ret, Value::Boolean(false)) {
        return Err(FnError::Execution(args::py_str(&got.ret)));
    }
    Ok(Some(args::py_str(&got.ret)).filter(|_| brine_protocol::payload::py_truthy(&got.ret)))
}

/// Run one function the way a Salt minion does (see the module docs).
pub async fn call(ctx: &Context, fun: &str, arg: &[Value]) -> CallResult {
    let missing = format!("'{fun}' is not available.");
    let Some(function) = Function::from_name(fun) else {
        // Salt answers e.g. `salt m1 test` with the docs of every `test*` function.
        let mut docs = sys::docs(&[format!("{fun}*")]);
        let ret = match &mut docs {
            Value::Map(entries) if !entries.is_empty() => {
                entries.push((Value::from(fun), Value::from(missing)));
                docs
            }
            _ => Value::from(missing),
        };
        return CallResult {
            ret,
            retcode: 1,
            out: Some("nested".into()),
            failure: None,
        };
    };
    let spec = function.spec();
    match invoke(ctx, function, arg).await {
        Ok((ret, mut retcode)) => {
            if retcode == 0 && return_failed(&ret) {
                retcode = 1;
            }
            CallResult {
                ret,
                retcode,
                out: spec.out.map(str::to_string),
                failure: None,
            }
        }
        Err(e) => error_result(fun, spec.doc, e),
    }
}

/// Bind the arguments and run one function: its return and the retcode it set.
async fn invoke(ctx: &Context, function: Function, arg: &[Value]) -> Result<(Value, i32), FnError> {
    let spec = function.spec();
    let (args, kwargs) = args::load_args_and_kwargs(&spec.sig, arg, &ctx.pub_load)?;
    let test = ctx
        .services
        .opts
        .get("test")
        .is_some_and(brine_protocol::payload::json_truthy);
    invoke_bound(ctx, function, args, kwargs, test).await
}

/// Run one function called as Python code calls it (`__salt__[name](*args, **kwargs)` from a
/// state or a template): no `key=value` parsing of the arguments and no `__pub_*` keywords,
/// so a cross-module call behaves as Salt's does (`cmd.run_all` without a shell, ...).
async fn invoke_bound(
    ctx: &Context,
    function: Function,
    args: Vec<Value>,
    kwargs: Vec<(String, Value)>,
    test: bool,
) -> Result<(Value, i32), FnError> {
    let spec = function.spec();
    let bound = args::bind(&spec.sig, spec.pyname, args, kwargs).map_err(FnError::InvalidArgs)?;
    let mut state = CallState { retcode: 0, test };
    let ret = function.run(ctx, &bound, &mut state).await?;
    Ok((ret, state.retcode))
}

/// This minion's functions as a template's `salt['module.function'](...)` sees them, limited
/// to the modules `allow` accepts. A function's failure is the template's error; a command's
/// exit code is not (`cmd.run` returns its output either way, as in Salt).
pub struct TemplateFunctions {
    ctx: Context,
    allow: fn(&str) -> bool,
    /// The runtime to run calls on, when every call comes from a blocking thread of it.
    runtime: Option<tokio::runtime::Handle>,
    /// Calls made by a state run under `test=True` (Salt's `__opts__["test"]` for them).
    test: bool,
    /// The minion's grains when these functions were made: a call made after a function
    /// changed them (`grains.setval` in a state run) sees the new grains, as in Salt.
    grains_at_start: Arc<Value>,
}

impl TemplateFunctions {
    pub fn new(ctx: Context, allow: fn(&str) -> bool) -> TemplateFunctions {
        TemplateFunctions {
            grains_at_start: ctx.services.grains(),
            ctx,
            allow,
            runtime: None,
            test: false,
        }
    }

    /// The context of a call: the minion's grains of now when they changed since these
    /// functions were made.
    fn call_context(&self) -> std::borrow::Cow<'_, Context> {
        let now = self.ctx.services.grains();
        if Arc::ptr_eq(&now, &self.grains_at_start) {
            return std::borrow::Cow::Borrowed(&self.ctx);
        }
        std::borrow::Cow::Owned(Context {
            grains: now,
            ..self.ctx.clone()
        })
    }

    /// The functions as a state run under `test=True` calls them: Salt's `__opts__["test"]`
    /// is true for them.
    pub fn in_test_run(self, test: bool) -> TemplateFunctions {
        TemplateFunctions { test, ..self }
    }

    /// Functions called only from blocking threads of `runtime` (`spawn_blocking`): each call
    /// runs there directly.
    pub fn on_blocking_thread_of(
        ctx: Context,
        allow: fn(&str) -> bool,
        runtime: tokio::runtime::Handle,
    ) -> TemplateFunctions {
        TemplateFunctions {
            grains_at_start: ctx.services.grains(),
            ctx,
            allow,
            runtime: Some(runtime),
            test: false,
        }
    }
}

impl brine_render::Functions for TemplateFunctions {
    fn call(
        &self,
        name: &str,
        args: &[serde_json::Value],
        kwargs: &std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Option<Result<serde_json::Value, String>> {
        let module = name.split('.').next().unwrap_or_default();
        if !(self.allow)(module) {
            return None;
        }
        // Salt's templates call `cmd.shell` for `cmd.run`: a shell by default.
        let name = if name == "cmd.run" { "cmd.shell" } else { name };
        let function = Function::from_name(name)?;
        let arg: Vec<Value> = args
            .iter()
            .map(brine_protocol::payload::from_json)
            .collect();
        let kwarg: Vec<(String, Value)> = kwargs
            .iter()
            .map(|(k, v)| (k.clone(), brine_protocol::payload::from_json(v)))
            .collect();
        let failed = |e: FnError| {
            let ret = error_result(name, function.spec().doc, e).ret;
            ret.as_str().map_or_else(|| ret.to_string(), str::to_string)
        };
        let ctx = self.call_context();
        let ctx = ctx.as_ref();
        let outcome = match &self.runtime {
            Some(handle) => handle
                .block_on(invoke_bound(ctx, function, arg, kwarg, self.test))
                .map_err(failed),
            // Templates render on plain threads and inside async tasks alike: run the call
            // on a thread of its own with its own small runtime.
            None => std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        let runtime = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .map_err(|e| e.to_string())?;
                        runtime
                            .block_on(invoke_bound(ctx, function, arg, kwarg, self.test))
                            .map_err(failed)
                    })
                    .join()
                    .unwrap_or_else(|_| Err(format!("{name} panicked")))
            }),
        };
        Some(outcome.map(|(ret, _)| brine_protocol::payload::to_json(&ret)))
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use brine_protocol::payload::map;

    pub(crate) fn s(v: &str) -> Value {
        Value::from(v)
    }

    pub(crate) fn kw(entries: &[(&str, Value)]) -> Value {
        let mut m = vec![(s("__kwarg__"), Value::Boolean(true))];
        m.extend(entries.iter().map(|(k, v)| (s(k), v.clone())));
        Value::Map(m)
    }

    pub(crate) fn ctx() -> Context {
        ctx_with_load(Value::Map(vec![]))
    }

    pub(crate) fn ctx_with_load(pub_load: Value) -> Context {
        let grains = map([
            ("id", s("m1")),
            ("os", s("Debian")),
            ("role", s("web")),
            (
                "deep",
                map([
                    ("a", map([("b", Value::from(7))])),
                    ("l", Value::Array(vec![s("x"), s("y")])),
                ]),
            ),
            ("fqdn", s("m1.example.com")),
            ("host", s("m1")),
            ("domain", s("example.com")),
            ("kernel", s("Linux")),
        ]);
        Context {
            id: "m1".into(),
            grains: Arc::new(grains),
            running: Arc::new(RunningJobs::default()),
            pub_load,
            pillar: Arc::new(Value::Map(vec![])),
            services: Arc::new(Services::detached()),
        }
    }

    pub(crate) fn publish_load(fun: &str, arg: Vec<Value>, jid: &str) -> Value {
        map([
            ("fun", s(fun)),
            ("arg", Value::Array(arg)),
            ("tgt", s("m1")),
            ("jid", s(jid)),
            ("ret", s("")),
            ("tgt_type", s("glob")),
            ("user", s("root")),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use brine_protocol::payload::map;

    #[tokio::test]
    async fn unknown_function_is_not_available() {
        let r = call(&ctx(), "nosuch.func", &[]).await;
        assert_eq!(r.ret, s("'nosuch.func' is not available."));
        assert_eq!(r.retcode, 1);
        assert_eq!(r.out.as_deref(), Some("nested"));
    }

    #[tokio::test]
    async fn bare_module_name_returns_docs_and_missing_text() {
        let r = call(&ctx(), "test", &[]).await;
        assert_eq!(r.retcode, 1);
        assert_eq!(get(&r.ret, "test"), Some(&s("'test' is not available.")));
        assert!(get(&r.ret, "test.ping").is_some_and(Value::is_str));
    }

    #[tokio::test]
    async fn missing_argument_is_salt_invalid_arguments() {
        let r = call(&ctx(), "test.echo", &[]).await;
        let text = r.ret.as_str().unwrap();
        assert!(
            text.starts_with(
                "Passed invalid arguments to test.echo: echo() missing 1 required positional argument: 'text'\n"
            ),
            "{text}"
        );
        assert!(text.len() > 100, "docstring appended: {text}");
        assert_eq!(r.retcode, 1);
        assert_eq!(r.out.as_deref(), Some("nested"));
    }

    #[tokio::test]
    async fn too_many_arguments_is_invalid_arguments() {
        let r = call(&ctx(), "test.ping", &[s("x")]).await;
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .starts_with("Passed invalid arguments to test.ping: ping() takes 0 positional arguments but 1 was given"));
        assert_eq!(r.retcode, 1);
    }

    #[tokio::test]
    async fn unknown_kwarg_is_rejected_with_invocation_error() {
        let r = call(
            &ctx(),
            "test.echo",
            &[s("hi"), kw(&[("bogus", Value::from(1))])],
        )
        .await;
        assert_eq!(
            r.ret,
            s("ERROR executing 'test.echo': The following keyword arguments are not valid: bogus=1")
        );
        assert_eq!(r.retcode, 1);
        assert_eq!(r.out.as_deref(), Some("nested"));
        let r = call(&ctx(), "test.echo", &[s("hi"), s("x=y")]).await;
        assert_eq!(
            r.ret,
            s("ERROR executing 'test.echo': The following keyword arguments are not valid: x=y")
        );
    }

    #[tokio::test]
    async fn kwarg_can_name_a_positional_parameter() {
        let r = call(&ctx(), "test.echo", &[kw(&[("text", s("hey"))])]).await;
        assert_eq!(r.ret, s("hey"));
        let r = call(&ctx(), "test.echo", &[s("text=hey")]).await;
        assert_eq!(r.ret, s("hey"));
        assert_eq!(r.retcode, 0);
        assert_eq!(r.out, None);
    }

    #[tokio::test]
    async fn result_false_in_a_map_sets_retcode_1() {
        let m = map([("result", Value::Boolean(false))]);
        let r = call(&ctx(), "test.outputter", &[m]).await;
        assert_eq!(r.retcode, 1);
        let m = map([("success", Value::Nil)]);
        assert_eq!(call(&ctx(), "test.outputter", &[m]).await.retcode, 1);
        let m = map([
            ("result", Value::Boolean(true)),
            ("success", Value::from(1)),
        ]);
        assert_eq!(call(&ctx(), "test.outputter", &[m]).await.retcode, 0);
    }

    #[test]
    fn function_list_is_sorted_and_unique() {
        let names = list_functions();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
        for f in [
            "test.ping",
            "cmd.run",
            "grains.items",
            "sys.doc",
            "saltutil.find_job",
            "status.uptime",
        ] {
            assert!(names.contains(&f), "{f}");
        }
        for f in Function::all() {
            let spec = f.spec();
            assert!(!spec.doc.trim().is_empty(), "{} has a docstring", spec.name);
            assert!(spec.sig.required <= spec.sig.params.len());
        }
    }

    #[tokio::test]
    async fn running_jobs_registry() {
        let jobs = RunningJobs::default();
        let load = publish_load("test.sleep", vec![Value::from(12)], "20260101000000000001");
        let task = tokio::spawn(std::future::pending::<()>());
        jobs.insert(
            "20260101000000000001",
            RunningJob {
                load: load.clone(),
                abort: Some(task.abort_handle()),
            },
        );
        jobs.insert(
            "20260101000000000002",
            RunningJob {
                load: publish_load("test.ping", vec![], "20260101000000000002"),
                abort: None,
            },
        );
        let list = jobs.list();
        assert_eq!(list.len(), 2);
        let first = list[0].as_map().unwrap();
        assert_eq!(first[0], (s("pid"), Value::from(std::process::id())));
        assert_eq!(get(&list[0], "fun"), Some(&s("test.sleep")));
        assert_eq!(jobs.get("20260101000000000001"), Some(list[0].clone()));
        assert!(jobs.get("nope").is_none());
        assert!(!jobs.kill("20260101000000000002"), "no abort handle");
        assert!(jobs.get("20260101000000000002").is_some());
        assert!(jobs.kill("20260101000000000001"));
        assert!(task.await.unwrap_err().is_cancelled());
        assert!(jobs.get("20260101000000000001").is_none());
        jobs.remove("20260101000000000002");
        assert!(jobs.list().is_empty());
    }
}
