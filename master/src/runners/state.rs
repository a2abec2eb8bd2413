//! `state.*` runners.

use brine_protocol::payload::{map, Value};

use super::{ready, Runner};
use crate::master::Master;
use crate::wheel::Args;

pub const FUNCTIONS: &[Runner] = &[Runner {
    name: "state.orchestrate_show_sls",
    args: &["mods", "saltenv=base"],
    doc: "Show the states an orchestration SLS (mods, comma-separated) of saltenv (default base) would run, as the master compiles them.\n\nCLI Example:\n\n    salt-run state.orchestrate_show_sls orch.webservers\n",
    run: |c| ready(Ok(c.master.orchestrate_show_sls(&c.args))),
}];

impl Master {
    /// `state.orchestrate_show_sls`: Salt answers `{<master id>: [errors]}` when the SLS files
    /// cannot be compiled. Brine has no state compiler on the master yet, so an SLS that exists
    /// in `file_roots` is reported as not compiled rather than shown.
    fn orchestrate_show_sls(&self, a: &Args) -> Value {
        let mods: Vec<String> = a
            .get_list(0, "mods")
            .unwrap_or_default()
            .iter()
            .flat_map(|m| {
                m.split(',')
                    .map(|p| p.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .filter(|m| !m.is_empty())
            .collect();
        let saltenv = a.get_str(99, "saltenv").unwrap_or_else(|| "base".into());
        let roots: Vec<std::path::PathBuf> = self
            .cfg
            .file_roots
            .get(&saltenv)
            .map(|dirs| dirs.iter().map(std::path::PathBuf::from).collect())
            .unwrap_or_default();
        let errors: Vec<Value> = mods
            .iter()
            .map(|m| {
                let rel = m.replace('.', "/");
                let found = roots.iter().any(|r| {
                    r.join(format!("{rel}.sls")).is_file()
                        || r.join(&rel).join("init.sls").is_file()
                });
                Value::from(if found {
                    format!("Brine cannot compile the SLS '{m}' in env '{saltenv}' yet")
                } else {
                    format!("No matching sls found for '{m}' in env '{saltenv}'")
                })
            })
            .collect();
        map(vec![(self.cfg.id.as_str(), Value::Array(errors))])
    }
}
