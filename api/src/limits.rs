//! What a hostile or broken peer cannot exceed (the [`Limits`] settings): connections at once
//! (in all and per address), streams at once per token, failed sign-ins per minute per user
//! name and per address. Each bookkeeping map is itself bounded, so a flood of new addresses,
//! names or tokens cannot grow it without end.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Limits;

/// Entries a bookkeeping map holds at most; past it the oldest entries are dropped first.
const MAX_TRACKED: usize = 65_536;

/// User names are tracked by their first bytes only: a name the size of the body limit costs
/// no more than a short one.
const MAX_NAME: usize = 256;

/// Counts held per key, each released when its [`Held`] handle is dropped.
pub struct Gauge<K: Eq + Hash + Clone> {
    held: Mutex<HashMap<K, usize>>,
    total: AtomicU64,
    max_total: usize,
    max_per_key: usize,
}

/// One unit of a [`Gauge`], given back on drop.
pub struct Held<K: Eq + Hash + Clone> {
    gauge: Arc<Gauge<K>>,
    key: K,
}

impl<K: Eq + Hash + Clone> Gauge<K> {
    pub fn new(max_total: usize, max_per_key: usize) -> Arc<Gauge<K>> {
        Arc::new(Gauge {
            held: Mutex::new(HashMap::new()),
            total: AtomicU64::new(0),
            max_total,
            max_per_key,
        })
    }

    /// One more for `key`, or `None` when the key or the total is at its limit.
    pub fn acquire(self: &Arc<Self>, key: K) -> Option<Held<K>> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if self.total.load(Ordering::Relaxed) as usize >= self.max_total {
            return None;
        }
        let n = held.entry(key.clone()).or_insert(0);
        if *n >= self.max_per_key {
            return None;
        }
        *n += 1;
        self.total.fetch_add(1, Ordering::Relaxed);
        Some(Held {
            gauge: self.clone(),
            key,
        })
    }

    /// Units held now.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

impl<K: Eq + Hash + Clone> Drop for Held<K> {
    fn drop(&mut self) {
        let mut held = self.gauge.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.key);
            }
        }
        self.gauge.total.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Poll `done` every 50 ms until it holds (true) or `limit` passes (false).
