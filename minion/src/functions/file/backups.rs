//! The copies `backup: minion` keeps under the cache's `file_backup` (Salt's
//! `file.list_backups`, `restore_backup` and `delete_backup`, with their `list_backup` and
//! `remove_backup` aliases, and `list_backups_dir`): listed newest first, restored over the file (which is backed
//! up first, as Salt does) or removed, by their number in that list.

use std::path::{Path, PathBuf};

use brine_protocol::payload::{map, Value};
use chrono::{NaiveDate, NaiveDateTime};

use super::super::args::{py_str, Bound};
use super::super::FnError;
use super::{expanduser, str_arg};

/// One backup: when it was taken, its size and where it is.
struct Backup {
    time: NaiveDateTime,
    size: u64,
    location: PathBuf,
}

/// The backups of `path` under `bkroot`, newest first (one per time, as Salt keys them).
fn backups(bkroot: &Path, path: &str) -> Vec<Backup> {
    let (parent, basename) = brine_protocol::posixpath::split(path);
    let bkdir = bkroot.join(parent.get(1..).unwrap_or(""));
    let Ok(entries) = std::fs::read_dir(&bkdir) else {
        return Vec::new();
    };
    let pattern = stamp_pattern(&basename);
    let mut found: Vec<Backup> = Vec::new();
    for entry in entries.flatten() {
        let location = entry.path();
        let Ok(meta) = std::fs::metadata(&location) else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        if !meta.is_file() {
            continue;
        }
        let Some(time) = parse_stamp(&pattern, &name) else {
            continue;
        };
        keep(
            &mut found,
            Backup {
                time,
                size: meta.len(),
                location,
            },
        );
    }
    found.sort_by_key(|b| std::cmp::Reverse(b.time));
    found
}

/// One backup per time, as Salt keys them by time: a later one with the same time replaces
/// the earlier.
fn keep(found: &mut Vec<Backup>, backup: Backup) {
    match found.iter_mut().find(|b| b.time == backup.time) {
        Some(slot) => *slot = backup,
        None => found.push(backup),
    }
}

/// The expression Python's `strptime` builds for `<basename>_%a_%b_%d_%H:%M:%S_%f_%Y` (case
/// does not matter; blanks match any run of blanks).
fn stamp_pattern(basename: &str) -> regex::Regex {
    let literal: String = basename
        .split_whitespace()
        .map(regex::escape)
        .collect::<Vec<_>>()
        .join(r"\s+");
    let literal = if basename.trim().len() == basename.len() {
        literal
    } else {
        regex::escape(basename)
    };
    regex::Regex::new(&format!(
        r"(?i)^{literal}_(mon|tue|wed|thu|fri|sat|sun)_(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)_(3[01]|[12]\d|0[1-9]|[1-9]| [1-9])_(2[0-3]|[0-1]\d|\d):([0-5]\d|\d):(6[0-1]|[0-5]\d|\d)_([0-9]{{1,6}})_(\d\d\d\d)$"
    ))
    .expect("the stamp expression is valid")
}

fn parse_stamp(pattern: &regex::Regex, name: &str) -> Option<NaiveDateTime> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let caps = pattern.captures(name)?;
    let num = |i: usize| caps[i].trim().parse::<u32>().ok();
    let month = MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(&caps[2]))?;
    let micros = format!("{:0<6}", &caps[7]).parse::<u32>().ok()?;
    let year = caps[8].parse::<i32>().ok().filter(|y| *y >= 1)?;
    NaiveDate::from_ymd_opt(year, month as u32 + 1, num(3)?)?.and_hms_micro_opt(
        num(4)?,
        num(5)?,
        num(6)?,
        micros,
    )
}

/// `limit` as Python's `int()` reads it; `None` when there is none or it is not a number.
fn limit_of(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Integer(i) => i.as_i64(),
        Value::Boolean(b) => Some(i64::from(*b)),
        Value::F32(f) => Some(f64::from(*f).trunc() as i64),
        Value::F64(f) => Some(f.trunc() as i64),
        Value::String(s) => s.as_str()?.trim().parse().ok(),
        _ => None,
    }
}

