//! The `state` functions beyond running SLS files: the low data of SLS files, which states a
//! highstate uses, high and low data run as given, single templates, another top file, the
//! states a minion refuses to run (`state.disable`, kept in the `state_runs_disabled` grain as
//! Salt keeps them).

use brine_protocol::payload::{from_json, get, get_str, to_json, Value};
use brine_render::Context as RenderContext;
use serde_json::{json, Map, Value as Json};

use super::super::args::{is_true, py_str, split_input, Bound, Signature};
use super::super::{CallState, Context, FnError, Spec};
use super::{errors_ret, split_mods, Fun, Run};
use crate::functions::sys::fnmatch;

/// The spec of a function of this file, `None` for the others.
pub(super) fn spec(fun: Fun) -> Option<Spec> {
    let (name, pyname, sig, doc, out) = match fun {
        Fun::ShowLowSls => (
            "state.show_low_sls",
            "show_low_sls",
            Signature::new(&["mods", "test", "queue"], 1, false, true),
            "
    Display the low data from a specific sls. The default environment is
    ``base``, use ``saltenv`` to specify a different environment.

    saltenv
        Specify a salt fileserver environment to be used when applying states

    pillar
        Custom Pillar values, passed as a dictionary of key-value pairs

    CLI Example:

        salt '*' state.show_low_sls foo
        salt '*' state.show_low_sls foo saltenv=dev
    ",
            None,
        ),
        Fun::ShowStates => (
            "state.show_states",
            "show_states",
            Signature::new(&["queue"], 0, false, true),
            "
    Returns the list of states that will be applied on highstate.

    CLI Example:

        salt '*' state.show_states
    ",
            None,
        ),
        Fun::SlsExists => (
            "state.sls_exists",
            "sls_exists",
            Signature::new(&["mods", "test", "queue"], 1, false, true),
            "
    Tests for the existence the of a specific SLS or list of SLS files on the
    master. Similar to state.show_sls, rather than returning state details,
    returns True or False. The default environment is ``base``, use
    ``saltenv`` to specify a different environment.

    CLI Example:

        salt '*' state.sls_exists core,edit.vim saltenv=dev
    ",
            None,
        ),
        Fun::IdExists => (
            "state.id_exists",
            "id_exists",
            Signature::new(&["ids", "mods", "test", "queue"], 2, false, true),
            "
    Tests for the existence of a specific ID or list of IDs within the
    specified SLS file(s). Similar to state.sls_exists, returns True or False.
    The default environment is base``, use ``saltenv`` to specify a different
    environment.

    CLI Example:

        salt '*' state.id_exists create_myfile,update_template filestate saltenv=dev
    ",
            None,
        ),
        Fun::ShowStateUsage => (
            "state.show_state_usage",
            "show_state_usage",
            Signature::new(&["queue"], 0, false, true),
            "
    Retrieve the highstate data from the salt master to analyse used and unused
    states

    Custom Pillar data can be passed with the ``pillar`` kwarg.

    CLI Example:

        salt '*' state.show_state_usage
    ",
            None,
        ),
        Fun::Running => (
            "state.running",
            "running",
            Signature::new(&["concurrent"], 0, false, false),
            "
    Return a list of strings that contain state return data if a state function
    is already running. This function is used to prevent multiple state calls
    from being run at the same time.

    CLI Example:

        salt '*' state.running
    ",
            None,
        ),
        Fun::ClearCache => (
            "state.clear_cache",
            "clear_cache",
            Signature::NONE,
            "
    Clear out cached state files, forcing even cache runs to refresh the cache
    on the next state execution.

    Remember that the state cache is completely disabled by default, this
    execution only applies if cache=True is used in states

    CLI Example:

        salt '*' state.clear_cache
    ",
            None,
        ),
        Fun::Template => (
            "state.template",
            "template",
            Signature::new(&["tem", "queue"], 1, false, true),
            "
    Execute the information stored in a template file on the minion.

    This function does not ask a master for a SLS file to render but
    instead directly processes the file at the provided path on the minion.

    CLI Example:

        salt '*' state.template '<Path to template on the minion>'
    ",
            Some("highstate"),
        ),
        Fun::TemplateStr => (
            "state.template_str",
            "template_str",
            Signature::new(&["tem", "queue"], 1, false, true),
            "
    Execute the information stored in a string from an sls template

    CLI Example:

        salt '*' state.template_str '<Template String>'
    ",
            Some("highstate"),
        ),
        Fun::Top => (
            "state.top",
            "top",
            Signature::new(&["topfn", "test", "queue"], 1, false, true),
            "
    Execute a specific top file instead of the default. This is useful to apply
    configurations from a different environment (for example, dev or prod), without
    modifying the default top file.

    saltenv
        Specify a salt fileserver environment to be used when applying states

    CLI Example:

        salt '*' state.top reverse_top.sls
        salt '*' state.top prod_top.sls exclude=sls_to_exclude
    ",
            Some("highstate"),
        ),
        Fun::Low => (
            "state.low",
            "low",
            Signature::new(&["data", "queue"], 1, false, true),
            "
    Execute a single low data call

    This function is mostly intended for testing the state system and is not
    likely to be needed in everyday usage.

    CLI Example:

        salt '*' state.low '{\"state\": \"pkg\", \"fun\": \"installed\", \"name\": \"vi\"}'
    ",
            Some("highstate"),
        ),
        Fun::HighData => (
            "state.high",
            "high",
            Signature::new(&["data", "test", "queue"], 1, false, true),
            "
    Execute the compound calls stored in a single set of high data

    This function is mostly intended for testing the state system and is not
    likely to be needed in everyday usage.

    CLI Example:

        salt '*' state.high '{\"vim\": {\"pkg\": [\"installed\"]}}'
    ",
            Some("highstate"),
        ),
        Fun::Disable => (
            "state.disable",
            "disable",
            Signature::new(&["states"], 1, false, false),
            "
    Disable state runs.

    CLI Example:

        salt '*' state.disable highstate

        salt '*' state.disable highstate,test.succeed_without_changes

    .. note::
        To disable a state file from running provide the same name that would
        be passed in a state.sls call.

        salt '*' state.disable bind.config
    ",
            None,
        ),
        Fun::Enable => (
            "state.enable",
            "enable",
            Signature::new(&["states"], 1, false, false),
            "
    Enable state function or sls run

    CLI Example:

        salt '*' state.enable highstate

        salt '*' state.enable test.succeed_without_changes

    .. note::
        To enable a state file from running provide the same name that would
        be passed in a state.sls call.

        salt '*' state.disable bind.config
    ",
            None,
        ),
        Fun::ListDisabled => (
            "state.list_disabled",
            "list_disabled",
            Signature::NONE,
            "
    List the states which are currently disabled

    CLI Example:

        salt '*' state.list_disabled
    ",
            None,
        ),
        _ => return None,
    };
    Some(Spec {
        name,
        pyname,
        sig,
        doc,
        out,
    })
}

