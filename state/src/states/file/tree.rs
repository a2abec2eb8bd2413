//! `file.symlink`, `file.copy`, `file.recurse` and `file.serialize`, as Salt 3007's
//! `salt/states/file.py` runs them: the same checks in the same order, the same comments and
//! changes, the same files on disk. `file.recurse` lists the file server through
//! [`Host::list_master`](super::super::Host::list_master) and manages each file and directory
//! through `file.managed` and `file.directory`, as Salt does; `file.serialize` writes through
//! `file.managed` with the text of Salt's `yaml` or `json` serializer.

use brine_protocol::posixpath::{basename, dirname, join, normpath};
use std::collections::{BTreeSet, HashSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use brine_protocol::payload::json_truthy;
use brine_protocol::pyeq::py_eq_json;
use brine_protocol::pyjson::{self, JsonStyle};
use brine_protocol::pyrepr::os_error;
use brine_protocol::target::fnmatch;
use brine_protocol::yaml::{self, DumpOptions, Style};
use serde_json::{json, Map, Value};

use super::{
    changes, check_perms, check_user, directory, error, expanduser, get_diff, gid_of, make_dirs,
    managed, normalize_mode, set, traverse, uid_of, Ret,
};
use crate::low::Low;
use crate::states::{ret, Call};
use crate::verify::{py_text, repack_dictlist};

// ---------------------------------------------------------------- paths as Python sees them

/// `posixpath.relpath(path, start)` for two absolute or two relative paths.
pub(super) fn relpath(path: &str, start: &str) -> String {
    let parts = |p: &str| -> Vec<String> {
        normpath(p)
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .map(str::to_string)
            .collect()
    };
    let (to, from) = (parts(path), parts(start));
    let common = to.iter().zip(&from).take_while(|(a, b)| a == b).count();
    let mut rel: Vec<String> = vec!["..".to_string(); from.len() - common];
    rel.extend(to[common..].iter().cloned());
    if rel.is_empty() {
        ".".into()
    } else {
        rel.join("/")
    }
}

fn lexists(path: &str) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn is_link(path: &str) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// `os.path.exists` (symlinks followed) or `os.path.lexists`.
fn exists(path: &str, follow: bool) -> bool {
    if follow {
        Path::new(path).exists()
    } else {
        lexists(path)
    }
}

fn read_link(path: &str) -> Option<String> {
    std::fs::read_link(path)
        .ok()
        .map(|t| t.to_string_lossy().into_owned())
}

/// Salt's `file.remove`: a file, symlink or other entry unlinked, a directory removed with
/// its contents.
fn remove_path(path: &str) -> std::io::Result<()> {
    let p = Path::new(path);
    if is_link(path) || (p.exists() && !p.is_dir()) {
        std::fs::remove_file(p)
    } else if p.is_dir() {
        std::fs::remove_dir_all(p)
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------- owners

fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

fn group_name(gid: u32) -> String {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map_or_else(|| gid.to_string(), |g| g.name)
}

/// The user this minion runs as (Salt's `__opts__["user"]`).
fn running_user() -> String {
    user_name(nix::unistd::geteuid().as_raw())
}

/// Salt's default group for `user`: the name of its primary group, `root`'s when there is no
/// such user (`file.gid_to_group(user.info(user).get("gid", 0))`).
fn primary_group(user: &str) -> String {
    let gid = nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .map_or(0, |u| u.gid.as_raw());
    group_name(gid)
}

/// The names of the owner and group of `path` (the link itself unless `follow`).
fn owner_names(path: &str, follow: bool) -> Option<(String, String)> {
    let meta = if follow {
        std::fs::metadata(path)
    } else {
        std::fs::symlink_metadata(path)
    };
    meta.ok().map(|m| (user_name(m.uid()), group_name(m.gid())))
}

/// Salt's `_test_owner`: `user`, else the `owner` alias.
fn user_arg(c: &Call) -> Option<String> {
    match c.arg("user") {
        Some(u) if json_truthy(u) => Some(py_text(u)),
        user => c.arg("owner").map(py_text).or_else(|| user.map(py_text)),
    }
}

/// Salt's `file.lchown`: the link (or file) given to `user` and `group`; an error, and nothing
/// changed, when either does not exist.
fn lchown(path: &str, user: Option<&str>, group: Option<&str>) -> std::io::Result<()> {
    let uid = match user.filter(|u| !u.is_empty()) {
        Some(u) => Some(uid_of(u).ok_or_else(|| std::io::Error::other("User does not exist"))?),
        None => None,
    };
    let gid = match group.filter(|g| !g.is_empty()) {
        Some(g) => Some(gid_of(g).ok_or_else(|| std::io::Error::other("Group does not exist"))?),
        None => None,
    };
    std::os::unix::fs::lchown(path, uid, gid)
}

// ---------------------------------------------------------------- calling other states

/// A state function of this module run on other arguments, as Salt's states call each other.
fn sub_call(
    c: &Call,
    run: fn(&Call) -> Result<Ret, String>,
    args: &[(&str, Value)],
) -> Result<Ret, String> {
    let low: Low = args
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect();
    run(&c.with_low(&low))
}

fn opt(v: Option<&str>) -> Value {
    v.map_or(Value::Null, |s| json!(s))
}

// ---------------------------------------------------------------- file.symlink

/// Whether the link `path` is owned by `user` and `group` (by name, as Salt compares).
fn link_owned_by(path: &str, user: &str, group: &str) -> bool {
    owner_names(path, false).is_some_and(|(u, g)| u == user && g == group)
}

/// Salt's `_set_symlink_ownership`: the link given to `user` and `group`; whether it now is
/// theirs.
fn set_link_owner(path: &str, user: &str, group: &str) -> bool {
    lchown(path, Some(user), Some(group)).is_ok() && link_owned_by(path, user, group)
}

/// Salt's `_symlink_check`: what test mode reports.
fn symlink_check(
    name: &str,
    target: &str,
    force: bool,
    user: &str,
    group: &str,
    follow: bool,
) -> (Value, String, Map<String, Value>) {
    let mut ch = Map::new();
    if !exists(name, follow) && !is_link(name) {
        ch.insert("new".into(), json!(name));
        return (
            Value::Null,
            format!("Symlink {name} to {target} is set for creation"),
            ch,
        );
    }
    if is_link(name) {
        if read_link(name).as_deref() != Some(target) {
            ch.insert("change".into(), json!(name));
            return (
                Value::Null,
                format!("Link {name} target is set to be changed to {target}"),
                ch,
            );
        }
        let mut msg = format!("The symlink {name} is present");
        if link_owned_by(name, user, group) {
            return (json!(true), msg, ch);
        }
        let (cu, cg) = owner_names(name, false).unwrap_or_default();
        ch.insert("ownership".into(), json!(format!("{cu}:{cg}")));
        msg.push_str(&format!(
            ", but the ownership of the symlink would be changed from {cu}:{cg} to {user}:{group}"
        ));
        return (Value::Null, msg, ch);
    }
    if force {
        return (
            Value::Null,
            format!("The file or directory {name} is set for removal to make way for a new symlink targeting {target}"),
            ch,
        );
    }
    (
        json!(false),
        format!("File or directory exists where the symlink {name} should be. Did you mean to use force?"),
        ch,
    )
}

/// Salt's `file.symlink` execution function: the link `path` → `src`; its error text.
fn make_symlink(
    src: &str,
    path: &str,
    force: bool,
    atomic: bool,
    follow: bool,
) -> Result<(), String> {
    let could_not = || format!("Could not create '{path}'");
    if is_link(path) {
        if read_link(path).is_some_and(|t| normpath(&t) == normpath(src)) {
            return Ok(());
        }
        if !force && !atomic {
            return Err(format!("Found existing symlink: {path}"));
        }
    }
    if exists(path, follow) && !force && !atomic {
        return Err(format!("Existing path is not a symlink: {path}"));
    }
    if (is_link(path) || exists(path, follow)) && force && !atomic {
        std::fs::remove_file(path).map_err(|e| os_error(&e, Some(path)))?;
    } else if atomic {
        // A link under a fresh name beside it, renamed over it.
        let dir = dirname(path);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let temp = join(&dir, &format!("tmp{}{stamp}", std::process::id()));
        std::os::unix::fs::symlink(src, &temp).map_err(|_| could_not())?;
        if std::fs::rename(&temp, path).is_err() {
            let _ = std::fs::remove_file(&temp);
            return Err(could_not());
        }
        return Ok(());
    }
    std::os::unix::fs::symlink(src, path).map_err(|_| could_not())
}

/// Salt's `file.move`: `shutil.move`, or `os.rename` alone when copying is not allowed.
fn move_path(src: &str, dst: &str, rename_only: bool) -> Result<(), String> {
    match std::fs::rename(src, dst) {
        Ok(()) => Ok(()),
        Err(_) if rename_only => Err(format!("Could not rename '{src}' to '{dst}'")),
        // Across file systems `shutil.move` copies then unlinks.
        Err(e)
            if e.raw_os_error() == Some(nix::errno::Errno::EXDEV as i32)
                && Path::new(src).is_file() =>
        {
            std::fs::copy(src, dst)
                .and_then(|_| std::fs::remove_file(src))
                .map_err(|e| {
                    format!(
                        "Unable to move '{src}' to '{dst}': {}",
                        os_error(&e, Some(dst))
                    )
                })
        }
        Err(e) => Err(format!(
            "Unable to move '{src}' to '{dst}': {}",
            os_error(&e, Some(src))
        )),
    }
}

/// Salt's `file.rename`: `source` moved to `name` (a symbolic link recreated there), unless
/// `name` exists and `force` is not set.
pub(super) fn rename(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let source = expanduser(&c.text("source").unwrap_or_default());
    let mut r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.rename");
    }
    if !Path::new(&name).is_absolute() {
        return error(r, format!("Specified file {name} is not an absolute path"));
    }
    if !lexists(&source) {
        set(
            &mut r,
            "comment",
            json!(format!(
                "Source file \"{source}\" has already been moved out of place"
            )),
        );
        return Ok(r);
    }
    if lexists(&name) {
        if !c.flag("force", false) {
            set(
                &mut r,
                "comment",
                json!(format!(
                    "The target file \"{name}\" exists and will not be overwritten"
                )),
            );
            return Ok(r);
        } else if !c.test && remove_path(&name).is_err() {
            return error(
                r,
                format!("Failed to delete \"{name}\" in preparation for forced move"),
            );
        }
    }
    if c.test {
        set(
            &mut r,
            "comment",
            json!(format!(
                "File \"{source}\" is set to be moved to \"{name}\""
            )),
        );
        set(&mut r, "result", Value::Null);
        return Ok(r);
    }
    let dname = dirname(&name);
    if !Path::new(&dname).is_dir() {
        if !c.flag("makedirs", false) {
            return error(r, format!("The target directory {dname} is not present"));
        }
        if let Err(e) = make_dirs(Path::new(&dname), None, None, None) {
            return error(r, format!("Failed to create parent directories: {e}"));
        }
    }
    let moved = match read_link(&source) {
        Some(linkto) => std::os::unix::fs::symlink(linkto, &name)
            .and_then(|()| std::fs::remove_file(&source))
            .map_err(|e| e.to_string()),
        None => move_path(&source, &name, false),
    };
    if moved.is_err() {
        return error(r, format!("Failed to move \"{source}\" to \"{name}\""));
    }
    set(
        &mut r,
        "comment",
        json!(format!("Moved \"{source}\" to \"{name}\"")),
    );
    changes(&mut r).insert(name.clone(), json!(source));
    Ok(r)
}

/// Salt's preflight of the link states: the owner and group exist and each of `paths` (a
/// word for it and the path) is absolute; the message of what fails.
fn link_preflight(user: &str, group: &str, paths: &[(&str, &str)]) -> Option<String> {
    let mut preflight = Vec::new();
    if uid_of(user).is_none() {
        preflight.push(format!("User {user} does not exist"));
    }
    if gid_of(group).is_none() {
        preflight.push(format!("Group {group} does not exist"));
    }
    for (what, path) in paths {
        if !path.starts_with('/') {
            preflight.push(format!("Specified {what} {path} is not an absolute path"));
        }
    }
    if preflight.is_empty() {
        return None;
    }
    let mut msg = preflight.join(". ");
    if preflight.len() > 1 {
        msg.push('.');
    }
    Some(msg)
}

/// Whether `path` is a file with more than one name (Salt's `file.is_hardlink`).
fn is_hardlink(path: &str) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.nlink() > 1)
}

