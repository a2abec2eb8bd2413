//! The `locale` state module: `locale.system` (the system's LANG) and `locale.present` (a
//! generated locale) through the minion's `locale` execution module, with Salt's comments
//! and changes.

use serde_json::{json, Map, Value};

use super::{exc_text, ret, Accepts, Call, Spec};
use crate::verify::py_text;
use brine_protocol::payload::json_truthy;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "system",
        required: &["name"],
        accepts: Accepts::Only(&["name"]),
        run: system,
    },
    Spec {
        name: "present",
        required: &["name"],
        accepts: Accepts::Only(&["name"]),
        run: present,
    },
];

fn call(c: &Call, fun: &str, args: &[Value]) -> Result<Value, String> {
    c.host
        .call(&format!("locale.{fun}"), args, &Map::new())
        .map_err(|e| exc_text(&e).to_string())
}

fn system(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let run = || -> Result<Map<String, Value>, String> {
        if py_text(&call(c, "get_locale", &[])?) == name {
            let comment = format!("System locale {name} already set");
            return Ok(ret(&name, json!(true), comment, json!({})));
        }
        if c.test {
            let comment = format!("System locale {name} needs to be set");
            return Ok(ret(&name, Value::Null, comment, json!({})));
        }
        if json_truthy(&call(c, "set_locale", &[json!(name)])?) {
            let comment = format!("Set system locale {name}");
            return Ok(ret(&name, json!(true), comment, json!({"locale": name})));
        }
        let comment = format!("Failed to set system locale to {name}");
        Ok(ret(&name, json!(false), comment, json!({})))
    };
    run().or_else(|e| {
        let comment = format!("Failed to set system locale: {e}");
        Ok(ret(&name, json!(false), comment, json!({})))
    })
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    if json_truthy(&call(c, "avail", &[json!(name)])?) {
        let comment = format!("Locale {name} is already present");
        return Ok(ret(&name, json!(true), comment, json!({})));
    }
    if c.test {
        let comment = format!("Locale {name} needs to be generated");
        return Ok(ret(&name, Value::Null, comment, json!({})));
    }
    if json_truthy(&call(c, "gen_locale", &[json!(name)])?) {
        let comment = format!("Generated locale {name}");
        return Ok(ret(&name, json!(true), comment, json!({"locale": name})));
    }
    let comment = format!("Failed to generate locale {name}");
    Ok(ret(&name, json!(false), comment, json!({})))
}
