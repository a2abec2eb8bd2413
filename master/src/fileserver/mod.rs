//! The master's file server, `roots` backend: the files under `file_roots`, by saltenv, as
//! minions fetch them (`salt://` URLs) through the `_file_*`, `_dir_list`, `_symlink_list`
//! and `_serve_file` requests.
//!
//! - [`path`]: what a requested path may name (the safety rules).
//! - [`walk`]: the file lists of a saltenv.
//! - [`gzip`]: the compressed form of a served chunk.
//!
//! File lists and hashes are cached and checked against modification times on every use, so
//! a changed tree is seen at once; `fileserver.update` and `fileserver.clear_cache` drop them.

pub mod gzip;
pub mod path;
pub mod walk;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use brine_protocol::config::MasterConfig;
use brine_protocol::crypt::{hash_reader, HashType};
use brine_protocol::target::fnmatch;

pub use walk::Lists;

/// `file_ignore_regex` and `file_ignore_glob`.
pub struct Ignore {
    regex: Vec<regex::Regex>,
    glob: Vec<String>,
}

impl Ignore {
    pub fn new(regex: &[String], glob: &[String]) -> Ignore {
        let regex = regex
            .iter()
            .filter_map(|r| match regex::Regex::new(r) {
                Ok(re) => Some(re),
                Err(e) => {
                    tracing::warn!("file_ignore_regex {r:?} ignored: {e}");
                    None
                }
            })
            .collect();
        Ignore {
            regex,
            glob: glob.to_vec(),
        }
    }

    /// Salt's `is_file_ignored`: any regex found in `name`, or any glob matching it.
    pub fn matches(&self, name: &str) -> bool {
        self.regex.iter().any(|r| r.is_match(name)) || self.glob.iter().any(|g| fnmatch(g, name))
    }
}

/// A file found for a request.
#[derive(Debug, Clone)]
pub struct Found {
    /// The root joined with the relative path (what Salt reports as `path`).
    pub path: String,
    /// The normalized relative path (`rel`, the `dest` of served chunks).
    pub rel: String,
    /// The canonical file actually read.
    pub real: PathBuf,
    /// `os.stat` of it, as Salt's list of ten integers.
    pub stat: [i64; 10],
}

/// One chunk of a served file.
#[derive(Debug)]
pub struct Chunk {
    pub dest: String,
    pub data: Vec<u8>,
    /// The gzip level the data is compressed for, when it is.
    pub gzip: Option<i64>,
}

