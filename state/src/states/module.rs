//! The `module` state module: `module.run` calls execution functions from a state, in both of
//! Salt's forms — the current one (`- test.arg: [a, {k: v}]`, several functions per state)
//! and the legacy one (`- name: test.arg` with the function's arguments as the state's, `m_name`
//! for an argument called `name`) — plus `module.wait` and `mod_watch`.

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Params, Spec};
use crate::verify::py_text;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "run",
        required: &[],
        accepts: Accepts::Any,
        run,
    },
    Spec {
        name: "wait",
        required: &["name"],
        accepts: Accepts::Any,
        run: wait,
    },
    Spec {
        name: "watch",
        required: &["name"],
        accepts: Accepts::Any,
        run: wait,
    },
    Spec {
        name: "mod_watch",
        required: &[],
        accepts: Accepts::Any,
        run,
    },
];

type Ret = Map<String, Value>;

/// Keys of the chunk that are neither a function to call nor one of its arguments.
const IGNORED: &[&str] = &["name", "__reqs__", "sfun"];

/// `module.wait`: nothing until a `watch` fires, then `mod_watch` runs the function.
fn wait(c: &Call) -> Result<Ret, String> {
    Ok(ret(&c.name(), json!(true), "", json!({})))
}

fn run(c: &Call) -> Result<Ret, String> {
    let kwargs = c.state_kwargs();
    let keys: Vec<&String> = kwargs
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !IGNORED.contains(&k.as_str()))
        .collect();
    let legacy = keys.iter().any(|k| !k.contains('.')) || (keys.is_empty() && !kwargs.is_empty());
    if legacy {
        legacy_run(c, &kwargs)
    } else {
        new_run(c, &kwargs)
    }
}

/// Salt's `_get_result`: a bool is the result; a map fails when it (or a map inside it) has
/// `result: False` or a non-zero `retcode`; anything else succeeds.
fn result_of(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => dict_result(m),
        _ => true,
    }
}

fn dict_result(m: &Map<String, Value>) -> bool {
    for (k, v) in m {
        if (k == "result" && v == &json!(false)) || (k == "retcode" && !py_eq_zero(v)) {
            return false;
        }
        if let Value::Object(inner) = v {
            if !dict_result(inner) {
                return false;
            }
        }
    }
    true
}

/// Python's `v == 0` (true for `0`, `0.0` and `False`).
fn py_eq_zero(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
        _ => false,
    }
}

/// Salt's `call_function`: `module.run`'s argument list bound to the function's parameters.
/// Maps give keyword arguments (a required parameter given by keyword goes in its place among
/// the positional ones); anything else is positional. Required parameters given neither way
/// are Salt's "Missing arguments" error.
fn bind_args(
    list: Option<&Value>,
    params: &Params,
) -> Result<(Vec<Value>, Map<String, Value>), String> {
    let items = match list {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(other) => vec![other.clone()],
    };
    let expected = &params.args[..params.required.min(params.args.len())];
    let mut args = Vec::new();
    let mut kwargs = Map::new();
    let mut by_keyword = Map::new();
    for item in items {
        match item {
            Value::Object(m) => {
                for (k, v) in m {
                    if expected.contains(&k) {
                        by_keyword.insert(k, v);
                    } else {
                        kwargs.insert(k, v);
                    }
                }
            }
            other => args.push(other),
        }
    }
    for name in expected {
        if let Some(v) = by_keyword.remove(name) {
            args.push(v);
        }
    }
    let missing: Vec<&str> = expected
        .iter()
        .skip(args.len())
        .filter(|name| !kwargs.contains_key(name.as_str()))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!("Missing arguments: {}", missing.join(", ")));
    }
    Ok((args, kwargs))
}

/// The message of an execution function's error that `module.run` reports in its comment
/// (Python's `TypeError` for bad arguments, `SaltInvocationError`); `None` for any other
/// error, an exception that ends the state.
fn reported(error: &str, fun: &str) -> Option<String> {
    if let Some(rest) = error.strip_prefix(&format!("Passed invalid arguments to {fun}: ")) {
        // Brine's text goes on with the function's docs after the TypeError's line.
        return Some(rest.split('\n').next().unwrap_or_default().to_string());
    }
    error
        .strip_prefix(&format!("ERROR executing '{fun}': "))
        .map(str::to_string)
}

/// Python's `"...{plr}...".format(plr=(len(x) > 1 or ""))`: `True` for several, nothing for
/// one (Salt's own wording).
fn plural(n: usize) -> &'static str {
    if n > 1 {
        "True"
    } else {
        ""
    }
}

