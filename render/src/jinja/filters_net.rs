//! Salt's network filters (`salt/utils/network.py`): addresses, networks and MAC addresses.
//!
//! Addresses are read as Python's `ipaddress` module (3.11) reads them: strict dotted quads,
//! IPv6 with `::`, an IPv4 tail and a `%scope`, integers, `addr/prefix` with a prefix length,
//! netmask or hostmask. They print as it prints them (IPv6 compressed, lower case).

use std::fmt;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use minijinja::value::{Kwargs, Object, ObjectRepr, Rest, Value, ValueKind};
use minijinja::{Environment, Error};

use super::objects::{map_entries, seq_items, Dict, List};
use super::pyargs::{bad, bind_kw, py_isspace, py_iter_or_err as py_iter, py_type};
use super::pyfmt;

/// The most hosts `network_hosts` lists for one network. Salt would build the list whatever
/// its size (an IPv6 /64 never ends); a larger network is refused.
const MAX_HOSTS: u128 = 1 << 20;

pub(crate) fn register(env: &mut Environment<'_>) {
    env.add_filter("is_ip", |v: Value, args: Args, kw: Kwargs| {
        let options = option_arg("is_ip_filter", &args, &kw)?;
        Ok::<_, Error>(is_ipv(&v, 4, &options)?.is_some() || is_ipv(&v, 6, &options)?.is_some())
    });
    env.add_filter("is_ipv4", |v: Value, args: Args, kw: Kwargs| {
        let options = option_arg("is_ipv4_filter", &args, &kw)?;
        Ok::<_, Error>(is_ipv(&v, 4, &options)?.is_some())
    });
    env.add_filter("is_ipv6", |v: Value, args: Args, kw: Kwargs| {
        let options = option_arg("is_ipv6_filter", &args, &kw)?;
        Ok::<_, Error>(is_ipv(&v, 6, &options)?.is_some())
    });
    env.add_filter("ipv4", |v: Value, args: Args, kw: Kwargs| {
        let options = option_arg("ipv4", &args, &kw)?;
        Ok::<_, Error>(picked_value(ipv_filter(&v, 4, &options)?))
    });
    env.add_filter("ipv6", |v: Value, args: Args, kw: Kwargs| {
        let options = option_arg("ipv6", &args, &kw)?;
        Ok::<_, Error>(picked_value(ipv_filter(&v, 6, &options)?))
    });
    env.add_filter("ipaddr", |v: Value, args: Args, kw: Kwargs| {
        let options = option_arg("ipaddr", &args, &kw)?;
        Ok::<_, Error>(picked_value(ipaddr(&v, &options)?))
    });
    env.add_filter("ip_host", |v: Value, args: Args, kw: Kwargs| {
        per_ip("ip_host", &v, &args, &kw, |ip| {
            Ok(Value::from(ip.interface_str()))
        })
    });
    env.add_filter("network_hosts", |v: Value, args: Args, kw: Kwargs| {
        per_ip("network_hosts", &v, &args, &kw, |ip| {
            Ok(List::value(
                hosts(ip)?.into_iter().map(Value::from).collect(),
            ))
        })
    });
    env.add_filter("network_size", |v: Value, args: Args, kw: Kwargs| {
        per_ip("network_size", &v, &args, &kw, |ip| Ok(network_size(ip)))
    });
    env.add_filter("ipwrap", ipwrap);
    env.add_filter("filter_by_networks", filter_by_networks);
    env.add_filter("gen_mac", gen_mac);
    env.add_filter("mac_str_to_bytes", |v: Value, args: Args, kw: Kwargs| {
        let [] = bind_kw("mac_str_to_bytes", &args, &kw, [], 0)?;
        mac_str_to_bytes(&v).map(Value::from_bytes)
    });
    env.add_filter("dns_check", dns_check);
}

/// The positional arguments after the filtered value (keyword ones come as `Kwargs`).
type Args = Rest<Value>;

// --- arguments --------------------------------------------------------------------------------

/// The `options` argument of the address filters (`None` by default).
fn option_arg(func: &str, args: &[Value], kw: &Kwargs) -> Result<Value, Error> {
    let [options] = bind_kw(func, args, kw, ["options"], 0)?;
    Ok(options.unwrap_or_default())
}

/// A Python `int` (a `bool` is one): `Some(None)` when it is negative or too large for an
/// address.
fn py_int(v: &Value) -> Option<Option<u128>> {
    match v.kind() {
        ValueKind::Bool => Some(Some(u128::from(v.is_true()))),
        ValueKind::Number if v.is_integer() => Some(u128::try_from(v.clone()).ok()),
        _ => None,
    }
}

/// A `list`, `tuple` or generator: what the filters take as several values.
fn is_seq(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
}

/// The bytes of a Python `bytes` value.
fn py_bytes(v: &Value) -> Option<&[u8]> {
    match v.kind() {
        ValueKind::Bytes => v.as_bytes(),
        _ => None,
    }
}

// --- addresses ----------------------------------------------------------------------------------

