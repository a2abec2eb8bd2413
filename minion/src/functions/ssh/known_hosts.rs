//! `known_hosts` files as Salt's `ssh` module keeps them: entries found with
//! `ssh-keygen -F`, removed with `ssh-keygen -R`, hashed with `ssh-keygen -H`, fetched with
//! `ssh-keyscan`, and a host's entry replaced line by line (Salt's `set_known_host`).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use rmpv::Value;

use super::super::args::{py_str, Bound};
use super::super::cmd::run_argv_merged;
use super::super::FnError;
use super::{fingerprint, user_info};
use brine_protocol::payload::{map, py_truthy};
use brine_protocol::pystr;

/// The port ssh uses unless told otherwise.
const DEFAULT_SSH_PORT: i64 = 22;

/// One entry: `hostname`, `key`, `enc` and, when read from a file or a scan, `fingerprint`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    hostname: String,
    key: String,
    /// `None` for an entry made from a `key` given without `enc` (written as `None`, as
    /// Salt writes it).
    enc: Option<String>,
    fingerprint: Option<String>,
    port: Option<Value>,
}

impl Entry {
    fn enc_value(&self) -> Value {
        self.enc.as_deref().map_or(Value::Nil, Value::from)
    }

    /// The key type as a known_hosts line shows it.
    fn enc_text(&self) -> &str {
        self.enc.as_deref().unwrap_or("None")
    }

    fn value(&self) -> Value {
        let mut out = match &self.fingerprint {
            Some(fp) => vec![
                ("hostname", Value::from(self.hostname.as_str())),
                ("key", Value::from(self.key.as_str())),
                ("enc", self.enc_value()),
                ("fingerprint", Value::from(fp.as_str())),
            ],
            None => vec![
                ("hostname", Value::from(self.hostname.as_str())),
                ("enc", self.enc_value()),
                ("key", Value::from(self.key.as_str())),
            ],
        };
        if let Some(port) = &self.port {
            out.push(("port", port.clone()));
        }
        map(out)
    }
}

fn entries_value(entries: &[Entry]) -> Value {
    if entries.is_empty() {
        return Value::Nil;
    }
    Value::Array(entries.iter().map(Entry::value).collect())
}

/// Salt's `{"status": "error", "error": ...}` answer.
fn error(text: String) -> Value {
    map([("status", Value::from("error")), ("error", Value::from(text))])
}

/// Salt's `_get_known_hosts_file`: the file's absolute path, or the error answer.
fn hosts_file(config: Option<&str>, user: Option<&str>) -> Result<Result<String, Value>, FnError> {
    let config = match (config, user) {
        (Some(c), _) if !c.is_empty() => c.to_string(),
        (_, Some(_)) => ".ssh/known_hosts".into(),
        _ => "/etc/ssh/ssh_known_hosts".into(),
    };
    if config.starts_with('/') {
        return Ok(Ok(config));
    }
    match user {
        Some(user) => match user_info(user)? {
            Some(info) => Ok(Ok(Path::new(&info.dir).join(&config).display().to_string())),
            None => Ok(Err(error(format!("User {user} does not exist")))),
        },
        None => Ok(Err(error("Cannot determine absolute path to file.".into()))),
    }
}

/// The call's `user` and its known_hosts file, or the error answer.
fn file_of(b: &Bound) -> Result<Result<(Option<String>, String), Value>, FnError> {
    let user = text(b, "user");
    Ok(hosts_file(text(b, "config").as_deref(), user.as_deref())?.map(|full| (user, full)))
}

/// Salt's `_hostname_and_port_to_ssh_hostname`.
fn ssh_hostname(hostname: &str, port: Option<&Value>) -> String {
    match port {
        Some(p) if py_truthy(p) && p.as_i64() != Some(DEFAULT_SSH_PORT) => {
            format!("[{hostname}]:{}", py_str(p))
        }
        _ => hostname.to_string(),
    }
}

/// Salt's `_parse_openssh_output`: the `host enc key` lines whose key is base64.
fn parse_entries(out: &str, hash: Option<&str>) -> Result<Vec<Entry>, FnError> {
    let mut found = Vec::new();
    for line in out.lines() {
        let line = pystr::strip(line);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let [hostname, enc, key] = pystr::split(line)[..] else {
            continue;
        };
        let Some(fp) = fingerprint(key, hash)? else {
            continue;
        };
        found.push(Entry {
            hostname: hostname.into(),
            key: key.into(),
            enc: Some(enc.into()),
            fingerprint: Some(fp),
            port: None,
        });
    }
    Ok(found)
}

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A call's text argument, `None` when missing or empty.
fn text(b: &Bound, key: &str) -> Option<String> {
    b.get(key).filter(|v| py_truthy(v)).map(py_str)
}

