//! The few Python behaviours target matching depends on: `str()` of a decoded msgpack
//! value, `int()` of a string, and the YAML scalar reading Salt applies to a dict key
//! that was not found as a string (so `os_family:1` can reach an integer key `1`).

use rmpv::Value;

use crate::pyrepr::{float_repr, write_bytes_repr, write_str_repr};

/// Python `str(value)` for a value decoded with `raw=False` (str keys, bytes for bin).
pub(crate) fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => match s.as_str() {
            Some(s) => s.to_owned(),
            None => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        },
        other => py_repr(other),
    }
}

/// Python `repr(value)`.
pub(crate) fn py_repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(v, &mut out);
    out
}

fn write_repr(v: &Value, out: &mut String) {
    match v {
        Value::Nil => out.push_str("None"),
        Value::Boolean(true) => out.push_str("True"),
        Value::Boolean(false) => out.push_str("False"),
        Value::Integer(i) => out.push_str(&i.to_string()),
        Value::F32(f) => out.push_str(&float_repr(f64::from(*f))),
        Value::F64(f) => out.push_str(&float_repr(*f)),
        Value::String(s) => match s.as_str() {
            Some(s) => write_str_repr(out, s),
            None => write_bytes_repr(out, s.as_bytes()),
        },
        Value::Binary(b) => write_bytes_repr(out, b),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Map(pairs) => {
            out.push('{');
            for (i, (k, val)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(k, out);
                out.push_str(": ");
                write_repr(val, out);
            }
            out.push('}');
        }
        Value::Ext(code, data) => {
            out.push_str(&format!("ExtType(code={code}, data="));
            write_bytes_repr(out, data);
            out.push(')');
        }
    }
}

/// Python `int(s)` for base 10: surrounding whitespace, a sign, and `_` between digits.
pub(crate) fn py_int(s: &str) -> Option<i64> {
    let t = s.trim();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    let n: i64 = clean.parse().ok()?;
    Some(if neg { -n } else { n })
}

/// A dict key as PyYAML's `safe_load` would read the path segment, when that differs from
/// the plain string (Salt's `traverse_dict_and_list` retries the lookup with it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum YamlKey {
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
}

pub(crate) fn yaml_key(s: &str) -> Option<YamlKey> {
    let trimmed = s.trim();
    if matches!(trimmed, "" | "---" | "...")
        || (s.contains('_') && trimmed.chars().all(|c| c.is_ascii_digit() || c == '_'))
        || s.contains(['\t', '\r', '\n'])
    {
        return None;
    }
    // PyYAML reads the whole document; surrounding spaces do not change a plain scalar.
    match trimmed {
        "~" | "null" | "Null" | "NULL" => return Some(YamlKey::Null),
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Some(YamlKey::Bool(true))
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Some(YamlKey::Bool(false))
        }
        _ => {}
    }
    yaml_int(trimmed)
        .map(YamlKey::Int)
        .or_else(|| yaml_float(trimmed).map(YamlKey::Float))
}

/// YAML 1.1 integers as PyYAML resolves them: decimal, `0x` hex, `0b` binary and a leading
/// `0` for octal; `_` separators allowed.
fn yaml_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let clean: String = body.chars().filter(|c| *c != '_').collect();
    if clean.is_empty() || body.starts_with('_') {
        return None;
    }
    let value = if let Some(hex) = clean.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if let Some(bin) = clean.strip_prefix("0b") {
        i64::from_str_radix(bin, 2).ok()?
    } else if clean.len() > 1 && clean.starts_with('0') {
        i64::from_str_radix(&clean[1..], 8).ok()?
    } else if clean.chars().all(|c| c.is_ascii_digit()) && !body.starts_with('0') || clean == "0" {
        clean.parse().ok()?
    } else {
        return None;
    };
    Some(if neg { -value } else { value })
}

/// YAML 1.1 floats as PyYAML resolves them (`1.5`, `-2.`, `1.0e+3`, `.inf`, `.nan`).
fn yaml_float(s: &str) -> Option<f64> {
    match s {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Some(f64::NAN),
        _ => {}
    }
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(p) => (&body[..p], Some(&body[p + 1..])),
        None => (body, None),
    };
    let (int_part, frac) = mantissa.split_once('.')?;
    let digits_ok = |t: &str| t.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !digits_ok(int_part) || !digits_ok(frac) || (int_part.is_empty() && frac.is_empty()) {
        return None;
    }
    if int_part.is_empty() && body.len() != s.len() {
        // PyYAML reads "-.5" as a string: a sign needs digits before the dot.
        return None;
    }
    if let Some(e) = exponent {
        // PyYAML requires an explicit sign on the exponent.
        let digits = e.strip_prefix(['-', '+'])?;
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    s.replace('_', "").parse().ok()
}

