//! The minion data cache: each minion's grains and pillar as it last reported them (through
//! `_pillar`), kept in memory and in `cachedir/minions/<id>/data.p` (Salt's layout), so that
//! grain targeting works from the master; and each minion's mine (`_mine` requests), in
//! `cachedir/minions/<id>/mine.p`.
//!
//! An entry is kept in memory as the msgpack of `data.p` (a few KiB for a real minion's
//! grains, several times that as a tree) and decoded when read. A minion that reports the same
//! grains and pillar again, as every minion does at each start, leaves its file as it was.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use brine_protocol::payload::{dumps_bin, loads, map, map_field, map_fields, Value};

#[derive(Clone, Default)]
pub struct MinionData {
    pub grains: Option<Value>,
    pub pillar: Option<Value>,
}

pub struct DataCache {
    dir: PathBuf,
    enabled: bool,
    /// Each minion's `data.p`: a msgpack map of `grains` and `pillar`.
    entries: RwLock<HashMap<String, Arc<[u8]>>>,
    /// Each minion's mine: a map of function (or alias) to its last result.
    mines: RwLock<HashMap<String, Value>>,
}

impl DataCache {
    /// Open the cache under `cachedir/minions`, loading what earlier runs stored.
    pub fn open(cachedir: &Path, enabled: bool) -> DataCache {
        let dir = cachedir.join("minions");
        let mut entries = HashMap::new();
        let mut mines = HashMap::new();
        if enabled {
            if let Ok(rd) = fs::read_dir(&dir) {
                for e in rd.flatten() {
                    let Ok(id) = e.file_name().into_string() else {
                        continue;
                    };
                    if let Ok(Ok(mine @ Value::Map(_))) =
                        fs::read(e.path().join("mine.p")).map(|b| loads(&b))
                    {
                        mines.insert(id.clone(), mine);
                    }
                    // Checked when read: a file that does not decode reads as no data.
                    if let Ok(bytes) = fs::read(e.path().join("data.p")) {
                        entries.insert(id, Arc::from(bytes));
                    }
                }
            }
        }
        DataCache {
            dir,
            enabled,
            entries: RwLock::new(entries),
            mines: RwLock::new(mines),
        }
    }

    /// Write `bytes` to `minions/<id>/<name>` through a temporary file.
    fn write(&self, id: &str, name: &str, bytes: &[u8]) {
        let d = self.dir.join(id);
        let write = fs::create_dir_all(&d).and_then(|_| {
            let tmp = d.join(format!(".{name}.tmp"));
            fs::write(&tmp, bytes)?;
            fs::rename(tmp, d.join(name))
        });
        if let Err(e) = write {
            tracing::warn!("minion data cache for {id}: {e}");
        }
    }

