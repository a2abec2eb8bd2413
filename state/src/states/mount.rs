//! The `mount` state module's fstab states on Linux: `mount.fstab_present` and
//! `mount.fstab_absent` through the minion's `mount.set_fstab`, `mount.rm_fstab`,
//! `mount.fstab` and `mount.mount` (devices given as `UUID=`/`LABEL=` through `disk.blkid`
//! with `mount_by`), with Salt's comments (one line each) and changes.
//!
//! Not here: `mount.mounted`, `mount.unmounted`, `mount.swap`.

use serde_json::{json, Map, Value};

use super::{exc_text, ret, Accepts, Call, Spec};
use crate::verify::py_text;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "fstab_present",
        required: &["name", "fs_file", "fs_vfstype"],
        accepts: Accepts::Only(&[
            "name",
            "fs_file",
            "fs_vfstype",
            "fs_mntops",
            "fs_freq",
            "fs_passno",
            "mount_by",
            "config",
            "mount",
            "match_on",
            "not_change",
            "fs_mount",
        ]),
        run: fstab_present,
    },
    Spec {
        name: "fstab_absent",
        required: &["name", "fs_file"],
        accepts: Accepts::Only(&["name", "fs_file", "mount_by", "config"]),
        run: fstab_absent,
    },
];

/// An argument or its default.
fn arg(c: &Call, key: &str, default: Value) -> Value {
    c.low.get(key).cloned().unwrap_or(default)
}

/// Salt's `fs_file` without a trailing `/` (but `/` itself).
fn mount_point(c: &Call) -> String {
    let fs_file = c.text("fs_file").unwrap_or_default();
    if fs_file == "/" {
        fs_file
    } else {
        fs_file.trim_end_matches('/').to_string()
    }
}

/// Salt's `_convert_to`: the device as `mount_by` asks (`device`, `uuid`, `label`...),
/// through `disk.blkid`; `None` when blkid does not name exactly one device.
fn convert_to(c: &Call, device: &str, by: Option<&str>) -> Result<Option<String>, String> {
    let Some(by) = by.filter(|b| !b.is_empty()) else {
        return Ok(Some(device.to_string()));
    };
    let key = by.to_uppercase();
    if (by == "device" && device.starts_with('/')) || device.starts_with(&format!("{key}=")) {
        return Ok(Some(device.to_string()));
    }
    let (args, kw): (Vec<Value>, Map<String, Value>) = if device.starts_with('/') {
        (vec![json!(device)], Map::new())
    } else {
        let mut kw = Map::new();
        kw.insert("token".into(), json!(device));
        (Vec::new(), kw)
    };
    let found = c
        .host
        .call("disk.blkid", &args, &kw)
        .map_err(|e| exc_text(&e).to_string())?;
    let Some(found) = found.as_object().filter(|m| m.len() == 1) else {
        return Ok(None);
    };
    let (dev, info) = found.iter().next().expect("one entry");
    if by == "device" {
        return Ok(Some(dev.clone()));
    }
    match info.get(&key) {
        Some(v) => Ok(Some(format!("{key}={}", py_text(v)))),
        None => Err(format!("KeyError: '{key}'")),
    }
}

/// A state's return with its comment lines joined, as Salt's engine joins a list.
fn answer(name: &str, result: Value, lines: &[String], changes: Value) -> Map<String, Value> {
    ret(name, result, lines.join("\n"), changes)
}

