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
use brine_state::{call_high, Compiler, High, Host, Options, RunError};
use serde_json::{json, Map, Value as Json};

use super::args::{is_true, py_str, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use crate::fileclient::FileClient;

mod more;

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
    SlsId,
    Test,
    ShowLowSls,
    ShowStates,
    SlsExists,
    IdExists,
    ShowStateUsage,
    Running,
    ClearCache,
    Template,
    TemplateStr,
    Top,
    Low,
    /// `state.high`.
    HighData,
    Disable,
    Enable,
    ListDisabled,
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
        Fun::SlsId,
        Fun::Test,
        Fun::ShowLowSls,
        Fun::ShowStates,
        Fun::SlsExists,
        Fun::IdExists,
        Fun::ShowStateUsage,
        Fun::Running,
        Fun::ClearCache,
        Fun::Template,
        Fun::TemplateStr,
        Fun::Top,
        Fun::Low,
        Fun::HighData,
        Fun::Disable,
        Fun::Enable,
        Fun::ListDisabled,
    ];

    pub(crate) fn spec(self) -> Spec {
        if let Some(spec) = more::spec(self) {
            return spec;
        }
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
            Fun::SlsId => (
                "state.sls_id",
                "sls_id",
                Signature::new(
                    &["id_", "mods", "test", "queue", "state_events"],
                    2,
                    false,
                    true,
                ),
                "
    Run one ID of the named SLS files (comma separated or a list) from saltenv
    (default base), with the states it requires; test=True reports what would
    change; pillar= adds pillar data for the run.

    CLI Example:

        salt '*' state.sls_id my_state my_module
        salt '*' state.sls_id my_state my_module,a_common_module test=True
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
            _ => unreachable!("the spec of {self:?} is in state/more.rs"),
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
        if let Some(ret) = more::run_quick(self, ctx, b, st).await {
            return ret;
        }
        // Salt's `_disabled(["highstate"])` comes before the check for a running state.
        let highstate = match self {
            Fun::Highstate => true,
            Fun::Apply => b
                .opt("mods")
                .or_else(|| b.kwarg("mods"))
                .map(split_mods)
                .unwrap_or_default()
                .is_empty(),
            Fun::Test => b.varargs.iter().flat_map(split_mods).next().is_none(),
            _ => false,
        };
        if highstate && !more::disabled(&ctx.grains, &["highstate".to_string()]).is_empty() {
            return Ok(more::highstate_disabled());
        }
        if !matches!(
            self,
            Fun::ShowHighstate
                | Fun::ShowLowstate
                | Fun::ShowSls
                | Fun::ShowTop
                | Fun::ShowLowSls
                | Fun::SlsExists
                | Fun::IdExists
        ) {
            if let Some(conflict) = more::running(ctx).into_iter().next() {
                st.retcode = 1;
                return Ok(Value::Array(vec![Value::from(conflict)]));
            }
        }
        // Salt's `state.sls` refuses disabled SLS names (given as a list, or as one string).
        let sls_mods = match self {
            Fun::Sls | Fun::Apply => b.opt("mods").or_else(|| b.kwarg("mods")),
            _ => None,
        };
        if let Some(mods) = sls_mods {
            let names = match mods {
                Value::Array(items) => items.iter().map(py_str).collect(),
                other => vec![py_str(other)],
            };
            let disabled = more::disabled(&ctx.grains, &names);
            if !disabled.is_empty() {
                st.retcode = 1;
                return Ok(Value::Array(
                    disabled.into_iter().map(Value::from).collect(),
                ));
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
        if let Some(outcome) = more::run_blocking(self, ctx, b) {
            return outcome;
        }
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
                let run = Run::build(ctx, b, true, true)?;
                if mods.is_empty() {
                    run.highstate(false)
                } else {
                    run.sls(&mods, false)
                }
            }
            Fun::Sls => run.sls(&mods("mods"), false),
            Fun::SlsId => {
                let id = b.get("id_").map(py_str).unwrap_or_default();
                let given = b.get("mods").cloned().unwrap_or(Value::Nil);
                let high = match run.compile(&[(run.saltenv.clone(), split_mods(&given))]) {
                    Ok(high) => high,
                    Err(errors) => return Ok(errors_ret(errors)),
                };
                let (ret, retcode) = run.execute_id(&high, &id)?;
                if matches!(&ret, Value::Map(m) if m.is_empty()) {
                    return Err(FnError::Invocation(format!(
                        "No matches for ID '{id}' found in SLS '{}' within saltenv '{}'",
                        py_str(&given),
                        run.saltenv
                    )));
                }
                Ok((ret, retcode))
            }
            Fun::Highstate => run.highstate(false),
            Fun::ShowSls => run.sls(&mods("mods"), true),
            Fun::ShowHighstate => run.highstate(true),
            Fun::ShowLowstate => {
                let (matches, _) = run.top()?;
                match run.low_chunks(&matches) {
                    Ok(chunks) => Ok((
                        from_json(&Json::Array(chunks.into_iter().map(Json::Object).collect())),
                        0,
                    )),
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
                run.execute(&high)
            }
            _ => unreachable!("{self:?} runs in state/more.rs"),
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

/// A run's answer and retcode: its results (retcode 2 when a state failed), its high data
/// errors (retcode 1), or the refusal that ended it (an error of the call).
fn run_answer(run: Result<Map<String, Json>, RunError>) -> Result<(Value, i32), FnError> {
    match run {
        Ok(ret) => {
            let failed = ret
                .values()
                .any(|r| r.get("result") == Some(&Json::Bool(false)));
            Ok((from_json(&Json::Object(ret)), if failed { 2 } else { 0 }))
        }
        Err(RunError::High(errors)) => Ok(errors_ret(errors)),
        Err(RunError::Refused(why)) => Err(FnError::Invocation(why)),
    }
}

fn errors_ret(errors: Vec<String>) -> (Value, i32) {
    (
        Value::Array(errors.into_iter().map(Value::from).collect()),
        1,
    )
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
    /// The state top file (`state.top` names another) and the one saltenv it is read from.
    top_file: String,
    top_saltenv: Option<String>,
    /// The `state_runs_disabled` grain: patterns of state functions not to run.
    disabled: Vec<String>,
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
        Run::build(ctx, b, high_state, false)
    }

    /// A run in test mode when `force_test` (`state.test`) or as Salt's `_get_test_value`
    /// decides: the `test` argument when given, else a `test` keyword in any case, else a
    /// `test: True` grain or pillar key, else the minion's `test` option.
    fn build(ctx: &Context, b: &Bound, high_state: bool, force_test: bool) -> Result<Run, FnError> {
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
        let test = force_test
            || match arg("test") {
                Some(given) => is_true(Some(given)),
                None => {
                    b.kwargs
                        .iter()
                        .any(|(k, v)| k.eq_ignore_ascii_case("test") && is_true(Some(v)))
                        || [&ctx.grains, &ctx.pillar].iter().any(|m| {
                            brine_protocol::payload::get(m, "test") == Some(&Value::Boolean(true))
                        })
                        || ctx
                            .services
                            .opts
                            .get("test")
                            .is_some_and(brine_protocol::payload::json_truthy)
                }
            };
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
            functions: Arc::new(
                super::TemplateFunctions::on_blocking_thread_of(
                    ctx.clone(),
                    |_| true,
                    tokio::runtime::Handle::current(),
                )
                .in_test_run(test),
            ),
            grains: to_json(&ctx.grains),
            pillar,
            id: ctx.id.clone(),
            saltenv: arg("saltenv").map(py_str).unwrap_or_else(|| "base".into()),
            test,
            exclude,
            cachedir: ctx.services.cachedir.clone(),
            failhard: master_opts.as_ref().is_some_and(|m| m.failhard),
            renderer: master_opts.map_or_else(|| "jinja|yaml".to_string(), |m| m.renderer),
            template_opts: super::template_opts(ctx),
            http: brine_state::url::HttpOptions::from_opts(&ctx.services.opts),
            top_file: "top.sls".into(),
            top_saltenv: None,
            disabled: more::disabled_runs(&ctx.grains),
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
            if self.top_saltenv.as_ref().is_some_and(|only| only != env) {
                continue;
            }
            let Some(text) = self
                .files
                .read_text(&self.top_file, env)
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

    /// The low chunks of the high data of `matches` (as `state.show_lowstate` shows them).
    fn low_chunks(
        &self,
        matches: &[(String, Vec<String>)],
    ) -> Result<Vec<brine_state::low::Low>, Vec<String>> {
        let mut high = self.compile(matches)?;
        let errors = brine_state::low::requisite_in(&mut high);
        brine_state::low::apply_exclude(&mut high);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(brine_state::low::compile_high_data(&high))
    }

    /// The engine's options for this run.
    fn options(&self) -> Options {
        Options {
            test: self.test,
            failhard: self.failhard,
            job: self.job.clone(),
        }
    }

    /// The run of `high`; a state that gives its function arguments it does not take ends
    /// it with Salt's `SaltInvocationError`.
    fn execute(&self, high: &High) -> Result<(Value, i32), FnError> {
        let host = MinionHost { run: self };
        let mut high = high.clone();
        let disabled = more::take_disabled(&mut high, &self.disabled);
        let run = call_high(&high, &host, self.options()).map(|ret| {
            if disabled.is_empty() {
                ret
            } else {
                more::merge_disabled(disabled, ret)
            }
        });
        run_answer(run)
    }

    /// `state.sls_id`'s run of one ID of `high` (no state is left out as disabled: Salt's
    /// `sls_id` does not read `state_runs_disabled`).
    fn execute_id(&self, high: &High, id: &str) -> Result<(Value, i32), FnError> {
        let host = MinionHost { run: self };
        run_answer(brine_state::call_id(high, &host, self.options(), id))
    }

    fn sls(&self, mods: &[String], show: bool) -> Result<(Value, i32), FnError> {
        match self.compile(&[(self.saltenv.clone(), mods.to_vec())]) {
            Ok(high) if show => Ok((from_json(&Json::Object(high)), 0)),
            Ok(high) => self.execute(&high),
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
            Ok(high) => self.execute(&high),
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

    fn cache_file(&self, source: &str, saltenv: &str) -> Result<Option<PathBuf>, String> {
        self.run.files.cache_file(source, saltenv)
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

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{call, CoreGrains, GrainsSource, Services};
    use super::*;
    use brine_protocol::payload::get;
    use sha2::Digest;
    use std::path::Path;

    /// A file server over a directory (the `base` saltenv), as a masterless minion has.
    struct DirFiles(PathBuf);

    impl crate::fileclient::FileSource for DirFiles {
        fn request(&self, load: &Value) -> Result<Value, String> {
            let arg = |k: &str| {
                brine_protocol::payload::get_str(load, k)
                    .unwrap_or_default()
                    .to_string()
            };
            let files = || -> Vec<String> {
                let mut out: Vec<String> = std::fs::read_dir(&self.0)
                    .unwrap()
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                out.sort();
                out
            };
            Ok(match arg("cmd").as_str() {
                "_file_envs" => Value::Array(vec![Value::from("base")]),
                "_file_list" => Value::Array(files().into_iter().map(Value::from).collect()),
                "_file_hash" => match std::fs::read(self.0.join(arg("path"))) {
                    Ok(b) => brine_protocol::payload::map(vec![
                        ("hsum", Value::from(hex::encode(sha2::Sha256::digest(&b)))),
                        ("hash_type", Value::from("sha256")),
                    ]),
                    Err(_) => Value::Map(vec![]),
                },
                "_serve_file" => {
                    let data = if get(load, "loc").and_then(Value::as_u64) == Some(0) {
                        std::fs::read(self.0.join(arg("path"))).unwrap_or_default()
                    } else {
                        Vec::new()
                    };
                    brine_protocol::payload::map(vec![
                        ("data", Value::Binary(data)),
                        ("dest", Value::from(arg("path"))),
                    ])
                }
                _ => Value::Array(vec![]),
            })
        }
    }

    /// A masterless minion whose state tree is `srv` and whose grains file and cache are in `etc`.
    fn minion(srv: &Path, etc: &Path) -> Context {
        let base = ctx();
        let mut services = Services::detached()
            .with_grains(GrainsSource {
                core: CoreGrains::Fixed((*base.grains).clone()),
                config_dir: Some(etc.to_path_buf()),
                config_grains: Value::Map(vec![]),
            })
            .with_local_files(Arc::new(DirFiles(srv.to_path_buf())));
        services.cachedir = etc.join("cache");
        Context {
            grains: services.grains(),
            services: Arc::new(services),
            ..base
        }
    }

    /// The next job's context: the grains as the minion holds them now.
    fn next(c: &Context) -> Context {
        Context {
            grains: c.services.grains(),
            ..c.clone()
        }
    }

    fn tree() -> (tempfile::TempDir, tempfile::TempDir) {
        let srv = tempfile::tempdir().unwrap();
        let etc = tempfile::tempdir().unwrap();
        let w = |name: &str, text: &str| std::fs::write(srv.path().join(name), text).unwrap();
        w("top.sls", "base:\n  '*':\n    - web\n    - db\n");
        w("alt_top.sls", "base:\n  '*':\n    - db\n");
        w(
            "web.sls",
            "include:\n  - db\n\nweb_pkg:\n  test.succeed_without_changes:\n    - name: nginx\n    - require:\n      - test: db_setup\n\nweb_conf:\n  test.succeed_with_changes:\n    - watch:\n      - test: web_pkg\n",
        );
        w("db.sls", "db_setup:\n  test.nop:\n    - name: dbname\n");
        w("unused.sls", "u:\n  test.nop\n");
        (srv, etc)
    }

    async fn run(c: &Context, fun: &str, args: &[Value]) -> (Json, i32) {
        let r = call(&next(c), fun, args).await;
        (to_json(&r.ret), r.retcode)
    }

    fn strip_times(mut v: Json) -> Json {
        if let Json::Object(m) = &mut v {
            for ret in m.values_mut() {
                if let Json::Object(r) = ret {
                    r.remove("start_time");
                    r.remove("duration");
                }
            }
        }
        v
    }

    // The answers below are those of Salt 3007's `salt-call --local` on the same tree.

    #[tokio::test(flavor = "multi_thread")]
    async fn sls_id_runs_one_id_with_what_it_requires() {
        let (srv, etc) = tree();
        let c = minion(srv.path(), etc.path());
        let summary = |ret: &Json| -> Vec<(String, i64, Json, Json)> {
            let mut rows: Vec<_> = ret
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v["__run_num__"].as_i64().unwrap(),
                        v["result"].clone(),
                        v["comment"].clone(),
                    )
                })
                .collect();
            rows.sort_by_key(|r| r.1);
            rows
        };
        let (ret, rc) = run(&c, "state.sls_id", &[s("web_conf"), s("web")]).await;
        assert_eq!(rc, 0);
        assert_eq!(
            summary(&ret),
            [
                (
                    "test_|-db_setup_|-dbname_|-nop".to_string(),
                    0,
                    json!(true),
                    json!("Success!")
                ),
                (
                    "test_|-web_pkg_|-nginx_|-succeed_without_changes".into(),
                    1,
                    json!(true),
                    json!("Success!")
                ),
                (
                    "test_|-web_conf_|-web_conf_|-succeed_with_changes".into(),
                    2,
                    json!(true),
                    json!("Success!")
                ),
            ]
        );
        let (ret, rc) = run(
            &c,
            "state.sls_id",
            &[s("web_conf"), s("web"), s("test=True")],
        )
        .await;
        assert_eq!(rc, 0);
        let conf = &summary(&ret)[2];
        assert_eq!(
            (&conf.2, &conf.3),
            (
                &json!(null),
                &json!("If we weren't testing, this would be successful with changes")
            )
        );
        let (ret, _) = run(
            &c,
            "state.sls_id",
            &[s("db_setup"), Value::Array(vec![s("web"), s("db")])],
        )
        .await;
        assert_eq!(summary(&ret).len(), 1);
        assert_eq!(
            run(&c, "state.sls_id", &[s("web_conf"), s("nosuch")]).await,
            (
                json!(["No matching sls found for 'nosuch' in env 'base'"]),
                1
            )
        );
        assert_eq!(
            run(&c, "state.sls_id", &[s("nope"), s("web")]).await,
            (json!("ERROR executing 'state.sls_id': No matches for ID 'nope' found in SLS 'web' within saltenv 'base'"), 1)
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn low_sls_states_usage_and_existence() {
        let (srv, etc) = tree();
        let c = minion(srv.path(), etc.path());
        let (low, rc) = run(&c, "state.show_low_sls", &[s("web")]).await;
        assert_eq!(rc, 0);
        let ids: Vec<(&str, &str, i64)> = low
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["__id__"].as_str().unwrap(),
                    c["fun"].as_str().unwrap(),
                    c["order"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("db_setup", "nop", 10000),
                ("web_pkg", "succeed_without_changes", 10001),
                ("web_conf", "succeed_with_changes", 10002)
            ]
        );
        assert_eq!(low[0]["__sls_included_from__"], json!(["web"]));
        assert_eq!(low[1]["require"], json!([{"test": "db_setup"}]));
        let (err, rc) = run(&c, "state.show_low_sls", &[s("nope")]).await;
        assert_eq!(rc, 1);
        assert_eq!(
            err,
            json!(["No matching sls found for 'nope' in env 'base'"])
        );
        assert_eq!(
            run(&c, "state.show_states", &[]).await,
            (json!(["db", "web"]), 0)
        );
        assert_eq!(
            run(&c, "state.sls_exists", &[s("web")]).await,
            (json!(true), 0)
        );
        assert_eq!(
            run(&c, "state.sls_exists", &[s("nope")]).await,
            (json!(false), 1)
        );
        assert_eq!(
            run(&c, "state.id_exists", &[s("web_pkg,db_setup"), s("web")]).await,
            (json!(true), 0)
        );
        assert_eq!(
            run(&c, "state.id_exists", &[s("x"), s("web")]).await,
            (json!(false), 0)
        );
        assert_eq!(
            run(&c, "state.show_state_usage", &[]).await,
            (
                json!({"base": {"used": ["db", "web"], "unused": ["alt_top", "top", "unused"],
                    "count_all": 5, "count_used": 2, "count_unused": 3}}),
                0
            )
        );
        let (ret, rc) = run(&c, "state.top", &[s("alt_top.sls")]).await;
        assert_eq!(rc, 0);
        assert_eq!(
            ret.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["test_|-db_setup_|-dbname_|-nop"]
        );
        let (ret, rc) = run(&c, "state.top", &[s("nosuch.sls")]).await;
        assert_eq!(
            (ret["no_|-states_|-states_|-None"]["name"].clone(), rc),
            (json!("No States"), 2)
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn low_high_and_templates() {
        let (srv, etc) = tree();
        let c = minion(srv.path(), etc.path());
        let low = from_json(&json!({"state": "test", "fun": "nop", "name": "vi", "__id__": "vi"}));
        let (ret, rc) = run(&c, "state.low", &[low]).await;
        assert_eq!(
            strip_times(json!({"x": ret}))["x"],
            json!({"name": "vi", "changes": {}, "result": true, "comment": "Success!", "__sls__": null, "__run_num__": 0, "__id__": "vi"})
        );
        assert_eq!(rc, 0);
        let fails = from_json(
            &json!({"state": "test", "fun": "fail_without_changes", "name": "vi", "__id__": "x"}),
        );
        assert_eq!(run(&c, "state.low", &[fails]).await.1, 1);
        let nosuch = from_json(&json!({"state": "test", "fun": "nosuch", "name": "vi"}));
        assert_eq!(
            run(&c, "state.low", &[nosuch]).await,
            (json!(["Specified state 'test.nosuch' was not found"]), 1)
        );
        let nofun = from_json(&json!({"state": "test", "name": "vi"}));
        assert_eq!(
            run(&c, "state.low", &[nofun]).await,
            (json!(["Missing \"fun\" data"]), 1)
        );

        let high = from_json(&json!({"vim": {"test": ["nop"]}}));
        let (ret, rc) = run(&c, "state.high", &[high]).await;
        assert_eq!(rc, 0);
        assert_eq!(
            strip_times(ret),
            json!({"test_|-vim_|-vim_|-nop": {"name": "vim", "changes": {}, "result": true, "comment": "Success!", "__sls__": null, "__run_num__": 0, "__id__": "vim"}})
        );

        let (ret, rc) = run(&c, "state.template_str", &[s("x: test.nop")]).await;
        assert_eq!(
            (ret["test_|-x_|-x_|-nop"]["comment"].clone(), rc),
            (json!("Success!"), 0)
        );
        assert_eq!(
            run(&c, "state.template_str", &[s("include: [a]")]).await,
            (json!(["The 'include' declaration found on '<template-str>' is invalid when rendering single templates"]), 1)
        );
        let tem = etc.path().join("tem.sls");
        std::fs::write(
            &tem,
            "tid:\n  test.succeed_with_changes:\n    - name: {{ grains['id'] }}\n",
        )
        .unwrap();
        let path = tem.to_string_lossy().to_string();
        let (ret, rc) = run(
            &c,
            "state.template",
            &[s(path.strip_suffix(".sls").unwrap())],
        )
        .await;
        let r = &ret["test_|-tid_|-m1_|-succeed_with_changes"];
        assert_eq!(
            (r["__sls__"].clone(), r["result"].clone(), rc),
            (json!(path), json!(true), 0)
        );
        let missing = etc.path().join("none.sls").to_string_lossy().to_string();
        assert_eq!(
            run(&c, "state.template", &[s(&missing)]).await,
            (
                json!([format!(
                    "Specified SLS {missing} on local filesystem cannot be found."
                )]),
                1
            )
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn disabled_states_are_kept_in_the_grain_and_refused() {
        let (srv, etc) = tree();
        let c = minion(srv.path(), etc.path());
        assert_eq!(run(&c, "state.list_disabled", &[]).await, (json!(""), 0));
        assert_eq!(
            run(
                &c,
                "state.disable",
                &[s("highstate,test.succeed_with_changes")]
            )
            .await,
            (
                json!({"res": true, "msg": "Info: highstate state disabled.\nInfo: test.succeed_with_changes state disabled."}),
                0
            )
        );
        assert_eq!(
            std::fs::read_to_string(etc.path().join("grains")).unwrap(),
            "state_runs_disabled:\n- highstate\n- test.succeed_with_changes\n"
        );
        assert_eq!(
            run(&c, "state.disable", &[s("highstate")]).await.0,
            json!({"res": true, "msg": "Info: highstate state already disabled."})
        );
        assert_eq!(
            run(&c, "state.list_disabled", &[]).await.0,
            json!(["highstate", "test.succeed_with_changes"])
        );
        let hs = json!({"name": "Salt highstate run is disabled. To re-enable, run state.enable highstate", "result": "False", "comment": "Disabled"});
        assert_eq!(run(&c, "state.highstate", &[]).await, (hs.clone(), 0));
        assert_eq!(run(&c, "state.apply", &[]).await, (hs, 0));
        // A disabled state function fails first; the others run after it.
        let (ret, rc) = run(&c, "state.sls", &[s("web")]).await;
        assert_eq!(rc, 2);
        assert_eq!(
            ret["test_|-web_conf_|-web_conf_|-succeed_with_changes"],
            json!({"changes": {}, "result": false, "__run_num__": 0, "__sls__": "web",
                "comment": "The state function \"test.succeed_with_changes\" is currently disabled by \"test.succeed_with_changes\", to re-enable, run state.enable test.succeed_with_changes."})
        );
        assert_eq!(
            ret["test_|-db_setup_|-dbname_|-nop"]["__run_num__"],
            json!(1)
        );
        assert_eq!(
            ret["test_|-web_pkg_|-nginx_|-succeed_without_changes"]["__run_num__"],
            json!(2)
        );
        run(&c, "state.disable", &[s("db.*")]).await;
        let (ret, rc) = run(&c, "state.sls", &[s("db")]).await;
        assert_eq!(
            (ret["test_|-db_setup_|-dbname_|-nop"]["result"].clone(), rc),
            (json!(true), 0),
            "`db.*` disables what is under db, not db"
        );
        assert_eq!(
            run(&c, "state.sls", &[s("db.sub")]).await,
            (json!(["The state file \"db.sub\" is currently disabled by \"db.*\", to re-enable, run state.enable db.*."]), 1)
        );
        run(&c, "state.disable", &[s("db")]).await;
        assert_eq!(
            run(&c, "state.apply", &[s("db")]).await,
            (json!(["The state file \"db\" is currently disabled, to re-enable, run state.enable db."]), 1)
        );
        assert_eq!(
            run(&c, "state.enable", &[s("highstate,db,nope")]).await.0,
            json!({"res": true, "msg": "Info: highstate state enabled.\nInfo: db state enabled.\nInfo: nope state already enabled."})
        );
        assert_eq!(
            run(&c, "state.list_disabled", &[]).await.0,
            json!(["test.succeed_with_changes", "db.*"])
        );
    }

    #[tokio::test]
    async fn running_and_cache() {
        let etc = tempfile::tempdir().unwrap();
        let c = minion(etc.path(), etc.path());
        c.running.insert(
            "20260101000000000001",
            super::super::RunningJob {
                load: publish_load("state.sls", vec![s("web")], "20260101000000000001"),
                abort: None,
            },
        );
        let (lines, _) = run(&c, "state.running", &[]).await;
        assert!(
            lines[0]
                .as_str()
                .unwrap()
                .starts_with("The function \"state.sls\" is running as PID "),
            "{lines}"
        );
        assert_eq!(
            run(&c, "state.running", &[s("concurrent=True")]).await.0,
            json!([])
        );
        let (ret, rc) = run(&c, "state.sls", &[s("web")]).await;
        assert_eq!((ret, rc), (lines, 1));

        std::fs::create_dir_all(etc.path().join("cache")).unwrap();
        std::fs::write(etc.path().join("cache/highstate.cache.p"), "x").unwrap();
        assert_eq!(
            run(&c, "state.clear_cache", &[]).await,
            (json!(["highstate.cache.p"]), 0)
        );
        assert_eq!(run(&c, "state.clear_cache", &[]).await, (json!([]), 0));
    }
}
