//! The job store on PostgreSQL, in the tables of Salt's `pgjsonb` returner (`jids`,
//! `salt_returns`, `salt_events`: same columns, same types), so that a Salt master using that
//! returner, `jobs.lookup_jid` on either side and dashboards reading those tables share them.
//!
//! Salt's tables have no place for the minions a job targets; Brine keeps them in a table of its
//! own, `brine_jid_minions`, that Salt's readers never look at.
//!
//! The `postgres` client blocks, and the store is called from plain threads and from async
//! tasks alike, so the connections live on threads of their own: one writer, which commits every
//! write waiting at that moment in one transaction (a burst of returns costs a few commits, not
//! one each), and a pool of readers. Callers wait on a channel for their answer. A connection
//! that fails is opened again for the next request; the request that saw it fail gets the error.

use std::time::Duration;

use brine_protocol::config::PgjsonbOptions;
use brine_protocol::payload::Value;
use crossbeam_channel::{Receiver, Sender};
use postgres::{Client, NoTls, Statement};

use super::{
    from_text, missing_rows, return_write, return_write_parts, stored_returns, with_values,
    Commits, JobHead, JobStore, Missing, Result, StoreError, StoredReturn, Write, NOT_CHECKED,
};

/// Readers in the pool.
const READERS: usize = 4;

/// Seconds a connection attempt may take when `connect_timeout` is not set.
const DEFAULT_CONNECT_TIMEOUT: u64 = 10;

/// Salt's `pgjsonb` schema, created when none of its tables exists, and Brine's own tables
/// (public: a Salt master needs the tables made for it, as Salt's returner documentation says).
pub const SALT_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS jids (
    jid varchar(255) NOT NULL PRIMARY KEY,
    load jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_jids_jsonb ON jids USING gin (load) WITH (fastupdate=on);
CREATE TABLE IF NOT EXISTS salt_returns (
    fun varchar(50) NOT NULL,
    jid varchar(255) NOT NULL,
    return jsonb NOT NULL,
    id varchar(255) NOT NULL,
    success varchar(10) NOT NULL,
    full_ret jsonb NOT NULL,
    alter_time TIMESTAMP WITH TIME ZONE DEFAULT NOW()
);
CREATE INDEX IF NOT EXISTS idx_salt_returns_id ON salt_returns (id);
CREATE INDEX IF NOT EXISTS idx_salt_returns_jid ON salt_returns (jid);
CREATE INDEX IF NOT EXISTS idx_salt_returns_fun ON salt_returns (fun);
CREATE INDEX IF NOT EXISTS idx_salt_returns_return ON salt_returns USING gin (return) WITH (fastupdate=on);
CREATE INDEX IF NOT EXISTS idx_salt_returns_full_ret ON salt_returns USING gin (full_ret) WITH (fastupdate=on);
CREATE SEQUENCE IF NOT EXISTS seq_salt_events_id;
CREATE TABLE IF NOT EXISTS salt_events (
    id BIGINT NOT NULL UNIQUE DEFAULT nextval('seq_salt_events_id'),
    tag varchar(255) NOT NULL,
    data jsonb NOT NULL,
    alter_time TIMESTAMP WITH TIME ZONE DEFAULT NOW(),
    master_id varchar(255) NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_salt_events_tag ON salt_events (tag);
CREATE INDEX IF NOT EXISTS idx_salt_events_data ON salt_events USING gin (data) WITH (fastupdate=on);
CREATE INDEX IF NOT EXISTS brine_salt_returns_jid_id ON salt_returns (jid, id);
CREATE TABLE IF NOT EXISTS brine_jid_minions (
    jid varchar(255) NOT NULL,
    minion varchar(255) NOT NULL,
    PRIMARY KEY (jid, minion)
);
CREATE TABLE IF NOT EXISTS brine_revoked_tokens (
    id bigserial PRIMARY KEY,
    jti varchar(64) NOT NULL UNIQUE,
    expire bigint NOT NULL
);
";

/// The columns (name, type as `information_schema` names it) each table must have.
const EXPECTED: &[(&str, &[(&str, &str)])] = &[
    ("jids", &[("jid", "character varying"), ("load", "jsonb")]),
    (
        "salt_returns",
        &[
            ("fun", "character varying"),
            ("jid", "character varying"),
            ("return", "jsonb"),
            ("id", "character varying"),
            ("success", "character varying"),
            ("full_ret", "jsonb"),
            ("alter_time", "timestamp with time zone"),
        ],
    ),
    (
        "salt_events",
        &[
            ("id", "bigint"),
            ("tag", "character varying"),
            ("data", "jsonb"),
            ("alter_time", "timestamp with time zone"),
            ("master_id", "character varying"),
        ],
    ),
    (
        "brine_jid_minions",
        &[
            ("jid", "character varying"),
            ("minion", "character varying"),
        ],
    ),
    (
        "brine_revoked_tokens",
        &[
            ("id", "bigint"),
            ("jti", "character varying"),
            ("expire", "bigint"),
        ],
    ),
];

/// A lock key no other program is likely to take: the job cleanup runs on one master at a time.
const CLEANUP_LOCK: i64 = 0x6272_696e_6563_6c6e;

type Job = Box<dyn FnOnce(&mut Conn) + Send>;

/// One write waiting for the writer, and where its outcomes go.
type Pending = (Vec<Write>, Sender<Vec<Result<bool>>>);

pub struct PgStore {
    writes: Sender<Pending>,
    reads: Sender<Job>,
}

/// A connection, opened again after it failed.
struct Conn {
    config: postgres::Config,
    tls: Tls,
    client: Option<Client>,
    /// Connections opened so far: prepared statements belong to one.
    opened: u64,
}

#[derive(Clone)]
enum Tls {
    Off,
    On(postgres_openssl::MakeTlsConnector),
}

impl Conn {
    fn client(&mut self) -> Result<&mut Client> {
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
        }
        if self.client.is_none() {
            let client = match &self.tls {
                Tls::Off => self.config.connect(NoTls),
                Tls::On(tls) => self.config.connect(tls.clone()),
            }
            .map_err(|e| StoreError::Unavailable(pg_text(e)))?;
            self.client = Some(client);
            self.opened += 1;
        }
        self.client
            .as_mut()
            .ok_or_else(|| StoreError::Shared("no connection".into()))
    }

    /// Run `f` on the connection; a failure of the connection itself drops it.
    fn run<T>(
        &mut self,
        f: impl FnOnce(&mut Client) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let client = self.client()?;
        let out = f(client);
        let closed = client.is_closed();
        if out.is_err() && closed {
            self.client = None;
        }
        out.map_err(|e| match closed {
            true => StoreError::Unavailable(pg_text(e)),
            false => StoreError::Shared(pg_text(e)),
        })
    }
}

fn pg_text(e: postgres::Error) -> String {
    // The server's own message (with its detail) when there is one, not just "db error".
    let text = match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => {
            // With the causes ("error performing TLS handshake: ...certificate verify failed").
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                text = format!("{text}: {c}");
                cause = c.source();
            }
            text
        }
    };
    format!("PostgreSQL: {text}")
}

