//! The `cp` execution module: files from the master's file server (`cp.cache_file`,
//! `cp.get_file`, `cp.get_dir`, `cp.get_template`, `cp.cache_master`), what it lists
//! (`cp.list_master`, `cp.list_master_dirs`, `cp.list_states`) and hashes (`cp.hash_file`),
//! and the local cache (`cp.is_cached`), through the minion's file client; `cp.push` sends a
//! file of the minion to the master.

use std::path::{Path, PathBuf};

use brine_protocol::payload::Value;

use super::args::{is_true, py_str, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use crate::fileclient::{split_url, FileClient};

/// The functions of the `cp` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    CacheFile,
    CacheMaster,
    GetDir,
    GetFile,
    GetTemplate,
    HashFile,
    IsCached,
    ListMaster,
    ListMasterDirs,
    ListStates,
    Push,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::CacheFile,
        Fun::CacheMaster,
        Fun::GetDir,
        Fun::GetFile,
        Fun::GetTemplate,
        Fun::HashFile,
        Fun::IsCached,
        Fun::ListMaster,
        Fun::ListMasterDirs,
        Fun::ListStates,
        Fun::Push,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::CacheFile => (
                "cp.cache_file",
                "cache_file",
                Signature::new(&["path", "saltenv", "source_hash", "verify_ssl", "use_etag"], 1, false, false),
                "
    Cache a file from the master (salt://path) and return its local path, or
    False when the master has no such file.

    CLI Example:

        salt '*' cp.cache_file salt://path/to/file
    ",
            ),
            Fun::CacheMaster => (
                "cp.cache_master",
                "cache_master",
                Signature::new(&["saltenv"], 0, false, false),
                "
    Cache every file of a saltenv of the master and return their local paths.

    CLI Example:

        salt '*' cp.cache_master
    ",
            ),
            Fun::GetDir => (
                "cp.get_dir",
                "get_dir",
                Signature::new(&["path", "dest", "saltenv", "template", "gzip"], 2, false, true),
                "
    Copy a directory of the master (salt://path) to dest on the minion; return
    the files written.

    CLI Example:

        salt '*' cp.get_dir salt://path/to/dir/ /minion/dest
    ",
            ),
            Fun::GetFile => (
                "cp.get_file",
                "get_file",
                Signature::new(&["path", "dest", "saltenv", "makedirs", "template", "gzip"], 2, false, true),
                "
    Copy a file of the master (salt://path) to dest on the minion and return
    dest ('' when the master has no such file).

    CLI Example:

        salt '*' cp.get_file salt://path/to/file /minion/dest makedirs=True
    ",
            ),
            Fun::GetTemplate => (
                "cp.get_template",
                "get_template",
                Signature::new(&["path", "dest", "template", "saltenv", "makedirs"], 2, false, true),
                "
    Render a Jinja template of the master and write it to dest; return dest.

    CLI Example:

        salt '*' cp.get_template salt://path/to/template /minion/dest
    ",
            ),
            Fun::HashFile => (
                "cp.hash_file",
                "hash_file",
                Signature::new(&["path", "saltenv"], 1, false, false),
                "
    Return the hash of a file of the master ({hsum, hash_type}), or an empty
    dict when there is no such file.

    CLI Example:

        salt '*' cp.hash_file salt://path/to/file
    ",
            ),
            Fun::IsCached => (
                "cp.is_cached",
                "is_cached",
                Signature::new(&["path", "saltenv"], 1, false, false),
                "
    Return the local path of a cached master file, or '' when it is not cached.

    CLI Example:

        salt '*' cp.is_cached salt://path/to/file
    ",
            ),
            Fun::ListMaster => (
                "cp.list_master",
                "list_master",
                Signature::new(&["saltenv", "prefix"], 0, false, false),
                "
    List the files of a saltenv of the master.

    CLI Example:

        salt '*' cp.list_master
    ",
            ),
            Fun::ListMasterDirs => (
                "cp.list_master_dirs",
                "list_master_dirs",
                Signature::new(&["saltenv", "prefix"], 0, false, false),
                "
    List the directories of a saltenv of the master.

    CLI Example:

        salt '*' cp.list_master_dirs
    ",
            ),
            Fun::ListStates => (
                "cp.list_states",
                "list_states",
                Signature::new(&["saltenv"], 0, false, false),
                "
    List the SLS names of a saltenv of the master.

    CLI Example:

        salt '*' cp.list_states
    ",
            ),
            Fun::Push => (
                "cp.push",
                "push",
                Signature::new(&["path", "keep_symlinks", "upload_path", "remove_source"], 1, false, false),
                "
    Send a file of this minion (an absolute path) to the master, which keeps it
    under its cachedir/minions/<minion id>/files/ when its file_recv option is
    on. upload_path names it differently there; remove_source deletes the
    file once sent; keep_symlinks sends a symlink's own path rather than its
    target's. Returns True, or False when the file cannot be sent or the
    master refuses it (file_recv off, file_recv_max_size exceeded).

    CLI Example:

        salt '*' cp.push /etc/fstab
        salt '*' cp.push /etc/system-release keep_symlinks=True
        salt '*' cp.push /etc/fstab upload_path='/new/path/fstab'
    ",
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let Some(master) = ctx.services.master.clone() else {
            return Err(FnError::Execution(
                "cp functions need the master's file server (this minion has no master)".into(),
            ));
        };
        let client = FileClient::new(master, &ctx.services.cachedir);
        let b = b.clone();
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || self.run_blocking(client, &b, &ctx))
            .await
            .map_err(|e| FnError::Exception(e.to_string()))?
            .map_err(FnError::Execution)
    }

    fn run_blocking(self, client: FileClient, b: &Bound, ctx: &Context) -> Result<Value, String> {
        let client = std::sync::Arc::new(client);
        let text = |key: &str| b.opt(key).map(py_str);
        let saltenv = text("saltenv").unwrap_or_else(|| "base".into());
        let path = text("path").unwrap_or_default();
        let strings = |l: Vec<String>| Value::Array(l.into_iter().map(Value::from).collect());
        let path_value = |p: PathBuf| Value::from(p.display().to_string());
        Ok(match self {
            Fun::CacheFile => match client.cache_file(&path, &saltenv)? {
                Some(p) => path_value(p),
                None => Value::Boolean(false),
            },
            Fun::CacheMaster => {
                let mut out = Vec::new();
                for f in client.list(&saltenv)? {
                    if let Some(p) = client.cache_file(&f, &saltenv)? {
                        out.push(path_value(p));
                    }
                }
                Value::Array(out)
            }
            Fun::HashFile => client.hash(&path, &saltenv)?,
            Fun::IsCached => client
                .is_cached(&path, &saltenv)
                .map_or(Value::from(""), path_value),
            Fun::ListMaster => {
                let prefix = text("prefix").unwrap_or_default();
                let mut files: Vec<String> = client
                    .list(&saltenv)?
                    .into_iter()
                    .filter(|f| f.starts_with(&prefix))
                    .collect();
                files.sort();
                strings(files)
            }
            Fun::ListMasterDirs => {
                let prefix = text("prefix").unwrap_or_default();
                strings(client.dir_list(&saltenv, &prefix)?)
            }
            Fun::Push => {
                let chunk = ctx
                    .services
                    .opts
                    .get("file_buffer_size")
                    .and_then(serde_json::Value::as_u64)
                    .filter(|n| *n > 0)
                    .unwrap_or(DEFAULT_FILE_BUFFER_SIZE);
                push(&client, &ctx.id, b, chunk as usize)
            }
            Fun::ListStates => {
                let mut names = brine_state::high::sls_names_of(&client.list(&saltenv)?);
                names.sort();
                strings(names)
            }
            Fun::GetFile => {
                let dest = text("dest").unwrap_or_default();
                match client.cache_file(&path, &saltenv)? {
                    None => Value::from(""),
                    Some(cached) => match place(&cached, &path, &dest, is_true(b.opt("makedirs")))? {
                        Some(d) => path_value(d),
                        None => Value::Boolean(false),
                    },
                }
            }
            Fun::GetDir => {
                let dest = text("dest").unwrap_or_default();
                let (dir, env) = split_url(&path, &saltenv);
                let dir = dir.trim_end_matches('/').to_string();
                let parent = Path::new(&dir).parent().map(|p| p.display().to_string()).unwrap_or_default();
                let mut written = Vec::new();
                for f in client.list(&env)? {
                    if !f.starts_with(&format!("{dir}/")) {
                        continue;
                    }
                    let rel = f.strip_prefix(&parent).unwrap_or(&f).trim_start_matches('/');
                    let target = Path::new(&dest).join(rel);
                    if let Some(cached) = client.cache_file(&f, &env)? {
                        if let Some(parent) = target.parent() {
                            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                        }
                        std::fs::copy(&cached, &target).map_err(|e| e.to_string())?;
                        written.push(path_value(target));
                    }
                }
                Value::Array(written)
            }
            Fun::GetTemplate => {
                let dest = text("dest").unwrap_or_default();
                let template = text("template").unwrap_or_else(|| "jinja".into());
                if template != "jinja" {
                    return Err(format!("Attempted to render file paths with unavailable engine {template}"));
                }
                let (rel, env) = split_url(&path, &saltenv);
                let Some(source) = client.read_text(&rel, &env)? else {
                    return Ok(Value::from(""));
                };
                let render_ctx = brine_render::Context {
                    grains: brine_protocol::payload::to_json(&ctx.grains),
                    pillar: brine_protocol::payload::to_json(&ctx.pillar),
                    opts: serde_json::json!({"id": ctx.id}),
                    saltenv: env.clone(),
                    vars: b
                        .kwargs
                        .iter()
                        .filter(|(k, _)| !k.starts_with("__"))
                        .map(|(k, v)| (k.clone(), brine_protocol::payload::to_json(v)))
                        .collect(),
                    ..brine_render::Context::default()
                };
                let functions = std::sync::Arc::new(super::TemplateFunctions::new(ctx.clone(), |_| true));
                let text = brine_render::render_template(&source, &rel, &render_ctx, client.clone(), functions)
                    .map_err(|e| e.to_string())?;
                let target = PathBuf::from(&dest);
                if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
                    if !dir.is_dir() {
                        if !is_true(b.opt("makedirs")) {
                            return Ok(Value::Boolean(false));
                        }
                        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
                    }
                }
                std::fs::write(&target, text).map_err(|e| e.to_string())?;
                path_value(target)
            }
        })
    }
}

/// Copy a cached file to `dest` (a directory gets the file's own name); `None` when the
/// destination's directory is missing and `makedirs` was not asked for.
fn place(cached: &Path, source: &str, dest: &str, makedirs: bool) -> Result<Option<PathBuf>, String> {
    let mut target = PathBuf::from(dest);
    if target.is_dir() {
        let (rel, _) = split_url(source, "base");
        target = target.join(Path::new(&rel).file_name().unwrap_or_default());
    }
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            if !makedirs {
                return Ok(None);
            }
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
    }
    std::fs::copy(cached, &target).map_err(|e| e.to_string())?;
    Ok(Some(target))
}

