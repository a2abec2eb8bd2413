//! `ext_pillar: [{file_tree: {root_dir: ...}}]`: a directory tree as pillar. The files under
//! `<root_dir>/hosts/<minion id>/` and `<root_dir>/nodegroups/<group>/` (for the nodegroups
//! the minion is in) become keys whose values are the files' bytes; directories become
//! nested mappings. Salt's `salt/pillar/file_tree.py` options: `root_dir` (relative to the
//! pillarenv's `pillar_roots`), `follow_dir_links`, `keep_newline` (a bool or globs), and
//! `template` with `render_default`.

use std::path::{Path, PathBuf};

use brine_protocol::payload::{from_json, Value};
use brine_protocol::target::fnmatch;

use super::merged;
use super::ExtContext;
use crate::fileserver::MAX_TEMPLATE_SIZE;
use brine_protocol::dictupdate::Strategy;

/// Directory levels walked at most.
const MAX_DEPTH: usize = 64;

struct Options {
    follow_dir_links: bool,
    /// `keep_newline`: `Ok(bool)` or `Err(globs)`.
    keep_newline: Result<bool, Vec<String>>,
    template: bool,
    render_default: String,
}

fn conf_get<'a>(conf: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    conf.get(key).filter(|v| !v.is_null())
}

/// The pillar of one minion from the `file_tree` configured by `conf`.
pub fn ext_pillar(cx: &ExtContext, conf: &serde_json::Value) -> Result<Value, String> {
    let empty = || Ok(Value::Map(Vec::new()));
    let root_dir = match conf_get(conf, "root_dir") {
        Some(serde_json::Value::String(r)) if !r.is_empty() => r.clone(),
        _ => {
            tracing::error!("file_tree: no root_dir specified");
            return empty();
        }
    };
    let keep_newline = match conf_get(conf, "keep_newline") {
        None => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(serde_json::Value::Array(globs)) => Err(globs
            .iter()
            .map(|g| g.as_str().map_or_else(|| g.to_string(), str::to_string))
            .collect()),
        Some(_) => {
            tracing::error!(
                "file_tree: keep_newline must be either True/False or a list of file globs"
            );
            return empty();
        }
    };
    let opts = Options {
        follow_dir_links: conf_get(conf, "follow_dir_links").is_some_and(|v| v == true),
        keep_newline,
        template: conf_get(conf, "template").is_some_and(|v| v == true),
        render_default: conf_get(conf, "render_default")
            .and_then(|v| v.as_str())
            .unwrap_or(cx.renderer)
            .to_string(),
    };
    let dirs: Vec<PathBuf> = if Path::new(&root_dir).is_absolute() {
        vec![PathBuf::from(&root_dir)]
    } else {
        let Some(pillarenv) = cx.pillarenv else {
            tracing::error!("file_tree: root_dir is relative but pillarenv is not set");
            return empty();
        };
        let Some(roots) = cx.pillar_roots.iter().find(|(e, _)| e == pillarenv) else {
            tracing::error!(
                "file_tree: root_dir is relative but no pillar_roots are specified for pillarenv {pillarenv}"
            );
            return empty();
        };
        roots
            .1
            .iter()
            .map(|r| Path::new(r).join(&root_dir))
            .collect()
    };
    let mut result = Value::Map(Vec::new());
    for dir in dirs {
        let found = one_root(cx, &dir, &opts);
        result = merged(result, &found, Strategy::Recurse, false);
    }
    Ok(result)
}

fn one_root(cx: &ExtContext, root: &Path, opts: &Options) -> Value {
    let mut pillar = Value::Map(Vec::new());
    if !root.is_dir() {
        tracing::error!(
            "file_tree: root_dir {} does not exist or is not a directory",
            root.display()
        );
        return pillar;
    }
    let groups_dir = root.join("nodegroups");
    if groups_dir.is_dir() && !cx.nodegroups.is_empty() {
        for group in sorted_names(&groups_dir) {
            if cx.nodegroups.contains_key(&group) && cx.in_nodegroup(&group) {
                let found = construct(&groups_dir.join(&group), opts, cx);
                pillar = merged(pillar, &found, Strategy::Recurse, false);
            }
        }
    }
    let host_dir = root.join("hosts").join(cx.id);
    if host_dir.is_dir() {
        let found = construct(&host_dir, opts, cx);
        pillar = merged(pillar, &found, Strategy::Recurse, false);
    }
    pillar
}

fn sorted_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn construct(top: &Path, opts: &Options, cx: &ExtContext) -> Value {
    walk(top, "", opts, cx, 0)
}

fn walk(dir: &Path, prefix: &str, opts: &Options, cx: &ExtContext, depth: usize) -> Value {
    let mut node = Vec::new();
    if depth > MAX_DEPTH {
        tracing::error!("file_tree: {} is nested too deeply", dir.display());
        return Value::Map(node);
    }
    for name in sorted_names(dir) {
        let path = dir.join(&name);
        let Ok(link_meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        // Salt matches keep_newline globs against `<dir relative to the top>/<name>`, the
        // top itself being `.`.
        let rel = if prefix.is_empty() {
            format!("./{name}")
        } else {
            format!("{prefix}/{name}")
        };
        let is_dir = path.is_dir();
        if is_dir {
            let walk_in = !link_meta.file_type().is_symlink() || opts.follow_dir_links;
            let sub = rel.strip_prefix("./").unwrap_or(&rel);
            let value = if walk_in {
                walk(&path, sub, opts, cx, depth + 1)
            } else {
                Value::Map(Vec::new())
            };
            node.push((Value::from(name.as_str()), value));
            continue;
        }
        if !path.is_file() {
            tracing::error!("file_tree: {}: not a regular file", path.display());
            continue;
        }
        match read(&path) {
            Ok(mut bytes) => {
                if bytes.ends_with(b"\n") && strip_newline(&opts.keep_newline, &rel) {
                    bytes.pop();
                }
                let value = if opts.template {
                    match render(cx, &bytes, &path, &opts.render_default) {
                        Ok(v) => v,
                        Err(e) => {
                            tracing::error!("file_tree: {}: {e}", path.display());
                            continue;
                        }
                    }
                } else {
                    Value::Binary(bytes)
                };
                node.push((Value::from(name.as_str()), value));
            }
            Err(e) => tracing::error!("file_tree: Error reading {}: {e}", path.display()),
        }
    }
    Value::Map(node)
}

fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_TEMPLATE_SIZE)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn strip_newline(keep: &Result<bool, Vec<String>>, rel: &str) -> bool {
    match keep {
        Ok(keep) => !keep,
        Err(globs) => !globs.iter().any(|g| fnmatch(g, rel)),
    }
}

fn render(cx: &ExtContext, bytes: &[u8], path: &Path, pipeline: &str) -> Result<Value, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let ctx = brine_render::Context {
        renderer: pipeline.to_string(),
        ..cx.render_context(String::new())
    };
    let name = path.to_string_lossy();
    brine_render::render_sls(text, &name, &ctx, cx.loader(), cx.functions())
        .map(|v| from_json(&v))
        .map_err(|e| e.to_string())
}
