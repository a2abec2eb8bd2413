//! Runner functions, run next to the master's state in a task of its runtime. A runner call
//! answers `{tag, jid}` at once; its result travels on the event bus as `salt/run/<jid>/ret`,
//! as with Salt.
//!
//! Each Salt runner module is one file here whose `FUNCTIONS` lists its runners ([`Runner`]:
//! name, arguments, documentation, code); [`MODULES`] lists the modules. Adding a runner is one
//! function and one entry in its module's `FUNCTIONS`; adding a module, one file and one line
//! in [`MODULES`]. `doc.runner` reads this registry, and `brine_protocol::catalog::RUNNERS` (what
//! the minion's `sys.list_runner_functions` shows) is checked against it by a unit test.

/// Declares the runner modules: each name is a file here and its whole registration.
macro_rules! runner_modules {
    ($($module:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every runner module's functions.
        pub const MODULES: &[&[Runner]] = &[$($module::FUNCTIONS),*];
    };
}

runner_modules![cache, doc, event, fileserver, jobs, manage, pillar, reactor, state, test];

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use brine_client::{ClientError, LocalClient, Publish, Timeouts};
use brine_protocol::jid::{gen_jid, jid_to_time};
use brine_protocol::loads::{PublishReply, PublishRequest};
use brine_protocol::payload::{get, get_str, map, Value};

use crate::jobstore::{Field, JobHead};
use crate::master::Master;

/// The master as a local client's way to publish: in-process, with no key to check.
struct InProcess(Arc<Master>);

impl Publish for InProcess {
    async fn publish(&self, mut req: PublishRequest) -> Result<PublishReply, ClientError> {
        let delimiter = req.kwargs.get_str("delimiter").unwrap_or(":").to_string();
        let expected = match self
            .0
            .check_minions(&req.tgt.to_value(), &req.tgt_type, &delimiter)
        {
            Ok(e) if !e.minions.is_empty() => e,
            _ => {
                return Ok(PublishReply {
                    jid: String::new(),
                    minions: vec![],
                    missing: vec![],
                })
            }
        };
        if req.user.is_none() {
            req.user = Some("root".into());
        }
        req.key = None;
        Ok(self.0.publish_job(req, expected.minions, expected.missing))
    }
}
use crate::wheel::Args;

/// What a runner function returns: its result, or the error message Salt shows.
pub type RunnerFuture = Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>;

/// One runner function.
pub struct Runner {
    pub name: &'static str,
    /// Its arguments as Salt documents them (`jid`, `missing=False`, `**kwargs`).
    pub args: &'static [&'static str],
    pub doc: &'static str,
    pub run: fn(Call) -> RunnerFuture,
}

/// One call of a runner function.
pub struct Call {
    pub master: Arc<Master>,
    pub jid: String,
    pub fun: &'static str,
    pub args: Args,
    /// How long a runner that asks the minions waits for them (`timeout`, else the config's).
    pub timeout: Duration,
    /// Who runs it (`__user__`).
    pub user: String,
}

/// Every runner function, sorted by name.
pub fn all() -> Vec<&'static Runner> {
    let mut v: Vec<&Runner> = MODULES.iter().flat_map(|m| m.iter()).collect();
    v.sort_by_key(|r| r.name);
    v
}

/// The runner function called `name`.
pub fn find(name: &str) -> Option<&'static Runner> {
    MODULES
        .iter()
        .flat_map(|m| m.iter())
        .find(|r| r.name == name)
}

/// A runner that does not wait for anything.
pub(crate) fn ready(r: Result<Value, String>) -> RunnerFuture {
    Box::pin(std::future::ready(r))
}

/// What came back from an in-process job.
pub struct LocalResult {
    pub jid: Option<String>,
    pub minions: Vec<String>,
    /// Return loads by minion id, in arrival order.
    pub returns: Vec<(String, Value)>,
}

pub(crate) fn ids(list: &[String]) -> Value {
    Value::Array(list.iter().cloned().map(Value::from).collect())
}

/// Salt's `format_job_instance`: how `jobs.list_jobs` shows one job.
pub fn job_summary(jid: &str, load: &Value) -> Vec<(Value, Value)> {
    head_summary(JobHead::of_load(jid, load), false)
}

