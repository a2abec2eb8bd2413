//! The `hosts` execution module: the hosts file (the `hosts.file` option, found as Salt's
//! `config.option` finds it, `/etc/hosts` by default) read into addresses with their aliases
//! and comments, and changed as Salt changes it: `set_host` and `rm_host` edit the lines in
//! place, `add_host` and `set_comment` write the whole file again from what was read (blank
//! lines dropped, the lines of one address merged).

use std::path::Path;

use rmpv::Value;

use super::args::{py_str, py_type, Bound, Signature, py_type_name};
use brine_protocol::pystr::{is_space as py_space, split as py_split};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::payload::{map, py_truthy};

/// The option naming the hosts file.
const OPTION: &str = "hosts.file";

super::spec_table! {
    /// The functions of the `hosts` module.
    ListHosts => ("hosts.list_hosts", "list_hosts", [], 0, false, false, "
    The hosts file as a dict: each address with its 'aliases' (and 'comment', when its line
    has one); each comment line as 'comment-<n>'.

    CLI Example:

        salt '*' hosts.list_hosts
    "),
    GetIp => ("hosts.get_ip", "get_ip", ["host"], 1, false, false, "
    The address of a host name in the hosts file; an empty string when it has none.

    CLI Example:

        salt '*' hosts.get_ip <hostname>
    "),
    GetAlias => ("hosts.get_alias", "get_alias", ["ip"], 1, false, false, "
    The host names of an address, in the order of the hosts file; an empty list when it has
    none.

    CLI Example:

        salt '*' hosts.get_alias <ip addr>
    "),
    HasPair => ("hosts.has_pair", "has_pair", ["ip", "alias"], 2, false, false, "
    Whether the hosts file gives an address this host name (or all of a list of names).

    CLI Example:

        salt '*' hosts.has_pair <ip> <alias>
    "),
    SetHost => ("hosts.set_host", "set_host", ["ip", "alias", "comment"], 2, false, false, "
    Make alias (one or more space-separated names) the only names of an address: its first
    line is replaced, its other lines removed. An empty alias removes the address.

    CLI Example:

        salt '*' hosts.set_host <ip> <alias>
    "),
    RmHost => ("hosts.rm_host", "rm_host", ["ip", "alias"], 2, false, false, "
    Remove a host name from an address; a line left without names is removed.

    CLI Example:

        salt '*' hosts.rm_host <ip> <alias>
    "),
    AddHost => ("hosts.add_host", "add_host", ["ip", "alias"], 2, false, false, "
    Add a host name to an address, adding the address when the hosts file lacks it.

    CLI Example:

        salt '*' hosts.add_host <ip> <alias>
    "),
    SetComment => ("hosts.set_comment", "set_comment", ["ip", "comment"], 2, false, false, "
    Set the comment of an address; False when the hosts file lacks the address.

    CLI Example:

        salt '*' hosts.set_comment <ip> <comment>
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let arg = |key: &str| b.get(key).cloned().unwrap_or(Value::Nil);
        let file = HostsFile::of(ctx)?;
        match self {
            Fun::ListHosts => Ok(file.read()?.to_value()),
            Fun::GetIp => Ok(Value::from(file.read()?.ip_of(&arg("host")))),
            Fun::GetAlias => file.read()?.aliases_of(&arg("ip")),
            Fun::HasPair => file
                .read()?
                .has_pair(&arg("ip"), &arg("alias"))
                .map(Value::Boolean),
            Fun::SetHost => file
                .set_host(&arg("ip"), &arg("alias"), &arg("comment"))
                .map(Value::Boolean),
            Fun::RmHost => file.rm_host(&arg("ip"), &arg("alias")).map(Value::Boolean),
            Fun::AddHost => file.add_host(&arg("ip"), &arg("alias")).map(Value::Boolean),
            Fun::SetComment => file
                .set_comment(&arg("ip"), &arg("comment"))
                .map(Value::Boolean),
        }
    }
}

/// Python's `OSError` as an exception text: `FileNotFoundError: [Errno 2] ...: 'path'`.
pub(crate) fn os_error(e: &std::io::Error, path: &str) -> FnError {
    FnError::Exception(brine_protocol::pyrepr::os_exception(e, Some(path)))
}

/// The system's text for an OS error, without Rust's ` (os error N)`.
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .unwrap_or(&text)
            .to_string(),
        None => text,
    }
}

/// Salt's `process_read_exception` for a file that exists but cannot be read.
pub(crate) fn read_error(e: &std::io::Error, path: &str) -> FnError {
    match e.raw_os_error() {
        Some(libc::ENOENT) => FnError::Execution(format!("{path} does not exist")),
        Some(libc::EACCES) => FnError::Execution(format!("Permission denied reading from {path}")),
        Some(code) => FnError::Execution(format!(
            "Error {code} encountered reading from {path}: {}",
            strerror(e)
        )),
        None => FnError::Execution(format!("Error encountered reading from {path}: {e}")),
    }
}

/// What a line of the hosts file says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    /// A comment line (listed as `comment-<n>`).
    Comment(Vec<String>),
    /// An address: its names, and the comment after them.
    Address {
        aliases: Vec<String>,
        comment: Option<String>,
    },
}

/// The hosts file as Salt's `_list_hosts` reads it: entries by address (or `comment-<n>`),
/// in the order they first appear.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Hosts {
    entries: Vec<(String, Entry)>,
}

/// Text split at `\n`, `\r\n` and `\r` (Python's universal newlines).
pub(crate) fn universal_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match rest.find(['\n', '\r']) {
            Some(i) => {
                let line = &rest[..i];
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
                Some(line)
            }
            None => {
                let line = rest;
                rest = "";
                Some(line)
            }
        }
    })
}

