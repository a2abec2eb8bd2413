//! The reactor, as Salt 3007's `reactor` engine runs it (`salt/engines/reactor.py`,
//! `salt/utils/reactor.py`): when the master config maps event tags to SLS files
//! (`reactor:`), one task follows the master's event bus and handles the events one after
//! another. For an event whose tag matches, the files are rendered with the event (`tag`,
//! `data`), compiled into chunks ordered as Salt's `Compiler` orders them, and each chunk runs:
//!
//! - `local.<fun>` (alias `cmd.<fun>`): a job published to minions, not waited for;
//! - `runner.<fun>`, `wheel.<fun>`: a runner or wheel job run by the user `Reactor`, in a pool
//!   of `reactor_worker_threads` with `reactor_worker_hwm` places to wait;
//! - `caller.<fun>`: refused with a log line. Salt's starts a minion from the master's config
//!   and, on a master without one, blocks its reactor for good.
//!
//! Events of `Reactor` jobs are not reacted to (no loops). Failures are only logged, with
//! Salt's words: as in Salt, no event reports a reaction as a whole.
//!
//! The `reactor` runner (`master/src/runners/reactor.rs`) lists and changes the running
//! reactor in-process; Salt's `salt/reactors/manage/*` events are answered only when they
//! carry the master's root key.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use brine_protocol::jid::{gen_jid, is_jid};
use brine_protocol::loads::PublishRequest;
use brine_protocol::payload::{from_json, get_str, json_truthy, map, to_json, Value};
use brine_protocol::pyrepr::str_repr;
use brine_protocol::target::fnmatch;
use brine_state::low::{compile_high_data, text, Low};
use brine_state::verify::{py_text, py_type, repack_dictlist};
use brine_state::High;
use serde_json::{json, Map, Value as Json};
use tokio::sync::broadcast::error::RecvError;

use crate::master::Master;
use crate::wheel::Args;

/// The user reactor-started runner and wheel jobs run as; events carrying it are ignored.
pub const EVENT_USER: &str = "Reactor";

/// Chunk keys a runner or wheel function's signature never has to take (Salt's
/// `REACTOR_INTERNAL_KEYWORDS`).
const INTERNAL_KEYWORDS: &[&str] = &["__id__", "__sls__", "name", "order", "fun", "key", "state"];

const INCORRECT_FORMAT: &str = "Incorrect argument format, check the Reactor System \
                                documentation for the correct format.";

// ---- the map: tag globs to SLS files -----------------------------------------------------

/// One entry of the reactor map: a tag glob and the SLS files it runs, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub glob: String,
    pub paths: Vec<String>,
}

/// The `reactor` option.
#[derive(Debug, Clone, PartialEq)]
pub enum ReactorMap {
    /// The entries, from the master config.
    Inline(Vec<Entry>),
    /// A YAML file holding the entries, read again for every event.
    File(PathBuf),
}

impl ReactorMap {
    /// The map `reactor` describes; `None` when there is no reactor to run (unset, an empty
    /// list or path, or a value of another kind, which is logged).
    pub fn from_config(v: &Json) -> Option<ReactorMap> {
        match v {
            Json::String(path) if !path.is_empty() => Some(ReactorMap::File(PathBuf::from(path))),
            Json::Array(items) if !items.is_empty() => Some(ReactorMap::Inline(entries(v))),
            Json::Null | Json::String(_) | Json::Array(_) => None,
            other => {
                tracing::warn!(
                    "reactor is neither a list of {{tag: [sls, ...]}} nor the path of a file \
                     holding one ({other}): the reactor is not started"
                );
                None
            }
        }
    }

    /// Salt's `list_reactors`: the SLS paths of every entry whose glob matches `tag`, in
    /// the map's order. Reads the file of a [`ReactorMap::File`].
    pub fn paths_for(&self, tag: &str) -> Vec<String> {
        tracing::debug!("Gathering reactors for tag {tag}");
        let read;
        let entries = match self {
            ReactorMap::Inline(entries) => entries,
            ReactorMap::File(path) => {
                read = read_map_file(path);
                &read
            }
        };
        entries
            .iter()
            .filter(|e| fnmatch(&e.glob, tag))
            .flat_map(|e| e.paths.iter().cloned())
            .collect()
    }
}

