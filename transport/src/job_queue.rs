//! The bounded queues between the request server's router thread and its workers.
//!
//! A mutex and a condition variable: an idle worker sleeps in the kernel until a job comes
//! (no spinning or yielding first, which at a few hundred requests a second cost more CPU
//! than the requests themselves), and each job wakes exactly one worker.
//!
//! Two lanes, each bounded on its own: sign-ins ([`Lane::SignIn`], costly and open to anyone
//! who can reach the port) and everything else ([`Lane::Main`]: the requests of minions that
//! have signed in, and local clients). A worker always takes a main job first, and at most
//! `sign_in_workers` workers handle sign-ins at once, so a flood of sign-ins fills its own lane
//! and leaves the rest of the pool to the minions already in.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Which queue a request waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    Main,
    SignIn,
}

pub(crate) struct JobQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    main_cap: usize,
    sign_in_cap: usize,
    sign_in_workers: usize,
}

struct State<T> {
    main: VecDeque<T>,
    sign_in: VecDeque<T>,
    /// Sign-ins taken by workers and not yet [`JobQueue::done`].
    signing_in: usize,
    closed: bool,
}

impl<T> State<T> {
    fn takeable(&self, sign_in_workers: usize) -> bool {
        !self.main.is_empty() || (!self.sign_in.is_empty() && self.signing_in < sign_in_workers)
    }
}

/// Why [`JobQueue::push`] did not take a job.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PushError {
    Full,
    Closed,
}

/// What [`JobQueue::pop`] gives when it has no job.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PopError {
    Timeout,
    /// Closed and drained: no job will come.
    Closed,
}

