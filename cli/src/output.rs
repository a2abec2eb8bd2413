//! Salt's outputters (`salt/output/*.py`), so the tools print what Salt prints.
//!
//! [`render`] returns the text Salt's `try_printout` produces: the outputter's
//! text with trailing whitespace removed. The caller prints it followed by one
//! newline, and prints nothing at all when it is empty (Salt's `display_output`
//! skips empty text).

use std::fmt::Write as _;

use brine_protocol::pyrepr::{float_repr as python_float, str_repr as python_str_repr};
use serde_json::{Map, Value};

/// One of Salt's outputters, as named by `--out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outputter {
    /// `nested`: Salt's default, indented key/value lines.
    Nested,
    /// `json`: `json.dumps(indent=4)`, keys in their original order.
    Json,
    /// `yaml`: PyYAML `safe_dump` in block style, keys sorted.
    Yaml,
    /// `txt` (also `text`): `key: line` per line of each value.
    Txt,
    /// `raw`: Python's `str()` of the data.
    Raw,
    /// `key`: the `salt-key` listing.
    Key,
    /// `no_return`: what Salt uses for minions that did not return.
    NoReturn,
}

/// An `--out` value that names no outputter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid outputter '{0}': valid outputters are nested, json, yaml, txt, raw, key, no_return"
)]
pub struct UnknownOutputter(pub String);

impl std::str::FromStr for Outputter {
    type Err = UnknownOutputter;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "nested" => Ok(Self::Nested),
            "json" => Ok(Self::Json),
            "yaml" => Ok(Self::Yaml),
            "txt" | "text" => Ok(Self::Txt),
            "raw" => Ok(Self::Raw),
            "key" => Ok(Self::Key),
            "no_return" => Ok(Self::NoReturn),
            other => Err(UnknownOutputter(other.to_owned())),
        }
    }
}

/// `--out-indent` with a negative value (Salt: "negative values disable indentation").
pub const NO_INDENT: usize = usize::MAX;

/// How to print: `--no-color`/tty detection, `--out-indent`, `--static`.
#[derive(Debug, Clone, Default)]
pub struct OutputOptions {
    /// ANSI colors as Salt's (pass false when stdout is not a tty).
    pub color: bool,
    /// `--out-indent`: `None` = not given (json 4, yaml 2), [`NO_INDENT`] = negative.
    pub indent: Option<usize>,
    /// `--static`: the caller gathers every minion's return into one map and
    /// renders it once; rendering itself is the same.
    pub static_: bool,
}

/// Format one "event" of output (a map `{minion_id: return}`, or any value for
/// runners) exactly as Salt prints it, without the final newline.
pub fn render(out: Outputter, data: &Value, opts: &OutputOptions) -> String {
    render_with_retcode(out, data, opts, 0)
}

/// [`render`] for a return whose retcode is known: Salt's nested outputter
/// colors keys red when it is not 0.
pub fn render_with_retcode(
    out: Outputter,
    data: &Value,
    opts: &OutputOptions,
    retcode: i64,
) -> String {
    let colors = Colors::new(opts.color);
    let text = match out {
        Outputter::Nested => nested(data, &colors, retcode),
        Outputter::Json => json(data, opts.indent),
        Outputter::Yaml => yaml(data, opts.indent),
        Outputter::Txt => txt(data),
        Outputter::Raw => python_str(data),
        // Salt falls back to nested when the key outputter cannot read the data.
        Outputter::Key => key(data, &colors).unwrap_or_else(|| nested(data, &colors, retcode)),
        Outputter::NoReturn => no_return(data, &colors),
    };
    python_rstrip(&text).to_owned()
}

/// What `salt` prints when the target matched no minion (Salt's `_check_pub_data`).
pub const NO_MINIONS_MATCHED: &str =
    "No minions matched the target. No command was sent, no jid was assigned.";

/// The return Salt substitutes for a minion it believes is not connected.
pub const NOT_CONNECTED: &str = "Minion did not return. [Not connected]";

