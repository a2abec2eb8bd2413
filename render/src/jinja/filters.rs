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
use brine_protocol::yaml::{double_quoted, safe_dump, Style};

fn bad(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

/// Register Salt's filters and tests on an environment.
pub(crate) fn register(env: &mut Environment<'_>) {
    super::builtins::register(env);
    super::filters_data::register(env);
    super::filters_net::register(env);
    // Salt's `tojson(val, indent=None, **options)`: `json.dumps` in the data's own order
    // unless `sort_keys` asks, HTML-unsafe characters escaped.
    env.add_filter(
        "tojson",
        |v: Value, args: super::pyargs::Args| -> Result<String, Error> {
            let [indent, sort_keys] =
                super::pyargs::bind("tojson", args, ["indent", "sort_keys"], 0)?;
            let indent = indent
                .filter(|i| !i.is_none())
                .map(i64::try_from)
                .transpose()?;
            let style = brine_protocol::pyjson::JsonStyle {
                sort_keys: sort_keys.is_some_and(|s| s.is_true()),
                ..brine_protocol::pyjson::JsonStyle::new(indent, true)
            };
            Ok(brine_protocol::pyjson::dumps(&pyfmt::to_json(&v), &style)
                .replace('<', "\\u003c")
                .replace('>', "\\u003e")
                .replace('&', "\\u0026")
                .replace('\'', "\\u0027"))
        },
    );
    env.add_filter("yaml", |v: Value, flow: Option<bool>| -> String {
        yaml_dump(&v, flow.unwrap_or(true))
    });
    env.add_filter("yaml_encode", |v: Value| yaml_encode(&v));
    env.add_filter("yaml_dquote", |v: Value| -> String {
        double_quoted(&pyfmt::str(&v))
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
    env.add_filter(
        "format",
        |v: Value, args: super::pyargs::Args| -> Result<String, Error> {
            let args = args.into_values();
            let (positional, kwargs) = super::objects::split_kwargs(&args);
            let args = match (positional.is_empty(), kwargs.is_empty()) {
                (false, false) => {
                    return Err(bad(
                        "can't handle positional and keyword arguments at the same time",
                    ))
                }
                (true, false) => super::objects::Dict::value(kwargs.into_iter().collect()),
                _ => Value::from(minijinja::value::Tuple::from(positional)),
            };
            super::printf::percent(&pyfmt::str(&v), &args).map_err(bad)
        },
    );
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
    env.add_filter("strftime", strftime);
    env.add_filter("date_format", strftime);
}

/// Salt's `strftime`/`date_format`: a timestamp (a number or a string of one; nothing means
/// now) in local time, through Python's `strftime` format (`%Y-%m-%d` by default). Like Salt
/// without the optional `timelib`, other date strings are refused.
fn strftime(v: Option<Value>, fmt: Option<String>) -> Result<String, Error> {
    use chrono::TimeZone as _;
    let fmt = fmt.unwrap_or_else(|| "%Y-%m-%d".into());
    let unparsable = |v: &Value| {
        bad(format!(
            "Unable to parse {}. Consider installing timelib",
            pyfmt::str(v)
        ))
    };
    let when = match v {
        None => chrono::Local::now(),
        Some(v) if v.is_none() || v.is_undefined() => chrono::Local::now(),
        Some(v) => {
            let stamp = match v.kind() {
                ValueKind::Number | ValueKind::Bool => f64::try_from(v.clone()).ok(),
                ValueKind::String => v.as_str().and_then(|s| s.trim().parse::<f64>().ok()),
                _ => None,
            }
            .filter(|f| f.is_finite())
            .ok_or_else(|| unparsable(&v))?;
            let secs = stamp.floor();
            let micros = ((stamp - secs) * 1e6).round() as u32;
            chrono::Local
                .timestamp_opt(secs as i64, micros.min(999_999) * 1000)
                .single()
                .ok_or_else(|| bad("year is out of range"))?
        }
    };
    // Python's `%f` is microseconds; chrono's is nanoseconds.
    let mut chrono_fmt = String::with_capacity(fmt.len());
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        chrono_fmt.push(c);
        if c == '%' {
            match chars.next() {
                Some('f') => chrono_fmt.push_str("6f"),
                Some(next) => chrono_fmt.push(next),
                None => {}
            }
        }
    }
    let items: Vec<_> = chrono::format::StrftimeItems::new(&chrono_fmt).collect();
    if items.contains(&chrono::format::Item::Error) {
        return Err(bad(format!("strftime: invalid format {fmt:?}")));
    }
    Ok(when.format_with_items(items.into_iter()).to_string())
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

/// Salt's `yaml_encode`: a scalar as PyYAML represents it, strings double-quoted.
fn yaml_encode(v: &Value) -> Result<String, Error> {
    match pyfmt::to_json(v) {
        serde_json::Value::String(s) => Ok(double_quoted(&s)),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => Err(bad(format!(
            "yaml_encode: {} is not a scalar",
            pyfmt::repr(v)
        ))),
        scalar => Ok(safe_dump(&scalar, Style::Flow)
            .trim()
            .trim_end_matches("\n...")
            .to_string()),
    }
}

/// Salt's `yaml` filter: `safe_dump(value, default_flow_style=flow)`, stripped, without a
/// document end marker.
fn yaml_dump(v: &Value, flow: bool) -> String {
    let style = if flow { Style::Flow } else { Style::Block(2) };
    let text = safe_dump(&pyfmt::to_json(v), style);
    let text = text.trim();
    text.strip_suffix("\n...").unwrap_or(text).to_string()
}
