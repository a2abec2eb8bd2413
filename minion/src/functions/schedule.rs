//! The `schedule` execution module: list and change the minion's schedule
//! ([`crate::schedule::Schedule`]), with Salt's return shapes and comments.

use rmpv::Value;
use serde_json::{json, Map, Value as Json};

use super::{CallState};
use super::args::{is_true, py_str, Bound, Signature};
use super::{clean_kwargs, Context, FnError, Spec};
use crate::schedule::{unsupported, Where, ITEM_KEYS};

/// The functions of the `schedule` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Add,
    Delete,
    Disable,
    DisableJob,
    Enable,
    EnableJob,
    IsEnabled,
    JobStatus,
    List,
    Modify,
    Purge,
    RunJob,
    Save,
    ShowNextFireTime,
}

const KW: Signature = Signature::new(&[], 0, false, true);
const NAME_KW: Signature = Signature::new(&["name"], 1, false, true);

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Add,
        Fun::Delete,
        Fun::Disable,
        Fun::DisableJob,
        Fun::Enable,
        Fun::EnableJob,
        Fun::IsEnabled,
        Fun::JobStatus,
        Fun::List,
        Fun::Modify,
        Fun::Purge,
        Fun::RunJob,
        Fun::Save,
        Fun::ShowNextFireTime,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::Add => (
                "schedule.add",
                "add",
                NAME_KW,
                "
    Add a job to the schedule: function=<mod.fun>, a timer (seconds, minutes,
    hours, days; or once=<date>), job_args=[...], job_kwargs={...}, splay,
    maxrunning, enabled, return_job, metadata, until, after, run_on_start.
    persist=False keeps it out of minion.d/_schedule.conf.

    CLI Example:

        salt '*' schedule.add job1 function='test.ping' seconds=3600
    ",
            ),
            Fun::Delete => (
                "schedule.delete",
                "delete",
                NAME_KW,
                "
    Delete a job from the minion's schedule.

    CLI Example:

        salt '*' schedule.delete job1
    ",
            ),
            Fun::Disable => (
                "schedule.disable",
                "disable",
                KW,
                "
    Disable all scheduled jobs on the minion.

    CLI Example:

        salt '*' schedule.disable
    ",
            ),
            Fun::DisableJob => (
                "schedule.disable_job",
                "disable_job",
                NAME_KW,
                "
    Disable a job in the minion's schedule.

    CLI Example:

        salt '*' schedule.disable_job job1
    ",
            ),
            Fun::Enable => (
                "schedule.enable",
                "enable",
                KW,
                "
    Enable all scheduled jobs on the minion.

    CLI Example:

        salt '*' schedule.enable
    ",
            ),
            Fun::EnableJob => (
                "schedule.enable_job",
                "enable_job",
                NAME_KW,
                "
    Enable a job in the minion's schedule.

    CLI Example:

        salt '*' schedule.enable_job job1
    ",
            ),
            Fun::IsEnabled => (
                "schedule.is_enabled",
                "is_enabled",
                Signature::new(&["name"], 0, false, false),
                "
    List a job only if it is enabled; without a name, whether the schedule is
    enabled.

    CLI Example:

        salt '*' schedule.is_enabled name=job_name
    ",
            ),
            Fun::JobStatus => (
                "schedule.job_status",
                "job_status",
                Signature::new(&["name", "time_fmt"], 1, false, false),
                "
    Return the information and run state of a job.

    CLI Example:

        salt '*' schedule.job_status job1
    ",
            ),
            Fun::List => (
                "schedule.list",
                "list_",
                Signature::new(
                    &[
                        "show_all",
                        "show_disabled",
                        "where",
                        "return_yaml",
                        "offline",
                    ],
                    0,
                    false,
                    false,
                ),
                "
    List the jobs currently scheduled on the minion (YAML text unless
    return_yaml=False; show_all=True includes the minion's own jobs).

    CLI Example:

        salt '*' schedule.list
        salt '*' schedule.list show_all=True
    ",
            ),
            Fun::Modify => (
                "schedule.modify",
                "modify",
                NAME_KW,
                "
    Modify an existing job in the schedule (same options as schedule.add).

    CLI Example:

        salt '*' schedule.modify job1 function='test.ping' seconds=3600
    ",
            ),
            Fun::Purge => (
                "schedule.purge",
                "purge",
                KW,
                "
    Purge all the jobs currently scheduled on the minion.

    CLI Example:

        salt '*' schedule.purge
    ",
            ),
            Fun::RunJob => (
                "schedule.run_job",
                "run_job",
                Signature::new(&["name", "force"], 1, false, false),
                "
    Run a scheduled job on the minion immediately (force=True runs a
    disabled job).

    CLI Example:

        salt '*' schedule.run_job job1
    ",
            ),
            Fun::Save => (
                "schedule.save",
                "save",
                KW,
                "
    Save all scheduled jobs on the minion to minion.d/_schedule.conf.

    CLI Example:

        salt '*' schedule.save
    ",
            ),
            Fun::ShowNextFireTime => (
                "schedule.show_next_fire_time",
                "show_next_fire_time",
                NAME_KW,
                "
    Show the next fire time for a scheduled job.

    CLI Example:

        salt '*' schedule.show_next_fire_time job_name
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
        let schedule = &ctx.services.schedule;
        let kwargs = clean_kwargs(b);
        let name = b.get("name").map(py_str).unwrap_or_default();
        let persist = kwargs.get("persist").is_none_or(brine_protocol::payload::json_truthy);
        let test = kwargs.get("test").is_some_and(brine_protocol::payload::json_truthy);
        let out = match self {
            Fun::List => {
                let only = match b.opt("where").map(py_str).as_deref() {
                    Some("opts") => Some(Where::Opts),
                    Some("pillar") => Some(Where::Pillar),
                    _ => None,
                };
                let offline = is_true(b.get("offline"));
                let entries = if offline {
                    schedule.saved()
                } else {
                    schedule.entries(only)
                };
                let listed = listing(
                    entries,
                    is_true(b.get("show_all")),
                    b.get("show_disabled").is_none_or(|v| is_true(Some(v))),
                );
                if b.get("return_yaml").is_none_or(|v| is_true(Some(v))) {
                    let saved = schedule.saved();
                    let mut listed = listed;
                    for (job, item) in listed.iter_mut() {
                        if let Json::Object(item) = item {
                            item.insert("saved".into(), Json::Bool(saved.contains_key(job)));
                        }
                    }
                    let doc = json!({ "schedule": Json::Object(listed) });
                    Json::from(brine_protocol::yaml::safe_dump(
                        &doc,
                        brine_protocol::yaml::Style::Block(2),
                    ))
                } else {
                    Json::Object(listed)
                }
            }
            Fun::IsEnabled => {
                let listed = listing(schedule.entries(None), false, true);
                match b.opt("name").map(py_str) {
                    None => listed.get("enabled").cloned().unwrap_or(Json::Bool(true)),
                    Some(n) => listed.get(&n).cloned().unwrap_or_else(|| json!({})),
                }
            }
            Fun::Add => add(ctx, &name, &kwargs, persist, test),
            Fun::Modify => modify(ctx, &name, kwargs, persist, test),
            Fun::Delete => {
                let mut ret = result(
                    &format!("Failed to delete job {name} from schedule."),
                    false,
                );
                if test {
                    ret = result(
                        &format!("Job: {name} would be deleted from schedule."),
                        true,
                    );
                } else if schedule.source_of(&name).is_none() {
                    ret["comment"] = Json::from(format!("Job {name} does not exist."));
                } else {
                    schedule.delete(&name, persist);
                    ret = result(&format!("Deleted Job {name} from schedule."), true);
                    ret["changes"] = json!({ name.clone(): "removed" });
                }
                ret
            }
            Fun::Purge => {
                let mut ret = json!({"comment": [], "changes": {}, "result": true});
                let names: Vec<String> = listing(schedule.entries(None), false, true)
                    .keys()
                    .filter(|k| *k != "enabled")
                    .cloned()
                    .collect();
                for n in names {
                    let line = if test {
                        format!("Job: {n} would be deleted from schedule.")
                    } else {
                        ret["changes"][&n] = Json::from("removed");
                        format!("Deleted job: {n} from schedule.")
                    };
                    if let Some(c) = ret["comment"].as_array_mut() {
                        c.push(Json::from(line));
                    }
                }
                if !test {
                    schedule.purge(persist);
                }
                ret
            }
            Fun::EnableJob | Fun::DisableJob => {
                let enable = self == Fun::EnableJob;
                let word = if enable { "enable" } else { "disable" };
                let mut ret = json!({"comment": [], "result": true, "changes": {}});
                if name.is_empty() {
                    ret = result("Job name is required.", false);
                } else if test {
                    ret["comment"] =
                        Json::from(format!("Job: {name} would be {word}d in schedule."));
                } else if !schedule.set_job_enabled(&name, enable, persist) {
                    ret = result(&format!("Job {name} does not exist."), false);
                } else {
                    let past = if enable { "Enabled" } else { "Disabled" };
                    ret["comment"] = Json::from(format!("{past} Job {name} in schedule."));
                    ret["changes"] = json!({ name.clone(): format!("{word}d") });
                }
                ret
            }
            Fun::Enable | Fun::Disable => {
                let enable = self == Fun::Enable;
                let word = if enable { "enable" } else { "disable" };
                let mut ret = json!({"comment": [], "changes": {}, "result": true});
                if test {
                    ret["comment"] = Json::from(format!("Schedule would be {word}d."));
                } else {
                    schedule.set_enabled(enable, persist);
                    let past = if enable { "Enabled" } else { "Disabled" };
                    ret["comment"] = Json::from(format!("{past} schedule on minion."));
                    ret["changes"] = json!({ "schedule": format!("{word}d") });
                }
                ret
            }
            Fun::RunJob => {
                let listed = listing(schedule.entries(None), true, true);
                match listed.get(&name) {
                    None => {
                        json!({"comment": format!("Job {name} does not exist."), "result": false})
                    }
                    Some(item)
                        if item.get("enabled") == Some(&Json::Bool(false))
                            && !is_true(b.get("force")) =>
                    {
                        json!({"comment": format!("Job {name} is disabled."), "result": true})
                    }
                    Some(_) => {
                        schedule.run_now(&name);
                        json!({"comment": format!("Scheduling Job {name} on minion."), "result": true})
                    }
                }
            }
            Fun::Save => {
                if test {
                    json!({"comment": "Schedule would be saved.", "result": true})
                } else {
                    schedule.persist();
                    json!({"comment": "Schedule (non-pillar items) saved.", "result": true})
                }
            }
            Fun::ShowNextFireTime => match schedule.next_fire_time(&name) {
                Some(t) => json!({"result": true, "next_fire_time": t}),
                None if schedule.source_of(&name).is_none() => {
                    json!({"comment": format!("Job {name} does not exist."), "result": false})
                }
                None => json!({"comment": "Job has no next fire time.", "result": false}),
            },
            Fun::JobStatus => {
                let listed = listing(schedule.entries(None), true, true);
                match listed.get(&name) {
                    Some(Json::Object(item)) => {
                        let mut item = item.clone();
                        item.extend(schedule.status(&name));
                        Json::Object(item)
                    }
                    _ => json!({}),
                }
            }
        };
        Ok(brine_protocol::payload::from_json(&out))
    }
}


