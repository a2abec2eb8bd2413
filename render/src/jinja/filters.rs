//! Salt's Jinja filters and tests (`salt/utils/jinja.py`, `salt/utils/data.py` and friends).

use base64::Engine;
use md5::Digest as _;
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};
use regex::RegexBuilder;

use super::objects::{seq_items, List};
use super::pyfmt;
use super::salt_fns::traverse;
use crate::yaml;

fn bad(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

/// Register Salt's filters and tests on an environment.
pub(crate) fn register(env: &mut Environment<'_>) {
    env.add_filter("json", |v: Value, kw: Kwargs| -> Result<String, Error> {
        let sort: Option<bool> = kw.get("sort_keys")?;
        kw.assert_all_used()?;
        Ok(pyfmt::json_dumps(&pyfmt::to_json(&v), sort.unwrap_or(true)))
    });
    env.add_filter("tojson", |v: Value| -> String {
        pyfmt::json_dumps(&pyfmt::to_json(&v), true)
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\'', "\\u0027")
    });
    env.add_filter("yaml", |v: Value, flow: Option<bool>| -> String {
        yaml_dump(&v, flow.unwrap_or(true))
    });
    env.add_filter("yaml_encode", |v: Value| -> String {
        yaml_scalar(&pyfmt::to_json(&v))
    });
    env.add_filter("yaml_dquote", |v: Value| -> String {
        pyfmt::json_dumps(&serde_json::Value::String(pyfmt::str(&v)), false)
    });
    env.add_filter("yaml_squote", |v: Value| -> String {
        format!("'{}'", pyfmt::str(&v).replace('\'', "''"))
    });
    env.add_filter("load_yaml", |v: Value| -> Result<Value, Error> {
        let text = pyfmt::str(&v);
        yaml::load(&text)
            .map(|j| pyfmt::from_json(&j))
            .map_err(|e| bad(format!("Failed to load YAML: {e}")))
    });
    env.add_filter("load_json", |v: Value| -> Result<Value, Error> {
        let text = pyfmt::str(&v);
        serde_json::from_str::<serde_json::Value>(&text)
            .map(|j| pyfmt::from_json(&j))
            .map_err(|e| bad(format!("Failed to load JSON: {e}")))
    });
    env.add_filter("load_text", |v: Value| -> String { pyfmt::str(&v) });
    env.add_filter("regex_search", |v: String, re: String, kw: Kwargs| {
        regex_groups(&v, &re, &kw, false)
    });
    env.add_filter("regex_match", |v: String, re: String, kw: Kwargs| {
        regex_groups(&v, &re, &kw, true)
    });
    env.add_filter(
        "regex_replace",
        |v: String, re: String, rep: String, kw: Kwargs| -> Result<String, Error> {
            let regex = build_regex(&re, &kw)?;
            Ok(regex
                .replace_all(&v, python_replacement(&rep).as_str())
                .into_owned())
        },
    );
    env.add_filter("unique", |v: Value| -> Result<Value, Error> {
        let items = seq_items(&v).ok_or_else(|| bad("unique expects a list"))?;
        let mut seen: Vec<Value> = Vec::new();
        for item in items {
            if !seen.contains(&item) {
                seen.push(item);
            }
        }
        Ok(List::value(seen))
    });
    env.add_filter("to_bool", |v: Value| -> bool { to_bool(&v) });
    env.add_filter("sequence", |v: Value| -> Value {
        match v.kind() {
            ValueKind::Seq | ValueKind::Map => v,
            _ => List::value(vec![v]),
        }
    });
    env.add_filter("md5", |v: Value| -> String {
        hex::encode(md5::Md5::digest(pyfmt::str(&v).as_bytes()))
    });
    env.add_filter("sha256", |v: Value| -> String {
        hex::encode(sha2::Sha256::digest(pyfmt::str(&v).as_bytes()))
    });
    env.add_filter("sha512", |v: Value| -> String {
        hex::encode(sha2::Sha512::digest(pyfmt::str(&v).as_bytes()))
    });
    env.add_filter("base64_encode", |v: Value| -> String {
        base64::engine::general_purpose::STANDARD.encode(pyfmt::str(&v).as_bytes())
    });
    env.add_filter("base64_decode", |v: Value| -> Result<String, Error> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(pyfmt::str(&v).trim())
            .map_err(|e| bad(format!("base64_decode: {e}")))?;
        String::from_utf8(bytes).map_err(|e| bad(format!("base64_decode: {e}")))
    });
    env.add_filter("is_list", |v: Value| -> bool { v.kind() == ValueKind::Seq });
    env.add_test("list", |v: Value| -> bool { v.kind() == ValueKind::Seq });
    env.add_filter(
        "traverse",
        |v: Value, key: String, default: Option<Value>, delimiter: Option<String>| -> Value {
            traverse(&v, &key, delimiter.as_deref().unwrap_or(":"))
                .unwrap_or_else(|| default.unwrap_or(Value::from(())))
        },
    );
    env.add_filter(
        "strftime",
        |v: Value, fmt: Option<String>| -> Result<String, Error> {
            let fmt = fmt.unwrap_or_else(|| "%Y-%m-%d".into());
            let stamp =
                f64::try_from(v.clone()).map_err(|_| bad("strftime expects a timestamp"))?;
            let when = chrono::DateTime::from_timestamp(stamp.trunc() as i64, 0)
                .ok_or_else(|| bad("timestamp out of range"))?;
            Ok(when.format(&fmt).to_string())
        },
    );
}

