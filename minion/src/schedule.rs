//! The minion's scheduler: the jobs of the `schedule` option (minion config, the
//! `minion.d/_schedule.conf` file that `schedule.add` persists to, and the pillar), when each
//! is due, and what the `schedule` execution module changes. The daemon asks
//! [`Schedule::due`] once a second and runs what it answers (see `daemon.rs`).
//!
//! Timing options: `seconds`, `minutes`, `hours`, `days` (summed into one interval), `splay`
//! (an int or `{start, end}`), `once` (with `once_fmt`), `until`, `after`, `run_on_start`,
//! `maxrunning`, `enabled`. `when`, `cron`, `range` and `skip_during_range` are refused with a
//! clear error (see [`unsupported`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{Local, NaiveDateTime};
use serde_json::{Map, Value};

/// Keys a schedule item may have (Salt's `SCHEDULE_CONF`); `schedule.list` shows only these.
pub const ITEM_KEYS: &[&str] = &[
    "name",
    "maxrunning",
    "function",
    "splay",
    "range",
    "when",
    "once",
    "once_fmt",
    "returner",
    "jid_include",
    "args",
    "kwargs",
    "_seconds",
    "seconds",
    "minutes",
    "hours",
    "days",
    "enabled",
    "return_job",
    "metadata",
    "cron",
    "until",
    "after",
    "return_config",
    "return_kwargs",
    "run_on_start",
    "skip_during_range",
    "run_after_skip_range",
];

/// Top-level keys of the `schedule` map that are settings, not jobs.
const SETTINGS: &[&str] = &["enabled", "skip_function", "skip_during_range"];

/// Where a job comes from (Salt's `where`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// The minion's options (config files and what `schedule.add` added).
    Opts,
    /// The pillar's `schedule`.
    Pillar,
}

/// A job the daemon should start now.
#[derive(Debug, Clone)]
pub struct Due {
    pub name: String,
    pub item: Map<String, Value>,
}

#[derive(Debug, Default)]
struct Runtime {
    next_fire: Option<Instant>,
    last_run: Option<NaiveDateTime>,
    running: usize,
    once_done: bool,
    /// Set when the job's options cannot be honoured (it is then never run).
    error: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    /// The `schedule` of the options: jobs, and the settings in [`SETTINGS`].
    opts: Map<String, Value>,
    /// The pillar's `schedule`.
    pillar: Map<String, Value>,
    runtime: HashMap<String, Runtime>,
    /// Jobs `schedule.run_job` asked for.
    run_now: Vec<String>,
    /// The daemon has made its first pass (jobs with `run_on_start` ran).
    started: bool,
}

/// The schedule of one minion.
#[derive(Debug)]
pub struct Schedule {
    state: Mutex<State>,
    /// `minion.d/_schedule.conf`; `None` keeps changes in memory only.
    saved_file: Option<PathBuf>,
}

