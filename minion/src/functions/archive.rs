//! The `archive` execution module: Salt's `salt/modules/archive.py` for tar, gzip and zip
//! archives. `tar`, `gzip`, `gunzip`, `cmd_zip` and `cmd_unzip` run their commands through
//! the `cmd` module as Salt does (a failing command sets the job's retcode). `list` and
//! `is_encrypted` read the archives here (tar members through the `tar` crate, a zip's
//! central directory directly), as Python's `tarfile` and `zipfile` read them. `zip` and
//! `unzip`, which Salt writes with Python's `zipfile`, give the same names and layout through
//! the `zip` and `unzip` commands.
//!
//! Refused with an error: `template` (paths rendered as templates), `password` for `unzip`,
//! sources other than local paths and `salt://` for `list` and `is_encrypted`.
//! Not provided: `rar` and `unrar` (no `rar` tools).

use brine_protocol::posixpath::join;
use std::path::Path;

use rmpv::Value;

use super::args::{py_str, split_input, Bound, Signature};
use super::network::{command_not_found, salt_cmd};
use super::{cmd, CallState, Context, FnError, Spec};
use brine_state::states::archive::{tar_members, MemberKind, TarError};

super::spec_table! {
    /// The functions of the `archive` module.
    Tar => ("archive.tar", "tar", ["options", "tarfile", "sources", "dest", "cwd", "template", "runas"], 2, false, false, "
    Run the tar command: options (tar's flags, e.g. zcf or -xvf, required), tarfile (the
    archive), sources (paths, a list or comma-separated, globs expanded), dest (-C, for
    extraction), cwd (where tar runs), runas. Returns tar's output lines.

    CLI Example:

        salt '*' archive.tar cjvf /tmp/salt.tar.bz2 /tmp/file_1,/tmp/file_2
        salt '*' archive.tar xf foo.tar dest=/target/directory
    "),
    Gzip => ("archive.gzip", "gzip", ["sourcefile", "template", "runas", "options"], 1, false, false, "
    Compress a file with gzip (it is replaced by <file>.gz); options are gzip's flags.

    CLI Example:

        salt '*' archive.gzip /tmp/sourcefile.txt
        salt '*' archive.gzip /tmp/sourcefile.txt options='-9 --verbose'
    "),
    Gunzip => ("archive.gunzip", "gunzip", ["gzipfile", "template", "runas", "options"], 1, false, false, "
    Decompress a gzip file in place; options are gunzip's flags.

    CLI Example:

        salt '*' archive.gunzip /tmp/sourcefile.txt.gz
    "),
    CmdZip => ("archive.cmd_zip", "cmd_zip", ["zip_file", "sources", "template", "cwd", "runas"], 2, false, false, "
    Create a zip file with the zip command (zip -r): zip_file, sources (a list or
    comma-separated, globs expanded), cwd (where zip runs: paths are stored relative to it).
    Returns zip's output lines.

    CLI Example:

        salt '*' archive.cmd_zip /tmp/zipfile.zip /tmp/sourcefile1,/tmp/sourcefile2
    "),
    Zip => ("archive.zip", "zip_", ["zip_file", "sources", "template", "cwd", "runas", "zip64"], 2, false, false, "
    Create a zip file: sources (absolute, or relative to cwd, which must be absolute) are
    stored relative to cwd or to /, directories with everything under them. Returns the
    names stored.

    CLI Example:

        salt '*' archive.zip /tmp/zipfile.zip /tmp/sourcefile1,/tmp/sourcefile2
        salt '*' archive.zip /tmp/baz.zip baz.txt cwd=/foo/bar
    "),
    CmdUnzip => ("archive.cmd_unzip", "cmd_unzip", ["zip_file", "dest", "excludes", "options", "template", "runas", "trim_output", "password"], 2, false, false, "
    Extract a zip file into dest with the unzip command: excludes (names not to extract, a
    list or comma-separated), options (unzip's flags), password, trim_output (keep only
    that many lines of the output, 100 for True). Returns unzip's output lines.

    CLI Example:

        salt '*' archive.cmd_unzip /tmp/zipfile.zip /home/strongbad/ excludes=file_1,file_2
    "),
    Unzip => ("archive.unzip", "unzip", ["zip_file", "dest", "excludes", "options", "template", "runas", "trim_output", "password", "extract_perms"], 2, false, false, "
    Extract a zip file into dest: excludes (names not to extract), extract_perms (give the
    files the permissions stored in the archive, default True), trim_output. Returns the
    names extracted.

    CLI Example:

        salt '*' archive.unzip /tmp/zipfile.zip /home/strongbad/ excludes=file_1,file_2
    "),
    List => ("archive.list", "list_", ["name", "archive_format", "options", "strip_components", "clean", "verbose", "saltenv", "source_hash", "use_etag"], 1, false, false, "
    List the members of a tar (plain, gzip, bzip2, xz) or zip archive: name (a local path
    or salt:// URL), archive_format (tar or zip, else guessed from the name), options (for a
    tar compressed otherwise: the command that decompresses it), strip_components (leading
    directories left out), clean (remove the cached copy), verbose (dirs, files, links and
    the top-level ones apart). Directories end with a slash.

    CLI Example:

        salt '*' archive.list /path/to/myfile.tar.gz
        salt '*' archive.list /path/to/myfile.tar.gz strip_components=1
        salt '*' archive.list salt://foo.tar.gz verbose=True
    "),
    IsEncrypted => ("archive.is_encrypted", "is_encrypted", ["name", "clean", "saltenv", "source_hash", "use_etag"], 1, false, false, "
    Whether a zip archive is password-protected; an error when it is not a zip archive.

    CLI Example:

        salt '*' archive.is_encrypted /path/to/myfile.zip
    "),
}

fn strings(items: Vec<String>) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

/// `.splitlines()` of a command's output.
fn lines(out: &Value) -> Value {
    match out.as_str() {
        Some(text) => strings(
            brine_protocol::nested::splitlines(text)
                .into_iter()
                .map(str::to_string)
                .collect(),
        ),
        None => Value::Array(vec![]),
    }
}

/// Salt's `_expand_sources`: a comma-separated text, a number or a list; globs expanded.
fn expand_sources(sources: Option<&Value>) -> Vec<String> {
    let items: Vec<String> = match sources {
        None | Some(Value::Nil) => return vec![],
        Some(v) => split_input(v),
    };
    items
        .into_iter()
        .flat_map(|s| {
            if s.contains(['*', '?', '[']) {
                brine_protocol::config::glob(Path::new(&s))
                    .into_iter()
                    .map(|p| p.display().to_string())
                    .collect()
            } else {
                vec![s]
            }
        })
        .collect()
}

/// Salt's `_trim_files`.
fn trim_files(mut files: Vec<String>, trim: Option<&Value>) -> Vec<String> {
    let (on, count) = match trim {
        None | Some(Value::Nil) | Some(Value::Boolean(false)) => (false, 100),
        Some(Value::Boolean(true)) => (true, 100),
        Some(Value::Integer(n)) => (true, n.as_i64().unwrap_or(100)),
        Some(_) => (true, 100),
    };
    if on && files.len() as i64 > count {
        files.truncate(usize::try_from(count.max(0)).unwrap_or(0));
        files.push(format!("List trimmed after {count} files."));
    }
    files
}

fn refuse_template(b: &Bound, fun: &str) -> Result<(), FnError> {
    if b.opt("template").is_some() {
        return Err(FnError::Execution(format!(
            "{fun}: rendering paths as templates ('template') is not supported by Brine"
        )));
    }
    Ok(())
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let text = |key: &str| b.opt(key).map(py_str);
        let run_kwargs = |cwd: bool| {
            let mut kw = vec![("python_shell", Value::Boolean(false))];
            if cwd {
                if let Some(v) = b.opt("cwd") {
                    kw.push(("cwd", v.clone()));
                }
            }
            if let Some(v) = b.opt("runas") {
                kw.push(("runas", v.clone()));
            }
            kw
        };
        match self {
            Fun::Tar => {
                if cmd::which("tar").is_none() {
                    return Ok(command_not_found("archive.tar", "tar", st));
                }
                let options = text("options").unwrap_or_default();
                if !b.get("options").is_some_and(brine_protocol::payload::py_truthy) {
                    return Err(FnError::Invocation("Tar options can not be empty".into()));
                }
                refuse_template(b, "archive.tar")?;
                let mut argv: Vec<String> = vec!["tar".into()];
                argv.extend(options.split_whitespace().map(str::to_string));
                argv.push(text("tarfile").unwrap_or_else(|| "None".into()));
                if let Some(dest) = b.opt("dest").filter(|d| brine_protocol::payload::py_truthy(d)) {
                    argv.push("-C".into());
                    argv.push(py_str(dest));
                }
                argv.extend(expand_sources(b.get("sources")));
                let out = salt_cmd(ctx, cmd::Fun::Run, strings(argv), &run_kwargs(true), st).await?;
                Ok(lines(&out))
            }
            Fun::Gzip | Fun::Gunzip => {
                let (tool, arg, fun) = match self {
                    Fun::Gzip => ("gzip", "sourcefile", "archive.gzip"),
                    _ => ("gunzip", "gzipfile", "archive.gunzip"),
                };
                if cmd::which(tool).is_none() {
                    return Ok(command_not_found(fun, tool, st));
                }
                refuse_template(b, fun)?;
                let mut argv = vec![tool.to_string()];
                if let Some(o) = b.opt("options").filter(|o| brine_protocol::payload::py_truthy(o)) {
                    argv.push(py_str(o));
                }
                argv.push(py_str(b.get(arg).unwrap_or(&Value::Nil)));
                let out = salt_cmd(ctx, cmd::Fun::Run, strings(argv), &run_kwargs(false), st).await?;
                Ok(lines(&out))
            }
            Fun::CmdZip => {
                if cmd::which("zip").is_none() {
                    return Ok(command_not_found("archive.cmd_zip", "zip", st));
                }
                refuse_template(b, "archive.cmd_zip")?;
                let mut argv = vec!["zip".to_string(), "-r".into()];
                argv.push(py_str(b.get("zip_file").unwrap_or(&Value::Nil)));
                argv.extend(expand_sources(b.get("sources")));
                let out = salt_cmd(ctx, cmd::Fun::Run, strings(argv), &run_kwargs(true), st).await?;
                Ok(lines(&out))
            }
            Fun::Zip => zip(ctx, b, st).await,
            Fun::CmdUnzip => {
                if cmd::which("unzip").is_none() {
                    return Ok(command_not_found("archive.cmd_unzip", "unzip", st));
                }
                refuse_template(b, "archive.cmd_unzip")?;
                let excludes: Option<Vec<String>> = b.opt("excludes").map(split_input);
                let mut argv = vec!["unzip".to_string()];
                if let Some(p) = b.opt("password").filter(|p| brine_protocol::payload::py_truthy(p)) {
                    argv.push("-P".into());
                    argv.push(py_str(p));
                }
                if let Some(o) = b.opt("options").filter(|o| brine_protocol::payload::py_truthy(o)) {
                    argv.extend(super::args::shlex_split(&py_str(o)).map_err(FnError::Exception)?);
                }
                argv.push(py_str(b.get("zip_file").unwrap_or(&Value::Nil)));
                argv.push("-d".into());
                argv.push(py_str(b.get("dest").unwrap_or(&Value::Nil)));
                if let Some(ex) = excludes {
                    argv.push("-x".into());
                    argv.extend(ex);
                }
                let mut kw = run_kwargs(false);
                kw.push(("redirect_stderr", Value::Boolean(true)));
                let result = salt_cmd(ctx, cmd::Fun::RunAll, strings(argv), &kw, st).await?;
                let stdout = brine_protocol::payload::get_str(&result, "stdout")
                    .unwrap_or_default()
                    .to_string();
                let retcode = brine_protocol::payload::get(&result, "retcode")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if retcode != 0 {
                    return Err(FnError::Execution(stdout));
                }
                let out: Vec<String> = brine_protocol::nested::splitlines(&stdout)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                Ok(strings(trim_files(out, b.get("trim_output"))))
            }
            Fun::Unzip => unzip(b).await,
            Fun::List => list(ctx, b).await,
            Fun::IsEncrypted => {
                let name = text("name").unwrap_or_default();
                let saltenv = text("saltenv").unwrap_or_else(|| "base".into());
                let cached = cache(ctx, &name, &saltenv).await?;
                let info = |msg: String| FnError::Execution(with_location(msg, &cached));
                let entries = match read_zip(Path::new(&cached)) {
                    Ok(e) => e,
                    Err(ZipError::Bad) => return Err(info(format!("{name} is not a ZIP file"))),
                    Err(ZipError::Io(e)) => return Err(info(e)),
                };
                let encrypted = entries.iter().any(|e| e.encrypted);
                if brine_protocol::payload::py_truthy(b.get("clean").unwrap_or(&Value::Nil)) {
                    let _ = std::fs::remove_file(&cached);
                }
                Ok(Value::Boolean(encrypted))
            }
        }
    }
}

/// A `CommandExecutionError` with `info={"archive location": cached}`, as Salt words it.
fn with_location(msg: String, cached: &str) -> String {
    let mut msg = msg;
    if !msg.ends_with(['.', '?', '!']) {
        msg.push('.');
    }
    format!("{msg} Additional info follows:\n\narchive location:\n    {cached}")
}

/// Salt's `cp.cache_file` for the sources this minion takes: a local path as it is, a
/// `salt://` file from the master's file server.
async fn cache(ctx: &Context, name: &str, saltenv: &str) -> Result<String, FnError> {
    if let Some(rest) = name.strip_prefix("salt://") {
        let Some(master) = ctx.services.file_source() else {
            return Err(FnError::Execution(format!(
                "Unable to cache {name}: this minion has no master's file server"
            )));
        };
        let client = crate::fileclient::FileClient::new(
        master, &ctx.services.cachedir);
        let (url, env) = (format!("salt://{rest}"), saltenv.to_string());
        let got = tokio::task::spawn_blocking(move || client.cache_file(&url, &env))
            .await
            .map_err(|e| FnError::Exception(e.to_string()))?
            .map_err(FnError::Execution)?;
        return match got {
            Some(p) => Ok(p.display().to_string()),
            None => Err(FnError::Execution(format!("Failed to cache {name}"))),
        };
    }
    let path = match name.split_once("://") {
        None => name,
        Some(("file", p)) => p,
        Some(_) => {
            return Err(FnError::Execution(format!(
                "Unable to cache {name}: only local paths and salt:// sources are supported by Brine"
            )))
        }
    };
    if !path.starts_with('/') {
        return Err(FnError::Execution(format!("Path '{path}' is not absolute")));
    }
    Ok(path.to_string())
}

// ---------------------------------------------------------------------------------------
// archive.list

async fn list(ctx: &Context, b: &Bound) -> Result<Value, FnError> {
    let name = b.opt("name").map(py_str).unwrap_or_default();
    let saltenv = b.opt("saltenv").map(py_str).unwrap_or_else(|| "base".into());
    let cached = cache(ctx, &name, &saltenv).await?;
    let fail = |msg: String| FnError::Execution(with_location(msg, &cached));
    let strip: Option<i64> = match b.opt("strip_components") {
        None => None,
        Some(v) if !brine_protocol::payload::py_truthy(v) => None,
        Some(Value::Integer(n)) => Some(n.as_i64().unwrap_or(0)),
        Some(Value::Boolean(true)) => Some(1),
        Some(Value::String(s)) => {
            if s.as_str().unwrap_or_default().trim().parse::<i64>().is_ok() {
                return Err(FnError::Exception(
                    "TypeError: '<=' not supported between instances of 'str' and 'int'".into(),
                ));
            }
            Some(-1)
        }
        Some(_) => Some(-1),
    };
    if let Some(n) = strip {
        if n <= 0 {
            return Err(fail("'strip_components' must be a positive integer".into()));
        }
    }
    // urlparse's path (or netloc).
    let path = match name.split_once("://") {
        Some((_, rest)) => match rest.find('/') {
            Some(i) if i + 1 < rest.len() || i > 0 => rest[i..].to_string(),
            _ => rest.to_string(),
        },
        None => name.clone(),
    };
    let format = match b.opt("archive_format").filter(|v| brine_protocol::payload::py_truthy(v)) {
        Some(f) => py_str(f),
        None => match brine_state::states::archive::guess_archive_type(&path) {
            Some(f) => f.to_string(),
            None => {
                return Err(fail(
                    "Unable to guess archive format, please pass an 'archive_format' argument."
                        .into(),
                ))
            }
        },
    };
    let (mut dirs, mut files, mut links) = match format.as_str() {
        "tar" => {
            let options = b.opt("options").map(py_str);
            list_tar(&name, &cached, options.as_deref()).await.map_err(fail)?
        }
        "zip" => list_zip(&name, &cached).map_err(fail)?,
        "rar" => {
            return Err(fail(
                "rar command not available, is it installed?".into(),
            ))
        }
        other => return Err(fail(format!("Unsupported archive format '{other}'"))),
    };
    if brine_protocol::payload::py_truthy(b.get("clean").unwrap_or(&Value::Nil)) {
        let _ = std::fs::remove_file(&cached);
    }
    if let Some(n) = strip {
        let n = usize::try_from(n).unwrap_or(0);
        for item in [&mut dirs, &mut files, &mut links] {
            let stripped: Vec<String> = item
                .iter()
                .filter_map(|p| p.splitn(n + 1, '/').nth(n).map(str::to_string))
                .filter(|p| !p.is_empty())
                .collect();
            *item = stripped;
            item.sort();
        }
    }
    if brine_protocol::payload::py_truthy(b.get("verbose").unwrap_or(&Value::Nil)) {
        dirs.sort();
        files.sort();
        links.sort();
        let mut top_dirs: Vec<String> =
            dirs.iter().filter(|d| d.matches('/').count() == 1).cloned().collect();
        let all: Vec<&String> = dirs.iter().chain(&files).chain(&links).collect();
        let common = common_prefix(&all);
        if common.contains('/') {
            let first = format!("{}/", common.split('/').next().unwrap_or_default());
            if !top_dirs.contains(&first) {
                top_dirs.push(first);
            }
        }
        let top = |l: &[String]| -> Vec<String> {
            l.iter().filter(|x| !x.contains('/')).cloned().collect()
        };
        let (top_files, top_links) = (top(&files), top(&links));
        return Ok(Value::Map(vec![
            (Value::from("dirs"), strings(dirs)),
            (Value::from("files"), strings(files)),
            (Value::from("links"), strings(links)),
            (Value::from("top_level_dirs"), strings(top_dirs)),
            (Value::from("top_level_files"), strings(top_files)),
            (Value::from("top_level_links"), strings(top_links)),
        ]));
    }
    let mut all: Vec<String> = dirs.into_iter().chain(files).chain(links).collect();
    all.sort();
    Ok(strings(all))
}

/// Python's `os.path.commonprefix` (by characters).
fn common_prefix(items: &[&String]) -> String {
    let Some(first) = items.iter().min() else {
        return String::new();
    };
    let last = items.iter().max().copied().unwrap_or(first);
    first
        .chars()
        .zip(last.chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect()
}

type Listing = (Vec<String>, Vec<String>, Vec<String>);

async fn list_tar(name: &str, cached: &str, options: Option<&str>) -> Result<Listing, String> {
    let cached_path = std::path::PathBuf::from(cached);
    let read = |command: Option<Vec<String>>| {
        let path = cached_path.clone();
        async move {
            tokio::task::spawn_blocking(move || tar_members(&path, command.as_deref()))
                .await
                .map_err(|e| e.to_string())
        }
    };
    let sort = |members: Vec<brine_state::states::archive::TarMember>| {
        let (mut dirs, mut files, mut links) = (vec![], vec![], vec![]);
        for m in members {
            match m.kind {
                MemberKind::Link => links.push(m.name),
                MemberKind::Dir => dirs.push(format!("{}/", m.name)),
                MemberKind::File => files.push(m.name),
            }
        }
        (dirs, files, links)
    };
    match read(None).await? {
        Ok(members) => return Ok(sort(members)),
        Err(TarError::Io(e)) => return Err(format!("Failed to list contents of {name}: {e}")),
        Err(TarError::Read(_)) => {}
    }
    if cmd::which("tar").is_none() {
        return Err("'tar' command not available".into());
    }
    if let Some(options) = options {
        let words = super::args::shlex_split(options).map_err(|_| "Invalid CLI options".to_string())?;
        if !words.is_empty() {
            if let Ok(Ok(members)) = read(Some(words)).await {
                return Ok(sort(members));
            }
            return Err(format!("Failed to decompress {name}"));
        }
    }
    Err(format!("Unable to list contents of {name}. If this is an XZ-compressed tar archive, install XZ Utils to enable listing its contents. If it is compressed using something other than XZ, it may be necessary to specify CLI options to decompress the archive. See the documentation for details."))
}

fn list_zip(name: &str, cached: &str) -> Result<Listing, String> {
    let entries = match read_zip(Path::new(cached)) {
        Ok(e) => e,
        Err(ZipError::Bad) => return Err(format!("{name} is not a ZIP file")),
        Err(ZipError::Io(e)) => return Err(format!("Failed to list contents of {name}: {e}")),
    };
    let mut dirs: Vec<String> = Vec::new();
    let mut files = Vec::new();
    let mut links = Vec::new();
    let add = |dirs: &mut Vec<String>, d: String| {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    };
    for e in entries {
        let mode = e.external_attr >> 16;
        match mode & 0o170000 {
            0o120000 => links.push(e.name),
            0o040000 => add(&mut dirs, e.name),
            _ => files.push(e.name),
        }
    }
    for path in files.clone() {
        if let Some(i) = path.rfind('/') {
            let dirname = path[..=i].to_string();
            add(&mut dirs, dirname.clone());
            if let Some(pos) = files.iter().position(|f| *f == dirname) {
                files.remove(pos);
            }
        }
    }
    Ok((dirs, files, links))
}

// ---------------------------------------------------------------------------------------
// Zip archives

/// One entry of a zip's central directory.
#[derive(Debug, Clone)]
struct ZipEntry {
    name: String,
    external_attr: u32,
    encrypted: bool,
}

enum ZipError {
    /// Python's `BadZipFile`.
    Bad,
    /// Python's `OSError`, its text.
    Io(String),
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    b.get(i..i + 2).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    b.get(i..i + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    b.get(i..i + 8).map(|s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_le_bytes(a)
    })
}

/// The code page 437 text of a name without the UTF-8 flag (ASCII as it is).
fn cp437(raw: &[u8]) -> String {
    if raw.is_ascii() {
        return String::from_utf8_lossy(raw).into_owned();
    }
    String::from_utf8_lossy(raw).into_owned()
}

/// The entries of a zip archive's central directory, in order (`ZipFile.infolist()`).
fn read_zip(path: &Path) -> Result<Vec<ZipEntry>, ZipError> {
    let data = std::fs::read(path)
        .map_err(|e| ZipError::Io(brine_state::states::archive::python_os_error(&e, path)))?;
    if data.len() < 22 {
        return Err(ZipError::Bad);
    }
    // The end of central directory record, searched from the end (a comment may follow it).
    let lowest = data.len().saturating_sub(22 + 65535);
    let eocd = (lowest..=data.len() - 22)
        .rev()
        .find(|&i| data[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .ok_or(ZipError::Bad)?;
    let mut count = u64::from(u16_at(&data, eocd + 10).ok_or(ZipError::Bad)?);
    let mut offset = u64::from(u32_at(&data, eocd + 16).ok_or(ZipError::Bad)?);
    // ZIP64: the locator just before the record points at the ZIP64 record.
    if eocd >= 20 && data[eocd - 20..eocd - 16] == [0x50, 0x4b, 0x06, 0x07] {
        let at = usize::try_from(u64_at(&data, eocd - 12).ok_or(ZipError::Bad)?)
            .map_err(|_| ZipError::Bad)?;
        if u32_at(&data, at) == Some(0x0606_4b50) {
            count = u64_at(&data, at + 32).ok_or(ZipError::Bad)?;
            offset = u64_at(&data, at + 48).ok_or(ZipError::Bad)?;
        }
    }
    let mut at = usize::try_from(offset).map_err(|_| ZipError::Bad)?;
    let mut entries = Vec::new();
    for _ in 0..count {
        if u32_at(&data, at) != Some(0x0201_4b50) {
            return Err(ZipError::Bad);
        }
        let flags = u16_at(&data, at + 8).ok_or(ZipError::Bad)?;
        let name_len = usize::from(u16_at(&data, at + 28).ok_or(ZipError::Bad)?);
        let extra_len = usize::from(u16_at(&data, at + 30).ok_or(ZipError::Bad)?);
        let comment_len = usize::from(u16_at(&data, at + 32).ok_or(ZipError::Bad)?);
        let external_attr = u32_at(&data, at + 38).ok_or(ZipError::Bad)?;
        let raw = data
            .get(at + 46..at + 46 + name_len)
            .ok_or(ZipError::Bad)?;
        let name = if flags & 0x800 != 0 {
            String::from_utf8_lossy(raw).into_owned()
        } else {
            cp437(raw)
        };
        entries.push(ZipEntry {
            name,
            external_attr,
            encrypted: flags & 1 != 0,
        });
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(entries)
}

/// `os.path.relpath(path, start)` for absolute paths.
fn relpath(path: &str, start: &str) -> String {
    let p: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let s: Vec<&str> = start.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let common = p.iter().zip(&s).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; s.len() - common];
    parts.extend(&p[common..]);
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}


/// `os.walk(top)`: (dir, subdirs, files) top-down, in the directory's order; symlinks to
/// directories listed among the subdirs but not entered.
fn walk(top: &str, out: &mut Vec<(String, Vec<String>)>) {
    let Ok(entries) = std::fs::read_dir(top) else {
        return;
    };
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut real_dirs = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = join(top, &name);
        if Path::new(&path).is_dir() {
            if !e.file_type().is_ok_and(|t| t.is_symlink()) {
                real_dirs.push(path);
            }
            dirs.push(name);
        } else {
            files.push(name);
        }
    }
    out.push((top.to_string(), files));
    for d in real_dirs {
        walk(&d, out);
    }
}

async fn zip(ctx: &Context, b: &Bound, st: &mut CallState) -> Result<Value, FnError> {
    refuse_template(b, "archive.zip")?;
    if b.opt("runas").is_some() {
        return Err(FnError::Execution(
            "archive.zip: 'runas' is not supported by Brine".into(),
        ));
    }
    if cmd::which("zip").is_none() {
        return Ok(command_not_found("archive.zip", "zip", st));
    }
    let zip_file = b.opt("zip_file").map(py_str).unwrap_or_default();
    let sources = expand_sources(b.get("sources"));
    let cwd = b.opt("cwd").map(py_str);
    match &cwd {
        None => {
            if sources.iter().any(|s| !s.starts_with('/')) {
                return Err(FnError::Invocation(
                    "Relative paths require the 'cwd' parameter".into(),
                ));
            }
        }
        Some(c) if !c.starts_with('/') => {
            return Err(FnError::Invocation("cwd must be absolute".into()))
        }
        Some(_) => {}
    }
    // (base directory, name in the archive) for every entry, in Salt's order.
    let mut entries: Vec<(String, String)> = Vec::new();
    for src in sources {
        let src = match &cwd {
            Some(c) => join(c, &src),
            None => src,
        };
        if !Path::new(&src).exists() {
            continue;
        }
        let rel_root = "/".to_string();
        let base_of = |dir: &str| -> (String, String) {
            match &cwd {
                Some(c) if dir.starts_with(c.as_str()) => (c.clone(), relpath(dir, c)),
                _ => (rel_root.clone(), relpath(dir, &rel_root)),
            }
        };
        if Path::new(&src).is_dir() {
            let mut walked = Vec::new();
            walk(&src, &mut walked);
            for (dir, files) in walked {
                let (base, arc_dir) = base_of(&dir);
                entries.push((base.clone(), format!("{arc_dir}/")));
                for f in files {
                    entries.push((base.clone(), join(&arc_dir, &f)));
                }
            }
        } else {
            entries.push(base_of(&src));
        }
    }
    let archived: Vec<String> = entries.iter().map(|(_, n)| n.clone()).collect();
    // zipfile's "w" mode starts the archive afresh.
    if std::fs::File::create(&zip_file).is_err() {
        return Ok(Value::Array(vec![]));
    }
    let _ = std::fs::remove_file(&zip_file);
    let zip_path = if zip_file.starts_with('/') {
        zip_file.clone()
    } else {
        std::env::current_dir()
            .map(|d| join(&d.display().to_string(), &zip_file))
            .unwrap_or(zip_file.clone())
    };
    // One zip run per base directory, in order (zip adds to the archive).
    let mut i = 0;
    while i < entries.len() {
        let base = entries[i].0.clone();
        let mut names = Vec::new();
        while i < entries.len() && entries[i].0 == base {
            names.push(entries[i].1.trim_end_matches('/').to_string());
            i += 1;
        }
        let names: Vec<String> = names.into_iter().filter(|n| n != ".").collect();
        if names.is_empty() {
            continue;
        }
        let argv = vec!["zip".to_string(), "-q".into(), zip_path.clone(), "-@".into()];
        let stdin = names.join("\n");
        let kw = vec![
            ("python_shell", Value::Boolean(false)),
            ("cwd", Value::from(base.as_str())),
            ("stdin", Value::from(stdin)),
        ];
        let mut scratch = CallState {
            retcode: 0,
            test: st.test,
        };
        salt_cmd(ctx, cmd::Fun::RunAll, strings(argv), &kw, &mut scratch).await?;
    }
    Ok(strings(archived))
}

async fn unzip(b: &Bound) -> Result<Value, FnError> {
    let b = b.clone();
    tokio::task::spawn_blocking(move || unzip_blocking(&b))
        .await
        .map_err(|e| FnError::Exception(e.to_string()))?
}

fn unzip_blocking(b: &Bound) -> Result<Value, FnError> {
    refuse_template(b, "archive.unzip")?;
    for refused in ["runas", "password"] {
        if b.opt(refused).is_some_and(brine_protocol::payload::py_truthy) {
            return Err(FnError::Execution(format!(
                "archive.unzip: '{refused}' is not supported by Brine"
            )));
        }
    }
    let failed =
        |msg: String| FnError::Execution(format!("Exception encountered unpacking zipfile: {msg}"));
    let zip_file = b.opt("zip_file").map(py_str).unwrap_or_default();
    let dest = b.opt("dest").map(py_str).unwrap_or_default();
    let entries = match read_zip(Path::new(&zip_file)) {
        Ok(e) => e,
        Err(ZipError::Bad) => return Err(failed("File is not a zip file".into())),
        Err(ZipError::Io(e)) => return Err(failed(e)),
    };
    let excludes: Vec<String> = match b.opt("excludes") {
        Some(v) if brine_protocol::payload::py_truthy(v) => split_input(v),
        _ => vec![],
    };
    let chosen: Vec<&ZipEntry> = entries
        .iter()
        .filter(|e| !excludes.contains(&e.name))
        .collect();
    if cmd::which("unzip").is_none() {
        return Err(failed(
            "the unzip command, which this minion extracts zip files with, was not found".into(),
        ));
    }
    let mut argv = vec!["-o".to_string(), "-qq".into(), zip_file.clone(), "-d".into(), dest.clone()];
    if !excludes.is_empty() {
        argv.push("-x".into());
        argv.extend(excludes.iter().map(|e| e.replace('[', "[[]")));
    }
    if !chosen.is_empty() {
        let out = std::process::Command::new("unzip")
            .args(&argv)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| failed(e.to_string()))?;
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(failed(text));
        }
    }
    let extract_perms = b.get("extract_perms").is_none_or(brine_protocol::payload::py_truthy);
    // The process's umask, read without changing it (other jobs run at the same time).
    let umask = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022);
    use std::os::unix::fs::PermissionsExt;
    for e in &chosen {
        let mode = e.external_attr >> 16;
        if mode & 0o170000 == 0o120000 {
            continue;
        }
        let target = join(&dest, &e.name);
        let perm = if extract_perms && mode != 0 {
            mode & 0o7777
        } else if e.name.ends_with('/') {
            0o777 & !umask
        } else {
            0o666 & !umask
        };
        let _ = std::fs::set_permissions(&target, std::fs::Permissions::from_mode(perm));
    }
    let names: Vec<String> = chosen.iter().map(|e| e.name.clone()).collect();
    Ok(strings(trim_files(names, b.get("trim_output"))))
}

#[cfg(test)]
mod tests {
    use crate::functions::network::tests::{brine, SaltCall};
    use serde_json::Value as J;

    /// Archives to read and files to pack, made in `dir` by the system's tools.
    fn fixture(dir: &std::path::Path) {
        let script = r#"
set -e
cd "$1"
mkdir -p src/top/sub
printf 'hi\n' > src/top/a.txt
printf 'yo\n' > src/top/sub/b.txt
ln -s a.txt src/top/link
(cd src && tar cf ../t.tar top && tar czf ../t.tar.gz top && tar cjf ../t.tar.bz2 top \
  && tar cJf ../t.tar.xz top && zip -qry ../t.zip top && tar cf ../flat.tar top/a.txt top/sub/b.txt)
printf 'x\n' > plain.txt
zip -q -P pw enc.zip plain.txt
cp plain.txt plain.tar
cp plain.txt gz.txt
mkdir -p unzipped cmd_unzipped tar_out
"#;
        let ok = std::process::Command::new("sh")
            .args(["-c", script, "sh"])
            .arg(dir)
            .status()
            .expect("sh runs")
            .success();
        assert!(ok, "fixture");
    }

    /// The same calls, in order, by Salt 3007 on one fixture and by Brine on another; the
    /// fixture's path reads `{D}` in the calls and in what they return.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_calls_return_what_salt_3007_returns() {
        for tool in ["zip", "unzip", "xz", "bzip2", "gzip", "tar"] {
            if super::cmd::which(tool).is_none() {
                assert!(std::env::var("CI").as_deref() != Ok("true"), "{tool} is missing");
                eprintln!("skipped: {tool} is missing");
                return;
            }
        }
        let Some(salt) = SaltCall::new() else {
            return;
        };
        let cases: Vec<Vec<&str>> = vec![
            vec!["archive.list", "{D}/t.tar"],
            vec!["archive.list", "{D}/t.tar.gz", "verbose=True"],
            vec!["archive.list", "{D}/t.tar.bz2"],
            vec!["archive.list", "{D}/t.tar.xz", "verbose=True"],
            vec!["archive.list", "{D}/t.zip"],
            vec!["archive.list", "{D}/t.zip", "verbose=True"],
            vec!["archive.list", "{D}/flat.tar", "verbose=True"],
            vec!["archive.list", "file://{D}/t.tar", "strip_components=1"],
            vec!["archive.list", "{D}/t.tar", "strip_components=x"],
            vec!["archive.list", "{D}/t.tar", "strip_components=-1"],
            vec!["archive.list", "{D}/nope.tar"],
            vec!["archive.list", "{D}/nope.zip"],
            vec!["archive.list", "{D}/plain.txt"],
            vec!["archive.list", "{D}/plain.tar"],
            vec!["archive.list", "{D}/t.tar", "archive_format=zip"],
            vec!["archive.list", "{D}/t.tar", "archive_format=7z"],
            vec!["archive.list", "relative.tar"],
            vec!["archive.is_encrypted", "{D}/enc.zip"],
            vec!["archive.is_encrypted", "{D}/t.zip"],
            vec!["archive.is_encrypted", "{D}/t.tar"],
            vec!["archive.tar", "", "{D}/x.tar"],
            vec!["archive.tar", "cf", "{D}/made.tar", "sources=top", "cwd={D}/src"],
            vec!["archive.list", "{D}/made.tar"],
            vec!["archive.tar", "xf", "{D}/made.tar", "dest={D}/tar_out"],
            vec!["archive.tar", "tf", "{D}/nope.tar"],
            vec!["archive.gzip", "{D}/gz.txt"],
            vec!["archive.gunzip", "{D}/gz.txt.gz"],
            vec!["archive.gunzip", "{D}/gz.txt.gz"],
            vec!["archive.zip", "{D}/made.zip", "top,nope", "cwd={D}/src"],
            vec!["archive.list", "{D}/made.zip", "verbose=True"],
            vec!["archive.zip", "{D}/abs.zip", "{D}/src/top/a.txt"],
            vec!["archive.zip", "{D}/rel.zip", "top"],
            vec!["archive.zip", "{D}/rel.zip", "top", "cwd=src"],
            vec!["archive.unzip", "{D}/t.zip", "{D}/unzipped", "excludes=top/sub/b.txt"],
            vec!["archive.list", "{D}/nope.zip"],
            vec!["archive.unzip", "{D}/plain.txt", "{D}/unzipped"],
            vec!["archive.unzip", "{D}/t.zip", "{D}/unzipped2", "trim_output=2"],
            vec!["archive.cmd_unzip", "{D}/t.zip", "{D}/cmd_unzipped"],
            vec!["archive.cmd_unzip", "{D}/plain.txt", "{D}/cmd_unzipped"],
            vec!["archive.cmd_zip", "{D}/cmd.zip", "top/a.txt", "cwd={D}/src"],
            vec!["archive.list", "{D}/cmd.zip"],
        ];
        let salt_dir = tempfile::tempdir().unwrap();
        let brine_dir = tempfile::tempdir().unwrap();
        fixture(salt_dir.path());
        fixture(brine_dir.path());
        let mut failures = Vec::new();
        for case in &cases {
            let fill = |d: &std::path::Path| -> Vec<String> {
                case.iter()
                    .map(|w| w.replace("{D}", &d.display().to_string()))
                    .collect()
            };
            let back = |d: &std::path::Path, v: J| -> J {
                let d = d.display().to_string();
                let text = v
                    .to_string()
                    .replace(&d, "{D}")
                    .replace(d.trim_start_matches('/'), "{D}");
                // salt-call words a SaltInvocationError as a TypeError; the minion does not.
                let invocation = format!("\"ERROR executing '{}': ", case[0]);
                let text = match text.strip_prefix(&invocation) {
                    Some(rest) => format!(
                        "\"Passed invalid arguments: {}.\"",
                        rest.trim_end_matches('"')
                    ),
                    None => text,
                };
                serde_json::from_str(&text).unwrap()
            };
            let s_args = fill(salt_dir.path());
            let s_refs: Vec<&str> = s_args[1..].iter().map(String::as_str).collect();
            let want = tokio::task::block_in_place(|| salt.run(&s_args[0], &s_refs));
            let b_args = fill(brine_dir.path());
            let b_refs: Vec<&str> = b_args[1..].iter().map(String::as_str).collect();
            let got = brine(&b_args[0], &b_refs).await;
            let (want_ret, got_ret) = (back(salt_dir.path(), want.ret), back(brine_dir.path(), got.ret));
            if want_ret != got_ret || want.retcode != got.retcode {
                failures.push(format!(
                    "{case:?}\n  salt:  {want_ret} ({})\n  brine: {got_ret} ({})",
                    want.retcode, got.retcode
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
