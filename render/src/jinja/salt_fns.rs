//! The `salt` object of templates: `salt['mod.fun'](...)` and `salt.mod.fun(...)`. The pure
//! functions are answered here; the rest go to the caller's [`crate::Functions`].

use std::fmt;
use std::sync::Arc;

use minijinja::value::{Object, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

use super::objects::{deep_copy, map_entries, seq_items, shallow_mut, split_kwargs, Dict};
use super::pyfmt;
use crate::Functions;

/// What the pure functions read: the render's grains, pillar and opts.
#[derive(Debug, Clone)]
pub(crate) struct Data {
    pub(crate) grains: Value,
    pub(crate) pillar: Value,
    pub(crate) opts: Value,
}

/// The `salt` dunder.
pub(crate) struct Salt {
    pub(crate) data: Data,
    pub(crate) functions: Arc<dyn Functions>,
}

impl fmt::Debug for Salt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<salt>")
    }
}

/// `salt.<module>`, whose methods are the module's functions.
#[derive(Debug)]
struct Module {
    salt: Arc<Salt>,
    name: String,
}

/// `salt['mod.fun']`, callable.
#[derive(Debug)]
struct Function {
    salt: Arc<Salt>,
    name: String,
}

impl Object for Salt {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let name = key.as_str()?;
        if name.contains('.') {
            Some(Value::from_object(Function {
                salt: self.clone(),
                name: name.to_string(),
            }))
        } else {
            Some(Value::from_object(Module {
                salt: self.clone(),
                name: name.to_string(),
            }))
        }
    }
}

impl Object for Module {
    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        self.salt.invoke(&format!("{}.{method}", self.name), args)
    }
}

impl Object for Function {
    fn call(self: &Arc<Self>, _state: &mut State<'_, '_>, args: &[Value]) -> Result<Value, Error> {
        self.salt.invoke(&self.name, args)
    }
}