/// Python's `[:limit]`.
fn take<T>(mut items: Vec<T>, limit: Option<i64>) -> Vec<T> {
    if let Some(limit) = limit {
        let len = items.len() as i64;
        let end = if limit < 0 { len + limit } else { limit }.clamp(0, len);
        items.truncate(end as usize);
    }
    items
}

fn bkroot(cachedir: &Path) -> PathBuf {
    cachedir.join("file_backup")
}

/// `file.list_backups`.
pub(super) fn list_backups(cachedir: &Path, b: &Bound) -> Result<Value, FnError> {
    let path = expanduser(&str_arg(b, "path")?);
    let found = take(backups(&bkroot(cachedir), &path), limit_of(b.get("limit")));
    Ok(numbered(found, usize::MAX))
}

/// Backups numbered from 0 as Salt lists them, `cap` at most.
fn numbered(found: Vec<Backup>, cap: usize) -> Value {
    Value::Map(
        found
            .into_iter()
            .take(cap)
            .enumerate()
            .map(|(i, backup)| {
                (
                    Value::from(i as u64),
                    map([
                        (
                            "Backup Time",
                            Value::from(backup.time.format("%a %b %d %Y %H:%M:%S.%6f").to_string()),
                        ),
                        ("Size", Value::from(backup.size)),
                        ("Location", Value::from(backup.location.display().to_string())),
                    ]),
                )
            })
            .collect(),
    )
}

