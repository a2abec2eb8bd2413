//! Salt's `master` and `minion` configuration files.
//!
//! Loading follows Salt 3007 (`salt/config/__init__.py`): the main file, then
//! `default_include` (`master.d/*.conf` / `minion.d/*.conf`), then `include:`;
//! the included files are merged into each other recursively (lists extended),
//! and the result replaces the main file's keys one top-level key at a time.
//! Values are then typed with Salt's loose rules (a port may be `"4506"`, a bool
//! may be `yes`), paths are rooted under `root_dir` the way Salt's
//! `prepend_root_dir` does it, and `id` falls back to Salt's `get_id`.
//! Unknown keys never fail; a value of the wrong type fails with a one-line
//! error naming the file and the key.

use crate::posixpath::{abspath, normpath};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

/// Why a configuration could not be loaded. Each variant displays as one line
/// that names the file and, when known, the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("{}: cannot read: {message}", path.display())]
    Read { path: PathBuf, message: String },
    /// The file is not valid YAML.
    #[error("{}: invalid YAML at line {line} column {column}: {message}", path.display())]
    Yaml {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// The file is valid YAML but its top level is not a mapping.
    #[error("{}: configuration should be a mapping, not {found}", path.display())]
    NotMapping { path: PathBuf, found: String },
    /// A key has a value of the wrong type.
    #[error("{}: key '{key}': expected {expected}, got {got}", path.display())]
    Type {
        path: PathBuf,
        key: String,
        expected: String,
        got: String,
    },
    /// A key has a value of the right type that Salt refuses (e.g. an unknown algorithm).
    #[error("{}: key '{key}': {message}", path.display())]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
}

/// The merged, untyped contents of a configuration file and its includes.
#[derive(Debug, Clone, Default)]
pub struct RawConfig {
    /// Top-level keys after merging, with YAML converted to JSON values.
    pub values: Map<String, Value>,
    /// The file each top-level key was last set by.
    pub sources: HashMap<String, PathBuf>,
    /// The main configuration file read (`None` for built-in defaults).
    pub conf_file: Option<PathBuf>,
}

impl RawConfig {
    /// Salt's `conf_file` and `config_dir` options: every daemon's options name the file they
    /// were read from and its directory (the `gpg` renderer's default key directory is
    /// `<config_dir>/gpgkeys`).
    fn file_opts(&self) -> Vec<(&'static str, Value)> {
        let Some(file) = &self.conf_file else {
            return Vec::new();
        };
        let dir = file.parent().unwrap_or(Path::new("/"));
        vec![
            (
                "conf_file",
                Value::from(file.to_string_lossy().into_owned()),
            ),
            (
                "config_dir",
                Value::from(dir.to_string_lossy().into_owned()),
            ),
        ]
    }
}

impl RawConfig {
    /// The file a key came from, or `<defaults>` for a key no file set.
    pub fn source_of(&self, key: &str) -> PathBuf {
        self.sources
            .get(key)
            .cloned()
            .unwrap_or_else(|| PathBuf::from("<defaults>"))
    }
}

/// Load `dir/<name>`, then `default_include` (`<name>.d/*.conf` unless the main
/// file sets it), then the main file's `include:` entries, as Salt does.
/// A missing main file yields an empty map (all defaults), like Salt.
pub fn load_raw(dir: &Path, name: &str) -> Result<RawConfig, ConfigError> {
    let main_path = dir.join(name);
    let mut raw = RawConfig::default();
    match std::fs::metadata(&main_path) {
        Ok(_) => {
            let values = read_conf_file(&main_path)?;
            for (key, value) in values {
                raw.sources.insert(key.clone(), main_path.clone());
                raw.values.insert(key, value);
            }
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            tracing::debug!(path = %main_path.display(), "missing configuration file, using defaults");
        }
        Err(err) => {
            return Err(ConfigError::Read {
                path: main_path,
                message: err.to_string(),
            })
        }
    }

    let default_include = match raw.values.get("default_include") {
        Some(Value::String(pattern)) => vec![pattern.clone()],
        _ => vec![format!("{name}.d/*.conf")],
    };
    let include = include_list(raw.values.get("include"));

    for patterns in [default_include, include] {
        let included = include_config(&patterns, &main_path, 0)?;
        // Salt's `overrides.update(...)`: included keys replace the main file's wholesale.
        for (key, (value, source)) in included {
            raw.sources.insert(key.clone(), source);
            raw.values.insert(key, value);
        }
    }
    raw.conf_file = Some(main_path);
    Ok(raw)
}

/// Included keys, each with its value and the file that last set it.
type Included = Vec<(String, (Value, PathBuf))>;

fn include_list(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// Salt's `include_config`: every file matched by the patterns (relative to the
/// including file's directory), sorted per pattern, merged recursively.
fn include_config(
    patterns: &[String],
    orig_path: &Path,
    depth: usize,
) -> Result<Included, ConfigError> {
    // Guards against include loops; Salt itself would recurse forever.
    const MAX_DEPTH: usize = 16;
    let mut merged = Map::new();
    let mut sources: HashMap<String, PathBuf> = HashMap::new();
    if depth > MAX_DEPTH {
        tracing::warn!(path = %orig_path.display(), "include nesting too deep, ignoring");
        return Ok(Vec::new());
    }
    let base = orig_path.parent().unwrap_or_else(|| Path::new("/"));
    for pattern in patterns {
        let expanded = expand_user(pattern);
        let full = if Path::new(&expanded).is_absolute() {
            PathBuf::from(expanded)
        } else {
            base.join(expanded)
        };
        let mut matches = glob(&full);
        if matches.is_empty() {
            tracing::debug!(pattern = %full.display(), "include pattern matches no files");
        }
        matches.sort();
        for file in matches {
            tracing::debug!(path = %file.display(), "including configuration");
            let mut opts = read_conf_file(&file)?;
            let nested = include_list(opts.get("include"));
            let mut file_sources: HashMap<String, PathBuf> =
                opts.keys().map(|k| (k.clone(), file.clone())).collect();
            if !nested.is_empty() {
                for (key, (value, source)) in include_config(&nested, &file, depth + 1)? {
                    file_sources.insert(key.clone(), source);
                    opts.insert(key, value);
                }
            }
            merge_recursive(&mut merged, opts, true);
            sources.extend(file_sources);
        }
    }
    Ok(merged
        .into_iter()
        .map(|(key, value)| {
            let source = sources
                .get(&key)
                .cloned()
                .unwrap_or_else(|| orig_path.to_path_buf());
            (key, (value, source))
        })
        .collect())
}

/// Salt's `dictupdate.update(dest, upd, recursive_update=True, merge_lists)`.
pub fn merge_recursive(dest: &mut Map<String, Value>, upd: Map<String, Value>, merge_lists: bool) {
    for (key, value) in upd {
        match (dest.get_mut(&key), value) {
            (Some(Value::Object(d)), Value::Object(u)) => merge_recursive(d, u, merge_lists),
            (Some(Value::Array(d)), Value::Array(u)) if merge_lists => {
                for item in u {
                    if !d.contains(&item) {
                        d.push(item);
                    }
                }
            }
            (_, value) => {
                dest.insert(key, value);
            }
        }
    }
}

fn expand_user(path: &str) -> String {
    if path == "~" || path.starts_with("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return format!("{}{}", home.to_string_lossy(), &path[1..]);
        }
    }
    path.to_owned()
}

/// Python's `glob.glob`: `*`, `?` and `[...]` in any component; wildcards do not match
/// names starting with a dot; a relative pattern is relative to the working directory; a
/// dangling link is found, as Python finds it.
pub fn glob(pattern: &Path) -> Vec<PathBuf> {
    // A relative pattern (`-c etc` on the command line) is relative to the working directory.
    let start = if pattern.is_absolute() { "/" } else { "." };
    let mut current = vec![PathBuf::from(start)];
    let components: Vec<String> = pattern
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            std::path::Component::ParentDir => Some("..".to_owned()),
            _ => None,
        })
        .collect();
    for component in &components {
        let mut next = Vec::new();
        let magic = component.contains(['*', '?', '[']);
        for dir in &current {
            if !magic {
                next.push(dir.join(component));
                continue;
            }
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') && !component.starts_with('.') {
                    continue;
                }
                if crate::target::fnmatch(component, &name) {
                    next.push(dir.join(name));
                }
            }
        }
        current = next;
    }
    // `os.path.lexists`: a link is found even when what it points to is not there.
    current
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect()
}

/// Salt's `_read_conf_file`: a YAML mapping (empty file = empty mapping),
/// with a numeric `id` turned into a string.
fn read_conf_file(path: &Path) -> Result<Map<String, Value>, ConfigError> {
    tracing::debug!(path = %path.display(), "reading configuration");
    let text = std::fs::read_to_string(path).map_err(|err| ConfigError::Read {
        path: path.to_path_buf(),
        message: err.to_string(),
    })?;
    parse_conf_text(path, &text)
}

/// The top-level keys of a configuration file's text (`path` names it in errors).
pub fn parse_conf_text(path: &Path, text: &str) -> Result<Map<String, Value>, ConfigError> {
    // Syntax errors are reported where serde_yaml finds them; the values are read as Salt's
    // loader (YAML 1.1) reads them: plain yes/no/on/off are booleans, 0644 is octal.
    let _: serde_yaml::Value = serde_yaml::from_str(text).map_err(|err| yaml_error(path, &err))?;
    let doc = crate::yaml::load::load(text).map_err(|message| {
        let (line, column) = position_in(&message).unwrap_or((1, 1));
        ConfigError::Yaml {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })?;
    let mut map = match doc {
        Value::Null => Map::new(),
        Value::Object(map) => map,
        other => {
            return Err(ConfigError::NotMapping {
                path: path.to_path_buf(),
                found: type_name(&other).to_owned(),
            })
        }
    };
    if let Some(id) = map.get_mut("id") {
        if !id.is_string() && !id.is_null() {
            *id = Value::String(python_str(id));
        }
    }
    Ok(map)
}

/// The `at line L column C` a loader message ends with.
fn position_in(message: &str) -> Option<(usize, usize)> {
    let (_, at) = message.rsplit_once(" at line ")?;
    let (line, column) = at.split_once(" column ")?;
    Some((line.trim().parse().ok()?, column.trim().parse().ok()?))
}

fn yaml_error(path: &Path, err: &serde_yaml::Error) -> ConfigError {
    let text = err.to_string().replace('\n', " ");
    let (line, column) = err
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((1, 1));
    let suffix = format!(" at line {line} column {column}");
    let message = match text.find(&suffix) {
        Some(pos) => format!("{}{}", &text[..pos], &text[pos + suffix.len()..]),
        None => text,
    };
    ConfigError::Yaml {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// How Python's `str()` shows a scalar loaded from YAML.
fn python_str(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// A value shown in an error: strings quoted, others as JSON.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Typed reads over a raw config, following Salt's `_validate_opts` leniency.
struct Reader<'a> {
    raw: &'a RawConfig,
}

impl Reader<'_> {
    fn value(&self, key: &str) -> Option<&Value> {
        self.raw.values.get(key).filter(|v| !v.is_null())
    }

    fn type_error(&self, key: &str, expected: &str, got: &Value) -> ConfigError {
        ConfigError::Type {
            path: self.raw.source_of(key),
            key: key.to_owned(),
            expected: expected.to_owned(),
            got: shown(got),
        }
    }

    fn invalid(&self, key: &str, message: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.raw.source_of(key),
            key: key.to_owned(),
            message,
        }
    }

    /// Salt `str` options: numbers and bools are accepted as their `str()`.
    fn string_opt(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.value(key) {
            None => Ok(None),
            Some(v @ (Value::Array(_) | Value::Object(_))) => {
                Err(self.type_error(key, "a string", v))
            }
            Some(v) => Ok(Some(python_str(v))),
        }
    }

    fn string(&self, key: &str, default: &str) -> Result<String, ConfigError> {
        Ok(self.string_opt(key)?.unwrap_or_else(|| default.to_owned()))
    }

    /// Salt `bool` options take only booleans (YAML 1.1 spellings included).
    fn bool(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.value(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) => match s.as_str() {
                "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => Ok(true),
                "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
                    Ok(false)
                }
                _ => Err(self.type_error(key, "a boolean", &Value::String(s.clone()))),
            },
            Some(v) => Err(self.type_error(key, "a boolean", v)),
        }
    }

    /// Salt `int` options: integers or strings `int()` accepts; not floats or bools.
    fn int_opt(&self, key: &str) -> Result<Option<i64>, ConfigError> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Number(n)) if !n.is_f64() => n
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.type_error(key, "an integer", &Value::Number(n.clone()))),
            Some(v @ Value::String(s)) => parse_python_int(s)
                .map(Some)
                .ok_or_else(|| self.type_error(key, "an integer", v)),
            Some(v) => Err(self.type_error(key, "an integer", v)),
        }
    }

    fn int(&self, key: &str, default: i64) -> Result<i64, ConfigError> {
        Ok(self.int_opt(key)?.unwrap_or(default))
    }

    fn unsigned(&self, key: &str, default: u64) -> Result<u64, ConfigError> {
        match self.int_opt(key)? {
            None => Ok(default),
            Some(i) => u64::try_from(i)
                .map_err(|_| self.type_error(key, "a non-negative integer", &Value::from(i))),
        }
    }

    fn port(&self, key: &str, default: u16) -> Result<u16, ConfigError> {
        Ok(self.port_opt(key)?.unwrap_or(default))
    }

    fn port_opt(&self, key: &str) -> Result<Option<u16>, ConfigError> {
        match self.int_opt(key)? {
            None => Ok(None),
            Some(i) => u16::try_from(i)
                .map(Some)
                .map_err(|_| self.type_error(key, "a port number (0-65535)", &Value::from(i))),
        }
    }

    /// Salt `float` options as they are: finite, non-negative, at most `u64::MAX`.
    fn float_opt(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        let parsed = match self.value(key) {
            None => return Ok(None),
            Some(Value::Number(n)) => n.as_f64(),
            Some(Value::String(s)) => s.trim().replace('_', "").parse::<f64>().ok(),
            Some(_) => None,
        };
        match parsed {
            Some(f) if f.is_finite() && f >= 0.0 && f <= u64::MAX as f64 => Ok(Some(f)),
            _ => Err(self.type_error(
                key,
                "a non-negative number",
                self.value(key).unwrap_or(&Value::Null),
            )),
        }
    }

    /// Salt `float` options (and untyped numeric ones) read as whole non-negative numbers.
    fn number_opt(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        Ok(self.float_opt(key)?.map(|f| f.round() as u64))
    }

    /// A `float` option counting seconds, fractions kept.
    fn seconds(&self, key: &str, default: f64) -> Result<Duration, ConfigError> {
        let secs = self.float_opt(key)?.unwrap_or(default);
        Duration::try_from_secs_f64(secs)
            .map_err(|_| self.type_error(key, "a number of seconds", &Value::from(secs)))
    }

    /// Salt options typed `(None, bool)`: unset or null is `None`.
    fn bool_opt(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.value(key) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.bool(key, false).map(Some),
        }
    }

    fn number(&self, key: &str, default: u64) -> Result<u64, ConfigError> {
        Ok(self.number_opt(key)?.unwrap_or(default))
    }

    fn string_list(
        &self,
        key: &str,
        default: &[&str],
        allow_str: bool,
    ) -> Result<Vec<String>, ConfigError> {
        match self.value(key) {
            None => Ok(default.iter().map(|s| (*s).to_owned()).collect()),
            Some(Value::String(s)) if allow_str => Ok(vec![s.clone()]),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| match item {
                    Value::Array(_) | Value::Object(_) | Value::Null => {
                        Err(self.type_error(key, "a list of strings", item))
                    }
                    other => Ok(python_str(other)),
                })
                .collect(),
            Some(v) => Err(self.type_error(key, "a list", v)),
        }
    }

    fn mapping(&self, key: &str) -> Result<Value, ConfigError> {
        match self.value(key) {
            None => Ok(Value::Object(Map::new())),
            Some(v @ Value::Object(_)) => Ok(v.clone()),
            Some(v) => Err(self.type_error(key, "a mapping", v)),
        }
    }

    fn any(&self, key: &str) -> Value {
        self.raw.values.get(key).cloned().unwrap_or(Value::Null)
    }

    /// The raw, un-rooted value of a path option.
    fn path_raw(&self, key: &str, default: &str) -> Result<Option<String>, ConfigError> {
        match self.raw.values.get(key) {
            None => Ok(Some(default.to_owned())),
            Some(Value::Null) => Ok(None),
            Some(_) => self.string_opt(key),
        }
    }
}

