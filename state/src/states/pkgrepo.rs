//! The `pkgrepo` state module on Debian-family minions (Salt's `pkgrepo.managed` and
//! `pkgrepo.absent` with `aptpkg`): a repository compared as Salt's `_expand_repo_def` spells
//! it with what `pkg.get_repo` finds, made or changed with `pkg.mod_repo`, removed with
//! `pkg.del_repo`; comments and changes as Salt's.

use serde_json::{json, Map, Value};

use super::{exc_text, ret, Accepts, Call, Spec};
use crate::apt_sources::{self, ExpandArgs, RepoInfo};
use crate::verify::py_text;
use brine_protocol::payload::json_truthy;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "managed",
        required: &["name"],
        accepts: Accepts::Any,
        run: managed,
    },
    Spec {
        name: "absent",
        required: &["name"],
        accepts: Accepts::Any,
        run: absent,
    },
];

/// The grain `key` as text.
fn grain(c: &Call, key: &str) -> String {
    c.host.grains().get(key).map(py_text).unwrap_or_default()
}

/// The state's keyword arguments as the module functions get them.
fn kwargs(c: &Call, skip: &[&str]) -> Map<String, Value> {
    c.state_kwargs()
        .into_iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `pkg.get_repo` of a definition: the repository's fields, `None` when it has none.
fn get_repo(
    c: &Call,
    repo: &str,
    kw: &Map<String, Value>,
) -> Result<Option<Map<String, Value>>, String> {
    let mut kw = kw.clone();
    kw.insert("repo".into(), json!(repo));
    match c.host.call("pkg.get_repo", &[], &kw) {
        Ok(Value::Object(m)) if !m.is_empty() => Ok(Some(m)),
        Ok(_) => Ok(None),
        Err(e) => Err(exc_text(&e).to_string()),
    }
}

/// A list argument split at commas (`"main, contrib"`).
fn split_list(v: Option<&Value>) -> Option<Vec<String>> {
    v.map(|v| {
        py_text(v)
            .split(',')
            .map(|s| brine_protocol::pystr::strip(s).to_string())
            .collect()
    })
}

/// The definition `pkgrepo` compares: Salt's `_expand_repo_def` (a `ppa:` expanded on
/// Ubuntu).
fn expand(c: &Call, repo: &str, kw: &Map<String, Value>, disabled: bool) -> RepoInfo {
    let mut repo = repo.to_string();
    if repo.starts_with("ppa:") && apt_sources::ppa_os(&grain(c, "os")) {
        let dist = grain(c, "oscodename");
        let (owner, name) = repo[4..].split_once('/').unwrap_or((&repo[4..], ""));
        repo = match kw.get("ppa_auth") {
            Some(auth) => apt_sources::private_ppa_line(&py_text(auth), owner, name, &dist),
            None => apt_sources::ppa_line(owner, name, &dist),
        };
    }
    let text = |k: &str| kw.get(k).map(py_text);
    apt_sources::expand(
        &repo,
        &ExpandArgs {
            architectures: split_list(kw.get("architectures")),
            comps: split_list(kw.get("comps")),
            dist: text("dist"),
            uri: text("uri"),
            signedby: text("signedby"),
            disabled,
        },
    )
}

/// Salt's comparison of the wanted repository with the one found: whether a field differs
/// (components as sorted lists, the line with its components sorted and its comment, the
/// architectures as sets, the rest as Python's `str()`).
fn differs(c: &Call, want: &[(&str, Value)], pre: &Map<String, Value>) -> bool {
    let texts = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::Array(items)) => items.iter().map(py_text).collect(),
            _ => Vec::new(),
        }
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let disabled = want.iter().any(|(k, v)| *k == "disabled" && json_truthy(v));
    for (key, value) in want {
        let Some(had) = pre.get(*key) else {
            return true;
        };
        match *key {
            "comps" => {
                if sorted(texts(Some(value))) != sorted(texts(Some(had))) {
                    return true;
                }
            }
            "line" => {
                if disabled {
                    continue;
                }
                let words = |line: &str| -> Vec<String> {
                    let mut w: Vec<String> = brine_protocol::pystr::split(line)
                        .into_iter()
                        .map(str::to_string)
                        .collect();
                    if w.len() > 3 {
                        w[3..].sort();
                    }
                    w
                };
                let had_line = py_text(had);
                let (repo_part, comments) = had_line.split_once('#').unwrap_or((&had_line, ""));
                if words(&py_text(value)) != words(repo_part) {
                    return true;
                }
                if let Some(given) = c.arg("comments") {
                    let given = match given {
                        Value::Array(items) => items.iter().map(py_text).collect(),
                        one => vec![py_text(one)],
                    };
                    if apt_sources::combine_comments(&given)
                        != brine_protocol::pystr::strip(comments)
                    {
                        return true;
                    }
                }
            }
            "architectures" if !texts(Some(value)).is_empty() => {
                let set = |v: Vec<String>| v.into_iter().collect::<std::collections::BTreeSet<_>>();
                if set(texts(Some(value))) != set(texts(Some(had))) {
                    return true;
                }
            }
            _ => {
                if py_text(value) != py_text(had) {
                    return true;
                }
            }
        }
    }
    false
}

