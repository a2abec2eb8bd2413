//! The `archive` state module: `archive.extracted`, as Salt 3007's `salt/states/archive.py`
//! runs it for tar (plain, gzip, bzip2, xz) and zip archives from the file server
//! (`salt://`) or this machine's disk, with Salt's results, changes and comments. The
//! archive's contents come from the minion's `archive.list`, zip archives are extracted by
//! `archive.unzip`/`archive.cmd_unzip`, tar archives here (the `tar` command when `options`
//! are given), as Salt does.
//!
//! An `http://` or `https://` source is fetched into the cache's `extrn_files` as Salt's
//! `file.cached` state fetches it (a `source_hash`, `skip_verify` or `use_etag` required, the
//! cached copy kept when it has the hash or, with `use_etag`, while the server answers `304`
//! to its ETag; `keep_source: False` deleting it afterwards).
//!
//! Refused with a failure naming them: the other remote sources (ftp, s3, swift), a list
//! of sources, `password` and rar archives (no `unrar` in this minion),
//! `skip_files_list_verify`,
//! `list_options`, `enforce_ownership_on` and the signature checks (`signature`,
//! `source_hash_sig`, `signed_by_any`, `signed_by_all`, `keyring`, `gnupghome`).
//!
//! The tar reading shared with the minion's `archive` execution module lives here too:
//! [`tar_members`] and [`tar_extract`] (Python's `tarfile`, compression found by the file's
//! first bytes and undone by the `gzip`, `bzip2` and `xz` commands).

use brine_protocol::posixpath::join;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Map, Value};

use super::source_hash::{source_sum, SumError};
use super::{lookup, ret, Accepts, Call, Spec};
use crate::url::redact_http_basic_auth as redact;
use crate::verify::py_text;
use brine_protocol::payload::json_truthy;

pub const FUNCTIONS: &[Spec] = &[Spec {
    name: "extracted",
    required: &["name", "source"],
    accepts: Accepts::Any,
    run: extracted,
}];

// ---------------------------------------------------------------------------------------
// Reading tar archives

/// What a tar member is, as `tarfile` sorts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberKind {
    Dir,
    File,
    Link,
}

/// One member of a tar archive: its name as `tarfile` gives it (a directory's without its
/// trailing `/`) and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarMember {
    pub name: String,
    pub kind: MemberKind,
}

/// The command that undoes the compression a file starts with, `None` for a plain tar.
fn decompressor(path: &Path) -> Result<Option<&'static str>, std::io::Error> {
    let mut head = [0u8; 6];
    let mut file = std::fs::File::open(path)?;
    let mut read = 0;
    while read < head.len() {
        match file.read(&mut head[read..])? {
            0 => break,
            n => read += n,
        }
    }
    let head = &head[..read];
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Some("gzip")
    } else if head.starts_with(b"BZh") {
        Some("bzip2")
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Some("xz")
    } else {
        None
    })
}

/// Why a tar archive could not be read.
#[derive(Debug)]
pub enum TarError {
    /// The file could not be opened (Python's `OSError`, its text).
    Io(String),
    /// Not a tar archive this can read (Python's `tarfile.ReadError`).
    Read(String),
}

/// A stream of the archive's tar bytes: the file itself, or a decompressing command's
/// output (`command` given, else found by the first bytes).
fn tar_stream(
    path: &Path,
    command: Option<&[String]>,
) -> Result<(Box<dyn Read>, Option<Child>), TarError> {
    let io = |e: std::io::Error| TarError::Io(python_os_error(&e, path));
    let argv: Option<Vec<String>> = match command {
        Some(c) => Some(c.to_vec()),
        None => decompressor(path)
            .map_err(io)?
            .map(|tool| vec![tool.into(), "-d".into(), "-c".into()]),
    };
    match argv {
        None => Ok((Box::new(std::fs::File::open(path).map_err(io)?), None)),
        Some(argv) => {
            let mut child = Command::new(&argv[0])
                .args(&argv[1..])
                .arg(path)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| TarError::Read(format!("{}: {e}", argv[0])))?;
            let out = child
                .stdout
                .take()
                .ok_or_else(|| TarError::Read("no output".into()))?;
            Ok((Box::new(out), Some(child)))
        }
    }
}

/// Python's text for an `OSError` on `path`.
pub fn python_os_error(e: &std::io::Error, path: &Path) -> String {
    let code = e.raw_os_error().unwrap_or(0);
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text).to_string();
    format!("[Errno {code}] {text}: '{}'", path.display())
}

fn finish(child: Option<Child>) -> Result<(), TarError> {
    if let Some(mut child) = child {
        let status = child.wait().map_err(|e| TarError::Read(e.to_string()))?;
        if !status.success() {
            return Err(TarError::Read("decompression failed".into()));
        }
    }
    Ok(())
}

