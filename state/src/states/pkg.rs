//! The `pkg` state module: `pkg.installed`, `pkg.latest`, `pkg.removed`, `pkg.purged`,
//! `pkg.held`, `pkg.unheld`,
//! through the minion's `pkg` execution module, with Salt's comments and changes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::{exc_text as error_text, ret, Accepts, Call, Spec};
use crate::pkgver::{fulfills_all, Scheme};
use crate::verify::py_text;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "installed",
        required: &["name"],
        accepts: Accepts::Any,
        run: installed,
    },
    Spec {
        name: "latest",
        required: &["name"],
        accepts: Accepts::Any,
        run: latest,
    },
    Spec {
        name: "removed",
        required: &["name"],
        accepts: Accepts::Any,
        run: removed,
    },
    Spec {
        name: "purged",
        required: &["name"],
        accepts: Accepts::Any,
        run: purged,
    },
    Spec {
        name: "held",
        required: &["name"],
        accepts: Accepts::Any,
        run: held,
    },
    Spec {
        name: "unheld",
        required: &["name"],
        accepts: Accepts::Any,
        run: unheld,
    },
    Spec {
        name: "uptodate",
        required: &["name"],
        accepts: Accepts::Any,
        run: uptodate,
    },
];

/// Salt's `pkg.mod_init`: the first `installed` or `latest` of a run marks the package
/// database for one refresh (the `pkg_refresh` file in the cache directory).
pub fn mod_init(c: &Call) -> bool {
    let fun = c.low.get("fun").map(py_text).unwrap_or_default();
    if fun == "installed" || fun == "latest" {
        let rtag = rtag(c);
        if !rtag.exists() {
            if let Some(dir) = rtag.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(&rtag, b"");
        }
        return true;
    }
    false
}

fn rtag(c: &Call) -> PathBuf {
    c.host.cachedir().join("pkg_refresh")
}

/// Salt's `check_refresh`: refresh when asked, or when the run marked it and `refresh` is
/// not `False`.
fn check_refresh(c: &Call) -> bool {
    match c.arg("refresh") {
        Some(v) if brine_protocol::payload::json_truthy(v) => true,
        Some(Value::Bool(false)) => false,
        _ => rtag(c).is_file(),
    }
}

type Desired = Vec<(String, Option<String>)>;
type Installed = BTreeMap<String, Vec<String>>;

fn scheme(c: &Call) -> Scheme {
    Scheme::of_os_family(
        c.host
            .grains()
            .get("os_family")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    )
}

