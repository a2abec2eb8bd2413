//! `source_hash`: the hash a file from a source other than the master must have (Salt's
//! `file.get_source_sum` and `file.extract_hash`), for `file.managed` and
//! `archive.extracted`: a hash expression, or a file of hashes on this machine, on the
//! master (`salt://`) or over `http://`/`https://` (fetched into the cache on every call, as
//! Salt fetches it); `ftp://`, `s3://` and `swift://` hash files are refused by name.

use brine_protocol::crypt::{hash_hex, HashType};

use super::Call;
use crate::url::url_scheme;

/// The hash types by digest length, in Salt's order of lengths.
const BY_LENGTH: [(usize, HashType); 6] = [
    (32, HashType::Md5),
    (40, HashType::Sha1),
    (56, HashType::Sha224),
    (64, HashType::Sha256),
    (96, HashType::Sha384),
    (128, HashType::Sha512),
];

/// The URL schemes a hash file may be named with.
const PROTOCOLS: &str = "salt, file, http, https, ftp, swift, s3";

/// A hash a file must have: its type and lowercase hex digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceSum {
    pub(crate) hash_type: HashType,
    pub(crate) hsum: String,
}

impl SourceSum {
    /// Whether `data` has this hash.
    pub(crate) fn matches(&self, data: &[u8]) -> bool {
        self.digest(data) == self.hsum
    }

    pub(crate) fn digest(&self, data: &[u8]) -> String {
        hash_hex(data, self.hash_type)
    }
}

/// Why a `source_hash` gives no hash.
#[derive(Debug)]
pub(crate) enum SumError {
    /// Not a hash, a hash file with none, or a hash file that cannot be fetched.
    Invalid(String),
    /// A hash file on this machine that cannot be read (Python's `OSError` text).
    Unreadable(String),
    /// A hash file over http(s) that could not be fetched (Salt's `MinionError` text, which
    /// Salt's `file.get_managed` does not catch).
    Fetch(String),
}

impl SumError {
    /// The state's comment under `test=True`, which the state prefixes once more when it
    /// runs for real (Salt reports these through `file.get_managed`).
    pub(crate) fn comment(self) -> String {
        match self {
            SumError::Invalid(e) => format!("Unable to manage file: {e}"),
            SumError::Unreadable(e) | SumError::Fetch(e) => e,
        }
    }
}

/// The hash type a bare digest's length names (Salt's `HASHES_REVMAP`).
pub(crate) fn type_of_length(len: usize) -> Option<HashType> {
    BY_LENGTH.iter().find(|(l, _)| *l == len).map(|(_, t)| *t)
}

fn invalid_format(source_hash: &str) -> String {
    let lengths: Vec<String> = BY_LENGTH
        .iter()
        .map(|(len, t)| format!("{} ({len})", t.as_str()))
        .collect();
    format!(
        "Source hash {source_hash} format is invalid. The supported formats are: 1) a hash, 2) an expression in the format <hash_type>=<hash>, or 3) either a path to a local file containing hashes, or a URI of a remote hash file. Supported protocols for remote hash files are: {PROTOCOLS}. The hash may also not be of a valid length, the following are supported hash types and lengths: {}.",
        lengths.join(", ")
    )
}

