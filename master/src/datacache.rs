//! The minion data cache: each minion's grains and pillar as it last reported them (through
//! `_pillar`), kept in memory and in `cachedir/minions/<id>/data.p` (Salt's layout), so that
//! grain targeting works from the master.

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
}

impl DataCache {
    /// Open the cache under `cachedir/minions`, loading what earlier runs stored.
    pub fn open(cachedir: &Path, enabled: bool) -> DataCache {
        let dir = cachedir.join("minions");
        let mut entries = HashMap::new();
        if enabled {
            if let Ok(rd) = fs::read_dir(&dir) {
                for e in rd.flatten() {
                    let Ok(id) = e.file_name().into_string() else {
                        continue;
                    };
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
        }
    }

    pub fn update(&self, id: &str, grains: Value, pillar: Value) {
        if !self.enabled {
            return;
        }
        let d = self.dir.join(id);
        let bytes = dumps_bin(&map(vec![
            ("grains", grains.clone()),
            ("pillar", pillar.clone()),
        ]));
        let write = fs::create_dir_all(&d).and_then(|_| {
            let tmp = d.join(".data.p.tmp");
            fs::write(&tmp, bytes)?;
            fs::rename(tmp, d.join("data.p"))
        });
        if let Err(e) = write {
            tracing::warn!("minion data cache for {id}: {e}");
        }
        self.entries.write().expect("cache lock").insert(
            id.to_string(),
            MinionData {
                grains: Some(grains),
                pillar: Some(pillar),
            },
        );
    }

    pub fn get(&self, id: &str) -> Option<MinionData> {
        self.entries.read().expect("cache lock").get(id).cloned()
    }

    pub fn remove(&self, id: &str) {
        self.entries.write().expect("cache lock").remove(id);
        let _ = fs::remove_dir_all(self.dir.join(id));
    }
}
