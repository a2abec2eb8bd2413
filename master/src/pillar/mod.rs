//! Pillar compilation, as a Salt 3007 master does it for `_pillar` (`salt/pillar/__init__.py`):
//! the pillar top files of `pillar_roots`, matched against the minion's grains; the matched
//! SLS files rendered (Jinja, YAML) with their `include`s; the external pillars; merged by
//! `pillar_source_merging_strategy`; failures reported in `_errors`.
//!
//! - [`top`]: the top files merged and matched.
//! - [`merge`]: Salt's merging strategies.
//! - [`file_tree`]: the `file_tree` external pillar.
//!
//! External pillars are registered in [`EXT_PILLARS`], one line each.

pub mod file_tree;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use brine_protocol::config::MasterConfig;
use brine_protocol::payload::{from_json, to_json, Value};
use brine_protocol::target::fnmatch;

use crate::fileserver::FileServer;
use brine_protocol::dictupdate::{self, Strategy};
use brine_state::top::{self, Matcher, Top};

/// `b` merged into `a` by `dictupdate.merge`; a `b` that is not a mapping leaves `a` as it is.
pub(crate) fn merged(a: Value, b: &Value, strategy: Strategy, merge_lists: bool) -> Value {
    if !b.is_map() {
        return a;
    }
    dictupdate::merge(a, b, strategy, merge_lists).unwrap_or_else(|_| Value::Map(Vec::new()))
}

/// An external pillar: the pillar of the minion in `cx` from the configuration `conf`.
pub type ExtPillarFn = fn(cx: &ExtContext, conf: &serde_json::Value) -> Result<Value, String>;

/// The external pillars Brine has, by their `ext_pillar` name.
pub const EXT_PILLARS: &[(&str, ExtPillarFn)] = &[("file_tree", file_tree::ext_pillar)];

/// Include levels followed at most.
const MAX_INCLUDE_DEPTH: usize = 64;

/// What one minion asks for (a parsed `_pillar` load, or a runner's arguments).
#[derive(Debug, Clone)]
pub struct PillarRequest {
    pub id: String,
    /// The minion's grains (a map; `id` is set to the minion's id).
    pub grains: Value,
    pub saltenv: Option<String>,
    pub pillarenv: Option<String>,
    /// Pillar given on the command line: merged last, over everything.
    pub pillar_override: Value,
    pub clean_cache: bool,
}

impl PillarRequest {
    /// A request for minion `id` with `grains` (a map) and nothing else.
    pub fn new(id: &str, grains: Value) -> PillarRequest {
        let grains = match grains {
            Value::Map(m) => Value::Map(m),
            _ => Value::Map(Vec::new()),
        };
        PillarRequest {
            id: id.to_string(),
            grains,
            saltenv: None,
            pillarenv: None,
            pillar_override: Value::Map(Vec::new()),
            clean_cache: false,
        }
    }
}

type CacheEntry = (Instant, Value);

/// The master's pillar compiler.
pub struct Pillars {
    roots: Arc<FileServer>,
    pillar_roots: Vec<(String, Vec<String>)>,
    pillarenv: Option<String>,
    pillarenv_from_saltenv: bool,
    strategy: Strategy,
    strategy_none: bool,
    merge_lists: bool,
    includes_override_sls: bool,
    safe_render_error: bool,
    ext_pillar: Vec<(String, serde_json::Value)>,
    ext_pillar_first: bool,
    cache_ttl: Option<Duration>,
    pillar_opts: bool,
    renderer: String,
    state_top: String,
    env_order: Vec<String>,
    nodegroups: BTreeMap<String, Value>,
    opts: serde_json::Map<String, serde_json::Value>,
    functions: Arc<dyn brine_render::Functions>,
    cache: Mutex<HashMap<String, HashMap<Option<String>, CacheEntry>>>,
}

/// Minions whose compiled pillars are kept at once (`pillar_cache`).
const MAX_CACHED_MINIONS: usize = 100_000;

