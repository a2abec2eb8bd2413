//! `file.tidied` (remove what in a directory tree is old, big or named so) and `file.pruned`
//! (remove empty directories), as Salt 3007's: the tree walked bottom-up in the directory's
//! own order (Python's `os.walk(topdown=False)`), removals through the minion's
//! `file.remove` and `file.rmdir`.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use chrono::TimeZone as _;
use regex::Regex;
use serde_json::{json, Map, Value};

use super::{error, expanduser, Ret};
use crate::states::{ret, Call};
use crate::verify::py_text;

/// The entries of a tree as `os.walk(top, topdown=False, followlinks)` yields them: each
/// directory after the ones below it, with its files, then its subdirectories (a link to a
/// directory counts as one, and is walked into only with `followlinks`).
fn walk_bottom_up(top: &Path, followlinks: bool, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(top) else {
        return;
    };
    let (mut files, mut dirs, mut into) = (Vec::new(), Vec::new(), Vec::new());
    for entry in entries.flatten() {
        let path = entry.path();
        // `DirEntry.is_dir()` follows links.
        if path.is_dir() {
            let link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if followlinks || !link {
                into.push(path.clone());
            }
            dirs.push(path);
        } else {
            files.push(path);
        }
    }
    for dir in into {
        walk_bottom_up(&dir, followlinks, out);
    }
    out.extend(files);
    out.extend(dirs);
}

/// A list argument of patterns compiled as Python's `re.match` uses them (anchored at the
/// start).
fn patterns(v: Option<&Value>, default: &[&str]) -> Result<Vec<Regex>, String> {
    let texts: Vec<String> = match v {
        None | Some(Value::Null) => default.iter().map(|s| s.to_string()).collect(),
        Some(Value::Array(items)) => items.iter().map(py_text).collect(),
        Some(other) => py_text(other).chars().map(String::from).collect(),
    };
    texts
        .iter()
        .map(|p| Regex::new(&format!("^(?:{p})")).map_err(|e| format!("re.error: {e}")))
        .collect()
}

/// A whole number argument (Python's comparison with an int).
fn number(c: &Call, key: &str) -> i128 {
    match c.arg(key) {
        Some(Value::Number(n)) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_f64().map(|f| f as i128))
            .unwrap_or(0),
        Some(Value::String(s)) if key == "size" => brine_render::human_to_bytes(s, "B", true),
        Some(Value::Bool(b)) => i128::from(*b),
        _ => 0,
    }
}

