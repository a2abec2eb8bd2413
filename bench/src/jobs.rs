//! W6 set-up: fill a stopped master's job store with synthetic finished jobs (a test.ping to
//! m1 and m1's return), with each implementation's own storage code. W3: count the returns a
//! running master has stored.

use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use brine_master::jobstore::{JobStore, SqliteStore};
use brine_protocol::payload::{from_json, Value};
use serde_json::json;

use crate::stack::{Kind, Stack};

/// `count` distinct jids one millisecond apart, ending now (Salt's format, local time).
pub(crate) fn synthetic_jids(count: usize) -> Vec<String> {
    let now = chrono::Local::now();
    (0..count)
        .map(|i| {
            let t = now - chrono::Duration::milliseconds((count - i) as i64);
            t.format("%Y%m%d%H%M%S%6f").to_string()
        })
        .collect()
}

fn load_of(jid: &str) -> serde_json::Value {
    json!({"cmd": "publish", "tgt": "m1", "fun": "test.ping", "arg": [], "tgt_type": "glob",
           "ret": "", "jid": jid, "user": crate::stack::USER, "kwargs": {}})
}

fn return_of(jid: &str) -> serde_json::Value {
    json!({"cmd": "_return", "id": "m1", "jid": jid, "fun": "test.ping", "fun_args": [],
           "return": true, "retcode": 0, "success": true})
}

/// Brine: a fresh `cachedir/jobs.sqlite` holding exactly these jobs, written through
/// `brine_master::jobstore::SqliteStore` (the master must be stopped).
pub(crate) fn fill_brine(cachedir: &Path, jids: &[String]) -> anyhow::Result<()> {
    let path = cachedir.join("jobs.sqlite");
    for suffix in ["", "-wal", "-shm"] {
        let p = cachedir.join(format!("jobs.sqlite{suffix}"));
        if p.exists() {
            fs::remove_file(p)?;
        }
    }
    let store = SqliteStore::open(&path)?;
    let minions = vec!["m1".to_string()];
    for jid in jids {
        let load: Value = from_json(&load_of(jid));
        store.save_load(jid, &load, &minions)?;
        store.save_return(&from_json(&return_of(jid)))?;
    }
    Ok(())
}

/// Python run with Salt's venv: writes each jid read from stdin into the local_cache job
/// cache of the master config given as argv[1], with `salt.returners.local_cache` itself.
const SALT_FILL: &str = r#"
import sys
import salt.config
import salt.returners.local_cache as lc

lc.__opts__ = salt.config.master_config(sys.argv[1])
for line in sys.stdin:
    jid = line.strip()
    if not jid:
        continue
    lc.prep_jid(passed_jid=jid)
    lc.save_load(jid, {"cmd": "publish", "tgt": "m1", "fun": "test.ping", "arg": [],
                       "tgt_type": "glob", "ret": "", "jid": jid, "user": sys.argv[2],
                       "kwargs": {}}, minions=["m1"])
    lc.returner({"cmd": "_return", "id": "m1", "jid": jid, "fun": "test.ping",
                 "fun_args": [], "return": True, "retcode": 0, "success": True})
"#;

/// Salt: a fresh `cachedir/jobs` local_cache holding exactly these jobs (master stopped).
/// Two Python processes share the work (the machine has two cores).
pub(crate) fn fill_salt(
    venv: &Path,
    master_conf: &Path,
    cachedir: &Path,
    jids: &[String],
) -> anyhow::Result<()> {
    let jobs = cachedir.join("jobs");
    if jobs.exists() {
        fs::remove_dir_all(&jobs)?;
    }
    let python = venv.join("bin/python");
    let conf = master_conf.to_string_lossy().to_string();
    let half = jids.len().div_ceil(2).max(1);
    let mut children = Vec::new();
    for part in jids.chunks(half) {
        let mut c = Command::new(&python)
            .args(["-c", SALT_FILL, &conf, crate::stack::USER])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut input = c.stdin.take().ok_or_else(|| anyhow::anyhow!("no stdin"))?;
        let text = part.join("\n") + "\n";
        std::thread::spawn(move || {
            let _ = input.write_all(text.as_bytes());
        });
        children.push(c);
    }
    for c in children {
        let out = c.wait_with_output()?;
        anyhow::ensure!(
            out.status.success(),
            "filling Salt's job cache failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Returns stored in a running master's job cache: rows of Brine's `salt_returns`, Salt's
/// `return.p` files (`jobs/<hash head>/<hash rest>/<minion>/return.p`).
pub(crate) fn stored_returns(st: &Stack, kind: Kind) -> anyhow::Result<u64> {
    match kind {
        Kind::Brine => {
            let conn = rusqlite::Connection::open_with_flags(
                st.cachedir().join("jobs.sqlite"),
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )?;
            conn.busy_timeout(Duration::from_secs(5))?;
            let n: i64 = conn.query_row("SELECT count(*) FROM salt_returns", [], |r| r.get(0))?;
            Ok(n as u64)
        }
        Kind::Salt => {
            let mut n = 0;
            let mut dirs = vec![(st.cachedir().join("jobs"), 0)];
            while let Some((dir, depth)) = dirs.pop() {
                for e in fs::read_dir(&dir)?.flatten() {
                    if depth < 3 && e.file_type().is_ok_and(|t| t.is_dir()) {
                        dirs.push((e.path(), depth + 1));
                    } else if depth == 3 && e.file_name() == "return.p" {
                        n += 1;
                    }
                }
            }
            Ok(n)
        }
    }
}

/// Wait until the job cache holds `want` returns, for `limit` seconds at most: the count
/// when the wait began and the seconds it took.
pub(crate) fn returns_drained(
    st: &Stack,
    kind: Kind,
    want: u64,
    limit: f64,
) -> anyhow::Result<(u64, f64)> {
    let t0 = Instant::now();
    let first = stored_returns(st, kind)?;
    let mut n = first;
    while n < want {
        anyhow::ensure!(
            t0.elapsed().as_secs_f64() < limit,
            "{n} of {want} returns stored {limit} s after the submissions"
        );
        std::thread::sleep(Duration::from_millis(match kind {
            Kind::Brine => 50,
            Kind::Salt => 250,
        }));
        n = stored_returns(st, kind)?;
    }
    Ok((first, t0.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jids_are_distinct_sorted_and_salt_shaped() {
        let j = synthetic_jids(3000);
        assert_eq!(j.len(), 3000);
        assert!(j
            .iter()
            .all(|x| x.len() == 20 && x.bytes().all(|b| b.is_ascii_digit())));
        assert!(j.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn brine_store_holds_exactly_the_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let jids = synthetic_jids(50);
        fill_brine(dir.path(), &jids[..10]).unwrap();
        fill_brine(dir.path(), &jids).unwrap();
        let store = SqliteStore::open(&dir.path().join("jobs.sqlite")).unwrap();
        assert_eq!(store.list_jobs(0, None).unwrap().len(), 50);
        let r = store.get_returns(&jids[7]).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].id, "m1");
    }
}
