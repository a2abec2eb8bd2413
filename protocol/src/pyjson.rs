//! Python's `json.dumps`, as Salt writes JSON (the `json` outputter, salt-api's answers, the
//! `json` Jinja filter, `file.serialize`): its separators, `indent`, `sort_keys`,
//! `ensure_ascii` escapes and float `repr()`. One implementation for every crate.

use std::fmt::Write as _;

use serde_json::Value;

use crate::payload::{PayloadError, Token, Tokens, MAX_DEPTH};
use crate::pyrepr::float_repr;

/// The arguments of `json.dumps` that shape the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonStyle {
    /// `indent`: `None` writes one line; otherwise each level is indented by this text (an
    /// integer `n` is `n` spaces, a negative one none: only the line breaks).
    pub indent: Option<String>,
    /// Between items (`", "`, or `","` when indenting).
    pub item_separator: String,
    /// Between a key and its value (`": "`).
    pub key_separator: String,
    pub sort_keys: bool,
    /// Every character outside printable ASCII escaped as `\uXXXX`.
    pub ensure_ascii: bool,
}

impl JsonStyle {
    /// `json.dumps(obj, indent=indent, ensure_ascii=ensure_ascii)`: Python's separators for
    /// that indent, keys in their order.
    pub fn new(indent: Option<i64>, ensure_ascii: bool) -> JsonStyle {
        let indent = indent.map(|n| " ".repeat(usize::try_from(n).unwrap_or(0)));
        let item_separator = if indent.is_some() { "," } else { ", " };
        JsonStyle {
            indent,
            item_separator: item_separator.into(),
            key_separator: ": ".into(),
            sort_keys: false,
            ensure_ascii,
        }
    }
}

/// `json.dumps(value, ...)` with `style`'s arguments.
pub fn dumps(value: &Value, style: &JsonStyle) -> String {
    let mut out = String::new();
    write_value(value, style, 0, &mut out);
    out
}

/// [`dumps`] onto the end of `out`.
pub fn dumps_into(value: &Value, style: &JsonStyle, out: &mut String) {
    write_value(value, style, 0, out);
}

fn write_value(value: &Value, style: &JsonStyle, level: usize, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => write_str(s, style.ensure_ascii, out),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                separator(i == 0, style, level + 1, out);
                write_value(item, style, level + 1, out);
            }
            close(style, level, out);
            out.push(']');
        }
        Value::Object(map) => {
            write_object(map.iter().map(|(k, v)| (k.as_str(), v)), style, level, out)
        }
    }
}

/// `json.dumps` of a dict given as borrowed entries (in their order, sorted with
/// `sort_keys`), for a caller that does not own the values.
pub fn dumps_object(entries: &[(&str, &Value)], style: &JsonStyle) -> String {
    let mut out = String::new();
    write_object(entries.iter().copied(), style, 0, &mut out);
    out
}

fn write_object<'a>(
    entries: impl Iterator<Item = (&'a str, &'a Value)>,
    style: &JsonStyle,
    level: usize,
    out: &mut String,
) {
    let mut entries = entries.peekable();
    if entries.peek().is_none() {
        out.push_str("{}");
        return;
    }
    out.push('{');
    let mut entry = |i: usize, (k, v): (&str, &Value)| {
        separator(i == 0, style, level + 1, out);
        write_str(k, style.ensure_ascii, out);
        out.push_str(&style.key_separator);
        write_value(v, style, level + 1, out);
    };
    if style.sort_keys {
        let mut sorted: Vec<(&str, &Value)> = entries.collect();
        // Rust orders `str` by UTF-8 bytes, which is Python's code point order.
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        for (i, e) in sorted.into_iter().enumerate() {
            entry(i, e);
        }
    } else {
        for (i, e) in entries.enumerate() {
            entry(i, e);
        }
    }
    close(style, level, out);
    out.push('}');
}

fn separator(first: bool, style: &JsonStyle, level: usize, out: &mut String) {
    if !first {
        out.push_str(&style.item_separator);
    }
    if let Some(indent) = &style.indent {
        out.push('\n');
        out.push_str(&indent.repeat(level));
    }
}

