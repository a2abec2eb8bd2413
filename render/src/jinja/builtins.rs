//! Jinja2's built-in filters and tests that minijinja lacks or renders differently, as Jinja2 3.1
//! (Salt 3007's) gives them: Python's argument binding (positional or keyword), Python's
//! conversions, comparisons and formatting, and `StrictUndefined` failing where Salt's does.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use minijinja::value::{Kwargs, Tuple, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior};
use regex::Regex;

use super::objects::{map_entries, seq_items, split_kwargs, Dict, List};
use super::pyargs::{
    bad, bind, int_value, parse_py_float, parse_py_int, py_isspace, py_type, Args,
};
use super::pyfmt;

fn undefined() -> Error {
    Error::from(ErrorKind::UndefinedError)
}

/// Salt's `StrictUndefined` (unless `allow_undefined`): printing, iterating, comparing or
/// testing the truth of an undefined value fails.
fn strict(state: &State) -> bool {
    state.undefined_behavior() == UndefinedBehavior::Strict
}

/// Python's `str()` of a filter's input (`soft_str`).
fn text(state: &State, v: &Value) -> Result<String, Error> {
    if v.is_undefined() {
        return if strict(state) {
            Err(undefined())
        } else {
            Ok(String::new())
        };
    }
    Ok(pyfmt::str(v))
}

/// Python's `bool()`.
fn truthy(state: &State, v: &Value) -> Result<bool, Error> {
    if v.is_undefined() && strict(state) {
        return Err(undefined());
    }
    Ok(v.is_true())
}

/// An optional flag argument's truth.
fn flag(v: &Option<Value>, default: bool) -> bool {
    v.as_ref().map_or(default, Value::is_true)
}

#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// A number (or bool, which Python counts as an int).
fn num(v: &Value) -> Option<Num> {
    match v.kind() {
        ValueKind::Bool => Some(Num::Int(i128::from(v.is_true()))),
        ValueKind::Number if v.is_integer() => i128::try_from(v.clone()).ok().map(Num::Int),
        ValueKind::Number => f64::try_from(v.clone()).ok().map(Num::Float),
        _ => None,
    }
}

/// Python's `int(float)` of a finite float: beyond what a template integer holds, the exact
/// digits Python prints.
fn float_to_int(f: f64) -> Value {
    let t = f.trunc();
    if t.abs() < 1e38 {
        int_value(t as i128)
    } else {
        Value::from(format!("{t:.0}"))
    }
}

/// An integer argument (Python's `__index__`: ints and bools), or `default` when not given.
fn int_arg(v: &Option<Value>, default: i128) -> Result<i128, Error> {
    match v {
        None => Ok(default),
        Some(v) => match num(v) {
            Some(Num::Int(i)) => Ok(i),
            _ => Err(bad(format!(
                "'{}' object cannot be interpreted as an integer",
                py_type(v)
            ))),
        },
    }
}

fn num_cmp(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (x, y) => x.as_f64().partial_cmp(&y.as_f64()),
    }
}

/// Python's `==`.
pub(crate) fn py_eq(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return num_cmp(x, y) == Some(Ordering::Equal);
    }
    match (a.kind(), b.kind()) {
        (ValueKind::String, ValueKind::String) => a.as_str() == b.as_str(),
        (ValueKind::None, ValueKind::None) | (ValueKind::Undefined, ValueKind::Undefined) => true,
        (ValueKind::Seq, ValueKind::Seq) => {
            if a.is_tuple() != b.is_tuple() {
                return false;
            }
            let (x, y) = (
                seq_items(a).unwrap_or_default(),
                seq_items(b).unwrap_or_default(),
            );
            x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| py_eq(p, q))
        }
        (ValueKind::Map, ValueKind::Map) => {
            let (x, y) = (
                map_entries(a).unwrap_or_default(),
                map_entries(b).unwrap_or_default(),
            );
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.iter().any(|(k2, v2)| py_eq(k, k2) && py_eq(v, v2)))
        }
        (ka, kb) if ka != kb => false,
        _ => a == b,
    }
}

/// Python's ordering (`<`), failing between values Python cannot compare.
pub(crate) fn py_cmp(a: &Value, b: &Value) -> Result<Ordering, Error> {
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return Ok(num_cmp(x, y).unwrap_or(Ordering::Equal));
    }
    match (a.kind(), b.kind()) {
        (ValueKind::String, ValueKind::String) => Ok(a.as_str().cmp(&b.as_str())),
        (ValueKind::Seq, ValueKind::Seq) if a.is_tuple() == b.is_tuple() => {
            let (x, y) = (
                seq_items(a).unwrap_or_default(),
                seq_items(b).unwrap_or_default(),
            );
            for (p, q) in x.iter().zip(&y) {
                if !py_eq(p, q) {
                    return py_cmp(p, q);
                }
            }
            Ok(x.len().cmp(&y.len()))
        }
        (ValueKind::Undefined, _) | (_, ValueKind::Undefined) => Err(undefined()),
        _ => Err(bad(format!(
            "'<' not supported between instances of '{}' and '{}'",
            py_type(a),
            py_type(b)
        ))),
    }
}

/// Python's `sorted(items, key=..., reverse=...)`: stable, failing on incomparable keys.
fn py_sorted(items: Vec<Value>, keys: &[Value], reverse: bool) -> Result<Vec<Value>, Error> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    let mut failure = None;
    order.sort_by(|&i, &j| {
        let (x, y) = if reverse { (j, i) } else { (i, j) };
        py_cmp(&keys[x], &keys[y]).unwrap_or_else(|e| {
            failure.get_or_insert(e);
            Ordering::Equal
        })
    });
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(order.into_iter().map(|i| items[i].clone()).collect())
}

/// Python's `str.splitlines(keepends)`.
fn py_splitlines(s: &str, keepends: bool) -> Vec<String> {
    let lines = if keepends {
        brine_protocol::nested::splitlines_keepends(s)
    } else {
        brine_protocol::nested::splitlines(s)
    };
    lines.into_iter().map(str::to_string).collect()
}

/// Python's `\w` for one character.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The items Python's `for x in value` gives; an undefined value fails under
/// `StrictUndefined` and is empty otherwise.
fn iter_items(state: &State, v: &Value) -> Result<Vec<Value>, Error> {
    match v.kind() {
        ValueKind::Undefined if strict(state) => Err(undefined()),
        ValueKind::Undefined => Ok(Vec::new()),
        _ => super::pyargs::py_iter_or_err(v),
    }
}

/// The `(key, value)` pairs of a mapping (`value.items()`).
fn mapping_items(v: &Value) -> Result<Vec<(Value, Value)>, Error> {
    if v.is_undefined() {
        return Err(undefined());
    }
    match v.kind() {
        ValueKind::Map => Ok(map_entries(v).unwrap_or_default()),
        _ => Err(bad(format!(
            "'{}' object has no attribute 'items'",
            py_type(v)
        ))),
    }
}

fn pair(k: Value, v: Value) -> Value {
    Value::from(Tuple::from(vec![k, v]))
}

/// Jinja2's attribute path: `a.b.0` is `x['a']['b'][0]`.
fn attr_parts(attr: &Value) -> Vec<Value> {
    match attr.as_str() {
        Some(s) => s
            .split('.')
            .map(|p| match p.parse::<i64>() {
                Ok(i) if p.chars().all(|c| c.is_ascii_digit()) => Value::from(i),
                _ => Value::from(p),
            })
            .collect(),
        None if attr.is_none() => Vec::new(),
        None => vec![attr.clone()],
    }
}

/// Jinja2's `make_attrgetter`: follow a path, an undefined step giving `default` when one is
/// given; stepping into an undefined value fails.
fn get_path(item: &Value, parts: &[Value], default: Option<&Value>) -> Result<Value, Error> {
    let mut cur = item.clone();
    for part in parts {
        if cur.is_undefined() {
            return Err(undefined());
        }
        cur = cur.get_item(part).unwrap_or(Value::UNDEFINED);
        if cur.is_undefined() {
            if let Some(d) = default {
                cur = d.clone();
            }
        }
    }
    Ok(cur)
}

/// Jinja2's `ignore_case`: strings lowercased, the rest as they are.
fn ignore_case(v: Value, case_sensitive: bool) -> Value {
    match v.as_str() {
        Some(s) if !case_sensitive => Value::from(s.to_lowercase()),
        _ => v,
    }
}

/// MarkupSafe's `escape` of a text.
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// MarkupSafe's `escape(value)`: markup stays as it is, anything else is escaped text.
fn escape_value(state: &State, v: &Value) -> Result<String, Error> {
    if v.is_safe() {
        return Ok(v.as_str().unwrap_or_default().to_string());
    }
    Ok(html_escape(&text(state, v)?))
}

/// Python's `float(value)`, `None` where Python raises `TypeError`/`ValueError`.
fn py_float(v: &Value) -> Option<f64> {
    match v.kind() {
        ValueKind::String => parse_py_float(v.as_str().unwrap_or_default()),
        _ => num(v).map(Num::as_f64),
    }
}

/// Python's fixed-point formatting (`f"{x:.Nf}"`).
fn fixed(f: f64, precision: usize) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        (if f > 0.0 { "inf" } else { "-inf" }).into()
    } else {
        format!("{f:.precision$}")
    }
}

pub(crate) fn register(env: &mut Environment<'_>) {
    // MiniJinja's own extras Jinja2 has not: using them fails in Salt.
    for name in ["bool", "split", "lines", "chain"] {
        env.remove_filter(name);
    }
    for name in ["startingwith", "endingwith", "int", "safe"] {
        env.remove_test(name);
    }
    register_filters(env);
    register_sequence_filters(env);
    register_text_filters(env);
    register_tests(env);
}

