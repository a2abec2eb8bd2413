//! Results and the report: medians with min–max spread, Brine/Salt ratios, the machine, and an
//! SVG plot of fan-out time against minion count.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;

use crate::stack::Kind;
use crate::swarm::SizeResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Better {
    Lower,
    Higher,
}

/// One figure of one workload: the value of every run, per implementation.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub section: &'static str,
    pub name: String,
    pub unit: &'static str,
    pub better: Better,
    pub values: BTreeMap<Kind, Vec<f64>>,
    /// Why values are missing or partial, per implementation.
    pub notes: BTreeMap<Kind, String>,
}

/// The workloads, in report order: (id, title, what is measured).
pub(crate) const SECTIONS: &[(&str, &str, &str)] = &[
    (
        "W1",
        "W1: `POST /` local test.ping to one minion, one client",
        "One client sends `{\"client\": \"local\", \"tgt\": \"m1\", \"fun\": \"test.ping\"}` to `POST /` \
         with an `X-Auth-Token`, waits for the answer (checked: `return[0].m1 == true`), and sends the \
         next, for the run's duration. Latency is measured from sending the request to the last byte \
         of the answer; p50 and p99 of each run.",
    ),
    (
        "W2",
        "W2: the same with {clients} concurrent clients",
        "{clients} clients in a loop, each as in W1, over a keep-alive connection pool; successful answers \
         per second over the run.",
    ),
    (
        "Login",
        "POST /login throughput",
        "{clients} clients in a loop on `POST /login` (eauth `auto`, user `bench`); answers carrying a token \
         per second.",
    ),
    (
        "W3",
        "W3: job submissions (`local_async`, `POST /minions`)",
        "{clients} clients in a loop submitting `local_async` test.ping to m1 through `POST /` (answer must \
         carry a jid), then the same through `POST /minions` (`{\"tgt\": \"m1\", \"fun\": \"test.ping\"}`); \
         accepted submissions per second. The minion runs the jobs meanwhile. The returns of the submitted \
         jobs are counted in the master's job cache (Brine's `salt_returns`, Salt's `return.p` files): the \
         share stored by the end of the submissions, and the seconds after it until every one is (a master \
         that accepts jobs faster than their returns come back leaves that work for later), and the jobs \
         finished per second from the first submission to the last return stored.",
    ),
    (
        "W4",
        "W4: fan-out to a swarm of minions",
        "`brine-swarm` (one process simulating N minions over the real protocol; several processes with \
         consecutive id ranges when the open-files limit requires it) signs N minions in to \
         the master (restarted, swarm keys forgotten, for every size); then one `local` test.ping to \
         `w4-*` through `POST /` with a long timeout, timed from submission to the answer holding every \
         return. Master CPU seconds (user+system of the master's whole process tree) are counted over \
         the fan-out; peak RSS is the largest sampled (every 100 ms) RSS sum of the master's process \
         tree from sign-in through the fan-outs (peak PSS likewise, every 500 ms). The swarm's \
         minions use 1024-bit RSA keys generated once and cached (the masters' keys are 2048-bit). Sizes go up until an implementation fails or passes \
         the time limit.",
    ),
    (
        "W5",
        "W5: event stream delivery while W3 runs",
        "1, then 10 clients read `GET /events` (server-sent events) while {clients} clients submit \
         `local_async` jobs as in W3; events (`data:` lines) received per second, per client and in \
         total, counted only while the submissions run.",
    ),
    (
        "W6",
        "W6: job store",
        "The stopped master's job store is filled with N finished test.ping jobs (each with m1's \
         return) using each implementation's own storage code (Brine: `brine_master::jobstore::SqliteStore` \
         into `cachedir/jobs.sqlite`; Salt: `salt.returners.local_cache` from the venv), then the stack \
         is started. `GET /jobs/<jid>` of one stored job: p50 over a few requests per run; \
         `runner jobs.list_jobs` through `POST /`: one call per run, timed until the last byte of the answer arrived (the client's parsing is not timed; the answer is then checked to hold all N jobs).",
    ),
    (
        "W7",
        "W7: footprint",
        "Time from starting the daemons (master, salt-api, two minions) to the first test.ping answered \
         by both minions through the API (polled every 100 ms; an attempt waits at most its 1 s \
         timeout for a minion that missed the publish): once on a fresh install (keys \
         generated) and on restarts with keys in place. Idle memory a few seconds after that first \
         answer: RSS summed over each daemon's process tree, and PSS (shared pages split between the \
         processes sharing them, which is fairer to Salt's forked workers).",
    ),
    (
        "W8",
        "W8: file server, `_serve_file` of a large file",
        "The master serves a file of pseudo-random bytes from its `file_roots` (`salt://big.bin`). One \
         `brine-swarm` minion, told through `POST /` (`swarm.fetch_file`), fetches it with `_serve_file` \
         requests chunk by chunk (`file_buffer_size`, 256 KiB by default, as a minion's file client does) \
         and drops the bytes; timed from the API request to the answer holding the byte count. Master CPU \
         seconds (whole process tree) per 100 MB served; peak RSS of the master while serving.",
    ),
    (
        "W9",
        "W9: highstate of real minions",
        "The same real salt-minions (from the Salt venv, the release Brine reproduces) apply the bench \
         formula from each master: `local` `state.apply` to `hs*` through `POST /`. The formula \
         (bench/src/tree.rs) has map.jinja with defaults.yaml, `grains.filter_by`, `defaults.merge` and \
         the pillar merged in, templated `file.managed` with context, `contents_pillar`, a templated \
         `file.recurse` of 24 files, `cmd.run` with `onchanges`/`watch`/`creates`, and a pillar top with \
         glob, grain and compound matches. The first highstate (out directories and the minions' file \
         cache emptied) changes everything, the second nothing; both are checked per state. Wall time \
         from the request to the last return; master CPU (whole process tree) per minion highstate. \
         The minions' own work (Salt's state engine in Python) is the same for both masters. \
         Then N `brine-swarm` minions make, all at once, the requests a highstate of the formula \
         makes of the master without running states (`swarm.highstate_requests`: `_pillar`, \
         `_file_list`, `_file_hash` and `_serve_file` of every file of the formula, `_dir_list`): \
         wall time until every one has answered, and master CPU per minion; there the master's \
         work is all that is timed.",
    ),
    (
        "W10",
        "W10: pillar for a swarm refreshing at once",
        "N `brine-swarm` minions (grain `benchrole: web`) are signed in; `saltutil.refresh_pillar` is \
         published to all of them through `POST /`, and each sends its `_pillar` request at once (the \
         pillar top and SLS files of W9, rendered with the minion's grains, encrypted for it alone). \
         Each exchange is timed by the swarm (p50, p99); the wall time is until every minion answered; \
         master CPU per compiled pillar.",
    ),
    (
        "W11",
        "W11: the minion's state runs",
        "Brine's salt-minion and Salt's, on the same (Brine) master, apply a 200-state tree through \
         `POST /` (`state.sls w11`): 50 `file.directory`, 50 `file.managed` from 10 Jinja templates \
         with context and mode, 50 `cmd.run` with `unless`, 50 `test.succeed_without_changes`. A \
         first run changes everything (the minion's output directory and file cache are removed \
         first), a second changes nothing (checked). Wall time until the return is in; the minion's \
         CPU (its process tree, reaped job processes included) and peak RSS (sampled every 20 ms). \
         Then N minions of each kind at once.",
    ),
    (
        "W12",
        "W12: an orchestration",
        "`state.orchestrate orch.bench` through `POST /` (salt-api's `runner` client, which answers \
         when the orchestration is done), with N `brine-swarm` minions signed in: `salt.function` \
         `test.ping` to all of them, `salt.function` `test.echo` to all of them (requiring the \
         first), `salt.runner` `test.arg` and `salt.wheel` `key.list_all`; every step must \
         succeed. Wall time from the request to the answer; CPU of the master and the API (whole \
         process trees; Salt's salt-api runs the runner in its own process) per orchestration.",
    ),
    (
        "W13",
        "W13: the job store on PostgreSQL",
        "Each implementation gets a private PostgreSQL server (Debian's binaries, a temp dir, \
         loopback) with Salt's `pgjsonb` tables as its master job cache (Brine: `master_job_cache: \
         pgjsonb`; Salt: its own `pgjsonb` returner, psycopg2 in the venv). The tables are filled \
         with N finished test.ping jobs of m1 by SQL (the rows Salt's returner writes), then: \
         `GET /jobs/<jid>` of one job, p50 over a few requests per run; `runner \
         jobs.list_jobs_filter` with `count=100` (the paged list: the newest 100) and `runner \
         jobs.list_jobs` (every job) through `POST /`, one call per run, timed until the last byte \
         of the answer arrived (the client's parsing is not timed), then checked to hold the jobs \
         asked for. Then ingest: M `brine-swarm` \
         minions sign in, one `local_async` test.ping goes to all of them, and the time from the \
         request until `salt_returns` holds a row from each (counted every 20 ms) gives the \
         returns stored per second.",
    ),
    (
        "W14",
        "W14: fan-out to a fleet split over two masters",
        "Brine's master (with its salt-api) and a second master share the pki dir and a NATS \
         server (`brine_nats` with `jobs_subject`, started by the bench on loopback); half of N \
         `brine-swarm` minions sign in to each master. One `local` test.ping to all of them \
         through the first master's API, timed from the request to the answer holding every \
         return (the second master publishes the job the first shared on NATS; the API gathers \
         its minions' returns from the events stream), with the CPU seconds of both masters and \
         the API. Salt reaches such a fleet through syndics (a master of masters), which the \
         bench does not set up: Brine only.",
    ),
];

