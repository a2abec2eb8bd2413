//! The `memusage` beacon: fires `{memusage: <percent used>}` when memory use is at or above
//! the `percent` threshold.

use serde_json::{Map, Value};

use super::number;

pub(super) fn validate(config: &Map<String, Value>) -> Result<(), String> {
    if number(config.get("percent")).is_none() {
        return Err("Configuration for memusage beacon requires percent.".into());
    }
    Ok(())
}

/// psutil's `virtual_memory().percent`: (total - available) / total, one decimal.
fn used_percent() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
    };
    let total = field("MemTotal:")?;
    let available = field("MemAvailable:")?;
    (total > 0.0).then(|| ((total - available) / total * 1000.0).round() / 10.0)
}

pub(super) fn beacon(config: &Map<String, Value>) -> Vec<(String, Map<String, Value>)> {
    let (Some(threshold), Some(current)) = (number(config.get("percent")), used_percent()) else {
        return Vec::new();
    };
    if current < threshold {
        return Vec::new();
    }
    let mut data = Map::new();
    data.insert("memusage".into(), Value::from(current));
    vec![(String::new(), data)]
}
