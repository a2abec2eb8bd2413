//! The job store: what was published (the load and the expected minions) and what came back.
//!
//! Behind a trait; the default backend is an embedded SQLite database (WAL) whose tables have
//! the shapes of Salt's SQL returners (`jids`, `salt_returns`), so dashboards that read those
//! tables work on ours.
//!
//! Every write is committed before it comes back (in WAL with `synchronous = NORMAL`: it
//! survives a crash of the process). With [`SqliteStore::sync_returns`] (`brine_job_store_sync:
//! full`, the default) a return is also synced to disk before it comes back, so that it survives
//! a crash of the machine: after its commit, the WAL file is synced outside the connection's lock, so loads
//! and events written meanwhile do not wait for the disk. (A checkpoint that moved the commit
//! into the database file synced both files first: in NORMAL mode SQLite syncs the WAL before a
//! checkpoint and the database after it.) Concurrent writers share commits: whoever gets the
//! connection writes every load, return and event waiting at that moment in one transaction,
//! so a burst of N returns from N minions costs a few syncs, not N.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use brine_protocol::payload::{from_json_text, get, get_str, FromJson, Value};
use rusqlite::{params, Connection, OptionalExtension};

pub mod pgjsonb;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("job store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("job store: bad stored JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A write committed (or failed) in a transaction shared with other writes.
    #[error("job store: {0}")]
    Shared(String),
    /// The store cannot be reached now (its server is down or restarting): nothing was
    /// written, and the same write may succeed later.
    #[error("job store: {0}")]
    Unavailable(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// One minion's stored return: the whole `_return` load as received (minus transport fields).
#[derive(Debug, Clone)]
pub struct StoredReturn {
    pub id: String,
    pub full_ret: Value,
}

/// What a list of jobs shows of one (Salt's `format_job_instance`): its jid and the fields of
/// its load read alone, the rest of the load skipped.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct JobHead {
    #[serde(skip)]
    pub jid: String,
    #[serde(default)]
    pub fun: Field,
    #[serde(default)]
    pub arg: Field,
    #[serde(default)]
    pub tgt: Field,
    #[serde(default)]
    pub tgt_type: Field,
    #[serde(default)]
    pub user: Field,
    #[serde(default)]
    pub metadata: Field,
    #[serde(default)]
    pub kwargs: Field,
}

/// One field of a load: `None` when the load does not have it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Field(pub Option<Value>);

impl<'de> serde::Deserialize<'de> for Field {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        FromJson::deserialize(d).map(|v| Field(Some(v.0)))
    }
}

impl JobHead {
    /// The head of a load in hand.
    pub fn of_load(jid: &str, load: &Value) -> JobHead {
        let field = |k: &str| Field(get(load, k).cloned());
        JobHead {
            jid: jid.to_string(),
            fun: field("fun"),
            arg: field("arg"),
            tgt: field("tgt"),
            tgt_type: field("tgt_type"),
            user: field("user"),
            metadata: field("metadata"),
            kwargs: field("kwargs"),
        }
    }

    /// The head of a load stored as JSON text, without parsing the rest of it.
    pub fn from_text(jid: String, text: &str) -> Result<JobHead> {
        match serde_json::from_str::<JobHead>(text) {
            Ok(head) => Ok(JobHead { jid, ..head }),
            // Not a map, or a field twice: the whole load, as any other reader takes it.
            Err(_) => Ok(JobHead::of_load(&jid, &from_text(text)?)),
        }
    }
}

/// A targeted minion without a return for a job (see `lost_jobs`).
#[derive(Debug, Clone)]
pub struct Missing {
    pub jid: String,
    pub minion: String,
    /// The job's `fun` and `arg`.
    pub fun: Value,
    pub arg: Value,
}

/// The functions whose jobs never count as missing a return: what the local client and the
/// lost job check themselves publish to ask minions about jobs.
const NOT_CHECKED: &str = "('saltutil.find_job', 'saltutil.running')";

/// What [`JobStore::map_jobs`] makes of each job: a map entry, or None to leave it out.
pub type JobMap<'a> = dyn Fn(JobHead) -> Option<(Value, Value)> + Sync + 'a;

