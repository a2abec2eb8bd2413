//! The `saltutil` execution module: job control (`running`, `find_job`, `is_running`,
//! `kill_job`, `term_job`, `signal_job`), `refresh_pillar`, `refresh_modules`, and the
//! `sync_*` functions, which tell what custom modules the file server offers: those are Python
//! code, which Brine does not run, so a sync that finds any fails naming them.
//!
//! Jobs run as tasks inside the minion, so every entry carries the minion's own pid and
//! "signalling" a job aborts its task (which kills any command it started).

use rmpv::Value;

use super::args::{py_int, py_str, Bound, Signature};
use super::sys::fnmatch;
use super::CallState;
use super::{Context, FnError, Spec};
use brine_protocol::payload::{get, py_truthy};

/// SIGKILL and SIGTERM as Salt reports them.
const SIGKILL: i64 = 9;
const SIGTERM: i64 = 15;

/// The functions of the `saltutil` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    FindJob,
    IsRunning,
    KillJob,
    Running,
    SignalJob,
    TermJob,
    KillAllJobs,
    TermAllJobs,
    RefreshPillar,
    /// `saltutil.pillar_refresh`, Salt's alias of `refresh_pillar`.
    PillarRefresh,
    RefreshGrains,
    RefreshModules,
    RefreshBeacons,
    RefreshMatchers,
    ClearCache,
    ClearJobCache,
    SyncAll,
    Sync(Kind),
    /// `saltutil.sync_outputters`, Salt's alias of `sync_output`.
    SyncOutputters,
}

/// The kinds of custom modules `saltutil.sync_<kind>` copies from the file server's
/// `_<dir>/` directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Clouds,
    Beacons,
    Modules,
    States,
    Sdb,
    Grains,
    Renderers,
    Returners,
    Output,
    Utils,
    LogHandlers,
    Executors,
    Proxymodules,
    Engines,
    Thorium,
    Serializers,
    Matchers,
    Pillar,
    Tops,
    Wrapper,
}