/// `ssh-keygen -F host -f file`: the host's entries in the file.
async fn entries_in(full: &str, hostname: &str, port: Option<&Value>, hash: Option<&str>) -> Result<Vec<Entry>, FnError> {
    let host = ssh_hostname(hostname, port);
    let out = run_argv_merged(&argv(&["ssh-keygen", "-F", &host, "-f", full]), &[]).await?;
    parse_entries(out.stdout(), hash)
}

/// `ssh.get_known_host_entries`: the host's entries in a known_hosts file, `None` when
/// there are none.
pub(super) async fn get_known_host_entries(b: &Bound) -> Result<Value, FnError> {
    let (_, full) = match file_of(b)? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    let hostname = b.get("hostname").map(py_str).unwrap_or_default();
    let hash = text(b, "fingerprint_hash_type");
    let found = entries_in(&full, &hostname, b.get("port"), hash.as_deref()).await?;
    Ok(entries_value(&found))
}

/// `ssh-keyscan` of a host (up to five attempts until it answers).
async fn scan(b: &Bound, hostname: &str, enc: Option<&str>, hash: Option<&str>) -> Result<Vec<Entry>, FnError> {
    let mut cmd = argv(&["ssh-keyscan"]);
    if let Some(port) = b.get("port").filter(|p| py_truthy(p)) {
        cmd.extend(["-p".into(), py_str(port)]);
    }
    if let Some(enc) = enc {
        cmd.extend(["-t".into(), enc.into()]);
    }
    if b.get("hash_known_hosts").is_none_or(py_truthy) {
        cmd.push("-H".into());
    }
    let timeout = b.get("timeout").map_or("5".into(), py_str);
    cmd.extend(["-T".into(), timeout, hostname.into()]);
    let mut out = String::new();
    for _ in 0..5 {
        out = run_argv_merged(&cmd, &[]).await?.stdout().to_string();
        if !out.is_empty() {
            break;
        }
    }
    parse_entries(&out, hash)
}

/// `ssh.recv_known_host_entries`: a host's keys as `ssh-keyscan` gets them.
pub(super) async fn recv_known_host_entries(b: &Bound) -> Result<Value, FnError> {
    let hostname = b.get("hostname").map(py_str).unwrap_or_default();
    let enc = text(b, "enc");
    let hash = text(b, "fingerprint_hash_type");
    Ok(entries_value(&scan(b, &hostname, enc.as_deref(), hash.as_deref()).await?))
}

/// `ssh.check_known_host`: `add` (no entry), `exists` or `update` (the entries have neither
/// the key nor the fingerprint asked for).
pub(super) async fn check_known_host(b: &Bound) -> Result<Value, FnError> {
    let Some(hostname) = text(b, "hostname") else {
        return Ok(error("hostname argument required".into()));
    };
    let (_, full) = match file_of(b)? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    let hash = text(b, "fingerprint_hash_type");
    let found = entries_in(&full, &hostname, b.get("port"), hash.as_deref()).await?;
    let answer = if found.is_empty() {
        "add"
    } else if let Some(key) = text(b, "key") {
        if found.iter().any(|e| e.key == key) {
            "exists"
        } else {
            "update"
        }
    } else if let Some(fp) = text(b, "fingerprint") {
        if found.iter().any(|e| e.fingerprint.as_deref() == Some(fp.as_str())) {
            "exists"
        } else {
            "update"
        }
    } else {
        "exists"
    };
    Ok(Value::from(answer))
}

/// Gives the file to the user (root only, as Salt does after ssh-keygen rewrote it).
fn give_to(full: &str, user: Option<&str>) -> Result<(), FnError> {
    if let (true, Some(user)) = (nix::unistd::geteuid().is_root(), user) {
        if let Some(info) = user_info(user)? {
            let id = |n: i64| u32::try_from(n).ok();
            let _ = std::os::unix::fs::chown(full, id(info.uid), id(info.gid));
        }
    }
    Ok(())
}

