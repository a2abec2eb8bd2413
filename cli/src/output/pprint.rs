//! Python 3's `pprint.pformat(data, indent=n)` of JSON values (width 80, dict keys sorted):
//! Salt's `pprint` outputter, and the `txt` outputter for values that are not text.
//!
//! A value whose `repr` fits in what is left of the line is printed as its `repr`; a dict or a
//! list that does not fit puts one item per line, and a string that does not fit is cut after
//! the whitespace that ends a word into adjacent literals (in parentheses at the top level).

use std::fmt::Write as _;

use brine_protocol::nested::{python_repr_sorted, splitlines_keepends};
use brine_protocol::pyrepr::str_repr;
use brine_protocol::yaml::sorted;
use serde_json::Value;

const WIDTH: isize = 80;

/// `pprint.pformat(value, indent=indent_per_level)`.
pub(crate) fn pformat(value: &Value, indent_per_level: usize) -> String {
    let mut printer = Printer {
        out: String::new(),
        per_level: indent_per_level,
    };
    printer.format(value, 0, 0, 0);
    printer.out
}

fn width_of(text: &str) -> isize {
    isize::try_from(text.chars().count()).unwrap_or(isize::MAX)
}

fn as_isize(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

/// Python's `str.isspace()` for one character (Unicode whitespace and the separators
/// U+001C..U+001F).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// `re.findall(r'\S*\s*', line)` without its final empty match: runs of non-space followed by
/// the spaces after them.
fn words(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in line.char_indices() {
        let space = py_space(c);
        if in_space && !space {
            parts.push(&line[start..i]);
            start = i;
        }
        in_space = space;
    }
    if start < line.len() {
        parts.push(&line[start..]);
    }
    parts
}

struct Printer {
    out: String,
    per_level: usize,
}

impl Printer {
    fn format(&mut self, value: &Value, indent: usize, allowance: usize, level: usize) {
        let rep = python_repr_sorted(value);
        if width_of(&rep) > WIDTH - as_isize(indent) - as_isize(allowance) {
            match value {
                Value::Object(map) => return self.dict(map, indent, allowance, level + 1),
                Value::Array(items) => return self.list(items, indent, allowance, level + 1),
                Value::String(s) => return self.string(s, indent, allowance, level + 1),
                _ => {}
            }
        }
        self.out.push_str(&rep);
    }

    fn pad_after_open(&mut self) {
        if self.per_level > 1 {
            let _ = write!(self.out, "{:1$}", "", self.per_level - 1);
        }
    }

    fn dict(
        &mut self,
        map: &serde_json::Map<String, Value>,
        indent: usize,
        allowance: usize,
        level: usize,
    ) {
        self.out.push('{');
        self.pad_after_open();
        let items = sorted(map);
        let indent = indent + self.per_level;
        let last = items.len().saturating_sub(1);
        for (i, (key, value)) in items.into_iter().enumerate() {
            let rep = str_repr(key);
            self.out.push_str(&rep);
            self.out.push_str(": ");
            let key_width = rep.chars().count();
            let a = if i == last { allowance + 1 } else { 1 };
            self.format(value, indent + key_width + 2, a, level);
            if i != last {
                let _ = write!(self.out, ",\n{:1$}", "", indent);
            }
        }
        self.out.push('}');
    }

    fn list(&mut self, items: &[Value], indent: usize, allowance: usize, level: usize) {
        self.out.push('[');
        let indent = indent + self.per_level;
        self.pad_after_open();
        let last = items.len().saturating_sub(1);
        for (i, value) in items.iter().enumerate() {
            if i > 0 {
                let _ = write!(self.out, ",\n{:1$}", "", indent);
            }
            let a = if i == last { allowance + 1 } else { 1 };
            self.format(value, indent, a, level);
        }
        self.out.push(']');
    }

    fn string(&mut self, s: &str, indent: usize, allowance: usize, level: usize) {
        if s.is_empty() {
            self.out.push_str("''");
            return;
        }
        let (indent, allowance) = if level == 1 {
            (indent + 1, allowance + 1)
        } else {
            (indent, allowance)
        };
        let max_width = WIDTH - as_isize(indent);
        let mut max_width1 = max_width;
        let lines = splitlines_keepends(s);
        let mut chunks: Vec<String> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let last_line = i + 1 == lines.len();
            let rep = str_repr(line);
            if last_line {
                max_width1 -= as_isize(allowance);
            }
            if width_of(&rep) <= max_width1 {
                chunks.push(rep);
                continue;
            }
            let parts = words(line);
            let mut max_width2 = max_width;
            let mut current = String::new();
            for (j, part) in parts.iter().enumerate() {
                let candidate = format!("{current}{part}");
                if j + 1 == parts.len() && last_line {
                    max_width2 -= as_isize(allowance);
                }
                if width_of(&str_repr(&candidate)) > max_width2 {
                    if !current.is_empty() {
                        chunks.push(str_repr(&current));
                    }
                    current = (*part).to_owned();
                } else {
                    current = candidate;
                }
            }
            if !current.is_empty() {
                chunks.push(str_repr(&current));
            }
        }
        if chunks.len() == 1 {
            // Python writes the repr of the last line here: the whole string.
            self.out.push_str(&str_repr(s));
            return;
        }
        if level == 1 {
            self.out.push('(');
        }
        for (i, chunk) in chunks.iter().enumerate() {
            if i > 0 {
                let _ = write!(self.out, "\n{:1$}", "", indent);
            }
            self.out.push_str(chunk);
        }
        if level == 1 {
            self.out.push(')');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Expected texts printed by Python 3.11's pprint.pformat.
    #[test]
    fn short_values_are_their_repr() {
        assert_eq!(
            pformat(&json!({"b": [1, 2.5, null], "a": true}), 1),
            "{'a': True, 'b': [1, 2.5, None]}"
        );
        assert_eq!(pformat(&json!(""), 1), "''");
        assert_eq!(pformat(&json!({}), 4), "{}");
    }

    #[test]
    fn long_containers_put_an_item_per_line() {
        let data =
            json!({"web1": {"pkgs": ["a".repeat(30), "b".repeat(30), "c".repeat(30)], "n": 1}});
        assert_eq!(
            pformat(&data, 1),
            "{'web1': {'n': 1,\n          'pkgs': ['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',\n                   'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',\n                   'cccccccccccccccccccccccccccccc']}}"
        );
        assert_eq!(
            pformat(&data, 4),
            "{   'web1': {   'n': 1,\n                'pkgs': [   'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',\n                            'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',\n                            'cccccccccccccccccccccccccccccc']}}"
        );
    }

    #[test]
    fn long_strings_are_cut_after_words() {
        let text = "word ".repeat(20) + "end\nsecond line";
        assert_eq!(
            pformat(&json!(text), 1),
            "('word word word word word word word word word word word word word word word '\n 'word word word word word end\\n'\n 'second line')"
        );
        assert_eq!(
            pformat(&json!({"m": text}), 1),
            "{'m': 'word word word word word word word word word word word word word word '\n      'word word word word word word end\\n'\n      'second line'}"
        );
        assert_eq!(words("a  b\tc "), vec!["a  ", "b\t", "c "]);
        assert_eq!(words("  x"), vec!["  ", "x"]);
    }
}