/// Python `==` between a msgpack key and a YAML-read key (`True == 1 == 1.0` in Python).
pub(crate) fn key_equals(key: &Value, wanted: &YamlKey) -> bool {
    let as_number = |v: &Value| -> Option<f64> {
        match v {
            Value::Integer(i) => i.as_f64(),
            Value::Boolean(b) => Some(if *b { 1.0 } else { 0.0 }),
            Value::F32(f) => Some(f64::from(*f)),
            Value::F64(f) => Some(*f),
            _ => None,
        }
    };
    match wanted {
        YamlKey::Null => key.is_nil(),
        YamlKey::Int(i) => match key {
            Value::Integer(k) => k.as_i64() == Some(*i),
            other => as_number(other) == Some(*i as f64),
        },
        YamlKey::Bool(b) => as_number(key) == Some(if *b { 1.0 } else { 0.0 }),
        YamlKey::Float(f) => as_number(key) == Some(*f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn str_of_scalars_like_python() {
        assert_eq!(py_str(&Value::from(true)), "True");
        assert_eq!(py_str(&Value::from(false)), "False");
        assert_eq!(py_str(&Value::Nil), "None");
        assert_eq!(py_str(&Value::from(-12)), "-12");
        assert_eq!(py_str(&Value::from(u64::MAX)), "18446744073709551615");
        assert_eq!(py_str(&Value::from("Debian")), "Debian");
        assert_eq!(py_str(&Value::F64(3.0)), "3.0");
        assert_eq!(py_str(&Value::F64(0.1)), "0.1");
        assert_eq!(py_str(&Value::F64(1e16)), "1e+16");
        assert_eq!(py_str(&Value::F64(1.5e-5)), "1.5e-05");
        assert_eq!(py_str(&Value::F64(0.0001)), "0.0001");
        assert_eq!(py_str(&Value::F64(123456789012345.6)), "123456789012345.6");
        assert_eq!(py_str(&Value::F64(-0.0)), "-0.0");
        assert_eq!(py_str(&Value::F32(0.1)), "0.10000000149011612");
    }

    #[test]
    fn str_of_containers_like_python() {
        let v = Value::Array(vec![
            Value::from("a"),
            Value::from(1),
            Value::from(true),
            Value::Nil,
            Value::from("it's"),
            Value::Binary(b"x\x00".to_vec()),
        ]);
        assert_eq!(py_str(&v), r#"['a', 1, True, None, "it's", b'x\x00']"#);
        let m = Value::Map(vec![(Value::from("k"), Value::Array(vec![]))]);
        assert_eq!(py_str(&m), "{'k': []}");
        assert_eq!(py_repr(&Value::from("a\nb\\")), r"'a\nb\\'");
    }

    #[test]
    fn int_parsing_like_python_int() {
        assert_eq!(py_int("12"), Some(12));
        assert_eq!(py_int(" -3 "), Some(-3));
        assert_eq!(py_int("+7"), Some(7));
        assert_eq!(py_int("1_000"), Some(1000));
        assert_eq!(py_int("1__0"), None);
        assert_eq!(py_int("_1"), None);
        assert_eq!(py_int("0x10"), None);
        assert_eq!(py_int(""), None);
        assert_eq!(py_int("abc"), None);
    }

    #[test]
    fn yaml_keys_like_pyyaml() {
        assert_eq!(yaml_key("1"), Some(YamlKey::Int(1)));
        assert_eq!(yaml_key("-5"), Some(YamlKey::Int(-5)));
        assert_eq!(yaml_key("010"), Some(YamlKey::Int(8)));
        assert_eq!(yaml_key("0x1f"), Some(YamlKey::Int(31)));
        assert_eq!(
            yaml_key("1_000"),
            None,
            "digits and underscores are kept as text"
        );
        assert_eq!(yaml_key("true"), Some(YamlKey::Bool(true)));
        assert_eq!(yaml_key("Off"), Some(YamlKey::Bool(false)));
        assert_eq!(yaml_key("~"), Some(YamlKey::Null));
        assert_eq!(yaml_key("1.5"), Some(YamlKey::Float(1.5)));
        assert_eq!(
            yaml_key("1e5"),
            None,
            "YAML 1.1 needs a dot and a signed exponent"
        );
        assert_eq!(yaml_key("1.0e+2"), Some(YamlKey::Float(100.0)));
        assert_eq!(yaml_key("os"), None);
        assert_eq!(yaml_key("09"), None);
        assert_eq!(yaml_key(".5"), Some(YamlKey::Float(0.5)));
        assert_eq!(yaml_key("-.5"), None);
        assert_eq!(yaml_key("1."), Some(YamlKey::Float(1.0)));
        assert_eq!(yaml_key(""), None);
    }

    #[test]
    fn key_equality_follows_python_numbers() {
        assert!(key_equals(&Value::from(1), &YamlKey::Int(1)));
        assert!(key_equals(&Value::from(true), &YamlKey::Int(1)));
        assert!(key_equals(&Value::F64(1.0), &YamlKey::Int(1)));
        assert!(key_equals(&Value::from(1), &YamlKey::Bool(true)));
        assert!(!key_equals(&Value::from("1"), &YamlKey::Int(1)));
        assert!(key_equals(&Value::Nil, &YamlKey::Null));
    }
}
