//! The `ini` execution module (Salt's `ini_manage`): an ini file read into its top-level
//! options and its sections, changed, and written back whole, as Salt reads and writes it.
//!
//! Salt's reading has its own rules, kept here: comment lines (`#` or `;`) become entries
//! `#comment<n>` and lines that are neither comments nor options `#unknown<n>`, written back as
//! they were; a line indented deeper than the option before it continues that option's
//! value; a commented-out option (`#key = value`) is replaced, in place, by the option of the
//! same name when that option is set (even by a later line of the same section); sections of
//! the same name are merged; options come before the sections of their level; every option
//! line is written again with the one separator (` = ` unless `no_spaces`). The separator is
//! a piece of a regular expression, its first character escaped, as Salt builds it.
//!
//! A file that does not exist reads as empty. The functions that change the file write it
//! whole every time (creating it), even when nothing changed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use rmpv::Value;

use super::args::{hashable, py_str, py_type_name, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::nested::splitlines;
use brine_protocol::payload::py_truthy;
use brine_protocol::pyeq::py_eq;
use brine_protocol::pyrepr::os_error;
use brine_protocol::pystr::{strip, strip_start};

/// The most of an ini file this module reads.
const MAX_INI_BYTES: u64 = 64 << 20;

/// Python's `\s` (`str.isspace`) as a class of the regex crate, whose `\s` leaves out
/// U+001C..U+001F.
const WS: &str = r"[\s\x1c-\x1f]";

super::spec_table! {
    /// The functions of the `ini` module.
    SetOption => ("ini.set_option", "set_option", ["file_name", "sections", "separator", "encoding", "no_spaces"], 1, false, false, "
    Set options of an ini file and write it again; returns what changed, each changed option
    with its 'before' and 'after' value.

    file_name: the path of the ini file (created when missing).
    sections: a dict whose keys are section names, each with a dict of its options; a key
        whose value is not a dict is an option outside any section.
    separator: the text between an option's name and its value (default '=').
    encoding: the file's encoding (default: the system's, UTF-8).
    no_spaces: write `key=value` instead of `key = value` (for every option of the file).

    CLI Example:

        salt '*' ini.set_option /path/to/ini '{section_foo: {key: value}}'
    "),
    GetOption => ("ini.get_option", "get_option", ["file_name", "section", "option", "separator", "encoding"], 3, false, false, "
    The value of an option of an ini file, None when the file has no such option. An empty
    section names the options outside any section.

    CLI Example:

        salt '*' ini.get_option /path/to/ini section_name option_name
    "),
    RemoveOption => ("ini.remove_option", "remove_option", ["file_name", "section", "option", "separator", "encoding"], 3, false, false, "
    Remove an option from an ini file (from outside any section when the section is empty or
    not a section) and write the file again; returns the value removed, None when there was
    none.

    CLI Example:

        salt '*' ini.remove_option /path/to/ini section_name option_name
    "),
    GetSection => ("ini.get_section", "get_section", ["file_name", "section", "separator", "encoding"], 2, false, false, "
    The options of a section of an ini file as a dict (comments left out); an empty dict when
    the file has no such section.

    CLI Example:

        salt '*' ini.get_section /path/to/ini section_name
    "),
    RemoveSection => ("ini.remove_section", "remove_section", ["file_name", "section", "separator", "encoding"], 2, false, false, "
    Remove a section and its options from an ini file; returns the options removed, None when
    the file has no such section (and is then left as it is).

    CLI Example:

        salt '*' ini.remove_section /path/to/ini section_name
    "),
    GetIni => ("ini.get_ini", "get_ini", ["file_name", "separator", "encoding"], 1, false, false, "
    The whole ini file as a dict: the options outside any section, then each section with its
    options (comments left out).

    CLI Example:

        salt '*' ini.get_ini /path/to/ini
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        _ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let arg = |key: &str| b.get(key).cloned().unwrap_or(Value::Nil);
        let no_spaces = matches!(self, Fun::SetOption) && b.get("no_spaces").is_some_and(py_truthy);
        let mut ini = Ini::load(
            &arg("file_name"),
            &b.get("separator").map_or_else(|| "=".to_string(), py_str),
            b.get("encoding"),
            no_spaces,
            st.test,
        )?;
        match self {
            Fun::SetOption => {
                let sections = arg("sections");
                let input = match &sections {
                    s if !py_truthy(s) => Vec::new(),
                    Value::Map(entries) => raw_entries(entries),
                    other => return Err(no_attribute(other, "items")),
                };
                let changes = ini.root.update(&input)?;
                ini.flush()?;
                Ok(Value::Map(changes))
            }
            Fun::GetOption => {
                let (section, option) = (arg("section"), arg("option"));
                if py_truthy(&section) {
                    hashable(&section)?;
                    match ini.root.get(&section) {
                        // Salt catches the AttributeError of an option's text here.
                        Some(Item::Text(_)) => Ok(Value::Nil),
                        Some(Item::Section(s)) => {
                            hashable(&option)?;
                            Ok(s.get(&option).map_or(Value::Nil, Item::to_value))
                        }
                        None => hashable(&option).map(|()| Value::Nil),
                    }
                } else {
                    hashable(&option)?;
                    Ok(ini.root.get(&option).map_or(Value::Nil, Item::to_value))
                }
            }
            Fun::RemoveOption => {
                let (section, option) = (arg("section"), arg("option"));
                hashable(&section)?;
                hashable(&option)?;
                let removed = match ini.root.get_mut(&section) {
                    Some(Item::Section(s)) => s.pop(&option),
                    _ => ini.root.pop(&option),
                };
                ini.flush()?;
                Ok(removed.as_ref().map_or(Value::Nil, Item::to_value))
            }
            Fun::GetSection => {
                let section = arg("section");
                hashable(&section)?;
                match ini.root.get(&section) {
                    None => Ok(Value::Map(Vec::new())),
                    Some(item) => options_of(item),
                }
            }
            Fun::RemoveSection => {
                let section = arg("section");
                hashable(&section)?;
                let Some(removed) = ini.root.pop(&section) else {
                    return Ok(Value::Nil);
                };
                ini.flush()?;
                options_of(&removed)
            }
            Fun::GetIni => visible(&ini.root.entries),
        }
    }
}

// ---------------------------------------------------------------------------
// Python's errors

/// Python's `AttributeError` for a value without the method `attr`.
fn no_attribute(v: &Value, attr: &str) -> FnError {
    FnError::Exception(format!(
        "AttributeError: '{}' object has no attribute '{attr}'",
        py_type_name(v)
    ))
}


fn re_error(message: impl std::fmt::Display) -> FnError {
    FnError::Exception(format!("re.error: {message}"))
}

// ---------------------------------------------------------------------------
// The option pattern

/// Where Salt's option pattern, `(\s*)(.+?)\s*(\<separator>)\s*(.*)\s*`, has the backslash
/// that escapes the separator's first character.
const SEP_AT: usize = 14;

/// A separator Brine cannot turn into a pattern as Python would.
fn unsupported_separator(sep: &str, why: &str) -> FnError {
    FnError::Execution(format!(
        "The separator {} cannot be used: {why}",
        brine_protocol::pyrepr::str_repr(sep)
    ))
}

/// The character of Python's `\x..`, `\u....` or `\U........` escape (`kind` and `len` hex
/// digits taken from `rest`).
fn hex_escape(
    kind: char,
    len: usize,
    rest: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Result<char, FnError> {
    let mut digits = String::new();
    while digits.len() < len {
        match rest.peek() {
            Some(c) if c.is_ascii_hexdigit() => {
                digits.push(*c);
                rest.next();
            }
            _ => {
                return Err(re_error(format!(
                    "incomplete escape \\{kind}{digits} at position {SEP_AT}"
                )))
            }
        }
    }
    let code = u32::from_str_radix(&digits, 16).unwrap_or(u32::MAX);
    char::from_u32(code)
        .ok_or_else(|| re_error(format!("bad escape \\{kind}{digits} at position {SEP_AT}")))
}

/// The character of Python's escape of a digit: an octal escape (`\0`, `\0oo`, `\ooo`);
/// any other is a reference to a group, of which Brine has none to offer (the first two are
/// back-references, the third is the separator's own group, still open).
fn digit_escape(
    sep: &str,
    first: char,
    rest: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Result<char, FnError> {
    let octal = |c: &char| ('0'..='7').contains(c);
    let mut digits = first.to_string();
    if first == '0' {
        while digits.len() < 3 {
            match rest.next_if(octal) {
                Some(d) => digits.push(d),
                None => break,
            }
        }
    } else if let Some(d) = rest.next_if(char::is_ascii_digit) {
        digits.push(d);
        if octal(&first) && octal(&d) && rest.peek().is_some_and(octal) {
            digits.extend(rest.next());
        }
    }
    if first == '0' || digits.len() == 3 {
        let code = u32::from_str_radix(&digits, 8).unwrap_or(u32::MAX);
        return char::from_u32(code)
            .filter(|_| code <= 0o377)
            .ok_or_else(|| {
                re_error(format!(
                    "octal escape value \\{digits} outside of range 0-0o377 at position {SEP_AT}"
                ))
            });
    }
    let group: usize = digits.parse().unwrap_or(usize::MAX);
    Err(match group {
        1 | 2 => unsupported_separator(sep, "a back-reference to an earlier group"),
        3 => re_error(format!(
            "cannot refer to an open group at position {SEP_AT}"
        )),
        _ => re_error(format!(
            "invalid group reference {group} at position {}",
            SEP_AT + 1
        )),
    })
}

/// The separator's part of the option pattern in the regex crate's syntax: its first
/// character escaped as Salt escapes it (`\=`, but `\s` is whitespace and `\q` an error),
/// the rest as pattern syntax.
fn separator_pattern(sep: &str) -> Result<String, FnError> {
    let mut rest = sep.chars().peekable();
    let Some(first) = rest.next() else {
        // `(\)`: the group's parenthesis escaped.
        return Err(re_error(
            "missing ), unterminated subpattern at position 13",
        ));
    };
    let mut out = match first {
        'd' | 'D' | 'w' | 'W' | 'b' | 'B' | 'A' => format!("\\{first}"),
        'Z' => "\\z".into(),
        's' => WS.into(),
        'S' => r"[^\s\x1c-\x1f]".into(),
        'a' => r"\x07".into(),
        'f' => r"\x0C".into(),
        'v' => r"\x0B".into(),
        'n' | 'r' | 't' => format!("\\{first}"),
        'x' => regex::escape(&hex_escape('x', 2, &mut rest)?.to_string()),
        'u' => regex::escape(&hex_escape('u', 4, &mut rest)?.to_string()),
        'U' => regex::escape(&hex_escape('U', 8, &mut rest)?.to_string()),
        '0'..='9' => regex::escape(&digit_escape(sep, first, &mut rest)?.to_string()),
        'N' if rest.peek() != Some(&'{') => {
            return Err(re_error(format!("missing {{ at position {}", SEP_AT + 2)))
        }
        'N' => return Err(unsupported_separator(sep, "a named character escape")),
        c if c.is_ascii_alphabetic() => {
            return Err(re_error(format!("bad escape \\{c} at position {SEP_AT}")))
        }
        c => regex::escape(&c.to_string()),
    };
    out.push_str(&literal_rest(sep, rest.collect())?);
    Ok(out)
}

/// The separator after its first character, which Salt leaves as pattern syntax: what reads
/// the same in both syntaxes passes; groups (which would change the groups Salt takes apart)
/// and back-references are refused.
fn literal_rest(sep: &str, rest: String) -> Result<String, FnError> {
    if !rest.contains([
        '\\', '(', ')', '[', ']', '{', '}', '.', '*', '+', '?', '|', '^', '$',
    ]) {
        return Ok(regex::escape(&rest));
    }
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '(' | ')' => return Err(unsupported_separator(sep, "it has a parenthesis")),
            '\\' => match chars.next() {
                None => {
                    return Err(re_error(format!(
                        "bad escape (end of pattern) at position {}",
                        SEP_AT + sep.chars().count()
                    )))
                }
                Some(d) if d.is_ascii_digit() => {
                    return Err(unsupported_separator(sep, "a back-reference"))
                }
                Some('Z') => out.push_str("\\z"),
                Some('s') => out.push_str(WS),
                Some(d) => {
                    out.push('\\');
                    out.push(d);
                }
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

thread_local! {
    /// Option patterns by separator (a file with many sections builds one per section).
    static PATTERNS: RefCell<HashMap<String, Regex>> = RefCell::new(HashMap::new());
}

/// Salt's option pattern for a separator, compiled: the leading whitespace, the name, the
/// separator as matched, and the value.
fn option_pattern(sep: &str) -> Result<Regex, FnError> {
    if let Some(re) = PATTERNS.with(|p| p.borrow().get(sep).cloned()) {
        return Ok(re);
    }
    let pattern = format!(
        "^({WS}*)(.+?){WS}*({}){WS}*(.*){WS}*",
        separator_pattern(sep)?
    );
    let re = Regex::new(&pattern).map_err(|e| {
        re_error(
            e.to_string()
                .lines()
                .last()
                .unwrap_or_default()
                .trim_start_matches("error: "),
        )
    })?;
    PATTERNS.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() >= 64 {
            p.clear();
        }
        p.insert(sep.to_string(), re.clone());
    });
    Ok(re)
}

/// Salt's `COM_REGX`: a comment line (`#` or `;` after optional whitespace).
fn comment_line() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(&format!("^{WS}*(#|;)")).expect("static regex is valid"))
}

/// Salt's `INI_REGX`: a section header line, the blank lines around it included.
fn header_line() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(&format!(r"(?m)^{WS}*\[(.+?)\]{WS}*$")).expect("static regex is valid")
    })
}

// ---------------------------------------------------------------------------
// The file's structure

/// A value in an ini file: an option's text, or a section.
#[derive(Debug, Clone)]
enum Item {
    Text(String),
    Section(Section),
}

impl Item {
    /// The value as Salt returns it (a section as the dict of all its entries).
    fn to_value(&self) -> Value {
        match self {
            Item::Text(s) => Value::from(s.as_str()),
            Item::Section(s) => s.to_value(),
        }
    }

    /// The value as an update's input.
    fn to_raw(&self) -> Raw {
        match self {
            Item::Text(s) => Raw::Text(s.clone()),
            Item::Section(s) => Raw::Dict(s.to_raw()),
        }
    }
}

/// A value to update with: a dict (a section) or anything else, as its text.
#[derive(Debug, Clone)]
enum Raw {
    Text(String),
    Dict(Vec<(Value, Raw)>),
}

/// A dict argument as an update's input (Python's `str()` of every value that is not a dict).
fn raw_entries(entries: &[(Value, Value)]) -> Vec<(Value, Raw)> {
    entries
        .iter()
        .map(|(k, v)| {
            let raw = match v {
                Value::Map(inner) => Raw::Dict(raw_entries(inner)),
                other => Raw::Text(py_str(other)),
            };
            (k.clone(), raw)
        })
        .collect()
}

/// `{"before": before, "after": after}`.
fn change(before: Value, after: Value) -> Value {
    Value::Map(vec![
        (Value::from("before"), before),
        (Value::from("after"), after),
    ])
}

/// Python's `d[key] = value` on a dict kept as pairs: a key already there keeps its place.
fn dict_set(dict: &mut Vec<(Value, Value)>, key: &Value, value: Value) {
    match dict.iter_mut().find(|(k, _)| py_eq(k, key)) {
        Some(slot) => slot.1 = value,
        None => dict.push((key.clone(), value)),
    }
}

/// Salt's `_Section`: named entries in order (options, comments, subsections), and the
/// separator its option lines are read with and written with.
#[derive(Debug, Clone)]
struct Section {
    name: Value,
    /// The separator: given, then the last one an option line matched.
    sep: String,
    /// The pattern of option lines, made from the separator the section was created with.
    pattern: Regex,
    no_spaces: bool,
    entries: Vec<(Value, Item)>,
}

impl Section {
    fn new(name: Value, sep: &str, no_spaces: bool) -> Result<Section, FnError> {
        Ok(Section {
            name,
            sep: sep.to_string(),
            pattern: option_pattern(sep)?,
            no_spaces,
            entries: Vec::new(),
        })
    }

    fn find(&self, key: &Value) -> Option<usize> {
        self.entries.iter().position(|(k, _)| py_eq(k, key))
    }

    fn get(&self, key: &Value) -> Option<&Item> {
        self.find(key).map(|i| &self.entries[i].1)
    }

    fn get_mut(&mut self, key: &Value) -> Option<&mut Item> {
        self.find(key).map(|i| &mut self.entries[i].1)
    }

    fn pop(&mut self, key: &Value) -> Option<Item> {
        self.find(key).map(|i| self.entries.remove(i).1)
    }

    /// The section as the dict of its entries.
    fn to_value(&self) -> Value {
        Value::Map(
            self.entries
                .iter()
                .map(|(k, item)| (k.clone(), item.to_value()))
                .collect(),
        )
    }

    fn to_raw(&self) -> Vec<(Value, Raw)> {
        self.entries
            .iter()
            .map(|(k, item)| (k.clone(), item.to_raw()))
            .collect()
    }

    /// Salt's `_uncomment_if_commented`: the place of the first comment that is this option
    /// commented out (`#key = value`), where the option goes instead of it.
    fn commented_out(&self, key: &Value) -> Result<Option<usize>, FnError> {
        for (i, (k, item)) in self.entries.iter().enumerate() {
            let Some(k) = k.as_str() else {
                return Err(FnError::InvalidArgs(format!(
                    "argument of type '{}' is not iterable",
                    py_type_name(k)
                )));
            };
            if !k.contains("#comment") {
                continue;
            }
            let Item::Text(text) = item else {
                return Err(FnError::Exception(
                    "AttributeError: '_Section' object has no attribute 'lstrip'".into(),
                ));
            };
            let named = self
                .pattern
                .captures(text.trim_start_matches('#'))
                .is_some_and(|caps| Some(&caps[2]) == key.as_str());
            if named {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Salt's `_Section.update`: each entry set (a dict becomes a section, merged into a
    /// section already there); what changed, as `{key: {"before", "after"}}` (a merged
    /// section's own changes under its name).
    fn update(&mut self, input: &[(Value, Raw)]) -> Result<Vec<(Value, Value)>, FnError> {
        let mut changes = Vec::new();
        for (key, raw) in input {
            let (item, plain) = match raw {
                Raw::Dict(inner) => {
                    let mut section = Section::new(key.clone(), &self.sep, self.no_spaces)?;
                    section.update(inner)?;
                    let plain = section.to_value();
                    (Item::Section(section), plain)
                }
                Raw::Text(text) => (Item::Text(text.clone()), Value::from(text.as_str())),
            };
            let Some(i) = self.find(key) else {
                dict_set(&mut changes, key, change(Value::Nil, plain));
                let place = match item {
                    Item::Text(_) => self.commented_out(key)?,
                    Item::Section(_) => None,
                };
                match place {
                    Some(i) => self.entries[i] = (key.clone(), item),
                    None => self.entries.push((key.clone(), item)),
                }
                continue;
            };
            match (&mut self.entries[i].1, item) {
                (Item::Section(current), Item::Section(new)) => {
                    let sub = current.update(&new.to_raw())?;
                    if !sub.is_empty() {
                        dict_set(&mut changes, key, Value::Map(sub));
                    }
                }
                (Item::Section(_), Item::Text(_)) => {
                    return Err(no_attribute(&Value::from(""), "items"))
                }
                (Item::Text(current), new) => {
                    if !matches!(&new, Item::Text(t) if t == current) {
                        let before = Value::from(current.as_str());
                        dict_set(&mut changes, key, change(before, plain));
                        self.entries[i].1 = new;
                    }
                }
            }
        }
        Ok(changes)
    }

    /// Salt's `_Section.refresh`: the entries of a section's text (its lines).
    fn read(&mut self, text: &str) -> Result<(), FnError> {
        let text = text.trim_matches('\n');
        if text.is_empty() {
            return Ok(());
        }
        let (mut comments, mut unknowns) = (1, 1);
        let mut indent_now = String::new();
        let set = |s: &mut Section, key: String, value: String| {
            s.update(&[(Value::from(key), Raw::Text(value))]).map(drop)
        };
        for line in text.split('\n') {
            if comment_line().is_match(line) {
                set(self, format!("#comment{comments}"), line.to_string())?;
                comments += 1;
                continue;
            }
            let lead = &line[..line.len() - strip_start(line).len()];
            if !lead.is_empty() && lead.replace('\t', "    ") > indent_now {
                if let Some((last, item)) = self.entries.last() {
                    let Item::Text(value) = item else {
                        return Err(FnError::InvalidArgs(
                            "sequence item 0: expected str instance, _Section found".into(),
                        ));
                    };
                    let (last, value) = (last.clone(), format!("{value}\n{line}"));
                    self.update(&[(last, Raw::Text(value))])?;
                    continue;
                }
            }
            if let Some(caps) = self.pattern.captures(line) {
                indent_now = caps[1].replace('\t', "    ");
                self.sep = caps[3].to_string();
                let (name, value) = (caps[2].to_string(), caps[4].to_string());
                set(self, name, value)?;
                continue;
            }
            set(self, format!("#unknown{unknowns}"), line.to_string())?;
            unknowns += 1;
        }
        Ok(())
    }

    /// The separator the next option line is written with, after one written with `sep`:
    /// Salt changes it at each line (a tab becomes two spaces, then one).
    fn next_sep(&self, sep: &str) -> String {
        if sep.chars().all(|c| c == ' ') {
            " ".into()
        } else if self.no_spaces {
            strip(sep).into()
        } else {
            format!(" {} ", strip(sep))
        }
    }

    /// Salt's `gen_ini`: the section's header, its options and comments, then its
    /// subsections.
    fn render(&self, out: &mut Vec<String>) -> Result<(), FnError> {
        out.push(format!("\n[{}]\n", py_str(&self.name)));
        let mut sep = self.sep.clone();
        let mut subsections = Vec::new();
        for (key, item) in &self.entries {
            let Some(name) = key.as_str() else {
                return Err(FnError::InvalidArgs(format!(
                    "expected string or bytes-like object, got '{}'",
                    py_type_name(key)
                )));
            };
            match item {
                Item::Text(text) if comment_line().is_match(name) => out.push(format!("{text}\n")),
                Item::Section(s) if comment_line().is_match(name) => out.push(format!(
                    "{}\n",
                    brine_protocol::payload::to_json(&s.to_value())
                )),
                Item::Section(s) => subsections.push(s),
                Item::Text(text) => {
                    sep = self.next_sep(&sep);
                    out.push(format!("{name}{sep}{text}\n"));
                }
            }
        }
        for s in subsections {
            s.render(out)?;
        }
        Ok(())
    }
}

/// Whether a key is left out of what the `get_*` functions return (Python's `key[0] == "#"`).
fn hidden(key: &Value) -> Result<bool, FnError> {
    match key {
        Value::String(s) => match s.as_str().map(|t| t.chars().next()) {
            Some(Some(c)) => Ok(c == '#'),
            Some(None) => Err(FnError::Exception(
                "IndexError: string index out of range".into(),
            )),
            None => Ok(false),
        },
        Value::Binary(b) if b.is_empty() => {
            Err(FnError::Exception("IndexError: index out of range".into()))
        }
        Value::Binary(_) | Value::Array(_) => Ok(false),
        other => Err(FnError::InvalidArgs(format!(
            "'{}' object is not subscriptable",
            py_type_name(other)
        ))),
    }
}

/// The options of a section without its comments (subsections whole).
fn options_of(item: &Item) -> Result<Value, FnError> {
    let Item::Section(section) = item else {
        return Err(no_attribute(&Value::from(""), "items"));
    };
    let mut out = Vec::new();
    for (key, item) in &section.entries {
        if !hidden(key)? {
            dict_set(&mut out, key, item.to_value());
        }
    }
    Ok(Value::Map(out))
}

/// Salt's `get_ini`: every entry without the comments, at every level.
fn visible(entries: &[(Value, Item)]) -> Result<Value, FnError> {
    let mut out = Vec::new();
    for (key, item) in entries {
        if hidden(key)? {
            continue;
        }
        let value = match item {
            Item::Text(text) => Value::from(text.as_str()),
            Item::Section(s) => visible(&s.entries)?,
        };
        dict_set(&mut out, key, value);
    }
    Ok(Value::Map(out))
}

// ---------------------------------------------------------------------------
// Encodings

/// The encodings Brine reads and writes ini files in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    Utf8,
    Utf8Sig,
    Latin1,
    Ascii,
}

impl Codec {
    /// Python's codec for an encoding name (`codecs.lookup`, its aliases normalised).
    fn lookup(encoding: Option<&Value>) -> Result<Codec, FnError> {
        let name = match encoding {
            None | Some(Value::Nil) => return Ok(Codec::Utf8),
            Some(Value::String(s)) if s.as_str().is_some() => s.as_str().unwrap_or_default(),
            Some(other) => {
                return Err(FnError::InvalidArgs(format!(
                    "open() argument 'encoding' must be str or None, not {}",
                    py_type_name(other)
                )))
            }
        };
        // Python's `normalize_encoding`: runs of other characters than letters, digits and
        // dots become one `_`, none at either end.
        let mut norm = String::new();
        let mut gap = false;
        for c in name.to_lowercase().chars() {
            if c.is_alphanumeric() || c == '.' {
                if gap && !norm.is_empty() {
                    norm.push('_');
                }
                if c.is_ascii() {
                    norm.push(c);
                }
                gap = false;
            } else {
                gap = true;
            }
        }
        Ok(match norm.as_str() {
            "utf_8" | "utf8" | "u8" | "utf" | "utf8_ucs2" | "utf8_ucs4" | "cp65001" => Codec::Utf8,
            "utf_8_sig" => Codec::Utf8Sig,
            "latin_1" | "latin1" | "latin" | "l1" | "iso_8859_1" | "iso8859_1" | "8859"
            | "cp819" | "iso_ir_100" | "csisolatin1" | "ibm819" | "iso_8859_1_1987" => {
                Codec::Latin1
            }
            "ascii" | "us_ascii" | "us" | "646" | "cp367" | "csascii" | "ibm367" | "iso646_us"
            | "iso_ir_6" | "ansi_x3.4_1968" | "ansi_x3_4_1968" | "ansi_x3.4_1986"
            | "iso_646.irv_1991" => Codec::Ascii,
            _ => {
                return Err(FnError::Execution(format!(
                    "Unsupported encoding '{name}': Brine reads and writes ini files in UTF-8, \
                     UTF-8 with a BOM (utf-8-sig), Latin-1 or ASCII"
                )))
            }
        })
    }

    /// Python's name of the codec, as its errors give it.
    fn name(self) -> &'static str {
        match self {
            Codec::Utf8 | Codec::Utf8Sig => "utf-8",
            Codec::Latin1 => "latin-1",
            Codec::Ascii => "ascii",
        }
    }

    /// The file's bytes as text, Python's `UnicodeDecodeError` when they are not.
    fn decode(self, mut data: Vec<u8>) -> Result<String, FnError> {
        match self {
            Codec::Latin1 => return Ok(data.iter().map(|b| char::from(*b)).collect()),
            Codec::Ascii => {
                return match data.iter().position(|b| !b.is_ascii()) {
                    Some(at) => Err(FnError::Exception(format!(
                        "UnicodeDecodeError: 'ascii' codec can't decode byte 0x{:02x} in \
                         position {at}: ordinal not in range(128)",
                        data[at]
                    ))),
                    None => Ok(String::from_utf8(data).unwrap_or_default()),
                }
            }
            Codec::Utf8Sig if data.starts_with(b"\xef\xbb\xbf") => {
                data.drain(..3);
            }
            Codec::Utf8 | Codec::Utf8Sig => {}
        }
        String::from_utf8(data).map_err(|e| {
            let error = e.utf8_error();
            let (at, data) = (error.valid_up_to(), e.as_bytes());
            let place = |len: usize| match len {
                1 => format!("byte 0x{:02x} in position {at}", data[at]),
                _ => format!("bytes in position {at}-{}", at + len - 1),
            };
            let text = match error.error_len() {
                None => format!("{}: unexpected end of data", place(data.len() - at)),
                Some(_) if (0x80..0xc2).contains(&data[at]) || data[at] > 0xf4 => {
                    format!("{}: invalid start byte", place(1))
                }
                Some(_) => format!("{}: invalid continuation byte", place(1)),
            };
            FnError::Exception(format!(
                "UnicodeDecodeError: 'utf-8' codec can't decode {text}"
            ))
        })
    }

    /// One piece of text as bytes, Python's `UnicodeEncodeError` when it cannot be.
    fn encode(self, text: &str) -> Result<Vec<u8>, FnError> {
        let limit = match self {
            Codec::Utf8 | Codec::Utf8Sig => return Ok(text.as_bytes().to_vec()),
            Codec::Latin1 => 0x100,
            Codec::Ascii => 0x80,
        };
        let chars: Vec<char> = text.chars().collect();
        let Some(first) = chars.iter().position(|c| u32::from(*c) >= limit) else {
            return Ok(chars.iter().map(|c| u32::from(*c) as u8).collect());
        };
        let last = chars[first..]
            .iter()
            .take_while(|c| u32::from(**c) >= limit)
            .count()
            + first
            - 1;
        let what = if first == last {
            let code = u32::from(chars[first]);
            let shown = match code {
                0..=0xff => format!("\\x{code:02x}"),
                0x100..=0xffff => format!("\\u{code:04x}"),
                _ => format!("\\U{code:08x}"),
            };
            format!("character '{shown}' in position {first}")
        } else {
            format!("characters in position {first}-{last}")
        };
        Err(FnError::Exception(format!(
            "UnicodeEncodeError: '{}' codec can't encode {what}: ordinal not in range({limit})",
            self.name()
        )))
    }
}

// ---------------------------------------------------------------------------
// The file

/// Salt's `_Ini`: the file's path, its encoding, and its entries.
struct Ini {
    path: String,
    /// The encoding, or the error opening the file with it gives.
    codec: Result<Codec, FnError>,
    root: Section,
}

impl Ini {
    /// Salt's `_Ini.get_ini_file`: the file read (empty when it does not exist; empty too when
    /// it cannot be read in a test run, as in Salt).
    fn load(
        file_name: &Value,
        sep: &str,
        encoding: Option<&Value>,
        no_spaces: bool,
        test: bool,
    ) -> Result<Ini, FnError> {
        let root = Section::new(file_name.clone(), sep, no_spaces)?;
        let path = match file_name.as_str() {
            Some(p) => p.to_string(),
            None => {
                return Err(FnError::InvalidArgs(format!(
                    "stat: path should be string, bytes, os.PathLike or integer, not {}",
                    py_type_name(file_name)
                )))
            }
        };
        let mut ini = Ini {
            codec: Codec::lookup(encoding),
            path,
            root,
        };
        if std::fs::metadata(&ini.path).is_err() {
            return Ok(ini);
        }
        let data = match ini.read_bytes() {
            Ok(data) => data,
            Err(e) if test => {
                tracing::debug!("{e}");
                return Ok(ini);
            }
            Err(e) => return Err(e),
        };
        let text = ini.codec.clone()?.decode(data)?;
        ini.read(&splitlines(&text).join("\n"))?;
        Ok(ini)
    }

    /// The file's bytes, at most [`MAX_INI_BYTES`].
    fn read_bytes(&self) -> Result<Vec<u8>, FnError> {
        use std::io::Read as _;
        let failed = |e: std::io::Error| {
            FnError::Execution(format!(
                "Unable to open file '{}'. Exception: {}",
                self.path,
                os_error(&e, Some(&self.path))
            ))
        };
        let too_big = || {
            FnError::Execution(format!(
                "Unable to open file '{}': it is larger than {} MiB, the most Brine reads of an \
                 ini file",
                self.path,
                MAX_INI_BYTES >> 20
            ))
        };
        let file = std::fs::File::open(&self.path).map_err(failed)?;
        if file.metadata().is_ok_and(|m| m.len() > MAX_INI_BYTES) {
            return Err(too_big());
        }
        let mut data = Vec::new();
        file.take(MAX_INI_BYTES + 1)
            .read_to_end(&mut data)
            .map_err(failed)?;
        if data.len() as u64 > MAX_INI_BYTES {
            return Err(too_big());
        }
        Ok(data)
    }

    /// Salt's `_Ini.refresh` on the file's text (its lines joined with `\n`): the options
    /// before the first section header, then each section, merged into one of the same name.
    fn read(&mut self, text: &str) -> Result<(), FnError> {
        if text.is_empty() {
            return Ok(());
        }
        let mut parts = Vec::new();
        let mut last = 0;
        for caps in header_line().captures_iter(text) {
            let (Some(whole), Some(name)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            parts.push(&text[last..whole.start()]);
            parts.push(name.as_str());
            last = whole.end();
        }
        parts.push(&text[last..]);
        self.root.read(parts[0])?;
        for pair in parts[1..].chunks(2) {
            let [name, body] = pair else { continue };
            let name = Value::from(*name);
            let mut section = Section::new(name.clone(), &self.root.sep, false)?;
            section.read(body)?;
            self.root.update(&[(name, Raw::Dict(section.to_raw()))])?;
        }
        Ok(())
    }

    /// Salt's `_Ini.flush`: the whole file written again (truncated first, as Python opens it;
    /// what encoded before an encoding error stays written).
    fn flush(&self) -> Result<(), FnError> {
        use std::io::Write as _;
        let failed = |e: std::io::Error| {
            FnError::Execution(format!(
                "Unable to write file '{}'. Exception: {}",
                self.path,
                os_error(&e, Some(&self.path))
            ))
        };
        let mut file = std::fs::File::create(&self.path).map_err(failed)?;
        let codec = self.codec.clone()?;
        let mut lines = Vec::new();
        self.root.render(&mut lines)?;
        // The file's own header is not written, nor a line break before the first line.
        let mut lines = lines.split_off(1);
        if let Some(first) = lines.first_mut() {
            *first = first.trim_start_matches('\n').to_string();
        }
        let mut data = Vec::new();
        if codec == Codec::Utf8Sig {
            data.extend_from_slice(b"\xef\xbb\xbf");
        }
        let mut outcome = Ok(());
        for line in &lines {
            match codec.encode(line) {
                Ok(bytes) => data.extend(bytes),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        file.write_all(&data).map_err(failed)?;
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::map;

    fn parse(text: &str, sep: &str) -> Ini {
        let mut ini = Ini {
            path: "/x.ini".into(),
            codec: Ok(Codec::Utf8),
            root: Section::new(s("/x.ini"), sep, false).unwrap(),
        };
        ini.read(&splitlines(text).join("\n")).unwrap();
        ini
    }

    fn written(ini: &Ini) -> String {
        let mut lines = Vec::new();
        ini.root.render(&mut lines).unwrap();
        let mut text: String = lines[1..].concat();
        while text.starts_with('\n') {
            text.remove(0);
        }
        text
    }

    /// Expected values are Salt 3007's.
    #[test]
    fn reads_and_writes_as_salt() {
        let ini = parse(
            "# top comment\ntop = 1\n#key = old\n\n[sec]\n#k = x\nk = v\n  cont\nother: 2\n\n\
             [sec]\nk = dup\n#comment\n\n[sec2]\na=b\n",
            "=",
        );
        assert_eq!(
            visible(&ini.root.entries).unwrap(),
            map([
                ("top", s("1")),
                ("sec", map([("k", s("dup"))])),
                ("sec2", map([("a", s("b"))])),
            ])
        );
        assert_eq!(
            written(&ini),
            "# top comment\ntop = 1\n#key = old\n\n[sec]\nk = dup\nother: 2\n#comment\n\n\
             [sec2]\na = b\n"
        );
        let mut ini = ini;
        let input = raw_entries(&[
            (s("new"), map([("key", s("val"))])),
            (s("key"), Value::from(5)),
        ]);
        let changes = ini.root.update(&input).unwrap();
        assert_eq!(
            Value::Map(changes),
            map([
                (
                    "new",
                    map([("before", Value::Nil), ("after", map([("key", s("val"))]))])
                ),
                ("key", map([("before", Value::Nil), ("after", s("5"))])),
            ])
        );
        assert_eq!(
            written(&ini),
            "# top comment\ntop = 1\nkey = 5\n\n[sec]\nk = dup\nother: 2\n#comment\n\n\
             [sec2]\na = b\n\n[new]\nkey = val\n"
        );
    }

    #[test]
    fn continuation_lines_and_separators() {
        let ini = parse("a: 1\n  more\n\tdeeper\nb : two words  \n[s]\n x:y\n", ":");
        assert_eq!(
            ini.root.get(&s("a")).map(Item::to_value),
            Some(s("1\n  more\n\tdeeper"))
        );
        assert_eq!(
            written(&ini),
            "a : 1\n  more\n\tdeeper\nb : two words  \n\n[s]\nx : y\n"
        );
        let ini = parse("a b\nc  d e\n", " ");
        assert_eq!(written(&ini), "a b\nc d e\n");
        let mut ini = parse("a=1\n", "=");
        ini.root.no_spaces = true;
        assert_eq!(written(&ini), "a=1\n");
        let ini = parse("x = 1\ny: 2\n", "=|:");
        assert_eq!(
            visible(&ini.root.entries).unwrap(),
            map([("x", s("1")), ("y", s("2"))])
        );
    }

    #[test]
    fn separators_as_python_patterns() {
        for (sep, err) in [
            (
                "",
                "re.error: missing ), unterminated subpattern at position 13",
            ),
            ("q", "re.error: bad escape \\q at position 14"),
            (
                "3",
                "re.error: cannot refer to an open group at position 14",
            ),
            ("4", "re.error: invalid group reference 4 at position 15"),
            ("x", "re.error: incomplete escape \\x at position 14"),
        ] {
            assert_eq!(
                option_pattern(sep).unwrap_err(),
                FnError::Exception(err.into()),
                "{sep:?}"
            );
        }
        assert!(matches!(option_pattern("1"), Err(FnError::Execution(_))));
        assert!(matches!(option_pattern("=)("), Err(FnError::Execution(_))));
        let re = option_pattern("x41").unwrap();
        assert_eq!(&re.captures("kAv").unwrap()[4], "v");
        let re = option_pattern("012").unwrap();
        assert_eq!(&re.captures("k\nv").unwrap()[2], "k");
    }

    #[test]
    fn encodings_as_python() {
        assert_eq!(Codec::lookup(Some(&s("Latin 1"))).unwrap(), Codec::Latin1);
        assert_eq!(Codec::lookup(Some(&s("UTF-8"))).unwrap(), Codec::Utf8);
        assert!(Codec::lookup(Some(&s("bogus"))).is_err());
        assert_eq!(
            Codec::Ascii.encode("b = é€\n").unwrap_err(),
            FnError::Exception(
                "UnicodeEncodeError: 'ascii' codec can't encode characters in position 4-5: \
                 ordinal not in range(128)"
                    .into()
            )
        );
        assert_eq!(
            Codec::Utf8.decode(b"x = \xff\n".to_vec()).unwrap_err(),
            FnError::Exception(
                "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 4: \
                 invalid start byte"
                    .into()
            )
        );
        assert_eq!(
            Codec::Latin1.decode(b"x = \xff".to_vec()).unwrap(),
            "x = \u{ff}"
        );
    }

    #[tokio::test]
    async fn functions_change_the_file_as_salt_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.ini");
        let file = s(&path.display().to_string());
        std::fs::write(&path, "top = 1\n; note\n[one]\nk = v\n#c\n[two]\nx = y\n").unwrap();
        let ctx = ctx();
        let r = call(&ctx, "ini.get_option", &[file.clone(), s("one"), s("k")]).await;
        assert_eq!(r.ret, s("v"));
        let r = call(&ctx, "ini.get_option", &[file.clone(), s("top"), s("k")]).await;
        assert_eq!(r.ret, Value::Nil);
        let r = call(
            &ctx,
            "ini.get_option",
            &[file.clone(), Value::Nil, s("two")],
        )
        .await;
        assert_eq!(r.ret, map([("x", s("y"))]));
        let r = call(&ctx, "ini.get_section", &[file.clone(), s("one")]).await;
        assert_eq!(r.ret, map([("k", s("v"))]));
        let r = call(&ctx, "ini.get_section", &[file.clone(), s("top")]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: AttributeError: 'str' object has no attribute 'items'")
        );
        let r = call(&ctx, "ini.remove_section", &[file.clone(), s("nope")]).await;
        assert_eq!(r.ret, Value::Nil);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "top = 1\n; note\n[one]\nk = v\n#c\n[two]\nx = y\n"
        );
        let r = call(&ctx, "ini.remove_option", &[file.clone(), s("one"), s("k")]).await;
        assert_eq!(r.ret, s("v"));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "top = 1\n; note\n\n[one]\n#c\n\n[two]\nx = y\n"
        );
        let r = call(&ctx, "ini.remove_section", &[file.clone(), s("two")]).await;
        assert_eq!(r.ret, map([("x", s("y"))]));
        let sections = map([("one", map([("k", s("w"))])), ("top", Value::from(2))]);
        let r = call(&ctx, "ini.set_option", &[file.clone(), sections]).await;
        assert_eq!(
            r.ret,
            map([
                (
                    "one",
                    map([("k", map([("before", Value::Nil), ("after", s("w"))]))])
                ),
                ("top", map([("before", s("1")), ("after", s("2"))])),
            ])
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "top = 2\n; note\n\n[one]\n#c\nk = w\n"
        );
        let r = call(&ctx, "ini.get_ini", &[file]).await;
        assert_eq!(r.ret, map([("top", s("2")), ("one", map([("k", s("w"))]))]));
        // A directory cannot be read.
        let d = s(&dir.path().display().to_string());
        let r = call(&ctx, "ini.get_ini", &[d]).await;
        assert_eq!(
            r.ret,
            s(&format!(
                "ERROR: Unable to open file '{0}'. Exception: [Errno 21] Is a directory: '{0}'",
                dir.path().display()
            ))
        );
        // A missing file reads as empty, and is created by the functions that write.
        let missing = s(&dir.path().join("new.ini").display().to_string());
        let r = call(&ctx, "ini.get_option", &[missing.clone(), s("a"), s("b")]).await;
        assert_eq!(r.ret, Value::Nil);
        assert!(!dir.path().join("new.ini").exists());
        let r = call(
            &ctx,
            "ini.remove_option",
            &[missing.clone(), s("a"), s("b")],
        )
        .await;
        assert_eq!(r.ret, Value::Nil);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("new.ini")).unwrap(),
            ""
        );
        let r = call(&ctx, "ini.set_option", &[missing, s("[a]")]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: AttributeError: 'str' object has no attribute 'items'")
        );
    }

    #[tokio::test]
    async fn unreadable_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = s(&dir.path().display().to_string());
        // In a test run a file that cannot be read reads as empty, as in Salt.
        let mut services = super::super::Services::detached();
        services
            .opts
            .insert("test".into(), serde_json::Value::Bool(true));
        let test_run = Context {
            services: std::sync::Arc::new(services),
            ..ctx()
        };
        let r = call(&test_run, "ini.get_ini", std::slice::from_ref(&d)).await;
        assert_eq!(r.ret, Value::Map(Vec::new()));
        let r = call(&ctx(), "ini.get_ini", &[d]).await;
        assert_eq!(r.retcode, 1);
        // Larger files than Brine reads are refused.
        let big = dir.path().join("big.ini");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_INI_BYTES + 1)
            .unwrap();
        let r = call(&ctx(), "ini.get_ini", &[s(&big.display().to_string())]).await;
        assert!(py_str(&r.ret).contains("larger than 64 MiB"), "{:?}", r.ret);
    }
}
