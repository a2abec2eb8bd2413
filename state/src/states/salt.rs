//! The `salt` state module, the orchestrator's: `salt.function`, `salt.state`, `salt.runner`
//! and `salt.wheel` run jobs, runners and wheel functions from a state run on the master.
//! They act through the host's `saltutil.cmd`, `saltutil.runner` and `saltutil.wheel`, as
//! Salt's do through the master minion's; a host without them (a minion) fails the state.
//! Where Salt joins a Python set of minion ids into a comment, this joins them sorted.

use serde_json::{json, Map, Value};

use super::{Accepts, Call, Spec};
use crate::engine::check_result;
use crate::verify::{py_text, py_type, repack_dictlist};
use brine_protocol::payload::json_truthy;
use brine_protocol::pyeq::py_eq_json;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "function",
        required: &["name", "tgt"],
        accepts: Accepts::Any,
        run: function,
    },
    Spec {
        name: "state",
        required: &["name", "tgt"],
        accepts: Accepts::Any,
        run: state,
    },
    Spec {
        name: "runner",
        required: &["name"],
        accepts: Accepts::Any,
        run: runner,
    },
    Spec {
        name: "wheel",
        required: &["name"],
        accepts: Accepts::Any,
        run: wheel,
    },
    Spec {
        name: "wait_for_event",
        required: &["name", "id_list"],
        accepts: Accepts::Only(&["name", "id_list", "event_id", "timeout", "node"]),
        run: wait_for_event,
    },
    Spec {
        name: "parallel_runners",
        required: &["name", "runners"],
        accepts: Accepts::Any,
        run: parallel_runners,
    },
];

type Ret = Map<String, Value>;

/// Each minion's entry in what `saltutil.cmd` answered, in arrival order.
type Returns = Vec<(String, Map<String, Value>)>;

/// A new return with Salt's first keys for `salt.function` and `salt.state`.
fn start(name: &str) -> Ret {
    let mut r = Map::new();
    r.insert("name".into(), json!(name));
    r.insert("changes".into(), json!({}));
    r.insert("comment".into(), json!(""));
    r.insert("result".into(), json!(true));
    r
}

fn done(mut r: Ret, result: Value, comment: impl Into<String>) -> Result<Ret, String> {
    r.insert("result".into(), result);
    r.insert("comment".into(), Value::String(comment.into()));
    Ok(r)
}

/// Salt's `_fire_args`: `salt/run/<orchestration jid>/args` before each job, runner or wheel
/// call of an orchestration (not fired outside one).
fn fire_args(c: &Call, data: Value) {
    if let Some(jid) = c.host.orchestration_jid() {
        c.host
            .fire_event(&format!("salt/run/{jid}/args"), data, &jid);
    }
}

/// The keyword arguments `saltutil.cmd` gets in both `salt.function` and `salt.state`, after
/// `arg`, `kwarg`, `ret` and `timeout`.
fn target_kw(c: &Call, kw: &mut Map<String, Value>) {
    kw.insert(
        "tgt_type".into(),
        c.arg("tgt_type").cloned().unwrap_or(json!("glob")),
    );
    kw.insert("ssh".into(), c.arg("ssh").cloned().unwrap_or(json!(false)));
    if let Some(roster) = c.low.get("roster") {
        kw.insert("roster".into(), roster.clone());
    }
}

/// `ret` and `timeout` as Salt passes them on.
fn ret_timeout(c: &Call, kw: &mut Map<String, Value>) {
    kw.insert("ret".into(), c.arg("ret").cloned().unwrap_or(json!("")));
    kw.insert(
        "timeout".into(),
        c.arg("timeout").cloned().unwrap_or(Value::Null),
    );
}

/// `batch` (as text) and `subset`, when given.
fn batch_subset(c: &Call, kw: &mut Map<String, Value>) {
    if let Some(batch) = c.arg("batch") {
        kw.insert("batch".into(), json!(py_text(batch)));
    }
    if let Some(subset) = c.arg("subset") {
        kw.insert("subset".into(), subset.clone());
    }
}

/// `failhard: True`, when the state says so.
fn failhard(c: &Call, kw: &mut Map<String, Value>) {
    if c.arg("failhard") == Some(&json!(true)) {
        kw.insert("failhard".into(), json!(true));
    }
}

