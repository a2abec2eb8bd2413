//! Salt's argument conventions: splitting a publish `arg` list into args and kwargs
//! (`salt.minion.load_args_and_kwargs`), binding them to a function signature the way
//! Python does (with Python's `TypeError` texts), YAML-ish parsing of `key=value`
//! strings (`salt.utils.args.yamlify_arg`), Python `str()`/`repr()` of values, and
//! POSIX `shlex.split`.

use std::sync::OnceLock;

use brine_protocol::pyrepr::{float_repr as py_float, str_repr as py_str_repr};
use regex::Regex;
use rmpv::Value;

use super::FnError;

/// The parameter list of a Salt function, as Python's `inspect` would describe it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signature {
    /// Positional-or-keyword parameters, in order.
    pub params: &'static [&'static str],
    /// How many of `params` (from the start) have no default.
    pub required: usize,
    /// The function takes `*args`.
    pub varargs: bool,
    /// The function takes `**kwargs` (and so receives the `__pub_*` keys).
    pub kwargs: bool,
}

impl Signature {
    pub(crate) const fn new(
        params: &'static [&'static str],
        required: usize,
        varargs: bool,
        kwargs: bool,
    ) -> Self {
        Signature {
            params,
            required,
            varargs,
            kwargs,
        }
    }

    /// A function without parameters.
    pub(crate) const NONE: Signature = Signature::new(&[], 0, false, false);
}

/// Arguments bound to a signature.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bound {
    names: &'static [&'static str],
    values: Vec<Option<Value>>,
    /// Extra positional arguments (`*args`).
    pub varargs: Vec<Value>,
    /// Extra keyword arguments (`**kwargs`), in call order.
    pub kwargs: Vec<(String, Value)>,
}

impl Bound {
    /// Salt's `invalid_kwargs` for a function taking `**kwargs`: an error naming the keyword
    /// arguments given (Salt's own `__` ones aside) that are not in `names`.
    pub(crate) fn only_kwargs(&self, names: &[&str]) -> Result<(), FnError> {
        let invalid: Vec<String> = self
            .kwargs
            .iter()
            .filter(|(k, _)| !k.starts_with("__") && !names.contains(&k.as_str()))
            .map(|(k, v)| format!("{k}={}", py_str(v)))
            .collect();
        if invalid.is_empty() {
            Ok(())
        } else {
            Err(FnError::Invocation(format!(
                "The following keyword arguments are not valid: {}",
                invalid.join(", ")
            )))
        }
    }

    /// The value of a named parameter, if it was given (positionally or by keyword).
    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        let idx = self.names.iter().position(|n| *n == name)?;
        self.values.get(idx).and_then(Option::as_ref)
    }

    /// Like [`Bound::get`], but a Python `None` counts as not given.
    pub(crate) fn opt(&self, name: &str) -> Option<&Value> {
        self.get(name).filter(|v| !v.is_nil())
    }

    /// A value from `**kwargs`.
    pub(crate) fn kwarg(&self, name: &str) -> Option<&Value> {
        self.kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// `**kwargs` as a map value.
    pub(crate) fn kwargs_map(&self) -> Value {
        Value::Map(
            self.kwargs
                .iter()
                .map(|(k, v)| (Value::from(k.as_str()), v.clone()))
                .collect(),
        )
    }
}

fn kwarg_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^([^\d\W][\w.-]*)=(.*)$").expect("static regex is valid"))
}

/// `salt.utils.args.parse_kwarg`: split `"name=value"`; `None` when the string is not a kwarg.
pub(crate) fn parse_kwarg(s: &str) -> Option<(String, String)> {
    // Python's `$` also matches before one trailing newline; `.` never matches a newline.
    let s = s.strip_suffix('\n').unwrap_or(s);
    let caps = kwarg_regex().captures(s)?;
    let value = caps.get(2).map_or("", |m| m.as_str());
    // Salt's regex has `(?!=)`: "a==b" is not a kwarg.
    if value.starts_with('=') {
        return None;
    }
    Some((caps[1].to_string(), value.to_string()))
}

fn insert_kwarg(kwargs: &mut Vec<(String, Value)>, key: String, val: Value) {
    if let Some(slot) = kwargs.iter_mut().find(|(k, _)| *k == key) {
        slot.1 = val;
    } else {
        kwargs.push((key, val));
    }
}

/// Positional args and kwargs (in call order) of one call.
pub(crate) type ArgsKwargs = (Vec<Value>, Vec<(String, Value)>);

