//! Real Salt (from PyPI, in the venvs `scripts/salt-venvs` makes) beside Brine: real masters,
//! real minions and real tools, each in a private temp directory on 127.0.0.1, run in their own
//! process group so that stopping one never leaves a worker behind. Logs are printed when a
//! test fails.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{bin, free_port, wait_until};

/// The two venvs, or `None` (with one line on stdout) when the tests do not run under
/// scripts/test. When the variables are set the venvs must be usable.
pub fn venvs() -> Option<(PathBuf, PathBuf)> {
    match (
        std::env::var_os("BRINE_SALT3007"),
        std::env::var_os("BRINE_SALT3006"),
    ) {
        (Some(a), Some(b)) => {
            let (a, b) = (PathBuf::from(a), PathBuf::from(b));
            for v in [&a, &b] {
                assert!(
                    v.join("bin/salt-master").exists(),
                    "{} has no bin/salt-master: run scripts/salt-venvs",
                    v.display()
                );
            }
            Some((a, b))
        }
        _ => {
            crate::missing_dependency(
                "interop tests need real Salt (BRINE_SALT3007/BRINE_SALT3006): run scripts/test",
            );
            None
        }
    }
}

/// A process started in its own process group (so the whole tree can be stopped).
pub struct Proc {
    pub name: String,
    child: Child,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command, stderr_file: &Path) -> Proc {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(stderr_file)
            .expect("stderr file");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc {
            name: name.to_string(),
            child,
        }
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The exit code once the process has ended by itself.
    pub fn exit_code(&mut self) -> Option<i32> {
        self.child.try_wait().ok().flatten().and_then(|s| s.code())
    }

    /// SIGTERM to the group, SIGKILL to the group after 10 s.
    pub fn stop(mut self) {
        let pgid = self.child.id() as i32;
        kill_group(pgid, "TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Stragglers of the group (workers) go too.
        kill_group(pgid, "KILL");
        let _ = self.child.wait();
    }
}

/// Send a signal to a process group (the kill tool: this crate has no unsafe code).
/// Real minions started next to a Brine `Stack`, stopped when dropped (a failing test too;
/// declare it after the stack so they stop first).
#[derive(Default)]
pub struct Fleet(pub Vec<Proc>);

impl Drop for Fleet {
    fn drop(&mut self) {
        for p in std::mem::take(&mut self.0) {
            p.stop();
        }
    }
}

pub fn kill_group(pgid: i32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .stderr(Stdio::null())
        .status();
}

/// The tail of a log file, for failure reports.
pub fn tail(path: &Path, lines: usize) -> String {
    match fs::read_to_string(path) {
        Ok(t) => {
            let v: Vec<&str> = t.lines().collect();
            let from = v.len().saturating_sub(lines);
            format!(
                "===== {} (last lines)\n{}\n",
                path.display(),
                v[from..].join("\n")
            )
        }
        Err(_) => String::new(),
    }
}

/// Common file locations of one daemon's private root.
fn daemon_paths(root: &Path, log: &str) -> String {
    format!(
        "root_dir: {r}\npki_dir: {r}/pki\ncachedir: {r}/cache\nsock_dir: {r}/sock\n\
         log_file: {r}/{log}\nlog_level_logfile: info\npidfile: {r}/run.pid\nuser: {user}\n",
        r = root.display(),
        user = crate::whoami(),
    )
}

/// Write a real (or Brine) minion's config under `root` (the directory name should start with
/// `minion-` so that `Stack::logs` and `RealMaster::logs` show its logs). The publish port is
/// set too: a real minion's `status.master` check (run every second after a reconnection)
/// looks for a connection to its configured `publish_port` and flaps when it is not the
/// master's.
pub fn write_minion_conf(root: &Path, id: &str, master_port: u16, publish_port: u16, extra: &str) {
    fs::create_dir_all(root.join("etc")).unwrap();
    let conf = format!(
        "master: 127.0.0.1\nmaster_port: {master_port}\npublish_port: {publish_port}\nid: {id}\n{paths}\
         ipv6: False\nacceptance_wait_time: 1\nacceptance_wait_time_max: 2\nrandom_reauth_delay: 0\n\
         recon_default: 100\nrecon_max: 1000\nrecon_randomize: False\nauth_timeout: 5\n\
         auth_tries: 3\nrequest_channel_timeout: 10\nping_interval: 0\nmultiprocessing: True\n\
         grains_cache: False\nenable_fqdns_grains: False\nfile_client: remote\n\
         startup_states: ''\n{extra}\n",
        paths = daemon_paths(root, "minion.log"),
    );
    fs::write(root.join("etc/minion"), conf).unwrap();
}

/// Start a real salt-minion from `venv` whose config is under `root`.
pub fn start_real_minion(venv: &Path, root: &Path) -> Proc {
    let mut cmd = Command::new(venv.join("bin/salt-minion"));
    cmd.arg("-c").arg(root.join("etc")).arg("-l").arg("quiet");
    Proc::spawn(
        &format!("real salt-minion {}", root.display()),
        cmd,
        &root.join("stderr"),
    )
}

/// Start Brine's salt-minion whose config is under `root`.
pub fn start_brine_minion(root: &Path) -> Proc {
    let mut cmd = Command::new(bin("salt-minion"));
    cmd.arg("-c").arg(root.join("etc"));
    Proc::spawn(
        &format!("brine salt-minion {}", root.display()),
        cmd,
        &root.join("stderr"),
    )
}

/// `<tool> ... --out json --static` output, parsed (Null when it is not JSON).
pub fn parse_json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or(serde_json::Value::Null)
}

