//! `jobs.*`: the job cache, and the jobs running on the minions now.

use brine_protocol::loads::{Fun, PublishRequest, Tgt};
use brine_protocol::payload::{get, get_str, map, Value};

use super::{ids, job_summary, ready, value_text, Call, Runner, RunnerFuture};

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
    let jobs = c.master.store.list_jobs(0).map_err(|e| e.to_string())?;
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
