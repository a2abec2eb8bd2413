//! Command lines parsed the way Salt's tools parse them: Python's `optparse`, as
//! `salt.utils.parsers` configures it.
//!
//! - Options may appear anywhere: before, between and after the positional arguments.
//! - `--name=value` and `--name value`; a long option may be shortened to any unambiguous
//!   prefix (`--conf` for `--config-dir`); an exact name always wins over longer ones.
//! - `-t10` and `-t 10`; switches group (`-Ly`), and an option that takes a value ends the
//!   group, taking the rest of it as its value (`-Lt10`).
//! - The value of an option is the next word, whatever it looks like (`-t -5`).
//! - `--` ends the options: every later word is an argument. A lone `-` is an argument.
//! - Errors are optparse's, with Salt's exit status: the usage line and
//!   `<prog>: error: <message>` on stderr, exit 64 (`EX_USAGE`).
//!
//! The option tables of Salt's tools are in [`tools`]. Setting `BRINE_PRINT_OPTPARSE=1` in
//! the environment makes [`Parser::parse_or_exit`] print the parse as JSON (`{"options":
//! {dest: value}, "args": [...]}`, only the options the command line set, as optparse fills
//! an empty `Values`) and exit 0 instead of running the tool: the tests compare it with
//! real Salt's parser.

pub mod tools;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::pyrepr::str_repr;

/// Salt's exit status for a command line it cannot parse (`salt.defaults.exitcodes.EX_USAGE`).
pub const EX_USAGE: i32 = 64;

/// The environment variable that makes a tool print its parse and exit.
pub const PRINT_ENV: &str = "BRINE_PRINT_OPTPARSE";

/// The code name of the Salt release line Brine follows, as `--version` prints it.
pub const SALT_CODENAME: &str = "Chlorine";

/// What an option does when it is seen (optparse's actions, as Salt's tools use them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Take a value and keep the last one.
    Store,
    /// A switch that sets its destination to true.
    StoreTrue,
    /// A switch that sets its destination to false (`--hide-timeout` → `show_timeout`).
    StoreFalse,
    /// Take a value each time, and keep them all.
    Append,
    /// A switch counting how often it was given.
    Count,
    /// Salt's `--log-file` callback: a bare file name is taken relative to `.`.
    LogFile,
    /// Print the help and exit 0, at once.
    Help,
    /// Print `<prog> <version> (<codename>)` and exit 0, at once.
    Version,
}

/// How an option's value is checked and converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Str,
    /// Python's `int` with optparse's prefixes: `0x` hexadecimal, `0b` binary, a leading
    /// `0` octal.
    Int,
    Float,
    /// One of a fixed list of words.
    Choice(&'static [&'static str]),
}

/// One option: its spellings, action, destination and value type.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// Every spelling: `-c`, `--config-dir`.
    pub names: &'static [&'static str],
    pub action: Action,
    /// Where the value goes (Salt's `dest`: the key of the parse).
    pub dest: &'static str,
    pub ty: Type,
    /// The value's name in the help; the destination in capitals when `None`.
    pub metavar: Option<&'static str>,
    pub help: &'static str,
}

impl Opt {
    /// An option taking a string value.
    pub const fn store(
        names: &'static [&'static str],
        dest: &'static str,
        help: &'static str,
    ) -> Opt {
        Opt {
            names,
            action: Action::Store,
            dest,
            ty: Type::Str,
            metavar: None,
            help,
        }
    }

    /// A switch.
    pub const fn flag(
        names: &'static [&'static str],
        dest: &'static str,
        help: &'static str,
    ) -> Opt {
        Opt {
            action: Action::StoreTrue,
            ..Opt::store(names, dest, help)
        }
    }

    pub const fn action(self, action: Action) -> Opt {
        Opt { action, ..self }
    }

    pub const fn ty(self, ty: Type) -> Opt {
        Opt { ty, ..self }
    }

    pub const fn metavar(self, metavar: &'static str) -> Opt {
        Opt {
            metavar: Some(metavar),
            ..self
        }
    }

    fn takes_value(&self) -> bool {
        matches!(
            self.action,
            Action::Store | Action::Append | Action::LogFile
        )
    }
}