/// Whether two paths are one inode (neither followed when a link).
fn same_inode(a: &str, b: &str) -> bool {
    match (std::fs::symlink_metadata(a), std::fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => x.ino() == y.ino(),
        _ => false,
    }
}

/// Salt's `_hardlink_check`: what a test run of `file.hardlink` says.
fn hardlink_check(name: &str, target: &str, force: bool) -> (Value, String, Value) {
    if !Path::new(target).exists() {
        let msg = format!("Target {target} for hard link does not exist");
        return (json!(false), msg, json!({}));
    }
    if Path::new(target).is_dir() {
        let msg = format!("Unable to hard link from directory {target}");
        return (json!(false), msg, json!({}));
    }
    if Path::new(name).is_dir() {
        let msg = format!("Unable to hard link to directory {name}");
        return (json!(false), msg, json!({}));
    }
    if !Path::new(name).exists() {
        let msg = format!("Hard link {name} to {target} is set for creation");
        return (Value::Null, msg, json!({ "new": name }));
    }
    if is_hardlink(name) {
        if same_inode(name, target) {
            let msg = format!("The hard link {name} is presently targetting {target}");
            return (json!(true), msg, json!({}));
        }
        let msg = format!("Link {name} target is set to be changed to {target}");
        return (Value::Null, msg, json!({ "change": name }));
    }
    if force {
        let msg = format!(
            "The file or directory {name} is set for removal to make way for a new hard link targeting {target}"
        );
        return (Value::Null, msg, json!({}));
    }
    let msg = format!(
        "File or directory exists where the hard link {name} should be. Did you mean to use force?"
    );
    (json!(false), msg, json!({}))
}

/// `file.hardlink`: `name` made another name of the file `target`.
pub(super) fn hardlink(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.hardlink");
    }
    let target = c.text("target").unwrap_or_default();
    let user = user_arg(c).unwrap_or_else(running_user);
    let group = c.text("group").unwrap_or_else(|| primary_group(&user));
    if let Some(msg) = link_preflight(&user, &group, &[("file", &name), ("target", &target)]) {
        return error(r, msg);
    }
    if c.test {
        let (result, comment, changes) = hardlink_check(&name, &target, c.flag("force", false));
        set(&mut r, "result", result);
        set(&mut r, "comment", json!(comment));
        set(&mut r, "changes", changes);
        return Ok(r);
    }
    for (direction, item) in [("to", &name), ("from", &target)] {
        if Path::new(item).is_dir() {
            return error(
                r,
                format!("Unable to hard link {direction} directory {item}"),
            );
        }
    }
    if !Path::new(&target).exists() {
        return error(r, format!("Target {target} for hard link does not exist"));
    }
    let parent = dirname(&name);
    if !Path::new(&parent).is_dir() {
        if !c.flag("makedirs", false) {
            return error(
                r,
                format!("Directory {parent} for hard link is not present"),
            );
        }
        let mode = c.arg("dir_mode").and_then(normalize_mode);
        make_dirs(
            Path::new(&normpath(&parent)),
            mode.as_deref(),
            Some(&user),
            Some(&group),
        )
        .map_err(|e| os_error(&e, Some(&parent)))?;
    }
    if Path::new(&name).is_file() && !is_hardlink(&name) {
        if !c.flag("force", false) {
            return error(
                r,
                format!("File exists where the hard link {name} should be"),
            );
        }
        std::fs::remove_file(&name).map_err(|e| os_error(&e, Some(&name)))?;
        changes(&mut r).insert(
            "forced".into(),
            json!("File for hard link was forcibly replaced"),
        );
    }
    let (made, failed) = if is_hardlink(&name) {
        if same_inode(&name, &target) {
            set(
                &mut r,
                "comment",
                json!(format!(
                    "Target of hard link {name} is already pointing to {target}"
                )),
            );
            return Ok(r);
        }
        std::fs::remove_file(&name).map_err(|e| os_error(&e, Some(&name)))?;
        (
            format!("Set target of hard link {name} -> {target}"),
            format!("Unable to set target of hard link {name} -> {target}"),
        )
    } else if !Path::new(&name).exists() {
        (
            format!("Created new hard link {name} -> {target}"),
            format!("Unable to create new hard link {name} -> {target}"),
        )
    } else {
        return Ok(r);
    };
    match std::fs::hard_link(&target, &name) {
        Ok(()) => {
            set(&mut r, "comment", json!(made));
            changes(&mut r).insert("new".into(), json!(name));
        }
        Err(e) => {
            // Python names both paths of a failed `os.link`.
            let why = format!(
                "Could not create '{name}': {} -> {}",
                os_error(&e, Some(&target)),
                brine_protocol::pyrepr::str_repr(&name)
            );
            set(&mut r, "result", json!(false));
            set(&mut r, "comment", json!(format!("{failed}: {why}")));
        }
    }
    Ok(r)
}

