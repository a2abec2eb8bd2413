//! `ipcidr` targets: an exact address (compared as a string against the `ipv4`/`ipv6`
//! grain lists) or a network (`10.0.0.0/8`; host bits must be zero, as Python's
//! `ipaddress.ip_network` demands) that any grain address falls into.

use std::net::IpAddr;

use rmpv::Value;

use super::pyvalue::py_str;
use super::TargetError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IpTarget {
    Addr(IpAddr),
    Net { base: IpAddr, prefix: u8 },
}

impl IpTarget {
    pub(crate) fn parse(text: &str) -> Result<Self, TargetError> {
        let bad = || TargetError::BadCidr(text.to_owned());
        if let Ok(addr) = text.parse::<IpAddr>() {
            return Ok(IpTarget::Addr(addr));
        }
        let (addr, mask) = text.split_once('/').ok_or_else(bad)?;
        let base: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if base.is_ipv4() { 32 } else { 128 };
        let prefix = if !mask.is_empty() && mask.bytes().all(|b| b.is_ascii_digit()) {
            let p: u32 = mask.parse().map_err(|_| bad())?;
            if p > max {
                return Err(bad());
            }
            p as u8
        } else {
            netmask_prefix(&base, mask).ok_or_else(bad)?
        };
        if bits(&base) & !mask_bits(prefix, max) != 0 {
            // Python: "has host bits set".
            return Err(bad());
        }
        Ok(IpTarget::Net { base, prefix })
    }

    /// The grain holding addresses of this family.
    pub(crate) fn grain_name(&self) -> &'static str {
        let v4 = match self {
            IpTarget::Addr(a) => a.is_ipv4(),
            IpTarget::Net { base, .. } => base.is_ipv4(),
        };
        if v4 {
            "ipv4"
        } else {
            "ipv6"
        }
    }

    /// Does the minion whose grains are `grains` match?
    pub(crate) fn matches_grains(&self, grains: &Value) -> bool {
        let Some(addrs) = grains.as_map().and_then(|pairs| {
            pairs
                .iter()
                .find(|(k, _)| k.as_str() == Some(self.grain_name()))
                .map(|(_, v)| v)
        }) else {
            return false;
        };
        match self {
            IpTarget::Addr(addr) => {
                let wanted = addr.to_string();
                match addrs {
                    Value::Array(items) => items.iter().any(|i| i.as_str() == Some(&wanted)),
                    // Python's `in` on a string grain is a substring test.
                    Value::String(_) => py_str(addrs).contains(&wanted),
                    _ => false,
                }
            }
            IpTarget::Net { base, prefix } => {
                let one;
                let items: &[Value] = match addrs {
                    Value::Array(items) => items,
                    other => {
                        one = [other.clone()];
                        &one
                    }
                };
                items.iter().any(|item| {
                    item.as_str()
                        .and_then(|s| s.parse::<IpAddr>().ok())
                        .is_some_and(|ip| in_net(&ip, base, *prefix))
                })
            }
        }
    }
}

fn bits(a: &IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from(u32::from(*v4)),
        IpAddr::V6(v6) => u128::from(*v6),
    }
}

fn mask_bits(prefix: u8, max: u32) -> u128 {
    if prefix == 0 {
        return 0;
    }
    let all: u128 = if max == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    all & !((1u128 << (max - u32::from(prefix))) - 1)
}

fn in_net(ip: &IpAddr, base: &IpAddr, prefix: u8) -> bool {
    if ip.is_ipv4() != base.is_ipv4() {
        return false;
    }
    let max = if base.is_ipv4() { 32 } else { 128 };
    let m = mask_bits(prefix, max);
    bits(ip) & m == bits(base) & m
}

