//! `master_job_cache: pgjsonb`: jobs in a real PostgreSQL (a private cluster started by the
//! test), in the tables of Salt's `pgjsonb` returner.

use std::process::Command;

use brine_e2e::postgres::Postgres;
use brine_e2e::{bin, stderr, stdout, Stack};
use brine_master::jobstore::pgjsonb::PgStore;
use brine_master::jobstore::{contract, JobStore};
use brine_protocol::config::PgjsonbOptions;
use serde_json::{json, Value as Json};

fn options(pg: &Postgres) -> PgjsonbOptions {
    PgjsonbOptions {
        host: "127.0.0.1".into(),
        port: pg.port,
        user: brine_e2e::postgres::USER.into(),
        pass: brine_e2e::postgres::PASSWORD.into(),
        db: brine_e2e::postgres::DB.into(),
        sslmode: Some("disable".into()),
        sslcert: None,
        sslkey: None,
        sslrootcert: None,
        connect_timeout: Some(5),
    }
}

/// How many returns of `jid` are in `salt_returns`, as psql prints the count.
fn stored_returns(pg: &Postgres, jid: &str) -> String {
    pg.psql(&format!(
        "SELECT count(*) FROM salt_returns WHERE jid = '{jid}'"
    ))
}

/// Wait until the one return of `jid` is in `salt_returns` (the stack's logs when it is not).
fn wait_for_return(pg: &Postgres, st: &Stack, jid: &str) {
    assert!(
        brine_e2e::wait_until(std::time::Duration::from_secs(30), || {
            stored_returns(pg, jid) == "1"
        })
        .is_some(),
        "{}",
        st.logs()
    );
}

/// Why the store refuses to open with `opts` (`what` names the case, for a failure).
fn refused(opts: &PgjsonbOptions, what: &str) -> String {
    PgStore::open(opts).err().expect(what).to_string()
}

/// The PostgreSQL store does what the SQLite one does, in Salt's tables with Salt's types.
#[test]
fn the_postgres_store_keeps_the_job_store_contract_in_salts_tables() {
    let Some(pg) = Postgres::start() else { return };
    let store = PgStore::open(&options(&pg)).unwrap_or_else(|e| panic!("{e}\n{}", pg.log()));
    contract::missing_returns_and_recorded_failures(&store);
    pg.psql("TRUNCATE jids, salt_returns, salt_events, brine_jid_minions");
    contract::loads_returns_and_retention(&store);

    let columns = pg.psql(
        "SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
         FROM information_schema.columns
         WHERE table_name IN ('jids', 'salt_returns', 'salt_events')
         ORDER BY table_name, ordinal_position",
    );
    assert_eq!(
        columns.lines().collect::<Vec<_>>(),
        [
            "jids.jid character varying NO",
            "jids.load jsonb NO",
            "salt_events.id bigint NO",
            "salt_events.tag character varying NO",
            "salt_events.data jsonb NO",
            "salt_events.alter_time timestamp with time zone YES",
            "salt_events.master_id character varying NO",
            "salt_returns.fun character varying NO",
            "salt_returns.jid character varying NO",
            "salt_returns.return jsonb NO",
            "salt_returns.id character varying NO",
            "salt_returns.success character varying NO",
            "salt_returns.full_ret jsonb NO",
            "salt_returns.alter_time timestamp with time zone YES",
        ]
    );
    // Opening again finds its own schema and keeps the rows.
    drop(store);
    let again = PgStore::open(&options(&pg)).unwrap();
    assert_eq!(again.recent_events(10).unwrap().len(), 5);

    // A value PostgreSQL refuses (a NUL in a JSON string) fails alone: the returns committed
    // with it in one batch are stored.
    let ret = |id: &str, text: &str| {
        brine_protocol::payload::map(vec![
            ("id", id.into()),
            ("jid", "20261127120000000001".into()),
            ("fun", "test.echo".into()),
            ("return", text.into()),
        ])
    };
    let outcomes = again.save_returns(&[
        ret("m1", "fine"),
        ret("m2", "nul \0 here"),
        ret("m3", "fine"),
    ]);
    assert!(matches!(outcomes[0], Ok(true)), "{outcomes:?}");
    assert!(outcomes[1].is_err(), "{outcomes:?}");
    assert!(matches!(outcomes[2], Ok(true)), "{outcomes:?}");
    let ids: Vec<String> = again
        .get_returns("20261127120000000001")
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["m1", "m3"]);
}

