//! The `file` state module: `file.managed` (contents, `contents_pillar`/`contents_grains`,
//! `source` from the file server, the local disk or over http(s) (cached in `extrn_files`,
//! checked against `source_hash` unless `skip_verify`, see `remote.rs`), Jinja `template`
//! with `context` and `defaults`, `mode`/`user`/`group`, `makedirs`, `replace`,
//! `show_changes`, a unified diff of what changed), `file.directory`, `file.absent`,
//! `file.exists`, `file.missing` and `file.touch`, with Salt's comments and changes; the
//! text-editing states are in `edit.rs`, `file.symlink`, `file.copy`, `file.rename`,
//! `file.recurse` and `file.serialize` in `tree.rs`, `file.tidied` and `file.pruned` in
//! `tidy.rs`, `file.cached` and `file.not_cached` in `cached.rs`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::source_hash::{source_sum, SourceSum, SumError};
use super::{ret, Accepts, Call, Spec};
use crate::diff;
use crate::verify::py_text;

mod cached;
mod remote;
mod tidy;
mod tree;

pub use tree::include_exclude;

mod edit;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "managed",
        required: &["name"],
        accepts: Accepts::Any,
        run: managed,
    },
    Spec {
        name: "directory",
        required: &["name"],
        accepts: Accepts::Any,
        run: directory,
    },
    Spec {
        name: "absent",
        required: &["name"],
        accepts: Accepts::Any,
        run: absent,
    },
    Spec {
        name: "exists",
        required: &["name"],
        accepts: Accepts::Any,
        run: exists,
    },
    Spec {
        name: "missing",
        required: &["name"],
        accepts: Accepts::Any,
        run: missing,
    },
    Spec {
        name: "cached",
        required: &["name"],
        accepts: Accepts::Only(cached::ACCEPTS),
        run: cached::cached,
    },
    Spec {
        name: "not_cached",
        required: &["name"],
        accepts: Accepts::Only(&["name", "saltenv"]),
        run: cached::not_cached,
    },
    Spec {
        name: "accumulated",
        required: &["name", "filename", "text"],
        accepts: Accepts::Any,
        run: edit::accumulated,
    },
    Spec {
        name: "touch",
        required: &["name"],
        accepts: Accepts::Only(&["name", "atime", "mtime", "makedirs"]),
        run: touch,
    },
    Spec {
        name: "append",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "text",
            "makedirs",
            "source",
            "source_hash",
            "template",
            "sources",
            "source_hashes",
            "defaults",
            "context",
            "ignore_whitespace",
            "encoding",
            "encoding_errors",
        ]),
        run: edit::append,
    },
    Spec {
        name: "prepend",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "text",
            "makedirs",
            "source",
            "source_hash",
            "template",
            "sources",
            "source_hashes",
            "defaults",
            "context",
            "header",
            "encoding",
            "encoding_errors",
        ]),
        run: edit::prepend,
    },
    Spec {
        name: "comment",
        required: &["name", "regex"],
        accepts: Accepts::Only(&[
            "name",
            "regex",
            "char",
            "backup",
            "ignore_missing",
            "encoding",
            "encoding_errors",
        ]),
        run: edit::comment,
    },
    Spec {
        name: "uncomment",
        required: &["name", "regex"],
        accepts: Accepts::Only(&["name", "regex", "char", "backup"]),
        run: edit::uncomment,
    },
    Spec {
        name: "replace",
        required: &["name", "pattern", "repl"],
        accepts: Accepts::Only(&[
            "name",
            "pattern",
            "repl",
            "count",
            "flags",
            "bufsize",
            "append_if_not_found",
            "prepend_if_not_found",
            "not_found_content",
            "backup",
            "show_changes",
            "ignore_if_missing",
            "backslash_literal",
            "encoding",
        ]),
        run: edit::replace,
    },
    Spec {
        name: "blockreplace",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "marker_start",
            "marker_end",
            "source",
            "source_hash",
            "template",
            "sources",
            "source_hashes",
            "defaults",
            "context",
            "content",
            "append_if_not_found",
            "prepend_if_not_found",
            "backup",
            "show_changes",
            "append_newline",
            "insert_before_match",
            "insert_after_match",
        ]),
        run: edit::blockreplace,
    },
    Spec {
        name: "line",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "content",
            "match",
            "mode",
            "location",
            "before",
            "after",
            "show_changes",
            "backup",
            "quiet",
            "indent",
            "create",
            "user",
            "group",
            "file_mode",
        ]),
        run: edit::line,
    },
    Spec {
        name: "keyvalue",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "key",
            "value",
            "key_values",
            "separator",
            "append_if_not_found",
            "prepend_if_not_found",
            "search_only",
            "show_changes",
            "ignore_if_missing",
            "count",
            "uncomment",
            "key_ignore_case",
            "value_ignore_case",
            "create_if_missing",
        ]),
        run: edit::keyvalue,
    },
    Spec {
        name: "symlink",
        required: &["name", "target"],
        accepts: Accepts::Any,
        run: tree::symlink,
    },
    Spec {
        name: "copy",
        required: &["name", "source"],
        accepts: Accepts::Any,
        run: tree::copy,
    },
    Spec {
        name: "rename",
        required: &["name", "source"],
        accepts: Accepts::Any,
        run: tree::rename,
    },
    Spec {
        name: "recurse",
        required: &["name", "source"],
        accepts: Accepts::Any,
        run: tree::recurse,
    },
    Spec {
        name: "serialize",
        required: &["name"],
        accepts: Accepts::Any,
        run: tree::serialize,
    },
    Spec {
        name: "hardlink",
        required: &["name", "target"],
        accepts: Accepts::Any,
        run: tree::hardlink,
    },
    Spec {
        name: "tidied",
        required: &["name"],
        accepts: Accepts::Any,
        run: tidy::tidied,
    },
    Spec {
        name: "pruned",
        required: &["name"],
        accepts: Accepts::Only(&["name", "recurse", "ignore_errors", "older_than"]),
        run: tidy::pruned,
    },
];

type Ret = Map<String, Value>;

fn error(mut r: Ret, msg: impl Into<String>) -> Result<Ret, String> {
    r.insert("result".into(), json!(false));
    r.insert("comment".into(), json!(msg.into()));
    Ok(r)
}

fn set(r: &mut Ret, key: &str, v: Value) {
    r.insert(key.into(), v);
}

fn changes(r: &mut Ret) -> &mut Map<String, Value> {
    if !r.get("changes").is_some_and(Value::is_object) {
        r.insert("changes".into(), json!({}));
    }
    r.get_mut("changes")
        .and_then(Value::as_object_mut)
        .expect("changes is a map")
}

/// `~` expanded as Python's `os.path.expanduser`.
fn expanduser(name: &str) -> String {
    match name.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => std::env::var("HOME")
            .map(|h| format!("{h}{rest}"))
            .unwrap_or_else(|_| name.to_string()),
        _ => name.to_string(),
    }
}