pub(super) fn symlink(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = ret(&name, json!(true), "", json!({}));
    if name.is_empty() {
        return error(r, "Must provide name to file.symlink");
    }
    let target = c.text("target").unwrap_or_default();
    let force = c.flag("force", false);
    let atomic = c.flag("atomic", false);
    let follow = c.flag("follow_symlinks", true);
    let mode = c.arg("mode").and_then(normalize_mode);
    let mut user = user_arg(c);
    let mut group = c.text("group");
    if c.flag("inherit_user_and_group", false)
        && (user.is_none() || group.is_none())
        && is_link(&name)
    {
        if let Some((u, g)) = owner_names(&name, false) {
            user.get_or_insert(u);
            group.get_or_insert(g);
        }
    }
    let user = user.unwrap_or_else(running_user);
    let group = group.unwrap_or_else(|| primary_group(&user));
    if let Some(msg) = link_preflight(&user, &group, &[("file", &name)]) {
        return error(r, msg);
    }
    let (tresult, mut tcomment, tchanges) =
        symlink_check(&name, &target, force, &user, &group, follow);
    let parent = dirname(&name);
    if !Path::new(&parent).is_dir() {
        if c.flag("makedirs", false) {
            if c.test {
                tcomment.push_str(&format!("\n{parent} will be created"));
            } else if !Path::new(&parent).exists() {
                // Salt's `file.makedirs`: every missing directory with the owner and `mode`.
                make_dirs(
                    Path::new(&normpath(&parent)),
                    mode.as_deref(),
                    Some(&user),
                    Some(&group),
                )
                .map_err(|e| os_error(&e, Some(&parent)))?;
            }
        } else if c.test {
            tcomment.push_str(&format!("\nDirectory {parent} for symlink is not present"));
        } else {
            return error(r, format!("Directory {parent} for symlink is not present"));
        }
    }
    if c.test {
        set(&mut r, "result", tresult);
        set(&mut r, "comment", json!(tcomment));
        set(&mut r, "changes", Value::Object(tchanges));
        return Ok(r);
    }
    if is_link(&name) {
        let current = read_link(&name).unwrap_or_default();
        if normpath(&current) != normpath(&target) {
            remove_path(&name)
                .map_err(|e| format!("Could not remove '{name}': {}", os_error(&e, Some(&name))))?;
        } else {
            if link_owned_by(&name, &user, &group) {
                set(
                    &mut r,
                    "comment",
                    json!(format!(
                        "Symlink {name} is present and owned by {user}:{group}"
                    )),
                );
            } else if set_link_owner(&name, &user, &group) {
                set(
                    &mut r,
                    "comment",
                    json!(format!("Set ownership of symlink {name} to {user}:{group}")),
                );
                changes(&mut r).insert("ownership".into(), json!(format!("{user}:{group}")));
            } else {
                return error(
                    r,
                    format!("Failed to set ownership of symlink {name} to {user}:{group}"),
                );
            }
            return Ok(r);
        }
    } else if exists(&name, follow) {
        if let Some(backup) = c.text("backupname") {
            let backup = if backup.starts_with('/') {
                backup
            } else if backup == basename(&backup) {
                join(&dirname(&normpath(&name)), &backup)
            } else {
                return error(
                    r,
                    format!("Backupname must be an absolute path or a file name: {backup}"),
                );
            };
            if lexists(&backup) {
                if !force {
                    return error(r, format!("Symlink & backup dest exists and Force not set. {name} -> {target} - backup: {backup}"));
                }
                remove_path(&backup).map_err(|e| {
                    format!(
                        "Could not remove '{backup}': {}",
                        os_error(&e, Some(&backup))
                    )
                })?;
            }
            if let Err(e) = move_path(&name, &backup, c.flag("disallow_copy_and_unlink", false)) {
                set(&mut r, "changes", json!({}));
                return error(
                    r,
                    format!("Unable to rename {name} to backup {backup} -> : {e}"),
                );
            }
        } else if !force && !atomic {
            let path = Path::new(&name);
            let kind = if path.is_file() {
                "File"
            } else if path.is_dir() {
                "Directory"
            } else {
                "File system entry"
            };
            return error(
                r,
                format!("{kind} exists where the symlink {name} should be"),
            );
        }
    }
    if let Err(e) = make_symlink(&target, &name, force, atomic, follow) {
        return error(
            r,
            format!("Unable to create new symlink {name} -> {target}: {e}"),
        );
    }
    set(
        &mut r,
        "comment",
        json!(format!("Created new symlink {name} -> {target}")),
    );
    changes(&mut r).insert("new".into(), json!(name));
    if !link_owned_by(&name, &user, &group) && !set_link_owner(&name, &user, &group) {
        set(&mut r, "result", json!(false));
        let comment = format!(
            "Created new symlink {name} -> {target}, but was unable to set ownership to {user}:{group}"
        );
        set(&mut r, "comment", json!(comment));
    }
    Ok(r)
}

// ---------------------------------------------------------------- file.copy

/// Salt's `file.get_mode`: `0644`.
fn mode_of(path: &str) -> Option<String> {
    std::fs::metadata(path)
        .ok()
        .map(|m| format!("{:04o}", m.permissions().mode() & 0o7777))
}

/// The mode of directories made for a file of `mode`: its last three digits, each nonzero
/// one with the execute bit (`640` → `750`).
fn dir_mode_for(mode: &str) -> Result<String, String> {
    let digits: Vec<char> = mode.chars().collect();
    digits[digits.len().saturating_sub(3)..]
        .iter()
        .map(|&d| match d {
            '0' => Ok('0'),
            d => d
                .to_digit(10)
                .and_then(|n| char::from_digit(n | 1, 10))
                .ok_or_else(|| {
                    format!("ValueError: invalid literal for int() with base 10: '{d}'")
                }),
        })
        .collect()
}

/// `shutil.copystat` without the flags: `to` gets the mode and times of `from`.
fn copy_stat(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(from)?;
    std::fs::set_permissions(to, meta.permissions())?;
    let times = std::fs::FileTimes::new()
        .set_accessed(meta.accessed()?)
        .set_modified(meta.modified()?);
    std::fs::File::open(to)?.set_times(times)
}

/// `shutil.copytree(src, dst, symlinks=True)`: directories and files with their modes and
/// times (`copy2`), symlinks as symlinks.
fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir(dst)?;
    let mut entries: Vec<_> = std::fs::read_dir(src)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&from)?, &to)?;
        } else if kind.is_dir() {
            copy_tree(&from, &to)?;
        } else {
            std::fs::copy(&from, &to)?;
            copy_stat(&from, &to)?;
        }
    }
    copy_stat(src, dst)
}

/// Every entry below `dir` (not `dir` itself) handed to `f`, top down.
fn walk_below(dir: &Path, f: &mut dyn FnMut(&Path)) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        f(&path);
        if entry.file_type()?.is_dir() {
            walk_below(&path, f)?;
        }
    }
    Ok(())
}

