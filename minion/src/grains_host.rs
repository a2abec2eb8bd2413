//! Core grains about the host's hardware and services that Salt's `core`, `disks`, `zfs`
//! and `extra` grain modules compute on Linux: disks and SSDs, DNS resolver settings, default
//! gateways, EFI, fibre channel, GPUs, systemd, ZFS, transactional systems, the `ps` command
//! and the ZeroMQ version.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::process::Command;

use rmpv::Value;

fn strings<I: IntoIterator<Item = String>>(items: I) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

/// Whether `name` is an executable on `PATH` (or in the usual system directories).
fn which(name: &str) -> bool {
    brine_render::which(name).is_some()
}

/// Every grain of this module, in Salt's names.
pub fn host_grains() -> Vec<(String, Value)> {
    let mut g: Vec<(String, Value)> = Vec::new();
    let (disks, ssds) = disks(Path::new("/sys/block"));
    g.push(("disks".into(), strings(disks)));
    g.push(("ssds".into(), strings(ssds)));
    g.push((
        "dns".into(),
        dns(&std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default()),
    ));
    let efi = Path::new("/sys/firmware/efi/systab").exists();
    g.push(("efi".into(), Value::from(efi)));
    g.push(("efi-secure-boot".into(), Value::from(efi && secure_boot())));
    g.push((
        "fibre_channel_host".into(),
        Value::from(Path::new("/sys/class/fc_host").is_dir()),
    ));
    let gpus = gpus();
    g.push(("num_gpus".into(), Value::from(gpus.len() as u64)));
    g.push(("gpus".into(), Value::Array(gpus)));
    g.extend(gateways(
        &std::fs::read_to_string("/proc/net/route").unwrap_or_default(),
        &std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default(),
    ));
    g.push(("ps".into(), Value::from("ps -efHww")));
    if let Some(systemd) = systemd() {
        g.push(("systemd".into(), systemd));
    }
    g.push((
        "transactional".into(),
        Value::from(which("transactional-update")),
    ));
    let zfs = which("zpool") && (Path::new("/sys/module/zfs").exists() || which("zfs-fuse"));
    g.push(("zfs_support".into(), Value::from(zfs)));
    g.push((
        "zfs_feature_flags".into(),
        Value::from(which("man") && command_ok("man", &["zpool-features"])),
    ));
    let (major, minor, patch) = zmq::version();
    g.push((
        "zmqversion".into(),
        Value::from(format!("{major}.{minor}.{patch}")),
    ));
    g
}

fn command_ok(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Block devices that are not virtual, as disks (rotational) or SSDs (not rotational).
fn disks(sys_block: &Path) -> (Vec<String>, Vec<String>) {
    let (mut disks, mut ssds) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(sys_block) else {
        return (disks, ssds);
    };
    let mut names: Vec<_> = entries.flatten().collect();
    names.sort_by_key(|e| e.file_name());
    for entry in names {
        let virtual_ = std::fs::read_link(entry.path())
            .map(|t| t.to_string_lossy().starts_with("../devices/virtual/"))
            .unwrap_or(false);
        if virtual_ {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        match std::fs::read_to_string(entry.path().join("queue/rotational"))
            .ok()
            .and_then(|t| t.chars().next())
        {
            Some('0') => ssds.push(name),
            Some('1') => disks.push(name),
            _ => {}
        }
    }
    (disks, ssds)
}

/// Salt's `parse_resolv` of /etc/resolv.conf.
fn dns(text: &str) -> Value {
    let (mut ns4, mut ns6) = (Vec::new(), Vec::new());
    let mut nameservers = Vec::new();
    let (mut search, mut sortlist, mut options) = (Vec::new(), Vec::new(), Vec::new());
    let mut domain = String::new();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or_default().trim();
        let mut words = line.split_whitespace();
        let (Some(key), rest) = (words.next(), words.collect::<Vec<_>>()) else {
            continue;
        };
        match key {
            "nameserver" => {
                if let Some(addr) = rest.first() {
                    if let Ok(ip) = addr.parse::<Ipv4Addr>() {
                        ns4.push(ip.to_string());
                        nameservers.push(ip.to_string());
                    } else if let Ok(ip) = addr.parse::<Ipv6Addr>() {
                        ns6.push(ip.to_string());
                        nameservers.push(ip.to_string());
                    }
                }
            }
            "domain" => domain = rest.first().map(|d| d.to_string()).unwrap_or_default(),
            "search" => search = rest.iter().map(|s| s.to_string()).collect(),
            "sortlist" => sortlist = rest.iter().map(|s| s.to_string()).collect(),
            "options" => options.extend(rest.iter().map(|s| s.to_string())),
            _ => {}
        }
    }
    Value::Map(vec![
        (Value::from("nameservers"), strings(nameservers)),
        (Value::from("ip4_nameservers"), strings(ns4)),
        (Value::from("ip6_nameservers"), strings(ns6)),
        (Value::from("sortlist"), strings(sortlist)),
        (Value::from("domain"), Value::from(domain)),
        (Value::from("search"), strings(search)),
        (Value::from("options"), strings(options)),
    ])
}

/// The SecureBoot EFI variable is set (its last byte is 1).
fn secure_boot() -> bool {
    let Ok(dir) = std::fs::read_dir("/sys/firmware/efi/efivars") else {
        return false;
    };
    dir.flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("SecureBoot-"))
        .and_then(|e| std::fs::read(e.path()).ok())
        .and_then(|b| b.last().copied())
        == Some(1)
}