/// `load_args_and_kwargs`: split a publish `arg` list for a function with signature `sig`.
/// Unknown kwargs (for a function without `**kwargs`) are a SaltInvocationError.
pub(crate) fn load_args_and_kwargs(
    sig: &Signature,
    arg: &[Value],
    pub_load: &Value,
) -> Result<ArgsKwargs, FnError> {
    let mut args = Vec::new();
    let mut kwargs: Vec<(String, Value)> = Vec::new();
    let mut invalid = Vec::new();
    let accepts = |key: &str| sig.kwargs || sig.params.contains(&key);
    for item in arg {
        if let Value::Map(entries) = item {
            let flagged = entries
                .iter()
                .any(|(k, v)| k.as_str() == Some("__kwarg__") && *v == Value::Boolean(true));
            if flagged {
                for (k, v) in entries {
                    let key = match k.as_str() {
                        Some("__kwarg__") => continue,
                        Some(s) => s.to_string(),
                        None => py_str(k),
                    };
                    if accepts(&key) {
                        insert_kwarg(&mut kwargs, key, v.clone());
                    } else {
                        invalid.push(format!("{key}={}", py_str(v)));
                    }
                }
                continue;
            }
        }
        if let Some((key, raw)) = item.as_str().and_then(parse_kwarg) {
            let val = yamlify_arg(&raw);
            if accepts(&key) {
                insert_kwarg(&mut kwargs, key, val);
            } else {
                invalid.push(format!("{key}={}", py_str(&val)));
            }
        } else {
            args.push(item.clone());
        }
    }
    if !invalid.is_empty() {
        return Err(FnError::Invocation(format!(
            "The following keyword arguments are not valid: {}",
            invalid.join(", ")
        )));
    }
    if sig.kwargs {
        if let Value::Map(entries) = pub_load {
            for (k, v) in entries {
                let key = k.as_str().map_or_else(|| py_str(k), str::to_string);
                insert_kwarg(&mut kwargs, format!("__pub_{key}"), v.clone());
            }
        }
    }
    Ok((args, kwargs))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        one.to_string()
    } else {
        many.to_string()
    }
}

/// Bind args/kwargs to `sig` as a Python call to `pyname(...)` would, with Python's
/// `TypeError` messages on a mismatch.
pub(crate) fn bind(
    sig: &Signature,
    pyname: &str,
    args: Vec<Value>,
    kwargs: Vec<(String, Value)>,
) -> Result<Bound, String> {
    let n = sig.params.len();
    let given = args.len();
    let mut bound = Bound {
        names: sig.params,
        values: vec![None; n],
        varargs: Vec::new(),
        kwargs: Vec::new(),
    };
    for (i, a) in args.into_iter().enumerate() {
        if i < n {
            bound.values[i] = Some(a);
        } else {
            bound.varargs.push(a);
        }
    }
    for (k, v) in kwargs {
        if let Some(idx) = sig.params.iter().position(|p| *p == k) {
            if bound.values[idx].is_some() {
                return Err(format!("{pyname}() got multiple values for argument '{k}'"));
            }
            bound.values[idx] = Some(v);
        } else if sig.kwargs {
            bound.kwargs.push((k, v));
        } else {
            return Err(format!(
                "{pyname}() got an unexpected keyword argument '{k}'"
            ));
        }
    }
    if given > n && !sig.varargs {
        let takes = if sig.required == n {
            format!("{n} positional {}", plural(n, "argument", "arguments"))
        } else {
            format!("from {} to {n} positional arguments", sig.required)
        };
        return Err(format!(
            "{pyname}() takes {takes} but {given} {} given",
            plural(given, "was", "were")
        ));
    }
    let missing: Vec<String> = sig.params[..sig.required]
        .iter()
        .zip(&bound.values)
        .filter(|(_, v)| v.is_none())
        .map(|(p, _)| format!("'{p}'"))
        .collect();
    if !missing.is_empty() {
        let list = match missing.len() {
            1 => missing[0].clone(),
            2 => format!("{} and {}", missing[0], missing[1]),
            k => format!("{}, and {}", missing[..k - 1].join(", "), missing[k - 1]),
        };
        return Err(format!(
            "{pyname}() missing {} required positional {}: {list}",
            missing.len(),
            plural(missing.len(), "argument", "arguments")
        ));
    }
    Ok(bound)
}

// ---------------------------------------------------------------------------
// yamlify_arg