impl Pillars {
    pub fn new(cfg: &MasterConfig) -> Pillars {
        let roots: BTreeMap<String, Vec<String>> = cfg.pillar_roots.iter().cloned().collect();
        let mut opts = cfg.effective_opts();
        opts.insert("file_client".into(), "local".into());
        Pillars {
            functions: master_functions(cfg),
            roots: Arc::new(FileServer::over(cfg, roots)),
            pillar_roots: cfg.pillar_roots.clone(),
            pillarenv: cfg.pillarenv.clone(),
            pillarenv_from_saltenv: cfg.pillarenv_from_saltenv,
            strategy: Strategy::parse(&cfg.pillar_source_merging_strategy),
            strategy_none: cfg.pillar_source_merging_strategy == "none",
            merge_lists: cfg.pillar_merge_lists,
            includes_override_sls: cfg.pillar_includes_override_sls,
            safe_render_error: cfg.pillar_safe_render_error,
            ext_pillar: cfg.ext_pillar.clone(),
            ext_pillar_first: cfg.ext_pillar_first,
            cache_ttl: cfg
                .pillar_cache
                .then(|| Duration::from_secs(cfg.pillar_cache_ttl)),
            pillar_opts: cfg.pillar_opts,
            renderer: cfg.renderer.clone(),
            state_top: cfg.state_top.clone(),
            env_order: cfg.env_order.clone(),
            nodegroups: cfg.nodegroups.clone(),
            opts,
            cache: Mutex::default(),
        }
    }

