//! The `status` execution module, Salt 3007's Linux side: `uptime`, `loadavg`, the `/proc`
//! readings (`cpuinfo`, `cpustats`, `meminfo`, `vmstats`, `diskstats`, `netdev`, `netstats`,
//! `version`; parsed in [`procfs`]), `diskusage`, `nproc`, `w`, `procs`, `pid`, `time` and
//! `all_status`.

mod procfs;

use std::time::{SystemTime, UNIX_EPOCH};

use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::{CallState, Context};
use super::{FnError, Spec};
use brine_protocol::payload::map;

/// The functions of the `status` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    AllStatus,
    Cpuinfo,
    Cpustats,
    Diskstats,
    Diskusage,
    Loadavg,
    Meminfo,
    Netdev,
    Netstats,
    Nproc,
    Pid,
    Procs,
    Time,
    Uptime,
    Version,
    Vmstats,
    W,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::AllStatus,
        Fun::Cpuinfo,
        Fun::Cpustats,
        Fun::Diskstats,
        Fun::Diskusage,
        Fun::Loadavg,
        Fun::Meminfo,
        Fun::Netdev,
        Fun::Netstats,
        Fun::Nproc,
        Fun::Pid,
        Fun::Procs,
        Fun::Time,
        Fun::Uptime,
        Fun::Version,
        Fun::Vmstats,
        Fun::W,
    ];

    pub(crate) fn spec(self) -> Spec {
        let sig = match self {
            Fun::Diskusage => Signature::new(&[], 0, true, false),
            Fun::Pid => Signature::new(&["sig"], 1, false, false),
            Fun::Time => Signature::new(&["format"], 0, false, false),
            _ => Signature::NONE,
        };
        let (name, pyname, doc) = match self {
            Fun::AllStatus => (
                "status.all_status",
                "all_status",
                "
    Return a composite of all status data: cpuinfo, cpustats, diskstats,
    diskusage, loadavg, meminfo, netdev, netstats, uptime, vmstats and w.

    CLI Example:

        salt '*' status.all_status
    ",
            ),
            Fun::Cpuinfo => (
                "status.cpuinfo",
                "cpuinfo",
                "
    Return the CPU information from /proc/cpuinfo.

    CLI Example:

        salt '*' status.cpuinfo
    ",
            ),
            Fun::Cpustats => (
                "status.cpustats",
                "cpustats",
                "
    Return the CPU statistics from /proc/stat.

    CLI Example:

        salt '*' status.cpustats
    ",
            ),
            Fun::Diskstats => (
                "status.diskstats",
                "diskstats",
                "
    Return the disk statistics from /proc/diskstats.

    CLI Example:

        salt '*' status.diskstats
    ",
            ),
            Fun::Diskusage => (
                "status.diskusage",
                "diskusage",
                "
    Return the available and total bytes of mounted file systems: every
    one, those mounted at the paths given, or those of the file system
    types given (globs).

    CLI Example:

        salt '*' status.diskusage [paths and/or filesystem types]
        salt '*' status.diskusage         # usage for all filesystems
        salt '*' status.diskusage / /tmp  # usage for / and /tmp
        salt '*' status.diskusage ext?    # usage for ext[234] filesystems
    ",
            ),
            Fun::Meminfo => (
                "status.meminfo",
                "meminfo",
                "
    Return the memory information from /proc/meminfo.

    CLI Example:

        salt '*' status.meminfo
    ",
            ),
            Fun::Netdev => (
                "status.netdev",
                "netdev",
                "
    Return the network device statistics from /proc/net/dev.

    CLI Example:

        salt '*' status.netdev
    ",
            ),
            Fun::Netstats => (
                "status.netstats",
                "netstats",
                "
    Return the network statistics from /proc/net/netstat.

    CLI Example:

        salt '*' status.netstats
    ",
            ),
            Fun::Nproc => (
                "status.nproc",
                "nproc",
                "
    Return the number of processing units available on this system.

    CLI Example:

        salt '*' status.nproc
    ",
            ),
            Fun::Pid => (
                "status.pid",
                "pid",
                "
    Return the PIDs of the processes whose ps line matches the regular
    expression sig, one per line.

    CLI Example:

        salt '*' status.pid <sig>
    ",
            ),
            Fun::Procs => (
                "status.procs",
                "procs",
                "
    Return the process data: user and command of each pid.

    CLI Example:

        salt '*' status.procs
    ",
            ),
            Fun::Time => (
                "status.time",
                "time_",
                "
    Return the current time on the minion, formatted with strftime's
    format (default: Monday, 27. July 2015 07:55AM).

    CLI Example:

        salt '*' status.time
        salt '*' status.time '%s'
    ",
            ),
            Fun::Version => (
                "status.version",
                "version",
                "
    Return the system version (/proc/version).

    CLI Example:

        salt '*' status.version
    ",
            ),
            Fun::Vmstats => (
                "status.vmstats",
                "vmstats",
                "
    Return the virtual memory statistics from /proc/vmstat.

    CLI Example:

        salt '*' status.vmstats
    ",
            ),
            Fun::W => (
                "status.w",
                "w",
                "
    Return the logged-in users and what they are doing (w -fh).

    CLI Example:

        salt '*' status.w
    ",
            ),
            Fun::Loadavg => (
                "status.loadavg",
                "loadavg",
                "
    Return the 1, 5 and 15 minute load averages.

    CLI Example:

        salt '*' status.loadavg
    ",
            ),
            Fun::Uptime => (
                "status.uptime",
                "uptime",
                "
    Return how long the system has been up: seconds, since_iso, since_t, days,
    time (hours:minutes) and the number of login sessions (users).

    CLI Example:

        salt '*' status.uptime
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

    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let proc = |path: &str, parse: fn(&str) -> Value| {
            std::fs::read_to_string(path).map_or(Value::Map(Vec::new()), |t| parse(&t))
        };
        match self {
            Fun::AllStatus => Ok(map([
                ("cpuinfo", proc("/proc/cpuinfo", procfs::cpuinfo)),
                ("cpustats", proc("/proc/stat", procfs::cpustats)),
                ("diskstats", proc("/proc/diskstats", procfs::diskstats)),
                ("diskusage", diskusage(&[])),
                ("loadavg", loadavg()?),
                ("meminfo", proc("/proc/meminfo", procfs::meminfo)),
                ("netdev", proc("/proc/net/dev", procfs::netdev)),
                ("netstats", proc("/proc/net/netstat", procfs::netstats)),
                ("uptime", uptime().await?),
                ("vmstats", proc("/proc/vmstat", procfs::vmstats)),
                ("w", w().await),
            ])),
            Fun::Cpuinfo => Ok(proc("/proc/cpuinfo", procfs::cpuinfo)),
            Fun::Cpustats => Ok(proc("/proc/stat", procfs::cpustats)),
            Fun::Diskstats => Ok(proc("/proc/diskstats", procfs::diskstats)),
            Fun::Diskusage => {
                let args: Vec<String> = b.varargs.iter().map(py_str).collect();
                Ok(diskusage(&args))
            }
            Fun::Loadavg => loadavg(),
            Fun::Meminfo => Ok(proc("/proc/meminfo", procfs::meminfo)),
            Fun::Netdev => Ok(proc("/proc/net/dev", procfs::netdev)),
            Fun::Netstats => Ok(proc("/proc/net/netstat", procfs::netstats)),
            Fun::Nproc => {
                let out = output(&["nproc"]).await;
                Ok(match procfs::number(out.trim()) {
                    n @ Value::Integer(_) => n,
                    f @ Value::F64(_) => f,
                    _ => Value::from(0),
                })
            }
            Fun::Pid => {
                let sig = py_str(b.get("sig").unwrap_or(&Value::Nil));
                let re = regex::RegexBuilder::new(&sig)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| FnError::Exception(format!("re.error: {e}")))?;
                let me = std::process::id().to_string();
                let ps = ps_output(ctx).await;
                let pids: Vec<&str> = ps
                    .lines()
                    .filter(|l| !l.contains(&me) && re.is_match(l))
                    .filter_map(|l| l.split_whitespace().nth(1))
                    .collect();
                Ok(Value::from(pids.join("\n")))
            }
            Fun::Procs => Ok(procfs::procs(&ps_output(ctx).await)),
            Fun::Time => {
                let format = b
                    .get("format")
                    .map_or_else(|| "%A, %d. %B %Y %I:%M%p".to_string(), py_str);
                strftime_now(&format)
            }
            Fun::Uptime => uptime().await,
            Fun::Version => Ok(std::fs::read_to_string("/proc/version")
                .map_or(Value::Map(Vec::new()), |t| Value::from(t.trim()))),
            Fun::Vmstats => Ok(proc("/proc/vmstat", procfs::vmstats)),
            Fun::W => Ok(w().await),
        }
    }
}

