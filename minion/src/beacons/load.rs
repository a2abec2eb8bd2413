//! The `load` beacon: fires the 1, 5 and 15 minute load averages when one leaves its
//! `[low, high]` range (every time, or with `onchangeonly` only when it crosses a bound).

use serde_json::{Map, Value};

use super::number;

const AVERAGES: [&str; 3] = ["1m", "5m", "15m"];

pub(super) fn validate(config: &Map<String, Value>) -> Result<(), String> {
    for flag in ["emitatstartup", "onchangeonly"] {
        if config.get(flag).is_some_and(|v| !v.is_boolean()) {
            return Err(format!(
                "Configuration for load beacon option {flag} must be a boolean."
            ));
        }
    }
    let Some(averages) = config.get("averages") else {
        return Err("Averages configuration is required for load beacon.".into());
    };
    let averages = averages.as_object();
    if !averages.is_some_and(|a| AVERAGES.iter().any(|k| a.contains_key(*k))) {
        return Err(
            "Averages configuration for load beacon must contain 1m, 5m or 15m items.".into(),
        );
    }
    for k in AVERAGES {
        match averages.and_then(|a| a.get(k)) {
            Some(Value::Array(pair)) if pair.len() == 2 && pair.iter().all(|v| number(Some(v)).is_some()) => {}
            _ => {
                return Err(
                    "Averages configuration for load beacon: 1m, 5m and 15m items must be a list of two items."
                        .into(),
                )
            }
        }
    }
    Ok(())
}

fn loadavg() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|w| w.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

pub(super) fn beacon(
    config: &Map<String, Value>,
    last: &mut Map<String, Value>,
) -> Vec<(String, Map<String, Value>)> {
    let onchangeonly = config.get("onchangeonly") == Some(&Value::Bool(true));
    let emitatstartup = config.get("emitatstartup") != Some(&Value::Bool(false));
    let Some(avgs) = loadavg() else {
        return Vec::new();
    };
    let now: Map<String, Value> = AVERAGES
        .iter()
        .zip(avgs)
        .map(|(k, v)| (k.to_string(), Value::from(v)))
        .collect();
    if onchangeonly && last.is_empty() {
        *last = now.clone();
        if !emitatstartup {
            return Vec::new();
        }
    }
    let bound = |k: &str, i: usize| {
        config
            .get("averages")
            .and_then(|a| a.get(k))
            .and_then(|p| p.get(i))
            .and_then(|v| number(Some(v)))
    };
    let mut send = false;
    for (i, k) in AVERAGES.iter().enumerate() {
        let (Some(low), Some(high)) = (bound(k, 0), bound(k, 1)) else {
            continue;
        };
        let current = avgs[i];
        if onchangeonly {
            let before = last.get(*k).and_then(Value::as_f64).unwrap_or(current);
            if (current > high && before < high) || (current < low && before > low) {
                send = true;
                break;
            }
        } else if current < low || current > high {
            send = true;
            break;
        }
    }
    if onchangeonly {
        *last = now.clone();
    }
    if send {
        vec![(String::new(), now)]
    } else {
        Vec::new()
    }
}
