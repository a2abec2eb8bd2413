//! The `cron` state module: `cron.present`, `cron.absent`, `cron.env_present` and
//! `cron.env_absent`, through the minion's `cron` execution module (`cron.set_job`,
//! `cron.rm_job`, ...), with Salt's comments and changes. In test mode the user's crontab is
//! read with `cron.list_tab` and compared as Salt's state compares it.

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};
use crate::verify::py_text;
use brine_protocol::payload::json_truthy;
use brine_protocol::pyeq::py_eq_json as py_eq;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "present",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "user",
            "minute",
            "hour",
            "daymonth",
            "month",
            "dayweek",
            "comment",
            "commented",
            "identifier",
            "special",
        ]),
        run: present,
    },
    Spec {
        name: "absent",
        required: &["name"],
        accepts: Accepts::Any,
        run: absent,
    },
    Spec {
        name: "env_present",
        required: &["name"],
        accepts: Accepts::Only(&["name", "value", "user"]),
        run: env_present,
    },
    Spec {
        name: "env_absent",
        required: &["name"],
        accepts: Accepts::Only(&["name", "user"]),
        run: env_absent,
    },
];

/// The identifier of a job that has none.
const NO_ID: &str = "NO ID SET";

/// The time arguments of a job, in crontab order.
const TIMES: [&str; 5] = ["minute", "hour", "daymonth", "month", "dayweek"];

/// Python's `str.strip()`.
fn strip(s: &str) -> String {
    s.trim_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
        .to_string()
}

/// An argument as Salt's function receives it: its default when absent, `None` when null.
fn arg_or(c: &Call, key: &str, default: Value) -> Value {
    c.low.get(key).cloned().unwrap_or(default)
}

/// `identifier` as `cron.present` and `cron.absent` use it: the name unless given (`False`
/// counts as not given).
fn identifier(c: &Call, name: &str) -> Value {
    match c.low.get("identifier") {
        None | Some(Value::Bool(false)) => json!(name),
        Some(v) => v.clone(),
    }
}

/// Salt's `_needs_change`: whether `new` asks for something other than `old` (`None` asks
/// for nothing, `random` only replaces `*`).
fn needs_change(old: &Value, new: &Value) -> bool {
    if py_eq(old, new) {
        return false;
    }
    if new.as_str() == Some("random") {
        return old.as_str() == Some("*");
    }
    !new.is_null()
}

/// Salt's `_cron_matched`: a job with an identifier is matched by it, one without by its
/// command.
fn cron_matched(job: &Value, cmd: &Value, identifier: &Value) -> bool {
    let id = job.get("identifier").unwrap_or(&Value::Null);
    let cid = if json_truthy(id) {
        py_text(id)
    } else {
        NO_ID.to_string()
    };
    let wanted = if json_truthy(identifier) {
        py_text(identifier)
    } else {
        NO_ID.to_string()
    };
    let same_cmd = py_eq(job.get("cmd").unwrap_or(&Value::Null), cmd);
    if !same_cmd && cid == NO_ID && wanted == NO_ID {
        return false;
    }
    if same_cmd && cid == NO_ID {
        return true;
    }
    wanted == cid
}

/// What `_check_cron` compares a job with; `None` (null) compares with nothing.
struct Wanted {
    cmd: Value,
    times: [Value; 5],
    comment: Value,
    commented: Value,
    identifier: Value,
    special: Value,
}

/// Salt's `_check_cron`: whether the job is `absent`, `present` or needs an `update`.
fn check_cron(c: &Call, user: &Value, w: Wanted) -> Result<&'static str, String> {
    let text = |v: &Value| match v {
        Value::Null => Value::Null,
        other => json!(py_text(other)),
    };
    let lower = |v: &Value| match v {
        Value::Null => Value::Null,
        other => json!(py_text(other).to_lowercase()),
    };
    let times = w.times.each_ref().map(lower);
    let identifier = text(&w.identifier);
    let commented = match w.commented {
        Value::Null => Value::Null,
        other => json!(other == json!(true)),
    };
    let cmd = text(&w.cmd);
    let lst = c
        .host
        .call("cron.list_tab", std::slice::from_ref(user), &Map::new())?;
    let field = |job: &Value, key: &str| job.get(key).cloned().unwrap_or(Value::Null);
    let section = if w.special.is_null() {
        "crons"
    } else {
        "special"
    };
    let jobs = lst.get(section).and_then(Value::as_array);
    for job in jobs.into_iter().flatten() {
        if !cron_matched(job, &cmd, &identifier) {
            continue;
        }
        let mut tests: Vec<(Value, Value)> = if w.special.is_null() {
            TIMES
                .iter()
                .zip(&times)
                .map(|(k, t)| (field(job, k), t.clone()))
                .collect()
        } else {
            vec![(field(job, "spec"), w.special.clone())]
        };
        tests.extend([
            (field(job, "identifier"), identifier.clone()),
            (field(job, "cmd"), cmd.clone()),
            (field(job, "comment"), w.comment.clone()),
            (field(job, "commented"), commented.clone()),
        ]);
        return Ok(if tests.iter().any(|(o, n)| needs_change(o, n)) {
            "update"
        } else {
            "present"
        });
    }
    Ok("absent")
}

