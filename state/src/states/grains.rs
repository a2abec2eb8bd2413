//! The `grains` state module: `grains.exists`, `grains.present`, `grains.absent`,
//! `grains.append`, `grains.list_present` and `grains.list_absent`, through the minion's
//! `grains` execution module (which writes the grains file next to the minion's
//! configuration and collects the grains again), with Salt's comments and changes. A name may
//! be nested (`roles:web`); `delimiter` is a pattern standing for `:` in it.

use regex::Regex;
use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};
use crate::verify::{py_text, sls_text};
use brine_protocol::payload::json_truthy;
use brine_protocol::pyeq::py_eq_json as py_eq;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "exists",
        required: &["name"],
        accepts: Accepts::Only(&["name", "delimiter"]),
        run: exists,
    },
    Spec {
        name: "present",
        required: &["name", "value"],
        accepts: Accepts::Only(&["name", "value", "delimiter", "force"]),
        run: present,
    },
    Spec {
        name: "list_present",
        required: &["name", "value"],
        accepts: Accepts::Only(&["name", "value", "delimiter"]),
        run: list_present,
    },
    Spec {
        name: "list_absent",
        required: &["name", "value"],
        accepts: Accepts::Only(&["name", "value", "delimiter"]),
        run: list_absent,
    },
    Spec {
        name: "absent",
        required: &["name"],
        accepts: Accepts::Only(&["name", "destructive", "delimiter", "force"]),
        run: absent,
    },
    Spec {
        name: "append",
        required: &["name", "value"],
        accepts: Accepts::Only(&["name", "value", "convert", "delimiter"]),
        run: append,
    },
];

/// The default that no grain has: what `grains.get` answers for a grain that is not set.
const NOT_SET: &str = "\u{0}brine: no such grain\u{0}";

/// The state's name with its `delimiter` (a pattern) replaced by `:`.
fn name_of(c: &Call) -> Result<String, String> {
    let name = c.name();
    match c.arg("delimiter").map(py_text) {
        None => Ok(name),
        Some(delimiter) if delimiter == ":" => Ok(name),
        Some(delimiter) => {
            let re = Regex::new(&delimiter).map_err(|e| format!("re.error: {e}"))?;
            Ok(re.replace_all(&name, ":").into_owned())
        }
    }
}

/// A grain's value, `None` when it is not set.
fn get(c: &Call, name: &str) -> Result<Option<Value>, String> {
    let v = c
        .host
        .call("grains.get", &[json!(name), json!(NOT_SET)], &Map::new())?;
    Ok((v != json!(NOT_SET)).then_some(v))
}

fn contains(list: &[Value], v: &Value) -> bool {
    list.iter().any(|item| py_eq(item, v))
}

/// The failure for a grain that is not a list.
fn not_a_list(name: &str) -> Map<String, Value> {
    let comment = format!("Grain {name} is not a valid list");
    ret(name, json!(false), comment, json!({}))
}

fn exists(c: &Call) -> Result<Map<String, Value>, String> {
    let name = name_of(c)?;
    Ok(match get(c, &name)? {
        Some(_) => ret(&name, json!(true), "Grain exists", json!({})),
        None => ret(&name, json!(false), "Grain does not exist", json!({})),
    })
}

/// The return of `grains.set` as the state's own (its name replaced).
fn set_return(got: Value, name: &str) -> Map<String, Value> {
    let mut out = got.as_object().cloned().unwrap_or_default();
    out.insert("name".into(), json!(name));
    out
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = name_of(c)?;
    let value = c.low.get("value").cloned().unwrap_or(Value::Null);
    let existing = get(c, &name)?;
    if existing.as_ref().is_some_and(|e| py_eq(e, &value)) {
        return Ok(ret(&name, json!(true), "Grain is already set", json!({})));
    }
    if c.test {
        return Ok(match existing {
            None => ret(
                &name,
                Value::Null,
                format!("Grain {name} is set to be added"),
                json!({ "new": name }),
            ),
            Some(_) => ret(
                &name,
                Value::Null,
                format!("Grain {name} is set to be changed"),
                json!({ "changed": { name.clone(): value } }),
            ),
        });
    }
    let mut kw = Map::new();
    kw.insert(
        "force".into(),
        c.low.get("force").cloned().unwrap_or(json!(false)),
    );
    let got = c
        .host
        .call("grains.set", &[json!(name), value.clone()], &kw)?;
    let mut out = set_return(got, &name);
    let changed = out
        .get("changes")
        .is_some_and(|ch| ch.as_object().is_none_or(|m| !m.is_empty()));
    if out.get("result") == Some(&json!(true)) && changed {
        out.insert(
            "comment".into(),
            json!(format!("Set grain {name} to {}", sls_text(&value))),
        );
    }
    Ok(out)
}

