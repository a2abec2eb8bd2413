//! The `event` execution module: fire events on the master's bus (`event.fire_master`,
//! `event.send`), as Salt's minion fires them: a job's event goes through the minion's own
//! connection as a `_minion_event` load with its `pretag`; salt-call's is sent raw, with the
//! `preload` merged in. In local mode (`--local`, `file_client: local`, `master_type:
//! disable`) nothing is sent. Salt's `event.fire` (the minion's local bus) is not offered:
//! Brine's minion has no local bus.

use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::loads::MinionEventLoad;
use brine_protocol::payload::{from_json, get, json_truthy, py_truthy, upsert};

/// The functions of the `event` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    FireMaster,
    Send,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[Fun::FireMaster, Fun::Send];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::FireMaster => (
                "event.fire_master",
                "fire_master",
                Signature::new(&["data", "tag", "preload"], 2, false, false),
                "
    Fire an event off up to the master server

    CLI Example:

        salt '*' event.fire_master '{\"data\":\"my event data\"}' 'tag'
    ",
            ),
            Fun::Send => (
                "event.send",
                "send",
                Signature::new(
                    &[
                        "tag",
                        "data",
                        "preload",
                        "with_env",
                        "with_grains",
                        "with_pillar",
                        "with_env_opts",
                    ],
                    1,
                    false,
                    true,
                ),
                "
    Send an event to the Salt Master.

    tag: the event's tag (slashes make a namespace: myco/build/server1/start).
    data: a map of event data (YAML on the command line).
    with_env: the environment variables as `environ` (True, or a list of names).
    with_grains: the minion's grains as `grains` (True, or a list of names).
    with_pillar: the minion's pillar as `pillar` (True, or a list of keys).
    with_env_opts: the minion's `saltenv` and `pillarenv`.
    Other keyword arguments are added to the data; `data` wins over all of them.

    CLI Example:

        salt-call event.send myco/mytag foo=Foo bar=Bar
        salt-call event.send 'myco/mytag' '{foo: Foo, bar: Bar}'
    ",
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        match self {
            Fun::FireMaster => {
                let data = b.get("data").cloned().unwrap_or(Value::Nil);
                let tag = b.get("tag").map(py_str).unwrap_or_default();
                fire_master(ctx, data, &tag, b.opt("preload")).await
            }
            Fun::Send => {
                let tag = b.get("tag").map(py_str).unwrap_or_default();
                let data = send_data(ctx, b);
                if local_mode(ctx, true) {
                    // Salt fires it on the minion's local bus, which Brine's minion has not.
                    tracing::warn!("Local mode detected. Event with tag {tag} will NOT be sent.");
                    return Ok(Value::Boolean(false));
                }
                fire_master(ctx, data, &tag, b.opt("preload")).await
            }
        }
    }
}

/// Whether the minion runs without its master: Salt's test in `event.send`, and in
/// `event.fire_master` without `master_type` (a minion with no master connection counts).
fn local_mode(ctx: &Context, with_master_type: bool) -> bool {
    let opts = &ctx.services.opts;
    let truthy = |k: &str| opts.get(k).is_some_and(json_truthy);
    let text = |k: &str| opts.get(k).and_then(|v| v.as_str());
    (truthy("local")
        || text("file_client") == Some("local")
        || with_master_type && text("master_type") == Some("disable")
        || ctx.services.master.is_none())
        && !truthy("use_master_when_local")
}

