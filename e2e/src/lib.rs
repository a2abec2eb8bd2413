//! Helpers for whole-system tests: real Brine processes on 127.0.0.1, in a private temp
//! directory, on ports outside the ephemeral range, stopped when the test ends. When a test
//! fails, the logs of every process are printed.

pub mod http;
pub mod masters;
pub mod nats;
pub mod nats_jwt;
pub mod postgres;
pub mod real;
pub mod tls;
pub mod wire;

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// Path of a binary built by this workspace (tests run from target/<profile>/deps).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(|d| {
            if d.ends_with("deps") {
                d.parent()
            } else {
                Some(d)
            }
        })
        .expect("target directory");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace binaries first (cargo build --workspace --bins)",
        p.display()
    );
    p
}

/// A test cannot run because something it needs is missing: under CI (`CI=true`, as
/// `scripts/test` sets it) that is a failure, elsewhere a note and a skip.
pub fn missing_dependency(why: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "{why} (CI=true: a missing dependency fails the test)");
    eprintln!("skipped: {why}");
}

/// The venv made by scripts/test, or None (with a note) when the test runs outside it.
pub fn test_venv(test: &str) -> Option<PathBuf> {
    match std::env::var_os("BRINE_TEST_VENV") {
        Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
        _ => {
            missing_dependency(&format!(
                "{test} needs the Python venv of scripts/test (BRINE_TEST_VENV is not set)"
            ));
            None
        }
    }
}

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// A free TCP port on 127.0.0.1 between 20000 and 32000 (outside 32768-60999), that no other
/// process using this function has taken: test binaries run side by side.
pub fn free_port() -> u16 {
    if NEXT_PORT.load(Ordering::SeqCst) == 0 {
        let start = 20000 + (std::process::id() % 1000) as u16 * 12;
        let _ = NEXT_PORT.compare_exchange(0, start, Ordering::SeqCst, Ordering::SeqCst);
    }
    loop {
        let p = NEXT_PORT.fetch_add(1, Ordering::SeqCst);
        if p >= 32000 {
            NEXT_PORT.store(20000, Ordering::SeqCst);
            continue;
        }
        if reserve_port(p) && TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
}

/// Takes `port` for this process: a POSIX record lock on byte `port` of a lock file shared by
/// every process on the machine, which the kernel drops when the process exits. A port between
/// another process's pick and its daemon's bind is thus never handed out twice. False when
/// another process holds it; true when the lock file cannot be opened (the bind check remains).
#[allow(unsafe_code)]
fn reserve_port(port: u16) -> bool {
    use std::os::fd::AsRawFd;
    static LOCKS: std::sync::OnceLock<Option<fs::File>> = std::sync::OnceLock::new();
    let file = LOCKS.get_or_init(|| {
        fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(std::env::temp_dir().join("brine-test-ports.lock"))
            .ok()
    });
    let Some(file) = file else { return true };
    // SAFETY: an all-zero `flock` is a valid value of the plain C struct; fcntl reads it.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = libc::off_t::from(port);
    lock.l_len = 1;
    // SAFETY: a valid open descriptor, kept open for the life of the process (closing any
    // descriptor of the file would drop the locks), and a pointer to an initialised `flock`.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) == 0 }
}

pub fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "root".into())
}

/// A master, its minions and the tools, all in one temp directory.
pub struct Stack {
    pub dir: tempfile::TempDir,
    /// The loopback address the master listens on (127.0.0.1 unless [`Stack::listen_on`]).
    pub host: String,
    pub ret_port: u16,
    pub publish_port: u16,
    master: Option<Child>,
    api: Option<Child>,
    minions: BTreeMap<String, Child>,
    /// Passwords and tokens the stack's logs must never hold (checked when it stops).
    secrets: std::sync::Mutex<Vec<String>>,
}

