//! SLS files to high data: Salt 3007's `BaseHighState.render_highstate` and `render_state`,
//! with their error texts.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use brine_protocol::target::fnmatch;
use brine_render::{Context, Functions, Loader};
use serde_json::{json, Map, Value};

use crate::High;

/// Where an SLS name was found: the file's path under its root, and whether it is an
/// `init.sls`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlsFile {
    pub rel: String,
    pub init: bool,
}

/// The state tree, by saltenv (a file server).
pub trait Tree: Loader {
    /// Salt's `list_states`: the SLS names of `saltenv`, `None` for an unknown saltenv.
    fn sls_names(&self, saltenv: &str) -> Option<Vec<String>>;
    /// Salt's `get_state`: the file of SLS `sls` (`a/b.sls` before `a/b/init.sls`).
    fn sls_file(&self, sls: &str, saltenv: &str) -> Option<SlsFile>;
}

/// The SLS names of a saltenv's file list (`a/b.sls` is `a.b`, `a/init.sls` is `a`).
pub fn sls_names_of(files: &[String]) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| f.strip_suffix(".sls"))
        .map(|f| f.strip_suffix("/init").unwrap_or(f).replace('/', "."))
        .collect()
}

/// Salt's `get_state` over a saltenv: `a/b.sls` before `a/b/init.sls`, for the files
/// `exists` says are there.
pub fn sls_file_in(sls: &str, exists: impl Fn(&str) -> bool) -> Option<SlsFile> {
    let base = sls.replace('.', "/");
    [
        (format!("{base}.sls"), false),
        (format!("{base}/init.sls"), true),
    ]
    .into_iter()
    .find(|(rel, _)| exists(rel))
    .map(|(rel, init)| SlsFile { rel, init })
}

/// Include levels followed at most.
const MAX_DEPTH: usize = 64;

/// One compilation of high data.
pub struct Compiler {
    tree: Arc<dyn Tree>,
    loader: Arc<dyn Loader>,
    functions: Arc<dyn Functions>,
    /// What templates see; `saltenv` and `sls` are set for each file.
    ctx: Context,
    /// Salt's `state_auto_order` (default true).
    pub auto_order: bool,
    iorder: i64,
    avail: HashMap<String, Vec<String>>,
}

