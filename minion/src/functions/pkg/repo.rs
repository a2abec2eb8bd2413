//! APT repositories (Salt's `aptpkg.list_repos`, `get_repo`, `del_repo`, `mod_repo`): the
//! one-line source lists read and rewritten through [`brine_state::apt_sources`], keys added
//! with apt-key or, without it, as keyrings for `signed-by`.

use std::path::Path;

use rmpv::Value;

use super::super::args::{is_true, py_str, Bound};
use super::super::cmd::{run_argv, run_argv_stdin, which};
use super::super::{Context, FnError};
use super::{argv, Pkg, DPKG_ENV};
use brine_protocol::payload::{get_str, map, py_truthy};
use brine_state::apt_sources::{self, split_repo, RepoInfo, SourceEntry, SourcesList};

/// Where APT's configuration is.
const APT_DIR: &str = "/etc/apt";

/// Whether the minion runs a distribution whose `ppa:` definitions Salt expands.
fn ppa_os(ctx: &Context) -> bool {
    apt_sources::ppa_os(get_str(ctx.grains.as_ref(), "os").unwrap_or_default())
}

/// A `ppa:owner/name` definition as the line Launchpad serves.
fn expand_ppa(ctx: &Context, repo: &str) -> Result<String, FnError> {
    let dist = get_str(ctx.grains.as_ref(), "oscodename").unwrap_or_default();
    let Some((owner, name)) = repo[4..].split_once('/') else {
        return Err(FnError::Exception(
            "ValueError: not enough values to unpack (expected 2, got 1)".into(),
        ));
    };
    Ok(apt_sources::ppa_line(owner, name, dist))
}

fn load() -> Result<SourcesList, FnError> {
    SourcesList::load(Path::new(APT_DIR)).map_err(|e| FnError::Execution(e.to_string()))
}

fn save(sources: &SourcesList) -> Result<(), FnError> {
    sources
        .save()
        .map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_exception(&e, None)))
}

fn texts(items: &[String]) -> Value {
    Value::Array(items.iter().map(|s| Value::from(s.as_str())).collect())
}

/// A repository as `list_repos` and `get_repo` answer it.
fn info_value(info: &RepoInfo) -> Value {
    map([
        ("file", Value::from(info.file.as_str())),
        ("comps", texts(&info.comps)),
        ("disabled", Value::Boolean(info.disabled)),
        ("dist", Value::from(info.dist.as_str())),
        ("type", Value::from(info.kind.as_str())),
        ("uri", Value::from(info.uri.as_str())),
        ("line", Value::from(info.line.as_str())),
        ("architectures", texts(&info.architectures)),
        ("signedby", Value::from(info.signedby.as_str())),
    ])
}

/// `pkg.list_repos`: every repository by URI.
pub(super) fn list_repos() -> Result<Value, FnError> {
    let repos = load()?.repos();
    Ok(Value::Map(
        repos
            .into_iter()
            .map(|(uri, infos)| {
                let list = infos.iter().map(info_value).collect();
                (Value::from(uri), Value::Array(list))
            })
            .collect(),
    ))
}

/// The definition a call names (`ppa:` expanded where Salt expands it).
fn definition(ctx: &Context, b: &Bound) -> Result<String, FnError> {
    let repo = b.get("repo").map(py_str).unwrap_or_default();
    if repo.starts_with("ppa:") && ppa_os(ctx) {
        if let Some(auth) = b.kwarg("ppa_auth").filter(|v| py_truthy(v)) {
            let dist = get_str(ctx.grains.as_ref(), "oscodename").unwrap_or_default();
            let (owner, name) = repo[4..].split_once('/').unwrap_or((&repo[4..], ""));
            return Ok(apt_sources::private_ppa_line(&py_str(auth), owner, name, dist));
        }
        return expand_ppa(ctx, &repo);
    }
    Ok(repo)
}

/// `pkg.get_repo`: the repository a definition matches, `{}` when none.
pub(super) fn get_repo(ctx: &Context, b: &Bound) -> Result<Value, FnError> {
    let repo = definition(ctx, b)?;
    Ok(load()?
        .find(&repo)
        .map_or(Value::Map(Vec::new()), |i| info_value(&i)))
}