fn close(style: &JsonStyle, level: usize, out: &mut String) {
    if let Some(indent) = &style.indent {
        out.push('\n');
        out.push_str(&indent.repeat(level));
    }
}

/// A number as `json.dumps` writes it: integers as they are, floats by `repr()`, and
/// JavaScript's names for the values JSON lacks.
fn number(n: &serde_json::Number) -> String {
    let Some(f) = n.as_f64().filter(|_| n.is_f64()) else {
        return n.to_string();
    };
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        float_repr(f)
    }
}

fn write_str(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    // The longest prefix written as it is, in one copy.
    let plain = s
        .bytes()
        .position(|b| b < 0x20 || b == b'"' || b == b'\\' || (ensure_ascii && b > 0x7e))
        .unwrap_or(s.len());
    out.push_str(&s[..plain]);
    for c in s[plain..].chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && (c as u32) > 0x7e) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Why msgpack bytes were not written as JSON by [`dumps_packed`]: malformed or too deep, or
/// a map that JSON would show otherwise (a key that is not UTF-8 text, a key twice); the
/// caller decodes the bytes instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotWritten;

impl From<PayloadError> for NotWritten {
    fn from(_: PayloadError) -> Self {
        NotWritten
    }
}

/// Write msgpack bytes as `json.dumps` would write their JSON
/// ([`crate::payload::loads_json`]) with `style` (`sort_keys` not supported), straight from
/// the bytes: no tree is built. Exactly one object must fill `data`; on `Err` nothing was
/// added to `out`.
pub fn dumps_packed(data: &[u8], style: &JsonStyle, out: &mut String) -> Result<(), NotWritten> {
    if style.sort_keys {
        return Err(NotWritten);
    }
    let start = out.len();
    let mut tokens = Tokens::new(data);
    let written = write_packed(&mut tokens, style, 0, out);
    if written.is_err() || !tokens.at_end() {
        out.truncate(start);
        return Err(NotWritten);
    }
    Ok(())
}

/// Maps up to this size find a repeated key by comparing; larger ones hash.
const SMALL_MAP: usize = 16;