/// [`job_summary`] of a job's head (its fields moved in); `with_jid` adds `JID` before
/// `StartTime` (Salt's `format_jid_instance_ext`).
pub fn head_summary(head: JobHead, with_jid: bool) -> Vec<(Value, Value)> {
    let or = |f: Field, default: Value| f.0.unwrap_or(default);
    let metadata = head.metadata.0.or_else(|| {
        let kwargs = head.kwargs.0.as_ref()?;
        get(kwargs, "metadata").cloned()
    });
    // Room for all seven entries at once (a list of many jobs makes many of these).
    let mut v = Vec::with_capacity(7);
    v.extend([
        (
            Value::from("Function"),
            or(head.fun, Value::from("unknown-function")),
        ),
        (Value::from("Arguments"), or(head.arg, Value::Array(vec![]))),
        (
            Value::from("Target"),
            or(head.tgt, Value::from("unknown-target")),
        ),
        (
            Value::from("Target-type"),
            or(head.tgt_type, Value::from("list")),
        ),
        (Value::from("User"), or(head.user, Value::from("root"))),
    ]);
    if let Some(md) = metadata {
        v.push((Value::from("Metadata"), md));
    }
    let start = jid_to_time(&head.jid).unwrap_or_default();
    if with_jid {
        v.push((Value::from("JID"), Value::from(head.jid)));
    }
    v.push((Value::from("StartTime"), Value::from(start)));
    v
}

impl Master {
    /// The clear `runner` command.
    pub fn clear_runner(&self, load: Value) -> Value {
        let Some(user) = self.authenticate_load(&load) else {
            tracing::warn!("runner call refused: bad root key");
            return Master::auth_error("AuthenticationError");
        };
        let Some(me) = self.arc() else {
            return Master::auth_error("AuthenticationError");
        };
        let fun = get_str(&load, "fun").unwrap_or("").to_string();
        // Salt's runner client sends {"fun", "kwarg": {"arg": [...], "kwarg": {...}}}: the
        // inner map's keys are all the runner's (`fun` and `name` among them, for
        // `state.orchestrate_single`).
        let call = match get(&load, "kwarg") {
            Some(kw @ Value::Map(_)) => kw.clone(),
            _ => load.clone(),
        };
        let args = Args::from_flat_load(&call);
        let jid = get_str(&load, "jid")
            .filter(|j| !j.is_empty())
            .map(str::to_string)
            .unwrap_or_else(gen_jid);
        let tag = format!("salt/run/{jid}");
        let jid2 = jid.clone();
        self.rt.spawn(async move {
            me.start_runner_job(&jid2, &fun, args, &user).await;
        });
        map(vec![("tag", Value::from(tag)), ("jid", Value::from(jid))])
    }

    /// Run a runner as a job: events `salt/run/<jid>/new` and `/ret`, and the job store. Its
    /// return and whether it succeeded come back: a return with `data` (an orchestration's)
    /// succeeds when Salt's `check_result` passes on that data.
    pub async fn run_runner_job(
        self: &Arc<Self>,
        jid: &str,
        fun: &str,
        args: Args,
        user: &str,
    ) -> (Value, bool) {
        let (ret, success) = self.runner_job(jid, fun, args, user, true).await;
        (ret.unwrap_or(Value::Nil), success)
    }

    /// [`Master::run_runner_job`] for a caller that has no use for the return (salt-api and
    /// `salt-run` read it from the event, a reaction drops it): it is not copied out of the
    /// event for them.
    pub async fn start_runner_job(self: &Arc<Self>, jid: &str, fun: &str, args: Args, user: &str) {
        self.runner_job(jid, fun, args, user, false).await;
    }

