//! W11: the minion side of configuration management. Brine's salt-minion and Salt's apply
//! the same 200-state tree (`file.managed` from templates, `file.directory`, `cmd.run` with
//! `unless`, `test.*`), from the same (Brine) master, through salt-api: wall time, the
//! minion's CPU (its whole process tree, reaped job processes included) and its peak
//! resident memory, for a first run (everything changes) and a second (nothing does); then
//! `n` minions of each kind at once.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::procs::{cpu_seconds, sibling, spawn, Proc, RssSampler};
use crate::report::{Better, Report};
use crate::stack::{minion_config, Kind, Stack};
use crate::swarm::{forget_swarm_keys, local_call};

const PREFIX: &str = "w11-";
/// States in the tree: four kinds of 50.
const PER_KIND: usize = 50;

/// The tree: `salt/w11/init.sls` and its templates, under the master's `srv`.
pub(crate) fn write_tree(srv: &Path) -> anyhow::Result<()> {
    let dir = srv.join("salt/w11");
    fs::create_dir_all(dir.join("files"))?;
    for t in 0..10 {
        fs::write(
            dir.join(format!("files/conf{t}.j2")),
            format!(
                "# template {t} for {{{{ grains['id'] }}}}\n\
                 {{% for k, v in settings | dictsort %}}{{{{ k }}}} = {{{{ v }}}}\n{{% endfor %}}\
                 workers = {{{{ workers * {t} }}}}\n"
            ),
        )?;
    }
    let mut sls = String::from("{% set dest = grains['benchdest'] %}\n");
    for i in 0..PER_KIND {
        sls.push_str(&format!(
            "w11-dir-{i}:\n  file.directory:\n    - name: {{{{ dest }}}}/d{i}\n    - makedirs: True\n\n\
             w11-conf-{i}:\n  file.managed:\n    - name: {{{{ dest }}}}/d{i}/app.conf\n\
             \x20   - source: salt://w11/files/conf{t}.j2\n    - template: jinja\n    - mode: '0644'\n\
             \x20   - context:\n        workers: {i}\n        settings: {{listen: {port}, name: app{i}}}\n\
             \x20   - require:\n      - file: w11-dir-{i}\n\n\
             w11-cmd-{i}:\n  cmd.run:\n    - name: touch {{{{ dest }}}}/d{i}/done\n\
             \x20   - unless: test -e {{{{ dest }}}}/d{i}/done\n    - require:\n      - file: w11-dir-{i}\n\n\
             w11-test-{i}:\n  test.succeed_without_changes:\n    - name: check {i}\n\n",
            t = i % 10,
            port = 8000 + i,
        ));
    }
    fs::write(dir.join("init.sls"), sls)?;
    Ok(())
}

struct Minion {
    id: String,
    dir: PathBuf,
    proc: Proc,
}

fn start(st: &Stack, venv: &Path, kind: Kind, i: usize) -> anyhow::Result<Minion> {
    let id = format!("{PREFIX}{}-{i}", kind.slug());
    let dir = st.dir.join(&id);
    fs::create_dir_all(dir.join("etc"))?;
    fs::write(
        dir.join("etc/minion"),
        format!(
            "{}grains:\n  benchdest: {}/out\n",
            minion_config(&dir, &id, st.ret_port),
            dir.display()
        ),
    )?;
    let program = match kind {
        Kind::Brine => sibling("salt-minion").ok_or_else(|| {
            anyhow::anyhow!("Brine's salt-minion is not built next to brine-bench")
        })?,
        Kind::Salt => venv.join("bin/salt-minion"),
    };
    let conf = dir.join("etc").display().to_string();
    let proc = spawn(
        &id,
        &program,
        &["-c", &conf, "-l", "warning"],
        &dir.join("stderr"),
    )?;
    Ok(Minion { id, dir, proc })
}