    /// The compiler of a masterless minion (`salt-call --local`, `file_client: local`): its
    /// own options' pillar settings read as a master's, as Salt compiles the pillar then with
    /// the minion's options (`pillar_roots`, `file_roots`, `renderer`, `ext_pillar`, the merging
    /// options and the minion's `root_dir`/`cachedir`).
    pub fn masterless(
        minion_opts: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Pillars, brine_protocol::config::ConfigError> {
        Ok(Pillars::new(&master_view(minion_opts)?))
    }

    /// The pillar file server (`pillar_roots`).
    pub fn roots(&self) -> &FileServer {
        &self.roots
    }

    /// The pillar of the minion in `req` (Salt's `get_pillar(...).compile_pillar()`), from
    /// the cache when `pillar_cache` is on.
    pub fn compile(&self, req: &PillarRequest) -> Value {
        let Some(ttl) = self.cache_ttl else {
            return Compile::new(self, req).pillar();
        };
        let pillarenv = self.pillarenv_of(req);
        {
            let mut cache = self.lock_cache();
            if req.clean_cache {
                cache.remove(&req.id);
            }
            if let Some((at, pillar)) = cache.get(&req.id).and_then(|m| m.get(&pillarenv)) {
                if at.elapsed() < ttl {
                    return pillar.clone();
                }
            }
        }
        // A cached pillar is compiled without the request's pillar_override, as Salt does.
        let plain = PillarRequest {
            pillar_override: Value::Map(Vec::new()),
            ..req.clone()
        };
        let pillar = Compile::new(self, &plain).pillar();
        let mut cache = self.lock_cache();
        if cache.len() >= MAX_CACHED_MINIONS && !cache.contains_key(&req.id) {
            cache.clear();
        }
        cache
            .entry(req.id.clone())
            .or_default()
            .insert(pillarenv, (Instant::now(), pillar.clone()));
        pillar
    }

    /// The merged pillar top and its errors (`pillar.show_top`).
    pub fn top(&self, req: &PillarRequest) -> (Value, Vec<String>) {
        let mut c = Compile::new(self, req);
        let (top, errors) = c.top();
        (top.to_value(), errors)
    }

    /// Forget cached pillars (of `id`, or of every minion); how many minions were dropped.
    pub fn clear_cache(&self, id: Option<&str>) -> usize {
        let mut cache = self.lock_cache();
        match id {
            Some(id) => usize::from(cache.remove(id).is_some()),
            None => {
                let n = cache.len();
                cache.clear();
                n
            }
        }
    }

    fn lock_cache(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<Option<String>, CacheEntry>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pillarenv_of(&self, req: &PillarRequest) -> Option<String> {
        match &req.pillarenv {
            Some(p) => Some(p.clone()),
            None if self.pillarenv_from_saltenv => req.saltenv.clone(),
            None => self.pillarenv.clone(),
        }
        .filter(|p| !p.is_empty())
    }
}

/// A masterless minion's options read as a master's for its pillar and file server: the
/// roots, renderers, merging and file server options and `root_dir`/`cachedir`, nothing else
/// (Salt compiles the pillar and serves `salt://` from the minion's own options then).
pub fn master_view(
    minion_opts: &serde_json::Map<String, serde_json::Value>,
) -> Result<MasterConfig, brine_protocol::config::ConfigError> {
    const KEYS: &[&str] = &[
        "root_dir",
        "cachedir",
        "pillar_roots",
        "file_roots",
        "renderer",
        "renderer_whitelist",
        "renderer_blacklist",
        "ext_pillar",
        "ext_pillar_first",
        "pillarenv",
        "pillarenv_from_saltenv",
        "pillar_source_merging_strategy",
        "pillar_merge_lists",
        "pillar_includes_override_sls",
        "pillar_safe_render_error",
        "pillar_opts",
        "state_top",
        "env_order",
        "nodegroups",
        "top_file_merging_strategy",
        "default_top",
        "file_ignore_regex",
        "file_ignore_glob",
        "fileserver_followsymlinks",
        "fileserver_ignoresymlinks",
        "hash_type",
        "jinja_env",
        "jinja_sls_env",
        "conf_file",
        "config_dir",
        "gpg_keydir",
        "gpg_decrypt_must_succeed",
    ];
    let values = minion_opts
        .iter()
        .filter(|(k, v)| KEYS.contains(&k.as_str()) && !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let raw = brine_protocol::config::RawConfig {
        values,
        ..Default::default()
    };
    MasterConfig::from_raw(raw)
}

/// What an external pillar sees.
pub struct ExtContext<'a> {
    pub id: &'a str,
    pub grains: &'a Value,
    pub pillarenv: Option<&'a str>,
    /// `pillar_roots` with `__env__` resolved.
    pub pillar_roots: &'a [(String, Vec<String>)],
    pub nodegroups: &'a BTreeMap<String, Value>,
    pub renderer: &'a str,
    compile: &'a Compile<'a>,
}

impl ExtContext<'_> {
    /// Is this minion in nodegroup `name`?
    pub fn in_nodegroup(&self, name: &str) -> bool {
        self.compile.matcher(None).matches("nodegroup", name)
    }

    /// A render context for this minion.
    pub fn render_context(&self, sls: String) -> brine_render::Context {
        self.compile
            .render_context(self.pillarenv.unwrap_or("base"), sls, None)
    }

    pub fn loader(&self) -> Arc<dyn brine_render::Loader> {
        self.compile.pillars.roots.clone()
    }

    pub fn functions(&self) -> Arc<dyn brine_render::Functions> {
        self.compile.pillars.functions.clone()
    }
}

/// The execution functions templates rendered on the master (pillar, orchestration) may call
/// beyond those the renderer answers itself (`grains.*`, `pillar.get`, `config.get`,
/// `test.*`, `defaults.*`): `cmd.*` when `brine_template_cmd` is set, run on the master by
/// the minion's own `cmd` module.
pub(crate) fn master_functions(cfg: &MasterConfig) -> Arc<dyn brine_render::Functions> {
    let cmd = cfg.template_cmd.then(|| {
        let ctx = brine_minion::functions::Context {
            id: cfg.id.clone(),
            grains: Arc::new(Value::Map(vec![(
                Value::from("id"),
                Value::from(cfg.id.as_str()),
            )])),
            running: Arc::default(),
            pub_load: Value::Map(Vec::new()),
            pillar: Arc::new(Value::Map(Vec::new())),
            services: Arc::new(brine_minion::functions::Services::detached()),
        };
        brine_minion::functions::TemplateFunctions::new(ctx, |module| module == "cmd")
    });
    Arc::new(MasterFunctions { cmd })
}

struct MasterFunctions {
    cmd: Option<brine_minion::functions::TemplateFunctions>,
}

impl brine_render::Functions for MasterFunctions {
    fn call(
        &self,
        name: &str,
        args: &[serde_json::Value],
        kwargs: &BTreeMap<String, serde_json::Value>,
    ) -> Option<Result<serde_json::Value, String>> {
        if !name.starts_with("cmd.") {
            return None;
        }
        match &self.cmd {
            Some(cmd) => cmd.call(name, args, kwargs),
            None => Some(Err(format!(
                "{name} is not offered to templates rendered on this master; \
                 set brine_template_cmd: True in the master configuration to allow cmd.*"
            ))),
        }
    }
}

/// One compilation: a minion, its environments and what has gone wrong so far.
struct Compile<'a> {
    pillars: &'a Pillars,
    req: &'a PillarRequest,
    grains_json: serde_json::Value,
    saltenv: Option<String>,
    pillarenv: Option<String>,
    /// `pillar_roots` with `__env__` given the environment's name.
    roots: Vec<(String, Vec<String>)>,
    /// The SLS names of each environment (Salt's `avail`).
    avail: HashMap<String, Vec<String>>,
    /// The pillar templates see as `pillar` (the external pillar with `ext_pillar_first`).
    seen_pillar: Option<Value>,
    ignore_missing: Vec<(String, String)>,
}

