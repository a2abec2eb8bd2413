//! A private PostgreSQL server for tests: Debian's `postgresql` binaries (`initdb`, `pg_ctl`), a
//! cluster in a temp dir listening on 127.0.0.1 only (no Unix socket), with a `salt` user whose
//! password is `salt` (password authentication, as Salt's `pgjsonb` defaults expect) and a
//! `salt` database. Stopped when dropped. As root, the server runs as the `postgres` user that
//! Debian's package creates (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::{free_port, missing_dependency, wait_until};

pub const USER: &str = "salt";
pub const PASSWORD: &str = "salt";
pub const DB: &str = "salt";

pub struct Postgres {
    pub dir: tempfile::TempDir,
    pub port: u16,
    bin: PathBuf,
    /// `runuser -u postgres --` when running as root.
    as_user: Vec<String>,
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding `initdb`.
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

impl Postgres {
    /// A running server, or `None` (a failure under CI) when PostgreSQL is not installed.
    pub fn start() -> Option<Postgres> {
        Postgres::start_with(false)
    }

    /// The same, taking TLS connections only: a certificate of its own for 127.0.0.1 (self-
    /// signed, [`Postgres::cert`]), and `hostssl` lines only in `pg_hba.conf`.
    pub fn start_tls() -> Option<Postgres> {
        Postgres::start_with(true)
    }

    fn start_with(tls: bool) -> Option<Postgres> {
        let Some(bin) = bin_dir() else {
            missing_dependency(
                "PostgreSQL is not installed (Debian: postgresql; scripts/test installs it)",
            );
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let as_user = if is_root() {
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(chown.success(), "chown of the cluster dir to postgres");
            vec![
                "runuser".into(),
                "-u".into(),
                "postgres".into(),
                "--".into(),
            ]
        } else {
            Vec::new()
        };
        let pg = Postgres {
            port: free_port(),
            dir,
            bin,
            as_user,
        };
        let pwfile = pg.dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        if !pg.as_user.is_empty() {
            Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&pwfile)
                .status()
                .expect("chown");
        }
        let out = pg.run(
            "initdb",
            &[
                "-D".as_ref(),
                pg.data().as_os_str(),
                "-U".as_ref(),
                USER.as_ref(),
                "--pwfile".as_ref(),
                pwfile.as_os_str(),
                "--auth=scram-sha-256".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C.UTF-8".as_ref(),
            ],
        );
        assert!(out.status.success(), "initdb: {}", crate::stderr(&out));
        if tls {
            pg.make_tls_only();
        }
        pg.start_server();
        let out = pg.psql_on("postgres", &format!("CREATE DATABASE {DB}"));
        assert!(out.status.success(), "createdb: {}", crate::stderr(&out));
        Some(pg)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The server's certificate (with [`Postgres::start_tls`]).
    pub fn cert(&self) -> PathBuf {
        self.data().join("server.crt")
    }

    fn make_tls_only(&self) {
        let (key, cert) = (self.data().join("server.key"), self.cert());
        let out = self
            .command(Path::new("openssl"))
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl");
        assert!(out.status.success(), "openssl req: {}", crate::stderr(&out));
        let chmod = self
            .command(Path::new("chmod"))
            .arg("600")
            .arg(&key)
            .status();
        assert!(chmod.is_ok_and(|s| s.success()), "chmod of the server key");
        let conf = self.data().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap();
        text.push_str("\nssl = on\n");
        std::fs::write(&conf, text).unwrap();
        std::fs::write(
            self.data().join("pg_hba.conf"),
            "hostssl all all 127.0.0.1/32 scram-sha-256\n",
        )
        .unwrap();
    }

    /// `exe` run as the server's user.
    fn command(&self, exe: &Path) -> Command {
        match self.as_user.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        }
    }

    fn run(&self, tool: &str, args: &[&std::ffi::OsStr]) -> Output {
        let exe = self.bin.join(tool);
        let mut cmd = self.command(&exe);
        cmd.args(args)
            .env("PGPASSWORD", PASSWORD)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", exe.display()))
    }

    /// Start (again) the server on its port, waiting until it takes connections.
    pub fn start_server(&self) {
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories='' -c fsync=off \
             -c max_connections=200",
            self.port
        );
        let log = self.dir.path().join("server.log");
        let out = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data().as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                opts.as_ref(),
                "-w".as_ref(),
                "start".as_ref(),
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            crate::stderr(&out),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        wait_until(Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
        })
        .expect("PostgreSQL takes connections");
    }

    /// Stop the server at once (`pg_ctl stop -m immediate`: as a crash would).
    pub fn stop_server(&self) {
        let _ = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                self.data().as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "stop".as_ref(),
            ],
        );
    }

    fn psql_on(&self, db: &str, sql: &str) -> Output {
        let port = self.port.to_string();
        self.run(
            "psql",
            &[
                "-h".as_ref(),
                "127.0.0.1".as_ref(),
                "-p".as_ref(),
                port.as_ref(),
                "-U".as_ref(),
                USER.as_ref(),
                "-d".as_ref(),
                db.as_ref(),
                "-v".as_ref(),
                "ON_ERROR_STOP=1".as_ref(),
                "-At".as_ref(),
                "-c".as_ref(),
                sql.as_ref(),
            ],
        )
    }

    /// Run `sql` in the `salt` database: its rows, one per line (`psql -At`).
    pub fn psql(&self, sql: &str) -> String {
        self.try_psql(sql)
            .unwrap_or_else(|e| panic!("psql {sql}: {e}"))
    }

    /// [`Postgres::psql`] giving psql's error instead of panicking.
    pub fn try_psql(&self, sql: &str) -> Result<String, String> {
        let out = self.psql_on(DB, sql);
        if out.status.success() {
            Ok(crate::stdout(&out).trim_end().to_string())
        } else {
            Err(crate::stderr(&out))
        }
    }

    /// Master config lines choosing this server as the job cache.
    pub fn master_config(&self) -> String {
        format!(
            "master_job_cache: pgjsonb\nreturner.pgjsonb.host: 127.0.0.1\n\
             returner.pgjsonb.port: {}\nreturner.pgjsonb.user: {USER}\n\
             returner.pgjsonb.pass: {PASSWORD}\nreturner.pgjsonb.db: {DB}\n\
             returner.pgjsonb.sslmode: disable\n",
            self.port
        )
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

#[allow(unsafe_code)]
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop_server();
    }
}
