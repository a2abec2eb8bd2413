//! The `test` state module: states that succeed, fail or change on demand.

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "nop",
        required: &["name"],
        accepts: Accepts::Any,
        run: succeed_without_changes,
    },
    Spec {
        name: "succeed_without_changes",
        required: &["name"],
        accepts: Accepts::Any,
        run: succeed_without_changes,
    },
    Spec {
        name: "fail_without_changes",
        required: &["name"],
        accepts: Accepts::Any,
        run: fail_without_changes,
    },
    Spec {
        name: "succeed_with_changes",
        required: &["name"],
        accepts: Accepts::Any,
        run: succeed_with_changes,
    },
    Spec {
        name: "fail_with_changes",
        required: &["name"],
        accepts: Accepts::Any,
        run: fail_with_changes,
    },
    Spec {
        name: "configurable_test_state",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "changes",
            "result",
            "comment",
            "warnings",
            "allow_test_mode_failure",
        ]),
        run: configurable_test_state,
    },
    Spec {
        name: "show_notification",
        required: &["name"],
        accepts: Accepts::Any,
        run: show_notification,
    },
    Spec {
        name: "mod_watch",
        required: &["name"],
        accepts: Accepts::Any,
        run: mod_watch,
    },
];

fn pretend() -> Value {
    json!({"testing": {"old": "Unchanged", "new": "Something pretended to change"}})
}

fn comment(c: &Call, default: &str) -> String {
    c.text("comment").unwrap_or_else(|| default.into())
}

fn succeed_without_changes(c: &Call) -> Result<Map<String, Value>, String> {
    let comment = if c.low.get("fun").and_then(Value::as_str) == Some("nop") {
        "Success!".to_string()
    } else {
        comment(c, "Success!")
    };
    Ok(ret(&c.name(), json!(true), comment, json!({})))
}

fn fail_without_changes(c: &Call) -> Result<Map<String, Value>, String> {
    if c.test {
        return Ok(ret(
            &c.name(),
            json!(false),
            "If we weren't testing, this would be a failure!",
            json!({}),
        ));
    }
    Ok(ret(
        &c.name(),
        json!(false),
        comment(c, "Failure!"),
        json!({}),
    ))
}

fn succeed_with_changes(c: &Call) -> Result<Map<String, Value>, String> {
    if c.test {
        return Ok(ret(
            &c.name(),
            Value::Null,
            "If we weren't testing, this would be successful with changes",
            pretend(),
        ));
    }
    Ok(ret(
        &c.name(),
        json!(true),
        comment(c, "Success!"),
        pretend(),
    ))
}

fn fail_with_changes(c: &Call) -> Result<Map<String, Value>, String> {
    if c.test {
        return Ok(ret(
            &c.name(),
            Value::Null,
            "If we weren't testing, this would be failed with changes",
            pretend(),
        ));
    }
    Ok(ret(
        &c.name(),
        json!(false),
        comment(c, "Failure!"),
        pretend(),
    ))
}

fn configurable_test_state(c: &Call) -> Result<Map<String, Value>, String> {
    let comment = c.text("comment").unwrap_or_default();
    let changes = c.arg("changes").cloned().unwrap_or(json!(true));
    let result = c.arg("result").cloned().unwrap_or(json!(true));
    let changed = match &changes {
        Value::Bool(b) => *b,
        other if crate::verify::py_text(other).eq_ignore_ascii_case("random") => rand_bool(),
        _ => {
            return Err("SaltInvocationError: You have specified the state option 'changes' with invalid arguments. It must be either True, False, or 'Random'".into())
        }
    };
    let result_value = match &result {
        Value::Bool(b) => *b,
        other if crate::verify::py_text(other).eq_ignore_ascii_case("random") => rand_bool(),
        _ => {
            return Err("SaltInvocationError: You have specified the state option 'result' with invalid arguments. It must be either True, False, or 'Random'".into())
        }
    };
    let mut out = ret(
        &c.name(),
        json!(result_value),
        comment.clone(),
        if changed { pretend() } else { json!({}) },
    );
    match c.arg("warnings") {
        None => {}
        Some(Value::String(w)) => {
            out.insert("warnings".into(), json!([w]));
        }
        Some(Value::Array(l)) => {
            out.insert("warnings".into(), Value::Array(l.clone()));
        }
        Some(_) => {
            return Err("SaltInvocationError: You have specified the state option 'warnings' with invalid arguments. It must be a string or a list of strings".into())
        }
    }
    if c.test {
        let test_result = if c.flag("allow_test_mode_failure", false) && result == json!(false) {
            json!(false)
        } else if changes == json!(false) {
            json!(true)
        } else {
            Value::Null
        };
        out.insert("result".into(), test_result);
        out.insert(
            "comment".into(),
            json!(if comment.is_empty() {
                "This is a test".to_string()
            } else {
                comment
            }),
        );
    }
    Ok(out)
}

fn rand_bool() -> bool {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .is_ok_and(|d| d.subsec_nanos() % 2 == 0)
}

fn show_notification(c: &Call) -> Result<Map<String, Value>, String> {
    let text = c.text("text").filter(|t| !t.is_empty());
    let Some(text) = text else {
        return Err("SaltInvocationError: Missing required argument text.".into());
    };
    Ok(ret(&c.name(), json!(true), text, json!({})))
}

fn mod_watch(c: &Call) -> Result<Map<String, Value>, String> {
    let mut has_changes = Vec::new();
    if let Some(watched) = c
        .low
        .get("__reqs__")
        .and_then(|r| r.get("watch"))
        .and_then(Value::as_array)
    {
        for req in watched.iter().filter_map(Value::as_object) {
            let tag = crate::low::tag(req);
            if c.running.get(&tag).is_some_and(|r| {
                brine_protocol::payload::json_truthy(r.get("changes").unwrap_or(&Value::Null))
            }) {
                has_changes.push(json!(format!(
                    "{}: {}",
                    crate::low::text(req, "state"),
                    crate::low::text(req, "__id__")
                )));
            }
        }
    }
    let mut out = Map::new();
    out.insert("name".into(), json!(c.name()));
    out.insert(
        "result".into(),
        c.arg("result").cloned().unwrap_or(json!(true)),
    );
    out.insert(
        "comment".into(),
        c.arg("comment")
            .cloned()
            .unwrap_or(json!("Watch statement fired.")),
    );
    out.insert(
        "changes".into(),
        c.arg("changes")
            .cloned()
            .unwrap_or(json!({"Requisites with changes": has_changes})),
    );
    Ok(out)
}
