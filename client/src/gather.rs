//! The one timeout policy for gathering a job's returns, free of I/O.
//!
//! Salt's rule: wait `timeout` for the expected minions; then ask the ones still missing with
//! `saltutil.find_job` and wait up to `gather_job_timeout` for their answers; if any of them is
//! still running the job, wait another `timeout` and ask again; otherwise stop. Brine adds a
//! hard stop, so that a minion that claims forever to be running cannot hold a caller forever.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The waits of one gather.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Salt's `timeout`: how long to wait before asking the missing minions.
    pub timeout: Duration,
    /// Salt's `gather_job_timeout`: how long to wait for their `find_job` answers.
    pub gather_job_timeout: Duration,
    /// Never wait longer than this in all (Brine's `brine_gather_hard_stop`).
    pub hard_stop: Duration,
}

impl Timeouts {
    /// From seconds, each at least one (a zero wait would stop before anything could return).
    pub fn from_secs(timeout: u64, gather_job_timeout: u64, hard_stop: u64) -> Timeouts {
        let secs = |s: u64| Duration::from_secs(s.max(1));
        Timeouts {
            timeout: secs(timeout),
            gather_job_timeout: secs(gather_job_timeout),
            hard_stop: secs(hard_stop),
        }
    }
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Wait for a bus event until this instant, then step again.
    Wait(Instant),
    /// Publish `saltutil.find_job` to these minions, then call
    /// [`Gather::find_job_published`].
    FindJob(Vec<String>),
    /// Stop: every minion returned, or the missing ones are not running the job.
    Done,
}

#[derive(Debug)]
struct FindJob {
    jid: String,
    ret_prefix: String,
    until: Instant,
    waiting: BTreeSet<String>,
    running: bool,
}

/// The state of gathering one job's returns.
#[derive(Debug)]
pub struct Gather {
    jid: String,
    ret_prefix: String,
    expected: BTreeSet<String>,
    returned: BTreeSet<String>,
    timeouts: Timeouts,
    deadline: Instant,
    hard_stop: Instant,
    find_job: Option<FindJob>,
    finished: bool,
}

impl Gather {
    pub fn new(jid: &str, minions: &[String], timeouts: Timeouts, now: Instant) -> Gather {
        Gather {
            jid: jid.to_string(),
            ret_prefix: format!("salt/job/{jid}/ret/"),
            expected: minions.iter().cloned().collect(),
            returned: BTreeSet::new(),
            timeouts,
            deadline: now + timeouts.timeout,
            hard_stop: now + timeouts.hard_stop,
            find_job: None,
            finished: false,
        }
    }

    pub fn jid(&self) -> &str {
        &self.jid
    }

    pub fn step(&mut self, now: Instant) -> Step {
        if self.finished || self.returned.len() >= self.expected.len() || now >= self.hard_stop {
            self.finished = true;
            return Step::Done;
        }
        if let Some(fj) = &self.find_job {
            if fj.waiting.is_empty() || now >= fj.until {
                if !fj.running {
                    self.finished = true;
                    return Step::Done;
                }
                // Still at it: give them another `timeout`, then ask again.
                self.find_job = None;
                self.deadline = now + self.timeouts.timeout;
            } else {
                return Step::Wait(fj.until.min(self.hard_stop));
            }
        }
        if now >= self.deadline {
            return Step::FindJob(self.missing());
        }
        Step::Wait(self.deadline.min(self.hard_stop))
    }

    /// The `find_job` publish went out as `jid` (`None`: it could not be published, so stop).
    pub fn find_job_published(&mut self, jid: Option<String>, now: Instant) {
        match jid {
            Some(jid) => {
                self.find_job = Some(FindJob {
                    ret_prefix: format!("salt/job/{jid}/ret/"),
                    jid,
                    until: now + self.timeouts.gather_job_timeout,
                    waiting: self.missing().into_iter().collect(),
                    running: false,
                })
            }
            None => self.finished = true,
        }
    }

    /// The bus is gone: nothing more will arrive.
    pub fn bus_closed(&mut self) {
        self.finished = true;
    }

    /// Feed one bus event; the minion id when it is an expected minion's first return.
    pub fn on_event(&mut self, tag: &str, reports_running: bool) -> Option<String> {
        if let Some(id) = tag.strip_prefix(&self.ret_prefix) {
            if self.expected.contains(id) && self.returned.insert(id.to_string()) {
                return Some(id.to_string());
            }
            return None;
        }
        if let Some(fj) = &mut self.find_job {
            if let Some(id) = tag.strip_prefix(&fj.ret_prefix) {
                fj.waiting.remove(id);
                fj.running |= reports_running;
            }
        }
        None
    }

