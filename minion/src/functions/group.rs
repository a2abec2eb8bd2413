//! The `group` execution module on Linux (Salt's `groupadd`): groups read from `/etc/group`
//! (or `<root>/etc/group`), changed with `groupadd`, `groupdel`, `groupmod` and `gpasswd`.

use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::cmd::run_argv;
use super::{CallState, Context, FnError, Spec};
use brine_protocol::payload::{map, py_truthy};

/// The functions of the `group` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Add,
    Delete,
    Info,
    Getent,
    Chgid,
    Adduser,
    Deluser,
    Members,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Add,
        Fun::Delete,
        Fun::Info,
        Fun::Getent,
        Fun::Chgid,
        Fun::Adduser,
        Fun::Deluser,
        Fun::Members,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::Add => (
                "group.add",
                "add",
                Signature::new(
                    &["name", "gid", "system", "root", "non_unique", "local"],
                    1,
                    false,
                    false,
                ),
                "
    Create a group. `gid` picks its group id, `system=True` makes a system group,
    `non_unique=True` allows a gid another group already has, `root` is a directory
    to chroot into. Returns True when groupadd succeeded.

    CLI Example:

        salt '*' group.add foo 3456
    ",
            ),
            Fun::Delete => (
                "group.delete",
                "delete",
                Signature::new(&["name", "root", "local"], 1, false, false),
                "
    Remove a group. Returns True when groupdel succeeded.

    CLI Example:

        salt '*' group.delete foo
    ",
            ),
            Fun::Info => (
                "group.info",
                "info",
                Signature::new(&["name", "root"], 1, false, false),
                "
    A group's name, passwd, gid and members; an empty dict when there is no such group.

    CLI Example:

        salt '*' group.info foo
    ",
            ),
            Fun::Getent => (
                "group.getent",
                "getent",
                Signature::new(&["refresh", "root"], 0, false, false),
                "
    Every group, each as group.info shows it.

    CLI Example:

        salt '*' group.getent
    ",
            ),
            Fun::Chgid => (
                "group.chgid",
                "chgid",
                Signature::new(&["name", "gid", "root", "non_unique"], 2, false, false),
                "
    Give a group another gid (`non_unique=True` allows a gid already in use).
    Returns whether the group has that gid afterwards.

    CLI Example:

        salt '*' group.chgid foo 4376
    ",
            ),
            Fun::Adduser => (
                "group.adduser",
                "adduser",
                Signature::new(&["name", "username", "root"], 2, false, false),
                "
    Make a user a member of a group (gpasswd --add).

    CLI Example:

        salt '*' group.adduser foo bar
    ",
            ),
            Fun::Deluser => (
                "group.deluser",
                "deluser",
                Signature::new(&["name", "username", "root"], 2, false, false),
                "
    Take a user out of a group's members; True when the user was not a member or
    the group does not exist.

    CLI Example:

        salt '*' group.deluser foo bar
    ",
            ),
            Fun::Members => (
                "group.members",
                "members",
                Signature::new(&["name", "members_list", "root"], 2, false, false),
                "
    Replace a group's members with a comma-separated list of users.

    CLI Example:

        salt '*' group.members foo 'user1,user2,user3'
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
        _ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let name = b.get("name").map(py_str).unwrap_or_default();
        let root = b.opt("root").map(py_str);
        let root = root.as_deref();
        match self {
            Fun::Add => {
                let argv = add_argv(
                    &which(if flag(b, "local") {
                        "lgroupadd"
                    } else {
                        "groupadd"
                    })?,
                    &name,
                    b.get("gid"),
                    flag(b, "system"),
                    root,
                    flag(b, "non_unique"),
                    flag(b, "local"),
                );
                Ok(Value::Boolean(retcode(&argv).await? == 0))
            }
            Fun::Delete => {
                let local = flag(b, "local");
                let mut argv = vec![which(if local { "lgroupdel" } else { "groupdel" })?];
                if let (Some(root), false) = (root, local) {
                    argv.extend(["-R".to_string(), root.to_string()]);
                }
                argv.push(name);
                Ok(Value::Boolean(retcode(&argv).await? == 0))
            }
            Fun::Info => Ok(find(&name, root)?.map_or(Value::Map(vec![]), |g| g.info())),
            Fun::Getent => Ok(Value::Array(
                read_groups(root)?.iter().map(Group::info).collect(),
            )),
            Fun::Chgid => {
                let Some(group) = find(&name, root)? else {
                    return Ok(Value::Boolean(false));
                };
                let gid = b.get("gid").cloned().unwrap_or(Value::Nil);
                if same(&gid, group.gid) {
                    return Ok(Value::Boolean(true));
                }
                let mut argv = vec![which("groupmod")?];
                if let Some(root) = root {
                    argv.extend(["-R".to_string(), root.to_string()]);
                }
                let param = if flag(b, "non_unique") { "-og" } else { "-g" };
                argv.extend([param.to_string(), py_str(&gid), name.clone()]);
                retcode(&argv).await?;
                let after = find(&name, root)?;
                Ok(Value::Boolean(after.is_some_and(|g| same(&gid, g.gid))))
            }
            Fun::Adduser => {
                let username = b.get("username").map(py_str).unwrap_or_default();
                let mut argv = vec![which("gpasswd")?, "--add".into(), username, name];
                if let Some(root) = root {
                    argv.extend(["--root".to_string(), root.to_string()]);
                }
                Ok(Value::Boolean(retcode(&argv).await? == 0))
            }
            Fun::Deluser => {
                let username = b.get("username").map(py_str).unwrap_or_default();
                // Salt looks the group up without `root`.
                let Some(group) = find(&name, None)? else {
                    return Ok(Value::Boolean(true));
                };
                if !group.members.contains(&username) {
                    return Ok(Value::Boolean(true));
                }
                let mut argv = vec![which("gpasswd")?, "--del".into(), username, name];
                if let Some(root) = root {
                    argv.extend(["--root".to_string(), root.to_string()]);
                }
                Ok(Value::Boolean(retcode(&argv).await? == 0))
            }
            Fun::Members => {
                let list = match b.get("members_list") {
                    Some(Value::Array(items)) => {
                        items.iter().map(py_str).collect::<Vec<_>>().join(",")
                    }
                    Some(v) => py_str(v),
                    None => String::new(),
                };
                let mut argv = vec![which("gpasswd")?, "--members".into(), list, name];
                if let Some(root) = root {
                    argv.extend(["--root".to_string(), root.to_string()]);
                }
                Ok(Value::Boolean(retcode(&argv).await? == 0))
            }
        }
    }
}

