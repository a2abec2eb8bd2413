//! `_return`: a minion's result for a job (or for a scheduled job: jid `req` or `nocache`).

use brine_protocol::jid::gen_jid;
use brine_protocol::loads::ReturnLoad;
use brine_protocol::payload::{remove, set, Value};

use crate::master::Master;

impl Master {
    /// Fire `salt/job/<jid>/ret/<id>` and store the return. Salt answers nothing.
    pub(crate) fn on_return(&self, mut load: ReturnLoad) -> Value {
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
        if self.cfg.job_cache && !nocache {
            match self.store.save_return(&data) {
                Ok(true) => {}
                Ok(false) => tracing::info!("duplicate return of {id} for {jid} ignored"),
                Err(e) => tracing::error!("return of {id} for {jid} not stored: {e}"),
            }
        }
        Value::Nil
    }
}
