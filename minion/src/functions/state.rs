//! The `state` execution module: `state.apply`, `state.sls`, `state.highstate`,
//! `state.single`, `state.test` and the `show_*` functions, on `brine-state` (the compiler and
//! the engine) with the master's file server as the state tree. Returns have Salt's shape and
//! retcodes: 1 for compile errors (a list of strings), 2 when a state failed. States fetch
//! http(s) sources with the minion's options (`ca_bundle`, `http_connect_timeout`,
//! `http_request_timeout`, `http_max_body`).

use std::path::PathBuf;
use std::sync::Arc;

use brine_protocol::payload::{from_json, to_json, Value};
use brine_render::Context as RenderContext;
use brine_state::states::MasterList;
use brine_state::top::{Matcher, Top};
use brine_state::{call_high, Compiler, High, Host, Options};
use serde_json::{json, Map, Value as Json};

use super::args::{is_true, py_str, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use crate::fileclient::FileClient;

/// The functions of the `state` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Apply,
    Highstate,
    ShowHighstate,
    ShowLowstate,
    ShowSls,
    ShowTop,
    Single,
    Sls,
    Test,
}

const SLS_PARAMS: &[&str] = &[
    "mods",
    "test",
    "exclude",
    "queue",
    "saltenv",
    "pillar",
    "state_events",
];
const HIGH_PARAMS: &[&str] = &["test", "queue", "saltenv", "pillar", "state_events"];

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Apply,
        Fun::Highstate,
        Fun::ShowHighstate,
        Fun::ShowLowstate,
        Fun::ShowSls,
        Fun::ShowTop,
        Fun::Single,
        Fun::Sls,
        Fun::Test,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc, out) = match self {
            Fun::Apply => (
                "state.apply",
                "apply_",
                Signature::new(&["mods"], 0, false, true),
                "
    Apply states: with no argument the highstate (the top file's states for this
    minion), with SLS names (comma separated or a list) those SLS files.
    Keyword arguments are those of state.sls / state.highstate (test, saltenv,
    pillar, exclude).

    CLI Example:

        salt '*' state.apply
        salt '*' state.apply webserver,users test=True
    ",
                Some("highstate"),
            ),
            Fun::Highstate => (
                "state.highstate",
                "highstate",
                Signature::new(HIGH_PARAMS, 0, false, true),
                "
    Apply the states the top file assigns to this minion.

    CLI Example:

        salt '*' state.highstate test=True
    ",
                Some("highstate"),
            ),
            Fun::ShowHighstate => (
                "state.show_highstate",
                "show_highstate",
                Signature::new(&[], 0, false, true),
                "
    Show the high data of this minion's highstate, as it would be run.

    CLI Example:

        salt '*' state.show_highstate
    ",
                None,
            ),
            Fun::ShowLowstate => (
                "state.show_lowstate",
                "show_lowstate",
                Signature::new(&[], 0, false, true),
                "
    Show the low data (the ordered chunks) of this minion's highstate.

    CLI Example:

        salt '*' state.show_lowstate
    ",
                None,
            ),
            Fun::ShowSls => (
                "state.show_sls",
                "show_sls",
                Signature::new(
                    &["mods", "test", "queue", "saltenv", "pillar"],
                    1,
                    false,
                    true,
                ),
                "
    Show the high data of the named SLS files.

    CLI Example:

        salt '*' state.show_sls core,edit.vim saltenv=dev
    ",
                None,
            ),
            Fun::ShowTop => (
                "state.show_top",
                "show_top",
                Signature::new(&["queue"], 0, false, true),
                "
    Show the SLS names the top file assigns to this minion, by saltenv.

    CLI Example:

        salt '*' state.show_top
    ",
                None,
            ),
            Fun::Single => (
                "state.single",
                "single",
                Signature::new(&["fun", "name", "test", "queue"], 2, false, true),
                "
    Run one state function, its arguments given as keyword arguments.

    CLI Example:

        salt '*' state.single pkg.installed name=vim
    ",
                Some("highstate"),
            ),
            Fun::Sls => (
                "state.sls",
                "sls",
                Signature::new(SLS_PARAMS, 0, false, true),
                "
    Apply the named SLS files (comma separated or a list) from saltenv (default
    base); test=True reports what would change; pillar= adds pillar data for the
    run; exclude= leaves out IDs or SLS files.

    CLI Example:

        salt '*' state.sls core,edit.vim test=True
    ",
                Some("highstate"),
            ),
            Fun::Test => (
                "state.test",
                "test",
                Signature::new(&[], 0, true, true),
                "
    state.apply with test=True.

    CLI Example:

        salt '*' state.test webserver
    ",
                Some("highstate"),
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out,
        }
    }

    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        if !matches!(
            self,
            Fun::ShowHighstate | Fun::ShowLowstate | Fun::ShowSls | Fun::ShowTop
        ) {
            if let Some(conflict) = running_state(ctx) {
                st.retcode = 1;
                return Ok(Value::Array(vec![Value::from(conflict)]));
            }
        }
        let ctx = ctx.clone();
        let b = b.clone();
        let outcome = tokio::task::spawn_blocking(move || self.run_blocking(&ctx, &b))
            .await
            .map_err(|e| FnError::Exception(format!("the state run stopped: {e}")))??;
        st.retcode = outcome.1;
        Ok(outcome.0)
    }

    fn run_blocking(self, ctx: &Context, b: &Bound) -> Result<(Value, i32), FnError> {
        // Salt's high state (not `state.single`) takes some options from the master's.
        let run = Run::new(ctx, b, self != Fun::Single)?;
        let mods = |key: &str| -> Vec<String> {
            b.opt(key)
                .or_else(|| b.kwarg(key))
                .map(split_mods)
                .unwrap_or_default()
        };
        match self {
            Fun::Apply => {
                let mods = mods("mods");
                if mods.is_empty() {
                    run.highstate(false)
                } else {
                    run.sls(&mods, false)
                }
            }
            Fun::Test => {
                let mods: Vec<String> = b.varargs.iter().flat_map(split_mods).collect();
                let run = Run { test: true, ..run };
                if mods.is_empty() {
                    run.highstate(false)
                } else {
                    run.sls(&mods, false)
                }
            }
            Fun::Sls => run.sls(&mods("mods"), false),
            Fun::Highstate => run.highstate(false),
            Fun::ShowSls => run.sls(&mods("mods"), true),
            Fun::ShowHighstate => run.highstate(true),
            Fun::ShowLowstate => {
                let (matches, _) = run.top()?;
                match run.compile(&matches) {
                    Ok(mut high) => {
                        let errors = brine_state::low::requisite_in(&mut high);
                        brine_state::low::apply_exclude(&mut high);
                        if !errors.is_empty() {
                            return Ok(errors_ret(errors));
                        }
                        let chunks = brine_state::low::compile_high_data(&high);
                        Ok((
                            from_json(&Json::Array(chunks.into_iter().map(Json::Object).collect())),
                            0,
                        ))
                    }
                    Err(errors) => Ok(errors_ret(errors)),
                }
            }
            Fun::ShowTop => {
                let (matches, errors) = run.top()?;
                if !errors.is_empty() {
                    return Ok(errors_ret(errors));
                }
                Ok((
                    Value::Map(
                        matches
                            .into_iter()
                            .map(|(env, sls)| {
                                (
                                    Value::from(env),
                                    Value::Array(sls.into_iter().map(Value::from).collect()),
                                )
                            })
                            .collect(),
                    ),
                    0,
                ))
            }
            Fun::Single => {
                let fun = b.get("fun").map(py_str).unwrap_or_default();
                let Some((state, function)) = fun.split_once('.') else {
                    return Err(FnError::Invocation(format!(
                        "Invalid function passed: {fun}"
                    )));
                };
                let name = b.get("name").map(to_json).unwrap_or(Json::Null);
                let mut decl = vec![json!(function), json!({"name": name})];
                for (k, v) in &b.kwargs {
                    if k.starts_with("__") || matches!(k.as_str(), "saltenv" | "pillar") {
                        continue;
                    }
                    decl.push(json!({k.clone(): to_json(v)}));
                }
                let id = py_str(b.get("name").unwrap_or(&Value::Nil));
                let mut high = High::new();
                high.insert(
                    id,
                    json!({state: decl, "__sls__": Json::Null, "__env__": run.saltenv.clone()}),
                );
                Ok(run.execute(&high))
            }
        }
    }
}

