//! The `sysctl` execution module (Salt's `linux_sysctl`): the kernel's parameters read with
//! `sysctl -a` and `sysctl -n`, set with `sysctl -w`, and kept in a configuration file
//! (`/etc/sysctl.d/99-salt.conf` where systemd 207 or later runs, `/etc/sysctl.conf`
//! elsewhere) which `persist` edits line by line as Salt does.
//!
//! Files are read as Salt's `fopen` reads them: UTF-8, lines ending at `\n`, `\r\n` or `\r`
//! and kept as they are, so a rewritten file keeps the endings of the lines it did not touch.

use std::path::Path;

use rmpv::Value;

use super::args::{py_repr, py_str, py_type_name, Bound, Signature};
use super::cmd::{run_argv, run_argv_merged};
use super::group::which;
use super::hosts::os_error;
use super::{CallState, Context, FnError, Spec};
use brine_protocol::nested::splitlines;
use brine_protocol::payload::py_truthy;
use brine_protocol::pystr::{fopen_lines, is_space as py_space};

/// The most of a configuration file this module reads.
const MAX_CONFIG_BYTES: usize = 64 << 20;

/// How much Python's text files decode at a time (`TextIOWrapper._CHUNK_SIZE`): the
/// positions of a decoding error count from the start of the piece being decoded.
const PY_CHUNK: usize = 8192;

/// What a new configuration file starts with.
const HEADER: &str = "#\n# Kernel sysctl configuration\n#\n";