pub(super) fn copy(c: &Call) -> Result<Ret, String> {
    let mut name = expanduser(&c.name());
    let source = expanduser(&c.text("source").unwrap_or_default());
    let mut r = Map::new();
    r.insert("name".into(), json!(name));
    r.insert("changes".into(), json!({}));
    r.insert(
        "comment".into(),
        json!(format!("Copied \"{source}\" to \"{name}\"")),
    );
    r.insert("result".into(), json!(true));
    if name.is_empty() {
        return error(r, "Must provide name to file.copy");
    }
    if !name.starts_with('/') {
        return error(r, format!("Specified file {name} is not an absolute path"));
    }
    if !Path::new(&source).exists() {
        return error(r, format!("Source file \"{source}\" is not present"));
    }
    let preserve = c.flag("preserve", false);
    let (user, group, mode) = if preserve {
        let (u, g) = owner_names(&source, true).unwrap_or_default();
        (u, g, mode_of(&source).unwrap_or_default())
    } else {
        let user = user_arg(c).unwrap_or_else(running_user);
        let group = c.text("group").unwrap_or_else(|| primary_group(&user));
        if let Some(err) = check_user(Some(&user), Some(&group), c.test) {
            return error(r, err);
        }
        let mode = c
            .text("mode")
            .unwrap_or_else(|| mode_of(&source).unwrap_or_default());
        (user, group, mode)
    };
    if Path::new(&name).is_dir() && c.flag("subdir", false) {
        name = join(&name, basename(&source));
    }
    let force = c.flag("force", false);
    let mut changed = true;
    if lexists(&source) && lexists(&name) {
        if force && Path::new(&name).is_file() {
            let same = match (std::fs::read(&name), std::fs::read(&source)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            if same {
                let comment = format!(
                    "{} - files are identical but force flag is set",
                    py_text(&r["comment"])
                );
                set(&mut r, "comment", json!(comment));
            }
        }
        if !force {
            changed = false;
        } else if !c.test && remove_path(&name).is_err() {
            return error(
                r,
                format!("Failed to delete \"{name}\" in preparation for forced move"),
            );
        }
    }
    if !changed || c.test {
        let (result, comment) = if changed {
            (
                Value::Null,
                format!("File \"{source}\" is set to be copied to \"{name}\""),
            )
        } else {
            (
                json!(true),
                format!("The target file \"{name}\" exists and will not be overwritten"),
            )
        };
        set(&mut r, "comment", json!(comment));
        set(&mut r, "result", result);
        return Ok(r);
    }
    let dname = dirname(&name);
    if !Path::new(&dname).is_dir() {
        if !c.flag("makedirs", false) {
            return error(r, format!("The target directory {dname} is not present"));
        }
        let dir_mode = match c.arg("dir_mode") {
            Some(m) => normalize_mode(m),
            None => Some(dir_mode_for(&mode)?),
        };
        if !Path::new(&dname).exists() {
            make_dirs(
                Path::new(&normpath(&dname)),
                dir_mode.as_deref(),
                Some(&user),
                Some(&group),
            )
            .map_err(|e| os_error(&e, Some(&dname)))?;
        }
    }
    let copied = if Path::new(&source).is_dir() {
        copy_tree(Path::new(&source), Path::new(&name)).and_then(|()| {
            let mut failed = None;
            walk_below(Path::new(&name), &mut |p| {
                if let Err(e) = lchown(&p.display().to_string(), Some(&user), Some(&group)) {
                    failed.get_or_insert(e);
                }
            })?;
            failed.map_or(Ok(()), Err)
        })
    } else {
        std::fs::copy(&source, &name).map(|_| ())
    };
    if copied.is_err() {
        return error(r, format!("Failed to copy \"{source}\" to \"{name}\""));
    }
    set(&mut r, "changes", json!({ name.clone(): source }));
    if !preserve {
        let before = py_text(&r["comment"]);
        let mode = normalize_mode(&json!(mode));
        check_perms(
            &mut r,
            Path::new(&name),
            Some(&user),
            Some(&group),
            mode.as_deref(),
            false,
        );
        if r["result"] == json!(false) {
            // Salt's `check_perms` joins its failures to the comment with "; ".
            let failures = py_text(&r["comment"]).replace('\n', "; ");
            set(&mut r, "comment", json!(format!("{before}; {failures}")));
        }
    }
    Ok(r)
}

// ---------------------------------------------------------------- file.recurse

/// Salt's `check_include_exclude`: whether `path` matches `include` (when given) and not
/// `exclude` (when given); each a pattern or a list of them, a pattern a glob or, after `E@`,
/// a regular expression searched for in the path.
pub fn include_exclude(
    path: &str,
    include: Option<&Value>,
    exclude: Option<&Value>,
) -> Result<bool, String> {
    fn matches(path: &str, pattern: &str) -> Result<bool, String> {
        match pattern.strip_prefix("E@") {
            Some(re) => regex::Regex::new(re)
                .map(|re| re.is_match(path))
                .map_err(|e| format!("re.error: {e}")),
            None => Ok(fnmatch(pattern, path)),
        }
    }
    fn any(path: &str, patterns: &Value) -> Result<bool, String> {
        match patterns {
            Value::Array(items) => {
                for p in items {
                    if matches(path, &py_text(p))? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            p => matches(path, &py_text(p)),
        }
    }
    let include = include.filter(|v| json_truthy(v));
    let exclude = exclude.filter(|v| json_truthy(v));
    let included = match include {
        Some(p) => any(path, p)?,
        None => true,
    };
    let excluded = match exclude {
        Some(p) => any(path, p)?,
        None => false,
    };
    Ok(included && !excluded)
}

/// Salt's `_is_valid_relpath`: no `..` component, at most `maxdepth` levels down.
fn valid_relpath(rel: &str, maxdepth: Option<i64>) -> bool {
    if format!("/{rel}/").contains("/../") {
        return false;
    }
    maxdepth.is_none_or(|max| {
        i64::try_from(rel.trim_matches('/').matches('/').count()).unwrap_or(i64::MAX) <= max
    })
}

/// `salt://path?saltenv=env` split into the path and its saltenv (`default` when it names
/// none).
fn parse_url(url: &str, default: &str) -> (String, String) {
    let rest = url.strip_prefix("salt://").unwrap_or(url);
    if let Some((path, _)) = rest.split_once("?env=") {
        return (path.to_string(), default.to_string());
    }
    match rest.split_once("?saltenv=") {
        Some((path, env)) => (path.to_string(), env.to_string()),
        None => (rest.to_string(), default.to_string()),
    }
}

/// Salt's `_validate_str_list`: one string or a list of them.
fn str_list(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(py_text).collect(),
        other => vec![py_text(other)],
    }
}

/// What `file.recurse` manages: Salt's `_gen_recurse_managed_files`.
#[derive(Debug, Default, PartialEq)]
struct Plan {
    /// Destination → `salt://` source, in the order they are managed.
    files: Vec<(String, String)>,
    dirs: BTreeSet<String>,
    /// Path relative to the destination → link text.
    links: BTreeSet<(String, String)>,
    /// What `clean` keeps.
    keep: BTreeSet<String>,
}

struct Filter<'a> {
    include: Option<&'a Value>,
    exclude: Option<&'a Value>,
    maxdepth: Option<i64>,
}

impl Filter<'_> {
    fn takes(&self, rel: &str) -> Result<bool, String> {
        Ok(valid_relpath(rel, self.maxdepth) && include_exclude(rel, self.include, self.exclude)?)
    }
}

fn plan(
    name: &str,
    srcpath: &str,
    senv: &str,
    listing: &crate::states::MasterList,
    filter: &Filter,
    keep_symlinks: bool,
    include_empty: bool,
) -> Result<Plan, String> {
    let full_path = |rel: &str| join(name, &normpath(rel));
    let srcdir = if srcpath.ends_with('/') {
        srcpath.to_string()
    } else {
        format!("{srcpath}/")
    };
    let mut p = Plan::default();
    let mut files = listing.files.clone();
    let mut vdir: HashSet<String> = HashSet::new();
    if keep_symlinks {
        for (lname, target) in &listing.links {
            let rel = relpath(lname, &srcdir);
            if !filter.takes(&rel)? {
                continue;
            }
            // Files below a linked directory come with the link.
            files.retain(|f| !f.starts_with(&format!("{lname}/")));
            p.links.insert((rel.clone(), target.clone()));
            p.keep.insert(full_path(&rel));
        }
        vdir.extend(p.keep.iter().cloned());
    }
    let mut managed = Vec::new();
    for f in files.iter().filter(|f| !f.trim().is_empty()) {
        let rel = relpath(f, &srcdir);
        if !filter.takes(&rel)? {
            continue;
        }
        let dest = full_path(&rel);
        let dir = dirname(&dest);
        p.keep.insert(dest.clone());
        if vdir.insert(dir.clone()) {
            p.dirs.insert(dir);
        }
        managed.push((dest, format!("salt://{f}?saltenv={senv}")));
    }
    if include_empty {
        for d in &listing.dirs {
            let rel = relpath(d, &srcdir);
            if !filter.takes(&rel)? {
                continue;
            }
            if keep_symlinks
                && listing
                    .links
                    .keys()
                    .any(|l| d.starts_with(&format!("{l}/")))
            {
                continue;
            }
            let dest = full_path(&rel);
            p.dirs.insert(dest.clone());
            p.keep.insert(dest);
        }
    }
    // Files that are also kept as symlinks go last: the link's target must exist first.
    let linked: HashSet<String> = p
        .links
        .iter()
        .map(|(rel, _)| normpath(&format!("{name}/{rel}")))
        .collect();
    managed.sort_by_key(|(dest, _)| (linked.contains(&normpath(dest)), dest.clone()));
    p.files = managed;
    Ok(p)
}

/// Salt's `_clean_dir`: what is below `root` and neither kept (nor the parent of something
/// kept) nor excluded, removed (only listed under test); the paths removed.
pub(super) fn clean_dir(
    root: &str,
    keep: &BTreeSet<String>,
    exclude: Option<&Value>,
    test: bool,
) -> Result<Vec<String>, String> {
    let mut real_keep: HashSet<String> = HashSet::from([root.to_string()]);
    for k in keep.iter().filter(|k| k.starts_with('/')) {
        let mut p = normpath(k);
        real_keep.insert(p.clone());
        while !p.trim_start_matches('/').is_empty() {
            p = normpath(&dirname(&p));
            real_keep.insert(p.clone());
        }
    }
    let mut removed = Vec::new();
    let mut stack = vec![root.to_string()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<(String, bool, bool)> = entries
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let link = e.file_type().is_ok_and(|t| t.is_symlink());
                (name, e.path().is_dir(), link)
            })
            .collect();
        // `os.walk` lists directories first.
        names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut subdirs = Vec::new();
        for (entry, is_dir, is_link) in names {
            let path = join(&dir, &entry);
            if !real_keep.contains(&path) && include_exclude(&relpath(&path, root), None, exclude)?
            {
                removed.push(path.clone());
                if !test {
                    remove_path(&path).map_err(|e| {
                        format!("Could not remove '{path}': {}", os_error(&e, Some(&path)))
                    })?;
                }
            }
            if is_dir && !is_link {
                subdirs.push(path);
            }
        }
        // Walked top down in name order: the last pushed is taken first.
        stack.extend(subdirs.into_iter().rev());
    }
    // Salt's list comes out of a set, in no particular order.
    removed.sort();
    Ok(removed)
}