fn reset(m: &Minion) -> anyhow::Result<()> {
    for sub in ["out", "cache/files"] {
        let p = m.dir.join(sub);
        if p.exists() {
            fs::remove_dir_all(&p)?;
        }
    }
    Ok(())
}

/// Accept the pending keys of these minions and wait until they answer.
fn sign_in(
    http: &reqwest::blocking::Client,
    st: &Stack,
    tok: &str,
    ids: &[String],
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let pending = st.master_root().join("pki/minions_pre");
        if let Ok(rd) = fs::read_dir(&pending) {
            for e in rd.flatten() {
                if ids.iter().any(|i| *i == e.file_name().to_string_lossy()) {
                    fs::rename(e.path(), st.accepted_dir().join(e.file_name()))?;
                }
            }
        }
        let ping = local_call(
            http,
            st,
            tok,
            &json!({"client": "local", "tgt": ids.join(","), "tgt_type": "list", "fun": "test.ping", "timeout": 3}),
        )?;
        if ping.count(&json!(true)) >= ids.len() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {} minions answered; logs under {}",
            ping.count(&json!(true)),
            ids.len(),
            st.dir.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// One kind's minions applying the tree at once, twice.
fn apply_twice(
    http: &reqwest::blocking::Client,
    st: &Stack,
    tok: &str,
    minions: &[Minion],
    rep: &mut Report,
    kind: Kind,
) -> anyhow::Result<()> {
    let n = minions.len();
    let ids: Vec<String> = minions.iter().map(|m| m.id.clone()).collect();
    for m in minions {
        reset(m)?;
    }
    let apply = json!({"client": "local", "tgt": ids.join(","), "tgt_type": "list",
        "fun": "state.sls", "arg": ["w11"], "timeout": 900});
    for (pass, label) in [
        (0, "first run (everything changes)"),
        (1, "second run (nothing changes)"),
    ] {
        let pids: Vec<u32> = minions.iter().map(|m| m.proc.pid()).collect();
        let cpu0: f64 = pids.iter().map(|p| cpu_seconds(*p)).sum();
        let samplers: Vec<RssSampler> = pids
            .iter()
            .map(|p| RssSampler::start(*p, Duration::from_millis(20)))
            .collect();
        let call = local_call(http, st, tok, &apply)?;
        let peaks: Vec<f64> = samplers.into_iter().map(|s| s.stop().0).collect();
        let cpu = pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>() - cpu0;
        anyhow::ensure!(
            call.returns.len() == n,
            "{} of {n} minions returned",
            call.returns.len()
        );
        for (id, ret) in &call.returns {
            let (s, f, c) =
                crate::cm::highstate_counts(ret).map_err(|e| anyhow::anyhow!("{id}: {e}"))?;
            anyhow::ensure!(
                s == 4 * PER_KIND && f == 0,
                "{id}: {f} of {s} states failed: {ret}"
            );
            anyhow::ensure!(
                (pass == 0) == (c > 0),
                "{id}: the {label} changed {c} states"
            );
        }
        let peak = peaks.iter().cloned().fold(0.0, f64::max);
        crate::log(format!(
            "  W11 {} x{n} {label}: {:.2} s, minion CPU {:.2} s per minion, peak RSS {peak:.0} MiB",
            kind.name(),
            call.seconds,
            cpu / n as f64
        ));
        let who = if n == 1 {
            "one minion".to_string()
        } else {
            format!("{n} minions at once")
        };
        rep.add(
            "W11",
            &format!("{who}, {label}: wall time"),
            "s",
            Better::Lower,
            kind,
            call.seconds,
        );
        rep.add(
            "W11",
            &format!("{who}, {label}: minion CPU per minion"),
            "CPU s",
            Better::Lower,
            kind,
            cpu / n as f64,
        );
        if pass == 0 {
            rep.add(
                "W11",
                &format!("{who}: peak RSS per minion"),
                "MiB",
                Better::Lower,
                kind,
                peak,
            );
        }
    }
    Ok(())
}

/// The processes the tree's `cmd.run` states start, started one after another by the bench
/// itself: the first run's commands through the shell both kinds of minion are given
/// (`$SHELL -c`, as Salt's `shell` grain reads it; Salt's minion starts them so), the same
/// programs started without the shell (as Brine's minion starts a plain file command), and
/// the `unless` conditions (`test -e`), one per state on each run, which Salt's minion
/// starts as shells and Brine's answers as the shell's builtin does.
struct Floor {
    shell_commands: f64,
    programs: f64,
    conditions: f64,
}

fn process_floor(dir: &Path) -> anyhow::Result<Floor> {
    let shell = std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into());
    let out = dir.join("floor");
    let _ = fs::remove_dir_all(&out);
    for i in 0..PER_KIND {
        fs::create_dir_all(out.join(format!("d{i}")))?;
    }
    let done = |i: usize| out.join(format!("d{i}/done")).display().to_string();
    let timed = |argv: &dyn Fn(usize) -> Vec<String>| -> anyhow::Result<f64> {
        let started = Instant::now();
        for i in 0..PER_KIND {
            let argv = argv(i);
            std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .status()?;
        }
        Ok(started.elapsed().as_secs_f64())
    };
    let shell_commands =
        timed(&|i| vec![shell.clone(), "-c".into(), format!("touch {}", done(i))])?;
    for i in 0..PER_KIND {
        fs::remove_file(done(i))?;
    }
    let programs = timed(&|i| vec!["touch".into(), done(i)])?;
    let conditions = timed(&|i| vec![shell.clone(), "-c".into(), format!("test -e {}", done(i))])?;
    fs::remove_dir_all(&out)?;
    Ok(Floor {
        shell_commands,
        programs,
        conditions,
    })
}

