//! The `service` execution module: systemd units through `systemctl` where systemd runs
//! (Salt's `systemd_service`), init scripts through `service` and `update-rc.d` on Debian
//! without systemd (Salt's `debian_service`). Commands run without a shell except where
//! Salt runs one.

use std::collections::BTreeSet;
use std::path::Path;

use rmpv::Value;

use super::args::{is_true, py_str, Bound, Signature};
use super::cmd::run_argv;
use super::{CallState, Context, FnError, Spec};
use brine_protocol::payload::get_str;

/// How this machine runs services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Init {
    Systemd,
    /// Debian's init scripts (`/etc/init.d`), when systemd is not running.
    Sysv,
}

/// The file Salt's loader loads as `service` here: `systemd_service` where systemd runs,
/// `debian_service` on a Debian machine without it.
pub(crate) fn provider(ctx: &Context) -> Option<&'static str> {
    match Init::of(ctx).ok()? {
        Init::Systemd => Some("systemd_service"),
        Init::Sysv => Some("debian_service"),
    }
}

impl Init {
    fn of(ctx: &Context) -> Result<Init, FnError> {
        if Path::new("/run/systemd/system").is_dir() {
            return Ok(Init::Systemd);
        }
        let os = get_str(ctx.grains.as_ref(), "os").unwrap_or_default();
        if matches!(os, "Debian" | "Raspbian" | "Devuan" | "NILinuxRT") {
            return Ok(Init::Sysv);
        }
        Err(FnError::Execution(format!(
            "The service module is not available here: systemd is not running and '{os}' has no init scripts Brine manages"
        )))
    }
}

