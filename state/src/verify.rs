//! Salt's `State.verify_high`: the shape of high data, with Salt's error texts.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::High;

const REQUISITES: [&str; 4] = ["require", "watch", "prereq", "onchanges"];

/// The errors Salt finds in `high` (none when it can be compiled).
pub fn verify_high(high: &High) -> Vec<String> {
    let mut errors = Vec::new();
    // name -> (its state, {required id: requisite type})
    let mut reqs: HashMap<String, (String, Vec<(String, String)>)> = HashMap::new();
    for (name, body) in high {
        if name.starts_with("__") {
            continue;
        }
        let Value::Object(body) = body else {
            errors.push(format!(
                "The type {name} in {} is not formatted as a dictionary",
                py_text(body)
            ));
            continue;
        };
        let sls = body.get("__sls__").map(py_text).unwrap_or_default();
        for (state, args) in body {
            if state.starts_with("__") {
                continue;
            }
            if args.is_null() {
                errors.push(format!(
                    "ID '{name}' in SLS '{sls}' contains a short declaration ({state}) with a trailing colon. When not passing any arguments to a state, the colon must be omitted."
                ));
                continue;
            }
            let Value::Array(args) = args else {
                errors.push(format!(
                    "State '{name}' in SLS '{sls}' is not formed as a list"
                ));
                continue;
            };
            let mut fun = usize::from(state.contains('.'));
            for arg in args {
                match arg {
                    Value::String(f) => {
                        fun += 1;
                        if f.trim().contains(' ') {
                            errors.push(format!(
                                "The function \"{f}\" in state \"{name}\" in SLS \"{sls}\" has whitespace, a function with whitespace is not supported, perhaps this is an argument that is missing a \":\""
                            ));
                        }
                    }
                    Value::Object(m) if !m.is_empty() => {
                        let (first, value) = m.iter().next().expect("not empty");
                        if first == "names" && !value.is_array() {
                            errors.push(format!(
                                "The 'names' argument in state '{name}' in SLS '{sls}' needs to be formed as a list"
                            ));
                        }
                        if REQUISITES.contains(&first.as_str()) {
                            match value {
                                Value::Array(list) => {
                                    reqs.insert(name.clone(), (state.clone(), Vec::new()));
                                    for req in list {
                                        let req = match req {
                                            Value::String(id) => {
                                                let mut m = serde_json::Map::new();
                                                m.insert("id".into(), Value::from(id.clone()));
                                                Value::Object(m)
                                            }
                                            other => other.clone(),
                                        };
                                        let Some((req_key, req_val)) = req
                                            .as_object()
                                            .and_then(|m| m.iter().next())
                                            .map(|(k, v)| (k.clone(), v.clone()))
                                        else {
                                            errors.push(format!(
                                                "Requisite declaration {} in SLS {sls} is not formed as a single key dictionary",
                                                py_text(&req)
                                            ));
                                            continue;
                                        };
                                        if let Some(dot) = req_key.find('.') {
                                            errors.push(format!(
                                                "Invalid requisite type '{req_key}' in state '{name}', in SLS '{sls}'. Requisite types must not contain dots, did you mean '{}'?",
                                                &req_key[..dot]
                                            ));
                                        }
                                        if req_val.is_array() || req_val.is_object() {
                                            errors.push(format!(
                                                "Illegal requisite \"{}\", please check your syntax.\n",
                                                py_text(&req_val)
                                            ));
                                            continue;
                                        }
                                        let req_val = py_text(&req_val);
                                        if let Some(mine) = reqs.get_mut(name) {
                                            mine.1.retain(|(k, _)| *k != req_val);
                                            mine.1.push((req_val.clone(), req_key.clone()));
                                        }
                                        let recursive =
                                            reqs.get(&req_val).is_some_and(|(other_state, theirs)| {
                                                theirs.iter().any(|(k, v)| k == name && v == state)
                                                    && *other_state == req_key
                                            });
                                        if recursive {
                                            errors.push(format!(
                                                "A recursive requisite was found, SLS \"{sls}\" ID \"{name}\" ID \"{req_val}\""
                                            ));
                                        }
                                    }
                                }
                                _ => errors.push(format!(
                                    "The {first} statement in state '{name}' in SLS '{sls}' needs to be formed as a list"
                                )),
                            }
                            if m.len() != 1 {
                                errors.push(format!(
                                    "Multiple dictionaries defined in argument of state '{name}' in SLS '{sls}'"
                                ));
                            }
                        }
                    }
                    _ => {}
                }
            }
            if fun == 0 {
                if state == "require" || state == "watch" {
                    continue;
                }
                errors.push(format!(
                    "No function declared in state '{name}' in SLS '{sls}'"
                ));
            } else if fun > 1 {
                let mut funs: Vec<String> = state
                    .split_once('.')
                    .map(|(_, f)| vec![f.to_string()])
                    .unwrap_or_default();
                funs.extend(args.iter().filter_map(|a| a.as_str().map(str::to_string)));
                errors.push(format!(
                    "Too many functions declared in state '{name}' in SLS '{sls}'. Please choose one of the following: {}",
                    funs.join(", ")
                ));
            }
        }
    }
    errors
}

