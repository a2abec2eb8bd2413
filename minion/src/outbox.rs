//! Returns the master has not taken yet, kept on disk (`cachedir/outbox/`) until it does.
//!
//! Salt's minion gives a return up after `return_retry_tries`; Brine's keeps it from its first
//! failed delivery on (so neither a master that stays away nor a minion restart loses it) and
//! delivers it once the master is back. The outbox is bounded: past [`MAX_RETURNS`] returns or
//! [`MAX_BYTES`] bytes the oldest are dropped, each with an error in the log.
//!
//! One file per return, named `<nanoseconds since the epoch>-<jid>` so that names sort by age,
//! written to a temporary name and renamed (a crash leaves a whole file or none), mode 0600 in a
//! 0700 directory: returns can hold secrets.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use brine_protocol::payload::{dumps, loads, Value};

/// Returns kept at most.
pub const MAX_RETURNS: usize = 1000;
/// Bytes of returns kept at most.
pub const MAX_BYTES: u64 = 64 * 1024 * 1024;

pub struct Outbox {
    dir: PathBuf,
    max_returns: usize,
    max_bytes: u64,
    /// Files a delivery is under way for (by the job that made them): not for the drain.
    busy: Mutex<HashSet<PathBuf>>,
}

impl Outbox {
    /// The outbox in directory `dir`, created if missing.
    pub fn open(dir: &Path) -> io::Result<Outbox> {
        Self::with_bounds(dir, MAX_RETURNS, MAX_BYTES)
    }

    fn with_bounds(dir: &Path, max_returns: usize, max_bytes: u64) -> io::Result<Outbox> {
        let dir = dir.to_path_buf();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        Ok(Outbox {
            dir,
            max_returns: max_returns.max(1),
            max_bytes,
            busy: Mutex::new(HashSet::new()),
        })
    }

    fn busy(&self) -> std::sync::MutexGuard<'_, HashSet<PathBuf>> {
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep `load` (the return of `jid`); the delivery under way holds it until [`Self::release`].
    pub fn keep(&self, jid: &str, load: &Value) -> io::Result<PathBuf> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("{nanos:024}-{}", crate::proc_dir::file_name(jid));
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let bytes = dumps(load);
        // Busy before it is visible, so the drain never sends it beside this delivery.
        self.busy().insert(path.clone());
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(&bytes)?;
                f.sync_all()
            })
            .and_then(|()| fs::rename(&tmp, &path));
        if let Err(e) = written {
            self.busy().remove(&path);
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.trim();
        Ok(path)
    }

    /// The delivery of a kept return is over: delivered (the file goes) or not (it stays for
    /// the drain).
    pub fn release(&self, path: &Path, delivered: bool) {
        self.busy().remove(path);
        if delivered {
            let _ = fs::remove_file(path);
        }
    }

    /// Returns waiting, oldest first, except those a delivery is under way for.
    pub fn waiting(&self) -> Vec<PathBuf> {
        let busy = self.busy().clone();
        self.files()
            .into_iter()
            .map(|(path, _)| path)
            .filter(|path| !busy.contains(path))
            .collect()
    }

    /// The return kept in `path`; a file that does not decode is dropped with an error.
    pub fn load(&self, path: &Path) -> Option<Value> {
        match loads(&fs::read(path).ok()?) {
            Ok(load) => Some(load),
            Err(e) => {
                tracing::error!("{} dropped: not a return ({e})", path.display());
                let _ = fs::remove_file(path);
                None
            }
        }
    }

    /// Kept returns and their sizes, oldest first.
    fn files(&self) -> Vec<(PathBuf, u64)> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<(PathBuf, u64)> = entries
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| Some((e.path(), e.metadata().ok()?.len())))
            .collect();
        files.sort();
        files
    }

    /// Drop the oldest returns beyond the bounds.
    fn trim(&self) {
        let files = self.files();
        let mut count = files.len();
        let mut bytes: u64 = files.iter().map(|(_, n)| n).sum();
        for (path, n) in files {
            if count <= self.max_returns && bytes <= self.max_bytes {
                break;
            }
            tracing::error!(
                "outbox full ({count} returns, {bytes} bytes): {} dropped undelivered",
                path.display()
            );
            let _ = fs::remove_file(&path);
            self.busy().remove(&path);
            count -= 1;
            bytes -= n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::payload::map;
    use std::os::unix::fs::PermissionsExt;

    fn ret(jid: &str) -> Value {
        map(vec![
            ("cmd", Value::from("_return")),
            ("jid", Value::from(jid)),
            ("return", Value::from("x".repeat(100))),
        ])
    }

    #[test]
    fn kept_returns_wait_oldest_first_once_released() {
        let d = tempfile::tempdir().unwrap();
        let outbox = Outbox::open(&d.path().join("outbox")).unwrap();
        let a = outbox.keep("20261127000000000001", &ret("1")).unwrap();
        let b = outbox.keep("../../etc/passwd", &ret("2")).unwrap();
        assert_eq!(b.parent().unwrap(), d.path().join("outbox"));
        assert!(b
            .file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with("-etcpasswd"));
        // Both are being delivered by their jobs: nothing for the drain yet.
        assert!(outbox.waiting().is_empty());
        outbox.release(&a, false);
        outbox.release(&b, false);
        let waiting = outbox.waiting();
        assert_eq!(waiting, vec![a.clone(), b.clone()]);
        assert_eq!(outbox.load(&a), Some(ret("1")));
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&a), 0o600);
        assert_eq!(mode(&d.path().join("outbox")), 0o700);
        // Delivered: gone, for this outbox and the next one opened on the directory.
        outbox.release(&a, true);
        let again = Outbox::open(&d.path().join("outbox")).unwrap();
        assert_eq!(again.waiting(), vec![b.clone()]);
        assert_eq!(again.load(&b), Some(ret("2")));
    }

    /// Keep `n` returns in an outbox of these bounds; what is left.
    fn fill(d: &tempfile::TempDir, max_returns: usize, max_bytes: u64, n: usize) -> Vec<Value> {
        let outbox = Outbox::with_bounds(d.path(), max_returns, max_bytes).unwrap();
        for n in 0..n {
            let p = outbox.keep("j", &ret(&n.to_string())).unwrap();
            outbox.release(&p, false);
        }
        outbox
            .waiting()
            .iter()
            .filter_map(|p| outbox.load(p))
            .collect()
    }

    #[test]
    fn the_outbox_is_bounded_in_returns_and_bytes() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(fill(&d, 3, 1 << 20, 5), vec![ret("2"), ret("3"), ret("4")]);

        let d = tempfile::tempdir().unwrap();
        let one = dumps(&ret("0")).len() as u64;
        assert_eq!(fill(&d, 100, 2 * one + 1, 4), vec![ret("2"), ret("3")]);
    }

    #[test]
    fn a_damaged_file_is_dropped_and_temporaries_are_ignored() {
        let d = tempfile::tempdir().unwrap();
        let outbox = Outbox::open(&d.path().join("outbox")).unwrap();
        let bad = d.path().join("outbox/000-bad");
        fs::write(&bad, b"\xc1").unwrap();
        fs::write(d.path().join("outbox/.001-half.tmp"), b"\x81").unwrap();
        assert_eq!(outbox.waiting(), vec![bad.clone()]);
        assert_eq!(outbox.load(&bad), None);
        assert!(!d.path().join("outbox/000-bad").exists());
    }
}
