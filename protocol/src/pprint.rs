//! Python 3's `pprint.pformat(data, indent=n)` (width 80, dict keys sorted): Salt's `pprint`
//! outputter, the `txt` outputter for values that are not text, and the templates' `pprint`
//! and `python` filters. It prints any value that shows its [`Shape`] ([`Pretty`]); JSON
//! values do.
//!
//! A value whose `repr` fits in what is left of the line is printed as its `repr`; a dict or a
//! list that does not fit puts one item per line, and a string that does not fit is cut after
//! the whitespace that ends a word into adjacent literals (in parentheses at the top level).

use std::fmt::Write as _;

use crate::nested::{python_repr_sorted, splitlines_keepends};
use crate::pyrepr::str_repr;
use crate::yaml::sorted;
use serde_json::Value;

const WIDTH: isize = 80;

/// What the printer needs of a value: its `repr` (dict keys sorted, as pprint sorts them)
/// and, for the values it may break over lines, their parts.
pub trait Pretty: Sized {
    /// Python's `repr` of the value, dict items in sorted order.
    fn repr(&self) -> String;
    /// The value's parts.
    fn shape(&self) -> Shape<Self>;
}

/// The parts of a value, as pprint breaks them.
pub enum Shape<T> {
    /// A dict's items in sorted order, each key as its `repr`.
    Dict(Vec<(String, T)>),
    /// A list, or a tuple (`(1,)` for one item).
    Seq { items: Vec<T>, tuple: bool },
    /// A string.
    Str(String),
    /// Anything printed as its `repr` alone.
    Atom,
}

impl Pretty for Value {
    fn repr(&self) -> String {
        python_repr_sorted(self)
    }

    fn shape(&self) -> Shape<Value> {
        match self {
            Value::Object(map) => Shape::Dict(
                sorted(map)
                    .into_iter()
                    .map(|(k, v)| (str_repr(k), v.clone()))
                    .collect(),
            ),
            Value::Array(items) => Shape::Seq {
                items: items.clone(),
                tuple: false,
            },
            Value::String(s) => Shape::Str(s.clone()),
            _ => Shape::Atom,
        }
    }
}

/// `pprint.pformat(value, indent=indent_per_level)`.
pub fn pformat<T: Pretty>(value: &T, indent_per_level: usize) -> String {
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

use crate::pystr::is_space as py_space;

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
    fn format<T: Pretty>(&mut self, value: &T, indent: usize, allowance: usize, level: usize) {
        let rep = value.repr();
        if width_of(&rep) > WIDTH - as_isize(indent) - as_isize(allowance) {
            match value.shape() {
                Shape::Dict(items) => return self.dict(items, indent, allowance, level + 1),
                Shape::Seq { items, tuple } => {
                    return self.seq(&items, tuple, indent, allowance, level + 1)
                }
                Shape::Str(s) => return self.string(&s, indent, allowance, level + 1),
                Shape::Atom => {}
            }
        }
        self.out.push_str(&rep);
    }

    fn pad_after_open(&mut self) {
        if self.per_level > 1 {
            let _ = write!(self.out, "{:1$}", "", self.per_level - 1);
        }
    }

    fn dict<T: Pretty>(
        &mut self,
        items: Vec<(String, T)>,
        indent: usize,
        allowance: usize,
        level: usize,
    ) {
        self.out.push('{');
        self.pad_after_open();
        let indent = indent + self.per_level;
        let last = items.len().saturating_sub(1);
        for (i, (rep, value)) in items.into_iter().enumerate() {
            self.out.push_str(&rep);
            self.out.push_str(": ");
            let key_width = rep.chars().count();
            let a = if i == last { allowance + 1 } else { 1 };
            self.format(&value, indent + key_width + 2, a, level);
            if i != last {
                let _ = write!(self.out, ",\n{:1$}", "", indent);
            }
        }
        self.out.push('}');
    }

    fn seq<T: Pretty>(
        &mut self,
        items: &[T],
        tuple: bool,
        indent: usize,
        allowance: usize,
        level: usize,
    ) {
        let (open, close) = match (tuple, items.len()) {
            (true, 1) => ('(', ",)"),
            (true, _) => ('(', ")"),
            _ => ('[', "]"),
        };
        self.out.push(open);
        let indent = indent + self.per_level;
        self.pad_after_open();
        let last = items.len().saturating_sub(1);
        // The closing text counts in the last item's allowance.
        let close_width = close.len();
        for (i, value) in items.iter().enumerate() {
            if i > 0 {
                let _ = write!(self.out, ",\n{:1$}", "", indent);
            }
            let a = if i == last {
                allowance + close_width
            } else {
                1
            };
            self.format(value, indent, a, level);
        }
        self.out.push_str(close);
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
