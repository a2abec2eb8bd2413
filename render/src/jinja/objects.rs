//! Python's mutable `dict` and `list` for templates: `{% do d.update(x) %}`, `l.append(1)` and
//! `d.setdefault(k, [])` change the value every holder sees, as they do in Salt's Jinja.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use indexmap::IndexMap;
use minijinja::value::{Enumerator, Object, ObjectRepr, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

use super::pyfmt;

/// A Python `dict`: ordered, mutable in place.
#[derive(Debug, Default)]
pub(crate) struct Dict(Mutex<IndexMap<Value, Value>>);

/// A Python `list`: mutable in place.
#[derive(Debug, Default)]
pub(crate) struct List(Mutex<Vec<Value>>);

impl Dict {
    pub(crate) fn value(entries: IndexMap<Value, Value>) -> Value {
        Value::from_object(Dict(Mutex::new(entries)))
    }

    pub(crate) fn from_entries(entries: impl IntoIterator<Item = (Value, Value)>) -> Dict {
        Dict(Mutex::new(entries.into_iter().collect()))
    }

    pub(crate) fn entries(&self) -> MutexGuard<'_, IndexMap<Value, Value>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl List {
    pub(crate) fn value(items: Vec<Value>) -> Value {
        Value::from_object(List(Mutex::new(items)))
    }

    pub(crate) fn from_items(items: Vec<Value>) -> List {
        List(Mutex::new(items))
    }

    pub(crate) fn items(&self) -> MutexGuard<'_, Vec<Value>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The entries of any mapping value, in order.
pub(crate) fn map_entries(value: &Value) -> Option<Vec<(Value, Value)>> {
    if let Some(dict) = value.downcast_object_ref::<Dict>() {
        return Some(
            dict.entries()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
    }
    if value.kind() != ValueKind::Map {
        return None;
    }
    let keys = value.try_iter().ok()?;
    Some(
        keys.map(|k| {
            let v = value.get_item(&k).unwrap_or_default();
            (k, v)
        })
        .collect(),
    )
}

/// The items of any sequence value.
pub(crate) fn seq_items(value: &Value) -> Option<Vec<Value>> {
    if let Some(list) = value.downcast_object_ref::<List>() {
        return Some(list.items().clone());
    }
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable => value.try_iter().ok().map(Iterator::collect),
        _ => None,
    }
}

/// A mutable copy of one level: maps become a `Dict`, sequences a `List`.
pub(crate) fn shallow_mut(value: &Value) -> Value {
    if value.downcast_object_ref::<Dict>().is_some()
        || value.downcast_object_ref::<List>().is_some()
    {
        return value.clone();
    }
    if let Some(entries) = map_entries(value) {
        return Dict::value(entries.into_iter().collect());
    }
    if value.kind() == ValueKind::Seq {
        if let Some(items) = seq_items(value) {
            return List::value(items);
        }
    }
    value.clone()
}

/// Python's `copy.deepcopy` of data.
pub(crate) fn deep_copy(value: &Value) -> Value {
    if let Some(entries) = map_entries(value) {
        return Dict::value(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), deep_copy(v)))
                .collect(),
        );
    }
    if value.kind() == ValueKind::Seq {
        if let Some(items) = seq_items(value) {
            return List::value(items.iter().map(deep_copy).collect());
        }
    }
    value.clone()
}

fn unknown() -> Error {
    Error::from(ErrorKind::UnknownMethod)
}

fn arity(args: &[Value], min: usize, max: usize, method: &str) -> Result<(), Error> {
    if args.len() < min || args.len() > max {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "{method}() takes {min} to {max} arguments ({} given)",
                args.len()
            ),
        ));
    }
    Ok(())
}

fn key_error(key: &Value) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("KeyError: {}", pyfmt::repr(key)),
    )
}

/// The (positional, keyword) parts of a call's arguments.
pub(crate) fn split_kwargs(args: &[Value]) -> (Vec<Value>, Vec<(Value, Value)>) {
    match args.last() {
        Some(last) if last.is_kwargs() => {
            let kwargs = map_entries(last).unwrap_or_default();
            (args[..args.len() - 1].to_vec(), kwargs)
        }
        _ => (args.to_vec(), Vec::new()),
    }
}

impl Object for Dict {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.entries().get(key).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.entries().keys().cloned().collect())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.entries().len())
    }

    fn is_true(self: &Arc<Self>) -> bool {
        !self.entries().is_empty()
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&pyfmt::repr(&Value::from_dyn_object(self.clone())))
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        self.method(method, args)
    }
}