/// The fields that differ between two spellings of a repository, as `{new, old}`.
fn field_changes(
    want: &[(&str, Value)],
    new: &Map<String, Value>,
    old: &Map<String, Value>,
) -> Map<String, Value> {
    want.iter()
        .filter(|(k, _)| new.get(*k) != old.get(*k))
        .map(|(k, _)| {
            let get = |m: &Map<String, Value>| m.get(*k).cloned().unwrap_or(Value::Null);
            (k.to_string(), json!({"new": get(new), "old": get(old)}))
        })
        .collect()
}

fn managed(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let mut aptkey = c.flag("aptkey", true);
    if brine_render::which("apt-key").is_none() {
        aptkey = false;
    }
    let mut result = Value::Null;
    let has = |k: &str| c.low.contains_key(k);
    let fail = |comment: &str| Ok(ret(&name, json!(false), comment, json!({})));
    // Salt marks a run given two kinds of key as failed without stopping it: the comment it
    // sets is always replaced later, the failed result stays only under test=True.
    if has("key_url") && (has("keyid") || has("keyserver"))
        || has("key_text") && (has("keyid") || has("keyserver") || has("key_url"))
    {
        result = json!(false);
    }
    if has("repo") {
        return fail("'repo' is not a supported argument for this state. The 'name' argument is probably what was intended.");
    }
    let (enabled, disabled) = (c.low.get("enabled"), c.low.get("disabled"));
    if enabled.is_some() && disabled.is_some() {
        return fail("Only one of enabled/disabled is allowed");
    }
    let insecure = c
        .low
        .get("key_url")
        .is_some_and(|u| brine_protocol::pystr::strip(&py_text(u)).starts_with("http:"));
    if insecure && !c.flag("allow_insecure_key", true) {
        return fail("Cannot have 'key_url' using http with 'allow_insecure_key' set to True");
    }
    if grain(c, "os_family") != "Debian" {
        return fail(&format!(
            "Failed to examine repo '{name}': Brine manages APT repositories only (os_family Debian)"
        ));
    }
    let mut kw = kwargs(
        c,
        &[
            "enabled",
            "disabled",
            "allow_insecure_key",
            "ppa",
            "copr",
            "aptkey",
        ],
    );
    kw.insert("name".into(), json!(name));
    let repo = match c.arg("ppa") {
        Some(ppa) => format!("ppa:{}", py_text(ppa)),
        None => name.clone(),
    };
    let is_disabled = match (enabled, disabled) {
        (Some(e), _) => !json_truthy(e),
        (None, Some(d)) => json_truthy(d),
        (None, None) => false,
    };
    kw.insert("disabled".into(), json!(is_disabled));

    let pre = match get_repo(c, &repo, &kw) {
        Ok(pre) => pre,
        Err(e) => return fail(&format!("Failed to examine repo '{name}': {e}")),
    };
    let mut want: Vec<(&str, Value)> = expand(c, &repo, &kw, is_disabled).fields();
    let mut reconfigure = false;
    if let (Some(_), true, Some(file)) = (&pre, c.flag("clean_file", false), c.text("file")) {
        if let Ok(text) = std::fs::read(&file) {
            let text = String::from_utf8_lossy(&text);
            reconfigure = text.lines().map(brine_protocol::pystr::strip).any(|l| {
                !l.is_empty() && !l.starts_with('#') && l != brine_protocol::pystr::strip(&name)
            });
        }
    }
    let mut pre = pre;
    if let (Some(found), false) = (&mut pre, reconfigure) {
        found.remove("file");
        want.retain(|(k, _)| *k != "file");
        if !differs(c, &want, found) {
            return Ok(ret(
                &name,
                json!(true),
                format!("Package repo '{name}' already configured"),
                json!({}),
            ));
        }
    }
    let want_map: Map<String, Value> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    if c.test {
        let changes = match &pre {
            Some(found) => Value::Object(field_changes(&want, &want_map, found)),
            None => json!({"repo": name}),
        };
        return Ok(ret(
            &name,
            result,
            format!(
                "Package repo '{name}' would be configured. This may cause pkg states to behave differently than stated if this action is repeated without test=True, due to the differences in the configured repositories."
            ),
            changes,
        ));
    }
    if c.flag("clean_file", false) {
        let Some(file) = c.text("file") else {
            return Err("KeyError: 'file'".into());
        };
        std::fs::write(&file, b"")
            .map_err(|e| brine_protocol::pyrepr::os_exception(&e, Some(&file)))?;
    }
    let mut mod_kw = kw.clone();
    mod_kw.insert("repo".into(), json!(repo));
    mod_kw.insert("saltenv".into(), json!(c.saltenv));
    mod_kw.insert("aptkey".into(), json!(aptkey));
    if let Err(e) = c.host.call("pkg.mod_repo", &[], &mod_kw) {
        return fail(&format!(
            "Failed to configure repo '{name}': {}",
            exc_text(&e)
        ));
    }
    let post = match get_repo(c, &repo, &kw) {
        Ok(post) => post.unwrap_or_default(),
        Err(e) => return fail(&format!("Failed to confirm config of repo '{name}': {e}")),
    };
    let changes = match &pre {
        Some(found) => Value::Object(field_changes(&want, &post, found)),
        None => json!({"repo": repo}),
    };
    Ok(ret(
        &name,
        json!(true),
        format!("Configured package repo '{name}'"),
        changes,
    ))
}

