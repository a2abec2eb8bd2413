//! The minion's file client: the master's file server (`_file_envs`, `_file_list`,
//! `_file_hash`, `_serve_file`) with a cache under `cachedir/files/<saltenv>/`, checked against
//! the master's hash before a file is used again, as Salt's `RemoteClient` does. It is the
//! state tree `brine-state` renders and the source of `file.managed`. The file server is a
//! [`FileSource`]: the master on the minion's channel, or, on a masterless minion
//! (`salt-call --local`), the minion's own `file_roots` answering the same requests.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use brine_protocol::payload::{get, get_str, map, Value};
use brine_state::high::SlsFile;
use sha2::Digest;

use crate::channel::Channel;

/// Files larger than this are refused (a runaway master cannot fill the disk through us).
const MAX_FILE: u64 = 4 << 30;

/// Where the file server's requests (`_file_envs`, `_file_list`, `_serve_file`, ...) are
/// answered.
pub trait FileSource: Send + Sync {
    /// The answer to one file server request.
    fn request(&self, load: &Value) -> Result<Value, String>;
}

impl FileSource for Channel {
    fn request(&self, load: &Value) -> Result<Value, String> {
        Channel::request(self, load).map_err(|e| format!("the master did not answer: {e}"))
    }
}

/// The master's file server seen from one minion.
pub struct FileClient {
    channel: Arc<dyn FileSource>,
    cache: PathBuf,
    lists: Mutex<HashMap<String, Vec<String>>>,
    /// Files this client has checked against the master's hash: a job sees one version of
    /// each file of the master and asks for its hash once.
    verified: Mutex<HashMap<(String, String), PathBuf>>,
}