/// The entries of a reactor map file; none (logged) when it cannot be read or parsed.
fn read_map_file(path: &Path) -> Vec<Entry> {
    let Ok(text) = std::fs::read_to_string(path) else {
        tracing::error!("Failed to read reactor map: \"{}\"", path.display());
        return Vec::new();
    };
    match brine_protocol::yaml::load::load(&text) {
        Ok(v) => entries(&v),
        Err(_) => {
            tracing::error!(
                "Failed to parse YAML in reactor map: \"{}\"",
                path.display()
            );
            Vec::new()
        }
    }
}

/// The entries of a reactor list, as Salt reads it: items that are not one-key maps are
/// skipped; a string value is one path, a list several.
pub fn entries(v: &Json) -> Vec<Entry> {
    let Json::Array(items) = v else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let m = item.as_object().filter(|m| m.len() == 1)?;
            let (glob, val) = m.iter().next()?;
            let paths = match val {
                Json::String(p) => vec![p.clone()],
                Json::Array(list) => list
                    .iter()
                    .filter_map(|p| p.as_str().map(str::to_string))
                    .collect(),
                _ => Vec::new(),
            };
            Some(Entry {
                glob: glob.clone(),
                paths,
            })
        })
        .collect()
}

// ---- the task ----------------------------------------------------------------------------

/// Start the reactor when the config has one: the bus is subscribed to before this returns
/// (no later event is missed), and the events are handled one at a time.
pub fn spawn(master: &Arc<Master>) -> Option<tokio::task::JoinHandle<()>> {
    let map = ReactorMap::from_config(&master.cfg.reactor)?;
    let rx = master.bus.subscribe();
    tracing::info!("Starting the reactor");
    Some(master.rt.spawn(run(master.clone(), map, rx)))
}

