//! dpkg's selections and the holds made with them (Salt's `aptpkg.hold`, `unhold`,
//! `get_selections`, `set_selections`): a held package is one whose selection is `hold`.

use rmpv::Value;

use super::super::args::{is_true, py_str, Bound, py_type_name};
use super::super::cmd::{run_argv, run_argv_stdin};
use super::super::{Context, FnError};
use super::DPKG_ENV;
use brine_protocol::payload::py_truthy;

/// Packages by selection state, states in the order dpkg first lists them.
type Selections = Vec<(String, Vec<String>)>;

const VALID_STATES: &[&str] = &["install", "hold", "deinstall", "purge"];

/// `dpkg --get-selections` lines (`name<whitespace>state`).
fn parse_selections(text: &str) -> Result<Selections, FnError> {
    let mut out: Selections = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, state] = fields[..] else {
            return Err(FnError::Exception(format!(
                "ValueError: unexpected dpkg selection line: {line}"
            )));
        };
        match out.iter_mut().find(|(s, _)| s == state) {
            Some((_, names)) => names.push(name.to_string()),
            None => out.push((state.to_string(), vec![name.to_string()])),
        }
    }
    Ok(out)
}

fn selections_value(sel: &Selections) -> Value {
    Value::Map(
        sel.iter()
            .map(|(state, names)| {
                let names = names.iter().map(|n| Value::from(n.as_str())).collect();
                (Value::from(state.as_str()), Value::Array(names))
            })
            .collect(),
    )
}

/// The selections of the packages matching `pattern` (every package when `None`).
pub(super) async fn get_selections(pattern: Option<&str>) -> Result<Selections, FnError> {
    let argv: Vec<String> = ["dpkg", "--get-selections", pattern.unwrap_or("*")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    // dpkg says on stderr when nothing matches; Salt reads stdout only.
    let out = run_argv(&argv, DPKG_ENV).await?;
    parse_selections(out.stdout())
}

/// Sets the packages' selections; the changes made, `{name: (old, new)}`. In test mode
/// (Salt's `__opts__["test"]`) nothing is set and nothing is reported, as in Salt.
pub(super) async fn set_selections(
    test: bool,
    selection: &Selections,
    clear: bool,
) -> Result<Vec<(String, Option<String>, String)>, FnError> {
    let bad: Vec<&str> = selection
        .iter()
        .map(|(s, _)| s.as_str())
        .filter(|s| !VALID_STATES.contains(s))
        .collect();
    if !bad.is_empty() {
        return Err(FnError::Invocation(format!(
            "Invalid state(s): {}",
            bad.join(", ")
        )));
    }
    if clear && !test {
        let out = run_argv(&["dpkg".into(), "--clear-selections".into()], DPKG_ENV).await?;
        if out.retcode() != 0 {
            return Err(FnError::Execution(format!(
                "Running dpkg --clear-selections failed: {}",
                out.stderr()
            )));
        }
    }
    let current = get_selections(None).await?;
    let state_of = |name: &str| {
        current
            .iter()
            .find(|(_, names)| names.iter().any(|n| n == name))
            .map(|(s, _)| s.clone())
    };
    let mut changed = Vec::new();
    for (state, names) in selection {
        for name in names {
            let old = state_of(name);
            if old.as_deref() == Some(state.as_str()) || test {
                continue;
            }
            let argv = vec!["dpkg".to_string(), "--set-selections".to_string()];
            let out = run_argv_stdin(&argv, DPKG_ENV, &format!("{name} {state}")).await?;
            if out.retcode() == 0 {
                changed.push((name.clone(), old, state.clone()));
            } else {
                tracing::error!("failed to set state {state} for package {name}");
            }
        }
    }
    Ok(changed)
}

/// A `selection` argument: a map of state to package names (a YAML text of one), a state's
/// names read as Python iterates them (a text is its characters).
fn selection_arg(v: &Value) -> Result<Selections, FnError> {
    let v = match v {
        Value::String(s) => {
            let text = s.as_str().unwrap_or_default();
            let parsed: serde_yaml::Value = serde_yaml::from_str(text)
                .map_err(|e| FnError::Invocation(format!("Improperly-formatted selection: {e}")))?;
            brine_protocol::payload::from_json(
                &serde_json::to_value(parsed).map_err(|e| {
                    FnError::Invocation(format!("Improperly-formatted selection: {e}"))
                })?,
            )
        }
        other => other.clone(),
    };
    let names = |v: &Value| -> Result<Vec<String>, FnError> {
        match v {
            Value::Array(items) => Ok(items.iter().map(py_str).collect()),
            Value::String(s) => Ok(s
                .as_str()
                .unwrap_or_default()
                .chars()
                .map(String::from)
                .collect()),
            other => Err(FnError::Exception(format!(
                "TypeError: '{}' object is not iterable",
                py_type_name(other)
            ))),
        }
    };
    match &v {
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| Ok((py_str(k), names(v)?)))
            .collect(),
        // Salt checks the states of what it iterates before it asks for `.items()`.
        Value::String(_) | Value::Array(_) => {
            let items: Vec<String> = match &v {
                Value::Array(items) => items.iter().map(py_str).collect(),
                other => py_str(other).chars().map(String::from).collect(),
            };
            let bad: Vec<String> = items
                .into_iter()
                .filter(|i| !VALID_STATES.contains(&i.as_str()))
                .collect();
            if bad.is_empty() {
                return Err(FnError::Exception(format!(
                    "AttributeError: '{}' object has no attribute 'items'",
                    py_type_name(&v)
                )));
            }
            Err(FnError::Invocation(format!(
                "Invalid state(s): {}",
                bad.join(", ")
            )))
        }
        other => Err(FnError::Exception(format!(
            "TypeError: '{}' object is not iterable",
            py_type_name(other)
        ))),
    }
}

