//! The bounded queue between the request server's router thread and its workers.
//!
//! A mutex and a condition variable: an idle worker sleeps in the kernel until a job comes
//! (no spinning or yielding first, which at a few hundred requests a second cost more CPU
//! than the requests themselves), and each job wakes exactly one worker.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

pub(crate) struct JobQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    cap: usize,
}

struct State<T> {
    jobs: VecDeque<T>,
    closed: bool,
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
    pub(crate) fn new(cap: usize) -> JobQueue<T> {
        JobQueue {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
            cap: cap.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue a job unless the queue is full or closed.
    pub(crate) fn push(&self, job: T) -> Result<(), PushError> {
        let mut st = self.lock();
        if st.closed {
            return Err(PushError::Closed);
        }
        if st.jobs.len() >= self.cap {
            return Err(PushError::Full);
        }
        st.jobs.push_back(job);
        drop(st);
        self.ready.notify_one();
        Ok(())
    }

    /// The next job, waiting at most `timeout` for one.
    pub(crate) fn pop(&self, timeout: Duration) -> Result<T, PopError> {
        let st = self.lock();
        let (mut st, _) = self
            .ready
            .wait_timeout_while(st, timeout, |s| s.jobs.is_empty() && !s.closed)
            .unwrap_or_else(|e| e.into_inner());
        match st.jobs.pop_front() {
            Some(job) => Ok(job),
            None if st.closed => Err(PopError::Closed),
            None => Err(PopError::Timeout),
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
        let q = JobQueue::new(2);
        assert_eq!(q.push(1), Ok(()));
        assert_eq!(q.push(2), Ok(()));
        assert_eq!(q.push(3), Err(PushError::Full));
        assert_eq!(q.pop(Duration::ZERO), Ok(1));
        assert_eq!(q.push(3), Ok(()));
        q.close();
        assert_eq!(q.push(4), Err(PushError::Closed));
        assert_eq!(q.pop(Duration::ZERO), Ok(2));
        assert_eq!(q.pop(Duration::ZERO), Ok(3));
        assert_eq!(q.pop(Duration::ZERO), Err(PopError::Closed));
    }

    #[test]
    fn an_idle_pop_times_out_and_a_push_wakes_a_waiting_one() {
        let q = Arc::new(JobQueue::new(4));
        assert_eq!(
            q.pop(Duration::from_millis(10)),
            Err::<u32, _>(PopError::Timeout)
        );
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || q2.pop(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(50));
        q.push(7).unwrap();
        assert_eq!(waiter.join().unwrap(), Ok(7));
    }
}