/// What a file source's `source_hash` says its hash is (Salt's `get_source_sum`): a hash
/// expression (`<type>=<hex>` or a bare digest whose length names the type), or a file of
/// hashes (an absolute path, `file://` or `salt://`) searched for the managed file's name.
pub(crate) fn source_sum(
    c: &Call,
    name: &str,
    source: &str,
    source_hash: &str,
) -> Result<SourceSum, SumError> {
    use SumError::Invalid;
    let hash_file = if source_hash.starts_with('/') {
        let text = std::fs::read(source_hash).map_err(|e| {
            let code = e.raw_os_error().unwrap_or(0);
            SumError::Unreadable(format!(
                "[Errno {code}] {}: '{source_hash}'",
                nix::errno::Errno::from_raw(code).desc()
            ))
        })?;
        Some(text)
    } else {
        match url_scheme(source_hash).as_str() {
            "" => None,
            "salt" | "file" => match c.host.fetch(source_hash, c.saltenv).map_err(Invalid)? {
                Some(bytes) => Some(bytes),
                None => return Err(Invalid(format!("Source hash file {source_hash} not found"))),
            },
            "http" | "https" => {
                let fetch = crate::url::Fetch {
                    verify_ssl: c.flag("verify_ssl", true),
                    ..crate::url::Fetch::default()
                };
                let cached = c
                    .host
                    .cache_url(source_hash, c.saltenv, &fetch)
                    .map_err(SumError::Fetch)?;
                Some(std::fs::read(&cached).map_err(|e| Invalid(e.to_string()))?)
            }
            "ftp" | "swift" | "s3" => return Err(Invalid(crate::url::refused(source_hash))),
            _ => return Err(Invalid(invalid_format(source_hash))),
        }
    };
    if let Some(text) = hash_file {
        let found = extract_hash(
            &String::from_utf8_lossy(&text),
            name,
            source,
            c.text("source_hash_name").as_deref(),
        );
        return found.ok_or_else(|| Invalid(invalid_format(source_hash)));
    }
    // A hash expression.
    let (hash_type, hsum) = match source_hash.split_once('=') {
        Some((t, h)) => (t.trim().to_string(), h.trim().to_string()),
        None => {
            let hex =
                !source_hash.is_empty() && source_hash.chars().all(|ch| ch.is_ascii_hexdigit());
            let Some(t) = hex.then(|| type_of_length(source_hash.len())).flatten() else {
                return Err(Invalid(invalid_format(source_hash)));
            };
            (t.as_str().to_string(), source_hash.to_string())
        }
    };
    let Some(parsed) = HashType::parse(&hash_type).filter(|t| t.as_str() == hash_type) else {
        return Err(Invalid(format!(
            "Invalid hash type '{hash_type}'. Supported hash types are: sha512, sha384, sha256, sha224, sha1, md5. Either remove the hash type and simply use '{hsum}' as the source_hash, or change the hash type to a supported type."
        )));
    };
    let len = hsum.chars().count();
    match type_of_length(len) {
        None => return Err(Invalid(invalid_format(source_hash))),
        Some(other) if other != parsed => {
            return Err(Invalid(format!(
                "Invalid length ({len}) for hash type '{hash_type}'. Either remove the hash type and simply use '{hsum}' as the source_hash, or change the hash type to '{}'",
                other.as_str()
            )))
        }
        Some(_) => {}
    }
    Ok(SourceSum {
        hash_type: parsed,
        hsum: hsum.to_lowercase(),
    })
}

/// The first digest on a line: a run of letters and digits that is all hex and 32 to 128
/// long, not touching another letter or digit. `None` when the first such run has a length
/// no hash type has (Salt then skips the line).
fn line_hash(line: &str) -> Option<Option<SourceSum>> {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let word = &line[start..i];
        if (32..=128).contains(&word.len()) && word.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(type_of_length(word.len()).map(|hash_type| SourceSum {
                hash_type,
                hsum: word.to_lowercase(),
            }));
        }
    }
    None
}

/// Whether `line` ends with `tail` right after one of `separators`.
fn ends_with_after(line: &str, tail: &str, separators: &str) -> bool {
    line.strip_suffix(tail)
        .and_then(|head| head.chars().last())
        .is_some_and(|ch| separators.contains(ch))
}