/// Salt's `normalize_mode`: `644`, `0644`, `"0o644"` → `"0644"`.
pub fn normalize_mode(mode: &Value) -> Option<String> {
    if mode.is_null() {
        return None;
    }
    let text = py_text(mode).replace("0o", "0");
    let text = text
        .trim_matches('"')
        .trim_matches('\'')
        .trim_start_matches('0');
    Some(format!("{text:0>4}"))
}

fn file_mode(path: &Path) -> Option<String> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| format!("{:04o}", m.permissions().mode() & 0o7777))
}

fn set_mode(path: &Path, mode: &str) -> std::io::Result<()> {
    let bits = u32::from_str_radix(mode, 8).map_err(|e| std::io::Error::other(e.to_string()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits))
}

fn uid_of(user: &str) -> Option<u32> {
    if let Ok(n) = user.parse() {
        return Some(n);
    }
    nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

fn gid_of(group: &str) -> Option<u32> {
    if let Ok(n) = group.parse() {
        return Some(n);
    }
    nix::unistd::Group::from_name(group)
        .ok()
        .flatten()
        .map(|g| g.gid.as_raw())
}

/// Salt's `_check_user`: the owner and group must exist (only a warning under test).
fn check_user(user: Option<&str>, group: Option<&str>, test: bool) -> Option<String> {
    let mut err = String::new();
    if let Some(u) = user.filter(|u| !u.is_empty()) {
        if uid_of(u).is_none() {
            err.push_str(&format!("User {u} is not available "));
        }
    }
    if let Some(g) = group.filter(|g| !g.is_empty()) {
        if gid_of(g).is_none() {
            err.push_str(&format!("Group {g} is not available"));
        }
    }
    (!err.is_empty() && !test).then_some(err)
}

/// Salt's `check_perms` for owner, group and mode: what it set goes into `changes`.
fn check_perms(
    r: &mut Ret,
    path: &Path,
    user: Option<&str>,
    group: Option<&str>,
    mode: Option<&str>,
    test: bool,
) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    let want_uid = user.and_then(uid_of);
    let want_gid = group.and_then(gid_of);
    let chown_user = want_uid.filter(|u| *u != meta.uid());
    let chown_group = want_gid.filter(|g| *g != meta.gid());
    let mut failures = Vec::new();
    if chown_user.is_some() || chown_group.is_some() {
        if test {
            if let Some(u) = user.filter(|_| chown_user.is_some()) {
                changes(r).insert("user".into(), json!(u));
            }
            if let Some(g) = group.filter(|_| chown_group.is_some()) {
                changes(r).insert("group".into(), json!(g));
            }
        } else {
            let ok = std::os::unix::fs::lchown(path, chown_user, chown_group).is_ok();
            if let (Some(u), Some(_)) = (user, chown_user) {
                if ok {
                    changes(r).insert("user".into(), json!(u));
                } else {
                    failures.push(format!("Failed to change user to {u}"));
                }
            }
            if let (Some(g), Some(_)) = (group, chown_group) {
                if ok {
                    changes(r).insert("group".into(), json!(g));
                } else {
                    failures.push(format!("Failed to change group to {g}"));
                }
            }
        }
    }
    let is_link = meta.file_type().is_symlink();
    if let Some(mode) = mode.filter(|_| !is_link) {
        if file_mode(path).as_deref() != Some(mode) {
            if test || (set_mode(path, mode).is_ok() && file_mode(path).as_deref() == Some(mode)) {
                changes(r).insert("mode".into(), json!(mode));
            } else {
                failures.push(format!("Failed to change mode to {mode}"));
            }
        }
    }
    if !failures.is_empty() {
        set(r, "result", json!(false));
        set(r, "comment", json!(failures.join("\n")));
    }
    // As Salt, at the very end: a test run that would change something has no result.
    if test && brine_protocol::payload::json_truthy(&r["changes"]) {
        set(r, "result", Value::Null);
    }
}

/// What would change of a path's owner, group and mode (Salt's `check_file_meta` and
/// `_check_dir_meta`, without touching anything).
fn meta_changes(
    path: &Path,
    user: Option<&str>,
    group: Option<&str>,
    mode: Option<&str>,
) -> Map<String, Value> {
    let mut ch = Map::new();
    if let Ok(meta) = std::fs::metadata(path) {
        if let Some(u) = user.filter(|u| uid_of(u).is_some_and(|uid| uid != meta.uid())) {
            ch.insert("user".into(), json!(u));
        }
        if let Some(g) = group.filter(|g| gid_of(g).is_some_and(|gid| gid != meta.gid())) {
            ch.insert("group".into(), json!(g));
        }
    }
    if let Some(m) = mode.filter(|m| file_mode(path).as_deref() != Some(*m)) {
        ch.insert("mode".into(), json!(m));
    }
    ch
}

/// Salt's `_binary_replace`/`is_text`: NUL bytes or invalid UTF-8 make a file binary.
fn is_binary(bytes: &[u8]) -> bool {
    bytes.contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// Salt's `get_diff(old, new)` without file names.
fn get_diff(old: &[u8], new: &[u8], show_changes: bool) -> String {
    if old == new {
        return String::new();
    }
    if !show_changes {
        return "<show_changes=False>".into();
    }
    match (is_binary(old), is_binary(new)) {
        (true, true) => return "Replace binary file".into(),
        (true, false) => return "Replace binary file with text file".into(),
        (false, true) => return "Replace text file with binary file".into(),
        _ => {}
    }
    let (a, b) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
    diff::unified(&diff::lines(&a), &diff::lines(&b))
}

fn traverse<'v>(data: &'v Value, key: &str, delimiter: &str) -> Option<&'v Value> {
    key.split(delimiter).try_fold(data, |v, k| match v {
        Value::Object(m) => m.get(k),
        Value::Array(l) => k.parse::<usize>().ok().and_then(|i| l.get(i)),
        _ => None,
    })
}

/// `contents` as Salt writes it: each line ended by a newline (then the last one dropped
/// when `contents_newline` is false).
fn normalize_contents(value: &Value, newline: bool) -> Option<String> {
    let parts: Vec<String> = match value {
        Value::Array(items) => items.iter().map(py_text).collect(),
        Value::Object(_) => return None,
        other => vec![py_text(other)],
    };
    let mut out = String::new();
    for part in parts {
        for line in part.lines() {
            out.push_str(line.trim_end_matches('\r'));
            out.push('\n');
        }
    }
    if !newline {
        out = out
            .trim_end_matches('\n')
            .trim_end_matches('\r')
            .to_string();
    }
    Some(out)
}

