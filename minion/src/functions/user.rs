//! The `user` execution module on Linux (Salt's `useradd`): users read from `/etc/passwd`
//! (or `<root>/etc/passwd`), changed with `useradd`, `userdel` and `usermod`.

use std::collections::BTreeSet;

use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::cmd::run_argv;
use super::group::{read_groups, same, which, Group};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::payload::{get, map, py_truthy};

/// The functions of the `user` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Add,
    Delete,
    Info,
    ListUsers,
    Getent,
    Chuid,
    Chgid,
    Chshell,
    Chhome,
    Chgroups,
    Chfullname,
    Chroomnumber,
    Chworkphone,
    Chhomephone,
    Chother,
    Rename,
    ListGroups,
    PrimaryGroup,
}

/// The GECOS fields, in their order in the comment field.
const GECOS: [&str; 5] = ["fullname", "roomnumber", "workphone", "homephone", "other"];

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Add,
        Fun::Delete,
        Fun::Info,
        Fun::ListUsers,
        Fun::Getent,
        Fun::Chuid,
        Fun::Chgid,
        Fun::Chshell,
        Fun::Chhome,
        Fun::Chgroups,
        Fun::Chfullname,
        Fun::Chroomnumber,
        Fun::Chworkphone,
        Fun::Chhomephone,
        Fun::Chother,
        Fun::Rename,
        Fun::ListGroups,
        Fun::PrimaryGroup,
    ];

    pub(crate) fn spec(self) -> Spec {
        const ADD: &[&str] = &[
            "name",
            "uid",
            "gid",
            "groups",
            "home",
            "shell",
            "unique",
            "system",
            "fullname",
            "roomnumber",
            "workphone",
            "homephone",
            "other",
            "createhome",
            "loginclass",
            "nologinit",
            "root",
            "usergroup",
            "local",
        ];
        let attr = |param| Signature::new(param, 2, false, false);
        let (name, pyname, sig, doc) = match self {
            Fun::Add => (
                "user.add",
                "add",
                Signature::new(ADD, 1, false, false),
                "
    Create a user. Optional: uid, gid (name or id of the primary group), groups
    (supplementary groups), home, shell, unique=False (allow a duplicate uid),
    system, the GECOS fields fullname, roomnumber, workphone, homephone and other,
    createhome (default True), nologinit, root (a directory to chroot into) and
    usergroup (True: a group of the user's name; False: none). Returns True once
    useradd succeeded.

    CLI Example:

        salt '*' user.add name <uid> <gid> <groups> <home> <shell>
    ",
            ),
            Fun::Delete => (
                "user.delete",
                "delete",
                Signature::new(
                    &["name", "remove", "force", "root", "local"],
                    1,
                    false,
                    false,
                ),
                "
    Remove a user; remove=True also removes the home directory and mail spool,
    force=True removes the user even when logged in.

    CLI Example:

        salt '*' user.delete name remove=True force=True
    ",
            ),
            Fun::Info => (
                "user.info",
                "info",
                Signature::new(&["name", "root"], 1, false, false),
                "
    A user's passwd entry, GECOS fields and groups; an empty dict when there is
    no such user.

    CLI Example:

        salt '*' user.info root
    ",
            ),
            Fun::ListUsers => (
                "user.list_users",
                "list_users",
                Signature::new(&["root"], 0, false, false),
                "
    The names of all users, sorted.

    CLI Example:

        salt '*' user.list_users
    ",
            ),
            Fun::Getent => (
                "user.getent",
                "getent",
                Signature::new(&["refresh", "root"], 0, false, false),
                "
    Every user, each as user.info shows it.

    CLI Example:

        salt '*' user.getent
    ",
            ),
            Fun::Chuid => (
                "user.chuid",
                "chuid",
                attr(&["name", "uid", "root"]),
                "
    Give a user another uid; returns whether the user has it afterwards.

    CLI Example:

        salt '*' user.chuid foo 4376
    ",
            ),
            Fun::Chgid => (
                "user.chgid",
                "chgid",
                attr(&["name", "gid", "root"]),
                "
    Give a user another primary group (by gid).

    CLI Example:

        salt '*' user.chgid foo 4376
    ",
            ),
            Fun::Chshell => (
                "user.chshell",
                "chshell",
                attr(&["name", "shell", "root"]),
                "
    Give a user another login shell.

    CLI Example:

        salt '*' user.chshell foo /bin/zsh
    ",
            ),
            Fun::Chhome => (
                "user.chhome",
                "chhome",
                attr(&["name", "home", "persist", "root"]),
                "
    Give a user another home directory; persist=True moves the old home's
    contents there.

    CLI Example:

        salt '*' user.chhome foo /home/users/foo True
    ",
            ),
            Fun::Chgroups => (
                "user.chgroups",
                "chgroups",
                attr(&["name", "groups", "append", "root"]),
                "
    Set a user's supplementary groups (a list or a comma-separated string);
    append=True adds them to the user's current groups instead.

    CLI Examples:

        salt '*' user.chgroups foo wheel,root
        salt '*' user.chgroups foo wheel,root append=True
    ",
            ),
            Fun::Chfullname => gecos_spec("fullname", "chfullname"),
            Fun::Chroomnumber => gecos_spec("roomnumber", "chroomnumber"),
            Fun::Chworkphone => gecos_spec("workphone", "chworkphone"),
            Fun::Chhomephone => gecos_spec("homephone", "chhomephone"),
            Fun::Chother => gecos_spec("other", "chother"),
            Fun::Rename => (
                "user.rename",
                "rename",
                attr(&["name", "new_name", "root"]),
                "
    Change a user's login name.

    CLI Example:

        salt '*' user.rename name new_name
    ",
            ),
            Fun::ListGroups => (
                "user.list_groups",
                "list_groups",
                Signature::new(&["name"], 1, false, false),
                "
    The names of the groups a user is in (the primary group too), sorted.

    CLI Example:

        salt '*' user.list_groups foo
    ",
            ),
            Fun::PrimaryGroup => (
                "user.primary_group",
                "primary_group",
                Signature::new(&["name"], 1, false, false),
                "
    The name of a user's primary group (`id -g -n`).

    CLI Example:

        salt '*' user.primary_group saltadmin
    ",
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let name = b.get("name").map(py_str).unwrap_or_default();
        let root = b.opt("root").map(py_str);
        let root = root.as_deref();
        let given = |key| b.get(key).cloned().unwrap_or(Value::Nil);
        match self {
            Fun::Add => add(b, &name, root).await,
            Fun::Delete => {
                let local = flag(b, "local");
                let mut argv = vec![which(if local { "luserdel" } else { "userdel" })?];
                argv.extend(delete_flags(flag(b, "remove"), flag(b, "force"), local));
                argv.push(name);
                if let (Some(root), false) = (root, local) {
                    argv.extend(["-R".to_string(), root.to_string()]);
                }
                let out = run_argv(&argv, &[]).await?;
                let debian =
                    get(&ctx.grains, "os_family").and_then(Value::as_str) == Some("Debian");
                Ok(Value::Boolean(
                    out.retcode() == 0
                        || (out.retcode() == 12
                            && debian
                            && (out.stderr().contains("var/mail")
                                || out.stderr().contains("var/spool/mail"))),
                ))
            }
            Fun::Info => info(&name, root),
            Fun::ListUsers => {
                let mut names: Vec<String> =
                    read_users(root)?.into_iter().map(|u| u.name).collect();
                names.sort();
                Ok(Value::Array(names.into_iter().map(Value::from).collect()))
            }
            Fun::Getent => {
                let groups = read_groups(None)?;
                Ok(Value::Array(
                    read_users(root)?.iter().map(|u| u.info(&groups)).collect(),
                ))
            }
            Fun::Chuid => chattrib(&name, "uid", &given("uid"), "-u", false, root).await,
            Fun::Chgid => chattrib(&name, "gid", &given("gid"), "-g", false, root).await,
            Fun::Chshell => chattrib(&name, "shell", &given("shell"), "-s", false, root).await,
            Fun::Chhome => {
                let persist = flag(b, "persist");
                chattrib(&name, "home", &given("home"), "-d", persist, root).await
            }
            Fun::Chgroups => chgroups(&name, &given("groups"), flag(b, "append"), root).await,
            Fun::Chfullname => update_gecos(&name, "fullname", &given("fullname"), root).await,
            Fun::Chroomnumber => {
                update_gecos(&name, "roomnumber", &given("roomnumber"), root).await
            }
            Fun::Chworkphone => update_gecos(&name, "workphone", &given("workphone"), root).await,
            Fun::Chhomephone => update_gecos(&name, "homephone", &given("homephone"), root).await,
            Fun::Chother => update_gecos(&name, "other", &given("other"), root).await,
            Fun::Rename => {
                let new_name = given("new_name");
                if !is_empty_map(&info(&py_str(&new_name), root)?) {
                    return Err(FnError::Execution(format!(
                        "User '{}' already exists",
                        py_str(&new_name)
                    )));
                }
                chattrib(&name, "name", &new_name, "-l", false, root).await
            }
            Fun::ListGroups => Ok(str_list(group_list(
                &name,
                &read_users(None)?,
                &read_groups(None)?,
            ))),
            Fun::PrimaryGroup => {
                let id = which("id").map_err(|_| {
                    FnError::Execution("The 'id' binary was not found in $PATH.".into())
                })?;
                let out = run_argv(&[id, "-g".into(), "-n".into(), name], &[]).await?;
                let mut text = out.stdout().to_string();
                if !out.stderr().is_empty() {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(out.stderr());
                }
                Ok(Value::from(text))
            }
        }
    }
}

fn gecos_spec(
    field: &'static str,
    fun: &'static str,
) -> (&'static str, &'static str, Signature, &'static str) {
    let (name, params, doc): (&str, &'static [&'static str], &str) = match field {
        "fullname" => (
            "user.chfullname",
            &["name", "fullname", "root"],
            "
    Set a user's full name (the first GECOS field).

    CLI Example:

        salt '*' user.chfullname foo \"Foo Bar\"
    ",
        ),
        "roomnumber" => (
            "user.chroomnumber",
            &["name", "roomnumber", "root"],
            "
    Set a user's room number (the second GECOS field).

    CLI Example:

        salt '*' user.chroomnumber foo 1
    ",
        ),
        "workphone" => (
            "user.chworkphone",
            &["name", "workphone", "root"],
            "
    Set a user's work phone (the third GECOS field).

    CLI Example:

        salt '*' user.chworkphone foo 7255551212
    ",
        ),
        "homephone" => (
            "user.chhomephone",
            &["name", "homephone", "root"],
            "
    Set a user's home phone (the fourth GECOS field).

    CLI Example:

        salt '*' user.chhomephone foo 7255551212
    ",
        ),
        _ => (
            "user.chother",
            &["name", "other", "root"],
            "
    Set the last GECOS field ('other') of a user.

    CLI Example:

        salt '*' user.chother foo xxx
    ",
        ),
    };
    (name, fun, Signature::new(params, 2, false, false), doc)
}

/// A line of `/etc/passwd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Passwd {
    pub name: String,
    pub passwd: String,
    pub uid: i64,
    pub gid: i64,
    pub gecos: String,
    pub dir: String,
    pub shell: String,
}

