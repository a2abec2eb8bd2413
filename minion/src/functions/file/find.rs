//! `file.find`: Salt's approximation of `find(1)` (`salt.utils.find`), as Salt 3007 runs it.
//!
//! Criteria (`name`, `iname`, `regex`, `iregex` on the base name; `type`, `owner`, `group`,
//! `size`, `mtime` on the file's `stat`, which follows links and falls back to `lstat`; `grep` on
//! the contents of plain files) are checked in that order, name criteria first; actions
//! (`print`, `delete`, `exec`) run in the order given for each match, `print=path` when none is
//! given. `delete` is also a type criterion (`f` by default, `a` for every type). `mindepth`
//! and `maxdepth` count from the path given (depth 0). The path is a glob. The results are
//! sorted. Salt's own quirks are kept: options are named by their class (`owner`, not the
//! documented `user`), a glob's `?` matches zero or one character, and a bad option is the
//! text `error: ...` rather than a failure.

use std::cmp::Ordering;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use brine_protocol::payload::{py_truthy, Value};

use super::super::args::{py_int, py_str, shlex_split, Bound};
use super::super::FnError;
use super::{compile_str, expanduser, gid_to_group, str_arg, translate_pattern, uid_to_user};

/// A file's `stat`, as Salt takes it: following a link, its own when that fails.
type Stat = std::fs::Metadata;

/// When an option needs the file's `stat` or contents (Salt checks path criteria first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Needs {
    Path,
    Stat,
    Contents,
}

/// A match criterion.
#[derive(Debug)]
enum Criterion {
    /// `name`/`iname`/`regex`/`iregex`: `re.match` on the base name.
    Name(regex::Regex),
    /// `type`, and `delete`'s types.
    Type(Vec<char>),
    Owner(Vec<u32>),
    Group(Vec<u32>),
    Size {
        min: u64,
        max: u64,
    },
    /// Modified at or after (`-`) or at or before the time.
    Mtime {
        since: bool,
        time: f64,
    },
    Grep(regex::bytes::Regex),
}

/// An action on a match.
#[derive(Debug)]
enum Action {
    Print(Vec<String>),
    Delete,
    Exec(String),
}

/// The options of one call.
#[derive(Debug, Default)]
struct Finder {
    criteria: Vec<(Needs, Criterion)>,
    actions: Vec<Action>,
    mindepth: i64,
    maxdepth: Option<i64>,
    test: bool,
}

/// `file.find(path, *args, **kwargs)`.
pub(in crate::functions) fn find(b: &Bound) -> Result<Value, FnError> {
    let path = expanduser(&str_arg(b, "path")?);
    let mut options: Vec<(String, Value)> = b
        .kwargs
        .iter()
        .filter(|(k, _)| !k.starts_with('_'))
        .cloned()
        .collect();
    let word = |w: &str| b.varargs.iter().any(|a| a.as_str() == Some(w));
    let bare = if word("delete") {
        Some(("delete", "f"))
    } else if word("print") {
        Some(("print", "path"))
    } else {
        None
    };
    if let Some((key, value)) = bare {
        match options.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = Value::from(value),
            None => options.push((key.to_string(), Value::from(value))),
        }
    }
    let finder = match Finder::new(options) {
        Ok(f) => f,
        Err(e) => return Ok(Value::from(format!("error: {e}"))),
    };
    let mut found = Vec::new();
    // Python's glob gives paths as the pattern spells them: relative ones without `./`,
    // a trailing `/` kept.
    let relative = !path.starts_with('/');
    for top in brine_protocol::config::glob(Path::new(&path)) {
        let mut top = top.to_string_lossy().into_owned();
        if relative {
            if let Some(rest) = top.strip_prefix("./") {
                top = rest.to_string();
            }
        }
        if path.ends_with('/') && !top.ends_with('/') {
            top.push('/');
        }
        finder.find(&top, &mut found)?;
    }
    let mut failed = None;
    found.sort_by(|a, b| {
        py_cmp(a, b).unwrap_or_else(|e| {
            failed.get_or_insert(e);
            Ordering::Equal
        })
    });
    match failed {
        Some(e) => Err(FnError::InvalidArgs(e)),
        None => Ok(Value::Array(found)),
    }
}

/// Python's `str.title()` for an option name: how Salt finds the option's class.
fn title(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut after_letter = false;
    for c in key.chars() {
        if after_letter {
            out.extend(c.to_lowercase());
        } else {
            out.extend(c.to_uppercase());
        }
        after_letter = c.is_alphabetic();
    }
    out
}

