//! The `ssh_auth` state module: `ssh_auth.present`, `ssh_auth.absent` and `ssh_auth.manage`
//! (a user's authorized SSH keys), through the minion's `ssh` execution module, with Salt's
//! comments and changes. A key's name may carry its options, type and comment
//! (`no-pty ssh-ed25519 AAAA... me@host`), which then replace the state's `options`, `enc` and
//! `comment`; a `source` file gives several keys at once.
//!
//! Where Salt walks a Python set (the keys `manage` removes), this walks them in the file's
//! order.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};
use crate::verify::py_text;
use brine_protocol::payload::json_truthy;
use brine_protocol::pystr;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "present",
        required: &["name", "user"],
        accepts: Accepts::Any,
        run: present,
    },
    Spec {
        name: "absent",
        required: &["name", "user"],
        accepts: Accepts::Only(&[
            "name",
            "user",
            "enc",
            "comment",
            "source",
            "options",
            "config",
            "fingerprint_hash_type",
        ]),
        run: absent,
    },
    Spec {
        name: "manage",
        required: &["name", "ssh_keys", "user"],
        accepts: Accepts::Any,
        run: manage,
    },
];

/// `{options} {enc} {key} {comment}`, Salt's pattern for a whole key line.
fn full_key() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^(.*?)\s?((?:sk-)?(?:ssh\-|ecds)[\w@.-]+\s.+)$").expect("regex"))
}

/// What a state asks for: its arguments with the name's own parts taken out.
#[derive(Debug, Clone)]
struct Want {
    /// The key (its base64 text once parsed).
    name: String,
    user: Value,
    enc: String,
    comment: String,
    source: String,
    options: Option<Value>,
    config: String,
    fingerprint_hash_type: Value,
}

impl Want {
    fn of(c: &Call, name: String) -> Want {
        let text = |key: &str, default: &str| {
            c.low.get(key).map_or(default.to_string(), |v| match v {
                Value::Null => "None".to_string(),
                other => py_text(other),
            })
        };
        Want {
            name,
            user: c.low.get("user").cloned().unwrap_or(Value::Null),
            enc: text("enc", "ssh-rsa"),
            comment: text("comment", ""),
            source: text("source", ""),
            options: c.arg("options").cloned(),
            config: text("config", ".ssh/authorized_keys"),
            fingerprint_hash_type: c
                .low
                .get("fingerprint_hash_type")
                .cloned()
                .unwrap_or(Value::Null),
        }
    }

    fn user(&self) -> String {
        py_text(&self.user)
    }

    /// The name read as a key line: its options, type and comment replace the state's
    /// (`limit` is how many words the key and comment split into: Salt splits the comment off
    /// in some places and not in others).
    fn parse_name(&mut self, limit: Option<usize>) -> Result<(), String> {
        let name = self.name.clone();
        match full_key().captures(&name) {
            None => {
                let words = split_n(&name, limit.map(|_| 2));
                let first = words.first().ok_or("IndexError: list index out of range")?;
                self.name = first.to_string();
                if words.len() == 2 {
                    self.comment = words[1].to_string();
                }
            }
            Some(caps) => {
                let opts = caps.get(1).map_or("", |m| m.as_str());
                if !opts.is_empty() {
                    self.options = Some(json!(opts.split(',').collect::<Vec<_>>()));
                }
                let comps = split_n(caps.get(2).map_or("", |m| m.as_str()), limit);
                self.enc = comps[0].to_string();
                self.name = comps[1].to_string();
                if comps.len() == 3 {
                    self.comment = comps[2].to_string();
                }
            }
        }
        Ok(())
    }

    fn options_list(&self) -> Value {
        match &self.options {
            Some(v) if json_truthy(v) => v.clone(),
            _ => json!([]),
        }
    }

    /// The keyword arguments every `ssh` function takes.
    fn common(&self) -> Map<String, Value> {
        let mut kw = Map::new();
        kw.insert("config".into(), json!(self.config));
        kw.insert(
            "fingerprint_hash_type".into(),
            self.fingerprint_hash_type.clone(),
        );
        kw
    }
}

/// Python's `str.split(None, n - 1)` (`n` words at most), or `str.split()`.
fn split_n(s: &str, n: Option<usize>) -> Vec<&str> {
    let Some(n) = n else {
        return pystr::split(s);
    };
    let mut out = Vec::new();
    let mut rest = pystr::strip_start(s);
    while !rest.is_empty() {
        if out.len() + 1 == n {
            out.push(rest);
            break;
        }
        let end = rest.find(pystr::is_space).unwrap_or(rest.len());
        out.push(&rest[..end]);
        rest = pystr::strip_start(&rest[end..]);
    }
    out
}