async fn run(
    master: Arc<Master>,
    map: ReactorMap,
    mut rx: tokio::sync::broadcast::Receiver<Arc<brine_transport::eventbus::Event>>,
) {
    let m = master.clone();
    let grains = tokio::task::spawn_blocking(move || crate::orchestrate::master_grains(&m.cfg))
        .await
        .unwrap_or_else(|_| json!({"id": master.cfg.id}));
    let pool = Pool::new(
        master.cfg.reactor_worker_threads,
        master.cfg.reactor_worker_hwm,
        master.rt.clone(),
    );
    let listed = Mutex::new(master.cfg.reactor.clone());
    let reactor = Arc::new(Reactor {
        master,
        map: Mutex::new(map),
        listed,
        leader: AtomicBool::new(true),
        grains,
        pool,
    });
    let _ = reactor.master.reactor.set(reactor.clone());
    loop {
        let ev = match rx.recv().await {
            Ok(ev) => ev,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!("the reactor fell behind: {n} events were not reacted to");
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if get_str(&ev.data, "user") == Some(EVENT_USER) {
            continue;
        }
        if ev.tag.contains(MANAGE) {
            reactor.manage(&ev.tag, &ev.data);
            continue;
        }
        if !reactor.leader.load(Ordering::SeqCst) {
            continue;
        }
        // An inline map is matched here; a map file is read off the async threads.
        let paths = match &*reactor.map() {
            map @ ReactorMap::Inline(_) => {
                let paths = map.paths_for(&ev.tag);
                if paths.is_empty() {
                    continue;
                }
                Some(paths)
            }
            ReactorMap::File(_) => None,
        };
        let r = reactor.clone();
        let tag = ev.tag.clone();
        let done = tokio::task::spawn_blocking(move || {
            let paths = paths.unwrap_or_else(|| r.map().paths_for(&ev.tag));
            if !paths.is_empty() {
                r.react(&ev.tag, &ev.data, &paths);
            }
        })
        .await;
        if let Err(e) = done {
            tracing::error!("the reaction to {tag} failed: {e}");
        }
    }
}

/// Salt's reactor `ThreadPool`: runner and wheel jobs run at most `workers` at once, and at
/// most `hwm` more wait; beyond that a job is refused.
struct Pool {
    workers: Arc<tokio::sync::Semaphore>,
    /// Jobs running or waiting.
    taken: Arc<AtomicUsize>,
    limit: usize,
    rt: tokio::runtime::Handle,
}

/// One job's place in the pool, given back when the job ends (or panics).
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Pool {
    fn new(workers: usize, hwm: usize, rt: tokio::runtime::Handle) -> Pool {
        let workers = workers.max(1);
        Pool {
            workers: Arc::new(tokio::sync::Semaphore::new(workers)),
            taken: Arc::default(),
            limit: workers.saturating_add(hwm),
            rt,
        }
    }

    /// Run `job` when a worker is free; false (and `job` dropped) when the pool is full.
    fn submit(&self, job: impl Future<Output = ()> + Send + 'static) -> bool {
        if self.taken.fetch_add(1, Ordering::SeqCst) >= self.limit {
            self.taken.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        let place = Place(self.taken.clone());
        let workers = self.workers.clone();
        self.rt.spawn(async move {
            let _place = place;
            let _worker = workers.acquire_owned().await;
            job.await;
        });
        true
    }
}

/// The running reactor.
pub struct Reactor {
    master: Arc<Master>,
    map: Mutex<ReactorMap>,
    /// The map as `reactor.list` shows it: the configuration's own list, as changed by
    /// `reactor.add` and `reactor.delete`.
    listed: Mutex<Json>,
    /// Whether this master reacts (`reactor.set_leader`).
    leader: AtomicBool,
    /// The master minion's grains, for the templates.
    grains: Json,
    pool: Pool,
}

/// What the tags of the events that manage the reactor contain.
pub const MANAGE: &str = "salt/reactors/manage";

impl Reactor {
    fn map(&self) -> std::sync::MutexGuard<'_, ReactorMap> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Salt's `list_all`: the configuration's list, or what the map file holds.
    fn list_all(&self) -> Json {
        let listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        match &*listed {
            Json::String(path) => std::fs::read_to_string(path)
                .ok()
                .and_then(|t| brine_protocol::yaml::load::load(&t).ok())
                .unwrap_or(Json::Null),
            other => other.clone(),
        }
    }

    /// Change the listed map with `change` and match with what it becomes; `None` for a map
    /// file, which is not changed.
    fn change_list(&self, change: impl FnOnce(&mut Vec<Json>) -> Json) -> Json {
        let mut listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        let Json::Array(items) = &mut *listed else {
            return json!({"status": false, "comment": "The reactor map is a file: edit the file."});
        };
        let result = change(items);
        *self.map() = ReactorMap::Inline(entries(&listed));
        result
    }

    /// The `salt/reactors/manage/<what>` events Salt's `reactor.*` runners fire: refused
    /// without the master's root key, else answered on the bus as Salt's reactor answers
    /// them (Brine's own `reactor.*` runners call [`Reactor::manage_call`] instead, so the
    /// key never travels on the bus).
    fn manage(&self, tag: &str, data: &Value) {
        if get_str(data, "key") != Some(self.master.secrets.root_key()) {
            tracing::error!(
                "received salt/reactors/manage event without matching master_key. discarding"
            );
            return;
        }
        let Some(what) = tag.rsplit_once("salt/reactors/manage/").map(|(_, w)| w) else {
            return;
        };
        if let Some((reply, answer)) = self.manage_call(what, &to_json(data)) {
            self.master
                .bus
                .fire(&format!("{MANAGE}/{reply}"), from_json(&answer));
        }
    }

    /// One management request (`list`, `add`, `delete`, `is_leader`, `set_leader`) with
    /// its data: the reply's tag suffix and data, as Salt's reactor answers.
    pub fn manage_call(&self, what: &str, data: &Json) -> Option<(&'static str, Json)> {
        match what {
            "is_leader" => Some((
                "leader/value",
                json!({"result": self.leader.load(Ordering::SeqCst)}),
            )),
            "set_leader" => {
                if data.get("id").and_then(Json::as_str) == Some(self.master.cfg.id.as_str()) {
                    self.leader
                        .store(json_truthy(&data["value"]), Ordering::SeqCst);
                }
                Some((
                    "leader/value",
                    json!({"result": self.leader.load(Ordering::SeqCst)}),
                ))
            }
            "add" => {
                let glob = py_text(&data["event"]);
                let reactions = data["reactors"].clone();
                let result = self.change_list(|items| {
                    if items.iter().any(|i| first_key(i) == Some(glob.as_str())) {
                        return json!({"status": false, "comment": "Reactor already exists."});
                    }
                    items.push(json!({ glob: reactions }));
                    json!({"status": true, "comment": "Reactor added."})
                });
                Some((
                    "add-complete",
                    json!({"reactors": self.list_all(), "result": result}),
                ))
            }
            "delete" => {
                let glob = py_text(&data["event"]);
                let result = self.change_list(|items| {
                    match items
                        .iter()
                        .position(|i| first_key(i) == Some(glob.as_str()))
                    {
                        Some(at) => {
                            items.remove(at);
                            json!({"status": true, "comment": "Reactor deleted."})
                        }
                        None => json!({"status": false, "comment": "Reactor does not exists."}),
                    }
                });
                Some((
                    "delete-complete",
                    json!({"reactors": self.list_all(), "result": result}),
                ))
            }
            "list" => Some(("list-results", json!({"reactors": self.list_all()}))),
            _ => None,
        }
    }

    /// Salt's `reactions` then `call_reactions`: render `paths` for this event and run what
    /// they declare, in order.
    fn react(&self, tag: &str, data: &Value, paths: &[String]) {
        tracing::debug!("Compiling reactions for tag {tag}");
        let data = to_json(data);
        let mut high = High::new();
        for path in paths {
            // A later file wins on the same ID (Python's `dict.update`).
            high.extend(self.render_reaction(path, tag, &data));
        }
        for low in chunks(high, tag, paths) {
            self.run(&low);
        }
    }

    /// Salt's `render_reaction`: the IDs one path declares, each with `__sls__`. A
    /// `salt://` path is read from the file server; a path on disk may be a glob.
    fn render_reaction(&self, path: &str, tag: &str, data: &Json) -> High {
        // (what __sls__ says, the template's name, its text)
        let mut files: Vec<(String, String, Result<String, String>)> = Vec::new();
        if let Some(rel) = path.strip_prefix("salt://") {
            let name = rel.split('?').next().unwrap_or(rel).to_string();
            match self.master.fileserver.read_text(rel, "base") {
                Ok(Some(text)) => files.push((path.to_string(), name, Ok(text))),
                Ok(None) => {}
                Err(e) => files.push((path.to_string(), name, Err(e))),
            }
        } else {
            for file in brine_protocol::config::glob(Path::new(path)) {
                let shown = file.to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&file).map_err(|e| e.to_string());
                files.push((shown.clone(), shown, text));
            }
        }
        if files.is_empty() {
            tracing::error!("Can not render SLS {path} for tag {tag}. File missing or not found.");
        }
        let mut react = High::new();
        for (sls, name, text) in files {
            match text.and_then(|t| self.render(&t, &name, tag, data, &sls)) {
                Ok(high) => react.extend(high),
                Err(e) => tracing::error!("Failed to render \"{sls}\": {e}"),
            }
        }
        react
    }

    /// Render one reaction file as the master minion renders it, with `tag` and `data`.
    fn render(
        &self,
        text: &str,
        name: &str,
        tag: &str,
        data: &Json,
        sls: &str,
    ) -> Result<High, String> {
        let cfg = &self.master.cfg;
        let mut vars = Map::new();
        vars.insert("tag".into(), Json::from(tag));
        vars.insert("data".into(), data.clone());
        let ctx = brine_render::Context {
            grains: self.grains.clone(),
            pillar: json!({}),
            opts: Json::Object(cfg.effective_opts()),
            saltenv: "base".into(),
            sls: String::new(),
            renderer: cfg.renderer.clone(),
            vars,
            ..brine_render::Context::default()
        };
        let rendered = brine_render::render_sls(
            text,
            name,
            &ctx,
            self.master.fileserver.clone(),
            crate::pillar::master_functions(cfg),
        )
        .map_err(|e| e.to_string())?;
        reaction_high(rendered, sls)
    }

    /// Salt's `ReactWrap.run`: one chunk, run or refused (logged either way).
    fn run(&self, low: &Low) {
        let (id, state, fun) = (text(low, "__id__"), text(low, "state"), text(low, "fun"));
        let failed = |why: &str| {
            tracing::error!("Reactor '{id}' failed to execute {state} '{fun}': {why}");
        };
        if !matches!(state.as_str(), "local" | "runner" | "wheel" | "caller") {
            tracing::error!("ReactWrap is missing a wrapper function for '{state}'");
            return;
        }
        let call = match prepare(low) {
            Ok(call) => call,
            Err(why) => return failed(&why),
        };
        match call {
            Call::Local(req) => {
                if let Err(why) = self.publish(req) {
                    failed(&why);
                }
            }
            Call::Runner { fun: name, args } => {
                let m = self.master.clone();
                let queued = self.pool.submit(async move {
                    let jid = gen_jid();
                    m.start_runner_job(&jid, &name, args, EVENT_USER).await;
                    tracing::info!("Runner completed: {jid}");
                });
                if !queued {
                    pool_full(&id, &state, &fun);
                }
            }
            Call::Wheel { fun: name, args } => {
                let m = self.master.clone();
                let queued = self.pool.submit(async move {
                    let jid = gen_jid();
                    let job = tokio::task::spawn_blocking(move || {
                        m.run_wheel_low_job(&jid, &name, &args, EVENT_USER);
                        jid
                    });
                    if let Ok(jid) = job.await {
                        tracing::info!("Runner completed: {jid}");
                    }
                });
                if !queued {
                    pool_full(&id, &state, &fun);
                }
            }
            Call::Caller => failed(
                "caller reactions are not run on this master (Salt's would start a minion \
                 from the master's config); use local or runner instead",
            ),
        }
    }

    /// Publish a job as the master's own local client does, without waiting for returns.
    fn publish(&self, mut req: PublishRequest) -> Result<(), String> {
        let delimiter = req.kwargs.get_str("delimiter").unwrap_or(":").to_string();
        let expected =
            match self
                .master
                .check_minions(&req.tgt.to_value(), &req.tgt_type, &delimiter)
            {
                Ok(e) if !e.minions.is_empty() => e,
                Ok(_) => {
                    tracing::debug!(
                        "reactor job {} not published: no minion matched {}",
                        req.fun.name(),
                        req.tgt
                    );
                    return Ok(());
                }
                Err(e) => {
                    tracing::debug!("reactor job {} not published: {e}", req.fun.name());
                    return Ok(());
                }
            };
        if !req.jid.is_empty() {
            let free = is_jid(&req.jid)
                && matches!(self.master.store.get_load(&req.jid), Ok(None))
                && self.master.recent_jids.claim(&req.jid);
            if !free {
                return Err(format!("The jid {} is not a free jid", req.jid));
            }
        }
        req.user = Some(self.master.cfg.user.clone());
        req.key = None;
        let reply = self
            .master
            .publish_job(req, expected.minions, expected.missing);
        tracing::debug!("reactor published job {}", reply.jid);
        Ok(())
    }
}

fn pool_full(id: &str, state: &str, fun: &str) {
    // Salt's text, double space and all.
    tracing::error!(
        "Reactor '{id}' failed  to execute {state} '{fun}': TaskPool queue is full!Consider \
         tuning reactor_worker_threads and/or reactor_worker_hwm"
    );
}

// ---- from files to chunks ----------------------------------------------------------------

/// What one rendered reaction file declares: Salt's `Compiler.pad_funcs` (`local.test.ping:
/// [...]` becomes `local: [..., test.ping]`, a short `ID: local.test.ping` too) and the
/// reactor's `__sls__` on every ID. Data that is not a map of maps fails the whole file, as
/// in Salt.
fn reaction_high(rendered: Json, sls: &str) -> Result<High, String> {
    let mut high = match rendered {
        Json::Null => return Ok(High::new()),
        Json::Object(m) => m,
        other => {
            return Err(format!(
                "the rendered data is a {}, not a mapping of IDs",
                py_type(&other)
            ))
        }
    };
    for (id, body) in high.iter_mut() {
        if let Json::String(short) = body {
            if let Some((state, fun)) = short.split_once('.') {
                *body = json!({ state: [fun] });
            }
        }
        let Json::Object(decls) = body else {
            return Err(format!(
                "ID {id}: '{}' object does not support item assignment",
                py_type(body)
            ));
        };
        pad_funcs(decls);
        decls.insert("__sls__".into(), Json::from(sls));
    }
    Ok(high)
}

/// The first key of a map (Salt's `next(iter(reactor.keys()))`).
fn first_key(v: &Json) -> Option<&str> {
    v.as_object()?.keys().next().map(String::as_str)
}

/// Salt's `pad_funcs` on one ID's declarations, in Python's sorted key order.
fn pad_funcs(decls: &mut Map<String, Json>) {
    let mut keys: Vec<String> = decls.keys().cloned().collect();
    keys.sort();
    let mut seen: HashSet<String> = HashSet::new();
    for key in keys {
        if key.starts_with('_') || !decls[&key].is_array() {
            continue;
        }
        let Some((state, fun)) = key.split_once('.') else {
            seen.insert(key);
            continue;
        };
        if seen.contains(state) {
            continue;
        }
        let mut args = decls.shift_remove(&key).unwrap_or_default();
        if let Json::Array(a) = &mut args {
            a.push(Json::from(fun));
        }
        decls.insert(state.to_string(), args);
        seen.insert(state.to_string());
    }
}

/// The chunks to run, in Salt's `Compiler` order (those without `order` share one; then by
/// state, name and function as text), `cmd` renamed `local`; none when the high data does
/// not verify (logged).
fn chunks(high: High, tag: &str, paths: &[String]) -> Vec<Low> {
    if high.is_empty() {
        return Vec::new();
    }
    let errors = brine_state::verify_high(&high);
    if !errors.is_empty() {
        tracing::error!(
            "Unable to render reactions for event {tag} due to errors ({}) in one or more of \
             the sls files ({})",
            py_list(&errors),
            py_list(paths)
        );
        return Vec::new();
    }
    let mut chunks = compile_high_data(&high);
    for chunk in &mut chunks {
        if chunk.get("state").and_then(Json::as_str) == Some("cmd") {
            chunk.insert("state".into(), Json::from("local"));
        }
    }
    chunks
}

fn py_list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| str_repr(s)).collect();
    format!("[{}]", items.join(", "))
}