impl Finder {
    fn new(options: Vec<(String, Value)>) -> Result<Finder, String> {
        let mut f = Finder::default();
        let mut rest = Vec::new();
        for (key, value) in options {
            match key.as_str() {
                "mindepth" => f.mindepth = depth(&key, &value)?,
                "maxdepth" => f.maxdepth = Some(depth(&key, &value)?),
                "test" => f.test = py_truthy(&value),
                _ => rest.push((key, value)),
            }
        }
        for (key, value) in rest {
            if !py_truthy(&value) {
                return Err(format!("missing value for \"{key}\" option"));
            }
            let text = py_str(&value);
            match title(&key).as_str() {
                "Name" => f.criterion(Needs::Path, Criterion::Name(glob_re(&text, false)?)),
                "Iname" => f.criterion(Needs::Path, Criterion::Name(glob_re(&text, true)?)),
                "Regex" => f.criterion(Needs::Path, Criterion::Name(regex_of(&text, false)?)),
                "Iregex" => f.criterion(Needs::Path, Criterion::Name(regex_of(&text, true)?)),
                "Type" => f.criterion(Needs::Stat, Criterion::Type(types(&text)?)),
                "Owner" => f.criterion(Needs::Stat, Criterion::Owner(owners(&text)?)),
                "Group" => f.criterion(Needs::Stat, Criterion::Group(groups(&text)?)),
                "Size" => {
                    let (min, max) = parse_size(&text)?;
                    f.criterion(Needs::Stat, Criterion::Size { min, max });
                }
                "Mtime" => {
                    let (secs, resolution, modifier) = parse_interval(&text)?;
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64());
                    let time = now - (secs / resolution).trunc() * resolution;
                    f.criterion(
                        Needs::Stat,
                        Criterion::Mtime {
                            since: modifier == "-",
                            time,
                        },
                    );
                }
                "Grep" => {
                    let re = compile_str(&text)
                        .ok()
                        .and_then(|re| regex::bytes::Regex::new(re.as_str()).ok())
                        .ok_or_else(|| format!("invalid regular expression: \"{text}\""))?;
                    f.criterion(Needs::Contents, Criterion::Grep(re));
                }
                "Print" => {
                    let mut fields: Vec<String> = text
                        .replace(',', " ")
                        .split_whitespace()
                        .map(str::to_string)
                        .collect();
                    if fields.is_empty() {
                        fields.push("path".into());
                    }
                    f.actions.push(Action::Print(fields));
                }
                "Delete" => {
                    let spec = if text.contains('a') {
                        "bcdpfls".to_string()
                    } else {
                        text
                    };
                    f.criterion(Needs::Stat, Criterion::Type(types(&spec)?));
                    f.actions.push(Action::Delete);
                }
                "Exec" => f.actions.push(Action::Exec(text)),
                _ => return Err(format!("invalid option \"{key}\"")),
            }
        }
        if f.actions.is_empty() {
            f.actions.push(Action::Print(vec!["path".into()]));
        }
        // Path criteria first, then stat, then contents, each in the order given.
        f.criteria.sort_by_key(|(needs, _)| *needs);
        Ok(f)
    }

    fn criterion(&mut self, needs: Needs, c: Criterion) {
        self.criteria.push((needs, c));
    }

    /// The results for one path the glob gave, appended to `out`.
    fn find(&self, top: &str, out: &mut Vec<Value>) -> Result<(), FnError> {
        if self.mindepth < 1 {
            let name = top.rsplit('/').next().unwrap_or(top);
            self.visit(top, name, out)?;
        }
        self.walk(top, 1, out)
    }

    /// `os.walk` from `dir`: its entries (directories, then the rest) at `depth`, then each
    /// subdirectory that is not a link, while `maxdepth` allows.
    fn walk(&self, dir: &str, depth: i64, out: &mut Vec<Value>) -> Result<(), FnError> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // os.walk: a directory is one by `stat` (a link to one too), not descended into
            // when it is a link.
            let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
                dirs.push((name, is_link));
            } else {
                files.push(name);
            }
        }
        let join = |name: &str| {
            if dir.ends_with('/') {
                format!("{dir}{name}")
            } else {
                format!("{dir}/{name}")
            }
        };
        if depth >= self.mindepth && self.maxdepth.is_none_or(|m| m >= depth) {
            for name in dirs.iter().map(|(n, _)| n).chain(files.iter()) {
                self.visit(&join(name), name, out)?;
            }
        }
        if self.maxdepth.is_some_and(|m| depth > m) {
            return Ok(());
        }
        for (name, is_link) in &dirs {
            if !is_link {
                self.walk(&join(name), depth + 1, out)?;
            }
        }
        Ok(())
    }

    /// The criteria on one path, then the actions when they all hold.
    fn visit(&self, full: &str, name: &str, out: &mut Vec<Value>) -> Result<(), FnError> {
        let mut stat: Option<Option<Stat>> = None;
        let stat_of = |cache: &mut Option<Option<Stat>>| -> Option<Stat> {
            cache
                .get_or_insert_with(|| {
                    std::fs::metadata(full)
                        .or_else(|_| std::fs::symlink_metadata(full))
                        .ok()
                })
                .clone()
        };
        for (needs, criterion) in &self.criteria {
            let st = if *needs >= Needs::Stat {
                match stat_of(&mut stat) {
                    Some(st) => Some(st),
                    // Gone meanwhile: Salt's stat would raise; nothing to report.
                    None => return Ok(()),
                }
            } else {
                None
            };
            if !criterion.matches(full, name, st.as_ref()) {
                return Ok(());
            }
        }
        for action in &self.actions {
            let needs_stat = matches!(action, Action::Print(fields) if fields.iter().any(|f| f != "path" && f != "name"));
            let st = if needs_stat { stat_of(&mut stat) } else { None };
            if let Some(v) = self.act(action, full, st.as_ref())? {
                out.push(v);
            }
        }
        Ok(())
    }

    fn act(
        &self,
        action: &Action,
        full: &str,
        st: Option<&Stat>,
    ) -> Result<Option<Value>, FnError> {
        match action {
            Action::Print(fields) => {
                let mut row: Vec<Value> = fields
                    .iter()
                    .filter_map(|f| print_field(f, full, st))
                    .collect();
                Ok(Some(if row.len() == 1 {
                    row.remove(0)
                } else {
                    Value::Array(row)
                }))
            }
            Action::Delete => {
                if self.test {
                    return Ok(Some(Value::from(full)));
                }
                let p = Path::new(full);
                let done = match std::fs::symlink_metadata(p) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
                    Ok(_) => std::fs::remove_file(p),
                    Err(e) => Err(e),
                };
                Ok(done.ok().map(|()| Value::from(full)))
            }
            Action::Exec(command) => {
                let command = command.replace("{}", full);
                let argv = shlex_split(&command).map_err(FnError::Exception)?;
                let Some((program, args)) = argv.split_first() else {
                    return Ok(Some(Value::from(format!("{full}: Failed"))));
                };
                match std::process::Command::new(program)
                    .args(args)
                    .stdin(std::process::Stdio::null())
                    .output()
                {
                    Ok(o) => {
                        if !o.stderr.is_empty() {
                            tracing::error!(
                                "Error running command: {command}\n\n{}",
                                String::from_utf8_lossy(&o.stderr)
                            );
                        }
                        Ok(Some(Value::from(format!(
                            "{command}:\n{}\n",
                            String::from_utf8_lossy(&o.stdout)
                        ))))
                    }
                    Err(e) => {
                        tracing::error!("Exception while executing command \"{command}\":\n\n{e}");
                        Ok(Some(Value::from(format!("{full}: Failed"))))
                    }
                }
            }
        }
    }
}