/// Python's `bytes.isspace()` for one byte.
fn byte_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
}

/// Python's `bytes.strip()`.
fn strip_bytes(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if !byte_space(*first) {
            break;
        }
        b = rest;
    }
    while let [rest @ .., last] = b {
        if !byte_space(*last) {
            break;
        }
        b = rest;
    }
    b
}

/// Python's `bytes.split()`.
fn split_bytes(b: &[u8]) -> Vec<&[u8]> {
    b.split(|c| byte_space(*c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The lines of a file as Python's binary `readlines()` gives them (each with its `\n`).
fn byte_lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

impl Hosts {
    /// Salt's `_list_hosts` parser.
    pub(crate) fn parse(text: &str) -> Hosts {
        let mut hosts = Hosts::default();
        let mut count = 0;
        for line in universal_lines(text) {
            let line = line.trim_matches(py_space);
            if line.is_empty() {
                continue;
            }
            if line.starts_with('#') {
                let key = format!("comment-{count}");
                count += 1;
                match hosts.get_mut(&key) {
                    Some(Entry::Comment(lines)) => lines.push(line.to_string()),
                    Some(Entry::Address { .. }) => {}
                    None => hosts
                        .entries
                        .push((key, Entry::Comment(vec![line.to_string()]))),
                }
                continue;
            }
            let (names, comment) = match line.split_once('#') {
                Some((names, comment)) => (
                    names.trim_matches(py_space),
                    Some(comment.trim_start_matches(py_space)),
                ),
                None => (line, None),
            };
            let comps = py_split(names);
            let Some((ip, names)) = comps.split_first() else {
                continue;
            };
            if hosts.get_mut(ip).is_none() {
                hosts.entries.push((
                    ip.to_string(),
                    Entry::Address {
                        aliases: Vec::new(),
                        comment: None,
                    },
                ));
            }
            if let Some(Entry::Address {
                aliases,
                comment: current,
            }) = hosts.get_mut(ip)
            {
                aliases.extend(names.iter().map(|n| n.to_string()));
                if let Some(c) = comment.filter(|c| !c.is_empty()) {
                    *current = Some(c.to_string());
                }
            }
        }
        hosts
    }

    fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, e)| e)
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Entry> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, e)| e)
    }

    /// The `list_hosts` return.
    fn to_value(&self) -> Value {
        let strings = |items: &[String]| {
            Value::Array(items.iter().map(|s| Value::from(s.as_str())).collect())
        };
        Value::Map(
            self.entries
                .iter()
                .map(|(key, entry)| {
                    let value = match entry {
                        Entry::Comment(lines) => strings(lines),
                        Entry::Address { aliases, comment } => {
                            let mut fields = vec![("aliases", strings(aliases))];
                            if let Some(c) = comment {
                                fields.push(("comment", Value::from(c.as_str())));
                            }
                            map(fields)
                        }
                    };
                    (Value::from(key.as_str()), value)
                })
                .collect(),
        )
    }

    /// The entry of an address given as an argument (only text names one).
    fn address(&self, ip: &Value) -> Option<&Entry> {
        ip.as_str().and_then(|ip| self.get(ip))
    }

    /// Salt's `get_ip`: the first address with this name, else `""`.
    fn ip_of(&self, host: &Value) -> String {
        let Some(host) = host.as_str() else {
            return String::new();
        };
        self.entries
            .iter()
            .find(|(_, entry)| {
                matches!(entry, Entry::Address { aliases, .. } if aliases.iter().any(|a| a == host))
            })
            .map(|(ip, _)| ip.clone())
            .unwrap_or_default()
    }

    /// Salt's `get_alias`.
    fn aliases_of(&self, ip: &Value) -> Result<Value, FnError> {
        match self.address(ip) {
            None => Ok(Value::Array(Vec::new())),
            Some(entry) => Ok(Value::Array(
                aliases(entry)?
                    .iter()
                    .map(|a| Value::from(a.as_str()))
                    .collect(),
            )),
        }
    }

    /// Salt's `has_pair`: `alias` (or every name of a list) is a name of `ip`.
    fn has_pair(&self, ip: &Value, alias: &Value) -> Result<bool, FnError> {
        let Some(entry) = self.address(ip) else {
            return Ok(false);
        };
        let names = aliases(entry)?;
        let known = |v: &Value| v.as_str().is_some_and(|a| names.iter().any(|n| n == a));
        Ok(match alias {
            Value::Array(items) => items.iter().all(known),
            other => known(other),
        })
    }

    /// Salt's `_write_hosts`: the text of the whole file.
    fn render(&self) -> Result<String, FnError> {
        let mut lines: Vec<String> = Vec::new();
        let mut line: Option<String> = None;
        for (ip, entry) in &self.entries {
            if !ip.is_empty() {
                line = Some(match entry {
                    Entry::Comment(text) => text.concat(),
                    Entry::Address { comment, .. } if ip.starts_with("comment") => {
                        // Python joins the keys of the address's dict.
                        let mut keys = "aliases".to_string();
                        if comment.is_some() {
                            keys.push_str("comment");
                        }
                        keys
                    }
                    Entry::Address { aliases, comment } => match comment {
                        Some(c) => format!("{ip}\t\t{}\t\t# {c}", aliases.join(" ")),
                        None => format!("{ip}\t\t{}", aliases.join(" ")),
                    },
                });
            }
            // An empty address repeats the line before it, as in Salt.
            let Some(current) = &line else {
                return Err(FnError::Exception(
                    "UnboundLocalError: cannot access local variable 'line' where it is not associated with a value"
                        .into(),
                ));
            };
            lines.push(current.clone());
        }
        let mut out = String::new();
        for line in lines {
            let line = line.trim_matches(py_space);
            if !line.is_empty() {
                out.push_str(line);
                out.push('\n');
            }
        }
        Ok(out)
    }
}

