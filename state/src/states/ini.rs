//! The `ini` state module (Salt's `ini_manage` states): `ini.options_present`,
//! `ini.options_absent`, `ini.sections_present` and `ini.sections_absent`, through the
//! minion's `ini` execution module, with Salt's comments and changes.
//!
//! Where Salt walks a Python set (the options and sections `strict` removes), this walks them
//! in the file's order. Like Salt's, `sections_present` fails outside test runs: Salt calls
//! `ini.set_option` with an argument it does not take.

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};
use crate::verify::{py_text, py_type, sls_text};
use brine_protocol::payload::json_truthy;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "options_present",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "sections",
            "separator",
            "strict",
            "encoding",
            "no_spaces",
        ]),
        run: options_present,
    },
    Spec {
        name: "options_absent",
        required: &["name"],
        accepts: Accepts::Only(&["name", "sections", "separator", "encoding"]),
        run: options_absent,
    },
    Spec {
        name: "sections_present",
        required: &["name"],
        accepts: Accepts::Only(&["name", "sections", "separator", "encoding"]),
        run: sections_present,
    },
    Spec {
        name: "sections_absent",
        required: &["name"],
        accepts: Accepts::Only(&["name", "sections", "separator", "encoding"]),
        run: sections_absent,
    },
];

/// The arguments of a call to the `ini` module: the file, `extra`, and the state's separator
/// and encoding (`=` and None unless given).
fn kwargs(c: &Call, extra: &[(&str, Value)]) -> Map<String, Value> {
    let mut kw = Map::new();
    kw.insert(
        "file_name".into(),
        c.low.get("name").cloned().unwrap_or(Value::Null),
    );
    for (key, value) in extra {
        kw.insert((*key).into(), value.clone());
    }
    kw.insert(
        "separator".into(),
        c.low.get("separator").cloned().unwrap_or(json!("=")),
    );
    kw.insert(
        "encoding".into(),
        c.low.get("encoding").cloned().unwrap_or(Value::Null),
    );
    kw
}

/// Call a function of the `ini` module; its failure as the last line of Salt's traceback
/// words it.
fn ini(c: &Call, fun: &str, extra: &[(&str, Value)]) -> Result<Value, String> {
    c.host.call(fun, &[], &kwargs(c, extra)).map_err(|e| {
        if let Some(message) = e.strip_prefix("ERROR: ") {
            return format!("salt.exceptions.CommandExecutionError: {message}");
        }
        if let Some(raised) = e.strip_prefix("The minion function caused an exception: ") {
            return raised.to_string();
        }
        match e
            .strip_prefix("Passed invalid arguments to ")
            .and_then(|rest| rest.split_once(": "))
        {
            Some((_, message)) => format!("TypeError: {}", message.lines().next().unwrap_or("")),
            None => e,
        }
    })
}

/// Values of the state's `sections` as `ini.set_option` writes them: every value that is not
/// a dict as Python's `str()` of the SLS value (a dict in a list is an `OrderedDict`).
fn as_written(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), as_written(v))).collect())
        }
        other => json!(sls_text(other)),
    }
}

/// The state's `sections` argument (None when not given).
fn sections_arg(c: &Call) -> Value {
    c.low.get("sections").cloned().unwrap_or(Value::Null)
}

/// `v.items()` of a dict, Python's `AttributeError` for anything else.
fn items(v: &Value) -> Result<&Map<String, Value>, String> {
    v.as_object().ok_or_else(|| {
        format!(
            "AttributeError: '{}' object has no attribute 'items'",
            py_type(v)
        )
    })
}

/// Python's `for x in (v or [])`: a dict's keys, a list's items, a text's characters.
fn py_iter(v: &Value) -> Result<Vec<Value>, String> {
    Ok(match v {
        v if !json_truthy(v) => Vec::new(),
        Value::Object(m) => m.keys().map(|k| json!(k)).collect(),
        Value::Array(a) => a.clone(),
        Value::String(s) => s.chars().map(|ch| json!(ch.to_string())).collect(),
        other => {
            return Err(format!(
                "TypeError: '{}' object is not iterable",
                py_type(other)
            ))
        }
    })
}

/// A value used as a key of a dict the `ini` module returned (its keys are all text): its
/// text, `None` when it is no text (so no key of such a dict), Python's `TypeError` when it
/// cannot be a key.
fn key_of(v: &Value) -> Result<Option<&str>, String> {
    match v {
        Value::String(s) => Ok(Some(s)),
        Value::Array(_) | Value::Object(_) => {
            Err(format!("TypeError: unhashable type: '{}'", py_type(v)))
        }
        _ => Ok(None),
    }
}