/// `mods` as Salt takes them: a list, or names separated by commas.
fn split_mods(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(py_str).collect(),
        other => py_str(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    }
}

fn errors_ret(errors: Vec<String>) -> (Value, i32) {
    (
        Value::Array(errors.into_iter().map(Value::from).collect()),
        1,
    )
}

/// Salt's refusal of a state run while another one runs.
fn running_state(ctx: &Context) -> Option<String> {
    let own = ctx.jid().map(str::to_string);
    for job in ctx.running.list() {
        let fun = brine_protocol::payload::get_str(&job, "fun").unwrap_or_default();
        let jid = brine_protocol::payload::get_str(&job, "jid").unwrap_or_default();
        let is_state = matches!(
            fun,
            "state.apply" | "state.sls" | "state.highstate" | "state.single" | "state.test"
        );
        if is_state && Some(jid) != own.as_deref() {
            let pid = brine_protocol::payload::get(&job, "pid")
                .map(py_str)
                .unwrap_or_default();
            let started = brine_protocol::jid::jid_to_time(jid).unwrap_or_default();
            return Some(format!(
                "The function \"{fun}\" is running as PID {pid} and was started at {started} with jid {jid}"
            ));
        }
    }
    None
}

/// One state run: the minion's data, the file client and how to run.
struct Run {
    files: Arc<FileClient>,
    functions: Arc<super::TemplateFunctions>,
    grains: Json,
    pillar: Json,
    id: String,
    saltenv: String,
    test: bool,
    exclude: Vec<Json>,
    cachedir: PathBuf,
    /// Where the run's events go (none for a masterless minion), and whether `state_events`
    /// fires one per state.
    master: Option<Arc<crate::channel::Channel>>,
    job: Option<brine_state::Job>,
    /// `failhard` from the master's options; the `renderer` SLS files without `#!` use.
    failhard: bool,
    renderer: String,
    /// The `opts` templates see (without `test`).
    template_opts: serde_json::Map<String, Json>,
    /// The minion's options for http(s) sources.
    http: brine_state::url::HttpOptions,
}