/// Salt's `state.running`: a line for each `state.*` job this minion runs, but the asking one.
pub(super) fn running(ctx: &Context) -> Vec<String> {
    let own = ctx.jid().map(str::to_string);
    let mut lines = Vec::new();
    for job in ctx.running.list() {
        let fun = get_str(&job, "fun").unwrap_or_default();
        let jid = get(&job, "jid").map(py_str).unwrap_or_default();
        if !fnmatch("state.*", fun) || Some(jid.as_str()) == own.as_deref() {
            continue;
        }
        let pid = get(&job, "pid").map(py_str).unwrap_or_default();
        let started = brine_protocol::jid::jid_to_time(&jid).unwrap_or_default();
        lines.push(format!(
            "The function \"{fun}\" is running as PID {pid} and was started at {started} with jid {jid}"
        ));
    }
    lines
}

/// The `state_runs_disabled` grain as Salt's `_disabled` reads it (anything but a list is none).
pub(super) fn disabled_runs(grains: &Value) -> Vec<String> {
    match get(grains, "state_runs_disabled") {
        Some(Value::Array(items)) => items.iter().map(py_str).collect(),
        _ => Vec::new(),
    }
}

/// Salt's `_disabled`: a message for each of `funs` (SLS names, `highstate`) a disabled entry
/// names (`a.*` disables `a.` and what is under it).
pub(super) fn disabled(grains: &Value, funs: &[String]) -> Vec<String> {
    let runs = disabled_runs(grains);
    let mut ret = Vec::new();
    for state in funs {
        for entry in &runs {
            if entry.contains(".*") {
                let mut target = entry.split('.').next().unwrap_or_default().to_string();
                if !target.ends_with('.') {
                    target.push('.');
                }
                if state.starts_with(&target) {
                    ret.push(format!(
                        "The state file \"{state}\" is currently disabled by \"{entry}\", to re-enable, run state.enable {entry}."
                    ));
                    continue;
                }
            } else if entry == state {
                ret.push(format!(
                    "The state file \"{entry}\" is currently disabled, to re-enable, run state.enable {entry}."
                ));
            }
        }
    }
    ret
}

