//! The `alternatives` execution module: the system's alternatives (the links in
//! `/etc/alternatives`) read and changed with `update-alternatives` (`alternatives` on the
//! RedHat family), as Salt's module runs it: the command's output is the answer, its error
//! output when it fails.

use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::cmd::run_argv;
use super::{CallState, Context, FnError, Spec};
use brine_protocol::payload::get;

super::spec_table! {
    /// The functions of the `alternatives` module.
    Display => ("alternatives.display", "display", ["name"], 1, false, false, "
    The alternatives of a link group as `update-alternatives --display` shows them (its error
    output when the group does not exist).

    CLI Example:

        salt '*' alternatives.display editor
    ", out = "txt"),
    ShowLink => ("alternatives.show_link", "show_link", ["name"], 1, false, false, "
    The master link of a link group (e.g. /usr/bin/editor); False when there is no such
    group.

    CLI Example:

        salt '*' alternatives.show_link editor
    "),
    ShowCurrent => ("alternatives.show_current", "show_current", ["name"], 1, false, false, "
    The path a link group points to now (where /etc/alternatives/<name> leads); False when
    there is no such link.

    CLI Example:

        salt '*' alternatives.show_current editor
    "),
    CheckExists => ("alternatives.check_exists", "check_exists", ["name", "path"], 2, false, false, "
    Whether path is one of the alternatives of a link group.

    CLI Example:

        salt '*' alternatives.check_exists name path
    "),
    CheckInstalled => ("alternatives.check_installed", "check_installed", ["name", "path"], 2, false, false, "
    Whether a link group points to path now.

    CLI Example:

        salt '*' alternatives.check_installed name path
    "),
    Install => ("alternatives.install", "install", ["name", "link", "path", "priority"], 4, false, false, "
    Add path as an alternative of a link group (made with its master link when new), with a
    priority: higher numbers win in automatic mode.

    CLI Example:

        salt '*' alternatives.install editor /usr/bin/editor /usr/bin/emacs23 50
    ", out = "txt"),
    Remove => ("alternatives.remove", "remove", ["name", "path"], 2, false, false, "
    Remove path from the alternatives of a link group.

    CLI Example:

        salt '*' alternatives.remove name path
    ", out = "txt"),
    Auto => ("alternatives.auto", "auto", ["name"], 1, false, false, "
    Put a link group in automatic mode: it points to its alternative of highest priority.

    CLI Example:

        salt '*' alternatives.auto name
    "),
    Set => ("alternatives.set", "set_", ["name", "path"], 2, false, false, "
    Point a link group to path, one of its alternatives (manual mode).

    CLI Example:

        salt '*' alternatives.set name path
    "),
}

/// Where the link groups' links are.
const LINKS: &str = "/etc/alternatives";

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let arg = |key: &str| b.get(key).map(py_str).unwrap_or_default();
        let (name, path) = (arg("name"), arg("path"));
        let family = get(&ctx.grains, "os_family")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let command = |action: &str, more: &[&str]| {
            let tool = if family == "RedHat" {
                "alternatives"
            } else {
                "update-alternatives"
            };
            let mut argv = vec![tool.to_string(), action.to_string()];
            argv.extend(more.iter().map(|s| s.to_string()));
            argv
        };
        // The command's output; its error output when it fails with one (or, with
        // `any_failure`, whenever it fails).
        let answer = |out: super::cmd::RunOutput, any_failure: bool| {
            let failed = complained(&out) || (any_failure && out.retcode() > 0);
            Value::from(if failed { out.stderr() } else { out.stdout() })
        };
        // Salt's module runs these without `ignore_retcode`: a failure is the job's retcode.
        let checked = |out: super::cmd::RunOutput, st: &mut CallState| {
            st.retcode = out.exit_code();
            answer(out, true)
        };
        Ok(match self {
            Fun::Display => answer(run_argv(&command("--display", &[&name]), &[]).await?, false),
            Fun::ShowLink => match family.as_str() {
                "RedHat" => link_from_file(&name, "/var/lib/alternatives"),
                "Suse" => link_from_file(&name, "/var/lib/rpm/alternatives"),
                _ => {
                    let out = run_argv(&command("--query", &[&name]), &[]).await?;
                    if complained(&out) {
                        Value::Boolean(false)
                    } else {
                        query_link(out.stdout()).map_or(Value::Boolean(false), Value::from)
                    }
                }
            },
            Fun::ShowCurrent => match current(&name) {
                Some(target) => Value::from(target),
                None => {
                    tracing::error!("alternative: {name} does not exist");
                    Value::Boolean(false)
                }
            },
            Fun::CheckExists => {
                let out = run_argv(&command("--display", &[&name]), &[]).await?;
                Value::Boolean(
                    !complained(&out)
                        && brine_protocol::nested::splitlines(out.stdout())
                            .iter()
                            .any(|line| line.starts_with(path.as_str())),
                )
            }
            Fun::CheckInstalled => Value::Boolean(current(&name).as_deref() == Some(&path)),
            Fun::Install => {
                let priority = arg("priority");
                let link = arg("link");
                let argv = command("--install", &[&link, &name, &path, &priority]);
                let out = run_argv(&argv, &[]).await?;
                st.retcode = out.exit_code();
                answer(out, false)
            }
            Fun::Remove => checked(
                run_argv(&command("--remove", &[&name, &path]), &[]).await?,
                st,
            ),
            Fun::Auto => checked(run_argv(&command("--auto", &[&name]), &[]).await?, st),
            Fun::Set => checked(run_argv(&command("--set", &[&name, &path]), &[]).await?, st),
        })
    }
}

/// Whether a command failed with something on its error output (Salt's test for a failure
/// worth answering with).
fn complained(out: &super::cmd::RunOutput) -> bool {
    out.retcode() > 0 && !out.stderr().is_empty()
}

/// Where `/etc/alternatives/<name>` points; `None` when it is not a link.
fn current(name: &str) -> Option<String> {
    std::fs::read_link(std::path::Path::new(LINKS).join(name))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// The `Link:` of the first block of `update-alternatives --query` output.
fn query_link(stdout: &str) -> Option<String> {
    let first_block = stdout.split("\n\n").next().unwrap_or_default();
    first_block
        .split('\n')
        .find_map(|line| line.strip_prefix("Link:"))
        .map(|rest| brine_protocol::pystr::strip(rest).to_string())
}

/// The master link as the RedHat and SUSE tools keep it: the second line of the group's
/// file in `dir`; False when it cannot be read.
fn link_from_file(name: &str, dir: &str) -> Value {
    use std::io::Read as _;
    let path = std::path::Path::new(dir).join(name);
    let mut text = String::new();
    let read = std::fs::File::open(&path).and_then(|f| f.take(1 << 20).read_to_string(&mut text));
    if read.is_err() {
        tracing::error!("alternatives: {name} does not exist");
        return Value::Boolean(false);
    }
    match brine_protocol::nested::splitlines_keepends(&text).get(1) {
        Some(line) => Value::from(line.trim_end_matches('\n')),
        None => {
            tracing::error!("alternatives: unable to get master link for {name}");
            Value::Boolean(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::query_link;

    #[test]
    fn the_master_link_is_read_from_the_first_block() {
        let out = "Name: editor\nLink: /usr/bin/editor \nSlaves:\n x\nStatus: auto\n\n\
                   Alternative: /bin/nano\nLink: /other\n";
        assert_eq!(query_link(out).as_deref(), Some("/usr/bin/editor"));
        assert_eq!(query_link("Name: x\n"), None);
    }
}