/// The client's settings from Salt's `pgjsonb` options.
fn client_config(opts: &PgjsonbOptions) -> Result<(postgres::Config, Tls)> {
    let mut config = postgres::Config::new();
    config
        .host(&opts.host)
        .port(opts.port)
        .user(&opts.user)
        .password(&opts.pass)
        .dbname(&opts.db)
        .application_name("brine-master");
    // libpq waits for the system's TCP timeout without one (minutes, for a host that does not
    // answer); the store's threads would wait that long for each attempt.
    config.connect_timeout(Duration::from_secs(
        opts.connect_timeout
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
            .max(1),
    ));
    let mode = opts.sslmode.as_deref().unwrap_or("prefer");
    let tls = match mode {
        "disable" => {
            config.ssl_mode(postgres::config::SslMode::Disable);
            Tls::Off
        }
        "allow" | "prefer" | "require" | "verify-ca" | "verify-full" => {
            config.ssl_mode(if matches!(mode, "allow" | "prefer") {
                postgres::config::SslMode::Prefer
            } else {
                postgres::config::SslMode::Require
            });
            Tls::On(tls_connector(opts, mode)?)
        }
        other => {
            return Err(StoreError::Shared(format!(
                "pgjsonb sslmode '{other}' is none of disable, allow, prefer, require, verify-ca, verify-full"
            )))
        }
    };
    Ok((config, tls))
}