/// `ssh.check_key_file` for the state's source, and the error Salt's module leaves in its
/// context when the file has no keys.
fn check_key_file(c: &Call, w: &Want) -> Result<(Map<String, Value>, Option<String>), String> {
    let mut kw = w.common();
    kw.insert("saltenv".into(), json!(c.saltenv));
    let keys = c.host.call(
        "ssh.check_key_file",
        &[w.user.clone(), json!(w.source)],
        &kw,
    )?;
    let keys = keys.as_object().cloned().unwrap_or_default();
    if !keys.is_empty() {
        return Ok((keys, None));
    }
    // An empty answer for a file that is there means it holds no keys.
    let cached = c.host.call(
        "cp.cache_file",
        &[json!(w.source), json!(c.saltenv)],
        &Map::new(),
    )?;
    let err = json_truthy(&cached).then(|| {
        format!(
            "No keys detected in {}. Is file properly formatted?",
            w.source
        )
    });
    Ok((keys, err))
}

/// `fun` (`ssh.set_auth_key_from_file` or `ssh.rm_auth_key_from_file`) for the state's
/// source, with `options` when given; `None` when `cp.get_url` finds no such source.
fn from_source(
    c: &Call,
    w: &Want,
    fun: &str,
    options: Option<Value>,
) -> Result<Option<String>, String> {
    let mut kw = Map::new();
    kw.insert("saltenv".into(), json!(c.saltenv));
    let path = c
        .host
        .call("cp.get_url", &[json!(w.source), Value::Null], &kw)?;
    if !json_truthy(&path) {
        return Ok(None);
    }
    let mut kw = w.common();
    kw.insert("saltenv".into(), json!(c.saltenv));
    if let Some(options) = options {
        kw.insert("options".into(), options);
    }
    let said = c.host.call(fun, &[w.user.clone(), json!(w.source)], &kw)?;
    Ok(Some(py_text(&said)))
}

/// `ssh.check_key` for the parsed key.
fn check_key(c: &Call, w: &Want) -> Result<String, String> {
    let args = [
        w.user.clone(),
        json!(w.name),
        json!(w.enc),
        json!(w.comment),
        w.options_list(),
    ];
    let status = c.host.call("ssh.check_key", &args, &w.common())?;
    Ok(py_text(&status))
}

/// A test run with a `source`: a line (`say`) for each of its keys whose status
/// (`ssh.check_key_file`'s) is not `unchanged`; with none, the error of a file without keys
/// or "All host keys in file ... are already <state>".
fn source_test(
    c: &Call,
    w: &Want,
    unchanged: &str,
    say: fn(&str, &Value) -> String,
    state: &str,
) -> Result<(Value, String), String> {
    let (keys, err) = check_key_file(c, w)?;
    let comment: String = keys
        .iter()
        .filter(|(_, status)| status.as_str() != Some(unchanged))
        .map(|(key, status)| say(key, status))
        .collect();
    if !comment.is_empty() {
        return Ok((Value::Null, comment));
    }
    Ok(match err {
        Some(err) => (json!(false), err),
        None => (
            json!(true),
            format!("All host keys in file {} are already {state}", w.source),
        ),
    })
}

/// Salt's `_present_test`.
fn present_test(c: &Call, w: &Want) -> Result<(Value, String), String> {
    let user = w.user();
    if !w.source.is_empty() {
        return source_test(
            c,
            w,
            "exists",
            |key, status| format!("Set to {}: {key}\n", py_text(status)),
            "present",
        );
    }
    let mut w = w.clone();
    w.parse_name(None)?;
    let name = &w.name;
    Ok(match check_key(c, &w)?.as_str() {
        "update" => (
            Value::Null,
            format!("Key {name} for user {user} is set to be updated"),
        ),
        "add" => (
            Value::Null,
            format!("Key {name} for user {user} is set to be added"),
        ),
        "exists" => (
            json!(true),
            format!("The authorized host key {name} is already present for user {user}"),
        ),
        _ => (Value::Null, String::new()),
    })
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let mut w = Want::of(c, c.name());
    present_want(c, &mut w)
}

fn present_want(c: &Call, w: &mut Want) -> Result<Map<String, Value>, String> {
    let mut out = ret(&w.name, json!(true), "", json!({}));
    if w.source.is_empty() {
        w.parse_name(Some(3))?;
    }
    let user = w.user();
    let name = w.name.clone();
    if c.test {
        let (result, comment) = present_test(c, w)?;
        out.insert("result".into(), result);
        out.insert("comment".into(), json!(comment));
        return Ok(out);
    }
    let data = if !w.source.is_empty() {
        let options = w.options.clone().unwrap_or(Value::Null);
        from_source(c, w, "ssh.set_auth_key_from_file", Some(options))?
            .unwrap_or_else(|| "no key".to_string())
    } else {
        let mut kw = w.common();
        kw.insert("enc".into(), json!(w.enc));
        kw.insert("comment".into(), json!(w.comment));
        kw.insert("options".into(), w.options_list());
        py_text(
            &c.host
                .call("ssh.set_auth_key", &[w.user.clone(), json!(name)], &kw)?,
        )
    };
    let mut changes = Map::new();
    let (result, comment) = match data.as_str() {
        "replace" => {
            changes.insert(name.clone(), json!("Updated"));
            (
                true,
                format!("The authorized host key {name} for user {user} was updated"),
            )
        }
        "no change" => (
            true,
            format!("The authorized host key {name} is already present for user {user}"),
        ),
        "new" => {
            changes.insert(name.clone(), json!("New"));
            (
                true,
                format!("The authorized host key {name} for user {user} was added"),
            )
        }
        "no key" => (
            false,
            format!(
                "Failed to add the ssh key. Source file {} is missing",
                w.source
            ),
        ),
        "fail" => {
            let no_keys = !w.source.is_empty() && check_key_file(c, w)?.1.is_some();
            (
                false,
                if no_keys {
                    format!(
                        "No keys detected in {}. Is file properly formatted?",
                        w.source
                    )
                } else {
                    "Failed to add the ssh key. Is the home directory available, and/or does the key file exist?".to_string()
                },
            )
        }
        "invalid" | "Invalid public key" => (
            false,
            "Invalid public ssh key, most likely has spaces or invalid syntax".to_string(),
        ),
        _ => (true, String::new()),
    };
    out.insert("changes".into(), Value::Object(changes));
    out.insert("result".into(), json!(result));
    out.insert("comment".into(), json!(comment));
    Ok(out)
}