/// Salt's `repack_dictlist`: `[{a: 1}, {b: 2}, c]` becomes `{a: 1, b: 2, c: None}`; a string
/// is read as YAML first; anything else (or a map of several keys in the list) is `{}`.
pub fn repack_dictlist(v: &Value) -> Map<String, Value> {
    let loaded;
    let v = match v {
        Value::String(s) => match brine_protocol::yaml::load::load(s) {
            Ok(parsed) => {
                loaded = parsed;
                &loaded
            }
            Err(_) => return Map::new(),
        },
        other => other,
    };
    let Value::Array(items) = v else {
        return Map::new();
    };
    let mut out = Map::new();
    for item in items {
        match item {
            Value::String(s) => {
                out.insert(s.clone(), Value::Null);
            }
            Value::Number(_) | Value::Bool(_) => {
                out.insert(py_text(item), Value::Null);
            }
            Value::Object(m) if m.len() == 1 => {
                let (k, val) = m.iter().next().expect("one key");
                out.insert(k.clone(), val.clone());
            }
            _ => return Map::new(),
        }
    }
    out
}

/// Python's `str()` of a value as Salt's messages show it.
pub fn py_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr()` of a value.
pub(crate) fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => brine_protocol::pyrepr::float_repr(f),
            _ => n.to_string(),
        },
        Value::String(s) => brine_protocol::pyrepr::str_repr(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(py_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", brine_protocol::pyrepr::str_repr(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Python's `str()` of a value read from an SLS file, where Salt's YAML loader makes every
/// mapping an `OrderedDict`: `OrderedDict([('a', 1)])` where [`py_text`] gives `{'a': 1}`.
pub fn sls_text(v: &Value) -> String {
    fn repr(v: &Value) -> String {
        match v {
            Value::Array(items) => format!(
                "[{}]",
                items.iter().map(repr).collect::<Vec<_>>().join(", ")
            ),
            Value::Object(m) if m.is_empty() => "OrderedDict()".into(),
            Value::Object(m) => format!(
                "OrderedDict([{}])",
                m.iter()
                    .map(|(k, v)| format!("({}, {})", brine_protocol::pyrepr::str_repr(k), repr(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            other => py_repr(other),
        }
    }
    match v {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// Python's `type(v).__name__`.
pub fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dictlists_are_repacked_as_salt_repacks_them() {
        assert_eq!(
            Value::Object(repack_dictlist(&json!(["a", 1, true, {"b": [1]}]))),
            json!({"a": null, "1": null, "True": null, "b": [1]})
        );
        assert_eq!(
            Value::Object(repack_dictlist(&json!("[{k: v}, x]"))),
            json!({"k": "v", "x": null})
        );
        assert!(repack_dictlist(&json!("k: v")).is_empty());
        assert!(repack_dictlist(&json!([["nested"]])).is_empty());
        assert!(repack_dictlist(&json!([{"a": 1, "b": 2}])).is_empty());
    }
}
