//! The master's `user` option: started as root, the master hands its directories to that
//! user and runs as it, as Salt's does (`verify_env`, then `check_user`). Started as that
//! user already, nothing changes; started as anyone else, it refuses to run.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A local account from `/etc/passwd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// The entry for `name` in passwd-format `text`.
pub fn find_account(text: &str, name: &str) -> Option<Account> {
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 4 || f[0] != name {
            return None;
        }
        Some(Account {
            name: name.to_string(),
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
        })
    })
}

#[allow(unsafe_code)]
fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Give `path` and everything below it (symbolic links themselves, not their targets) to
/// `uid:gid` where it belongs to someone else.
fn chown_tree(path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if meta.uid() != uid || meta.gid() != gid {
        std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Run as `user`: when started as root, hand `paths` (recursively) to the user, then take
/// its groups, group id and user id. Returns the account switched to, or None when already
/// running as it.
pub fn become_user(user: &str, paths: &[&Path]) -> Result<Option<Account>, String> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let Some(account) = find_account(&passwd, user) else {
        return Err(format!(
            "Failed to prepare the Salt environment for user {user}. The user is not available."
        ));
    };
    let euid = effective_uid();
    if euid == account.uid {
        return Ok(None);
    }
    let refused = || format!("Salt configured to run as user \"{user}\" but unable to switch.");
    if euid != 0 {
        return Err(refused());
    }
    for p in paths {
        chown_tree(p, account.uid, account.gid)
            .map_err(|e| format!("cannot hand {} to {user}: {e}", p.display()))?;
    }
    let c_name = std::ffi::CString::new(user).map_err(|_| refused())?;
    #[allow(unsafe_code)]
    // SAFETY: initgroups reads the NUL-terminated name we own for the duration of the call;
    // setgid and setuid take plain integers. glibc applies them to every thread.
    let ok = unsafe {
        libc::initgroups(c_name.as_ptr(), account.gid) == 0
            && libc::setgid(account.gid) == 0
            && libc::setuid(account.uid) == 0
    };
    if !ok || effective_uid() != account.uid {
        return Err(format!(
            "{} ({})",
            refused(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(Some(account))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_are_read_from_passwd_lines() {
        let text = "root:x:0:0:root:/root:/bin/bash\n\
                    # comment\n\
                    salt:x:998:997:Salt:/opt/saltstack/salt:/usr/sbin/nologin\n\
                    broken:x:notanumber:1::/:/bin/sh\n";
        assert_eq!(
            find_account(text, "salt"),
            Some(Account {
                name: "salt".into(),
                uid: 998,
                gid: 997
            })
        );
        assert_eq!(find_account(text, "root").map(|a| a.uid), Some(0));
        assert_eq!(find_account(text, "broken"), None);
        assert_eq!(find_account(text, "sal"), None);
    }

    #[test]
    fn an_unknown_user_is_refused() {
        let err = become_user("no-such-user-brine-test", &[]).unwrap_err();
        assert!(err.contains("The user is not available"), "{err}");
    }
}