/// `ret_config` and `ret_kwargs`, when not empty.
fn ret_options(c: &Call, kw: &mut Map<String, Value>) {
    for key in ["ret_config", "ret_kwargs"] {
        if let Some(v) = c.arg(key).filter(|v| json_truthy(v)) {
            kw.insert(key.into(), v.clone());
        }
    }
}

/// `fail_minions` as Salt reads it: a list, or a comma-separated string; anything else is
/// ignored with a warning.
fn fail_minions(c: &Call, r: &mut Ret) -> Vec<String> {
    match c.arg("fail_minions") {
        None => Vec::new(),
        Some(Value::String(s)) => s.split(',').map(|m| m.trim().to_string()).collect(),
        Some(Value::Array(items)) => items.iter().map(py_text).collect(),
        Some(_) => {
            let warnings = r.entry("warnings").or_insert_with(|| json!([]));
            if let Some(w) = warnings.as_array_mut() {
                w.push(json!(
                    "'fail_minions' needs to be a list or a comma separated string. Ignored."
                ));
            }
            Vec::new()
        }
    }
}

/// What `saltutil.cmd` answered: each minion's entry in arrival order.
fn cmd(c: &Call, tgt: &Value, fun: &str, kw: Map<String, Value>) -> Result<Returns, String> {
    let answer = c
        .host
        .call("saltutil.cmd", &[tgt.clone(), json!(fun)], &kw)?;
    let Value::Object(by_minion) = answer else {
        return Err(format!(
            "saltutil.cmd answered {answer} instead of returns by minion"
        ));
    };
    Ok(by_minion
        .into_iter()
        .map(|(id, data)| {
            let mut data = match data {
                Value::Object(m) => m,
                other => Map::from_iter([("ret".to_string(), other)]),
            };
            if !data.contains_key("ret") {
                if let Some(ret) = data.remove("return") {
                    data.insert("ret".into(), ret);
                }
            }
            (id, data)
        })
        .collect())
}

fn first_jid(returns: &Returns, r: &mut Ret) {
    if let Some(jid) = returns.first().and_then(|(_, d)| d.get("jid")) {
        r.insert("__jid__".into(), jid.clone());
    }
}

/// `salt.function`: run an execution function on the targeted minions.
fn function(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let tgt = c.arg("tgt").cloned().unwrap_or(Value::Null);
    let mut r = start(&name);
    let arg = match c.arg("arg") {
        Some(Value::String(s)) => {
            r.insert(
                "warnings".into(),
                json!(["Please specify 'arg' as a list of arguments."]),
            );
            json!(s.split_whitespace().collect::<Vec<_>>())
        }
        Some(v) if json_truthy(v) => v.clone(),
        _ => json!([]),
    };
    let mut kw = Map::new();
    kw.insert("arg".into(), arg);
    kw.insert("kwarg".into(), c.arg("kwarg").cloned().unwrap_or(json!({})));
    ret_timeout(c, &mut kw);
    batch_subset(c, &mut kw);
    target_kw(c, &mut kw);
    let expect_minions = c.arg("expect_minions").cloned().unwrap_or(json!(false));
    kw.insert("expect_minions".into(), expect_minions);
    kw.insert("_cmd_meta".into(), json!(true));
    failhard(c, &mut kw);
    ret_options(c, &mut kw);
    if c.test {
        let comment = format!(
            "Function {name} would be executed on target {}",
            py_text(&tgt)
        );
        return done(r, Value::Null, comment);
    }
    fire_args(
        c,
        json!({"type": "function", "tgt": tgt, "name": name, "args": Value::Object(kw.clone())}),
    );
    let returns = match cmd(c, &tgt, &name, kw) {
        Ok(returns) => returns,
        Err(e) => return done(r, json!(false), e),
    };
    first_jid(&returns, &mut r);
    let allowed = fail_minions(c, &mut r);
    let fail_function = c.text("fail_function").filter(|f| !f.is_empty());
    let mut result = true;
    let mut fail: Vec<String> = Vec::new();
    let mut changes = Map::new();
    for (minion, data) in returns.iter() {
        let mut m_ret = json!(false);
        if data.get("retcode").is_some_and(json_truthy) {
            result = false;
            push_unique(&mut fail, minion);
        }
        let m_func = if data.get("failed").is_some_and(json_truthy) {
            false
        } else {
            m_ret = data.get("ret").cloned().unwrap_or(Value::Null);
            let ok = match &fail_function {
                None => true,
                Some(f) => json_truthy(
                    &c.host
                        .call(f, std::slice::from_ref(&m_ret), &Map::new())
                        .map_err(|e| as_type_error(f, &e))?,
                ),
            };
            ok && m_ret != json!(false)
        };
        if !m_func && !allowed.contains(minion) {
            push_unique(&mut fail, minion);
        }
        changes.insert(minion.clone(), m_ret);
    }
    if returns.is_empty() {
        return done(r, json!(false), "No minions responded");
    }
    let ran_on = changes.keys().cloned().collect::<Vec<_>>().join(", ");
    r.insert("changes".into(), json!({"ret": changes}));
    let comment = if fail.is_empty() {
        "Function ran successfully.".to_string()
    } else {
        result = false;
        fail.sort();
        format!(
            "Running function {name} failed on minions: {}",
            fail.join(", ")
        )
    };
    done(
        r,
        json!(result),
        format!("{comment} Function {name} ran on {ran_on}."),
    )
}