fn result(comment: &str, ok: bool) -> Json {
    json!({"comment": comment, "result": ok, "changes": {}})
}

/// What `schedule.list` shows of the schedule: the minion's own `__` jobs only with
/// `show_all`, `enabled` defaulted to true, only Salt's item keys, no nulls, and the strings
/// "true"/"false" as booleans.
fn listing(entries: Map<String, Json>, show_all: bool, show_disabled: bool) -> Map<String, Json> {
    let mut out = Map::new();
    for (job, item) in entries {
        if ["enabled", "skip_function", "skip_during_range"].contains(&job.as_str()) {
            out.insert(job, item);
            continue;
        }
        if job.starts_with("__") && !show_all {
            continue;
        }
        let Json::Object(item) = item else { continue };
        let mut shown = Map::new();
        for (k, v) in item {
            if !ITEM_KEYS.contains(&k.as_str()) || k == "_seconds" || v.is_null() {
                continue;
            }
            let v = match v.as_str() {
                Some("true") => Json::Bool(true),
                Some("false") => Json::Bool(false),
                _ => v,
            };
            shown.insert(k, v);
        }
        if !shown.contains_key("enabled") {
            shown.insert("enabled".into(), Json::Bool(true));
        }
        if !show_disabled && shown["enabled"] == Json::Bool(false) {
            continue;
        }
        out.insert(job, Json::Object(shown));
    }
    out
}

