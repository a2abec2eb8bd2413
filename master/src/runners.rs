//! Runner functions (`jobs.*`, `manage.*`), run next to the master's state in a task of its
//! runtime. A runner call answers `{tag, jid}` at once; its result travels on the event bus as
//! `salt/run/<jid>/ret`, as with Salt.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use brine_protocol::jid::{gen_jid, jid_to_time};
use brine_protocol::payload::{get, get_str, map, set, Value};

use crate::master::{str_value, Master};
use crate::wheel::Args;

/// Every runner function Brine has, with its documentation (`doc.runner`).
pub use brine_protocol::catalog::RUNNERS as FUNCTIONS;

type MapPairs = Vec<(Value, Value)>;

/// What came back from an in-process job.
pub struct LocalResult {
    pub jid: Option<String>,
    pub minions: Vec<String>,
    /// Return loads by minion id, in arrival order.
    pub returns: Vec<(String, Value)>,
}

fn ids(list: &[String]) -> Value {
    Value::Array(list.iter().cloned().map(Value::from).collect())
}

/// Salt's `format_job_instance`: how `jobs.list_jobs` shows one job.
pub fn job_summary(jid: &str, load: &Value) -> Vec<(Value, Value)> {
    let field = |k: &str, default: Value| get(load, k).cloned().unwrap_or(default);
    let mut v = vec![
        (
            Value::from("Function"),
            field("fun", Value::from("unknown-function")),
        ),
        (Value::from("Arguments"), field("arg", Value::Array(vec![]))),
        (
            Value::from("Target"),
            field("tgt", Value::from("unknown-target")),
        ),
        (
            Value::from("Target-type"),
            field("tgt_type", Value::from("list")),
        ),
        (Value::from("User"), field("user", Value::from("root"))),
    ];
    if let Some(md) =
        get(load, "metadata").or_else(|| get(load, "kwargs").and_then(|k| get(k, "metadata")))
    {
        v.push((Value::from("Metadata"), md.clone()));
    }
    v.push((
        Value::from("StartTime"),
        Value::from(jid_to_time(jid).unwrap_or_default()),
    ));
    v
}

impl Master {
    /// The clear `runner` command.
    pub fn clear_runner(&self, load: Value) -> Value {
        let Some(user) = self.authenticate_key(&load) else {
            tracing::warn!("runner call refused: bad root key");
            return Master::auth_error("AuthenticationError");
        };
        let Some(me) = self.arc() else {
            return Master::auth_error("AuthenticationError");
        };
        let fun = get_str(&load, "fun").unwrap_or("").to_string();
        // Salt's runner client sends {"fun", "kwarg": {"arg": [...], "kwarg": {...}}}.
        let call = match get(&load, "kwarg") {
            Some(kw @ Value::Map(_)) => {
                let mut flat = kw.clone();
                if let Some(inner @ Value::Map(_)) = get(kw, "kwarg").cloned() {
                    brine_protocol::payload::remove(&mut flat, "kwarg");
                    if let Value::Map(m) = inner {
                        for (k, v) in m {
                            if let Some(k) = str_value(&k) {
                                set(&mut flat, k, v);
                            }
                        }
                    }
                }
                flat
            }
            _ => load.clone(),
        };
        let args = Args::from_flat_load(&call);
        let jid = get_str(&load, "jid")
            .filter(|j| !j.is_empty())
            .map(str::to_string)
            .unwrap_or_else(gen_jid);
        let tag = format!("salt/run/{jid}");
        let jid2 = jid.clone();
        self.rt.spawn(async move {
            me.run_runner_job(&jid2, &fun, args, &user).await;
        });
        map(vec![("tag", Value::from(tag)), ("jid", Value::from(jid))])
    }

