//! Grain collection: the facts about this host that Salt's `salt/grains/core.py`
//! reports, read from /proc, /sys, /etc/os-release, /etc/hosts and getifaddrs(3).
//!
//! No name is resolved over the network: `fqdn` and `fqdn_ip4`/`fqdn_ip6` come from
//! /etc/hosts only.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use rmpv::Value;

use crate::functions::SALT_VERSION;

fn s(v: impl Into<String>) -> Value {
    Value::from(v.into())
}

fn strings<I: IntoIterator<Item = String>>(items: I) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|t| t.trim().to_string())
}

/// Collect the grains of this host. `extra` (the `grains` map of the minion config, or
/// Nil) overrides and extends what was detected; `master` is the configured master.
pub fn grains_collect(id: &str, extra: &Value, master: &str) -> Value {
    let mut g: Vec<(String, Value)> = Vec::new();
    let mut put = |k: &str, v: Value| g.push((k.to_string(), v));

    put(
        "cwd",
        s(std::env::current_dir()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()),
    );
    put(
        "machine_id",
        s(read_trimmed("/etc/machine-id")
            .or_else(|| read_trimmed("/var/lib/dbus/machine-id"))
            .unwrap_or_default()),
    );
    put("master", s(master));
    put("server_id", Value::from(server_id(id)));

    let hostname = read_trimmed("/proc/sys/kernel/hostname").unwrap_or_else(|| "localhost".into());
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let fqdn = fqdn_from_hosts(&hosts, &hostname);
    let (host, domain) = match fqdn.split_once('.') {
        Some((h, d)) => (h.to_string(), d.to_string()),
        None => (fqdn.clone(), String::new()),
    };
    put("localhost", s(hostname.clone()));
    put("fqdn", s(fqdn.clone()));
    put("host", s(host));
    put("domain", s(domain));

    let ifaces = interfaces();
    put(
        "hwaddr_interfaces",
        Value::Map(
            ifaces
                .iter()
                .filter_map(|i| i.hwaddr.as_ref().map(|m| (s(i.name.clone()), s(m.clone()))))
                .collect(),
        ),
    );
    put("id", s(id));
    let ip4_if = Value::Map(
        ifaces
            .iter()
            .map(|i| {
                (
                    s(i.name.clone()),
                    strings(i.v4.iter().map(|a| a.to_string())),
                )
            })
            .collect(),
    );
    let ip6_if = Value::Map(
        ifaces
            .iter()
            .map(|i| {
                (
                    s(i.name.clone()),
                    strings(i.v6.iter().map(|a| a.to_string())),
                )
            })
            .collect(),
    );
    let ip_if = Value::Map(
        ifaces
            .iter()
            .map(|i| {
                (
                    s(i.name.clone()),
                    strings(
                        i.v4.iter()
                            .map(|a| a.to_string())
                            .chain(i.v6.iter().map(|a| a.to_string())),
                    ),
                )
            })
            .collect(),
    );
    put("ip4_interfaces", ip4_if);
    put("ip6_interfaces", ip6_if);
    let mut v4: Vec<Ipv4Addr> = ifaces.iter().flat_map(|i| i.v4.iter().copied()).collect();
    v4.sort();
    v4.dedup();
    let mut v6: Vec<Ipv6Addr> = ifaces.iter().flat_map(|i| i.v6.iter().copied()).collect();
    v6.sort();
    v6.dedup();
    put("ipv4", strings(v4.iter().map(|a| a.to_string())));
    put("ipv6", strings(v6.iter().map(|a| a.to_string())));
    let (fqdn4, fqdn6) = hosts_addresses(&hosts, &fqdn);
    put("fqdn_ip4", strings(fqdn4.iter().map(|a| a.to_string())));
    put("fqdn_ip6", strings(fqdn6.iter().map(|a| a.to_string())));
    put("ip_interfaces", ip_if);
    put(
        "kernelparams",
        kernelparams(&read_trimmed("/proc/cmdline").unwrap_or_default()),
    );
    put("locale_info", locale_info());

    let kernel = read_trimmed("/proc/sys/kernel/ostype").unwrap_or_else(|| "Linux".into());
    put("kernel", s(kernel.clone()));
    put("nodename", s(hostname));
    put(
        "kernelrelease",
        s(read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default()),
    );
    put(
        "kernelversion",
        s(read_trimmed("/proc/sys/kernel/version").unwrap_or_default()),
    );
    let cpuarch = std::env::consts::ARCH.to_string();
    put("cpuarch", s(cpuarch.clone()));
    put("init", s(init_system()));

    let os_release = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .map(|t| parse_os_release(&t))
        .unwrap_or_default();
    for (k, v) in os_grains(&os_release, &kernel, &cpuarch) {
        put(&k, v);
    }

    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let (num_cpus, cpu_model, cpu_flags) = cpu_data(&cpuinfo);
    put("num_cpus", Value::from(num_cpus));
    put("cpu_model", s(cpu_model));
    put("cpu_flags", strings(cpu_flags));
    let (mem, swap) = mem_data(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default());
    put("mem_total", Value::from(mem));
    put("swap_total", Value::from(swap));

    let path = std::env::var("PATH").unwrap_or_default().trim().to_string();
    put("systempath", strings(path.split(':').map(str::to_string)));
    put("path", s(path));
    put("pid", Value::from(std::process::id()));
    put(
        "saltpath",
        s(std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.to_string_lossy().into_owned()))
            .unwrap_or_default()),
    );
    put("saltversion", s(SALT_VERSION));
    put(
        "saltversioninfo",
        Value::Array(
            SALT_VERSION
                .split('.')
                .filter_map(|p| p.parse::<u64>().ok())
                .map(Value::from)
                .collect(),
        ),
    );
    put("brine_version", s(env!("CARGO_PKG_VERSION")));
    put("shell", s(crate::functions::cmd::default_shell()));
    let (uid, gid) = (current_uid(), current_gid());
    put("uid", Value::from(uid));
    put("gid", Value::from(gid));
    put(
        "username",
        name_for_id("/etc/passwd", uid).map_or(Value::Nil, Value::from),
    );
    put(
        "groupname",
        name_for_id("/etc/group", gid).map_or(Value::Nil, Value::from),
    );
    for (k, v) in crate::grains_host::host_grains() {
        put(&k, v);
    }
    let (virtual_, subtype) = virtual_grains();
    put("virtual", s(virtual_));
    if let Some(sub) = subtype {
        put("virtual_subtype", s(sub));
    }

    let mut grains = g;
    if let Value::Map(entries) = extra {
        for (k, v) in entries {
            let key = k.as_str().map_or_else(|| format!("{k}"), str::to_string);
            match grains.iter_mut().find(|(gk, _)| *gk == key) {
                Some(slot) => slot.1 = v.clone(),
                None => grains.push((key, v.clone())),
            }
        }
    }
    Value::Map(
        grains
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect(),
    )
}

