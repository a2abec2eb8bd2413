//! The `config` execution module: the minion's settings looked up the way Salt's modules
//! look them up. A key is searched in the minion's options (with the live `grains` and
//! `pillar` in them, as in Salt's `__opts__`), then the grains, the pillar, the pillar's
//! `master` map (the master's options, with `pillar_opts`), and last a small table of
//! settings for other modules ([`defaults`]). [`option`] is the lookup the other modules
//! use (`hosts.file`, ...).

use std::path::Path;

use rmpv::Value;

use super::args::{py_str, Bound, Signature, py_type_name};
use brine_protocol::pystr::split as py_split;
use super::grains::lookup;
use super::{CallState, Context, FnError, Spec};
use brine_protocol::dictupdate::{self, Strategy};
use brine_protocol::payload::{from_json, get, py_truthy};
use brine_protocol::pyeq::py_eq;

super::spec_table! {
    /// The functions of the `config` module.
    Get => ("config.get", "get", ["key", "default", "delimiter", "merge", "omit_opts", "omit_pillar", "omit_master", "omit_grains"], 1, false, false, "
    The value of a key from the minion's options, else its grains, else its pillar, else
    the master's options the pillar carries under 'master' (with pillar_opts), else Salt's
    defaults for other modules; default (an empty string unless given) when none has it.

    The key goes down nested dicts and lists: 'pkg:apache' is the 'apache' entry of 'pkg'.
    delimiter replaces ':' in the key.

    merge ('recurse' or 'overwrite'; anything else is taken as 'recurse') looks the key up
    in all of those merged together instead: the defaults, then the master's options, the
    pillar, the grains and the options, each merged over what came before. 'recurse' merges
    nested dicts key by key, 'overwrite' replaces each top-level key whole.

    omit_opts, omit_grains, omit_pillar and omit_master leave out one of the places
    (without merge).

    CLI Example:

        salt '*' config.get pkg:apache
        salt '*' config.get lxc.container_profile:centos merge=recurse
    "),
    Option => ("config.option", "option", ["value", "default", "omit_opts", "omit_grains", "omit_pillar", "omit_master", "omit_all", "wildcard"], 1, false, false, "
    The value of a top-level key, searched in the order of config.get (without going down
    nested data), with Salt's defaults for other modules last. To see those defaults:

        salt '*' config.option '*' omit_all=True wildcard=True

    default
        What is returned when nothing matches: an empty string, or an empty dict with
        wildcard, unless given.

    omit_opts, omit_grains, omit_pillar, omit_master
        True leaves the minion's options, the grains, the pillar or the master's options
        out of the search.

    omit_all
        True leaves all four out: only the defaults are searched.

    wildcard
        True takes value as a glob and returns a dict of every matching key with its
        value (the first place in the order above wins for each key).

    CLI Example:

        salt '*' config.option redis.host
    "),
    DotVals => ("config.dot_vals", "dot_vals", ["value"], 1, false, false, "
    Every option named '<value>.<something>' in the master's options the pillar carries and
    the minion's options (the minion's win), as a dict.

    CLI Example:

        salt '*' config.dot_vals host
    "),
    Items => ("config.items", "items", [], 0, false, false, "
    The options of the running minion, defaults included, with its grains and pillar.

    CLI Example:

        salt '*' config.items
    "),
    Merge => ("config.merge", "merge", ["value", "default", "omit_opts", "omit_master", "omit_pillar"], 1, false, false, "
    A top-level key's values from the minion's options, the master's options the pillar
    carries and the pillar, merged: dicts are joined (the earlier place wins for a key),
    lists concatenated. A string is returned as soon as it is found. Salt's defaults when
    none of them has the key, else default.

    CLI Example:

        salt '*' config.merge schedule
    "),
    BackupMode => ("config.backup_mode", "backup_mode", ["backup"], 0, false, false, "
    backup when it is given, else the backup_mode option.

    CLI Example:

        salt '*' config.backup_mode
    "),
    ManageMode => ("config.manage_mode", "manage_mode", ["mode"], 1, false, false, "
    A file mode as a string of at least four digits ('644' and 0o644 give '0644').

    CLI Example:

        salt '*' config.manage_mode
    "),
    ValidFileproto => ("config.valid_fileproto", "valid_fileproto", ["uri"], 1, false, false, "
    Whether the scheme of a URI is one the file functions can fetch from (salt, file, http,
    https, ftp, swift, s3).

    CLI Example:

        salt '*' config.valid_fileproto salt://path/to/file
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let arg = |key: &str| b.get(key).cloned();
        let flag = |key: &str| b.get(key).is_some_and(py_truthy);
        let value = || arg("value").unwrap_or(Value::Nil);
        match self {
            Fun::Get => {
                let merge = arg("merge").filter(|m| !m.is_nil()).map(|m| {
                    if m.as_str() == Some("overwrite") {
                        Strategy::Overwrite
                    } else {
                        // Salt warns about any other value and recurses.
                        Strategy::Recurse
                    }
                });
                let omit = Omit {
                    opts: flag("omit_opts"),
                    grains: flag("omit_grains"),
                    pillar: flag("omit_pillar"),
                    master: flag("omit_master"),
                };
                let found = get_value(
                    ctx,
                    &arg("key").unwrap_or(Value::Nil),
                    &arg("delimiter").unwrap_or_else(|| Value::from(":")),
                    merge,
                    omit,
                )?;
                Ok(found.unwrap_or_else(|| arg("default").unwrap_or_else(|| Value::from(""))))
            }
            Fun::Option => {
                let all = flag("omit_all");
                let omit = Omit {
                    opts: all || flag("omit_opts"),
                    grains: all || flag("omit_grains"),
                    pillar: all || flag("omit_pillar"),
                    master: all || flag("omit_master"),
                };
                let wildcard = flag("wildcard");
                let default = arg("default")
                    .filter(|d| !d.is_nil())
                    .unwrap_or_else(|| {
                        if wildcard {
                            Value::Map(vec![])
                        } else {
                            Value::from("")
                        }
                    });
                if wildcard {
                    let found = matching(ctx, &value(), omit)?;
                    Ok(if found.is_empty() {
                        default
                    } else {
                        Value::Map(found)
                    })
                } else {
                    Ok(find_option(ctx, &value(), omit)?.unwrap_or(default))
                }
            }
            Fun::DotVals => dot_vals(ctx, &value()),
            Fun::Items => Ok(opts(ctx)),
            Fun::Merge => {
                let omit = Omit {
                    opts: flag("omit_opts"),
                    grains: true,
                    pillar: flag("omit_pillar"),
                    master: flag("omit_master"),
                };
                let found = merged_option(ctx, &value(), omit)?;
                Ok(found.unwrap_or_else(|| arg("default").unwrap_or_else(|| Value::from(""))))
            }
            Fun::BackupMode => match arg("backup").filter(py_truthy) {
                Some(backup) => Ok(backup),
                None => option(ctx, "backup_mode"),
            },
            Fun::ManageMode => Ok(brine_state::states::file::normalize_mode(
                &brine_protocol::payload::to_json(&arg("mode").unwrap_or(Value::Nil)),
            )
            .map_or(Value::Nil, Value::from)),
            Fun::ValidFileproto => {
                valid_fileproto(&arg("uri").unwrap_or(Value::Nil)).map(Value::Boolean)
            }
        }
    }
}

/// Salt's `config.option(key)`: the value of a top-level option for the other modules, an
/// empty string when nothing has it.
pub(crate) fn option(ctx: &Context, key: &str) -> Result<Value, FnError> {
    Ok(find_option(ctx, &Value::from(key), Omit::default())?.unwrap_or_else(|| Value::from("")))
}

/// The places a lookup leaves out.
#[derive(Debug, Clone, Copy, Default)]
struct Omit {
    opts: bool,
    grains: bool,
    pillar: bool,
    master: bool,
}

/// Salt's settings for other modules, the last place a lookup searches.
pub(crate) fn defaults() -> Value {
    from_json(&serde_json::json!({
        "mongo.db": "salt",
        "mongo.password": "",
        "mongo.port": 27017,
        "mongo.user": "",
        "redis.db": "0",
        "redis.host": "salt",
        "redis.port": 6379,
        "test.foo": "unconfigured",
        "ca.cert_base_path": "/etc/pki",
        "solr.cores": [],
        "solr.host": "localhost",
        "solr.port": "8983",
        "solr.baseurl": "/solr",
        "solr.type": "master",
        "solr.request_timeout": null,
        "solr.init_script": "/etc/rc.d/solr",
        "solr.dih.import_options": {
            "clean": false,
            "optimize": true,
            "commit": true,
            "verbose": false,
        },
        "solr.backup_path": null,
        "solr.num_backups": 1,
        "poudriere.config": "/usr/local/etc/poudriere.conf",
        "poudriere.config_dir": "/usr/local/etc/poudriere.d",
        "ldap.uri": "",
        "ldap.server": "localhost",
        "ldap.port": "389",
        "ldap.tls": false,
        "ldap.no_verify": false,
        "ldap.anonymous": true,
        "ldap.scope": 2,
        "ldap.attrs": null,
        "ldap.binddn": "",
        "ldap.bindpw": "",
        "hosts.file": "/etc/hosts",
        "aliases.file": "/etc/aliases",
        "virt": {"tunnel": false, "images": "/srv/salt-images"},
        "docker.exec_driver": "docker-exec",
        "docker.compare_container_networks": {
            "static": ["Aliases", "Links", "IPAMConfig"],
            "automatic": ["IPAddress", "Gateway", "GlobalIPv6Address", "IPv6Gateway"],
        },
    }))
}

/// Salt's `__opts__`: the minion's effective options with its grains and pillar as the
/// `grains` and `pillar` options.
pub(crate) fn opts(ctx: &Context) -> Value {
    let mut entries: Vec<(Value, Value)> = ctx
        .services
        .opts
        .iter()
        .map(|(k, v)| (Value::from(k.as_str()), from_json(v)))
        .collect();
    for (key, value) in [("grains", &ctx.grains), ("pillar", &ctx.pillar)] {
        set(&mut entries, Value::from(key), Value::clone(value));
    }
    Value::Map(entries)
}

/// The pillar's `master` entry, an empty dict without one.
fn master(ctx: &Context) -> Value {
    get(&ctx.pillar, "master")
        .cloned()
        .unwrap_or(Value::Map(vec![]))
}

/// `entries[key] = value` keeping the key's place.
fn set(entries: &mut Vec<(Value, Value)>, key: Value, value: Value) {
    match entries.iter_mut().find(|(k, _)| py_eq(k, &key)) {
        Some(slot) => slot.1 = value,
        None => entries.push((key, value)),
    }
}

fn type_error(msg: impl std::fmt::Display) -> FnError {
    FnError::Exception(format!("TypeError: {msg}"))
}

/// Whether a value can be a dict key (Python's `hash`).
fn hashable(key: &Value) -> Result<(), FnError> {
    match key {
        Value::Array(_) | Value::Map(_) => Err(type_error(format_args!(
            "unhashable type: '{}'",
            py_type_name(key)
        ))),
        _ => Ok(()),
    }
}

/// Python's `key in container`.
fn contains(container: &Value, key: &Value) -> Result<bool, FnError> {
    match container {
        Value::Map(entries) => {
            hashable(key)?;
            Ok(entries.iter().any(|(k, _)| py_eq(k, key)))
        }
        Value::String(text) => match key {
            Value::String(_) => Ok(String::from_utf8_lossy(text.as_bytes()).contains(&py_str(key))),
            other => Err(type_error(format_args!(
                "'in <string>' requires string as left operand, not {}",
                py_type_name(other)
            ))),
        },
        Value::Array(items) => Ok(items.iter().any(|item| py_eq(item, key))),
        other => Err(type_error(format_args!(
            "argument of type '{}' is not iterable",
            py_type_name(other)
        ))),
    }
}

/// Python's `container[key]`, for a key [`contains`] found.
fn index(container: &Value, key: &Value) -> Result<Value, FnError> {
    match (container, key) {
        (Value::Map(entries), _) => Ok(entries
            .iter()
            .find(|(k, _)| py_eq(k, key))
            .map_or(Value::Nil, |(_, v)| v.clone())),
        (Value::Array(items), Value::Integer(i)) => {
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let i = i.as_i64().unwrap_or(i64::MAX);
            let pos = if i < 0 { i + len } else { i };
            usize::try_from(pos)
                .ok()
                .and_then(|p| items.get(p))
                .cloned()
                .ok_or_else(|| FnError::Exception("IndexError: list index out of range".into()))
        }
        (Value::Array(_), other) => Err(type_error(format_args!(
            "list indices must be integers or slices, not {}",
            py_type_name(other)
        ))),
        (Value::String(_), other) => Err(type_error(format_args!(
            "string indices must be integers, not '{}'",
            py_type_name(other)
        ))),
        (other, _) => Err(type_error(format_args!(
            "'{}' object is not subscriptable",
            py_type_name(other)
        ))),
    }
}

/// `container[key]` when `key in container`.
fn entry(container: &Value, key: &Value) -> Result<Option<Value>, FnError> {
    if contains(container, key)? {
        index(container, key).map(Some)
    } else {
        Ok(None)
    }
}

/// The places searched, in order, each with whether it is left out.
fn places(ctx: &Context, omit: Omit) -> [(bool, Value); 4] {
    [
        (omit.opts, opts(ctx)),
        (omit.grains, Value::clone(&ctx.grains)),
        (omit.pillar, Value::clone(&ctx.pillar)),
        (omit.master, master(ctx)),
    ]
}

/// `config.option` without a wildcard: the first place with the key, then the defaults.
fn find_option(ctx: &Context, key: &Value, omit: Omit) -> Result<Option<Value>, FnError> {
    for (omitted, data) in places(ctx, omit) {
        if !omitted {
            if let Some(found) = entry(&data, key)? {
                return Ok(Some(found));
            }
        }
    }
    entry(&defaults(), key)
}

/// Python's `fnmatch.filter(data, pattern)` followed by `data[name]` for each match.
fn glob_entries(data: &Value, pattern: &str) -> Result<Vec<(Value, Value)>, FnError> {
    let names: Vec<Value> = match data {
        Value::Map(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
        Value::Array(items) => items.clone(),
        Value::String(_) => py_str(data)
            .chars()
            .map(|c| Value::from(c.to_string()))
            .collect(),
        other => {
            return Err(type_error(format_args!(
                "'{}' object is not iterable",
                py_type_name(other)
            )))
        }
    };
    let mut out = Vec::new();
    for name in names {
        let Some(text) = name.as_str() else {
            return Err(type_error(format_args!(
                "expected string or bytes-like object, got '{}'",
                py_type_name(&name)
            )));
        };
        if super::sys::fnmatch(pattern, text) {
            let value = index(data, &name)?;
            out.push((name, value));
        }
    }
    Ok(out)
}

/// `config.option` with a wildcard: every matching key, the earliest place winning, then
/// the matching defaults no place has.
fn matching(ctx: &Context, pattern: &Value, omit: Omit) -> Result<Vec<(Value, Value)>, FnError> {
    let Some(pattern) = pattern.as_str() else {
        return Err(type_error(format_args!(
            "expected str, bytes or os.PathLike object, not {}",
            py_type_name(pattern)
        )));
    };
    let mut found = Vec::new();
    for (omitted, data) in places(ctx, omit).into_iter().rev() {
        if !omitted {
            for (k, v) in glob_entries(&data, pattern)? {
                set(&mut found, k, v);
            }
        }
    }
    for (k, v) in glob_entries(&defaults(), pattern)? {
        if !found.iter().any(|(f, _)| py_eq(f, &k)) {
            found.push((k, v));
        }
    }
    Ok(found)
}

/// `config.merge`: the minion's options, then the master's options, then the pillar, joined.
fn merged_option(ctx: &Context, key: &Value, omit: Omit) -> Result<Option<Value>, FnError> {
    let mut ret: Option<Value> = None;
    let [(_, opts), _, (_, pillar), (_, master)] = places(ctx, omit);
    if !omit.opts {
        ret = entry(&opts, key)?.filter(|v| !v.is_nil());
        if let Some(text @ Value::String(_)) = ret {
            return Ok(Some(text));
        }
    }
    for (omitted, data) in [(omit.master, master), (omit.pillar, pillar)] {
        if omitted {
            continue;
        }
        let Some(more) = entry(&data, key)? else {
            continue;
        };
        ret = match ret.take().filter(|v| !v.is_nil()) {
            None => {
                if let text @ Value::String(_) = more {
                    return Ok(Some(text));
                }
                Some(more)
            }
            Some(Value::Map(first)) => match more {
                // The later place's dict, with the earlier's keys over it.
                Value::Map(mut later) => {
                    for (k, v) in first {
                        set(&mut later, k, v);
                    }
                    Some(Value::Map(later))
                }
                _ => Some(Value::Map(first)),
            },
            Some(Value::Array(mut first)) => match more {
                Value::Array(later) => {
                    first.extend(later);
                    Some(Value::Array(first))
                }
                _ => Some(Value::Array(first)),
            },
            Some(other) => Some(other),
        };
    }
    match ret.filter(|v| !v.is_nil()) {
        Some(found) => Ok(Some(found)),
        None => entry(&defaults(), key),
    }
}

/// `config.dot_vals`: the `<value>.*` options of the master's options and the minion's.
fn dot_vals(ctx: &Context, value: &Value) -> Result<Value, FnError> {
    let prefix = format!("{}.", py_str(value));
    let master = match master(ctx) {
        Value::Map(entries) => entries,
        other => {
            return Err(FnError::Exception(format!(
                "AttributeError: '{}' object has no attribute 'items'",
                py_type_name(&other)
            )))
        }
    };
    let Value::Map(opts) = opts(ctx) else {
        return Ok(Value::Map(vec![]));
    };
    let mut out = Vec::new();
    for (k, v) in master.into_iter().chain(opts) {
        let Some(name) = k.as_str() else {
            return Err(FnError::Exception(format!(
                "AttributeError: '{}' object has no attribute 'startswith'",
                py_type_name(&k)
            )));
        };
        if name.starts_with(&prefix) {
            set(&mut out, k, v);
        }
    }
    Ok(Value::Map(out))
}

/// A `config.get` key as the parts it goes down by.
fn key_parts(key: &Value, delimiter: &Value) -> Result<Value, FnError> {
    let Some(text) = key.as_str() else {
        return Ok(key.clone());
    };
    let parts: Vec<Value> = match delimiter {
        Value::Nil => py_split(text).into_iter().map(Value::from).collect(),
        Value::String(d) if d.as_bytes().is_empty() => {
            return Err(FnError::Exception("ValueError: empty separator".into()))
        }
        Value::String(_) => text.split(&py_str(delimiter)).map(Value::from).collect(),
        other => {
            return Err(type_error(format_args!(
                "must be str or None, not {}",
                py_type_name(other)
            )))
        }
    };
    Ok(Value::Array(parts))
}

/// What Salt's traversal gives for "not found"; a value equal to it is not found either.
const NOT_FOUND: &str = "_|-";

/// The value at `parts` in `data`, when it is there.
fn traverse(data: &Value, parts: &Value) -> Option<Value> {
    lookup(data, parts, ":")
        .filter(|v| v.as_str() != Some(NOT_FOUND))
        .cloned()
}

/// `config.get` without its default: the first place the key is in, or the key in all of
/// them merged.
fn get_value(
    ctx: &Context,
    key: &Value,
    delimiter: &Value,
    merge: Option<Strategy>,
    omit: Omit,
) -> Result<Option<Value>, FnError> {
    let parts = key_parts(key, delimiter)?;
    let Some(strategy) = merge else {
        for (omitted, data) in places(ctx, omit) {
            if !omitted {
                if let Some(found) = traverse(&data, &parts) {
                    return Ok(Some(found));
                }
            }
        }
        return Ok(traverse(&defaults(), &parts));
    };
    let merge_lists = master_merge_lists();
    let [(_, opts), (_, grains), (_, pillar), (_, master)] = places(ctx, Omit::default());
    let mut data = defaults();
    for more in [master, pillar, grains, opts] {
        data = dictupdate::merge(data, &more, strategy, merge_lists).map_err(type_error)?;
    }
    Ok(traverse(&data, &parts))
}

/// `pillar_merge_lists` of the master's configuration on this host (`/etc/salt/master`, or
/// the file `SALT_MASTER_CONFIG` names), which Salt's `config.get` merges lists by.
fn master_merge_lists() -> bool {
    let file = std::env::var_os("SALT_MASTER_CONFIG")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new("/etc/salt/master").to_path_buf());
    merge_lists_of(&file)
}

fn merge_lists_of(file: &Path) -> bool {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return false;
    };
    brine_protocol::config::load_raw(dir, &name.to_string_lossy())
        .ok()
        .and_then(|raw| raw.values.get("pillar_merge_lists").cloned())
        .is_some_and(|v| brine_protocol::payload::json_truthy(&v))
}

/// Python's `urlparse(uri).scheme in VALID_PROTOS`.
fn valid_fileproto(uri: &Value) -> Result<bool, FnError> {
    let Some(text) = uri.as_str() else {
        // Anything but a string is decoded first: a false value as empty, others fail.
        return if py_truthy(uri) {
            Err(FnError::Exception(format!(
                "AttributeError: '{}' object has no attribute 'decode'",
                py_type_name(uri)
            )))
        } else {
            Ok(false)
        };
    };
    let url: String = text
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
        .collect();
    let mut scheme = String::new();
    let mut rest = url.as_str();
    if let Some(i) = url.find(':') {
        let candidate = &url[..i];
        let starts_with_letter = candidate
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic());
        if starts_with_letter
            && candidate
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            scheme = candidate.to_ascii_lowercase();
            rest = &url[i + 1..];
        }
    }
    if let Some(after) = rest.strip_prefix("//") {
        let netloc = after.split(['/', '?', '#']).next().unwrap_or_default();
        if netloc.contains('[') != netloc.contains(']') {
            return Err(FnError::Exception("ValueError: Invalid IPv6 URL".into()));
        }
    }
    Ok(matches!(
        scheme.as_str(),
        "salt" | "file" | "http" | "https" | "ftp" | "swift" | "s3"
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::testutil::*;
    use super::super::{call, Services};
    use super::*;
    use brine_protocol::payload::map;
    use serde_json::json;

    /// A minion with options, grains and a pillar (with a `master` map) that each hold
    /// `shared` and some keys of their own.
    fn minion() -> Context {
        let mut services = Services::detached();
        services.opts = json!({
            "id": "m1",
            "backup_mode": "",
            "mongo.port": 1234,
            "my_opt": {"a": {"b": 1}, "l": ["x", "y"]},
            "shared": {"from_opts": 1, "both": "opts"},
            "text": "o",
            "nothing": null,
        })
        .as_object()
        .cloned()
        .unwrap();
        let pillar = from_json(&json!({
            "pillar_only": "p",
            "shared": {"from_pillar": 1, "both": "pillar"},
            "deep": {"a": {"c": 8}},
            "listy": ["p1"],
            "nothing": ["p"],
            "master": {
                "mongo.db": "from_master",
                "master_only": {"k": "v"},
                "shared": {"from_master": 1, "both": "master"},
                "listy": ["m1"],
                "text": "m",
            },
        }));
        let mut c = ctx();
        c.grains = Arc::new(from_json(&json!({
            "id": "m1",
            "role": "web",
            "deep": {"a": {"b": 7}, "l": ["x", "y"]},
            "shared": {"from_grains": 1, "both": "grains"},
            "quirk": "_|-",
        })));
        c.pillar = Arc::new(pillar);
        c.services = Arc::new(services);
        c
    }

    async fn run(c: &Context, fun: &str, args: &[Value]) -> Value {
        let r = call(c, fun, args).await;
        r.ret
    }

    fn j(v: serde_json::Value) -> Value {
        from_json(&v)
    }

    #[tokio::test]
    async fn get_searches_opts_grains_pillar_master_then_the_defaults() {
        let c = minion();
        let get = |args: Vec<Value>| {
            let c = c.clone();
            async move { run(&c, "config.get", &args).await }
        };
        assert_eq!(get(vec![s("shared:both")]).await, s("opts"));
        let omit = |keys: &[&str]| {
            kw(&keys
                .iter()
                .map(|k| (*k, Value::Boolean(true)))
                .collect::<Vec<_>>())
        };
        assert_eq!(
            get(vec![s("shared:both"), omit(&["omit_opts"])]).await,
            s("grains")
        );
        assert_eq!(
            get(vec![s("shared:both"), omit(&["omit_opts", "omit_grains"])]).await,
            s("pillar")
        );
        assert_eq!(
            get(vec![
                s("shared:both"),
                omit(&["omit_opts", "omit_grains", "omit_pillar"])
            ])
            .await,
            s("master")
        );
        assert_eq!(
            get(vec![
                s("shared:both"),
                omit(&["omit_opts", "omit_grains", "omit_pillar", "omit_master"])
            ])
            .await,
            s("")
        );
        assert_eq!(get(vec![s("my_opt:l:1")]).await, s("y"));
        assert_eq!(get(vec![s("deep:a:c")]).await, Value::from(8));
        assert_eq!(get(vec![s("master_only:k")]).await, s("v"));
        assert_eq!(get(vec![s("mongo.user")]).await, s(""));
        assert_eq!(get(vec![s("virt:images")]).await, s("/srv/salt-images"));
        assert_eq!(get(vec![s("mongo.port")]).await, Value::from(1234));
        // The grains and the pillar are options too.
        assert_eq!(get(vec![s("grains:role")]).await, s("web"));
        assert_eq!(get(vec![s("pillar:pillar_only")]).await, s("p"));
        // A None option is found (Salt only skips what is missing).
        assert_eq!(get(vec![s("nothing")]).await, Value::Nil);
        // Salt's traversal marker is never found.
        assert_eq!(get(vec![s("quirk"), kw(&[("default", s("d"))])]).await, s("d"));
        assert_eq!(
            get(vec![s("nope"), kw(&[("default", Value::from(5))])]).await,
            Value::from(5)
        );
        assert_eq!(
            get(vec![s("my_opt/a/b"), kw(&[("delimiter", s("/"))])]).await,
            Value::from(1)
        );
        assert_eq!(
            get(vec![s("my_opt a  b"), kw(&[("delimiter", Value::Nil)])]).await,
            Value::from(1)
        );
        assert_eq!(
            get(vec![s("my_opt"), kw(&[("delimiter", s(""))])]).await,
            s("The minion function caused an exception: ValueError: empty separator")
        );
    }

    #[tokio::test]
    async fn get_with_merge_searches_everything_merged() {
        let c = minion();
        let merged = |key: &str, how: &str| {
            let c = c.clone();
            let args = vec![s(key), kw(&[("merge", s(how))])];
            async move { run(&c, "config.get", &args).await }
        };
        assert_eq!(
            merged("shared", "recurse").await,
            j(json!({"from_master": 1, "both": "opts", "from_pillar": 1, "from_grains": 1, "from_opts": 1}))
        );
        assert_eq!(
            merged("shared", "overwrite").await,
            j(json!({"from_opts": 1, "both": "opts"}))
        );
        assert_eq!(
            merged("shared", "bogus").await,
            merged("shared", "recurse").await
        );
        assert_eq!(
            merged("deep", "recurse").await,
            j(json!({"a": {"c": 8, "b": 7}, "l": ["x", "y"]}))
        );
        assert_eq!(merged("listy", "recurse").await, j(json!(["p1"])));
        assert_eq!(
            merged("virt", "recurse").await,
            j(json!({"tunnel": false, "images": "/srv/salt-images"}))
        );
        assert_eq!(merged("nope", "recurse").await, s(""));
        let mut bad = minion();
        bad.pillar = Arc::new(map([("master", s("text"))]));
        assert_eq!(
            run(&bad, "config.get", &[s("x"), kw(&[("merge", s("recurse"))])]).await,
            s("The minion function caused an exception: TypeError: Cannot update using non-dict types in dictupdate.update()")
        );
    }

    #[test]
    fn lists_are_merged_when_the_master_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("master");
        assert!(!merge_lists_of(&file));
        std::fs::write(&file, "pillar_merge_lists: true\n").unwrap();
        assert!(merge_lists_of(&file));
        let a = j(json!({"l": [1, 2], "d": {"x": [1]}}));
        let b = j(json!({"l": [2, 3], "d": {"x": [4]}, "n": 1}));
        assert_eq!(
            dictupdate::merge(a.clone(), &b, Strategy::Recurse, true).unwrap(),
            j(json!({"l": [1, 2, 3], "d": {"x": [1, 4]}, "n": 1}))
        );
        assert_eq!(
            dictupdate::merge(a, &b, Strategy::Overwrite, true).unwrap(),
            j(json!({"l": [2, 3], "d": {"x": [4]}, "n": 1}))
        );
    }

    #[tokio::test]
    async fn option_looks_at_top_level_keys_only() {
        let c = minion();
        assert_eq!(run(&c, "config.option", &[s("mongo.port")]).await, Value::from(1234));
        assert_eq!(run(&c, "config.option", &[s("mongo.db")]).await, s("from_master"));
        assert_eq!(
            run(&c, "config.option", &[s("mongo.db"), kw(&[("omit_master", Value::Boolean(true))])]).await,
            s("salt")
        );
        assert_eq!(
            run(&c, "config.option", &[s("mongo.port"), kw(&[("omit_all", Value::Boolean(true))])]).await,
            Value::from(27017)
        );
        assert_eq!(run(&c, "config.option", &[s("my_opt:a")]).await, s(""));
        assert_eq!(
            run(&c, "config.option", &[s("nope"), kw(&[("default", s("z"))])]).await,
            s("z")
        );
        assert_eq!(
            run(&c, "config.option", &[s("hosts.file")]).await,
            s("/etc/hosts")
        );
        assert_eq!(
            run(&c, "config.option", &[s("mongo.*"), kw(&[("wildcard", Value::Boolean(true))])]).await,
            j(json!({"mongo.db": "from_master", "mongo.port": 1234, "mongo.password": "", "mongo.user": ""}))
        );
        let all = run(
            &c,
            "config.option",
            &[s("*"), kw(&[("wildcard", Value::Boolean(true)), ("omit_all", Value::Boolean(true))])],
        )
        .await;
        assert_eq!(all, defaults());
        assert_eq!(
            run(&c, "config.option", &[s("zz*"), kw(&[("wildcard", Value::Boolean(true))])]).await,
            Value::Map(vec![])
        );
        assert_eq!(
            run(&c, "config.option", &[Value::Array(vec![])]).await,
            s("The minion function caused an exception: TypeError: unhashable type: 'list'")
        );
        // A `master` that is not a dict is searched as Python searches it.
        let mut odd = minion();
        odd.pillar = Arc::new(map([("master", s("abc"))]));
        assert_eq!(
            run(&odd, "config.option", &[s("b")]).await,
            s("The minion function caused an exception: TypeError: string indices must be integers, not 'str'")
        );
        assert_eq!(run(&odd, "config.option", &[s("q")]).await, s(""));
        odd.pillar = Arc::new(map([("master", Value::Nil)]));
        assert_eq!(
            run(&odd, "config.option", &[s("q")]).await,
            s("The minion function caused an exception: TypeError: argument of type 'NoneType' is not iterable")
        );
    }

    #[tokio::test]
    async fn merge_joins_opts_master_and_pillar() {
        let c = minion();
        assert_eq!(
            run(&c, "config.merge", &[s("shared")]).await,
            j(json!({"from_pillar": 1, "both": "opts", "from_master": 1, "from_opts": 1}))
        );
        assert_eq!(run(&c, "config.merge", &[s("listy")]).await, j(json!(["m1", "p1"])));
        assert_eq!(run(&c, "config.merge", &[s("text")]).await, s("o"));
        assert_eq!(
            run(&c, "config.merge", &[s("text"), kw(&[("omit_opts", Value::Boolean(true))])]).await,
            s("m")
        );
        // A None option counts as missing.
        assert_eq!(run(&c, "config.merge", &[s("nothing")]).await, j(json!(["p"])));
        assert_eq!(run(&c, "config.merge", &[s("role")]).await, s(""), "no grains");
        assert_eq!(run(&c, "config.merge", &[s("test.foo")]).await, s("unconfigured"));
        assert_eq!(
            run(&c, "config.merge", &[s("nope"), kw(&[("default", Value::Nil)])]).await,
            Value::Nil
        );
    }

    #[tokio::test]
    async fn dot_vals_items_and_the_small_ones() {
        let c = minion();
        assert_eq!(
            run(&c, "config.dot_vals", &[s("mongo")]).await,
            j(json!({"mongo.db": "from_master", "mongo.port": 1234}))
        );
        assert_eq!(run(&c, "config.dot_vals", &[s("nope")]).await, Value::Map(vec![]));
        let items = run(&c, "config.items", &[]).await;
        assert_eq!(get(&items, "grains"), Some(&*c.grains));
        assert_eq!(get(&items, "pillar"), Some(&*c.pillar));
        assert_eq!(get(&items, "mongo.port"), Some(&Value::from(1234)));
        assert_eq!(run(&c, "config.backup_mode", &[]).await, s(""));
        assert_eq!(run(&c, "config.backup_mode", &[s("minion")]).await, s("minion"));
        assert_eq!(run(&c, "config.manage_mode", &[Value::from(644)]).await, s("0644"));
        assert_eq!(run(&c, "config.manage_mode", &[s("0o755")]).await, s("0755"));
        assert_eq!(run(&c, "config.manage_mode", &[Value::Nil]).await, Value::Nil);
        for (uri, ok) in [
            ("salt://a/b", true),
            ("file:///etc/x", true),
            ("HTTPS://x", true),
            ("  s3://bucket/k", true),
            ("ht\ttp://x", true),
            ("git+ssh://x", false),
            ("/etc/x", false),
            ("1http://x", false),
            ("", false),
        ] {
            assert_eq!(valid_fileproto(&s(uri)), Ok(ok), "{uri}");
        }
        assert_eq!(valid_fileproto(&Value::from(0)), Ok(false));
        assert_eq!(
            valid_fileproto(&Value::from(5)),
            Err(FnError::Exception(
                "AttributeError: 'int' object has no attribute 'decode'".into()
            ))
        );
        assert_eq!(
            valid_fileproto(&s("http://[::1/x")),
            Err(FnError::Exception("ValueError: Invalid IPv6 URL".into()))
        );
    }

    /// The same calls through `salt-call --local` of Salt 3007 and through Brine, on one
    /// minion configuration (options, grains) and the same pillar (with a `master` map).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_calls_return_what_salt_3007_returns() {
        use crate::functions::network::tests::{brine_in, SaltCall};
        let Some(salt) = SaltCall::new() else {
            return;
        };
        let dir = salt.config_dir().to_path_buf();
        let pillar = json!({
            "pillar_only": "p",
            "shared": {"from_pillar": 1, "both": "pillar"},
            "deep": {"a": {"c": 8}},
            "listy": ["p1"],
            "master": {
                "mongo.db": "from_master",
                "master_only": {"k": "v"},
                "shared": {"from_master": 1, "both": "master"},
                "listy": ["m1"],
            },
        });
        std::fs::create_dir(dir.join("pillar")).unwrap();
        std::fs::write(dir.join("pillar/top.sls"), "base:\n  '*':\n    - data\n").unwrap();
        std::fs::write(dir.join("pillar/data.sls"), pillar.to_string()).unwrap();
        let extra = json!({
            "pillar_roots": {"base": [dir.join("pillar")]},
            "mongo.port": 1234,
            "my_opt": {"a": {"b": 1}, "l": ["x", "y"]},
            "shared": {"from_opts": 1, "both": "opts"},
            "grains": {
                "role": "web",
                "deep": {"a": {"b": 7}, "l": ["x", "y"]},
                "shared": {"from_grains": 1, "both": "grains"},
            },
        });
        let mut config = std::fs::read_to_string(dir.join("minion")).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            config.push_str(&format!("{k}: {v}\n"));
        }
        std::fs::write(dir.join("minion"), config).unwrap();

        let cfg = brine_protocol::config::MinionConfig::load(&dir).unwrap();
        let services = Services::from_config(&cfg, Some(&dir), None);
        let c = Context {
            id: cfg.id.clone(),
            grains: services.grains(),
            pillar: Arc::new(from_json(&pillar)),
            services: Arc::new(services),
            ..ctx()
        };
        let case = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut cases: Vec<Vec<String>> = [
            "id", "master", "master_port", "pki_dir", "log_file", "file_client", "hash_type",
            "state_top", "renderer", "failhard", "test", "saltenv",
        ]
        .iter()
        .map(|k| case(&["config.get", k]))
        .collect();
        cases.extend([
            case(&["config.get", "my_opt:a:b"]),
            case(&["config.get", "my_opt:l:1"]),
            case(&["config.get", "my_opt:a:nope", "default=dd"]),
            case(&["config.get", "my_opt/a/b", "delimiter=/"]),
            case(&["config.get", "role"]),
            case(&["config.get", "grains:role"]),
            case(&["config.get", "deep:a:c"]),
            case(&["config.get", "pillar_only"]),
            case(&["config.get", "master_only:k"]),
            case(&["config.get", "mongo.db"]),
            case(&["config.get", "mongo.port"]),
            case(&["config.get", "virt:images"]),
            case(&["config.get", "solr.dih.import_options:commit"]),
            case(&["config.get", "shared:both"]),
            case(&["config.get", "shared:both", "omit_opts=True"]),
            case(&["config.get", "shared:both", "omit_opts=True", "omit_grains=True"]),
            case(&["config.get", "shared:both", "omit_opts=True", "omit_grains=True", "omit_pillar=True"]),
            case(&["config.get", "shared:both", "omit_opts=True", "omit_grains=True", "omit_pillar=True", "omit_master=True"]),
            case(&["config.get", "nope"]),
            case(&["config.get", "nope", "default=x"]),
            case(&["config.get", "shared", "merge=recurse"]),
            case(&["config.get", "shared", "merge=overwrite"]),
            case(&["config.get", "deep", "merge=recurse"]),
            case(&["config.get", "listy", "merge=recurse"]),
            case(&["config.get", "virt", "merge=recurse"]),
            case(&["config.get", "nope", "merge=recurse", "default=q"]),
            case(&["config.option", "mongo.port"]),
            case(&["config.option", "mongo.db"]),
            case(&["config.option", "mongo.db", "omit_master=True"]),
            case(&["config.option", "mongo.port", "omit_all=True"]),
            case(&["config.option", "my_opt:a"]),
            case(&["config.option", "role"]),
            case(&["config.option", "hosts.file"]),
            case(&["config.option", "nope", "default=z"]),
            case(&["config.option", "mongo.*", "wildcard=True"]),
            case(&["config.option", "*", "wildcard=True", "omit_all=True"]),
            case(&["config.option", "zz*", "wildcard=True", "default=none here"]),
            case(&["config.merge", "shared"]),
            case(&["config.merge", "shared", "omit_opts=True"]),
            case(&["config.merge", "listy"]),
            case(&["config.merge", "pillar_only"]),
            case(&["config.merge", "mongo.port"]),
            case(&["config.merge", "nope", "default=d"]),
            case(&["config.dot_vals", "mongo"]),
            case(&["config.backup_mode"]),
            case(&["config.backup_mode", "minion"]),
            case(&["config.manage_mode", "644"]),
            case(&["config.manage_mode"]),
            case(&["config.valid_fileproto", "salt://a/b"]),
            case(&["config.valid_fileproto", "git+ssh://x"]),
            case(&["config.valid_fileproto", "5"]),
        ]);
        let want = tokio::task::block_in_place(|| salt.run_all(&cases));
        let mut failures = Vec::new();
        for (case, want) in cases.iter().zip(want) {
            let args: Vec<&str> = case[1..].iter().map(String::as_str).collect();
            let got = brine_in(&c, &case[0], &args).await;
            if got != want {
                failures.push(format!("{case:?}\n  salt:  {want:?}\n  brine: {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
