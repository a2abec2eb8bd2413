//! The `host` state module: `host.present`, `host.absent` and `host.only`, through the
//! minion's `hosts` execution module, with Salt's comments and changes. Where Salt walks a
//! Python set (the names to add, the comments to set, the names to remove), this walks them
//! in the order they were found: the hosts file's order after the addresses asked for.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::{json, Map, Value};

use super::{ret, Accepts, Call, Spec};
use crate::verify::{py_text, py_type};
use brine_protocol::payload::json_truthy;
use brine_protocol::pyeq::py_eq_json as py_eq;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "present",
        required: &["name", "ip"],
        accepts: Accepts::Only(&["name", "ip", "comment", "clean"]),
        run: present,
    },
    Spec {
        name: "absent",
        required: &["name", "ip"],
        accepts: Accepts::Only(&["name", "ip"]),
        run: absent,
    },
    Spec {
        name: "only",
        required: &["name", "hostnames"],
        accepts: Accepts::Only(&["name", "hostnames"]),
        run: only,
    },
];

/// Salt's `salt.utils.validate.net.ip_addr`: an IPv4 or IPv6 address, with an optional
/// `/mask`.
fn ip_addr(addr: &str) -> bool {
    fn valid(addr: &str, max: i64, parses: fn(&str) -> bool) -> bool {
        let (ip, mask) = match addr.rsplit_once('/') {
            Some((ip, mask)) => (ip, mask.trim().replace('_', "")),
            None => (addr, max.to_string()),
        };
        parses(ip) && mask.parse::<i64>().is_ok_and(|m| (1..=max).contains(&m))
    }
    valid(addr, 32, |ip| ip.parse::<Ipv4Addr>().is_ok())
        || valid(addr, 128, |ip| ip.parse::<Ipv6Addr>().is_ok())
}

/// A set that keeps the order items were added in.
struct Ordered<T>(Vec<T>);

impl<T: PartialEq> Ordered<T> {
    fn add(&mut self, item: T) {
        if !self.0.contains(&item) {
            self.0.push(item);
        }
    }
}

/// `ret["changes"].setdefault(kind, {}).setdefault(addr, []).append(item)`.
fn record(changes: &mut Map<String, Value>, kind: &str, addr: &Value, item: &Value) {
    let by_addr = changes
        .entry(kind)
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(by_addr) = by_addr {
        if let Some(items) = by_addr
            .entry(py_text(addr))
            .or_insert_with(|| json!([]))
            .as_array_mut()
        {
            items.push(item.clone());
        }
    }
}

/// Whether `name` is one of the aliases of a `hosts.list_hosts` entry.
fn has_alias(info: &Value, name: &str) -> bool {
    info.get("aliases")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(name)))
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let ips: Vec<Value> = match c.low.get("ip") {
        Some(Value::Array(items)) => items.clone(),
        Some(other) => vec![other.clone()],
        None => vec![Value::Null],
    };
    let comment = c.low.get("comment").cloned().unwrap_or(json!(""));
    let clean = c.flag("clean", false);
    let mut out = ret(&name, json!(true), "", json!({}));
    let all_hosts = c.host.call("hosts.list_hosts", &[], &Map::new())?;
    let empty = Map::new();
    let all_hosts = all_hosts.as_object().unwrap_or(&empty);
    let mut comments = Vec::new();
    let mut warnings = Vec::new();
    let mut to_add = Ordered(Vec::new());
    let mut to_remove = Ordered(Vec::new());
    let mut update_comment = Ordered(Vec::new());
    let listed = |addr: &Value| addr.as_str().is_some_and(|a| all_hosts.contains_key(a));
    for addr in ips.iter().filter(|a| !listed(a)) {
        to_add.add(addr.clone());
    }
    if json_truthy(&comment) {
        for addr in ips.iter().filter(|a| !listed(a)) {
            update_comment.add(addr.clone());
        }
    }
    for (addr, info) in all_hosts {
        let addr_value = json!(addr);
        let wanted = ips.iter().any(|ip| py_eq(ip, &addr_value));
        if !wanted {
            if has_alias(info, &name) {
                if clean {
                    to_remove.add(addr_value);
                } else {
                    warnings.push(json!(format!(
                        "Host {name} present for IP address {addr}. To get rid of this warning, either run this state with 'clean' set to True to remove {name} from {addr}, or add {addr} to the 'ip' argument."
                    )));
                }
            }
        } else if has_alias(info, &name) {
            let current = info.get("comment");
            let differs = current.is_some_and(|cur| !py_eq(cur, &comment));
            if json_truthy(&comment) && (differs || current.is_none()) {
                update_comment.add(addr_value);
            } else {
                comments.push(format!("Host {name} ({addr}) already present"));
            }
        } else if ip_addr(addr) {
            to_add.add(addr_value.clone());
            if json_truthy(&comment) {
                update_comment.add(addr_value);
            }
        } else {
            out.insert("result".into(), json!(false));
            comments.push(format!("Invalid IP Address for {name} ({addr})"));
        }
    }
    let mut changes = Map::new();
    let name_value = json!(name);
    for addr in &to_add.0 {
        let shown = py_text(addr);
        if c.test {
            out.insert("result".into(), Value::Null);
            comments.push(format!("Host {name} ({shown}) would be added"));
        } else if json_truthy(&c.host.call(
            "hosts.add_host",
            &[addr.clone(), name_value.clone()],
            &Map::new(),
        )?) {
            comments.push(format!("Added host {name} ({shown})"));
        } else {
            out.insert("result".into(), json!(false));
            comments.push(format!("Failed to add host {name} ({shown})"));
            continue;
        }
        record(&mut changes, "added", addr, &name_value);
    }
    let comment_text = py_text(&comment);
    for addr in &update_comment.0 {
        let shown = py_text(addr);
        if c.test {
            comments.push(format!(
                "Comment for {shown} ({comment_text}) would be added"
            ));
        } else if json_truthy(&c.host.call(
            "hosts.set_comment",
            &[addr.clone(), comment.clone()],
            &Map::new(),
        )?) {
            comments.push(format!("Set comment for host {shown} ({comment_text})"));
        } else {
            out.insert("result".into(), json!(false));
            comments.push(format!(
                "Failed to add comment for host {shown} ({comment_text})"
            ));
            continue;
        }
        record(&mut changes, "comment_added", addr, &comment);
    }
    for addr in &to_remove.0 {
        let shown = py_text(addr);
        if c.test {
            out.insert("result".into(), Value::Null);
            comments.push(format!("Host {name} ({shown}) would be removed"));
        } else if json_truthy(&c.host.call(
            "hosts.rm_host",
            &[addr.clone(), name_value.clone()],
            &Map::new(),
        )?) {
            comments.push(format!("Removed host {name} ({shown})"));
        } else {
            out.insert("result".into(), json!(false));
            comments.push(format!("Failed to remove host {name} ({shown})"));
            continue;
        }
        record(&mut changes, "removed", addr, &name_value);
    }
    out.insert("changes".into(), Value::Object(changes));
    out.insert("comment".into(), json!(comments.join("\n")));
    if !warnings.is_empty() {
        out.insert("warnings".into(), Value::Array(warnings));
    }
    Ok(out)
}

