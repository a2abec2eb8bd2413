//! The `service` state module: `service.running`, `service.dead`, `service.enabled`,
//! `service.disabled`, `service.masked`, `service.unmasked` and the `mod_watch` that restarts or reloads a watched service,
//! through the minion's `service` execution module, with Salt's comments and changes.

use serde_json::{json, Map, Value};

use super::{Accepts, Call, Spec};
use crate::verify::py_text;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "running",
        required: &["name"],
        accepts: Accepts::Any,
        run: running,
    },
    Spec {
        name: "dead",
        required: &["name"],
        accepts: Accepts::Any,
        run: dead,
    },
    Spec {
        name: "enabled",
        required: &["name"],
        accepts: Accepts::Any,
        run: enabled,
    },
    Spec {
        name: "disabled",
        required: &["name"],
        accepts: Accepts::Any,
        run: disabled,
    },
    Spec {
        name: "masked",
        required: &["name"],
        accepts: Accepts::Only(&["name", "runtime"]),
        run: masked,
    },
    Spec {
        name: "unmasked",
        required: &["name"],
        accepts: Accepts::Only(&["name", "runtime"]),
        run: unmasked,
    },
    Spec {
        name: "mod_watch",
        required: &["name"],
        accepts: Accepts::Any,
        run: mod_watch,
    },
];

type Ret = Map<String, Value>;

fn base(name: &str) -> Ret {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    m.insert("changes".into(), json!({}));
    m.insert("result".into(), json!(true));
    m.insert("comment".into(), json!(""));
    m
}

fn masked(c: &Call) -> Result<Ret, String> {
    mask(c, true)
}

fn unmasked(c: &Call) -> Result<Ret, String> {
    mask(c, false)
}

/// `service.masked` (`want`) and `service.unmasked`: the unit masked or unmasked (for this
/// boot only with `runtime`), checked again afterwards; a failure of the service module
/// fails the state with its text.
fn mask(c: &Call, want: bool) -> Result<Ret, String> {
    let name = c.name();
    let mut r = base(&name);
    let runtime = c.flag("runtime", false);
    let mask_type = if runtime { "runtime masked" } else { "masked" };
    let (action, fun) = match (want, runtime) {
        (true, _) => (mask_type, "mask"),
        (false, true) => ("runtime unmasked", "unmask"),
        (false, false) => ("unmasked", "unmask"),
    };
    let expected = json!({ mask_type: {"old": !want, "new": want} });
    let is_masked = |c: &Call| -> Result<bool, String> {
        c.host
            .call(
                "service.masked",
                &[json!(name), json!(runtime)],
                &Map::new(),
            )
            .map(|v| brine_protocol::payload::json_truthy(&v))
            .map_err(|e| super::exc_text(&e).to_string())
    };
    let mut outcome = || -> Result<(), String> {
        if is_masked(c)? == want {
            let already = if want { "is already" } else { "was already" };
            r.insert(
                "comment".into(),
                json!(format!("Service {name} {already} {action}")),
            );
            return Ok(());
        }
        if c.test {
            r.insert("result".into(), Value::Null);
            r.insert("changes".into(), expected.clone());
            r.insert(
                "comment".into(),
                json!(format!("Service {name} would be {action}")),
            );
            return Ok(());
        }
        c.host
            .call(
                &format!("service.{fun}"),
                &[json!(name), json!(runtime)],
                &Map::new(),
            )
            .map_err(|e| super::exc_text(&e).to_string())?;
        if is_masked(c)? == want {
            r.insert("changes".into(), expected.clone());
            r.insert(
                "comment".into(),
                json!(format!("Service {name} was {action}")),
            );
        } else {
            r.insert(
                "comment".into(),
                json!(format!("Failed to {fun} service {name}")),
            );
        }
        Ok(())
    };
    if let Err(e) = outcome() {
        let comment = if e == "'service.masked' is not available." {
            "Service masking not available on this minion".to_string()
        } else {
            e
        };
        r.insert("result".into(), json!(false));
        r.insert("comment".into(), json!(comment));
    }
    Ok(r)
}

/// A service function returning a boolean; its error text stripped of `ERROR: `.
fn ask(c: &Call, fun: &str, name: &str) -> Result<bool, String> {
    c.host
        .call(&format!("service.{fun}"), &[json!(name)], &Map::new())
        .map(|v| brine_protocol::payload::json_truthy(&v))
        .map_err(|e| super::exc_text(&e).to_string())
}

fn status(c: &Call, name: &str) -> Result<bool, String> {
    let mut kw = Map::new();
    if let Some(sig) = c.arg("sig") {
        kw.insert("sig".into(), sig.clone());
    }
    c.host
        .call("service.status", &[json!(name)], &kw)
        .map(|v| brine_protocol::payload::json_truthy(&v))
        .map_err(|e| super::exc_text(&e).to_string())
}