/// One directory of a walk: its path, the directories and the other entries in it.
pub(super) type Walked = (String, Vec<String>, Vec<String>);

/// Salt's `_depth_limited_walk` (`os.walk` top down, in the order the directory lists its
/// entries, symbolic links to directories listed as directories but not entered): no more
/// than `max_depth` levels below `top` listed.
pub(super) fn walk(top: &str, max_depth: Option<usize>) -> Vec<Walked> {
    let top_depth = top.trim_end_matches('/').matches('/').count();
    let mut out = Vec::new();
    let mut stack = vec![top.to_string()];
    while let Some(root) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                dirs.push(name);
            } else {
                files.push(name);
            }
        }
        let below: Vec<String> = dirs
            .iter()
            .map(|d| join(&root, d))
            .filter(|p| !is_link(p))
            .collect();
        stack.extend(below.into_iter().rev());
        let depth = root.trim_end_matches('/').matches('/').count() - top_depth;
        if max_depth.is_none_or(|m| depth < m) {
            out.push((root, dirs, files));
        }
    }
    out
}

/// Salt's `_gen_keep_files` for `file.directory`: the paths a `clean` keeps, those of the
/// `file` states it requires (named by path) and, for a directory below `name`, what the walk
/// found in it.
pub(super) fn required_keep(
    name: &str,
    require: Option<&Value>,
    walked: &[Walked],
) -> BTreeSet<String> {
    let mut keep = BTreeSet::new();
    let Some(Value::Array(require)) = require else {
        return keep;
    };
    for fname in require.iter().filter_map(|r| r.get("file")).map(py_text) {
        if !Path::new(&fname).is_dir() {
            keep.insert(fname);
            continue;
        }
        if relpath(&fname, name).starts_with("..") {
            continue;
        }
        for (root, dirs, files) in walked {
            if root == &fname || root.starts_with(&format!("{fname}/")) {
                keep.insert(root.clone());
                keep.extend(dirs.iter().chain(files).map(|n| join(root, n)));
            }
        }
    }
    keep
}

/// The return being built by `file.recurse`, with Salt's `merge_ret`.
struct Merged {
    ret: Ret,
    /// Path → comments, in the order first seen.
    comments: Vec<(String, Vec<String>)>,
}

impl Merged {
    fn add_comment(&mut self, path: &str, comment: Vec<String>) {
        match self.comments.iter_mut().find(|(p, _)| p == path) {
            Some((_, list)) => list.extend(comment),
            None => self.comments.push((path.to_string(), comment)),
        }
    }

    /// The most negative result wins; comments of what did not succeed outright; changes
    /// under the path.
    fn merge(&mut self, path: &str, sub: &Ret) {
        let result = sub.get("result").cloned().unwrap_or(Value::Null);
        if result == json!(false) || self.ret["result"] == json!(true) {
            set(&mut self.ret, "result", result.clone());
        }
        let comment = sub.get("comment").map(py_text).unwrap_or_default();
        if result != json!(true) && !comment.is_empty() {
            self.add_comment(path, vec![comment]);
        }
        if let Some(ch) = sub.get("changes").filter(|v| json_truthy(v)) {
            changes(&mut self.ret).insert(path.to_string(), ch.clone());
        }
    }
}

fn sub_ret(result: Value, comment: &str, ch: Value) -> Ret {
    ret("", result, comment, ch)
}

pub(super) fn recurse(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let user = user_arg(c);
    let group = c.text("group");
    let r = ret(&name, json!(true), "", json!({}));
    if c.low.contains_key("mode") {
        return error(
            r,
            "'mode' is not allowed in 'file.recurse'. Please use 'file_mode' and 'dir_mode'.",
        );
    }
    // What Brine does not do, refused rather than done differently.
    if c.text("file_mode")
        .is_some_and(|m| m.eq_ignore_ascii_case("keep"))
    {
        return error(
            r,
            "file_mode 'keep' is not supported by Brine's file.recurse",
        );
    }
    if c.arg("backup").is_some_and(json_truthy) {
        return error(r, "backup is not supported by Brine's file.recurse");
    }
    let clean = c.flag("clean", false);
    let file_requires = c
        .arg("require")
        .and_then(Value::as_array)
        .is_some_and(|reqs| reqs.iter().any(|q| q.get("file").is_some()));
    if clean && file_requires {
        return error(
            r,
            "clean with a file require is not supported by Brine's file.recurse",
        );
    }
    let maxdepth = match c.arg("maxdepth") {
        None => None,
        Some(v) => match v.as_i64() {
            Some(n) => Some(n),
            None => {
                return error(
                    r,
                    format!("maxdepth must be an integer, not {}", py_text(v)),
                )
            }
        },
    };
    let dir_mode = c.arg("dir_mode").and_then(normalize_mode);
    let file_mode = c.arg("file_mode").and_then(normalize_mode);
    if let Some(err) = check_user(user.as_deref(), group.as_deref(), c.test) {
        return error(r, err);
    }
    if !name.starts_with('/') {
        return error(r, format!("Specified file {name} is not an absolute path"));
    }
    let sources: Vec<String> = str_list(c.arg("source").unwrap_or(&Value::Null))
        .into_iter()
        .map(|s| s.trim_end_matches('/').to_string())
        .collect();
    if let Some(bad) = sources.iter().find(|s| !s.starts_with("salt://")) {
        return error(r, format!("Invalid source '{bad}' (must be a salt:// URI)"));
    }
    // Salt's `file.source_list`: the first source that is a file or directory there.
    let mut chosen = None;
    for source in &sources {
        let (path, senv) = parse_url(source, c.saltenv);
        let listing = c.host.list_master(&senv, &path)?;
        if listing.files.contains(&path) || listing.dirs.contains(&path) {
            chosen = Some((path, senv, listing));
            break;
        }
    }
    let Some((srcpath, senv, listing)) = chosen else {
        return error(
            r,
            "Recurse failed: none of the specified sources were found",
        );
    };
    if !listing.dirs.contains(&srcpath) {
        return error(
            r,
            format!("The directory '{srcpath}' does not exist on the salt fileserver in saltenv '{senv}'"),
        );
    }
    let path = Path::new(&name);
    if !path.is_dir() {
        if path.exists() {
            return error(r, format!("The path {name} exists and is not a directory"));
        }
        if !c.test {
            make_dirs(path, dir_mode.as_deref(), user.as_deref(), group.as_deref())
                .map_err(|e| os_error(&e, Some(&name)))?;
        }
    }
    let filter = Filter {
        include: c.arg("include_pat"),
        exclude: c.arg("exclude_pat"),
        maxdepth,
    };
    let keep_symlinks = c.flag("keep_symlinks", false);
    let p = match plan(
        &name,
        &srcpath,
        &senv,
        &listing,
        &filter,
        keep_symlinks,
        c.flag("include_empty", false),
    ) {
        Ok(p) => p,
        Err(e) => return error(r, e),
    };
    let mut m = Merged {
        ret: r,
        comments: Vec::new(),
    };
    let (user_v, group_v) = (opt(user.as_deref()), opt(group.as_deref()));
    for (rel, target) in &p.links {
        let link = join(&name, rel);
        let sub = sub_call(
            c,
            symlink,
            &[
                ("name", json!(link)),
                ("target", json!(target)),
                ("makedirs", json!(true)),
                ("force", json!(c.flag("force_symlinks", false))),
                ("user", user_v.clone()),
                ("group", group_v.clone()),
                ("mode", c.arg("sym_mode").cloned().unwrap_or(Value::Null)),
            ],
        )?;
        m.merge(&link, &sub);
    }
    for dir in &p.dirs {
        if basename(dir) == ".." {
            continue;
        }
        let d = Path::new(dir);
        if clean && d.exists() && !d.is_dir() {
            if c.test {
                m.merge(
                    dir,
                    &sub_ret(
                        Value::Null,
                        &format!("Replacing {dir} with a directory"),
                        json!({}),
                    ),
                );
                continue;
            }
            remove_path(dir).map_err(|e| os_error(&e, Some(dir)))?;
            m.merge(
                dir,
                &sub_ret(
                    json!(true),
                    "",
                    json!({"diff": "Replaced file with a directory"}),
                ),
            );
        }
        let sub = sub_call(
            c,
            directory,
            &[
                ("name", json!(dir)),
                ("user", user_v.clone()),
                ("group", group_v.clone()),
                ("dir_mode", opt(dir_mode.as_deref())),
                ("makedirs", json!(true)),
            ],
        )?;
        m.merge(dir, &sub);
    }
    let replace = c.flag("replace", true);
    for (dest, source) in &p.files {
        let d = Path::new(dest);
        if clean && d.is_dir() && replace {
            if c.test {
                m.merge(
                    dest,
                    &sub_ret(
                        Value::Null,
                        &format!("Replacing directory {dest} with a file"),
                        json!({}),
                    ),
                );
                continue;
            }
            remove_path(dest).map_err(|e| os_error(&e, Some(dest)))?;
            m.merge(
                dest,
                &sub_ret(
                    json!(true),
                    "",
                    json!({"diff": "Replaced directory with a new file"}),
                ),
            );
        }
        let mut args = vec![
            ("name", json!(dest)),
            ("source", json!(source)),
            ("user", user_v.clone()),
            ("group", group_v.clone()),
            ("mode", opt(file_mode.as_deref())),
            ("makedirs", json!(true)),
            ("replace", json!(replace)),
        ];
        for key in ["template", "context", "defaults", "show_changes", "create"] {
            if let Some(v) = c.arg(key) {
                args.push((key, v.clone()));
            }
        }
        let sub = sub_call(c, managed, &args)?;
        m.merge(dest, &sub);
    }
    if clean {
        let removed = clean_dir(&name, &p.keep, c.arg("exclude_pat"), c.test)?;
        if !removed.is_empty() {
            if c.test {
                if m.ret["result"] == json!(true) {
                    set(&mut m.ret, "result", Value::Null);
                }
                m.add_comment("removed", removed);
            } else {
                changes(&mut m.ret).insert("removed".into(), json!(removed));
            }
        }
    }
    let comment = m
        .comments
        .iter()
        .map(|(k, v)| format!("\n#### {k} ####\n{}", v.join("\n")))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string();
    let mut r = m.ret;
    let comment = if comment.is_empty() {
        format!("Recursively updated {name}")
    } else {
        comment
    };
    set(&mut r, "comment", json!(comment));
    if !json_truthy(&r["changes"]) && r["result"] == json!(true) {
        set(
            &mut r,
            "comment",
            json!(format!("The directory {name} is in the correct state")),
        );
    }
    Ok(r)
}