/// Salt's `_repack_pkgs`: names, or one-key maps of name to version.
fn repack(pkgs: &Value) -> Option<Desired> {
    let items = pkgs.as_array()?;
    let mut out: Desired = Vec::new();
    for item in items {
        let (name, version) = match item {
            Value::Object(m) if m.len() == 1 => {
                let (k, v) = m.iter().next()?;
                (k.clone(), (!v.is_null()).then(|| py_text(v)))
            }
            Value::Object(_) | Value::Array(_) | Value::Null => return None,
            other => (py_text(other), None),
        };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = version,
            None => out.push((name, version)),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `pkg.normalize_name`: the architecture suffix dropped when it is the system's.
fn normalize(c: &Call, name: &str) -> String {
    let osarch = c
        .host
        .grains()
        .get("osarch")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match name.rsplit_once(':') {
        Some((n, arch)) if arch == osarch || arch == "all" || arch == "any" => n.to_string(),
        _ => name.to_string(),
    }
}

fn list_pkgs(c: &Call, extra: &[(&str, Value)]) -> Result<Installed, String> {
    let mut kw = Map::new();
    kw.insert("versions_as_list".into(), json!(true));
    for (k, v) in extra {
        kw.insert((*k).into(), v.clone());
    }
    let v = c.host.call("pkg.list_pkgs", &[], &kw)?;
    Ok(v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let versions = match v {
                        Value::Array(l) => l.iter().map(py_text).collect(),
                        other => vec![py_text(other)],
                    };
                    (k.clone(), versions)
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Salt's `_get_desired_pkg`: `name=version`, or `name>=version` for conditions.
fn desired_text(name: &str, version: Option<&str>) -> String {
    match version {
        None | Some("") => name.to_string(),
        Some(v) if v.starts_with(['<', '>', '=']) => format!("{name}{v}"),
        Some(v) => format!("{name}={v}"),
    }
}

/// A `CommandExecutionError` with `info` as a state shows it: the text without the
/// `changes:` part (`strerror_without_changes`).
fn without_changes(e: &str) -> String {
    let text = error_text(e);
    let Some((head, info)) = text.split_once("Additional info follows:\n\n") else {
        return text.to_string();
    };
    let mut kept = Vec::new();
    let mut skipping = false;
    for line in info.lines() {
        if !line.starts_with(' ') {
            skipping = line == "changes:";
        }
        if !skipping {
            kept.push(line);
        }
    }
    if kept.is_empty() {
        return head.trim_end_matches(". ").trim_end().to_string();
    }
    format!("{head}Additional info follows:\n\n{}", kept.join("\n"))
}

/// A failed install or upgrade as Salt's states show it: with the error's info (Salt's
/// `exc.info`), the packages that changed anyway and the text without its changes; else no
/// changes and "An error was encountered while <doing>: <error>".
fn failed_changes(c: &Call, before: &Installed, e: &str, doing: &str) -> (Value, String) {
    let text = error_text(e);
    if text.contains("Additional info follows:") {
        let after = list_pkgs(c, &[]).unwrap_or_default();
        return (changes_between(before, &after), without_changes(e));
    }
    (
        json!({}),
        format!("An error was encountered while {doing}: {text}"),
    )
}

fn changes_between(old: &Installed, new: &Installed) -> Value {
    let mut out = Map::new();
    for key in old.keys().chain(new.keys()) {
        let o = old.get(key).map(|v| v.join(","));
        let n = new.get(key).map(|v| v.join(","));
        if o != n {
            out.insert(
                key.clone(),
                json!({"old": o.unwrap_or_default(), "new": n.unwrap_or_default()}),
            );
        }
    }
    Value::Object(out)
}

/// Arguments of the state passed on to `pkg.install` as they are.
const INSTALL_PASSED: &[&str] = &[
    "fromrepo",
    "skip_verify",
    "normalize",
    "ignore_epoch",
    "install_recommends",
    "only_upgrade",
    "force_yes",
    "force_conf_new",
    "cache_valid_time",
];

fn install_kwargs(c: &Call, refresh: bool) -> Map<String, Value> {
    let mut kw = Map::new();
    kw.insert("refresh".into(), json!(refresh));
    for key in INSTALL_PASSED {
        if let Some(v) = c.arg(key) {
            kw.insert((*key).into(), v.clone());
        }
    }
    kw
}

fn latest_versions(
    c: &Call,
    names: &[String],
    refresh: Option<bool>,
) -> Result<BTreeMap<String, String>, String> {
    let args: Vec<Value> = names.iter().map(|n| json!(n)).collect();
    let mut kw = Map::new();
    if let Some(r) = refresh {
        kw.insert("refresh".into(), json!(r));
    }
    if let Some(repo) = c.arg("fromrepo") {
        kw.insert("fromrepo".into(), repo.clone());
    }
    let v = c.host.call("pkg.latest_version", &args, &kw)?;
    Ok(match v {
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), py_text(v))).collect(),
        other if names.len() == 1 => [(names[0].clone(), py_text(&other))].into(),
        _ => BTreeMap::new(),
    })
}

/// Salt's `_get_installable_versions`: the version each target would get (the newest
/// available for a target without a version, the repositories' first for one with a
/// version), else `installed`; `old` is the current version.
fn installable_changes(
    c: &Call,
    targets: &[(String, Option<String>)],
    current: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, String> {
    let latest: Vec<String> = targets
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| n.clone())
        .collect();
    let mut found = if latest.is_empty() {
        BTreeMap::new()
    } else {
        latest_versions(c, &latest, None)?
    };
    let explicit: Vec<Value> = targets
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(n, v)| json!(desired_text(n, v.as_deref())))
        .collect();
    if !explicit.is_empty() {
        let repo = c.host.call("pkg.list_repo_pkgs", &explicit, &Map::new())?;
        if let Value::Object(m) = repo {
            for (pkg, versions) in m {
                if let Some(first) = versions.as_array().and_then(|l| l.first()) {
                    found.insert(pkg, py_text(first));
                }
            }
        }
    }
    let mut changes = Map::new();
    for (n, _) in targets {
        let new = found
            .get(n)
            .filter(|v| !v.is_empty())
            .cloned()
            .unwrap_or_else(|| "installed".into());
        let old = current.get(n).cloned().unwrap_or_default();
        changes.insert(n.clone(), json!({"new": new, "old": old}));
    }
    Ok(changes)
}

/// What `pkg.hold` or `pkg.unhold` answered, package by package, sorted as Salt's
/// `installed` sorts them: those whose hold changed, those already as asked, the others.
#[derive(Default)]
struct Holds {
    modified: Vec<Map<String, Value>>,
    not_modified: Vec<Map<String, Value>>,
    failed: Vec<Map<String, Value>>,
}