/// Python's check that a value can be a dict key or set member: lists and dicts cannot
/// ("unhashable type: 'list'").
pub(crate) fn hashable(v: &Value) -> Result<(), FnError> {
    match v {
        Value::Array(_) | Value::Map(_) => Err(FnError::InvalidArgs(format!(
            "unhashable type: '{}'",
            py_type_name(v)
        ))),
        _ => Ok(()),
    }
}

/// `salt.utils.yaml.safe_load` of a command-line word (the one YAML loader, Salt's
/// semantics: `0755` is 755, `yes` is True, timestamps stay text, a plain `=` is refused);
/// `None` where Salt's loader raises.
fn yaml_load(s: &str) -> Option<Value> {
    let plain = s.trim();
    // JSON data, what the loader gives, has no infinities nor NaN: it refuses them.
    let special = match plain.trim_start_matches('+') {
        ".inf" | ".Inf" | ".INF" => Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" if !plain.starts_with('+') => Some(f64::NAN),
        _ => None,
    };
    if let Some(f) = special {
        return Some(Value::F64(f));
    }
    brine_protocol::yaml::load::load(s)
        .ok()
        .map(|v| brine_protocol::payload::from_json(&v))
}

/// `salt.utils.args.yamlify_arg`: turn a CLI-style string into the value Salt would pass.
pub fn yamlify_arg(arg: &str) -> Value {
    let original = || Value::from(arg);
    let trimmed = arg.trim();
    if matches!(trimmed, "" | "---" | "...") {
        return original();
    }
    if arg.contains('_') && trimmed.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return original();
    }
    if arg.contains(['\t', '\r', '\n']) {
        return original();
    }
    if arg.contains('#') {
        return match yaml_load(arg) {
            Some(v) if !v.is_str() && !v.is_nil() => v,
            _ => original(),
        };
    }
    if arg == "None" {
        return Value::Nil;
    }
    let Some(parsed) = yaml_load(arg) else {
        return original();
    };
    match &parsed {
        Value::Map(_) if !arg.starts_with('{') => original(),
        Value::Array(_) if !arg.starts_with('[') => original(),
        Value::String(s) if s.as_str() == Some("") && (arg == "|" || arg == "!") => original(),
        Value::Nil if arg.trim().starts_with('#') || arg == "!" => original(),
        _ => parsed,
    }
}

// ---------------------------------------------------------------------------
// Python str()/repr()

fn py_bytes_repr(b: &[u8]) -> String {
    let mut out = String::from("b'");
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\'' => out.push_str("\\'"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('\'');
    out
}

/// Python `repr()` of a value as Salt would hold it after msgpack decoding.
pub(crate) fn py_repr(v: &Value) -> String {
    match v {
        Value::Nil => "None".into(),
        Value::Boolean(true) => "True".into(),
        Value::Boolean(false) => "False".into(),
        Value::Integer(i) => i.to_string(),
        Value::F32(f) => py_float(f64::from(*f)),
        Value::F64(f) => py_float(*f),
        Value::String(s) => match s.as_str() {
            Some(s) => py_str_repr(s),
            None => py_bytes_repr(s.as_bytes()),
        },
        Value::Binary(b) => py_bytes_repr(b),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(py_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Map(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{}: {}", py_repr(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Ext(tag, data) => format!("ExtType(code={tag}, data={})", py_bytes_repr(data)),
    }
}

/// Python `str()` of a value.
pub(crate) fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) if s.as_str().is_some() => s.as_str().unwrap_or_default().to_string(),
        other => py_repr(other),
    }
}

/// Python's type name for a value (`str(type(v))`).
pub(crate) fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Nil => "<class 'NoneType'>",
        Value::Boolean(_) => "<class 'bool'>",
        Value::Integer(_) => "<class 'int'>",
        Value::F32(_) | Value::F64(_) => "<class 'float'>",
        Value::String(s) if s.as_str().is_some() => "<class 'str'>",
        Value::String(_) | Value::Binary(_) => "<class 'bytes'>",
        Value::Array(_) => "<class 'list'>",
        Value::Map(_) => "<class 'dict'>",
        Value::Ext(..) => "<class 'msgpack.ext.ExtType'>",
    }
}

/// The bare name of a value's Python type (`list`), as error messages name it.
pub(crate) fn py_type_name(v: &Value) -> &'static str {
    py_type(v)
        .trim_start_matches("<class '")
        .trim_end_matches("'>")
}