// ---- from a chunk to a call (ReactWrap.run) ----------------------------------------------

/// What one chunk runs.
#[derive(Debug, PartialEq)]
enum Call {
    /// A job for minions (`LocalClient.cmd_async`).
    Local(PublishRequest),
    Runner {
        fun: String,
        args: Args,
    },
    Wheel {
        fun: String,
        args: Args,
    },
    /// Refused on this master.
    Caller,
}

/// Salt's `ReactWrap.run` up to the call: the new style (`args:`, a list of one-key maps,
/// becomes the keyword arguments), or the legacy one (`arg:`/`kwarg:` as given; for runner
/// and wheel functions the chunk's keys mapped onto the function's parameters, defaults
/// filled in). `Err` is why the chunk does not run.
fn prepare(low: &Low) -> Result<Call, String> {
    let state = text(low, "state");
    let fun = text(low, "fun");
    let on_master = matches!(state.as_str(), "runner" | "wheel");
    // What the wrapper (`local(fun, tgt, **kwargs)`, `runner(fun, **kwargs)`, ...) gets.
    let mut kw = low.clone();
    kw.shift_remove("fun");
    let tgt = match state.as_str() {
        "local" => Some(
            kw.shift_remove("tgt")
                .ok_or("local takes at least 2 arguments (1 given)")?,
        ),
        _ => None,
    };
    let (arg, kwarg) = match kw.shift_remove("args") {
        Some(reactor_args) => {
            for item in ["arg", "kwarg"] {
                if let Some(v) = low.get(item) {
                    tracing::warn!(
                        "Reactor '{}' is ignoring '{item}' param {} due to presence of 'args' \
                         param. Check the Reactor System documentation for the correct \
                         argument format.",
                        text(low, "__id__"),
                        py_text(v)
                    );
                }
                kw.shift_remove(item);
            }
            let legacy_caller =
                state == "caller" && reactor_args.is_array() && !is_dictlist(&reactor_args);
            let (arg, kwarg) = if legacy_caller {
                (reactor_args, json!({}))
            } else {
                (json!([]), reactor_args)
            };
            let kwarg = match kwarg {
                Json::Object(_) => kwarg,
                other => {
                    let packed = repack_dictlist(&other);
                    if packed.is_empty() {
                        return Err(INCORRECT_FORMAT.into());
                    }
                    Json::Object(packed)
                }
            };
            (arg, kwarg)
        }
        None => {
            let mut call = (json!([]), json!({}));
            if on_master && !(kw.contains_key("arg") && kw.contains_key("kwarg")) {
                let sig = Signature::of(&state, &fun).ok_or("function not available")?;
                call = sig.format_call(low)?;
            }
            (
                kw.shift_remove("arg").unwrap_or(call.0),
                kw.shift_remove("kwarg").unwrap_or(call.1),
            )
        }
    };
    match state.as_str() {
        "local" => {
            let arg = condition_input(&arg, &kwarg)?;
            let mut take = |key: &str, default: &str| {
                kw.shift_remove(key)
                    .map_or_else(|| Value::from(default), |v| from_json(&v))
            };
            let tgt_type = take("tgt_type", "glob");
            let ret = take("ret", "");
            let jid = take("jid", "");
            // `cmd_async` hands `timeout` to `run_job`; everything else is the publish's kwargs.
            kw.shift_remove("timeout");
            let load = map(vec![
                ("tgt", from_json(&tgt.unwrap_or_default())),
                ("fun", Value::from(fun)),
                ("arg", Value::Array(arg)),
                ("tgt_type", tgt_type),
                ("ret", ret),
                ("jid", jid),
                ("kwargs", from_json(&Json::Object(kw))),
            ]);
            PublishRequest::parse(load)
                .map(Call::Local)
                .map_err(|e| e.to_string())
        }
        "runner" | "wheel" => {
            let args = Args {
                args: iterate(&arg)?.iter().map(from_json).collect(),
                kwargs: match kwarg {
                    Json::Object(m) => m.iter().map(|(k, v)| (k.clone(), from_json(v))).collect(),
                    other if !json_truthy(&other) => Vec::new(),
                    other => {
                        return Err(format!(
                            "argument after ** must be a mapping, not {}",
                            py_type(&other)
                        ))
                    }
                },
            };
            Ok(if state == "runner" {
                Call::Runner { fun, args }
            } else {
                Call::Wheel { fun, args }
            })
        }
        _ => Ok(Call::Caller),
    }
}