impl Passwd {
    /// The five GECOS fields (missing ones empty).
    fn gecos_fields(&self) -> [String; 5] {
        let mut parts = self.gecos.splitn(5, ',').map(str::to_string);
        std::array::from_fn(|_| parts.next().unwrap_or_default())
    }

    /// Salt's user info map.
    fn info(&self, groups: &[Group]) -> Value {
        let users = std::slice::from_ref(self);
        let [fullname, roomnumber, workphone, homephone, other] = self.gecos_fields();
        map([
            ("gid", Value::from(self.gid)),
            ("groups", str_list(group_list(&self.name, users, groups))),
            ("home", Value::from(self.dir.as_str())),
            ("name", Value::from(self.name.as_str())),
            ("passwd", Value::from(self.passwd.as_str())),
            ("shell", Value::from(self.shell.as_str())),
            ("uid", Value::from(self.uid)),
            ("fullname", Value::from(fullname)),
            ("roomnumber", Value::from(roomnumber)),
            ("workphone", Value::from(workphone)),
            ("homephone", Value::from(homephone)),
            ("other", Value::from(other)),
        ])
    }
}

/// The users of `/etc/passwd` text; malformed lines are skipped.
pub(crate) fn parse_passwd(text: &str) -> Vec<Passwd> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.trim().split(':').collect();
            if f.len() != 7 {
                return None;
            }
            Some(Passwd {
                name: f[0].to_string(),
                passwd: f[1].to_string(),
                uid: f[2].trim().parse().ok()?,
                gid: f[3].trim().parse().ok()?,
                gecos: f[4].to_string(),
                dir: f[5].to_string(),
                shell: f[6].to_string(),
            })
        })
        .collect()
}