impl Kind {
    /// In `saltutil.sync_all`'s order (`pillar`, `tops` and `wrapper` are synced only by a
    /// masterless minion).
    const ALL: &'static [Kind] = &[
        Kind::Clouds,
        Kind::Beacons,
        Kind::Modules,
        Kind::States,
        Kind::Sdb,
        Kind::Grains,
        Kind::Renderers,
        Kind::Returners,
        Kind::Output,
        Kind::Utils,
        Kind::LogHandlers,
        Kind::Executors,
        Kind::Proxymodules,
        Kind::Engines,
        Kind::Thorium,
        Kind::Serializers,
        Kind::Matchers,
        Kind::Pillar,
        Kind::Tops,
        Kind::Wrapper,
    ];

    /// The function (`saltutil.sync_modules`), its Python name, its key in `sync_all`'s return
    /// and the name Salt gives its synced files (`modules.<name>`, from `_modules/`).
    fn names(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            Kind::Clouds => ("saltutil.sync_clouds", "sync_clouds", "clouds", "clouds"),
            Kind::Beacons => (
                "saltutil.sync_beacons",
                "sync_beacons",
                "beacons",
                "beacons",
            ),
            Kind::Modules => (
                "saltutil.sync_modules",
                "sync_modules",
                "modules",
                "modules",
            ),
            Kind::States => ("saltutil.sync_states", "sync_states", "states", "states"),
            Kind::Sdb => ("saltutil.sync_sdb", "sync_sdb", "sdb", "sdb"),
            Kind::Grains => ("saltutil.sync_grains", "sync_grains", "grains", "grains"),
            Kind::Renderers => (
                "saltutil.sync_renderers",
                "sync_renderers",
                "renderers",
                "renderers",
            ),
            Kind::Returners => (
                "saltutil.sync_returners",
                "sync_returners",
                "returners",
                "returners",
            ),
            Kind::Output => ("saltutil.sync_output", "sync_output", "output", "output"),
            Kind::Utils => ("saltutil.sync_utils", "sync_utils", "utils", "utils"),
            Kind::LogHandlers => (
                "saltutil.sync_log_handlers",
                "sync_log_handlers",
                "log_handlers",
                "log_handlers",
            ),
            Kind::Executors => (
                "saltutil.sync_executors",
                "sync_executors",
                "executors",
                "executors",
            ),
            Kind::Proxymodules => (
                "saltutil.sync_proxymodules",
                "sync_proxymodules",
                "proxymodules",
                "proxy",
            ),
            Kind::Engines => (
                "saltutil.sync_engines",
                "sync_engines",
                "engines",
                "engines",
            ),
            Kind::Thorium => (
                "saltutil.sync_thorium",
                "sync_thorium",
                "thorium",
                "thorium",
            ),
            Kind::Serializers => (
                "saltutil.sync_serializers",
                "sync_serializers",
                "serializers",
                "serializers",
            ),
            Kind::Matchers => (
                "saltutil.sync_matchers",
                "sync_matchers",
                "matchers",
                "matchers",
            ),
            Kind::Pillar => ("saltutil.sync_pillar", "sync_pillar", "pillar", "pillar"),
            Kind::Tops => ("saltutil.sync_tops", "sync_tops", "tops", "tops"),
            Kind::Wrapper => (
                "saltutil.sync_wrapper",
                "sync_wrapper",
                "wrapper",
                "wrapper",
            ),
        }
    }

    /// Synced by `saltutil.sync_all` on a minion with a master.
    fn in_sync_all(self) -> bool {
        !matches!(self, Kind::Pillar | Kind::Tops | Kind::Wrapper)
    }
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::FindJob,
        Fun::IsRunning,
        Fun::KillJob,
        Fun::Running,
        Fun::SignalJob,
        Fun::TermJob,
        Fun::KillAllJobs,
        Fun::TermAllJobs,
        Fun::RefreshPillar,
        Fun::PillarRefresh,
        Fun::RefreshGrains,
        Fun::RefreshModules,
        Fun::RefreshBeacons,
        Fun::RefreshMatchers,
        Fun::ClearCache,
        Fun::ClearJobCache,
        Fun::SyncAll,
        Fun::SyncOutputters,
        Fun::Sync(Kind::Clouds),
        Fun::Sync(Kind::Beacons),
        Fun::Sync(Kind::Modules),
        Fun::Sync(Kind::States),
        Fun::Sync(Kind::Sdb),
        Fun::Sync(Kind::Grains),
        Fun::Sync(Kind::Renderers),
        Fun::Sync(Kind::Returners),
        Fun::Sync(Kind::Output),
        Fun::Sync(Kind::Utils),
        Fun::Sync(Kind::LogHandlers),
        Fun::Sync(Kind::Executors),
        Fun::Sync(Kind::Proxymodules),
        Fun::Sync(Kind::Engines),
        Fun::Sync(Kind::Thorium),
        Fun::Sync(Kind::Serializers),
        Fun::Sync(Kind::Matchers),
        Fun::Sync(Kind::Pillar),
        Fun::Sync(Kind::Tops),
        Fun::Sync(Kind::Wrapper),
    ];

    pub(crate) fn spec(self) -> Spec {
        let jid = Signature::new(&["jid"], 1, false, false);
        let (name, pyname, sig, doc) = match self {
            Fun::FindJob => (
                "saltutil.find_job",
                "find_job",
                jid,
                "
    Return the data of the running job with the given jid, or {} if no such
    job is running. The master uses this to tell slow minions from dead ones.

    CLI Example:

        salt '*' saltutil.find_job <job id>
    ",
            ),
            Fun::IsRunning => (
                "saltutil.is_running",
                "is_running",
                Signature::new(&["fun"], 1, false, false),
                "
    Return the running jobs whose function matches the given name or glob.

    CLI Example:

        salt '*' saltutil.is_running state.highstate
    ",
            ),
            Fun::KillJob => (
                "saltutil.kill_job",
                "kill_job",
                jid,
                "
    Kill the job with the given jid (signal 9).

    CLI Example:

        salt '*' saltutil.kill_job <job id>
    ",
            ),
            Fun::Running => (
                "saltutil.running",
                "running",
                Signature::NONE,
                "
    Return the data of every job running on the minion.

    CLI Example:

        salt '*' saltutil.running
    ",
            ),
            Fun::SignalJob => (
                "saltutil.signal_job",
                "signal_job",
                Signature::new(&["jid", "sig"], 2, false, false),
                "
    Send a signal to the job with the given jid; any signal stops it.

    CLI Example:

        salt '*' saltutil.signal_job <job id> 15
    ",
            ),
            Fun::TermJob => (
                "saltutil.term_job",
                "term_job",
                jid,
                "
    Terminate the job with the given jid (signal 15).

    CLI Example:

        salt '*' saltutil.term_job <job id>
    ",
            ),
            Fun::RefreshPillar => (
                "saltutil.refresh_pillar",
                "refresh_pillar",
                Signature::new(&["wait", "timeout", "clean_cache"], 0, false, false),
                REFRESH_PILLAR_DOC,
            ),
            Fun::PillarRefresh => (
                "saltutil.pillar_refresh",
                "pillar_refresh",
                Signature::new(&["wait", "timeout", "clean_cache"], 0, false, false),
                REFRESH_PILLAR_DOC,
            ),
            Fun::KillAllJobs => (
                "saltutil.kill_all_jobs",
                "kill_all_jobs",
                Signature::NONE,
                "
    Kill every job running on the minion but this one (signal 9); one line per
    job signalled.

    CLI Example:

        salt '*' saltutil.kill_all_jobs
    ",
            ),
            Fun::TermAllJobs => (
                "saltutil.term_all_jobs",
                "term_all_jobs",
                Signature::NONE,
                "
    Terminate every job running on the minion but this one (signal 15); one
    line per job signalled.

    CLI Example:

        salt '*' saltutil.term_all_jobs
    ",
            ),
            Fun::RefreshBeacons => (
                "saltutil.refresh_beacons",
                "refresh_beacons",
                Signature::NONE,
                "
    Reload the beacons. Brine's beacons are built in and follow the beacons
    option and the pillar as they change, so there is nothing to reload:
    returns True.

    CLI Example:

        salt '*' saltutil.refresh_beacons
    ",
            ),
            Fun::RefreshMatchers => (
                "saltutil.refresh_matchers",
                "refresh_matchers",
                Signature::NONE,
                "
    Reload the matchers. Brine's matchers are built in, so there is nothing
    to reload: returns True.

    CLI Example:

        salt '*' saltutil.refresh_matchers
    ",
            ),
            Fun::ClearCache => (
                "saltutil.clear_cache",
                "clear_cache",
                Signature::NONE,
                "
    Remove every file in the minion's cache directory (the file client's
    cache, the job and data caches) but the returns still waiting for the
    master in cachedir/outbox. Returns True, or False when a file could not
    be removed. Stopping the minion first is the safer way.

    CLI Example:

        salt '*' saltutil.clear_cache
    ",
            ),
            Fun::ClearJobCache => (
                "saltutil.clear_job_cache",
                "clear_job_cache",
                Signature::new(&["hours"], 0, false, false),
                "
    Remove the job directories under cachedir/minion_jobs older than the given
    number of hours (24). Returns True, or False when one could not be removed.

    CLI Example:

        salt '*' saltutil.clear_job_cache hours=12
    ",
            ),
            Fun::RefreshGrains => (
                "saltutil.refresh_grains",
                "refresh_grains",
                Signature::new(&[], 0, false, true),
                "
    Collect the minion's grains again: the core grains, the grains file and
    the minion config's `grains` option. The pillar is fetched again with the
    new grains unless `refresh_pillar=False`. Returns True.

    refresh_pillar : True
        Set to False to keep the pillar from being refreshed.

    clean_pillar_cache : False
        Accepted for Salt's sake: Brine's minion keeps no pillar cache.

    CLI Example:

        salt '*' saltutil.refresh_grains
    ",
            ),
            Fun::RefreshModules => (
                "saltutil.refresh_modules",
                "refresh_modules",
                Signature::new(&[], 0, false, true),
                "
    Reload the execution modules. Brine's modules are built in, so there is
    nothing to reload: returns True.

    CLI Example:

        salt '*' saltutil.refresh_modules
    ",
            ),
            Fun::SyncAll => (
                "saltutil.sync_all",
                "sync_all",
                Signature::new(
                    &[
                        "saltenv",
                        "refresh",
                        "extmod_whitelist",
                        "extmod_blacklist",
                        "clean_pillar_cache",
                    ],
                    0,
                    false,
                    false,
                ),
                "
    Sync every kind of custom module from the file server's _<kind>/
    directories. Custom modules are Python code, which Brine does not run:
    when the file server has any, the sync fails naming them; otherwise it
    returns an empty list per kind, as Salt does when there is nothing to sync.

    CLI Example:

        salt '*' saltutil.sync_all
        salt '*' saltutil.sync_all saltenv=dev
    ",
            ),
            Fun::SyncOutputters => (
                "saltutil.sync_outputters",
                "sync_outputters",
                Signature::new(
                    &["saltenv", "refresh", "extmod_whitelist", "extmod_blacklist"],
                    0,
                    false,
                    false,
                ),
                "
    Sync custom outputters from the file server's _output/ directory, as
    saltutil.sync_output does. Custom outputters are Python code, which Brine
    does not run: when the file server has any, the sync fails naming them;
    otherwise it returns [], as Salt does when there is nothing to sync.

    CLI Example:

        salt '*' saltutil.sync_outputters
    ",
            ),
            Fun::Sync(kind) => {
                let (name, pyname, _, _) = kind.names();
                let sig = if kind == Kind::Sdb {
                    Signature::new(
                        &["saltenv", "extmod_whitelist", "extmod_blacklist"],
                        0,
                        false,
                        false,
                    )
                } else {
                    Signature::new(
                        &["saltenv", "refresh", "extmod_whitelist", "extmod_blacklist"],
                        0,
                        false,
                        false,
                    )
                };
                (
                    name,
                    pyname,
                    sig,
                    "
    Sync custom modules of this kind from the file server's _<kind>/
    directory. Custom modules are Python code, which Brine does not run: when
    the file server has any, the sync fails naming them; otherwise it returns
    [], as Salt does when there is nothing to sync.

    CLI Example:

        salt '*' saltutil.sync_modules
        salt '*' saltutil.sync_states saltenv=dev
    ",
                )
            }
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let jid = || b.get("jid").map(py_str).unwrap_or_default();
        Ok(match self {
            Fun::Running => Value::Array(running(ctx)),
            Fun::FindJob => {
                let jid = jid();
                running(ctx)
                    .into_iter()
                    .find(|job| get(job, "jid").map(py_str).as_deref() == Some(jid.as_str()))
                    .unwrap_or_else(|| Value::Map(Vec::new()))
            }
            Fun::IsRunning => {
                let pattern = b.get("fun").map(py_str).unwrap_or_default();
                Value::Array(
                    running(ctx)
                        .into_iter()
                        .filter(|job| {
                            fnmatch(&pattern, &get(job, "fun").map(py_str).unwrap_or_default())
                        })
                        .collect(),
                )
            }
            Fun::KillJob => Value::from(signal_job(ctx, &jid(), SIGKILL)),
            Fun::KillAllJobs | Fun::TermAllJobs => {
                let sig = if self == Fun::KillAllJobs {
                    SIGKILL
                } else {
                    SIGTERM
                };
                let jids: Vec<String> = running(ctx)
                    .iter()
                    .filter_map(|job| get(job, "jid").map(py_str))
                    .collect();
                Value::Array(
                    jids.iter()
                        .map(|jid| Value::from(signal_job(ctx, jid, sig)))
                        .collect(),
                )
            }
            Fun::RefreshBeacons | Fun::RefreshMatchers => Value::Boolean(true),
            Fun::ClearCache => {
                let dir = ctx.services.cachedir.clone();
                Value::Boolean(
                    tokio::task::spawn_blocking(move || clear_cache(&dir))
                        .await
                        .unwrap_or(false),
                )
            }
            Fun::ClearJobCache => {
                let hours = match b.get("hours") {
                    None => 24.0,
                    Some(v) => super::args::py_float_of(v).map_err(FnError::Exception)?,
                };
                let dir = ctx.services.cachedir.join("minion_jobs");
                Value::Boolean(
                    tokio::task::spawn_blocking(move || clear_job_cache(&dir, hours))
                        .await
                        .unwrap_or(false),
                )
            }
            Fun::TermJob => Value::from(signal_job(ctx, &jid(), SIGTERM)),
            Fun::SignalJob => {
                let sig = py_int(b.get("sig").unwrap_or(&Value::Nil))
                    .map_err(|e| FnError::Exception(format!("ValueError: {e}")))?;
                Value::from(signal_job(ctx, &jid(), sig))
            }
            Fun::RefreshPillar | Fun::PillarRefresh => {
                match ctx.services.refresh_pillar(&ctx.id, &ctx.grains).await {
                    Ok(_) => Value::Boolean(true),
                    Err(e) => {
                        tracing::warn!("pillar refresh failed: {e}");
                        Value::Boolean(false)
                    }
                }
            }
            Fun::RefreshGrains => {
                let mut refresh_pillar = true;
                let mut invalid = Vec::new();
                // Salt's `clean_kwargs`: the `__pub_*` keys are not the caller's.
                for (key, val) in b.kwargs.iter().filter(|(k, _)| !k.starts_with("__")) {
                    match key.as_str() {
                        "refresh_pillar" => refresh_pillar = py_truthy(val),
                        "clean_pillar_cache" => {}
                        _ => invalid.push(format!("{key}={}", py_str(val))),
                    }
                }
                if !invalid.is_empty() {
                    return Err(FnError::Invocation(format!(
                        "The following keyword arguments are not valid: {}",
                        invalid.join(", ")
                    )));
                }
                ctx.services.refresh_grains(&ctx.id, refresh_pillar).await;
                Value::Boolean(true)
            }
            Fun::RefreshModules => Value::Boolean(true),
            Fun::SyncAll => {
                let kinds: Vec<Kind> = Kind::ALL
                    .iter()
                    .copied()
                    .filter(|k| k.in_sync_all())
                    .collect();
                let found = custom_modules(ctx, b, &kinds).await?;
                refuse_custom(&found)?;
                Value::Map(
                    kinds
                        .iter()
                        .map(|k| (Value::from(k.names().2), Value::Array(vec![])))
                        .collect(),
                )
            }
            Fun::SyncOutputters => {
                let found = custom_modules(ctx, b, &[Kind::Output]).await?;
                refuse_custom(&found)?;
                Value::Array(vec![])
            }
            Fun::Sync(kind) => {
                let found = custom_modules(ctx, b, &[kind]).await?;
                refuse_custom(&found)?;
                Value::Array(vec![])
            }
        })
    }
}