/// The report's whole content.
pub(crate) struct Report {
    pub rows: Vec<Row>,
    pub baselines: Vec<(String, &'static str, Vec<f64>)>,
    pub fanout: BTreeMap<Kind, Vec<SizeResult>>,
    /// Notes printed under a section, by section id (and "general").
    pub notes: BTreeMap<&'static str, Vec<String>>,
    pub kinds: Vec<Kind>,
    pub command: String,
    pub machine: Vec<(String, String)>,
    pub runs: usize,
    pub seconds: f64,
    pub clients: usize,
    pub smoke: bool,
    pub started: String,
    pub took: f64,
}

impl Report {
    pub(crate) fn new(kinds: Vec<Kind>) -> Report {
        Report {
            rows: vec![],
            baselines: vec![],
            fanout: BTreeMap::new(),
            notes: BTreeMap::new(),
            kinds,
            command: String::new(),
            machine: vec![],
            runs: 0,
            seconds: 0.0,
            clients: 16,
            smoke: false,
            started: String::new(),
            took: 0.0,
        }
    }

    fn row(
        &mut self,
        section: &'static str,
        name: &str,
        unit: &'static str,
        better: Better,
    ) -> &mut Row {
        if let Some(i) = self
            .rows
            .iter()
            .position(|r| r.section == section && r.name == name)
        {
            return &mut self.rows[i];
        }
        self.rows.push(Row {
            section,
            name: name.to_string(),
            unit,
            better,
            values: BTreeMap::new(),
            notes: BTreeMap::new(),
        });
        self.rows.last_mut().expect("just pushed")
    }