/// What `state.highstate` answers when `highstate` is disabled.
pub(super) fn highstate_disabled() -> Value {
    from_json(&json!({
        "name": "Salt highstate run is disabled. To re-enable, run state.enable highstate",
        "result": "False",
        "comment": "Disabled",
    }))
}

/// Salt's `call_chunks` for disabled state functions: the chunks of `high` whose `state.fun`
/// a `state_runs_disabled` pattern matches are taken out of it; their returns are given back,
/// in chunk order, for [`merge_disabled`].
pub(super) fn take_disabled(
    high: &mut brine_state::High,
    patterns: &[String],
) -> Vec<(String, Json)> {
    if patterns.is_empty() {
        return Vec::new();
    }
    let mut prepared = high.clone();
    brine_state::low::reconcile_extend(&mut prepared, false);
    brine_state::low::requisite_in(&mut prepared);
    brine_state::low::apply_exclude(&mut prepared);
    let mut out = Vec::new();
    for low in brine_state::low::compile_high_data(&prepared) {
        let state = brine_state::low::text(&low, "state");
        let full = format!("{state}.{}", brine_state::low::text(&low, "fun"));
        let Some(pattern) = patterns.iter().find(|p| fnmatch(p, &full)) else {
            continue;
        };
        let id = brine_state::low::text(&low, "__id__");
        if let Some(Json::Object(body)) = high.get_mut(&id) {
            body.shift_remove(&state);
            if !body.keys().any(|k| !k.starts_with("__")) {
                high.shift_remove(&id);
            }
        }
        out.push((
            brine_state::low::tag(&low),
            json!({
                "changes": {},
                "result": false,
                "comment": format!(
                    "The state function \"{full}\" is currently disabled by \"{pattern}\", to re-enable, run state.enable {pattern}."
                ),
                "__run_num__": 0,
                "__sls__": low.get("__sls__").cloned().unwrap_or(Json::Null),
            }),
        ));
    }
    out
}

/// The returns of disabled chunks first (run numbers from 0), then the run's, renumbered after them.
pub(super) fn merge_disabled(
    disabled: Vec<(String, Json)>,
    ran: Map<String, Json>,
) -> Map<String, Json> {
    let offset = disabled.len() as u64;
    let mut out = Map::new();
    for (n, (tag, mut ret)) in disabled.into_iter().enumerate() {
        ret["__run_num__"] = json!(n);
        out.insert(tag, ret);
    }
    for (tag, mut ret) in ran {
        if let Some(n) = ret.get("__run_num__").and_then(Json::as_u64) {
            ret["__run_num__"] = json!(n + offset);
        }
        out.insert(tag, ret);
    }
    out
}