/// The template variables a managed file's template sees.
fn template_vars(
    c: &Call,
    name: &str,
    source: &str,
    mode: Option<&str>,
) -> Result<Map<String, Value>, String> {
    let mut vars = Map::new();
    if let Some(defaults) = c.arg("defaults") {
        vars.extend(defaults.as_object().cloned().unwrap_or_default());
    }
    if let Some(context) = c.arg("context") {
        vars.extend(context.as_object().cloned().unwrap_or_default());
    }
    vars.insert("name".into(), json!(name));
    vars.insert("source".into(), json!(source));
    vars.insert("user".into(), c.arg("user").cloned().unwrap_or(Value::Null));
    vars.insert(
        "group".into(),
        c.arg("group").cloned().unwrap_or(Value::Null),
    );
    vars.insert("mode".into(), mode.map_or(Value::Null, |m| json!(m)));
    vars.insert("attrs".into(), Value::Null);
    vars.insert("saltenv".into(), json!(c.saltenv));
    Ok(vars)
}

/// The file a source gives: its bytes (rendered when a template), the source chosen, the
/// hash it must have when `source_hash` vouches for a source that is not the master's, and
/// the cached copy of an http(s) source (which `keep_source: False` deletes).
struct Fetched {
    bytes: Vec<u8>,
    sum: Option<SourceSum>,
    source: String,
    cached: Option<PathBuf>,
}

/// The entries of `source` (a text, or a list of texts or of `{source: hash}` maps) with the
/// hash each has (a map's, else `source_hash`); whether `source` is a list.
fn sources(c: &Call) -> (Vec<(String, Option<String>)>, bool) {
    let source_hash = c
        .arg("source_hash")
        .filter(|h| brine_protocol::payload::json_truthy(h))
        .map(py_text);
    match c.arg("source") {
        Some(Value::Array(items)) => {
            let entries = items
                .iter()
                .map(|i| match i {
                    Value::Object(m) => {
                        let (src, hash) =
                            m.iter().next().map_or((String::new(), None), |(k, v)| {
                                (
                                    k.clone(),
                                    Some(v).filter(|v| brine_protocol::payload::json_truthy(v)),
                                )
                            });
                        (src, hash.map(py_text).or_else(|| source_hash.clone()))
                    }
                    other => (py_text(other), source_hash.clone()),
                })
                .collect();
            (entries, true)
        }
        Some(other) => (vec![(py_text(other), source_hash)], false),
        None => (Vec::new(), false),
    }
}

