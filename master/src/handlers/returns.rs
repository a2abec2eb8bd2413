//! `_return`: a minion's result for a job (or for a scheduled job: jid `req` or `nocache`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use brine_protocol::jid::gen_jid;
use brine_protocol::loads::ReturnLoad;
use brine_protocol::payload::{get_str, remove, set, Value};
use crossbeam_channel::{Sender, TrySendError};

use crate::jobstore::{JobStore, Result, StoreError};
use crate::master::Master;

/// What to do once a return is committed (or failed to be: that is logged).
pub(crate) type Then = Box<dyn FnOnce() + Send>;

/// Returns waiting for the job store, each with what to do once it has them. One thread takes
/// every return waiting at once and stores them in one commit (shared with any other writer's,
/// see [`crate::jobstore::SqliteStore`]), so the master's request workers never wait on the
/// disk for a return: the minion's acknowledgement is sent from here, after the commit.
#[derive(Clone)]
pub struct ReturnWriter {
    tx: Sender<(Value, Then)>,
    store: Arc<dyn JobStore>,
    /// Returns not acknowledged because the store could not be reached, counted.
    unavailable: Arc<AtomicU64>,
}

/// Returns waiting at most; a worker finding this many stores its return itself, waiting for
/// the commit as it did before: minions that send faster than the disk takes are slowed down,
/// and memory stays bounded.
const WAITING_RETURNS: usize = 4096;

impl ReturnWriter {
    /// Start the writer on `store`, counting in `unavailable` the returns it could not reach.
    pub fn start(store: Arc<dyn JobStore>, unavailable: Arc<AtomicU64>) -> ReturnWriter {
        let (tx, rx) = crossbeam_channel::bounded::<(Value, Then)>(WAITING_RETURNS);
        let writer = store.clone();
        let count = unavailable.clone();
        let spawned = std::thread::Builder::new()
            .name("return-writer".into())
            .spawn(move || {
                // Ends when the master (the only sender) is gone.
                while let Ok(first) = rx.recv() {
                    let (rets, thens): (Vec<Value>, Vec<Then>) =
                        std::iter::once(first).chain(rx.try_iter()).unzip();
                    let outcomes = writer.save_returns(&rets);
                    for ((ret, then), outcome) in rets.iter().zip(thens).zip(outcomes) {
                        settle(ret, &outcome, then, &count);
                    }
                }
            });
        if let Err(e) = spawned {
            // Without the thread every return is stored on its worker (`save` below).
            tracing::error!(
                "return writer thread not started ({e}): returns are stored on the request workers"
            );
        }
        ReturnWriter {
            tx,
            store,
            unavailable,
        }
    }

    /// Store `ret`, then call `then` (not when the store could not be reached: see
    /// [`settle`]): on the writer's thread after its commit, or on this thread when the writer
    /// is behind by [`WAITING_RETURNS`].
    pub fn save(&self, ret: Value, then: Then) {
        match self.tx.try_send((ret, then)) {
            Ok(()) => {}
            Err(TrySendError::Full((ret, then)) | TrySendError::Disconnected((ret, then))) => {
                settle(&ret, &self.store.save_return(&ret), then, &self.unavailable);
            }
        }
    }
}

/// Logs what became of a return and acknowledges it, unless the store could not be reached:
/// then the minion gets no answer, and sends the return again (Brine's minion keeps it in its
/// outbox; Salt's retries `return_retry_tries` times), so that no acknowledged return is lost.
/// A return the store refuses (or one it already has) is acknowledged: sending it again would
/// not change that.
fn settle(ret: &Value, outcome: &Result<bool>, then: Then, unavailable: &AtomicU64) {
    let (jid, id) = (
        get_str(ret, "jid").unwrap_or_default(),
        get_str(ret, "id").unwrap_or_default(),
    );
    match outcome {
        Ok(true) => {}
        Ok(false) => tracing::info!("duplicate return of {id} for {jid} ignored"),
        Err(e @ StoreError::Unavailable(_)) => {
            unavailable.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                "return of {id} for {jid} not stored, not acknowledged (the minion sends it again): {e}"
            );
            return;
        }
        Err(e) => tracing::error!("return of {id} for {jid} not stored: {e}"),
    }
    then();
}