/// Whether a dict the `ini` module returned has `key`.
fn has(dict: &Value, key: &Value) -> Result<bool, String> {
    Ok(key_of(key)?.is_some_and(|k| dict.get(k).is_some()))
}

/// `" in section " + section` when the section is truthy.
fn in_section(section: &Value) -> Result<String, String> {
    match section {
        s if !json_truthy(s) => Ok(String::new()),
        Value::String(s) => Ok(format!(" in section {s}")),
        other => Err(format!(
            "TypeError: can only concatenate str (not \"{}\") to str",
            py_type(other)
        )),
    }
}

/// The start of each state's return; in a test run the comment starts empty.
fn start(c: &Call) -> Map<String, Value> {
    let comment = if c.test { "" } else { "No anomaly detected" };
    ret(&c.name(), json!(true), comment, json!({}))
}

/// Add a line to the comment of a test run.
fn note(out: &mut Map<String, Value>, line: String) {
    let mut comment = out
        .get("comment")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    comment.push_str(&line);
    comment.push('\n');
    out.insert("comment".into(), json!(comment));
}

/// A test run's return: a change that would be made leaves the result None.
fn would_change(out: &mut Map<String, Value>, line: String) {
    note(out, line);
    out.insert("result".into(), Value::Null);
}

/// A test run's comment when it has none.
fn nothing_to_do(mut out: Map<String, Value>) -> Map<String, Value> {
    if out.get("comment") == Some(&json!("")) {
        out.insert("comment".into(), json!("No changes detected."));
    }
    out
}

fn options_present(c: &Call) -> Result<Map<String, Value>, String> {
    let sections = sections_arg(c);
    let strict = c.flag("strict", false);
    let no_spaces = c.low.get("no_spaces").cloned().unwrap_or(json!(false));
    let mut out = start(c);
    let mut changes = Map::new();
    let set_option = |sections: Value| {
        ini(
            c,
            "ini.set_option",
            &[("sections", sections), ("no_spaces", no_spaces.clone())],
        )
    };
    if !json_truthy(&sections) {
        if !c.test {
            if let Value::Object(got) = set_option(sections)? {
                changes = got;
            }
        }
        return Ok(finish(out, changes));
    }
    let declared = items(&sections)?;
    let options: Map<String, Value> = declared
        .iter()
        .filter(|(_, body)| !body.is_object())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let cur_ini = ini(c, "ini.get_ini", &[])?;
    let empty = Map::new();
    let current = cur_ini.as_object().unwrap_or(&empty);
    let top_level: Map<String, Value> = current
        .iter()
        .filter(|(_, v)| !v.is_object())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if c.test {
        for (option, value) in &options {
            match top_level.get(option) {
                Some(cur) if py_text(cur) == sls_text(value) => {
                    note(&mut out, format!("Unchanged key {option}."))
                }
                _ => would_change(&mut out, format!("Changed key {option}.")),
            }
        }
    } else if let Value::Object(got) = set_option(as_written(&Value::Object(options.clone())))? {
        changes.extend(got);
    }
    if strict {
        for (option, value) in top_level.iter().filter(|(k, _)| !options.contains_key(*k)) {
            if c.test {
                would_change(&mut out, format!("Removed key {option}."));
            } else {
                let section = ("section", Value::Null);
                ini(
                    c,
                    "ini.remove_option",
                    &[section, ("option", json!(option))],
                )?;
                changes.insert(option.clone(), json!({"before": value, "after": null}));
            }
        }
        let stale = current
            .iter()
            .filter(|(k, v)| v.is_object() && !declared.get(*k).is_some_and(Value::is_object));
        for (section, body) in stale {
            if c.test {
                would_change(&mut out, format!("Removed section {section}."));
            } else {
                ini(c, "ini.remove_section", &[("section", json!(section))])?;
                changes.insert(section.clone(), json!({"before": body, "after": null}));
            }
        }
    }
    for (section, body) in declared.iter().filter(|(_, b)| b.is_object()) {
        let body = items(body)?;
        let descr = in_section(&json!(section))?;
        let mut section_changes = Map::new();
        if strict {
            let original = current.get(section).cloned().unwrap_or(json!({}));
            let original = original.as_object().ok_or_else(|| {
                format!(
                    "AttributeError: '{}' object has no attribute 'keys'",
                    py_type(&original)
                )
            })?;
            for (key, value) in original.iter().filter(|(k, _)| !body.contains_key(*k)) {
                if c.test {
                    would_change(&mut out, format!("Deleted key {key}{descr}."));
                } else {
                    let args = [("section", json!(section)), ("option", json!(key))];
                    ini(c, "ini.remove_option", &args)?;
                    section_changes.insert(key.clone(), json!({"before": value, "after": null}));
                }
            }
        }
        if c.test {
            let original = current.get(section).and_then(Value::as_object);
            for (option, value) in body {
                let cur = original
                    .and_then(|o| o.get(option))
                    .map_or_else(|| "#-#-".to_string(), py_text);
                if sls_text(value) == cur {
                    note(&mut out, format!("Unchanged key {option}{descr}."));
                } else {
                    would_change(&mut out, format!("Changed key {option}{descr}."));
                }
            }
            changes.insert(section.clone(), Value::Object(section_changes));
            continue;
        }
        let one = Value::Object(Map::from_iter([(
            section.clone(),
            as_written(&json!(body)),
        )]));
        let updated = set_option(one)?;
        if let Some(Value::Object(got)) = updated.get(section).filter(|_| json_truthy(&updated)) {
            section_changes.extend(got.clone());
        }
        if section_changes.is_empty() {
            changes.shift_remove(section);
        } else {
            changes.insert(section.clone(), Value::Object(section_changes));
        }
    }
    Ok(finish(out, changes))
}