pub trait JobStore: Send + Sync {
    /// Save a job's load and the minions expected to answer. Saving the same jid again keeps
    /// the first load.
    fn save_load(&self, jid: &str, load: &Value, minions: &[String]) -> Result<()>;
    /// The saved load and expected minions.
    fn get_load(&self, jid: &str) -> Result<Option<(Value, Vec<String>)>>;
    /// Store one return; `false` if this minion already returned for this jid. A stored
    /// return marked `brine_no_return` (a failure the master recorded for a return that never
    /// came) is replaced by a real one.
    fn save_return(&self, ret: &Value) -> Result<bool>;
    /// [`JobStore::save_return`] of the return `head` whose `return` entry (there, a
    /// placeholder such as nil) is `ret`: a runner's return, tens of megabytes for
    /// `jobs.list_jobs` of a large store, is written from the event that carried it instead of
    /// a copy. The default makes that copy.
    fn save_return_of(&self, head: &Value, ret: &Value) -> Result<bool> {
        self.save_return(&with_return(head, ret))
    }
    /// Store returns, each as [`JobStore::save_return`] would (in one commit where the store
    /// can): each one's outcome, in order.
    fn save_returns(&self, rets: &[Value]) -> Vec<Result<bool>> {
        rets.iter().map(|r| self.save_return(r)).collect()
    }
    /// Targeted minions without a return, in jobs whose jid is between `from` and `to` (jids
    /// sort by time), newest first, at most `limit`.
    fn missing_returns(&self, from: &str, to: &str, limit: usize) -> Result<Vec<Missing>>;
    /// Returns of a job, in arrival order.
    fn get_returns(&self, jid: &str) -> Result<Vec<StoredReturn>>;
    /// Jobs, newest first, at most `limit` (0 = all), leaving out those of function `skip`.
    fn list_jobs(&self, limit: usize, skip: Option<&str>) -> Result<Vec<JobHead>>;
    /// How many jobs there are (0 where the store cannot tell cheaply).
    fn job_count(&self) -> Result<usize> {
        Ok(0)
    }
    /// Every job, oldest first, turned into an entry of a map by `f`; the jobs `f` leaves out
    /// are not listed. A store may hand each job to `f` as it reads it, and read its jobs in
    /// parts on several threads at once, `f` running on each (SQLite does both; this default
    /// lists every job first).
    fn map_jobs(&self, f: &JobMap) -> Result<Vec<(Value, Value)>> {
        Ok(self
            .list_jobs(0, None)?
            .into_iter()
            .rev()
            .filter_map(f)
            .collect())
    }
    /// Remove jobs whose jid is older than `cutoff_jid` (jids sort by time). Returns how many.
    fn clean_before(&self, cutoff_jid: &str) -> Result<usize>;
    /// Record one bus event (`salt_events`).
    fn save_event(&self, tag: &str, data: &Value, master_id: &str) -> Result<()>;
    /// Record bus events in order (one commit where the store can).
    fn save_events(&self, events: &[(String, Value)], master_id: &str) -> Result<()> {
        events
            .iter()
            .try_for_each(|(tag, data)| self.save_event(tag, data, master_id))
    }
    /// The newest `limit` recorded events, oldest first: (tag, data).
    fn recent_events(&self, limit: usize) -> Result<Vec<(String, Value)>>;
}

pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// Writes waiting for the next commit, and the outcomes of writes another writer
    /// committed. Locked alone or while holding `conn`, never the other way round.
    queue: Mutex<Queue>,
    /// The WAL file synced after a commit holding returns; `None`: returns are not synced (an
    /// in-memory or read-only store, or `brine_job_store_sync: normal`).
    wal: Option<Wal>,
    /// The database file (None in memory): more connections read it at once.
    path: Option<PathBuf>,
}

/// The database's WAL file, opened at the first sync (SQLite creates it).
struct Wal {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl Wal {
    /// Sync what was committed to the WAL so far to disk.
    fn sync(&self) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if file.is_none() {
            let opened = File::open(&self.path)?;
            // The WAL's directory entry too, the first time: SQLite may have just created it.
            if let Some(dir) = self.path.parent() {
                File::open(dir)?.sync_all()?;
            }
            *file = Some(opened);
        }
        match file.as_ref() {
            Some(f) => f.sync_data(),
            None => Ok(()),
        }
    }
}

/// The rows one write adds.
enum Write {
    Load {
        jid: String,
        load: String,
        minions: Vec<String>,
    },
    Return {
        fun: String,
        jid: String,
        ret: String,
        id: String,
        success: String,
        full: String,
    },
    Event {
        tag: String,
        data: String,
        master_id: String,
    },
}

type Outcome = std::result::Result<bool, String>;

#[derive(Default)]
struct Queue {
    next: u64,
    waiting: Vec<(u64, Write)>,
    done: HashMap<u64, Outcome>,
}