/// `ssh.rm_known_host`: the host's entries removed with `ssh-keygen -R` (its output is the
/// answer's comment).
pub(super) async fn rm_known_host(b: &Bound) -> Result<Value, FnError> {
    let Some(hostname) = text(b, "hostname") else {
        return Ok(error("hostname argument required".into()));
    };
    let (user, full) = match file_of(b)? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    if !Path::new(&full).is_file() {
        return Ok(error(format!("Known hosts file {full} does not exist")));
    }
    let host = ssh_hostname(&hostname, b.get("port"));
    let out = run_argv_merged(&argv(&["ssh-keygen", "-R", &host, "-f", &full]), &[]).await?;
    give_to(&full, user.as_deref())?;
    Ok(map([
        ("status", Value::from("removed")),
        ("comment", Value::from(out.stdout())),
    ]))
}

/// `ssh.hash_known_hosts`: every host name in the file hashed (`ssh-keygen -H`, which keeps
/// the old file as `<file>.old`).
pub(super) async fn hash_known_hosts(b: &Bound) -> Result<Value, FnError> {
    let (user, full) = match file_of(b)? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    hash_file(&full, user.as_deref()).await
}

async fn hash_file(full: &str, user: Option<&str>) -> Result<Value, FnError> {
    let Some(meta) = file_meta(full) else {
        return Ok(error(format!("Known hosts file {full} does not exist")));
    };
    let out = run_argv_merged(&argv(&["ssh-keygen", "-H", "-f", full]), &[]).await?;
    let _ = std::fs::set_permissions(full, meta.permissions());
    give_to(full, user)?;
    Ok(map([
        ("status", Value::from("updated")),
        ("comment", Value::from(out.stdout())),
    ]))
}

/// A regular file's metadata, `None` for anything else.
fn file_meta(path: &str) -> Option<std::fs::Metadata> {
    std::fs::metadata(path).ok().filter(std::fs::Metadata::is_file)
}

/// Salt's `_get_matched_host_line_numbers`: the line numbers `ssh-keygen -F` reports, of
/// entries of type `enc` when given.
fn matched_lines(out: &str, enc: Option<&str>) -> Result<Vec<usize>, FnError> {
    let lines: Vec<&str> = out.lines().collect();
    let mut numbers = Vec::new();
    for pair in lines.chunks(2) {
        let number = pystr::split(pair[0]).last().copied().unwrap_or_default();
        let number: usize = number.parse().map_err(|_| {
            FnError::Exception(format!(
                "ValueError: invalid literal for int() with base 10: '{number}'"
            ))
        })?;
        let words = pair.get(1).map(|l| pystr::split(l)).unwrap_or_default();
        let line_enc = words.len().checked_sub(2).map(|i| words[i]);
        if enc.is_some_and(|e| Some(e) != line_enc) {
            continue;
        }
        numbers.push(number);
    }
    Ok(numbers)
}

