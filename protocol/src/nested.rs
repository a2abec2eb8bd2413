//! Salt's `nested` outputter and the Python `str()`/`repr()` of JSON values it prints with:
//! shared by the tools' output and by modules whose error texts embed nested output (Salt's
//! `CommandExecutionError` with `info`).

use serde_json::Value;

use crate::pyrepr::{float_repr as python_float, str_repr as python_str_repr};
use crate::yaml::sorted;

/// Python's `str.rstrip()`.
pub fn python_rstrip(text: &str) -> &str {
    text.trim_end_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
}

/// Python's `str.splitlines()`: no trailing empty line.
pub fn splitlines(text: &str) -> Vec<&str> {
    py_splitlines(text, false)
}

/// Python's `str.splitlines(True)`: the lines with their line breaks.
pub fn splitlines_keepends(text: &str) -> Vec<&str> {
    py_splitlines(text, true)
}

/// Python's `str.splitlines(keepends)`: every line break Python knows (`\r\n` as one).
fn py_splitlines(text: &str, keepends: bool) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let is_break = matches!(
            c,
            '\n' | '\r'
                | '\x0b'
                | '\x0c'
                | '\x1c'
                | '\x1d'
                | '\x1e'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if is_break {
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some(&(j, '\n')) = chars.peek() {
                    chars.next();
                    end = j + 1;
                }
            }
            lines.push(&text[start..if keepends { end } else { i }]);
            start = end;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Salt's `stringutils.is_binary` on a block of bytes: NUL bytes, or over 30% bytes that are
/// not text.
pub fn is_binary(block: &[u8]) -> bool {
    if block.is_empty() {
        return false;
    }
    if block.contains(&0) {
        return true;
    }
    let high_is_text = match std::str::from_utf8(block) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    let nontext = block
        .iter()
        .filter(|&&c| {
            let text = (32..127).contains(&c)
                || matches!(c, b'\n' | b'\r' | b'\t' | 0x0c | 0x08)
                || (high_is_text && (128..255).contains(&c));
            !text
        })
        .count();
    (nontext as f64) / (block.len() as f64) > 0.30
}

/// Salt's `get_colors`: every code starts with a reset.
pub struct Colors {
    pub red: &'static str,
    pub light_red: &'static str,
    pub green: &'static str,
    pub light_green: &'static str,
    pub light_yellow: &'static str,
    pub blue: &'static str,
    pub light_blue: &'static str,
    pub magenta: &'static str,
    pub light_magenta: &'static str,
    pub cyan: &'static str,
    pub dark_gray: &'static str,
    pub light_gray: &'static str,
    pub white: &'static str,
    pub endc: &'static str,
}

impl Colors {
    pub fn new(on: bool) -> Self {
        let pick = |code: &'static str| if on { code } else { "" };
        Colors {
            red: pick("\x1b[0;31m"),
            light_red: pick("\x1b[0;1;31m"),
            green: pick("\x1b[0;32m"),
            light_green: pick("\x1b[0;1;32m"),
            light_yellow: pick("\x1b[0;1;33m"),
            blue: pick("\x1b[0;34m"),
            light_blue: pick("\x1b[0;1;34m"),
            magenta: pick("\x1b[0;35m"),
            light_magenta: pick("\x1b[0;1;35m"),
            cyan: pick("\x1b[0;36m"),
            dark_gray: pick("\x1b[0;1;30m"),
            light_gray: pick("\x1b[0;37m"),
            white: pick("\x1b[0;1;37m"),
            endc: pick("\x1b[0;0m"),
        }
    }
}

// ---------------------------------------------------------------- nested

pub fn nested(data: &Value, colors: &Colors, retcode: i64) -> String {
    let mut lines = Vec::new();
    Nested { colors, retcode }.display(data, 0, "", &mut lines);
    lines.join("\n")
}

pub struct Nested<'a> {
    pub colors: &'a Colors,
    pub retcode: i64,
}

impl Nested<'_> {
    pub fn line(
        &self,
        indent: usize,
        color: &str,
        msg: &str,
        prefix: &str,
        suffix: &str,
    ) -> String {
        format!(
            "{:indent$}{color}{prefix}{msg}{}{suffix}",
            "", self.colors.endc
        )
    }

    pub fn container_color(&self, normal: &'static str) -> &'static str {
        if self.retcode != 0 {
            self.colors.red
        } else {
            normal
        }
    }

    pub fn display(&self, ret: &Value, indent: usize, prefix: &str, out: &mut Vec<String>) {
        match ret {
            Value::Null | Value::Bool(_) | Value::Number(_) => {
                out.push(self.line(
                    indent,
                    self.colors.light_yellow,
                    &python_repr(ret),
                    prefix,
                    "",
                ));
            }
            Value::String(s) => {
                let blank = " ".repeat(prefix.len());
                for (i, line) in splitlines(s).into_iter().enumerate() {
                    // Salt's strip_colors: a string may not drive the terminal.
                    let line = line.replace('\x1b', "?");
                    let p = if i == 0 { prefix } else { blank.as_str() };
                    out.push(self.line(indent, self.colors.green, &line, p, ""));
                }
            }
            Value::Array(items) => {
                let color = self.container_color(self.colors.green);
                for item in items {
                    match item {
                        Value::Array(_) | Value::Object(_) => {
                            out.push(self.line(indent, color, "|_", "", ""));
                            let p = if item.is_object() { "" } else { "- " };
                            self.display(item, indent + 2, p, out);
                        }
                        _ => self.display(item, indent, "- ", out),
                    }
                }
            }
            Value::Object(map) => {
                let color = self.container_color(self.colors.cyan);
                if indent > 0 {
                    out.push(self.line(indent, color, "----------", "", ""));
                }
                for (key, val) in sorted(map) {
                    out.push(self.line(indent, color, key, prefix, ":"));
                    self.display(val, indent + 4, "", out);
                }
            }
        }
    }
}

/// Python's `str()` of a value: strings as-is, everything else as `repr()`.
pub fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

/// Python's `repr()` of a value, dict keys in their original order.
pub fn python_repr(value: &Value) -> String {
    repr_inner(value, false)
}

pub fn python_repr_sorted(value: &Value) -> String {
    repr_inner(value, true)
}

pub fn repr_inner(value: &Value, sort: bool) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => python_number(n),
        Value::String(s) => python_str_repr(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|v| repr_inner(v, sort)).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let items = if sort {
                sorted(map)
            } else {
                map.iter().collect()
            };
            let parts: Vec<String> = items
                .into_iter()
                .map(|(k, v)| format!("{}: {}", python_str_repr(k), repr_inner(v, sort)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

pub fn python_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        python_float(n.as_f64().unwrap_or(f64::NAN))
    }
}
