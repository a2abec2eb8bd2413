//! Top files: the pillar top (the `top.sls` of every pillar environment and the top files
//! they `include`, merged as Salt's `Pillar.merge_tops` does) and the state top (merged as
//! `HighState` does with `top_file_merging_strategy: merge`), matched against one minion.

use brine_protocol::payload::Value;
use brine_protocol::target::{self, MinionData};

/// A top file that is not a mapping of saltenvs to mappings of targets to lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// One target of a top file: its expression, the `match:`/`order:` items and the SLS names.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub expr: String,
    /// The matcher (`match:`, the last one given), `compound` by default.
    pub matcher: String,
    /// The SLS names (or globs), in order, without duplicates.
    pub sls: Vec<String>,
    /// What Salt keeps of the target for `pillar.show_top`: the `match` items, then the names.
    pub items: Vec<Value>,
}

/// The merged top: saltenv by saltenv (in the order they first appear), targets sorted by
/// their `order:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Top {
    pub envs: Vec<(String, Vec<Target>)>,
    /// SLS names marked `ignore_missing: True`, by saltenv.
    pub ignore_missing: Vec<(String, String)>,
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.as_str().unwrap_or_default().to_string(),
        other => brine_protocol::payload::to_json(other).to_string(),
    }
}

fn entries(v: &Value) -> Option<&[(Value, Value)]> {
    match v {
        Value::Map(m) => Some(m),
        _ => None,
    }
}

impl Top {
    /// Merge rendered top files (in the order they were rendered). A later file's
    /// saltenv/target replaces an earlier one's whole. `Err` when a top file is not shaped
    /// as one (Salt: "Error encountered while rendering pillar top file.").
    pub fn merge(tops: &[Value]) -> Result<Top, Malformed> {
        let mut envs: Vec<(String, Vec<(Target, i64)>)> = Vec::new();
        let mut ignore_missing = Vec::new();
        for top in tops {
            let top = entries(top).ok_or(Malformed)?;
            for (env, targets) in top {
                let env = text_of(env);
                if env == "include" {
                    continue;
                }
                let targets = entries(targets).ok_or(Malformed)?;
                let slot = match envs.iter().position(|(e, _)| *e == env) {
                    Some(i) => i,
                    None => {
                        envs.push((env.clone(), Vec::new()));
                        envs.len() - 1
                    }
                };
                for (expr, comps) in targets {
                    let Value::Array(comps) = comps else {
                        return Err(Malformed);
                    };
                    let mut target = Target {
                        expr: text_of(expr),
                        matcher: "compound".into(),
                        sls: Vec::new(),
                        items: Vec::new(),
                    };
                    let mut order = 0;
                    let mut ignore = false;
                    for comp in comps {
                        match comp {
                            Value::Map(m) => {
                                for (k, v) in m {
                                    match k.as_str() {
                                        Some("match") => {
                                            target.matcher = text_of(v);
                                        }
                                        Some("order") => {
                                            order = brine_protocol::loads::int(v).unwrap_or(0);
                                        }
                                        Some("ignore_missing") => {
                                            ignore |= brine_protocol::payload::py_truthy(v);
                                        }
                                        _ => {}
                                    }
                                }
                                if m.iter().any(|(k, _)| k.as_str() == Some("match")) {
                                    target.items.push(comp.clone());
                                }
                            }
                            Value::String(s) => {
                                let name = s.as_str().unwrap_or_default().to_string();
                                if !target.sls.contains(&name) {
                                    target.sls.push(name);
                                }
                            }
                            _ => {}
                        }
                    }
                    target
                        .items
                        .extend(target.sls.iter().map(|s| Value::from(s.as_str())));
                    if ignore {
                        ignore_missing.extend(target.sls.iter().map(|s| (env.clone(), s.clone())));
                    }
                    let list = &mut envs[slot].1;
                    match list.iter_mut().find(|(t, _)| t.expr == target.expr) {
                        Some(existing) => *existing = (target, order),
                        None => list.push((target, order)),
                    }
                }
            }
        }
        Ok(Top {
            envs: envs
                .into_iter()
                .map(|(env, mut targets)| {
                    targets.sort_by_key(|(_, order)| *order);
                    (env, targets.into_iter().map(|(t, _)| t).collect())
                })
                .collect(),
            ignore_missing,
        })
    }

