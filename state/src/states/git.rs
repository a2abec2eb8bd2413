//! The `git` state module: `git.latest` and `git.config_set`, through the minion's `git` execution module, with
//! Salt's decisions (clone, fetch, fast-forward, hard reset, branch checkout, upstream
//! tracking, tags), comments and changes.
//!
//! Refused with a failed result rather than ignored: `identity` (SSH keys through Salt's
//! wrapper), `bare` and `mirror`, and `submodules=True` (the minion has no
//! `git.submodule`).

use serde_json::{json, Map, Value};

use super::{exc_text as strerror, ret, Accepts, Call, Spec};
use crate::verify::py_text;
use brine_protocol::payload::json_truthy;

pub const FUNCTIONS: &[Spec] = &[
    Spec {
        name: "latest",
        required: &["name", "target"],
        accepts: Accepts::Any,
        run: latest,
    },
    Spec {
        name: "config_set",
        required: &["name"],
        accepts: Accepts::Any,
        run: config_set,
    },
    Spec {
        name: "cloned",
        required: &["name", "target"],
        accepts: Accepts::Only(&[
            "name",
            "target",
            "branch",
            "user",
            "password",
            "identity",
            "https_user",
            "https_pass",
            "output_encoding",
        ]),
        run: cloned,
    },
];

/// `git.cloned`: the repository cloned to `target` unless something is there already, and
/// checked out to `branch` when one is given (a local branch made from `origin/<branch>`
/// when there is none), as Salt's.
fn cloned(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let mut out = ret(&name, json!(false), "", json!({}));
    let mut finish = |result: Value, comment: String, changes: Value| {
        out.insert("result".into(), result);
        out.insert("comment".into(), json!(comment));
        if let Value::Object(m) = changes {
            out.insert("changes".into(), Value::Object(m));
        }
        Ok(out.clone())
    };
    let target = match c.low.get("target") {
        None | Some(Value::Null) => {
            return finish(
                json!(false),
                "'target' argument is required".into(),
                Value::Null,
            )
        }
        Some(t) => py_text(t),
    };
    if !target.starts_with('/') {
        return finish(
            json!(false),
            "'target' path must be absolute".into(),
            Value::Null,
        );
    }
    let branch = c.arg("branch").map(py_text);
    if branch.as_deref() == Some("") {
        return finish(
            json!(false),
            "Invalid 'branch' argument".into(),
            Value::Null,
        );
    }
    let mut kw = Map::new();
    for key in ["user", "password", "output_encoding"] {
        kw.insert(key.into(), c.low.get(key).cloned().unwrap_or(Value::Null));
    }
    let with_branch = branch
        .as_ref()
        .map_or(String::new(), |b| format!(" with branch '{b}'"));
    let new = json!({"new": format!("{name} => {target}")});
    if !std::path::Path::new(&target).exists() {
        if c.test {
            return finish(
                Value::Null,
                format!("{name} would be cloned to {target}{with_branch}"),
                new,
            );
        }
        let mut clone_kw = kw.clone();
        for key in ["identity", "https_user", "https_pass"] {
            clone_kw.insert(key.into(), c.low.get(key).cloned().unwrap_or(Value::Null));
        }
        clone_kw.insert(
            "opts".into(),
            branch
                .as_ref()
                .map_or(Value::Null, |b| json!(["--branch", b])),
        );
        if let Err(e) = c
            .host
            .call("git.clone", &[json!(target), json!(name)], &clone_kw)
        {
            return finish(
                json!(false),
                format!("Clone failed: {}", strip_exc(&e)),
                Value::Null,
            );
        }
        return finish(
            json!(true),
            format!("{name} cloned to {target}{with_branch}"),
            new,
        );
    }
    if let Err(e) = c.host.call("git.status", &[json!(target)], &kw) {
        return finish(json!(false), strerror(&e).to_string(), Value::Null);
    }
    let already = |b: Option<&str>| {
        let on = b.map_or(String::new(), |b| {
            format!(" and is checked out to branch '{b}'")
        });
        format!("Repository already exists at {target}{on}")
    };
    let Some(branch) = branch else {
        return finish(json!(true), already(None), Value::Null);
    };
    let current = c
        .host
        .call("git.current_branch", &[json!(target)], &kw)
        .map_err(|e| strerror(&e).to_string())?;
    if current.as_str() == Some(branch.as_str()) {
        return finish(json!(true), already(Some(&branch)), Value::Null);
    }
    let moved = json!({"branch": {"old": current, "new": branch}});
    if c.test {
        return finish(
            Value::Null,
            format!("Branch would be changed to '{branch}'"),
            moved,
        );
    }
    let mut parse_kw = kw.clone();
    parse_kw.insert("rev".into(), json!(branch));
    parse_kw.insert("ignore_retcode".into(), json!(true));
    let (rev, opts) = match c.host.call("git.rev_parse", &[json!(target)], &parse_kw) {
        Ok(_) => (branch.clone(), Value::Null),
        Err(_) => (format!("origin/{branch}"), json!(["-b", branch])),
    };
    let mut checkout_kw = kw;
    checkout_kw.insert("rev".into(), json!(rev));
    checkout_kw.insert("opts".into(), opts);
    if let Err(e) = c.host.call("git.checkout", &[json!(target)], &checkout_kw) {
        return finish(
            json!(false),
            format!("Failed to change branch to '{branch}': {}", strerror(&e)),
            Value::Null,
        );
    }
    finish(json!(true), format!("Branch changed to '{branch}'"), moved)
}

/// The parameters of Salt's `git.config_set` (`global` comes through its `**kwargs`).
const CONFIG_SET_PARAMS: &[&str] = &[
    "name",
    "value",
    "multivar",
    "repo",
    "user",
    "password",
    "output_encoding",
    "global",
];