impl<T> JobQueue<T> {
    /// Queues of `main_cap` and `sign_in_cap` jobs; sign-ins are handled by at most
    /// `sign_in_workers` workers at once.
    pub(crate) fn new(main_cap: usize, sign_in_cap: usize, sign_in_workers: usize) -> JobQueue<T> {
        JobQueue {
            state: Mutex::new(State {
                main: VecDeque::new(),
                sign_in: VecDeque::new(),
                signing_in: 0,
                closed: false,
            }),
            ready: Condvar::new(),
            main_cap: main_cap.max(1),
            sign_in_cap: sign_in_cap.max(1),
            sign_in_workers: sign_in_workers.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue a job in `lane` unless that lane is full or the queue is closed.
    pub(crate) fn push(&self, job: T, lane: Lane) -> Result<(), PushError> {
        let mut st = self.lock();
        if st.closed {
            return Err(PushError::Closed);
        }
        let (jobs, cap) = match lane {
            Lane::Main => (&mut st.main, self.main_cap),
            Lane::SignIn => (&mut st.sign_in, self.sign_in_cap),
        };
        if jobs.len() >= cap {
            return Err(PushError::Full);
        }
        jobs.push_back(job);
        drop(st);
        self.ready.notify_one();
        Ok(())
    }

    /// The next job and its lane, waiting at most `timeout` for one. A sign-in must be given
    /// back with [`JobQueue::done`] once handled.
    pub(crate) fn pop(&self, timeout: Duration) -> Result<(T, Lane), PopError> {
        let st = self.lock();
        let (mut st, _) = self
            .ready
            .wait_timeout_while(st, timeout, |s| {
                !s.takeable(self.sign_in_workers) && !s.closed
            })
            .unwrap_or_else(|e| e.into_inner());
        if let Some(job) = st.main.pop_front() {
            return Ok((job, Lane::Main));
        }
        if st.signing_in < self.sign_in_workers || st.closed {
            if let Some(job) = st.sign_in.pop_front() {
                st.signing_in += 1;
                return Ok((job, Lane::SignIn));
            }
        }
        if st.closed && st.sign_in.is_empty() {
            Err(PopError::Closed)
        } else {
            Err(PopError::Timeout)
        }
    }

    /// A job of `lane` taken by [`JobQueue::pop`] is handled.
    pub(crate) fn done(&self, lane: Lane) {
        if lane == Lane::SignIn {
            let mut st = self.lock();
            st.signing_in = st.signing_in.saturating_sub(1);
            let more = !st.sign_in.is_empty();
            drop(st);
            if more {
                self.ready.notify_one();
            }
        }
    }

    /// No more jobs: the workers drain what is queued, then see [`PopError::Closed`].
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn bounded_fifo_that_drains_after_close() {
        let q = JobQueue::new(2, 2, 1);
        assert_eq!(q.push(1, Lane::Main), Ok(()));
        assert_eq!(q.push(2, Lane::Main), Ok(()));
        assert_eq!(q.push(3, Lane::Main), Err(PushError::Full));
        assert_eq!(q.pop(Duration::ZERO), Ok((1, Lane::Main)));
        assert_eq!(q.push(3, Lane::Main), Ok(()));
        q.close();
        assert_eq!(q.push(4, Lane::Main), Err(PushError::Closed));
        assert_eq!(q.pop(Duration::ZERO), Ok((2, Lane::Main)));
        assert_eq!(q.pop(Duration::ZERO), Ok((3, Lane::Main)));
        assert_eq!(q.pop(Duration::ZERO), Err(PopError::Closed));
    }

    #[test]
    fn an_idle_pop_times_out_and_a_push_wakes_a_waiting_one() {
        let q = Arc::new(JobQueue::new(4, 4, 1));
        assert_eq!(
            q.pop(Duration::from_millis(10)),
            Err::<(u32, Lane), _>(PopError::Timeout)
        );
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || q2.pop(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(50));
        q.push(7, Lane::Main).unwrap();
        assert_eq!(waiter.join().unwrap(), Ok((7, Lane::Main)));
    }

    #[test]
    fn sign_ins_fill_their_own_lane_and_never_hold_every_worker() {
        // Three workers, two of them at most on sign-ins.
        let q = JobQueue::new(2, 3, 2);
        for n in 0..3 {
            q.push(100 + n, Lane::SignIn).unwrap();
        }
        // A full sign-in lane refuses sign-ins only.
        assert_eq!(q.push(103, Lane::SignIn), Err(PushError::Full));
        q.push(1, Lane::Main).unwrap();
        // Main jobs go first, whatever came before them.
        assert_eq!(q.pop(Duration::ZERO), Ok((1, Lane::Main)));
        assert_eq!(q.pop(Duration::ZERO), Ok((100, Lane::SignIn)));
        assert_eq!(q.pop(Duration::ZERO), Ok((101, Lane::SignIn)));
        // Two sign-ins are being handled: the third waits, and the third worker stays free
        // for the next main job.
        assert_eq!(q.pop(Duration::ZERO), Err(PopError::Timeout));
        q.push(2, Lane::Main).unwrap();
        assert_eq!(q.pop(Duration::ZERO), Ok((2, Lane::Main)));
        q.done(Lane::Main);
        assert_eq!(q.pop(Duration::ZERO), Err(PopError::Timeout));
        q.done(Lane::SignIn);
        assert_eq!(q.pop(Duration::ZERO), Ok((102, Lane::SignIn)));
    }

    #[test]
    fn a_finished_sign_in_wakes_a_worker_for_the_next() {
        let q = Arc::new(JobQueue::new(4, 4, 1));
        q.push(1, Lane::SignIn).unwrap();
        q.push(2, Lane::SignIn).unwrap();
        assert_eq!(q.pop(Duration::ZERO), Ok((1, Lane::SignIn)));
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || q2.pop(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(50));
        q.done(Lane::SignIn);
        assert_eq!(waiter.join().unwrap(), Ok((2, Lane::SignIn)));
    }

    #[test]
    fn sign_ins_drain_after_close() {
        let q = JobQueue::new(4, 4, 1);
        q.push(1, Lane::SignIn).unwrap();
        q.push(2, Lane::SignIn).unwrap();
        assert_eq!(q.pop(Duration::ZERO), Ok((1, Lane::SignIn)));
        q.close();
        assert_eq!(q.pop(Duration::ZERO), Ok((2, Lane::SignIn)));
        assert_eq!(q.pop(Duration::ZERO), Err(PopError::Closed));
    }
}