impl Schedule {
    /// A schedule holding the `schedule` option's jobs. Changes are persisted to
    /// `saved_file` when a caller asks for it.
    pub fn new(opts: Option<&Value>, saved_file: Option<PathBuf>) -> Schedule {
        let opts = match opts {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        Schedule {
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

    /// Replace the pillar's jobs (after a pillar refresh).
    pub fn set_pillar(&self, pillar_schedule: Option<&Value>) {
        let mut st = self.lock();
        st.pillar = match pillar_schedule {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
    }

    /// The schedule as Salt's `list` reads it: the options' entries, then the pillar's.
    pub fn entries(&self, only: Option<Where>) -> Map<String, Value> {
        let st = self.lock();
        let mut out = Map::new();
        if only != Some(Where::Pillar) {
            out.extend(st.opts.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if only != Some(Where::Opts) {
            out.extend(st.pillar.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        out
    }

    /// The jobs persisted in `minion.d/_schedule.conf`.
    pub fn saved(&self) -> Map<String, Value> {
        let Some(path) = &self.saved_file else {
            return Map::new();
        };
        let Ok(text) = std::fs::read_to_string(path) else {
            return Map::new();
        };
        match serde_yaml::from_str::<Value>(&text) {
            Ok(Value::Object(mut doc)) => match doc.remove("schedule") {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            },
            _ => Map::new(),
        }
    }

    /// Whether the whole schedule is enabled.
    pub fn is_enabled(&self) -> bool {
        self.lock().opts.get("enabled") != Some(&Value::Bool(false))
    }

    /// Which source holds job `name`, if any.
    pub fn source_of(&self, name: &str) -> Option<Where> {
        let st = self.lock();
        if SETTINGS.contains(&name) {
            return None;
        }
        if st.opts.contains_key(name) {
            Some(Where::Opts)
        } else if st.pillar.contains_key(name) {
            Some(Where::Pillar)
        } else {
            None
        }
    }

    /// Add or replace job `name` in `source`; the job's timer starts over.
    pub fn put(&self, source: Where, name: &str, item: Map<String, Value>, persist: bool) {
        {
            let mut st = self.lock();
            match source {
                Where::Opts => st.opts.insert(name.to_string(), Value::Object(item)),
                Where::Pillar => st.pillar.insert(name.to_string(), Value::Object(item)),
            };
            st.runtime.remove(name);
        }
        if persist && source == Where::Opts {
            self.persist();
        }
    }

    /// Remove job `name`. False when there is no such job.
    pub fn delete(&self, name: &str, persist: bool) -> bool {
        let source = self.source_of(name);
        {
            let mut st = self.lock();
            let removed = match source {
                Some(Where::Opts) => st.opts.remove(name).is_some(),
                Some(Where::Pillar) => st.pillar.remove(name).is_some(),
                None => false,
            };
            if !removed {
                return false;
            }
            st.runtime.remove(name);
        }
        if persist && source == Some(Where::Opts) {
            self.persist();
        }
        true
    }

    /// Remove every job but the minion's own (`__` names).
    pub fn purge(&self, persist: bool) -> Vec<String> {
        let removed: Vec<String> = {
            let mut st = self.lock();
            let names: Vec<String> = st
                .opts
                .keys()
                .chain(st.pillar.keys())
                .filter(|k| !k.starts_with("__") && !SETTINGS.contains(&k.as_str()))
                .cloned()
                .collect();
            for n in &names {
                st.opts.remove(n);
                st.pillar.remove(n);
                st.runtime.remove(n);
            }
            names
        };
        if persist {
            self.persist();
        }
        removed
    }

    /// Set a job's `enabled`. False when there is no such job.
    pub fn set_job_enabled(&self, name: &str, enabled: bool, persist: bool) -> bool {
        let source = self.source_of(name);
        {
            let mut st = self.lock();
            let table = match source {
                Some(Where::Opts) => &mut st.opts,
                Some(Where::Pillar) => &mut st.pillar,
                None => return false,
            };
            if let Some(Value::Object(item)) = table.get_mut(name) {
                item.insert("enabled".into(), Value::Bool(enabled));
            }
        }
        if persist && source == Some(Where::Opts) {
            self.persist();
        }
        true
    }

    /// Enable or disable the whole schedule.
    pub fn set_enabled(&self, enabled: bool, persist: bool) {
        self.lock()
            .opts
            .insert("enabled".into(), Value::Bool(enabled));
        if persist {
            self.persist();
        }
    }

    /// Ask for job `name` to run at the daemon's next pass.
    pub fn run_now(&self, name: &str) {
        self.lock().run_now.push(name.to_string());
    }

    /// Write the options' schedule (without the minion's own `__` jobs) to
    /// `minion.d/_schedule.conf`, as `schedule: {...}`.
    pub fn persist(&self) {
        let Some(path) = &self.saved_file else { return };
        let opts: Map<String, Value> = self
            .lock()
            .opts
            .iter()
            .filter(|(k, _)| !k.starts_with("__"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut doc = Map::new();
        doc.insert("schedule".into(), Value::Object(opts));
        let text = brine_protocol::yaml::safe_dump(
            &Value::Object(doc),
            brine_protocol::yaml::Style::Block(2),
        );
        let write = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| {
                let tmp = path.with_extension("conf.tmp");
                std::fs::write(&tmp, text)?;
                std::fs::rename(tmp, path)
            });
        if let Err(e) = write {
            tracing::error!("schedule not saved to {}: {e}", path.display());
        }
    }

    /// The jobs to start now, and the time of the next pass the daemon should make at the
    /// latest. Each returned job counts as running until [`Schedule::finished`].
    pub fn due(&self, now: Instant) -> Vec<Due> {
        let mut st = self.lock();
        let first_pass = !st.started;
        st.started = true;
        let enabled = st.opts.get("enabled") != Some(&Value::Bool(false));
        let run_now = std::mem::take(&mut st.run_now);
        let jobs: Vec<(String, Map<String, Value>)> = st
            .opts
            .iter()
            .chain(st.pillar.iter())
            .filter(|(k, _)| !SETTINGS.contains(&k.as_str()))
            .filter_map(|(k, v)| match v {
                Value::Object(m) => Some((k.clone(), m.clone())),
                _ => None,
            })
            .collect();
        let mut out = Vec::new();
        for (name, item) in jobs {
            let forced = run_now.contains(&name);
            let rt = st.runtime.entry(name.clone()).or_default();
            if rt.error.is_none() {
                if let Some(why) = unsupported(&item) {
                    tracing::error!("schedule job {name}: {why}");
                    rt.error = Some(why);
                }
            }
            let fire = forced
                || (enabled && rt.error.is_none() && timer_fires(&item, rt, now, first_pass));
            if !fire {
                continue;
            }
            let job_enabled = item.get("enabled") != Some(&Value::Bool(false));
            if !forced && !job_enabled {
                continue;
            }
            let max = item
                .get("maxrunning")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1) as usize;
            if rt.running >= max {
                tracing::info!("schedule job {name} skipped: {max} already running");
                continue;
            }
            rt.running += 1;
            rt.last_run = Some(Local::now().naive_local());
            out.push(Due { name, item });
        }
        out
    }

    /// A job started by [`Schedule::due`] ended.
    pub fn finished(&self, name: &str) {
        if let Some(rt) = self.lock().runtime.get_mut(name) {
            rt.running = rt.running.saturating_sub(1);
        }
    }

    /// When job `name` next fires, as Salt's `show_next_fire_time` prints it.
    pub fn next_fire_time(&self, name: &str) -> Option<String> {
        let st = self.lock();
        let at = st.runtime.get(name)?.next_fire?;
        let from_now = at.saturating_duration_since(Instant::now());
        let when = Local::now().naive_local() + chrono::Duration::from_std(from_now).ok()?;
        Some(when.format("%Y-%m-%dT%H:%M:%S").to_string())
    }

    /// The runtime facts `schedule.job_status` adds to a job.
    pub fn status(&self, name: &str) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(t) = self.next_fire_time(name) {
            out.insert("_next_fire_time".into(), Value::from(t));
        }
        let st = self.lock();
        if let Some(rt) = st.runtime.get(name) {
            if let Some(last) = rt.last_run {
                out.insert(
                    "_last_run".into(),
                    Value::from(last.format("%Y-%m-%dT%H:%M:%S").to_string()),
                );
            }
            if let Some(e) = &rt.error {
                out.insert("_error".into(), Value::from(e.clone()));
            }
        }
        out
    }
}

/// The interval of a job in seconds (`seconds + 60 * minutes + ...`), 0 for none.
pub fn interval_secs(item: &Map<String, Value>) -> u64 {
    [
        ("seconds", 1),
        ("minutes", 60),
        ("hours", 3600),
        ("days", 86400),
    ]
    .iter()
    .map(|(k, mult)| number(item.get(*k)).map_or(0, |n| (n.max(0.0) as u64) * mult))
    .sum()
}

fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A random delay from the job's `splay` (seconds, or `{start, end}`).
fn splay(item: &Map<String, Value>) -> Duration {
    let (lo, hi) = match item.get("splay") {
        Some(Value::Object(m)) => (
            number(m.get("start")).unwrap_or(0.0),
            number(m.get("end")).unwrap_or(0.0),
        ),
        other => (0.0, number(other).unwrap_or(0.0)),
    };
    let (lo, hi) = (lo.max(0.0) as u64, hi.max(0.0) as u64);
    if hi <= lo {
        return Duration::from_secs(lo);
    }
    Duration::from_secs(lo + rand::random::<u64>() % (hi - lo + 1))
}

/// Why a job's options cannot be honoured, if so.
pub fn unsupported(item: &Map<String, Value>) -> Option<String> {
    for key in ["when", "cron", "range", "skip_during_range"] {
        if item.contains_key(key) {
            return Some(format!(
                "the \"{key}\" option is not supported by Brine's scheduler; use seconds, minutes, hours, days or once"
            ));
        }
    }
    if !item.contains_key("function") {
        return Some("no function given".into());
    }
    for key in ["until", "after"] {
        if let Some(v) = item.get(key) {
            if v.as_str().and_then(parse_time).is_none() {
                return Some(format!("{key} {v} is not a date and time Brine can read"));
            }
        }
    }
    if let Some(v) = item.get("once") {
        let fmt = item
            .get("once_fmt")
            .and_then(Value::as_str)
            .unwrap_or("%Y-%m-%dT%H:%M:%S");
        if v.as_str()
            .and_then(|s| NaiveDateTime::parse_from_str(s, fmt).ok())
            .is_none()
        {
            return Some(format!("Date string could not be parsed: {v}, {fmt}"));
        }
    }
    None
}

/// A date and time as users write them for `until` and `after` (local time).
pub fn parse_time(s: &str) -> Option<NaiveDateTime> {
    const FORMATS: &[&str] = &[
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
        "%m/%d/%Y %H:%M:%S",
        "%m/%d/%Y %I:%M%p",
        "%m/%d/%Y %I:%M %p",
    ];
    FORMATS
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .or_else(|| {
            chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
}

/// Whether the job's timer says it runs now; moves the timer on.
fn timer_fires(
    item: &Map<String, Value>,
    rt: &mut Runtime,
    now: Instant,
    first_pass: bool,
) -> bool {
    let wall = Local::now().naive_local();
    if let Some(until) = item
        .get("until")
        .and_then(Value::as_str)
        .and_then(parse_time)
    {
        if wall > until {
            return false;
        }
    }
    if let Some(after) = item
        .get("after")
        .and_then(Value::as_str)
        .and_then(parse_time)
    {
        if wall < after {
            return false;
        }
    }
    if let Some(once) = item.get("once").and_then(Value::as_str) {
        let fmt = item
            .get("once_fmt")
            .and_then(Value::as_str)
            .unwrap_or("%Y-%m-%dT%H:%M:%S");
        let Ok(at) = NaiveDateTime::parse_from_str(once, fmt) else {
            return false;
        };
        if rt.next_fire.is_none() {
            let wait = (at - wall).to_std().unwrap_or(Duration::ZERO);
            rt.next_fire = Some(now + wait);
        }
        if !rt.once_done && wall >= at {
            rt.once_done = true;
            return true;
        }
        return false;
    }
    let interval = interval_secs(item);
    if interval == 0 {
        return false;
    }
    let every = Duration::from_secs(interval);
    let Some(next) = rt.next_fire else {
        let run_on_start = first_pass && item.get("run_on_start") == Some(&Value::Bool(true));
        rt.next_fire = Some(now + every + splay(item));
        return run_on_start;
    };
    if now < next {
        return false;
    }
    rt.next_fire = Some(now + every + splay(item));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn interval_job_fires_after_its_interval_and_not_before() {
        let s = Schedule::new(
            Some(&json!({"j": {"function": "test.ping", "seconds": 5}})),
            None,
        );
        let t0 = Instant::now();
        assert!(
            s.due(t0).is_empty(),
            "an interval job waits one interval first"
        );
        assert!(s.due(t0 + Duration::from_secs(4)).is_empty());
        let due = s.due(t0 + Duration::from_secs(5));
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].name, "j");
        // Still running (maxrunning 1): the next tick is skipped.
        assert!(s.due(t0 + Duration::from_secs(10)).is_empty());
        s.finished("j");
        assert_eq!(s.due(t0 + Duration::from_secs(15)).len(), 1);
    }

    #[test]
    fn run_on_start_disabled_jobs_and_run_now() {
        let s = Schedule::new(
            Some(&json!({
                "a": {"function": "test.ping", "minutes": 1, "run_on_start": true},
                "b": {"function": "test.ping", "seconds": 1, "enabled": false},
                "c": {"function": "test.ping"},
            })),
            None,
        );
        let t0 = Instant::now();
        let names: Vec<String> = s.due(t0).into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["a"]);
        assert!(
            s.due(t0 + Duration::from_secs(3)).is_empty(),
            "b is disabled, c has no timer"
        );
        s.run_now("c");
        let names: Vec<String> = s
            .due(t0 + Duration::from_secs(3))
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["c"]);
        s.set_enabled(false, false);
        assert!(!s.is_enabled());
        assert!(s.due(t0 + Duration::from_secs(120)).is_empty());
    }

    #[test]
    fn unsupported_options_are_named() {
        let why = unsupported(&item(json!({"function": "x", "cron": "* * * * *"}))).unwrap();
        assert!(why.contains("\"cron\""), "{why}");
        assert!(unsupported(&item(json!({"function": "x", "seconds": 3}))).is_none());
        assert!(unsupported(&item(json!({"function": "x", "once": "tomorrow"}))).is_some());
        assert!(
            unsupported(&item(json!({"function": "x", "until": "2030-01-01 10:00"}))).is_none()
        );
    }

    #[test]
    fn persist_writes_the_opts_schedule_without_hidden_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("minion.d/_schedule.conf");
        let s = Schedule::new(
            Some(&json!({"__mine_interval": {"function": "mine.update", "minutes": 60}})),
            Some(file.clone()),
        );
        s.put(
            Where::Opts,
            "j",
            item(json!({"function": "test.ping", "seconds": 5})),
            true,
        );
        let saved = s.saved();
        assert_eq!(saved.keys().collect::<Vec<_>>(), ["j"]);
        assert_eq!(saved["j"]["seconds"], json!(5));
        assert!(s.delete("j", true));
        assert!(s.saved().is_empty());
        assert!(!s.delete("j", true));
    }
}