fn register_filters(env: &mut Environment<'_>) {
    env.add_filter("abs", |v: Value| -> Result<Value, Error> {
        match num(&v) {
            Some(Num::Int(i)) => Ok(int_value(i.saturating_abs())),
            Some(Num::Float(f)) => Ok(Value::from(f.abs())),
            None => Err(bad(format!(
                "bad operand type for abs(): '{}'",
                py_type(&v)
            ))),
        }
    });
    env.add_filter("attr", |v: Value, name: Value| -> Result<Value, Error> {
        let name = name
            .as_str()
            .ok_or_else(|| bad("attribute name must be string"))?;
        if v.is_undefined() {
            return Err(undefined());
        }
        // Jinja2's `attr` does not fall back to items: data has no attributes but Python's
        // methods, which templates cannot print.
        let data = v.downcast_object_ref::<Dict>().is_some()
            || v.downcast_object_ref::<List>().is_some()
            || !matches!(v.kind(), ValueKind::Map | ValueKind::Plain);
        if data {
            return Ok(Value::UNDEFINED);
        }
        Ok(v.get_attr(name).unwrap_or(Value::UNDEFINED))
    });
    let default = |state: &State, v: Value, args: Args| -> Result<Value, Error> {
        let a = bind("default", args, ["default_value", "boolean"], 0)?;
        if v.is_undefined() || (flag(&a[1], false) && !truthy(state, &v)?) {
            return Ok(a[0].clone().unwrap_or_else(|| Value::from("")));
        }
        Ok(v)
    };
    env.add_filter("default", default);
    env.add_filter("d", default);
    env.add_filter("dictsort", dictsort);
    env.add_filter("filesizeformat", filesizeformat);
    env.add_filter("float", |v: Value, args: Args| -> Result<Value, Error> {
        let a = bind("float", args, ["default"], 0)?;
        if v.is_undefined() {
            return Err(undefined());
        }
        Ok(py_float(&v).map_or_else(
            || a[0].clone().unwrap_or_else(|| Value::from(0.0)),
            Value::from,
        ))
    });
    env.add_filter("int", int);
    env.add_filter("items", |v: Value| -> Result<Value, Error> {
        if v.is_undefined() {
            return Ok(List::value(Vec::new()));
        }
        if v.kind() != ValueKind::Map {
            return Err(bad("Can only get item pairs from a mapping."));
        }
        Ok(List::value(
            map_entries(&v)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| pair(k, v))
                .collect(),
        ))
    });
    env.add_filter("list", |state: &State, v: Value| -> Result<Value, Error> {
        Ok(List::value(iter_items(state, &v)?))
    });
    env.add_filter("pprint", |v: Value| -> String { pprint::pformat(&v) });
    env.add_filter(
        "random",
        |state: &State, v: Value| -> Result<Value, Error> {
            let items = match v.kind() {
                ValueKind::Map => {
                    return Err(bad("random: a mapping cannot be indexed by position"))
                }
                ValueKind::String | ValueKind::Seq | ValueKind::Iterable | ValueKind::Undefined => {
                    iter_items(state, &v)?
                }
                _ => {
                    return Err(bad(format!(
                        "object of type '{}' has no len()",
                        py_type(&v)
                    )))
                }
            };
            if items.is_empty() {
                return Ok(Value::UNDEFINED);
            }
            let r = std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish();
            Ok(items[(r % items.len() as u64) as usize].clone())
        },
    );
    env.add_filter("select", |state: &mut State, v: Value, args: Args| {
        select_or_reject(state, v, args, false, false)
    });
    env.add_filter("reject", |state: &mut State, v: Value, args: Args| {
        select_or_reject(state, v, args, true, false)
    });
    env.add_filter("selectattr", |state: &mut State, v: Value, args: Args| {
        select_or_reject(state, v, args, false, true)
    });
    env.add_filter("rejectattr", |state: &mut State, v: Value, args: Args| {
        select_or_reject(state, v, args, true, true)
    });
    env.add_filter("round", round);
    env.add_filter("sort", sort);
}

/// Jinja2's `dictsort(value, case_sensitive=False, by='key', reverse=False)`.
fn dictsort(v: Value, args: Args) -> Result<Value, Error> {
    let a = bind("dictsort", args, ["case_sensitive", "by", "reverse"], 0)?;
    let case_sensitive = flag(&a[0], false);
    let pos = match a[1].as_ref().map_or(Some("key"), Value::as_str) {
        Some("key") => 0,
        Some("value") => 1,
        _ => return Err(bad("You can only sort by either \"key\" or \"value\"")),
    };
    let entries = mapping_items(&v)?;
    let keys: Vec<Value> = entries
        .iter()
        .map(|(k, v)| ignore_case(if pos == 0 { k.clone() } else { v.clone() }, case_sensitive))
        .collect();
    let pairs = entries.into_iter().map(|(k, v)| pair(k, v)).collect();
    Ok(List::value(py_sorted(pairs, &keys, flag(&a[2], false))?))
}

/// Jinja2's `filesizeformat(value, binary=False)`.
fn filesizeformat(v: Value, args: Args) -> Result<String, Error> {
    let a = bind("filesizeformat", args, ["binary"], 0)?;
    let binary = flag(&a[0], false);
    let bytes = if v.is_undefined() {
        return Err(undefined());
    } else {
        py_float(&v).ok_or_else(|| {
            bad(format!(
                "could not convert {} to float: {}",
                py_type(&v),
                pyfmt::repr(&v)
            ))
        })?
    };
    let base: f64 = if binary { 1024.0 } else { 1000.0 };
    let prefixes = if binary {
        ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"]
    } else {
        ["kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"]
    };
    if bytes == 1.0 {
        return Ok("1 Byte".into());
    }
    if bytes < base {
        if !bytes.is_finite() {
            return Err(bad("cannot convert float infinity to integer"));
        }
        return Ok(format!("{} Bytes", int_value(bytes.trunc() as i128)));
    }
    let mut shown = String::new();
    for (i, prefix) in prefixes.iter().enumerate() {
        let unit: f64 = if binary {
            2f64.powi(10 * (i as i32 + 2))
        } else {
            format!("1e{}", 3 * (i + 2))
                .parse()
                .unwrap_or(f64::INFINITY)
        };
        shown = format!("{} {prefix}", fixed(base * bytes / unit, 1));
        if bytes < unit {
            break;
        }
    }
    Ok(shown)
}

/// Jinja2's `int(value, default=0, base=10)`.
fn int(v: Value, args: Args) -> Result<Value, Error> {
    let a = bind("int", args, ["default", "base"], 0)?;
    let default = a[0].clone().unwrap_or_else(|| Value::from(0));
    let from_float = |f: f64| {
        if f.is_finite() {
            float_to_int(f)
        } else {
            default.clone()
        }
    };
    match v.kind() {
        ValueKind::Undefined => Err(undefined()),
        ValueKind::String => {
            let s = v.as_str().unwrap_or_default();
            let base = match &a[1] {
                None => Some(10),
                Some(b) => match num(b) {
                    Some(Num::Int(b)) => Some(b),
                    _ => None,
                },
            };
            if let Some(i) = base.and_then(|b| parse_py_int(s, b)) {
                return Ok(int_value(i));
            }
            Ok(parse_py_float(s).map_or_else(|| default.clone(), from_float))
        }
        _ => match num(&v) {
            Some(Num::Int(i)) => Ok(int_value(i)),
            Some(Num::Float(f)) if f.is_infinite() => {
                Err(bad("cannot convert float infinity to integer"))
            }
            Some(Num::Float(f)) => Ok(from_float(f)),
            None => Ok(default),
        },
    }
}

/// Jinja2's `select`/`reject`/`selectattr`/`rejectattr`.
fn select_or_reject(
    state: &mut State,
    value: Value,
    args: Args,
    invert: bool,
    by_attr: bool,
) -> Result<Value, Error> {
    let values = args.into_values();
    let (positional, kwargs) = split_kwargs(&values);
    if !truthy(state, &value)? {
        return Ok(List::value(Vec::new()));
    }
    let items = iter_items(state, &value)?;
    let mut positional = positional.into_iter();
    let parts = if by_attr {
        let attr = positional
            .next()
            .ok_or_else(|| bad("Missing parameter for attribute name"))?;
        Some(attr_parts(&attr))
    } else {
        None
    };
    let test = positional.next();
    let mut test_args: Vec<Value> = positional.collect();
    if !kwargs.is_empty() {
        let kwargs: Kwargs = kwargs
            .into_iter()
            .map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), v))
            .collect();
        test_args.push(Value::from(kwargs));
    }
    let mut out = Vec::new();
    for item in items {
        let probe = match &parts {
            Some(parts) => get_path(&item, parts, None)?,
            None => item.clone(),
        };
        let passed = match &test {
            None => truthy(state, &probe)?,
            Some(name) => {
                let name = name
                    .as_str()
                    .ok_or_else(|| Error::from(ErrorKind::UnknownTest))?;
                let mut call = vec![probe];
                call.extend(test_args.iter().cloned());
                state.perform_test(name, &call)?
            }
        };
        if passed != invert {
            out.push(item);
        }
    }
    Ok(List::value(out))
}