/// `module.run` with functions as keys: each `mod.fun` (or `mod.fun:tag` to call one twice)
/// called with its list of arguments.
fn new_run(c: &Call, kwargs: &[(&String, &Value)]) -> Result<Ret, String> {
    let listed: Vec<&String> = kwargs
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| k.as_str() != "name")
        .collect();
    let mut r = ret("", Value::Null, "", json!({}));
    r.insert(
        "name".into(),
        Value::Array(listed.iter().map(|k| json!(k)).collect()),
    );
    let functions: Vec<&String> = listed.iter().copied().filter(|k| k.contains('.')).collect();
    if functions.is_empty() {
        r.insert("comment".into(), json!("No function provided."));
        r.insert("result".into(), json!(false));
        return Ok(r);
    }
    let mut missing = Vec::new();
    let mut tests = Vec::new();
    for func in &functions {
        let func = func.split(':').next().unwrap_or_default();
        if c.host.params(func).is_none() {
            missing.push(func.to_string());
        } else if c.test {
            tests.push(func.to_string());
        }
    }
    if !missing.is_empty() || !tests.is_empty() {
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!(
                "Unavailable function{}: {}.",
                plural(missing.len()),
                missing.join(", ")
            ));
        }
        if !tests.is_empty() {
            parts.push(format!(
                "Function{} {} to be executed.",
                plural(tests.len()),
                tests.join(", ")
            ));
        }
        r.insert("comment".into(), json!(parts.join(" ").trim()));
        if !missing.is_empty() {
            r.insert("result".into(), json!(false));
        }
        return Ok(r);
    }
    let mut failures = Vec::new();
    let mut success = Vec::new();
    let mut changes = Map::new();
    for func in &functions {
        let name = func.split(':').next().unwrap_or_default();
        let list = kwargs.iter().find(|(k, _)| k == func).map(|(_, v)| *v);
        let params = c
            .host
            .params(name)
            .ok_or_else(|| format!("'{name}' is not available."))?;
        let (args, fkwargs) = match bind_args(list, &params) {
            Ok(bound) => bound,
            Err(e) => {
                failures.push(format!("'{func}' failed: {e}"));
                continue;
            }
        };
        match c.host.call(name, &args, &fkwargs) {
            Ok(out) => {
                if result_of(&out) {
                    let detail = match &out {
                        Value::Object(m) => m.get("comment").map_or("Success".into(), py_text),
                        other => py_text(other),
                    };
                    success.push(format!("{func}: {detail}"));
                    changes.insert(func.to_string(), out);
                } else {
                    match &out {
                        Value::Object(m) => failures.push(format!(
                            "'{func}' failed: {}",
                            m.get("comment")
                                .map_or("(error message N/A)".into(), py_text)
                        )),
                        Value::Bool(false) => failures.push(format!("'{func}': False")),
                        _ => {}
                    }
                }
            }
            Err(e) => match reported(&e, name) {
                Some(msg) => failures.push(format!("'{func}' failed: {msg}")),
                // Any other failure ends the state as Salt's exception does.
                None => return Err(e),
            },
        }
    }
    let failed = !failures.is_empty();
    failures.extend(success);
    r.insert("comment".into(), json!(failures.join(", ")));
    r.insert("result".into(), json!(!failed));
    r.insert("changes".into(), Value::Object(changes));
    Ok(r)
}

/// The state argument that carries a function's parameter in the legacy form: `m_name` for
/// `name` (and the other names the state itself uses).
fn state_key(param: &str) -> String {
    match param {
        "name" | "fun" | "names" | "state" | "saltenv" => format!("m_{param}"),
        other => other.to_string(),
    }
}