pub(crate) fn read_users(root: Option<&str>) -> Result<Vec<Passwd>, FnError> {
    let path =
        std::path::Path::new(root.filter(|r| !r.is_empty()).unwrap_or("/")).join("etc/passwd");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| FnError::Execution(format!("Could not read {}: {e}", path.display())))?;
    Ok(parse_passwd(&text))
}

/// A user by name: from the passwd file, else (without a root) from the system's user
/// database (NSS).
pub(crate) fn find_user(name: &str, root: Option<&str>) -> Result<Option<Passwd>, FnError> {
    if let Some(u) = read_users(root)?.into_iter().find(|u| u.name == name) {
        return Ok(Some(u));
    }
    if root.is_some() || name.contains('\0') {
        return Ok(None);
    }
    Ok(nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| Passwd {
            name: u.name,
            passwd: u.passwd.to_string_lossy().into_owned(),
            uid: i64::from(u.uid.as_raw()),
            gid: i64::from(u.gid.as_raw()),
            gecos: u.gecos.to_string_lossy().into_owned(),
            dir: u.dir.to_string_lossy().into_owned(),
            shell: u.shell.to_string_lossy().into_owned(),
        }))
}

fn info(name: &str, root: Option<&str>) -> Result<Value, FnError> {
    Ok(match find_user(name, root)? {
        Some(u) => u.info(&read_groups(None)?),
        None => Value::Map(vec![]),
    })
}