/// `enable` as Salt reads it: a string is parsed for truth; absent is `None`.
fn enable_arg(c: &Call) -> Option<bool> {
    match c.arg("enable")? {
        Value::Bool(b) => Some(*b),
        // Salt's `is_true`: a number is true above zero, another string only as "true".
        Value::String(s) => Some(match s.trim().parse::<f64>() {
            Ok(n) => n > 0.0,
            Err(_) => s.to_lowercase() == "true",
        }),
        other => Some(brine_protocol::payload::json_truthy(other)),
    }
}

/// `_available`: false (with Salt's comment in `ret`) when the service does not exist.
fn available(c: &Call, name: &str, ret: &mut Ret) -> Result<bool, String> {
    let avail = ask(c, "available", name)?;
    if !avail {
        ret.insert("result".into(), json!(false));
        ret.insert(
            "comment".into(),
            json!(format!("The named service {name} is not available")),
        );
    }
    Ok(avail)
}

/// How a service stands for the enable/disable comments: running, desired, dead.
#[derive(Clone, Copy)]
enum Started {
    Yes,
    Unknown,
    No,
}

impl Started {
    fn of(b: bool) -> Started {
        if b {
            Started::Yes
        } else {
            Started::No
        }
    }
}

/// Salt's `_enable` (`on`) and `_disable` (`!on`): what they put into the return.
fn toggle(c: &Call, name: &str, started: Started, result: bool, on: bool) -> Ret {
    let mut ret = Ret::new();
    match available(c, name, &mut ret) {
        Ok(true) => {}
        Ok(false) => {
            if !on {
                ret.insert("result".into(), json!(true));
            }
            return ret;
        }
        Err(e) => {
            ret.insert("result".into(), json!(false));
            ret.insert("comment".into(), json!(e));
            return ret;
        }
    }
    ret.insert("result".into(), json!(result));
    let (word, probe) = if on {
        ("enabled", "enabled")
    } else {
        ("disabled", "disabled")
    };
    let before = match ask(c, probe, name) {
        Ok(b) => b,
        Err(e) => {
            ret.insert("result".into(), json!(false));
            ret.insert("comment".into(), json!(e));
            return ret;
        }
    };
    let tail = |state: Started| match state {
        Started::Yes => "is running".to_string(),
        Started::Unknown => "is in the desired state".to_string(),
        Started::No => "is dead".to_string(),
    };
    if before {
        if matches!(started, Started::Unknown) {
            ret.insert("changes".into(), json!({}));
        }
        ret.insert(
            "comment".into(),
            json!(format!(
                "Service {name} is already {word}, and {}",
                tail(started)
            )),
        );
        return ret;
    }
    if c.test {
        ret.insert("result".into(), Value::Null);
        ret.insert(
            "comment".into(),
            json!(format!("Service {name} set to be {word}")),
        );
        return ret;
    }
    let fun = if on { "enable" } else { "disable" };
    let mut error = None;
    match ask(c, fun, name) {
        Ok(true) => {
            let mut changes = Map::new();
            if ask(c, probe, name).unwrap_or(before) != before {
                changes.insert(name.to_string(), json!(true));
            }
            ret.insert("changes".into(), Value::Object(changes));
            ret.insert(
                "comment".into(),
                json!(format!(
                    "Service {name} has been {word}, and {}",
                    tail(started)
                )),
            );
            return ret;
        }
        Ok(false) => {}
        Err(e) if on => error = Some(e),
        Err(_) => {}
    }
    ret.insert("result".into(), json!(false));
    let comment = match (on, started) {
        (true, Started::Yes) => format!(
            "Failed when setting service {name} to start at boot, but the service is running"
        ),
        (true, Started::Unknown) => format!(
            "Failed when setting service {name} to start at boot, but the service was already running"
        ),
        (true, Started::No) => format!(
            "Failed when setting service {name} to start at boot, and the service is dead"
        ),
        (false, Started::Yes) => format!(
            "Failed when setting service {name} to not start at boot, and is running"
        ),
        (false, Started::Unknown) => format!(
            "Failed when setting service {name} to not start at boot, but the service was already running"
        ),
        (false, Started::No) => format!(
            "Failed when setting service {name} to not start at boot, and the service is dead"
        ),
    };
    let comment = match error {
        Some(e) => format!("{comment}. Additional information follows:\n\n{e}"),
        None => comment,
    };
    ret.insert("comment".into(), json!(comment));
    ret
}