/// The data `event.send` fires: the environment, grains, pillar and options asked for, then
/// the keyword arguments, then `data` (when it is a map) over them all.
fn send_data(ctx: &Context, b: &Bound) -> Value {
    let mut out: Vec<(Value, Value)> = Vec::new();
    let mut set = |k: &str, v: Value| upsert(&mut out, Value::from(k), v);
    if let Some(with) = b.get("with_env").filter(|v| py_truthy(v)) {
        let environ: Vec<(Value, Value)> = std::env::vars_os()
            .map(|(k, v)| {
                (
                    Value::from(k.to_string_lossy().as_ref()),
                    Value::from(v.to_string_lossy().as_ref()),
                )
            })
            .collect();
        set("environ", subset(with, environ));
    }
    if let Some(with) = b.get("with_grains").filter(|v| py_truthy(v)) {
        set("grains", subset(with, entries(&ctx.services.grains())));
    }
    if let Some(with) = b.get("with_pillar").filter(|v| py_truthy(v)) {
        set("pillar", subset(with, entries(&ctx.services.pillar())));
    }
    if b.get("with_env_opts").is_some_and(py_truthy) {
        let opts = &ctx.services.opts;
        set(
            "saltenv",
            opts.get("saltenv")
                .map_or(Value::from("base"), from_json),
        );
        set(
            "pillarenv",
            opts.get("pillarenv").map_or(Value::Nil, from_json),
        );
    }
    for (k, v) in &b.kwargs {
        set(k, v.clone());
    }
    if let Some(Value::Map(data)) = b.get("data") {
        for (k, v) in data {
            upsert(&mut out, k.clone(), v.clone());
        }
    }
    Value::Map(out)
}

fn entries(v: &Value) -> Vec<(Value, Value)> {
    match v {
        Value::Map(m) => m.clone(),
        _ => Vec::new(),
    }
}

/// Salt's `_dict_subset`: the whole map, or only the entries a list names (in the map's
/// order).
fn subset(with: &Value, all: Vec<(Value, Value)>) -> Value {
    match with {
        Value::Array(keys) => Value::Map(all.into_iter().filter(|(k, _)| keys.contains(k)).collect()),
        _ => Value::Map(all),
    }
}

/// Fire `tag` with `data` on the master's bus. A job's event goes as the minion sends its
/// own (a `_minion_event` with `pretag`; falsy data becomes `{}`, an empty tag sends
/// nothing) and is `True` whatever the master answers, as Salt hands it to its minion
/// process; salt-call's is sent raw with `preload` merged in, `True` once the master took it.
async fn fire_master(
    ctx: &Context,
    data: Value,
    tag: &str,
    preload: Option<&Value>,
) -> Result<Value, FnError> {
    let preload = preload.filter(|p| py_truthy(p));
    let channel = match ctx.services.master.clone() {
        Some(channel) if !local_mode(ctx, false) => channel,
        _ => {
            tracing::warn!("Local mode detected. Event with tag {tag} will NOT be sent.");
            return Ok(Value::Boolean(false));
        }
    };
    let salt_call = get(&ctx.pub_load, "tgt").and_then(Value::as_str) == Some("salt-call");
    let load = if preload.is_some() || salt_call {
        let mut load = vec![
            (Value::from("id"), Value::from(ctx.id.as_str())),
            (Value::from("tag"), Value::from(tag)),
            (Value::from("data"), data),
            (Value::from("cmd"), Value::from("_minion_event")),
        ];
        if let Some(Value::Map(extra)) = preload {
            for (k, v) in extra {
                upsert(&mut load, k.clone(), v.clone());
            }
        }
        Value::Map(load)
    } else {
        if tag.is_empty() {
            return Ok(Value::Boolean(true));
        }
        let data = if py_truthy(&data) {
            data
        } else {
            Value::Map(Vec::new())
        };
        MinionEventLoad::single(&ctx.id, tag, data).to_value()
    };
    let sent = tokio::task::spawn_blocking(move || channel.request(&load))
        .await
        .map_err(|e| FnError::Execution(e.to_string()))?;
    match sent {
        Ok(_) => Ok(Value::Boolean(true)),
        Err(e) => {
            tracing::warn!("event {tag} not sent to the master: {e}");
            Ok(Value::Boolean(!salt_call && preload.is_none()))
        }
    }
}