/// The members of a tar archive in their order (`tarfile.open(path).getmembers()`);
/// `command` decompresses it (its words, the file's path added), else the compression is
/// found by the file's first bytes.
pub fn tar_members(path: &Path, command: Option<&[String]>) -> Result<Vec<TarMember>, TarError> {
    let (stream, child) = tar_stream(path, command)?;
    let mut archive = tar::Archive::new(stream);
    let mut members = Vec::new();
    let entries = archive
        .entries()
        .map_err(|e| TarError::Read(e.to_string()))?;
    for entry in entries {
        let entry = entry.map_err(|e| TarError::Read(e.to_string()))?;
        let kind = match entry.header().entry_type() {
            tar::EntryType::Symlink => MemberKind::Link,
            tar::EntryType::Directory => MemberKind::Dir,
            _ => MemberKind::File,
        };
        let raw = entry.path_bytes();
        let mut name = String::from_utf8_lossy(&raw).into_owned();
        if kind == MemberKind::Dir {
            name = name.trim_end_matches('/').to_string();
        }
        members.push(TarMember { name, kind });
    }
    if members.is_empty() {
        return Err(TarError::Read("empty file".into()));
    }
    finish(child)?;
    Ok(members)
}

/// Extract a tar archive into `dest` (`tarfile.open(path).extractall(dest)`): the member
/// names in order. Owners are kept when run as root, as `tarfile` does.
pub fn tar_extract(path: &Path, dest: &Path) -> Result<Vec<String>, TarError> {
    let names: Vec<String> = tar_members(path, None)?
        .into_iter()
        .map(|m| m.name)
        .collect();
    let (stream, child) = tar_stream(path, None)?;
    let mut archive = tar::Archive::new(stream);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(true);
    archive.set_preserve_ownerships(nix::unistd::geteuid().is_root());
    archive
        .unpack(dest)
        .map_err(|e| TarError::Io(e.to_string()))?;
    finish(child)?;
    Ok(names)
}

// ---------------------------------------------------------------------------------------
// archive.extracted

/// The arguments this implementation does not carry out, and which values of them are
/// harmless (their defaults).
const REFUSED: &[&str] = &[
    "password",
    "skip_files_list_verify",
    "list_options",
    "enforce_ownership_on",
    "signature",
    "source_hash_sig",
    "signed_by_any",
    "signed_by_all",
    "keyring",
    "gnupghome",
];

/// Salt's `salt.utils.files.guess_archive_type`.
pub fn guess_archive_type(name: &str) -> Option<&'static str> {
    let name = name.to_lowercase();
    const TAR: &[&str] = &[
        "tar", "tar.gz", "tgz", "tar.bz2", "tbz2", "tbz", "tar.xz", "txz", "tar.lzma", "tlz",
    ];
    if TAR.iter().any(|e| name.ends_with(&format!(".{e}"))) {
        return Some("tar");
    }
    ["zip", "rar"]
        .into_iter()
        .find(|e| name.ends_with(&format!(".{e}")))
}

/// `salt.utils.files.rm_rf`.
fn rm_rf(path: &str) -> std::io::Result<()> {
    let p = Path::new(path);
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) => Err(e),
    }
}

/// The text of an execution function's error, as Salt's `exc.strerror`.
fn strerror(e: &str) -> String {
    super::exc_text(e).to_string()
}

/// Run another state function (Salt's `__states__`).
fn sub_state(c: &Call, fun: &str, low: Map<String, Value>) -> Result<Map<String, Value>, String> {
    let spec = lookup(fun).ok_or_else(|| format!("no state function {fun}"))?;
    (spec.run)(&c.with_low(&low))
}

/// An http(s) archive cached as Salt's `file.cached` state caches it for
/// `archive.extracted`: the cached file's path, or `file.cached`'s failed return (named by
/// the URL), which `archive.extracted` returns as it is.
fn cache_http(
    c: &Call,
    source: &str,
    sum: Option<&(String, String)>,
    skip_verify: bool,
    use_etag: bool,
) -> Result<String, Map<String, Value>> {
    let failed = |comment: String| ret(source, json!(false), comment, json!({}));
    let redacted = crate::url::redact_http_basic_auth(source);
    if sum.is_none() && !skip_verify && !use_etag {
        return Err(failed(format!("Unable to verify upstream hash of source file {redacted}, please set source_hash or set skip_verify or use_etag to True")));
    }
    let form = sum.map_or("sha256", |(form, _)| form.as_str());
    let hash_of = |path: &Path| {
        let bytes = std::fs::read(path).ok()?;
        let t = brine_protocol::crypt::HashType::parse(form)?;
        Some(brine_protocol::crypt::hash_hex(&bytes, t))
    };
    let before = crate::url::extrn_path(&c.host.cachedir(), source, c.saltenv)
        .ok()
        .and_then(|p| hash_of(&p));
    let fetch = crate::url::Fetch {
        source_hash: sum.map(|(_, hsum)| hsum.clone()),
        use_etag,
        ..crate::url::Fetch::default()
    };
    let path = c
        .host
        .cache_url(source, c.saltenv, &fetch)
        .map_err(|e| failed(redact(&e)))?;
    let after = hash_of(&path);
    let path = path.display().to_string();
    if let (Some((_, hsum)), false) = (sum, skip_verify) {
        if after.as_deref() != Some(hsum.as_str()) {
            let mut out = failed(format!(
                "File is cached to {path}, but the hash ({}) does not match the specified hash ({hsum})",
                after.as_deref().unwrap_or("")
            ));
            if before != after {
                out.insert(
                    "changes".into(),
                    json!({"hash": {"old": before, "new": after}}),
                );
            }
            return Err(out);
        }
    }
    Ok(path)
}