/// The end of `options_present`: the changes made, or Salt's failure when one of them is
/// named `error`.
fn finish(mut out: Map<String, Value>, changes: Map<String, Value>) -> Map<String, Value> {
    if let Some(error) = changes.get("error") {
        out.insert("result".into(), json!(false));
        out.insert(
            "comment".into(),
            json!(format!("Errors encountered. {}", py_text(error))),
        );
        return out;
    }
    let mut kept = Map::new();
    for (key, body) in changes {
        if json_truthy(&body) {
            out.insert("comment".into(), json!("Changes take effect"));
            kept.insert(key, body);
        }
    }
    out.insert("changes".into(), Value::Object(kept));
    out
}

fn options_absent(c: &Call) -> Result<Map<String, Value>, String> {
    let sections = sections_arg(c);
    let mut out = start(c);
    if c.test {
        for section in py_iter(&sections)? {
            let descr = in_section(&section)?;
            let got = ini(c, "ini.get_section", &[("section", section.clone())]);
            // A section that names an option outside any section: Salt keeps its name.
            let cur_section = match got {
                Err(e) if e.starts_with("AttributeError: ") => section.clone(),
                other => other?,
            };
            let keys = subscript(&sections, &section)?;
            if let Some(Value::Array(keys)) = keys {
                for key in keys {
                    let Some(cur_section) = cur_section.as_object() else {
                        return Err(format!(
                            "AttributeError: '{}' object has no attribute 'get'",
                            py_type(&cur_section)
                        ));
                    };
                    let value = key_of(key)?.and_then(|k| cur_section.get(k));
                    let shown = sls_text(key);
                    if value.is_some_and(json_truthy) {
                        would_change(&mut out, format!("Deleted key {shown}{descr}."));
                    } else {
                        note(&mut out, format!("Key {shown}{descr} does not exist."));
                    }
                }
            } else {
                let args = [("section", Value::Null), ("option", section.clone())];
                let shown = sls_text(&section);
                if json_truthy(&ini(c, "ini.get_option", &args)?) {
                    would_change(&mut out, format!("Deleted key {shown}."));
                } else {
                    note(&mut out, format!("Key {shown} does not exist."));
                }
            }
        }
        return Ok(nothing_to_do(out));
    }
    let mut changes = Map::new();
    let declared = if json_truthy(&sections) {
        items(&sections)?.clone()
    } else {
        Map::new()
    };
    for (section, keys) in &declared {
        for key in py_iter_all(keys)? {
            let args = [("section", json!(section)), ("option", key.clone())];
            let value = ini(c, "ini.remove_option", &args)?;
            if !json_truthy(&value) {
                continue;
            }
            let entry = changes.entry(section.clone()).or_insert_with(|| json!({}));
            let Some(removed) = entry.as_object_mut() else {
                return Err(format!(
                    "AttributeError: '{}' object has no attribute 'update'",
                    py_type(entry)
                ));
            };
            removed.insert(py_text(&key), value.clone());
            if !keys.is_array() {
                *entry = value;
            }
            out.insert("comment".into(), json!("Changes take effect"));
        }
    }
    out.insert("changes".into(), Value::Object(changes));
    Ok(out)
}