/// The return Salt substitutes for a targeted minion that did not answer in time;
/// it is printed with the `no_return` outputter (unless `--out` is given) and counts as retcode 1.
pub fn no_response_message(jid: &str) -> String {
    format!(
        "Minion did not return. [No response]\nThe minions may not have all finished running and any \
         remaining minions will return upon completion. To look up the return data for this job later, \
         run the following command:\n\nsalt-run jobs.lookup_jid {jid}"
    )
}

/// Salt's `get_printout` choice: `--out` wins, else the outputter the return
/// asked for (`out` in the minion's return), else nested. Outputters Brine does
/// not have (e.g. `highstate`) fall back to nested, as Salt does for unknown ones.
pub fn choose_outputter(cli: Option<Outputter>, returned: Option<&str>) -> Outputter {
    cli.or_else(|| returned.and_then(|name| name.parse().ok()))
        .unwrap_or(Outputter::Nested)
}

/// Python's `str.rstrip()`.
fn python_rstrip(text: &str) -> &str {
    text.trim_end_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
}

/// Python's `str.splitlines()`: no trailing empty line.
fn splitlines(text: &str) -> Vec<&str> {
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
            lines.push(&text[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some(&(j, '\n')) = chars.peek() {
                    chars.next();
                    end = j + 1;
                }
            }
            start = end;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Salt's `get_colors`: every code starts with a reset.
struct Colors {
    red: &'static str,
    light_red: &'static str,
    green: &'static str,
    light_green: &'static str,
    light_yellow: &'static str,
    blue: &'static str,
    light_blue: &'static str,
    magenta: &'static str,
    light_magenta: &'static str,
    cyan: &'static str,
    endc: &'static str,
}

impl Colors {
    fn new(on: bool) -> Self {
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
            endc: pick("\x1b[0;0m"),
        }
    }
}

// ---------------------------------------------------------------- nested

fn nested(data: &Value, colors: &Colors, retcode: i64) -> String {
    let mut lines = Vec::new();
    Nested { colors, retcode }.display(data, 0, "", &mut lines);
    lines.join("\n")
}

struct Nested<'a> {
    colors: &'a Colors,
    retcode: i64,
}

