//! The `cp` execution module: files from the master's file server (`cp.cache_file`,
//! `cp.get_file`, `cp.get_dir`, `cp.get_template`, `cp.cache_master`), what it lists
//! (`cp.list_master`, `cp.list_master_dirs`, `cp.list_states`) and hashes (`cp.hash_file`),
//! and the local cache (`cp.is_cached`), through the minion's file client; `cp.push` sends a
//! file of the minion to the master. `cp.cache_file` and `cp.is_cached` of an `http://` or
//! `https://` URL fetch it into (or look it up in) `extrn_files` of the cache directory with
//! `brine_state::url`, with no master needed; `cp.get_url` gets an http(s) URL into the
//! cache, to a path or as text (and a `salt://` or local file as Salt does).

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
    GetUrl,
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
        Fun::GetUrl,
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
            Fun::GetUrl => (
                "cp.get_url",
                "get_url",
                Signature::new(&["path", "dest", "saltenv", "makedirs", "source_hash"], 1, false, false),
                "
    Get a file from a URL (http://, https://, salt:// or a local path). With
    dest unset the file is cached and its local path returned; with dest a
    path it is written there and dest returned ('' when dest's directory is
    missing and makedirs is not set); with dest=None its contents are returned.

    CLI Example:

        salt '*' cp.get_url https://example.com/file.txt /tmp/file.txt
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
        // URLs over the network need no master.
        let path = b.opt("path").map(py_str).unwrap_or_default();
        let remote = brine_state::url::remote_scheme(&path).is_some();
        if (remote && matches!(self, Fun::CacheFile | Fun::IsCached))
            || (self == Fun::GetUrl && !path.starts_with("salt://"))
        {
            let (b, ctx) = (b.clone(), ctx.clone());
            return tokio::task::spawn_blocking(move || self.run_url(&path, &b, &ctx))
                .await
                .map_err(|e| FnError::Exception(e.to_string()))?;
        }
        let Some(master) = ctx.services.file_source() else {
            return Err(FnError::Execution(
                "cp functions need the master's file server (this minion has no master)".into(),
            ));
        };
        let client = FileClient::new(
        master, &ctx.services.cachedir);
        let b = b.clone();
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || self.run_blocking(client, &b, &ctx))
            .await
            .map_err(|e| FnError::Exception(e.to_string()))?
            .map_err(FnError::Execution)
    }

    /// `cp.cache_file` and `cp.is_cached` of an `http://` or `https://` URL: the file under
    /// `extrn_files` in the cache directory, fetched as Salt's file client fetches it (the
    /// cached copy kept when it has `source_hash`). A failed fetch is Salt's `MinionError`;
    /// `ftp://`, `s3://` and `swift://` are refused by name.
    fn run_url(self, url: &str, b: &Bound, ctx: &Context) -> Result<Value, FnError> {
        let text = |key: &str| b.opt(key).filter(|v| !v.is_nil()).map(py_str);
        let saltenv = text("saltenv")
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "base".into());
        let cachedir = &ctx.services.cachedir;
        if self == Fun::IsCached {
            let path = brine_state::url::extrn_path(cachedir, url, &saltenv)
                .ok()
                .filter(|p| p.exists());
            return Ok(path.map_or(Value::from(""), |p| Value::from(p.display().to_string())));
        }
        let minion_error = |e: String| FnError::Exception(format!("salt.exceptions.MinionError: {e}"));
        if self == Fun::GetUrl && brine_state::url::remote_scheme(url).is_none() {
            // A file of this machine: its path, or its contents for dest=None.
            let path = local_path(url).map_err(FnError::Execution)?;
            return match b.get("dest") {
                Some(v) if v.is_nil() => std::fs::read(&path)
                    .map(|bytes| Value::from(String::from_utf8_lossy(&bytes).into_owned()))
                    .map_err(|e| FnError::Exception(e.to_string())),
                _ => Ok(Value::from(path)),
            };
        }
        if !brine_state::url::is_http(url) {
            return Err(FnError::Exception(format!(
                "salt.exceptions.MinionError: {}",
                brine_state::url::refused(url)
            )));
        }
        let fetch = brine_state::url::Fetch {
            source_hash: text("source_hash").filter(|h| !h.is_empty()),
            verify_ssl: b.opt("verify_ssl").is_none_or(|v| is_true(Some(v))),
            use_etag: is_true(b.opt("use_etag")),
        };
        let opts = brine_state::url::HttpOptions::from_opts(&ctx.services.opts);
        if self == Fun::GetUrl {
            let fetch = brine_state::url::Fetch {
                verify_ssl: true,
                use_etag: false,
                ..fetch
            };
            return match b.get("dest") {
                // dest=None: the contents.
                Some(v) if v.is_nil() => {
                    let bytes = brine_state::url::fetch_bytes(&opts, url, &fetch).map_err(minion_error)?;
                    Ok(Value::from(String::from_utf8_lossy(&bytes).into_owned()))
                }
                Some(v) if !py_str(v).is_empty() => {
                    let dest = url_dest(url, &py_str(v));
                    if let Some(dir) = dest.parent().filter(|d| !d.is_dir()) {
                        if !is_true(b.opt("makedirs")) {
                            return Ok(Value::from(""));
                        }
                        std::fs::create_dir_all(dir).map_err(|e| FnError::Exception(e.to_string()))?;
                    }
                    brine_state::url::download_to(&opts, url, &dest, &fetch).map_err(minion_error)?;
                    Ok(Value::from(dest.display().to_string()))
                }
                _ => brine_state::url::cache_url(&opts, cachedir, url, &saltenv, &fetch)
                    .map(|p| Value::from(p.display().to_string()))
                    .map_err(minion_error),
            };
        }
        brine_state::url::cache_url(&opts, cachedir, url, &saltenv, &fetch)
            .map(|p| Value::from(p.display().to_string()))
            .map_err(minion_error)
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
            Fun::GetUrl => match b.get("dest") {
                // A salt:// file (the others are answered by run_url).
                Some(v) if v.is_nil() => match client.cache_file(&path, &saltenv)? {
                    Some(p) => Value::from(
                        String::from_utf8_lossy(&std::fs::read(p).map_err(|e| e.to_string())?).into_owned(),
                    ),
                    None => Value::Boolean(false),
                },
                dest => {
                    let dest = dest.map(py_str).unwrap_or_default();
                    match client.cache_file(&path, &saltenv)? {
                        None => Value::Boolean(false),
                        Some(cached) if dest.is_empty() => path_value(cached),
                        Some(cached) => match place(&cached, &path, &dest, is_true(b.opt("makedirs")))? {
                            Some(d) => path_value(d),
                            None => Value::Boolean(false),
                        },
                    }
                }
            },
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
                let vars = b
                    .kwargs
                    .iter()
                    .filter(|(k, _)| !k.starts_with("__"))
                    .map(|(k, v)| (k.clone(), brine_protocol::payload::to_json(v)))
                    .collect();
                let Some(text) = render_master_file(&client, ctx, &path, &saltenv, vars)? else {
                    return Ok(Value::from(""));
                };
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

