//! Orchestration: SLS files run as states on the master, as Salt runs them on its master
//! minion. The run's id is the master's id, its states come from the master's file server,
//! its pillar from the master's pillar for that id, and the `salt` states (`salt.function`,
//! `salt.state`, `salt.runner`, `salt.wheel`) act through the master itself: jobs published
//! and gathered in-process, runner and wheel functions run as jobs of their own.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use brine_protocol::config::MasterConfig;
use brine_protocol::jid::gen_jid;
use brine_protocol::loads::{Fun, PublishRequest, Tgt};
use brine_protocol::payload::{from_json, to_json, Value};
use brine_render::Context as RenderContext;
use brine_state::states::{EventWatch, MasterList, Params};
use brine_state::{call_high, High, Host, Job, Options, RunError};
use serde_json::{json, Map, Value as Json};

use crate::master::Master;
use crate::pillar::PillarRequest;
use crate::wheel::Args;

/// The runners whose `orchestration_jid` a `salt.runner` state passes down.
pub const ORCHESTRATE_RUNNERS: &[&str] = &["state.orchestrate", "state.orch", "state.sls"];

/// One orchestration: who runs it, where, and with what data.
pub struct Orchestration {
    master: Arc<Master>,
    /// Who started it: the user of the jobs and runners it starts.
    user: String,
    /// Salt's `__orchestration_jid__`; `None` for `orchestrate_single` and `_high`.
    jid: Option<String>,
    saltenv: String,
    test: bool,
    exclude: Vec<Json>,
    grains: Json,
    pillar: Json,
    /// Execution functions on the master (Salt's master minion runs every module).
    functions: brine_minion::functions::TemplateFunctions,
}

/// The master minion's grains: this host's, with the master's id (and the `grains` of the
/// master's configuration).
pub fn master_grains(cfg: &MasterConfig) -> Json {
    let extra = cfg.opts().get("grains").map_or(Value::Nil, from_json);
    to_json(&brine_minion::grains_core::grains_collect(
        &cfg.id, &extra, "salt",
    ))
}

/// [`master_grains`], collected once per master id (every orchestration reads them).
fn cached_master_grains(cfg: &MasterConfig) -> Json {
    static CACHE: Mutex<Vec<(String, Json)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, grains)) = cache.iter().find(|(id, _)| *id == cfg.id) {
        return grains.clone();
    }
    let grains = master_grains(cfg);
    cache.push((cfg.id.clone(), grains.clone()));
    grains
}

/// How an orchestration is asked for.
pub struct Request {
    pub user: String,
    pub jid: Option<String>,
    pub saltenv: String,
    pub test: bool,
    pub pillar: Option<Value>,
    pub pillarenv: Option<String>,
    pub exclude: Vec<Json>,
}

impl Orchestration {
    /// The master minion's data for `req`; the pillar's errors when it does not compile.
    pub fn new(master: Arc<Master>, req: Request) -> Result<Orchestration, Vec<String>> {
        let id = master.cfg.id.clone();
        let grains = cached_master_grains(&master.cfg);
        let mut preq = PillarRequest::new(&id, from_json(&grains));
        preq.saltenv = Some(req.saltenv.clone());
        preq.pillarenv = req.pillarenv.clone();
        if let Some(over @ Value::Map(_)) = &req.pillar {
            preq.pillar_override = over.clone();
        }
        let pillar = master.pillars.compile(&preq);
        if let Some(errors) = brine_protocol::payload::get(&pillar, "_errors") {
            let errors = match errors {
                Value::Array(items) => items.iter().map(|e| e.to_string()).collect(),
                other => vec![other.to_string()],
            };
            return Err(errors);
        }
        let pillar_arc = Arc::new(pillar.clone());
        let ctx = brine_minion::functions::Context {
            id: id.clone(),
            grains: Arc::new(from_json(&grains)),
            running: Arc::default(),
            pub_load: Value::Map(Vec::new()),
            pillar: pillar_arc,
            services: Arc::new(brine_minion::functions::Services::detached()),
        };
        let functions = brine_minion::functions::TemplateFunctions::on_blocking_thread_of(
            ctx,
            |_| true,
            master.rt.clone(),
        );
        Ok(Orchestration {
            user: req.user,
            jid: req.jid,
            saltenv: req.saltenv,
            test: req.test,
            exclude: req.exclude,
            grains,
            pillar: to_json(&pillar),
            functions,
            master,
        })
    }