fn write_packed(
    tokens: &mut Tokens<'_>,
    style: &JsonStyle,
    level: usize,
    out: &mut String,
) -> Result<(), NotWritten> {
    match tokens.next()? {
        Token::Nil => out.push_str("null"),
        Token::Bool(b) => out.push_str(if b { "true" } else { "false" }),
        Token::UInt(u) => {
            let _ = write!(out, "{u}");
        }
        Token::Int(i) => {
            let _ = write!(out, "{i}");
        }
        // JSON has no NaN or infinities: the decoded tree holds null there.
        Token::Float(f) if !f.is_finite() => out.push_str("null"),
        Token::Float(f) => out.push_str(&float_repr(f)),
        Token::Raw(bytes) | Token::Ext(_, bytes) => {
            write_str(&String::from_utf8_lossy(bytes), style.ensure_ascii, out)
        }
        Token::Array(_) | Token::Map(_) if level >= MAX_DEPTH => return Err(NotWritten),
        Token::Array(0) => out.push_str("[]"),
        Token::Map(0) => out.push_str("{}"),
        Token::Array(len) => {
            out.push('[');
            for i in 0..len {
                separator(i == 0, style, level + 1, out);
                write_packed(tokens, style, level + 1, out)?;
            }
            close(style, level, out);
            out.push(']');
        }
        Token::Map(len) => {
            let mut small: [&[u8]; SMALL_MAP] = [&[]; SMALL_MAP];
            // foldhash: fast on short keys, seeded per process; made for large maps only.
            let mut large = (len > SMALL_MAP).then(|| {
                std::collections::HashSet::with_hasher(foldhash::fast::RandomState::default())
            });
            out.push('{');
            for i in 0..len {
                // Keys that JSON shows as text, each once; anything else is left to the tree.
                let (Token::Raw(key) | Token::Ext(_, key)) = tokens.next()? else {
                    return Err(NotWritten);
                };
                let Ok(text) = std::str::from_utf8(key) else {
                    return Err(NotWritten);
                };
                let repeated = match large.as_mut() {
                    Some(seen) => !seen.insert(key),
                    None => {
                        let seen = small[..i].contains(&key);
                        small[i] = key;
                        seen
                    }
                };
                if repeated {
                    return Err(NotWritten);
                }
                separator(i == 0, style, level + 1, out);
                write_str(text, style.ensure_ascii, out);
                out.push_str(&style.key_separator);
                write_packed(tokens, style, level + 1, out)?;
            }
            close(style, level, out);
            out.push('}');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({"b": [1, 2.5, {"x": null}], "a": {"k": "h\u{e9}llo\n", "e": [], "o": {}}, "t": true})
    }

    #[test]
    fn borrowed_entries_are_written_as_the_object_would_be() {
        let v = sample();
        for style in [JsonStyle::new(None, false), JsonStyle::new(Some(2), true)] {
            let entries: Vec<(&str, &Value)> = v
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.as_str(), v))
                .collect();
            assert_eq!(dumps_object(&entries, &style), dumps(&v, &style));
        }
        assert_eq!(dumps_object(&[], &JsonStyle::new(None, false)), "{}");
    }

    // Expected texts were printed by Python 3.11's json.dumps.
    #[test]
    fn one_line_with_python_separators() {
        assert_eq!(
            dumps(&sample(), &JsonStyle::new(None, false)),
            r#"{"b": [1, 2.5, {"x": null}], "a": {"k": "héllo\n", "e": [], "o": {}}, "t": true}"#
        );
    }

    #[test]
    fn ensure_ascii_escapes_as_utf16_units() {
        let v = json!(["h\u{e9}", "\u{1f600}", "\u{7f}", "\u{1}"]);
        assert_eq!(
            dumps(&v, &JsonStyle::new(None, true)),
            r#"["h\u00e9", "\ud83d\ude00", "\u007f", "\u0001"]"#
        );
        assert_eq!(
            dumps(&v, &JsonStyle::new(None, false)),
            "[\"h\u{e9}\", \"\u{1f600}\", \"\u{7f}\", \"\\u0001\"]"
        );
    }

    #[test]
    fn indented_and_sorted_as_salt_serializes() {
        // json.dumps(d, indent=2, separators=(",", ": "), sort_keys=True)
        let style = JsonStyle {
            sort_keys: true,
            ..JsonStyle::new(Some(2), false)
        };
        assert_eq!(
            dumps(&sample(), &style),
            "{\n  \"a\": {\n    \"e\": [],\n    \"k\": \"h\u{e9}llo\\n\",\n    \"o\": {}\n  },\n  \"b\": [\n    1,\n    2.5,\n    {\n      \"x\": null\n    }\n  ],\n  \"t\": true\n}"
        );
    }

    #[test]
    fn zero_and_negative_indents_break_lines_only() {
        assert_eq!(
            dumps(&json!([1, [2]]), &JsonStyle::new(Some(0), false)),
            "[\n1,\n[\n2\n]\n]"
        );
        assert_eq!(
            dumps(&json!({"a": 1}), &JsonStyle::new(Some(-3), false)),
            "{\n\"a\": 1\n}"
        );
    }

    #[test]
    fn floats_by_repr() {
        assert_eq!(
            dumps(
                &json!([1.0, 1e16, 0.0001, -2.5e-7]),
                &JsonStyle::new(None, false)
            ),
            "[1.0, 1e+16, 0.0001, -2.5e-07]"
        );
    }

    /// What the tree path writes: decode to JSON, then dump.
    fn through_tree(bytes: &[u8], style: &JsonStyle) -> String {
        dumps(&crate::payload::loads_json(bytes).expect("decodes"), style)
    }

    fn packed(bytes: &[u8], style: &JsonStyle) -> Result<String, NotWritten> {
        // Written after other text: only its own part is added (or nothing).
        let mut out = String::from("x");
        dumps_packed(bytes, style, &mut out).map(|()| out[1..].to_string())
    }

    #[test]
    fn packed_bytes_are_written_as_their_decoded_tree_would_be() {
        use crate::payload::{dumps_bin, Value as P};
        let big: Vec<(P, P)> = (0..40)
            .map(|i| (P::from(format!("k{i}")), P::from(i)))
            .collect();
        let value = P::Map(vec![
            (P::from("s"), P::from("h\u{e9}llo \"q\"\n\u{1}")),
            (
                P::from("ints"),
                P::Array(vec![
                    P::from(0),
                    P::from(-1),
                    P::from(-200),
                    P::from(u64::MAX),
                    P::from(i64::MIN),
                ]),
            ),
            (
                P::from("floats"),
                P::Array(vec![
                    P::F64(1.0),
                    P::F64(1e16),
                    P::F32(0.5),
                    P::F64(f64::NAN),
                    P::F64(f64::INFINITY),
                ]),
            ),
            (
                P::from("bools"),
                P::Array(vec![P::Boolean(true), P::Boolean(false), P::Nil]),
            ),
            (P::from("bin"), P::Binary(vec![0xff, b'a', 0xfe])),
            (
                P::from("ext"),
                P::Ext(78, b"20261128T11:00:00.000000".to_vec()),
            ),
            (
                P::from("empty"),
                P::Array(vec![P::Map(vec![]), P::Array(vec![])]),
            ),
            (P::Binary(b"bin key".to_vec()), P::Map(big)),
            (P::from("\u{1f600}"), P::from("astral \u{1f600}")),
        ]);
        for bytes in [crate::payload::dumps(&value), dumps_bin(&value)] {
            for style in [
                JsonStyle::new(None, false),
                JsonStyle::new(None, true),
                JsonStyle::new(Some(2), false),
                JsonStyle::new(Some(-1), true),
            ] {
                assert_eq!(
                    packed(&bytes, &style),
                    Ok(through_tree(&bytes, &style)),
                    "{style:?}"
                );
            }
        }
    }

    #[test]
    fn maps_json_would_show_otherwise_are_left_to_the_tree() {
        use crate::payload::{dumps, Value as P};
        let style = JsonStyle::new(None, false);
        let map = |pairs: Vec<(P, P)>| dumps(&P::Map(pairs));
        let repeated: Vec<(P, P)> = (0..40)
            .map(|i| (P::from(format!("k{}", i % 39)), P::from(i)))
            .collect();
        for bytes in [
            // A key that is not text, one that is not UTF-8, a key twice (small and large).
            map(vec![(P::from(1), P::Nil)]),
            map(vec![(P::Binary(vec![0xff]), P::Nil)]),
            map(vec![(P::from("a"), P::from(1)), (P::from("a"), P::from(2))]),
            map(repeated),
            // Malformed: truncated, trailing bytes.
            vec![0x92, 0x01],
            vec![0x01, 0x02],
        ] {
            assert_eq!(packed(&bytes, &style), Err(NotWritten), "{bytes:?}");
        }
        // Too deep for the decoder: too deep here too, even for an empty innermost array.
        let mut deep = vec![0x91; crate::payload::MAX_DEPTH];
        deep.push(0x90);
        assert!(crate::payload::loads_json(&deep).is_err());
        assert_eq!(packed(&deep, &style), Err(NotWritten));
        deep.remove(0);
        assert_eq!(packed(&deep, &style), Ok(through_tree(&deep, &style)));
        let mut sorted = style.clone();
        sorted.sort_keys = true;
        assert_eq!(packed(&[0x80], &sorted), Err(NotWritten));
    }

    #[test]
    fn a_field_is_found_only_when_the_map_has_it_once() {
        use crate::payload::{dumps, map_field, Value as P};
        let data = dumps(&P::Map(vec![
            (P::from("return"), P::Array(vec![P::from(1)])),
            (P::from("success"), P::Boolean(true)),
        ]));
        assert_eq!(map_field(&data, "return"), Some(&[0x91, 0x01][..]));
        assert_eq!(map_field(&data, "success"), Some(&[0xc3][..]));
        assert_eq!(map_field(&data, "jid"), None);
        let twice = dumps(&P::Map(vec![
            (P::from("return"), P::from(1)),
            (P::from("return"), P::from(2)),
        ]));
        assert_eq!(map_field(&twice, "return"), None);
        assert_eq!(map_field(&[0x91, 0x01], "return"), None);
    }
}
