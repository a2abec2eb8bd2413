//! `fileserver.*`: the master's file server seen from `salt-run` (the `roots` backend, the
//! only one Brine has).

use brine_protocol::payload::Value;

use super::{ready, Call, Runner};
use crate::fileserver::Lists;

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "fileserver.clear_cache",
        args: &["backend=None"],
        doc: "Clear the file server cache of the VCS backends (gitfs, hgfs, svnfs). The roots backend has none to clear, so with roots alone this answers 'No cache was cleared' (Brine drops its cached file lists and hashes all the same; they are rebuilt on the next request).\n\nCLI Example:\n\n    salt-run fileserver.clear_cache\n",
        run: |c| {
            c.master.fileserver.clear();
            ready(Ok(Value::from("No cache was cleared")))
        },
    },
    Runner {
        name: "fileserver.dir_list",
        args: &["saltenv=base", "backend=None"],
        doc: "Return the directories of a saltenv on the file server, sorted.\n\nCLI Example:\n\n    salt-run fileserver.dir_list\n    salt-run fileserver.dir_list saltenv=prod\n",
        run: |c| ready(Ok(list(&c, |l| &l.dirs))),
    },
    Runner {
        name: "fileserver.empty_dir_list",
        args: &["saltenv=base", "backend=None"],
        doc: "Return the empty directories of a saltenv on the file server, sorted.\n\nCLI Example:\n\n    salt-run fileserver.empty_dir_list\n    salt-run fileserver.empty_dir_list saltenv=prod\n",
        run: |c| ready(Ok(list(&c, |l| &l.empty_dirs))),
    },
    Runner {
        name: "fileserver.envs",
        args: &["backend=None", "sources=False"],
        doc: "Return the saltenvs of the file server, sorted.\n\nCLI Example:\n\n    salt-run fileserver.envs\n",
        run: |c| {
            let envs = if roots_selected(&c, 0) {
                c.master.fileserver.envs()
            } else {
                vec![]
            };
            ready(Ok(Value::Array(envs.into_iter().map(Value::from).collect())))
        },
    },
    Runner {
        name: "fileserver.file_list",
        args: &["saltenv=base", "backend=None"],
        doc: "Return the files of a saltenv on the file server, sorted.\n\nCLI Example:\n\n    salt-run fileserver.file_list\n    salt-run fileserver.file_list saltenv=prod\n",
        run: |c| ready(Ok(list(&c, |l| &l.files))),
    },
    Runner {
        name: "fileserver.symlink_list",
        args: &["saltenv=base", "backend=None"],
        doc: "Return the symlinks of a saltenv on the file server: {path: link target} (symlinks that leave the roots are left out).\n\nCLI Example:\n\n    salt-run fileserver.symlink_list\n    salt-run fileserver.symlink_list saltenv=prod\n",
        run: |c| ready(Ok(symlinks(&c))),
    },
    Runner {
        name: "fileserver.update",
        args: &["backend=None", "**kwargs"],
        doc: "Update the file server cache: the file lists and hashes are read again from file_roots on the next request. Returns True.\n\nCLI Example:\n\n    salt-run fileserver.update\n",
        run: |c| {
            c.master.fileserver.clear();
            ready(Ok(Value::from(true)))
        },
    },
];

/// Whether the `backend` argument (absent, `roots`, a list or a comma-separated list, or
/// only exclusions like `-git`) selects the roots backend.
fn roots_selected(c: &Call, pos: usize) -> bool {
    let Some(backends) = c.args.get_list(pos, "backend") else {
        return true;
    };
    let names: Vec<String> = backends
        .iter()
        .flat_map(|b| b.split(','))
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty())
        .collect();
    if names.is_empty() {
        return true;
    }
    if names.iter().all(|b| b.starts_with('-')) {
        return !names.iter().any(|b| b == "-roots");
    }
    names.iter().any(|b| b == "roots")
}

fn list(c: &Call, pick: fn(&Lists) -> &Vec<String>) -> Value {
    let saltenv = c.args.get_str(0, "saltenv").unwrap_or_else(|| "base".into());
    if !roots_selected(c, 1) {
        return Value::Array(vec![]);
    }
    match c.master.fileserver.lists(&saltenv) {
        Some(l) => Value::Array(pick(&l).iter().map(|f| Value::from(f.as_str())).collect()),
        None => Value::Array(vec![]),
    }
}

fn symlinks(c: &Call) -> Value {
    let saltenv = c.args.get_str(0, "saltenv").unwrap_or_else(|| "base".into());
    let links = match c.master.fileserver.lists(&saltenv) {
        Some(l) if roots_selected(c, 1) => l
            .links
            .iter()
            .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
            .collect(),
        _ => vec![],
    };
    Value::Map(links)
}
