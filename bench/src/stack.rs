//! One implementation's stack: a master, salt-api and two minions, with the same config for
//! Brine and Salt (only the ports and directories differ).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::procs::{sibling, spawn, Proc};
use brine_e2e::free_port;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub(crate) enum Kind {
    Brine,
    Salt,
}

/// Real Salt as the benchmark runs it: the release Brine reproduces.
pub(crate) static SALT_LABEL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("Salt {}", brine_protocol::SALT_VERSION));

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Brine => "Brine",
            Kind::Salt => SALT_LABEL.as_str(),
        }
    }

    pub(crate) fn slug(self) -> &'static str {
        match self {
            Kind::Brine => "brine",
            Kind::Salt => "salt",
        }
    }
}

pub(crate) const MINIONS: [&str; 2] = ["m1", "m2"];
/// The external_auth user of both stacks (`auto` eauth: any password).
pub(crate) const USER: &str = "bench";

pub(crate) struct Stack {
    pub kind: Kind,
    pub dir: PathBuf,
    pub ret_port: u16,
    pub api_port: u16,
    venv: Option<PathBuf>,
    master: Option<Proc>,
    api: Option<Proc>,
    minions: Vec<Proc>,
}

/// The master config both implementations get.
pub(crate) fn master_config(
    root: &Path,
    ret_port: u16,
    publish_port: u16,
    api_port: u16,
) -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    format!(
        "interface: 127.0.0.1\nret_port: {ret_port}\npublish_port: {publish_port}\n\
         root_dir: {r}\npki_dir: {r}/pki\ncachedir: {r}/cache\nsock_dir: {r}/sock\n\
         pidfile: {r}/master.pid\nlog_file: {r}/master.log\nlog_level: warning\n\
         api_logfile: {r}/api.log\napi_pidfile: {r}/api.pid\nuser: {user}\n\
         auto_accept: True\nworker_threads: 5\nkeep_jobs_seconds: 0\nmax_open_files: 100000\n\
         netapi_enable_clients: [local, local_async, runner, runner_async, wheel]\n\
         external_auth:\n  auto:\n    {USER}: ['.*', '@runner', '@wheel', '@jobs']\n\
         rest_cherrypy:\n  port: {api_port}\n  host: 127.0.0.1\n  disable_ssl: True\n  \
         thread_pool: 100\n",
        r = root.display()
    )
}

/// A minion config both implementations get.
pub(crate) fn minion_config(root: &Path, id: &str, ret_port: u16) -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    format!(
        "master: 127.0.0.1\nmaster_port: {ret_port}\nid: {id}\nroot_dir: {r}\n\
         pki_dir: {r}/pki\ncachedir: {r}/cache\nsock_dir: {r}/sock\npidfile: {r}/minion.pid\n\
         log_file: {r}/minion.log\nlog_level: warning\nacceptance_wait_time: 1\nuser: {user}\n",
        r = root.display()
    )
}

impl Stack {
    /// Write the configs under `root/<kind>`; nothing is started.
    pub(crate) fn create(kind: Kind, root: &Path, venv: Option<&Path>) -> anyhow::Result<Stack> {
        let dir = root.join(kind.slug());
        let (ret_port, publish_port, api_port) = (free_port(), free_port(), free_port());
        let m = dir.join("master");
        fs::create_dir_all(m.join("etc"))?;
        crate::tree::write(&m.join("srv"))?;
        fs::write(
            m.join("etc/master"),
            format!(
                "{}{}",
                master_config(&m, ret_port, publish_port, api_port),
                crate::tree::roots_config(&m.join("srv"))
            ),
        )?;
        for id in MINIONS {
            let d = dir.join(id);
            fs::create_dir_all(d.join("etc"))?;
            fs::write(d.join("etc/minion"), minion_config(&d, id, ret_port))?;
        }
        let st = Stack {
            kind,
            dir,
            ret_port,
            api_port,
            venv: venv.map(Path::to_path_buf),
            master: None,
            api: None,
            minions: vec![],
        };
        for n in ["salt-master", "salt-api", "salt-minion"] {
            let p = st.program(n)?;
            anyhow::ensure!(p.exists(), "{} is missing", p.display());
        }
        Ok(st)
    }

    /// The executable for one daemon or tool of this implementation.
    pub(crate) fn program(&self, name: &str) -> anyhow::Result<PathBuf> {
        match self.kind {
            Kind::Brine => sibling(name).ok_or_else(|| {
                anyhow::anyhow!(
                    "{name} is not built next to brine-bench (cargo build --workspace --bins)"
                )
            }),
            Kind::Salt => Ok(self
                .venv
                .as_ref()
                .ok_or_else(|| anyhow::anyhow!("no --salt-venv"))?
                .join("bin")
                .join(name)),
        }
    }

    pub(crate) fn master_root(&self) -> PathBuf {
        self.dir.join("master")
    }

    pub(crate) fn master_conf_dir(&self) -> PathBuf {
        self.master_root().join("etc")
    }