fn enabled_used(name: &str) -> Ret {
    let mut ret = base(name);
    ret.insert("result".into(), json!(false));
    ret.insert(
        "comment".into(),
        json!(format!(
            "Service {name} uses non-existent option \"enabled\".  Perhaps \"enable\" option was intended?"
        )),
    );
    ret
}

fn running(c: &Call) -> Result<Ret, String> {
    toggle_run(c, true)
}

fn dead(c: &Call) -> Result<Ret, String> {
    toggle_run(c, false)
}

/// `service.running` (`up`) and `service.dead` (`!up`).
fn toggle_run(c: &Call, up: bool) -> Result<Ret, String> {
    let name = c.name();
    if c.arg("enabled").is_some() {
        return Ok(enabled_used(&name));
    }
    let enable = enable_arg(c);
    let mut ret = base(&name);
    let offline = c
        .host
        .call("service.offline", &[], &Map::new())
        .is_ok_and(|v| brine_protocol::payload::json_truthy(&v));
    if offline {
        ret.insert(
            "comment".into(),
            json!("Running in OFFLINE mode. Nothing to do"),
        );
        return Ok(ret);
    }
    match available(c, &name, &mut ret) {
        Ok(true) => {}
        Ok(false) => {
            if c.test {
                ret.insert("result".into(), Value::Null);
                ret.insert(
                    "comment".into(),
                    json!(format!(
                        "Service {name} not present; if created in this state run, it would have been {}",
                        if up { "started" } else { "stopped" }
                    )),
                );
            } else if !up {
                ret.insert("result".into(), json!(true));
            }
            return Ok(ret);
        }
        Err(e) => {
            ret.insert("result".into(), json!(false));
            ret.insert("comment".into(), json!(e));
            return Ok(ret);
        }
    }
    let before = status(c, &name)?;
    let before_enabled = ask(c, "enabled", &name)?;
    if before == up {
        ret.insert(
            "comment".into(),
            json!(format!(
                "The service {name} is already {}",
                if up { "running" } else { "dead" }
            )),
        );
        match enable {
            Some(true) if !before_enabled => {
                ret.extend(toggle(c, &name, Started::Unknown, true, true))
            }
            Some(false) if before_enabled => {
                ret.extend(toggle(c, &name, Started::Unknown, true, false))
            }
            _ => {}
        }
        return Ok(ret);
    }
    if c.test {
        ret.insert("result".into(), Value::Null);
        ret.insert(
            "comment".into(),
            json!(if up {
                format!("Service {name} is set to start")
            } else {
                format!("Service {name} is set to be killed")
            }),
        );
        return Ok(ret);
    }
    let verb = if up { "start" } else { "stop" };
    let done = match ask(c, verb, &name) {
        Ok(b) => b,
        Err(e) if up => {
            ret.insert("result".into(), json!(false));
            ret.insert("comment".into(), json!(e));
            return Ok(ret);
        }
        Err(e) => return Err(e),
    };
    if !done {
        ret.insert("result".into(), json!(false));
        ret.insert(
            "comment".into(),
            json!(if up {
                format!("Service {name} failed to start")
            } else {
                format!("Service {name} failed to die")
            }),
        );
        if let Some(on) = enable {
            ret.extend(toggle(c, &name, Started::of(!up), false, on));
        }
        return Ok(ret);
    }
    if let Some(delay) = c.arg("init_delay").and_then(Value::as_f64) {
        if delay > 0.0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(delay.min(3600.0)));
        }
    }
    let after = status(c, &name)?;
    let after_enabled = ask(c, "enabled", &name)?;
    if before_enabled != after_enabled || before != after {
        ret.insert("changes".into(), json!({ name.clone(): after }));
    }
    let ok = after == up;
    ret.insert(
        "comment".into(),
        json!(match (up, ok) {
            (true, true) => format!("Started service {name}"),
            (true, false) => format!("Service {name} failed to start"),
            (false, true) => format!("Service {name} was killed"),
            (false, false) => format!("Service {name} failed to die"),
        }),
    );
    if !ok {
        ret.insert("result".into(), json!(false));
    }
    if let Some(on) = enable {
        ret.extend(toggle(c, &name, Started::of(after), ok, on));
    }
    if let Some(delay) = c
        .arg("init_delay")
        .filter(|v| brine_protocol::payload::json_truthy(v))
    {
        let comment = py_text(ret.get("comment").unwrap_or(&json!("")));
        ret.insert(
            "comment".into(),
            json!(format!(
                "{comment}\nDelayed return for {} seconds",
                py_text(delay)
            )),
        );
    }
    Ok(ret)
}