/// TLS as libpq's sslmode names it, against a server taking TLS connections only: `require`
/// encrypts, `verify-full` also checks the certificate against `sslrootcert` and the name,
/// `disable` is refused by the server.
#[test]
fn sslmodes_connect_as_libpq_does() {
    let Some(pg) = Postgres::start_tls() else {
        return;
    };
    let with = |mode: &str, root: Option<&std::path::Path>| PgjsonbOptions {
        sslmode: Some(mode.into()),
        sslrootcert: root.map(|p| p.display().to_string()),
        ..options(&pg)
    };
    for (mode, root) in [
        ("require", None),
        ("prefer", None),
        ("verify-ca", Some(pg.cert())),
        ("verify-full", Some(pg.cert())),
    ] {
        if let Err(e) = PgStore::open(&with(mode, root.as_deref())) {
            panic!("{mode}: {e}\n{}", pg.log());
        }
    }
    let err = PgStore::open(&with("disable", None)).err().expect("no TLS");
    assert!(err.to_string().contains("no encryption"), "{err}");

    // A certificate the server's is not signed by: refused by verify-full.
    let other = Postgres::start_tls().expect("a second server");
    let err = PgStore::open(&with("verify-full", Some(&other.cert())))
        .err()
        .expect("wrong root certificate");
    assert!(
        err.to_string().contains("certificate verify failed"),
        "{err}"
    );
    let err = PgStore::open(&with(
        "verify-full",
        Some(std::path::Path::new("/nonexistent.crt")),
    ))
    .err()
    .expect("no root certificate file");
    assert!(err.to_string().contains("/nonexistent.crt"), "{err}");
}

/// Wrong credentials, nothing listening, tables that are not Salt's: a one-line error, from the
/// store and from salt-master at start, never a fallback to SQLite.
#[test]
fn a_database_brine_cannot_use_is_refused_at_start_in_one_line() {
    let Some(pg) = Postgres::start() else { return };
    let wrong = PgjsonbOptions {
        pass: "not-the-password".into(),
        ..options(&pg)
    };
    let err = refused(&wrong, "wrong password");
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(!err.contains("not-the-password"), "{err}");

    let nobody = PgjsonbOptions {
        port: brine_e2e::free_port(),
        ..options(&pg)
    };
    let err = refused(&nobody, "nothing listening");
    assert!(err.contains("pgjsonb: salt@127.0.0.1"), "{err}");

    pg.psql("CREATE TABLE salt_returns (fun text, jid text, return text, id text, success text, full_ret text, alter_time timestamptz)");
    let err = refused(&options(&pg), "not Salt's schema");
    assert!(
        err.contains(
            "table salt_returns: column fun is text, Salt's pgjsonb schema has character varying"
        ),
        "{err}"
    );

    // salt-master itself: the same line, a non-zero exit, no SQLite store made.
    let st = Stack::new(&pg.master_config().replace("pass: salt", "pass: wrong"));
    let out = Command::new(bin("salt-master"))
        .arg("-c")
        .arg(st.master_conf_dir())
        .output()
        .expect("salt-master");
    assert!(!out.status.success());
    let text = stderr(&out);
    assert!(
        text.contains("master_job_cache: job store: PostgreSQL: password authentication failed"),
        "{text}"
    );
    assert!(!st.master_root().join("cache/jobs.sqlite").exists());
}