/// A line of `/etc/group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub name: String,
    pub passwd: String,
    pub gid: i64,
    pub members: Vec<String>,
}

impl Group {
    /// Salt's group info map.
    pub(crate) fn info(&self) -> Value {
        map([
            ("name", Value::from(self.name.as_str())),
            ("passwd", Value::from(self.passwd.as_str())),
            ("gid", Value::from(self.gid)),
            (
                "members",
                Value::Array(
                    self.members
                        .iter()
                        .map(|m| Value::from(m.as_str()))
                        .collect(),
                ),
            ),
        ])
    }
}

/// The groups of `/etc/group` text; lines without four fields or a numeric gid are skipped.
pub(crate) fn parse_groups(text: &str) -> Vec<Group> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.trim().split(':').collect();
            if f.len() < 4 {
                return None;
            }
            Some(Group {
                name: f[0].to_string(),
                passwd: f[1].to_string(),
                gid: f[2].trim().parse().ok()?,
                members: if f[3].is_empty() {
                    Vec::new()
                } else {
                    f[3].split(',').map(|m| m.trim().to_string()).collect()
                },
            })
        })
        .collect()
}

/// The groups of `<root>/etc/group` (`/etc/group` without a root).
pub(crate) fn read_groups(root: Option<&str>) -> Result<Vec<Group>, FnError> {
    let path =
        std::path::Path::new(root.filter(|r| !r.is_empty()).unwrap_or("/")).join("etc/group");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| FnError::Execution(format!("Could not read {}: {e}", path.display())))?;
    Ok(parse_groups(&text))
}

fn find(name: &str, root: Option<&str>) -> Result<Option<Group>, FnError> {
    Ok(read_groups(root)?.into_iter().find(|g| g.name == name))
}

/// `groupadd`'s argv as Salt builds it (the gid goes in one word, `-g <gid>`).
fn add_argv(
    groupadd: &str,
    name: &str,
    gid: Option<&Value>,
    system: bool,
    root: Option<&str>,
    non_unique: bool,
    local: bool,
) -> Vec<String> {
    let mut argv = vec![groupadd.to_string()];
    if let Some(gid) = gid.filter(|g| py_truthy(g)) {
        argv.push(format!("-g {}", py_str(gid)));
        if non_unique && !local {
            argv.push("-o".into());
        }
    }
    if system {
        argv.push("-r".into());
    }
    if let (Some(root), false) = (root, local) {
        argv.extend(["-R".to_string(), root.to_string()]);
    }
    argv.push(name.to_string());
    argv
}