/// The names of an entry; a comment line has none (Python's `TypeError` on a list).
fn aliases(entry: &Entry) -> Result<&[String], FnError> {
    match entry {
        Entry::Address { aliases, .. } => Ok(aliases),
        Entry::Comment(_) => Err(FnError::Exception(
            "TypeError: list indices must be integers or slices, not str".into(),
        )),
    }
}

/// Python's `a + b + ...` of the parts of a line: every part must be text.
fn concat(parts: &[&Value]) -> Result<String, FnError> {
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        match part.as_str() {
            Some(s) => out.push_str(s),
            None if i == 0 => {
                return Err(FnError::Exception(match part {
                    Value::Array(_) => {
                        "TypeError: can only concatenate list (not \"str\") to list".into()
                    }
                    other => format!(
                        "TypeError: unsupported operand type(s) for +: '{}' and 'str'",
                        py_type_name(other)
                    ),
                }))
            }
            None => {
                return Err(FnError::Exception(format!(
                    "TypeError: can only concatenate str (not \"{}\") to str",
                    py_type_name(part)
                )))
            }
        }
    }
    Ok(out)
}

/// The hosts file of this minion.
struct HostsFile {
    path: String,
}

impl HostsFile {
    /// The `hosts.file` option (`config.option`): `/etc/hosts` unless set.
    fn of(ctx: &Context) -> Result<HostsFile, FnError> {
        let value = super::config::option(ctx, OPTION)?;
        let path = if value.is_nil() {
            String::new()
        } else {
            py_str(&value)
        };
        Ok(HostsFile { path })
    }

