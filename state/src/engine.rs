//! The state engine: low chunks run in order with their requisites, as Salt 3007's
//! `State.call_high`, `call_chunks`, `call_chunk`, `check_requisite` and `call` run them, with
//! Salt's results, comments and `__run_num__` order, and the `retry` and `parallel` options
//! (`call`, `call_parallel`, `_call_parallel_target`, `reconcile_procs`): a parallel state runs
//! on its own thread where Salt forks a process.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, PoisonError};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use brine_protocol::target::fnmatch;
use serde_json::{json, Map, Value};

use crate::low::{self, tag, text, text_ref, Low};
use crate::states::{self, Accumulators, Call, Host, Spec};
use crate::verify::py_text;
use crate::High;

/// How a run is made.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `test=True`: report what would change, change nothing.
    pub test: bool,
    /// `failhard`: stop at the first failure.
    pub failhard: bool,
    /// The job the run belongs to, for the events it fires; `None` when there is no master to
    /// fire them to (`salt-call --local`).
    pub job: Option<Job>,
}

/// The job a state run belongs to, and whether it fires Salt's `state_events`.
#[derive(Debug, Clone, Default)]
pub struct Job {
    pub jid: String,
    /// The minion's id.
    pub id: String,
    /// `state_events`: an event after every state (`salt/job/<jid>/prog/<id>/<run_num>`).
    pub state_events: bool,
}

/// What the requisites of a chunk say (Salt's `check_requisite` statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Met,
    Unmet,
    Fail,
    Change,
    Pre,
    Onfail,
    Onchanges,
}

/// The requisite kinds `check_requisite` looks at, in its order.
const CHECKED: &[&str] = &[
    "require",
    "require_any",
    "watch",
    "watch_any",
    "prereq",
    "onfail",
    "onfail_any",
    "onfail_all",
    "onchanges",
    "onchanges_any",
];

/// The key of a placeholder result (a parallel state still running) that names its thread in
/// [`Runner::procs`]; taken out when the state's result replaces the placeholder.
const PROC: &str = "__brine_proc__";

/// The results parallel states leave, by the tag of the chunk they ran (Salt's files in
/// `cachedir/<invocation id>/`).
type Store = Mutex<HashMap<String, Map<String, Value>>>;

/// A parallel state's thread.
struct Proc<'s> {
    /// `None` once joined.
    handle: Option<ScopedJoinHandle<'s, ()>>,
    /// The tag its result is stored under.
    tag: String,
}

impl Proc<'_> {
    fn finished(&self) -> bool {
        self.handle
            .as_ref()
            .is_none_or(ScopedJoinHandle::is_finished)
    }
}

/// One run of low chunks.
pub struct Runner<'a, 's> {
    host: &'a dyn Host,
    /// Where parallel states' threads run: the run's results wait for all of them.
    scope: &'s Scope<'s, 'a>,
    store: &'a Store,
    /// The run's file accumulators (`file.accumulated`).
    accumulators: &'a Accumulators,
    procs: Vec<Proc<'s>>,
    opts: Options,
    chunks: Vec<Low>,
    running: Map<String, Value>,
    pre: Map<String, Value>,
    active: HashSet<String>,
    run_num: u64,
    processed_sls: HashSet<String>,
    failhard_hit: bool,
    /// The state modules whose `mod_init` ran.
    mod_inited: HashSet<String>,
    /// Why the run stopped with no results: a state gave its function arguments it does not
    /// take.
    refused: Option<String>,
}

/// Why a run gave no results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// Errors in the high data, which Salt returns as a list.
    High(Vec<String>),
    /// A state gave its function arguments it does not take: Salt's `SaltInvocationError`,
    /// which ends the whole run (the states run before it keep what they did).
    Refused(String),
}

/// Salt's `check_result` (without the highstate, so no `onfail` handler rescues a failure):
/// whether a run's return, `{tag: state return}` or nested maps of them, has no state with
/// `result: False`. Anything but a non-empty map fails; at the top level (`recurse` false)
/// every value must be a map (a list for `__extend__`).
pub fn check_result(running: &Value, recurse: bool) -> bool {
    let Some(states) = running.as_object().filter(|m| !m.is_empty()) else {
        return false;
    };
    states.iter().all(|(id, result)| {
        let shaped = if id == "__extend__" {
            result.is_array()
        } else {
            result.is_object()
        };
        if !recurse && !shaped {
            return false;
        }
        match result.as_object() {
            Some(m) => match m.get("result") {
                Some(Value::Bool(false)) => false,
                Some(_) => true,
                None => check_result(result, true),
            },
            None => true,
        }
    })
}

/// Salt's `call_high`: the high data prepared (extend, requisite_in, exclude), compiled and
/// run. Errors in the high data are returned instead of results, as Salt returns them.
pub fn call_high(
    high: &High,
    host: &dyn Host,
    opts: Options,
) -> Result<Map<String, Value>, RunError> {
    let mut high = high.clone();
    let mut errors = low::reconcile_extend(&mut high, false);
    errors.extend(crate::verify_high(&high));
    if !errors.is_empty() {
        return Err(RunError::High(errors));
    }
    let req_in_errors = low::requisite_in(&mut high);
    low::apply_exclude(&mut high);
    if !req_in_errors.is_empty() {
        return Err(RunError::High(req_in_errors));
    }
    let chunks = low::compile_high_data(&high);
    run_chunks(&high, chunks, host, opts, |runner| {
        runner.call_chunks();
        runner.call_listen();
    })
}

/// Salt's `state.sls_id`: the high data checked and its `*_in` requisites turned around (no
/// exclude), compiled, and each chunk of ID `id` called with the requisites it needs, as Salt
/// calls them: each from a run of its own (a state two of them require runs for both), one
/// `__run_num__` count, the results merged. Errors in the high data are returned instead.
pub fn call_id(
    high: &High,
    host: &dyn Host,
    opts: Options,
    id: &str,
) -> Result<Map<String, Value>, RunError> {
    let mut high = high.clone();
    let mut errors = crate::verify_high(&high);
    errors.extend(low::requisite_in(&mut high));
    if !errors.is_empty() {
        return Err(RunError::High(errors));
    }
    let chunks = low::compile_high_data(&high);
    run_chunks(&high, chunks, host, opts, |runner| {
        let mut merged = Map::new();
        for idx in 0..runner.chunks.len() {
            if text_ref(&runner.chunks[idx], "__id__") != id {
                continue;
            }
            runner.running = Map::new();
            runner.active.clear();
            runner.call_chunk(idx, 0);
            runner.reconcile_procs(None, true);
            merged.extend(std::mem::take(&mut runner.running));
        }
        runner.running = merged;
    })
}

/// A run of `chunks` (compiled from `high`) made by `drive`, its results once every thread
/// it started has ended.
fn run_chunks(
    high: &High,
    chunks: Vec<Low>,
    host: &dyn Host,
    opts: Options,
    drive: impl FnOnce(&mut Runner<'_, '_>),
) -> Result<Map<String, Value>, RunError> {
    let processed_sls = high
        .iter()
        .filter(|(k, _)| !k.starts_with("__"))
        .filter_map(|(_, b)| b.get("__sls__").map(py_text))
        .collect();
    let store = Store::default();
    let accumulators = Accumulators::default();
    std::thread::scope(|scope| {
        let mut runner = Runner {
            host,
            scope,
            store: &store,
            accumulators: &accumulators,
            procs: Vec::new(),
            opts,
            chunks,
            running: Map::new(),
            pre: Map::new(),
            active: HashSet::new(),
            run_num: 0,
            processed_sls,
            failhard_hit: false,
            mod_inited: HashSet::new(),
            refused: None,
        };
        drive(&mut runner);
        let refused = runner.refused.take();
        let ret = runner.finish();
        match refused {
            Some(why) => Err(RunError::Refused(why)),
            None => Ok(ret),
        }
    })
}

fn truthy(v: Option<&Value>) -> bool {
    brine_protocol::payload::json_truthy(v.unwrap_or(&Value::Null))
}

/// Salt's `trim_req`: a requisite reference as (kind, value), `state.fun` cut to `state`.
fn reference(req: &Value) -> Option<(String, Value)> {
    match req {
        Value::String(s) => Some(("id".into(), Value::String(s.clone()))),
        Value::Object(m) => {
            let (k, v) = m.iter().next()?;
            Some((k.split('.').next().unwrap_or(k).to_string(), v.clone()))
        }
        _ => None,
    }
}

/// The local time of day as Python's `time().isoformat()` writes it.
fn start_time() -> String {
    chrono::Local::now().format("%H:%M:%S%.6f").to_string()
}

fn duration_ms(since: Instant) -> Value {
    let micros = since.elapsed().as_micros() as f64;
    json!(micros / 1000.0)
}

/// A return's `duration` (ms).
fn ms(ret: &Map<String, Value>) -> f64 {
    ret.get("duration").and_then(Value::as_f64).unwrap_or(0.0)
}

/// A state function called, its error made Salt's failed return.
fn run_state(spec: &Spec, call: &Call) -> Map<String, Value> {
    match (spec.run)(call) {
        Ok(r) => r,
        Err(e) => Runner::failed(
            call.low,
            Some(format!("An exception occurred in this state: {e}")),
        ),
    }
}

