//! High data to low chunks, as Salt 3007's `State.call_high` prepares them: `extend` merged
//! (`reconcile_extend`), the `*_in` requisites and `use` turned around (`requisite_in`),
//! `exclude` applied, then every state ID × function × name compiled into one chunk and the
//! chunks ordered (`compile_high_data`, `order_chunks`).

use brine_protocol::target::fnmatch;
use serde_json::{Map, Value};

use crate::verify::py_text;
use crate::High;

/// One low chunk: `state`, `fun`, `name`, `__id__`, `__sls__`, `__env__`, `order` and the
/// state's arguments.
pub type Low = Map<String, Value>;

/// The requisites a state's arguments may carry (Salt's `STATE_REQUISITE_KEYWORDS`).
pub const REQUISITES: &[&str] = &[
    "onchanges",
    "onchanges_any",
    "onfail",
    "onfail_any",
    "onfail_all",
    "onfail_stop",
    "prereq",
    "prerequired",
    "watch",
    "watch_any",
    "require",
    "require_any",
    "listen",
];

/// Keys of a chunk that are the engine's and never a state function's arguments (Salt's
/// `STATE_INTERNAL_KEYWORDS`).
pub const INTERNAL: &[&str] = &[
    "onchanges_in",
    "onfail_in",
    "prereq_in",
    "watch_in",
    "require_in",
    "listen_in",
    "fun",
    "state",
    "check_cmd",
    "cmd_opts_exclude",
    "failhard",
    "onlyif",
    "unless",
    "creates",
    "retry",
    "order",
    "parallel",
    "reload_modules",
    "reload_grains",
    "reload_pillar",
    "runas_password",
    "fire_event",
    "saltenv",
    "umask",
    "use",
    "use_in",
    "__env__",
    "__sls__",
    "__id__",
    "__sls_included_from__",
    "__orchestration_jid__",
    "__prereq__",
    "__prerequired__",
    "__umask__",
];

/// Whether `key` is the engine's rather than the state function's.
pub fn is_internal(key: &str) -> bool {
    REQUISITES.contains(&key) || INTERNAL.contains(&key) || key.starts_with("__pub_")
}

/// The state's tag in a return: `state_|-id_|-name_|-fun`.
pub fn tag(low: &Low) -> String {
    format!(
        "{}_|-{}_|-{}_|-{}",
        text(low, "state"),
        text(low, "__id__"),
        text(low, "name"),
        text(low, "fun")
    )
}

/// A chunk's key as Python's `str()` shows it.
pub fn text(low: &Low, key: &str) -> String {
    text_ref(low, key).into_owned()
}

/// [`text`] without a copy when the value is a string.
pub fn text_ref<'l>(low: &'l Low, key: &str) -> std::borrow::Cow<'l, str> {
    match low.get(key) {
        Some(Value::String(s)) => std::borrow::Cow::Borrowed(s),
        Some(other) => std::borrow::Cow::Owned(py_text(other)),
        None => std::borrow::Cow::Borrowed(""),
    }
}

fn first_key(arg: &Map<String, Value>) -> Option<&str> {
    arg.keys().next().map(String::as_str)
}

/// Salt's `find_name`: the (ID, state) pairs `name` refers to.
fn find_name(name: &str, state: &str, high: &High, strict: bool) -> Vec<(String, String)> {
    let has = high
        .get(name)
        .and_then(Value::as_object)
        .is_some_and(|b| !strict || b.contains_key(state));
    if high.contains_key(name) && has {
        return vec![(name.to_string(), state.to_string())];
    }
    let mut out = Vec::new();
    if state == "sls" {
        for (nid, body) in high {
            let Some(body) = body.as_object() else {
                continue;
            };
            if body.get("__sls__").and_then(Value::as_str) == Some(name) {
                if let Some(first) = body.keys().next() {
                    out.push((nid.clone(), first.clone()));
                }
            }
        }
        return out;
    }
    for (nid, body) in high {
        let Some(args) = body.get(state).and_then(Value::as_array) else {
            continue;
        };
        for arg in args.iter().filter_map(Value::as_object) {
            if arg.len() == 1 && arg.values().next().and_then(Value::as_str) == Some(name) {
                out.push((nid.clone(), state.to_string()));
            }
        }
    }
    out
}

/// Salt's `find_sls_ids`: every (ID, state) of SLS `sls`.
fn find_sls_ids(sls: &str, high: &High) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (nid, body) in high {
        let Some(body) = body.as_object() else {
            continue;
        };
        if body.get("__sls__").and_then(Value::as_str) == Some(sls) {
            for st in body.keys().filter(|k| !k.starts_with("__")) {
                out.push((nid.clone(), st.clone()));
            }
        }
    }
    out
}