/// Salt's `_check_cron_env`: whether the variable is `absent`, `present` or needs an
/// `update`.
fn check_cron_env(
    c: &Call,
    user: &Value,
    name: &Value,
    value: &Value,
) -> Result<&'static str, String> {
    let value = if value.is_null() {
        json!("")
    } else {
        value.clone()
    };
    let lst = c
        .host
        .call("cron.list_tab", std::slice::from_ref(user), &Map::new())?;
    let envs = lst.get("env").and_then(Value::as_array);
    for env in envs.into_iter().flatten() {
        if py_eq(name, env.get("name").unwrap_or(&Value::Null)) {
            return Ok(if py_eq(&value, env.get("value").unwrap_or(&Value::Null)) {
                "present"
            } else {
                "update"
            });
        }
    }
    Ok("absent")
}

fn kwargs<const N: usize>(entries: [(&str, Value); N]) -> Map<String, Value> {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = strip(&c.name());
    let user = arg_or(c, "user", json!("root"));
    let times = TIMES.map(|k| arg_or(c, k, json!("*")));
    let comment = arg_or(c, "comment", Value::Null);
    let commented = arg_or(c, "commented", json!(false));
    let identifier = identifier(c, &name);
    let special = arg_or(c, "special", Value::Null);
    let mut out = ret(&name, json!(true), "", json!({}));
    let mut say = |result: Value, comment: String| {
        out.insert("result".into(), result);
        out.insert("comment".into(), json!(comment));
    };
    if c.test {
        let status = check_cron(
            c,
            &user,
            Wanted {
                cmd: json!(name),
                times,
                comment,
                commented,
                identifier,
                special,
            },
        )?;
        match status {
            "absent" => say(Value::Null, format!("Cron {name} is set to be added")),
            "present" => say(json!(true), format!("Cron {name} already present")),
            _ => say(Value::Null, format!("Cron {name} is set to be updated")),
        }
        return Ok(out);
    }
    let [minute, hour, daymonth, month, dayweek] = times;
    let data = if special.is_null() {
        c.host.call(
            "cron.set_job",
            &[],
            &kwargs([
                ("user", user.clone()),
                ("minute", minute),
                ("hour", hour),
                ("daymonth", daymonth),
                ("month", month),
                ("dayweek", dayweek),
                ("cmd", json!(name)),
                ("comment", comment),
                ("commented", commented),
                ("identifier", identifier),
            ]),
        )?
    } else {
        c.host.call(
            "cron.set_special",
            &[],
            &kwargs([
                ("user", user.clone()),
                ("special", special),
                ("cmd", json!(name)),
                ("comment", comment),
                ("commented", commented),
                ("identifier", identifier),
            ]),
        )?
    };
    let user_text = py_text(&user);
    let changed = json!({ user_text.clone(): name });
    match data.as_str() {
        Some("present") => say(json!(true), format!("Cron {name} already present")),
        Some("new") => {
            say(
                json!(true),
                format!("Cron {name} added to {user_text}'s crontab"),
            );
            out.insert("changes".into(), changed);
        }
        Some("updated") => {
            say(json!(true), format!("Cron {name} updated"));
            out.insert("changes".into(), changed);
        }
        _ => say(
            json!(false),
            format!(
                "Cron {name} for user {user_text} failed to commit with error \n{}",
                py_text(&data)
            ),
        ),
    }
    Ok(out)
}

fn absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = strip(&c.name());
    let user = arg_or(c, "user", json!("root"));
    let identifier = identifier(c, &name);
    let mut out = ret(&name, json!(true), "", json!({}));
    let mut say = |result: Value, comment: String| {
        out.insert("result".into(), result);
        out.insert("comment".into(), json!(comment));
    };
    if c.test {
        let none = || Value::Null;
        let status = check_cron(
            c,
            &user,
            Wanted {
                cmd: json!(name),
                times: std::array::from_fn(|_| none()),
                comment: none(),
                commented: none(),
                identifier,
                special: none(),
            },
        )?;
        match status {
            "absent" => say(json!(true), format!("Cron {name} is absent")),
            _ => say(Value::Null, format!("Cron {name} is set to be removed")),
        }
        return Ok(out);
    }
    let data = match c.arg("special") {
        None => c.host.call(
            "cron.rm_job",
            &[user.clone(), json!(name)],
            &kwargs([("identifier", identifier)]),
        )?,
        Some(special) => c.host.call(
            "cron.rm_special",
            &[user.clone(), json!(name)],
            &kwargs([("special", special.clone()), ("identifier", identifier)]),
        )?,
    };
    let user_text = py_text(&user);
    match data.as_str() {
        Some("absent") => say(json!(true), format!("Cron {name} already absent")),
        Some("removed") => {
            say(
                json!(true),
                format!("Cron {name} removed from {user_text}'s crontab"),
            );
            out.insert("changes".into(), json!({ user_text: name }));
        }
        _ => say(
            json!(false),
            format!(
                "Cron {name} for user {user_text} failed to commit with error {}",
                py_text(&data)
            ),
        ),
    }
    Ok(out)
}