/// Salt's `_call_parallel_target`: a parallel state's run on its own thread, retried there as
/// its `retry` asks. Salt's loop differs from [`Runner::call`]'s: it runs up to `attempts`
/// more times (not `attempts` in all), each "Attempt n" line tells the *new* attempt's result
/// and comment (none when that comment is empty) after the earlier comment, a new attempt's
/// own duration counts as nothing, and its return lacks `__parallel__`.
fn run_parallel(
    spec: &Spec,
    low: &Low,
    host: &dyn Host,
    running: &Map<String, Value>,
    saltenv: &str,
    test: bool,
    accumulators: &Accumulators,
) -> Map<String, Value> {
    let call = Call {
        low,
        test,
        host,
        running,
        saltenv,
        accumulators,
    };
    let started = Instant::now();
    let start = start_time();
    let mut ret = run_state(spec, &call);
    ret.insert("start_time".into(), Value::String(start));
    ret.insert("duration".into(), duration_ms(started));
    ret.insert("__parallel__".into(), Value::Bool(true));
    let Some(data) = low.get("retry") else {
        return ret;
    };
    let retry = Retry::verify(data);
    if test {
        retry.note_test(&mut ret);
        return ret;
    }
    let mut retries: i64 = 1;
    while retry.attempts.value >= retries {
        if retry.reached(&ret) {
            break;
        }
        let wait = match retry.wait() {
            Ok(wait) => wait,
            Err(e) => {
                retry_failed(&mut ret, &e);
                break;
            }
        };
        sleep_secs(wait);
        let mut next = run_state(spec, &call);
        let line = if truthy(next.get("comment")) {
            attempt_line(retries as usize, &next)
        } else {
            String::new()
        };
        let before = py_text(ret.get("comment").unwrap_or(&Value::Null));
        next.insert("comment".into(), Value::String(format!("{before}\n{line}")));
        // Salt starts and stops the new attempt's clock after it ran: it counts 0.
        let duration = ms(&ret) + (wait as f64) * 1000.0;
        next.insert("duration".into(), json!(duration));
        if retries == 1 {
            if let Some(start) = ret.get("start_time").cloned() {
                next.insert("start_time".into(), start);
            }
        }
        ret = next;
        retries += 1;
    }
    ret
}

/// "Attempt n: ..." for an earlier attempt's return.
fn attempt_line(n: usize, ret: &Map<String, Value>) -> String {
    format!(
        "Attempt {n}: Returned a result of \"{}\", with the following comment: \"{}\"",
        py_text(ret.get("result").unwrap_or(&Value::Null)),
        py_text(ret.get("comment").unwrap_or(&Value::Null)),
    )
}

/// A return's comment as Salt's `"" if not ret["comment"] else ret["comment"]` takes it once
/// its return is unified (a list of lines joined).
fn comment_text(comment: Option<&Value>) -> String {
    match comment {
        Some(c) if !truthy(Some(c)) => String::new(),
        Some(Value::Array(lines)) => lines.iter().map(py_text).collect::<Vec<_>>().join("\n"),
        Some(c) => py_text(c),
        None => String::new(),
    }
}

/// A retry that cannot wait (a negative interval or splay, where Salt's `time.sleep` or
/// `random.randint` raises and ends the whole run): the state fails, saying why.
fn retry_failed(ret: &mut Map<String, Value>, why: &str) {
    let before = comment_text(ret.get("comment"));
    let comment = if before.is_empty() {
        why.to_string()
    } else {
        format!("{before}\n{why}")
    };
    ret.insert("result".into(), Value::Bool(false));
    ret.insert("comment".into(), Value::String(comment));
}

fn sleep_secs(secs: i64) {
    if let Ok(secs) = u64::try_from(secs) {
        if secs > 0 {
            std::thread::sleep(Duration::from_secs(secs));
        }
    }
}

/// A random whole number from 0 to `max` (Python's `random.randint(0, max)`), `max` ≥ 0.
fn random_upto(max: i64) -> i64 {
    let mut hasher = RandomState::new().build_hasher();
    let now = SystemTime::now().duration_since(UNIX_EPOCH);
    hasher.write_u128(now.map_or(0, |d| d.as_nanos()));
    let span = max.unsigned_abs() + 1;
    i64::try_from(hasher.finish() % span).unwrap_or(max)
}

/// A whole number as Python's `isinstance(value, int)` sees one (`True` and `False` are 1
/// and 0): its value and what was given.
#[derive(Debug, Clone, PartialEq)]
struct PyInt {
    value: i64,
    given: Value,
}

impl PyInt {
    fn of(v: &Value) -> Option<PyInt> {
        let value = match v {
            Value::Bool(b) => i64::from(*b),
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_u64().map(|u| i64::try_from(u).unwrap_or(i64::MAX)))?,
            _ => return None,
        };
        Some(PyInt {
            value,
            given: v.clone(),
        })
    }

    fn new(value: i64) -> PyInt {
        PyInt {
            value,
            given: json!(value),
        }
    }
}

/// A state's `retry` option as Salt's `verify_retry_data` makes it: `True` for the defaults
/// (2 attempts, every 30 s, until a result of `True`), `False` for no attempts, a map for
/// some of them. A value of the wrong type is replaced by its default, any other `retry`
/// by all the defaults, with Salt's warnings.
#[derive(Debug, Clone, PartialEq)]
struct Retry {
    until: bool,
    attempts: PyInt,
    interval: PyInt,
    splay: PyInt,
}

impl Retry {
    fn defaults() -> Retry {
        Retry {
            until: true,
            attempts: PyInt::new(2),
            interval: PyInt::new(30),
            splay: PyInt::new(0),
        }
    }

    fn verify(data: &Value) -> Retry {
        let defaults = Retry::defaults();
        let invalid = |key: &str, default: &str| {
            tracing::warn!(
                "An invalid value was passed for the retry {key}, using default value '{default}'"
            );
        };
        match data {
            Value::Object(m) => {
                let until = match m.get("until") {
                    None => defaults.until,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        invalid("until", "True");
                        defaults.until
                    }
                };
                let int = |key: &str, default: PyInt| match m.get(key) {
                    None => default,
                    Some(v) => PyInt::of(v).unwrap_or_else(|| {
                        invalid(key, &py_text(&default.given));
                        default
                    }),
                };
                Retry {
                    until,
                    attempts: int("attempts", defaults.attempts),
                    interval: int("interval", defaults.interval),
                    splay: int("splay", defaults.splay),
                }
            }
            Value::Bool(true) => defaults,
            Value::Bool(false) => {
                tracing::debug!("State is set with explicit retry: False so using default retry configuration with 0 attempts");
                Retry {
                    attempts: PyInt::new(0),
                    ..defaults
                }
            }
            _ => {
                tracing::warn!("State is set to retry, but retry: True or a valid dict for retry configuration was not found.  Using retry defaults");
                defaults
            }
        }
    }

    fn to_value(&self) -> Value {
        json!({
            "until": self.until,
            "attempts": self.attempts.given,
            "interval": self.interval.given,
            "splay": self.splay.given,
        })
    }

    /// The return has the result waited for.
    fn reached(&self, ret: &Map<String, Value>) -> bool {
        ret.get("result") == Some(&Value::Bool(self.until))
    }

    /// The seconds to wait before the next attempt: the interval and a random splay.
    fn wait(&self) -> Result<i64, String> {
        let mut wait = self.interval.value;
        if self.splay.value != 0 {
            if self.splay.value < 0 {
                return Err(format!(
                    "The retry splay must not be negative: {}",
                    self.splay.value
                ));
            }
            wait = wait.saturating_add(random_upto(self.splay.value));
        }
        if wait < 0 {
            return Err(format!(
                "The retry interval must not be negative: {}",
                self.interval.value
            ));
        }
        Ok(wait)
    }

    /// In a test run the state is not retried: its comment says how it would be.
    fn note_test(&self, ret: &mut Map<String, Value>) {
        let before = match ret.get("comment") {
            Some(c) if truthy(Some(c)) => py_text(c),
            _ => String::new(),
        };
        let comment = format!(
            "{before}  The state would be retried every {} seconds (with a splay of up to {} \
             seconds) a maximum of {} times or until a result of {} is returned",
            py_text(&self.interval.given),
            py_text(&self.splay.given),
            py_text(&self.attempts.given),
            if self.until { "True" } else { "False" },
        );
        ret.insert("comment".into(), Value::String(comment));
    }
}

impl<'a, 's> Runner<'a, 's> {
    fn stamp(&mut self, tag: &str, low: &Low, mut ret: Map<String, Value>, into_pre: bool) {
        ret.insert("__run_num__".into(), json!(self.run_num));
        for key in ["__sls__", "__id__", "name"] {
            ret.insert(key.into(), low.get(key).cloned().unwrap_or(Value::Null));
        }
        self.run_num += 1;
        if into_pre {
            self.pre.insert(tag.to_string(), Value::Object(ret));
        } else {
            self.running.insert(tag.to_string(), Value::Object(ret));
        }
    }