/// Salt's `build_schedule_item`: the job as the schedule stores it, or a failed return.
fn build_item(name: &str, kwargs: &Map<String, Json>) -> Result<Map<String, Json>, Json> {
    let fail = |comment: &str| Err(json!({"comment": comment, "result": false, "changes": {}}));
    if name.is_empty() {
        return fail("Job name is required.");
    }
    let timers = ["seconds", "minutes", "hours", "days"];
    if timers.iter().any(|t| kwargs.contains_key(*t))
        && (kwargs.contains_key("when") || kwargs.contains_key("cron"))
    {
        return fail("Error: Unable to use \"seconds\", \"minutes\", \"hours\", or \"days\" with \"when\" or \"cron\" options.");
    }
    if kwargs.contains_key("when") && kwargs.contains_key("cron") {
        return fail("Unable to use \"when\" and \"cron\" options together.  Ignoring.");
    }
    let Some(function) = kwargs.get("function").filter(|f| f.is_string()) else {
        return fail(&format!(
            "Job {name} needs a function (function=<module.function>)."
        ));
    };
    let mut item = Map::new();
    item.insert("function".into(), function.clone());
    for t in timers {
        if let Some(v) = kwargs.get(t) {
            item.insert(t.into(), v.clone());
        }
    }
    for k in ["return_job", "metadata"] {
        if let Some(v) = kwargs.get(k) {
            item.insert(k.into(), v.clone());
        }
    }
    match kwargs.get("job_args") {
        Some(a @ Json::Array(_)) => {
            item.insert("args".into(), a.clone());
        }
        Some(_) => return fail("job_args is not a list. please correct and try again."),
        None => {}
    }
    match kwargs.get("job_kwargs") {
        Some(k @ Json::Object(_)) => {
            item.insert("kwargs".into(), k.clone());
        }
        Some(_) => return fail("job_kwargs is not a dict. please correct and try again."),
        None => {}
    }
    item.insert(
        "maxrunning".into(),
        kwargs.get("maxrunning").cloned().unwrap_or(Json::from(1)),
    );
    item.insert(
        "name".into(),
        kwargs.get("name").cloned().unwrap_or(Json::from(name)),
    );
    item.insert(
        "enabled".into(),
        kwargs.get("enabled").cloned().unwrap_or(Json::Bool(true)),
    );
    item.insert(
        "jid_include".into(),
        kwargs
            .get("jid_include")
            .cloned()
            .unwrap_or(Json::Bool(true)),
    );
    if let Some(s) = kwargs.get("splay") {
        let s = match s {
            Json::Object(m) => json!({"start": m.get("start"), "end": m.get("end")}),
            other => other.clone(),
        };
        item.insert("splay".into(), s);
    }
    for k in [
        "range",
        "when",
        "once",
        "once_fmt",
        "cron",
        "returner",
        "after",
        "return_config",
        "return_kwargs",
        "until",
        "run_on_start",
        "skip_during_range",
    ] {
        if let Some(v) = kwargs.get(k) {
            item.insert(k.into(), v.clone());
        }
    }
    if let Some(why) = unsupported(&item) {
        return fail(&format!("Job {name} cannot be scheduled: {why}."));
    }
    Ok(item)
}