impl Master {
    /// Fire `salt/job/<jid>/ret/<id>`; the return to store, if it is to be stored (the caller
    /// acknowledges it once stored, with nothing: Salt answers nothing).
    pub(crate) fn on_return(&self, mut load: ReturnLoad) -> Option<Value> {
        if load.jid == "req" {
            // A minion's own job (salt-call, the scheduler): the master allocates its jid and
            // records the job as targeting that minion.
            load.jid = gen_jid();
            let mut saved = load.event_data();
            set(&mut saved, "arg", Value::Array(load.fun_args.clone()));
            set(&mut saved, "tgt_type", Value::from("glob"));
            set(&mut saved, "tgt", Value::from(load.id.clone()));
            remove(&mut saved, "return");
            if let Err(e) = self
                .store
                .save_load(&load.jid, &saved, std::slice::from_ref(&load.id))
            {
                tracing::error!("job {} not stored: {e}", load.jid);
            }
        }
        // A scheduled job with `return_job: nocache`: its return is announced, not stored.
        let nocache = load.jid == "nocache";
        if nocache {
            load.jid = gen_jid();
        }
        let (jid, id) = (&load.jid, &load.id);
        let data = load.event_data();
        self.bus
            .fire(&format!("salt/job/{jid}/ret/{id}"), data.clone());
        (self.cfg.job_cache && !nocache).then_some(data)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use brine_protocol::payload::{map, Value};

    use super::ReturnWriter;
    use crate::jobstore::{
        JobHead, JobStore, Missing, Result, SqliteStore, StoreError, StoredReturn,
    };

    /// How a failing store fails (`StoreError::Unavailable` or `StoreError::Shared`).
    type Failure = fn(String) -> StoreError;

    /// A store whose `save_returns` waits while the test holds `gate`, and counts its calls;
    /// `failing` makes it fail them.
    struct Gated {
        inner: SqliteStore,
        gate: Arc<Mutex<()>>,
        batches: Mutex<Vec<usize>>,
        failing: Mutex<Option<Failure>>,
    }

    impl JobStore for Gated {
        fn save_load(&self, jid: &str, load: &Value, minions: &[String]) -> Result<()> {
            self.inner.save_load(jid, load, minions)
        }
        fn get_load(&self, jid: &str) -> Result<Option<(Value, Vec<String>)>> {
            self.inner.get_load(jid)
        }
        fn save_return(&self, ret: &Value) -> Result<bool> {
            self.save_returns(std::slice::from_ref(ret)).remove(0)
        }
        fn save_returns(&self, rets: &[Value]) -> Vec<Result<bool>> {
            let _open = self.gate.lock().unwrap();
            self.batches.lock().unwrap().push(rets.len());
            if let Some(fail) = *self.failing.lock().unwrap() {
                return rets.iter().map(|_| Err(fail("down".into()))).collect();
            }
            self.inner.save_returns(rets)
        }
        fn missing_returns(&self, from: &str, to: &str, limit: usize) -> Result<Vec<Missing>> {
            self.inner.missing_returns(from, to, limit)
        }
        fn get_returns(&self, jid: &str) -> Result<Vec<StoredReturn>> {
            self.inner.get_returns(jid)
        }
        fn list_jobs(&self, limit: usize, skip: Option<&str>) -> Result<Vec<JobHead>> {
            self.inner.list_jobs(limit, skip)
        }
        fn clean_before(&self, cutoff_jid: &str) -> Result<usize> {
            self.inner.clean_before(cutoff_jid)
        }
        fn save_event(&self, tag: &str, data: &Value, master_id: &str) -> Result<()> {
            self.inner.save_event(tag, data, master_id)
        }
        fn recent_events(&self, limit: usize) -> Result<Vec<(String, Value)>> {
            self.inner.recent_events(limit)
        }
    }

    fn ret(id: &str) -> Value {
        map(vec![
            ("jid", Value::from("20261127101715645321")),
            ("id", Value::from(id)),
            ("fun", Value::from("test.ping")),
            ("return", Value::from(true)),
        ])
    }

    #[test]
    fn a_return_is_acknowledged_after_its_commit_and_waiting_ones_share_one() {
        let gate = Arc::new(Mutex::new(()));
        let store = Arc::new(Gated {
            inner: SqliteStore::in_memory().unwrap(),
            gate: gate.clone(),
            batches: Mutex::default(),
            failing: Mutex::default(),
        });
        let writer = ReturnWriter::start(store.clone(), Default::default());
        let (acked, acks) = crossbeam_channel::unbounded::<String>();
        let closed = gate.lock().unwrap();
        let ack = |id: &str| {
            let (acked, id) = (acked.clone(), id.to_string());
            Box::new(move || acked.send(id).unwrap())
        };
        writer.save(ret("m1"), ack("m1"));
        // The writer has m1 and waits on the store: nothing is acknowledged meanwhile.
        assert!(acks.recv_timeout(Duration::from_millis(300)).is_err());
        for id in ["m2", "m3", "m4"] {
            writer.save(ret(id), ack(id));
        }
        assert!(acks.recv_timeout(Duration::from_millis(100)).is_err());
        drop(closed);
        let mut got: Vec<String> = (0..4)
            .map(|_| acks.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        got.sort();
        assert_eq!(got, ["m1", "m2", "m3", "m4"]);
        assert_eq!(store.get_returns("20261127101715645321").unwrap().len(), 4);
        // m1 alone, then the three that waited meanwhile in one commit.
        assert_eq!(*store.batches.lock().unwrap(), [1, 3]);
    }

    /// A store that cannot be reached: the return is not acknowledged (the minion sends it
    /// again). A store that refuses the return: acknowledged, as sending it again would not help.
    #[test]
    fn a_return_the_store_cannot_take_now_is_not_acknowledged() {
        let store = Arc::new(Gated {
            inner: SqliteStore::in_memory().unwrap(),
            gate: Arc::default(),
            batches: Mutex::default(),
            failing: Mutex::new(Some(StoreError::Unavailable)),
        });
        let writer = ReturnWriter::start(store.clone(), Default::default());
        let (acked, acks) = crossbeam_channel::unbounded::<&str>();
        let ack = |id: &'static str| {
            let acked = acked.clone();
            Box::new(move || acked.send(id).unwrap())
        };
        writer.save(ret("m1"), ack("m1"));
        assert!(acks.recv_timeout(Duration::from_millis(500)).is_err());
        *store.failing.lock().unwrap() = Some(StoreError::Shared);
        writer.save(ret("m2"), ack("m2"));
        assert_eq!(acks.recv_timeout(Duration::from_secs(10)), Ok("m2"));
        *store.failing.lock().unwrap() = None;
        writer.save(ret("m1"), ack("m1"));
        assert_eq!(acks.recv_timeout(Duration::from_secs(10)), Ok("m1"));
        assert_eq!(store.get_returns("20261127101715645321").unwrap().len(), 1);
    }
}
