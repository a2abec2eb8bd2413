//! APT's one-line source lists (`/etc/apt/sources.list` and `sources.list.d/*.list`) as Salt
//! 3007's `aptpkg` reads and writes them without python-apt: each line an entry (comments,
//! blank and malformed lines kept as they are), a commented-out `deb` line a disabled repo,
//! options in brackets (`arch=`, `signed-by=`, others kept in order), and a trailing comment.
//!
//! Used by the minion's `pkg.list_repos/get_repo/del_repo/mod_repo` and by the `pkgrepo`
//! state, which compares a repo as Salt's `_expand_repo_def` spells it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

/// The main list, the file of an entry made without one.
pub const SOURCES_LIST: &str = "/etc/apt/sources.list";

/// The entry types a line may start with.
const TYPES: &[&str] = &["deb", "deb-src", "rpm", "rpm-src"];

/// One line of a source list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceEntry {
    /// The line as read (with its newline), or the definition it was made from.
    pub line: String,
    /// The list it is in.
    pub file: String,
    /// Not a repository line (blank, a comment, malformed): written back as read.
    pub invalid: bool,
    /// Commented out.
    pub disabled: bool,
    /// The text after a `#` that follows the entry.
    pub comment: String,
    /// `deb`, `deb-src`...
    pub kind: String,
    pub uri: String,
    pub dist: String,
    pub comps: Vec<String>,
    pub architectures: Vec<String>,
    pub signedby: String,
}

/// A bracketed option of a line: its key (`arch` and `signedby` for those two), the text as
/// written, and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Opt {
    key: String,
    full: String,
    value: String,
}

/// The options of a line in brackets, in order (Salt's `_get_opts`: the first bracket that
/// holds an `=`; `arch=` values gather into `arch`).
fn line_opts(line: &str) -> (Vec<Opt>, Vec<String>) {
    static BRACKET: OnceLock<Regex> = OnceLock::new();
    let re = BRACKET.get_or_init(|| Regex::new(r"\[(.*=.*?)\]").expect("valid pattern"));
    let mut opts: Vec<Opt> = Vec::new();
    let mut arch = Vec::new();
    let Some(found) = re.find(line) else {
        return (opts, arch);
    };
    let inner = found.as_str().trim_matches(|c| c == '[' || c == ']');
    for word in brine_protocol::pystr::split(inner) {
        let value = word.split_once('=').map_or("", |(_, v)| v).to_string();
        let key = if word.starts_with("arch") {
            arch.extend(value.split(',').map(str::to_string));
            "arch".to_string()
        } else if word.starts_with("signed-by") {
            "signedby".to_string()
        } else {
            word.split('=').next().unwrap_or_default().to_string()
        };
        let opt = Opt {
            key,
            full: word.to_string(),
            value,
        };
        match opts.iter_mut().find(|o| o.key == opt.key) {
            Some(o) => *o = opt,
            None => opts.push(opt),
        }
    }
    (opts, arch)
}

/// Salt's `_invalid`: whether the line is commented out, whether it is no repository line,
/// its trailing comment and its words.
fn classify(line: &str) -> (bool, bool, String, Vec<String>) {
    static CDROM: OnceLock<Regex> = OnceLock::new();
    let mut line = brine_protocol::pystr::strip(line);
    if line.is_empty() {
        return (false, true, String::new(), Vec::new());
    }
    let mut disabled = false;
    if let Some(rest) = line.strip_prefix('#') {
        disabled = true;
        line = rest;
    }
    let mut comment = String::new();
    if let Some(idx) = line.find('#').filter(|i| *i > 0) {
        comment = line[idx + 1..].to_string();
        line = &line[..idx];
    }
    let cdrom = CDROM.get_or_init(|| Regex::new(r"^(.*)(cdrom:.*/)(.*)").expect("valid pattern"));
    let stripped = brine_protocol::pystr::strip(line);
    let words: Vec<String> = match cdrom.captures(stripped) {
        Some(c) => brine_protocol::pystr::split(&c[1])
            .into_iter()
            .map(str::to_string)
            .chain([brine_protocol::pystr::strip(&c[2]).to_string()])
            .chain(
                brine_protocol::pystr::split(&c[3])
                    .into_iter()
                    .map(str::to_string),
            )
            .collect(),
        None => brine_protocol::pystr::split(stripped)
            .into_iter()
            .map(str::to_string)
            .collect(),
    };
    let invalid = words.len() < 3
        || !TYPES.contains(&words[0].as_str())
        || (words[1].starts_with('[') && !words[1..].iter().any(|w| w.ends_with(']')));
    (disabled, invalid, comment, words)
}