    fn id(&self) -> &str {
        &self.master.cfg.id
    }

    fn render_context(&self) -> RenderContext {
        let mut opts = self.master.cfg.effective_opts();
        opts.insert("saltenv".into(), json!(self.saltenv));
        opts.insert("test".into(), json!(self.test));
        opts.insert("file_client".into(), json!("local"));
        opts.insert("__role".into(), json!("master"));
        RenderContext {
            grains: self.grains.clone(),
            pillar: self.pillar.clone(),
            opts: Json::Object(opts),
            renderer: self.master.cfg.renderer.clone(),
            saltenv: self.saltenv.clone(),
            ..RenderContext::default()
        }
    }

    /// The high data of `mods`, or the errors that stop it.
    pub fn compile(&self, mods: &[String]) -> Result<High, Vec<String>> {
        let envs = self.master.fileserver.envs();
        let mut compiler = brine_state::Compiler::new(
            Arc::clone(&self.master.fileserver),
            &envs,
            crate::pillar::master_functions(&self.master.cfg),
            self.render_context(),
        );
        compiler.compile(&[(self.saltenv.clone(), mods.to_vec())], &self.exclude)
    }

    /// Run high data: the states' returns, or the errors that stopped the run.
    pub fn run(&self, high: &High) -> Result<Map<String, Json>, Vec<String>> {
        let opts = Options {
            test: self.test,
            failhard: false,
            job: self.jid.as_ref().map(|jid| Job {
                jid: jid.clone(),
                id: self.id().to_string(),
                state_events: false,
            }),
        };
        // A refused argument ends an orchestration as an error of the run.
        call_high(high, self, opts).map_err(|e| match e {
            RunError::High(errors) => errors,
            RunError::Refused(why) => vec![why],
        })
    }

    /// `saltutil.cmd` on the master: publish, gather in arrival order, as Salt's
    /// `cmd_iter` with `_cmd_meta` gives them; minions that did not answer are
    /// `{"failed": true}` with `expect_minions`.
    fn saltutil_cmd(&self, args: &[Json], kw: &Map<String, Json>) -> Result<Json, String> {
        let tgt = match args.first() {
            Some(Json::Array(ids)) => Tgt::List(ids.iter().map(py_str).collect()),
            Some(t) => Tgt::Expr(py_str(t)),
            None => return Err("saltutil.cmd needs a target".into()),
        };
        let fun = args.get(1).map(py_str).unwrap_or_default();
        if kw
            .get("ssh")
            .is_some_and(brine_protocol::payload::json_truthy)
        {
            return Err("salt-ssh targets are not supported by Brine's master".into());
        }
        let arg = crate::reactor::condition_input(
            kw.get("arg").unwrap_or(&json!([])),
            kw.get("kwarg").unwrap_or(&json!({})),
        )?;
        let tgt_type = kw
            .get("tgt_type")
            .map(py_str)
            .unwrap_or_else(|| "glob".into());
        let mut req = PublishRequest::new(tgt, Fun::One(fun), arg, &tgt_type);
        req.ret = kw
            .get("ret")
            .filter(|r| !r.is_null())
            .map(py_str)
            .unwrap_or_default();
        req.user = Some(self.user.clone());
        let timeout = kw
            .get("timeout")
            .and_then(Json::as_i64)
            .map(|t| t.max(1) as u64)
            .unwrap_or(self.master.cfg.timeout);
        let timeout = std::time::Duration::from_secs(timeout);
        if let Some(spec) = kw.get("batch").filter(|v| !v.is_null()) {
            return self.saltutil_cmd_batch(req, &py_str(spec), kw, timeout);
        }
        if let Some(n) = kw.get("subset").filter(|v| !v.is_null()) {
            let n = n
                .as_u64()
                .ok_or_else(|| format!("'subset' must be a number of minions, not {n}"))?;
            req.tgt = Tgt::List(self.subset(&req, n as usize, timeout));
            req.tgt_type = "list".into();
        }
        let master = self.master.clone();
        let res = self
            .master
            .rt
            .block_on(async move { master.local_cmd(req, timeout).await });
        let mut out = Map::new();
        for (id, data) in &res.returns {
            let mut entry = Map::new();
            let field = |k: &str| brine_protocol::payload::get(data, k).map(to_json);
            entry.insert("ret".into(), field("return").unwrap_or(Json::Null));
            if let Some(o) = field("out") {
                entry.insert("out".into(), o);
            }
            entry.insert("retcode".into(), field("retcode").unwrap_or(json!(0)));
            entry.insert("jid".into(), json!(res.jid.clone().unwrap_or_default()));
            out.insert(id.clone(), Json::Object(entry));
        }
        if kw
            .get("expect_minions")
            .is_some_and(brine_protocol::payload::json_truthy)
        {
            for id in &res.minions {
                if !out.contains_key(id) {
                    out.insert(id.clone(), json!({"failed": true}));
                }
            }
        }
        Ok(Json::Object(out))
    }

