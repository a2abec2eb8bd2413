//! Salt's readings of `/proc` files and of `w`/`ps` output for the `status` module, as pure
//! functions of their text (Salt 3007's Linux branches, its quirks kept: `cpuinfo` keeps the
//! last processor's lines and the text between the first two colons, `cpustats` gives a
//! `cpuN` line's first figure only, `netstats` leaves out each table's last column).

use brine_protocol::payload::{map, Value};

/// Salt's `_number`: an integer for digits only, else a float when it parses, else the text.
pub(super) fn number(text: &str) -> Value {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        if let Ok(n) = text.parse::<u64>() {
            return Value::from(n);
        }
    }
    match brine_protocol::optparse::py_float(text) {
        Some(f) => Value::F64(f),
        None => Value::from(text),
    }
}

/// `/proc/meminfo`: `{name: {"value": text, "unit": text}}`.
pub(super) fn meminfo(text: &str) -> Value {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let comps: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(value)) = (comps.first(), comps.get(1)) else {
            continue;
        };
        let mut entry = vec![(Value::from("value"), Value::from(*value))];
        if let Some(unit) = comps.get(2) {
            entry.push((Value::from("unit"), Value::from(*unit)));
        }
        put(&mut out, name.replace(':', ""), Value::Map(entry));
    }
    Value::Map(out)
}

/// `/proc/cpuinfo`: one map; a later processor's line replaces an earlier one's.
pub(super) fn cpuinfo(text: &str) -> Value {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut comps = line.split(':');
        let key = comps.next().unwrap_or("").trim();
        let Some(value) = comps.next() else {
            continue;
        };
        let value = if key == "flags" {
            Value::Array(value.split_whitespace().map(Value::from).collect())
        } else {
            Value::from(value.trim())
        };
        put(&mut out, key.to_string(), value);
    }
    Value::Map(out)
}

/// `/proc/stat`.
pub(super) fn cpustats(text: &str) -> Value {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let comps: Vec<&str> = line.split_whitespace().collect();
        let Some(&name) = comps.first() else {
            continue;
        };
        let at = |i: usize| number(comps.get(i).copied().unwrap_or(""));
        let rest = || Value::Array(comps.iter().skip(2).map(|c| number(c)).collect());
        let value = match name {
            "cpu" => map([
                ("idle", at(4)),
                ("iowait", at(5)),
                ("irq", at(6)),
                ("nice", at(2)),
                ("softirq", at(7)),
                ("steal", at(8)),
                ("system", at(3)),
                ("user", at(1)),
            ]),
            "intr" => map([("total", at(1)), ("irqs", rest())]),
            "softirq" => map([("total", at(1)), ("softirqs", rest())]),
            _ => at(1),
        };
        put(&mut out, name.to_string(), value);
    }
    Value::Map(out)
}

/// `/proc/vmstat`.
pub(super) fn vmstats(text: &str) -> Value {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut comps = line.split_whitespace();
        if let (Some(name), Some(value)) = (comps.next(), comps.next()) {
            put(&mut out, name.to_string(), number(value));
        }
    }
    Value::Map(out)
}

/// `/proc/diskstats`: the first fourteen columns of each device.
pub(super) fn diskstats(text: &str) -> Value {
    const FIELDS: [&str; 14] = [
        "major",
        "minor",
        "device",
        "reads_issued",
        "reads_merged",
        "sectors_read",
        "ms_spent_reading",
        "writes_completed",
        "writes_merged",
        "sectors_written",
        "ms_spent_writing",
        "io_in_progress",
        "ms_spent_in_io",
        "weighted_ms_spent_in_io",
    ];
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let comps: Vec<&str> = line.split_whitespace().collect();
        if comps.len() < FIELDS.len() {
            continue;
        }
        let row = FIELDS
            .iter()
            .zip(&comps)
            .map(|(k, v)| (Value::from(*k), number(v)))
            .collect();
        put(&mut out, comps[2].to_string(), Value::Map(row));
    }
    Value::Map(out)
}

/// `/proc/net/dev`: each interface's sixteen counters.
pub(super) fn netdev(text: &str) -> Value {
    const FIELDS: [&str; 16] = [
        "rx_bytes",
        "rx_packets",
        "rx_errs",
        "rx_drop",
        "rx_fifo",
        "rx_frame",
        "rx_compressed",
        "rx_multicast",
        "tx_bytes",
        "tx_packets",
        "tx_errs",
        "tx_drop",
        "tx_fifo",
        "tx_colls",
        "tx_carrier",
        "tx_compressed",
    ];
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((iface, counters)) = line.split_once(':') else {
            continue;
        };
        let counters: Vec<&str> = counters.split_whitespace().collect();
        if counters.len() < FIELDS.len() {
            continue;
        }
        let iface = iface.trim();
        let mut row = vec![(Value::from("iface"), Value::from(iface))];
        let mut fields: Vec<(Value, Value)> = FIELDS
            .iter()
            .zip(&counters)
            .map(|(k, v)| (Value::from(*k), number(v)))
            .collect();
        fields.sort_by(|a, b| a.0.as_str().cmp(&b.0.as_str()));
        row.extend(fields);
        put(&mut out, iface.to_string(), Value::Map(row));
    }
    Value::Map(out)
}