impl Nested<'_> {
    fn line(&self, indent: usize, color: &str, msg: &str, prefix: &str, suffix: &str) -> String {
        format!(
            "{:indent$}{color}{prefix}{msg}{}{suffix}",
            "", self.colors.endc
        )
    }

    fn container_color(&self, normal: &'static str) -> &'static str {
        if self.retcode != 0 {
            self.colors.red
        } else {
            normal
        }
    }

    fn display(&self, ret: &Value, indent: usize, prefix: &str, out: &mut Vec<String>) {
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

fn sorted(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut items: Vec<_> = map.iter().collect();
    items.sort_by(|a, b| a.0.cmp(b.0));
    items
}

// ---------------------------------------------------------------- no_return

fn no_return(data: &Value, colors: &Colors) -> String {
    let mut out = String::new();
    no_return_display(data, 0, colors, &mut out);
    out
}

fn no_return_display(ret: &Value, indent: usize, colors: &Colors, out: &mut String) {
    match ret {
        Value::String(s) => {
            for line in s.split('\n') {
                let _ = writeln!(out, "{}{:indent$}{line}{}", colors.red, "", colors.endc);
            }
        }
        Value::Object(map) => {
            for (key, val) in sorted(map) {
                let _ = writeln!(out, "{}{:indent$}{key}{}:", colors.cyan, "", colors.endc);
                no_return_display(val, indent + 4, colors, out);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------- key

/// Salt's key outputter for the ZeroMQ transport; `None` for data it cannot show.
fn key(data: &Value, colors: &Colors) -> Option<String> {
    let map = data.as_object()?;
    let mut out = String::new();
    for (status, keys) in sorted(map) {
        let (title, color) = match status.as_str() {
            "minions_pre" => (
                format!("{}Unaccepted Keys:{}", colors.light_red, colors.endc),
                colors.red,
            ),
            "minions" => (
                format!("{}Accepted Keys:{}", colors.light_green, colors.endc),
                colors.green,
            ),
            "minions_denied" => (
                format!("{}Denied Keys:{}", colors.light_magenta, colors.endc),
                colors.magenta,
            ),
            "minions_rejected" => (
                format!("{}Rejected Keys:{}", colors.light_blue, colors.endc),
                colors.blue,
            ),
            "local" => (
                format!("{}Local Keys:{}", colors.light_magenta, colors.endc),
                colors.magenta,
            ),
            _ => return None,
        };
        out.push_str(&title);
        out.push('\n');
        match keys {
            Value::Array(items) => {
                let mut names: Vec<String> = items.iter().map(python_str).collect();
                names.sort();
                for name in names {
                    let _ = writeln!(out, "{color}{}{}", name.replace('\x1b', "?"), colors.endc);
                }
            }
            Value::Object(entries) => {
                for (name, value) in sorted(entries) {
                    let _ = writeln!(
                        out,
                        "{color}{}:  {}{}",
                        name.replace('\x1b', "?"),
                        python_str(value),
                        colors.endc
                    );
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

// ---------------------------------------------------------------- txt

fn txt(data: &Value) -> String {
    let mut out = String::new();
    match data {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::String(s) => {
                        for line in splitlines(s) {
                            let _ = writeln!(out, "{key}: {line}");
                        }
                    }
                    other => {
                        let _ = writeln!(out, "{key}: {}", python_str(other));
                    }
                }
            }
        }
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        other => {
            out.push_str(&pformat(other, 0, 0));
            out.push('\n');
        }
    }
    out
}

/// Python's `pprint.pformat` (width 80, dict keys sorted).
fn pformat(value: &Value, indent: usize, allowance: usize) -> String {
    const WIDTH: usize = 80;
    let rep = python_repr_sorted(value);
    let max_width = WIDTH.saturating_sub(indent + allowance);
    if rep.chars().count() <= max_width {
        return rep;
    }
    match value {
        Value::Object(map) if !map.is_empty() => {
            let inner = indent + 1;
            let items = sorted(map);
            let last = items.len() - 1;
            let mut out = String::from("{");
            for (i, (k, v)) in items.into_iter().enumerate() {
                let key_rep = python_str_repr(k);
                let a = if i == last { allowance + 1 } else { 1 };
                let _ = write!(
                    out,
                    "{key_rep}: {}",
                    pformat(v, inner + key_rep.chars().count() + 2, a)
                );
                if i != last {
                    let _ = write!(out, ",\n{:inner$}", "");
                }
            }
            out.push('}');
            out
        }
        Value::Array(items) if !items.is_empty() => {
            let inner = indent + 1;
            let last = items.len() - 1;
            let mut out = String::from("[");
            for (i, v) in items.iter().enumerate() {
                let a = if i == last { allowance + 1 } else { 1 };
                out.push_str(&pformat(v, inner, a));
                if i != last {
                    let _ = write!(out, ",\n{:inner$}", "");
                }
            }
            out.push(']');
            out
        }
        _ => rep,
    }
}

// ---------------------------------------------------------------- Python repr

/// Python's `str()` of a value: strings as-is, everything else as `repr()`.
fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => python_repr(other),
    }
}

/// Python's `repr()` of a value, dict keys in their original order.
fn python_repr(value: &Value) -> String {
    repr_inner(value, false)
}

fn python_repr_sorted(value: &Value) -> String {
    repr_inner(value, true)
}

fn repr_inner(value: &Value, sort: bool) -> String {
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

fn python_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        python_float(n.as_f64().unwrap_or(f64::NAN))
    }
}

// ---------------------------------------------------------------- json

/// Python's `json.dumps(data, indent=..., ensure_ascii=False)`.
fn json(data: &Value, indent: Option<usize>) -> String {
    let mut out = String::new();
    let indent = match indent {
        None => Some(4),
        Some(NO_INDENT) => None,
        Some(n) => Some(n),
    };
    json_value(data, indent, 0, &mut out);
    out
}

fn json_value(value: &Value, indent: Option<usize>, level: usize, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&json_number(n)),
        Value::String(s) => json_string(s, out),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                json_separator(i == 0, indent, level + 1, out);
                json_value(item, indent, level + 1, out);
            }
            json_close(indent, level, out);
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                json_separator(i == 0, indent, level + 1, out);
                json_string(k, out);
                out.push_str(": ");
                json_value(v, indent, level + 1, out);
            }
            json_close(indent, level, out);
            out.push('}');
        }
    }
}