/// Jinja2's `round(value, precision=0, method='common')`.
fn round(v: Value, args: Args) -> Result<Value, Error> {
    let a = bind("round", args, ["precision", "method"], 0)?;
    let method = match &a[1] {
        None => "common",
        Some(m) => m.as_str().unwrap_or_default(),
    };
    if !matches!(method, "common" | "ceil" | "floor") {
        return Err(bad("method must be common, ceil or floor"));
    }
    let precision = int_arg(&a[0], 0)?;
    let n = num(&v).ok_or_else(|| {
        bad(format!(
            "type {} doesn't define __round__ method",
            py_type(&v)
        ))
    })?;
    if method == "common" {
        return Ok(match n {
            Num::Int(i) => int_value(round_int(i, precision)),
            Num::Float(f) => Value::from(round_float(f, precision)),
        });
    }
    // `func(value * (10**precision)) / (10**precision)`
    let scale: f64 = if precision >= 0 {
        format!("1e{precision}").parse().unwrap_or(f64::INFINITY)
    } else {
        10f64.powf(precision as f64)
    };
    let scaled = n.as_f64() * scale;
    if !scaled.is_finite() {
        return Err(bad("cannot convert float infinity to integer"));
    }
    let rounded = if method == "ceil" {
        scaled.ceil()
    } else {
        scaled.floor()
    };
    Ok(Value::from(rounded / scale))
}

/// Whether rounding the magnitude `q * p + r + frac` (`twice_r` being `2 * r`) to a multiple
/// of `p` goes up, ties going to the even quotient.
fn round_half_even(q: i128, twice_r: i128, p: i128, frac: f64) -> bool {
    twice_r > p || (twice_r == p && (frac > 0.0 || q % 2 != 0))
}

/// Python's `round(int, ndigits)`.
fn round_int(i: i128, ndigits: i128) -> i128 {
    if ndigits >= 0 {
        return i;
    }
    let Some(p) = u32::try_from(-ndigits)
        .ok()
        .and_then(|k| 10i128.checked_pow(k))
    else {
        return 0;
    };
    let (q, r) = (i / p, (i % p).abs());
    let q = if round_half_even(q, 2 * r, p, 0.0) {
        q + i.signum()
    } else {
        q
    };
    q * p
}

/// Python's `round(float, ndigits)`: correctly rounded, half to even.
fn round_float(x: f64, ndigits: i128) -> f64 {
    if !x.is_finite() || x == 0.0 || ndigits > 323 {
        return x;
    }
    if ndigits < -308 {
        return 0.0 * x;
    }
    if ndigits >= 0 {
        return format!("{x:.*}", ndigits as usize).parse().unwrap_or(x);
    }
    let k = (-ndigits) as u32;
    let rounded = if x.abs() < 1e38 {
        match 10i128.checked_pow(k) {
            Some(p) => {
                let t = x.trunc();
                let ip = t as i128;
                let frac = (x - t).abs();
                let (q, r) = (ip / p, (ip % p).abs());
                let q = if round_half_even(q, 2 * r, p, frac) {
                    q + if x < 0.0 { -1 } else { 1 }
                } else {
                    q
                };
                (q * p) as f64
            }
            None => 0.0,
        }
    } else {
        let p = 10f64.powi(k as i32);
        (x / p).round_ties_even() * p
    };
    if rounded == 0.0 {
        0.0f64.copysign(x)
    } else {
        rounded
    }
}

/// Jinja2's `sort(value, reverse=False, case_sensitive=False, attribute=None)`.
fn sort(state: &State, v: Value, args: Args) -> Result<Value, Error> {
    let a = bind("sort", args, ["reverse", "case_sensitive", "attribute"], 0)?;
    let items = iter_items(state, &v)?;
    let case_sensitive = flag(&a[1], false);
    let attribute = a[2].clone().filter(|x| !x.is_none());
    let keys = match attribute {
        // Jinja2's keys are one-item lists: equal items are never compared with `<`.
        None => items
            .iter()
            .map(|i| Value::from(vec![ignore_case(i.clone(), case_sensitive)]))
            .collect::<Vec<_>>(),
        Some(attr) => {
            let paths: Vec<Vec<Value>> = match attr.as_str() {
                Some(s) => s.split(',').map(|p| attr_parts(&Value::from(p))).collect(),
                None => vec![vec![attr.clone()]],
            };
            let mut keys = Vec::with_capacity(items.len());
            for item in &items {
                let mut key = Vec::with_capacity(paths.len());
                for path in &paths {
                    key.push(ignore_case(get_path(item, path, None)?, case_sensitive));
                }
                keys.push(Value::from(key));
            }
            keys
        }
    };
    Ok(List::value(py_sorted(items, &keys, flag(&a[0], false))?))
}

fn register_sequence_filters(env: &mut Environment<'_>) {
    env.add_filter("batch", |state: &State, v: Value, args: Args| {
        batch_or_slice(state, v, args, true)
    });
    env.add_filter("slice", |state: &State, v: Value, args: Args| {
        batch_or_slice(state, v, args, false)
    });
    env.add_filter("groupby", groupby);
    env.add_filter(
        "join",
        |state: &State, v: Value, args: Args| -> Result<String, Error> {
            let a = bind("join", args, ["d", "attribute"], 0)?;
            let sep = match &a[0] {
                None => String::new(),
                Some(d) => text(state, d)?,
            };
            let items = iter_items(state, &v)?;
            let parts = attr_parts(a[1].as_ref().unwrap_or(&Value::from(())));
            let mut out = Vec::with_capacity(items.len());
            for item in &items {
                out.push(text(state, &get_path(item, &parts, None)?)?);
            }
            Ok(out.join(&sep))
        },
    );
    env.add_filter("map", map);
    env.add_filter("sum", |state: &State, v: Value, args: Args| {
        let a = bind("sum", args, ["attribute", "start"], 0)?;
        let parts = attr_parts(a[0].as_ref().unwrap_or(&Value::from(())));
        let mut total = a[1].clone().unwrap_or_else(|| Value::from(0));
        if matches!(total.kind(), ValueKind::String | ValueKind::Bytes) {
            return Err(bad("sum() can't sum strings [use ''.join(seq) instead]"));
        }
        for item in iter_items(state, &v)? {
            total = py_add(&total, &get_path(&item, &parts, None)?)?;
        }
        Ok(total)
    });
}

/// Python's `+`.
fn py_add(a: &Value, b: &Value) -> Result<Value, Error> {
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return match (x, y) {
            (Num::Int(x), Num::Int(y)) => x
                .checked_add(y)
                .map(int_value)
                .ok_or_else(|| bad("integer overflow")),
            (x, y) => Ok(Value::from(x.as_f64() + y.as_f64())),
        };
    }
    match (a.kind(), b.kind()) {
        (ValueKind::String, ValueKind::String) => Ok(Value::from(format!(
            "{}{}",
            a.as_str().unwrap_or_default(),
            b.as_str().unwrap_or_default()
        ))),
        (ValueKind::Seq, ValueKind::Seq) if a.is_tuple() == b.is_tuple() => {
            let mut items = seq_items(a).unwrap_or_default();
            items.extend(seq_items(b).unwrap_or_default());
            Ok(if a.is_tuple() {
                Value::from(Tuple::from(items))
            } else {
                List::value(items)
            })
        }
        (ValueKind::Undefined, _) | (_, ValueKind::Undefined) => Err(undefined()),
        _ => Err(bad(format!(
            "unsupported operand type(s) for +: '{}' and '{}'",
            py_type(a),
            py_type(b)
        ))),
    }
}

/// Jinja2's `batch(value, linecount, fill_with=None)` and `slice(value, slices,
/// fill_with=None)`.
fn batch_or_slice(state: &State, v: Value, args: Args, batch: bool) -> Result<Value, Error> {
    let (name, count) = if batch {
        ("batch", "linecount")
    } else {
        ("slice", "slices")
    };
    let a = bind(name, args, [count, "fill_with"], 0)?;
    let n = match &a[0] {
        Some(n) => int_arg(&Some(n.clone()), 0)?,
        None => {
            return Err(Error::new(
                ErrorKind::MissingArgument,
                format!("{name}() missing 1 required positional argument: '{count}'"),
            ))
        }
    };
    let fill = a[1].clone().filter(|f| !f.is_none());
    let seq = iter_items(state, &v)?;
    let mut out = Vec::new();
    if batch {
        let mut tmp: Vec<Value> = Vec::new();
        for item in seq {
            if tmp.len() as i128 == n {
                out.push(List::value(std::mem::take(&mut tmp)));
            }
            tmp.push(item);
        }
        if !tmp.is_empty() {
            if let Some(fill) = fill {
                while (tmp.len() as i128) < n {
                    tmp.push(fill.clone());
                }
            }
            out.push(List::value(tmp));
        }
        return Ok(List::value(out));
    }
    if n == 0 {
        return Err(bad("integer division or modulo by zero"));
    }
    let len = seq.len() as i128;
    let (per_slice, with_extra) = (len.div_euclid(n), len.rem_euclid(n));
    let mut offset = 0;
    for number in 0..n.max(0) {
        let start = offset + number * per_slice;
        if number < with_extra {
            offset += 1;
        }
        let end = offset + (number + 1) * per_slice;
        let clamp = |i: i128| i.clamp(0, len) as usize;
        let mut tmp = seq[clamp(start)..clamp(end).max(clamp(start))].to_vec();
        if let Some(fill) = &fill {
            if number >= with_extra {
                tmp.push(fill.clone());
            }
        }
        out.push(List::value(tmp));
    }
    Ok(List::value(out))
}

/// The `(grouper, list)` named tuple of Jinja2's `groupby`.
#[derive(Debug)]
struct GroupTuple {
    grouper: Value,
    list: Value,
}

impl minijinja::value::Object for GroupTuple {
    fn repr(self: &std::sync::Arc<Self>) -> minijinja::value::ObjectRepr {
        minijinja::value::ObjectRepr::Seq
    }

    fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
        match (key.as_i64(), key.as_str()) {
            (Some(0 | -2), _) | (_, Some("grouper")) => Some(self.grouper.clone()),
            (Some(1 | -1), _) | (_, Some("list")) => Some(self.list.clone()),
            _ => None,
        }
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Seq(2)
    }
}