/// `os.getloadavg()`: the kernel's figures as glibc reads them (`sysinfo`).
fn loadavg() -> Result<Value, FnError> {
    let info = nix::sys::sysinfo::sysinfo().map_err(|e| {
        FnError::Execution(format!(
            "status.loadavag is not available on your platform: {e}"
        ))
    })?;
    let (one, five, fifteen) = info.load_average();
    Ok(map([
        ("1-min", Value::F64(one)),
        ("5-min", Value::F64(five)),
        ("15-min", Value::F64(fifteen)),
    ]))
}

async fn uptime() -> Result<Value, FnError> {
    let text = std::fs::read_to_string("/proc/uptime")
        .map_err(|_| FnError::Execution("File /proc/uptime was not found.".into()))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let mut ret = uptime_from(&text, now)
        .ok_or_else(|| FnError::Execution("File /proc/uptime could not be parsed.".into()))?;
    if let Some(users) = count_users().await {
        if let Value::Map(entries) = &mut ret {
            entries.push((Value::from("users"), Value::from(users)));
        }
    }
    Ok(ret)
}

/// A command's standard output (empty when it cannot run).
async fn output(argv: &[&str]) -> String {
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    super::cmd::run_argv(&argv, &[])
        .await
        .map(|o| o.stdout().to_string())
        .unwrap_or_default()
}

