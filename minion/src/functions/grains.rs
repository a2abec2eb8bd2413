//! The `grains` execution module: read the minion's grains, and change the static grains of
//! `<config dir>/grains` as Salt's `salt/modules/grains.py` does (`setval`, `setvals`, `append`,
//! `remove`, `delkey`, `delval`, `set`). A change is written to the file with PyYAML's
//! `safe_dump(default_flow_style=False)`, then the minion collects its grains again and fetches
//! its pillar with them, so the next job (and the master's targeting) sees the new values.
//!
//! Salt's functions work on the job's own copy of the grains and change it in place on their
//! way to the value they persist; [`lookup_mut`] gives the same places here, so nested keys
//! through dicts and lists end up as Salt writes them.

use std::path::Path;

use rmpv::Value;

use super::args::{is_true, py_int, py_str, yamlify_arg, Bound, Signature, py_type_name};
use super::CallState;
use super::{Context, FnError, Spec};
use brine_protocol::payload::{from_json, map, py_truthy, to_json};
use brine_protocol::pyeq::py_eq;

/// Salt's default target delimiter.
pub const DEFAULT_DELIMITER: &str = ":";

/// The functions of the `grains` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Get,
    /// `fetch = get` in Salt's module.
    Fetch,
    Item,
    Items,
    Ls,
    HasValue,
    Equals,
    FilterBy,
    Setval,
    Setvals,
    Append,
    Remove,
    Delkey,
    Delval,
    Set,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Get,
        Fun::Fetch,
        Fun::Item,
        Fun::Items,
        Fun::Ls,
        Fun::HasValue,
        Fun::Equals,
        Fun::FilterBy,
        Fun::Setval,
        Fun::Setvals,
        Fun::Append,
        Fun::Remove,
        Fun::Delkey,
        Fun::Delval,
        Fun::Set,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc, out) = match self {
            Fun::Get | Fun::Fetch => (
                if self == Fun::Fetch {
                    "grains.fetch"
                } else {
                    "grains.get"
                },
                "get",
                Signature::new(&["key", "default", "delimiter", "ordered"], 1, false, false),
                "
    Return one grain; nested values are reached with the delimiter (default ':'),
    e.g. 'pkg:apache', and list items by index. Returns `default` (default '')
    when the key does not exist.

    CLI Example:

        salt '*' grains.get pkg:apache
    ",
                None,
            ),
            Fun::Item => (
                "grains.item",
                "item",
                Signature::new(&[], 0, true, true),
                "
    Return the named grains as a dict. Keys may be nested with ':' (or the
    `delimiter` kwarg); `default` is used for missing keys and `sanitize=True`
    masks host names.

    CLI Example:

        salt '*' grains.item os osrelease
    ",
                Some("nested"),
            ),
            Fun::Items => (
                "grains.items",
                "items",
                Signature::new(&["sanitize"], 0, false, false),
                "
    Return all of the minion's grains. `sanitize=True` masks host names.

    CLI Example:

        salt '*' grains.items
    ",
                Some("nested"),
            ),
            Fun::Ls => (
                "grains.ls",
                "ls",
                Signature::NONE,
                "
    Return the sorted list of grain names.

    CLI Example:

        salt '*' grains.ls
    ",
                None,
            ),
            Fun::HasValue => (
                "grains.has_value",
                "has_value",
                Signature::new(&["key"], 1, false, false),
                "
    Determine whether a key exists in the grains; nested keys are reached with
    ':', e.g. 'pkg:apache'.

    CLI Example:

        salt '*' grains.has_value pkg:apache
    ",
                None,
            ),
            Fun::Equals => (
                "grains.equals",
                "equals",
                Signature::new(&["key", "value"], 2, false, false),
                "
    Return True when the grain (nested with ':') has the given value, compared
    as text; False otherwise.

    CLI Example:

        salt '*' grains.equals fqdn <expected_fqdn>
        salt '*' grains.equals systemd:version 219
    ",
                None,
            ),
            Fun::FilterBy => (
                "grains.filter_by",
                "filter_by",
                Signature::new(
                    &["lookup_dict", "grain", "merge", "default", "base"],
                    1,
                    false,
                    false,
                ),
                "
    Look up the value of a grain (default 'os_family') in lookup_dict, whose keys
    may be glob patterns, and return the matching value. `default` names the key
    used when nothing matches (default 'default'); `base` names a key whose dict
    the match is merged over; `merge` is a dict merged over the result.

    CLI Example:

        salt '*' grains.filter_by '{Debian: Debheads rule, RedHat: I love my hat}'
        salt '*' grains.filter_by '{salt*: got some salt, default: salt is not here}' id
    ",
                None,
            ),
            Fun::Setval => (
                "grains.setval",
                "setval",
                Signature::new(
                    &["key", "val", "destructive", "refresh_pillar"],
                    2,
                    false,
                    false,
                ),
                "
    Set a grains value in the grains config file (<config dir>/grains).

    key
        The grain key to be set.

    val
        The value to set the grain key to.

    destructive
        If an operation results in a key being removed, delete the key, too.
        Defaults to False.

    refresh_pillar
        Whether pillar will be refreshed. Defaults to True.

    CLI Example:

        salt '*' grains.setval key val
        salt '*' grains.setval key \"{'sub-key': 'val', 'sub-key2': 'val2'}\"
    ",
                Some("nested"),
            ),
            Fun::Setvals => (
                "grains.setvals",
                "setvals",
                Signature::new(
                    &["grains", "destructive", "refresh_pillar"],
                    1,
                    false,
                    false,
                ),
                "
    Set new grains values in the grains config file (<config dir>/grains).

    destructive
        If an operation results in a key being removed, delete the key, too.
        Defaults to False.

    refresh_pillar
        Whether pillar will be refreshed. Defaults to True.

    CLI Example:

        salt '*' grains.setvals \"{'key1': 'val1', 'key2': 'val2'}\"
    ",
                None,
            ),
            Fun::Append => (
                "grains.append",
                "append",
                Signature::new(&["key", "val", "convert", "delimiter"], 2, false, false),
                "
    Append a value to a list in the grains config file. If the grain doesn't
    exist, the grain key is added and the value is appended to the new grain as
    a list item.

    key
        The grain key to be appended to; nested with the delimiter.

    val
        The value to append to the grain key (a list appends its items).

    convert
        If True, convert non-list contents into a list. If False and the grain
        contains non-list contents, an error is given. Defaults to False.

    delimiter
        The delimiter of nested keys, instead of the default ':'.

    CLI Example:

        salt '*' grains.append key val
    ",
                None,
            ),
            Fun::Remove => (
                "grains.remove",
                "remove",
                Signature::new(&["key", "val", "delimiter"], 2, false, false),
                "
    Remove a value from a list in the grains config file.

    key
        The grain key to remove from; nested with the delimiter.

    val
        The value to remove.

    delimiter
        The delimiter of nested keys, instead of the default ':'.

    CLI Example:

        salt '*' grains.remove key val
    ",
                None,
            ),
            Fun::Delkey => (
                "grains.delkey",
                "delkey",
                Signature::new(&["key", "force"], 1, false, false),
                "
    Remove a grain completely from the grain system: the grain key and value.

    key
        The grain key to delete.

    force
        Force remove the grain even when it is a mapped value. Defaults to False.

    CLI Example:

        salt '*' grains.delkey key
    ",
                None,
            ),
            Fun::Delval => (
                "grains.delval",
                "delval",
                Signature::new(&["key", "destructive", "force"], 1, false, false),
                "
    Delete a grain value from the grains config file: the value becomes None.
    To remove the grain completely, run grains.delkey or pass destructive=True.

    key
        The grain key from which to delete the value.

    destructive
        Delete the key, too. Defaults to False.

    force
        Force remove the grain even when it is a mapped value. Defaults to False.

    CLI Example:

        salt '*' grains.delval key
    ",
                None,
            ),
            Fun::Set => (
                "grains.set",
                "set",
                Signature::new(
                    &["key", "val", "force", "destructive", "delimiter"],
                    1,
                    false,
                    false,
                ),
                "
    Set a key to an arbitrary value. It is used like setval but works with
    nested keys.

    This function is conservative: it only overwrites an entry when neither its
    value nor the given one is a list or a dict; `force=True` overwrites in all
    cases.

    force
        Force writing over an existing entry if given or existing values are
        list or dict. Defaults to False.

    destructive
        If an operation results in a key being removed, delete the key, too.
        Defaults to False.

    delimiter
        The delimiter of nested keys, instead of the default ':'.

    CLI Example:

        salt '*' grains.set 'apps:myApp:port' 2209
        salt '*' grains.set 'apps:myApp' '{port: 2209}'
    ",
                None,
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out,
        }
    }

    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let grains = ctx.grains.as_ref();
        let nil = Value::Nil;
        let arg = |name: &str| b.get(name).unwrap_or(&nil);
        let delimiter = || -> Result<String, FnError> {
            match b.get("delimiter") {
                None => Ok(DEFAULT_DELIMITER.to_string()),
                Some(Value::String(s)) if s.as_str() == Some("") => {
                    Err(FnError::Exception("ValueError: empty separator".into()))
                }
                Some(v @ Value::String(_)) => Ok(py_str(v)),
                Some(Value::Nil) => Err(FnError::InvalidArgs(
                    "'in <string>' requires string as left operand, not NoneType".into(),
                )),
                Some(other) => Err(FnError::InvalidArgs(format!(
                    "must be str or None, not {}",
                    py_type_name(other)
                ))),
            }
        };
        Ok(match self {
            Fun::Get | Fun::Fetch => {
                let default = b.get("default").cloned().unwrap_or_else(|| Value::from(""));
                traverse(grains, arg("key"), default, &delimiter()?)
            }
            Fun::Item => {
                let default = b
                    .kwarg("default")
                    .cloned()
                    .unwrap_or_else(|| Value::from(""));
                let delimiter = b
                    .kwarg("delimiter")
                    .map_or_else(|| DEFAULT_DELIMITER.to_string(), py_str);
                if delimiter.is_empty() {
                    return Err(FnError::Exception("ValueError: empty separator".into()));
                }
                let mut ret = item_map(grains, &b.varargs, &default, &delimiter);
                if is_true(b.kwarg("sanitize")) {
                    sanitize(&mut ret);
                }
                ret
            }
            Fun::Items => {
                let mut ret = match grains {
                    Value::Map(_) => grains.clone(),
                    _ => Value::Map(Vec::new()),
                };
                if is_true(b.get("sanitize")) {
                    sanitize(&mut ret);
                }
                ret
            }
            Fun::Ls => {
                let mut keys: Vec<Value> = grains
                    .as_map()
                    .map(|m| m.iter().map(|(k, _)| k.clone()).collect())
                    .unwrap_or_default();
                keys.sort_by_key(py_str);
                Value::Array(keys)
            }
            Fun::HasValue => {
                Value::Boolean(lookup(grains, arg("key"), DEFAULT_DELIMITER).is_some())
            }
            Fun::Equals => {
                let current = traverse(grains, arg("key"), Value::from(""), DEFAULT_DELIMITER);
                Value::Boolean(py_str(arg("value")) == py_str(&current))
            }
            Fun::FilterBy => filter_by(grains, b)?,
            Fun::Setvals => {
                let Value::Map(new) = arg("grains") else {
                    return Err(FnError::Exception(
                        "salt.exceptions.SaltException: setvals grains must be a dictionary."
                            .into(),
                    ));
                };
                setvals(
                    ctx,
                    new.clone(),
                    is_true_itself(b.get("destructive")),
                    refresh_pillar(b),
                )
                .await?
            }
            Fun::Setval => {
                let new = vec![(arg("key").clone(), arg("val").clone())];
                setvals(
                    ctx,
                    new,
                    is_true_itself(b.get("destructive")),
                    refresh_pillar(b),
                )
                .await?
            }
            Fun::Append => {
                let convert = py_truthy(arg("convert"));
                append(ctx, arg("key"), arg("val").clone(), convert, &delimiter()?).await?
            }
            Fun::Remove => remove(ctx, arg("key"), arg("val"), &delimiter()?).await?,
            Fun::Delkey => {
                let how = SetHow {
                    force: arg("force"),
                    destructive: &Value::Boolean(true),
                    delimiter: DEFAULT_DELIMITER,
                };
                set(ctx, arg("key"), Value::Nil, how).await?
            }
            Fun::Delval => {
                let how = SetHow {
                    force: arg("force"),
                    destructive: arg("destructive"),
                    delimiter: DEFAULT_DELIMITER,
                };
                set(ctx, arg("key"), Value::Nil, how).await?
            }
            Fun::Set => {
                let val = b.get("val").cloned().unwrap_or_else(|| Value::from(""));
                let delimiter = delimiter()?;
                let how = SetHow {
                    force: arg("force"),
                    destructive: arg("destructive"),
                    delimiter: &delimiter,
                };
                set(ctx, arg("key"), val, how).await?
            }
        })
    }
}

