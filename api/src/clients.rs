//! The lowstate clients: `local`, `local_async`, `local_batch`, `local_subset`, `runner`,
//! `runner_async`, `wheel`, `wheel_async`. Each chunk is authorised against the caller's eauth
//! ACL here, then sent to the master as a clear command with the root key, and (for the
//! synchronous clients) answered from the master's event bus.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use std::ops::ControlFlow;

use brine_client::batch::invalid_batch_text;
use brine_client::{Batch, BatchEvent, BatchSize, LocalClient, Timeouts};
use brine_protocol::loads::{Fun, PublishReply, PublishRequest, Tgt};
use brine_protocol::payload::{from_json, get, get_str, map, to_json, Value};
use serde_json::{json, Map, Value as Json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::auth::acl;
use crate::error::ApiError;
use crate::link::{BusEvent, PackedField};
use crate::state::{AppState, Caller};

/// Every client Salt's rest_cherrypy knows (`GET /` lists them). Salt lists `destroy` too (its
/// netapi client's clean-up method, found by reflection); it is never enabled in practice, and
/// Brine does not run it.
pub const CLIENTS: &[&str] = &[
    "destroy",
    "local",
    "local_async",
    "local_batch",
    "local_subset",
    "runner",
    "runner_async",
    "ssh",
    "wheel",
    "wheel_async",
];

/// Keys of a lowstate chunk that are not arguments of a runner or wheel function: everything
/// else at the top level is a keyword argument, as with Salt.
const CONTROL_KEYS: &[&str] = &[
    "client",
    "fun",
    "arg",
    "kwarg",
    "token",
    "username",
    "password",
    "eauth",
    "full_return",
    "print_event",
];

fn text(low: &Map<String, Json>, k: &str) -> Option<String> {
    match low.get(k)? {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

use brine_api_input::fields::{bounded, MAX_SECONDS};

fn seconds(low: &Map<String, Json>, k: &str) -> Result<Option<u64>, ApiError> {
    Ok(bounded(low, k, MAX_SECONDS)?)
}

fn arg_list(low: &Map<String, Json>) -> Vec<Json> {
    match low.get("arg") {
        None | Some(Json::Null) => vec![],
        Some(Json::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
    }
}

fn kwarg_map(low: &Map<String, Json>) -> Map<String, Json> {
    match low.get("kwarg") {
        Some(Json::Object(m)) => m.clone(),
        _ => Map::new(),
    }
}

/// `arg` plus `kwarg` packed as Salt's trailing `{"__kwarg__": true, ...}` map.
fn packed_args(low: &Map<String, Json>) -> Json {
    let mut args = arg_list(low);
    let kw = kwarg_map(low);
    if !kw.is_empty() {
        let mut m = Map::new();
        m.insert("__kwarg__".into(), Json::Bool(true));
        m.extend(kw);
        args.push(Json::Object(m));
    }
    Json::Array(args)
}

/// Is this a client Salt knows (400 `invalid_client` if not, `'None'` when absent), enabled by
/// `netapi_enable_clients` (400 `client_disabled` if not), that Brine runs?
pub fn check_enabled(state: &AppState, client: Option<&str>) -> Result<String, ApiError> {
    let Some(name) = client.filter(|c| CLIENTS.contains(c)) else {
        return Err(ApiError::invalid_client(client));
    };
    if !state.cfg.netapi_enable_clients.iter().any(|c| c == name) {
        return Err(ApiError::client_disabled(name));
    }
    if matches!(name, "ssh" | "destroy") {
        return Err(ApiError::bad_request(format!(
            "The {name} client is not supported by Brine's salt-api"
        )));
    }
    Ok(name.to_string())
}

/// One element of a lowstate answer's `return` list.
#[derive(Debug)]
pub enum Returned {
    Json(Json),
    /// A runner's return as the master's bus packed it: written straight to JSON text when
    /// the answer is JSON (`jobs.list_jobs` of 100,000 jobs is tens of megabytes).
    Packed(PackedField),
}

impl Returned {
    pub fn into_json(self) -> Json {
        match self {
            Returned::Json(v) => v,
            Returned::Packed(p) => p.decode(),
        }
    }
}

/// Run one lowstate chunk; the elements it adds to the `return` list (one, except
/// `local_batch`, which adds one per minion).
pub async fn run(
    state: &Arc<AppState>,
    caller: &Caller,
    low: Map<String, Json>,
) -> Result<Vec<Returned>, ApiError> {
    let client = check_enabled(state, low.get("client").and_then(Json::as_str))?;
    let one = |v: Json| vec![Returned::Json(v)];
    match client.as_str() {
        "local" => local(state, caller, &low).await.map(one),
        "local_async" => local_async(state, caller, &low).await.map(one),
        "local_batch" => local_batch(state, caller, &low)
            .await
            .map(|list| list.into_iter().map(Returned::Json).collect()),
        "local_subset" => local_subset(state, caller, &low).await.map(one),
        "runner" | "runner_async" => runner(state, caller, &low, client == "runner_async")
            .await
            .map(|v| vec![v]),
        "wheel" | "wheel_async" => wheel(state, caller, &low, client == "wheel_async")
            .await
            .map(one),
        other => Err(ApiError::invalid_client(Some(other))),
    }
}

/// [`run`] for a caller that wants the JSON trees.
pub async fn run_json(
    state: &Arc<AppState>,
    caller: &Caller,
    low: Map<String, Json>,
) -> Result<Vec<Json>, ApiError> {
    let out = run(state, caller, low).await?;
    Ok(out.into_iter().map(Returned::into_json).collect())
}

/// A validated local call, ready to publish.
struct LocalCall {
    tgt: Json,
    tgt_type: String,
    fun: Json,
    arg: Json,
}

fn local_call(low: &Map<String, Json>) -> Result<LocalCall, ApiError> {
    let fun = match low.get("fun") {
        Some(f @ Json::String(s)) if !s.is_empty() => f.clone(),
        Some(f @ Json::Array(a)) if !a.is_empty() && a.iter().all(Json::is_string) => f.clone(),
        _ => {
            return Err(ApiError::bad_request(
                "A local call needs 'fun': the function to run (e.g. test.ping)",
            ))
        }
    };
    let tgt = match low.get("tgt") {
        Some(t @ Json::String(s)) if !s.is_empty() => t.clone(),
        Some(t @ Json::Array(_)) => t.clone(),
        _ => {
            return Err(ApiError::bad_request(
                "A local call needs 'tgt': the minions to target (e.g. '*')",
            ))
        }
    };
    let tgt_type = text(low, "tgt_type")
        .or_else(|| text(low, "expr_form"))
        .unwrap_or_else(|| "glob".into());
    Ok(LocalCall {
        tgt,
        tgt_type,
        arg: packed_args(low),
        fun,
    })
}

/// The caller's ACL allows this local call on the minions the target designates.
fn allowed_local(state: &AppState, caller: &Caller, call: &LocalCall, tgt: &Value) -> bool {
    let minions = state.minions.expand(tgt, &call.tgt_type);
    let view = &state.minions;
    let expand = |expr: &str| view.expand_compound(expr);
    acl::check_local(&caller.acl, &call.fun, &call.arg, &minions, &expand)
}

/// Check the ACL, publish, and give back (jid, minions), or `None` when nothing matched.
async fn publish(
    state: &Arc<AppState>,
    caller: &Caller,
    low: &Map<String, Json>,
    call: &LocalCall,
    client: &str,
) -> Result<Option<(String, Vec<String>)>, ApiError> {
    let req = publish_request(state, caller, low, call, client)?;
    let job = LocalClient::new(state.master.as_user(&caller.name))
        .publish(req)
        .await?;
    if job.jid.is_empty() {
        return Ok(None);
    }
    state.metrics.jobs_published.fetch_add(1, Ordering::Relaxed);
    Ok(Some((job.jid, job.minions)))
}

/// The publish of a local call, once the caller may make it.
fn publish_request(
    state: &Arc<AppState>,
    caller: &Caller,
    low: &Map<String, Json>,
    call: &LocalCall,
    client: &str,
) -> Result<PublishRequest, ApiError> {
    let tgt = from_json(&call.tgt);
    if !allowed_local(state, caller, call, &tgt) {
        return Err(ApiError::not_authorized());
    }
    let tgt = match tgt {
        Value::String(s) => Tgt::Expr(s.into_str().unwrap_or_default()),
        Value::Array(items) => Tgt::List(
            items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => s.into_str().ok_or(()),
                    _ => Err(()),
                })
                .collect::<Result<_, _>>()
                .map_err(|()| {
                    ApiError::bad_request("'tgt' must be a string or a list of strings")
                })?,
        ),
        _ => {
            return Err(ApiError::bad_request(
                "'tgt' must be a string or a list of strings",
            ))
        }
    };
    let fun = match &call.fun {
        Json::String(f) => Fun::One(f.clone()),
        Json::Array(fs) => Fun::Many(
            fs.iter()
                .filter_map(Json::as_str)
                .map(str::to_string)
                .collect(),
        ),
        _ => {
            return Err(ApiError::bad_request(
                "'fun' must be a string or a list of strings",
            ))
        }
    };
    let arg = match from_json(&call.arg) {
        Value::Array(a) => a,
        other => vec![other],
    };
    let mut req = PublishRequest::new(tgt, fun, arg, &call.tgt_type);
    req.ret = text(low, "ret").unwrap_or_default();
    req.jid = text(low, "jid").unwrap_or_default();
    req.kwargs.insert("client", Value::from(client));
    if let Some(m) = low.get("metadata") {
        req.kwargs.insert("metadata", from_json(m));
    }
    req.to = seconds(low, "timeout")?.map(|t| t as i64);
    Ok(req)
}

/// Wait for the returns of a job with the one local client's policy: Salt's find_job rounds
/// for minions still running, and a hard stop, so never a hang.
async fn gather(
    state: &Arc<AppState>,
    caller: &Caller,
    rx: &mut broadcast::Receiver<Arc<BusEvent>>,
    jid: &str,
    minions: &[String],
    waits: Timeouts,
) -> Vec<(String, Json)> {
    let client = LocalClient::new(state.master.as_user(&caller.name));
    let job = PublishReply {
        jid: jid.to_string(),
        minions: minions.to_vec(),
        missing: Vec::new(),
    };
    let mut returns = client.returns(rx, &job, waits);
    let mut got = Vec::new();
    while let Some((id, ev)) = returns.next().await {
        state
            .metrics
            .returns_received
            .fetch_add(1, Ordering::Relaxed);
        got.push((id, ev.data_owned()));
    }
    got
}

fn timeouts(state: &AppState, low: &Map<String, Json>) -> Result<Timeouts, ApiError> {
    Ok(Timeouts::from_secs(
        seconds(low, "timeout")?.unwrap_or(state.cfg.timeout),
        seconds(low, "gather_job_timeout")?.unwrap_or(state.cfg.gather_job_timeout),
        state.cfg.gather_hard_stop,
    ))
}

fn full_return(low: &Map<String, Json>) -> bool {
    matches!(low.get("full_return"), Some(Json::Bool(true)))
        || matches!(
            low.get("full_return").and_then(Json::as_str),
            Some("true" | "True")
        )
}

fn shape_returns(got: Vec<(String, Json)>, jid: &str, full: bool) -> Json {
    let mut out = Map::new();
    for (id, data) in got {
        let ret = data.get("return").cloned().unwrap_or(Json::Null);
        if full {
            out.insert(
                id,
                json!({"ret": ret, "retcode": data.get("retcode").cloned().unwrap_or(json!(0)), "jid": jid}),
            );
        } else {
            out.insert(id, ret);
        }
    }
    Json::Object(out)
}

/// The bus events from now on, for a call that waits for its job's events (503 when salt-api
/// cannot read them).
async fn events(state: &AppState) -> Result<broadcast::Receiver<Arc<BusEvent>>, ApiError> {
    state
        .bus
        .subscribe_when_up(Duration::from_secs(5))
        .await
        .ok_or_else(|| ApiError::unavailable("salt-api cannot read the master's events"))
}

async fn local(
    state: &Arc<AppState>,
    caller: &Caller,
    low: &Map<String, Json>,
) -> Result<Json, ApiError> {
    let call = local_call(low)?;
    let waits = timeouts(state, low)?;
    let mut rx = events(state).await?;
    let Some((jid, minions)) = publish(state, caller, low, &call, "local").await? else {
        return Ok(json!({}));
    };
    let got = gather(state, caller, &mut rx, &jid, &minions, waits).await;
    Ok(shape_returns(got, &jid, full_return(low)))
}

pub async fn local_async(
    state: &Arc<AppState>,
    caller: &Caller,
    low: &Map<String, Json>,
) -> Result<Json, ApiError> {
    let call = local_call(low)?;
    Ok(
        match publish(state, caller, low, &call, "local_async").await? {
            Some((jid, minions)) => json!({"jid": jid, "minions": minions}),
            None => json!({}),
        },
    )
}

/// `batch`: Salt's `cmd_batch` (the one in `brine_client`): the targeted minions that answer
/// a ping, a count or a share of them running at a time; one `{minion: return}` per minion,
/// `{minion: {}}` for one whose job ended without a return.
async fn local_batch(
    state: &Arc<AppState>,
    caller: &Caller,
    low: &Map<String, Json>,
) -> Result<Vec<Json>, ApiError> {
    let call = local_call(low)?;
    let spec = text(low, "batch").unwrap_or_else(|| "10%".into());
    let size =
        BatchSize::parse(&spec).ok_or_else(|| ApiError::bad_request(invalid_batch_text(&spec)))?;
    let wait = seconds(low, "batch_wait")?.map_or(Duration::ZERO, Duration::from_secs);
    let req = publish_request(state, caller, low, &call, "local_batch")?;
    let waits = timeouts(state, low)?;
    let rx = events(state).await?;
    let mut out = Vec::new();
    LocalClient::new(state.master.as_user(&caller.name))
        .batch(rx, &req, Batch { size, wait }, waits, |ev| {
            match ev {
                BatchEvent::Started { .. } => {
                    state.metrics.jobs_published.fetch_add(1, Ordering::Relaxed);
                }
                BatchEvent::Return { id, event, .. } => {
                    state
                        .metrics
                        .returns_received
                        .fetch_add(1, Ordering::Relaxed);
                    let ret = event.data().get("return").cloned();
                    out.push(json!({ id: ret.unwrap_or(Json::Null) }));
                }
                BatchEvent::NoReturn { id, .. } => out.push(json!({ id: {} })),
                BatchEvent::Down(_) => {}
            }
            ControlFlow::Continue(())
        })
        .await?;
    Ok(out)
}

/// `subset` (or `sub`): run on N randomly chosen targeted minions that have the function.
async fn local_subset(
    state: &Arc<AppState>,
    caller: &Caller,
    low: &Map<String, Json>,
) -> Result<Json, ApiError> {
    let call = local_call(low)?;
    let n = match bounded(low, "subset", u32::MAX.into())? {
        Some(n) => n,
        None => bounded(low, "sub", u32::MAX.into())?.unwrap_or(3),
    }
    .max(1) as usize;
    let Some(fun) = call.fun.as_str().map(str::to_string) else {
        return Err(ApiError::bad_request(
            "local_subset runs one function, not a list",
        ));
    };
    // Which targeted minions have the function?
    let probe = LocalCall {
        tgt: call.tgt.clone(),
        tgt_type: call.tgt_type.clone(),
        fun: json!("sys.list_functions"),
        arg: json!([fun.split('.').next().unwrap_or("")]),
    };
    let waits = timeouts(state, low)?;
    let mut rx = events(state).await?;
    let Some((jid, minions)) = publish(state, caller, low, &probe, "local_subset").await? else {
        return Ok(json!({}));
    };
    let got = gather(state, caller, &mut rx, &jid, &minions, waits).await;
    let have: Vec<String> = got
        .into_iter()
        .filter(|(_, d)| {
            d.get("return")
                .and_then(Json::as_array)
                .is_some_and(|fs| fs.iter().any(|f| f == &json!(fun)))
        })
        .map(|(id, _)| id)
        .collect();
    if have.is_empty() {
        return Ok(json!({}));
    }
    let have = brine_client::batch::choose_subset(have, n);
    let sub = LocalCall {
        tgt: Json::Array(have.into_iter().map(Json::String).collect()),
        tgt_type: "list".into(),
        fun: call.fun.clone(),
        arg: call.arg.clone(),
    };
    let mut rx = events(state).await?;
    let Some((jid, minions)) = publish(state, caller, low, &sub, "local_subset").await? else {
        return Ok(json!({}));
    };
    let got = gather(state, caller, &mut rx, &jid, &minions, waits).await;
    Ok(shape_returns(got, &jid, full_return(low)))
}

/// Function arguments of a runner/wheel chunk: `arg`, `kwarg`, and the other top-level keys.
fn function_args(low: &Map<String, Json>) -> (Json, Json) {
    let mut kw = kwarg_map(low);
    for (k, v) in low {
        if !CONTROL_KEYS.contains(&k.as_str()) {
            kw.insert(k.clone(), v.clone());
        }
    }
    (Json::Array(arg_list(low)), Json::Object(kw))
}

fn runner_denied(caller: &Caller) -> ApiError {
    let kind = if caller.claims.is_some() {
        "token"
    } else {
        "eauth"
    };
    ApiError::auth_failure(kind, &caller.name)
}

async fn runner(
    state: &Arc<AppState>,
    caller: &Caller,
    low: &Map<String, Json>,
    asynchronous: bool,
) -> Result<Returned, ApiError> {
    let client = if asynchronous {
        "runner_async"
    } else {
        "runner"
    };
    let Some(fun) = text(low, "fun").filter(|f| !f.is_empty()) else {
        return Err(ApiError::bad_request(format!(
            "{client} takes at least 1 argument (0 given)"
        )));
    };
    let (arg, kwarg) = function_args(low);
    if !acl::check_runner(&caller.acl, &fun, &arg, &kwarg) {
        return Err(runner_denied(caller));
    }
    let wait = Duration::from_secs(
        seconds(low, "timeout")?
            .unwrap_or(state.api.rest_timeout)
            .max(1),
    );
    let mut rx = if asynchronous {
        None
    } else {
        Some(events(state).await?)
    };
    let load = map(vec![
        ("cmd", Value::from("runner")),
        ("fun", Value::from(fun.clone())),
        (
            "kwarg",
            map(vec![("arg", from_json(&arg)), ("kwarg", from_json(&kwarg))]),
        ),
        ("client", Value::from(client)),
        ("key", Value::from(state.master.key())),
        ("user", Value::from(caller.name.clone())),
    ]);
    let reply = state.master.clear(load, Duration::from_secs(30)).await?;
    if let Some(e) = get(&reply, "error") {
        return Err(ApiError::unauthorized(
            get_str(e, "message")
                .unwrap_or("runner refused")
                .to_string(),
        ));
    }
    let (Some(jid), Some(tag)) = (get_str(&reply, "jid"), get_str(&reply, "tag")) else {
        return Err(ApiError::unavailable(format!(
            "the master did not start the runner: {reply}"
        )));
    };
    let Some(rx) = rx.as_mut() else {
        return Ok(Returned::Json(json!({"tag": tag, "jid": jid})));
    };
    let want = format!("salt/run/{jid}/ret");
    let deadline = Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(ev)) if ev.tag == want => {
                // A runner that did not fail: its return passed on as the bus packed it.
                if !full_return(low) {
                    if let [Some(success), Some(ret)] = ev.packed_fields(["success", "return"]) {
                        if success.bytes() != [0xc2] {
                            return Ok(Returned::Packed(ret));
                        }
                    }
                }
                let mut data = ev.data_owned();
                if full_return(low) {
                    let tag = Json::String(ev.tag.clone());
                    return Ok(Returned::Json(Json::Object(Map::from_iter([
                        ("data".to_string(), data),
                        ("tag".to_string(), tag),
                    ]))));
                }
                let ret = data
                    .as_object_mut()
                    .and_then(|d| d.remove("return"))
                    .unwrap_or(Json::Null);
                if data.get("success") == Some(&Json::Bool(false)) {
                    if let Some(msg) = ret.as_str().filter(|m| m.ends_with("is not available.")) {
                        return Err(ApiError::bad_request(msg.to_string()));
                    }
                }
                return Ok(Returned::Json(ret));
            }
            Ok(Ok(_)) => {}
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(_)) => return Err(ApiError::unavailable("the master's event bus went away")),
            Err(_) => {
                return Err(ApiError::timeout(format!(
                    "runner {fun} did not answer within {}s (jid {jid})",
                    wait.as_secs()
                )))
            }
        }
    }
}