/// The first source that exists (`source` may be a list; an http(s) entry of a list exists
/// when its HEAD succeeds), rendered when a template is asked for. `Err` carries Salt's
/// comment.
fn source_bytes(c: &Call, name: &str, mode: Option<&str>) -> Result<Fetched, String> {
    let (sources, listed) = sources(c);
    let single = sources.len() == 1;
    for (source, source_hash) in &sources {
        let (bytes, sum, cached) = if crate::url::is_http(source) {
            if listed && !c.host.url_exists(source) {
                continue;
            }
            let got = remote::fetch(c, name, source, source_hash.as_deref())?;
            (got.bytes, got.sum, Some(got.cached))
        } else {
            let fetched = c.host.fetch(source, c.saltenv)?;
            let Some(bytes) = fetched else {
                if !single {
                    continue;
                }
                return Err(if source.starts_with("salt://") {
                    format!("Source file {source} not found in saltenv '{}'", c.saltenv)
                } else {
                    format!(
                        "Local file source {} does not exist",
                        source.strip_prefix("file://").unwrap_or(source)
                    )
                });
            };
            // As Salt: the master's files are trusted; others are checked against
            // source_hash unless skip_verify.
            let sum = match source_hash {
                Some(hash) if !source.starts_with("salt://") && !c.flag("skip_verify", false) => {
                    Some(source_sum(c, name, source, hash).map_err(SumError::comment)?)
                }
                _ => None,
            };
            (bytes, sum, None)
        };
        let Some(template) = c.text("template") else {
            return Ok(Fetched {
                bytes,
                sum,
                source: source.clone(),
                cached,
            });
        };
        if template != "jinja" {
            return Err(format!(
                "Specified template format {template} is not supported"
            ));
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let mut vars = template_vars(c, name, source, mode)?;
        // A source template also sees the file's accumulators (`file.accumulated`).
        if let Some(accs) = c.accumulators.get().text.get(name) {
            vars.insert("accumulator".into(), accs.clone());
        }
        let rendered = c.host.render_template(&text, source, c.saltenv, vars)?;
        // A template's hash is the rendered file's own; what keep_source deletes is the
        // rendered file, not the cached source.
        return Ok(Fetched {
            bytes: rendered.into_bytes(),
            sum: None,
            source: source.clone(),
            cached: None,
        });
    }
    Err(NO_SOURCE.into())
}

/// Salt's `file.source_list` when no entry of a `source` list exists.
const NO_SOURCE: &str = "none of the specified sources were found";

fn managed(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    // Salt's key order: changes, comment, name, result.
    let mut ordered = Map::new();
    for k in ["changes", "comment", "name", "result"] {
        ordered.insert(k.into(), r[k].clone());
    }
    r = ordered;
    if name.is_empty() {
        return error(r, "Destination file name is required");
    }
    let keep_mode = c
        .text("mode")
        .is_some_and(|m| m.eq_ignore_ascii_case("keep"));
    let mode = if keep_mode {
        None
    } else {
        c.arg("mode").and_then(normalize_mode)
    };
    let contents_count = ["contents", "contents_pillar", "contents_grains"]
        .iter()
        .filter(|k| c.low.get(**k).is_some_and(|v| !v.is_null()))
        .count();
    let has_source = c
        .arg("source")
        .is_some_and(brine_protocol::payload::json_truthy);
    if has_source && contents_count > 0 {
        return error(r, "'source' cannot be used in combination with 'contents', 'contents_pillar', or 'contents_grains'");
    } else if keep_mode && contents_count > 0 {
        return error(r, "Mode preservation cannot be used in combination with 'contents', 'contents_pillar', or 'contents_grains'");
    } else if contents_count > 1 {
        return error(
            r,
            "Only one of 'contents', 'contents_pillar', and 'contents_grains' is permitted",
        );
    }
    let mut replace = c.flag("replace", true);
    if !has_source && contents_count == 0 {
        replace = false;
    }
    let delimiter = c.text("contents_delimiter").unwrap_or_else(|| ":".into());
    let use_contents: Option<Value> = if let Some(key) = c.arg("contents_pillar") {
        let keys: Vec<String> = match key {
            Value::Array(l) => l.iter().map(py_text).collect(),
            other => vec![py_text(other)],
        };
        let mut parts = Vec::new();
        for k in &keys {
            match traverse(c.host.pillar(), k, &delimiter) {
                Some(v) => parts.push(py_text(v)),
                None => return error(r, format!("Pillar {k} does not exist")),
            }
        }
        Some(json!(parts.join("\n")))
    } else if let Some(key) = c.arg("contents_grains") {
        let keys: Vec<String> = match key {
            Value::Array(l) => l.iter().map(py_text).collect(),
            other => vec![py_text(other)],
        };
        let mut parts = Vec::new();
        for k in &keys {
            match traverse(c.host.grains(), k, &delimiter) {
                Some(v) => parts.push(py_text(v)),
                None => return error(r, format!("Grain {k} does not exist")),
            }
        }
        Some(json!(parts.join("\n")))
    } else {
        c.arg("contents").cloned()
    };
    let mut contents: Option<String> = None;
    if let Some(use_contents) = &use_contents {
        if !c.flag("allow_empty", true) && !brine_protocol::payload::json_truthy(use_contents) {
            let id = if let Some(p) = c.text("contents_pillar") {
                format!("contents_pillar {p}")
            } else if let Some(g) = c.text("contents_grains") {
                format!("contents_grains {g}")
            } else {
                "'contents'".into()
            };
            return error(r, format!("{id} value would result in empty contents. Set allow_empty to True to allow the managed file to be empty."));
        }
        let Some(mut text) = normalize_contents(use_contents, c.flag("contents_newline", true))
        else {
            return error(r, "Contents specified by contents/contents_pillar/contents_grains is not a string or list of strings, and is not binary data. SLS is likely malformed.");
        };
        if let Some(template) = c.text("template") {
            if template != "jinja" {
                return error(
                    r,
                    format!("Specified template format {template} is not supported"),
                );
            }
            let vars = template_vars(c, &name, "", mode.as_deref())?;
            match c.host.render_template(&text, &name, c.saltenv, vars) {
                Ok(t) => text = t,
                Err(e) => return error(r, e),
            }
        }
        contents = Some(text);
    }
    let user = c.text("user");
    let group = c.text("group");
    let path = Path::new(&name);
    if !c.flag("create", true) && !path.is_file() {
        set(
            &mut r,
            "comment",
            json!(format!(
                "File {name} is not present and is not set for creation"
            )),
        );
        return Ok(r);
    }
    if let Some(err) = check_user(user.as_deref(), group.as_deref(), c.test) {
        return error(r, err);
    }
    if !path.is_absolute() {
        return error(r, format!("Specified file {name} is not an absolute path"));
    }
    if path.is_dir() {
        set(
            &mut r,
            "comment",
            json!(format!("Specified target {name} is a directory")),
        );
        set(&mut r, "result", json!(false));
        return Ok(r);
    }
    if c.arg("context").is_some_and(|v| !v.is_object()) {
        return error(r, "Context must be formed as a dict");
    }
    if c.arg("defaults")
        .is_some_and(|v| brine_protocol::payload::json_truthy(v) && !v.is_object())
    {
        return error(r, "Defaults must be formed as a dict");
    }
    let exists = path.exists();
    // As Salt's `follow_symlinks` (true by default): a link's target gets the owner and mode.
    let target = path
        .is_symlink()
        .then(|| std::fs::canonicalize(path).ok())
        .flatten()
        .filter(|_| c.flag("follow_symlinks", true));
    let perm_path = target.as_deref().unwrap_or(path);
    // As Salt: a file in place that already has the hash an http(s) source's source_hash
    // gives is not replaced, and nothing is downloaded.
    if replace
        && exists
        && contents.is_none()
        && c.arg("template").is_none()
        && has_source
        && !c.flag("skip_verify", false)
    {
        let (sources, listed) = sources(c);
        if let Some((source, hash)) = remote::chosen_http_source(c, &sources, listed) {
            match remote::in_place_has_hash(c, &name, path, &source, hash.as_deref()) {
                Ok(true) => replace = false,
                Ok(false) => {}
                Err(e) => return error(r, e),
            }
        }
    }
    if !replace && exists {
        check_perms(
            &mut r,
            perm_path,
            user.as_deref(),
            group.as_deref(),
            mode.as_deref(),
            c.test,
        );
        if c.test {
            let lmode = file_mode(path);
            match (&mode, &lmode) {
                (Some(m), Some(l)) if m != l => set(
                    &mut r,
                    "comment",
                    json!(format!("File {name} will be updated with permissions {m} from its current state of {l}")),
                ),
                _ => set(&mut r, "comment", json!(format!("File {name} not updated"))),
            }
        } else if !brine_protocol::payload::json_truthy(&r["changes"]) && r["result"] == json!(true)
        {
            set(
                &mut r,
                "comment",
                json!(format!(
                    "File {name} exists with proper permissions. No changes made."
                )),
            );
        }
        return Ok(r);
    }
    let show_changes = c.flag("show_changes", true);
    // What the file should hold.
    let mut sum: Option<(SourceSum, String)> = None;
    // `keep_source: False`: the cached http(s) source goes once the file is managed,
    // whatever the outcome (not in test mode).
    let mut _drop_cached: Option<remote::RemoveOnDrop> = None;
    let wanted: Option<Vec<u8>> = match &contents {
        Some(text) => Some(text.clone().into_bytes()),
        None if has_source => match source_bytes(c, &name, mode.as_deref()) {
            Ok(fetched) => {
                if !c.test && !c.flag("keep_source", true) {
                    _drop_cached = fetched.cached.map(remote::RemoveOnDrop);
                }
                sum = fetched.sum.map(|s| (s, fetched.source));
                Some(fetched.bytes)
            }
            Err(comment) => {
                // Salt's source_list fails the same way with or without test=True.
                if c.test && comment != NO_SOURCE {
                    set(&mut r, "result", json!(false));
                    set(&mut r, "comment", json!(comment));
                    set(&mut r, "changes", json!({}));
                    return Ok(r);
                }
                return error(r, format!("Unable to manage file: {comment}"));
            }
        },
        None => None,
    };
    if c.test {
        let mut ch = Map::new();
        if !exists {
            ch.insert("newfile".into(), json!(name));
        } else {
            let current = std::fs::read(path).unwrap_or_default();
            // A file in place that has the hash source_hash gives is left as it is.
            let vouched = sum.as_ref().is_some_and(|(s, _)| s.matches(&current));
            if let Some(w) = wanted.as_ref().filter(|_| !vouched) {
                let d = get_diff(&current, w, true);
                if !d.is_empty() {
                    ch.insert("diff".into(), json!(d));
                }
            }
            ch.extend(meta_changes(
                path,
                user.as_deref(),
                group.as_deref(),
                mode.as_deref(),
            ));
        }
        if !ch.is_empty() {
            if ch.contains_key("diff") && !show_changes {
                ch.insert("diff".into(), json!("<show_changes=False>"));
            }
            set(&mut r, "changes", Value::Object(ch));
            set(&mut r, "result", Value::Null);
            set(
                &mut r,
                "comment",
                json!(format!("The file {name} is set to be changed\nNote: No changes made, actual changes may\nbe different due to other states.")),
            );
        } else {
            set(&mut r, "result", json!(true));
            set(
                &mut r,
                "comment",
                json!(format!("The file {name} is in the correct state")),
            );
        }
        return Ok(r);
    }
    if let (Some(cmd), Some(w)) = (c.text("check_cmd").filter(|s| !s.is_empty()), &wanted) {
        let current = std::fs::read(path).unwrap_or_default();
        // Salt manages a temporary copy first: the command checks it when it changes.
        let differs = &current != w
            || if exists {
                !meta_changes(path, user.as_deref(), group.as_deref(), mode.as_deref()).is_empty()
            } else {
                mode.as_deref().is_some_and(|m| m != "0600")
            };
        if differs {
            if let Some(failed) = check_cmd_fails(c, &cmd, w) {
                let mut out = Map::new();
                for k in ["changes", "comment", "name", "result", "skip_watch"] {
                    if let Some(v) = failed.get(k).or_else(|| r.get(k)) {
                        out.insert(k.into(), v.clone());
                    }
                }
                return Ok(out);
            }
        }
    }
    if exists {
        let current = std::fs::read(path).unwrap_or_default();
        let vouched = sum.as_ref().is_some_and(|(s, _)| s.matches(&current));
        if let Some(w) = wanted.as_ref().filter(|_| !vouched) {
            if let Some((s, source)) = sum.as_ref().filter(|(s, _)| !s.matches(w)) {
                return error(r, format!("Specified {} checksum for {source} ({}) does not match actual checksum ({}). If the 'source_hash' value refers to a remote file with multiple possible matches, then it may be necessary to set 'source_hash_name'.", s.hash_type.as_str(), s.hsum, s.digest(w)));
            }
            if &current != w {
                let d = get_diff(&current, w, show_changes);
                changes(&mut r).insert("diff".into(), json!(d));
                if let Err(e) = replace_file(c, path, w) {
                    return error(r, format!("Failed to commit change: {e}"));
                }
            }
        }
        check_perms(
            &mut r,
            perm_path,
            user.as_deref(),
            group.as_deref(),
            mode.as_deref(),
            false,
        );
        if brine_protocol::payload::json_truthy(&r["changes"]) {
            set(&mut r, "comment", json!(format!("File {name} updated")));
        } else if r["result"] == json!(true) {
            set(
                &mut r,
                "comment",
                json!(format!("File {name} is in the correct state")),
            );
        }
        return Ok(r);
    }
    // A new file.
    let parent = path.parent().unwrap_or(Path::new("/"));
    if !parent.is_dir() {
        if c.flag("makedirs", false) {
            let dir_mode = c.arg("dir_mode").and_then(normalize_mode).or_else(|| {
                mode.as_ref().map(|m| {
                    m.chars()
                        .rev()
                        .take(3)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .map(|d| {
                            if d == '0' {
                                '0'
                            } else {
                                char::from_digit(d.to_digit(8).unwrap_or(0) | 1, 8).unwrap_or(d)
                            }
                        })
                        .collect()
                })
            });
            if let Err(e) = make_dirs(
                parent,
                dir_mode.as_deref(),
                user.as_deref(),
                group.as_deref(),
            ) {
                return error(r, format!("Failed to create parent directories: {e}"));
            }
        } else {
            return error(r, "Parent directory not present");
        }
    }
    let bytes = wanted.unwrap_or_default();
    if let Some((s, _)) = sum.as_ref().filter(|(s, _)| !s.matches(&bytes)) {
        return error(
            r,
            format!(
                "Specified {} checksum for {name} ({}) does not match actual checksum ({})",
                s.hash_type.as_str(),
                s.hsum,
                s.digest(&bytes)
            ),
        );
    }
    if !has_source && contents.is_none() {
        changes(&mut r).insert("new".into(), json!(format!("file {name} created")));
        set(&mut r, "comment", json!("Empty file"));
    } else {
        changes(&mut r).insert("diff".into(), json!("New file"));
    }
    // As Salt: a file from a source is a copy of the (private) cached file, a file from
    // contents is created under umask 077 when a mode is asked for; then the mode is set to
    // the one asked for or the umask's default.
    let default_mode = format!("{:04o}", 0o666 & !process_umask());
    let written = {
        use std::os::unix::fs::OpenOptionsExt;
        let create_mode = if has_source || mode.is_some() {
            0o600
        } else {
            0o666
        };
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(create_mode)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
    };
    if let Err(e) = written {
        return error(r, format!("File {name} not created: {e}"));
    }
    let mode = mode.unwrap_or(default_mode);
    check_perms(
        &mut r,
        path,
        user.as_deref(),
        group.as_deref(),
        Some(&mode),
        false,
    );
    if r["comment"] == json!("") {
        set(&mut r, "comment", json!(format!("File {name} updated")));
    }
    Ok(r)
}

/// A new file of mode 0600 in `dir`, under the first of 100 names `name(n)` gives that is
/// free.
fn new_temp(dir: &Path, name: impl Fn(usize) -> String) -> Option<(PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    (0..100).find_map(|n| {
        let tmp = dir.join(name(n));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .ok()
            .map(|f| (tmp, f))
    })
}

/// Salt's `mod_run_check_cmd` for `file.managed`'s `check_cmd`: the new contents written to
/// a temporary file (in `tmp_dir`, else the system's, named with `tmp_ext`), `<cmd> <file>`
/// run; what the state returns when the command fails (`None` when it succeeds).
fn check_cmd_fails(c: &Call, cmd: &str, bytes: &[u8]) -> Option<Ret> {
    let dir = c
        .text("tmp_dir")
        .filter(|d| !d.is_empty())
        .map_or_else(std::env::temp_dir, PathBuf::from);
    let ext = c.text("tmp_ext").unwrap_or_default();
    let mut failed = Map::new();
    failed.insert("changes".into(), json!({}));
    failed.insert("result".into(), json!(false));
    let made = new_temp(&dir, |n| format!("tmp{}_{n}{ext}", std::process::id()));
    let Some((tmp, mut file)) = made else {
        failed.insert(
            "comment".into(),
            json!(format!(
                "Unable to check_cmd file: no temporary file in {}",
                dir.display()
            )),
        );
        return Some(failed);
    };
    if let Err(e) = std::io::Write::write_all(&mut file, bytes) {
        let _ = std::fs::remove_file(&tmp);
        failed.insert(
            "comment".into(),
            json!(format!("Unable to check_cmd file: {e}")),
        );
        return Some(failed);
    }
    drop(file);
    let mut kwargs = Map::new();
    if let Some(shell) = c.host.grains().get("shell") {
        kwargs.insert("shell".into(), shell.clone());
    }
    kwargs.insert("python_shell".into(), json!(true));
    let run = c.host.call(
        "cmd.run_all",
        &[json!(format!("{cmd} {}", tmp.display()))],
        &kwargs,
    );
    let _ = std::fs::remove_file(&tmp);
    let all = run.unwrap_or_else(|e| json!({"retcode": 1, "stderr": e}));
    if all.get("retcode").and_then(Value::as_i64) == Some(0) {
        return None;
    }
    let mut comment = String::from("check_cmd execution failed");
    for key in ["stdout", "stderr"] {
        if let Some(out) = all.get(key).map(py_text).filter(|o| !o.is_empty()) {
            comment.push('\n');
            comment.push_str(&out);
        }
    }
    failed.insert("comment".into(), json!(comment));
    failed.insert("skip_watch".into(), json!(true));
    Some(failed)
}

/// Replace a file's contents as Salt's `copyfile` does: the new file is written beside it
/// and renamed over it, with the old one's owner and mode, after a copy of the old one is
/// kept when the backup mode (the state's `backup`, else the minion's `backup_mode`) asks
/// for it. A symbolic link is followed to the file it names.
fn replace_file(c: &Call, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let target = if path.is_symlink() {
        std::fs::canonicalize(path)?
    } else {
        path.to_path_buf()
    };
    let meta = std::fs::metadata(&target)?;
    let dir = target.parent().unwrap_or(Path::new("/"));
    let base = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (tmp, mut file) = new_temp(dir, |n| format!(".{base}.{}.{n}", std::process::id()))
        .ok_or_else(|| std::io::Error::other(format!("no temporary file beside {base}")))?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::os::unix::fs::chown(&tmp, Some(meta.uid()), Some(meta.gid())))
        .and_then(|()| {
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(meta.mode() & 0o7777))
        })
        .and_then(|()| {
            let mode = backup_mode(c);
            if mode == "minion" || mode == "both" {
                backup_minion(&c.host.cachedir(), &target)?;
            }
            std::fs::rename(&tmp, &target)
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Salt's `config.backup_mode`: the state's `backup`, else the minion's `backup_mode`.
fn backup_mode(c: &Call) -> String {
    if let Some(mode) = c.text("backup").filter(|m| !m.is_empty()) {
        return mode;
    }
    c.host
        .call("config.backup_mode", &[], &Map::new())
        .ok()
        .as_ref()
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Where `backup: minion` keeps a copy of `path`: under the cache's `file_backup`, at the
/// file's own path, named with the time (Salt's `<name>_<Day>_<Mon>_<dd>_<HH:MM:SS>_<µs>_<year>`).
fn backup_path(cachedir: &Path, path: &Path) -> PathBuf {
    let now = chrono::Local::now();
    let micros = format!("{:06}", now.timestamp_micros().rem_euclid(1_000_000));
    let stamp = format!(
        "{}{micros}_{}",
        now.format("%a_%b_%d_%H:%M:%S_"),
        now.format("%Y")
    );
    let dir = path
        .parent()
        .map(|d| d.strip_prefix("/").unwrap_or(d).to_path_buf())
        .unwrap_or_default();
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    cachedir
        .join("file_backup")
        .join(dir)
        .join(format!("{file}_{stamp}"))
}

/// Copy `path` into the minion's backups with its owner and mode (Salt's `backup_minion`).
pub fn backup_minion(cachedir: &Path, path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(path)?;
    let target = backup_path(cachedir, path);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(path, &target)?;
    std::os::unix::fs::chown(&target, Some(meta.uid()), Some(meta.gid()))?;
    std::fs::set_permissions(
        &target,
        std::fs::Permissions::from_mode(meta.mode() & 0o7777),
    )
}

/// This process's umask, read from `/proc` (setting it to read it would race with other
/// threads creating files).
fn process_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Missing directories of `dir` created with `mode` and owner, top down.
fn make_dirs(
    dir: &Path,
    mode: Option<&str>,
    user: Option<&str>,
    group: Option<&str>,
) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.is_dir() {
            break;
        }
        missing.push(d.to_path_buf());
        cur = d.parent();
    }
    for d in missing.into_iter().rev() {
        std::fs::create_dir(&d)?;
        if let Some(m) = mode {
            set_mode(&d, m)?;
        }
        let (uid, gid) = (user.and_then(uid_of), group.and_then(gid_of));
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::chown(&d, uid, gid)?;
        }
    }
    Ok(())
}

