//! YAML output in the block style of Salt's `safe_dump(default_flow_style=False)`, safe for YAML
//! 1.1 readers (PyYAML, i.e. Salt's own clients): a string is written plain only when no YAML
//! 1.1 or 1.2 reader could take it for anything else (`yes`, `1:30`, `1_000`, `2024-01-01`, `=`,
//! `1e5` are quoted); floats always carry a `.` (`1.0e+16`) so YAML 1.1 reads them as floats.

use serde_json::{Map, Value};

use super::python_float_repr;

/// Serialise `value` as a YAML document (PyYAML's layout: two-space indent, sequences inside
/// mappings not indented, empty collections as `{}` / `[]`).
pub(crate) fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => mapping(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => sequence(&mut out, items, 0),
        scalar => {
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
    out
}

fn mapping(out: &mut String, map: &Map<String, Value>, indent: usize) {
    for (key, value) in map {
        out.push_str(&" ".repeat(indent));
        out.push_str(&string(key));
        out.push(':');
        match value {
            Value::Object(child) if !child.is_empty() => {
                out.push('\n');
                mapping(out, child, indent + 2);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                sequence(out, items, indent);
            }
            scalar => {
                out.push(' ');
                out.push_str(&inline(scalar));
                out.push('\n');
            }
        }
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        let mut child = String::new();
        match item {
            Value::Object(map) if !map.is_empty() => mapping(&mut child, map, indent + 2),
            Value::Array(inner) if !inner.is_empty() => sequence(&mut child, inner, indent + 2),
            scalar => {
                out.push_str(&" ".repeat(indent));
                out.push_str("- ");
                out.push_str(&inline(scalar));
                out.push('\n');
                continue;
            }
        }
        // The nested block starts on the dash's line: "- a: 1\n  b: 2".
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        out.push_str(&child[indent + 2..]);
    }
}

/// A scalar or an empty collection on one line.
fn inline(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => {
                let text = python_float_repr(f);
                // PyYAML's representer: YAML 1.1 floats need a dot.
                if !text.contains('.') && text.contains('e') {
                    text.replacen('e', ".0e", 1)
                } else {
                    text
                }
            }
            _ => n.to_string(),
        },
        Value::String(s) => string(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A string: plain when unambiguous, else single-quoted, else double-quoted with escapes.
fn string(s: &str) -> String {
    if is_plain_safe(s) {
        return s.to_string();
    }
    let needs_escapes = s
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}'));
    if !needs_escapes {
        return format!("'{}'", s.replace('\'', "''"));
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Conservative: starts with a letter (or `_`, `/`), only "quiet" characters, no `: ` or ` #`,
/// no trailing space, and not one of the words YAML 1.1 reads as a boolean or null.
fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !(first.is_alphabetic() || first == '_' || first == '/') {
        return false;
    }
    if s.ends_with([' ', ':']) || s.contains(": ") || s.contains(" #") {
        return false;
    }
    let quiet = |c: char| c.is_alphanumeric() || " _-./:@+=()%,'".contains(c);
    if !s.chars().all(quiet) {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    !matches!(
        lower.as_str(),
        "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn layout_follows_pyyaml_block_style() {
        let value = json!({"return": [{"m1": true, "m2": [1, 2], "e": {}, "l": [], "n": null,
                                        "nested": [[1, 2], {"a": {"b": 1}}], "s": "it's", "u": "é"}]});
        assert_eq!(
            to_string(&value),
            "return:\n- m1: true\n  m2:\n  - 1\n  - 2\n  e: {}\n  l: []\n  'n': null\n  nested:\n  - - 1\n    - 2\n  \
             - a:\n      b: 1\n  s: it's\n  u: é\n"
        );
        assert_eq!(to_string(&json!("Welcome")), "Welcome\n");
        assert_eq!(to_string(&json!({})), "{}\n");
        assert_eq!(to_string(&json!([])), "[]\n");
        assert_eq!(
            to_string(&json!({"f": 1e16, "g": 0.5, "h": 2.0})),
            "f: 1.0e+16\ng: 0.5\nh: 2.0\n"
        );
    }

    #[test]
    fn ambiguous_strings_are_quoted() {
        let cases = [
            ("yes", "'yes'"),
            ("No", "'No'"),
            ("y", "'y'"),
            ("null", "'null'"),
            ("~", "'~'"),
            ("", "''"),
            ("010", "'010'"),
            ("1:30", "'1:30'"),
            ("1_000", "'1_000'"),
            ("1e5", "'1e5'"),
            ("2024-01-01", "'2024-01-01'"),
            ("=", "'='"),
            ("<<", "'<<'"),
            ("-x", "'-x'"),
            ("a: b", "'a: b'"),
            ("a #b", "'a #b'"),
            ("it's [x]", "'it''s [x]'"),
            ("it's", "it's"),
            ("line\nbreak\t\"q\"\\", "\"line\\nbreak\\t\\\"q\\\"\\\\\""),
            ("bell\u{7}", "\"bell\\u0007\""),
            ("salt/job/123/ret/m1", "salt/job/123/ret/m1"),
            ("test.ping", "test.ping"),
            ("web*", "'web*'"),
        ];
        for (text, expected) in cases {
            assert_eq!(string(text), expected, "{text:?}");
        }
    }

    #[test]
    fn output_reads_back_identically_under_yaml_1_1_and_1_2() {
        let strings = [
            "yes",
            "no",
            "on",
            "OFF",
            "y",
            "n",
            "true",
            "null",
            "Null",
            "~",
            "",
            " ",
            " lead",
            "trail ",
            "010",
            "0o10",
            "0x1F",
            "0b1",
            "+1",
            "-1",
            "1.",
            ".5",
            "1e5",
            "1.0e+5",
            ".inf",
            "-.inf",
            ".nan",
            "1:30",
            "1_000",
            "2024-01-01",
            "2024-01-01 10:00:00",
            "=",
            "<<",
            "&a",
            "*a",
            "!tag",
            "%x",
            "@x",
            "`x",
            "|",
            ">",
            "#",
            "a#b",
            "a #b",
            "a: b",
            "a:b",
            "a:",
            "- a",
            "-",
            "--- x",
            "...",
            "[1, 2]",
            "{a: 1}",
            "?",
            "? x",
            "'q'",
            "\"dq\"",
            "it's",
            "back\\slash",
            "tab\there",
            "new\nline",
            "cr\r",
            "nul\0",
            "\u{7f}",
            "é",
            "日本",
            "\u{2028}",
            "\u{feff}x",
            "x\u{85}y",
            "salt/job/1/ret/m1",
            "G@os:Debian",
            "http://h:80/p?q=1&r=2",
            "C:\\Windows",
            "100%",
            "a,b",
            "(x)",
            "x=1",
            "_private",
            "/etc/salt",
        ];
        let mut map = Map::new();
        for (i, s) in strings.iter().enumerate() {
            map.insert(s.to_string(), json!(s));
            map.insert(format!("k{i}"), json!([s, {"v": s}]));
        }
        let value = json!({"strings": map, "numbers": [0, -1, 18446744073709551615u64, 0.1, -2.5, 1e-7, 1e300, 123456.0],
                           "other": [true, false, null, [], {}]});
        let text = to_string(&value);
        let yaml_1_1 =
            crate::body::yaml::load(&text).unwrap_or_else(|e| panic!("1.1 reader: {e}\n{text}"));
        assert_eq!(yaml_1_1, value, "YAML 1.1 round trip\n{text}");
        let yaml_1_2: Value =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("1.2 reader: {e}\n{text}"));
        assert_eq!(yaml_1_2, value, "YAML 1.2 round trip\n{text}");
    }
}
