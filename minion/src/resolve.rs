//! Finding a master's address before signing in, as Salt's minion does (`resolve_dns`): the
//! name is looked up (IPv4, IPv6 or either, by `ipv6`); of several addresses the first that
//! takes a TCP connection on the request port is used, else the first one. While the name
//! does not resolve the minion logs it and tries again every `retry_dns` seconds, at most
//! `retry_dns_count` more times when that is set; with `retry_dns: 0` it uses 127.0.0.1.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use brine_protocol::config::{MasterAddr, MinionConfig};

/// How long one address may take to accept the connection check.
const CONNECT_CHECK: Duration = Duration::from_secs(2);

/// The master's name did not resolve within `retry_dns_count` tries.
#[derive(Debug, PartialEq, Eq)]
pub struct Unresolvable(pub String);

impl std::fmt::Display for Unresolvable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Master address: '{}' could not be resolved. Invalid or unresolveable address. \
             Set 'master' value in minion config.",
            self.0
        )
    }
}

/// How long to keep trying a name that does not resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// As `retry_dns`/`retry_dns_count` say (one master, or each master in hot mode).
    Configured,
    /// One look-up, no fallback address: a failover minion goes on to the next master.
    Once,
}

/// `master` with its host replaced by the address to connect to.
pub async fn master_addr(
    cfg: &MinionConfig,
    master: &MasterAddr,
    patience: Patience,
) -> Result<MasterAddr, Unresolvable> {
    let look_up = || lookup(&master.host, master.port, cfg.ipv6);
    resolve_with(cfg, master, patience, look_up).await
}

