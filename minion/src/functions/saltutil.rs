//! The `saltutil` execution module, the job-control part: `running`, `find_job`,
//! `is_running`, `kill_job`, `term_job`, `signal_job`.
//!
//! Jobs run as tasks inside the minion, so every entry carries the minion's own pid and
//! "signalling" a job aborts its task (which kills any command it started).

use rmpv::Value;

use super::{CallState};
use super::args::{py_int, py_str, Bound, Signature};
use super::sys::fnmatch;
use super::{Context, FnError, Spec};
use brine_protocol::payload::get;

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
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::FindJob,
        Fun::IsRunning,
        Fun::KillJob,
        Fun::Running,
        Fun::SignalJob,
        Fun::TermJob,
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
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(self, ctx: &Context, b: &Bound, _st: &mut CallState) -> Result<Value, FnError> {
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
            Fun::TermJob => Value::from(signal_job(ctx, &jid(), SIGTERM)),
            Fun::SignalJob => {
                let sig = py_int(b.get("sig").unwrap_or(&Value::Nil))
                    .map_err(|e| FnError::Exception(format!("ValueError: {e}")))?;
                Value::from(signal_job(ctx, &jid(), sig))
            }
        })
    }
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
}