/// A file of the master's file server rendered with Jinja (Salt's `cp.get_template`
/// rendering): the minion's grains and pillar, `vars` as the template's variables, the
/// entries of a `context` map among them over the others. `None` when the master has no
/// such file.
pub(crate) fn render_master_file(
    client: &std::sync::Arc<FileClient>,
    ctx: &Context,
    url: &str,
    saltenv: &str,
    mut vars: serde_json::Map<String, serde_json::Value>,
) -> Result<Option<String>, String> {
    if let Some(serde_json::Value::Object(context)) = vars.remove("context") {
        vars.extend(context);
    }
    let (rel, env) = split_url(url, saltenv);
    let Some(source) = client.read_text(&rel, &env)? else {
        return Ok(None);
    };
    let render_ctx = brine_render::Context {
        grains: brine_protocol::payload::to_json(&ctx.grains),
        pillar: brine_protocol::payload::to_json(&ctx.pillar),
        opts: serde_json::Value::Object(super::template_opts(ctx)),
        saltenv: env.clone(),
        vars,
        ..brine_render::Context::default()
    };
    let functions = std::sync::Arc::new(super::TemplateFunctions::new(ctx.clone(), |_| true));
    brine_render::render_template(&source, &rel, &render_ctx, client.clone(), functions)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// A local source of `cp.get_url` (`/abs/path` or `file:///abs/path`): its path, which
/// must be absolute.
fn local_path(url: &str) -> Result<String, String> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    if !path.starts_with('/') {
        return Err(format!("Path '{path}' is not absolute"));
    }
    Ok(path.to_string())
}

