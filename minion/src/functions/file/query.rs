//! The `file` module's small queries, as Salt 3007 answers them: user and group ids and
//! names, hard links, device and FIFO tests, directory entries, `statvfs`, globs, path
//! spelling and disk usage.

use std::collections::HashSet;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use brine_protocol::payload::{map, Value};
use brine_protocol::posixpath::normpath;

use super::super::args::{py_str, Bound, py_type_name};
use super::super::FnError;
use super::{
    arg, expanduser, gid_to_group, group_to_gid, lstat, os_exception, str_arg, strerror,
    uid_to_user, user_to_uid,
};

/// `file.uid_to_user`: the user's name, or the uid itself when no user has it.
pub(super) fn uid_to_user_fn(b: &Bound) -> Result<Value, FnError> {
    let uid = arg(b, "uid");
    match uid.as_i64() {
        Some(n) => Ok(u32::try_from(n).map_or_else(|_| uid.clone(), uid_to_user)),
        None if matches!(uid, Value::Boolean(_)) => {
            Ok(uid_to_user(u32::from(uid == &Value::Boolean(true))))
        }
        None => Err(FnError::InvalidArgs(format!(
            "uid should be integer, not {}",
            py_type_name(uid)
        ))),
    }
}

/// `file.user_to_uid`: the uid, `""` for no such user (this process's user for none).
pub(super) fn user_to_uid_fn(b: &Bound) -> Value {
    let user = b.get("user").unwrap_or(&Value::Nil);
    user_to_uid(user).map_or_else(|()| Value::from(""), Value::from)
}

/// `file.group_to_gid`: the gid, `""` for no such group or none.
pub(super) fn group_to_gid_fn(b: &Bound) -> Value {
    group_to_gid(arg(b, "group")).map_or_else(|()| Value::from(""), Value::from)
}

/// `file.gid_to_group`: a gid (or a name, checked) to the group's name; the gid when no
/// group has it, `""` for a name no group has.
pub(super) fn gid_to_group_fn(b: &Bound) -> Result<Value, FnError> {
    let gid = arg(b, "gid");
    let number = match gid {
        Value::Boolean(t) => Some(i64::from(*t)),
        Value::Integer(_) => gid.as_i64(),
        Value::String(_) => py_str(gid).trim().parse::<i64>().ok(),
        other => {
            return Err(FnError::Exception(format!(
                "TypeError: int() argument must be a string, a bytes-like object or a real number, not '{}'",
                py_type_name(other)
            )))
        }
    };
    let number = match number {
        Some(n) => n,
        None => match group_to_gid(gid) {
            Ok(n) => n,
            Err(()) => return Ok(Value::from("")),
        },
    };
    Ok(u32::try_from(number).map_or_else(|_| Value::from(number), gid_to_group))
}

/// `file.is_hardlink`: whether the path has more than one link; `{}` when it does not exist.
pub(super) fn is_hardlink(b: &Bound) -> Result<Value, FnError> {
    let stat = lstat(b)?;
    Ok(
        match stat.as_map().and_then(|m| {
            m.iter()
                .find(|(k, _)| k.as_str() == Some("st_nlink"))
                .and_then(|(_, v)| v.as_u64())
        }) {
            Some(n) => Value::Boolean(n > 1),
            None => stat,
        },
    )
}

/// `file.link`: a hard link `path` to the absolute `src`.
pub(super) fn link(b: &Bound) -> Result<Value, FnError> {
    let src = expanduser(&str_arg(b, "src")?);
    let path = str_arg(b, "path")?;
    if !src.starts_with('/') {
        return Err(FnError::Invocation("File path must be absolute.".into()));
    }
    std::fs::hard_link(&src, &path).map_err(|e| {
        let errno = e.raw_os_error().unwrap_or(0);
        FnError::Execution(format!(
            "Could not create '{path}': [Errno {errno}] {}: {} -> {}",
            strerror(&e),
            brine_protocol::pyrepr::str_repr(&src),
            brine_protocol::pyrepr::str_repr(&path)
        ))
    })?;
    Ok(Value::Boolean(true))
}