/// `salt.utils.user.get_group_list`: the names of the groups whose gid is the user's
/// primary gid or the gid of a group listing the user as a member; sorted, unique.
pub(crate) fn group_list(user: &str, users: &[Passwd], groups: &[Group]) -> Vec<String> {
    let member_of = groups
        .iter()
        .filter(|g| g.members.iter().any(|m| m == user));
    let names: BTreeSet<&str> = match users.iter().find(|u| u.name == user) {
        Some(u) => {
            let gids: BTreeSet<i64> = std::iter::once(u.gid)
                .chain(member_of.map(|g| g.gid))
                .collect();
            groups
                .iter()
                .filter(|g| gids.contains(&g.gid))
                .map(|g| g.name.as_str())
                .collect()
        }
        None => member_of.map(|g| g.name.as_str()).collect(),
    };
    names.into_iter().map(str::to_string).collect()
}

fn str_list(items: Vec<String>) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

fn is_empty_map(v: &Value) -> bool {
    matches!(v, Value::Map(m) if m.is_empty())
}

fn flag(b: &Bound, key: &str) -> bool {
    b.get(key).is_some_and(py_truthy)
}

/// The arguments given to `user.add`, as its argv needs them.
#[derive(Debug, Default)]
struct AddArgs<'a> {
    name: &'a str,
    uid: Option<&'a Value>,
    gid: Option<&'a Value>,
    groups: Option<&'a Value>,
    home: Option<&'a Value>,
    shell: Option<&'a Value>,
    unique: bool,
    system: bool,
    createhome: bool,
    nologinit: bool,
    root: Option<&'a str>,
    /// `None`, `Some(true)` or `Some(false)` (the tri-state `usergroup`).
    usergroup: Option<bool>,
    local: bool,
}

/// Whether `name` is "in" `groups` as Python's `in` tests it (a substring of a string).
fn name_in(name: &str, groups: &Value) -> bool {
    match groups {
        Value::Array(items) => items.iter().any(|g| g.as_str() == Some(name)),
        Value::String(s) => s.as_str().is_some_and(|s| s.contains(name)),
        _ => false,
    }
}

