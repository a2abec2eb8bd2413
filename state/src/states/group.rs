//! The `group` state module: `group.present` and `group.absent`, through the minion's
//! `group` execution module, with Salt's comments and changes.

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};
use crate::verify::{py_repr, py_text};

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "present",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "gid",
            "system",
            "addusers",
            "delusers",
            "members",
            "non_unique",
            "local",
        ]),
        run: present,
    },
    Spec {
        name: "absent",
        required: &["name"],
        accepts: Accepts::Only(&["name", "local"]),
        run: absent,
    },
];

/// The items of a list argument as Python iterates them (a string gives its characters).
pub(crate) fn items(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().map(py_text).collect(),
        Value::String(s) => s.chars().map(String::from).collect(),
        Value::Null => Vec::new(),
        other => vec![py_text(other)],
    }
}

use brine_protocol::pyeq::py_eq_json as py_eq;

/// Python's `int(v)` for a gid.
pub(crate) fn py_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        Value::Bool(b) => Some(i64::from(*b)),
        Value::String(s) => s.trim().replace('_', "").parse().ok(),
        _ => None,
    }
}

fn members_of(info: &Value) -> Vec<String> {
    info.get("members").map(items).unwrap_or_default()
}

/// One change: its key, its value, and the text Salt's comment shows for it.
type Change = (String, Value, String);

/// What the group is asked for.
struct Wanted {
    gid: Option<Value>,
    addusers: Option<Vec<String>>,
    delusers: Option<Vec<String>>,
    members: Option<Vec<String>>,
}

