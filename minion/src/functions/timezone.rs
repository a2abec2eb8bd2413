//! The `timezone` execution module on Linux, as Salt's: `timedatectl` where it is installed
//! (its failure is the answer's error, as where systemd does not run), else the files each
//! family keeps (`/etc/timezone`, `/etc/sysconfig/clock`, `/etc/localtime`, `/etc/adjtime`,
//! `/etc/default/rcS`); `set_zone` also links `/etc/localtime` and writes the family's file.

use std::path::Path;

use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::cmd::{run_argv, which};
use super::{call_kwargs, CallState, Context, FnError, Spec};
use brine_protocol::payload::get_str;

/// Where the zone files are.
const ZONEINFO: &str = "/usr/share/zoneinfo/";
/// The system's zone.
const LOCALTIME: &str = "/etc/localtime";

super::spec_table! {
    /// The functions of the `timezone` module.
    GetZone => ("timezone.get_zone", "get_zone", [], 0, false, false, "
    The system's time zone name (Olson), e.g. America/Denver.

    CLI Example:

        salt '*' timezone.get_zone
    "),
    GetZonecode => ("timezone.get_zonecode", "get_zonecode", [], 0, false, false, "
    The zone's abbreviation (date +%Z), e.g. MST.

    CLI Example:

        salt '*' timezone.get_zonecode
    "),
    GetOffset => ("timezone.get_offset", "get_offset", [], 0, false, false, "
    The offset from UTC (date +%z), e.g. -0700.

    CLI Example:

        salt '*' timezone.get_offset
    "),
    SetZone => ("timezone.set_zone", "set_zone", ["timezone"], 1, false, false, "
    Set the system's time zone: timedatectl where installed, /etc/localtime linked to
    the zone file, and the family's own file (/etc/timezone, /etc/sysconfig/clock).
    'Zone does not exist: <path>' when there is no such zone.

    CLI Example:

        salt '*' timezone.set_zone 'America/Denver'
    "),
    ZoneCompare => ("timezone.zone_compare", "zone_compare", ["timezone"], 1, false, false, "
    Whether /etc/localtime is the given zone's file (byte for byte).

    CLI Example:

        salt '*' timezone.zone_compare 'America/Denver'
    "),
    GetHwclock => ("timezone.get_hwclock", "get_hwclock", [], 0, false, false, "
    Whether the hardware clock keeps UTC or localtime.

    CLI Example:

        salt '*' timezone.get_hwclock
    "),
    SetHwclock => ("timezone.set_hwclock", "set_hwclock", ["clock"], 1, false, false, "
    Make the hardware clock keep UTC or localtime.

    CLI Example:

        salt '*' timezone.set_hwclock UTC
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let family = get_str(ctx.grains.as_ref(), "os_family")
            .unwrap_or_default()
            .to_string();
        let arg = |k: &str| b.get(k).map(py_str).unwrap_or_default();
        match self {
            Fun::GetZone => get_zone(ctx, &family).await.map(Value::from),
            Fun::GetZonecode => date("+%Z").await,
            Fun::GetOffset => date("+%z").await,
            Fun::SetZone => {
                // Salt's answer keeps the exit code of its `timedatectl set-timezone` as the
                // job's (cmd.run's `__context__["retcode"]`).
                let (answer, retcode) = set_zone(ctx, &family, &arg("timezone")).await?;
                if let Some(rc) = retcode {
                    st.retcode = rc;
                }
                Ok(answer)
            }
            Fun::ZoneCompare => zone_compare(&arg("timezone")).map(Value::Boolean),
            Fun::GetHwclock => get_hwclock(&family).await,
            Fun::SetHwclock => set_hwclock(ctx, &family, &arg("clock")).await,
        }
    }
}

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// `date <format>` as Salt's `cmd.run` answers it.
async fn date(format: &str) -> Result<Value, FnError> {
    let out = super::cmd::run_argv_merged(&argv(&["date", format]), &[]).await?;
    Ok(Value::from(out.stdout()))
}

/// Salt's `_timedatectl`: its output, or its failure.
async fn timedatectl() -> Result<String, FnError> {
    let out = run_argv(&argv(&["timedatectl"]), &[]).await?;
    if out.retcode() != 0 {
        return Err(FnError::Execution(format!(
            "timedatectl failed: {}",
            out.stderr()
        )));
    }
    Ok(out.stdout().to_string())
}

/// The text after the last `=` of the first line of `path` outside comments that `matches`.
fn keyed_value(path: &str, matches: impl Fn(&str) -> bool) -> Result<Option<String>, FnError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_exception(&e, Some(path))))?;
    Ok(text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find(|l| matches(l))
        .map(|l| {
            l.rsplit('=').next().unwrap_or_default().to_string()
        }))
}

/// Salt's `_get_zone_sysconfig`.
fn zone_sysconfig() -> Result<String, FnError> {
    let path = "/etc/sysconfig/clock";
    let zone = keyed_value(path, |l| l.contains("ZONE") && l.contains('='))?;
    match zone.map(|z| z.trim_matches(|c| c == '\'' || c == '"').to_string()) {
        Some(zone) if zone.is_empty() => Ok("UTC".into()),
        Some(zone) => Ok(zone),
        None => Err(FnError::Execution(format!(
            "Unable to get timezone from {path}"
        ))),
    }
}

/// Salt's `_get_zone_etc_timezone`.
fn zone_etc_timezone() -> Result<String, FnError> {
    let path = "/etc/timezone";
    std::fs::read_to_string(path)
        .map(|t| brine_protocol::pystr::strip(&t).to_string())
        .map_err(|e| {
            FnError::Execution(format!(
                "Problem reading timezone file {path}: {}",
                brine_protocol::pyrepr::os_error(&e, None)
            ))
        })
}

/// Salt's `_get_zone_etc_localtime`: the zone `/etc/localtime` links to, or (a copy) the
/// zone file with the same content.
fn zone_etc_localtime() -> Result<String, FnError> {
    match std::fs::read_link(LOCALTIME) {
        Ok(target) => {
            let joined = Path::new("/etc").join(target);
            let olson = brine_protocol::posixpath::normpath(&joined.to_string_lossy());
            if let Some(zone) = olson.strip_prefix(ZONEINFO) {
                return Ok(zone.to_string());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(FnError::Execution(format!("{LOCALTIME} does not exist")));
        }
        Err(_) => {
            tracing::warn!(
                "{LOCALTIME} is not a symbolic link. Attempting to match it to zoneinfo files."
            );
            let want = std::fs::read(LOCALTIME).ok();
            let mut stack = vec![std::path::PathBuf::from(ZONEINFO)];
            while let Some(dir) = stack.pop() {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        stack.push(path);
                        continue;
                    }
                    let full = path.to_string_lossy().into_owned();
                    let olson = &full[ZONEINFO.len()..];
                    if olson.starts_with(|c: char| c.is_ascii_lowercase()) {
                        continue;
                    }
                    if want.is_some() && std::fs::read(&path).ok() == want {
                        return Ok(olson.to_string());
                    }
                }
            }
        }
    }
    Err(FnError::Execution("Unable to determine timezone".into()))
}

/// Whether `family` (the grain) names one of `families` (Salt's substring test).
fn of(family: &str, families: &[&str]) -> bool {
    families.iter().any(|f| family.contains(f))
}

/// `timezone.get_zone`.
async fn get_zone(ctx: &Context, family: &str) -> Result<String, FnError> {
    if which("timedatectl").is_some() {
        let out = timedatectl().await?;
        let re = regex::Regex::new(r"^Time ?zone:\s+(\S+)").expect("valid pattern");
        return out
            .lines()
            .map(str::trim)
            .find_map(|l| re.captures(l))
            .map(|c| c[1].to_string())
            .ok_or_else(|| {
                FnError::Execution(format!(
                    "Failed to parse timedatectl output: {out}\nPlease file an issue with SaltStack"
                ))
            });
    }
    let os = get_str(ctx.grains.as_ref(), "os").unwrap_or_default();
    if os.eq_ignore_ascii_case("centos") {
        return zone_etc_localtime();
    }
    if of(family, &["RedHat", "Suse"]) {
        return zone_sysconfig();
    }
    if of(family, &["Debian", "Gentoo"]) {
        return zone_etc_timezone();
    }
    if ["FreeBSD", "OpenBSD", "NetBSD", "NILinuxRT", "Slackware"].contains(&family) {
        return zone_etc_localtime();
    }
    Err(FnError::Execution("Unable to get timezone".into()))
}

/// `file.sed` of one file, as Salt's timezone module calls it.
async fn sed(ctx: &Context, path: &str, before: &str, after: &str) -> Result<(), FnError> {
    let kwargs = [
        ("path", Value::from(path)),
        ("before", Value::from(before)),
        ("after", Value::from(after)),
    ];
    call_kwargs(ctx, "file.sed", &kwargs).await.map(|_| ())
}

/// `/etc/localtime` made a link to `zonepath`.
fn link_localtime(zonepath: &str) -> Result<(), FnError> {
    let os = |e: std::io::Error| FnError::Exception(brine_protocol::pyrepr::os_exception(&e, Some(LOCALTIME)));
    if Path::new(LOCALTIME).exists() {
        std::fs::remove_file(LOCALTIME).map_err(os)?;
    }
    std::os::unix::fs::symlink(zonepath, LOCALTIME).map_err(os)
}

/// `timezone.set_zone`, with the exit code of `timedatectl` where it ran.
async fn set_zone(ctx: &Context, family: &str, zone: &str) -> Result<(Value, Option<i32>), FnError> {
    let mut retcode = None;
    if which("timedatectl").is_some() {
        let cmd = format!("timedatectl set-timezone {zone}");
        let words = brine_protocol::pyrepr::shlex_split(&cmd).map_err(FnError::Invocation)?;
        let out = run_argv(&words, &[]).await?;
        if out.retcode() != 0 {
            tracing::error!("Command '{cmd}' failed with return code: {}", out.retcode());
        }
        retcode = Some(out.exit_code());
    }
    let zonepath = format!("{ZONEINFO}{zone}");
    if !Path::new(&zonepath).exists() {
        return Ok((Value::from(format!("Zone does not exist: {zonepath}")), retcode));
    }
    link_localtime(&zonepath)?;
    if of(family, &["RedHat"]) {
        sed(ctx, "/etc/sysconfig/clock", "^ZONE=.*", &format!("ZONE=\"{zone}\"")).await?;
    } else if of(family, &["Suse"]) {
        sed(ctx, "/etc/sysconfig/clock", "^TIMEZONE=.*", &format!("TIMEZONE=\"{zone}\"")).await?;
    } else if of(family, &["Debian", "Gentoo"]) {
        let text = format!("{}\n", brine_protocol::pystr::strip(zone));
        std::fs::write("/etc/timezone", text).map_err(|e| {
            FnError::Exception(brine_protocol::pyrepr::os_exception(&e, Some("/etc/timezone")))
        })?;
    }
    Ok((Value::Boolean(true), retcode))
}

/// `timezone.zone_compare`: `/etc/localtime` and the zone's file, byte for byte.
fn zone_compare(zone: &str) -> Result<bool, FnError> {
    let zonepath = format!("{ZONEINFO}{zone}");
    let mine = std::fs::read(LOCALTIME).map_err(|e| {
        FnError::Execution(format!(
            "Failed to read {LOCALTIME} to determine current timezone: {}",
            brine_protocol::pyrepr::os_error(&e, None)
        ))
    })?;
    let theirs = std::fs::read(&zonepath)
        .map_err(|_| FnError::Invocation(format!("Can't find a local timezone \"{zone}\"")))?;
    Ok(mine == theirs)
}

/// Salt's `_get_adjtime_timezone`: the last line of `/etc/adjtime`; none without a clock.
async fn adjtime() -> Result<Value, FnError> {
    let path = "/etc/adjtime";
    if Path::new(path).exists() {
        let out = super::cmd::run_argv_merged(&argv(&["tail", "-n", "1", path]), &[]).await?;
        return Ok(Value::from(out.stdout()));
    }
    if Path::new("/dev/rtc").exists() {
        return Err(FnError::Execution(format!(
            "Unable to get hwclock timezone from {path}"
        )));
    }
    Ok(Value::Nil)
}

/// `timezone.get_hwclock`.
async fn get_hwclock(family: &str) -> Result<Value, FnError> {
    if which("timedatectl").is_some() {
        let out = timedatectl().await?;
        for line in out.lines().map(str::trim) {
            if line.to_lowercase().contains("rtc in local tz") {
                let local = line.rsplit(':').next().unwrap_or_default().trim().to_lowercase() == "yes";
                return Ok(Value::from(if local { "localtime" } else { "UTC" }));
            }
        }
        return Err(FnError::Execution(format!(
            "Failed to parse timedatectl output: {out}\nPlease file an issue with SaltStack"
        )));
    }
    if of(family, &["RedHat", "Suse", "NILinuxRT"]) {
        return adjtime().await;
    }
    if of(family, &["Debian"]) {
        if let Ok(Some(utc)) = keyed_value("/etc/default/rcS", |l| l.contains("UTC=")) {
            let utc = utc.to_lowercase() == "yes";
            return Ok(Value::from(if utc { "UTC" } else { "localtime" }));
        }
        return adjtime().await;
    }
    if of(family, &["Gentoo"]) && Path::new("/etc/adjtime").exists() {
        return adjtime().await;
    }
    if of(family, &["Gentoo", "Solaris", "AIX", "Slackware"]) {
        return Err(FnError::Execution(format!(
            "Brine reads the hardware clock's setting on {family} with timedatectl only"
        )));
    }
    Ok(Value::Nil)
}

/// `timezone.set_hwclock`.
async fn set_hwclock(ctx: &Context, family: &str, clock: &str) -> Result<Value, FnError> {
    if which("timedatectl").is_some() {
        let local = if clock == "localtime" { "true" } else { "false" };
        let out = run_argv(&argv(&["timedatectl", "set-local-rtc", local]), &[]).await?;
        return Ok(Value::Boolean(out.retcode() == 0));
    }
    if ["AIX", "NILinuxRT"].contains(&family) {
        if !clock.eq_ignore_ascii_case("utc") {
            return Err(FnError::Invocation("UTC is the only permitted value".into()));
        }
        return Ok(Value::Boolean(true));
    }
    let zone = get_zone(ctx, family).await?;
    let zonepath = format!("{ZONEINFO}{zone}");
    if !Path::new(&zonepath).exists() {
        return Err(FnError::Execution(format!("Zone '{zonepath}' does not exist")));
    }
    link_localtime(&zonepath)?;
    if of(family, &["RedHat"]) {
        sed(ctx, "/etc/sysconfig/clock", "^ZONE=.*", &format!("ZONE=\"{zone}\"")).await?;
    } else if of(family, &["Suse"]) {
        sed(ctx, "/etc/sysconfig/clock", "^TIMEZONE=.*", &format!("TIMEZONE=\"{zone}\"")).await?;
    } else if of(family, &["Debian"]) {
        match clock {
            "UTC" => sed(ctx, "/etc/default/rcS", "^UTC=.*", "UTC=yes").await?,
            "localtime" => sed(ctx, "/etc/default/rcS", "^UTC=.*", "UTC=no").await?,
            _ => {}
        }
    } else if of(family, &["Gentoo"]) {
        let value = match clock {
            "UTC" => "UTC",
            "localtime" => "local",
            _ => return Err(FnError::Invocation("Only 'UTC' and 'localtime' are allowed".into())),
        };
        sed(ctx, "/etc/conf.d/hwclock", "^clock=.*", &format!("clock=\"{value}\"")).await?;
    }
    Ok(Value::Boolean(true))
}