/// The custom modules of `kinds` on the file server, as Salt names them when it syncs them
/// (`modules.mymod`), each with its `salt://` path; in the environments of `saltenv` (a name,
/// a comma-separated list or a list; every environment of the file server when absent).
async fn custom_modules(
    ctx: &Context,
    b: &Bound,
    kinds: &[Kind],
) -> Result<Vec<(String, String)>, FnError> {
    let Some(master) = ctx.services.file_source() else {
        return Err(FnError::Execution(
            "saltutil.sync_* reads the master's file server (this minion has no master)".into(),
        ));
    };
    let saltenvs: Option<Vec<String>> = match b.get("saltenv") {
        None | Some(Value::Nil) => None,
        Some(Value::Array(items)) => Some(items.iter().map(py_str).collect()),
        Some(v) => Some(py_str(v).split(',').map(str::to_string).collect()),
    };
    let client = crate::fileclient::FileClient::new(master, &ctx.services.cachedir);
    let kinds = kinds.to_vec();
    tokio::task::spawn_blocking(move || {
        let envs = match saltenvs {
            Some(e) => e,
            None => client.envs()?,
        };
        let mut found = Vec::new();
        for env in envs {
            for file in client.list(&env)? {
                for kind in &kinds {
                    let (_, _, _, form) = kind.names();
                    let dir = format!("_{form}/");
                    if let Some(rel) = file.strip_prefix(&dir) {
                        let stem = rel.rsplit_once('.').map_or(rel, |(s, _)| s);
                        found.push((
                            format!("{form}.{}", stem.replace('/', ".")),
                            format!("salt://{file}?saltenv={env}"),
                        ));
                    }
                }
            }
        }
        Ok(found)
    })
    .await
    .map_err(|e| FnError::Exception(e.to_string()))?
    .map_err(FnError::Execution)
}