/// `file.list_backups_dir`: Salt groups the sorted names of the backup directory of `path`'s
/// parent by the part before their first `_` (runs of equal parts, a later run's length
/// replacing an earlier one's), and lists for each part the backups named after it (anything
/// that is there, directories too), newest first, as many as its run's length at most.
pub(super) fn list_backups_dir(cachedir: &Path, b: &Bound) -> Result<Value, FnError> {
    let path = expanduser(&str_arg(b, "path")?);
    let limit = limit_of(b.get("limit"));
    let (parent, _) = brine_protocol::posixpath::split(&path);
    let bkdir = bkroot(cachedir).join(parent.get(1..).unwrap_or(""));
    let Ok(entries) = std::fs::read_dir(&bkdir) else {
        return Ok(Value::Map(Vec::new()));
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // itertools.groupby into a dict: a part keeps its first place and its last run's length.
    let mut runs: Vec<(String, usize)> = Vec::new();
    for run in names.chunk_by(|a, b| part_of(a) == part_of(b)) {
        let part = part_of(&run[0]).to_string();
        match runs.iter_mut().find(|(p, _)| *p == part) {
            Some(slot) => slot.1 = run.len(),
            None => runs.push((part, run.len())),
        }
    }
    let mut out = Vec::new();
    for (part, run) in runs {
        let pattern = stamp_pattern(&part);
        let mut found: Vec<Backup> = Vec::new();
        for name in names.iter().filter(|n| part_of(n) == part) {
            let Some(time) = parse_stamp(&pattern, name) else {
                continue;
            };
            let location = bkdir.join(name);
            let size = std::fs::metadata(&location).map_err(|e| {
                FnError::Exception(brine_protocol::pyrepr::os_error(
                    &e,
                    Some(&location.display().to_string()),
                ))
            })?;
            keep(
                &mut found,
                Backup {
                    time,
                    size: size.len(),
                    location,
                },
            );
        }
        found.sort_by_key(|b| std::cmp::Reverse(b.time));
        out.push((Value::from(part), numbered(take(found, limit), run)));
    }
    Ok(Value::Map(out))
}

/// The part of a backup's name before its first `_` (Salt's `x.split("_")[0]`).
fn part_of(name: &str) -> &str {
    name.split('_').next().unwrap_or(name)
}

/// Salt's `{"result": ..., "comment": ...}`.
fn answer(result: bool, comment: String) -> Value {
    map([
        ("result", Value::Boolean(result)),
        ("comment", Value::from(comment)),
    ])
}

/// The backup a `backup_id` names, or the answer Salt gives when it names none.
fn chosen(cachedir: &Path, path: &str, id: &Value) -> Result<Backup, Value> {
    let shown = py_str(id);
    let number = match id {
        Value::Integer(i) => i.as_i64(),
        Value::String(s) => s.as_str().and_then(|s| s.trim().parse::<i64>().ok()),
        _ => None,
    };
    let Some(number) = number.filter(|n| n.to_string().len() == shown.len()) else {
        return Err(answer(false, format!("Invalid backup_id '{shown}'")));
    };
    let mut found = backups(&bkroot(cachedir), path);
    match usize::try_from(number).ok().filter(|n| *n < found.len()) {
        Some(n) => Ok(found.swap_remove(n)),
        None => Err(answer(
            false,
            format!("backup_id '{shown}' does not exist for {path}"),
        )),
    }
}

/// `file.restore_backup`.
pub(super) fn restore_backup(cachedir: &Path, b: &Bound) -> Result<Value, FnError> {
    let path = expanduser(&str_arg(b, "path")?);
    let backup = match chosen(cachedir, &path, b.get("backup_id").unwrap_or(&Value::Nil)) {
        Ok(backup) => backup,
        Err(answer) => return Ok(answer),
    };
    brine_state::states::file::backup_minion(cachedir, Path::new(&path))
        .map_err(|e| super::os_exception(&e, &path))?;
    let location = backup.location.display().to_string();
    Ok(match std::fs::copy(&backup.location, &path) {
        Ok(_) => answer(true, format!("Successfully restored {location} to {path}")),
        Err(e) => {
            let why = brine_protocol::pyrepr::os_error(&e, Some(&path));
            answer(false, format!("Unable to restore {location} to {path}: {why}"))
        }
    })
}

/// `file.delete_backup`.
pub(super) fn delete_backup(cachedir: &Path, b: &Bound) -> Result<Value, FnError> {
    let path = expanduser(&str_arg(b, "path")?);
    let backup = match chosen(cachedir, &path, b.get("backup_id").unwrap_or(&Value::Nil)) {
        Ok(backup) => backup,
        Err(answer) => return Ok(answer),
    };
    let location = backup.location.display().to_string();
    Ok(match std::fs::remove_file(&backup.location) {
        Ok(()) => answer(true, format!("Successfully removed {location}")),
        Err(e) => {
            let why = brine_protocol::pyrepr::os_error(&e, Some(&location));
            answer(false, format!("Unable to remove {location}: {why}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_as_strptime_reads_them() {
        let p = stamp_pattern("app.conf");
        let t = |s: &str| parse_stamp(&p, s).map(|t| t.to_string());
        assert_eq!(
            t("app.conf_Sun_Nov_29_16:44:13_012345_2026").as_deref(),
            Some("2026-11-29 16:44:13.012345")
        );
        assert_eq!(
            t("APP.CONF_mon_nov_29_1:2:3_5_2026").as_deref(),
            Some("2026-11-29 01:02:03.500")
        );
        for not in [
            "app.conf_Sun_Nov_30_16:44:13_012345_2026x",
            "app.conf_Sun_Feb_30_16:44:13_012345_2026",
            "app.conf_Sun_Nov_29_24:00:00_0_2026",
            "appXconf_Sun_Nov_29_16:44:13_0_2026",
            "app.conf",
        ] {
            assert_eq!(t(not), None, "{not}");
        }
        assert_eq!(take(vec![1, 2, 3], Some(-1)), [1, 2]);
        assert_eq!(take(vec![1, 2, 3], Some(5)), [1, 2, 3]);
        assert_eq!(take(vec![1, 2, 3], None), [1, 2, 3]);
    }
}