/// Run one write inside the open transaction: `true` when it added a row.
fn apply(tx: &rusqlite::Transaction<'_>, write: &Write) -> rusqlite::Result<bool> {
    match write {
        Write::Load { jid, load, minions } => {
            tx.prepare_cached("INSERT OR IGNORE INTO jids (jid, load) VALUES (?1, ?2)")?
                .execute(params![jid, load])?;
            let mut st = tx.prepare_cached(
                "INSERT OR IGNORE INTO jid_minions (jid, minion) VALUES (?1, ?2)",
            )?;
            for m in minions {
                st.execute(params![jid, m])?;
            }
            Ok(true)
        }
        Write::Return {
            fun,
            jid,
            ret,
            id,
            success,
            full,
        } => {
            let n = tx
                .prepare_cached(
                    "INSERT INTO salt_returns (fun, jid, \"return\", id, success, full_ret)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (jid, id) DO UPDATE SET fun = excluded.fun,
                         \"return\" = excluded.\"return\", success = excluded.success,
                         full_ret = excluded.full_ret, alter_time = CURRENT_TIMESTAMP
                     WHERE json_extract(salt_returns.full_ret, '$.brine_no_return') IS NOT NULL
                       AND json_extract(excluded.full_ret, '$.brine_no_return') IS NULL",
                )?
                .execute(params![fun, jid, ret, id, success, full])?;
            Ok(n == 1)
        }
        Write::Event {
            tag,
            data,
            master_id,
        } => {
            tx.prepare_cached(
                "INSERT INTO salt_events (tag, data, master_id) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![tag, data, master_id])?;
            Ok(true)
        }
    }
}

/// Write a batch in one transaction: each write's outcome, or the commit's error for all.
fn commit(conn: &mut Connection, batch: &[(u64, Write)]) -> Vec<Outcome> {
    let run = |conn: &mut Connection| -> rusqlite::Result<Vec<Outcome>> {
        let tx = conn.transaction()?;
        let outcomes = batch
            .iter()
            .map(|(_, w)| apply(&tx, w).map_err(|e| e.to_string()))
            .collect();
        tx.commit()?;
        Ok(outcomes)
    };
    run(conn).unwrap_or_else(|e| vec![Err(e.to_string()); batch.len()])
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
        let mut store = SqliteStore::over(conn);
        store.path = Some(path.to_path_buf());
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        store.wal = Some(Wal {
            path: wal.into(),
            file: Mutex::default(),
        });
        Ok(store)
    }

    fn over(conn: Connection) -> SqliteStore {
        SqliteStore {
            conn: Mutex::new(conn),
            queue: Mutex::default(),
            wal: None,
            path: None,
        }
    }

    /// Whether a return is synced to disk before it comes back (`brine_job_store_sync: full`);
    /// a store opened on a file does, until told otherwise.
    pub fn sync_returns(mut self, on: bool) -> SqliteStore {
        if !on {
            self.wal = None;
        }
        self
    }

    /// The store for reading only (salt-api reads the master's stored events): no schema is
    /// created, nothing is written.
    pub fn open_read_only(path: &Path) -> Result<SqliteStore> {
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(SqliteStore::over(conn))
    }

    pub fn in_memory() -> Result<SqliteStore> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteStore::over(conn))
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write durably, sharing the commit with every write waiting at the same time: each
    /// write's outcome, in order.
    fn write(&self, writes: Vec<Write>) -> Vec<Result<bool>> {
        let tickets = {
            let mut q = self.queue();
            let first = q.next;
            q.next += writes.len() as u64;
            q.waiting.extend((first..).zip(writes));
            first..q.next
        };
        let mut conn = self.conn();
        let mut q = self.queue();
        // Writers that had the connection before us may have committed ours with theirs.
        if !tickets.clone().all(|t| q.done.contains_key(&t)) {
            let batch = std::mem::take(&mut q.waiting);
            drop(q);
            let outcomes = commit(&mut conn, &batch);
            q = self.queue();
            for ((t, _), outcome) in batch.iter().zip(outcomes) {
                q.done.insert(*t, outcome);
            }
        }
        drop(conn);
        tickets
            .map(|t| {
                q.done
                    .remove(&t)
                    .unwrap_or_else(|| Err("write lost from its batch".into()))
                    .map_err(StoreError::Shared)
            })
            .collect()
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`JobStore::map_jobs`] in `parts` parts of about `total / parts` jobs, each read on its
    /// own thread with its own read-only connection (WAL readers wait neither for each other
    /// nor for the writer), then put together in order; a store in memory reads in one part.
    fn map_jobs_in(&self, parts: usize, total: usize, f: &JobMap) -> Result<Vec<(Value, Value)>> {
        let path = self.path.as_deref().filter(|_| parts > 1);
        let Some(path) = path else {
            return map_range(&self.conn(), None, None, total, f);
        };
        // Each part starts at the jid found at its share of the count and ends where the
        // next one starts (jids are unique); the last one ends at the newest job. A share past
        // the end (jobs removed meanwhile) starts no part.
        let mut starts = {
            let conn = self.conn();
            let mut st =
                conn.prepare_cached("SELECT jid FROM jids ORDER BY jid LIMIT 1 OFFSET ?1")?;
            (1..parts)
                .map(|k| {
                    st.query_row(params![(total * k / parts) as i64], |r| r.get(0))
                        .optional()
                })
                .collect::<rusqlite::Result<Vec<Option<String>>>>()?
                .into_iter()
                .flatten()
                .collect::<Vec<String>>()
        };
        starts.dedup();
        let from = std::iter::once(None).chain(starts.iter().map(|s| Some(s.as_str())));
        let to = starts
            .iter()
            .map(|s| Some(s.as_str()))
            .chain(std::iter::once(None));
        let bounds: Vec<(Option<&str>, Option<&str>)> = from.zip(to).collect();
        let share = total / parts + 1;
        let read = |(from, to): (Option<&str>, Option<&str>)| -> Result<Vec<(Value, Value)>> {
            let conn = Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )?;
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            map_range(&conn, from, to, share, f)
        };
        let outs = std::thread::scope(|scope| {
            let handles: Vec<_> = bounds
                .iter()
                .map(|&b| scope.spawn(move || read(b)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(StoreError::Shared(
                            "reading a part of the job list failed".into(),
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()
        })?;
        let mut all = Vec::with_capacity(outs.iter().map(Vec::len).sum());
        outs.into_iter().for_each(|part| all.extend(part));
        Ok(all)
    }
}

/// A copy of the return `head` whose first `return` entry is `ret`.
fn with_return(head: &Value, ret: &Value) -> Value {
    let mut full = head.clone();
    if let Value::Map(pairs) = &mut full {
        if let Some(slot) = pairs.iter_mut().find(|(k, _)| k.as_str() == Some("return")) {
            slot.1 = ret.clone();
        }
    }
    full
}

/// The row of one return.
fn return_write(ret: &Value) -> Result<Write> {
    return_write_parts(ret, None)
}

/// The row of the return `ret` (or of `head` whose `return` entry is `ret`, when given).
fn return_write_parts(head: &Value, ret: Option<&Value>) -> Result<Write> {
    let returned = ret.or_else(|| get(head, "return"));
    let ret = head;
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
    // The return is written once: a runner's can be tens of megabytes.
    let returned = json_text(returned.unwrap_or(&Value::Nil))?;
    Ok(Write::Return {
        fun,
        jid: jid.to_string(),
        full: json_text_with(ret, "return", &returned)?,
        ret: returned,
        id: id.to_string(),
        success,
    })
}

/// Jobs from which [`SqliteStore::map_jobs`] reads in parts on several threads.
const PARALLEL_LIST: usize = 20_000;

/// The jobs with jids from `from` (included) to `to` (excluded), oldest first, through `f`.
fn map_range(
    conn: &Connection,
    from: Option<&str>,
    to: Option<&str>,
    room: usize,
    f: &JobMap,
) -> Result<Vec<(Value, Value)>> {
    // Plain range conditions, so that SQLite seeks the jid index to a part's first job instead
    // of walking the parts before it (every jid sorts after "").
    let from = from.unwrap_or("");
    let mut st;
    let mut rows = match to {
        Some(to) => {
            st = conn.prepare_cached(
                "SELECT jid, load FROM jids WHERE jid >= ?1 AND jid < ?2 ORDER BY jid",
            )?;
            st.query(params![from, to])?
        }
        None => {
            st = conn.prepare_cached("SELECT jid, load FROM jids WHERE jid >= ?1 ORDER BY jid")?;
            st.query(params![from])?
        }
    };
    let mut out = Vec::with_capacity(room);
    while let Some(row) = rows.next()? {
        let text = row.get_ref(1)?.as_str().map_err(rusqlite::Error::from)?;
        out.extend(f(JobHead::from_text(row.get(0)?, text)?));
    }
    Ok(out)
}

fn json_text(v: &Value) -> Result<String> {
    Ok(serde_json::to_string(&brine_protocol::payload::AsJson(v))?)
}

/// [`json_text`] of the map `v` whose entry `key` has the text `made` already (its first one;
/// a map with a key that is not a string is written whole).
fn json_text_with(v: &Value, key: &str, made: &str) -> Result<String> {
    let Value::Map(pairs) = v else {
        return json_text(v);
    };
    if pairs.iter().any(|(k, _)| k.as_str().is_none()) {
        return json_text(v);
    }
    let mut out = String::with_capacity(made.len() + 64 * pairs.len());
    out.push('{');
    let mut pending = true;
    for (i, (k, val)) in pairs.iter().enumerate() {
        let name = k.as_str().unwrap_or_default();
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(name)?);
        out.push(':');
        if pending && name == key {
            out.push_str(made);
            pending = false;
        } else {
            out.push_str(&json_text(val)?);
        }
    }
    out.push('}');
    Ok(out)
}

fn from_text(s: &str) -> Result<Value> {
    Ok(from_json_text(s)?)
}

/// Rows of (jid, minion, the job's load as JSON text) as missing returns.
fn missing_rows(rows: Vec<(String, String, String)>) -> Result<Vec<Missing>> {
    rows.into_iter()
        .map(|(jid, minion, load)| {
            let load = from_text(&load)?;
            Ok(Missing {
                jid,
                minion,
                fun: get(&load, "fun").cloned().unwrap_or(Value::Nil),
                arg: get(&load, "arg").cloned().unwrap_or(Value::Array(vec![])),
            })
        })
        .collect()
}

/// Rows of (minion id, its return as JSON text) as stored returns.
fn stored_returns(rows: Vec<(String, String)>) -> Result<Vec<StoredReturn>> {
    rows.into_iter()
        .map(|(id, full)| {
            Ok(StoredReturn {
                id,
                full_ret: from_text(&full)?,
            })
        })
        .collect()
}

/// Rows of (key, JSON text) as (key, value).
fn with_values(rows: Vec<(String, String)>) -> Result<Vec<(String, Value)>> {
    rows.into_iter()
        .map(|(key, text)| Ok((key, from_text(&text)?)))
        .collect()
}

/// How a backend commits writes: each one's outcome, in order (writes waiting at the same time
/// share a commit). The `JobStore` writes of every backend go through these helpers.
trait Commits {
    fn commit(&self, writes: Vec<Write>) -> Vec<Result<bool>>;

    fn commit_one(&self, write: Write) -> Result<bool> {
        self.commit(vec![write])
            .pop()
            .unwrap_or_else(|| Err(StoreError::Shared("no outcome".into())))
    }

    fn commit_load(&self, jid: &str, load: &Value, minions: &[String]) -> Result<()> {
        self.commit_one(Write::Load {
            jid: jid.to_string(),
            load: json_text(load)?,
            minions: minions.to_vec(),
        })
        .map(drop)
    }

    /// Returns that cannot be written have their error; the others share one commit.
    fn commit_returns(&self, rets: &[Value]) -> Vec<Result<bool>> {
        let mut writes = Vec::with_capacity(rets.len());
        let outcomes: Vec<Option<Result<bool>>> = rets
            .iter()
            .map(|r| match return_write(r) {
                Ok(w) => {
                    writes.push(w);
                    None
                }
                Err(e) => Some(Err(e)),
            })
            .collect();
        let mut committed = self.commit(writes).into_iter();
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    committed
                        .next()
                        .unwrap_or_else(|| Err(StoreError::Shared("no outcome".into())))
                })
            })
            .collect()
    }

    fn commit_events(&self, events: &[(String, Value)], master_id: &str) -> Result<()> {
        let writes = events
            .iter()
            .map(|(tag, data)| {
                Ok(Write::Event {
                    tag: tag.clone(),
                    data: json_text(data)?,
                    master_id: master_id.to_string(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.commit(writes)
            .into_iter()
            .try_for_each(|r| r.map(drop))
    }
}

impl Commits for SqliteStore {
    fn commit(&self, writes: Vec<Write>) -> Vec<Result<bool>> {
        self.write(writes)
    }
}

/// The SQLite store writing returns: synced to disk after their commit when asked.
struct SyncedReturns<'a>(&'a SqliteStore);

impl Commits for SyncedReturns<'_> {
    fn commit(&self, writes: Vec<Write>) -> Vec<Result<bool>> {
        let mut committed = self.0.write(writes);
        if let Some(wal) = &self.0.wal {
            if committed.iter().any(|o| o.is_ok()) {
                if let Err(e) = wal.sync() {
                    let e = format!("committed, not synced to disk: {}: {e}", wal.path.display());
                    for o in committed.iter_mut().filter(|o| o.is_ok()) {
                        *o = Err(StoreError::Shared(e.clone()));
                    }
                }
            }
        }
        committed
    }
}

impl JobStore for SqliteStore {
    fn save_load(&self, jid: &str, load: &Value, minions: &[String]) -> Result<()> {
        self.commit_load(jid, load, minions)
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
        self.save_returns(std::slice::from_ref(ret))
            .pop()
            .unwrap_or_else(|| Err(StoreError::Shared("no outcome".into())))
    }

    fn save_returns(&self, rets: &[Value]) -> Vec<Result<bool>> {
        SyncedReturns(self).commit_returns(rets)
    }

    fn save_return_of(&self, head: &Value, ret: &Value) -> Result<bool> {
        SyncedReturns(self)
            .commit(vec![return_write_parts(head, Some(ret))?])
            .pop()
            .unwrap_or_else(|| Err(StoreError::Shared("no outcome".into())))
    }

    fn missing_returns(&self, from: &str, to: &str, limit: usize) -> Result<Vec<Missing>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(&format!(
            "SELECT m.jid, m.minion, j.load FROM jid_minions m
             JOIN jids j ON j.jid = m.jid
             LEFT JOIN salt_returns r ON r.jid = m.jid AND r.id = m.minion
             WHERE r.id IS NULL AND m.jid > ?1 AND m.jid < ?2
               AND coalesce(json_extract(j.load, '$.fun'), '') NOT IN {NOT_CHECKED}
             ORDER BY m.jid DESC LIMIT ?3"
        ))?;
        let rows = st
            .query_map(params![from, to, limit as i64], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        missing_rows(rows)
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
        stored_returns(rows)
    }

    fn list_jobs(&self, limit: usize, skip: Option<&str>) -> Result<Vec<JobHead>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached("SELECT jid, load FROM jids ORDER BY jid DESC")?;
        let mut rows = st.query([])?;
        let mut heads = Vec::new();
        while limit == 0 || heads.len() < limit {
            let Some(row) = rows.next()? else { break };
            let text = row.get_ref(1)?.as_str().map_err(rusqlite::Error::from)?;
            let head = JobHead::from_text(row.get(0)?, text)?;
            if skip.is_none_or(|f| head.fun.0.as_ref().and_then(Value::as_str) != Some(f)) {
                heads.push(head);
            }
        }
        Ok(heads)
    }

    fn job_count(&self) -> Result<usize> {
        let n: i64 = self
            .conn()
            .query_row("SELECT count(*) FROM jids", [], |row| row.get(0))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// A store on a file with many jobs reads them in one part per core (see
    /// [`SqliteStore::map_jobs_in`]): parsing the loads and `f` cost more than SQLite's reading.
    fn map_jobs(&self, f: &JobMap) -> Result<Vec<(Value, Value)>> {
        let total = self.job_count()?;
        let parts = if total >= PARALLEL_LIST {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
        } else {
            1
        };
        self.map_jobs_in(parts, total, f)
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
        self.commit_events(&[(tag.to_string(), data.clone())], master_id)
    }

    fn save_events(&self, events: &[(String, Value)], master_id: &str) -> Result<()> {
        self.commit_events(events, master_id)
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
        with_values(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::payload::map;

    /// The jobs read in parts on several threads are the jobs read in one, in the same order,
    /// with those the map leaves out left out; a part that would start past the end is none.
    #[test]
    fn jobs_read_in_parts_are_the_jobs_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("jobs.sqlite")).unwrap();
        let jids: Vec<String> = (0..37).map(|i| format!("202611271000000{i:05}")).collect();
        // Saved out of order: the list is in jid order all the same.
        for jid in jids.iter().rev() {
            let fun = if jid.ends_with('3') {
                "test.skip"
            } else {
                "test.ping"
            };
            let load = map(vec![("fun", Value::from(fun)), ("tgt", Value::from("m1"))]);
            store.save_load(jid, &load, &["m1".into()]).unwrap();
        }
        let f = |head: JobHead| {
            let fun = head.fun.0.clone()?;
            (fun != Value::from("test.skip")).then(|| (Value::from(head.jid.as_str()), fun))
        };
        let whole = store.map_jobs_in(1, 37, &f).unwrap();
        let kept: Vec<&String> = jids.iter().filter(|j| !j.ends_with('3')).collect();
        assert_eq!(whole.len(), kept.len());
        for (entry, jid) in whole.iter().zip(&kept) {
            assert_eq!(entry.0, Value::from(jid.as_str()));
        }
        for (parts, total) in [(2, 37), (3, 37), (8, 37), (37, 37), (4, 1000), (3, 2)] {
            assert_eq!(
                store.map_jobs_in(parts, total, &f).unwrap(),
                whole,
                "{parts} parts"
            );
        }
        assert_eq!(store.map_jobs(&f).unwrap(), whole);
        let memory = SqliteStore::in_memory().unwrap();
        memory
            .save_load(&jids[0], &Value::from("load"), &[])
            .unwrap();
        assert_eq!(
            memory
                .map_jobs_in(4, 1, &|h: JobHead| Some((Value::from(h.jid), Value::Nil)))
                .unwrap()
                .len(),
            1
        );
    }

    /// A map written around the text of its `return` made beforehand is the map written whole.
    #[test]
    fn a_return_written_once_makes_the_same_full_return() {
        let nested = map(vec![
            ("a\"b", Value::from(1)),
            (
                "list",
                Value::Array(vec![Value::Nil, Value::from(2.5), Value::from("é\n")]),
            ),
        ]);
        let odd_key = Value::Map(vec![(Value::from(7), Value::from("seven"))]);
        for v in [
            map(vec![
                ("id", Value::from("m1")),
                ("return", nested.clone()),
                ("success", Value::from(true)),
            ]),
            map(vec![
                ("return", Value::from("x")),
                ("return", Value::from("y")),
            ]),
            map(vec![("id", Value::from("m1"))]),
            map(vec![("return", odd_key.clone())]),
            Value::Map(vec![
                (Value::from(1), Value::from("one")),
                (Value::from("return"), nested.clone()),
            ]),
            Value::from("not a map"),
        ] {
            let made = json_text(get(&v, "return").unwrap_or(&Value::Nil)).unwrap();
            assert_eq!(
                json_text_with(&v, "return", &made).unwrap(),
                json_text(&v).unwrap(),
                "{v}"
            );
        }
    }

    /// A return saved from its head and its return apart is stored exactly as the whole
    /// return is (both columns), here and through the trait's default.
    #[test]
    fn a_return_saved_from_its_parts_is_the_whole_return() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("jobs.sqlite")).unwrap();
        let ret = map(vec![
            ("fun", Value::from("runner.jobs.list_jobs")),
            (
                "return",
                map(vec![("2025", map(vec![("é\"", Value::from(1))]))]),
            ),
            ("success", Value::from(true)),
        ]);
        let head = |jid: &str, r: Value| {
            map(vec![
                ("id", Value::from("master")),
                ("jid", Value::from(jid)),
                ("fun", Value::from("runner.jobs.list_jobs")),
                ("return", r),
                ("success", Value::from(true)),
            ])
        };
        assert!(store.save_return(&head("1", ret.clone())).unwrap());
        assert!(store.save_return_of(&head("2", Value::Nil), &ret).unwrap());
        // The trait's default puts the return in its place.
        assert_eq!(
            with_return(&head("3", Value::Nil), &ret),
            head("3", ret.clone())
        );
        assert!(store
            .save_return(&with_return(&head("3", Value::Nil), &ret))
            .unwrap());
        let row = |jid: &str| -> (String, String) {
            store
                .conn()
                .query_row(
                    "SELECT \"return\", full_ret FROM salt_returns WHERE jid = ?1",
                    params![jid],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap()
        };
        let (whole_ret, whole_full) = row("1");
        assert!(whole_full.contains(r#""jid":"1""#), "{whole_full}");
        for jid in ["2", "3"] {
            let (r, full) = row(jid);
            assert_eq!(r, whole_ret);
            assert_eq!(
                full,
                whole_full.replace(r#""jid":"1""#, &format!(r#""jid":"{jid}""#))
            );
        }
    }

    /// Writers on many threads share commits and each gets its own outcome: every return is
    /// stored once, and the second copy of each is reported as a duplicate.
    #[test]
    fn concurrent_writers_each_get_their_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(
            SqliteStore::open(&dir.path().join("jobs.sqlite"))
                .unwrap()
                .sync_returns(true),
        );
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut fresh = 0;
                    for i in 0..100 {
                        let ret = map(vec![
                            ("id", Value::from(format!("m{}", i % 50))),
                            ("jid", Value::from(format!("2026010100000000{t:04}"))),
                            ("fun", Value::from("test.ping")),
                            ("return", Value::from(true)),
                        ]);
                        if store.save_return(&ret).unwrap() {
                            fresh += 1;
                        }
                        store
                            .save_event("t/e", &Value::from(i), "m_master")
                            .unwrap();
                    }
                    fresh
                })
            })
            .collect();
        let fresh: Vec<i32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(
            fresh,
            vec![50; 8],
            "50 new returns and 50 duplicates per thread"
        );
        for t in 0..8 {
            let jid = format!("2026010100000000{t:04}");
            assert_eq!(store.get_returns(&jid).unwrap().len(), 50);
        }
        assert_eq!(store.recent_events(10_000).unwrap().len(), 800);
    }

    /// Missing returns are listed per targeted minion (not for the jobs that ask minions about
    /// jobs), and a failure recorded for one gives way to the real return, once.
    #[test]
    fn missing_returns_and_recorded_failures() {
        contract::missing_returns_and_recorded_failures(&SqliteStore::in_memory().unwrap());
    }

    /// A return is synced to disk after its commit (the WAL file, opened at the first sync): a
    /// sync that fails makes the return's outcome an error, though its row is committed; a
    /// load never waits for a sync.
    #[test]
    fn returns_are_synced_after_their_commit() {
        let dir = tempfile::tempdir().unwrap();
        let ret = |id: &str| {
            map(vec![
                ("id", Value::from(id)),
                ("jid", Value::from("20261127100000000001")),
                ("fun", Value::from("test.ping")),
                ("return", Value::from(true)),
            ])
        };
        let synced = SqliteStore::open(&dir.path().join("jobs.sqlite")).unwrap();
        assert!(synced.save_return(&ret("m1")).unwrap());
        let wal = synced.wal.as_ref().unwrap();
        assert!(wal.file.lock().unwrap().is_some());
        assert!(wal.path.ends_with("jobs.sqlite-wal"));

        let mut broken = SqliteStore::open(&dir.path().join("other.sqlite")).unwrap();
        broken.wal.as_mut().unwrap().path = dir.path().join("no-such-dir/other.sqlite-wal");
        let err = broken.save_return(&ret("m1")).unwrap_err().to_string();
        assert!(err.contains("committed, not synced to disk"), "{err}");
        broken
            .save_load("20261127100000000001", &Value::from("load"), &[])
            .unwrap();
        assert_eq!(broken.get_returns("20261127100000000001").unwrap().len(), 1);

        let unsynced = SqliteStore::open(&dir.path().join("third.sqlite"))
            .unwrap()
            .sync_returns(false);
        assert!(unsynced.wal.is_none());
        assert!(unsynced.save_return(&ret("m1")).unwrap());
    }

    #[test]
    fn loads_returns_and_retention() {
        contract::loads_returns_and_retention(&SqliteStore::in_memory().unwrap());
    }
}

