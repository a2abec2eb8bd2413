//! The `ssh_known_hosts` state module: `present` and `absent` through the minion's `ssh`
//! known_hosts functions (`check_known_host` under test=True, `set_known_host`,
//! `get_known_host_entries`, `rm_known_host`), with Salt's comments and changes.

use serde_json::{json, Map, Value};

use super::{exc_text, ret, Accepts, Call, Spec};
use crate::verify::py_text;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "present",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "user",
            "fingerprint",
            "key",
            "port",
            "enc",
            "config",
            "hash_known_hosts",
            "timeout",
            "fingerprint_hash_type",
        ]),
        run: present,
    },
    Spec {
        name: "absent",
        required: &["name"],
        accepts: Accepts::Only(&["name", "user", "config"]),
        run: absent,
    },
];

/// The known_hosts file a state names: `config`, else the system's file without a user and
/// the user's own with one.
fn config(c: &Call) -> String {
    match c.text("config").filter(|s| !s.is_empty()) {
        Some(config) => config,
        None if c.flag("user", false) => ".ssh/known_hosts".into(),
        None => "/etc/ssh/ssh_known_hosts".into(),
    }
}

/// The state's arguments named in `keys` (those given) with `hostname` and `config`.
fn kwargs(c: &Call, keys: &[&str], config: &str) -> Map<String, Value> {
    let mut kw: Map<String, Value> = keys
        .iter()
        .filter_map(|k| c.low.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    kw.insert("hostname".into(), json!(c.name()));
    kw.insert("config".into(), json!(config));
    kw
}

/// The state's `user`, `null` when not given.
fn user(c: &Call) -> Value {
    c.low.get("user").cloned().unwrap_or(Value::Null)
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let config = config(c);
    let start = if c.test { Value::Null } else { json!(true) };
    let answer =
        |result: Value, comment: String, changes: Value| Ok(ret(&name, result, comment, changes));
    if !c.flag("user", false) && !config.starts_with('/') {
        return answer(
            json!(false),
            "If not specifying a \"user\", specify an absolute \"config\".".into(),
            json!({}),
        );
    }
    let (key, fingerprint, enc) = (
        c.flag("key", false),
        c.flag("fingerprint", false),
        c.flag("enc", false),
    );
    if c.test {
        if key && fingerprint {
            return answer(
                json!(false),
                "Specify either \"key\" or \"fingerprint\", not both.".into(),
                json!({}),
            );
        }
        if key && !enc {
            return answer(
                json!(false),
                "Required argument \"enc\" if using \"key\" argument.".into(),
                json!({}),
            );
        }
        let mut kw = kwargs(
            c,
            &["key", "fingerprint", "port", "fingerprint_hash_type"],
            &config,
        );
        kw.insert("user".into(), user(c));
        let found = c
            .host
            .call("ssh.check_known_host", &[], &kw)
            .map_err(|e| exc_text(&e).to_string())?;
        if let Some(error) = found.get("error") {
            return answer(json!(false), py_text(error), json!({}));
        }
        return match found.as_str() {
            Some("exists") => answer(
                json!(true),
                format!("Host {name} is already in {config}"),
                json!({}),
            ),
            Some("add") => answer(
                start,
                format!("Key for {name} is set to be added to {config}"),
                json!({}),
            ),
            _ => answer(
                start,
                format!("Key for {name} is set to be updated in {config}"),
                json!({}),
            ),
        };
    }
    let mut kw = kwargs(
        c,
        &[
            "fingerprint",
            "key",
            "port",
            "enc",
            "hash_known_hosts",
            "timeout",
            "fingerprint_hash_type",
        ],
        &config,
    );
    kw.insert("user".into(), user(c));
    let set = c
        .host
        .call("ssh.set_known_host", &[], &kw)
        .map_err(|e| exc_text(&e).to_string())?;
    let status = set.get("status").map(py_text).unwrap_or_default();
    if status == "exists" {
        return answer(
            start,
            format!("{name} already exists in {config}"),
            json!({}),
        );
    }
    if status == "error" {
        let error = set.get("error").map(py_text).unwrap_or_default();
        return answer(json!(false), error, json!({}));
    }
    let changes = json!({
        "old": set.get("old").cloned().unwrap_or(Value::Null),
        "new": set.get("new").cloned().unwrap_or(Value::Null),
    });
    let first = |field: &str| {
        set.get("new")
            .and_then(|n| n.get(0))
            .and_then(|e| e.get(field))
            .map(py_text)
            .unwrap_or_default()
    };
    let comment = if key {
        format!("{name}'s key saved to {config} (key: {})", first("key"))
    } else if fingerprint {
        format!(
            "{name}'s key saved to {config} (fingerprint: {})",
            first("fingerprint")
        )
    } else if enc {
        let enc = c.text("enc").unwrap_or_default();
        format!(
            "{name}'s {enc} key saved to {config} (key: {})",
            first("key")
        )
    } else {
        format!("{name}'s key(s) saved to {config}")
    };
    answer(start, comment, changes)
}

fn absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let config = config(c);
    if !c.flag("user", false) && !config.starts_with('/') {
        return Ok(ret(
            &name,
            json!(false),
            "If not specifying a \"user\", specify an absolute \"config\".",
            json!({}),
        ));
    }
    let mut kw = kwargs(c, &[], &config);
    kw.insert("user".into(), user(c));
    let known = c
        .host
        .call("ssh.get_known_host_entries", &[], &kw)
        .map_err(|e| exc_text(&e).to_string())?;
    if !brine_protocol::payload::json_truthy(&known) {
        return Ok(ret(&name, json!(true), "Host is already absent", json!({})));
    }
    if c.test {
        return Ok(ret(
            &name,
            Value::Null,
            format!("Key for {name} is set to be removed from {config}"),
            json!({}),
        ));
    }
    let removed = c
        .host
        .call("ssh.rm_known_host", &[], &kw)
        .map_err(|e| exc_text(&e).to_string())?;
    if removed.get("status").map(py_text).as_deref() == Some("error") {
        let error = removed.get("error").map(py_text).unwrap_or_default();
        return Ok(ret(&name, json!(false), error, json!({})));
    }
    let comment = removed.get("comment").map(py_text).unwrap_or_default();
    Ok(ret(
        &name,
        json!(true),
        comment,
        json!({"old": known, "new": null}),
    ))
}
