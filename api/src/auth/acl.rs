//! The `external_auth` ACL, with the semantics of Salt 3007 (`salt/utils/minions.py`,
//! `salt/netapi/__init__.py`), plus Brine's event-bus visibility rules.
//!
//! An ACL ("auth list") is a list of JSON values taken from `external_auth:<eauth>:<user>`:
//! * a string: a function regex (`re.match`, anchored at the start only) allowed on any target;
//!   strings starting with `@` grant runner/wheel rights (`@runner`, `@runners`, `@wheel`,
//!   `@wheels`, `@<module>`);
//! * a one-key map `{<compound target>: <function list>}` for execution modules, or
//!   `{@runner|@wheel|@<module>: <function list>}` for runner/wheel functions;
//! * in a function list, a string is a function regex and a one-key map
//!   `{<function regex>: {args: [..], kwargs: {..}}}` (or a list of such maps) adds argument rules.
//!
//! Deliberate differences from Salt, all stricter: a multi-function job (`fun` a list) needs every
//! function allowed (Salt allows it when any one is); malformed entries are skipped rather than
//! aborting the whole check; `^option` keys of an eauth block are never taken as user names.

use super::eauth::Identity;
use super::pycompat::{expr_match, py_repr, py_str, re_match, re_valid};
use brine_protocol::config::MasterConfig;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// The function every publisher may call: the master's own job-liveness checks run it.
const ALWAYS_ALLOWED: &str = "saltutil.find_job";

fn eauth_block<'a>(cfg: &'a MasterConfig, eauth: &str) -> Option<&'a Map<String, Value>> {
    cfg.external_auth.get(eauth).and_then(Value::as_object)
}

/// Python's `list.extend(value)` for the entry shapes that make sense in an ACL.
fn extend_with(list: &mut Vec<Value>, value: &Value) {
    match value {
        Value::Array(items) => list.extend(items.iter().cloned()),
        Value::Null => {}
        other => {
            tracing::warn!(entry = %py_repr(other), "external_auth: an ACL entry is not a list; ignored");
        }
    }
}

/// Salt's `fill_auth_list`: the ACL of `id` from `external_auth[id.eauth]`.
///
/// Keys match the user the way Salt 3007 does it, `expr_match(key, name)`, where the *user name*
/// is the glob/regex pattern (so a key `web*` does not match user `web1`). `group%` keys apply to
/// members of `group`. The `*` entry is added only when no key matched the name and
/// `permissive_acl` is off; with `permissive_acl` on, Salt treats `*` like any other key.
pub fn auth_list(cfg: &MasterConfig, id: &Identity) -> Vec<Value> {
    let Some(block) = eauth_block(cfg, &id.eauth) else {
        return Vec::new();
    };
    let permissive = cfg.permissive_acl;
    let mut list = Vec::new();
    let mut name_matched = false;
    for (key, value) in block {
        if key.starts_with('^') || (key == "*" && !permissive) {
            continue;
        }
        if key.ends_with('%') {
            let group = key.trim_end_matches('%');
            if id.groups.iter().any(|g| g == group) {
                extend_with(&mut list, value);
            }
        } else if expr_match(key, &id.name) {
            name_matched = true;
            extend_with(&mut list, value);
        }
    }
    if !permissive && !name_matched {
        if let Some(star) = block.get("*") {
            extend_with(&mut list, star);
        }
    }
    list
}