/// Call another execution function of this minion as Python code calls it (on a thread of
/// its own: this module's functions are among those it could call).
async fn call_fn(ctx: &Context, name: &'static str, args: Vec<Json>) -> Result<Json, FnError> {
    let functions = super::super::TemplateFunctions::new(ctx.clone(), |_| true);
    tokio::task::spawn_blocking(move || {
        brine_render::Functions::call(&functions, name, &args, &Default::default())
            .unwrap_or_else(|| Err(format!("'{name}' is not available.")))
    })
    .await
    .map_err(|e| FnError::Exception(e.to_string()))?
    .map_err(FnError::Execution)
}

/// Salt's `state.disable` and `state.enable`.
async fn disable_enable(ctx: &Context, b: &Bound, disable: bool) -> Result<Value, FnError> {
    let states = split_input(b.get("states").unwrap_or(&Value::Nil));
    let mut runs = disabled_runs(&ctx.grains);
    let mut msg = Vec::new();
    let mut changed = false;
    for state in states {
        let listed = runs.contains(&state);
        if disable {
            if listed {
                msg.push(format!("Info: {state} state already disabled."));
            } else {
                msg.push(format!("Info: {state} state disabled."));
                runs.push(state);
                changed = true;
            }
        } else if !listed {
            msg.push(format!("Info: {state} state already enabled."));
        } else {
            msg.push(format!("Info: {state} state enabled."));
            if let Some(at) = runs.iter().position(|s| *s == state) {
                runs.remove(at);
            }
            changed = true;
        }
    }
    if changed {
        call_fn(
            ctx,
            "grains.setval",
            vec![json!("state_runs_disabled"), json!(runs)],
        )
        .await?;
    }
    Ok(brine_protocol::payload::map(vec![
        ("res", Value::Boolean(true)),
        ("msg", Value::from(msg.join("\n"))),
    ]))
}

/// `salt.utils.state.check_result`'s opinion of `state.show_sls` being a dict.
fn is_map(v: &Value) -> bool {
    matches!(v, Value::Map(_))
}

/// Run one of this file's functions that need no state run; `None` for the others.
pub(super) async fn run_quick(
    fun: Fun,
    ctx: &Context,
    b: &Bound,
    _st: &mut CallState,
) -> Option<Result<Value, FnError>> {
    let strings = |v: Vec<String>| Value::Array(v.into_iter().map(Value::from).collect());
    Some(match fun {
        Fun::Running => Ok(if is_true(b.get("concurrent")) {
            Value::Array(Vec::new())
        } else {
            strings(running(ctx))
        }),
        Fun::ClearCache => {
            let mut removed = Vec::new();
            if let Ok(entries) = std::fs::read_dir(&ctx.services.cachedir) {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name.ends_with(".cache.p")
                        && entry.path().is_file()
                        && std::fs::remove_file(entry.path()).is_ok()
                    {
                        removed.push(name);
                    }
                }
            }
            removed.sort();
            Ok(strings(removed))
        }
        Fun::ListDisabled => Ok(get(&ctx.grains, "state_runs_disabled")
            .cloned()
            .unwrap_or_else(|| Value::from(""))),
        Fun::Disable => disable_enable(ctx, b, true).await,
        Fun::Enable => disable_enable(ctx, b, false).await,
        _ => return None,
    })
}