/// `pkg.del_repo`: the definition's components taken out of the lists (a line left without
/// any removed, a `sources.list.d` file left without lines removed), then the package
/// database refreshed. What was removed from where.
pub(super) async fn del_repo(pkg: &Pkg<'_>, b: &Bound) -> Result<Value, FnError> {
    let repo = definition(pkg.ctx, b)?;
    let mut sources = load()?;
    let missing = || FnError::Execution(format!("Repo {repo} doesn't exist in the sources.list(s)"));
    if sources.list.iter().all(|e| e.invalid) {
        return Err(missing());
    }
    let touched = sources.delete(&repo);
    save(&sources)?;
    let Some(touched) = touched else {
        return Err(missing());
    };
    let mut out = String::new();
    for (file, left) in touched {
        if left == 0 && file.contains("sources.list.d/") && Path::new(&file).is_file() {
            let _ = std::fs::remove_file(&file);
            out.push_str(&format!("File {file} containing repo '{repo}' has been removed."));
        } else {
            out.push_str(&format!("Repo '{repo}' has been removed from {file}.\n"));
        }
    }
    pkg.refresh_db(0).await?;
    Ok(Value::from(out))
}

/// A keyword argument as Python's `str()` shows it, if given.
fn kw_text(b: &Bound, key: &str) -> Option<String> {
    b.kwarg(key).map(py_str)
}

/// A path as `pathlib.Path` spells it (repeated and trailing `/` and `.` parts dropped).
fn py_path(p: &str) -> String {
    if p.is_empty() {
        return String::new();
    }
    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    let body = parts.join("/");
    match (p.starts_with('/'), body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

/// The last part of a path.
fn file_name(p: &str) -> &str {
    brine_protocol::posixpath::basename(p)
}

/// The directory part of a path as `pathlib` gives it (`.` for a bare name).
fn parent(p: &str) -> String {
    match brine_protocol::posixpath::dirname(p) {
        d if d.is_empty() => ".".into(),
        d => d,
    }
}

/// `cp.cache_file` of a key's source: the cached path, `None` when there is no such file.
async fn cache_key(ctx: &Context, source: &str, saltenv: &str) -> Result<Option<String>, FnError> {
    super::super::cache_file(ctx, Value::from(source), Value::from(saltenv)).await
}

/// Salt's `add_repo_key(path=..., aptkey=False)`: the key file copied into `keydir` (as
/// `keyfile`, else under its own name), an ASCII-armored key dearmored with gpg unless the
/// keyring is to be `.asc`; readable by all (apt reads it as `_apt`). Whether it was added.
async fn key_into_keyring(path: &str, keydir: &str, keyfile: Option<&str>) -> Result<bool, FnError> {
    if !Path::new(keydir).is_dir() {
        tracing::error!(
            "The directory {keydir} does not exist. Please create this directory only writable by root"
        );
        return Ok(false);
    }
    let dest_name = keyfile.unwrap_or(file_name(path)).to_string();
    let armored = std::fs::read(path)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .is_some_and(|t| t.trim_matches('-').starts_with("BEGIN PGP"));
    let mut key = path.to_string();
    if armored && !dest_name.ends_with(".asc") {
        if which("gpg").is_none() {
            tracing::error!(
                "Detected an ASCII armored key {path} and the gpg binary is not available. Not decrypting the key."
            );
            return Ok(false);
        }
        let out = format!("{path}.decrypted");
        let ran = run_argv(
            &argv(&["gpg", "--yes", "--output", &out, "--dearmor", path]),
            &[],
        )
        .await?;
        if ran.retcode() != 0 {
            tracing::error!("Failed to decrypt the key {path}");
        }
        key = out;
    }
    let name = match keyfile {
        Some(k) => k.to_string(),
        None => file_name(&key)
            .strip_suffix(".decrypted")
            .unwrap_or(file_name(&key))
            .to_string(),
    };
    let dest = Path::new(keydir).join(name);
    std::fs::copy(&key, &dest).map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_exception(&e, None)))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644))
        .map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_exception(&e, None)))?;
    Ok(true)
}