/// The value of one destination after parsing.
#[derive(Debug, Clone, PartialEq)]
pub enum OptValue {
    Bool(bool),
    Str(String),
    Int(i64),
    Float(f64),
    List(Vec<String>),
}

impl OptValue {
    fn to_json(&self) -> serde_json::Value {
        match self {
            OptValue::Bool(b) => (*b).into(),
            OptValue::Str(s) => s.as_str().into(),
            OptValue::Int(i) => (*i).into(),
            OptValue::Float(f) => (*f).into(),
            OptValue::List(l) => l.clone().into(),
        }
    }
}

/// A parsed command line: the options it set, and the positional arguments in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// Only the destinations the command line set (no defaults).
    pub values: BTreeMap<&'static str, OptValue>,
    /// The option spelling that last set each destination, in full (`--config-dir` for
    /// `--conf`), for messages.
    pub spelled: BTreeMap<&'static str, String>,
    pub args: Vec<String>,
}

impl Parsed {
    pub fn is_set(&self, dest: &str) -> bool {
        self.values.contains_key(dest)
    }

    /// A switch: true when the command line set it to true.
    pub fn flag(&self, dest: &str) -> bool {
        matches!(self.values.get(dest), Some(OptValue::Bool(true)))
    }

    /// A boolean destination, or `default` when the command line did not set it.
    pub fn bool_or(&self, dest: &str, default: bool) -> bool {
        match self.values.get(dest) {
            Some(OptValue::Bool(b)) => *b,
            _ => default,
        }
    }

    pub fn str(&self, dest: &str) -> Option<&str> {
        match self.values.get(dest) {
            Some(OptValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    pub fn int(&self, dest: &str) -> Option<i64> {
        match self.values.get(dest) {
            Some(OptValue::Int(i)) => Some(*i),
            _ => None,
        }
    }

    pub fn float(&self, dest: &str) -> Option<f64> {
        match self.values.get(dest) {
            Some(OptValue::Float(f)) => Some(*f),
            _ => None,
        }
    }

    pub fn list(&self, dest: &str) -> &[String] {
        match self.values.get(dest) {
            Some(OptValue::List(l)) => l,
            _ => &[],
        }
    }

    /// How the command line spelled the option that set `dest` (`-t`, `--timeout`).
    pub fn spelling<'a>(&'a self, dest: &'a str) -> &'a str {
        self.spelled.get(dest).map(String::as_str).unwrap_or(dest)
    }

    /// The parse as JSON, in the shape of optparse's `Values` (see the module docs).
    pub fn to_json(&self) -> serde_json::Value {
        let options: serde_json::Map<String, serde_json::Value> = self
            .values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_json()))
            .collect();
        serde_json::json!({ "options": options, "args": self.args })
    }
}

/// Why parsing stopped before the end of the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// `--help`: the text for stdout.
    Help(String),
    /// `--version`: the line for stdout.
    Version(String),
    /// optparse's message, without the usage and the `<prog>: error: ` prefix.
    Error(String),
}

/// One tool's command line: its name, usage line and options.
#[derive(Debug, Clone)]
pub struct Parser {
    pub prog: &'static str,
    /// The usage line after `Usage: ` (`%prog` already replaced).
    pub usage: String,
    pub description: &'static str,
    pub options: Vec<Opt>,
}

impl Parser {
    pub fn new(
        prog: &'static str,
        usage: &str,
        description: &'static str,
        options: Vec<Opt>,
    ) -> Parser {
        Parser {
            prog,
            usage: usage.replace("%prog", prog),
            description,
            options,
        }
    }