/// GPUs from `lspci -vmm` (display controllers), as `{vendor, model}`; none without lspci.
fn gpus() -> Vec<Value> {
    if !which("lspci") {
        return Vec::new();
    }
    let Ok(out) = Command::new("lspci").arg("-vmm").output() else {
        return Vec::new();
    };
    parse_lspci(&String::from_utf8_lossy(&out.stdout))
}

fn parse_lspci(text: &str) -> Vec<Value> {
    const KNOWN: &[&str] = &[
        "nvidia",
        "amd",
        "ati",
        "intel",
        "cirrus logic",
        "vmware",
        "matrox",
        "aspeed",
    ];
    let mut gpus = Vec::new();
    for block in text.split("\n\n") {
        let field = |name: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|r| r.strip_prefix(':'))
                    .map(|v| v.trim().to_string())
            })
        };
        let class = field("Class").unwrap_or_default();
        if !["VGA", "3D", "Display"].iter().any(|c| class.contains(c)) {
            continue;
        }
        let vendor_text = field("Vendor").unwrap_or_default().to_lowercase();
        let vendor = KNOWN
            .iter()
            .find(|k| vendor_text.contains(*k))
            .map_or("unknown".to_string(), |k| k.to_string());
        gpus.push(Value::Map(vec![
            (Value::from("vendor"), Value::from(vendor)),
            (
                Value::from("model"),
                Value::from(field("Device").unwrap_or_default()),
            ),
        ]));
    }
    gpus
}

/// `ip_gw`, `ip4_gw`, `ip6_gw` from the kernel's routing tables: the first default route's
/// gateway address, `true` for a default route without one, `false` for none.
fn gateways(route4: &str, route6: &str) -> Vec<(String, Value)> {
    let v4 = route4.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000").then(|| {
            let gw = u32::from_str_radix(f[2], 16).unwrap_or(0);
            if gw == 0 {
                Value::Boolean(true)
            } else {
                Value::from(Ipv4Addr::from(gw.swap_bytes()).to_string())
            }
        })
    });
    let v6 = route6.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // dest dest_plen src src_plen next_hop metric refcnt use flags iface
        let unspecified = "0".repeat(32);
        (f.len() > 9 && f[0] == unspecified && f[1] == "00" && f[9] != "lo").then(|| {
            match u128::from_str_radix(f[4], 16) {
                Ok(0) | Err(_) => Value::Boolean(true),
                Ok(gw) => Value::from(Ipv6Addr::from(gw).to_string()),
            }
        })
    });
    let any = v4.is_some() || v6.is_some();
    vec![
        ("ip4_gw".into(), v4.unwrap_or(Value::Boolean(false))),
        ("ip6_gw".into(), v6.unwrap_or(Value::Boolean(false))),
        ("ip_gw".into(), Value::Boolean(any)),
    ]
}

/// `{version, features}` from `systemctl --version`, when systemd is there.
fn systemd() -> Option<Value> {
    if !which("systemctl") {
        return None;
    }
    let out = Command::new("systemctl").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let version = lines.next()?.split_whitespace().nth(1)?.to_string();
    let features = lines.next().unwrap_or_default().trim().to_string();
    Some(Value::Map(vec![
        (Value::from("version"), Value::from(version)),
        (Value::from("features"), Value::from(features)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_as_salt_parses_it() {
        let v = dns("# comment\nnameserver 10.0.0.53\nnameserver fd00::53\nsearch a.example b.example\noptions ndots:2 rotate\ndomain a.example\n");
        let get = |k: &str| {
            v.as_map()
                .unwrap()
                .iter()
                .find(|(key, _)| key.as_str() == Some(k))
                .map(|(_, v)| v.clone())
                .unwrap()
        };
        assert_eq!(
            get("nameservers"),
            strings(["10.0.0.53".into(), "fd00::53".into()])
        );
        assert_eq!(get("ip4_nameservers"), strings(["10.0.0.53".into()]));
        assert_eq!(get("ip6_nameservers"), strings(["fd00::53".into()]));
        assert_eq!(
            get("search"),
            strings(["a.example".into(), "b.example".into()])
        );
        assert_eq!(get("options"), strings(["ndots:2".into(), "rotate".into()]));
        assert_eq!(get("domain"), Value::from("a.example"));
    }

    #[test]
    fn default_gateways_from_the_routing_tables() {
        let route4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\neth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\neth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let route6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n";
        assert_eq!(
            gateways(route4, route6),
            vec![
                ("ip4_gw".to_string(), Value::from("192.0.2.1")),
                ("ip6_gw".to_string(), Value::from("fd00::1")),
                ("ip_gw".to_string(), Value::Boolean(true)),
            ]
        );
        assert_eq!(
            gateways("Iface\tDestination\n", ""),
            vec![
                ("ip4_gw".to_string(), Value::Boolean(false)),
                ("ip6_gw".to_string(), Value::Boolean(false)),
                ("ip_gw".to_string(), Value::Boolean(false)),
            ]
        );
    }

    #[test]
    fn display_controllers_from_lspci() {
        let text = "Slot:\t00:01.0\nClass:\tVGA compatible controller\nVendor:\tNVIDIA Corporation\nDevice:\tGA102\n\nSlot:\t00:02.0\nClass:\tEthernet controller\nVendor:\tIntel Corporation\nDevice:\tI350\n";
        assert_eq!(
            parse_lspci(text),
            vec![Value::Map(vec![
                (Value::from("vendor"), Value::from("nvidia")),
                (Value::from("model"), Value::from("GA102")),
            ])]
        );
    }
}