/// Every grain of a minion as Salt's loader assembles them: the core grains of this host, the
/// static grains of `grains_file` over them, and `config` (the `grains` option of the minion's
/// configuration) over both.
pub fn grains_load(id: &str, master: &str, grains_file: Option<&Path>, config: &Value) -> Value {
    grains_collect(id, &grains_extra(grains_file, config), master)
}

/// What goes over the core grains: the static grains of `grains_file` with `config` over them.
pub fn grains_extra(grains_file: Option<&Path>, config: &Value) -> Value {
    let mut extra = grains_file.and_then(static_grains).unwrap_or_default();
    dict_update(&mut extra, config);
    Value::Map(extra)
}

/// Python's `dict.update`: the entries of the map `from` replace those with the same key (in
/// place) or come last.
pub fn dict_update(into: &mut Vec<(Value, Value)>, from: &Value) {
    if let Value::Map(entries) = from {
        for (k, v) in entries {
            match into.iter_mut().find(|(ik, _)| ik == k) {
                Some(slot) => slot.1 = v.clone(),
                None => into.push((k.clone(), v.clone())),
            }
        }
    }
}

/// The grains file's mapping (Salt's `extra.config` grains); `None` when there is no such file,
/// or (logged, as Salt logs it) when it cannot be read or loaded. A file that holds no mapping
/// adds no grains.
pub fn static_grains(path: &Path) -> Option<Vec<(Value, Value)>> {
    if !path.is_file() {
        return None;
    }
    tracing::debug!("Loading static grains from {}", path.display());
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!("grains file {} not read: {e}", path.display());
            return None;
        }
    };
    match brine_protocol::yaml::load::load(&text) {
        Ok(data) => match brine_protocol::payload::from_json(&data) {
            Value::Map(entries) => Some(entries),
            _ => None,
        },
        Err(e) => {
            tracing::warn!("Bad syntax in grains file! Skipping.");
            tracing::debug!("grains file {}: {e}", path.display());
            None
        }
    }
}

