//! `file.managed` from an `http://` or `https://` source, as Salt's `file.get_managed` and
//! `file.source_list` do it: a `source_hash` (or `skip_verify`) is required; the file is
//! fetched into the minion's cache (`extrn_files`) unless the cached copy already has the
//! hash (or `skip_verify` is set and a copy is there); in a `source` list, the first URL
//! whose HEAD succeeds is the one used; a file in place that already has the hash is left as
//! it is without any download.

use std::path::{Path, PathBuf};

use super::super::source_hash::{source_sum, SourceSum, SumError};
use super::Call;
use crate::url::{extrn_path, is_http, redact_http_basic_auth, Fetch};

/// What an http(s) source gives: the bytes, the hash they must have (unless `skip_verify` or
/// `use_etag`), and where they are cached.
pub(super) struct Remote {
    pub(super) bytes: Vec<u8>,
    pub(super) sum: Option<SourceSum>,
    pub(super) cached: PathBuf,
}

/// The http(s) source that Salt's `file.source_list` picks, when it picks one, with its
/// hash: a source that is not a list as it is, else the first entry that exists (a URL whose
/// HEAD succeeds, a file on the master or on this machine). `None` when the pick is not an
/// http(s) URL.
pub(super) fn chosen_http_source(
    c: &Call,
    sources: &[(String, Option<String>)],
    listed: bool,
) -> Option<(String, Option<String>)> {
    if !listed {
        return sources.first().filter(|(s, _)| is_http(s)).cloned();
    }
    for (source, hash) in sources {
        if is_http(source) {
            if c.host.url_exists(source) {
                return Some((source.clone(), hash.clone()));
            }
        } else if c.host.fetch(source, c.saltenv).ok().flatten().is_some() {
            return None;
        }
    }
    None
}

/// Salt's check before anything is fetched: whether the file in place already has the hash
/// `source_hash` gives for an http(s) source. A `source_hash` that gives no hash counts as
/// no; a hash file over http(s) that cannot be fetched is an error (Salt lets it escape).
pub(super) fn in_place_has_hash(
    c: &Call,
    name: &str,
    path: &Path,
    source: &str,
    source_hash: Option<&str>,
) -> Result<bool, String> {
    let Some(hash) = source_hash else {
        return Ok(false);
    };
    match source_sum(c, name, source, hash) {
        Ok(sum) => Ok(std::fs::read(path).is_ok_and(|b| sum.matches(&b))),
        Err(SumError::Fetch(e)) => Err(e),
        Err(_) => Ok(false),
    }
}

/// Salt's `file.get_managed` for an http(s) source with the `source_hash` it has. `Err`
/// carries its comment (the state prefixes it with `Unable to manage file: ` outside test
/// mode).
pub(super) fn fetch(
    c: &Call,
    name: &str,
    source: &str,
    source_hash: Option<&str>,
) -> Result<Remote, String> {
    let skip_verify = c.flag("skip_verify", false);
    // Salt's test mode checks changes without use_etag.
    let use_etag = !c.test && c.flag("use_etag", false);
    let mut sum = None;
    if !skip_verify {
        match source_hash {
            Some(hash) => sum = Some(source_sum(c, name, source, hash).map_err(SumError::comment)?),
            None if !use_etag => {
                return Err(format!(
                    "Unable to verify upstream hash of source file {}, please set source_hash or set skip_verify to True",
                    redact_http_basic_auth(source)
                ))
            }
            None => {}
        }
    }
    let redacted = redact_http_basic_auth(source);
    let cached = extrn_path(&c.host.cachedir(), source, c.saltenv)
        .ok()
        .filter(|p| p.exists());
    let reuse = cached.filter(|p| {
        skip_verify
            || (!use_etag
                && sum
                    .as_ref()
                    .is_some_and(|s| std::fs::read(p).is_ok_and(|b| s.matches(&b))))
    });
    let path = match reuse {
        Some(p) => p,
        None => {
            let fetch = Fetch {
                source_hash: sum.as_ref().map(|s| s.hsum.clone()),
                verify_ssl: c.flag("verify_ssl", true),
                use_etag,
            };
            c.host
                .cache_url(source, c.saltenv, &fetch)
                .map_err(|e| format!("Failed to cache {redacted}: {e}"))?
        }
    };
    let bytes = std::fs::read(&path).map_err(|_| format!("Source file '{redacted}' not found"))?;
    Ok(Remote {
        bytes,
        // The download is checked against source_hash unless skip_verify or use_etag.
        sum: sum.filter(|_| !use_etag),
        cached: path,
    })
}

/// A cached source deleted when dropped (`keep_source: False`).
pub(super) struct RemoveOnDrop(pub(super) PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