/// Fields of the clear `wheel` load that Brine sets and a lowstate may not.
const WHEEL_LOAD_FIELDS: &[&str] = &["cmd", "fun", "key", "user", "jid", "client", "eauth"];

async fn wheel(
    state: &Arc<AppState>,
    caller: &Caller,
    low: &Map<String, Json>,
    asynchronous: bool,
) -> Result<Json, ApiError> {
    let client = if asynchronous { "wheel_async" } else { "wheel" };
    let Some(fun) = text(low, "fun").filter(|f| !f.is_empty()) else {
        return Err(ApiError::bad_request(format!(
            "{client} takes at least 1 argument (0 given)"
        )));
    };
    let (arg, kwarg) = function_args(low);
    if !acl::check_wheel(&caller.acl, &fun, &arg, &kwarg) {
        return Err(runner_denied(caller));
    }
    let jid = brine_protocol::jid::gen_jid();
    // Salt's master passes every other key of a wheel load to the function as a keyword
    // argument, so the caller and the jid travel as Salt's internal `__user__` and `__jid__`
    // (which it drops; Salt's master then records its own user and jid), and `arg` only when
    // there are positional arguments.
    let mut load = vec![
        (Value::from("cmd"), Value::from("wheel")),
        (Value::from("fun"), Value::from(fun.clone())),
        (Value::from("__jid__"), Value::from(jid.clone())),
        (Value::from("key"), Value::from(state.master.key())),
        (Value::from("__user__"), Value::from(caller.name.clone())),
        (Value::from("client"), Value::from(client)),
    ];
    if arg.as_array().is_some_and(|a| !a.is_empty()) {
        load.push((Value::from("arg"), from_json(&arg)));
    }
    if let Json::Object(kw) = &kwarg {
        // The load's own fields (who calls, which jid, the key) come from Brine, never from the
        // lowstate: a client's `user` or `jid` is dropped, not passed on to be recorded.
        for (k, v) in kw {
            if WHEEL_LOAD_FIELDS.contains(&k.as_str()) || k.starts_with("__") {
                tracing::debug!("wheel {fun}: client field {k:?} ignored");
                continue;
            }
            load.push((Value::from(k.as_str()), from_json(v)));
        }
    }
    let load = Value::Map(load);
    if asynchronous {
        let st = state.clone();
        tokio::spawn(async move {
            if let Err(e) = st.master.clear(load, Duration::from_secs(300)).await {
                tracing::warn!("wheel_async call failed: {e}");
            }
        });
        return Ok(json!({"tag": format!("salt/wheel/{jid}"), "jid": jid}));
    }
    let reply = state.master.clear(load, Duration::from_secs(300)).await?;
    if let Some(e) = get(&reply, "error") {
        return Err(ApiError::unauthorized(
            get_str(e, "message").unwrap_or("wheel refused").to_string(),
        ));
    }
    Ok(to_json(&reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_are_packed_like_salt() {
        let low: Map<String, Json> =
            serde_json::from_value(json!({"arg": "x", "kwarg": {"k": 1}})).unwrap();
        assert_eq!(packed_args(&low), json!(["x", {"__kwarg__": true, "k": 1}]));
        let low: Map<String, Json> = serde_json::from_value(
            json!({"fun": "jobs.lookup_jid", "jid": "1", "client": "runner", "token": "t"}),
        )
        .unwrap();
        let (_, kw) = function_args(&low);
        assert_eq!(kw, json!({"jid": "1"}));
    }
}