impl<'a> Compile<'a> {
    fn new(pillars: &'a Pillars, req: &'a PillarRequest) -> Compile<'a> {
        let pillarenv = pillars.pillarenv_of(req);
        let saltenv = req.saltenv.clone();
        let mut roots: Vec<(String, Vec<String>)> = Vec::new();
        let mut any_env = None;
        for (env, dirs) in &pillars.pillar_roots {
            if env == "__env__" {
                any_env = Some(dirs.clone());
            } else {
                roots.push((env.clone(), dirs.clone()));
            }
        }
        if let Some(dirs) = any_env {
            let env = pillarenv
                .clone()
                .or_else(|| saltenv.clone())
                .unwrap_or_else(|| "base".into());
            if !roots.iter().any(|(e, _)| *e == env) {
                let dirs = dirs.iter().map(|d| d.replace("__env__", &env)).collect();
                roots.push((env, dirs));
            }
        }
        let mut avail = HashMap::new();
        let mut envs = vec!["base".to_string()];
        envs.extend(roots.iter().map(|(e, _)| e.clone()).filter(|e| e != "base"));
        for env in envs {
            let names = if roots.iter().any(|(e, _)| *e == env) {
                pillars.roots.sls_names(&env).unwrap_or_default()
            } else {
                Vec::new()
            };
            avail.insert(env, names);
        }
        Compile {
            pillars,
            req,
            grains_json: to_json(&req.grains),
            saltenv,
            pillarenv,
            roots,
            avail,
            seen_pillar: None,
            ignore_missing: Vec::new(),
        }
    }

    fn has_roots(&self, env: &str) -> bool {
        self.roots
            .iter()
            .any(|(e, dirs)| e == env && !dirs.is_empty())
    }

    fn matcher<'b>(&'b self, pillar: Option<&'b Value>) -> Matcher<'b> {
        Matcher {
            id: &self.req.id,
            grains: &self.req.grains,
            pillar,
            pillarenv: self.pillarenv.as_deref(),
            nodegroups: &self.pillars.nodegroups,
        }
    }

    fn render_context(
        &self,
        saltenv: &str,
        sls: String,
        vars: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> brine_render::Context {
        let mut opts = self.pillars.opts.clone();
        opts.insert("id".into(), self.req.id.clone().into());
        opts.insert("grains".into(), self.grains_json.clone());
        opts.insert(
            "saltenv".into(),
            self.saltenv
                .clone()
                .map_or(serde_json::Value::Null, Into::into),
        );
        opts.insert(
            "pillarenv".into(),
            self.pillarenv
                .clone()
                .map_or(serde_json::Value::Null, Into::into),
        );
        brine_render::Context {
            grains: self.grains_json.clone(),
            pillar: self
                .seen_pillar
                .as_ref()
                .map_or_else(|| serde_json::json!({}), to_json),
            opts: serde_json::Value::Object(opts),
            saltenv: saltenv.to_string(),
            sls,
            renderer: self.pillars.renderer.clone(),
            allow_undefined: false,
            vars: vars.cloned().unwrap_or_default(),
            offline: false,
        }
    }

    /// Render the file `rel` of pillar environment `env` to data; `Ok(None)` when it does
    /// not exist. An empty (or blank) file is an empty mapping.
    fn render_file(
        &self,
        rel: &str,
        env: &str,
        sls: &str,
        vars: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Option<Value>, String> {
        let Some(text) = self.pillars.roots.read_text(rel, env)? else {
            return Ok(None);
        };
        if text.trim().is_empty() {
            return Ok(Some(Value::Map(Vec::new())));
        }
        let ctx = self.render_context(env, sls.to_string(), vars);
        let data = brine_render::render_sls(
            &text,
            rel,
            &ctx,
            self.pillars.roots.clone(),
            self.pillars.functions.clone(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Some(match data {
            serde_json::Value::Null => Value::Map(Vec::new()),
            other => from_json(&other),
        }))
    }

    /// Salt's `get_top`: the merged top and the errors met.
    fn top(&mut self) -> (Top, Vec<String>) {
        let mut errors = Vec::new();
        let mut rendered: Vec<(String, Value)> = Vec::new();
        let envs: Vec<String> = match &self.pillarenv {
            Some(p) if self.roots.iter().any(|(e, _)| e == p) => vec![p.clone()],
            Some(_) => Vec::new(),
            None => {
                let mut envs = vec!["base".to_string()];
                envs.extend(
                    self.roots
                        .iter()
                        .map(|(e, _)| e.clone())
                        .filter(|e| e != "base"),
                );
                if self.pillars.strategy_none {
                    let only = self.saltenv.clone().unwrap_or_else(|| "base".into());
                    envs.retain(|e| *e == only);
                }
                envs
            }
        };
        let state_top = self.pillars.state_top.clone();
        for env in &envs {
            if !self.roots.iter().any(|(e, _)| e == env) {
                continue;
            }
            match self.render_file(&state_top, env, "", None) {
                Ok(Some(top)) => rendered.push((env.clone(), top)),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!("pillar top of {env} for {}: {e}", self.req.id);
                    errors.push(format!(
                        "Rendering Primary Top file failed, render error:\n{e}"
                    ));
                    // Salt stops gathering top files at the first failure.
                    break;
                }
            }
        }
        let mut includes: Vec<(String, String)> = Vec::new();
        for (env, top) in &mut rendered {
            if let Some(Value::Array(names)) = brine_protocol::payload::remove(top, "include") {
                for name in names {
                    if let Some(name) = name.as_str() {
                        includes.push((env.clone(), name.to_string()));
                    }
                }
            }
        }
        let mut done: Vec<(String, String)> = Vec::new();
        for (env, sls) in includes {
            if done.contains(&(env.clone(), sls.clone())) {
                continue;
            }
            let file = self.pillars.roots.sls_file(&sls, &env);
            let result = match &file {
                Some(f) => self.render_file(&f.rel, &env, "", None),
                None => Ok(Some(Value::Map(Vec::new()))),
            };
            match result {
                Ok(Some(top)) => rendered.push((env.clone(), top)),
                Ok(None) => {}
                Err(e) => errors.push(format!(
                    "Rendering Top file {sls} failed, render error:\n{e}"
                )),
            }
            done.push((env, sls));
        }
        let tops: Vec<Value> = rendered.into_iter().map(|(_, t)| t).collect();
        match Top::merge(&tops) {
            Ok(top) => {
                self.ignore_missing = top.ignore_missing.clone();
                (top, errors)
            }
            Err(top::Malformed) => {
                errors.push("Error encountered while rendering pillar top file.".into());
                (Top::default(), errors)
            }
        }
    }

    fn merge(&self, a: Value, b: &Value) -> Value {
        merged(a, b, self.pillars.strategy, self.pillars.merge_lists)
    }

    /// Salt's `render_pstate`: one SLS and its includes. Returns the data (`None` when the
    /// SLS is missing) and the errors met (Salt's own, repetitions included).
    fn render_pstate(
        &self,
        sls: &str,
        env: &str,
        mods: &mut HashMap<String, Option<Value>>,
        defaults: Option<&serde_json::Map<String, serde_json::Value>>,
        depth: usize,
    ) -> (Option<Value>, Vec<String>) {
        let mut errors = Vec::new();
        let file = if self.roots.iter().any(|(e, _)| e == env) {
            self.pillars.roots.sls_file(sls, env)
        } else {
            None
        };
        let Some(file) = file else {
            if self
                .ignore_missing
                .iter()
                .any(|(e, s)| e == env && s == sls)
            {
                return (None, errors);
            }
            if self.has_roots(env) {
                errors.push(format!(
                    "Specified SLS '{sls}' in environment '{env}' is not available on the salt master"
                ));
            }
            return (None, errors);
        };
        let mut state = match self.render_file(&file.rel, env, sls, defaults) {
            Ok(state) => state,
            Err(e) => {
                tracing::error!(
                    "Rendering SLS '{sls}' failed, render error:\n{e} (minion {})",
                    self.req.id
                );
                errors.push(if self.pillars.safe_render_error {
                    format!("Rendering SLS '{sls}' failed. Please see master log for details.")
                } else {
                    format!("Rendering SLS '{sls}' failed, render error:\n{e}")
                });
                None
            }
        };
        let Some(data) = state
            .as_mut()
            .filter(|s| brine_protocol::payload::py_truthy(s))
        else {
            mods.insert(sls.to_string(), state.clone());
            return (state, errors);
        };
        if !matches!(data, Value::Map(_)) {
            errors.push(format!("SLS '{sls}' does not render to a dictionary"));
            mods.insert(sls.to_string(), state.clone());
            return (state, errors);
        }
        let include = match brine_protocol::payload::get(data, "include") {
            None => None,
            Some(Value::Array(_)) => match brine_protocol::payload::remove(data, "include") {
                Some(Value::Array(items)) => Some(items),
                _ => None,
            },
            Some(_) => {
                errors.push(format!(
                    "Include Declaration in SLS '{sls}' is not formed as a list"
                ));
                None
            }
        };
        mods.insert(sls.to_string(), state.clone());
        let Some(include) = include else {
            return (state, errors);
        };
        let mut state = state.expect("a mapping");
        if depth >= MAX_INCLUDE_DEPTH {
            errors.push(format!(
                "SLS '{sls}' includes more than {MAX_INCLUDE_DEPTH} levels deep"
            ));
            return (Some(state), errors);
        }
        let avail = self.avail.get(env);
        let mut include_states = Vec::new();
        // As in Salt: the last include's `defaults` stay for the following plain includes,
        // and the last rendered include's errors are counted again for each include that
        // was rendered before.
        let mut defaults: Option<serde_json::Map<String, serde_json::Value>> = None;
        let mut last_errors: Vec<String> = Vec::new();
        for item in include {
            let (mut sub, key) = match &item {
                Value::Map(m) if !m.is_empty() => {
                    let (name, opts) = &m[0];
                    let opts = to_json(opts);
                    defaults = opts.get("defaults").and_then(|d| d.as_object()).cloned();
                    let key = opts.get("key").and_then(|k| k.as_str()).map(str::to_string);
                    (name.as_str().unwrap_or_default().to_string(), key)
                }
                Value::String(s) => (s.as_str().unwrap_or_default().to_string(), None),
                _ => continue,
            };
            let mut matched: Vec<String> = Vec::new();
            match avail {
                Some(avail) => {
                    let plain = sub.trim_start_matches('.').replace('/', ".");
                    matched.extend(avail.iter().filter(|n| fnmatch(&plain, n)).cloned());
                    if let Some(rest) = sub.strip_prefix('.') {
                        let mut parts: Vec<&str> = sls.split('.').collect();
                        if !file.init {
                            parts.pop();
                        }
                        parts.push(rest);
                        sub = parts.join(".");
                    }
                    matched.extend(avail.iter().filter(|n| fnmatch(&sub, n)).cloned());
                }
                None => {
                    errors.push(format!(
                        "No matching pillar environment for environment '{env}' found"
                    ));
                    matched.push(sub.clone());
                }
            }
            if matched.is_empty() {
                matched.push(sub.clone());
            }
            for name in matched {
                let nstate = match mods.get(&name) {
                    Some(done) => done.clone(),
                    None => {
                        let (nstate, err) =
                            self.render_pstate(&name, env, mods, defaults.as_ref(), depth + 1);
                        last_errors = err;
                        nstate
                    }
                };
                errors.extend(last_errors.iter().cloned());
                let Some(mut nstate) = nstate.filter(brine_protocol::payload::py_truthy) else {
                    continue;
                };
                if !matches!(nstate, Value::Map(_)) {
                    continue;
                }
                if let Some(key) = &key {
                    for fragment in key.rsplit(':') {
                        nstate = Value::Map(vec![(Value::from(fragment), nstate)]);
                    }
                }
                if self.pillars.includes_override_sls {
                    state = self.merge(state, &nstate);
                } else {
                    include_states.push(nstate);
                }
            }
        }
        if !self.pillars.includes_override_sls {
            include_states.push(state);
            let mut merged: Option<Value> = None;
            for s in include_states {
                merged = Some(match merged {
                    None => s,
                    Some(m) => self.merge(m, &s),
                });
            }
            state = merged.expect("at least the including SLS");
        }
        (Some(state), errors)
    }

    /// Salt's `render_pillar`: every matched SLS, merged in order.
    fn render_pillar(
        &self,
        matches: &[(String, Vec<String>)],
        mut pillar: Value,
        errors: &mut Vec<String>,
    ) -> Value {
        let mut ordered: Vec<&(String, Vec<String>)> = Vec::new();
        for env in &self.pillars.env_order {
            ordered.extend(matches.iter().filter(|(e, _)| e == env));
        }
        ordered.extend(
            matches
                .iter()
                .filter(|(e, _)| !self.pillars.env_order.contains(e)),
        );
        for (env, globs) in ordered {
            let mut files: Vec<String> = Vec::new();
            for glob in globs {
                match self.avail.get(env) {
                    Some(avail) => {
                        let found: Vec<String> =
                            avail.iter().filter(|n| fnmatch(glob, n)).cloned().collect();
                        if found.is_empty() {
                            files.push(glob.clone());
                        } else {
                            files.extend(found);
                        }
                    }
                    None => {
                        errors.push(format!(
                            "No matching pillar environment for environment '{env}' found"
                        ));
                        files.push(glob.clone());
                    }
                }
            }
            let mut mods = HashMap::new();
            for sls in files {
                let (pstate, err) = self.render_pstate(&sls, env, &mut mods, None, 0);
                errors.extend(err);
                let Some(pstate) = pstate else {
                    continue;
                };
                if !matches!(pstate, Value::Map(_)) {
                    tracing::error!(
                        "The rendered pillar sls file, '{sls}' state did not return the expected data format"
                    );
                    continue;
                }
                pillar = self.merge(pillar, &pstate);
            }
        }
        pillar
    }

    /// Salt's `ext_pillar`: the configured external pillars merged into `pillar`.
    fn ext_pillar(&self, mut pillar: Value, errors: &mut Vec<String>) -> Value {
        if !map_is_empty(&self.req.pillar_override) {
            pillar = self.merge(pillar, &self.req.pillar_override);
        }
        let cx = ExtContext {
            id: &self.req.id,
            grains: &self.req.grains,
            pillarenv: self.pillarenv.as_deref(),
            pillar_roots: &self.roots,
            nodegroups: &self.pillars.nodegroups,
            renderer: &self.pillars.renderer,
            compile: self,
        };
        for (name, conf) in &self.pillars.ext_pillar {
            let Some((_, run)) = EXT_PILLARS.iter().find(|(n, _)| n == name) else {
                tracing::error!("Specified ext_pillar interface {name} is unavailable");
                continue;
            };
            match run(&cx, conf) {
                Ok(ext) => {
                    if brine_protocol::payload::py_truthy(&ext) {
                        pillar = self.merge(pillar, &ext);
                    }
                }
                Err(e) => errors.push(format!("Failed to load ext_pillar {name}: {e}")),
            }
        }
        pillar
    }

    /// Salt's `compile_pillar`.
    fn pillar(mut self) -> Value {
        let (top, top_errors) = self.top();
        let mut errors = Vec::new();
        let mut pillar = if self.pillars.ext_pillar_first {
            let ext = self.ext_pillar(self.req.pillar_override.clone(), &mut errors);
            self.seen_pillar = Some(ext.clone());
            let matches = top.matches(&self.matcher(Some(&ext)));
            let rendered =
                self.render_pillar(&matches, self.req.pillar_override.clone(), &mut errors);
            self.merge(ext, &rendered)
        } else {
            let matches = top.matches(&self.matcher(None));
            let rendered =
                self.render_pillar(&matches, self.req.pillar_override.clone(), &mut errors);
            self.ext_pillar(rendered, &mut errors)
        };
        errors.extend(top_errors);
        if self.pillars.pillar_opts {
            let mut master = self.pillars.opts.clone();
            master.remove("grains");
            master.insert("saltversion".into(), brine_protocol::SALT_VERSION.into());
            brine_protocol::payload::set(
                &mut pillar,
                "master",
                from_json(&serde_json::Value::Object(master)),
            );
        }
        if !errors.is_empty() {
            for e in &errors {
                tracing::error!("Pillar render error: {e} (minion {})", self.req.id);
            }
            brine_protocol::payload::set(
                &mut pillar,
                "_errors",
                Value::Array(errors.into_iter().map(Value::from).collect()),
            );
        }
        if !map_is_empty(&self.req.pillar_override) {
            pillar = self.merge(pillar, &self.req.pillar_override);
        }
        pillar
    }
}

fn map_is_empty(v: &Value) -> bool {
    !matches!(v, Value::Map(m) if !m.is_empty())
}

#[cfg(test)]
mod tests;