    /// The state and pillar tree the master serves (`salt/`, `pillar/`).
    pub(crate) fn srv(&self) -> PathBuf {
        self.master_root().join("srv")
    }

    pub(crate) fn cachedir(&self) -> PathBuf {
        self.master_root().join("cache")
    }

    /// Where the master keeps accepted minion keys.
    pub(crate) fn accepted_dir(&self) -> PathBuf {
        self.master_root().join("pki/minions")
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.api_port)
    }

    pub(crate) fn master_pid(&self) -> Option<u32> {
        self.master.as_ref().map(Proc::pid)
    }

    pub(crate) fn api_pid(&self) -> Option<u32> {
        self.api.as_ref().map(Proc::pid)
    }

    pub(crate) fn minion_pid(&self) -> Option<u32> {
        self.minions.first().map(Proc::pid)
    }

    pub(crate) fn running(&self) -> bool {
        self.master.is_some()
    }

    /// Start every daemon and wait for the first `test.ping` answered by both minions through
    /// the API. Returns the seconds that took, from the moment the daemons were started.
    pub(crate) fn start(&mut self) -> anyhow::Result<f64> {
        self.stop();
        let t0 = Instant::now();
        let conf = self.master_conf_dir();
        let c = conf.to_string_lossy().to_string();
        let m = self.master_root();
        self.master = Some(spawn(
            "master",
            &self.program("salt-master")?,
            &["-c", &c, "-l", "warning"],
            &m.join("master.stderr"),
        )?);
        self.api = Some(spawn(
            "api",
            &self.program("salt-api")?,
            &["-c", &c, "-l", "warning"],
            &m.join("api.stderr"),
        )?);
        for id in MINIONS {
            let d = self.dir.join(id);
            let mc = d.join("etc").to_string_lossy().to_string();
            self.minions.push(spawn(
                id,
                &self.program("salt-minion")?,
                &["-c", &mc, "-l", "warning"],
                &d.join("stderr"),
            )?);
        }
        self.wait_first_ping(t0)
    }

    /// Stop every daemon (minions first, then the API, then the master).
    pub(crate) fn stop(&mut self) {
        for p in self.minions.drain(..) {
            p.stop();
        }
        if let Some(p) = self.api.take() {
            p.stop();
        }
        if let Some(p) = self.master.take() {
            p.stop();
        }
    }

    fn check_alive(&mut self) -> anyhow::Result<()> {
        for p in [self.master.as_mut(), self.api.as_mut()]
            .into_iter()
            .flatten()
            .chain(self.minions.iter_mut())
        {
            if let Some(status) = p.exited() {
                anyhow::bail!(
                    "{} {} exited ({status}); logs under {}",
                    self.kind.name(),
                    p.name,
                    self.dir.display()
                );
            }
        }
        Ok(())
    }

    fn wait_first_ping(&mut self, t0: Instant) -> anyhow::Result<f64> {
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let deadline = t0 + Duration::from_secs(240);
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            self.check_alive()?;
            match login_blocking(&http, &self.url("/login")) {
                Ok(tok) => {
                    let r = http
                        .post(self.url("/"))
                        .header("X-Auth-Token", &tok)
                        .header("Accept", "application/json")
                        // A minion not yet subscribed misses the publish and the call waits for
                        // its timeout: a short one keeps that wait from dominating the figure.
                        .json(&json!({"client": "local", "tgt": "*", "fun": "test.ping", "timeout": 1}))
                        .send()
                        .and_then(|r| r.json::<Value>());
                    match r {
                        Ok(v) => {
                            let ok = v["return"][0].as_object().is_some_and(|m| {
                                MINIONS.iter().all(|id| m.get(*id) == Some(&json!(true)))
                            });
                            if ok {
                                return Ok(t0.elapsed().as_secs_f64());
                            }
                            last = format!("test.ping answered {v}");
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        anyhow::bail!(
            "{}: the stack never answered test.ping through the API ({last}); logs under {}",
            self.kind.name(),
            self.dir.display()
        )
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) fn login_blocking(
    http: &reqwest::blocking::Client,
    url: &str,
) -> Result<String, String> {
    let r = http
        .post(url)
        .header("Accept", "application/json")
        .json(&json!({"username": USER, "password": "x", "eauth": "auto"}))
        .send()
        .map_err(|e| e.to_string())?;
    let v: Value = r.json().map_err(|e| e.to_string())?;
    v["return"][0]["token"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no token: {v}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_yaml_with_the_shared_settings() {
        let m = serde_yaml_like(&master_config(Path::new("/r"), 1, 2, 3));
        assert_eq!(m["ret_port"], 1);
        assert_eq!(m["rest_cherrypy"]["port"], 3);
        assert_eq!(m["external_auth"]["auto"][USER][0], ".*");
        assert_eq!(m["auto_accept"], true);
        let n = serde_yaml_like(&minion_config(Path::new("/r"), "m1", 7));
        assert_eq!(n["master_port"], 7);
        assert_eq!(n["id"], "m1");
    }

    fn serde_yaml_like(text: &str) -> serde_json::Value {
        serde_yaml::from_str(text).expect("valid YAML")
    }
}