/// What `recurse` of `file.directory` asks for (Salt's `_get_recurse_set`); `Err` is Salt's
/// comment when it is not a list of the known words.
fn recurse_set(recurse: Option<&Value>) -> Result<Vec<String>, String> {
    const TYPES: &[&str] = &[
        "user",
        "group",
        "mode",
        "ignore_files",
        "ignore_dirs",
        "silent",
    ];
    let Some(recurse) = recurse.filter(|v| brine_protocol::payload::json_truthy(v)) else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = recurse else {
        return Err("\"recurse\" must be formed as a list of strings".into());
    };
    let set: Vec<String> = items
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if set.len() != items.len() || set.iter().any(|t| !TYPES.contains(&t.as_str())) {
        let known: Vec<String> = TYPES.iter().map(|t| format!("\"{t}\"")).collect();
        return Err(format!(
            "Types for \"recurse\" limited to {}.",
            known.join(", ")
        ));
    }
    if set.iter().any(|t| t == "ignore_files") && set.iter().any(|t| t == "ignore_dirs") {
        return Err("Must not specify \"recurse\" options \"ignore_files\" and \"ignore_dirs\" at the same time.".into());
    }
    Ok(set)
}

/// Salt's `_check_dir_meta` (and its check of a file below a recursed directory): what would
/// change of `path`'s owner, group and mode; a symbolic link's mode is left alone unless
/// `follow` (links followed).
fn entry_changes(
    path: &Path,
    user: Option<&str>,
    group: Option<&str>,
    mode: Option<&str>,
    follow: bool,
) -> Map<String, Value> {
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    let Ok(meta) = meta else {
        return Map::from_iter([("directory".to_string(), json!("new"))]);
    };
    let mut ch = Map::new();
    if let Some(u) = user.filter(|u| uid_of(u) != Some(meta.uid())) {
        ch.insert("user".into(), json!(u));
    }
    if let Some(g) = group.filter(|g| gid_of(g) != Some(meta.gid())) {
        ch.insert("group".into(), json!(g));
    }
    let have = format!("{:04o}", meta.permissions().mode() & 0o7777);
    if let Some(m) = mode.filter(|m| *m != have && (follow || !meta.file_type().is_symlink())) {
        ch.insert("mode".into(), json!(m));
    }
    ch
}

