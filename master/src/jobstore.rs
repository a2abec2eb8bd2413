//! The job store: what was published (the load and the expected minions) and what came back.
//!
//! Behind a trait; the default backend is an embedded SQLite database (WAL) whose tables have
//! the shapes of Salt's SQL returners (`jids`, `salt_returns`), so dashboards that read those
//! tables work on ours.

use std::path::Path;
use std::sync::Mutex;

use brine_protocol::payload::{from_json, get, get_str, to_json, Value};
use rusqlite::{params, Connection, OptionalExtension};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("job store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("job store: bad stored JSON: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// One minion's stored return: the whole `_return` load as received (minus transport fields).
#[derive(Debug, Clone)]
pub struct StoredReturn {
    pub id: String,
    pub full_ret: Value,
}

pub trait JobStore: Send + Sync {
    /// Save a job's load and the minions expected to answer. Saving the same jid again keeps
    /// the first load.
    fn save_load(&self, jid: &str, load: &Value, minions: &[String]) -> Result<()>;
    /// The saved load and expected minions.
    fn get_load(&self, jid: &str) -> Result<Option<(Value, Vec<String>)>>;
    /// Store one return; `false` if this minion already returned for this jid.
    fn save_return(&self, ret: &Value) -> Result<bool>;
    /// Returns of a job, in arrival order.
    fn get_returns(&self, jid: &str) -> Result<Vec<StoredReturn>>;
    /// Jobs, newest first, at most `limit` (0 = all).
    fn list_jobs(&self, limit: usize) -> Result<Vec<(String, Value)>>;
    /// Remove jobs whose jid is older than `cutoff_jid` (jids sort by time). Returns how many.
    fn clean_before(&self, cutoff_jid: &str) -> Result<usize>;
    /// Record one bus event (`salt_events`).
    fn save_event(&self, tag: &str, data: &Value, master_id: &str) -> Result<()>;
    /// The newest `limit` recorded events, oldest first: (tag, data).
    fn recent_events(&self, limit: usize) -> Result<Vec<(String, Value)>>;
}

pub struct SqliteStore {
    conn: Mutex<Connection>,
}

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS jids (
    jid        TEXT PRIMARY KEY,
    load       TEXT NOT NULL,
    alter_time TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE IF NOT EXISTS jid_minions (
    jid    TEXT NOT NULL,
    minion TEXT NOT NULL,
    PRIMARY KEY (jid, minion)
);
CREATE TABLE IF NOT EXISTS salt_returns (
    fun        TEXT,
    jid        TEXT NOT NULL,
    \"return\" TEXT,
    id         TEXT NOT NULL,
    success    TEXT,
    full_ret   TEXT,
    alter_time TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX IF NOT EXISTS salt_returns_jid_id ON salt_returns (jid, id);
CREATE INDEX IF NOT EXISTS salt_returns_id ON salt_returns (id);
CREATE INDEX IF NOT EXISTS salt_returns_fun ON salt_returns (fun);
CREATE TABLE IF NOT EXISTS salt_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tag        TEXT NOT NULL,
    data       TEXT NOT NULL,
    alter_time TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    master_id  TEXT NOT NULL
);
";

impl SqliteStore {
    pub fn open(path: &Path) -> Result<SqliteStore> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
        })
    }

    pub fn in_memory() -> Result<SqliteStore> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn json_text(v: &Value) -> Result<String> {
    Ok(serde_json::to_string(&to_json(v))?)
}

fn from_text(s: &str) -> Result<Value> {
    Ok(from_json(&serde_json::from_str::<serde_json::Value>(s)?))
}