/// `pkg.get_selections`.
pub(super) async fn get(b: &Bound) -> Result<Value, FnError> {
    let pattern = b.opt("pattern").map(py_str).filter(|p| !p.is_empty());
    let sel = get_selections(pattern.as_deref()).await?;
    match b.opt("state").map(py_str).filter(|s| !s.is_empty()) {
        Some(state) => {
            let names = sel
                .into_iter()
                .find(|(s, _)| *s == state)
                .map(|(_, n)| n)
                .unwrap_or_default();
            Ok(selections_value(&vec![(state, names)]))
        }
        None => Ok(selections_value(&sel)),
    }
}

/// `pkg.set_selections`.
pub(super) async fn set(ctx: &Context, b: &Bound, test: bool) -> Result<Value, FnError> {
    let path = b.opt("path").filter(|v| py_truthy(v));
    let selection = b.opt("selection").filter(|v| py_truthy(v));
    let selection = match (path, selection) {
        (None, None) => return Ok(Value::Map(Vec::new())),
        (Some(_), Some(_)) => {
            return Err(FnError::Invocation(
                "The 'selection' and 'path' arguments to pkg.set_selections are mutually exclusive, and cannot be specified together".into(),
            ))
        }
        (None, Some(sel)) => selection_arg(sel)?,
        (Some(path), None) => {
            let saltenv = b.opt("saltenv").map_or_else(|| "base".to_string(), py_str);
            let text = read_path(ctx, &py_str(path), &saltenv).await?;
            parse_selections(&text)?
        }
    };
    if selection.is_empty() {
        return Ok(Value::Map(Vec::new()));
    }
    let changed = set_selections(test, &selection, is_true(b.get("clear"))).await?;
    Ok(changes_value(&changed))
}

fn changes_value(changed: &[(String, Option<String>, String)]) -> Value {
    Value::Map(
        changed
            .iter()
            .map(|(name, old, new)| (Value::from(name.as_str()), change(old, new)))
            .collect(),
    )
}

fn change(old: &Option<String>, new: &str) -> Value {
    brine_protocol::payload::map(vec![
        ("old", old.as_deref().map_or(Value::Nil, Value::from)),
        ("new", Value::from(new)),
    ])
}

/// A selections file: from the file server (`salt://`) or this machine.
async fn read_path(ctx: &Context, path: &str, saltenv: &str) -> Result<String, FnError> {
    let local = if path.starts_with("salt://") {
        let Some(source) = ctx.services.file_source() else {
            return Err(FnError::Execution(format!(
                "Unable to cache {path}: this minion has no file server"
            )));
        };
        let client = crate::fileclient::FileClient::new(source, &ctx.services.cachedir);
        let (path, saltenv) = (path.to_string(), saltenv.to_string());
        tokio::task::spawn_blocking(move || client.cache_file(&path, &saltenv))
            .await
            .map_err(|e| FnError::Exception(e.to_string()))?
            .map_err(FnError::Execution)?
    } else {
        Some(std::path::PathBuf::from(
            path.strip_prefix("file://").unwrap_or(path),
        ))
    };
    let Some(local) = local else {
        return Err(FnError::Exception(
            "TypeError: expected str, bytes or os.PathLike object, not bool".into(),
        ));
    };
    std::fs::read_to_string(&local).map_err(|e| {
        FnError::Exception(format!(
            "FileNotFoundError: {}",
            brine_protocol::pyrepr::os_error(&e, local.to_str())
        ))
    })
}

