//! The `mine` execution module: run functions and store their results in the master's mine
//! (`_mine`), read other minions' entries (`_mine_get`), forget entries. The functions that
//! `mine.update` runs come from `mine_functions` in the minion's options and its pillar.

use rmpv::Value;

use super::{CallState};
use super::args::{is_true, py_str, Bound, Signature};
use super::{clean_kwargs, Context, FnError, Spec};
use brine_protocol::payload::{get, map};

/// The functions of the `mine` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Delete,
    Flush,
    Get,
    Send,
    Update,
    Valid,
}

/// Salt's marks of a mine entry with its own access list.
const ACL_ID: &str = "__saltmine_acl__";
const ACL_DATA: &str = "__data__";

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Delete,
        Fun::Flush,
        Fun::Get,
        Fun::Send,
        Fun::Update,
        Fun::Valid,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::Delete => (
                "mine.delete",
                "delete",
                Signature::new(&["fun"], 1, false, false),
                "
    Remove specific function contents of minion. Returns True on success.

    CLI Example:

        salt '*' mine.delete 'network.interfaces'
    ",
            ),
            Fun::Flush => (
                "mine.flush",
                "flush",
                Signature::NONE,
                "
    Remove all mine contents of minion. Returns True on success.

    CLI Example:

        salt '*' mine.flush
    ",
            ),
            Fun::Get => (
                "mine.get",
                "get",
                Signature::new(
                    &["tgt", "fun", "tgt_type", "exclude_minion"],
                    2,
                    false,
                    false,
                ),
                "
    Get data from the mine: the entries of `fun` (one name, a list, or
    comma-separated names) of the minions `tgt` designates (tgt_type glob by
    default); exclude_minion=True leaves this minion out.

    CLI Example:

        salt '*' mine.get '*' network.interfaces
        salt '*' mine.get 'os:Fedora' network.interfaces grain
    ",
            ),
            Fun::Send => (
                "mine.send",
                "send",
                Signature::new(&["name"], 1, true, true),
                "
    Send a specific function and its result to the salt mine.
    mine_function=<mod.fun> runs another function under this name;
    allow_tgt/allow_tgt_type limit who may read it; other arguments go to
    the function.

    CLI Example:

        salt '*' mine.send network.ip_addrs interface=eth0
        salt '*' mine.send eth0_ip_addrs mine_function=network.ip_addrs interface=eth0
    ",
            ),
            Fun::Update => (
                "mine.update",
                "update",
                Signature::new(&["clear", "mine_functions"], 0, false, false),
                "
    Call the configured mine_functions (minion config and pillar) and send
    the data to the master; clear=True replaces what was stored before.

    CLI Example:

        salt '*' mine.update
    ",
            ),
            Fun::Valid => (
                "mine.valid",
                "valid",
                Signature::NONE,
                "
    List valid entries in mine configuration.

    CLI Example:

        salt '*' mine.valid
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

    pub(crate) async fn run(self, ctx: &Context, b: &Bound, _st: &mut CallState) -> Result<Value, FnError> {
        match self {
            Fun::Valid => Ok(valid(ctx)),
            Fun::Update => {
                let functions = match b.opt("mine_functions") {
                    None => mine_functions(ctx),
                    Some(Value::Array(names)) => Value::Map(
                        names
                            .iter()
                            .map(|n| (n.clone(), Value::Map(vec![])))
                            .collect(),
                    ),
                    Some(m @ Value::Map(_)) => m.clone(),
                    Some(_) => return Ok(Value::Nil),
                };
                let Value::Map(functions) = functions else {
                    return Ok(Value::Nil);
                };
                if functions.is_empty() {
                    return Ok(Value::Nil);
                }
                let mut data = Vec::new();
                for (alias, definition) in functions {
                    let alias = py_str(&alias);
                    let def = parse_definition(&definition);
                    let fun = def.function.clone().unwrap_or_else(|| alias.clone());
                    if super::Function::from_name(&fun).is_none() {
                        tracing::error!("Function {fun} in mine_functions not available");
                        continue;
                    }
                    let r = super::call_boxed(ctx, &fun, def.call_args()).await;
                    if r.retcode != 0 {
                        tracing::error!("Function {fun} in mine.update failed to execute");
                        continue;
                    }
                    data.push((Value::from(alias), def.wrap(r.ret)));
                }
                store(ctx, Value::Map(data), is_true(b.get("clear"))).await
            }
            Fun::Send => {
                let name = b.get("name").map(py_str).unwrap_or_default();
                let mut kwargs = clean_kwargs(b);
                let function = kwargs
                    .remove("mine_function")
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| name.clone());
                let allow_tgt = kwargs.remove("allow_tgt").filter(|v| !v.is_null());
                let allow_tgt_type = kwargs.remove("allow_tgt_type").filter(|v| !v.is_null());
                let mut args = b.varargs.clone();
                if !kwargs.is_empty() {
                    let mut kw = vec![(Value::from("__kwarg__"), Value::Boolean(true))];
                    kw.extend(kwargs.iter().map(|(k, v)| {
                        (
                            Value::from(k.as_str()),
                            brine_protocol::payload::from_json(v),
                        )
                    }));
                    args.push(Value::Map(kw));
                }
                if super::Function::from_name(&function).is_none() {
                    tracing::error!("Function {function} in mine.send failed to execute");
                    return Ok(Value::Boolean(false));
                }
                let r = super::call_boxed(ctx, &function, args).await;
                if r.retcode != 0 {
                    tracing::error!("Function {function} in mine.send failed to execute");
                    return Ok(Value::Boolean(false));
                }
                let def = Definition {
                    function: None,
                    args: vec![],
                    kwargs: vec![],
                    allow_tgt: allow_tgt.map(|v| brine_protocol::payload::from_json(&v)),
                    allow_tgt_type: allow_tgt_type.map(|v| brine_protocol::payload::from_json(&v)),
                };
                store(ctx, map([(name, def.wrap(r.ret))]), false).await
            }
            Fun::Get => {
                let tgt = b.get("tgt").cloned().unwrap_or(Value::Nil);
                let fun = b.get("fun").cloned().unwrap_or(Value::Nil);
                let tgt_type = b.opt("tgt_type").map_or_else(|| "glob".to_string(), py_str);
                let load = map([
                    ("cmd", Value::from("_mine_get")),
                    ("id", Value::from(ctx.id.clone())),
                    ("tgt", tgt),
                    ("fun", fun),
                    ("tgt_type", Value::from(tgt_type)),
                ]);
                let mut ret = request(ctx, load).await?;
                if is_true(b.get("exclude_minion")) {
                    if let Value::Map(entries) = &mut ret {
                        entries.retain(|(k, _)| k.as_str() != Some(ctx.id.as_str()));
                    }
                }
                Ok(ret)
            }
            Fun::Delete => {
                let fun = b.get("fun").cloned().unwrap_or(Value::Nil);
                let load = map([
                    ("cmd", Value::from("_mine_delete")),
                    ("id", Value::from(ctx.id.clone())),
                    ("fun", fun),
                ]);
                request(ctx, load).await.map(|_| Value::Boolean(true))
            }
            Fun::Flush => {
                let load = map([
                    ("cmd", Value::from("_mine_flush")),
                    ("id", Value::from(ctx.id.clone())),
                ]);
                request(ctx, load).await.map(|_| Value::Boolean(true))
            }
        }
    }
}