/// [`master_addr`] with the look-up given.
async fn resolve_with<F, Fut>(
    cfg: &MinionConfig,
    master: &MasterAddr,
    patience: Patience,
    look_up: F,
) -> Result<MasterAddr, Unresolvable>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<IpAddr>>,
{
    let at = |ip: IpAddr| MasterAddr {
        host: ip.to_string(),
        port: master.port,
    };
    // An address needs no look-up and leaves no choice to make.
    if let Ok(ip) = master.host.parse::<IpAddr>() {
        return Ok(at(ip));
    }
    if let Some(ip) = look_up().await {
        return Ok(at(ip));
    }
    let unresolvable = || Unresolvable(master.host.clone());
    if patience == Patience::Once {
        tracing::error!("DNS lookup of '{}' failed.", master.host);
        return Err(unresolvable());
    }
    if cfg.retry_dns.is_zero() {
        tracing::error!(
            "DNS lookup of '{}' failed: using 127.0.0.1 (retry_dns is 0)",
            master.host
        );
        return Ok(at(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }
    let mut left = cfg.retry_dns_count;
    loop {
        match &mut left {
            Some(0) => return Err(unresolvable()),
            Some(n) => *n -= 1,
            None => {}
        }
        tracing::error!(
            "Master hostname: '{}' not found or not responsive. Retrying in {} seconds",
            master.host,
            cfg.retry_dns.as_secs_f64()
        );
        tokio::time::sleep(cfg.retry_dns).await;
        if let Some(ip) = look_up().await {
            return Ok(at(ip));
        }
    }
}

/// The addresses of `host` in the family `ipv6` asks for (an IPv6-only look-up that finds
/// nothing is tried again for IPv4, as Salt does), the first reachable one preferred.
async fn lookup(host: &str, port: u16, ipv6: Option<bool>) -> Option<IpAddr> {
    let found: Vec<SocketAddr> = match tokio::net::lookup_host((host, port)).await {
        Ok(addrs) => addrs.collect(),
        Err(e) => {
            tracing::debug!("look-up of {host}: {e}");
            Vec::new()
        }
    };
    let mut addrs = in_family(&found, ipv6);
    if addrs.is_empty() && ipv6 == Some(true) {
        addrs = in_family(&found, Some(false));
    }
    for addr in &addrs {
        let connect = tokio::net::TcpStream::connect(*addr);
        if let Ok(Ok(_)) = tokio::time::timeout(CONNECT_CHECK, connect).await {
            return Some(addr.ip());
        }
    }
    addrs.first().map(SocketAddr::ip)
}

/// `found` in the family asked for, each address once, in look-up order.
fn in_family(found: &[SocketAddr], ipv6: Option<bool>) -> Vec<SocketAddr> {
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for a in found {
        let wanted = match ipv6 {
            Some(true) => a.is_ipv6(),
            Some(false) => a.is_ipv4(),
            None => true,
        };
        if wanted && !addrs.iter().any(|b| b.ip() == a.ip()) {
            addrs.push(*a);
        }
    }
    addrs
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::config::RawConfig;

    fn config(extra: &str) -> MinionConfig {
        let values = serde_yaml::from_str(&format!("id: m1\n{extra}")).expect("yaml");
        let raw = RawConfig {
            values,
            ..RawConfig::default()
        };
        MinionConfig::from_raw(raw).expect("config")
    }

    fn addr(host: &str) -> MasterAddr {
        MasterAddr {
            host: host.into(),
            port: 4506,
        }
    }

    #[tokio::test]
    async fn an_address_is_used_as_it_is() {
        let cfg = config("");
        let got = master_addr(&cfg, &addr("192.0.2.7"), Patience::Configured).await;
        assert_eq!(got, Ok(addr("192.0.2.7")));
        let got = master_addr(&cfg, &addr("::1"), Patience::Once).await;
        assert_eq!(got, Ok(addr("::1")));
    }

    #[tokio::test]
    async fn localhost_resolves_in_the_family_asked_for() {
        let got = master_addr(&config("ipv6: false"), &addr("localhost"), Patience::Once).await;
        assert_eq!(got, Ok(addr("127.0.0.1")));
    }

    /// A look-up that answers from the `n`th call on (never with `None`), counting calls.
    fn answering_from(
        n: Option<usize>,
        calls: &std::cell::Cell<usize>,
    ) -> impl Fn() -> std::future::Ready<Option<IpAddr>> + '_ {
        move || {
            calls.set(calls.get() + 1);
            let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9));
            std::future::ready(n.filter(|n| calls.get() >= *n).map(|_| ip))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_name_is_tried_retry_dns_count_more_times_then_given_up() {
        let cfg = config("retry_dns: 5\nretry_dns_count: 2");
        let calls = std::cell::Cell::new(0);
        let started = tokio::time::Instant::now();
        let never = answering_from(None, &calls);
        let got = resolve_with(&cfg, &addr("salt"), Patience::Configured, never).await;
        assert_eq!(got, Err(Unresolvable("salt".into())));
        // The first look-up and two more, retry_dns apart.
        assert_eq!(calls.get(), 3);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_name_that_resolves_later_is_used_without_retry_dns_count() {
        let cfg = config("retry_dns: 0.5");
        let calls = std::cell::Cell::new(0);
        let started = tokio::time::Instant::now();
        let third = answering_from(Some(3), &calls);
        let got = resolve_with(&cfg, &addr("salt"), Patience::Configured, third).await;
        assert_eq!(got, Ok(addr("192.0.2.9")));
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn retry_dns_zero_falls_back_to_the_loopback_address() {
        let cfg = config("retry_dns: 0");
        let calls = std::cell::Cell::new(0);
        let never = answering_from(None, &calls);
        let got = resolve_with(&cfg, &addr("salt"), Patience::Configured, &never).await;
        assert_eq!(got, Ok(addr("127.0.0.1")));
        // A failover minion skips the name instead, after one look-up.
        let got = resolve_with(&cfg, &addr("salt"), Patience::Once, &never).await;
        assert_eq!(got, Err(Unresolvable("salt".into())));
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn the_family_filter_keeps_look_up_order_and_drops_repeats() {
        let found: Vec<SocketAddr> = ["[::1]:1", "127.0.0.1:1", "127.0.0.1:1", "10.0.0.1:1"]
            .iter()
            .map(|s| s.parse().expect("addr"))
            .collect();
        let ips = |v: Option<bool>| {
            in_family(&found, v)
                .iter()
                .map(|a| a.ip().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(ips(None), ["::1", "127.0.0.1", "10.0.0.1"]);
        assert_eq!(ips(Some(false)), ["127.0.0.1", "10.0.0.1"]);
        assert_eq!(ips(Some(true)), ["::1"]);
    }
}