/// `ssh.set_known_host`: the host's entry made or replaced (from `key` and `enc`, else from
/// a scan checked against `fingerprint`); `exists` when it is already there.
pub(super) async fn set_known_host(b: &Bound) -> Result<Value, FnError> {
    let Some(hostname) = text(b, "hostname") else {
        return Ok(error("hostname argument required".into()));
    };
    let port = b.get("port").filter(|p| !p.is_nil());
    let hash_hosts = b.get("hash_known_hosts").is_none_or(py_truthy);
    if port.is_some_and(|p| p.as_i64() != Some(DEFAULT_SSH_PORT)) && hash_hosts {
        return Ok(error(
            "argument port can not be used in conjunction with argument hash_known_hosts".into(),
        ));
    }
    let (key, fp, enc) = (text(b, "key"), text(b, "fingerprint"), text(b, "enc"));
    let hash = text(b, "fingerprint_hash_type");
    let (user, full) = match file_of(b)? {
        Ok(found) => found,
        Err(answer) => return Ok(answer),
    };
    let stored = entries_in(&full, &hostname, port, hash.as_deref()).await?;
    let stored_keys: Vec<&String> = stored
        .iter()
        .filter(|e| enc.is_none() || e.enc == enc)
        .map(|e| &e.key)
        .collect();
    let keys_value = |keys: &[&String]| Value::Array(keys.iter().map(|k| Value::from(k.as_str())).collect());
    let update = stored.is_empty()
        || fp.as_ref().is_some_and(|f| !stored.iter().any(|e| e.fingerprint.as_ref() == Some(f)))
        || key.as_ref().is_some_and(|k| !stored_keys.contains(&k));
    let check = !update && key.is_none() && fp.is_none();
    if !update && !check {
        return Ok(map([("status", Value::from("exists")), ("keys", keys_value(&stored_keys))]));
    }
    let new_entries = match &key {
        Some(key) => vec![Entry {
            hostname: hostname.clone(),
            key: key.clone(),
            enc: enc.clone(),
            fingerprint: None,
            port: None,
        }],
        None => {
            let remote = scan(b, &hostname, enc.as_deref(), hash.as_deref()).await?;
            if remote.is_empty() {
                return Ok(error("Unable to receive remote host keys".into()));
            }
            if fp.as_ref().is_some_and(|f| !remote.iter().any(|e| e.fingerprint.as_ref() == Some(f))) {
                return Ok(error(
                    "Remote host public keys found but none of their fingerprints match the one you have provided".into(),
                ));
            }
            if check {
                let known: std::collections::BTreeSet<&String> = remote.iter().map(|e| &e.key).collect();
                let had: std::collections::BTreeSet<&String> = stored_keys.iter().copied().collect();
                if known == had {
                    return Ok(map([("status", Value::from("exists")), ("keys", keys_value(&stored_keys))]));
                }
            }
            remote
        }
    };
    let path = Path::new(&full);
    let origmode = file_meta(&full).map(|m| m.permissions().mode());
    if origmode.is_some() {
        let host = ssh_hostname(&hostname, port);
        let out = run_argv_merged(&argv(&["ssh-keygen", "-F", &host, "-f", &full]), &[]).await?;
        let mut remove = matched_lines(out.stdout(), enc.as_deref())?;
        if !remove.is_empty() {
            let failed = |e: std::io::Error| {
                FnError::Execution(format!(
                    "Couldn't remove old entry(ies) from known hosts file: '{}'",
                    brine_protocol::pyrepr::os_error(&e, Some(&full))
                ))
            };
            let text = std::fs::read(path).map_err(failed)?;
            let text = String::from_utf8_lossy(&text).into_owned();
            let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
            remove.sort_unstable_by(|a, b| b.cmp(a));
            for n in remove {
                if n >= 1 && n <= lines.len() {
                    lines.remove(n - 1);
                }
            }
            std::fs::write(path, lines.concat()).map_err(failed)?;
        }
    }
    let mut new_entries = new_entries;
    let mut body = String::new();
    for entry in &mut new_entries {
        let plain_port = port.is_none_or(|p| p.as_i64() == Some(DEFAULT_SSH_PORT));
        if hash_hosts || plain_port || entry.hostname.contains(':') {
            body.push_str(&format!("{} {} {}\n", entry.hostname, entry.enc_text(), entry.key));
        } else {
            let p = port.cloned().unwrap_or(Value::Nil);
            body.push_str(&format!(
                "[{}]:{} {} {}\n",
                entry.hostname,
                py_str(&p),
                entry.enc_text(),
                entry.key
            ));
            entry.port = Some(p);
        }
    }
    // The directory made (and given to the user, 0700) when it is missing.
    if let Some(dir) = path.parent().filter(|d| !d.exists()) {
        match std::fs::create_dir_all(dir) {
            Ok(()) => {
                if let Some(info) = user.as_deref().map(user_info).transpose()?.flatten() {
                    let id = |n: i64| u32::try_from(n).ok();
                    let _ = std::os::unix::fs::chown(dir, id(info.uid), id(info.gid));
                    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
                }
            }
            Err(e) => tracing::error!("Unable to create directory {}: {e}", dir.display()),
        }
    }
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .and_then(|mut f| f.write_all(body.as_bytes()).map(|_| f))
            .map_err(|e| {
                FnError::Execution(format!(
                    "Couldn't append to known hosts file: '{}'",
                    brine_protocol::pyrepr::os_error(&e, Some(&full))
                ))
            })?;
        let _ = f.flush();
    }
    give_to(&full, user.as_deref())?;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(origmode.unwrap_or(0o600)));
    if key.is_some() && hash_hosts {
        hash_file(&full, user.as_deref()).await?;
    }
    Ok(map([
        ("status", Value::from("updated")),
        ("old", entries_value(&stored)),
        ("new", Value::Array(new_entries.iter().map(Entry::value).collect())),
    ]))
}