/// `useradd`'s argv as Salt builds it. `usergroups_gid` answers the primary group to give
/// when the user is listed in its own groups (login.defs' USERGROUPS_ENAB).
fn add_argv(
    useradd: &str,
    a: &AddArgs,
    usergroups_gid: impl FnOnce() -> Option<String>,
) -> Vec<String> {
    fn given(v: Option<&Value>) -> Option<&Value> {
        v.filter(|v| !v.is_nil() && v.as_str() != Some(""))
    }
    let mut argv = vec![useradd.to_string()];
    if let Some(shell) = a.shell.filter(|v| py_truthy(v)) {
        argv.extend(["-s".to_string(), py_str(shell)]);
    }
    if let Some(uid) = given(a.uid) {
        argv.extend(["-u".to_string(), py_str(uid)]);
    }
    if let Some(gid) = given(a.gid) {
        argv.extend(["-g".to_string(), py_str(gid)]);
    } else if a.usergroup == Some(true) {
        if !a.local {
            argv.push("-U".into());
        }
    } else if a.groups.is_some_and(|g| name_in(a.name, g)) {
        if let Some(gid) = usergroups_gid() {
            argv.extend(["-g".to_string(), gid]);
        }
    }
    if a.usergroup == Some(false) {
        argv.push(if a.local { "-n" } else { "-N" }.into());
    }
    if a.createhome {
        if !a.local {
            argv.push("-m".into());
        }
    } else {
        argv.push("-M".into());
    }
    if a.nologinit {
        argv.push("-l".into());
    }
    if let Some(home) = a.home.filter(|v| !v.is_nil()) {
        argv.extend(["-d".to_string(), py_str(home)]);
    }
    if !a.unique {
        argv.push("-o".into());
    }
    if a.system {
        argv.push("-r".into());
    }
    argv.push(a.name.to_string());
    if let (Some(root), false) = (a.root, a.local) {
        argv.extend(["-R".to_string(), root.to_string()]);
    }
    argv
}

fn delete_flags(remove: bool, force: bool, local: bool) -> Vec<String> {
    let mut flags = Vec::new();
    if remove {
        flags.push("-r".to_string());
    }
    if force && !local {
        flags.push("-f".to_string());
    }
    flags
}

/// With USERGROUPS_ENAB yes in /etc/login.defs: the gid of the group named like the user
/// (empty when there is none, as Salt passes it).
fn usergroups_gid(name: &str) -> Option<String> {
    let defs = std::fs::read_to_string("/etc/login.defs").ok()?;
    let line = defs.lines().find(|l| {
        let head: String = l.chars().take(15).collect();
        head.contains("USERGROUPS_ENAB")
    })?;
    if !line.contains("yes") {
        return None;
    }
    let gid = read_groups(None)
        .ok()
        .and_then(|gs| gs.into_iter().find(|g| g.name == name))
        .map_or_else(String::new, |g| g.gid.to_string());
    Some(gid)
}

async fn add(b: &Bound, name: &str, root: Option<&str>) -> Result<Value, FnError> {
    let local = flag(b, "local");
    let useradd = which(if local { "luseradd" } else { "useradd" })?;
    let args = AddArgs {
        name,
        uid: b.get("uid"),
        gid: b.get("gid"),
        groups: b.opt("groups"),
        home: b.get("home"),
        shell: b.get("shell"),
        unique: b.get("unique").is_none_or(py_truthy),
        system: flag(b, "system"),
        createhome: b.get("createhome").is_none_or(py_truthy),
        nologinit: flag(b, "nologinit"),
        root,
        usergroup: b.opt("usergroup").map(py_truthy),
        local,
    };
    let argv = add_argv(&useradd, &args, || usergroups_gid(name));
    if run_argv(&argv, &[]).await?.retcode() != 0 {
        return Ok(Value::Boolean(false));
    }
    // The user exists now: what follows cannot make the call fail (as in Salt).
    if let Some(groups) = b.get("groups").filter(|g| py_truthy(g)) {
        chgroups(name, groups, false, root).await?;
    }
    for field in GECOS {
        if let Some(v) = b.get(field).filter(|v| py_truthy(v)) {
            update_gecos(name, field, v, root).await?;
        }
    }
    Ok(Value::Boolean(true))
}