/// W11 on a running Brine stack: one minion of each kind, then `n` of each kind at once.
pub(crate) fn measure(
    st: &mut Stack,
    venv: &Path,
    n: usize,
    rep: &mut Report,
) -> anyhow::Result<()> {
    write_tree(&st.master_root().join("srv"))?;
    if !st.running() {
        st.start()?;
    }
    let http = crate::cm::http(Duration::from_secs(1800))?;
    let tok = crate::cm::token(&http, st)?;
    let Floor {
        shell_commands,
        programs,
        conditions,
    } = process_floor(&st.dir)?;
    crate::log(format!(
        "  W11 the tree's processes alone: {shell_commands:.2} s (the first run's commands through the shell), {programs:.2} s (their programs without it), {conditions:.2} s (the conditions, each run)"
    ));
    rep.note(
        "W11",
        format!(
            "The tree's `cmd.run` processes alone, started one after another by the bench (no minion): {shell_commands:.2} s for the first run's {PER_KIND} `touch` commands through `$SHELL -c`, as Salt's minion starts them, and {programs:.2} s for the same `touch` programs started without the shell, as Brine's minion starts a plain file command (the shell would only find the program and replace itself with it); {conditions:.2} s for the {PER_KIND} `unless: test -e` conditions of each run through the shell, as Salt's minion starts them, which Brine's answers as the shell's `test` builtin does, without a process."
        ),
    );
    for count in [1, n].into_iter().filter(|c| *c > 0) {
        for kind in [Kind::Brine, Kind::Salt] {
            let minions: Vec<Minion> = (0..count)
                .map(|i| start(st, venv, kind, i))
                .collect::<anyhow::Result<_>>()?;
            let ids: Vec<String> = minions.iter().map(|m| m.id.clone()).collect();
            let r = sign_in(&http, st, &tok, &ids)
                .and_then(|()| apply_twice(&http, st, &tok, &minions, rep, kind));
            for m in minions {
                m.proc.stop();
            }
            forget_swarm_keys(&st.accepted_dir(), PREFIX)?;
            r?;
        }
        if count == n {
            break;
        }
    }
    Ok(())
}