/// Python's `value == n` for a value given by the caller and a number read from the system.
pub(crate) fn same(value: &Value, n: i64) -> bool {
    match value {
        Value::Integer(i) => i.as_i64() == Some(n),
        Value::Boolean(b) => i64::from(*b) == n,
        Value::F64(f) => *f == n as f64,
        Value::F32(f) => f64::from(*f) == n as f64,
        _ => false,
    }
}

fn flag(b: &Bound, key: &str) -> bool {
    b.get(key).is_some_and(py_truthy)
}

/// Salt's `_which`: the command's path, searched on PATH and the usual system directories.
pub(crate) fn which(cmd: &str) -> Result<String, FnError> {
    super::cmd::which(cmd)
        .ok_or_else(|| FnError::Execution(format!("Command '{cmd}' cannot be found")))
}

async fn retcode(argv: &[String]) -> Result<i64, FnError> {
    Ok(run_argv(argv, &[]).await?.retcode())
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::get;

    #[test]
    fn parses_group_lines() {
        let groups = parse_groups("root:x:0:\nadm:x:4:syslog, alice\nbroken\nbad:x:nan:\n");
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1].members, vec!["syslog", "alice"]);
        assert_eq!(
            groups[0].info(),
            map([
                ("name", s("root")),
                ("passwd", s("x")),
                ("gid", Value::from(0)),
                ("members", Value::Array(vec![])),
            ])
        );
    }

    #[test]
    fn groupadd_argv_like_salt() {
        let argv = add_argv(
            "/usr/sbin/groupadd",
            "g1",
            Some(&Value::from(2000)),
            true,
            None,
            true,
            false,
        );
        assert_eq!(argv, ["/usr/sbin/groupadd", "-g 2000", "-o", "-r", "g1"]);
        let argv = add_argv(
            "groupadd",
            "g1",
            Some(&Value::from(0)),
            false,
            Some("/mnt"),
            false,
            false,
        );
        assert_eq!(argv, ["groupadd", "-R", "/mnt", "g1"]);
    }

    #[tokio::test]
    async fn info_of_root_and_missing_group() {
        let r = call(&ctx(), "group.info", &[s("root")]).await;
        assert_eq!(get(&r.ret, "gid"), Some(&Value::from(0)));
        let r = call(&ctx(), "group.info", &[s("brinetest_no_such_group")]).await;
        assert_eq!(r.ret, Value::Map(vec![]));
        let r = call(&ctx(), "group.getent", &[]).await;
        assert!(r.ret.as_array().is_some_and(|a| !a.is_empty()));
    }

    struct Cleanup(&'static [&'static str]);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for g in self.0 {
                let _ = std::process::Command::new("groupdel").arg(g).output();
            }
        }
    }

    #[tokio::test]
    async fn live_group_lifecycle() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let _cleanup = Cleanup(&["brinetest_mg1"]);
        let _ = std::process::Command::new("groupdel")
            .arg("brinetest_mg1")
            .output();
        let r = call(&ctx(), "group.add", &[s("brinetest_mg1"), s("gid=23451")]).await;
        assert_eq!(r.ret, Value::Boolean(true), "{:?}", r.ret);
        let r = call(&ctx(), "group.info", &[s("brinetest_mg1")]).await;
        assert_eq!(get(&r.ret, "gid"), Some(&Value::from(23451)));
        let r = call(
            &ctx(),
            "group.chgid",
            &[s("brinetest_mg1"), Value::from(23452)],
        )
        .await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&ctx(), "group.adduser", &[s("brinetest_mg1"), s("root")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(
            &ctx(),
            "group.members",
            &[s("brinetest_mg1"), s("root,daemon")],
        )
        .await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&ctx(), "group.info", &[s("brinetest_mg1")]).await;
        assert_eq!(
            get(&r.ret, "members"),
            Some(&Value::Array(vec![s("root"), s("daemon")]))
        );
        let r = call(&ctx(), "group.deluser", &[s("brinetest_mg1"), s("root")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&ctx(), "group.deluser", &[s("brinetest_mg1"), s("nobody")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&ctx(), "group.add", &[s("brinetest_mg1")]).await;
        assert_eq!(r.ret, Value::Boolean(false), "exists already");
        let r = call(&ctx(), "group.delete", &[s("brinetest_mg1")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&ctx(), "group.chgid", &[s("brinetest_mg1"), s("1")]).await;
        assert_eq!(r.ret, Value::Boolean(false));
    }
}