/// Python's `value == info[key]`.
fn equals(value: &Value, current: &Value) -> bool {
    match current {
        Value::Integer(i) => i.as_i64().is_some_and(|n| same(value, n)),
        other => value == other,
    }
}

/// Salt's `_chattrib`: `usermod <param> <value>` unless the user has that value already;
/// whether the user has it afterwards.
async fn chattrib(
    name: &str,
    key: &str,
    value: &Value,
    param: &str,
    persist: bool,
    root: Option<&str>,
) -> Result<Value, FnError> {
    let pre = info(name, root)?;
    if is_empty_map(&pre) {
        return Err(FnError::Execution(format!("User '{name}' does not exist")));
    }
    if get(&pre, key).is_some_and(|cur| equals(value, cur)) {
        return Ok(Value::Boolean(true));
    }
    let mut argv = vec![which("usermod")?];
    if let Some(root) = root {
        argv.extend(["-R".to_string(), root.to_string()]);
    }
    if persist {
        argv.push("-m".into());
    }
    argv.extend([param.to_string(), py_str(value), name.to_string()]);
    run_argv(&argv, &[]).await?;
    // After a rename the user goes by the new name.
    let after = if key == "name" {
        py_str(value)
    } else {
        name.to_string()
    };
    let post = info(&after, root)?;
    Ok(Value::Boolean(
        get(&post, key).is_some_and(|cur| equals(value, cur)),
    ))
}

/// The groups given to `chgroups`: a list, or a comma-separated string.
fn group_names(groups: &Value) -> Vec<String> {
    match groups {
        Value::Array(items) => items.iter().map(py_str).collect(),
        Value::Nil => Vec::new(),
        other => py_str(other).split(',').map(str::to_string).collect(),
    }
}

fn chgroups_argv(
    usermod: &str,
    name: &str,
    groups: &[String],
    append: bool,
    root: Option<&str>,
) -> Vec<String> {
    let mut argv = vec![usermod.to_string()];
    if append {
        argv.push("-a".into());
    }
    argv.extend(["-G".to_string(), groups.join(","), name.to_string()]);
    if let Some(root) = root {
        argv.extend(["-R".to_string(), root.to_string()]);
    }
    argv
}

async fn chgroups(
    name: &str,
    groups: &Value,
    append: bool,
    root: Option<&str>,
) -> Result<Value, FnError> {
    let wanted = group_names(groups);
    let current: BTreeSet<String> = group_list(name, &read_users(None)?, &read_groups(None)?)
        .into_iter()
        .collect();
    if current == wanted.iter().cloned().collect() {
        return Ok(Value::Boolean(true));
    }
    let argv = chgroups_argv(&which("usermod")?, name, &wanted, append, root);
    let out = run_argv(&argv, &[]).await?;
    if out.retcode() != 0 && out.stderr().contains("not found in") {
        // Salt's fallback for groups usermod cannot see: gpasswd, one group at a time.
        let mut ok = true;
        for group in &wanted {
            let argv = ["gpasswd", "-a", name, group].map(str::to_string);
            if run_argv(&argv, &[]).await?.retcode() != 0 {
                ok = false;
            }
        }
        return Ok(Value::Boolean(ok));
    }
    Ok(Value::Boolean(out.retcode() == 0))
}

/// Salt's `_build_gecos`: the five fields joined with commas, trailing commas dropped.
fn build_gecos(fields: &[String; 5]) -> String {
    fields.join(",").trim_end_matches(',').to_string()
}