type HashKey = (PathBuf, &'static str);

/// Saltenvs whose file lists are kept at once.
const MAX_CACHED_SALTENVS: usize = 256;

/// Files whose hashes are kept at once.
const MAX_CACHED_HASHES: usize = 100_000;
type HashStamp = (i64, i64, u64, u64);

pub struct FileServer {
    roots: BTreeMap<String, Vec<String>>,
    ignore: Ignore,
    follow: bool,
    ignore_links: bool,
    buffer: u64,
    hash: HashType,
    lists: Mutex<HashMap<String, Arc<Lists>>>,
    hashes: Mutex<HashMap<HashKey, (HashStamp, String)>>,
    /// Each root as configured → canonicalized, resolved once (dropped by [`FileServer::clear`]).
    canonical: Mutex<HashMap<PathBuf, PathBuf>>,
}

impl FileServer {
    /// The file server of `file_roots`.
    pub fn new(cfg: &MasterConfig) -> FileServer {
        FileServer::over(cfg, cfg.file_roots.clone())
    }

    /// A file server over other roots (the pillar's `pillar_roots`), with `cfg`'s other
    /// file server options.
    pub fn over(cfg: &MasterConfig, roots: BTreeMap<String, Vec<String>>) -> FileServer {
        let hash = HashType::parse(&cfg.hash_type).unwrap_or_else(|| {
            tracing::warn!("hash_type {} unknown, using sha256", cfg.hash_type);
            HashType::Sha256
        });
        FileServer {
            roots,
            ignore: Ignore::new(&cfg.file_ignore_regex, &cfg.file_ignore_glob),
            follow: cfg.fileserver_followsymlinks,
            ignore_links: cfg.fileserver_ignoresymlinks,
            // A chunk is one message: keep it well below any request size limit.
            buffer: cfg.file_buffer_size.min(64 * 1024 * 1024),
            hash,
            lists: Mutex::default(),
            hashes: Mutex::default(),
            canonical: Mutex::default(),
        }
    }

    /// `root` canonicalized (symlinks in the root's own path resolved), remembered.
    fn canonical_root(&self, root: &Path) -> Option<PathBuf> {
        let mut known = self.canonical.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = known.get(root) {
            return Some(c.clone());
        }
        let c = root.canonicalize().ok()?;
        // `__env__` roots are named by minions: keep the map bounded.
        if known.len() >= MAX_CACHED_SALTENVS * 4 {
            known.clear();
        }
        known.insert(root.to_path_buf(), c.clone());
        Some(c)
    }

    /// The saltenvs, sorted (`_file_envs`).
    pub fn envs(&self) -> Vec<String> {
        self.roots.keys().cloned().collect()
    }

    pub fn hash_type(&self) -> &'static str {
        self.hash.as_str()
    }

    /// The roots of `saltenv` (`__env__` stands for any saltenv not configured, with its
    /// name put in place of `__env__` in the root paths); `None` for an unknown saltenv.
    pub fn roots_of(&self, saltenv: &str) -> Option<Vec<PathBuf>> {
        if let Some(dirs) = self.roots.get(saltenv) {
            return Some(dirs.iter().map(PathBuf::from).collect());
        }
        let dirs = self.roots.get("__env__")?;
        path::plain_saltenv(saltenv).then(|| {
            dirs.iter()
                .map(|d| PathBuf::from(d.replace("__env__", saltenv)))
                .collect()
        })
    }

    /// The file lists of `saltenv`, from the cache while it is current; `None` for an unknown
    /// saltenv.
    pub fn lists(&self, saltenv: &str) -> Option<Arc<Lists>> {
        let roots = self.roots_of(saltenv)?;
        if let Some(hit) = self.lock_lists().get(saltenv) {
            if hit.current() {
                return Some(hit.clone());
            }
        }
        let fresh = Arc::new(walk::walk(
            &roots,
            &self.ignore,
            self.follow,
            self.ignore_links,
        ));
        let mut lists = self.lock_lists();
        // `__env__` lets minions name any saltenv: keep the cache bounded.
        if lists.len() >= MAX_CACHED_SALTENVS {
            lists.clear();
        }
        lists.insert(saltenv.to_string(), fresh.clone());
        Some(fresh)
    }

    fn lock_lists(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Lists>>> {
        self.lists.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drop every cached list and hash; what was cached (`fileserver.clear_cache`).
    pub fn clear(&self) -> usize {
        let mut lists = self.lock_lists();
        let n = lists.len();
        lists.clear();
        self.hashes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.canonical
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        n
    }

    /// The file `path` names in `saltenv` (first root first), if any: Salt's `find_file`
    /// with the refusals of [`path`].
    pub fn find(&self, path: &str, saltenv: &str) -> Option<Found> {
        let (path, query_env) = path::split_query(path);
        let saltenv = query_env.unwrap_or(saltenv);
        let rel = path::clean_relative(path)?;
        for root in self.roots_of(saltenv)? {
            let full = root.join(&rel);
            let full_text = full.to_string_lossy().into_owned();
            if self.ignore.matches(&full_text) {
                continue;
            }
            let Some(croot) = self.canonical_root(&root) else {
                continue;
            };
            let Some((real, meta)) = path::resolve_in_root(&croot, &rel) else {
                continue;
            };
            let stat = [
                i64::from(meta.mode()),
                meta.ino() as i64,
                meta.dev() as i64,
                meta.nlink() as i64,
                i64::from(meta.uid()),
                i64::from(meta.gid()),
                meta.size() as i64,
                meta.atime(),
                meta.mtime(),
                meta.ctime(),
            ];
            return Some(Found {
                path: full_text,
                rel,
                real,
                stat,
            });
        }
        None
    }

    /// Open a found file for reading without following a symlink put in its place since,
    /// and check it is still a regular file inside a root of `saltenv`.
    fn open(&self, found: &Found) -> Option<std::fs::File> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&found.real)
            .ok()?;
        file.metadata().ok()?.is_file().then_some(file)
    }

    /// The hex digest of a found file in `hash_type`, cached by (mtime, size, inode).
    pub fn hash(&self, found: &Found) -> Option<String> {
        let file = self.open(found)?;
        let meta = file.metadata().ok()?;
        let stamp = (meta.mtime(), meta.mtime_nsec(), meta.size(), meta.ino());
        let key = (found.real.clone(), self.hash.as_str());
        if let Some((s, h)) = self
            .hashes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            if *s == stamp {
                return Some(h.clone());
            }
        }
        let hsum = hash_reader(file, self.hash).ok()?;
        let mut hashes = self.hashes.lock().unwrap_or_else(|e| e.into_inner());
        if hashes.len() >= MAX_CACHED_HASHES {
            hashes.clear();
        }
        hashes.insert(key, (stamp, hsum.clone()));
        Some(hsum)
    }

    /// The chunk of `path` at `loc`: at most `file_buffer_size` bytes, read from that offset
    /// alone (the whole file is never read), gzipped when `gzip` asks.
    pub fn serve(&self, path: &str, saltenv: &str, loc: u64, gzip: Option<i64>) -> Option<Chunk> {
        let found = self.find(path, saltenv)?;
        let mut file = self.open(&found)?;
        file.seek(SeekFrom::Start(loc)).ok()?;
        let mut data = Vec::new();
        file.take(self.buffer).read_to_end(&mut data).ok()?;
        let gzip = gzip.filter(|_| !data.is_empty());
        if gzip.is_some() {
            data = gzip::compress(&data);
        }
        Some(Chunk {
            dest: found.rel,
            data,
            gzip,
        })
    }
}