/// Send one request to the master.
async fn request(ctx: &Context, load: Value) -> Result<Value, FnError> {
    let Some(channel) = ctx.services.master.clone() else {
        return Err(FnError::Execution(
            "the mine is kept by the master, and this minion runs without one".into(),
        ));
    };
    tokio::task::spawn_blocking(move || channel.request(&load))
        .await
        .map_err(|e| FnError::Execution(e.to_string()))?
        .map_err(|e| FnError::Execution(format!("mine request to the master failed: {e}")))
}

/// `_mine`: store entries on the master. True when the master took them.
async fn store(ctx: &Context, data: Value, clear: bool) -> Result<Value, FnError> {
    let load = map([
        ("cmd", Value::from("_mine")),
        ("data", data),
        ("id", Value::from(ctx.id.clone())),
        ("clear", Value::Boolean(clear)),
    ]);
    request(ctx, load).await.map(|_| Value::Boolean(true))
}

/// `mine_functions`, merged as Salt's `config.merge` does: the minion's options, then the
/// pillar's entries over them.
fn mine_functions(ctx: &Context) -> Value {
    let mut merged: Vec<(Value, Value)> =
        match brine_protocol::payload::from_json(&ctx.services.mine_functions) {
            Value::Map(m) => m,
            _ => Vec::new(),
        };
    if let Some(Value::Map(from_pillar)) = get(&ctx.pillar, "mine_functions") {
        for (k, v) in from_pillar {
            brine_protocol::payload::upsert(&mut merged, k.clone(), v.clone());
        }
    }
    Value::Map(merged)
}

