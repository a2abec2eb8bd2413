//! Minion keys on disk, in Salt's layout: `pki_dir/{minions,minions_pre,minions_rejected,
//! minions_denied,minions_autosign}/<id>`, each file holding the minion's public key text.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use brine_protocol::crypt::{clean_key, pem_finger, HashType};
use brine_protocol::target::fnmatch;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    Accepted,
    Pending,
    Rejected,
    Denied,
}

impl KeyState {
    pub const ALL: [KeyState; 4] = [
        KeyState::Accepted,
        KeyState::Pending,
        KeyState::Rejected,
        KeyState::Denied,
    ];

    /// Directory name under `pki_dir`, which is also the key used in `key.list_all`.
    pub fn dir(self) -> &'static str {
        match self {
            KeyState::Accepted => "minions",
            KeyState::Pending => "minions_pre",
            KeyState::Rejected => "minions_rejected",
            KeyState::Denied => "minions_denied",
        }
    }

    /// Names accepted by `salt-key -l` / `key.list`.
    pub fn parse(s: &str) -> Option<KeyState> {
        match s {
            "acc" | "accepted" | "minions" => Some(KeyState::Accepted),
            "pre" | "un" | "unaccepted" | "minions_pre" => Some(KeyState::Pending),
            "rej" | "rejected" | "minions_rejected" => Some(KeyState::Rejected),
            "den" | "denied" | "minions_denied" => Some(KeyState::Denied),
            _ => None,
        }
    }
}

/// Why an id is refused: Salt refuses ids with `/`, `\` or NUL, and anything that would leave
/// `pki_dir` once joined to it; Brine also refuses ids longer than a file name may be.
pub fn invalid_id_reason(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        Some("id is empty")
    } else if id.contains('\0') {
        Some("id contains a null byte")
    } else if id.contains('/') || id.contains('\\') {
        Some("id contains a path separator")
    } else if id == "." || id == ".." {
        Some("id is a relative path component")
    } else if id.len() > 255 {
        Some("id is longer than 255 bytes")
    } else {
        None
    }
}

pub fn valid_id(id: &str) -> bool {
    invalid_id_reason(id).is_none()
}

#[derive(Debug, Clone)]
pub struct KeyStore {
    pki_dir: PathBuf,
    /// Accepted keys as last read, with the file's identity then: every request of a minion
    /// checks its key, which is read again only when the file changed (one `stat` instead of
    /// an open and a read).
    accepted: Arc<Mutex<HashMap<String, KnownKey>>>,
}

/// An accepted key as read, with the file's identity then.
type KnownKey = (FileStamp, Arc<str>);

/// What tells a file's versions apart: inode, size and modification time (a key is replaced
/// by a rename, so by a new inode, or written in place, so with a new time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

impl FileStamp {
    fn of(meta: &fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        }
    }
}

/// Accepted keys remembered at most (beyond, the memory starts over).
const REMEMBERED_KEYS: usize = 1 << 17;

impl KeyStore {
    pub fn open(pki_dir: &Path) -> io::Result<KeyStore> {
        for state in KeyState::ALL {
            fs::create_dir_all(pki_dir.join(state.dir()))?;
        }
        fs::create_dir_all(pki_dir.join("minions_autosign"))?;
        Ok(KeyStore {
            pki_dir: pki_dir.to_path_buf(),
            accepted: Arc::default(),
        })
    }

    pub fn pki_dir(&self) -> &Path {
        &self.pki_dir
    }

    fn path(&self, state: KeyState, id: &str) -> Option<PathBuf> {
        valid_id(id).then(|| self.pki_dir.join(state.dir()).join(id))
    }

    pub fn read(&self, state: KeyState, id: &str) -> Option<String> {
        fs::read_to_string(self.path(state, id)?).ok()
    }

