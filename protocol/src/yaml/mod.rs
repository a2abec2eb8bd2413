//! One YAML emitter: PyYAML's `safe_dump` as Salt calls it (the `yaml` outputter, salt-api's
//! YAML answers, and the minion functions that answer YAML text such as `schedule.list`), and
//! one loader, [`load`], with `salt.utils.yaml.safe_load`'s semantics (salt-api's YAML bodies,
//! the renderers).

pub mod load;
mod mixed;

pub use mixed::{dump_mixed, is_flow_node};

use serde_json::Value;

use crate::pyrepr::float_repr as python_float;

/// Block style with an indent (PyYAML's `default_flow_style=False`), or flow style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Block collections indented by this many spaces (2 to 9; anything else is 2).
    Block(usize),
    /// Flow collections (`{a: 1}`), as `--out-indent` below zero gives.
    Flow,
}

/// PyYAML's `safe_dump(data, default_flow_style=False, allow_unicode=True)`
/// (flow style for a negative `--out-indent`), keys sorted, width 80.
pub fn safe_dump(data: &Value, style: Style) -> String {
    dump(
        data,
        &DumpOptions {
            allow_unicode: true,
            ..DumpOptions::new(style)
        },
    )
}

/// The arguments of PyYAML's `dump` that shape the text, for callers that pass them through
/// (Salt's `yaml` serializer and its `serializer_opts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpOptions {
    /// `default_flow_style` False (block, with `indent`) or True (flow).
    pub style: Style,
    /// `allow_unicode`: when false, text with non-ASCII characters is double-quoted with
    /// the characters escaped.
    pub allow_unicode: bool,
    /// `explicit_start`: the document opens with `---`.
    pub explicit_start: bool,
    /// `sort_keys`: mapping keys in code point order, otherwise in their order.
    pub sort_keys: bool,
    /// `width`: lines are folded past it; libyaml keeps 80 when it is not more than twice
    /// the indent, and never folds for a negative width.
    pub width: i64,
}

impl DumpOptions {
    /// PyYAML's defaults: ASCII only, no `---`, keys sorted, width 80.
    pub fn new(style: Style) -> DumpOptions {
        DumpOptions {
            style,
            allow_unicode: false,
            explicit_start: false,
            sort_keys: true,
            width: BEST_WIDTH as i64,
        }
    }
}

/// PyYAML's `dump(data, Dumper=CSafeDumper, ...)` with `opts`; the text ends with a line
/// break and has no document end marker (`...`).
pub fn dump(data: &Value, opts: &DumpOptions) -> String {
    let (flow, best_indent) = match opts.style {
        Style::Block(n) => (false, if (2..10).contains(&n) { n } else { 2 }),
        Style::Flow => (true, 2),
    };
    let best_width = match usize::try_from(opts.width) {
        Err(_) => usize::MAX,
        Ok(w) if w <= best_indent * 2 => BEST_WIDTH,
        Ok(w) => w,
    };
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        whitespace: true,
        indention: true,
        best_indent,
        best_width,
        flow,
        ascii_only: !opts.allow_unicode,
        sort_keys: opts.sort_keys,
    };
    if opts.explicit_start {
        e.write_indicator("---", true, false, false);
    }
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
    best_width: usize,
    /// Inside flow collections plain scalars follow stricter rules.
    flow: bool,
    /// PyYAML's `allow_unicode=False`: non-ASCII characters are escaped.
    ascii_only: bool,
    sort_keys: bool,
}

/// Salt's `yaml_dquote`: `text` as PyYAML's plain `Emitter` writes a double-quoted scalar
/// (no line folding, non-ASCII escaped).
pub fn double_quoted(text: &str) -> String {
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        whitespace: true,
        indention: true,
        best_indent: 2,
        best_width: BEST_WIDTH,
        flow: false,
        ascii_only: true,
        sort_keys: true,
    };
    e.write_double_quoted(text, 0, false);
    e.out
}

const BEST_WIDTH: usize = 80;

