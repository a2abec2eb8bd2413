//! Replay protection for aes requests. Every aes load a Salt 3006+ minion sends carries a fresh
//! `nonce` and its clock's `ts` (whole seconds). A request is accepted once: its `ts` must lie
//! within the window of the master's clock, and its (minion, nonce) pair must not have been
//! seen within the window. Pairs are forgotten when the window has passed, so memory follows
//! the request rate times the window.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// Why a request was refused.
#[derive(Debug, PartialEq)]
pub enum Replay {
    /// `ts` is more than the window away from the master's clock.
    Expired { skew: i64, window: u64 },
    /// The nonce was already used by this minion within the window.
    Replayed,
}

impl std::fmt::Display for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Replay::Expired { skew, window } => write!(
                f,
                "ts is {skew} s away from the master's clock (request_server_ttl {window} s)"
            ),
            Replay::Replayed => write!(f, "nonce already used (a replayed request)"),
        }
    }
}

pub struct ReplayGuard {
    window: u64,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    keys: HashSet<u128>,
    /// (second after which the key may be forgotten, key), in insertion order.
    expiry: VecDeque<(u64, u128)>,
}

impl ReplayGuard {
    pub fn new(window: u64) -> ReplayGuard {
        ReplayGuard {
            window: window.max(1),
            seen: Mutex::new(Seen::default()),
        }
    }

    /// Accept (and remember) or refuse one request of minion `id` at master time `now`.
    pub fn check(&self, id: &str, nonce: &str, ts: i64, now: u64) -> Result<(), Replay> {
        let skew = ts.saturating_sub(now as i64);
        if skew.unsigned_abs() > self.window {
            return Err(Replay::Expired {
                skew,
                window: self.window,
            });
        }
        let key = pair_key(id, nonce);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(&(until, old)) = seen.expiry.front() {
            if until >= now {
                break;
            }
            seen.expiry.pop_front();
            seen.keys.remove(&old);
        }
        if !seen.keys.insert(key) {
            return Err(Replay::Replayed);
        }
        // A request whose ts is accepted until ts + window; remember it until then, measured on
        // the master's clock (never before now + window, as the minion's clock may lag).
        let until = now + 2 * self.window;
        seen.expiry.push_back((until, key));
        Ok(())
    }

    /// Pairs remembered now (for tests and metrics).
    pub fn remembered(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys
            .len()
    }
}

/// 128 bits of SHA-256 over the minion id and the nonce: fixed-size keys whatever the client
/// sends, and no collision an attacker could aim for.
fn pair_key(id: &str, nonce: &str) -> u128 {
    let mut h = Sha256::new();
    h.update(id.as_bytes());
    h.update([0u8]);
    h.update(nonce.as_bytes());
    let d = h.finalize();
    u128::from_be_bytes(d[..16].try_into().expect("a SHA-256 digest has 32 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_accepted_once_per_minion_within_the_window() {
        let g = ReplayGuard::new(120);
        assert_eq!(g.check("m1", "n1", 1000, 1000), Ok(()));
        assert_eq!(g.check("m1", "n1", 1000, 1001), Err(Replay::Replayed));
        // The same nonce from another minion is another request.
        assert_eq!(g.check("m2", "n1", 1000, 1001), Ok(()));
        assert_eq!(g.check("m1", "n2", 1001, 1001), Ok(()));
    }

    #[test]
    fn ts_outside_the_window_is_refused_both_ways() {
        let g = ReplayGuard::new(120);
        assert!(matches!(
            g.check("m1", "a", 1000 - 121, 1000),
            Err(Replay::Expired { skew: -121, .. })
        ));
        assert!(matches!(
            g.check("m1", "b", 1000 + 121, 1000),
            Err(Replay::Expired { skew: 121, .. })
        ));
        assert_eq!(g.check("m1", "c", 1000 - 120, 1000), Ok(()));
        assert!(matches!(
            g.check("m1", "d", i64::MIN, 1000),
            Err(Replay::Expired { .. })
        ));
    }

    #[test]
    fn nonces_are_forgotten_once_no_replay_could_pass_the_ts_check() {
        let g = ReplayGuard::new(10);
        g.check("m1", "n", 100, 100).unwrap();
        // Still remembered while its ts is acceptable.
        assert_eq!(g.check("m1", "n", 100, 110), Err(Replay::Replayed));
        // Later, the ts check alone refuses it, and the memory is freed.
        assert!(matches!(
            g.check("m1", "n", 100, 200),
            Err(Replay::Expired { .. })
        ));
        g.check("m1", "other", 200, 200).unwrap();
        assert_eq!(g.remembered(), 1);
    }
}
