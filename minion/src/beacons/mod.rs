//! Beacons: small monitors the minion runs once a second (or every `interval` seconds) that
//! fire `salt/beacon/<id>/<name>/<tag>` events to the master. The configuration comes from the
//! `beacons` option (minion config and `minion.d/beacons.conf`, which `beacons.save` writes)
//! and from the pillar; the `beacons` execution module changes it at run time.
//!
//! Each beacon module is one file with a `validate` and a `beacon` function, registered in
//! [`Kind`].

mod diskusage;
mod load;
mod memusage;
mod service;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// The beacon modules this minion has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Diskusage,
    Load,
    Memusage,
    Service,
}

impl Kind {
    pub const ALL: &'static [Kind] = &[Kind::Diskusage, Kind::Load, Kind::Memusage, Kind::Service];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Diskusage => "diskusage",
            Kind::Load => "load",
            Kind::Memusage => "memusage",
            Kind::Service => "service",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Salt's `validate`: `Err` carries the message Salt gives.
    pub fn validate(self, config: &Value) -> Result<(), String> {
        let Value::Array(items) = config else {
            return Err(format!(
                "Configuration for {} beacon must be a list.",
                self.name()
            ));
        };
        match self {
            Kind::Diskusage => diskusage::validate(items),
            Kind::Load => load::validate(&list_to_dict(items)),
            Kind::Memusage => memusage::validate(&list_to_dict(items)),
            Kind::Service => service::validate(&list_to_dict(items)),
        }
    }

    /// Run the beacon once: the events it fires, as (tag suffix, data).
    fn beacon(
        self,
        items: &[Value],
        memory: &mut Map<String, Value>,
    ) -> Vec<(String, Map<String, Value>)> {
        match self {
            Kind::Diskusage => diskusage::beacon(items),
            Kind::Load => load::beacon(&list_to_dict(items), memory),
            Kind::Memusage => memusage::beacon(&list_to_dict(items)),
            Kind::Service => service::beacon(&list_to_dict(items), memory),
        }
    }
}

/// The options every beacon understands, kept out of the module's own configuration.
const COMMON: &[&str] = &[
    "interval",
    "enabled",
    "beacon_module",
    "disable_during_state_run",
];