impl Compiler {
    /// A compiler over `tree` for the saltenvs `envs`, rendering with `ctx`.
    pub fn new<T: Tree + 'static>(
        tree: Arc<T>,
        envs: &[String],
        functions: Arc<dyn Functions>,
        ctx: Context,
    ) -> Compiler {
        let avail = envs
            .iter()
            .map(|env| (env.clone(), tree.sls_names(env).unwrap_or_default()))
            .collect();
        Compiler {
            loader: tree.clone(),
            tree,
            functions,
            ctx,
            auto_order: true,
            iorder: 10_000,
            avail,
        }
    }

    fn avail(&self, env: &str) -> &[String] {
        self.avail.get(env).map_or(&[], Vec::as_slice)
    }

    /// The high data of `matches` (as [`Compiler::render_highstate`] renders it) with
    /// `exclude` (IDs or SLS names, as `state.sls exclude=` takes them) added to what the
    /// files exclude, checked as Salt checks it: the high data, or every error found.
    pub fn compile(
        &mut self,
        matches: &[(String, Vec<String>)],
        exclude: &[Value],
    ) -> Result<High, Vec<String>> {
        let (mut high, mut errors) = self.render_highstate(matches);
        if !exclude.is_empty() {
            let mut all = high
                .get("__exclude__")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            all.extend(exclude.iter().cloned());
            high.insert("__exclude__".into(), Value::Array(all));
        }
        errors.extend(crate::verify_high(&high));
        if errors.is_empty() {
            Ok(high)
        } else {
            Err(errors)
        }
    }

    /// Salt's `render_highstate`: the SLS names (globs) of each saltenv rendered and merged.
    pub fn render_highstate(&mut self, matches: &[(String, Vec<String>)]) -> (High, Vec<String>) {
        let mut high = High::new();
        let mut all_errors = Vec::new();
        let mut mods = HashSet::new();
        let match_envs: Vec<String> = matches.iter().map(|(e, _)| e.clone()).collect();
        for (saltenv, states) in matches {
            for sls_match in states {
                let mut statefiles: Vec<String> = if self.avail.contains_key(saltenv) {
                    filter(self.avail(saltenv), sls_match)
                } else if self.avail.contains_key("__env__") {
                    filter(self.avail("__env__"), sls_match)
                } else {
                    all_errors.push(format!(
                        "No matching salt environment for environment '{saltenv}' found"
                    ));
                    Vec::new()
                };
                if statefiles.is_empty() {
                    statefiles.push(sls_match.clone());
                }
                for sls in statefiles {
                    if mods.contains(&format!("{saltenv}:{sls}")) {
                        continue;
                    }
                    let (state, mut errors) =
                        self.render_state(&sls, saltenv, &mut mods, &match_envs, 0);
                    if !state.is_empty() {
                        merge_included_states(&mut high, state, &mut errors);
                    }
                    let this_sls = format!("SLS {sls_match} in saltenv");
                    for e in &mut errors {
                        if e.contains("is not available") && e.contains(&this_sls) {
                            *e = format!(
                                "No matching sls found for '{sls_match}' in env '{saltenv}'"
                            );
                        }
                    }
                    all_errors.extend(errors);
                }
            }
        }
        clean_duplicate_extends(&mut high);
        (high, all_errors)
    }

    /// Render one SLS file to data (an empty mapping for an empty file).
    /// An SLS file rendered, or Salt's "Rendering SLS '<saltenv>:<sls>' failed: ..." error.
    fn render_file(&self, rel: &str, saltenv: &str, sls: &str) -> Result<Value, String> {
        let loaded = self
            .loader
            .load(saltenv, rel)
            .map_err(|e| format!("Rendering SLS '{saltenv}:{sls}' failed: {e}"))?;
        let Some(text) = loaded else {
            return Ok(json!({}));
        };
        if text.trim().is_empty() {
            return Ok(json!({}));
        }
        let ctx = Context {
            saltenv: saltenv.to_string(),
            sls: sls.to_string(),
            ..self.ctx.clone()
        };
        brine_render::render_sls(
            &text,
            rel,
            &ctx,
            self.loader.clone(),
            self.functions.clone(),
        )
        .map_err(|e| e.to_string())
    }

    /// Salt's `render_state`: one SLS and its includes.
    fn render_state(
        &mut self,
        sls: &str,
        saltenv: &str,
        mods: &mut HashSet<String>,
        matches: &[String],
        depth: usize,
    ) -> (High, Vec<String>) {
        let mut errors = Vec::new();
        let file = self.tree.sls_file(sls, saltenv);
        let mut state = Value::Null;
        match &file {
            None => errors.push(format!(
                "Specified SLS {sls} in saltenv {saltenv} is not available on the salt master or through a configured fileserver"
            )),
            Some(f) => {
                match self.render_file(&f.rel, saltenv, sls) {
                    Ok(v) => state = v,
                    Err(e) => errors.push(e),
                }
                mods.insert(format!("{saltenv}:{sls}"));
            }
        }
        if !brine_protocol::payload::json_truthy(&state) {
            return (High::new(), errors);
        }
        let Value::Object(mut state) = state else {
            errors.push(format!("SLS {sls} does not render to a dictionary"));
            // Salt goes on with it and fails to merge it into the highstate.
            errors.push(format!(
                "Error when rendering state with contents: {}",
                crate::verify::py_repr(&state)
            ));
            return (High::new(), errors);
        };
        let mut include = Vec::new();
        match state.get("include") {
            None => {}
            Some(Value::Array(_)) => {
                if let Some(Value::Array(items)) = state.shift_remove("include") {
                    include = items;
                }
            }
            Some(_) => errors.push(format!(
                "Include Declaration in SLS {sls} is not formed as a list"
            )),
        }
        handle_extend(&mut state, sls, saltenv, &mut errors);
        handle_exclude(&mut state, sls, &mut errors);
        handle_state_decls(&mut state, sls, saltenv, &mut errors);
        if depth >= MAX_DEPTH && !include.is_empty() {
            errors.push(format!(
                "SLS {sls} includes more than {MAX_DEPTH} levels deep"
            ));
            include.clear();
        }
        for inc in include {
            let (env_key, mut inc_sls) = match inc {
                Value::Object(m) if !m.is_empty() => {
                    let (k, v) = m.into_iter().next_back().expect("not empty");
                    (k, text(&v))
                }
                other => (saltenv.to_string(), text(&other)),
            };
            if !self.avail.contains_key(&env_key) && !self.avail.contains_key("__env__") {
                errors.push(format!(
                    "Nonexistent saltenv '{env_key}' found in include of '{inc_sls}' within SLS '{saltenv}:{sls}'"
                ));
                continue;
            }
            if inc_sls.starts_with('.') {
                let rest = inc_sls.trim_start_matches('.');
                let levels = inc_sls.len() - rest.len();
                let mut comps: Vec<&str> = sls.split('.').collect();
                if file.as_ref().is_some_and(|f| f.init) {
                    comps.push("init");
                }
                if levels > comps.len() {
                    errors.push(format!(
                        "Attempted relative include of '{inc_sls}' within SLS '{saltenv}:{sls}' goes beyond top level package "
                    ));
                    continue;
                }
                comps.truncate(comps.len() - levels);
                comps.push(rest);
                inc_sls = comps.join(".");
            }
            let resolved: Vec<String> = if env_key != "_xenv" {
                if matches.contains(&env_key) || !filter(self.avail(&env_key), &inc_sls).is_empty()
                {
                    vec![env_key.clone()]
                } else {
                    Vec::new()
                }
            } else {
                matches
                    .iter()
                    .filter(|env| !filter(self.avail(env), &inc_sls).is_empty())
                    .cloned()
                    .collect()
            };
            if resolved.len() == 1 || resolved.iter().any(|e| e == saltenv) {
                let mut targets = filter(self.avail(saltenv), &inc_sls);
                if targets.is_empty() {
                    targets.push(inc_sls.clone());
                }
                let r_env = if resolved.len() == 1 {
                    resolved[0].clone()
                } else {
                    saltenv.to_string()
                };
                for target in targets {
                    if mods.contains(&format!("{r_env}:{target}")) {
                        continue;
                    }
                    let (mut nstate, err) =
                        self.render_state(&target, &r_env, mods, matches, depth + 1);
                    if !nstate.is_empty() {
                        for (id, body) in nstate.iter_mut() {
                            if id.starts_with("__") {
                                continue;
                            }
                            if let Value::Object(body) = body {
                                let from = body
                                    .entry("__sls_included_from__")
                                    .or_insert_with(|| json!([]));
                                if let Value::Array(list) = from {
                                    list.push(Value::from(sls));
                                }
                            }
                        }
                        merge_included_states(&mut state, nstate, &mut errors);
                    }
                    errors.extend(err);
                }
            } else {
                let msg = if resolved.is_empty() {
                    let envs = if env_key == "_xenv" {
                        matches.join(", ")
                    } else {
                        env_key.clone()
                    };
                    format!(
                        "Unknown include: Specified SLS {env_key}: {inc_sls} is not available on the salt master in saltenv(s): {envs} "
                    )
                } else {
                    format!(
                        "Ambiguous include: Specified SLS {env_key}: {inc_sls} is available on the salt master in multiple available saltenvs: {}",
                        resolved.join(", ")
                    )
                };
                errors.push(msg);
            }
        }
        if self.auto_order {
            self.handle_iorder(&mut state);
        }
        (state, errors)
    }

    /// Salt's `_handle_iorder`: every state without an `order` gets the next one.
    fn handle_iorder(&mut self, state: &mut High) {
        for body in state.values_mut() {
            let Value::Object(body) = body else { continue };
            for (s_dec, args) in body.iter_mut() {
                if s_dec.starts_with('_') {
                    continue;
                }
                let Value::Array(args) = args else { continue };
                let found = args.iter().any(|a| {
                    a.as_object()
                        .and_then(|m| m.keys().next())
                        .is_some_and(|k| k == "order")
                });
                if !found {
                    args.push(json!({"order": self.iorder}));
                    self.iorder += 1;
                }
            }
        }
    }
}