/// The items Python's iteration gives: a list's items, a string's characters, a map's keys.
fn iterate(v: &Json) -> Result<Vec<Json>, String> {
    Ok(match v {
        Json::Array(items) => items.clone(),
        Json::String(s) => s.chars().map(|c| Json::from(c.to_string())).collect(),
        Json::Object(m) => m.keys().map(|k| Json::from(k.as_str())).collect(),
        other => return Err(format!("'{}' object is not iterable", py_type(other))),
    })
}

/// Salt's `condition_input`: the positional arguments of a publish, the keyword arguments
/// packed at the end as `{"__kwarg__": True, ...}`.
pub(crate) fn condition_input(arg: &Json, kwarg: &Json) -> Result<Vec<Value>, String> {
    let mut out: Vec<Value> = iterate(arg)?
        .iter()
        .map(|a| match a {
            Json::Number(n) if !n.is_f64() && is_jid(&n.to_string()) => Value::from(n.to_string()),
            other => from_json(other),
        })
        .collect();
    if let Json::Object(m) = kwarg {
        if !m.is_empty() {
            let mut packed = vec![(Value::from("__kwarg__"), Value::from(true))];
            packed.extend(
                m.iter()
                    .map(|(k, v)| (Value::from(k.as_str()), from_json(v))),
            );
            out.push(Value::Map(packed));
        }
    }
    Ok(out)
}