/// What a high state takes from the master's options (Salt's `_master_opts`): `renderer`,
/// `failhard`, `state_events`. A master that does not answer leaves Salt's defaults.
struct MasterOpts {
    renderer: String,
    failhard: bool,
    state_events: bool,
}

impl MasterOpts {
    /// A masterless minion's own options in place of the master's.
    fn local(opts: &serde_json::Map<String, Json>) -> MasterOpts {
        let flag = |k: &str| {
            opts.get(k)
                .is_some_and(brine_protocol::payload::json_truthy)
        };
        MasterOpts {
            renderer: opts
                .get("renderer")
                .and_then(Json::as_str)
                .unwrap_or("jinja|yaml")
                .to_string(),
            failhard: flag("failhard"),
            state_events: flag("state_events"),
        }
    }

    fn fetch(master: &crate::channel::Channel) -> MasterOpts {
        let load = brine_protocol::payload::map(vec![("cmd", Value::from("_master_opts"))]);
        let opts = master.request(&load).unwrap_or_else(|e| {
            tracing::warn!("the master's options could not be read: {e}");
            Value::Nil
        });
        let flag = |k: &str| brine_protocol::payload::get(&opts, k) == Some(&Value::from(true));
        MasterOpts {
            renderer: brine_protocol::payload::get_str(&opts, "renderer")
                .unwrap_or("jinja|yaml")
                .to_string(),
            failhard: flag("failhard"),
            state_events: flag("state_events"),
        }
    }
}