impl Criterion {
    fn matches(&self, full: &str, name: &str, st: Option<&Stat>) -> bool {
        match (self, st) {
            (Criterion::Name(re), _) => re.find(name).is_some_and(|m| m.start() == 0),
            (Criterion::Type(types), Some(st)) => types.contains(&type_letter(st)),
            (Criterion::Owner(uids), Some(st)) => uids.contains(&st.uid()),
            (Criterion::Group(gids), Some(st)) => gids.contains(&st.gid()),
            (Criterion::Size { min, max }, Some(st)) => (*min..=*max).contains(&st.size()),
            (Criterion::Mtime { since, time }, Some(st)) => {
                let mtime = st.mtime() as f64;
                if *since {
                    mtime >= *time
                } else {
                    mtime <= *time
                }
            }
            (Criterion::Grep(re), Some(st)) => {
                st.is_file() && std::fs::read(full).is_ok_and(|bytes| re.is_match(&bytes))
            }
            (_, None) => false,
        }
    }
}

fn depth(key: &str, value: &Value) -> Result<i64, String> {
    py_int(value).map_err(|_| format!("invalid value for \"{key}\": {}", py_str(value)))
}

/// `name`/`iname`: Salt's glob as a regex (`.` literal, `?` zero or one character, `*` any),
/// anchored at the end.
fn glob_re(glob: &str, icase: bool) -> Result<regex::Regex, String> {
    let pattern = format!(
        "{}$",
        glob.replace('.', "\\.")
            .replace('?', ".?")
            .replace('*', ".*")
    );
    regex_of(&pattern, icase)
}