/// A function's refusal of its arguments as the `TypeError` Salt's state shows when it calls
/// the function directly: "TypeError: false_() takes 0 positional arguments but 1 was given".
fn as_type_error(fun: &str, error: &str) -> String {
    let first = error.lines().next().unwrap_or_default();
    match first.strip_prefix(&format!("Passed invalid arguments to {fun}: ")) {
        Some(why) => format!("TypeError: {why}"),
        None => error.to_string(),
    }
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|m| m == item) {
        list.push(item.to_string());
    }
}

/// Python's `int()` of `allow_fail`: `None` for a text that is no number, an error for a
/// value `int()` does not take.
fn allow_fail_of(v: &Value) -> Result<Option<i64>, String> {
    match v {
        Value::Array(_) | Value::Object(_) => Err(format!(
            "TypeError: int() argument must be a string, a bytes-like object or a real number, not '{}'",
            crate::verify::py_type(v)
        )),
        other => Ok(super::group::py_int(other)),
    }
}

/// Salt's `_format_failure_detail`: why a minion's return is no state result, for the
/// comment.
fn failure_detail(minion: &str, m_ret: &Value, no_return: bool) -> String {
    if no_return {
        return format!("Minion {minion} did not return a state result.");
    }
    match m_ret {
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .filter(|i| json_truthy(i))
                .map(py_text)
                .collect();
            if parts.is_empty() {
                format!("Minion {minion} returned an empty error list.")
            } else {
                format!("Minion {minion} returned errors: {}", parts.join("; "))
            }
        }
        Value::Object(_) => String::new(),
        other => format!(
            "Minion {minion} returned {} instead of a state result.",
            crate::verify::py_repr(other)
        ),
    }
}

