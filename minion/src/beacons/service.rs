//! The `service` beacon: fires `{service_name, <name>: {running}}` for each configured service,
//! every time or (with `onchangeonly`) when its running state changes.

use serde_json::{Map, Value};

pub(super) fn validate(config: &Map<String, Value>) -> Result<(), String> {
    match config.get("services") {
        Some(Value::Object(_)) => Ok(()),
        Some(_) => {
            Err("Services configuration item for service beacon must be a dictionary.".into())
        }
        None => Err("Configuration for service beacon requires services.".into()),
    }
}

/// Whether a service runs: systemd's answer where systemd runs, else whether a process of
/// that name exists.
pub(crate) fn running(name: &str) -> bool {
    if std::path::Path::new("/run/systemd/system").exists() {
        return std::process::Command::new("systemctl")
            .args(["is-active", "--quiet", name])
            .status()
            .is_ok_and(|s| s.success());
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .any(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|comm| comm.trim_end() == name)
        })
}

pub(super) fn beacon(
    config: &Map<String, Value>,
    last: &mut Map<String, Value>,
) -> Vec<(String, Map<String, Value>)> {
    let Some(Value::Object(services)) = config.get("services") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, opts) in services {
        let flag =
            |key: &str, default: bool| opts.get(key).and_then(Value::as_bool).unwrap_or(default);
        let is_running = running(name);
        let mut status = Map::new();
        status.insert("running".into(), Value::Bool(is_running));
        if !is_running {
            if let Some(marker) = opts.get("uncleanshutdown").and_then(Value::as_str) {
                status.insert(
                    "uncleanshutdown".into(),
                    Value::Bool(std::path::Path::new(marker).exists()),
                );
            }
        }
        let mut data = Map::new();
        data.insert(name.clone(), Value::Object(status));
        data.insert("service_name".into(), Value::from(name.as_str()));
        if flag("onchangeonly", false) {
            let before = last.insert(name.clone(), Value::Bool(is_running));
            let emit = match before {
                None => flag("emitatstartup", true),
                Some(b) => b != Value::Bool(is_running),
            };
            if !emit {
                continue;
            }
        }
        out.push((name.clone(), data));
    }
    out
}
