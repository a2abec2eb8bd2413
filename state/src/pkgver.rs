//! Package version comparison as the package managers do it: dpkg's for Debian-family
//! systems, rpm's for RHEL-family ones, and Salt's version conditions (`>=1.2, <2`) on top.

use std::cmp::Ordering;

/// Which package manager's rules compare versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Deb,
    Rpm,
}

impl Scheme {
    /// The scheme of a minion's `os_family` grain (`RedHat`, `Suse` use rpm's).
    pub fn of_os_family(family: &str) -> Scheme {
        match family {
            "RedHat" | "Suse" | "Mandrake" => Scheme::Rpm,
            _ => Scheme::Deb,
        }
    }

    /// Compare two versions; with `ignore_epoch` the `N:` prefixes are dropped first.
    pub fn compare(self, a: &str, b: &str, ignore_epoch: bool) -> Ordering {
        let strip = |v: &str| -> String {
            if ignore_epoch {
                v.split_once(':').map_or(v, |(_, rest)| rest).to_string()
            } else {
                v.to_string()
            }
        };
        let (a, b) = (strip(a), strip(b));
        match self {
            Scheme::Deb => deb_compare(&a, &b),
            Scheme::Rpm => rpm_compare(&a, &b),
        }
    }
}

/// dpkg's ordering of one non-digit character: `~` sorts before everything, even the end
/// of the string; letters before other characters.
fn deb_order(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(b'~') => -1,
        Some(c) => i32::from(c) + 256,
    }
}

/// dpkg's `verrevcmp`: alternating non-digit and digit runs.
fn deb_part(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit()) {
            let (ac, bc) = (deb_order(a.get(i).copied()), deb_order(b.get(j).copied()));
            if ac != bc {
                return ac.cmp(&bc);
            }
            i += 1;
            j += 1;
        }
        while i < a.len() && a[i] == b'0' {
            i += 1;
        }
        while j < b.len() && b[j] == b'0' {
            j += 1;
        }
        let mut first_diff = Ordering::Equal;
        while i < a.len() && a[i].is_ascii_digit() && j < b.len() && b[j].is_ascii_digit() {
            if first_diff == Ordering::Equal {
                first_diff = a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
        if i < a.len() && a[i].is_ascii_digit() {
            return Ordering::Greater;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            return Ordering::Less;
        }
        if first_diff != Ordering::Equal {
            return first_diff;
        }
    }
    Ordering::Equal
}

/// `epoch:upstream-revision` split as dpkg splits it.
fn deb_split(v: &str) -> (u64, &str, &str) {
    let (epoch, rest) = match v.split_once(':') {
        Some((e, rest)) => (e.trim().parse().unwrap_or(0), rest),
        None => (0, v),
    };
    match rest.rsplit_once('-') {
        Some((upstream, revision)) => (epoch, upstream, revision),
        None => (epoch, rest, ""),
    }
}

/// `dpkg --compare-versions`.
pub fn deb_compare(a: &str, b: &str) -> Ordering {
    let (ea, ua, ra) = deb_split(a.trim());
    let (eb, ub, rb) = deb_split(b.trim());
    ea.cmp(&eb)
        .then_with(|| deb_part(ua, ub))
        .then_with(|| deb_part(ra, rb))
}