/// Whether `line` starts with `head` followed by whitespace.
fn starts_with_then_space(line: &str, head: &str) -> bool {
    line.strip_prefix(head)
        .and_then(|rest| rest.chars().next())
        .is_some_and(char::is_whitespace)
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Salt's `extract_hash` over a hash file's text: the hash on the line naming
/// `source_hash_name`, else the managed file's name, else the source's, else the file's
/// first hash.
fn extract_hash(
    text: &str,
    name: &str,
    source: &str,
    source_hash_name: Option<&str>,
) -> Option<SourceSum> {
    const WHITESPACE: &str = " \t\n\r\x0b\x0c";
    const SEPARATORS: &str = " \t\n\r\x0b\x0c\\/*";
    let source_base = {
        // The URL's path, else its host.
        let rest = source.split_once("://").map_or(source, |(_, rest)| rest);
        let path = if source.contains("://") {
            rest.find('/').map_or("", |at| &rest[at..])
        } else {
            rest
        };
        let path = path.split(['?', '#']).next().unwrap_or(path);
        if path.is_empty() {
            basename(rest)
        } else {
            basename(path)
        }
    };
    let name_base = basename(name);
    let mut first = None;
    let mut by_hash_name = None;
    let mut by_name = None;
    let mut by_source = None;
    for line in text.lines() {
        let line = line.trim_matches(|ch: char| ch.is_whitespace());
        let Some(Some(sum)) = line_hash(line) else {
            continue;
        };
        first.get_or_insert_with(|| sum.clone());
        if let Some(hash_name) = source_hash_name.filter(|n| !n.is_empty()) {
            if ends_with_after(line, hash_name, WHITESPACE)
                || (!line.ends_with(hash_name) && starts_with_then_space(line, hash_name))
            {
                by_hash_name.get_or_insert_with(|| sum.clone());
            }
        }
        if !name.is_empty()
            && (ends_with_after(line, name_base, SEPARATORS)
                || (!line.ends_with(name_base) && starts_with_then_space(line, name)))
        {
            by_name.get_or_insert_with(|| sum.clone());
        }
        if !source.is_empty()
            && (ends_with_after(line, source_base, SEPARATORS)
                || (!line.ends_with(source_base) && starts_with_then_space(line, source)))
        {
            by_source.get_or_insert_with(|| sum.clone());
        }
    }
    by_hash_name.or(by_name).or(by_source).or(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD5: &str = "b1946ac92492d2347c6235b4d2611184";
    const SHA256: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

    fn sum(t: HashType, h: &str) -> Option<SourceSum> {
        Some(SourceSum {
            hash_type: t,
            hsum: h.into(),
        })
    }

    #[test]
    fn schemes_are_read_as_python_reads_them() {
        assert_eq!(url_scheme("salt://x"), "salt");
        assert_eq!(url_scheme("HTTP://x"), "http");
        assert_eq!(url_scheme("md5=abc"), "");
        assert_eq!(url_scheme("sha256:abc"), "sha256");
        assert_eq!(url_scheme("1abc:x"), "");
        assert_eq!(url_scheme(MD5), "");
    }

    #[test]
    fn a_hash_file_is_searched_by_name_then_source_then_first_hash() {
        let text = format!("{MD5}  other.txt\n{SHA256} *dir/src.txt\n");
        // By the managed file's name.
        assert_eq!(
            extract_hash(&text, "/out/other.txt", "/x/src.txt", None),
            sum(HashType::Md5, MD5)
        );
        // By the source's base name after a separator.
        assert_eq!(
            extract_hash(&text, "/out/new", "salt://a/src.txt", None),
            sum(HashType::Sha256, SHA256)
        );
        // source_hash_name first.
        assert_eq!(
            extract_hash(&text, "/out/src.txt", "", Some("other.txt")),
            sum(HashType::Md5, MD5)
        );
        // Nothing named: the first hash.
        assert_eq!(
            extract_hash(&text, "/out/none", "/none", None),
            sum(HashType::Md5, MD5)
        );
        // A hash touching other letters, or of no hash type's length, is no hash.
        assert_eq!(extract_hash(&format!("x{MD5} a\n"), "a", "", None), None);
        assert_eq!(
            extract_hash(
                &format!("{}  a\n{MD5}  b\n", "a".repeat(33)),
                "/a",
                "",
                None
            ),
            sum(HashType::Md5, MD5)
        );
        assert_eq!(extract_hash("no hash\n", "/a", "", None), None);
    }
}