/// Jinja2's `groupby(value, attribute, default=None, case_sensitive=False)`.
fn groupby(state: &State, v: Value, args: Args) -> Result<Value, Error> {
    let a = bind(
        "groupby",
        args,
        ["attribute", "default", "case_sensitive"],
        0,
    )?;
    let attribute = a[0].clone().ok_or_else(|| {
        Error::new(
            ErrorKind::MissingArgument,
            "groupby() missing 1 required positional argument: 'attribute'",
        )
    })?;
    let parts = attr_parts(&attribute);
    let default = a[1].clone().filter(|d| !d.is_none());
    let case_sensitive = flag(&a[2], false);
    let items = iter_items(state, &v)?;
    let mut keys = Vec::with_capacity(items.len());
    for item in &items {
        keys.push(ignore_case(
            get_path(item, &parts, default.as_ref())?,
            case_sensitive,
        ));
    }
    let order = py_sorted((0..items.len()).map(Value::from).collect(), &keys, false)?;
    let mut groups: Vec<(Value, Vec<Value>)> = Vec::new();
    for index in order {
        let i = index.as_usize().unwrap_or(0);
        let key = &keys[i];
        let same = match groups.last() {
            Some((current, _)) => {
                if (current.is_undefined() || key.is_undefined()) && strict(state) {
                    return Err(undefined());
                }
                py_eq(current, key)
            }
            None => false,
        };
        if same {
            if let Some((_, list)) = groups.last_mut() {
                list.push(items[i].clone());
            }
        } else {
            groups.push((key.clone(), vec![items[i].clone()]));
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for (key, list) in groups {
        // The group shows the key of its first item, not its lowercased one.
        let grouper = if case_sensitive {
            key
        } else {
            get_path(&list[0], &parts, default.as_ref())?
        };
        out.push(Value::from_object(GroupTuple {
            grouper,
            list: List::value(list),
        }));
    }
    Ok(List::value(out))
}

/// Jinja2's `map(value, *args, **kwargs)`: an attribute of each item, or each item through a
/// filter.
fn map(state: &mut State, v: Value, args: Args) -> Result<Value, Error> {
    let values = args.into_values();
    let (positional, mut kwargs) = split_kwargs(&values);
    if !truthy(state, &v)? {
        return Ok(List::value(Vec::new()));
    }
    let items = iter_items(state, &v)?;
    let kwarg = |kwargs: &mut Vec<(Value, Value)>, name: &str| {
        let at = kwargs.iter().position(|(k, _)| k.as_str() == Some(name))?;
        Some(kwargs.remove(at).1)
    };
    let mut out = Vec::with_capacity(items.len());
    if positional.is_empty() {
        if let Some(attribute) = kwarg(&mut kwargs, "attribute") {
            let default = kwarg(&mut kwargs, "default").filter(|d| !d.is_none());
            if let Some((k, _)) = kwargs.first() {
                return Err(bad(format!(
                    "Unexpected keyword argument {}",
                    pyfmt::repr(k)
                )));
            }
            let parts = attr_parts(&attribute);
            for item in &items {
                out.push(get_path(item, &parts, default.as_ref())?);
            }
            return Ok(List::value(out));
        }
    }
    let mut positional = positional.into_iter();
    let name = positional
        .next()
        .ok_or_else(|| bad("map requires a filter argument"))?;
    let name = name
        .as_str()
        .ok_or_else(|| Error::from(ErrorKind::UnknownFilter))?
        .to_string();
    let mut rest: Vec<Value> = positional.collect();
    if !kwargs.is_empty() {
        let kwargs: Kwargs = kwargs
            .into_iter()
            .map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), v))
            .collect();
        rest.push(Value::from(kwargs));
    }
    for item in items {
        let mut call = vec![item];
        call.extend(rest.iter().cloned());
        out.push(state.apply_filter(&name, &call)?);
    }
    Ok(List::value(out))
}

fn register_text_filters(env: &mut Environment<'_>) {
    env.add_filter(
        "center",
        |state: &State, v: Value, args: Args| -> Result<String, Error> {
            let a = bind("center", args, ["width"], 0)?;
            let s = text(state, &v)?;
            let width = int_arg(&a[0], 80)?;
            if width > 1 << 20 {
                return Err(bad(format!("center: a width of {width} is too large")));
            }
            Ok(str_center(&s, usize::try_from(width).unwrap_or(0)))
        },
    );
    let escape = |state: &State, v: Value| -> Result<Value, Error> {
        if v.is_safe() {
            return Ok(v);
        }
        Ok(Value::from_safe_string(escape_value(state, &v)?))
    };
    env.add_filter("escape", escape);
    env.add_filter("e", escape);
    env.add_filter(
        "forceescape",
        |state: &State, v: Value| -> Result<Value, Error> {
            Ok(Value::from_safe_string(html_escape(&text(state, &v)?)))
        },
    );
    env.add_filter("indent", indent);
    env.add_filter(
        "string",
        |state: &State, v: Value| -> Result<Value, Error> {
            if v.kind() == ValueKind::String {
                return Ok(v);
            }
            Ok(Value::from(text(state, &v)?))
        },
    );
    env.add_filter(
        "striptags",
        |state: &State, v: Value| -> Result<String, Error> {
            Ok(html::unescape(&html::strip_tags(&text(state, &v)?)))
        },
    );
    env.add_filter("truncate", truncate);
    env.add_filter("urlencode", urlencode);
    env.add_filter("urlize", urlize);
    env.add_filter(
        "wordcount",
        |state: &State, v: Value| -> Result<usize, Error> {
            let s = text(state, &v)?;
            let mut count = 0;
            let mut in_word = false;
            for c in s.chars() {
                let w = is_word(c);
                if w && !in_word {
                    count += 1;
                }
                in_word = w;
            }
            Ok(count)
        },
    );
    env.add_filter("wordwrap", wordwrap);
    env.add_filter("xmlattr", xmlattr);
}

/// Jinja2's `indent(s, width=4, first=False, blank=False)`.
fn indent(v: Value, args: Args) -> Result<Value, Error> {
    let a = bind("indent", args, ["width", "first", "blank"], 0)?;
    let Some(s) = v.as_str() else {
        if v.is_undefined() {
            return Err(undefined());
        }
        return Err(bad(format!(
            "unsupported operand type(s) for +=: '{}' and 'str'",
            py_type(&v)
        )));
    };
    let indention = match &a[0] {
        Some(w) if w.kind() == ValueKind::String => w.as_str().unwrap_or_default().to_string(),
        w => {
            let width = int_arg(w, 4)?;
            if width > 1 << 20 {
                return Err(bad(format!("indent: a width of {width} is too large")));
            }
            " ".repeat(usize::try_from(width).unwrap_or(0))
        }
    };
    let lines = py_splitlines(&format!("{s}\n"), false);
    let mut rv = if flag(&a[2], false) {
        lines.join(&format!("\n{indention}"))
    } else {
        let mut lines = lines.into_iter();
        let mut rv = lines.next().unwrap_or_default();
        let rest: Vec<String> = lines
            .map(|l| {
                if l.is_empty() {
                    l
                } else {
                    format!("{indention}{l}")
                }
            })
            .collect();
        if !rest.is_empty() {
            rv.push('\n');
            rv.push_str(&rest.join("\n"));
        }
        rv
    };
    if flag(&a[1], false) {
        rv = format!("{indention}{rv}");
    }
    Ok(if v.is_safe() {
        Value::from_safe_string(rv)
    } else {
        Value::from(rv)
    })
}

/// Jinja2's `truncate(s, length=255, killwords=False, end='...', leeway=5)`.
fn truncate(state: &State, v: Value, args: Args) -> Result<Value, Error> {
    let a = bind(
        "truncate",
        args,
        ["length", "killwords", "end", "leeway"],
        0,
    )?;
    let length = int_arg(&a[0], 255)?;
    let end = match &a[2] {
        None => "...".to_string(),
        Some(e) => text(state, e)?,
    };
    let leeway = int_arg(&a[3], 5)?;
    let end_len = end.chars().count() as i128;
    if length < end_len {
        return Err(bad(format!("expected length >= {end_len}, got {length}")));
    }
    if leeway < 0 {
        return Err(bad(format!("expected leeway >= 0, got {leeway}")));
    }
    let Some(s) = v.as_str() else {
        return match v.kind() {
            ValueKind::Undefined if strict(state) => Err(undefined()),
            ValueKind::Undefined => Ok(v),
            ValueKind::Seq | ValueKind::Map
                if v.len().is_some_and(|n| n as i128 <= length + leeway) =>
            {
                Ok(v)
            }
            _ => Err(bad(format!("cannot truncate a '{}'", py_type(&v)))),
        };
    };
    let chars: Vec<char> = s.chars().collect();
    if chars.len() as i128 <= length + leeway {
        return Ok(v);
    }
    let cut: String = chars[..(length - end_len) as usize].iter().collect();
    if flag(&a[1], false) {
        return Ok(Value::from(cut + &end));
    }
    let head = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    Ok(Value::from(format!("{head}{end}")))
}

/// Jinja2's `url_quote`: `urllib.parse.quote` of the UTF-8 text, `/` kept unless for a query
/// string, where spaces become `+`.
fn url_quote(s: &str, for_qs: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) || (b == b'/' && !for_qs) {
            out.push(b as char);
        } else if b == b' ' && for_qs {
            out.push('+');
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Jinja2's `urlencode(value)`: a string quoted, or a mapping or pairs as a query string.
fn urlencode(state: &State, v: Value) -> Result<String, Error> {
    let pairs = match v.kind() {
        ValueKind::String | ValueKind::None | ValueKind::Bool | ValueKind::Number => {
            return Ok(url_quote(&pyfmt::str(&v), false))
        }
        ValueKind::Map => mapping_items(&v)?,
        _ => {
            let mut pairs = Vec::new();
            for item in iter_items(state, &v)? {
                let parts = iter_items(state, &item)?;
                if parts.len() != 2 {
                    return Err(bad(format!(
                        "expected 2 values to unpack, got {}",
                        parts.len()
                    )));
                }
                pairs.push((parts[0].clone(), parts[1].clone()));
            }
            pairs
        }
    };
    let mut out = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        out.push(format!(
            "{}={}",
            url_quote(&text(state, &k)?, true),
            url_quote(&text(state, &v)?, true)
        ));
    }
    Ok(out.join("&"))
}