    /// `saltutil.cmd` with `batch`: Salt's `cmd_batch`, each minion's bare return under `ret`
    /// (no `retcode`, no `jid`) with `out: highstate`, and `ret: {}` for a minion whose job
    /// ended without a return.
    fn saltutil_cmd_batch(
        &self,
        req: PublishRequest,
        spec: &str,
        kw: &Map<String, Json>,
        timeout: std::time::Duration,
    ) -> Result<Json, String> {
        let size = brine_client::BatchSize::parse(spec)
            .ok_or_else(|| brine_client::batch::invalid_batch_text(spec))?;
        let wait = kw
            .get("batch_wait")
            .and_then(Json::as_f64)
            .and_then(|w| std::time::Duration::try_from_secs_f64(w).ok())
            .unwrap_or_default();
        let failhard = kw
            .get("failhard")
            .is_some_and(brine_protocol::payload::json_truthy)
            || self.master.cfg.failhard;
        let batch = brine_client::Batch { size, wait };
        let master = self.master.clone();
        let returns = self
            .master
            .rt
            .block_on(async move { master.batch_cmd(req, batch, timeout, failhard).await })
            .map_err(|e| e.to_string())?;
        let mut out = Map::new();
        for (id, data) in returns {
            let field = |k: &str| {
                data.as_ref()
                    .and_then(|d| brine_protocol::payload::get(d, k))
                    .map(to_json)
            };
            let ret = if data.is_some() {
                field("return").unwrap_or(Json::Null)
            } else {
                json!({})
            };
            // Salt looks for `out` inside the bare return.
            let shown = match &ret {
                Json::Object(m) => m.get("out").cloned().unwrap_or(json!("highstate")),
                _ => json!("highstate"),
            };
            out.insert(id, json!({"out": shown, "ret": ret}));
        }
        Ok(Json::Object(out))
    }

    /// Salt's `cmd_subset`: up to `n` of the targeted minions, chosen at random, that list
    /// the function in `sys.list_functions`.
    fn subset(&self, req: &PublishRequest, n: usize, timeout: std::time::Duration) -> Vec<String> {
        let Fun::One(fun) = &req.fun else {
            return Vec::new();
        };
        let probe = req.probe("sys.list_functions");
        let master = self.master.clone();
        let res = self
            .master
            .rt
            .block_on(async move { master.local_cmd(probe, timeout).await });
        let having: Vec<String> = res
            .returns
            .into_iter()
            .filter(
                |(_, data)| match brine_protocol::payload::get(data, "return") {
                    Some(Value::Array(funs)) => funs.iter().any(|f| f.as_str() == Some(fun)),
                    _ => false,
                },
            )
            .map(|(id, _)| id)
            .collect();
        brine_client::batch::choose_subset(having, n)
    }