/// `git.config_set`: a git configuration key (of a repository, or the user's global one)
/// given one value or, with `multivar`, several.
fn config_set(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let out = ret(&name, json!(true), "", json!({}));
    let fail = |mut out: Map<String, Value>, msg: String| {
        out.insert("result".into(), json!(false));
        out.insert("comment".into(), json!(msg));
        Ok(out)
    };
    let (value, multivar) = (c.arg("value"), c.arg("multivar"));
    if value.is_some() && multivar.is_some() {
        return fail(
            out,
            "Only one of 'value' and 'multivar' is permitted".into(),
        );
    }
    let invalid: Vec<String> = c
        .state_kwargs()
        .into_iter()
        .filter(|(k, _)| !k.starts_with("__") && !CONFIG_SET_PARAMS.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={}", py_text(v)))
        .collect();
    if !invalid.is_empty() {
        let msg = format!(
            "The following keyword arguments are not valid: {}",
            invalid.join(", ")
        );
        return fail(out, msg);
    }
    let global = c.flag("global", false);
    let repo = c.arg("repo").filter(|r| json_truthy(r)).cloned();
    if !global && repo.is_none() {
        let msg = "Non-global config options require the 'repo' argument to be set";
        return fail(out, msg.into());
    }
    let (desired, shown): (Vec<String>, String) = match (value, multivar) {
        (Some(v), _) => {
            let v = py_text(v);
            (vec![v.clone()], format!("'{v}'"))
        }
        (None, Some(Value::Array(items))) => {
            let items: Vec<String> = items.iter().map(py_text).collect();
            let shown = crate::verify::sls_text(&json!(items));
            (items, shown)
        }
        (None, Some(other)) => {
            let items: Vec<String> = py_text(other).split(',').map(str::to_string).collect();
            let shown = crate::verify::sls_text(&json!(items));
            (items, shown)
        }
        (None, None) => (Vec::new(), String::new()),
    };
    let scope = if global { "Global key " } else { "" };
    let mut kw = Map::new();
    for key in ["user", "password", "output_encoding"] {
        kw.insert(key.into(), c.low.get(key).cloned().unwrap_or(Value::Null));
    }
    kw.insert("global".into(), json!(global));
    kw.insert("cwd".into(), repo.clone().unwrap_or(Value::Null));
    kw.insert("key".into(), json!(name));
    let mut get = kw.clone();
    get.insert("ignore_retcode".into(), json!(true));
    get.insert("all".into(), json!(true));
    let pre = c.host.call("git.config_get", &[], &get)?;
    if pre == json!(desired) {
        let comment = format!("{scope}'{name}' is already set to {shown}");
        let mut out = out;
        out.insert("comment".into(), json!(comment));
        return Ok(out);
    }
    let how = if pre.is_null() { "added as" } else { "set to" };
    if c.test {
        let mut out = out;
        out.insert("changes".into(), json!({"old": pre, "new": desired}));
        out.insert("result".into(), Value::Null);
        out.insert(
            "comment".into(),
            json!(format!("{scope}'{name}' would be {how} {shown}")),
        );
        return Ok(out);
    }
    kw.insert("value".into(), value.cloned().unwrap_or(Value::Null));
    kw.insert(
        "multivar".into(),
        if multivar.is_some() {
            json!(desired)
        } else {
            Value::Null
        },
    );
    let lower = scope.to_lowercase();
    let post = match c.host.call("git.config_set", &[], &kw) {
        Ok(post) => post,
        Err(e) => {
            let msg = format!(
                "Failed to set {lower}'{name}' to {shown}: {}",
                strip_exc(&e)
            );
            return fail(out, msg);
        }
    };
    let mut out = out;
    if pre != post {
        out.insert(
            "changes".into(),
            json!({ name.clone(): {"old": pre, "new": post} }),
        );
    }
    if post != json!(desired) {
        return fail(out, format!("Failed to set {lower}'{name}' to {shown}"));
    }
    out.insert(
        "comment".into(),
        json!(format!("{scope}'{name}' was {how} {shown}")),
    );
    Ok(out)
}

/// The parameters of Salt's `git.latest`.
const LATEST_PARAMS: &[&str] = &[
    "name",
    "target",
    "rev",
    "branch",
    "user",
    "password",
    "update_head",
    "force_checkout",
    "force_clone",
    "force_fetch",
    "force_reset",
    "submodules",
    "bare",
    "mirror",
    "remote",
    "fetch_tags",
    "sync_tags",
    "depth",
    "identity",
    "https_user",
    "https_pass",
    "refspec_branch",
    "refspec_tag",
    "output_encoding",
];

/// Salt's `_strip_exc`: an error without its `Command '...' failed: ` head.
fn strip_exc(err: &str) -> String {
    let err = strerror(err);
    match err.strip_prefix("Command ") {
        Some(rest) if rest.starts_with(['\'', '"']) => {
            let first_line = rest.split('\n').next().unwrap_or_default();
            // The longest `'...' failed: ` head on the first line, as Python's greedy regex.
            let mut cut = None;
            for (i, _) in first_line
                .match_indices("' failed: ")
                .chain(first_line.match_indices("\" failed: "))
            {
                if i >= 1 {
                    cut = Some(cut.map_or(i, |c: usize| c.max(i)));
                }
            }
            match cut {
                Some(i) => rest[i + "' failed: ".len()..].to_string(),
                None => err.to_string(),
            }
        }
        _ => err.to_string(),
    }
}

fn short(sha: Option<&str>) -> Option<String> {
    sha.map(|s| s.chars().take(7).collect())
}

fn short_text(sha: Option<&str>) -> String {
    short(sha).unwrap_or_else(|| "None".into())
}

fn format_comments(comments: &[String]) -> String {
    let mut out = comments.join(". ");
    if comments.len() > 1 {
        out.push('.');
    }
    out
}

fn revs_equal(a: Option<&str>, b: Option<&str>, rev_type: Option<&str>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            if rev_type == Some("sha1") {
                a.starts_with(b)
            } else {
                a == b
            }
        }
        _ => false,
    }
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(f) => f
            .to_uppercase()
            .chain(chars.flat_map(char::to_lowercase))
            .collect(),
        None => String::new(),
    }
}

/// One run of `git.latest`.
struct Latest<'a> {
    c: &'a Call<'a>,
    out: Map<String, Value>,
    changes: Map<String, Value>,
    comments: Vec<String>,
    user: Option<String>,
    password: Option<String>,
}

impl Latest<'_> {
    fn call(&self, fun: &str, args: &[Value], kwargs: &[(&str, Value)]) -> Result<Value, String> {
        let mut kw = Map::new();
        for (k, v) in kwargs {
            kw.insert(k.to_string(), v.clone());
        }
        if let Some(u) = &self.user {
            kw.insert("user".into(), json!(u));
        }
        if let Some(p) = &self.password {
            kw.insert("password".into(), json!(p));
        }
        if let Some(enc) = self.c.arg("output_encoding") {
            kw.insert("output_encoding".into(), enc.clone());
        }
        self.c.host.call(fun, args, &kw)
    }

    fn text_call(
        &self,
        fun: &str,
        args: &[Value],
        kwargs: &[(&str, Value)],
    ) -> Result<String, String> {
        self.call(fun, args, kwargs).map(|v| py_text(&v))
    }

    fn list(&self, fun: &str, target: &str) -> Result<Vec<String>, String> {
        let v = self.call(fun, &[json!(target)], &[])?;
        Ok(v.as_array()
            .map(|a| a.iter().map(py_text).collect())
            .unwrap_or_default())
    }

    fn rev_parse(&self, target: &str, rev: &str, opts: Option<Value>) -> Result<String, String> {
        let mut kw = vec![("ignore_retcode", json!(true))];
        if let Some(o) = opts {
            kw.push(("opts", o));
        }
        self.text_call("git.rev_parse", &[json!(target), json!(rev)], &kw)
    }

    fn local_rev_and_branch(&self, target: &str) -> (Option<String>, Option<String>) {
        let ign = [("ignore_retcode", json!(true))];
        let rev = self.text_call("git.revision", &[json!(target)], &ign).ok();
        let branch = self
            .text_call("git.current_branch", &[json!(target)], &ign)
            .ok();
        (rev, branch)
    }

    fn finish(mut self) -> Map<String, Value> {
        self.out
            .insert("changes".into(), Value::Object(self.changes));
        self.out
    }

    fn fail(mut self, msg: impl Into<String>, with_comments: bool) -> Map<String, Value> {
        let mut msg = msg.into();
        if with_comments && !self.comments.is_empty() {
            msg.push_str("\n\nChanges already made: ");
            msg.push_str(&format_comments(&self.comments));
        }
        self.out.insert("result".into(), json!(false));
        self.out.insert("comment".into(), json!(msg));
        self.finish()
    }

    fn neutral(mut self, comment: impl Into<String>) -> Map<String, Value> {
        self.out.insert("result".into(), Value::Null);
        self.out.insert("comment".into(), json!(comment.into()));
        self.finish()
    }

    fn comment(mut self, comment: impl Into<String>) -> Map<String, Value> {
        self.out.insert("comment".into(), json!(comment.into()));
        self.finish()
    }

    fn uptodate(self, target: &str, actions: &[String], local_changes: bool) -> Map<String, Value> {
        let mut msg = format!("Repository {target} is up-to-date");
        if local_changes {
            msg.push_str(", but with uncommitted changes. Set 'force_reset' to True to purge uncommitted changes.");
        }
        if !actions.is_empty() {
            msg.push_str(&format!(
                "\n\nChanges {}made: {}",
                if self.c.test { "that would be " } else { "" },
                format_comments(actions)
            ));
        }
        self.comment(msg)
    }
}

