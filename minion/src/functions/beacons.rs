//! The `beacons` execution module: list and change the minion's beacons
//! ([`crate::beacons::Beacons`]), with Salt's return shapes and comments.

use rmpv::Value;
use serde_json::{json, Map, Value as Json};

use super::{CallState};
use super::args::{is_true, py_repr, py_str, Bound, Signature};
use super::{clean_kwargs, Context, FnError, Spec};
use crate::beacons::{module_of, Kind};

/// The functions of the `beacons` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Add,
    Delete,
    Disable,
    DisableBeacon,
    Enable,
    EnableBeacon,
    List,
    ListAvailable,
    Modify,
    Reset,
    Save,
}

const KW: Signature = Signature::new(&[], 0, false, true);
const NAME_KW: Signature = Signature::new(&["name"], 1, false, true);
const NAME_DATA_KW: Signature = Signature::new(&["name", "beacon_data"], 2, false, true);

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Add,
        Fun::Delete,
        Fun::Disable,
        Fun::DisableBeacon,
        Fun::Enable,
        Fun::EnableBeacon,
        Fun::List,
        Fun::ListAvailable,
        Fun::Modify,
        Fun::Reset,
        Fun::Save,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::Add => ("beacons.add", "add", NAME_DATA_KW, "
    Add a beacon on the minion: its name and its configuration (a list of
    dicts; beacon_module names the module when the name differs).

    CLI Example:

        salt '*' beacons.add load \"[{'averages': {'1m': [0.0, 2.0], '5m': [0.0, 2.0], '15m': [0.0, 2.0]}}]\"
    "),
            Fun::Delete => ("beacons.delete", "delete", NAME_KW, "
    Delete a beacon from the minion.

    CLI Example:

        salt '*' beacons.delete load
    "),
            Fun::Disable => ("beacons.disable", "disable", KW, "
    Disable all beacons on the minion.

    CLI Example:

        salt '*' beacons.disable
    "),
            Fun::DisableBeacon => ("beacons.disable_beacon", "disable_beacon", NAME_KW, "
    Disable one beacon on the minion.

    CLI Example:

        salt '*' beacons.disable_beacon load
    "),
            Fun::Enable => ("beacons.enable", "enable", KW, "
    Enable all beacons on the minion.

    CLI Example:

        salt '*' beacons.enable
    "),
            Fun::EnableBeacon => ("beacons.enable_beacon", "enable_beacon", NAME_KW, "
    Enable one beacon on the minion.

    CLI Example:

        salt '*' beacons.enable_beacon load
    "),
            Fun::List => ("beacons.list", "list_", Signature::new(&["return_yaml", "include_pillar", "include_opts"], 0, false, true), "
    List the beacons configured on the minion (YAML text unless
    return_yaml=False).

    CLI Example:

        salt '*' beacons.list
    "),
            Fun::ListAvailable => ("beacons.list_available", "list_available", Signature::new(&["return_yaml"], 0, false, true), "
    List the beacon modules this minion has.

    CLI Example:

        salt '*' beacons.list_available
    "),
            Fun::Modify => ("beacons.modify", "modify", NAME_DATA_KW, "
    Replace the configuration of a beacon.

    CLI Example:

        salt '*' beacons.modify load \"[{'averages': {'1m': [0.0, 3.0], '5m': [0.0, 3.0], '15m': [0.0, 3.0]}}]\"
    "),
            Fun::Reset => ("beacons.reset", "reset", KW, "
    Remove every beacon configured on the minion.

    CLI Example:

        salt '*' beacons.reset
    "),
            Fun::Save => ("beacons.save", "save", KW, "
    Save the beacons to minion.d/beacons.conf.

    CLI Example:

        salt '*' beacons.save
    "),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(self, ctx: &Context, b: &Bound, _st: &mut CallState) -> Result<Value, FnError> {
        let beacons = &ctx.services.beacons;
        let kwargs = clean_kwargs(b);
        let test = kwargs
            .get("test")
            .is_some_and(|v| v.as_bool() == Some(true));
        let name = b.get("name").map(py_str).unwrap_or_default();
        let data = b
            .get("beacon_data")
            .map(brine_protocol::payload::to_json)
            .unwrap_or(Json::Null);
        let return_yaml = b.get("return_yaml").is_none_or(|v| is_true(Some(v)));
        let yaml = |v: Json| {
            Json::from(brine_protocol::yaml::safe_dump(
                &json!({ "beacons": v }),
                brine_protocol::yaml::Style::Block(2),
            ))
        };
        let out = match self {
            Fun::List => {
                let listed = beacons.list(
                    b.get("include_opts").is_none_or(|v| is_true(Some(v))),
                    b.get("include_pillar").is_none_or(|v| is_true(Some(v))),
                );
                if return_yaml {
                    yaml(Json::Object(listed))
                } else {
                    Json::Object(listed)
                }
            }
            Fun::ListAvailable => {
                let names: Vec<Json> = Kind::ALL.iter().map(|k| Json::from(k.name())).collect();
                if return_yaml {
                    yaml(Json::Array(names))
                } else {
                    Json::Array(names)
                }
            }
            Fun::Add => {
                if beacons.list(true, true).contains_key(&name) {
                    json!({"comment": format!("Beacon {name} is already configured."), "result": true})
                } else {
                    let module = module_of(&name, &data);
                    match Kind::from_name(&module) {
                        None => {
                            json!({"comment": format!("Beacon \"{module}\" is not available."), "result": false})
                        }
                        Some(_) if test => {
                            json!({"comment": format!("Beacon: {name} would be added."), "result": true})
                        }
                        Some(kind) => match kind.validate(&data) {
                            Err(why) => json!({
                                "comment": format!("Beacon {name} configuration invalid, not adding.\n{why}"),
                                "result": false,
                            }),
                            Ok(()) => {
                                beacons.put(&name, data);
                                json!({"comment": format!("Added beacon: {name}."), "result": true})
                            }
                        },
                    }
                }
            }
            Fun::Modify => modify(ctx, &name, data, test),
            Fun::Delete => {
                if test {
                    json!({"comment": format!("Beacon: {name} would be deleted."), "result": true})
                } else {
                    beacons.delete(&name);
                    json!({"comment": format!("Deleted beacon: {name}."), "result": true})
                }
            }
            Fun::Enable | Fun::Disable => {
                let enable = self == Fun::Enable;
                let (word, past) = if enable {
                    ("enabled", "Enabled")
                } else {
                    ("disabled", "Disabled")
                };
                if test {
                    json!({"comment": format!("Beacons would be {word}."), "result": true})
                } else {
                    beacons.set_enabled(enable);
                    json!({"comment": format!("{past} beacons on minion."), "result": true})
                }
            }
            Fun::EnableBeacon | Fun::DisableBeacon => {
                let enable = self == Fun::EnableBeacon;
                let (word, past) = if enable {
                    ("enabled", "Enabled")
                } else {
                    ("disabled", "Disabled")
                };
                if name.is_empty() {
                    json!({"comment": "Beacon name is required.", "result": false})
                } else if test {
                    json!({"comment": format!("Beacon {name} would be {word}."), "result": true})
                } else if !beacons.set_beacon_enabled(&name, enable) {
                    json!({"comment": format!("Beacon {name} is not currently configured."), "result": false})
                } else {
                    json!({"comment": format!("{past} beacon {name} on minion."), "result": true})
                }
            }
            Fun::Reset => {
                if test {
                    json!({"comment": "Beacons would be reset.", "result": true})
                } else {
                    beacons.reset();
                    json!({"comment": "Beacon configuration reset.", "result": true})
                }
            }
            Fun::Save => match beacons.save() {
                Ok(path) => {
                    json!({"comment": format!("Beacons saved to {}.", path.display()), "result": true})
                }
                Err(why) => json!({"comment": why, "result": false}),
            },
        };
        Ok(brine_protocol::payload::from_json(&out))
    }
}

fn modify(ctx: &Context, name: &str, new: Json, test: bool) -> Json {
    let beacons = &ctx.services.beacons;
    let current = beacons.list(true, true);
    let Some(old) = current.get(name) else {
        return json!({"comment": format!("Beacon {name} is not configured."), "result": true});
    };
    if test {
        return json!({"comment": format!("Beacon: {name} would be modified."), "result": true});
    }
    let module = module_of(name, &new);
    let Some(kind) = Kind::from_name(&module) else {
        return json!({"comment": format!("Beacon \"{module}\" is not available."), "result": false});
    };
    if let Err(why) = kind.validate(&new) {
        return json!({
            "comment": format!("Beacon {name} configuration invalid, not modifying.\n{why}"),
            "result": false,
        });
    }
    if *old == new {
        return json!({"comment": format!("Job {name} in correct state"), "result": true});
    }
    if beacons.in_pillar(name) {
        return json!({"comment": format!("Cannot modify beacon item {name}, it is configured in pillar."), "result": false});
    }
    let diff = unified_diff(&lines(old), &lines(&new));
    beacons.put(name, new);
    json!({"comment": format!("Modified beacon: {name}."), "result": true, "changes": {"diff": diff}})
}

/// The `key:value` lines Salt diffs (values as Python prints them).
fn lines(config: &Json) -> Vec<String> {
    let mut out = Vec::new();
    if let Json::Array(items) = config {
        for item in items {
            if let Json::Object(m) = item {
                let m: &Map<String, Json> = m;
                for (k, v) in m {
                    let v = brine_protocol::payload::from_json(v);
                    let shown = match &v {
                        Value::String(_) => py_str(&v),
                        _ => py_repr(&v),
                    };
                    out.push(format!("{k}:{shown}\n"));
                }
            }
        }
    }
    out
}

/// A unified diff of two short line lists in one hunk (Python's `difflib.unified_diff`
/// with empty file names).
fn unified_diff(a: &[String], b: &[String]) -> String {
    // Longest common subsequence table.
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let range = |start: usize, len: usize| match len {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        _ => format!("{},{len}", start + 1),
    };
    let mut out = format!("--- \n+++ \n@@ -{} +{} @@\n", range(0, n), range(0, m));
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(' ');
            out.push_str(&a[i]);
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push('-');
            out.push_str(&a[i]);
            i += 1;
        } else {
            out.push('+');
            out.push_str(&b[j]);
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_matches_difflib_for_a_changed_config() {
        let old = json!([{"averages": {"1m": [0.0, 2.0]}}, {"interval": 5}]);
        let new = json!([{"averages": {"1m": [0.0, 3.0]}}, {"interval": 5}]);
        assert_eq!(
            unified_diff(&lines(&old), &lines(&new)),
            "--- \n+++ \n@@ -1,2 +1,2 @@\n-averages:{'1m': [0.0, 2.0]}\n+averages:{'1m': [0.0, 3.0]}\n interval:5\n"
        );
    }
}