/// The `hold` option of `pkg.installed`: `pkg.hold` (true) or `pkg.unhold` (false) of `pkgs`,
/// else of `name`; `None` when the state has no `hold`. An error is the module's message.
fn apply_hold(c: &Call, name: &str, pkgs: Option<Value>) -> Option<Result<Holds, String>> {
    let hold = c.low.get("hold")?;
    let fun = if brine_protocol::payload::json_truthy(hold) {
        "pkg.hold"
    } else {
        "pkg.unhold"
    };
    let answer = match call_hold(c, fun, name, pkgs) {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    let mut holds = Holds::default();
    for one in answer.as_object().into_iter().flat_map(|m| m.values()) {
        let Some(one) = one.as_object() else { continue };
        let changed = one
            .get("changes")
            .is_some_and(brine_protocol::payload::json_truthy);
        let ok = one
            .get("result")
            .is_some_and(brine_protocol::payload::json_truthy);
        if changed {
            holds.modified.push(one.clone());
        } else if ok {
            holds.not_modified.push(one.clone());
        }
        if !ok {
            holds.failed.push(one.clone());
        }
    }
    Some(Ok(holds))
}

/// `pkg.hold` or `pkg.unhold` as Salt's pkg states call them (`name`, and `pkgs` when
/// given); an error is the module's own message.
fn call_hold(c: &Call, fun: &str, name: &str, pkgs: Option<Value>) -> Result<Value, String> {
    let mut kw = Map::new();
    kw.insert("name".into(), json!(name));
    if let Some(pkgs) = pkgs {
        kw.insert("pkgs".into(), pkgs);
    }
    c.host.call(fun, &[], &kw).map_err(|e| {
        let prefix = format!("ERROR executing '{fun}': ");
        error_text(e.strip_prefix(&prefix).unwrap_or(&e)).to_string()
    })
}

/// A `pkg.installed` that installs nothing (or failed before installing): the `hold` option
/// applied all the same, its comments after the return's, as Salt's `installed` does.
fn hold_without_install(
    c: &Call,
    name: &str,
    mut result: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let Some(holds) = apply_hold(c, name, c.arg("pkgs").cloned()) else {
        return Ok(result);
    };
    let holds = match holds {
        Ok(h) => h,
        Err(e) => return Ok(ret(name, json!(false), e, json!({}))),
    };
    let mut comment = py_text(result.get("comment").unwrap_or(&Value::Null));
    for (one, keep_changes) in holds
        .modified
        .iter()
        .map(|h| (h, true))
        .chain(holds.not_modified.iter().map(|h| (h, false)))
        .chain(holds.failed.iter().map(|h| (h, false)))
    {
        comment.push_str(".\n");
        comment.push_str(&py_text(one.get("comment").unwrap_or(&Value::Null)));
        result.insert(
            "result".into(),
            one.get("result").cloned().unwrap_or(Value::Null),
        );
        if keep_changes {
            let key = py_text(one.get("name").unwrap_or(&Value::Null));
            if let Some(Value::Object(changes)) = result.get_mut("changes") {
                changes.insert(key, one.get("changes").cloned().unwrap_or(json!({})));
            }
        }
    }
    result.insert("comment".into(), Value::String(comment));
    Ok(result)
}

fn installed(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let outcome = installing(c);
    // Salt's `_find_install_targets` answers these without installing; `hold` still applies.
    match outcome {
        Ok(Step::Done(r)) => hold_without_install(c, &name, r),
        Ok(Step::Final(r)) => Ok(r),
        Err(e) => Err(e),
    }
}

/// How far `pkg.installed` went: `Done` before any install (the `hold` option is applied
/// then), `Final` once the return is complete.
enum Step {
    Done(Map<String, Value>),
    Final(Map<String, Value>),
}

fn installing(c: &Call) -> Result<Step, String> {
    let name = c.name();
    let fail = |comment: String| Ok(Step::Done(ret(&name, json!(false), comment, json!({}))));
    if matches!(c.arg("pkgs"), Some(Value::Array(l)) if l.is_empty()) {
        return Ok(Step::Final(ret(
            &name,
            json!(true),
            "No packages to install provided",
            json!({}),
        )));
    }
    if c.arg("sources").is_some() {
        return Ok(Step::Final(ret(
            &name,
            json!(false),
            "Installing from 'sources' (package files) is not supported by Brine's pkg states",
            json!({}),
        )));
    }
    let version = c.text("version").filter(|v| !v.is_empty());
    let desired = match c.arg("pkgs") {
        Some(pkgs) => match repack(pkgs) {
            Some(d) => d,
            None => return fail("Invalidly formatted 'pkgs' parameter. See minion log.".into()),
        },
        None => vec![(name.clone(), version.clone())],
    };
    let mut refresh = check_refresh(c);
    let reinstall = c.flag("reinstall", false);
    let ignore_epoch = c
        .arg("ignore_epoch")
        .map(brine_protocol::payload::json_truthy);
    let scheme = scheme(c);
    let cur = match list_pkgs(c, &[]) {
        Ok(p) => p,
        Err(e) => return fail(error_text(&e).to_string()),
    };
    let purge_desired = list_pkgs(c, &[("purge_desired", json!(true))])?;
    let to_unpurge: Vec<String> = desired
        .iter()
        .filter(|(n, _)| purge_desired.contains_key(n))
        .map(|(n, _)| n.clone())
        .collect();
    let mut desired = desired;
    let wants_latest: Vec<String> = desired
        .iter()
        .filter(|(_, v)| v.as_deref() == Some("latest"))
        .map(|(n, _)| n.clone())
        .collect();
    if !wants_latest.is_empty() {
        let resolved = match latest_versions(c, &wants_latest, Some(refresh)) {
            Ok(r) => r,
            Err(e) => return fail(error_text(&e).to_string()),
        };
        refresh = false;
        for (n, v) in desired.iter_mut() {
            if let Some(latest) = resolved.get(n) {
                *v = if !latest.is_empty() {
                    Some(latest.clone())
                } else {
                    cur.get(n).and_then(|l| l.last().cloned())
                };
            }
        }
    }
    let mut targets: Desired = Vec::new();
    let mut to_reinstall: Desired = Vec::new();
    let mut version_spec = false;
    for (pkg, want) in &desired {
        let mut cver = cur.get(pkg).cloned().unwrap_or_default();
        if cver.is_empty() {
            let normalized = normalize(c, pkg);
            if normalized != *pkg {
                cver = cur.get(&normalized).cloned().unwrap_or_default();
            }
        }
        if cver.is_empty() {
            targets.push((pkg.clone(), want.clone()));
            continue;
        }
        if reinstall {
            to_reinstall.push((pkg.clone(), want.clone()));
            continue;
        }
        let Some(want) = want.as_deref().filter(|w| !w.is_empty()) else {
            continue;
        };
        version_spec = true;
        if !fulfills_all(scheme, &cver, want, ignore_epoch) {
            targets.push((pkg.clone(), Some(want.to_string())));
        }
    }
    if targets.is_empty() && to_unpurge.is_empty() && to_reinstall.is_empty() {
        let suffix = if version_spec {
            " and are at the desired version"
        } else {
            ""
        };
        return Ok(Step::Done(ret(
            &name,
            json!(true),
            format!("All specified packages are already installed{suffix}"),
            json!({}),
        )));
    }
    if !to_unpurge.is_empty() {
        return Ok(Step::Final(ret(
            &name,
            json!(false),
            "lowpkg.unpurge not implemented",
            json!({}),
        )));
    }
    let mut comment: Vec<String> = Vec::new();
    if c.test {
        let mut changes = Map::new();
        if !targets.is_empty() {
            changes.extend(installable_changes(c, &targets, &BTreeMap::new())?);
            let summary: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
            comment.push(format!(
                "The following packages would be installed/updated: {}",
                summary.join(", ")
            ));
        }
        if !to_reinstall.is_empty() {
            let names: Vec<String> = to_reinstall
                .iter()
                .map(|(n, v)| desired_text(n, v.as_deref()))
                .collect();
            for n in &names {
                changes.insert(n.clone(), json!({"new": "installed", "old": ""}));
            }
            comment.push(format!(
                "The following packages would be reinstalled: {}",
                names.join(", ")
            ));
        }
        return Ok(Step::Final(ret(
            &name,
            Value::Null,
            comment.join("\n"),
            Value::Object(changes),
        )));
    }
    let pkgs: Vec<Value> = targets
        .iter()
        .chain(to_reinstall.iter())
        .map(|(n, v)| json!({ n.clone(): v }))
        .collect();
    let mut kw = install_kwargs(c, refresh);
    kw.insert("pkgs".into(), Value::Array(pkgs));
    kw.insert("reinstall".into(), json!(!to_reinstall.is_empty()));
    let mut changes = Map::new();
    let pkg_ret = match c.host.call("pkg.install", &[], &kw) {
        Ok(v) => v,
        Err(e) => {
            let (changes, comment) = failed_changes(c, &cur, &e, "installing package(s)");
            return Ok(Step::Final(ret(&name, json!(false), comment, changes)));
        }
    };
    let _ = std::fs::remove_file(rtag(c));
    if let Value::Object(m) = &pkg_ret {
        changes.extend(m.clone());
    }
    let hold_names = Value::Array(desired.iter().map(|(n, _)| json!(n)).collect());
    let holds = match apply_hold(c, &name, Some(hold_names)) {
        None => Holds::default(),
        Some(Ok(h)) => h,
        Some(Err(e)) => {
            comment.push(e);
            return Ok(Step::Final(ret(
                &name,
                json!(false),
                comment.join("\n"),
                Value::Object(changes),
            )));
        }
    };
    let new = list_pkgs(c, &[])?;
    let desired_map: BTreeMap<&str, Option<&str>> = desired
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_deref()))
        .collect();
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for (pkg, want) in &desired {
        let lookup = pkg.split('=').next().unwrap_or(pkg);
        let mut cver = new.get(lookup).cloned().unwrap_or_default();
        if cver.is_empty() {
            cver = new.get(&normalize(c, lookup)).cloned().unwrap_or_default();
        }
        let good = if cver.is_empty() {
            false
        } else {
            match want.as_deref() {
                None | Some("") | Some("latest") => true,
                Some(w) if w.ends_with('*') && cver[0].starts_with(&w[..w.len() - 1]) => true,
                Some(w) => fulfills_all(scheme, &cver, w, ignore_epoch),
            }
        };
        if good {
            ok.push(pkg.clone());
        } else {
            failed.push(pkg.clone());
        }
    }
    let is_target = |p: &String| targets.iter().any(|(n, _)| n == p);
    let is_reinstall = |p: &String| to_reinstall.iter().any(|(n, _)| n == p);
    let modified: Vec<&String> = ok.iter().filter(|p| is_target(p)).collect();
    let not_modified: Vec<&String> = ok
        .iter()
        .filter(|p| !is_target(p) && !is_reinstall(p))
        .collect();
    let failed: Vec<&String> = failed.iter().filter(|p| is_target(p)).collect();
    let shown = |p: &String| desired_text(p, desired_map.get(p.as_str()).copied().flatten());
    if !modified.is_empty() {
        let summary: Vec<String> = modified.iter().map(|p| shown(p)).collect();
        let summary = summary.join(", ");
        if summary.len() < 20 {
            comment.push(format!(
                "The following packages were installed/updated: {summary}"
            ));
        } else {
            let n = modified.len();
            comment.push(format!(
                "{n} targeted package{} {} installed/updated.",
                if n > 1 { "s" } else { "" },
                if n > 1 { "were" } else { "was" }
            ));
        }
    }
    for one in &holds.modified {
        let key = py_text(one.get("name").unwrap_or(&Value::Null));
        comment.push(py_text(one.get("comment").unwrap_or(&Value::Null)));
        let hold_change = |k: &str| {
            one.get("changes")
                .and_then(|ch| ch.get(k))
                .map(py_text)
                .unwrap_or_else(|| "None".into())
        };
        match changes.get_mut(&key).and_then(Value::as_object_mut) {
            Some(change) => {
                for k in ["new", "old"] {
                    let mut text = change.get(k).map(py_text).unwrap_or_default();
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&hold_change(k));
                    change.insert(k.into(), Value::String(text));
                }
            }
            None => {
                changes.insert(key, json!({"new": hold_change("new")}));
            }
        }
    }
    if !not_modified.is_empty() {
        let n = not_modified.len();
        if n <= 20 {
            let summary: Vec<String> = not_modified.iter().map(|p| shown(p)).collect();
            comment.push(format!(
                "The following packages were already installed: {}",
                summary.join(", ")
            ));
        } else {
            comment.push(format!(
                "{n} targeted package{} {} already installed",
                if n > 1 { "s" } else { "" },
                if n > 1 { "were" } else { "was" }
            ));
        }
    }
    for one in &holds.not_modified {
        comment.push(py_text(one.get("comment").unwrap_or(&Value::Null)));
    }
    let mut result = true;
    if !failed.is_empty() {
        let summary: Vec<String> = failed.iter().map(|p| shown(p)).collect();
        comment.insert(
            0,
            format!(
                "The following packages failed to install/update: {}",
                summary.join(", ")
            ),
        );
        result = false;
    }
    if !holds.failed.is_empty() {
        for one in &holds.failed {
            comment.push(py_text(one.get("comment").unwrap_or(&Value::Null)));
        }
        result = false;
    }
    for (pkg, _) in &to_reinstall {
        if pkg_ret.get(pkg).is_some() {
            comment.push(format!("Package {} was reinstalled.", shown(pkg)));
        } else {
            comment.push(format!(
                "Reinstall was not successful for package {}.",
                shown(pkg)
            ));
            result = false;
        }
    }
    Ok(Step::Final(ret(
        &name,
        json!(result),
        comment.join("\n"),
        Value::Object(changes),
    )))
}

