//! Swarm-wide counters (atomics shared by every simulated minion), the progress line and
//! the JSON summary.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counters. "Now" gauges go up and down; the rest only count up.
#[derive(Default)]
pub struct Stats {
    /// Minion tasks started (their connect slot came).
    pub launched: AtomicU64,
    /// Gauge: minions holding credentials (signed in).
    pub signed_in: AtomicU64,
    /// Gauge: minions signed in, subscribed, with pillar and start events sent.
    pub ready: AtomicU64,
    /// Gauge: open SUB connections.
    pub subscribed: AtomicU64,
    /// Successful `_auth` exchanges (first sign-ins and re-sign-ins).
    pub auths: AtomicU64,
    /// Re-sign-ins after a publish did not decrypt (AES key rotation) or a refused session.
    pub reauths: AtomicU64,
    /// `_auth` answers "pending".
    pub pending: AtomicU64,
    /// `_auth` answers "rejected" / "full".
    pub rejected: AtomicU64,
    pub publishes_received: AtomicU64,
    pub publishes_matched: AtomicU64,
    pub returns_sent: AtomicU64,
    pub returns_acked: AtomicU64,
    /// `_minion_event` and `_pillar` requests answered.
    pub other_acked: AtomicU64,
    /// Request timeouts (each also counts in `errors`).
    pub timeouts: AtomicU64,
    /// Every failed exchange or undecodable message.
    pub errors: AtomicU64,
    /// Gauge: jobs running.
    pub jobs_running: AtomicU64,
    marks: Mutex<Marks>,
    /// Milliseconds of each `_pillar` exchange made for `saltutil.refresh_pillar`.
    pillar_refresh_ms: Mutex<Vec<f64>>,
}

#[derive(Default)]
struct Marks {
    all_signed_in: Option<Duration>,
    all_ready: Option<Duration>,
}

fn ld(a: &AtomicU64) -> u64 {
    a.load(Relaxed)
}

impl Stats {
    pub fn inc(a: &AtomicU64) {
        a.fetch_add(1, Relaxed);
    }

    pub fn dec(a: &AtomicU64) {
        a.fetch_sub(1, Relaxed);
    }

    /// Note when every minion first became signed in / ready.
    pub fn mark(&self, total: u64, since: Instant) {
        let mut m = self.marks.lock().expect("marks lock");
        if m.all_signed_in.is_none() && ld(&self.signed_in) >= total {
            m.all_signed_in = Some(since.elapsed());
        }
        if m.all_ready.is_none() && ld(&self.ready) >= total {
            m.all_ready = Some(since.elapsed());
        }
    }

    /// One `_pillar` exchange made for `saltutil.refresh_pillar` took `d`.
    pub fn pillar_refreshed(&self, d: Duration) {
        self.pillar_refresh_ms
            .lock()
            .expect("pillar lock")
            .push(d.as_secs_f64() * 1000.0);
    }

    /// Count, p50, p99 and max (ms) of the pillar refreshes so far.
    pub fn pillar_refresh_summary(&self) -> serde_json::Value {
        let mut v = self.pillar_refresh_ms.lock().expect("pillar lock").clone();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| {
            (!v.is_empty()).then(|| {
                let i = ((v.len() - 1) as f64 * q).round() as usize;
                (v[i] * 1000.0).round() / 1000.0
            })
        };
        serde_json::json!({
            "count": v.len(),
            "p50_ms": at(0.5),
            "p99_ms": at(0.99),
            "max_ms": at(1.0),
        })
    }

    /// One progress line.
    pub fn progress_line(&self, total: u64, elapsed: Duration) -> String {
        format!(
            "[{:>7.1}s] launched {}/{total} signed_in {} ready {} sub {} pending {} \
             pub_rx {} matched {} ret {}/{} reauth {} err {} (timeouts {}) running {} rss {} MiB",
            elapsed.as_secs_f64(),
            ld(&self.launched),
            ld(&self.signed_in),
            ld(&self.ready),
            ld(&self.subscribed),
            ld(&self.pending),
            ld(&self.publishes_received),
            ld(&self.publishes_matched),
            ld(&self.returns_acked),
            ld(&self.returns_sent),
            ld(&self.reauths),
            ld(&self.errors),
            ld(&self.timeouts),
            ld(&self.jobs_running),
            rss_kib().0 / 1024,
        )
    }

    /// The final summary.
    pub fn summary(&self, total: u64, elapsed: Duration) -> serde_json::Value {
        let m = self.marks.lock().expect("marks lock");
        let secs = |d: Option<Duration>| d.map(|d| (d.as_secs_f64() * 1000.0).round() / 1000.0);
        let (rss, peak) = rss_kib();
        serde_json::json!({
            "minions": total,
            "elapsed_secs": secs(Some(elapsed)),
            "launched": ld(&self.launched),
            "signed_in": ld(&self.signed_in),
            "ready": ld(&self.ready),
            "subscribed": ld(&self.subscribed),
            "all_signed_in_secs": secs(m.all_signed_in),
            "all_ready_secs": secs(m.all_ready),
            "auths": ld(&self.auths),
            "reauths": ld(&self.reauths),
            "pending_answers": ld(&self.pending),
            "rejected_answers": ld(&self.rejected),
            "publishes_received": ld(&self.publishes_received),
            "publishes_matched": ld(&self.publishes_matched),
            "returns_sent": ld(&self.returns_sent),
            "returns_acked": ld(&self.returns_acked),
            "other_requests_acked": ld(&self.other_acked),
            "timeouts": ld(&self.timeouts),
            "errors": ld(&self.errors),
            "jobs_running": ld(&self.jobs_running),
            "pillar_refresh": self.pillar_refresh_summary(),
            "rss_kib": rss,
            "peak_rss_kib": peak,
        })
    }
}

/// (VmRSS, VmHWM) of this process in KiB, from /proc (0 where unavailable).
pub fn rss_kib() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_set_once_when_everyone_is_in() {
        let s = Stats::default();
        let t0 = Instant::now();
        s.mark(2, t0);
        Stats::inc(&s.signed_in);
        s.mark(2, t0);
        assert!(s.summary(2, t0.elapsed())["all_signed_in_secs"].is_null());
        Stats::inc(&s.signed_in);
        s.mark(2, t0);
        let sum = s.summary(2, t0.elapsed());
        assert!(sum["all_signed_in_secs"].as_f64().is_some());
        assert!(sum["all_ready_secs"].is_null());
        assert_eq!(sum["signed_in"], 2);
        assert!(s.progress_line(2, t0.elapsed()).contains("signed_in 2"));
    }

    #[test]
    fn pillar_refreshes_are_summarised_by_percentile() {
        let s = Stats::default();
        assert_eq!(s.pillar_refresh_summary()["count"], 0);
        assert!(s.pillar_refresh_summary()["p50_ms"].is_null());
        for ms in [30, 10, 20] {
            s.pillar_refreshed(Duration::from_millis(ms));
        }
        let sum = s.summary(3, Duration::from_secs(1));
        assert_eq!(sum["pillar_refresh"]["count"], 3);
        assert_eq!(sum["pillar_refresh"]["p50_ms"], 20.0);
        assert_eq!(sum["pillar_refresh"]["max_ms"], 30.0);
    }

    #[test]
    fn rss_is_read_on_linux() {
        let (rss, peak) = rss_kib();
        assert!(rss > 0 && peak >= rss);
    }
}