/// The output of the `ps` grain's command, run by the shell as Salt runs it.
async fn ps_output(ctx: &Context) -> String {
    let ps = brine_protocol::payload::get(&ctx.grains, "ps")
        .and_then(Value::as_str)
        .unwrap_or("ps -efHww")
        .to_string();
    output(&["/bin/sh", "-c", &ps]).await
}

async fn w() -> Value {
    procfs::w(&output(&["w", "-fh"]).await)
}

/// `status.diskusage`: paths (arguments starting with `/`) and the mount points of the file
/// system types matching the other arguments (globs; every type without arguments).
fn diskusage(args: &[String]) -> Value {
    let mut selected: Vec<String> = Vec::new();
    let mut fstypes: Vec<&str> = Vec::new();
    if args.is_empty() {
        fstypes.push("*");
    }
    for a in args {
        if a.starts_with('/') {
            selected.push(a.clone());
        } else {
            fstypes.push(a);
        }
    }
    if !fstypes.is_empty() {
        let Ok(mounts) = std::fs::read_to_string("/proc/mounts") else {
            return Value::Map(Vec::new());
        };
        for line in mounts.lines() {
            let comps: Vec<&str> = line.split_whitespace().collect();
            if let (Some(mnt), Some(fstype)) = (comps.get(1), comps.get(2)) {
                if fstypes
                    .iter()
                    .any(|g| brine_protocol::target::fnmatch(g, fstype))
                {
                    selected.push(mnt.to_string());
                }
            }
        }
    }
    selected.sort();
    selected.dedup();
    let mut out = Vec::new();
    for path in selected {
        // A mount point statvfs cannot read (Salt's call raises there) is left out.
        let Ok(st) = nix::sys::statvfs::statvfs(path.as_str()) else {
            continue;
        };
        let bsize = st.block_size();
        out.push((
            Value::from(path),
            map([
                (
                    "available",
                    Value::from(st.blocks_available().saturating_mul(bsize)),
                ),
                ("total", Value::from(st.blocks().saturating_mul(bsize))),
            ]),
        ));
    }
    Value::Map(out)
}

/// `datetime.today().strftime(format)` in the minion's local time.
fn strftime_now(format: &str) -> Result<Value, FnError> {
    use std::fmt::Write;
    let items: Vec<chrono::format::Item> = chrono::format::StrftimeItems::new(format).collect();
    if items
        .iter()
        .any(|i| matches!(i, chrono::format::Item::Error))
    {
        return Err(FnError::Exception(format!(
            "ValueError: Invalid format string: {format:?}"
        )));
    }
    let mut text = String::new();
    write!(
        text,
        "{}",
        chrono::Local::now().format_with_items(items.into_iter())
    )
    .map_err(|_| FnError::Exception(format!("ValueError: Invalid format string: {format:?}")))?;
    Ok(Value::from(text))
}