/// A real salt-master with its own temp directory; real and Brine minions and Brine's salt-api
/// can be started next to it (their files live in the same directory).
pub struct RealMaster {
    pub dir: tempfile::TempDir,
    pub venv: PathBuf,
    pub ret_port: u16,
    pub publish_port: u16,
    master: Option<Proc>,
    others: Vec<Proc>,
}

impl RealMaster {
    pub fn new(venv: &Path, extra: &str) -> RealMaster {
        let dir = tempfile::tempdir().expect("temp dir");
        let ret_port = free_port();
        let publish_port = free_port();
        let root = dir.path().join("master");
        fs::create_dir_all(root.join("etc")).unwrap();
        fs::create_dir_all(root.join("srv/salt")).unwrap();
        fs::create_dir_all(root.join("srv/pillar")).unwrap();
        let conf = format!(
            "interface: 127.0.0.1\nipv6: False\nret_port: {ret_port}\npublish_port: {publish_port}\n\
             {paths}worker_threads: 2\nkeysize: 2048\nloop_interval: 1\n\
             file_roots:\n  base: [{r}/srv/salt]\npillar_roots:\n  base: [{r}/srv/pillar]\n\
             con_cache: False\n{extra}\n",
            paths = daemon_paths(&root, "master.log"),
            r = root.display(),
        );
        fs::write(root.join("etc/master"), conf).unwrap();
        RealMaster {
            dir,
            venv: venv.to_path_buf(),
            ret_port,
            publish_port,
            master: None,
            others: Vec::new(),
        }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("master")
    }

    pub fn conf_dir(&self) -> PathBuf {
        self.root().join("etc")
    }