/// Salt's `State.render_template`: a single template's data checked and its `state.fun`
/// declarations split (no includes, extends or excludes).
fn template_high(data: Json, template: &str) -> Result<brine_state::High, Vec<String>> {
    let Json::Object(mut high) = data else {
        return Err(vec![format!(
            "Template {template} does not render to a dictionary"
        )]);
    };
    for item in ["include", "exclude", "extends"] {
        if high.contains_key(item) {
            return Err(vec![format!(
                "The '{item}' declaration found on '{template}' is invalid when rendering single templates"
            )]);
        }
    }
    let mut errors = Vec::new();
    for (name, body) in high.iter_mut() {
        if let Json::String(short) = body {
            if let Some((module, fun)) = short.split_once('.') {
                let fun = fun.split('.').next().unwrap_or_default();
                *body = json!({module: [fun]});
            } else {
                errors.push(format!(
                    "ID {name} in template {template} is not a dictionary"
                ));
            }
            continue;
        }
        let Json::Object(decls) = body else { continue };
        let mut keys: Vec<String> = decls.keys().cloned().collect();
        keys.sort();
        let mut seen = std::collections::HashSet::new();
        for key in keys {
            if key.starts_with('_') {
                continue;
            }
            if decls[&key].is_null() {
                errors.push(format!(
                    "ID '{name}' in template {template} contains a short declaration ({key}) with a trailing colon. When not passing any arguments to a state, the colon must be omitted."
                ));
                continue;
            }
            if !decls[&key].is_array() {
                continue;
            }
            if let Some((module, fun)) = key.split_once('.') {
                let (module, fun) = (
                    module.to_string(),
                    fun.split('.').next().unwrap_or_default().to_string(),
                );
                if seen.contains(&module) {
                    errors.push(format!(
                        "ID '{name}' in template '{template}' contains multiple state declarations of the same type"
                    ));
                    continue;
                }
                let mut args = decls.shift_remove(&key).unwrap_or_default();
                if let Json::Array(a) = &mut args {
                    a.push(Json::from(fun));
                }
                decls.insert(module.clone(), args);
                seen.insert(module);
                continue;
            }
            seen.insert(key);
        }
    }
    if errors.is_empty() {
        Ok(high)
    } else {
        Err(errors)
    }
}

/// Give every ID of a template's high data `__sls__` and `__env__` unless it has them.
fn mark(high: &mut brine_state::High, sls: &Json, env: Option<&str>) {
    for (name, body) in high.iter_mut() {
        if name.starts_with("__") {
            continue;
        }
        if let Json::Object(body) = body {
            body.entry("__sls__").or_insert_with(|| sls.clone());
            if let Some(env) = env {
                body.entry("__env__").or_insert_with(|| Json::from(env));
            }
        }
    }
}