/// What `POST /login` returns as `perms` (rest_cherrypy's `sum_permissions` +
/// `sorted_permissions`): the user's own entry (exact key), the `*` entry and the entries of the
/// user's `group%` keys, de-duplicated, strings sorted first, then the rest sorted by Python repr.
/// An empty result is `{}`, as in Salt.
pub fn login_perms(cfg: &MasterConfig, id: &Identity) -> Value {
    let Some(block) = eauth_block(cfg, &id.eauth) else {
        return Value::Object(Map::new());
    };
    let mut perms = Vec::new();
    if let Some(own) = block.get(&id.name) {
        extend_with(&mut perms, own);
    }
    if let Some(star) = block.get("*") {
        extend_with(&mut perms, star);
    }
    let user_groups: HashSet<&str> = id.groups.iter().map(String::as_str).collect();
    for (key, value) in block {
        if key.ends_with('%') && user_groups.contains(key.trim_end_matches('%')) {
            extend_with(&mut perms, value);
        }
    }
    let mut strings: Vec<String> = Vec::new();
    let mut others: Vec<Value> = Vec::new();
    for entry in perms {
        match entry {
            Value::String(s) => {
                if !strings.contains(&s) {
                    strings.push(s);
                }
            }
            other => {
                if !others.contains(&other) {
                    others.push(other);
                }
            }
        }
    }
    if strings.is_empty() && others.is_empty() {
        return Value::Object(Map::new());
    }
    strings.sort();
    let mut keyed: Vec<(String, Value)> = others.into_iter().map(|v| (py_repr(&v), v)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<Value> = strings.into_iter().map(Value::String).collect();
    out.extend(keyed.into_iter().map(|(_, v)| v));
    Value::Array(out)
}

/// Salt's `match_check` for one function name: `regex` must be a string and `re.match` it.
fn fun_matches(regex: &Value, fun: &str) -> bool {
    regex.as_str().is_some_and(|r| re_match(r, fun))
}

/// How argument rules are applied.
#[derive(Clone, Copy)]
enum Args<'a> {
    /// Check them against these positional and keyword arguments (`None`: not given).
    Check(Option<&'a [Value]>, Option<&'a Map<String, Value>>),
    /// Only the function name counts (event visibility).
    Ignore,
}

/// Salt's `__args_check`: one condition map (or a list of them) must accept the arguments.
fn args_check(valid: &Value, args: Option<&[Value]>, kwargs: Option<&Map<String, Value>>) -> bool {
    let conds: &[Value] = match valid {
        Value::Array(items) => items,
        one => std::slice::from_ref(one),
    };
    'conds: for cond in conds {
        let Some(cond) = cond.as_object() else {
            continue;
        };
        let cond_args: &[Value] = match cond.get("args") {
            None => &[],
            Some(Value::Array(a)) => a,
            Some(_) => continue,
        };
        for (i, pattern) in cond_args.iter().enumerate() {
            let Some(given) = args.and_then(|a| a.get(i)) else {
                continue 'conds;
            };
            if pattern.is_null() {
                continue;
            }
            if !fun_matches(pattern, &py_str(given)) {
                continue 'conds;
            }
        }
        let empty = Map::new();
        let cond_kwargs = match cond.get("kwargs") {
            None => &empty,
            Some(Value::Object(m)) => m,
            Some(_) => continue,
        };
        for (key, pattern) in cond_kwargs {
            let Some(given) = kwargs.and_then(|k| k.get(key)) else {
                continue 'conds;
            };
            if pattern.is_null() {
                continue;
            }
            if !fun_matches(pattern, &py_str(given)) {
                continue 'conds;
            }
        }
        return true;
    }
    false
}

/// Salt's `__fun_check`: a function list (or one item) allows `fun` with these arguments.
fn fun_check(valid: &Value, fun: &str, args: Args<'_>) -> bool {
    let conds: &[Value] = match valid {
        Value::Array(items) => items,
        one => std::slice::from_ref(one),
    };
    conds.iter().any(|cond| match cond {
        Value::String(_) => fun_matches(cond, fun),
        Value::Object(m) if m.len() == 1 => {
            let (fname, rules) = m.iter().next().expect("a map of length 1 has an entry");
            re_match(fname, fun)
                && match args {
                    Args::Ignore => true,
                    Args::Check(a, k) => args_check(rules, a, k),
                }
        }
        _ => false,
    })
}

/// Split a publish `arg` list into positional args and the trailing `__kwarg__` map, as Salt does.
fn split_kwarg(arg: &Value) -> (Option<&[Value]>, Option<&Map<String, Value>>) {
    let Value::Array(items) = arg else {
        return (None, None);
    };
    match items.last() {
        Some(Value::Object(m)) if m.contains_key("__kwarg__") => {
            (Some(&items[..items.len() - 1]), Some(m))
        }
        _ => (Some(items.as_slice()), None),
    }
}