fn latest(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let fail = |comment: String| Ok(ret(&name, json!(false), comment, json!({})));
    let refresh = check_refresh(c);
    if c.arg("sources").is_some() {
        return fail("The \"sources\" parameter is not supported.".into());
    }
    let desired: Vec<String> = match c.arg("pkgs") {
        Some(Value::Array(l)) if l.is_empty() => {
            return Ok(ret(
                &name,
                json!(true),
                "No packages to install provided",
                json!({}),
            ))
        }
        Some(pkgs) => match repack(pkgs) {
            Some(d) => d.into_iter().map(|(n, _)| n).collect(),
            None => return fail("Invalidly formatted \"pkgs\" parameter. See minion log.".into()),
        },
        None => vec![name.clone()],
    };
    let avail = match latest_versions(c, &desired, Some(refresh)) {
        Ok(a) => a,
        Err(e) => {
            return fail(format!(
                "An error was encountered while checking the newest available version of package(s): {}",
                error_text(&e)
            ))
        }
    };
    let cur = list_pkgs(c, &[]).map_err(|e| error_text(&e).to_string())?;
    let cur_of = |p: &str| cur.get(p).map(|v| v.join(",")).unwrap_or_default();
    let mut targets: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    for p in &desired {
        match avail.get(p).filter(|v| !v.is_empty()) {
            Some(v) => {
                targets.insert(p.clone(), v.clone());
            }
            None if cur_of(p).is_empty() => {
                problems.push(format!("No information found for '{p}'."));
            }
            None => {}
        }
    }
    if !problems.is_empty() {
        return fail(problems.join(" "));
    }
    if targets.is_empty() {
        let comment = if desired.len() > 10 {
            format!("All {} packages are up-to-date.", desired.len())
        } else if desired.len() > 1 {
            let mut sorted = desired.clone();
            sorted.sort();
            format!("All packages are up-to-date ({}).", sorted.join(", "))
        } else {
            format!("Package {} is already up-to-date", desired[0])
        };
        return Ok(ret(&name, json!(true), comment, json!({})));
    }
    let mut up_to_date: Vec<String> = if c.arg("pkgs").is_some() {
        desired
            .iter()
            .filter(|p| !targets.contains_key(*p))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    up_to_date.sort();
    let names: Vec<String> = targets.keys().cloned().collect();
    if c.test {
        let mut comments = vec![format!(
            "The following packages would be installed/upgraded: {}",
            names.join(", ")
        )];
        if !up_to_date.is_empty() {
            if up_to_date.len() <= 10 {
                let shown: Vec<String> = up_to_date
                    .iter()
                    .map(|p| format!("{p} ({})", cur_of(p)))
                    .collect();
                comments.push(format!(
                    "The following packages are already up-to-date: {}",
                    shown.join(", ")
                ));
            } else {
                comments.push(format!(
                    "{} packages are already up-to-date",
                    up_to_date.len()
                ));
            }
        }
        let wanted: Vec<(String, Option<String>)> = targets
            .iter()
            .map(|(n, v)| (n.clone(), Some(v.clone())))
            .collect();
        let current: BTreeMap<String, String> = names
            .iter()
            .map(|p| (p.clone(), cur_of(p)))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let changes = installable_changes(c, &wanted, &current)?;
        return Ok(ret(
            &name,
            Value::Null,
            comments.join("\n"),
            Value::Object(changes),
        ));
    }
    let mut kw = install_kwargs(c, false);
    kw.insert(
        "pkgs".into(),
        Value::Array(names.iter().map(|n| json!(n)).collect()),
    );
    let changes = match c.host.call("pkg.install", &[], &kw) {
        Ok(v) => v,
        Err(e) => {
            return fail(format!(
                "An error was encountered while installing package(s): {}",
                error_text(&e)
            ))
        }
    };
    let _ = std::fs::remove_file(rtag(c));
    let has_changes = changes.as_object().is_some_and(|m| !m.is_empty());
    if has_changes {
        let failed: Vec<&String> = names
            .iter()
            .filter(|p| {
                let new = changes
                    .get(p.as_str())
                    .and_then(|ch| ch.get("new"))
                    .map(py_text);
                match new {
                    None => true,
                    Some(new) => !new.split(',').any(|v| v == targets[*p]),
                }
            })
            .collect();
        let successful: Vec<&String> = names.iter().filter(|p| !failed.contains(p)).collect();
        let mut comments = Vec::new();
        if !failed.is_empty() {
            let l: Vec<&str> = failed.iter().map(|s| s.as_str()).collect();
            comments.push(format!(
                "The following packages failed to update: {}",
                l.join(", ")
            ));
        }
        if !successful.is_empty() {
            let l: Vec<&str> = successful.iter().map(|s| s.as_str()).collect();
            comments.push(format!(
                "The following packages were successfully installed/upgraded: {}",
                l.join(", ")
            ));
        }
        if !up_to_date.is_empty() {
            if up_to_date.len() <= 10 {
                comments.push(format!(
                    "The following packages were already up-to-date: {}",
                    up_to_date.join(", ")
                ));
            } else {
                comments.push(format!(
                    "{} packages were already up-to-date ",
                    up_to_date.len()
                ));
            }
        }
        return Ok(ret(
            &name,
            json!(failed.is_empty()),
            comments.join(" "),
            changes,
        ));
    }
    let mut comment = if names.len() > 10 {
        format!(
            "{} targeted packages failed to update. See debug log for details.",
            names.len()
        )
    } else if names.len() > 1 {
        format!(
            "The following targeted packages failed to update. See debug log for details: ({}).",
            names.join(", ")
        )
    } else {
        format!("Package {} failed to update.", names[0])
    };
    if !up_to_date.is_empty() {
        if up_to_date.len() <= 10 {
            comment.push_str(&format!(
                " The following packages were already up-to-date: {}",
                up_to_date.join(", ")
            ));
        } else {
            comment.push_str(&format!(
                "{} packages were already up-to-date",
                up_to_date.len()
            ));
        }
    }
    Ok(ret(&name, json!(false), comment, changes))
}

fn removed(c: &Call) -> Result<Map<String, Value>, String> {
    uninstall(c, "remove")
}

fn purged(c: &Call) -> Result<Map<String, Value>, String> {
    uninstall(c, "purge")
}

/// Salt's `_uninstall` with `_find_remove_targets`.
fn uninstall(c: &Call, action: &str) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let fail = |comment: String| Ok(ret(&name, json!(false), comment, json!({})));
    let version = c.text("version").filter(|v| !v.is_empty());
    let params: Desired = match c.arg("pkgs") {
        Some(pkgs) => match repack(pkgs) {
            Some(d) => d,
            None if action == "remove" => {
                return fail("Invalidly formatted pkgs parameter. See minion log.".into())
            }
            None => Vec::new(),
        },
        None => vec![(normalize(c, &name), version.clone())],
    };
    let ignore_epoch = c
        .arg("ignore_epoch")
        .map(brine_protocol::payload::json_truthy);
    let scheme = scheme(c);
    let cur = match list_pkgs(c, &[]) {
        Ok(p) => p,
        Err(e) => return fail(error_text(&e).to_string()),
    };
    let mut targets: Vec<String> = Vec::new();
    let mut version_spec = false;
    for (pkg, want) in &params {
        let Some(cver) = cur.get(pkg).filter(|v| !v.is_empty()) else {
            continue;
        };
        match want.as_deref().filter(|w| !w.is_empty()) {
            None => targets.push(pkg.clone()),
            Some(w) => {
                version_spec = true;
                if fulfills_all(scheme, cver, w, ignore_epoch) {
                    targets.push(pkg.clone());
                }
            }
        }
    }
    if targets.is_empty() && action == "remove" {
        let which = if version_spec {
            " (matching specified versions)"
        } else {
            ""
        };
        return Ok(ret(
            &name,
            json!(true),
            format!("All specified packages{which} are already absent"),
            json!({}),
        ));
    }
    if action == "purge" {
        let removed = list_pkgs(c, &[("removed", json!(true))])?;
        targets.extend(
            params
                .iter()
                .filter(|(p, _)| removed.contains_key(p))
                .map(|(p, _)| p.clone()),
        );
    }
    targets.sort();
    if targets.is_empty() {
        return Ok(ret(
            &name,
            json!(true),
            format!(
                "None of the targeted packages are installed{}",
                if action == "purge" {
                    " or partially installed"
                } else {
                    ""
                }
            ),
            json!({}),
        ));
    }
    if c.test {
        let mut changes = Map::new();
        for t in &targets {
            changes.insert(t.clone(), json!({"new": format!("{action}d"), "old": ""}));
        }
        return Ok(ret(
            &name,
            Value::Null,
            format!(
                "The following packages will be {action}d: {}.",
                targets.join(", ")
            ),
            Value::Object(changes),
        ));
    }
    let mut kw = Map::new();
    if let Some(pkgs) = c.arg("pkgs") {
        kw.insert("pkgs".into(), pkgs.clone());
    }
    let changes = match c.host.call(&format!("pkg.{action}"), &[json!(name)], &kw) {
        Ok(v) => v,
        Err(e) => {
            let text = error_text(&e);
            if text.contains("Additional info follows:") {
                let after = list_pkgs(c, &[]).unwrap_or_default();
                return Ok(ret(
                    &name,
                    json!(false),
                    without_changes(&e),
                    changes_between(&cur, &after),
                ));
            }
            let verb = if action == "purge" {
                "purging"
            } else {
                "removing"
            };
            return fail(format!(
                "An error was encountered while {verb} package(s): {text}"
            ));
        }
    };
    let new = list_pkgs(c, &[])?;
    let mut failed: Vec<String> = params
        .iter()
        .filter(|(p, _)| new.contains_key(p))
        .map(|(p, _)| p.clone())
        .collect();
    if action == "purge" {
        let removed = list_pkgs(c, &[("removed", json!(true))])?;
        failed.extend(
            params
                .iter()
                .filter(|(p, _)| removed.contains_key(p))
                .map(|(p, _)| p.clone()),
        );
    }
    failed.sort();
    if !failed.is_empty() {
        return Ok(ret(
            &name,
            json!(false),
            format!(
                "The following packages failed to {action}: {}.",
                failed.join(", ")
            ),
            changes,
        ));
    }
    let mut not_installed: Vec<&String> = params
        .iter()
        .map(|(p, _)| p)
        .filter(|p| !targets.contains(p))
        .collect();
    not_installed.sort();
    let comment = if not_installed.is_empty() {
        format!("All targeted packages were {action}d.")
    } else {
        let l: Vec<&str> = not_installed.iter().map(|s| s.as_str()).collect();
        format!(
            "The following packages were not installed: {} The following packages were {action}d: {}.",
            l.join(", "),
            targets.join(", ")
        )
    };
    Ok(ret(&name, json!(true), comment, changes))
}