impl Emitter {
    /// A mapping's entries in the order they are written.
    fn entries<'v>(&self, map: &'v serde_json::Map<String, Value>) -> Vec<(&'v String, &'v Value)> {
        if self.sort_keys {
            sorted(map)
        } else {
            map.iter().collect()
        }
    }

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
                for (k, v) in self.entries(map) {
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
                for (i, (k, v)) in self.entries(map).into_iter().enumerate() {
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
        if self.column > self.best_width {
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
        let a = analyze(&text, !self.ascii_only);
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
                    if start + 1 == end && self.column > self.best_width && split {
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
                        && self.column > self.best_width
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
            let printable = printable && (c.is_ascii() || !self.ascii_only);
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
                if split
                    && !spaces
                    && self.column > self.best_width
                    && i != 0
                    && i + 1 != chars.len()
                {
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
fn analyze(text: &str, allow_unicode: bool) -> Analysis {
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
            if !unicode || !allow_unicode {
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

/// A map's entries in key order (Python's `sorted` on `str` keys: by code point).
pub fn sorted(map: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut items: Vec<_> = map.iter().collect();
    items.sort_by(|a, b| a.0.cmp(b.0));
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({"b": [1, 2, {"x": "yes", "y": null}], "a": {"k": "v", "n": 1.5, "e": []},
               "u": "h\u{e9}llo", "m": "line1\nline2", "t": true, "q": "", "lst": [[1, 2], [3]]})
    }

    // Expected texts were printed by PyYAML 6 (`yaml.dump(..., Dumper=yaml.CSafeDumper)`).
    #[test]
    fn ascii_only_by_default_as_pyyaml_dumps() {
        assert_eq!(
            dump(&sample(), &DumpOptions::new(Style::Block(2))),
            "a:\n  e: []\n  k: v\n  n: 1.5\nb:\n- 1\n- 2\n- x: 'yes'\n  y: null\nlst:\n- - 1\n  - 2\n- - 3\nm: 'line1\n\n  line2'\nq: ''\nt: true\nu: \"h\\xE9llo\"\n"
        );
        assert_eq!(
            safe_dump(&sample(), Style::Block(2)),
            "a:\n  e: []\n  k: v\n  n: 1.5\nb:\n- 1\n- 2\n- x: 'yes'\n  y: null\nlst:\n- - 1\n  - 2\n- - 3\nm: 'line1\n\n  line2'\nq: ''\nt: true\nu: h\u{e9}llo\n"
        );
    }

    #[test]
    fn explicit_start_and_indent() {
        let opts = DumpOptions {
            explicit_start: true,
            ..DumpOptions::new(Style::Block(4))
        };
        assert_eq!(
            dump(&sample(), &opts),
            "---\na:\n    e: []\n    k: v\n    n: 1.5\nb:\n- 1\n- 2\n-   x: 'yes'\n    y: null\nlst:\n-   - 1\n    - 2\n-   - 3\nm: 'line1\n\n    line2'\nq: ''\nt: true\nu: \"h\\xE9llo\"\n"
        );
        let start = |style| DumpOptions {
            explicit_start: true,
            ..DumpOptions::new(style)
        };
        assert_eq!(dump(&json!("abc"), &start(Style::Block(2))), "--- abc\n");
        assert_eq!(dump(&json!({}), &start(Style::Block(2))), "--- {}\n");
        assert_eq!(
            dump(&json!({"a": {"b": 1}}), &start(Style::Flow)),
            "--- {a: {b: 1}}\n"
        );
    }

    #[test]
    fn unsorted_keys_and_widths() {
        let unsorted = DumpOptions {
            sort_keys: false,
            ..DumpOptions::new(Style::Block(2))
        };
        assert_eq!(
            dump(&json!({"z": 1, "a": [1]}), &unsorted),
            "z: 1\na:\n- 1\n"
        );
        let long = json!({"k": "word ".repeat(30)});
        let width = |width| DumpOptions {
            width,
            ..DumpOptions::new(Style::Block(2))
        };
        assert_eq!(
            dump(&long, &width(40)),
            "k: 'word word word word word word word word\n  word word word word word word word word\n  word word word word word word word word\n  word word word word word word '\n"
        );
        assert_eq!(
            dump(&long, &width(-1)),
            format!("k: '{}'\n", "word ".repeat(30))
        );
    }
}