/// One function of a publish against the ACL (Salt's `auth_check` loop body).
fn local_allows(
    list: &[Value],
    fun: &str,
    arg: &Value,
    minions: &[String],
    expand: &dyn Fn(&str) -> Vec<String>,
) -> bool {
    if fun == ALWAYS_ALLOWED {
        return true;
    }
    for entry in list {
        match entry {
            Value::String(_) if fun_matches(entry, fun) => return true,
            Value::Object(m) if m.len() == 1 => {
                let (target, funs) = m.iter().next().expect("a map of length 1 has an entry");
                // validate_tgt: every targeted minion must be designated by the entry's target.
                let designated: HashSet<String> = expand(target).into_iter().collect();
                if !minions.iter().all(|id| designated.contains(id)) {
                    continue;
                }
                let (args, kwargs) = split_kwarg(arg);
                if fun_check(funs, fun, Args::Check(args, kwargs)) {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// May this user publish `fun` (a name, or a list for a multi-function job) with `arg` (a list,
/// possibly ending with a `{"__kwarg__": true, ..}` map; a list of such lists for a
/// multi-function job) to a target whose expected minions are `minions`?
///
/// `expand(compound_expr)` returns the ids a compound target expression designates.
/// `saltutil.find_job` is always allowed. Every function of a multi-function job must be allowed.
pub fn check_local(
    list: &[Value],
    fun: &Value,
    arg: &Value,
    minions: &[String],
    expand: &dyn Fn(&str) -> Vec<String>,
) -> bool {
    match fun {
        Value::String(f) => local_allows(list, f, arg, minions, expand),
        Value::Array(funs) if !funs.is_empty() => {
            let per_fun = arg.as_array();
            funs.iter().enumerate().all(|(i, f)| {
                let Some(f) = f.as_str() else {
                    return false;
                };
                let a = per_fun.and_then(|a| a.get(i)).unwrap_or(&Value::Null);
                local_allows(list, f, a, minions, expand)
            })
        }
        _ => false,
    }
}

/// The two kinds of master-side functions with `@` ACL entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecForm {
    Runner,
    Wheel,
}

impl SpecForm {
    fn name(self) -> &'static str {
        match self {
            SpecForm::Runner => "runner",
            SpecForm::Wheel => "wheel",
        }
    }
}

/// The outcome of Salt's `spec_check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecDecision {
    Allowed,
    Denied,
    /// `fun` is not `<module>.<function>`: Salt answers "A command invocation error occurred:
    /// Check syntax." (`SaltInvocationError`) instead of an authorisation error.
    BadSyntax,
}

fn spec_decide(list: &[Value], fun: &str, form: SpecForm, args: Args<'_>) -> SpecDecision {
    if list.is_empty() {
        return SpecDecision::Denied;
    }
    let comps: Vec<&str> = fun.split('.').collect();
    let [module, fun_name] = comps.as_slice() else {
        return SpecDecision::BadSyntax;
    };
    let form_name = form.name();
    let plural = format!("@{form_name}s");
    for entry in list {
        match entry {
            Value::String(s) => {
                if let Some(rest) = s.strip_prefix('@') {
                    if rest == *module || rest == form_name || *s == plural {
                        return SpecDecision::Allowed;
                    }
                }
            }
            Value::Object(m) if m.len() == 1 => {
                let (key, funs) = m.iter().next().expect("a map of length 1 has an entry");
                let Some(rest) = key.strip_prefix('@') else {
                    continue;
                };
                if rest == *module && fun_check(funs, fun_name, args) {
                    return SpecDecision::Allowed;
                }
                if (rest == form_name || *key == plural) && fun_check(funs, fun, args) {
                    return SpecDecision::Allowed;
                }
            }
            _ => {}
        }
    }
    SpecDecision::Denied
}

/// Salt's `spec_check` for a runner or wheel call with positional `arg` (a list, or null) and
/// keyword `kwarg` (a map, or null).
pub fn spec_check(
    list: &[Value],
    fun: &str,
    arg: &Value,
    kwarg: &Value,
    form: SpecForm,
) -> SpecDecision {
    let args = arg.as_array().map(Vec::as_slice);
    let kwargs = kwarg.as_object();
    spec_decide(list, fun, form, Args::Check(args, kwargs))
}

/// May this user run runner function `fun` with these arguments? (`false` also for a malformed
/// name; use [`spec_check`] to tell the two apart.)
pub fn check_runner(list: &[Value], fun: &str, arg: &Value, kwarg: &Value) -> bool {
    spec_check(list, fun, arg, kwarg, SpecForm::Runner) == SpecDecision::Allowed
}

/// May this user read job `jid` (its record, returns and events)? The right `GET /jobs/<jid>`
/// needs: the runner `jobs.list_job` with that jid.
pub fn may_read_job(list: &[Value], jid: &str) -> bool {
    let kwarg = Value::Object(Map::from_iter([("jid".to_string(), Value::from(jid))]));
    check_runner(list, "jobs.list_job", &Value::Array(vec![]), &kwarg)
}

/// May this user run wheel function `fun` with these arguments?
pub fn check_wheel(list: &[Value], fun: &str, arg: &Value, kwarg: &Value) -> bool {
    spec_check(list, fun, arg, kwarg, SpecForm::Wheel) == SpecDecision::Allowed
}

/// Function names a regex must match to count as "every function".
const FULL_RIGHTS_PROBES: &[&str] = &[
    "test.ping",
    "cmd.run",
    "state.highstate",
    "grains.items",
    "saltutil.sync_all",
    "x",
    "Z_9.z-q",
];

/// A user's rights, pre-digested for event filtering.
struct EventRights<'a> {
    list: &'a [Value],
    /// A plain function entry: allowed on every minion.
    unrestricted_local: bool,
    /// A plain function entry matching any function (`.*`).
    full: bool,
    /// The target expressions of `{target: [...]}` entries.
    targets: Vec<&'a str>,
    expand: &'a dyn Fn(&str) -> Vec<String>,
    visible: std::cell::OnceCell<HashSet<String>>,
}

impl<'a> EventRights<'a> {
    fn new(list: &'a [Value], expand: &'a dyn Fn(&str) -> Vec<String>) -> Self {
        let mut unrestricted_local = false;
        let mut full = false;
        let mut targets = Vec::new();
        for entry in list {
            match entry {
                Value::String(s) if !s.starts_with('@') && re_valid(s) => {
                    unrestricted_local = true;
                    if FULL_RIGHTS_PROBES.iter().all(|p| re_match(s, p)) {
                        full = true;
                    }
                }
                Value::Object(m) if m.len() == 1 => {
                    let key = m.keys().next().expect("a map of length 1 has a key");
                    if !key.starts_with('@') {
                        targets.push(key.as_str());
                    }
                }
                _ => {}
            }
        }
        EventRights {
            list,
            unrestricted_local,
            full,
            targets,
            expand,
            visible: std::cell::OnceCell::new(),
        }
    }

    fn minion(&self, id: &str) -> bool {
        if self.unrestricted_local {
            return true;
        }
        if id.is_empty() {
            return false;
        }
        self.visible
            .get_or_init(|| self.targets.iter().flat_map(|t| (self.expand)(t)).collect())
            .contains(id)
    }

    /// Rights to the runner/wheel function named in `data.fun` (`runner.<mod>.<fun>`), ignoring
    /// argument rules; without a name, unrestricted `@runner`/`@wheel` rights are needed.
    fn spec(&self, data: &Value, form: SpecForm) -> bool {
        let prefix = format!("{}.", form.name());
        match data
            .get("fun")
            .and_then(Value::as_str)
            .and_then(|f| f.strip_prefix(&prefix))
        {
            Some(fun) => spec_decide(self.list, fun, form, Args::Ignore) == SpecDecision::Allowed,
            None => self.unrestricted_spec(form),
        }
    }

    fn unrestricted_spec(&self, form: SpecForm) -> bool {
        let single = format!("@{}", form.name());
        let plural = format!("@{}s", form.name());
        self.list
            .iter()
            .any(|e| e.as_str().is_some_and(|s| s == single || s == plural))
    }
}

fn is_jid(tag: &str) -> bool {
    !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_digit())
}

