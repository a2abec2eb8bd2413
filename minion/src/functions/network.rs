//! The `network` execution module: Salt's `salt/modules/network.py`, with the helpers of
//! `salt/utils/network.py` it calls, as they behave on Linux.
//!
//! The interfaces come from `ip link show` and `ip addr show` (`ifconfig -a` on a host
//! without `ip`), parsed as Salt parses them, so that everything built on them
//! (`ip_addrs`, `subnets`, `hw_addr`, `in_subnet`, ...) sees what Salt sees. Addresses and
//! networks follow Python's `ipaddress`: its parsing, its formatting, its private ranges.
//! Commands Salt runs through `cmd.run` run through Brine's `cmd` module, so a failing
//! command sets the job's retcode as it does in Salt.
//!
//! Not provided: `wol` and `traceroute` (they send packets), `fqdns` (a reverse lookup of
//! every address), `mod_hostname` (renames the host), `get_bufsize`/`mod_bufsize`
//! (ethtool), and the branches for other kernels than Linux.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;
use std::time::Duration;

use regex::Regex;
use rmpv::Value;

use super::args::{self, py_int, py_repr, py_str, split_input, Bound, Signature, py_type_name};
use brine_protocol::pystr::split as py_split;
use super::{cmd, CallState, Context, FnError, Spec};
use brine_protocol::nested::splitlines;
use brine_protocol::payload::{get, get_str, map, py_truthy};