fn directory(c: &Call) -> Result<Ret, String> {
    let mut name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.directory");
    }
    if name.ends_with('/') && name != "/" {
        name.pop();
    }
    let clean = c.flag("clean", false);
    let max_depth = c.arg("max_depth");
    if max_depth.is_some() && clean {
        return error(r, "Cannot specify both max_depth and clean");
    }
    let max_depth = max_depth.and_then(|d| py_text(d).parse::<usize>().ok());
    let dir_mode = c
        .arg("dir_mode")
        .filter(|v| brine_protocol::payload::json_truthy(v))
        .or_else(|| c.arg("mode"))
        .and_then(normalize_mode);
    let file_mode = c
        .arg("file_mode")
        .filter(|v| brine_protocol::payload::json_truthy(v))
        .and_then(normalize_mode)
        .or_else(|| dir_mode.clone());
    let follow = c.flag("follow_symlinks", false);
    let children_only = c.flag("children_only", false);
    let exclude = c.arg("exclude_pat");
    let user = c.text("user");
    let group = c.text("group");
    if let Some(err) = check_user(user.as_deref(), group.as_deref(), c.test) {
        return error(r, err);
    }
    let path = Path::new(&name);
    if !path.is_absolute() {
        return error(r, format!("Specified file {name} is not an absolute path"));
    }
    if path.is_file() {
        return error(r, format!("Specified location {name} exists and is a file"));
    }
    if path.is_symlink() && !c.flag("allow_symlink", true) {
        return error(
            r,
            format!("Specified location {name} exists and is a symlink"),
        );
    }
    // Salt's `_check_directory`: what the walk below (when recursing or cleaning) and the
    // directory itself would change, in that order.
    let recurse = recurse_set(c.arg("recurse"));
    let walked = if clean || recurse.as_ref().is_ok_and(|s| !s.is_empty()) {
        tree::walk(&name, max_depth)
    } else {
        Vec::new()
    };
    let mut pending = Map::new();
    let tested = match &recurse {
        Err(e) => Err(e.clone()),
        Ok(set) => {
            let has = |t: &str| set.iter().any(|s| s == t);
            if !set.is_empty() {
                let (u, g) = (
                    user.as_deref().filter(|_| has("user")),
                    group.as_deref().filter(|_| has("group")),
                );
                let (fm, dm) = if has("mode") {
                    (file_mode.as_deref(), dir_mode.as_deref())
                } else {
                    (None, None)
                };
                for (root, dirs, files) in &walked {
                    let entries = (!has("ignore_files"))
                        .then_some((files, fm))
                        .into_iter()
                        .chain((!has("ignore_dirs")).then_some((dirs, dm)));
                    for (names, mode) in entries {
                        for n in names {
                            let p = format!("{root}/{n}");
                            let ch = entry_changes(Path::new(&p), u, g, mode, follow);
                            if !ch.is_empty() {
                                pending.insert(p, Value::Object(ch));
                            }
                        }
                    }
                }
            }
            Ok(())
        }
    };
    let keep = tree::required_keep(&name, c.low.get("require"), &walked);
    let (tresult, tcomment) = match tested {
        Err(e) => (json!(false), e),
        Ok(()) => {
            if !children_only {
                let ch = entry_changes(
                    path,
                    user.as_deref(),
                    group.as_deref(),
                    dir_mode.as_deref(),
                    follow,
                );
                if !ch.is_empty() {
                    pending.insert(name.clone(), Value::Object(ch));
                }
            }
            if clean {
                for (root, dirs, files) in &walked {
                    for n in files.iter().chain(dirs) {
                        let p = format!("{root}/{n}");
                        if !keep.contains(&p)
                            && tree::include_exclude(&tree::relpath(&p, &name), None, exclude)?
                        {
                            pending.insert(p, json!({"removed": "Removed due to clean"}));
                        }
                    }
                }
            }
            if !path.is_dir() {
                pending.insert(name.clone(), json!({"directory": "new"}));
            }
            if pending.is_empty() {
                (
                    json!(true),
                    format!("The directory {name} is in the correct state"),
                )
            } else {
                let mut comment = String::from("The following files will be changed:\n");
                for (f, ch) in &pending {
                    for (k, v) in ch.as_object().into_iter().flatten() {
                        comment.push_str(&format!("{f}: {k} - {}\n", py_text(v)));
                    }
                }
                (Value::Null, comment)
            }
        }
    };
    changes(&mut r).extend(pending.clone());
    if c.test || pending.is_empty() {
        set(&mut r, "result", tresult);
        set(&mut r, "comment", json!(tcomment));
        return Ok(r);
    }
    if !path.is_dir() {
        let parent = path.parent().unwrap_or(Path::new("/"));
        if !parent.is_dir() && !c.flag("makedirs", false) {
            return error(r, format!("No directory to create {name} in"));
        }
        if make_dirs(path, dir_mode.as_deref(), user.as_deref(), group.as_deref()).is_err()
            || !path.is_dir()
        {
            return error(r, format!("Failed to create directory {name}"));
        }
        changes(&mut r).insert(name.clone(), json!({"directory": "new"}));
        return Ok(r);
    }
    // Salt's `check_perms`, on the directory and then (recursing) on what is below it: what
    // they set goes into `changes` (one key each for owner, group and mode, as Salt's do).
    let perm_path = |p: &Path| -> PathBuf {
        if follow {
            std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
        } else {
            p.to_path_buf()
        }
    };
    if !children_only {
        check_perms(
            &mut r,
            &perm_path(path),
            user.as_deref(),
            group.as_deref(),
            dir_mode.as_deref(),
            false,
        );
    }
    let set_ = recurse.unwrap_or_default();
    if !set_.is_empty() {
        let has = |t: &str| set_.iter().any(|s| s == t);
        let mut ruser = None;
        let mut rgroup = None;
        if has("user") {
            match &user {
                Some(u) if uid_of(u).is_none() => {
                    set(&mut r, "result", json!(false));
                    set(
                        &mut r,
                        "comment",
                        json!(format!(
                            "Failed to enforce ownership for user {u} (user does not exist)"
                        )),
                    );
                }
                Some(u) => ruser = Some(u.as_str()),
                None => {
                    set(&mut r, "result", json!(false));
                    set(&mut r, "comment", json!("user not specified, but configured as a target for recursive ownership management"));
                }
            }
        }
        if has("group") {
            match &group {
                Some(g) if gid_of(g).is_none() => {
                    set(&mut r, "result", json!(false));
                    set(
                        &mut r,
                        "comment",
                        json!(format!("Failed to enforce group ownership for group {g}")),
                    );
                }
                Some(g) => rgroup = Some(g.as_str()),
                None => {
                    set(&mut r, "result", json!(false));
                    set(&mut r, "comment", json!("group not specified, but configured as a target for recursive ownership management"));
                }
            }
        }
        let (fm, dm) = if has("mode") {
            (file_mode.as_deref(), dir_mode.as_deref())
        } else {
            (None, None)
        };
        if has("silent") {
            set(&mut r, "changes", json!({"recursion": "Changes silenced"}));
        }
        for (root, dirs, files) in &walked {
            let entries = (!has("ignore_files"))
                .then_some((files, fm))
                .into_iter()
                .chain((!has("ignore_dirs")).then_some((dirs, dm)));
            for (names, mode) in entries {
                for n in names {
                    let p = PathBuf::from(format!("{root}/{n}"));
                    check_perms(&mut r, &perm_path(&p), ruser, rgroup, mode, false);
                }
            }
        }
    }
    if clean {
        let removed = tree::clean_dir(&name, &keep, exclude, false)?;
        if !removed.is_empty() {
            changes(&mut r).insert("removed".into(), json!(removed));
            set(
                &mut r,
                "comment",
                json!(format!("Files cleaned from directory {name}")),
            );
        }
    }
    let has_changes = brine_protocol::payload::json_truthy(&r["changes"]);
    if r["comment"] == json!("") && has_changes {
        let what = if children_only {
            format!("{name}/*")
        } else {
            name.clone()
        };
        set(
            &mut r,
            "comment",
            json!(format!("Directory {what} updated")),
        );
    } else if !has_changes && r["result"] == json!(true) {
        let mut comment = format!("Directory {name} is in the correct state");
        if let Some(orig) = r["comment"].as_str().filter(|c| !c.is_empty()) {
            comment = format!("{comment}\n{orig}");
        }
        set(&mut r, "comment", json!(comment));
    }
    Ok(r)
}

