//! The `cp` execution module: files from the master's file server (`cp.cache_file`,
//! `cp.cache_files`, `cp.cache_dir`, `cp.get_file`, `cp.get_file_str`, `cp.get_dir`,
//! `cp.get_template`, `cp.cache_master`), what it lists (`cp.envs`, `cp.list_master`,
//! `cp.list_master_dirs`, `cp.list_master_symlinks`, `cp.list_states`), hashes
//! (`cp.hash_file`) and modes (`cp.stat_file`) of its files or of the minion's, and the local
//! cache (`cp.is_cached`, `cp.cache_dest`, `cp.list_minion`, `cp.cache_local_file`), through
//! the minion's file client; `cp.push` and `cp.push_dir` send files of the minion to the
//! master. `cp.cache_file` of an `http://` or `https://` URL fetches it into `extrn_files` of
//! the cache directory with `brine_state::url`, with no master needed, and of a local path
//! answers the path; `cp.get_url` gets an http(s) URL into the cache, to a path or as text
//! (and a `salt://` or local file as Salt does). Salt's `cp.recv` and `cp.recv_chunked`
//! (salt-cp's pushes from the master) and the salt-ssh aliases are not here.

use std::path::{Path, PathBuf};

use brine_protocol::payload::Value;

use brine_protocol::target::fnmatch;

use super::args::{is_true, py_str, Bound, Signature, py_type_name};
use super::{CallState, Context, FnError, Spec};
use crate::fileclient::{split_url, FileClient};
use brine_state::url::{is_cached, url_scheme};