/// `server_id`: the low 31 bits of the SHA-256 of the minion id, as Salt computes it.
pub fn server_id(id: &str) -> u32 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(id.as_bytes());
    let tail = [digest[28], digest[29], digest[30], digest[31]];
    u32::from_be_bytes(tail) & 0x7fff_ffff
}

/// Parse an os-release file (`KEY=value`, optionally quoted).
pub fn parse_os_release(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with('#') {
                return None;
            }
            let (k, v) = line.split_once('=')?;
            let v = v.trim();
            let v = if v.len() >= 2
                && ((v.starts_with('"') && v.ends_with('"'))
                    || (v.starts_with('\'') && v.ends_with('\'')))
            {
                v[1..v.len() - 1]
                    .replace("\\\"", "\"")
                    .replace("\\$", "$")
                    .replace("\\\\", "\\")
            } else {
                v.to_string()
            };
            Some((k.trim().to_string(), v))
        })
        .collect()
}

/// The os, os_family, osrelease, ... grains from os-release data.
fn os_grains(rel: &HashMap<String, String>, kernel: &str, cpuarch: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let id = rel
        .get("ID")
        .cloned()
        .unwrap_or_else(|| kernel.to_lowercase());
    let name = rel
        .get("NAME")
        .cloned()
        .unwrap_or_else(|| kernel.to_string());
    let os = derive_os(&name, &id);
    let family_id = match rel.get("ID_LIKE") {
        None => id.clone(),
        Some(like) => {
            let ids: Vec<&str> = std::iter::once(id.as_str())
                .chain(like.split_whitespace())
                .collect();
            if ids.contains(&"debian") || ids.contains(&"ubuntu") {
                "debian".to_string()
            } else {
                ids.last().map_or(id.clone(), |s| s.to_string())
            }
        }
    };
    let os_family = match family_id.as_str() {
        "fedora" => "RedHat".to_string(),
        other => {
            let mut c = other.chars();
            c.next()
                .map(|f| f.to_uppercase().collect::<String>() + &c.as_str().to_lowercase())
                .unwrap_or_default()
        }
    };
    let os_family = family_override(&os).map_or(os_family, str::to_string);
    let osrelease = rel.get("VERSION_ID").cloned().unwrap_or_default();
    let codename = rel.get("VERSION_CODENAME").cloned().unwrap_or_default();
    out.push(("os".into(), s(os.clone())));
    out.push(("os_family".into(), s(os_family.clone())));
    out.push(("oscodename".into(), s(codename.clone())));
    out.push(("osfullname".into(), s(name.trim())));
    out.push(("lsb_distrib_id".into(), s(name.trim())));
    out.push(("lsb_distrib_release".into(), s(osrelease.clone())));
    out.push(("lsb_distrib_codename".into(), s(codename)));
    out.push(("osrelease".into(), s(osrelease.clone())));
    let info: Vec<Value> = osrelease
        .split('.')
        .map(|p| {
            if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) {
                p.parse::<u64>().map_or_else(|_| s(p), Value::from)
            } else {
                s(p)
            }
        })
        .collect();
    if let Some(major) = info.first().and_then(Value::as_u64) {
        out.push(("osmajorrelease".into(), Value::from(major)));
    }
    let finger_name = if matches!(
        os.as_str(),
        "Debian" | "FreeBSD" | "OpenBSD" | "NetBSD" | "Mac" | "Raspbian"
    ) {
        os.clone()
    } else {
        name.trim().to_string()
    };
    let finger_ver = if matches!(os.as_str(), "Ubuntu" | "Pop") {
        osrelease.clone()
    } else {
        osrelease.split('.').next().unwrap_or_default().to_string()
    };
    out.push(("osfinger".into(), s(format!("{finger_name}-{finger_ver}"))));
    out.push(("osrelease_info".into(), Value::Array(info)));
    out.push(("osarch".into(), s(osarch(&os_family, cpuarch))));
    out
}

