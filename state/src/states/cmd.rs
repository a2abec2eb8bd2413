//! The `cmd` state module: `cmd.run`, `cmd.wait` and their `mod_watch`, through the minion's
//! `cmd.run_all`; `cmd.script`, through its `cmd.script`.

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "run",
        required: &["name"],
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
        name: "script",
        required: &["name"],
        accepts: Accepts::Any,
        run: script,
    },
    Spec {
        name: "mod_watch",
        required: &["name"],
        accepts: Accepts::Any,
        run: mod_watch,
    },
];

/// The arguments of a state's `cmd.run` that go on to `cmd.run_all`.
const PASSED: &[&str] = &[
    "cwd",
    "runas",
    "password",
    "env",
    "prepend_path",
    "output_loglevel",
    "hide_output",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
    "stdin",
    "ignore_retcode",
    "redirect_stderr",
    "clean_env",
    "rstrip",
    "reset_system_locale",
    "group",
    "umask",
];

/// The arguments of a state's `cmd.script` that go on to the `cmd.script` function as they
/// are (any other argument goes too, as Salt passes its `**kwargs`).
const SCRIPT_OWN: &[&str] = &[
    "name",
    "source",
    "template",
    "cwd",
    "runas",
    "password",
    "shell",
    "env",
    "stateful",
    "timeout",
    "use_vt",
    "output_loglevel",
    "hide_output",
    "defaults",
    "context",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
];

/// Salt's `cmd.script` state: the script is `source` (else the name's first word), its
/// arguments `args` (else the rest of the name).
fn script(c: &Call) -> Result<Map<String, Value>, String> {
    let stateful = c.flag("stateful", false);
    let test_name = match c.arg("stateful") {
        Some(Value::Array(l)) => l.first().and_then(|f| f.get("test_name")).cloned(),
        _ => None,
    };
    let mut name = c.name();
    if c.test {
        if let Some(t) = &test_name {
            name = crate::verify::py_text(t);
        }
    }
    let mut out = ret(&name, json!(false), "", json!({}));
    let comment = |mut out: Map<String, Value>, text: &str| {
        out.insert("comment".into(), json!(text));
        Ok(out)
    };
    if c.arg("env")
        .is_some_and(|env| !env.is_array() && !env.is_object())
    {
        return comment(
            out,
            "Invalidly-formatted 'env' parameter. See documentation.",
        );
    }
    if c.arg("context")
        .is_some_and(|v| brine_protocol::payload::json_truthy(v) && !v.is_object())
    {
        return comment(
            out,
            "Invalidly-formatted 'context' parameter. Must be formed as a dict.",
        );
    }
    if c.arg("defaults")
        .is_some_and(|v| brine_protocol::payload::json_truthy(v) && !v.is_object())
    {
        return comment(
            out,
            "Invalidly-formatted 'defaults' parameter. Must be formed as a dict.",
        );
    }
    // The template's context: defaults, then context over them.
    let mut context = c
        .arg("defaults")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(extra) = c.arg("context").and_then(Value::as_object) {
        context.extend(extra.clone());
    }
    let mut kwargs = Map::new();
    for (key, value) in c.state_kwargs() {
        if !SCRIPT_OWN.contains(&key.as_str()) {
            kwargs.insert(key.clone(), value.clone());
        }
    }
    for key in [
        "runas",
        "password",
        "env",
        "cwd",
        "template",
        "timeout",
        "output_loglevel",
        "hide_output",
        "use_vt",
        "success_retcodes",
        "success_stdout",
        "success_stderr",
    ] {
        kwargs.insert(key.into(), c.arg(key).cloned().unwrap_or(Value::Null));
    }
    let shell = c
        .arg("shell")
        .filter(|v| brine_protocol::payload::json_truthy(v))
        .or_else(|| c.host.grains().get("shell"))
        .cloned()
        .unwrap_or(Value::Null);
    kwargs.insert("shell".into(), shell);
    kwargs.insert("context".into(), Value::Object(context));
    kwargs.insert("saltenv".into(), json!(c.saltenv));
    let source = c.text("source").unwrap_or_else(|| c.name());
    let args_given = kwargs
        .get("args")
        .is_some_and(brine_protocol::payload::json_truthy);
    if !args_given {
        let full = c.name();
        if full.split_whitespace().count() > 1 {
            if let Some((_, rest)) = full.split_once(' ') {
                kwargs.insert("args".into(), json!(rest));
            }
        }
    }
    if c.test && test_name.is_none() {
        out.insert("result".into(), Value::Null);
        out.insert(
            "comment".into(),
            json!(format!("Command '{name}' would have been executed")),
        );
        return Ok(if stateful { reinterpreted(out) } else { out });
    }
    if let Some(cwd) = c.text("cwd") {
        if !std::path::Path::new(&cwd).is_dir() {
            return comment(
                out,
                &format!("Desired working directory \"{cwd}\" is not available"),
            );
        }
    }
    kwargs.insert("python_shell".into(), json!(true));
    let all = match c.host.call("cmd.script", &[json!(source)], &kwargs) {
        Ok(all) => all,
        Err(e) => return comment(out, &e),
    };
    let result = if kwargs
        .get("retcode")
        .is_some_and(brine_protocol::payload::json_truthy)
    {
        !brine_protocol::payload::json_truthy(&all)
    } else {
        // A script that could not be started has no retcode: a failure.
        all.get("retcode")
            .is_some_and(|code| !brine_protocol::payload::json_truthy(code))
    };
    out.insert("result".into(), json!(result));
    let cache_error = all
        .get("cache_error")
        .is_some_and(brine_protocol::payload::json_truthy);
    out.insert("changes".into(), all.clone());
    out.insert(
        "comment".into(),
        json!(if cache_error {
            format!(
                "Unable to cache script {source} from saltenv '{}'",
                c.saltenv
            )
        } else {
            format!("Command '{name}' run")
        }),
    );
    if stateful {
        out = reinterpreted(out);
    }
    let code_zero = all.get("retcode").and_then(Value::as_i64) == Some(0);
    if c.test && code_zero && brine_protocol::payload::json_truthy(&out["changes"]) {
        out.insert("result".into(), Value::Null);
    }
    Ok(out)
}

