//! W14: fan-out to a fleet split over two masters, answered through one API. Brine's master A
//! (the stack's, with its salt-api) and a second master B share the pki dir and a NATS server
//! (`brine_nats` with `jobs_subject`); half of N `brine-swarm` minions sign in to each master.
//! One `local` test.ping to all of them through A's API is timed until the answer holds every
//! return: B publishes the job A shared, and the API gathers B's returns from the stream.
//! Salt reaches such a fleet through syndics (a master of masters), which this bench does not
//! set up: Brine only.

use std::path::Path;
use std::time::Duration;

use brine_e2e::free_port;
use brine_e2e::nats::Nats;
use serde_json::json;

use crate::procs::{cpu_seconds, spawn, Proc};
use crate::report::{Better, Report};
use crate::stack::{Kind, Stack};
use crate::swarm::{fan_out_session, forget_swarm_keys, local_call, Launched, NotReady, SwarmOpts};

/// Id prefix of this workload's swarm minions.
const PREFIX: &str = "w14-";
/// The second master's id (the stack's master keeps its default id).
const MASTER_B: &str = "w14-master-b";

/// Run W14 with `minions` swarm minions and `runs` fan-outs; rows go to `rep`. The stack is
/// stopped and started again without NATS afterwards.
pub(crate) fn measure(
    st: &mut Stack,
    sw: &SwarmOpts,
    minions: usize,
    runs: usize,
    rep: &mut Report,
) -> anyhow::Result<()> {
    let nats = Nats::start().ok_or_else(|| anyhow::anyhow!("nats-server is not installed"))?;
    let shared = format!("{}  jobs_subject: salt.jobs\n", nats.master_config());
    let conf = st.master_conf_dir().join("master");
    let plain = std::fs::read_to_string(&conf)?;
    st.stop();
    std::fs::write(&conf, format!("{plain}{shared}"))?;
    let r = measure_on(st, sw, minions, runs, rep, &shared);
    st.stop();
    std::fs::write(&conf, plain)?;
    r
}

fn measure_on(
    st: &mut Stack,
    sw: &SwarmOpts,
    minions: usize,
    runs: usize,
    rep: &mut Report,
    shared: &str,
) -> anyhow::Result<()> {
    forget_swarm_keys(&st.accepted_dir(), PREFIX)?;
    st.start()?;
    let b = start_master_b(st, shared)?;
    crate::log(format!(
        "W14 split fleet: {minions} swarm minions over two masters"
    ));
    let half = minions / 2;
    let on_a = Launched::start_range(&st.dir, st.ret_port, sw, PREFIX, 0..half, &[])?;
    let on_b = Launched::start_range(&st.dir, b.ret_port, sw, PREFIX, half..minions, &[])?;
    let name = format!("{minions} minions over two masters: fan-out time");
    let mut halves = [on_a, on_b];
    for swarm in &mut halves {
        if let Err(NotReady { why, .. }) = swarm.wait_ready(sw) {
            rep.fail("W14", &name, "s", Better::Lower, Kind::Brine, &why);
            return Ok(());
        }
    }
    let (http, tok) = fan_out_session(st, sw)?;
    let body = json!({"client": "local", "tgt": format!("{PREFIX}*"), "fun": "test.ping",
                      "timeout": sw.limit.as_secs()});
    for _ in 0..runs {
        let b0 = cpu_seconds(b.proc.pid());
        let call = local_call(&http, st, &tok, &body)?;
        let b_cpu = cpu_seconds(b.proc.pid()) - b0;
        let returns = call.count(&json!(true));
        crate::log(format!(
            "  {returns} of {minions} returns in {:.2} s",
            call.seconds
        ));
        if returns < minions {
            let why = format!("{returns} of {minions} returns after {:.1} s", call.seconds);
            rep.fail("W14", &name, "s", Better::Lower, Kind::Brine, &why);
            break;
        }
        let mut add = |what: &str, unit, v| {
            let n = format!("{minions} minions over two masters: {what}");
            rep.add("W14", &n, unit, Better::Lower, Kind::Brine, v)
        };
        add("fan-out time", "s", call.seconds);
        add("master A CPU (the API's)", "CPU s", call.master_cpu);
        add("master B CPU", "CPU s", b_cpu);
        add("salt-api CPU", "CPU s", call.api_cpu);
        std::thread::sleep(Duration::from_secs(1));
    }
    for swarm in halves {
        drop(swarm.stop());
    }
    Ok(())
}

/// The second master, running.
struct MasterB {
    proc: Proc,
    ret_port: u16,
}

/// Master B beside the stack's: the stack's config with its own ports, directories and id,
/// the pki dir shared (a link to the stack master's, as a shared mount would be).
fn start_master_b(st: &Stack, shared: &str) -> anyhow::Result<MasterB> {
    let root = st.dir.join("master-b");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("etc"))?;
    std::os::unix::fs::symlink(st.master_root().join("pki"), root.join("pki"))?;
    let (ret_port, publish_port) = (free_port(), free_port());
    let text = crate::stack::master_config(&root, ret_port, publish_port, free_port());
    std::fs::write(
        root.join("etc/master"),
        format!("id: {MASTER_B}\n{text}{shared}"),
    )?;
    let conf = root.join("etc");
    let proc = spawn(
        "master-b",
        &st.program("salt-master")?,
        &["-c", &conf.to_string_lossy(), "-l", "warning"],
        &root.join("master.stderr"),
    )?;
    wait_listening(&root, ret_port)?;
    Ok(MasterB { proc, ret_port })
}

/// Wait until a master takes connections on `port` (its stderr is under `root`).
fn wait_listening(root: &Path, port: u16) -> anyhow::Result<()> {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    anyhow::bail!(
        "master B does not listen on {port}; see {}",
        root.join("master.stderr").display()
    )
}
