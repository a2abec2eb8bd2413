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
    /// How the server is secured beyond that, when it is.
    secure: Option<Secure>,
    server: Option<Child>,
}

/// A server that talks TLS only (its certificate signed by a CA of the test's own) and signs
/// clients in one way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Secure {
    /// TLS, and a user nkey (its seed in `user.nk`).
    Nkey,
    /// TLS that also verifies clients' certificates (`client.pem`/`client.key`), and a user
    /// nkey.
    NkeyAndClientCert,
    /// TLS, and decentralised JWT auth: an operator, an account with JetStream and a user,
    /// whose `.creds` file (`user.creds`) signs in.
    Credentials,
}

/// Whether `nats-server` can be run (a failure under CI when it cannot).
fn installed() -> bool {
    let found = Command::new("nats-server")
        .arg("--version")
        .output()
        .is_ok();
    if !found {
        missing_dependency(
            "nats-server is not installed (Debian: nats-server; scripts/test installs it)",
        );
    }
    found
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
        if !installed() {
            return None;
        }
        let mut nats = Nats {
            dir: tempfile::tempdir().expect("temp dir"),
            port: free_port(),
            credentials,
            secure: None,
            server: None,
        };
        nats.start_server();
        Some(nats)
    }

    /// A server secured as `secure` says: its CA, certificates, keys, nkey seed or creds file
    /// made in its directory.
    pub fn start_secure(secure: Secure) -> Option<Nats> {
        if !installed() {
            return None;
        }
        let mut nats = Nats {
            dir: tempfile::tempdir().expect("temp dir"),
            port: free_port(),
            credentials: None,
            secure: Some(secure),
            server: None,
        };
        nats.write_secure_config(secure);
        nats.start_server();
        Some(nats)
    }

    /// A file of the server's directory (certificates, keys, seeds).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write_secure_config(&self, secure: Secure) {
        let dir = self.dir.path();
        crate::tls::make_ca(dir, "ca");
        crate::tls::make_signed(dir, "ca", "server", "127.0.0.1");
        crate::tls::make_signed(dir, "ca", "client", "brine-client");
        let verify = secure == Secure::NkeyAndClientCert;
        let mut conf = format!(
            "listen: \"127.0.0.1:{}\"\njetstream {{ store_dir: \"{}\" }}\n\
             tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  \
             verify: {verify}\n  timeout: 5\n}}\n",
            self.port,
            dir.join("js").display(),
            dir.join("server.pem").display(),
            dir.join("server.key").display(),
            dir.join("ca.pem").display(),
        );
        match secure {
            Secure::Nkey | Secure::NkeyAndClientCert => {
                let user = nkeys::KeyPair::new_user();
                std::fs::write(dir.join("user.nk"), user.seed().unwrap() + "\n").unwrap();
                conf.push_str(&format!(
                    "authorization {{ users = [ {{ nkey: \"{}\" }} ] }}\n",
                    user.public_key()
                ));
            }
            Secure::Credentials => {
                let jwts = crate::nats_jwt::Chain::new();
                std::fs::write(dir.join("user.creds"), jwts.creds()).unwrap();
                conf.push_str(&jwts.server_config());
            }
        }
        std::fs::write(dir.join("server.conf"), conf).unwrap();
    }

    /// Start the server (again), on the same port with the same stream files.
    pub fn start_server(&mut self) {
        assert!(self.server.is_none(), "nats-server already runs");
        let log = self.log_path();
        let mut cmd = Command::new("nats-server");
        if self.secure.is_some() {
            cmd.arg("-c").arg(self.dir.path().join("server.conf"));
        } else {
            cmd.args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.path().join("js"));
        }
        cmd.arg("-l")
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
        let Some(secure) = self.secure else {
            return text;
        };
        let text = text.replace("nats://", "tls://");
        let path = |name: &str| self.file(name).display().to_string();
        let mut text = format!("{text}  tls_ca: {}\n", path("ca.pem"));
        match secure {
            Secure::Nkey => text.push_str(&format!("  nkey_seed_file: {}\n", path("user.nk"))),
            Secure::NkeyAndClientCert => text.push_str(&format!(
                "  nkey_seed_file: {}\n  tls_cert: {}\n  tls_key: {}\n",
                path("user.nk"),
                path("client.pem"),
                path("client.key")
            )),
            Secure::Credentials => {
                text.push_str(&format!("  credentials: {}\n", path("user.creds")))
            }
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
