//! The `user` state module: `user.present` and `user.absent`, through the minion's `user`,
//! `group` and `shadow` execution modules, with Salt's comments and changes: passwords
//! (`password`, `hash_password`, `enforce_password`, `empty_password`, `password_lock`) and
//! the shadow attributes (`date`, `mindays`, `maxdays`, `inactdays`, `warndays`, `expire`)
//! included. Password hashes never show in a result: Salt's `XXX-REDACTED-XXX` stands for
//! them.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::group::{items, py_int};
use super::{ret, Accepts, Call, Spec};
use crate::verify::{py_repr, py_text};
use brine_protocol::payload::json_truthy;
use brine_protocol::pyeq::py_eq_json as py_eq;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "present",
        required: &["name"],
        accepts: Accepts::Only(&[
            "name",
            "uid",
            "gid",
            "usergroup",
            "groups",
            "optional_groups",
            "remove_groups",
            "home",
            "createhome",
            "persist_home",
            "password",
            "hash_password",
            "enforce_password",
            "empty_password",
            "shell",
            "unique",
            "system",
            "fullname",
            "roomnumber",
            "workphone",
            "homephone",
            "other",
            "loginclass",
            "date",
            "mindays",
            "maxdays",
            "inactdays",
            "warndays",
            "expire",
            "win_homedrive",
            "win_profile",
            "win_logonscript",
            "win_description",
            "nologinit",
            "allow_uid_change",
            "allow_gid_change",
            "password_lock",
            "local",
        ]),
        run: present,
    },
    Spec {
        name: "absent",
        required: &["name"],
        accepts: Accepts::Only(&["name", "purge", "force", "local"]),
        run: absent,
    },
];

/// What Salt shows in place of a password hash.
const REDACTED: &str = "XXX-REDACTED-XXX";

/// The shadow attributes: the state's argument, the `shadow.info` key, the `shadow.set_*`
/// function and the word of the comment when setting it on a new user fails.
const SHADOW_FIELDS: [(&str, &str, &str, &str); 5] = [
    ("mindays", "min", "shadow.set_mindays", "minimum days"),
    ("maxdays", "max", "shadow.set_maxdays", "maximum days"),
    (
        "inactdays",
        "inact",
        "shadow.set_inactdays",
        "inactive days",
    ),
    ("warndays", "warn", "shadow.set_warndays", "warn days"),
    ("expire", "expire", "shadow.set_expire", "expire days"),
];

fn none() -> Map<String, Value> {
    Map::new()
}

fn info(c: &Call, fun: &str, name: &str) -> Result<Value, String> {
    c.host.call(fun, &[json!(name)], &none())
}

fn is_empty(v: &Value) -> bool {
    v.as_object().is_none_or(Map::is_empty)
}

/// The system's groups (name, gid), for `file.group_to_gid` and `file.gid_to_group`.
struct Groups(Vec<(String, i64)>);

impl Groups {
    fn load(c: &Call) -> Result<Groups, String> {
        let all = c.host.call("group.getent", &[], &none())?;
        Ok(Groups(
            all.as_array()
                .map(|groups| {
                    groups
                        .iter()
                        .filter_map(|g| {
                            Some((g.get("name").map(py_text)?, g.get("gid")?.as_i64()?))
                        })
                        .collect()
                })
                .unwrap_or_default(),
        ))
    }

    /// `file.group_to_gid`: an int stays, a name becomes its gid, else `""`.
    fn to_gid(&self, group: &Value) -> Value {
        match group {
            Value::Null => json!(""),
            Value::Number(_) | Value::Bool(_) => group.clone(),
            other => {
                let name = py_text(other);
                self.0
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(json!(""), |(_, gid)| json!(gid))
            }
        }
    }

    /// `file.gid_to_group`: the name of a gid (or of a group name), the gid itself when no
    /// group has it, `""` for an unknown name.
    fn to_group(&self, gid: &Value) -> Value {
        let gid = match py_int(gid) {
            Some(n) => json!(n),
            None => self.to_gid(gid),
        };
        let Some(n) = gid.as_i64() else {
            return json!("");
        };
        self.0
            .iter()
            .find(|(_, g)| *g == n)
            .map_or(gid, |(name, _)| json!(name))
    }
}