/// rpm's `rpmvercmp` for one version or release string.
fn rpm_part(a: &str, b: &str) -> Ordering {
    if a == b {
        return Ordering::Equal;
    }
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    let sep = |c: u8| !c.is_ascii_alphanumeric() && c != b'~' && c != b'^';
    loop {
        while i < a.len() && sep(a[i]) {
            i += 1;
        }
        while j < b.len() && sep(b[j]) {
            j += 1;
        }
        let (ta, tb) = (a.get(i).copied(), b.get(j).copied());
        if ta == Some(b'~') || tb == Some(b'~') {
            if ta != Some(b'~') {
                return Ordering::Greater;
            }
            if tb != Some(b'~') {
                return Ordering::Less;
            }
            i += 1;
            j += 1;
            continue;
        }
        if ta == Some(b'^') || tb == Some(b'^') {
            if ta.is_none() {
                return Ordering::Less;
            }
            if tb.is_none() {
                return Ordering::Greater;
            }
            if ta != Some(b'^') {
                return Ordering::Greater;
            }
            if tb != Some(b'^') {
                return Ordering::Less;
            }
            i += 1;
            j += 1;
            continue;
        }
        if ta.is_none() || tb.is_none() {
            break;
        }
        let numeric = a[i].is_ascii_digit();
        let run = |s: &[u8], k: usize| -> usize {
            let mut e = k;
            while e < s.len()
                && if numeric {
                    s[e].is_ascii_digit()
                } else {
                    s[e].is_ascii_alphabetic()
                }
            {
                e += 1;
            }
            e
        };
        let (ea, eb) = (run(a, i), run(b, j));
        if eb == j {
            // Segments of different kinds: a number is newer than letters.
            return if numeric {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        let (mut sa, mut sb) = (&a[i..ea], &b[j..eb]);
        if numeric {
            while sa.first() == Some(&b'0') {
                sa = &sa[1..];
            }
            while sb.first() == Some(&b'0') {
                sb = &sb[1..];
            }
            match sa.len().cmp(&sb.len()) {
                Ordering::Equal => {}
                other => return other,
            }
        }
        match sa.cmp(sb) {
            Ordering::Equal => {}
            other => return other,
        }
        i = ea;
        j = eb;
    }
    match (i >= a.len(), j >= b.len()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        _ => Ordering::Greater,
    }
}

/// rpm's `[epoch:]version[-release]` comparison (`rpmdev-vercmp`).
pub fn rpm_compare(a: &str, b: &str) -> Ordering {
    let split = |v: &str| -> (u64, String, String) {
        let (epoch, rest) = match v.split_once(':') {
            Some((e, rest)) => (e.trim().parse().unwrap_or(0), rest),
            None => (0, v),
        };
        match rest.rsplit_once('-') {
            Some((ver, rel)) => (epoch, ver.to_string(), rel.to_string()),
            None => (epoch, rest.to_string(), String::new()),
        }
    };
    let (ea, va, ra) = split(a.trim());
    let (eb, vb, rb) = split(b.trim());
    ea.cmp(&eb).then_with(|| rpm_part(&va, &vb)).then_with(|| {
        if ra.is_empty() || rb.is_empty() {
            Ordering::Equal
        } else {
            rpm_part(&ra, &rb)
        }
    })
}

/// Salt's `split_comparison`: `>=1.2` as (`>=`, `1.2`); a bare version or `=` is `==`.
pub fn split_condition(spec: &str) -> (&'static str, String) {
    let spec = spec.trim();
    for op in ["<=>", "!=", ">=", "<=", ">>", "<<", "<>", ">", "<", "="] {
        if let Some(rest) = spec.strip_prefix(op) {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            if !rest.is_empty() && !rest.contains(['<', '>', '=']) {
                let op = if op == "=" { "==" } else { op };
                return (op, rest.to_string());
            }
            return ("==", spec.to_string());
        }
    }
    ("==", spec.to_string())
}

/// Whether `installed` meets one condition (`oper` from [`split_condition`]). Salt ignores
/// the epoch when the wanted version has none and the operator is an equality.
pub fn fulfills(
    scheme: Scheme,
    installed: &str,
    oper: &str,
    wanted: &str,
    ignore_epoch: Option<bool>,
) -> bool {
    if oper == "==" && brine_protocol::target::fnmatch(wanted, installed) {
        return true;
    }
    let ignore =
        ignore_epoch.unwrap_or(!oper.contains('<') && !oper.contains('>') && !wanted.contains(':'));
    let ord = scheme.compare(installed, wanted, ignore);
    match oper {
        "==" => ord == Ordering::Equal,
        "!=" | "<>" => ord != Ordering::Equal,
        ">=" => ord != Ordering::Less,
        "<=" => ord != Ordering::Greater,
        ">" | ">>" => ord == Ordering::Greater,
        "<" | "<<" => ord == Ordering::Less,
        _ => false,
    }
}

/// Salt's `_fulfills_version_string`: any installed version meets every comma-separated
/// condition of `conditions`.
pub fn fulfills_all(
    scheme: Scheme,
    installed: &[String],
    conditions: &str,
    ignore_epoch: Option<bool>,
) -> bool {
    let conds: Vec<(&str, String)> = conditions
        .trim()
        .split(',')
        .filter(|c| !conditions.trim().is_empty() && !c.is_empty())
        .map(split_condition)
        .collect();
    installed.iter().any(|v| {
        conds
            .iter()
            .all(|(op, want)| fulfills(scheme, v, op, want, ignore_epoch))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ordering::*;

    #[test]
    fn dpkg_ordering() {
        for (a, b, want) in [
            ("1.0", "1.0", Equal),
            ("1.0", "1.1", Less),
            ("1.10", "1.9", Greater),
            ("1.0~rc1", "1.0", Less),
            ("1.0", "1.0+b1", Less),
            ("1:0.1", "2.0", Greater),
            ("2.10-3", "2.10-3+b1", Less),
            ("1.0-1", "1.0", Greater),
            ("1.0a", "1.0", Greater),
            ("1.0a", "1.0-", Greater),
            ("001", "1", Equal),
            ("2.36.1-8+deb12u1", "2.36.1-8", Greater),
            ("1.0~~", "1.0~", Less),
        ] {
            assert_eq!(deb_compare(a, b), want, "{a} vs {b}");
            assert_eq!(deb_compare(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn dpkg_matches_the_real_tool() {
        let Some(dpkg) = ["/usr/bin/dpkg"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
        else {
            return;
        };
        let versions = [
            "1.0",
            "1.0-1",
            "1:1.0",
            "1.0~rc1",
            "1.0+b1",
            "1.0a",
            "1.01",
            "0.9.9-10",
            "2.10-3",
            "1.0.0~alpha~1",
            "1.0-1ubuntu0.1",
            "7.88.1-10+deb12u5",
        ];
        for a in versions {
            for b in versions {
                let lt = std::process::Command::new(dpkg)
                    .args(["--compare-versions", a, "lt", b])
                    .status()
                    .unwrap()
                    .success();
                let eq = std::process::Command::new(dpkg)
                    .args(["--compare-versions", a, "eq", b])
                    .status()
                    .unwrap()
                    .success();
                let want = if lt {
                    Less
                } else if eq {
                    Equal
                } else {
                    Greater
                };
                assert_eq!(deb_compare(a, b), want, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn rpm_ordering() {
        for (a, b, want) in [
            ("1.0", "1.0", Equal),
            ("1.0", "1.1", Less),
            ("1.10", "1.9", Greater),
            ("1.0~rc1", "1.0", Less),
            ("1.0^git1", "1.0", Greater),
            ("1.0a", "1.0", Greater),
            ("1.0", "1.0a", Less),
            ("2.0", "2a", Greater),
            ("1:1.0", "2.0", Greater),
            ("7.4.160-1.el7", "7.4.160-2.el7", Less),
            ("1.0-1", "1.0", Equal),
            ("1.0.1", "1.0", Greater),
        ] {
            assert_eq!(rpm_compare(a, b), want, "{a} vs {b}");
        }
    }

    #[test]
    fn conditions() {
        assert_eq!(split_condition(">=1.2"), (">=", "1.2".to_string()));
        assert_eq!(split_condition("= 1.2"), ("==", "1.2".to_string()));
        assert_eq!(split_condition("1.2"), ("==", "1.2".to_string()));
        let inst = vec!["2.10-3".to_string()];
        assert!(fulfills_all(Scheme::Deb, &inst, "2.10-3", None));
        assert!(fulfills_all(Scheme::Deb, &inst, "2.10*", None));
        assert!(fulfills_all(Scheme::Deb, &inst, ">=2.9, <3", None));
        assert!(!fulfills_all(Scheme::Deb, &inst, ">=2.9, <2.10", None));
        assert!(fulfills_all(
            Scheme::Deb,
            &["1:2.0".to_string()],
            "2.0",
            None
        ));
        assert!(!fulfills_all(
            Scheme::Deb,
            &["1:2.0".to_string()],
            "2.0",
            Some(false)
        ));
    }
}