    pub fn start(&mut self) {
        let mut cmd = Command::new(self.venv.join("bin/salt-master"));
        cmd.arg("-c").arg(self.conf_dir()).arg("-l").arg("quiet");
        self.master = Some(Proc::spawn(
            "real salt-master",
            cmd,
            &self.root().join("stderr"),
        ));
        let root = self.root();
        let port = self.ret_port;
        wait_until(Duration::from_secs(60), || {
            root.join("sock/master_event_pub.ipc").exists()
                && root.join("cache/.root_key").exists()
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .unwrap_or_else(|| panic!("real salt-master did not start\n{}", self.logs()));
    }

    pub fn stop(&mut self) {
        if let Some(p) = self.master.take() {
            p.stop();
        }
    }

    /// Start a real minion of `venv` (its files under this master's directory).
    pub fn start_real_minion(&mut self, venv: &Path, id: &str, extra: &str) {
        let root = self.dir.path().join(format!("minion-{id}"));
        write_minion_conf(&root, id, self.ret_port, self.publish_port, extra);
        self.others.push(start_real_minion(venv, &root));
    }

    /// Start one of Brine's minions against this master.
    pub fn start_brine_minion(&mut self, id: &str, extra: &str) {
        let root = self.dir.path().join(format!("minion-{id}"));
        write_minion_conf(&root, id, self.ret_port, self.publish_port, extra);
        self.others.push(start_brine_minion(&root));
    }

    /// Stop the minion `id` (real or Brine's) started against this master.
    pub fn stop_minion(&mut self, id: &str) {
        let suffix = format!("/minion-{id}");
        if let Some(i) = self.others.iter().position(|p| p.name.ends_with(&suffix)) {
            self.others.remove(i).stop();
        }
    }

    /// Start Brine's salt-api with this master's config (co-located, as Salt deploys it).
    pub fn start_brine_api(&mut self, port: u16) {
        let mut cmd = Command::new(bin("salt-api"));
        cmd.arg("-c").arg(self.conf_dir());
        self.others.push(Proc::spawn(
            "brine salt-api",
            cmd,
            &self.dir.path().join("api.stderr"),
        ));
        wait_until(Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .unwrap_or_else(|| panic!("salt-api did not start\n{}", self.logs()));
    }

    /// Run one of the real tools (salt, salt-key, salt-run) against this master.
    pub fn tool(&self, name: &str, args: &[&str]) -> Output {
        Command::new(self.venv.join("bin").join(name))
            .arg("-c")
            .arg(self.conf_dir())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run real {name}: {e}"))
    }

    /// Real `salt --out json --static ...`, parsed, with the exit code.
    pub fn salt_json(&self, args: &[&str]) -> (serde_json::Value, i32) {
        let mut a = vec!["--out", "json", "--static"];
        a.extend_from_slice(args);
        let out = self.tool("salt", &a);
        let v = parse_json(&out);
        if v.is_null() {
            panic!(
                "real salt {args:?}: output is not JSON: {}\nstderr: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.logs()
            );
        }
        (v, out.status.code().unwrap_or(-1))
    }

    /// Wait until the real salt-key lists these ids as pending, then accept them.
    pub fn accept(&self, ids: &[&str]) {
        wait_until(Duration::from_secs(60), || {
            let v = parse_json(&self.tool("salt-key", &["-l", "un", "--out", "json"]));
            let pre = v["minions_pre"].as_array().cloned().unwrap_or_default();
            ids.iter().all(|id| pre.iter().any(|p| p == id))
        })
        .unwrap_or_else(|| panic!("minions {ids:?} never became pending\n{}", self.logs()));
        for id in ids {
            let out = self.tool("salt-key", &["-y", "-a", id]);
            assert!(out.status.success(), "salt-key -a {id}\n{}", self.logs());
        }
    }

    /// Wait until every id answers test.ping through the real salt CLI.
    pub fn wait_answering(&self, ids: &[&str]) {
        let list = ids.join(",");
        wait_until(Duration::from_secs(90), || {
            let out = self.tool(
                "salt",
                &[
                    "--out",
                    "json",
                    "--static",
                    "-t",
                    "5",
                    "-L",
                    &list,
                    "test.ping",
                ],
            );
            let v = parse_json(&out);
            ids.iter().all(|id| v[id] == serde_json::Value::Bool(true))
        })
        .unwrap_or_else(|| panic!("minions {ids:?} never answered\n{}", self.logs()));
    }

    pub fn logs(&self) -> String {
        let mut s = String::new();
        s.push_str(&tail(&self.root().join("master.log"), 120));
        s.push_str(&tail(&self.root().join("stderr"), 40));
        s.push_str(&tail(&self.dir.path().join("api.stderr"), 80));
        if let Ok(rd) = fs::read_dir(self.dir.path()) {
            for e in rd.flatten() {
                let p = e.path();
                if p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("minion-"))
                {
                    s.push_str(&tail(&p.join("minion.log"), 80));
                    s.push_str(&tail(&p.join("stderr"), 40));
                }
            }
        }
        s
    }
}

impl Drop for RealMaster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        for p in std::mem::take(&mut self.others) {
            p.stop();
        }
        self.stop();
    }
}