fn enabled(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let mut ret = base(&name);
    ret.extend(toggle(c, &name, Started::Unknown, true, true));
    let missing = format!("The named service {name} is not available");
    if c.test && ret.get("comment") == Some(&json!(missing)) {
        ret.insert("result".into(), Value::Null);
        ret.insert(
            "comment".into(),
            json!(format!(
                "Service {name} not present; if created in this state run, it would have been enabled"
            )),
        );
    }
    Ok(ret)
}

fn disabled(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let mut ret = base(&name);
    ret.extend(toggle(c, &name, Started::Unknown, true, false));
    Ok(ret)
}

fn mod_watch(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let mut ret = base(&name);
    let sfun = c.text("sfun").unwrap_or_default();
    let (fun, verb, past) = match sfun.as_str() {
        "dead" => {
            if !status(c, &name)? {
                ret.insert("comment".into(), json!("Service is already stopped"));
                return Ok(ret);
            }
            ("stop", "stop", "stopped".to_string())
        }
        "running" => {
            if status(c, &name)? {
                if c.flag("reload", false) {
                    ("reload", "reload", "reloaded".to_string())
                } else {
                    ("restart", "restart", "restarted".to_string())
                }
            } else {
                ("start", "start", "started".to_string())
            }
        }
        other => {
            ret.insert("result".into(), json!(false));
            ret.insert(
                "comment".into(),
                json!(format!("Unable to trigger watch for service.{other}")),
            );
            return Ok(ret);
        }
    };
    if c.test {
        ret.insert("result".into(), Value::Null);
        ret.insert(
            "comment".into(),
            json!(format!("Service is set to be {past}")),
        );
        return Ok(ret);
    }
    if fun == "start" {
        let _ = ask(c, "stop", &name);
    }
    let result = match ask(c, fun, &name) {
        Ok(b) => b,
        Err(e) => {
            ret.insert("result".into(), json!(false));
            ret.insert("comment".into(), json!(e));
            return Ok(ret);
        }
    };
    ret.insert("changes".into(), json!({ name.clone(): result }));
    ret.insert("result".into(), json!(result));
    ret.insert(
        "comment".into(),
        json!(if result {
            format!("Service {past}")
        } else {
            format!("Failed to {verb} the service")
        }),
    );
    Ok(ret)
}

#[cfg(test)]
mod mask_tests {
    use super::*;
    use crate::states::scripted::Scripted;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A unit masked or not, whose mask changes take when `takes`.
    fn unit(
        masked: bool,
        takes: bool,
    ) -> Scripted<impl Fn(&str, &[Value]) -> Result<Value, String> + Sync> {
        let state = AtomicBool::new(masked);
        Scripted::new(move |fun, _args| match fun {
            "service.masked" => Ok(json!(state.load(Ordering::SeqCst))),
            "service.mask" | "service.unmask" => {
                if takes {
                    state.store(fun == "service.mask", Ordering::SeqCst);
                }
                Ok(json!(true))
            }
            other => Err(format!("'{other}' is not available.")),
        })
    }

    #[test]
    fn units_are_masked_and_unmasked_as_salt_does() {
        let host = unit(false, true);
        let r = host.run(masked, json!({"name": "x"}), false).unwrap();
        assert_eq!(r["comment"], json!("Service x was masked"));
        assert_eq!(r["changes"], json!({"masked": {"old": false, "new": true}}));
        let r = host.run(masked, json!({"name": "x"}), false).unwrap();
        assert_eq!(r["comment"], json!("Service x is already masked"));
        let r = host
            .run(unmasked, json!({"name": "x", "runtime": true}), true)
            .unwrap();
        assert_eq!(r["result"], Value::Null);
        assert_eq!(r["comment"], json!("Service x would be runtime unmasked"));
        assert_eq!(
            r["changes"],
            json!({"runtime masked": {"old": true, "new": false}})
        );
        let r = host.run(unmasked, json!({"name": "x"}), false).unwrap();
        assert_eq!(r["comment"], json!("Service x was unmasked"));
        let r = host.run(unmasked, json!({"name": "x"}), false).unwrap();
        assert_eq!(r["comment"], json!("Service x was already unmasked"));

        let stuck = unit(false, false);
        let r = stuck.run(masked, json!({"name": "x"}), false).unwrap();
        assert_eq!(
            (&r["result"], &r["comment"]),
            (&json!(true), &json!("Failed to mask service x"))
        );
        let none =
            Scripted::new(|fun: &str, _: &[Value]| Err(format!("'{fun}' is not available.")));
        let r = none.run(masked, json!({"name": "x"}), false).unwrap();
        assert_eq!(
            r["comment"],
            json!("Service masking not available on this minion")
        );
    }
}