/// The packages the package manager holds (dpkg's `hold` selections), in its order.
fn holds(c: &Call) -> Result<Vec<String>, String> {
    let mut kw = Map::new();
    kw.insert("state".into(), json!("hold"));
    let answer = c
        .host
        .call("pkg.get_selections", &[], &kw)
        .map_err(|e| error_text(&e).to_string())?;
    Ok(answer
        .get("hold")
        .and_then(Value::as_array)
        .map(|names| names.iter().map(py_text).collect())
        .unwrap_or_default())
}

/// What a `pkg.held` or `pkg.unheld` state did so far.
struct HoldRun {
    name: String,
    result: bool,
    comments: Vec<String>,
    changes: Map<String, Value>,
}

impl HoldRun {
    fn new(name: String) -> HoldRun {
        HoldRun {
            name,
            result: true,
            comments: Vec::new(),
            changes: Map::new(),
        }
    }

    /// `fun` of one package (its `pkgs` entry, known as `key` in the answer): the answer
    /// joins the changes; whether it succeeded, and its comment. A module error ends the
    /// state, as Salt's uncaught exception does.
    fn call(
        &mut self,
        c: &Call,
        fun: &str,
        pkg: &Value,
        key: &str,
    ) -> Result<(bool, Value), String> {
        let answer = call_hold(c, fun, &self.name, Some(json!([pkg])))?;
        let one = answer.get(key);
        let ok = one
            .and_then(|r| r.get("result"))
            .is_some_and(brine_protocol::payload::json_truthy);
        let comment = one
            .and_then(|r| r.get("comment"))
            .cloned()
            .unwrap_or(Value::Null);
        self.result &= ok;
        if let Value::Object(m) = answer {
            self.changes.extend(m);
        }
        Ok((ok, comment))
    }