fn bad(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

/// An argument by position or keyword.
struct Args {
    positional: Vec<Value>,
    kwargs: Vec<(Value, Value)>,
}

impl Args {
    fn get(&self, index: usize, name: &str) -> Option<Value> {
        self.positional.get(index).cloned().or_else(|| {
            self.kwargs
                .iter()
                .find(|(k, _)| k.as_str() == Some(name))
                .map(|(_, v)| v.clone())
        })
    }

    fn text(&self, index: usize, name: &str, default: &str) -> String {
        self.get(index, name)
            .map_or_else(|| default.to_string(), |v| pyfmt::str(&v))
    }
}

impl Salt {
    /// Call an execution function as `salt['name'](*args)` calls it.
    pub(crate) fn invoke(&self, name: &str, args: &[Value]) -> Result<Value, Error> {
        let (positional, kwargs) = split_kwargs(args);
        let a = Args { positional, kwargs };
        let empty = || Value::from("");
        Ok(match name {
            "grains.get" => {
                let key = a.text(0, "key", "");
                traverse(&self.data.grains, &key, &a.text(2, "delimiter", ":"))
                    .unwrap_or_else(|| a.get(1, "default").unwrap_or_else(empty))
            }
            "pillar.get" => {
                let key = a.text(0, "key", "");
                let delimiter = a.text(4, "delimiter", ":");
                let default = a.get(1, "default");
                let found = traverse(&self.data.pillar, &key, &delimiter);
                let merge = a.get(2, "merge").is_some_and(|v| v.is_true());
                match (merge, default, found) {
                    (true, Some(default), Some(found))
                        if default.kind() == ValueKind::Map && found.kind() == ValueKind::Map =>
                    {
                        let merge_lists = a.get(3, "merge_nested_lists").map_or_else(
                            || {
                                self.data
                                    .opts
                                    .get_item(&Value::from("pillar_merge_lists"))
                                    .is_ok_and(|v| v.is_true())
                            },
                            |v| v.is_true(),
                        );
                        update(&deep_copy(&default), &found, true, merge_lists)?
                    }
                    (true, Some(default), Some(found))
                        if default.kind() == ValueKind::Seq && found.kind() == ValueKind::Seq =>
                    {
                        let mut items = seq_items(&deep_copy(&default)).unwrap_or_default();
                        let original = items.clone();
                        items.extend(
                            seq_items(&found)
                                .unwrap_or_default()
                                .into_iter()
                                .filter(|x| !original.contains(x)),
                        );
                        super::objects::List::value(items)
                    }
                    (_, default, found) => found.unwrap_or_else(|| default.unwrap_or_else(empty)),
                }
            }
            "config.get" => {
                let key = a.text(0, "key", "");
                let delimiter = a.text(2, "delimiter", ":");
                let master = self
                    .data
                    .pillar
                    .get_item(&Value::from("master"))
                    .ok()
                    .filter(|v| !v.is_undefined())
                    .unwrap_or_default();
                [
                    &self.data.opts,
                    &self.data.grains,
                    &self.data.pillar,
                    &master,
                ]
                .iter()
                .find_map(|source| traverse(source, &key, &delimiter))
                .unwrap_or_else(|| a.get(1, "default").unwrap_or_else(empty))
            }
            "grains.filter_by" => {
                let lookup = a
                    .get(0, "lookup_dict")
                    .ok_or_else(|| bad("filter_by requires lookup_dict"))?;
                filter_by(
                    &lookup,
                    &a.text(1, "grain", "os_family"),
                    &self.data.grains,
                    a.get(2, "merge").filter(|v| v.is_true()),
                    &a.text(3, "default", "default"),
                    a.get(4, "base").filter(|v| v.is_true()),
                )?
            }
            "defaults.merge" => {
                let dest = a.get(0, "dest").ok_or_else(|| bad("merge requires dest"))?;
                let upd = a.get(1, "upd").ok_or_else(|| bad("merge requires upd"))?;
                let recursive = a.get(2, "recursive_update").is_none_or(|v| v.is_true());
                let in_place = a.get(3, "in_place").is_none_or(|v| v.is_true());
                let merge_lists = a.get(4, "merge_lists").is_some_and(|v| v.is_true());
                let dest = if in_place { dest } else { deep_copy(&dest) };
                update(&dest, &upd, recursive, merge_lists)?
            }
            "defaults.deepcopy" => deep_copy(&a.get(0, "source").unwrap_or_default()),
            "test.true" => Value::from(true),
            "test.false" => Value::from(false),
            "test.echo" => Value::from(a.text(0, "text", "")),
            _ => {
                let positional = a.positional.iter().map(pyfmt::to_json).collect::<Vec<_>>();
                let kwargs = a
                    .kwargs
                    .iter()
                    .map(|(k, v)| (pyfmt::str(k), pyfmt::to_json(v)))
                    .collect();
                match self.functions.call(name, &positional, &kwargs) {
                    Some(Ok(json)) => pyfmt::from_json(&json),
                    Some(Err(e)) => {
                        return Err(bad(format!(
                            "Problem running salt function in Jinja template: {e}"
                        )))
                    }
                    None => return Err(bad(format!("'{name}' is not available."))),
                }
            }
        })
    }
}

/// Salt's `traverse_dict_and_list`: `a:b:0` through mappings and lists.
pub(crate) fn traverse(data: &Value, key: &str, delimiter: &str) -> Option<Value> {
    let mut ptr = data.clone();
    for part in key.split(delimiter) {
        if ptr.kind() == ValueKind::Seq {
            let items = seq_items(&ptr)?;
            match part.parse::<i64>() {
                Ok(index) => {
                    let embedded = items
                        .iter()
                        .filter(|v| v.kind() == ValueKind::Map)
                        .find_map(|m| item(m, &Value::from(index)));
                    ptr = match embedded {
                        Some(v) => v,
                        None => {
                            let len = items.len() as i64;
                            let at = if index < 0 { index + len } else { index };
                            items.get(usize::try_from(at).ok()?)?.clone()
                        }
                    };
                }
                Err(_) => {
                    ptr = items
                        .iter()
                        .filter(|v| v.kind() == ValueKind::Map)
                        .find_map(|m| item(m, &Value::from(part)))?;
                }
            }
        } else if ptr.kind() == ValueKind::Map {
            ptr = item(&ptr, &Value::from(part))?;
        } else {
            return None;
        }
    }
    Some(ptr)
}

/// Salt's `filter_by`.
fn filter_by(
    lookup: &Value,
    grain: &str,
    grains: &Value,
    merge: Option<Value>,
    default: &str,
    base: Option<Value>,
) -> Result<Value, Error> {
    let entries =
        map_entries(lookup).ok_or_else(|| bad("filter_by lookup_dict must be a dictionary"))?;
    let val = traverse(grains, grain, ":").unwrap_or_else(|| Value::from(Vec::<Value>::new()));
    let candidates = seq_items(&val)
        .filter(|_| val.kind() == ValueKind::Seq)
        .unwrap_or_else(|| vec![val.clone()]);
    let mut ret = None;
    'outer: for each in &candidates {
        let each = pyfmt::str(each);
        for (key, value) in &entries {
            let key = pyfmt::str(key);
            if each == key || brine_protocol::target::fnmatch(&key, &each) {
                ret = Some(value.clone());
                break 'outer;
            }
        }
    }
    let lookup_get = |name: &str| {
        entries
            .iter()
            .find(|(k, _)| k.as_str() == Some(name))
            .map(|(_, v)| v.clone())
    };
    if ret.as_ref().is_none_or(|v| v.is_none()) {
        ret = lookup_get(default);
    }
    if let Some(base) = base.map(|b| pyfmt::str(&b)) {
        if let Some(base_values) = lookup_get(&base) {
            match &ret {
                None => ret = Some(base_values),
                Some(r) if base_values.kind() == ValueKind::Map => {
                    if r.kind() != ValueKind::Map {
                        return Err(bad(
                            "filter_by default and look-up values must both be dictionaries.",
                        ));
                    }
                    ret = Some(update(&deep_copy(&base_values), r, true, false)?);
                }
                Some(_) => {}
            }
        }
    }
    if let Some(merge) = merge {
        if merge.kind() != ValueKind::Map {
            return Err(bad("filter_by merge argument must be a dictionary."));
        }
        match &ret {
            None => ret = Some(merge),
            Some(r) => {
                update(r, &deep_copy(&merge), true, false)?;
            }
        }
    }
    Ok(ret.unwrap_or_default())
}

