//! Salt's `dictupdate.merge` and `dictupdate.update`: how the master merges pillar sources
//! (sls files, includes, external pillars, by `pillar_source_merging_strategy` and
//! `pillar_merge_lists`) and how the minion's `config.get` merges its places. Keys match by
//! Python's `==`, as in a dict.

use crate::payload::Value;
use crate::pyeq::py_eq;

/// A merging strategy (`smart` is `recurse`: Brine has no `yamlex` renderer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Mappings merged key by key, recursively; the later source wins elsewhere.
    Recurse,
    /// The later source's top-level keys replace the earlier's whole.
    Overwrite,
    /// `list`: keys present in both become `[earlier, later]`; keys only in the later source
    /// are dropped (as Salt does).
    List,
    /// `none`: recursive, lists never joined.
    None,
}

impl Strategy {
    /// The strategy of a `pillar_source_merging_strategy` value (validated by the config).
    pub fn parse(name: &str) -> Strategy {
        match name {
            "overwrite" => Strategy::Overwrite,
            "list" => Strategy::List,
            "none" => Strategy::None,
            _ => Strategy::Recurse,
        }
    }
}

/// `update` was given something other than two mappings (Salt's `TypeError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotDicts;

impl std::fmt::Display for NotDicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cannot update using non-dict types in dictupdate.update()")
    }
}

/// `merge(a, b)`: `b` merged into `a`; both must be mappings.
pub fn merge(
    a: Value,
    b: &Value,
    strategy: Strategy,
    merge_lists: bool,
) -> Result<Value, NotDicts> {
    let (Value::Map(mut a), Value::Map(b)) = (a, b) else {
        return Err(NotDicts);
    };
    match strategy {
        Strategy::Recurse => update(&mut a, b, merge_lists),
        Strategy::None => update(&mut a, b, false),
        Strategy::Overwrite => {
            for (k, v) in b {
                if let Some(slot) = a.iter_mut().find(|(key, _)| py_eq(key, k)) {
                    slot.1 = v.clone();
                }
            }
            update(&mut a, b, merge_lists);
        }
        Strategy::List => {
            for (k, v) in a.iter_mut() {
                if let Some((_, later)) = b.iter().find(|(key, _)| py_eq(key, k)) {
                    *v = Value::Array(vec![std::mem::replace(v, Value::Nil), later.clone()]);
                }
            }
        }
    }
    Ok(Value::Map(a))
}

/// Salt's recursive `dictupdate.update(dest, upd, merge_lists)`.
pub fn update(dest: &mut Vec<(Value, Value)>, upd: &[(Value, Value)], merge_lists: bool) {
    for (k, v) in upd {
        let Some(slot) = dest.iter_mut().find(|(key, _)| py_eq(key, k)) else {
            dest.push((k.clone(), v.clone()));
            continue;
        };
        match (&mut slot.1, v) {
            (Value::Map(inner), Value::Map(more)) => update(inner, more, merge_lists),
            (Value::Array(items), Value::Array(more)) if merge_lists => {
                for item in more {
                    if !items.iter().any(|i| py_eq(i, item)) {
                        items.push(item.clone());
                    }
                }
            }
            (old, new) => *old = new.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::from_json;
    use serde_json::json;

    fn m(
        a: serde_json::Value,
        b: serde_json::Value,
        s: Strategy,
        lists: bool,
    ) -> serde_json::Value {
        crate::payload::to_json(&merge(from_json(&a), &from_json(&b), s, lists).unwrap())
    }

    // Expected values are what Salt 3007's salt.utils.dictupdate.merge returns.
    #[test]
    fn strategies_as_salt() {
        let a = json!({"x": {"a": 1, "l": [1, 2]}, "y": 1});
        let b = json!({"x": {"b": 2, "l": [2, 3]}, "z": 3});
        assert_eq!(
            m(a.clone(), b.clone(), Strategy::Recurse, false),
            json!({"x": {"a": 1, "l": [2, 3], "b": 2}, "y": 1, "z": 3})
        );
        assert_eq!(
            m(a.clone(), b.clone(), Strategy::Recurse, true),
            json!({"x": {"a": 1, "l": [1, 2, 3], "b": 2}, "y": 1, "z": 3})
        );
        assert_eq!(
            m(a.clone(), b.clone(), Strategy::None, true),
            json!({"x": {"a": 1, "l": [2, 3], "b": 2}, "y": 1, "z": 3})
        );
        assert_eq!(
            m(a.clone(), b.clone(), Strategy::Overwrite, false),
            json!({"x": {"b": 2, "l": [2, 3]}, "y": 1, "z": 3})
        );
        assert_eq!(
            m(a, b, Strategy::List, false),
            json!({"x": [{"a": 1, "l": [1, 2]}, {"b": 2, "l": [2, 3]}], "y": 1})
        );
    }

    #[test]
    fn keys_and_list_items_match_as_in_python() {
        let a = Value::Map(vec![(Value::from(1), Value::Array(vec![Value::from(1)]))]);
        let b = Value::Map(vec![(
            Value::from(1.0),
            Value::Array(vec![Value::from(true), Value::from(2)]),
        )]);
        assert_eq!(
            merge(a, &b, Strategy::Recurse, true).unwrap(),
            Value::Map(vec![(
                Value::from(1),
                Value::Array(vec![Value::from(1), Value::from(2)])
            )])
        );
        assert_eq!(
            merge(Value::Nil, &b, Strategy::Recurse, false),
            Err(NotDicts)
        );
    }

    #[test]
    fn key_order_is_the_earlier_sources() {
        let got = m(
            json!({"b": 1, "a": 1}),
            json!({"c": 2, "a": 2}),
            Strategy::Recurse,
            false,
        );
        let keys: Vec<_> = got.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["b", "a", "c"]);
    }
}