/// Salt's `is_dictlist`: a list of one-key maps.
fn is_dictlist(v: &Json) -> bool {
    v.as_array().is_some_and(|items| {
        items
            .iter()
            .all(|i| i.as_object().is_some_and(|m| m.len() == 1))
    })
}

/// A runner's or wheel function's parameters, from its registry entry (`jid`,
/// `missing=False`, `*args`, `**kwargs`), for Salt's `format_call`.
#[derive(Debug, PartialEq)]
struct Signature {
    /// The Python function's name (`finger`).
    name: String,
    /// Its module's path, as Salt's messages show it (`salt.loaded.int.wheel.key.finger`).
    path: String,
    required: Vec<String>,
    /// Parameters with defaults, last first (the order of Salt's `arg_lookup`).
    defaults: Vec<(String, Json)>,
    /// Takes `**kwargs`.
    keywords: bool,
}

impl Signature {
    /// The signature of runner or wheel function `fun`; `None` when there is no such function.
    fn of(state: &str, fun: &str) -> Option<Signature> {
        let (params, kind) = match state {
            "runner" => (crate::runners::find(fun)?.args, "runners"),
            "wheel" => (crate::wheel::find(fun)?.args, "wheel"),
            _ => return None,
        };
        Some(Signature::parse(params, fun, kind))
    }