    /// A result for a state that was not run: `result`, `comment` and a zero duration.
    fn not_run(result: Value, comment: &str) -> Map<String, Value> {
        let mut ret = Map::new();
        ret.insert("changes".into(), json!({}));
        ret.insert("result".into(), result);
        ret.insert("duration".into(), json!(0.0));
        ret.insert("start_time".into(), Value::String(start_time()));
        ret.insert("comment".into(), Value::String(comment.to_string()));
        ret
    }

    /// Salt's result for a chunk whose requisites loop back to it.
    fn recursive(&mut self, idx: usize, tag: &str) {
        let mut ret = Map::new();
        ret.insert("changes".into(), json!({}));
        ret.insert("result".into(), Value::Bool(false));
        ret.insert("comment".into(), json!("Recursive requisite found"));
        let low = self.chunks[idx].clone();
        self.stamp(tag, &low, ret, false);
    }

    /// Salt's `State.event`: after a state, with `state_events` on, an event carrying its
    /// return (`salt/job/<jid>/prog/<id>/<run_num>`, `{ret, len}`); with the state's own
    /// `fire_event`, `salt/state_result/<jid>/<id>/<name or the fire_event text>` instead.
    fn event(&self, idx: usize, tag: &str, from_pre: bool) {
        let Some(job) = &self.opts.job else {
            return;
        };
        let fire_event = self.chunks[idx]
            .get("fire_event")
            .cloned()
            .unwrap_or(Value::Null);
        if !job.state_events && !truthy(Some(&fire_event)) {
            return;
        }
        let results = if from_pre { &self.pre } else { &self.running };
        let Some(chunk_ret) = results.get(tag) else {
            return;
        };
        let (event_tag, data) = match &fire_event {
            Value::Bool(true) => (
                format!(
                    "salt/state_result/{}/{}/{}",
                    job.jid,
                    job.id,
                    chunk_ret.get("name").map(py_text).unwrap_or_default()
                ),
                json!({ "ret": chunk_ret }),
            ),
            Value::String(text) => (
                format!("salt/state_result/{}/{}/{text}", job.jid, job.id),
                json!({ "ret": chunk_ret }),
            ),
            _ => (
                format!(
                    "salt/job/{}/prog/{}/{}",
                    job.jid,
                    job.id,
                    chunk_ret
                        .get("__run_num__")
                        .map(py_text)
                        .unwrap_or_default()
                ),
                json!({ "ret": chunk_ret, "len": self.chunks.len() }),
            ),
        };
        self.host.fire_event(&event_tag, data, &job.jid);
    }

    /// A failed state's return, `{result: False, name, changes: {}}`, with a comment if given.
    fn failed(low: &Low, comment: Option<String>) -> Map<String, Value> {
        let mut ret = Map::new();
        ret.insert("result".into(), Value::Bool(false));
        ret.insert(
            "name".into(),
            low.get("name").cloned().unwrap_or(Value::Null),
        );
        ret.insert("changes".into(), json!({}));
        if let Some(c) = comment {
            ret.insert("comment".into(), Value::String(c));
        }
        ret
    }

    /// Salt's `call_chunks`. A failhard stop returns before the parallel states are waited
    /// for, as Salt's does: their results stay "Started in a separate process".
    fn call_chunks(&mut self) {
        for idx in 0..self.chunks.len() {
            if self.failhard_hit {
                return;
            }
            let t = tag(&self.chunks[idx]);
            if !self.running.contains_key(&t) {
                self.call_chunk(idx, 0);
                if self.failhard_hit || self.check_failhard(idx) {
                    return;
                }
            }
            self.active.clear();
        }
        self.reconcile_procs(None, true);
    }

    /// The results, once every thread has ended: placeholders a failhard stop left keep
    /// Salt's "Started in a separate process" (without Salt's `proc` object).
    fn finish(mut self) -> Map<String, Value> {
        for proc in &mut self.procs {
            if let Some(handle) = proc.handle.take() {
                // A state thread that panicked has stored nothing; its placeholder says so.
                let _ = handle.join();
            }
        }
        for ret in self.running.values_mut() {
            if let Value::Object(ret) = ret {
                ret.remove(PROC);
            }
        }
        self.running
    }