/// Salt's `state_args`: the argument names given to `id`'s `state`.
fn state_args(id: &str, state: &str, high: &High) -> Vec<String> {
    high.get(id)
        .and_then(|b| b.get(state))
        .and_then(Value::as_array)
        .map(|args| {
            args.iter()
                .filter_map(Value::as_object)
                .filter(|a| a.len() == 1)
                .filter_map(|a| first_key(a).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Salt's `reconcile_extend`: `__extend__` merged into the states it names.
pub fn reconcile_extend(high: &mut High, strict: bool) -> Vec<String> {
    let mut errors = Vec::new();
    let Some(Value::Array(ext)) = high.remove("__extend__") else {
        return errors;
    };
    let sls_excludes: Vec<String> = high
        .get("__exclude__")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|e| match e {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(m) => m.get("sls").and_then(Value::as_str).map(str::to_string),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for chunk in ext {
        let Value::Object(chunk) = chunk else {
            continue;
        };
        for (name, body) in chunk {
            let Value::Object(body) = body else {
                continue;
            };
            let Some(state_type) = body.keys().find(|k| !k.starts_with("__")).cloned() else {
                continue;
            };
            let mut name = name;
            let present = high
                .get(&name)
                .and_then(Value::as_object)
                .is_some_and(|b| b.contains_key(&state_type));
            if !present {
                let ids = find_name(&name, &state_type, high, strict);
                if ids.len() != 1 {
                    let env = body
                        .get("__env__")
                        .and_then(Value::as_str)
                        .unwrap_or("base");
                    let sls = body
                        .get("__sls__")
                        .and_then(Value::as_str)
                        .unwrap_or("base");
                    errors.push(format!(
                        "Cannot extend ID '{name}' in '{env}:{sls}'. It is not part of the high state.\n\
                         This is likely due to a missing include statement or an incorrectly typed ID.\n\
                         Ensure that a state with an ID of '{name}' is available\n\
                         in environment '{env}' and to SLS '{sls}'"
                    ));
                    continue;
                }
                name = ids[0].0.clone();
            }
            if body
                .get("__sls__")
                .and_then(Value::as_str)
                .is_some_and(|s| sls_excludes.iter().any(|e| e == s))
            {
                continue;
            }
            for (state, run) in body {
                if state.starts_with("__") {
                    continue;
                }
                let Some(target) = high.get_mut(&name).and_then(Value::as_object_mut) else {
                    continue;
                };
                let Some(existing) = target.get_mut(&state).and_then(Value::as_array_mut) else {
                    target.insert(state, run);
                    continue;
                };
                for arg in run.as_array().cloned().unwrap_or_default() {
                    let mut update = false;
                    for slot in existing.iter_mut() {
                        match (&arg, &*slot) {
                            (Value::String(_), Value::String(_)) => {
                                *slot = arg.clone();
                                update = true;
                            }
                            (Value::Object(a), Value::Object(v)) => {
                                let argfirst = first_key(a).unwrap_or_default().to_string();
                                let hfirst = first_key(v).unwrap_or_default().to_string();
                                if argfirst == hfirst {
                                    if REQUISITES.contains(&argfirst.as_str()) {
                                        let add =
                                            a[&argfirst].as_array().cloned().unwrap_or_default();
                                        if let Some(list) =
                                            slot.get_mut(&argfirst).and_then(Value::as_array_mut)
                                        {
                                            list.extend(add);
                                        }
                                    } else {
                                        *slot = arg.clone();
                                    }
                                    update = true;
                                }
                                if argfirst == "name" && hfirst == "names" {
                                    *slot = arg.clone();
                                }
                            }
                            _ => {}
                        }
                    }
                    if !update {
                        existing.push(arg);
                    }
                }
            }
        }
    }
    errors
}

/// Salt's `apply_exclude`: IDs and whole SLS files listed in `__exclude__` removed.
pub fn apply_exclude(high: &mut High) {
    let Some(Value::Array(exclude)) = high.remove("__exclude__") else {
        return;
    };
    let mut ex_sls = Vec::new();
    let mut ex_id = Vec::new();
    for exc in exclude {
        match exc {
            Value::String(s) => ex_sls.push(s),
            Value::Object(m) if m.len() == 1 => {
                if let Some(s) = m.get("sls").and_then(Value::as_str) {
                    ex_sls.push(s.to_string());
                } else if let Some(i) = m.get("id").and_then(Value::as_str) {
                    ex_id.push(i.to_string());
                }
            }
            _ => {}
        }
    }
    if !ex_sls.is_empty() {
        for (name, body) in high.iter() {
            if name.starts_with("__") {
                continue;
            }
            let sls = body.get("__sls__").and_then(Value::as_str).unwrap_or("");
            if !sls.is_empty() && ex_sls.iter().any(|e| fnmatch(e, sls)) {
                ex_id.push(name.clone());
            }
        }
    }
    for id in ex_id {
        high.shift_remove(&id);
    }
}

/// Where `requisite_in` collects what it adds, by ID then state, in Salt's order.
#[derive(Default)]
struct Extend(Vec<(String, Map<String, Value>)>);

impl Extend {
    fn entry(&mut self, id: &str) -> &mut Map<String, Value> {
        if let Some(i) = self.0.iter().position(|(k, _)| k == id) {
            return &mut self.0[i].1;
        }
        self.0.push((id.to_string(), Map::new()));
        &mut self.0.last_mut().expect("just pushed").1
    }

    fn list(&mut self, id: &str, state: &str) -> &mut Vec<Value> {
        let entry = self.entry(id);
        entry
            .entry(state.to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        entry
            .get_mut(state)
            .and_then(Value::as_array_mut)
            .expect("a list")
    }

    /// `{rkey: [{state: id}]}` added to `name`'s `target_state`, or appended to an existing
    /// `rkey` entry.
    fn add_requisite(
        &mut self,
        name: &str,
        target_state: &str,
        rkey: &str,
        reference: Value,
        body: &Map<String, Value>,
    ) {
        self.list(name, target_state);
        let entry = self.entry(name);
        entry.insert(
            "__env__".into(),
            body.get("__env__").cloned().unwrap_or(Value::Null),
        );
        entry.insert(
            "__sls__".into(),
            body.get("__sls__").cloned().unwrap_or(Value::Null),
        );
        let list = self.list(name, target_state);
        let mut found = false;
        for item in list.iter_mut() {
            if let Some(existing) = item.get_mut(rkey).and_then(Value::as_array_mut) {
                existing.push(reference.clone());
                found = true;
            }
        }
        if !found {
            let mut m = Map::new();
            m.insert(rkey.to_string(), Value::Array(vec![reference]));
            list.push(Value::Object(m));
        }
    }
}

fn single(key: &str, value: Value) -> Value {
    let mut m = Map::new();
    m.insert(key.to_string(), value);
    Value::Object(m)
}

/// Salt's `requisite_in`: `require_in`, `watch_in`, `onfail_in`, `onchanges_in`,
/// `prereq(_in)` and `use(_in)` become declarations on the states they name.
pub fn requisite_in(high: &mut High) -> Vec<String> {
    const REQ_IN: &[&str] = &[
        "require_in",
        "watch_in",
        "onfail_in",
        "onchanges_in",
        "use",
        "use_in",
        "prereq",
        "prereq_in",
    ];
    const REQ_IN_ALL_EXTRA: &[&str] = &["require", "watch", "onfail", "onfail_stop", "onchanges"];
    let mut extend = Extend::default();
    let mut errors = Vec::new();
    let snapshot = high.clone();
    for (id, body) in &snapshot {
        let Some(body) = body.as_object() else {
            continue;
        };
        for (state, run) in body {
            if state.starts_with("__") {
                continue;
            }
            for arg in run.as_array().map(Vec::as_slice).unwrap_or_default() {
                let Some(arg) = arg.as_object() else {
                    continue;
                };
                let Some(key) = first_key(arg) else {
                    continue;
                };
                if !REQ_IN.contains(&key) {
                    continue;
                }
                let rkey = key.split('_').next().unwrap_or(key);
                let sls = body.get("__sls__").map(py_text).unwrap_or_default();
                let dotted = |pstate: &str, pname: &str| {
                    format!(
                        "Invalid requisite in {rkey}: {pstate} for {pname}, in SLS '{sls}'. \
                         Requisites must not contain dots, did you mean '{}'?",
                        &pstate[..pstate.find('.').unwrap_or(pstate.len())]
                    )
                };
                match &arg[key] {
                    Value::Object(items) => {
                        for (target_state, name) in items {
                            let name = py_text(name);
                            let mut target_state = target_state.clone();
                            if target_state.contains('.') {
                                errors.push(dotted(&target_state, &name));
                                target_state = target_state
                                    .split('.')
                                    .next()
                                    .unwrap_or_default()
                                    .to_string();
                            }
                            extend.add_requisite(
                                &name,
                                &target_state,
                                rkey,
                                single(state, Value::String(id.clone())),
                                body,
                            );
                        }
                    }
                    Value::Array(items) => {
                        let mut hinges: Vec<(String, String)> = Vec::new();
                        for ind in items {
                            let ind: Map<String, Value> = match ind {
                                Value::Object(m) => m.clone(),
                                other => {
                                    let other = py_text(other);
                                    match resolve_bare(&other, &snapshot) {
                                        Some(m) => m,
                                        None => continue,
                                    }
                                }
                            };
                            let Some((pstate, pname)) = ind.iter().next() else {
                                continue;
                            };
                            let pname = py_text(pname);
                            if pstate == "sls" {
                                hinges = find_sls_ids(&pname, &snapshot);
                            } else {
                                hinges.push((pname.clone(), pstate.clone()));
                            }
                            if pstate.contains('.') {
                                errors.push(dotted(pstate, &pname));
                            }
                            for (name, target_state) in hinges.clone() {
                                match key {
                                    "prereq_in" => {
                                        extend.list(id, state).push(single(
                                            "prerequired",
                                            Value::Array(vec![single(
                                                &target_state,
                                                Value::String(name.clone()),
                                            )]),
                                        ));
                                    }
                                    "prereq" => {
                                        for (ext_id, req_state) in
                                            find_name(&name, &target_state, &snapshot, true)
                                        {
                                            extend.list(&ext_id, &req_state).push(single(
                                                "prerequired",
                                                Value::Array(vec![single(
                                                    state,
                                                    Value::String(id.clone()),
                                                )]),
                                            ));
                                        }
                                        continue;
                                    }
                                    "use_in" | "use" => {
                                        for (ext_id, req_state) in
                                            find_name(&name, &target_state, &snapshot, true)
                                        {
                                            if ext_id.is_empty() {
                                                continue;
                                            }
                                            // `use_in`: our arguments go to them; `use`: theirs
                                            // come to us.
                                            let (to_id, to_state, from_id, from_state) =
                                                if key == "use_in" {
                                                    (
                                                        ext_id.clone(),
                                                        req_state.clone(),
                                                        id.clone(),
                                                        state.clone(),
                                                    )
                                                } else {
                                                    (
                                                        id.clone(),
                                                        state.clone(),
                                                        ext_id.clone(),
                                                        req_state.clone(),
                                                    )
                                                };
                                            let own = state_args(&to_id, &to_state, &snapshot);
                                            extend.list(&to_id, &to_state);
                                            let from_args = snapshot
                                                .get(&from_id)
                                                .and_then(|b| b.get(&from_state))
                                                .and_then(Value::as_array)
                                                .cloned()
                                                .unwrap_or_default();
                                            for a in from_args {
                                                let Some(m) = a.as_object() else {
                                                    continue;
                                                };
                                                if m.len() != 1 {
                                                    continue;
                                                }
                                                let k = first_key(m).unwrap_or_default();
                                                if REQ_IN.contains(&k)
                                                    || REQ_IN_ALL_EXTRA.contains(&k)
                                                    || own.iter().any(|o| o == k)
                                                    || k == "name"
                                                    || k == "names"
                                                {
                                                    continue;
                                                }
                                                extend.list(&to_id, &to_state).push(a.clone());
                                            }
                                        }
                                        continue;
                                    }
                                    _ => {}
                                }
                                extend.add_requisite(
                                    &name,
                                    &target_state,
                                    rkey,
                                    single(state, Value::String(id.clone())),
                                    body,
                                );
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let ext: Vec<Value> = extend
        .0
        .into_iter()
        .map(|(k, v)| single(&k, Value::Object(v)))
        .collect();
    high.insert("__extend__".into(), Value::Array(ext));
    errors.extend(reconcile_extend(high, true));
    errors
}

/// A requisite given as a bare string: the ID of that name, or the ID with a state whose
/// `name` it is.
fn resolve_bare(ind: &str, high: &High) -> Option<Map<String, Value>> {
    if let Some(body) = high.get(ind).and_then(Value::as_object) {
        let first = body.keys().find(|k| !k.starts_with("__"))?;
        let mut m = Map::new();
        m.insert(first.clone(), Value::String(ind.to_string()));
        return Some(m);
    }
    let mut found = None;
    for (id, body) in high {
        let Some(body) = body.as_object() else {
            continue;
        };
        for (st, run) in body.iter().filter(|(k, _)| !k.starts_with("__")) {
            for j in run.as_array().map(Vec::as_slice).unwrap_or_default() {
                if j.get("name").and_then(Value::as_str) == Some(ind) {
                    let mut m = Map::new();
                    m.insert(st.clone(), Value::String(id.clone()));
                    found = Some(m);
                }
            }
        }
    }
    found
}

/// Salt's `compile_high_data`: one chunk per ID, state, name and function, ordered.
pub fn compile_high_data(high: &High) -> Vec<Low> {
    let mut chunks = Vec::new();
    for (name, body) in high {
        if name.starts_with("__") {
            continue;
        }
        let Some(body) = body.as_object() else {
            continue;
        };
        for (state, run) in body {
            if state.starts_with("__") {
                continue;
            }
            let mut funcs: Vec<String> = Vec::new();
            let mut names: Vec<Value> = Vec::new();
            let mut chunk = Low::new();
            chunk.insert("state".into(), Value::String(state.clone()));
            chunk.insert("name".into(), Value::String(name.clone()));
            for key in ["__sls__", "__env__", "__sls_included_from__"] {
                if let Some(v) = body.get(key) {
                    chunk.insert(key.into(), v.clone());
                }
            }
            chunk.insert("__id__".into(), Value::String(name.clone()));
            for arg in run.as_array().map(Vec::as_slice).unwrap_or_default() {
                match arg {
                    Value::String(f) if !funcs.contains(f) => funcs.push(f.clone()),
                    Value::Object(m) => {
                        for (key, val) in m {
                            match key.as_str() {
                                "names" => {
                                    for n in val.as_array().map(Vec::as_slice).unwrap_or_default() {
                                        if !names.contains(n) {
                                            names.push(n.clone());
                                        }
                                    }
                                }
                                "state" => {}
                                "name" if !val.is_string() => {
                                    chunk.insert(key.clone(), Value::String(name.clone()));
                                }
                                _ => {
                                    chunk.insert(key.clone(), val.clone());
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            let mut push = |live: Low| {
                for fun in &funcs {
                    let mut one = live.clone();
                    one.insert("fun".into(), Value::String(fun.clone()));
                    chunks.push(one);
                }
            };
            if names.is_empty() {
                push(chunk);
            } else {
                for (i, entry) in names.iter().enumerate() {
                    let mut live = chunk.clone();
                    match entry {
                        Value::Object(m) if !m.is_empty() => {
                            let (low_name, extra) = m.iter().next().expect("not empty");
                            live.insert("name".into(), Value::String(low_name.clone()));
                            for item in extra.as_array().map(Vec::as_slice).unwrap_or_default() {
                                if let Some(o) = item.as_object() {
                                    live.extend(o.clone());
                                }
                            }
                        }
                        other => {
                            live.insert("name".into(), other.clone());
                        }
                    }
                    live.insert("name_order".into(), Value::from(i as i64 + 1));
                    push(live);
                }
            }
        }
    }
    order_chunks(chunks)
}

/// Salt's `order_chunks`: `order` resolved (`first`, `last`, negative, `name_order`) and the
/// chunks sorted by it, then by state, name and function.
pub fn order_chunks(mut chunks: Vec<Low>) -> Vec<Low> {
    let mut cap: i64 = 1;
    for chunk in &chunks {
        if let Some(order) = chunk.get("order").and_then(Value::as_i64) {
            if order > cap - 1 && order > 0 {
                cap = order + 100;
            }
        }
    }
    for chunk in &mut chunks {
        let Some(order) = chunk.get("order").cloned() else {
            chunk.insert("order".into(), Value::from(cap));
            continue;
        };
        let mut order = match &order {
            Value::Number(n) => n.clone(),
            Value::String(s) if s == "last" => (cap + 1_000_000).into(),
            Value::String(s) if s == "first" => 0.into(),
            _ => cap.into(),
        };
        if let Some(name_order) = chunk.remove("name_order").and_then(|v| v.as_f64()) {
            let f = order.as_f64().unwrap_or(0.0) + name_order / 10000.0;
            order = serde_json::Number::from_f64(f).unwrap_or_else(|| 0.into());
        }
        if order.as_f64().unwrap_or(0.0) < 0.0 {
            order = match order.as_i64() {
                Some(i) => (cap + 1_000_000 + i).into(),
                None => serde_json::Number::from_f64(
                    (cap + 1_000_000) as f64 + order.as_f64().unwrap_or(0.0),
                )
                .unwrap_or_else(|| 0.into()),
            };
        }
        chunk.insert("order".into(), Value::Number(order));
    }
    chunks.sort_by(|a, b| {
        let key = |c: &Low| {
            (
                c.get("order").and_then(Value::as_f64).unwrap_or(0.0),
                format!("{}{}{}", text(c, "state"), text(c, "name"), text(c, "fun")),
            )
        };
        let (oa, la) = key(a);
        let (ob, lb) = key(b);
        oa.total_cmp(&ob).then(la.cmp(&lb))
    });
    chunks
}