fn absent(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.absent");
    }
    let path = Path::new(&name);
    if !path.is_absolute() {
        return error(r, format!("Specified file {name} is not an absolute path"));
    }
    if name == "/" {
        return error(r, "Refusing to make \"/\" absent");
    }
    let meta = std::fs::symlink_metadata(path);
    let (is_file, is_dir) = match &meta {
        Ok(m) => (m.is_file() || m.file_type().is_symlink(), m.is_dir()),
        Err(_) => (false, false),
    };
    if is_file || is_dir {
        let what = if is_file { "File" } else { "Directory" };
        if c.test {
            set(&mut r, "result", Value::Null);
            changes(&mut r).insert("removed".into(), json!(name));
            set(
                &mut r,
                "comment",
                json!(format!("{what} {name} is set for removal")),
            );
            return Ok(r);
        }
        let removed = if is_file {
            std::fs::remove_file(path)
        } else {
            std::fs::remove_dir_all(path)
        };
        return match removed {
            Ok(()) => {
                set(
                    &mut r,
                    "comment",
                    json!(format!("Removed {} {name}", what.to_lowercase())),
                );
                changes(&mut r).insert("removed".into(), json!(name));
                Ok(r)
            }
            Err(e) if is_file => error(r, e.to_string()),
            Err(_) => error(r, format!("Failed to remove directory {name}")),
        };
    }
    set(
        &mut r,
        "comment",
        json!(format!("File {name} is not present")),
    );
    Ok(r)
}

