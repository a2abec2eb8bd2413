//! `cachedir/proc/`: one file per job while it runs, as Salt's minion keeps them, holding the
//! job's publish load. The file goes once the job's return is delivered or kept in the outbox;
//! a file still there when the minion starts is a job the last minion process died in (killed,
//! crashed, restarted): the minion answers it with a failed return, so the job shows a failure
//! for this minion instead of nothing. The master keeps the first return of a minion for a job,
//! so such a failure never replaces a real return delivered just before the process died.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use brine_protocol::loads::PublishLoad;
use brine_protocol::payload::{dumps, loads};

pub struct ProcDir {
    dir: PathBuf,
}

/// A job's file being written; [`ProcDir::finish`] removes it.
pub struct Started(tokio::task::JoinHandle<PathBuf>);

fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(bytes)
}

/// The file name for a jid: its letters, digits and `_` (a jid is digits; anything else the
/// master sent cannot climb out of the directory).
pub(crate) fn file_name(jid: &str) -> String {
    let name: String = jid
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    if name.is_empty() {
        "_".into()
    } else {
        name
    }
}

impl ProcDir {
    pub fn open(cachedir: &Path) -> io::Result<ProcDir> {
        let dir = cachedir.join("proc");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        Ok(ProcDir { dir })
    }

    /// A job starts: its file is written on a blocking thread while the job runs (off its
    /// critical path). A file torn by a crash is dropped by [`ProcDir::left_over`].
    pub fn start(&self, load: &PublishLoad) -> Started {
        let path = self.dir.join(file_name(&load.jid));
        let bytes = dumps(&load.to_value());
        let jid = load.jid.clone();
        Started(tokio::task::spawn_blocking(move || {
            if let Err(e) = write(&path, &bytes) {
                tracing::warn!("job {jid} not recorded in the proc directory: {e}");
            }
            path
        }))
    }

    /// A job's return is delivered or kept: its file goes, once written.
    pub async fn finish(&self, started: Started) {
        if let Ok(path) = started.0.await {
            let _ = tokio::task::spawn_blocking(move || fs::remove_file(path)).await;
        }
    }

    /// A left-over job is answered: its file goes.
    pub fn remove(&self, jid: &str) {
        let _ = fs::remove_file(self.dir.join(file_name(jid)));
    }

    /// The jobs of a previous minion process, before this one starts any: every file there.
    /// A file that does not hold a publish load is removed with a warning.
    pub fn left_over(&self) -> Vec<PublishLoad> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut jobs = Vec::new();
        for e in entries.flatten() {
            let path = e.path();
            if e.file_name().to_string_lossy().starts_with('.') {
                let _ = fs::remove_file(&path);
                continue;
            }
            let load = fs::read(&path)
                .ok()
                .and_then(|b| loads(&b).ok())
                .and_then(|v| PublishLoad::parse(v).ok());
            match load {
                Some(load) => jobs.push(load),
                None => {
                    tracing::warn!("{} removed: not a job", path.display());
                    let _ = fs::remove_file(&path);
                }
            }
        }
        jobs.sort_by(|a, b| a.jid.cmp(&b.jid));
        jobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::payload::{map, Value};

    fn job(jid: &str) -> PublishLoad {
        PublishLoad::parse(map(vec![
            ("fun", Value::from("test.sleep")),
            ("arg", Value::Array(vec![Value::from(5)])),
            ("tgt", Value::from("web1")),
            ("tgt_type", Value::from("glob")),
            ("jid", Value::from(jid)),
            ("ret", Value::from("")),
            ("user", Value::from("root")),
        ]))
        .unwrap()
    }

    #[tokio::test]
    async fn running_jobs_are_on_disk_until_finished() {
        let d = tempfile::tempdir().unwrap();
        let procs = ProcDir::open(d.path()).unwrap();
        let second = procs.start(&job("20261127000000000002"));
        let first = procs.start(&job("20261127000000000001"));
        let odd = procs.start(&job("../../x"));
        procs.finish(second).await;
        // Written while the jobs run: the files of the running ones are there.
        first.0.await.unwrap();
        odd.0.await.unwrap();
        assert!(d.path().join("proc/x").exists());
        assert!(!d.path().join("proc/20261127000000000002").exists());
        // The next process finds the others, oldest first, with their loads.
        let next = ProcDir::open(d.path()).unwrap();
        let left = next.left_over();
        let jids: Vec<&str> = left.iter().map(|l| l.jid.as_str()).collect();
        assert_eq!(jids, ["../../x", "20261127000000000001"]);
        assert_eq!(left[1].to_value(), job("20261127000000000001").to_value());
    }

    #[test]
    fn damaged_files_are_removed() {
        let d = tempfile::tempdir().unwrap();
        let procs = ProcDir::open(d.path()).unwrap();
        fs::write(d.path().join("proc/junk"), b"\x81\xa1a\x01").unwrap();
        fs::write(d.path().join("proc/.half.tmp"), b"\x81").unwrap();
        fs::write(d.path().join("proc/20261127000000000003"), b"").unwrap();
        assert!(procs.left_over().is_empty());
        assert_eq!(fs::read_dir(d.path().join("proc")).unwrap().count(), 0);
    }
}
