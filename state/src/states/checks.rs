//! `unless`, `onlyif`, `creates` and `check_cmd`: the engine's checks around a state
//! (Salt's `State._run_check*`), with Salt's comments.

use serde_json::{json, Map, Value};

use super::Host;
use crate::low::Low;
use crate::verify::py_text;

/// The `cmd.retcode` options a state's own arguments give its checks.
fn cmd_opts(low: &Low, host: &dyn Host) -> Map<String, Value> {
    let exclude: Vec<String> = match low.get("cmd_opts_exclude") {
        Some(Value::Array(l)) => l.iter().map(py_text).collect(),
        Some(v) => vec![py_text(v)],
        None => Vec::new(),
    };
    let mut opts = Map::new();
    for key in [
        "cwd",
        "root",
        "runas",
        "env",
        "prepend_path",
        "umask",
        "timeout",
        "success_retcodes",
    ] {
        if exclude.iter().any(|e| e == key) {
            continue;
        }
        if let Some(v) = low.get(key).filter(|v| !v.is_null()) {
            opts.insert(key.into(), v.clone());
        }
    }
    if let Some(shell) = low
        .get("shell")
        .filter(|_| !exclude.iter().any(|e| e == "shell"))
    {
        opts.insert("shell".into(), shell.clone());
    } else if let Some(shell) = host.grains().get("shell") {
        opts.insert("shell".into(), shell.clone());
    }
    opts
}

/// The exit code of a check command (`None` when it could not be run).
fn retcode(cmd: &str, opts: &Map<String, Value>, host: &dyn Host) -> Option<i64> {
    let mut kwargs = opts.clone();
    kwargs.insert("ignore_retcode".into(), Value::Bool(true));
    kwargs.insert("python_shell".into(), Value::Bool(true));
    host.call("cmd.retcode", &[Value::String(cmd.to_string())], &kwargs)
        .ok()
        .and_then(|v| v.as_i64())
}

/// A `{fun: ..., args: [...], ...}` check: the function's return.
fn run_function(entry: &Map<String, Value>, host: &dyn Host) -> Result<Value, String> {
    let fun = entry.get("fun").map(py_text).unwrap_or_default();
    let args = entry
        .get("args")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let kwargs: Map<String, Value> = entry
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "fun" | "args" | "get_return"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut result = host.call(&fun, &args, &kwargs)?;
    if let Some(path) = entry.get("get_return").map(py_text) {
        result = path
            .split(':')
            .try_fold(result, |v, key| v.get(key).cloned())
            .unwrap_or(Value::Null);
    }
    Ok(result)
}

fn as_list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(l) => l.clone(),
        other => vec![other.clone()],
    }
}

/// Salt's `_run_check`: `result` true means the state is skipped.
pub fn run_check(low: &Low, host: &dyn Host) -> Map<String, Value> {
    let opts = cmd_opts(low, host);
    let mut result = false;
    let mut comments: Vec<Value> = Vec::new();
    let mut skip_watch: Option<bool> = None;
    if let Some(onlyif) = low.get("onlyif") {
        let (r, c, s) = onlyif_check(&as_list(onlyif), &opts, host);
        result = r;
        comments.push(c);
        skip_watch = s.or(skip_watch);
    }
    if let Some(unless) = low.get("unless") {
        let (r, c, s) = unless_check(&as_list(unless), &opts, host);
        result = r || result;
        comments.push(c);
        if let Some(s) = s {
            skip_watch = Some(s || skip_watch.unwrap_or(false));
        }
    }
    if let Some(creates) = low.get("creates") {
        let exists = |p: &Value| std::path::Path::new(&py_text(p)).exists();
        let (r, c) = match creates {
            Value::String(p) if exists(creates) => (true, format!("{p} exists")),
            Value::Array(l) if l.iter().all(exists) => (true, "All files in creates exist".into()),
            _ => (false, "Creates files not found".into()),
        };
        if r {
            skip_watch = Some(true);
        }
        result = r || result;
        comments.push(Value::String(c));
    }
    let mut ret = Map::new();
    ret.insert("result".into(), Value::Bool(result));
    ret.insert("comment".into(), Value::Array(comments));
    for key in ["__sls__", "__id__", "name"] {
        ret.insert(key.into(), low.get(key).cloned().unwrap_or(Value::Null));
    }
    if let Some(s) = skip_watch {
        ret.insert("skip_watch".into(), Value::Bool(s));
    }
    ret
}