impl Stack {
    /// Write the master's config (with `extra` YAML lines appended) without starting it.
    pub fn new(extra_master: &str) -> Stack {
        let dir = tempfile::tempdir().expect("temp dir");
        let ret_port = free_port();
        let publish_port = free_port();
        let root = dir.path().join("master");
        fs::create_dir_all(root.join("etc")).unwrap();
        let conf = format!(
            "interface: 127.0.0.1\nret_port: {ret_port}\npublish_port: {publish_port}\n\
             root_dir: {root}\npki_dir: {root}/pki\ncachedir: {root}/cache\nsock_dir: {root}/sock\n\
             log_file: {root}/master.log\nlog_level: info\nuser: {user}\nloop_interval: 1\n\
             worker_threads: 3\nkeysize: 2048\n{extra_master}\n",
            root = root.display(),
            user = whoami(),
        );
        fs::write(root.join("etc/master"), conf).unwrap();
        Stack {
            dir,
            host: "127.0.0.1".into(),
            ret_port,
            publish_port,
            master: None,
            api: None,
            minions: BTreeMap::new(),
            secrets: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A pillar tree for the master (`pillar_roots: base: [<root>/pillar]`), as (relative
    /// path, text) pairs; before `start_master`.
    pub fn pillar(&self, files: &[(&str, &str)]) {
        let root = self.master_root().join("pillar");
        for (path, text) in files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let conf = self.master_conf_dir().join("master");
        let mut text = fs::read_to_string(&conf).unwrap();
        text.push_str(&format!("pillar_roots:\n  base: [{}]\n", root.display()));
        fs::write(conf, text).unwrap();
    }

    /// Make the master listen on another loopback address (127.0.0.2, ...): before
    /// `start_master`. Salt's minions tell their masters apart by address.
    pub fn listen_on(&mut self, host: &str) {
        let conf = self.master_conf_dir().join("master");
        let text = fs::read_to_string(&conf).unwrap();
        assert!(text.contains("interface: 127.0.0.1\n"), "{text}");
        fs::write(
            &conf,
            text.replacen("interface: 127.0.0.1\n", &format!("interface: {host}\n"), 1),
        )
        .unwrap();
        self.host = host.to_string();
    }

    pub fn master_conf_dir(&self) -> PathBuf {
        self.dir.path().join("master/etc")
    }

    pub fn master_root(&self) -> PathBuf {
        self.dir.path().join("master")
    }

    pub fn start_master(&mut self) {
        let log = fs::File::create(self.dir.path().join("master.stderr")).unwrap();
        let child = Command::new(bin("salt-master"))
            .arg("-c")
            .arg(self.master_conf_dir())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start salt-master");
        self.master = Some(child);
        // Ready when the event bus socket exists and the ret port answers.
        let sock = self.master_root().join("sock/master_event_pub.ipc");
        wait_until(Duration::from_secs(30), || {
            sock.exists()
                && std::net::TcpStream::connect((self.host.as_str(), self.ret_port)).is_ok()
        })
        .unwrap_or_else(|| panic!("master did not start\n{}", self.logs()));
    }

    /// Start salt-api on `port` (the master config must carry the rest_cherrypy block).
    pub fn start_api(&mut self, port: u16) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("api.stderr"))
            .unwrap();
        let child = Command::new(bin("salt-api"))
            .arg("-c")
            .arg(self.master_conf_dir())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start salt-api");
        self.api = Some(child);
        wait_until(Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .unwrap_or_else(|| panic!("salt-api did not start\n{}", self.logs()));
    }

    /// Stop salt-api (SIGTERM, as a service manager would).
    pub fn stop_api(&mut self) {
        if let Some(c) = self.api.take() {
            terminate(c);
        }
    }

    /// SIGKILL salt-api.
    pub fn kill_api(&mut self) {
        if let Some(mut c) = self.api.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn api_pid(&self) -> Option<u32> {
        self.api.as_ref().map(Child::id)
    }

    /// What salt-api wrote to its console (its warnings).
    pub fn api_log(&self) -> String {
        fs::read_to_string(self.dir.path().join("api.stderr")).unwrap_or_default()
    }

    pub fn master_pid(&self) -> Option<u32> {
        self.master.as_ref().map(Child::id)
    }

    /// SIGKILL the master, as the kernel's OOM killer would.
    pub fn kill_master(&mut self) {
        if let Some(mut c) = self.master.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn stop_master(&mut self) {
        if let Some(c) = self.master.take() {
            terminate(c);
        }
    }

    /// Write a minion's config and start it.
    pub fn start_minion(&mut self, id: &str, extra: &str) {
        let root = self.dir.path().join(format!("minion-{id}"));
        fs::create_dir_all(root.join("etc")).unwrap();
        let conf = format!(
            "master: 127.0.0.1\nmaster_port: {ret}\nid: {id}\nroot_dir: {root}\n\
             pki_dir: {root}/pki\ncachedir: {root}/cache\nsock_dir: {root}/sock\n\
             log_file: {root}/minion.log\nlog_level: info\nacceptance_wait_time: 1\n\
             recon_default: 100\nrecon_max: 1000\nrecon_randomize: false\nauth_timeout: 5\n\
             request_channel_timeout: 10\n{extra}\n",
            ret = self.ret_port,
            root = root.display(),
        );
        fs::write(root.join("etc/minion"), conf).unwrap();
        self.restart_minion(id);
    }

    /// Start the minion `id` again (stopping it first if it still runs).
    pub fn restart_minion(&mut self, id: &str) {
        if let Some(c) = self.minions.remove(id) {
            terminate(c);
        }
        let root = self.dir.path().join(format!("minion-{id}"));
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join("stderr"))
            .unwrap();
        let child = Command::new(bin("salt-minion"))
            .arg("-c")
            .arg(root.join("etc"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start salt-minion");
        self.minions.insert(id.to_string(), child);
    }

    pub fn kill_minion(&mut self, id: &str) {
        if let Some(mut c) = self.minions.remove(id) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Run one of the tools against this master.
    pub fn tool(&self, name: &str, args: &[&str]) -> Output {
        let mut cmd = Command::new(bin(name));
        cmd.arg("-c").arg(self.master_conf_dir());
        cmd.args(args);
        cmd.env("USER", whoami());
        cmd.stdin(Stdio::null());
        cmd.output().expect("run tool")
    }

    /// `salt ... --out json --static`, parsed.
    pub fn salt_json(&self, args: &[&str]) -> (serde_json::Value, i32) {
        let mut a = vec!["--out", "json", "--static"];
        a.extend_from_slice(args);
        let out = self.tool("salt", &a);
        let text = String::from_utf8_lossy(&out.stdout);
        let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
            panic!(
                "salt {args:?}: output is not JSON ({e}): {text}\nstderr: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.logs()
            )
        });
        (v, out.status.code().unwrap_or(-1))
    }

    /// Wait until `salt-key` shows these ids as pending.
    pub fn wait_pending(&self, ids: &[&str]) {
        wait_until(Duration::from_secs(60), || {
            let out = self.tool("salt-key", &["-l", "pre", "--out", "json"]);
            let v: serde_json::Value =
                serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
            let pre = v["minions_pre"].as_array().cloned().unwrap_or_default();
            ids.iter().all(|id| pre.iter().any(|p| p == id))
        })
        .unwrap_or_else(|| panic!("minions {ids:?} never became pending\n{}", self.logs()));
    }

    /// Wait until every id answers test.ping.
    /// Start a real salt-minion from `venv` signed in to this master (its directory is
    /// `minion-<id>`, as Brine's minions'); the caller keeps the process.
    pub fn start_real_minion(&self, venv: &Path, id: &str, extra: &str) -> real::Proc {
        let root = self.dir.path().join(format!("minion-{id}"));
        real::write_minion_conf(&root, id, self.ret_port, self.publish_port, extra);
        real::start_real_minion(venv, &root)
    }

    /// Wait for these minions' keys, accept them and wait until they answer.
    pub fn accept(&self, ids: &[&str]) {
        self.wait_pending(ids);
        for id in ids {
            assert!(self.tool("salt-key", &["-y", "-a", id]).status.success());
        }
        self.wait_answering(ids);
    }

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
                    "3",
                    "-L",
                    &list,
                    "test.ping",
                ],
            );
            let v: serde_json::Value =
                serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
            ids.iter().all(|id| v[id] == serde_json::Value::Bool(true))
        })
        .unwrap_or_else(|| panic!("minions {ids:?} never answered\n{}", self.logs()));
    }

    pub fn master_log(&self) -> String {
        fs::read_to_string(self.master_root().join("master.log")).unwrap_or_default()
    }

    /// A password or token that must not appear in any log of the stack.
    pub fn secret(&self, s: &str) {
        self.secrets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(s.to_string());
    }

    /// The stack's log files: salt-api's, the master's and each minion's.
    pub fn log_files(&self) -> Vec<PathBuf> {
        let mut files = vec![
            self.dir.path().join("api.stderr"),
            self.dir.path().join("master.stderr"),
            self.master_root().join("master.log"),
        ];
        if let Ok(rd) = fs::read_dir(self.dir.path()) {
            for e in rd.flatten() {
                let p = e.path();
                if p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("minion-"))
                {
                    files.push(p.join("minion.log"));
                    files.push(p.join("stderr"));
                }
            }
        }
        files
    }

    /// The registered secrets and the master's root key, each found in a log file.
    fn secrets_in_logs(&self) -> Vec<(String, PathBuf)> {
        let mut secrets = self
            .secrets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Ok(key) = fs::read_to_string(self.master_root().join("cache/.root_key")) {
            secrets.push(key.trim().to_string());
        }
        secrets.retain(|s| s.len() >= 6);
        let mut found = Vec::new();
        for f in self.log_files() {
            let Ok(text) = fs::read_to_string(&f) else {
                continue;
            };
            for s in &secrets {
                if text.contains(s.as_str()) {
                    found.push((s.clone(), f.clone()));
                }
            }
        }
        found
    }

    /// Every log of the stack, for failure reports.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        let files = self.log_files();
        for f in files {
            if let Ok(t) = fs::read_to_string(&f) {
                let tail: Vec<&str> = t.lines().rev().take(80).collect();
                s.push_str(&format!("===== {} (last lines)\n", f.display()));
                for l in tail.into_iter().rev() {
                    s.push_str(l);
                    s.push('\n');
                }
            }
        }
        s
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        self.stop_api();
        for (_, c) in std::mem::take(&mut self.minions) {
            terminate(c);
        }
        self.stop_master();
        if !std::thread::panicking() {
            let found = self.secrets_in_logs();
            assert!(
                found.is_empty(),
                "passwords, tokens or the root key in the logs: {found:?}\n{}",
                self.logs()
            );
        }
    }
}