/// A master on PostgreSQL: jobs published and their returns land in Salt's tables, and the
/// job runners read them back.
#[test]
fn a_master_keeps_its_jobs_in_postgres() {
    let Some(pg) = Postgres::start() else { return };
    let mut st = Stack::new(&format!("auto_accept: True\n{}", pg.master_config()));
    st.start_master();
    st.start_minion("web1", "");
    st.start_minion("web2", "");
    st.wait_answering(&["web1", "web2"]);
    let (pinged, code) = st.salt_json(&["*", "test.echo", "from postgres"]);
    assert_eq!(code, 0, "{pinged}\n{}", st.logs());
    let jid = brine_e2e::async_jid(&st.tool("salt", &["web1", "test.arg", "a", "k=v", "--async"]));
    wait_for_return(&pg, &st, &jid);
    let row = pg.psql(&format!(
        "SELECT fun || ' ' || id || ' ' || success || ' ' || (full_ret->>'jid')
         FROM salt_returns WHERE jid = '{jid}'"
    ));
    assert_eq!(row, format!("test.arg web1 true {jid}"));
    let load = pg.psql(&format!(
        "SELECT load->>'fun' FROM jids WHERE jid = '{jid}'"
    ));
    assert_eq!(load, "test.arg");
    assert_eq!(
        pg.psql("SELECT count(*) FROM salt_returns WHERE fun = 'test.echo'"),
        "2"
    );

    let out = st.tool("salt-run", &["jobs.lookup_jid", &jid, "--out", "json"]);
    let shown: Json = serde_json::from_str(stdout(&out).trim()).unwrap_or(Json::Null);
    assert_eq!(
        shown["web1"]["args"],
        json!(["a"]),
        "{shown}\n{}",
        stderr(&out)
    );
    assert_eq!(shown["web1"]["kwargs"]["k"], json!("v"), "{shown}");
    let out = st.tool("salt-run", &["jobs.list_job", &jid, "--out", "json"]);
    let job: Json = serde_json::from_str(stdout(&out).trim()).unwrap_or(Json::Null);
    assert_eq!(job["Function"], json!("test.arg"), "{job}");
    assert_eq!(job["Minions"], json!(["web1"]), "{job}");
}