/// Salt's `_absent_test`.
fn absent_test(c: &Call, w: &Want) -> Result<(Value, String), String> {
    let user = w.user();
    if !w.source.is_empty() {
        return source_test(
            c,
            w,
            "add",
            |key, _| format!("Set to remove: {key}\n"),
            "absent",
        );
    }
    let mut w = w.clone();
    w.parse_name(None)?;
    Ok(match check_key(c, &w)?.as_str() {
        "update" | "exists" => (
            Value::Null,
            format!("Key {} for user {user} is set for removal", w.name),
        ),
        _ => (json!(true), "Key is already absent".to_string()),
    })
}

fn absent(c: &Call) -> Result<Map<String, Value>, String> {
    let mut w = Want::of(c, c.name());
    absent_want(c, &mut w)
}

fn absent_want(c: &Call, w: &mut Want) -> Result<Map<String, Value>, String> {
    let mut out = ret(&w.name, json!(true), "", json!({}));
    if c.test {
        let (result, comment) = absent_test(c, w)?;
        out.insert("result".into(), result);
        out.insert("comment".into(), json!(comment));
        return Ok(out);
    }
    let comment = if !w.source.is_empty() {
        from_source(c, w, "ssh.rm_auth_key_from_file", None)?.unwrap_or_default()
    } else {
        w.parse_name(None)?;
        py_text(&c.host.call(
            "ssh.rm_auth_key",
            &[w.user.clone(), json!(w.name)],
            &w.common(),
        )?)
    };
    match comment.as_str() {
        "User authorized keys file not present" => {
            out.insert("result".into(), json!(false));
        }
        "Key removed" => {
            out.insert("changes".into(), json!({ w.name.clone(): "Removed" }));
        }
        _ => {}
    }
    out.insert("comment".into(), json!(comment));
    Ok(out)
}

fn manage(c: &Call) -> Result<Map<String, Value>, String> {
    let keys: Vec<String> = match c.low.get("ssh_keys") {
        Some(Value::Array(items)) => items.iter().map(py_text).collect(),
        Some(Value::String(s)) => s.chars().map(String::from).collect(),
        _ => Vec::new(),
    };
    let base = Want::of(c, String::new());
    let mut out = ret("", json!(true), "", json!({}));
    let potential: Vec<&str> = keys.iter().flat_map(|k| k.split(' ')).collect();
    let existing = c.host.call("ssh.auth_keys", &[], &{
        let mut kw = base.common();
        kw.insert("user".into(), base.user.clone());
        kw
    })?;
    let mut changes = Map::new();
    let mut comment = String::new();
    let mut result = json!(true);
    if let Some(existing) = existing.as_object() {
        for remove in existing.keys().filter(|k| !potential.contains(&k.as_str())) {
            if c.test {
                comment = format!("{remove} Key set for removal");
                result = Value::Null;
            } else {
                let mut w = Want {
                    name: remove.clone(),
                    ..base.clone()
                };
                let gone = absent_want(c, &mut w)?;
                changes.insert(remove.clone(), gone["comment"].clone());
            }
        }
    }
    for key in &keys {
        let mut w = Want {
            name: key.clone(),
            ..base.clone()
        };
        let run = present_want(c, &mut w)?;
        match run.get("changes").and_then(Value::as_object) {
            Some(ch) if !ch.is_empty() => {
                changes.extend(ch.clone());
            }
            _ => {
                comment = format!("{comment}\n{}", py_text(&run["comment"]));
                comment = pystr::strip(&comment).to_string();
            }
        }
        match &run["result"] {
            Value::Null => result = Value::Null,
            r if !json_truthy(r) => result = json!(false),
            _ => {}
        }
    }
    out.insert("changes".into(), Value::Object(changes));
    out.insert("result".into(), result);
    out.insert("comment".into(), json!(comment));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::split_n;

    #[test]
    fn splits_as_python_does() {
        assert_eq!(split_n("  a b  c d ", Some(2)), ["a", "b  c d "]);
        assert_eq!(split_n("a b c d", Some(3)), ["a", "b", "c d"]);
        assert_eq!(split_n(" a  b ", None), ["a", "b"]);
        assert!(split_n("   ", Some(2)).is_empty());
    }
}