    /// Salt's `saltutil.runner` on the master: a runner job of its own.
    fn saltutil_runner(&self, args: &[Json], kw: &Map<String, Json>) -> Result<Json, String> {
        let name = args.first().map(py_str).unwrap_or_default();
        let runner = crate::runners::find(&name);
        let mut kw = kw.clone();
        let arg = match kw.remove("arg") {
            Some(Json::Array(items)) => items,
            Some(Json::Null) | None => Vec::new(),
            Some(other) => vec![other],
        };
        let mut kwarg = match kw.remove("kwarg") {
            Some(Json::Object(m)) => m,
            _ => Map::new(),
        };
        let jid = kw
            .remove("__orchestration_jid__")
            .filter(|j| !j.is_null())
            .map(|j| py_str(&j));
        let saltenv = kw
            .remove("__env__")
            .map(|e| py_str(&e))
            .unwrap_or_else(|| "base".into());
        let user = kw
            .remove("__pub_user")
            .map(|u| py_str(&u))
            .unwrap_or_else(|| self.user.clone());
        kwarg.extend(
            kw.into_iter()
                .filter(|(k, _)| !k.starts_with("__") && k != "full_return"),
        );
        if runner.is_some_and(|r| takes(r.args, "saltenv")) {
            kwarg.insert("saltenv".into(), json!(saltenv));
        }
        if ORCHESTRATE_RUNNERS.contains(&name.as_str()) {
            kwarg.insert(
                "orchestration_jid".into(),
                jid.clone().map_or(Json::Null, Json::String),
            );
        }
        if let Some(jid) = &jid {
            self.master.bus.fire(
                &format!("salt/run/{jid}/args"),
                from_json(&json!({"type": "runner", "name": name, "args": arg, "kwargs": kwarg})),
            );
        }
        let Some(runner) = runner else {
            return Err(format!("KeyError: '{name}'"));
        };
        // Salt's runner client keeps the caller in the arguments of a function that takes
        // any keyword.
        if takes(runner.args, "**kwargs") {
            kwarg.insert("__pub_user".into(), json!(user));
        }
        let call = Args {
            args: arg.iter().map(from_json).collect(),
            kwargs: kwarg
                .iter()
                .map(|(k, v)| (k.clone(), from_json(v)))
                .collect(),
        };
        let sub = gen_jid();
        let master = self.master.clone();
        let (ret, success) = self.master.rt.block_on({
            let sub = sub.clone();
            async move { master.run_runner_job(&sub, &name, call, &user).await }
        });
        Ok(json!({"jid": sub, "return": to_json(&ret), "success": success}))
    }

