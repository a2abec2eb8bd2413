//! Python's `json.dumps`, as Salt writes JSON (the `json` outputter, salt-api's answers, the
//! `json` Jinja filter, `file.serialize`): its separators, `indent`, `sort_keys`,
//! `ensure_ascii` escapes and float `repr()`. One implementation for every crate.

use std::fmt::Write as _;

use serde_json::Value;

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
}