    /// `pkg.unhold` of a held package, its comment kept.
    fn release(&mut self, c: &Call, lock: &str) -> Result<(), String> {
        let (_, comment) = self.call(c, "pkg.unhold", &json!(lock), lock)?;
        if brine_protocol::payload::json_truthy(&comment) {
            self.comments.push(py_text(&comment));
        }
        Ok(())
    }

    fn finish(self) -> Map<String, Value> {
        let comment = if self.comments.is_empty() && self.changes.is_empty() {
            "No changes made".to_string()
        } else {
            self.comments.join("\n")
        };
        ret(
            &self.name,
            json!(self.result),
            comment,
            Value::Object(self.changes),
        )
    }
}

/// A `pkgs` entry: its name and version (`{name: version}` or a bare name).
fn name_and_version(pkg: &Value) -> (String, Option<String>) {
    match pkg {
        Value::Object(m) => m.iter().next().map_or((String::new(), None), |(k, v)| {
            (
                k.clone(),
                (!v.is_null()).then(|| py_text(v)).filter(|v| !v.is_empty()),
            )
        }),
        other => (py_text(other), None),
    }
}

/// Salt's `pkg.held`: the packages held (with dpkg, whatever their version); with `replace`,
/// every other held package released.
fn held(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let replace = c.flag("replace", false);
    let pkgs = match c.low.get("pkgs") {
        Some(Value::Array(l)) if l.is_empty() && !replace => {
            return Ok(ret(
                &name,
                json!(true),
                "No packages to be held provided",
                json!({}),
            ));
        }
        Some(Value::Array(l)) => l.clone(),
        Some(Value::Null) | None => match c.text("version").filter(|v| !v.is_empty()) {
            Some(v) => vec![json!({ name.clone(): v })],
            None => vec![json!(name)],
        },
        Some(other) => vec![other.clone()],
    };
    let locks = holds(c)?;
    let mut run = HoldRun::new(name);
    let mut held_names = Vec::new();
    for pkg in &pkgs {
        let (pkg_name, version) = name_and_version(pkg);
        held_names.push(pkg_name.clone());
        if locks.contains(&pkg_name) {
            continue;
        }
        if c.test {
            let shown = version.map_or(String::new(), |v| format!(" (version = {v})"));
            run.comments.push(format!(
                "The following package would be held: {pkg_name}{shown}"
            ));
            continue;
        }
        let (ok, _) = run.call(c, "pkg.hold", pkg, &pkg_name)?;
        run.comments.push(if ok {
            format!("Package {pkg_name} is now being held")
        } else {
            format!("Package {pkg_name} was not held")
        });
    }
    if replace {
        for lock in locks.iter().filter(|l| !held_names.contains(l)) {
            if c.test {
                run.comments
                    .push(format!("The following package would be unheld: {lock}"));
            } else {
                run.release(c, lock)?;
            }
        }
    }
    Ok(run.finish())
}