/// One IPv4 or IPv6 address (an IPv6 one with its `%scope`, if any).
#[derive(Clone, Debug, PartialEq)]
struct Addr {
    v6: bool,
    bits: u128,
    scope: Option<String>,
}

/// An address (`ipaddress.ip_address`) or, with a prefix length, an interface
/// (`ipaddress.ip_interface`: an address on its network).
#[derive(Clone, Debug, PartialEq)]
struct Ip {
    addr: Addr,
    prefix: Option<u32>,
}

/// A network (`ipaddress.ip_network`): its address with no host bits, and its prefix length.
#[derive(Clone, Debug, PartialEq)]
struct Net {
    v6: bool,
    bits: u128,
    prefix: u32,
}

fn max_prefix(v6: bool) -> u32 {
    if v6 {
        128
    } else {
        32
    }
}

fn all_ones(v6: bool) -> u128 {
    if v6 {
        u128::MAX
    } else {
        u128::from(u32::MAX)
    }
}

/// The netmask of a prefix length.
fn netmask(v6: bool, prefix: u32) -> u128 {
    all_ones(v6) ^ all_ones(v6).checked_shr(prefix).unwrap_or(0)
}

impl Addr {
    fn new(v6: bool, bits: u128) -> Addr {
        Addr {
            v6,
            bits,
            scope: None,
        }
    }

    /// `ip_address` of an integer: IPv4 below 2**32.
    fn from_int(n: u128) -> Addr {
        Addr::new(n > u128::from(u32::MAX), n)
    }

    fn version(&self) -> u8 {
        if self.v6 {
            6
        } else {
            4
        }
    }

    fn in_net(&self, net: &str) -> bool {
        parse_network_str(net).is_ok_and(|net| net.contains(self))
    }

    fn in_any(&self, nets: &[&str]) -> bool {
        nets.iter().any(|net| self.in_net(net))
    }

    fn is_private(&self) -> bool {
        if !self.v6 {
            return self.in_any(&[
                "0.0.0.0/8",
                "10.0.0.0/8",
                "127.0.0.0/8",
                "169.254.0.0/16",
                "172.16.0.0/12",
                "192.0.0.0/29",
                "192.0.0.170/31",
                "192.0.2.0/24",
                "192.168.0.0/16",
                "198.18.0.0/15",
                "198.51.100.0/24",
                "203.0.113.0/24",
                "240.0.0.0/4",
                "255.255.255.255/32",
            ]);
        }
        if self.bits >> 32 == 0xffff {
            // An IPv4-mapped address is private as its IPv4 address is.
            return Addr::from_int(self.bits & u128::from(u32::MAX)).is_private();
        }
        self.in_any(&[
            "::1/128",
            "::/128",
            "::ffff:0:0/96",
            "100::/64",
            "2001::/23",
            "2001:2::/48",
            "2001:db8::/32",
            "2001:10::/28",
            "fc00::/7",
            "fe80::/10",
        ])
    }

    fn is_reserved(&self) -> bool {
        if !self.v6 {
            return self.in_net("240.0.0.0/4");
        }
        self.in_any(&[
            "::/8", "100::/8", "200::/7", "400::/6", "800::/5", "1000::/4", "4000::/3", "6000::/3",
            "8000::/3", "a000::/3", "c000::/3", "e000::/4", "f000::/5", "f800::/6", "fe00::/9",
        ])
    }

    /// One of Salt's `options` (`None` for a name Salt ignores).
    fn has(&self, option: &str) -> Option<bool> {
        let v6 = self.v6;
        Some(match option {
            "global" | "public" => !self.is_private(),
            "link-local" | "linklocal" | "ll" | "link_local" => {
                self.in_net(if v6 { "fe80::/10" } else { "169.254.0.0/16" })
            }
            "loopback" | "lo" => {
                if v6 {
                    self.bits == 1
                } else {
                    self.in_net("127.0.0.0/8")
                }
            }
            "multicast" => self.in_net(if v6 { "ff00::/8" } else { "224.0.0.0/4" }),
            "private" => self.is_private(),
            "reserved" => self.is_reserved(),
            "site-local" | "sl" | "site_local" => v6 && self.in_net("fec0::/10"),
            "unspecified" => self.bits == 0,
            _ => return None,
        })
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.v6 {
            let [a, b, c, d] = (self.bits as u32).to_be_bytes();
            return write!(f, "{a}.{b}.{c}.{d}");
        }
        let hextets: Vec<u16> = (0..8)
            .map(|i| (self.bits >> (112 - 16 * i)) as u16)
            .collect();
        // The first longest run of two or more zero hextets becomes `::`.
        let (mut best, mut best_len, mut start, mut len) = (0, 0, 0, 0);
        for (i, h) in hextets.iter().enumerate() {
            if *h == 0 {
                if len == 0 {
                    start = i;
                }
                len += 1;
                if len > best_len {
                    (best, best_len) = (start, len);
                }
            } else {
                len = 0;
            }
        }
        let join = |hs: &[u16]| {
            hs.iter()
                .map(|h| format!("{h:x}"))
                .collect::<Vec<_>>()
                .join(":")
        };
        if best_len > 1 {
            write!(
                f,
                "{}::{}",
                join(&hextets[..best]),
                join(&hextets[best + best_len..])
            )?;
        } else {
            f.write_str(&join(&hextets))?;
        }
        match &self.scope {
            Some(scope) => write!(f, "%{scope}"),
            None => Ok(()),
        }
    }
}

