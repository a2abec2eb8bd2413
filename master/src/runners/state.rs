//! `state.*` runners.

use std::sync::Arc;

use brine_protocol::payload::{from_json, map, to_json, Value};

use super::{ready, Call, Runner, RunnerFuture};
use crate::master::Master;
use crate::orchestrate::{Orchestration, Request};
use crate::pillar::PillarRequest;
use crate::wheel::Args;

const ORCHESTRATE_ARGS: &[&str] = &[
    "mods",
    "saltenv='base'",
    "test=None",
    "exclude=None",
    "pillar=None",
    "pillarenv=None",
    "pillar_enc=None",
    "orchestration_jid=None",
];

const ORCHESTRATE_DOC: &str = "Run orchestration SLS files (mods, comma-separated or a list) of saltenv (default base) on the master, as the master's own minion (<master id>): salt.function, salt.state, salt.runner and salt.wheel states run jobs, runners and wheel functions, other states run on the master. Returns {data: {<master id>: state returns or [errors]}, outputter: highstate, retcode: 0, or 1 when a state failed or nothing ran}. test=True reports what would run; pillar= adds pillar data; exclude= leaves out IDs or SLS files.\n\nCLI Example:\n\n    salt-run state.orchestrate webserver\n    salt-run state.orchestrate webserver saltenv=dev test=True\n    salt-run state.orchestrate webserver pillar='{foo: bar}'\n";

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "state.orch",
        args: ORCHESTRATE_ARGS,
        doc: ORCHESTRATE_DOC,
        run: orchestrate,
    },
    Runner {
        name: "state.orchestrate",
        args: ORCHESTRATE_ARGS,
        doc: ORCHESTRATE_DOC,
        run: orchestrate,
    },
    Runner {
        name: "state.orchestrate_high",
        args: &["data", "test=None", "queue=False", "pillar=None", "**kwargs"],
        doc: "Run high data (a map of IDs to {state: [function, {arg: value}...]}) as an orchestration on the master. Returns {<master id>: state returns} and fires them as a progress event.\n\nCLI Example:\n\n    salt-run state.orchestrate_high '{stage_one: {salt: [function, {name: test.ping}, {tgt: web1}]}}'\n",
        run: orchestrate_high,
    },
    Runner {
        name: "state.orchestrate_single",
        args: &["fun", "name", "test=None", "queue=False", "pillar=None", "**kwargs"],
        doc: "Run one state function (fun, its name and keyword arguments) as an orchestration on the master. Returns {<master id>: state return} and fires it as a progress event.\n\nCLI Example:\n\n    salt-run state.orchestrate_single fun=salt.wheel name=key.list_all\n",
        run: orchestrate_single,
    },
    Runner {
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
},
    Runner {
        name: "state.sls",
        args: ORCHESTRATE_ARGS,
        doc: ORCHESTRATE_DOC,
        run: orchestrate,
    },
];

/// Salt's answer to a runner called with arguments it does not take.
fn invalid(c: &Call, why: &str) -> Value {
    super::find(c.fun).map_or_else(|| Value::from(why), |r| {
        Value::from(super::invalid_arguments(r, why))
    })
}

/// `pillar=` as the orchestrate runners take it: a map, or nothing.
fn pillar_arg(c: &Call, pos: usize) -> Result<Option<Value>, Value> {
    match c.args.get(pos, "pillar") {
        None | Some(Value::Nil) => Ok(None),
        Some(p @ Value::Map(_)) => Ok(Some(p.clone())),
        Some(_) => Err(invalid(c, "Pillar data must be formatted as a dictionary")),
    }
}

fn truthy(v: Option<&Value>) -> bool {
    v.is_some_and(|v| brine_protocol::payload::json_truthy(&to_json(v)))
}

/// Run `work` with the orchestration on a blocking thread (its jobs are waited for there).
async fn blocking<F>(c: &Call, req: Request, work: F) -> Result<Value, String>
where
    F: FnOnce(Result<Orchestration, Vec<String>>) -> Value + Send + 'static,
{
    let master = c.master.clone();
    tokio::task::spawn_blocking(move || work(Orchestration::new(master, req)))
        .await
        .map_err(|e| format!("the orchestration stopped: {e}"))
}

fn request(c: &Call, saltenv: String, test: bool, pillar: Option<Value>) -> Request {
    Request {
        user: c.user.clone(),
        jid: None,
        saltenv,
        test,
        pillar,
        pillarenv: None,
        exclude: Vec::new(),
    }
}

