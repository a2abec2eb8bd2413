//! Python's methods on strings and on the immutable maps and lists MiniJinja builds itself.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

use super::objects::{map_entries, seq_items, split_kwargs, Dict, List};

fn bad(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

fn text(value: &Value, what: &str) -> Result<String, Error> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| bad(format!("{what} must be a string")))
}

/// The unknown-method callback: Python's `str`, `dict` and `list` methods.
pub(crate) fn call(
    _state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    call_on(value, method, args)
}

/// A Python method of `value` (`str`, `dict` and `list` methods); `UnknownMethod` when the
/// value has none of that name.
pub(crate) fn call_on(value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    if let Some(s) = value.as_str() {
        return string(s, method, args);
    }
    if let Some(dict) = value.downcast_object::<Dict>() {
        return dict.method(method, args);
    }
    if let Some(list) = value.downcast_object::<List>() {
        return list.method(method, args);
    }
    if value.kind() == ValueKind::Map {
        if let Some(entries) = map_entries(value) {
            if matches!(method, "update" | "setdefault" | "pop" | "clear") {
                return Err(bad(format!(
                    "cannot call {method}() on an immutable mapping"
                )));
            }
            return std::sync::Arc::new(Dict::from_entries(entries)).method(method, args);
        }
    }
    if value.kind() == ValueKind::Seq && matches!(method, "index" | "count" | "copy") {
        let items = seq_items(value).unwrap_or_default();
        return std::sync::Arc::new(List::from_items(items)).method(method, args);
    }
    Err(Error::from(ErrorKind::UnknownMethod))
}

fn strip_chars(args: &[Value]) -> Result<Option<Vec<char>>, Error> {
    match args.first() {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => Ok(Some(text(v, "strip argument")?.chars().collect())),
    }
}

fn string(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let (positional, kwargs) = split_kwargs(args);
    let arg = |i: usize| positional.get(i);
    Ok(match method {
        "upper" => Value::from(s.to_uppercase()),
        "lower" => Value::from(s.to_lowercase()),
        "title" => Value::from(title(s)),
        "capitalize" => {
            let mut chars = s.chars();
            Value::from(match chars.next() {
                Some(first) => first
                    .to_uppercase()
                    .chain(chars.flat_map(char::to_lowercase))
                    .collect::<String>(),
                None => String::new(),
            })
        }
        "strip" | "lstrip" | "rstrip" => {
            let chars = strip_chars(&positional)?;
            let matches = |c: char| match &chars {
                Some(set) => set.contains(&c),
                None => c.is_whitespace(),
            };
            Value::from(match method {
                "strip" => s.trim_matches(matches),
                "lstrip" => s.trim_start_matches(matches),
                _ => s.trim_end_matches(matches),
            })
        }
        "startswith" | "endswith" => {
            let candidates = match arg(0) {
                Some(v) if v.as_str().is_some() => vec![text(v, "prefix")?],
                Some(v) => seq_items(v)
                    .ok_or_else(|| {
                        bad(format!("{method} first arg must be str or a tuple of str"))
                    })?
                    .iter()
                    .map(|v| text(v, "prefix"))
                    .collect::<Result<_, _>>()?,
                None => return Err(bad(format!("{method}() takes at least 1 argument"))),
            };
            let hit = candidates.iter().any(|c| {
                if method == "startswith" {
                    s.starts_with(c.as_str())
                } else {
                    s.ends_with(c.as_str())
                }
            });
            Value::from(hit)
        }
        "split" | "rsplit" => {
            let sep = match arg(0).or_else(|| {
                kwargs
                    .iter()
                    .find(|(k, _)| k.as_str() == Some("sep"))
                    .map(|(_, v)| v)
            }) {
                Some(v) if !v.is_none() => Some(text(v, "separator")?),
                _ => None,
            };
            let max = match arg(1).or_else(|| {
                kwargs
                    .iter()
                    .find(|(k, _)| k.as_str() == Some("maxsplit"))
                    .map(|(_, v)| v)
            }) {
                Some(v) => i64::try_from(v.clone())?,
                None => -1,
            };
            Value::from(split(s, sep.as_deref(), max, method == "rsplit")?)
        }
        "splitlines" => Value::from(s.lines().map(Value::from).collect::<Vec<_>>()),
        "replace" => {
            let old = text(
                arg(0).ok_or_else(|| bad("replace() takes 2 arguments"))?,
                "old",
            )?;
            let new = text(
                arg(1).ok_or_else(|| bad("replace() takes 2 arguments"))?,
                "new",
            )?;
            match arg(2) {
                Some(count) => {
                    Value::from(s.replacen(old.as_str(), &new, usize::try_from(count.clone())?))
                }
                None => Value::from(s.replace(old.as_str(), &new)),
            }
        }
        "join" => {
            let items = arg(0)
                .and_then(seq_items)
                .ok_or_else(|| bad("join() takes an iterable"))?;
            let parts = items
                .iter()
                .map(|v| text(v, "sequence item"))
                .collect::<Result<Vec<_>, _>>()?;
            Value::from(parts.join(s))
        }
        "format" => Value::from(format(s, &positional, &kwargs)?),
        "count" => Value::from(
            s.matches(
                text(
                    arg(0).ok_or_else(|| bad("count() takes 1 argument"))?,
                    "sub",
                )?
                .as_str(),
            )
            .count(),
        ),
        "find" => {
            let sub = text(arg(0).ok_or_else(|| bad("find() takes 1 argument"))?, "sub")?;
            Value::from(
                s.find(sub.as_str())
                    .map_or(-1, |b| s[..b].chars().count() as i64),
            )
        }
        "isdigit" => Value::from(!s.is_empty() && s.chars().all(|c| c.is_ascii_digit())),
        "isalpha" => Value::from(!s.is_empty() && s.chars().all(char::is_alphabetic)),
        "isalnum" => Value::from(!s.is_empty() && s.chars().all(char::is_alphanumeric)),
        "isupper" => {
            Value::from(s.chars().any(char::is_uppercase) && !s.chars().any(char::is_lowercase))
        }
        "islower" => {
            Value::from(s.chars().any(char::is_lowercase) && !s.chars().any(char::is_uppercase))
        }
        "zfill" => {
            let width = usize::try_from(arg(0).cloned().unwrap_or_default())?;
            let len = s.chars().count();
            let (sign, digits) = match s.chars().next() {
                Some(c @ ('-' | '+')) => (c.to_string(), &s[1..]),
                _ => (String::new(), s),
            };
            Value::from(format!(
                "{sign}{}{digits}",
                "0".repeat(width.saturating_sub(len))
            ))
        }
        _ => return Err(Error::from(ErrorKind::UnknownMethod)),
    })
}

