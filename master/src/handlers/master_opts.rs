//! `_master_opts`: the master options a minion's state system reads.

use brine_protocol::payload::{get, map, Value};

use crate::master::Master;

impl Master {
    pub(crate) fn master_opts(&self, load: &Value) -> Value {
        let file_roots = map(vec![("base", Value::Array(vec![]))]);
        let mut opts = vec![
            ("file_roots", file_roots),
            ("top_file_merging_strategy", Value::from("merge")),
            ("env_order", Value::Array(vec![])),
            ("default_top", Value::from("base")),
        ];
        if get(load, "env_only").is_none_or(|v| v != &Value::from(true)) {
            opts.extend([
                ("renderer", Value::from("jinja|yaml")),
                ("failhard", Value::from(false)),
                ("state_top", Value::from("salt://top.sls")),
                ("state_top_saltenv", Value::Nil),
                ("nodegroups", Value::Map(vec![])),
                ("state_auto_order", Value::from(true)),
                ("state_events", Value::from(false)),
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
