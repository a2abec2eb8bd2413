//! `file_roots.*`: what the file server's roots hold, seen from the wheel. Writing into the
//! roots (`file_roots.write`) is refused: in Salt it let any wheel caller write files on the
//! master (CVE-2021-25282), and Brine does not offer it.

use brine_protocol::payload::Value;

use super::{Args, Wheel};
use crate::master::Master;

pub const FUNCTIONS: &[Wheel] = &[
    Wheel {
        name: "file_roots.list_env",
        args: &["saltenv=base"],
        doc: "Return the tree of each root of a saltenv: {root: {dir: {...}, file: 'f'}} (symlinks that leave the root left out).\n\nCLI Example:\n\n    salt-run wheel file_roots.list_env saltenv=base\n",
        run: |m, a| {
            let saltenv = a.get_str(0, "saltenv").unwrap_or_else(|| "base".into());
            Ok(list_env(m, &saltenv))
        },
    },
    Wheel {
        name: "file_roots.list_roots",
        args: &[],
        doc: "Return the trees of every saltenv: {saltenv: [list_env of it]}.\n\nCLI Example:\n\n    salt-run wheel file_roots.list_roots\n",
        run: |m, _| {
            Ok(Value::Map(
                m.fileserver
                    .envs()
                    .into_iter()
                    .map(|env| {
                        let tree = list_env(m, &env);
                        (Value::from(env), Value::Array(vec![tree]))
                    })
                    .collect(),
            ))
        },
    },
    Wheel {
        name: "file_roots.write",
        args: &["data", "path", "saltenv=base", "index=0"],
        doc: "Refused: Brine does not write into file_roots from the wheel (Salt's file_roots.write allowed writing arbitrary files on the master, CVE-2021-25282). Put files in file_roots with the tools that manage the master's disk.\n",
        run: |_, _: &Args| {
            Err("file_roots.write is refused by Brine: writing into file_roots through the wheel is not allowed (CVE-2021-25282)".into())
        },
    },
];

/// `{root: tree}` for each root of `saltenv` (`{}` for an unknown saltenv).
fn list_env(m: &Master, saltenv: &str) -> Value {
    if !m.cfg.file_roots.contains_key(saltenv) {
        return Value::Map(vec![]);
    }
    match m.fileserver.roots_of(saltenv) {
        Some(roots) => trees(&roots, m.cfg.fileserver_followsymlinks),
        None => Value::Map(vec![]),
    }
}

/// `{root: {dir: {...}, file: 'f'}}` for each of `roots` (symlinks that leave a root left
/// out).
pub(crate) fn trees(roots: &[std::path::PathBuf], follow: bool) -> Value {
    let mut out = Vec::new();
    for root in roots {
        let lists = crate::fileserver::walk::walk(
            std::slice::from_ref(root),
            &crate::fileserver::Ignore::new(&[], &[]),
            follow,
            false,
        );
        let mut tree = Value::Map(vec![]);
        for (rel, leaf) in lists
            .dirs
            .iter()
            .map(|d| (d, Value::Map(vec![])))
            .chain(lists.files.iter().map(|f| (f, Value::from("f"))))
        {
            insert(&mut tree, rel, leaf);
        }
        out.push((Value::from(root.to_string_lossy().into_owned()), tree));
    }
    Value::Map(out)
}

/// Put `leaf` at the `/`-separated `rel` in nested maps.
fn insert(tree: &mut Value, rel: &str, leaf: Value) {
    let mut node = tree;
    let mut parts = rel.split('/').peekable();
    while let Some(part) = parts.next() {
        let Value::Map(entries) = node else { return };
        let idx = match entries.iter().position(|(k, _)| k.as_str() == Some(part)) {
            Some(i) => i,
            None => {
                let value = if parts.peek().is_none() {
                    leaf.clone()
                } else {
                    Value::Map(vec![])
                };
                entries.push((Value::from(part), value));
                entries.len() - 1
            }
        };
        if parts.peek().is_none() {
            return;
        }
        node = &mut entries[idx].1;
    }
}