/// What every job store does, checked the same way on each backend (the SQLite store's unit
/// tests, the PostgreSQL store's whole-system test). Each function panics where the store
/// differs.
#[doc(hidden)]
pub mod contract {
    use super::{Field, JobStore};
    use brine_protocol::payload::{get, get_str, map, Value};

    /// Targeted minions without a return; a failure the master records is replaced by a late
    /// real return, never the other way round.
    pub fn missing_returns_and_recorded_failures(s: &dyn JobStore) {
        let load = |fun: &str| {
            map(vec![
                ("fun", Value::from(fun)),
                ("arg", Value::Array(vec![Value::from(1)])),
            ])
        };
        let jid = "20260101000000000001";
        s.save_load(jid, &load("cmd.run"), &["a".into(), "b".into()])
            .unwrap();
        s.save_load(
            "20260101000000000002",
            &load("saltutil.find_job"),
            &["a".into()],
        )
        .unwrap();
        s.save_load("20990101000000000001", &load("cmd.run"), &["a".into()])
            .unwrap();
        let ret = |id: &str, text: &str, marked: bool| {
            let mut pairs = vec![
                ("id", Value::from(id)),
                ("jid", Value::from(jid)),
                ("fun", Value::from("cmd.run")),
                ("return", Value::from(text)),
            ];
            if marked {
                pairs.push(("brine_no_return", Value::from(true)));
            }
            map(pairs)
        };
        assert!(s.save_return(&ret("a", "done", false)).unwrap());
        let missing = s
            .missing_returns("20250101000000000000", "20270101000000000000", 100)
            .unwrap();
        let pairs: Vec<(&str, &str)> = missing
            .iter()
            .map(|m| (m.jid.as_str(), m.minion.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [(jid, "b")],
            "b has not returned; find_job and later jobs are out"
        );
        assert_eq!(missing[0].fun, Value::from("cmd.run"));
        assert_eq!(missing[0].arg, Value::Array(vec![Value::from(1)]));

        assert!(s.save_return(&ret("b", "lost", true)).unwrap());
        assert!(
            !s.save_return(&ret("b", "lost again", true)).unwrap(),
            "a failure does not replace a failure"
        );
        assert!(
            s.save_return(&ret("b", "late but real", false)).unwrap(),
            "the real return replaces it"
        );
        assert!(
            !s.save_return(&ret("b", "lost", true)).unwrap(),
            "and is never replaced"
        );
        assert!(
            !s.save_return(&ret("b", "again", false)).unwrap(),
            "a real return stays the first"
        );
        let got = s.get_returns(jid).unwrap();
        let texts: Vec<(String, Value)> = got
            .iter()
            .map(|r| (r.id.clone(), get(&r.full_ret, "return").cloned().unwrap()))
            .collect();
        assert_eq!(
            texts,
            [
                ("a".to_string(), Value::from("done")),
                ("b".to_string(), Value::from("late but real"))
            ]
        );
        assert!(s
            .missing_returns("20250101000000000000", "20270101000000000000", 100)
            .unwrap()
            .is_empty());
    }

    /// Loads with their minions, returns (a duplicate ignored), jobs newest first, retention,
    /// events in order.
    pub fn loads_returns_and_retention(s: &dyn JobStore) {
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
        let jobs = s.list_jobs(0, None).unwrap();
        assert_eq!(jobs[0].jid, "20260102000000000001", "newest first");
        assert_eq!(jobs[1].fun, Field(Some(Value::from("test.ping"))));
        assert_eq!(jobs[1].tgt, Field(Some(Value::from("*"))));
        assert_eq!(jobs[1].user, Field(None), "absent, not null");
        let find_job = map(vec![
            ("fun", Value::from("saltutil.find_job")),
            ("kwargs", map(vec![("metadata", Value::from("m"))])),
        ]);
        s.save_load("20260103000000000001", &find_job, &[]).unwrap();
        let jids = |limit, skip| -> Vec<String> {
            let heads = s.list_jobs(limit, skip).unwrap();
            heads.into_iter().map(|h| h.jid).collect()
        };
        assert_eq!(jids(1, None), ["20260103000000000001"]);
        assert_eq!(
            s.list_jobs(1, None).unwrap()[0].kwargs,
            Field(Some(map(vec![("metadata", Value::from("m"))])))
        );
        assert_eq!(
            jids(1, Some("saltutil.find_job")),
            ["20260102000000000001"],
            "the limit counts the jobs left in"
        );
        assert_eq!(jids(0, Some("saltutil.find_job")).len(), 2);
        assert_eq!(s.clean_before("20260102000000000000").unwrap(), 1);
        s.save_event("a/b", &map(vec![("x", Value::from(1))]), "m_master")
            .unwrap();
        s.save_event("c/d", &Value::Map(vec![]), "m_master")
            .unwrap();
        let ev = s.recent_events(1).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].0, "c/d");
        let batch: Vec<(String, Value)> = (0..3)
            .map(|i| (format!("batch/{i}"), Value::from(i)))
            .collect();
        s.save_events(&batch, "m_master").unwrap();
        let ev = s.recent_events(3).unwrap();
        let tags: Vec<&str> = ev.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(tags, ["batch/0", "batch/1", "batch/2"], "in order");
        assert!(s.get_load("20260101000000000001").unwrap().is_none());
        assert!(s.get_returns("20260101000000000001").unwrap().is_empty());
    }
}