/// `salt.utils.data.is_true`.
pub(crate) fn is_true(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Nil) => false,
        Some(Value::Boolean(b)) => *b,
        Some(Value::Integer(i)) => i.as_i64().is_none_or(|n| n > 0),
        Some(Value::F32(f)) => *f > 0.0,
        Some(Value::F64(f)) => *f > 0.0,
        Some(Value::String(s)) => {
            let s = s.as_str().unwrap_or_default();
            if let Ok(n) = s.parse::<f64>() {
                n > 0.0
            } else {
                s.eq_ignore_ascii_case("true")
            }
        }
        Some(_) => false,
    }
}

/// Python `int(v)`: the error text is Python's `ValueError`/`TypeError` message.
pub(crate) fn py_int(v: &Value) -> Result<i64, String> {
    match v {
        Value::Boolean(b) => Ok(i64::from(*b)),
        Value::Integer(i) => i
            .as_i64()
            .ok_or_else(|| format!("integer {i} is out of range")),
        Value::F32(f) => float_to_int(f64::from(*f)),
        Value::F64(f) => float_to_int(*f),
        Value::String(s) => {
            let text = s.as_str().unwrap_or_default();
            let t = text.trim().replace('_', "");
            t.parse::<i64>().map_err(|_| {
                format!(
                    "invalid literal for int() with base 10: {}",
                    py_str_repr(text)
                )
            })
        }
        Value::Nil => Err(
            "int() argument must be a string, a bytes-like object or a real number, not 'NoneType'"
                .into(),
        ),
        other => Err(format!(
            "int() argument must be a string, a bytes-like object or a real number, not '{}'",
            py_type_name(other)
        )),
    }
}

fn float_to_int(f: f64) -> Result<i64, String> {
    if f.is_nan() {
        Err("cannot convert float NaN to integer".into())
    } else if f.is_infinite() {
        Err("cannot convert float infinity to integer".into())
    } else {
        Ok(f.trunc() as i64)
    }
}

/// Python `float(v)` for numbers and numeric strings.
pub(crate) fn py_float_of(v: &Value) -> Result<f64, String> {
    match v {
        Value::Boolean(b) => Ok(if *b { 1.0 } else { 0.0 }),
        Value::Integer(i) => Ok(i.as_f64().unwrap_or(0.0)),
        Value::F32(f) => Ok(f64::from(*f)),
        Value::F64(f) => Ok(*f),
        Value::String(s) => {
            let text = s.as_str().unwrap_or_default();
            text.trim()
                .parse::<f64>()
                .map_err(|_| format!("could not convert string to float: {}", py_str_repr(text)))
        }
        other => Err(format!(
            "float() argument must be a string or a real number, not '{}'",
            py_type_name(other)
        )),
    }
}

/// Salt's `salt.utils.args.split_input`: a list as it is, anything else as its text split
/// at commas, each part stripped.
pub(crate) fn split_input(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(py_str).collect(),
        other => py_str(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .collect(),
    }
}