    /// A minion's accepted key, `None` when it is not accepted: read again only when the file
    /// changed since the last call.
    pub fn read_accepted(&self, id: &str) -> Option<Arc<str>> {
        let path = self.path(KeyState::Accepted, id)?;
        let stamp = FileStamp::of(&fs::metadata(&path).ok().filter(|m| m.is_file())?);
        let lock = || self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, text)) = lock().get(id) {
            if *seen == stamp {
                return Some(text.clone());
            }
        }
        let text: Arc<str> = fs::read_to_string(&path).ok()?.into();
        let mut known = lock();
        if known.len() >= REMEMBERED_KEYS {
            known.clear();
        }
        known.insert(id.to_string(), (stamp, text.clone()));
        Some(text)
    }

    pub fn exists(&self, state: KeyState, id: &str) -> bool {
        self.path(state, id).is_some_and(|p| p.is_file())
    }

    /// The state a minion id is in (the first found, in Salt's order of precedence).
    pub fn state_of(&self, id: &str) -> Option<KeyState> {
        [
            KeyState::Rejected,
            KeyState::Accepted,
            KeyState::Pending,
            KeyState::Denied,
        ]
        .into_iter()
        .find(|s| self.exists(*s, id))
    }

    pub fn write(&self, state: KeyState, id: &str, pub_text: &str) -> io::Result<()> {
        let p = self
            .path(state, id)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "invalid minion id"))?;
        // A temporary name of this write's own: masters sharing the pki dir may accept the
        // same minion at the same moment, each then renaming its own complete file.
        let tmp = p.with_file_name(format!(
            ".{id}.{}.{:016x}.tmp",
            std::process::id(),
            rand::random::<u64>()
        ));
        fs::write(&tmp, pub_text)?;
        fs::rename(&tmp, p).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
    }

    pub fn remove(&self, state: KeyState, id: &str) -> io::Result<bool> {
        match self.path(state, id) {
            Some(p) => match fs::remove_file(p) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            },
            None => Ok(false),
        }
    }

    /// Ids in one state, sorted case-insensitively as Salt lists them.
    pub fn list(&self, state: KeyState) -> Vec<String> {
        let mut ids: Vec<String> = fs::read_dir(self.pki_dir.join(state.dir()))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        ids.sort_by_cached_key(|a| a.to_lowercase());
        ids
    }

    pub fn accepted(&self) -> Vec<String> {
        self.list(KeyState::Accepted)
    }

    /// Move a key from one state to another. Returns false if it was not in `from`.
    pub fn transition(&self, id: &str, from: KeyState, to: KeyState) -> io::Result<bool> {
        let Some(text) = self.read(from, id) else {
            return Ok(false);
        };
        self.write(to, id, &text)?;
        self.remove(from, id)?;
        Ok(true)
    }

    /// Consume a `minions_autosign/<id>` stub if one exists and is younger than `timeout`.
    pub fn take_autosign_stub(&self, id: &str, timeout: std::time::Duration) -> bool {
        if !valid_id(id) {
            return false;
        }
        let p = self.pki_dir.join("minions_autosign").join(id);
        let fresh = fs::metadata(&p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age <= timeout);
        let existed = p.exists();
        if existed {
            let _ = fs::remove_file(&p);
        }
        existed && fresh
    }

    /// Fingerprint of a stored key, as `salt-key -f`.
    pub fn finger(&self, state: KeyState, id: &str, hash: HashType) -> Option<String> {
        self.read(state, id).map(|t| pem_finger(&t, hash))
    }

    /// Keys matching a glob (or a comma-separated list of globs), by state, in Salt's order.
    pub fn name_match(&self, pattern: &str) -> Vec<(KeyState, Vec<String>)> {
        let pats: Vec<&str> = pattern.split(',').map(str::trim).collect();
        KeyState::ALL
            .iter()
            .filter_map(|state| {
                let hits: Vec<String> = self
                    .list(*state)
                    .into_iter()
                    .filter(|id| pats.iter().any(|p| fnmatch(p, id)))
                    .collect();
                (!hits.is_empty()).then_some((*state, hits))
            })
            .collect()
    }

    /// `.pem` and `.pub` files of the master itself.
    pub fn local_keys(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.pki_dir)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| n.ends_with(".pem") || n.ends_with(".pub"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by_cached_key(|a| a.to_lowercase());
        v
    }

    /// Accept the keys matching `pattern` that are pending (and, if asked, rejected or
    /// denied). Returns the ids accepted. Keys that do not parse as RSA keys are skipped.
    pub fn accept(&self, pattern: &str, from: &[KeyState]) -> Vec<String> {
        let mut done = Vec::new();
        for (state, ids) in self.name_match(pattern) {
            if state == KeyState::Accepted || !from.contains(&state) {
                continue;
            }
            for id in ids {
                let valid = self
                    .read(state, &id)
                    .is_some_and(|t| brine_protocol::crypt::PublicKey::from_pem(&t).is_ok());
                if !valid {
                    tracing::error!("Unable to accept invalid key for {id}.");
                    continue;
                }
                if self
                    .transition(&id, state, KeyState::Accepted)
                    .unwrap_or(false)
                {
                    done.push(id);
                }
            }
        }
        done
    }

    /// Reject the keys matching `pattern` found in the `from` states. Returns the ids
    /// rejected and whether any of them was accepted (the AES key must then rotate).
    pub fn reject(&self, pattern: &str, from: &[KeyState]) -> (Vec<String>, bool) {
        let mut done = Vec::new();
        let mut was_accepted = false;
        for (state, ids) in self.name_match(pattern) {
            if state == KeyState::Rejected || !from.contains(&state) {
                continue;
            }
            for id in ids {
                if self
                    .transition(&id, state, KeyState::Rejected)
                    .unwrap_or(false)
                {
                    was_accepted |= state == KeyState::Accepted;
                    done.push(id);
                }
            }
        }
        (done, was_accepted)
    }

    /// Delete the keys matching `pattern`, whatever their state. Returns the ids deleted and
    /// whether any of them was accepted.
    pub fn delete(&self, pattern: &str) -> (Vec<String>, bool) {
        let mut done = Vec::new();
        let mut was_accepted = false;
        for (state, ids) in self.name_match(pattern) {
            for id in ids {
                if self.remove(state, &id).unwrap_or(false) {
                    was_accepted |= state == KeyState::Accepted;
                    done.push(id);
                }
            }
        }
        (done, was_accepted)
    }

    /// Ask a running master to rotate its AES key, as Salt's key tools do: the drop file
    /// `cachedir/.dfn` (mode 0400) holding the master id.
    pub fn write_dropfile(cachedir: &Path, master_id: &str) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let p = cachedir.join(".dfn");
        let _ = fs::remove_file(&p);
        fs::write(&p, master_id)?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o400))
    }

    /// Do two key texts denote the same key, as Salt compares them?
    pub fn same_key(a: &str, b: &str) -> bool {
        clean_key(a) == clean_key(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        assert!(valid_id("web-1.example.com"));
        for bad in ["", "a/b", "a\\b", "..", ".", "a\0b"] {
            assert!(!valid_id(bad), "{bad:?}");
        }
    }

    /// Two masters sharing the pki dir accept one minion at the same moment: both writes
    /// succeed and the key is whole.
    #[test]
    fn masters_sharing_the_pki_dir_write_one_key_at_once() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (
            KeyStore::open(d.path()).unwrap(),
            KeyStore::open(d.path()).unwrap(),
        );
        std::thread::scope(|s| {
            for ks in [&a, &b] {
                s.spawn(move || {
                    for _ in 0..200 {
                        ks.write(KeyState::Accepted, "m1", "KEY").unwrap();
                    }
                });
            }
        });
        assert_eq!(a.read(KeyState::Accepted, "m1").as_deref(), Some("KEY"));
        assert_eq!(a.list(KeyState::Accepted), vec!["m1"]);
        let left: Vec<_> = fs::read_dir(d.path().join("minions")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left");
    }

    #[test]
    fn an_accepted_key_is_read_again_once_it_changed() {
        let d = tempfile::tempdir().unwrap();
        let ks = KeyStore::open(d.path()).unwrap();
        assert_eq!(ks.read_accepted("m1"), None);
        ks.write(KeyState::Accepted, "m1", "KEY1").unwrap();
        assert_eq!(ks.read_accepted("m1").as_deref(), Some("KEY1"));
        assert_eq!(ks.read_accepted("m1").as_deref(), Some("KEY1"));
        // Replaced (a rename, as another master sharing the dir writes it), then in place.
        ks.write(KeyState::Accepted, "m1", "KEY2").unwrap();
        assert_eq!(ks.read_accepted("m1").as_deref(), Some("KEY2"));
        fs::write(d.path().join("minions/m1"), "KEY3-longer").unwrap();
        assert_eq!(ks.read_accepted("m1").as_deref(), Some("KEY3-longer"));
        // Deleted or rejected elsewhere: not accepted any more.
        ks.transition("m1", KeyState::Accepted, KeyState::Rejected)
            .unwrap();
        assert_eq!(ks.read_accepted("m1"), None);
        assert_eq!(ks.read_accepted("../m1"), None);
    }

    #[test]
    fn states_and_transitions() {
        let d = tempfile::tempdir().unwrap();
        let ks = KeyStore::open(d.path()).unwrap();
        ks.write(KeyState::Pending, "m2", "K2").unwrap();
        ks.write(KeyState::Pending, "M1", "K1").unwrap();
        assert_eq!(ks.list(KeyState::Pending), vec!["M1", "m2"]);
        assert!(ks
            .transition("m2", KeyState::Pending, KeyState::Accepted)
            .unwrap());
        assert_eq!(ks.state_of("m2"), Some(KeyState::Accepted));
        assert_eq!(ks.read(KeyState::Accepted, "m2").as_deref(), Some("K2"));
        assert!(!ks
            .transition("nope", KeyState::Pending, KeyState::Accepted)
            .unwrap());
        assert!(ks.write(KeyState::Pending, "../x", "K").is_err());
        assert!(ks.remove(KeyState::Accepted, "m2").unwrap());
        assert_eq!(ks.state_of("m2"), None);
    }
}