/// Salt's `pkg.unheld`: the named held packages released (with `all`, every held package).
fn unheld(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let all = c.flag("all", false);
    let pkgs = match c.low.get("pkgs") {
        Some(Value::Array(l)) if l.is_empty() && !all => {
            return Ok(ret(
                &name,
                json!(true),
                "No packages to be unheld provided",
                json!({}),
            ));
        }
        Some(Value::Array(l)) => l.clone(),
        Some(Value::Null) | None => {
            vec![json!({ name.clone(): c.arg("version").cloned().unwrap_or(Value::Null) })]
        }
        Some(other) => vec![other.clone()],
    };
    let wanted: Vec<(String, Option<String>)> = pkgs.iter().map(name_and_version).collect();
    let locks = holds(c)?;
    let mut run = HoldRun::new(name);
    for lock in &locks {
        let asked = wanted.iter().find(|(n, _)| n == lock);
        if !all && asked.is_none() {
            continue;
        }
        if c.test {
            // Salt names the held version, which dpkg's holds do not have.
            let shown = if asked.is_some_and(|(_, v)| v.is_some()) {
                " (version = None)"
            } else {
                ""
            };
            run.comments.push(format!(
                "The following package would be unheld: {lock}{shown}"
            ));
        } else {
            run.release(c, lock)?;
        }
    }
    Ok(run.finish())
}

