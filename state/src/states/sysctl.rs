//! The `sysctl` state module: `sysctl.present` sets a kernel parameter and keeps it in a
//! configuration file through the minion's `sysctl` execution module (`sysctl.persist`),
//! with Salt's comments; under `test=True` it only reads the file and the running kernel.

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};
use crate::verify::py_text;

pub const FUNCTIONS: &[Spec] = &[Spec {
    name: "present",
    required: &["name", "value"],
    accepts: Accepts::Only(&["name", "value", "config"]),
    run: present,
}];

use brine_protocol::pystr::split as words;

/// Salt's `re.sub(" +|\t+", " ", s)`: each run of spaces, and each run of tabs, made one
/// space.
fn squeeze(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last: Option<char> = None;
    for c in s.chars() {
        if c == ' ' || c == '\t' {
            if last != Some(c) {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
        last = Some(c);
    }
    out
}

/// A `CommandExecutionError` of an execution function: its message.
fn execution_error(e: &str) -> Option<&str> {
    e.strip_prefix("ERROR: ")
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let name_value = c.low.get("name").cloned().unwrap_or(Value::Null);
    let name = py_text(&name_value);
    let value = c.low.get("value").cloned().unwrap_or(Value::Null);
    let value_text = py_text(&value);
    let mut out = ret(&name, json!(true), "", json!({}));
    let config = match c.arg("config") {
        Some(config) => config.clone(),
        None => c.host.call("sysctl.default_config", &[], &Map::new())?,
    };
    let config_text = py_text(&config);
    let finish = |mut out: Map<String, Value>, result: Value, comment: String| {
        out.insert("result".into(), result);
        out.insert("comment".into(), Value::String(comment));
        Ok(out)
    };

    if c.test {
        let mut kwargs = Map::new();
        kwargs.insert("config_file".into(), config.clone());
        let configured = c.host.call("sysctl.show", &[], &kwargs)?;
        if configured.is_null() {
            return finish(
                out,
                Value::Null,
                format!(
                    "Sysctl option {name} might be changed, we failed to check config file at \
                     {config_text}. The file is either unreadable, or missing."
                ),
            );
        }
        // `name in configured`: a key of the file's parameters (an empty list has none).
        let in_config = name_value
            .as_str()
            .is_some_and(|n| configured.as_object().is_some_and(|m| m.contains_key(n)));
        let current = c
            .host
            .call("sysctl.get", std::slice::from_ref(&name_value), &Map::new())?;
        let current = py_text(&current);
        if !current.is_empty() {
            if in_config {
                if words(&value_text) == words(&current) {
                    return finish(
                        out,
                        json!(true),
                        format!("Sysctl value {name} = {value_text} is already set"),
                    );
                }
            } else if squeeze(&current) != squeeze(&value_text) {
                return finish(
                    out,
                    Value::Null,
                    format!("Sysctl option {name} set to be changed to {value_text}"),
                );
            } else {
                return finish(
                    out,
                    Value::Null,
                    format!(
                        "Sysctl value is currently set on the running system but not in a \
                         config file. Sysctl option {name} set to be changed to {value_text} \
                         in config file."
                    ),
                );
            }
        } else if in_config {
            return finish(
                out,
                Value::Null,
                format!(
                    "Sysctl value {name} is present in configuration file but is not present \
                     in the running config. The value {name} is set to be changed to \
                     {value_text}"
                ),
            );
        }
        return finish(
            out,
            Value::Null,
            format!("Sysctl option {name} would be changed to {value_text}"),
        );
    }

    let update = match c.host.call(
        "sysctl.persist",
        &[name_value.clone(), value.clone(), config],
        &Map::new(),
    ) {
        Ok(update) => update,
        Err(e) => match execution_error(&e) {
            Some(message) => {
                return finish(
                    out,
                    json!(false),
                    format!("Failed to set {name} to {value_text}: {message}"),
                )
            }
            None => return Err(e),
        },
    };
    match update.as_str() {
        Some("Updated") => {
            let mut changes = Map::new();
            changes.insert(name.clone(), value);
            out.insert("changes".into(), Value::Object(changes));
            finish(
                out,
                json!(true),
                format!("Updated sysctl value {name} = {value_text}"),
            )
        }
        Some("Already set") => finish(
            out,
            json!(true),
            format!("Sysctl value {name} = {value_text} is already set"),
        ),
        _ => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_is_compared_as_salt_compares_it() {
        assert_eq!(squeeze("4096  87380\t\t16777216"), "4096 87380 16777216");
        assert_eq!(squeeze(" \t1"), "  1");
        assert_eq!(words(" 4096\t87380  1 "), ["4096", "87380", "1"]);
        assert_eq!(
            execution_error("ERROR: sysctl a does not exist"),
            Some("sysctl a does not exist")
        );
        assert_eq!(
            execution_error("The minion function caused an exception: x"),
            None
        );
    }
}