fn list_present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = name_of(c)?;
    let mut value = c.low.get("value").cloned().unwrap_or(Value::Null);
    let mut out = ret(&name, json!(true), "", json!({}));
    let grain = c.host.call("grains.get", &[json!(name)], &Map::new())?;
    let mut comment = String::new();
    if json_truthy(&grain) {
        let Some(items) = grain.as_array() else {
            return Ok(not_a_list(&name));
        };
        let already = match value.as_array() {
            Some(wanted) => {
                let (inter, diff): (Vec<Value>, Vec<Value>) =
                    wanted.iter().cloned().partition(|v| contains(items, v));
                if diff.is_empty() {
                    true
                } else {
                    if !inter.is_empty() {
                        comment = format!(
                            "Removed value {} from update due to value found in \"{name}\".\n",
                            sls_text(&Value::Array(inter))
                        );
                    }
                    value = Value::Array(diff);
                    false
                }
            }
            None => contains(items, &value),
        };
        if already {
            let comment = format!("Value {} is already in grain {name}", sls_text(&value));
            return Ok(ret(&name, json!(true), comment, json!({})));
        }
        if c.test {
            out.insert("result".into(), Value::Null);
            out.insert(
                "comment".into(),
                json!(format!(
                    "Value {} is set to be appended to grain {name}",
                    sls_text(&value)
                )),
            );
            out.insert("changes".into(), json!({ "new": grain }));
            return Ok(out);
        }
    }
    if c.test {
        out.insert("result".into(), Value::Null);
        out.insert(
            "comment".into(),
            json!(format!("Grain {name} is set to be added")),
        );
        out.insert("changes".into(), json!({ "new": grain }));
        return Ok(out);
    }
    let new_grains = c
        .host
        .call("grains.append", &[json!(name), value.clone()], &Map::new())?;
    let actual = c
        .host
        .call("grains.get", &[json!(name), json!([])], &Map::new())?;
    let actual = actual.as_array().cloned().unwrap_or_default();
    let missing = match &value {
        Value::Array(items) => items.iter().any(|v| !contains(&actual, v)),
        v => !contains(&actual, v),
    };
    if missing {
        out.insert("result".into(), json!(false));
        out.insert(
            "comment".into(),
            json!(format!(
                "Failed append value {} to grain {name}",
                sls_text(&value)
            )),
        );
        return Ok(out);
    }
    out.insert(
        "comment".into(),
        json!(format!(
            "{comment}Append value {} to grain {name}",
            sls_text(&value)
        )),
    );
    out.insert("changes".into(), json!({ "new": new_grains }));
    Ok(out)
}

fn list_absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = name_of(c)?;
    let value = c.low.get("value").cloned().unwrap_or(Value::Null);
    let mut out = ret(&name, json!(true), "", json!({}));
    let grain = c
        .host
        .call("grains.get", &[json!(name), Value::Null], &Map::new())?;
    if !json_truthy(&grain) {
        out.insert(
            "comment".into(),
            json!(format!("Grain {name} does not exist")),
        );
        return Ok(out);
    }
    let Some(items) = grain.as_array() else {
        return Ok(not_a_list(&name));
    };
    let values = match value {
        Value::Array(v) => v,
        other => vec![other],
    };
    let mut comments = Vec::new();
    let mut deleted = Vec::new();
    for val in values {
        let shown = sls_text(&val);
        if !contains(items, &val) {
            comments.push(format!("Value {shown} is absent from grain {name}"));
        } else if c.test {
            out.insert("result".into(), Value::Null);
            comments.push(format!(
                "Value {shown} in grain {name} is set to be deleted"
            ));
            deleted.push(val);
        } else {
            c.host
                .call("grains.remove", &[json!(name), val.clone()], &Map::new())?;
            comments.push(format!("Value {shown} was deleted from grain {name}"));
            deleted.push(val);
        }
    }
    if !deleted.is_empty() {
        out.insert("changes".into(), json!({ "deleted": deleted }));
    }
    out.insert("comment".into(), json!(comments.join("\n")));
    Ok(out)
}

