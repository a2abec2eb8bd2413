//! W13: the job store on PostgreSQL, in Salt's `pgjsonb` schema (Brine: `master_job_cache:
//! pgjsonb`; Salt: its own `pgjsonb` returner as master job cache). A private PostgreSQL
//! server per implementation (Debian's binaries, a temp dir, loopback). First the tables get
//! `stored` finished jobs (one SQL statement per table, the rows Salt's returner writes),
//! and the reads are timed: `GET /jobs/<jid>` p50, the paged list
//! (`jobs.list_jobs_filter`) and the whole list (`jobs.list_jobs`). Then ingest: `minions`
//! swarm minions sign in, one `local_async` test.ping goes to all of them, and the time
//! until every return is a row of `salt_returns` gives returns stored per second.

use std::time::{Duration, Instant};

use brine_e2e::postgres::Postgres;
use serde_json::{json, Value};

use crate::load;
use crate::report::{Better, Report};
use crate::stack::{Kind, Stack};
use crate::swarm::{forget_swarm_keys, Launched, NotReady, SwarmOpts};

/// Id prefix of this workload's swarm minions.
const PREFIX: &str = "w13-";
/// Jobs in one page of the paged list.
const PAGE: usize = 100;

/// What W13 measures, as the CLI sets it, and for which implementation.
pub(crate) struct PgOpts {
    pub kind: Kind,
    pub stored: usize,
    pub minions: usize,
    pub runs: usize,
    pub seconds: f64,
    /// How the ingest runs brine-swarm (`None`: it is not built).
    pub swarm: Option<SwarmOpts>,
}

/// Run W13 for one implementation; rows and notes go to `rep`. The stack is stopped and
/// started again on its usual job cache afterwards.
pub(crate) fn measure(
    st: &mut Stack,
    opts: &PgOpts,
    rt: &tokio::runtime::Runtime,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let pg = Postgres::start().ok_or_else(|| anyhow::anyhow!("PostgreSQL is not installed"))?;
    pg.try_psql(brine_master::jobstore::pgjsonb::SALT_SCHEMA)
        .map_err(|e| anyhow::anyhow!("creating the pgjsonb tables: {e}"))?;
    if opts.kind == Kind::Salt {
        // Salt's own schema has no index of Brine's.
        pg.try_psql("DROP INDEX brine_salt_returns_jid_id")
            .map_err(|e| anyhow::anyhow!("dropping Brine's index: {e}"))?;
    }
    let conf = st.master_conf_dir().join("master");
    let plain = std::fs::read_to_string(&conf)?;
    st.stop();
    std::fs::write(&conf, format!("{plain}{}", pg.master_config()))?;
    let r = measure_on(st, opts, rt, rep, &pg);
    st.stop();
    std::fs::write(&conf, plain)?;
    r
}

fn measure_on(
    st: &mut Stack,
    opts: &PgOpts,
    rt: &tokio::runtime::Runtime,
    rep: &mut Report,
    pg: &Postgres,
) -> anyhow::Result<()> {
    let (kind, swarm) = (opts.kind, opts.swarm.as_ref());
    let n = opts.stored;
    crate::log(format!("W13 PostgreSQL: filling {n} jobs"));
    let t = Instant::now();
    let jids = fill(pg, n)?;
    crate::log(format!(
        "  filled in {:.1} s; starting",
        t.elapsed().as_secs_f64()
    ));
    st.start()?;
    let limit = swarm.map_or(Duration::from_secs(600), |s| s.limit);
    let http = load::client(limit);
    let tok = rt.block_on(load::login(&http, &st.url("")))?;
    if let Some(jid) = jids.get(jids.len() / 2) {
        let get_job = load::get(
            &http,
            st.url(&format!("/jobs/{jid}")),
            Some(tok.clone()),
            Some(|v: &Value| {
                v["info"][0]["Result"]["m1"].is_object() || v["return"][0]["m1"] == json!(true)
            }),
        );
        let name = format!("GET /jobs/<jid> p50, {n} stored");
        for _ in 0..opts.runs {
            match rt.block_on(load::latency(&get_job, (opts.seconds / 2.0).min(3.0), 5)) {
                Ok(l) => rep.add("W13", &name, "ms", Better::Lower, kind, l.p50_ms),
                Err(e) => crate::failed(rep, "W13", &name, "ms", Better::Lower, kind, &e),
            }
        }
    }
    let lists = [
        (
            format!("runner jobs.list_jobs_filter count={PAGE} (paged), {n} stored"),
            json!({"client": "runner", "fun": "jobs.list_jobs_filter", "count": PAGE}),
            PAGE.min(n),
        ),
        (
            format!("runner jobs.list_jobs (every job), {n} stored"),
            json!({"client": "runner", "fun": "jobs.list_jobs"}),
            n,
        ),
    ];
    for (name, body, want) in lists {
        for _ in 0..opts.runs {
            match rt.block_on(crate::load::listed(&http, &st.url("/"), &tok, &body)) {
                Ok((secs, got)) if got >= want => {
                    rep.add("W13", &name, "s", Better::Lower, kind, secs)
                }
                Ok((secs, got)) => {
                    let why = format!("{got} of {want} jobs listed after {secs:.1} s");
                    rep.fail("W13", &name, "s", Better::Lower, kind, &why);
                    crate::log(format!("{} W13 {name}: {why}", kind.name()));
                    break;
                }
                Err(e) => {
                    crate::failed(rep, "W13", &name, "s", Better::Lower, kind, &e);
                    break;
                }
            }
        }
    }
    let name = format!(
        "ingest: returns stored per second, {} swarm minions",
        opts.minions
    );
    match swarm {
        Some(sw) if opts.minions > 0 => {
            if let Err(e) = ingest(st, sw, opts.minions, pg, &http, &tok, kind, rep) {
                crate::failed(rep, "W13", &name, "returns/s", Better::Higher, kind, &e);
            }
        }
        _ => rep.note(
            "W13",
            format!(
                "{}: ingest not measured (no brine-swarm or no minions)",
                kind.name()
            ),
        ),
    }
    Ok(())
}