fn extracted(c: &Call) -> Result<Map<String, Value>, String> {
    let raw_name = c.arg("name").map(py_text);
    let mut out = ret(&c.name(), json!(false), "", json!({}));
    let fail = |mut out: Map<String, Value>, comment: String| {
        out.insert("comment".into(), json!(comment));
        Ok(out)
    };
    let refused: Vec<&str> = REFUSED
        .iter()
        .copied()
        .filter(|k| c.arg(k).is_some_and(json_truthy))
        .collect();
    if !refused.is_empty() {
        return fail(
            out,
            format!(
                "archive.extracted: not supported by Brine: {}",
                refused.join(", ")
            ),
        );
    }
    let skip_verify = c.flag("skip_verify", false);
    let use_etag = c.flag("use_etag", false);
    let mut warnings: Vec<Value> = Vec::new();
    let keep_source = match (c.low.get("keep_source"), c.low.get("keep")) {
        (Some(k), Some(_)) => {
            warnings.push(json!("Both 'keep_source' and 'keep' were used. Since these both do the same thing, 'keep' was ignored."));
            json_truthy(k)
        }
        (Some(k), None) | (None, Some(k)) => json_truthy(k),
        (None, None) => true,
    };
    let with_warnings = |mut out: Map<String, Value>, warnings: &Vec<Value>| {
        if !warnings.is_empty() {
            out.insert("warnings".into(), Value::Array(warnings.clone()));
        }
        out
    };
    // The destination.
    let mut name = match &raw_name {
        Some(n) if n.starts_with('/') => n.clone(),
        Some(n) => {
            return fail(
                with_warnings(out, &warnings),
                format!("{n} is not an absolute path"),
            )
        }
        None => String::new(),
    };
    if raw_name.is_some() {
        name = name.trim_end_matches('/').to_string();
        if Path::new(&name).is_file() {
            return fail(
                with_warnings(out, &warnings),
                format!("{name} exists and is not a directory"),
            );
        }
        name.push('/');
    }
    let if_missing = c.text("if_missing");
    if if_missing.as_deref().is_some_and(|p| !p.starts_with('/')) {
        return fail(
            with_warnings(out, &warnings),
            "Value for 'if_missing' is not an absolute path".into(),
        );
    }
    if let Some(p) = &if_missing {
        if Path::new(p).exists() {
            out.insert("result".into(), json!(true));
            return fail(with_warnings(out, &warnings), format!("Path {p} exists"));
        }
    }
    // Owners.
    let user = c.text("user").filter(|u| !u.is_empty());
    let group = c.text("group").filter(|g| !g.is_empty());
    let mut uid: i64 = -1;
    let mut gid: i64 = -1;
    if let Some(u) = &user {
        match nix::unistd::User::from_name(u).ok().flatten() {
            Some(found) => uid = i64::from(found.uid.as_raw()),
            None => {
                return fail(
                    with_warnings(out, &warnings),
                    format!("User {u} does not exist"),
                )
            }
        }
    }
    if let Some(g) = &group {
        match nix::unistd::Group::from_name(g).ok().flatten() {
            Some(found) => gid = i64::from(found.gid.as_raw()),
            None => {
                return fail(
                    with_warnings(out, &warnings),
                    format!("Group {g} does not exist"),
                )
            }
        }
    }
    let hash_update = c.flag("source_hash_update", false);
    if hash_update && c.text("source_hash").is_none_or(|h| h.is_empty()) {
        warnings.push(json!(
            "The 'source_hash_update' argument is ignored when 'source_hash' is not also specified."
        ));
    }
    // The source.
    let source = match c.arg("source") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(_)) => {
            return fail(
                with_warnings(out, &warnings),
                "archive.extracted: a list of sources is not supported by Brine".into(),
            )
        }
        Some(other) => py_text(other),
        None => String::new(),
    };
    if source.is_empty() {
        return fail(
            with_warnings(out, &warnings),
            format!("Invalid source \"{source}\""),
        );
    }
    let (scheme, rest) = match source.split_once("://") {
        Some((s, r))
            if !s.is_empty()
                && s.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "+-.".contains(ch)) =>
        {
            (s.to_lowercase(), r.to_string())
        }
        _ => (String::new(), source.clone()),
    };
    let source_is_local = scheme.is_empty() || scheme == "file";
    let source_is_http = scheme == "http" || scheme == "https";
    if !source_is_local && scheme != "salt" && !source_is_http {
        return fail(
            with_warnings(out, &warnings),
            format!(
                "archive.extracted: the source {source} is not supported by Brine: only salt://, http://, https:// and local sources"
            ),
        );
    }
    // The path part as urlparse gives it (netloc joined with path for salt://).
    let url_path = if scheme.is_empty() {
        source.trim_end_matches('/').to_string()
    } else {
        // urlparse: no query or fragment in an http(s) URL's path.
        let rest: &str = if source_is_http {
            rest.split(['?', '#']).next().unwrap_or_default()
        } else {
            &rest
        };
        let (netloc, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        join(netloc, path).trim_end_matches('/').to_string()
    };
    let mut source_match = source.clone();
    if source_is_local {
        let real = std::fs::canonicalize(&url_path)
            .map_or_else(|_| url_path.clone(), |p| p.display().to_string());
        source_match = real;
        if !Path::new(&source_match).is_file() {
            return fail(
                with_warnings(out, &warnings),
                format!("Source file '{source_match}' does not exist"),
            );
        }
    }
    // The format.
    let archive_format = match c.text("archive_format").filter(|f| !f.is_empty()) {
        Some(f) => f.to_lowercase(),
        None => match guess_archive_type(&url_path) {
            Some(f) => f.to_string(),
            None => return fail(with_warnings(out, &warnings), "Could not guess archive_format from the value of the 'source' argument. Please set this archive_format to one of the following: tar, rar, zip".into()),
        },
    };
    if !["tar", "rar", "zip"].contains(&archive_format.as_str()) {
        return fail(with_warnings(out, &warnings), format!("Invalid archive_format '{archive_format}'. Either set it to a supported value (tar, rar, zip) or remove this argument and the archive format will be guessed based on file extension."));
    }
    let options = c.arg("options").map(py_text);
    let options = options.filter(|o| !o.is_empty());
    let mut strip_components: Option<i64> = None;
    if let (Some(o), "tar") = (&options, archive_format.as_str()) {
        let re = regex::Regex::new(r#"--strip(?:-components)?(?:\s+|=)["']?(\d+)["']?"#)
            .map_err(|e| e.to_string())?;
        strip_components = re
            .captures(o)
            .and_then(|m| m.get(1))
            .and_then(|m| m.as_str().parse().ok());
    }
    let mut use_cmd_unzip = c.arg("use_cmd_unzip").map(json_truthy);
    if archive_format == "zip" && options.is_some() {
        match use_cmd_unzip {
            None => use_cmd_unzip = Some(true),
            Some(false) => return fail(with_warnings(out, &warnings), "'use_cmd_unzip' cannot be set to False if CLI options are being specified (via the 'options' argument). Either remove 'use_cmd_unzip', or set it to True.".into()),
            Some(true) => {}
        }
    }
    if archive_format == "rar" {
        return fail(
            with_warnings(out, &warnings),
            "archive.unrar function not available, rar/unrar might not be installed on minion"
                .into(),
        );
    }
    let trim_output: Option<i64> = match c.arg("trim_output") {
        None => None,
        Some(Value::Bool(true)) => Some(100),
        Some(Value::Bool(false)) => None,
        Some(Value::Number(n)) => n.as_i64().filter(|n| *n != 0),
        Some(Value::String(s)) => match s.trim().parse::<i64>() {
            Ok(n) => Some(n).filter(|n| *n != 0),
            Err(_) => {
                return Err(format!(
                    "ValueError: invalid literal for int() with base 10: '{s}'"
                ))
            }
        },
        Some(_) => {
            return fail(
                with_warnings(out, &warnings),
                "Invalid value for trim_output, must be True/False or an integer".into(),
            )
        }
    };
    let source_hash = c.text("source_hash").filter(|h| !h.is_empty());
    let sum = match &source_hash {
        // Salt's file.get_source_sum: a hash expression or a file of hashes.
        Some(h) => match source_sum(c, "", &source_match, h) {
            Ok(s) => Some((s.hash_type.as_str().to_string(), s.hsum)),
            Err(SumError::Invalid(e) | SumError::Unreadable(e) | SumError::Fetch(e)) => {
                return fail(with_warnings(out, &warnings), e)
            }
        },
        None => None,
    };
    // The archive on this machine.
    let cached: String = if source_is_local {
        source_match.clone()
    } else {
        if c.test {
            out.insert("result".into(), Value::Null);
            return fail(with_warnings(out, &warnings), format!("Archive {} would be cached (if necessary) and checked to discover if extraction is needed", redact(&source_match)));
        }
        if source_is_http {
            match cache_http(c, &source, sum.as_ref(), skip_verify, use_etag) {
                Ok(path) => path,
                Err(failed) => return Ok(failed),
            }
        } else {
            let (rel, env) = match rest.split_once("?saltenv=") {
                Some((r, e)) => (r.to_string(), e.to_string()),
                None => (rest.clone(), c.saltenv.to_string()),
            };
            let bytes = match c.host.fetch(&source, c.saltenv)? {
                Some(b) => b,
                None => {
                    let mut failed = ret(&source_match, json!(false), "", json!({}));
                    failed.insert(
                        "comment".into(),
                        json!(format!(
                            "Failed to cache {source_match}, check minion log for more information"
                        )),
                    );
                    return Ok(failed);
                }
            };
            let target = c.host.cachedir().join("files").join(env).join(rel);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            std::fs::write(&target, &bytes).map_err(|e| e.to_string())?;
            let target = target.display().to_string();
            if let (Some((form, hsum)), false) = (&sum, skip_verify) {
                let got =
                    c.host
                        .call("file.get_hash", &[json!(target), json!(form)], &Map::new())?;
                if got.as_str() != Some(hsum.as_str()) {
                    let _ = std::fs::remove_file(&target);
                    let mut failed = ret(&source_match, json!(false), "", json!({}));
                    failed.insert(
                        "comment".into(),
                        json!(format!(
                        "File {source_match} does not match the desired source_hash {form}={hsum}"
                    )),
                    );
                    return Ok(failed);
                }
            }
            target
        }
    };
    // source_hash_update: the archive's hash as the last run recorded it, then this one's.
    let checksum_file =
        hash_update.then(|| checksum_file(&c.host.cachedir().display().to_string(), &cached));
    let recorded = checksum_file.as_deref().and_then(read_checksum);
    if let (Some(file), Some(_), false) = (&checksum_file, &sum, skip_verify) {
        record_checksum(c, file, &cached)?;
    }
    let drop_cached = |cached: &str, out: &mut Map<String, Value>| {
        if !source_is_local && !keep_source {
            let _ = std::fs::remove_file(cached);
        }
        let _ = out;
    };
    // Password-protected zip archives need a password.
    if archive_format == "zip" {
        if let Ok(Value::Bool(true)) =
            c.host
                .call("archive.is_encrypted", &[json!(cached)], &Map::new())
        {
            return fail(with_warnings(out, &warnings), format!("Archive {} is password-protected, but no password was specified. Please set the 'password' argument.", redact(&source_match)));
        }
    }
    let mut list_kwargs = Map::new();
    list_kwargs.insert("archive_format".into(), json!(archive_format));
    list_kwargs.insert("strip_components".into(), json!(strip_components));
    list_kwargs.insert("clean".into(), json!(false));
    list_kwargs.insert("verbose".into(), json!(true));
    let contents = match c.host.call("archive.list", &[json!(cached)], &list_kwargs) {
        Ok(Value::Object(m)) => Some(m),
        Ok(other) => return Err(format!("archive.list returned {other}")),
        Err(e) => {
            let mut errors = Vec::new();
            if if_missing.is_none() {
                errors.push("'if_missing' must be set");
            }
            if user.is_some() || group.is_some() {
                errors.push("Ownership cannot be managed without setting 'enforce_ownership_on'.");
            }
            let mut msg = strerror(&e);
            if !errors.is_empty() {
                msg.push_str("\n\n");
                if archive_format == "tar" {
                    msg.push_str("If the source archive is a tar archive compressed using a compression type not natively supported by the tar command, then setting the 'list_options' argument may allow the contents to be listed. Otherwise, if Salt is unable to determine the files/directories in the archive, the following workaround(s) would need to be used for this state to proceed");
                } else {
                    msg.push_str(
                        "The following workarounds must be used for this state to proceed",
                    );
                }
                msg.push_str(&format!(
                    " (assuming the source file is a valid {archive_format} archive):\n"
                ));
                for e in errors {
                    msg.push_str(&format!("\n- {e}"));
                }
                return fail(with_warnings(out, &warnings), msg);
            }
            None
        }
    };
    let strings = |key: &str| -> Vec<String> {
        contents
            .as_ref()
            .and_then(|m| m.get(key))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (top_dirs, top_files, top_links) = (
        strings("top_level_dirs"),
        strings("top_level_files"),
        strings("top_level_links"),
    );
    if c.flag("enforce_toplevel", true)
        && contents.is_some()
        && (top_dirs.len() > 1 || !top_files.is_empty())
    {
        return fail(with_warnings(out, &warnings), format!("Archive does not have a single top-level directory. To allow this archive to be extracted, set 'enforce_toplevel' to False. To avoid a '{archive_format}-bomb' it may also be advisable to set a top-level directory by adding it to the 'name' value (for example, setting 'name' to {} instead of {name}).", join(&name, "some_dir")));
    }
    let clean = c.flag("clean", false);
    let clean_parent = c.flag("clean_parent", false);
    let force = c.flag("force", false);
    if clean && clean_parent {
        return fail(
            with_warnings(out, &warnings),
            "Only one of 'clean' and 'clean_parent' can be set to True".into(),
        );
    }
    let mut changes = Map::new();
    let mut extraction_needed = c.flag("overwrite", false);
    let mut contents_missing = false;
    let if_missing_exists = if_missing.as_deref().is_some_and(|p| Path::new(p).exists());
    if !if_missing_exists {
        if contents.is_none() {
            // Without a listing, only if_missing tells (it is set: see above).
            extraction_needed = if_missing
                .as_deref()
                .is_none_or(|p| std::fs::symlink_metadata(p).is_err());
        } else {
            let mut incorrect = Vec::new();
            for (key, kind) in [("dirs", 0), ("files", 1), ("links", 2)] {
                for path in strings(key) {
                    let full = join(&name, &path);
                    match std::fs::symlink_metadata(full.trim_end_matches('/')) {
                        Ok(m) => {
                            let ft = m.file_type();
                            let fits = match kind {
                                0 => ft.is_dir(),
                                1 => !ft.is_symlink() && !ft.is_dir(),
                                _ => ft.is_symlink(),
                            };
                            if !fits {
                                incorrect.push(path);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            extraction_needed = true;
                            contents_missing = true;
                        }
                        Err(e) if e.raw_os_error() == Some(libc_enotdir()) => {}
                        Err(e) => {
                            return fail(
                                with_warnings(out, &warnings),
                                python_os_error(&e, Path::new(full.trim_end_matches('/'))),
                            )
                        }
                    }
                }
            }
            if !incorrect.is_empty() {
                let paths: Vec<String> = incorrect.iter().map(|p| format!("- {p}")).collect();
                let paths = format!("\n\n{}", paths.join("\n"));
                let mut comment = format!("The below paths (relative to {name}) exist, but are the incorrect type (file instead of directory, symlink instead of file, etc.).");
                if c.test && clean {
                    out.insert("result".into(), Value::Null);
                    comment.push_str(&format!(" Since the 'clean' option is enabled, the destination paths would be cleared and the archive would be extracted.{paths}"));
                    return fail(with_warnings(out, &warnings), comment);
                }
                if c.test && clean_parent {
                    out.insert("result".into(), Value::Null);
                    comment.push_str(" Since the 'clean_parent' option is enabled, the destination parent directory would be removed first and then re-created and the archive would be extracted");
                    return fail(with_warnings(out, &warnings), comment);
                }
                if !clean {
                    if !force {
                        comment.push_str(&format!(" To proceed with extraction, set 'force' to True. Note that this will remove these paths before extracting.{paths}"));
                        return fail(with_warnings(out, &warnings), comment);
                    }
                    let mut errors = Vec::new();
                    for path in incorrect {
                        let full = join(&name, &path);
                        match rm_rf(full.trim_end_matches('/')) {
                            Ok(()) => {
                                push_removed(&mut changes, &full);
                                extraction_needed = true;
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                            Err(e) => errors.push(e.to_string()),
                        }
                    }
                    if !errors.is_empty() {
                        let mut msg = "One or more paths existed by were the incorrect type (i.e. file instead of directory or vice-versa), but could not be removed. The following errors were observed:\n".to_string();
                        for e in errors {
                            msg.push_str(&format!("\n- {e}"));
                        }
                        out.insert("changes".into(), Value::Object(changes));
                        return fail(with_warnings(out, &warnings), msg);
                    }
                }
            }
        }
    }
    let hash_trigger = !extraction_needed
        && recorded.is_some()
        && checksum_file.as_deref().and_then(read_checksum) != recorded;
    extraction_needed |= hash_trigger;
    let explain = |comment: &mut String| {
        if hash_trigger {
            comment.push_str(", due to source_hash update");
        } else if contents_missing {
            comment.push_str(", due to absence of one or more files/dirs");
        }
    };
    let mut created_destdir = false;
    let mut files: Vec<Value> = Vec::new();
    let mut files_text: Option<String> = None;
    if extraction_needed {
        if let (true, Some((_, hsum)), false) = (source_is_local, &sum, skip_verify) {
            let ok = c.host.call(
                "file.check_hash",
                &[json!(source_match), json!(hsum)],
                &Map::new(),
            )?;
            if !json_truthy(&ok) {
                out.insert("result".into(), ok);
                return fail(
                    with_warnings(out, &warnings),
                    format!(
                        "{} does not match the desired source_hash {hsum}",
                        redact(&source_match)
                    ),
                );
            }
        }
        if c.test {
            out.insert("result".into(), Value::Null);
            let mut comment = format!(
                "Archive {} would be extracted to {name}",
                redact(&source_match)
            );
            if clean && contents.is_some() {
                comment.push_str(", after cleaning destination path(s)");
            }
            explain(&mut comment);
            out.insert("changes".into(), Value::Object(changes));
            return fail(with_warnings(out, &warnings), comment);
        }
        if clean_parent && contents.is_some() {
            match rm_rf(name.trim_end_matches('/')) {
                Ok(()) => {
                    changes.entry("removed").or_insert_with(|| {
                        json!(format!(
                            "Directory {name} was removed prior to the extraction"
                        ))
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    out.insert("changes".into(), Value::Object(changes));
                    return fail(with_warnings(out, &warnings), format!("Unable to remove the directory {name}. The following errors were observed:\n\n- {e}"));
                }
            }
        }
        if clean && contents.is_some() {
            let mut errors = Vec::new();
            for path in top_dirs.iter().chain(&top_files) {
                let full = join(&name, path);
                match rm_rf(full.trim_end_matches('/')) {
                    Ok(()) => push_removed(&mut changes, &full),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if !errors.is_empty() {
                let mut msg =
                    "One or more paths could not be cleaned. The following errors were observed:\n"
                        .to_string();
                for e in errors {
                    msg.push_str(&format!("\n- {e}"));
                }
                out.insert("changes".into(), Value::Object(changes));
                return fail(with_warnings(out, &warnings), msg);
            }
        }
        if !Path::new(&name).is_dir() {
            let mut low = Map::new();
            low.insert("name".into(), json!(name));
            low.insert("user".into(), json!(user));
            low.insert("makedirs".into(), json!(true));
            sub_state(c, "file.directory", low)?;
            created_destdir = true;
        }
        if archive_format == "zip" {
            let mut kwargs = Map::new();
            kwargs.insert("options".into(), json!(options));
            kwargs.insert(
                "trim_output".into(),
                trim_output.map_or(json!(false), |n| json!(n)),
            );
            let fun = if use_cmd_unzip == Some(true) {
                "archive.cmd_unzip"
            } else {
                kwargs.insert("extract_perms".into(), json!(c.flag("extract_perms", true)));
                "archive.unzip"
            };
            match c.host.call(fun, &[json!(cached), json!(name)], &kwargs) {
                Ok(Value::Array(list)) => files = list,
                Ok(other) => files = vec![other],
                Err(e) => {
                    out.insert("changes".into(), Value::Object(changes));
                    return fail(with_warnings(out, &warnings), strerror(&e));
                }
            }
        } else if let Some(options) = &options {
            if cmd_which("tar").is_none() {
                return fail(
                    with_warnings(out, &warnings),
                    "tar command not available, it might not be installed on minion".into(),
                );
            }
            let words = brine_protocol::pyrepr::shlex_split(options)?;
            let words: Vec<String> = words
                .into_iter()
                .filter(|w| !["v", "-v", "--verbose"].contains(&w.as_str()))
                .collect();
            let mut short = "xv".to_string();
            let mut long = Vec::new();
            for (i, w) in words.iter().enumerate() {
                if w.starts_with('-') || i > 0 {
                    long.push(w.clone());
                } else {
                    short.push_str(&w.replace(['x', 'f'], ""));
                }
            }
            let mut argv = vec![json!("tar"), json!(short)];
            argv.extend(long.into_iter().map(Value::from));
            argv.push(json!("-f"));
            argv.push(json!(cached));
            let mut kwargs = Map::new();
            kwargs.insert("cwd".into(), json!(name));
            kwargs.insert("python_shell".into(), json!(false));
            let results = c.host.call("cmd.run_all", &[Value::Array(argv)], &kwargs)?;
            if results.get("retcode").and_then(Value::as_i64) != Some(0) {
                out.insert("changes".into(), results);
                return Ok(with_warnings(out, &warnings));
            }
            let stdout = results.get("stdout").and_then(Value::as_str).unwrap_or("");
            let mut lines: Vec<Value> = stdout.lines().map(Value::from).collect();
            if let Some(n) = trim_output {
                lines.truncate(usize::try_from(n.max(0)).unwrap_or(0));
            }
            if lines.is_empty() {
                files_text = Some("no tar output so far".into());
            }
            files = lines;
        } else {
            match tar_extract(Path::new(&cached), Path::new(&name)) {
                Ok(names) => {
                    files = names.into_iter().map(Value::from).collect();
                    if let Some(n) = trim_output {
                        files.truncate(usize::try_from(n.max(0)).unwrap_or(0));
                    }
                }
                Err(TarError::Read(_)) => {
                    if created_destdir {
                        let _ = std::fs::remove_dir(&name);
                    }
                    return fail(with_warnings(out, &warnings), "Failed to read from tar archive using Python's native tar file support. If archive is compressed using something other than gzip or bzip2, the 'options' argument may be required to pass the correct options to the tar command in order to extract the archive.".into());
                }
                Err(TarError::Io(e)) => return Err(e),
            }
        }
    }
    // Owners.
    let test = c.test;
    let mut enforce_missing = Vec::new();
    let mut enforce_failed = Vec::new();
    if user.is_some() || group.is_some() {
        let recurse: Vec<Value> = [("user", &user), ("group", &group)]
            .into_iter()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| json!(k))
            .collect();
        for dir in &top_dirs {
            let full = join(&name, dir);
            if !Path::new(&full).is_dir() {
                if !test {
                    enforce_missing.push(full);
                }
                continue;
            }
            let mut low = Map::new();
            low.insert("name".into(), json!(full));
            low.insert("user".into(), json!(user));
            low.insert("group".into(), json!(group));
            low.insert("recurse".into(), Value::Array(recurse.clone()));
            let r = sub_state(c, "file.directory", low)?;
            if r.get("changes").is_some_and(json_truthy) {
                changes.insert("updated ownership".into(), json!(true));
            }
            if !r.get("result").is_some_and(json_truthy) {
                enforce_failed.push(full);
            }
        }
        for file in top_files.iter().chain(&top_links) {
            let full = join(&name, file);
            match std::fs::symlink_metadata(&full) {
                Err(e) => {
                    if !test {
                        if e.kind() == std::io::ErrorKind::NotFound {
                            enforce_missing.push(full.clone());
                        }
                        enforce_failed.push(full);
                    }
                }
                Ok(m) => {
                    let differs = (uid != -1 && uid != i64::from(m.uid()))
                        || (gid != -1 && gid != i64::from(m.gid()));
                    if differs {
                        if test {
                            changes.insert("updated ownership".into(), json!(true));
                        } else {
                            let to = |id: i64| u32::try_from(id).ok();
                            match std::os::unix::fs::lchown(&full, to(uid), to(gid)) {
                                Ok(()) => {
                                    changes.insert("updated ownership".into(), json!(true));
                                }
                                Err(_) => enforce_failed.push(file.clone()),
                            }
                        }
                    }
                }
            }
        }
    }
    let mut comment;
    let result;
    if extraction_needed {
        let count = files_text.is_some() || !files.is_empty();
        if count {
            if created_destdir {
                changes.insert("directories_created".into(), json!([name]));
            }
            changes.insert(
                "extracted_files".into(),
                files_text.map_or(Value::Array(files), Value::from),
            );
            comment = format!("{} extracted to {name}", redact(&source_match));
            explain(&mut comment);
            if let Some(n) = trim_output {
                comment.push_str(&format!(". Output was trimmed to {n} number of lines"));
            }
            result = json!(true);
        } else {
            result = json!(false);
            comment = format!("No files were extracted from {}", redact(&source_match));
        }
    } else {
        let mut r = json!(true);
        comment = if if_missing_exists {
            format!("{} exists", if_missing.clone().unwrap_or_default())
        } else {
            "All files in archive are already present".into()
        };
        if test && changes.contains_key("updated ownership") {
            r = Value::Null;
            comment.push_str(". Ownership would be updated on one or more files/directories.");
        }
        result = r;
    }
    let mut result = result;
    if !enforce_missing.is_empty() {
        if if_missing.is_none() {
            result = json!(false);
        }
        comment.push_str(
            "\n\nWhile trying to enforce user/group ownership, the following paths were missing:\n",
        );
        for item in &enforce_missing {
            comment.push_str(&format!("\n- {item}"));
        }
    }
    if !enforce_failed.is_empty() {
        result = json!(false);
        comment.push_str("\n\nWhile trying to enforce user/group ownership, Salt was unable to change ownership on the following paths:\n");
        for item in &enforce_failed {
            comment.push_str(&format!("\n- {item}"));
        }
    }
    drop_cached(&cached, &mut out);
    out.insert("result".into(), result);
    out.insert("changes".into(), Value::Object(changes));
    out.insert("comment".into(), json!(comment));
    Ok(with_warnings(out, &warnings))
}

fn push_removed(changes: &mut Map<String, Value>, path: &str) {
    if let Some(list) = changes
        .entry("removed")
        .or_insert_with(|| json!([]))
        .as_array_mut()
    {
        list.push(json!(path));
    }
}

fn libc_enotdir() -> i32 {
    nix::errno::Errno::ENOTDIR as i32
}

/// The path of a command on `PATH`.
fn cmd_which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(cmd))
            .find(|p| p.is_file())
    })
}

/// The hash type Salt's `source_hash_update` records (the minion's `hash_type` default).
const UPDATE_HASH_TYPE: &str = "sha256";

/// Where `source_hash_update` records an archive's hash (Salt's `_checksum_file_path`):
/// `<cachedir>/archive_hash/<path in the cache>.hash`, or `.../local/<absolute path>` for
/// an archive outside the cache (Salt's test: the relative path's third character is a
/// slash).
fn checksum_file(cachedir: &str, path: &str) -> PathBuf {
    let cachedir = brine_protocol::posixpath::normpath(cachedir);
    let path = brine_protocol::posixpath::normpath(path);
    let inside = path
        .strip_prefix(&format!("{}/", cachedir.trim_end_matches('/')))
        .map(|rel| format!("{rel}.hash"))
        .filter(|rel| !matches!(rel.as_bytes().get(2), Some(b'/' | b'\\')));
    let rel = inside.unwrap_or_else(|| join("local", path.trim_start_matches('/')));
    Path::new(&cachedir).join("archive_hash").join(rel)
}

/// The recorded hash of the update hash type (Salt's `_read_cached_checksum`): `None` when
/// there is no record, or it cannot be read.
fn read_checksum(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    for line in text.lines() {
        let (form, hsum) = line.split_once(':')?;
        if form == UPDATE_HASH_TYPE {
            return Some(hsum.to_string());
        }
    }
    None
}

/// Record the archive's hash now (Salt's `_update_checksum`): the line of the update hash
/// type replaced or added, the others kept.
fn record_checksum(c: &Call, file: &Path, archive: &str) -> Result<(), String> {
    let hsum = c.host.call(
        "file.get_hash",
        &[json!(archive), json!(UPDATE_HASH_TYPE)],
        &Map::new(),
    )?;
    let Some(hsum) = hsum.as_str().filter(|h| !h.is_empty()) else {
        return Ok(());
    };
    let mut lines: Vec<(String, String)> = std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(f, h)| (f.to_string(), h.to_string()))
        .collect();
    match lines.iter_mut().find(|(f, _)| f == UPDATE_HASH_TYPE) {
        Some(line) => line.1 = hsum.to_string(),
        None => lines.push((UPDATE_HASH_TYPE.to_string(), hsum.to_string())),
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let text: String = lines.iter().map(|(f, h)| format!("{f}:{h}\n")).collect();
    std::fs::write(file, text).map_err(|e| e.to_string())
}