/// Salt's `_changes`: `None` when the group does not exist, else what would change (in
/// Salt's order), each with the text Salt's comment shows for it.
fn changes(c: &Call, name: &str, w: &Wanted) -> Result<Option<Vec<Change>>, String> {
    let info = c.host.call("group.info", &[json!(name)], &Map::new())?;
    if info.as_object().is_none_or(Map::is_empty) {
        return Ok(None);
    }
    let current = members_of(&info);
    let mut change = Vec::new();
    if let Some(gid) = w
        .gid
        .as_ref()
        .filter(|g| brine_protocol::payload::json_truthy(g))
    {
        match py_int(gid) {
            Some(n) => {
                if info.get("gid").and_then(Value::as_i64) != Some(n) {
                    change.push(("gid".into(), json!(n), n.to_string()));
                }
            }
            None => {
                return Ok(Some(vec![
                    ("result".into(), json!(false), "False".into()),
                    ("comment".into(), json!("Invalid gid"), "Invalid gid".into()),
                ]))
            }
        }
    }
    let differs = |wanted: &[String]| {
        current.iter().any(|m| !wanted.contains(m)) || wanted.iter().any(|m| !current.contains(m))
    };
    match &w.members {
        Some(m) if m.is_empty() && differs(m) => {
            // Salt puts a set here; its order is Python's hash order.
            let mut set = current.clone();
            set.sort();
            set.dedup();
            let text = format!(
                "{{{}}}",
                set.iter()
                    .map(|s| py_repr(&json!(s)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            change.push(("delusers".into(), json!(set), text));
        }
        Some(m) if !m.is_empty() && differs(m) => {
            change.push(("members".into(), json!(m), py_repr(&json!(m))));
        }
        _ => {}
    }
    if let Some(add) = w.addusers.as_ref().filter(|a| !a.is_empty()) {
        let to_add: Vec<&String> = add.iter().filter(|u| !current.contains(u)).collect();
        if !to_add.is_empty() {
            change.push(("addusers".into(), json!(to_add), py_repr(&json!(to_add))));
        }
    }
    if let Some(del) = w.delusers.as_ref().filter(|d| !d.is_empty()) {
        let to_del: Vec<&String> = del.iter().filter(|u| current.contains(u)).collect();
        if !to_del.is_empty() {
            // Replaces an earlier `delusers` entry, keeping its place (a Python dict).
            let entry = (
                "delusers".to_string(),
                json!(to_del),
                py_repr(&json!(to_del)),
            );
            match change.iter_mut().find(|(k, _, _)| k == "delusers") {
                Some(slot) => *slot = entry,
                None => change.push(entry),
            }
        }
    }
    Ok(Some(change))
}

fn as_map(change: &[Change]) -> Value {
    Value::Object(
        change
            .iter()
            .map(|(k, v, _)| (k.clone(), v.clone()))
            .collect(),
    )
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let mut out = ret(
        &name,
        json!(true),
        format!("Group {name} is present and up to date"),
        json!({}),
    );
    let w = Wanted {
        gid: c.arg("gid").cloned(),
        addusers: c.arg("addusers").map(items),
        delusers: c.arg("delusers").map(items),
        members: c.arg("members").map(items),
    };
    if w.members.is_some() && (w.addusers.is_some() || w.delusers.is_some()) {
        out.insert("result".into(), Value::Null);
        out.insert(
            "comment".into(),
            json!("Error: Conflicting options \"members\" with \"addusers\" and/or \"delusers\" can not be used together. "),
        );
        return Ok(out);
    }
    if let (Some(add), Some(del)) = (&w.addusers, &w.delusers) {
        if add.iter().any(|u| del.contains(u)) {
            out.insert("result".into(), Value::Null);
            out.insert(
                "comment".into(),
                json!("Error. Same user(s) can not be added and deleted simultaneously"),
            );
            return Ok(out);
        }
    }
    let non_unique = c.flag("non_unique", false);
    match changes(c, &name, &w)? {
        Some(change) if !change.is_empty() => {
            let mut comment =
                String::from("The following group attributes are set to be changed:\n");
            for (key, _, text) in &change {
                comment.push_str(&format!("{key}: {text}\n"));
            }
            if c.test {
                out.insert("result".into(), Value::Null);
                out.insert("comment".into(), json!(comment));
                return Ok(out);
            }
            for (key, val, _) in &change {
                match key.as_str() {
                    "gid" => {
                        let mut kw = Map::new();
                        kw.insert("non_unique".into(), json!(non_unique));
                        let gid = w.gid.clone().unwrap_or(Value::Null);
                        c.host.call("group.chgid", &[json!(name), gid], &kw)?;
                    }
                    "addusers" | "delusers" => {
                        let fun = if key == "addusers" {
                            "group.adduser"
                        } else {
                            "group.deluser"
                        };
                        for user in items(val) {
                            c.host.call(fun, &[json!(name), json!(user)], &Map::new())?;
                        }
                    }
                    "members" => {
                        let list = w.members.clone().unwrap_or_default().join(",");
                        c.host
                            .call("group.members", &[json!(name), json!(list)], &Map::new())?;
                    }
                    _ => {}
                }
            }
            match changes(c, &name, &w)? {
                Some(left) if !left.is_empty() => {
                    comment.push_str("Some changes could not be applied");
                    out.insert("result".into(), json!(false));
                    out.insert("changes".into(), json!({"Failed": as_map(&left)}));
                }
                _ => {
                    out.insert(
                        "changes".into(),
                        json!({"Final": "All changes applied successfully"}),
                    );
                }
            }
            out.insert("comment".into(), json!(comment));
            Ok(out)
        }
        Some(_) => Ok(out),
        None => create(c, &name, &w, non_unique, out),
    }
}

fn create(
    c: &Call,
    name: &str,
    w: &Wanted,
    non_unique: bool,
    mut out: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    if c.test {
        out.insert("result".into(), Value::Null);
        out.insert(
            "comment".into(),
            json!(format!("Group {name} set to be added")),
        );
        return Ok(out);
    }
    if let (Some(gid), false) = (&w.gid, non_unique) {
        let all = c.host.call("group.getent", &[], &Map::new())?;
        let taken = all.as_array().and_then(|groups| {
            groups
                .iter()
                .find(|g| g.get("gid").is_some_and(|v| py_eq(v, gid)))
                .map(|g| g.get("name").map(py_text).unwrap_or_default())
        });
        if let Some(other) = taken {
            out.insert("result".into(), json!(false));
            out.insert(
                "comment".into(),
                json!(format!(
                    "Group {name} is not present but gid {} is already taken by group {other}",
                    py_text(gid)
                )),
            );
            return Ok(out);
        }
    }
    let mut kw = Map::new();
    kw.insert("gid".into(), w.gid.clone().unwrap_or(Value::Null));
    kw.insert("system".into(), json!(c.flag("system", false)));
    kw.insert("non_unique".into(), json!(non_unique));
    kw.insert("local".into(), json!(c.flag("local", false)));
    let added = c.host.call("group.add", &[json!(name)], &kw)?;
    if !brine_protocol::payload::json_truthy(&added) {
        out.insert("result".into(), json!(false));
        out.insert(
            "comment".into(),
            json!(format!("Failed to create new group {name}")),
        );
        return Ok(out);
    }
    let mut grp_members = None;
    if let Some(m) = w.members.as_ref().filter(|m| !m.is_empty()) {
        grp_members = Some(m.join(","));
    }
    if let Some(a) = w.addusers.as_ref().filter(|a| !a.is_empty()) {
        grp_members = Some(a.join(","));
    }
    if let Some(list) = grp_members.filter(|l| !l.is_empty()) {
        c.host
            .call("group.members", &[json!(name), json!(list)], &Map::new())?;
    }
    out.insert("comment".into(), json!(format!("New group {name} created")));
    out.insert(
        "changes".into(),
        c.host.call("group.info", &[json!(name)], &Map::new())?,
    );
    if let Some(left) = changes(c, name, w)?.filter(|l| !l.is_empty()) {
        out.insert("result".into(), json!(false));
        out.insert(
            "comment".into(),
            json!(format!(
                "Group {name} has been created but, some changes could not be applied"
            )),
        );
        out.insert("changes".into(), json!({"Failed": as_map(&left)}));
    }
    Ok(out)
}

fn absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let mut out = ret(&name, json!(true), "", json!({}));
    let info = c.host.call("group.info", &[json!(name)], &Map::new())?;
    if info.as_object().is_none_or(Map::is_empty) {
        out.insert("comment".into(), json!("Group not present"));
        return Ok(out);
    }
    if c.test {
        out.insert("result".into(), Value::Null);
        out.insert(
            "comment".into(),
            json!(format!("Group {name} is set for removal")),
        );
        return Ok(out);
    }
    let mut kw = Map::new();
    kw.insert("local".into(), json!(c.flag("local", false)));
    let removed = c.host.call("group.delete", &[json!(name)], &kw)?;
    out.insert("result".into(), removed.clone());
    if brine_protocol::payload::json_truthy(&removed) {
        out.insert("changes".into(), json!({name.clone(): ""}));
        out.insert("comment".into(), json!(format!("Removed group {name}")));
    } else {
        out.insert(
            "comment".into(),
            json!(format!("Failed to remove group {name}")),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_iteration_and_equality() {
        assert_eq!(items(&json!(["a", 1])), ["a", "1"]);
        assert_eq!(items(&json!("ab")), ["a", "b"]);
        assert!(py_eq(&json!(2000), &json!(2000.0)));
        assert!(!py_eq(&json!("2000"), &json!(2000)));
        assert_eq!(py_int(&json!(" 12 ")), Some(12));
        assert_eq!(py_int(&json!("x")), None);
    }
}