/// The password and shadow attributes `user.present` is asked for (`None`: not given).
#[derive(Clone, Default)]
struct ShadowWanted {
    /// The hash to set (hashed already with `hash_password`), when truthy.
    password: Option<Value>,
    enforce_password: bool,
    empty_password: bool,
    date: Option<Value>,
    mindays: Option<Value>,
    maxdays: Option<Value>,
    inactdays: Option<Value>,
    warndays: Option<Value>,
    expire: Option<Value>,
    password_lock: Option<Value>,
}

impl ShadowWanted {
    fn field(&self, arg: &str) -> Option<&Value> {
        match arg {
            "mindays" => self.mindays.as_ref(),
            "maxdays" => self.maxdays.as_ref(),
            "inactdays" => self.inactdays.as_ref(),
            "warndays" => self.warndays.as_ref(),
            _ => self.expire.as_ref(),
        }
    }

    /// Salt's `password != lshad["passwd"]` for the shadow entry's password `current`.
    fn differs(&self, current: &Value) -> bool {
        self.password.as_ref().is_none_or(|p| !py_eq(p, current))
    }
}

/// What `user.present` is asked for.
#[derive(Clone)]
struct Wanted {
    uid: Option<Value>,
    gid: Option<Value>,
    groups: Option<Vec<String>>,
    optional_groups: Option<Vec<String>>,
    remove_groups: bool,
    home: Option<Value>,
    createhome: bool,
    shell: Option<Value>,
    /// The GECOS fields, as text (`None` when not given).
    gecos: [(&'static str, Option<String>); 5],
    allow_uid_change: bool,
    allow_gid_change: bool,
    shadow: ShadowWanted,
}

fn remove_item(list: &mut Vec<String>, item: &str) {
    if let Some(i) = list.iter().position(|g| g == item) {
        list.remove(i);
    }
}

fn sorted_set(items: impl IntoIterator<Item = String>) -> Vec<String> {
    items
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Salt's `_group_changes`: whether the user's groups must change (groups sharing a gid
/// with another of the groups do not count).
fn group_changes(
    c: &Call,
    cur: &[String],
    wanted: &[String],
    remove: bool,
) -> Result<bool, String> {
    let cur: BTreeSet<&String> = cur.iter().collect();
    let want: BTreeSet<&String> = wanted.iter().collect();
    if cur == want || (!remove && want.is_subset(&cur)) {
        return Ok(false);
    }
    let mut gids = Vec::new();
    for g in cur.union(&want) {
        gids.push(((*g).clone(), info(c, "group.info", g)?.get("gid").cloned()));
    }
    let diff: Vec<&String> = if remove {
        want.symmetric_difference(&cur).copied().collect()
    } else {
        want.difference(&cur).copied().collect()
    };
    let gid_of = |name: &str| {
        gids.iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, g)| g.clone())
    };
    let remain = diff.iter().filter(|d| {
        let mine = gid_of(d);
        !gids
            .iter()
            .any(|(other, gid)| other != **d && mine.is_some() && *gid == mine)
    });
    Ok(remain.count() > 0)
}

/// Salt's `_changes`: `None` when the user does not exist, else what would change, in
/// Salt's order; `Err` with Salt's comment when a uid or gid change is not allowed.
fn changes(
    c: &Call,
    name: &str,
    w: &Wanted,
) -> Result<Result<Option<Map<String, Value>>, String>, String> {
    let lshad = info(c, "shadow.info", name)?;
    let lusr = info(c, "user.info", name)?;
    if is_empty(&lusr) {
        return Ok(Ok(None));
    }
    let groups_db = Groups::load(c)?;
    let mut change = Map::new();
    let mut lgroups: Vec<String> = lusr.get("groups").map(items).unwrap_or_default();
    let mut wanted = sorted_set(
        w.groups
            .iter()
            .flatten()
            .chain(w.optional_groups.iter().flatten())
            .cloned(),
    );
    let lgids: Vec<Value> = lgroups
        .iter()
        .map(|g| groups_db.to_gid(&json!(g)))
        .collect();
    // Groups sharing a gid with another of the user's groups, by gid.
    let mut dupes: Vec<(Value, Vec<String>)> = Vec::new();
    for (i, gid) in lgids.iter().enumerate() {
        if lgids.iter().filter(|g| *g == gid).count() > 1 {
            match dupes.iter_mut().find(|(g, _)| g == gid) {
                Some((_, names)) => names.push(lgroups[i].clone()),
                None => dupes.push((gid.clone(), vec![lgroups[i].clone()])),
            }
        }
    }
    let in_dupes = |g: &str| dupes.iter().any(|(_, names)| names.iter().any(|n| n == g));
    let dupes_of = |g: &str| {
        let gid = groups_db.to_gid(&json!(g));
        dupes
            .iter()
            .find(|(d, _)| *d == gid)
            .map(|(_, names)| names.clone())
            .unwrap_or_default()
    };
    let no_optional = w.optional_groups.as_ref().is_none_or(Vec::is_empty);
    if !w.remove_groups || (w.groups.is_none() && no_optional) {
        wanted = sorted_set(wanted.into_iter().chain(lgroups.iter().cloned()));
    }
    let cur = |key: &str| lusr.get(key).cloned().unwrap_or(Value::Null);
    if let Some(uid) = w.uid.as_ref().filter(|u| json_truthy(u)) {
        if !py_eq(&cur("uid"), uid) {
            change.insert("uid".into(), uid.clone());
        }
    }
    if let Some(gid) = &w.gid {
        let lgid = cur("gid");
        if !py_eq(&lgid, gid) && !py_eq(&lgid, &groups_db.to_gid(gid)) {
            change.insert("gid".into(), gid.clone());
        }
    }
    let default_grp = groups_db.to_group(w.gid.as_ref().unwrap_or(&cur("gid")));
    let old_default_grp = groups_db.to_group(&cur("gid"));
    let text_of = |v: &Value| v.as_str().map(str::to_string);
    if let Some(dg) = text_of(&default_grp) {
        if lgroups.contains(&dg) || wanted.contains(&dg) {
            if in_dupes(&dg) {
                for g in dupes_of(&dg) {
                    remove_item(&mut lgroups, &g);
                    remove_item(&mut wanted, &g);
                }
            } else {
                remove_item(&mut lgroups, &dg);
                remove_item(&mut wanted, &dg);
            }
        }
    }
    if old_default_grp != default_grp {
        if let Some(og) = text_of(&old_default_grp).filter(|g| lgroups.contains(g)) {
            if in_dupes(&og) {
                for g in dupes_of(&og) {
                    remove_item(&mut lgroups, &g);
                }
            } else {
                remove_item(&mut lgroups, &og);
            }
        }
    }
    if lgroups.iter().any(|g| g == name) && !wanted.iter().any(|g| g == name) {
        if in_dupes(name) {
            for g in dupes_of(name) {
                remove_item(&mut lgroups, &g);
            }
        } else {
            remove_item(&mut lgroups, name);
        }
    }
    if group_changes(c, &lgroups, &wanted, w.remove_groups)?
        && (!wanted.is_empty() || w.remove_groups)
    {
        change.insert("groups".into(), json!(wanted));
    }
    if let Some(home) = w.home.as_ref().filter(|h| json_truthy(h)) {
        if !py_eq(&cur("home"), home) {
            change.insert("home".into(), home.clone());
        }
    }
    if w.createhome {
        let newhome = match w.home.as_ref().filter(|h| json_truthy(h)) {
            Some(h) => h.clone(),
            None => cur("home"),
        };
        if !newhome.is_null() && !Path::new(&py_text(&newhome)).is_dir() {
            change.insert("homeDoesNotExist".into(), newhome);
        }
    }
    if let Some(shell) = w.shell.as_ref().filter(|s| json_truthy(s)) {
        if !py_eq(&cur("shell"), shell) {
            change.insert("shell".into(), shell.clone());
        }
    }
    shadow_changes(&lshad, &w.shadow, &mut change);
    for (key, value) in &w.gecos {
        if let Some(v) = value {
            if cur(key).as_str() != Some(v.as_str()) {
                change.insert((*key).into(), json!(v));
            }
        }
    }
    let mut errors = Vec::new();
    if !w.allow_uid_change && change.contains_key("uid") {
        errors.push(format!(
            "Changing uid ({} -> {}) not permitted, set allow_uid_change to True to force this change. Note that this will not change file ownership.",
            py_text(&cur("uid")),
            py_text(w.uid.as_ref().unwrap_or(&Value::Null))
        ));
    }
    if !w.allow_gid_change && change.contains_key("gid") {
        errors.push(format!(
            "Changing gid ({} -> {}) not permitted, set allow_gid_change to True to force this change. Note that this will not change file ownership.",
            py_text(&cur("gid")),
            py_text(w.gid.as_ref().unwrap_or(&Value::Null))
        ));
    }
    if !errors.is_empty() {
        let listed: Vec<String> = errors.iter().map(|e| format!("- {e}")).collect();
        return Ok(Err(format!(
            "Encountered error checking for needed changes. Additional info follows:\n\n{}",
            listed.join("\n")
        )));
    }
    Ok(Ok(Some(change)))
}

/// The shadow part of Salt's `_changes`, against the user's `shadow.info`.
fn shadow_changes(lshad: &Value, s: &ShadowWanted, change: &mut Map<String, Value>) {
    let cur = |key: &str| lshad.get(key).cloned().unwrap_or(Value::Null);
    let passwd = cur("passwd");
    let text = passwd.as_str().unwrap_or_default();
    if let Some(password) = s.password.as_ref().filter(|_| !s.empty_password) {
        // shadow.default_hash is "!": an unset password is always replaced.
        if (text == "!" || s.enforce_password) && !py_eq(&passwd, password) {
            change.insert("passwd".into(), password.clone());
        }
    }
    if s.empty_password && !text.is_empty() {
        change.insert("empty_password".into(), json!(true));
    }
    if let Some(date) = &s.date {
        if !py_eq(&cur("lstchg"), date) {
            change.insert("date".into(), date.clone());
        }
    }
    for (arg, key, _, _) in SHADOW_FIELDS {
        let Some(v) = s.field(arg) else { continue };
        // `expire` counts only when truthy.
        if arg == "expire" && !json_truthy(v) {
            continue;
        }
        if !py_eq(&cur(key), v) {
            change.insert(arg.into(), v.clone());
        }
    }
    if let Some(lock) = &s.password_lock {
        let locked = text.starts_with('!');
        if (json_truthy(lock) && !locked) || (*lock == json!(false) && locked) {
            change.insert("password_lock".into(), lock.clone());
        }
    }
}

/// Salt's `hash_password`: the hash of the clear text `password`, reusing the salt (and
/// algorithm) of the user's current hash when it has a `$id$salt$hash` one.
fn hash_password(c: &Call, name: &str, password: &Value) -> Result<Value, String> {
    let current = info(c, "shadow.info", name)?;
    let current = current.get("passwd").map(py_text).unwrap_or_default();
    let parts: Vec<&str> = current.splitn(5, '$').collect();
    let mut kw = Map::new();
    if let [_, algo, salt, _] = parts[..] {
        let algorithm = match algo {
            "1" => json!("md5"),
            "2a" => json!("blowfish"),
            "5" => json!("sha256"),
            "6" => json!("sha512"),
            _ => Value::Null,
        };
        kw.insert("crypt_salt".into(), json!(salt));
        kw.insert("algorithm".into(), algorithm);
    }
    c.host
        .call("shadow.gen_password", &[json!(py_text(password))], &kw)
}

/// Salt's `file.mkdir(path, uid, gid, 0o755)`: the directory and its missing parents,
/// each owned by the user.
fn make_home(path: &str, uid: Option<u32>, gid: Option<u32>) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mut missing = Vec::new();
    let mut p = Path::new(path);
    while !p.as_os_str().is_empty() && !p.exists() {
        missing.push(p.to_path_buf());
        match p.parent() {
            Some(parent) => p = parent,
            None => break,
        }
    }
    for dir in missing.iter().rev() {
        std::fs::create_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::os::unix::fs::chown(dir, uid, gid).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(())
}

fn present(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let mut out = ret(
        &name,
        json!(true),
        format!("User {name} is present and up to date"),
        json!({}),
    );
    let mut password = c.arg("password").filter(|p| json_truthy(p)).cloned();
    if let Some(clear) = password.as_ref().filter(|_| c.flag("hash_password", false)) {
        password = Some(hash_password(c, &name, clear)?).filter(json_truthy);
    }
    let shadow = ShadowWanted {
        password,
        enforce_password: c.flag("enforce_password", true),
        empty_password: c.flag("empty_password", false),
        date: c.arg("date").cloned(),
        mindays: c.arg("mindays").cloned(),
        maxdays: c.arg("maxdays").cloned(),
        inactdays: c.arg("inactdays").cloned(),
        warndays: c.arg("warndays").cloned(),
        expire: c.arg("expire").cloned(),
        password_lock: c.arg("password_lock").cloned(),
    };
    let gecos =
        ["fullname", "roomnumber", "workphone", "homephone", "other"].map(|k| (k, c.text(k)));
    for (_, field) in &gecos[..3] {
        if let Some(f) = field.as_ref().filter(|f| f.contains(',')) {
            out.insert("result".into(), json!(false));
            out.insert(
                "comment".into(),
                json!(format!("Unsupported char ',' in {f}")),
            );
            return Ok(out);
        }
    }
    let mut groups = c.arg("groups").map(items);
    let mut missing = Vec::new();
    if let Some(gs) = groups.as_ref().filter(|g| !g.is_empty()) {
        for g in gs {
            if is_empty(&info(c, "group.info", g)?) {
                missing.push(g.clone());
            }
        }
        if !missing.is_empty() {
            if c.test {
                groups = Some(
                    gs.iter()
                        .filter(|g| !missing.contains(g))
                        .cloned()
                        .collect(),
                );
            } else {
                out.insert("result".into(), json!(false));
                out.insert(
                    "comment".into(),
                    json!(format!(
                        "The following group(s) are not present: {}",
                        missing.join(",")
                    )),
                );
                return Ok(out);
            }
        }
    }
    let present_optgroups = match c
        .arg("optional_groups")
        .map(items)
        .filter(|o| !o.is_empty())
    {
        Some(opt) => {
            let mut present = Vec::new();
            for g in opt {
                if !is_empty(&info(c, "group.info", &g)?) {
                    present.push(g);
                }
            }
            Some(present)
        }
        None => None,
    };
    let usergroup = c.flag("usergroup", false);
    let gid = c.arg("gid").cloned();
    let changes_gid = if usergroup && Groups::load(c)?.to_gid(&json!(name)) != json!("") {
        Some(json!(name))
    } else {
        gid.clone()
    };
    let remove_groups = c.flag("remove_groups", true);
    let createhome = c.flag("createhome", true);
    let mut w = Wanted {
        uid: c.arg("uid").cloned(),
        gid: changes_gid,
        groups: groups.clone(),
        optional_groups: present_optgroups.clone(),
        remove_groups,
        home: c.arg("home").cloned(),
        createhome,
        shell: c.arg("shell").cloned(),
        gecos: gecos.clone(),
        allow_uid_change: c.flag("allow_uid_change", false),
        allow_gid_change: c.flag("allow_gid_change", false),
        shadow,
    };
    let change = match changes(c, &name, &w)? {
        Err(comment) => {
            out.insert("result".into(), json!(false));
            out.insert("comment".into(), json!(comment));
            return Ok(out);
        }
        Ok(change) => change,
    };
    match change {
        Some(change) if !change.is_empty() => {
            if c.test {
                let mut comment =
                    String::from("The following user attributes are set to be changed:\n");
                for (key, val) in &change {
                    let val = if key == "passwd" {
                        REDACTED.to_string()
                    } else {
                        py_text(val)
                    };
                    comment.push_str(&format!("{key}: {val}\n"));
                }
                if !missing.is_empty() {
                    comment.push_str(&format!(
                        "groups (pending creation): {}\n",
                        missing.join(",")
                    ));
                }
                out.insert("result".into(), Value::Null);
                out.insert("comment".into(), json!(comment));
                return Ok(out);
            }
            w.gid = gid;
            update(c, &name, change, &w, out)
        }
        Some(_) => Ok(out),
        None => create(
            c,
            &name,
            groups,
            present_optgroups,
            &missing,
            &w.shadow,
            out,
        ),
    }
}

/// Apply the changes to an existing user, then report what changed in its info.
fn update(
    c: &Call,
    name: &str,
    mut change: Map<String, Value>,
    w: &Wanted,
    mut out: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let lshad = info(c, "shadow.info", name)?;
    let pre = info(c, "user.info", name)?;
    let s = &w.shadow;
    let call = |fun: &str, arg: Option<&Value>| -> Result<Value, String> {
        let mut args = vec![json!(name)];
        args.extend(arg.cloned());
        c.host.call(fun, &args, &none())
    };
    if change.shift_remove("passwd").is_some() && !s.empty_password {
        call("shadow.set_password", s.password.as_ref())?;
    }
    if change.shift_remove("empty_password") == Some(json!(true)) {
        call("shadow.del_password", None)?;
    }
    if let Some(lock) = change.shift_remove("password_lock") {
        let fun = if json_truthy(&lock) {
            "shadow.lock_password"
        } else {
            "shadow.unlock_password"
        };
        call(fun, None)?;
    }
    if change.shift_remove("date").is_some() {
        call("shadow.set_date", s.date.as_ref())?;
    }
    let persist = c.flag("persist_home", false);
    let chhome = |home: &Value| -> Result<Value, String> {
        let mut kw = Map::new();
        kw.insert("persist".into(), json!(persist));
        c.host
            .call("user.chhome", &[json!(name), home.clone()], &kw)
    };
    let mut home_changed = false;
    if let Some(home) = change.shift_remove("home") {
        if !change.contains_key("homeDoesNotExist") {
            chhome(&home)?;
            home_changed = true;
        }
    }
    if let Some(home) = change.shift_remove("homeDoesNotExist") {
        if !home_changed {
            chhome(&home)?;
        }
        let path = py_text(&home);
        if !Path::new(&path).is_dir() {
            let id = |k: &str| {
                pre.get(k)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
            };
            make_home(&path, id("uid"), id("gid"))?;
        }
    }
    for (arg, _, fun, _) in SHADOW_FIELDS {
        if change.shift_remove(arg).is_some() {
            call(fun, s.field(arg))?;
        }
    }
    let keys: Vec<String> = change.keys().filter(|k| *k != "groups").cloned().collect();
    for key in keys {
        if !matches!(
            key.as_str(),
            "uid"
                | "gid"
                | "shell"
                | "fullname"
                | "roomnumber"
                | "workphone"
                | "homephone"
                | "other"
        ) {
            continue;
        }
        if let Some(val) = change.shift_remove(&key) {
            c.host
                .call(&format!("user.ch{key}"), &[json!(name), val], &none())?;
        }
    }
    if let Some(groups) = change.shift_remove("groups") {
        c.host.call(
            "user.chgroups",
            &[json!(name), groups, json!(!w.remove_groups)],
            &none(),
        )?;
    }
    let post = info(c, "user.info", name)?;
    // As Salt, the shadow entry is looked at again only when the wanted password differs
    // from the one it had.
    let lpasswd = lshad.get("passwd").cloned().unwrap_or(Value::Null);
    let spost = if s.differs(&lpasswd) {
        info(c, "shadow.info", name)?
    } else {
        json!({})
    };
    let mut changed = Map::new();
    if let Some(post) = post.as_object() {
        for (key, val) in post {
            if pre.get(key) != Some(val) {
                changed.insert(key.clone(), val.clone());
            }
        }
    }
    if let Some(spost) = spost.as_object() {
        for (key, val) in spost {
            if !lshad.get(key).is_some_and(|old| py_eq(old, val)) {
                let val = if key == "passwd" {
                    json!(REDACTED)
                } else {
                    val.clone()
                };
                changed.insert(key.clone(), val);
            }
        }
    }
    if !changed.is_empty() {
        out.insert("comment".into(), json!(format!("Updated user {name}")));
    }
    out.insert("changes".into(), Value::Object(changed));
    let again = Wanted {
        allow_uid_change: true,
        allow_gid_change: true,
        ..w.clone()
    };
    if let Ok(Some(mut left)) = changes(c, name, &again)? {
        if !left.is_empty() {
            // Salt shows the hash here; Brine keeps it out of results.
            if let Some(p) = left.get_mut("passwd") {
                *p = json!(REDACTED);
            }
            out.insert(
                "comment".into(),
                json!(format!(
                    "These values could not be changed: {}",
                    py_repr(&Value::Object(left))
                )),
            );
            out.insert("result".into(), json!(false));
        }
    }
    Ok(out)
}

fn create(
    c: &Call,
    name: &str,
    groups: Option<Vec<String>>,
    present_optgroups: Option<Vec<String>>,
    missing: &[String],
    s: &ShadowWanted,
    mut out: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    if c.test {
        let mut comment = format!("User {name} set to be added");
        if !missing.is_empty() {
            comment.push_str(&format!(" (pending groups: {})", missing.join(",")));
        }
        out.insert("result".into(), Value::Null);
        out.insert("comment".into(), json!(comment));
        return Ok(out);
    }
    let groups = match (groups, present_optgroups) {
        (Some(mut g), Some(opt)) if !g.is_empty() && !opt.is_empty() => {
            g.extend(opt);
            Some(g)
        }
        (_, Some(opt)) if !opt.is_empty() => Some(opt),
        (g, _) => g,
    };
    let createhome = c.flag("createhome", true);
    let mut kw = Map::new();
    let arg = |k: &str| c.arg(k).cloned().unwrap_or(Value::Null);
    for key in ["uid", "gid"] {
        kw.insert(key.into(), arg(key));
    }
    kw.insert("groups".into(), groups.map_or(Value::Null, |g| json!(g)));
    for key in ["home", "shell"] {
        kw.insert(key.into(), arg(key));
    }
    kw.insert("unique".into(), json!(c.flag("unique", true)));
    kw.insert("system".into(), json!(c.flag("system", false)));
    for key in ["fullname", "roomnumber", "workphone", "homephone", "other"] {
        kw.insert(key.into(), c.text(key).map_or(Value::Null, Value::String));
    }
    kw.insert("createhome".into(), json!(createhome));
    kw.insert("nologinit".into(), json!(c.flag("nologinit", false)));
    kw.insert("loginclass".into(), arg("loginclass"));
    kw.insert("local".into(), json!(c.flag("local", false)));
    kw.insert("usergroup".into(), arg("usergroup"));
    let added = c.host.call("user.add", &[json!(name)], &kw)?;
    if added == json!(true) {
        out.insert("comment".into(), json!(format!("New user {name} created")));
        let mut changes = info(c, "user.info", name)?;
        if !createhome {
            if let Some(m) = changes.as_object_mut() {
                m.insert("home".into(), json!(""));
            }
        }
        if let Value::Object(ch) = &mut changes {
            create_shadow(c, name, s, ch, &mut out)?;
        }
        out.insert("changes".into(), changes);
    } else {
        out.insert("result".into(), json!(false));
        out.insert(
            "comment".into(),
            json!(match added {
                Value::String(s) => s,
                _ => format!("Failed to create new user {name}"),
            }),
        );
    }
    Ok(out)
}

/// The password and shadow attributes of a user just created, as Salt sets them: each
/// checked afterwards, a failure making the state fail with Salt's comment.
fn create_shadow(
    c: &Call,
    name: &str,
    s: &ShadowWanted,
    changes: &mut Map<String, Value>,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    let call = |fun: &str, arg: &Value| -> Result<Value, String> {
        c.host.call(fun, &[json!(name), arg.clone()], &none())
    };
    let spost = |key: &str| -> Result<Value, String> {
        Ok(info(c, "shadow.info", name)?
            .get(key)
            .cloned()
            .unwrap_or(Value::Null))
    };
    let mut fail = |comment: String| {
        out.insert("comment".into(), json!(comment));
        out.insert("result".into(), json!(false));
    };
    if let Some(password) = s.password.as_ref().filter(|_| !s.empty_password) {
        call("shadow.set_password", password)?;
        if !py_eq(&spost("passwd")?, password) {
            fail(format!(
                "User {name} created but failed to set password to {REDACTED}"
            ));
        }
        changes.insert("password".into(), json!(REDACTED));
    }
    if s.empty_password && s.password.is_none() {
        c.host
            .call("shadow.del_password", &[json!(name)], &none())?;
        if spost("passwd")? != json!("") {
            fail(format!("User {name} created but failed to empty password"));
        }
        changes.insert("password".into(), json!(""));
    }
    if let Some(date) = &s.date {
        call("shadow.set_date", date)?;
        if !py_eq(&spost("lstchg")?, date) {
            fail(format!(
                "User {name} created but failed to set last change date to {}",
                py_text(date)
            ));
        }
        changes.insert("date".into(), date.clone());
    }
    for (arg, key, fun, words) in SHADOW_FIELDS {
        let Some(v) = s.field(arg).filter(|v| json_truthy(v)) else {
            continue;
        };
        call(fun, v)?;
        if !py_eq(&spost(key)?, v) {
            fail(format!(
                "User {name} created but failed to set {words} to {}",
                py_text(v)
            ));
        }
        changes.insert(arg.into(), v.clone());
    }
    Ok(())
}

fn absent(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let mut out = ret(&name, json!(true), "", json!({}));
    if is_empty(&info(c, "user.info", &name)?) {
        out.insert(
            "comment".into(),
            json!(format!("User {name} is not present")),
        );
        return Ok(out);
    }
    if c.test {
        out.insert("result".into(), Value::Null);
        out.insert(
            "comment".into(),
            json!(format!("User {name} set for removal")),
        );
        return Ok(out);
    }
    let before = info(c, "user.list_groups", &name)?;
    let before: BTreeSet<String> = items(&before).into_iter().collect();
    let mut kw = Map::new();
    kw.insert("local".into(), json!(c.flag("local", false)));
    let args = [
        json!(name),
        json!(c.flag("purge", false)),
        json!(c.flag("force", false)),
    ];
    let deleted = c.host.call("user.delete", &args, &kw)?;
    let mut gone = Vec::new();
    for g in &before {
        if is_empty(&info(c, "group.info", g)?) {
            gone.push(g.clone());
        }
    }
    out.insert("result".into(), deleted.clone());
    if json_truthy(&deleted) {
        let mut changes = Map::new();
        for g in gone {
            changes.insert(format!("{g} group"), json!("removed"));
        }
        changes.insert(name.clone(), json!("removed"));
        out.insert("changes".into(), Value::Object(changes));
        out.insert("comment".into(), json!(format!("Removed user {name}")));
    } else {
        out.insert("result".into(), json!(false));
        out.insert(
            "comment".into(),
            json!(format!("Failed to remove user {name}")),
        );
    }
    Ok(out)
}