/// TLS as libpq does it for `mode`: the server's certificate is checked against `sslrootcert`
/// for verify-ca and verify-full (and for require when a root certificate is given), its name
/// only for verify-full.
fn tls_connector(opts: &PgjsonbOptions, mode: &str) -> Result<postgres_openssl::MakeTlsConnector> {
    use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode};
    let tls_err = |what: &str, e: openssl::error::ErrorStack| {
        StoreError::Shared(format!("pgjsonb TLS: {what}: {e}"))
    };
    let mut builder =
        SslConnector::builder(SslMethod::tls_client()).map_err(|e| tls_err("setup", e))?;
    if let Some(ca) = &opts.sslrootcert {
        builder.set_ca_file(ca).map_err(|e| tls_err(ca, e))?;
    }
    if let Some(cert) = &opts.sslcert {
        builder
            .set_certificate_chain_file(cert)
            .map_err(|e| tls_err(cert, e))?;
    }
    if let Some(key) = &opts.sslkey {
        builder
            .set_private_key_file(key, SslFiletype::PEM)
            .map_err(|e| tls_err(key, e))?;
    }
    let verify = matches!(mode, "verify-ca" | "verify-full")
        || (mode == "require" && opts.sslrootcert.is_some());
    builder.set_verify(if verify {
        SslVerifyMode::PEER
    } else {
        SslVerifyMode::NONE
    });
    let mut connector = postgres_openssl::MakeTlsConnector::new(builder.build());
    let check_name = mode == "verify-full";
    connector.set_callback(move |c, _| {
        c.set_verify_hostname(check_name);
        Ok(())
    });
    Ok(connector)
}

impl PgStore {
    /// Connect, check (or create) the schema, start the writer and the readers. Every failure
    /// is one line: the database cannot be reached, refuses the credentials, or holds tables
    /// that are not Salt's `pgjsonb` ones.
    pub fn open(opts: &PgjsonbOptions) -> Result<PgStore> {
        let (config, tls) = client_config(opts)?;
        let conn = || Conn {
            config: config.clone(),
            tls: tls.clone(),
            client: None,
            opened: 0,
        };
        let spawn = |name: String, body: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(body)
                .map(drop)
                .map_err(|e| StoreError::Shared(format!("job store thread: {e}")))
        };
        // The client runs a runtime of its own, which must not start on a thread that drives
        // async tasks (the caller's may): even the first connection is the writer's.
        let (writes, pending) = crossbeam_channel::unbounded::<Pending>();
        let (ready, started) = crossbeam_channel::bounded::<Result<()>>(1);
        let mut writer = conn();
        let whom = format!(
            "pgjsonb: {}@{}:{}/{}",
            opts.user, opts.host, opts.port, opts.db
        );
        spawn(
            "pg-writer".into(),
            Box::new(move || {
                let first = writer
                    .run(|c| c.batch_execute("SELECT 1"))
                    .map_err(|e| match e {
                        StoreError::Shared(text) => StoreError::Shared(format!("{text} ({whom})")),
                        StoreError::Unavailable(text) => {
                            StoreError::Unavailable(format!("{text} ({whom})"))
                        }
                        other => other,
                    })
                    .and_then(|()| check_schema(&mut writer));
                let ok = first.is_ok();
                let _ = ready.send(first);
                if ok {
                    write_loop(&mut writer, &pending);
                }
            }),
        )?;
        started.recv().map_err(|_| gone())??;

