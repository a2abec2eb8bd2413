//! The `ssh` execution module: users' `authorized_keys` files read into keys with their type,
//! comment, options and fingerprint, and changed line by line as Salt changes them (a new key
//! appended, a changed key's line replaced, a removed key's line dropped), with the host's
//! and users' own key files. Salt's answers are texts (`new`, `replace`, `no change`, `fail`,
//! `Key removed`...), which the `ssh_auth` state reads.
//! The `known_hosts` functions are in [`known_hosts`].

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::OnceLock;

use regex::Regex;
use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::hosts::{os_error, read_error, universal_lines};
use super::user::{find_user, read_users, Passwd};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::crypt::{hash_hex, HashType};
use brine_protocol::payload::{get, map, py_truthy};
use brine_protocol::pystr;
use brine_protocol::pystr::split as py_split;

mod known_hosts;

/// The largest key file read (an `authorized_keys` file, a key `source`).
const MAX_KEY_FILE: u64 = 16 * 1024 * 1024;

/// Where a user's authorized keys are, unless `config` says otherwise.
const AUTHORIZED_KEYS: &str = ".ssh/authorized_keys";

super::spec_table! {
    /// The functions of the `ssh` module.
    HostKeys => ("ssh.host_keys", "host_keys", ["keydir", "private", "certs"], 0, false, false, "
    The minion's host keys (`ssh_host_<type>_key[.pub]` in keydir, /etc/ssh on Linux), by
    type; private=False leaves the private keys out, certs=False the certificates.

    CLI Example:

        salt '*' ssh.host_keys
        salt '*' ssh.host_keys keydir=/etc/ssh private=False
    "),
    AuthKeys => ("ssh.auth_keys", "auth_keys", ["user", "config", "fingerprint_hash_type"], 0, false, false, "
    The keys of a user's authorized keys file (config, relative to the home directory unless
    absolute; %u and %h stand for the user and the home directory): each key with its enc,
    comment, options and fingerprint. A list of users, or none (every user), gives the keys by
    user.

    CLI Example:

        salt '*' ssh.auth_keys root
        salt '*' ssh.auth_keys user=root config=.ssh/authorized_keys2
        salt '*' ssh.auth_keys user=\"['root', 'deploy']\"
    "),
    CheckKeyFile => ("ssh.check_key_file", "check_key_file", ["user", "source", "config", "saltenv", "fingerprint_hash_type"], 2, false, false, "
    What set_auth_key_from_file would do with each key of a key file (a salt:// or local
    source): 'add', 'update' or 'exists', by key.

    CLI Example:

        salt '*' ssh.check_key_file root salt://ssh/keyfile
    "),
    CheckKey => ("ssh.check_key", "check_key", ["user", "key", "enc", "comment", "options", "config", "cache_keys", "fingerprint_hash_type"], 5, false, false, "
    Whether a key must be added ('add'), differs in type, comment or options from the user's
    line for it ('update'), or is there as asked ('exists').

    CLI Example:

        salt '*' ssh.check_key <user> <key> <enc> <comment> <options>
    "),
    RmAuthKeyFromFile => ("ssh.rm_auth_key_from_file", "rm_auth_key_from_file", ["user", "source", "config", "saltenv", "fingerprint_hash_type"], 2, false, false, "
    Remove every key of a key file (a salt:// or local source) from a user's authorized keys.

    CLI Example:

        salt '*' ssh.rm_auth_key_from_file <user> salt://ssh_keys/<user>.id_rsa.pub
    "),
    RmAuthKey => ("ssh.rm_auth_key", "rm_auth_key", ["user", "key", "config", "fingerprint_hash_type"], 2, false, false, "
    Remove a key (its base64 text) from a user's authorized keys: 'Key removed', 'Key not
    present' or 'Key not removed'.

    CLI Example:

        salt '*' ssh.rm_auth_key <user> <key>
    "),
    SetAuthKeyFromFile => ("ssh.set_auth_key_from_file", "set_auth_key_from_file", ["user", "source", "config", "saltenv", "fingerprint_hash_type"], 2, false, true, "
    Add or update every key of a key file (a salt:// or local source) in a user's authorized
    keys; options=[...] replaces the options of every key.

    CLI Example:

        salt '*' ssh.set_auth_key_from_file <user> salt://ssh_keys/<user>.id_rsa.pub
    "),
    SetAuthKey => ("ssh.set_auth_key", "set_auth_key", ["user", "key", "enc", "comment", "options", "config", "cache_keys", "fingerprint_hash_type"], 2, false, false, "
    Add a key (only its base64 text) to a user's authorized keys, or replace the user's line
    for it when its type, comment or options differ: 'new', 'replace', 'no change', 'fail',
    'invalid' (the key has spaces) or 'Invalid public key' (not base64).

    CLI Example:

        salt '*' ssh.set_auth_key <user> '<key>' enc='dsa'
    "),
    UserKeys => ("ssh.user_keys", "user_keys", ["user", "pubfile", "prvfile"], 0, false, false, "
    The users' own key files (id_rsa, id_dsa, id_ecdsa, id_ed25519 and their .pub, in ~/.ssh),
    by user; pubfile and prvfile name other files, or False to leave that kind out.

    CLI Example:

        salt '*' ssh.user_keys
        salt '*' ssh.user_keys user=user1 prvfile=False
    "),
    GetKnownHostEntries => ("ssh.get_known_host_entries", "get_known_host_entries", ["user", "hostname", "config", "port", "fingerprint_hash_type"], 2, false, false, "
    The entries of a host in a known_hosts file (ssh-keygen -F): hostname, key, enc and
    fingerprint each; None when there are none. Without a user, config defaults to
    /etc/ssh/ssh_known_hosts, with one to ~/.ssh/known_hosts.

    CLI Example:

        salt '*' ssh.get_known_host_entries root github.com
    "),
    RecvKnownHostEntries => ("ssh.recv_known_host_entries", "recv_known_host_entries", ["hostname", "enc", "port", "hash_known_hosts", "timeout", "fingerprint_hash_type"], 1, false, false, "
    A host's keys as ssh-keyscan receives them (hashed host names unless
    hash_known_hosts=False); None when it gives none.

    CLI Example:

        salt '*' ssh.recv_known_host_entries github.com enc=ssh-ed25519
    "),
    CheckKnownHost => ("ssh.check_known_host", "check_known_host", ["user", "hostname", "key", "fingerprint", "config", "port", "fingerprint_hash_type"], 0, false, false, "
    Whether a host is in a known_hosts file: add (no entry), exists, or update (its
    entries have neither the key nor the fingerprint given).

    CLI Example:

        salt '*' ssh.check_known_host root github.com key='AAAA...'
    "),
    RmKnownHost => ("ssh.rm_known_host", "rm_known_host", ["user", "hostname", "config", "port"], 0, false, false, "
    Remove a host's entries from a known_hosts file (ssh-keygen -R).

    CLI Example:

        salt '*' ssh.rm_known_host root github.com
    "),
    SetKnownHost => ("ssh.set_known_host", "set_known_host", ["user", "hostname", "fingerprint", "key", "port", "enc", "config", "hash_known_hosts", "timeout", "fingerprint_hash_type"], 0, false, false, "
    Make or replace a host's entry in a known_hosts file: from key and enc, else from
    the keys ssh-keyscan receives (checked against fingerprint when given). Host names are
    hashed unless hash_known_hosts=False.

    CLI Example:

        salt '*' ssh.set_known_host root github.com enc=ssh-ed25519 key='AAAA...'
    "),
    HashKnownHosts => ("ssh.hash_known_hosts", "hash_known_hosts", ["user", "config"], 0, false, false, "
    Hash every host name of a known_hosts file (ssh-keygen -H; the old file is kept as
    <file>.old).

    CLI Example:

        salt '*' ssh.hash_known_hosts root
    "),
    KeyIsEncrypted => ("ssh.key_is_encrypted", "key_is_encrypted", ["key"], 1, false, false, "
    Whether a private key file is encrypted with a passphrase.

    CLI Example:

        salt '*' ssh.key_is_encrypted /root/id_rsa
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let text = |key: &str, default: &str| b.get(key).map_or(default.to_string(), py_str);
        let config = text("config", AUTHORIZED_KEYS);
        let hash = b.opt("fingerprint_hash_type").map(py_str);
        let hash = hash.as_deref();
        let user = text("user", "");
        match self {
            Fun::HostKeys => host_keys(ctx, b),
            Fun::AuthKeys => auth_keys_of(b.get("user"), &config, hash),
            Fun::CheckKey => {
                let line = Line::asked(b)?;
                Ok(Value::from(check_key(&user, &line, &config, hash)?))
            }
            Fun::SetAuthKey => {
                let line = Line::asked(b)?;
                Ok(Value::from(set_auth_key(&user, &line, &config, hash)?))
            }
            Fun::RmAuthKey => Ok(Value::from(rm_auth_key(
                &user,
                &text("key", ""),
                &config,
                hash,
            )?)),
            Fun::CheckKeyFile => {
                let Some(path) = cache(ctx, b).await? else {
                    return Ok(Value::Map(Vec::new()));
                };
                let keys = validate_keys(&path, hash)?;
                if keys.is_empty() {
                    tracing::error!("{}", no_keys(&text("source", "")));
                    return Ok(Value::Map(Vec::new()));
                }
                let mut out = Vec::new();
                for (key, found) in keys {
                    let status = check_key(&user, &found.line(&key), &config, hash)?;
                    out.push((Value::from(key), Value::from(status)));
                }
                Ok(Value::Map(out))
            }
            Fun::SetAuthKeyFromFile | Fun::RmAuthKeyFromFile => {
                let path = cache(ctx, b).await?.ok_or_else(|| {
                    FnError::Execution("Failed to pull key file from salt file server".into())
                })?;
                let keys = validate_keys(&path, hash)?;
                if keys.is_empty() {
                    tracing::error!("{}", no_keys(&text("source", "")));
                    return Ok(Value::from("fail"));
                }
                let mut said = Vec::new();
                for (key, found) in keys {
                    said.push(if self == Fun::RmAuthKeyFromFile {
                        rm_auth_key(&user, &key, &config, hash)?
                    } else {
                        let mut line = found.line(&key);
                        if let Some(options) = b.kwarg("options").filter(|o| py_truthy(o)) {
                            line.options = py_list(options);
                        }
                        set_auth_key(&user, &line, &config, hash)?.to_string()
                    });
                }
                let said = said.concat();
                let pick = |order: &[&'static str], otherwise: &'static str| {
                    order
                        .iter()
                        .find(|s| said.contains(*s))
                        .copied()
                        .unwrap_or(otherwise)
                };
                Ok(Value::from(if self == Fun::RmAuthKeyFromFile {
                    pick(&["Key not removed", "Key removed"], "Key not present")
                } else {
                    pick(&["fail", "replace", "new"], "no change")
                }))
            }
            Fun::UserKeys => user_keys(b),
            Fun::GetKnownHostEntries => known_hosts::get_known_host_entries(b).await,
            Fun::RecvKnownHostEntries => known_hosts::recv_known_host_entries(b).await,
            Fun::CheckKnownHost => known_hosts::check_known_host(b).await,
            Fun::RmKnownHost => known_hosts::rm_known_host(b).await,
            Fun::SetKnownHost => known_hosts::set_known_host(b).await,
            Fun::HashKnownHosts => known_hosts::hash_known_hosts(b).await,
            Fun::KeyIsEncrypted => {
                let path = text("key", "");
                let data = read_text(&path).map_err(|e| read_error(&e, &path))?;
                static PRIVATE: OnceLock<Regex> = OnceLock::new();
                let private = PRIVATE
                    .get_or_init(|| Regex::new(r"BEGIN (?:\w+\s)*PRIVATE KEY").expect("regex"));
                if !private.is_match(&data) {
                    return Err(FnError::Execution(format!("{path} is not a private key")));
                }
                Ok(Value::Boolean(data.contains("ENCRYPTED")))
            }
        }
    }
}

/// The error Salt logs (and its `ssh_auth` state shows) for a key file without keys.
fn no_keys(source: &str) -> String {
    format!("No keys detected in {source}. Is file properly formatted?")
}

/// The call's `source` cached as `cp.cache_file` caches it: its local path, `None` when
/// there is no such file.
async fn cache(ctx: &Context, b: &Bound) -> Result<Option<String>, FnError> {
    let source = b.get("source").cloned().unwrap_or(Value::Nil);
    let saltenv = b.get("saltenv").cloned().unwrap_or(Value::from("base"));
    let cached = super::cache_file(ctx, source, saltenv).await?;
    Ok(cached.filter(|p| Path::new(p).is_file()))
}

/// A Python list argument as texts (a text is a list of its characters, as `",".join`
/// takes it).
fn py_list(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(py_str).collect(),
        Value::Nil => Vec::new(),
        Value::String(_) => py_str(v).chars().map(String::from).collect(),
        other => vec![py_str(other)],
    }
}

/// One line of an authorized keys file as asked for or as found.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    key: String,
    enc: String,
    comment: String,
    options: Vec<String>,
}

impl Line {
    /// The line a call asks for (`key`, `enc`, `comment`, `options`), not yet checked.
    fn asked(b: &Bound) -> Result<Line, FnError> {
        Ok(Line {
            key: b.get("key").map(py_str).unwrap_or_default(),
            enc: b.get("enc").map_or("ssh-rsa".into(), py_str),
            comment: b.get("comment").map_or(String::new(), py_str),
            options: b.get("options").map(py_list).unwrap_or_default(),
        })
    }

    /// Salt's `_format_auth_line`: `[options ]enc key comment\n`.
    fn format(&self) -> String {
        let mut line = String::new();
        if !self.options.is_empty() {
            line.push_str(&self.options.join(","));
            line.push(' ');
        }
        line.push_str(&format!("{} {} {}\n", self.enc, self.key, self.comment));
        line
    }
}

/// A key as an authorized keys file has it.
#[derive(Debug, Clone)]
struct Found {
    enc: String,
    comment: String,
    options: Vec<String>,
    fingerprint: String,
}

impl Found {
    fn line(&self, key: &str) -> Line {
        Line {
            key: key.to_string(),
            enc: self.enc.clone(),
            comment: self.comment.clone(),
            options: self.options.clone(),
        }
    }

    fn to_value(&self) -> Value {
        map([
            ("enc", Value::from(self.enc.as_str())),
            ("comment", Value::from(self.comment.as_str())),
            (
                "options",
                Value::Array(
                    self.options
                        .iter()
                        .map(|o| Value::from(o.as_str()))
                        .collect(),
                ),
            ),
            ("fingerprint", Value::from(self.fingerprint.as_str())),
        ])
    }
}

/// Salt's `_refine_enc`: a key type's full name from its short forms.
fn refine_enc(enc: &str) -> Result<String, FnError> {
    const ALSO: &[&str] = &[
        "rsa-sha2-512",
        "rsa-sha2-256",
        "rsa-sha2-512-cert-v01@openssh.com",
        "rsa-sha2-256-cert-v01@openssh.com",
        "ssh-rsa-cert-v01@openssh.com",
        "ecdsa-sha2-nistp256-cert-v01@openssh.com",
        "ecdsa-sha2-nistp384-cert-v01@openssh.com",
        "ecdsa-sha2-nistp521-cert-v01@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
        "ssh-ed25519-cert-v01@openssh.com",
        "sk-ssh-ed25519@openssh.com",
        "sk-ssh-ed25519-cert-v01@openssh.com",
    ];
    Ok(match enc {
        "r" | "rsa" | "ssh-rsa" => "ssh-rsa",
        "d" | "dsa" | "dss" | "ssh-dss" => "ssh-dss",
        "e" | "ecdsa" => "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp521" | "ecdsa-sha2-nistp384" | "ecdsa-sha2-nistp256" => enc,
        "ed25519" | "ssh-ed25519" => "ssh-ed25519",
        _ if ALSO.contains(&enc) => enc,
        _ => {
            return Err(FnError::Execution(format!(
                "Incorrect encryption key type '{enc}'."
            )))
        }
    }
    .to_string())
}

/// Python's `base64.b64decode(text, validate=True)`: `None` where Python raises
/// `binascii.Error`.
fn b64decode_strict(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let data = text.trim_end_matches('=');
    let pads = text.len() - data.len();
    if pads > 2
        || !data
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
    {
        return None;
    }
    match (data.len() % 4, pads) {
        (1, _) | (2, 0 | 1) | (3, 0) => return None,
        _ => {}
    }
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(data)
        .ok()
}

/// Salt's `_fingerprint`: the hex digest of the decoded key in `xx:xx:...` form (sha256
/// unless `hash` names another hashlib function); `None` for a key that is not base64.
fn fingerprint(key: &str, hash: Option<&str>) -> Result<Option<String>, FnError> {
    let name = hash.unwrap_or("sha256").to_lowercase();
    let kind = HashType::parse(&name).ok_or_else(|| {
        FnError::Execution(format!(
            "The fingerprint_hash_type {name} is not supported."
        ))
    })?;
    let Some(raw) = b64decode_strict(key) else {
        return Ok(None);
    };
    let hex = hash_hex(&raw, kind);
    let pairs: Vec<&str> = hex
        .as_bytes()
        .chunks(2)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    Ok(Some(pairs.join(":")))
}

/// A text file read whole (bounded), as Python reads it in text mode.
fn read_text(path: &str) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_KEY_FILE + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_KEY_FILE {
        return Err(std::io::Error::other(format!(
            "{path} is larger than {MAX_KEY_FILE} bytes"
        )));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The lines of a key file as Salt walks them: stripped, blank ones left out.
fn key_lines(text: &str) -> impl Iterator<Item = &str> {
    universal_lines(text)
        .map(|l| l.trim_matches(pystr::is_space))
        .filter(|l| !l.is_empty())
}

/// `{options} {enc} {key} {comment}` (Salt's pattern for a key line).
fn line_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^(.*?)\s?((?:sk-)?(?:ssh\-|ecds)[\w@.-]+\s.+)$").expect("regex"))
}

/// Salt's `_validate_keys`: the keys of a file, in the order they first appear (a key listed
/// twice keeps its last line's details).
fn validate_keys(path: &str, hash: Option<&str>) -> Result<Vec<(String, Found)>, FnError> {
    let text = read_text(path)
        .map_err(|_| FnError::Execution(format!("Problem reading ssh key file {path}")))?;
    let mut keys: Vec<(String, Found)> = Vec::new();
    for line in key_lines(&text).filter(|l| !l.starts_with('#')) {
        let Some(caps) = line_re().captures(line) else {
            continue;
        };
        let opts = caps.get(1).map_or("", |m| m.as_str());
        let comps = py_split(caps.get(2).map_or("", |m| m.as_str()));
        if comps.len() < 2 {
            continue;
        }
        let Some(fingerprint) = fingerprint(comps[1], hash)? else {
            continue;
        };
        let found = Found {
            enc: comps[0].to_string(),
            comment: comps[2..].join(" "),
            options: if opts.is_empty() {
                Vec::new()
            } else {
                opts.split(',').map(str::to_string).collect()
            },
            fingerprint,
        };
        match keys.iter_mut().find(|(k, _)| k == comps[1]) {
            Some((_, old)) => *old = found,
            None => keys.push((comps[1].to_string(), found)),
        }
    }
    Ok(keys)
}

/// Salt's `_expand_authorized_keys_path`: `%u`, `%h` and `%%` in an `AuthorizedKeysFile`
/// path.
fn expand_path(path: &str, user: &str, home: &str) -> Result<String, FnError> {
    let mut out = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('u') => out.push_str(user),
            Some('h') => out.push_str(home),
            Some(other) => {
                return Err(FnError::Execution(format!(
                    "AuthorizedKeysFile path: unknown token character \"%{other}\""
                )))
            }
            None => {
                return Err(FnError::Execution(
                    "AuthorizedKeysFile path: Last character can't be escape character".into(),
                ))
            }
        }
    }
    Ok(out)
}

/// A user by name, `None` when there is none.
fn user_info(user: &str) -> Result<Option<Passwd>, FnError> {
    find_user(user, None)
}

/// Salt's `_get_config_file`: the absolute path of a user's authorized keys file.
fn config_file(user: &str, config: &str) -> Result<(Passwd, String), FnError> {
    let info = user_info(user)?
        .ok_or_else(|| FnError::Execution(format!("User '{user}' does not exist")))?;
    let path = expand_path(config, user, &info.dir)?;
    let path = if path.starts_with('/') {
        path
    } else {
        Path::new(&info.dir).join(path).display().to_string()
    };
    Ok((info, path))
}

/// One user's keys (none when the user or the file is missing).
fn auth_keys(
    user: &str,
    config: &str,
    hash: Option<&str>,
) -> Result<Vec<(String, Found)>, FnError> {
    match config_file(user, config) {
        Ok((_, path)) if Path::new(&path).is_file() => validate_keys(&path, hash),
        _ => Ok(Vec::new()),
    }
}

fn keys_value(keys: &[(String, Found)]) -> Value {
    Value::Map(
        keys.iter()
            .map(|(k, f)| (Value::from(k.as_str()), f.to_value()))
            .collect(),
    )
}

/// `ssh.auth_keys`: one user's keys, or (for a list of users, or none) the keys by user.
fn auth_keys_of(user: Option<&Value>, config: &str, hash: Option<&str>) -> Result<Value, FnError> {
    let users: Vec<String> = match user {
        Some(Value::Array(items)) => items.iter().map(py_str).collect(),
        Some(u) if py_truthy(u) => {
            return Ok(keys_value(&auth_keys(&py_str(u), config, hash)?));
        }
        _ => {
            let mut names: Vec<String> = read_users(None)?.into_iter().map(|u| u.name).collect();
            names.sort();
            names
        }
    };
    let mut out = Vec::new();
    for user in users {
        let Ok((_, path)) = config_file(&user, config) else {
            continue;
        };
        if Path::new(&path).is_file() {
            out.push((Value::from(user), keys_value(&validate_keys(&path, hash)?)));
        }
    }
    Ok(Value::Map(out))
}

/// Salt's `check_key`: `add`, `update` or `exists`.
fn check_key(
    user: &str,
    line: &Line,
    config: &str,
    hash: Option<&str>,
) -> Result<&'static str, FnError> {
    let asked = Line {
        enc: refine_enc(&line.enc)?,
        ..line.clone()
    };
    let current = auth_keys(user, config, hash)?;
    Ok(match current.iter().find(|(k, _)| *k == line.key) {
        None => "add",
        Some((key, found)) if found.line(key).format() != asked.format() => "update",
        Some(_) => "exists",
    })
}

/// Salt's `set_auth_key`.
fn set_auth_key(
    user: &str,
    line: &Line,
    config: &str,
    hash: Option<&str>,
) -> Result<&'static str, FnError> {
    if py_split(&line.key).len() > 1 {
        return Ok("invalid");
    }
    let line = Line {
        enc: refine_enc(&line.enc)?,
        ..line.clone()
    };
    let Some(info) = user_info(user)? else {
        return Ok("fail");
    };
    if fingerprint(&line.key, hash)?.is_none() {
        return Ok("Invalid public key");
    }
    match check_key(user, &line, config, hash)? {
        "update" => {
            replace_auth_key(user, &line, config)?;
            return Ok("replace");
        }
        "exists" => return Ok("no change"),
        _ => {}
    }
    let (_, path) = config_file(user, config)?;
    if path.starts_with(&info.dir) && !Path::new(&info.dir).is_dir() {
        return Ok("fail");
    }
    let write_error = |e: std::io::Error| {
        FnError::Execution(format!(
            "Could not write to key file: {}",
            brine_protocol::pyrepr::os_error(&e, Some(&path))
        ))
    };
    let dir = Path::new(&path).parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(|e| os_error(&e, &dir.display().to_string()))?;
        own(dir, &info, 0o700);
        restorecon(dir);
    }
    let new_file = !Path::new(&path).is_file();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .read(true)
        .create(true)
        .open(&path)
        .map_err(write_error)?;
    if !new_file {
        let len = file.metadata().map_err(write_error)?.len();
        if len > 0 {
            use std::io::{Read as _, Seek as _, SeekFrom};
            let mut last = [0u8];
            file.seek(SeekFrom::End(-1)).map_err(write_error)?;
            file.read_exact(&mut last).map_err(write_error)?;
            if last[0] != b'\n' {
                file.write_all(b"\n").map_err(write_error)?;
            }
        }
    }
    file.write_all(line.format().as_bytes())
        .map_err(write_error)?;
    if new_file {
        own(Path::new(&path), &info, 0o600);
        restorecon(Path::new(&path));
    }
    Ok("new")
}


/// A new file or directory given to the user (when running as root) with `mode`.
fn own(path: &Path, info: &Passwd, mode: u32) {
    if nix::unistd::geteuid().is_root() {
        let uid = u32::try_from(info.uid).ok().map(nix::unistd::Uid::from_raw);
        let gid = u32::try_from(info.gid).ok().map(nix::unistd::Gid::from_raw);
        if let Err(e) = nix::unistd::chown(path, uid, gid) {
            tracing::warn!("Could not chown {}: {e}", path.display());
        }
    }
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
        tracing::warn!("Could not chmod {}: {e}", path.display());
    }
}

/// SELinux labels for a new path, where `restorecon` exists (as Salt runs it).
fn restorecon(path: &Path) {
    if let Some(rcon) = brine_render::which("restorecon") {
        let _ = std::process::Command::new(rcon)
            .arg(path)
            .stdin(std::process::Stdio::null())
            .status();
    }
}

/// The key pattern of Salt's `_replace_auth_key`.
fn replace_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"((.*)\s)?((?:sk-)?(?:ssh|ecdsa)-[a-z0-9@.-]+)\s([a-zA-Z0-9+/]+={0,2})(\s(.*))?",
        )
        .expect("regex")
    })
}

/// Salt's `_replace_auth_key`: the file written again with the key's line replaced (blank
/// lines dropped).
fn replace_auth_key(user: &str, line: &Line, config: &str) -> Result<(), FnError> {
    let (_, path) = config_file(user, config)?;
    let problem = |e: std::io::Error| {
        FnError::Execution(format!(
            "Problem reading or writing to key file: {}",
            brine_protocol::pyrepr::os_error(&e, Some(&path))
        ))
    };
    let text = read_text(&path).map_err(problem)?;
    let mut out = String::new();
    for l in key_lines(&text) {
        let l = format!("{l}\n");
        let ours = !l.starts_with('#')
            && replace_re()
                .captures(&l)
                .and_then(|c| c.get(4))
                .is_some_and(|k| k.as_str() == line.key);
        if ours {
            out.push_str(&line.format());
        } else {
            out.push_str(&l);
        }
    }
    std::fs::write(&path, out).map_err(problem)
}

/// Salt's `rm_auth_key`.
fn rm_auth_key(user: &str, key: &str, config: &str, hash: Option<&str>) -> Result<String, FnError> {
    if !auth_keys(user, config, hash)?.iter().any(|(k, _)| k == key) {
        return Ok("Key not present".into());
    }
    let (_, path) = config_file(user, config)?;
    if !Path::new(&path).is_file() {
        return Ok(format!("Authorized keys file {path} not present"));
    }
    let Ok(text) = read_text(&path) else {
        tracing::warn!("Could not read/write key file: {path}");
        return Ok("Key not removed".into());
    };
    let mut out = String::new();
    for l in key_lines(&text) {
        if l.starts_with('#') {
            out.push_str(l);
            out.push('\n');
            continue;
        }
        let Some(caps) = line_re().captures(l) else {
            continue;
        };
        let comps = py_split(caps.get(2).map_or("", |m| m.as_str()));
        if comps.len() >= 2 && comps[1] == key {
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    if let Err(e) = std::fs::write(&path, out) {
        tracing::warn!("Could not read/write key file: {e}");
        return Ok("Key not removed".into());
    }
    Ok("Key removed".into())
}

/// `ssh.host_keys`.
fn host_keys(ctx: &Context, b: &Bound) -> Result<Value, FnError> {
    let keydir = match b.opt("keydir").map(py_str).filter(|d| !d.is_empty()) {
        Some(dir) => dir,
        None if get(&ctx.grains, "kernel").and_then(Value::as_str) == Some("Linux") => {
            "/etc/ssh".into()
        }
        None => {
            return Err(FnError::Invocation(
                "ssh.host_keys: Please specify a keydir".into(),
            ))
        }
    };
    let not_false = |key: &str| !matches!(b.get(key), Some(Value::Boolean(false)));
    let (private, certs) = (not_false("private"), not_false("certs"));
    static NAME: OnceLock<Regex> = OnceLock::new();
    let name_re = NAME.get_or_init(|| {
        Regex::new(r"^ssh_host_(?P<type>.+)_key(?P<pub>(?P<cert>-cert)?\.pub)?").expect("regex")
    });
    let entries = std::fs::read_dir(&keydir).map_err(|e| os_error(&e, &keydir))?;
    let mut keys = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(m) = name_re.captures(&file_name) else {
            continue;
        };
        let public = m.name("pub").map(|p| p.as_str());
        if (public.is_none() && !private) || (m.name("cert").is_some() && !certs) {
            continue;
        }
        let kname = format!("{}{}", &m["type"], public.unwrap_or(""));
        let text = read_text(&entry.path().display().to_string()).unwrap_or_default();
        // The legacy binary format: only its first line.
        let text = match text.split_inclusive('\n').next() {
            Some(first) if first == "SSH PRIVATE KEY FILE FORMAT 1.1\n" => first.to_string(),
            _ => text,
        };
        keys.push((kname, pystr::strip(&text).to_string()));
    }
    let mut out: Vec<(Value, Value)> = Vec::new();
    for (k, v) in keys {
        match out
            .iter_mut()
            .find(|(key, _)| key.as_str() == Some(k.as_str()))
        {
            Some((_, old)) => *old = Value::from(v),
            None => out.push((Value::from(k), Value::from(v))),
        }
    }
    Ok(Value::Map(out))
}

/// `ssh.user_keys`.
fn user_keys(b: &Bound) -> Result<Value, FnError> {
    let users: Vec<String> = match b.get("user") {
        Some(Value::Array(items)) => items.iter().map(py_str).collect(),
        Some(u) if py_truthy(u) => vec![py_str(u)],
        _ => {
            let mut names: Vec<String> = read_users(None)?.into_iter().map(|u| u.name).collect();
            names.sort();
            names
        }
    };
    let files = |key: &str, defaults: [&str; 4]| -> Vec<String> {
        match b.get(key) {
            Some(Value::Boolean(false)) => Vec::new(),
            Some(v) if py_truthy(v) => vec![py_str(v)],
            _ => defaults.iter().map(|s| s.to_string()).collect(),
        }
    };
    let mut wanted = files(
        "pubfile",
        ["id_rsa.pub", "id_dsa.pub", "id_ecdsa.pub", "id_ed25519.pub"],
    );
    wanted.extend(files(
        "prvfile",
        ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"],
    ));
    let mut out = Vec::new();
    for user in users {
        let Some(info) = user_info(&user)? else {
            continue;
        };
        let mut keys: Vec<(Value, Value)> = Vec::new();
        for file in &wanted {
            let (name, path) = match file.strip_prefix('/') {
                Some(_) => (
                    Path::new(file)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    file.clone(),
                ),
                None => (file.clone(), format!("{}/.ssh/{file}", info.dir)),
            };
            if !Path::new(&path).exists() {
                continue;
            }
            if let Ok(text) = read_text(&path) {
                let text = pystr::strip(&text).to_string();
                match keys
                    .iter_mut()
                    .find(|(k, _)| k.as_str() == Some(name.as_str()))
                {
                    Some((_, old)) => *old = Value::from(text),
                    None => keys.push((Value::from(name), Value::from(text))),
                }
            }
        }
        if !keys.is_empty() {
            out.push((Value::from(user), Value::Map(keys)));
        }
    }
    Ok(Value::Map(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_checked_as_pythons_validate() {
        assert_eq!(b64decode_strict("QUJD"), Some(b"ABC".to_vec()));
        assert_eq!(b64decode_strict("QQ=="), Some(b"A".to_vec()));
        assert_eq!(b64decode_strict("QUI="), Some(b"AB".to_vec()));
        assert_eq!(b64decode_strict(""), Some(Vec::new()));
        for bad in ["QQ", "QQ=", "Q", "QUJDR", "QU JD", "QUJD===", "QU=D", "QUI"] {
            assert_eq!(b64decode_strict(bad), None, "{bad}");
        }
    }

    #[test]
    fn fingerprints_are_colon_separated_hex() {
        assert_eq!(
            fingerprint("QUJD", Some("md5")).unwrap().unwrap(),
            "90:2f:bd:d2:b1:df:0c:4f:70:b4:a5:d2:35:25:e9:32"
        );
        assert_eq!(fingerprint("not base64!", None).unwrap(), None);
        assert!(fingerprint("QUJD", Some("whirlpool")).is_err());
    }

    #[test]
    fn key_lines_split_options_type_key_and_comment() {
        let caps = line_re()
            .captures(r#"no-pty,command="ls" ssh-ed25519 AAAAC3Nz a comment"#)
            .unwrap();
        assert_eq!(&caps[1], r#"no-pty,command="ls""#);
        assert_eq!(&caps[2], "ssh-ed25519 AAAAC3Nz a comment");
        let caps = replace_re()
            .captures("from=\"x\" ssh-rsa AAAA+/== me@h\n")
            .unwrap();
        assert_eq!(&caps[4], "AAAA+/==");
    }

    #[test]
    fn paths_expand_tokens_as_sshd_does() {
        assert_eq!(
            expand_path("%h/.ssh/keys_%u%%", "bob", "/home/bob").unwrap(),
            "/home/bob/.ssh/keys_bob%"
        );
        assert!(expand_path("%x", "bob", "/h").is_err());
        assert!(expand_path("a%", "bob", "/h").is_err());
    }

    #[test]
    fn short_key_types_are_refined() {
        assert_eq!(refine_enc("dsa").unwrap(), "ssh-dss");
        assert_eq!(refine_enc("e").unwrap(), "ecdsa-sha2-nistp256");
        assert_eq!(refine_enc("ed25519").unwrap(), "ssh-ed25519");
        assert_eq!(
            refine_enc("x").unwrap_err().to_string(),
            "Incorrect encryption key type 'x'."
        );
    }
}