/// `fnmatch.filter(names, pattern)`.
fn filter(names: &[String], pattern: &str) -> Vec<String> {
    names
        .iter()
        .filter(|n| fnmatch(pattern, n))
        .cloned()
        .collect()
}

/// Python's `str()` of a scalar from YAML.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Salt's `_handle_state_decls`: `pkg.installed` declarations split into the state and its
/// function, `__sls__` and `__env__` added.
fn handle_state_decls(state: &mut High, sls: &str, saltenv: &str, errors: &mut Vec<String>) {
    let names: Vec<String> = state.keys().cloned().collect();
    for name in names {
        let body = state.get_mut(&name).expect("a key of the map");
        let Value::Object(decls) = body else {
            if name == "__extend__" || name == "__exclude__" {
                continue;
            }
            if let Value::String(short) = body {
                if let Some((module, fun)) = short.split_once('.') {
                    let mut m = Map::new();
                    m.insert("__sls__".into(), sls.into());
                    m.insert("__env__".into(), saltenv.into());
                    let fun = fun.split('.').next().unwrap_or_default();
                    m.insert(module.to_string(), json!([fun]));
                    *body = Value::Object(m);
                    continue;
                }
            }
            errors.push(format!("ID {name} in SLS {sls} is not a dictionary"));
            continue;
        };
        let mut seen: HashSet<String> = HashSet::new();
        let keys: Vec<String> = decls.keys().cloned().collect();
        for key in keys {
            if key.starts_with('_') || !decls[&key].is_array() {
                continue;
            }
            if let Some((module, _)) = key.split_once('.') {
                let module = module.to_string();
                if seen.contains(&module) {
                    errors.push(format!(
                        "ID '{name}' in SLS '{sls}' contains multiple state declarations of the same type"
                    ));
                    continue;
                }
                split_declaration(decls, &key);
                seen.insert(module);
                continue;
            }
            seen.insert(key);
        }
        decls.entry("__sls__").or_insert_with(|| sls.into());
        decls.entry("__env__").or_insert_with(|| saltenv.into());
    }
}