impl Ip {
    /// Salt's options: whether each one named in the comma separated list holds.
    fn has_all(&self, options: &str) -> bool {
        options.split(',').all(|option| {
            let option = option.trim_matches(py_isspace);
            match option {
                // An IPv4 interface is never unspecified (`ipaddress` compares it, network
                // and all, to 0.0.0.0); an IPv6 one is unspecified or loopback only as a /128.
                "unspecified" if !self.addr.v6 && self.prefix.is_some() => false,
                "unspecified" | "loopback" | "lo" if self.addr.v6 && self.prefix.is_some() => {
                    self.prefix == Some(128) && self.addr.has(option) == Some(true)
                }
                _ => self.addr.has(option) != Some(false),
            }
        })
    }

    /// `str(ipaddress.ip_interface(...))`: the address with its prefix length.
    fn interface_str(&self) -> String {
        let prefix = self.prefix.unwrap_or(max_prefix(self.addr.v6));
        format!("{}/{prefix}", self.addr)
    }
}

impl fmt::Display for Ip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix {
            Some(prefix) => write!(f, "{}/{prefix}", self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

impl Net {
    fn contains(&self, addr: &Addr) -> bool {
        self.v6 == addr.v6 && addr.bits & netmask(self.v6, self.prefix) == self.bits
    }
}

/// A dotted quad as Python reads one: four decimal octets, no leading zeros.
fn parse_v4(s: &str) -> Option<u32> {
    let octets: Vec<&str> = s.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut bits = 0u32;
    for octet in octets {
        if octet.is_empty()
            || octet.len() > 3
            || !octet.bytes().all(|b| b.is_ascii_digit())
            || (octet != "0" && octet.starts_with('0'))
        {
            return None;
        }
        let n: u32 = octet.parse().ok()?;
        if n > 255 {
            return None;
        }
        bits = bits << 8 | n;
    }
    Some(bits)
}

/// An IPv6 address (no scope) as Python reads one.
fn parse_v6(s: &str) -> Option<u128> {
    if s.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = s.split(':').map(str::to_string).collect();
    if parts.len() < 3 {
        return None;
    }
    if parts.last().is_some_and(|last| last.contains('.')) {
        let v4 = parse_v4(&parts.pop().unwrap_or_default())?;
        parts.push(format!("{:x}", v4 >> 16));
        parts.push(format!("{:x}", v4 & 0xffff));
    }
    let n = parts.len();
    if n > 9 {
        return None;
    }
    let mut skip = None;
    for (i, part) in parts.iter().enumerate().take(n - 1).skip(1) {
        if part.is_empty() {
            if skip.is_some() {
                return None;
            }
            skip = Some(i);
        }
    }
    let (hi, lo, skipped) = match skip {
        Some(at) => {
            let (mut hi, mut lo) = (at, n - at - 1);
            if parts[0].is_empty() {
                hi -= 1;
                if hi != 0 {
                    return None;
                }
            }
            if parts[n - 1].is_empty() {
                lo -= 1;
                if lo != 0 {
                    return None;
                }
            }
            if hi + lo > 7 {
                return None;
            }
            (hi, lo, 8 - hi - lo)
        }
        None => {
            if n != 8 || parts[0].is_empty() || parts[n - 1].is_empty() {
                return None;
            }
            (n, 0, 0)
        }
    };
    let hextet = |h: &str| -> Option<u128> {
        if h.is_empty() || h.len() > 4 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(h, 16).ok()
    };
    let mut bits = 0u128;
    for part in &parts[..hi] {
        bits = bits << 16 | hextet(part)?;
    }
    bits = bits.checked_shl(16 * skipped as u32).unwrap_or(0);
    for part in &parts[n - lo..] {
        bits = bits << 16 | hextet(part)?;
    }
    Some(bits)
}

/// An IPv6 address with an optional `%scope`, and no `/`.
fn parse_v6_scoped(s: &str) -> Option<Addr> {
    if s.contains('/') {
        return None;
    }
    let (addr, scope) = match s.split_once('%') {
        None => (s, None),
        Some((_, scope)) if scope.is_empty() || scope.contains('%') => return None,
        Some((addr, scope)) => (addr, Some(scope.to_string())),
    };
    Some(Addr {
        v6: true,
        bits: parse_v6(addr)?,
        scope,
    })
}

/// `ipaddress.ip_address` of a string.
fn address_str(s: &str) -> Option<Addr> {
    match parse_v4(s) {
        Some(bits) => Some(Addr::new(false, u128::from(bits))),
        None => parse_v6_scoped(s),
    }
}

/// A packed address: 4 or 16 bytes.
fn address_packed(bytes: &[u8]) -> Option<Addr> {
    let bits = bytes.iter().fold(0u128, |acc, b| acc << 8 | u128::from(*b));
    match bytes.len() {
        4 => Some(Addr::new(false, bits)),
        16 => Some(Addr::new(true, bits)),
        _ => None,
    }
}

/// `ipaddress.ip_address(v)`, or `None` where it raises `ValueError`.
fn ip_address(v: &Value) -> Option<Addr> {
    if let Some(int) = py_int(v) {
        return int.map(Addr::from_int);
    }
    if let Some(bytes) = py_bytes(v) {
        return address_packed(bytes);
    }
    address_str(v.as_str()?)
}

/// The prefix length of an IPv4 mask: a length, a netmask or a hostmask.
fn v4_prefix(mask: &str) -> Option<u32> {
    if !mask.is_empty() && mask.bytes().all(|b| b.is_ascii_digit()) {
        return mask.parse::<u32>().ok().filter(|p| *p <= 32);
    }
    let bits = parse_v4(mask)?;
    let from_mask = |x: u32| {
        let zeros = x.trailing_zeros();
        let prefix = 32 - zeros;
        let ones = x.checked_shr(zeros).unwrap_or(0);
        (u64::from(ones) == (1u64 << prefix) - 1).then_some(prefix)
    };
    from_mask(bits).or_else(|| from_mask(!bits))
}

/// The prefix length of an IPv6 mask: a length only.
fn v6_prefix(mask: &str) -> Option<u32> {
    if mask.is_empty() || !mask.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    mask.parse::<u32>().ok().filter(|p| *p <= 128)
}

/// A prefix given as a number (in an `(address, prefix)` tuple).
fn int_prefix(v: &Value, v6: bool) -> Option<u32> {
    match py_int(v) {
        Some(n) => n
            .and_then(|n| u32::try_from(n).ok())
            .filter(|p| *p <= max_prefix(v6)),
        None if v6 => v6_prefix(v.as_str()?),
        None => v4_prefix(v.as_str()?),
    }
}

/// `addr/mask` parts as an IPv4 then an IPv6 (address, prefix length).
fn split_prefixed(addr: &Value, mask: Option<&Value>) -> Option<(Addr, u32)> {
    let int = py_int(addr);
    let text = addr.as_str();
    let v4 = match (int, text) {
        (Some(n), _) => n
            .filter(|n| *n <= u128::from(u32::MAX))
            .map(|bits| Addr::new(false, bits)),
        (None, Some(s)) => parse_v4(s).map(|bits| Addr::new(false, u128::from(bits))),
        _ => None,
    };
    if let Some(v4) = v4 {
        let prefix = mask.map_or(Some(32), |m| int_prefix(m, false));
        if let Some(prefix) = prefix {
            return Some((v4, prefix));
        }
    }
    let v6 = match (int, text) {
        (Some(n), _) => Some(Addr::new(true, n?)),
        (None, Some(s)) => parse_v6_scoped(s),
        _ => None,
    }?;
    let prefix = mask.map_or(Some(128), |m| int_prefix(m, true))?;
    Some((v6, prefix))
}

/// The (address, prefix length) of what `ip_interface`/`ip_network` take: an integer, a string
/// with an optional `/mask`, or an `(address, mask)` tuple.
fn prefixed(v: &Value) -> Option<(Addr, u32)> {
    if let Some(int) = py_int(v) {
        let addr = Addr::from_int(int?);
        let prefix = max_prefix(addr.v6);
        return Some((addr, prefix));
    }
    if let Some(bytes) = py_bytes(v) {
        let addr = address_packed(bytes)?;
        let prefix = max_prefix(addr.v6);
        return Some((addr, prefix));
    }
    if v.is_tuple() {
        let items = seq_items(v).unwrap_or_default();
        return match items.as_slice() {
            [addr] => split_prefixed(addr, None),
            [addr, mask] => split_prefixed(addr, Some(mask)),
            _ => None,
        };
    }
    let text = v.as_str()?;
    let parts: Vec<&str> = text.split('/').collect();
    match parts.as_slice() {
        [addr] => split_prefixed(&Value::from(*addr), None),
        [addr, mask] => split_prefixed(&Value::from(*addr), Some(&Value::from(*mask))),
        _ => None,
    }
}

/// `ipaddress.ip_interface(v)`, or `None` where it raises `ValueError`.
fn ip_interface(v: &Value) -> Option<Ip> {
    let (addr, prefix) = prefixed(v)?;
    Some(Ip {
        addr,
        prefix: Some(prefix),
    })
}

fn not_a_network(v: &Value) -> Error {
    bad(format!(
        "{} does not appear to be an IPv4 or IPv6 network",
        pyfmt::repr(v)
    ))
}

/// `ipaddress.ip_network(v)` (strict: no host bits may be set).
fn ip_network(v: &Value) -> Result<Net, Error> {
    let (addr, prefix) = prefixed(v).ok_or_else(|| not_a_network(v))?;
    let mask = netmask(addr.v6, prefix);
    if addr.bits & mask != addr.bits {
        return Err(bad(format!("{addr}/{prefix} has host bits set")));
    }
    Ok(Net {
        v6: addr.v6,
        bits: addr.bits,
        prefix,
    })
}

fn parse_network_str(s: &str) -> Result<Net, Error> {
    ip_network(&Value::from(s))
}

// --- address filters ----------------------------------------------------------------------------

/// Salt's `_is_ipv`: the value as an address or an interface of that IP version for which all
/// the options hold.
fn is_ipv(v: &Value, version: u8, options: &Value) -> Result<Option<Ip>, Error> {
    let ip = match ip_address(v) {
        Some(addr) => Ip { addr, prefix: None },
        None => match ip_interface(v) {
            Some(ip) => ip,
            None => return Ok(None),
        },
    };
    if ip.addr.version() != version {
        return Ok(None);
    }
    if !options.is_true() {
        return Ok(Some(ip));
    }
    let Some(options) = options.as_str() else {
        return Err(bad(format!(
            "'{}' object has no attribute 'split'",
            py_type(options)
        )));
    };
    Ok(ip.has_all(options).then_some(ip))
}

/// What `ipv4`/`ipv6`/`ipaddr` give: one address for a string, the matching ones for a list.
enum Picked {
    One(Ip),
    Many(Vec<Ip>),
}

fn picked_value(picked: Option<Picked>) -> Value {
    match picked {
        None => Value::from(()),
        Some(Picked::One(ip)) => Value::from(ip.to_string()),
        Some(Picked::Many(ips)) => {
            List::value(ips.iter().map(|ip| Value::from(ip.to_string())).collect())
        }
    }
}

/// Salt's `_ipv_filter`.
fn ipv_filter(v: &Value, version: u8, options: &Value) -> Result<Option<Picked>, Error> {
    if v.kind() == ValueKind::String || py_bytes(v).is_some() {
        return Ok(is_ipv(v, version, options)?.map(Picked::One));
    }
    if !is_seq(v) {
        return Ok(None);
    }
    let mut found = Vec::new();
    for item in seq_items(v).unwrap_or_default() {
        if let Some(ip) = is_ipv(&item, version, options)? {
            found.push(ip);
        }
    }
    Ok(Some(Picked::Many(found)))
}

/// Salt's `ipaddr`: the IPv4 then the IPv6 ones.
fn ipaddr(v: &Value, options: &Value) -> Result<Option<Picked>, Error> {
    let v4 = ipv_filter(v, 4, options)?;
    let v6 = ipv_filter(v, 6, options)?;
    Ok(match (v4, v6) {
        (Some(Picked::Many(mut v4)), Some(Picked::Many(v6))) => {
            v4.extend(v6);
            Some(Picked::Many(v4))
        }
        (Some(Picked::Many(v4)), v6) if v4.is_empty() => v6,
        (None, v6) => v6,
        (v4, _) => v4,
    })
}

/// Salt's `_filter_ipaddr`: the matching addresses for `version` (4, 6, or either).
fn filter_ipaddr(v: &Value, options: &Value, version: &Value) -> Result<Option<Vec<Ip>>, Error> {
    let is = |n: f64| {
        version.kind() == ValueKind::Number && f64::try_from(version.clone()).ok() == Some(n)
    };
    let picked = if !version.is_true() {
        ipaddr(v, options)?
    } else if is(4.0) {
        ipv_filter(v, 4, options)?
    } else if is(6.0) {
        ipv_filter(v, 6, options)?
    } else {
        None
    };
    Ok(match picked {
        None => None,
        Some(Picked::One(ip)) => Some(vec![ip]),
        Some(Picked::Many(ips)) if ips.is_empty() => None,
        Some(Picked::Many(ips)) => Some(ips),
    })
}

/// `ip_host`, `network_hosts` and `network_size`: `each` of the matching addresses, for a
/// string the first one alone, `None` when none matches.
fn per_ip(
    func: &str,
    v: &Value,
    args: &[Value],
    kw: &Kwargs,
    each: impl Fn(&Ip) -> Result<Value, Error>,
) -> Result<Value, Error> {
    let [options, version] = bind_kw(func, args, kw, ["options", "version"], 0)?;
    let Some(ips) = filter_ipaddr(
        v,
        &options.unwrap_or_default(),
        &version.unwrap_or_default(),
    )?
    else {
        return Ok(Value::from(()));
    };
    if !is_seq(v) {
        return each(&ips[0]);
    }
    Ok(List::value(ips.iter().map(each).collect::<Result<_, _>>()?))
}

/// The usable hosts of an address's network, as `ipaddress` lists them: a /32 (/128) is the
/// address itself, a /31 (/127) both addresses; otherwise IPv4 leaves out the network and
/// broadcast addresses, IPv6 the network address only.
fn hosts(ip: &Ip) -> Result<Vec<String>, Error> {
    let v6 = ip.addr.v6;
    let max = max_prefix(v6);
    let prefix = ip.prefix.unwrap_or(max);
    if prefix == max {
        return Ok(vec![ip.addr.to_string()]);
    }
    let mask = netmask(v6, prefix);
    let network = ip.addr.bits & mask;
    let broadcast = network | (all_ones(v6) & !mask);
    let (first, last) = if prefix == max - 1 {
        (network, broadcast)
    } else if v6 {
        (network + 1, broadcast)
    } else {
        (network + 1, broadcast - 1)
    };
    if last - first >= MAX_HOSTS {
        return Err(bad(format!(
            "network_hosts: {}/{prefix} has too many hosts to list",
            Addr::new(v6, network)
        )));
    }
    Ok((first..=last)
        .map(|bits| Addr::new(v6, bits).to_string())
        .collect())
}

/// An integer too large for the template engine (2**128), printed as Python prints it.
#[derive(Debug)]
struct BigInt(&'static str);

impl Object for BigInt {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The number of addresses of an address's network.
fn network_size(ip: &Ip) -> Value {
    let max = max_prefix(ip.addr.v6);
    let bits = max - ip.prefix.unwrap_or(max);
    if bits >= 128 {
        return Value::from_object(BigInt("340282366920938463463374607431768211456"));
    }
    let size = 1u128 << bits;
    match i64::try_from(size) {
        Ok(size) => Value::from(size),
        Err(_) => Value::from(size),
    }
}

/// Salt's `ipwrap`: IPv6 addresses in brackets, alone or in a list.
fn ipwrap(v: Value, args: Args, kw: Kwargs) -> Result<Value, Error> {
    let [] = bind_kw("ipwrap", &args, &kw, [], 0)?;
    if is_seq(&v) {
        let items = seq_items(&v).unwrap_or_default();
        let wrapped = items.iter().map(wrap_one).collect::<Result<_, _>>()?;
        return Ok(List::value(wrapped));
    }
    wrap_one(&v)
}

/// Salt's `ipwrap` of one value: an IPv6 address in brackets, anything else as it is.
fn wrap_one(v: &Value) -> Result<Value, Error> {
    if is_ipv(v, 6, &Value::from(()))?.is_none() {
        return Ok(v.clone());
    }
    Ok(Value::from(ip_bracket(&pyfmt::str(v))?))
}

/// Salt's `ip_bracket`: the address (brackets allowed), IPv6 in brackets.
fn ip_bracket(text: &str) -> Result<String, Error> {
    let text = text.trim_start_matches('[').trim_end_matches(']');
    match address_str(text) {
        Some(addr) if addr.v6 => Ok(format!("[{addr}]")),
        Some(addr) => Ok(addr.to_string()),
        None => Err(bad(format!(
            "{} does not appear to be an IPv4 or IPv6 address",
            pyfmt::repr_str(text)
        ))),
    }
}

/// Salt's `filter_by_networks`: the addresses of a list (or of each list of a dict) inside
/// any of the networks, once for every network that holds them.
fn filter_by_networks(values: Value, args: Args, kw: Kwargs) -> Result<Value, Error> {
    let [networks] = bind_kw("filter_by_networks", &args, &kw, ["networks"], 1)?;
    let networks = networks.unwrap_or_default();
    if networks.is_none() || networks.is_undefined() {
        return Ok(values);
    }
    let networks = py_iter(&networks)?
        .iter()
        .map(ip_network)
        .collect::<Result<Vec<_>, _>>()?;
    let keep = |ips: Vec<Value>| -> Result<Vec<Value>, Error> {
        let mut kept = Vec::new();
        for ip in ips {
            for net in &networks {
                let addr = ip_address(&ip).ok_or_else(|| {
                    bad(format!(
                        "{} does not appear to be an IPv4 or IPv6 address",
                        pyfmt::repr(&ip)
                    ))
                })?;
                if net.contains(&addr) {
                    kept.push(ip.clone());
                }
            }
        }
        Ok(kept)
    };
    if let Some(entries) = map_entries(&values) {
        let mut out = indexmap::IndexMap::new();
        for (interface, ips) in entries {
            out.insert(interface, List::value(keep(py_iter(&ips)?)?));
        }
        return Ok(Dict::value(out));
    }
    if is_seq(&values) || values.kind() == ValueKind::String || py_bytes(&values).is_some() {
        return Ok(List::value(keep(py_iter(&values)?)?));
    }
    Err(bad(format!(
        "Do not know how to filter a <class '{}'>",
        py_type(&values)
    )))
}

// --- MAC addresses ------------------------------------------------------------------------------

/// Random bits for `gen_mac` (Python's `random`, not a secret).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    hasher.finish()
}

/// Salt's `gen_mac`: the prefix (the OUI) and three random bytes.
fn gen_mac(prefix: Value, args: Args, kw: Kwargs) -> Result<String, Error> {
    let [] = bind_kw("gen_mac", &args, &kw, [], 0)?;
    let [a, b, c, ..] = random_u64().to_be_bytes();
    Ok(format!("{}:{a:02X}:{b:02X}:{c:02X}", pyfmt::str(&prefix)))
}

/// Python's `int(text, 16)` for the few characters of one MAC byte.
fn hex_int(text: &str) -> Result<i64, Error> {
    let invalid = || {
        bad(format!(
            "invalid literal for int() with base 16: {}",
            pyfmt::repr_str(text)
        ))
    };
    let trimmed = text.trim_matches(py_isspace);
    let (negative, digits) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    let n = i64::from_str_radix(digits, 16).map_err(|_| invalid())?;
    Ok(if negative { -n } else { n })
}

/// Salt's `mac_str_to_bytes`: 12 hex digits, or 17 characters with a separator.
fn mac_str_to_bytes(v: &Value) -> Result<Vec<u8>, Error> {
    let Some(text) = v.as_str() else {
        return Err(match v.len() {
            None => bad(format!("object of type '{}' has no len()", py_type(v))),
            Some(12 | 17) => bad(format!(
                "mac_str_to_bytes: a MAC address is a string, not a '{}'",
                py_type(v)
            )),
            Some(_) => bad("Invalid MAC address"),
        });
    };
    let mut chars: Vec<char> = text.chars().collect();
    match chars.len() {
        12 => {}
        17 => {
            let sep = chars[2];
            chars.retain(|c| *c != sep);
        }
        _ => return Err(bad("Invalid MAC address")),
    }
    (0..12)
        .step_by(2)
        .map(|at| {
            let chunk: String = chars.iter().skip(at).take(2).collect();
            let n = hex_int(&chunk)?;
            u8::try_from(n).map_err(|_| bad("bytes must be in range(0, 256)"))
        })
        .collect()
}

// --- DNS ----------------------------------------------------------------------------------------

/// Salt's `dns_check(addr, port, safe=False, ipv6=None)`: the first address of the name that
/// takes a TCP connection on the port (else the first address), IPv6 in brackets. `ipv6`
/// true prefers IPv6 addresses (IPv4 when there are none), false takes IPv4 only.
fn dns_check(addr: Value, args: Args, kw: Kwargs) -> Result<String, Error> {
    let [port, _safe, ipv6] = bind_kw("dns_check", &args, &kw, ["port", "safe", "ipv6"], 1)?;
    let port = port.unwrap_or_default();
    let host = match addr.kind() {
        ValueKind::String => addr.as_str().unwrap_or_default().to_string(),
        ValueKind::None | ValueKind::Undefined => "localhost".to_string(),
        _ => return Err(unresolvable(&pyfmt::str(&addr))),
    };
    let port = match py_int(&port) {
        Some(Some(port)) => u16::try_from(port).map_err(|_| bad("port must be 0-65535."))?,
        Some(None) => return Err(bad("port must be 0-65535.")),
        None => return Err(unresolvable(&host)),
    };
    let failed = || {
        bad(format!(
            "DNS lookup or connection check of '{host}' failed."
        ))
    };
    let resolved: Vec<SocketAddr> = match (host.as_str(), port).to_socket_addrs() {
        Ok(found) => found.collect(),
        Err(_) => Vec::new(),
    };
    let ipv6 = ipv6.unwrap_or_default();
    let family = |v6: bool| -> Vec<SocketAddr> {
        resolved
            .iter()
            .filter(|a| a.is_ipv6() == v6)
            .copied()
            .collect()
    };
    let candidates = if ipv6.is_true() {
        // An IPv6 lookup that finds nothing is retried for IPv4.
        Some(family(true))
            .filter(|found| !found.is_empty())
            .unwrap_or_else(|| family(false))
    } else if ipv6.kind() == ValueKind::Bool {
        family(false)
    } else {
        resolved.clone()
    };
    let mut unique: Vec<SocketAddr> = Vec::new();
    for candidate in candidates {
        if unique.iter().any(|seen| seen.ip() == candidate.ip()) {
            continue;
        }
        unique.push(candidate);
        if TcpStream::connect_timeout(&candidate, Duration::from_secs(2)).is_ok() {
            unique = vec![candidate];
            break;
        }
    }
    Ok(match unique.first().ok_or_else(failed)?.ip() {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{}]", Addr::new(true, u128::from(ip))),
    })
}

fn unresolvable(addr: &str) -> Error {
    bad(format!(
        "Attempt to resolve address '{addr}' failed. Invalid or unresolveable address"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str) -> Result<String, Error> {
        let mut env = Environment::new();
        env.set_formatter(|out, _state, value| {
            out.write_str(&pyfmt::str(value))?;
            Ok(())
        });
        register(&mut env);
        env.render_str(source, ())
    }

    #[test]
    fn addresses_read_and_print_as_python() {
        let text = |s: &str| address_str(s).map(|a| a.to_string());
        assert_eq!(text("10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert_eq!(text("010.0.0.1"), None);
        assert_eq!(text("300.1.1.1"), None);
        assert_eq!(text("1.2.3"), None);
        assert_eq!(text(" 1.2.3.4"), None);
        assert_eq!(
            text("2001:DB8:0:0:1:0:0:1").as_deref(),
            Some("2001:db8::1:0:0:1")
        );
        assert_eq!(text("::ffff:1.2.3.4").as_deref(), Some("::ffff:102:304"));
        assert_eq!(text("1:2:3:4:5:6:7::").as_deref(), Some("1:2:3:4:5:6:7:0"));
        assert_eq!(text("::").as_deref(), Some("::"));
        assert_eq!(text("fe80::1%eth0").as_deref(), Some("fe80::1%eth0"));
        assert_eq!(text("fe80::1%"), None);
        assert_eq!(text("1::2::3"), None);
        assert_eq!(text(":1:2:3:4:5:6:7"), None);
        assert_eq!(text("1:2:3:4:5:6:7:8:9"), None);
        assert_eq!(text("12345::"), None);
    }

    #[test]
    fn masks_are_lengths_netmasks_or_hostmasks() {
        assert_eq!(v4_prefix("24"), Some(24));
        assert_eq!(v4_prefix("024"), Some(24));
        assert_eq!(v4_prefix("33"), None);
        assert_eq!(v4_prefix("255.255.255.0"), Some(24));
        assert_eq!(v4_prefix("0.0.0.255"), Some(24));
        assert_eq!(v4_prefix("0.0.0.0"), Some(0));
        assert_eq!(v4_prefix("255.0.255.0"), None);
        assert_eq!(v6_prefix("0128"), Some(128));
        assert_eq!(v6_prefix("129"), None);
    }

    #[test]
    fn filters_give_salts_types() {
        assert_eq!(
            render("{{ ['10.0.0.1', 'x', '::1', '10.0.0.2'] | ipaddr }}").unwrap(),
            "['10.0.0.1', '10.0.0.2', '::1']"
        );
        assert_eq!(render("{{ 'x' | ipaddr }}").unwrap(), "None");
        assert_eq!(render("{{ ['x'] | ip_host }}").unwrap(), "None");
        assert_eq!(render("{{ '10.0.0.1' | ip_host }}").unwrap(), "10.0.0.1/32");
        assert_eq!(
            render("{{ '10.0.0.0/30' | network_hosts }}").unwrap(),
            "['10.0.0.1', '10.0.0.2']"
        );
        assert_eq!(
            render("{{ '::/0' | network_size }}").unwrap(),
            "340282366920938463463374607431768211456"
        );
        assert_eq!(
            render("{{ 'ac:de:48:00:00:01' | mac_str_to_bytes }}").unwrap(),
            "b'\\xac\\xdeH\\x00\\x00\\x01'"
        );
        assert_eq!(render("{{ '52:54:00' | gen_mac | length }}").unwrap(), "17");
    }

    #[test]
    fn bad_input_fails_where_salt_raises() {
        for source in [
            "{{ '10.0.0.1' | ipaddr(['private']) }}",
            "{{ '::1/128' | ipwrap }}",
            "{{ ['10.0.0.1'] | filter_by_networks(['10.0.0.1/8']) }}",
            "{{ ['10.0.0.1'] | filter_by_networks(['x']) }}",
            "{{ ['x'] | filter_by_networks(['10.0.0.0/8']) }}",
            "{{ 5 | filter_by_networks(['10.0.0.0/8']) }}",
            "{{ ['10.0.0.1'] | filter_by_networks }}",
            "{{ '0800271369' | mac_str_to_bytes }}",
            "{{ 'zz0027136977' | mac_str_to_bytes }}",
            "{{ '-a0027136977' | mac_str_to_bytes }}",
            "{{ 5 | mac_str_to_bytes }}",
            "{{ '10.0.0.1' | ipv4('private', 3) }}",
            "{{ '10.0.0.1' | ipaddr(version=4) }}",
            "{{ '::/64' | network_hosts }}",
            "{{ '10.0.0.0/7' | network_hosts }}",
        ] {
            let got = render(source);
            assert!(got.is_err(), "{source} gave {got:?}");
            assert!(
                matches!(
                    got.unwrap_err().kind(),
                    minijinja::ErrorKind::InvalidOperation | minijinja::ErrorKind::TooManyArguments
                ),
                "{source}"
            );
        }
        // Bad options fail only once an address of the version matched.
        assert_eq!(render("{{ 'x' | ipaddr(['private']) }}").unwrap(), "None");
        assert_eq!(
            render("{{ 'abc' | filter_by_networks([]) }}").unwrap(),
            "[]"
        );
    }

    #[test]
    fn dns_check_resolves_loopback() {
        assert_eq!(
            render("{{ '127.0.0.1' | dns_check(1) }}").unwrap(),
            "127.0.0.1"
        );
        assert_eq!(render("{{ '::1' | dns_check(1) }}").unwrap(), "[::1]");
        assert!(render("{{ 'localhost' | dns_check('80') }}").is_err());
    }
}
