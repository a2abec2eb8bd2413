//! The Salt mine on the master: the `_mine`, `_mine_delete`, `_mine_flush` and `_mine_get`
//! requests of minions (`mine.send`, `mine.update`, `mine.delete`, `mine.flush`, `mine.get`).
//! The data lives in the minion data cache ([`crate::datacache::DataCache`]).

use brine_protocol::payload::{get, get_str, Value};
use regex::Regex;

use crate::master::Master;

/// Salt's mark of a mine entry that carries its own access list (`allow_tgt`).
const ACL_ID: &str = "__saltmine_acl__";
const ACL_DATA: &str = "__data__";

impl Master {
    /// `_mine`: store (merge, or replace with `clear`) the sender's mine data.
    pub(crate) fn on_mine(&self, id: &str, load: &Value) -> Value {
        let Some(data) = get(load, "data") else {
            return Value::Map(vec![]);
        };
        let clear = matches!(get(load, "clear"), Some(Value::Boolean(true)));
        self.cache.mine_store(id, data.clone(), clear);
        Value::from(true)
    }

    /// `_mine_delete`: forget one function of the sender's mine.
    pub(crate) fn on_mine_delete(&self, id: &str, load: &Value) -> Value {
        match get_str(load, "fun") {
            Some(fun) => Value::from(self.cache.mine_delete(id, fun)),
            None => Value::Map(vec![]),
        }
    }

    /// `_mine_flush`: forget the sender's whole mine.
    pub(crate) fn on_mine_flush(&self, id: &str) -> Value {
        Value::from(self.cache.mine_flush(id))
    }

    /// `_mine_get`: the mine entries of the targeted minions that the asking minion may read.
    /// One function gives `{minion: data}`; several (a list, or a comma-separated string)
    /// give `{function: {minion: data}}`.
    pub(crate) fn on_mine_get(&self, asker: &str, load: &Value) -> Value {
        let (Some(tgt), Some(fun)) = (get(load, "tgt"), get(load, "fun")) else {
            return Value::Map(vec![]);
        };
        let (functions, keyed): (Vec<String>, bool) = match fun {
            Value::String(_) => {
                let mut names: Vec<String> = Vec::new();
                for name in fun.as_str().unwrap_or("").split(',') {
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_string());
                    }
                }
                let keyed = names.len() > 1;
                (names, keyed)
            }
            Value::Array(items) => (
                items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                true,
            ),
            _ => return Value::Map(vec![]),
        };
        let functions = match self.mine_get_acl(asker, functions) {
            Some(f) => f,
            None => return Value::Map(vec![]),
        };
        let tgt_type = match get_str(load, "tgt_type")
            .or_else(|| get_str(load, "expr_form"))
            .unwrap_or("glob")
        {
            t if t.eq_ignore_ascii_case("pillar") => "pillar_exact",
            t if t.eq_ignore_ascii_case("compound") => "compound_pillar_exact",
            t => t,
        };
        let minions = match self.check_minions(tgt, tgt_type, ":") {
            Ok(e) => e.minions,
            Err(e) => {
                tracing::warn!("mine.get from {asker}: {e}");
                return Value::Map(vec![]);
            }
        };
        let mut out: Vec<(Value, Value)> = Vec::new();
        for minion in &minions {
            let Some(Value::Map(mine)) = self.cache.mine(minion) else {
                continue;
            };
            for function in &functions {
                let Some((_, entry)) = mine.iter().find(|(k, _)| k.as_str() == Some(function))
                else {
                    continue;
                };
                let data = match acl_entry(entry) {
                    Some((data, allow)) => {
                        if let Some((allow_tgt, allow_type)) = allow {
                            let allowed = self
                                .check_minions(&allow_tgt, &allow_type, ":")
                                .map(|e| e.minions.iter().any(|m| m == asker))
                                .unwrap_or(false);
                            if !allowed {
                                continue;
                            }
                        }
                        data
                    }
                    None => entry.clone(),
                };
                if keyed {
                    let slot = match out.iter_mut().find(|(k, _)| k.as_str() == Some(function)) {
                        Some(slot) => slot,
                        None => {
                            out.push((Value::from(function.as_str()), Value::Map(vec![])));
                            out.last_mut().expect("just pushed")
                        }
                    };
                    if let Value::Map(per_minion) = &mut slot.1 {
                        per_minion.push((Value::from(minion.as_str()), data));
                    }
                } else {
                    out.push((Value::from(minion.as_str()), data));
                }
            }
        }
        Value::Map(out)
    }

    /// The master's `mine_get` option: `{minion-id regex: [function regex, ...]}`. Without it
    /// every function may be read; with it, only the functions some pattern for the asker
    /// allows (`None` when none is left).
    fn mine_get_acl(&self, asker: &str, functions: Vec<String>) -> Option<Vec<String>> {
        let Some(acl) = &self.cfg.mine_get else {
            return Some(functions);
        };
        let serde_json::Value::Object(acl) = acl else {
            return None;
        };
        let mut perms: Vec<Regex> = Vec::new();
        for (pattern, allowed) in acl {
            let matches_asker = anchored(pattern).is_some_and(|re| re.is_match(asker));
            if let (true, serde_json::Value::Array(list)) = (matches_asker, allowed) {
                perms.extend(list.iter().filter_map(|p| p.as_str().and_then(anchored)));
            }
        }
        let allowed: Vec<String> = functions
            .into_iter()
            .filter(|f| perms.iter().any(|re| re.is_match(f)))
            .collect();
        (!allowed.is_empty()).then_some(allowed)
    }
}

/// Python's `re.match`: the pattern must match at the start.
fn anchored(pattern: &str) -> Option<Regex> {
    Regex::new(&format!("^(?:{pattern})")).ok()
}

/// A mine entry stored with an access list: its data and its `(allow_tgt, allow_tgt_type)`.
fn acl_entry(entry: &Value) -> Option<(Value, Option<(Value, String)>)> {
    get(entry, ACL_ID)?;
    let data = get(entry, ACL_DATA).cloned().unwrap_or(Value::Nil);
    let allow = get(entry, "allow_tgt").map(|t| {
        (
            t.clone(),
            get_str(entry, "allow_tgt_type")
                .unwrap_or("glob")
                .to_string(),
        )
    });
    Some((data, allow))
}