fn absent(c: &Call) -> Result<Map<String, Value>, String> {
    let mut name = c.name();
    let mut skip = vec![];
    if let (Some(ppa), true) = (
        c.arg("ppa"),
        matches!(grain(c, "os").as_str(), "Ubuntu" | "Mint"),
    ) {
        name = py_text(ppa);
        if !name.starts_with("ppa:") {
            name = format!("ppa:{name}");
        }
        skip.push("ppa");
    }
    let fail = |comment: String| Ok(ret(&name, json!(false), comment, json!({})));
    if c.arg("keyid").is_some() || c.arg("keyid_ppa").is_some() {
        return fail(
            "Brine's pkgrepo.absent does not remove repository keys (keyid, keyid_ppa)".into(),
        );
    }
    let stripname = apt_sources::strip_uri(&name);
    let kw = kwargs(c, &skip);
    let found = match get_repo(c, &stripname, &kw) {
        Ok(found) => found,
        Err(e) => return fail(format!("Failed to configure repo '{name}': {e}")),
    };
    let found = found.filter(|repo| {
        let want: std::collections::BTreeSet<String> = apt_sources::split_repo(&stripname)
            .architectures
            .into_iter()
            .collect();
        let had: std::collections::BTreeSet<String> = match repo.get("architectures") {
            Some(Value::Array(a)) => a.iter().map(py_text).collect(),
            _ => Default::default(),
        };
        want == had
    });
    if found.is_none() {
        return Ok(ret(
            &name,
            json!(true),
            format!("Package repo {name} is absent"),
            json!({}),
        ));
    }
    if c.test {
        return Ok(ret(
            &name,
            Value::Null,
            format!(
                "Package repo '{name}' will be removed. This may cause pkg states to behave differently than stated if this action is repeated without test=True, due to the differences in the configured repositories."
            ),
            json!({}),
        ));
    }
    let mut del_kw = kw.clone();
    del_kw.insert("repo".into(), json!(stripname));
    if let Err(e) = c.host.call("pkg.del_repo", &[], &del_kw) {
        return fail(exc_text(&e).to_string());
    }
    let repos = c
        .host
        .call("pkg.list_repos", &[], &Map::new())
        .map_err(|e| exc_text(&e).to_string())?;
    if repos.get(&stripname).is_some() {
        return fail(format!("Failed to remove repo {name}"));
    }
    Ok(ret(
        &name,
        json!(true),
        format!("Removed repo {name}"),
        json!({"repo": name}),
    ))
}