    /// Run a runner as a job: events `salt/run/<jid>/new` and `/ret`, and the job store.
    pub async fn run_runner_job(self: &Arc<Self>, jid: &str, fun: &str, args: Args, user: &str) {
        let mut fun_args: Vec<Value> = args.args.clone();
        if !args.kwargs.is_empty() {
            fun_args.push(Value::Map(
                args.kwargs
                    .iter()
                    .map(|(k, v)| (Value::from(k.as_str()), v.clone()))
                    .collect(),
            ));
        }
        let head = vec![
            ("fun", Value::from(format!("runner.{fun}"))),
            ("jid", Value::from(jid)),
            ("user", Value::from(user)),
            ("fun_args", Value::Array(fun_args.clone())),
        ];
        self.bus
            .fire(&format!("salt/run/{jid}/new"), map(head.clone()));
        let (ret, success) = match self.run_runner(jid, fun, &args).await {
            Ok(v) => (v, true),
            Err(msg) => (Value::from(msg), false),
        };
        let mut data = head.clone();
        data.push(("return", ret));
        data.push(("success", Value::from(success)));
        let data = map(data);
        self.bus.fire(&format!("salt/run/{jid}/ret"), data.clone());
        if self.cfg.job_cache {
            let load = map(vec![
                ("id", Value::from(self.cfg.id.clone())),
                ("tgt", Value::from(self.cfg.id.clone())),
                ("jid", Value::from(jid)),
                ("fun", Value::from(format!("runner.{fun}"))),
                ("arg", Value::Array(fun_args)),
                ("tgt_type", Value::from("list")),
                ("user", Value::from(user)),
            ]);
            let _ = self.store.save_load(jid, &load, &[]);
            let ret = map(vec![
                ("id", Value::from(self.cfg.id.clone())),
                ("jid", Value::from(jid)),
                ("fun", Value::from(format!("runner.{fun}"))),
                ("return", data),
                ("success", Value::from(success)),
            ]);
            let _ = self.store.save_return(&ret);
        }
    }

