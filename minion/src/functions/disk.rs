//! The `disk` execution module: Salt's `salt/modules/disk.py` for the questions it asks of
//! `df`, `blkid`, `lsblk` and `blockdev`, with Salt's parsing of their output (its quirks
//! included: `fstype` falls back to the whole second line of `df -T`, an unparsable line
//! of `df -iP` empties what was read before it). The commands run through the `cmd`
//! module, so a failing command sets the job's retcode as in Salt.
//!
//! Not provided: `format` (`format_`), `wipe`, `resize2fs`, `tune` and `hpa` (they change
//! disks), `hdparms`, `smart_attributes` and `iostat` (hdparm, smartctl and sysstat), and
//! `get_fstype_from_path` (it needs the `mount` module).

use std::sync::OnceLock;

use regex::Regex;
use rmpv::Value;

use super::args::{py_repr, py_str, Bound, Signature, py_type_name};
use brine_protocol::pystr::split as py_split;
use super::network::{at, command_not_found, salt_cmd, Dict};
use super::{cmd, CallState, Context, FnError, Spec};
use brine_protocol::nested::splitlines;
use brine_protocol::payload::{get, get_str, py_truthy};

super::spec_table! {
    /// The functions of the `disk` module.
    Usage => ("disk.usage", "usage", ["args"], 0, false, false, "
    The usage of every mounted filesystem (`df -P`), by mount point: filesystem,
    1K-blocks, used, available, capacity. args is a sequence of df flags (from aBhHiklPtTxv)
    added to the command.

    CLI Example:

        salt '*' disk.usage
    "),
    Inodeusage => ("disk.inodeusage", "inodeusage", ["args"], 0, false, false, "
    The inode usage of every mounted filesystem (`df -iP`), by mount point: inodes, used,
    free, use, filesystem. args is a sequence of df flags added to the command.

    CLI Example:

        salt '*' disk.inodeusage
    "),
    Percent => ("disk.percent", "percent", ["args"], 0, false, false, "
    How full each mounted filesystem is (its capacity, `45%`), by mount point; with a
    mount point, only its figure (an unknown one gives an empty dict).

    CLI Example:

        salt '*' disk.percent /var
    "),
    Blkid => ("disk.blkid", "blkid", ["device", "token"], 0, false, false, "
    The attributes `blkid` finds on block devices (UUID, TYPE, LABEL, ...), by device;
    device limits it to one device, token (e.g. TYPE=ext4) to the devices that match it.

    CLI Example:

        salt '*' disk.blkid
        salt '*' disk.blkid /dev/sda
        salt '*' disk.blkid token='TYPE=ext4'
    "),
    Fstype => ("disk.fstype", "fstype", ["device"], 1, false, false, "
    The filesystem type of a device: its FSTYPE in `lsblk`, else the line `df -T` prints
    for it, else an empty string.

    CLI Example:

        salt '*' disk.fstype /dev/sdX1
    "),
    Dump => ("disk.dump", "dump", ["device", "args"], 1, false, false, "
    What `blockdev` reports of a device (getro, getsz, getss, getpbsz, getiomin,
    getioopt, getalignoff, getmaxsect, getsize, getsize64, getra, getfra); args limits it
    to some of them. False when blockdev fails.

    CLI Example:

        salt '*' disk.dump /dev/sda1
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let arg = |key: &str| b.get(key).cloned().unwrap_or(Value::Nil);
        let kernel = get_str(&ctx.grains, "kernel")
            .unwrap_or_default()
            .to_string();
        match self {
            Fun::Usage => {
                let flags = clean_flags(&arg("args"), "disk.usage")?;
                if kernel == "Linux" && !std::path::Path::new("/etc/mtab").is_file() {
                    tracing::error!("df cannot run without /etc/mtab");
                    return Ok(Value::Map(vec![]));
                }
                let command = with_flags(usage_command(&kernel), &flags);
                let out = run(ctx, command, st).await?;
                Ok(parse_usage(&out, &kernel).into_value())
            }
            Fun::Inodeusage => {
                let flags = clean_flags(&arg("args"), "disk.inodeusage")?;
                let base = if kernel == "AIX" { "df -i" } else { "df -iP" };
                let out = run(ctx, with_flags(base, &flags), st).await?;
                Ok(parse_inodeusage(&out, &kernel).into_value())
            }
            Fun::Percent => {
                let command = match kernel.as_str() {
                    "Linux" => "df -P",
                    "OpenBSD" | "AIX" => "df -kP",
                    _ => "df",
                };
                let out = run(ctx, command.to_string(), st).await?;
                percent(parse_percent(&out, &kernel), &arg("args"))
            }
            Fun::Blkid => {
                if cmd::which("blkid").is_none() {
                    return Ok(command_not_found("disk.blkid", "blkid", st));
                }
                blkid(ctx, &arg("device"), &arg("token"), st).await
            }
            Fun::Fstype => fstype(ctx, &arg("device"), st).await,
            Fun::Dump => dump(ctx, &arg("device"), &arg("args"), st).await,
        }
    }
}

/// `cmd.run(command, python_shell=False)`'s output.
async fn run(ctx: &Context, command: String, st: &mut CallState) -> Result<String, FnError> {
    let shell = [("python_shell", Value::Boolean(false))];
    let out = salt_cmd(ctx, cmd::Fun::Run, command, &shell, st).await?;
    Ok(py_str(&out))
}

fn usage_command(kernel: &str) -> &'static str {
    match kernel {
        "Linux" => "df -P",
        "OpenBSD" | "AIX" => "df -kP",
        "SunOS" => "df -k",
        _ => "df",
    }
}

fn with_flags(base: &str, flags: &str) -> String {
    if flags.is_empty() {
        base.to_string()
    } else {
        format!("{base} -{flags}")
    }
}

/// Salt's `_clean_flags`: the flags df may be given, as one word; any other is an error.
fn clean_flags(args: &Value, caller: &str) -> Result<String, FnError> {
    const ALLOWED: &str = "aBhHiklPtTxv";
    let invalid = || FnError::Execution(format!("Invalid flag passed to {caller}"));
    let items: Vec<Value> = match args {
        Value::Nil => return Ok(String::new()),
        Value::String(s) => s
            .as_str()
            .unwrap_or_default()
            .chars()
            .map(|c| Value::from(c.to_string()))
            .collect(),
        Value::Array(items) => items.clone(),
        Value::Map(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
        Value::Binary(bytes) => bytes.iter().map(|b| Value::from(*b)).collect(),
        other => {
            return Err(FnError::InvalidArgs(format!(
                "'{}' object is not iterable",
                py_type_name(other)
            )))
        }
    };
    let mut flags = String::new();
    for item in items {
        match item.as_str() {
            Some(f) if f.chars().count() == 1 && ALLOWED.contains(f) => flags.push_str(f),
            _ => return Err(invalid()),
        }
    }
    Ok(flags)
}

/// Python's `str.isdigit()` for the figures df prints.
fn is_digit(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_digit())
}

/// Salt's joining of a filesystem name with spaces: words are added to the first until the
/// second is a number.
fn join_filesystem(mut comps: Vec<&str>) -> Vec<String> {
    let mut first = comps.first().map(|s| s.to_string()).unwrap_or_default();
    while comps.len() >= 2 && !is_digit(comps[1]) {
        first = format!("{first} {}", comps[1]);
        comps.remove(1);
    }
    let mut out: Vec<String> = comps.iter().map(|s| s.to_string()).collect();
    if let Some(slot) = out.first_mut() {
        *slot = first;
    }
    out
}

/// Salt's `usage` parsing of df's output.
pub(crate) fn parse_usage(out: &str, kernel: &str) -> Dict {
    let mut ret = Dict::default();
    let mut oldline: Option<String> = None;
    for line in splitlines(out) {
        if line.is_empty() || line.starts_with("Filesystem") {
            continue;
        }
        let line = match oldline.take() {
            Some(old) => format!("{old} {line}"),
            None => line.to_string(),
        };
        let words = py_split(&line);
        if words.len() == 1 {
            oldline = Some(line);
            continue;
        }
        let comps = join_filesystem(words);
        if comps.len() < 2 {
            continue;
        }
        let c = |i: usize| comps.get(i).cloned();
        let entry = if kernel == "Darwin" {
            (|| {
                Some((
                    c(8)?,
                    vec![
                        ("filesystem", c(0)?),
                        ("512-blocks", c(1)?),
                        ("used", c(2)?),
                        ("available", c(3)?),
                        ("capacity", c(4)?),
                        ("iused", c(5)?),
                        ("ifree", c(6)?),
                        ("%iused", c(7)?),
                    ],
                ))
            })()
        } else {
            (|| {
                Some((
                    c(5)?,
                    vec![
                        ("filesystem", c(0)?),
                        ("1K-blocks", c(1)?),
                        ("used", c(2)?),
                        ("available", c(3)?),
                        ("capacity", c(4)?),
                    ],
                ))
            })()
        };
        store(&mut ret, entry, "Problem parsing disk usage information");
    }
    ret
}

/// One df line read (its mount point and fields) into `ret`; a line that could not be read
/// empties `ret`, as Salt's parsers do.
fn store<V: Into<Value>>(
    ret: &mut Dict,
    entry: Option<(V, Vec<(&str, V)>)>,
    problem: &str,
) {
    match entry {
        Some((mount, fields)) => {
            let mut data = Dict::default();
            for (k, v) in fields {
                data.set(k, v);
            }
            ret.set(mount, data.into_value());
        }
        None => {
            tracing::error!("{problem}");
            ret.clear();
        }
    }
}

/// Salt's `inodeusage` parsing of `df -iP`'s output: a line it cannot read empties what
/// was read before it.
pub(crate) fn parse_inodeusage(out: &str, kernel: &str) -> Dict {
    let mut ret = Dict::default();
    for line in splitlines(out) {
        if line.starts_with("Filesystem") {
            continue;
        }
        let comps = py_split(line);
        if comps.is_empty() {
            continue;
        }
        let c = |i: usize| comps.get(i).map(|s| Value::from(*s));
        let entry = match kernel {
            "OpenBSD" => (|| {
                let used: i64 = comps.get(5)?.parse().ok()?;
                let free: i64 = comps.get(6)?.parse().ok()?;
                Some((
                    c(8)?,
                    vec![
                        ("inodes", Value::from(used + free)),
                        ("used", c(5)?),
                        ("free", c(6)?),
                        ("use", c(7)?),
                        ("filesystem", c(0)?),
                    ],
                ))
            })(),
            "AIX" => (|| {
                Some((
                    c(6)?,
                    vec![
                        ("inodes", c(4)?),
                        ("used", c(5)?),
                        ("free", c(2)?),
                        ("use", c(5)?),
                        ("filesystem", c(0)?),
                    ],
                ))
            })(),
            _ => (|| {
                Some((
                    c(5)?,
                    vec![
                        ("inodes", c(1)?),
                        ("used", c(2)?),
                        ("free", c(3)?),
                        ("use", c(4)?),
                        ("filesystem", c(0)?),
                    ],
                ))
            })(),
        };
        store(&mut ret, entry, "Problem parsing inode usage information");
    }
    ret
}

/// Salt's `percent` parsing of df's output: the capacity by mount point.
pub(crate) fn parse_percent(out: &str, kernel: &str) -> Dict {
    let mut ret = Dict::default();
    for line in splitlines(out) {
        if line.is_empty() || line.starts_with("Filesystem") {
            continue;
        }
        let comps = join_filesystem(py_split(line));
        if comps.len() < 2 {
            continue;
        }
        let (mount, capacity) = if kernel == "Darwin" { (8, 4) } else { (5, 4) };
        match (comps.get(mount), comps.get(capacity)) {
            (Some(m), Some(c)) => ret.set(m.as_str(), c.as_str()),
            _ => {
                tracing::error!("Problem parsing disk usage information");
                ret.clear();
            }
        }
    }
    ret
}

/// Salt's answer of `percent`: every figure, or the one asked for (an unknown mount point
/// gives an empty dict).
fn percent(ret: Dict, args: &Value) -> Result<Value, FnError> {
    if !py_truthy(args) {
        return Ok(ret.into_value());
    }
    super::args::hashable(args)?;
    match ret.get_any(args) {
        Some(v) => Ok(v.clone()),
        None => {
            tracing::error!(
                "Problem parsing disk usage information: Partition '{}' does not exist!",
                py_str(args)
            );
            Ok(Value::Map(vec![]))
        }
    }
}

/// Salt's `blkid`.
async fn blkid(
    ctx: &Context,
    device: &Value,
    token: &Value,
    st: &mut CallState,
) -> Result<Value, FnError> {
    let mut argv = vec![Value::from("blkid")];
    if py_truthy(device) {
        argv.push(device.clone());
    } else if py_truthy(token) {
        argv.extend([Value::from("-t"), token.clone()]);
    }
    let shell = [("python_shell", Value::Boolean(false))];
    let ret = salt_cmd(ctx, cmd::Fun::RunAll, Value::Array(argv), &shell, st).await?;
    if get(&ret, "retcode").and_then(Value::as_i64).unwrap_or(0) > 0 {
        return Ok(Value::Map(vec![]));
    }
    parse_blkid(get_str(&ret, "stdout").unwrap_or_default()).map(Dict::into_value)
}

/// Salt's parsing of blkid's lines (`/dev/sda1: UUID="..." TYPE="ext4"`).
pub(crate) fn parse_blkid(out: &str) -> Result<Dict, FnError> {
    static QUOTES: OnceLock<Regex> = OnceLock::new();
    let quotes = QUOTES.get_or_init(|| Regex::new("\"+").expect("static regex is valid"));
    let mut ret = Dict::default();
    for line in splitlines(out) {
        if line.is_empty() {
            continue;
        }
        let comps = py_split(line);
        let first = at(&comps, 0)?;
        let device: String = {
            let mut chars: Vec<char> = first.chars().collect();
            chars.pop();
            chars.into_iter().collect()
        };
        let rest = line.split_once(' ').map_or("", |(_, r)| r);
        let parts: Vec<&str> = quotes.split(rest).collect();
        let mut info = Dict::default();
        for pair in parts.chunks_exact(2) {
            let key = pair[0].trim_matches('=').trim_matches(' ');
            info.set(key, pair[1].trim_matches('"'));
        }
        ret.set(device, info.into_value());
    }
    Ok(ret)
}

/// Salt's `fstype`: lsblk's FSTYPE column, else `df -T`'s second line, else "".
async fn fstype(ctx: &Context, device: &Value, st: &mut CallState) -> Result<Value, FnError> {
    let (lsblk, df) = (cmd::which("lsblk"), cmd::which("df"));
    if lsblk.is_none() && df.is_none() {
        st.retcode = 1;
        return Ok(Value::from(
            "Command required for 'disk.fstype' not found: None of provided binaries([\"'lsblk'\", \"'df'\"]) were found in $PATH.",
        ));
    }
    let device = py_str(device);
    if lsblk.is_some() {
        let out = salt_cmd(
            ctx,
            cmd::Fun::Run,
            format!("lsblk -o fstype {device}"),
            &[],
            st,
        )
        .await?;
        let out = py_str(&out);
        if let Some(line) = splitlines(&out).get(1) {
            let fs = line.trim();
            if !fs.is_empty() {
                return Ok(Value::from(fs));
            }
        }
    }
    if df.is_some() {
        let out = salt_cmd(ctx, cmd::Fun::Run, format!("df -T {device}"), &[], st).await?;
        let out = py_str(&out);
        if let Some(line) = splitlines(&out).get(1) {
            if !line.is_empty() {
                return Ok(Value::from(*line));
            }
        }
    }
    Ok(Value::from(""))
}

/// The `blockdev` reports of `dump`, in the order blockdev prints them.
const DUMP_FIELDS: &[&str] = &[
    "getro",
    "getsz",
    "getss",
    "getpbsz",
    "getiomin",
    "getioopt",
    "getalignoff",
    "getmaxsect",
    "getsize",
    "getsize64",
    "getra",
    "getfra",
];

/// Salt's `dump`.
async fn dump(
    ctx: &Context,
    device: &Value,
    args: &Value,
    st: &mut CallState,
) -> Result<Value, FnError> {
    let command = format!(
        "blockdev {} {}",
        DUMP_FIELDS
            .iter()
            .map(|f| format!("--{f}"))
            .collect::<Vec<_>>()
            .join(" "),
        py_str(device)
    );
    let shell = [("python_shell", Value::Boolean(false))];
    let out = salt_cmd(ctx, cmd::Fun::RunAll, command, &shell, st).await?;
    if get(&out, "retcode").and_then(Value::as_i64) != Some(0) {
        return Ok(Value::Boolean(false));
    }
    parse_dump(get_str(&out, "stdout").unwrap_or_default(), args)
}

/// Salt's reading of blockdev's lines (one per report, in order), limited to `args`.
pub(crate) fn parse_dump(stdout: &str, args: &Value) -> Result<Value, FnError> {
    let mut ret = Dict::default();
    for (i, line) in splitlines(stdout)
        .into_iter()
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let field = DUMP_FIELDS.get(i).ok_or_else(super::network::index_error)?;
        ret.set(*field, line);
    }
    if !py_truthy(args) {
        return Ok(ret.into_value());
    }
    let wanted: Vec<Value> = match args {
        Value::String(s) => s
            .as_str()
            .unwrap_or_default()
            .chars()
            .map(|c| Value::from(c.to_string()))
            .collect(),
        Value::Array(items) => items.clone(),
        Value::Map(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
        other => {
            return Err(FnError::InvalidArgs(format!(
                "'{}' object is not iterable",
                py_type_name(other)
            )))
        }
    };
    let mut picked = Dict::default();
    for key in wanted {
        let value = ret
            .get_any(&key)
            .cloned()
            .ok_or_else(|| FnError::Exception(format!("KeyError: {}", py_repr(&key))))?;
        picked.set(key, value);
    }
    Ok(picked.into_value())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::functions::call;
    use crate::functions::network::tests::{compare_parsers, compare_with_salt, py_error, to_json};
    use crate::functions::testutil::{ctx, kw, s};
    use serde_json::{json, Value as J};

    /// `percent` on df's output, as JSON (errors as their text).
    pub(crate) fn percent_of(out: &str, args: &Value) -> J {
        match percent(parse_percent(out, "Linux"), args) {
            Ok(v) => to_json(&v),
            Err(e) => J::from(py_error(e)),
        }
    }

    const DF: &str = "\
Filesystem              1024-blocks     Used Available Capacity Mounted on
devtmpfs                   12334432        0  12334432       0% /dev
/dev/vda                  264212084 52773100  42512788      56% /
/dev/mapper/a-very-long-volume-group-name-for-the-root
                          100000     5000     95000       5% /srv
map auto_home                     0        0         0     100% /System/Volumes/Data/home
df: /run/user/1000/doc: Permission denied
tmpfs                          1024        0      1024       0% /mnt/with space
";

    const DF_INODES: &str = "\
Filesystem                Inodes  IUsed    IFree IUse% Mounted on
devtmpfs                 3083608    114  3083494    1% /dev
/dev/vda                16777216 498039 16279177    3% /
";

    const BLKID: &str = "\
/dev/vda1: UUID=\"6a38ee5-7235-44e7-8b22-816a403bad5d\" BLOCK_SIZE=\"4096\" TYPE=\"ext4\" PARTUUID=\"0001-01\"
/dev/vdb: LABEL=\"data disk\" TYPE=\"xfs\"

/dev/loop0: TYPE=\"squashfs\"
";

    const BLOCKDEV: &str =
        "0\n41943040\n512\n512\n512\n0\n0\n1024\n20971520\n21474836480\n256\n256";

    #[test]
    fn salts_parsers_read_the_same_text_the_same_way() {
        let df_h = "Filesystem Size Used Avail Use% Mounted on\n/dev/vda 252G 51G 41G 56% /\ntmpfs 12G 0 12G 0% /dev/shm";
        let inode_error = format!("{DF_INODES}df: /x: Permission denied\ntmpfs 10 1 9 10% /tmp\n");
        compare_parsers(&json!([
            ["usage", [DF]],
            ["usage", [df_h]],
            ["usage", ["Filesystem x\n\nlonely\n"]],
            ["inodeusage", [DF_INODES]],
            ["inodeusage", [inode_error]],
            ["inodeusage", ["none  -  -  -  -  /proc\n\n   \n"]],
            ["percent", [DF, null]],
            ["percent", [DF, "/"]],
            ["percent", [DF, "/srv"]],
            ["percent", [DF, "/nope"]],
            ["percent", [DF, 5]],
            ["percent", [DF, ["/"]]],
            ["blkid", [BLKID]],
            ["blkid", ["   \n"]],
            ["dump", [BLOCKDEV, null]],
            ["dump", [BLOCKDEV, ["getro", "getsize64"]]],
            ["dump", [BLOCKDEV, "getro"]],
            ["dump", [format!("{BLOCKDEV}\n7"), null]],
            ["dump", [BLOCKDEV, 5]],
        ]));
    }

    /// Keeps what stays the same from one df to the next: the mount points, the
    /// filesystems, and the kind of every figure. Sizes are figures too: on filesystems
    /// whose size follows their use (btrfs, ZFS, thin pools) they change between calls.
    fn loose(fun: &str, ret: &mut J) {
        let shape = |v: &J| match v {
            J::String(t) if t.ends_with('%') => J::from("<percent>"),
            J::String(t) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                J::from("<figure>")
            }
            J::String(_) => J::from("<text>"),
            other => other.clone(),
        };
        match fun {
            "disk.usage" | "disk.inodeusage" => {
                if let Some(mounts) = ret.as_object_mut() {
                    for entry in mounts.values_mut().filter_map(J::as_object_mut) {
                        for key in [
                            "1K-blocks",
                            "used",
                            "available",
                            "capacity",
                            "inodes",
                            "free",
                            "use",
                        ] {
                            if let Some(v) = entry.get_mut(key) {
                                *v = shape(v);
                            }
                        }
                    }
                }
            }
            "disk.percent" => *ret = shape(ret),
            "disk.fstype" => {
                // df's line: device, type, then figures that change, then the mount point.
                if let Some(line) = ret.as_str() {
                    let words: Vec<&str> = line.split_whitespace().collect();
                    if words.len() > 3 {
                        *ret = json!([words[0], words[1], words[words.len() - 1]]);
                    }
                }
            }
            _ => {}
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_calls_return_what_salt_3007_returns() {
        let case = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cases = vec![
            case(&["disk.usage"]),
            case(&["disk.usage", "q"]),
            case(&["disk.usage", "args=5"]),
            case(&["disk.inodeusage"]),
            case(&["disk.percent", "/"]),
            case(&["disk.percent", "/nope"]),
            case(&["disk.blkid"]),
            case(&["disk.fstype", "/"]),
            case(&["disk.fstype", "/dev/nope"]),
            case(&["disk.dump", "/dev/nope"]),
        ];
        compare_with_salt(&cases, loose).await;
    }

    #[test]
    fn df_output_is_read_by_mount_point() {
        let usage = to_json(&parse_usage(DF, "Linux").into_value());
        assert_eq!(
            usage["/"],
            json!({"filesystem": "/dev/vda", "1K-blocks": "264212084", "used": "52773100", "available": "42512788", "capacity": "56%"})
        );
        // A name too long for its column continues on the next line.
        assert_eq!(
            usage["/srv"]["filesystem"],
            json!("/dev/mapper/a-very-long-volume-group-name-for-the-root")
        );
        // Words before the first figure are the filesystem's name.
        assert_eq!(
            usage["/System/Volumes/Data/home"]["filesystem"],
            json!("map auto_home")
        );
        // Salt keeps the first word of a mount point with a space.
        assert!(usage.get("/mnt/with").is_some());
        assert_eq!(usage.as_object().unwrap().len(), 5);
        assert_eq!(
            to_json(&parse_usage("/dev/vda 252G 51G 41G 56% /", "Linux").into_value()),
            json!({})
        );

        let inodes = to_json(&parse_inodeusage(DF_INODES, "Linux").into_value());
        assert_eq!(
            inodes["/"],
            json!({"inodes": "16777216", "used": "498039", "free": "16279177", "use": "3%", "filesystem": "/dev/vda"})
        );
        let cleared = format!("{DF_INODES}df: /x: Permission denied\ntmpfs 10 1 9 10% /tmp\n");
        let inodes = to_json(&parse_inodeusage(&cleared, "Linux").into_value());
        assert_eq!(
            inodes.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["/tmp"]
        );

        // percent does not join wrapped lines: the continuation line empties what was read.
        assert_eq!(percent_of(DF, &s("/")), json!({}));
        assert_eq!(percent_of(DF, &s("/mnt/with")), json!("0%"));
        assert_eq!(percent_of(DF_INODES, &s("/")), json!("3%"));
        assert_eq!(percent_of(DF_INODES, &s("/nope")), json!({}));
        assert_eq!(
            percent_of(DF_INODES, &Value::Nil),
            json!({"/dev": "1%", "/": "3%"})
        );
        assert_eq!(
            percent_of(DF, &Value::Array(vec![s("/")])),
            json!("TypeError: unhashable type: 'list'")
        );
    }

    #[test]
    fn df_flags_are_checked() {
        assert_eq!(clean_flags(&Value::Nil, "disk.usage").unwrap(), "");
        assert_eq!(clean_flags(&s("hT"), "disk.usage").unwrap(), "hT");
        assert_eq!(
            clean_flags(&Value::Array(vec![s("i"), s("k")]), "disk.usage").unwrap(),
            "ik"
        );
        assert_eq!(
            clean_flags(&s("hq"), "disk.usage").unwrap_err(),
            FnError::Execution("Invalid flag passed to disk.usage".into())
        );
        assert_eq!(
            clean_flags(&Value::Array(vec![s("ih")]), "disk.inodeusage").unwrap_err(),
            FnError::Execution("Invalid flag passed to disk.inodeusage".into())
        );
        assert_eq!(
            clean_flags(&Value::from(5), "disk.usage").unwrap_err(),
            FnError::InvalidArgs("'int' object is not iterable".into())
        );
        assert_eq!(with_flags("df -P", "h"), "df -P -h");
        assert_eq!(with_flags("df -P", ""), "df -P");
    }

    #[test]
    fn blkid_and_blockdev_output_are_read() {
        let b = to_json(&parse_blkid(BLKID).unwrap().into_value());
        assert_eq!(
            b,
            json!({
                "/dev/vda1": {"UUID": "6a38ee5-7235-44e7-8b22-816a403bad5d", "BLOCK_SIZE": "4096", "TYPE": "ext4", "PARTUUID": "0001-01"},
                "/dev/vdb": {"LABEL": "data disk", "TYPE": "xfs"},
                "/dev/loop0": {"TYPE": "squashfs"}
            })
        );
        let d = to_json(&parse_dump(BLOCKDEV, &Value::Nil).unwrap());
        assert_eq!(d["getsize64"], json!("21474836480"));
        assert_eq!(d.as_object().unwrap().len(), 12);
        let some =
            to_json(&parse_dump(BLOCKDEV, &Value::Array(vec![s("getra"), s("getro")])).unwrap());
        assert_eq!(some, json!({"getra": "256", "getro": "0"}));
        assert_eq!(
            parse_dump(BLOCKDEV, &s("getro")).unwrap_err(),
            FnError::Exception("KeyError: 'g'".into())
        );
    }

    #[tokio::test]
    async fn this_hosts_disks_are_read() {
        let usage = call(&ctx(), "disk.usage", &[]).await;
        let root = super::super::get(&usage.ret, "/").expect("the root filesystem");
        assert!(get_str(root, "capacity").is_some_and(|c| c.ends_with('%')));
        let pct = call(&ctx(), "disk.percent", &[s("/")]).await;
        assert!(
            pct.ret.as_str().is_some_and(|c| c.ends_with('%')),
            "{:?}",
            pct.ret
        );
        let inodes = call(&ctx(), "disk.inodeusage", &[]).await;
        assert!(super::super::get(&inodes.ret, "/").is_some());
        let bad = call(&ctx(), "disk.usage", &[kw(&[("args", s("z"))])]).await;
        assert_eq!(
            (bad.ret, bad.retcode),
            (s("ERROR: Invalid flag passed to disk.usage"), 1)
        );
        let dump = call(&ctx(), "disk.dump", &[s("/dev/no-such-device")]).await;
        assert_eq!(dump.ret, Value::Boolean(false));
        assert_ne!(dump.retcode, 0, "blockdev's failure is the job's");
    }
}