    /// Record one run's value of a figure.
    pub(crate) fn add(
        &mut self,
        section: &'static str,
        name: &str,
        unit: &'static str,
        better: Better,
        kind: Kind,
        v: f64,
    ) {
        self.row(section, name, unit, better)
            .values
            .entry(kind)
            .or_default()
            .push(v);
    }

    /// Record why a figure has no (or fewer) values for one implementation.
    pub(crate) fn fail(
        &mut self,
        section: &'static str,
        name: &str,
        unit: &'static str,
        better: Better,
        kind: Kind,
        why: &str,
    ) {
        let r = self.row(section, name, unit, better);
        let n = r.notes.entry(kind).or_default();
        if n.split("; ").any(|x| x == why) {
            return;
        }
        if !n.is_empty() {
            n.push_str("; ");
        }
        n.push_str(why);
    }

    pub(crate) fn note(&mut self, section: &'static str, text: impl Into<String>) {
        self.notes.entry(section).or_default().push(text.into());
    }
}

/// Median (mean of the middle two for an even count).
pub(crate) fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// A number with about three significant digits.
pub(crate) fn num(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a == 0.0 {
        "0".into()
    } else if a < 1e-4 {
        format!("{v:.2e}")
    } else {
        // Three significant digits.
        let decimals = (2 - a.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{v:.decimals$}")
    }
}

/// `median (min–max, n runs)`, or the reason there is none.
fn cell(values: Option<&Vec<f64>>, note: Option<&String>) -> String {
    let mut out = match values.filter(|v| !v.is_empty()) {
        Some(v) => {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let m = median(v).unwrap_or(f64::NAN);
            if v.len() == 1 {
                format!("{} (1 run)", num(m))
            } else {
                format!("**{}** ({}–{})", num(m), num(lo), num(hi))
            }
        }
        None => "—".to_string(),
    };
    if let Some(n) = note {
        let _ = write!(out, " ⚠ {}", n.replace('|', "/"));
    }
    out
}

/// (Brine/Salt ratio, which side is better and by how much).
fn compare(brine: f64, salt: f64, better: Better) -> (String, String) {
    if !(brine.is_finite() && salt.is_finite()) || brine <= 0.0 || salt <= 0.0 {
        return ("—".into(), "—".into());
    }
    let ratio = brine / salt;
    let brine_gain = match better {
        Better::Lower => salt / brine,
        Better::Higher => brine / salt,
    };
    let verdict = if (brine_gain - 1.0).abs() < 0.05 {
        "about equal".to_string()
    } else if brine_gain >= 1.0 {
        format!("Brine {}×", num(brine_gain))
    } else {
        format!("Salt {}×", num(1.0 / brine_gain))
    };
    (num(ratio), verdict)
}

fn section_table(out: &mut String, rows: &[&Row], kinds: &[Kind]) {
    let both = kinds.len() == 2;
    if both {
        out.push_str(&format!(
            "| Figure | Brine: median (min–max) | {}: median (min–max) | Brine/Salt | Better by |\n",
            *crate::stack::SALT_LABEL
        ));
        out.push_str("|---|---|---|---|---|\n");
    } else {
        out.push_str("| Figure | Brine: median (min–max) |\n|---|---|\n");
    }
    for r in rows {
        let dir = match r.better {
            Better::Lower => "↓",
            Better::Higher => "↑",
        };
        let b = cell(r.values.get(&Kind::Brine), r.notes.get(&Kind::Brine));
        if both {
            let s = cell(r.values.get(&Kind::Salt), r.notes.get(&Kind::Salt));
            let (ratio, verdict) = compare(
                r.values
                    .get(&Kind::Brine)
                    .and_then(|v| median(v))
                    .unwrap_or(f64::NAN),
                r.values
                    .get(&Kind::Salt)
                    .and_then(|v| median(v))
                    .unwrap_or(f64::NAN),
                r.better,
            );
            let _ = writeln!(
                out,
                "| {} ({}, {dir}) | {b} | {s} | {ratio} | {verdict} |",
                r.name, r.unit
            );
        } else {
            let _ = writeln!(out, "| {} ({}, {dir}) | {b} |", r.name, r.unit);
        }
    }
    out.push('\n');
}

/// Where each implementation's fan-out sizes stopped, one sentence each.
pub(crate) fn fanout_stops(
    fanout: &BTreeMap<Kind, Vec<SizeResult>>,
    planned: &[usize],
) -> Vec<String> {
    let mut out = vec![];
    for (kind, sizes) in fanout {
        let done: Vec<usize> = sizes.iter().filter(|s| s.ok()).map(|s| s.minions).collect();
        let largest = done.iter().max().copied();
        let last = sizes.last();
        let text = match (largest, last) {
            (_, Some(l)) if !l.ok() => format!(
                "{}: stopped at {} minions: {}{}.",
                kind.name(),
                l.minions,
                l.failure.as_deref().unwrap_or("failed"),
                largest.map_or(String::new(), |m| format!(" (largest completed size: {m})"))
            ),
            (Some(m), Some(l)) if l.too_slow => format!(
                "{}: stopped after {m} minions: one fan-out took over the time limit, larger sizes not tried.",
                kind.name()
            ),
            (Some(m), _) if planned.iter().all(|p| done.contains(p)) => {
                format!("{}: every planned size completed (up to {m} minions).", kind.name())
            }
            (Some(m), _) => format!("{}: completed up to {m} minions.", kind.name()),
            (None, None) => format!("{}: no size was measured.", kind.name()),
            (None, Some(_)) => format!("{}: no size completed.", kind.name()),
        };
        out.push(text);
    }
    out
}

impl Report {
    /// The markdown text; `svg_name` is the plot's file name next to it, if one was written.
    pub(crate) fn markdown(&self, svg_name: Option<&str>, planned_sizes: &[usize]) -> String {
        let mut o = String::new();
        let title = if self.smoke {
            "# Benchmarks (smoke run: tiny sizes, Brine only, numbers mean nothing)".to_string()
        } else {
            format!("# Benchmarks: Brine vs {}", *crate::stack::SALT_LABEL)
        };
        let _ = writeln!(o, "{title}\n");
        let _ = writeln!(
            o,
            "Generated by `brine-bench` on {} (took {:.0} s). Reproduce with:\n\n```sh\n\
             cargo build --release --workspace --bins\n{}\n```\n",
            self.started, self.took, self.command
        );
        o.push_str("## Machine\n\n| | |\n|---|---|\n");
        for (k, v) in &self.machine {
            let _ = writeln!(o, "| {k} | {v} |");
        }
        o.push('\n');
        o.push_str("## Method\n\n");
        let _ = writeln!(
            o,
            "- Implementations measured: {}. Each runs a master, salt-api and two minions (`m1`, `m2`) \
             with the same configuration (auto_accept, `external_auth: auto` user `bench`, \
             `netapi_enable_clients`, `rest_cherrypy` on 127.0.0.1 without TLS, worker_threads 5), on \
             its own loopback ports. They are measured one after the other, never at the same time.",
            self.kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(" and ")
        );
        let _ = writeln!(
            o,
            "- Every figure is measured in {} separate runs ({} s each for the time-boxed workloads); \
             tables show the **median** and the spread (min–max) over the runs.",
            self.runs,
            num(self.seconds)
        );
        o.push_str(
            "- *Brine/Salt* is the ratio of the medians; *Better by* says which implementation is \
             better and by what factor (↓: lower is better, ↑: higher is better).\n\
             - The load generator runs on the same machine (and cores) as the daemons it measures, \
             as it does for the baselines.\n\n",
        );
        if let Some(n) = self.notes.get("general") {
            for line in n {
                let _ = writeln!(o, "- {line}");
            }
            o.push('\n');
        }
        o.push_str("## Headline\n\n");
        for line in self.headline() {
            let _ = writeln!(o, "- {line}");
        }
        o.push('\n');
        let clients = self.clients.to_string();
        for (id, title, what) in SECTIONS {
            let title = title.replace("{clients}", &clients);
            let what = what.replace("{clients}", &clients);
            let _ = writeln!(o, "## {title}\n\n{what}\n");
            let rows: Vec<&Row> = self.rows.iter().filter(|r| r.section == *id).collect();
            if !rows.is_empty() {
                section_table(&mut o, &rows, &self.kinds);
            } else if *id != "W4" {
                o.push_str("Not measured.\n\n");
            }
            if *id == "W4" {
                for s in fanout_stops(&self.fanout, planned_sizes) {
                    let _ = writeln!(o, "- {s}");
                }
                if let Some(svg) = svg_name {
                    let _ = writeln!(
                        o,
                        "\n![W4 fan-out time against minion count]({svg})\n\n\
                         Plot: [{svg}]({svg}) (log–log; dots are medians, bars the min–max).\n"
                    );
                } else {
                    o.push('\n');
                }
            }
            if let Some(n) = self.notes.get(id) {
                for line in n {
                    let _ = writeln!(o, "- {line}");
                }
                o.push('\n');
            }
        }
        o.push_str(
            "## Baselines\n\nFloors on the same machine: an axum hello-world in the harness process \
             (`GET /` → `Hello, World!`), measured with the same client code as W1/W2, a raw \
             ZeroMQ REQ/REP round trip (64-byte message, loopback TCP, one client, `zmq` crate), \
             and the RSA signature every publish carries (one thread, 1 KiB message, \
             PKCS#1 v1.5 SHA-1), made by OpenSSL and by the `rsa` crate.\n\n",
        );
        if self.baselines.is_empty() {
            o.push_str("Not measured.\n\n");
        } else {
            o.push_str("| Baseline | median (min–max) |\n|---|---|\n");
            for (name, unit, v) in &self.baselines {
                let _ = writeln!(o, "| {name} ({unit}) | {} |", cell(Some(v), None));
            }
            o.push('\n');
        }
        if let Some(n) = self.notes.get("Baselines") {
            for line in n {
                let _ = writeln!(o, "- {line}");
            }
            o.push('\n');
        }
        o
    }

    fn median_of(&self, section: &str, name_part: &str, kind: Kind) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.section == section && r.name.contains(name_part))
            .and_then(|r| r.values.get(&kind))
            .and_then(|v| median(v))
    }