/// Python's `x is True`: Salt tests `destructive` so in places (only the boolean counts).
fn is_true_itself(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Boolean(true)))
}

/// `refresh_pillar` (default True), as `saltutil.refresh_grains` tests it.
fn refresh_pillar(b: &Bound) -> bool {
    b.get("refresh_pillar").is_none_or(py_truthy)
}

/// `grains.filter_by`: Salt's `salt.utils.data.filter_by` over the grains (the one the
/// templates use).
fn filter_by(grains: &Value, b: &Bound) -> Result<Value, FnError> {
    let grain = b
        .get("grain")
        .map_or_else(|| "os_family".to_string(), py_str);
    filter_by_in(grains, &grain, b)
}

/// Salt's `filter_by` over `data` (grains or pillar) with the key `lookup` in it, the other
/// arguments (`lookup_dict`, `default`, `merge`, `base`) from the call.
pub(crate) fn filter_by_in(data: &Value, lookup: &str, b: &Bound) -> Result<Value, FnError> {
    let lookup_dict = b.get("lookup_dict").unwrap_or(&Value::Nil);
    if !lookup_dict.is_map() {
        return Err(FnError::InvalidArgs(format!(
            "filter_by lookup_dict must be a dictionary, not {}",
            py_type_name(lookup_dict)
        )));
    }
    let default = b
        .get("default")
        .map_or_else(|| "default".to_string(), py_str);
    let merge = b.get("merge").map(to_json);
    let base = b.get("base").map(to_json);
    brine_render::filter_by_json(
        &to_json(lookup_dict),
        lookup,
        &to_json(data),
        merge.as_ref(),
        &default,
        base.as_ref(),
    )
    .map(|v| from_json(&v))
    .map_err(|e| FnError::Exception(format!("salt.exceptions.SaltException: {e}")))
}