/// Python `shlex.split(s)` (Brine's one implementation, in protocol).
pub(crate) fn shlex_split(s: &str) -> Result<Vec<String>, String> {
    brine_protocol::pyrepr::shlex_split(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::payload::py_truthy;

    fn s(v: &str) -> Value {
        Value::from(v)
    }

    #[test]
    fn parse_kwarg_follows_salt_regex() {
        assert_eq!(parse_kwarg("foo=bar"), Some(("foo".into(), "bar".into())));
        assert_eq!(
            parse_kwarg("a.b-c=1=2"),
            Some(("a.b-c".into(), "1=2".into()))
        );
        assert_eq!(parse_kwarg("foo==bar"), None);
        assert_eq!(parse_kwarg("1foo=bar"), None);
        assert_eq!(parse_kwarg("echo hi=x"), None);
        assert_eq!(parse_kwarg("x=a\nb"), None);
        assert_eq!(parse_kwarg("x=ab\n"), Some(("x".into(), "ab".into())));
        assert_eq!(parse_kwarg("plain"), None);
        assert_eq!(parse_kwarg("k="), Some(("k".into(), String::new())));
    }

    #[test]
    fn yamlify_matches_pyyaml_for_common_inputs() {
        assert_eq!(yamlify_arg("1"), Value::from(1));
        assert_eq!(yamlify_arg("-12"), Value::from(-12));
        assert_eq!(yamlify_arg("0x1f"), Value::from(31));
        // Salt's loader strips an unsigned integer's leading zeros: decimal, not octal.
        assert_eq!(yamlify_arg("017"), Value::from(17));
        assert_eq!(yamlify_arg("0755"), Value::from(755));
        assert_eq!(yamlify_arg("00"), Value::from(0));
        assert_eq!(yamlify_arg("09"), s("09"));
        assert_eq!(yamlify_arg("-010"), Value::from(-8));
        assert_eq!(yamlify_arg("+075"), Value::from(61));
        assert_eq!(yamlify_arg("0b101"), Value::from(5));
        assert_eq!(yamlify_arg("1:30"), Value::from(90));
        assert_eq!(
            yamlify_arg("[yes, 0755, ~]"),
            Value::Array(vec![Value::Boolean(true), Value::from(755), Value::Nil])
        );
        assert_eq!(
            yamlify_arg("{a: 075}"),
            Value::Map(vec![(s("a"), Value::from(75))])
        );
        // YAML 1.1's value type, which Salt's safe loader cannot build: the word stays.
        assert_eq!(yamlify_arg(" = "), s(" = "));
        assert_eq!(yamlify_arg("="), s("="));
        assert_eq!(yamlify_arg(" x"), s("x"));
        assert_eq!(yamlify_arg("&a b"), s("b"));
        assert_eq!(yamlify_arg("!x"), s("!x"));
        assert_eq!(yamlify_arg("[a, b"), s("[a, b"));
        assert_eq!(yamlify_arg("1.5e3"), s("1.5e3"));
        assert_eq!(yamlify_arg(".inf"), Value::F64(f64::INFINITY));
        assert_eq!(yamlify_arg("-.Inf"), Value::F64(f64::NEG_INFINITY));
        assert!(matches!(yamlify_arg(".nan"), Value::F64(f) if f.is_nan()));
        assert_eq!(yamlify_arg("1.5"), Value::F64(1.5));
        assert_eq!(yamlify_arg("1e3"), s("1e3"));
        assert_eq!(yamlify_arg("yes"), Value::Boolean(true));
        assert_eq!(yamlify_arg("False"), Value::Boolean(false));
        assert_eq!(yamlify_arg("None"), Value::Nil);
        assert_eq!(yamlify_arg("null"), Value::Nil);
        assert_eq!(yamlify_arg("~"), Value::Nil);
        assert_eq!(yamlify_arg(""), s(""));
        assert_eq!(yamlify_arg("1_000"), s("1_000"));
        assert_eq!(yamlify_arg("hello world"), s("hello world"));
        assert_eq!(yamlify_arg("'quoted'"), s("quoted"));
        assert_eq!(yamlify_arg("\"dq\""), s("dq"));
        assert_eq!(yamlify_arg("a: b"), s("a: b"));
        assert_eq!(yamlify_arg("- a"), s("- a"));
        assert_eq!(yamlify_arg("#"), s("#"));
        assert_eq!(yamlify_arg("a #b"), s("a #b"));
        assert_eq!(yamlify_arg("|"), s("|"));
        assert_eq!(yamlify_arg("2024-01-02"), s("2024-01-02"));
        assert_eq!(
            yamlify_arg("{\"x\": 1}"),
            Value::Map(vec![(s("x"), Value::from(1))])
        );
        assert_eq!(
            yamlify_arg("[1, two]"),
            Value::Array(vec![Value::from(1), s("two")])
        );
        assert_eq!(yamlify_arg("tab\there"), s("tab\there"));
    }

    #[test]
    fn python_reprs() {
        assert_eq!(py_repr(&Value::Nil), "None");
        assert_eq!(py_repr(&Value::F64(1.0)), "1.0");
        assert_eq!(py_repr(&Value::F64(1e16)), "1e+16");
        assert_eq!(py_repr(&Value::F64(1e-5)), "1e-05");
        assert_eq!(py_repr(&s("it's")), "\"it's\"");
        assert_eq!(py_repr(&s("a'\"")), "'a\\'\"'");
        assert_eq!(
            py_repr(&Value::Array(vec![s("sleep"), Value::from(5)])),
            "['sleep', 5]"
        );
        assert_eq!(
            py_repr(&Value::Map(vec![(s("x"), Value::Boolean(true))])),
            "{'x': True}"
        );
        assert_eq!(py_str(&s("plain")), "plain");
        assert_eq!(py_type(&Value::from(1)), "<class 'int'>");
    }

    #[test]
    fn shlex_handles_quotes_and_escapes() {
        assert_eq!(
            shlex_split(r#"echo "a b" 'c d' e\ f "x\"y" 'p\q'"#).unwrap(),
            vec!["echo", "a b", "c d", "e f", "x\"y", "p\\q"]
        );
        assert_eq!(shlex_split("  ").unwrap(), Vec::<String>::new());
        assert_eq!(shlex_split("a ''").unwrap(), vec!["a", ""]);
        assert_eq!(
            shlex_split("echo 'open").unwrap_err(),
            "No closing quotation"
        );
    }

    const ECHO: Signature = Signature::new(&["text"], 1, false, false);
    const GET: Signature = Signature::new(&["key", "default", "delimiter"], 1, false, false);

    #[test]
    fn bind_reports_python_type_errors() {
        assert_eq!(
            bind(&ECHO, "echo", vec![], vec![]).unwrap_err(),
            "echo() missing 1 required positional argument: 'text'"
        );
        assert_eq!(
            bind(&ECHO, "echo", vec![s("a"), s("b")], vec![]).unwrap_err(),
            "echo() takes 1 positional argument but 2 were given"
        );
        assert_eq!(
            bind(&Signature::NONE, "ping", vec![s("a")], vec![]).unwrap_err(),
            "ping() takes 0 positional arguments but 1 was given"
        );
        assert_eq!(
            bind(&GET, "get", vec![s("a"); 4], vec![]).unwrap_err(),
            "get() takes from 1 to 3 positional arguments but 4 were given"
        );
        assert_eq!(
            bind(&ECHO, "echo", vec![s("a")], vec![("text".into(), s("b"))]).unwrap_err(),
            "echo() got multiple values for argument 'text'"
        );
        let three = Signature::new(&["a", "b", "c"], 3, false, false);
        assert_eq!(
            bind(&three, "f", vec![], vec![]).unwrap_err(),
            "f() missing 3 required positional arguments: 'a', 'b', and 'c'"
        );
        let b = bind(
            &GET,
            "get",
            vec![s("k")],
            vec![("delimiter".into(), s("/"))],
        )
        .unwrap();
        assert_eq!(b.get("key"), Some(&s("k")));
        assert_eq!(b.get("default"), None);
        assert_eq!(b.get("delimiter"), Some(&s("/")));
    }

    #[test]
    fn load_args_splits_kwargs_and_rejects_unknown() {
        let arg = vec![
            s("a"),
            Value::from(1),
            s("n=5"),
            Value::Map(vec![
                (s("__kwarg__"), Value::Boolean(true)),
                (s("foo"), s("bar")),
            ]),
            Value::Map(vec![(s("plain"), s("map"))]),
        ];
        let sig = Signature::new(&[], 0, true, true);
        let pub_load = Value::Map(vec![(s("jid"), s("123"))]);
        let (args, kwargs) = load_args_and_kwargs(&sig, &arg, &pub_load).unwrap();
        assert_eq!(
            args,
            vec![
                s("a"),
                Value::from(1),
                Value::Map(vec![(s("plain"), s("map"))])
            ]
        );
        assert_eq!(
            kwargs,
            vec![
                ("n".to_string(), Value::from(5)),
                ("foo".to_string(), s("bar")),
                ("__pub_jid".to_string(), s("123")),
            ]
        );
        let err = load_args_and_kwargs(&ECHO, &[s("hi"), s("x=1")], &pub_load).unwrap_err();
        assert_eq!(
            err,
            FnError::Invocation("The following keyword arguments are not valid: x=1".into())
        );
        let (args, kwargs) = load_args_and_kwargs(&ECHO, &[s("text=hi")], &pub_load).unwrap();
        assert!(args.is_empty());
        assert_eq!(kwargs, vec![("text".to_string(), s("hi"))]);
    }

    #[test]
    fn conversions() {
        assert_eq!(py_int(&s(" 12 ")), Ok(12));
        assert_eq!(py_int(&Value::F64(2.9)), Ok(2));
        assert_eq!(
            py_int(&s("x")).unwrap_err(),
            "invalid literal for int() with base 10: 'x'"
        );
        assert!(is_true(Some(&s("True"))));
        assert!(is_true(Some(&Value::from(1))));
        assert!(!is_true(Some(&s("no"))));
        assert!(!py_truthy(&Value::Nil));
        assert!(py_truthy(&s("x")));
    }
}