    /// A few one-line comparisons of the most telling figures.
    pub(crate) fn headline(&self) -> Vec<String> {
        let picks: [(&str, &str, &str); 14] = [
            ("W1", "p50", "W1 test.ping p50 latency, 1 client"),
            ("W2", "requests", "W2 test.ping throughput, 16 clients"),
            ("W3", "local_async", "W3 local_async submissions"),
            ("Login", "POST /login", "POST /login"),
            (
                "W5",
                "10 clients: total",
                "W5 events delivered to 10 clients",
            ),
            (
                "W6",
                "runner jobs.list_jobs, 100000",
                "W6 jobs.list_jobs with 100,000 jobs",
            ),
            ("W7", "master idle PSS", "W7 idle master memory (PSS)"),
            (
                "W7",
                "start to first test.ping (restart",
                "W7 start to first answered ping",
            ),
            ("W8", "throughput", "W8 `_serve_file` of a large file"),
            (
                "W9",
                "first highstate (everything changes): master CPU",
                "W9 master CPU per highstate of a real minion",
            ),
            (
                "W9",
                "a highstate's requests at once: wall time",
                "W9 a highstate's requests from a swarm at once, wall time",
            ),
            (
                "W10",
                "pillar p50",
                "W10 pillar for a swarm refreshing at once, p50",
            ),
            (
                "W11",
                "one minion, first run",
                "W11 a 200-state run on one minion, wall time",
            ),
            (
                "W12",
                "a wheel): wall time",
                "W12 an orchestration of four steps, wall time",
            ),
        ];
        let mut out = vec![];
        for (section, starts, label) in picks {
            let Some(row) = self
                .rows
                .iter()
                .find(|r| r.section == section && r.name.contains(starts))
            else {
                continue;
            };
            let b = self.median_of(section, starts, Kind::Brine);
            let s = self.median_of(section, starts, Kind::Salt);
            let line = match (b, s) {
                (Some(b), Some(s)) => {
                    let (_, verdict) = compare(b, s, row.better);
                    format!(
                        "{label}: Brine {} vs Salt {} {} ({verdict}).",
                        num(b),
                        num(s),
                        row.unit
                    )
                }
                (Some(b), None) => format!("{label}: Brine {} {}.", num(b), row.unit),
                _ => continue,
            };
            out.push(line);
        }
        for (kind, sizes) in &self.fanout {
            if let Some(big) = sizes.iter().filter(|s| s.ok()).max_by_key(|s| s.minions) {
                let t = median(&big.runs.iter().map(|r| r.seconds).collect::<Vec<_>>());
                if let Some(t) = t {
                    out.push(format!(
                        "W4 fan-out, {}: {} minions answered in {} s (largest size completed).",
                        kind.name(),
                        big.minions,
                        num(t)
                    ));
                }
            }
        }
        if out.is_empty() {
            out.push("Nothing was measured.".into());
        }
        out
    }
}