/// Jinja2's `xmlattr(d, autospace=True)`.
fn xmlattr(state: &State, v: Value, args: Args) -> Result<String, Error> {
    let a = bind("xmlattr", args, ["autospace"], 0)?;
    let mut items = Vec::new();
    for (key, value) in mapping_items(&v)? {
        if value.is_none() || value.is_undefined() {
            continue;
        }
        let name = key
            .as_str()
            .ok_or_else(|| bad("expected string or bytes-like object"))?;
        if name.chars().any(|c| {
            matches!(
                c,
                ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c' | '/' | '>' | '='
            )
        }) {
            return Err(bad(format!(
                "Invalid character in attribute name: {}",
                pyfmt::repr_str(name)
            )));
        }
        items.push(format!(
            "{}=\"{}\"",
            escape_value(state, &key)?,
            escape_value(state, &value)?
        ));
    }
    let rv = items.join(" ");
    Ok(if flag(&a[0], true) && !rv.is_empty() {
        format!(" {rv}")
    } else {
        rv
    })
}

/// Jinja2's `urlize(value, trim_url_limit=None, nofollow=False, target=None, rel=None,
/// extra_schemes=None)` with the default policies (`rel="noopener"`).
fn urlize(state: &State, v: Value, args: Args) -> Result<String, Error> {
    let a = bind(
        "urlize",
        args,
        [
            "trim_url_limit",
            "nofollow",
            "target",
            "rel",
            "extra_schemes",
        ],
        0,
    )?;
    let trim_limit = match &a[0] {
        Some(l) if !l.is_none() => Some(int_arg(&Some(l.clone()), 0)?),
        _ => None,
    };
    let mut rel_parts: BTreeSet<String> = match &a[3] {
        Some(r) if r.is_true() => text(state, r)?
            .split(py_isspace)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect(),
        _ => BTreeSet::new(),
    };
    if flag(&a[1], false) {
        rel_parts.insert("nofollow".into());
    }
    rel_parts.insert("noopener".into());
    let rel = rel_parts.into_iter().collect::<Vec<_>>().join(" ");
    let target = match &a[2] {
        Some(t) if t.is_true() => Some(text(state, t)?),
        _ => None,
    };
    let extra_schemes = match &a[4] {
        Some(s) if !s.is_none() => {
            let mut schemes = Vec::new();
            for scheme in iter_items(state, s)? {
                let scheme = text(state, &scheme)?;
                if !urlize_re::scheme().is_match(&scheme) {
                    return Err(bad(format!(
                        "{} is not a valid URI scheme prefix.",
                        pyfmt::repr_str(&scheme)
                    )));
                }
                schemes.push(scheme);
            }
            Some(schemes)
        }
        _ => None,
    };
    let trim_url = |x: &str| -> String {
        let Some(limit) = trim_limit else {
            return x.to_string();
        };
        let len = x.chars().count() as i128;
        if len <= limit {
            return x.to_string();
        }
        let end = if limit < 0 {
            (len + limit).max(0)
        } else {
            limit
        };
        format!("{}...", x.chars().take(end as usize).collect::<String>())
    };
    let rel_attr = format!(" rel=\"{}\"", html_escape(&rel));
    let target_attr =
        target.map_or_else(String::new, |t| format!(" target=\"{}\"", html_escape(&t)));
    let escaped = escape_value(state, &v)?;
    let mut out = String::with_capacity(escaped.len());
    let mut last = 0;
    let mut words = Vec::new();
    for m in urlize_re::space().find_iter(&escaped) {
        words.push(&escaped[last..m.start()]);
        words.push(m.as_str());
        last = m.end();
    }
    words.push(&escaped[last..]);
    for word in words {
        let (mut head, mut middle, mut tail) = ("", word.to_string(), String::new());
        if let Some(m) = urlize_re::head().find(&middle) {
            head = &word[..m.end()];
            middle = word[m.end()..].to_string();
        }
        if middle.ends_with([')', '>', '.', ',', '\n']) || middle.ends_with("&gt;") {
            if let Some(m) = urlize_re::tail().find(&middle) {
                tail = middle[m.start()..].to_string();
                middle.truncate(m.start());
            }
        }
        for (start, end) in [("(", ")"), ("<", ">"), ("&lt;", "&gt;")] {
            let start_count = middle.matches(start).count();
            if start_count <= middle.matches(end).count() {
                continue;
            }
            for _ in 0..start_count.min(tail.matches(end).count()) {
                let at = tail.find(end).map_or(0, |i| i + end.len());
                middle.push_str(&tail[..at]);
                tail = tail[at..].to_string();
            }
        }
        if urlize_re::http().is_match(&middle) {
            let href = if middle.starts_with("https://") || middle.starts_with("http://") {
                middle.clone()
            } else {
                format!("https://{middle}")
            };
            middle = format!(
                "<a href=\"{href}\"{rel_attr}{target_attr}>{}</a>",
                trim_url(&middle)
            );
        } else if middle.starts_with("mailto:") && urlize_re::email().is_match(&middle[7..]) {
            middle = format!("<a href=\"{middle}\">{}</a>", &middle[7..]);
        } else if middle.contains('@')
            && !middle.starts_with("www.")
            && !middle.starts_with('@')
            && !middle.contains(':')
            && urlize_re::email().is_match(&middle)
        {
            middle = format!("<a href=\"mailto:{middle}\">{middle}</a>");
        } else if let Some(schemes) = &extra_schemes {
            for scheme in schemes {
                if middle != *scheme && middle.starts_with(scheme.as_str()) {
                    middle = format!("<a href=\"{middle}\"{rel_attr}{target_attr}>{middle}</a>");
                }
            }
        }
        out.push_str(head);
        out.push_str(&middle);
        out.push_str(&tail);
    }
    Ok(out)
}

/// The regular expressions of Jinja2's `urlize`.
mod urlize_re {
    use super::{OnceLock, Regex};

    fn compiled(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
        cell.get_or_init(|| Regex::new(pattern).expect("valid pattern"))
    }

    pub(super) fn space() -> &'static Regex {
        static RE: OnceLock<Regex> = OnceLock::new();
        compiled(&RE, r"\s+")
    }

    pub(super) fn head() -> &'static Regex {
        static RE: OnceLock<Regex> = OnceLock::new();
        compiled(&RE, r"^(?:[(<]|&lt;)+")
    }

    pub(super) fn tail() -> &'static Regex {
        static RE: OnceLock<Regex> = OnceLock::new();
        compiled(&RE, r"(?:[)>.,\n]|&gt;)+$")
    }

    pub(super) fn http() -> &'static Regex {
        static RE: OnceLock<Regex> = OnceLock::new();
        compiled(
            &RE,
            r"(?i)^(?:(?:https?://|www\.)(?:(?:[\w%-]+\.)+)?(?:[a-z]{2,63}|xn--[\w%]{2,59})|(?:[\w%-]{2,63}\.)+(?:com|net|int|edu|gov|org|info|mil)|(?:https?://)(?:(?:\d{1,3})(?:\.\d{1,3}){3}|\[(?:[\da-f]{0,4}:){2}(?:[\da-f]{0,4}:?){1,6}\]))(?::\d{1,5})?(?:[/?#]\S*)?$",
        )
    }

    pub(super) fn email() -> &'static Regex {
        static RE: OnceLock<Regex> = OnceLock::new();
        compiled(&RE, r"^\S+@\w[\w.-]*\.\w+$")
    }

    pub(super) fn scheme() -> &'static Regex {
        static RE: OnceLock<Regex> = OnceLock::new();
        compiled(&RE, r"^[\w.+-]{2,}:/{0,2}$")
    }
}

/// Jinja2's `wordwrap(s, width=79, break_long_words=True, wrapstring=None,
/// break_on_hyphens=True)`: each line wrapped by Python's `textwrap`.
fn wordwrap(state: &State, v: Value, args: Args) -> Result<String, Error> {
    let a = bind(
        "wordwrap",
        args,
        [
            "width",
            "break_long_words",
            "wrapstring",
            "break_on_hyphens",
        ],
        0,
    )?;
    let Some(s) = v.as_str() else {
        if v.is_undefined() {
            return Err(undefined());
        }
        return Err(bad(format!(
            "'{}' object has no attribute 'splitlines'",
            py_type(&v)
        )));
    };
    let width = int_arg(&a[0], 79)?;
    let wrapstring = match &a[2] {
        Some(w) if !w.is_none() => text(state, w)?,
        _ => "\n".to_string(),
    };
    let wrapper = textwrap::Wrapper {
        width,
        break_long_words: flag(&a[1], true),
        // textwrap's `break_on_hyphens is True` picks the splitting; its truth the breaking.
        split_on_hyphens: a[3]
            .as_ref()
            .is_none_or(|h| h.kind() == ValueKind::Bool && h.is_true()),
        break_on_hyphens: flag(&a[3], true),
    };
    let mut out = Vec::new();
    for line in py_splitlines(s, false) {
        out.push(wrapper.wrap(&line)?.join(&wrapstring));
    }
    Ok(out.join(&wrapstring))
}

/// Python's `str.center(width)`: the odd space goes left when `width` is odd, as CPython
/// places it.
pub fn str_center(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n >= width {
        return text.to_string();
    }
    let marg = width - n;
    let left = marg / 2 + (marg & width & 1);
    format!("{}{text}{}", " ".repeat(left), " ".repeat(marg - left))
}

