//! `file.cached` and `file.not_cached`: a source (`salt://`, `http(s)://`, a local path) kept
//! in, or taken out of, the minion's file cache, as Salt 3007 keeps it: checked against
//! `source_hash` unless `skip_verify`, the cached copy's hash shown as the change.
//! A signature on a hash file (`source_hash_sig` with a hash file named by URL) is refused
//! by name; Salt reads `signed_by_any`, `signed_by_all`, `keyring` and `gnupghome` only then.

use std::path::Path;

use brine_protocol::crypt::{hash_hex, HashType};
use brine_protocol::posixpath::realpath;
use serde_json::{json, Map, Value};

use super::super::source_hash::{source_sum, SourceSum, SumError};
use brine_protocol::payload::json_truthy;

use super::super::{ret, Call};
use super::{expanduser, Ret};
use crate::url::{redact_http_basic_auth, url_scheme, Fetch};

const REMOTE: &[&str] = &["http", "https", "ftp", "swift", "s3"];

/// The state's arguments.
pub(super) const ACCEPTS: &[&str] = &[
    "name",
    "source_hash",
    "source_hash_name",
    "skip_verify",
    "saltenv",
    "use_etag",
    "source_hash_sig",
    "signed_by_any",
    "signed_by_all",
    "keyring",
    "gnupghome",
];