/// `file.readdir`: `.`, `..` and the directory's entries, in the order the system lists them.
pub(super) fn readdir(b: &Bound) -> Result<Value, FnError> {
    let path = expanduser(&str_arg(b, "path")?);
    if !path.starts_with('/') {
        return Err(FnError::Invocation("Dir path must be absolute.".into()));
    }
    if !Path::new(&path).is_dir() {
        return Err(FnError::Invocation(format!(
            "A valid directory was not specified: {path}"
        )));
    }
    let mut out = vec![Value::from("."), Value::from("..")];
    let entries = std::fs::read_dir(&path).map_err(|e| os_exception(&e, &path))?;
    for entry in entries {
        let entry = entry.map_err(|e| os_exception(&e, &path))?;
        out.push(Value::from(
            entry.file_name().to_string_lossy().into_owned(),
        ));
    }
    Ok(Value::Array(out))
}

/// `file.statvfs`: the file system's figures for a path.
pub(super) fn statvfs(b: &Bound) -> Result<Value, FnError> {
    let path = expanduser(&str_arg(b, "path")?);
    if !path.starts_with('/') {
        return Err(FnError::Invocation("File path must be absolute.".into()));
    }
    let st = nix::sys::statvfs::statvfs(path.as_str())
        .map_err(|_| FnError::Execution(format!("Could not statvfs '{path}'")))?;
    Ok(map([
        ("f_bavail", Value::from(st.blocks_available())),
        ("f_bfree", Value::from(st.blocks_free())),
        ("f_blocks", Value::from(st.blocks())),
        ("f_bsize", Value::from(st.block_size())),
        ("f_favail", Value::from(st.files_available())),
        ("f_ffree", Value::from(st.files_free())),
        ("f_files", Value::from(st.files())),
        ("f_flag", Value::from(st.flags().bits())),
        ("f_frsize", Value::from(st.fragment_size())),
        ("f_namemax", Value::from(st.name_max())),
    ]))
}

/// `file.path_exists_glob`: whether the glob matches anything.
pub(super) fn path_exists_glob(b: &Bound) -> Result<Value, FnError> {
    let pattern = expanduser(&str_arg(b, "path")?);
    Ok(Value::Boolean(
        !brine_protocol::config::glob(Path::new(&pattern)).is_empty(),
    ))
}

/// The kinds `file.is_chrdev`, `file.is_blkdev` and `file.is_fifo` test.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    CharDevice,
    BlockDevice,
    Fifo,
}

/// Whether `name` (its link followed) is of that kind; `False` when it does not exist.
pub(super) fn is_kind(b: &Bound, param: &str, kind: Kind) -> Result<Value, FnError> {
    let name = expanduser(&str_arg(b, param)?);
    let meta = match std::fs::metadata(&name) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Value::Boolean(false)),
        Err(e) => return Err(os_exception(&e, &name)),
    };
    let t = meta.file_type();
    Ok(Value::Boolean(match kind {
        Kind::CharDevice => t.is_char_device(),
        Kind::BlockDevice => t.is_block_device(),
        Kind::Fifo => t.is_fifo(),
    }))
}

/// `file.normpath`.
pub(super) fn normpath_fn(b: &Bound) -> Result<Value, FnError> {
    Ok(Value::from(normpath(&str_arg(b, "path")?)))
}

/// `file.diskusage`: a file's size, or the sum over the files under a directory (links
/// followed, each inode once, links to directories not descended into).
pub(super) fn diskusage(b: &Bound) -> Result<Value, FnError> {
    let path = str_arg(b, "path")?;
    if let Ok(m) = std::fs::metadata(&path) {
        if m.is_file() {
            return Ok(Value::from(m.size()));
        }
    }
    let mut seen = HashSet::new();
    let mut total: u64 = 0;
    let mut dirs = vec![std::path::PathBuf::from(&path)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => {
                    if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                        dirs.push(p);
                    }
                }
                Ok(m) => {
                    if seen.insert(m.ino()) {
                        total = total.saturating_add(m.size());
                    }
                }
                Err(_) => {}
            }
        }
    }
    Ok(Value::from(total))
}