        let (reads, jobs) = crossbeam_channel::unbounded::<Job>();
        for i in 0..READERS {
            let (jobs, mut conn) = (jobs.clone(), conn());
            spawn(
                format!("pg-reader-{i}"),
                Box::new(move || {
                    while let Ok(job) = jobs.recv() {
                        job(&mut conn);
                    }
                }),
            )?;
        }
        Ok(PgStore { writes, reads })
    }

    /// Record that the API token `jti` (valid until `expire`, epoch seconds) is revoked, for
    /// every salt-api reading this database (`brine_revoked_tokens`, Brine's own table).
    pub fn revoke_token(&self, jti: &str, expire: u64) -> Result<()> {
        let (jti, expire) = (jti.to_string(), i64::try_from(expire).unwrap_or(i64::MAX));
        self.read(move |c| {
            c.execute(
                "INSERT INTO brine_revoked_tokens (jti, expire) VALUES ($1, $2)
                 ON CONFLICT (jti) DO NOTHING",
                &[&jti, &expire],
            )
            .map(drop)
        })
    }

    /// Every revoked token id still recorded, with its expiry (epoch seconds). Read whole:
    /// rows are few (forgotten once expired), and a reader never misses one committed late.
    pub fn revoked_tokens(&self) -> Result<Vec<(String, u64)>> {
        let rows = self.read(|c| c.query("SELECT jti, expire FROM brine_revoked_tokens", &[]))?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), u64::try_from(r.get::<_, i64>(1)).unwrap_or(0)))
            .collect())
    }

    /// Forget revocations of tokens expired before `now` (epoch seconds); how many.
    pub fn prune_revoked_tokens(&self, now: u64) -> Result<usize> {
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        self.read(move |c| {
            c.execute(
                "DELETE FROM brine_revoked_tokens WHERE expire < $1",
                &[&now],
            )
            .map(|n| n as usize)
        })
    }

    /// Run `f` on a reader's connection and wait for its answer.
    fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> std::result::Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.reads
            .send(Box::new(move |conn: &mut Conn| {
                let _ = tx.send(conn.run(f));
            }))
            .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())?
    }

    /// Commit `writes` (with whatever else waits) and wait: each one's outcome.
    fn write(&self, writes: Vec<Write>) -> Vec<Result<bool>> {
        let n = writes.len();
        if n == 0 {
            return Vec::new();
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        if self.writes.send((writes, tx)).is_err() {
            return (0..n).map(|_| Err(gone())).collect();
        }
        rx.recv()
            .unwrap_or_else(|_| (0..n).map(|_| Err(gone())).collect())
    }
}

impl Commits for PgStore {
    fn commit(&self, writes: Vec<Write>) -> Vec<Result<bool>> {
        self.write(writes)
    }
}

fn gone() -> StoreError {
    StoreError::Unavailable("the job store's connection thread is gone".into())
}

/// Tables missing altogether are created (Salt's schema); tables that exist must have Salt's
/// columns and types.
fn check_schema(conn: &mut Conn) -> Result<()> {
    let found = conn.run(|c| {
        c.query(
            "SELECT table_name::text, column_name::text, data_type::text
             FROM information_schema.columns
             WHERE table_schema = current_schema()
               AND table_name IN ('jids', 'salt_returns', 'salt_events', 'brine_jid_minions',
                                  'brine_revoked_tokens')",
            &[],
        )
    })?;
    for (table, columns) in EXPECTED {
        let have: Vec<(String, String)> = found
            .iter()
            .filter(|r| r.get::<_, String>(0) == *table)
            .map(|r| (r.get(1), r.get(2)))
            .collect();
        if have.is_empty() {
            continue;
        }
        for (name, ty) in *columns {
            match have.iter().find(|(n, _)| n == name) {
                Some((_, t)) if t == ty => {}
                Some((_, t)) => {
                    return Err(StoreError::Shared(format!(
                        "PostgreSQL table {table}: column {name} is {t}, Salt's pgjsonb schema has {ty}"
                    )))
                }
                None => {
                    return Err(StoreError::Shared(format!(
                        "PostgreSQL table {table} has no column {name}: not Salt's pgjsonb schema"
                    )))
                }
            }
        }
    }
    conn.run(|c| c.batch_execute(SALT_SCHEMA))
}

/// The writer: every write waiting at once in one transaction, then each caller's outcomes.
fn write_loop(conn: &mut Conn, pending: &Receiver<Pending>) {
    // The prepared statements, and the connection they belong to.
    let mut prepared: Option<(u64, Statements)> = None;
    while let Ok(first) = pending.recv() {
        let batch: Vec<Pending> = std::iter::once(first).chain(pending.try_iter()).collect();
        let writes: Vec<&Write> = batch.iter().flat_map(|(w, _)| w.iter()).collect();
        let outcomes = match commit(conn, &mut prepared, &writes) {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::error!("{e}");
                writes
                    .iter()
                    .map(|_| {
                        Err(match &e {
                            StoreError::Unavailable(text) => StoreError::Unavailable(text.clone()),
                            other => StoreError::Shared(other.to_string()),
                        })
                    })
                    .collect()
            }
        };
        let mut outcomes = outcomes.into_iter();
        for (writes, reply) in batch {
            let _ = reply.send(outcomes.by_ref().take(writes.len()).collect());
        }
    }
}

/// The statements of each kind of write.
struct Statements {
    load: Statement,
    minions: Statement,
    ret: Statement,
    event: Statement,
}