/// Python's `textwrap.wrap(text, width)` with its default options: tabs expanded, each
/// whitespace character a space, long words broken, hyphenated words broken after their
/// hyphens (Salt's `slsutil.banner` wraps its text so).
pub fn wrap_text(text: &str, width: usize) -> Vec<String> {
    let mut expanded = String::with_capacity(text.len());
    let mut column = 0;
    for c in text.chars() {
        match c {
            '\t' => {
                let n = 8 - column % 8;
                expanded.extend(std::iter::repeat_n(' ', n));
                column += n;
            }
            '\n' | '\r' => {
                expanded.push(' ');
                column = 0;
            }
            '\x0b' | '\x0c' => {
                expanded.push(' ');
                column += 1;
            }
            c => {
                expanded.push(c);
                column += 1;
            }
        }
    }
    textwrap::Wrapper {
        width: i128::try_from(width.max(1)).unwrap_or(i128::MAX),
        break_long_words: true,
        split_on_hyphens: true,
        break_on_hyphens: true,
    }
    .wrap(&expanded)
    .unwrap_or_default()
}

/// Python's `textwrap.TextWrapper` with whitespace dropped at line ends and no indents (Jinja2's
/// `wordwrap` also leaves tabs and whitespace as they are).
mod textwrap {
    use super::{bad, is_word, py_isspace, Error};

    pub(super) struct Wrapper {
        pub(super) width: i128,
        pub(super) break_long_words: bool,
        /// Split chunks with `wordsep_re` (hyphenated words, em-dashes) rather than on
        /// whitespace only.
        pub(super) split_on_hyphens: bool,
        pub(super) break_on_hyphens: bool,
    }

    /// textwrap's whitespace: `\t\n\x0b\x0c\r` and space.
    fn is_ws(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ')
    }

    /// `[^\d\W]`
    fn is_letter(c: char) -> bool {
        is_word(c) && !c.is_numeric()
    }

    /// `[\w!"'&.,?]`
    fn is_word_punct(c: char) -> bool {
        is_word(c) || "!\"'&.,?".contains(c)
    }

    fn at(text: &[char], i: usize) -> Option<char> {
        text.get(i).copied()
    }

    /// `-{2,}(?=\w)` at `i`: where the dashes end.
    fn dashes_then_word(text: &[char], i: usize) -> Option<usize> {
        let mut j = i;
        while at(text, j) == Some('-') {
            j += 1;
        }
        (j - i >= 2 && at(text, j).is_some_and(is_word)).then_some(j)
    }

    /// The end of the chunk `wordsep_re` matches at `i` (a non-whitespace character).
    fn word_end(text: &[char], i: usize) -> usize {
        let letter = |k: usize| at(text, k).is_some_and(is_letter);
        let mut e = i + 1;
        loop {
            // A hyphen inside a hyphenated word ends the chunk after it.
            if at(text, e) == Some('-') {
                let behind = (e >= 2 && letter(e - 2) && letter(e - 1))
                    || (e >= 3 && letter(e - 3) && at(text, e - 2) == Some('-') && letter(e - 1));
                let ahead = letter(e + 1)
                    && (letter(e + 2) || (at(text, e + 2) == Some('-') && letter(e + 3)));
                if behind && ahead {
                    return e + 1;
                }
            }
            match at(text, e) {
                None => return e,
                Some(c) if is_ws(c) => return e,
                _ => {}
            }
            // An em-dash after word punctuation.
            if is_word_punct(text[e - 1]) && dashes_then_word(text, e).is_some() {
                return e;
            }
            e += 1;
        }
    }

    impl Wrapper {
        fn split(&self, text: &[char]) -> Vec<Vec<char>> {
            let mut chunks = Vec::new();
            let mut i = 0;
            while i < text.len() {
                let start = i;
                if is_ws(text[i]) {
                    while i < text.len() && is_ws(text[i]) {
                        i += 1;
                    }
                } else if !self.split_on_hyphens {
                    while i < text.len() && !is_ws(text[i]) {
                        i += 1;
                    }
                } else if let Some(end) = (i > 0 && is_word_punct(text[i - 1]))
                    .then(|| dashes_then_word(text, i))
                    .flatten()
                {
                    i = end;
                } else {
                    i = word_end(text, i);
                }
                chunks.push(text[start..i].to_vec());
            }
            chunks
        }

        /// `textwrap.wrap(text)`.
        pub(super) fn wrap(&self, text: &str) -> Result<Vec<String>, Error> {
            let chars: Vec<char> = text.chars().collect();
            let mut chunks = self.split(&chars);
            if self.width <= 0 {
                return Err(bad(format!("invalid width {} (must be > 0)", self.width)));
            }
            let width = usize::try_from(self.width).unwrap_or(usize::MAX);
            let blank = |c: &[char]| c.iter().all(|c| py_isspace(*c));
            chunks.reverse();
            let mut lines = Vec::new();
            while !chunks.is_empty() {
                let mut line: Vec<Vec<char>> = Vec::new();
                let mut len = 0;
                if !lines.is_empty() && chunks.last().is_some_and(|c| blank(c)) {
                    chunks.pop();
                }
                while let Some(chunk) = chunks.last() {
                    if len + chunk.len() > width {
                        break;
                    }
                    len += chunk.len();
                    line.extend(chunks.pop());
                }
                if chunks.last().is_some_and(|c| c.len() > width) {
                    self.handle_long_word(&mut chunks, &mut line, len, width);
                }
                if line.last().is_some_and(|c| blank(c)) {
                    line.pop();
                }
                if !line.is_empty() {
                    lines.push(line.concat().into_iter().collect());
                }
            }
            Ok(lines)
        }

        fn handle_long_word(
            &self,
            chunks: &mut Vec<Vec<char>>,
            line: &mut Vec<Vec<char>>,
            len: usize,
            width: usize,
        ) {
            let space_left = if width < 1 { 1 } else { width - len };
            if self.break_long_words {
                let Some(chunk) = chunks.last_mut() else {
                    return;
                };
                let mut end = space_left;
                if self.break_on_hyphens && chunk.len() > space_left {
                    if let Some(h) = chunk[..space_left].iter().rposition(|c| *c == '-') {
                        if h > 0 && chunk[..h].iter().any(|c| *c != '-') {
                            end = h + 1;
                        }
                    }
                }
                let rest = chunk.split_off(end);
                line.push(std::mem::replace(chunk, rest));
            } else if line.is_empty() {
                line.extend(chunks.pop());
            }
        }
    }
}

/// MarkupSafe's `striptags` and Python's `html.unescape`.
mod html {
    use super::{py_isspace, OnceLock, Regex};