/// `urlparse(name).path`: what follows the scheme and the network location.
fn url_path(name: &str) -> &str {
    let rest = match name.split_once(':') {
        Some((scheme, rest)) if !url_scheme(name).is_empty() && scheme.len() < name.len() => rest,
        _ => name,
    };
    let rest = match rest.strip_prefix("//") {
        Some(after) => after.find('/').map_or("", |i| &after[i..]),
        None => rest,
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// The minion's `hash_type` option (sha256 unless set).
fn default_hash_type(c: &Call) -> HashType {
    c.host
        .call(
            "config.get",
            &[json!("hash_type"), json!("sha256")],
            &Map::new(),
        )
        .ok()
        .and_then(|v| v.as_str().and_then(HashType::parse))
        .unwrap_or(HashType::Sha256)
}

fn file_hash(path: &Path, hash_type: HashType) -> Option<String> {
    std::fs::read(path).ok().map(|b| hash_hex(&b, hash_type))
}

pub(super) fn cached(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let mut r = ret(&name, json!(false), "", json!({}));
    let done = |mut r: Ret, result: Value, comment: String| {
        r.insert("result".into(), result);
        r.insert("comment".into(), json!(comment));
        Ok(r)
    };
    let source_hash = c.text("source_hash").unwrap_or_default();
    // Salt checks a signature only on a hash file named by URL.
    let hash_file_url = !source_hash.starts_with('/') && !url_scheme(&source_hash).is_empty();
    if hash_file_url && c.arg("source_hash_sig").is_some_and(json_truthy) {
        let text = "file.cached: not supported by Brine: source_hash_sig".to_string();
        return done(r, json!(false), text);
    }
    let saltenv = c.text("saltenv").unwrap_or_else(|| c.saltenv.to_string());
    let scheme = url_scheme(&name);
    let skip_verify = c.flag("skip_verify", false);
    let use_etag = c.flag("use_etag", false);
    if !skip_verify && source_hash.is_empty() && !use_etag && REMOTE.contains(&scheme.as_str()) {
        let text = format!(
            "Unable to verify upstream hash of source file {}, please set source_hash or set skip_verify or use_etag to True",
            redact_http_basic_auth(&name)
        );
        return done(r, json!(false), text);
    }
    let sum: Option<SourceSum> = if source_hash.is_empty() {
        None
    } else {
        match source_sum(c, "", &name, &source_hash) {
            Ok(sum) => Some(sum),
            Err(SumError::Invalid(e) | SumError::Unreadable(e) | SumError::Fetch(e)) => {
                return done(r, json!(false), e)
            }
        }
    };
    let hash_type = sum
        .as_ref()
        .map_or_else(|| default_hash_type(c), |s| s.hash_type);
    let cachedir = c.host.cachedir();
    let is_cached = || {
        let p = crate::url::is_cached(&cachedir, &name, &saltenv);
        (!p.is_empty()).then_some(p)
    };
    if c.test {
        let comment = match (is_cached(), &sum) {
            (Some(local), Some(sum)) => {
                if file_hash(Path::new(&local), default_hash_type(c)).as_ref() == Some(&sum.hsum) {
                    format!("File already cached: {name}")
                } else {
                    format!("Hashes don't match.\nFile will be cached: {name}")
                }
            }
            (Some(_), None) => format!("No hash found. File will be cached: {name}"),
            (None, _) => format!("File will be cached: {name}"),
        };
        return done(r, Value::Null, comment);
    }
    if scheme.is_empty() || scheme == "file" {
        let full_path = realpath(&expanduser(url_path(&name)));
        if !Path::new(&full_path).exists() {
            return done(
                r,
                json!(false),
                format!("File {full_path} is not present on the minion"),
            );
        }
        return match sum.as_ref().filter(|_| !skip_verify) {
            Some(sum) => {
                let local = file_hash(Path::new(&full_path), sum.hash_type).unwrap_or_default();
                if local == sum.hsum {
                    done(
                        r,
                        json!(true),
                        format!("File {full_path} is present on the minion and has hash {local}"),
                    )
                } else {
                    done(
                        r,
                        json!(false),
                        format!(
                            "File {full_path} is present on the minion, but the hash ({local}) does not match the specified hash ({})",
                            sum.hsum
                        ),
                    )
                }
            }
            None => done(
                r,
                json!(true),
                format!("File {full_path} is present on the minion"),
            ),
        };
    }
    let pre_hash = is_cached().and_then(|p| file_hash(Path::new(&p), hash_type));
    let copy = if scheme == "salt" {
        c.host.cache_file(&name, &saltenv)
    } else {
        let fetch = Fetch {
            source_hash: sum.as_ref().map(|s| s.hsum.clone()),
            verify_ssl: true,
            use_etag,
        };
        c.host.cache_url(&name, &saltenv, &fetch).map(Some)
    };
    let local_copy = match copy {
        Ok(Some(p)) => p,
        Ok(None) => {
            let text = format!(
                "Failed to cache {}, check minion log for more information",
                redact_http_basic_auth(&name)
            );
            return done(r, json!(false), text);
        }
        Err(e) => return done(r, json!(false), redact_http_basic_auth(&e)),
    };
    let post_hash = file_hash(&local_copy, hash_type);
    if pre_hash != post_hash {
        r.insert(
            "changes".into(),
            json!({"hash": {"old": pre_hash, "new": post_hash}}),
        );
    }
    let post = post_hash.unwrap_or_default();
    let shown = local_copy.display();
    match sum.filter(|_| !skip_verify) {
        Some(sum) if post == sum.hsum => done(
            r,
            json!(true),
            format!("File is already cached to {shown} with hash {post}"),
        ),
        Some(sum) => done(
            r,
            json!(false),
            format!(
                "File is cached to {shown}, but the hash ({post}) does not match the specified hash ({})",
                sum.hsum
            ),
        ),
        None => done(r, json!(true), format!("File is cached to {shown}")),
    }
}

pub(super) fn not_cached(c: &Call) -> Result<Ret, String> {
    let name = c.name();
    let r = ret(&name, json!(false), "", json!({}));
    let done = |mut r: Ret, result: bool, comment: String| {
        r.insert("result".into(), json!(result));
        r.insert("comment".into(), json!(comment));
        Ok(r)
    };
    let scheme = url_scheme(&name);
    if scheme.is_empty() || scheme == "file" {
        let full_path = realpath(&expanduser(url_path(&name)));
        return done(
            r,
            true,
            format!("File {full_path} is a local path, no action taken"),
        );
    }
    let saltenv = c.text("saltenv").unwrap_or_else(|| c.saltenv.to_string());
    let local_copy = crate::url::is_cached(&c.host.cachedir(), &name, &saltenv);
    if local_copy.is_empty() {
        return done(r, true, format!("{name} is not cached"));
    }
    match std::fs::remove_file(&local_copy) {
        Ok(()) => {
            let mut r = r;
            r.insert("changes".into(), json!({"deleted": true}));
            done(r, true, format!("{local_copy} was deleted"))
        }
        Err(e) => done(
            r,
            false,
            format!(
                "Failed to delete {local_copy}: {}",
                brine_protocol::pyrepr::os_error(&e, Some(&local_copy))
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::url_path;

    #[test]
    fn url_paths_as_urlparse_reads_them() {
        for (url, path) in [
            ("/srv/a", "/srv/a"),
            ("file:///srv/a", "/srv/a"),
            ("file://host/srv/a", "/srv/a"),
            ("salt://a/b?saltenv=dev", "/b"),
            ("https://u:p@h:8080/x/y?q=1#f", "/x/y"),
            ("relative/x", "relative/x"),
            ("~/x", "~/x"),
        ] {
            assert_eq!(url_path(url), path, "{url}");
        }
    }
}