    fn parse(params: &[&str], fun: &str, kind: &str) -> Signature {
        let name = fun.rsplit('.').next().unwrap_or(fun).to_string();
        let mut sig = Signature {
            path: format!("salt.loaded.int.{kind}.{fun}"),
            name,
            required: Vec::new(),
            defaults: Vec::new(),
            keywords: false,
        };
        for p in params {
            if p.starts_with("**") {
                sig.keywords = true;
            } else if p.starts_with('*') {
                // `*args`: format_call gives it nothing.
            } else if let Some((k, default)) = p.split_once('=') {
                sig.defaults.insert(0, (k.to_string(), py_literal(default)));
            } else {
                sig.required.push(p.to_string());
            }
        }
        sig
    }

    /// Salt's `format_call(fun, low, expected_extra_kws=REACTOR_INTERNAL_KEYWORDS)`: the
    /// positional arguments and keyword arguments (defaults filled in) `data` gives.
    fn format_call(&self, data: &Low) -> Result<(Json, Json), String> {
        let mut data = data.clone();
        let mut kwargs = Map::new();
        for (k, default) in &self.defaults {
            let v = data.shift_remove(k).unwrap_or_else(|| default.clone());
            kwargs.insert(k.clone(), v);
        }
        let mut args = Vec::new();
        let mut missing = 0;
        for k in &self.required {
            match data.shift_remove(k) {
                Some(v) => args.push(v),
                None => missing += 1,
            }
        }
        if missing > 0 {
            let used = args.len();
            let count = used + missing;
            return Err(format!(
                "{} takes at least {count} argument{} ({used} given)",
                self.name,
                if count > 1 { "s" } else { "" }
            ));
        }
        let extra: Vec<(String, Json)> = data
            .into_iter()
            .filter(|(k, _)| !INTERNAL_KEYWORDS.contains(&k.as_str()))
            .collect();
        if self.keywords {
            kwargs.extend(extra);
        } else if let Some(((last, _), rest)) = extra.split_last() {
            return Err(if rest.is_empty() {
                format!(
                    "'{last}' is an invalid keyword argument for '{}'",
                    self.path
                )
            } else {
                let rest: Vec<String> = rest.iter().map(|(k, _)| format!("'{k}'")).collect();
                format!(
                    "{} and '{last}' are invalid keyword arguments for '{}'",
                    rest.join(", "),
                    self.path
                )
            });
        }
        Ok((Json::Array(args), Json::Object(kwargs)))
    }
}

/// A Python literal as signatures spell defaults (`None`, `False`, `10`, `'base'`, `us`).
fn py_literal(text: &str) -> Json {
    match text {
        "None" => Json::Null,
        "True" => Json::Bool(true),
        "False" => Json::Bool(false),
        _ => {
            if let Ok(i) = text.parse::<i64>() {
                return Json::from(i);
            }
            if let Ok(f) = text.parse::<f64>() {
                return Json::from(f);
            }
            let unquoted = text
                .strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .or_else(|| text.strip_prefix('"').and_then(|t| t.strip_suffix('"')))
                .unwrap_or(text);
            Json::from(unquoted)
        }
    }
}

#[cfg(test)]
mod tests;