/// Where Salt tests `delimiter in key`: a string key's text; `None` for a list or a dict (Python
/// looks the delimiter up among their items and finds none); Python's `TypeError` for any other
/// key.
fn key_text(key: &Value) -> Result<Option<String>, FnError> {
    match key {
        Value::String(s) => Ok(Some(String::from_utf8_lossy(s.as_bytes()).into_owned())),
        Value::Array(_) | Value::Map(_) => Ok(None),
        other => Err(FnError::InvalidArgs(format!(
            "argument of type '{}' is not iterable",
            py_type_name(other)
        ))),
    }
}

/// Python's dict `d[key] = val`: an existing key keeps its place, a new one goes last.
fn map_set(entries: &mut Vec<(Value, Value)>, key: Value, val: Value) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = val,
        None => entries.push((key, val)),
    }
}

/// Salt's `setvals`: `new` written over the grains file (a key set to None with `destructive`
/// is removed from it), then the grains collected again and, with `refresh_pillar`, the pillar
/// fetched again with them. Returns `new`, or Salt's text when the file cannot be loaded.
async fn setvals(
    ctx: &Context,
    new: Vec<(Value, Value)>,
    destructive: bool,
    refresh_pillar: bool,
) -> Result<Value, FnError> {
    for (key, _) in &new {
        super::args::hashable(key)?;
    }
    let services = ctx.services.clone();
    let changes = new.clone();
    let updated = tokio::task::spawn_blocking(move || {
        services.update_grains(|file| write_grains_file(file, &changes, destructive))
    })
    .await
    .map_err(|e| FnError::Exception(format!("the grains file was not changed: {e}")))?;
    match updated {
        Ok(((), grains)) => {
            ctx.services
                .grains_changed(&ctx.id, &grains, refresh_pillar)
                .await;
            Ok(Value::Map(new))
        }
        Err(FileRefused::Unreadable(text)) => Ok(Value::from(text)),
        Err(FileRefused::Failed(e)) => Err(e),
    }
}

/// Why the grains file was not written.
enum FileRefused {
    /// Salt's answer (a return, not an error) for a file it cannot load.
    Unreadable(String),
    Failed(FnError),
}

/// Read the grains file (a file that holds no mapping counts as empty), apply `new` and write
/// it back as Salt's `safe_dump(default_flow_style=False)` writes it. A write that fails is
/// logged, as Salt logs it, and the change still counts.
fn write_grains_file(
    file: Option<&Path>,
    new: &[(Value, Value)],
    destructive: bool,
) -> Result<(), FileRefused> {
    let Some(path) = file else {
        return Err(FileRefused::Failed(FnError::Execution(
            "the grains file is <config dir>/grains, and this minion has no configuration directory"
                .into(),
        )));
    };
    let mut grains: Vec<(Value, Value)> = Vec::new();
    if path.is_file() {
        let bytes = std::fs::read(path).map_err(|e| {
            FileRefused::Failed(FnError::Exception(format!(
                "{}: [Errno {}] {}: '{}'",
                os_error_class(&e),
                e.raw_os_error().unwrap_or(0),
                os_error_message(&e),
                path.display()
            )))
        })?;
        let unreadable = |e: String| {
            FileRefused::Unreadable(format!("Unable to read existing grains file: {e}"))
        };
        let text = String::from_utf8(bytes).map_err(|e| unreadable(e.to_string()))?;
        if let Value::Map(entries) =
            from_json(&brine_protocol::yaml::load::load(&text).map_err(unreadable)?)
        {
            grains = entries;
        }
    }
    for (key, val) in new {
        if val.is_nil() && destructive {
            grains.retain(|(k, _)| k != key);
        } else {
            map_set(&mut grains, key.clone(), val.clone());
        }
    }
    let text = brine_protocol::yaml::safe_dump(
        &to_json(&Value::Map(grains)),
        brine_protocol::yaml::Style::Block(2),
    );
    if let Err(e) = std::fs::write(path, text) {
        tracing::error!(
            "Unable to write to grains file at {}. Check permissions. ({e})",
            path.display()
        );
    }
    Ok(())
}

/// Python's exception class for an OS error.
fn os_error_class(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => "PermissionError",
        std::io::ErrorKind::NotFound => "FileNotFoundError",
        std::io::ErrorKind::IsADirectory => "IsADirectoryError",
        _ => "OSError",
    }
}

/// An OS error's message without Rust's ` (os error N)` suffix, as Python's `strerror`.
fn os_error_message(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Salt's `setval` from the functions that build the value first: `{key: val}` set with
/// `destructive`, the pillar refreshed.
async fn setval(
    ctx: &Context,
    key: Value,
    val: Value,
    destructive: bool,
) -> Result<Value, FnError> {
    setvals(ctx, vec![(key, val)], destructive, true).await
}

/// After changing the value at a nested `key`, Salt walks back up: each parent that is a dict
/// (in the job's grains, or `missing` when there is none) takes the changed child, and the
/// top-level key gets the outermost value. Returns that key and value.
fn up_to_top(
    work: &mut Value,
    key: &Value,
    mut value: Value,
    delimiter: &str,
    missing: &Value,
) -> Result<(Value, Value), FnError> {
    let Some(mut key) = key_text(key)? else {
        return Ok((key.clone(), value));
    };
    while let Some((parent, rest)) = key.rsplit_once(delimiter) {
        let (parent, rest) = (parent.to_string(), Value::from(rest));
        let mut fresh = missing.clone();
        let slot = lookup_mut(work, &Value::from(parent.as_str()), delimiter).unwrap_or(&mut fresh);
        if let Value::Map(entries) = slot {
            map_set(entries, rest, value);
        }
        value = slot.clone();
        key = parent;
    }
    Ok((Value::from(key), value))
}

/// Salt's `grains.append`.
async fn append(
    ctx: &Context,
    key: &Value,
    val: Value,
    convert: bool,
    delimiter: &str,
) -> Result<Value, FnError> {
    let mut work = (*ctx.grains).clone();
    let found = lookup(&work, key, delimiter).cloned();
    // Salt appends to the job's own list in place; a converted or new list is a new one.
    let mut in_place = matches!(found, Some(Value::Array(_)));
    let mut grains = found.unwrap_or_else(|| Value::Array(Vec::new()));
    if convert && !grains.is_array() {
        in_place = false;
        grains = match grains {
            Value::Nil => Value::Array(Vec::new()),
            other => Value::Array(vec![other]),
        };
    }
    let Value::Array(items) = &mut grains else {
        return Ok(Value::from(format!(
            "The key {} is not a valid list",
            py_str(key)
        )));
    };
    if items.iter().any(|item| py_eq(item, &val)) {
        return Ok(Value::from(format!(
            "The val {} was already in the list {}",
            py_str(&val),
            py_str(key)
        )));
    }
    match val {
        Value::Array(more) => items.extend(more),
        one => items.push(one),
    }
    if in_place {
        if let Some(slot) = lookup_mut(&mut work, key, delimiter) {
            *slot = grains.clone();
        }
    }
    let (top, value) = up_to_top(&mut work, key, grains, delimiter, &Value::Map(Vec::new()))?;
    setval(ctx, top, value, false).await
}

/// Salt's `grains.remove`.
async fn remove(
    ctx: &Context,
    key: &Value,
    val: &Value,
    delimiter: &str,
) -> Result<Value, FnError> {
    let mut work = (*ctx.grains).clone();
    let found = lookup(&work, key, delimiter).cloned();
    let in_place = found.is_some();
    let mut grains = found.unwrap_or_else(|| Value::Array(Vec::new()));
    let Value::Array(items) = &mut grains else {
        return Ok(Value::from(format!(
            "The key {} is not a valid list",
            py_str(key)
        )));
    };
    let Some(at) = items.iter().position(|item| py_eq(item, val)) else {
        return Ok(Value::from(format!(
            "The val {} was not in the list {}",
            py_str(val),
            py_str(key)
        )));
    };
    items.remove(at);
    if in_place {
        if let Some(slot) = lookup_mut(&mut work, key, delimiter) {
            *slot = grains.clone();
        }
    }
    let (top, value) = up_to_top(&mut work, key, grains, delimiter, &Value::Nil)?;
    setval(ctx, top, value, false).await
}

/// The options of `grains.set` (and `delval`/`delkey`), as given: Salt tests them for
/// truth in some places and for being `True` itself in others.
struct SetHow<'a> {
    force: &'a Value,
    destructive: &'a Value,
    delimiter: &'a str,
}