/// Salt's `_update_gecos`: set one GECOS field with `usermod -c`.
async fn update_gecos(
    name: &str,
    key: &str,
    value: &Value,
    root: Option<&str>,
) -> Result<Value, FnError> {
    let value = if value.is_nil() {
        String::new()
    } else {
        py_str(value)
    };
    let lookup = |root| -> Result<Passwd, FnError> {
        find_user(name, root)?.ok_or_else(|| {
            FnError::Exception(format!(
                "KeyError: \"getpwnam(): name not found: '{name}'\""
            ))
        })
    };
    let idx = GECOS.iter().position(|f| *f == key).unwrap_or(0);
    let mut fields = lookup(root)?.gecos_fields();
    if fields[idx] == value {
        return Ok(Value::Boolean(true));
    }
    fields[idx] = value.clone();
    let mut argv = vec![which("usermod")?];
    if let Some(root) = root {
        argv.extend(["-R".to_string(), root.to_string()]);
    }
    argv.extend(["-c".to_string(), build_gecos(&fields), name.to_string()]);
    run_argv(&argv, &[]).await?;
    Ok(Value::Boolean(lookup(root)?.gecos_fields()[idx] == value))
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::group::parse_groups;
    use super::super::testutil::*;
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
        alice:x:1000:1000:Alice A,12,555,666,misc,more:/home/alice:/bin/sh\n\
        bob:x:1001:100::/home/bob:/bin/false\nbroken:line\n";
    const GROUP: &str =
        "root:x:0:\nusers:x:100:alice\nalice:x:1000:\nstaff:x:50:alice,bob\nstaff2:x:50:\n";

    #[test]
    fn parses_passwd_and_gecos() {
        let users = parse_passwd(PASSWD);
        assert_eq!(users.len(), 3);
        let groups = parse_groups(GROUP);
        let alice = users[1].info(&groups);
        assert_eq!(get(&alice, "fullname"), Some(&s("Alice A")));
        assert_eq!(get(&alice, "other"), Some(&s("misc,more")));
        assert_eq!(get(&alice, "uid"), Some(&Value::from(1000)));
        let keys: Vec<&str> = alice
            .as_map()
            .unwrap()
            .iter()
            .filter_map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "gid",
                "groups",
                "home",
                "name",
                "passwd",
                "shell",
                "uid",
                "fullname",
                "roomnumber",
                "workphone",
                "homephone",
                "other"
            ]
        );
        let bob = users[2].info(&groups);
        assert_eq!(get(&bob, "homephone"), Some(&s("")));
    }

    #[test]
    fn group_lists_like_getgrouplist() {
        let users = parse_passwd(PASSWD);
        let groups = parse_groups(GROUP);
        assert_eq!(
            group_list("alice", &users, &groups),
            ["alice", "staff", "staff2", "users"]
        );
        assert_eq!(
            group_list("bob", &users, &groups),
            ["staff", "staff2", "users"]
        );
        assert_eq!(group_list("ghost", &users, &groups), Vec::<String>::new());
    }

    #[test]
    fn useradd_argv_like_salt() {
        let uid = Value::from(2000);
        let shell = s("/bin/sh");
        let home = s("/srv/u1");
        let groups = Value::Array(vec![s("u1"), s("adm")]);
        let a = AddArgs {
            name: "u1",
            uid: Some(&uid),
            shell: Some(&shell),
            home: Some(&home),
            groups: Some(&groups),
            unique: false,
            system: true,
            createhome: true,
            nologinit: true,
            root: Some("/mnt"),
            usergroup: Some(false),
            ..AddArgs::default()
        };
        assert_eq!(
            add_argv("useradd", &a, || Some("1234".into())),
            [
                "useradd", "-s", "/bin/sh", "-u", "2000", "-g", "1234", "-N", "-m", "-l", "-d",
                "/srv/u1", "-o", "-r", "u1", "-R", "/mnt"
            ]
        );
        let a = AddArgs {
            name: "u1",
            unique: true,
            usergroup: Some(true),
            ..AddArgs::default()
        };
        assert_eq!(
            add_argv("useradd", &a, || None),
            ["useradd", "-U", "-M", "u1"]
        );
        assert_eq!(delete_flags(true, true, false), ["-r", "-f"]);
        assert_eq!(
            chgroups_argv("usermod", "u1", &["a".into(), "b".into()], true, None),
            ["usermod", "-a", "-G", "a,b", "u1"]
        );
        assert_eq!(group_names(&s("a,b")), ["a", "b"]);
    }

    #[test]
    fn gecos_is_built_without_trailing_commas() {
        let f = [
            "Foo".to_string(),
            String::new(),
            "5".into(),
            String::new(),
            String::new(),
        ];
        assert_eq!(build_gecos(&f), "Foo,,5");
        assert!(equals(&Value::from(5), &Value::from(5)));
        assert!(!equals(&s("5"), &Value::from(5)));
    }

    #[tokio::test]
    async fn info_of_root_and_missing_user() {
        let r = call(&ctx(), "user.info", &[s("root")]).await;
        assert_eq!(get(&r.ret, "uid"), Some(&Value::from(0)));
        assert_eq!(get(&r.ret, "home"), Some(&s("/root")));
        let r = call(&ctx(), "user.info", &[s("brinetest_nobody_here")]).await;
        assert_eq!(r.ret, Value::Map(vec![]));
        let r = call(&ctx(), "user.list_users", &[]).await;
        assert!(r.ret.as_array().is_some_and(|a| a.contains(&s("root"))));
        let r = call(
            &ctx(),
            "user.chshell",
            &[s("brinetest_nobody_here"), s("/bin/sh")],
        )
        .await;
        assert_eq!(
            r.ret,
            s("ERROR: User 'brinetest_nobody_here' does not exist")
        );
        let r = call(&ctx(), "user.primary_group", &[s("root")]).await;
        assert_eq!(r.ret, s("root"));
    }

    struct Cleanup;
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for u in ["brinetest_mu1", "brinetest_mu2"] {
                let _ = std::process::Command::new("userdel")
                    .args(["-r", u])
                    .output();
            }
            for g in ["brinetest_mug", "brinetest_mu1"] {
                let _ = std::process::Command::new("groupdel").arg(g).output();
            }
        }
    }

    #[tokio::test]
    async fn live_user_lifecycle() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        drop(Cleanup);
        let _cleanup = Cleanup;
        assert!(std::process::Command::new("groupadd")
            .arg("brinetest_mug")
            .status()
            .unwrap()
            .success());
        let r = call(
            &ctx(),
            "user.add",
            &[
                s("brinetest_mu1"),
                s("uid=23461"),
                s("shell=/bin/sh"),
                s("fullname=Test User"),
                s("groups=brinetest_mug"),
                s("home=/tmp/brinetest_mu1_home"),
            ],
        )
        .await;
        assert_eq!(r.ret, Value::Boolean(true), "{:?}", r.ret);
        let i = call(&ctx(), "user.info", &[s("brinetest_mu1")]).await.ret;
        assert_eq!(get(&i, "uid"), Some(&Value::from(23461)));
        assert_eq!(get(&i, "fullname"), Some(&s("Test User")));
        assert_eq!(get(&i, "home"), Some(&s("/tmp/brinetest_mu1_home")));
        let groups = get(&i, "groups").and_then(Value::as_array).unwrap();
        assert!(groups.contains(&s("brinetest_mug")), "{groups:?}");
        for (fun, arg) in [
            ("user.chshell", s("/bin/bash")),
            ("user.chuid", Value::from(23462)),
            ("user.chroomnumber", s("42")),
            ("user.chgroups", s("")),
        ] {
            let r = call(&ctx(), fun, &[s("brinetest_mu1"), arg]).await;
            assert_eq!(r.ret, Value::Boolean(true), "{fun}: {:?}", r.ret);
        }
        let i = call(&ctx(), "user.info", &[s("brinetest_mu1")]).await.ret;
        assert_eq!(get(&i, "roomnumber"), Some(&s("42")));
        assert_eq!(get(&i, "shell"), Some(&s("/bin/bash")));
        let r = call(&ctx(), "user.rename", &[s("brinetest_mu1"), s("root")]).await;
        assert_eq!(r.ret, s("ERROR: User 'root' already exists"));
        let r = call(
            &ctx(),
            "user.rename",
            &[s("brinetest_mu1"), s("brinetest_mu2")],
        )
        .await;
        assert_eq!(r.ret, Value::Boolean(true), "{:?}", r.ret);
        let r = call(
            &ctx(),
            "user.delete",
            &[s("brinetest_mu2"), s("remove=True")],
        )
        .await;
        assert_eq!(r.ret, Value::Boolean(true), "{:?}", r.ret);
        let r = call(&ctx(), "user.info", &[s("brinetest_mu2")]).await;
        assert_eq!(r.ret, Value::Map(vec![]));
        let r = call(&ctx(), "user.delete", &[s("brinetest_mu2")]).await;
        assert_eq!(r.ret, Value::Boolean(false));
    }
}