    /// Salt's `_list_hosts`: a file that does not exist has no entries.
    fn read(&self) -> Result<Hosts, FnError> {
        match std::fs::read(&self.path) {
            Ok(data) => Ok(Hosts::parse(&String::from_utf8_lossy(&data))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Hosts::default()),
            Err(e) => Err(read_error(&e, &self.path)),
        }
    }

    /// Salt's `_get_or_create_hostfile` followed by its `isfile` check: false when the path
    /// is not a regular file.
    fn create(&self) -> Result<bool, FnError> {
        let path = Path::new(&self.path);
        if !path.exists() {
            std::fs::File::create(path).map_err(|e| os_error(&e, &self.path))?;
        }
        Ok(path.is_file())
    }

    fn read_bytes(&self) -> Result<Vec<u8>, FnError> {
        std::fs::read(&self.path).map_err(|e| os_error(&e, &self.path))
    }

    fn write(&self, data: &[u8]) -> Result<(), FnError> {
        std::fs::write(&self.path, data).map_err(|e| os_error(&e, &self.path))
    }

    /// Salt's `set_host`.
    fn set_host(&self, ip: &Value, alias: &Value, comment: &Value) -> Result<bool, FnError> {
        if !self.create()? {
            return Ok(false);
        }
        let tab = Value::from("\t\t");
        let newline = Value::from("\n");
        let line = if py_truthy(comment) {
            concat(&[ip, &tab, alias, &Value::from("\t\t# "), comment, &newline])?
        } else {
            concat(&[ip, &tab, alias, &newline])?
        };
        let ip = ip.as_str().unwrap_or_default().as_bytes();
        let removal = alias
            .as_str()
            .unwrap_or_default()
            .trim_matches(py_space)
            .is_empty();
        let line_to_add = if removal {
            Vec::new()
        } else {
            line.into_bytes()
        };
        let mut lines = byte_lines(&self.read_bytes()?);
        let mut replaced = false;
        for line in &mut lines {
            let trimmed = strip_bytes(line);
            if trimmed.is_empty() || trimmed.starts_with(b"#") {
                continue;
            }
            if split_bytes(trimmed).first() == Some(&ip) {
                *line = if replaced {
                    Vec::new()
                } else {
                    line_to_add.clone()
                };
                replaced = true;
            }
        }
        if !replaced {
            if let Some(last) = lines.last_mut().filter(|l| !l.ends_with(b"\n")) {
                last.push(b'\n');
            }
            lines.push(line_to_add);
        }
        self.write(&lines.concat())?;
        Ok(true)
    }

