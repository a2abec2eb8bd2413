//! Python's rules the filters share: type names for error texts, argument binding
//! (positional or keyword), whitespace, and `int()`/`float()` of text.

use minijinja::value::{Kwargs, Rest, Value, ValueKind, ValueOrKwargs};
use minijinja::{Error, ErrorKind};

use super::objects::{map_entries, seq_items, split_kwargs};

pub(crate) fn bad(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

/// Python's type name of a value, for error messages.
pub(crate) fn py_type(v: &Value) -> &'static str {
    match v.kind() {
        ValueKind::Undefined => "Undefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if v.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq if v.is_tuple() => "tuple",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        ValueKind::Iterable => "generator",
        _ => "object",
    }
}

/// The arguments of a filter call after the filtered value (positional ones, then keywords).
pub(crate) type Args = Rest<ValueOrKwargs>;

/// [`Args`] bound to a Python signature's `names` (the first `required` of them without a
/// default), by position or by keyword, refused as Python refuses them.
pub(crate) fn bind<const N: usize>(
    func: &str,
    args: Args,
    names: [&str; N],
    required: usize,
) -> Result<[Option<Value>; N], Error> {
    let values = args.into_values();
    let (positional, kwargs) = split_kwargs(&values);
    let keywords = kwargs
        .into_iter()
        .map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), v))
        .collect();
    bind_parts(func, positional, keywords, names, required)
}

/// [`bind`] of arguments minijinja split already (`Rest<Value>` and `Kwargs`); every keyword
/// counts as used.
pub(crate) fn bind_kw<const N: usize>(
    func: &str,
    positional: &[Value],
    kwargs: &Kwargs,
    names: [&str; N],
    required: usize,
) -> Result<[Option<Value>; N], Error> {
    let mut keywords = Vec::new();
    for key in kwargs.args() {
        keywords.push((key.to_string(), kwargs.get::<Value>(key)?));
    }
    bind_parts(func, positional.to_vec(), keywords, names, required)
}

fn bind_parts<const N: usize>(
    func: &str,
    positional: Vec<Value>,
    keywords: Vec<(String, Value)>,
    names: [&str; N],
    required: usize,
) -> Result<[Option<Value>; N], Error> {
    if positional.len() > N {
        let takes = if required == N {
            format!("{}", N + 1)
        } else {
            format!("from {} to {}", required + 1, N + 1)
        };
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            format!(
                "{func}() takes {takes} positional arguments but {} were given",
                positional.len() + 1
            ),
        ));
    }
    let mut bound: [Option<Value>; N] = std::array::from_fn(|i| positional.get(i).cloned());
    for (key, value) in keywords {
        let Some(at) = names.iter().position(|name| *name == key) else {
            return Err(Error::new(
                ErrorKind::TooManyArguments,
                format!("{func}() got an unexpected keyword argument '{key}'"),
            ));
        };
        if bound[at].is_some() {
            return Err(bad(format!(
                "{func}() got multiple values for argument '{key}'"
            )));
        }
        bound[at] = Some(value);
    }
    if let Some(missing) = (0..required).find(|&i| bound[i].is_none()) {
        return Err(bad(format!(
            "{func}() missing 1 required positional argument: '{}'",
            names[missing]
        )));
    }
    Ok(bound)
}

pub(crate) fn int_value(i: i128) -> Value {
    i64::try_from(i).map_or_else(|_| Value::from(i), Value::from)
}

pub(crate) use brine_protocol::pystr::is_space as py_isspace;

/// The first code point of each run of ten Unicode decimal digits (category Nd).
const DECIMAL_ZEROS: &[u32] = &[
    0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
    0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
    0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0, 0xff10,
    0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0, 0x11650,
    0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0, 0x16b50,
    0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
];

/// Python's preparation of a number's text: Unicode decimal digits become ASCII ones,
/// whitespace a space, anything else outside ASCII a character no number has.
pub(crate) fn ascii_number(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii() {
                return c;
            }
            if py_isspace(c) {
                return ' ';
            }
            let code = c as u32;
            let at = DECIMAL_ZEROS.partition_point(|z| *z <= code);
            match at.checked_sub(1).map(|i| code - DECIMAL_ZEROS[i]) {
                Some(d) if d < 10 => char::from_digit(d, 10).unwrap_or('?'),
                _ => '?',
            }
        })
        .collect()
}

/// Python's `float(text)`.
pub(crate) fn parse_py_float(s: &str) -> Option<f64> {
    let s = ascii_number(s);
    let t = s.trim_matches(py_isspace);
    if t.contains('_') {
        let chars: Vec<char> = t.chars().collect();
        for (i, c) in chars.iter().enumerate() {
            if *c == '_'
                && !(i > 0
                    && chars[i - 1].is_ascii_digit()
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit))
            {
                return None;
            }
        }
    }
    t.replace('_', "").parse::<f64>().ok()
}

/// Python's `int(text, base)`.
pub(crate) fn parse_py_int(s: &str, base: i128) -> Option<i128> {
    let s = ascii_number(s);
    let t = s.trim_matches(py_isspace);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let prefix = t.get(..2).map(str::to_ascii_lowercase);
    let prefixed = |want: &str| prefix.as_deref() == Some(want);
    let (radix, digits, had_prefix) = match base {
        0 if prefixed("0x") => (16, &t[2..], true),
        0 if prefixed("0o") => (8, &t[2..], true),
        0 if prefixed("0b") => (2, &t[2..], true),
        0 => {
            // Base 0 refuses leading zeros in a non-zero decimal.
            let stripped: String = t.chars().filter(|c| *c != '_').collect();
            if stripped.starts_with('0') && stripped.chars().any(|c| c != '0') {
                return None;
            }
            (10, t, false)
        }
        16 if prefixed("0x") => (16, &t[2..], true),
        8 if prefixed("0o") => (8, &t[2..], true),
        2 if prefixed("0b") => (2, &t[2..], true),
        2..=36 => (base as u32, t, false),
        _ => return None,
    };
    let digits = if had_prefix {
        digits.strip_prefix('_').unwrap_or(digits)
    } else {
        digits
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let mut n: i128 = 0;
    for c in digits.chars().filter(|c| *c != '_') {
        let d = c.to_digit(radix)?;
        n = n
            .checked_mul(i128::from(radix))?
            .checked_add(i128::from(d))?;
    }
    Some(if neg { -n } else { n })
}

/// The items Python's `iter(value)` gives: a string's characters, a bytes value's integers,
/// a mapping's keys, a sequence's items; `None` for what Python cannot iterate.
pub(crate) fn py_iter(v: &Value) -> Option<Vec<Value>> {
    match v.kind() {
        ValueKind::String => Some(
            v.as_str()
                .unwrap_or_default()
                .chars()
                .map(Value::from)
                .collect(),
        ),
        ValueKind::Bytes => Some(
            v.as_bytes()
                .unwrap_or_default()
                .iter()
                .map(|b| Value::from(*b))
                .collect(),
        ),
        ValueKind::Map => map_entries(v).map(|e| e.into_iter().map(|(k, _)| k).collect()),
        ValueKind::Seq | ValueKind::Iterable => seq_items(v),
        ValueKind::Plain => v.try_iter().ok().map(Iterator::collect),
        _ => None,
    }
}

/// [`py_iter`], or Python's `TypeError` text.
pub(crate) fn py_iter_or_err(v: &Value) -> Result<Vec<Value>, Error> {
    py_iter(v).ok_or_else(|| bad(format!("'{}' object is not iterable", py_type(v))))
}