fn regex_of(pattern: &str, icase: bool) -> Result<regex::Regex, String> {
    let invalid = || format!("invalid regular expression: \"{pattern}\"");
    let translated = translate_pattern(pattern, false, false).map_err(|_| invalid())?;
    regex::RegexBuilder::new(&translated)
        .case_insensitive(icase)
        .size_limit(super::REGEX_SIZE_LIMIT)
        .build()
        .map_err(|_| invalid())
}

fn types(spec: &str) -> Result<Vec<char>, String> {
    spec.chars()
        .filter(|c| *c != ',' && !c.is_whitespace())
        .map(|c| {
            if "bcdflps".contains(c) {
                Ok(c)
            } else {
                Err(format!("invalid file type \"{c}\""))
            }
        })
        .collect()
}

fn type_letter(st: &Stat) -> char {
    let t = st.file_type();
    if t.is_dir() {
        'd'
    } else if t.is_file() {
        'f'
    } else if t.is_symlink() {
        'l'
    } else if t.is_block_device() {
        'b'
    } else if t.is_char_device() {
        'c'
    } else if t.is_fifo() {
        'p'
    } else if t.is_socket() {
        's'
    } else {
        '?'
    }
}

/// `owner`: uids and user names. Salt looks a name up by the whole option text, so only a
/// single name works, as here.
fn owners(spec: &str) -> Result<Vec<u32>, String> {
    ids(spec, "user", |_| {
        nix::unistd::User::from_name(spec)
            .ok()
            .flatten()
            .map(|u| u.uid.as_raw())
    })
}

fn groups(spec: &str) -> Result<Vec<u32>, String> {
    ids(spec, "group", |name| {
        nix::unistd::Group::from_name(name)
            .ok()
            .flatten()
            .map(|g| g.gid.as_raw())
    })
}

/// A comma and/or space separated list of ids and names, each name looked up.
fn ids(spec: &str, what: &str, lookup: impl Fn(&str) -> Option<u32>) -> Result<Vec<u32>, String> {
    spec.replace(',', " ")
        .split_whitespace()
        .map(|name| {
            let id = if name.chars().all(|c| c.is_ascii_digit()) {
                name.parse().ok()
            } else {
                lookup(name)
            };
            id.ok_or_else(|| format!("no such {what} \"{name}\""))
        })
        .collect()
}

/// `[+-]number[bkmgt]`: the sizes matched, inclusive. Without a sign, every size that rounds
/// down to the number in that unit.
fn parse_size(value: &str) -> Result<(u64, u64), String> {
    let invalid = || format!("invalid size: \"{value}\"");
    let scalar = value.trim();
    let (style, scalar) = match scalar.chars().next() {
        Some(c @ ('+' | '-')) => (c, &scalar[1..]),
        _ => ('=', scalar),
    };
    let unit = |c: char| match c.to_ascii_lowercase() {
        'b' => Some(1u64),
        'k' => Some(1 << 10),
        'm' => Some(1 << 20),
        'g' => Some(1 << 30),
        't' => Some(1 << 40),
        _ => None,
    };
    let (number, multiplier) = match scalar.chars().last().and_then(unit) {
        Some(m) => (scalar[..scalar.len() - 1].trim(), m),
        None => (scalar, 1),
    };
    let num = match number.parse::<i64>() {
        Ok(n) => u64::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(multiplier))
            .ok_or_else(invalid)?,
        Err(_) => {
            let f: f64 = number.parse().map_err(|_| invalid())?;
            let bytes = f * multiplier as f64;
            if !bytes.is_finite() || bytes < 0.0 {
                return Err(invalid());
            }
            bytes as u64
        }
    };
    Ok(match style {
        '-' => (0, num),
        '+' => (num, i64::MAX as u64),
        _ => (num, num.saturating_add(multiplier - 1)),
    })
}