super::spec_table! {
    /// The functions of the `network` module.
    Ping => ("network.ping", "ping", ["host", "timeout", "return_boolean"], 1, false, false, "
    Ping a host four times (`ping -c 4 <host>`; with timeout, `ping -W <timeout> -c 4
    <host>`) and return ping's output, or with return_boolean=True whether ping succeeded.
    The host is reduced to the characters a host name may have (an IP address is kept).

    CLI Example:

        salt '*' network.ping archlinux.org
        salt '*' network.ping archlinux.org return_boolean=True
        salt '*' network.ping archlinux.org timeout=3
    "),
    Netstat => ("network.netstat", "netstat", [], 0, false, false, "
    The open ports and connections: `netstat -tulpnea` read into a list of dicts (proto,
    recv-q, send-q, local-address, remote-address, state, user, inode, program); `ss
    -tulpnea` when netstat is not installed.

    CLI Example:

        salt '*' network.netstat
    "),
    ActiveTcp => ("network.active_tcp", "active_tcp", [], 0, false, false, "
    The established TCP connections from /proc/net/tcp and /proc/net/tcp6, numbered from
    0: local_addr, local_port, remote_addr, remote_port.

    CLI Example:

        salt '*' network.active_tcp
    "),
    Dig => ("network.dig", "dig", ["host"], 1, false, false, "
    Look a name up in the DNS with `dig` and return its output.

    CLI Example:

        salt '*' network.dig archlinux.org
    "),
    Arp => ("network.arp", "arp", [], 0, false, false, "
    The ARP table (`arp -an`): each hardware address with its IP address.

    CLI Example:

        salt '*' network.arp
    "),
    Interfaces => ("network.interfaces", "interfaces", [], 0, false, false, "
    Every network interface with what `ip addr show` says of it: up, hwaddr, parent, the
    IPv4 addresses (inet: address, netmask, broadcast, label), the IPv6 addresses (inet6:
    address, prefixlen, scope) and the secondary addresses.

    CLI Example:

        salt '*' network.interfaces
    "),
    HwAddr => ("network.hw_addr", "hw_addr", ["iface"], 1, false, false, "
    The hardware (MAC) address of an interface; an unknown interface gives a message
    naming the interfaces there are.

    CLI Example:

        salt '*' network.hw_addr eth0
    "),
    Hwaddr => ("network.hwaddr", "hw_addr", ["iface"], 1, false, false, "
    This function is an alias of ``hw_addr``.

    The hardware (MAC) address of an interface; an unknown interface gives a message
    naming the interfaces there are.

    CLI Example:

        salt '*' network.hw_addr eth0
    "),
    Interface => ("network.interface", "interface", ["iface"], 1, false, false, "
    The IPv4 addresses of an interface (address, netmask, broadcast, label).

    CLI Example:

        salt '*' network.interface eth0
    "),
    InterfaceIp => ("network.interface_ip", "interface_ip", ["iface"], 1, false, false, "
    The first IPv4 address of an interface.

    CLI Example:

        salt '*' network.interface_ip eth0
    "),
    Subnets => ("network.subnets", "subnets", ["interfaces"], 0, false, false, "
    The IPv4 networks this host has an address in (loopback left out), sorted; interfaces
    limits them to one interface or a list of them.

    CLI Example:

        salt '*' network.subnets
        salt '*' network.subnets interfaces=eth1
    "),
    Subnets6 => ("network.subnets6", "subnets6", [], 0, false, false, "
    The IPv6 networks this host has an address in (loopback left out), sorted.

    CLI Example:

        salt '*' network.subnets6
    "),
    InSubnet => ("network.in_subnet", "in_subnet", ["cidr"], 1, false, false, "
    Whether this host has an address (loopback left out) in a network. An invalid
    network gives False.

    CLI Example:

        salt '*' network.in_subnet 10.0.0.0/16
    "),
    IpInSubnet => ("network.ip_in_subnet", "ip_in_subnet", ["ip_addr", "cidr"], 2, false, false, "
    Whether an address is in a network.

    CLI Example:

        salt '*' network.ip_in_subnet 172.17.0.4 172.16.0.0/12
    "),
    ConvertCidr => ("network.convert_cidr", "convert_cidr", ["cidr"], 1, false, false, "
    The network address, netmask and broadcast address of a network.

    CLI Example:

        salt '*' network.convert_cidr 172.31.0.0/16
    "),
    CalcNet => ("network.calc_net", "calc_net", ["ip_addr", "netmask"], 1, false, false, "
    The network (in CIDR notation) an address is in, from the address in CIDR notation or
    with a netmask.

    CLI Example:

        salt '*' network.calc_net 172.17.0.5 255.255.255.240
        salt '*' network.calc_net 2a02:f6e:a000:80:84d8:8332:7866:4e07/64
    "),
    IpAddrs => ("network.ip_addrs", "ip_addrs", ["interface", "include_loopback", "cidr", "type"], 0, false, false, "
    The IPv4 addresses of this host, sorted; 127.0.0.1 only with include_loopback=True.
    interface limits them to interfaces (a name, a list or comma-separated names, globs
    allowed); cidr to the addresses in a network; type=public or type=private to the
    public or private ones.

    CLI Example:

        salt '*' network.ip_addrs
        salt '*' network.ip_addrs cidr=10.0.0.0/8
    "),
    Ipaddrs => ("network.ipaddrs", "ip_addrs", ["interface", "include_loopback", "cidr", "type"], 0, false, false, "
    This function is an alias of ``ip_addrs``.

    The IPv4 addresses of this host, sorted; 127.0.0.1 only with include_loopback=True.
    interface limits them to interfaces (a name, a list or comma-separated names, globs
    allowed); cidr to the addresses in a network; type=public or type=private to the
    public or private ones.

    CLI Example:

        salt '*' network.ip_addrs
    "),
    IpAddrs6 => ("network.ip_addrs6", "ip_addrs6", ["interface", "include_loopback", "cidr"], 0, false, false, "
    The IPv6 addresses of this host, sorted; ::1 only with include_loopback=True.
    interface limits them to interfaces (names or globs), cidr to a network.

    CLI Example:

        salt '*' network.ip_addrs6
    "),
    Ipaddrs6 => ("network.ipaddrs6", "ip_addrs6", ["interface", "include_loopback", "cidr"], 0, false, false, "
    This function is an alias of ``ip_addrs6``.

    The IPv6 addresses of this host, sorted; ::1 only with include_loopback=True.
    interface limits them to interfaces (names or globs), cidr to a network.

    CLI Example:

        salt '*' network.ip_addrs6
    "),
    IpNeighs => ("network.ip_neighs", "ip_neighs", [], 0, false, false, "
    The IPv4 neighbour table (`ip neigh show`): each hardware address with its address.

    CLI Example:

        salt '*' network.ip_neighs
    "),
    Ipneighs => ("network.ipneighs", "ip_neighs", [], 0, false, false, "
    This function is an alias of ``ip_neighs``.

    The IPv4 neighbour table (`ip neigh show`): each hardware address with its address.

    CLI Example:

        salt '*' network.ip_neighs
    "),
    IpNeighs6 => ("network.ip_neighs6", "ip_neighs6", [], 0, false, false, "
    The IPv6 neighbour table (`ip neigh show`): each hardware address with its address.

    CLI Example:

        salt '*' network.ip_neighs6
    "),
    Ipneighs6 => ("network.ipneighs6", "ip_neighs6", [], 0, false, false, "
    This function is an alias of ``ip_neighs6``.

    The IPv6 neighbour table (`ip neigh show`): each hardware address with its address.

    CLI Example:

        salt '*' network.ip_neighs6
    "),
    GetHostname => ("network.get_hostname", "get_hostname", [], 0, false, false, "
    The host name.

    CLI Example:

        salt '*' network.get_hostname
    "),
    GetFqdn => ("network.get_fqdn", "get_fqdn", [], 0, false, false, "
    The fully qualified domain name, as Python's socket.getfqdn finds it: the first name
    with a dot among the names the host name's address has, else its first name.

    CLI Example:

        salt '*' network.get_fqdn
    "),
    Connect => ("network.connect", "connect", ["host", "port"], 1, false, true, "
    Test whether a TCP connection to a host's port can be made: {'result': True/False,
    'comment': ...}. Keyword arguments: timeout (seconds, default 5), family (ipv4 or
    ipv6), proto (tcp, the default, or udp).

    CLI Example:

        salt '*' network.connect archlinux.org 80
        salt '*' network.connect archlinux.org 80 timeout=3 family=ipv4
    "),
    IsPrivate => ("network.is_private", "is_private", ["ip_addr"], 1, false, false, "
    Whether an address is a private one.

    CLI Example:

        salt '*' network.is_private 10.0.0.3
    "),
    IsLoopback => ("network.is_loopback", "is_loopback", ["ip_addr"], 1, false, false, "
    Whether an address is a loopback one.

    CLI Example:

        salt '*' network.is_loopback 127.0.0.1
    "),
    ReverseIp => ("network.reverse_ip", "reverse_ip", ["ip_addr"], 1, false, false, "
    The reverse-lookup name of an address (in-addr.arpa or ip6.arpa).

    CLI Example:

        salt '*' network.reverse_ip 172.17.0.4
    "),
    Routes => ("network.routes", "routes", ["family"], 0, false, false, "
    The routing table (`netstat -rn`, or `ip route` without netstat): addr_family,
    destination, gateway, netmask, flags, interface; family=inet or family=inet6 keeps
    one family.

    CLI Example:

        salt '*' network.routes
    "),
    DefaultRoute => ("network.default_route", "default_route", ["family"], 0, false, false, "
    The default routes; family=inet or family=inet6 keeps one family.

    CLI Example:

        salt '*' network.default_route
    "),
    GetRoute => ("network.get_route", "get_route", ["ip"], 1, false, false, "
    The route to an address (`ip route get`): destination, gateway, interface, source.

    CLI Example:

        salt '*' network.get_route 10.10.10.10
    "),
    Ifacestartswith => ("network.ifacestartswith", "ifacestartswith", ["cidr"], 1, false, false, "
    The interfaces (or their address labels) with an IPv4 address that begins with the
    given text.

    CLI Example:

        salt '*' network.ifacestartswith 10.0
    "),
    Iphexval => ("network.iphexval", "iphexval", ["ip"], 1, false, false, "
    An IPv4 address in hexadecimal (10.0.0.1 gives 0A000001).

    CLI Example:

        salt '*' network.iphexval 10.0.0.1
    "),
    IpNetworks => ("network.ip_networks", "ip_networks", ["interface", "include_loopback", "verbose"], 0, false, false, "
    The IPv4 networks of this host's addresses, sorted; interface limits them to
    interfaces (names or globs); verbose=True gives each network's address, netmask,
    num_addresses and prefixlen.

    CLI Example:

        salt '*' network.ip_networks
        salt '*' network.ip_networks interface=eth*
    "),
    IpNetworks6 => ("network.ip_networks6", "ip_networks6", ["interface", "include_loopback", "verbose"], 0, false, false, "
    The IPv6 networks of this host's addresses, sorted; interface limits them to
    interfaces (names or globs); verbose=True gives each network's address, netmask,
    num_addresses and prefixlen.

    CLI Example:

        salt '*' network.ip_networks6
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
        let kernel = get_str(&ctx.grains, "kernel").unwrap_or_default();
        match self {
            Fun::Ping => {
                ping(
                    ctx,
                    &arg("host"),
                    &arg("timeout"),
                    &arg("return_boolean"),
                    st,
                )
                .await
            }
            Fun::Netstat => netstat(ctx, kernel, st).await,
            Fun::ActiveTcp => active_tcp(kernel),
            Fun::Dig => {
                if cmd::which("dig").is_none() {
                    return Ok(command_not_found("network.dig", "dig", st));
                }
                let host = sanitize_host(&arg("host"))?;
                salt_cmd(ctx, cmd::Fun::Run, format!("dig {host}"), &[], st).await
            }
            Fun::Arp => {
                if cmd::which("arp").is_none() {
                    return Ok(command_not_found("network.arp", "arp", st));
                }
                let out = salt_cmd(ctx, cmd::Fun::Run, "arp -an", &[], st).await?;
                Ok(parse_arp(&py_str(&out), kernel).into_value())
            }
            Fun::Interfaces => Ok(interfaces().await?.into_value()),
            Fun::HwAddr | Fun::Hwaddr => {
                iface_field(&arg("iface"), |data| {
                    data.get("hwaddr")
                        .cloned()
                        .unwrap_or_else(|| Value::from(""))
                })
                .await
            }
            Fun::Interface => {
                iface_field(&arg("iface"), |data| {
                    data.get("inet").cloned().unwrap_or_else(|| Value::from(""))
                })
                .await
            }
            Fun::InterfaceIp => {
                iface_field(&arg("iface"), |data| match data.get("inet") {
                    Some(Value::Array(inet)) if !inet.is_empty() => get(&inet[0], "address")
                        .cloned()
                        .unwrap_or_else(|| Value::from("")),
                    _ => Value::from(""),
                })
                .await
            }
            Fun::Subnets => subnets(b.opt("interfaces"), Family::V4).await,
            Fun::Subnets6 => subnets(None, Family::V6).await,
            Fun::InSubnet => Ok(Value::Boolean(in_subnet(&arg("cidr"), None).await?)),
            Fun::IpInSubnet => Ok(Value::Boolean(
                in_subnet(&arg("cidr"), Some(&arg("ip_addr"))).await?,
            )),
            Fun::ConvertCidr => convert_cidr(&arg("cidr")),
            Fun::CalcNet => Ok(Value::from(
                calc_net(&arg("ip_addr"), b.opt("netmask"))?.to_string(),
            )),
            Fun::IpAddrs | Fun::Ipaddrs => {
                let addrs =
                    ip_addrs(b.opt("interface"), &arg("include_loopback"), Family::V4).await?;
                let kept = filter_addrs(addrs, &arg("cidr"), &arg("type"));
                Ok(strings(kept))
            }
            Fun::IpAddrs6 | Fun::Ipaddrs6 => {
                let addrs =
                    ip_addrs(b.opt("interface"), &arg("include_loopback"), Family::V6).await?;
                let kept = filter_addrs(addrs, &arg("cidr"), &Value::Nil);
                Ok(strings(kept))
            }
            Fun::IpNeighs | Fun::Ipneighs | Fun::IpNeighs6 | Fun::Ipneighs6 => {
                let out = salt_cmd(ctx, cmd::Fun::Run, "ip neigh show", &[], st).await?;
                let v6 = matches!(self, Fun::IpNeighs6 | Fun::Ipneighs6);
                Ok(parse_neighs(&py_str(&out), v6).into_value())
            }
            Fun::GetHostname => Ok(Value::from(netdb::hostname())),
            Fun::GetFqdn => tokio::task::spawn_blocking(netdb::getfqdn)
                .await
                .map(Value::from)
                .map_err(|e| FnError::Exception(e.to_string())),
            Fun::Connect => connect(arg("host"), arg("port"), b).await,
            Fun::IsPrivate => Ok(Value::Boolean(ip_address(&arg("ip_addr"))?.is_private())),
            Fun::IsLoopback => Ok(Value::Boolean(ip_address(&arg("ip_addr"))?.is_loopback())),
            Fun::ReverseIp => ip_address(&arg("ip_addr"))?
                .reverse_pointer()
                .map(Value::from),
            Fun::Routes => routes(ctx, &arg("family"), kernel, st).await,
            Fun::DefaultRoute => default_route(ctx, &arg("family"), kernel, st).await,
            Fun::GetRoute => get_route(ctx, &arg("ip"), kernel, st).await,
            Fun::Ifacestartswith => ifacestartswith(&arg("cidr")).await,
            Fun::Iphexval => iphexval(&arg("ip")),
            Fun::IpNetworks => {
                ip_networks(
                    b.opt("interface"),
                    &arg("include_loopback"),
                    &arg("verbose"),
                    Family::V4,
                )
                .await
            }
            Fun::IpNetworks6 => {
                ip_networks(
                    b.opt("interface"),
                    &arg("include_loopback"),
                    &arg("verbose"),
                    Family::V6,
                )
                .await
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Shared with the `disk` module

/// A Python dict being built: keys in the order they were first set, `d[k] = v` replacing
/// a value in place.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Dict(Vec<(Value, Value)>);

impl Dict {
    /// `d[key] = val`.
    pub(crate) fn set(&mut self, key: impl Into<Value>, val: impl Into<Value>) {
        let (key, val) = (key.into(), val.into());
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = val,
            None => self.0.push((key, val)),
        }
    }

    /// `d.get(key)` for a text key.
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// `d.get(key)` for any key.
    pub(crate) fn get_any(&self, key: &Value) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.0
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// `d.clear()`: Salt starts again with `ret = {}` after some parse errors.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    fn keys(&self) -> impl Iterator<Item = &Value> {
        self.0.iter().map(|(k, _)| k)
    }

    pub(crate) fn into_value(self) -> Value {
        Value::Map(self.0)
    }
}

/// Run a command through the `cmd` module as a Salt module's `__salt__["cmd.<fun>"](cmd,
/// **kwargs)` does (no jid, so no shell unless `python_shell=True`); the job's retcode
/// becomes the command's.
pub(crate) async fn salt_cmd(
    ctx: &Context,
    fun: cmd::Fun,
    command: impl Into<Value>,
    kwargs: &[(&str, Value)],
    st: &mut CallState,
) -> Result<Value, FnError> {
    let spec = fun.spec();
    let kwargs = kwargs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let bound = args::bind(&spec.sig, spec.pyname, vec![command.into()], kwargs)
        .map_err(FnError::InvalidArgs)?;
    fun.run(ctx, &bound, st).await
}

/// What Salt's minion returns when a function's required binary is missing (its
/// `CommandNotFoundError`): the text as the return, retcode 1.
pub(crate) fn command_not_found(fun: &str, binary: &str, st: &mut CallState) -> Value {
    st.retcode = 1;
    Value::from(format!(
        "Command required for '{fun}' not found: The '{binary}' binary was not found in $PATH."
    ))
}

/// Python's `IndexError` from `list[i]` past the end.
pub(crate) fn index_error() -> FnError {
    FnError::Exception("IndexError: list index out of range".into())
}

/// `items[i]`, or Python's `IndexError`.
pub(crate) fn at<'a>(items: &[&'a str], i: usize) -> Result<&'a str, FnError> {
    items.get(i).copied().ok_or_else(index_error)
}

fn strings<I: IntoIterator<Item = String>>(items: I) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

fn value_error(msg: impl std::fmt::Display) -> FnError {
    FnError::Exception(format!("ValueError: {msg}"))
}

fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("static regex is valid"))
}

// ---------------------------------------------------------------------------------------
// Addresses and networks as Python's `ipaddress` has them

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    /// The key of the interface data that lists this family's addresses.
    fn key(self) -> &'static str {
        match self {
            Family::V4 => "inet",
            Family::V6 => "inet6",
        }
    }

    fn width(self) -> u32 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
}

/// An address as `ipaddress.ip_address` makes it (an IPv6 one may carry a scope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ip {
    addr: IpAddr,
    scope: Option<String>,
}

fn family_of(addr: &IpAddr) -> Family {
    match addr {
        IpAddr::V4(_) => Family::V4,
        IpAddr::V6(_) => Family::V6,
    }
}

fn bits(addr: &IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(*a)),
        IpAddr::V6(a) => u128::from(*a),
    }
}

fn from_bits(family: Family, n: u128) -> IpAddr {
    match family {
        // The mask keeps a value of the family's width.
        Family::V4 => IpAddr::V4(Ipv4Addr::from((n & 0xffff_ffff) as u32)),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(n)),
    }
}

fn mask_bits(family: Family, prefix: u32) -> u128 {
    let width = family.width();
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    if prefix == 0 {
        0
    } else {
        all & !((1u128 << (width - prefix)) - 1)
    }
}

/// Python's `str()` of an address: dotted quad, or IPv6 with the longest run of zero
/// groups (two or more, the first of equals) written `::`.
pub(crate) fn py_ip(addr: &IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => {
            let groups = a.segments();
            let (mut best, mut best_len) = (0, 0);
            let mut i = 0;
            while i < 8 {
                if groups[i] == 0 {
                    let start = i;
                    while i < 8 && groups[i] == 0 {
                        i += 1;
                    }
                    if i - start > best_len {
                        (best, best_len) = (start, i - start);
                    }
                } else {
                    i += 1;
                }
            }
            let hex = |g: &[u16]| {
                g.iter()
                    .map(|x| format!("{x:x}"))
                    .collect::<Vec<_>>()
                    .join(":")
            };
            if best_len > 1 {
                format!(
                    "{}::{}",
                    hex(&groups[..best]),
                    hex(&groups[best + best_len..])
                )
            } else {
                hex(&groups)
            }
        }
    }
}

/// Python's strict dotted quad: four decimal parts of at most three digits, no leading
/// zero, each at most 255.
fn parse_v4(text: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (slot, part) in octets.iter_mut().zip(&parts) {
        if part.is_empty()
            || part.len() > 3
            || !part.bytes().all(|c| c.is_ascii_digit())
            || (part.len() > 1 && part.starts_with('0'))
        {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    Some(Ipv4Addr::from(octets))
}

/// An IPv6 address, with a `%scope` after it.
fn parse_v6(text: &str) -> Option<(Ipv6Addr, Option<String>)> {
    let (addr, scope) = match text.split_once('%') {
        Some((_, scope)) if scope.is_empty() || scope.contains('%') => return None,
        Some((addr, scope)) => (addr, Some(scope.to_string())),
        None => (text, None),
    };
    // Embedded IPv4 parts follow the dotted-quad rules.
    if let Some((_, last)) = addr.rsplit_once(':') {
        if last.contains('.') && parse_v4(last).is_none() {
            return None;
        }
    }
    addr.parse::<Ipv6Addr>().ok().map(|a| (a, scope))
}

impl Ip {
    fn of(addr: IpAddr) -> Ip {
        Ip { addr, scope: None }
    }

    /// Parse text as `ipaddress.ip_address` does.
    fn parse(text: &str) -> Option<Ip> {
        if let Some(a) = parse_v4(text) {
            return Some(Ip::of(IpAddr::V4(a)));
        }
        parse_v6(text).map(|(a, scope)| Ip {
            addr: IpAddr::V6(a),
            scope,
        })
    }

    fn from_int(n: i128) -> Option<Ip> {
        let n = u128::try_from(n).ok()?;
        if n <= u128::from(u32::MAX) {
            Some(Ip::of(from_bits(Family::V4, n)))
        } else {
            Some(Ip::of(from_bits(Family::V6, n)))
        }
    }

    fn family(&self) -> Family {
        family_of(&self.addr)
    }

    fn bits(&self) -> u128 {
        bits(&self.addr)
    }

    /// `is_private` of Python 3.11's `ipaddress` (an IPv4-mapped address is judged as the
    /// IPv4 address).
    pub(crate) fn is_private(&self) -> bool {
        const V4: &[(u32, u32)] = &[
            (0x0000_0000, 8),
            (0x0a00_0000, 8),
            (0x7f00_0000, 8),
            (0xa9fe_0000, 16),
            (0xac10_0000, 12),
            (0xc000_0000, 29),
            (0xc000_00aa, 31),
            (0xc000_0200, 24),
            (0xc0a8_0000, 16),
            (0xc612_0000, 15),
            (0xc633_6400, 24),
            (0xcb00_7100, 24),
            (0xf000_0000, 4),
            (0xffff_ffff, 32),
        ];
        const V6: &[(u128, u32)] = &[
            (1, 128),
            (0, 128),
            (0xffff_0000_0000, 96),
            (0x0100_0000_0000_0000 << 64, 64),
            (0x2001 << 112, 23),
            (0x2001_0002 << 96, 48),
            (0x2001_0db8 << 96, 32),
            (0x2001_0010 << 96, 28),
            (0xfc00 << 112, 7),
            (0xfe80 << 112, 10),
        ];
        match self.addr {
            IpAddr::V4(a) => {
                let n = u128::from(u32::from(a));
                V4.iter()
                    .any(|(net, p)| n & mask_bits(Family::V4, *p) == u128::from(*net))
            }
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => Ip::of(IpAddr::V4(v4)).is_private(),
                None => {
                    let n = u128::from(a);
                    V6.iter()
                        .any(|(net, p)| n & mask_bits(Family::V6, *p) == *net)
                }
            },
        }
    }

    pub(crate) fn is_loopback(&self) -> bool {
        match self.addr {
            IpAddr::V4(a) => a.octets()[0] == 127,
            IpAddr::V6(a) => u128::from(a) == 1,
        }
    }

    /// `reverse_pointer`.
    fn reverse_pointer(&self) -> Result<String, FnError> {
        match self.addr {
            IpAddr::V4(a) => {
                let o = a.octets();
                Ok(format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0]))
            }
            IpAddr::V6(a) => {
                if self.scope.is_some() {
                    // Python explodes `str(self)`, scope included, and cannot parse it.
                    let text = self.to_string();
                    let last = text.rsplit(':').next().unwrap_or_default();
                    return Err(FnError::Exception(format!(
                        "ipaddress.AddressValueError: Only hex digits permitted in {} in {}",
                        brine_protocol::pyrepr::str_repr(last),
                        brine_protocol::pyrepr::str_repr(&text)
                    )));
                }
                let hex = format!("{:032x}", u128::from(a));
                let mut out: Vec<String> = hex.chars().rev().map(String::from).collect();
                out.push("ip6.arpa".into());
                Ok(out.join("."))
            }
        }
    }
}

impl std::fmt::Display for Ip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&py_ip(&self.addr))?;
        if let Some(scope) = &self.scope {
            write!(f, "%{scope}")?;
        }
        Ok(())
    }
}

/// `ipaddress.ip_address(v)`.
pub(crate) fn ip_address(v: &Value) -> Result<Ip, FnError> {
    let parsed = match v {
        Value::String(s) => s.as_str().and_then(Ip::parse),
        Value::Integer(i) => i
            .as_i64()
            .map(i128::from)
            .or_else(|| i.as_u64().map(i128::from))
            .and_then(Ip::from_int),
        Value::Boolean(b) => Ip::from_int(i128::from(*b)),
        Value::Binary(b) => packed(b),
        _ => None,
    };
    parsed.ok_or_else(|| {
        value_error(format!(
            "{} does not appear to be an IPv4 or IPv6 address",
            py_repr(v)
        ))
    })
}

/// An address packed in 4 or 16 bytes.
fn packed(b: &[u8]) -> Option<Ip> {
    match b.len() {
        4 => <[u8; 4]>::try_from(b)
            .ok()
            .map(|o| Ip::of(IpAddr::V4(Ipv4Addr::from(o)))),
        16 => <[u8; 16]>::try_from(b)
            .ok()
            .map(|o| Ip::of(IpAddr::V6(Ipv6Addr::from(o)))),
        _ => None,
    }
}

/// A network as `ipaddress.ip_network` makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Net {
    addr: IpAddr,
    prefix: u32,
    scope: Option<String>,
}

/// Why text is not a network.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NetError {
    NotANetwork,
    /// `strict` and the address has bits outside the prefix: Python's message.
    HostBits(String),
}

/// The prefix length of an IPv4 netmask or hostmask in dotted-quad form.
fn v4_mask_prefix(text: &str) -> Option<u32> {
    let n = u32::from(parse_v4(text)?);
    let prefix_of = |m: u32| {
        let p = m.count_ones();
        (m == (mask_bits(Family::V4, p) as u32)).then_some(p)
    };
    prefix_of(n).or_else(|| prefix_of(!n))
}

/// A prefix length in decimal digits, at most `max`.
fn decimal_prefix(text: &str, max: u32) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits = text.trim_start_matches('0');
    if digits.len() > 3 {
        return None;
    }
    let p: u32 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    (p <= max).then_some(p)
}

impl Net {
    /// Parse text as `IPv4Network` then `IPv6Network` do.
    fn parse(text: &str, strict: bool) -> Result<Net, NetError> {
        let parts: Vec<&str> = text.split('/').collect();
        if parts.len() > 2 {
            return Err(NetError::NotANetwork);
        }
        let mask = parts.get(1).copied();
        if let Some(a) = parse_v4(parts[0]) {
            let prefix = match mask {
                None => Some(32),
                Some(m) => decimal_prefix(m, 32).or_else(|| v4_mask_prefix(m)),
            };
            return match prefix {
                Some(p) => Net::make(Ip::of(IpAddr::V4(a)), p, strict),
                None => Err(NetError::NotANetwork),
            };
        }
        if let Some((a, scope)) = parse_v6(parts[0]) {
            let prefix = match mask {
                None => Some(128),
                Some(m) => decimal_prefix(m, 128),
            };
            if let Some(p) = prefix {
                let ip = Ip {
                    addr: IpAddr::V6(a),
                    scope,
                };
                return Net::make(ip, p, strict);
            }
        }
        Err(NetError::NotANetwork)
    }

    fn make(ip: Ip, prefix: u32, strict: bool) -> Result<Net, NetError> {
        let family = ip.family();
        let mask = mask_bits(family, prefix);
        if ip.bits() & !mask == 0 {
            return Ok(Net {
                addr: ip.addr,
                prefix,
                scope: ip.scope,
            });
        }
        if strict {
            return Err(NetError::HostBits(format!(
                "{ip}/{prefix} has host bits set"
            )));
        }
        Ok(Net {
            addr: from_bits(family, ip.bits() & mask),
            prefix,
            scope: None,
        })
    }

    /// `ip_network(v, strict)`: text, an integer address or a packed one.
    fn of(v: &Value, strict: bool) -> Result<Net, NetError> {
        match v {
            Value::Integer(_) | Value::Boolean(_) | Value::Binary(_) => {
                let ip = ip_address(v).map_err(|_| NetError::NotANetwork)?;
                let prefix = ip.family().width();
                Net::make(ip, prefix, strict)
            }
            other => Net::parse(&py_str(other), strict),
        }
    }

    fn family(&self) -> Family {
        family_of(&self.addr)
    }

    fn netmask(&self) -> IpAddr {
        from_bits(self.family(), mask_bits(self.family(), self.prefix))
    }

    fn broadcast(&self) -> IpAddr {
        let family = self.family();
        from_bits(family, bits(&self.addr) | !mask_bits(family, self.prefix))
    }

    fn contains(&self, ip: &Ip) -> bool {
        ip.family() == self.family()
            && ip.bits() & mask_bits(self.family(), self.prefix) == bits(&self.addr)
    }

    fn is_loopback(&self) -> bool {
        Ip::of(self.addr).is_loopback() && Ip::of(self.broadcast()).is_loopback()
    }

    fn num_addresses(&self) -> Value {
        let n = 1u128.checked_shl(self.family().width() - self.prefix);
        match n.and_then(|n| u64::try_from(n).ok()) {
            Some(n) => Value::from(n),
            None => Value::from(2f64.powi((self.family().width() - self.prefix) as i32)),
        }
    }

    /// Python's ordering of networks: by address, then by netmask.
    fn sort_key(&self) -> (u128, u32) {
        (bits(&self.addr), self.prefix)
    }
}

impl std::fmt::Display for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&py_ip(&self.addr))?;
        if let Some(scope) = &self.scope {
            write!(f, "%{scope}")?;
        }
        write!(f, "/{}", self.prefix)
    }
}

/// `ipaddress.ip_network(v, strict=...)` with Python's `ValueError` texts.
fn ip_network(v: &Value, strict: bool) -> Result<Net, FnError> {
    Net::of(v, strict).map_err(|e| match e {
        NetError::NotANetwork => value_error(format!(
            "{} does not appear to be an IPv4 or IPv6 network",
            py_repr(v)
        )),
        NetError::HostBits(msg) => value_error(msg),
    })
}

/// `ipaddress.ip_interface(text)`: the address and its network.
fn ip_interface(text: &str) -> Result<(Ip, Net), FnError> {
    let fail = || {
        value_error(format!(
            "{} does not appear to be an IPv4 or IPv6 interface",
            brine_protocol::pyrepr::str_repr(text)
        ))
    };
    let (addr, mask) = match text.split('/').collect::<Vec<_>>()[..] {
        [a] => (a, None),
        [a, m] => (a, Some(m)),
        _ => return Err(fail()),
    };
    let ip = Ip::parse(addr).ok_or_else(fail)?;
    let prefix = match (ip.family(), mask) {
        (family, None) => family.width(),
        (Family::V4, Some(m)) => decimal_prefix(m, 32)
            .or_else(|| v4_mask_prefix(m))
            .ok_or_else(fail)?,
        (Family::V6, Some(m)) => decimal_prefix(m, 128).ok_or_else(fail)?,
    };
    let net = Net::make(Ip::of(ip.addr), prefix, false).map_err(|_| fail())?;
    Ok((ip, net))
}

/// Whether `ip/net` as an interface counts as loopback for Salt's `_subnets`.
fn interface_is_loopback(ip: &Ip, net: &Net) -> bool {
    match ip.family() {
        Family::V4 => ip.is_loopback(),
        Family::V6 => ip.is_loopback() && net.is_loopback(),
    }
}

/// Salt's `calc_net`.
fn calc_net(ip_addr: &Value, netmask: Option<&Value>) -> Result<Net, FnError> {
    match netmask {
        Some(mask) => ip_network(
            &Value::from(format!("{}/{}", py_str(ip_addr), py_str(mask))),
            false,
        ),
        None => ip_network(ip_addr, false),
    }
}

/// Salt's `convert_cidr`.
fn convert_cidr(cidr: &Value) -> Result<Value, FnError> {
    let net = calc_net(cidr, None)?;
    let net = ip_network(&Value::from(net.to_string()), true)?;
    let network = match &net.scope {
        Some(scope) => format!("{}%{scope}", py_ip(&net.addr)),
        None => py_ip(&net.addr),
    };
    Ok(map([
        ("network", Value::from(network)),
        ("netmask", Value::from(py_ip(&net.netmask()))),
        ("broadcast", Value::from(py_ip(&net.broadcast()))),
    ]))
}

/// Salt's `salt.utils.network.in_subnet(cidr, addr)`: an invalid network is False; without
/// addresses, this host's (loopback left out).
async fn in_subnet(cidr: &Value, addr: Option<&Value>) -> Result<bool, FnError> {
    let Ok(net) = Net::of(cidr, true) else {
        tracing::error!("Invalid CIDR '{}'", py_str(cidr));
        return Ok(false);
    };
    let addrs: Vec<Value> = match addr {
        None => {
            let ifaces = interfaces().await?;
            let mut all = ips_of(&ifaces, None, &Value::Nil, Family::V4)?;
            all.extend(ips_of(&ifaces, None, &Value::Nil, Family::V6)?);
            all.into_iter()
                .map(|ip| Value::from(ip.to_string()))
                .collect()
        }
        Some(Value::Array(items)) => items.clone(),
        Some(one) => vec![one.clone()],
    };
    for item in &addrs {
        if net.contains(&ip_address(item)?) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The `cidr` and `type` filters of `ip_addrs`.
fn filter_addrs(addrs: Vec<Ip>, cidr: &Value, kind: &Value) -> Vec<String> {
    if py_truthy(cidr) {
        // Salt asks `in_subnet(cidr, [addr])` of each address: an invalid network keeps none.
        let net = Net::of(cidr, true).ok();
        return addrs
            .into_iter()
            .filter(|ip| net.as_ref().is_some_and(|n| n.contains(ip)))
            .map(|ip| ip.to_string())
            .collect();
    }
    let keep = |ip: &Ip| match kind.as_str() {
        Some("public") => !ip.is_private(),
        Some("private") => ip.is_private(),
        _ => true,
    };
    addrs
        .into_iter()
        .filter(keep)
        .map(|ip| ip.to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------
// Interfaces

/// Salt's `linux_interfaces`: `ip link show` and `ip addr show` parsed together, or
/// `ifconfig -a` when there is no `ip`; nothing when there is neither.
async fn interfaces() -> Result<Dict, FnError> {
    if let Some(ip) = cmd::which("ip") {
        let link = merged_output(&ip, &["link", "show"]).await?;
        let addr = merged_output(&ip, &["addr", "show"]).await?;
        parse_ip_interfaces(&format!("{link}\n{addr}"))
    } else if let Some(ifconfig) = cmd::which("ifconfig") {
        parse_ifconfig(&merged_output(&ifconfig, &["-a"]).await?)
    } else {
        Ok(Dict::default())
    }
}

/// The output of a program with its errors interleaved (Python's `Popen(stdout=PIPE,
/// stderr=STDOUT).communicate()[0]`), in the minion's own environment.
async fn merged_output(prog: &str, argv: &[&str]) -> Result<String, FnError> {
    use tokio::io::AsyncReadExt;
    let os_err = |e: std::io::Error| FnError::Exception(brine_protocol::pyrepr::os_error(&e, None));
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(os_err)?;
    let theirs2 = theirs.try_clone().map_err(os_err)?;
    let mut command = tokio::process::Command::new(prog);
    command
        .args(argv)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            theirs,
        )))
        .stderr(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            theirs2,
        )))
        .kill_on_drop(true);
    let spawned = command.spawn();
    // Our copies of the child's ends must be closed, or reading never ends.
    drop(command);
    let mut child = spawned
        .map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_error(&e, Some(prog))))?;
    ours.set_nonblocking(true).map_err(os_err)?;
    let mut reader = tokio::net::UnixStream::from_std(ours).map_err(os_err)?;
    let mut out = Vec::new();
    // A read error ends the output; what was read is kept.
    let _ = reader.read_to_end(&mut out).await;
    let _ = child.wait().await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Salt's `cidr_to_ipv4_netmask`: "" outside 1..=32.
fn cidr_to_ipv4_netmask(bits: i64) -> String {
    if !(1..=32).contains(&bits) {
        return String::new();
    }
    let mut left = bits;
    let mut parts = Vec::new();
    for _ in 0..4 {
        if left >= 8 {
            parts.push("255".to_string());
            left -= 8;
        } else {
            parts.push((256 - (1i64 << (8 - left))).to_string());
            left = 0;
        }
    }
    parts.join(".")
}

/// `cols[cols.index(word) + 1]` when `word` is among `cols`.
fn after<'a>(cols: &[&'a str], word: &str) -> Result<Option<&'a str>, FnError> {
    match cols.iter().position(|c| *c == word) {
        Some(i) => at(cols, i + 1).map(Some),
        None => Ok(None),
    }
}

/// Salt's `_interfaces_ip`: the output of `ip link show` and `ip addr show`.
pub(crate) fn parse_ip_interfaces(out: &str) -> Result<Dict, FnError> {
    static GROUPS: OnceLock<Regex> = OnceLock::new();
    static HEADER: OnceLock<Regex> = OnceLock::new();
    let groups = regex(&GROUPS, r"\r?\n\d");
    let header = regex(&HEADER, r"^\d*:\s+([\w.\-]+)@?([\w.\-]+)?:\s+<(.+)>");
    let mut ret = Dict::default();
    for group in groups.split(out) {
        let mut iface: Option<String> = None;
        let mut data = Dict::default();
        for line in splitlines(group) {
            if !line.contains(' ') {
                continue;
            }
            if let Some(c) = header.captures(line) {
                iface = Some(c[1].to_string());
                data.set("up", c[3].split(',').any(|a| a == "UP"));
                if let Some(parent) = c.get(2) {
                    data.set("parent", parent.as_str());
                }
                continue;
            }
            let cols = py_split(line);
            if cols.len() < 2 {
                continue;
            }
            let (kind, value, label) = (cols[0], cols[1], cols[cols.len() - 1]);
            if kind == "inet" || kind == "inet6" {
                let (ip, cidr) = match value.split('/').collect::<Vec<_>>()[..] {
                    [ip] => (ip, Value::from(32)),
                    [ip, cidr] => (ip, Value::from(cidr)),
                    _ => return Err(value_error("too many values to unpack (expected 2)")),
                };
                let secondary = cols.contains(&"secondary");
                let mut addr = Dict::default();
                if secondary {
                    addr.set("type", kind);
                }
                addr.set("address", ip);
                if kind == "inet" {
                    let prefix = py_int(&cidr).map_err(value_error)?;
                    let broadcast = after(&cols, "brd")?;
                    addr.set("netmask", cidr_to_ipv4_netmask(prefix));
                    addr.set("broadcast", broadcast.map_or(Value::Nil, Value::from));
                    addr.set("label", label);
                } else {
                    let scope = after(&cols, "scope")?;
                    addr.set("prefixlen", cidr);
                    addr.set("scope", scope.map_or(Value::Nil, Value::from));
                }
                let list = if secondary { "secondary" } else { kind };
                if data.get(list).is_none() {
                    data.set(list, Value::Array(vec![]));
                }
                if let Some(Value::Array(items)) = data.get_mut(list) {
                    items.push(addr.into_value());
                }
            } else if kind.starts_with("link") {
                data.set("hwaddr", value);
            }
        }
        if let Some(name) = iface {
            ret.set(name, data.into_value());
        }
    }
    Ok(ret)
}

/// Python's `re.split("\r?\n(?=\S)", out)`: groups that start at an unindented line.
fn unindented_groups(out: &str) -> Vec<&str> {
    let mut groups = Vec::new();
    let mut start = 0;
    for (i, c) in out.char_indices() {
        if c != '\n' || i < start {
            continue;
        }
        if out[i + 1..]
            .chars()
            .next()
            .is_some_and(|n| !n.is_whitespace())
        {
            let end = if i > start && out.as_bytes()[i - 1] == b'\r' {
                i - 1
            } else {
                i
            };
            groups.push(&out[start..end]);
            start = i + 1;
        }
    }
    groups.push(&out[start..]);
    groups
}

/// Salt's `_interfaces_ifconfig` (Linux flavour): the output of `ifconfig -a`.
pub(crate) fn parse_ifconfig(out: &str) -> Result<Dict, FnError> {
    static IFACE: OnceLock<Regex> = OnceLock::new();
    static MAC: OnceLock<Regex> = OnceLock::new();
    static IP: OnceLock<Regex> = OnceLock::new();
    static IP6: OnceLock<Regex> = OnceLock::new();
    static MASK6: OnceLock<Regex> = OnceLock::new();
    static MASK: OnceLock<Regex> = OnceLock::new();
    static BCAST: OnceLock<Regex> = OnceLock::new();
    let piface = regex(&IFACE, r"^([^\s:]+)");
    let pmac = regex(
        &MAC,
        r"^.*?(?:HWaddr|ether|address:|lladdr) ([0-9a-fA-F:]+)",
    );
    let pip = regex(&IP, r"^.*?(?:inet addr:|inet [^\d]*)(.*?)\s");
    let pip6 = regex(&IP6, r"^.*?(?:inet6 addr: (.*?)/|inet6 )([0-9a-fA-F:]+)");
    let pmask6 = regex(
        &MASK6,
        r"^.*?(?:inet6 addr: [0-9a-fA-F:]+/(\d+)|prefixlen (\d+))(?: Scope:([a-zA-Z]+)| scopeid (0x[0-9a-fA-F]))?",
    );
    let pmask = regex(
        &MASK,
        r"^.*?(?:Mask:|netmask )(?:((?:0x)?[0-9a-fA-F]{8})|([\d\.]+))",
    );
    let pbcast = regex(&BCAST, r"^.*?(?:Bcast:|broadcast )([\d\.]+)");
    let push = |data: &mut Dict, key: &str, item: Value| {
        if data.get(key).is_none() {
            data.set(key, Value::Array(vec![]));
        }
        if let Some(Value::Array(items)) = data.get_mut(key) {
            items.push(item);
        }
    };

    let mut ret = Dict::default();
    for group in unindented_groups(out) {
        let mut data = Dict::default();
        let mut iface = String::new();
        let mut updown = false;
        for line in splitlines(group) {
            if let Some(c) = piface.captures(line) {
                iface = c[1].to_string();
            }
            if let Some(c) = pmac.captures(line) {
                data.set("hwaddr", &c[1]);
            }
            if let Some(c) = pip.captures(line) {
                let mut addr = Dict::default();
                addr.set("address", &c[1]);
                if let Some(m) = pmask.captures(line) {
                    let mask = match (m.get(1), m.get(2)) {
                        (Some(hex), _) => {
                            let digits = hex.as_str().trim_start_matches("0x");
                            let n = u32::from_str_radix(digits, 16).unwrap_or_default();
                            Ipv4Addr::from(n).to_string()
                        }
                        (None, Some(dotted)) => dotted.as_str().to_string(),
                        (None, None) => String::new(),
                    };
                    addr.set("netmask", mask);
                }
                if let Some(b) = pbcast.captures(line) {
                    addr.set("broadcast", &b[1]);
                }
                push(&mut data, "inet", addr.into_value());
            }
            if line.contains("UP") {
                updown = true;
            }
            if let Some(c) = pip6.captures(line) {
                let mut addr = Dict::default();
                let address = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
                addr.set("address", address);
                if let Some(m) = pmask6.captures(line) {
                    let prefix = m.get(1).or_else(|| m.get(2)).map(|p| p.as_str());
                    addr.set("prefixlen", prefix.map_or(Value::Nil, Value::from));
                    let scope = m.get(3).or_else(|| m.get(4));
                    addr.set(
                        "scope",
                        scope.map_or(Value::Nil, |s| Value::from(s.as_str().to_lowercase())),
                    );
                }
                push(&mut data, "inet6", addr.into_value());
            }
        }
        data.set("up", updown);
        let key = Value::from(iface);
        let merged = match ret.get_any(&key) {
            // An interface seen twice: the values seen first win, then the new addresses
            // are added.
            Some(Value::Map(old)) => {
                let mut merged = data.clone();
                for (k, v) in old {
                    merged.set(k.clone(), v.clone());
                }
                for list in ["inet", "inet6"] {
                    let Some(Value::Array(new)) = data.get(list) else {
                        continue;
                    };
                    if let Some(Value::Array(items)) = merged.get_mut(list) {
                        for item in new {
                            if !items.contains(item) {
                                items.push(item.clone());
                            }
                        }
                    }
                }
                merged
            }
            _ => data,
        };
        ret.set(key, merged.into_value());
    }
    Ok(ret)
}

/// Salt's `_get_iface_info`: the interfaces when `iface` is one of them, else the message.
async fn iface_field(iface: &Value, field: impl Fn(&Dict) -> Value) -> Result<Value, FnError> {
    let ifaces = interfaces().await?;
    match ifaces.get_any(iface) {
        Some(Value::Map(data)) => Ok(field(&Dict(data.clone()))),
        Some(_) => Ok(field(&Dict::default())),
        None => {
            let names: Vec<String> = ifaces.keys().map(py_str).collect();
            let msg = format!(
                "Interface \"{}\" not in available interfaces: \"{}\"",
                py_str(iface),
                names.join("\", \"")
            );
            tracing::error!("{msg}");
            Ok(Value::from(msg))
        }
    }
}

/// Salt's `_filter_interfaces`: the interfaces whose names match one of the globs.
fn filter_interfaces(ifaces: &Dict, interface: Option<&Value>) -> Vec<Value> {
    let patterns = interface.map(split_input);
    ifaces
        .0
        .iter()
        .filter(|(name, _)| match &patterns {
            None => true,
            Some(patterns) => {
                let name = py_str(name);
                patterns
                    .iter()
                    .any(|p| brine_protocol::target::fnmatch(p, &name))
            }
        })
        .map(|(_, data)| data.clone())
        .collect()
}

/// Salt's `_get_ips`: an interface's addresses of one family, secondary ones after.
fn addresses_of(data: &Value, family: Family) -> Vec<Value> {
    let mut out = match get(data, family.key()) {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    if let Some(Value::Array(secondary)) = get(data, "secondary") {
        out.extend(
            secondary
                .iter()
                .filter(|a| get_str(a, "type") == Some(family.key()))
                .cloned(),
        );
    }
    out
}

/// Salt's `_ip_addrs`: the addresses, deduplicated and sorted.
fn ips_of(
    ifaces: &Dict,
    interface: Option<&Value>,
    include_loopback: &Value,
    family: Family,
) -> Result<Vec<Ip>, FnError> {
    let mut found: Vec<Ip> = Vec::new();
    for data in filter_interfaces(ifaces, interface) {
        for addr in addresses_of(&data, family) {
            let ip = ip_address(get(&addr, "address").unwrap_or(&Value::Nil))?;
            if (!ip.is_loopback() || py_truthy(include_loopback)) && !found.contains(&ip) {
                found.push(ip);
            }
        }
    }
    found.sort_by_key(Ip::bits);
    Ok(found)
}

async fn ip_addrs(
    interface: Option<&Value>,
    include_loopback: &Value,
    family: Family,
) -> Result<Vec<Ip>, FnError> {
    ips_of(&interfaces().await?, interface, include_loopback, family)
}

/// Salt's `_subnets`.
async fn subnets(only: Option<&Value>, family: Family) -> Result<Value, FnError> {
    let all = interfaces().await?;
    let selected: Vec<Value> = match only {
        None => all.0.iter().map(|(_, d)| d.clone()).collect(),
        Some(Value::Array(names)) => all
            .0
            .iter()
            .filter(|(k, _)| names.contains(k))
            .map(|(_, d)| d.clone())
            .collect(),
        Some(v @ Value::Map(_)) => {
            return Err(FnError::InvalidArgs(format!(
                "unhashable type: '{}'",
                py_type_name(v)
            )))
        }
        Some(name) => vec![all
            .get_any(name)
            .cloned()
            .unwrap_or_else(|| Value::Map(vec![]))],
    };
    let (mask_key, default) = match family {
        Family::V4 => ("netmask", 32),
        Family::V6 => ("prefixlen", 128),
    };
    let mut nets: Vec<Net> = Vec::new();
    for data in &selected {
        for addr in addresses_of(data, family) {
            let address = py_str(get(&addr, "address").unwrap_or(&Value::Nil));
            let text = match get(&addr, mask_key) {
                Some(mask) => format!("{address}/{}", py_str(mask)),
                None => format!("{address}/{default}"),
            };
            let (ip, net) = ip_interface(&text)?;
            if !interface_is_loopback(&ip, &net) && !nets.contains(&net) {
                nets.push(net);
            }
        }
    }
    nets.sort_by_key(Net::sort_key);
    Ok(strings(nets.iter().map(Net::to_string)))
}

/// Salt's `_ip_networks`.
async fn ip_networks(
    interface: Option<&Value>,
    include_loopback: &Value,
    verbose: &Value,
    family: Family,
) -> Result<Value, FnError> {
    let ifaces = interfaces().await?;
    let mask_key = match family {
        Family::V4 => "netmask",
        Family::V6 => "prefixlen",
    };
    let mut nets: Vec<Net> = Vec::new();
    for data in filter_interfaces(&ifaces, interface) {
        for addr in addresses_of(&data, family) {
            let (Some(ip), Some(mask)) = (get(&addr, "address"), get(&addr, mask_key)) else {
                continue;
            };
            if !py_truthy(ip) || !py_truthy(mask) {
                continue;
            }
            let text = Value::from(format!("{}/{}", py_str(ip), py_str(mask)));
            let Ok(net) = Net::of(&text, false) else {
                continue;
            };
            if (!net.is_loopback() || py_truthy(include_loopback)) && !nets.contains(&net) {
                nets.push(net);
            }
        }
    }
    nets.sort_by_key(Net::sort_key);
    if !py_truthy(verbose) {
        return Ok(strings(nets.iter().map(Net::to_string)));
    }
    Ok(Value::Map(
        nets.iter()
            .map(|n| {
                (
                    Value::from(n.to_string()),
                    map([
                        ("address", Value::from(py_ip(&n.addr))),
                        ("netmask", Value::from(py_ip(&n.netmask()))),
                        ("num_addresses", n.num_addresses()),
                        ("prefixlen", Value::from(n.prefix)),
                    ]),
                )
            })
            .collect(),
    ))
}

/// Salt's `ifacestartswith`.
async fn ifacestartswith(cidr: &Value) -> Result<Value, FnError> {
    let pattern: Vec<char> = py_str(cidr).chars().collect();
    let mut names = Vec::new();
    for (name, data) in interfaces().await?.0 {
        let Some(Value::Array(inet)) = get(&data, "inet") else {
            continue;
        };
        for addr in inet {
            let address: Vec<char> = get_str(addr, "address")
                .unwrap_or_default()
                .chars()
                .collect();
            if address.iter().take(pattern.len()).eq(pattern.iter()) {
                names.push(get(addr, "label").cloned().unwrap_or_else(|| name.clone()));
            }
        }
    }
    Ok(Value::Array(names))
}

/// Salt's `iphexval`.
fn iphexval(ip: &Value) -> Result<Value, FnError> {
    let Some(text) = ip.as_str() else {
        return Err(FnError::Exception(format!(
            "AttributeError: '{}' object has no attribute 'split'",
            py_type_name(ip)
        )));
    };
    let mut out = String::new();
    for part in text.split('.') {
        let n = py_int(&Value::from(part)).map_err(value_error)?;
        let hex = format!("{:X}", n.unsigned_abs());
        out.push_str(&match (n < 0, hex.len()) {
            (true, _) => format!("-{hex}"),
            (false, 1) => format!("0{hex}"),
            (false, _) => hex,
        });
    }
    Ok(Value::from(out))
}

// ---------------------------------------------------------------------------------------
// Commands: ping, netstat, routes, neighbours

/// Salt's `sanitize_host`: an IP address as it is, anything else cut to 255 characters of
/// letters, digits, `.`, `-` and `_`.
fn sanitize_host(host: &Value) -> Result<String, FnError> {
    let Some(text) = host.as_str() else {
        return Err(FnError::InvalidArgs(format!(
            "'{}' object is not subscriptable",
            py_type_name(host)
        )));
    };
    if Ip::parse(text).is_some() {
        return Ok(text.to_string());
    }
    Ok(text
        .chars()
        .take(255)
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect())
}

/// Salt's `ping`.
async fn ping(
    ctx: &Context,
    host: &Value,
    timeout: &Value,
    return_boolean: &Value,
    st: &mut CallState,
) -> Result<Value, FnError> {
    let kernel = get_str(&ctx.grains, "kernel").unwrap_or_default();
    let host = sanitize_host(host)?;
    let command = if !py_truthy(timeout) {
        format!("ping -c 4 {host}")
    } else if kernel == "SunOS" {
        format!("ping -c 4 {host} {}", py_str(timeout))
    } else {
        format!("ping -W {} -c 4 {host}", py_str(timeout))
    };
    if py_truthy(return_boolean) {
        let ret = salt_cmd(ctx, cmd::Fun::RunAll, command, &[], st).await?;
        let retcode = get(&ret, "retcode").and_then(Value::as_i64);
        Ok(Value::Boolean(retcode == Some(0)))
    } else {
        salt_cmd(ctx, cmd::Fun::Run, command, &[], st).await
    }
}

fn unsupported() -> FnError {
    FnError::Execution("Not yet supported on this platform".into())
}

/// Salt's `netstat` on Linux: `netstat -tulpnea`, or `ss -tulpnea` without netstat.
async fn netstat(ctx: &Context, kernel: &str, st: &mut CallState) -> Result<Value, FnError> {
    if kernel != "Linux" {
        return Err(unsupported());
    }
    if cmd::which("netstat").is_none() {
        let out = salt_cmd(ctx, cmd::Fun::Run, "ss -tulpnea", &[], st).await?;
        parse_ss(&py_str(&out))
    } else {
        let out = salt_cmd(ctx, cmd::Fun::Run, "netstat -tulpnea", &[], st).await?;
        parse_netstat(&py_str(&out))
    }
}

/// Salt's `_netstat_linux`.
pub(crate) fn parse_netstat(out: &str) -> Result<Value, FnError> {
    let mut ret = Vec::new();
    for line in splitlines(out) {
        let comps = py_split(line);
        let c = |i| at(&comps, i).map(Value::from);
        if line.starts_with("tcp") {
            ret.push(map([
                ("proto", c(0)?),
                ("recv-q", c(1)?),
                ("send-q", c(2)?),
                ("local-address", c(3)?),
                ("remote-address", c(4)?),
                ("state", c(5)?),
                ("user", c(6)?),
                ("inode", c(7)?),
                ("program", c(8)?),
            ]));
        }
        if line.starts_with("udp") {
            ret.push(map([
                ("proto", c(0)?),
                ("recv-q", c(1)?),
                ("send-q", c(2)?),
                ("local-address", c(3)?),
                ("remote-address", c(4)?),
                ("user", c(5)?),
                ("inode", c(6)?),
                ("program", c(7)?),
            ]));
        }
    }
    Ok(Value::Array(ret))
}

/// Salt's `_ss_linux`. The user and inode stay the integer 0 when ss does not show them.
pub(crate) fn parse_ss(out: &str) -> Result<Value, FnError> {
    let mut ret = Vec::new();
    for line in splitlines(out) {
        let comps = py_split(line);
        let (tcp, udp) = (line.starts_with("tcp"), line.starts_with("udp"));
        let mut user = Value::from(0);
        let mut inode = Value::from(0);
        let mut program = String::new();
        if tcp || udp {
            // Salt looks at the fields from the seventh to the one before the last.
            for comp in comps.iter().take(comps.len().saturating_sub(1)).skip(6) {
                let fields: Vec<&str> = comp.split(':').collect();
                match fields[0] {
                    "users" => {
                        let users: Vec<&str> = at(&fields, 1)?.split(',').collect();
                        let quoted: Vec<&str> = users[0].split('"').collect();
                        program = at(&quoted, 1)?.to_string();
                    }
                    "uid" => user = Value::from(at(&fields, 1)?),
                    "ino" => inode = Value::from(at(&fields, 1)?),
                    _ => {}
                }
            }
        }
        let c = |i| at(&comps, i).map(Value::from);
        if tcp {
            let state = match at(&comps, 1)? {
                "ESTAB" => "ESTABLISHED",
                other => other,
            };
            ret.push(map([
                ("proto", c(0)?),
                ("recv-q", c(2)?),
                ("send-q", c(3)?),
                ("local-address", c(4)?),
                ("remote-address", c(5)?),
                ("state", Value::from(state)),
                ("user", user.clone()),
                ("inode", inode.clone()),
                ("program", Value::from(program.as_str())),
            ]));
        }
        if udp {
            ret.push(map([
                ("proto", c(0)?),
                ("recv-q", c(2)?),
                ("send-q", c(3)?),
                ("local-address", c(4)?),
                ("remote-address", c(5)?),
                ("user", user),
                ("inode", inode),
                ("program", Value::from(program)),
            ]));
        }
    }
    Ok(Value::Array(ret))
}

/// Salt's `active_tcp`: Linux reads /proc; other kernels have none here.
fn active_tcp(kernel: &str) -> Result<Value, FnError> {
    let mut ret = Dict::default();
    if kernel != "Linux" {
        return Ok(ret.into_value());
    }
    for path in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if !std::path::Path::new(path).is_file() {
            continue;
        }
        let data = std::fs::read(path)
            .map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_error(&e, Some(path))))?;
        collect_tcp(&String::from_utf8_lossy(&data), &mut ret)?;
    }
    Ok(ret.into_value())
}

/// The established connections of a /proc/net/tcp file, numbered on from `ret`'s size.
pub(crate) fn collect_tcp(text: &str, ret: &mut Dict) -> Result<(), FnError> {
    for line in text.split_inclusive('\n') {
        if line.trim().starts_with("sl") {
            continue;
        }
        let conn = parse_tcp_line(line)?;
        if conn.state == 1 {
            let slot = ret.len() as u64;
            ret.set(
                slot,
                map([
                    ("local_addr", Value::from(conn.local_addr)),
                    ("local_port", Value::from(conn.local_port)),
                    ("remote_addr", Value::from(conn.remote_addr)),
                    ("remote_port", Value::from(conn.remote_port)),
                ]),
            );
        }
    }
    Ok(())
}

/// One line of /proc/net/tcp.
#[derive(Debug, Clone, PartialEq)]
struct TcpLine {
    local_addr: String,
    local_port: u64,
    remote_addr: String,
    remote_port: u64,
    state: u64,
}

/// Python's `int(text, 16)`.
fn hex_int(text: &str) -> Result<u64, FnError> {
    u64::from_str_radix(text.trim(), 16).map_err(|_| {
        value_error(format!(
            "invalid literal for int() with base 16: {}",
            brine_protocol::pyrepr::str_repr(text)
        ))
    })
}

/// `a, b = text.split(":")`.
fn split_pair(text: &str) -> Result<(&str, &str), FnError> {
    let parts: Vec<&str> = text.split(':').collect();
    match parts[..] {
        [a, b] => Ok((a, b)),
        [_] => Err(value_error(
            "not enough values to unpack (expected 2, got 1)",
        )),
        _ => Err(value_error("too many values to unpack (expected 2)")),
    }
}

/// Salt's `_parse_tcp_line`.
fn parse_tcp_line(line: &str) -> Result<TcpLine, FnError> {
    let comps = py_split(line.trim());
    let (l_addr, l_port) = split_pair(at(&comps, 1)?)?;
    let (r_addr, r_port) = split_pair(at(&comps, 2)?)?;
    Ok(TcpLine {
        local_addr: hex2ip(l_addr, true),
        local_port: hex_int(l_port)?,
        remote_addr: hex2ip(r_addr, true),
        remote_port: hex_int(r_port)?,
        state: hex_int(at(&comps, 3)?)?,
    })
}

/// Salt's `hex2ip`: an address in /proc's hexadecimal form (`invert`: in host byte order).
pub(crate) fn hex2ip(hex: &str, invert: bool) -> String {
    if hex.chars().count() == 32 {
        if !hex.is_ascii() {
            return hex.to_string();
        }
        let mut groups = Vec::new();
        for i in (0..32).step_by(8) {
            let b: Vec<&str> = (0..4).map(|j| &hex[i + 2 * j..i + 2 * j + 2]).collect();
            groups.push(if invert {
                format!("{}{}:{}{}", b[3], b[2], b[1], b[0])
            } else {
                format!("{}{}:{}{}", b[0], b[1], b[2], b[3])
            });
        }
        let text = groups.join(":");
        return match text.parse::<Ipv6Addr>() {
            Ok(a) => match a.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => py_ip(&IpAddr::V6(a)),
            },
            Err(_) => {
                tracing::error!("hex2ip - ipv6 address error: {text}");
                hex.to_string()
            }
        };
    }
    let digits = hex.trim();
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return hex.to_string();
    }
    // Only the low 32 bits matter.
    let low = &digits[digits.len().saturating_sub(8)..];
    let n = u32::from_str_radix(low, 16).unwrap_or_default();
    let o = n.to_be_bytes();
    if invert {
        format!("{}.{}.{}.{}", o[3], o[2], o[1], o[0])
    } else {
        format!("{}.{}.{}.{}", o[0], o[1], o[2], o[3])
    }
}

/// Salt's `arp` (Linux form: `? (10.0.0.1) at aa:bb:... [ether] on eth0`).
pub(crate) fn parse_arp(out: &str, kernel: &str) -> Dict {
    let mut ret = Dict::default();
    for line in splitlines(out) {
        let comps = py_split(line);
        if comps.len() < 4 {
            continue;
        }
        match kernel {
            "SunOS" => {
                let last = comps[comps.len() - 1];
                if last.contains(':') {
                    ret.set(last, comps[1]);
                }
            }
            "OpenBSD" => {
                if comps[0] != "Host" && comps[1] != "(incomplete)" {
                    ret.set(comps[1], comps[0]);
                }
            }
            "AIX" if matches!(comps[0], "bucket" | "There") => {}
            _ => ret.set(
                comps[3],
                comps[1].trim_start_matches('(').trim_end_matches(')'),
            ),
        }
    }
    ret
}

/// Salt's `ip_neighs` (IPv4) and `ip_neighs6`.
pub(crate) fn parse_neighs(out: &str, v6: bool) -> Dict {
    let mut ret = Dict::default();
    for line in splitlines(out) {
        let comps = py_split(line);
        if comps.len() < 5 {
            continue;
        }
        if comps[0].contains(if v6 { ':' } else { '.' }) {
            ret.set(comps[4], comps[0]);
        }
    }
    ret
}

/// Salt's `routes` family check.
fn check_family(family: &Value) -> Result<(), FnError> {
    match family {
        Value::Nil => Ok(()),
        f if matches!(f.as_str(), Some("inet" | "inet6")) => Ok(()),
        other => Err(FnError::Execution(format!(
            "Invalid address family {}",
            py_str(other)
        ))),
    }
}

/// Salt's `routes` on Linux: `netstat -rn` per family, or `ip route` without netstat.
async fn routes(
    ctx: &Context,
    family: &Value,
    kernel: &str,
    st: &mut CallState,
) -> Result<Value, FnError> {
    check_family(family)?;
    if kernel != "Linux" {
        return Err(unsupported());
    }
    let shell = [("python_shell", Value::Boolean(true))];
    let all = if cmd::which("netstat").is_none() {
        let v4 = salt_cmd(
            ctx,
            cmd::Fun::Run,
            "ip -4 route show table main",
            &shell,
            st,
        )
        .await?;
        let v6 = salt_cmd(ctx, cmd::Fun::Run, "ip -6 route show table all", &shell, st).await?;
        parse_ip_routes(&py_str(&v4), &py_str(&v6))?
    } else {
        let v4 = salt_cmd(
            ctx,
            cmd::Fun::Run,
            "netstat -A inet -rn | tail -n+3",
            &shell,
            st,
        )
        .await?;
        let v6 = salt_cmd(
            ctx,
            cmd::Fun::Run,
            "netstat -A inet6 -rn | tail -n+3",
            &shell,
            st,
        )
        .await?;
        parse_netstat_routes(&py_str(&v4), &py_str(&v6))?
    };
    if !py_truthy(family) {
        return Ok(Value::Array(all));
    }
    Ok(Value::Array(
        all.into_iter()
            .filter(|r| get(r, "addr_family") == Some(family))
            .collect(),
    ))
}

fn route(
    family: &str,
    destination: &str,
    gateway: &str,
    netmask: &str,
    flags: &str,
    interface: &str,
) -> Value {
    map([
        ("addr_family", Value::from(family)),
        ("destination", Value::from(destination)),
        ("gateway", Value::from(gateway)),
        ("netmask", Value::from(netmask)),
        ("flags", Value::from(flags)),
        ("interface", Value::from(interface)),
    ])
}

/// Salt's `_netstat_route_linux`: the tables of `netstat -A inet -rn` and `netstat -A
/// inet6 -rn` without their two header lines.
pub(crate) fn parse_netstat_routes(v4: &str, v6: &str) -> Result<Vec<Value>, FnError> {
    let mut ret = Vec::new();
    for line in splitlines(v4) {
        let c = py_split(line);
        ret.push(route(
            "inet",
            at(&c, 0)?,
            at(&c, 1)?,
            at(&c, 2)?,
            at(&c, 3)?,
            at(&c, 7)?,
        ));
    }
    for line in splitlines(v6) {
        let c = py_split(line);
        if c.len() == 6 || c.len() == 7 {
            ret.push(route("inet6", c[0], c[1], "", c[2], c[c.len() - 1]));
        }
    }
    Ok(ret)
}

/// Salt's `convert_cidr` of route text: (network, netmask).
fn route_net(text: &str) -> Result<(String, String), FnError> {
    let net = convert_cidr(&Value::from(text))?;
    Ok((
        get_str(&net, "network").unwrap_or_default().to_string(),
        get_str(&net, "netmask").unwrap_or_default().to_string(),
    ))
}

/// Salt's `_ip_route_linux`: `ip -4 route show table main` and `ip -6 route show table all`
/// in netstat's shape.
pub(crate) fn parse_ip_routes(v4: &str, v6: &str) -> Result<Vec<Value>, FnError> {
    let mut ret = Vec::new();
    for line in splitlines(v4) {
        let c = py_split(line);
        match at(&c, 0)? {
            "unreachable" => continue,
            "default" => {
                let iface = if at(&c, 3)? == "dev" { at(&c, 4)? } else { "" };
                ret.push(route("inet", "0.0.0.0", at(&c, 2)?, "0.0.0.0", "UG", iface));
            }
            dest => {
                let (network, netmask) = route_net(dest)?;
                let iface = if at(&c, 1)? == "dev" { at(&c, 2)? } else { "" };
                ret.push(route("inet", &network, "0.0.0.0", &netmask, "U", iface));
            }
        }
    }
    for line in splitlines(v6) {
        let c = py_split(line);
        match at(&c, 0)? {
            "unicast" | "broadcast" | "throw" | "unreachable" | "prohibit" | "blackhole"
            | "nat" | "anycast" | "multicast" => continue,
            "default" => {
                let iface = if at(&c, 3)? == "dev" { at(&c, 4)? } else { "" };
                ret.push(route("inet6", "::/0", at(&c, 2)?, "", "UG", iface));
            }
            "local" => {
                let iface = if at(&c, 2)? == "dev" { at(&c, 3)? } else { "" };
                let dest = format!("{}/128", at(&c, 1)?);
                ret.push(route("inet6", &dest, "::", "", "U", iface));
            }
            dest => {
                // Salt converts the destination only to check it.
                route_net(dest)?;
                let iface = if at(&c, 1)? == "dev" { at(&c, 2)? } else { "" };
                ret.push(route("inet6", dest, "::", "", "U", iface));
            }
        }
    }
    Ok(ret)
}

/// Salt's `default_route` on Linux.
async fn default_route(
    ctx: &Context,
    family: &Value,
    kernel: &str,
    st: &mut CallState,
) -> Result<Value, FnError> {
    check_family(family)?;
    let Value::Array(all) = routes(ctx, family, kernel, st).await? else {
        return Ok(Value::Array(vec![]));
    };
    let defaults = |f: &str| match f {
        "inet" => ["0.0.0.0", "default"],
        _ => ["::/0", "default"],
    };
    let wanted: Vec<&str> = match family.as_str() {
        Some(f) => defaults(f).to_vec(),
        None => [defaults("inet"), defaults("inet6")].concat(),
    };
    Ok(Value::Array(
        all.into_iter()
            .filter(|r| get_str(r, "destination").is_some_and(|d| wanted.contains(&d)))
            .collect(),
    ))
}

/// Salt's `get_route` on Linux. Salt runs `ip route get <ip>` in a shell; here the words
/// are split as the shell would but nothing else of the shell runs.
async fn get_route(
    ctx: &Context,
    ip: &Value,
    kernel: &str,
    st: &mut CallState,
) -> Result<Value, FnError> {
    if kernel != "Linux" {
        return Err(unsupported());
    }
    let out = salt_cmd(
        ctx,
        cmd::Fun::Run,
        format!("ip route get {}", py_str(ip)),
        &[],
        st,
    )
    .await?;
    parse_route_get(&py_str(&out), ip)
}

/// The route `ip route get <ip>` printed, as Salt's `get_route` reads its first line.
pub(crate) fn parse_route_get(out: &str, ip: &Value) -> Result<Value, FnError> {
    static ROUTE: OnceLock<Regex> = OnceLock::new();
    let first = splitlines(out).first().copied().ok_or_else(index_error)?;
    let re = regex(
        &ROUTE,
        r"(via\s+(?P<gateway>[\w\.:]+))?\s+dev\s+(?P<interface>[\w\.\:\-]+)\s+.*src\s+(?P<source>[\w\.:]+)",
    );
    let Some(m) = re.captures(first) else {
        return Err(FnError::Exception(
            "AttributeError: 'NoneType' object has no attribute 'group'".into(),
        ));
    };
    let group = |name: &str| m.name(name).map_or(Value::Nil, |g| Value::from(g.as_str()));
    Ok(map([
        ("destination", ip.clone()),
        ("gateway", group("gateway")),
        ("interface", group("interface")),
        ("source", group("source")),
    ]))
}

// ---------------------------------------------------------------------------------------
// connect

/// Salt's validation of an address with an optional `/mask` (`salt.utils.validate.net`).
fn is_ip_with_mask(host: &Value, family: Family) -> bool {
    let Some(text) = host.as_str() else {
        return false;
    };
    let (ip, mask) = match text.rsplit_once('/') {
        Some((ip, mask)) => (ip, Value::from(mask)),
        None => (text, Value::from(family.width())),
    };
    let valid_ip = match family {
        Family::V4 => parse_v4(ip).is_some(),
        Family::V6 => ip.parse::<Ipv6Addr>().is_ok(),
    };
    valid_ip && py_int(&mask).is_ok_and(|m| (1..=i64::from(family.width())).contains(&m))
}

/// Python's IDNA encoding of an ASCII host name: its labels are 1 to 63 characters (the
/// last may be empty).
fn idna_check(host: &str) -> Result<(), FnError> {
    if !host.is_ascii() {
        return Ok(());
    }
    let labels: Vec<&str> = host.split('.').collect();
    let fail = |what: &str| {
        FnError::Exception(format!(
            "UnicodeError: encoding with 'idna' codec failed (UnicodeError: {what})"
        ))
    };
    if labels[..labels.len() - 1]
        .iter()
        .any(|l| l.is_empty() || l.len() >= 64)
    {
        return Err(fail("label empty or too long"));
    }
    if labels[labels.len() - 1].len() >= 64 {
        return Err(fail("label too long"));
    }
    Ok(())
}

/// How long a connection may take: `None` waits as long as it takes; `Err` when Python's
/// `settimeout` would refuse the value or make the socket non-blocking.
fn connect_timeout(timeout: &Value) -> Result<Option<Duration>, ()> {
    let secs = match timeout {
        Value::Nil => return Ok(None),
        Value::Boolean(b) => f64::from(u8::from(*b)),
        Value::Integer(i) => i.as_f64().ok_or(())?,
        Value::F32(f) => f64::from(*f),
        Value::F64(f) => *f,
        _ => return Err(()),
    };
    if secs <= 0.0 {
        return Err(());
    }
    Duration::try_from_secs_f64(secs).map(Some).map_err(|_| ())
}

/// Salt's `connect`.
async fn connect(host: Value, port: Value, b: &Bound) -> Result<Value, FnError> {
    let result = |ok: bool, comment: String| {
        map([
            ("result", Value::Boolean(ok)),
            ("comment", Value::from(comment)),
        ])
    };
    if !py_truthy(&host) {
        return Ok(result(false, "Required argument, host, is missing.".into()));
    }
    if !py_truthy(&port) {
        return Ok(result(false, "Required argument, port, is missing.".into()));
    }
    let proto = b
        .kwarg("proto")
        .cloned()
        .unwrap_or_else(|| Value::from("tcp"));
    let timeout = b
        .kwarg("timeout")
        .cloned()
        .unwrap_or_else(|| Value::from(5));
    let family = b.kwarg("family").cloned().unwrap_or(Value::Nil);
    let address = if is_ip_with_mask(&host, Family::V4) || is_ip_with_mask(&host, Family::V6) {
        py_str(&host)
    } else {
        sanitize_host(&host)?
    };
    let udp = proto.as_str() == Some("udp");
    let proto = if udp { "udp" } else { "tcp" };
    let family = if py_truthy(&family) {
        match family.as_str() {
            Some("ipv4") => libc::AF_INET,
            Some("ipv6") => libc::AF_INET6,
            _ => libc::AF_UNSPEC,
        }
    } else {
        libc::AF_UNSPEC
    };
    idna_check(&address)?;
    let service = match &port {
        Value::Integer(i) => i.to_string(),
        Value::String(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        Value::Binary(b) => String::from_utf8_lossy(b).into_owned(),
        _ => return Err(FnError::Exception("OSError: Int or String expected".into())),
    };
    let (host_s, port_s) = (py_str(&host), py_str(&port));
    let protocol = if udp {
        libc::IPPROTO_UDP
    } else {
        libc::IPPROTO_TCP
    };
    let resolved = tokio::task::spawn_blocking(move || {
        netdb::getaddrinfo(&address, Some(&service), family, 0, protocol)
    })
    .await
    .map_err(|e| FnError::Exception(e.to_string()))?;
    let Some(first) = resolved.ok().and_then(|r| r.into_iter().next()) else {
        return Ok(result(
            false,
            format!("Unable to resolve host {host_s} on {proto} port {port_s}"),
        ));
    };
    let failed = || {
        result(
            false,
            format!(
                "Unable to connect to {host_s} ({}) on {proto} port {port_s}",
                first.numeric
            ),
        )
    };
    // Salt's UDP test hashes a str, which Python 3 refuses: it always fails.
    if udp {
        return Ok(failed());
    }
    let Ok(limit) = connect_timeout(&timeout) else {
        return Ok(failed());
    };
    let target = first.addr;
    let connected = tokio::task::spawn_blocking(move || {
        let stream = match limit {
            Some(limit) => std::net::TcpStream::connect_timeout(&target, limit),
            None => std::net::TcpStream::connect(target),
        }?;
        stream.shutdown(std::net::Shutdown::Both)
    })
    .await
    .map_err(|e| FnError::Exception(e.to_string()))?;
    Ok(match connected {
        Ok(()) => result(
            true,
            format!(
                "Successfully connected to {host_s} ({}) on {proto} port {port_s}",
                first.numeric
            ),
        ),
        Err(_) => failed(),
    })
}

/// Name service calls of the C library (`getaddrinfo`, `gethostbyaddr_r`, `gethostname`),
/// as Python's socket module makes them.
mod netdb {
    use std::ffi::{CStr, CString};
    use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};

    /// One getaddrinfo(3) result.
    #[derive(Debug, Clone)]
    pub(super) struct AddrInfo {
        pub(super) addr: SocketAddr,
        /// The address as Python shows it (`getnameinfo` with `NI_NUMERICHOST`).
        pub(super) numeric: String,
    }

    /// Convert a `sockaddr` to a Rust address.
    ///
    /// # Safety
    /// `sa` points to a valid socket address of at least `len` bytes.
    #[allow(unsafe_code)]
    unsafe fn socket_addr(sa: *const libc::sockaddr, len: libc::socklen_t) -> Option<SocketAddr> {
        let len = usize::try_from(len).ok()?;
        // SAFETY: the caller guarantees `sa` is valid for `len` bytes; each structure is
        // read only when the family says it is that structure and it fits in `len`.
        unsafe {
            match i32::from((*sa).sa_family) {
                libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
                    let sin = &*(sa as *const libc::sockaddr_in);
                    Some(SocketAddr::V4(SocketAddrV4::new(
                        u32::from_be(sin.sin_addr.s_addr).into(),
                        u16::from_be(sin.sin_port),
                    )))
                }
                libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
                    let sin6 = &*(sa as *const libc::sockaddr_in6);
                    Some(SocketAddr::V6(SocketAddrV6::new(
                        sin6.sin6_addr.s6_addr.into(),
                        u16::from_be(sin6.sin6_port),
                        u32::from_be(sin6.sin6_flowinfo),
                        sin6.sin6_scope_id,
                    )))
                }
                _ => None,
            }
        }
    }

    /// The numeric host of a `sockaddr`, as getnameinfo(3) writes it.
    ///
    /// # Safety
    /// `sa` points to a valid socket address of `len` bytes.
    #[allow(unsafe_code)]
    unsafe fn numeric_host(sa: *const libc::sockaddr, len: libc::socklen_t) -> Option<String> {
        let mut buf = [0 as libc::c_char; libc::NI_MAXHOST as usize];
        // SAFETY: `sa`/`len` are valid per the caller; `buf` is writable for its length
        // and getnameinfo NUL-terminates what it writes on success.
        unsafe {
            let rc = libc::getnameinfo(
                sa,
                len,
                buf.as_mut_ptr(),
                buf.len() as libc::socklen_t,
                std::ptr::null_mut(),
                0,
                libc::NI_NUMERICHOST,
            );
            (rc == 0).then(|| CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
        }
    }

    /// getaddrinfo(3) with these hints; the error code when it fails.
    #[allow(unsafe_code)]
    pub(super) fn getaddrinfo(
        host: &str,
        service: Option<&str>,
        family: i32,
        socktype: i32,
        protocol: i32,
    ) -> Result<Vec<AddrInfo>, i32> {
        let host = CString::new(host).map_err(|_| libc::EAI_NONAME)?;
        let service = service
            .map(CString::new)
            .transpose()
            .map_err(|_| libc::EAI_SERVICE)?;
        // SAFETY: addrinfo is a plain C structure for which all zeroes (null pointers,
        // zero integers) is the documented "no hints" value.
        let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
        hints.ai_family = family;
        hints.ai_socktype = socktype;
        hints.ai_protocol = protocol;
        let mut list: *mut libc::addrinfo = std::ptr::null_mut();
        // SAFETY: the strings are NUL-terminated and outlive the call; `hints` is valid;
        // on success `list` receives a list we free below exactly once.
        let rc = unsafe {
            libc::getaddrinfo(
                host.as_ptr(),
                service.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
                &hints,
                &mut list,
            )
        };
        if rc != 0 {
            return Err(rc);
        }
        let mut out = Vec::new();
        let mut cur = list;
        while !cur.is_null() {
            // SAFETY: `cur` is a node of the list getaddrinfo returned, valid until
            // freeaddrinfo; its ai_addr is valid for ai_addrlen bytes.
            unsafe {
                let ai = &*cur;
                if !ai.ai_addr.is_null() {
                    if let (Some(addr), Some(numeric)) = (
                        socket_addr(ai.ai_addr, ai.ai_addrlen),
                        numeric_host(ai.ai_addr, ai.ai_addrlen),
                    ) {
                        out.push(AddrInfo { addr, numeric });
                    }
                }
                cur = ai.ai_next;
            }
        }
        // SAFETY: `list` came from a successful getaddrinfo and is freed once.
        unsafe { libc::freeaddrinfo(list) };
        Ok(out)
    }

    #[allow(unsafe_code)]
    extern "C" {
        fn gethostbyaddr_r(
            addr: *const libc::c_void,
            len: libc::socklen_t,
            kind: libc::c_int,
            ret: *mut libc::hostent,
            buf: *mut libc::c_char,
            buflen: libc::size_t,
            result: *mut *mut libc::hostent,
            h_errnop: *mut libc::c_int,
        ) -> libc::c_int;
    }

    /// The name and aliases of an address (gethostbyaddr(3)); `None` when it has none.
    #[allow(unsafe_code)]
    fn names_of(addr: std::net::IpAddr) -> Option<(String, Vec<String>)> {
        let (bytes, kind): (Vec<u8>, i32) = match addr {
            std::net::IpAddr::V4(a) => (a.octets().to_vec(), libc::AF_INET),
            std::net::IpAddr::V6(a) => (a.octets().to_vec(), libc::AF_INET6),
        };
        let mut size = 16384;
        loop {
            let mut buf = vec![0 as libc::c_char; size];
            // SAFETY: hostent is a plain C structure; all zeroes is a valid value to be
            // overwritten.
            let mut entry: libc::hostent = unsafe { std::mem::zeroed() };
            let mut found: *mut libc::hostent = std::ptr::null_mut();
            let mut herr: libc::c_int = 0;
            // SAFETY: every pointer is valid for the sizes given; the results point into
            // `entry` and `buf`, which live until we have copied the names out.
            let rc = unsafe {
                gethostbyaddr_r(
                    bytes.as_ptr().cast(),
                    bytes.len() as libc::socklen_t,
                    kind,
                    &mut entry,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut found,
                    &mut herr,
                )
            };
            if rc == libc::ERANGE && size < 1 << 20 {
                size *= 4;
                continue;
            }
            if rc != 0 || found.is_null() || entry.h_name.is_null() {
                return None;
            }
            // SAFETY: on success h_name is a NUL-terminated string and h_aliases a
            // null-terminated array of them, all inside `buf`.
            unsafe {
                let name = CStr::from_ptr(entry.h_name).to_string_lossy().into_owned();
                let mut aliases = Vec::new();
                let mut p = entry.h_aliases;
                while !p.is_null() && !(*p).is_null() {
                    aliases.push(CStr::from_ptr(*p).to_string_lossy().into_owned());
                    p = p.add(1);
                }
                return Some((name, aliases));
            }
        }
    }

    /// Python's `socket.gethostname()`.
    #[allow(unsafe_code)]
    pub(super) fn hostname() -> String {
        let mut buf = [0 as libc::c_char; 256];
        // SAFETY: `buf` is writable for its length; the last byte stays NUL.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr(), buf.len() - 1) };
        if rc != 0 {
            return String::new();
        }
        // SAFETY: gethostname wrote a string inside `buf`, whose last byte is NUL.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// Python's `socket.getfqdn()`: the host name's address (the first getaddrinfo gives),
    /// then that address's names; the first with a dot, else the address's name, else the
    /// host name.
    pub(super) fn getfqdn() -> String {
        let name = hostname();
        let addr = match super::parse_v4(&name) {
            Some(a) => Some(std::net::IpAddr::V4(a)),
            None => getaddrinfo(&name, None, libc::AF_UNSPEC, 0, 0)
                .ok()
                .and_then(|r| r.into_iter().next())
                .map(|i| i.addr.ip()),
        };
        let Some((first, aliases)) = addr.and_then(names_of) else {
            return name;
        };
        std::iter::once(&first)
            .chain(&aliases)
            .find(|n| n.contains('.'))
            .cloned()
            .unwrap_or(first)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::functions::testutil::{ctx, kw, s};
    use crate::functions::{call, CallResult};
    use brine_protocol::payload::from_json;
    use serde_json::{json, Value as J};
    use std::path::{Path, PathBuf};

    // -- Comparison with real Salt ------------------------------------------------------

    /// A return as JSON, the way `salt-call --out json` prints it: map keys as text, bytes
    /// as latin-1 text.
    pub(crate) fn to_json(v: &Value) -> J {
        match v {
            Value::Map(entries) => J::Object(
                entries
                    .iter()
                    .map(|(k, v)| (py_str(k), to_json(v)))
                    .collect(),
            ),
            Value::Array(items) => J::Array(items.iter().map(to_json).collect()),
            Value::Binary(b) => J::from(b.iter().map(|&c| char::from(c)).collect::<String>()),
            other => brine_protocol::payload::to_json(other),
        }
    }

    /// What one call gave: its return (errors as the minion words them) and its retcode.
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Outcome {
        pub(crate) ret: J,
        pub(crate) retcode: i32,
    }

    /// The arguments as the command line gives them: positional ones YAML-loaded,
    /// `key=value` ones as they are.
    fn cli_args(args: &[&str]) -> Vec<Value> {
        args.iter()
            .map(|a| match args::parse_kwarg(a) {
                Some(_) => s(a),
                None => args::yamlify_arg(a),
            })
            .collect()
    }

    /// Brine's answer to `salt-call <fun> <args...>`.
    pub(crate) async fn brine(fun: &str, args: &[&str]) -> Outcome {
        brine_in(&ctx(), fun, args).await
    }

    /// [`brine`] on the minion `ctx`.
    pub(crate) async fn brine_in(ctx: &crate::functions::Context, fun: &str, args: &[&str]) -> Outcome {
        let CallResult { ret, retcode, .. } = call(ctx, fun, &cli_args(args)).await;
        let prefix = format!("Passed invalid arguments to {fun}: ");
        let ret = match ret.as_str().and_then(|t| t.strip_prefix(&prefix)) {
            // salt-call words a TypeError without the docstring.
            Some(rest) => J::from(format!(
                "Passed invalid arguments: {}.",
                rest.lines().next().unwrap_or_default()
            )),
            None => to_json(&ret),
        };
        Outcome { ret, retcode }
    }

    /// The real Salt 3007 of this repository (`BRINE_SALT3007`, else `.venv-salt3007`), run
    /// as `salt-call --local` with a configuration of its own.
    pub(crate) struct SaltCall {
        bin: PathBuf,
        config: tempfile::TempDir,
    }

    impl SaltCall {
        /// `None` (with a note) when real Salt is not there; under CI it must be.
        pub(crate) fn new() -> Option<SaltCall> {
            let venv = std::env::var_os("BRINE_SALT3007")
                .map(PathBuf::from)
                .or_else(|| {
                    brine_render::oracle::salt_python()
                        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
                });
            let bin = venv.map(|v| v.join("bin/salt-call")).filter(|b| b.exists());
            let Some(bin) = bin else {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "real Salt 3007 is missing (BRINE_SALT3007, scripts/salt-venvs)"
                );
                eprintln!(
                    "skipped: real Salt 3007 is missing (BRINE_SALT3007, scripts/salt-venvs)"
                );
                return None;
            };
            let config = tempfile::tempdir().expect("temp dir");
            let root = config.path().join("root");
            std::fs::create_dir(&root).expect("root dir");
            std::fs::write(
                config.path().join("minion"),
                format!("id: m1\nfile_client: local\nroot_dir: {}\n", root.display()),
            )
            .expect("minion config");
            Some(SaltCall { bin, config })
        }

        /// The configuration directory salt-call reads (its `minion` file is there).
        pub(crate) fn config_dir(&self) -> &Path {
            self.config.path()
        }

        /// `salt-call --local --out json <fun> <args...>`.
        pub(crate) fn run(&self, fun: &str, args: &[&str]) -> Outcome {
            let out = std::process::Command::new(&self.bin)
                .arg("-c")
                .arg(self.config.path())
                .args([
                    "--local",
                    "--retcode-passthrough",
                    "--out",
                    "json",
                    "-l",
                    "quiet",
                ])
                .arg(fun)
                .args(args)
                .output()
                .expect("salt-call runs");
            let retcode = out.status.code().unwrap_or(-1);
            let stdout = String::from_utf8_lossy(&out.stdout);
            if let Ok(J::Object(mut m)) = serde_json::from_str::<J>(&stdout) {
                if let Some(ret) = m.remove("local") {
                    return Outcome { ret, retcode };
                }
            }
            // Errors are printed instead: the minion's words for them.
            let stderr = String::from_utf8_lossy(&out.stderr);
            // An error with more lines (its `info`) runs to the end of the output.
            let running = format!("Error running '{fun}': ");
            if let Some(at) = stderr.find(&running) {
                let msg = stderr[at + running.len()..].trim_end();
                if msg.contains('\n') {
                    return Outcome {
                        ret: J::from(format!("ERROR: {msg}")),
                        retcode,
                    };
                }
            }
            let lines: Vec<&str> = stderr
                .lines()
                .chain(stdout.lines())
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let last = lines.last().copied().unwrap_or_default();
            let running = format!("Error running '{fun}': ");
            let invalid = lines
                .iter()
                .find(|l| l.starts_with("Passed invalid arguments"));
            let ret = if let Some(line) = invalid {
                line.to_string()
            } else if let Some(msg) = last.strip_prefix(&running) {
                format!("ERROR: {msg}")
            } else if last.starts_with("Command required for") {
                last.to_string()
            } else {
                format!("The minion function caused an exception: {last}")
            };
            Outcome {
                ret: J::from(ret),
                retcode,
            }
        }

        /// Run many calls, four at a time.
        pub(crate) fn run_all(&self, cases: &[Vec<String>]) -> Vec<Outcome> {
            let mut out = Vec::new();
            // The first call runs alone: salt-call creates its root's directories on start
            // and two of them doing it at once fail with `[Errno 17] File exists`.
            let (first, rest) = cases.split_at(cases.len().min(1));
            for case in first {
                let args: Vec<&str> = case[1..].iter().map(String::as_str).collect();
                out.push(self.run(&case[0], &args));
            }
            for chunk in rest.chunks(4) {
                std::thread::scope(|scope| {
                    let handles: Vec<_> = chunk
                        .iter()
                        .map(|case| {
                            scope.spawn(move || {
                                let args: Vec<&str> =
                                    case[1..].iter().map(String::as_str).collect();
                                self.run(&case[0], &args)
                            })
                        })
                        .collect();
                    for h in handles {
                        out.push(h.join().expect("salt-call thread"));
                    }
                });
            }
            out
        }
    }

    /// Run `cases` with Salt and Brine and compare them; `loose` may first mask in both
    /// what changes from one call to the next. Brine's calls run concurrently.
    pub(crate) async fn compare_with_salt(cases: &[Vec<String>], loose: fn(&str, &mut J)) {
        let Some(salt) = SaltCall::new() else {
            return;
        };
        let brine_calls: Vec<_> = cases
            .iter()
            .map(|case| {
                let case = case.clone();
                tokio::spawn(async move {
                    let args: Vec<&str> = case[1..].iter().map(String::as_str).collect();
                    brine(&case[0], &args).await
                })
            })
            .collect();
        let salt_out = tokio::task::block_in_place(|| salt.run_all(cases));
        let mut failures = Vec::new();
        for ((case, want), handle) in cases.iter().zip(salt_out).zip(brine_calls) {
            let mut got = handle.await.expect("brine call");
            let mut want = want;
            loose(&case[0], &mut want.ret);
            loose(&case[0], &mut got.ret);
            if got != want {
                failures.push(format!("{case:?}\n  salt:  {want:?}\n  brine: {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    fn case(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn exact(_: &str, _: &mut J) {}

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_calls_return_what_salt_3007_returns() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap().port().to_string();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port().to_string()
        };
        // The edge cases of the parsers and of the address functions are compared in one
        // Python process below; these are the calls on this host.
        let mut cases = vec![
            case(&["network.interfaces"]),
            case(&["network.ip_addrs"]),
            case(&["network.ip_addrs", "include_loopback=True"]),
            case(&["network.ipaddrs", "interface=l*", "include_loopback=True"]),
            case(&["network.ip_addrs6", "include_loopback=True"]),
            case(&["network.subnets"]),
            case(&["network.subnets6"]),
            case(&["network.hw_addr", "lo"]),
            case(&["network.hwaddr", "nope"]),
            case(&["network.hw_addr"]),
            case(&["network.interface", "lo"]),
            case(&["network.in_subnet", "127.0.0.0/8"]),
            case(&["network.connect", "127.0.0.1", &open]),
            case(&["network.connect", "127.0.0.1", &closed, "timeout=2"]),
            case(&["network.connect", "localhost", &open, "proto=udp"]),
            case(&["network.ping", "127.0.0.1", "return_boolean=True"]),
            case(&["network.calc_net", "10.1.2.3/8"]),
            case(&["network.routes"]),
            case(&["network.default_route", "inet"]),
            case(&["network.get_route", "127.0.0.1"]),
            case(&["network.get_hostname"]),
            case(&["network.ip_networks", "include_loopback=True"]),
            case(&["network.ip_neighs"]),
        ];
        if cmd::which("arp").is_some() {
            cases.push(case(&["network.arp"]));
        }
        // Only where it cannot query a DNS server.
        if cmd::which("dig").is_none() {
            cases.push(case(&["network.dig", "localhost"]));
        }
        let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        let hostname = netdb::hostname();
        if hosts.lines().any(|l| {
            l.split('#')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .skip(1)
                .any(|w| w == hostname)
        }) {
            cases.push(case(&["network.get_fqdn"]));
        }
        compare_with_salt(&cases, exact).await;
        drop(listener);
    }

    // -- Salt's parsers fed the same text -------------------------------------------------

    /// Feeds `[kind, args]` cases to Salt's own parsers (its module functions with their
    /// commands' output given) and prints what they return, errors as `Type: message`.
    pub(crate) const PARSERS: &str = r#"
import json, sys
import salt.utils.network as un
import salt.modules.network as mn
import salt.modules.disk as md

def exc_text(exc):
    name = type(exc).__qualname__
    mod = type(exc).__module__
    return f"{name if mod == 'builtins' else mod + '.' + name}: {exc}"

def run(kind, args):
    outs = iter(args)
    run_cmd = lambda *a, **k: next(outs)
    run_all = lambda *a, **k: {"retcode": 0, "stdout": next(outs)}
    for m in (mn, md):
        m.__salt__ = {"cmd.run": run_cmd, "cmd.run_all": run_all}
        m.__grains__ = {"kernel": "Linux"}
        m.__utils__ = {
            f"network.{name}": getattr(un, name)
            for name in ("calc_net", "in_subnet", "ip_addrs", "ip_addrs6", "interfaces",
                         "subnets", "subnets6", "interface", "interface_ip", "hw_addr",
                         "ip_networks", "ip_networks6", "sanitize_host")
        }
    if kind == "ip":
        return un._interfaces_ip(args[0])
    if kind == "ifconfig":
        return un._interfaces_ifconfig(args[0])
    if kind == "netstat":
        return mn._netstat_linux()
    if kind == "ss":
        return mn._ss_linux()
    if kind == "netstat_routes":
        return mn._netstat_route_linux()
    if kind == "ip_routes":
        return mn._ip_route_linux()
    if kind == "tcp":
        ret = {}
        for line in args[0].splitlines(True):
            if line.strip().startswith("sl"):
                continue
            iret = un._parse_tcp_line(line)
            slot = next(iter(iret))
            if iret[slot]["state"] == 1:
                del iret[slot]["state"]
                ret[len(ret)] = iret[slot]
        return ret
    if kind == "hex2ip":
        return un.hex2ip(args[0], True)
    if kind == "arp":
        return mn.arp.__wrapped__()
    if kind == "neighs":
        return mn.ip_neighs()
    if kind == "neighs6":
        return mn.ip_neighs6()
    if kind == "route_get":
        return mn.get_route(args[1])
    if kind == "usage":
        return md.usage()
    if kind == "inodeusage":
        return md.inodeusage()
    if kind == "percent":
        return md.percent(args[1])
    if kind == "blkid":
        return md.blkid.__wrapped__()
    if kind == "dump":
        return md.dump("/dev/x", args[1])
    if kind == "call":
        fun = getattr(mn if args[0].startswith("network.") else md, args[0].split(".")[1])
        return fun(*args[1])
    raise Exception(f"unknown kind {kind}")

results = []
for kind, args in json.load(open(sys.argv[1])):
    try:
        results.append(run(kind, args))
    except Exception as exc:
        results.append(exc_text(exc))
print(json.dumps(results))
"#;

    /// An error as Python names it: `Type: message`.
    pub(crate) fn py_error(e: FnError) -> String {
        match e {
            FnError::InvalidArgs(m) => format!("TypeError: {m}"),
            FnError::Exception(m) => m,
            FnError::Execution(m) => format!("salt.exceptions.CommandExecutionError: {m}"),
            FnError::Invocation(m) => format!("salt.exceptions.SaltInvocationError: {m}"),
        }
    }

    fn err_text(e: FnError) -> J {
        J::from(py_error(e))
    }

    /// Brine's parser for a case of [`PARSERS`].
    pub(crate) fn brine_parse(kind: &str, args: &[J]) -> J {
        let a = |i: usize| args.get(i).and_then(J::as_str).unwrap_or_default();
        let dict = |r: Result<Dict, FnError>| r.map_or_else(err_text, |d| to_json(&d.into_value()));
        let value = |r: Result<Value, FnError>| r.map_or_else(err_text, |v| to_json(&v));
        match kind {
            "ip" => dict(parse_ip_interfaces(a(0))),
            "ifconfig" => dict(parse_ifconfig(a(0))),
            "netstat" => value(parse_netstat(a(0))),
            "ss" => value(parse_ss(a(0))),
            "netstat_routes" => value(parse_netstat_routes(a(0), a(1)).map(Value::Array)),
            "ip_routes" => value(parse_ip_routes(a(0), a(1)).map(Value::Array)),
            "tcp" => {
                let mut ret = Dict::default();
                dict(collect_tcp(a(0), &mut ret).map(|()| ret))
            }
            "hex2ip" => J::from(hex2ip(a(0), true)),
            "arp" => to_json(&parse_arp(a(0), "Linux").into_value()),
            "neighs" => to_json(&parse_neighs(a(0), false).into_value()),
            "neighs6" => to_json(&parse_neighs(a(0), true).into_value()),
            "route_get" => value(parse_route_get(a(0), &from_json(&args[1]))),
            "usage" => to_json(&super::super::disk::parse_usage(a(0), "Linux").into_value()),
            "inodeusage" => {
                to_json(&super::super::disk::parse_inodeusage(a(0), "Linux").into_value())
            }
            "percent" => super::super::disk::tests::percent_of(a(0), &from_json(&args[1])),
            "blkid" => dict(super::super::disk::parse_blkid(a(0))),
            "dump" => value(super::super::disk::parse_dump(a(0), &from_json(&args[1]))),
            other => panic!("no parser {other}"),
        }
    }

    /// Run `cases` through Salt's parsers and Brine's and compare them.
    pub(crate) fn compare_parsers(cases: &J) {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("parsers.py");
        std::fs::write(&script, PARSERS).unwrap();
        let input = dir.path().join("cases.json");
        std::fs::write(&input, cases.to_string()).unwrap();
        let Some(out) = brine_render::oracle::run_with(&script, &[&input]) else {
            return;
        };
        let salt: Vec<J> = serde_json::from_slice(&out).unwrap();
        let mut failures = Vec::new();
        for (case, want) in cases.as_array().unwrap().iter().zip(salt) {
            let kind = case[0].as_str().unwrap();
            let args = case[1].as_array().unwrap();
            let got = if kind == "call" {
                // A function called as the minion calls it.
                let fun = args[0].as_str().unwrap();
                let call_args: Vec<Value> =
                    args[1].as_array().unwrap().iter().map(from_json).collect();
                let r = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(call(&ctx(), fun, &call_args));
                let invalid = format!("Passed invalid arguments to {fun}: ");
                match r.ret.as_str() {
                    Some(t) if t.starts_with("The minion function caused an exception: ") => {
                        J::from(t.trim_start_matches("The minion function caused an exception: "))
                    }
                    Some(t) if t.starts_with(&invalid) => J::from(format!(
                        "TypeError: {}",
                        t[invalid.len()..].lines().next().unwrap_or_default()
                    )),
                    Some(t) if t.starts_with("ERROR: ") => J::from(format!(
                        "salt.exceptions.CommandExecutionError: {}",
                        &t["ERROR: ".len()..]
                    )),
                    _ => to_json(&r.ret),
                }
            } else {
                brine_parse(kind, args)
            };
            if got != want {
                failures.push(format!("{case}\n  salt:  {want}\n  brine: {got}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    const IP_LINK: &str = "\
1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UP mode DEFAULT group default qlen 1000
    link/ether 52:54:00:12:34:56 brd ff:ff:ff:ff:ff:ff
    altname enp0s3
3: veth1@if5: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN mode DEFAULT group default qlen 1000
    link/ether aa:bb:cc:dd:ee:ff brd ff:ff:ff:ff:ff:ff link-netnsid 0
4: tun0: <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UNKNOWN mode DEFAULT group default qlen 500
    link/none
10: eth0.100@eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000
    link/ether 52:54:00:12:34:56 brd ff:ff:ff:ff:ff:ff";

    const IP_ADDR: &str = "\
1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    inet 127.0.0.1/8 scope host lo
       valid_lft forever preferred_lft forever
    inet6 ::1/128 scope host
       valid_lft forever preferred_lft forever
2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UP group default qlen 1000
    link/ether 52:54:00:12:34:56 brd ff:ff:ff:ff:ff:ff
    altname enp0s3
    inet 10.0.0.5/24 brd 10.0.0.255 scope global dynamic eth0
       valid_lft 86000sec preferred_lft 86000sec
    inet 10.0.0.6/24 scope global secondary eth0:1
       valid_lft forever preferred_lft forever
    inet 192.168.1.2/16 brd 192.168.255.255 scope global eth0
    inet6 2001:db8::5/64 scope global dynamic mngtmpaddr
       valid_lft 86000sec preferred_lft 14000sec
    inet6 fe80::5054:ff:fe12:3456/64 scope link
       valid_lft forever preferred_lft forever
3: veth1@if5: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN group default qlen 1000
    link/ether aa:bb:cc:dd:ee:ff brd ff:ff:ff:ff:ff:ff link-netnsid 0
4: tun0: <POINTOPOINT,MULTICAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UNKNOWN group default qlen 500
    link/none
    inet 10.8.0.1 peer 10.8.0.2/32 scope global tun0
10: eth0.100@eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default qlen 1000
    link/ether 52:54:00:12:34:56 brd ff:ff:ff:ff:ff:ff
    inet 172.16.0.1/12 brd 172.31.255.255 scope global eth0.100
       valid_lft forever preferred_lft forever";

    const IFCONFIG_NEW: &str = "\
eth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1400
        inet 192.0.2.2  netmask 255.255.255.0  broadcast 192.0.2.255
        inet6 fe80::fc:ff:fe00:1  prefixlen 64  scopeid 0x20<link>
        inet6 fd00::2  prefixlen 64  scopeid 0x0<global>
        ether 02:fc:00:00:00:01  txqueuelen 1000  (Ethernet)
        RX packets 161326  bytes 5003486171 (4.6 GiB)
        TX errors 0  dropped 0 overruns 0  carrier 0  collisions 0

ifb0: flags=130<BROADCAST,NOARP>  mtu 1500
        ether 02:79:b3:f6:f6:23  txqueuelen 32  (Ethernet)

lo: flags=73<UP,LOOPBACK,RUNNING>  mtu 65536
        inet 127.0.0.1  netmask 255.0.0.0
        inet6 ::1  prefixlen 128  scopeid 0x10<host>
        loop  txqueuelen 1000  (Local Loopback)
";

    const IFCONFIG_OLD: &str = "\
eth0      Link encap:Ethernet  HWaddr 00:0C:29:AB:CD:EF
          inet addr:10.1.1.5  Bcast:10.1.1.255  Mask:255.255.255.0
          inet6 addr: fe80::20c:29ff:feab:cdef/64 Scope:Link
          UP BROADCAST RUNNING MULTICAST  MTU:1500  Metric:1

eth0:1    Link encap:Ethernet  HWaddr 00:0C:29:AB:CD:EF
          inet addr:10.1.1.6  Bcast:10.1.1.255  Mask:0xffffff00

lo        Link encap:Local Loopback
          inet addr:127.0.0.1  Mask:255.0.0.0
          UP LOOPBACK RUNNING  MTU:65536  Metric:1
eth0      Link encap:Ethernet  HWaddr 00:0C:29:AB:CD:EF
          inet addr:10.1.1.7  Mask:255.255.0.0
";

    const NETSTAT: &str = "\
Active Internet connections (servers and established)
Proto Recv-Q Send-Q Local Address           Foreign Address         State       User       Inode      PID/Program name
tcp        0      0 0.0.0.0:2024            0.0.0.0:*               LISTEN      0          1145       -
tcp        0      0 192.0.2.2:37508         203.0.113.80:443        ESTABLISHED 0          7993024    16633/python
tcp6       0      0 :::22                   :::*                    LISTEN      0          2211       900/sshd: /usr/sbin
udp        0      0 0.0.0.0:68              0.0.0.0:*                           0          3321       700/dhclient
udp6       0      0 ::1:323                 :::*                                0          4411       800/chronyd";

    const SS: &str = "\
Netid State  Recv-Q Send-Q Local Address:Port  Peer Address:PortProcess
tcp   LISTEN 0      128          0.0.0.0:2024       0.0.0.0:*    ino:1145 sk:1039 cgroup:/ <->
tcp   ESTAB  0      0          192.0.2.2:37508 203.0.113.80:443  users:((\"python\",pid=16633,fd=3)) uid:1000 ino:7993024 sk:103a cgroup:/ <->
udp   UNCONN 0      0            0.0.0.0:68         0.0.0.0:*    users:((\"dhclient\",pid=700,fd=6)) ino:3321 sk:3 cgroup:/system.slice <->";

    const NETSTAT_ROUTES4: &str = "\
0.0.0.0         192.0.2.1       0.0.0.0         UG        0 0          0 eth0
192.0.2.0       0.0.0.0         255.255.255.0   U         0 0          0 eth0";

    const NETSTAT_ROUTES6: &str = "\
fd00::/64                      ::                         U    256 1      0 eth0
::/0                           fd00::1                    UG   1024 3      0 eth0
::1/128                        ::                         Un   0   2      0 lo
ff00::/8                       ::                         U    256 3      0 eth0
::/0                           ::                         !n   -1  1      0 lo";

    const IP_ROUTES4: &str = "\
default via 192.0.2.1 dev eth0 proto dhcp metric 100
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
10.9.0.0/16 via 192.0.2.7 dev eth0
unreachable 10.99.0.0/16";

    const IP_ROUTES6: &str = "\
fd00::/64 dev eth0 proto kernel metric 256 pref medium
default via fd00::1 dev eth0 metric 1024 pref medium
local ::1 dev lo table local proto kernel metric 0 pref medium
local fd00::2 dev eth0 table local proto kernel metric 0 pref medium
multicast ff00::/8 dev eth0 table local proto kernel metric 256 pref medium
anycast fd00:: dev eth0 table local proto kernel metric 0 pref medium";

    const PROC_TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1145 1 0000000000000000 100 0 0 10 0
   1: 020200C0:BB02 507100CB:01BB 01 00000000:00000000 02:00000173 00000000     0        0 7993024 3 0000000000000000
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 5555 1 0000000000000000
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:0016 0000000000000000FFFF00000200007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 42 1 0000000000000000
   1: B80D0120000000000000000001000000:0050 B80D0120000000000000000002000000:9C40 01 00000000:00000000 00:00000000 00000000     0        0 43 1 0000000000000000
";

    #[test]
    fn salts_parsers_read_the_same_text_the_same_way() {
        let mut cases = vec![
            json!(["ip", [format!("{IP_LINK}\n{IP_ADDR}")]]),
            json!(["ip", ["2: eth0: <UP> mtu 1\n    inet 1.2.3.4/ab scope global eth0"]]),
            json!(["ip", ["2: eth0: <UP> mtu 1\n    inet 1.2.3.4/24 brd"]]),
            json!(["ip", ["2: eth0: <UP> mtu 1\n    inet 1.2.3.4/2/4 scope global eth0"]]),
            json!(["ip", ["2: eth0: <UP> mtu 1\n    inet6 fe80::1 scope"]]),
            json!(["ip", ["2: eth0: <UP> mtu 1\n    inet6 fe80::1\n    inet 1.2.3.4/0 x"]]),
            json!(["ip", [""]]),
            json!(["ifconfig", [IFCONFIG_NEW]]),
            json!(["ifconfig", [IFCONFIG_OLD]]),
            json!(["ifconfig", [""]]),
            json!(["netstat", [NETSTAT]]),
            json!(["netstat", ["tcp 0 0 1.2.3.4:1 5.6.7.8:2 LISTEN"]]),
            json!(["ss", [SS]]),
            json!(["ss", ["tcp ESTAB 0 0 a:1 b:2 users:((x)) <->"]]),
            json!(["ss", ["udp UNCONN 0 0 a:1 b:2 users <->"]]),
            json!(["ss", ["tcp"]]),
            json!(["netstat_routes", [NETSTAT_ROUTES4, NETSTAT_ROUTES6]]),
            json!(["netstat_routes", ["0.0.0.0 1.2.3.4 0.0.0.0 UG", ""]]),
            json!(["ip_routes", [IP_ROUTES4, IP_ROUTES6]]),
            json!(["ip_routes", ["blackhole 10.0.0.0/8", ""]]),
            json!(["ip_routes", ["default via 1.2.3.4", ""]]),
            json!(["ip_routes", ["", "bogus dev eth0"]]),
            json!(["tcp", [PROC_TCP]]),
            json!(["tcp", ["   0: 0100007F 00000000:0000 01\n"]]),
            json!(["tcp", ["   0: 0100007F:zz 00000000:0000 01\n"]]),
            json!(["hex2ip", ["0100007F"]]),
            json!(["hex2ip", ["xyz"]]),
            json!(["hex2ip", ["00000000000000000000000001000000"]]),
            json!(["hex2ip", ["0000000000000000000000000000000g"]]),
            json!(["arp", ["? (192.0.2.1) at 02:fc:00:00:00:05 [ether] on eth0\n? (10.0.0.9) at <incomplete> on eth0\nshort line"]]),
            json!(["neighs", ["192.0.2.1 dev eth0 lladdr 02:fc:00:00:00:05 REACHABLE\nfe80::1 dev eth0 lladdr 02:fc:00:00:00:06 router STALE\n10.0.0.9 dev eth0 FAILED"]]),
            json!(["neighs6", ["192.0.2.1 dev eth0 lladdr 02:fc:00:00:00:05 REACHABLE\nfe80::1 dev eth0 lladdr 02:fc:00:00:00:06 router STALE"]]),
            json!(["route_get", ["local 127.0.0.1 dev lo src 127.0.0.1 uid 0\n    cache <local>", "127.0.0.1"]]),
            json!(["route_get", ["8.8.8.8 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0", "8.8.8.8"]]),
            json!(["route_get", ["Error: any valid prefix is expected rather than \"x\".", "x"]]),
            json!(["route_get", ["", "x"]]),
        ];
        // This host's own output, as the commands print it.
        if let Some(ip) = cmd::which("ip") {
            let run = |a: &[&str]| {
                let out = std::process::Command::new(&ip).args(a).output().unwrap();
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            cases.push(json!([
                "ip",
                [format!(
                    "{}\n{}",
                    run(&["link", "show"]),
                    run(&["addr", "show"])
                )]
            ]));
        }
        if let Some(ifconfig) = cmd::which("ifconfig") {
            let out = std::process::Command::new(ifconfig)
                .arg("-a")
                .output()
                .unwrap();
            cases.push(json!(["ifconfig", [String::from_utf8_lossy(&out.stdout)]]));
        }
        for path in ["/proc/net/tcp", "/proc/net/tcp6"] {
            if let Ok(text) = std::fs::read_to_string(path) {
                cases.push(json!(["tcp", [text]]));
            }
        }
        compare_parsers(&J::Array(cases));
    }

    #[test]
    fn addresses_and_networks_follow_pythons_ipaddress() {
        let calls: Vec<(&str, J)> = vec![
            ("network.calc_net", json!(["10.1.2.3/8"])),
            ("network.calc_net", json!(["10.1.2.3", "255.255.0.0"])),
            ("network.calc_net", json!(["10.1.2.3", "0.0.255.255"])),
            ("network.calc_net", json!(["10.1.2.3", "255.0.255.0"])),
            ("network.calc_net", json!(["10.1.2.3", 16])),
            ("network.calc_net", json!(["10.1.2.3/33"])),
            ("network.calc_net", json!(["10.1.2.3/08"])),
            ("network.calc_net", json!(["10.1.2.3/+8"])),
            ("network.calc_net", json!(["01.2.3.4/8"])),
            ("network.calc_net", json!(["1.2.3.4/8/9"])),
            ("network.calc_net", json!(["bogus"])),
            ("network.calc_net", json!([167772161])),
            ("network.calc_net", json!([null, 24])),
            ("network.calc_net", json!(["fd00::1/64"])),
            ("network.calc_net", json!(["fe80::%eth0/64"])),
            ("network.calc_net", json!(["fe80::1%eth0/64"])),
            ("network.calc_net", json!(["::ffff:1.2.3.4/120"])),
            ("network.calc_net", json!(["1:0:0:2:0:0:3:4/128"])),
            ("network.calc_net", json!(["0:0:0:0:0:0:0:2"])),
            ("network.calc_net", json!(["::1.2.3.4/128"])),
            ("network.calc_net", json!(["::/129"])),
            ("network.calc_net", json!(["::/255.0.0.0"])),
            ("network.convert_cidr", json!(["10.1.2.3/8"])),
            ("network.convert_cidr", json!(["fd00::/64"])),
            ("network.convert_cidr", json!(["1.2.3.4"])),
            ("network.convert_cidr", json!(["0.0.0.0/0"])),
            ("network.convert_cidr", json!(["::/0"])),
            ("network.convert_cidr", json!(["fe80::%eth0/64"])),
            ("network.convert_cidr", json!(["x"])),
            ("network.is_private", json!(["10.0.0.1"])),
            ("network.is_private", json!(["8.8.8.8"])),
            ("network.is_private", json!(["192.0.2.2"])),
            ("network.is_private", json!(["100.64.0.1"])),
            ("network.is_private", json!(["::ffff:10.0.0.1"])),
            ("network.is_private", json!(["::ffff:8.8.8.8"])),
            ("network.is_private", json!(["fd00::1"])),
            ("network.is_private", json!(["2001:db8::1"])),
            ("network.is_private", json!(["2606:4700::1"])),
            ("network.is_private", json!(["fe80::1%eth0"])),
            ("network.is_private", json!([5])),
            ("network.is_private", json!([true])),
            ("network.is_private", json!([-1])),
            ("network.is_private", json!([4294967296u64])),
            ("network.is_private", json!(["x"])),
            ("network.is_private", json!(["1.2.3.04"])),
            ("network.is_private", json!([null])),
            ("network.is_loopback", json!(["127.5.5.5"])),
            ("network.is_loopback", json!(["::1"])),
            ("network.is_loopback", json!(["::ffff:127.0.0.1"])),
            ("network.is_loopback", json!(["10.0.0.1"])),
            ("network.reverse_ip", json!(["10.1.2.3"])),
            ("network.reverse_ip", json!(["2001:db8::1"])),
            ("network.reverse_ip", json!(["::ffff:1.2.3.4"])),
            ("network.reverse_ip", json!(["fe80::1%eth0"])),
            ("network.iphexval", json!(["10.0.0.1"])),
            ("network.iphexval", json!(["10.0.-5.255"])),
            ("network.iphexval", json!(["10.0.-15.300"])),
            ("network.iphexval", json!(["1.2.x.4"])),
            ("network.iphexval", json!([5])),
            ("network.ip_in_subnet", json!(["10.0.0.5", "10.0.0.0/8"])),
            ("network.ip_in_subnet", json!(["10.0.0.5", "10.0.0.1/8"])),
            ("network.ip_in_subnet", json!(["x", "10.0.0.0/8"])),
            (
                "network.ip_in_subnet",
                json!([["1.1.1.1", "10.0.0.1"], "10.0.0.0/8"]),
            ),
            (
                "network.ip_in_subnet",
                json!([["10.0.0.1", "x"], "10.0.0.0/8"]),
            ),
            ("network.ip_in_subnet", json!(["::1", "10.0.0.0/8"])),
            ("network.ip_in_subnet", json!(["::1", "::/0"])),
            ("network.ip_in_subnet", json!(["10.0.0.5", "bogus"])),
            // On this host's interfaces, read by both.
            ("network.ip_addrs", json!([null, true, "127.0.0.0/8"])),
            ("network.ip_addrs", json!([null, true, "127.0.0.1/8"])),
            ("network.ip_addrs", json!([null, true, null, "public"])),
            ("network.ip_addrs", json!([null, true, null, "private"])),
            ("network.ip_addrs", json!([["lo", "e*"], true])),
            ("network.ip_addrs", json!(["lo, nomatch", true])),
            ("network.ip_addrs6", json!([null, true, "::1/128"])),
            ("network.ip_networks", json!([null, true, true])),
            ("network.ip_networks6", json!([null, false, true])),
            ("network.subnets", json!([["lo"]])),
            ("network.subnets", json!(["lo"])),
            ("network.subnets6", json!([])),
            ("network.interface_ip", json!(["lo"])),
            ("network.interface", json!(["nope"])),
            ("network.ifacestartswith", json!(["127"])),
            ("network.ifacestartswith", json!([""])),
        ];
        let cases: Vec<J> = calls
            .into_iter()
            .map(|(fun, args)| json!(["call", [fun, args]]))
            .collect();
        compare_parsers(&J::Array(cases));
    }

    // -- Unit tests ------------------------------------------------------------------------

    fn v(j: J) -> Value {
        from_json(&j)
    }

    #[test]
    fn python_formats_ipv6_addresses() {
        for (text, want) in [
            ("0:0:0:0:0:0:0:1", "::1"),
            ("0:0:0:0:0:0:0:0", "::"),
            ("1:0:0:2:0:0:3:4", "1::2:0:0:3:4"),
            ("1:0:0:2:0:0:0:4", "1:0:0:2::4"),
            ("1:0:2:0:3:0:4:0", "1:0:2:0:3:0:4:0"),
            ("::ffff:1.2.3.4", "::ffff:102:304"),
            ("FE80::ABCD", "fe80::abcd"),
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(py_ip(&ip), want, "{text}");
        }
        assert_eq!(parse_v4("010.0.0.1"), None);
        assert_eq!(parse_v4("1.2.3"), None);
        assert_eq!(parse_v4("0.0.0.0"), Some(Ipv4Addr::UNSPECIFIED));
        assert!(parse_v6("fe80::1%").is_none());
        assert!(parse_v6("::1.2.3.04").is_none());
    }

    #[test]
    fn networks_parse_and_compute_as_python_does() {
        let net = |t: &str| Net::parse(t, false).unwrap().to_string();
        assert_eq!(net("10.1.2.3/8"), "10.0.0.0/8");
        assert_eq!(net("10.1.2.3/255.255.0.0"), "10.1.0.0/16");
        assert_eq!(net("10.1.2.3/0.0.0.255"), "10.1.2.0/24");
        assert_eq!(net("fd00::1/64"), "fd00::/64");
        assert_eq!(net("fe80::%eth0/64"), "fe80::%eth0/64");
        assert_eq!(net("fe80::1%eth0/64"), "fe80::/64");
        assert_eq!(Net::parse("10.1.2.3/33", false), Err(NetError::NotANetwork));
        assert_eq!(
            Net::parse("10.1.2.3/8", true),
            Err(NetError::HostBits("10.1.2.3/8 has host bits set".into()))
        );
        let n = Net::parse("192.168.4.0/22", true).unwrap();
        assert_eq!(py_ip(&n.netmask()), "255.255.252.0");
        assert_eq!(py_ip(&n.broadcast()), "192.168.7.255");
        assert_eq!(n.num_addresses(), Value::from(1024u64));
        assert!(n.contains(&Ip::parse("192.168.5.9").unwrap()));
        assert!(!n.contains(&Ip::parse("192.168.8.1").unwrap()));
        assert!(!n.contains(&Ip::parse("::1").unwrap()));
        assert!(Net::parse("127.0.0.0/8", true).unwrap().is_loopback());
        assert!(!Net::parse("::/127", true).unwrap().is_loopback());
        assert_eq!(
            calc_net(&s("bogus"), None).unwrap_err(),
            FnError::Exception(
                "ValueError: 'bogus' does not appear to be an IPv4 or IPv6 network".into()
            )
        );
        assert_eq!(cidr_to_ipv4_netmask(20), "255.255.240.0");
        assert_eq!(cidr_to_ipv4_netmask(0), "");
        assert_eq!(cidr_to_ipv4_netmask(33), "");
    }

    #[test]
    fn ip_output_is_read_into_interfaces() {
        let ifaces = parse_ip_interfaces(&format!("{IP_LINK}\n{IP_ADDR}")).unwrap();
        let names: Vec<String> = ifaces.keys().map(py_str).collect();
        assert_eq!(names, ["lo", "eth0", "veth1", "tun0", "eth0.100"]);
        let eth0 = ifaces.get("eth0").unwrap();
        assert_eq!(get(eth0, "up"), Some(&Value::Boolean(true)));
        assert_eq!(get_str(eth0, "hwaddr"), Some("52:54:00:12:34:56"));
        assert_eq!(
            get(eth0, "inet").unwrap(),
            &v(json!([
                {"address": "10.0.0.5", "netmask": "255.255.255.0", "broadcast": "10.0.0.255", "label": "eth0"},
                {"address": "192.168.1.2", "netmask": "255.255.0.0", "broadcast": "192.168.255.255", "label": "eth0"}
            ]))
        );
        assert_eq!(
            get(eth0, "secondary").unwrap(),
            &v(
                json!([{"type": "inet", "address": "10.0.0.6", "netmask": "255.255.255.0", "broadcast": null, "label": "eth0:1"}])
            )
        );
        assert_eq!(
            get(eth0, "inet6").unwrap(),
            &v(json!([
                {"address": "2001:db8::5", "prefixlen": "64", "scope": "global"},
                {"address": "fe80::5054:ff:fe12:3456", "prefixlen": "64", "scope": "link"}
            ]))
        );
        let veth = ifaces.get("veth1").unwrap();
        assert_eq!(get(veth, "up"), Some(&Value::Boolean(false)));
        assert_eq!(get_str(veth, "parent"), Some("if5"));
        let tun = ifaces.get("tun0").unwrap();
        assert_eq!(get(tun, "hwaddr"), None, "link/none has no address");
        assert_eq!(
            get(tun, "inet").unwrap(),
            &v(
                json!([{"address": "10.8.0.1", "netmask": "255.255.255.255", "broadcast": null, "label": "tun0"}])
            )
        );
        assert_eq!(
            get_str(ifaces.get("eth0.100").unwrap(), "parent"),
            Some("eth0")
        );
        let ips = ips_of(&ifaces, None, &Value::Nil, Family::V4).unwrap();
        let ips: Vec<String> = ips.iter().map(Ip::to_string).collect();
        assert_eq!(
            ips,
            [
                "10.0.0.5",
                "10.0.0.6",
                "10.8.0.1",
                "172.16.0.1",
                "192.168.1.2"
            ]
        );
        let lo = ips_of(
            &ifaces,
            Some(&s("l*,tun0")),
            &Value::Boolean(true),
            Family::V4,
        )
        .unwrap();
        let lo: Vec<String> = lo.iter().map(Ip::to_string).collect();
        assert_eq!(lo, ["10.8.0.1", "127.0.0.1"]);
        assert_eq!(
            parse_ip_interfaces("2: eth0: <UP> mtu 1\n    inet 1.2.3.4/24 brd").unwrap_err(),
            index_error()
        );
    }

    #[test]
    fn ifconfig_output_is_read_into_interfaces() {
        let ifaces = parse_ifconfig(IFCONFIG_NEW).unwrap();
        let eth0 = ifaces.get("eth0").unwrap();
        assert_eq!(
            to_json(eth0),
            json!({
                "inet": [{"address": "192.0.2.2", "netmask": "255.255.255.0", "broadcast": "192.0.2.255"}],
                // Salt's pattern wants one space before `scopeid`: net-tools prints two.
                "inet6": [
                    {"address": "fe80::fc:ff:fe00:1", "prefixlen": "64", "scope": null},
                    {"address": "fd00::2", "prefixlen": "64", "scope": null}
                ],
                "hwaddr": "02:fc:00:00:00:01",
                "up": true
            })
        );
        assert_eq!(
            to_json(ifaces.get("ifb0").unwrap()),
            json!({"hwaddr": "02:79:b3:f6:f6:23", "up": false})
        );
        let old = parse_ifconfig(IFCONFIG_OLD).unwrap();
        // `eth0:1` is read as eth0, and eth0 comes again: all merged into one, the values
        // seen first kept and the new addresses added.
        let names: Vec<String> = old.keys().map(py_str).collect();
        assert_eq!(names, ["eth0", "lo"]);
        assert_eq!(
            to_json(old.get("eth0").unwrap()),
            json!({
                "hwaddr": "00:0C:29:AB:CD:EF",
                "inet": [
                    {"address": "10.1.1.5", "netmask": "255.255.255.0", "broadcast": "10.1.1.255"},
                    {"address": "10.1.1.6", "netmask": "255.255.255.0", "broadcast": "10.1.1.255"},
                    {"address": "10.1.1.7", "netmask": "255.255.0.0"}
                ],
                "inet6": [{"address": "fe80::20c:29ff:feab:cdef", "prefixlen": "64", "scope": "link"}],
                "up": true
            })
        );
        assert_eq!(
            to_json(&parse_ifconfig("").unwrap().into_value()),
            json!({"": {"up": false}})
        );
    }

    #[test]
    fn netstat_and_ss_are_read_as_salt_reads_them() {
        let n = to_json(&parse_netstat(NETSTAT).unwrap());
        assert_eq!(n.as_array().unwrap().len(), 5);
        assert_eq!(
            n[2],
            json!({"proto": "tcp6", "recv-q": "0", "send-q": "0", "local-address": ":::22", "remote-address": ":::*",
                   "state": "LISTEN", "user": "0", "inode": "2211", "program": "900/sshd:"})
        );
        assert_eq!(
            n[3],
            json!({"proto": "udp", "recv-q": "0", "send-q": "0", "local-address": "0.0.0.0:68", "remote-address": "0.0.0.0:*",
                   "user": "0", "inode": "3321", "program": "700/dhclient"})
        );
        assert_eq!(
            parse_netstat("tcp 0 0 a b LISTEN").unwrap_err(),
            index_error()
        );
        let ss = to_json(&parse_ss(SS).unwrap());
        assert_eq!(
            ss[0],
            json!({"proto": "tcp", "recv-q": "0", "send-q": "128", "local-address": "0.0.0.0:2024", "remote-address": "0.0.0.0:*",
                   "state": "LISTEN", "user": 0, "inode": "1145", "program": ""})
        );
        assert_eq!(ss[1]["state"], json!("ESTABLISHED"));
        assert_eq!(ss[1]["user"], json!("1000"));
        assert_eq!(ss[1]["program"], json!("python"));
        assert_eq!(ss[2]["program"], json!("dhclient"));
        assert!(ss[2].get("state").is_none());
    }

    #[test]
    fn routes_are_read_in_netstats_shape() {
        let r = to_json(&Value::Array(
            parse_netstat_routes(NETSTAT_ROUTES4, NETSTAT_ROUTES6).unwrap(),
        ));
        assert_eq!(r.as_array().unwrap().len(), 7);
        assert_eq!(
            r[0],
            json!({"addr_family": "inet", "destination": "0.0.0.0", "gateway": "192.0.2.1", "netmask": "0.0.0.0", "flags": "UG", "interface": "eth0"})
        );
        assert_eq!(r[6]["flags"], json!("!n"));
        let r = to_json(&Value::Array(
            parse_ip_routes(IP_ROUTES4, IP_ROUTES6).unwrap(),
        ));
        assert_eq!(
            r[1],
            json!({"addr_family": "inet", "destination": "192.0.2.0", "gateway": "0.0.0.0", "netmask": "255.255.255.0", "flags": "U", "interface": "eth0"})
        );
        assert_eq!(
            r[2]["interface"],
            json!(""),
            "a route via a gateway names no device there"
        );
        assert_eq!(r[4]["destination"], json!("::/0"));
        assert_eq!(r[5]["destination"], json!("::1/128"));
        assert_eq!(r.as_array().unwrap().len(), 7);
        assert_eq!(
            parse_ip_routes("blackhole 10.0.0.0/8", "").unwrap_err(),
            FnError::Exception(
                "ValueError: 'blackhole' does not appear to be an IPv4 or IPv6 network".into()
            )
        );
    }

    #[test]
    fn established_connections_come_from_proc() {
        let mut ret = Dict::default();
        collect_tcp(PROC_TCP, &mut ret).unwrap();
        assert_eq!(
            to_json(&ret.into_value()),
            json!({
                "0": {"local_addr": "192.0.2.2", "local_port": 47874, "remote_addr": "203.0.113.80", "remote_port": 443},
                "1": {"local_addr": "127.0.0.1", "local_port": 8080, "remote_addr": "127.0.0.1", "remote_port": 50000},
                "2": {"local_addr": "127.0.0.1", "local_port": 22, "remote_addr": "127.0.0.2", "remote_port": 54321},
                "3": {"local_addr": "2001:db8::1", "local_port": 80, "remote_addr": "2001:db8::2", "remote_port": 40000}
            })
        );
        assert_eq!(hex2ip("0100007F", false), "1.0.0.127");
        assert_eq!(hex2ip("nothex", true), "nothex");
    }

    #[test]
    fn route_get_reads_the_first_line() {
        let r = parse_route_get(
            "8.8.8.8 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0",
            &s("8.8.8.8"),
        )
        .unwrap();
        assert_eq!(
            to_json(&r),
            json!({"destination": "8.8.8.8", "gateway": "192.0.2.1", "interface": "eth0", "source": "192.0.2.2"})
        );
        let r = parse_route_get(
            "local 127.0.0.1 dev lo src 127.0.0.1 uid 0\n    cache <local>",
            &s("127.0.0.1"),
        )
        .unwrap();
        assert_eq!(get(&r, "gateway"), Some(&Value::Nil));
        assert_eq!(parse_route_get("", &s("x")).unwrap_err(), index_error());
        assert_eq!(
            parse_route_get("Error: bad", &s("x")).unwrap_err(),
            FnError::Exception("AttributeError: 'NoneType' object has no attribute 'group'".into())
        );
    }

    #[test]
    fn hosts_are_sanitized_for_commands() {
        assert_eq!(
            sanitize_host(&s("exa mple.com;rm -rf /")).unwrap(),
            "example.comrm-rf"
        );
        assert_eq!(sanitize_host(&s("fe80::1")).unwrap(), "fe80::1");
        assert_eq!(sanitize_host(&s(&"a".repeat(300))).unwrap().len(), 255);
        assert_eq!(
            sanitize_host(&Value::from(5)).unwrap_err(),
            FnError::InvalidArgs("'int' object is not subscriptable".into())
        );
        assert!(is_ip_with_mask(&s("127.0.0.1/8"), Family::V4));
        assert!(!is_ip_with_mask(&s("127.0.0.1/0"), Family::V4));
        assert!(is_ip_with_mask(&s("::1"), Family::V6));
        assert!(idna_check("localhost").is_ok());
        assert!(idna_check(&"a".repeat(64)).is_err());
        assert!(idna_check("a..b").is_err());
    }

    #[tokio::test]
    async fn connect_tests_a_local_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = i64::from(listener.local_addr().unwrap().port());
        let r = call(
            &ctx(),
            "network.connect",
            &[s("127.0.0.1"), Value::from(port)],
        )
        .await;
        assert_eq!(
            to_json(&r.ret),
            json!({"result": true, "comment": format!("Successfully connected to 127.0.0.1 (127.0.0.1) on tcp port {port}")})
        );
        assert_eq!(r.retcode, 0);
        let udp = call(
            &ctx(),
            "network.connect",
            &[
                s("127.0.0.1"),
                Value::from(port),
                kw(&[("proto", s("udp"))]),
            ],
        )
        .await;
        assert_eq!(
            to_json(&udp.ret),
            json!({"result": false, "comment": format!("Unable to connect to 127.0.0.1 (127.0.0.1) on udp port {port}")})
        );
        assert_eq!(udp.retcode, 1, "result False fails the job");
        drop(listener);
        let closed = call(
            &ctx(),
            "network.connect",
            &[s("127.0.0.1"), Value::from(port)],
        )
        .await;
        assert_eq!(closed.ret.as_map().unwrap()[0].1, Value::Boolean(false));
        let missing = call(&ctx(), "network.connect", &[s("127.0.0.1")]).await;
        assert_eq!(
            to_json(&missing.ret),
            json!({"result": false, "comment": "Required argument, port, is missing."})
        );
        let bad = call(
            &ctx(),
            "network.connect",
            &[s("127.0.0.1"), s("nosuchservice")],
        )
        .await;
        assert_eq!(
            to_json(&bad.ret),
            json!({"result": false, "comment": "Unable to resolve host 127.0.0.1 on tcp port nosuchservice"})
        );
    }

    #[tokio::test]
    async fn ping_runs_ping_on_loopback() {
        let r = call(
            &ctx(),
            "network.ping",
            &[
                s("127.0.0.1"),
                kw(&[
                    ("return_boolean", Value::Boolean(true)),
                    ("timeout", Value::from(2)),
                ]),
            ],
        )
        .await;
        if cmd::which("ping").is_some() {
            assert_eq!((r.ret, r.retcode), (Value::Boolean(true), 0));
        } else {
            let text = r.ret.as_str().unwrap_or_default().to_string();
            assert!(
                text.starts_with(
                    "ERROR: Unable to run command '['ping', '-W', '2', '-c', '4', '127.0.0.1']'"
                ),
                "{text}"
            );
        }
    }

    #[tokio::test]
    async fn bad_input_gives_salts_errors() {
        let r = call(&ctx(), "network.routes", &[s("bogus")]).await;
        assert_eq!(
            (r.ret, r.retcode),
            (s("ERROR: Invalid address family bogus"), 1)
        );
        let r = call(&ctx(), "network.is_loopback", &[s("nope")]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: ValueError: 'nope' does not appear to be an IPv4 or IPv6 address")
        );
        let r = call(&ctx(), "network.hw_addr", &[s("no-such-iface")]).await;
        let text = r.ret.as_str().unwrap().to_string();
        assert!(
            text.starts_with("Interface \"no-such-iface\" not in available interfaces: \""),
            "{text}"
        );
        assert_eq!(r.retcode, 0);
        let r = call(
            &ctx(),
            "network.subnets",
            &[kw(&[("interfaces", v(json!({"a": 1})))])],
        )
        .await;
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .starts_with("Passed invalid arguments to network.subnets: unhashable type: 'dict'\n"));
        let r = call(
            &ctx(),
            "network.ipaddrs",
            &[s("a"), s("b"), s("c"), s("d"), s("e")],
        )
        .await;
        assert!(r.ret.as_str().unwrap().starts_with(
            "Passed invalid arguments to network.ipaddrs: ip_addrs() takes from 0 to 4 positional arguments but 5 were given"
        ), "{:?}", r.ret);
    }

    #[tokio::test]
    async fn netstat_and_active_tcp_read_this_host() {
        // A connection of our own, so that both have something established to show.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let active = call(&ctx(), "network.active_tcp", &[]).await;
        let conns = active.ret.as_map().expect("a dict").clone();
        assert!(
            conns
                .iter()
                .any(|(_, c)| get(c, "remote_port") == Some(&Value::from(port))
                    && get_str(c, "remote_addr") == Some("127.0.0.1")),
            "{conns:?}"
        );
        let keys: Vec<Value> = conns.iter().map(|(k, _)| k.clone()).collect();
        let numbered: Vec<Value> = (0..keys.len() as u64).map(Value::from).collect();
        assert_eq!(keys, numbered);
        if cmd::which("netstat").is_none() && cmd::which("ss").is_none() {
            return;
        }
        let ns = call(&ctx(), "network.netstat", &[]).await;
        let rows = ns.ret.as_array().expect("a list");
        let local = format!("127.0.0.1:{port}");
        assert!(
            rows.iter()
                .any(|r| get_str(r, "local-address") == Some(local.as_str())
                    && get_str(r, "state") == Some("LISTEN")),
            "{rows:?}"
        );
        let other = Context {
            grains: std::sync::Arc::new(map([("kernel", s("SunOS"))])),
            ..ctx()
        };
        let r = call(&other, "network.netstat", &[]).await;
        assert_eq!(r.ret, s("ERROR: Not yet supported on this platform"));
    }

    #[tokio::test]
    async fn the_modules_are_known_by_salts_file_names() {
        for module in ["network", "disk"] {
            let r = call(&ctx(), "test.provider", &[s(module)]).await;
            assert_eq!(r.ret, s(module));
        }
        let doc = call(&ctx(), "sys.doc", &[s("network.ipaddrs")]).await;
        let text = get_str(&doc.ret, "network.ipaddrs").unwrap_or_default();
        assert!(
            text.contains("This function is an alias of ``ip_addrs``."),
            "{text}"
        );
    }

    #[tokio::test]
    async fn this_hosts_interfaces_agree_with_each_other() {
        let ifaces = interfaces().await.unwrap();
        if cmd::which("ip").is_none() && cmd::which("ifconfig").is_none() {
            assert_eq!(ifaces, Dict::default());
            return;
        }
        let lo = ifaces.get("lo").expect("a loopback interface");
        assert_eq!(get_str(lo, "hwaddr"), Some("00:00:00:00:00:00"));
        let with_lo = call(
            &ctx(),
            "network.ip_addrs",
            &[kw(&[("include_loopback", Value::Boolean(true))])],
        )
        .await;
        assert!(with_lo.ret.as_array().unwrap().contains(&s("127.0.0.1")));
        let without = call(&ctx(), "network.ip_addrs", &[]).await;
        assert!(!without.ret.as_array().unwrap().contains(&s("127.0.0.1")));
        let ip = call(&ctx(), "network.interface_ip", &[s("lo")]).await;
        assert_eq!(ip.ret, s("127.0.0.1"));
        let inside = call(
            &ctx(),
            "network.ip_in_subnet",
            &[s("127.0.0.1"), s("127.0.0.0/8")],
        )
        .await;
        assert_eq!(inside.ret, Value::Boolean(true));
        let mine = call(&ctx(), "network.in_subnet", &[s("127.0.0.0/8")]).await;
        assert_eq!(
            mine.ret,
            Value::Boolean(false),
            "loopback addresses do not count"
        );
    }
}