/// Salt's `_derive_os_grain`: shorten NAME into the traditional `os` grain.
fn derive_os(name: &str, id: &str) -> String {
    match (id, name) {
        ("astra", "Astra Linux (Orel)") => return "AstraLinuxCE".into(),
        ("astra", "Astra Linux (Smolensk)") => return "AstraLinuxSE".into(),
        ("pop", "Pop!_OS") => return "Pop".into(),
        _ => {}
    }
    let re = regex::Regex::new(r"(?i)\W(?:gnu/)?linux").expect("static regex is valid");
    let distro = re.replace_all(name, "").trim().to_string();
    let short: String = distro
        .replace(' ', "")
        .to_lowercase()
        .chars()
        .take(10)
        .collect();
    let mapped = match short.as_str() {
        "redhatente" => "RedHat",
        "gentoobase" => "Gentoo",
        "archarm" => "Arch ARM",
        "arch" => "Arch",
        "debian" => "Debian",
        "raspbian" => "Raspbian",
        "fedoraremi" | "pidora" => "Fedora",
        "amazonami" => "Amazon",
        "alt" => "ALT",
        "enterprise" | "oracleserv" => "OEL",
        "cloudserve" | "cloudlinux" => "CloudLinux",
        "almalinux" => "AlmaLinux",
        "scientific" => "ScientificLinux",
        "manjaro" | "manjarolin" => "Manjaro",
        "sles" => "SUSE",
        "void" => "Void",
        "linuxmint" => "Mint",
        "neon" => "KDE neon",
        "pop" => "Pop",
        "rocky" => "Rocky",
        _ => return distro,
    };
    mapped.to_string()
}

/// Salt's `_OS_FAMILY_MAP` for the common distributions.
fn family_override(os: &str) -> Option<&'static str> {
    Some(match os {
        "Ubuntu" | "Mint" | "Raspbian" | "Devuan" | "Kali" | "Pop" | "KDE neon"
        | "elementary OS" => "Debian",
        "Fedora" | "CentOS" | "CentOS Stream" | "Amazon" | "CloudLinux" | "AlmaLinux" | "OEL"
        | "Rocky" | "ScientificLinux" | "ALT" | "VMware Photon OS" | "XCP-ng" => "RedHat",
        "SLES" | "SUSE" | "openSUSE" | "openSUSE Leap" | "openSUSE Tumbleweed" | "SLED" => "Suse",
        "Arch ARM" | "Manjaro" | "EndeavourOS" => "Arch",
        "Void" => "Void",
        _ => return None,
    })
}

/// `osarch`: the package architecture name (dpkg's for Debian, rpm's otherwise).
fn osarch(os_family: &str, cpuarch: &str) -> String {
    if os_family == "Debian" {
        return match cpuarch {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" | "i386" | "i586" | "i686" => "i386",
            "arm" => "armhf",
            "powerpc64" => "ppc64el",
            "riscv64" => "riscv64",
            "s390x" => "s390x",
            other => other,
        }
        .to_string();
    }
    match cpuarch {
        "x86" => "i686".into(),
        other => other.to_string(),
    }
}

/// The canonical name of `hostname` in /etc/hosts (the first name on its line).
fn fqdn_from_hosts(hosts: &str, hostname: &str) -> String {
    if hostname.contains('.') {
        return hostname.to_string();
    }
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_whitespace();
        let Some(_addr) = fields.next() else { continue };
        let names: Vec<&str> = fields.collect();
        if names.contains(&hostname) {
            return names[0].to_string();
        }
    }
    hostname.to_string()
}

/// The addresses /etc/hosts gives for `name`, IPv4 and IPv6, in file order.
fn hosts_addresses(hosts: &str, name: &str) -> (Vec<Ipv4Addr>, Vec<Ipv6Addr>) {
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_whitespace();
        let Some(addr) = fields.next() else { continue };
        if !fields.any(|n| n == name) {
            continue;
        }
        match addr.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) if !v4.contains(&a) => v4.push(a),
            Ok(IpAddr::V6(a)) if !v6.contains(&a) => v6.push(a),
            _ => {}
        }
    }
    (v4, v6)
}

fn kernelparams(cmdline: &str) -> Value {
    Value::Array(
        cmdline
            .split_whitespace()
            .map(|word| {
                let (k, v) = match word.split_once('=') {
                    Some((k, v)) => (k, Value::from(v.trim_matches('"'))),
                    None => (word, Value::Nil),
                };
                Value::Array(vec![Value::from(k), v])
            })
            .collect(),
    )
}