/// Salt's `list_to_dict`: the list's maps merged into one.
pub fn list_to_dict(items: &[Value]) -> Map<String, Value> {
    let mut out = Map::new();
    for item in items {
        if let Value::Object(m) = item {
            out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    out
}

/// The module a beacon entry runs (`beacon_module`, or its own name).
pub fn module_of(name: &str, config: &Value) -> String {
    match config {
        Value::Array(items) => list_to_dict(items)
            .get("beacon_module")
            .and_then(Value::as_str)
            .unwrap_or(name)
            .to_string(),
        _ => name.to_string(),
    }
}

#[derive(Debug, Default)]
struct Runtime {
    last_run: Option<Instant>,
    memory: Map<String, Value>,
}

#[derive(Debug, Default)]
struct State {
    /// The `beacons` option: beacons by name, and the `enabled` setting.
    opts: Map<String, Value>,
    /// The pillar's `beacons`.
    pillar: Map<String, Value>,
    runtime: HashMap<String, Runtime>,
}

/// The beacons of one minion.
#[derive(Debug)]
pub struct Beacons {
    state: Mutex<State>,
    /// `minion.d/beacons.conf`, written by `beacons.save`.
    saved_file: Option<PathBuf>,
}

impl Beacons {
    pub fn new(opts: Option<&Value>, saved_file: Option<PathBuf>) -> Beacons {
        let opts = match opts {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        Beacons {
            state: Mutex::new(State {
                opts,
                ..State::default()
            }),
            saved_file,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replace the pillar's beacons (after a pillar refresh).
    pub fn set_pillar(&self, pillar_beacons: Option<&Value>) {
        self.lock().pillar = match pillar_beacons {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
    }

    /// The configured beacons (and the `enabled` setting when set), options first.
    pub fn list(&self, include_opts: bool, include_pillar: bool) -> Map<String, Value> {
        let st = self.lock();
        let mut out = Map::new();
        if include_opts {
            out.extend(st.opts.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if include_pillar {
            out.extend(st.pillar.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        out
    }

    /// Whether `name` is a beacon of the pillar (which the module may not change).
    pub fn in_pillar(&self, name: &str) -> bool {
        self.lock().pillar.contains_key(name)
    }

    /// Set (add or replace) beacon `name`.
    pub fn put(&self, name: &str, config: Value) {
        let mut st = self.lock();
        st.opts.insert(name.to_string(), config);
        st.runtime.remove(name);
    }

    /// Remove beacon `name` from the options (true also when there was none).
    pub fn delete(&self, name: &str) {
        let mut st = self.lock();
        st.opts.remove(name);
        st.runtime.remove(name);
    }

    /// Remove every beacon of the options.
    pub fn reset(&self) {
        let mut st = self.lock();
        st.opts.clear();
        st.runtime.clear();
    }

    /// Enable or disable all beacons.
    pub fn set_enabled(&self, enabled: bool) {
        self.lock()
            .opts
            .insert("enabled".into(), Value::Bool(enabled));
    }

    /// Set `enabled` in one beacon's list. False when the options have no such beacon.
    pub fn set_beacon_enabled(&self, name: &str, enabled: bool) -> bool {
        let mut st = self.lock();
        let Some(Value::Array(items)) = st.opts.get_mut(name) else {
            return false;
        };
        let flag = Value::Bool(enabled);
        match items
            .iter_mut()
            .find_map(|i| i.as_object_mut().filter(|m| m.contains_key("enabled")))
        {
            Some(m) => {
                m.insert("enabled".into(), flag);
            }
            None => items.push(serde_json::json!({ "enabled": flag })),
        }
        true
    }

    /// Write the options' beacons to `minion.d/beacons.conf` (`beacons.save`).
    pub fn save(&self) -> Result<PathBuf, String> {
        let Some(path) = &self.saved_file else {
            return Err("this minion has no configuration directory".into());
        };
        let beacons: Map<String, Value> = self
            .lock()
            .opts
            .iter()
            .filter(|(k, _)| *k != "enabled")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let text = if beacons.is_empty() {
            String::new()
        } else {
            let mut doc = Map::new();
            doc.insert("beacons".into(), Value::Object(beacons));
            brine_protocol::yaml::safe_dump(
                &Value::Object(doc),
                brine_protocol::yaml::Style::Block(2),
            )
        };
        path.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(path, text))
            .map_err(|e| format!("Unable to write to beacons file at {}: {e}", path.display()))?;
        Ok(path.clone())
    }

    /// Run the beacons that are due: the events to fire, as (full tag, data).
    pub fn process(&self, id: &str, now: Instant) -> Vec<(String, Map<String, Value>)> {
        let mut st = self.lock();
        if st.opts.get("enabled") == Some(&Value::Bool(false)) {
            return Vec::new();
        }
        let entries: Vec<(String, Value)> = st
            .opts
            .iter()
            .chain(st.pillar.iter())
            .filter(|(k, _)| *k != "enabled")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut events = Vec::new();
        for (name, config) in entries {
            let Value::Array(items) = &config else {
                continue;
            };
            let common = list_to_dict(items);
            if common.get("enabled") == Some(&Value::Bool(false)) {
                continue;
            }
            let Some(kind) = Kind::from_name(&module_of(&name, &config)) else {
                continue;
            };
            let interval = common
                .get("interval")
                .and_then(Value::as_f64)
                .filter(|i| *i > 0.0)
                .map_or(Duration::ZERO, Duration::from_secs_f64);
            let rt = st.runtime.entry(name.clone()).or_default();
            if rt
                .last_run
                .is_some_and(|t| now.duration_since(t) + Duration::from_millis(100) < interval)
            {
                continue;
            }
            rt.last_run = Some(now);
            let own: Vec<Value> = items
                .iter()
                .filter_map(|i| match i {
                    Value::Object(m) => {
                        let m: Map<String, Value> = m
                            .iter()
                            .filter(|(k, _)| !COMMON.contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        (!m.is_empty()).then_some(Value::Object(m))
                    }
                    _ => None,
                })
                .collect();
            for (tag, mut data) in kind.beacon(&own, &mut rt.memory) {
                data.insert("id".into(), Value::from(id));
                events.push((format!("salt/beacon/{id}/{name}/{tag}"), data));
            }
        }
        events
    }
}

fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().trim_end_matches('%').trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_due_beacon_fires_tagged_events_with_the_minion_id() {
        let b = Beacons::new(
            Some(&json!({
                "load": [{"averages": {"1m": [-1.0, -0.5], "5m": [-1.0, -0.5], "15m": [-1.0, -0.5]}}, {"interval": 5}],
                "quiet": [{"beacon_module": "load"}, {"averages": {"1m": [0.0, 1e9], "5m": [0.0, 1e9], "15m": [0.0, 1e9]}}],
            })),
            None,
        );
        let t0 = Instant::now();
        let events = b.process("m1", t0);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].0, "salt/beacon/m1/load/");
        assert_eq!(events[0].1["id"], json!("m1"));
        assert!(events[0].1.contains_key("1m"));
        assert!(
            b.process("m1", t0 + Duration::from_secs(2)).is_empty(),
            "interval 5"
        );
        assert_eq!(b.process("m1", t0 + Duration::from_secs(5)).len(), 1);
        assert!(b.set_beacon_enabled("load", false));
        assert!(b.process("m1", t0 + Duration::from_secs(10)).is_empty());
        b.set_beacon_enabled("load", true);
        b.set_enabled(false);
        assert!(b.process("m1", t0 + Duration::from_secs(20)).is_empty());
    }

    #[test]
    fn validation_messages() {
        assert_eq!(
            Kind::Load.validate(&json!({"averages": 1})),
            Err("Configuration for load beacon must be a list.".into())
        );
        assert!(Kind::Load.validate(&json!([{"interval": 5}])).is_err());
        assert!(Kind::Diskusage.validate(&json!([{"/": "50%"}])).is_ok());
        assert!(Kind::Service
            .validate(&json!([{"services": {"sshd": {}}}]))
            .is_ok());
        assert!(Kind::Service
            .validate(&json!([{"services": ["sshd"]}]))
            .is_err());
    }
}