/// `salt.state`: run a highstate, SLS files or a top file on the targeted minions.
fn state(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let tgt = c.arg("tgt").cloned().unwrap_or(Value::Null);
    let mut kw = Map::new();
    kw.insert("arg".into(), json!([]));
    kw.insert("kwarg".into(), json!({}));
    ret_timeout(c, &mut kw);
    ret_options(c, &mut kw);
    let mut r = start(&name);
    let allow_fail = match c.arg("allow_fail") {
        None => 0,
        Some(v) => match allow_fail_of(v)? {
            Some(n) => n,
            None => {
                return done(
                    r,
                    json!(false),
                    "Passed invalid value for 'allow_fail', must be an int",
                )
            }
        },
    };
    target_kw(c, &mut kw);
    let expect_minions = c.arg("expect_minions").cloned().unwrap_or(json!(true));
    kw.insert("expect_minions".into(), expect_minions.clone());
    let mut arg = Vec::new();
    let fun = if c.arg("highstate").is_some_and(json_truthy) {
        "state.highstate"
    } else if let Some(top) = c.arg("top").filter(|t| json_truthy(t)) {
        arg.push(top.clone());
        "state.top"
    } else if let Some(sls) = c.arg("sls").filter(|s| json_truthy(s)) {
        arg.push(match sls {
            Value::Array(items) => json!(items.iter().map(py_text).collect::<Vec<_>>().join(",")),
            other => other.clone(),
        });
        "state.sls"
    } else {
        return done(
            r,
            json!(false),
            "No highstate or sls specified, no execution made",
        );
    };
    kw.insert("arg".into(), Value::Array(arg));
    let mut kwarg = Map::new();
    let test = c.arg("test").cloned();
    match (&test, c.test) {
        (Some(t), _) => {
            kwarg.insert("test".into(), t.clone());
        }
        (None, true) => {
            kwarg.insert("test".into(), json!(true));
        }
        (None, false) => {}
    }
    if let Some(pillar) = c.arg("pillar").filter(|p| json_truthy(p)) {
        kwarg.insert("pillar".into(), pillar.clone());
    }
    for key in ["pillarenv", "saltenv", "exclude"] {
        if let Some(v) = c.low.get(key).filter(|v| !v.is_null()) {
            kwarg.insert(key.into(), v.clone());
        }
    }
    kwarg.insert(
        "queue".into(),
        c.arg("queue").cloned().unwrap_or(json!(false)),
    );
    match c.arg("concurrent").cloned().unwrap_or(json!(false)) {
        b @ Value::Bool(_) => {
            kwarg.insert("concurrent".into(), b);
        }
        _ => {
            return done(
                r,
                json!(false),
                "Must pass in boolean for value of 'concurrent'",
            )
        }
    }
    kw.insert("kwarg".into(), Value::Object(kwarg));
    batch_subset(c, &mut kw);
    failhard(c, &mut kw);
    fire_args(
        c,
        json!({"type": "state", "tgt": tgt, "name": name, "args": Value::Object(kw.clone())}),
    );
    let returns = cmd(c, &tgt, fun, kw)?;
    first_jid(&returns, &mut r);
    let allowed = fail_minions(c, &mut r);
    if returns.is_empty() && json_truthy(&expect_minions) {
        return done(r, json!(false), "No minions returned");
    }
    let mut changes = Map::new();
    let mut fail: Vec<String> = Vec::new();
    let mut details = std::collections::BTreeMap::new();
    let mut no_change: Vec<String> = Vec::new();
    for (minion, data) in &returns {
        if data.get("out").and_then(Value::as_str) != Some("highstate") {
            tracing::warn!("Output from salt state not highstate");
        }
        let raw = data.get("ret");
        let (ok, m_ret, no_return) = if data.get("failed").is_some_and(json_truthy) {
            (false, json!(false), raw.is_none())
        } else {
            match raw {
                None => (false, json!(false), true),
                Some(v) => (check_result(v, true), v.clone(), false),
            }
        };
        if !ok {
            if !allowed.contains(minion) {
                push_unique(&mut fail, minion);
                details.insert(
                    minion.clone(),
                    failure_detail(minion, raw.unwrap_or(&m_ret), no_return),
                );
            }
            changes.insert(minion.clone(), m_ret);
            continue;
        }
        let changed = m_ret.as_object().is_some_and(|states| {
            states
                .values()
                .any(|s| s.get("changes").is_some_and(json_truthy))
        });
        if changed {
            changes.insert(minion.clone(), m_ret);
        } else {
            push_unique(&mut no_change, minion);
        }
    }
    if !changes.is_empty() {
        let updated: Vec<String> = changes.keys().cloned().collect();
        r.insert(
            "changes".into(),
            json!({"out": "highstate", "ret": changes}),
        );
        if fail.len() as i64 <= allow_fail {
            let mut comment = format!("States ran successfully. Updating {}.", updated.join(", "));
            if !no_change.is_empty() {
                comment.push_str(&format!(" No changes made to {}.", no_change.join(", ")));
            }
            let result = if test.as_ref().is_some_and(json_truthy) || c.test {
                Value::Null
            } else {
                json!(true)
            };
            return done(r, result, comment);
        }
    }
    if fail.len() as i64 > allow_fail {
        fail.sort();
        let mut comment = format!("Run failed on minions: {}", fail.join(", "));
        let lines: Vec<&String> = fail
            .iter()
            .filter_map(|m| details.get(m))
            .filter(|d| !d.is_empty())
            .collect();
        if !lines.is_empty() {
            comment.push('\n');
            comment.push_str(
                &lines
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
        }
        return done(r, json!(false), comment);
    }
    let mut comment = "States ran successfully.".to_string();
    if !no_change.is_empty() {
        comment.push_str(&format!(" No changes made to {}.", no_change.join(", ")));
    }
    done(r, json!(true), comment)
}

/// The keyword arguments a state passes on to a runner or wheel function: every argument
/// of the chunk that is not the engine's, nor `name`.
fn passed_on(c: &Call) -> Map<String, Value> {
    c.state_kwargs()
        .into_iter()
        .filter(|(k, _)| k.as_str() != "name")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `salt.runner` and `salt.wheel`: the function's full return as the state's changes.
fn master_call(c: &Call, kind: &str, label: &str) -> Result<Ret, String> {
    let name = c.name();
    if c.test {
        let mut r = Map::new();
        r.insert("name".into(), json!(name));
        r.insert("result".into(), Value::Null);
        r.insert("changes".into(), json!({}));
        r.insert(
            "comment".into(),
            json!(format!("{label} function '{name}' would be executed.")),
        );
        return Ok(r);
    }
    let mut kwargs = passed_on(c);
    kwargs.insert(
        "__orchestration_jid__".into(),
        c.host
            .orchestration_jid()
            .map_or(Value::Null, Value::String),
    );
    kwargs.insert("__env__".into(), json!(c.saltenv));
    if kind == "runner" {
        kwargs.insert("full_return".into(), json!(true));
    }
    let out = c
        .host
        .call(&format!("saltutil.{kind}"), &[json!(name)], &kwargs)?;
    let ret = out.get("return").cloned().unwrap_or(Value::Null);
    let errored = ret.as_object().is_some_and(|m| m.contains_key("Error"));
    let success = !errored && out.get("success").is_none_or(json_truthy);
    let mut r = Map::new();
    r.insert("name".into(), json!(name));
    r.insert("changes".into(), json!({"return": ret}));
    r.insert("result".into(), json!(success));
    r.insert(
        "comment".into(),
        json!(format!(
            "{label} function '{name}' {}.",
            if success { "executed" } else { "failed" }
        )),
    );
    if let Some(jid) = out.get("jid") {
        r.insert("__jid__".into(), jid.clone());
    }
    Ok(r)
}

/// `salt.runner`: run a runner function on the master.
fn runner(c: &Call) -> Result<Ret, String> {
    master_call(c, "runner", "Runner")
}

/// `salt.wheel`: run a wheel function on the master.
fn wheel(c: &Call) -> Result<Ret, String> {
    master_call(c, "wheel", "Wheel")
}

/// `salt.parallel_runners`: several runner functions at once, one thread each, their returns
/// merged into one state. `runners` maps an id to its settings (`name`, the runner function,
/// defaulting to the id, and `kwarg`); a bare string is one runner of that name.
fn parallel_runners(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let runners: Vec<(String, Map<String, Value>)> = match c.arg("runners") {
        // Salt keys the one runner's settings by the state's name, then defaults `name` to
        // the runner's id: the string either way.
        Some(Value::String(fun)) => {
            let mut config = Map::new();
            config.insert(name.clone(), json!(fun));
            config.entry("name").or_insert_with(|| json!(fun));
            vec![(fun.clone(), config)]
        }
        Some(Value::Object(by_id)) => by_id
            .iter()
            .map(|(id, config)| {
                let mut config = match config {
                    Value::Null => Map::new(),
                    other => repack_dictlist(other),
                };
                config.entry("name").or_insert_with(|| json!(id));
                (id.clone(), config)
            })
            .collect(),
        _ => {
            return Ok(runners_ret(
                &name,
                false,
                json!({}),
                "The runners parameter must be a string or dict.".into(),
            ))
        }
    };
    let call = |config: &Map<String, Value>| -> Result<Value, String> {
        let mut kwargs = Map::new();
        kwargs.insert(
            "__orchestration_jid__".into(),
            c.host
                .orchestration_jid()
                .map_or(Value::Null, Value::String),
        );
        kwargs.insert("__env__".into(), json!(c.saltenv));
        kwargs.insert("full_return".into(), json!(true));
        match config.get("kwarg") {
            None => {}
            Some(Value::Object(kwarg)) => kwargs.extend(kwarg.clone()),
            Some(other) => {
                return Err(format!(
                    "TypeError: saltutil.runner() argument after ** must be a mapping, not {}",
                    py_type(other)
                ))
            }
        }
        let fun = config.get("name").map(py_text).unwrap_or_default();
        c.host.call("saltutil.runner", &[json!(fun)], &kwargs)
    };
    let answers: Vec<Result<Value, String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = runners
            .iter()
            .map(|(_, config)| scope.spawn(move || call(config)))
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("the runner's thread panicked".into()))
            })
            .collect()
    });
    // Salt re-raises the first runner's exception, by position.
    let outputs: Vec<(&str, Value)> = runners
        .iter()
        .zip(answers)
        .map(|((id, _), answer)| {
            answer.map(|out| {
                (
                    id.as_str(),
                    out.get("return").cloned().unwrap_or(Value::Null),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    // Salt reads each return as a dict: anything else is its AttributeError.
    if let Some((_, other)) = outputs.iter().find(|(_, out)| !out.is_object()) {
        return Err(format!(
            "AttributeError: '{}' object has no attribute 'get'",
            py_type(other)
        ));
    }
    let highstate = outputs.iter().all(|(_, out)| {
        out.get("outputter").and_then(Value::as_str) == Some("highstate")
            && out.get("data").is_some()
    });
    let (failed, changes): (Vec<&(&str, Value)>, Value) = if highstate {
        let failed = outputs
            .iter()
            .filter(|(_, out)| failed_retcode(&out["data"]))
            .collect();
        let mut changes = Map::new();
        for (id, out) in &outputs {
            let found = extract_changes(&out["data"]);
            if json_truthy(&found) {
                changes.insert((*id).to_string(), found);
            }
        }
        (failed, Value::Object(changes))
    } else {
        let failed = outputs
            .iter()
            .filter(|(_, out)| {
                out.get("exit_code")
                    .is_some_and(|c| !py_eq_json(c, &json!(0)))
            })
            .collect();
        let by_id: Map<String, Value> = outputs
            .iter()
            .map(|(id, out)| ((*id).to_string(), out.clone()))
            .collect();
        (failed, json!({ "ret": by_id }))
    };
    let comment = if failed.is_empty() {
        "All runner functions executed successfully.".to_string()
    } else if highstate {
        let colors = brine_protocol::nested::Colors::new(false);
        let nested = brine_protocol::nested::Nested {
            colors: &colors,
            retcode: 0,
        };
        failed
            .iter()
            .map(|(id, out)| {
                let mut lines = Vec::new();
                nested.display(out, 2, "", &mut lines);
                format!(
                    "Runner {id} failed with return value:\n{}",
                    lines.join("\n").trim_end()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    } else if let [(one, _)] = failed.as_slice() {
        format!("Runner {one} failed.")
    } else {
        let ids: Vec<&str> = failed.iter().map(|(id, _)| *id).collect();
        format!("Runners {} failed.", ids.join(", "))
    };
    Ok(runners_ret(&name, failed.is_empty(), changes, comment))
}

/// A `salt.parallel_runners` return, its keys in Salt's order.
fn runners_ret(name: &str, result: bool, changes: Value, comment: String) -> Ret {
    let mut r = Map::new();
    r.insert("name".into(), json!(name));
    r.insert("result".into(), json!(result));
    r.insert("changes".into(), changes);
    r.insert("comment".into(), json!(comment));
    r
}

/// Whether `data.get("retcode", 0) != 0` in a highstate-style runner return, as Salt reads it (the key
/// sits beside `data` in the orchestrate runner's return, so that one reads 0).
fn failed_retcode(data: &Value) -> bool {
    data.get("retcode")
        .is_some_and(|c| !py_eq_json(c, &json!(0)))
}

/// Salt's `extract_changes`: the first `changes` found down each branch of a highstate
/// return (the inner `ret` of a nested highstate), only the non-empty ones kept.
fn extract_changes(obj: &Value) -> Value {
    let Value::Object(map) = obj else {
        return json!({});
    };
    if let Some(changes) = map.get("changes") {
        if changes.get("out").and_then(Value::as_str) == Some("highstate") {
            if let Some(inner) = changes.get("ret") {
                return inner.clone();
            }
        }
        return changes.clone();
    }
    let mut found = Map::new();
    for (key, value) in map {
        let change = extract_changes(value);
        if json_truthy(&change) {
            found.insert(key.clone(), change);
        }
    }
    Value::Object(found)
}

/// `salt.wait_for_event`: watch the master's bus until an event whose tag matches `name` (a
/// glob) has carried each of `id_list` in its `event_id` field (default `id`, else in its
/// `data`), or `timeout` seconds (default 300) have passed. Events fired before the state
/// starts are not seen, as in Salt.
fn wait_for_event(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let mut r = Map::new();
    r.insert("name".into(), json!(name));
    r.insert("changes".into(), json!({}));
    r.insert("comment".into(), json!(""));
    r.insert("result".into(), json!(false));
    if c.test {
        r.insert(
            "comment".into(),
            json!(format!("Orchestration would wait for event '{name}'")),
        );
        r.insert("result".into(), Value::Null);
        return Ok(r);
    }
    let Some(Value::Array(ids)) = c.arg("id_list") else {
        r.insert("comment".into(), json!("id_list must be a list."));
        return Ok(r);
    };
    let mut ids = ids.clone();
    let event_id = c.text("event_id").unwrap_or_else(|| "id".into());
    let timeout = match c.arg("timeout") {
        None => 300.0,
        Some(t) => match t.as_f64().or_else(|| t.as_str()?.trim().parse().ok()) {
            Some(t) if t.is_finite() => t.clamp(0.0, 1e9),
            _ => {
                r.insert(
                    "comment".into(),
                    json!(format!(
                        "timeout must be a number of seconds, not {}",
                        py_text(t)
                    )),
                );
                return Ok(r);
            }
        },
    };
    let Some(mut watch) = c.host.watch_events() else {
        r.insert(
            "comment".into(),
            json!("wait_for_event needs the master's event bus: it runs in an orchestration."),
        );
        return Ok(r);
    };
    let start = std::time::Instant::now();
    let limit = std::time::Duration::from_secs_f64(timeout);
    let mut seen: Vec<Value> = Vec::new();
    loop {
        let event = watch.next(limit.saturating_sub(start.elapsed()));
        let timed_out = start.elapsed() >= limit;
        let Some((tag, data)) = event else {
            if timed_out {
                break;
            }
            continue;
        };
        if brine_protocol::target::fnmatch(&name, &tag) {
            let val = match data.get(&event_id) {
                Some(v) if !v.is_null() => Some(v),
                _ => data.get("data").and_then(|d| d.get(&event_id)),
            }
            .filter(|v| !v.is_null());
            match val {
                Some(Value::Array(carried)) => {
                    let found: Vec<Value> = ids
                        .iter()
                        .filter(|id| carried.iter().any(|v| py_eq_json(v, id)))
                        .cloned()
                        .collect();
                    for id in found {
                        if let Some(i) = ids.iter().position(|x| py_eq_json(x, &id)) {
                            ids.remove(i);
                        }
                        seen.push(id);
                    }
                }
                Some(one) => {
                    if let Some(i) = ids.iter().position(|x| py_eq_json(x, one)) {
                        ids.remove(i);
                        seen.push(one.clone());
                    }
                }
                None => {}
            }
            if !seen.is_empty() {
                r.insert("changes".into(), json!({ "minions_seen": seen }));
            }
        }
        if ids.is_empty() {
            r.insert("result".into(), json!(true));
            r.insert(
                "comment".into(),
                json!(format!(
                    "All events seen in {} seconds.",
                    brine_protocol::pyrepr::float_repr(start.elapsed().as_secs_f64())
                )),
            );
            return Ok(r);
        }
        if timed_out {
            break;
        }
    }
    r.insert("comment".into(), json!("Timeout value reached."));
    Ok(r)
}