fn prepare(c: &mut Client) -> std::result::Result<Statements, postgres::Error> {
    Ok(Statements {
        load: c.prepare(
            "INSERT INTO jids (jid, load) VALUES ($1, $2::text::jsonb) ON CONFLICT (jid) DO NOTHING",
        )?,
        minions: c.prepare(
            "INSERT INTO brine_jid_minions (jid, minion) SELECT $1, unnest($2::text[])
             ON CONFLICT DO NOTHING",
        )?,
        // A recorded failure (`brine_no_return`) is replaced by a real return; any other
        // return already there makes this one a duplicate. Both statements see the table as it
        // was, so exactly one of them writes or neither does.
        ret: c.prepare(
            "WITH upd AS (
                UPDATE salt_returns SET fun = left($1, 50), return = $3::text::jsonb,
                    success = left($5, 10), full_ret = $6::text::jsonb, alter_time = now()
                WHERE jid = $2 AND id = $4 AND full_ret ? 'brine_no_return'
                  AND NOT ($6::text::jsonb ? 'brine_no_return')
                RETURNING 1),
             ins AS (
                INSERT INTO salt_returns (fun, jid, return, id, success, full_ret)
                SELECT left($1, 50), $2, $3::text::jsonb, $4, left($5, 10), $6::text::jsonb
                WHERE NOT EXISTS (SELECT 1 FROM salt_returns WHERE jid = $2 AND id = $4)
                RETURNING 1)
             SELECT (SELECT count(*) FROM upd) + (SELECT count(*) FROM ins)",
        )?,
        event: c.prepare(
            "INSERT INTO salt_events (tag, data, master_id) VALUES (left($1, 255), $2::text::jsonb, $3)",
        )?,
    })
}

/// One transaction for the batch. When a write in it is refused (a value PostgreSQL does not
/// take), the batch is written again one write per transaction, so that only that one fails.
/// When the connection fails, every write fails with it.
fn commit(
    conn: &mut Conn,
    prepared: &mut Option<(u64, Statements)>,
    writes: &[&Write],
) -> Result<Vec<Result<bool>>> {
    conn.client()?;
    if prepared.as_ref().map(|(n, _)| *n) != Some(conn.opened) {
        let st = conn.run(prepare)?;
        *prepared = Some((conn.opened, st));
    }
    let Some((_, st)) = prepared.as_ref() else {
        return Err(StoreError::Shared("no prepared statements".into()));
    };
    let in_one = |c: &mut Client, ws: &[&Write]| {
        let mut tx = c.transaction()?;
        let added = ws
            .iter()
            .map(|w| apply(&mut tx, st, w))
            .collect::<std::result::Result<Vec<bool>, _>>()?;
        tx.commit()?;
        Ok(added)
    };
    match conn.run(|c| in_one(c, writes)) {
        Ok(added) => Ok(added.into_iter().map(Ok).collect()),
        Err(e) if conn.client.is_none() => Err(e),
        Err(_) => Ok(writes
            .iter()
            .map(|w| {
                conn.run(|c| in_one(c, std::slice::from_ref(w)))
                    .map(|added| added.first().copied().unwrap_or(false))
            })
            .collect()),
    }
}