    /// Tags and comments removed, whitespace runs collapsed to one space.
    pub(super) fn strip_tags(value: &str) -> String {
        let mut kept = String::new();
        let mut pos = 0;
        while let Some(found) = value[pos..].find('<') {
            let start = pos + found;
            let end = if value[start..].starts_with("<!--") {
                match value[start + 4..].find("-->") {
                    Some(e) => start + 4 + e + 3,
                    None => break,
                }
            } else {
                match value[start..].find('>') {
                    Some(e) => start + e + 1,
                    None => break,
                }
            };
            kept.push_str(&value[pos..start]);
            pos = end;
        }
        let value = if pos > 0 {
            kept.push_str(&value[pos..]);
            kept.as_str()
        } else {
            value
        };
        value
            .split(py_isspace)
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The HTML 4 entities (and `apos`) Python's `html.unescape` knows, and whether each is
    /// also recognised without its semicolon.
    #[rustfmt::skip]
    const ENTITIES: &[(&str, u32, bool)] = &[
    ("AElig", 198, true), ("AMP", 38, true), ("Aacute", 193, true), ("Acirc", 194, true),
    ("Agrave", 192, true), ("Alpha", 913, false), ("Aring", 197, true), ("Atilde", 195, true),
    ("Auml", 196, true), ("Beta", 914, false), ("COPY", 169, true), ("Ccedil", 199, true),
    ("Chi", 935, false), ("Dagger", 8225, false), ("Delta", 916, false), ("ETH", 208, true),
    ("Eacute", 201, true), ("Ecirc", 202, true), ("Egrave", 200, true), ("Epsilon", 917, false),
    ("Eta", 919, false), ("Euml", 203, true), ("GT", 62, true), ("Gamma", 915, false),
    ("Iacute", 205, true), ("Icirc", 206, true), ("Igrave", 204, true), ("Iota", 921, false),
    ("Iuml", 207, true), ("Kappa", 922, false), ("LT", 60, true), ("Lambda", 923, false),
    ("Mu", 924, false), ("Ntilde", 209, true), ("Nu", 925, false), ("OElig", 338, false),
    ("Oacute", 211, true), ("Ocirc", 212, true), ("Ograve", 210, true), ("Omega", 937, false),
    ("Omicron", 927, false), ("Oslash", 216, true), ("Otilde", 213, true), ("Ouml", 214, true),
    ("Phi", 934, false), ("Pi", 928, false), ("Prime", 8243, false), ("Psi", 936, false),
    ("QUOT", 34, true), ("REG", 174, true), ("Rho", 929, false), ("Scaron", 352, false),
    ("Sigma", 931, false), ("THORN", 222, true), ("Tau", 932, false), ("Theta", 920, false),
    ("Uacute", 218, true), ("Ucirc", 219, true), ("Ugrave", 217, true), ("Upsilon", 933, false),
    ("Uuml", 220, true), ("Xi", 926, false), ("Yacute", 221, true), ("Yuml", 376, false),
    ("Zeta", 918, false), ("aacute", 225, true), ("acirc", 226, true), ("acute", 180, true),
    ("aelig", 230, true), ("agrave", 224, true), ("alefsym", 8501, false), ("alpha", 945, false),
    ("amp", 38, true), ("and", 8743, false), ("ang", 8736, false), ("apos", 39, false),
    ("aring", 229, true), ("asymp", 8776, false), ("atilde", 227, true), ("auml", 228, true),
    ("bdquo", 8222, false), ("beta", 946, false), ("brvbar", 166, true), ("bull", 8226, false),
    ("cap", 8745, false), ("ccedil", 231, true), ("cedil", 184, true), ("cent", 162, true),
    ("chi", 967, false), ("circ", 710, false), ("clubs", 9827, false), ("cong", 8773, false),
    ("copy", 169, true), ("crarr", 8629, false), ("cup", 8746, false), ("curren", 164, true),
    ("dArr", 8659, false), ("dagger", 8224, false), ("darr", 8595, false), ("deg", 176, true),
    ("delta", 948, false), ("diams", 9830, false), ("divide", 247, true), ("eacute", 233, true),
    ("ecirc", 234, true), ("egrave", 232, true), ("empty", 8709, false), ("emsp", 8195, false),
    ("ensp", 8194, false), ("epsilon", 949, false), ("equiv", 8801, false), ("eta", 951, false),
    ("eth", 240, true), ("euml", 235, true), ("euro", 8364, false), ("exist", 8707, false),
    ("fnof", 402, false), ("forall", 8704, false), ("frac12", 189, true), ("frac14", 188, true),
    ("frac34", 190, true), ("frasl", 8260, false), ("gamma", 947, false), ("ge", 8805, false),
    ("gt", 62, true), ("hArr", 8660, false), ("harr", 8596, false), ("hearts", 9829, false),
    ("hellip", 8230, false), ("iacute", 237, true), ("icirc", 238, true), ("iexcl", 161, true),
    ("igrave", 236, true), ("image", 8465, false), ("infin", 8734, false), ("int", 8747, false),
    ("iota", 953, false), ("iquest", 191, true), ("isin", 8712, false), ("iuml", 239, true),
    ("kappa", 954, false), ("lArr", 8656, false), ("lambda", 955, false), ("lang", 10216, false),
    ("laquo", 171, true), ("larr", 8592, false), ("lceil", 8968, false), ("ldquo", 8220, false),
    ("le", 8804, false), ("lfloor", 8970, false), ("lowast", 8727, false), ("loz", 9674, false),
    ("lrm", 8206, false), ("lsaquo", 8249, false), ("lsquo", 8216, false), ("lt", 60, true),
    ("macr", 175, true), ("mdash", 8212, false), ("micro", 181, true), ("middot", 183, true),
    ("minus", 8722, false), ("mu", 956, false), ("nabla", 8711, false), ("nbsp", 160, true),
    ("ndash", 8211, false), ("ne", 8800, false), ("ni", 8715, false), ("not", 172, true),
    ("notin", 8713, false), ("nsub", 8836, false), ("ntilde", 241, true), ("nu", 957, false),
    ("oacute", 243, true), ("ocirc", 244, true), ("oelig", 339, false), ("ograve", 242, true),
    ("oline", 8254, false), ("omega", 969, false), ("omicron", 959, false),
    ("oplus", 8853, false), ("or", 8744, false), ("ordf", 170, true), ("ordm", 186, true),
    ("oslash", 248, true), ("otilde", 245, true), ("otimes", 8855, false), ("ouml", 246, true),
    ("para", 182, true), ("part", 8706, false), ("permil", 8240, false), ("perp", 8869, false),
    ("phi", 966, false), ("pi", 960, false), ("piv", 982, false), ("plusmn", 177, true),
    ("pound", 163, true), ("prime", 8242, false), ("prod", 8719, false), ("prop", 8733, false),
    ("psi", 968, false), ("quot", 34, true), ("rArr", 8658, false), ("radic", 8730, false),
    ("rang", 10217, false), ("raquo", 187, true), ("rarr", 8594, false), ("rceil", 8969, false),
    ("rdquo", 8221, false), ("real", 8476, false), ("reg", 174, true), ("rfloor", 8971, false),
    ("rho", 961, false), ("rlm", 8207, false), ("rsaquo", 8250, false), ("rsquo", 8217, false),
    ("sbquo", 8218, false), ("scaron", 353, false), ("sdot", 8901, false), ("sect", 167, true),
    ("shy", 173, true), ("sigma", 963, false), ("sigmaf", 962, false), ("sim", 8764, false),
    ("spades", 9824, false), ("sub", 8834, false), ("sube", 8838, false), ("sum", 8721, false),
    ("sup", 8835, false), ("sup1", 185, true), ("sup2", 178, true), ("sup3", 179, true),
    ("supe", 8839, false), ("szlig", 223, true), ("tau", 964, false), ("there4", 8756, false),
    ("theta", 952, false), ("thetasym", 977, false), ("thinsp", 8201, false),
    ("thorn", 254, true), ("tilde", 732, false), ("times", 215, true), ("trade", 8482, false),
    ("uArr", 8657, false), ("uacute", 250, true), ("uarr", 8593, false), ("ucirc", 251, true),
    ("ugrave", 249, true), ("uml", 168, true), ("upsih", 978, false), ("upsilon", 965, false),
    ("uuml", 252, true), ("weierp", 8472, false), ("xi", 958, false), ("yacute", 253, true),
    ("yen", 165, true), ("yuml", 255, true), ("zeta", 950, false), ("zwj", 8205, false),
    ("zwnj", 8204, false),
    ];

    /// What Python's `html.unescape` makes of the windows-1252 range of numeric references.
    const CP1252: [char; 32] = [
        '\u{20ac}', '\u{81}', '\u{201a}', '\u{192}', '\u{201e}', '\u{2026}', '\u{2020}',
        '\u{2021}', '\u{2c6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8d}', '\u{17d}',
        '\u{8f}', '\u{90}', '\u{2018}', '\u{2019}', '\u{201c}', '\u{201d}', '\u{2022}', '\u{2013}',
        '\u{2014}', '\u{2dc}', '\u{2122}', '\u{161}', '\u{203a}', '\u{153}', '\u{9d}', '\u{17e}',
        '\u{178}',
    ];

    fn entity(name: &str, need_semicolon_free: bool) -> Option<char> {
        let i = ENTITIES.binary_search_by(|(n, _, _)| n.cmp(&name)).ok()?;
        let (_, code, legacy) = ENTITIES[i];
        if need_semicolon_free && !legacy {
            return None;
        }
        char::from_u32(code)
    }

    fn numeric(digits: &str) -> String {
        let (radix, digits) = match digits.strip_prefix(['x', 'X']) {
            Some(hex) => (16, hex),
            None => (10, digits),
        };
        let digits = digits.trim_end_matches(';');
        let num = digits.chars().fold(0u32, |n, c| {
            n.saturating_mul(radix)
                .saturating_add(c.to_digit(radix).unwrap_or(0))
        });
        match num {
            0 => return '\u{fffd}'.to_string(),
            0x0d => return '\r'.to_string(),
            0x80..=0x9f => return CP1252[(num - 0x80) as usize].to_string(),
            0xd800..=0xdfff | 0x110000.. => return '\u{fffd}'.to_string(),
            _ => {}
        }
        let invalid = matches!(num, 0x1..=0x8 | 0xb | 0xe..=0x1f | 0x7f..=0x9f | 0xfdd0..=0xfdef)
            || num & 0xfffe == 0xfffe;
        if invalid {
            return String::new();
        }
        char::from_u32(num).map(String::from).unwrap_or_default()
    }

    fn charref(s: &str) -> String {
        if let Some(digits) = s.strip_prefix('#') {
            return numeric(digits);
        }
        if let Some(name) = s.strip_suffix(';') {
            if let Some(c) = entity(name, false) {
                return c.to_string();
            }
        } else if let Some(c) = entity(s, true) {
            return c.to_string();
        }
        // The longest entity (recognised without a semicolon) the text starts with.
        let bounds: Vec<usize> = s.char_indices().map(|(i, _)| i).skip(2).collect();
        for &end in bounds.iter().rev() {
            if let Some(c) = entity(&s[..end], true) {
                return format!("{c}{}", &s[end..]);
            }
        }
        format!("&{s}")
    }

    /// Python's `html.unescape`.
    pub(super) fn unescape(s: &str) -> String {
        if !s.contains('&') {
            return s.to_string();
        }
        static RE: OnceLock<Regex> = OnceLock::new();
        let re = RE.get_or_init(|| {
            Regex::new(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\x0c <&#;]{1,32};?)")
                .expect("valid pattern")
        });
        re.replace_all(s, |caps: &regex::Captures<'_>| charref(&caps[1]))
            .into_owned()
    }
}

/// Python's `pprint.pformat` (width 80, indent 1, dicts sorted) of a template value: the
/// printer of [`brine_protocol::pprint`], shown the value's parts through its `Pretty`.
pub(crate) mod pprint {
    use super::{map_entries, py_cmp, py_type, pyfmt, seq_items};
    use brine_protocol::pprint::{Pretty, Shape};
    use minijinja::value::{Value, ValueKind};
    use std::cmp::Ordering;

    /// `pprint._safe_key`: Python's order, else by type name.
    fn safe_cmp(a: &Value, b: &Value) -> Ordering {
        py_cmp(a, b).unwrap_or_else(|_| py_type(a).cmp(py_type(b)))
    }

    fn sorted_entries(v: &Value) -> Vec<(Value, Value)> {
        let mut entries = map_entries(v).unwrap_or_default();
        entries.sort_by(|(a, x), (b, y)| safe_cmp(a, b).then_with(|| safe_cmp(x, y)));
        entries
    }

    /// `pprint.saferepr`: `repr` with dicts sorted.
    fn safe_repr(v: &Value) -> String {
        match v.kind() {
            ValueKind::Map => {
                let items: Vec<String> = sorted_entries(v)
                    .iter()
                    .map(|(k, v)| format!("{}: {}", safe_repr(k), safe_repr(v)))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<String> = seq_items(v)
                    .unwrap_or_default()
                    .iter()
                    .map(safe_repr)
                    .collect();
                if !v.is_tuple() {
                    format!("[{}]", items.join(", "))
                } else if items.len() == 1 {
                    format!("({},)", items[0])
                } else {
                    format!("({})", items.join(", "))
                }
            }
            _ => pyfmt::repr(v),
        }
    }

    struct Py(Value);

    impl Pretty for Py {
        fn repr(&self) -> String {
            safe_repr(&self.0)
        }

        fn shape(&self) -> Shape<Py> {
            match self.0.kind() {
                ValueKind::Map => Shape::Dict(
                    sorted_entries(&self.0)
                        .into_iter()
                        .map(|(k, v)| (safe_repr(&k), Py(v)))
                        .collect(),
                ),
                ValueKind::Seq | ValueKind::Iterable => Shape::Seq {
                    items: seq_items(&self.0)
                        .unwrap_or_default()
                        .into_iter()
                        .map(Py)
                        .collect(),
                    tuple: self.0.is_tuple(),
                },
                ValueKind::String => Shape::Str(self.0.as_str().unwrap_or_default().to_string()),
                _ => Shape::Atom,
            }
        }
    }

    pub(crate) fn pformat(v: &Value) -> String {
        brine_protocol::pprint::pformat(&Py(v.clone()), 1)
    }
}

/// Python's `%` of numbers (the sign of the divisor).
fn py_mod(a: &Value, b: &Value) -> Result<Num, Error> {
    if a.is_undefined() || b.is_undefined() {
        return Err(undefined());
    }
    let (Some(x), Some(y)) = (num(a), num(b)) else {
        return Err(bad(format!(
            "unsupported operand type(s) for %: '{}' and '{}'",
            py_type(a),
            py_type(b)
        )));
    };
    match (x, y) {
        (_, Num::Int(0)) => Err(bad("integer modulo by zero")),
        (Num::Int(x), Num::Int(y)) => {
            let r = x % y;
            Ok(Num::Int(if r != 0 && (r < 0) != (y < 0) {
                r + y
            } else {
                r
            }))
        }
        (x, y) => {
            let (x, y) = (x.as_f64(), y.as_f64());
            if y == 0.0 {
                return Err(bad("float modulo"));
            }
            let r = x % y;
            Ok(Num::Float(if r != 0.0 && (r < 0.0) != (y < 0.0) {
                r + y
            } else if r == 0.0 {
                0.0f64.copysign(y)
            } else {
                r
            }))
        }
    }
}

fn mod_is(a: &Value, b: &Value, want: i128) -> Result<bool, Error> {
    Ok(num_cmp(py_mod(a, b)?, Num::Int(want)) == Some(Ordering::Equal))
}

/// Python's `str.islower()`/`str.isupper()`.
fn cased_as(s: &str, lower: bool) -> bool {
    let title = |c: char| !c.is_uppercase() && !c.is_lowercase() && c.to_lowercase().ne([c]);
    let mut cased = false;
    for c in s.chars() {
        let (same, other) = if lower {
            (c.is_lowercase(), c.is_uppercase())
        } else {
            (c.is_uppercase(), c.is_lowercase())
        };
        if other || title(c) {
            return false;
        }
        cased |= same;
    }
    cased
}

/// Python's `value in container`.
fn is_in(state: &State, v: &Value, container: &Value) -> Result<bool, Error> {
    let strict = strict(state);
    match container.kind() {
        ValueKind::Undefined if strict => Err(undefined()),
        ValueKind::Undefined => Ok(false),
        ValueKind::String => match v.as_str() {
            Some(s) => Ok(container.as_str().unwrap_or_default().contains(s)),
            None => Err(bad(format!(
                "'in <string>' requires string as left operand, not {}",
                py_type(v)
            ))),
        },
        ValueKind::Seq | ValueKind::Iterable => {
            let items = seq_items(container).unwrap_or_default();
            if v.is_undefined() && strict && !items.is_empty() {
                return Err(undefined());
            }
            Ok(items.iter().any(|item| py_eq(item, v)))
        }
        ValueKind::Map => {
            if (v.kind() == ValueKind::Seq && !v.is_tuple()) || v.kind() == ValueKind::Map {
                return Err(bad(format!("unhashable type: '{}'", py_type(v))));
            }
            if v.is_undefined() && strict {
                return Err(undefined());
            }
            Ok(map_entries(container)
                .unwrap_or_default()
                .iter()
                .any(|(k, _)| py_eq(k, v)))
        }
        ValueKind::Plain => minijinja::tests::is_in(state, v, container),
        _ => Err(bad(format!(
            "argument of type '{}' is not iterable",
            py_type(container)
        ))),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum EngineObject {
    Macro,
    Namespace,
}

/// MiniJinja's macros and namespaces look like mappings; Jinja2's are neither mappings nor
/// iterable (a macro is callable).
fn engine_object(v: &Value) -> Option<EngineObject> {
    if v.kind() != ValueKind::Map || v.downcast_object_ref::<Dict>().is_some() {
        return None;
    }
    let shown = format!("{:?}", v.as_object()?);
    if shown.starts_with("<macro ") {
        Some(EngineObject::Macro)
    } else if shown.starts_with("Namespace {") {
        Some(EngineObject::Namespace)
    } else {
        None
    }
}

fn register_tests(env: &mut Environment<'_>) {
    env.add_test("odd", |v: Value| mod_is(&v, &Value::from(2), 1));
    env.add_test("even", |v: Value| mod_is(&v, &Value::from(2), 0));
    env.add_test(
        "divisibleby",
        |v: Value, args: Args| -> Result<bool, Error> {
            let a = bind("test_divisibleby", args, ["num"], 0)?;
            let num = a[0].clone().ok_or_else(|| {
                Error::new(
                    ErrorKind::MissingArgument,
                    "test_divisibleby() missing 1 required positional argument: 'num'",
                )
            })?;
            mod_is(&v, &num, 0)
        },
    );
    env.add_test("lower", |state: &State, v: Value| -> Result<bool, Error> {
        Ok(cased_as(&text(state, &v)?, true))
    });
    env.add_test("upper", |state: &State, v: Value| -> Result<bool, Error> {
        Ok(cased_as(&text(state, &v)?, false))
    });
    env.add_test("mapping", |v: Value| -> bool {
        v.kind() == ValueKind::Map && engine_object(&v).is_none()
    });
    env.add_test("sequence", |state: &State, v: Value| -> bool {
        match v.kind() {
            ValueKind::Map => engine_object(&v).is_none(),
            ValueKind::String | ValueKind::Seq | ValueKind::Iterable => true,
            ValueKind::Undefined => !strict(state),
            _ => false,
        }
    });
    env.add_test(
        "iterable",
        |state: &State, v: Value| -> Result<bool, Error> {
            Ok(match v.kind() {
                ValueKind::Map => engine_object(&v).is_none(),
                ValueKind::String | ValueKind::Seq | ValueKind::Iterable => true,
                ValueKind::Undefined if strict(state) => return Err(undefined()),
                ValueKind::Undefined => true,
                ValueKind::Plain => v.try_iter().is_ok(),
                _ => false,
            })
        },
    );
    env.add_test("callable", |v: Value| -> bool {
        match v.kind() {
            ValueKind::Plain => v.downcast_object_ref::<super::salt_fns::Salt>().is_none(),
            ValueKind::Map => engine_object(&v) == Some(EngineObject::Macro),
            _ => false,
        }
    });
    env.add_test(
        "in",
        |state: &State, v: Value, args: Args| -> Result<bool, Error> {
            let a = bind("test_in", args, ["seq"], 0)?;
            let seq = a[0].clone().ok_or_else(|| {
                Error::new(
                    ErrorKind::MissingArgument,
                    "test_in() missing 1 required positional argument: 'seq'",
                )
            })?;
            is_in(state, &v, &seq)
        },
    );
    env.add_test("filter", |state: &State, v: Value| -> Result<bool, Error> {
        if v.is_undefined() && strict(state) {
            return Err(undefined());
        }
        Ok(v.as_str()
            .is_some_and(|name| minijinja::tests::is_filter(state, name)))
    });
    env.add_test("test", |state: &State, v: Value| -> Result<bool, Error> {
        if v.is_undefined() && strict(state) {
            return Err(undefined());
        }
        Ok(v.as_str()
            .is_some_and(|name| minijinja::tests::is_test(state, name)))
    });
    let eq = |state: &State, a: Value, b: Value| -> Result<bool, Error> {
        if (a.is_undefined() || b.is_undefined()) && strict(state) {
            return Err(undefined());
        }
        Ok(py_eq(&a, &b))
    };
    let ne = move |state: &State, a: Value, b: Value| eq(state, a, b).map(|same| !same);
    for name in ["eq", "=="] {
        env.add_test(name, eq);
    }
    for name in ["ne", "!="] {
        env.add_test(name, ne);
    }
    type Holds = fn(Ordering) -> bool;
    let comparisons: [(&[&str], Holds); 4] = [
        (&["gt", ">", "greaterthan"], Ordering::is_gt),
        (&["ge", ">="], Ordering::is_ge),
        (&["lt", "<", "lessthan"], Ordering::is_lt),
        (&["le", "<="], Ordering::is_le),
    ];
    for (names, holds) in comparisons {
        for name in names {
            env.add_test(*name, move |a: Value, b: Value| -> Result<bool, Error> {
                py_cmp(&a, &b).map(holds)
            });
        }
    }
}