fn absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = name_of(c)?;
    let destructive = c.low.get("destructive") == Some(&json!(true));
    let mut out = ret(&name, json!(true), "", json!({}));
    let Some(grain) = get(c, &name)? else {
        out.insert(
            "comment".into(),
            json!(format!("Grain {name} does not exist")),
        );
        return Ok(out);
    };
    if c.test {
        out.insert("result".into(), Value::Null);
        if destructive {
            out.insert(
                "comment".into(),
                json!(format!("Grain {name} is set to be deleted")),
            );
            out.insert("changes".into(), json!({ "deleted": name }));
        } else if !grain.is_null() {
            out.insert(
                "comment".into(),
                json!(format!(
                    "Value for grain {name} is set to be deleted (None)"
                )),
            );
            out.insert("changes".into(), json!({ "grain": name, "value": null }));
        }
        return Ok(out);
    }
    let mut kw = Map::new();
    kw.insert(
        "destructive".into(),
        c.low.get("destructive").cloned().unwrap_or(json!(false)),
    );
    kw.insert(
        "force".into(),
        c.low.get("force").cloned().unwrap_or(json!(false)),
    );
    let got = c
        .host
        .call("grains.set", &[json!(name), Value::Null], &kw)?;
    let mut out = set_return(got, &name);
    if out.get("result").is_some_and(json_truthy) {
        if destructive {
            out.insert("comment".into(), json!(format!("Grain {name} was deleted")));
            out.insert("changes".into(), json!({ "deleted": name }));
        } else if !grain.is_null() {
            out.insert(
                "comment".into(),
                json!(format!("Value for grain {name} was set to None")),
            );
            out.insert("changes".into(), json!({ "grain": name, "value": null }));
        }
    }
    Ok(out)
}

fn append(c: &Call) -> Result<Map<String, Value>, String> {
    let name = name_of(c)?;
    let value = c.low.get("value").cloned().unwrap_or(Value::Null);
    let shown = sls_text(&value);
    let grain = c
        .host
        .call("grains.get", &[json!(name), Value::Null], &Map::new())?;
    let top_level = c.host.call("grains.ls", &[], &Map::new())?;
    let listed = top_level
        .as_array()
        .is_some_and(|keys| keys.iter().any(|k| k.as_str() == Some(name.as_str())));
    let failed = |comment: String| Ok(ret(&name, json!(false), comment, json!({})));
    // The value added (or to be added, under test=True).
    let added = |comment: String| {
        let result = if c.test { Value::Null } else { json!(true) };
        Ok(ret(
            &name,
            result,
            comment,
            json!({ "added": value.clone() }),
        ))
    };
    if !json_truthy(&grain) && !listed {
        return failed(format!("Grain {name} does not exist"));
    }
    if let Some(items) = grain.as_array() {
        if contains(items, &value) {
            let comment = format!("Value {shown} is already in the list for grain {name}");
            return Ok(ret(&name, json!(true), comment, json!({})));
        }
        if c.test {
            return added(format!("Value {shown} in grain {name} is set to be added"));
        }
        c.host
            .call("grains.append", &[json!(name), value.clone()], &Map::new())?;
        return added(format!("Value {shown} was added to grain {name}"));
    }
    if c.low.get("convert") != Some(&json!(true)) {
        return Ok(not_a_list(&name));
    }
    if c.test {
        return added(format!(
            "Grain {name} is set to be converted to list and value {shown} will be added"
        ));
    }
    let mut list = if grain.is_null() {
        Vec::new()
    } else {
        vec![grain]
    };
    list.push(value.clone());
    c.host.call(
        "grains.setval",
        &[json!(name), Value::Array(list)],
        &Map::new(),
    )?;
    added(format!("Value {shown} was added to grain {name}"))
}