fn title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev_cased = false;
    for c in s.chars() {
        if c.is_alphabetic() {
            if prev_cased {
                out.extend(c.to_lowercase());
            } else {
                out.extend(c.to_uppercase());
            }
            prev_cased = true;
        } else {
            out.push(c);
            prev_cased = false;
        }
    }
    out
}

fn split(s: &str, sep: Option<&str>, max: i64, from_right: bool) -> Result<Vec<Value>, Error> {
    let limit = if max < 0 { usize::MAX } else { max as usize };
    let parts: Vec<String> = match sep {
        Some("") => return Err(bad("empty separator")),
        Some(sep) if from_right => {
            let mut parts: Vec<String> = s
                .rsplitn(limit.saturating_add(1), sep)
                .map(str::to_string)
                .collect();
            parts.reverse();
            parts
        }
        Some(sep) => s
            .splitn(limit.saturating_add(1), sep)
            .map(str::to_string)
            .collect(),
        None => {
            let words: Vec<&str> = s.split_whitespace().collect();
            if words.len() <= limit.saturating_add(1) || limit == usize::MAX {
                words.into_iter().map(str::to_string).collect()
            } else if from_right {
                let keep = words.len() - limit;
                let head_end = {
                    let mut rest = s.trim_end();
                    for _ in 0..limit {
                        let cut = rest.trim_end().rfind(char::is_whitespace).unwrap_or(0);
                        rest = &rest[..cut];
                    }
                    rest.trim_end().len()
                };
                let _ = keep;
                let mut parts = vec![s[..head_end].trim_start().to_string()];
                parts.extend(words[words.len() - limit..].iter().map(|w| w.to_string()));
                parts
            } else {
                let mut parts = Vec::new();
                let mut rest = s.trim_start();
                for _ in 0..limit {
                    let cut = rest.find(char::is_whitespace).unwrap_or(rest.len());
                    parts.push(rest[..cut].to_string());
                    rest = rest[cut..].trim_start();
                }
                parts.push(rest.to_string());
                parts
            }
        }
    };
    Ok(parts.into_iter().map(Value::from).collect())
}

/// `str.format` with `{}`, `{0}`, `{name}`, `{name[key]}`-free fields and `{{`/`}}`.
fn format(s: &str, positional: &[Value], kwargs: &[(Value, Value)]) -> Result<String, Error> {
    let mut out = String::new();
    let mut auto = 0;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut field = String::new();
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                    field.push(c);
                }
                let (name, spec) = field.split_once(':').unwrap_or((&field, ""));
                let value = if name.is_empty() {
                    auto += 1;
                    positional.get(auto - 1).cloned()
                } else if let Ok(index) = name.parse::<usize>() {
                    positional.get(index).cloned()
                } else {
                    kwargs
                        .iter()
                        .find(|(k, _)| k.as_str() == Some(name))
                        .map(|(_, v)| v.clone())
                }
                .ok_or_else(|| bad(format!("format field {name:?} is missing")))?;
                out.push_str(&super::printf::format_spec(&value, spec).map_err(bad)?);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}