fn apply(
    tx: &mut postgres::Transaction<'_>,
    st: &Statements,
    write: &Write,
) -> std::result::Result<bool, postgres::Error> {
    match write {
        Write::Load { jid, load, minions } => {
            tx.execute(&st.load, &[jid, load])?;
            if !minions.is_empty() {
                tx.execute(&st.minions, &[jid, minions])?;
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
            let row = tx.query_one(&st.ret, &[fun, jid, ret, id, success, full])?;
            Ok(row.get::<_, i64>(0) > 0)
        }
        Write::Event {
            tag,
            data,
            master_id,
        } => {
            tx.execute(&st.event, &[tag, data, master_id])?;
            Ok(true)
        }
    }
}

/// The rows of a query selecting two text columns.
fn text_pairs(
    c: &mut Client,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> std::result::Result<Vec<(String, String)>, postgres::Error> {
    Ok(c.query(sql, params)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

impl JobStore for PgStore {
    fn save_load(&self, jid: &str, load: &Value, minions: &[String]) -> Result<()> {
        self.commit_load(jid, load, minions)
    }

    fn get_load(&self, jid: &str) -> Result<Option<(Value, Vec<String>)>> {
        let jid = jid.to_string();
        let found = self.read(move |c| {
            let load = c.query_opt("SELECT load::text FROM jids WHERE jid = $1", &[&jid])?;
            let Some(load) = load else { return Ok(None) };
            let minions = c
                .query(
                    "SELECT minion::text FROM brine_jid_minions WHERE jid = $1 ORDER BY minion",
                    &[&jid],
                )?
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<_>>();
            Ok(Some((load.get::<_, String>(0), minions)))
        })?;
        found
            .map(|(load, minions)| Ok((from_text(&load)?, minions)))
            .transpose()
    }

    fn save_return(&self, ret: &Value) -> Result<bool> {
        self.commit_one(return_write(ret)?)
    }

    fn save_return_of(&self, head: &Value, ret: &Value) -> Result<bool> {
        self.commit_one(return_write_parts(head, Some(ret))?)
    }

    fn save_returns(&self, rets: &[Value]) -> Vec<Result<bool>> {
        self.commit_returns(rets)
    }

    fn missing_returns(&self, from: &str, to: &str, limit: usize) -> Result<Vec<Missing>> {
        let (from, to, limit) = (from.to_string(), to.to_string(), limit as i64);
        let rows = self.read(move |c| {
            let sql = format!(
                "SELECT m.jid::text, m.minion::text, j.load::text FROM brine_jid_minions m
                 JOIN jids j ON j.jid = m.jid
                 WHERE m.jid > $1 AND m.jid < $2
                   AND coalesce(j.load->>'fun', '') NOT IN {NOT_CHECKED}
                   AND NOT EXISTS (SELECT 1 FROM salt_returns r
                                   WHERE r.jid = m.jid AND r.id = m.minion)
                 ORDER BY m.jid DESC LIMIT $3"
            );
            Ok(c.query(&sql, &[&from, &to, &limit])?
                .iter()
                .map(|r| {
                    (
                        r.get::<_, String>(0),
                        r.get::<_, String>(1),
                        r.get::<_, String>(2),
                    )
                })
                .collect::<Vec<_>>())
        })?;
        missing_rows(rows)
    }

    fn get_returns(&self, jid: &str) -> Result<Vec<StoredReturn>> {
        let jid = jid.to_string();
        let rows = self.read(move |c| {
            text_pairs(
                c,
                "SELECT id::text, full_ret::text FROM salt_returns WHERE jid = $1
                 ORDER BY alter_time, ctid",
                &[&jid],
            )
        })?;
        stored_returns(rows)
    }

    fn list_jobs(&self, limit: usize, skip: Option<&str>) -> Result<Vec<JobHead>> {
        let limit = (limit > 0).then_some(limit as i64);
        let skip = skip.map(str::to_string);
        let rows = self.read(move |c| {
            text_pairs(
                c,
                "SELECT jid::text, load::text FROM jids
                 WHERE $2::text IS NULL OR load->>'fun' IS DISTINCT FROM $2
                 ORDER BY jid DESC LIMIT $1",
                &[&limit, &skip],
            )
        })?;
        rows.into_iter()
            .map(|(jid, text)| JobHead::from_text(jid, &text))
            .collect()
    }

    fn clean_before(&self, cutoff_jid: &str) -> Result<usize> {
        let cutoff = cutoff_jid.to_string();
        self.read(move |c| {
            let mut tx = c.transaction()?;
            // Another master cleaning at the same time: leave it to that one.
            let locked: bool = tx
                .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&CLEANUP_LOCK])?
                .get(0);
            if !locked {
                return Ok(0);
            }
            let n = tx.execute("DELETE FROM jids WHERE jid < $1", &[&cutoff])?;
            tx.execute("DELETE FROM brine_jid_minions WHERE jid < $1", &[&cutoff])?;
            tx.execute("DELETE FROM salt_returns WHERE jid < $1", &[&cutoff])?;
            tx.commit()?;
            Ok(n as usize)
        })
    }

    fn save_event(&self, tag: &str, data: &Value, master_id: &str) -> Result<()> {
        self.commit_events(&[(tag.to_string(), data.clone())], master_id)
    }

    fn save_events(&self, events: &[(String, Value)], master_id: &str) -> Result<()> {
        self.commit_events(events, master_id)
    }

    fn recent_events(&self, limit: usize) -> Result<Vec<(String, Value)>> {
        let limit = limit as i64;
        let rows = self.read(move |c| {
            text_pairs(
                c,
                "SELECT tag::text, data::text FROM
                   (SELECT id, tag, data FROM salt_events ORDER BY id DESC LIMIT $1) e
                 ORDER BY id",
                &[&limit],
            )
        })?;
        with_values(rows)
    }
}