pub(super) fn tidied(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let r = ret(&name, json!(true), "", json!({}));
    let operator = c
        .text("age_size_logical_operator")
        .map(|o| o.to_uppercase());
    let both = operator.as_deref() == Some("AND");
    let only = c
        .text("age_size_only")
        .map(|o| o.to_lowercase())
        .filter(|o| o == "age" || o == "size");
    if !Path::new(&name).is_absolute() {
        return error(r, format!("Specified file {name} is not an absolute path"));
    }
    if !Path::new(&name).is_dir() {
        return error(r, format!("{name} does not exist or is not a directory."));
    }
    let time = match c.arg("time_comparison") {
        Some(Value::String(t))
            if ["atime", "ctime", "mtime"].contains(&t.to_lowercase().as_str()) =>
        {
            t.to_lowercase()
        }
        _ => "atime".to_string(),
    };
    let (age, size) = (number(c, "age"), number(c, "size"));
    let matches = patterns(c.arg("matches"), &[".*"])?;
    let exclude = patterns(c.arg("exclude"), &[])?;
    let (rmdirs, rmlinks) = (c.flag("rmdirs", false), c.flag("rmlinks", true));
    let full_path = c.flag("full_path_match", false);
    let today = chrono::Local::now().date_naive();
    let mut found = Vec::new();
    walk_bottom_up(Path::new(&name), c.flag("followlinks", false), &mut found);
    let mut todelete = Vec::new();
    for path in found {
        let mut deleteme = true;
        let mut mysize: i128 = 0;
        let link = path.is_symlink();
        let meta = if link {
            deleteme = rmlinks;
            std::fs::symlink_metadata(&path)
        } else {
            std::fs::metadata(&path)
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                tracing::warn!(
                    "Unable to read {} due to permissions error.",
                    path.display()
                );
                continue;
            }
            Err(_) => continue,
        };
        if !link {
            if meta.is_dir() {
                deleteme = rmdirs;
            } else {
                mysize = i128::from(meta.size());
            }
        }
        let stamp = match time.as_str() {
            "ctime" => meta.ctime(),
            "mtime" => meta.mtime(),
            _ => meta.atime(),
        };
        let day = chrono::Local
            .timestamp_opt(stamp, 0)
            .single()
            .map_or(today, |t| t.date_naive());
        let myage = i128::from((today - day).num_days().abs());
        let shown = path.display().to_string();
        let filename = if full_path {
            shown.clone()
        } else {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let compare = match only.as_deref() {
            Some("age") => myage >= age,
            Some(_) => mysize >= size,
            None if both => mysize >= size && myage >= age,
            None => mysize >= size || myage >= age,
        };
        let named = matches.iter().any(|p| p.is_match(&filename))
            && !exclude.iter().any(|x| x.is_match(&filename));
        if compare && named && deleteme {
            todelete.push(shown);
        }
    }
    let mut r = r;
    if todelete.is_empty() {
        r.insert(
            "comment".into(),
            json!(format!("Nothing to remove from directory {name}")),
        );
        return Ok(r);
    }
    if c.test {
        r.insert("result".into(), Value::Null);
        r.insert("comment".into(), json!(format!("{name} is set for tidy")));
        r.insert("changes".into(), json!({ "removed": todelete }));
        return Ok(r);
    }
    let mut removed = Vec::new();
    for path in &todelete {
        if let Err(e) = c.host.call("file.remove", &[json!(path)], &Map::new()) {
            r.insert("changes".into(), json!({ "removed": removed }));
            return error(r, e);
        }
        removed.push(path.clone());
    }
    r.insert("changes".into(), json!({ "removed": removed }));
    r.insert(
        "comment".into(),
        json!(format!(
            "Removed {} files or directories from directory {name}",
            todelete.len()
        )),
    );
    Ok(r)
}

pub(super) fn pruned(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    let ignore_errors = c.flag("ignore_errors", false);
    let recurse = ignore_errors || c.flag("recurse", false);
    if !Path::new(&name).is_dir() {
        r.insert(
            "comment".into(),
            json!(format!("Directory {name} is not present")),
        );
        return Ok(r);
    }
    if c.test {
        r.insert("result".into(), Value::Null);
        r.insert("changes".into(), json!({ "deleted": name }));
        r.insert(
            "comment".into(),
            json!(format!("Directory {name} is set for removal")),
        );
        return Ok(r);
    }
    let mut kw = Map::new();
    kw.insert("recurse".into(), json!(recurse));
    kw.insert("verbose".into(), json!(true));
    kw.insert(
        "older_than".into(),
        c.low.get("older_than").cloned().unwrap_or(Value::Null),
    );
    let res = c.host.call("file.rmdir", &[json!(name)], &kw)?;
    let mut res = res.as_object().cloned().unwrap_or_default();
    let result = res.remove("result").unwrap_or(Value::Null);
    let deleted = res.get("deleted").cloned().unwrap_or(json!([]));
    let sorted = || {
        let mut items: Vec<Value> = deleted.as_array().cloned().unwrap_or_default();
        items.sort_by_key(py_text);
        Value::Array(items)
    };
    let any_deleted = brine_protocol::payload::json_truthy(&deleted);
    let under = format!("Recursively removed empty directories under {name}");
    if brine_protocol::payload::json_truthy(&result) {
        if recurse && any_deleted {
            r.insert("comment".into(), json!(under));
            r.insert("changes".into(), json!({ "deleted": sorted() }));
        } else if !recurse {
            r.insert("comment".into(), json!(format!("Removed directory {name}")));
            r.insert("changes".into(), json!({ "deleted": name }));
        }
        return Ok(r);
    }
    if ignore_errors && any_deleted {
        r.insert("comment".into(), json!(under));
        r.insert("changes".into(), json!({ "deleted": sorted() }));
        return Ok(r);
    }
    r.insert("result".into(), result);
    r.insert("changes".into(), Value::Object(res));
    r.insert(
        "comment".into(),
        json!(format!("Failed to remove directory {name}")),
    );
    Ok(r)
}
