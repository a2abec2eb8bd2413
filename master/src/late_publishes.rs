//! Jobs a minion missed because it was still starting: published while it had not signed in
//! to this master yet, they are sent again to that minion alone when its start event shows it
//! has subscribed, as long as the job's timeout (`to`) has not run out. A restarted stack then
//! answers its first job at once instead of after the job's timeout.
//!
//! A job is kept for the minions that had not signed in to this master process when it was
//! published, or had signed in once and not fired their start event yet (they may not have
//! subscribed). A minion gets it again only if its start event follows its first and only
//! sign-in to this master process: the AES key is new at every start, so only the process
//! that signed in can have read the job, and that is the process that started (a minion that
//! read the job, signed in to decrypt it and then restarted has signed in twice). That process
//! drops a job it already has (the same jid), in Salt's minion and in Brine's.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use brine_protocol::loads::{PublishLoad, Tgt};

/// Jobs remembered at most (the oldest go first).
const MAX_JOBS: usize = 10_000;

#[derive(Default)]
pub struct LatePublishes {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Sign-ins of each minion since this master started, and whether it fired its start
    /// event since the first.
    sign_ins: HashMap<String, (u32, bool)>,
    /// Jobs published lately to minions that had not signed in, oldest first.
    jobs: VecDeque<Late>,
}

struct Late {
    until: Instant,
    load: PublishLoad,
    /// Targeted minions that may have missed the job, not sent it again yet.
    absent: Vec<String>,
}

impl LatePublishes {
    /// Minion `id` signed in.
    pub fn signed_in(&self, id: &str) {
        let mut inner = self.lock();
        inner.sign_ins.entry(id.to_string()).or_default().0 += 1;
    }

    /// Job `load` was published to `minions`, for `timeout`.
    pub fn published(&self, load: &PublishLoad, minions: &[String], timeout: Duration) {
        let now = Instant::now();
        let mut inner = self.lock();
        inner.prune(now);
        let absent: Vec<String> = minions
            .iter()
            .filter(|m| matches!(inner.sign_ins.get(*m), None | Some((1, false))))
            .cloned()
            .collect();
        if absent.is_empty() {
            return;
        }
        if inner.jobs.len() == MAX_JOBS {
            inner.jobs.pop_front();
        }
        inner.jobs.push_back(Late {
            until: now + timeout,
            load: load.clone(),
            absent,
        });
    }

    /// Minion `id` fired its start event: the jobs to send it again, each targeted at it
    /// alone (none unless this is its first sign-in since this master started).
    pub fn started(&self, id: &str) -> Vec<PublishLoad> {
        let now = Instant::now();
        let mut inner = self.lock();
        inner.prune(now);
        let first_sign_in = match inner.sign_ins.get_mut(id) {
            Some((n, started)) => {
                *started = true;
                *n == 1
            }
            None => false,
        };
        let mut again = Vec::new();
        for late in &mut inner.jobs {
            let Some(at) = late.absent.iter().position(|m| m == id) else {
                continue;
            };
            late.absent.swap_remove(at);
            if first_sign_in {
                let mut load = late.load.clone();
                load.tgt = Tgt::List(vec![id.to_string()]);
                load.tgt_type = "list".into();
                again.push(load);
            }
        }
        again
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    fn prune(&mut self, now: Instant) {
        self.jobs
            .retain(|late| late.until > now && !late.absent.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::loads::{Fun, PublishRequest};

    fn job(jid: &str) -> PublishLoad {
        let req = PublishRequest::new(
            Tgt::Expr("*".into()),
            Fun::One("test.ping".into()),
            vec![],
            "glob",
        );
        PublishLoad::from_request(&req, jid)
    }

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn jids(loads: &[PublishLoad]) -> Vec<&str> {
        loads.iter().map(|l| l.jid.as_str()).collect()
    }

    #[test]
    fn a_minion_starting_after_a_job_gets_it_once_targeted_alone() {
        let late = LatePublishes::default();
        late.signed_in("up");
        assert!(late.started("up").is_empty());
        late.published(&job("1"), &ids(&["up", "m1", "m2"]), Duration::from_secs(5));
        late.signed_in("m1");
        let again = late.started("m1");
        assert_eq!(jids(&again), ["1"]);
        assert_eq!(again[0].tgt, Tgt::List(ids(&["m1"])));
        assert_eq!(again[0].tgt_type, "list");
        assert!(late.started("m1").is_empty(), "sent once");
        assert!(
            late.started("up").is_empty(),
            "was signed in: it had the job"
        );
    }

    #[test]
    fn a_minion_signed_in_but_not_started_yet_may_not_have_subscribed() {
        let late = LatePublishes::default();
        late.signed_in("m1");
        late.published(&job("1"), &ids(&["m1"]), Duration::from_secs(5));
        assert_eq!(jids(&late.started("m1")), ["1"]);
        // Started: it had subscribed before its start event, so it gets every later job.
        late.published(&job("2"), &ids(&["m1"]), Duration::from_secs(5));
        assert!(late.started("m1").is_empty());
    }

    #[test]
    fn never_to_a_minion_that_may_have_read_the_job() {
        let late = LatePublishes::default();
        late.published(&job("1"), &ids(&["m1"]), Duration::from_secs(5));
        // It read the job, signed in to decrypt it, then restarted and signed in again.
        late.signed_in("m1");
        late.signed_in("m1");
        assert!(late.started("m1").is_empty());
        // A start event without any sign-in is no reason either.
        late.published(&job("2"), &ids(&["m2"]), Duration::from_secs(5));
        assert!(late.started("m2").is_empty());
    }

    #[test]
    fn not_after_the_job_timed_out() {
        let late = LatePublishes::default();
        late.published(&job("1"), &ids(&["m1"]), Duration::ZERO);
        late.published(&job("2"), &ids(&["m1"]), Duration::from_secs(5));
        late.signed_in("m1");
        assert_eq!(jids(&late.started("m1")), ["2"]);
    }
}