    /// Parse `args` (without the program name).
    pub fn parse<S: AsRef<str>>(&self, args: &[S]) -> Result<Parsed, Stop> {
        let mut rargs: Vec<String> = args.iter().rev().map(|a| a.as_ref().to_string()).collect();
        let mut parsed = Parsed::default();
        // `rargs` is reversed: the next word is at the end.
        while let Some(arg) = rargs.pop() {
            if arg == "--" {
                break;
            } else if arg.starts_with("--") {
                self.long_opt(arg, &mut rargs, &mut parsed)?;
            } else if arg.starts_with('-') && arg.len() > 1 {
                self.short_opts(&arg, &mut rargs, &mut parsed)?;
            } else {
                parsed.args.push(arg);
            }
        }
        parsed.args.extend(rargs.into_iter().rev());
        Ok(parsed)
    }

    fn long_opt(
        &self,
        arg: String,
        rargs: &mut Vec<String>,
        parsed: &mut Parsed,
    ) -> Result<(), Stop> {
        let (typed, explicit) = match arg.split_once('=') {
            Some((o, v)) => {
                rargs.push(v.to_string());
                (o.to_string(), true)
            }
            None => (arg, false),
        };
        let (name, opt) = self.match_long(&typed)?;
        let value = if opt.takes_value() {
            match rargs.pop() {
                Some(v) => Some(v),
                None => return Err(Stop::Error(format!("{name} option requires 1 argument"))),
            }
        } else if explicit {
            return Err(Stop::Error(format!("{name} option does not take a value")));
        } else {
            None
        };
        self.take(opt, name, value, parsed)
    }

    fn short_opts(
        &self,
        arg: &str,
        rargs: &mut Vec<String>,
        parsed: &mut Parsed,
    ) -> Result<(), Stop> {
        let chars: Vec<(usize, char)> = arg.char_indices().skip(1).collect();
        for (i, &(at, ch)) in chars.iter().enumerate() {
            let name = format!("-{ch}");
            let Some(opt) = self
                .options
                .iter()
                .find(|o| o.names.contains(&name.as_str()))
            else {
                return Err(Stop::Error(format!("no such option: {name}")));
            };
            if opt.takes_value() {
                let rest = &arg[at + ch.len_utf8()..];
                if i + 1 < chars.len() {
                    rargs.push(rest.to_string());
                }
                let Some(value) = rargs.pop() else {
                    return Err(Stop::Error(format!("{name} option requires 1 argument")));
                };
                return self.take(opt, name.clone(), Some(value), parsed);
            }
            self.take(opt, name, None, parsed)?;
        }
        Ok(())
    }

    /// optparse's `_match_abbrev`: the exact name, or the only long name starting with `s`.
    fn match_long(&self, s: &str) -> Result<(String, &Opt), Stop> {
        let longs = self
            .options
            .iter()
            .flat_map(|o| o.names.iter().map(move |n| (*n, o)))
            .filter(|(n, _)| n.starts_with("--"));
        let mut possible: Vec<(&str, &Opt)> = Vec::new();
        for (n, o) in longs {
            if n == s {
                return Ok((n.to_string(), o));
            }
            if n.starts_with(s) {
                possible.push((n, o));
            }
        }
        match possible.len() {
            1 => Ok((possible[0].0.to_string(), possible[0].1)),
            0 => Err(Stop::Error(format!("no such option: {s}"))),
            _ => {
                let mut names: Vec<&str> = possible.iter().map(|(n, _)| *n).collect();
                names.sort_unstable();
                Err(Stop::Error(format!(
                    "ambiguous option: {s} ({}?)",
                    names.join(", ")
                )))
            }
        }
    }