impl Dict {
    /// A Python `dict` method (no template state is needed).
    pub(crate) fn method(self: &Arc<Self>, method: &str, args: &[Value]) -> Result<Value, Error> {
        match method {
            "get" => {
                arity(args, 1, 2, method)?;
                let found = self.entries().get(&args[0]).cloned();
                Ok(found.unwrap_or_else(|| args.get(1).cloned().unwrap_or(Value::from(()))))
            }
            "items" => {
                arity(args, 0, 0, method)?;
                let pairs = self
                    .entries()
                    .iter()
                    .map(|(k, v)| Value::from(vec![k.clone(), v.clone()]))
                    .collect();
                Ok(List::value(pairs))
            }
            "keys" => {
                arity(args, 0, 0, method)?;
                Ok(List::value(self.entries().keys().cloned().collect()))
            }
            "values" => {
                arity(args, 0, 0, method)?;
                Ok(List::value(self.entries().values().cloned().collect()))
            }
            "copy" => {
                arity(args, 0, 0, method)?;
                Ok(Dict::value(self.entries().clone()))
            }
            "update" => {
                let (positional, kwargs) = split_kwargs(args);
                arity(&positional, 0, 1, method)?;
                let mut new = Vec::new();
                if let Some(other) = positional.first() {
                    if let Some(entries) = map_entries(other) {
                        new.extend(entries);
                    } else if let Some(pairs) = seq_items(other) {
                        for pair in pairs {
                            let items = seq_items(&pair).unwrap_or_default();
                            if items.len() != 2 {
                                return Err(Error::new(
                                    ErrorKind::InvalidOperation,
                                    "dictionary update sequence element has wrong length",
                                ));
                            }
                            new.push((items[0].clone(), items[1].clone()));
                        }
                    } else {
                        return Err(Error::new(
                            ErrorKind::InvalidOperation,
                            "update() argument is not a mapping",
                        ));
                    }
                }
                new.extend(kwargs);
                let mut entries = self.entries();
                for (k, v) in new {
                    entries.insert(k, v);
                }
                Ok(Value::from(()))
            }
            "setdefault" => {
                arity(args, 1, 2, method)?;
                let mut entries = self.entries();
                let value = entries
                    .entry(args[0].clone())
                    .or_insert_with(|| args.get(1).cloned().unwrap_or(Value::from(())));
                Ok(value.clone())
            }
            "pop" => {
                arity(args, 1, 2, method)?;
                match self.entries().shift_remove(&args[0]) {
                    Some(v) => Ok(v),
                    None => args.get(1).cloned().ok_or_else(|| key_error(&args[0])),
                }
            }
            "clear" => {
                arity(args, 0, 0, method)?;
                self.entries().clear();
                Ok(Value::from(()))
            }
            "has_key" => {
                arity(args, 1, 1, method)?;
                Ok(Value::from(self.entries().contains_key(&args[0])))
            }
            _ => Err(unknown()),
        }
    }
}

impl Object for List {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let items = self.items();
        let index = i64::try_from(key.clone()).ok()?;
        let len = i64::try_from(items.len()).ok()?;
        let index = if index < 0 { index + len } else { index };
        usize::try_from(index)
            .ok()
            .and_then(|i| items.get(i).cloned())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.items().len())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.items().len())
    }

    fn is_true(self: &Arc<Self>) -> bool {
        !self.items().is_empty()
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&pyfmt::repr(&Value::from_dyn_object(self.clone())))
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        self.method(method, args)
    }
}

impl List {
    /// A Python `list` method (no template state is needed).
    pub(crate) fn method(self: &Arc<Self>, method: &str, args: &[Value]) -> Result<Value, Error> {
        match method {
            "append" => {
                arity(args, 1, 1, method)?;
                self.items().push(args[0].clone());
                Ok(Value::from(()))
            }
            "extend" => {
                arity(args, 1, 1, method)?;
                let new = seq_items(&args[0])
                    .or_else(|| args[0].try_iter().ok().map(Iterator::collect))
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::InvalidOperation,
                            "extend() argument is not iterable",
                        )
                    })?;
                self.items().extend(new);
                Ok(Value::from(()))
            }
            "insert" => {
                arity(args, 2, 2, method)?;
                let mut items = self.items();
                let len = items.len() as i64;
                let at = i64::try_from(args[0].clone())?;
                let at = if at < 0 {
                    (at + len).max(0)
                } else {
                    at.min(len)
                };
                items.insert(at as usize, args[1].clone());
                Ok(Value::from(()))
            }
            "pop" => {
                arity(args, 0, 1, method)?;
                let mut items = self.items();
                let len = items.len() as i64;
                let at = match args.first() {
                    Some(index) => i64::try_from(index.clone())?,
                    None => -1,
                };
                let at = if at < 0 { at + len } else { at };
                if at < 0 || at >= len {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        "pop index out of range",
                    ));
                }
                Ok(items.remove(at as usize))
            }
            "remove" => {
                arity(args, 1, 1, method)?;
                let mut items = self.items();
                let at = items.iter().position(|v| v == &args[0]).ok_or_else(|| {
                    Error::new(ErrorKind::InvalidOperation, "list.remove(x): x not in list")
                })?;
                items.remove(at);
                Ok(Value::from(()))
            }
            "index" => {
                arity(args, 1, 1, method)?;
                let at = self
                    .items()
                    .iter()
                    .position(|v| v == &args[0])
                    .ok_or_else(|| {
                        Error::new(
                            ErrorKind::InvalidOperation,
                            format!("{} is not in list", pyfmt::repr(&args[0])),
                        )
                    })?;
                Ok(Value::from(at))
            }
            "count" => {
                arity(args, 1, 1, method)?;
                Ok(Value::from(
                    self.items().iter().filter(|v| *v == &args[0]).count(),
                ))
            }
            "reverse" => {
                arity(args, 0, 0, method)?;
                self.items().reverse();
                Ok(Value::from(()))
            }
            "sort" => {
                arity(args, 0, 0, method)?;
                self.items().sort();
                Ok(Value::from(()))
            }
            "copy" => {
                arity(args, 0, 0, method)?;
                Ok(List::value(self.items().clone()))
            }
            "clear" => {
                arity(args, 0, 0, method)?;
                self.items().clear();
                Ok(Value::from(()))
            }
            _ => Err(unknown()),
        }
    }
}
