//! `jobs.*`: the job cache, and the jobs running on the minions now.

use brine_protocol::loads::{Fun, PublishRequest, Tgt};
use brine_protocol::payload::{get, get_str, map, Value};

use super::{head_summary, ids, job_summary, ready, value_text, Call, Runner, RunnerFuture};
use crate::jobstore::JobHead;

type MapPairs = Vec<(Value, Value)>;

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "jobs.active",
        args: &["display_progress=False"],
        doc: "Return the jobs running on the minions now (asks every minion for saltutil.running), with who runs each and who has returned.\n\nCLI Example:\n\n    salt-run jobs.active\n",
        run: active,
    },
    Runner {
        name: "jobs.list_job",
        args: &["jid", "ext_source=None", "display_progress=False"],
        doc: "Return one job from the job cache: what was run, on which minions, when, and every return.\n\nCLI Example:\n\n    salt-run jobs.list_job 20130916125524463507\n",
        run: |c| ready(need_jid(&c).and_then(|jid| c.master.list_job(&jid))),
    },
    Runner {
        name: "jobs.list_jobs",
        args: &[
            "ext_source=None",
            "outputter=None",
            "search_metadata=None",
            "search_function=None",
            "search_target=None",
            "start_time=None",
            "end_time=None",
            "display_progress=False",
        ],
        doc: "Return the jobs in the job cache. search_function and search_target narrow the list: a glob, a list of globs or comma-separated globs, any of which may match.\n\nCLI Example:\n\n    salt-run jobs.list_jobs search_function='test.*,pkg.install'\n",
        run: |c| ready(list_jobs(&c)),
    },
    Runner {
        name: "jobs.list_jobs_filter",
        args: &[
            "count",
            "filter_find_job=True",
            "ext_source=None",
            "outputter=None",
            "display_progress=False",
        ],
        doc: "Return the newest count jobs in the job cache, oldest first, each with its JID; filter_find_job=True (the default) leaves out saltutil.find_job jobs.\n\nCLI Example:\n\n    salt-run jobs.list_jobs_filter 50\n    salt-run jobs.list_jobs_filter 100 filter_find_job=False\n",
        run: |c| ready(list_jobs_filter(&c)),
    },
    Runner {
        name: "jobs.lookup_jid",
        args: &[
            "jid",
            "ext_source=None",
            "returned=True",
            "missing=False",
            "display_progress=False",
        ],
        doc: "Return the returns of one job, keyed by minion; missing=True also names the minions that did not return.\n\nCLI Example:\n\n    salt-run jobs.lookup_jid 20130916125524463507\n",
        run: |c| ready(lookup_jid(&c)),
    },
    Runner {
        name: "jobs.print_job",
        args: &["jid", "ext_source=None"],
        doc: "Return one job from the job cache, keyed by its jid.\n\nCLI Example:\n\n    salt-run jobs.print_job 20130916125524463507\n",
        run: |c| ready(print_job(&c)),
    },
];

fn need_jid(c: &Call) -> Result<String, String> {
    c.args
        .get_str(0, "jid")
        .ok_or_else(|| format!("{} requires a 'jid' argument", c.fun))
}

/// Each search is a glob, a list of globs or a comma-separated string of them; a job matches
/// when any glob matches (any of its targets, for a list target).
fn list_jobs(c: &Call) -> Result<Value, String> {
    let search_fun = c.args.get_list(99, "search_function");
    let search_tgt = c.args.get_list(99, "search_target");
    let any = |globs: &[String], texts: &[String]| {
        globs
            .iter()
            .any(|g| texts.iter().any(|t| brine_protocol::target::fnmatch(g, t)))
    };
    // Each job summed up as it is read: the store's rows are not held all at once.
    let each = |head: JobHead| {
        let fun = || vec![head.fun.0.as_ref().map(value_text).unwrap_or_default()];
        let targets = || match &head.tgt.0 {
            Some(Value::Array(items)) => items.iter().map(value_text).collect(),
            Some(t) => vec![value_text(t)],
            None => vec![],
        };
        if search_fun.as_deref().is_some_and(|g| !any(g, &fun()))
            || search_tgt.as_deref().is_some_and(|g| !any(g, &targets()))
        {
            return None;
        }
        Some((Value::from(head.jid.as_str()), Value::Map(head_summary(head, false))))
    };
    let out = c.master.store.map_jobs(&each).map_err(|e| e.to_string())?;
    Ok(Value::Map(out))
}

/// Salt's `get_jids_filter`: the newest `count` jobs as a list, oldest first.
fn list_jobs_filter(c: &Call) -> Result<Value, String> {
    let count = match c.args.get(0, "count") {
        None | Some(Value::Nil) => {
            return Err(format!("{} requires a 'count' argument", c.fun));
        }
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .ok_or_else(|| format!("{}: count must be an integer, not {v}", c.fun))?,
    };
    let Ok(count @ 1..) = usize::try_from(count) else {
        return Ok(Value::Array(vec![]));
    };
    let skip_find_job = c.args.get(1, "filter_find_job").is_none()
        || c.args.get_bool(1, "filter_find_job");
    let jobs = c
        .master
        .store
        .list_jobs(count, skip_find_job.then_some("saltutil.find_job"))
        .map_err(|e| e.to_string())?;
    Ok(Value::Array(
        jobs.into_iter()
            .rev()
            .map(|head| Value::Map(head_summary(head, true)))
            .collect(),
    ))
}

fn lookup_jid(c: &Call) -> Result<Value, String> {
    let jid = need_jid(c)?;
    let store = &c.master.store;
    let mut out = Vec::new();
    for r in store.get_returns(&jid).map_err(|e| e.to_string())? {
        let ret = get(&r.full_ret, "return").cloned().unwrap_or(Value::Nil);
        out.push((Value::from(r.id), ret));
    }
    if c.args.get_bool(1, "missing") {
        if let Some((_, minions)) = store.get_load(&jid).map_err(|e| e.to_string())? {
            for m in minions {
                if !out.iter().any(|(k, _)| k.as_str() == Some(m.as_str())) {
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

fn print_job(c: &Call) -> Result<Value, String> {
    let jid = need_jid(c)?;
    let mut job = c.master.list_job(&jid)?;
    brine_protocol::payload::remove(&mut job, "jid");
    Ok(map(vec![(jid.as_str(), job)]))
}

fn active(c: Call) -> RunnerFuture {
    Box::pin(async move {
        let m = &c.master;
        let req = PublishRequest::new(
            Tgt::Expr("*".into()),
            Fun::One("saltutil.running".into()),
            vec![],
            "glob",
        );
        let res = m.local_cmd(req, c.timeout).await;
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
                    None => active.push((jid.to_string(), job_summary(jid, job), vec![entry])),
                }
            }
        }
        let mut out = Vec::new();
        for (jid, mut summary, running) in active {
            if let Ok(Some((load, _))) = m.store.get_load(&jid) {
                summary = job_summary(&jid, &load);
            }
            let returned: Vec<String> = m
                .store
                .get_returns(&jid)
                .unwrap_or_default()
                .into_iter()
                .map(|r| r.id)
                .collect();
            summary.push((Value::from("Running"), Value::Array(running)));
            summary.push((Value::from("Returned"), ids(&returned)));
            out.push((Value::from(jid), Value::Map(summary)));
        }
        Ok(Value::Map(out))
    })
}
