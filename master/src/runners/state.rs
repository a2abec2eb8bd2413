//! `state.*` runners.

use std::sync::Arc;

use brine_protocol::payload::{from_json, map, Value};

use super::{ready, Runner};
use crate::master::Master;
use crate::pillar::PillarRequest;
use crate::wheel::Args;

pub const FUNCTIONS: &[Runner] = &[Runner {
    name: "state.orchestrate_show_sls",
    args: &[
        "mods",
        "saltenv='base'",
        "test=None",
        "queue=False",
        "pillar=None",
        "pillarenv=None",
        "pillar_enc=None",
    ],
    doc: "Render an orchestration SLS (mods, comma-separated) of saltenv (default base) on the master and show its high data, as state.show_sls shows it: {<master id>: {ID: {state: [args..., function, {order: n}], __sls__, __env__}}}, or {<master id>: [errors]} when it does not compile.\n\nCLI Example:\n\n    salt-run state.orchestrate_show_sls orch.webservers\n",
    run: |c| ready(Ok(c.master.orchestrate_show_sls(&c.args))),
}];

impl Master {
    /// `state.orchestrate_show_sls`: the orchestration rendered as the master's own minion
    /// (`<id>_master`) renders it, with the master's pillar.
    fn orchestrate_show_sls(&self, a: &Args) -> Value {
        let mods: Vec<String> = a
            .get_list(0, "mods")
            .unwrap_or_default()
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect();
        let saltenv = a.get_str(1, "saltenv").unwrap_or_else(|| "base".into());
        let mut req = PillarRequest::new(&self.cfg.id, Value::Map(vec![]));
        req.saltenv = Some(saltenv.clone());
        req.pillarenv = a.get_str(5, "pillarenv");
        if let Some(over @ Value::Map(_)) = a.get(4, "pillar") {
            req.pillar_override = over.clone();
        }
        let pillar = self.pillars.compile(&req);
        let id = self.cfg.id.as_str();
        if let Some(errors) = brine_protocol::payload::get(&pillar, "_errors") {
            return map(vec![(id, errors.clone())]);
        }
        let mut opts = self.cfg.effective_opts();
        opts.insert("saltenv".into(), saltenv.clone().into());
        let ctx = brine_render::Context {
            grains: serde_json::json!({"id": id}),
            pillar: brine_protocol::payload::to_json(&pillar),
            opts: serde_json::Value::Object(opts),
            renderer: self.cfg.renderer.clone(),
            ..brine_render::Context::default()
        };
        let envs = self.fileserver.envs();
        let mut compiler = brine_state::Compiler::new(
            Arc::clone(&self.fileserver),
            &envs,
            crate::pillar::master_functions(&self.cfg),
            ctx,
        );
        let (high, mut errors) = compiler.render_highstate(&[(saltenv, mods)]);
        errors.extend(brine_state::verify_high(&high));
        let answer = if errors.is_empty() {
            from_json(&serde_json::Value::Object(high))
        } else {
            Value::Array(errors.into_iter().map(Value::from).collect())
        };
        map(vec![(id, answer)])
    }
}
