//! The `git` execution module: Salt's `salt/modules/git.py` for the common work on a
//! checkout (clone, fetch, pull, checkout, reset, commit, the remotes, the config, the
//! refs), each function building the same `git` command line as Salt, running it through
//! `cmd.run_all` (so a failing command sets the job's retcode as in Salt) and reading its
//! output as Salt does. A failure is Salt's `Command 'git ...' failed: <stderr>`, with the
//! credentials of `http(s)://user:pass@` URLs redacted.
//!
//! Not provided: `archive`, `cherry`, `list_worktrees`, `worktree_*`, `merge_tree`, `push`,
//! `rebase`, `rm`, `stash`, `submodule`. The `identity` argument (SSH keys through Salt's
//! wrapper script) is refused with an error rather than ignored.

use std::sync::OnceLock;

use regex::Regex;
use rmpv::Value;

use super::args::{py_str, shlex_split, Bound, Signature};
use super::network::{salt_cmd, Dict};
use super::{cmd, CallState, Context, FnError, Spec};
use brine_protocol::nested::splitlines;
use brine_protocol::payload::{get, get_str, py_truthy};

super::spec_table! {
    /// The functions of the `git` module.
    Add => ("git.add", "add", ["cwd", "filename", "opts", "git_opts", "user", "password", "ignore_retcode", "output_encoding"], 2, false, false, "
    Stage a file (or a directory, or a glob) with `git add --verbose -- <filename>` and
    return git's output. opts are more options for git add, git_opts options for git
    itself (`-c key=value`), user the user to run git as.

    CLI Example:

        salt myminion git.add /path/to/repo foo/bar.py
        salt myminion git.add /path/to/repo . opts='--all'
    "),
    Branch => ("git.branch", "branch", ["cwd", "name", "opts", "git_opts", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    Run `git branch` with opts (and the branch name, if given); True when it succeeds.

    CLI Example:

        salt myminion git.branch /path/to/repo mybranch opts='-m oldbranch'
        salt myminion git.branch /path/to/repo opts='--set-upstream-to origin/main'
    "),
    Checkout => ("git.checkout", "checkout", ["cwd", "rev", "force", "opts", "git_opts", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    Check out a revision (`git checkout [--force] <opts> <rev>`) and return git's output.
    rev is needed unless opts has -b or -B.

    CLI Example:

        salt myminion git.checkout /path/to/repo somebranch
        salt myminion git.checkout /path/to/repo opts='-b newbranch'
    "),
    Clone => ("git.clone", "clone", ["cwd", "url", "name", "opts", "git_opts", "user", "password", "identity", "https_user", "https_pass", "ignore_retcode", "saltenv", "output_encoding"], 1, false, false, "
    Clone url into cwd (or, with name, into cwd/name). https_user and https_pass are put
    in an HTTPS URL. True when the clone succeeds.

    CLI Example:

        salt myminion git.clone /path/to/repo_parent_dir url=file:///srv/upstream.git
    "),
    Commit => ("git.commit", "commit", ["cwd", "message", "opts", "git_opts", "user", "password", "filename", "ignore_retcode", "output_encoding"], 2, false, false, "
    Commit with a message (`git commit -m <message> <opts> [-- <filename>]`) and return
    git's output.

    CLI Example:

        salt myminion git.commit /path/to/repo 'The commit message'
    "),
    ConfigGet => ("git.config_get", "config_get", ["key", "cwd", "user", "password", "ignore_retcode", "output_encoding"], 1, false, true, "
    The value of a git config key (the last one, or all of them with all=True); None when
    the key is not set. cwd is required unless global=True.

    CLI Example:

        salt myminion git.config_get user.name cwd=/path/to/repo
        salt myminion git.config_get user.email global=True
    "),
    ConfigGetRegexp => ("git.config_get_regexp", "config_get_regexp", ["key", "value_regex", "cwd", "user", "password", "ignore_retcode", "output_encoding"], 1, false, true, "
    The config keys matching a regex, each with the list of its values (optionally only
    the values matching value_regex). cwd is required unless global=True.

    CLI Example:

        salt myminion git.config_get_regexp '^user\\.' cwd=/path/to/repo
    "),
    ConfigSet => ("git.config_set", "config_set", ["key", "value", "multivar", "cwd", "user", "password", "ignore_retcode", "output_encoding"], 1, false, true, "
    Set a git config key to value (or to the values of multivar, a list or a
    comma-separated text); add=True adds a value instead of replacing them. Returns the
    key's values. cwd is required unless global=True.

    CLI Example:

        salt myminion git.config_set user.email me@example.com cwd=/path/to/repo
    "),
    ConfigUnset => ("git.config_unset", "config_unset", ["key", "value_regex", "cwd", "user", "password", "ignore_retcode", "output_encoding"], 1, false, true, "
    Unset a git config key (only its values matching value_regex, when given); all=True
    unsets every value of a multivar. cwd is required unless global=True.

    CLI Example:

        salt myminion git.config_unset foo.bar cwd=/path/to/repo
        salt myminion git.config_unset foo.bar all=True cwd=/path/to/repo
    "),
    CurrentBranch => ("git.current_branch", "current_branch", ["cwd", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    The name of the branch checked out (`git rev-parse --abbrev-ref HEAD`).

    CLI Example:

        salt myminion git.current_branch /path/to/repo
    "),
    Describe => ("git.describe", "describe", ["cwd", "rev", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    `git describe --always` of a revision (HEAD by default).

    CLI Example:

        salt myminion git.describe /path/to/repo
        salt myminion git.describe /path/to/repo develop
    "),
    Diff => ("git.diff", "diff", ["cwd", "item1", "item2", "opts", "git_opts", "user", "password", "no_index", "cached", "paths", "output_encoding"], 1, false, false, "
    The output of `git diff` between up to two revisions (or, with cached=True, of the
    index, or with no_index=True, of two paths), optionally limited to paths.

    CLI Example:

        salt myminion git.diff /path/to/repo
        salt myminion git.diff /path/to/repo abcdef1 aabbccd paths=path/to/file1,path/to/file2
    "),
    DiscardLocalChanges => ("git.discard_local_changes", "discard_local_changes", ["cwd", "path", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    Discard the uncommitted changes under path (`git checkout -- <path>`, `.` by default).

    CLI Example:

        salt myminion git.discard_local_changes /path/to/repo
    "),
    Fetch => ("git.fetch", "fetch", ["cwd", "remote", "force", "refspecs", "opts", "git_opts", "user", "password", "identity", "ignore_retcode", "saltenv", "output_encoding"], 1, false, false, "
    Fetch from a remote and return what changed: new tags, new branches, updated
    branches (old and new commit) and updated tags.

    CLI Example:

        salt myminion git.fetch /path/to/repo upstream
        salt myminion git.fetch /path/to/repo opts='--prune'
    "),
    Init => ("git.init", "init", ["cwd", "bare", "template", "separate_git_dir", "shared", "opts", "git_opts", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    Create a repository at cwd (`git init`, bare with bare=True) and return git's output.

    CLI Example:

        salt myminion git.init /path/to/repo
        salt myminion git.init /path/to/bare/repo.git bare=True
    "),
    IsWorktree => ("git.is_worktree", "is_worktree", ["cwd", "user", "password", "output_encoding"], 1, false, false, "
    True when cwd is in a worktree made by `git worktree add` (its .git is a file naming
    the real git dir).

    CLI Example:

        salt myminion git.is_worktree /path/to/repo
    "),
    ListBranches => ("git.list_branches", "list_branches", ["cwd", "remote", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    The local branches (the remote-tracking ones with remote=True).

    CLI Example:

        salt myminion git.list_branches /path/to/repo
        salt myminion git.list_branches /path/to/repo remote=True
    "),
    ListTags => ("git.list_tags", "list_tags", ["cwd", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    The tags of the repository.

    CLI Example:

        salt myminion git.list_tags /path/to/repo
    "),
    LsRemote => ("git.ls_remote", "ls_remote", ["cwd", "remote", "ref", "opts", "git_opts", "user", "password", "identity", "https_user", "https_pass", "ignore_retcode", "output_encoding", "saltenv"], 0, false, false, "
    The refs of a remote (a remote's name in cwd, or a URL), ref name to commit;
    optionally only ref.

    CLI Example:

        salt myminion git.ls_remote /path/to/repo origin master
        salt myminion git.ls_remote remote=file:///srv/upstream.git opts='--heads'
    "),
    Merge => ("git.merge", "merge", ["cwd", "rev", "opts", "git_opts", "user", "password", "identity", "ignore_retcode", "output_encoding"], 1, false, true, "
    Merge a revision into the checked-out branch (the upstream one without rev) and
    return git's output.

    CLI Example:

        salt myminion git.merge /path/to/repo rev=upstream/foo opts='--ff-only'
    "),
    MergeBase => ("git.merge_base", "merge_base", ["cwd", "refs", "octopus", "is_ancestor", "independent", "fork_point", "opts", "git_opts", "user", "password", "ignore_retcode", "output_encoding"], 1, false, true, "
    `git merge-base` of refs (a list or a comma-separated text): the best common
    ancestor (all of them with all=True), or with is_ancestor=True whether the first of two
    refs is an ancestor of the second.

    CLI Example:

        salt myminion git.merge_base /path/to/repo refs=8f2e542,4ad8cab
        salt myminion git.merge_base /path/to/repo refs=8f2e542,4ad8cab is_ancestor=True
    "),
    Pull => ("git.pull", "pull", ["cwd", "opts", "git_opts", "user", "password", "identity", "ignore_retcode", "saltenv", "output_encoding"], 1, false, false, "
    Run `git pull` and return its output.

    CLI Example:

        salt myminion git.pull /path/to/repo opts='--rebase origin master'
    "),
    RemoteGet => ("git.remote_get", "remote_get", ["cwd", "remote", "user", "password", "redact_auth", "ignore_retcode", "output_encoding"], 1, false, false, "
    The fetch and push URLs of a remote (origin by default).

    CLI Example:

        salt myminion git.remote_get /path/to/repo upstream
    "),
    RemoteRefs => ("git.remote_refs", "remote_refs", ["url", "heads", "tags", "user", "password", "identity", "https_user", "https_pass", "ignore_retcode", "output_encoding", "saltenv"], 1, false, true, "
    The refs of a remote repository given by its URL, without a local checkout (only
    the heads or the tags if asked; filter limits them to the matching ones).

    CLI Example:

        salt myminion git.remote_refs file:///srv/upstream.git heads=True
    "),
    RemoteSet => ("git.remote_set", "remote_set", ["cwd", "url", "remote", "user", "password", "https_user", "https_pass", "push_url", "push_https_user", "push_https_pass", "ignore_retcode", "output_encoding"], 2, false, false, "
    Set the URL of a remote (origin by default), replacing it if it exists, optionally
    with another push URL; returns the remote's URLs.

    CLI Example:

        salt myminion git.remote_set /path/to/repo file:///srv/upstream.git remote=upstream
    "),
    Remotes => ("git.remotes", "remotes", ["cwd", "user", "password", "redact_auth", "ignore_retcode", "output_encoding"], 1, false, false, "
    Every remote with its fetch and push URLs (credentials redacted unless
    redact_auth=False).

    CLI Example:

        salt myminion git.remotes /path/to/repo
    "),
    Reset => ("git.reset", "reset", ["cwd", "opts", "git_opts", "user", "password", "identity", "ignore_retcode", "output_encoding"], 1, false, false, "
    Run `git reset` with opts and return its output.

    CLI Example:

        salt myminion git.reset /path/to/repo opts='--hard origin/master'
    "),
    RevParse => ("git.rev_parse", "rev_parse", ["cwd", "rev", "opts", "git_opts", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    Run `git rev-parse` with opts on a revision and return its output.

    CLI Example:

        salt myminion git.rev_parse /path/to/repo HEAD
        salt myminion git.rev_parse /path/to/repo opts='--git-dir'
    "),
    Revision => ("git.revision", "revision", ["cwd", "rev", "short", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    The commit a revision (HEAD by default) points to, abbreviated with short=True.

    CLI Example:

        salt myminion git.revision /path/to/repo mybranch
    "),
    Status => ("git.status", "status", ["cwd", "user", "password", "ignore_retcode", "output_encoding"], 1, false, false, "
    The changed files of the worktree by kind (modified, new, deleted, untracked, or git's
    status code for the others).

    CLI Example:

        salt myminion git.status /path/to/repo
    "),
    SymbolicRef => ("git.symbolic_ref", "symbolic_ref", ["cwd", "ref", "value", "opts", "git_opts", "user", "password", "ignore_retcode", "output_encoding"], 2, false, false, "
    Run `git symbolic-ref` on a ref (to read it, or set it to value) and return its output.

    CLI Example:

        salt myminion git.symbolic_ref /path/to/repo HEAD
    "),
    Tag => ("git.tag", "tag", ["cwd", "name", "ref", "message", "opts", "git_opts", "user", "password", "ignore_retcode", "output_encoding"], 2, false, false, "
    Create a tag on a ref (HEAD by default), annotated when a message is given, and
    return git's output.

    CLI Example:

        salt myminion git.tag /path/to/repo v1.2
        salt myminion git.tag /path/to/repo v1.2 message='Version 1.2'
    "),
    Version => ("git.version", "version", ["versioninfo"], 0, false, false, "
    The version of git (with versioninfo=True, as a list of its numbers).

    CLI Example:

        salt myminion git.version
    "),
}

/// One call: its context, its arguments, its retcode.
struct Git<'a> {
    ctx: &'a Context,
    b: &'a Bound,
    st: &'a mut CallState,
}

/// What `cmd.run_all` gave for a git command.
struct Run {
    retcode: i64,
    stdout: String,
    stderr: String,
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        if cmd::which("git").is_none() {
            st.retcode = 1;
            return Ok(Value::from(format!(
                "'{}' is not available.",
                self.spec().name
            )));
        }
        let mut g = Git { ctx, b, st };
        g.run(self).await
    }
}

impl Git<'_> {
    fn arg(&self, key: &str) -> Option<&Value> {
        self.b.get(key)
    }

    fn opt(&self, key: &str) -> Option<&Value> {
        self.b.opt(key)
    }

    fn flag(&self, key: &str) -> bool {
        self.arg(key).is_some_and(py_truthy)
    }

    /// A parameter's text, `default` when it was not given.
    fn text_or(&self, key: &str, default: &str) -> String {
        self.arg(key).map_or_else(|| default.to_string(), py_str)
    }

    fn user(&self) -> Option<String> {
        self.opt("user").map(py_str)
    }

    /// Salt's `_expand_path(cwd, user)`: cwd under the user's home when it is relative.
    fn cwd(&self) -> String {
        let cwd = self.arg("cwd").map(py_str).unwrap_or_default();
        expand_path(&cwd, self.user().as_deref())
    }

    fn ignore_retcode(&self) -> bool {
        self.flag("ignore_retcode")
    }

    fn identity_refused(&self) -> Result<(), FnError> {
        if self.opt("identity").is_some() {
            return Err(FnError::Execution(
                "The 'identity' argument (SSH keys through Salt's ssh wrapper) is not supported by this minion".into(),
            ));
        }
        Ok(())
    }

    /// `["git"] + git_opts`.
    fn git(&self) -> Result<Vec<String>, FnError> {
        let mut command = vec!["git".to_string()];
        command.extend(format_opts(self.arg("git_opts"))?);
        Ok(command)
    }

    /// Salt's `_git_run`: the command through `cmd.run_all`; a failure is an error when
    /// `failhard`.
    async fn git_run(
        &mut self,
        command: Vec<String>,
        cwd: Option<String>,
        ignore_retcode: bool,
        failhard: bool,
        redirect_stderr: bool,
    ) -> Result<Run, FnError> {
        let mut kwargs: Vec<(&str, Value)> = vec![
            ("python_shell", Value::Boolean(false)),
            ("ignore_retcode", Value::Boolean(ignore_retcode)),
            ("redirect_stderr", Value::Boolean(redirect_stderr)),
        ];
        if let Some(cwd) = cwd {
            kwargs.push(("cwd", Value::from(cwd)));
        }
        if let Some(user) = self.user() {
            kwargs.push(("runas", Value::from(user)));
        }
        if let Some(pw) = self.opt("password") {
            kwargs.push(("password", pw.clone()));
        }
        let argv = Value::Array(command.iter().map(|a| Value::from(a.as_str())).collect());
        let ret = salt_cmd(self.ctx, cmd::Fun::RunAll, argv, &kwargs, self.st).await?;
        let retcode = get(&ret, "retcode").and_then(Value::as_i64).unwrap_or(0);
        let stdout = get_str(&ret, "stdout").unwrap_or_default().to_string();
        let stderr = get_str(&ret, "stderr").unwrap_or_default().to_string();
        if retcode != 0 && failhard {
            let mut msg = format!("Command '{}' failed", redact(&command.join(" ")));
            let err = if redirect_stderr { &stdout } else { &stderr };
            if !err.is_empty() {
                msg.push_str(&format!(": {}", redact(err)));
            }
            return Err(FnError::Execution(msg));
        }
        Ok(Run {
            retcode,
            stdout,
            stderr,
        })
    }

    /// A command run in the checkout, failing hard: its output.
    async fn out(
        &mut self,
        command: Vec<String>,
        redirect_stderr: bool,
    ) -> Result<String, FnError> {
        let cwd = self.cwd();
        let ignore = self.ignore_retcode();
        Ok(self
            .git_run(command, Some(cwd), ignore, true, redirect_stderr)
            .await?
            .stdout)
    }

    fn kwarg_flag(&self, key: &str) -> bool {
        self.b.kwarg(key).is_some_and(py_truthy)
    }

    async fn run(&mut self, fun: Fun) -> Result<Value, FnError> {
        match fun {
            Fun::Version => {
                let version = self.version().await;
                if !self.flag("versioninfo") {
                    return Ok(Value::from(version));
                }
                Ok(Value::Array(
                    version
                        .split('.')
                        .map(|p| {
                            p.parse::<i64>()
                                .map_or_else(|_| Value::from(p), Value::from)
                        })
                        .collect(),
                ))
            }
            Fun::Init => {
                let mut command = self.git()?;
                command.push("init".into());
                if self.flag("bare") {
                    command.push("--bare".into());
                }
                if let Some(t) = self.opt("template") {
                    command.push(format!("--template={}", py_str(t)));
                }
                if let Some(d) = self.opt("separate_git_dir") {
                    command.push(format!("--separate-git-dir={}", py_str(d)));
                }
                if let Some(shared) = self.opt("shared") {
                    let shared = match shared {
                        Value::Integer(i) => format!("0{i}"),
                        Value::String(_) => py_str(shared),
                        other => py_str(other).to_lowercase(),
                    };
                    command.push(format!("--shared={shared}"));
                }
                command.extend(format_opts(self.arg("opts"))?);
                command.push(self.cwd());
                let ignore = self.ignore_retcode();
                Ok(Value::from(
                    self.git_run(command, None, ignore, true, false)
                        .await?
                        .stdout,
                ))
            }
            Fun::Clone => self.clone_().await,
            Fun::RevParse => {
                let mut command = self.git()?;
                command.push("rev-parse".into());
                command.extend(format_opts(self.arg("opts"))?);
                if let Some(rev) = self.opt("rev") {
                    command.push(py_str(rev));
                }
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::Revision => {
                let mut command = vec!["git".to_string(), "rev-parse".into()];
                if self.flag("short") {
                    command.push("--short".into());
                }
                command.push(self.text_or("rev", "HEAD"));
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::CurrentBranch => {
                let command = ["git", "rev-parse", "--abbrev-ref", "HEAD"];
                Ok(Value::from(self.out(strings(&command), false).await?))
            }
            Fun::Describe => {
                let mut command = strings(&["git", "describe", "--always"]);
                command.push(self.text_or("rev", "HEAD"));
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::Status => {
                let out = self
                    .out(strings(&["git", "status", "-z", "--porcelain"]), false)
                    .await?;
                let mut ret = Dict::default();
                for line in out.split('\0') {
                    let Some((state, filename)) = split_once_ws(line) else {
                        continue;
                    };
                    let kind = match state {
                        "M" => "modified",
                        "A" => "new",
                        "D" => "deleted",
                        "??" => "untracked",
                        other => other,
                    };
                    push(&mut ret, kind, Value::from(filename));
                }
                Ok(ret.into_value())
            }
            Fun::Fetch => self.fetch().await,
            Fun::Pull => {
                self.identity_refused()?;
                let mut command = self.git()?;
                command.push("pull".into());
                command.extend(format_opts(self.arg("opts"))?);
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::Checkout => {
                let mut command = self.git()?;
                command.push("checkout".into());
                if self.flag("force") {
                    command.push("--force".into());
                }
                let opts = format_opts(self.arg("opts"))?;
                let new_branch = opts.iter().any(|o| o == "-b" || o == "-B");
                command.extend(opts);
                match self.opt("rev") {
                    Some(rev) => command.push(py_str(rev)),
                    None if !new_branch => {
                        return Err(FnError::Invocation(
                            "'rev' argument is required unless -b or -B in opts".into(),
                        ))
                    }
                    None => {}
                }
                Ok(Value::from(self.out(command, true).await?))
            }
            Fun::RemoteGet => {
                let remote = self.text_or("remote", "origin");
                let redact_auth = self.arg("redact_auth").is_none_or(py_truthy);
                self.remote_get(&remote, redact_auth).await
            }
            Fun::RemoteSet => self.remote_set().await,
            Fun::Remotes => {
                let redact_auth = self.arg("redact_auth").is_none_or(py_truthy);
                self.remotes(redact_auth).await
            }
            Fun::RemoteRefs => self.remote_refs().await,
            Fun::ConfigGet => {
                self.b.only_kwargs(&["all", "global"])?;
                self.config_get(
                    &py_str(self.arg("key").unwrap_or(&Value::Nil)),
                    self.kwarg_flag("all"),
                )
                .await
            }
            Fun::ConfigGetRegexp => {
                self.b.only_kwargs(&["global"])?;
                let Some(run) = self.config_getter("--get-regexp").await? else {
                    return Ok(Value::Map(vec![]));
                };
                let mut ret = Dict::default();
                for line in splitlines(&run.stdout) {
                    if let Some((param, value)) = split_once_ws(line) {
                        push(&mut ret, param, Value::from(value));
                    }
                }
                Ok(ret.into_value())
            }
            Fun::ConfigSet => self.config_set().await,
            Fun::ConfigUnset => self.config_unset().await,
            Fun::LsRemote => self.ls_remote().await,
            Fun::ListBranches => {
                let kind = if self.flag("remote") {
                    "remotes"
                } else {
                    "heads"
                };
                let command = strings(&[
                    "git",
                    "for-each-ref",
                    "--format",
                    "%(refname:short)",
                    &format!("refs/{kind}/"),
                ]);
                Ok(lines(&self.out(command, false).await?))
            }
            Fun::ListTags => {
                let command = strings(&[
                    "git",
                    "for-each-ref",
                    "--format",
                    "%(refname:short)",
                    "refs/tags/",
                ]);
                Ok(lines(&self.out(command, false).await?))
            }
            Fun::Add => {
                let mut command = self.git()?;
                command.extend(strings(&["add", "--verbose"]));
                command.extend(
                    format_opts(self.arg("opts"))?
                        .into_iter()
                        .filter(|o| o != "-v" && o != "--verbose"),
                );
                command.push("--".into());
                command.push(self.text_or("filename", ""));
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::Commit => {
                let mut command = self.git()?;
                command.extend(strings(&["commit", "-m"]));
                command.push(self.text_or("message", ""));
                command.extend(format_opts(self.arg("opts"))?);
                if let Some(f) = self.arg("filename").filter(|f| py_truthy(f)) {
                    command.push("--".into());
                    command.push(py_str(f));
                }
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::Reset => {
                self.identity_refused()?;
                let mut command = self.git()?;
                command.push("reset".into());
                command.extend(format_opts(self.arg("opts"))?);
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::IsWorktree => Ok(Value::Boolean(self.is_worktree().await)),
            Fun::Diff => self.diff().await,
            Fun::Branch => {
                let mut command = self.git()?;
                command.push("branch".into());
                command.extend(format_opts(self.arg("opts"))?);
                if let Some(name) = self.opt("name") {
                    command.push(py_str(name));
                }
                self.out(command, false).await?;
                Ok(Value::Boolean(true))
            }
            Fun::Merge => {
                self.b.only_kwargs(&[])?;
                self.identity_refused()?;
                let mut command = self.git()?;
                command.push("merge".into());
                command.extend(format_opts(self.arg("opts"))?);
                if let Some(rev) = self.arg("rev").filter(|r| py_truthy(r)) {
                    command.push(py_str(rev));
                }
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::MergeBase => self.merge_base().await,
            Fun::SymbolicRef => {
                let mut command = self.git()?;
                command.push("symbolic-ref".into());
                let opts = format_opts(self.arg("opts"))?;
                let value = self.opt("value").cloned();
                if value.is_some() && opts.iter().any(|o| o == "-d" || o == "--delete") {
                    return Err(FnError::Invocation(
                        "Value cannot be set for symbolic ref if -d/--delete is included in opts"
                            .into(),
                    ));
                }
                command.extend(opts);
                command.push(self.text_or("ref", ""));
                if let Some(value) = value.filter(py_truthy) {
                    // Salt extends the command with the value: a text gives its characters.
                    match value {
                        Value::Array(items) => command.extend(items.iter().map(py_str)),
                        other => command.extend(py_str(&other).chars().map(String::from)),
                    }
                }
                Ok(Value::from(self.out(command, false).await?))
            }
            Fun::DiscardLocalChanges => {
                let mut command = strings(&["git", "checkout", "--"]);
                command.push(self.text_or("path", "."));
                Ok(Value::from(self.out(command, true).await?))
            }
            Fun::Tag => {
                let mut command = self.git()?;
                command.push("tag".into());
                let opts: Vec<String> = format_opts(self.arg("opts"))?
                    .into_iter()
                    .filter(|o| o != "-a" && o != "--annotate")
                    .collect();
                if opts.iter().any(|o| o == "-m" || o.contains("--message")) {
                    return Err(FnError::Invocation(
                        "Tag messages must be passed in the \"message\" argument".into(),
                    ));
                }
                if let Some(message) = self.opt("message") {
                    command.extend(strings(&["-a", "-m"]));
                    command.push(py_str(message));
                }
                let delete = opts.iter().any(|o| o == "-d" || o == "--delete");
                command.extend(opts);
                command.push(self.text_or("name", ""));
                if !delete {
                    command.push(self.text_or("ref", "HEAD"));
                }
                Ok(Value::from(self.out(command, true).await?))
            }
        }
    }

    /// Salt's `version`: the last word of `git --version` before any `(`.
    async fn version(&mut self) -> String {
        match self
            .git_run(strings(&["git", "--version"]), None, false, true, false)
            .await
        {
            Ok(run) => {
                let mut v = run.stdout;
                if let Some((head, _)) = v.split_once('(') {
                    v = head.trim().to_string();
                }
                if let Some((head, _)) = v.split_once(".windows") {
                    v = head.trim().to_string();
                }
                v.split_whitespace()
                    .last()
                    .map_or_else(|| "unknown".into(), str::to_string)
            }
            Err(e) => {
                tracing::error!("Failed to obtain the git version (error follows):\n{e}");
                "unknown".into()
            }
        }
    }

    async fn clone_(&mut self) -> Result<Value, FnError> {
        let cwd = self.cwd();
        let Some(url) = self.arg("url").filter(|u| py_truthy(u)).map(py_str) else {
            return Err(FnError::Invocation("Missing 'url' argument".into()));
        };
        let url = add_http_basic_auth(
            &url,
            self.opt("https_user").map(py_str),
            self.opt("https_pass").map(py_str),
        )?;
        self.identity_refused()?;
        let mut command = self.git()?;
        command.push("clone".into());
        command.extend(format_opts(self.arg("opts"))?);
        command.extend(["--".to_string(), url]);
        let clone_cwd = match self.opt("name") {
            Some(name) => {
                command.push(py_str(name));
                if !std::path::Path::new(&cwd).exists() {
                    std::fs::create_dir_all(&cwd)
                        .map_err(|e| FnError::Exception(format!("{}: '{cwd}'", os_error(&e))))?;
                }
                cwd
            }
            None => {
                command.push(cwd);
                "/tmp".to_string()
            }
        };
        let ignore = self.ignore_retcode();
        self.git_run(command, Some(clone_cwd), ignore, true, false)
            .await?;
        Ok(Value::Boolean(true))
    }

    async fn fetch(&mut self) -> Result<Value, FnError> {
        self.identity_refused()?;
        let mut command = self.git()?;
        command.push("fetch".into());
        if self.flag("force") {
            command.push("--force".into());
        }
        command.extend(
            format_opts(self.arg("opts"))?
                .into_iter()
                .filter(|o| o != "-f" && o != "--force"),
        );
        if let Some(remote) = self.arg("remote").filter(|r| py_truthy(r)) {
            command.push(py_str(remote));
        }
        if let Some(refspecs) = self.opt("refspecs") {
            command.extend(comma_list(refspecs));
        }
        let out = self.out(command, true).await?;
        static UPDATE: OnceLock<Regex> = OnceLock::new();
        let update = UPDATE.get_or_init(|| {
            Regex::new(
                r"^[\s*]*(?:([0-9a-f]+)\.\.([0-9a-f]+)|\[(?:new (tag|branch)|tag update)\])\s+(.+)->",
            )
            .expect("static regex is valid")
        });
        let mut ret = Dict::default();
        for line in out.split('\n') {
            let Some(caps) = update.captures(line) else {
                continue;
            };
            let ref_name = caps[4].trim_end().to_string();
            if let Some(kind) = caps.get(3) {
                let key = if kind.as_str() == "tag" {
                    "new tags"
                } else {
                    "new branches"
                };
                push(&mut ret, key, Value::from(ref_name));
            } else if let (Some(old), Some(new)) = (caps.get(1), caps.get(2)) {
                let mut branches = match ret.get("updated branches") {
                    Some(Value::Map(m)) => Dict::from_map(m.clone()),
                    _ => Dict::default(),
                };
                let mut change = Dict::default();
                change.set("old", old.as_str());
                change.set("new", new.as_str());
                branches.set(ref_name, change.into_value());
                ret.set("updated branches", branches.into_value());
            } else {
                push(&mut ret, "updated tags", Value::from(ref_name));
            }
        }
        Ok(ret.into_value())
    }

    async fn remotes(&mut self, redact_auth: bool) -> Result<Value, FnError> {
        let out = self
            .out(strings(&["git", "remote", "--verbose"]), false)
            .await?;
        let mut ret = Dict::default();
        for line in out.split('\n') {
            let Some((remote, info)) = split_once_ws(line) else {
                continue;
            };
            let Some((url, action)) = rsplit_once_ws(info) else {
                continue;
            };
            let action = action
                .trim_start_matches('(')
                .trim_end_matches(')')
                .to_lowercase();
            if action != "fetch" && action != "push" {
                tracing::warn!("Unknown action '{action}' for remote '{remote}'");
                continue;
            }
            let url = if redact_auth {
                redact(url)
            } else {
                url.to_string()
            };
            let mut entry = match ret.get(remote) {
                Some(Value::Map(m)) => Dict::from_map(m.clone()),
                _ => Dict::default(),
            };
            entry.set(action, url);
            ret.set(remote, entry.into_value());
        }
        Ok(ret.into_value())
    }

    async fn remote_get(&mut self, remote: &str, redact_auth: bool) -> Result<Value, FnError> {
        let all = self.remotes(redact_auth).await?;
        match get(&all, remote) {
            Some(v) => Ok(v.clone()),
            None => Err(FnError::Execution(format!(
                "Remote '{remote}' not present in git checkout located at {}",
                self.cwd()
            ))),
        }
    }

    async fn remote_set(&mut self) -> Result<Value, FnError> {
        let remote = self.text_or("remote", "origin");
        let cwd = self.arg("cwd").map(py_str).unwrap_or_default();
        let ignore = self.ignore_retcode();
        let existing = self.remotes(true).await?;
        if get(&existing, &remote).is_some() {
            let command = strings(&["git", "remote", "rm", &remote]);
            self.git_run(command, Some(cwd.clone()), ignore, true, false)
                .await?;
        }
        let url = add_http_basic_auth(
            &self.text_or("url", ""),
            self.opt("https_user").map(py_str),
            self.opt("https_pass").map(py_str),
        )?;
        let command = strings(&["git", "remote", "add", &remote, &url]);
        self.git_run(command, Some(cwd.clone()), ignore, true, false)
            .await?;
        if let Some(push_url) = self.arg("push_url").filter(|u| py_truthy(u)).map(py_str) {
            let push_url = add_http_basic_auth(
                &push_url,
                self.opt("push_https_user").map(py_str),
                self.opt("push_https_pass").map(py_str),
            )?;
            let command = strings(&["git", "remote", "set-url", "--push", &remote, &push_url]);
            self.git_run(command, Some(cwd), ignore, true, false)
                .await?;
        }
        self.remote_get(&remote, true).await
    }

    async fn remote_refs(&mut self) -> Result<Value, FnError> {
        self.b.only_kwargs(&["filter"])?;
        let mut command = strings(&["git", "ls-remote"]);
        if self.flag("heads") {
            command.push("--heads".into());
        }
        if self.flag("tags") {
            command.push("--tags".into());
        }
        command.push(add_http_basic_auth(
            &self.text_or("url", ""),
            self.opt("https_user").map(py_str),
            self.opt("https_pass").map(py_str),
        )?);
        if let Some(filter) = self.b.kwarg("filter").filter(|f| py_truthy(f)) {
            command.push(py_str(filter));
        }
        self.identity_refused()?;
        let ignore = self.ignore_retcode();
        let out = self
            .git_run(command, None, ignore, true, false)
            .await?
            .stdout;
        let mut ret = Dict::default();
        for line in out.split('\n') {
            if let Some((sha, name)) = split_once_ws(line) {
                ret.set(name, sha);
            }
        }
        Ok(ret.into_value())
    }

    async fn ls_remote(&mut self) -> Result<Value, FnError> {
        let cwd = self
            .opt("cwd")
            .map(|c| expand_path(&py_str(c), self.user().as_deref()));
        let remote = add_http_basic_auth(
            &self.text_or("remote", "origin"),
            self.opt("https_user").map(py_str),
            self.opt("https_pass").map(py_str),
        )?;
        let mut command = self.git()?;
        command.push("ls-remote".into());
        command.extend(format_opts(self.arg("opts"))?);
        command.push(remote);
        if let Some(r) = self.arg("ref").filter(|r| py_truthy(r)) {
            command.push(py_str(r));
        }
        self.identity_refused()?;
        let ignore = self.ignore_retcode();
        let out = self
            .git_run(command, cwd, ignore, true, false)
            .await?
            .stdout;
        let mut ret = Dict::default();
        for line in splitlines(&out) {
            let Some((sha, name)) = split_once_ws(line) else {
                let got = usize::from(!line.trim().is_empty());
                return Err(FnError::Exception(format!(
                    "ValueError: not enough values to unpack (expected 2, got {got})"
                )));
            };
            ret.set(name, sha);
        }
        Ok(ret.into_value())
    }

    /// The repository a `git config` call works in: `cwd`, which only `global=True` may
    /// leave out.
    fn config_cwd(&self, global: bool) -> Result<Option<String>, FnError> {
        match self.opt("cwd") {
            None if !global => Err(FnError::Invocation(
                "'cwd' argument required unless global=True".into(),
            )),
            None => Ok(None),
            Some(_) => Ok(Some(self.cwd())),
        }
    }

    /// Salt's `_config_getter`: `None` when git says the key is not there (exit code 1).
    async fn config_getter(&mut self, get_opt: &str) -> Result<Option<Run>, FnError> {
        let global = self.kwarg_flag("global");
        let cwd = self.config_cwd(global)?;
        let mut command = strings(&["git", "config"]);
        command.push(if global { "--global" } else { "--local" }.into());
        command.push(get_opt.into());
        command.push(self.text_or("key", ""));
        if get_opt == "--get-regexp" {
            if let Some(re) = self.opt("value_regex") {
                command.push(py_str(re));
            }
        }
        let ignore = self.ignore_retcode();
        let run = self.git_run(command, cwd, ignore, false, false).await?;
        Ok((run.retcode != 1).then_some(run))
    }

    async fn config_get(&mut self, _key: &str, all: bool) -> Result<Value, FnError> {
        let Some(run) = self.config_getter("--get-all").await? else {
            return Ok(Value::Nil);
        };
        let values = splitlines(&run.stdout);
        if all {
            return Ok(lines(&run.stdout));
        }
        Ok(Value::from(values.last().copied().unwrap_or_default()))
    }

    async fn config_set(&mut self) -> Result<Value, FnError> {
        self.b.only_kwargs(&["add", "global"])?;
        let add = self.kwarg_flag("add");
        let global = self.kwarg_flag("global");
        let cwd = self.config_cwd(global)?;
        let value = self.opt("value").cloned();
        let multivar = self.opt("multivar").cloned();
        if value.is_some() && multivar.is_some() {
            return Err(FnError::Invocation(
                "Only one of 'value' and 'multivar' is permitted".into(),
            ));
        }
        let key = self.text_or("key", "");
        let mut prefix = strings(&["git", "config"]);
        if global {
            prefix.push("--global".into());
        }
        let ignore = self.ignore_retcode();
        let values: Vec<(bool, String)> = match (&value, &multivar) {
            (Some(v), _) => vec![(add, py_str(v))],
            (None, Some(Value::Array(items))) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (i > 0, py_str(v)))
                .collect(),
            (None, Some(other)) => py_str(other)
                .split(',')
                .enumerate()
                .map(|(i, v)| (i > 0, v.to_string()))
                .collect(),
            (None, None) => {
                // Salt iterates over None here.
                return Err(FnError::Exception(
                    "TypeError: 'NoneType' object is not iterable".into(),
                ));
            }
        };
        for (adding, v) in values {
            let mut command = prefix.clone();
            command.push(if adding { "--add" } else { "--replace-all" }.into());
            command.extend([key.clone(), v]);
            self.git_run(command, cwd.clone(), ignore, true, false)
                .await?;
        }
        let Some(run) = self.config_getter("--get-all").await? else {
            return Ok(Value::Nil);
        };
        Ok(lines(&run.stdout))
    }

    async fn config_unset(&mut self) -> Result<Value, FnError> {
        self.b.only_kwargs(&["all", "global"])?;
        let all = self.kwarg_flag("all");
        let global = self.kwarg_flag("global");
        let cwd = self.config_cwd(global)?;
        let key = self.text_or("key", "");
        let value_regex = self.opt("value_regex").map(py_str);
        let mut command = strings(&["git", "config"]);
        command.push(if all { "--unset-all" } else { "--unset" }.into());
        command.push(if global { "--global" } else { "--local" }.into());
        command.push(key.clone());
        command.extend(value_regex.clone());
        let ignore = self.ignore_retcode();
        let run = self.git_run(command, cwd, ignore, false, false).await?;
        let why = match run.retcode {
            0 => return Ok(Value::Boolean(true)),
            1 => "Section or key is invalid".to_string(),
            5 if self.config_get(&key, false).await?.is_nil() => {
                format!("Key '{key}' does not exist")
            }
            5 => {
                let mut msg = format!("Multiple values exist for key '{key}'");
                if value_regex.is_some() {
                    msg.push_str(" and value_regex matches multiple values");
                }
                msg
            }
            6 => "The value_regex is invalid".to_string(),
            code => {
                let mut msg =
                    format!("Failed to unset key '{key}', git config returned exit code {code}");
                if !run.stderr.is_empty() {
                    msg.push_str(&format!("; {}", run.stderr));
                }
                msg
            }
        };
        Err(FnError::Execution(why))
    }

    async fn is_worktree(&mut self) -> bool {
        let cwd = self.cwd();
        let command = strings(&["git", "rev-parse", "--show-toplevel"]);
        let Ok(run) = self.git_run(command, Some(cwd), true, true, false).await else {
            return false;
        };
        let gitdir = std::path::Path::new(&run.stdout).join(".git");
        let Ok(text) = std::fs::read_to_string(gitdir) else {
            return false;
        };
        let Some(line) = text.split_inclusive('\n').next() else {
            return false;
        };
        match split_once_ws(line) {
            Some((label, path)) => label == "gitdir:" && path.starts_with('/'),
            None => false,
        }
    }

    async fn diff(&mut self) -> Result<Value, FnError> {
        let no_index = self.flag("no_index");
        let cached = self.flag("cached");
        if no_index && cached {
            return Err(FnError::Execution(
                "The 'no_index' and 'cached' options cannot be used together".into(),
            ));
        }
        let mut command = self.git()?;
        command.push("diff".into());
        command.extend(format_opts(self.arg("opts"))?);
        let paths = self.opt("paths").map(comma_list);
        let item = |k: &str| self.arg(k).filter(|v| py_truthy(v)).map(py_str);
        let (item1, item2) = (item("item1"), item("item2"));
        let (mut ignore, mut failhard) = (false, true);
        if no_index {
            ignore = true;
            failhard = false;
            command.push("--no-index".into());
            for v in [&item1, &item2].into_iter().flatten() {
                tracing::warn!("Revision '{v}' ignored in git diff, as revisions cannot be used when no_index=True");
            }
        } else if cached {
            command.push("--cached".into());
            command.extend(item1);
            if let Some(v) = item2 {
                tracing::warn!("Second revision '{v}' ignored in git diff, at most one revision is considered when cached=True");
            }
        } else {
            command.extend(item1);
            command.extend(item2);
        }
        if let Some(paths) = paths.filter(|p| !p.is_empty()) {
            command.push("--".into());
            command.extend(paths);
        }
        // Salt runs git diff in cwd as given (no expansion of a relative path).
        let cwd = self.arg("cwd").map(py_str);
        let run = self.git_run(command, cwd, ignore, failhard, true).await?;
        Ok(Value::from(run.stdout))
    }

    async fn merge_base(&mut self) -> Result<Value, FnError> {
        self.b.only_kwargs(&["all"])?;
        let all = self.kwarg_flag("all");
        let octopus = self.flag("octopus");
        let is_ancestor = self.flag("is_ancestor");
        let independent = self.flag("independent");
        let fork_point = self.arg("fork_point").filter(|f| py_truthy(f)).map(py_str);
        if all && (independent || is_ancestor || fork_point.is_some()) {
            return Err(FnError::Invocation(
                "The 'all' argument is not compatible with 'independent', 'is_ancestor', or 'fork_point'".into(),
            ));
        }
        let mut refs: Vec<String> = match self.opt("refs") {
            None => Vec::new(),
            Some(Value::Array(items)) => items.iter().map(py_str).collect(),
            Some(other) => py_str(other)
                .split(',')
                .map(|r| r.trim().to_string())
                .collect(),
        };
        let exclusive = [octopus, independent, is_ancestor, fork_point.is_some()]
            .iter()
            .filter(|x| **x)
            .count();
        if exclusive > 1 {
            return Err(FnError::Invocation(
                "Only one of 'octopus', 'independent', 'is_ancestor', and 'fork_point' is permitted".into(),
            ));
        } else if is_ancestor {
            if refs.len() != 2 {
                return Err(FnError::Invocation(
                    "Two refs/commits are required if 'is_ancestor' is True".into(),
                ));
            }
        } else if fork_point.is_some() {
            if refs.len() > 1 {
                return Err(FnError::Invocation(
                    "At most one ref/commit can be passed if 'fork_point' is specified".into(),
                ));
            } else if refs.is_empty() {
                refs.push("HEAD".into());
            }
        }
        let mut command = self.git()?;
        command.push("merge-base".into());
        command.extend(format_opts(self.arg("opts"))?);
        if all {
            command.push("--all".into());
        }
        if octopus {
            command.push("--octopus".into());
        } else if is_ancestor {
            command.push("--is-ancestor".into());
        } else if independent {
            command.push("--independent".into());
        } else if let Some(fp) = fork_point {
            command.extend(["--fork-point".to_string(), fp]);
        }
        command.extend(refs);
        let cwd = self.cwd();
        let ignore = self.ignore_retcode();
        let run = self
            .git_run(command, Some(cwd), ignore, !is_ancestor, false)
            .await?;
        if is_ancestor {
            return Ok(Value::Boolean(run.retcode == 0));
        }
        let bases = splitlines(&run.stdout);
        if all {
            return Ok(lines(&run.stdout));
        }
        bases
            .first()
            .map(|b| Value::from(*b))
            .ok_or_else(|| FnError::Exception("IndexError: list index out of range".into()))
    }
}

impl Dict {
    fn from_map(entries: Vec<(Value, Value)>) -> Dict {
        let mut d = Dict::default();
        for (k, v) in entries {
            d.set(k, v);
        }
        d
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn lines(text: &str) -> Value {
    Value::Array(splitlines(text).into_iter().map(Value::from).collect())
}

/// `ret.setdefault(key, []).append(item)`.
fn push(ret: &mut Dict, key: &str, item: Value) {
    let mut items = match ret.get(key) {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    items.push(item);
    ret.set(key, Value::Array(items));
}

/// A list argument Salt also takes as comma-separated text.
fn comma_list(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(py_str).collect(),
        other => py_str(other).split(',').map(str::to_string).collect(),
    }
}

/// Python's `s.split(None, 1)` when it gives two parts.
fn split_once_ws(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start();
    let end = s.find(char::is_whitespace)?;
    let rest = s[end..].trim_start();
    if rest.is_empty() {
        return None;
    }
    Some((&s[..end], rest))
}

/// Python's `s.rsplit(None, 1)` when it gives two parts.
fn rsplit_once_ws(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_end();
    let start = s.rfind(char::is_whitespace)?;
    let head = s[..start].trim_end();
    if head.is_empty() {
        return None;
    }
    Some((head, s[start..].trim_start()))
}

/// Salt's `_format_opts`: a list's items as text, a text split as a shell would (without
/// a trailing `--`), anything else as its text.
pub(crate) fn format_opts(opts: Option<&Value>) -> Result<Vec<String>, FnError> {
    let mut out = match opts {
        None | Some(Value::Nil) => return Ok(Vec::new()),
        Some(Value::Array(items)) => return Ok(items.iter().map(py_str).collect()),
        Some(v @ Value::String(_)) => {
            shlex_split(&py_str(v)).map_err(|e| FnError::Exception(format!("ValueError: {e}")))?
        }
        Some(other) => vec![py_str(other)],
    };
    if out.last().is_some_and(|l| l == "--") {
        out.pop();
    }
    Ok(out)
}

/// Salt's `salt.utils.url.redact_http_basic_auth`.
pub(crate) fn redact(text: &str) -> String {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"(?i)(https?)://.*@").expect("static regex is valid"));
    re.replace_all(text, "${1}://<redacted>@").into_owned()
}

/// Python's `urllib.parse.quote(text, safe='')`.
fn quote(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Salt's `add_http_basic_auth(url, user, password, https_only=True)`.
fn add_http_basic_auth(
    url: &str,
    user: Option<String>,
    password: Option<String>,
) -> Result<String, FnError> {
    if user.is_none() && password.is_none() {
        return Ok(url.to_string());
    }
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) if !s.is_empty() => (s.to_lowercase(), r),
        _ => (String::new(), url),
    };
    if scheme != "https" {
        return Err(FnError::Invocation(
            "Basic Auth only supported for HTTPS".into(),
        ));
    }
    let user = quote(&user.unwrap_or_else(|| "None".into()));
    let creds = match password {
        None => user,
        Some(p) => format!("{user}:{}", quote(&p)),
    };
    Ok(format!("https://{creds}@{rest}"))
}

/// Salt's `_expand_path`: a relative cwd is under the user's home (`~user`).
fn expand_path(cwd: &str, user: Option<&str>) -> String {
    if cwd.starts_with('/') {
        return cwd.to_string();
    }
    let home = match user {
        Some(name) => nix::unistd::User::from_name(name)
            .ok()
            .flatten()
            .map(|u| u.dir.to_string_lossy().into_owned())
            .unwrap_or_else(|| format!("~{name}")),
        None => std::env::var("HOME").unwrap_or_else(|_| "~".into()),
    };
    if cwd.is_empty() {
        return format!("{}/", home.trim_end_matches('/'));
    }
    format!("{}/{cwd}", home.trim_end_matches('/'))
}

fn os_error(e: &std::io::Error) -> String {
    let errno = e.raw_os_error().unwrap_or(0);
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    format!("[Errno {errno}] {text}")
}

#[cfg(test)]
mod tests;