fn locale_info() -> Value {
    let raw = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_default();
    // Python maps the C/POSIX locales (coerced to C.UTF-8) to en_US/UTF-8.
    let (lang, enc) = match raw.as_str() {
        "" | "C" | "POSIX" | "C.UTF-8" | "C.utf8" => ("en_US".to_string(), "UTF-8".to_string()),
        other => {
            let base = other.split('@').next().unwrap_or(other);
            match base.split_once('.') {
                Some((l, e)) => (
                    l.to_string(),
                    if e.eq_ignore_ascii_case("utf8") {
                        "UTF-8".into()
                    } else {
                        e.to_string()
                    },
                ),
                None => (base.to_string(), "ISO8859-1".to_string()),
            }
        }
    };
    let tz = std::env::var("TZ")
        .ok()
        .filter(|t| !t.is_empty())
        .map(|t| tz_abbrev_from_posix(t.trim_start_matches(':')))
        .or_else(|| {
            std::fs::read("/etc/localtime")
                .ok()
                .and_then(|b| tzif_abbrev(&b))
        })
        .unwrap_or_else(|| "UTC".to_string());
    Value::Map(vec![
        (s("defaultlanguage"), s(lang)),
        (s("defaultencoding"), s(enc)),
        (s("detectedencoding"), s("utf-8")),
        (s("timezone"), s(tz)),
    ])
}

/// The standard-time abbreviation of a POSIX TZ string ("CET-1CEST,..." -> "CET").
fn tz_abbrev_from_posix(tz: &str) -> String {
    if let Some(rest) = tz.strip_prefix('<') {
        return rest.split('>').next().unwrap_or_default().to_string();
    }
    let abbrev: String = tz.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    if abbrev.len() >= 3 {
        abbrev
    } else {
        // A zone name like "Europe/Paris": its abbreviation needs the tz database.
        tz.rsplit('/').next().unwrap_or(tz).to_string()
    }
}

/// The abbreviation from the POSIX footer of a TZif (v2+) file.
fn tzif_abbrev(data: &[u8]) -> Option<String> {
    if !data.starts_with(b"TZif") {
        return None;
    }
    let text = std::str::from_utf8(data.rsplit(|b| *b == b'\n').nth(1)?).ok()?;
    (!text.is_empty()).then(|| tz_abbrev_from_posix(text))
}

fn cpu_data(cpuinfo: &str) -> (u64, String, Vec<String>) {
    let mut count = 0u64;
    let mut model = None;
    let mut flags = Vec::new();
    for line in cpuinfo.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "processor" => count += 1,
            "model name" | "cpu model" | "Processor" | "cpu" if model.is_none() => {
                model = Some(v.to_string())
            }
            "flags" | "Features" if flags.is_empty() => {
                flags = v.split_whitespace().map(str::to_string).collect()
            }
            _ => {}
        }
    }
    if count == 0 {
        count = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    }
    (count, model.unwrap_or_else(|| "Unknown".into()), flags)
}

/// `mem_total` and `swap_total` in MiB.
fn mem_data(meminfo: &str) -> (u64, u64) {
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.split_whitespace().next()?.parse::<u64>().ok())?
            })
            .map_or(0, |kib| kib / 1024)
    };
    (field("MemTotal"), field("SwapTotal"))
}

fn status_id(field: &str) -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// The real uid of this process.
pub fn current_uid() -> u32 {
    status_id("Uid:").unwrap_or(u32::MAX)
}

/// The real gid of this process.
pub fn current_gid() -> u32 {
    status_id("Gid:").unwrap_or(u32::MAX)
}

/// The name for a numeric id in /etc/passwd or /etc/group.
fn name_for_id(file: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 2 && f[2].parse::<u32>().ok() == Some(id)).then(|| f[0].to_string())
    })
}

fn init_system() -> String {
    if Path::new("/run/systemd/system").exists() {
        return "systemd".into();
    }
    let Ok(raw) = std::fs::read("/proc/1/cmdline") else {
        return "unknown".into();
    };
    let cmdline: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let Some(first) = cmdline.first() else {
        return "unknown".into();
    };
    let resolved = crate::functions::cmd::which(first);
    if let Some(bin) = resolved.as_deref().filter(|b| b.ends_with("bin/init")) {
        if let Ok(data) = std::fs::read(bin) {
            let lower = data.to_ascii_lowercase();
            for name in ["upstart", "sysvinit", "systemd"] {
                if lower.windows(name.len()).any(|w| w == name.as_bytes()) {
                    return name.into();
                }
            }
        }
        return "unknown".into();
    }
    let has = |prog: &str| crate::functions::cmd::which(prog).is_some_and(|p| cmdline.contains(&p));
    if has("supervisord") {
        "supervisord".into()
    } else if has("dumb-init") {
        "dumb-init".into()
    } else if has("tini") {
        "tini".into()
    } else if cmdline == ["runit"] || cmdline.iter().any(|c| c == "/sbin/my_init") {
        "runit".into()
    } else {
        "unknown".into()
    }
}