    /// The find_job round in flight, if any (its jid).
    pub fn find_job_jid(&self) -> Option<&str> {
        self.find_job.as_ref().map(|f| f.jid.as_str())
    }

    /// Expected minions that have not returned, sorted.
    pub fn missing(&self) -> Vec<String> {
        self.expected.difference(&self.returned).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn t() -> Timeouts {
        Timeouts {
            timeout: 5 * S,
            gather_job_timeout: 10 * S,
            hard_stop: 100 * S,
        }
    }

    fn ids(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn all_return_in_time() {
        let t0 = Instant::now();
        let mut g = Gather::new("1", &ids(&["a", "b"]), t(), t0);
        assert_eq!(g.step(t0), Step::Wait(t0 + 5 * S));
        assert_eq!(g.on_event("salt/job/1/ret/a", false), Some("a".into()));
        assert_eq!(
            g.on_event("salt/job/1/ret/a", false),
            None,
            "duplicates are dropped"
        );
        assert_eq!(
            g.on_event("salt/job/1/ret/zz", false),
            None,
            "unexpected minions too"
        );
        assert_eq!(
            g.on_event("salt/job/12/ret/b", false),
            None,
            "another job's return"
        );
        assert_eq!(g.on_event("salt/job/1/ret/b", false), Some("b".into()));
        assert_eq!(g.step(t0 + S), Step::Done);
    }

    #[test]
    fn slow_minions_are_asked_and_waited_for_while_running() {
        let t0 = Instant::now();
        let mut g = Gather::new("1", &ids(&["a", "b"]), t(), t0);
        g.on_event("salt/job/1/ret/a", false);
        assert_eq!(g.step(t0 + 5 * S), Step::FindJob(ids(&["b"])));
        g.find_job_published(Some("2".into()), t0 + 5 * S);
        assert_eq!(g.find_job_jid(), Some("2"));
        assert_eq!(g.step(t0 + 6 * S), Step::Wait(t0 + 15 * S));
        // b answers that it is running: another `timeout`, then another round.
        g.on_event("salt/job/2/ret/b", true);
        assert_eq!(g.step(t0 + 7 * S), Step::Wait(t0 + 12 * S));
        assert_eq!(g.step(t0 + 12 * S), Step::FindJob(ids(&["b"])));
        g.find_job_published(Some("3".into()), t0 + 12 * S);
        // This time b says nothing is running: done, b is missing.
        g.on_event("salt/job/3/ret/b", false);
        assert_eq!(g.step(t0 + 13 * S), Step::Done);
        assert_eq!(g.missing(), ids(&["b"]));
    }

    #[test]
    fn silence_after_find_job_ends_the_wait() {
        let t0 = Instant::now();
        let mut g = Gather::new("1", &ids(&["a"]), t(), t0);
        assert_eq!(g.step(t0 + 5 * S), Step::FindJob(ids(&["a"])));
        g.find_job_published(Some("2".into()), t0 + 5 * S);
        assert_eq!(g.step(t0 + 15 * S), Step::Done);
    }

    #[test]
    fn the_hard_stop_holds_whatever_minions_claim() {
        let t0 = Instant::now();
        let mut g = Gather::new("1", &ids(&["a"]), t(), t0);
        let mut now = t0;
        let mut rounds = 0;
        loop {
            match g.step(now) {
                Step::Done => break,
                Step::FindJob(_) => {
                    rounds += 1;
                    g.find_job_published(Some(format!("f{rounds}")), now);
                    g.on_event(&format!("salt/job/f{rounds}/ret/a"), true);
                }
                Step::Wait(until) => {
                    assert!(until <= t0 + 100 * S);
                    now = until;
                }
            }
        }
        assert!(now <= t0 + 100 * S && rounds >= 10, "{rounds} rounds");
    }

    #[test]
    fn a_failed_find_job_publish_stops() {
        let t0 = Instant::now();
        let mut g = Gather::new("1", &ids(&["a"]), t(), t0);
        assert!(matches!(g.step(t0 + 5 * S), Step::FindJob(_)));
        g.find_job_published(None, t0 + 5 * S);
        assert_eq!(g.step(t0 + 5 * S), Step::Done);
    }
}