// ------------------------------------------------------------------------------------------
// The plot

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// SVG of W4: fan-out time (log) against minion count (log), one series per implementation,
/// medians joined by lines, min–max bars, and a cross where an implementation stopped.
pub(crate) fn fanout_svg(fanout: &BTreeMap<Kind, Vec<SizeResult>>) -> Option<String> {
    let points: Vec<(Kind, usize, f64, f64, f64)> = fanout
        .iter()
        .flat_map(|(k, sizes)| {
            sizes
                .iter()
                .filter(|s| s.ok() && !s.runs.is_empty())
                .map(move |s| {
                    let t: Vec<f64> = s.runs.iter().map(|r| r.seconds).collect();
                    let lo = t.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = t.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    (*k, s.minions, median(&t).unwrap_or(lo), lo, hi)
                })
        })
        .collect();
    let all_sizes: Vec<usize> = fanout.values().flatten().map(|s| s.minions).collect();
    if points.is_empty() || all_sizes.is_empty() {
        return None;
    }
    let (w, h) = (760.0_f64, 460.0_f64);
    let (left, right, top, bottom) = (80.0, 200.0, 50.0, 60.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let xmin = (*all_sizes.iter().min()? as f64).log10();
    let xmax = (*all_sizes.iter().max()? as f64).log10();
    let (xmin, xmax) = if (xmax - xmin).abs() < 1e-9 {
        (xmin - 0.5, xmax + 0.5)
    } else {
        (xmin - 0.1, xmax + 0.1)
    };
    let tmin = points
        .iter()
        .map(|p| p.3)
        .fold(f64::INFINITY, f64::min)
        .max(1e-4);
    let tmax = points
        .iter()
        .map(|p| p.4)
        .fold(f64::NEG_INFINITY, f64::max)
        .max(tmin * 10.0);
    let ymin = tmin.log10().floor();
    let ymax = tmax.log10().ceil().max(ymin + 1.0);
    let x = |n: f64| left + (n.log10() - xmin) / (xmax - xmin) * pw;
    let y = |t: f64| top + ph - (t.max(1e-9).log10() - ymin) / (ymax - ymin) * ph;
    let color = |k: Kind| match k {
        Kind::Brine => "#d9480f",
        Kind::Salt => "#1864ab",
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(s, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">W4 fan-out: test.ping to N minions, \
         submission to last return</text>",
        left + pw / 2.0
    );
    // Grid and y ticks (decades).
    let mut d = ymin;
    while d <= ymax + 1e-9 {
        let t = 10f64.powf(d);
        let yy = y(t);
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + pw,
            left - 6.0,
            yy + 4.0,
            esc(&format!("{} s", num(t)))
        );
        d += 1.0;
    }
    let mut sizes = all_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    for n in &sizes {
        let xx = x(*n as f64);
        let _ = writeln!(
            s,
            "<line x1=\"{xx:.1}\" y1=\"{top}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\
             <text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{n}</text>",
            top + ph,
            top + ph + 18.0
        );
    }
    let _ = writeln!(
        s,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"#333\"/>"
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">minions (log scale)</text>",
        left + pw / 2.0,
        h - 15.0
    );
    let _ = writeln!(
        s,
        "<text transform=\"translate(20 {:.1}) rotate(-90)\" text-anchor=\"middle\">seconds (log scale)</text>",
        top + ph / 2.0
    );
    let mut legend_y = top + 10.0;
    for (k, sizes) in fanout {
        let c = color(*k);
        let pts: Vec<&(Kind, usize, f64, f64, f64)> = points.iter().filter(|p| p.0 == *k).collect();
        if pts.len() > 1 {
            let path: Vec<String> = pts
                .iter()
                .map(|p| format!("{:.1},{:.1}", x(p.1 as f64), y(p.2)))
                .collect();
            let _ = writeln!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"/>",
                path.join(" ")
            );
        }
        for p in &pts {
            let xx = x(p.1 as f64);
            let _ = writeln!(
                s,
                "<line x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"{c}\"/>\
                 <circle cx=\"{xx:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{c}\"><title>{}: {} minions, {} s</title></circle>",
                y(p.3),
                y(p.4),
                y(p.2),
                esc(k.name()),
                p.1,
                num(p.2)
            );
        }
        if let Some(last) = sizes.last().filter(|l| !l.ok()) {
            let xx = x(last.minions as f64);
            // One line per implementation, so that two stops at the same size do not overlap.
            let yy = top + 18.0 + 34.0 * (legend_y - top - 10.0) / 20.0;
            let _ = writeln!(
                s,
                "<text x=\"{xx:.1}\" y=\"{yy:.1}\" fill=\"{c}\" font-size=\"18\" text-anchor=\"middle\">×</text>\
                 <text x=\"{xx:.1}\" y=\"{:.1}\" fill=\"{c}\" font-size=\"10\" text-anchor=\"middle\">{} stopped</text>",
                yy + 14.0,
                esc(k.name())
            );
        }
        let _ = writeln!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"14\" height=\"4\" fill=\"{c}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            left + pw + 16.0,
            legend_y - 4.0,
            left + pw + 36.0,
            legend_y,
            esc(k.name())
        );
        legend_y += 20.0;
    }
    s.push_str("</svg>\n");
    Some(s)
}