fn exists(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.exists");
    }
    if !Path::new(&name).exists() {
        return error(r, format!("Specified path {name} does not exist"));
    }
    set(&mut r, "comment", json!(format!("Path {name} exists")));
    Ok(r)
}

fn missing(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.missing");
    }
    if Path::new(&name).exists() {
        return error(r, format!("Specified path {name} exists"));
    }
    set(&mut r, "comment", json!(format!("Path {name} is missing")));
    Ok(r)
}

/// A time argument of `file.touch`: seconds since the epoch.
fn epoch_arg(c: &Call, key: &str) -> Option<std::time::SystemTime> {
    let secs: f64 = py_text(c.arg(key)?).parse().ok()?;
    std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_secs_f64(secs.max(0.0)))
}

fn touch(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = Map::new();
    r.insert("name".into(), json!(name));
    r.insert("changes".into(), json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.touch");
    }
    let path = Path::new(&name);
    if !path.is_absolute() {
        return error(r, format!("Specified file {name} is not an absolute path"));
    }
    let (atime, mtime) = (c.arg("atime"), c.arg("mtime"));
    if c.test {
        set(&mut r, "result", Value::Null);
        set(&mut r, "changes", json!({"new": name}));
        if !path.exists() {
            set(
                &mut r,
                "comment",
                json!(format!("File {name} is set to be created")),
            );
        } else {
            let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
            let differs = |want: Option<&Value>, have: i64| {
                want.is_some_and(|w| py_text(w) != have.to_string())
            };
            if differs(atime, meta.atime()) || differs(mtime, meta.mtime()) {
                set(
                    &mut r,
                    "comment",
                    json!(format!("Times set to be updated on file {name}")),
                );
                set(&mut r, "changes", json!({"touched": name}));
            } else {
                set(&mut r, "result", json!(true));
                set(
                    &mut r,
                    "comment",
                    json!(format!("File {name} exists and has the correct times")),
                );
            }
        }
        return Ok(r);
    }
    let parent = path.parent().unwrap_or(Path::new("/"));
    if c.flag("makedirs", false) && !parent.is_dir() {
        if let Err(e) = make_dirs(parent, None, None, None) {
            return error(r, format!("Failed to create parent directories: {e}"));
        }
    }
    if !parent.is_dir() {
        return error(r, format!("Directory not present to touch file {name}"));
    }
    let extant = path.exists();
    let touched = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .and_then(|f| {
            let now = std::time::SystemTime::now();
            let times = std::fs::FileTimes::new()
                .set_accessed(epoch_arg(c, "atime").unwrap_or(now))
                .set_modified(epoch_arg(c, "mtime").unwrap_or(now));
            f.set_times(times)
        });
    if let Err(e) = touched {
        return error(r, e.to_string());
    }
    set(&mut r, "result", json!(true));
    if extant {
        let what = if path.is_dir() { "directory" } else { "file" };
        set(
            &mut r,
            "comment",
            json!(format!("Updated times on {what} {name}")),
        );
        changes(&mut r).insert("touched".into(), json!(name));
    } else {
        set(
            &mut r,
            "comment",
            json!(format!("Created empty file {name}")),
        );
        changes(&mut r).insert("new".into(), json!(name));
    }
    Ok(r)
}

#[cfg(test)]
mod backup_tests {
    use super::*;

    #[test]
    fn a_backup_is_named_by_its_path_and_time() {
        let p = backup_path(Path::new("/c"), Path::new("/etc/app/conf"));
        let s = p.display().to_string();
        assert!(s.starts_with("/c/file_backup/etc/app/conf_"), "{s}");
        let stamp = &s["/c/file_backup/etc/app/conf_".len()..];
        let parts: Vec<&str> = stamp.split('_').collect();
        assert_eq!(parts.len(), 6, "{stamp}");
        assert_eq!(parts[3].len(), 8);
        assert_eq!(parts[4].len(), 6);
        assert_eq!(parts[5].len(), 4);
    }
}