/// Salt's `filter_by` on JSON data, for callers outside templates (the `grains.filter_by`
/// execution function): `grain` is looked up in `grains`. The error is the text of Salt's
/// exception.
pub fn filter_by_json(
    lookup: &serde_json::Value,
    grain: &str,
    grains: &serde_json::Value,
    merge: Option<&serde_json::Value>,
    default: &str,
    base: Option<&serde_json::Value>,
) -> Result<serde_json::Value, String> {
    // Salt's `if merge:` and `if base`: a falsy value counts as not given.
    let given = |v: Option<&serde_json::Value>| v.map(pyfmt::from_json).filter(Value::is_true);
    filter_by(
        &pyfmt::from_json(lookup),
        grain,
        &pyfmt::from_json(grains),
        given(merge),
        default,
        given(base),
    )
    .map(|v| pyfmt::to_json(&v))
    .map_err(|e| e.detail().map_or_else(|| e.to_string(), str::to_string))
}

/// Salt's `dictupdate.update`: `dest` changed in place (a copy when it cannot be) and returned.
pub(crate) fn update(
    dest: &Value,
    upd: &Value,
    recursive: bool,
    merge_lists: bool,
) -> Result<Value, Error> {
    let dest = shallow_mut(dest);
    let Some(dict) = dest.downcast_object_ref::<Dict>() else {
        return Err(bad(
            "Cannot update using non-dict types in dictupdate.update()",
        ));
    };
    let new = map_entries(upd)
        .ok_or_else(|| bad("Cannot update using non-dict types in dictupdate.update()"))?;
    for (key, val) in new {
        let current = dict.entries().get(&key).cloned();
        let merged = match current {
            Some(sub)
                if recursive && sub.kind() == ValueKind::Map && val.kind() == ValueKind::Map =>
            {
                update(&sub, &val, recursive, merge_lists)?
            }
            Some(sub)
                if merge_lists && sub.kind() == ValueKind::Seq && val.kind() == ValueKind::Seq =>
            {
                let mut items = seq_items(&deep_copy(&sub)).unwrap_or_default();
                for item in seq_items(&val).unwrap_or_default() {
                    if !items.contains(&item) {
                        items.push(item);
                    }
                }
                super::objects::List::value(items)
            }
            _ => val,
        };
        dict.entries().insert(key, merged);
    }
    Ok(dest)
}

fn item(map: &Value, key: &Value) -> Option<Value> {
    map.get_item(key).ok().filter(|v| !v.is_undefined())
}
