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
use brine_protocol::payload::{get_str, py_truthy};

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
    GetRunning => ("service.get_running", "get_running", [], 0, false, false, "
    The units systemd reports as running, sorted (services without their .service suffix).

    CLI Example:

        salt '*' service.get_running
    "),
    GetStatic => ("service.get_static", "get_static", ["root"], 0, false, false, "
    The units whose unit file state is static, sorted. root names another filesystem root
    to read the unit files of.

    CLI Example:

        salt '*' service.get_static
    "),
    SystemctlReload => ("service.systemctl_reload", "systemctl_reload", [], 0, false, false, "
    Make systemd read its unit files again (systemctl daemon-reload). Returns True.

    CLI Example:

        salt '*' service.systemctl_reload
    "),
    Mask => ("service.mask", "mask", ["name", "runtime", "root"], 1, false, false, "
    Mask a unit so that nothing can start it; runtime=True masks it until the next boot
    only. root names another filesystem root to work in.

    CLI Example:

        salt '*' service.mask foo
        salt '*' service.mask foo runtime=True
    "),
    Unmask => ("service.unmask", "unmask_", ["name", "runtime", "root"], 1, false, false, "
    Remove a unit's mask (the runtime one with runtime=True). True when there was none.

    CLI Example:

        salt '*' service.unmask foo
        salt '*' service.unmask foo runtime=True
    "),
    Masked => ("service.masked", "masked", ["name", "runtime", "root"], 1, false, false, "
    Whether a unit is masked: its link in /etc/systemd/system (in /run/systemd/system with
    runtime=True) points to /dev/null.

    CLI Example:

        salt '*' service.masked foo
        salt '*' service.masked foo runtime=True
    "),
    ForceReload => ("service.force_reload", "force_reload", ["name", "no_block", "unmask", "unmask_runtime"], 1, false, false, "
    Force a service to reload its configuration. Under systemd, no_block (on by default)
    does not wait for the job, and unmask / unmask_runtime remove a mask first.

    CLI Example:

        salt '*' service.force_reload nginx
    "),
    Show => ("service.show", "show", ["name", "root"], 1, false, false, "
    A unit's properties as systemctl show prints them, as a map: structured values become
    maps, Before/After/Wants lists.

    CLI Example:

        salt '*' service.show nginx
    "),
    Execs => ("service.execs", "execs", ["root"], 0, false, false, "
    For every service with an ExecStart, the path of the program it runs.

    CLI Example:

        salt '*' service.execs
    "),
    Firstboot => ("service.firstboot", "firstboot", ["locale", "locale_message", "keymap", "timezone", "hostname", "machine_id", "root"], 0, false, false, "
    Set up a system's basic settings with systemd-firstboot: locale, message locale,
    keymap, timezone, hostname, machine id, in root when given. Returns True.

    CLI Example:

        salt '*' service.firstboot keymap=jp locale=en_US.UTF-8
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
        if let Some(ret) = self.run_systemd_only(ctx, b, _st).await {
            return ret;
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
            Fun::GetAll => Ok(list(get_all(init, None).await)),
            Fun::GetEnabled => Ok(list(get_enabled(init).await)),
            Fun::Offline => Ok(Value::Boolean(false)),
            Fun::ForceReload => match init {
                Init::Sysv => {
                    let out = run(service_argv(&name, "force-reload")?).await?;
                    _st.retcode = out.exit_code();
                    Ok(Value::Boolean(out.retcode() == 0))
                }
                Init::Systemd => force_reload(
                    &name,
                    b.get("no_block").is_none_or(py_truthy),
                    b.get("unmask").is_some_and(py_truthy),
                    b.get("unmask_runtime").is_some_and(py_truthy),
                )
                .await
                .map(Value::Boolean),
            },
            Fun::GetDisabled => {
                let enabled = get_enabled(init).await;
                Ok(list(
                    get_all(init, None)
                        .await
                        .into_iter()
                        .filter(|s| !enabled.contains(s))
                        .collect(),
                ))
            }
            _ => unreachable!("systemd-only functions are run by run_systemd_only"),
        }
    }
}

impl Fun {
    /// The functions of Salt's `systemd_service` that `debian_service` lacks: Salt's loader
    /// adds them to `service` wherever systemd runs or is installed without running (its
    /// offline mode). `None` for the other functions.
    async fn run_systemd_only(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Option<Result<Value, FnError>> {
        if !matches!(
            self,
            Fun::GetRunning
                | Fun::GetStatic
                | Fun::SystemctlReload
                | Fun::Mask
                | Fun::Unmask
                | Fun::Masked
                | Fun::Show
                | Fun::Execs
                | Fun::Firstboot
        ) {
            return None;
        }
        Some(self.run_systemd(ctx, b, st).await)
    }

    async fn run_systemd(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let linux = get_str(ctx.grains.as_ref(), "kernel") == Some("Linux");
        if !(linux && (booted() || offline().is_some())) {
            Init::of(ctx)?;
            return Err(FnError::Execution(format!(
                "'{}' is not available here: systemd is not running and systemctl is not installed",
                self.spec().name
            )));
        }
        let name = b.get("name").map(py_str).unwrap_or_default();
        let root = b.get("root").filter(|v| py_truthy(v)).map(py_str);
        let root = root.as_deref();
        let runtime = b.get("runtime").is_some_and(py_truthy);
        let list = |v: BTreeSet<String>| Value::Array(v.into_iter().map(Value::from).collect());
        match self {
            Fun::GetRunning => get_running().await.map(list),
            Fun::GetStatic => Ok(list(get_static(root).await?)),
            Fun::SystemctlReload => systemctl_reload().await.map(|()| Value::Boolean(true)),
            Fun::Mask => mask(&name, runtime, root).await.map(Value::Boolean),
            Fun::Unmask => unmask(&name, runtime, root).await.map(Value::Boolean),
            Fun::Masked => masked(&name, runtime, root).await.map(Value::Boolean),
            Fun::Show => {
                let (props, rc) = show(&name, root).await?;
                st.retcode = rc as i32;
                Ok(props)
            }
            Fun::Execs => {
                let mut ret = Vec::new();
                for service in get_all(Init::Systemd, root).await {
                    let (props, rc) = show(&service, root).await?;
                    st.retcode = rc as i32;
                    let Some(exec) = map_get(&props, "ExecStart") else {
                        continue;
                    };
                    let path = match exec {
                        Value::Map(_) => map_get(exec, "path")
                            .cloned()
                            .ok_or_else(|| FnError::Exception("KeyError: 'path'".into()))?,
                        _ => {
                            return Err(FnError::Exception(
                                "TypeError: string indices must be integers, not 'str'".into(),
                            ))
                        }
                    };
                    ret.push((Value::from(service), path));
                }
                Ok(Value::Map(ret))
            }
            Fun::Firstboot => firstboot(b).await.map(|()| Value::Boolean(true)),
            _ => unreachable!("not a systemd-only function"),
        }
    }
}

fn map_get<'a>(map: &'a Value, key: &str) -> Option<&'a Value> {
    map.as_map()?
        .iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// Sets a key the way a Python dict does: a key already there keeps its place.
fn map_set(map: &mut Vec<(Value, Value)>, key: &str, value: Value) {
    match map.iter_mut().find(|(k, _)| k.as_str() == Some(key)) {
        Some(entry) => entry.1 = value,
        None => map.push((Value::from(key), value)),
    }
}

/// Whether systemd runs this machine.
fn booted() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// An absolute path moved under another root directory (Salt's `_root`).
fn rooted(path: &str, root: Option<&str>) -> std::path::PathBuf {
    match root {
        Some(r) => Path::new(r).join(path.trim_start_matches('/')),
        None => std::path::PathBuf::from(path),
    }
}

/// The lines Salt's `salt.utils.itertools.split(out, "\n")` yields: every line, empty
/// ones included, but no empty last one.
fn lines_of(out: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = out.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// A unit file name's unit when its type is one systemd manages: a service by its bare
/// name, other units by their full name.
fn unit_of_file(full: &str) -> Option<String> {
    let (base, kind) = full.rsplit_once('.')?;
    UNIT_TYPES.contains(&format!(".{kind}").as_str()).then(|| {
        if kind == "service" {
            base.to_string()
        } else {
            full.to_string()
        }
    })
}

async fn get_running() -> Result<BTreeSet<String>, FnError> {
    let out = run_merged(systemctl_argv(
        "--full --no-legend --no-pager",
        None,
        false,
        false,
        None,
    ))
    .await?;
    let mut ret = BTreeSet::new();
    // Salt keeps the fourth column of the last line that had one; a line that never had
    // one, or an empty line, fails as Salt's parser does.
    let mut active: Option<String> = None;
    for line in lines_of(out.stdout()) {
        let comps: Vec<&str> = line.split_whitespace().collect();
        let Some(full) = comps.first() else {
            return Err(FnError::Exception(
                "IndexError: list index out of range".into(),
            ));
        };
        if comps.len() > 3 {
            active = Some(comps[3].to_string());
        }
        match active.as_deref() {
            None => {
                return Err(FnError::Exception(
                    "UnboundLocalError: cannot access local variable 'active_state' where it is not associated with a value".into(),
                ))
            }
            Some("running") => {}
            Some(_) => continue,
        }
        ret.extend(unit_of_file(full));
    }
    Ok(ret)
}

async fn get_static(root: Option<&str>) -> Result<BTreeSet<String>, FnError> {
    let out = run_merged(systemctl_argv(
        "--full --no-legend --no-pager list-unit-files",
        None,
        false,
        false,
        root,
    ))
    .await?;
    Ok(lines_of(out.stdout())
        .into_iter()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [full, "static", ..] => unit_of_file(full),
                _ => None,
            },
        )
        .collect())
}

/// `systemctl daemon-reload`.
async fn systemctl_reload() -> Result<(), FnError> {
    let out = run_merged(systemctl_argv(
        "--system daemon-reload",
        None,
        false,
        false,
        None,
    ))
    .await?;
    if out.retcode() != 0 {
        return Err(FnError::Execution(format!(
            "Problem performing systemctl daemon-reload: {}",
            out.stdout()
        )));
    }
    Ok(())
}

async fn mask(name: &str, runtime: bool, root: Option<&str>) -> Result<bool, FnError> {
    reload_units_if_changed(name).await?;
    let verb = if runtime { "mask --runtime" } else { "mask" };
    let out = run_merged(systemctl_argv(verb, Some(name), true, false, root)).await?;
    if out.retcode() != 0 {
        return Err(FnError::with_info(
            &format!("Failed to mask service '{name}'"),
            &Value::from(out.stdout()),
        ));
    }
    Ok(true)
}

async fn unmask(name: &str, runtime: bool, root: Option<&str>) -> Result<bool, FnError> {
    reload_units_if_changed(name).await?;
    if !masked(name, runtime, root).await? {
        return Ok(true);
    }
    let verb = if runtime {
        "unmask --runtime"
    } else {
        "unmask"
    };
    let out = run_merged(systemctl_argv(verb, Some(name), true, false, root)).await?;
    if out.retcode() != 0 {
        return Err(FnError::Execution(format!(
            "Failed to unmask service '{name}'"
        )));
    }
    Ok(true)
}

/// The path of the link that masks a unit.
fn mask_link(name: &str, runtime: bool, root: Option<&str>) -> std::path::PathBuf {
    rooted(if runtime { "/run" } else { "/etc" }, root)
        .join("systemd")
        .join("system")
        .join(unit(name))
}

async fn masked(name: &str, runtime: bool, root: Option<&str>) -> Result<bool, FnError> {
    reload_units_if_changed(name).await?;
    Ok(std::fs::read_link(mask_link(name, runtime, root))
        .is_ok_and(|target| target.as_os_str() == "/dev/null"))
}

async fn force_reload(
    name: &str,
    no_block: bool,
    unmask_first: bool,
    unmask_runtime: bool,
) -> Result<bool, FnError> {
    reload_units_if_changed(name).await?;
    if unmask_first {
        unmask(name, false, None).await?;
    }
    if unmask_runtime {
        unmask(name, true, None).await?;
    }
    let out = run(systemctl_argv(
        "force-reload",
        Some(name),
        true,
        no_block,
        None,
    ))
    .await?;
    if out.retcode() != 0 {
        return Err(FnError::Execution(strip_scope(out.stderr())));
    }
    Ok(true)
}

/// `systemctl show` of a unit as a map, with the command's exit code.
async fn show(name: &str, root: Option<&str>) -> Result<(Value, i64), FnError> {
    let out = run_merged(systemctl_argv("show", Some(name), false, false, root)).await?;
    Ok((parse_show(out.stdout())?, out.retcode()))
}

/// Salt's reading of `systemctl show`: `Key=value` lines; a value in braces is a map of
/// its ` ; `-separated `k=v` items (braces dropped, each side up to the next `=`);
/// Before, After and Wants are lists.
fn parse_show(out: &str) -> Result<Value, FnError> {
    let mut ret = Vec::new();
    for line in lines_of(out) {
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let parsed = if value.starts_with('{') {
            let value = value.replace(['{', '}'], "");
            let mut items = Vec::new();
            for item in value.split(" ; ") {
                let comps: Vec<&str> = item.split('=').collect();
                let [k, v, ..] = comps[..] else {
                    return Err(FnError::Exception(
                        "IndexError: list index out of range".into(),
                    ));
                };
                map_set(&mut items, k.trim(), Value::from(v.trim()));
            }
            Value::Map(items)
        } else if matches!(key, "Before" | "After" | "Wants") {
            Value::Array(value.split_whitespace().map(Value::from).collect())
        } else {
            Value::from(value)
        };
        map_set(&mut ret, key, parsed);
    }
    Ok(Value::Map(ret))
}

/// `systemd-firstboot` with the options given.
async fn firstboot(b: &Bound) -> Result<(), FnError> {
    let mut argv =
        vec![super::cmd::which("systemd-firstboot")
            .unwrap_or_else(|| "systemd-firstboot".to_string())];
    for (param, option) in [
        ("locale", "locale"),
        ("locale_message", "locale-message"),
        ("keymap", "keymap"),
        ("timezone", "timezone"),
        ("hostname", "hostname"),
        // Salt's spelling, which systemd-firstboot rejects.
        ("machine_id", "machine-ID"),
        ("root", "root"),
    ] {
        if let Some(v) = b.get(param).filter(|v| py_truthy(v)) {
            argv.extend([format!("--{option}"), py_str(v)]);
        }
    }
    let out = run(argv).await?;
    if out.retcode() != 0 {
        return Err(FnError::Execution(format!(
            "systemd-firstboot error: {}",
            out.stderr()
        )));
    }
    Ok(())
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

/// A unit's full name: `.service` added when the name does not end in a unit type (Salt
/// checks the type's letters only, so `fooservice` stays as it is).
fn unit(name: &str) -> String {
    if UNIT_TYPES.iter().any(|t| name.ends_with(&t[1..])) {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}

/// The `systemctl` command of an action, in a scope of its own for the actions that start
/// or stop things (so a restart of the minion does not take them down) where systemd
/// runs; `--root` for a unit file tree elsewhere; `-n 0` after a `status`.
pub(crate) fn systemctl_argv(
    action: &str,
    name: Option<&str>,
    scope: bool,
    no_block: bool,
    root: Option<&str>,
) -> Vec<String> {
    let mut cmd: Vec<String> = Vec::new();
    if scope && booted() && super::cmd::which("systemd-run").is_some() {
        cmd.extend(["systemd-run".to_string(), "--scope".to_string()]);
    }
    cmd.push("systemctl".into());
    if no_block {
        cmd.push("--no-block".into());
    }
    if let Some(r) = root {
        cmd.extend(["--root".to_string(), r.to_string()]);
    }
    cmd.extend(action.split(' ').map(str::to_string));
    if let Some(n) = name {
        cmd.push(unit(n));
    }
    if cmd.iter().any(|a| a == "status") {
        cmd.extend(["-n".to_string(), "0".to_string()]);
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

/// [`run`] with standard error merged into standard output, in the order written (Salt's
/// `cmd.run` and `redirect_stderr=True`).
async fn run_merged(argv: Vec<String>) -> Result<super::cmd::RunOutput, FnError> {
    super::cmd::run_argv_merged(&argv, &[]).await
}

/// Whether systemd knows the unit (Salt's `_check_available`; systemctl status exits 4
/// for a unit it does not know).
async fn check_available(name: &str) -> Result<bool, FnError> {
    if offline().is_some() {
        return Err(FnError::Execution(format!(
            "Cannot run in offline mode. Failed to get information on unit '{name}'"
        )));
    }
    let out = run(systemctl_argv("status", Some(name), false, false, None)).await?;
    Ok((0..4).contains(&out.retcode()))
}

/// Reload systemd first, as Salt does, when the unit has a file in /etc/systemd/system
/// systemd does not know, or systemctl status says its file changed on disk.
async fn reload_units_if_changed(name: &str) -> Result<(), FnError> {
    let custom = Path::new("/etc/systemd/system").join(unit(name));
    let untracked = std::fs::File::open(&custom).is_ok() && !check_available(name).await?;
    if untracked || {
        let out = run_merged(systemctl_argv("status", Some(name), false, false, None)).await?;
        out.stdout()
            .to_lowercase()
            .contains("'systemctl daemon-reload'")
    } {
        systemctl_reload().await?;
    }
    Ok(())
}

async fn action(init: Init, verb: &str, name: &str, no_block: bool) -> Result<Value, FnError> {
    match init {
        Init::Systemd => {
            reload_units_if_changed(name).await?;
            let out = run(systemctl_argv(verb, Some(name), true, no_block, None)).await?;
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
        get_all(init, None)
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
                run(systemctl_argv(
                    "is-active",
                    Some(&service),
                    false,
                    false,
                    None,
                ))
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

fn init_scripts(executable_only: bool, root: Option<&str>) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(rooted("/etc/init.d", root)) else {
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

/// The units of the unit file directories Salt reads (under `root` when given).
fn systemd_units(root: Option<&str>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for dir in [
        "/lib/systemd/system",
        "/usr/lib/systemd/system",
        "/etc/systemd/system",
    ] {
        let path = rooted(dir, root);
        if path.is_symlink() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            continue;
        };
        for e in entries.flatten() {
            out.extend(unit_of_file(&e.file_name().to_string_lossy()));
        }
    }
    out
}

async fn get_all(init: Init, root: Option<&str>) -> BTreeSet<String> {
    match init {
        Init::Systemd => {
            let mut all = systemd_units(root);
            let sysv: Vec<String> = init_scripts(true, root)
                .into_iter()
                .filter(|s| !all.contains(s))
                .collect();
            all.extend(sysv);
            all
        }
        Init::Sysv => {
            let mut all = init_scripts(false, None);
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
                None,
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
                init_scripts(true, None)
                    .into_iter()
                    .filter(|s| sysv_on.contains(s)),
            );
            out
        }
    }
}

async fn available(init: Init, name: &str) -> Result<bool, FnError> {
    match init {
        Init::Sysv => Ok(get_all(init, None).await.contains(name)),
        Init::Systemd => {
            reload_units_if_changed(name).await?;
            check_available(name).await
        }
    }
}

async fn enabled(init: Init, name: &str) -> Result<bool, FnError> {
    match init {
        Init::Sysv => Ok(sysv_enabled_all().await.contains(name)),
        Init::Systemd => {
            let out = run(systemctl_argv("is-enabled", Some(name), false, false, None)).await?;
            if out.retcode() == 0 && out.stdout() != "alias" {
                return Ok(true);
            }
            if init_scripts(true, None).contains(name) && !systemd_units(None).contains(name) {
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
            let sysv_only =
                init_scripts(true, None).contains(name) && !systemd_units(None).contains(name);
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
                None,
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
        let start = systemctl_argv("start", Some("nginx"), false, true, None);
        assert_eq!(start, ["systemctl", "--no-block", "start", "nginx.service"]);
        assert_eq!(
            systemctl_argv(
                "show -P NeedDaemonReload",
                Some("x.timer"),
                false,
                false,
                None
            ),
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

    // The command lines of Salt 3007's systemd_service (`_systemctl_cmd`), with systemctl
    // by name; systemd-run --scope only where systemd runs.
    #[test]
    fn systemd_only_command_lines() {
        let argv = |a, n, scope, nb, root| systemctl_argv(a, n, scope, nb, root);
        assert_eq!(
            argv("--full --no-legend --no-pager", None, false, false, None),
            ["systemctl", "--full", "--no-legend", "--no-pager"]
        );
        assert_eq!(
            argv(
                "--full --no-legend --no-pager list-unit-files",
                None,
                false,
                false,
                Some("/mnt")
            ),
            [
                "systemctl",
                "--root",
                "/mnt",
                "--full",
                "--no-legend",
                "--no-pager",
                "list-unit-files"
            ]
        );
        assert_eq!(
            argv("--system daemon-reload", None, false, false, None),
            ["systemctl", "--system", "daemon-reload"]
        );
        let scope: &[&str] = if booted() && super::super::cmd::which("systemd-run").is_some() {
            &["systemd-run", "--scope"]
        } else {
            &[]
        };
        let with_scope = |rest: &[&str]| {
            scope
                .iter()
                .chain(rest)
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            argv("mask --runtime", Some("foo"), true, false, Some("/r")),
            with_scope(&[
                "systemctl",
                "--root",
                "/r",
                "mask",
                "--runtime",
                "foo.service"
            ])
        );
        assert_eq!(
            argv("unmask", Some("foo.socket"), true, false, None),
            with_scope(&["systemctl", "unmask", "foo.socket"])
        );
        assert_eq!(
            argv("force-reload", Some("nginx"), true, true, None),
            with_scope(&["systemctl", "--no-block", "force-reload", "nginx.service"])
        );
        assert_eq!(
            argv("force-reload", Some("nginx"), true, false, None),
            with_scope(&["systemctl", "force-reload", "nginx.service"])
        );
        assert_eq!(
            argv("show", Some("ssh"), false, false, Some("/r")),
            ["systemctl", "--root", "/r", "show", "ssh.service"]
        );
        assert_eq!(
            argv("status", Some("ssh"), false, false, None),
            ["systemctl", "status", "ssh.service", "-n", "0"]
        );
        // Salt checks the unit type without its dot.
        assert_eq!(unit("fooservice"), "fooservice");
        assert_eq!(unit("foo"), "foo.service");
        assert_eq!(
            FnError::with_info("Failed to mask service 'x'", &s("Invalid unit name")),
            FnError::Execution(
                "Failed to mask service 'x'. Additional info follows:\n\nInvalid unit name".into()
            )
        );
        assert_eq!(
            FnError::with_info("Failed.", &s("")),
            FnError::Execution("Failed.".into())
        );
        assert_eq!(lines_of("a\n\nb\n"), ["a", "", "b"]);
        assert!(lines_of("").is_empty());
    }

    // A captured `systemctl show` text, read into what Salt 3007's `show` returns.
    #[test]
    fn show_output_as_salt_reads_it() {
        let text = "Type=notify\nRestart=on-failure\nExecStart={ path=/usr/sbin/sshd ; argv[]=/usr/sbin/sshd -D $SSHD_OPTS ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\nAfter=network.target auditd.service sysinit.target\nWants=\nEnvironment=A=1 B=2\nType=simple";
        let got = parse_show(text).unwrap();
        let exec = map_get(&got, "ExecStart").unwrap();
        assert_eq!(map_get(exec, "path"), Some(&s("/usr/sbin/sshd")));
        assert_eq!(
            map_get(exec, "argv[]"),
            Some(&s("/usr/sbin/sshd -D $SSHD_OPTS"))
        );
        assert_eq!(map_get(exec, "status"), Some(&s("0/0")));
        assert_eq!(
            map_get(&got, "After"),
            Some(&Value::Array(vec![
                s("network.target"),
                s("auditd.service"),
                s("sysinit.target")
            ]))
        );
        assert_eq!(map_get(&got, "Wants"), Some(&Value::Array(vec![])));
        assert_eq!(map_get(&got, "Environment"), Some(&s("A=1 B=2")));
        // A repeated key keeps its first place and takes its last value, like a dict.
        let keys: Vec<&str> = got
            .as_map()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "Type",
                "Restart",
                "ExecStart",
                "After",
                "Wants",
                "Environment"
            ]
        );
        assert_eq!(map_get(&got, "Type"), Some(&s("simple")));
        // systemctl's errors become keys (Salt splits them on '=' too).
        let err = parse_show(
            "Verb 'show' cannot be used with --root= or --image=.\nFailed to connect to bus: Host is down",
        )
        .unwrap();
        assert_eq!(
            err,
            Value::Map(vec![
                (
                    s("Verb 'show' cannot be used with --root"),
                    s(" or --image=.")
                ),
                (s("Failed to connect to bus: Host is down"), s("")),
            ])
        );
        // A braced item without '=' fails as Salt's comps[1] does.
        assert!(parse_show("X={ novalue }").is_err());
        assert_eq!(parse_show("").unwrap(), Value::Map(vec![]));
    }

    // Salt 3007's `masked`: True only for a link to /dev/null, under /run for runtime.
    #[tokio::test]
    async fn masked_reads_the_unit_link() {
        let tmp = std::env::temp_dir().join(format!("brine-svc-masked-{}", std::process::id()));
        let etc = tmp.join("etc/systemd/system");
        let run_dir = tmp.join("run/systemd/system");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::create_dir_all(&run_dir).unwrap();
        std::os::unix::fs::symlink("/dev/null", etc.join("brinetest-a.service")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", etc.join("brinetest-b.service")).unwrap();
        std::fs::write(etc.join("brinetest-c.service"), "[Unit]\n").unwrap();
        std::os::unix::fs::symlink("/dev/null", run_dir.join("brinetest-d.socket")).unwrap();
        let root = tmp.to_str();
        if offline().is_some() || booted() {
            assert!(masked("brinetest-a", false, root).await.unwrap());
            assert!(!masked("brinetest-a", true, root).await.unwrap());
            assert!(!masked("brinetest-b", false, root).await.unwrap());
            assert!(!masked("brinetest-c", false, root).await.unwrap());
            assert!(!masked("brinetest-missing", false, root).await.unwrap());
            assert!(masked("brinetest-d.socket", true, root).await.unwrap());
        }
        assert_eq!(
            mask_link("foo", true, Some("/r")),
            Path::new("/r/run/systemd/system/foo.service")
        );
        std::fs::remove_dir_all(&tmp).unwrap();
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