impl SourceEntry {
    /// A line of `file` (the main list when `None`).
    pub fn parse(line: &str, file: Option<&str>) -> SourceEntry {
        let (disabled, invalid, comment, mut words) = classify(line);
        let mut entry = SourceEntry {
            line: line.to_string(),
            file: file.unwrap_or(SOURCES_LIST).to_string(),
            invalid,
            disabled,
            comment,
            ..SourceEntry::default()
        };
        if invalid {
            return entry;
        }
        if words[1].starts_with('[') {
            words = words
                .iter()
                .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
                .filter(|w| !w.is_empty())
                .collect();
            let (opts, arch) = line_opts(line);
            entry.architectures = arch;
            for opt in &opts {
                if opt.key == "signedby" {
                    entry.signedby = opt.value.clone();
                }
                if let Some(i) = words.iter().position(|w| *w == opt.full) {
                    words.remove(i);
                }
            }
            if words.len() < 3 {
                entry.invalid = true;
                return entry;
            }
        }
        entry.kind = words[0].clone();
        entry.uri = words[1].clone();
        entry.dist = words[2].clone();
        entry.comps = words[3..].to_vec();
        entry
    }

    /// The line written for the entry: an invalid one as read; otherwise the type, the
    /// options (the line's own, with `arch=` and `signed-by=` as the entry has them), the URI,
    /// the distribution, the components and the comment.
    pub fn repo_line(&self) -> String {
        if self.invalid {
            return self.line.clone();
        }
        let mut parts: Vec<String> = Vec::new();
        if self.disabled {
            parts.push("#".into());
        }
        parts.push(self.kind.clone());
        let (mut opts, _) = line_opts(&self.line);
        let mut set = |key: &str, full: String| match opts.iter_mut().find(|o| o.key == key) {
            Some(o) => o.full = full,
            None => opts.push(Opt {
                key: key.into(),
                full,
                value: String::new(),
            }),
        };
        if !self.architectures.is_empty() {
            set("arch", format!("arch={}", self.architectures.join(",")));
        }
        if !self.signedby.is_empty() {
            set("signedby", format!("signed-by={}", self.signedby));
        }
        let shown: Vec<&str> = opts
            .iter()
            .map(|o| o.full.as_str())
            .filter(|f| !f.is_empty())
            .collect();
        if !shown.is_empty() {
            parts.push(format!("[{}]", shown.join(" ")));
        }
        parts.extend([self.uri.clone(), self.dist.clone(), self.comps.join(" ")]);
        if !self.comment.is_empty() {
            parts.push(format!("#{}", self.comment));
        }
        parts.join(" ") + "\n"
    }

    /// The entry as `pkg.list_repos` shows it.
    pub fn info(&self) -> RepoInfo {
        RepoInfo {
            file: self.file.clone(),
            comps: self.comps.clone(),
            disabled: self.disabled,
            dist: self.dist.clone(),
            kind: self.kind.clone(),
            uri: self.uri.clone(),
            line: brine_protocol::pystr::strip(&self.line).to_string(),
            architectures: self.architectures.clone(),
            signedby: self.signedby.clone(),
        }
    }
}

/// A repository as `pkg.list_repos` and `pkg.get_repo` show it (keys in Salt's order:
/// file, comps, disabled, dist, type, uri, line, architectures, signedby).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RepoInfo {
    pub file: String,
    pub comps: Vec<String>,
    pub disabled: bool,
    pub dist: String,
    pub kind: String,
    pub uri: String,
    pub line: String,
    pub architectures: Vec<String>,
    pub signedby: String,
}

impl RepoInfo {
    /// The keys in Salt's order with their values.
    pub fn fields(&self) -> Vec<(&'static str, serde_json::Value)> {
        use serde_json::json;
        vec![
            ("file", json!(self.file)),
            ("comps", json!(self.comps)),
            ("disabled", json!(self.disabled)),
            ("dist", json!(self.dist)),
            ("type", json!(self.kind)),
            ("uri", json!(self.uri)),
            ("line", json!(self.line)),
            ("architectures", json!(self.architectures)),
            ("signedby", json!(self.signedby)),
        ]
    }
}

/// Launchpad's line for a public PPA (owner, name, distribution).
pub fn ppa_line(owner: &str, name: &str, dist: &str) -> String {
    format!("deb http://ppa.launchpad.net/{owner}/{name}/ubuntu {dist} main")
}