/// Python's `sections[section]` for a section `for section in sections` gave.
fn subscript<'a>(sections: &'a Value, section: &Value) -> Result<Option<&'a Value>, String> {
    match (sections, section) {
        (Value::Object(m), Value::String(k)) => Ok(m.get(k)),
        (Value::Array(items), Value::Number(n)) => match n.as_u64() {
            Some(i) if (i as usize) < items.len() => Ok(items.get(i as usize)),
            _ => Err("IndexError: list index out of range".into()),
        },
        (Value::Array(_), other) => Err(format!(
            "TypeError: list indices must be integers or slices, not {}",
            py_type(other)
        )),
        (_, other) => Err(format!(
            "TypeError: string indices must be integers, not '{}'",
            py_type(other)
        )),
    }
}

/// Python's `for x in v`, where `v` is not replaced by an empty list when it is falsy.
fn py_iter_all(v: &Value) -> Result<Vec<Value>, String> {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => Err(format!(
            "TypeError: '{}' object is not iterable",
            py_type(v)
        )),
        other => py_iter(other),
    }
}

/// The test run of `sections_present` (`wanted`) or `sections_absent`: a line for each
/// section, whether the file has it or not.
fn sections_test(c: &Call, names: &[Value], wanted: bool) -> Result<Map<String, Value>, String> {
    let mut out = start(c);
    let current = ini(c, "ini.get_ini", &[])?;
    for section in names {
        let shown = sls_text(section);
        match (has(&current, section)?, wanted) {
            (true, true) => note(&mut out, format!("Section unchanged {shown}.")),
            (false, true) => would_change(&mut out, format!("Created new section {shown}.")),
            (true, false) => would_change(&mut out, format!("Deleted section {shown}.")),
            (false, false) => note(&mut out, format!("Section {shown} does not exist.")),
        }
    }
    Ok(nothing_to_do(out))
}

fn sections_present(c: &Call) -> Result<Map<String, Value>, String> {
    let names = py_iter(&sections_arg(c))?;
    if c.test {
        return sections_test(c, &names, true);
    }
    for section in &names {
        key_of(section)?;
    }
    // Salt passes `section=` to `ini.set_option`, which takes `sections`.
    Err("TypeError: set_option() got an unexpected keyword argument 'section'".into())
}

fn sections_absent(c: &Call) -> Result<Map<String, Value>, String> {
    let names = py_iter(&sections_arg(c))?;
    if c.test {
        return sections_test(c, &names, false);
    }
    let mut out = start(c);
    let mut changes = Map::new();
    for section in names {
        let removed = ini(c, "ini.remove_section", &[("section", section.clone())])?;
        if !json_truthy(&removed) {
            continue;
        }
        changes.insert(py_text(&section), removed);
        out.insert("comment".into(), json!("Changes take effect"));
    }
    out.insert("changes".into(), Value::Object(changes));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_iterated_as_python_does() {
        assert_eq!(py_iter(&json!(null)).unwrap(), Vec::<Value>::new());
        assert_eq!(
            py_iter(&json!({"a": 1, "b": 2})).unwrap(),
            [json!("a"), json!("b")]
        );
        assert_eq!(py_iter(&json!("ab")).unwrap(), [json!("a"), json!("b")]);
        assert_eq!(
            py_iter(&json!(3)).unwrap_err(),
            "TypeError: 'int' object is not iterable"
        );
        assert_eq!(
            py_iter_all(&json!(null)).unwrap_err(),
            "TypeError: 'NoneType' object is not iterable"
        );
        assert!(py_iter_all(&json!("")).unwrap().is_empty());
        assert_eq!(in_section(&json!("")).unwrap(), "");
        assert_eq!(in_section(&json!("s")).unwrap(), " in section s");
        assert!(in_section(&json!(1)).is_err());
        assert!(key_of(&json!([1])).is_err());
        assert!(has(&json!({"a": 1}), &json!("a")).unwrap());
        assert!(!has(&json!({"1": 1}), &json!(1)).unwrap());
    }

    #[test]
    fn a_change_named_error_fails_as_in_salt() {
        let out = ret("f", json!(true), "No anomaly detected", json!({}));
        let changes = json!({"error": {"before": null, "after": "1"}});
        let done = finish(out.clone(), changes.as_object().unwrap().clone());
        assert_eq!(done["result"], json!(false));
        assert_eq!(
            done["comment"],
            json!("Errors encountered. {'before': None, 'after': '1'}")
        );
        let changes = json!({"a": {}, "b": {"before": "1", "after": "2"}});
        let done = finish(out, changes.as_object().unwrap().clone());
        assert_eq!(done["comment"], json!("Changes take effect"));
        assert_eq!(done["changes"], json!({"b": {"before": "1", "after": "2"}}));
    }
}