/// `virtual` / `virtual_subtype`: containers from /proc/1 and marker files, hypervisors
/// from DMI. A simplified version of Salt's detection (no virt-what).
fn virtual_grains() -> (String, Option<String>) {
    let cgroup = std::fs::read_to_string("/proc/1/cgroup").unwrap_or_default();
    let environ = std::fs::read("/proc/1/environ").unwrap_or_default();
    let environ = String::from_utf8_lossy(&environ);
    if Path::new("/.dockerenv").exists()
        || [":/system.slice/docker", ":/docker/", ":/docker-ce/"]
            .iter()
            .any(|m| cgroup.contains(m))
        || environ.split('\0').any(|e| e == "container=docker")
    {
        return ("container".into(), Some("Docker".into()));
    }
    if Path::new("/run/.containerenv").exists()
        || environ.split('\0').any(|e| e == "container=podman")
    {
        return ("container".into(), Some("Podman".into()));
    }
    if cgroup.contains(":/lxc/") || environ.split('\0').any(|e| e == "container=lxc") {
        return ("container".into(), Some("LXC".into()));
    }
    if environ.split('\0').any(|e| e.starts_with("container=")) {
        return ("container".into(), None);
    }
    let product = read_trimmed("/sys/class/dmi/id/product_name").unwrap_or_default();
    let vendor = read_trimmed("/sys/class/dmi/id/sys_vendor").unwrap_or_default();
    let both = format!("{product} {vendor}").to_lowercase();
    let kind = if both.contains("vmware") {
        "VMware"
    } else if both.contains("virtualbox") {
        "VirtualBox"
    } else if both.contains("kvm") || both.contains("qemu") {
        "kvm"
    } else if both.contains("xen") {
        "xen"
    } else if both.contains("microsoft") && both.contains("virtual") {
        "VirtualPC"
    } else if both.contains("amazon ec2") {
        return ("Nitro".into(), Some("Amazon EC2".into()));
    } else {
        "physical"
    };
    (kind.into(), None)
}

/// One network interface and its addresses.
#[derive(Debug, Clone, Default, PartialEq)]
struct Interface {
    name: String,
    hwaddr: Option<String>,
    v4: Vec<Ipv4Addr>,
    v6: Vec<Ipv6Addr>,
}

/// One getifaddrs(3) entry.
#[derive(Debug, Clone, PartialEq)]
enum IfAddr {
    V4(String, Ipv4Addr),
    V6(String, Ipv6Addr),
    Link(String, Vec<u8>),
}

/// Interfaces in kernel order (the link entries come first, by index).
fn interfaces() -> Vec<Interface> {
    group_interfaces(read_ifaddrs())
}

fn group_interfaces(entries: Vec<IfAddr>) -> Vec<Interface> {
    let mut order: Vec<String> = Vec::new();
    let mut map: BTreeMap<String, Interface> = BTreeMap::new();
    for entry in entries {
        let name = match &entry {
            IfAddr::V4(n, _) | IfAddr::V6(n, _) | IfAddr::Link(n, _) => n.clone(),
        };
        // Alias labels ("eth0:1") belong to their interface, as `ip addr` shows them.
        let name = name.split(':').next().unwrap_or(&name).to_string();
        let iface = map.entry(name.clone()).or_insert_with(|| {
            order.push(name.clone());
            Interface {
                name: name.clone(),
                ..Interface::default()
            }
        });
        match entry {
            IfAddr::V4(_, a) => iface.v4.push(a),
            IfAddr::V6(_, a) => iface.v6.push(a),
            IfAddr::Link(_, mac) if !mac.is_empty() => {
                iface.hwaddr = Some(
                    mac.iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<Vec<_>>()
                        .join(":"),
                );
            }
            IfAddr::Link(..) => {}
        }
    }
    order.into_iter().filter_map(|n| map.remove(&n)).collect()
}

