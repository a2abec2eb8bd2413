use super::*;
use crate::functions::network::tests::{brine, Outcome, SaltCall};
use serde_json::Value as J;
use std::path::Path;
use std::process::Command;

/// Run git in `dir` with no user or system configuration and fixed identities and dates,
/// so that the same steps give the same commits.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Up Stream")
        .env("GIT_AUTHOR_EMAIL", "up@example.com")
        .env("GIT_COMMITTER_NAME", "Up Stream")
        .env("GIT_COMMITTER_EMAIL", "up@example.com")
        .env("GIT_AUTHOR_DATE", "2024-01-02T03:04:05Z")
        .env("GIT_COMMITTER_DATE", "2024-01-02T03:04:05Z")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// An upstream repository at `dir`: two commits on main, a branch dev, tags v1
/// (lightweight) and v2 (annotated).
fn upstream(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    git(dir, &["tag", "v1"]);
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
    git(dir, &["commit", "-q", "-am", "second"]);
    git(dir, &["tag", "-a", "-m", "version 2", "v2"]);
    git(dir, &["branch", "dev", "HEAD~1"]);
}

/// What may differ between the two runs: the work directory, the commits made during the
/// run (their dates differ).
fn mask(v: &mut J, work: &str) {
    static SHA: OnceLock<Regex> = OnceLock::new();
    let sha = SHA.get_or_init(|| Regex::new(r"\b[0-9a-f]{7,40}\b").unwrap());
    match v {
        J::String(s) => *s = sha.replace_all(&s.replace(work, "{R}"), "<sha>").into_owned(),
        J::Array(items) => items.iter_mut().for_each(|i| mask(i, work)),
        J::Object(m) => {
            let entries: Vec<(String, J)> = std::mem::take(m).into_iter().collect();
            for (k, mut val) in entries {
                mask(&mut val, work);
                let k = sha.replace_all(&k.replace(work, "{R}"), "<sha>").into_owned();
                m.insert(k, val);
            }
        }
        _ => {}
    }
}

const AS: &str = "git_opts=-c user.name=Tester -c user.email=t@example.com";