    /// Salt's `saltutil.wheel` on the master: a wheel job of its own (whose user Salt leaves
    /// `UNKNOWN`).
    fn saltutil_wheel(&self, args: &[Json], kw: &Map<String, Json>) -> Result<Json, String> {
        let name = args.first().map(py_str).unwrap_or_default();
        let wheel = crate::wheel::find(&name);
        let jid = kw
            .get("__orchestration_jid__")
            .filter(|j| !j.is_null())
            .map(py_str);
        let saltenv = kw
            .get("__env__")
            .map(py_str)
            .unwrap_or_else(|| "base".into());
        let mut valid: Map<String, Json> = kw
            .iter()
            .filter(|(k, _)| !k.starts_with("__"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if wheel.is_some_and(|w| takes(w.args, "saltenv")) {
            valid.insert("saltenv".into(), json!(saltenv));
        }
        if let Some(jid) = &jid {
            self.master.bus.fire(
                &format!("salt/run/{jid}/args"),
                from_json(&json!({"type": "wheel", "name": name, "args": valid})),
            );
        }
        if wheel.is_none() {
            return Err(format!("KeyError: '{name}'"));
        }
        let call = Args {
            args: Vec::new(),
            kwargs: valid
                .iter()
                .map(|(k, v)| (k.clone(), from_json(v)))
                .collect(),
        };
        let data = self
            .master
            .run_wheel_low_job(&gen_jid(), &name, &call, "UNKNOWN");
        Ok(to_json(&data))
    }
}

/// Whether a runner's or wheel's documented arguments include `param`.
fn takes(args: &[&str], param: &str) -> bool {
    args.iter().any(|a| a.split('=').next() == Some(param))
}

/// Python's `str()` of a value.
fn py_str(v: &Json) -> String {
    brine_state::verify::py_text(v)
}

impl Host for Orchestration {
    fn call(&self, fun: &str, args: &[Json], kwargs: &Map<String, Json>) -> Result<Json, String> {
        match fun {
            "saltutil.cmd" => self.saltutil_cmd(args, kwargs),
            "saltutil.runner" => self.saltutil_runner(args, kwargs),
            "saltutil.wheel" => self.saltutil_wheel(args, kwargs),
            _ => {
                let kwargs: BTreeMap<String, Json> =
                    kwargs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                brine_render::Functions::call(&self.functions, fun, args, &kwargs)
                    .unwrap_or_else(|| Err(format!("'{fun}' is not available.")))
            }
        }
    }

    fn grains(&self) -> &Json {
        &self.grains
    }

    fn pillar(&self) -> &Json {
        &self.pillar
    }

    fn fetch(&self, source: &str, saltenv: &str) -> Result<Option<Vec<u8>>, String> {
        match source.strip_prefix("salt://") {
            Some(path) => self.master.fileserver.read(path, saltenv),
            None => brine_state::states::read_local(source),
        }
    }

    fn render_template(
        &self,
        text: &str,
        source: &str,
        saltenv: &str,
        vars: Map<String, Json>,
    ) -> Result<String, String> {
        let ctx = RenderContext {
            saltenv: saltenv.to_string(),
            vars,
            ..self.render_context()
        };
        let path = source.strip_prefix("salt://").unwrap_or(source);
        brine_render::render_template(
            text,
            path,
            &ctx,
            self.master.fileserver.clone(),
            crate::pillar::master_functions(&self.master.cfg),
        )
        .map_err(|e| e.to_string())
    }

    fn cachedir(&self) -> PathBuf {
        self.master.cfg.cachedir.clone()
    }

    fn params(&self, fun: &str) -> Option<Params> {
        brine_minion::functions::params(fun)
    }

    fn list_master(&self, saltenv: &str, prefix: &str) -> Result<MasterList, String> {
        let lists = self
            .master
            .fileserver
            .lists(saltenv)
            .ok_or_else(|| format!("no saltenv {saltenv}"))?;
        let list = MasterList {
            files: lists.files.clone(),
            dirs: lists.dirs.clone(),
            links: lists.links.clone(),
        };
        Ok(list.under(prefix))
    }

    fn fire_event(&self, tag: &str, data: Json, _jid: &str) {
        self.master.bus.fire(tag, from_json(&data));
    }

    fn orchestration_jid(&self) -> Option<String> {
        self.jid.clone()
    }

    fn watch_events(&self) -> Option<Box<dyn EventWatch + '_>> {
        Some(Box::new(BusWatch {
            rx: self.master.bus.subscribe(),
            master: &self.master,
        }))
    }
}

/// The master's bus, watched from an orchestration's thread.
struct BusWatch<'a> {
    rx: tokio::sync::broadcast::Receiver<Arc<brine_transport::eventbus::Event>>,
    master: &'a Master,
}

impl EventWatch for BusWatch<'_> {
    fn next(&mut self, wait: std::time::Duration) -> Option<(String, Json)> {
        use tokio::sync::broadcast::error::RecvError;
        let deadline = tokio::time::Instant::now() + wait;
        let rx = &mut self.rx;
        self.master.rt.block_on(async move {
            loop {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Ok(ev)) => return Some((ev.tag.clone(), to_json(&ev.data))),
                    // Events missed by a slow watcher are gone, as on Salt's bus.
                    Ok(Err(RecvError::Lagged(_))) => continue,
                    Ok(Err(RecvError::Closed)) => {
                        tokio::time::sleep_until(deadline).await;
                        return None;
                    }
                    Err(_) => return None,
                }
            }
        })
    }
}