// ---------------------------------------------------------------- file.serialize

/// Salt's serializers; the ones Brine writes are `yaml` and `json`.
const SALT_SERIALIZERS: &[&str] = &[
    "configparser",
    "json",
    "keyvalue",
    "msgpack",
    "plist",
    "python",
    "toml",
    "yaml",
    "yamlex",
];

/// How a dataset is written and read back.
#[derive(Debug, Clone, PartialEq)]
enum Format {
    Yaml(DumpOptions),
    Json(JsonStyle),
}

fn int_opt(key: &str, v: &Value) -> Result<i64, String> {
    v.as_i64().ok_or_else(|| {
        format!(
            "serializer_opts {key} must be an integer, not {}",
            py_text(v)
        )
    })
}

impl Format {
    /// The serializer with the state's defaults (yaml: block style; json: `indent=2`,
    /// `separators=(",", ": ")`, `sort_keys=True`), `encoding`'s and `opts`.
    fn new(serializer: &str, encoding: bool, opts: &Map<String, Value>) -> Result<Format, String> {
        let refuse = |key: &str| {
            Err(format!(
                "serializer_opts {key} is not supported by Brine's {serializer} serializer"
            ))
        };
        match serializer {
            "yaml" => {
                let mut o = DumpOptions::new(Style::Block(2));
                o.allow_unicode = encoding;
                let mut flow = false;
                let mut indent = None;
                for (key, v) in opts {
                    match key.as_str() {
                        "default_flow_style" if v.is_boolean() => flow = json_truthy(v),
                        "indent" => indent = Some(int_opt(key, v)?),
                        "width" => o.width = int_opt(key, v)?,
                        "explicit_start" => o.explicit_start = json_truthy(v),
                        // Salt cuts the document end marker off again.
                        "explicit_end" => {}
                        "allow_unicode" => o.allow_unicode = json_truthy(v),
                        "sort_keys" => o.sort_keys = json_truthy(v),
                        _ => return refuse(key),
                    }
                }
                o.style = match (flow, indent) {
                    (false, n) => Style::Block(
                        n.and_then(|n| usize::try_from(n).ok())
                            .filter(|n| (2..10).contains(n))
                            .unwrap_or(2),
                    ),
                    (true, None) => Style::Flow,
                    (true, Some(_)) => return refuse("indent with default_flow_style True"),
                };
                Ok(Format::Yaml(o))
            }
            "json" => {
                let mut style = JsonStyle {
                    sort_keys: true,
                    ..JsonStyle::new(Some(2), false)
                };
                for (key, v) in opts {
                    match (key.as_str(), v) {
                        ("indent", Value::Null) => style.indent = None,
                        ("indent", Value::String(s)) => style.indent = Some(s.clone()),
                        ("indent", v) => {
                            let n = int_opt(key, v)?;
                            style.indent = Some(" ".repeat(usize::try_from(n).unwrap_or(0)));
                        }
                        ("sort_keys", v) => style.sort_keys = json_truthy(v),
                        ("ensure_ascii", v) => style.ensure_ascii = json_truthy(v),
                        ("separators", Value::Array(seps)) if seps.len() == 2 => {
                            style.item_separator = py_text(&seps[0]);
                            style.key_separator = py_text(&seps[1]);
                        }
                        _ => return refuse(key),
                    }
                }
                Ok(Format::Json(style))
            }
            other => Err(format!(
                "The {other} serializer is not supported by Brine's file.serialize (json and yaml are)"
            )),
        }
    }

    /// The serializer's text of `data`, as `file.serialize` writes it (one line break at
    /// the end).
    fn dump(&self, data: &Value) -> String {
        let text = match self {
            Format::Yaml(o) => {
                let text = yaml::dump(data, o);
                text.strip_suffix('\n').unwrap_or(&text).to_string()
            }
            Format::Json(style) => pyjson::dumps(data, style),
        };
        format!("{text}\n")
    }

    /// An existing file's data (`None` for an empty YAML document).
    fn load(&self, text: &str) -> Result<Value, String> {
        match self {
            Format::Yaml(_) => yaml::load::load(text),
            Format::Json(_) => serde_json::from_str(text).map_err(|e| e.to_string()),
        }
    }
}

/// Salt's `recursive_diff(past, current).diffs` (keys gone from `current` ignored).
fn recursive_diff(past: &Map<String, Value>, current: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, new) in current {
        match past.get(k) {
            None => {
                out.insert(k.clone(), json!({"new": new, "old": "<_null_>"}));
            }
            Some(old) if !py_eq_json(new, old) => match (new, old) {
                (Value::Object(n), Value::Object(o)) => {
                    let sub = recursive_diff(o, n);
                    if !sub.is_empty() {
                        out.insert(k.clone(), Value::Object(sub));
                    }
                }
                _ => {
                    out.insert(k.clone(), json!({"new": new, "old": old}));
                }
            },
            Some(_) => {}
        }
    }
    out
}

/// Python codec names of UTF-8.
fn is_utf8(encoding: &str) -> bool {
    matches!(
        encoding.to_ascii_lowercase().replace('_', "-").as_str(),
        "utf-8" | "utf8" | "u8" | "utf" | "cp65001"
    )
}

