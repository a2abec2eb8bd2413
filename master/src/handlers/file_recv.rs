//! `_file_recv`: the chunks of a file a minion pushes with `cp.push`, kept under
//! `cachedir/minions/<id>/files/<path on the minion>` when the master's `file_recv` allows it,
//! as Salt's master keeps them. The minion is the one that signed the request, never a name
//! the load carries.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use brine_protocol::loads::FileRecvLoad;
use brine_protocol::payload::Value;
use brine_protocol::posixpath::normpath;

use crate::master::Master;

impl Master {
    /// Store one chunk; `True` when it was written, `False` (Salt's answer) otherwise.
    pub(crate) fn on_file_recv(&self, id: &str, load: &Value) -> Value {
        Value::Boolean(match self.file_recv(id, load) {
            Ok(()) => true,
            Err(why) => {
                tracing::warn!("file pushed by {id} refused: {why}");
                false
            }
        })
    }

    fn file_recv(&self, id: &str, load: &Value) -> Result<(), String> {
        if !self.cfg.file_recv {
            return Err("file_recv is off".into());
        }
        let chunk = FileRecvLoad::parse(load).ok_or("not a _file_recv load")?;
        let loc = u64::try_from(chunk.loc).map_err(|_| "Invalid file pointer: load[loc] < 0")?;
        let max = self.cfg.file_recv_max_size.saturating_mul(1024 * 1024);
        if loc.saturating_add(chunk.data.len() as u64) > max {
            return Err(format!(
                "file_recv_max_size limit of {} MB exceeded: {:?}",
                self.cfg.file_recv_max_size, chunk.path
            ));
        }
        let rel = relative(&chunk.path)?;
        let root = self.cfg.cachedir.join("minions").join(id).join("files");
        let dest = root.join(&rel);
        let dir = dest.parent().ok_or("no directory")?;
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        inside(&root, dir)?;
        let mut file = if loc != 0 && dest.is_file() {
            // Salt opens an existing file for appending when the chunk is not the first.
            std::fs::OpenOptions::new().append(true).open(&dest)
        } else {
            std::fs::File::create(&dest)
        }
        .map_err(|e| e.to_string())?;
        if loc != 0 {
            file.seek(SeekFrom::Start(loc)).map_err(|e| e.to_string())?;
        }
        file.write_all(&chunk.data).map_err(|e| e.to_string())
    }
}

/// The pushed path as a relative path under the minion's directory: Salt joins the parts and
/// normalises them; a path that is absolute or climbs out is refused.
fn relative(parts: &[String]) -> Result<PathBuf, String> {
    if parts.iter().any(|p| p == "../" || p.contains('\0')) {
        return Err(format!("bad path {parts:?}"));
    }
    let joined = normpath(&parts.join("/"));
    if joined.starts_with('/') || joined == "." || joined == ".." || joined.starts_with("../") {
        return Err(format!("bad path {parts:?}"));
    }
    Ok(PathBuf::from(joined))
}

/// The directory written into, symlinks resolved, is inside the minion's directory.
fn inside(root: &Path, dir: &Path) -> Result<(), String> {
    let root = root.canonicalize().map_err(|e| e.to_string())?;
    let dir = dir.canonicalize().map_err(|e| e.to_string())?;
    if dir.starts_with(&root) {
        Ok(())
    } else {
        Err(format!(
            "Attempt to write received file outside of master cache directory: {}",
            dir.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::relative;

    #[test]
    fn pushed_paths_stay_under_the_minions_directory() {
        let parts = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            relative(&parts(&["etc", "hosts"])).unwrap().to_str(),
            Some("etc/hosts")
        );
        assert_eq!(
            relative(&parts(&["a", "..", "b"])).unwrap().to_str(),
            Some("b")
        );
        for bad in [
            &["..", "etc", "passwd"][..],
            &["a", "..", "..", "x"],
            &["/", "etc"],
            &["../"],
            &[],
            &["a\0b"],
        ] {
            assert!(relative(&parts(bad)).is_err(), "{bad:?}");
        }
    }
}
