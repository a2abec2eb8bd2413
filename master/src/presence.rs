//! Which peers hold a connection to the publish port, read from `/proc/net/tcp{,6}` as Salt
//! does, for `manage.present` and `minions.connected`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Remote addresses of established TCP connections whose local port is `port`.
pub fn publish_peers(port: u16) -> Vec<String> {
    let mut out = publish_connections(port);
    out.sort();
    out.dedup();
    out
}

/// The peer address of every established TCP connection whose local port is `port` (one per
/// connected minion).
pub fn publish_connections(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        out.extend(parse_proc_net_tcp(&text, port, v6));
    }
    out
}

fn parse_proc_net_tcp(text: &str, port: u16, v6: bool) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 4 || cols[3] != "01" {
            continue;
        }
        let (Some(local), Some(remote)) = (cols[1].split_once(':'), cols[2].split_once(':')) else {
            continue;
        };
        if u16::from_str_radix(local.1, 16).ok() != Some(port) {
            continue;
        }
        if let Some(ip) = decode_addr(remote.0, v6) {
            out.push(ip.to_string());
        }
    }
    out
}

/// Addresses in /proc/net/tcp are hex of the in-kernel (little-endian per 32-bit word) bytes.
fn decode_addr(hex: &str, v6: bool) -> Option<IpAddr> {
    let words: Vec<u32> = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    if !v6 && bytes.len() == 4 {
        return Some(IpAddr::V4(Ipv4Addr::new(
            bytes[0], bytes[1], bytes[2], bytes[3],
        )));
    }
    if v6 && bytes.len() == 16 {
        let mut b = [0u8; 16];
        b.copy_from_slice(&bytes);
        let a = Ipv6Addr::from(b);
        return Some(match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(a),
        });
    }
    None
}

pub fn is_loopback(ip: &str) -> bool {
    ip.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_established_peers() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1199 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1199 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1234 0100007F:1199 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0";
        assert_eq!(parse_proc_net_tcp(text, 0x1199, false), vec!["127.0.0.1"]);
        let t6 =
            "  sl  local_address                         remote_address                        st
   0: 0000000000000000FFFF00000100007F:1199 0000000000000000FFFF00000100007F:A1B2 01 0";
        assert_eq!(parse_proc_net_tcp(t6, 0x1199, true), vec!["127.0.0.1"]);
        assert!(is_loopback("::1") && is_loopback("127.0.0.1") && !is_loopback("10.0.0.1"));
    }
}
