//! The `timezone` state module: `timezone.system` (the system's zone, and whether the
//! hardware clock keeps UTC) through the minion's `timezone` execution module, with Salt's
//! comments and changes.

use serde_json::{json, Map, Value};

use super::{exc_text, ret, Accepts, Call, Spec};
use crate::verify::py_text;
use brine_protocol::payload::json_truthy;

pub const FUNCTIONS: &[Spec] = &[Spec {
    name: "system",
    required: &["name"],
    accepts: Accepts::Only(&["name", "utc"]),
    run: system,
}];

fn call(c: &Call, fun: &str, arg: &str) -> Result<Value, String> {
    c.host
        .call(&format!("timezone.{fun}"), &[json!(arg)], &Map::new())
        .map_err(|e| exc_text(&e).to_string())
}

fn system(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    // Salt compares `utc` (True unless given) with the clock's setting as Python values.
    let utc = c.low.get("utc").cloned().unwrap_or(json!(true));
    let utc_set = json_truthy(&utc);
    let compzone = match c
        .host
        .call("timezone.zone_compare", &[json!(name)], &Map::new())
    {
        Ok(v) => v,
        Err(e) => {
            let comment = format!(
                "Unable to compare desired timezone '{name}' to system timezone: {}",
                exc_text(&e)
            );
            return Ok(ret(&name, json!(false), comment, json!({})));
        }
    };
    let hwclock = c
        .host
        .call("timezone.get_hwclock", &[], &Map::new())
        .map_err(|e| exc_text(&e).to_string())?;
    let myutc = hwclock.as_str() != Some("localtime");
    let mut result = Value::Null;
    let mut messages = Vec::new();
    let zone_ok = compzone == json!(true);
    if zone_ok {
        result = json!(true);
        messages.push(format!("Timezone {name} already set"));
    }
    // Python's `utc != myutc` between the argument and a bool (1 == True).
    let same_utc = match &utc {
        Value::Bool(b) => *b == myutc,
        Value::Number(n) => n.as_f64() == Some(if myutc { 1.0 } else { 0.0 }),
        _ => false,
    };
    let do_utc = utc_set && !same_utc;
    if do_utc {
        result = Value::Null;
    } else if utc_set {
        messages.push(format!("UTC already set to {name}"));
    }
    if result == json!(true) {
        return Ok(ret(&name, result, messages.join(", "), json!({})));
    }
    let utc_text = py_text(&utc);
    if c.test {
        let mut messages = Vec::new();
        if compzone == json!(false) {
            messages.push(format!("Timezone {name} needs to be set"));
        }
        if do_utc {
            messages.push(format!("UTC needs to be set to {utc_text}"));
        }
        return Ok(ret(&name, result, messages.join(", "), json!({})));
    }
    let mut messages = Vec::new();
    let mut changes = Map::new();
    if !zone_ok {
        if json_truthy(&call(c, "set_zone", &name)?) {
            changes.insert("timezone".into(), json!(name));
            messages.push(format!("Set timezone {name}"));
            result = json!(true);
        } else {
            messages.push("Failed to set timezone".into());
            result = json!(false);
        }
    }
    if do_utc {
        let clock = if utc_set { "UTC" } else { "localtime" };
        if json_truthy(&call(c, "set_hwclock", clock)?) {
            changes.insert("utc".into(), utc.clone());
            messages.push(format!("Set UTC to {utc_text}"));
            result = json!(true);
        } else {
            messages.push(format!("Failed to set UTC to {utc_text}"));
            result = json!(false);
        }
    }
    Ok(ret(
        &name,
        result,
        messages.join(", "),
        Value::Object(changes),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::states::scripted::Scripted;

    /// A machine in zone `zone` whose hardware clock keeps `clock`, where setting works when
    /// `sets` says so.
    fn machine(
        zone: &'static str,
        clock: &'static str,
        sets: bool,
    ) -> Scripted<impl Fn(&str, &[Value]) -> Result<Value, String> + Sync> {
        Scripted::new(move |fun, args| match fun {
            "timezone.zone_compare" => Ok(json!(args[0] == json!(zone))),
            "timezone.get_hwclock" => Ok(json!(clock)),
            "timezone.set_zone" | "timezone.set_hwclock" => Ok(json!(sets)),
            other => Err(format!("'{other}' is not available.")),
        })
    }

    #[test]
    fn zone_and_clock_are_set_as_salt_sets_them() {
        let host = machine("Etc/UTC", "UTC", true);
        let r = host
            .run(system, json!({"name": "Europe/Berlin"}), false)
            .unwrap();
        assert_eq!(r["result"], json!(true));
        assert_eq!(r["comment"], json!("Set timezone Europe/Berlin"));
        assert_eq!(r["changes"], json!({"timezone": "Europe/Berlin"}));

        let r = host.run(system, json!({"name": "Etc/UTC"}), false).unwrap();
        assert_eq!(r["result"], json!(true));
        assert_eq!(
            r["comment"],
            json!("Timezone Etc/UTC already set, UTC already set to Etc/UTC")
        );

        let local = machine("Etc/UTC", "localtime", true);
        let r = local.run(system, json!({"name": "Etc/UTC"}), true).unwrap();
        assert_eq!(r["result"], Value::Null);
        assert_eq!(r["comment"], json!("UTC needs to be set to True"));
        let r = local
            .run(system, json!({"name": "Etc/UTC"}), false)
            .unwrap();
        assert_eq!(r["comment"], json!("Set UTC to True"));
        assert_eq!(r["changes"], json!({"utc": true}));
        assert!(local
            .calls
            .lock()
            .unwrap()
            .contains(&r#"timezone.set_hwclock["UTC"]"#.to_string()));
        // utc: False is never acted on (Salt's `if utc and ...`).
        let r = local
            .run(system, json!({"name": "Etc/UTC", "utc": false}), false)
            .unwrap();
        assert_eq!(r["comment"], json!("Timezone Etc/UTC already set"));

        let stuck = machine("Etc/UTC", "UTC", false);
        let r = stuck
            .run(system, json!({"name": "Europe/Berlin"}), false)
            .unwrap();
        assert_eq!(r["result"], json!(false));
        assert_eq!(r["comment"], json!("Failed to set timezone"));
        let r = stuck
            .run(system, json!({"name": "Europe/Berlin"}), true)
            .unwrap();
        assert_eq!(
            r["comment"],
            json!("Timezone Europe/Berlin needs to be set")
        );
    }
}