fn fstab_present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let fs_file = mount_point(c);
    let config = c.text("config").unwrap_or_else(|| "/etc/fstab".into());
    let by = c.text("mount_by");
    let Some(spec) = convert_to(c, &name, by.as_deref())? else {
        let line = format!(
            "Device {name} cannot be converted to {}",
            by.unwrap_or_default()
        );
        return Ok(answer(&name, json!(false), &[line], json!({})));
    };
    let mut kw = Map::new();
    kw.insert("name".into(), json!(fs_file));
    kw.insert("device".into(), json!(spec));
    kw.insert("fstype".into(), arg(c, "fs_vfstype", Value::Null));
    kw.insert("opts".into(), arg(c, "fs_mntops", json!("defaults")));
    kw.insert("dump".into(), arg(c, "fs_freq", json!(0)));
    kw.insert("pass_num".into(), arg(c, "fs_passno", json!(0)));
    kw.insert("config".into(), json!(config));
    kw.insert("match_on".into(), arg(c, "match_on", json!("auto")));
    kw.insert("not_change".into(), arg(c, "not_change", json!(false)));
    if c.test {
        kw.insert("test".into(), json!(true));
    }
    let out = c
        .host
        .call("mount.set_fstab", &[], &kw)
        .map_err(|e| exc_text(&e).to_string())?;
    let out = py_text(&out);
    let mount = c.flag("mount", true);
    let mut lines = Vec::new();
    if c.test {
        let mut result = Value::Null;
        match out.as_str() {
            "present" => lines.push(format!("{fs_file} entry is already in {config}.")),
            "new" => {
                lines.push(format!("{fs_file} entry will be written in {config}."));
                if mount {
                    lines.push(format!("Will mount {name} on {fs_file}"));
                }
            }
            "change" => lines.push(format!("{fs_file} entry will be updated in {config}.")),
            other => {
                result = json!(false);
                lines.push(format!(
                    "{fs_file} entry cannot be created in {config}: {other}."
                ));
            }
        }
        return Ok(answer(&name, result, &lines, json!({})));
    }
    let mut result = json!(true);
    let mut changes = Map::new();
    match out.as_str() {
        "present" => lines.push(format!("{fs_file} entry was already in {config}.")),
        "new" => {
            changes.insert("persist".into(), json!("new"));
            lines.push(format!("{fs_file} entry added in {config}."));
            if mount {
                let mounted = c
                    .host
                    .call("mount.mount", &[json!(fs_file)], &Map::new())
                    .map_err(|e| exc_text(&e).to_string())?;
                match mounted {
                    Value::String(err) => {
                        result = json!(false);
                        // Salt's `out.split(":", maxsplit=1)[1]`.
                        let Some((_, rest)) = err.split_once(':') else {
                            return Err("IndexError: list index out of range".into());
                        };
                        lines.push(format!("Error while mounting {rest}"));
                    }
                    _ => lines.push(format!("Mounted {name} on {fs_file}")),
                }
            }
        }
        "change" => {
            changes.insert("persist".into(), json!("change"));
            lines.push(format!("{fs_file} entry updated in {config}."));
        }
        other => {
            result = json!(false);
            lines.push(format!(
                "{fs_file} entry cannot be changed in {config}: {other}."
            ));
        }
    }
    Ok(answer(&name, result, &lines, Value::Object(changes)))
}

fn fstab_absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let fs_file = mount_point(c);
    let config = c.text("config").unwrap_or_else(|| "/etc/fstab".into());
    let spec = convert_to(c, &name, c.text("mount_by").as_deref())?;
    let entries = c
        .host
        .call("mount.fstab", &[json!(config)], &Map::new())
        .map_err(|e| exc_text(&e).to_string())?;
    let present = entries.get(&fs_file).is_some();
    if c.test {
        let line = if present {
            format!("{fs_file} entry will be removed from {config}.")
        } else {
            format!("{fs_file} entry is already missing in {config}.")
        };
        return Ok(answer(&name, Value::Null, &[line], json!({})));
    }
    if !present {
        let line = format!("{fs_file} entry is already missing in {config}.");
        return Ok(answer(&name, json!(true), &[line], json!({})));
    }
    let mut kw = Map::new();
    kw.insert("name".into(), json!(fs_file));
    kw.insert("device".into(), spec.map_or(Value::Null, Value::String));
    kw.insert("config".into(), json!(config));
    let out = c
        .host
        .call("mount.rm_fstab", &[], &kw)
        .map_err(|e| exc_text(&e).to_string())?;
    if out != json!(true) {
        let line = format!("{fs_file} entry failed when removing from {config}.");
        return Ok(answer(&name, json!(false), &[line], json!({})));
    }
    let line = format!("{fs_file} entry removed from {config}.");
    Ok(answer(
        &name,
        json!(true),
        &[line],
        json!({"persist": "removed"}),
    ))
}
