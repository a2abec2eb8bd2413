//! The state engine: low chunks run in order with their requisites, as Salt 3007's
//! `State.call_high`, `call_chunks`, `call_chunk`, `check_requisite` and `call` run them, with
//! Salt's results, comments and `__run_num__` order.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use brine_protocol::target::fnmatch;
use serde_json::{json, Map, Value};

use crate::low::{self, tag, text, Low};
use crate::states::{self, Call, Host};
use crate::verify::py_text;
use crate::High;

/// How a run is made.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `test=True`: report what would change, change nothing.
    pub test: bool,
    /// `failhard`: stop at the first failure.
    pub failhard: bool,
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

/// One run of low chunks.
pub struct Runner<'a> {
    host: &'a dyn Host,
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
}

/// Salt's `call_high`: the high data prepared (extend, requisite_in, exclude), compiled and
/// run. Errors in the high data are returned instead of results, as Salt returns them.
pub fn call_high(
    high: &High,
    host: &dyn Host,
    opts: Options,
) -> Result<Map<String, Value>, Vec<String>> {
    let mut high = high.clone();
    let mut errors = low::reconcile_extend(&mut high, false);
    errors.extend(crate::verify_high(&high));
    if !errors.is_empty() {
        return Err(errors);
    }
    let req_in_errors = low::requisite_in(&mut high);
    low::apply_exclude(&mut high);
    if !req_in_errors.is_empty() {
        return Err(req_in_errors);
    }
    let processed_sls = high
        .iter()
        .filter(|(k, _)| !k.starts_with("__"))
        .filter_map(|(_, b)| b.get("__sls__").map(py_text))
        .collect();
    let chunks = low::compile_high_data(&high);
    let mut runner = Runner {
        host,
        opts,
        chunks,
        running: Map::new(),
        pre: Map::new(),
        active: HashSet::new(),
        run_num: 0,
        processed_sls,
        failhard_hit: false,
        mod_inited: HashSet::new(),
    };
    runner.call_chunks();
    runner.call_listen();
    Ok(runner.running)
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

impl Runner<'_> {
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
                if fnmatch(val, &text(chunk, "__sls__")) || included {
                    out.push(i);
                }
                continue;
            }
            if (fnmatch(val, &text(chunk, "name")) || fnmatch(val, &text(chunk, "__id__")))
                && (key == "id" || text(chunk, "state") == key)
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

    /// Salt's `State.call`: one state function run, with `unless`/`onlyif`/`creates`.
    fn call(&mut self, low: &mut Low) -> Map<String, Value> {
        let started = Instant::now();
        let start = start_time();
        let errors = Self::verify_data(low);
        if !errors.is_empty() {
            let mut ret =
                Self::failed(low, Some(errors.iter().map(|e| format!("{e}\n")).collect()));
            ret.insert("__run_num__".into(), json!(self.run_num));
            self.run_num += 1;
            return ret;
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
            let call = Call {
                low,
                test,
                host: self.host,
                running: &self.running,
                saltenv: &saltenv,
            };
            ret = match (spec.run)(&call) {
                Ok(r) => r,
                Err(e) => Self::failed(
                    low,
                    Some(format!("An exception occurred in this state: {e}")),
                ),
            };
        }
        if low.contains_key("check_cmd") {
            ret.extend(states::checks::run_check_cmd(low, self.host));
        }
        if prereq {
            low.insert("__prereq__".into(), Value::Bool(false));
            return ret;
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
