//! The `alternatives` state module: `alternatives.install`, `alternatives.remove`,
//! `alternatives.auto` and `alternatives.set`, through the minion's `alternatives` execution
//! module, with Salt's comments and changes (and the extra `link`, `path` and `priority` keys
//! Salt's returns carry).

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};
use crate::verify::py_text;
use brine_protocol::payload::json_truthy;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "install",
        required: &["name", "link", "path", "priority"],
        accepts: Accepts::Only(&["name", "link", "path", "priority"]),
        run: install,
    },
    Spec {
        name: "remove",
        required: &["name", "path"],
        accepts: Accepts::Only(&["name", "path"]),
        run: remove,
    },
    Spec {
        name: "auto",
        required: &["name"],
        accepts: Accepts::Only(&["name"]),
        run: auto,
    },
    Spec {
        name: "set",
        required: &["name", "path"],
        accepts: Accepts::Only(&["name", "path"]),
        run: set,
    },
];

/// An argument as given (`None` when missing).
fn given(c: &Call, key: &str) -> Value {
    c.low.get(key).cloned().unwrap_or(Value::Null)
}

/// An `alternatives` function's answer.
fn call(c: &Call, fun: &str, args: &[Value]) -> Result<Value, String> {
    c.host
        .call(&format!("alternatives.{fun}"), args, &Map::new())
}

/// `alternatives.show_current` as text, `None` when there is no link.
fn current(c: &Call, name: &str) -> Result<Option<String>, String> {
    let now = call(c, "show_current", &[json!(name)])?;
    Ok(json_truthy(&now).then(|| py_text(&now)))
}

/// Salt's return with the extra keys its alternatives states add.
fn answer(
    name: &str,
    extra: &[(&str, Value)],
    result: Value,
    comment: String,
    changes: Value,
) -> Map<String, Value> {
    let mut out = ret(name, result, comment, changes);
    for (key, value) in extra {
        out.insert(key.to_string(), value.clone());
    }
    out
}

fn install(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let (link, path, priority) = (given(c, "link"), given(c, "path"), given(c, "priority"));
    let (path_text, priority_text) = (py_text(&path), py_text(&priority));
    let extra = [
        ("link", link.clone()),
        ("path", path.clone()),
        ("priority", priority.clone()),
    ];
    let exists = |c: &Call| -> Result<bool, String> {
        Ok(json_truthy(&call(
            c,
            "check_exists",
            &[json!(name), path.clone()],
        )?))
    };
    if exists(c)? {
        let comment = format!("Alternative {path_text} for {name} is already registered");
        return Ok(answer(&name, &extra, json!(true), comment, json!({})));
    }
    if c.test {
        let comment = format!(
            "Alternative will be set for {name} to {path_text} with priority {priority_text}"
        );
        return Ok(answer(&name, &extra, Value::Null, comment, json!({})));
    }
    let out = call(
        c,
        "install",
        &[json!(name), link.clone(), path.clone(), priority.clone()],
    )?;
    if !exists(c)? {
        let comment = format!("Alternative for {name} not installed: {}", py_text(&out));
        return Ok(answer(&name, &extra, json!(false), comment, json!({})));
    }
    let installed = json_truthy(&call(c, "check_installed", &[json!(name), path.clone()])?);
    let comment = if installed {
        format!("Alternative for {name} set to path {path_text} with priority {priority_text}")
    } else {
        format!(
            "Alternative {path_text} for {name} registered with priority {priority_text} and not set to default"
        )
    };
    let changes = json!({"name": name, "link": link, "path": path, "priority": priority});
    Ok(answer(&name, &extra, json!(true), comment, changes))
}

fn remove(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let path = given(c, "path");
    let extra = [("path", path.clone())];
    let registered = json_truthy(&call(c, "check_exists", &[json!(name), path.clone()])?);
    if !registered {
        return Ok(match current(c, &name)? {
            Some(now) => answer(
                &name,
                &extra,
                json!(true),
                format!("Alternative for {name} is set to it's default path {now}"),
                json!({}),
            ),
            None => answer(
                &name,
                &extra,
                json!(false),
                format!("Alternative for {name} doesn't exist"),
                json!({}),
            ),
        });
    }
    if c.test {
        let comment = format!("Alternative for {name} will be removed");
        return Ok(answer(&name, &extra, Value::Null, comment, json!({})));
    }
    call(c, "remove", &[json!(name), path.clone()])?;
    Ok(match current(c, &name)? {
        Some(now) => answer(
            &name,
            &extra,
            json!(true),
            format!("Alternative for {name} removed. Falling back to path {now}"),
            json!({ "path": now }),
        ),
        None => answer(
            &name,
            &extra,
            json!(true),
            format!("Alternative for {name} removed"),
            json!({}),
        ),
    })
}

fn auto(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let display = py_text(&call(c, "display", &[json!(name)])?);
    let first = brine_protocol::nested::splitlines(&display)
        .first()
        .map(|l| l.to_string())
        .ok_or("IndexError: list index out of range")?;
    if first.ends_with(" auto mode") {
        let comment = format!("{name} already in auto mode");
        return Ok(ret(&name, json!(true), comment, json!({})));
    }
    if c.test {
        let comment = format!("{name} will be put in auto mode");
        return Ok(ret(&name, Value::Null, comment, json!({})));
    }
    let said = call(c, "auto", &[json!(name)])?;
    Ok(ret(&name, json!(true), "", json!({ "result": said })))
}

fn set(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let path = given(c, "path");
    let path_text = py_text(&path);
    let extra = [("path", path.clone())];
    if current(c, &name)?.as_deref() == Some(path_text.as_str()) && path.is_string() {
        let comment = format!("Alternative for {name} already set to {path_text}");
        return Ok(answer(&name, &extra, json!(true), comment, json!({})));
    }
    let display = py_text(&call(c, "display", &[json!(name)])?);
    let registered = brine_protocol::nested::splitlines(&display)
        .iter()
        .any(|line| line.starts_with(path_text.as_str()));
    if !registered {
        let comment = format!("Alternative {path_text} for {name} doesn't exist");
        return Ok(answer(&name, &extra, json!(false), comment, json!({})));
    }
    if c.test {
        let comment = format!("Alternative for {name} will be set to path {path_text}");
        return Ok(answer(&name, &extra, Value::Null, comment, json!({})));
    }
    call(c, "set", &[json!(name), path.clone()])?;
    Ok(match current(c, &name)? {
        Some(now) if now == path_text => answer(
            &name,
            &extra,
            json!(true),
            format!("Alternative for {name} set to path {now}"),
            json!({ "path": now }),
        ),
        _ => answer(
            &name,
            &extra,
            json!(true),
            format!("Alternative for {name} not updated"),
            json!({}),
        ),
    })
}
