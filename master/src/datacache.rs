//! The minion data cache: each minion's grains and pillar as it last reported them (through
//! `_pillar`), kept in memory and in `cachedir/minions/<id>/data.p` (Salt's layout), so that
//! grain targeting works from the master; and each minion's mine (`_mine` requests), in
//! `cachedir/minions/<id>/mine.p`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use brine_protocol::payload::{dumps_bin, get, loads, map, Value};

#[derive(Clone, Default)]
pub struct MinionData {
    pub grains: Option<Value>,
    pub pillar: Option<Value>,
}

pub struct DataCache {
    dir: PathBuf,
    enabled: bool,
    entries: RwLock<HashMap<String, MinionData>>,
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
                    if let Ok(bytes) = fs::read(e.path().join("data.p")) {
                        if let Ok(v) = loads(&bytes) {
                            entries.insert(
                                id,
                                MinionData {
                                    grains: get(&v, "grains").cloned(),
                                    pillar: get(&v, "pillar").cloned(),
                                },
                            );
                        }
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

    pub fn update(&self, id: &str, grains: Value, pillar: Value) {
        if !self.enabled {
            return;
        }
        let bytes = dumps_bin(&map(vec![
            ("grains", grains.clone()),
            ("pillar", pillar.clone()),
        ]));
        self.write(id, "data.p", &bytes);
        self.entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id.to_string(),
                MinionData {
                    grains: Some(grains),
                    pillar: Some(pillar),
                },
            );
    }

    pub fn get(&self, id: &str) -> Option<MinionData> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
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