/// A sync that found custom modules fails naming them: Brine does not run Python modules.
fn refuse_custom(found: &[(String, String)]) -> Result<(), FnError> {
    if found.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = found
        .iter()
        .map(|(name, path)| format!("{name} ({path})"))
        .collect();
    Err(FnError::Execution(format!(
        "Brine does not run Python modules, so these custom modules were not synced: {}",
        names.join(", ")
    )))
}

/// The running jobs, without the job asking (Salt skips its own proc entry too).
fn running(ctx: &Context) -> Vec<Value> {
    let own = ctx.jid();
    ctx.running
        .list()
        .into_iter()
        .filter(|job| own.is_none() || get(job, "jid").and_then(Value::as_str) != own)
        .collect()
}

const REFRESH_PILLAR_DOC: &str = "
    Fetch this minion's pillar from the master again. Brine waits for the new
    pillar whatever `wait` says, and returns True once it is in, False when
    the master did not send it.

    CLI Example:

        salt '*' saltutil.refresh_pillar
    ";

/// `saltutil.clear_cache`: every file under `dir` removed, links not followed, the outbox's
/// returns kept (they are not a cache: the master has not taken them yet).
fn clear_cache(dir: &std::path::Path) -> bool {
    fn walk(dir: &std::path::Path, top: bool) -> Result<(), std::io::Error> {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            // Salt's walk skips what it cannot list.
            Err(_) => return Ok(()),
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                if !(top && entry.file_name() == "outbox") {
                    walk(&path, false)?;
                }
            } else {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }
    match walk(dir, true) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!("Attempt to clear cache with saltutil.clear_cache FAILED with: {e}");
            false
        }
    }
}