    fn take(
        &self,
        opt: &Opt,
        name: String,
        value: Option<String>,
        parsed: &mut Parsed,
    ) -> Result<(), Stop> {
        let converted = match (&value, opt.ty) {
            (None, _) => None,
            (Some(v), Type::Str) => Some(OptValue::Str(v.clone())),
            (Some(v), Type::Int) => Some(OptValue::Int(py_optparse_int(v).ok_or_else(|| {
                Stop::Error(format!(
                    "option {name}: invalid integer value: {}",
                    str_repr(v)
                ))
            })?)),
            (Some(v), Type::Float) => Some(OptValue::Float(py_float(v).ok_or_else(|| {
                Stop::Error(format!(
                    "option {name}: invalid floating-point value: {}",
                    str_repr(v)
                ))
            })?)),
            (Some(v), Type::Choice(choices)) => {
                if !choices.contains(&v.as_str()) {
                    let list: Vec<String> = choices.iter().map(|c| str_repr(c)).collect();
                    return Err(Stop::Error(format!(
                        "option {name}: invalid choice: {} (choose from {})",
                        str_repr(v),
                        list.join(", ")
                    )));
                }
                Some(OptValue::Str(v.clone()))
            }
        };
        let dest = opt.dest;
        match opt.action {
            Action::Help => return Err(Stop::Help(self.help())),
            Action::Version => return Err(Stop::Version(self.version())),
            Action::Store => {
                parsed.values.insert(dest, converted.expect("a value"));
            }
            Action::LogFile => {
                let v = value.expect("a value");
                let v = if v.contains('/') { v } else { format!("./{v}") };
                parsed.values.insert(dest, OptValue::Str(v));
            }
            Action::StoreTrue => {
                parsed.values.insert(dest, OptValue::Bool(true));
            }
            Action::StoreFalse => {
                parsed.values.insert(dest, OptValue::Bool(false));
            }
            Action::Append => {
                let v = value.expect("a value");
                match parsed.values.entry(dest).or_insert(OptValue::List(vec![])) {
                    OptValue::List(l) => l.push(v),
                    other => *other = OptValue::List(vec![v]),
                }
            }
            Action::Count => {
                let n = parsed.int(dest).unwrap_or(0);
                parsed.values.insert(dest, OptValue::Int(n + 1));
            }
        }
        parsed.spelled.insert(dest, name);
        Ok(())
    }

    /// `salt 3007.15 (Chlorine)`, as Salt's `--version` prints it.
    pub fn version(&self) -> String {
        format!("{} {} ({SALT_CODENAME})", self.prog, crate::SALT_VERSION)
    }

    /// The report of `-V`/`--versions-report`, in the shape of Salt's.
    pub fn versions_report(&self) -> String {
        format!(
            "Salt Version:\n          Salt: {}\n \nBrine Version:\n         Brine: {}\n",
            crate::SALT_VERSION,
            env!("CARGO_PKG_VERSION")
        )
    }

    /// The usage block optparse prints before an error (`Usage: ...` and a blank line).
    pub fn usage_block(&self) -> String {
        format!("Usage: {}\n\n", self.usage)
    }

    /// The whole error text for stderr.
    pub fn error_text(&self, msg: &str) -> String {
        format!("{}{}: error: {msg}\n", self.usage_block(), self.prog)
    }

