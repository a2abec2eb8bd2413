//! Counters behind `GET /metrics` (Prometheus text format) and `GET /stats`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency histogram, in seconds.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    total: u64,
}

#[derive(Default)]
pub struct Metrics {
    /// (method, route, status) -> count
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<BTreeMap<String, Histogram>>,
    pub in_flight: AtomicI64,
    pub jobs_published: AtomicU64,
    pub returns_received: AtomicU64,
    pub events_delivered: AtomicU64,
    pub event_streams: AtomicI64,
    pub logins: AtomicU64,
    pub login_failures: AtomicU64,
    /// Request body bytes received (by `Content-Length`) and answer body bytes sent (where the
    /// size is known), and the time spent answering, for `/stats`.
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub busy_micros: AtomicU64,
}

impl Metrics {
    pub fn observe(&self, method: &str, route: &str, status: u16, took: Duration) {
        *self
            .requests
            .lock()
            .expect("metrics lock")
            .entry((method.to_string(), route.to_string(), status))
            .or_default() += 1;
        let mut lat = self.latency.lock().expect("metrics lock");
        let h = lat.entry(route.to_string()).or_insert_with(|| Histogram {
            counts: vec![0; BUCKETS.len()],
            ..Histogram::default()
        });
        let s = took.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if s <= *b {
                h.counts[i] += 1;
            }
        }
        h.sum += s;
        h.total += 1;
    }

    pub fn total_requests(&self) -> u64 {
        self.requests.lock().expect("metrics lock").values().sum()
    }

    /// The Prometheus exposition text. `connected` = minions connected to the publish port.
    pub fn render(&self, connected: usize, uptime: Duration) -> String {
        let mut out = String::new();
        out.push_str("# HELP brine_api_requests_total HTTP requests served.\n# TYPE brine_api_requests_total counter\n");
        for ((m, r, s), n) in self.requests.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "brine_api_requests_total{{method=\"{m}\",route=\"{}\",status=\"{s}\"}} {n}",
                r.replace('"', "\\\"")
            );
        }
        out.push_str("# HELP brine_api_request_duration_seconds Time to answer a request.\n# TYPE brine_api_request_duration_seconds histogram\n");
        for (r, h) in self.latency.lock().expect("metrics lock").iter() {
            let r = r.replace('"', "\\\"");
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "brine_api_request_duration_seconds_bucket{{route=\"{r}\",le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "brine_api_request_duration_seconds_bucket{{route=\"{r}\",le=\"+Inf\"}} {}",
                h.total
            );
            let _ = writeln!(
                out,
                "brine_api_request_duration_seconds_sum{{route=\"{r}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "brine_api_request_duration_seconds_count{{route=\"{r}\"}} {}",
                h.total
            );
        }
        let gauge = |out: &mut String, name: &str, help: &str, kind: &str, v: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        };
        gauge(
            &mut out,
            "brine_api_requests_in_flight",
            "Requests being served.",
            "gauge",
            self.in_flight.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "brine_api_jobs_published_total",
            "Jobs published through the API.",
            "counter",
            self.jobs_published.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "brine_api_returns_total",
            "Minion returns collected for API callers.",
            "counter",
            self.returns_received.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "brine_api_events_delivered_total",
            "Events written to /events and /ws streams.",
            "counter",
            self.events_delivered.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "brine_api_event_streams",
            "Open /events and /ws streams.",
            "gauge",
            self.event_streams.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "brine_api_logins_total",
            "Successful logins.",
            "counter",
            self.logins.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "brine_api_login_failures_total",
            "Refused logins.",
            "counter",
            self.login_failures.load(Ordering::Relaxed).to_string(),
        );
        gauge(
            &mut out,
            "brine_connected_minions",
            "Minions connected to the master's publish port.",
            "gauge",
            connected.to_string(),
        );
        gauge(
            &mut out,
            "brine_api_uptime_seconds",
            "Seconds since the API started.",
            "gauge",
            uptime.as_secs().to_string(),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.observe("GET", "/", 200, Duration::from_millis(3));
        m.observe("GET", "/", 200, Duration::from_millis(30));
        m.jobs_published.fetch_add(2, Ordering::Relaxed);
        let t = m.render(3, Duration::from_secs(5));
        assert!(t.contains("brine_api_requests_total{method=\"GET\",route=\"/\",status=\"200\"} 2"));
        assert!(t.contains("brine_api_request_duration_seconds_bucket{route=\"/\",le=\"0.005\"} 1"));
        assert!(t.contains("brine_api_request_duration_seconds_count{route=\"/\"} 2"));
        assert!(t.contains("brine_api_jobs_published_total 2"));
        assert!(t.contains("brine_connected_minions 3"));
        assert_eq!(m.total_requests(), 2);
    }
}
