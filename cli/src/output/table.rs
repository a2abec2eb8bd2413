//! Salt's `table` outputter (with its default settings) and the `profile` outputter built on
//! it (the states of a return as a table of name, `mod.fun` and duration).
//!
//! Both answer `None` for data Salt's Python code fails on; the caller then falls back to
//! `nested`, as Salt's `try_printout` does.

use brine_protocol::nested::{python_str, Colors};
use brine_protocol::yaml::sorted;
use serde_json::{Map, Value};

const ROW_DELIMITER: char = '-';
const DELIM: &str = " | ";
const PREFIX: &str = "| ";
const SUFFIX: &str = " |";
/// Columns wider than this are wrapped on spaces.
const COLUMN_WIDTH: usize = 50;

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Python's `str.center(width)`.
fn center(s: &str, width: usize) -> String {
    let len = chars(s);
    if len >= width {
        return s.to_owned();
    }
    let margin = width - len;
    let left = margin / 2 + (margin & width & 1);
    format!("{:left$}{s}{:right$}", "", "", right = margin - left)
}

/// The table's `wrap_onspace`: words joined by a space, or by a line break where the line
/// would reach the column width.
fn wrap_on_space(text: &str) -> String {
    let mut words = text.split(' ');
    let mut line = words.next().unwrap_or_default().to_owned();
    for word in words {
        let tail = chars(&line[line.rfind('\n').map_or(0, |i| i + 1)..]);
        let head = chars(word.split('\n').next().unwrap_or_default());
        line.push(if tail + head >= COLUMN_WIDTH {
            '\n'
        } else {
            ' '
        });
        line.push_str(word);
    }
    line
}

/// Python's type of a JSON value, for the table's "every row of one type" check.
fn kind(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(n) if n.is_f64() => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::Array(_) => 5,
        Value::Object(_) => 6,
    }
}

struct Table<'c> {
    colors: &'c Colors,
    out: Vec<String>,
}

impl Table<'_> {
    fn line(&mut self, indent: usize, color: &str, msg: &str, suffix: &str) {
        self.out.push(format!(
            "{:indent$}{color}{msg}{}{suffix}",
            "", self.colors.endc
        ));
    }

    fn display(&mut self, ret: &Value, indent: usize) -> Option<()> {
        match ret {
            Value::Object(map) => {
                for (key, val) in sorted(map) {
                    let dark_gray = self.colors.dark_gray;
                    self.line(indent, dark_gray, key, ":");
                    self.line(indent, dark_gray, "----------", "");
                    match val {
                        Value::Array(rows) => self.rows(rows, None, indent)?,
                        other => self.display(other, indent + 4)?,
                    }
                }
            }
            Value::Array(rows) => self.rows(rows, None, indent)?,
            _ => {}
        }
        Some(())
    }

    /// `display_rows`: rows of dicts (a column per key), of strings or of lists of strings.
    fn rows(&mut self, rows: &[Value], labels: Option<Vec<String>>, indent: usize) -> Option<()> {
        let Some(first) = rows.first() else {
            return Some(());
        };
        if rows.iter().any(|r| kind(r) != kind(first)) {
            return Some(());
        }
        let mut labels = labels;
        let table: Vec<Vec<String>> = match first {
            Value::Object(head) => {
                if labels.as_ref().is_none_or(Vec::is_empty) {
                    labels = Some(
                        sorted(head)
                            .into_iter()
                            .map(|(k, _)| title_case(&k.replace('_', " ")))
                            .collect(),
                    );
                }
                rows.iter()
                    .map(|row| {
                        let map: &Map<String, Value> = row.as_object().expect("same kind");
                        sorted(map)
                            .into_iter()
                            .map(|(_, v)| python_str(v))
                            .collect()
                    })
                    .collect()
            }
            Value::String(_) => rows.iter().map(|r| vec![python_str(r)]).collect(),
            Value::Array(_) => rows
                .iter()
                .map(|r| {
                    r.as_array()
                        .expect("same kind")
                        .iter()
                        .map(|item| item.as_str().map(str::to_owned))
                        .collect::<Option<Vec<String>>>()
                })
                .collect::<Option<_>>()?,
            // Salt's code cannot iterate these rows.
            _ => return None,
        };
        let mut all = Vec::with_capacity(table.len() + 1);
        if let Some(l) = labels.filter(|l| !l.is_empty()) {
            all.push(l);
        }
        all.extend(table);
        self.prepare(&all, indent + 4)
    }

    /// `prepare_rows` with Salt's defaults: centred cells, a separator line around every row
    /// (the header's included).
    fn prepare(&mut self, rows: &[Vec<String>], indent: usize) -> Option<()> {
        // Salt's code cannot zip the cells of an empty row.
        if rows.iter().any(Vec::is_empty) {
            return None;
        }
        // Each row's cells wrapped, then cut into physical rows; as Python 3's `map` over
        // several lists, a row has as many lines as its shortest cell.
        let logical: Vec<Vec<Vec<String>>> = rows
            .iter()
            .map(|row| {
                let cells: Vec<Vec<String>> = row
                    .iter()
                    .map(|item| wrap_on_space(item).split('\n').map(str::to_owned).collect())
                    .collect();
                let lines = cells.iter().map(Vec::len).min().unwrap_or(0);
                (0..lines)
                    .map(|i| cells.iter().map(|c| c[i].clone()).collect())
                    .collect()
            })
            .collect();
        let physical: Vec<&Vec<String>> = logical.iter().flatten().collect();
        let columns = physical.iter().map(|r| r.len()).min().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| physical.iter().map(|r| chars(&r[c])).max().unwrap_or(0))
            .collect();
        let separator_len = (PREFIX.len()
            + SUFFIX.len()
            + widths.iter().sum::<usize>()
            + DELIM.len() * widths.len())
        .saturating_sub(DELIM.len());
        let separator: String = std::iter::repeat_n(ROW_DELIMITER, separator_len.max(1)).collect();
        let (light_gray, white) = (self.colors.light_gray, self.colors.white);
        self.line(indent, light_gray, &separator, "");
        for rows in &logical {
            for row in rows {
                let cells: Vec<String> = row
                    .iter()
                    .zip(&widths)
                    .map(|(item, &w)| center(item, w))
                    .collect();
                let text = format!("{PREFIX}{}{SUFFIX}", cells.join(DELIM));
                self.line(indent, white, &text, "");
            }
            self.line(indent, light_gray, &separator, "");
        }
        Some(())
    }
}