// ------------------------------------------------------------------------------------------
// The machine

fn first_line_with(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':').or_else(|| l.split_once('=')))
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
}

/// The 1, 5 and 15 minute load averages (other work on the machine skews every figure).
pub(crate) fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// CPU model, cores, RAM, kernel and OS, from /proc and /etc/os-release.
pub(crate) fn machine() -> Vec<(String, String)> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let model = first_line_with(&cpuinfo, "model name").unwrap_or_else(|| "unknown".into());
    let cores = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let mhz = first_line_with(&cpuinfo, "cpu MHz").unwrap_or_default();
    let mem_kb: f64 = first_line_with(&meminfo, "MemTotal")
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0.0);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let os = fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| first_line_with(&t, "PRETTY_NAME"))
        .unwrap_or_default();
    vec![
        ("CPU".into(), format!("{model} ({mhz} MHz)")),
        ("Cores (logical)".into(), cores.to_string()),
        ("RAM".into(), format!("{:.1} GiB", mem_kb / 1024.0 / 1024.0)),
        ("Kernel".into(), format!("Linux {kernel}")),
        ("OS".into(), os),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::FanOut;

    #[test]
    fn median_and_number_format() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(num(1234.4), "1234");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(num(0.1234), "0.123");
        assert_eq!(num(f64::NAN), "n/a");
        assert_eq!(num(0.00999), "0.00999");
        assert_eq!(num(0.0123), "0.0123");
        assert_eq!(num(0.0), "0");
    }

    #[test]
    fn comparison_follows_the_direction() {
        assert_eq!(compare(10.0, 100.0, Better::Lower).1, "Brine 10.0×");
        assert_eq!(compare(10.0, 100.0, Better::Higher).1, "Salt 10.0×");
        assert_eq!(compare(10.0, 10.2, Better::Higher).1, "about equal");
        assert_eq!(compare(10.0, 100.0, Better::Lower).0, "0.100");
        assert_eq!(compare(f64::NAN, 1.0, Better::Lower).0, "—");
    }

    fn size(n: usize, t: &[f64], failure: Option<&str>) -> SizeResult {
        SizeResult {
            minions: n,
            sign_in: Some(1.0),
            runs: t
                .iter()
                .map(|s| FanOut {
                    seconds: *s,
                    returns: n,
                    master_cpu: 0.5,
                    api_cpu: 0.1,
                })
                .collect(),
            peak_rss: 10.0,
            peak_pss: 5.0,
            failure: failure.map(str::to_string),
            too_slow: false,
        }
    }

    #[test]
    fn report_has_every_section_table_and_plot() {
        let mut r = Report::new(vec![Kind::Brine, Kind::Salt]);
        r.runs = 3;
        r.seconds = 5.0;
        for v in [1.0, 2.0, 3.0] {
            r.add("W1", "p50 latency", "ms", Better::Lower, Kind::Brine, v);
            r.add(
                "W1",
                "p50 latency",
                "ms",
                Better::Lower,
                Kind::Salt,
                v * 100.0,
            );
        }
        for _ in 0..2 {
            r.fail(
                "W2",
                "requests/s (16 clients)",
                "req/s",
                Better::Higher,
                Kind::Salt,
                "timed out",
            );
        }
        r.fanout.insert(
            Kind::Brine,
            vec![size(100, &[0.1, 0.2, 0.3], None), size(1000, &[1.0], None)],
        );
        r.fanout.insert(
            Kind::Salt,
            vec![
                size(100, &[2.0, 3.0], None),
                size(1000, &[], Some("only 5 of 1000 signed in")),
            ],
        );
        r.baselines
            .push(("axum hello p50".into(), "ms", vec![0.1, 0.2, 0.3]));
        let svg = fanout_svg(&r.fanout).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("Salt 3007.15 stopped"));
        let md = r.markdown(Some("B-fanout.svg"), &[100, 1000]);
        for (_, title, _) in SECTIONS {
            let title = title.replace("{clients}", "16");
            assert!(md.contains(&format!("## {title}")), "{title}");
        }
        for h in [
            "## Machine",
            "## Method",
            "## Headline",
            "## Baselines",
            "(B-fanout.svg)",
        ] {
            assert!(md.contains(h), "{h}");
        }
        assert!(md.contains("| p50 latency (ms, ↓) | **2.00** (1.00–3.00) | **200** (100–300) | 0.0100 | Brine 100× |"), "{md}");
        assert!(md.contains("⚠ timed out |"), "one note per distinct reason");
        assert!(md.contains("Salt 3007.15: stopped at 1000 minions: only 5 of 1000 signed in (largest completed size: 100)."));
        assert!(md.contains("Brine: every planned size completed (up to 1000 minions)."));
    }

    #[test]
    fn no_plot_without_points() {
        assert!(fanout_svg(&BTreeMap::new()).is_none());
    }

    #[test]
    fn machine_is_described() {
        let m = machine();
        assert!(m
            .iter()
            .any(|(k, v)| k == "Cores (logical)" && v.parse::<usize>().unwrap() >= 1));
    }
}