/// `saltutil.clear_job_cache`: the directories under `dir` (at any depth) last changed more
/// than `hours` ago removed.
fn clear_job_cache(dir: &std::path::Path, hours: f64) -> bool {
    let threshold = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
        - hours * 3600.0;
    fn walk(dir: &std::path::Path, threshold: f64) -> Result<(), std::io::Error> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let path = entry.path();
            let mtime = std::fs::metadata(&path)?
                .modified()?
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            if mtime < threshold {
                std::fs::remove_dir_all(&path)?;
            } else {
                walk(&path, threshold)?;
            }
        }
        Ok(())
    }
    match walk(dir, threshold) {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(
                "Attempt to clear cache with saltutil.clear_job_cache FAILED with: {e}"
            );
            false
        }
    }
}

fn signal_job(ctx: &Context, jid: &str, sig: i64) -> String {
    let Some(job) = running(ctx)
        .into_iter()
        .find(|job| get(job, "jid").map(py_str).as_deref() == Some(jid))
    else {
        return String::new();
    };
    let pid = get(&job, "pid").map(py_str).unwrap_or_default();
    if ctx.running.kill(jid) {
        format!("Signal {sig} sent to job {jid} at pid {pid}")
    } else {
        format!("Job {jid} cannot be signalled: it has no abort handle")
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{call, RunningJob};
    use super::*;

    const SLEEP_JID: &str = "20261122101920403461";

    fn with_sleep_job(ctx: &Context) -> tokio::task::JoinHandle<()> {
        let task = tokio::spawn(std::future::pending::<()>());
        ctx.running.insert(
            SLEEP_JID,
            RunningJob {
                load: publish_load("test.sleep", vec![Value::from(8)], SLEEP_JID),
                abort: Some(task.abort_handle()),
            },
        );
        task
    }

    #[tokio::test]
    async fn running_and_find_job() {
        let c = ctx_with_load(publish_load(
            "saltutil.running",
            vec![],
            "20261122101921000000",
        ));
        // The asking job is registered too, but does not list itself.
        c.running.insert(
            "20261122101921000000",
            RunningJob {
                load: c.pub_load.clone(),
                abort: None,
            },
        );
        let _task = with_sleep_job(&c);
        let r = call(&c, "saltutil.running", &[]).await;
        let list = r.ret.as_array().unwrap();
        assert_eq!(list.len(), 1);
        let entry = list[0].as_map().unwrap();
        let keys: Vec<&str> = entry.iter().map(|(k, _)| k.as_str().unwrap()).collect();
        assert_eq!(
            keys,
            ["pid", "fun", "arg", "tgt", "jid", "ret", "tgt_type", "user"]
        );
        assert_eq!(get(&list[0], "pid"), Some(&Value::from(std::process::id())));
        let r = call(&c, "saltutil.find_job", &[s(SLEEP_JID)]).await;
        assert_eq!(r.ret, list[0]);
        let r = call(&c, "saltutil.find_job", &[s("20000101000000000000")]).await;
        assert_eq!(r.ret, Value::Map(vec![]));
        let r = call(&c, "saltutil.is_running", &[s("test.*")]).await;
        assert_eq!(r.ret.as_array().unwrap().len(), 1);
        let r = call(&c, "saltutil.is_running", &[s("cmd.*")]).await;
        assert_eq!(r.ret, Value::Array(vec![]));
    }

    #[tokio::test]
    async fn kill_job_aborts_the_task() {
        let c = ctx();
        let task = with_sleep_job(&c);
        let r = call(&c, "saltutil.kill_job", &[s(SLEEP_JID)]).await;
        assert_eq!(
            r.ret,
            s(&format!(
                "Signal 9 sent to job {SLEEP_JID} at pid {}",
                std::process::id()
            ))
        );
        assert!(task.await.unwrap_err().is_cancelled());
        assert_eq!(
            call(&c, "saltutil.running", &[]).await.ret,
            Value::Array(vec![])
        );
        assert_eq!(
            call(&c, "saltutil.kill_job", &[s(SLEEP_JID)]).await.ret,
            s("")
        );
        let task = with_sleep_job(&c);
        let r = call(&c, "saltutil.signal_job", &[s(SLEEP_JID), Value::from(15)]).await;
        assert!(r.ret.as_str().unwrap().starts_with("Signal 15 sent to job"));
        assert!(task.await.unwrap_err().is_cancelled());
    }

    #[tokio::test]
    async fn all_jobs_but_this_one_are_signalled() {
        let c = ctx_with_load(publish_load(
            "saltutil.kill_all_jobs",
            vec![],
            "20261122101921000000",
        ));
        c.running.insert(
            "20261122101921000000",
            RunningJob {
                load: c.pub_load.clone(),
                abort: None,
            },
        );
        for (fun, sig) in [
            ("saltutil.kill_all_jobs", 9),
            ("saltutil.term_all_jobs", 15),
        ] {
            let task = with_sleep_job(&c);
            let r = call(&c, fun, &[]).await;
            assert_eq!(
                r.ret,
                Value::Array(vec![s(&format!(
                    "Signal {sig} sent to job {SLEEP_JID} at pid {}",
                    std::process::id()
                ))])
            );
            assert!(task.await.unwrap_err().is_cancelled());
            assert_eq!(call(&c, fun, &[]).await.ret, Value::Array(vec![]));
        }
    }

    fn with_cachedir(dir: &std::path::Path) -> Context {
        let mut services = super::super::Services::detached();
        services.cachedir = dir.to_path_buf();
        Context {
            services: std::sync::Arc::new(services),
            ..ctx()
        }
    }

    #[tokio::test]
    async fn clear_cache_removes_every_file_but_the_outbox() {
        let d = tempfile::tempdir().unwrap();
        let w = |rel: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"x").unwrap();
        };
        for rel in [
            "files/base/top.sls",
            "files/base/a/b.txt",
            "proc/2026",
            "minion_jobs/j1/return.p",
            "outbox/000-ret",
        ] {
            w(rel);
        }
        let c = with_cachedir(d.path());
        assert_eq!(
            call(&c, "saltutil.clear_cache", &[]).await.ret,
            Value::Boolean(true)
        );
        for gone in [
            "files/base/top.sls",
            "files/base/a/b.txt",
            "proc/2026",
            "minion_jobs/j1/return.p",
        ] {
            assert!(!d.path().join(gone).exists(), "{gone}");
        }
        // Salt removes files, not directories.
        assert!(d.path().join("files/base/a").is_dir());
        assert!(d.path().join("outbox/000-ret").is_file());
    }

    #[tokio::test]
    async fn clear_job_cache_removes_job_directories_older_than_hours() {
        let d = tempfile::tempdir().unwrap();
        for job in ["old", "new", "new/old_inside"] {
            std::fs::create_dir_all(d.path().join("minion_jobs").join(job)).unwrap();
        }
        let two_days_ago = nix::sys::time::TimeVal::new(
            (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                - 2 * 86400) as i64,
            0,
        );
        for job in ["old", "new/old_inside"] {
            nix::sys::stat::utimes(
                &d.path().join("minion_jobs").join(job),
                &two_days_ago,
                &two_days_ago,
            )
            .unwrap();
        }
        let c = with_cachedir(d.path());
        assert_eq!(
            call(&c, "saltutil.clear_job_cache", &[]).await.ret,
            Value::Boolean(true)
        );
        assert!(!d.path().join("minion_jobs/old").exists());
        assert!(!d.path().join("minion_jobs/new/old_inside").exists());
        assert!(d.path().join("minion_jobs/new").is_dir());
        let r = call(&c, "saltutil.clear_job_cache", &[s("hours=0")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        assert!(!d.path().join("minion_jobs/new").exists());
    }
}