/// Salt's uptime map (without `users`) from /proc/uptime text at time `now`.
fn uptime_from(text: &str, now: f64) -> Option<Value> {
    let up: f64 = text.split_whitespace().next()?.parse().ok()?;
    let seconds = up as i64;
    let boot = now - seconds as f64;
    let since_iso = iso_utc(boot)?;
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    Some(map([
        ("seconds", Value::from(seconds)),
        ("since_iso", Value::from(since_iso)),
        ("since_t", Value::from(boot as i64)),
        ("days", Value::from(days)),
        (
            "time",
            Value::from(format!("{}:{}", rest / 3600, rest % 3600 / 60)),
        ),
    ]))
}

/// Python's `datetime.utcfromtimestamp(t).isoformat()`.
fn iso_utc(t: f64) -> Option<String> {
    let secs = t.floor();
    let micros = ((t - secs) * 1_000_000.0).round() as u32;
    let (secs, micros) = if micros >= 1_000_000 {
        (secs as i64 + 1, 0)
    } else {
        (secs as i64, micros)
    };
    let dt = chrono::DateTime::from_timestamp(secs, micros * 1000)?;
    Some(if micros == 0 {
        dt.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        dt.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    })
}

/// Salt counts the lines of `who -s` (an empty output counts as one line).
async fn count_users() -> Option<usize> {
    let who = super::cmd::which("who")?;
    let out = tokio::process::Command::new(who)
        .arg("-s")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.trim_end().split('\n').count())
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::get;

    #[test]
    fn uptime_fields() {
        let v = uptime_from("93784.56 1000.0\n", 1_700_000_000.25).unwrap();
        assert_eq!(get(&v, "seconds"), Some(&Value::from(93784)));
        assert_eq!(get(&v, "days"), Some(&Value::from(1)));
        assert_eq!(get(&v, "time"), Some(&s("2:3")));
        assert_eq!(
            get(&v, "since_t"),
            Some(&Value::from(1_700_000_000i64 - 93784))
        );
        assert_eq!(get(&v, "since_iso"), Some(&s("2023-11-13T20:10:16.250000")));
        assert!(uptime_from("garbage", 0.0).is_none());
        assert_eq!(iso_utc(0.0).unwrap(), "1970-01-01T00:00:00");
    }

    #[tokio::test]
    async fn live_readings_have_salts_keys() {
        let r = call(&ctx(), "status.all_status", &[]).await;
        assert_eq!(r.retcode, 0, "{:?}", r.ret);
        for key in [
            "cpuinfo",
            "cpustats",
            "diskstats",
            "diskusage",
            "loadavg",
            "meminfo",
            "netdev",
            "netstats",
            "uptime",
            "vmstats",
            "w",
        ] {
            assert!(get(&r.ret, key).is_some(), "{key}");
        }
        assert!(get(get(&r.ret, "meminfo").unwrap(), "MemTotal").is_some());
        let r = call(&ctx(), "status.diskusage", &[s("/")]).await;
        assert!(get(get(&r.ret, "/").unwrap(), "total")
            .and_then(Value::as_u64)
            .is_some());
        let r = call(&ctx(), "status.time", &[s("%Y")]).await;
        assert_eq!(r.ret.as_str().map(str::len), Some(4));
        let r = call(&ctx(), "status.nproc", &[]).await;
        assert!(r.ret.as_u64().is_some_and(|n| n >= 1), "{:?}", r.ret);
        let r = call(&ctx(), "status.pid", &[s("(")]).await;
        assert_eq!(r.retcode, 1);
    }

    #[tokio::test]
    async fn live_uptime_and_loadavg() {
        let r = call(&ctx(), "status.uptime", &[]).await;
        assert_eq!(r.retcode, 0, "{:?}", r.ret);
        for key in ["seconds", "since_iso", "since_t", "days", "time"] {
            assert!(get(&r.ret, key).is_some(), "{key}");
        }
        let r = call(&ctx(), "status.loadavg", &[]).await;
        assert!(get(&r.ret, "15-min").and_then(Value::as_f64).is_some());
    }
}