/// The largest file read whole to be rendered (an `.sls`, a template, a pillar file).
pub const MAX_TEMPLATE_SIZE: u64 = 64 * 1024 * 1024;

pub use brine_state::high::SlsFile;

impl FileServer {
    /// The text of `path` in `saltenv`: `Ok(None)` when there is no such file, an error when
    /// it cannot be read, is larger than [`MAX_TEMPLATE_SIZE`] or is not UTF-8.
    pub fn read_text(&self, path: &str, saltenv: &str) -> Result<Option<String>, String> {
        let Some(bytes) = self.read(path, saltenv)? else {
            return Ok(None);
        };
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| format!("{path} is not UTF-8 text"))
    }

    /// The bytes of `path` in `saltenv`: `Ok(None)` when there is no such file, an error when
    /// it cannot be read or is larger than [`MAX_TEMPLATE_SIZE`].
    pub fn read(&self, path: &str, saltenv: &str) -> Result<Option<Vec<u8>>, String> {
        let Some(found) = self.find(path, saltenv) else {
            return Ok(None);
        };
        let file = self
            .open(&found)
            .ok_or_else(|| format!("{path} cannot be opened"))?;
        let mut bytes = Vec::new();
        file.take(MAX_TEMPLATE_SIZE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{path}: {e}"))?;
        if bytes.len() as u64 > MAX_TEMPLATE_SIZE {
            return Err(format!("{path} is larger than {MAX_TEMPLATE_SIZE} bytes"));
        }
        Ok(Some(bytes))
    }

    /// Salt's `list_states`: the SLS names of `saltenv` (`a/b.sls` is `a.b`, `a/init.sls`
    /// is `a`), in file list order.
    pub fn sls_names(&self, saltenv: &str) -> Option<Vec<String>> {
        let lists = self.lists(saltenv)?;
        Some(
            lists
                .files
                .iter()
                .filter_map(|f| {
                    let stem = f.strip_suffix(".sls")?;
                    let stem = stem.strip_suffix("/init").unwrap_or(stem);
                    Some(stem.replace('/', "."))
                })
                .collect(),
        )
    }

    /// Salt's `get_state`: the file of SLS `sls` in `saltenv`, `a/b.sls` before
    /// `a/b/init.sls`.
    pub fn sls_file(&self, sls: &str, saltenv: &str) -> Option<SlsFile> {
        let base = sls.replace('.', "/");
        [
            (format!("{base}.sls"), false),
            (format!("{base}/init.sls"), true),
        ]
        .into_iter()
        .find(|(rel, _)| self.find(rel, saltenv).is_some())
        .map(|(rel, init)| SlsFile { rel, init })
    }
}

impl brine_render::Loader for FileServer {
    fn load(&self, saltenv: &str, path: &str) -> Result<Option<String>, String> {
        self.read_text(path, saltenv)
    }
}

impl brine_state::Tree for FileServer {
    fn sls_names(&self, saltenv: &str) -> Option<Vec<String>> {
        FileServer::sls_names(self, saltenv)
    }

    fn sls_file(&self, sls: &str, saltenv: &str) -> Option<SlsFile> {
        FileServer::sls_file(self, sls, saltenv)
    }
}

#[cfg(test)]
mod tests;