impl Run {
    fn new(ctx: &Context, b: &Bound, high_state: bool) -> Result<Run, FnError> {
        let Some(files) = ctx.services.file_source() else {
            return Err(FnError::Execution(
                "state functions need the master's file server (this minion has no master)".into(),
            ));
        };
        let master = ctx.services.master.clone();
        let master_opts = high_state.then(|| match &master {
            Some(m) => MasterOpts::fetch(m),
            None => MasterOpts::local(&ctx.services.opts),
        });
        let arg = |key: &str| b.get(key).or_else(|| b.kwarg(key)).filter(|v| !v.is_nil());
        let mut pillar = to_json(&ctx.pillar);
        if let Some(extra) = arg("pillar") {
            match to_json(extra) {
                Json::Object(m) => {
                    if let Json::Object(p) = &mut pillar {
                        p.extend(m);
                    }
                }
                _ => {
                    return Err(FnError::Invocation(
                        "Pillar data must be formatted as a dictionary, unless pillar_enc is specified.".into(),
                    ))
                }
            }
        }
        let exclude = match arg("exclude") {
            Some(Value::Array(items)) => items.iter().map(to_json).collect(),
            Some(other) => py_str(other).split(',').map(|s| json!(s.trim())).collect(),
            None => Vec::new(),
        };
        // `state_events` given to the call, else the minion's option or the master's.
        let state_events = arg("state_events")
            .map(|v| is_true(Some(v)))
            .unwrap_or_else(|| {
                ctx.services
                    .opts
                    .get("state_events")
                    .is_some_and(brine_protocol::payload::json_truthy)
                    || master_opts.as_ref().is_some_and(|m| m.state_events)
            });
        let job = ctx.jid().map(|jid| brine_state::Job {
            jid: jid.to_string(),
            id: ctx.id.clone(),
            state_events,
        });
        Ok(Run {
            files: Arc::new(FileClient::new(files, &ctx.services.cachedir)),
            master,
            job,
            // Run on a blocking thread of the minion's runtime (see `Fun::run`).
            functions: Arc::new(super::TemplateFunctions::on_blocking_thread_of(
                ctx.clone(),
                |_| true,
                tokio::runtime::Handle::current(),
            )),
            grains: to_json(&ctx.grains),
            pillar,
            id: ctx.id.clone(),
            saltenv: arg("saltenv").map(py_str).unwrap_or_else(|| "base".into()),
            test: is_true(arg("test")),
            exclude,
            cachedir: ctx.services.cachedir.clone(),
            failhard: master_opts.as_ref().is_some_and(|m| m.failhard),
            renderer: master_opts.map_or_else(|| "jinja|yaml".to_string(), |m| m.renderer),
            template_opts: super::template_opts(ctx),
            http: brine_state::url::HttpOptions::from_opts(&ctx.services.opts),
        })
    }

    fn render_context(&self) -> RenderContext {
        RenderContext {
            grains: self.grains.clone(),
            pillar: self.pillar.clone(),
            opts: {
                let mut opts = self.template_opts.clone();
                opts.insert("test".into(), self.test.into());
                Json::Object(opts)
            },
            renderer: self.renderer.clone(),
            ..RenderContext::default()
        }
    }

    /// The state top matched against this minion: SLS names by saltenv.
    #[allow(clippy::type_complexity)]
    fn top(&self) -> Result<(Vec<(String, Vec<String>)>, Vec<String>), FnError> {
        let envs = self.files.envs().map_err(FnError::Execution)?;
        let mut tops = Vec::new();
        let mut errors = Vec::new();
        for env in &envs {
            let Some(text) = self
                .files
                .read_text("top.sls", env)
                .map_err(FnError::Execution)?
            else {
                continue;
            };
            let ctx = RenderContext {
                saltenv: env.clone(),
                ..self.render_context()
            };
            match brine_render::render_sls(
                &text,
                "top.sls",
                &ctx,
                self.files.clone(),
                self.functions.clone(),
            ) {
                Ok(data) => tops.push((env.clone(), vec![from_json(&data)])),
                Err(e) => errors.push(format!(
                    "Rendering Primary Top file failed, render error:\n{e}"
                )),
            }
        }
        let top = Top::merge_states(&tops).map_err(|_| {
            FnError::Execution("Unable to render top file. No targets found.".into())
        })?;
        let grains = from_json(&self.grains);
        let pillar = from_json(&self.pillar);
        let nodegroups = std::collections::BTreeMap::new();
        let me = Matcher {
            id: &self.id,
            grains: &grains,
            pillar: Some(&pillar),
            pillarenv: None,
            nodegroups: &nodegroups,
        };
        Ok((top.matches(&me), errors))
    }

    /// High data of `matches`, or the compile errors.
    fn compile(&self, matches: &[(String, Vec<String>)]) -> Result<High, Vec<String>> {
        let envs = self.files.envs().map_err(|e| vec![e])?;
        let mut compiler = Compiler::new(
            self.files.clone(),
            &envs,
            self.functions.clone(),
            self.render_context(),
        );
        compiler.compile(matches, &self.exclude)
    }

    fn execute(&self, high: &High) -> (Value, i32) {
        let host = MinionHost { run: self };
        let opts = Options {
            test: self.test,
            failhard: self.failhard,
            job: self.job.clone(),
        };
        match call_high(high, &host, opts) {
            Ok(ret) => {
                let failed = ret
                    .values()
                    .any(|r| r.get("result") == Some(&Json::Bool(false)));
                (from_json(&Json::Object(ret)), if failed { 2 } else { 0 })
            }
            Err(errors) => errors_ret(errors),
        }
    }

