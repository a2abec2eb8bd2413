//! Jobs that lost a minion's return: a job is stored with the minions it targets, but a minion
//! may never see it (it was not connected when the job was published, or the master stopped
//! between storing the job and sending it), and then no return ever comes, where Salt's job
//! cache stays silent for good. Every `brine_lost_job_check` seconds the master looks for
//! targeted minions without a return in jobs at least that old (and younger than
//! `keep_jobs_seconds`), asks those minions what they run (`saltutil.running`, one publish),
//! and records a failed return for each job a minion answered it is not running. Minions that
//! do not answer are asked again next time. A recorded failure is marked
//! (`brine_no_return: true`), so that a real return arriving later (from a minion's outbox)
//! replaces it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use brine_protocol::jid::jid_ago;
use brine_protocol::loads::{Fun, PublishRequest, Tgt};
use brine_protocol::payload::{get, map, Value};

use crate::jobstore::Missing;
use crate::master::Master;

/// What a recorded failure says.
pub const NO_RETURN: &str = "The minion answered that it is not running this job and never \
returned it: it did not receive the job (it was not connected when the job was published, or \
the master stopped before sending it)";

/// The pairs (job, minion) checked in one round at most.
const MAX_PAIRS: usize = 10_000;

/// Check every `brine_lost_job_check` seconds, for as long as the master runs.
pub async fn watch(master: Arc<Master>) {
    let every = Duration::from_secs(master.cfg.lost_job_check);
    loop {
        tokio::time::sleep(every).await;
        match check(&master).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!("{n} lost returns recorded as failures"),
            Err(e) => tracing::error!("lost job check: {e}"),
        }
    }
}

/// One round: the number of failures recorded.
pub async fn check(master: &Arc<Master>) -> Result<usize, String> {
    let after = Duration::from_secs(master.cfg.lost_job_check);
    let window = match master.cfg.keep_jobs_seconds {
        0 => Duration::from_secs(86_400),
        keep => Duration::from_secs(keep),
    };
    let (from, to) = (jid_ago(window), jid_ago(after));
    let store = master.store.clone();
    let missing = tokio::task::spawn_blocking(move || store.missing_returns(&from, &to, MAX_PAIRS))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if missing.is_empty() {
        return Ok(0);
    }
    let minions: BTreeSet<String> = missing.iter().map(|m| m.minion.clone()).collect();
    let req = PublishRequest::new(
        Tgt::List(minions.into_iter().collect()),
        Fun::One("saltutil.running".into()),
        vec![],
        "list",
    );
    let asked = master
        .local_cmd(
            req,
            Duration::from_secs(master.cfg.gather_job_timeout.max(1)),
        )
        .await;
    let running: BTreeMap<String, BTreeSet<String>> = asked
        .returns
        .iter()
        .filter_map(|(id, data)| Some((id.clone(), running_jids(get(data, "return")?)?)))
        .collect();
    let mut recorded = 0;
    for lost in missing {
        let Some(jobs) = running.get(&lost.minion) else {
            continue;
        };
        if jobs.contains(&lost.jid) {
            continue;
        }
        if record(master, lost).await? {
            recorded += 1;
        }
    }
    Ok(recorded)
}

/// The jids of a `saltutil.running` return (a list of job maps); `None` for anything else (a
/// minion that failed to answer properly tells us nothing).
fn running_jids(ret: &Value) -> Option<BTreeSet<String>> {
    let Value::Array(jobs) = ret else {
        return None;
    };
    Some(
        jobs.iter()
            .filter_map(|job| get(job, "jid")?.as_str().map(str::to_string))
            .collect(),
    )
}

/// Store the failure (unless a return came meanwhile) and announce it as a return.
async fn record(master: &Arc<Master>, lost: Missing) -> Result<bool, String> {
    let data = map(vec![
        ("id", Value::from(lost.minion.clone())),
        ("jid", Value::from(lost.jid.clone())),
        ("fun", lost.fun),
        ("fun_args", lost.arg),
        ("return", Value::from(NO_RETURN)),
        ("retcode", Value::from(1)),
        ("success", Value::from(false)),
        ("brine_no_return", Value::from(true)),
    ]);
    let store = master.store.clone();
    let stored = data.clone();
    let fresh = tokio::task::spawn_blocking(move || store.save_return(&stored))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if fresh {
        tracing::info!(
            "job {}: no return from {} (it is not running the job); recorded as failed",
            lost.jid,
            lost.minion
        );
        master
            .bus
            .fire(&format!("salt/job/{}/ret/{}", lost.jid, lost.minion), data);
    }
    Ok(fresh)
}