super::spec_table! {
    /// The functions of the `sysctl` module.
    DefaultConfig => ("sysctl.default_config", "default_config", [], 0, false, false, "
    The configuration file persist writes when given none: systemd 207 and later read only
    /etc/sysctl.d/*.conf, so a host booted with such a systemd gets
    /etc/sysctl.d/99-salt.conf; any other host gets /etc/sysctl.conf.

    CLI Example:

        salt -G 'kernel:Linux' sysctl.default_config
    "),
    Show => ("sysctl.show", "show", ["config_file"], 0, false, false, "
    Every kernel parameter with its current value, as `sysctl -a` reports them.

    config_file: read the parameters from this configuration file instead of the running
        kernel (an empty list when the file does not exist, None when it cannot be read).

    CLI Example:

        salt '*' sysctl.show
    "),
    Get => ("sysctl.get", "get", ["name"], 1, false, false, "
    The current value of one kernel parameter (the output of `sysctl -n <name>`).

    CLI Example:

        salt '*' sysctl.get net.ipv4.ip_forward
    "),
    Assign => ("sysctl.assign", "assign", ["name", "value"], 2, false, false, "
    Set one kernel parameter in the running kernel with `sysctl -w`; returns the parameter
    with the value sysctl reports.

    CLI Example:

        salt '*' sysctl.assign net.ipv4.ip_forward 1
    "),
    Persist => ("sysctl.persist", "persist", ["name", "value", "config"], 2, false, false, "
    Write a kernel parameter into a configuration file and set it in the running kernel.
    Returns 'Already set' when both already hold the value, else 'Updated'. Without config,
    the file sysctl.default_config names is used.

    CLI Example:

        salt '*' sysctl.persist net.ipv4.ip_forward 1
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        _ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let arg = |key: &str| b.get(key).cloned().unwrap_or(Value::Nil);
        match self {
            Fun::DefaultConfig => default_config().await.map(Value::from),
            Fun::Show => {
                let config = b
                    .get("config_file")
                    .cloned()
                    .unwrap_or(Value::Boolean(false));
                show(&config, st).await
            }
            Fun::Get => get(&arg("name"), st).await.map(Value::from),
            Fun::Assign => assign(&arg("name"), &arg("value"), st).await,
            Fun::Persist => persist(&arg("name"), &arg("value"), &arg("config"), st)
                .await
                .map(Value::from),
        }
    }
}

// ---------------------------------------------------------------------------
// Python's ways with text

/// Salt's `_sanitize_sysctl_value`: every run of whitespace made one tab.
fn sanitize(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut in_space = false;
    for c in value.chars() {
        if py_space(c) {
            if !in_space {
                out.push('\t');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

/// Python's decoding of a whole file read as UTF-8 text, its `UnicodeDecodeError` as the
/// minion reports it: Python decodes a file in pieces, so the positions it names count from
/// the start of the piece where decoding failed.
fn decode(data: Vec<u8>) -> Result<String, FnError> {
    let data = match String::from_utf8(data) {
        Ok(text) => return Ok(text),
        Err(e) => e.into_bytes(),
    };
    let place = |bytes: &[u8], at: usize, len: usize| {
        if len == 1 {
            format!("byte 0x{:02x} in position {at}", bytes[at])
        } else {
            format!("bytes in position {at}-{}", at + len - 1)
        }
    };
    let mut start = 0;
    let mut read = 0;
    loop {
        if read == data.len() {
            // End of file: what is left is the start of a character never finished.
            let rest = &data[start..];
            return Err(FnError::Exception(format!(
                "UnicodeDecodeError: 'utf-8' codec can't decode {}: unexpected end of data",
                place(rest, 0, rest.len().max(1))
            )));
        }
        read = (read + PY_CHUNK).min(data.len());
        let piece = &data[start..read];
        match std::str::from_utf8(piece) {
            Ok(_) => start = read,
            Err(e) => match e.error_len() {
                None => start += e.valid_up_to(),
                Some(len) => {
                    let at = e.valid_up_to();
                    let first = piece[at];
                    let reason = if (0x80..0xc2).contains(&first) || first > 0xf4 {
                        "invalid start byte"
                    } else {
                        "invalid continuation byte"
                    };
                    return Err(FnError::Exception(format!(
                        "UnicodeDecodeError: 'utf-8' codec can't decode {}: {reason}",
                        place(piece, at, len)
                    )));
                }
            },
        }
    }
}

/// Read a whole file, at most [`MAX_CONFIG_BYTES`] of it.
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let mut data = Vec::new();
    file.take(MAX_CONFIG_BYTES as u64 + 1)
        .read_to_end(&mut data)?;
    if data.len() > MAX_CONFIG_BYTES {
        return Err(std::io::Error::other(format!(
            "{} is larger than {MAX_CONFIG_BYTES} bytes",
            path.display()
        )));
    }
    Ok(data)
}

// ---------------------------------------------------------------------------
// The functions

/// Salt's `default_config`.
async fn default_config() -> Result<String, FnError> {
    // Salt's `salt.utils.systemd.booted`: systemd's runtime directory exists.
    let booted = std::fs::metadata("/run/systemd/system").is_ok();
    if booted && systemd_version().await? >= Some(207) {
        return Ok("/etc/sysctl.d/99-salt.conf".into());
    }
    Ok("/etc/sysctl.conf".into())
}

/// Salt's `salt.utils.systemd.version`, compared with 207 as Salt compares it: an unknown
/// version cannot be compared (Python's `TypeError`).
async fn systemd_version() -> Result<Option<u64>, FnError> {
    let Some(systemctl) = which("systemctl").ok() else {
        return Err(FnError::Exception(
            "FileNotFoundError: [Errno 2] No such file or directory: 'systemctl'".into(),
        ));
    };
    let out = run_argv_merged(&[systemctl, "--version".into()], &[]).await?;
    let first = splitlines(out.stdout())
        .first()
        .copied()
        .unwrap_or_default();
    let version = version_of(first);
    if version.is_none() {
        tracing::error!(
            "Unable to determine systemd version from systemctl --version, output follows:\n{}",
            out.stdout()
        );
        return Err(FnError::InvalidArgs(
            "'>=' not supported between instances of 'NoneType' and 'int'".into(),
        ));
    }
    Ok(version)
}

/// The number after the first word of `systemctl --version`'s first line (`systemd 252
/// (...)`); a number too large to hold counts as the largest.
fn version_of(line: &str) -> Option<u64> {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for (i, &(_, c)) in chars.iter().enumerate() {
        // `\w+ ([0-9]+)`: a word character, then (after more of them) a space and digits.
        if !(c.is_alphanumeric() || c == '_') {
            continue;
        }
        let mut j = i;
        while j < chars.len() && (chars[j].1.is_alphanumeric() || chars[j].1 == '_') {
            j += 1;
        }
        if j < chars.len() && chars[j].1 == ' ' {
            let digits: String = chars[j + 1..]
                .iter()
                .map(|&(_, c)| c)
                .take_while(char::is_ascii_digit)
                .collect();
            if !digits.is_empty() {
                return Some(digits.parse().unwrap_or(u64::MAX));
            }
        }
    }
    None
}

/// The path of `sysctl`, or Salt's error when there is none.
fn sysctl_bin() -> Result<String, FnError> {
    which("sysctl")
}

/// Salt's `show`.
async fn show(config_file: &Value, st: &mut CallState) -> Result<Value, FnError> {
    if !py_truthy(config_file) {
        let out = run_argv(&[sysctl_bin()?, "-a".into()], &[]).await?;
        st.retcode = out.exit_code();
        return Ok(Value::Map(
            parse_live(out.stdout())
                .into_iter()
                .map(|(k, v)| (Value::from(k), Value::from(v)))
                .collect(),
        ));
    }
    let path = match config_file {
        Value::String(s) => match s.as_str() {
            Some(s) => s.to_string(),
            None => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        },
        // Python takes a number for a file descriptor; Salt refuses the first three.
        Value::Boolean(_) => {
            return Err(FnError::InvalidArgs(format!(
                "{} is not a permitted file descriptor",
                py_repr(config_file)
            )))
        }
        Value::Integer(n) => {
            return match n.as_i64() {
                Some(0..=2) => Err(FnError::InvalidArgs(format!(
                    "{n} is not a permitted file descriptor"
                ))),
                _ => Ok(Value::Array(Vec::new())),
            }
        }
        other => {
            return Err(FnError::InvalidArgs(format!(
                "stat: path should be string, bytes, os.PathLike or integer, not {}",
                py_type_name(other)
            )))
        }
    };
    let path = Path::new(&path);
    if !path.exists() {
        return Ok(Value::Array(Vec::new()));
    }
    let data = match read_bounded(path) {
        Ok(data) => data,
        Err(_) => {
            tracing::error!("Could not open sysctl file");
            return Ok(Value::Nil);
        }
    };
    let text = decode(data)?;
    Ok(Value::Map(
        parse_config(&text)
            .into_iter()
            .map(|(k, v)| (Value::from(k), Value::from(v)))
            .collect(),
    ))
}

/// The parameters of `sysctl -a`'s output (`key = value` lines), in order.
fn parse_live(out: &str) -> Vec<(&str, &str)> {
    let mut params: Vec<(&str, &str)> = Vec::new();
    for line in splitlines(out) {
        if let Some((key, value)) = line.split_once(" = ") {
            set(&mut params, key, value);
        }
    }
    params
}

/// The parameters a configuration file sets, in the order Salt's dict keeps them (a key set
/// twice keeps its first place and its last value).
fn parse_config(text: &str) -> Vec<(&str, &str)> {
    let mut params: Vec<(&str, &str)> = Vec::new();
    for line in fopen_lines(text) {
        let line = line.trim_matches(py_space);
        if line.starts_with('#') {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            set(
                &mut params,
                key.trim_end_matches(py_space),
                value.trim_start_matches(py_space),
            );
        }
    }
    params
}

/// Python's `d[key] = value` on an ordered list of pairs.
fn set<'a>(params: &mut Vec<(&'a str, &'a str)>, key: &'a str, value: &'a str) {
    match params.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => params.push((key, value)),
    }
}

/// Salt's `get`: the output of `sysctl -n <name>`, its errors included.
async fn get(name: &Value, st: &mut CallState) -> Result<String, FnError> {
    let sysctl = sysctl_bin()?;
    let out = run_argv_merged(&[sysctl.clone(), "-n".into(), py_str(name)], &[]).await?;
    st.retcode = out.exit_code();
    if out.retcode() != 0 {
        tracing::error!(
            "Command '{sysctl}' failed with return code: {}\noutput: {}",
            out.retcode(),
            out.stdout()
        );
    }
    Ok(out.stdout().to_string())
}

/// Salt's `assign`.
async fn assign(name: &Value, value: &Value, st: &mut CallState) -> Result<Value, FnError> {
    let value = py_str(value);
    let Some(name) = name.as_str() else {
        return Err(FnError::Exception(format!(
            "AttributeError: '{}' object has no attribute 'translate'",
            py_type_name(name)
        )));
    };
    let proc_path: String = name
        .chars()
        .map(|c| match c {
            '.' => '/',
            '/' => '.',
            c => c,
        })
        .collect();
    if !Path::new(&format!("/proc/sys/{proc_path}")).exists() {
        return Err(FnError::Execution(format!("sysctl {name} does not exist")));
    }
    let out = run_argv(
        &[sysctl_bin()?, "-w".into(), format!("{name}={value}")],
        &[],
    )
    .await?;
    st.retcode = out.exit_code();
    let (stdout, stderr) = (out.stdout(), out.stderr());
    if !reports(stdout, name, &value) || stderr.contains("Invalid argument") {
        let error = if out.retcode() != 0 && !stderr.is_empty() {
            stderr
        } else {
            stdout
        };
        return Err(FnError::Execution(format!("sysctl -w failed: {error}")));
    }
    let Some((new_name, new_value)) = stdout.split_once(" = ") else {
        return Err(FnError::Exception(
            "ValueError: not enough values to unpack (expected 2, got 1)".into(),
        ));
    };
    Ok(Value::Map(vec![(
        Value::from(new_name),
        Value::from(new_value),
    )]))
}

/// Whether `sysctl -w`'s output is the parameter set to the value: Salt's
/// `re.match(r"^<name>\s+=\s+<value>$", out)` with both taken literally.
fn reports(out: &str, name: &str, value: &str) -> bool {
    let Some(rest) = out.strip_prefix(name) else {
        return false;
    };
    let after_space = rest.trim_start_matches(py_space);
    if after_space.len() == rest.len() {
        return false;
    }
    let Some(after_eq) = after_space.strip_prefix('=') else {
        return false;
    };
    // Python's `$` also matches before a newline that ends the text.
    let tails = [Some(after_eq), after_eq.strip_suffix('\n')];
    tails.into_iter().flatten().any(|tail| {
        tail.strip_suffix(value)
            .is_some_and(|space| !space.is_empty() && space.chars().all(py_space))
    })
}

/// What `persist` does with the configuration file's lines.
#[derive(Debug, PartialEq)]
enum Edit {
    /// A line already gives the parameter this value.
    Present,
    /// The file's new text: the parameter's lines replaced, or a line added at the end.
    Rewrite(String),
}

/// Salt's edit of a configuration file's text by `persist`: `name` is `None` when the name
/// given is not text (it then matches no line).
fn edit_config(text: &str, name: Option<&str>, name_text: &str, value: &str) -> Edit {
    let wanted = sanitize(value);
    let new_line = format!("{name_text} = {value}\n");
    let mut out = String::with_capacity(text.len() + new_line.len());
    let mut edited = false;
    for line in fopen_lines(text) {
        let Some((key, current)) = line.split_once('=') else {
            out.push_str(line);
            continue;
        };
        let key = key.trim_matches(py_space);
        if key.starts_with('#') || Some(key) != name {
            out.push_str(line);
            continue;
        }
        if sanitize(current.trim_matches(py_space)) == wanted {
            return Edit::Present;
        }
        out.push_str(&new_line);
        edited = true;
    }
    if !edited {
        out.push_str(&new_line);
    }
    Edit::Rewrite(out)
}

/// Python's `os.makedirs(path)`, its errors as Python names them.
fn makedirs(path: &str) -> Result<(), FnError> {
    let (mut head, mut tail) = brine_protocol::posixpath::split(path);
    if tail.is_empty() {
        (head, tail) = brine_protocol::posixpath::split(&head);
    }
    if !head.is_empty() && !tail.is_empty() && !Path::new(&head).exists() {
        match makedirs(&head) {
            Err(FnError::Exception(e)) if e.starts_with("FileExistsError") => {}
            other => other?,
        }
        if tail == "." {
            return Ok(());
        }
    }
    std::fs::create_dir(path).map_err(|e| os_error(&e, path))
}

/// Salt's `persist`.
async fn persist(
    name: &Value,
    value: &Value,
    config: &Value,
    st: &mut CallState,
) -> Result<&'static str, FnError> {
    let config = match config {
        Value::Nil => default_config().await?,
        Value::String(s) => match s.as_str() {
            Some(s) => s.to_string(),
            None => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        },
        // Python takes a number for a file descriptor, which is no regular file, and then
        // cannot take its directory.
        Value::Integer(_) | Value::Boolean(_) => {
            return Err(FnError::InvalidArgs(format!(
                "expected str, bytes or os.PathLike object, not {}",
                py_type_name(config)
            )))
        }
        other => {
            return Err(FnError::InvalidArgs(format!(
                "stat: path should be string, bytes, os.PathLike or integer, not {}",
                py_type_name(other)
            )))
        }
    };
    let path = Path::new(&config);
    if !path.is_file() {
        let dir = brine_protocol::posixpath::dirname(&config);
        if !Path::new(&dir).exists() {
            makedirs(&dir)?;
        }
        std::fs::write(path, HEADER)
            .map_err(|_| FnError::Execution(format!("Could not write to file: {config}")))?;
    }
    let data = read_bounded(path)
        .map_err(|_| FnError::Execution(format!("Could not read from file: {config}")))?;
    let text = decode(data)?;
    let value_text = py_str(value);
    match edit_config(&text, name.as_str(), &py_str(name), &value_text) {
        Edit::Present => {
            if sanitize(&get(name, st).await?) != sanitize(&value_text) {
                assign(name, value, st).await?;
                Ok("Updated")
            } else {
                Ok("Already set")
            }
        }
        Edit::Rewrite(new) => {
            std::fs::write(path, new.as_bytes())
                .map_err(|_| FnError::Execution(format!("Could not write to file: {config}")))?;
            assign(name, value, st).await?;
            Ok("Updated")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn live_output_is_parsed_as_salt_parses_it() {
        let out = "abi.vsyscall32 = 1\nnet.ipv4.tcp_rmem = 4096\t131072\t6291456\n\
                   kernel.domainname = (none)\nbroken line\nempty.value = \nx = a = b\nabi.vsyscall32 = 2";
        assert_eq!(
            parse_live(out),
            vec![
                ("abi.vsyscall32", "2"),
                ("net.ipv4.tcp_rmem", "4096\t131072\t6291456"),
                ("kernel.domainname", "(none)"),
                ("empty.value", ""),
                ("x", "a = b"),
            ]
        );
        assert_eq!(
            splitlines("a\r\nb\rc\x0bd\u{2028}e\n"),
            ["a", "b", "c", "d", "e"]
        );
        assert!(splitlines("").is_empty());
    }

    #[test]
    fn config_files_are_parsed_as_salt_parses_them() {
        let text = "#\n# Kernel sysctl configuration\n#\nvm.swappiness=10\r\n  # net.x = 1\n\
                    net.ipv4.tcp_rmem = 4096 87380  16777216 \rno value here\n\
                    kernel.a =\nvm.swappiness = 20\n=lonely\n";
        assert_eq!(
            parse_config(text),
            vec![
                ("vm.swappiness", "20"),
                ("net.ipv4.tcp_rmem", "4096 87380  16777216"),
                ("kernel.a", ""),
                ("", "lonely"),
            ]
        );
    }

    #[test]
    fn persist_edits_only_the_parameter() {
        let text = "# comment = 1\nvm.swappiness = 10\r\nkernel.x = 1\n  #vm.swappiness = 60\n\
                    vm.swappiness=30\nlast line";
        assert_eq!(
            edit_config(text, Some("vm.swappiness"), "vm.swappiness", "60"),
            Edit::Rewrite(
                "# comment = 1\nvm.swappiness = 60\nkernel.x = 1\n  #vm.swappiness = 60\n\
                 vm.swappiness = 60\nlast line"
                    .into()
            )
        );
        // Without the parameter a line is added, even after a last line without an end.
        assert_eq!(
            edit_config("a = 1", Some("b"), "b", "2"),
            Edit::Rewrite("a = 1b = 2\n".into())
        );
        assert_eq!(
            edit_config("", Some("b"), "b", "2"),
            Edit::Rewrite("b = 2\n".into())
        );
        // The same value with other whitespace is already there.
        assert_eq!(
            edit_config(
                "net.ipv4.tcp_rmem =  4096   87380\t16777216\n",
                Some("net.ipv4.tcp_rmem"),
                "net.ipv4.tcp_rmem",
                "4096 87380 16777216"
            ),
            Edit::Present
        );
        // A later line with the value stops the edit, even after a line with another one.
        assert_eq!(
            edit_config("k = 1\nk = 2\n", Some("k"), "k", "2"),
            Edit::Present
        );
        // A name that is not text matches no line.
        assert_eq!(
            edit_config("5 = 1\n", None, "5", "1"),
            Edit::Rewrite("5 = 1\n5 = 1\n".into())
        );
    }

    #[test]
    fn sysctl_w_output_is_matched_as_salt_matches_it() {
        assert!(reports("vm.swappiness = 60", "vm.swappiness", "60"));
        assert!(reports(
            "net.ipv4.tcp_rmem = 4096 87380 16777216",
            "net.ipv4.tcp_rmem",
            "4096 87380 16777216"
        ));
        assert!(reports("a\t=\t 1", "a", " 1"));
        assert!(!reports("vm.swappiness = 60", "vm.swappiness", "6"));
        assert!(!reports("vm.swappiness= 60", "vm.swappiness", "60"));
        assert!(!reports("vm.swappiness =60", "vm.swappiness", "60"));
        assert!(!reports("", "vm.swappiness", "60"));
        assert!(!reports("xvm.swappiness = 60", "vm.swappiness", "60"));
    }

    #[test]
    fn values_are_sanitized_as_salt_sanitizes_them() {
        assert_eq!(
            sanitize(" 4096  87380\t\n16777216 "),
            "\t4096\t87380\t16777216\t"
        );
        assert_eq!(sanitize("1"), "1");
    }

    #[test]
    fn decoding_errors_name_python_positions() {
        assert_eq!(decode(b"a = 1\n".to_vec()), Ok("a = 1\n".into()));
        let err = |data: Vec<u8>| match decode(data) {
            Err(FnError::Exception(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            err(b"ab\xffc".to_vec()),
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"
        );
        assert_eq!(
            err(b"ab\xc3(".to_vec()),
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xc3 in position 2: invalid continuation byte"
        );
        assert_eq!(
            err(b"abc\xe2\x82".to_vec()),
            "UnicodeDecodeError: 'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"
        );
        let mut long = vec![b'a'; PY_CHUNK + 10];
        long.push(0xff);
        assert_eq!(
            err(long),
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 10: invalid start byte"
        );
    }

    #[test]
    fn systemd_versions_are_read_from_the_first_line() {
        assert_eq!(version_of("systemd 252 (252.38-1~deb12u1)"), Some(252));
        assert_eq!(version_of("systemd 206"), Some(206));
        assert_eq!(version_of("nothing here"), None);
        assert_eq!(version_of("a b 7"), Some(7));
    }

    #[tokio::test]
    async fn config_files_are_shown_and_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("sub/dir/sysctl.conf");
        let conf_s = conf.display().to_string();
        // A file that does not exist shows as an empty list.
        let r = call(&ctx(), "sysctl.show", &[s(&conf_s)]).await;
        assert_eq!(r.ret, Value::Array(vec![]));
        // A parameter the kernel lacks is written into a new file, then refused.
        let r = call(
            &ctx(),
            "sysctl.persist",
            &[s("brine.no.such.key"), Value::from(1), s(&conf_s)],
        )
        .await;
        assert_eq!(r.ret, s("ERROR: sysctl brine.no.such.key does not exist"));
        assert_eq!(
            std::fs::read_to_string(&conf).unwrap(),
            format!("{HEADER}brine.no.such.key = 1\n")
        );
        let r = call(&ctx(), "sysctl.show", &[kw(&[("config_file", s(&conf_s))])]).await;
        assert_eq!(r.ret, Value::Map(vec![(s("brine.no.such.key"), s("1"))]));
        // A directory cannot be read.
        let r = call(
            &ctx(),
            "sysctl.show",
            &[s(&dir.path().display().to_string())],
        )
        .await;
        assert_eq!(r.ret, Value::Nil);
        let r = call(
            &ctx(),
            "sysctl.persist",
            &[
                s("a.b"),
                Value::from(1),
                s(&dir.path().display().to_string()),
            ],
        )
        .await;
        assert_eq!(
            r.ret,
            s(&format!(
                "ERROR: Could not write to file: {}",
                dir.path().display()
            ))
        );
        // A name that is not text fails as Salt's does, once the file is written.
        let r = call(
            &ctx(),
            "sysctl.persist",
            &[Value::from(5), Value::from(1), s(&conf_s)],
        )
        .await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: AttributeError: 'int' object has no attribute 'translate'")
        );
        assert!(std::fs::read_to_string(&conf).unwrap().ends_with("5 = 1\n"));
    }

    #[tokio::test]
    async fn unknown_parameters_are_errors() {
        if which("sysctl").is_err() {
            return;
        }
        let r = call(
            &ctx(),
            "sysctl.assign",
            &[s("brine.no.such.key"), Value::from(1)],
        )
        .await;
        assert_eq!(r.ret, s("ERROR: sysctl brine.no.such.key does not exist"));
        let r = call(&ctx(), "sysctl.get", &[s("brine.no.such.key")]).await;
        assert_eq!(
            r.ret,
            s("sysctl: cannot stat /proc/sys/brine/no/such/key: No such file or directory")
        );
        // `kernel.ostype` cannot be written: sysctl says so only on its standard error.
        let r = call(&ctx(), "sysctl.get", &[s("kernel.ostype")]).await;
        assert_eq!(r.ret, s("Linux"));
        let r = call(&ctx(), "sysctl.show", &[]).await;
        assert!(get_key(&r.ret, "kernel.ostype").is_some_and(|v| v == &s("Linux")));
    }

    fn get_key<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
        v.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }
}