/// `module.run` with `name` as the function and its arguments as the state's.
fn legacy_run(c: &Call, kwargs: &[(&String, &Value)]) -> Result<Ret, String> {
    let name = c.name();
    let mut r = ret(&name, Value::Null, "", json!({}));
    let Some(params) = c.host.params(&name) else {
        r.insert(
            "comment".into(),
            json!(format!("Module function {name} is not available")),
        );
        r.insert("result".into(), json!(false));
        return Ok(r);
    };
    if c.test {
        r.insert(
            "comment".into(),
            json!(format!("Module function {name} is set to execute")),
        );
        return Ok(r);
    }
    let given: Map<String, Value> = kwargs
        .iter()
        .filter(|(k, _)| k.as_str() != "name")
        .map(|(k, v)| ((*k).clone(), (*v).clone()))
        .collect();
    let Params {
        args: names,
        required,
        varargs,
        keywords,
    } = params;
    let mut positional = Vec::new();
    let mut keyword = Map::new();
    let mut missing = Vec::new();
    for (i, param) in names.iter().enumerate() {
        let key = state_key(param);
        // A parameter with a default also takes its plain name (`name` too, for the
        // arguments Salt maps through `m_*` only when they have no default).
        let value = given
            .get(&key)
            .or_else(|| (i >= required).then(|| given.get(param.as_str())).flatten());
        match value {
            Some(v) if i < required => positional.push(v.clone()),
            Some(v) => {
                keyword.insert(param.clone(), v.clone());
            }
            None if i < required => missing.push(key),
            None => {}
        }
    }
    if !missing.is_empty() {
        let mut comment = "The following arguments are missing:".to_string();
        for m in &missing {
            comment.push(' ');
            comment.push_str(m);
        }
        r.insert("comment".into(), json!(comment));
        r.insert("result".into(), json!(false));
        return Ok(r);
    }
    if varargs {
        match given.get("args") {
            None => {}
            Some(Value::Array(extra)) => {
                // Extra positional arguments come after every named one.
                for param in names.iter().skip(required) {
                    if let Some(v) = keyword.remove(param) {
                        positional.push(v);
                    } else {
                        break;
                    }
                }
                positional.extend(extra.iter().cloned());
            }
            Some(_) => {
                r.insert("comment".into(), json!("'args' must be a list."));
                r.insert("result".into(), json!(false));
                return Ok(r);
            }
        }
    }
    if keywords {
        match given.get("kwargs") {
            None => {}
            Some(Value::Object(extra)) => keyword.extend(extra.clone()),
            Some(_) => {
                r.insert("comment".into(), json!("'kwargs' must be a dict."));
                r.insert("result".into(), json!(false));
                return Ok(r);
            }
        }
    }
    match c.host.call(&name, &positional, &keyword) {
        Ok(out) => {
            r.insert("result".into(), json!(result_of(&out)));
            r.insert("changes".into(), json!({ "ret": out }));
            r.insert(
                "comment".into(),
                json!(format!("Module function {name} executed")),
            );
        }
        Err(e) => {
            r.insert(
                "comment".into(),
                json!(format!(
                    "Module function {name} threw an exception. Exception: {e}"
                )),
            );
            r.insert("result".into(), json!(false));
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_follow_salts_rules() {
        assert!(result_of(&json!("text")));
        assert!(!result_of(&json!(false)));
        assert!(!result_of(&json!({"retcode": 2})));
        assert!(result_of(&json!({"retcode": 0, "result": true})));
        assert!(!result_of(&json!({"a": {"result": false}})));
        assert!(result_of(&json!({"result": null})));
    }

    fn params(args: &[&str], required: usize) -> Params {
        Params {
            args: args.iter().map(|a| a.to_string()).collect(),
            required,
            varargs: true,
            keywords: true,
        }
    }

    #[test]
    fn argument_lists_bind_as_salts_call_function_binds_them() {
        let p = params(&["a", "b", "c"], 2);
        let (a, k) = bind_args(Some(&json!(["x", {"k": 1}, 2, {"j": "v"}])), &p).unwrap();
        assert_eq!(a, vec![json!("x"), json!(2)]);
        assert_eq!(Value::Object(k), json!({"k": 1, "j": "v"}));
        // A required parameter given by keyword takes its place.
        let (a, k) = bind_args(Some(&json!([{"b": 2}, "x"])), &p).unwrap();
        assert_eq!(a, vec![json!("x"), json!(2)]);
        assert!(k.is_empty());
        assert_eq!(
            bind_args(None, &p),
            Err("Missing arguments: a, b".to_string())
        );
        assert_eq!(
            bind_args(Some(&json!(["x", {"c": 3}])), &p),
            Err("Missing arguments: b".to_string())
        );
    }

    #[test]
    fn only_argument_errors_are_reported_in_the_comment() {
        assert_eq!(
            reported(
                "Passed invalid arguments to test.echo: echo() takes 1 positional argument\n\n  doc",
                "test.echo"
            ),
            Some("echo() takes 1 positional argument".to_string())
        );
        assert_eq!(
            reported("ERROR executing 'file.write': bad", "file.write"),
            Some("bad".to_string())
        );
        assert_eq!(
            reported("ERROR: Unable to run command", "cmd.run_all"),
            None
        );
    }
}