    /// A runner job: the return when `keep` asks for it, and whether the runner succeeded.
    async fn runner_job(
        self: &Arc<Self>,
        jid: &str,
        fun: &str,
        args: Args,
        user: &str,
        keep: bool,
    ) -> (Option<Value>, bool) {
        let mut fun_args: Vec<Value> = args.args.clone();
        if !args.kwargs.is_empty() {
            fun_args.push(Value::Map(
                args.kwargs
                    .iter()
                    .map(|(k, v)| (Value::from(k.as_str()), v.clone()))
                    .collect(),
            ));
        }
        let head = vec![
            ("fun", Value::from(format!("runner.{fun}"))),
            ("jid", Value::from(jid)),
            ("user", Value::from(user)),
            ("fun_args", Value::Array(fun_args.clone())),
        ];
        self.bus
            .fire(&format!("salt/run/{jid}/new"), map(head.clone()));
        let (ret, success) = match self.run_runner(jid, fun, args, user).await {
            Ok(v) => {
                let success = match get(&v, "data") {
                    Some(data) if matches!(v, Value::Map(_)) => {
                        brine_state::check_result(&brine_protocol::payload::to_json(data), false)
                    }
                    _ => true,
                };
                (v, success)
            }
            Err(msg) => (Value::from(msg), false),
        };
        let mut data = head;
        data.push(("return", ret));
        data.push(("success", Value::from(success)));
        let data = map(data);
        let tag = format!("salt/run/{jid}/ret");
        // The event goes first (salt-api waits for it). What follows (the store's copy, the
        // caller's copy of a return that can be tens of megabytes) runs off the runtime's
        // workers: the bus's writers, woken by the event, run meanwhile.
        let Some(ev) = self.bus.fire(&tag, data) else {
            let why = format!("the return of runner {fun} is too large for the event bus");
            return (Some(Value::from(why)), false);
        };
        let store = (self.cfg.job_cache && self.cfg.runner_returns).then(|| {
            let load = map(vec![
                ("id", Value::from(self.cfg.id.clone())),
                ("tgt", Value::from(self.cfg.id.clone())),
                ("jid", Value::from(jid)),
                ("fun", Value::from(format!("runner.{fun}"))),
                ("arg", Value::Array(fun_args)),
                ("tgt_type", Value::from("list")),
                ("user", Value::from(user)),
            ]);
            (self.store.clone(), self.cfg.id.clone(), load)
        });
        let (jid, fun) = (jid.to_string(), format!("runner.{fun}"));
        let ret = tokio::task::spawn_blocking(move || {
            if let Some((store, id, load)) = store {
                let _ = store.save_load(&jid, &load, &[]);
                // Salt stores the whole event data as the runner job's return.
                let head = map(vec![
                    ("id", Value::from(id)),
                    ("jid", Value::from(jid)),
                    ("fun", Value::from(fun)),
                    ("return", Value::Nil),
                    ("success", Value::from(success)),
                ]);
                let _ = store.save_return_of(&head, &ev.data);
            }
            keep.then(|| get(&ev.data, "return").cloned()).flatten()
        })
        .await;
        (ret.ok().flatten(), success)
    }

    /// Publish a job from inside the master and gather its returns with the one local
    /// client (Salt's find_job rounds for slow minions, the hard stop), as `root` unless the
    /// request names a user.
    pub async fn local_cmd(
        self: &Arc<Self>,
        req: PublishRequest,
        timeout: Duration,
    ) -> LocalResult {
        let client = LocalClient::new(InProcess(self.clone()));
        let rx = self.bus.subscribe();
        let job = match client.publish(req).await {
            Ok(job) if !job.minions.is_empty() => job,
            _ => {
                return LocalResult {
                    jid: None,
                    minions: vec![],
                    returns: vec![],
                }
            }
        };
        let waits = Timeouts::from_secs(
            timeout.as_secs(),
            self.cfg.gather_job_timeout,
            self.cfg.gather_hard_stop,
        );
        let mut returns = Vec::new();
        let mut gathering = client.returns(rx, &job, waits);
        while let Some((id, ev)) = gathering.next().await {
            returns.push((id, ev.data.clone()));
        }
        LocalResult {
            jid: Some(job.jid),
            minions: job.minions,
            returns,
        }
    }

    /// Salt's `cmd_batch` from inside the master: the returns (`None` for a minion whose
    /// job ended without one) in arrival order; with `failhard`, the run stops after the
    /// first return with a non-zero retcode.
    pub async fn batch_cmd(
        self: &Arc<Self>,
        req: PublishRequest,
        batch: brine_client::Batch,
        timeout: Duration,
        failhard: bool,
    ) -> Result<Vec<(String, Option<Value>)>, ClientError> {
        let client = LocalClient::new(InProcess(self.clone()));
        let rx = self.bus.subscribe();
        let waits = Timeouts::from_secs(
            timeout.as_secs(),
            self.cfg.gather_job_timeout,
            self.cfg.gather_hard_stop,
        );
        let mut returns = Vec::new();
        client
            .batch(rx, &req, batch, waits, |ev| {
                use brine_client::BatchEvent;
                use std::ops::ControlFlow;
                match ev {
                    BatchEvent::Return { id, event, .. } => {
                        let bad = get(&event.data, "retcode")
                            .is_some_and(|rc| brine_client::batch::batch_retcode(rc) > 0);
                        returns.push((id, Some(event.data.clone())));
                        if failhard && bad {
                            return ControlFlow::Break(());
                        }
                    }
                    BatchEvent::NoReturn { id, .. } => returns.push((id, None)),
                    BatchEvent::Down(_) | BatchEvent::Started { .. } => {}
                }
                ControlFlow::Continue(())
            })
            .await?;
        Ok(returns)
    }