fn env_present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let user = arg_or(c, "user", json!("root"));
    let value = arg_or(c, "value", Value::Null);
    let mut out = ret(&name, json!(true), "", json!({}));
    let mut say = |result: Value, comment: String| {
        out.insert("result".into(), result);
        out.insert("comment".into(), json!(comment));
    };
    if c.test {
        match check_cron_env(c, &user, &json!(name), &value)? {
            "absent" => say(Value::Null, format!("Cron env {name} is set to be added")),
            "present" => say(json!(true), format!("Cron env {name} already present")),
            _ => say(Value::Null, format!("Cron env {name} is set to be updated")),
        }
        return Ok(out);
    }
    let data = c.host.call(
        "cron.set_env",
        &[user.clone(), json!(name)],
        &kwargs([("value", value)]),
    )?;
    let user_text = py_text(&user);
    let changed = json!({ user_text.clone(): name });
    match data.as_str() {
        Some("present") => say(json!(true), format!("Cron env {name} already present")),
        Some("new") => {
            say(
                json!(true),
                format!("Cron env {name} added to {user_text}'s crontab"),
            );
            out.insert("changes".into(), changed);
        }
        Some("updated") => {
            say(json!(true), format!("Cron env {name} updated"));
            out.insert("changes".into(), changed);
        }
        _ => say(
            json!(false),
            format!(
                "Cron env {name} for user {user_text} failed to commit with error \n{}",
                py_text(&data)
            ),
        ),
    }
    Ok(out)
}

fn env_absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = strip(&c.name());
    let user = arg_or(c, "user", json!("root"));
    let mut out = ret(&name, json!(true), "", json!({}));
    let mut say = |result: Value, comment: String| {
        out.insert("result".into(), result);
        out.insert("comment".into(), json!(comment));
    };
    if c.test {
        match check_cron_env(c, &user, &json!(name), &Value::Null)? {
            "absent" => say(json!(true), format!("Cron env {name} is absent")),
            _ => say(Value::Null, format!("Cron env {name} is set to be removed")),
        }
        return Ok(out);
    }
    let data = c
        .host
        .call("cron.rm_env", &[user.clone(), json!(name)], &Map::new())?;
    let user_text = py_text(&user);
    match data.as_str() {
        Some("absent") => say(json!(true), format!("Cron env {name} already absent")),
        Some("removed") => {
            say(
                json!(true),
                format!("Cron env {name} removed from {user_text}'s crontab"),
            );
            out.insert("changes".into(), json!({ user_text: name }));
        }
        _ => say(
            json!(false),
            format!(
                "Cron env {name} for user {user_text} failed to commit with error {}",
                py_text(&data)
            ),
        ),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(cmd: &str, identifier: Value) -> Value {
        json!({"minute": "1", "hour": "*", "daymonth": "*", "month": "*", "dayweek": "*",
               "identifier": identifier, "cmd": cmd, "comment": null, "commented": false})
    }

    #[test]
    fn jobs_match_by_identifier_else_by_command() {
        let with_id = job("echo a", json!("ID1"));
        assert!(cron_matched(&with_id, &json!("echo other"), &json!("ID1")));
        assert!(!cron_matched(&with_id, &json!("echo a"), &json!("ID2")));
        assert!(!cron_matched(&with_id, &json!("echo a"), &Value::Null));
        let without = job("echo a", Value::Null);
        assert!(cron_matched(&without, &json!("echo a"), &json!("ANY")));
        assert!(cron_matched(&without, &json!("echo a"), &Value::Null));
        assert!(!cron_matched(&without, &json!("echo b"), &Value::Null));
        assert!(!cron_matched(&without, &json!("echo b"), &json!("ANY")));
    }

    #[test]
    fn change_rules() {
        assert!(!needs_change(&json!("5"), &Value::Null));
        assert!(needs_change(&json!("5"), &json!("6")));
        assert!(needs_change(&json!("*"), &json!("random")));
        assert!(!needs_change(&json!("7"), &json!("random")));
        assert!(!needs_change(&json!(false), &json!(0)));
        assert!(needs_change(&Value::Null, &json!("")));
        assert_eq!(strip(" \tdate > /tmp/x \n"), "date > /tmp/x");
    }
}
