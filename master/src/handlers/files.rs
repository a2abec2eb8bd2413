//! The file server's aes commands (`_file_envs`, `_file_list`, `_serve_file`, ...), answered
//! from [`crate::fileserver`] with the shapes a Salt 3007 master gives: a request without
//! the keys Salt needs, for an unknown saltenv, or for a path that names no file inside the
//! roots gets Salt's empty answer (`[]`, `""`, `{"data": "", "dest": ""}`, ...).

use brine_protocol::loads::{AesCmd, FileRequest};
use brine_protocol::payload::{map, Value};

use crate::fileserver::{FileServer, Found, Lists};
use crate::master::Master;

fn strings(list: &[String], prefix: &str) -> Value {
    Value::Array(
        list.iter()
            .filter(|f| f.starts_with(prefix))
            .map(|f| Value::from(f.as_str()))
            .collect(),
    )
}

fn stat(found: &Found) -> Value {
    Value::Array(found.stat.iter().map(|n| Value::from(*n)).collect())
}

impl Master {
    /// The answer to a file server command; `None` for a command that is not one.
    pub(crate) fn on_file_request(&self, cmd: &AesCmd, load: &Value) -> Option<Value> {
        answer(&self.fileserver, cmd, load)
    }
}

/// A masterless minion's file server (`salt-call --local`): its own `file_roots` answering
/// the file client's requests as a master answers them.
pub struct LocalFiles {
    fs: FileServer,
}

impl LocalFiles {
    /// The file server over the `file_roots` (and the file server options) of a minion's
    /// options, Salt's default roots when they name none.
    pub fn new(
        minion_opts: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<LocalFiles, brine_protocol::config::ConfigError> {
        let cfg = crate::pillar::master_view(minion_opts)?;
        Ok(LocalFiles {
            fs: FileServer::new(&cfg),
        })
    }
}

impl brine_minion::fileclient::FileSource for LocalFiles {
    fn request(&self, load: &Value) -> Result<Value, String> {
        let cmd = AesCmd::of(load);
        answer(&self.fs, &cmd, load)
            .ok_or_else(|| format!("{} is not a file server request", cmd.as_str()))
    }
}

/// The answer of the file server `fs` to a file server command; `None` for a command that is
/// not one.
fn answer(fs: &FileServer, cmd: &AesCmd, load: &Value) -> Option<Value> {
    let req = FileRequest::parse(load);
    let lists = |pick: fn(&Lists) -> &Vec<String>| {
        let Some(saltenv) = req.saltenv.as_deref() else {
            return Value::Array(vec![]);
        };
        match fs.lists(saltenv) {
            Some(l) => strings(pick(&l), &req.prefix),
            None => Value::Array(vec![]),
        }
    };
    let found = || {
        let (path, saltenv) = (req.path.as_deref()?, req.saltenv.as_deref()?);
        fs.find(path, saltenv)
    };
    let hash = |f: &Found| {
        fs.hash(f).map(|hsum| {
            map(vec![
                ("hash_type", Value::from(fs.hash_type())),
                ("hsum", Value::from(hsum)),
            ])
        })
    };
    Some(match cmd {
        AesCmd::FileEnvs => Value::Array(fs.envs().into_iter().map(Value::from).collect()),
        AesCmd::FileList => lists(|l| &l.files),
        AesCmd::FileListEmptydirs => lists(|l| &l.empty_dirs),
        AesCmd::DirList => lists(|l| &l.dirs),
        AesCmd::SymlinkList => {
            let links = req
                .saltenv
                .as_deref()
                .and_then(|s| fs.lists(s))
                .map(|l| {
                    l.links
                        .iter()
                        .filter(|(k, _)| k.starts_with(&req.prefix))
                        .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
                        .collect()
                })
                .unwrap_or_default();
            Value::Map(links)
        }
        AesCmd::FileHash => found()
            .and_then(|f| hash(&f))
            .unwrap_or_else(|| Value::from("")),
        AesCmd::FileHashAndStat => match found().and_then(|f| Some((hash(&f)?, stat(&f)))) {
            Some((h, s)) => Value::Array(vec![h, s]),
            None => Value::Array(vec![Value::from(""), Value::Nil]),
        },
        AesCmd::FileFind => match found() {
            Some(f) => map(vec![
                ("path", Value::from(f.path.as_str())),
                ("rel", Value::from(f.rel.as_str())),
                ("stat", stat(&f)),
                ("back", Value::from("roots")),
            ]),
            None => map(vec![("path", Value::from("")), ("rel", Value::from(""))]),
        },
        AesCmd::ServeFile => {
            let empty = || map(vec![("data", Value::from("")), ("dest", Value::from(""))]);
            let (Some(path), Some(saltenv), Some(loc)) =
                (req.path.as_deref(), req.saltenv.as_deref(), req.loc)
            else {
                return Some(empty());
            };
            let Ok(loc) = u64::try_from(loc) else {
                return Some(empty());
            };
            match fs.serve(path, saltenv, loc, req.gzip) {
                Some(chunk) => {
                    let mut m = vec![
                        ("data", Value::Binary(chunk.data)),
                        ("dest", Value::from(chunk.dest)),
                    ];
                    if let Some(level) = chunk.gzip {
                        m.push(("gzip", Value::from(level)));
                    }
                    map(m)
                }
                None => empty(),
            }
        }
        AesCmd::MasterTops => Value::Map(vec![]),
        _ => return None,
    })
}
