//! Salt's batch mode, once: ping the target, then keep at most `size` of the minions that
//! answered running the job, starting the next ones as returns come in (a sliding window,
//! with `batch_wait` seconds before a freed place is used again). `salt -b`, salt-api's
//! `local_batch` and orchestration's `batch` all run through [`LocalClient::batch`]; their
//! `subset` choice is [`choose_subset`].

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::time::Duration;

use brine_protocol::loads::{PublishRequest, Tgt};
use brine_protocol::payload::Value;
use tokio::time::Instant;

use crate::gather::{Gather, Step, Timeouts};
use crate::{find_job_request, ClientError, EventFeed, JobEvent, LocalClient, Publish};

/// How many minions run at once: a number, or a share of the minions that answered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchSize {
    Count(usize),
    Percent(f64),
}

impl BatchSize {
    /// Salt's forms: `3`, `10%` and `%10`. `None` for anything else, zero included (Salt
    /// would wait forever on a batch of nothing).
    pub fn parse(spec: &str) -> Option<BatchSize> {
        let s = spec.trim();
        if s.contains('%') {
            let pct: f64 = s.trim_matches('%').trim().parse().ok()?;
            return (pct.is_finite() && pct > 0.0).then_some(BatchSize::Percent(pct));
        }
        let n: usize = s.parse().ok()?;
        (n > 0).then_some(BatchSize::Count(n))
    }

    /// The number of minions kept running out of `total`: a share below one minion rounds
    /// up, any other share rounds down, as Salt's `get_bnum` does.
    pub fn of(self, total: usize) -> usize {
        match self {
            BatchSize::Count(n) => n,
            BatchSize::Percent(p) => {
                let share = p / 100.0 * total as f64;
                if share < 1.0 {
                    share.ceil() as usize
                } else {
                    share as usize
                }
            }
        }
    }
}

/// Salt's words for a batch size it cannot read.
pub fn invalid_batch_text(spec: &str) -> String {
    format!("Invalid batch data sent: {spec}\nData must be in the form of %10, 10% or 3")
}

/// A batch run's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Batch {
    pub size: BatchSize,
    /// Salt's `batch_wait`: how long a place stays empty after its minion returned.
    pub wait: Duration,
}

/// What a batch run reports, in order.
#[derive(Debug)]
pub enum BatchEvent<E> {
    /// Targeted minions that did not answer the ping: no job is sent to them.
    Down(Vec<String>),
    /// A job went out to these minions (sorted).
    Started { jid: String, minions: Vec<String> },
    /// A minion's return.
    Return { jid: String, id: String, event: E },
    /// A minion of a job that ended without its return.
    NoReturn { jid: String, id: String },
}

struct Running {
    gather: Gather,
    /// Minions of this job that have neither returned nor been given up.
    active: BTreeSet<String>,
}

