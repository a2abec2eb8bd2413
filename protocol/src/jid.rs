//! Job ids and the timestamps Salt writes next to them.
//!
//! A jid is the UTC time of the publish as `%Y%m%d%H%M%S%f`: 20 digits, microseconds.
//! Salt's `unique_jid` form appends `_<pid>`; both are accepted by [`is_jid`].

use std::sync::Mutex;

use chrono::{DateTime, Datelike, Duration, Local, NaiveDateTime, Timelike, Utc};

/// Last jid time handed out in this process, to keep jids strictly increasing.
static LAST_JID: Mutex<Option<NaiveDateTime>> = Mutex::new(None);

/// A new jid for "now" (UTC). Strictly increasing within the process: when the clock has
/// not moved past the previous jid, the previous one plus 1 µs is used.
pub fn gen_jid() -> String {
    let now = truncate_to_micros(Utc::now().naive_utc());
    let mut last = LAST_JID
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let next = match *last {
        Some(prev) if prev >= now => prev + Duration::microseconds(1),
        _ => now,
    };
    *last = Some(next);
    format_jid(&next)
}

fn truncate_to_micros(t: NaiveDateTime) -> NaiveDateTime {
    let micros = (t.nanosecond() % 1_000_000_000) / 1000;
    t.with_nanosecond(micros * 1000).unwrap_or(t)
}

/// The jid of the time `age` ago: jobs published before then sort below it. An age beyond
/// year 1 gives the jid of year 1.
pub fn jid_ago(age: std::time::Duration) -> String {
    let t = Duration::from_std(age)
        .ok()
        .and_then(|d| Utc::now().checked_sub_signed(d))
        .map(|t| t.naive_utc())
        .filter(|t| t.year() >= 1)
        .unwrap_or_else(|| {
            chrono::NaiveDate::from_ymd_opt(1, 1, 1)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .expect("year 1 exists")
        });
    format_jid(&t)
}

/// `%Y%m%d%H%M%S%f` of `t`.
pub fn format_jid(t: &NaiveDateTime) -> String {
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}{:06}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        micros(t)
    )
}

fn micros(t: &NaiveDateTime) -> u32 {
    // A leap second is carried in nanoseconds >= 1e9; Python has no such value.
    (t.nanosecond() % 1_000_000_000) / 1000
}