/// `/proc/net/netstat`: a header line then a line of figures per table; as Salt reads them,
/// a table's last column is left out.
pub(super) fn netstats(text: &str) -> Value {
    let mut out = Vec::new();
    let mut headers: Vec<&str> = vec![""];
    for line in text.lines().filter(|l| !l.is_empty()) {
        let comps: Vec<&str> = line.split_whitespace().collect();
        if comps.first() == headers.first() {
            let last = headers.len() - 1;
            let row = (1..last)
                .map(|i| {
                    (
                        Value::from(headers[i]),
                        number(comps.get(i).copied().unwrap_or("")),
                    )
                })
                .collect();
            put(&mut out, headers[0].replace(':', ""), Value::Map(row));
        } else {
            headers = comps;
        }
    }
    Value::Map(out)
}

/// `w -fh` output: a record per session.
pub(super) fn w(text: &str) -> Value {
    Value::Array(
        text.lines()
            .filter(|l| !l.is_empty())
            .filter_map(|row| {
                let comps: Vec<&str> = row.split_whitespace().collect();
                if comps.len() < 6 {
                    return None;
                }
                Some(map([
                    ("idle", Value::from(comps[3])),
                    ("jcpu", Value::from(comps[4])),
                    ("login", Value::from(comps[2])),
                    ("pcpu", Value::from(comps[5])),
                    ("tty", Value::from(comps[1])),
                    ("user", Value::from(comps[0])),
                    ("what", Value::from(comps[6..].join(" "))),
                ]))
            })
            .collect(),
    )
}

/// `ps` output (the `ps` grain's command): `{pid: {"user", "cmd"}}`, columns found from the
/// header line.
pub(super) fn procs(text: &str) -> Value {
    let mut lines = text.lines();
    let guide: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    let find = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| guide.iter().position(|g| g == n))
            .unwrap_or(0)
    };
    let (uind, pind, cind) = (
        find(&["USER", "UID"]),
        find(&["PID"]),
        find(&["COMMAND", "CMD"]),
    );
    let mut out = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let comps: Vec<&str> = line.split_whitespace().collect();
        let (Some(pid), Some(user)) = (comps.get(pind), comps.get(uind)) else {
            continue;
        };
        let cmd = comps.get(cind..).map_or(String::new(), |c| c.join(" "));
        put(
            &mut out,
            pid.to_string(),
            map([("user", Value::from(*user)), ("cmd", Value::from(cmd))]),
        );
    }
    Value::Map(out)
}

/// A key set as a Python dict sets it: a repeated key keeps its place, its value replaced.
fn put(out: &mut Vec<(Value, Value)>, key: String, value: Value) {
    match out
        .iter_mut()
        .find(|(k, _)| k.as_str() == Some(key.as_str()))
    {
        Some(slot) => slot.1 = value,
        None => out.push((Value::from(key), value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::payload::get;

    #[test]
    fn numbers_are_pythons() {
        assert_eq!(number("42"), Value::from(42u64));
        assert_eq!(number("-3"), Value::F64(-3.0));
        assert_eq!(number("1.5"), Value::F64(1.5));
        assert_eq!(number("sda"), Value::from("sda"));
        assert_eq!(number(""), Value::from(""));
    }

    #[test]
    fn proc_files_read_as_salt_reads_them() {
        let m = meminfo("MemTotal:       24683620 kB\nHugePages_Total:       0\n");
        assert_eq!(
            get(&m, "MemTotal"),
            Some(&map([
                ("value", Value::from("24683620")),
                ("unit", Value::from("kB"))
            ]))
        );
        assert_eq!(
            get(&m, "HugePages_Total"),
            Some(&map([("value", Value::from("0"))]))
        );
        let c =
            cpuinfo("processor\t: 0\nmodel name\t: A: B\nflags\t\t: fpu vme\n\nprocessor\t: 1\n");
        assert_eq!(get(&c, "processor"), Some(&Value::from("1")));
        assert_eq!(get(&c, "model name"), Some(&Value::from("A")));
        assert_eq!(
            get(&c, "flags"),
            Some(&Value::Array(vec![Value::from("fpu"), Value::from("vme")]))
        );
        let s = cpustats("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 11 2 3\nintr 100 1 2\nctxt 5\n");
        assert_eq!(get(&s, "cpu0"), Some(&Value::from(11u64)));
        assert_eq!(
            get(get(&s, "cpu").unwrap(), "steal"),
            Some(&Value::from(8u64))
        );
        assert_eq!(
            get(&s, "intr"),
            Some(&map([
                ("total", Value::from(100u64)),
                (
                    "irqs",
                    Value::Array(vec![Value::from(1u64), Value::from(2u64)])
                )
            ]))
        );
        let n = netstats("TcpExt: A B C\nTcpExt: 1 2 3\nIpExt: X Y\nIpExt: 7 8\n");
        assert_eq!(
            get(&n, "TcpExt"),
            Some(&map([("A", Value::from(1u64)), ("B", Value::from(2u64))]))
        );
        assert_eq!(get(&n, "IpExt"), Some(&map([("X", Value::from(7u64))])));
        let d = netdev(
            "Inter-|   Receive\n face |bytes\n  lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
        );
        let lo = get(&d, "lo").unwrap();
        assert_eq!(get(lo, "rx_bytes"), Some(&Value::from(1u64)));
        assert_eq!(get(lo, "tx_compressed"), Some(&Value::from(16u64)));
        let p = procs(
            "UID PID PPID C STIME TTY TIME CMD\nroot 1 0 0 10:00 ? 00:00:01 /sbin/init splash\n",
        );
        assert_eq!(
            get(&p, "1"),
            Some(&map([
                ("user", Value::from("root")),
                ("cmd", Value::from("/sbin/init splash"))
            ]))
        );
        let who = w("root pts/0 10:00 1:00 0.10s 0.01s -bash\n");
        assert_eq!(
            get(&who.as_array().unwrap()[0], "what"),
            Some(&Value::from("-bash"))
        );
    }
}