impl<P: Publish> LocalClient<P> {
    /// Run `req` in batches over the minions of its target that answer `test.ping`, calling
    /// `on` with each step; `on` may stop the run (Salt's `failhard`). The minions the run
    /// used, sorted; none when nothing matched or answered.
    pub async fn batch<F: EventFeed>(
        &self,
        mut feed: F,
        req: &PublishRequest,
        batch: Batch,
        timeouts: Timeouts,
        mut on: impl FnMut(BatchEvent<F::Event>) -> ControlFlow<()>,
    ) -> Result<Vec<String>, ClientError> {
        let minions = self.ping(&mut feed, req, timeouts, &mut on).await?;
        let mut to_run: std::collections::VecDeque<String> = minions.iter().cloned().collect();
        let size = batch.size.of(minions.len()).max(1);
        let mut jobs: Vec<Running> = Vec::new();
        let mut waits: Vec<Instant> = Vec::new();
        loop {
            let now = Instant::now();
            waits.retain(|t| *t > now);
            let active: usize = jobs.iter().map(|j| j.active.len()).sum();
            let free = size.saturating_sub(active + waits.len());
            if free > 0 && !to_run.is_empty() {
                let n = free.min(to_run.len());
                let mut next: Vec<String> = to_run.drain(..n).collect();
                next.sort();
                let mut sub = req.clone();
                sub.tgt = Tgt::List(next.clone());
                sub.tgt_type = "list".into();
                sub.jid = String::new();
                let reply = self.publisher.publish(sub).await?;
                if on(BatchEvent::Started {
                    jid: reply.jid.clone(),
                    minions: next.clone(),
                })
                .is_break()
                {
                    return Ok(minions);
                }
                let gather = Gather::new(&reply.jid, &next, timeouts, now.into_std());
                jobs.push(Running {
                    gather,
                    active: next.into_iter().collect(),
                });
            }
            if jobs.is_empty() && to_run.is_empty() {
                return Ok(minions);
            }
            // Step every job; the earliest instant anything is due.
            let mut due: Option<Instant> = if to_run.is_empty() {
                None
            } else {
                waits.iter().min().copied()
            };
            let mut i = 0;
            while i < jobs.len() {
                match jobs[i].gather.step(Instant::now().into_std()) {
                    Step::Done => {
                        let job = jobs.remove(i);
                        let jid = job.gather.jid().to_string();
                        for id in job.active {
                            if !batch.wait.is_zero() {
                                waits.push(Instant::now() + batch.wait);
                            }
                            if on(BatchEvent::NoReturn {
                                jid: jid.clone(),
                                id,
                            })
                            .is_break()
                            {
                                return Ok(minions);
                            }
                        }
                        continue;
                    }
                    Step::FindJob(missing) => {
                        let jid = jobs[i].gather.jid().to_string();
                        let fjid = match self
                            .publisher
                            .publish(find_job_request(missing, &jid))
                            .await
                        {
                            Ok(reply) if !reply.minions.is_empty() => Some(reply.jid),
                            Ok(_) => None,
                            Err(e) => {
                                tracing::warn!("saltutil.find_job for {jid} not published: {e}");
                                None
                            }
                        };
                        jobs[i]
                            .gather
                            .find_job_published(fjid, Instant::now().into_std());
                        continue;
                    }
                    Step::Wait(until) => {
                        let until = Instant::from_std(until);
                        due = Some(due.map_or(until, |d| d.min(until)));
                    }
                }
                i += 1;
            }
            if jobs.is_empty() {
                // Only waits are left before the next minions start.
                if let Some(d) = due {
                    tokio::time::sleep_until(d).await;
                }
                continue;
            }
            let Some(due) = due else { continue };
            let ev = match tokio::time::timeout_at(due, feed.recv()).await {
                Ok(Some(ev)) => ev,
                Ok(None) => {
                    for job in &mut jobs {
                        job.gather.bus_closed();
                    }
                    continue;
                }
                Err(_) => continue,
            };
            let running = ev.reports_running();
            let mut hit = None;
            for job in &mut jobs {
                if let Some(id) = job.gather.on_event(ev.tag(), running) {
                    job.active.remove(&id);
                    hit = Some((job.gather.jid().to_string(), id));
                    break;
                }
            }
            if let Some((jid, id)) = hit {
                if !batch.wait.is_zero() {
                    waits.push(Instant::now() + batch.wait);
                }
                if on(BatchEvent::Return { jid, id, event: ev }).is_break() {
                    return Ok(minions);
                }
            }
        }
    }

    /// Salt's `gather_minions`: the targeted minions that answer `test.ping` (sorted); the
    /// others are reported as down.
    async fn ping<F: EventFeed>(
        &self,
        feed: &mut F,
        req: &PublishRequest,
        timeouts: Timeouts,
        on: &mut impl FnMut(BatchEvent<F::Event>) -> ControlFlow<()>,
    ) -> Result<Vec<String>, ClientError> {
        let reply = self.publisher.publish(req.probe("test.ping")).await?;
        if reply.minions.is_empty() {
            return Ok(Vec::new());
        }
        let mut up = BTreeSet::new();
        let mut returns = self.returns(&mut *feed, &reply, timeouts);
        while let Some((id, _)) = returns.next().await {
            up.insert(id);
        }
        let down: Vec<String> = reply
            .minions
            .iter()
            .filter(|m| !up.contains(*m))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !down.is_empty() {
            // Reporting the down minions never stops the run.
            let _ = on(BatchEvent::Down(down));
        }
        Ok(up.into_iter().collect())
    }
}

/// A return's `retcode` as Salt's batch reads it: the highest of a map of them (a job of
/// several functions), 0 for anything else. Above 0 is a bad return for `failhard`.
pub fn batch_retcode(v: &Value) -> i64 {
    match v {
        Value::Integer(i) => i.as_i64().unwrap_or(1),
        Value::Map(m) => m.iter().map(|(_, v)| batch_retcode(v)).max().unwrap_or(0),
        _ => 0,
    }
}

/// Salt's `cmd_subset` choice among the targeted minions that have the function: `n` of
/// them at random, at least one (Salt takes a minion before it compares the count).
pub fn choose_subset(mut having: Vec<String>, n: usize) -> Vec<String> {
    use rand::seq::SliceRandom;
    having.shuffle(&mut rand::thread_rng());
    having.truncate(n.max(1));
    having
}

#[cfg(test)]
mod tests;