/// `file_roots`: `{saltenv: [dir, ...]}` (a single directory may be written as a string).
fn file_roots(r: &Reader<'_>) -> Result<BTreeMap<String, Vec<String>>, ConfigError> {
    Ok(roots(r, "file_roots", &["/srv/salt", "/srv/spm/salt"])?
        .into_iter()
        .collect())
}

/// `file_roots` / `pillar_roots`: directories by saltenv, in the file's order.
fn roots(
    r: &Reader<'_>,
    key: &str,
    default: &[&str],
) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
    let Some(v) = r.value(key) else {
        return Ok(vec![(
            "base".to_owned(),
            default.iter().map(|d| (*d).to_owned()).collect(),
        )]);
    };
    let Value::Object(envs) = v else {
        return Err(r.type_error(key, "a mapping of saltenv to directories", v));
    };
    envs.iter()
        .map(|(env, dirs)| {
            let dirs = match dirs {
                Value::String(d) => vec![d.clone()],
                Value::Array(items) => items
                    .iter()
                    .map(|d| match d {
                        Value::String(d) => Ok(d.clone()),
                        other => Err(r.type_error(key, "directory names", other)),
                    })
                    .collect::<Result<_, _>>()?,
                Value::Null => Vec::new(),
                other => return Err(r.type_error(key, "a list of directories", other)),
            };
            Ok((env.clone(), dirs))
        })
        .collect()
}

/// `ext_pillar`: a list of one-key mappings (`- file_tree: {root_dir: ...}`).
fn ext_pillar(r: &Reader<'_>) -> Result<Vec<(String, Value)>, ConfigError> {
    let Some(v) = r.value("ext_pillar") else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = v else {
        return Err(r.type_error("ext_pillar", "a list of one-key mappings", v));
    };
    items
        .iter()
        .map(|item| match item {
            Value::Object(m) if m.len() == 1 => {
                let (name, conf) = m.iter().next().expect("one key");
                Ok((name.clone(), conf.clone()))
            }
            other => Err(r.type_error("ext_pillar", "one-key mappings", other)),
        })
        .collect()
}

/// Python's `int(str)`: surrounding whitespace, a sign and `_` separators allowed.
fn parse_python_int(s: &str) -> Option<i64> {
    let t = s.trim();
    if t.is_empty() || t.starts_with('_') || t.ends_with('_') || t.contains("__") {
        return None;
    }
    t.replace('_', "").parse::<i64>().ok()
}

/// Salt's `salt.utils.path.join(root, path)`: the path's leading slashes are dropped.
fn salt_join(root: &str, path: &str) -> String {
    let root = normpath(root);
    let path = normpath(path);
    let stripped = path.trim_start_matches('/');
    if stripped.is_empty() || stripped == "." {
        return root;
    }
    normpath(&crate::posixpath::join(&root, stripped))
}

/// Salt's `prepend_root_dir` for one path: a path already under `root_dir`
/// keeps its place, any other path (absolute or relative) is re-rooted.
pub fn prepend_root_dir(root_dir: &str, path: &str) -> PathBuf {
    let root = abspath(root_dir);
    let under_root =
        if root.len() > 1 && path.len() > root.len() && path.starts_with(&format!("{root}/")) {
            Some(&path[root.len()..])
        } else {
            None
        };
    PathBuf::from(salt_join(&root, under_root.unwrap_or(path)))
}

/// `urllib.parse.urlparse(path).scheme != ""`: such log targets are not files.
fn is_uri(path: &str) -> bool {
    let Some(colon) = path.find(':') else {
        return false;
    };
    let scheme = &path[..colon];
    let mut chars = scheme.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Salt's `_adjust_log_file_override` and the root-dir handling of `log_file`.
fn log_file(reader: &Reader<'_>, root_dir: &str, default: &str) -> Result<PathBuf, ConfigError> {
    let log_dir = reader.string_opt("log_dir")?.filter(|d| !d.is_empty());
    let given = reader.string_opt("log_file")?.filter(|f| !f.is_empty());
    let file = match (log_dir, given) {
        (Some(dir), Some(file)) if !file.starts_with('/') => {
            format!("{}/{}", dir.trim_end_matches('/'), file)
        }
        (Some(dir), None) => {
            let base = default.rsplit('/').next().unwrap_or(default);
            format!("{}/{}", dir.trim_end_matches('/'), base)
        }
        (_, Some(file)) => file,
        (None, None) => default.to_owned(),
    };
    if is_uri(&file) {
        Ok(PathBuf::from(file))
    } else {
        Ok(prepend_root_dir(root_dir, &file))
    }
}

/// Salt shortens a socket directory that would be too long relative to the cache dir.
fn sock_dir_raw(sock_dir: String, cachedir: &str) -> String {
    if sock_dir.len() > cachedir.len() + 10 {
        format!("{}/.salt-unix", cachedir.trim_end_matches('/'))
    } else {
        sock_dir
    }
}

const VALID_SIGNING_ALGORITHMS: [&str; 2] = ["PKCS1v15-SHA1", "PKCS1v15-SHA224"];
const VALID_ENCRYPTION_ALGORITHMS: [&str; 2] = ["OAEP-SHA1", "OAEP-SHA224"];

fn check_algorithm(
    reader: &Reader<'_>,
    key: &str,
    value: &str,
    valid: &[&str],
) -> Result<(), ConfigError> {
    if valid.contains(&value) {
        Ok(())
    } else {
        Err(reader.invalid(
            key,
            format!(
                "algorithm '{value}' is not valid, use one of {}",
                valid.join(", ")
            ),
        ))
    }
}

/// Where Salt's `get_id` caches a generated minion id: `<root_dir>/etc/salt/minion_id`.
pub fn minion_id_cache_path(root_dir: &str) -> PathBuf {
    PathBuf::from(salt_join(root_dir, "/etc/salt/minion_id"))
}

/// Salt's `get_id`: the cached id when caching is on, else a generated one
/// (optionally lowercased, domain removed, then cached when asked to).
/// Returns the id and whether it is an IPv4 address.
fn get_id(reader: &Reader<'_>, root_dir: &str, cache: bool) -> Result<(String, bool), ConfigError> {
    let caching = reader.bool("minion_id_caching", true)?;
    let cache_file = minion_id_cache_path(root_dir);
    if caching {
        if let Ok(text) = std::fs::read_to_string(&cache_file) {
            let name = text
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .trim_start_matches('\u{feff}')
                .to_owned();
            if !name.is_empty() && name != "localhost" {
                tracing::debug!(path = %cache_file.display(), id = %name, "using cached minion id");
                return Ok((name, false));
            }
        }
    }
    let mut id = hostname::generate_minion_id();
    if reader.bool("minion_id_lowercase", false)? {
        id = id.to_lowercase();
    }
    match reader.value("minion_id_remove_domain") {
        Some(Value::Bool(true)) => {
            if let Some((host, _)) = id.split_once('.') {
                id = host.to_owned();
            }
        }
        Some(Value::String(domain)) if !domain.is_empty() => {
            let suffix = format!(".{}", domain.to_uppercase());
            if id.to_uppercase().ends_with(&suffix) {
                id.truncate(id.len() - suffix.len());
            }
        }
        _ => {}
    }
    if cache && caching {
        if let Some(parent) = cache_file.parent() {
            if let Err(err) = std::fs::create_dir_all(parent) {
                tracing::error!(%err, "failed to create the directory for minion_id");
            }
        }
        if let Err(err) = std::fs::write(&cache_file, &id) {
            tracing::error!(%err, path = %cache_file.display(), "could not cache minion id");
        }
    }
    let is_ipv4 = id.parse::<std::net::Ipv4Addr>().is_ok();
    Ok((id, is_ipv4))
}

/// Salt's `_append_domain`.
fn append_domain(reader: &Reader<'_>, id: String) -> Result<String, ConfigError> {
    match reader.string_opt("append_domain")? {
        Some(domain) if !domain.is_empty() && !id.ends_with(&domain) && !id.ends_with('.') => {
            Ok(format!("{id}.{domain}"))
        }
        _ => Ok(id),
    }
}

fn json_to_rmpv(value: &Value) -> rmpv::Value {
    match value {
        Value::Null => rmpv::Value::Nil,
        Value::Bool(b) => rmpv::Value::Boolean(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                rmpv::Value::from(i)
            } else if let Some(u) = n.as_u64() {
                rmpv::Value::from(u)
            } else {
                rmpv::Value::F64(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => rmpv::Value::from(s.as_str()),
        Value::Array(items) => rmpv::Value::Array(items.iter().map(json_to_rmpv).collect()),
        Value::Object(map) => rmpv::Value::Map(
            map.iter()
                .map(|(k, v)| (rmpv::Value::from(k.as_str()), json_to_rmpv(v)))
                .collect(),
        ),
    }
}

/// `nodegroups`: a mapping, or a list of one-key mappings (Salt's dictlist).
fn nodegroups(reader: &Reader<'_>) -> Result<BTreeMap<String, rmpv::Value>, ConfigError> {
    let mut groups = BTreeMap::new();
    match reader.value("nodegroups") {
        None => {}
        Some(Value::Object(map)) => {
            for (name, expr) in map {
                groups.insert(name.clone(), json_to_rmpv(expr));
            }
        }
        Some(v @ Value::Array(items)) => {
            for item in items {
                let Value::Object(map) = item else {
                    return Err(reader.type_error(
                        "nodegroups",
                        "a mapping or a list of mappings",
                        v,
                    ));
                };
                for (name, expr) in map {
                    groups.insert(name.clone(), json_to_rmpv(expr));
                }
            }
        }
        Some(v) => {
            return Err(reader.type_error("nodegroups", "a mapping or a list of mappings", v))
        }
    }
    Ok(groups)
}

/// Where the master keeps its jobs (`master_job_cache`).
#[derive(Debug, Clone, PartialEq)]
pub enum JobCache {
    /// `local_cache` (Salt's default): Brine's embedded SQLite store (`brine_job_store`).
    Local,
    /// `pgjsonb`: PostgreSQL, in the tables of Salt's `pgjsonb` returner.
    Pgjsonb(Box<PgjsonbOptions>),
}

/// The connection options of Salt's `pgjsonb` returner: `returner.pgjsonb.<name>` (or
/// `returner.pgjsonb: {<name>: ...}`), else `pgjsonb.<name>` (or `pgjsonb: {...}`), else Salt's
/// defaults (localhost:5432, user, password and database `salt`).
#[derive(Clone, PartialEq)]
pub struct PgjsonbOptions {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub pass: String,
    pub db: String,
    /// libpq's names: disable, allow, prefer (unset), require, verify-ca, verify-full.
    pub sslmode: Option<String>,
    pub sslcert: Option<String>,
    pub sslkey: Option<String>,
    pub sslrootcert: Option<String>,
    pub connect_timeout: Option<u64>,
}

/// Without the password.
impl std::fmt::Debug for PgjsonbOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgjsonbOptions")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("db", &self.db)
            .field("sslmode", &self.sslmode)
            .field("sslcert", &self.sslcert)
            .field("sslkey", &self.sslkey)
            .field("sslrootcert", &self.sslrootcert)
            .field("connect_timeout", &self.connect_timeout)
            .finish_non_exhaustive()
    }
}

/// `returner.pgjsonb.*` / `pgjsonb.*`, as Salt's `get_returner_options` looks them up.
fn pgjsonb_options(r: &Reader) -> Result<PgjsonbOptions, ConfigError> {
    // The first place holding the option: its config key and value.
    let find = |name: &str| -> Result<Option<(String, Value)>, ConfigError> {
        for prefix in ["returner.pgjsonb", "pgjsonb"] {
            let flat = format!("{prefix}.{name}");
            if let Some(v) = r.value(&flat) {
                return Ok(Some((flat, v.clone())));
            }
            match r.value(prefix) {
                None => {}
                Some(Value::Object(m)) => {
                    if let Some(v) = m.get(name).filter(|v| !v.is_null()) {
                        return Ok(Some((flat, v.clone())));
                    }
                }
                Some(v) => return Err(r.type_error(prefix, "a mapping", v)),
            }
        }
        Ok(None)
    };
    let text = |name: &str| -> Result<Option<String>, ConfigError> {
        match find(name)? {
            None => Ok(None),
            Some((key, v @ (Value::Array(_) | Value::Object(_)))) => {
                Err(r.type_error(&key, "a string", &v))
            }
            Some((_, v)) => Ok(Some(python_str(&v)).filter(|s| !s.is_empty() && s != "None")),
        }
    };
    let number = |name: &str, max: u64| -> Result<Option<u64>, ConfigError> {
        match find(name)? {
            None => Ok(None),
            Some((key, v)) => {
                let n = match &v {
                    Value::Number(n) => n.as_u64(),
                    Value::String(s) => s.trim().parse::<u64>().ok(),
                    _ => None,
                };
                n.filter(|n| *n <= max)
                    .map(Some)
                    .ok_or_else(|| r.type_error(&key, &format!("a whole number up to {max}"), &v))
            }
        }
    };
    if let Some((key, _)) = find("sslcrl")? {
        return Err(r.invalid(
            &key,
            "certificate revocation lists are not supported".into(),
        ));
    }
    Ok(PgjsonbOptions {
        host: text("host")?.unwrap_or_else(|| "localhost".into()),
        port: number("port", u16::MAX.into())?.map_or(5432, |p| p as u16),
        user: text("user")?.unwrap_or_else(|| "salt".into()),
        pass: text("pass")?.unwrap_or_else(|| "salt".into()),
        db: text("db")?.unwrap_or_else(|| "salt".into()),
        sslmode: text("sslmode")?,
        sslcert: text("sslcert")?,
        sslkey: text("sslkey")?,
        sslrootcert: text("sslrootcert")?,
        connect_timeout: number("connect_timeout", 3600)?,
    })
}

/// Brine-only `brine_nats`: every master publishes its bus events to a NATS JetStream stream,
/// and every salt-api reads them from it, so that several masters and API replicas see the
/// same events in the same order.
#[derive(Clone, PartialEq)]
pub struct NatsOptions {
    /// `servers`: one URL (`nats://host:port`) or a list of them.
    pub servers: Vec<String>,
    /// `stream`: the JetStream stream (created when missing), `SALT_EVENTS` by default.
    pub stream: String,
    /// `subject`: the subjects' prefix, `salt.events` by default; an event's subject is
    /// `<subject>.<master id>.<tag with / as .>`.
    pub subject: String,
    /// `max_age` (seconds, a day by default) and `max_bytes` (1 GiB) bound the stream.
    pub max_age: u64,
    pub max_bytes: u64,
    /// `user` and `password`, or `token`, or `credentials` (a `.creds` file: the user's JWT
    /// and nkey seed, as `nsc` writes it), or `nkey_seed_file` (a file holding a user's nkey
    /// seed): one way of signing in at most.
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub credentials: Option<PathBuf>,
    pub nkey_seed_file: Option<PathBuf>,
    /// `tls_ca`: the PEM certificates the server's must chain to (instead of the system's);
    /// `tls_cert` and `tls_key`: this client's certificate and key, for servers that verify
    /// clients; `tls_required`: never talk to the server in clear (also implied by `tls://`
    /// server URLs).
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_required: bool,
    /// `buffer`: events a master holds while the stream cannot take them (100,000); the
    /// oldest go first beyond it, counted and logged.
    pub buffer: usize,
    /// `jobs_subject`: when set, every master sends each job it publishes to
    /// `<jobs_subject>.<master id>` (core NATS, not the stream) and publishes to its own
    /// minions every job another master sent there: for a fleet split over masters (each
    /// minion connected to one of them), a job submitted on any master reaches all of it.
    pub jobs_subject: Option<String>,
}

/// Without the password and token.
impl std::fmt::Debug for NatsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsOptions")
            .field("servers", &self.servers)
            .field("stream", &self.stream)
            .field("subject", &self.subject)
            .field("max_age", &self.max_age)
            .field("max_bytes", &self.max_bytes)
            .field("user", &self.user)
            .field("credentials", &self.credentials)
            .field("nkey_seed_file", &self.nkey_seed_file)
            .field("tls_ca", &self.tls_ca)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("tls_required", &self.tls_required)
            .field("buffer", &self.buffer)
            .field("jobs_subject", &self.jobs_subject)
            .finish_non_exhaustive()
    }
}