/// SIGTERM, then SIGKILL after 5 s.
pub fn terminate(mut c: Child) {
    let pid = c.id() as i32;
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// Poll `f` every 200 ms until it holds or `limit` passes.
/// Live (not zombie) processes whose parent is `ppid`, with their command lines.
pub fn children_of(ppid: u32) -> Vec<(u32, String)> {
    let mut out = vec![];
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let mut f = rest.split_whitespace();
        let (state, parent) = (f.next(), f.next().and_then(|p| p.parse::<u32>().ok()));
        if parent == Some(ppid) && state != Some("Z") {
            let cmd = fs::read(e.path().join("cmdline")).unwrap_or_default();
            out.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    out
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
pub fn process_gone(pid: u32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')')
        .and_then(|(_, r)| r.split_whitespace().next())
        .is_none_or(|state| state == "Z")
}

/// The data of the first event tagged `tag` on the master's bus (connected as `stream`).
pub fn event_data(stream: &mut std::os::unix::net::UnixStream, tag: &str) -> serde_json::Value {
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut dec = brine_protocol::event::PubDecoder::new(1 << 20);
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Ok(n) = std::io::Read::read(stream, &mut buf) {
            assert!(n > 0, "the master's bus closed");
            dec.push(&buf[..n]);
        }
        while let Some(body) = dec.next_body().unwrap() {
            let (seen, data) = brine_protocol::event::unpack_body(&body).unwrap();
            if seen == tag {
                return brine_protocol::payload::to_json(&data);
            }
        }
    }
    panic!("no {tag} event on the master's bus");
}

/// A size line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`, ...), in KiB.
pub fn proc_kib(pid: u32, field: &str) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} of process {pid}"))
}

pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> Option<()> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return Some(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    f().then_some(())
}

/// A state or job return with machine-specific text replaced (`(from, to)` pairs, in keys
/// too) and what differs from run to run (`duration`, `start_time`, `pid`) left out.
pub fn normalize(v: &serde_json::Value, replace: &[(String, String)]) -> serde_json::Value {
    use serde_json::Value;
    let text = |s: &str| {
        replace.iter().fold(s.to_string(), |acc, (from, to)| {
            acc.replace(from.as_str(), to)
        })
    };
    match v {
        Value::String(s) => Value::String(text(s)),
        Value::Array(a) => Value::Array(a.iter().map(|x| normalize(x, replace)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "duration" | "start_time" | "pid"))
                .map(|(k, x)| (text(k), normalize(x, replace)))
                .collect(),
        ),
        other => other.clone(),
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The jid `salt --async` printed ("Executed command with job ID: <jid>").
pub fn async_jid(o: &Output) -> String {
    let text = stdout(o);
    text.trim()
        .strip_prefix("Executed command with job ID: ")
        .unwrap_or_else(|| panic!("no jid in {text:?}: {}", stderr(o)))
        .to_string()
}

pub fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_default()
}

/// Holds the machine's system files (apt's sources, locales, the time zone, alternatives,
/// installed packages) for a test that reads or changes them, until dropped: test binaries
/// run side by side, and the state cases of `state/tests/run.rs` change the files that
/// salt-call comparisons read. An exclusive `flock` on a file every test process shares.
pub fn system_files_lock() -> fs::File {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("brine-test-system-files.lock"))
        .expect("the system files' lock file");
    file.lock().expect("the system files' lock");
    file
}