    /// The state top: each saltenv's rendered top files, `base` first. Salt's `merge`
    /// strategy: `base`'s top files may name any saltenv; another saltenv's top file only
    /// counts for its own saltenv, and only when `base` did not name it.
    pub fn merge_states(tops: &[(String, Vec<Value>)]) -> Result<Top, Malformed> {
        let mut picked: Vec<Value> = Vec::new();
        let mut named_by_base: Vec<String> = Vec::new();
        for (_, files) in tops.iter().filter(|(e, _)| e == "base") {
            for top in files {
                let top = entries(top).ok_or(Malformed)?;
                named_by_base.extend(top.iter().map(|(k, _)| text_of(k)));
                picked.push(Value::Map(top.to_vec()));
            }
        }
        for (env, files) in tops.iter().filter(|(e, _)| e != "base") {
            for top in files {
                let top = entries(top).ok_or(Malformed)?;
                let own: Vec<(Value, Value)> = top
                    .iter()
                    .filter(|(k, _)| text_of(k) == *env && !named_by_base.contains(env))
                    .cloned()
                    .collect();
                if !own.is_empty() {
                    picked.push(Value::Map(own));
                }
            }
        }
        Top::merge(&picked)
    }

    /// The SLS names this minion gets, by saltenv (Salt's `top_matches`).
    pub fn matches(&self, me: &Matcher) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for (env, targets) in &self.envs {
            if me.pillarenv.is_some_and(|p| p != env) {
                continue;
            }
            for target in targets {
                if !me.matches(&target.matcher, &target.expr) {
                    continue;
                }
                let list = match out.iter().position(|(e, _)| e == env) {
                    Some(i) => &mut out[i].1,
                    None => {
                        out.push((env.clone(), Vec::new()));
                        &mut out.last_mut().expect("just pushed").1
                    }
                };
                for sls in &target.sls {
                    if !list.contains(sls) {
                        list.push(sls.clone());
                    }
                }
            }
        }
        out
    }

    /// The top as Salt's `pillar.show_top` prints it.
    pub fn to_value(&self) -> Value {
        Value::Map(
            self.envs
                .iter()
                .map(|(env, targets)| {
                    (
                        Value::from(env.as_str()),
                        Value::Map(
                            targets
                                .iter()
                                .map(|t| {
                                    (Value::from(t.expr.as_str()), Value::Array(t.items.clone()))
                                })
                                .collect(),
                        ),
                    )
                })
                .collect(),
        )
    }
}

/// The minion a top is matched against (Salt's `confirm_top` with the minion's opts).
pub struct Matcher<'a> {
    pub id: &'a str,
    pub grains: &'a Value,
    /// The pillar the `I@`/`pillar` matchers see (the external pillar with
    /// `ext_pillar_first`, else nothing).
    pub pillar: Option<&'a Value>,
    pub pillarenv: Option<&'a str>,
    pub nodegroups: &'a std::collections::BTreeMap<String, Value>,
}

impl Matcher<'_> {
    /// Does target `expr` of matcher `matcher` match this minion? A target that does not
    /// parse matches nothing (Salt logs it).
    pub fn matches(&self, matcher: &str, expr: &str) -> bool {
        let me = MinionData {
            id: self.id,
            grains: Some(self.grains),
            pillar: self.pillar,
        };
        let tgt = Value::from(expr);
        let resolved = match matcher {
            "compound" | "nodegroup" => target::resolve_nodegroups(&tgt, matcher, self.nodegroups),
            other => Ok((tgt, other.to_string())),
        };
        let result =
            resolved.and_then(|(tgt, tgt_type)| target::matches(&tgt, &tgt_type, ":", &me));
        match result {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(
                    "pillar top target {expr:?} ({matcher}) for {}: {e}",
                    self.id
                );
                false
            }
        }
    }
}