/// One `mine_functions` entry, as Salt's `parse_function_definition` reads it.
struct Definition {
    function: Option<String>,
    args: Vec<Value>,
    kwargs: Vec<(Value, Value)>,
    allow_tgt: Option<Value>,
    allow_tgt_type: Option<Value>,
}

fn parse_definition(def: &Value) -> Definition {
    let mut args = Vec::new();
    let mut kwargs: Vec<(Value, Value)> = Vec::new();
    let mut put = |k: &Value, v: &Value| match kwargs.iter_mut().find(|(ok, _)| ok == k) {
        Some(slot) => slot.1 = v.clone(),
        None => kwargs.push((k.clone(), v.clone())),
    };
    match def {
        Value::Map(m) => m.iter().for_each(|(k, v)| put(k, v)),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Map(m) => m.iter().for_each(|(k, v)| put(k, v)),
                    other => args.push(other.clone()),
                }
            }
        }
        _ => {}
    }
    let mut take = |key: &str| {
        let at = kwargs.iter().position(|(k, _)| k.as_str() == Some(key))?;
        Some(kwargs.remove(at).1)
    };
    let function = take("mine_function").map(|v| py_str(&v));
    let allow_tgt = take("allow_tgt").filter(|v| !v.is_nil());
    let allow_tgt_type = take("allow_tgt_type").filter(|v| !v.is_nil());
    Definition {
        function,
        args,
        kwargs,
        allow_tgt,
        allow_tgt_type,
    }
}

impl Definition {
    /// The call's arguments: the positional ones, then the keyword ones as a kwarg map.
    fn call_args(&self) -> Vec<Value> {
        let mut args = self.args.clone();
        if !self.kwargs.is_empty() {
            let mut kw = vec![(Value::from("__kwarg__"), Value::Boolean(true))];
            kw.extend(self.kwargs.iter().cloned());
            args.push(Value::Map(kw));
        }
        args
    }

    /// The stored entry: the data, wrapped with its access list when it has one.
    fn wrap(&self, data: Value) -> Value {
        let Some(tgt) = &self.allow_tgt else {
            return data;
        };
        let mut entry = vec![
            (Value::from(ACL_DATA), data),
            (Value::from(ACL_ID), Value::from(1)),
            (Value::from("allow_tgt"), tgt.clone()),
        ];
        if let Some(t) = &self.allow_tgt_type {
            entry.push((Value::from("allow_tgt_type"), t.clone()));
        }
        Value::Map(entry)
    }
}

/// `mine.valid`: each configured entry as `{function: [args..., {kwarg: value}...]}` when it
/// names another function, or as configured; `None` when nothing is configured.
fn valid(ctx: &Context) -> Value {
    let Value::Map(functions) = mine_functions(ctx) else {
        return Value::Nil;
    };
    if functions.is_empty() {
        return Value::Nil;
    }
    let mut out = Vec::new();
    for (alias, definition) in functions {
        let def = parse_definition(&definition);
        let fun = def.function.clone().unwrap_or_else(|| py_str(&alias));
        if super::Function::from_name(&fun).is_none() {
            tracing::error!("Function {fun} in mine_functions not available");
            continue;
        }
        let entry = match &def.function {
            Some(f) => {
                let mut args = def.args.clone();
                args.extend(def.kwargs.iter().map(|kv| Value::Map(vec![kv.clone()])));
                Value::Map(vec![(Value::from(f.as_str()), Value::Array(args))])
            }
            None => definition,
        };
        out.push((alias, entry));
    }
    Value::Map(out)
}