    fn sls(&self, mods: &[String], show: bool) -> Result<(Value, i32), FnError> {
        match self.compile(&[(self.saltenv.clone(), mods.to_vec())]) {
            Ok(high) if show => Ok((from_json(&Json::Object(high)), 0)),
            Ok(high) => Ok(self.execute(&high)),
            Err(errors) => Ok(errors_ret(errors)),
        }
    }

    fn highstate(&self, show: bool) -> Result<(Value, i32), FnError> {
        let (matches, errors) = self.top()?;
        if !errors.is_empty() {
            return Ok(errors_ret(errors));
        }
        if matches.iter().all(|(_, sls)| sls.is_empty()) {
            if show {
                return Ok((Value::Map(Vec::new()), 0));
            }
            let ret = json!({"no_|-states_|-states_|-None": {
                "result": false,
                "comment": "No Top file or master_tops data matches found. Please see master log for details.",
                "name": "No States",
                "changes": {},
                "__run_num__": 0,
            }});
            return Ok((from_json(&ret), 2));
        }
        match self.compile(&matches) {
            Ok(high) if show => Ok((from_json(&Json::Object(high)), 0)),
            Ok(high) => Ok(self.execute(&high)),
            Err(errors) => Ok(errors_ret(errors)),
        }
    }
}

/// What the engine acts through on this minion.
struct MinionHost<'a> {
    run: &'a Run,
}

impl Host for MinionHost<'_> {
    fn call(&self, fun: &str, args: &[Json], kwargs: &Map<String, Json>) -> Result<Json, String> {
        let kwargs = kwargs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        brine_render::Functions::call(self.run.functions.as_ref(), fun, args, &kwargs)
            .unwrap_or_else(|| Err(format!("'{fun}' is not available.")))
    }

    fn grains(&self) -> &Json {
        &self.run.grains
    }

    fn pillar(&self) -> &Json {
        &self.run.pillar
    }

    fn fetch(&self, source: &str, saltenv: &str) -> Result<Option<Vec<u8>>, String> {
        if source.starts_with("salt://") {
            return match self.run.files.cache_file(source, saltenv)? {
                Some(path) => std::fs::read(path).map(Some).map_err(|e| e.to_string()),
                None => Ok(None),
            };
        }
        brine_state::states::read_local(source)
    }

    fn render_template(
        &self,
        text: &str,
        source: &str,
        saltenv: &str,
        vars: Map<String, Json>,
    ) -> Result<String, String> {
        let ctx = RenderContext {
            saltenv: saltenv.to_string(),
            vars,
            ..self.run.render_context()
        };
        let (path, _) = crate::fileclient::split_url(source, saltenv);
        brine_render::render_template(
            text,
            &path,
            &ctx,
            self.run.files.clone(),
            self.run.functions.clone(),
        )
        .map_err(|e| e.to_string())
    }

    fn cachedir(&self) -> PathBuf {
        self.run.cachedir.clone()
    }

    fn http_options(&self) -> brine_state::url::HttpOptions {
        self.run.http.clone()
    }

    fn params(&self, fun: &str) -> Option<brine_state::states::Params> {
        super::params(fun)
    }

    fn list_master(&self, saltenv: &str, prefix: &str) -> Result<MasterList, String> {
        let files = &self.run.files;
        let list = MasterList {
            files: files.list(saltenv)?,
            dirs: files.dir_list(saltenv, prefix)?,
            links: files.symlink_list(saltenv, prefix)?.into_iter().collect(),
        };
        Ok(list.under(prefix))
    }

    fn fire_event(&self, tag: &str, data: Json, jid: &str) {
        // Salt's `event.fire_master` with a preload: the raw load on the request channel.
        let load = brine_protocol::payload::map(vec![
            ("id", Value::from(self.run.id.as_str())),
            ("tag", Value::from(tag)),
            ("data", from_json(&data)),
            ("cmd", Value::from("_minion_event")),
            ("jid", Value::from(jid)),
        ]);
        // A masterless minion has no master to send it to.
        let Some(master) = &self.run.master else {
            return;
        };
        if let Err(e) = master.request(&load) {
            tracing::warn!("event {tag} not sent: {e}");
        }
    }
}