/// `state.orchestrate` (and `state.orch`, `state.sls`): Salt's envelope
/// `{data: {<id>: running}, outputter: highstate, retcode}`.
fn orchestrate(c: Call) -> RunnerFuture {
    Box::pin(async move {
        let a = &c.args;
        let Some(mods) = a.get_list(0, "mods") else {
            return Ok(invalid(
                &c,
                "orchestrate() missing 1 required positional argument: 'mods'",
            ));
        };
        let mods: Vec<String> = mods.into_iter().filter(|m| !m.is_empty()).collect();
        let pillar = match pillar_arg(&c, 4) {
            Ok(p) => p,
            Err(usage) => return Ok(usage),
        };
        let saltenv = a.get_str(1, "saltenv").unwrap_or_else(|| "base".into());
        let mut req = request(&c, saltenv, truthy(a.get(2, "test")), pillar);
        req.pillarenv = a.get_str(5, "pillarenv");
        req.exclude = match a.get(3, "exclude") {
            None | Some(Value::Nil) => Vec::new(),
            Some(Value::Array(items)) => items.iter().map(to_json).collect(),
            Some(other) => to_json(other)
                .as_str()
                .unwrap_or_default()
                .split(',')
                .map(|s| serde_json::json!(s.trim()))
                .collect(),
        };
        req.jid = Some(
            a.get_str(7, "orchestration_jid")
                .filter(|j| !j.is_empty())
                .unwrap_or_else(brine_protocol::jid::gen_jid),
        );
        let id = c.master.cfg.id.clone();
        blocking(&c, req, move |orch| {
            let running = match orch {
                Err(errors) => Value::Array(errors.into_iter().map(Value::from).collect()),
                Ok(orch) => match orch.compile(&mods).and_then(|high| orch.run(&high)) {
                    Ok(ret) => from_json(&serde_json::Value::Object(ret)),
                    Err(errors) => Value::Array(errors.into_iter().map(Value::from).collect()),
                },
            };
            let data = map(vec![(id.as_str(), running)]);
            let retcode = if brine_state::check_result(&to_json(&data), false) {
                0
            } else {
                1
            };
            map(vec![
                ("data", data),
                ("outputter", Value::from("highstate")),
                ("retcode", Value::from(retcode)),
            ])
        })
        .await
    })
}

/// Run `high` for `orchestrate_single` and `orchestrate_high`: `{<id>: running}`, fired as
/// `salt/run/<jid>/progress` with the highstate outputter as Salt fires it.
async fn run_high(
    c: &Call,
    req: Request,
    high: serde_json::Map<String, serde_json::Value>,
) -> Result<Value, String> {
    let id = c.master.cfg.id.clone();
    let ret = blocking(c, req, move |orch| {
        let running = match orch.and_then(|orch| orch.run(&high)) {
            Ok(ret) => from_json(&serde_json::Value::Object(ret)),
            Err(errors) => Value::Array(errors.into_iter().map(Value::from).collect()),
        };
        map(vec![(id.as_str(), running)])
    })
    .await?;
    c.master.bus.fire(
        &format!("salt/run/{}/progress", c.jid),
        map(vec![
            ("data", ret.clone()),
            ("outputter", Value::from("highstate")),
        ]),
    );
    Ok(ret)
}

/// The keyword arguments of `orchestrate_single` that are the state's own.
fn state_kwargs(c: &Call, skip: &[&str]) -> Vec<serde_json::Value> {
    c.args
        .kwargs
        .iter()
        .filter(|(k, _)| !k.starts_with("__") && !skip.contains(&k.as_str()))
        .map(|(k, v)| serde_json::json!({ k.clone(): to_json(v) }))
        .collect()
}

/// `state.orchestrate_single`: one state function; Salt ignores `test` here.
fn orchestrate_single(c: Call) -> RunnerFuture {
    Box::pin(async move {
        let pillar = match pillar_arg(&c, 4) {
            Ok(p) => p,
            Err(usage) => return Ok(usage),
        };
        let (Some(fun), Some(name)) = (c.args.get_str(0, "fun"), c.args.get(1, "name").cloned())
        else {
            return Ok(invalid(
                &c,
                "orchestrate_single() missing 2 required positional arguments: 'fun' and 'name'",
            ));
        };
        let Some((state, function)) = fun.split_once('.') else {
            return Ok(invalid(&c, &format!("Invalid function passed: {fun}")));
        };
        let mut decl = vec![
            serde_json::json!(function),
            serde_json::json!({"name": to_json(&name)}),
        ];
        decl.extend(state_kwargs(
            &c,
            &["fun", "name", "test", "queue", "pillar", "saltenv"],
        ));
        let id = brine_state::verify::py_text(&to_json(&name));
        let mut high = serde_json::Map::new();
        high.insert(
            id,
            serde_json::json!({state: decl, "__sls__": null, "__env__": "base"}),
        );
        let req = request(&c, "base".into(), false, pillar);
        run_high(&c, req, high).await
    })
}

/// `state.orchestrate_high`: high data as given (Salt does not split `state.function` keys
/// here).
fn orchestrate_high(c: Call) -> RunnerFuture {
    Box::pin(async move {
        let pillar = match pillar_arg(&c, 3) {
            Ok(p) => p,
            Err(usage) => return Ok(usage),
        };
        let Some(data) = c.args.get(0, "data") else {
            return Ok(invalid(
                &c,
                "orchestrate_high() missing 1 required positional argument: 'data'",
            ));
        };
        let serde_json::Value::Object(mut high) = to_json(data) else {
            return Ok(map(vec![(
                c.master.cfg.id.as_str(),
                Value::Array(vec![Value::from(
                    "High data is not a dictionary and is invalid",
                )]),
            )]));
        };
        for body in high.values_mut() {
            if let Some(m) = body.as_object_mut() {
                m.entry("__sls__").or_insert(serde_json::Value::Null);
                m.entry("__env__").or_insert(serde_json::json!("base"));
            }
        }
        let req = request(&c, "base".into(), truthy(c.args.get(1, "test")), pillar);
        run_high(&c, req, high).await
    })
}

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