/// `brine_nats: {servers: ..., ...}`; `None` when the key is absent.
fn nats_options(r: &Reader) -> Result<Option<NatsOptions>, ConfigError> {
    const KEY: &str = "brine_nats";
    let Some(value) = r.value(KEY) else {
        return Ok(None);
    };
    let Value::Object(m) = value else {
        return Err(r.type_error(KEY, "a mapping", value));
    };
    const KNOWN: [&str; 16] = [
        "servers",
        "stream",
        "subject",
        "max_age",
        "max_bytes",
        "user",
        "password",
        "token",
        "credentials",
        "nkey_seed_file",
        "tls_ca",
        "tls_cert",
        "tls_key",
        "tls_required",
        "buffer",
        "jobs_subject",
    ];
    if let Some(k) = m.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(r.invalid(
            KEY,
            format!("unknown option '{k}' (known: {})", KNOWN.join(", ")),
        ));
    }
    let get = |name: &str| m.get(name).filter(|v| !v.is_null());
    let text = |name: &str| -> Result<Option<String>, ConfigError> {
        match get(name) {
            None => Ok(None),
            Some(v @ (Value::Array(_) | Value::Object(_))) => {
                Err(r.type_error(&format!("{KEY}.{name}"), "a string", v))
            }
            Some(v) => Ok(Some(python_str(v)).filter(|s| !s.is_empty())),
        }
    };
    let number = |name: &str, default: u64| -> Result<u64, ConfigError> {
        match get(name) {
            None => Ok(default),
            Some(v) => match v {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.trim().parse::<u64>().ok(),
                _ => None,
            }
            .filter(|n| *n > 0 && *n <= i64::MAX as u64)
            .ok_or_else(|| r.type_error(&format!("{KEY}.{name}"), "a positive whole number", v)),
        }
    };
    let servers = match get("servers") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(python_str).collect(),
        Some(v @ Value::Object(_)) => {
            return Err(r.type_error(&format!("{KEY}.servers"), "a URL or a list of them", v))
        }
        Some(v) => vec![python_str(v)],
    };
    if servers.is_empty() {
        return Err(r.invalid(KEY, "'servers' is missing: nats://host:port".into()));
    }
    if let Some(bad) = servers.iter().find(|s| !nats_url_ok(s)) {
        return Err(r.invalid(
            KEY,
            format!("'{bad}' is not a NATS server URL: nats://host:port or tls://host:port"),
        ));
    }
    let stream = text("stream")?.unwrap_or_else(|| "SALT_EVENTS".into());
    if stream
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '.' | '*' | '>' | '/' | '\\'))
    {
        return Err(r.invalid(
            KEY,
            format!("stream '{stream}': a stream name has no spaces, '.', '*', '>', '/' or '\\'"),
        ));
    }
    let subject_ok = |s: &str| {
        !s.split('.')
            .any(|t| t.is_empty() || t == "*" || t == ">" || t.chars().any(|c| c.is_whitespace()))
    };
    let subject = text("subject")?.unwrap_or_else(|| "salt.events".into());
    if !subject_ok(&subject) {
        return Err(r.invalid(
            KEY,
            format!("subject '{subject}': dot-separated words without spaces or wildcards"),
        ));
    }
    let jobs_subject = text("jobs_subject")?;
    if let Some(jobs) = &jobs_subject {
        if !subject_ok(jobs) {
            return Err(r.invalid(
                KEY,
                format!("jobs_subject '{jobs}': dot-separated words without spaces or wildcards"),
            ));
        }
        let under = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}."));
        if under(jobs, &subject) || under(&subject, jobs) {
            return Err(r.invalid(
                KEY,
                format!("jobs_subject '{jobs}' and subject '{subject}' must not overlap"),
            ));
        }
    }
    let (user, password, token) = (text("user")?, text("password")?, text("token")?);
    if user.is_some() != password.is_some() {
        return Err(r.invalid(KEY, "'user' and 'password' go together".into()));
    }
    let path = |name: &str| text(name).map(|t| t.map(PathBuf::from));
    let (credentials, nkey_seed_file) = (path("credentials")?, path("nkey_seed_file")?);
    let ways = [
        user.is_some(),
        token.is_some(),
        credentials.is_some(),
        nkey_seed_file.is_some(),
    ];
    if ways.iter().filter(|w| **w).count() > 1 {
        return Err(r.invalid(
            KEY,
            "one way of signing in: 'user' and 'password', 'token', 'credentials' or \
             'nkey_seed_file'"
                .into(),
        ));
    }
    let (tls_ca, tls_cert, tls_key) = (path("tls_ca")?, path("tls_cert")?, path("tls_key")?);
    if tls_cert.is_some() != tls_key.is_some() {
        return Err(r.invalid(KEY, "'tls_cert' and 'tls_key' go together".into()));
    }
    let tls_required = match get("tls_required") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(r.type_error(&format!("{KEY}.tls_required"), "a boolean", v)),
    };
    Ok(Some(NatsOptions {
        servers,
        stream,
        subject,
        max_age: number("max_age", 86_400)?,
        max_bytes: number("max_bytes", 1 << 30)?,
        user,
        password,
        token,
        credentials,
        nkey_seed_file,
        tls_ca,
        tls_cert,
        tls_key,
        tls_required,
        buffer: number("buffer", 100_000)?.min(10_000_000) as usize,
        jobs_subject,
    }))
}

/// `nats://host:port`, `tls://host:port`, `host:port` or `host`.
fn nats_url_ok(url: &str) -> bool {
    let rest = match url.split_once("://") {
        Some(("nats" | "tls", rest)) => rest,
        Some(_) => return false,
        None => url,
    };
    let host_port = rest.rsplit('@').next().unwrap_or(rest);
    !host_port.is_empty() && !host_port.contains(|c: char| c == '/' || c.is_whitespace())
}