pub async fn wait_for(limit: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// Failures per key within a fixed window that starts at the key's first failure.
struct Window {
    started: Instant,
    failures: u32,
}

/// Failed sign-ins per user name and per client address: past the limit in a minute, sign-ins
/// for that name or from that address are refused (429) without being checked, until the minute
/// that began with the first failure is over. A successful sign-in clears its name's count.
pub struct LoginThrottle {
    per_user: Mutex<HashMap<String, Window>>,
    per_address: Mutex<HashMap<IpAddr, Window>>,
    max_user: u32,
    max_address: u32,
    window: Duration,
}

/// A refused sign-in: which limit and the seconds until it lifts.
#[derive(Debug, PartialEq)]
pub struct Throttled {
    pub what: &'static str,
    pub retry_after: u64,
}

impl LoginThrottle {
    pub fn new(limits: &Limits) -> LoginThrottle {
        LoginThrottle::with_window(limits, Duration::from_secs(60))
    }

    fn with_window(limits: &Limits, window: Duration) -> LoginThrottle {
        LoginThrottle {
            per_user: Mutex::new(HashMap::new()),
            per_address: Mutex::new(HashMap::new()),
            max_user: limits.login_failures_per_user,
            max_address: limits.login_failures_per_address,
            window,
        }
    }

    /// May `user` from `addr` try to sign in now?
    pub fn check(&self, user: &str, addr: Option<IpAddr>) -> Result<(), Throttled> {
        let now = Instant::now();
        if let Some(addr) = addr {
            let map = self.per_address.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(wait) = self.blocked(map.get(&addr), self.max_address, now) {
                return Err(Throttled {
                    what: "address",
                    retry_after: wait,
                });
            }
        }
        let map = self.per_user.lock().unwrap_or_else(|p| p.into_inner());
        match self.blocked(map.get(short(user)), self.max_user, now) {
            Some(wait) => Err(Throttled {
                what: "user",
                retry_after: wait,
            }),
            None => Ok(()),
        }
    }

    /// Record the outcome of a sign-in that was checked.
    pub fn record(&self, user: &str, addr: Option<IpAddr>, ok: bool) {
        let now = Instant::now();
        if ok {
            self.per_user
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(short(user));
            return;
        }
        self.fail(&self.per_user, short(user).to_string(), now);
        if let Some(addr) = addr {
            self.fail(&self.per_address, addr, now);
        }
    }

    fn blocked(&self, w: Option<&Window>, max: u32, now: Instant) -> Option<u64> {
        let w = w?;
        let ends = w.started + self.window;
        (w.failures >= max && now < ends).then(|| (ends - now).as_secs().max(1))
    }

    fn fail<K: Eq + Hash>(&self, map: &Mutex<HashMap<K, Window>>, key: K, now: Instant) {
        let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_TRACKED {
            let window = self.window;
            map.retain(|_, w| now < w.started + window);
            if map.len() >= MAX_TRACKED {
                // Still full of live entries: forget the oldest to make room.
                if let Some(oldest) = map.values().map(|w| w.started).min() {
                    map.retain(|_, w| w.started > oldest);
                }
            }
        }
        let w = map.entry(key).or_insert(Window {
            started: now,
            failures: 0,
        });
        if now >= w.started + self.window {
            *w = Window {
                started: now,
                failures: 0,
            };
        }
        w.failures = w.failures.saturating_add(1);
    }
}

/// A name cut to the length the throttle keeps of it (on a character boundary).
pub fn short(user: &str) -> &str {
    if user.len() <= MAX_NAME {
        return user;
    }
    let mut end = MAX_NAME;
    while !user.is_char_boundary(end) {
        end -= 1;
    }
    &user[..end]
}

/// A warning at most every ten seconds per kind of refusal, with the count since the last one:
/// a flood is reported without flooding the log.
pub struct Refusals {
    last: Mutex<Option<Instant>>,
    count: AtomicU64,
    what: &'static str,
}

impl Refusals {
    pub const fn new(what: &'static str) -> Refusals {
        Refusals {
            last: Mutex::new(None),
            count: AtomicU64::new(0),
            what,
        }
    }

    pub fn refused(&self, detail: impl std::fmt::Display) {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(10)) {
            *last = Some(now);
            self.count.store(0, Ordering::Relaxed);
            tracing::warn!("refused {n} {} (last: {detail})", self.what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(user: u32, address: u32) -> Limits {
        Limits {
            max_connections: 8,
            max_connections_per_address: 2,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_streams_per_token: 2,
            login_failures_per_user: user,
            login_failures_per_address: address,
            max_lowstate_chunks: 4,
        }
    }

    #[test]
    fn a_gauge_bounds_each_key_and_the_total() {
        let g = Gauge::new(3, 2);
        let a1 = g.acquire("a").unwrap();
        let _a2 = g.acquire("a").unwrap();
        assert!(g.acquire("a").is_none(), "per key");
        let _b1 = g.acquire("b").unwrap();
        assert!(g.acquire("c").is_none(), "in all");
        drop(a1);
        assert_eq!(g.total(), 2);
        assert!(g.acquire("c").is_some());
        assert_eq!(
            g.held.lock().unwrap().len(),
            2,
            "released keys leave the map"
        );
    }

    #[test]
    fn failures_throttle_the_name_and_the_address_for_the_window() {
        let t = LoginThrottle::with_window(&limits(3, 5), Duration::from_millis(300));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..3 {
            assert_eq!(t.check("alice", Some(a)), Ok(()));
            t.record("alice", Some(a), false);
        }
        let refused = t.check("alice", Some(b)).unwrap_err();
        assert_eq!(refused.what, "user");
        assert!(refused.retry_after >= 1);
        assert_eq!(
            t.check("bob", Some(a)),
            Ok(()),
            "other names from a are fine"
        );
        t.record("bob", Some(a), false);
        t.record("carol", Some(a), false);
        assert_eq!(t.check("dave", Some(a)).unwrap_err().what, "address");
        assert_eq!(t.check("dave", Some(b)), Ok(()));
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(t.check("alice", Some(a)), Ok(()), "the window is over");
    }

    #[test]
    fn a_success_clears_the_name_and_long_names_are_one_entry() {
        let t = LoginThrottle::new(&limits(2, 100));
        t.record("alice", None, false);
        t.record("alice", None, true);
        t.record("alice", None, false);
        assert_eq!(t.check("alice", None), Ok(()));
        let long = "é".repeat(10_000);
        let other = format!("{long}x");
        t.record(&long, None, false);
        t.record(&other, None, false);
        assert!(
            t.check(&long, None).is_err(),
            "both share their first bytes"
        );
        assert!(t
            .per_user
            .lock()
            .unwrap()
            .keys()
            .all(|k| k.len() <= MAX_NAME));
    }

    #[test]
    fn the_maps_stay_bounded() {
        let t = LoginThrottle::new(&limits(5, 5));
        for i in 0..(MAX_TRACKED + 10) {
            t.record(&format!("u{i}"), None, false);
        }
        assert!(t.per_user.lock().unwrap().len() <= MAX_TRACKED);
    }
}