/// Salt's `grains.set`: `{"comment", "changes", "result"}`.
async fn set(ctx: &Context, key: &Value, val: Value, how: SetHow<'_>) -> Result<Value, FnError> {
    let outcome = |comment: String, changes: Value, result: bool| {
        map([
            ("comment", Value::from(comment)),
            ("changes", changes),
            ("result", Value::Boolean(result)),
        ])
    };
    let refused = |comment: String| outcome(comment, Value::Map(Vec::new()), false);
    let complex = |v: &Value| matches!(v, Value::Array(_) | Value::Map(_));
    let force = py_truthy(how.force);
    let destructive = py_truthy(how.destructive);
    let mut work = (*ctx.grains).clone();
    let existing = lookup(&work, key, how.delimiter);
    if let Some(current) = existing {
        if py_eq(current, &val) && (!val.is_nil() || !is_true_itself(Some(how.destructive))) {
            return Ok(outcome(
                "Grain is already set".into(),
                Value::Map(Vec::new()),
                true,
            ));
        }
    }
    // Salt's "not there" marker is not None either: only an existing None skips the checks.
    if !matches!(existing, Some(Value::Nil)) && !force {
        if existing.is_some_and(complex) {
            return Ok(refused(format!(
                "The key '{}' exists but is a dict or a list. Use 'force=True' to overwrite.",
                py_str(key)
            )));
        }
        if complex(&val) && existing.is_some() {
            return Ok(refused(format!(
                "The key '{}' exists and the given value is a dict or a list. Use 'force=True' to overwrite.",
                py_str(key)
            )));
        }
    }
    let mut value = val;
    let mut top = key.clone();
    if let Some(mut text) = key_text(key)? {
        while let Some((parent, rest)) = text.rsplit_once(how.delimiter) {
            let (parent, rest) = (parent.to_string(), Value::from(rest));
            let mut fresh = Value::Map(Vec::new());
            let slot = lookup_mut(&mut work, &Value::from(parent.as_str()), how.delimiter)
                .unwrap_or(&mut fresh);
            let replaced = match &mut *slot {
                Value::Map(entries) => {
                    if value.is_nil() && destructive {
                        entries.retain(|(k, _)| *k != rest);
                    } else {
                        map_set(entries, rest, value);
                    }
                    None
                }
                Value::Array(items) => {
                    let mut updated = false;
                    for item in items.iter_mut() {
                        if py_eq(item, &rest) {
                            *item = Value::Map(vec![(rest.clone(), value.clone())]);
                            updated = true;
                        } else if let Value::Map(entries) = item {
                            if entries.iter().any(|(k, _)| *k == rest) {
                                map_set(entries, rest.clone(), value.clone());
                                updated = true;
                            }
                        }
                    }
                    if !updated {
                        items.push(Value::Map(vec![(rest, value)]));
                    }
                    None
                }
                other if force || py_eq(other, &rest) => Some(Value::Map(vec![(rest, value)])),
                other => {
                    return Ok(refused(format!(
                        "The key '{parent}' value is '{}', which is different from the provided key '{}'. Use 'force=True' to overwrite.",
                        py_str(other),
                        py_str(&rest)
                    )));
                }
            };
            value = replaced.unwrap_or_else(|| slot.clone());
            text = parent;
        }
        top = Value::from(text);
    }
    let set = setval(ctx, top, value, is_true_itself(Some(how.destructive))).await?;
    Ok(match set {
        changes @ Value::Map(_) => outcome(String::new(), changes, true),
        text => refused(py_str(&text)),
    })
}

/// `grains.item`/`pillar.item`: each key (nested with `delimiter`) mapped to its value, or
/// `default`; a key given twice appears once.
pub(crate) fn item_map(data: &Value, keys: &[Value], default: &Value, delimiter: &str) -> Value {
    let mut out: Vec<(Value, Value)> = Vec::new();
    for key in keys {
        let val = traverse(data, key, default.clone(), delimiter);
        brine_protocol::payload::upsert(&mut out, key.clone(), val);
    }
    Value::Map(out)
}

/// `grains.items sanitize=True`: hide names that identify the host.
fn sanitize(ret: &mut Value) {
    let Value::Map(entries) = ret else { return };
    for (k, v) in entries.iter_mut() {
        let replacement = match k.as_str() {
            Some("domain") => Value::from("DOMAINNAME"),
            Some("fqdn" | "id") => Value::from("MINION.DOMAINNAME"),
            Some("host" | "localhost" | "nodename") => Value::from("MINION"),
            Some("serialnumber") => {
                let s = py_str(v);
                let chars: Vec<char> = s.chars().collect();
                let keep = chars.len() * 3 / 4;
                let mut masked: String = chars[..keep].iter().collect();
                masked.push_str(&"X".repeat(chars.len() - keep));
                Value::from(masked)
            }
            _ => continue,
        };
        *v = replacement;
    }
}

/// One step of `salt.utils.data.traverse_dict_and_list` from a list or a dict.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// The item at this position of a list.
    Item(usize),
    /// The value of entry `.1` of the dict that is item `.0` of a list.
    Embedded(usize, usize),
    /// The value of the dict entry at this position.
    Entry(usize),
}

fn entry_pos(entries: &[(Value, Value)], key: &Value) -> Option<usize> {
    entries.iter().position(|(k, _)| k == key)
}