/// The functions of the `cp` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    CacheDest,
    CacheDir,
    CacheFile,
    CacheFiles,
    CacheLocalFile,
    CacheMaster,
    Envs,
    GetDir,
    GetFile,
    GetFileStr,
    GetTemplate,
    GetUrl,
    HashFile,
    IsCached,
    ListMaster,
    ListMasterDirs,
    ListMasterSymlinks,
    ListMinion,
    ListStates,
    Push,
    PushDir,
    StatFile,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::CacheDest,
        Fun::CacheDir,
        Fun::CacheFile,
        Fun::CacheFiles,
        Fun::CacheLocalFile,
        Fun::CacheMaster,
        Fun::Envs,
        Fun::GetDir,
        Fun::GetFile,
        Fun::GetFileStr,
        Fun::GetTemplate,
        Fun::GetUrl,
        Fun::HashFile,
        Fun::IsCached,
        Fun::ListMaster,
        Fun::ListMasterDirs,
        Fun::ListMasterSymlinks,
        Fun::ListMinion,
        Fun::ListStates,
        Fun::Push,
        Fun::PushDir,
        Fun::StatFile,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::CacheDest => (
                "cp.cache_dest",
                "cache_dest",
                Signature::new(&["url", "saltenv"], 1, false, false),
                "
    Return the path cp.cache_file would cache a URL at (a salt:// file under
    files/<saltenv>/, an http(s) or other URL under extrn_files/), whether or
    not it is cached there. A path with no scheme is returned as it is.

    CLI Example:

        salt '*' cp.cache_dest salt://path/to/file
        salt '*' cp.cache_dest https://example.com/file.tgz saltenv=dev
    ",
            ),
            Fun::CacheDir => (
                "cp.cache_dir",
                "cache_dir",
                Signature::new(
                    &[
                        "path",
                        "saltenv",
                        "include_empty",
                        "include_pat",
                        "exclude_pat",
                    ],
                    1,
                    false,
                    false,
                ),
                "
    Cache every file under a directory of the master (salt://dir) and return
    their local paths. include_pat and exclude_pat (a glob, a regex after E@,
    or a list of them) narrow the files down by their path on the master;
    include_empty=True also makes the empty directories in the cache.

    CLI Example:

        salt '*' cp.cache_dir salt://path/to/dir
        salt '*' cp.cache_dir salt://path/to/dir include_pat='E@\\.py$'
    ",
            ),
            Fun::CacheFile => (
                "cp.cache_file",
                "cache_file",
                Signature::new(
                    &["path", "saltenv", "source_hash", "verify_ssl", "use_etag"],
                    1,
                    false,
                    false,
                ),
                "
    Cache a file from the master (salt://path) and return its local path, or
    False when the master has no such file.

    CLI Example:

        salt '*' cp.cache_file salt://path/to/file
    ",
            ),
            Fun::CacheFiles => (
                "cp.cache_files",
                "cache_files",
                Signature::new(&["paths", "saltenv"], 1, false, false),
                "
    Cache several files (a comma separated string or a list of URLs) as
    cp.cache_file caches each one; return the list of their local paths, False
    for each one that could not be cached.

    CLI Example:

        salt '*' cp.cache_files salt://path/to/file1,salt://path/to/file2
    ",
            ),
            Fun::CacheLocalFile => (
                "cp.cache_local_file",
                "cache_local_file",
                Signature::new(&["path"], 1, false, false),
                "
    Copy a file of this minion into the localfiles directory of the cache and
    return the copy's path ('' when the file does not exist); a copy that is
    already there with the same contents is kept.

    CLI Example:

        salt '*' cp.cache_local_file /etc/hosts
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
            Fun::Envs => (
                "cp.envs",
                "envs",
                Signature::NONE,
                "
    List the saltenvs of the file server.

    CLI Example:

        salt '*' cp.envs
    ",
            ),
            Fun::GetDir => (
                "cp.get_dir",
                "get_dir",
                Signature::new(
                    &["path", "dest", "saltenv", "template", "gzip"],
                    2,
                    false,
                    true,
                ),
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
                Signature::new(
                    &["path", "dest", "saltenv", "makedirs", "template", "gzip"],
                    2,
                    false,
                    true,
                ),
                "
    Copy a file of the master (salt://path) to dest on the minion and return
    dest ('' when the master has no such file).

    CLI Example:

        salt '*' cp.get_file salt://path/to/file /minion/dest makedirs=True
    ",
            ),
            Fun::GetFileStr => (
                "cp.get_file_str",
                "get_file_str",
                Signature::new(&["path", "saltenv"], 1, false, false),
                "
    Cache a file as cp.cache_file does and return its text; False when it
    cannot be cached or read.

    CLI Example:

        salt '*' cp.get_file_str salt://path/to/file
    ",
            ),
            Fun::GetUrl => (
                "cp.get_url",
                "get_url",
                Signature::new(
                    &["path", "dest", "saltenv", "makedirs", "source_hash"],
                    1,
                    false,
                    false,
                ),
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
                Signature::new(
                    &["path", "dest", "template", "saltenv", "makedirs"],
                    2,
                    false,
                    true,
                ),
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
    Return the hash of a file of the master (salt://path) as {hash_type, hsum},
    '' when there is no such file; of a local path, {hsum, hash_type} with the
    minion's hash_type, or [{}, None] when it is no file.

    CLI Example:

        salt '*' cp.hash_file salt://path/to/file
    ",
            ),
            Fun::IsCached => (
                "cp.is_cached",
                "is_cached",
                Signature::new(&["path", "saltenv"], 1, false, false),
                "
    Return the local path of a cached file (a master file, a local file cached
    with cp.cache_local_file or a cached URL), or '' when it is not cached.

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
            Fun::ListMasterSymlinks => (
                "cp.list_master_symlinks",
                "list_master_symlinks",
                Signature::new(&["saltenv", "prefix"], 0, false, false),
                "
    Map each symlink of a saltenv of the master to its target.

    CLI Example:

        salt '*' cp.list_master_symlinks
    ",
            ),
            Fun::ListMinion => (
                "cp.list_minion",
                "list_minion",
                Signature::new(&["saltenv"], 0, false, false),
                "
    List the files in this minion's cache of a saltenv and of local files
    (cp.cache_local_file).

    CLI Example:

        salt '*' cp.list_minion
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
                Signature::new(
                    &["path", "keep_symlinks", "upload_path", "remove_source"],
                    1,
                    false,
                    false,
                ),
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
            Fun::PushDir => (
                "cp.push_dir",
                "push_dir",
                Signature::new(&["path", "glob", "upload_path"], 1, false, false),
                "
    Send every file under a directory of this minion (an absolute path) to the
    master as cp.push sends one file; glob keeps the files whose name matches
    it, upload_path puts them under another directory on the master. Returns
    True, or False when there is nothing to send or a file is refused.

    CLI Example:

        salt '*' cp.push_dir /etc/modprobe.d/ glob='*.conf'
        salt '*' cp.push_dir /usr/lib/mysql upload_path='/newmysql/path'
    ",
            ),
            Fun::StatFile => (
                "cp.stat_file",
                "stat_file",
                Signature::new(&["path", "saltenv", "octal"], 1, false, false),
                "
    Return the permissions of a file of the master (salt://path) or of this
    minion (an absolute path) as an octal string, or the whole st_mode number
    with octal=False; None when there is no such file.

    CLI Example:

        salt '*' cp.stat_file salt://path/to/file
        salt '*' cp.stat_file /etc/hosts octal=False
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
        // The file server when there is one: some functions need none (URLs over the
        // network, this minion's own files and cache).
        let client = ctx
            .services
            .file_source()
            .map(|master| std::sync::Arc::new(FileClient::new(master, &ctx.services.cachedir)));
        let (b, ctx) = (b.clone(), ctx.clone());
        tokio::task::spawn_blocking(move || self.run_blocking(client, &b, &ctx))
            .await
            .map_err(|e| FnError::Exception(e.to_string()))?
    }

    /// The functions that may answer without the file server, then the others.
    fn run_blocking(
        self,
        client: Option<std::sync::Arc<FileClient>>,
        b: &Bound,
        ctx: &Context,
    ) -> Result<Value, FnError> {
        let master = || {
            client.clone().ok_or_else(|| {
                FnError::Execution(
                    "cp functions need the master's file server (this minion has no master)".into(),
                )
            })
        };
        let text = |key: &str| b.opt(key).map(py_str);
        let path = text("path").unwrap_or_default();
        let saltenv = saltenv_of(b, ctx);
        let cachedir = &ctx.services.cachedir;
        let salt_url = path.starts_with("salt://");
        Ok(match self {
            Fun::GetUrl if !salt_url => return self.run_url(&path, b, ctx),
            Fun::CacheFile => {
                let fetch = brine_state::url::Fetch {
                    source_hash: text("source_hash").filter(|h| !h.is_empty()),
                    verify_ssl: b.opt("verify_ssl").is_none_or(|v| is_true(Some(v))),
                    use_etag: is_true(b.opt("use_etag")),
                };
                let cached = cache_one(client.as_deref(), &path, &saltenv, &fetch, ctx)?;
                if !fetch.use_etag && !brine_protocol::payload::py_truthy(&cached) {
                    tracing::error!("Unable to cache file '{path}' from saltenv '{saltenv}'.");
                }
                cached
            }
            Fun::CacheFiles => {
                let paths = match b.get("paths") {
                    Some(Value::Array(items)) => items.iter().map(py_str).collect(),
                    Some(Value::Map(items)) => items.iter().map(|(k, _)| py_str(k)).collect(),
                    Some(Value::String(s)) => s
                        .as_str()
                        .unwrap_or_default()
                        .split(',')
                        .map(str::to_string)
                        .collect::<Vec<_>>(),
                    Some(other) => {
                        let class = py_type_name(other);
                        return Err(FnError::InvalidArgs(format!(
                            "'{class}' object is not iterable"
                        )));
                    }
                    None => Vec::new(),
                };
                let fetch = brine_state::url::Fetch::default();
                let mut out = Vec::new();
                for p in &paths {
                    out.push(cache_one(client.as_deref(), p, &saltenv, &fetch, ctx)?);
                }
                Value::Array(out)
            }
            Fun::GetFileStr => {
                let fetch = brine_state::url::Fetch::default();
                match cache_one(client.as_deref(), &path, &saltenv, &fetch, ctx)? {
                    Value::Boolean(false) => {
                        tracing::error!("Unable to cache file '{path}' from saltenv '{saltenv}'.");
                        Value::Boolean(false)
                    }
                    Value::String(p) => match std::fs::read(p.as_str().unwrap_or_default()) {
                        // An unreadable file (missing, a directory) is False; bytes that are
                        // not UTF-8 are Python's UnicodeDecodeError.
                        Err(_) => Value::Boolean(false),
                        Ok(bytes) => Value::from(String::from_utf8(bytes).map_err(|e| {
                            FnError::Exception(format!("UnicodeDecodeError: {}", e.utf8_error()))
                        })?),
                    },
                    other => other,
                }
            }
            Fun::CacheDest => cache_dest(cachedir, &text("url").unwrap_or_default(), &saltenv),
            Fun::IsCached => Value::from(is_cached(cachedir, &path, &saltenv)),
            Fun::CacheLocalFile => cache_local_file(ctx, &path)?,
            Fun::ListMinion => {
                let mut files = local_list(&cachedir.join("files").join(&saltenv));
                files.extend(local_list(&cachedir.join("localfiles")));
                Value::Array(files.into_iter().map(Value::from).collect())
            }
            Fun::HashFile if !salt_url => hash_local(ctx, Path::new(&path)),
            Fun::StatFile => {
                let mode = if salt_url {
                    let (rel, env) = split_url(&path, &saltenv);
                    let found = master()?
                        .request(vec![
                            ("cmd", Value::from("_file_find")),
                            ("path", Value::from(rel)),
                            ("saltenv", Value::from(env)),
                        ])
                        .map_err(FnError::Execution)?;
                    match brine_protocol::payload::get(&found, "stat") {
                        Some(Value::Array(stat)) => stat.first().and_then(Value::as_u64),
                        _ => None,
                    }
                } else {
                    use std::os::unix::fs::MetadataExt;
                    let mode = std::fs::metadata(&path)
                        .ok()
                        .filter(|m| m.is_file())
                        .map(|m| u64::from(m.mode()));
                    if mode.is_none() {
                        tracing::warn!("{}", not_present(Path::new(&path)));
                    }
                    mode
                };
                match mode {
                    None => Value::Nil,
                    // Salt's st_mode_to_octal: the last four characters of Python's oct().
                    Some(m) if b.get("octal").is_none_or(|v| *v == Value::Boolean(true)) => {
                        let oct = format!("0o{m:o}");
                        Value::from(&oct[oct.len().saturating_sub(4)..])
                    }
                    Some(m) => Value::from(m),
                }
            }
            Fun::CacheDir => cache_dir(&*master()?, cachedir, &path, &saltenv, b)?,
            Fun::PushDir => {
                let chunk = push_chunk(ctx);
                push_dir(client.as_deref(), &ctx.id, b, chunk)
            }
            _ => {
                return self
                    .run_master(&master()?, &saltenv, b, ctx)
                    .map_err(FnError::Execution)
            }
        })
    }

    /// `cp.get_url` of anything but a `salt://` URL: a local file, or an `http://` or
    /// `https://` URL fetched into the cache, to a path or as text. A failed fetch is Salt's
    /// `MinionError`; `ftp://`, `s3://` and `swift://` are refused by name.
    fn run_url(self, url: &str, b: &Bound, ctx: &Context) -> Result<Value, FnError> {
        let text = |key: &str| b.opt(key).filter(|v| !v.is_nil()).map(py_str);
        let saltenv = saltenv_of(b, ctx);
        let cachedir = &ctx.services.cachedir;
        let minion_error =
            |e: String| FnError::Exception(format!("salt.exceptions.MinionError: {e}"));
        if brine_state::url::remote_scheme(url).is_none() {
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
            return Err(minion_error(brine_state::url::refused(url)));
        }
        let fetch = brine_state::url::Fetch {
            source_hash: text("source_hash").filter(|h| !h.is_empty()),
            ..Default::default()
        };
        let opts = brine_state::url::HttpOptions::from_opts(&ctx.services.opts);
        match b.get("dest") {
            // dest=None: the contents.
            Some(v) if v.is_nil() => {
                let bytes =
                    brine_state::url::fetch_bytes(&opts, url, &fetch).map_err(minion_error)?;
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
        }
    }

    /// The functions that need the file server.
    fn run_master(
        self,
        client: &std::sync::Arc<FileClient>,
        saltenv: &str,
        b: &Bound,
        ctx: &Context,
    ) -> Result<Value, String> {
        let text = |key: &str| b.opt(key).map(py_str);
        let saltenv = saltenv.to_string();
        let path = text("path").unwrap_or_default();
        let strings = |l: Vec<String>| Value::Array(l.into_iter().map(Value::from).collect());
        let path_value = |p: PathBuf| Value::from(p.display().to_string());
        Ok(match self {
            Fun::Envs => strings(client.envs()?),
            Fun::ListMasterSymlinks => {
                let prefix = text("prefix").unwrap_or_default();
                Value::Map(
                    client
                        .symlink_list(&saltenv, &prefix)?
                        .into_iter()
                        .map(|(k, v)| (Value::from(k), Value::from(v)))
                        .collect(),
                )
            }
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
                        String::from_utf8_lossy(&std::fs::read(p).map_err(|e| e.to_string())?)
                            .into_owned(),
                    ),
                    None => Value::Boolean(false),
                },
                dest => {
                    let dest = dest.map(py_str).unwrap_or_default();
                    match client.cache_file(&path, &saltenv)? {
                        None => Value::Boolean(false),
                        Some(cached) if dest.is_empty() => path_value(cached),
                        // A directory gets the URL's last part, as for any URL.
                        Some(cached) => match place(
                            &cached,
                            &path,
                            &url_dest(&path, &dest).display().to_string(),
                            is_true(b.opt("makedirs")),
                        )? {
                            Some(d) => path_value(d),
                            None => Value::Boolean(false),
                        },
                    }
                }
            },
            Fun::HashFile => client.hash(&path, &saltenv)?,
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
                let text = |key: &str| b.opt(key).map(py_str);
                let upload_path = text("upload_path");
                let file = Push {
                    path: &path,
                    keep_symlinks: is_true(b.opt("keep_symlinks")),
                    upload_path: upload_path.as_deref(),
                    remove_source: is_true(b.opt("remove_source")),
                };
                push(client, &ctx.id, &file, push_chunk(ctx))
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
                    Some(cached) => match place(&cached, &path, &dest, is_true(b.opt("makedirs")))?
                    {
                        Some(d) => path_value(d),
                        None => Value::Boolean(false),
                    },
                }
            }
            Fun::GetDir => {
                let dest = text("dest").unwrap_or_default();
                let (dir, env) = split_url(&path, &saltenv);
                let dir = dir.trim_end_matches('/').to_string();
                let parent = Path::new(&dir)
                    .parent()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                let mut written = Vec::new();
                for f in client.list(&env)? {
                    if !f.starts_with(&format!("{dir}/")) {
                        continue;
                    }
                    let rel = f
                        .strip_prefix(&parent)
                        .unwrap_or(&f)
                        .trim_start_matches('/');
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
                    return Err(format!(
                        "Attempted to render file paths with unavailable engine {template}"
                    ));
                }
                let vars = b
                    .kwargs
                    .iter()
                    .filter(|(k, _)| !k.starts_with("__"))
                    .map(|(k, v)| (k.clone(), brine_protocol::payload::to_json(v)))
                    .collect();
                let Some(text) = render_master_file(client, ctx, &path, &saltenv, vars)? else {
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
            // Answered by run_blocking.
            Fun::CacheDest
            | Fun::CacheDir
            | Fun::CacheFile
            | Fun::CacheFiles
            | Fun::CacheLocalFile
            | Fun::GetFileStr
            | Fun::IsCached
            | Fun::ListMinion
            | Fun::PushDir
            | Fun::StatFile => return Err(format!("{} needs no file server", self.spec().name)),
        })
    }
}

/// Salt's default saltenv of the `cp` functions: the argument when it is set, else the
/// minion's `saltenv` option, else `base`.
fn saltenv_of(b: &Bound, ctx: &Context) -> String {
    b.opt("saltenv")
        .filter(|v| brine_protocol::payload::py_truthy(v))
        .map(py_str)
        .or_else(|| {
            ctx.services
                .opts
                .get("saltenv")
                .and_then(serde_json::Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "base".into())
}

/// The file client's `cache_file` (a `get_url` with no destination): a `salt://` file
/// cached from the file server (`False` when it has no such file), an `http://` or
/// `https://` URL fetched under `extrn_files`, a local path (or `file://` URL) as it is.
fn cache_one(
    client: Option<&FileClient>,
    url: &str,
    saltenv: &str,
    fetch: &brine_state::url::Fetch,
    ctx: &Context,
) -> Result<Value, FnError> {
    if url.starts_with("salt://") {
        let client = client.ok_or_else(|| {
            FnError::Execution(
                "cp functions need the master's file server (this minion has no master)".into(),
            )
        })?;
        return Ok(
            match client
                .cache_file(url, saltenv)
                .map_err(FnError::Execution)?
            {
                Some(p) => Value::from(p.display().to_string()),
                None => Value::Boolean(false),
            },
        );
    }
    if brine_state::url::remote_scheme(url).is_none() {
        return local_path(url).map(Value::from).map_err(FnError::Execution);
    }
    let opts = brine_state::url::HttpOptions::from_opts(&ctx.services.opts);
    brine_state::url::cache_url(&opts, &ctx.services.cachedir, url, saltenv, fetch)
        .map(|p| Value::from(p.display().to_string()))
        .map_err(|e| FnError::Exception(format!("salt.exceptions.MinionError: {e}")))
}

/// `cp.cache_dest`: where `url` is (or would be) cached.
fn cache_dest(cachedir: &Path, url: &str, saltenv: &str) -> Value {
    match url_scheme(url).as_str() {
        "" => Value::from(url),
        "salt" => {
            let (rel, env) = split_url(url, saltenv);
            let joined = format!(
                "{}/files/{env}/{}",
                cachedir.display(),
                rel.trim_start_matches(['|', '/'])
            );
            Value::from(brine_protocol::posixpath::normpath(&joined))
        }
        _ => match brine_state::url::extrn_path(cachedir, url, saltenv) {
            Ok(p) => Value::from(p.display().to_string()),
            // Salt returns its "Invalid path" text.
            Err(e) => Value::from(e),
        },
    }
}

/// `cp.cache_local_file`: a copy of a file of this minion under `localfiles` of the cache,
/// kept when the copy already there has the same hash.
fn cache_local_file(ctx: &Context, path: &str) -> Result<Value, FnError> {
    if !Path::new(path).exists() {
        return Ok(Value::from(""));
    }
    let cachedir = &ctx.services.cachedir;
    let cached = is_cached(cachedir, path, &saltenv_of(&Bound::default(), ctx));
    if !cached.is_empty() {
        let hsum = |p: &Path| {
            brine_protocol::payload::get_str(&hash_local(ctx, p), "hsum").map(str::to_string)
        };
        if hsum(Path::new(path)).is_some_and(|h| Some(h) == hsum(Path::new(&cached))) {
            return Ok(Value::from(cached));
        }
    }
    let dest = cachedir
        .join("localfiles")
        .join(path.trim_start_matches('/'));
    let exception = |e: std::io::Error| FnError::Exception(e.to_string());
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(exception)?;
    }
    if Path::new(path).is_dir() {
        return Err(FnError::Exception(format!(
            "IsADirectoryError: [Errno 21] Is a directory: '{path}'"
        )));
    }
    // The contents only, as shutil.copyfile copies (not the mode).
    let mut from = std::fs::File::open(path).map_err(exception)?;
    let mut to = std::fs::File::create(&dest).map_err(exception)?;
    std::io::copy(&mut from, &mut to).map_err(exception)?;
    Ok(Value::from(dest.display().to_string()))
}

/// The hash of a file of this minion with the minion's `hash_type` (`{hsum, hash_type}`);
/// for a path that is no file, the `[{}, None]` Salt's file client answers.
fn hash_local(ctx: &Context, path: &Path) -> Value {
    use brine_protocol::crypt::HashType;
    let form = ctx
        .services
        .opts
        .get("hash_type")
        .and_then(serde_json::Value::as_str)
        .and_then(HashType::parse)
        .unwrap_or(HashType::Sha256);
    let hsum = std::fs::File::open(path)
        .ok()
        .filter(|_| path.is_file())
        .and_then(|f| brine_protocol::crypt::hash_reader(f, form).ok());
    match hsum {
        Some(h) => brine_protocol::payload::map(vec![
            ("hsum", Value::from(h)),
            ("hash_type", Value::from(form.as_str())),
        ]),
        None => {
            tracing::warn!("{}", not_present(path));
            Value::Array(vec![Value::Map(vec![]), Value::Nil])
        }
    }
}

/// Salt's warning for a local path with no file to hash.
fn not_present(path: &Path) -> String {
    let p = path.display();
    format!("specified file {p} is not present to generate hash: Unsupported path: {p}")
}

/// The files under `dest` (under its directory when it is no directory), symlinks
/// followed, as Salt's `_file_local_list` walks them.
fn local_list(dest: &Path) -> std::collections::BTreeSet<String> {
    let top = if dest.is_dir() {
        dest
    } else {
        dest.parent().unwrap_or(dest)
    };
    let mut out = std::collections::BTreeSet::new();
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![top.to_path_buf()];
    while let Some(dir) = todo.pop() {
        // A symlink loop is walked once.
        if !std::fs::canonicalize(&dir).is_ok_and(|c| seen.insert(c)) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.display().to_string());
            }
        }
    }
    out
}

/// `cp.cache_dir`: the files of the file server under the directory `url` (a `salt://` URL
/// whose `saltenv` query is not read, as Salt does not read it), filtered by `include_pat`
/// and `exclude_pat`, each cached; with `include_empty`, the empty directories under it
/// made in the cache too.
fn cache_dir(
    client: &FileClient,
    cachedir: &Path,
    url: &str,
    saltenv: &str,
    b: &Bound,
) -> Result<Value, FnError> {
    let Some(rest) = url.strip_prefix("salt://") else {
        return Err(FnError::Exception(format!(
            "salt.exceptions.MinionError: Unsupported path: {url}"
        )));
    };
    let execution = FnError::Execution;
    let (mut dir, _) = split_url(rest, saltenv);
    if !dir.ends_with('/') {
        dir.push('/');
    }
    let (include, exclude) = (
        b.opt("include_pat").map(brine_protocol::payload::to_json),
        b.opt("exclude_pat").map(brine_protocol::payload::to_json),
    );
    let wanted = |f: &str| {
        brine_state::states::file::include_exclude(f, include.as_ref(), exclude.as_ref())
            .map_err(FnError::Exception)
    };
    let mut out = Vec::new();
    for f in client.list(saltenv).map_err(execution)? {
        if f.trim().is_empty() || !f.starts_with(&dir) || !wanted(&f)? {
            continue;
        }
        if let Some(p) = client.cache_file(&f, saltenv).map_err(execution)? {
            out.push(Value::from(p.display().to_string()));
        }
    }
    if is_true(b.opt("include_empty")) {
        let empty = client
            .request(vec![
                ("cmd", Value::from("_file_list_emptydirs")),
                ("saltenv", Value::from(saltenv)),
                ("prefix", Value::from("")),
            ])
            .map_err(execution)?;
        let dest = cachedir.join("files").join(saltenv);
        for d in empty
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if d.starts_with(&dir) {
                let made = format!("{}/{d}", dest.display());
                std::fs::create_dir_all(&made).map_err(|e| FnError::Exception(e.to_string()))?;
                out.push(Value::from(made));
            }
        }
    }
    Ok(Value::Array(out))
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
    let path = url
        .strip_prefix("file://")
        .unwrap_or(url)
        .trim_end_matches('/');
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
fn place(
    cached: &Path,
    source: &str,
    dest: &str,
    makedirs: bool,
) -> Result<Option<PathBuf>, String> {
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

/// The bytes of one `cp.push` chunk: the minion's `file_buffer_size`.
fn push_chunk(ctx: &Context) -> usize {
    ctx.services
        .opts
        .get("file_buffer_size")
        .and_then(serde_json::Value::as_u64)
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_FILE_BUFFER_SIZE) as usize
}

/// What `cp.push` sends: the file, and how.
struct Push<'a> {
    path: &'a str,
    keep_symlinks: bool,
    upload_path: Option<&'a str>,
    remove_source: bool,
}

/// `cp.push_dir`: the files under a directory of this minion (or one file), those whose
/// name matches `glob`, each sent by `cp.push` (under `upload_path` on the master when it is
/// given); True once all were sent, False when there is none, the first refusal otherwise.
fn push_dir(client: Option<&FileClient>, id: &str, b: &Bound, chunk: usize) -> Value {
    let text = |key: &str| b.opt(key).map(py_str);
    let path = text("path").unwrap_or_default();
    if path.contains("../") || !path.starts_with('/') {
        return Value::Boolean(false);
    }
    let Ok(real) = std::fs::canonicalize(&path) else {
        return Value::Boolean(false);
    };
    let upload_path = text("upload_path").filter(|u| !u.is_empty());
    let send = |file: &str, upload_path: Option<&str>| match client {
        Some(client) => {
            let one = Push {
                path: file,
                keep_symlinks: false,
                upload_path,
                remove_source: false,
            };
            push(client, id, &one, chunk)
        }
        None => Value::Boolean(false),
    };
    let real_text = real.display().to_string();
    if real.is_file() {
        return send(&real_text, upload_path.as_deref());
    }
    // os.walk without following symlinks: a symlink to a directory is not entered.
    let mut files = Vec::new();
    let mut todo = vec![real.clone()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if p.is_dir() {
                if !is_link {
                    todo.push(p);
                }
            } else {
                files.push(p.display().to_string());
            }
        }
    }
    if let Some(glob) = text("glob") {
        files.retain(|f| fnmatch(&glob, f.rsplit('/').next().unwrap_or_default()));
    }
    if files.is_empty() {
        return Value::Boolean(false);
    }
    for file in &files {
        let target = upload_path
            .as_deref()
            .filter(|_| file.starts_with(&real_text))
            .map(|up| {
                let rest = file.replace(&real_text, "");
                let parts = [up.trim_matches('/'), rest.trim_matches('/')];
                let mut joined = String::from("/");
                for part in parts {
                    if !part.is_empty() {
                        if !joined.ends_with('/') {
                            joined.push('/');
                        }
                        joined.push_str(part);
                    }
                }
                joined
            });
        let sent = send(file, target.as_deref().or(upload_path.as_deref()));
        if !brine_protocol::payload::py_truthy(&sent) {
            return sent;
        }
    }
    Value::Boolean(true)
}

/// `cp.push`: the file sent in `_file_recv` chunks as Salt's minion sends them (the path on
/// the minion as a list of parts, each chunk with its offset), `True` once the master took
/// every chunk; `False` when the path is not an absolute path of a file or the master refuses.
fn push(client: &FileClient, id: &str, what: &Push, chunk: usize) -> Value {
    use std::io::Read;
    let path = what.path;
    if path.contains("../") || !path.starts_with('/') {
        tracing::debug!("cp.push: path must be absolute: {path}");
        return Value::Boolean(false);
    }
    let path = if what.keep_symlinks {
        PathBuf::from(path)
    } else {
        match std::fs::canonicalize(path) {
            Ok(p) => p,
            Err(_) => return Value::Boolean(false),
        }
    };
    if !path.is_file() {
        return Value::Boolean(false);
    }
    let load_path = match what.upload_path.filter(|up| !up.is_empty()) {
        Some(up) if up.contains("../") => return Value::Boolean(false),
        Some(up) => up.to_string(),
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
                return if other.is_nil() {
                    Value::Boolean(false)
                } else {
                    other
                };
            }
            Err(e) => {
                tracing::error!("cp.push: {e}");
                return Value::Boolean(false);
            }
        }
        sent_one = true;
        loc += n as u64;
    }
    if what.remove_source && std::fs::remove_file(&path).is_err() {
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
    use brine_protocol::payload::Value;
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
            vec![
                "cp.cache_file".into(),
                format!("{base}/a.txt"),
                format!("source_hash={hash}"),
            ],
            vec![
                "cp.cache_file".into(),
                format!("{}/a.txt", base.replace("//", "//u:pw@")),
            ],
            vec![
                "cp.cache_file".into(),
                format!("{base}/a.txt"),
                "saltenv=dev".into(),
            ],
            vec!["cp.cache_file".into(), format!("{base}/nope.txt")],
            vec!["cp.is_cached".into(), format!("{base}/nope.txt")],
            vec![
                "cp.cache_file".into(),
                format!("http://127.0.0.1:{closed}/x"),
            ],
        ];
        let mut cases = cases;
        cases.extend([
            vec!["cp.get_url".into(), format!("{base}/a.txt?g=1")],
            vec![
                "cp.get_url".into(),
                format!("{base}/a.txt"),
                "dest=None".into(),
            ],
            vec![
                "cp.get_url".into(),
                format!("{base}/a.txt"),
                "{D}/new/x.txt".into(),
            ],
            vec![
                "cp.get_url".into(),
                format!("{base}/a.txt"),
                "{D}/new/x.txt".into(),
                "makedirs=True".into(),
            ],
            vec!["cp.get_url".into(), format!("{base}/a.txt"), "{D}/".into()],
            vec![
                "cp.get_url".into(),
                format!("{base}/nope.txt"),
                "{D}/nope.txt".into(),
            ],
            vec![
                "cp.get_url".into(),
                "{D}/new/x.txt".into(),
                "dest=None".into(),
            ],
        ]);
        let (salt_dir, brine_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut failures = Vec::new();
        for case in &cases {
            let fill = |d: &std::path::Path| -> Vec<String> {
                case.iter()
                    .map(|w| w.replace("{D}", &d.display().to_string()))
                    .collect()
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

    /// A file server over `<root>/<saltenv>/` directories, answering what the `cp` functions
    /// ask as Salt 3007's roots backend answers (file lists with symlinks followed, empty
    /// directories, symlinks, hashes, stats, chunks); `_file_recv` loads are kept and taken.
    struct Roots {
        root: std::path::PathBuf,
        received: std::sync::Mutex<Vec<(Vec<String>, Vec<u8>)>>,
    }

    impl Roots {
        /// Every file and every empty directory under the saltenv's directory.
        fn walk(&self, saltenv: &str) -> (Vec<String>, Vec<String>) {
            let top = self.root.join(saltenv);
            let (mut files, mut empty) = (Vec::new(), Vec::new());
            let mut todo = vec![top.clone()];
            while let Some(dir) = todo.pop() {
                let mut entries: Vec<_> = std::fs::read_dir(&dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .collect();
                if entries.is_empty() && dir != top {
                    empty.push(dir.strip_prefix(&top).unwrap().display().to_string());
                }
                entries.sort_by_key(|e| e.file_name());
                for e in entries {
                    if e.path().is_dir() {
                        todo.push(e.path());
                    } else {
                        files.push(e.path().strip_prefix(&top).unwrap().display().to_string());
                    }
                }
            }
            files.sort();
            empty.sort();
            (files, empty)
        }
    }

    impl crate::fileclient::FileSource for Roots {
        fn request(&self, load: &Value) -> Result<Value, String> {
            use std::os::unix::fs::MetadataExt;
            let arg = |k: &str| {
                brine_protocol::payload::get_str(load, k)
                    .unwrap_or_default()
                    .to_string()
            };
            let strings = |l: Vec<String>| Value::Array(l.into_iter().map(Value::from).collect());
            let file = self.root.join(arg("saltenv")).join(arg("path"));
            let is_file = !arg("path").is_empty() && file.is_file();
            Ok(match arg("cmd").as_str() {
                "_file_envs" => strings(vec!["base".into(), "dev".into()]),
                "_file_list" => strings(self.walk(&arg("saltenv")).0),
                "_file_list_emptydirs" => strings(self.walk(&arg("saltenv")).1),
                "_symlink_list" => {
                    let top = self.root.join(arg("saltenv"));
                    let mut links = Vec::new();
                    for e in std::fs::read_dir(&top).into_iter().flatten().flatten() {
                        let name = e.file_name().to_string_lossy().into_owned();
                        if !name.starts_with(&arg("prefix")) {
                            continue;
                        }
                        if let Ok(target) = std::fs::read_link(e.path()) {
                            links.push((
                                Value::from(name),
                                Value::from(target.display().to_string()),
                            ));
                        }
                    }
                    Value::Map(links)
                }
                "_file_hash" if is_file => brine_protocol::payload::map(vec![
                    ("hash_type", Value::from("sha256")),
                    (
                        "hsum",
                        Value::from(brine_protocol::crypt::hash_hex(
                            &std::fs::read(&file).unwrap(),
                            brine_protocol::crypt::HashType::Sha256,
                        )),
                    ),
                ]),
                "_file_hash" => Value::from(""),
                "_file_find" if is_file => brine_protocol::payload::map(vec![
                    ("path", Value::from(file.display().to_string())),
                    ("rel", Value::from(arg("path"))),
                    (
                        "stat",
                        Value::Array(vec![Value::from(std::fs::metadata(&file).unwrap().mode())]),
                    ),
                ]),
                "_file_find" => brine_protocol::payload::map(vec![
                    ("path", Value::from("")),
                    ("rel", Value::from("")),
                ]),
                "_serve_file" => {
                    let loc = brine_protocol::payload::get(load, "loc").and_then(Value::as_u64);
                    let data = match loc {
                        Some(0) if is_file => std::fs::read(&file).unwrap(),
                        _ => Vec::new(),
                    };
                    brine_protocol::payload::map(vec![
                        ("data", Value::Binary(data)),
                        ("dest", Value::from(arg("path"))),
                    ])
                }
                "_file_recv" => {
                    let path = match brine_protocol::payload::get(load, "path") {
                        Some(Value::Array(parts)) => parts.iter().map(super::py_str).collect(),
                        _ => Vec::new(),
                    };
                    let data = match brine_protocol::payload::get(load, "data") {
                        Some(Value::Binary(b)) => b.clone(),
                        _ => Vec::new(),
                    };
                    self.received.lock().unwrap().push((path, data));
                    Value::Boolean(true)
                }
                other => return Err(format!("{other} is not a file server request")),
            })
        }
    }

    /// The tree of the comparison with Salt 3007 (`file_roots` base and dev), a file of the
    /// minion's own (`local/l.txt`, mode 0640) and a directory of them (`local/pd`), and a
    /// masterless minion over it whose cache directory is `<tmp>/cache`.
    fn roots() -> (tempfile::TempDir, crate::functions::Context, Arc<Roots>) {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &[u8]| {
            let p = tmp.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w("srv/base/a.txt", b"hello\n");
        w("srv/base/sub/b.txt", b"b file\n");
        w("srv/base/sub/x.py", b"print(1)\n");
        w("srv/base/sub/deep/c.txt", b"deep\n");
        w("srv/base/crlf.txt", b"crlf\r\nline\rx\n");
        w("srv/base/bin.dat", b"\xff\xfe");
        w("srv/dev/a.txt", b"dev a\n");
        w("srv/dev/d/only.txt", b"dev only\n");
        w("local/l.txt", b"local file\n");
        w("local/pd/one.conf", b"1");
        w("local/pd/s/two.conf", b"2");
        w("local/pd/three.txt", b"3");
        for d in ["srv/base/emptydir", "srv/base/sub/emptyin"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        std::os::unix::fs::symlink("a.txt", tmp.path().join("srv/base/link.txt")).unwrap();
        let mode = |rel: &str, m: u32| {
            std::fs::set_permissions(tmp.path().join(rel), std::fs::Permissions::from_mode(m))
                .unwrap()
        };
        mode("srv/base/sub/x.py", 0o755);
        mode("srv/base/a.txt", 0o644);
        mode("local/l.txt", 0o640);
        let files = Arc::new(Roots {
            root: tmp.path().join("srv"),
            received: Default::default(),
        });
        let mut services = crate::functions::Services::detached().with_local_files(files.clone());
        services.cachedir = tmp.path().join("cache");
        let mut ctx = crate::functions::testutil::ctx();
        ctx.services = Arc::new(services);
        (tmp, ctx, files)
    }

    /// Each call of `cases` (arguments with `{T}` for the temporary directory) answers as
    /// `salt-call --local` of Salt 3007 answered on the same tree, the cache directory read
    /// as `{C}` and the temporary directory as `{T}`; `None` for a retcode-1 answer, whose text
    /// is checked to start with the given words.
    async fn check(
        ctx: &crate::functions::Context,
        tmp: &std::path::Path,
        cases: &[(&str, &[&str], &str)],
    ) {
        let mut failures = Vec::new();
        for (fun, args, want) in cases {
            let args: Vec<String> = args
                .iter()
                .map(|a| a.replace("{T}", &tmp.display().to_string()))
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let got = brine_in(ctx, fun, &args).await;
            let text = got
                .ret
                .to_string()
                .replace(&tmp.join("cache").display().to_string(), "{C}")
                .replace(&tmp.display().to_string(), "{T}");
            let ok = match want.strip_prefix("ERR ") {
                Some(start) => got.retcode == 1 && text.trim_matches('"').starts_with(start),
                None => got.retcode == 0 && text == *want,
            };
            if !ok {
                failures.push(format!(
                    "{fun} {args:?}\n  want: {want}\n  got:  {text} ({})",
                    got.retcode
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// `cp.cache_dir`, `cp.cache_files`, `cp.get_file_str` and `cp.cache_dest`, with what
    /// Salt 3007 returned for the same calls on the same tree.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn caching_answers_as_salt_3007() {
        let (tmp, ctx, _) = roots();
        let c = |rel: &str| format!("\"{{C}}/files/{rel}\"");
        let sub = format!(
            "[{},{},{}]",
            c("base/sub/b.txt"),
            c("base/sub/deep/c.txt"),
            c("base/sub/x.py")
        );
        let sub_empty = format!(
            "[{},{},{},{}]",
            c("base/sub/b.txt"),
            c("base/sub/deep/c.txt"),
            c("base/sub/x.py"),
            c("base/sub/emptyin")
        );
        let txt = format!("[{},{}]", c("base/sub/b.txt"), c("base/sub/deep/c.txt"));
        let no_deep = format!("[{},{}]", c("base/sub/b.txt"), c("base/sub/x.py"));
        let only_b = format!("[{}]", c("base/sub/b.txt"));
        let dev = format!("[{}]", c("dev/d/only.txt"));
        let only_py = format!("[{}]", c("base/sub/x.py"));
        let (base_a, dev_a) = (c("base/a.txt"), c("dev/a.txt"));
        let files = format!("[{},false,{}]", c("base/a.txt"), c("base/sub/b.txt"));
        let files_dev = format!("[{},{}]", c("dev/a.txt"), c("dev/d/only.txt"));
        let cases: Vec<(&str, &[&str], &str)> = vec![
            ("cp.cache_dir", &["salt://sub"], &sub),
            ("cp.cache_dir", &["salt://sub", "include_empty=True"], &sub_empty),
            ("cp.cache_dir", &["salt://sub/", "include_pat=*.txt"], &txt),
            ("cp.cache_dir", &["salt://sub", "exclude_pat=E@deep"], &no_deep),
            ("cp.cache_dir", &["salt://sub", "include_pat=E@\\.py$"], &only_py),
            (
                "cp.cache_dir",
                &["salt://sub", "include_pat=[\"*.txt\", \"*.py\"]", "exclude_pat=[\"*deep*\"]"],
                &no_deep,
            ),
            ("cp.cache_dir", &["salt://sub", "exclude_pat=[\"*deep*\", \"*.py\"]"], &only_b),
            ("cp.cache_dir", &["salt://sub", "include_pat=*/b*"], &only_b),
            ("cp.cache_dir", &["salt://d", "dev"], &dev),
            // The saltenv of the URL is not read, nor is an empty directory the path itself.
            ("cp.cache_dir", &["salt://d?saltenv=dev"], "[]"),
            ("cp.cache_dir", &["salt://emptydir", "include_empty=True"], "[]"),
            ("cp.cache_dir", &["salt://", "include_empty=True"], "[]"),
            ("cp.cache_dir", &["salt://su"], "[]"),
            ("cp.cache_dir", &["salt://nosuch"], "[]"),
            (
                "cp.cache_dir",
                &["sub"],
                "ERR The minion function caused an exception: salt.exceptions.MinionError: Unsupported path: sub",
            ),
            ("cp.cache_files", &["salt://a.txt,salt://nosuch,salt://sub/b.txt"], &files),
            ("cp.cache_files", &["salt://a.txt?saltenv=dev,salt://d/only.txt", "dev"], &files_dev),
            ("cp.cache_files", &["{T}/local/l.txt/"], "[\"{T}/local/l.txt\"]"),
            ("cp.cache_files", &["a.txt"], "ERR ERROR: Path 'a.txt' is not absolute"),
            ("cp.cache_files", &["5"], "ERR Passed invalid arguments: 'int' object is not iterable."),
            ("cp.get_file_str", &["salt://a.txt"], "\"hello\\n\""),
            ("cp.get_file_str", &["salt://crlf.txt"], "\"crlf\\r\\nline\\rx\\n\""),
            ("cp.get_file_str", &["salt://a.txt?saltenv=dev"], "\"dev a\\n\""),
            ("cp.get_file_str", &["salt://a.txt", "dev"], "\"dev a\\n\""),
            ("cp.get_file_str", &["salt://nosuch"], "false"),
            ("cp.get_file_str", &["{T}/local/l.txt"], "\"local file\\n\""),
            ("cp.get_file_str", &["{T}/nonexist"], "false"),
            ("cp.get_file_str", &["{T}/local"], "false"),
            ("cp.get_file_str", &["rel"], "ERR ERROR: Path 'rel' is not absolute"),
            ("cp.get_file_str", &["salt://bin.dat"], "ERR The minion function caused an exception: UnicodeDecodeError"),
            ("cp.cache_dest", &["salt://a.txt"], &base_a),
            ("cp.cache_dest", &["salt://a.txt?saltenv=dev"], &dev_a),
            ("cp.cache_dest", &["salt://|a.txt", "dev"], &dev_a),
            ("cp.cache_dest", &["/etc/hosts"], "\"/etc/hosts\""),
            ("cp.cache_dest", &["relative/x"], "\"relative/x\""),
            (
                "cp.cache_dest",
                &["https://u:p@example.com:8080/x/y.tgz?a=1"],
                "\"{C}/extrn_files/base/example.com8080/x/y.tgz-a=1\"",
            ),
            ("cp.cache_dest", &["file:///etc/hosts"], "\"{C}/extrn_files/base/etc/hosts\""),
            ("cp.cache_dest", &["https://h/../../x"], "\"Invalid path\""),
        ];
        check(&ctx, tmp.path(), &cases).await;
        // The empty directory is made in the cache.
        assert!(tmp.path().join("cache/files/base/sub/emptyin").is_dir());
        assert_eq!(
            std::fs::read(tmp.path().join("cache/files/dev/d/only.txt")).unwrap(),
            b"dev only\n"
        );
    }

    /// `cp.is_cached`, `cp.cache_local_file`, `cp.list_minion`, `cp.hash_file` and
    /// `cp.stat_file` of local paths and of the file server, `cp.envs` and
    /// `cp.list_master_symlinks`, in the order Salt 3007 was asked on the same tree.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_cache_and_local_files_answer_as_salt_3007() {
        let (tmp, ctx, _) = roots();
        let localfile = "\"{C}/localfiles{T}/local/l.txt\"";
        let cases: Vec<(&str, &[&str], &str)> = vec![
            ("cp.is_cached", &["salt://a.txt"], "\"\""),
            ("cp.cache_file", &["salt://a.txt"], "\"{C}/files/base/a.txt\""),
            ("cp.cache_file", &["salt://a.txt", "dev"], "\"{C}/files/dev/a.txt\""),
            ("cp.is_cached", &["salt://a.txt"], "\"{C}/files/base/a.txt\""),
            ("cp.is_cached", &["salt://|a.txt"], "\"|{C}/files/base/a.txt\""),
            ("cp.is_cached", &["salt://a.txt?saltenv=dev"], "\"{C}/files/dev/a.txt\""),
            ("cp.is_cached", &["salt://a.txt", "nosuchenv"], "\"\""),
            ("cp.is_cached", &["{T}/local/l.txt"], "\"\""),
            ("cp.list_minion", &[], "[\"{C}/files/base/a.txt\",\"{C}/files/dev/a.txt\"]"),
            ("cp.cache_local_file", &["{T}/local/l.txt"], localfile),
            ("cp.is_cached", &["{T}/local/l.txt"], localfile),
            ("cp.is_cached", &["|{T}/local/l.txt"], "\"|{C}/localfiles{T}/local/l.txt\""),
            ("cp.cache_local_file", &["{T}/local/l.txt"], localfile),
            ("cp.cache_local_file", &["{T}/nonexist"], "\"\""),
            (
                "cp.cache_local_file",
                &["{T}/local/pd"],
                "ERR The minion function caused an exception: IsADirectoryError: [Errno 21] Is a directory: '{T}/local/pd'",
            ),
            ("cp.list_minion", &[], "[\"{C}/files/base/a.txt\",\"{C}/localfiles{T}/local/l.txt\"]"),
            ("cp.list_minion", &["dev"], "[\"{C}/files/dev/a.txt\",\"{C}/localfiles{T}/local/l.txt\"]"),
            (
                "cp.hash_file",
                &["{T}/local/l.txt"],
                "{\"hsum\":\"3396c739f6e425babf76d33999d0fe3afcf3157b1ce2e68afc33968d49c72b94\",\"hash_type\":\"sha256\"}",
            ),
            ("cp.hash_file", &["{T}/nonexist"], "[{},null]"),
            ("cp.hash_file", &["a.txt"], "[{},null]"),
            ("cp.hash_file", &["{T}/local"], "[{},null]"),
            ("cp.stat_file", &["salt://a.txt"], "\"0644\""),
            ("cp.stat_file", &["salt://sub/x.py"], "\"0755\""),
            ("cp.stat_file", &["salt://sub/x.py", "octal=False"], "33261"),
            ("cp.stat_file", &["salt://a.txt", "octal=1"], "33188"),
            ("cp.stat_file", &["salt://nosuch"], "null"),
            ("cp.stat_file", &["salt://sub"], "null"),
            ("cp.stat_file", &["salt://a.txt?saltenv=dev"], "\"0644\""),
            ("cp.stat_file", &["{T}/local/l.txt"], "\"0640\""),
            ("cp.stat_file", &["{T}/local/l.txt", "octal=False"], "33184"),
            ("cp.stat_file", &["{T}/local"], "null"),
            ("cp.stat_file", &["relative"], "null"),
            ("cp.envs", &[], "[\"base\",\"dev\"]"),
            ("cp.list_master_symlinks", &[], "{\"link.txt\":\"a.txt\"}"),
            ("cp.list_master_symlinks", &["prefix=a"], "{}"),
            ("cp.list_master_symlinks", &["dev"], "{}"),
        ];
        check(&ctx, tmp.path(), &cases).await;
        // The local file's copy has its contents, not its mode.
        let copy = tmp.path().join(format!(
            "cache/localfiles{}/local/l.txt",
            tmp.path().display()
        ));
        assert_eq!(std::fs::read(&copy).unwrap(), b"local file\n");
    }

    /// `cp.push_dir`: each file under the directory (those matching `glob`) sent as `cp.push`
    /// sends it, under `upload_path` when given; False for a relative path, a path with
    /// `../`, a missing path or no matching file, as Salt 3007's module answers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn push_dir_sends_each_file() {
        let (tmp, ctx, files) = roots();
        let sent = || {
            let mut got: Vec<String> = files
                .received
                .lock()
                .unwrap()
                .drain(..)
                .map(|(p, data)| format!("{}={}", p.join("/"), String::from_utf8_lossy(&data)))
                .collect();
            got.sort();
            got
        };
        let t = tmp.path().display().to_string();
        let rel = t.trim_start_matches('/');
        let pd = format!("{t}/local/pd");
        let push = |args: Vec<String>| {
            let ctx = ctx.clone();
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                brine_in(&ctx, "cp.push_dir", &args).await.ret
            }
        };
        assert_eq!(push(vec![pd.clone()]).await, J::Bool(true));
        assert_eq!(
            sent(),
            [
                format!("{rel}/local/pd/one.conf=1"),
                format!("{rel}/local/pd/s/two.conf=2"),
                format!("{rel}/local/pd/three.txt=3"),
            ]
        );
        assert_eq!(
            push(vec![format!("{pd}/"), "glob=*.conf".into()]).await,
            J::Bool(true)
        );
        assert_eq!(
            sent(),
            [
                format!("{rel}/local/pd/one.conf=1"),
                format!("{rel}/local/pd/s/two.conf=2")
            ]
        );
        assert_eq!(
            push(vec![pd.clone(), "upload_path=/new/place/".into()]).await,
            J::Bool(true)
        );
        assert_eq!(
            sent(),
            [
                "new/place/one.conf=1",
                "new/place/s/two.conf=2",
                "new/place/three.txt=3"
            ]
        );
        // One file: sent as cp.push sends it.
        assert_eq!(
            push(vec![format!("{pd}/one.conf"), "upload_path=/x/y".into()]).await,
            J::Bool(true)
        );
        assert_eq!(sent(), ["x/y=1"]);
        for args in [
            vec![pd.clone(), "glob=*.none".into()],
            vec!["local/pd".into()],
            vec![format!("{pd}/../pd")],
            vec![format!("{t}/nonexist")],
        ] {
            assert_eq!(push(args.clone()).await, J::Bool(false), "{args:?}");
        }
        assert!(sent().is_empty());
    }
}