/// `pkg.uptodate`: the upgrades `pkg.list_upgrades` finds (those of `pkgs` when given)
/// applied with `pkg.upgrade`, which upgrades every package as Salt's aptpkg does; under
/// test=True the changes it would make.
fn uptodate(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let fail = |comment: String| Ok(ret(&name, json!(false), comment, json!({})));
    let grain = |k: &str| c.host.grains().get(k).map(py_text).unwrap_or_default();
    if c.low.contains_key("fromrepo") && grain("os") == "Gentoo" {
        return fail("'fromrepo' argument not supported on this platform".into());
    }
    let refresh = match c.low.get("refresh") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return fail("refresh must be either True or False".into()),
    };
    let pkgs: Option<Vec<String>> = match c.low.get("pkgs") {
        Some(Value::Array(items)) => Some(items.iter().map(py_text).collect()),
        _ => None,
    };
    let kwargs: Map<String, Value> = c
        .state_kwargs()
        .into_iter()
        .filter(|(k, _)| !["name", "refresh", "pkgs"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut list_kw = kwargs.clone();
    list_kw.insert("refresh".into(), json!(refresh));
    let upgrades = match c.host.call("pkg.list_upgrades", &[], &list_kw) {
        Ok(Value::Object(m)) => m,
        Ok(_) => Map::new(),
        Err(e) => return fail(error_text(&e).to_string()),
    };
    let mut expected = Map::new();
    for (pkg, version) in &upgrades {
        if pkgs.as_ref().is_some_and(|p| !p.contains(pkg)) {
            continue;
        }
        let old = match c.host.call("pkg.version", &[json!(pkg)], &kwargs) {
            Ok(v) => v,
            Err(e) => return fail(error_text(&e).to_string()),
        };
        expected.insert(pkg.clone(), json!({"new": version, "old": old}));
    }
    if expected.is_empty() {
        return Ok(ret(
            &name,
            json!(true),
            "System is already up-to-date",
            json!({}),
        ));
    }
    if c.test {
        return Ok(ret(
            &name,
            Value::Null,
            "System update will be performed",
            Value::Object(expected),
        ));
    }
    let before = list_pkgs(c, &[])?;
    let mut upgrade_kw = kwargs;
    upgrade_kw.insert("refresh".into(), json!(refresh));
    upgrade_kw.insert(
        "pkgs".into(),
        pkgs.as_ref().map_or(Value::Null, |p| json!(p)),
    );
    let changes = match c.host.call("pkg.upgrade", &[], &upgrade_kw) {
        Ok(v) => v,
        Err(e) => {
            let (changes, comment) = failed_changes(c, &before, &e, "updating packages");
            return Ok(ret(&name, json!(false), comment, changes));
        }
    };
    let missing: Vec<&String> = match &pkgs {
        Some(_) => expected
            .keys()
            .filter(|k| changes.get(k.as_str()).is_none())
            .collect(),
        None => Vec::new(),
    };
    if missing.is_empty() {
        return Ok(ret(&name, json!(true), "Upgrade ran successfully", changes));
    }
    let missing: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
    Ok(ret(
        &name,
        json!(false),
        format!(
            "The following package(s) failed to update: {}",
            missing.join(", ")
        ),
        changes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_lose_their_changes() {
        let e = "ERROR: Problem encountered installing package(s). Additional info follows:\n\n\
                 changes:\n    ----------\n    jq:\n        ----------\n        new:\n            1.6\nerrors:\n    - E: broken";
        assert_eq!(
            without_changes(e),
            "Problem encountered installing package(s). Additional info follows:\n\nerrors:\n    - E: broken"
        );
    }

    #[test]
    fn repacked_targets() {
        let d = repack(&json!(["a", {"b": "1.0"}, {"c": null}, 5])).unwrap();
        assert_eq!(
            d,
            vec![
                ("a".to_string(), None),
                ("b".to_string(), Some("1.0".to_string())),
                ("c".to_string(), None),
                ("5".to_string(), None)
            ]
        );
        assert!(repack(&json!("a")).is_none());
        assert!(repack(&json!([["a"]])).is_none());
        assert_eq!(desired_text("a", Some(">=1")), "a>=1");
        assert_eq!(desired_text("a", Some("1")), "a=1");
        assert_eq!(desired_text("a", None), "a");
    }
}
