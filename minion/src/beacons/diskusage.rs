//! The `diskusage` beacon: fires `{diskusage: <percent used>, mount}` for each mount point
//! matching a configured pattern whose usage is at or above its threshold (`'/': 63%`).

use regex::Regex;
use serde_json::{Map, Value};

use super::number;

pub(super) fn validate(items: &[Value]) -> Result<(), String> {
    for item in items {
        let Value::Object(m) = item else {
            return Err(
                "Configuration for diskusage beacon must be a list of dictionaries.".into(),
            );
        };
        for (mount, threshold) in m {
            if super::COMMON.contains(&mount.as_str()) {
                continue;
            }
            if number(Some(threshold)).is_none() {
                return Err(format!(
                    "Configuration for diskusage beacon: the threshold of {mount} must be a percentage."
                ));
            }
        }
    }
    Ok(())
}

/// Mount points, as `/proc/mounts` lists them (all of them, like psutil's `all=True`).
fn mount_points() -> Vec<String> {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(|m| m.replace("\\040", " "))
        .collect()
}

/// psutil's `disk_usage(path).percent`: used over what a user may use, one decimal.
pub(crate) fn usage_percent(path: &str) -> Option<f64> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frsize = st.fragment_size() as f64;
    let total = st.blocks() as f64 * frsize;
    let free = st.blocks_free() as f64 * frsize;
    let avail = st.blocks_available() as f64 * frsize;
    let used = total - free;
    let user_total = used + avail;
    if user_total <= 0.0 {
        return Some(0.0);
    }
    Some((used / user_total * 1000.0).round() / 10.0)
}

pub(super) fn beacon(items: &[Value]) -> Vec<(String, Map<String, Value>)> {
    let parts = mount_points();
    let mut out = Vec::new();
    for item in items {
        let Value::Object(m) = item else { continue };
        for (mount, threshold) in m {
            let Some(threshold) = number(Some(threshold)) else {
                continue;
            };
            let pattern = if mount.ends_with('$') {
                format!("^(?:{mount})")
            } else {
                format!("^(?:{mount})$")
            };
            let Ok(re) = Regex::new(&pattern) else {
                continue;
            };
            for part in parts.iter().filter(|p| re.is_match(p)) {
                let Some(current) = usage_percent(part) else {
                    continue;
                };
                if current >= threshold {
                    let mut data = Map::new();
                    data.insert("diskusage".into(), Value::from(current));
                    data.insert("mount".into(), Value::from(part.as_str()));
                    out.push((String::new(), data));
                }
            }
        }
    }
    out
}
