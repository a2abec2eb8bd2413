//! The `mount` execution module's fstab functions and `mount.mount` on Linux, as Salt's:
//! entries parsed and written in Salt's format (`device\t\tname\tfstype\topts\tdump pass`),
//! matched on the fields `match_on` names, and `mount` run as Salt builds its command line.
//!
//! Not here: `mount.active`, `umount`, `remount`, swaps, and the automaster, vfstab and
//! filesystems files of macOS, Solaris and AIX.

use rmpv::Value;

use super::args::{is_true, py_str, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::payload::{map, py_truthy};

/// The fields of an fstab line, as `set_fstab` names them.
const KEYS: [&str; 6] = ["device", "name", "fstype", "opts", "dump", "pass_num"];

/// File systems `set_fstab` matches by mount point rather than by device (`match_on=auto`).
const SPECIAL_FS: &[&str] = &[
    "none", "tmpfs", "sysfs", "proc", "fusectl", "debugfs", "securityfs", "devtmpfs", "cgroup",
    "nfs", "nfs4", "glusterfs", "btrfs",
];

super::spec_table! {
    /// The functions of the `mount` module.
    Fstab => ("mount.fstab", "fstab", ["config"], 0, false, false, "
    The entries of an fstab file (/etc/fstab by default) by mount point: device, fstype,
    opts (a list), dump and pass.

    CLI Example:

        salt '*' mount.fstab
    "),
    SetFstab => ("mount.set_fstab", "set_fstab", ["name", "device", "fstype", "opts", "dump", "pass_num", "config", "test", "match_on", "not_change"], 3, false, true, "
    Make or change the fstab entry of a mount point: present, new or change. The entry
    is found by device (by mount point for special file systems such as tmpfs and nfs),
    or by the fields match_on names; not_change=True leaves a found entry as it is;
    test=True writes nothing.

    CLI Example:

        salt '*' mount.set_fstab /mnt/foo /dev/sdz1 ext4
    "),
    RmFstab => ("mount.rm_fstab", "rm_fstab", ["name", "device", "config"], 2, false, false, "
    Remove the fstab entries of a mount point (and device, when given).

    CLI Example:

        salt '*' mount.rm_fstab /mnt/foo /dev/sdg
    "),
    Mount => ("mount.mount", "mount", ["name", "device", "mkmnt", "fstype", "opts", "user", "util"], 1, false, false, "
    Mount a device (or, without one, what fstab names for the mount point). mkmnt=True
    makes the mount point. True, or mount's error output.

    CLI Example:

        salt '*' mount.mount /mnt/foo /dev/sdz1 fstype=ext4 mkmnt=True
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        _ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let config = b.get("config").map_or("/etc/fstab".to_string(), py_str);
        match self {
            Fun::Fstab => fstab(&config),
            Fun::SetFstab => set_fstab(b, &config),
            Fun::RmFstab => {
                let name = b.get("name").map(py_str).unwrap_or_default();
                let device = b.get("device").filter(|d| !d.is_nil()).map(py_str);
                rm_fstab(&name, device.as_deref(), &config)
            }
            Fun::Mount => {
                // Salt's `cmd.run_all` leaves mount's exit code as the job's.
                let (answer, retcode) = mount(b).await?;
                st.retcode = retcode;
                Ok(answer)
            }
        }
    }
}

/// Salt's `_fstab_entry.dict_from_line`: the six fields of an entry line (missing ones
/// `0`), `None` for a comment or a line of fewer than 4 or more than 6 fields.
fn fields(line: &str) -> Option<Vec<String>> {
    if line.starts_with('#') {
        return None;
    }
    let mut comps: Vec<String> = brine_protocol::pystr::split(line)
        .into_iter()
        .map(str::to_string)
        .collect();
    if !(4..=6).contains(&comps.len()) {
        return None;
    }
    comps.resize(6, "0".into());
    Some(comps)
}

/// Criteria on some of the six fields (Salt's `_fstab_entry`).
#[derive(Debug, Clone)]
struct Entry(Vec<(&'static str, String)>);

impl Entry {
    /// Whether `line` is an entry with these fields (options compared as sorted sets).
    fn matches(&self, line: &[String]) -> bool {
        self.0.iter().all(|(key, value)| {
            let idx = KEYS.iter().position(|k| k == key).unwrap_or(0);
            if *key == "opts" {
                let sorted = |s: &str| {
                    let mut v: Vec<&str> = s.split(',').collect();
                    v.sort_unstable();
                    v.into_iter().map(str::to_string).collect::<Vec<_>>()
                };
                sorted(&line[idx]) == sorted(value)
            } else {
                line[idx] == *value
            }
        })
    }

    fn get(&self, key: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .map_or("", |(_, v)| v.as_str())
    }

    /// The entry's line in Salt's format.
    fn line(&self) -> String {
        format!(
            "{}\t\t{}\t{}\t{}\t{} {}\n",
            self.get("device"),
            self.get("name"),
            self.get("fstype"),
            self.get("opts"),
            self.get("dump"),
            self.get("pass_num")
        )
    }
}

fn read_config(config: &str) -> Result<String, FnError> {
    let bytes = std::fs::read(config).map_err(|e| {
        FnError::Execution(format!(
            "Couldn't read from {config}: {}",
            brine_protocol::pyrepr::os_error(&e, Some(config))
        ))
    })?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `mount.fstab`.
fn fstab(config: &str) -> Result<Value, FnError> {
    if !std::path::Path::new(config).is_file() {
        return Ok(Value::Map(Vec::new()));
    }
    let text = read_config(config)?;
    let mut out: Vec<(Value, Value)> = Vec::new();
    for line in text.split_inclusive('\n') {
        let Some(f) = fields(line) else {
            continue;
        };
        let mut name = f[1].clone();
        while out.iter().any(|(k, _)| k.as_str() == Some(name.as_str())) {
            name.push('_');
        }
        let opts = f[3].split(',').map(Value::from).collect();
        out.push((
            Value::from(name),
            map([
                ("device", Value::from(f[0].as_str())),
                ("fstype", Value::from(f[2].as_str())),
                ("opts", Value::Array(opts)),
                ("dump", Value::from(f[4].as_str())),
                ("pass", Value::from(f[5].as_str())),
            ]),
        ));
    }
    Ok(Value::Map(out))
}

fn write_config(config: &str, lines: &[String], failed: impl Fn() -> String) -> Result<(), FnError> {
    std::fs::write(config, lines.concat()).map_err(|_| FnError::Execution(failed()))
}

/// `mount.rm_fstab`: the entries of `name` (and `device`) removed; always `True`.
fn rm_fstab(name: &str, device: Option<&str>, config: &str) -> Result<Value, FnError> {
    let mut criteria = vec![("name", name.to_string())];
    if let Some(d) = device {
        criteria.push(("device", d.to_string()));
    }
    let criteria = Entry(criteria);
    let text = read_config(config)?;
    let mut kept = Vec::new();
    let mut modified = false;
    for line in text.split_inclusive('\n') {
        if fields(line).is_some_and(|f| criteria.matches(&f)) {
            modified = true;
        } else {
            kept.push(line.to_string());
        }
    }
    if modified {
        write_config(config, &kept, || format!("Couldn't write to {config}"))?;
    }
    Ok(Value::Boolean(true))
}

/// `mount.set_fstab`: `present`, `new` or `change`.
fn set_fstab(b: &Bound, config: &str) -> Result<Value, FnError> {
    let text_arg = |k: &str, default: &str| b.get(k).filter(|v| !v.is_nil()).map_or(default.to_string(), py_str);
    let opts = match b.get("opts") {
        Some(Value::Array(items)) => items.iter().map(py_str).collect::<Vec<_>>().join(","),
        _ => text_arg("opts", "defaults"),
    };
    let fstype = text_arg("fstype", "");
    let entry = Entry(vec![
        ("name", text_arg("name", "")),
        ("device", text_arg("device", "").replace("\\ ", "\\040")),
        ("fstype", fstype.clone()),
        ("opts", opts.replace("\\ ", "\\040")),
        ("dump", text_arg("dump", "0")),
        ("pass_num", text_arg("pass_num", "0")),
    ]);
    let match_on: Vec<String> = match b.get("match_on") {
        Some(Value::Array(items)) => items.iter().map(py_str).collect(),
        None => vec!["auto".into()],
        Some(v) if v.is_str() => vec![py_str(v)],
        Some(_) => {
            return Err(FnError::Execution(
                "match_on must be a string or list of strings".into(),
            ))
        }
    };
    let match_on = if match_on == ["auto"] {
        vec![if SPECIAL_FS.contains(&fstype.as_str()) { "name" } else { "device" }.to_string()]
    } else {
        match_on
    };
    let mut criteria = Vec::new();
    for key in &match_on {
        match KEYS.iter().find(|k| **k == key.as_str()) {
            Some(k) => criteria.push((*k, entry.get(k).to_string())),
            None => {
                let unknown: Vec<&String> = match_on.iter().filter(|k| !KEYS.contains(&k.as_str())).collect();
                return Err(FnError::Execution(format!(
                    "Unrecognized keys in match_on: \"{unknown:?}\""
                )));
            }
        }
    }
    let criteria = Entry(criteria);
    if !std::path::Path::new(config).is_file() {
        return Err(FnError::Execution(format!("Bad config file \"{config}\"")));
    }
    let text = read_config(config)?;
    let not_change = is_true(b.get("not_change"));
    let mut lines = Vec::new();
    let mut ret: Option<&str> = None;
    for line in text.split_inclusive('\n') {
        match fields(line) {
            Some(f) if criteria.matches(&f) => {
                ret = Some("present");
                if entry.matches(&f) || not_change {
                    lines.push(line.to_string());
                } else {
                    ret = Some("change");
                    lines.push(entry.line());
                }
            }
            _ => lines.push(line.to_string()),
        }
    }
    let ret = match ret {
        Some(r) => r,
        None => {
            lines.push(entry.line());
            "new"
        }
    };
    // Salt's `test_mode(test=test, **kwargs)`: any `test` keyword, whatever its case.
    let test = b.get("test").is_some_and(py_truthy)
        || b.kwargs
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("test") && py_truthy(v));
    if ret != "present" && !test {
        write_config(config, &lines, || format!("File not writable {config}"))?;
    }
    Ok(Value::from(ret))
}

/// `mount.mount`: `mount [-o opts] [-t fstype] device name`, or `mount name` (fstab's
/// entry); `True`, or mount's error output; with mount's exit code.
async fn mount(b: &Bound) -> Result<(Value, i32), FnError> {
    let util = b.get("util").map_or("mount".to_string(), py_str);
    if util != "mount" {
        return Err(FnError::Execution(format!(
            "Brine mounts with mount only, not with {util}"
        )));
    }
    if b.get("user").is_some_and(py_truthy) {
        return Err(FnError::Execution(
            "Brine's mount.mount runs mount as the minion's user only".into(),
        ));
    }
    let name = b.get("name").map(py_str).unwrap_or_default();
    let opts: Option<String> = match b.get("opts") {
        None => Some("defaults".into()),
        Some(Value::Nil) => None,
        Some(Value::Array(items)) => Some(items.iter().map(py_str).collect::<Vec<_>>().join(",")),
        Some(v) => Some(py_str(v)),
    };
    if !std::path::Path::new(&name).exists() && is_true(b.get("mkmnt")) {
        std::fs::create_dir_all(&name).map_err(|e| {
            FnError::Exception(brine_protocol::pyrepr::os_exception(&e, Some(&name)))
        })?;
    }
    let mut args = String::new();
    if let Some(o) = &opts {
        args = format!("-o {o}");
    }
    let fstype = b.get("fstype").filter(|v| py_truthy(v)).map(py_str);
    if let Some(t) = &fstype {
        args.push_str(&format!(" -t {t}"));
    }
    let device = b.get("device").filter(|v| py_truthy(v)).map(py_str);
    let cmd = match &device {
        Some(d) => format!("mount {args} '{d}' '{name}' "),
        None => format!("mount '{name}' "),
    };
    let argv = brine_protocol::pyrepr::shlex_split(&cmd).map_err(FnError::Invocation)?;
    let out = super::cmd::run_argv(&argv, &[]).await?;
    if out.retcode() != 0 {
        return Ok((Value::from(out.stderr()), out.exit_code()));
    }
    Ok((Value::Boolean(true), 0))
}