/// The master's settings, with Salt's defaults and path rules applied.
#[derive(Debug, Clone)]
pub struct MasterConfig {
    pub id: String,
    pub interface: String,
    pub ipv6: bool,
    pub publish_port: u16,
    pub ret_port: u16,
    pub root_dir: PathBuf,
    pub pki_dir: PathBuf,
    pub cachedir: PathBuf,
    pub sock_dir: PathBuf,
    pub auto_accept: bool,
    pub autosign_file: Option<PathBuf>,
    pub autoreject_file: Option<PathBuf>,
    pub open_mode: bool,
    pub worker_threads: usize,
    /// `keep_jobs_seconds`, or the deprecated `keep_jobs` (hours) when only that was changed.
    pub keep_jobs_seconds: u64,
    pub timeout: u64,
    pub gather_job_timeout: u64,
    /// Brine-only `brine_gather_hard_stop`: seconds after which a local client (`salt`,
    /// salt-api's `local*`, runners) stops waiting for returns even while minions report the
    /// job running (Salt has no such limit). Default 3600.
    pub gather_hard_stop: u64,
    pub log_file: PathBuf,
    pub log_level: String,
    pub log_level_logfile: Option<String>,
    pub user: String,
    pub max_minions: usize,
    pub zmq_filtering: bool,
    pub sign_pub_messages: bool,
    pub publish_signing_algorithm: String,
    pub publish_session: u64,
    pub rotate_aes_key: bool,
    pub minimum_auth_version: i64,
    /// Seconds an aes request's `ts` may differ from the master's clock; its nonce is
    /// remembered that long so that a captured request cannot be replayed. Salt's default is 0
    /// (no check); Brine checks always and reads 0 as its own default of 120 seconds.
    pub request_server_ttl: u64,
    pub keysize: usize,
    pub hash_type: String,
    pub auth_events: bool,
    pub presence_events: bool,
    pub loop_interval: u64,
    pub nodegroups: BTreeMap<String, rmpv::Value>,
    /// `file_roots`: directories by saltenv (Salt's default `base: [/srv/salt, /srv/spm/salt]`).
    pub file_roots: BTreeMap<String, Vec<String>>,
    /// `file_ignore_regex`: paths the file server hides (Python `re.search`), default none.
    pub file_ignore_regex: Vec<String>,
    /// `file_ignore_glob`: paths the file server hides (`fnmatch`), default none.
    pub file_ignore_glob: Vec<String>,
    /// `fileserver_followsymlinks` (default true): walk into symlinked directories.
    pub fileserver_followsymlinks: bool,
    /// `fileserver_ignoresymlinks` (default false): leave symlinks out of the file lists.
    pub fileserver_ignoresymlinks: bool,
    /// `file_buffer_size`: the bytes of one `_serve_file` chunk (default 262144).
    pub file_buffer_size: u64,
    /// `file_recv` (default false): accept files minions push with `cp.push`.
    pub file_recv: bool,
    /// `file_recv_max_size`: the largest pushed file, in MiB (default 100).
    pub file_recv_max_size: u64,
    /// `top_file_merging_strategy` (default `merge`).
    pub top_file_merging_strategy: String,
    /// `env_order` (default empty).
    pub env_order: Vec<String>,
    /// `default_top` (default `base`).
    pub default_top: String,
    /// `mine_get`: `{minion-id regex: [function regex, ...]}`; `None` when not set (all allowed).
    pub mine_get: Option<Value>,
    pub pub_hwm: i32,
    /// `zmq_backlog`: connections to each port the kernel holds until the master accepts
    /// them (Salt's default 1000; the kernel caps it at `net.core.somaxconn`).
    pub zmq_backlog: i32,
    pub job_cache: bool,
    /// `runner_returns`: runner jobs go to the job cache (with `job_cache`); true by default.
    pub runner_returns: bool,
    pub minion_data_cache: bool,
    pub token_expire: u64,
    pub external_auth: Value,
    pub netapi_enable_clients: Vec<String>,
    pub rest_cherrypy: Value,
    pub rest_tornado: Value,
    /// Brine-only `brine_job_store: {backend: sqlite, path: ...}`; default sqlite at `cachedir/jobs.sqlite`.
    pub job_store: Value,
    /// `master_job_cache`: `local_cache` (default) or `pgjsonb`.
    pub master_job_cache: JobCache,
    /// `event_return: pgjsonb`: every bus event is also written to that PostgreSQL's
    /// `salt_events` table (the only event returner Brine has).
    pub event_return: Option<PgjsonbOptions>,
    /// Brine-only `brine_max_request_size`: the largest request the ret port handles (64 MiB).
    pub max_request_size: usize,
    /// Brine-only `brine_store_events`: keep every bus event in the job store (default off).
    pub store_events: bool,
    /// Brine-only `brine_nats`: bus events on a NATS JetStream stream shared by masters and APIs.
    pub nats: Option<NatsOptions>,
    /// Brine-only `brine_job_store_sync`: `full` (default) syncs a return to disk before it
    /// is acknowledged (it survives a crash of the machine); `normal` commits it before the
    /// acknowledgement without that sync (it survives a crash of the master, as Salt's job
    /// cache, which never syncs).
    pub job_store_sync_full: bool,
    /// Brine-only `brine_lost_job_check`: every this many seconds, targeted minions without a
    /// return in jobs at least that old are asked whether they run the job, and a failure is
    /// recorded for those that do not (60; 0 turns it off).
    pub lost_job_check: u64,
    /// `max_open_files`: the open-file limit the master raises itself to (100,000).
    pub max_open_files: u64,
    /// `pillar_roots`: pillar directories by saltenv, in the file's order (Salt's default
    /// `base: [/srv/pillar, /srv/spm/pillar]`).
    pub pillar_roots: Vec<(String, Vec<String>)>,
    /// `pillarenv`: the one pillar environment compiled (default: all of them).
    pub pillarenv: Option<String>,
    /// `pillarenv_from_saltenv` (default false): a minion's saltenv is its pillarenv.
    pub pillarenv_from_saltenv: bool,
    /// `pillar_source_merging_strategy` (`smart`): `smart`, `recurse`, `overwrite`, `list`,
    /// `none` (`aggregate` needs the yamlex renderer, which Brine does not have).
    pub pillar_source_merging_strategy: String,
    /// `pillar_merge_lists` (false): lists of merged pillar sources are joined.
    pub pillar_merge_lists: bool,
    /// `pillar_includes_override_sls` (false): included pillar sls win over the includer.
    pub pillar_includes_override_sls: bool,
    /// `pillar_safe_render_error` (true): `_errors` hides the render error's text.
    pub pillar_safe_render_error: bool,
    /// `ext_pillar`: the external pillars, in order, as (interface, its configuration).
    pub ext_pillar: Vec<(String, Value)>,
    /// `ext_pillar_first` (false): external pillars are compiled before the pillar top.
    pub ext_pillar_first: bool,
    /// `pillar_cache` (false), `pillar_cache_ttl` (3600 s): keep compiled pillars by minion
    /// and pillarenv.
    pub pillar_cache: bool,
    pub pillar_cache_ttl: u64,
    /// `pillar_opts` (false): the master's options appear in every pillar as `master`.
    pub pillar_opts: bool,
    /// Brine-only `brine_template_cmd` (false): templates rendered on the master (pillar,
    /// orchestration) may call `cmd.*` (`cmd.run`, `cmd.run_all`, ...), which then run on the
    /// master as its user. Salt offers every execution module there; Brine offers the pure
    /// ones and, only when this is set, `cmd`.
    pub template_cmd: bool,
    /// `renderer` (`jinja|yaml`): the pipeline of files without a `#!` line.
    pub renderer: String,
    /// `state_top` (`top.sls`): the top file's name.
    pub state_top: String,
    /// `api_logfile`: salt-api's log file (default `api` next to `log_file`).
    pub api_logfile: Option<PathBuf>,
    /// `permissive_acl`: eauth users without a matching ACL entry may still run anything.
    pub permissive_acl: bool,
    /// `sharedsecret`: the secret of the `sharedsecret` eauth backend.
    pub sharedsecret: Option<String>,
    /// `auth.pam.service`: the PAM service eauth `pam` authenticates with (`login`).
    pub auth_pam_service: String,
    /// `rest_timeout`: seconds salt-api waits for a lowstate call (300).
    pub rest_timeout: u64,
    /// `token_expire_user_override`: `True`, or the users (a list or map) who may set their
    /// token's lifetime.
    pub token_expire_user_override: Value,
    /// The highstate outputter's `state_output` (`full`), `state_verbose` (True),
    /// `state_output_profile` (True), `state_output_diff` and `state_output_pct` (False).
    pub state_output: String,
    pub state_verbose: bool,
    pub state_output_profile: bool,
    pub state_output_diff: bool,
    pub state_output_pct: bool,
    /// `failhard` (False) and `state_events` (False): given to minions with the master's
    /// options (`_master_opts`); a minion's state run stops at the first failure, or fires an
    /// event after every state, when either its own option or the master's says so.
    pub failhard: bool,
    pub state_events: bool,
    /// `reactor`: a list of one-key maps `{tag glob: [sls path, ...]}`, or the path of a YAML
    /// file holding that list (read again for every event); `null` when unset. The master's
    /// `reactor` module reads it.
    pub reactor: Value,
    /// `reactor_worker_threads` (10) and `reactor_worker_hwm` (10000): the reactor runs that
    /// many runner and wheel jobs at once, with at most that many more waiting.
    pub reactor_worker_threads: usize,
    pub reactor_worker_hwm: usize,
    raw: RawConfig,
}

impl MasterConfig {
    /// Load `dir/master`, `dir/master.d/*.conf` and includes.
    pub fn load(dir: &Path) -> Result<Self, ConfigError> {
        Self::from_raw(load_raw(dir, "master")?)
    }

    /// Type and complete a raw configuration the way Salt's `apply_master_config` does.
    pub fn from_raw(raw: RawConfig) -> Result<Self, ConfigError> {
        let r = Reader { raw: &raw };
        let root_dir_raw = r.string("root_dir", "/")?;
        let root = root_dir_raw.as_str();
        let cachedir_raw = r
            .path_raw("cachedir", "/var/cache/salt/master")?
            .unwrap_or_default();
        let sock_raw = sock_dir_raw(
            r.path_raw("sock_dir", "/var/run/salt/master")?
                .unwrap_or_default(),
            &cachedir_raw,
        );
        let rooted = |key: &str, default: &str| -> Result<PathBuf, ConfigError> {
            Ok(prepend_root_dir(
                root,
                &r.path_raw(key, default)?.unwrap_or_default(),
            ))
        };
        let rooted_opt = |key: &str| -> Result<Option<PathBuf>, ConfigError> {
            Ok(r.string_opt(key)?
                .filter(|p| !p.is_empty())
                .map(|p| prepend_root_dir(root, &p)))
        };

        let id = match r.string_opt("id")?.filter(|id| !id.is_empty()) {
            Some(id) => append_domain(&r, id)?,
            None => {
                let (id, is_ip) = get_id(&r, root, false)?;
                let id = if is_ip { id } else { append_domain(&r, id)? };
                format!("{id}_master")
            }
        };

        let keep_jobs_seconds = {
            let seconds = r.unsigned("keep_jobs_seconds", 86400)?;
            let hours = r.unsigned("keep_jobs", 24)?;
            if seconds == 86400 && hours != 24 {
                hours.saturating_mul(3600)
            } else {
                seconds
            }
        };

        let publish_signing_algorithm = r.string("publish_signing_algorithm", "PKCS1v15-SHA1")?;
        check_algorithm(
            &r,
            "publish_signing_algorithm",
            &publish_signing_algorithm,
            &VALID_SIGNING_ALGORITHMS,
        )?;

        let cachedir = prepend_root_dir(root, &cachedir_raw);
        let job_store = {
            let mut store = match r.value("brine_job_store") {
                None => Map::new(),
                Some(Value::Object(map)) => map.clone(),
                Some(v) => return Err(r.type_error("brine_job_store", "a mapping", v)),
            };
            match store.get("backend") {
                None | Some(Value::Null) => {
                    store.insert("backend".into(), Value::from("sqlite"));
                }
                Some(Value::String(_)) => {}
                Some(v) => return Err(r.type_error("brine_job_store", "a string backend", v)),
            }
            let path = match store.get("path") {
                None | Some(Value::Null) => cachedir.join("jobs.sqlite"),
                Some(Value::String(p)) => prepend_root_dir(root, p),
                Some(v) => return Err(r.type_error("brine_job_store", "a string path", v)),
            };
            store.insert(
                "path".into(),
                Value::from(path.to_string_lossy().into_owned()),
            );
            Value::Object(store)
        };

        let config = MasterConfig {
            id,
            interface: r.string("interface", "0.0.0.0")?,
            ipv6: r.bool("ipv6", false)?,
            publish_port: r.port("publish_port", 4505)?,
            ret_port: r.port("ret_port", 4506)?,
            root_dir: PathBuf::from(abspath(root)),
            pki_dir: rooted("pki_dir", "/etc/salt/pki/master")?,
            cachedir,
            sock_dir: prepend_root_dir(root, &sock_raw),
            auto_accept: r.bool("auto_accept", false)?,
            autosign_file: rooted_opt("autosign_file")?,
            autoreject_file: rooted_opt("autoreject_file")?,
            open_mode: r.bool("open_mode", false)?,
            worker_threads: r.unsigned("worker_threads", 5)? as usize,
            keep_jobs_seconds,
            timeout: r.number("timeout", 5)?,
            gather_job_timeout: r.unsigned("gather_job_timeout", 10)?,
            gather_hard_stop: r.unsigned("brine_gather_hard_stop", 3600)?,
            log_file: log_file(&r, root, "/var/log/salt/master")?,
            log_level: r.string("log_level", "warning")?,
            log_level_logfile: r.string_opt("log_level_logfile")?,
            user: r.string("user", "root")?,
            max_minions: r.unsigned("max_minions", 0)? as usize,
            zmq_filtering: r.bool("zmq_filtering", false)?,
            sign_pub_messages: r.bool("sign_pub_messages", true)?,
            publish_signing_algorithm,
            publish_session: r.unsigned("publish_session", 86400)?,
            rotate_aes_key: r.bool("rotate_aes_key", true)?,
            minimum_auth_version: r.int("minimum_auth_version", 3)?,
            request_server_ttl: match r.unsigned("request_server_ttl", 0)? {
                0 => 120,
                ttl => ttl,
            },
            keysize: r.unsigned("keysize", 2048)? as usize,
            hash_type: r.string("hash_type", "sha256")?.to_lowercase(),
            auth_events: r.bool("auth_events", true)?,
            presence_events: r.bool("presence_events", false)?,
            loop_interval: r.number("loop_interval", 60)?,
            nodegroups: nodegroups(&r)?,
            file_roots: file_roots(&r)?,
            file_ignore_regex: r.string_list("file_ignore_regex", &[], true)?,
            file_ignore_glob: r.string_list("file_ignore_glob", &[], true)?,
            fileserver_followsymlinks: r.bool("fileserver_followsymlinks", true)?,
            fileserver_ignoresymlinks: r.bool("fileserver_ignoresymlinks", false)?,
            file_buffer_size: match r.unsigned("file_buffer_size", 262_144)? {
                0 => 262_144,
                n => n,
            },
            file_recv: r.bool("file_recv", false)?,
            file_recv_max_size: r.unsigned("file_recv_max_size", 100)?,
            top_file_merging_strategy: r.string("top_file_merging_strategy", "merge")?,
            env_order: r.string_list("env_order", &[], false)?,
            default_top: r.string("default_top", "base")?,
            mine_get: r.value("mine_get").cloned(),
            pub_hwm: {
                let hwm = r.int("pub_hwm", 1000)?;
                i32::try_from(hwm)
                    .map_err(|_| r.type_error("pub_hwm", "a 32-bit integer", &Value::from(hwm)))?
            },
            zmq_backlog: {
                let n = r.int("zmq_backlog", 1000)?;
                i32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
                    r.type_error("zmq_backlog", "a positive 32-bit integer", &Value::from(n))
                })?
            },
            job_cache: r.bool("job_cache", true)?,
            runner_returns: r.bool("runner_returns", true)?,
            minion_data_cache: r.bool("minion_data_cache", true)?,
            token_expire: r.unsigned("token_expire", 43200)?,
            external_auth: r.mapping("external_auth")?,
            netapi_enable_clients: r.string_list("netapi_enable_clients", &[], false)?,
            rest_cherrypy: r.any("rest_cherrypy"),
            rest_tornado: r.any("rest_tornado"),
            job_store,
            master_job_cache: match r.string("master_job_cache", "local_cache")?.as_str() {
                "local_cache" => JobCache::Local,
                "pgjsonb" => JobCache::Pgjsonb(Box::new(pgjsonb_options(&r)?)),
                other => {
                    return Err(r.invalid(
                        "master_job_cache",
                        format!("'{other}' is not supported: local_cache or pgjsonb"),
                    ))
                }
            },
            event_return: {
                let named = match r.value("event_return") {
                    None => Vec::new(),
                    Some(Value::Array(items)) => items.iter().map(python_str).collect(),
                    Some(Value::Object(_)) => {
                        return Err(r.type_error(
                            "event_return",
                            "a returner name or a list of them",
                            r.value("event_return").unwrap_or(&Value::Null),
                        ))
                    }
                    Some(v) => vec![python_str(v)],
                };
                if let Some(other) = named.iter().find(|n| n.as_str() != "pgjsonb") {
                    return Err(r.invalid(
                        "event_return",
                        format!("'{other}' is not supported: pgjsonb"),
                    ));
                }
                match named.is_empty() {
                    true => None,
                    false => Some(pgjsonb_options(&r)?),
                }
            },
            max_request_size: r.unsigned("brine_max_request_size", 64 * 1024 * 1024)? as usize,
            store_events: r.bool("brine_store_events", false)?,
            nats: nats_options(&r)?,
            lost_job_check: r.unsigned("brine_lost_job_check", 60)?,
            job_store_sync_full: match r.string("brine_job_store_sync", "full")?.as_str() {
                "normal" => false,
                "full" => true,
                other => {
                    return Err(r.invalid(
                        "brine_job_store_sync",
                        format!("'{other}' is neither 'normal' nor 'full'"),
                    ))
                }
            },
            max_open_files: r.unsigned("max_open_files", 100_000)?,
            pillar_roots: roots(&r, "pillar_roots", &["/srv/pillar", "/srv/spm/pillar"])?,
            pillarenv: r.string_opt("pillarenv")?.filter(|e| !e.is_empty()),
            pillarenv_from_saltenv: r.bool("pillarenv_from_saltenv", false)?,
            pillar_source_merging_strategy: {
                let strategy = r.string("pillar_source_merging_strategy", "smart")?;
                if !["smart", "recurse", "overwrite", "list", "none"].contains(&strategy.as_str()) {
                    return Err(r.invalid(
                        "pillar_source_merging_strategy",
                        format!("{strategy:?} is not one of smart, recurse, overwrite, list, none"),
                    ));
                }
                strategy
            },
            pillar_merge_lists: r.bool("pillar_merge_lists", false)?,
            pillar_includes_override_sls: r.bool("pillar_includes_override_sls", false)?,
            pillar_safe_render_error: r.bool("pillar_safe_render_error", true)?,
            ext_pillar: ext_pillar(&r)?,
            ext_pillar_first: r.bool("ext_pillar_first", false)?,
            pillar_cache: r.bool("pillar_cache", false)?,
            pillar_cache_ttl: r.unsigned("pillar_cache_ttl", 3600)?,
            pillar_opts: r.bool("pillar_opts", false)?,
            template_cmd: r.bool("brine_template_cmd", false)?,
            renderer: r.string("renderer", "jinja|yaml")?,
            state_top: {
                let top = r.string("state_top", "salt://top.sls")?;
                top.strip_prefix("salt://")
                    .unwrap_or(top.trim_start_matches('/'))
                    .to_owned()
            },
            api_logfile: r.string_opt("api_logfile")?.map(PathBuf::from),
            permissive_acl: r.bool("permissive_acl", false)?,
            sharedsecret: r.string_opt("sharedsecret")?,
            auth_pam_service: r.string("auth.pam.service", "login")?,
            rest_timeout: r.unsigned("rest_timeout", 300)?,
            token_expire_user_override: r.any("token_expire_user_override"),
            state_output: r.string("state_output", "full")?,
            state_verbose: r.bool("state_verbose", true)?,
            state_output_profile: r.bool("state_output_profile", true)?,
            state_output_diff: r.bool("state_output_diff", false)?,
            state_output_pct: r.bool("state_output_pct", false)?,
            failhard: r.bool("failhard", false)?,
            state_events: r.bool("state_events", false)?,
            reactor: r.any("reactor"),
            reactor_worker_threads: r.unsigned("reactor_worker_threads", 10)? as usize,
            reactor_worker_hwm: r.unsigned("reactor_worker_hwm", 10000)? as usize,
            raw: RawConfig::default(),
        };
        Ok(MasterConfig { raw, ..config })
    }

    /// Every key of the merged configuration, as Salt's `opts` (`wheel config.values`).
    pub fn opts(&self) -> &Map<String, Value> {
        &self.raw.values
    }

    /// The file that set `key`, if a file did.
    pub fn source_of(&self, key: &str) -> Option<&Path> {
        self.raw.sources.get(key).map(PathBuf::as_path)
    }

    /// Salt's `opts` as templates see them: the merged configuration, with the typed
    /// options Brine knows filled in with their values (defaults included).
    pub fn effective_opts(&self) -> Map<String, Value> {
        let roots = |r: &[(String, Vec<String>)]| {
            Value::Object(
                r.iter()
                    .map(|(env, dirs)| (env.clone(), Value::from(dirs.clone())))
                    .collect(),
            )
        };
        let file_roots: Vec<(String, Vec<String>)> = self
            .file_roots
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let path = |p: &Path| Value::from(p.to_string_lossy().into_owned());
        let typed = [
            ("id", Value::from(self.id.clone())),
            ("interface", Value::from(self.interface.clone())),
            ("publish_port", Value::from(self.publish_port)),
            ("ret_port", Value::from(self.ret_port)),
            ("root_dir", path(&self.root_dir)),
            ("pki_dir", path(&self.pki_dir)),
            ("cachedir", path(&self.cachedir)),
            ("sock_dir", path(&self.sock_dir)),
            ("user", Value::from(self.user.clone())),
            ("timeout", Value::from(self.timeout)),
            ("hash_type", Value::from(self.hash_type.clone())),
            ("file_roots", roots(&file_roots)),
            ("file_buffer_size", Value::from(self.file_buffer_size)),
            ("file_recv", Value::from(self.file_recv)),
            ("file_recv_max_size", Value::from(self.file_recv_max_size)),
            (
                "top_file_merging_strategy",
                Value::from(self.top_file_merging_strategy.clone()),
            ),
            ("env_order", Value::from(self.env_order.clone())),
            ("default_top", Value::from(self.default_top.clone())),
            ("pillar_roots", roots(&self.pillar_roots)),
            (
                "pillarenv",
                self.pillarenv.clone().map_or(Value::Null, Value::from),
            ),
            (
                "pillar_source_merging_strategy",
                Value::from(self.pillar_source_merging_strategy.clone()),
            ),
            ("pillar_merge_lists", Value::from(self.pillar_merge_lists)),
            ("pillar_cache", Value::from(self.pillar_cache)),
            ("pillar_cache_ttl", Value::from(self.pillar_cache_ttl)),
            ("pillar_opts", Value::from(self.pillar_opts)),
            ("ext_pillar_first", Value::from(self.ext_pillar_first)),
            ("renderer", Value::from(self.renderer.clone())),
            (
                "state_top",
                Value::from(format!("salt://{}", self.state_top)),
            ),
            ("state_output", Value::from(self.state_output.clone())),
            ("state_verbose", Value::from(self.state_verbose)),
            ("minion_data_cache", Value::from(self.minion_data_cache)),
            ("keep_jobs", Value::from(self.keep_jobs_seconds / 3600)),
        ];
        let mut opts = self.raw.values.clone();
        for (key, value) in typed {
            opts.entry(key.to_owned()).or_insert(value);
        }
        for (key, value) in self.raw.file_opts() {
            opts.insert(key.to_owned(), value);
        }
        opts
    }
}

