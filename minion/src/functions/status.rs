//! The `status` execution module (the parts read from /proc): `uptime`, `loadavg`.

use std::time::{SystemTime, UNIX_EPOCH};

use rmpv::Value;

use super::{Context, CallState};
use super::args::{Bound, Signature};
use super::{FnError, Spec};
use brine_protocol::payload::map;

/// The functions of the `status` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Loadavg,
    Uptime,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[Fun::Loadavg, Fun::Uptime];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, doc) = match self {
            Fun::Loadavg => (
                "status.loadavg",
                "loadavg",
                "
    Return the 1, 5 and 15 minute load averages.

    CLI Example:

        salt '*' status.loadavg
    ",
            ),
            Fun::Uptime => (
                "status.uptime",
                "uptime",
                "
    Return how long the system has been up: seconds, since_iso, since_t, days,
    time (hours:minutes) and the number of login sessions (users).

    CLI Example:

        salt '*' status.uptime
    ",
            ),
        };
        Spec {
            name,
            pyname,
            sig: Signature::NONE,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(self, _ctx: &Context, _b: &Bound, _st: &mut CallState) -> Result<Value, FnError> {
        match self {
            Fun::Loadavg => {
                let text = std::fs::read_to_string("/proc/loadavg").map_err(|e| {
                    FnError::Execution(format!(
                        "status.loadavag is not available on your platform: {e}"
                    ))
                })?;
                parse_loadavg(&text).ok_or_else(|| {
                    FnError::Execution("status.loadavag is not available on your platform".into())
                })
            }
            Fun::Uptime => {
                let text = std::fs::read_to_string("/proc/uptime")
                    .map_err(|_| FnError::Execution("File /proc/uptime was not found.".into()))?;
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0);
                let mut ret = uptime_from(&text, now).ok_or_else(|| {
                    FnError::Execution("File /proc/uptime could not be parsed.".into())
                })?;
                if let Some(users) = count_users().await {
                    if let Value::Map(entries) = &mut ret {
                        entries.push((Value::from("users"), Value::from(users)));
                    }
                }
                Ok(ret)
            }
        }
    }
}

fn parse_loadavg(text: &str) -> Option<Value> {
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    let (one, five, fifteen) = (it.next()??, it.next()??, it.next()??);
    Some(map([
        ("1-min", Value::F64(one)),
        ("5-min", Value::F64(five)),
        ("15-min", Value::F64(fifteen)),
    ]))
}

/// Salt's uptime map (without `users`) from /proc/uptime text at time `now`.
fn uptime_from(text: &str, now: f64) -> Option<Value> {
    let up: f64 = text.split_whitespace().next()?.parse().ok()?;
    let seconds = up as i64;
    let boot = now - seconds as f64;
    let since_iso = iso_utc(boot)?;
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    Some(map([
        ("seconds", Value::from(seconds)),
        ("since_iso", Value::from(since_iso)),
        ("since_t", Value::from(boot as i64)),
        ("days", Value::from(days)),
        (
            "time",
            Value::from(format!("{}:{}", rest / 3600, rest % 3600 / 60)),
        ),
    ]))
}

/// Python's `datetime.utcfromtimestamp(t).isoformat()`.
fn iso_utc(t: f64) -> Option<String> {
    let secs = t.floor();
    let micros = ((t - secs) * 1_000_000.0).round() as u32;
    let (secs, micros) = if micros >= 1_000_000 {
        (secs as i64 + 1, 0)
    } else {
        (secs as i64, micros)
    };
    let dt = chrono::DateTime::from_timestamp(secs, micros * 1000)?;
    Some(if micros == 0 {
        dt.format("%Y-%m-%dT%H:%M:%S").to_string()
    } else {
        dt.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
    })
}

/// Salt counts the lines of `who -s` (an empty output counts as one line).
async fn count_users() -> Option<usize> {
    let who = super::cmd::which("who")?;
    let out = tokio::process::Command::new(who)
        .arg("-s")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.trim_end().split('\n').count())
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::get;

    #[test]
    fn uptime_fields() {
        let v = uptime_from("93784.56 1000.0\n", 1_700_000_000.25).unwrap();
        assert_eq!(get(&v, "seconds"), Some(&Value::from(93784)));
        assert_eq!(get(&v, "days"), Some(&Value::from(1)));
        assert_eq!(get(&v, "time"), Some(&s("2:3")));
        assert_eq!(
            get(&v, "since_t"),
            Some(&Value::from(1_700_000_000i64 - 93784))
        );
        assert_eq!(get(&v, "since_iso"), Some(&s("2023-11-13T20:10:16.250000")));
        assert!(uptime_from("garbage", 0.0).is_none());
        assert_eq!(iso_utc(0.0).unwrap(), "1970-01-01T00:00:00");
    }

    #[test]
    fn loadavg_fields() {
        let v = parse_loadavg("0.52 0.58 0.59 1/389 12345\n").unwrap();
        assert_eq!(
            v,
            map([
                ("1-min", Value::F64(0.52)),
                ("5-min", Value::F64(0.58)),
                ("15-min", Value::F64(0.59))
            ])
        );
        assert!(parse_loadavg("x").is_none());
    }

    #[tokio::test]
    async fn live_uptime_and_loadavg() {
        let r = call(&ctx(), "status.uptime", &[]).await;
        assert_eq!(r.retcode, 0, "{:?}", r.ret);
        for key in ["seconds", "since_iso", "since_t", "days", "time"] {
            assert!(get(&r.ret, key).is_some(), "{key}");
        }
        let r = call(&ctx(), "status.loadavg", &[]).await;
        assert!(get(&r.ret, "15-min").and_then(Value::as_f64).is_some());
    }
}
