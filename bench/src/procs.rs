//! Child processes and what /proc says about them: process trees, RSS, PSS, CPU seconds.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A binary next to this one (the same target directory), if it was built.
pub(crate) fn sibling(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join(name);
    p.exists().then_some(p)
}

/// A started child. Dropping it stops the whole process tree it grew: SIGTERM to the child,
/// then SIGKILL to whatever of the tree is still alive after a grace period.
pub(crate) struct Proc {
    pub name: String,
    child: Child,
}

impl Proc {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status text)` once the process has exited.
    pub(crate) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(s)) => Some(s.to_string()),
            Ok(None) => None,
            Err(e) => Some(e.to_string()),
        }
    }

    pub(crate) fn stop(self) {
        drop(self)
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state letter is Z.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(t) => t
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pids = tree(self.child.id());
        signal(self.child.id(), "-TERM");
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut exited = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Salt's daemons fork workers; give them a moment to follow their parent, then make sure.
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && pids[1..].iter().any(|p| alive(*p)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        for p in &pids[1..] {
            if alive(*p) {
                signal(*p, "-KILL");
            }
        }
        // SIGKILL is delivered asynchronously: wait until the processes are really gone.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && pids[1..].iter().any(|p| alive(*p)) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Start `program args`, stdout to /dev/null and stderr appended to `log`.
pub(crate) fn spawn(name: &str, program: &Path, args: &[&str], log: &Path) -> anyhow::Result<Proc> {
    let out = fs::OpenOptions::new().create(true).append(true).open(log)?;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(out)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", program.display()))?;
    Ok(Proc {
        name: name.to_string(),
        child,
    })
}

/// Like [`spawn`] with stdout going to a file too (tools whose output we read later).
pub(crate) fn spawn_logged(
    name: &str,
    program: &Path,
    args: &[String],
    log: &Path,
) -> anyhow::Result<Proc> {
    let out = fs::OpenOptions::new().create(true).append(true).open(log)?;
    let err = out.try_clone()?;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", program.display()))?;
    Ok(Proc {
        name: name.to_string(),
        child,
    })
}

/// Every pid in the process tree under `pid`, `pid` first.
pub(crate) fn tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        // Children of every thread of p (a child's parent is the thread that forked it).
        if let Ok(tasks) = fs::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.flatten() {
                let path = t.path().join("children");
                if let Ok(text) = fs::read_to_string(path) {
                    for c in text
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok())
                    {
                        if !out.contains(&c) {
                            out.push(c);
                        }
                    }
                }
            }
        }
        i += 1;
    }
    out
}

fn field_kb(text: &str, field: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn status_kb(pid: u32, field: &str) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|t| field_kb(&t, field))
        .unwrap_or(0)
}

/// Resident memory of a process tree (sum of each process's RSS), MiB. Forked workers share
/// pages, so this counts shared pages once per process; see [`pss_mib`].
pub(crate) fn rss_mib(pid: u32) -> f64 {
    tree(pid)
        .iter()
        .map(|p| status_kb(*p, "VmRSS:"))
        .sum::<u64>() as f64
        / 1024.0
}

/// Proportional set size of a process tree, MiB: shared pages split between their sharers.
pub(crate) fn pss_mib(pid: u32) -> f64 {
    tree(pid)
        .iter()
        .map(|p| {
            fs::read_to_string(format!("/proc/{p}/smaps_rollup"))
                .map(|t| field_kb(&t, "Pss:"))
                .unwrap_or(0)
        })
        .sum::<u64>() as f64
        / 1024.0
}

/// Clock ticks per second for /proc/<pid>/stat times (USER_HZ; 100 on every Linux ABI we run).
const USER_HZ: f64 = 100.0;

fn stat_cpu(text: &str) -> Option<f64> {
    let rest = text.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the comm field: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
    let sum: f64 = f
        .get(11..15)?
        .iter()
        .map(|v| v.parse::<f64>().unwrap_or(0.0))
        .sum();
    Some(sum / USER_HZ)
}

/// CPU seconds (user + system, including reaped children) used so far by a process tree.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    tree(pid)
        .iter()
        .filter_map(|p| fs::read_to_string(format!("/proc/{p}/stat")).ok())
        .filter_map(|t| stat_cpu(&t))
        .sum()
}

/// Samples the memory of a process tree in the background: RSS every tick, PSS (dearer to
/// read) every fifth. `stop` returns the largest samples, (RSS, PSS) in MiB.
pub(crate) struct RssSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<(f64, f64)>>,
}

impl RssSampler {
    pub(crate) fn start(pid: u32, every: Duration) -> RssSampler {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let (mut rss, mut pss): (f64, f64) = (0.0, 0.0);
            let mut tick = 0u64;
            while !s.load(Ordering::Relaxed) {
                rss = rss.max(rss_mib(pid));
                if tick.is_multiple_of(5) {
                    pss = pss.max(pss_mib(pid));
                }
                tick += 1;
                std::thread::sleep(every);
            }
            (rss.max(rss_mib(pid)), pss.max(pss_mib(pid)))
        });
        RssSampler {
            stop,
            handle: Some(handle),
        }
    }

    pub(crate) fn stop(mut self) -> (f64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or((0.0, 0.0))
    }
}

/// Poll `f` until it is true or `timeout` passes.
#[cfg(test)]
pub(crate) fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_reads_utime_stime_and_children() {
        // pid (comm with ) and spaces) state ppid ... utime=250 stime=50 cutime=100 cstime=0
        let line = "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 100 0 20 0 1 0";
        assert_eq!(stat_cpu(line), Some(4.0));
        assert_eq!(stat_cpu("garbage"), None);
    }

    #[test]
    fn own_process_is_measurable() {
        let me = std::process::id();
        assert!(rss_mib(me) > 0.0);
        assert!(tree(me).contains(&me));
        assert!(cpu_seconds(me) >= 0.0);
    }

    #[test]
    fn sampler_sees_this_process() {
        let s = RssSampler::start(std::process::id(), Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(60));
        let (rss, pss) = s.stop();
        assert!(rss > 0.0 && pss > 0.0 && pss <= rss + 1.0, "{rss} {pss}");
    }

    #[test]
    fn field_kb_finds_the_named_field() {
        let t = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(field_kb(t, "VmRSS:"), 1024);
        assert_eq!(field_kb(t, "Pss:"), 0);
    }

    #[test]
    fn child_tree_is_stopped_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let p = spawn(
            "sleeper",
            Path::new("/bin/sh"),
            &["-c", "sleep 60 & sleep 60"],
            &dir.path().join("log"),
        )
        .unwrap();
        let pid = p.pid();
        assert!(wait_until(Duration::from_secs(5), || tree(pid).len() >= 2));
        let pids = tree(pid);
        drop(p);
        let states: Vec<String> = pids
            .iter()
            .map(|p| fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default())
            .collect();
        assert!(
            pids.iter().all(|p| !alive(*p)),
            "{pids:?} still alive: {states:?}"
        );
    }
}