/// IPv4 netmask (`255.255.0.0`) or hostmask (`0.0.255.255`) to a prefix length.
fn netmask_prefix(base: &IpAddr, mask: &str) -> Option<u8> {
    if !base.is_ipv4() {
        return None;
    }
    let m = u32::from(mask.parse::<std::net::Ipv4Addr>().ok()?);
    let ones = m.leading_ones();
    if m.checked_shl(ones).unwrap_or(0) == 0 {
        return Some(ones as u8);
    }
    let inv = !m;
    let ones = inv.leading_ones();
    if inv.checked_shl(ones).unwrap_or(0) == 0 {
        return Some(ones as u8);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grains(v4: &[&str], v6: &[&str]) -> Value {
        let list = |xs: &[&str]| Value::Array(xs.iter().map(|s| Value::from(*s)).collect());
        Value::Map(vec![
            (Value::from("ipv4"), list(v4)),
            (Value::from("ipv6"), list(v6)),
        ])
    }

    #[test]
    fn parses_addresses_and_networks() {
        assert_eq!(
            IpTarget::parse("127.0.0.1").unwrap(),
            IpTarget::Addr("127.0.0.1".parse().unwrap())
        );
        assert!(matches!(
            IpTarget::parse("10.0.0.0/8").unwrap(),
            IpTarget::Net { prefix: 8, .. }
        ));
        assert!(matches!(
            IpTarget::parse("10.0.0.0/255.0.0.0").unwrap(),
            IpTarget::Net { prefix: 8, .. }
        ));
        assert!(matches!(
            IpTarget::parse("10.0.0.0/0.255.255.255").unwrap(),
            IpTarget::Net { prefix: 8, .. }
        ));
        assert!(matches!(
            IpTarget::parse("fd00::/8").unwrap(),
            IpTarget::Net { prefix: 8, .. }
        ));
        for bad in [
            "10.0.0.1/8",
            "10.0.0.0/33",
            "nonsense",
            "10.0.0.0/",
            "10.0.0.0/255.0.255.0",
            "300.1.1.1",
            "",
        ] {
            assert!(
                matches!(IpTarget::parse(bad), Err(TargetError::BadCidr(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn address_is_exact_membership() {
        let g = grains(&["127.0.0.1", "10.1.2.3"], &["::1"]);
        assert!(IpTarget::parse("10.1.2.3").unwrap().matches_grains(&g));
        assert!(!IpTarget::parse("10.1.2.4").unwrap().matches_grains(&g));
        assert!(IpTarget::parse("::1").unwrap().matches_grains(&g));
        assert!(
            IpTarget::parse("0:0::1").unwrap().matches_grains(&g),
            "canonical form"
        );
    }

    #[test]
    fn network_membership() {
        let g = grains(&["127.0.0.1", "10.1.2.3"], &["fe80::1"]);
        assert!(IpTarget::parse("10.0.0.0/8").unwrap().matches_grains(&g));
        assert!(IpTarget::parse("10.1.2.0/24").unwrap().matches_grains(&g));
        assert!(!IpTarget::parse("192.168.0.0/16")
            .unwrap()
            .matches_grains(&g));
        assert!(IpTarget::parse("0.0.0.0/0").unwrap().matches_grains(&g));
        assert!(IpTarget::parse("fe80::/10").unwrap().matches_grains(&g));
        assert!(!IpTarget::parse("fd00::/8").unwrap().matches_grains(&g));
        assert!(IpTarget::parse("10.1.2.3/32").unwrap().matches_grains(&g));
    }

    #[test]
    fn missing_or_odd_grains() {
        let none = Value::Map(vec![]);
        assert!(!IpTarget::parse("127.0.0.1").unwrap().matches_grains(&none));
        assert!(!IpTarget::parse("10.0.0.0/8")
            .unwrap()
            .matches_grains(&Value::Nil));
        let junk = grains(&["not-an-ip", "10.9.9.9"], &[]);
        assert!(IpTarget::parse("10.0.0.0/8").unwrap().matches_grains(&junk));
        let single = Value::Map(vec![(Value::from("ipv4"), Value::from("10.0.0.7"))]);
        assert!(IpTarget::parse("10.0.0.0/8")
            .unwrap()
            .matches_grains(&single));
    }
}