impl Default for MasterConfig {
    /// Salt's defaults, as with an empty configuration directory.
    fn default() -> Self {
        Self::from_raw(RawConfig::default()).expect("the built-in master defaults are valid")
    }
}

/// How a minion uses the masters of its `master` list (`master_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasterType {
    /// `str` (the default): connected to every master of the list at once ("hot"); a job's
    /// return goes to the master that published it.
    Str,
    /// `failover`: connected to one master at a time, the next of the list when it is lost.
    Failover,
}

/// One master of the `master` list: `host`, `host:port`, `[v6]:port` (Salt's `prep_ip_port`);
/// the port is `master_port` when the entry names none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterAddr {
    pub host: String,
    pub port: u16,
}

impl MasterAddr {
    fn parse(entry: &str, default_port: u16) -> Result<MasterAddr, String> {
        let entry = entry.trim();
        let bad_port = |p: &str| format!("master '{entry}': '{p}' is not a port number");
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            match rest.split_once(']') {
                Some((host, "")) => (host, None),
                Some((host, tail)) => match tail.strip_prefix(':') {
                    Some(p) => (host, Some(p)),
                    None => return Err(format!("master '{entry}': not [address]:port")),
                },
                None => return Err(format!("master '{entry}': no closing ']'")),
            }
        } else {
            match entry.split_once(':') {
                // A bare IPv6 address has several colons and no port.
                Some((host, p)) if !p.contains(':') => (host, Some(p)),
                _ => (entry, None),
            }
        };
        if host.is_empty() {
            return Err(format!("master '{entry}': no host"));
        }
        let port = match port {
            None => default_port,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad_port(p))?,
        };
        Ok(MasterAddr {
            host: host.to_string(),
            port,
        })
    }
}

impl std::fmt::Display for MasterAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "[{}]:{}", self.host, self.port),
            false => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// The minion's settings, with Salt's defaults and path rules applied.
#[derive(Debug, Clone)]
pub struct MinionConfig {
    pub id: String,
    /// `master:` given as a string or a list.
    pub master: Vec<String>,
    /// The same, each with its port.
    pub masters: Vec<MasterAddr>,
    pub master_type: MasterType,
    /// `master_alive_interval`: seconds between checks that the master (in failover) is
    /// still there; 0: not checked.
    pub master_alive_interval: u64,
    /// `master_failback`: go back to the first master of the list once it answers again,
    /// checked every `master_failback_interval` seconds.
    pub master_failback: bool,
    pub master_failback_interval: u64,
    /// `random_master`: try the masters in a random order (failover).
    pub random_master: bool,
    /// `retry_dns`: while the master's name does not resolve, try again this often; zero:
    /// do not wait, use 127.0.0.1 (Salt's fallback).
    pub retry_dns: Duration,
    /// `retry_dns_count`: give a name up after this many more tries; `None`: never.
    pub retry_dns_count: Option<u64>,
    pub master_port: u16,
    pub publish_port: Option<u16>,
    pub root_dir: PathBuf,
    pub pki_dir: PathBuf,
    pub cachedir: PathBuf,
    pub sock_dir: PathBuf,
    pub acceptance_wait_time: u64,
    pub acceptance_wait_time_max: u64,
    pub auth_timeout: u64,
    pub auth_tries: u32,
    pub log_file: PathBuf,
    pub log_level: String,
    pub grains: Value,
    pub encryption_algorithm: String,
    pub signing_algorithm: String,
    pub sign_pub_messages: bool,
    pub zmq_filtering: bool,
    /// `ipv6`: resolve the master's name to IPv6 (`true`), IPv4 (`false`) or either (unset).
    pub ipv6: Option<bool>,
    pub recon_default: u64,
    pub recon_max: u64,
    pub recon_randomize: bool,
    pub request_channel_timeout: u64,
    pub request_channel_tries: u32,
    pub return_retry_timer: u64,
    pub return_retry_timer_max: u64,
    pub return_retry_tries: u32,
    pub master_finger: String,
    pub keysize: usize,
    pub rejected_retry: bool,
    pub enable_legacy_startup_events: bool,
    pub start_event_grains: Vec<String>,
    pub multiprocessing: bool,
    /// The `timeout` key, which Salt's minion does not default.
    pub timeout_default: Option<u64>,
    pub file_client: String,
    pub user: String,
    /// `schedule`: the scheduler's jobs (and its `enabled` setting).
    pub schedule: Value,
    /// `beacons`: the beacons by name (and their `enabled` setting).
    pub beacons: Value,
    /// `mine_functions`: what `mine.update` sends.
    pub mine_functions: Value,
    pub mine_enabled: bool,
    /// `mine_interval`, in minutes.
    pub mine_interval: u64,
    /// Brine's `job_timeout`: seconds after which a running job is stopped (none by default).
    pub job_timeout: Option<u64>,
    raw: RawConfig,
}

impl MinionConfig {
    /// Load `dir/minion`, `dir/minion.d/*.conf` and includes, as `salt-minion`
    /// and `salt-call` do: a generated id is cached in `<root_dir>/etc/salt/minion_id`.
    pub fn load(dir: &Path) -> Result<Self, ConfigError> {
        Self::from_raw_with(load_raw(dir, "minion")?, true)
    }

    /// Type and complete a raw configuration without caching a generated id.
    pub fn from_raw(raw: RawConfig) -> Result<Self, ConfigError> {
        Self::from_raw_with(raw, false)
    }