/// Run one of this file's functions that compile or run states, on a blocking thread (see
/// `Fun::run`); `None` for the others.
pub(super) fn run_blocking(
    fun: Fun,
    ctx: &Context,
    b: &Bound,
) -> Option<Result<(Value, i32), FnError>> {
    let high_state = !matches!(fun, Fun::Low | Fun::HighData | Fun::TemplateStr);
    Some(match fun {
        Fun::ShowLowSls | Fun::IdExists => Run::new(ctx, b, high_state).and_then(|run| {
            let mods = split_mods(b.get("mods").unwrap_or(&Value::Nil));
            let low = match run.compile(&[(run.saltenv.clone(), mods)]) {
                Ok(high) => brine_state::low::compile_high_data(&high),
                Err(errors) if fun == Fun::IdExists => {
                    let _ = errors;
                    return Err(FnError::Exception(
                        "TypeError: string indices must be integers, not 'str'".into(),
                    ));
                }
                Err(errors) => return Ok(errors_ret(errors)),
            };
            if fun == Fun::IdExists {
                let ids = split_input(b.get("ids").unwrap_or(&Value::Nil));
                let found = ids.iter().all(|id| {
                    low.iter()
                        .any(|c| c.get("__id__").and_then(Json::as_str) == Some(id.as_str()))
                });
                return Ok((Value::Boolean(found), 0));
            }
            let chunks = low.into_iter().map(Json::Object).collect();
            Ok((from_json(&Json::Array(chunks)), 0))
        }),
        Fun::SlsExists => Run::new(ctx, b, high_state).and_then(|run| {
            let mods = split_mods(b.get("mods").unwrap_or(&Value::Nil));
            let (shown, code) = run.sls(&mods, true)?;
            Ok((Value::Boolean(is_map(&shown)), code))
        }),
        Fun::ShowStates => Run::new(ctx, b, high_state).and_then(|run| {
            let (matches, _) = run.top()?;
            match run.low_chunks(&matches) {
                Ok(chunks) => {
                    let mut seen: Vec<String> = Vec::new();
                    for c in chunks {
                        let sls = c
                            .get("__sls__")
                            .map(brine_state::verify::py_text)
                            .unwrap_or_default();
                        if !seen.contains(&sls) {
                            seen.push(sls);
                        }
                    }
                    Ok((Value::Array(seen.into_iter().map(Value::from).collect()), 0))
                }
                Err(errors) => Ok(errors_ret(errors)),
            }
        }),
        Fun::ShowStateUsage => Run::new(ctx, b, high_state).and_then(|run| {
            let (matches, errors) = run.top()?;
            if !errors.is_empty() {
                return Ok(errors_ret(errors));
            }
            let mut usage = Map::new();
            for env in run.files.envs().map_err(FnError::Execution)? {
                let files = run.files.list(&env).map_err(FnError::Execution)?;
                let mut states = brine_state::high::sls_names_of(&files);
                states.sort();
                states.dedup();
                let used_here: Vec<&String> = matches
                    .iter()
                    .filter(|(e, _)| *e == env)
                    .flat_map(|(_, sls)| sls.iter())
                    .collect();
                let (used, unused): (Vec<String>, Vec<String>) =
                    states.iter().cloned().partition(|s| used_here.contains(&s));
                usage.insert(
                    env,
                    json!({
                        "used": used,
                        "unused": unused,
                        "count_all": states.len(),
                        "count_used": used.len(),
                        "count_unused": unused.len(),
                    }),
                );
            }
            Ok((from_json(&Json::Object(usage)), 0))
        }),
        Fun::Top => Run::new(ctx, b, high_state).and_then(|mut run| {
            let topfn = py_str(b.get("topfn").unwrap_or(&Value::Nil));
            run.top_file = topfn.strip_prefix("salt://").unwrap_or(&topfn).to_string();
            run.top_saltenv = b.kwarg("saltenv").filter(|v| !v.is_nil()).map(py_str);
            run.highstate(false)
        }),
        Fun::HighData => Run::new(ctx, b, high_state).and_then(|run| {
            let data = b.get("data").unwrap_or(&Value::Nil);
            match to_json(data) {
                Json::Object(high) => run.execute(&high),
                // Salt's `verify_high` calls `.items()` on it.
                _ => Err(FnError::Exception(format!(
                    "AttributeError: '{}' object has no attribute 'items'",
                    super::super::args::py_type(data)
                ))),
            }
        }),
        Fun::Low => Run::new(ctx, b, high_state).and_then(|run| low(&run, b)),
        Fun::TemplateStr => Run::new(ctx, b, high_state).and_then(|run| {
            let text = py_str(b.get("tem").unwrap_or(&Value::Nil));
            run_template(&run, &text, "<template-str>", &Json::Null, None)
        }),
        Fun::Template => Run::new(ctx, b, high_state).and_then(|run| {
            let mut tem = py_str(b.get("tem").unwrap_or(&Value::Nil));
            if !tem.ends_with(".sls") {
                tem.push_str(".sls");
            }
            let Ok(text) = std::fs::read_to_string(&tem) else {
                return Ok(errors_ret(vec![format!(
                    "Specified SLS {tem} on local filesystem cannot be found."
                )]));
            };
            let env = b.kwarg("saltenv").map(py_str).unwrap_or_default();
            run_template(&run, &text, &tem, &Json::from(tem.as_str()), Some(&env))
        }),
        _ => return None,
    })
}