    /// Publish a job from inside the master and gather its returns until every expected
    /// minion answered or `timeout` passed.
    pub async fn local_cmd(
        self: &Arc<Self>,
        tgt: Value,
        tgt_type: &str,
        fun: &str,
        arg: Vec<Value>,
        timeout: Duration,
    ) -> LocalResult {
        let expected = match self.check_minions(&tgt, tgt_type, ":") {
            Ok(e) => e,
            Err(_) => {
                return LocalResult {
                    jid: None,
                    minions: vec![],
                    returns: vec![],
                }
            }
        };
        if expected.minions.is_empty() {
            return LocalResult {
                jid: None,
                minions: vec![],
                returns: vec![],
            };
        }
        let mut rx = self.bus.subscribe();
        let load = map(vec![
            ("cmd", Value::from("publish")),
            ("tgt", tgt),
            ("fun", Value::from(fun)),
            ("arg", Value::Array(arg)),
            ("tgt_type", Value::from(tgt_type)),
            ("ret", Value::from("")),
            ("jid", Value::from("")),
            ("user", Value::from("root")),
        ]);
        let jid = self.publish_job(load, expected.minions.clone(), vec![]);
        let prefix = format!("salt/job/{jid}/ret/");
        let mut returns: Vec<(String, Value)> = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while returns.len() < expected.minions.len() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Ok(ev)) => {
                    if let Some(id) = ev.tag.strip_prefix(&prefix) {
                        if expected.minions.iter().any(|m| m == id)
                            && !returns.iter().any(|(r, _)| r == id)
                        {
                            returns.push((id.to_string(), ev.data.clone()));
                        }
                    }
                }
                Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(n))) => {
                    tracing::warn!("runner missed {n} events while waiting for {jid}");
                }
                Ok(Err(_)) | Err(_) => break,
            }
        }
        LocalResult {
            jid: Some(jid),
            minions: expected.minions,
            returns,
        }
    }

    fn job_result(&self, jid: &str) -> Vec<(Value, Value)> {
        self.store
            .get_returns(jid)
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                let mut m = Vec::new();
                for k in ["return", "retcode", "success", "out"] {
                    if let Some(v) = get(&r.full_ret, k) {
                        m.push((Value::from(k), v.clone()));
                    }
                }
                (Value::from(r.id), Value::Map(m))
            })
            .collect()
    }

    fn list_job(&self, jid: &str) -> Result<Value, String> {
        let mut out = vec![(Value::from("jid"), Value::from(jid))];
        match self.store.get_load(jid).map_err(|e| e.to_string())? {
            Some((load, minions)) => {
                let summary = job_summary(jid, &load);
                let (start, rest): (Vec<_>, Vec<_>) = summary
                    .into_iter()
                    .partition(|(k, _)| str_value(k) == Some("StartTime"));
                out.extend(rest);
                out.push((Value::from("Minions"), ids(&minions)));
                out.extend(start);
            }
            None => {
                // As Salt: the error, the start time the jid spells, and an empty result.
                out.push((
                    Value::from("Error"),
                    Value::from("Cannot contact returner or no job with this jid"),
                ));
                out.push((
                    Value::from("StartTime"),
                    Value::from(jid_to_time(jid).unwrap_or_default()),
                ));
            }
        }
        out.push((Value::from("Result"), Value::Map(self.job_result(jid))));
        Ok(Value::Map(out))
    }

    /// Run one runner function.
    pub async fn run_runner(
        self: &Arc<Self>,
        jid: &str,
        fun: &str,
        a: &Args,
    ) -> Result<Value, String> {
        let timeout = a
            .get(99, "timeout")
            .and_then(|v| crate::master::int_value(Some(v)))
            .map(|t| t.max(1) as u64)
            .unwrap_or(self.cfg.timeout);
        let timeout = Duration::from_secs(timeout);
        let need_jid = || {
            a.get_str(0, "jid")
                .ok_or_else(|| format!("{fun} requires a 'jid' argument"))
        };
        match fun {
            "jobs.list_jobs" => {
                // Each search is a glob, a list of globs or a comma-separated string of them;
                // a job matches when any glob matches (any of its targets, for a list target).
                let search_fun = a.get_list(99, "search_function");
                let search_tgt = a.get_list(99, "search_target");
                let any = |globs: &[String], texts: &[String]| {
                    globs
                        .iter()
                        .any(|g| texts.iter().any(|t| brine_protocol::target::fnmatch(g, t)))
                };
                let jobs = self.store.list_jobs(0).map_err(|e| e.to_string())?;
                let mut out = Vec::new();
                for (jid, load) in jobs.into_iter().rev() {
                    let f = get(&load, "fun").map(value_text).unwrap_or_default();
                    let targets: Vec<String> = match get(&load, "tgt") {
                        Some(Value::Array(items)) => items.iter().map(value_text).collect(),
                        Some(t) => vec![value_text(t)],
                        None => vec![],
                    };
                    if search_fun.as_deref().is_some_and(|g| !any(g, &[f]))
                        || search_tgt.as_deref().is_some_and(|g| !any(g, &targets))
                    {
                        continue;
                    }
                    out.push((
                        Value::from(jid.clone()),
                        Value::Map(job_summary(&jid, &load)),
                    ));
                }
                Ok(Value::Map(out))
            }
            "jobs.lookup_jid" => {
                let jid = need_jid()?;
                let mut out = Vec::new();
                for r in self.store.get_returns(&jid).map_err(|e| e.to_string())? {
                    let ret = get(&r.full_ret, "return").cloned().unwrap_or(Value::Nil);
                    out.push((Value::from(r.id), ret));
                }
                if a.get_bool(1, "missing") {
                    if let Some((_, minions)) =
                        self.store.get_load(&jid).map_err(|e| e.to_string())?
                    {
                        for m in minions {
                            if !out.iter().any(|(k, _)| str_value(k) == Some(m.as_str())) {
                                out.push((
                                    Value::from(m),
                                    Value::from("Minion did not return. [No response]"),
                                ));
                            }
                        }
                    }
                }
                Ok(Value::Map(out))
            }
            "jobs.list_job" => self.list_job(&need_jid()?),
            "jobs.print_job" => {
                let jid = need_jid()?;
                let mut job = self.list_job(&jid)?;
                brine_protocol::payload::remove(&mut job, "jid");
                Ok(map(vec![(jid.as_str(), job)]))
            }
            "jobs.active" => {
                let res = self
                    .local_cmd(
                        Value::from("*"),
                        "glob",
                        "saltutil.running",
                        vec![],
                        timeout,
                    )
                    .await;
                // jid -> (job summary, [{minion: pid}]), in order of discovery.
                let mut active: Vec<(String, MapPairs, Vec<Value>)> = Vec::new();
                for (id, ret) in &res.returns {
                    let Some(Value::Array(jobs)) = get(ret, "return") else {
                        continue;
                    };
                    for job in jobs {
                        let Some(jid) = get_str(job, "jid") else {
                            continue;
                        };
                        let pid = get(job, "pid").cloned().unwrap_or(Value::Nil);
                        let entry = map(vec![(id.as_str(), pid)]);
                        match active.iter_mut().find(|(j, _, _)| j == jid) {
                            Some((_, _, running)) => running.push(entry),
                            None => {
                                active.push((jid.to_string(), job_summary(jid, job), vec![entry]))
                            }
                        }
                    }
                }
                let mut out = Vec::new();
                for (jid, mut summary, running) in active {
                    if let Ok(Some((load, _))) = self.store.get_load(&jid) {
                        summary = job_summary(&jid, &load);
                    }
                    let returned: Vec<Value> = self
                        .store
                        .get_returns(&jid)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|r| Value::from(r.id))
                        .collect();
                    summary.push((Value::from("Running"), Value::Array(running)));
                    summary.push((Value::from("Returned"), Value::Array(returned)));
                    out.push((Value::from(jid), Value::Map(summary)));
                }
                Ok(Value::Map(out))
            }
            "manage.status" | "manage.up" | "manage.down" => {
                let res = self
                    .local_cmd(Value::from("*"), "glob", "test.ping", vec![], timeout)
                    .await;
                let mut up: Vec<String> = res.returns.iter().map(|(id, _)| id.clone()).collect();
                up.sort();
                let mut down: Vec<String> = self
                    .keys
                    .accepted()
                    .into_iter()
                    .filter(|id| !up.contains(id))
                    .collect();
                down.sort();
                Ok(match fun {
                    "manage.up" => ids(&up),
                    "manage.down" => ids(&down),
                    _ => map(vec![("up", ids(&up)), ("down", ids(&down))]),
                })
            }
            "manage.present" | "manage.alived" => {
                let mut c = self.connected_ids();
                c.sort();
                Ok(ids(&c))
            }
            "manage.versions" => {
                let res = self
                    .local_cmd(Value::from("*"), "glob", "test.version", vec![], timeout)
                    .await;
                let master_version = brine_protocol::SALT_VERSION;
                let mut groups: HashMap<&str, Vec<(Value, Value)>> = HashMap::new();
                let mut answered: Vec<&(String, Value)> = res.returns.iter().collect();
                answered.sort_by(|a, b| a.0.cmp(&b.0));
                for (id, ret) in answered {
                    let retcode = crate::master::int_value(get(ret, "retcode")).unwrap_or(0);
                    let (label, v) = match get_str(ret, "return") {
                        Some(v) if retcode == 0 => {
                            let label = match compare_versions(v, master_version) {
                                std::cmp::Ordering::Less => "Minion requires update",
                                std::cmp::Ordering::Equal => "Up to date",
                                std::cmp::Ordering::Greater => "Minion newer than master",
                            };
                            (label, Value::from(v))
                        }
                        _ => ("Minion offline", Value::from(false)),
                    };
                    groups
                        .entry(label)
                        .or_default()
                        .push((Value::from(id.as_str()), v));
                }
                let mut down: Vec<String> = res
                    .minions
                    .iter()
                    .filter(|m| !res.returns.iter().any(|(id, _)| id == *m))
                    .cloned()
                    .collect();
                down.sort();
                for id in down {
                    groups
                        .entry("Minion offline")
                        .or_default()
                        .push((Value::from(id), Value::from(false)));
                }
                let mut out = Vec::new();
                for label in [
                    "Minion offline",
                    "Minion requires update",
                    "Up to date",
                    "Minion newer than master",
                ] {
                    if let Some(g) = groups.remove(label) {
                        out.push((Value::from(label), Value::Map(g)));
                    }
                }
                out.push((Value::from("Master"), Value::from(master_version)));
                Ok(Value::Map(out))
            }
            "state.orchestrate_show_sls" => Ok(self.orchestrate_show_sls(a)),
            "doc.runner" => Ok(docs(FUNCTIONS)),
            "doc.wheel" => Ok(docs(crate::wheel::FUNCTIONS)),
            "test.arg" => {
                // Salt's runner drops its private `__`-keys from the keyword arguments.
                let kwargs = args_kwargs(a, |k| !k.starts_with("__"));
                Ok(map(vec![
                    ("args", Value::Array(a.args.clone())),
                    ("kwargs", kwargs),
                ]))
            }
            "test.raw_arg" => Ok(map(vec![
                ("args", Value::Array(a.args.clone())),
                ("kwargs", args_kwargs(a, |_| true)),
            ])),
            "test.get_opts" => self.run_wheel("config.values", &Args::default()),
            "test.metasyntactic" => {
                let locality = a.get_str(0, "locality").unwrap_or_else(|| "us".into());
                let words: &[&str] = match locality.as_str() {
                    "us" => &[
                        "foo", "bar", "baz", "qux", "quux", "quuz", "corge", "grault", "garply",
                        "waldo", "fred", "plugh", "xyzzy", "thud",
                    ],
                    "uk" => &["wibble", "wobble", "wubble", "flob"],
                    _ => return Ok(Value::Nil),
                };
                Ok(Value::Array(
                    words.iter().map(|w| Value::from(*w)).collect(),
                ))
            }
            "test.stream" => {
                // Salt's progress events: salt-run prints each as it comes.
                for i in 1..100 {
                    self.bus.fire(
                        &format!("salt/run/{jid}/progress"),
                        map(vec![(
                            "message",
                            Value::from(format!("Runner is {i}% done")),
                        )]),
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(Value::from(true))
            }
            "test.stdout_print" => {
                // Salt's runner prints in the process running it (salt-run's terminal): Brine
                // runs runners in the master, so the printed text goes to salt-run as an event.
                tracing::info!("runner test.stdout_print (jid {jid}) prints: foo");
                self.bus.fire(
                    &format!("salt/run/{jid}/stdout"),
                    map(vec![("text", Value::from("foo\n"))]),
                );
                Ok(Value::from("bar"))
            }
            "test.sleep" => {
                let secs = match a.get(0, "s_time") {
                    None => 10.0,
                    Some(v) => v
                        .as_f64()
                        .or_else(|| v.as_i64().map(|i| i as f64))
                        .or_else(|| str_value(v).and_then(|t| t.trim().parse().ok()))
                        .filter(|f: &f64| f.is_finite() && (0.0..=86_400.0).contains(f))
                        .ok_or("s_time must be a number of seconds from 0 to 86400")?,
                };
                tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                Ok(Value::Boolean(true))
            }
            other => Err(format!("'{other}' is not available.")),
        }
    }
}

/// A name → documentation map of a function table.
fn docs(table: &[(&str, &str)]) -> Value {
    Value::Map(
        table
            .iter()
            .map(|(name, doc)| (Value::from(*name), Value::from(*doc)))
            .collect(),
    )
}

/// The keyword arguments of a call as a map, those `keep` accepts.
fn args_kwargs(a: &Args, keep: impl Fn(&str) -> bool) -> Value {
    Value::Map(
        a.kwargs
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (Value::from(k.as_str()), v.clone()))
            .collect(),
    )
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.as_str().unwrap_or_default().to_string(),
        Value::Array(a) => a.iter().map(value_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Compare dotted version strings numerically ("3007.15" < "3007.16").
fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let parts = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    parts(a).cmp(&parts(b))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        use std::cmp::Ordering::*;
        assert_eq!(compare_versions("3007.15", "3007.15"), Equal);
        assert_eq!(compare_versions("3006.9", "3007.15"), Less);
        assert_eq!(compare_versions("3007.16", "3007.15"), Greater);
        assert_eq!(compare_versions("3007.100", "3007.15"), Greater);
    }
}