/// Salt's default `file_buffer_size`: the bytes of one `cp.push` chunk.
const DEFAULT_FILE_BUFFER_SIZE: u64 = 262_144;

/// `cp.push`: the file sent in `_file_recv` chunks as Salt's minion sends them (the path on
/// the minion as a list of parts, each chunk with its offset), `True` once the master took
/// every chunk; `False` when the path is not an absolute path of a file or the master refuses.
fn push(client: &FileClient, id: &str, b: &Bound, chunk: usize) -> Value {
    use std::io::Read;
    let text = |key: &str| b.opt(key).filter(|v| !v.is_nil()).map(py_str);
    let path = text("path").unwrap_or_default();
    if path.contains("../") || !path.starts_with('/') {
        tracing::debug!("cp.push: path must be absolute: {path}");
        return Value::Boolean(false);
    }
    let path = if is_true(b.opt("keep_symlinks")) {
        PathBuf::from(&path)
    } else {
        match std::fs::canonicalize(&path) {
            Ok(p) => p,
            Err(_) => return Value::Boolean(false),
        }
    };
    if !path.is_file() {
        return Value::Boolean(false);
    }
    let load_path = match text("upload_path") {
        Some(up) if up.contains("../") => return Value::Boolean(false),
        Some(up) => up,
        None => path.display().to_string(),
    };
    let normal = brine_protocol::posixpath::normpath(load_path.trim_start_matches('/'));
    let parts: Vec<Value> = normal
        .split('/')
        .filter(|p| !p.is_empty())
        .map(Value::from)
        .collect();
    let Ok(mut file) = std::fs::File::open(&path) else {
        return Value::Boolean(false);
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut loc: u64 = 0;
    let mut buf = vec![0u8; chunk];
    let mut sent_one = false;
    loop {
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                tracing::error!("cp.push: cannot read {}: {e}", path.display());
                return Value::Boolean(false);
            }
        };
        if n == 0 && sent_one {
            break;
        }
        let load = vec![
            ("cmd", Value::from("_file_recv")),
            ("id", Value::from(id)),
            ("path", Value::Array(parts.clone())),
            ("size", Value::from(size)),
            ("loc", Value::from(loc)),
            ("data", Value::Binary(buf[..n].to_vec())),
        ];
        match client.request(load) {
            Ok(Value::Boolean(true)) => {}
            Ok(other) => {
                tracing::error!(
                    "cp.push Failed transfer failed. Ensure master has 'file_recv' set to 'True' \
                     and that the file is not larger than the 'file_recv_max_size' setting on \
                     the master."
                );
                return if other.is_nil() { Value::Boolean(false) } else { other };
            }
            Err(e) => {
                tracing::error!("cp.push: {e}");
                return Value::Boolean(false);
            }
        }
        sent_one = true;
        loc += n as u64;
    }
    if is_true(b.opt("remove_source")) && std::fs::remove_file(&path).is_err() {
        tracing::error!("cp.push failed to remove file '{}'", path.display());
        return Value::Boolean(false);
    }
    Value::Boolean(true)
}