super::spec_table! {
    /// The functions of the `service` module.
    Start => ("service.start", "start", ["name", "no_block"], 1, false, true, "
    Start a service. Returns True, or fails with the service manager's error.

    CLI Example:

        salt '*' service.start nginx
    "),
    Stop => ("service.stop", "stop", ["name", "no_block"], 1, false, true, "
    Stop a service.

    CLI Example:

        salt '*' service.stop nginx
    "),
    Restart => ("service.restart", "restart", ["name", "no_block"], 1, false, true, "
    Restart a service.

    CLI Example:

        salt '*' service.restart nginx
    "),
    Reload => ("service.reload", "reload_", ["name", "no_block"], 1, false, true, "
    Reload a service's configuration.

    CLI Example:

        salt '*' service.reload nginx
    "),
    Status => ("service.status", "status", ["name", "sig"], 1, false, true, "
    Whether a service is running (True/False). A glob in the name gives a map of every
    matching service; sig checks for a process whose command line matches that regex.

    CLI Example:

        salt '*' service.status nginx
        salt '*' service.status 'ssh*'
    "),
    Enable => ("service.enable", "enable", ["name"], 1, false, true, "
    Start a service at boot.

    CLI Example:

        salt '*' service.enable nginx
    "),
    Disable => ("service.disable", "disable", ["name"], 1, false, true, "
    Do not start a service at boot.

    CLI Example:

        salt '*' service.disable nginx
    "),
    Enabled => ("service.enabled", "enabled", ["name"], 1, false, true, "
    Whether a service starts at boot.

    CLI Example:

        salt '*' service.enabled nginx
    "),
    Disabled => ("service.disabled", "disabled", ["name"], 1, false, false, "
    Whether a service does not start at boot.

    CLI Example:

        salt '*' service.disabled nginx
    "),
    Available => ("service.available", "available", ["name"], 1, false, false, "
    Whether this machine has the service.

    CLI Example:

        salt '*' service.available nginx
    "),
    Missing => ("service.missing", "missing", ["name"], 1, false, false, "
    Whether this machine lacks the service.

    CLI Example:

        salt '*' service.missing nginx
    "),
    GetAll => ("service.get_all", "get_all", [], 0, false, false, "
    Every service on this machine, sorted.

    CLI Example:

        salt '*' service.get_all
    "),
    GetEnabled => ("service.get_enabled", "get_enabled", [], 0, false, false, "
    The services that start at boot, sorted.

    CLI Example:

        salt '*' service.get_enabled
    "),
    Offline => ("service.offline", "offline", [], 0, false, false, "
    Whether systemd is installed but not running (a container, a chroot, an image being
    built): the path of systemctl then, else False. Service states do nothing in this mode.

    CLI Example:

        salt '*' service.offline
    "),
    GetDisabled => ("service.get_disabled", "get_disabled", [], 0, false, false, "
    The services that do not start at boot, sorted.

    CLI Example:

        salt '*' service.get_disabled
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        if self == Fun::Offline {
            return Ok(offline().map_or(Value::Boolean(false), Value::from));
        }
        let init = Init::of(ctx)?;
        let name = b.get("name").map(py_str).unwrap_or_default();
        let no_block = is_true(b.get("no_block"));
        let list = |v: BTreeSet<String>| Value::Array(v.into_iter().map(Value::from).collect());
        match self {
            Fun::Start => action(init, "start", &name, no_block).await,
            Fun::Stop => action(init, "stop", &name, no_block).await,
            Fun::Restart => action(init, "restart", &name, no_block).await,
            Fun::Reload => action(init, "reload", &name, no_block).await,
            Fun::Status => status(init, &name, b.opt("sig").map(py_str)).await,
            Fun::Enable => enable(init, &name, true).await.map(Value::Boolean),
            Fun::Disable => enable(init, &name, false).await.map(Value::Boolean),
            Fun::Enabled => enabled(init, &name).await.map(Value::Boolean),
            Fun::Disabled => enabled(init, &name).await.map(|e| Value::Boolean(!e)),
            Fun::Available => available(init, &name).await.map(Value::Boolean),
            Fun::Missing => available(init, &name).await.map(|a| Value::Boolean(!a)),
            Fun::GetAll => Ok(list(get_all(init).await)),
            Fun::GetEnabled => Ok(list(get_enabled(init).await)),
            Fun::Offline => Ok(Value::Boolean(false)),
            Fun::GetDisabled => {
                let enabled = get_enabled(init).await;
                Ok(list(
                    get_all(init)
                        .await
                        .into_iter()
                        .filter(|s| !enabled.contains(s))
                        .collect(),
                ))
            }
        }
    }
}

/// systemd installed but not running: the path of `systemctl`.
fn offline() -> Option<String> {
    if Path::new("/run/systemd/system").is_dir() {
        return None;
    }
    super::cmd::which("systemctl")
}

const UNIT_TYPES: &[&str] = &[
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
];

/// A unit's full name: `.service` added when the name has no unit type.
fn unit(name: &str) -> String {
    if UNIT_TYPES.iter().any(|t| name.ends_with(t)) {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}

/// The `systemctl` command of an action, in a scope of its own for the actions that start
/// or stop things (so a restart of the minion does not take them down).
pub(crate) fn systemctl_argv(
    action: &str,
    name: Option<&str>,
    scope: bool,
    no_block: bool,
) -> Vec<String> {
    let mut cmd: Vec<String> = Vec::new();
    if scope && super::cmd::which("systemd-run").is_some() {
        cmd.extend(["systemd-run".to_string(), "--scope".to_string()]);
    }
    cmd.push("systemctl".into());
    if no_block {
        cmd.push("--no-block".into());
    }
    cmd.extend(action.split(' ').map(str::to_string));
    if let Some(n) = name {
        cmd.push(unit(n));
    }
    cmd
}

/// The `service` command of an init-script action (Salt builds it as one string and
/// splits it).
pub(crate) fn service_argv(name: &str, action: &str) -> Result<Vec<String>, FnError> {
    brine_protocol::pyrepr::shlex_split(&format!("service {name} {action}"))
        .map_err(|e| FnError::Exception(format!("ValueError: {e}")))
}

/// systemctl's error text without the `systemd-run` scope lines.
fn strip_scope(msg: &str) -> String {
    msg.lines()
        .filter(|l| !l.ends_with(".scope"))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

async fn run(argv: Vec<String>) -> Result<super::cmd::RunOutput, FnError> {
    run_argv(&argv, &[]).await
}

/// A unit file changed on disk since systemd read it: reload systemd first, as Salt does.
async fn reload_units_if_changed(name: &str) -> Result<(), FnError> {
    let out = run(systemctl_argv(
        "show -P NeedDaemonReload",
        Some(name),
        false,
        false,
    ))
    .await?;
    if out.stdout().trim() == "yes" {
        run(systemctl_argv("daemon-reload", None, true, false)).await?;
    }
    Ok(())
}

async fn action(init: Init, verb: &str, name: &str, no_block: bool) -> Result<Value, FnError> {
    match init {
        Init::Systemd => {
            reload_units_if_changed(name).await?;
            let out = run(systemctl_argv(verb, Some(name), true, no_block)).await?;
            if out.retcode() != 0 {
                return Err(FnError::Execution(strip_scope(out.stderr())));
            }
            Ok(Value::Boolean(true))
        }
        Init::Sysv => {
            let out = run(service_argv(name, verb)?).await?;
            Ok(Value::Boolean(out.retcode() == 0))
        }
    }
}

fn has_glob(name: &str) -> bool {
    name.contains('*') || name.contains('?') || {
        let open = name.find('[');
        open.is_some_and(|i| name[i + 1..].find(']').is_some_and(|j| j > 0))
    }
}

/// Whether a process's command line matches `sig` (Salt's `status.pid`).
fn process_matches(sig: &str) -> Result<bool, FnError> {
    let re = regex::RegexBuilder::new(sig)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| FnError::Exception(format!("re.error: {e}")))?;
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Ok(false);
    };
    for entry in dir.flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&raw).replace('\0', " ");
        if re.is_match(line.trim_end()) {
            return Ok(true);
        }
    }
    Ok(false)
}

async fn status(init: Init, name: &str, sig: Option<String>) -> Result<Value, FnError> {
    if let Some(sig) = sig.filter(|s| !s.is_empty()) {
        return process_matches(&sig).map(Value::Boolean);
    }
    let glob = has_glob(name);
    let services: Vec<String> = if glob {
        get_all(init)
            .await
            .into_iter()
            .filter(|s| brine_protocol::target::fnmatch(name, s))
            .collect()
    } else {
        vec![name.to_string()]
    };
    let mut results = Vec::new();
    for service in services {
        let up = match init {
            Init::Systemd => {
                reload_units_if_changed(&service).await?;
                run(systemctl_argv("is-active", Some(&service), false, false))
                    .await?
                    .retcode()
                    == 0
            }
            Init::Sysv => run(service_argv(&service, "status")?).await?.retcode() == 0,
        };
        results.push((Value::from(service), Value::Boolean(up)));
    }
    if glob {
        return Ok(Value::Map(results));
    }
    Ok(results.pop().map_or(Value::Boolean(false), |(_, v)| v))
}

/// The runlevel whose links say what starts at boot (2, Debian's default, when unknown).
async fn runlevel() -> String {
    match run(vec!["runlevel".into()]).await {
        Ok(out) if !out.stdout().contains("unknown") => out
            .stdout()
            .split_whitespace()
            .nth(1)
            .unwrap_or("2")
            .to_string(),
        _ => "2".into(),
    }
}

/// Init scripts that start at boot: `/etc/rc[S<runlevel>].d/S<NN><name>` links.
async fn sysv_enabled_all() -> BTreeSet<String> {
    let level = runlevel().await;
    let mut out = BTreeSet::new();
    for dir in ["/etc/rcS.d".to_string(), format!("/etc/rc{level}.d")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().to_string();
            if let Some(rest) = file.strip_prefix('S') {
                let name = rest.trim_start_matches(|c: char| c.is_ascii_digit());
                out.insert(name.to_string());
            }
        }
    }
    out
}

fn init_scripts(executable_only: bool) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir("/etc/init.d") else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter(|e| {
            !executable_only || {
                use std::os::unix::fs::PermissionsExt;
                e.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            }
        })
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != "README")
        .collect()
}

fn systemd_units() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for dir in [
        "/etc/systemd/system",
        "/run/systemd/system",
        "/lib/systemd/system",
        "/usr/lib/systemd/system",
    ] {
        let path = Path::new(dir);
        if path.is_symlink() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            continue;
        };
        for e in entries.flatten() {
            let full = e.file_name().to_string_lossy().to_string();
            if let Some((base, kind)) = full.rsplit_once('.') {
                if UNIT_TYPES.contains(&format!(".{kind}").as_str()) {
                    out.insert(if kind == "service" {
                        base.to_string()
                    } else {
                        full.clone()
                    });
                }
            }
        }
    }
    out
}

async fn get_all(init: Init) -> BTreeSet<String> {
    match init {
        Init::Systemd => {
            let mut all = systemd_units();
            let sysv: Vec<String> = init_scripts(true)
                .into_iter()
                .filter(|s| !all.contains(s))
                .collect();
            all.extend(sysv);
            all
        }
        Init::Sysv => {
            let mut all = init_scripts(false);
            all.extend(sysv_enabled_all().await);
            all
        }
    }
}

async fn get_enabled(init: Init) -> BTreeSet<String> {
    match init {
        Init::Sysv => sysv_enabled_all().await,
        Init::Systemd => {
            let mut out = BTreeSet::new();
            if let Ok(o) = run(systemctl_argv(
                "list-unit-files --full --no-legend --no-pager",
                None,
                false,
                false,
            ))
            .await
            {
                for line in o.stdout().lines() {
                    let cols: Vec<&str> = line.split_whitespace().collect();
                    if let [full, "enabled", ..] = cols[..] {
                        out.insert(full.strip_suffix(".service").unwrap_or(full).to_string());
                    }
                }
            }
            let sysv_on = sysv_enabled_all().await;
            out.extend(
                init_scripts(true)
                    .into_iter()
                    .filter(|s| sysv_on.contains(s)),
            );
            out
        }
    }
}

async fn available(init: Init, name: &str) -> Result<bool, FnError> {
    match init {
        Init::Sysv => Ok(get_all(init).await.contains(name)),
        Init::Systemd => {
            reload_units_if_changed(name).await?;
            let out = run(systemctl_argv("status", Some(name), false, false)).await?;
            // systemctl status exits 4 for a unit it does not know.
            Ok((0..4).contains(&out.retcode()))
        }
    }
}

async fn enabled(init: Init, name: &str) -> Result<bool, FnError> {
    match init {
        Init::Sysv => Ok(sysv_enabled_all().await.contains(name)),
        Init::Systemd => {
            let out = run(systemctl_argv("is-enabled", Some(name), false, false)).await?;
            if out.retcode() == 0 && out.stdout() != "alias" {
                return Ok(true);
            }
            if init_scripts(true).contains(name) && !systemd_units().contains(name) {
                return Ok(sysv_enabled_all().await.contains(name));
            }
            Ok(false)
        }
    }
}

async fn enable(init: Init, name: &str, on: bool) -> Result<bool, FnError> {
    match init {
        Init::Sysv => {
            // Salt's command, shell included: insserv first when enabling.
            let quoted = brine_protocol::pyrepr::shlex_quote(name);
            let argv = if on {
                vec![
                    "/bin/sh".to_string(),
                    "-c".to_string(),
                    format!("insserv {quoted} && update-rc.d {quoted} enable"),
                ]
            } else {
                brine_protocol::pyrepr::shlex_split(&format!("update-rc.d {name} disable"))
                    .map_err(|e| FnError::Exception(format!("ValueError: {e}")))?
            };
            Ok(run(argv).await?.retcode() == 0)
        }
        Init::Systemd => {
            reload_units_if_changed(name).await?;
            let sysv_only = init_scripts(true).contains(name) && !systemd_units().contains(name);
            if sysv_only {
                let mut cmd = Vec::new();
                if super::cmd::which("systemd-run").is_some() {
                    cmd.extend(["systemd-run".to_string(), "--scope".to_string()]);
                }
                cmd.extend([
                    "update-rc.d".to_string(),
                    "-f".to_string(),
                    name.to_string(),
                ]);
                if on {
                    cmd.extend(["defaults".to_string(), "99".to_string()]);
                } else {
                    cmd.push("remove".to_string());
                }
                return Ok(run(cmd).await?.retcode() == 0);
            }
            let out = run(systemctl_argv(
                if on { "enable" } else { "disable" },
                Some(name),
                true,
                false,
            ))
            .await?;
            if on && out.retcode() != 0 {
                return Err(FnError::Execution(strip_scope(out.stderr())));
            }
            Ok(out.retcode() == 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn commands() {
        let start = systemctl_argv("start", Some("nginx"), false, true);
        assert_eq!(start, ["systemctl", "--no-block", "start", "nginx.service"]);
        assert_eq!(
            systemctl_argv("show -P NeedDaemonReload", Some("x.timer"), false, false),
            ["systemctl", "show", "-P", "NeedDaemonReload", "x.timer"]
        );
        assert_eq!(
            service_argv("ssh", "status").unwrap(),
            ["service", "ssh", "status"]
        );
        assert!(service_argv("'unterminated", "start").is_err());
        assert_eq!(
            strip_scope("Running scope as unit: run-r1.scope\nJob failed.\n"),
            "Job failed."
        );
        assert!(has_glob("ssh*") && has_glob("s[sh]") && !has_glob("nginx"));
    }

    #[test]
    fn sig_is_a_regex_over_command_lines() {
        assert!(process_matches("^this-process-does-not-exist-brine$").is_ok_and(|m| !m));
        assert!(process_matches("(").is_err());
    }

    #[tokio::test]
    async fn unsupported_systems_get_a_clear_error() {
        if Path::new("/run/systemd/system").is_dir() {
            return;
        }
        let mut c = ctx();
        c.grains = std::sync::Arc::new(brine_protocol::payload::map([("os", s("FreeBSD"))]));
        let r = call(&c, "service.status", &[s("sshd")]).await;
        assert_eq!(r.retcode, 1);
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .contains("service module is not available"));
    }
}
