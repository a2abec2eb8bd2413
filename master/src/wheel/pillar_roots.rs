//! `pillar_roots.*`: what `pillar_roots` holds, seen from the wheel. Writing into the roots
//! (`pillar_roots.write`) is refused: in Salt it let any wheel caller write files on the
//! master (CVE-2021-25282), and Brine does not offer it.

use brine_protocol::payload::Value;

use super::{Args, Wheel};
use crate::master::Master;

pub const FUNCTIONS: &[Wheel] = &[
    Wheel {
        name: "pillar_roots.list_env",
        args: &["saltenv=base"],
        doc: "Return the tree of each pillar root of a saltenv: {root: {dir: {...}, file: 'f'}} (symlinks that leave the root left out).\n\nCLI Example:\n\n    salt-run wheel pillar_roots.list_env saltenv=base\n",
        run: |m, a| {
            let saltenv = a.get_str(0, "saltenv").unwrap_or_else(|| "base".into());
            Ok(list_env(m, &saltenv))
        },
    },
    Wheel {
        name: "pillar_roots.list_roots",
        args: &[],
        doc: "Return the trees of every pillar saltenv: {saltenv: [list_env of it]}.\n\nCLI Example:\n\n    salt-run wheel pillar_roots.list_roots\n",
        run: |m, _| {
            Ok(Value::Map(
                m.cfg
                    .pillar_roots
                    .iter()
                    .map(|(env, _)| {
                        let tree = list_env(m, env);
                        (Value::from(env.as_str()), Value::Array(vec![tree]))
                    })
                    .collect(),
            ))
        },
    },
    Wheel {
        name: "pillar_roots.write",
        args: &["data", "path", "saltenv=base", "index=0"],
        doc: "Refused: Brine does not write into pillar_roots from the wheel (Salt's pillar_roots.write allowed writing arbitrary files on the master, CVE-2021-25282). Put files in pillar_roots with the tools that manage the master's disk.\n",
        run: |_, _: &Args| {
            Err("pillar_roots.write is refused by Brine: writing into pillar_roots through the wheel is not allowed (CVE-2021-25282)".into())
        },
    },
];

/// `{root: tree}` for each pillar root of `saltenv` (`{}` for an unknown saltenv).
fn list_env(m: &Master, saltenv: &str) -> Value {
    if !m.cfg.pillar_roots.iter().any(|(env, _)| env == saltenv) {
        return Value::Map(vec![]);
    }
    match m.pillars.roots().roots_of(saltenv) {
        Some(roots) => super::file_roots::trees(&roots, m.cfg.fileserver_followsymlinks),
        None => Value::Map(vec![]),
    }
}