    /// Salt's `rm_host`.
    fn rm_host(&self, ip: &Value, alias: &Value) -> Result<bool, FnError> {
        if !self.read()?.has_pair(ip, alias)? {
            return Ok(true);
        }
        self.create()?;
        let mut lines = byte_lines(&self.read_bytes()?);
        // has_pair found the address, so it is text.
        let ip = ip.as_str().unwrap_or_default().as_bytes();
        for line in &mut lines {
            let trimmed = strip_bytes(line);
            if trimmed.is_empty() || trimmed.starts_with(b"#") {
                continue;
            }
            let (names, comment) = match trimmed.iter().filter(|b| **b == b'#').count() {
                0 => (trimmed, &b""[..]),
                1 => {
                    let at = trimmed.iter().position(|b| *b == b'#').unwrap_or_default();
                    let comment = &trimmed[at + 1..];
                    let start = comment
                        .iter()
                        .position(|b| !byte_space(*b))
                        .unwrap_or(comment.len());
                    (&trimmed[..at], &comment[start..])
                }
                _ => {
                    return Err(FnError::Exception(
                        "ValueError: too many values to unpack (expected 2)".into(),
                    ))
                }
            };
            let Some(alias) = alias.as_str() else {
                return Err(FnError::Exception(format!(
                    "TypeError: expected str, bytes, or bytearray not {}",
                    py_type(alias)
                )));
            };
            let comps = split_bytes(names);
            if comps.first() != Some(&ip) {
                continue;
            }
            let mut kept = ip.to_vec();
            kept.extend_from_slice(b"\t\t");
            for name in comps.iter().skip(1).filter(|n| **n != alias.as_bytes()) {
                kept.extend_from_slice(name);
                kept.push(b' ');
            }
            *line = if strip_bytes(&kept) == ip {
                Vec::new()
            } else if comment.is_empty() {
                kept.push(b'\n');
                kept
            } else {
                kept.extend_from_slice(b"# ");
                kept.extend_from_slice(comment);
                kept.push(b'\n');
                kept
            };
        }
        self.write(&lines.concat())?;
        Ok(true)
    }

    /// Salt's `add_host`.
    fn add_host(&self, ip: &Value, alias: &Value) -> Result<bool, FnError> {
        if !self.create()? {
            return Ok(false);
        }
        let mut hosts = self.read()?;
        if hosts.has_pair(ip, alias)? {
            return Ok(true);
        }
        let Some(ip) = ip.as_str() else {
            return Err(FnError::Exception(format!(
                "AttributeError: '{}' object has no attribute 'startswith'",
                py_type_name(ip)
            )));
        };
        if matches!(hosts.get(ip), Some(Entry::Comment(_))) {
            // Salt loops forever inserting the name into the comment.
            return Err(FnError::Execution(format!(
                "'{ip}' names a comment line of the hosts file, not an address"
            )));
        }
        if hosts.get(ip).is_none() {
            hosts.entries.push((
                ip.to_string(),
                Entry::Address {
                    aliases: Vec::new(),
                    comment: None,
                },
            ));
        }
        if let Some(Entry::Address { aliases, .. }) = hosts.get_mut(ip) {
            let Some(name) = alias.as_str() else {
                return Err(FnError::Exception(format!(
                    "TypeError: sequence item {}: expected str instance, {} found",
                    aliases.len(),
                    py_type_name(alias)
                )));
            };
            aliases.push(name.to_string());
        }
        self.write_hosts(&hosts)?;
        Ok(true)
    }

    /// Salt's `set_comment`.
    fn set_comment(&self, ip: &Value, comment: &Value) -> Result<bool, FnError> {
        if !self.create()? {
            return Ok(false);
        }
        let mut hosts = self.read()?;
        let Some(ip) = ip.as_str() else {
            return Ok(false);
        };
        match hosts.get_mut(ip) {
            None => Ok(false),
            Some(Entry::Comment(_)) => Err(FnError::Exception(
                "TypeError: list indices must be integers or slices, not str".into(),
            )),
            Some(Entry::Address {
                comment: current, ..
            }) => {
                if current.is_some() && comment.as_str() == current.as_deref() {
                    return Ok(true);
                }
                *current = Some(py_str(comment));
                self.write_hosts(&hosts)?;
                Ok(true)
            }
        }
    }