/// The package names `hold`/`unhold` act on: `pkgs` (names or one-key maps), else the names
/// of `sources`, else `name`.
fn targets(b: &Bound) -> Result<Vec<String>, FnError> {
    let (name, pkgs, sources) = (
        b.opt("name").filter(|v| py_truthy(v)),
        b.opt("pkgs").filter(|v| py_truthy(v)),
        b.opt("sources").filter(|v| py_truthy(v)),
    );
    if name.is_none() && pkgs.is_none() && sources.is_none() {
        return Err(FnError::Invocation(
            "One of name, pkgs, or sources must be specified.".into(),
        ));
    }
    if pkgs.is_some() && sources.is_some() {
        return Err(FnError::Invocation(
            "Only one of pkgs or sources can be specified.".into(),
        ));
    }
    let first_key = |v: &Value| match v {
        Value::Map(entries) => entries.first().map_or_else(String::new, |(k, _)| py_str(k)),
        other => py_str(other),
    };
    Ok(match (pkgs, sources) {
        (Some(Value::Array(items)), _) | (None, Some(Value::Array(items))) => {
            items.iter().map(first_key).collect()
        }
        (Some(other), _) | (None, Some(other)) => vec![first_key(other)],
        (None, None) => vec![name.map(py_str).unwrap_or_default()],
    })
}

fn target_ret(name: &str, changes: Value, result: Value, comment: String) -> Value {
    brine_protocol::payload::map(vec![
        ("name", Value::from(name)),
        ("changes", changes),
        ("result", result),
        ("comment", Value::from(comment)),
    ])
}

/// `pkg.hold` (`on`) and `pkg.unhold`: one return per package, as Salt's.
pub(super) async fn hold(b: &Bound, on: bool, test: bool) -> Result<Value, FnError> {
    set_holds(targets(b)?, on, test).await
}

/// The packages `held` by dpkg among `names` (Salt's `pkg.install` releases those it is about
/// to install and holds them again after).
pub(super) async fn held_among(names: &[String]) -> Result<Vec<String>, FnError> {
    let sel = get_selections(None).await?;
    Ok(sel
        .into_iter()
        .filter(|(s, _)| s == "hold")
        .flat_map(|(_, held)| held)
        .filter(|h| names.contains(h))
        .collect())
}

/// Holds (`on`) or releases `targets`, one return per package.
pub(super) async fn set_holds(
    targets: Vec<String>,
    on: bool,
    test: bool,
) -> Result<Value, FnError> {
    let mut out = Vec::new();
    for target in targets {
        let sel = get_selections(Some(&target)).await?;
        let held = sel
            .iter()
            .any(|(s, names)| s == "hold" && !names.is_empty());
        let ok = Value::Boolean(true);
        // Salt asks `hold` for the `hold` selections only, so a package dpkg does not know
        // is "not held" and gets held; `unhold` asks for them all.
        let (result, comment, set_to) = match (on, held) {
            (true, true) => (ok, "is already set to be held.", None),
            (true, false) if test => (Value::Nil, "is set to be held.", None),
            (true, false) => (ok, "is now being held.", Some("hold")),
            (false, _) if sel.is_empty() => (Value::Boolean(false), "does not have a state.", None),
            (false, false) => (ok, "is already set not to be held.", None),
            (false, true) if test => (Value::Nil, "is set not to be held.", None),
            (false, true) => (ok, "is no longer being held.", Some("install")),
        };
        let changes = match set_to {
            None => Value::Map(vec![]),
            Some(state) => {
                let wanted = vec![(state.to_string(), vec![target.clone()])];
                let changed = set_selections(test, &wanted, false).await?;
                let Some((_, old, new)) = changed.iter().find(|(n, _, _)| *n == target) else {
                    return Err(FnError::Exception(format!("KeyError: '{target}'")));
                };
                change(old, new)
            }
        };
        let ret = target_ret(
            &target,
            changes,
            result,
            format!("Package {target} {comment}"),
        );
        out.push((Value::from(target.as_str()), ret));
    }
    Ok(Value::Map(out))
}