fn build_regex(re: &str, kw: &Kwargs) -> Result<regex::Regex, Error> {
    let ignorecase: Option<bool> = kw.get("ignorecase")?;
    let multiline: Option<bool> = kw.get("multiline")?;
    kw.assert_all_used()?;
    RegexBuilder::new(re)
        .case_insensitive(ignorecase.unwrap_or(false))
        .multi_line(multiline.unwrap_or(false))
        .build()
        .map_err(|e| bad(format!("invalid regular expression: {e}")))
}

/// `re.search`/`re.match(...).groups()`, or `None`.
fn regex_groups(value: &str, re: &str, kw: &Kwargs, anchored: bool) -> Result<Value, Error> {
    let regex = build_regex(re, kw)?;
    let Some(caps) = regex.captures(value) else {
        return Ok(Value::from(()));
    };
    if anchored && caps.get(0).map(|m| m.start()) != Some(0) {
        return Ok(Value::from(()));
    }
    if caps.len() == 1 {
        return Ok(Value::from(vec![Value::from(
            &value[caps.get(0).map_or(0..0, |m| m.range())],
        )]));
    }
    let groups = caps
        .iter()
        .skip(1)
        .map(|g| g.map_or(Value::from(()), |m| Value::from(m.as_str())))
        .collect::<Vec<_>>();
    Ok(Value::from(groups))
}

/// Python's `\1`/`\g<name>` replacement syntax in the regex crate's `${1}`.
fn python_replacement(rep: &str) -> String {
    let mut out = String::new();
    let mut chars = rep.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek().copied() {
                Some(d) if d.is_ascii_digit() => {
                    let mut num = String::new();
                    while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                        num.push(d);
                        chars.next();
                    }
                    out.push_str(&format!("${{{num}}}"));
                }
                Some('g') => {
                    chars.next();
                    let name: String = chars
                        .by_ref()
                        .skip_while(|c| *c == '<')
                        .take_while(|c| *c != '>')
                        .collect();
                    out.push_str(&format!("${{{name}}}"));
                }
                Some('n') => {
                    chars.next();
                    out.push('\n');
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// Salt's `to_bool`.
fn to_bool(v: &Value) -> bool {
    match v.kind() {
        ValueKind::None | ValueKind::Undefined => false,
        ValueKind::Bool => v.is_true(),
        ValueKind::String => matches!(
            v.as_str().unwrap_or_default().to_lowercase().as_str(),
            "yes" | "1" | "true"
        ),
        ValueKind::Number => v.as_i64().is_some_and(|i| i > 0),
        ValueKind::Seq | ValueKind::Map => v.len().unwrap_or(0) > 0,
        _ => false,
    }
}

/// A scalar that reads back as the same value under YAML 1.1.
fn yaml_scalar(json: &serde_json::Value) -> String {
    match json {
        serde_json::Value::String(s) => {
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
                && !s.starts_with(['-', '.'])
                && yaml::load(s).ok().as_ref() == Some(json);
            if plain {
                s.clone()
            } else {
                pyfmt::json_dumps(json, false)
            }
        }
        other => pyfmt::json_dumps(other, false),
    }
}

/// `|yaml`: flow style is JSON-like; block style is indented mappings and sequences.
fn yaml_dump(v: &Value, flow: bool) -> String {
    let json = pyfmt::to_json(v);
    if flow {
        return flow_yaml(&json);
    }
    let mut out = String::new();
    block_yaml(&json, 0, &mut out);
    out
}

fn flow_yaml(json: &serde_json::Value) -> String {
    match json {
        serde_json::Value::Array(items) => format!(
            "[{}]",
            items.iter().map(flow_yaml).collect::<Vec<_>>().join(", ")
        ),
        serde_json::Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!(
                    "{}: {}",
                    yaml_scalar(&serde_json::Value::String(k.clone())),
                    flow_yaml(v)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => yaml_scalar(other),
    }
}

fn block_yaml(json: &serde_json::Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match json {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                out.push_str(&format!(
                    "{pad}{}:",
                    yaml_scalar(&serde_json::Value::String(k.clone()))
                ));
                block_child(v, indent + 2, out);
            }
        }
        serde_json::Value::Array(items) if !items.is_empty() => {
            for v in items {
                out.push_str(&format!("{pad}-"));
                block_child(v, indent + 2, out);
            }
        }
        other => {
            out.push_str(&pad);
            out.push_str(&flow_yaml(other));
            out.push('\n');
        }
    }
}

fn block_child(v: &serde_json::Value, indent: usize, out: &mut String) {
    match v {
        serde_json::Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            block_yaml(v, indent, out);
        }
        serde_json::Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            block_yaml(v, indent, out);
        }
        other => {
            out.push(' ');
            out.push_str(&flow_yaml(other));
            out.push('\n');
        }
    }
}