fn wait(c: &Call) -> Result<Map<String, Value>, String> {
    Ok(ret(&c.name(), json!(true), "", json!({})))
}

fn run(c: &Call) -> Result<Map<String, Value>, String> {
    let stateful = c.flag("stateful", false);
    let mut name = c.name();
    if let Some(Value::Array(l)) = c.arg("stateful") {
        if let Some(test_name) = l.first().and_then(|f| f.get("test_name")) {
            if c.test {
                name = crate::verify::py_text(test_name);
            }
        }
    }
    let has_test_name = matches!(c.arg("stateful"), Some(Value::Array(l)) if l.first().and_then(|f| f.get("test_name")).is_some());
    let mut out = ret(&name, json!(false), "", json!({}));
    if let Some(env) = c.arg("env") {
        if !env.is_array() && !env.is_object() {
            out.insert(
                "comment".into(),
                json!("Invalidly-formatted 'env' parameter. See documentation."),
            );
            return Ok(out);
        }
    }
    if c.test && !has_test_name {
        out.insert("result".into(), Value::Null);
        out.insert(
            "comment".into(),
            json!(format!("Command \"{name}\" would have been executed")),
        );
        out.insert("changes".into(), json!({"cmd": name}));
        return Ok(if stateful { reinterpreted(out) } else { out });
    }
    if let Some(cwd) = c.text("cwd") {
        if !std::path::Path::new(&cwd).is_dir() {
            out.insert(
                "comment".into(),
                json!(format!(
                    "Desired working directory \"{cwd}\" is not available"
                )),
            );
            return Ok(out);
        }
    }
    let mut kwargs = Map::new();
    for key in PASSED {
        if let Some(v) = c.arg(key) {
            kwargs.insert((*key).into(), v.clone());
        }
    }
    let shell = c
        .arg("shell")
        .cloned()
        .or_else(|| c.host.grains().get("shell").cloned());
    if let Some(shell) = shell {
        kwargs.insert("shell".into(), shell);
    }
    if let Some(timeout) = c.arg("timeout") {
        kwargs.insert("timeout".into(), timeout.clone());
    }
    kwargs.insert("python_shell".into(), json!(true));
    let all = match c.host.call("cmd.run_all", &[json!(name)], &kwargs) {
        Ok(all) => all,
        Err(e) => {
            out.insert("comment".into(), json!(e));
            return Ok(out);
        }
    };
    let code = all.get("retcode").and_then(Value::as_i64).unwrap_or(1);
    out.insert("changes".into(), all.clone());
    out.insert("result".into(), json!(code == 0));
    out.insert("comment".into(), json!(format!("Command \"{name}\" run")));
    if c.flag("ignore_timeout", false) {
        let stdout = all
            .get("stdout")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if code == 1 && stdout.contains("Timed out after") {
            if let Some(ch) = out.get_mut("changes").and_then(Value::as_object_mut) {
                ch.insert("retcode".into(), json!(0));
            }
            out.insert("result".into(), json!(true));
        }
    }
    if stateful {
        out = reinterpreted(out);
    }
    if c.test && code == 0 && brine_protocol::payload::json_truthy(&out["changes"]) {
        out.insert("result".into(), Value::Null);
    }
    Ok(out)
}