/// Where one part of a key leads from `ptr`, as Salt's traversal goes: in a list, a dict item
/// holding the key (an integer key, then, by index); in a dict, the key, else the key
/// YAML-loaded ("1" -> 1).
fn step(ptr: &Value, each: &Value) -> Option<Step> {
    match ptr {
        Value::Array(items) => {
            let embedded = |key: &Value| {
                items.iter().enumerate().find_map(|(i, item)| {
                    item.as_map()
                        .and_then(|m| entry_pos(m, key))
                        .map(|j| Step::Embedded(i, j))
                })
            };
            match py_int(each) {
                Err(_) => embedded(each),
                Ok(idx) => embedded(&Value::from(idx)).or_else(|| {
                    let len = i64::try_from(items.len()).ok()?;
                    let pos = usize::try_from(if idx < 0 { idx + len } else { idx }).ok()?;
                    (pos < items.len()).then_some(Step::Item(pos))
                }),
            }
        }
        Value::Map(entries) => entry_pos(entries, each)
            .or_else(|| {
                let Value::String(_) = each else { return None };
                let loaded = yamlify_arg(&py_str(each));
                (&loaded != each)
                    .then(|| entry_pos(entries, &loaded))
                    .flatten()
            })
            .map(Step::Entry),
        _ => None,
    }
}

fn follow(ptr: &Value, step: Step) -> Option<&Value> {
    match (ptr, step) {
        (Value::Array(items), Step::Item(i)) => items.get(i),
        (Value::Array(items), Step::Embedded(i, j)) => {
            items.get(i)?.as_map()?.get(j).map(|(_, v)| v)
        }
        (Value::Map(entries), Step::Entry(j)) => entries.get(j).map(|(_, v)| v),
        _ => None,
    }
}

fn follow_mut(ptr: &mut Value, step: Step) -> Option<&mut Value> {
    match (ptr, step) {
        (Value::Array(items), Step::Item(i)) => items.get_mut(i),
        (Value::Array(items), Step::Embedded(i, j)) => match items.get_mut(i)? {
            Value::Map(entries) => entries.get_mut(j).map(|(_, v)| v),
            _ => None,
        },
        (Value::Map(entries), Step::Entry(j)) => entries.get_mut(j).map(|(_, v)| v),
        _ => None,
    }
}

/// The parts of a key: a string split on `delimiter`, a list's items, a dict's keys, or the
/// key itself.
fn key_parts(key: &Value, delimiter: &str) -> Vec<Value> {
    match key {
        Value::String(_) => py_str(key).split(delimiter).map(Value::from).collect(),
        Value::Array(items) => items.clone(),
        Value::Map(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
        other => vec![other.clone()],
    }
}

/// The value at `key` (split on `delimiter`) through dicts and lists, `None` when the path
/// does not exist.
pub(crate) fn lookup<'a>(data: &'a Value, key: &Value, delimiter: &str) -> Option<&'a Value> {
    let mut ptr = data;
    for each in key_parts(key, delimiter) {
        ptr = follow(ptr, step(ptr, &each)?)?;
    }
    Some(ptr)
}

/// [`lookup`], for changing the value in place.
fn lookup_mut<'a>(data: &'a mut Value, key: &Value, delimiter: &str) -> Option<&'a mut Value> {
    let mut ptr = data;
    for each in key_parts(key, delimiter) {
        let next = step(ptr, &each)?;
        ptr = follow_mut(ptr, next)?;
    }
    Some(ptr)
}