/// Salt's `is_jid`: 20 characters, or more with `_` at index 20; the first 20 are digits.
/// (Python's `int()` would also take signs, spaces and `_` there; real jids never have them.)
pub fn is_jid(s: &str) -> bool {
    let b = s.as_bytes();
    let shape_ok = b.len() == 20 || (b.len() > 21 && b[20] == b'_');
    shape_ok && b[..20].iter().all(u8::is_ascii_digit)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Salt's `jid_to_time`: `"20261122101920403461"` → `"2026, Nov 22 10:19:20.403461"`.
/// `None` when `jid` is not a jid or its month is out of range (Salt returns `""` or
/// raises).
pub fn jid_to_time(jid: &str) -> Option<String> {
    if !is_jid(jid) {
        return None;
    }
    let month: usize = jid[4..6].parse().ok()?;
    let name = MONTHS.get(month.checked_sub(1)?)?;
    // Pieces pushed in place (`jobs.list_jobs` writes one per job: 100,000 at a time).
    let mut out = String::with_capacity(28);
    for piece in [
        &jid[..4],
        ", ",
        name,
        " ",
        &jid[6..8],
        " ",
        &jid[8..10],
        ":",
        &jid[10..12],
        ":",
        &jid[12..14],
        ".",
        &jid[14..20],
    ] {
        out.push_str(piece);
    }
    Some(out)
}

/// `datetime.utcnow().isoformat()`, the `_stamp` of every event:
/// `"2026-11-22T10:17:15.646785"`, without a fraction when the microseconds are 0.
pub fn stamp_now() -> String {
    format_stamp(&Utc::now().naive_utc())
}

/// Python `isoformat()` of a naive datetime.
pub fn format_stamp(t: &NaiveDateTime) -> String {
    let base = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    match micros(t) {
        0 => base,
        us => format!("{base}.{us:06}"),
    }
}

/// Local `time.asctime()`: `"Sun Nov 22 10:16:47 2026"` (day padded with a space).
pub fn asctime_now() -> String {
    format_asctime(&Local::now().naive_local())
}

/// Python `time.asctime()` layout of `t`.
pub fn format_asctime(t: &NaiveDateTime) -> String {
    t.format("%a %b %e %H:%M:%S %Y").to_string()
}

/// Parses a jid back into its UTC time (for ordering and job-cache expiry).
pub fn jid_time(jid: &str) -> Option<DateTime<Utc>> {
    if !is_jid(jid) {
        return None;
    }
    let t = NaiveDateTime::parse_from_str(&jid[..14], "%Y%m%d%H%M%S").ok()?;
    let us: i64 = jid[14..20].parse().ok()?;
    Some((t + Duration::microseconds(us)).and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, us: u32) -> NaiveDateTime {
        NaiveDate::from_ymd_opt(y, mo, d)
            .and_then(|d| d.and_hms_micro_opt(h, mi, s, us))
            .expect("valid test date")
    }

    #[test]
    fn jid_format_is_twenty_digits() {
        let t = at(2026, 11, 22, 10, 19, 20, 403_461);
        assert_eq!(format_jid(&t), "20261122101920403461");
        assert_eq!(
            format_jid(&at(2026, 1, 2, 3, 4, 5, 6)),
            "20260102030405000006"
        );
    }

    #[test]
    fn gen_jid_is_strictly_increasing() {
        let mut prev = gen_jid();
        assert!(is_jid(&prev));
        assert_eq!(prev.len(), 20);
        for _ in 0..2000 {
            let next = gen_jid();
            assert!(next > prev, "{next} <= {prev}");
            prev = next;
        }
    }

    #[test]
    fn gen_jid_is_close_to_now() {
        let jid = gen_jid();
        let t = jid_time(&jid).expect("parsable");
        let drift = (Utc::now() - t).num_seconds().abs();
        assert!(drift < 60, "jid {jid} is {drift}s away from now");
    }

    #[test]
    fn is_jid_like_salt() {
        assert!(is_jid("20261122101920403461"));
        assert!(is_jid("20261122101920403461_1234"));
        assert!(
            !is_jid("20261122101920403461_"),
            "needs something after '_'"
        );
        assert!(!is_jid("2026112210192040346"));
        assert!(!is_jid("202611221019204034610"));
        assert!(!is_jid("2026112210192040346x"));
        assert!(!is_jid("20261122101920403461-123"));
        assert!(!is_jid(""));
        assert!(!is_jid("req"));
    }

    #[test]
    fn jid_to_time_like_salt() {
        assert_eq!(
            jid_to_time("20261122101920403461").as_deref(),
            Some("2026, Nov 22 10:19:20.403461")
        );
        assert_eq!(
            jid_to_time("20260105010203000004_99").as_deref(),
            Some("2026, Jan 05 01:02:03.000004")
        );
        assert_eq!(jid_to_time("20261322101920403461"), None);
        assert_eq!(jid_to_time("20260022101920403461"), None);
        assert_eq!(jid_to_time("nope"), None);
    }

    #[test]
    fn stamp_like_python_isoformat() {
        assert_eq!(
            format_stamp(&at(2026, 11, 22, 10, 17, 15, 646_785)),
            "2026-11-22T10:17:15.646785"
        );
        assert_eq!(
            format_stamp(&at(2026, 11, 22, 10, 17, 15, 0)),
            "2026-11-22T10:17:15"
        );
        assert_eq!(
            format_stamp(&at(2026, 11, 22, 10, 17, 15, 5)),
            "2026-11-22T10:17:15.000005"
        );
        let now = stamp_now();
        assert!(now.len() == 19 || now.len() == 26, "{now}");
        assert_eq!(&now[10..11], "T");
    }

    #[test]
    fn asctime_like_python() {
        assert_eq!(
            format_asctime(&at(2026, 11, 22, 10, 16, 47, 1)),
            "Sun Nov 22 10:16:47 2026"
        );
        assert_eq!(
            format_asctime(&at(2026, 11, 2, 9, 6, 7, 0)),
            "Mon Nov  2 09:06:07 2026"
        );
        assert_eq!(asctime_now().len(), 24);
    }

    #[test]
    fn jid_time_round_trip() {
        let t = at(2026, 11, 22, 10, 19, 20, 403_461);
        let jid = format_jid(&t);
        assert_eq!(jid_time(&jid).map(|d| d.naive_utc()), Some(t));
        assert_eq!(jid_time("bad"), None);
    }

    #[test]
    fn jid_ago_sorts_between_older_and_newer_jids() {
        let hour_ago = jid_ago(std::time::Duration::from_secs(3600));
        assert!(is_jid(&hour_ago));
        let older = format_jid(&(Utc::now() - Duration::seconds(3700)).naive_utc());
        assert!(older < hour_ago && hour_ago < gen_jid());
        // An age past chrono's range still gives a jid, older than any.
        assert!(jid_ago(std::time::Duration::MAX) < older);
    }
}