    /// Salt's `apply_minion_config`; `cache_minion_id` writes a generated id to the cache file.
    pub fn from_raw_with(raw: RawConfig, cache_minion_id: bool) -> Result<Self, ConfigError> {
        let r = Reader { raw: &raw };
        let root_dir_raw = r.string("root_dir", "/")?;
        let root = root_dir_raw.as_str();
        let cachedir_raw = r
            .path_raw("cachedir", "/var/cache/salt/minion")?
            .unwrap_or_default();
        let sock_raw = sock_dir_raw(
            r.path_raw("sock_dir", "/var/run/salt/minion")?
                .unwrap_or_default(),
            &cachedir_raw,
        );

        let id = match r.string_opt("id")?.filter(|id| !id.is_empty()) {
            Some(id) => append_domain(&r, id)?,
            None => {
                let (id, is_ip) = get_id(&r, root, cache_minion_id)?;
                if is_ip {
                    id
                } else {
                    append_domain(&r, id)?
                }
            }
        };

        let encryption_algorithm = r.string("encryption_algorithm", "OAEP-SHA1")?;
        check_algorithm(
            &r,
            "encryption_algorithm",
            &encryption_algorithm,
            &VALID_ENCRYPTION_ALGORITHMS,
        )?;
        let signing_algorithm = r.string("signing_algorithm", "PKCS1v15-SHA1")?;
        check_algorithm(
            &r,
            "signing_algorithm",
            &signing_algorithm,
            &VALID_SIGNING_ALGORITHMS,
        )?;

        let small = |key: &str, default: u32| -> Result<u32, ConfigError> {
            let n = r.unsigned(key, u64::from(default))?;
            u32::try_from(n).map_err(|_| r.type_error(key, "a smaller integer", &Value::from(n)))
        };

        let master = r.string_list("master", &["salt"], true)?;
        let master_port = r.port("master_port", 4506)?;
        let masters = master
            .iter()
            .map(|m| MasterAddr::parse(m, master_port))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|message| r.invalid("master", message))?;
        if masters.is_empty() {
            return Err(r.invalid("master", "an empty list names no master".into()));
        }
        let master_type = match r.string("master_type", "str")?.as_str() {
            "str" => MasterType::Str,
            "failover" => MasterType::Failover,
            other => {
                return Err(r.invalid(
                    "master_type",
                    format!("'{other}' is not supported: str or failover"),
                ))
            }
        };
        if master_type == MasterType::Failover
            && !matches!(r.value("master"), Some(Value::Array(_)))
        {
            return Err(r.invalid(
                "master",
                "master_type is 'failover' but master is not a list".into(),
            ));
        }
        let config = MinionConfig {
            id,
            master,
            masters,
            master_type,
            master_alive_interval: r.unsigned("master_alive_interval", 0)?,
            master_failback: r.bool("master_failback", false)?,
            master_failback_interval: r.unsigned("master_failback_interval", 0)?,
            random_master: r.bool("random_master", false)?,
            retry_dns: r.seconds("retry_dns", 30.0)?,
            retry_dns_count: match r.value("retry_dns_count") {
                None | Some(Value::Null) => None,
                Some(_) => Some(r.unsigned("retry_dns_count", 0)?),
            },
            master_port,
            publish_port: r.port_opt("publish_port")?,
            root_dir: PathBuf::from(abspath(root)),
            pki_dir: prepend_root_dir(
                root,
                &r.path_raw("pki_dir", "/etc/salt/pki/minion")?
                    .unwrap_or_default(),
            ),
            cachedir: prepend_root_dir(root, &cachedir_raw),
            sock_dir: prepend_root_dir(root, &sock_raw),
            acceptance_wait_time: r.number("acceptance_wait_time", 10)?,
            acceptance_wait_time_max: r.number("acceptance_wait_time_max", 0)?,
            auth_timeout: r.unsigned("auth_timeout", 5)?,
            auth_tries: small("auth_tries", 7)?,
            log_file: log_file(&r, root, "/var/log/salt/minion")?,
            log_level: r.string("log_level", "warning")?,
            // Salt replaces a non-mapping `grains` with an empty one.
            grains: match r.value("grains") {
                Some(v @ Value::Object(_)) => v.clone(),
                _ => Value::Object(Map::new()),
            },
            encryption_algorithm,
            signing_algorithm,
            sign_pub_messages: r.bool("sign_pub_messages", false)?,
            zmq_filtering: r.bool("zmq_filtering", false)?,
            ipv6: r.bool_opt("ipv6")?,
            recon_default: r.number("recon_default", 1000)?,
            recon_max: r.number("recon_max", 10000)?,
            recon_randomize: r.bool("recon_randomize", true)?,
            request_channel_timeout: r.unsigned("request_channel_timeout", 60)?,
            request_channel_tries: small("request_channel_tries", 3)?,
            return_retry_timer: r.unsigned("return_retry_timer", 5)?,
            return_retry_timer_max: r.unsigned("return_retry_timer_max", 10)?,
            return_retry_tries: small("return_retry_tries", 3)?,
            master_finger: r.string("master_finger", "")?,
            keysize: r.unsigned("keysize", 2048)? as usize,
            rejected_retry: r.bool("rejected_retry", false)?,
            enable_legacy_startup_events: r.bool("enable_legacy_startup_events", true)?,
            start_event_grains: r.string_list("start_event_grains", &[], false)?,
            multiprocessing: r.bool("multiprocessing", true)?,
            timeout_default: r.number_opt("timeout")?,
            file_client: r.string("file_client", "remote")?,
            user: r.string("user", "root")?,
            schedule: r.mapping("schedule")?,
            beacons: r.mapping("beacons")?,
            mine_functions: r.mapping("mine_functions")?,
            mine_enabled: r.bool("mine_enabled", true)?,
            mine_interval: r.unsigned("mine_interval", 60)?,
            job_timeout: r.number_opt("job_timeout")?.filter(|t| *t > 0),
            raw: RawConfig::default(),
        };
        Ok(MinionConfig { raw, ..config })
    }

    /// Every key of the merged configuration, as the files set them.
    pub fn opts(&self) -> &Map<String, Value> {
        &self.raw.values
    }

    /// Salt's minion `opts` as the execution modules see them (`config.get`, `config.items`):
    /// the merged configuration, with the options Brine's minion runs by given their
    /// effective values. The id and the paths under `root_dir` are the computed ones, whatever
    /// the files wrote; the other options keep what a file set and otherwise show the value
    /// the minion runs with. Options Brine does not know appear only when a file sets them.
    pub fn effective_opts(&self) -> Map<String, Value> {
        let raw = &self.raw.values;
        let path = |p: &Path| Value::from(p.to_string_lossy().into_owned());
        let computed = [
            ("id", Value::from(self.id.clone())),
            ("root_dir", path(&self.root_dir)),
            ("pki_dir", path(&self.pki_dir)),
            ("cachedir", path(&self.cachedir)),
            ("sock_dir", path(&self.sock_dir)),
            ("log_file", path(&self.log_file)),
            ("file_client", Value::from(self.file_client.clone())),
            (
                "hash_type",
                Value::from(
                    raw.get("hash_type")
                        .and_then(Value::as_str)
                        .unwrap_or("sha256")
                        .to_lowercase(),
                ),
            ),
        ];
        // `environment` is the old name of `saltenv`.
        let saltenv = raw
            .get("saltenv")
            .filter(|v| !v.is_null())
            .or_else(|| raw.get("environment"))
            .cloned()
            .unwrap_or(Value::Null);
        let defaults = [
            (
                "master",
                match self.master.as_slice() {
                    [one] => Value::from(one.clone()),
                    many => Value::from(many.to_vec()),
                },
            ),
            ("master_port", Value::from(self.master_port)),
            (
                "acceptance_wait_time",
                Value::from(self.acceptance_wait_time),
            ),
            (
                "acceptance_wait_time_max",
                Value::from(self.acceptance_wait_time_max),
            ),
            ("auth_timeout", Value::from(self.auth_timeout)),
            ("auth_tries", Value::from(self.auth_tries)),
            ("log_level", Value::from(self.log_level.clone())),
            ("grains", self.grains.clone()),
            (
                "encryption_algorithm",
                Value::from(self.encryption_algorithm.clone()),
            ),
            (
                "signing_algorithm",
                Value::from(self.signing_algorithm.clone()),
            ),
            ("sign_pub_messages", Value::from(self.sign_pub_messages)),
            ("zmq_filtering", Value::from(self.zmq_filtering)),
            ("recon_default", Value::from(self.recon_default)),
            ("recon_max", Value::from(self.recon_max)),
            ("recon_randomize", Value::from(self.recon_randomize)),
            (
                "request_channel_timeout",
                Value::from(self.request_channel_timeout),
            ),
            (
                "request_channel_tries",
                Value::from(self.request_channel_tries),
            ),
            ("return_retry_timer", Value::from(self.return_retry_timer)),
            (
                "return_retry_timer_max",
                Value::from(self.return_retry_timer_max),
            ),
            ("return_retry_tries", Value::from(self.return_retry_tries)),
            ("master_finger", Value::from(self.master_finger.clone())),
            ("keysize", Value::from(self.keysize)),
            ("rejected_retry", Value::from(self.rejected_retry)),
            (
                "enable_legacy_startup_events",
                Value::from(self.enable_legacy_startup_events),
            ),
            (
                "start_event_grains",
                Value::from(self.start_event_grains.clone()),
            ),
            ("multiprocessing", Value::from(self.multiprocessing)),
            ("user", Value::from(self.user.clone())),
            ("schedule", self.schedule.clone()),
            ("beacons", self.beacons.clone()),
            ("mine_enabled", Value::from(self.mine_enabled)),
            ("mine_interval", Value::from(self.mine_interval)),
            // What the minion's modules run with: no environment chosen (`base` for files),
            // no backups, the state top and renderer, no failhard, no state events, no test.
            ("saltenv", saltenv),
            ("pillarenv", Value::Null),
            ("backup_mode", Value::from("")),
            ("state_top", Value::from("top.sls")),
            ("renderer", Value::from("jinja|yaml")),
            ("failhard", Value::from(false)),
            ("state_events", Value::from(false)),
            ("test", Value::from(false)),
        ];
        let mut opts = raw.clone();
        for (key, value) in computed.into_iter().chain(self.raw.file_opts()) {
            opts.insert(key.to_owned(), value);
        }
        for (key, value) in defaults {
            opts.entry(key.to_owned()).or_insert(value);
        }
        opts
    }
}

impl Default for MinionConfig {
    /// Salt's defaults, as with an empty configuration directory (a generated id is not cached).
    fn default() -> Self {
        Self::from_raw(RawConfig::default()).expect("the built-in minion defaults are valid")
    }
}

/// Salt's `generate_minion_id`: the FQDN, else the host name, skipping localhost names.
mod hostname {
    /// Names Salt never uses as an id (`localhost_matchers`, matched at the start).
    fn is_local_name(name: &str) -> bool {
        let lower = name;
        lower.starts_with("localhost")
            || lower.starts_with("ip6-")
            || lower.starts_with("ipv6-")
            || lower.starts_with("::1")
            || lower.starts_with("fe00::")
            || lower.starts_with("fe02::")
            || lower == "0.0.0.0"
            || lower.starts_with("0.0.0.0")
            || (lower.starts_with("127.") && lower[4..].starts_with(|c: char| c.is_ascii_digit()))
            || (lower.starts_with("1.0.0.") && lower.contains(".ip6.arpa"))
    }

    pub(super) fn generate_minion_id() -> String {
        let host = hostname();
        let mut candidates = Vec::new();
        if let Some(host) = host.as_deref() {
            candidates.push(fqdn(host).unwrap_or_else(|| host.to_owned()));
            candidates.push(host.to_owned());
        }
        candidates
            .into_iter()
            .find(|name| !name.is_empty() && !is_local_name(name))
            .unwrap_or_else(|| "localhost".to_owned())
    }