/// What the remote has for the rev asked for.
struct Remote {
    rev: Option<String>,
    rev_type: Option<&'static str>,
    /// `None`: no upstream wanted (a detached HEAD), `Some(false)`-like: `desired_upstream`
    /// False is `Upstream::No`.
    desired: Upstream,
    loc: Option<String>,
    default_branch: Option<String>,
    has_head: bool,
}

#[derive(Clone, PartialEq)]
enum Upstream {
    /// Salt's `False`.
    No,
    /// Salt's `None`.
    Head,
    Branch(String),
}

impl Upstream {
    fn name(&self) -> Option<&str> {
        match self {
            Upstream::Branch(b) => Some(b),
            _ => None,
        }
    }
}

fn latest(c: &Call) -> Result<Map<String, Value>, String> {
    let name = c.name();
    let l = Latest {
        c,
        out: ret(&name, json!(true), "", json!({})),
        changes: Map::new(),
        comments: Vec::new(),
        user: c.text("user"),
        password: c.text("password"),
    };
    let extra: Vec<String> = c
        .state_kwargs()
        .into_iter()
        .filter(|(k, _)| {
            !LATEST_PARAMS.contains(&k.as_str())
                && !k.starts_with("__")
                && k.as_str() != "fun"
                && k.as_str() != "state"
        })
        .map(|(k, v)| format!("{k}={}", py_text(v)))
        .collect();
    if !extra.is_empty() {
        return Ok(l.fail(
            format!(
                "The following keyword arguments are not valid: {}",
                extra.join(", ")
            ),
            false,
        ));
    }
    for refused in ["identity"] {
        if c.arg(refused).is_some() {
            return Ok(l.fail(
                format!("The '{refused}' argument of git.latest is not supported by this minion"),
                false,
            ));
        }
    }
    for refused in ["bare", "mirror", "submodules"] {
        if c.flag(refused, false) {
            return Ok(l.fail(
                format!("The '{refused}' argument of git.latest is not supported by this minion"),
                false,
            ));
        }
    }
    let remote = match c.low.get("remote") {
        None => "origin".to_string(),
        Some(v) if !json_truthy(v) => return Ok(l.fail("'remote' argument is required", false)),
        Some(v) => py_text(v),
    };
    let Some(target) = c.arg("target").filter(|t| json_truthy(t)).map(py_text) else {
        return Ok(l.fail("'target' argument is required", false));
    };
    let rev = match c.low.get("rev") {
        None => "HEAD".to_string(),
        Some(v) if !json_truthy(v) => {
            return Ok(l.fail(
                format!(
                    "'{}' is not a valid value for the 'rev' argument",
                    py_text(v)
                ),
                false,
            ))
        }
        Some(v) => py_text(v),
    };
    let force_reset = match c.low.get("force_reset") {
        None | Some(Value::Bool(false)) => ForceReset::No,
        Some(Value::Bool(true)) => ForceReset::Yes,
        Some(Value::String(s)) if s == "remote-changes" => ForceReset::RemoteChanges,
        // Python: 1 == True and 0 == False.
        Some(Value::Number(n)) if n.as_f64() == Some(1.0) => ForceReset::Yes,
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => ForceReset::No,
        Some(_) => {
            return Ok(l.fail(
                "'force_reset' must be one of True, False, or 'remote-changes'",
                false,
            ))
        }
    };
    if !target.starts_with('/') {
        return Ok(l.fail(format!("target '{target}' is not an absolute path"), false));
    }
    let branch = c.text("branch");
    let https_user = c.text("https_user");
    let https_pass = c.text("https_pass");
    if std::path::Path::new(&target).is_file() {
        return Ok(l.fail(
            format!("Target '{target}' exists and is a regular file, cannot proceed"),
            false,
        ));
    }
    let desired_fetch_url = if https_user.is_none() && https_pass.is_none() {
        name.clone()
    } else if !name.to_lowercase().starts_with("https://") {
        return Ok(l.fail("Basic Auth only supported for HTTPS", false));
    } else {
        // The minion's git module puts them in the URL; the state only compares it.
        let quote = |s: &str| {
            s.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) {
                        char::from(b).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        };
        let creds = match (&https_user, &https_pass) {
            (u, None) => quote(u.as_deref().unwrap_or("None")),
            (u, Some(p)) => format!("{}:{}", quote(u.as_deref().unwrap_or("None")), quote(p)),
        };
        format!("https://{creds}@{}", &name["https://".len()..])
    };
    let redacted_fetch_url = redact(&desired_fetch_url);
    let fetch_tags = c.flag("fetch_tags", true);
    let refspec_branch = c.text("refspec_branch").unwrap_or_else(|| "*".into());
    let refspec_tag = c.text("refspec_tag").unwrap_or_else(|| "*".into());
    let refspecs: Vec<String> = if fetch_tags {
        vec![
            format!("refs/heads/{refspec_branch}:refs/remotes/{remote}/{refspec_branch}"),
            format!("+refs/tags/{refspec_tag}:refs/tags/{refspec_tag}"),
        ]
    } else {
        Vec::new()
    };
    let mut auth: Vec<(&str, Value)> = Vec::new();
    if let Some(u) = &https_user {
        auth.push(("https_user", json!(u)));
    }
    if let Some(p) = &https_pass {
        auth.push(("https_pass", json!(p)));
    }

    let all_remote_refs = match l.call("git.remote_refs", &[json!(name)], &auth) {
        Ok(Value::Object(m)) => m,
        Ok(_) => Map::new(),
        Err(e) => {
            return Ok(l.fail(
                format!("Failed to check remote refs: {}", strip_exc(&e)),
                false,
            ))
        }
    };
    let head_rev = all_remote_refs.get("HEAD").map(py_text);
    let default_branch = head_rev.as_ref().and_then(|head| {
        all_remote_refs
            .iter()
            .find(|(k, v)| k.starts_with("refs/heads/") && py_text(v) == *head)
            .map(|(k, _)| k["refs/heads/".len()..].to_string())
    });
    let mut rev = rev;
    let r = {
        let refs = &all_remote_refs;
        let (rrev, rtype, desired): (Option<String>, Option<&'static str>, Upstream) =
            if rev == "HEAD" {
                match &head_rev {
                    Some(h) => (Some(h.clone()), Some("sha1"), Upstream::Head),
                    None => (None, None, Upstream::No),
                }
            } else if let Some(v) = refs.get(&format!("refs/heads/{rev}")) {
                (
                    Some(py_text(v)),
                    Some("branch"),
                    Upstream::Branch(format!("{remote}/{rev}")),
                )
            } else if let Some(v) = refs.get(&format!("refs/tags/{rev}^{{}}")) {
                (Some(py_text(v)), Some("tag"), Upstream::No)
            } else if let Some(v) = refs.get(&format!("refs/tags/{rev}")) {
                (Some(py_text(v)), Some("tag"), Upstream::No)
            } else if rev.len() <= 40 && rev.chars().all(|ch| ch.is_ascii_hexdigit()) {
                rev = rev.to_lowercase();
                (Some(rev.clone()), Some("sha1"), Upstream::No)
            } else {
                (None, None, Upstream::No)
            };
        let loc = match (&rrev, rtype) {
            (Some(rr), Some("sha1")) => Some(if rev == "HEAD" {
                format!("remote HEAD ({})", short_text(Some(rr)))
            } else {
                short_text(Some(rr))
            }),
            (Some(rr), _) => Some(format!(
                "{} ({})",
                if rtype == Some("branch") {
                    desired.name().unwrap_or_default().to_string()
                } else {
                    rev.clone()
                },
                short_text(Some(rr))
            )),
            _ => None,
        };
        Remote {
            rev: rrev,
            rev_type: rtype,
            desired,
            loc,
            default_branch,
            has_head: refs.contains_key("HEAD"),
        }
    };
    let depth = c.arg("depth").cloned();
    if depth.is_some() && !matches!(r.rev_type, Some("branch" | "tag")) {
        return Ok(l.fail(
            "When 'depth' is used, 'rev' must be set to the name of a branch or tag on the remote repository",
            false,
        ));
    }
    if r.rev.is_none() && rev != "HEAD" {
        return Ok(l.fail(
            format!("No revision matching '{rev}' exists in the remote repository"),
            false,
        ));
    }
    let opts = Opts {
        name,
        target,
        rev,
        branch,
        remote,
        force_reset,
        redacted_fetch_url,
        desired_fetch_url,
        refspecs,
        depth,
        auth: auth.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    };
    let gitdir = std::path::Path::new(&opts.target).join(".git");
    let is_repo = gitdir.is_dir()
        || l.call("git.is_worktree", &[json!(opts.target)], &[])
            .is_ok_and(|v| v == json!(true));
    if is_repo {
        existing(l, &opts, &r)
    } else {
        clone(l, &opts, &r)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum ForceReset {
    No,
    Yes,
    RemoteChanges,
}

struct Opts {
    name: String,
    target: String,
    rev: String,
    branch: Option<String>,
    remote: String,
    force_reset: ForceReset,
    redacted_fetch_url: String,
    desired_fetch_url: String,
    refspecs: Vec<String>,
    depth: Option<Value>,
    auth: Vec<(String, Value)>,
}

/// Salt's `salt.utils.url.redact_http_basic_auth`.
fn redact(text: &str) -> String {
    let re = regex::Regex::new(r"(?i)(https?)://.*@").expect("static regex is valid");
    re.replace_all(text, "${1}://<redacted>@").into_owned()
}

fn need_branch_change(branch: Option<&str>, local_branch: Option<&str>) -> bool {
    branch.is_some() && branch != local_branch
}

fn branch_opts(branch: Option<&str>, all_local: &[String], desired: &str) -> Option<Value> {
    if let Some(b) = branch {
        if !all_local.iter().any(|x| x == b) {
            return None;
        }
    }
    Some(json!(["--set-upstream-to", desired]))
}

#[allow(clippy::too_many_arguments)]
fn not_fast_forward(
    l: Latest,
    o: &Opts,
    r: &Remote,
    pre: Option<&str>,
    local_branch: Option<&str>,
    local_changes: bool,
) -> Map<String, Value> {
    let mut branch_msg = String::new();
    if o.branch.is_none() {
        if o.rev != "HEAD" {
            if local_branch != Some(o.rev.as_str()) {
                branch_msg = format!(
                    " The desired rev ({0}) differs from the name of the local branch ({1}), if the desired rev is a branch name then a forced update could possibly be avoided by setting the 'branch' argument to '{0}' instead.",
                    o.rev,
                    local_branch.unwrap_or("None")
                );
            }
        } else if let Some(db) = &r.default_branch {
            if local_branch != Some(db.as_str()) {
                branch_msg = format!(
                    " The default remote branch ({0}) differs from the local branch ({1}). This could be caused by changing the default remote branch, or if the local branch was manually changed. Rather than forcing an update, it may be advisable to set the 'branch' argument to '{0}' instead. To ensure that this state follows the '{0}' branch instead of the remote HEAD, set the 'rev' argument to '{0}'.",
                    db,
                    local_branch.unwrap_or("None")
                );
            }
        }
    }
    let pre = short_text(pre);
    let post = short_text(r.rev.as_deref());
    let msg = format!(
        "Repository would be updated {}{}, but {}. Set 'force_reset' to True{} to force this update{}.{}",
        if local_changes && pre != post { format!("from {pre} to {post}") } else { format!("to {post}") },
        if need_branch_change(o.branch.as_deref(), local_branch) {
            format!(" (after checking out local branch '{}')", o.branch.as_deref().unwrap_or_default())
        } else {
            String::new()
        },
        if local_changes { "there are uncommitted changes" } else { "this is not a fast-forward merge" },
        if local_changes { " (or 'remote-changes')" } else { "" },
        if local_changes { " and discard these changes" } else { "" },
        branch_msg,
    );
    l.fail(msg, true)
}

/// The target is a checkout already: bring it to the remote rev.
fn existing(mut l: Latest, o: &Opts, r: &Remote) -> Result<Map<String, Value>, String> {
    match update(&mut l, o, r) {
        Ok(Step::Done(done)) => Ok(done(l)),
        Ok(Step::Continue { local_rev, new_rev }) => {
            if !revs_equal(new_rev.as_deref(), r.rev.as_deref(), r.rev_type) {
                return Ok(l.fail("Failed to update repository", true));
            }
            if local_rev != new_rev {
                let comment = format_comments(&l.comments);
                l.changes
                    .insert("revision".into(), json!({"old": local_rev, "new": new_rev}));
                Ok(l.comment(comment))
            } else {
                let comments = std::mem::take(&mut l.comments);
                Ok(l.uptodate(&o.target, &comments, false))
            }
        }
        Err(e) => {
            let msg = strip_exc(&e);
            Ok(l.fail(msg, true))
        }
    }
}

type Finish = Box<dyn FnOnce(Latest) -> Map<String, Value>>;

enum Step {
    Done(Finish),
    Continue {
        local_rev: Option<String>,
        new_rev: Option<String>,
    },
}

fn done(f: impl FnOnce(Latest) -> Map<String, Value> + 'static) -> Result<Step, String> {
    Ok(Step::Done(Box::new(f)))
}

fn update(l: &mut Latest, o: &Opts, r: &Remote) -> Result<Step, String> {
    let target = o.target.clone();
    let test = l.c.test;
    let all_local_branches = l.list("git.list_branches", &target)?;
    let mut all_local_tags = l.list("git.list_tags", &target)?;
    all_local_tags.sort();
    all_local_tags.dedup();
    let (local_rev, local_branch) = l.local_rev_and_branch(&target);
    if r.rev.is_none() && local_rev.is_some() {
        return done(|l| {
            l.fail(
                "Remote repository is empty, cannot update from a non-empty to an empty repository",
                false,
            )
        });
    }
    let mut base_rev = local_rev.clone();
    let mut base_branch = local_branch.clone();
    let branch = o.branch.clone();
    if need_branch_change(branch.as_deref(), local_branch.as_deref()) {
        let b = branch.clone().unwrap_or_default();
        if !all_local_branches.contains(&b) {
            base_rev = r.rev.clone();
        } else {
            base_branch = Some(b.clone());
            match l.rev_parse(&target, &format!("{b}^{{commit}}"), None) {
                Ok(v) => base_rev = Some(v),
                Err(e) => {
                    let msg = format!(
                        "Unable to get position of local branch '{b}': {}",
                        strip_exc(&e)
                    );
                    return done(move |l| l.fail(msg, true));
                }
            }
        }
    }
    let remotes = l.call(
        "git.remotes",
        &[json!(target)],
        &[("redact_auth", json!(false))],
    )?;
    let revs_match = revs_equal(local_rev.as_deref(), r.rev.as_deref(), r.rev_type);
    let local_changes = match l.call("git.diff", &[json!(target), json!("HEAD")], &[]) {
        Ok(v) => json_truthy(&v),
        Err(_) => false,
    };
    if local_changes && revs_match {
        if o.force_reset == ForceReset::Yes {
            let mut msg = format!("{target} is up-to-date, but with uncommitted changes. Since 'force_reset' is set to True, these local changes would be reset. To only reset when there are changes in the remote repository, set 'force_reset' to 'remote-changes'.");
            if test {
                l.changes.insert("forced update".into(), json!(true));
                msg.push_str(&format_comments(&l.comments));
                return done(move |l| l.neutral(msg));
            }
        } else {
            let t = target.clone();
            return done(move |mut l| {
                let comments = std::mem::take(&mut l.comments);
                l.uptodate(&t, &comments, true)
            });
        }
    }
    let mut has_remote_rev = false;
    if r.rev_type == Some("sha1")
        && base_rev
            .as_deref()
            .zip(r.rev.as_deref())
            .is_some_and(|(b, rr)| b.starts_with(rr))
    {
        has_remote_rev = true;
    } else if let Some(rr) = &r.rev {
        if l.rev_parse(&target, &format!("{rr}^{{commit}}"), None)
            .is_ok()
        {
            match r.rev_type {
                Some("branch") if remotes.get(&o.remote).is_some() => {
                    if let Some(up) = r.desired.name() {
                        if l.rev_parse(&target, up, None).ok().as_deref() == Some(rr.as_str()) {
                            has_remote_rev = true;
                        }
                    }
                }
                Some("tag") if all_local_tags.contains(&o.rev) => {
                    let local_tag = l
                        .rev_parse(&target, &format!("{}^{{commit}}", o.rev), None)
                        .ok();
                    if local_tag.as_deref() == Some(rr.as_str()) {
                        has_remote_rev = true;
                    } else if o.force_reset == ForceReset::No {
                        let msg = format!(
                                "'{}' is a tag, but the remote SHA1 for this tag ({}) doesn't match the local SHA1 ({}). Set 'force_reset' to True to force this update.",
                                o.rev,
                                short_text(Some(rr)),
                                short_text(local_tag.as_deref())
                            );
                        return done(move |l| l.fail(msg, false));
                    }
                }
                Some("sha1") => has_remote_rev = true,
                _ => {}
            }
        }
    }
    let update_head = l.c.flag("update_head", true);
    let mut fast_forward: Option<bool> =
        if local_changes && o.force_reset != ForceReset::RemoteChanges {
            Some(false)
        } else {
            None
        };
    let loc = r.loc.clone().unwrap_or_else(|| "None".into());
    let loc_head = if o.rev == "HEAD" {
        capitalize(&loc)
    } else {
        loc.clone()
    };
    if has_remote_rev {
        if !revs_match && !update_head && (branch.is_none() || branch == local_branch) {
            let msg = format!(
                "{loc_head} is already present and local HEAD ({}) does not match, but update_head=False. HEAD has not been updated locally.",
                short_text(local_rev.as_deref())
            );
            return done(move |l| l.comment(msg));
        }
        if fast_forward != Some(false) {
            fast_forward = Some(match &base_rev {
                None => true,
                Some(b) => is_ancestor(l, &target, b, r.rev.as_deref().unwrap_or_default(), true)?,
            });
        }
    }
    let merge_action = match fast_forward {
        Some(false) => {
            if o.force_reset == ForceReset::No {
                let (lb, br) = (local_branch.clone(), base_rev.clone());
                return not_fast_forward_step(o, r, br, lb, local_changes);
            }
            "hard-reset"
        }
        Some(true) => "fast-forwarded",
        None => "updated",
    };
    let upstream: Option<String> = match &base_branch {
        None => None,
        Some(b) => l
            .rev_parse(
                &target,
                &format!("{b}@{{upstream}}"),
                Some(json!(["--abbrev-ref"])),
            )
            .ok()
            .filter(|u| !u.is_empty()),
    };
    let fetch_url = remotes
        .get(&o.remote)
        .and_then(|v| v.get("fetch"))
        .map(py_text);
    if r.rev.is_some() && Some(o.desired_fetch_url.as_str()) != fetch_url.as_deref() {
        if test {
            let mut actions = vec![format!(
                "Remote '{}' would be changed from {} to {}",
                o.remote,
                fetch_url.as_deref().map_or_else(|| "None".into(), redact),
                o.redacted_fetch_url
            )];
            if !has_remote_rev {
                actions.push("Remote would be fetched".into());
            }
            if !revs_match && update_head {
                l.changes
                    .insert("revision".into(), json!({"old": local_rev, "new": r.rev}));
                if fast_forward == Some(false) {
                    l.changes.insert("forced update".into(), json!(true));
                }
                actions.push(format!(
                    "Repository would be {merge_action} to {}",
                    short_text(r.rev.as_deref())
                ));
            }
            let t = target.clone();
            let no_head = !revs_match && !update_head;
            return done(move |l| {
                if !l.changes.is_empty() {
                    l.neutral(format_comments(&actions))
                } else if no_head {
                    l.comment(format_comments(&actions))
                } else {
                    l.uptodate(&t, &actions, false)
                }
            });
        }
        let mut kw: Vec<(&str, Value)> = vec![("url", json!(o.name)), ("remote", json!(o.remote))];
        kw.extend(o.auth.iter().map(|(k, v)| (k.as_str(), v.clone())));
        l.call("git.remote_set", &[json!(target)], &kw)?;
        match &fetch_url {
            None => {
                l.comments.push(format!(
                    "Remote '{}' set to {}",
                    o.remote, o.redacted_fetch_url
                ));
                l.changes
                    .insert("new".into(), json!(format!("{} => {}", o.name, o.remote)));
            }
            Some(f) => l.comments.push(format!(
                "Remote '{}' changed from {} to {}",
                o.remote,
                redact(f),
                o.redacted_fetch_url
            )),
        }
    }
    if let Some(remote_rev) = r.rev.clone() {
        let desired = r.desired.name().map(str::to_string);
        if test {
            let mut actions = Vec::new();
            if !has_remote_rev {
                actions.push(format!("Remote '{}' would be fetched", o.remote));
            }
            if !revs_match && (update_head || (branch.is_some() && branch != local_branch)) {
                l.changes.insert(
                    "revision".into(),
                    json!({"old": local_rev, "new": remote_rev}),
                );
            }
            if need_branch_change(branch.as_deref(), local_branch.as_deref()) {
                let b = branch.clone().unwrap_or_default();
                if !all_local_branches.contains(&b) {
                    actions.push(format!(
                        "New branch '{b}' would be checked out, with {loc} as a starting point"
                    ));
                    if let Some(d) = &desired {
                        actions.push(format!("Tracking branch would be set to {d}"));
                    }
                } else {
                    actions.push(format!(
                        "Branch '{b}' would be checked out and {merge_action} to {}",
                        short_text(Some(&remote_rev))
                    ));
                }
            } else if !revs_match {
                if update_head {
                    if fast_forward == Some(true) {
                        actions.push(format!(
                            "Repository would be fast-forwarded from {} to {}",
                            short_text(local_rev.as_deref()),
                            short_text(Some(&remote_rev))
                        ));
                    } else {
                        actions.push(format!(
                            "Repository would be {} from {} to {}",
                            if o.force_reset != ForceReset::No && has_remote_rev {
                                "hard-reset"
                            } else {
                                "updated"
                            },
                            short_text(local_rev.as_deref()),
                            short_text(Some(&remote_rev))
                        ));
                    }
                } else {
                    actions.push(format!(
                        "Local HEAD ({}) does not match {loc} but update_head=False, HEAD would not be updated locally",
                        short_text(local_rev.as_deref())
                    ));
                }
            }
            match (&upstream, &r.desired) {
                (None, Upstream::Branch(d)) => {
                    actions.push(format!("Tracking branch would be set to {d}"))
                }
                (Some(_), Upstream::No) => actions.push("Tracking branch would be unset".into()),
                (Some(u), Upstream::Branch(d)) if u != d => {
                    actions.push(format!("Tracking branch would be updated to {d}"))
                }
                _ => {}
            }
            let t = target.clone();
            let no_head = !revs_match && !update_head;
            return done(move |l| {
                if !l.changes.is_empty() {
                    return l.neutral(format_comments(&actions));
                }
                let formatted = format_comments(&actions);
                if no_head && !formatted.is_empty() {
                    return l.comment(formatted);
                }
                l.uptodate(&t, &actions, false)
            });
        }
        let (upstream_action, bopts) = match (&upstream, &r.desired) {
            (None, Upstream::Branch(d)) => (
                format!("Tracking branch was set to {d}"),
                branch_opts(branch.as_deref(), &all_local_branches, d),
            ),
            (Some(_), Upstream::No) => (
                "Tracking branch was unset".to_string(),
                Some(json!(["--unset-upstream"])),
            ),
            (Some(u), Upstream::Branch(d)) if u != d => (
                format!("Tracking branch was updated to {d}"),
                branch_opts(branch.as_deref(), &all_local_branches, d),
            ),
            _ => (String::new(), None),
        };
        if bopts.is_some() && local_branch.is_none() {
            return done(|l| {
                l.fail("Cannot set/unset upstream tracking branch, local HEAD refers to nonexistent branch. This may have been caused by cloning a remote repository for which the default branch was renamed or deleted. If you are unable to fix the remote repository, you can work around this by setting the 'branch' argument (which will ensure that the named branch is created if it does not already exist).", true)
            });
        }
        let remote_tags: Vec<String> = {
            let v = l.call(
                "git.ls_remote",
                &[],
                &[
                    ("cwd", json!(target)),
                    ("remote", json!(o.remote)),
                    ("opts", json!("--tags")),
                    ("ignore_retcode", json!(true)),
                ],
            )?;
            let mut tags: Vec<String> = v
                .as_object()
                .map(|m| {
                    m.keys()
                        .filter(|k| !k.contains("^{}"))
                        .map(|k| k.replace("refs/tags/", ""))
                        .collect()
                })
                .unwrap_or_default();
            tags.sort();
            tags.dedup();
            tags
        };
        if all_local_tags != remote_tags {
            has_remote_rev = false;
            let new_tags: Vec<&String> = remote_tags
                .iter()
                .filter(|t| !all_local_tags.contains(t))
                .collect();
            let deleted: Vec<&String> = all_local_tags
                .iter()
                .filter(|t| !remote_tags.contains(t))
                .collect();
            if !new_tags.is_empty() {
                // Salt's changes hold a Python set here: its order is Python's own.
                l.changes.insert("new_tags".into(), json!(new_tags));
            }
            if l.c.flag("sync_tags", true) && !deleted.is_empty() {
                let mut removed = Vec::new();
                for tag in deleted {
                    if !test {
                        if let Err(e) = l.call(
                            "git.tag",
                            &[json!(target), json!(tag)],
                            &[("opts", json!("-d"))],
                        ) {
                            let warnings = l.out.entry("warnings").or_insert_with(|| json!([]));
                            if let Some(w) = warnings.as_array_mut() {
                                w.push(json!(format!(
                                    "Failed to remove local tag '{tag}':\n\n{}\n\n",
                                    strerror(&e)
                                )));
                            }
                            continue;
                        }
                    }
                    removed.push(tag.clone());
                }
                if !removed.is_empty() {
                    l.comments.push(format!(
                        "The following tags {} removed from the local checkout: {}",
                        if test { "would be" } else { "were" },
                        removed.join(", ")
                    ));
                    l.changes.insert("deleted_tags".into(), json!(removed));
                }
            }
        }
        if !has_remote_rev {
            let mut kw: Vec<(&str, Value)> = vec![
                ("remote", json!(o.remote)),
                ("force", json!(l.c.flag("force_fetch", false))),
                ("refspecs", json!(o.refspecs)),
            ];
            kw.extend(
                o.auth
                    .iter()
                    .filter(|_| false)
                    .map(|(k, v)| (k.as_str(), v.clone())),
            );
            match l.call("git.fetch", &[json!(target)], &kw) {
                Err(e) => {
                    let msg = format!(
                        "Fetch failed. Set 'force_fetch' to True to force the fetch if the failure was due to not being able to fast-forward. Output of the fetch command follows:\n\n{}",
                        strip_exc(&e)
                    );
                    return done(move |l| l.fail(msg, true));
                }
                Ok(changes) => {
                    if json_truthy(&changes) {
                        l.comments
                            .push(format!("{} was fetched, resulting in updated refs", o.name));
                    }
                }
            }
            if let Err(e) = l.rev_parse(&target, &format!("{remote_rev}^{{commit}}"), None) {
                let msg = format!(
                    "Fetch did not successfully retrieve rev '{}' from {}: {}",
                    o.rev,
                    o.name,
                    strerror(&e)
                );
                return done(move |l| l.fail(msg, false));
            }
            if !revs_match && !update_head && (branch.is_none() || branch == local_branch) {
                let msg = format!(
                    "{loc_head} is already present and local HEAD ({}) does not match, but update_head=False. HEAD has not been updated locally.",
                    short_text(local_rev.as_deref())
                );
                return done(move |l| l.comment(msg));
            }
            fast_forward = Some(match &base_rev {
                None => true,
                Some(b) => is_ancestor(l, &target, b, &remote_rev, false)?,
            });
            if (fast_forward == Some(false) && o.force_reset == ForceReset::No)
                || (fast_forward == Some(true) && local_changes && o.force_reset == ForceReset::No)
            {
                return not_fast_forward_step(
                    o,
                    r,
                    base_rev.clone(),
                    local_branch.clone(),
                    local_changes,
                );
            }
        }
        if need_branch_change(branch.as_deref(), local_branch.as_deref()) {
            let b = branch.clone().unwrap_or_default();
            let force_checkout = l.c.flag("force_checkout", false);
            if local_changes && !force_checkout {
                let msg = format!(
                    "Local branch '{}' has uncommitted changes. Set 'force_checkout' to True to discard them and proceed.",
                    local_branch.as_deref().unwrap_or("None")
                );
                return done(move |l| l.fail(msg, false));
            }
            let (checkout_rev, checkout_opts) = if !all_local_branches.contains(&b) {
                let rev = if o.rev == "HEAD" {
                    remote_rev.clone()
                } else {
                    desired.clone().unwrap_or_else(|| o.rev.clone())
                };
                (rev, json!(["-b", b]))
            } else {
                (b.clone(), json!([]))
            };
            let new_branch = checkout_opts.as_array().is_some_and(|a| !a.is_empty());
            l.call(
                "git.checkout",
                &[json!(target), json!(checkout_rev)],
                &[("force", json!(force_checkout)), ("opts", checkout_opts)],
            )?;
            if new_branch {
                l.comments.push(format!(
                    "New branch '{b}' was checked out, with {loc} as a starting point"
                ));
            } else {
                l.comments.push(format!("'{checkout_rev}' was checked out"));
            }
        }
        if fast_forward == Some(false) {
            l.call(
                "git.reset",
                &[json!(target)],
                &[("opts", json!(["--hard", remote_rev]))],
            )?;
            l.changes.insert("forced update".into(), json!(true));
            if local_changes {
                l.comments.push("Uncommitted changes were discarded".into());
            }
            l.comments
                .push(format!("Repository was hard-reset to {loc}"));
        } else if fast_forward == Some(true) && local_changes && o.force_reset != ForceReset::No {
            l.call("git.discard_local_changes", &[json!(target)], &[])?;
            l.comments.push("Uncommitted changes were discarded".into());
        }
        if let Some(bo) = bopts {
            l.call("git.branch", &[json!(target)], &[("opts", bo)])?;
            l.comments.push(upstream_action);
        }
        if fast_forward == Some(true)
            && !revs_equal(base_rev.as_deref(), Some(&remote_rev), r.rev_type)
        {
            if desired.is_some() || o.rev == "HEAD" {
                let symbolic = l.call(
                    "git.symbolic_ref",
                    &[json!(target), json!("HEAD")],
                    &[
                        ("opts", json!(["--quiet"])),
                        ("ignore_retcode", json!(true)),
                    ],
                );
                if symbolic.as_ref().is_ok_and(json_truthy) {
                    l.call(
                        "git.merge",
                        &[json!(target)],
                        &[("rev", json!(remote_rev)), ("opts", json!(["--ff-only"]))],
                    )?;
                    l.comments
                        .push(format!("Repository was fast-forwarded to {loc}"));
                } else {
                    symbolic?;
                    return done(|l| l.fail("Unable to fast-forward, HEAD is detached", true));
                }
            } else {
                let to = if o.rev == "HEAD" {
                    remote_rev.clone()
                } else {
                    o.rev.clone()
                };
                l.call(
                    "git.reset",
                    &[json!(target)],
                    &[("opts", json!(["--hard", to]))],
                )?;
                l.comments
                    .push(format!("Repository was reset to {} (fast-forward)", o.rev));
            }
        }
    }
    let new_rev = l
        .text_call(
            "git.revision",
            &[],
            &[("cwd", json!(target)), ("ignore_retcode", json!(true))],
        )
        .ok();
    Ok(Step::Continue { local_rev, new_rev })
}

fn not_fast_forward_step(
    o: &Opts,
    r: &Remote,
    base_rev: Option<String>,
    local_branch: Option<String>,
    local_changes: bool,
) -> Result<Step, String> {
    let o = OptsLite {
        rev: o.rev.clone(),
        branch: o.branch.clone(),
    };
    let r = Remote {
        rev: r.rev.clone(),
        rev_type: r.rev_type,
        desired: r.desired.clone(),
        loc: r.loc.clone(),
        default_branch: r.default_branch.clone(),
        has_head: r.has_head,
    };
    done(move |l| {
        let full = Opts {
            name: String::new(),
            target: String::new(),
            rev: o.rev,
            branch: o.branch,
            remote: String::new(),
            force_reset: ForceReset::No,
            redacted_fetch_url: String::new(),
            desired_fetch_url: String::new(),
            refspecs: Vec::new(),
            depth: None,
            auth: Vec::new(),
        };
        not_fast_forward(
            l,
            &full,
            &r,
            base_rev.as_deref(),
            local_branch.as_deref(),
            local_changes,
        )
    })
}

struct OptsLite {
    rev: String,
    branch: Option<String>,
}

/// `git.merge_base(..., is_ancestor=True)`.
fn is_ancestor(l: &Latest, target: &str, a: &str, b: &str, ignore: bool) -> Result<bool, String> {
    let mut kw = vec![("refs", json!([a, b])), ("is_ancestor", json!(true))];
    if ignore {
        kw.push(("ignore_retcode", json!(true)));
    }
    Ok(l.call("git.merge_base", &[json!(target)], &kw)? == json!(true))
}

/// The target is not a checkout: clone into it.
fn clone(mut l: Latest, o: &Opts, r: &Remote) -> Result<Map<String, Value>, String> {
    let target = o.target.clone();
    let path = std::path::Path::new(&target);
    if path.is_dir() {
        let contents: Vec<std::path::PathBuf> = std::fs::read_dir(path)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        if l.c.flag("force_clone", false) {
            if l.c.test {
                l.changes.insert("forced clone".into(), json!(true));
                l.changes
                    .insert("new".into(), json!(format!("{} => {target}", o.name)));
                return Ok(l.neutral(format!(
                    "Target directory {target} exists. Since force_clone=True, the contents of {target} would be deleted, and {} would be cloned into this directory.",
                    o.name
                )));
            }
            let mut errors = Vec::new();
            for p in contents {
                let removed = if p.is_dir() && !p.is_symlink() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
                if let Err(e) = removed {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        errors.push(format!("  {}\n    {e}", p.display()));
                    }
                }
            }
            if !errors.is_empty() {
                return Ok(l.fail(format!("Unable to remove\n{}", errors.join("\n")), true));
            }
            l.changes.insert("forced clone".into(), json!(true));
        } else if !contents.is_empty() {
            return Ok(l.fail(format!("Target '{target}' exists, is non-empty and is not a git repository. Set the 'force_clone' option to True to remove this directory's contents and proceed with cloning the remote repository"), false));
        }
    }
    if l.c.test {
        l.changes
            .insert("new".into(), json!(format!("{} => {target}", o.name)));
        return Ok(l.neutral(format!("Repository {} would be cloned to {target}", o.name)));
    }
    match clone_steps(&mut l, o, r) {
        Ok(Some(done)) => Ok(done(l)),
        Ok(None) => {
            let new_rev = l
                .text_call(
                    "git.revision",
                    &[],
                    &[("cwd", json!(target)), ("ignore_retcode", json!(true))],
                )
                .ok();
            let comment = format_comments(&l.comments);
            if let Some(new_rev) = new_rev {
                l.changes
                    .insert("revision".into(), json!({"old": null, "new": new_rev}));
            }
            Ok(l.comment(comment))
        }
        Err(e) => {
            let msg = strip_exc(&e);
            Ok(l.fail(msg, true))
        }
    }
}

fn clone_steps(l: &mut Latest, o: &Opts, r: &Remote) -> Result<Option<Finish>, String> {
    let target = o.target.clone();
    let mut clone_opts: Vec<String> = Vec::new();
    if o.remote != "origin" {
        clone_opts.extend(["--origin".into(), o.remote.clone()]);
    }
    if let Some(d) = &o.depth {
        clone_opts.extend([
            "--depth".into(),
            py_text(d),
            "--branch".into(),
            o.rev.clone(),
        ]);
    }
    let mut kw: Vec<(&str, Value)> = vec![("opts", json!(clone_opts))];
    kw.extend(o.auth.iter().map(|(k, v)| (k.as_str(), v.clone())));
    if let Err(e) = l.call("git.clone", &[json!(target), json!(o.name)], &kw) {
        let msg = format!("Clone failed: {}", strip_exc(&e));
        return Ok(Some(Box::new(move |l: Latest| l.fail(msg, true))));
    }
    l.changes
        .insert("new".into(), json!(format!("{} => {target}", o.name)));
    l.comments.push(format!("{} cloned to {target}", o.name));
    let loc = r.loc.clone().unwrap_or_else(|| "None".into());
    let Some(remote_rev) = r.rev.clone() else {
        if o.rev != "HEAD" {
            let msg = format!(
                "Repository was cloned but is empty, so {}/{} cannot be checked out",
                o.remote, o.rev
            );
            return Ok(Some(Box::new(move |l: Latest| l.fail(msg, true))));
        }
        return Ok(None);
    };
    if r.rev_type == Some("tag") && !l.list("git.list_tags", &target)?.contains(&o.rev) {
        let msg = format!("Revision '{}' does not exist in clone", o.rev);
        return Ok(Some(Box::new(move |l: Latest| l.fail(msg, true))));
    }
    if let Some(b) = &o.branch {
        if !l.list("git.list_branches", &target)?.contains(b) {
            let checkout_rev = if o.rev == "HEAD" {
                remote_rev.clone()
            } else {
                r.desired
                    .name()
                    .map_or_else(|| o.rev.clone(), str::to_string)
            };
            l.call(
                "git.checkout",
                &[json!(target), json!(checkout_rev)],
                &[("opts", json!(["-b", b]))],
            )?;
            l.comments.push(format!(
                "Branch '{b}' checked out, with {loc} as a starting point"
            ));
        }
    }
    let (local_rev, local_branch) = l.local_rev_and_branch(&target);
    if local_branch.is_none() && !r.has_head {
        return Ok(Some(Box::new(|l: Latest| {
            l.fail("Remote HEAD refers to a ref that does not exist. This can happen when the default branch on the remote repository is renamed or deleted. If you are unable to fix the remote repository, you can work around this by setting the 'branch' argument (which will ensure that the named branch is created if it does not already exist).", true)
        })));
    }
    if !revs_equal(local_rev.as_deref(), Some(&remote_rev), r.rev_type) {
        l.call(
            "git.reset",
            &[json!(target)],
            &[("opts", json!(["--hard", remote_rev]))],
        )?;
        l.comments.push(format!("Repository was reset to {loc}"));
    }
    let lb = local_branch.clone().unwrap_or_else(|| "None".into());
    let upstream = l
        .rev_parse(
            &target,
            &format!("{lb}@{{upstream}}"),
            Some(json!(["--abbrev-ref"])),
        )
        .ok()
        .filter(|u| !u.is_empty());
    let (action, bopts) = match (&upstream, &r.desired) {
        (None, Upstream::Branch(d)) => (
            format!("Tracking branch was set to {d}"),
            branch_opts(
                o.branch.as_deref(),
                &l.list("git.list_branches", &target)?,
                d,
            ),
        ),
        (Some(_), Upstream::No) => (
            "Tracking branch was unset".to_string(),
            Some(json!(["--unset-upstream"])),
        ),
        (Some(u), Upstream::Branch(d)) if u != d => (
            format!("Tracking branch was updated to {d}"),
            branch_opts(
                o.branch.as_deref(),
                &l.list("git.list_branches", &target)?,
                d,
            ),
        ),
        _ => (String::new(), None),
    };
    if let Some(bo) = bopts {
        l.call("git.branch", &[json!(target)], &[("opts", bo)])?;
        l.comments.push(action);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_lose_the_command_head() {
        assert_eq!(
            strip_exc("ERROR: Command 'git ls-remote file:///x' failed: fatal: nope"),
            "fatal: nope"
        );
        assert_eq!(strip_exc("ERROR: something else"), "something else");
        assert_eq!(format_comments(&["a".into()]), "a");
        assert_eq!(format_comments(&["a".into(), "b".into()]), "a. b.");
        assert!(revs_equal(Some("abcdef"), Some("abc"), Some("sha1")));
        assert!(!revs_equal(Some("abcdef"), Some("abc"), Some("branch")));
        assert_eq!(capitalize("remote HEAD (abc)"), "Remote head (abc)");
    }
}