/// `salt.utils.data.traverse_dict_and_list`: follow `key` (split on `delimiter`) through
/// maps and lists; `default` when the path does not exist.
pub(crate) fn traverse(data: &Value, key: &Value, default: Value, delimiter: &str) -> Value {
    lookup(data, key, delimiter).cloned().unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::map;

    #[tokio::test]
    async fn items_item_ls() {
        let c = ctx();
        let r = call(&c, "grains.items", &[]).await;
        assert_eq!(r.ret, *c.grains);
        assert_eq!(r.out.as_deref(), Some("nested"));
        let r = call(&c, "grains.item", &[s("os"), s("role"), s("nope")]).await;
        assert_eq!(
            r.ret,
            map([("os", s("Debian")), ("role", s("web")), ("nope", s(""))])
        );
        assert_eq!(r.out.as_deref(), Some("nested"));
        let r = call(
            &c,
            "grains.item",
            &[s("deep:a:b"), kw(&[("default", s("d"))])],
        )
        .await;
        assert_eq!(r.ret, map([("deep:a:b", Value::from(7))]));
        let r = call(&c, "grains.ls", &[]).await;
        let keys: Vec<&str> = r
            .ret
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            keys,
            ["deep", "domain", "fqdn", "host", "id", "kernel", "os", "role"]
        );
        assert_eq!(r.out, None);
    }

    #[tokio::test]
    async fn sanitize_masks_host_names() {
        let r = call(&ctx(), "grains.items", &[s("sanitize=True")]).await;
        assert_eq!(map_get_str(&r.ret, "id"), "MINION.DOMAINNAME");
        assert_eq!(map_get_str(&r.ret, "host"), "MINION");
        assert_eq!(map_get_str(&r.ret, "domain"), "DOMAINNAME");
        assert_eq!(map_get_str(&r.ret, "os"), "Debian");
    }

    fn map_get_str<'a>(v: &'a Value, k: &str) -> &'a str {
        super::super::get(v, k).and_then(Value::as_str).unwrap()
    }

    #[tokio::test]
    async fn get_nested_default_delimiter() {
        let c = ctx();
        assert_eq!(call(&c, "grains.get", &[s("os")]).await.ret, s("Debian"));
        assert_eq!(
            call(&c, "grains.get", &[s("deep:a:b")]).await.ret,
            Value::from(7)
        );
        assert_eq!(call(&c, "grains.get", &[s("deep:l:1")]).await.ret, s("y"));
        assert_eq!(call(&c, "grains.get", &[s("deep:l:5")]).await.ret, s(""));
        assert_eq!(call(&c, "grains.get", &[s("missing")]).await.ret, s(""));
        assert_eq!(
            call(&c, "grains.get", &[s("missing"), s("fallback")])
                .await
                .ret,
            s("fallback")
        );
        assert_eq!(
            call(
                &c,
                "grains.get",
                &[s("deep/a/b"), kw(&[("delimiter", s("/"))])]
            )
            .await
            .ret,
            Value::from(7)
        );
        assert_eq!(call(&c, "grains.get", &[s("os:x")]).await.ret, s(""));
        let r = call(&c, "grains.get", &[]).await;
        assert_eq!(r.retcode, 1);
    }

    #[test]
    fn traverse_lists_of_maps_and_int_keys() {
        let data = map([
            ("l", Value::Array(vec![map([("k", s("v"))])])),
            ("m", Value::Map(vec![(Value::from(1), s("one"))])),
        ]);
        assert_eq!(traverse(&data, &s("l:k"), Value::Nil, ":"), s("v"));
        assert_eq!(traverse(&data, &s("l:0:k"), Value::Nil, ":"), s("v"));
        assert_eq!(traverse(&data, &s("l:-1:k"), Value::Nil, ":"), s("v"));
        assert_eq!(traverse(&data, &s("m:1"), Value::Nil, ":"), s("one"));
        assert_eq!(traverse(&data, &s("l:z"), Value::Nil, ":"), Value::Nil);
    }

    // ---- the grains file and the functions that change it, compared with Salt 3007's
    // answers and files (salt-call --local against the same grains file).

    use super::super::{CoreGrains, GrainsSource, Services};
    use std::sync::Arc;

    /// A context whose minion keeps its grains file in `dir` (the core grains are `ctx()`'s).
    fn ctx_in(dir: &Path) -> Context {
        let base = ctx();
        let services = Services::detached().with_grains(GrainsSource {
            core: CoreGrains::Fixed((*base.grains).clone()),
            config_dir: Some(dir.to_path_buf()),
            config_grains: Value::Map(vec![]),
        });
        Context {
            grains: services.grains(),
            services: Arc::new(services),
            ..base
        }
    }

    /// The context of the minion's next job: its grains as the minion holds them now.
    fn next(c: &Context) -> Context {
        Context {
            grains: c.services.grains(),
            ..c.clone()
        }
    }

    fn file(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("grains")).unwrap_or_default()
    }

    /// The arguments as `salt` publishes them: positional ones YAML-loaded.
    fn cli_args(args: &[&str]) -> Vec<Value> {
        args.iter()
            .map(|a| match super::super::args::parse_kwarg(a) {
                Some(_) => s(a),
                None => yamlify_arg(a),
            })
            .collect()
    }

    /// Call `fun` in a new job of the minion of `c`; the return and retcode.
    async fn job(c: &Context, fun: &str, args: &[&str]) -> (Value, i32) {
        let args = cli_args(args);
        let r = call(&next(c), fun, &args).await;
        (r.ret, r.retcode)
    }

    fn yaml(text: &str) -> Value {
        from_json(&brine_protocol::yaml::load::load(text).unwrap())
    }

    #[test]
    fn the_grains_file_is_merged_over_the_core_grains_and_under_the_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("grains"),
            "role: fromfile\nextra: x\nos: Plan9\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("minion"),
            "grains:\n  extra: fromconf\n  conf: c\n",
        )
        .unwrap();
        let c = ctx_in(dir.path());
        let g = c.grains.as_ref();
        assert_eq!(get(g, "role"), Some(&s("fromfile")));
        assert_eq!(get(g, "os"), Some(&s("Plan9")));
        assert_eq!(get(g, "extra"), Some(&s("fromconf")));
        assert_eq!(get(g, "conf"), Some(&s("c")));
        assert_eq!(get(g, "kernel"), Some(&s("Linux")));

        // A bad file is skipped (logged), as is one that holds no mapping.
        for bad in ["role: [1, 2\n", "- a\n- b\n", "x: 1\nx: 2\n"] {
            std::fs::write(dir.path().join("grains"), bad).unwrap();
            let g = c.services.update_grains(|_| Ok::<(), ()>(())).unwrap().1;
            assert_eq!(get(&g, "role"), Some(&s("web")), "{bad}");
            assert_eq!(get(&g, "extra"), Some(&s("fromconf")), "{bad}");
        }
    }

    #[test]
    fn the_host_grains_load_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("grains"), "from_file: yes\nid: other\n").unwrap();
        let g = crate::grains_core::grains_load(
            "m9",
            "salt",
            Some(&dir.path().join("grains")),
            &map([("id", s("m9"))]),
        );
        assert_eq!(get(&g, "from_file"), Some(&Value::Boolean(true)));
        assert_eq!(get(&g, "id"), Some(&s("m9")), "the config's grains win");
        assert!(get(&g, "kernel").is_some());
    }

    fn get<'a>(v: &'a Value, k: &str) -> Option<&'a Value> {
        super::super::get(v, k)
    }

    #[tokio::test]
    async fn setval_writes_the_file_and_the_next_job_sees_it() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_in(dir.path());
        let r = call(&c, "grains.setval", &[s("role"), s("db")]).await;
        assert_eq!(r.ret, map([("role", s("db"))]));
        assert_eq!((r.retcode, r.out.as_deref()), (0, Some("nested")));
        assert_eq!(file(dir.path()), "role: db\n");
        assert_eq!(c.services.grains().as_ref(), next(&c).grains.as_ref());
        assert_eq!(job(&c, "grains.get", &["role"]).await, (s("db"), 0));
        // A core grain is kept when another is set.
        assert_eq!(job(&c, "grains.get", &["os"]).await.0, s("Debian"));

        let (r, _) = job(&c, "grains.setval", &["sub", "{b: [1, 2], a: x}"]).await;
        assert_eq!(r, map([("sub", yaml("{b: [1, 2], a: x}"))]));
        assert_eq!(
            file(dir.path()),
            "role: db\nsub:\n  a: x\n  b:\n  - 1\n  - 2\n"
        );
        assert_eq!(job(&c, "grains.get", &["sub:b:1"]).await.0, Value::from(2));

        // Values as Salt's YAML writes them: quoted where they would load as something else.
        for (val, text) in [
            ("2024-01-01", "dt: '2024-01-01'\n"),
            ("'yes'", "dt: 'yes'\n"),
            ("1.50", "dt: 1.5\n"),
            ("é ü", "dt: é ü\n"),
        ] {
            job(&c, "grains.setval", &["dt", val]).await;
            assert!(
                file(dir.path()).starts_with(text),
                "{val}: {}",
                file(dir.path())
            );
        }
    }

    #[tokio::test]
    async fn setvals_and_destructive() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_in(dir.path());
        std::fs::write(dir.path().join("grains"), "roles:\n- web\n").unwrap();
        let (r, code) = job(&c, "grains.setvals", &["{a: 1, b: [x, y], c: {d: e}}"]).await;
        assert_eq!(r, yaml("{a: 1, b: [x, y], c: {d: e}}"));
        assert_eq!(code, 0);
        assert_eq!(
            file(dir.path()),
            "a: 1\nb:\n- x\n- y\nc:\n  d: e\nroles:\n- web\n"
        );
        let (r, _) = job(
            &c,
            "grains.setvals",
            &["{a: null, zz: null}", "destructive=True"],
        )
        .await;
        assert_eq!(r, yaml("{a: null, zz: null}"));
        assert_eq!(
            file(dir.path()),
            "b:\n- x\n- y\nc:\n  d: e\nroles:\n- web\n"
        );
        assert_eq!(
            job(&c, "grains.has_value", &["a"]).await.0,
            Value::Boolean(false)
        );
        // Without `destructive` (or with a truthy value that is not True) None is written.
        job(&c, "grains.setvals", &["{b: null}", "destructive=1"]).await;
        assert!(
            file(dir.path()).starts_with("b: null\n"),
            "{}",
            file(dir.path())
        );
        assert_eq!(
            job(&c, "grains.has_value", &["b"]).await.0,
            Value::Boolean(true)
        );

        let (r, code) = job(&c, "grains.setvals", &["notadict"]).await;
        assert_eq!(
            r,
            s("The minion function caused an exception: salt.exceptions.SaltException: setvals grains must be a dictionary.")
        );
        assert_eq!(code, 1);
    }

    #[tokio::test]
    async fn append_and_remove_as_salt_does() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_in(dir.path());
        let steps: &[(&[&str], Value)] = &[
            (&["grains.append", "roles", "web"], yaml("{roles: [web]}")),
            (
                &["grains.append", "roles", "web"],
                s("The val web was already in the list roles"),
            ),
            (
                &["grains.append", "roles", "[db, cache]"],
                yaml("{roles: [web, db, cache]}"),
            ),
            (
                &["grains.append", "roles2", "x", "convert=True"],
                yaml("{roles2: [x]}"),
            ),
            (&["grains.setval", "single", "str"], yaml("{single: str}")),
            (
                &["grains.append", "single", "x"],
                s("The key single is not a valid list"),
            ),
            (
                &["grains.append", "single", "x", "convert=True"],
                yaml("{single: [str, x]}"),
            ),
            (
                &["grains.remove", "roles", "db"],
                yaml("{roles: [web, cache]}"),
            ),
            (
                &["grains.remove", "roles", "nope"],
                s("The val nope was not in the list roles"),
            ),
            (
                &["grains.remove", "single2", "x"],
                s("The val x was not in the list single2"),
            ),
            (&["grains.append", "nums", "1"], yaml("{nums: [1]}")),
            (
                &["grains.append", "nums", "True"],
                s("The val True was already in the list nums"),
            ),
            (
                &["grains.append", "nums", "1.0"],
                s("The val 1.0 was already in the list nums"),
            ),
            // A core grain converted to a list is persisted.
            (
                &["grains.append", "role", "x", "convert=True"],
                yaml("{role: [web, x]}"),
            ),
        ];
        for (call_args, want) in steps {
            let (r, code) = job(&c, call_args[0], &call_args[1..]).await;
            assert_eq!(&r, want, "{call_args:?}");
            assert_eq!(code, 0, "{call_args:?}: a refusal is a plain return");
        }
        assert_eq!(
            file(dir.path()),
            "nums:\n- 1\nrole:\n- web\n- x\nroles:\n- web\n- cache\nroles2:\n- x\nsingle:\n- str\n- x\n"
        );
        assert_eq!(job(&c, "grains.get", &["roles:1"]).await.0, s("cache"));
    }

    #[tokio::test]
    async fn nested_keys_through_dicts_and_lists() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("grains"),
            "deep:\n  a:\n    b: 7\n  l:\n  - x\n  - y\nemb:\n- k: [1]\n- z\nrole: web\n",
        )
        .unwrap();
        let c = ctx_in(dir.path());
        let steps: &[(&[&str], Value)] = &[
            (
                &["grains.set", "deep:l:x", "1"],
                yaml("{comment: '', changes: {deep: {a: {b: 7}, l: [{x: 1}, y]}}, result: true}"),
            ),
            (&["grains.append", "emb:k", "2"], yaml("{emb: [{k: [1, 2]}, z]}")),
            (
                &["grains.set", "emb:k:q", "3"],
                yaml("{comment: '', changes: {emb: [{k: [1, 2, {q: 3}]}, z]}, result: true}"),
            ),
            (
                &["grains.set", "role:x", "y"],
                yaml("{comment: \"The key 'role' value is 'web', which is different from the provided key 'x'. Use 'force=True' to overwrite.\", changes: {}, result: false}"),
            ),
            (&["grains.remove", "emb:k", "1"], yaml("{emb: [{k: [2, {q: 3}]}, z]}")),
            (
                &["grains.append", "deep/a/c", "v", "delimiter=/"],
                yaml("{deep: {a: {b: 7, c: [v]}, l: [{x: 1}, y]}}"),
            ),
        ];
        for (call_args, want) in steps {
            let (r, _) = job(&c, call_args[0], &call_args[1..]).await;
            assert_eq!(&r, want, "{call_args:?}");
        }
        assert_eq!(
            file(dir.path()),
            "deep:\n  a:\n    b: 7\n    c:\n    - v\n  l:\n  - x: 1\n  - y\nemb:\n- k:\n  - 2\n  - q: 3\n- z\nrole: web\n"
        );
        // A key that is not text is Python's TypeError; a list key cannot be a dict key.
        let (r, code) = job(&c, "grains.set", &["5", "x"]).await;
        assert!(
            py_str(&r).starts_with(
                "Passed invalid arguments to grains.set: argument of type 'int' is not iterable\n"
            ),
            "{r}"
        );
        assert_eq!(code, 1);
        let (r, _) = job(&c, "grains.setval", &["[a]", "x"]).await;
        assert!(
            py_str(&r).starts_with(
                "Passed invalid arguments to grains.setval: unhashable type: 'list'\n"
            ),
            "{r}"
        );
        let (r, _) = job(&c, "grains.append", &["a", "x", "delimiter="]).await;
        assert_eq!(
            r,
            s("The minion function caused an exception: ValueError: empty separator")
        );
        let (r, _) = job(&c, "grains.get", &["role", "delimiter="]).await;
        assert_eq!(
            r,
            s("The minion function caused an exception: ValueError: empty separator")
        );
    }

    #[tokio::test]
    async fn set_delval_delkey_as_salt_does() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_in(dir.path());
        let refused = |comment: &str| {
            map([
                ("comment", s(comment)),
                ("changes", Value::Map(vec![])),
                ("result", Value::Boolean(false)),
            ])
        };
        let done = |changes: &str| {
            map([
                ("comment", s("")),
                ("changes", yaml(changes)),
                ("result", Value::Boolean(true)),
            ])
        };
        let steps: Vec<(&[&str], Value, i32, &str)> = vec![
            (
                &["grains.set", "apps:myApp:port", "2209"],
                done("{apps: {myApp: {port: 2209}}}"),
                0,
                "apps:\n  myApp:\n    port: 2209\n",
            ),
            (
                &["grains.set", "apps:myApp:port", "2209"],
                map([
                    ("comment", s("Grain is already set")),
                    ("changes", Value::Map(vec![])),
                    ("result", Value::Boolean(true)),
                ]),
                0,
                "apps:\n  myApp:\n    port: 2209\n",
            ),
            (
                &["grains.set", "apps:myApp", "{port: 2210}"],
                refused("The key 'apps:myApp' exists but is a dict or a list. Use 'force=True' to overwrite."),
                1,
                "apps:\n  myApp:\n    port: 2209\n",
            ),
            (
                &["grains.set", "apps:myApp", "{port: 2210}", "force=True"],
                done("{apps: {myApp: {port: 2210}}}"),
                0,
                "apps:\n  myApp:\n    port: 2210\n",
            ),
            (
                &["grains.set", "apps:other:list", "[1,2]"],
                done("{apps: {myApp: {port: 2210}, other: {list: [1, 2]}}}"),
                0,
                "apps:\n  myApp:\n    port: 2210\n  other:\n    list:\n    - 1\n    - 2\n",
            ),
            (
                &["grains.set", "apps:other:list", "3"],
                refused("The key 'apps:other:list' exists but is a dict or a list. Use 'force=True' to overwrite."),
                1,
                "apps:\n  myApp:\n    port: 2210\n  other:\n    list:\n    - 1\n    - 2\n",
            ),
            (
                &["grains.setval", "single", "sub"],
                yaml("{single: sub}"),
                0,
                "apps:\n  myApp:\n    port: 2210\n  other:\n    list:\n    - 1\n    - 2\nsingle: sub\n",
            ),
            (
                &["grains.set", "single:sub", "x"],
                done("{single: {sub: x}}"),
                0,
                "apps:\n  myApp:\n    port: 2210\n  other:\n    list:\n    - 1\n    - 2\nsingle:\n  sub: x\n",
            ),
            (
                &["grains.set", "single", "[1]"],
                refused("The key 'single' exists but is a dict or a list. Use 'force=True' to overwrite."),
                1,
                "apps:\n  myApp:\n    port: 2210\n  other:\n    list:\n    - 1\n    - 2\nsingle:\n  sub: x\n",
            ),
            (
                &["grains.set", "os", "[1]"],
                refused("The key 'os' exists and the given value is a dict or a list. Use 'force=True' to overwrite."),
                1,
                "apps:\n  myApp:\n    port: 2210\n  other:\n    list:\n    - 1\n    - 2\nsingle:\n  sub: x\n",
            ),
            (
                &["grains.delval", "apps:myApp:port"],
                done("{apps: {myApp: {port: null}, other: {list: [1, 2]}}}"),
                0,
                "apps:\n  myApp:\n    port: null\n  other:\n    list:\n    - 1\n    - 2\nsingle:\n  sub: x\n",
            ),
            (
                &["grains.delval", "apps:myApp:port", "destructive=True"],
                done("{apps: {myApp: {}, other: {list: [1, 2]}}}"),
                0,
                "apps:\n  myApp: {}\n  other:\n    list:\n    - 1\n    - 2\nsingle:\n  sub: x\n",
            ),
            (
                &["grains.delval", "apps"],
                refused("The key 'apps' exists but is a dict or a list. Use 'force=True' to overwrite."),
                1,
                "apps:\n  myApp: {}\n  other:\n    list:\n    - 1\n    - 2\nsingle:\n  sub: x\n",
            ),
            (
                &["grains.delval", "apps", "force=True"],
                done("{apps: null}"),
                0,
                "apps: null\nsingle:\n  sub: x\n",
            ),
            (&["grains.delkey", "apps"], done("{apps: null}"), 0, "single:\n  sub: x\n"),
            (&["grains.delkey", "nosuch"], done("{nosuch: null}"), 0, "single:\n  sub: x\n"),
            (
                &["grains.delval", "nosuch2"],
                done("{nosuch2: null}"),
                0,
                "nosuch2: null\nsingle:\n  sub: x\n",
            ),
            (
                &["grains.delval", "nosuch2"],
                map([
                    ("comment", s("Grain is already set")),
                    ("changes", Value::Map(vec![])),
                    ("result", Value::Boolean(true)),
                ]),
                0,
                "nosuch2: null\nsingle:\n  sub: x\n",
            ),
        ];
        for (call_args, want, code, text) in steps {
            let got = job(&c, call_args[0], &call_args[1..]).await;
            assert_eq!(got, (want, code), "{call_args:?}");
            assert_eq!(file(dir.path()), text, "{call_args:?}");
        }
        assert_eq!(
            job(&c, "grains.has_value", &["apps"]).await.0,
            Value::Boolean(false)
        );
        assert_eq!(job(&c, "grains.get", &["single:sub"]).await.0, s("x"));
    }

    #[tokio::test]
    async fn has_value_equals_filter_by() {
        let c = ctx();
        let t = Value::Boolean(true);
        let f = Value::Boolean(false);
        assert_eq!(call(&c, "grains.has_value", &[s("deep:a:b")]).await.ret, t);
        assert_eq!(call(&c, "grains.has_value", &[s("deep:l:1")]).await.ret, t);
        assert_eq!(call(&c, "grains.has_value", &[s("deep:zz")]).await.ret, f);
        assert_eq!(
            call(&c, "grains.equals", &[s("deep:a:b"), s("7")])
                .await
                .ret,
            t
        );
        assert_eq!(
            call(&c, "grains.equals", &[s("deep:a:b"), s("7.0")])
                .await
                .ret,
            f
        );
        assert_eq!(
            call(&c, "grains.equals", &[s("nosuch"), s("")]).await.ret,
            t
        );
        let by = |args: &[&str]| {
            let args = cli_args(args);
            let c = c.clone();
            async move { call(&c, "grains.filter_by", &args).await }
        };
        assert_eq!(by(&["{Debian: deb, RedHat: rh}", "os"]).await.ret, s("deb"));
        assert_eq!(
            by(&["{m*: matched, default: nope}", "id"]).await.ret,
            s("matched")
        );
        assert_eq!(
            by(&["{x*: matched, default: nope}", "id"]).await.ret,
            s("nope")
        );
        assert_eq!(by(&["{x: 1}", "id"]).await.ret, Value::Nil);
        assert_eq!(
            by(&[
                "{default: {A: {B: C}, D: E}, F: {A: {B: G}}}",
                "xxx",
                "{D: J}",
                "F",
                "default"
            ])
            .await
            .ret,
            yaml("{A: {B: G}, D: J}")
        );
        let r = by(&["{Debian: 1}", "os", "[x]"]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: salt.exceptions.SaltException: filter_by merge argument must be a dictionary.")
        );
        let r = by(&["notadict"]).await;
        assert_eq!(r.retcode, 1);
        assert!(py_str(&r.ret).contains("filter_by lookup_dict must be a dictionary"));
    }

    #[tokio::test]
    async fn bad_grains_file_and_no_config_dir() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_in(dir.path());
        std::fs::write(dir.path().join("grains"), "a: [1, 2\n").unwrap();
        let (r, code) = job(&c, "grains.setval", &["k", "v"]).await;
        assert!(
            py_str(&r).starts_with("Unable to read existing grains file: "),
            "{r}"
        );
        assert_eq!(code, 0);
        assert_eq!(file(dir.path()), "a: [1, 2\n", "left as it was");
        // A file holding no mapping is replaced.
        std::fs::write(dir.path().join("grains"), "- 1\n- 2\n").unwrap();
        assert_eq!(
            job(&c, "grains.setval", &["k", "v"]).await.0,
            map([("k", s("v"))])
        );
        assert_eq!(file(dir.path()), "k: v\n");

        let (r, code) = job(&ctx(), "grains.setval", &["k", "v"]).await;
        assert_eq!(
            r,
            s("ERROR: the grains file is <config dir>/grains, and this minion has no configuration directory")
        );
        assert_eq!(code, 1);
    }

    #[tokio::test]
    async fn refresh_grains_reads_the_file_again() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx_in(dir.path());
        std::fs::write(dir.path().join("grains"), "role: edited\n").unwrap();
        assert_eq!(job(&c, "grains.get", &["role"]).await.0, s("web"));
        let r = call(&c, "saltutil.refresh_grains", &[]).await;
        assert_eq!((r.ret, r.retcode), (Value::Boolean(true), 0));
        assert_eq!(job(&c, "grains.get", &["role"]).await.0, s("edited"));
        std::fs::write(dir.path().join("minion"), "grains:\n  role: conf\n").unwrap();
        let r = call(&c, "saltutil.refresh_grains", &[s("refresh_pillar=False")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        assert_eq!(job(&c, "grains.get", &["role"]).await.0, s("conf"));
        let r = call(&c, "saltutil.refresh_grains", &[s("bogus=1")]).await;
        assert_eq!(
            r.ret,
            s("ERROR executing 'saltutil.refresh_grains': The following keyword arguments are not valid: bogus=1")
        );
        assert_eq!(r.retcode, 1);
    }
}