/// The keys `mod_repo` is given (`keyid` with `keyserver`, `key_url` or `key_text`), added
/// as Salt adds them.
async fn add_keys(ctx: &Context, b: &Bound, aptkey: bool, signedby: &str, saltenv: &str) -> Result<(), FnError> {
    if let Some(keyid) = b.kwarg("keyid") {
        let keyserver = b.kwarg("keyserver").filter(|v| py_truthy(v));
        let (true, Some(keyserver)) = (py_truthy(keyid), keyserver) else {
            // Salt raises NameError here; the state shows its text.
            return Err(FnError::Execution(
                "both keyserver and keyid options required.".into(),
            ));
        };
        let keyserver = py_str(keyserver);
        let ids: Vec<String> = match keyid {
            Value::Array(items) => items.iter().map(key_id).collect(),
            one => vec![key_id(one)],
        };
        for id in ids {
            if aptkey {
                let out = run_argv(&argv(&["apt-key", "export", &id]), DPKG_ENV).await?;
                if out.stdout().starts_with("-----BEGIN PGP") {
                    continue;
                }
                let fetched = run_argv(
                    &argv(&["apt-key", "adv", "--batch", "--keyserver", &keyserver, "--logger-fd", "1", "--recv-keys", &id]),
                    DPKG_ENV,
                )
                .await?;
                if fetched.retcode() != 0 {
                    return Err(FnError::Execution(format!(
                        "Error: key retrieval failed: {}",
                        fetched.stdout()
                    )));
                }
            } else {
                let keyring = signedby.to_string();
                let listed = run_argv(
                    &argv(&["gpg", "--no-default-keyring", "--keyring", &keyring, "--list-keys", "--with-colons"]),
                    &[],
                )
                .await?;
                let present = listed
                    .stdout()
                    .lines()
                    .filter(|l| l.starts_with("pub:"))
                    .filter_map(|l| l.split(':').nth(4))
                    .any(|k| k.ends_with(id.as_str()));
                if present {
                    continue;
                }
                let fetched = run_argv(
                    &argv(&["gpg", "--no-default-keyring", "--keyring", &keyring, "--keyserver", &keyserver, "--recv-keys", &id]),
                    &[],
                )
                .await?;
                if fetched.retcode() != 0 {
                    tracing::error!("Unable to add repo key: {}", fetched.stderr());
                    return Err(FnError::Execution(format!("Error: Could not add key: {id}")));
                }
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&keyring, std::fs::Permissions::from_mode(0o644));
            }
        }
    } else if let Some(url) = b.kwarg("key_url") {
        let url = py_str(url);
        let Some(mut cached) = cache_key(ctx, &url, saltenv).await? else {
            return Err(FnError::Execution(format!("Error: file not found: {url}")));
        };
        if !signedby.is_empty() && file_name(&cached) != file_name(signedby) {
            let renamed = format!("{}/{}", parent(&cached), file_name(signedby));
            std::fs::rename(&cached, &renamed)
                .map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_exception(&e, None)))?;
            cached = renamed;
        }
        if !aptkey {
            let keydir = if signedby.is_empty() {
                "/etc/apt/keyrings".to_string()
            } else {
                parent(signedby)
            };
            if !key_into_keyring(&cached, &keydir, None).await? {
                return Err(FnError::Execution(format!("Error: Could not add key: {cached}")));
            }
        } else {
            let out = run_argv(&argv(&["apt-key", "add", &cached]), DPKG_ENV).await?;
            if !out.stdout().to_uppercase().starts_with("OK") {
                return Err(FnError::Execution(format!(
                    "Error: failed to add key from {url}"
                )));
            }
        }
    } else if let Some(text) = b.kwarg("key_text") {
        let text = py_str(text);
        let out = match run_argv_stdin(&argv(&["apt-key", "add", "-"]), DPKG_ENV, &text).await {
            Ok(out) => out.stdout().to_uppercase(),
            Err(_) => String::new(),
        };
        if !out.starts_with("OK") {
            return Err(FnError::Execution(format!(
                "Error: failed to add key:\n{text}"
            )));
        }
    }
    Ok(())
}