/// The jid a job event belongs to: `salt/job/<jid>/..` and the bare `<jid>` event (`""` for
/// `salt/job/error`-style tags without one). `None` for every other event.
pub fn job_of_event(tag: &str) -> Option<&str> {
    if is_jid(tag) {
        return Some(tag);
    }
    let rest = tag.strip_prefix("salt/job")?;
    if rest.is_empty() {
        return Some("");
    }
    let rest = rest.strip_prefix('/')?;
    Some(rest.split('/').next().unwrap_or(""))
}

/// May this user see this event of the master's bus? (Brine goes beyond Salt, which shows every
/// event to every authenticated user.)
///
/// * Job events (`salt/job/<jid>/..` and the bare `<jid>` event) are shown to users who may read
///   that job through `GET /jobs/<jid>` ([`may_read_job`]), and to nobody else.
/// * `salt/run/..` needs rights to the runner named in `data.fun` (or `@runner`), `salt/wheel/..`
///   likewise for wheel; `salt/key` and `salt/auth` need the right to call wheel `key.list_all`.
/// * `salt/minion/<id>/..`, `minion_start` (`data.id`), `minion/refresh/<id>` and
///   `salt/beacon/<id>/..` follow the minion rule.
/// * `salt/presence/..` needs a plain function entry; `salt/netapi/hook..` is shown to everyone.
/// * Anything else needs a plain entry matching every function (`.*`).
pub fn may_see_event(
    list: &[Value],
    tag: &str,
    data: &Value,
    expand: &dyn Fn(&str) -> Vec<String>,
) -> bool {
    let rights = EventRights::new(list, expand);
    let parts: Vec<&str> = tag.split('/').collect();
    if let Some(jid) = job_of_event(tag) {
        return may_read_job(list, jid);
    }
    match parts.as_slice() {
        ["salt", "netapi", "hook", ..] => true,
        ["salt", "run", ..] => rights.spec(data, SpecForm::Runner),
        ["salt", "wheel", ..] => rights.spec(data, SpecForm::Wheel),
        ["salt", "key", ..] | ["salt", "auth", ..] => {
            spec_decide(list, "key.list_all", SpecForm::Wheel, Args::Ignore)
                == SpecDecision::Allowed
        }
        ["salt", "minion", id, ..] | ["minion", "refresh", id, ..] | ["salt", "beacon", id, ..] => {
            rights.minion(id)
        }
        ["minion_start"] => rights.minion(data.get("id").and_then(Value::as_str).unwrap_or("")),
        ["salt", "presence", ..] => rights.unrestricted_local,
        _ => rights.full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::config::RawConfig;
    use serde_json::json;

    fn cfg(external_auth: Value, extra: Value) -> MasterConfig {
        let mut values = Map::new();
        values.insert("external_auth".into(), external_auth);
        if let Value::Object(m) = extra {
            values.extend(m);
        }
        let raw = RawConfig {
            values,
            ..RawConfig::default()
        };
        MasterConfig::from_raw(raw).expect("valid test config")
    }

    fn who(name: &str, eauth: &str, groups: &[&str]) -> Identity {
        Identity {
            name: name.into(),
            eauth: eauth.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn list(v: Value) -> Vec<Value> {
        v.as_array().expect("a list").clone()
    }

    /// m1 has os Debian, m2 os RedHat; web1/web2 are web servers.
    fn expand(expr: &str) -> Vec<String> {
        let all = ["m1", "m2", "web1", "web2"];
        let ids: Vec<&str> = match expr {
            "*" => all.to_vec(),
            "G@os:*" => all.to_vec(),
            "G@os:Debian" => vec!["m1"],
            "web*" => vec!["web1", "web2"],
            "m1 or m2" => vec!["m1", "m2"],
            other => all.iter().copied().filter(|id| *id == other).collect(),
        };
        ids.into_iter().map(String::from).collect()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// `check_local` with the test minions.
    fn local(acl: &[Value], fun: Value, arg: Value, minions: &[&str]) -> bool {
        check_local(acl, &fun, &arg, &ids(minions), &expand)
    }

    #[test]
    fn fill_auth_list_follows_salt() {
        let c = cfg(
            json!({"pam": {
                "web*": ["a"], "bob": ["b"], "*": ["star"], "adm%": ["g"], "^filename": "/x"
            }}),
            json!({}),
        );
        assert_eq!(auth_list(&c, &who("web1", "pam", &[])), vec![json!("star")]);
        assert_eq!(
            auth_list(&c, &who("bob", "pam", &["adm"])),
            vec![json!("b"), json!("g")]
        );
        // Matched only through a group: `*` still applies.
        assert_eq!(
            auth_list(&c, &who("carl", "pam", &["adm"])),
            vec![json!("g"), json!("star")]
        );
        // The user name is the pattern (Salt's expr_match argument order).
        assert_eq!(
            auth_list(&c, &who(".*", "pam", &[])),
            vec![json!("a"), json!("b")]
        );
        assert!(auth_list(&c, &who("bob", "ldap", &[])).is_empty());

        let p = cfg(
            json!({"pam": {"bob": ["b"], "*": ["star"]}}),
            json!({"permissive_acl": true}),
        );
        assert_eq!(auth_list(&p, &who("bob", "pam", &[])), vec![json!("b")]);
        assert!(auth_list(&p, &who("carl", "pam", &[])).is_empty());
    }

    #[test]
    fn login_perms_are_the_sorted_union() {
        let c = cfg(
            json!({"auto": {
                "saltdev": ["@wheel", ".*", {"m1": ["test.*"]}, "@runner", ".*"],
                "*": ["@jobs", {"a": ["x"]}],
                "ops%": [{"m1": ["test.*"]}, "zz"],
                "nobody": []
            }}),
            json!({}),
        );
        assert_eq!(
            login_perms(&c, &who("saltdev", "auto", &["ops"])),
            json!([".*", "@jobs", "@runner", "@wheel", "zz", {"a": ["x"]}, {"m1": ["test.*"]}])
        );
        let e = cfg(json!({"auto": {"nobody": []}}), json!({}));
        assert_eq!(login_perms(&e, &who("nobody", "auto", &[])), json!({}));
        assert_eq!(login_perms(&e, &who("x", "pam", &[])), json!({}));
    }

    #[test]
    fn plain_function_entries_allow_any_target() {
        let acl = list(json!(["test.*", "cmd.run"]));
        let all = &["m1", "m2"];
        assert!(local(&acl, json!("test.ping"), json!([]), all));
        // re.match: anchored at the start only.
        assert!(local(&acl, json!("test.pingX"), json!([]), all));
        assert!(local(&acl, json!("cmd.run_all"), json!([]), all));
        assert!(!local(&acl, json!("state.apply"), json!([]), all));
        assert!(!local(&acl, json!("mytest.ping"), json!([]), all));
    }

    #[test]
    fn alice_is_limited_to_m1() {
        let acl = list(json!([{"m1": ["test.*"]}]));
        assert!(local(&acl, json!("test.ping"), json!([]), &["m1"]));
        assert!(!local(&acl, json!("test.ping"), json!([]), &["m2"]));
        assert!(!local(&acl, json!("test.ping"), json!([]), &["m1", "m2"]));
        assert!(!local(&acl, json!("cmd.run"), json!(["id"]), &["m1"]));
        // find_job is always allowed.
        assert!(local(
            &acl,
            json!("saltutil.find_job"),
            json!(["20250101"]),
            &["m2"]
        ));
        // A target that matched nothing is inside every target (Salt's validate_tgt).
        assert!(local(&acl, json!("test.ping"), json!([]), &[]));
    }

    #[test]
    fn bob_targets_by_grain() {
        let acl = list(json!([{"G@os:*": ["cmd.run"]}]));
        assert!(local(&acl, json!("cmd.run"), json!(["ls"]), &["m1"]));
        assert!(local(
            &acl,
            json!("cmd.run"),
            json!(["ls"]),
            &["m1", "m2", "web1"]
        ));
        assert!(!local(&acl, json!("test.ping"), json!([]), &["m1"]));
        let debian = list(json!([{"G@os:Debian": ["cmd.run"]}]));
        assert!(!local(&debian, json!("cmd.run"), json!(["ls"]), &["m2"]));
    }

    #[test]
    fn argument_rules() {
        let acl = list(json!([{"*": [
            {"test.echo": {"args": ["hello.*"]}},
            {"cmd.run": {"args": ["^ls .*"], "kwargs": {"cwd": "/srv"}}},
            {"test.arg": [{"args": [null, "2"]}, {"kwargs": {"flag": "True"}}]}
        ]}]));
        let m = &["m1"];
        let ok = |fun: &str, arg: Value| local(&acl, json!(fun), arg, m);
        assert!(ok("test.echo", json!(["hello world"])));
        assert!(ok("test.echo", json!(["hello", "more"])));
        assert!(!ok("test.echo", json!(["goodbye"])));
        assert!(!ok("test.echo", json!([])));
        assert!(!ok("test.echo", json!(null)));
        assert!(ok(
            "cmd.run",
            json!(["ls -l", {"__kwarg__": true, "cwd": "/srv/salt"}])
        ));
        assert!(!ok("cmd.run", json!(["ls -l"])));
        assert!(!ok(
            "cmd.run",
            json!(["rm -rf /", {"__kwarg__": true, "cwd": "/srv"}])
        ));
        assert!(!ok(
            "cmd.run",
            json!(["ls", {"__kwarg__": true, "cwd": "/etc"}])
        ));
        // str() of non-strings, Python style; a null rule means "any value".
        assert!(ok("test.arg", json!(["anything", 2])));
        assert!(ok("test.arg", json!([{"a": 1}, 25])));
        assert!(!ok("test.arg", json!(["anything", 3])));
        assert!(ok("test.arg", json!([{"__kwarg__": true, "flag": true}])));
        assert!(!ok("test.arg", json!([{"__kwarg__": true, "flag": false}])));
        // Without the `*` target wrapper, Salt reads `test.echo` as a target expression.
        let top = list(json!([{"test.echo": {"args": ["hello.*"]}}]));
        assert!(!local(&top, json!("test.echo"), json!(["hello"]), m));
    }

    #[test]
    fn multi_function_jobs_need_every_function() {
        let acl = list(json!(["test.*"]));
        let m = &["m1"];
        assert!(local(
            &acl,
            json!(["test.ping", "test.version"]),
            json!([[], []]),
            m
        ));
        assert!(!local(
            &acl,
            json!(["test.ping", "cmd.run"]),
            json!([[], ["id"]]),
            m
        ));
        assert!(!local(&acl, json!([]), json!([]), m));
        let argful = list(json!([{"*": [{"test.echo": {"args": ["hi"]}}, "test.ping"]}]));
        assert!(local(
            &argful,
            json!(["test.ping", "test.echo"]),
            json!([[], ["hi there"]]),
            m
        ));
        assert!(!local(
            &argful,
            json!(["test.ping", "test.echo"]),
            json!([["hi"], ["bye"]]),
            m
        ));
    }

    #[test]
    fn runner_and_wheel_rights() {
        let none = json!(null);
        let run = |acl: &Value, fun: &str| check_runner(&list(acl.clone()), fun, &none, &none);
        let wheel = |acl: &Value, fun: &str| check_wheel(&list(acl.clone()), fun, &none, &none);
        assert!(run(&json!(["@runner"]), "jobs.list_jobs"));
        assert!(run(&json!(["@runners"]), "manage.up"));
        assert!(!run(&json!(["@wheel"]), "manage.up"));
        assert!(wheel(&json!(["@wheel"]), "key.list_all"));
        assert!(wheel(&json!(["@wheels"]), "key.list_all"));
        assert!(!wheel(&json!([".*"]), "key.list_all"));
        assert!(!run(&json!([".*"]), "jobs.list_jobs"));
        // @<module>: that module, for runners and wheel alike.
        assert!(run(&json!(["@jobs"]), "jobs.list_job"));
        assert!(!run(&json!(["@jobs"]), "manage.up"));
        assert!(wheel(&json!(["@key"]), "key.accept"));
        // Map forms.
        let restricted = json!([{"@runner": ["manage.*"]}]);
        assert!(run(&restricted, "manage.up"));
        assert!(!run(&restricted, "jobs.list_jobs"));
        let module = json!([{"@jobs": ["lookup_jid"]}]);
        assert!(run(&module, "jobs.lookup_jid"));
        assert!(!run(&module, "jobs.list_jobs"));
        let both = json!([{"@runner": ["jobs.*", "manage.up"]}]);
        assert!(run(&both, "jobs.active"));
        assert!(run(&both, "manage.up"));
        assert!(!run(&both, "manage.down"));
        assert!(!run(&json!([]), "manage.up"));
    }

    #[test]
    fn runner_argument_rules_and_syntax() {
        let acl = list(json!([{"@runner": [{"jobs.lookup_jid": {"kwargs": {"jid": "^2025"}}}]}]));
        assert!(check_runner(
            &acl,
            "jobs.lookup_jid",
            &json!([]),
            &json!({"jid": "20250101000000000000"})
        ));
        assert!(!check_runner(
            &acl,
            "jobs.lookup_jid",
            &json!([]),
            &json!({"jid": "20240101000000000000"})
        ));
        assert!(!check_runner(
            &acl,
            "jobs.lookup_jid",
            &json!([]),
            &json!(null)
        ));
        let all = list(json!(["@runner"]));
        assert_eq!(
            spec_check(&all, "jobs", &json!([]), &json!({}), SpecForm::Runner),
            SpecDecision::BadSyntax
        );
        assert_eq!(
            spec_check(&all, "a.b.c", &json!([]), &json!({}), SpecForm::Runner),
            SpecDecision::BadSyntax
        );
        assert_eq!(
            spec_check(&[], "jobs", &json!([]), &json!({}), SpecForm::Runner),
            SpecDecision::Denied
        );
    }

    #[test]
    fn event_visibility() {
        let nothing = json!({});
        let see = |acl: &Value, tag: &str, data: &Value| {
            may_see_event(&list(acl.clone()), tag, data, &expand)
        };
        let admin = json!([".*", "@runner", "@wheel"]);
        let tester = json!(["test.*"]);
        let alice = json!([{"m1": ["test.*"]}]);
        let jobs = json!(["@jobs"]);

        for acl in [&admin, &tester] {
            assert!(see(acl, "salt/presence/present", &nothing));
        }
        assert!(see(&admin, "salt/stats/MWorker-1", &nothing));
        assert!(!see(&tester, "salt/stats/MWorker-1", &nothing));
        assert!(!see(
            &tester,
            "salt/run/1/new",
            &json!({"fun": "runner.jobs.list_jobs"})
        ));

        // Job events: only for users who may read the job through /jobs (the runner right
        // jobs.list_job), whatever minions they may target.
        for tag in [
            "salt/job/20250101000000000000/ret/m1",
            "salt/job/20250101000000000000/prog/m1/0",
            "salt/job/20250101000000000000/new",
            "salt/job/20250101000000000000/publish",
            "20250101000000000000",
        ] {
            let data = json!({"minions": ["m1"]});
            assert!(see(&admin, tag, &data), "{tag}");
            assert!(see(&jobs, tag, &data), "{tag}");
            assert!(!see(&tester, tag, &data), "{tag}");
            assert!(!see(&alice, tag, &data), "{tag}");
        }
        let one_job =
            json!([{"@jobs": [{"list_job": {"kwargs": {"jid": "20250101000000000000"}}}]}]);
        assert!(see(
            &one_job,
            "salt/job/20250101000000000000/ret/m1",
            &nothing
        ));
        assert!(!see(
            &one_job,
            "salt/job/20250101000000000001/ret/m1",
            &nothing
        ));
        assert_eq!(job_of_event("salt/job/123/ret/m1"), Some("123"));
        assert_eq!(
            job_of_event("20250101000000000000"),
            Some("20250101000000000000")
        );
        assert_eq!(job_of_event("salt/jobs"), None);
        assert_eq!(job_of_event("salt/run/1/new"), None);
        assert!(see(&alice, "salt/minion/m1/start", &nothing));
        assert!(!see(&alice, "salt/minion/m2/start", &nothing));
        assert!(see(&alice, "minion_start", &json!({"id": "m1"})));
        assert!(!see(&alice, "minion_start", &json!({"id": "m2"})));
        assert!(see(&alice, "minion/refresh/m1", &nothing));
        assert!(see(&alice, "salt/beacon/m1/inotify//etc", &nothing));
        assert!(!see(&alice, "salt/beacon/m2/inotify//etc", &nothing));
        assert!(!see(&alice, "salt/presence/change", &nothing));
        assert!(!see(&alice, "salt/key", &nothing));
        assert!(!see(&alice, "salt/auth", &nothing));
        assert!(!see(&alice, "custom/tag", &nothing));
        assert!(see(&alice, "salt/netapi/hook/deploy", &nothing));
        assert!(see(&json!([]), "salt/netapi/hook", &nothing));

        let run_new = json!({"fun": "runner.jobs.list_jobs"});
        assert!(see(&jobs, "salt/run/1/new", &run_new));
        assert!(!see(
            &jobs,
            "salt/run/1/new",
            &json!({"fun": "runner.manage.up"})
        ));
        assert!(!see(&jobs, "salt/run/1/args", &nothing));
        assert!(see(&admin, "salt/run/1/args", &nothing));
        assert!(see(
            &admin,
            "salt/wheel/1/ret",
            &json!({"fun": "wheel.key.list_all"})
        ));
        assert!(see(
            &admin,
            "salt/key",
            &json!({"act": "accept", "id": "m3"})
        ));
        assert!(see(&json!(["@key"]), "salt/auth", &nothing));
        assert!(!see(
            &json!([{"@runner": ["manage.*"]}]),
            "salt/wheel/1/new",
            &nothing
        ));
        // Argument rules do not hide the events of a function the user may call.
        let argful = json!([{"@runner": [{"jobs.lookup_jid": {"args": ["x"]}}]}]);
        assert!(see(
            &argful,
            "salt/run/1/ret",
            &json!({"fun": "runner.jobs.lookup_jid"})
        ));
    }
}