fn add(ctx: &Context, name: &str, kwargs: &Map<String, Json>, persist: bool, test: bool) -> Json {
    let schedule = &ctx.services.schedule;
    if schedule.source_of(name).is_some() {
        return result(&format!("Job {name} already exists in schedule."), false);
    }
    let item = match build_item(name, kwargs) {
        Ok(i) => i,
        Err(ret) => return ret,
    };
    if test {
        return result(&format!("Job: {name} would be added to schedule."), true);
    }
    schedule.put(Where::Opts, name, item, persist);
    json!({
        "comment": format!("Added job: {name} to schedule."),
        "result": true,
        "changes": { name: "added" },
    })
}

fn modify(
    ctx: &Context,
    name: &str,
    mut kwargs: Map<String, Json>,
    persist: bool,
    test: bool,
) -> Json {
    let schedule = &ctx.services.schedule;
    let Some(source) = schedule.source_of(name) else {
        return json!({
            "comment": format!("Job {name} does not exist in schedule."),
            "changes": {},
            "result": false,
        });
    };
    let listed = listing(schedule.entries(None), true, true);
    let current = match listed.get(name) {
        Some(Json::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    if !kwargs.contains_key("function") {
        if let Some(f) = current.get("function") {
            kwargs.insert("function".into(), f.clone());
        }
    }
    let new = match build_item(name, &kwargs) {
        Ok(i) => i,
        Err(ret) => return ret,
    };
    if new == current {
        return json!({"comment": format!("Job {name} in correct state"), "changes": {}, "result": true});
    }
    let changes = json!({ name: {"old": Json::Object(current), "new": Json::Object(new.clone())} });
    if test {
        return json!({
            "comment": format!("Job: {name} would be modified in schedule."),
            "changes": changes,
            "result": true,
        });
    }
    schedule.put(source, name, new, persist && source == Where::Opts);
    json!({
        "comment": format!("Modified job: {name} in schedule."),
        "changes": changes,
        "result": true,
    })
}