    fn hostname() -> Option<String> {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for its whole length and gethostname
        // writes at most that many bytes.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc != 0 {
            return std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_owned());
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Some(String::from_utf8_lossy(&buf[..end]).into_owned())
    }

    /// The canonical name `getaddrinfo(AI_CANONNAME)` gives, when it is dotted.
    fn fqdn(host: &str) -> Option<String> {
        let c_host = std::ffi::CString::new(host).ok()?;
        // SAFETY: an all-zero addrinfo is a valid "no hints" value.
        #[allow(unsafe_code)]
        let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
        hints.ai_flags = libc::AI_CANONNAME;
        hints.ai_family = libc::AF_UNSPEC;
        hints.ai_socktype = libc::SOCK_STREAM;
        let mut result: *mut libc::addrinfo = std::ptr::null_mut();
        // SAFETY: pointers are valid for the call; the result list is freed
        // below and ai_canonname is copied out before that.
        #[allow(unsafe_code)]
        let name = unsafe {
            if libc::getaddrinfo(c_host.as_ptr(), std::ptr::null(), &hints, &mut result) != 0
                || result.is_null()
            {
                return None;
            }
            let canon = (*result).ai_canonname;
            let name = if canon.is_null() {
                None
            } else {
                Some(
                    std::ffi::CStr::from_ptr(canon)
                        .to_string_lossy()
                        .into_owned(),
                )
            };
            libc::freeaddrinfo(result);
            name
        };
        name.filter(|n| n.contains('.'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn empty_dir_gives_salt_master_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = MasterConfig::load(dir.path()).expect("defaults load");
        assert_eq!(cfg.ret_port, 4506);
        assert_eq!(cfg.publish_port, 4505);
        assert_eq!(cfg.interface, "0.0.0.0");
        assert_eq!(cfg.root_dir, PathBuf::from("/"));
        assert_eq!(cfg.pki_dir, PathBuf::from("/etc/salt/pki/master"));
        assert_eq!(cfg.cachedir, PathBuf::from("/var/cache/salt/master"));
        assert_eq!(cfg.sock_dir, PathBuf::from("/var/run/salt/master"));
        assert_eq!(cfg.log_file, PathBuf::from("/var/log/salt/master"));
        assert_eq!(cfg.worker_threads, 5);
        assert_eq!(cfg.keep_jobs_seconds, 86400);
        assert_eq!((cfg.timeout, cfg.gather_job_timeout), (5, 10));
        assert_eq!(cfg.file_roots["base"], ["/srv/salt", "/srv/spm/salt"]);
        assert_eq!(cfg.mine_get, None);
        assert!(cfg.sign_pub_messages && cfg.rotate_aes_key && cfg.auth_events && cfg.job_cache);
        assert!(cfg.runner_returns);
        assert!(!cfg.auto_accept && !cfg.open_mode && !cfg.zmq_filtering && !cfg.presence_events);
        assert_eq!(cfg.publish_signing_algorithm, "PKCS1v15-SHA1");
        assert_eq!(
            (cfg.publish_session, cfg.minimum_auth_version, cfg.keysize),
            (86400, 3, 2048)
        );
        assert_eq!(
            (
                cfg.pub_hwm,
                cfg.zmq_backlog,
                cfg.loop_interval,
                cfg.token_expire
            ),
            (1000, 1000, 60, 43200)
        );
        assert_eq!(cfg.log_level, "warning");
        assert_eq!(cfg.user, "root");
        assert_eq!(cfg.hash_type, "sha256");
        assert!(cfg.id.ends_with("_master"), "{}", cfg.id);
        assert_eq!(cfg.job_store["backend"], "sqlite");
        assert_eq!(cfg.job_store["path"], "/var/cache/salt/master/jobs.sqlite");
        assert!(cfg.nodegroups.is_empty());
        assert!(cfg.raw.values.is_empty());
    }

    // Expected values were produced by Salt 3007.15's master_config on the same files.
    #[test]
    fn master_d_include_and_root_dir_follow_salt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        let root_s = root.to_string_lossy().into_owned();
        let conf = dir.path().join("conf");
        write(
            &conf,
            "master",
            &format!(
                "root_dir: {root_s}\nid: mymaster\npki_dir: pki/here\ncachedir: {root_s}/cache\n\
                 sock_dir: /var/run/salt/x\nret_port: \"4510\"\npublish_port: 4505\nauto_accept: yes\n\
                 netapi_enable_clients: [local]\ninclude: extra/*.conf\nlog_dir: /logs\n"
            ),
        );
        write(
            &conf,
            "master.d/10-a.conf",
            "publish_port: 5000\nnetapi_enable_clients: [runner]\nexternal_auth: {pam: {a: [x]}}\n",
        );
        write(&conf, "master.d/20-b.conf", "publish_port: 5001\nnetapi_enable_clients: [wheel, local]\nexternal_auth: {pam: {b: [y]}}\n");
        write(&conf, "master.d/ignored.txt", "publish_port: 9999\n");
        write(&conf, "extra/x.conf", "keep_jobs: 2\nworker_threads: 7\n");
        let cfg = MasterConfig::load(&conf).expect("loads");
        assert_eq!(cfg.id, "mymaster");
        assert_eq!(cfg.ret_port, 4510);
        assert_eq!(cfg.publish_port, 5001);
        assert!(cfg.auto_accept);
        assert_eq!(cfg.root_dir, root);
        assert_eq!(cfg.pki_dir, root.join("pki/here"));
        assert_eq!(cfg.cachedir, root.join("cache"));
        assert_eq!(cfg.sock_dir, root.join("var/run/salt/x"));
        assert_eq!(cfg.log_file, root.join("logs/master"));
        assert_eq!(cfg.netapi_enable_clients, ["runner", "wheel", "local"]);
        assert_eq!(
            cfg.external_auth,
            serde_json::json!({"pam": {"a": ["x"], "b": ["y"]}})
        );
        assert_eq!(cfg.keep_jobs_seconds, 2 * 3600);
        assert_eq!(cfg.worker_threads, 7);
        assert_eq!(cfg.autosign_file, None);
        assert_eq!(
            cfg.job_store["path"],
            root.join("cache/jobs.sqlite").to_string_lossy().as_ref()
        );
        assert_eq!(
            cfg.raw.source_of("publish_port"),
            conf.join("master.d/20-b.conf")
        );
        assert_eq!(
            cfg.raw.source_of("worker_threads"),
            conf.join("extra/x.conf")
        );
        assert_eq!(cfg.raw.source_of("ret_port"), conf.join("master"));
    }

    #[test]
    fn relative_include_patterns_are_relative_to_the_working_directory() {
        // `salt-minion -c etc`: the drop-in pattern is `etc/minion.d/*.conf`. Tests run in
        // the crate's directory.
        let found = glob(Path::new("src/*.rs"));
        assert!(
            found.iter().any(|p| p.ends_with("src/config.rs")),
            "{found:?}"
        );
    }

    #[test]
    fn default_include_can_be_redirected_and_includes_nest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = dir.path();
        write(
            conf,
            "master",
            "default_include: other/*.conf\nret_port: 1\ntimeout: 9\n",
        );
        write(conf, "master.d/a.conf", "ret_port: 2\n");
        write(conf, "other/a.conf", "ret_port: 3\ninclude: deeper.yml\n");
        write(conf, "other/deeper.yml", "timeout: 30\n");
        let raw = load_raw(conf, "master").expect("loads");
        assert_eq!(raw.values["ret_port"], 3);
        assert_eq!(raw.values["timeout"], 30);
        assert_eq!(raw.sources["timeout"], conf.join("other/deeper.yml"));
    }

    #[test]
    fn job_store_sync_is_normal_or_full() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "master", "");
        assert!(MasterConfig::load(dir.path()).unwrap().job_store_sync_full);
        write(dir.path(), "master", "brine_job_store_sync: normal\n");
        assert!(!MasterConfig::load(dir.path()).unwrap().job_store_sync_full);
        write(dir.path(), "master", "brine_job_store_sync: full\n");
        assert!(MasterConfig::load(dir.path()).unwrap().job_store_sync_full);
        write(dir.path(), "master", "brine_job_store_sync: always\n");
        let err = MasterConfig::load(dir.path()).expect_err("not a level");
        assert!(
            err.to_string()
                .contains("'always' is neither 'normal' nor 'full'"),
            "{err}"
        );
    }

    #[test]
    fn master_job_cache_pgjsonb_reads_salts_returner_options() {
        let dir = tempfile::tempdir().expect("tempdir");
        let load = |text: &str| {
            write(dir.path(), "master", text);
            MasterConfig::load(dir.path())
        };
        let pg = |cfg: MasterConfig| match cfg.master_job_cache {
            JobCache::Pgjsonb(opts) => *opts,
            JobCache::Local => panic!("not pgjsonb"),
        };
        assert_eq!(load("").unwrap().master_job_cache, JobCache::Local);
        assert_eq!(load("").unwrap().event_return, None);
        let defaults = pg(load("master_job_cache: pgjsonb\n").unwrap());
        assert_eq!(
            (
                defaults.host.as_str(),
                defaults.port,
                defaults.user.as_str()
            ),
            ("localhost", 5432, "salt")
        );
        assert_eq!(
            (defaults.pass.as_str(), defaults.db.as_str()),
            ("salt", "salt")
        );
        assert_eq!(defaults.sslmode, None);
        // Flat keys first, then the nested mapping, then `pgjsonb.*`.
        let opts = pg(load(
            &[
                "master_job_cache: pgjsonb",
                "returner.pgjsonb.host: db1",
                "returner.pgjsonb:",
                "  host: db2",
                "  port: '6432'",
                "  pass: s3cret",
                "pgjsonb.db: jobs",
                "pgjsonb:",
                "  user: brine",
                "  sslmode: None",
                "  connect_timeout: 5",
                "",
            ]
            .join("\n"),
        )
        .unwrap());
        assert_eq!(opts.host, "db1");
        assert_eq!(opts.port, 6432);
        assert_eq!((opts.user.as_str(), opts.db.as_str()), ("brine", "jobs"));
        assert_eq!(opts.sslmode, None, "Salt's None means unset");
        assert_eq!(opts.connect_timeout, Some(5));
        assert!(!format!("{opts:?}").contains("s3cret"), "{opts:?}");

        let err = load("master_job_cache: mysql\n").expect_err("not supported");
        assert!(
            err.to_string()
                .contains("'mysql' is not supported: local_cache or pgjsonb"),
            "{err}"
        );
        let err = load("master_job_cache: pgjsonb\nreturner.pgjsonb.port: 70000\n")
            .expect_err("no such port");
        assert!(err.to_string().contains("returner.pgjsonb.port"), "{err}");
        let err =
            load("master_job_cache: pgjsonb\nreturner.pgjsonb.sslcrl: /crl\n").expect_err("sslcrl");
        assert!(err.to_string().contains("not supported"), "{err}");

        let events = load("event_return: [pgjsonb]\npgjsonb.host: db3\n").unwrap();
        assert_eq!(events.master_job_cache, JobCache::Local);
        assert_eq!(events.event_return.map(|o| o.host), Some("db3".to_string()));
        let err = load("event_return: redis\n").expect_err("redis");
        assert!(
            err.to_string()
                .contains("'redis' is not supported: pgjsonb"),
            "{err}"
        );
    }

    #[test]
    fn brine_nats_takes_servers_and_bounds_and_refuses_what_cannot_work() {
        let dir = tempfile::tempdir().expect("tempdir");
        let load = |text: &str| {
            write(dir.path(), "master", text);
            MasterConfig::load(dir.path())
        };
        assert_eq!(load("").unwrap().nats, None);
        let opts = load("brine_nats:\n  servers: nats://127.0.0.1:4222\n")
            .unwrap()
            .nats
            .expect("nats");
        assert_eq!(opts.servers, ["nats://127.0.0.1:4222"]);
        assert_eq!(
            (opts.stream.as_str(), opts.subject.as_str()),
            ("SALT_EVENTS", "salt.events")
        );
        assert_eq!(
            (opts.max_age, opts.max_bytes, opts.buffer),
            (86_400, 1 << 30, 100_000)
        );
        let opts = load(
            "brine_nats:\n  servers: [n1:4222, 'nats://u:p@n2:4222']\n  stream: EV\n  \
             subject: site.one\n  max_age: '600'\n  user: brine\n  password: s3cret\n",
        )
        .unwrap()
        .nats
        .expect("nats");
        assert_eq!(opts.servers, ["n1:4222", "nats://u:p@n2:4222"]);
        assert_eq!(
            (opts.stream.as_str(), opts.subject.as_str()),
            ("EV", "site.one")
        );
        assert_eq!(opts.max_age, 600);
        assert!(!format!("{opts:?}").contains("s3cret"), "{opts:?}");
        assert_eq!(opts.jobs_subject, None);
        let opts = load("brine_nats:\n  servers: h\n  jobs_subject: salt.jobs\n")
            .unwrap()
            .nats
            .expect("nats");
        assert_eq!(opts.jobs_subject.as_deref(), Some("salt.jobs"));
        assert_eq!(
            (opts.credentials.as_ref(), opts.tls_required),
            (None, false)
        );
        let opts = load(
            "brine_nats:\n  servers: [tls://n1:4222]\n  credentials: /etc/brine/nats.creds\n  \
             tls_ca: /etc/brine/ca.pem\n  tls_cert: c.pem\n  tls_key: k.pem\n  \
             tls_required: true\n",
        )
        .unwrap()
        .nats
        .expect("nats");
        assert_eq!(opts.servers, ["tls://n1:4222"]);
        assert_eq!(
            opts.credentials.as_deref(),
            Some(Path::new("/etc/brine/nats.creds"))
        );
        assert_eq!(opts.tls_ca.as_deref(), Some(Path::new("/etc/brine/ca.pem")));
        assert_eq!(
            (opts.tls_cert.as_deref(), opts.tls_key.as_deref()),
            (Some(Path::new("c.pem")), Some(Path::new("k.pem")))
        );
        assert!(opts.tls_required);
        let opts = load("brine_nats:\n  servers: h\n  nkey_seed_file: /s\n")
            .unwrap()
            .nats
            .expect("nats");
        assert_eq!(opts.nkey_seed_file.as_deref(), Some(Path::new("/s")));

        for (text, says) in [
            (
                "brine_nats: nats://x\n",
                "key 'brine_nats': expected a mapping",
            ),
            ("brine_nats:\n  stream: X\n", "'servers' is missing"),
            ("brine_nats:\n  servers: []\n", "'servers' is missing"),
            (
                "brine_nats:\n  servers: ws://h:1\n",
                "'ws://h:1' is not a NATS server URL",
            ),
            ("brine_nats:\n  servers: h\n  stream: a.b\n", "stream 'a.b'"),
            (
                "brine_nats:\n  servers: h\n  subject: a.*\n",
                "subject 'a.*'",
            ),
            (
                "brine_nats:\n  servers: h\n  subject: a..b\n",
                "subject 'a..b'",
            ),
            (
                "brine_nats:\n  servers: h\n  jobs_subject: 'a b'\n",
                "jobs_subject 'a b'",
            ),
            (
                "brine_nats:\n  servers: h\n  jobs_subject: salt.events.jobs\n",
                "jobs_subject 'salt.events.jobs' and subject 'salt.events' must not overlap",
            ),
            (
                "brine_nats:\n  servers: h\n  subject: a.b\n  jobs_subject: a\n",
                "must not overlap",
            ),
            (
                "brine_nats:\n  servers: h\n  max_age: 0\n",
                "brine_nats.max_age",
            ),
            (
                "brine_nats:\n  servers: h\n  user: u\n",
                "'user' and 'password' go together",
            ),
            (
                "brine_nats:\n  servers: h\n  sevrers: h\n",
                "unknown option 'sevrers'",
            ),
            (
                "brine_nats:\n  servers: h\n  user: u\n  password: p\n  token: t\n",
                "one way of signing in",
            ),
            (
                "brine_nats:\n  servers: h\n  token: t\n  credentials: /x.creds\n",
                "one way of signing in",
            ),
            (
                "brine_nats:\n  servers: h\n  credentials: /x.creds\n  nkey_seed_file: /s\n",
                "one way of signing in",
            ),
            (
                "brine_nats:\n  servers: h\n  tls_cert: /c.pem\n",
                "'tls_cert' and 'tls_key' go together",
            ),
            (
                "brine_nats:\n  servers: h\n  tls_required: maybe\n",
                "brine_nats.tls_required",
            ),
        ] {
            let err = load(text).expect_err(text).to_string();
            assert!(err.contains(says), "{text}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }

    #[test]
    fn bad_type_names_file_and_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "master", "ret_port: abc\n");
        let err = MasterConfig::load(dir.path()).expect_err("abc is not a port");
        assert_eq!(
            err.to_string(),
            format!(
                "{}: key 'ret_port': expected an integer, got \"abc\"",
                dir.path().join("master").display()
            )
        );

        write(dir.path(), "master", "");
        write(dir.path(), "master.d/x.conf", "auto_accept: [1]\n");
        let err = MasterConfig::load(dir.path()).expect_err("a list is not a bool");
        assert_eq!(
            err.to_string(),
            format!(
                "{}: key 'auto_accept': expected a boolean, got [1]",
                dir.path().join("master.d/x.conf").display()
            )
        );

        write(dir.path(), "master.d/x.conf", "ret_port: 70000\n");
        assert!(MasterConfig::load(dir.path())
            .expect_err("too big")
            .to_string()
            .contains("'ret_port'"));
        for bad in ["0", "-5", "4294967296"] {
            write(
                dir.path(),
                "master.d/x.conf",
                &format!("zmq_backlog: {bad}\n"),
            );
            let err = MasterConfig::load(dir.path()).expect_err("no backlog");
            assert!(
                err.to_string()
                    .contains("key 'zmq_backlog': expected a positive 32-bit integer"),
                "{err}"
            );
        }
        write(dir.path(), "master.d/x.conf", "zmq_backlog: 4096\n");
        assert_eq!(MasterConfig::load(dir.path()).unwrap().zmq_backlog, 4096);
        write(dir.path(), "master.d/x.conf", "ret_port: 4506.5\n");
        assert!(
            MasterConfig::load(dir.path()).is_err(),
            "Salt refuses floats for int options"
        );
        write(
            dir.path(),
            "master.d/x.conf",
            "publish_signing_algorithm: MD5\n",
        );
        let err = MasterConfig::load(dir.path()).expect_err("unknown algorithm");
        assert!(
            err.to_string()
                .contains("key 'publish_signing_algorithm': algorithm 'MD5' is not valid"),
            "{err}"
        );
    }

    #[test]
    fn values_are_read_as_salts_yaml_loader_reads_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "master",
            "auto_accept: yes\nopen_mode: off\nfailhard: On\nstate_events: 'yes'\n\
             custom_mode: 0644\nbase: &b {keep_jobs: 12}\nother:\n  <<: *b\n",
        );
        let cfg = MasterConfig::load(dir.path()).expect("config");
        assert!(cfg.auto_accept);
        assert!(!cfg.open_mode);
        assert!(cfg.failhard);
        assert_eq!(cfg.opts()["state_events"], serde_json::json!("yes"));
        // Salt's loader reads an unsigned leading-zero integer in base ten.
        assert_eq!(cfg.opts()["custom_mode"], serde_json::json!(644));
        assert_eq!(cfg.opts()["other"], serde_json::json!({"keep_jobs": 12}));

        // A duplicate key is an error, as in Salt's loader.
        write(dir.path(), "master", "ret_port: 4506\nret_port: 4507\n");
        let err = MasterConfig::load(dir.path()).expect_err("duplicate key");
        assert!(err.to_string().contains("invalid YAML"), "{err}");
    }

    #[test]
    fn broken_yaml_names_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "master",
            "ret_port: 4506\ninterface: 127.0.0.1\n  bad: : :\n",
        );
        let err = MasterConfig::load(dir.path()).expect_err("broken YAML");
        let text = err.to_string();
        let prefix = format!(
            "{}: invalid YAML at line 3 column",
            dir.path().join("master").display()
        );
        assert!(text.starts_with(&prefix), "{text}");
        assert!(!text.contains('\n'));

        write(dir.path(), "master", "- just\n- a list\n");
        let err = MasterConfig::load(dir.path()).expect_err("not a mapping");
        assert!(
            err.to_string()
                .ends_with("master: configuration should be a mapping, not list"),
            "{err}"
        );
    }

    #[test]
    fn unknown_keys_and_loose_values_are_accepted() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "master",
            "id: m\nsome_future_option: {x: [1, 2]}\nfileserver_backend: [roots]\nzmq_filtering: On\n\
             worker_threads: ' 8 '\nloop_interval: 0.4\nnodegroups:\n  - web: 'L@a,b'\n  - db: G@role:db\n",
        );
        let cfg = MasterConfig::load(dir.path()).expect("loads");
        assert!(cfg.zmq_filtering);
        assert_eq!(cfg.worker_threads, 8);
        assert_eq!(cfg.loop_interval, 0);
        assert_eq!(cfg.nodegroups["web"], rmpv::Value::from("L@a,b"));
        assert_eq!(cfg.nodegroups["db"], rmpv::Value::from("G@role:db"));
        assert_eq!(cfg.raw.values["some_future_option"]["x"][1], 2);
    }

    // Expected values are what `salt-call --local config.get <key>` of Salt 3007 gives.
    #[test]
    fn minion_effective_opts_are_salts_values() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        write(
            dir.path(),
            "minion",
            &format!(
                "id: m1\nroot_dir: {}\nmaster_port: \"4510\"\nmaster: [a, b]\nlog_file: logs/x\n\
                 pki_dir: pk\nhash_type: MD5\nfailhard: true\nenvironment: dev\nmy_opt: {{a: 1}}\n",
                root.display()
            ),
        );
        let opts = MinionConfig::load(dir.path())
            .expect("loads")
            .effective_opts();
        let root_s = root.to_string_lossy();
        for (key, want) in [
            ("id", serde_json::json!("m1")),
            ("master", serde_json::json!(["a", "b"])),
            ("master_port", serde_json::json!("4510")),
            ("log_file", serde_json::json!(format!("{root_s}/logs/x"))),
            ("pki_dir", serde_json::json!(format!("{root_s}/pk"))),
            (
                "cachedir",
                serde_json::json!(format!("{root_s}/var/cache/salt/minion")),
            ),
            ("hash_type", serde_json::json!("md5")),
            ("failhard", serde_json::json!(true)),
            ("saltenv", serde_json::json!("dev")),
            ("pillarenv", Value::Null),
            ("my_opt", serde_json::json!({"a": 1})),
            ("file_client", serde_json::json!("remote")),
            ("backup_mode", serde_json::json!("")),
            ("state_top", serde_json::json!("top.sls")),
            ("test", serde_json::json!(false)),
        ] {
            assert_eq!(opts.get(key), Some(&want), "{key}");
        }
        let opts = MinionConfig::default().effective_opts();
        assert_eq!(opts["master"], "salt");
        assert_eq!(opts["hash_type"], "sha256");
        assert_eq!(opts["saltenv"], Value::Null);
        assert!(!opts.contains_key("publish_port") && !opts.contains_key("job_timeout"));
    }

    #[test]
    fn minion_defaults_and_cached_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        write(
            dir.path(),
            "minion",
            &format!("root_dir: {}\nmaster: 127.0.0.1\n", root.display()),
        );
        write(&root, "etc/salt/minion_id", "web1\n");
        let cfg = MinionConfig::load(dir.path()).expect("loads");
        assert_eq!(cfg.id, "web1");
        assert_eq!(cfg.master, ["127.0.0.1"]);
        assert_eq!(cfg.master_port, 4506);
        assert_eq!((cfg.mine_enabled, cfg.mine_interval), (true, 60));
        assert_eq!(cfg.schedule, serde_json::json!({}));
        assert_eq!(cfg.publish_port, None);
        assert_eq!(cfg.pki_dir, root.join("etc/salt/pki/minion"));
        assert_eq!(cfg.cachedir, root.join("var/cache/salt/minion"));
        assert_eq!(cfg.sock_dir, root.join("var/run/salt/minion"));
        assert_eq!(cfg.log_file, root.join("var/log/salt/minion"));
        assert_eq!(
            (cfg.acceptance_wait_time, cfg.acceptance_wait_time_max),
            (10, 0)
        );
        assert_eq!((cfg.auth_timeout, cfg.auth_tries), (5, 7));
        assert_eq!((cfg.recon_default, cfg.recon_max), (1000, 10000));
        assert!(cfg.recon_randomize && cfg.multiprocessing && cfg.enable_legacy_startup_events);
        assert!(!cfg.sign_pub_messages && !cfg.rejected_retry && !cfg.zmq_filtering);
        assert_eq!(
            (cfg.request_channel_timeout, cfg.request_channel_tries),
            (60, 3)
        );
        assert_eq!(
            (
                cfg.return_retry_timer,
                cfg.return_retry_timer_max,
                cfg.return_retry_tries
            ),
            (5, 10, 3)
        );
        assert_eq!(cfg.encryption_algorithm, "OAEP-SHA1");
        assert_eq!(cfg.signing_algorithm, "PKCS1v15-SHA1");
        assert_eq!(cfg.file_client, "remote");
        assert_eq!(cfg.timeout_default, None);
        assert_eq!(cfg.grains, serde_json::json!({}));

        // The master reads the same cache file and appends `_master`.
        write(
            dir.path(),
            "master",
            &format!("root_dir: {}\n", root.display()),
        );
        assert_eq!(
            MasterConfig::load(dir.path()).expect("loads").id,
            "web1_master"
        );
    }

    #[test]
    fn minion_masters_take_ports_and_a_type() {
        let dir = tempfile::tempdir().expect("tempdir");
        let load = |text: &str| {
            write(dir.path(), "minion", &format!("id: m1\n{text}"));
            MinionConfig::load(dir.path())
        };
        let addr = |host: &str, port| MasterAddr {
            host: host.into(),
            port,
        };
        let cfg = load("master: ['a', 'b:4510', '[::1]:4600', 'fe80::1', '[::2]']\n").unwrap();
        assert_eq!(
            cfg.masters,
            [
                addr("a", 4506),
                addr("b", 4510),
                addr("::1", 4600),
                addr("fe80::1", 4506),
                addr("::2", 4506)
            ]
        );
        assert_eq!(cfg.masters[2].to_string(), "[::1]:4600");
        assert_eq!(cfg.master_type, MasterType::Str);
        assert_eq!((cfg.master_alive_interval, cfg.master_failback), (0, false));
        let cfg = load(
            "master: [a, b]\nmaster_type: failover\nmaster_alive_interval: 30\n\
             master_failback: True\nmaster_failback_interval: 60\nrandom_master: True\n",
        )
        .unwrap();
        assert_eq!(cfg.master_type, MasterType::Failover);
        assert_eq!(
            (cfg.master_alive_interval, cfg.master_failback_interval),
            (30, 60)
        );
        assert!(cfg.master_failback && cfg.random_master);
        for (text, says) in [
            ("master: a\nmaster_type: failover\n", "master is not a list"),
            (
                "master: [a]\nmaster_type: func\n",
                "'func' is not supported",
            ),
            ("master: 'a:http'\n", "'http' is not a port number"),
            ("master: 'a:0'\n", "'0' is not a port number"),
            ("master: '[::1'\n", "no closing ']'"),
            ("master: []\n", "an empty list names no master"),
        ] {
            let err = load(text).expect_err(text).to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn minion_retry_dns_and_ipv6_are_read_as_salt_types_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let load = |text: &str| {
            write(dir.path(), "minion", text);
            MinionConfig::load(dir.path())
        };
        let cfg = load("id: m1\n").unwrap();
        assert_eq!(cfg.retry_dns, Duration::from_secs(30));
        assert_eq!((cfg.retry_dns_count, cfg.ipv6), (None, None));
        let cfg = load("id: m1\nretry_dns: 2.5\nretry_dns_count: 4\nipv6: true\n").unwrap();
        assert_eq!(cfg.retry_dns, Duration::from_millis(2500));
        assert_eq!((cfg.retry_dns_count, cfg.ipv6), (Some(4), Some(true)));
        let cfg = load("id: m1\nretry_dns_count: null\nipv6: ~\n").unwrap();
        assert_eq!((cfg.retry_dns_count, cfg.ipv6), (None, None));
        for bad in [
            "retry_dns: -1",
            "retry_dns: soon",
            "retry_dns_count: -2",
            "ipv6: maybe",
        ] {
            let err = load(&format!("id: m1\n{bad}\n"))
                .expect_err(bad)
                .to_string();
            let key = bad.split(':').next().unwrap_or_default();
            assert!(err.contains(key), "{bad}: {err}");
        }
    }

    #[test]
    fn minion_generated_id_is_cached_under_root_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        write(
            dir.path(),
            "minion",
            &format!(
                "root_dir: {}\nmaster: [m1, m2]\nmaster_port: '4600'\n",
                root.display()
            ),
        );
        let cfg = MinionConfig::load(dir.path()).expect("loads");
        assert!(!cfg.id.is_empty());
        assert_eq!(cfg.master, ["m1", "m2"]);
        assert_eq!(cfg.master_port, 4600);
        let cached = std::fs::read_to_string(root.join("etc/salt/minion_id")).expect("id cached");
        assert_eq!(cached, cfg.id);

        let other = tempfile::tempdir().expect("tempdir");
        write(
            other.path(),
            "minion",
            &format!("root_dir: {}\n", other.path().display()),
        );
        MinionConfig::from_raw(load_raw(other.path(), "minion").expect("raw")).expect("loads");
        assert!(
            !other.path().join("etc/salt/minion_id").exists(),
            "from_raw does not cache"
        );
    }

    #[test]
    fn minion_rejects_unknown_encryption_algorithm_and_numeric_id_is_a_string() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(
            dir.path(),
            "minion",
            "id: 1234\nencryption_algorithm: OAEP-MD5\n",
        );
        let err = MinionConfig::load(dir.path()).expect_err("bad algorithm");
        assert!(
            err.to_string().contains("key 'encryption_algorithm'"),
            "{err}"
        );
        write(
            dir.path(),
            "minion",
            "id: 1234\ngrains: [not, a, map]\ntimeout: 20\n",
        );
        let cfg = MinionConfig::load(dir.path()).expect("loads");
        assert_eq!(cfg.id, "1234");
        assert_eq!(cfg.grains, serde_json::json!({}));
        assert_eq!(cfg.timeout_default, Some(20));
    }

    #[test]
    fn prepend_root_dir_matches_salt() {
        assert_eq!(
            prepend_root_dir("/", "/etc/salt/pki"),
            PathBuf::from("/etc/salt/pki")
        );
        assert_eq!(prepend_root_dir("/", "pki"), PathBuf::from("/pki"));
        assert_eq!(
            prepend_root_dir("/srv/r", "/etc/salt/pki"),
            PathBuf::from("/srv/r/etc/salt/pki")
        );
        assert_eq!(
            prepend_root_dir("/srv/r", "/srv/r/pki"),
            PathBuf::from("/srv/r/pki")
        );
        assert_eq!(
            prepend_root_dir("/srv/r/", "rel/dir"),
            PathBuf::from("/srv/r/rel/dir")
        );
        assert_eq!(
            prepend_root_dir("/srv/r", "/srv/rx/pki"),
            PathBuf::from("/srv/r/srv/rx/pki")
        );
        assert!(is_uri("udp://localhost:514") && is_uri("file:///dev/log"));
        assert!(!is_uri("/var/log/salt/master") && !is_uri("relative/log"));
    }
}