    fn write_hosts(&self, hosts: &Hosts) -> Result<(), FnError> {
        let text = hosts.render()?;
        self.create()?;
        self.write(text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::testutil::*;
    use super::super::{call, Services};
    use super::*;

    const HOSTS: &str = "# head comment\n127.0.0.1\tlocalhost\n\n\
        10.0.0.1 alpha alpha.example.com  # first   \n10.0.0.2 beta\n\
        10.0.0.1 alpha2 #second\n  ::1 ip6-localhost\n10.0.0.3\n";

    /// A context whose hosts file is `path`.
    fn ctx_for(path: &Path) -> Context {
        let mut services = Services::detached();
        services.opts.insert(
            OPTION.into(),
            serde_json::Value::String(path.display().to_string()),
        );
        Context {
            services: Arc::new(services),
            ..ctx()
        }
    }

    #[test]
    fn parses_like_list_hosts() {
        let hosts = Hosts::parse(&HOSTS.replace("# head comment\n", "# head comment\r\n"));
        let strings = |items: &[&str]| Value::Array(items.iter().map(|i| s(i)).collect());
        assert_eq!(
            hosts.to_value(),
            Value::Map(vec![
                (s("comment-0"), strings(&["# head comment"])),
                (s("127.0.0.1"), map([("aliases", strings(&["localhost"]))])),
                (
                    s("10.0.0.1"),
                    map([
                        (
                            "aliases",
                            strings(&["alpha", "alpha.example.com", "alpha2"])
                        ),
                        ("comment", s("second")),
                    ])
                ),
                (s("10.0.0.2"), map([("aliases", strings(&["beta"]))])),
                (s("::1"), map([("aliases", strings(&["ip6-localhost"]))])),
                (s("10.0.0.3"), map([("aliases", strings(&[]))])),
            ])
        );
        assert_eq!(hosts.ip_of(&s("alpha2")), "10.0.0.1");
        assert_eq!(hosts.ip_of(&s("nope")), "");
        assert_eq!(hosts.ip_of(&Value::from(1)), "");
        assert_eq!(
            hosts.aliases_of(&s("10.0.0.2")).unwrap(),
            strings(&["beta"])
        );
        assert_eq!(hosts.aliases_of(&s("10.9.9.9")).unwrap(), strings(&[]));
        assert!(hosts.aliases_of(&s("comment-0")).is_err());
        let list = Value::Array(vec![s("alpha"), s("alpha2")]);
        assert!(hosts.has_pair(&s("10.0.0.1"), &list).unwrap());
        assert!(hosts.has_pair(&s("10.0.0.1"), &s("alpha")).unwrap());
        assert!(!hosts.has_pair(&s("10.0.0.1"), &s("beta")).unwrap());
        assert!(!hosts.has_pair(&s("10.0.0.9"), &s("x")).unwrap());
        assert!(!hosts.has_pair(&Value::from(5), &s("x")).unwrap());
    }

    #[test]
    fn renders_one_line_per_address() {
        assert_eq!(
            Hosts::parse(HOSTS).render().unwrap(),
            "# head comment\n127.0.0.1\t\tlocalhost\n\
             10.0.0.1\t\talpha alpha.example.com alpha2\t\t# second\n\
             10.0.0.2\t\tbeta\n::1\t\tip6-localhost\n10.0.0.3\n"
        );
        let mut hosts = Hosts::parse("10.0.0.1 a\n");
        hosts.entries.push((
            String::new(),
            Entry::Address {
                aliases: vec!["b".into()],
                comment: None,
            },
        ));
        assert_eq!(hosts.render().unwrap(), "10.0.0.1\t\ta\n10.0.0.1\t\ta\n");
        hosts.entries.remove(0);
        assert!(hosts.render().is_err());
    }

    /// Each function applied to HOSTS, and the file afterwards (as Salt 3007 leaves it).
    #[tokio::test]
    async fn changes_the_file_as_salt_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        let cases: &[(&str, &[Value], Value, &str)] = &[
            (
                "hosts.set_host",
                &[s("10.0.0.1"), s("one two"), s("comment=c")],
                Value::Boolean(true),
                "# head comment\n127.0.0.1\tlocalhost\n\n10.0.0.1\t\tone two\t\t# c\n10.0.0.2 beta\n  ::1 ip6-localhost\n10.0.0.3\n",
            ),
            (
                "hosts.set_host",
                &[s("10.0.0.1"), s(" ")],
                Value::Boolean(true),
                "# head comment\n127.0.0.1\tlocalhost\n\n10.0.0.2 beta\n  ::1 ip6-localhost\n10.0.0.3\n",
            ),
            (
                "hosts.set_host",
                &[s("10.0.0.7"), s("seven")],
                Value::Boolean(true),
                "# head comment\n127.0.0.1\tlocalhost\n\n10.0.0.1 alpha alpha.example.com  # first   \n10.0.0.2 beta\n10.0.0.1 alpha2 #second\n  ::1 ip6-localhost\n10.0.0.3\n10.0.0.7\t\tseven\n",
            ),
            (
                "hosts.rm_host",
                &[s("10.0.0.1"), s("alpha")],
                Value::Boolean(true),
                "# head comment\n127.0.0.1\tlocalhost\n\n10.0.0.1\t\talpha.example.com # first\n10.0.0.2 beta\n10.0.0.1\t\talpha2 # second\n  ::1 ip6-localhost\n10.0.0.3\n",
            ),
            (
                "hosts.rm_host",
                &[s("10.0.0.2"), s("beta")],
                Value::Boolean(true),
                "# head comment\n127.0.0.1\tlocalhost\n\n10.0.0.1 alpha alpha.example.com  # first   \n10.0.0.1 alpha2 #second\n  ::1 ip6-localhost\n10.0.0.3\n",
            ),
            ("hosts.rm_host", &[s("10.0.0.2"), s("nope")], Value::Boolean(true), HOSTS),
            (
                "hosts.add_host",
                &[s("10.0.0.2"), s("beta2")],
                Value::Boolean(true),
                "# head comment\n127.0.0.1\t\tlocalhost\n10.0.0.1\t\talpha alpha.example.com alpha2\t\t# second\n10.0.0.2\t\tbeta beta2\n::1\t\tip6-localhost\n10.0.0.3\n",
            ),
            ("hosts.add_host", &[s("10.0.0.2"), s("beta")], Value::Boolean(true), HOSTS),
            (
                "hosts.add_host",
                &[s("10.0.0.8"), s("eight")],
                Value::Boolean(true),
                "# head comment\n127.0.0.1\t\tlocalhost\n10.0.0.1\t\talpha alpha.example.com alpha2\t\t# second\n10.0.0.2\t\tbeta\n::1\t\tip6-localhost\n10.0.0.3\n10.0.0.8\t\teight\n",
            ),
            (
                "hosts.set_comment",
                &[s("10.0.0.2"), s("hello")],
                Value::Boolean(true),
                "# head comment\n127.0.0.1\t\tlocalhost\n10.0.0.1\t\talpha alpha.example.com alpha2\t\t# second\n10.0.0.2\t\tbeta\t\t# hello\n::1\t\tip6-localhost\n10.0.0.3\n",
            ),
            ("hosts.set_comment", &[s("10.0.0.1"), s("second")], Value::Boolean(true), HOSTS),
            ("hosts.set_comment", &[s("10.0.0.9"), s("hello")], Value::Boolean(false), HOSTS),
        ];
        let ctx = ctx_for(&path);
        for (fun, args, ret, after) in cases {
            std::fs::write(&path, HOSTS).unwrap();
            let r = call(&ctx, fun, args).await;
            assert_eq!(&r.ret, ret, "{fun} {args:?}");
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                *after,
                "{fun} {args:?}"
            );
        }
        std::fs::write(&path, HOSTS).unwrap();
        let r = call(&ctx, "hosts.get_ip", &[s("alpha.example.com")]).await;
        assert_eq!(r.ret, s("10.0.0.1"));
        let r = call(&ctx, "hosts.has_pair", &[s("10.0.0.1"), s("alpha2")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&ctx, "hosts.list_hosts", &[]).await;
        assert_eq!(r.ret, Hosts::parse(HOSTS).to_value());
    }

    #[tokio::test]
    async fn missing_files_and_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        let ctx = ctx_for(&path);
        let r = call(&ctx, "hosts.list_hosts", &[]).await;
        assert_eq!(r.ret, Value::Map(vec![]));
        assert!(!path.exists(), "reading does not create the file");
        let r = call(&ctx, "hosts.get_ip", &[s("x")]).await;
        assert_eq!(r.ret, s(""));
        let r = call(&ctx, "hosts.add_host", &[s("10.1.1.1"), s("x")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "10.1.1.1\t\tx\n");
        let r = call(&ctx, "hosts.set_host", &[s("10.1.1.1"), Value::from(5)]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: TypeError: can only concatenate str (not \"int\") to str")
        );
        let r = call(&ctx, "hosts.set_host", &[Value::from(5), s("a")]).await;
        assert!(py_str(&r.ret).contains("unsupported operand type(s) for +: 'int' and 'str'"));
        std::fs::write(&path, "10.0.0.1 a # x # y\n").unwrap();
        let r = call(&ctx, "hosts.rm_host", &[s("10.0.0.1"), s("a")]).await;
        assert!(
            py_str(&r.ret).contains("too many values to unpack"),
            "{:?}",
            r.ret
        );
        let r = call(&ctx, "hosts.add_host", &[s("10.0.0.1"), Value::from(7)]).await;
        assert!(
            py_str(&r.ret).contains("sequence item 1: expected str instance, int found"),
            "{:?}",
            r.ret
        );
        std::fs::write(&path, "# c\n").unwrap();
        let r = call(&ctx, "hosts.add_host", &[s("comment-0"), s("x")]).await;
        assert_eq!(r.retcode, 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# c\n");
        // A directory is not a hosts file.
        let ctx = ctx_for(dir.path());
        let r = call(&ctx, "hosts.set_host", &[s("10.1.1.1"), s("x")]).await;
        assert_eq!(r.ret, Value::Boolean(false));
        let r = call(&ctx, "hosts.list_hosts", &[]).await;
        assert_eq!(
            r.ret,
            s(&format!(
                "ERROR: Error 21 encountered reading from {}: Is a directory",
                dir.path().display()
            ))
        );
        let ctx = ctx_for(&dir.path().join("no/such/dir/hosts"));
        let r = call(&ctx, "hosts.add_host", &[s("10.1.1.1"), s("x")]).await;
        assert!(
            py_str(&r.ret).contains("FileNotFoundError: [Errno 2] No such file or directory"),
            "{:?}",
            r.ret
        );
    }

    #[test]
    fn the_file_is_found_like_config_option() {
        assert_eq!(HostsFile::of(&ctx()).unwrap().path, "/etc/hosts");
        let mut c = ctx();
        c.pillar = Arc::new(map([("master", map([(OPTION, s("/m"))]))]));
        assert_eq!(HostsFile::of(&c).unwrap().path, "/m");
        c.pillar = Arc::new(map([
            ("master", map([(OPTION, s("/m"))])),
            (OPTION, s("/p")),
        ]));
        assert_eq!(HostsFile::of(&c).unwrap().path, "/p");
        c.grains = Arc::new(map([(OPTION, s("/g"))]));
        assert_eq!(HostsFile::of(&c).unwrap().path, "/g");
        let mut services = Services::detached();
        services
            .opts
            .insert(OPTION.into(), serde_json::Value::String("/o".into()));
        c.services = Arc::new(services);
        assert_eq!(HostsFile::of(&c).unwrap().path, "/o");
    }
}