/// The calls, `{R}` standing for each side's own work directory (with its own upstream,
/// built the same way). They run in order: some change the checkouts the next ones read.
fn cases() -> Vec<Vec<&'static str>> {
    vec![
        vec!["git.version"],
        vec!["git.init", "{R}/new"],
        vec!["git.init", "{R}/bare.git", "bare=True"],
        vec!["git.init", "{R}/shared", "shared=group", "opts=-q"],
        vec!["git.clone", "{R}/c", "url=file://{R}/up"],
        vec!["git.clone", "{R}", "url=file://{R}/up", "name=c2"],
        vec!["git.clone", "{R}/bad", "url=file:///nonexistent/repo"],
        vec!["git.clone", "{R}/x"],
        vec!["git.clone", "{R}/c3", "url=https://u:secret@127.0.0.1:1/x.git"],
        vec!["git.clone", "{R}/c4", "url=file://{R}/up", "https_user=u"],
        vec!["git.rev_parse", "{R}/c", "HEAD"],
        vec!["git.rev_parse", "{R}/c", "opts=--abbrev-ref HEAD"],
        vec!["git.rev_parse", "{R}/c", "opts=['--git-dir']"],
        vec!["git.revision", "{R}/c"],
        vec!["git.revision", "{R}/c", "short=True"],
        vec!["git.revision", "{R}/c", "rev=v2"],
        vec!["git.revision", "{R}/c", "rev=nope"],
        vec!["git.revision", "/nonexistent"],
        vec!["git.revision", "{R}"],
        vec!["git.current_branch", "{R}/c"],
        vec!["git.describe", "{R}/c"],
        vec!["git.describe", "{R}/c", "dev"],
        vec!["git.list_branches", "{R}/c"],
        vec!["git.list_branches", "{R}/c", "remote=True"],
        vec!["git.list_tags", "{R}/c"],
        vec!["git.ls_remote", "{R}/c"],
        vec!["git.ls_remote", "{R}/c", "origin", "refs/heads/main"],
        vec!["git.ls_remote", "remote=file://{R}/up", "opts=--heads"],
        vec!["git.remote_refs", "file://{R}/up"],
        vec!["git.remote_refs", "file://{R}/up", "tags=True"],
        vec!["git.remotes", "{R}/c"],
        vec!["git.remote_get", "{R}/c"],
        vec!["git.remote_get", "{R}/c", "nope"],
        vec!["git.remote_set", "{R}/c", "https://user:pw@127.0.0.1/x.git", "remote=up2"],
        vec!["git.remotes", "{R}/c"],
        vec!["git.remotes", "{R}/c", "redact_auth=False"],
        vec!["git.remote_set", "{R}/c", "file://{R}/up", "remote=up2", "push_url=file:///push"],
        vec!["git.config_get", "user.name", "cwd={R}/c"],
        vec!["git.config_set", "user.name", "Tester", "cwd={R}/c"],
        vec!["git.config_set", "foo.bar", "multivar=a,b", "cwd={R}/c"],
        vec!["git.config_set", "foo.bar", "c", "cwd={R}/c", "add=True"],
        vec!["git.config_get", "foo.bar", "cwd={R}/c"],
        vec!["git.config_get", "foo.bar", "cwd={R}/c", "all=True"],
        vec!["git.config_get", "foo.bar"],
        vec!["git.config_get", "foo.bar", "cwd={R}/c", "bogus=1"],
        vec!["git.config_set", "foo.baz", "1", "multivar=x", "cwd={R}/c"],
        vec!["git.config_get_regexp", "^foo", "cwd={R}/c"],
        vec!["git.config_get_regexp", "^foo", "b", "cwd={R}/c"],
        vec!["git.config_get_regexp", "^nothing", "cwd={R}/c"],
        vec!["git.status", "{R}/c"],
        vec!["file.write", "{R}/c/new.txt", "hello"],
        vec!["file.write", "{R}/c/a.txt", "changed"],
        vec!["git.status", "{R}/c"],
        vec!["git.diff", "{R}/c"],
        vec!["git.add", "{R}/c", "new.txt"],
        vec!["git.add", "{R}/c", "nope.txt"],
        vec!["git.status", "{R}/c"],
        vec!["git.diff", "{R}/c", "cached=True"],
        vec!["git.diff", "{R}/c", "no_index=True", "cached=True"],
        vec!["git.diff", "{R}/c", "HEAD~1", "HEAD", "paths=a.txt"],
        vec!["git.discard_local_changes", "{R}/c", "a.txt"],
        vec!["git.commit", "{R}/c", "a message", AS],
        vec!["git.commit", "{R}/c", "nothing", AS],
        vec!["git.checkout", "{R}/c"],
        vec!["git.checkout", "{R}/c", "dev"],
        vec!["git.checkout", "{R}/c", "opts=-b feature"],
        vec!["git.current_branch", "{R}/c"],
        vec!["git.checkout", "{R}/c", "nope"],
        vec!["git.reset", "{R}/c", "opts=--hard HEAD~1"],
        vec!["git.checkout", "{R}/c", "main", "force=True"],
        vec!["git.pull", "{R}/c"],
        vec!["git.merge_base", "{R}/c", "refs=HEAD~1,HEAD", "is_ancestor=True"],
        vec!["git.merge_base", "{R}/c", "refs=HEAD,HEAD~1", "is_ancestor=True"],
        vec!["git.merge_base", "{R}/c", "refs=dev,main"],
        vec!["git.merge_base", "{R}/c", "refs=HEAD", "is_ancestor=True"],
        vec!["git.symbolic_ref", "{R}/c", "HEAD"],
        vec!["git.tag", "{R}/c", "t1"],
        vec!["git.tag", "{R}/c", "t2", "message=annotated"],
        vec!["git.tag", "{R}/c", "t3", "opts=-m x"],
        vec!["git.branch", "{R}/c", "newb"],
        vec!["git.branch", "{R}/c", "newb"],
        vec!["git.is_worktree", "{R}/c"],
        vec!["git.is_worktree", "{R}"],
        // The upstream moves: a commit, a new tag, a new branch.
        vec!["file.write", "{R}/up/b.txt", "more"],
        vec!["git.add", "{R}/up", "b.txt"],
        vec!["git.commit", "{R}/up", "third", AS],
        vec!["git.tag", "{R}/up", "v3"],
        vec!["git.branch", "{R}/up", "topic"],
        vec!["git.fetch", "{R}/c2"],
        vec!["git.fetch", "{R}/c2"],
        vec!["git.fetch", "{R}/c2", "origin", "refspecs=+refs/tags/*:refs/tags/*", "force=True"],
        vec!["git.pull", "{R}/c"],
        vec!["git.fetch", "{R}/c", "nowhere"],
        vec!["git.merge", "{R}/c2", "rev=origin/main", "opts=--ff-only"],
        vec!["git.merge", "{R}/c2", "bogus=1"],
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_calls_return_what_salt_3007_returns() {
    let Some(salt) = SaltCall::new() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let (salt_dir, brine_dir) = (root.join("salt"), root.join("brine"));
    upstream(&salt_dir.join("up"));
    upstream(&brine_dir.join("up"));
    let (salt_work, brine_work) = (
        salt_dir.display().to_string(),
        brine_dir.display().to_string(),
    );
    let mut failures = Vec::new();
    for case in cases() {
        let args = |work: &str| -> Vec<String> {
            case.iter().map(|a| a.replace("{R}", work)).collect()
        };
        let salt_args = args(&salt_work);
        let brine_args = args(&brine_work);
        let words: Vec<&str> = salt_args[1..].iter().map(String::as_str).collect();
        let mut want = tokio::task::block_in_place(|| salt.run(&salt_args[0], &words));
        let words: Vec<&str> = brine_args[1..].iter().map(String::as_str).collect();
        let mut got: Outcome = brine(&brine_args[0], &words).await;
        mask(&mut want.ret, &salt_work);
        mask(&mut got.ret, &brine_work);
        // salt-call words a SaltInvocationError as a TypeError; a minion's job return as
        // `ERROR executing '<fun>': <message>`.
        let invocation = format!("ERROR executing '{}': ", case[0]);
        if let (Some(w), Some(g)) = (want.ret.as_str(), got.ret.as_str()) {
            if let (Some(w), Some(g)) = (
                w.strip_prefix("Passed invalid arguments: "),
                g.strip_prefix(&invocation),
            ) {
                if w.strip_suffix('.') == Some(g) {
                    got.ret = want.ret.clone();
                }
            }
        }
        if got != want {
            failures.push(format!("{case:?}\n  salt:  {want:?}\n  brine: {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn options_urls_and_paths_are_read_as_salt_reads_them() {
    let s = |t: &str| Value::from(t);
    assert_eq!(format_opts(None).unwrap(), Vec::<String>::new());
    assert_eq!(format_opts(Some(&s(""))).unwrap(), Vec::<String>::new());
    assert_eq!(
        format_opts(Some(&s("--hard 'a b' --"))).unwrap(),
        vec!["--hard", "a b"]
    );
    assert_eq!(
        format_opts(Some(&Value::Array(vec![s("--"), Value::from(3)]))).unwrap(),
        vec!["--", "3"]
    );
    assert_eq!(format_opts(Some(&Value::from(5))).unwrap(), vec!["5"]);
    assert_eq!(
        redact("fatal: https://u:p@host/x and HTTP://a@b"),
        "fatal: https://<redacted>@b"
    );
    assert_eq!(redact("file:///a@b"), "file:///a@b");
    assert_eq!(
        add_http_basic_auth("https://h/x.git", Some("u s".into()), Some("p@".into())).unwrap(),
        "https://u%20s:p%40@h/x.git"
    );
    assert_eq!(
        add_http_basic_auth("file:///x", Some("u".into()), None).unwrap_err(),
        FnError::Invocation("Basic Auth only supported for HTTPS".into())
    );
    assert_eq!(split_once_ws("  a  b c "), Some(("a", "b c ")));
    assert_eq!(split_once_ws("a"), None);
    assert_eq!(rsplit_once_ws("url x (fetch) "), Some(("url x", "(fetch)")));
    assert_eq!(expand_path("/abs", Some("nobody-here")), "/abs");
    assert_eq!(expand_path("rel", Some("no-such-user-x")), "~no-such-user-x/rel");
}