pub(super) fn serialize(c: &Call) -> Result<Ret, String> {
    let name = expanduser(&c.name());
    let mut r = Map::new();
    r.insert("changes".into(), json!({}));
    r.insert("comment".into(), json!(""));
    r.insert("name".into(), json!(name));
    r.insert("result".into(), json!(true));
    if name.is_empty() {
        return error(r, "Must provide name to file.serialize");
    }
    if !c.flag("create", true) && !Path::new(&name).is_file() {
        set(
            &mut r,
            "comment",
            json!(format!(
                "File {name} is not present and is not set for creation"
            )),
        );
        return Ok(r);
    }
    let truthy = |key: &str| c.arg(key).filter(|v| json_truthy(v));
    if truthy("serializer").is_some() && truthy("formatter").is_some() {
        return error(r, "Only one of serializer and formatter are allowed");
    }
    let serializer = truthy("serializer")
        .or_else(|| truthy("formatter"))
        .map_or_else(|| "yaml".to_string(), py_text)
        .to_lowercase();
    if truthy("dataset").is_some() && truthy("dataset_pillar").is_some() {
        return error(r, "Only one of 'dataset' and 'dataset_pillar' is permitted");
    }
    let mut dataset = c.arg("dataset").cloned();
    if let Some(key) = truthy("dataset_pillar") {
        // `pillar.get` with its default, the empty string.
        dataset = Some(
            traverse(c.host.pillar(), &py_text(key), ":")
                .cloned()
                .unwrap_or_else(|| json!("")),
        );
    }
    let Some(mut dataset) = dataset else {
        return error(r, "Neither 'dataset' nor 'dataset_pillar' was defined");
    };
    if !SALT_SERIALIZERS.contains(&serializer.as_str()) {
        return error(r, format!("The {serializer} serializer could not be found. It either does not exist or its prerequisites are not installed."));
    }
    let encoding = c.text("encoding");
    if let Some(e) = encoding.as_deref().filter(|e| !is_utf8(e)) {
        return error(
            r,
            format!("encoding {e} is not supported by Brine's file.serialize (only utf-8 is)"),
        );
    }
    let format = match Format::new(
        &serializer,
        encoding.is_some(),
        &c.arg("serializer_opts")
            .map(repack_dictlist)
            .unwrap_or_default(),
    ) {
        Ok(f) => f,
        Err(e) => return error(r, e),
    };
    let deserializer_opts = truthy("deserializer_opts").is_some();
    let mut warnings = Vec::new();
    let mut merged_from: Option<Value> = None;
    if c.flag("merge_if_exists", false) {
        if Path::new(&name).is_file() {
            if deserializer_opts {
                return error(
                    r,
                    "deserializer_opts is not supported by Brine's file.serialize",
                );
            }
            let text = std::fs::read_to_string(&name).map_err(|e| os_error(&e, Some(&name)))?;
            let existing = match format.load(&text) {
                Ok(v) => v,
                Err(e) => {
                    return error(r, format!("Failed to deserialize existing data: {e}"));
                }
            };
            if !existing.is_null() {
                let (Value::Object(mut merged), Value::Object(upd)) =
                    (existing.clone(), dataset.clone())
                else {
                    return Err(
                        "TypeError: Cannot update using non-dict types in dictupdate.update()"
                            .into(),
                    );
                };
                brine_protocol::config::merge_recursive(&mut merged, upd, false);
                let merged = Value::Object(merged);
                if py_eq_json(&existing, &merged) {
                    set(
                        &mut r,
                        "comment",
                        json!(format!("The file {name} is in the correct state")),
                    );
                    return Ok(r);
                }
                merged_from = Some(existing);
                dataset = merged;
            }
        }
    } else if deserializer_opts {
        warnings.push(json!(
            "The 'deserializer_opts' option is ignored unless merge_if_exists is set to True."
        ));
    }
    let contents = format.dump(&dataset);
    let show_changes = c.flag("show_changes", true);
    let mut out = sub_call(
        c,
        managed,
        &[
            ("name", json!(name)),
            ("contents", json!(contents)),
            ("user", c.arg("user").cloned().unwrap_or(Value::Null)),
            ("group", c.arg("group").cloned().unwrap_or(Value::Null)),
            ("mode", c.arg("mode").cloned().unwrap_or(Value::Null)),
            ("makedirs", json!(c.flag("makedirs", false))),
            ("show_changes", json!(show_changes)),
            (
                "check_cmd",
                c.arg("check_cmd").cloned().unwrap_or(Value::Null),
            ),
            ("tmp_dir", c.arg("tmp_dir").cloned().unwrap_or(Value::Null)),
            ("tmp_ext", c.arg("tmp_ext").cloned().unwrap_or(Value::Null)),
        ],
    )?;
    // As Salt: a failing `check_cmd` keeps the diff of the temporary copy it checked.
    if out.get("skip_watch") == Some(&json!(true)) {
        let current = std::fs::read(&name).unwrap_or_default();
        let d = get_diff(&current, contents.as_bytes(), show_changes);
        if !d.is_empty() {
            changes(&mut out).insert("diff".into(), json!(d));
        }
    }
    if c.test && out["result"].is_null() && json_truthy(&out["changes"]) {
        set(
            &mut out,
            "comment",
            json!(format!("Dataset will be serialized and stored into {name}")),
        );
        if !show_changes {
            changes(&mut out).insert("diff".into(), json!("<show_changes=False>"));
        }
    }
    if let (Some(Value::Object(past)), Value::Object(now)) = (&merged_from, &dataset) {
        let diff = recursive_diff(past, now);
        changes(&mut out).insert("diff".into(), Value::Object(diff));
    }
    if !warnings.is_empty() {
        out.insert("warnings".into(), Value::Array(warnings));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values below are what Python 3.11's posixpath and Salt 3007's functions
    // (`_gen_recurse_managed_files` over the same listing, ...) return.
    #[test]
    fn paths_as_posixpath() {
        assert_eq!(normpath("/a//b/./c/../d/"), "/a/b/d");
        assert_eq!(normpath("//a/../.."), "//");
        assert_eq!(normpath("///a"), "/a");
        assert_eq!(normpath("a/../../b"), "../b");
        assert_eq!(normpath("."), ".");
        assert_eq!(normpath(""), ".");
        assert_eq!(dirname("/a/b"), "/a");
        assert_eq!(dirname("/a/b/"), "/a/b");
        assert_eq!(dirname("/a"), "/");
        assert_eq!(dirname("//a"), "//");
        assert_eq!(dirname("a"), "");
        assert_eq!(basename("/a/b.bak"), "b.bak");
        assert_eq!(basename("sub/x"), "x");
        assert_eq!(join("/a", "b"), "/a/b");
        assert_eq!(join("/a/", "b"), "/a/b");
        assert_eq!(join("/a", "/b"), "/b");
        assert_eq!(relpath("tree/sub/x", "tree/"), "sub/x");
        assert_eq!(relpath("tree", "tree/"), ".");
        assert_eq!(relpath("treehouse/x", "tree/"), "../treehouse/x");
        assert_eq!(relpath("/w/rec/a/b", "/w/rec"), "a/b");
    }

    #[test]
    fn include_and_exclude_patterns() {
        let check = |path: &str, include: Option<Value>, exclude: Option<Value>| {
            include_exclude(path, include.as_ref(), exclude.as_ref())
        };
        let pat = |v: Value| Some(v);
        assert!(check("a.txt", None, None).unwrap());
        assert!(check("sub/a.txt", pat(json!("*.txt")), None).unwrap());
        assert!(!check("a.log", pat(json!("*.txt")), None).unwrap());
        assert!(check("x/inner", pat(json!("E@inn")), None).unwrap());
        assert!(!check("a.log", None, pat(json!(["*.txt", "*.log"]))).unwrap());
        assert!(check("a.cfg", pat(json!(["*.txt", "a*"])), pat(json!("*.log"))).unwrap());
        assert!(!check("a.txt", pat(json!("a*")), pat(json!("E@txt$"))).unwrap());
        // An empty pattern is no pattern.
        assert!(check("a", pat(json!("")), pat(json!([]))).unwrap());
        assert!(check("a", pat(json!("E@(")), None).is_err());
    }

    #[test]
    fn relpaths_kept_within_depth() {
        assert!(valid_relpath("a/b", None));
        assert!(!valid_relpath("../a", None));
        assert!(!valid_relpath("a/../b", None));
        assert!(valid_relpath("a..b/c", None));
        assert!(valid_relpath("a", Some(0)));
        assert!(!valid_relpath("a/b", Some(0)));
        assert!(valid_relpath("a/b", Some(1)));
    }

    #[test]
    fn urls_and_dir_modes() {
        assert_eq!(
            parse_url("salt://a/b?saltenv=dev", "base"),
            ("a/b".into(), "dev".into())
        );
        assert_eq!(
            parse_url("salt://a/b", "base"),
            ("a/b".into(), "base".into())
        );
        assert_eq!(
            parse_url("salt://a?env=x", "base"),
            ("a".into(), "base".into())
        );
        assert_eq!(dir_mode_for("0640").unwrap(), "750");
        assert_eq!(dir_mode_for("600").unwrap(), "700");
        assert_eq!(dir_mode_for("4644").unwrap(), "755");
        assert_eq!(dir_mode_for("0").unwrap(), "0");
        assert!(dir_mode_for("rw-").is_err());
    }

    fn listing() -> crate::states::MasterList {
        crate::states::MasterList {
            files: [
                "tree/a.txt",
                "tree/sub/b.txt",
                "tree/link",
                "tree/ldir/c",
                "treehouse/x",
            ]
            .map(String::from)
            .to_vec(),
            dirs: ["tree", "tree/sub", "tree/ldir", "tree/empty"]
                .map(String::from)
                .to_vec(),
            links: [
                ("tree/link".to_string(), "a.txt".to_string()),
                ("tree/ldir".to_string(), "sub".to_string()),
            ]
            .into(),
        }
    }

    #[test]
    fn plan_as_gen_recurse_managed_files() {
        let all = Filter {
            include: None,
            exclude: None,
            maxdepth: None,
        };
        let p = plan("/d", "tree", "base", &listing(), &all, false, false).unwrap();
        let dests: Vec<&str> = p.files.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(dests, ["/d/a.txt", "/d/ldir/c", "/d/link", "/d/sub/b.txt"]);
        assert_eq!(p.files[0].1, "salt://tree/a.txt?saltenv=base");
        assert_eq!(
            p.dirs.iter().map(String::as_str).collect::<Vec<_>>(),
            ["/d", "/d/ldir", "/d/sub"]
        );
        // Kept symlinks: what is below a linked directory goes, the linked file goes last.
        let p = plan("/d", "tree", "base", &listing(), &all, true, true).unwrap();
        let dests: Vec<&str> = p.files.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(dests, ["/d/a.txt", "/d/sub/b.txt", "/d/link"]);
        assert_eq!(
            p.links.iter().cloned().collect::<Vec<_>>(),
            [
                ("ldir".to_string(), "sub".to_string()),
                ("link".to_string(), "a.txt".to_string())
            ]
        );
        assert_eq!(
            p.dirs.iter().map(String::as_str).collect::<Vec<_>>(),
            ["/d", "/d/.", "/d/empty", "/d/ldir", "/d/sub"]
        );
        assert_eq!(
            p.keep.iter().map(String::as_str).collect::<Vec<_>>(),
            [
                "/d/.",
                "/d/a.txt",
                "/d/empty",
                "/d/ldir",
                "/d/link",
                "/d/sub",
                "/d/sub/b.txt"
            ]
        );
        let shallow = Filter {
            include: None,
            exclude: Some(&json!("*.txt")),
            maxdepth: Some(0),
        };
        let p = plan("/d", "tree", "base", &listing(), &shallow, false, false).unwrap();
        assert_eq!(
            p.files,
            [(
                "/d/link".to_string(),
                "salt://tree/link?saltenv=base".to_string()
            )]
        );
    }

    #[test]
    fn clean_removes_what_is_neither_kept_nor_excluded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().display().to_string();
        for d in ["keep/sub", "gone/inner", "held"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        for f in [
            "keep/sub/f",
            "keep/extra",
            "gone/inner/x",
            "top",
            "held/x",
            "keep.me",
        ] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let keep: BTreeSet<String> =
            [format!("{root}/keep/sub/f"), format!("{root}/held/x")].into();
        let exclude = json!("keep.*");
        let listed = clean_dir(&root, &keep, Some(&exclude), true).unwrap();
        assert_eq!(
            listed,
            [
                format!("{root}/gone"),
                format!("{root}/gone/inner"),
                format!("{root}/gone/inner/x"),
                format!("{root}/keep/extra"),
                format!("{root}/top"),
            ]
        );
        assert!(dir.path().join("gone/inner/x").exists());
        let removed = clean_dir(&root, &keep, Some(&exclude), false).unwrap();
        assert_eq!(
            removed,
            [
                format!("{root}/gone"),
                format!("{root}/keep/extra"),
                format!("{root}/top")
            ]
        );
        assert!(!dir.path().join("gone").exists());
        assert!(dir.path().join("keep/sub/f").exists());
        assert!(dir.path().join("keep.me").exists());
    }

    #[test]
    fn serializer_options_as_salt_passes_them() {
        let opts = |v: Value| repack_dictlist(&v);
        assert_eq!(
            opts(json!([{"indent": 4}, "sort_keys"])),
            json!({"indent": 4, "sort_keys": null})
                .as_object()
                .cloned()
                .unwrap()
        );
        // A map or a malformed list is ignored, as Salt ignores it.
        assert!(opts(json!({"indent": 4})).is_empty());
        assert!(opts(json!([{"a": 1, "b": 2}])).is_empty());
        let data = json!({"z": [1, {"k": "h\u{e9}"}], "a": null});
        let json_default = Format::new("json", false, &Map::new()).unwrap();
        assert_eq!(
            json_default.dump(&data),
            "{\n  \"a\": null,\n  \"z\": [\n    1,\n    {\n      \"k\": \"h\u{e9}\"\n    }\n  ]\n}\n"
        );
        let one_line = Format::new("json", false, &opts(json!([{"indent": null}]))).unwrap();
        assert_eq!(
            one_line.dump(&data),
            "{\"a\": null,\"z\": [1,{\"k\": \"h\u{e9}\"}]}\n"
        );
        let yaml_default = Format::new("yaml", false, &Map::new()).unwrap();
        assert_eq!(
            yaml_default.dump(&data),
            "a: null\nz:\n- 1\n- k: \"h\\xE9\"\n"
        );
        let unicode = Format::new("yaml", true, &Map::new()).unwrap();
        assert_eq!(unicode.dump(&json!("h\u{e9}")), "h\u{e9}\n");
        let flow =
            Format::new("yaml", false, &opts(json!([{"default_flow_style": true}]))).unwrap();
        assert_eq!(flow.dump(&data), "{a: null, z: [1, {k: \"h\\xE9\"}]}\n");
        assert!(Format::new("yaml", false, &opts(json!([{"default_flow_style": null}]))).is_err());
        assert!(Format::new("yaml", false, &opts(json!([{"canonical": true}]))).is_err());
        assert!(Format::new("json", false, &opts(json!([{"allow_nan": false}]))).is_err());
        assert!(Format::new("toml", false, &Map::new()).is_err());
    }

    #[test]
    fn merged_data_diff_as_recursive_diff() {
        let past = json!({"a": 1, "n": {"x": 1, "y": [1]}, "gone": 1});
        let now = json!({"a": 1.0, "n": {"x": 1, "y": [2], "z": {}}, "b": "new", "gone": 1});
        let diff = recursive_diff(past.as_object().unwrap(), now.as_object().unwrap());
        assert_eq!(
            Value::Object(diff),
            json!({"n": {"y": {"new": [2], "old": [1]}, "z": {"new": {}, "old": "<_null_>"}},
                   "b": {"new": "new", "old": "<_null_>"}})
        );
        assert!(py_eq_json(
            &json!({"a": [1, true]}),
            &json!({"a": [1.0, 1]})
        ));
        assert!(!py_eq_json(&json!({"a": [1]}), &json!({"a": [1, 2]})));
    }

    #[test]
    fn copy_tree_keeps_modes_times_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("nested")).unwrap();
        std::fs::write(src.join("nested/f"), "f").unwrap();
        std::fs::set_permissions(src.join("nested/f"), std::fs::Permissions::from_mode(0o640))
            .unwrap();
        std::fs::set_permissions(src.join("nested"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        std::os::unix::fs::symlink("nested/f", src.join("link")).unwrap();
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        std::fs::File::open(src.join("nested/f"))
            .unwrap()
            .set_times(std::fs::FileTimes::new().set_modified(old))
            .unwrap();
        let dst = dir.path().join("dst");
        copy_tree(&src, &dst).unwrap();
        let meta = std::fs::metadata(dst.join("nested/f")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o640);
        assert_eq!(meta.modified().unwrap(), old);
        let nested = std::fs::metadata(dst.join("nested")).unwrap();
        assert_eq!(nested.permissions().mode() & 0o777, 0o750);
        assert_eq!(
            std::fs::read_link(dst.join("link")).unwrap(),
            Path::new("nested/f")
        );
        // The destination must not exist yet.
        assert!(copy_tree(&src, &dst).is_err());
    }

    #[test]
    fn symlinks_made_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("l").display().to_string();
        let file = dir.path().join("f").display().to_string();
        std::fs::write(&file, "x").unwrap();
        let (result, comment, ch) = symlink_check(&link, &file, false, "root", "root", true);
        assert_eq!(
            (result, ch),
            (
                Value::Null,
                json!({"new": link}).as_object().cloned().unwrap()
            )
        );
        assert_eq!(
            comment,
            format!("Symlink {link} to {file} is set for creation")
        );
        make_symlink(&file, &link, false, false, true).unwrap();
        assert_eq!(read_link(&link).as_deref(), Some(file.as_str()));
        // Already right, whatever the spelling of the same target.
        make_symlink(&format!("{file}/."), &link, false, false, true).unwrap();
        assert_eq!(
            make_symlink("/elsewhere", &link, false, false, true),
            Err(format!("Found existing symlink: {link}"))
        );
        make_symlink("/elsewhere", &link, false, true, true).unwrap();
        assert_eq!(read_link(&link).as_deref(), Some("/elsewhere"));
        assert_eq!(
            make_symlink("/x", &file, false, false, true),
            Err(format!("Existing path is not a symlink: {file}"))
        );
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        let sub = sub.display().to_string();
        assert_eq!(
            make_symlink("/x", &sub, true, false, true),
            Err(format!("[Errno 21] Is a directory: '{sub}'"))
        );
        let (result, comment, _) = symlink_check(&sub, "/x", false, "root", "root", true);
        assert_eq!(result, json!(false));
        assert!(comment.ends_with("Did you mean to use force?"));
    }
}