impl JobStore for SqliteStore {
    fn save_load(&self, jid: &str, load: &Value, minions: &[String]) -> Result<()> {
        let text = json_text(load)?;
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT OR IGNORE INTO jids (jid, load) VALUES (?1, ?2)",
            params![jid, text],
        )?;
        {
            let mut st = tx.prepare_cached(
                "INSERT OR IGNORE INTO jid_minions (jid, minion) VALUES (?1, ?2)",
            )?;
            for m in minions {
                st.execute(params![jid, m])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn get_load(&self, jid: &str) -> Result<Option<(Value, Vec<String>)>> {
        let conn = self.conn();
        let load: Option<String> = conn
            .query_row("SELECT load FROM jids WHERE jid = ?1", params![jid], |r| {
                r.get(0)
            })
            .optional()?;
        let Some(load) = load else { return Ok(None) };
        let mut st =
            conn.prepare_cached("SELECT minion FROM jid_minions WHERE jid = ?1 ORDER BY minion")?;
        let minions = st
            .query_map(params![jid], |r| r.get::<_, String>(0))?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Some((from_text(&load)?, minions)))
    }

    fn save_return(&self, ret: &Value) -> Result<bool> {
        let jid = get_str(ret, "jid").unwrap_or_default();
        let id = get_str(ret, "id").unwrap_or_default();
        let fun = match get(ret, "fun") {
            Some(Value::String(s)) => s.as_str().unwrap_or_default().to_string(),
            Some(other) => json_text(other)?,
            None => String::new(),
        };
        let success = match get(ret, "success") {
            Some(Value::Boolean(b)) => b.to_string(),
            Some(other) => json_text(other)?,
            None => String::new(),
        };
        let ret_text = json_text(get(ret, "return").unwrap_or(&Value::Nil))?;
        let full = json_text(ret)?;
        let n = self.conn().execute(
            "INSERT OR IGNORE INTO salt_returns (fun, jid, \"return\", id, success, full_ret)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![fun, jid, ret_text, id, success, full],
        )?;
        Ok(n == 1)
    }

    fn get_returns(&self, jid: &str) -> Result<Vec<StoredReturn>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT id, full_ret FROM salt_returns WHERE jid = ?1 ORDER BY rowid",
        )?;
        let rows = st
            .query_map(params![jid], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(id, full)| {
                Ok(StoredReturn {
                    id,
                    full_ret: from_text(&full)?,
                })
            })
            .collect()
    }

    fn list_jobs(&self, limit: usize) -> Result<Vec<(String, Value)>> {
        let conn = self.conn();
        let limit = if limit == 0 { -1 } else { limit as i64 };
        let mut st =
            conn.prepare_cached("SELECT jid, load FROM jids ORDER BY jid DESC LIMIT ?1")?;
        let rows = st
            .query_map(params![limit], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(jid, load)| Ok((jid, from_text(&load)?)))
            .collect()
    }

    fn clean_before(&self, cutoff_jid: &str) -> Result<usize> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let n = tx.execute("DELETE FROM jids WHERE jid < ?1", params![cutoff_jid])?;
        tx.execute(
            "DELETE FROM jid_minions WHERE jid < ?1",
            params![cutoff_jid],
        )?;
        tx.execute(
            "DELETE FROM salt_returns WHERE jid < ?1",
            params![cutoff_jid],
        )?;
        tx.commit()?;
        Ok(n)
    }

    fn save_event(&self, tag: &str, data: &Value, master_id: &str) -> Result<()> {
        self.conn().execute(
            "INSERT INTO salt_events (tag, data, master_id) VALUES (?1, ?2, ?3)",
            params![tag, json_text(data)?, master_id],
        )?;
        Ok(())
    }

    fn recent_events(&self, limit: usize) -> Result<Vec<(String, Value)>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT tag, data FROM (SELECT id, tag, data FROM salt_events ORDER BY id DESC LIMIT ?1)
             ORDER BY id",
        )?;
        let rows = st
            .query_map(params![limit as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(t, d)| Ok((t, from_text(&d)?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::payload::map;

    #[test]
    fn loads_returns_and_retention() {
        let s = SqliteStore::in_memory().unwrap();
        let load = map(vec![
            ("fun", Value::from("test.ping")),
            ("arg", Value::Array(vec![])),
            ("tgt", Value::from("*")),
        ]);
        s.save_load("20260101000000000001", &load, &["m1".into(), "m2".into()])
            .unwrap();
        s.save_load("20260102000000000001", &load, &[]).unwrap();
        let (l, m) = s.get_load("20260101000000000001").unwrap().unwrap();
        assert_eq!(get_str(&l, "fun"), Some("test.ping"));
        assert_eq!(m, vec!["m1", "m2"]);
        assert!(s.get_load("nope").unwrap().is_none());
        let ret = map(vec![
            ("id", Value::from("m1")),
            ("jid", Value::from("20260101000000000001")),
            ("fun", Value::from("test.ping")),
            ("return", Value::from(true)),
            ("success", Value::from(true)),
        ]);
        assert!(s.save_return(&ret).unwrap());
        assert!(!s.save_return(&ret).unwrap(), "duplicate ignored");
        let rs = s.get_returns("20260101000000000001").unwrap();
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].id, "m1");
        assert_eq!(get(&rs[0].full_ret, "return"), Some(&Value::from(true)));
        let jobs = s.list_jobs(0).unwrap();
        assert_eq!(jobs[0].0, "20260102000000000001", "newest first");
        assert_eq!(s.clean_before("20260102000000000000").unwrap(), 1);
        s.save_event("a/b", &map(vec![("x", Value::from(1))]), "m_master")
            .unwrap();
        s.save_event("c/d", &Value::Map(vec![]), "m_master")
            .unwrap();
        let ev = s.recent_events(1).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].0, "c/d");
        assert!(s.get_load("20260101000000000001").unwrap().is_none());
        assert!(s.get_returns("20260101000000000001").unwrap().is_empty());
    }
}