/// Python's `str.title()`: a letter after a non-letter is upper case, the others lower.
fn title_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev_cased = false;
    for c in s.chars() {
        if prev_cased {
            out.extend(c.to_lowercase());
        } else {
            out.extend(c.to_uppercase());
        }
        prev_cased = c.is_lowercase() || c.is_uppercase();
    }
    out
}

/// The `table` outputter.
pub(crate) fn table(data: &Value, colors: &Colors) -> Option<String> {
    let mut t = Table {
        colors,
        out: Vec::new(),
    };
    t.display(data, 0)?;
    Some(t.out.join("\n"))
}

/// Python's `float()` of a state's `duration`.
fn duration(v: Option<&Value>) -> Option<f64> {
    match v {
        None => Some(-1.0),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::Bool(b)) => Some(f64::from(u8::from(*b))),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(_) => None,
    }
}

/// The `profile` outputter: every state of every minion, by duration.
pub(crate) fn profile(data: &Value, colors: &Colors) -> Option<String> {
    const NAME_MAX: usize = 60;
    let mut rows: Vec<(f64, String, String)> = Vec::new();
    let mut width = chars("duration (ms)");
    let hosts = data.as_object()?;
    for (_, states) in hosts {
        let entries: Vec<(String, Option<&Value>)> = match states {
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), Some(v))).collect(),
            Value::Array(items) => items.iter().map(|i| (python_str(i), None)).collect(),
            Value::String(s) => s.chars().map(|c| (c.to_string(), None)).collect(),
            _ => return None,
        };
        for (sid, dat) in entries {
            let (name, dur) = match dat {
                Some(Value::Object(d)) => {
                    let name = match d.get("name").or_else(|| d.get("__id__")) {
                        None | Some(Value::Null) => "<>".to_owned(),
                        Some(Value::String(s)) => s.clone(),
                        Some(_) => return None,
                    };
                    (name, duration(d.get("duration"))?)
                }
                Some(_) => (sid.clone(), -1.0),
                None => ("<>".to_owned(), -1.0),
            };
            let name = if chars(&name) > NAME_MAX {
                name.chars().take(NAME_MAX - 3).collect::<String>() + "..."
            } else {
                name
            };
            width = width.max(chars(&format!("{dur:.4}")));
            let parts: Vec<&str> = sid.split("_|-").collect();
            let modfun = format!("{}.{}", parts[0], parts[parts.len() - 1]);
            rows.push((dur, name, modfun));
        }
    }
    let mut table: Vec<[String; 3]> = rows
        .into_iter()
        .map(|(dur, name, modfun)| [format!("{dur:>width$.4}"), name, modfun])
        .collect();
    table.sort();
    let rows: Vec<Value> = table
        .into_iter()
        .map(|[dur, name, modfun]| Value::from(vec![name, modfun, dur]))
        .collect();
    let mut t = Table {
        colors,
        out: Vec::new(),
    };
    let labels = ["name", "mod.fun", "duration (ms)"]
        .map(str::to_owned)
        .to_vec();
    t.rows(&rows, Some(labels), 0)?;
    Some(t.out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn center_is_pythons() {
        // Python 3.11: 'ab'.center(5), 'abc'.center(6), 'a'.center(4), 'ab'.center(7).
        assert_eq!(center("ab", 5), "  ab ");
        assert_eq!(center("abc", 6), " abc  ");
        assert_eq!(center("a", 4), " a  ");
        assert_eq!(center("ab", 7), "   ab  ");
        assert_eq!(center("abcd", 2), "abcd");
    }

    #[test]
    fn title_is_pythons() {
        assert_eq!(title_case("mod fun2x"), "Mod Fun2X");
        assert_eq!(title_case("ALL_CAPS name"), "All_Caps Name");
    }
}