/// Salt 3007's own `pgjsonb` returner (psycopg2, from the venv) and Brine share the tables:
/// real `salt-run jobs.lookup_jid` reads a job Brine's master stored, and Brine's reads a job
/// Salt's returner stored.
#[test]
fn salt_and_brine_read_each_others_jobs_in_postgres() {
    let Some((venv, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let Some(pg) = Postgres::start() else { return };
    let mut st = Stack::new(&format!("auto_accept: True\n{}", pg.master_config()));
    st.start_master();
    st.start_minion("web1", "");
    st.wait_answering(&["web1"]);
    let jid = brine_e2e::async_jid(&st.tool("salt", &["web1", "test.arg", "a", "k=v", "--async"]));
    wait_for_return(&pg, &st, &jid);

    // Real salt-run, with a master config naming the same database.
    let salt = brine_e2e::real::RealMaster::new(&venv, &pg.master_config());
    let out = salt.tool("salt-run", &["--out", "json", "jobs.lookup_jid", &jid]);
    let shown = brine_e2e::real::parse_json(&out);
    assert_eq!(
        shown["web1"]["args"],
        json!(["a"]),
        "{shown}\n{}",
        stderr(&out)
    );
    assert_eq!(shown["web1"]["kwargs"]["k"], json!("v"), "{shown}");

    // Salt's returner stores a job as Salt's master does; Brine's salt-run reads it.
    // A jid of now: the master removes jobs older than keep_jobs_seconds (24 hours).
    let salt_jid = &brine_protocol::jid::gen_jid();
    let script = r#"
import sys
import salt.config
import salt.loader
opts = salt.config.master_config(sys.argv[1])
returners = salt.loader.returners(opts, {})
jid = sys.argv[2]
load = {"fun": "test.arg", "arg": ["from", "salt"], "tgt": "realweb", "tgt_type": "glob",
        "user": "root", "jid": jid}
returners["pgjsonb.save_load"](jid, load)
returners["pgjsonb.returner"]({"id": "realweb", "jid": jid, "fun": "test.arg",
    "fun_args": ["from", "salt"], "retcode": 0, "success": True,
    "return": {"args": ["from", "salt"], "kwargs": {}}})
"#;
    let out = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .arg(salt.conf_dir().join("master"))
        .arg(salt_jid)
        .output()
        .expect("python");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = st.tool("salt-run", &["jobs.lookup_jid", salt_jid, "--out", "json"]);
    let shown: Json = serde_json::from_str(stdout(&out).trim()).unwrap_or(Json::Null);
    assert_eq!(
        shown["realweb"]["args"],
        json!(["from", "salt"]),
        "{shown}\nstdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );
    let out = st.tool("salt-run", &["jobs.list_job", salt_jid, "--out", "json"]);
    let job: Json = serde_json::from_str(stdout(&out).trim()).unwrap_or(Json::Null);
    assert_eq!(job["Function"], json!("test.arg"), "{job}");
    assert_eq!(job["Arguments"], json!(["from", "salt"]), "{job}");
}

/// PostgreSQL stopped while minions return: the master acknowledges nothing it could not store
/// (logged), the minions send their returns again, and every one is stored once the database
/// is back.
#[test]
fn returns_sent_while_postgres_is_down_are_stored_once_it_is_back() {
    let Some(pg) = Postgres::start() else { return };
    let mut st = Stack::new(&format!("auto_accept: True\n{}", pg.master_config()));
    st.start_master();
    for id in ["web1", "web2"] {
        st.start_minion(id, "return_retry_timer: 1\nreturn_retry_timer_max: 2\n");
    }
    st.wait_answering(&["web1", "web2"]);
    let mut jids: Vec<String> = (0..3)
        .map(|i| {
            brine_e2e::async_jid(&st.tool(
                "salt",
                &["*", "test.sleep", &format!("{}", 1 + i), "--async"],
            ))
        })
        .collect();
    pg.stop_server();
    // A job published meanwhile runs, as with Salt; its record waits for the database.
    let out = st.tool("salt", &["*", "test.ping", "--async"]);
    assert!(out.status.success(), "{}", stderr(&out));
    jids.push(brine_e2e::async_jid(&out));
    std::thread::sleep(std::time::Duration::from_secs(5));
    pg.start_server();
    let count = |jid: &str| stored_returns(&pg, jid);
    assert!(
        brine_e2e::wait_until(std::time::Duration::from_secs(90), || {
            jids.iter().all(|jid| count(jid) == "2")
        })
        .is_some(),
        "{:?}\n{}",
        jids.iter().map(|j| count(j)).collect::<Vec<_>>(),
        st.logs()
    );
    // Every job has its record, the one published during the outage too.
    for jid in &jids {
        let rows = pg.psql(&format!("SELECT count(*) FROM jids WHERE jid = '{jid}'"));
        assert_eq!(rows, "1", "{jid}\n{}", st.master_log());
    }
    assert!(
        st.master_log()
            .contains("its record waits for the job store"),
        "{}",
        st.master_log()
    );
    assert!(
        st.master_log().contains("not stored, not acknowledged"),
        "{}",
        st.master_log()
    );
    // Counted for salt-api's /metrics: the refused job and the returns left unacknowledged.
    let metrics = std::fs::read_to_string(st.master_root().join("cache/brine_master.prom"))
        .unwrap_or_default();
    let counted: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("brine_master_store_unavailable_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(counted >= 1, "{metrics}");
    // Each once: a return sent again after it was stored is a duplicate.
    assert_eq!(
        pg.psql("SELECT count(*) FROM (SELECT jid, id FROM salt_returns GROUP BY jid, id HAVING count(*) > 1) d"),
        "0"
    );
}