    /// Salt's `reconcile_procs`: the placeholders of parallel states (all, or those tagged in
    /// `only`) whose threads have ended replaced by what the threads stored under the
    /// placeholders' tags ("Parallel cache failure" when nothing), waiting for the threads
    /// when `wait`. True when none of them is still running.
    ///
    /// A parallel state whose requisites call for its `mod_watch` runs twice, both in
    /// parallel, and its placeholder is the `mod_watch` thread's while the result is stored
    /// under the first call's tag: Salt reads that result when the `mod_watch` process ends
    /// (and fails when the first has not finished yet); here the first thread is waited for
    /// too, so the result does not depend on which thread ends first.
    fn reconcile_procs(&mut self, only: Option<&[String]>, wait: bool) -> bool {
        let pending: Vec<(String, usize)> = self
            .running
            .iter()
            .filter(|(t, _)| only.is_none_or(|only| only.contains(t)))
            .filter_map(|(t, r)| {
                let id = r.get(PROC)?.as_u64()?;
                Some((t.clone(), usize::try_from(id).ok()?))
            })
            .collect();
        let mut all_done = true;
        for (t, id) in pending {
            let writers: Vec<usize> = (0..self.procs.len())
                .filter(|&i| i == id || (self.procs[i].tag == t && self.procs[i].handle.is_some()))
                .collect();
            if !wait && writers.iter().any(|&i| !self.procs[i].finished()) {
                all_done = false;
                continue;
            }
            for i in writers {
                if let Some(handle) = self.procs[i].handle.take() {
                    let _ = handle.join();
                }
            }
            let stored = self
                .store
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&t)
                .cloned();
            let Some(Value::Object(entry)) = self.running.get_mut(&t) else {
                continue;
            };
            entry.remove(PROC);
            let ret = stored.unwrap_or_else(|| {
                let mut ret = Map::new();
                ret.insert("result".into(), Value::Bool(false));
                ret.insert("comment".into(), json!("Parallel cache failure"));
                ret.insert(
                    "name".into(),
                    entry.get("name").cloned().unwrap_or(Value::Null),
                );
                ret.insert("changes".into(), json!({}));
                ret
            });
            entry.extend(ret);
        }
        all_done
    }

    /// Salt's `_mod_init`: a module's initialiser, once per run, before its first state.
    fn mod_init(&mut self, idx: usize) {
        let low = &self.chunks[idx];
        let module = text(low, "state");
        if self.mod_inited.contains(&module)
            || states::lookup(&format!("{module}.{}", text(low, "fun"))).is_none()
        {
            return;
        }
        let Some(init) = states::mod_init(&module) else {
            return;
        };
        let call = Call {
            low,
            test: self.opts.test,
            host: self.host,
            running: &self.running,
            saltenv: "base",
            accumulators: self.accumulators,
        };
        if init(&call) {
            self.mod_inited.insert(module);
        }
    }

    fn check_failhard(&self, idx: usize) -> bool {
        if self.opts.test {
            return false;
        }
        let low = &self.chunks[idx];
        let failhard = low
            .get("failhard")
            .map_or(self.opts.failhard, |v| truthy(Some(v)));
        match self.running.get(&tag(low)) {
            Some(ret) if failhard => ret.get("result") == Some(&Value::Bool(false)),
            _ => false,
        }
    }

    /// The chunks a requisite reference names.
    fn matching(&self, key: &str, val: &Value) -> Vec<usize> {
        let mut out = Vec::new();
        let Some(val) = val.as_str() else {
            return out;
        };
        // Most references are plain names: compare them without building a glob.
        let is_glob = val.contains(['*', '?', '[']);
        let fnmatch = |pattern: &str, text: &str| {
            if is_glob {
                fnmatch(pattern, text)
            } else {
                pattern == text
            }
        };
        for (i, chunk) in self.chunks.iter().enumerate() {
            if key == "sls" {
                let included = chunk
                    .get("__sls_included_from__")
                    .and_then(Value::as_array)
                    .is_some_and(|l| l.iter().any(|s| s.as_str() == Some(val)));
                if fnmatch(val, &text_ref(chunk, "__sls__")) || included {
                    out.push(i);
                }
                continue;
            }
            if (fnmatch(val, &text_ref(chunk, "name")) || fnmatch(val, &text_ref(chunk, "__id__")))
                && (key == "id" || text_ref(chunk, "state") == key)
            {
                out.push(i);
            }
        }
        out
    }

    fn sls_processed(&self, val: &Value) -> bool {
        val.as_str()
            .is_some_and(|v| self.processed_sls.iter().any(|s| fnmatch(v, s)))
    }

    /// `watch` on a state without `mod_watch` is a `require`.
    fn watch_to_require(&mut self, idx: usize) {
        let state = text(&self.chunks[idx], "state");
        let has_watch = states::lookup(&format!("{state}.mod_watch")).is_some();
        if has_watch {
            return;
        }
        for (from, to) in [("watch", "require"), ("watch_any", "require_any")] {
            let low = &mut self.chunks[idx];
            if let Some(watch) = low.remove(from) {
                let add = watch.as_array().cloned().unwrap_or_default();
                match low.get_mut(to).and_then(Value::as_array_mut) {
                    Some(existing) => existing.extend(add),
                    None => {
                        low.insert(to.into(), watch);
                    }
                }
            }
        }
    }

    fn check_requisite(
        &mut self,
        idx: usize,
        pre: bool,
    ) -> (Status, BTreeMap<&'static str, Vec<usize>>) {
        self.watch_to_require(idx);
        let low = self.chunks[idx].clone();
        let mut kinds: Vec<&'static str> = CHECKED.to_vec();
        let present = kinds.iter().any(|k| low.contains_key(*k)) || low.contains_key("prerequired");
        if !present {
            return (Status::Met, BTreeMap::new());
        }
        self.reconcile_procs(None, false);
        if pre {
            kinds.push("prerequired");
        }
        let mut reqs: Vec<(&'static str, Vec<usize>)> = Vec::new();
        for kind in &kinds {
            let mut found_chunks = Vec::new();
            if let Some(list) = low.get(*kind).filter(|v| !v.is_null()) {
                for req in list.as_array().map(Vec::as_slice).unwrap_or_default() {
                    let Some((key, val)) = reference(req) else {
                        continue;
                    };
                    if val.is_null() {
                        continue;
                    }
                    let found = self.matching(&key, &val);
                    let ok = !found.is_empty() || (key == "sls" && self.sls_processed(&val));
                    found_chunks.extend(found);
                    if !ok {
                        return (Status::Unmet, BTreeMap::new());
                    }
                }
            }
            reqs.push((kind, found_chunks));
        }
        let mut fun_stats: HashSet<&'static str> = HashSet::new();
        for (kind, idxs) in &reqs {
            let mut stats: HashSet<&'static str> = HashSet::new();
            let prereq = kind.starts_with("prereq") && !kind.starts_with("prerequired");
            if !prereq {
                // The parallel states required must have ended (`prereq` checks never run in
                // parallel).
                let tags: Vec<String> = idxs.iter().map(|&c| tag(&self.chunks[c])).collect();
                self.reconcile_procs(Some(&tags), true);
            }
            for &c in idxs {
                let t = tag(&self.chunks[c]);
                let run = if prereq {
                    self.pre.get(&t)
                } else {
                    self.running.get(&t)
                };
                let Some(run) = run else {
                    stats.insert("unmet");
                    continue;
                };
                let result = run.get("result").cloned().unwrap_or(Value::Null);
                let changed = truthy(run.get("changes"));
                if kind.starts_with("onfail") {
                    if result == Value::Bool(true) {
                        stats.insert("onfail");
                        continue;
                    }
                } else if kind.starts_with("onchanges") {
                    if result == Value::Bool(false) || !changed {
                        stats.insert("onchanges");
                    } else {
                        stats.insert("onchangesmet");
                    }
                    continue;
                } else if result == Value::Bool(false) {
                    stats.insert("fail");
                    continue;
                }
                if kind.starts_with("watch") && changed {
                    stats.insert("change");
                    continue;
                }
                if kind.starts_with("prereq")
                    && result.is_null()
                    && !kind.starts_with("prerequired")
                {
                    stats.insert("premet");
                }
                if kind.starts_with("prereq") && !result.is_null() {
                    if !kind.starts_with("prerequired") {
                        stats.insert("pre");
                    }
                } else if run.get("__state_ran__") != Some(&Value::Bool(false)) {
                    stats.insert("met");
                }
            }
            if kind.ends_with("_any") || *kind == "onfail" {
                if (stats.contains("met") || stats.contains("change")) && stats.contains("fail") {
                    stats.remove("fail");
                }
                if stats.contains("onchangesmet") {
                    stats.remove("onchanges");
                    stats.remove("fail");
                }
                if stats.contains("onfail") && stats.contains("met") {
                    stats.remove("onfail");
                }
            }
            if kind.ends_with("_all") && stats.contains("onfail") && stats.contains("met") {
                stats.remove("met");
            }
            fun_stats.extend(stats);
        }
        let has = |s: &str| fun_stats.contains(s);
        let status = if has("unmet") {
            Status::Unmet
        } else if has("fail") {
            Status::Fail
        } else if has("pre") {
            if has("premet") {
                Status::Met
            } else {
                Status::Pre
            }
        } else if has("onfail") && !has("onchangesmet") {
            Status::Onfail
        } else if has("onchanges") && !has("onchangesmet") {
            Status::Onchanges
        } else if has("change") {
            Status::Change
        } else if has("onfail") {
            Status::Onfail
        } else {
            Status::Met
        };
        (status, reqs.into_iter().collect())
    }

    fn call_chunk(&mut self, idx: usize, depth: usize) {
        self.mod_init(idx);
        let t = tag(&self.chunks[idx]);
        if !truthy(self.chunks[idx].get("prerequired")) {
            self.active.insert(t.clone());
        }
        let mut requisites: Vec<&str> = vec![
            "require",
            "require_any",
            "watch",
            "watch_any",
            "prereq",
            "onfail",
            "onfail_any",
            "onchanges",
            "onchanges_any",
        ];
        let is_prereq = truthy(self.chunks[idx].get("__prereq__"));
        let (status, reqs) = if !is_prereq {
            requisites.push("prerequired");
            self.check_requisite(idx, true)
        } else {
            self.check_requisite(idx, false)
        };
        match status {
            Status::Unmet => {
                let low = self.chunks[idx].clone();
                let mut lost: Vec<(&str, Vec<(String, Value)>)> = Vec::new();
                let mut to_run: Vec<usize> = Vec::new();
                for requisite in &requisites {
                    let mut lost_here = Vec::new();
                    for req in low
                        .get(*requisite)
                        .and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                    {
                        let Some((key, val)) = reference(req) else {
                            continue;
                        };
                        if val.is_null() {
                            continue;
                        }
                        let found = self.matching(&key, &val);
                        for &c in &found {
                            if *requisite == "prereq" {
                                self.chunks[c].insert("__prereq__".into(), Value::Bool(true));
                            } else if *requisite == "prerequired" && key != "sls" {
                                self.chunks[c].insert("__prerequired__".into(), Value::Bool(true));
                            }
                        }
                        let ok = !found.is_empty() || (key == "sls" && self.sls_processed(&val));
                        to_run.extend(found);
                        if !ok {
                            lost_here.push((key, val));
                        }
                    }
                    lost.push((requisite, lost_here));
                }
                if lost.iter().any(|(_, l)| !l.is_empty()) {
                    let mut comment = String::from("The following requisites were not found:\n");
                    for (requisite, lreqs) in &lost {
                        if lreqs.is_empty() {
                            continue;
                        }
                        comment.push_str(&format!("{}{requisite}:\n", " ".repeat(19)));
                        for (k, v) in lreqs {
                            comment.push_str(&format!("{}{k}: {}\n", " ".repeat(23), py_text(v)));
                        }
                    }
                    let ret = Self::not_run(Value::Bool(false), &comment);
                    self.stamp(&t, &low, ret, is_prereq);
                    self.event(idx, &t, is_prereq);
                    return;
                }
                let mut last = None;
                for c in to_run {
                    last = Some(c);
                    let ctag = tag(&self.chunks[c]);
                    if self.running.contains_key(&ctag) {
                        continue;
                    }
                    if self.active.contains(&ctag) {
                        if truthy(self.chunks[c].get("__prerequired__")) {
                            if !self.pre.contains_key(&t) {
                                self.chunks[idx].insert("__prereq__".into(), Value::Bool(true));
                                let ret = self.call_idx(idx);
                                self.pre.insert(ctag, Value::Object(ret));
                            }
                            return;
                        }
                        self.recursive(idx, &t);
                        self.event(idx, &t, false);
                        return;
                    }
                    self.call_chunk(c, 0);
                    if self.failhard_hit || self.check_failhard(c) {
                        self.failhard_hit = true;
                        return;
                    }
                }
                if truthy(self.chunks[idx].get("__prereq__")) {
                    let (status, _) = self.check_requisite(idx, false);
                    let mut ret = self.call_idx(idx);
                    if !truthy(ret.get("changes")) && status == Status::Change {
                        ret.insert("changes".into(), json!({"watch": "watch"}));
                        ret.insert("result".into(), Value::Null);
                    }
                    self.pre.insert(t.clone(), Value::Object(ret));
                } else if depth + 1 >= 20 {
                    self.recursive(idx, &t);
                } else {
                    self.call_chunk(idx, depth + 1);
                }
                if let Some(c) = last {
                    if self.check_failhard(c) {
                        self.failhard_hit = true;
                        return;
                    }
                }
            }
            Status::Met => {
                let ret = self.call_idx(idx);
                if is_prereq {
                    self.pre.insert(t.clone(), Value::Object(ret));
                } else {
                    self.running.insert(t.clone(), Value::Object(ret));
                }
            }
            Status::Fail => {
                let low = self.chunks[idx].clone();
                if let Some(Value::Object(mut prev)) = self.pre.get(&t).cloned() {
                    if truthy(prev.get("changes")) {
                        prev.insert("changes".into(), json!({}));
                    }
                    prev.insert("__run_num__".into(), json!(self.run_num));
                    for key in ["__sls__", "__id__", "name"] {
                        prev.insert(key.into(), low.get(key).cloned().unwrap_or(Value::Null));
                    }
                    self.running.insert(t.clone(), Value::Object(prev));
                } else {
                    let mut failed: Vec<String> = Vec::new();
                    for idxs in reqs.values() {
                        for &c in idxs {
                            let req_low = &self.chunks[c];
                            let rt = tag(req_low);
                            let req_ret = self.pre.get(&rt).or_else(|| self.running.get(&rt));
                            if req_ret.and_then(|r| r.get("result")) == Some(&Value::Bool(false)) {
                                let key = format!(
                                    "{}.{}",
                                    text(req_low, "__sls__"),
                                    text(req_low, "__id__")
                                );
                                if !failed.contains(&key) {
                                    failed.push(key);
                                }
                            }
                        }
                    }
                    let ret = Self::not_run(
                        Value::Bool(false),
                        &format!("One or more requisite failed: {}", failed.join(", ")),
                    );
                    self.stamp(&t, &low, ret, false);
                    self.run_num -= 1;
                    let copy = self.running.get(&t).cloned().unwrap_or(Value::Null);
                    self.pre.insert(t.clone(), copy);
                }
                self.run_num += 1;
            }
            Status::Change if !is_prereq => {
                let mut ret = self.call_idx(idx);
                let skip = truthy(ret.get("skip_watch"));
                if !truthy(ret.get("changes")) && !skip {
                    let mut low = self.chunks[idx].clone();
                    let fun = low.get("fun").cloned().unwrap_or(Value::Null);
                    low.insert("sfun".into(), fun);
                    low.insert("fun".into(), json!("mod_watch"));
                    let watched: Vec<Value> = reqs
                        .get("watch")
                        .map(|v| {
                            v.iter()
                                .map(|&c| Value::Object(self.chunks[c].clone()))
                                .collect()
                        })
                        .unwrap_or_default();
                    low.insert("__reqs__".into(), json!({"watch": watched}));
                    ret = self.call(&mut low);
                }
                self.running.insert(t.clone(), Value::Object(ret));
            }
            Status::Pre => {
                let low = self.chunks[idx].clone();
                let ret = Self::not_run(Value::Bool(true), "No changes detected");
                self.stamp(&t, &low, ret, false);
                let copy = self.running.get(&t).cloned().unwrap_or(Value::Null);
                self.pre.insert(t.clone(), copy);
            }
            Status::Onfail | Status::Onchanges => {
                let low = self.chunks[idx].clone();
                let comment = if status == Status::Onfail {
                    "State was not run because onfail req did not change"
                } else {
                    "State was not run because none of the onchanges reqs changed"
                };
                let mut ret = Self::not_run(Value::Bool(true), comment);
                ret.insert("__state_ran__".into(), Value::Bool(false));
                self.stamp(&t, &low, ret, false);
            }
            Status::Change => {
                let ret = self.call_idx(idx);
                self.pre.insert(t.clone(), Value::Object(ret));
            }
        }
        if self.running.contains_key(&t) {
            self.event(idx, &t, false);
        }
    }

    /// [`Runner::call`] on chunk `idx`, keeping what the call changes of the chunk.
    fn call_idx(&mut self, idx: usize) -> Map<String, Value> {
        let mut low = self.chunks[idx].clone();
        let ret = self.call(&mut low);
        self.chunks[idx] = low;
        ret
    }

    /// Salt's `verify_data` for one chunk.
    fn verify_data(low: &mut Low) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(name) = low.get("name") {
            if !name.is_string() && truthy(Some(name)) {
                let sls = low
                    .get("__sls__")
                    .map(|s| format!("in SLS '{}' ", py_text(s)))
                    .unwrap_or_default();
                errors.push(format!(
                    "ID '{}' {sls}is not formed as a string, but is a {}",
                    py_text(name),
                    crate::verify::py_type(name)
                ));
            }
        }
        if let Some(umask) = low.remove("umask") {
            match u32::from_str_radix(&py_text(&umask), 8) {
                Ok(m) => {
                    low.insert("__umask__".into(), json!(m));
                }
                Err(_) => errors.push(format!("Invalid umask: {}", py_text(&umask))),
            }
        }
        if !errors.is_empty() {
            return errors;
        }
        let full = format!("{}.{}", text(low, "state"), text(low, "fun"));
        match states::lookup(&full) {
            None => match low.get("__sls__") {
                Some(sls) => {
                    errors.push(format!(
                        "State '{full}' was not found in SLS '{}'",
                        py_text(sls)
                    ));
                    errors.push(format!("Reason: '{full}' is not available."));
                }
                None => errors.push(format!("Specified state '{full}' was not found")),
            },
            Some(spec) => {
                for arg in spec.required {
                    if !low.contains_key(*arg) {
                        errors.push(format!("Missing parameter {arg} for state {full}"));
                    }
                }
            }
        }
        let reqdec = if low.contains_key("watch") {
            let state = text(low, "state");
            if states::lookup(&format!("{state}.mod_watch")).is_none() {
                let watch = low.remove("watch").unwrap_or(Value::Null);
                match low.get_mut("require").and_then(Value::as_array_mut) {
                    Some(existing) => {
                        existing.extend(watch.as_array().cloned().unwrap_or_default())
                    }
                    None => {
                        low.insert("require".into(), watch);
                    }
                }
                Some("require")
            } else {
                Some("watch")
            }
        } else if low.contains_key("require") {
            Some("require")
        } else {
            None
        };
        if let Some(reqdec) = reqdec {
            let state = text(low, "state");
            for req in low
                .get(reqdec)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
            {
                let Some((first, val)) = req.as_object().and_then(|m| m.iter().next()) else {
                    continue;
                };
                if *first == state {
                    let val = py_text(val);
                    if fnmatch(&val, &text(low, "name")) || fnmatch(&val, &text(low, "__id__")) {
                        errors.push(format!(
                            "Recursive require detected in SLS {} for require {} in ID {}",
                            text(low, "__sls__"),
                            crate::verify::py_repr(&req),
                            text(low, "__id__")
                        ));
                    }
                }
            }
        }
        errors
    }

    /// Salt's `State.call`: one state function run, with `unless`/`onlyif`/`creates`, run
    /// again as its `retry` asks (unless the chunk has `parallel` at all, even false: a
    /// parallel state retries on its thread).
    ///
    /// Salt's `call` calls itself for each new attempt and folds the returns back: every
    /// attempt takes a `__run_num__` and the return is the last attempt's, its comment after
    /// one "Attempt n" line per earlier attempt, its duration the sum of all the attempts'
    /// and of the intervals slept, its start time the first attempt's.
    fn call(&mut self, low: &mut Low) -> Map<String, Value> {
        let (mut ret, complete) = self.call_once(low);
        if !complete || low.contains_key("parallel") {
            return ret;
        }
        let Some(data) = low.get("retry") else {
            return ret;
        };
        let retry = Retry::verify(data);
        // Salt keeps the checked data in the chunk: later calls of it warn no more.
        low.insert("retry".into(), retry.to_value());
        if self.opts.test {
            retry.note_test(&mut ret);
            return ret;
        }
        let mut earlier: Vec<(Map<String, Value>, i64)> = Vec::new();
        let mut retries = 1;
        while !retry.reached(&ret) && retry.attempts.value > retries {
            let wait = match retry.wait() {
                Ok(wait) => wait,
                Err(e) => {
                    retry_failed(&mut ret, &e);
                    break;
                }
            };
            sleep_secs(wait);
            let (next, complete) = self.call_once(low);
            earlier.push((std::mem::replace(&mut ret, next), wait));
            retries += 1;
            if !complete {
                break;
            }
        }
        let Some(first) = earlier.first() else {
            return ret;
        };
        let first_start = first.0.get("start_time").cloned();
        let mut comment: Vec<String> = earlier
            .iter()
            .enumerate()
            .map(|(i, (r, _))| attempt_line(i + 1, r))
            .collect();
        comment.push(comment_text(ret.get("comment")));
        ret.insert("comment".into(), Value::String(comment.join("\n")));
        let mut duration = ms(&ret);
        for (r, wait) in earlier.iter().rev() {
            duration = duration + ms(r) + (*wait as f64) * 1000.0;
        }
        ret.insert("duration".into(), json!(duration));
        if let Some(start) = first_start {
            ret.insert("start_time".into(), start);
        }
        ret
    }

    /// One attempt of [`Runner::call`]; false with a return that is not a state's run (the
    /// chunk's data is wrong, or it is a `prereq` check).
    fn call_once(&mut self, low: &mut Low) -> (Map<String, Value>, bool) {
        let started = Instant::now();
        let start = start_time();
        let errors = Self::verify_data(low);
        if !errors.is_empty() {
            let mut ret =
                Self::failed(low, Some(errors.iter().map(|e| format!("{e}\n")).collect()));
            ret.insert("__run_num__".into(), json!(self.run_num));
            self.run_num += 1;
            return (ret, false);
        }
        let full = format!("{}.{}", text(low, "state"), text(low, "fun"));
        let spec = states::lookup(&full).expect("verified above");
        let prereq = truthy(low.get("__prereq__"));
        let test = self.opts.test || prereq;
        let mut ret = Self::failed(low, None);
        let has_checks = ["unless", "onlyif", "creates"]
            .iter()
            .any(|k| low.contains_key(*k));
        if has_checks && states::lookup(&format!("{}.mod_run_check", text(low, "state"))).is_none()
        {
            let mut checked = states::checks::run_check(low, self.host);
            // The checks' comments reach the return one per line.
            if let Some(Value::Array(lines)) = checked.get("comment") {
                let joined: Vec<String> = lines.iter().map(py_text).collect();
                checked.insert("comment".into(), Value::String(joined.join("\n")));
            }
            ret.extend(checked);
        }
        let saltenv = low
            .get("saltenv")
            .or_else(|| low.get("__env__"))
            .map(py_text)
            .unwrap_or_else(|| "base".into());
        if ret.get("result") == Some(&Value::Bool(false)) {
            if let Some(why) = spec.refused_arguments(&full, low) {
                self.refused = Some(why);
                self.failhard_hit = true;
                return (ret, false);
            }
            if !prereq && truthy(low.get("parallel")) {
                ret = self.call_parallel(low, spec, saltenv);
            } else {
                let call = Call {
                    low,
                    test,
                    host: self.host,
                    running: &self.running,
                    saltenv: &saltenv,
                    accumulators: self.accumulators,
                };
                ret = run_state(spec, &call);
            }
        }
        // As Salt: a state function that takes `check_cmd` itself (the file module's
        // `mod_run_check_cmd` ones) has no engine check after it.
        if low.contains_key("check_cmd") && !states::own_check_cmd(&full) {
            ret.extend(states::checks::run_check_cmd(low, self.host));
        }
        if prereq {
            low.insert("__prereq__".into(), Value::Bool(false));
            return (ret, false);
        }
        ret.insert(
            "__sls__".into(),
            low.get("__sls__").cloned().unwrap_or(Value::Null),
        );
        ret.insert("__run_num__".into(), json!(self.run_num));
        self.run_num += 1;
        ret.insert("start_time".into(), Value::String(start));
        ret.insert("duration".into(), duration_ms(started));
        ret.insert(
            "__id__".into(),
            low.get("__id__").cloned().unwrap_or(Value::Null),
        );
        (ret, true)
    }

    /// Salt's `call_parallel`: the state started on a thread of its own; its placeholder
    /// return until [`Runner::reconcile_procs`] puts the thread's result in its place.
    fn call_parallel(
        &mut self,
        low: &Low,
        spec: &'static Spec,
        saltenv: String,
    ) -> Map<String, Value> {
        let name = low.get("name").cloned().unwrap_or(Value::Null);
        let child_tag = tag(low);
        let (host, store, test) = (self.host, self.store, self.opts.test);
        let accumulators = self.accumulators;
        let chunk = low.clone();
        let running = self.running.clone();
        let stored_tag = child_tag.clone();
        let thread = std::thread::Builder::new()
            .name(format!("ParallelState({})", py_text(&name)).replace('\0', ""))
            .spawn_scoped(self.scope, move || {
                let ret = run_parallel(spec, &chunk, host, &running, &saltenv, test, accumulators);
                store
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(stored_tag, ret);
            });
        let handle = match thread {
            Ok(handle) => handle,
            Err(e) => {
                return Self::failed(
                    low,
                    Some(format!("The parallel state could not be started: {e}")),
                )
            }
        };
        let id = self.procs.len();
        self.procs.push(Proc {
            handle: Some(handle),
            tag: child_tag,
        });
        let mut ret = Map::new();
        ret.insert("name".into(), name);
        ret.insert("result".into(), Value::Null);
        ret.insert("changes".into(), json!({}));
        ret.insert("comment".into(), json!("Started in a separate process"));
        ret.insert(PROC.into(), json!(id));
        ret
    }

    /// Salt's `call_listen`: `listen`/`listen_in` run the listeners' `mod_watch` at the end.
    fn call_listen(&mut self) {
        let mut listeners: Vec<((String, String, String), Vec<Value>)> = Vec::new();
        let mut crefs: Vec<((String, String, String), usize)> = Vec::new();
        for (i, chunk) in self.chunks.iter().enumerate() {
            let key = (
                text(chunk, "state"),
                text(chunk, "__id__"),
                text(chunk, "name"),
            );
            match crefs.iter_mut().find(|(k, _)| *k == key) {
                Some(entry) => entry.1 = i,
                None => crefs.push((key.clone(), i)),
            }
            if let Some(Value::Array(l)) = chunk.get("listen") {
                listeners.push((key.clone(), l.clone()));
            }
            if let Some(Value::Array(l_in)) = chunk.get("listen_in") {
                for item in l_in.iter().filter_map(Value::as_object) {
                    for (k, v) in item {
                        listeners.push((
                            (k.clone(), py_text(v), "lookup".into()),
                            vec![json!({text(chunk, "state"): text(chunk, "__id__")})],
                        ));
                    }
                }
            }
        }
        let in_cref = |state: &str, val: &str, c: &(String, String, String)| {
            c.0 == state && (c.0 == val || c.1 == val || c.2 == val)
        };
        let mut watchers: Vec<Low> = Vec::new();
        let mut errors: Vec<(String, Map<String, Value>)> = Vec::new();
        let missing = |state: &str, val: &str| {
            let t = format!("Listen_Error_|-listen_{val}_|-listen_{state}_|-Listen_Error");
            let mut m = Map::new();
            m.insert(
                "comment".into(),
                json!(format!("Referenced state {state}: {val} does not exist")),
            );
            m.insert("name".into(), json!(format!("listen_{state}:{val}")));
            m.insert("result".into(), Value::Bool(false));
            m.insert("changes".into(), json!({}));
            (t, m)
        };
        for (key, targets) in &listeners {
            for listen_to in targets {
                let listen_to: Map<String, Value> = match listen_to {
                    Value::Object(m) => m.clone(),
                    other => {
                        let wanted = py_text(other);
                        let mut found = None;
                        for chunk in &self.chunks {
                            if text(chunk, "__id__") == wanted || text(chunk, "name") == wanted {
                                let mut m = Map::new();
                                m.insert(text(chunk, "state"), json!(text(chunk, "__id__")));
                                found = Some(m);
                            }
                        }
                        match found {
                            Some(m) => m,
                            None => continue,
                        }
                    }
                };
                for (lkey, lval) in &listen_to {
                    let lval = py_text(lval);
                    if !crefs.iter().any(|(c, _)| in_cref(lkey, &lval, c)) {
                        errors.push(missing(lkey, &lval));
                        continue;
                    }
                    let to_tags: Vec<String> = crefs
                        .iter()
                        .filter(|(c, _)| in_cref(lkey, &lval, c))
                        .map(|(_, i)| tag(&self.chunks[*i]))
                        .collect();
                    for to_tag in to_tags {
                        let changed = self
                            .running
                            .get(&to_tag)
                            .is_some_and(|r| truthy(r.get("changes")));
                        if !changed {
                            continue;
                        }
                        if !crefs.iter().any(|(c, _)| in_cref(&key.0, &key.1, c)) {
                            errors.push(missing(&key.0, &key.1));
                            continue;
                        }
                        for (_, i) in crefs.iter().filter(|(c, _)| in_cref(&key.0, &key.1, c)) {
                            let mut low = self.chunks[*i].clone();
                            let fun = low.get("fun").cloned().unwrap_or(Value::Null);
                            low.insert("sfun".into(), fun);
                            low.insert("fun".into(), json!("mod_watch"));
                            let id = text(&low, "__id__");
                            low.insert("__id__".into(), json!(format!("listener_{id}")));
                            for req in low::REQUISITES {
                                low.remove(*req);
                            }
                            watchers.push(low);
                        }
                    }
                }
            }
        }
        if !watchers.is_empty() {
            let saved = std::mem::replace(&mut self.chunks, watchers);
            let running = std::mem::take(&mut self.running);
            self.active.clear();
            self.call_chunks();
            let listened = std::mem::replace(&mut self.running, running);
            self.running.extend(listened);
            self.chunks = saved;
        }
        for (t, mut e) in errors {
            e.insert("__run_num__".into(), json!(self.run_num));
            self.run_num += 1;
            self.running.insert(t, Value::Object(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::Condvar;

    use crate::states::{MasterList, Params};

    /// A host whose `cmd.run_all` understands a few commands: `sleep MS`, `fail`, `panic`,
    /// `ok from N` (fails until its Nth call), `slow first` (its first call takes half a
    /// second) and `meet` (waits up to 5 s for a second `meet` running at the same time;
    /// fails when none comes).
    struct Mock {
        grains: Value,
        pillar: Value,
        calls: Mutex<HashMap<String, usize>>,
        met: (Mutex<usize>, Condvar),
        /// The events fired: (tag, data, jid).
        events: Mutex<Vec<(String, Value, String)>>,
    }

    impl Mock {
        fn new() -> Mock {
            Mock {
                grains: json!({"id": "m1"}),
                pillar: json!({}),
                calls: Mutex::default(),
                met: (Mutex::new(0), Condvar::new()),
                events: Mutex::default(),
            }
        }

        fn calls(&self, cmd: &str) -> usize {
            self.calls.lock().unwrap().get(cmd).copied().unwrap_or(0)
        }

        fn meet(&self) -> bool {
            let (count, cv) = &self.met;
            let mut count = count.lock().unwrap();
            *count += 1;
            cv.notify_all();
            let (count, _) = cv
                .wait_timeout_while(count, Duration::from_secs(5), |c| *c < 2)
                .unwrap();
            *count >= 2
        }
    }

    impl Host for Mock {
        fn call(
            &self,
            fun: &str,
            args: &[Value],
            _kwargs: &Map<String, Value>,
        ) -> Result<Value, String> {
            if fun != "cmd.run_all" {
                return Err(format!("'{fun}' is not available."));
            }
            let cmd = args.first().and_then(Value::as_str).unwrap_or_default();
            let n = {
                let mut calls = self.calls.lock().unwrap();
                let n = calls.entry(cmd.to_string()).or_default();
                *n += 1;
                *n
            };
            let ok = if let Some(ms) = cmd.strip_prefix("sleep ") {
                std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
                true
            } else if let Some(from) = cmd.strip_prefix("ok from ") {
                n >= from.parse().unwrap()
            } else {
                match cmd {
                    "slow first" if n == 1 => {
                        std::thread::sleep(Duration::from_millis(500));
                        true
                    }
                    "panic" => panic!("the mock host was asked to panic"),
                    "meet" => self.meet(),
                    "fail" => false,
                    _ => true,
                }
            };
            Ok(
                json!({"pid": 1, "retcode": i32::from(!ok), "stdout": format!("call {n}"), "stderr": ""}),
            )
        }

        fn grains(&self) -> &Value {
            &self.grains
        }

        fn pillar(&self) -> &Value {
            &self.pillar
        }

        fn fetch(&self, _source: &str, _saltenv: &str) -> Result<Option<Vec<u8>>, String> {
            Ok(None)
        }

        fn render_template(
            &self,
            _text: &str,
            _source: &str,
            _saltenv: &str,
            _vars: Map<String, Value>,
        ) -> Result<String, String> {
            Err("no templates here".into())
        }

        fn cachedir(&self) -> PathBuf {
            PathBuf::from("/nonexistent")
        }

        fn params(&self, _fun: &str) -> Option<Params> {
            None
        }

        fn list_master(&self, _saltenv: &str, _prefix: &str) -> Result<MasterList, String> {
            Ok(MasterList::default())
        }

        fn fire_event(&self, tag: &str, data: Value, jid: &str) {
            self.events
                .lock()
                .unwrap()
                .push((tag.to_string(), data, jid.to_string()));
        }
    }

    /// High data of SLS `t`: (ID, `state.fun`, arguments), run in this order.
    fn high(states: &[(&str, &str, Value)]) -> High {
        let mut high = High::new();
        for (i, (id, state_fun, args)) in states.iter().enumerate() {
            let (state, fun) = state_fun.split_once('.').unwrap();
            let mut list = vec![json!(fun), json!({"order": i + 1})];
            for (k, v) in args.as_object().unwrap() {
                list.push(json!({ k: v }));
            }
            high.insert(
                id.to_string(),
                json!({"__sls__": "t", "__env__": "base", state: list}),
            );
        }
        high
    }

    fn run(high: &High, host: &Mock, opts: Options) -> Map<String, Value> {
        call_high(high, host, opts).expect("valid high data")
    }

    /// The return of the state with ID `id`.
    fn ret<'r>(rets: &'r Map<String, Value>, id: &str) -> &'r Map<String, Value> {
        rets.values()
            .filter_map(Value::as_object)
            .find(|r| r.get("__id__") == Some(&json!(id)))
            .unwrap_or_else(|| panic!("no return for {id}: {rets:?}"))
    }

    #[test]
    fn retry_data_is_verified_as_salt_verifies_it() {
        let defaults = Retry::defaults();
        assert_eq!(Retry::verify(&json!(true)), defaults);
        assert_eq!(Retry::verify(&json!("often")), defaults);
        assert_eq!(Retry::verify(&Value::Null), defaults);
        assert_eq!(Retry::verify(&json!(false)).attempts.value, 0);
        let partial = Retry::verify(&json!({"attempts": 5, "until": false}));
        assert_eq!(
            (
                partial.until,
                partial.attempts.value,
                partial.interval.value
            ),
            (false, 5, 30)
        );
        // Wrong types take their default; a bool is an int to Python, a float is not.
        let odd = Retry::verify(
            &json!({"attempts": "many", "until": "yes", "interval": 0.5, "splay": true}),
        );
        assert_eq!(
            (
                odd.until,
                odd.attempts.value,
                odd.interval.value,
                odd.splay.value
            ),
            (true, 2, 30, 1)
        );
        assert_eq!(
            Retry::verify(&odd.to_value()),
            odd,
            "the checked data written back reads the same"
        );
    }

    #[test]
    fn splay_is_random_within_its_bounds() {
        assert_eq!(random_upto(0), 0);
        let seen: HashSet<i64> = (0..200).map(|_| random_upto(3)).collect();
        assert!(seen.iter().all(|s| (0..=3).contains(s)), "{seen:?}");
        assert!(seen.len() > 1, "{seen:?}");
    }

    #[test]
    fn a_retried_state_folds_its_attempts_into_one_return() {
        let host = Mock::new();
        let h = high(&[
            (
                "third",
                "cmd.run",
                json!({"name": "ok from 3", "retry": {"attempts": 5, "interval": 0}}),
            ),
            ("next", "test.succeed_without_changes", json!({})),
        ]);
        let rets = run(&h, &host, Options::default());
        let third = ret(&rets, "third");
        let line = |n| {
            format!("Attempt {n}: Returned a result of \"False\", with the following comment: \"Command \"ok from 3\" run\"")
        };
        assert_eq!(third["result"], json!(true));
        assert_eq!(
            third["comment"],
            json!(format!(
                "{}\n{}\nCommand \"ok from 3\" run",
                line(1),
                line(2)
            ))
        );
        assert_eq!(third["changes"]["stdout"], json!("call 3"));
        // Every attempt took a run number.
        assert_eq!(third["__run_num__"], json!(2));
        assert_eq!(ret(&rets, "next")["__run_num__"], json!(3));
        assert_eq!(host.calls("ok from 3"), 3);
    }

    #[test]
    fn retries_stop_at_the_until_result_or_the_last_attempt() {
        let host = Mock::new();
        let h = high(&[
            (
                "until_false",
                "cmd.run",
                json!({"name": "ok from 1", "retry": {"attempts": 3, "until": false, "interval": 0}}),
            ),
            (
                "exhausted",
                "cmd.run",
                json!({"name": "fail", "retry": {"attempts": 3, "interval": 0}}),
            ),
            (
                "parallel_false",
                "cmd.run",
                json!({"name": "ok from 9", "parallel": false, "retry": {"attempts": 3, "interval": 0}}),
            ),
            (
                "no_attempts",
                "cmd.run",
                json!({"name": "ok from 8", "retry": false}),
            ),
        ]);
        let rets = run(&h, &host, Options::default());
        assert_eq!(ret(&rets, "until_false")["result"], json!(true));
        assert_eq!(host.calls("ok from 1"), 3);
        assert_eq!(ret(&rets, "exhausted")["result"], json!(false));
        assert_eq!(host.calls("fail"), 3);
        // Any `parallel` key, even false, turns the retry off.
        assert_eq!(host.calls("ok from 9"), 1);
        assert_eq!(host.calls("ok from 8"), 1);
        assert_eq!(
            ret(&rets, "no_attempts")["comment"],
            json!("Command \"ok from 8\" run")
        );
    }

    #[test]
    fn a_retry_adds_its_intervals_to_the_duration() {
        let host = Mock::new();
        let h = high(&[(
            "slow",
            "test.configurable_test_state",
            json!({"result": false, "changes": false, "comment": "", "retry": {"attempts": 2, "interval": 1}}),
        )]);
        let started = Instant::now();
        let rets = run(&h, &host, Options::default());
        assert!(started.elapsed() >= Duration::from_secs(1));
        let slow = ret(&rets, "slow");
        assert!(ms(slow) >= 1000.0, "{slow:?}");
        assert_eq!(
            slow["comment"],
            json!("Attempt 1: Returned a result of \"False\", with the following comment: \"\"\n")
        );
    }

    #[test]
    fn a_negative_interval_or_splay_fails_the_state() {
        let host = Mock::new();
        let h = high(&[
            (
                "interval",
                "cmd.run",
                json!({"name": "fail", "retry": {"attempts": 3, "interval": -1}}),
            ),
            (
                "splay",
                "test.configurable_test_state",
                json!({"result": false, "changes": false, "comment": "", "retry": {"attempts": 3, "interval": 0, "splay": -2}}),
            ),
        ]);
        let rets = run(&h, &host, Options::default());
        let interval = ret(&rets, "interval");
        assert_eq!(interval["result"], json!(false));
        assert_eq!(
            interval["comment"],
            json!("Command \"fail\" run\nThe retry interval must not be negative: -1")
        );
        assert_eq!(host.calls("fail"), 1);
        assert_eq!(
            ret(&rets, "splay")["comment"],
            json!("The retry splay must not be negative: -2")
        );
    }

    #[test]
    fn a_test_run_says_how_the_state_would_be_retried() {
        let host = Mock::new();
        let h = high(&[
            ("cmd", "cmd.run", json!({"name": "fail", "retry": true})),
            (
                "quiet",
                "cmd.wait",
                json!({"name": "fail", "retry": {"attempts": 4, "until": false, "splay": 2}}),
            ),
        ]);
        let rets = run(
            &h,
            &host,
            Options {
                test: true,
                ..Options::default()
            },
        );
        assert_eq!(
            ret(&rets, "cmd")["comment"],
            json!("Command \"fail\" would have been executed  The state would be retried every 30 seconds (with a splay of up to 0 seconds) a maximum of 2 times or until a result of True is returned")
        );
        assert_eq!(
            ret(&rets, "quiet")["comment"],
            json!("  The state would be retried every 30 seconds (with a splay of up to 2 seconds) a maximum of 4 times or until a result of False is returned")
        );
        assert_eq!(host.calls("fail"), 0);
    }

    #[test]
    fn parallel_states_run_at_the_same_time_and_requisites_wait_for_them() {
        let host = Mock::new();
        let h = high(&[
            ("a", "cmd.run", json!({"name": "meet", "parallel": true})),
            ("between", "test.succeed_without_changes", json!({})),
            ("b", "cmd.run", json!({"name": "meet", "parallel": true})),
            (
                "both",
                "test.succeed_without_changes",
                json!({"require": [{"cmd": "a"}, {"cmd": "b"}]}),
            ),
        ]);
        let rets = run(&h, &host, Options::default());
        for (id, num) in [("a", 0), ("between", 1), ("b", 2), ("both", 3)] {
            let r = ret(&rets, id);
            assert_eq!(r["result"], json!(true), "{id}: {r:?}");
            assert_eq!(r["__run_num__"], json!(num), "{id}");
            assert!(!r.contains_key(PROC), "{id}: {r:?}");
        }
        for id in ["a", "b"] {
            let r = ret(&rets, id);
            assert_eq!(r["__parallel__"], json!(true));
            assert_eq!(r["comment"], json!("Command \"meet\" run"));
            assert!(r.contains_key("duration") && r.contains_key("start_time"));
        }
        assert!(!ret(&rets, "between").contains_key("__parallel__"));
    }

    #[test]
    fn a_failing_parallel_state_fails_its_requisites() {
        let host = Mock::new();
        let h = high(&[
            ("bad", "cmd.run", json!({"name": "fail", "parallel": true})),
            (
                "after",
                "test.succeed_without_changes",
                json!({"require": [{"cmd": "bad"}]}),
            ),
            (
                "crashed",
                "cmd.run",
                json!({"name": "panic", "parallel": true}),
            ),
            (
                "late",
                "cmd.run",
                json!({"name": "sleep 100", "parallel": true}),
            ),
        ]);
        let rets = run(&h, &host, Options::default());
        let bad = ret(&rets, "bad");
        assert_eq!(
            (&bad["result"], &bad["__parallel__"]),
            (&json!(false), &json!(true))
        );
        assert_eq!(
            ret(&rets, "after")["comment"],
            json!("One or more requisite failed: t.bad")
        );
        // A thread that died left no result.
        let crashed = ret(&rets, "crashed");
        assert_eq!(crashed["result"], json!(false));
        assert_eq!(crashed["comment"], json!("Parallel cache failure"));
        // Nothing requires it: it is waited for at the end.
        assert_eq!(ret(&rets, "late")["result"], json!(true));
    }

    #[test]
    fn parallel_states_retry_on_their_thread() {
        let host = Mock::new();
        let h = high(&[
            (
                "second",
                "cmd.run",
                json!({"name": "ok from 2", "parallel": true, "retry": {"attempts": 2, "interval": 0}}),
            ),
            (
                "never",
                "cmd.run",
                json!({"name": "fail", "parallel": true, "retry": {"attempts": 2, "interval": 0}}),
            ),
            (
                "at_once",
                "cmd.run",
                json!({"name": "ok from 1", "parallel": true, "retry": {"attempts": 2, "interval": 0}}),
            ),
        ]);
        let rets = run(&h, &host, Options::default());
        let second = ret(&rets, "second");
        assert_eq!(second["result"], json!(true));
        assert_eq!(
            second["comment"],
            json!("Command \"ok from 2\" run\nAttempt 1: Returned a result of \"True\", with the following comment: \"Command \"ok from 2\" run\"")
        );
        // A retried return is the new attempt's: without `__parallel__`.
        assert!(!second.contains_key("__parallel__"), "{second:?}");
        // `attempts` more runs, not `attempts` runs.
        assert_eq!(host.calls("fail"), 3);
        assert_eq!(ret(&rets, "never")["result"], json!(false));
        assert_eq!(ret(&rets, "at_once")["__parallel__"], json!(true));
        assert_eq!(host.calls("ok from 1"), 1);
    }

    #[test]
    fn a_watching_parallel_state_reports_its_first_run() {
        // Its placeholder has no changes, so its mod_watch runs too, in parallel as well; the
        // result read is the first run's, even when the mod_watch run ends first (Salt then
        // says "Parallel cache failure").
        let host = Mock::new();
        let h = high(&[
            ("changer", "test.succeed_with_changes", json!({})),
            (
                "watching",
                "cmd.run",
                json!({"name": "slow first", "parallel": true, "watch": [{"test": "changer"}]}),
            ),
            ("next", "test.succeed_without_changes", json!({})),
        ]);
        let rets = run(&h, &host, Options::default());
        let watching = ret(&rets, "watching");
        assert_eq!(watching["result"], json!(true), "{watching:?}");
        assert_eq!(watching["comment"], json!("Command \"slow first\" run"));
        assert_eq!(watching["__parallel__"], json!(true));
        // Both calls took a run number.
        assert_eq!(watching["__run_num__"], json!(2));
        assert_eq!(ret(&rets, "next")["__run_num__"], json!(3));
        assert_eq!(host.calls("slow first"), 2);
    }

    #[test]
    fn failhard_leaves_parallel_states_started() {
        let host = Mock::new();
        let h = high(&[
            (
                "started",
                "cmd.run",
                json!({"name": "sleep 200", "parallel": true}),
            ),
            (
                "stops",
                "cmd.run",
                json!({"name": "fail", "failhard": true}),
            ),
            ("never", "test.succeed_without_changes", json!({})),
        ]);
        let rets = run(&h, &host, Options::default());
        let started = ret(&rets, "started");
        assert_eq!(started["result"], Value::Null);
        assert_eq!(started["comment"], json!("Started in a separate process"));
        assert!(!started.contains_key(PROC));
        assert_eq!(rets.len(), 2);
        // The thread still ran to its end before the run returned.
        assert_eq!(host.calls("sleep 200"), 1);
    }

    #[test]
    fn state_events_follow_salts_state_event() {
        // Expected from Salt 3007's State.call_high on the same states with state_events on:
        // a state whose requisite runs first fires twice, fire_event replaces the progress
        // event, and a missing requisite still fires.
        let h = high(&[
            ("b", "test.nop", json!({"require": [{"test": "a"}]})),
            ("a", "test.succeed_with_changes", json!({})),
            ("c", "test.nop", json!({"fire_event": true})),
            ("d", "test.nop", json!({"fire_event": "custom/tag"})),
            ("e", "test.nop", json!({"require": [{"test": "nothere"}]})),
        ]);
        let host = Mock::new();
        let job = Job {
            jid: "J1".into(),
            id: "m1".into(),
            state_events: true,
        };
        run(
            &h,
            &host,
            Options {
                job: Some(job.clone()),
                ..Options::default()
            },
        );
        let events = host.events.lock().unwrap().clone();
        let seen: Vec<(String, Value, Value, Value)> = events
            .iter()
            .map(|(tag, data, jid)| {
                assert_eq!(jid, "J1");
                (
                    tag.clone(),
                    data.get("len").cloned().unwrap_or(Value::Null),
                    data["ret"]["__id__"].clone(),
                    data["ret"]["result"].clone(),
                )
            })
            .collect();
        let want = [
            ("salt/job/J1/prog/m1/0", json!(5), "a", true),
            ("salt/job/J1/prog/m1/1", json!(5), "b", true),
            ("salt/job/J1/prog/m1/1", json!(5), "b", true),
            ("salt/state_result/J1/m1/c", Value::Null, "c", true),
            ("salt/state_result/J1/m1/custom/tag", Value::Null, "d", true),
            ("salt/job/J1/prog/m1/4", json!(5), "e", false),
        ]
        .map(|(t, len, id, ok)| (t.to_string(), len, json!(id), json!(ok)));
        assert_eq!(seen, want);

        // Without state_events only fire_event fires; without a job nothing does.
        let host = Mock::new();
        let quiet = Job {
            state_events: false,
            ..job
        };
        run(
            &h,
            &host,
            Options {
                job: Some(quiet),
                ..Options::default()
            },
        );
        let tags: Vec<String> = host
            .events
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.0.clone())
            .collect();
        assert_eq!(
            tags,
            [
                "salt/state_result/J1/m1/c",
                "salt/state_result/J1/m1/custom/tag"
            ]
        );
        let host = Mock::new();
        run(&h, &host, Options::default());
        assert!(host.events.lock().unwrap().is_empty());
    }
}