#[cfg(test)]
mod tests {
    use super::super::super::call;
    use super::super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::map;

    /// Releases the hold a test made, whatever the test's outcome.
    struct Unhold(&'static str);

    impl Drop for Unhold {
        fn drop(&mut self) {
            let _ = std::process::Command::new("dpkg")
                .arg("--set-selections")
                .stdin(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut child| {
                    use std::io::Write as _;
                    child
                        .stdin
                        .take()
                        .expect("piped")
                        .write_all(format!("{} install\n", self.0).as_bytes())?;
                    child.wait()
                });
        }
    }

    fn is_root() -> bool {
        nix::unistd::Uid::effective().is_root()
    }

    // The answers are those Salt 3007's aptpkg gave on the same machine.
    #[tokio::test]
    async fn live_hold_and_unhold() {
        if !std::path::Path::new("/usr/bin/dpkg").exists() || !is_root() {
            return;
        }
        let mut c = ctx();
        c.grains = std::sync::Arc::new(map([("os_family", s("Debian")), ("osarch", s("amd64"))]));
        let _release = Unhold("bash");
        let target = |ret: &Value, key: &str| {
            brine_protocol::payload::get(brine_protocol::payload::get(ret, "bash").unwrap(), key)
                .cloned()
        };
        let r = call(&c, "pkg.hold", &[s("bash")]).await;
        assert_eq!(
            target(&r.ret, "comment"),
            Some(s("Package bash is now being held.")),
            "{:?}",
            r.ret
        );
        assert_eq!(
            target(&r.ret, "changes"),
            Some(map([("old", s("install")), ("new", s("hold"))]))
        );
        let r = call(&c, "pkg.hold", &[s("bash")]).await;
        assert_eq!(
            target(&r.ret, "comment"),
            Some(s("Package bash is already set to be held."))
        );
        let r = call(&c, "pkg.get_selections", &[s("bash"), s("hold")]).await;
        assert_eq!(r.ret, map([("hold", Value::Array(vec![s("bash")]))]));
        let r = call(&c, "pkg.unhold", &[s("bash")]).await;
        assert_eq!(
            target(&r.ret, "comment"),
            Some(s("Package bash is no longer being held."))
        );
        assert_eq!(
            target(&r.ret, "changes"),
            Some(map([("old", s("hold")), ("new", s("install"))]))
        );
        let r = call(&c, "pkg.unhold", &[s("bash")]).await;
        assert_eq!(
            target(&r.ret, "comment"),
            Some(s("Package bash is already set not to be held."))
        );
        let r = call(&c, "pkg.unhold", &[s("no-such-package-brine")]).await;
        assert_eq!(
            r.ret,
            map([(
                "no-such-package-brine",
                map([
                    ("name", s("no-such-package-brine")),
                    ("changes", Value::Map(vec![])),
                    ("result", Value::Boolean(false)),
                    (
                        "comment",
                        s("Package no-such-package-brine does not have a state.")
                    ),
                ])
            )])
        );
        let r = call(
            &c,
            "pkg.set_selections",
            &[kw(&[(
                "selection",
                map([("bogus", Value::Array(vec![s("bash")]))]),
            )])],
        )
        .await;
        assert_eq!(
            r.ret,
            s("ERROR executing 'pkg.set_selections': Invalid state(s): bogus")
        );
        let r = call(&c, "pkg.hold", &[]).await;
        assert_eq!(r.retcode, 1);
    }

    #[test]
    fn selections_parse_in_dpkg_order() {
        let sel =
            parse_selections("bash\t\t\t\t\t\tinstall\nhello\t\t\t\t\t\thold\nsl\t\t\t\tinstall\n")
                .unwrap();
        assert_eq!(
            sel,
            vec![
                (
                    "install".to_string(),
                    vec!["bash".to_string(), "sl".to_string()]
                ),
                ("hold".to_string(), vec!["hello".to_string()]),
            ]
        );
        assert!(parse_selections("one two three\n").is_err());
        assert_eq!(parse_selections("").unwrap(), vec![]);
    }
}