    /// Record what `id` reported; its file is written only when that changed.
    pub fn update(&self, id: &str, grains: Value, pillar: Value) {
        if !self.enabled {
            return;
        }
        let bytes = dumps_bin(&map(vec![("grains", grains), ("pillar", pillar)]));
        if self.packed(id).is_some_and(|old| *old == *bytes) {
            return;
        }
        self.write(id, "data.p", &bytes);
        self.entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), Arc::from(bytes));
    }

    fn packed(&self, id: &str) -> Option<Arc<[u8]>> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// The grains and pillar `id` last reported (None when it never did, or its file does
    /// not decode).
    pub fn get(&self, id: &str) -> Option<MinionData> {
        let bytes = self.packed(id)?;
        let [grains, pillar] = map_fields(&bytes, ["grains", "pillar"]);
        if grains.is_none() && pillar.is_none() {
            return None;
        }
        let field = |f: Option<&[u8]>| f.and_then(|b| loads(b).ok());
        Some(MinionData {
            grains: field(grains),
            pillar: field(pillar),
        })
    }

    /// The grains `id` last reported, decoded alone.
    pub fn grains(&self, id: &str) -> Option<Value> {
        let bytes = self.packed(id)?;
        loads(map_field(&bytes, "grains")?).ok()
    }

    /// A minion's mine (`None` when it stored nothing).
    pub fn mine(&self, id: &str) -> Option<Value> {
        self.mines
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Store mine entries of `id`: merged over what it stored before, or replacing it all
    /// with `clear`. Nothing is kept when the data cache is off (`minion_data_cache: False`),
    /// as in Salt.
    pub fn mine_store(&self, id: &str, data: Value, clear: bool) {
        let Value::Map(new) = data else { return };
        if !self.enabled {
            return;
        }
        let mut mines = self.mines.write().unwrap_or_else(|e| e.into_inner());
        let entry = mines
            .entry(id.to_string())
            .or_insert_with(|| Value::Map(vec![]));
        match entry {
            Value::Map(old) if !clear => {
                for (k, v) in new {
                    match old.iter_mut().find(|(ok, _)| *ok == k) {
                        Some(slot) => slot.1 = v,
                        None => old.push((k, v)),
                    }
                }
            }
            _ => *entry = Value::Map(new),
        }
        let bytes = dumps_bin(entry);
        drop(mines);
        self.write(id, "mine.p", &bytes);
    }

    /// Forget one mine function of `id` (true also when it had none).
    pub fn mine_delete(&self, id: &str, fun: &str) -> bool {
        let mut mines = self.mines.write().unwrap_or_else(|e| e.into_inner());
        let Some(Value::Map(entries)) = mines.get_mut(id) else {
            return true;
        };
        entries.retain(|(k, _)| k.as_str() != Some(fun));
        let bytes = dumps_bin(&Value::Map(entries.clone()));
        drop(mines);
        self.write(id, "mine.p", &bytes);
        true
    }

    /// Forget the whole mine of `id`.
    pub fn mine_flush(&self, id: &str) -> bool {
        self.mines
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        match fs::remove_file(self.dir.join(id).join("mine.p")) {
            Ok(()) => true,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }

    pub fn remove(&self, id: &str) {
        self.entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        self.mines
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        let _ = fs::remove_dir_all(self.dir.join(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn grains(os: &str) -> Value {
        map(vec![("os", Value::from(os)), ("id", Value::from("m1"))])
    }

    #[test]
    fn entries_are_kept_packed_read_back_and_rewritten_only_when_they_change() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DataCache::open(dir.path(), true);
        assert!(cache.get("m1").is_none());
        let pillar = map(vec![("role", Value::from("web"))]);
        cache.update("m1", grains("Debian"), pillar.clone());
        let file = dir.path().join("minions/m1/data.p");
        let inode = fs::metadata(&file).unwrap().ino();

        // The same report again leaves the file alone (a rename would give a new inode).
        cache.update("m1", grains("Debian"), pillar.clone());
        assert_eq!(fs::metadata(&file).unwrap().ino(), inode);
        let got = cache.get("m1").unwrap();
        assert_eq!(got.grains, Some(grains("Debian")));
        assert_eq!(got.pillar, Some(pillar.clone()));
        assert_eq!(cache.grains("m1"), Some(grains("Debian")));

        // A change is written, and what a new master process reads is the newest.
        cache.update("m1", grains("Ubuntu"), pillar.clone());
        assert_ne!(fs::metadata(&file).unwrap().ino(), inode);
        let again = DataCache::open(dir.path(), true);
        assert_eq!(again.grains("m1"), Some(grains("Ubuntu")));
        assert_eq!(again.get("m1").unwrap().pillar, Some(pillar));

        // A file that does not decode reads as no data; the next report replaces it.
        fs::write(&file, b"\xc1garbage").unwrap();
        let broken = DataCache::open(dir.path(), true);
        assert!(broken.get("m1").is_none());
        assert!(broken.grains("m1").is_none());
        broken.update("m1", grains("Debian"), Value::Map(vec![]));
        assert_eq!(broken.grains("m1"), Some(grains("Debian")));
    }
}