/// Where `cp.get_url` writes a URL given `dest`: a directory (or a path ending in `/`) gets
/// the URL's last part, `index.html` for a URL with no path and no query.
fn url_dest(url: &str, dest: &str) -> PathBuf {
    if !(Path::new(dest).is_dir() || dest.ends_with('/')) {
        return PathBuf::from(dest);
    }
    let path = brine_state::url::url_path(url);
    let has_query = url.split_once('?').is_some_and(|(_, q)| !q.is_empty());
    let name = if has_query || (path.len() > 1 && !path.ends_with('/')) {
        url.rsplit('/').next().unwrap_or_default()
    } else {
        "index.html"
    };
    Path::new(dest).join(name)
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

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::Arc;

    use crate::functions::network::tests::{brine_in, SaltCall};
    use serde_json::Value as J;

    /// A file server on 127.0.0.1:0 with one file, `/a.txt`, and `404 File not found` for
    /// anything else; its base URL.
    fn serve() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("");
                let (status, body) = match path.split('?').next() {
                    Some("/a.txt") => ("200 OK", "hello over http\n"),
                    _ => ("404 File not found", "File not found\n"),
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        base
    }

    /// `cp.cache_file`, `cp.is_cached` and `cp.get_url` of http URLs answer as
    /// `salt-call --local` does, with each one's cache directory read as `{C}` and its
    /// directory for destinations as `{D}`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn urls_are_cached_as_salt_3007_caches_them() {
        let Some(salt) = SaltCall::new() else {
            return;
        };
        let base = serve();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let cache = tempfile::tempdir().unwrap();
        let mut ctx = crate::functions::testutil::ctx();
        let mut services = crate::functions::Services::detached();
        services.cachedir = cache.path().to_path_buf();
        ctx.services = Arc::new(services);
        let salt_cache = salt.config_dir().join("root/var/cache/salt/minion");
        let hash = "sha256=0000000000000000000000000000000000000000000000000000000000000000";
        let cases: Vec<Vec<String>> = vec![
            vec!["cp.is_cached".into(), format!("{base}/a.txt")],
            vec!["cp.cache_file".into(), format!("{base}/a.txt")],
            vec!["cp.is_cached".into(), format!("{base}/a.txt")],
            vec!["cp.cache_file".into(), format!("{base}/a.txt?v=1&x=2")],
            vec!["cp.cache_file".into(), format!("{base}/a.txt"), format!("source_hash={hash}")],
            vec!["cp.cache_file".into(), format!("{}/a.txt", base.replace("//", "//u:pw@"))],
            vec!["cp.cache_file".into(), format!("{base}/a.txt"), "saltenv=dev".into()],
            vec!["cp.cache_file".into(), format!("{base}/nope.txt")],
            vec!["cp.is_cached".into(), format!("{base}/nope.txt")],
            vec!["cp.cache_file".into(), format!("http://127.0.0.1:{closed}/x")],
        ];
        let mut cases = cases;
        cases.extend([
            vec!["cp.get_url".into(), format!("{base}/a.txt?g=1")],
            vec!["cp.get_url".into(), format!("{base}/a.txt"), "dest=None".into()],
            vec!["cp.get_url".into(), format!("{base}/a.txt"), "{D}/new/x.txt".into()],
            vec!["cp.get_url".into(), format!("{base}/a.txt"), "{D}/new/x.txt".into(), "makedirs=True".into()],
            vec!["cp.get_url".into(), format!("{base}/a.txt"), "{D}/".into()],
            vec!["cp.get_url".into(), format!("{base}/nope.txt"), "{D}/nope.txt".into()],
            vec!["cp.get_url".into(), "{D}/new/x.txt".into(), "dest=None".into()],
        ]);
        let (salt_dir, brine_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut failures = Vec::new();
        for case in &cases {
            let fill = |d: &std::path::Path| -> Vec<String> {
                case.iter().map(|w| w.replace("{D}", &d.display().to_string())).collect()
            };
            let (s_args, b_args) = (fill(salt_dir.path()), fill(brine_dir.path()));
            let args: Vec<&str> = s_args[1..].iter().map(String::as_str).collect();
            let want = tokio::task::block_in_place(|| salt.run(&case[0], &args));
            let args: Vec<&str> = b_args[1..].iter().map(String::as_str).collect();
            let got = brine_in(&ctx, &case[0], &args).await;
            let read = |v: &J, dir: &std::path::Path, d: &std::path::Path| {
                let text = v
                    .to_string()
                    .replace(&dir.display().to_string(), "{C}")
                    .replace(&d.display().to_string(), "{D}");
                serde_json::from_str::<J>(&text).unwrap()
            };
            let (want_ret, got_ret) = (
                read(&want.ret, &salt_cache, salt_dir.path()),
                read(&got.ret, cache.path(), brine_dir.path()),
            );
            if want_ret != got_ret || want.retcode != got.retcode {
                failures.push(format!(
                    "{case:?}\n  salt:  {want_ret} ({})\n  brine: {got_ret} ({})",
                    want.retcode, got.retcode
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        let cached = cache.path().join(format!(
            "extrn_files/base/{}/a.txt",
            base.trim_start_matches("http://").replace(':', "")
        ));
        assert_eq!(std::fs::read(cached).unwrap(), b"hello over http\n");
    }
}