/// A template rendered with the run's renderer and its states run.
fn run_template(
    run: &Run,
    text: &str,
    name: &str,
    sls: &Json,
    env: Option<&str>,
) -> Result<(Value, i32), FnError> {
    let ctx = RenderContext {
        saltenv: env.unwrap_or("base").to_string(),
        ..run.render_context()
    };
    let data = match brine_render::render_sls(
        text,
        name,
        &ctx,
        run.files.clone(),
        run.functions.clone(),
    ) {
        Ok(data) => data,
        Err(e) => return Ok(errors_ret(vec![e.to_string()])),
    };
    if !brine_protocol::payload::json_truthy(&data) {
        return Ok((from_json(&data), 0));
    }
    match template_high(data, name) {
        Ok(mut high) => {
            mark(&mut high, sls, env);
            run.execute(&high)
        }
        Err(errors) => Ok(errors_ret(errors)),
    }
}

/// Salt's `state.low`: one low chunk checked (`verify_data`) and run on its own.
fn low(run: &Run, b: &Bound) -> Result<(Value, i32), FnError> {
    let Json::Object(data) = to_json(b.get("data").unwrap_or(&Value::Nil)) else {
        return Err(FnError::Exception(
            "TypeError: argument of type 'str' is not iterable".into(),
        ));
    };
    let mut errors = Vec::new();
    for key in ["state", "fun", "name"] {
        if !data.contains_key(key) {
            errors.push(format!("Missing \"{key}\" data"));
        }
    }
    let Some(name) = data.get("name") else {
        return Err(FnError::Exception("KeyError: 'name'".into()));
    };
    if brine_protocol::payload::json_truthy(name) && !name.is_string() {
        let sls = data
            .get("__sls__")
            .map(|s| format!("in SLS '{}' ", brine_state::verify::py_text(s)))
            .unwrap_or_default();
        errors.push(format!(
            "ID '{}' {sls}is not formed as a string, but is a {}",
            brine_state::verify::py_text(name),
            brine_state::verify::py_type(name)
        ));
    }
    if !errors.is_empty() {
        return Ok(errors_ret(errors));
    }
    let state = data
        .get("state")
        .map(brine_state::verify::py_text)
        .unwrap_or_default();
    let fun = data
        .get("fun")
        .map(brine_state::verify::py_text)
        .unwrap_or_default();
    let full = format!("{state}.{fun}");
    if brine_state::states::lookup(&full).is_none() {
        let err = match data.get("__sls__") {
            Some(sls) => format!(
                "State '{full}' was not found in SLS '{}'",
                brine_state::verify::py_text(sls)
            ),
            None => format!("Specified state '{full}' was not found"),
        };
        return Ok(errors_ret(vec![err]));
    }
    // Salt 3007's `State.call` reads `__id__` from the chunk.
    let Some(id) = data.get("__id__").map(brine_state::verify::py_text) else {
        return Err(FnError::Exception("KeyError: '__id__'".into()));
    };
    let mut decl = vec![json!(fun)];
    for (k, v) in &data {
        if matches!(
            k.as_str(),
            "state" | "fun" | "__id__" | "__sls__" | "__env__" | "order"
        ) {
            continue;
        }
        decl.push(json!({k.clone(): v.clone()}));
    }
    let mut high = brine_state::High::new();
    high.insert(
        id,
        json!({
            state.clone(): decl,
            "__sls__": data.get("__sls__").cloned().unwrap_or(Json::Null),
            "__env__": data.get("__env__").cloned().unwrap_or_else(|| Json::from(run.saltenv.clone())),
        }),
    );
    let (ret, code) = run.execute(&high)?;
    // One chunk's return, not keyed by its tag. Salt's `check_result` never passes such a
    // return, so a failed state leaves the retcode to its `result: False` (1).
    match ret {
        Value::Map(mut entries) if entries.len() == 1 => Ok((entries.remove(0).1, 0)),
        other => Ok((other, code)),
    }
}