/// `onlyif`: every command must succeed for the state to run.
fn onlyif_check(
    entries: &[Value],
    opts: &Map<String, Value>,
    host: &dyn Host,
) -> (bool, Value, Option<bool>) {
    let mut comment = Value::Null;
    let mut result = false;
    for entry in entries {
        match entry {
            Value::String(cmd) => {
                let code = retcode(cmd, opts, host).unwrap_or(100);
                if code != 0 && !result {
                    return (true, json!("onlyif condition is false"), Some(true));
                } else if code == 0 {
                    comment = json!("onlyif condition is true");
                    result = false;
                }
            }
            Value::Object(m) => {
                if !m.contains_key("fun") {
                    return (
                        result,
                        json!(format!(
                            "no `fun` argument in onlyif: {}",
                            crate::verify::py_repr(entry)
                        )),
                        None,
                    );
                }
                let ok = run_function(m, host).map(|v| brine_protocol::payload::json_truthy(&v));
                if !ok.unwrap_or(false) {
                    return (true, json!("onlyif condition is false"), Some(true));
                }
                comment = json!("onlyif condition is true");
                result = false;
            }
            _ => {
                return (
                    false,
                    json!("onlyif execution failed, bad type passed"),
                    None,
                )
            }
        }
    }
    (result, comment, None)
}

/// `unless`: the state runs unless every command succeeds.
fn unless_check(
    entries: &[Value],
    opts: &Map<String, Value>,
    host: &dyn Host,
) -> (bool, Value, Option<bool>) {
    let mut out = (false, Value::Null, None);
    for entry in entries {
        match entry {
            Value::String(cmd) => {
                let code = retcode(cmd, opts, host).unwrap_or(0);
                if code == 0 {
                    out = (true, json!("unless condition is true"), Some(true));
                } else {
                    return (false, json!("unless condition is false"), None);
                }
            }
            Value::Object(m) => {
                if !m.contains_key("fun") {
                    return (
                        out.0,
                        json!(format!(
                            "no `fun` argument in unless: {}",
                            crate::verify::py_repr(entry)
                        )),
                        out.2,
                    );
                }
                let ok = run_function(m, host).map(|v| brine_protocol::payload::json_truthy(&v));
                if ok.unwrap_or(false) {
                    out = (true, json!("unless condition is true"), Some(true));
                } else {
                    return (false, json!("unless condition is false"), out.2);
                }
            }
            _ => {
                out = (
                    false,
                    json!("unless condition is false, bad type passed"),
                    out.2,
                );
            }
        }
    }
    out
}

/// Salt's `_run_check_cmd`: `check_cmd` decides the state's result.
pub fn run_check_cmd(low: &Low, host: &dyn Host) -> Map<String, Value> {
    let mut opts = Map::new();
    if let Some(shell) = host.grains().get("shell") {
        opts.insert("shell".into(), shell.clone());
    }
    let mut ret = Map::new();
    ret.insert("result".into(), Value::Bool(false));
    for key in ["__sls__", "__id__", "name"] {
        ret.insert(key.into(), low.get(key).cloned().unwrap_or(Value::Null));
    }
    for entry in as_list(low.get("check_cmd").unwrap_or(&Value::Null)) {
        let code = retcode(&py_text(&entry), &opts, host).unwrap_or(1);
        if code == 0 && ret.get("result") == Some(&Value::Bool(false)) {
            ret.insert(
                "comment".into(),
                json!("check_cmd determined the state succeeded"),
            );
            ret.insert("result".into(), Value::Bool(true));
        } else if code != 0 {
            ret.insert(
                "comment".into(),
                json!("check_cmd determined the state failed"),
            );
            ret.insert("result".into(), Value::Bool(false));
            return ret;
        }
    }
    ret
}
