//! A master the same scenario runs against, Brine's or a real salt-master 3007 (each with
//! its own tools), and what its event bus says.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use brine_protocol::event::{pack_body, pull_frame, unpack_body, PubDecoder};

use crate::real::RealMaster;
use crate::Stack;

/// Brine's master or a real salt-master 3007.
pub enum Master {
    Brine(Stack),
    Real(RealMaster),
}

impl Master {
    /// Where the minions' directories (`minion-<id>`) are.
    pub fn base(&self) -> PathBuf {
        match self {
            Master::Brine(st) => st.dir.path().to_path_buf(),
            Master::Real(rm) => rm.dir.path().to_path_buf(),
        }
    }

    /// Fire one event on the master's bus through its pull socket, as `salt-run event.send`
    /// does.
    pub fn fire(&self, tag: &str, data: &serde_json::Value) {
        let mut data = brine_protocol::payload::from_json(data);
        brine_protocol::payload::set(
            &mut data,
            "_stamp",
            rmpv::Value::from(brine_protocol::jid::stamp_now()),
        );
        let mut s = UnixStream::connect(self.root().join("sock/master_event_pull.ipc"))
            .expect("the master's pull socket");
        s.write_all(&pull_frame(&pack_body(tag, &data))).unwrap();
        s.flush().unwrap();
    }

    pub fn salt_json(&self, args: &[&str]) -> (serde_json::Value, i32) {
        match self {
            Master::Brine(st) => st.salt_json(args),
            Master::Real(rm) => rm.salt_json(args),
        }
    }

    pub fn tool(&self, name: &str, args: &[&str]) -> Output {
        match self {
            Master::Brine(st) => st.tool(name, args),
            Master::Real(rm) => rm.tool(name, args),
        }
    }

    pub fn logs(&self) -> String {
        match self {
            Master::Brine(st) => st.logs(),
            Master::Real(rm) => rm.logs(),
        }
    }

    /// The master's own directory (`cachedir` is its `cache/`, `sock_dir` its `sock/`).
    pub fn root(&self) -> PathBuf {
        match self {
            Master::Brine(st) => st.master_root(),
            Master::Real(rm) => rm.root(),
        }
    }

    /// The master's event bus, for reading what it publishes.
    pub fn bus(&self) -> UnixStream {
        let root = self.root();
        let bus = UnixStream::connect(root.join("sock/master_event_pub.ipc")).expect("event bus");
        bus.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("read timeout");
        bus
    }
}

/// The events read from `bus` until it has been quiet for `quiet`: (tag, data) in order.
pub fn events_until_quiet(
    bus: &mut UnixStream,
    quiet: Duration,
) -> Vec<(String, serde_json::Value)> {
    let mut dec = PubDecoder::new(1 << 20);
    let mut buf = [0u8; 65536];
    let mut out = Vec::new();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < quiet {
        if let Ok(n) = bus.read(&mut buf) {
            if n == 0 {
                break;
            }
            quiet_since = Instant::now();
            dec.push(&buf[..n]);
        }
        while let Ok(Some(body)) = dec.next_body() {
            if let Ok((tag, data)) = unpack_body(&body) {
                // Brine's tools' probes (see EventListener::connect) are not part of a story.
                if tag != brine_protocol::event::LISTENER_PROBE_TAG {
                    out.push((tag, brine_protocol::payload::to_json(&data)));
                }
            }
        }
    }
    out
}

impl Master {
    /// Brine's master (its configuration ending with `extra`) serving `<root>/srv/salt` and
    /// `<root>/srv/pillar`, with Brine minions `ids` whose keys are accepted and who answer.
    /// Before it starts, `setup(root)` writes what the test needs under the master's root and
    /// returns more configuration lines.
    pub fn brine_with_minions(
        extra: &str,
        ids: &[&str],
        setup: impl FnOnce(&std::path::Path) -> String,
    ) -> Master {
        let mut st = Stack::new(extra);
        let root = st.master_root();
        let more = setup(&root);
        let conf = st.master_conf_dir().join("master");
        let text = std::fs::read_to_string(&conf).unwrap();
        std::fs::write(
            &conf,
            format!(
                "{text}file_roots:\n  base: [{r}/srv/salt]\npillar_roots:\n  base: [{r}/srv/pillar]\n{more}",
                r = root.display()
            ),
        )
        .unwrap();
        st.start_master();
        for id in ids {
            st.start_minion(id, "");
        }
        st.wait_pending(ids);
        for id in ids {
            assert!(st.tool("salt-key", &["-y", "-a", id]).status.success());
        }
        st.wait_answering(ids);
        Master::Brine(st)
    }

    /// The same with a real salt-master 3007 from `venv` (which serves `<root>/srv/salt` and
    /// `<root>/srv/pillar` too).
    pub fn real_with_minions(
        venv: &std::path::Path,
        extra: &str,
        ids: &[&str],
        setup: impl FnOnce(&std::path::Path) -> String,
    ) -> Master {
        let mut rm = RealMaster::new(venv, extra);
        let root = rm.root();
        let more = setup(&root);
        let conf = rm.conf_dir().join("master");
        let text = std::fs::read_to_string(&conf).unwrap();
        std::fs::write(&conf, format!("{text}{more}")).unwrap();
        rm.start();
        for id in ids {
            rm.start_brine_minion(id, "");
        }
        rm.accept(ids);
        rm.wait_answering(ids);
        Master::Real(rm)
    }
}

/// Write `text` at `path`, its directories made first.
pub fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a file's directory")).unwrap();
    std::fs::write(path, text).unwrap();
}