fn json_separator(first: bool, indent: Option<usize>, level: usize, out: &mut String) {
    match indent {
        Some(n) => {
            if !first {
                out.push(',');
            }
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
        None if !first => out.push_str(", "),
        None => {}
    }
}

fn json_close(indent: Option<usize>, level: usize, out: &mut String) {
    if let Some(n) = indent {
        out.push('\n');
        out.push_str(&" ".repeat(n * level));
    }
}

fn json_number(n: &serde_json::Number) -> String {
    if n.is_f64() {
        let f = n.as_f64().unwrap_or(f64::NAN);
        if f.is_nan() {
            "NaN".to_owned()
        } else if f.is_infinite() {
            if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
        } else {
            python_float(f)
        }
    } else {
        n.to_string()
    }
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

// ---------------------------------------------------------------- yaml

/// PyYAML's `safe_dump(data, default_flow_style=False, allow_unicode=True)`
/// (flow style for a negative `--out-indent`), keys sorted, width 80.
fn yaml(data: &Value, indent: Option<usize>) -> String {
    let (flow, best_indent) = match indent {
        None => (false, 2),
        Some(NO_INDENT) => (true, 2),
        Some(n) => (false, if (2..10).contains(&n) { n } else { 2 }),
    };
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        whitespace: true,
        indention: true,
        best_indent,
        flow,
    };
    if flow {
        e.flow_node(data, 0);
    } else {
        e.block_node(data, None, Context::Root);
    }
    e.out.push('\n');
    e.out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Root,
    /// A value in a block mapping.
    MappingValue,
    /// An item in a block sequence.
    SequenceItem,
}

/// A small re-creation of PyYAML's emitter state for block-style output.
struct Emitter {
    out: String,
    column: usize,
    whitespace: bool,
    indention: bool,
    best_indent: usize,
    /// Inside flow collections plain scalars follow stricter rules.
    flow: bool,
}

const BEST_WIDTH: usize = 80;

impl Emitter {
    fn write(&mut self, data: &str) {
        self.column += data.chars().count();
        self.out.push_str(data);
    }

    fn line_break(&mut self) {
        self.out.push('\n');
        self.whitespace = true;
        self.indention = true;
        self.column = 0;
    }

    fn write_indent(&mut self, indent: usize) {
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.line_break();
        }
        if self.column < indent {
            self.whitespace = true;
            let pad = " ".repeat(indent - self.column);
            self.write(&pad);
        }
    }

    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        whitespace: bool,
        indention: bool,
    ) {
        if self.whitespace || !need_whitespace {
            self.write(indicator);
        } else {
            self.write(&format!(" {indicator}"));
        }
        self.whitespace = whitespace;
        self.indention = self.indention && indention;
    }

    /// `indent` is the enclosing collection's indent (`None` at the root).
    fn block_node(&mut self, value: &Value, indent: Option<usize>, context: Context) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                let own = indent.map_or(0, |i| i + self.best_indent);
                for (k, v) in sorted(map) {
                    self.write_indent(own);
                    self.scalar(&Value::String(k.clone()), own, true);
                    self.write_indicator(":", false, false, false);
                    self.block_node(v, Some(own), Context::MappingValue);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                // Sequences directly under a mapping key are not indented further.
                let indentless = context == Context::MappingValue && !self.indention;
                let own = match indent {
                    None => 0,
                    Some(i) if indentless => i,
                    Some(i) => i + self.best_indent,
                };
                for item in items {
                    self.write_indent(own);
                    self.write_indicator("-", true, false, true);
                    self.block_node(item, Some(own), Context::SequenceItem);
                }
            }
            Value::Object(_) => self.write_indicator("{}", true, false, false),
            Value::Array(_) => self.write_indicator("[]", true, false, false),
            scalar => {
                let scalar_indent = indent.map_or(self.best_indent, |i| i + self.best_indent);
                self.scalar(scalar, scalar_indent, false);
            }
        }
    }

    fn flow_node(&mut self, value: &Value, level: usize) {
        match value {
            Value::Object(map) => {
                self.write_indicator("{", true, true, false);
                for (i, (k, v)) in sorted(map).into_iter().enumerate() {
                    if i > 0 {
                        self.write_indicator(",", false, false, false);
                    }
                    self.flow_wrap(level + 1);
                    self.scalar(
                        &Value::String(k.clone()),
                        (level + 1) * self.best_indent,
                        true,
                    );
                    self.write_indicator(":", false, false, false);
                    self.flow_node(v, level + 1);
                }
                self.write_indicator("}", false, false, false);
            }
            Value::Array(items) => {
                self.write_indicator("[", true, true, false);
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        self.write_indicator(",", false, false, false);
                    }
                    self.flow_wrap(level + 1);
                    self.flow_node(v, level + 1);
                }
                self.write_indicator("]", false, false, false);
            }
            scalar => self.scalar(scalar, (level + 1) * self.best_indent, false),
        }
    }

    fn flow_wrap(&mut self, level: usize) {
        if self.column > BEST_WIDTH {
            self.write_indent(level * self.best_indent);
        }
    }

    fn scalar(&mut self, value: &Value, indent: usize, simple_key: bool) {
        let (text, is_str) = match value {
            Value::Null => ("null".to_owned(), false),
            Value::Bool(b) => (if *b { "true" } else { "false" }.to_owned(), false),
            Value::Number(n) => (yaml_number(n), false),
            Value::String(s) => (s.clone(), true),
            _ => (String::new(), false),
        };
        if !is_str {
            self.write_plain(&text, indent, !simple_key);
            return;
        }
        let a = analyze(&text);
        let implicit = !resolves_to_non_str(&text);
        let allow_plain = if self.flow {
            a.allow_flow_plain
        } else {
            a.allow_block_plain
        };
        if implicit && !(simple_key && (a.empty || a.multiline)) && allow_plain {
            self.write_plain(&text, indent, !simple_key);
        } else if a.allow_single_quoted && !(simple_key && a.multiline) {
            self.write_single_quoted(&text, indent, !simple_key);
        } else {
            self.write_double_quoted(&text, indent, !simple_key);
        }
    }

    fn write_plain(&mut self, text: &str, indent: usize, split: bool) {
        if text.is_empty() {
            return;
        }
        if !self.whitespace {
            self.write(" ");
        }
        self.whitespace = false;
        self.indention = false;
        let chars: Vec<char> = text.chars().collect();
        let (mut spaces, mut breaks) = (false, false);
        let mut start = 0;
        for end in 0..=chars.len() {
            let ch = chars.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end && self.column > BEST_WIDTH && split {
                        self.write_indent(indent);
                        self.whitespace = false;
                        self.indention = false;
                    } else {
                        let data: String = chars[start..end].iter().collect();
                        self.write(&data);
                    }
                    start = end;
                }
            } else if breaks {
                if !ch.is_some_and(is_yaml_break) {
                    if chars[start] == '\n' {
                        self.line_break();
                    }
                    for _ in start..end {
                        self.line_break();
                    }
                    self.write_indent(indent);
                    self.whitespace = false;
                    self.indention = false;
                    start = end;
                }
            } else if matches!(
                ch,
                None | Some(' ' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
            ) {
                let data: String = chars[start..end].iter().collect();
                self.write(&data);
                start = end;
            }
            if let Some(c) = ch {
                spaces = c == ' ';
                breaks = is_yaml_break(c);
            }
        }
    }

    fn write_single_quoted(&mut self, text: &str, indent: usize, split: bool) {
        self.write_indicator("'", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        let (mut spaces, mut breaks) = (false, false);
        let mut start = 0;
        for end in 0..=chars.len() {
            let ch = chars.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end
                        && self.column > BEST_WIDTH
                        && split
                        && start != 0
                        && end != chars.len()
                    {
                        self.write_indent(indent);
                    } else {
                        let data: String = chars[start..end].iter().collect();
                        self.write(&data);
                    }
                    start = end;
                }
            } else if breaks {
                if !ch.is_some_and(is_yaml_break) {
                    if chars[start] == '\n' {
                        self.line_break();
                    }
                    for _ in start..end {
                        self.line_break();
                    }
                    self.write_indent(indent);
                    start = end;
                }
            } else if matches!(
                ch,
                None | Some(' ' | '\'' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
            ) && start < end
            {
                let data: String = chars[start..end].iter().collect();
                self.write(&data);
                start = end;
            }
            if ch == Some('\'') {
                self.write("''");
                start = end + 1;
            }
            if let Some(c) = ch {
                spaces = c == ' ';
                breaks = is_yaml_break(c);
            }
        }
        self.write_indicator("'", false, false, false);
    }

    /// libyaml's double-quoted writer (Salt dumps through `CSafeDumper`).
    fn write_double_quoted(&mut self, text: &str, indent: usize, split: bool) {
        self.write_indicator("\"", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            let printable = c == '\n'
                || ('\x20'..='\x7e').contains(&c)
                || c == '\u{85}'
                || (('\u{a0}'..='\u{d7ff}').contains(&c) || ('\u{e000}'..='\u{fffd}').contains(&c))
                    && c != '\u{feff}'
                || ('\u{10000}'..='\u{10ffff}').contains(&c);
            if !printable || is_yaml_break(c) || c == '"' || c == '\\' {
                let data = match c {
                    '\0' => "\\0".to_owned(),
                    '\x07' => "\\a".to_owned(),
                    '\x08' => "\\b".to_owned(),
                    '\t' => "\\t".to_owned(),
                    '\n' => "\\n".to_owned(),
                    '\x0b' => "\\v".to_owned(),
                    '\x0c' => "\\f".to_owned(),
                    '\r' => "\\r".to_owned(),
                    '\x1b' => "\\e".to_owned(),
                    '"' => "\\\"".to_owned(),
                    '\\' => "\\\\".to_owned(),
                    '\u{85}' => "\\N".to_owned(),
                    '\u{a0}' => "\\_".to_owned(),
                    '\u{2028}' => "\\L".to_owned(),
                    '\u{2029}' => "\\P".to_owned(),
                    c if (c as u32) <= 0xff => format!("\\x{:02X}", c as u32),
                    c if (c as u32) <= 0xffff => format!("\\u{:04X}", c as u32),
                    c => format!("\\U{:08X}", c as u32),
                };
                self.write(&data);
                spaces = false;
            } else if c == ' ' {
                if split && !spaces && self.column > BEST_WIDTH && i != 0 && i + 1 != chars.len() {
                    self.write_indent(indent);
                    self.whitespace = false;
                    self.indention = false;
                    if chars.get(i + 1) == Some(&' ') {
                        self.write("\\");
                    }
                } else {
                    self.write(" ");
                }
                spaces = true;
            } else {
                let mut buf = [0u8; 4];
                self.write(c.encode_utf8(&mut buf));
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
    }
}

fn is_yaml_break(c: char) -> bool {
    matches!(c, '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// PyYAML's `represent_float` / `represent_int`.
fn yaml_number(n: &serde_json::Number) -> String {
    if !n.is_f64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    if f.is_nan() {
        return ".nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    let repr = python_float(f).to_lowercase();
    if !repr.contains('.') && repr.contains('e') {
        repr.replacen('e', ".0e", 1)
    } else {
        repr
    }
}

/// Whether PyYAML's resolver reads this plain text as something other than a
/// string (bool, int, float, null, timestamp, merge, value), so it must be quoted.
fn resolves_to_non_str(text: &str) -> bool {
    use std::sync::OnceLock;
    static PATTERNS: OnceLock<Vec<regex::Regex>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
            r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
            r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
            r"^(?:<<)$",
            r"^(?:~|null|Null|NULL|)$",
            r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
            r"^(?:=)$",
        ]
        .iter()
        .filter_map(|p| regex::Regex::new(p).ok())
        .collect()
    });
    patterns.iter().any(|re| re.is_match(text))
}

struct Analysis {
    empty: bool,
    multiline: bool,
    allow_flow_plain: bool,
    allow_block_plain: bool,
    allow_single_quoted: bool,
}

/// PyYAML's `Emitter.analyze_scalar`, reduced to what block style needs.
fn analyze(text: &str) -> Analysis {
    if text.is_empty() {
        return Analysis {
            empty: true,
            multiline: false,
            allow_flow_plain: false,
            allow_block_plain: true,
            allow_single_quoted: true,
        };
    }
    let chars: Vec<char> = text.chars().collect();
    let is_ws = |c: char| {
        matches!(
            c,
            '\0' | ' ' | '\t' | '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}'
        )
    };
    let mut block_indicators = text.starts_with("---") || text.starts_with("...");
    let mut flow_indicators = block_indicators;
    let (mut line_breaks, mut special) = (false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let mut preceded_by_ws = true;
    let last = chars.len() - 1;
    for (i, &ch) in chars.iter().enumerate() {
        let followed_by_ws = i + 1 >= chars.len() || is_ws(chars[i + 1]);
        if i == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(ch) {
                flow_indicators = true;
                block_indicators = true;
            }
            if ch == '?' || ch == ':' {
                flow_indicators = true;
                block_indicators |= followed_by_ws;
            }
            if ch == '-' && followed_by_ws {
                flow_indicators = true;
                block_indicators = true;
            }
        } else {
            if ",?[]{}".contains(ch) {
                flow_indicators = true;
            }
            if ch == ':' {
                flow_indicators = true;
                block_indicators |= followed_by_ws;
            }
            if ch == '#' && preceded_by_ws {
                flow_indicators = true;
                block_indicators = true;
            }
        }
        if is_yaml_break(ch) {
            line_breaks = true;
        }
        if !(ch == '\n' || ('\x20'..='\x7e').contains(&ch)) {
            let unicode = (ch == '\u{85}'
                || ('\u{a0}'..='\u{d7ff}').contains(&ch)
                || ('\u{e000}'..='\u{fffd}').contains(&ch)
                || ('\u{10000}'..'\u{10ffff}').contains(&ch))
                && ch != '\u{feff}';
            if !unicode {
                special = true;
            }
        }
        if ch == ' ' {
            leading_space |= i == 0;
            trailing_space |= i == last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_yaml_break(ch) {
            leading_break |= i == 0;
            trailing_break |= i == last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_ws = is_ws(ch);
    }
    let mut allow_block_plain = true;
    let mut allow_single_quoted = true;
    if leading_space || leading_break || trailing_space || trailing_break {
        allow_block_plain = false;
    }
    if break_space {
        allow_block_plain = false;
        allow_single_quoted = false;
    }
    if space_break || special {
        allow_block_plain = false;
        allow_single_quoted = false;
    }
    let allow_block_plain_base = allow_block_plain;
    if line_breaks || block_indicators {
        allow_block_plain = false;
    }
    let allow_flow_plain = allow_block_plain_base && !line_breaks && !flow_indicators;
    Analysis {
        empty: false,
        multiline: line_breaks,
        allow_flow_plain,
        allow_block_plain,
        allow_single_quoted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain() -> OutputOptions {
        OutputOptions::default()
    }

    // Expected strings below were printed by Salt 3007.15 (`salt-call --out ...` / `try_printout`).
    #[test]
    fn nested_matches_salt_for_test_arg() {
        let data =
            json!({"local": {"args": ["a", 1], "kwargs": {"foo": "bar", "__pub_fun": "test.arg"}}});
        let expected = "local:\n    ----------\n    args:\n        - a\n        - 1\n    kwargs:\n        ----------\n        __pub_fun:\n            test.arg\n        foo:\n            bar";
        assert_eq!(render(Outputter::Nested, &data, &plain()), expected);
    }

    #[test]
    fn nested_colors_match_salt() {
        let data = json!({"web1": {"args": ["a", 1]}});
        let expected = "\x1b[0;36mweb1\x1b[0;0m:\n    \x1b[0;36m----------\x1b[0;0m\n    \x1b[0;36margs\x1b[0;0m:\n        \x1b[0;32m- a\x1b[0;0m\n        \x1b[0;1;33m- 1\x1b[0;0m";
        let opts = OutputOptions {
            color: true,
            ..plain()
        };
        assert_eq!(render(Outputter::Nested, &data, &opts), expected);
    }

    #[test]
    fn json_keeps_key_order_and_python_floats() {
        let data = json!({"web1": {"z": 1e20, "a": [true, null], "e": {}}});
        let expected = "{\n    \"web1\": {\n        \"z\": 1e+20,\n        \"a\": [\n            true,\n            null\n        ],\n        \"e\": {}\n    }\n}";
        assert_eq!(render(Outputter::Json, &data, &plain()), expected);
        let compact = OutputOptions {
            indent: Some(NO_INDENT),
            ..plain()
        };
        assert_eq!(
            render(Outputter::Json, &data, &compact),
            "{\"web1\": {\"z\": 1e+20, \"a\": [true, null], \"e\": {}}}"
        );
    }

    #[test]
    fn yaml_quotes_what_pyyaml_quotes() {
        let data =
            json!({"local": {"jid": "20240101010101123456", "ok": true, "v": "yes", "s": "a b"}});
        let expected = "local:\n  jid: '20240101010101123456'\n  ok: true\n  s: a b\n  v: 'yes'";
        assert_eq!(render(Outputter::Yaml, &data, &plain()), expected);
    }

    #[test]
    fn txt_raw_and_no_return_match_salt() {
        let data = json!({"web1": true, "web2": "one\ntwo"});
        assert_eq!(
            render(Outputter::Txt, &data, &plain()),
            "web1: True\nweb2: one\nweb2: two"
        );
        assert_eq!(
            render(Outputter::Raw, &data, &plain()),
            "{'web1': True, 'web2': 'one\\ntwo'}"
        );
        let missing = json!({"web3": no_response_message("20240101")});
        let expected = "web3:\n    Minion did not return. [No response]\n    The minions may not have all finished running and any remaining minions will return upon completion. To look up the return data for this job later, run the following command:\n    \n    salt-run jobs.lookup_jid 20240101";
        assert_eq!(render(Outputter::NoReturn, &missing, &plain()), expected);
    }

    #[test]
    fn key_listing_matches_salt_key() {
        let data = json!({"minions": ["web2", "web1"], "minions_pre": ["new1"], "minions_rejected": [], "minions_denied": []});
        let expected =
            "Accepted Keys:\nweb1\nweb2\nDenied Keys:\nUnaccepted Keys:\nnew1\nRejected Keys:";
        assert_eq!(render(Outputter::Key, &data, &plain()), expected);
    }

    #[test]
    fn outputter_names_parse_and_unknown_lists_valid_ones() {
        assert_eq!("text".parse::<Outputter>(), Ok(Outputter::Txt));
        assert_eq!("yaml".parse::<Outputter>(), Ok(Outputter::Yaml));
        let err = "pony".parse::<Outputter>().expect_err("not an outputter");
        assert_eq!(err.to_string(), "invalid outputter 'pony': valid outputters are nested, json, yaml, txt, raw, key, no_return");
        assert_eq!(
            choose_outputter(None, Some("no_return")),
            Outputter::NoReturn
        );
        assert_eq!(
            choose_outputter(Some(Outputter::Json), Some("no_return")),
            Outputter::Json
        );
        assert_eq!(choose_outputter(None, Some("highstate")), Outputter::Nested);
    }

    #[test]
    fn python_float_repr() {
        for (f, text) in [
            (1e20, "1e+20"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (1e-5, "1e-05"),
            (1.5, "1.5"),
            (-0.0, "-0.0"),
            (12345678901234567.0, "1.2345678901234568e+16"),
        ] {
            assert_eq!(python_float(f), text);
        }
    }

    #[test]
    fn empty_results_print_nothing() {
        assert_eq!(render(Outputter::Nested, &json!({}), &plain()), "");
        assert_eq!(render(Outputter::Txt, &json!({"m": ""}), &plain()), "");
    }
}