fn absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let ips: Vec<Value> = match c.low.get("ip") {
        Some(Value::Array(items)) => items.clone(),
        Some(other) => vec![other.clone()],
        None => vec![Value::Null],
    };
    let mut out = ret(&name, Value::Null, "", json!({}));
    let mut comments = Vec::new();
    for ip in &ips {
        let shown = py_text(ip);
        let args = [ip.clone(), json!(name)];
        if !json_truthy(&c.host.call("hosts.has_pair", &args, &Map::new())?) {
            out.insert("result".into(), json!(true));
            comments.push(format!("Host {name} ({shown}) already absent"));
        } else if c.test {
            comments.push(format!("Host {name} ({shown}) needs to be removed"));
        } else if json_truthy(&c.host.call("hosts.rm_host", &args, &Map::new())?) {
            out.insert("changes".into(), json!({"host": name}));
            out.insert("result".into(), json!(true));
            comments.push(format!("Removed host {name} ({shown})"));
        } else {
            out.insert("result".into(), json!(false));
            comments.push("Failed to remove host".to_string());
        }
    }
    out.insert("comment".into(), json!(comments.join("\n")));
    Ok(out)
}

fn only(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let hostnames = c.low.get("hostnames").cloned().unwrap_or(Value::Null);
    let names: Vec<String> = match &hostnames {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s
                    .trim_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
                    .to_string()),
                other => Err(format!(
                    "AttributeError: '{}' object has no attribute 'strip'",
                    py_type(other)
                )),
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err(format!(
                "TypeError: '{}' object is not iterable",
                py_type(other)
            ))
        }
    };
    let mut out = ret(&name, Value::Null, "", json!({}));
    let current = c
        .host
        .call("hosts.get_alias", &[json!(name)], &Map::new())?;
    let old = current
        .as_array()
        .map(|a| a.iter().map(py_text).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let new = names.join(" ");
    if old == new {
        out.insert("result".into(), json!(true));
        out.insert(
            "comment".into(),
            json!(format!("IP address {name} already set to \"{new}\"")),
        );
        return Ok(out);
    }
    if c.test {
        out.insert(
            "comment".into(),
            json!(format!("Would change {name} from \"{old}\" to \"{new}\"")),
        );
        return Ok(out);
    }
    let result = c
        .host
        .call("hosts.set_host", &[json!(name), json!(new)], &Map::new())?;
    out.insert("result".into(), result.clone());
    if !json_truthy(&result) {
        out.insert(
            "comment".into(),
            json!(format!(
                "hosts.set_host failed to change {name} from \"{old}\" to \"{new}\""
            )),
        );
        return Ok(out);
    }
    out.insert(
        "comment".into(),
        json!(format!(
            "successfully changed {name} from \"{old}\" to \"{new}\""
        )),
    );
    out.insert(
        "changes".into(),
        json!({ name.clone(): {"old": old, "new": new} }),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_validated_like_salt() {
        for good in [
            "10.0.0.1",
            "10.0.0.0/8",
            "::1",
            "fe80::1/64",
            "::ffff:1.2.3.4",
        ] {
            assert!(ip_addr(good), "{good}");
        }
        for bad in [
            "10.0.0.256",
            "10.0.0.1/0",
            "10.0.0.1/33",
            "host",
            "::1/129",
            "01.2.3.4",
        ] {
            assert!(!ip_addr(bad), "{bad}");
        }
    }

    #[test]
    fn changes_are_grouped_by_address() {
        let mut changes = Map::new();
        record(&mut changes, "added", &json!("10.0.0.1"), &json!("a"));
        record(&mut changes, "added", &json!("10.0.0.1"), &json!("b"));
        record(&mut changes, "removed", &json!("10.0.0.2"), &json!("a"));
        assert_eq!(
            Value::Object(changes),
            json!({"added": {"10.0.0.1": ["a", "b"]}, "removed": {"10.0.0.2": ["a"]}})
        );
        let mut set = Ordered(Vec::new());
        for x in ["b", "a", "b"] {
            set.add(x);
        }
        assert_eq!(set.0, ["b", "a"]);
    }
}