    fn job_result(&self, jid: &str) -> Vec<(Value, Value)> {
        self.store
            .get_returns(jid)
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                let mut m = Vec::new();
                for k in ["return", "retcode", "success", "out"] {
                    if let Some(v) = get(&r.full_ret, k) {
                        m.push((Value::from(k), v.clone()));
                    }
                }
                (Value::from(r.id), Value::Map(m))
            })
            .collect()
    }

    pub(crate) fn list_job(&self, jid: &str) -> Result<Value, String> {
        let mut out = vec![(Value::from("jid"), Value::from(jid))];
        match self.store.get_load(jid).map_err(|e| e.to_string())? {
            Some((load, minions)) => {
                let summary = job_summary(jid, &load);
                let (start, rest): (Vec<_>, Vec<_>) = summary
                    .into_iter()
                    .partition(|(k, _)| k.as_str() == Some("StartTime"));
                out.extend(rest);
                out.push((Value::from("Minions"), ids(&minions)));
                out.extend(start);
            }
            None => {
                // As Salt: the error, the start time the jid spells, and an empty result.
                out.push((
                    Value::from("Error"),
                    Value::from("Cannot contact returner or no job with this jid"),
                ));
                out.push((
                    Value::from("StartTime"),
                    Value::from(jid_to_time(jid).unwrap_or_default()),
                ));
            }
        }
        out.push((Value::from("Result"), Value::Map(self.job_result(jid))));
        Ok(Value::Map(out))
    }

    /// Run one runner function.
    pub async fn run_runner(
        self: &Arc<Self>,
        jid: &str,
        fun: &str,
        a: Args,
        user: &str,
    ) -> Result<Value, String> {
        let Some(runner) = find(fun) else {
            return Err(format!("'{fun}' is not available."));
        };
        if let Some(usage) = missing_arguments(runner, &a) {
            return Ok(Value::from(usage));
        }
        let timeout = a
            .get(99, "timeout")
            .and_then(brine_protocol::loads::int)
            .map(|t| t.max(1) as u64)
            .unwrap_or(self.cfg.timeout);
        (runner.run)(Call {
            master: self.clone(),
            jid: jid.to_string(),
            fun: runner.name,
            args: a,
            timeout: Duration::from_secs(timeout),
            user: user.to_string(),
        })
        .await
    }
}

/// Salt's answer to a runner called without an argument it requires (the `TypeError`
/// Salt's runner client turns into a successful return): "Passed invalid arguments:
/// <function>() missing 1 required positional argument: 'jid'" and the usage.
fn missing_arguments(runner: &Runner, a: &Args) -> Option<String> {
    let required: Vec<&str> = runner
        .args
        .iter()
        .filter(|p| !p.contains('=') && !p.starts_with('*'))
        .copied()
        .collect();
    let missing: Vec<String> = required
        .iter()
        .enumerate()
        .filter(|(pos, name)| a.get(*pos, name).is_none())
        .map(|(_, name)| format!("'{name}'"))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let list = match missing.as_slice() {
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
        [] => unreachable!("not empty"),
    };
    let short = runner.name.rsplit('.').next().unwrap_or(runner.name);
    let why = format!(
        "{short}() missing {} required positional argument{}: {list}",
        missing.len(),
        if missing.len() == 1 { "" } else { "s" },
    );
    Some(invalid_arguments(runner, &why))
}

/// Salt's answer to a runner called with arguments it does not take (the `TypeError` or
/// `SaltInvocationError` Salt's runner client turns into a successful return): the reason
/// and the runner's usage.
pub(crate) fn invalid_arguments(runner: &Runner, why: &str) -> String {
    format!(
        "\nPassed invalid arguments: {why}\n\nUsage:\n{}",
        runner.doc
    )
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.as_str().unwrap_or_default().to_string(),
        Value::Array(a) => a.iter().map(value_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    /// The minion's copy of the runner list (names and documentation) is this registry's.
    #[test]
    fn the_protocol_catalog_is_the_registry() {
        let registry: Vec<(&str, &str)> = super::all().iter().map(|r| (r.name, r.doc)).collect();
        if registry != brine_protocol::catalog::RUNNERS {
            let mut text = String::new();
            for (name, doc) in &registry {
                text.push_str(&format!("    ({name:?}, {doc:?}),\n"));
            }
            panic!("brine_protocol::catalog::RUNNERS differs from the master's runners; it should read:\n{text}");
        }
        let mut names: Vec<&str> = registry.iter().map(|(n, _)| *n).collect();
        names.dedup();
        assert_eq!(names.len(), registry.len(), "a runner is registered twice");
    }
}
