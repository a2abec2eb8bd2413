//! The few Python behaviours Salt's ACL code leans on: `re.match`, `fnmatch.fnmatch`,
//! `salt.utils.stringutils.expr_match`, `str()`/`repr()` of JSON-like values and truthiness.

use brine_protocol::pyrepr::{float_repr, write_str_repr};
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// Compiled `re.match` patterns; `None` marks a pattern Python would also reject (or Rust cannot run).
/// Event filtering calls the matcher for every event and subscriber, so compiling once matters.
fn regex_cache() -> &'static RwLock<HashMap<String, Option<Regex>>> {
    static CACHE: OnceLock<RwLock<HashMap<String, Option<Regex>>>> = OnceLock::new();
    CACHE.get_or_init(|| RwLock::new(HashMap::new()))
}

const REGEX_CACHE_MAX: usize = 4096;

/// Python regex syntax to the `regex` crate's, for the parts that differ and matter here.
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                // Python's `\Z` is the absolute end of the string, `\z` in the regex crate.
                Some('Z') => out.push_str("\\z"),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn compile_anchored(pattern: &str) -> Option<Regex> {
    let translated = translate(pattern);
    // Check the pattern on its own first: wrapping it in a group could make an unbalanced one valid.
    Regex::new(&translated).ok()?;
    Regex::new(&format!("\\A(?:{translated})")).ok()
}

/// The compiled form of a Python `re.match` pattern, or `None` if it is not a valid pattern.
fn cached(pattern: &str) -> Option<Regex> {
    if let Ok(cache) = regex_cache().read() {
        if let Some(entry) = cache.get(pattern) {
            return entry.clone();
        }
    }
    let compiled = compile_anchored(pattern);
    if let Ok(mut cache) = regex_cache().write() {
        if cache.len() >= REGEX_CACHE_MAX {
            cache.clear();
        }
        cache.insert(pattern.to_string(), compiled.clone());
    }
    compiled
}

/// Python's `re.match(pattern, text)`: anchored at the start only. An invalid pattern matches nothing
/// (Salt logs "Invalid regular expression" and denies).
pub(crate) fn re_match(pattern: &str, text: &str) -> bool {
    cached(pattern).is_some_and(|r| r.is_match(text))
}

/// Whether `pattern` is a regular expression at all (Python would not raise on it).
pub(crate) fn re_valid(pattern: &str) -> bool {
    cached(pattern).is_some()
}

/// Salt's `expr_match(line, expr)`: `fnmatch(line, expr)` or `re.match("\A" + expr + "\Z", line)`.
/// Note the argument order: `expr` is the pattern.
pub(crate) fn expr_match(line: &str, expr: &str) -> bool {
    fnmatch(line, expr) || re_match(&format!("\\A{expr}\\Z"), line)
}

/// Python's `fnmatch.fnmatch(name, pat)` on POSIX (Brine's one implementation, in protocol).
pub(crate) fn fnmatch(name: &str, pat: &str) -> bool {
    brine_protocol::target::fnmatch(pat, name)
}

/// Python's `int(value)` for the values a YAML config can hold.
pub(crate) fn py_int(v: &Value) -> Option<i64> {
    match v {
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite())
                .map(|f| f.trunc() as i64)
        }),
        Value::String(s) => {
            let t = s.trim().replace('_', "");
            t.parse::<i64>().ok()
        }
        _ => None,
    }
}

/// Python's `str(value)`.
pub(crate) fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// Python's `repr(value)` for the JSON-like types (`None`, `True`, `1.0`, `'a'`, `[..]`, `{..}`).
pub(crate) fn py_repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, v);
    out
}

fn write_repr(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else {
                out.push_str(&float_repr(n.as_f64().unwrap_or(f64::NAN)));
            }
        }
        Value::String(s) => write_str_repr(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str_repr(out, k);
                out.push_str(": ");
                write_repr(out, item);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn re_match_is_anchored_at_the_start_only() {
        assert!(re_match("test.*", "test.ping"));
        assert!(re_match("test.ping", "test.pingX"));
        assert!(!re_match("ping", "test.ping"));
        assert!(re_match(".*", "anything"));
        assert!(re_match("a|b", "bcd"));
        assert!(!re_match("test.ping$", "test.pingX"));
        assert!(re_match("test\\.ping\\Z", "test.ping"));
        assert!(!re_match("test\\.ping\\Z", "test.pings"));
    }

    #[test]
    fn invalid_patterns_match_nothing() {
        assert!(!re_match("*", "test.ping"));
        assert!(!re_match("a)(b", "a"));
        assert!(!re_match("(", "("));
        assert!(!re_valid("*"));
        assert!(re_valid("test.*"));
    }

    #[test]
    fn fnmatch_follows_python() {
        assert!(fnmatch("web1", "web*"));
        assert!(fnmatch("web1", "web?"));
        assert!(!fnmatch("web12", "web?"));
        assert!(fnmatch("web1", "web[0-9]"));
        assert!(!fnmatch("weba", "web[0-9]"));
        assert!(fnmatch("weba", "web[!0-9]"));
        assert!(fnmatch("a]", "a[]]"));
        assert!(fnmatch("[x", "[x"));
        assert!(fnmatch("", "*"));
        assert!(fnmatch("abcabd", "*ab?"));
        assert!(!fnmatch("Web1", "web*"));
        assert!(fnmatch("a-", "a[a-]"));
        assert!(!fnmatch("b", "[z-a]"));
    }

    #[test]
    fn expr_match_uses_the_second_argument_as_the_pattern() {
        // Salt calls expr_match(config_key, username): the username is the pattern.
        assert!(!expr_match("web*", "web1"));
        assert!(expr_match("web1", "web*"));
        assert!(expr_match("bob", "bob"));
        assert!(expr_match("bob", "b.b"));
        assert!(!expr_match("bobby", "bob"));
        assert!(!expr_match("bob", "a)(b"));
    }

    #[test]
    fn python_str_and_repr() {
        assert_eq!(py_str(&json!("hello world")), "hello world");
        assert_eq!(py_str(&json!(5)), "5");
        assert_eq!(py_str(&json!(1.0)), "1.0");
        assert_eq!(py_str(&json!(0.1)), "0.1");
        assert_eq!(py_str(&json!(1e16)), "1e+16");
        assert_eq!(py_str(&json!(1.5e-5)), "1.5e-05");
        assert_eq!(py_str(&json!(123456.789)), "123456.789");
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!(["a", 1, null])), "['a', 1, None]");
        assert_eq!(py_str(&json!({"k": "it's"})), "{'k': \"it's\"}");
        assert_eq!(py_repr(&json!("a\nb\u{1}")), "'a\\nb\\x01'");
        assert_eq!(py_repr(&json!({"m1": ["test.*"]})), "{'m1': ['test.*']}");
        assert_eq!(py_repr(&json!("é")), "'é'");
    }

    #[test]
    fn python_int() {
        assert_eq!(py_int(&json!(2)), Some(2));
        assert_eq!(py_int(&json!("3")), Some(3));
        assert_eq!(py_int(&json!(2.9)), Some(2));
        assert_eq!(py_int(&json!("x")), None);
    }
}
