//! `_master_opts`: the master options a minion's state system reads. As Salt's master does,
//! `file_roots` names every saltenv with an empty list (the minion fetches the files, it never
//! reads the master's directories).

use brine_protocol::payload::{get, map, Value};

use crate::master::Master;

impl Master {
    pub(crate) fn master_opts(&self, load: &Value) -> Value {
        let file_roots = Value::Map(
            self.fileserver
                .envs()
                .into_iter()
                .map(|env| (Value::from(env), Value::Array(vec![])))
                .collect(),
        );
        let cfg = &self.cfg;
        let mut opts = vec![
            ("file_roots", file_roots),
            (
                "top_file_merging_strategy",
                Value::from(cfg.top_file_merging_strategy.as_str()),
            ),
            (
                "env_order",
                Value::Array(
                    cfg.env_order
                        .iter()
                        .map(|e| Value::from(e.as_str()))
                        .collect(),
                ),
            ),
            ("default_top", Value::from(cfg.default_top.as_str())),
        ];
        if get(load, "env_only").is_none_or(|v| v != &Value::from(true)) {
            opts.extend([
                ("renderer", Value::from(cfg.renderer.as_str())),
                ("failhard", Value::from(cfg.failhard)),
                (
                    "state_top",
                    Value::from(format!("salt://{}", cfg.state_top)),
                ),
                ("state_top_saltenv", Value::Nil),
                ("nodegroups", Value::Map(vec![])),
                ("state_auto_order", Value::from(true)),
                ("state_events", Value::from(cfg.state_events)),
                ("state_aggregate", Value::from(false)),
                ("jinja_env", Value::Map(vec![])),
                ("jinja_sls_env", Value::Map(vec![])),
                ("jinja_lstrip_blocks", Value::from(false)),
                ("jinja_trim_blocks", Value::from(false)),
            ]);
        }
        map(opts)
    }
}