/// `count` finished test.ping jobs of m1 in the tables, as Salt's `pgjsonb` returner writes
/// them (the load in `jids`, the return in `salt_returns`; Brine's targeted minions beside),
/// one millisecond apart and ending now: their jids, oldest first.
fn fill(pg: &Postgres, count: usize) -> anyhow::Result<Vec<String>> {
    let sql = format!(
        "SET synchronous_commit = off;
         INSERT INTO jids (jid, load)
           SELECT j, jsonb_build_object('cmd', 'publish', 'tgt', 'm1', 'fun', 'test.ping',
                    'arg', '[]'::jsonb, 'tgt_type', 'glob', 'ret', '', 'jid', j,
                    'user', '{user}', 'kwargs', '{{}}'::jsonb)
           FROM (SELECT to_char(now() - make_interval(secs => ({count} - i) / 1000.0),
                                'YYYYMMDDHH24MISSUS') AS j
                 FROM generate_series(1, {count}) AS i) AS s;
         INSERT INTO salt_returns (fun, jid, return, id, success, full_ret)
           SELECT 'test.ping', jid, 'true'::jsonb, 'm1', 'True',
                  jsonb_build_object('cmd', '_return', 'id', 'm1', 'jid', jid,
                    'fun', 'test.ping', 'fun_args', '[]'::jsonb, 'return', true,
                    'retcode', 0, 'success', true)
           FROM jids;
         INSERT INTO brine_jid_minions (jid, minion) SELECT jid, 'm1' FROM jids;
         ANALYZE;",
        user = crate::stack::USER,
    );
    pg.try_psql(&sql)
        .map_err(|e| anyhow::anyhow!("filling the tables: {e}"))?;
    let jids = pg
        .try_psql("SELECT jid FROM jids ORDER BY jid")
        .map_err(|e| anyhow::anyhow!("reading the jids: {e}"))?;
    let jids: Vec<String> = jids.lines().map(str::to_string).collect();
    anyhow::ensure!(
        jids.len() == count,
        "{} jobs in the table, {count} meant",
        jids.len()
    );
    Ok(jids)
}

/// Sign `minions` swarm minions in, send them one test.ping with `local_async`, and time
/// until `salt_returns` holds a row from each.
#[allow(clippy::too_many_arguments)]
fn ingest(
    st: &Stack,
    sw: &SwarmOpts,
    minions: usize,
    pg: &Postgres,
    http: &reqwest::Client,
    tok: &str,
    kind: Kind,
    rep: &mut Report,
) -> anyhow::Result<()> {
    crate::log(format!("W13 ingest: {minions} swarm minions"));
    forget_swarm_keys(&st.accepted_dir(), PREFIX)?;
    let mut swarm = Launched::start(st, sw, PREFIX, minions, &[])?;
    let ready = match swarm.wait_ready(sw) {
        Ok(_) => minions,
        Err(NotReady { why, .. }) => {
            let ready = swarm.ready();
            rep.note(
                "W13",
                format!(
                    "{}: {why}; the ingest was measured with the {ready} that were",
                    kind.name()
                ),
            );
            ready
        }
    };
    anyhow::ensure!(ready > 0, "no swarm minion signed in");
    // Let the last subscriptions settle.
    std::thread::sleep(Duration::from_secs(2));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let t = Instant::now();
    let v: Value = rt.block_on(async {
        http.post(st.url("/"))
            .header("X-Auth-Token", tok)
            .header("Accept", "application/json")
            .json(
                &json!({"client": "local_async", "tgt": format!("{PREFIX}*"),
                          "fun": "test.ping"}),
            )
            .send()
            .await?
            .error_for_status()?
            .json()
            .await
    })?;
    let jid = v["return"][0]["jid"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no jid in {v}"))?
        .to_string();
    anyhow::ensure!(jid.bytes().all(|b| b.is_ascii_digit()), "odd jid {jid:?}");
    let count_sql = format!("SELECT count(*) FROM salt_returns WHERE jid = '{jid}'");
    let budget = sw.limit;
    let (mut stored, mut secs) = (0usize, 0.0);
    while t.elapsed() < budget {
        stored = pg
            .try_psql(&count_sql)
            .map_err(|e| anyhow::anyhow!("counting returns: {e}"))?
            .parse()?;
        secs = t.elapsed().as_secs_f64();
        if stored >= ready {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(swarm.stop());
    let name = format!("ingest: returns stored per second, {minions} swarm minions");
    let all = format!("ingest: {minions} swarm minions, until every return is stored");
    if stored < ready {
        let why = format!("{stored} of {ready} returns stored after {secs:.0} s");
        rep.fail("W13", &name, "returns/s", Better::Higher, kind, &why);
        return Ok(());
    }
    rep.add(
        "W13",
        &name,
        "returns/s",
        Better::Higher,
        kind,
        stored as f64 / secs,
    );
    rep.add("W13", &all, "s", Better::Lower, kind, secs);
    Ok(())
}