/// List the addresses of every interface with getifaddrs(3).
#[allow(unsafe_code)]
fn read_ifaddrs() -> Vec<IfAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a pointer to a list it allocates into `head`; on success
    // we walk the list read-only and free it exactly once with freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list returned by getifaddrs, valid until
        // freeifaddrs; each sockaddr is read as the type its sa_family announces, and
        // ifa_name is a NUL-terminated string owned by the list.
        unsafe {
            let ifa = &*cur;
            if !ifa.ifa_addr.is_null() && !ifa.ifa_name.is_null() {
                let name = std::ffi::CStr::from_ptr(ifa.ifa_name)
                    .to_string_lossy()
                    .into_owned();
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        out.push(IfAddr::V4(
                            name,
                            Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                        ));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        out.push(IfAddr::V6(name, Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    libc::AF_PACKET => {
                        let sll = &*(ifa.ifa_addr as *const libc::sockaddr_ll);
                        let len = usize::from(sll.sll_halen).min(sll.sll_addr.len());
                        out.push(IfAddr::Link(name, sll.sll_addr[..len].to_vec()));
                    }
                    _ => {}
                }
            }
            cur = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::payload::get;

    #[test]
    fn server_id_matches_salt() {
        // Observed: minion "m1" has server_id 890885657.
        assert_eq!(server_id("m1"), 890_885_657);
    }

    #[test]
    fn collected_grains_have_the_expected_keys_and_types() {
        let extra = Value::Map(vec![(s("role"), s("web")), (s("os"), s("Overridden"))]);
        let g = grains_collect("m1", &extra, "127.0.0.1");
        let str_keys = [
            "id",
            "host",
            "fqdn",
            "nodename",
            "domain",
            "localhost",
            "os",
            "os_family",
            "osrelease",
            "oscodename",
            "osfullname",
            "osfinger",
            "osarch",
            "kernel",
            "kernelrelease",
            "kernelversion",
            "cpuarch",
            "cpu_model",
            "machine_id",
            "master",
            "saltversion",
            "saltpath",
            "shell",
            "path",
            "username",
            "groupname",
            "init",
            "virtual",
            "brine_version",
            "role",
        ];
        for k in str_keys {
            assert!(
                get(&g, k).is_some_and(Value::is_str),
                "{k} is a string: {:?}",
                get(&g, k)
            );
        }
        let int_keys = [
            "num_cpus",
            "mem_total",
            "swap_total",
            "pid",
            "uid",
            "gid",
            "server_id",
        ];
        for k in int_keys {
            assert!(
                get(&g, k).is_some_and(|v| v.as_u64().is_some()),
                "{k} is an int"
            );
        }
        for k in [
            "ipv4",
            "ipv6",
            "fqdn_ip4",
            "osrelease_info",
            "saltversioninfo",
            "kernelparams",
            "systempath",
        ] {
            assert!(get(&g, k).is_some_and(Value::is_array), "{k} is a list");
        }
        for k in [
            "ip4_interfaces",
            "ip6_interfaces",
            "ip_interfaces",
            "hwaddr_interfaces",
            "locale_info",
        ] {
            assert!(get(&g, k).is_some_and(Value::is_map), "{k} is a map");
        }
        assert_eq!(get(&g, "id"), Some(&s("m1")));
        assert_eq!(get(&g, "master"), Some(&s("127.0.0.1")));
        assert_eq!(get(&g, "os"), Some(&s("Overridden")));
        assert_eq!(get(&g, "role"), Some(&s("web")));
        assert_eq!(get(&g, "saltversion"), Some(&s(SALT_VERSION)));
        assert_eq!(
            get(&g, "saltversioninfo"),
            Some(&Value::Array(vec![Value::from(3007), Value::from(15)]))
        );
        assert_eq!(get(&g, "pid"), Some(&Value::from(std::process::id())));
        let ipv4 = get(&g, "ipv4").unwrap().as_array().unwrap();
        assert!(ipv4.contains(&s("127.0.0.1")), "loopback listed: {ipv4:?}");
        let lo = get(get(&g, "ip4_interfaces").unwrap(), "lo").unwrap();
        assert_eq!(lo, &Value::Array(vec![s("127.0.0.1")]));
        assert_eq!(
            get(get(&g, "hwaddr_interfaces").unwrap(), "lo"),
            Some(&s("00:00:00:00:00:00"))
        );
        let num_cpus = get(&g, "num_cpus").unwrap().as_u64().unwrap();
        assert!(num_cpus >= 1);
    }

    #[test]
    fn os_grains_from_debian_and_ubuntu() {
        let debian = parse_os_release(
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION_CODENAME=bookworm\nID=debian\n",
        );
        let g = Value::Map(
            os_grains(&debian, "Linux", "x86_64")
                .into_iter()
                .map(|(k, v)| (s(k), v))
                .collect(),
        );
        assert_eq!(get(&g, "os"), Some(&s("Debian")));
        assert_eq!(get(&g, "os_family"), Some(&s("Debian")));
        assert_eq!(get(&g, "osfullname"), Some(&s("Debian GNU/Linux")));
        assert_eq!(get(&g, "osfinger"), Some(&s("Debian-12")));
        assert_eq!(get(&g, "osmajorrelease"), Some(&Value::from(12)));
        assert_eq!(
            get(&g, "osrelease_info"),
            Some(&Value::Array(vec![Value::from(12)]))
        );
        assert_eq!(get(&g, "oscodename"), Some(&s("bookworm")));
        assert_eq!(get(&g, "osarch"), Some(&s("amd64")));
        let ubuntu = parse_os_release("NAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\nID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=jammy\n");
        let g = Value::Map(
            os_grains(&ubuntu, "Linux", "aarch64")
                .into_iter()
                .map(|(k, v)| (s(k), v))
                .collect(),
        );
        assert_eq!(get(&g, "os"), Some(&s("Ubuntu")));
        assert_eq!(get(&g, "os_family"), Some(&s("Debian")));
        assert_eq!(get(&g, "osfinger"), Some(&s("Ubuntu-22.04")));
        assert_eq!(
            get(&g, "osrelease_info"),
            Some(&Value::Array(vec![Value::from(22), Value::from(4)]))
        );
        assert_eq!(get(&g, "osarch"), Some(&s("arm64")));
        let rocky = parse_os_release("NAME=\"Rocky Linux\"\nVERSION_ID=\"9.3\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n");
        let g = Value::Map(
            os_grains(&rocky, "Linux", "x86_64")
                .into_iter()
                .map(|(k, v)| (s(k), v))
                .collect(),
        );
        assert_eq!(get(&g, "os"), Some(&s("Rocky")));
        assert_eq!(get(&g, "os_family"), Some(&s("RedHat")));
        assert_eq!(get(&g, "osfinger"), Some(&s("Rocky Linux-9")));
        assert_eq!(get(&g, "osarch"), Some(&s("x86_64")));
    }

    #[test]
    fn hosts_file_lookups() {
        let hosts =
            "127.0.0.1 localhost\n127.0.1.1 web1.example.com web1 # me\n::1 web1.example.com\n";
        assert_eq!(fqdn_from_hosts(hosts, "web1"), "web1.example.com");
        assert_eq!(fqdn_from_hosts(hosts, "other"), "other");
        let (v4, v6) = hosts_addresses(hosts, "web1.example.com");
        assert_eq!(v4, vec![Ipv4Addr::new(127, 0, 1, 1)]);
        assert_eq!(v6, vec![Ipv6Addr::LOCALHOST]);
    }

    #[test]
    fn interfaces_grouped_in_kernel_order() {
        let entries = vec![
            IfAddr::Link("lo".into(), vec![0; 6]),
            IfAddr::Link("eth0".into(), vec![2, 0xfc, 0, 0, 0, 1]),
            IfAddr::V4("lo".into(), Ipv4Addr::LOCALHOST),
            IfAddr::V4("eth0".into(), Ipv4Addr::new(192, 0, 2, 2)),
            IfAddr::V4("eth0:1".into(), Ipv4Addr::new(192, 0, 2, 3)),
            IfAddr::V6("eth0".into(), "fd00::2".parse().unwrap()),
        ];
        let ifs = group_interfaces(entries);
        assert_eq!(ifs.len(), 2);
        assert_eq!(ifs[0].name, "lo");
        assert_eq!(ifs[1].hwaddr.as_deref(), Some("02:fc:00:00:00:01"));
        assert_eq!(
            ifs[1].v4,
            vec![Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(192, 0, 2, 3)]
        );
    }

    #[test]
    fn small_parsers() {
        assert_eq!(
            mem_data("MemTotal:       24683520 kB\nSwapTotal:             0 kB\n"),
            (24105, 0)
        );
        let (n, model, flags) = cpu_data("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu vme\nprocessor\t: 1\nmodel name\t: AMD EPYC\n");
        assert_eq!((n, model.as_str(), flags.len()), (2, "AMD EPYC", 2));
        assert_eq!(
            kernelparams("quiet panic=1"),
            Value::Array(vec![
                Value::Array(vec![s("quiet"), Value::Nil]),
                Value::Array(vec![s("panic"), s("1")]),
            ])
        );
        assert_eq!(tz_abbrev_from_posix("CET-1CEST,M3.5.0,M10.5.0/3"), "CET");
        assert_eq!(tz_abbrev_from_posix("<+03>-3"), "+03");
        assert_eq!(tz_abbrev_from_posix("UTC0"), "UTC");
    }
}
