//! `config.*`: the master's configuration.

use brine_protocol::payload::{from_json, get, Value};

use super::{Args, Wheel};
use crate::master::Master;

pub const FUNCTIONS: &[Wheel] = &[
    Wheel {
        name: "config.values",
        args: &[],
        doc: "Return the master's configuration, with Salt's defaults for what it leaves out and without secrets.\n\nCLI Example:\n\n    salt-run wheel config.values\n",
        run: values,
    },
];

/// Defaults of Salt 3007's master options (as JSON) that `config.values` reports when the
/// config leaves them out.
const SALT_MASTER_DEFAULTS: &[(&str, &str)] = &[
    ("state_verbose", "true"),
    ("state_output", "\"full\""),
    ("state_output_diff", "false"),
    ("state_output_profile", "true"),
    ("state_auto_order", "true"),
    ("state_events", "false"),
    ("state_aggregate", "false"),
    ("state_top", "\"top.sls\""),
    ("state_top_saltenv", "null"),
    ("top_file_merging_strategy", "\"merge\""),
    ("env_order", "[]"),
    ("default_top", "\"base\""),
    ("fileserver_backend", "[\"roots\"]"),
    ("renderer", "\"jinja|yaml\""),
    ("failhard", "false"),
];

fn values(master: &Master, _: &Args) -> Result<Value, String> {
    let mut v = from_json(&serde_json::Value::Object(master.cfg.opts().clone()));
    for (k, val) in [
        ("id", Value::from(master.cfg.id.clone())),
        ("interface", Value::from(master.cfg.interface.clone())),
        ("publish_port", Value::from(master.cfg.publish_port)),
        ("ret_port", Value::from(master.cfg.ret_port)),
        (
            "pki_dir",
            Value::from(master.cfg.pki_dir.display().to_string()),
        ),
        (
            "cachedir",
            Value::from(master.cfg.cachedir.display().to_string()),
        ),
        (
            "sock_dir",
            Value::from(master.cfg.sock_dir.display().to_string()),
        ),
        (
            "root_dir",
            Value::from(master.cfg.root_dir.display().to_string()),
        ),
        ("timeout", Value::from(master.cfg.timeout)),
        (
            "keep_jobs_seconds",
            Value::from(master.cfg.keep_jobs_seconds),
        ),
        (
            "worker_threads",
            Value::from(master.cfg.worker_threads as u64),
        ),
        ("auto_accept", Value::from(master.cfg.auto_accept)),
        ("open_mode", Value::from(master.cfg.open_mode)),
        ("hash_type", Value::from(master.cfg.hash_type.clone())),
    ] {
        brine_protocol::payload::set(&mut v, k, val);
    }
    // Salt's master defaults for what the config does not set (SaltGUI reads the
    // state output settings from here).
    for (k, default) in SALT_MASTER_DEFAULTS {
        if get(&v, k).is_none() {
            let default: serde_json::Value = serde_json::from_str(default).expect("static JSON");
            brine_protocol::payload::set(&mut v, k, from_json(&default));
        }
    }
    // Secrets stay out.
    for k in ["external_auth", "key_pass", "signing_key_pass"] {
        brine_protocol::payload::remove(&mut v, k);
    }
    Ok(v)
}