    /// The `--help` text, laid out as optparse's `IndentedHelpFormatter` does (78 columns,
    /// help from column 24).
    pub fn help(&self) -> String {
        const WIDTH: usize = 78;
        const HELP_AT: usize = 24;
        let mut out = self.usage_block();
        if !self.description.is_empty() {
            for line in wrap(self.description, WIDTH) {
                out.push_str(&line);
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str("Options:\n");
        for opt in &self.options {
            let metavar = opt
                .metavar
                .map(str::to_string)
                .unwrap_or_else(|| opt.dest.to_uppercase());
            let shown: Vec<String> = opt
                .names
                .iter()
                .map(|n| match (opt.takes_value(), n.starts_with("--")) {
                    (false, _) => n.to_string(),
                    (true, true) => format!("{n}={metavar}"),
                    (true, false) => format!("{n} {metavar}"),
                })
                .collect();
            let shown = format!("  {}", shown.join(", "));
            let lines = wrap(opt.help, WIDTH - HELP_AT);
            if shown.len() + 2 > HELP_AT {
                out.push_str(&shown);
                out.push('\n');
                for l in &lines {
                    out.push_str(&format!("{:HELP_AT$}{l}\n", ""));
                }
            } else {
                let mut first = true;
                for l in &lines {
                    if first {
                        out.push_str(&format!("{shown:HELP_AT$}{l}\n"));
                        first = false;
                    } else {
                        out.push_str(&format!("{:HELP_AT$}{l}\n", ""));
                    }
                }
                if first {
                    out.push_str(&shown);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// Parse the process's command line; on `--help`, `--version`, `-V` or an error, print
    /// what Salt prints and exit. With `BRINE_PRINT_OPTPARSE` set, print the parse and exit.
    pub fn parse_or_exit(&self) -> Parsed {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let parsed = self.parse_or_exit_from(&args);
        if std::env::var_os(PRINT_ENV).is_some_and(|v| !v.is_empty()) {
            println!("{}", parsed.to_json());
            std::process::exit(0);
        }
        if parsed.flag("versions_report") {
            print!("{}", self.versions_report());
            std::process::exit(0);
        }
        parsed
    }

    fn parse_or_exit_from(&self, args: &[String]) -> Parsed {
        match self.parse(args) {
            Ok(p) => p,
            Err(Stop::Help(text)) => {
                print!("{text}");
                std::process::exit(0);
            }
            Err(Stop::Version(line)) => {
                println!("{line}");
                std::process::exit(0);
            }
            Err(Stop::Error(msg)) => {
                eprint!("{}", self.error_text(&msg));
                std::process::exit(EX_USAGE);
            }
        }
    }

    /// Exit with a one-line error when the command line set an option Brine does not
    /// implement (listed by destination), rather than ignoring it.
    pub fn refuse_unsupported(&self, parsed: &Parsed, dests: &[&str]) {
        for d in dests {
            if parsed.is_set(d) {
                eprintln!(
                    "{}: {} is not supported by Brine",
                    self.prog,
                    parsed.spelling(d)
                );
                std::process::exit(2);
            }
        }
    }
}

/// Greedy word wrap (textwrap.wrap's result for plain prose).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// optparse's `_parse_int`: `0x…` hexadecimal, `0b…` binary, a leading `0` octal, else
/// decimal, each with Python `int(text, base)` rules.
pub fn py_optparse_int(val: &str) -> Option<i64> {
    let lower = val.get(..2).map(str::to_ascii_lowercase);
    match lower.as_deref() {
        Some("0x") => py_int(val, 16),
        Some("0b") => py_int(if val.len() > 2 { &val[2..] } else { "0" }, 2),
        _ if val.starts_with('0') => py_int(val, 8),
        _ => py_int(val, 10),
    }
}

/// Python's `int(text, base)` for bases 2, 8, 10 and 16: surrounding whitespace, a sign, the
/// base's own prefix (`0x`, `0o`, `0b`) and single underscores between digits.
pub fn py_int(text: &str, base: u32) -> Option<i64> {
    let s = text.trim();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let prefix = match base {
        16 => "0x",
        8 => "0o",
        2 => "0b",
        _ => "",
    };
    let (s, after_prefix) = match s.get(..2) {
        Some(p) if !prefix.is_empty() && p.eq_ignore_ascii_case(prefix) => (&s[2..], true),
        _ => (s, false),
    };
    let s = if after_prefix {
        s.strip_prefix('_').unwrap_or(s)
    } else {
        s
    };
    if s.is_empty() || s.starts_with('_') || s.ends_with('_') || s.contains("__") {
        return None;
    }
    let digits: String = s.chars().filter(|c| *c != '_').collect();
    if !digits.chars().all(|c| c.is_digit(base)) {
        return None;
    }
    let n = i64::from_str_radix(&digits, base).ok()?;
    Some(if neg { -n } else { n })
}

/// Python's `float(text)` for ordinary numbers, `inf` and `nan`.
pub fn py_float(text: &str) -> Option<f64> {
    let s = text.trim();
    if s.is_empty() || s.starts_with('_') || s.ends_with('_') || s.contains("__") {
        return None;
    }
    let chars: Vec<char> = s.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if *c == '_'
            && !(i > 0
                && chars[i - 1].is_ascii_digit()
                && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit()))
        {
            return None;
        }
    }
    let cleaned: String = chars.into_iter().filter(|c| *c != '_').collect();
    cleaned.parse::<f64>().ok()
}
