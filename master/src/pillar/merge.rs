//! Salt's `dictupdate.merge`: how pillar sources (sls files, includes, external pillars) are
//! merged, by `pillar_source_merging_strategy` and `pillar_merge_lists`.

use brine_protocol::payload::Value;

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

/// `merge(a, b)`: `b` merged into `a`. Both must be mappings; anything else leaves `a`.
pub fn merge(a: Value, b: &Value, strategy: Strategy, merge_lists: bool) -> Value {
    let (Value::Map(mut a), Value::Map(b)) = (a, b) else {
        return Value::Map(Vec::new());
    };
    match strategy {
        Strategy::Recurse => update(&mut a, b, merge_lists),
        Strategy::None => update(&mut a, b, false),
        Strategy::Overwrite => {
            for (k, v) in b {
                if let Some(slot) = a.iter_mut().find(|(key, _)| key == k) {
                    slot.1 = v.clone();
                }
            }
            update(&mut a, b, merge_lists);
        }
        Strategy::List => {
            for (k, v) in a.iter_mut() {
                if let Some((_, later)) = b.iter().find(|(key, _)| key == k) {
                    *v = Value::Array(vec![std::mem::replace(v, Value::Nil), later.clone()]);
                }
            }
        }
    }
    Value::Map(a)
}

/// Salt's recursive `dictupdate.update(dest, upd, merge_lists)`.
pub fn update(dest: &mut Vec<(Value, Value)>, upd: &[(Value, Value)], merge_lists: bool) {
    for (k, v) in upd {
        let Some(slot) = dest.iter_mut().find(|(key, _)| key == k) else {
            dest.push((k.clone(), v.clone()));
            continue;
        };
        match (&mut slot.1, v) {
            (Value::Map(inner), Value::Map(more)) => update(inner, more, merge_lists),
            (Value::Array(items), Value::Array(more)) if merge_lists => {
                for item in more {
                    if !items.contains(item) {
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
    use brine_protocol::payload::from_json;
    use serde_json::json;

    fn m(
        a: serde_json::Value,
        b: serde_json::Value,
        s: Strategy,
        lists: bool,
    ) -> serde_json::Value {
        brine_protocol::payload::to_json(&merge(from_json(&a), &from_json(&b), s, lists))
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