impl FileClient {
    pub fn new(channel: Arc<dyn FileSource>, cachedir: &Path) -> FileClient {
        FileClient {
            channel,
            cache: cachedir.join("files"),
            lists: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// One request to the file server.
    pub(crate) fn request(&self, load: Vec<(&str, Value)>) -> Result<Value, String> {
        self.channel.request(&map(load))
    }

    /// The saltenvs of the master's file server, `base` first.
    pub fn envs(&self) -> Result<Vec<String>, String> {
        let reply = self.request(vec![("cmd", Value::from("_file_envs"))])?;
        let mut envs: Vec<String> = match reply {
            Value::Array(items) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        envs.sort_by_key(|e| (e != "base", e.clone()));
        Ok(envs)
    }

    /// The files of `saltenv` (asked once per client).
    pub fn list(&self, saltenv: &str) -> Result<Vec<String>, String> {
        if let Some(l) = self.lists.lock().expect("list lock").get(saltenv) {
            return Ok(l.clone());
        }
        let reply = self.request(vec![
            ("cmd", Value::from("_file_list")),
            ("saltenv", Value::from(saltenv)),
            ("prefix", Value::from("")),
        ])?;
        let files: Vec<String> = match reply {
            Value::Array(items) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        self.lists
            .lock()
            .expect("list lock")
            .insert(saltenv.to_string(), files.clone());
        Ok(files)
    }

    /// Salt's `dir_list`: the directories of `saltenv` under `prefix`.
    pub fn dir_list(&self, saltenv: &str, prefix: &str) -> Result<Vec<String>, String> {
        let reply = self.request(vec![
            ("cmd", Value::from("_dir_list")),
            ("saltenv", Value::from(saltenv)),
            ("prefix", Value::from(prefix)),
        ])?;
        Ok(match reply {
            Value::Array(items) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        })
    }

    /// Salt's `symlink_list`: the symlinks of `saltenv` under `prefix`, each with its link text.
    pub fn symlink_list(
        &self,
        saltenv: &str,
        prefix: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let reply = self.request(vec![
            ("cmd", Value::from("_symlink_list")),
            ("saltenv", Value::from(saltenv)),
            ("prefix", Value::from(prefix)),
        ])?;
        Ok(match reply {
            Value::Map(entries) => entries
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
                .collect(),
            _ => Vec::new(),
        })
    }

    /// The master's hash of `path` (`{hsum, hash_type}`), an empty map when it has no such
    /// file.
    pub fn hash(&self, source: &str, saltenv: &str) -> Result<Value, String> {
        let (path, saltenv) = split_url(source, saltenv);
        self.request(vec![
            ("cmd", Value::from("_file_hash")),
            ("path", Value::from(path.as_str())),
            ("saltenv", Value::from(saltenv.as_str())),
        ])
    }

    /// Where `source` would be cached, if it is there.
    pub fn is_cached(&self, source: &str, saltenv: &str) -> Option<PathBuf> {
        let (path, saltenv) = split_url(source, saltenv);
        self.cache_path(&path, &saltenv).filter(|p| p.is_file())
    }

    /// Where `path` of `saltenv` is cached; `None` for a path that would leave the cache.
    fn cache_path(&self, path: &str, saltenv: &str) -> Option<PathBuf> {
        let rel = Path::new(path);
        let safe = |p: &Path| p.components().all(|c| matches!(c, Component::Normal(_)));
        (!path.is_empty() && safe(rel) && safe(Path::new(saltenv)))
            .then(|| self.cache.join(saltenv).join(rel))
    }

    /// `salt://path` (or `path`) of `saltenv` in the local cache, fetched when missing or
    /// when its hash differs from the master's; `None` when the master has no such file.
    pub fn cache_file(&self, source: &str, saltenv: &str) -> Result<Option<PathBuf>, String> {
        let (path, saltenv) = split_url(source, saltenv);
        let Some(local) = self.cache_path(&path, &saltenv) else {
            return Err(format!("Invalid path {path:?}"));
        };
        let key = (path.clone(), saltenv.clone());
        if let Some(known) = self.verified.lock().expect("verified lock").get(&key) {
            if known.is_file() {
                return Ok(Some(known.clone()));
            }
        }
        let hash = self.hash(&path, &saltenv)?;
        let Some(hsum) = get_str(&hash, "hsum") else {
            return Ok(None);
        };
        let verified = |local: PathBuf| {
            self.verified
                .lock()
                .expect("verified lock")
                .insert(key.clone(), local.clone());
            Ok(Some(local))
        };
        if let Ok(bytes) = std::fs::read(&local) {
            if hex::encode(sha2::Sha256::digest(&bytes)) == hsum {
                return verified(local);
            }
        }
        if let Some(dir) = local.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        // Chunks go straight to a private temp file, renamed into place once whole.
        let tmp = local.with_extension(format!("partial.{}", uuid::Uuid::new_v4().simple()));
        let fetched = self.fetch_into(&path, &saltenv, &tmp);
        match fetched {
            Ok(true) => std::fs::rename(&tmp, &local).map_err(|e| e.to_string())?,
            other => {
                let _ = std::fs::remove_file(&tmp);
                other?;
                return Ok(None);
            }
        }
        verified(local)
    }

    /// `_serve_file` chunk by chunk into `dest`; false when the master has no such file.
    fn fetch_into(&self, path: &str, saltenv: &str, dest: &Path) -> Result<bool, String> {
        use std::io::Write;
        let mut out = std::fs::File::create(dest).map_err(|e| e.to_string())?;
        let mut loc: u64 = 0;
        loop {
            let reply = self.request(vec![
                ("cmd", Value::from("_serve_file")),
                ("path", Value::from(path)),
                ("loc", Value::from(loc)),
                ("saltenv", Value::from(saltenv)),
            ])?;
            let chunk: &[u8] = match get(&reply, "data") {
                Some(Value::String(s)) => s.as_bytes(),
                Some(Value::Binary(b)) => b,
                _ => &[],
            };
            if chunk.is_empty() {
                return Ok(loc > 0 || !get_str(&reply, "dest").unwrap_or("").is_empty());
            }
            loc += chunk.len() as u64;
            if loc > MAX_FILE {
                return Err(format!("{path} is larger than {MAX_FILE} bytes"));
            }
            out.write_all(chunk).map_err(|e| e.to_string())?;
        }
    }

    /// The text of `path` in `saltenv`, `None` when the master has no such file.
    pub fn read_text(&self, path: &str, saltenv: &str) -> Result<Option<String>, String> {
        match self.cache_file(path, saltenv)? {
            Some(local) => std::fs::read_to_string(local)
                .map(Some)
                .map_err(|e| e.to_string()),
            None => Ok(None),
        }
    }
}

/// `salt://path?saltenv=env` split into the path and its saltenv.
pub fn split_url(source: &str, saltenv: &str) -> (String, String) {
    brine_state::url::split_salt_url(source, saltenv)
}

impl brine_render::Loader for FileClient {
    fn load(&self, saltenv: &str, path: &str) -> Result<Option<String>, String> {
        self.read_text(path, saltenv)
    }
}

impl brine_state::Tree for FileClient {
    fn sls_names(&self, saltenv: &str) -> Option<Vec<String>> {
        Some(brine_state::high::sls_names_of(&self.list(saltenv).ok()?))
    }

    fn sls_file(&self, sls: &str, saltenv: &str) -> Option<SlsFile> {
        let files = self.list(saltenv).ok()?;
        brine_state::high::sls_file_in(sls, |rel| files.iter().any(|f| f == rel))
    }
}