/// `[+-][<n>w][<n>d][<n>h][<n>m][<n>s]`: seconds, the smallest unit given, the sign.
fn parse_interval(value: &str) -> Result<(f64, f64, String), String> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(
            r"^\s*(?P<modifier>[+-]?)(?:(?P<week>\d+(?:\.\d*)?)\s*[wW])?\s*(?:(?P<day>\d+(?:\.\d*)?)\s*[dD])?\s*(?:(?P<hour>\d+(?:\.\d*)?)\s*[hH])?\s*(?:(?P<minute>\d+(?:\.\d*)?)\s*[mM])?\s*(?:(?P<second>\d+(?:\.\d*)?)\s*[sS])?\s*$",
        )
        .expect("static regex is valid")
    });
    let invalid = || format!("invalid time interval: '{value}'");
    let caps = re.captures(value).ok_or_else(invalid)?;
    let mut total = 0.0;
    let mut resolution = None;
    for (name, multiplier) in [
        ("second", 1.0),
        ("minute", 60.0),
        ("hour", 3600.0),
        ("day", 86400.0),
        ("week", 604800.0),
    ] {
        if let Some(m) = caps.name(name) {
            total += m.as_str().parse::<f64>().map_err(|_| invalid())? * multiplier;
            resolution.get_or_insert(multiplier);
        }
    }
    let modifier = caps.name("modifier").map_or("", |m| m.as_str()).to_string();
    Ok((total, resolution.ok_or_else(invalid)?, modifier))
}

/// One `print` field; `None` for a field Salt does not know (it prints nothing for it).
fn print_field(field: &str, full: &str, st: Option<&Stat>) -> Option<Value> {
    let st = || st.ok_or(());
    Some(match field {
        "path" => Value::from(full),
        "name" => Value::from(full.rsplit('/').next().unwrap_or(full)),
        "size" => Value::from(st().ok()?.size()),
        "type" => Value::from(st().map_or('?', type_letter).to_string()),
        "mode" => Value::from(st().ok()?.mode() & 0o777),
        "mtime" => Value::from(st().ok()?.mtime()),
        "user" => uid_to_user(st().ok()?.uid()),
        "group" => gid_to_group(st().ok()?.gid()),
        "md5" => {
            let st = st().ok()?;
            if st.is_file() {
                std::fs::File::open(full)
                    .ok()
                    .and_then(|f| {
                        brine_protocol::crypt::hash_reader(f, brine_protocol::crypt::HashType::Md5)
                            .ok()
                    })
                    .map_or(Value::from(""), Value::from)
            } else {
                Value::from("")
            }
        }
        _ => return None,
    })
}

/// Python's `<` between two results (strings, integers, lists of them), or its `TypeError`.
fn py_cmp(a: &Value, b: &Value) -> Result<Ordering, String> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Ok(x.as_bytes().cmp(y.as_bytes())),
        (Value::Integer(x), Value::Integer(y)) => Ok(x
            .as_i64()
            .zip(y.as_i64())
            .map_or(Ordering::Equal, |(x, y)| x.cmp(&y))),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                match py_cmp(p, q)? {
                    Ordering::Equal => {}
                    other => return Ok(other),
                }
            }
            Ok(x.len().cmp(&y.len()))
        }
        _ => {
            let name = |v: &Value| {
                super::super::args::py_type_name(v)
            };
            Err(format!(
                "'<' not supported between instances of '{}' and '{}'",
                name(a),
                name(b)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_intervals_parse_as_salts() {
        assert_eq!(parse_size("10"), Ok((10, 10)));
        assert_eq!(parse_size("+1k"), Ok((1024, i64::MAX as u64)));
        assert_eq!(parse_size("-2M"), Ok((0, 2 << 20)));
        assert_eq!(parse_size("1k"), Ok((1024, 2047)));
        assert_eq!(parse_size("1.5k"), Ok((1536, 2559)));
        assert_eq!(parse_size("x"), Err("invalid size: \"x\"".into()));
        assert_eq!(
            parse_interval("1w2d"),
            Ok((9.0 * 86400.0, 86400.0, String::new()))
        );
        assert_eq!(parse_interval("-30m"), Ok((1800.0, 60.0, "-".to_string())));
        assert!(parse_interval("3x").is_err());
        assert!(parse_interval("+").is_err());
    }

    #[test]
    fn option_names_are_class_names() {
        assert_eq!(title("name"), "Name");
        assert_eq!(title("MTIME"), "Mtime");
        assert!(Finder::new(vec![("user".into(), Value::from("root"))])
            .unwrap_err()
            .contains("invalid option \"user\""));
        assert!(Finder::new(vec![("type".into(), Value::from("a"))])
            .unwrap_err()
            .contains("invalid file type \"a\""));
        assert!(Finder::new(vec![("name".into(), Value::from(""))])
            .unwrap_err()
            .contains("missing value for \"name\" option"));
    }

    #[test]
    fn results_sort_as_python_sorts_them() {
        let mut v = vec![Value::from("b"), Value::from("a")];
        v.sort_by(|a, b| py_cmp(a, b).unwrap());
        assert_eq!(v, vec![Value::from("a"), Value::from("b")]);
        assert!(py_cmp(&Value::from("a"), &Value::Array(vec![])).is_err());
    }
}
