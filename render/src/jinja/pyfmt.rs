//! Values printed as Python prints them (`None`, `True`, `{'a': [1, 2]}`), and converted to and
//! from JSON data.

use minijinja::value::{Value, ValueKind};
use serde_json::{Map, Number, Value as Json};

use super::objects::{map_entries, seq_items, Dict, List};

/// Python's `str()`: what `{{ value }}` writes.
pub(crate) fn str(value: &Value) -> String {
    match value.kind() {
        ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        ValueKind::Undefined => String::new(),
        _ => repr(value),
    }
}

/// Python's `repr()`.
pub(crate) fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out, 0);
    out
}

fn write_repr(value: &Value, out: &mut String, depth: usize) {
    if depth > 64 {
        out.push_str("...");
        return;
    }
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::String => out.push_str(&repr_str(value.as_str().unwrap_or_default())),
        ValueKind::Number => out.push_str(&number(value)),
        ValueKind::Bytes => {
            brine_protocol::pyrepr::write_bytes_repr(out, value.as_bytes().unwrap_or_default())
        }
        ValueKind::Map => {
            out.push('{');
            for (i, (k, v)) in map_entries(value).unwrap_or_default().iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(k, out, depth + 1);
                out.push_str(": ");
                write_repr(v, out, depth + 1);
            }
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let tuple = value.is_tuple();
            let items = seq_items(value).unwrap_or_default();
            out.push(if tuple { '(' } else { '[' });
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(v, out, depth + 1);
            }
            if tuple && items.len() == 1 {
                out.push(',');
            }
            out.push(if tuple { ')' } else { ']' });
        }
        _ => out.push_str(&value.to_string()),
    }
}

fn number(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    match f64::try_from(value.clone()) {
        Ok(f) => float(f),
        Err(_) => value.to_string(),
    }
}

/// Python's `repr(float)`.
pub(crate) fn float(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else if f == f.trunc() && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        let text = format!("{f}");
        if f.abs() >= 1e16 || (f != 0.0 && f.abs() < 1e-4) {
            let sci = format!("{f:e}");
            match sci.split_once('e') {
                Some((m, e)) => {
                    let e: i32 = e.parse().unwrap_or(0);
                    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
                }
                None => sci,
            }
        } else {
            text
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text holds one and no double quote.
pub(crate) fn repr_str(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// JSON data as a template value: mappings and sequences become mutable `Dict`/`List`.
pub(crate) fn from_json(json: &Json) -> Value {
    match json {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                Value::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => List::value(items.iter().map(from_json).collect()),
        Json::Object(map) => Dict::value(
            map.iter()
                .map(|(k, v)| (Value::from(k.as_str()), from_json(v)))
                .collect(),
        ),
    }
}

/// A template value as JSON data; keys are written as Python's `json.dumps` writes them.
pub(crate) fn to_json(value: &Value) -> Json {
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => Json::Null,
        ValueKind::Bool => Json::Bool(value.is_true()),
        ValueKind::String => Json::String(value.as_str().unwrap_or_default().to_string()),
        ValueKind::Number if value.is_integer() => match value.as_i64() {
            Some(i) => Json::Number(i.into()),
            None => u64::try_from(value.clone()).map_or_else(
                |_| Json::String(value.to_string()),
                |u| Json::Number(u.into()),
            ),
        },
        ValueKind::Number => f64::try_from(value.clone())
            .ok()
            .and_then(Number::from_f64)
            .map_or(Json::Null, Json::Number),
        ValueKind::Map => {
            let mut map = Map::new();
            for (k, v) in map_entries(value).unwrap_or_default() {
                map.insert(json_key(&k), to_json(&v));
            }
            Json::Object(map)
        }
        ValueKind::Seq | ValueKind::Iterable => Json::Array(
            seq_items(value)
                .unwrap_or_default()
                .iter()
                .map(to_json)
                .collect(),
        ),
        _ => Json::String(str(value)),
    }
}

fn json_key(key: &Value) -> String {
    match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_string(),
        ValueKind::None | ValueKind::Undefined => "null".into(),
        ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).into(),
        _ => str(key),
    }
}