/// `pkg.installed: [args]` becomes `pkg: [args, installed]`; an existing `pkg` keeps its
/// place (a Python dict assignment), a new one goes last.
fn split_declaration(decls: &mut Map<String, Value>, key: &str) {
    let mut parts = key.split('.');
    let module = parts.next().unwrap_or_default().to_string();
    let fun = parts.next().unwrap_or_default().to_string();
    let mut args = decls.shift_remove(key).unwrap_or_default();
    if let Value::Array(a) = &mut args {
        a.push(Value::from(fun));
    }
    decls.insert(module, args);
}

/// Salt's `_handle_extend`: `extend:` moved to `__extend__`.
fn handle_extend(state: &mut High, sls: &str, saltenv: &str, errors: &mut Vec<String>) {
    let Some(ext) = state.shift_remove("extend") else {
        return;
    };
    let Value::Object(mut ext) = ext else {
        errors.push(format!(
            "Extension value in SLS '{sls}' is not a dictionary"
        ));
        return;
    };
    for (name, body) in ext.iter_mut() {
        let Value::Object(decls) = body else {
            errors.push(format!(
                "Extension name '{name}' in SLS '{sls}' is not a dictionary"
            ));
            continue;
        };
        decls.entry("__sls__").or_insert_with(|| sls.into());
        decls.entry("__env__").or_insert_with(|| saltenv.into());
        let keys: Vec<String> = decls.keys().cloned().collect();
        for key in keys {
            if key.starts_with('_') || !decls[&key].is_array() {
                continue;
            }
            if key.contains('.') {
                split_declaration(decls, &key);
            }
        }
    }
    push_list(state, "__extend__", vec![Value::Object(ext)]);
}

/// Salt's `_handle_exclude`: `exclude:` moved to `__exclude__`.
fn handle_exclude(state: &mut High, sls: &str, errors: &mut Vec<String>) {
    let Some(exc) = state.shift_remove("exclude") else {
        return;
    };
    match exc {
        Value::Array(items) => push_list(state, "__exclude__", items),
        _ => errors.push(format!(
            "Exclude Declaration in SLS {sls} is not formed as a list"
        )),
    }
}

fn push_list(state: &mut High, key: &str, items: Vec<Value>) {
    match state.entry(key).or_insert_with(|| json!([])) {
        Value::Array(list) => list.extend(items),
        other => *other = Value::Array(items),
    }
}

/// Salt's `merge_included_states`: `state` merged into `high`; the same ID with other
/// contents is a conflict.
fn merge_included_states(high: &mut High, mut state: High, errors: &mut Vec<String>) {
    for key in ["__extend__", "__exclude__"] {
        if let Some(Value::Array(items)) = state.shift_remove(key) {
            push_list(high, key, items);
        }
    }
    for (id, body) in &state {
        if let Some(existing) = high.get(id) {
            if existing != body {
                let field = |v: &Value, k: &str| v.get(k).map_or_else(|| "None".to_string(), text);
                errors.push(format!(
                    "Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting ID is '{id}' and is found in SLS '{}:{}' and SLS '{}:{}'",
                    field(existing, "__env__"),
                    field(existing, "__sls__"),
                    field(body, "__env__"),
                    field(body, "__sls__"),
                ));
            }
        }
    }
    for (id, body) in state {
        high.insert(id, body);
    }
}

/// Salt's `clean_duplicate_extends`.
fn clean_duplicate_extends(high: &mut High) {
    let Some(Value::Array(exts)) = high.get("__extend__") else {
        return;
    };
    let mut seen: Vec<(String, Value)> = Vec::new();
    for ext in exts {
        if let Value::Object(m) = ext {
            for (k, v) in m {
                if !seen.iter().any(|(sk, sv)| sk == k && sv == v) {
                    seen.push((k.clone(), v.clone()));
                }
            }
        }
    }
    let cleaned = seen
        .into_iter()
        .map(|(k, v)| {
            let mut m = Map::new();
            m.insert(k, v);
            Value::Object(m)
        })
        .collect();
    high.insert("__extend__".into(), Value::Array(cleaned));
}