/// Launchpad's line for a private PPA reached with `auth` (`user:password`).
pub fn private_ppa_line(auth: &str, owner: &str, name: &str, dist: &str) -> String {
    format!("deb https://{auth}@private-ppa.launchpad.net/{owner}/{name}/ubuntu {dist} main")
}

/// Whether `os` (the grain) is a distribution whose `ppa:owner/name` definitions Salt expands.
pub fn ppa_os(os: &str) -> bool {
    matches!(os, "Ubuntu" | "Mint" | "neon")
}

/// Salt's `_split_repo_str`: a repository definition's parts.
pub fn split_repo(repo: &str) -> SourceEntry {
    SourceEntry::parse(repo, None)
}

/// Salt's `combine_comments`: comments (a list or one value) as one line.
pub fn combine_comments(comments: &[String]) -> String {
    brine_protocol::pystr::strip(&comments.join(" ")).to_string()
}

/// Salt's `strip_uri`: the trailing `/` of http(s)/ftp URIs in a definition removed.
pub fn strip_uri(repo: &str) -> String {
    brine_protocol::pystr::split(repo)
        .into_iter()
        .map(|w| {
            if ["http://", "https://", "ftp://"]
                .iter()
                .any(|p| w.starts_with(p))
            {
                w.trim_end_matches('/')
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every line of the main list and of `sources.list.d/*.list` (in directory order, as Salt
/// globs them).
#[derive(Debug, Clone, Default)]
pub struct SourcesList {
    pub list: Vec<SourceEntry>,
}

impl SourcesList {
    /// The lists under `apt_dir` (`/etc/apt`).
    pub fn load(apt_dir: &Path) -> std::io::Result<SourcesList> {
        let mut out = SourcesList::default();
        out.add_file(&apt_dir.join("sources.list"))?;
        let dir = apt_dir.join("sources.list.d");
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "list") {
                    out.add_file(&path)?;
                }
            }
        }
        Ok(out)
    }

    fn add_file(&mut self, path: &Path) -> std::io::Result<()> {
        if !path.is_file() {
            return Ok(());
        }
        let bytes = std::fs::read(path)?;
        let text = String::from_utf8_lossy(&bytes);
        let file = path.to_string_lossy();
        for line in text.split_inclusive('\n') {
            self.list.push(SourceEntry::parse(line, Some(&file)));
        }
        Ok(())
    }

    /// Writes every list that has entries, each whole (a list whose entries were all removed
    /// is left as it was, as Salt leaves it).
    pub fn save(&self) -> std::io::Result<()> {
        let mut files: Vec<(&str, String)> = Vec::new();
        for entry in &self.list {
            let text = entry.repo_line();
            match files.iter_mut().find(|(f, _)| *f == entry.file) {
                Some((_, body)) => body.push_str(&text),
                None => files.push((&entry.file, text)),
            }
        }
        for (file, body) in files {
            replace_file(Path::new(file), body.as_bytes())?;
        }
        Ok(())
    }

    /// The repositories (not the comments and malformed lines) by URI, in the order first
    /// seen: Salt's `list_repos`.
    pub fn repos(&self) -> Vec<(String, Vec<RepoInfo>)> {
        let mut out: Vec<(String, Vec<RepoInfo>)> = Vec::new();
        for entry in self.list.iter().filter(|e| !e.invalid) {
            match out.iter_mut().find(|(uri, _)| *uri == entry.uri) {
                Some((_, v)) => v.push(entry.info()),
                None => out.push((entry.uri.clone(), vec![entry.info()])),
            }
        }
        out
    }

    /// Salt's `get_repo` match: the first repository of the same type, URI (trailing `/`
    /// aside) and distribution that has one of the definition's components (any, when it
    /// names none).
    pub fn find(&self, repo: &str) -> Option<RepoInfo> {
        let want = split_repo(repo);
        self.repos().into_iter().flat_map(|(_, v)| v).find(|sub| {
            sub.kind == want.kind
                && sub.uri.trim_end_matches('/') == want.uri.trim_end_matches('/')
                && sub.dist == want.dist
                && (want.comps.is_empty() || want.comps.iter().any(|c| sub.comps.contains(c)))
        })
    }

    /// Salt's `del_repo` on the lists: the definition's components taken out of each
    /// matching entry (same type, architectures, URI and distribution), an entry left with
    /// none removed. The files it was in, each with how many lines stay in it; `None` when
    /// nothing matched.
    pub fn delete(&mut self, repo: &str) -> Option<Vec<(String, usize)>> {
        let want = split_repo(repo);
        let mut touched: Vec<(String, usize)> = Vec::new();
        let mut keep = Vec::with_capacity(self.list.len());
        for mut entry in std::mem::take(&mut self.list) {
            let matches = !entry.invalid
                && entry.kind == want.kind
                && entry.architectures == want.architectures
                && entry.uri.trim_end_matches('/') == want.uri.trim_end_matches('/')
                && entry.dist == want.dist;
            let shares = want.comps.iter().any(|c| entry.comps.contains(c))
                || (entry.comps.is_empty() && want.comps.is_empty());
            if matches && shares {
                if !touched.iter().any(|(f, _)| *f == entry.file) {
                    touched.push((entry.file.clone(), 0));
                }
                let mut left: Vec<String> = entry
                    .comps
                    .iter()
                    .filter(|c| !want.comps.contains(c))
                    .cloned()
                    .collect();
                left.sort();
                left.dedup();
                entry.comps = left;
                if entry.comps.is_empty() {
                    continue;
                }
            }
            keep.push(entry);
        }
        self.list = keep;
        if touched.is_empty() {
            return None;
        }
        for (file, count) in &mut touched {
            *count = self.list.iter().filter(|e| e.file == *file).count();
        }
        Some(touched)
    }

    /// Salt's `_consolidate_repo_sources`: one entry per type, URI, distribution,
    /// architectures and state, with the components of all, in the main list; the other
    /// lists that held repositories are removed. Comments and malformed lines are dropped.
    pub fn consolidate(&mut self) -> std::io::Result<()> {
        let mut merged: Vec<SourceEntry> = Vec::new();
        let mut gone: Vec<String> = Vec::new();
        for entry in self.list.iter().filter(|e| !e.invalid) {
            let same = |m: &&mut SourceEntry| {
                m.architectures == entry.architectures
                    && m.disabled == entry.disabled
                    && m.kind == entry.kind
                    && m.uri == entry.uri
                    && m.dist == entry.dist
            };
            match merged.iter_mut().find(same) {
                Some(m) => {
                    let mut comps: Vec<String> =
                        m.comps.iter().chain(&entry.comps).cloned().collect();
                    comps.sort();
                    comps.dedup();
                    m.comps = comps;
                }
                None => merged.push(SourceEntry::parse(&entry.line, None)),
            }
            if entry.file != SOURCES_LIST && !gone.contains(&entry.file) {
                gone.push(entry.file.clone());
            }
        }
        self.list = merged;
        self.save()?;
        for file in gone {
            let _ = std::fs::remove_file(file);
        }
        Ok(())
    }
}

/// Replaces `path` with `body` (a new file beside it, renamed over it: the list is never
/// seen half written).
fn replace_file(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp: PathBuf = dir.join(format!(".{}.brine-new", name.unwrap_or_default()));
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// How `pkgrepo` spells a definition for comparison (Salt's `_expand_repo_def` on Debian):
/// the definition rebuilt from its type, URI, distribution, components, architectures and
/// `signed-by` (other options dropped), with the state's `comps`, `architectures`, `dist`,
/// `uri`, `signedby` and `disabled` applied.
pub fn expand(repo: &str, given: &ExpandArgs) -> RepoInfo {
    let mut entry = split_repo(repo);
    if let Some(a) = &given.architectures {
        entry.architectures = a.clone();
    }
    if let Some(c) = &given.comps {
        entry.comps = c.clone();
    }
    if let Some(d) = &given.dist {
        entry.dist = d.clone();
    }
    if let Some(u) = &given.uri {
        entry.uri = u.clone();
    }
    if let Some(s) = &given.signedby {
        entry.signedby = s.clone();
    }
    let mut opts = Vec::new();
    if !entry.architectures.is_empty() {
        opts.push(format!("arch={}", entry.architectures.join(",")));
    }
    if !entry.signedby.is_empty() {
        opts.push(format!("signed-by={}", entry.signedby));
    }
    let opts_line = if opts.is_empty() {
        String::new()
    } else {
        format!("[{}]", opts.join(" "))
    };
    let comps = entry.comps.join(" ");
    let words: Vec<&str> = [
        entry.kind.as_str(),
        &opts_line,
        &entry.uri,
        &entry.dist,
        &comps,
    ]
    .into_iter()
    .filter(|w| !brine_protocol::pystr::strip(w).is_empty())
    .collect();
    let mut made = SourceEntry::parse(&words.join(" "), None);
    made.disabled = given.disabled;
    made.line = made.repo_line();
    let mut info = made.info();
    info.signedby = entry.signedby;
    info
}

/// The state arguments [`expand`] applies (lists already split at commas).
#[derive(Debug, Clone, Default)]
pub struct ExpandArgs {
    pub architectures: Option<Vec<String>>,
    pub comps: Option<Vec<String>>,
    pub dist: Option<String>,
    pub uri: Option<String>,
    pub signedby: Option<String>,
    pub disabled: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_write_back_as_salts() {
        let e = SourceEntry::parse(
            "deb [arch=amd64,arm64 signed-by=/etc/apt/keyrings/x.gpg trusted=yes] https://x.example/debian bookworm main contrib # mine\n",
            Some("/etc/apt/sources.list.d/x.list"),
        );
        assert!(!e.invalid && !e.disabled);
        assert_eq!(e.architectures, ["amd64", "arm64"]);
        assert_eq!(e.signedby, "/etc/apt/keyrings/x.gpg");
        assert_eq!(
            (e.kind.as_str(), e.uri.as_str(), e.dist.as_str()),
            ("deb", "https://x.example/debian", "bookworm")
        );
        assert_eq!(e.comps, ["main", "contrib"]);
        assert_eq!(e.comment, " mine");
        assert_eq!(
            e.repo_line(),
            "deb [arch=amd64,arm64 signed-by=/etc/apt/keyrings/x.gpg trusted=yes] https://x.example/debian bookworm main contrib # mine\n"
        );
        let d = SourceEntry::parse("#deb-src  http://a/b  stable main\n", None);
        assert!(d.disabled && !d.invalid);
        assert_eq!(d.repo_line(), "# deb-src http://a/b stable main\n");
        for bad in [
            "\n",
            "# a comment\n",
            "deb http://a\n",
            "deb [arch=amd64 http://a x y\n",
        ] {
            let e = SourceEntry::parse(bad, None);
            assert!(e.invalid, "{bad:?}");
            assert_eq!(e.repo_line(), bad);
        }
        let cd = SourceEntry::parse(
            "# deb cdrom:[Debian GNU/Linux 12.0.0 _Bookworm_ - Official amd64 DVD Binary-1 20230610-10:23]/ bookworm contrib main\n",
            None,
        );
        assert!(cd.disabled && !cd.invalid);
        assert_eq!(cd.uri, "cdrom:[Debian GNU/Linux 12.0.0 _Bookworm_ - Official amd64 DVD Binary-1 20230610-10:23]/");
        assert_eq!(cd.comps, ["contrib", "main"]);
    }

    #[test]
    fn expand_spells_a_definition_as_salt() {
        let info = expand(
            "deb [trusted=yes arch=amd64] http://a/b stable main",
            &ExpandArgs {
                comps: Some(vec!["main".into(), "contrib".into()]),
                ..ExpandArgs::default()
            },
        );
        assert_eq!(info.line, "deb [arch=amd64] http://a/b stable main contrib");
        assert_eq!(info.file, SOURCES_LIST);
        let off = expand(
            "deb http://a/b stable main",
            &ExpandArgs {
                disabled: true,
                ..ExpandArgs::default()
            },
        );
        assert_eq!(off.line, "# deb http://a/b stable main");
        assert_eq!(
            strip_uri("deb http://a/b/ stable main"),
            "deb http://a/b stable main"
        );
    }

    #[test]
    fn lists_are_read_matched_deleted_and_saved() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sources.list.d")).unwrap();
        let list = dir.path().join("sources.list.d/t.list");
        std::fs::write(
            &list,
            "# kept\ndeb http://a/b stable main contrib\ndeb http://c/d/ stable main\n",
        )
        .unwrap();
        let mut s = SourcesList::load(dir.path()).unwrap();
        assert_eq!(s.list.len(), 3);
        assert_eq!(s.repos().len(), 2);
        assert_eq!(s.find("deb http://c/d stable").unwrap().uri, "http://c/d/");
        assert!(s.find("deb http://c/d stable contrib").is_none());
        let touched = s.delete("deb http://a/b stable contrib").unwrap();
        assert_eq!(touched, [(list.to_string_lossy().into_owned(), 3)]);
        s.save().unwrap();
        assert_eq!(
            std::fs::read_to_string(&list).unwrap(),
            "# kept\ndeb http://a/b stable main\ndeb http://c/d/ stable main\n"
        );
        assert!(s.delete("deb http://x/y stable main").is_none());
    }
}