/// A key id as Salt passes it on (a YAML integer in hex, as Python's `hex()`).
fn key_id(v: &Value) -> String {
    match v {
        Value::Integer(i) => match i.as_i64() {
            Some(n) if n < 0 => format!("-0x{:x}", n.unsigned_abs()),
            Some(n) => format!("0x{n:x}"),
            None => format!("0x{:x}", i.as_u64().unwrap_or_default()),
        },
        other => py_str(other),
    }
}

/// Comments (a list, or one value) as Salt's `combine_comments` joins them.
fn comments_text(v: &Value) -> String {
    let items: Vec<String> = match v {
        Value::Array(items) => items.iter().map(py_str).collect(),
        one => vec![py_str(one)],
    };
    brine_state::apt_sources::combine_comments(&items)
}

/// `pkg.mod_repo`: the repository made or changed as a definition and the call's options
/// (`comps`, `architectures`, `disabled`/`enabled`, `file`, `dist`, `comments`,
/// `consolidate`) say, its keys added, the lists saved, the database refreshed unless
/// `refresh=False`. `{definition: the repository}`.
pub(super) async fn mod_repo(pkg: &Pkg<'_>, b: &Bound) -> Result<Value, FnError> {
    let ctx = pkg.ctx;
    let refresh = b
        .kwarg("refresh_db")
        .or(b.kwarg("refresh"))
        .is_none_or(|v| is_true(Some(v)));
    let mut aptkey = b.get("aptkey").is_none_or(|v| is_true(Some(v)));
    if which("apt-key").is_none() {
        aptkey = false;
    }
    let saltenv = b.get("saltenv").map_or("base".to_string(), py_str);
    let repo = b.get("repo").map(py_str).unwrap_or_default();
    if let Some(ppa) = repo.strip_prefix("ppa:") {
        if !ppa_os(ctx) {
            return Err(FnError::Execution(format!(
                "cannot parse \"ppa:\" style repo definitions: {repo}"
            )));
        }
        if which("apt-add-repository").is_none() || b.kwarg("ppa_auth").is_some() {
            return Err(FnError::Execution(format!(
                "Brine adds PPAs with apt-add-repository (package software-properties-common), and private PPAs not at all: {repo}"
            )));
        }
        let line = expand_ppa(ctx, &repo)?;
        if let Some(found) = load()?.find(&line) {
            return Ok(map([(repo.as_str(), info_value(&found))]));
        }
        let out = pkg.run(argv(&["apt-add-repository", "-y", &repo])).await?;
        if out.retcode() != 0 {
            return Err(FnError::Execution(format!(
                "Unable to add PPA '{}'. '['apt-add-repository', '-y', '{repo}']' exited with status {}: '{}' ",
                ppa,
                out.retcode(),
                out.stderr()
            )));
        }
        if refresh {
            pkg.refresh_db(0).await?;
        }
        return Ok(map([(repo.as_str(), out.into_map(false))]));
    }
    let mut sources = load()?;
    if b.kwarg("consolidate").is_some_and(|v| is_true(Some(v))) {
        sources
            .consolidate()
            .map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_exception(&e, None)))?;
    }
    let entry = split_repo(&repo);
    if entry.invalid {
        return Err(FnError::Invocation(format!(
            "Name {repo} is not valid. This must be the complete repo entry as seen in the sources file"
        )));
    }
    let mut full_comps: Vec<String> = Vec::new();
    for c in &entry.comps {
        if !full_comps.contains(c) {
            full_comps.push(c.clone());
        }
    }
    let signedby = py_path(&entry.signedby);
    if !aptkey && signedby.is_empty() {
        return Err(FnError::Invocation(
            "missing 'signedby' option when apt-key is missing".into(),
        ));
    }
    add_keys(ctx, b, aptkey, &signedby, &saltenv).await?;

    let comps: Vec<String> = match kw_text(b, "comps") {
        Some(text) => {
            let given: Vec<String> = text.split(',').map(|c| brine_protocol::pystr::strip(c).to_string()).collect();
            for c in &given {
                if !full_comps.contains(c) {
                    full_comps.push(c.clone());
                }
            }
            given
        }
        None => full_comps.clone(),
    };
    let architectures: Vec<String> = match kw_text(b, "architectures") {
        Some(text) => text.split(',').map(str::to_string).collect(),
        None => entry.architectures.clone(),
    };
    let disabled = match (b.kwarg("disabled"), b.kwarg("enabled")) {
        (Some(d), _) => Some(is_true(Some(d))),
        (None, Some(e)) => Some(!is_true(Some(e))),
        (None, None) => None,
    };
    let (kw_type, kw_dist) = (kw_text(b, "type"), kw_text(b, "dist"));
    let found = sources.list.iter().position(|s| {
        let repo_matches = s.kind == entry.kind
            && s.uri.trim_end_matches('/') == entry.uri.trim_end_matches('/')
            && s.dist == entry.dist;
        let kw_matches = Some(&s.dist) == kw_dist.as_ref() && Some(&s.kind) == kw_type.as_ref();
        (repo_matches || kw_matches)
            && (full_comps.iter().any(|c| s.comps.contains(c))
                || s.comps.is_empty()
                || architectures != s.architectures)
    });
    let comment = b.kwarg("comments").map(comments_text);
    let idx = match found {
        Some(i) => i,
        None => {
            sources.list.push(SourceEntry::parse(&repo, None));
            sources.list.len() - 1
        }
    };
    let source = &mut sources.list[idx];
    if let Some(c) = comment {
        source.comment = c;
    }
    source.line = if repo.ends_with('\n') {
        repo.clone()
    } else {
        format!("{repo}\n")
    };
    source.comps = comps;
    source.architectures = architectures;
    source.signedby = signedby;
    if let Some(d) = disabled {
        source.disabled = d;
    }
    if let Some(f) = kw_text(b, "file") {
        source.file = f;
    }
    if let Some(d) = kw_dist {
        source.dist = d;
    }
    let uri_given = kw_text(b, "uri");
    if uri_given.is_some_and(|u| u != entry.uri) || source.uri != entry.uri {
        source.uri = entry.uri.clone();
        source.line = source.repo_line();
    }
    let source = source.clone();
    save(&sources)?;
    if refresh {
        pkg.refresh_db(0).await?;
    }
    // Salt keeps a definition's signed-by as a `pathlib.Path`, which its outputters show
    // by its repr.
    let signedby_shown = if source.signedby.is_empty() {
        Value::from("")
    } else {
        Value::from(format!(
            "PosixPath({})",
            brine_protocol::pyrepr::str_repr(&source.signedby)
        ))
    };
    Ok(map([(
        repo.as_str(),
        map([
            ("architectures", texts(&source.architectures)),
            ("comps", texts(&source.comps)),
            ("disabled", Value::Boolean(source.disabled)),
            ("file", Value::from(source.file.as_str())),
            ("type", Value::from(source.kind.as_str())),
            ("uri", Value::from(source.uri.as_str())),
            ("line", Value::from(source.line.as_str())),
            ("signedby", signedby_shown),
        ]),
    )]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_key_ids_as_python_spells_them() {
        assert_eq!(py_path("/etc/apt//keyrings/./x.gpg/"), "/etc/apt/keyrings/x.gpg");
        assert_eq!(py_path(""), "");
        assert_eq!(parent("/etc/apt/keyrings/x.gpg"), "/etc/apt/keyrings");
        assert_eq!(parent("/x"), "/");
        assert_eq!(key_id(&Value::from(0x7fa3_u32)), "0x7fa3");
        assert_eq!(key_id(&Value::from("ABCD1234")), "ABCD1234");
        assert_eq!(
            comments_text(&Value::Array(vec![Value::from("a"), Value::from(2)])),
            "a 2"
        );
    }
}