/// Salt's `_reinterpreted_state`: a stateful command's last line (`changed=yes
/// comment="..."`) or JSON object tells what changed.
fn reinterpreted(mut state: Map<String, Value>) -> Map<String, Value> {
    let ret = state
        .insert("changes".into(), json!({}))
        .unwrap_or(json!({}));
    state.insert("comment".into(), json!(""));
    let out = ret
        .get("stdout")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if out.is_empty() {
        if let Some(err) = ret
            .get("stderr")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty())
        {
            state.insert("comment".into(), json!(err));
        }
        return state;
    }
    let fail = |mut s: Map<String, Value>, msg: &str| {
        s.insert("comment".into(), json!(msg));
        s.insert("result".into(), json!(false));
        s
    };
    let mut idx = None;
    let (mut data, is_json) = match serde_json::from_str::<Value>(&out) {
        Ok(Value::Object(m)) => (m, true),
        Ok(_) => {
            return fail(
                state,
                "script JSON output must be a JSON object (e.g., {})!",
            )
        }
        Err(_) => {
            let trimmed = out.trim_end();
            let line = match trimmed.rfind('\n') {
                Some(i) => {
                    idx = Some(i);
                    &out[i + 1..]
                }
                None => out.as_str(),
            };
            let mut data = Map::new();
            let items =
                brine_protocol::pyrepr::shlex_split(line).unwrap_or_else(|_| vec![String::new()]);
            for item in &items {
                let Some((k, v)) = item.split_once('=') else {
                    let mut s = fail(state, "Failed parsing script output! Stdout must be JSON or a line of name=value pairs.");
                    if let Some(ch) = s.get_mut("changes").and_then(Value::as_object_mut) {
                        if let Value::Object(r) = &ret {
                            ch.extend(r.clone());
                        }
                    }
                    return s;
                };
                if v.contains('=') {
                    let mut s = fail(state, "Failed parsing script output! Stdout must be JSON or a line of name=value pairs.");
                    if let (Some(ch), Value::Object(r)) =
                        (s.get_mut("changes").and_then(Value::as_object_mut), &ret)
                    {
                        ch.extend(r.clone());
                    }
                    return s;
                }
                data.insert(k.into(), json!(v));
            }
            (data, false)
        }
    };
    let changed = data
        .get("changed")
        .map(crate::verify::py_text)
        .is_some_and(|v| matches!(v.to_lowercase().as_str(), "true" | "yes" | "1"));
    if let Some(comment) = data.remove("comment") {
        state.insert("comment".into(), comment);
    }
    if changed {
        if let Value::Object(r) = &ret {
            for (k, v) in r {
                data.entry(k.clone()).or_insert(v.clone());
            }
        }
        let stdout = if is_json {
            String::new()
        } else {
            let s = data
                .get("stdout")
                .and_then(Value::as_str)
                .unwrap_or_default();
            // Python's `stdout[:idx]`, with `idx` -1 when the output is one line.
            let chars: Vec<char> = s.chars().collect();
            let end = idx.map_or(chars.len().saturating_sub(1), |i| out[..i].chars().count());
            chars[..end.min(chars.len())].iter().collect()
        };
        data.insert("stdout".into(), json!(stdout));
        state.insert("changes".into(), Value::Object(data));
    }
    state
}

fn mod_watch(c: &Call) -> Result<Map<String, Value>, String> {
    let sfun = c.text("sfun").unwrap_or_default();
    if matches!(sfun.as_str(), "wait" | "run" | "watch") {
        return run(c);
    }
    Ok(ret(
        &c.name(),
        json!(false),
        format!("cmd.{sfun} does not work with the watch requisite, please use cmd.wait or cmd.wait_script"),
        json!({}),
    ))
}
