//! A private NATS server with JetStream for tests: Debian's `nats-server` on a free loopback
//! port, its stream files in a temp dir (so they outlive a restart, as a real deployment's do).
//! Stopped when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{free_port, missing_dependency, wait_until};

pub struct Nats {
    pub dir: tempfile::TempDir,
    pub port: u16,
    /// `user` and `password` the server asks for, when it asks.
    pub credentials: Option<(String, String)>,
    server: Option<Child>,
}

impl Nats {
    /// A running server, or `None` (a failure under CI) when `nats-server` is not installed.
    pub fn start() -> Option<Nats> {
        Nats::start_with(None)
    }

    /// The same, taking only clients signed in as `user` with `password`.
    pub fn start_with_user(user: &str, password: &str) -> Option<Nats> {
        Nats::start_with(Some((user.into(), password.into())))
    }

    fn start_with(credentials: Option<(String, String)>) -> Option<Nats> {
        if Command::new("nats-server")
            .arg("--version")
            .output()
            .is_err()
        {
            missing_dependency(
                "nats-server is not installed (Debian: nats-server; scripts/test installs it)",
            );
            return None;
        }
        let mut nats = Nats {
            dir: tempfile::tempdir().expect("temp dir"),
            port: free_port(),
            credentials,
            server: None,
        };
        nats.start_server();
        Some(nats)
    }

    /// Start the server (again), on the same port with the same stream files.
    pub fn start_server(&mut self) {
        assert!(self.server.is_none(), "nats-server already runs");
        let log = self.log_path();
        let mut cmd = Command::new("nats-server");
        cmd.args([
            "-a",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-js",
            "-sd",
        ])
        .arg(self.dir.path().join("js"))
        .arg("-l")
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if let Some((user, password)) = &self.credentials {
            cmd.args(["--user", user, "--pass", password]);
        }
        let before = self.log().matches("Server is ready").count();
        self.server = Some(cmd.spawn().expect("start nats-server"));
        wait_until(Duration::from_secs(30), || {
            self.log().matches("Server is ready").count() > before
        })
        .unwrap_or_else(|| panic!("nats-server did not start\n{}", self.log()));
    }

    /// Stop the server (SIGKILL: nothing is flushed on the way out).
    pub fn stop_server(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Master config lines sending events to this server's stream `SALT_EVENTS`.
    pub fn master_config(&self) -> String {
        let mut text = format!(
            "brine_nats:\n  servers: nats://127.0.0.1:{}\n  max_age: 3600\n",
            self.port
        );
        if let Some((user, password)) = &self.credentials {
            text.push_str(&format!("  user: {user}\n  password: {password}\n"));
        }
        text
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop_server();
    }
}
