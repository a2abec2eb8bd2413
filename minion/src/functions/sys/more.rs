//! The `sys` functions about what is not an execution module: state modules, renderers,
//! returners and runners, and the argument specifications of functions.

use brine_protocol::catalog::RUNNERS;
use rmpv::Value;

use super::super::args::{py_str, Bound, Signature};
use super::super::Spec;
use super::{all_specs, fnmatch, Fun};

/// The renderers Brine's renderer pipeline runs (`#!jinja|yaml`, ...).
const RENDERERS: &[(&str, &str)] = &[
    (
        "gpg",
        "
Renderer that decrypts GPG ciphers

Every PGP message block in the rendered data is decrypted with the keys of the
gpg_keydir option (by default the gpgkeys directory next to the configuration
file), for example in a #!yaml|gpg pillar file.
",
    ),
    (
        "jinja",
        "
Jinja loading utils to enable a more powerful backend for jinja templates

The Jinja renderer: render the input as a Jinja template, with the minion's
grains, pillar, opts and salt functions in its context.
",
    ),
    (
        "json",
        "
JSON Renderer for Salt
",
    ),
    (
        "yaml",
        "
YAML Renderer for Salt

For YAML usage information see :ref:`Understanding YAML <yaml>`.
",
    ),
];

/// The spec of a function of this file, `None` for the others.
pub(super) fn spec(fun: Fun) -> Option<Spec> {
    let (name, pyname, sig, doc) = match fun {
        Fun::ListStateModules => (
            "sys.list_state_modules",
            "list_state_modules",
            Signature::new(&[], 0, true, false),
            "
    List the modules loaded on the minion

    CLI Example:

        salt '*' sys.list_state_modules

    State module names can be specified as globs.

        salt '*' sys.list_state_modules 'mysql_*'
    ",
        ),
        Fun::ListStateFunctions => (
            "sys.list_state_functions",
            "list_state_functions",
            Signature::new(&[], 0, true, true),
            "
    List the functions for all state modules. Optionally, specify a state
    module or modules from which to list.

    CLI Example:

        salt '*' sys.list_state_functions
        salt '*' sys.list_state_functions file
        salt '*' sys.list_state_functions pkg user

    State function names can be specified as globs.

        salt '*' sys.list_state_functions 'file.*'
        salt '*' sys.list_state_functions 'file.s*'
    ",
        ),
        Fun::StateDoc => (
            "sys.state_doc",
            "state_doc",
            Signature::new(&[], 0, true, false),
            "
    Return the docstrings for all states. Optionally, specify a state or a
    function to narrow the selection.

    Multiple states/functions can be specified.

    CLI Example:

        salt '*' sys.state_doc
        salt '*' sys.state_doc service
        salt '*' sys.state_doc service.running

    State names can be specified as globs.

        salt '*' sys.state_doc 'service.*' 'iptables.*'
    ",
        ),
        Fun::StateArgspec => (
            "sys.state_argspec",
            "state_argspec",
            Signature::new(&["module"], 0, false, false),
            "
    Return the argument specification of functions in Salt state
    modules.

    CLI Example:

        salt '*' sys.state_argspec pkg.installed
        salt '*' sys.state_argspec file
        salt '*' sys.state_argspec

    State names can be specified as globs.

        salt '*' sys.state_argspec 'pkg.*'
    ",
        ),
        Fun::Argspec => (
            "sys.argspec",
            "argspec",
            Signature::new(&["module"], 0, false, false),
            "
    Return the argument specification of functions in Salt execution
    modules.

    CLI Example:

        salt '*' sys.argspec pkg.install
        salt '*' sys.argspec sys
        salt '*' sys.argspec

    Module names can be specified as globs.

        salt '*' sys.argspec 'pkg.*'
    ",
        ),
        Fun::ListRenderers => (
            "sys.list_renderers",
            "list_renderers",
            Signature::new(&[], 0, true, false),
            "
    List the renderers loaded on the minion

    CLI Example:

        salt '*' sys.list_renderers

    Render names can be specified as globs.

        salt '*' sys.list_renderers 'yaml*'
    ",
        ),
        Fun::RendererDoc => (
            "sys.renderer_doc",
            "renderer_doc",
            Signature::new(&[], 0, true, false),
            "
    Return the docstrings for all renderers. Optionally, specify a renderer or a
    function to narrow the selection.

    Multiple renderers can be specified.

    CLI Example:

        salt '*' sys.renderer_doc
        salt '*' sys.renderer_doc cheetah
        salt '*' sys.renderer_doc jinja json

    Renderer names can be specified as globs.

        salt '*' sys.renderer_doc 'c*' 'j*'
    ",
        ),
        Fun::ListReturners => (
            "sys.list_returners",
            "list_returners",
            Signature::new(&[], 0, true, false),
            "
    List the returners loaded on the minion

    CLI Example:

        salt '*' sys.list_returners

    Returner names can be specified as globs.

        salt '*' sys.list_returners 's*'
    ",
        ),
        Fun::ReturnerDoc => (
            "sys.returner_doc",
            "returner_doc",
            Signature::new(&[], 0, true, false),
            "
    Return the docstrings for all returners. Optionally, specify a returner or a
    function to narrow the selection.

    Multiple returners/functions can be specified.

    CLI Example:

        salt '*' sys.returner_doc
        salt '*' sys.returner_doc sqlite3
        salt '*' sys.returner_doc sqlite3.get_fun
    ",
        ),
        Fun::ListRunners => (
            "sys.list_runners",
            "list_runners",
            Signature::new(&[], 0, true, false),
            "
    List the runners loaded on the minion

    CLI Example:

        salt '*' sys.list_runners

    Runner names can be specified as globs.

        salt '*' sys.list_runners 'm*'
    ",
        ),
        Fun::ReloadModules => (
            "sys.reload_modules",
            "reload_modules",
            Signature::NONE,
            "
    Tell the minion to reload the execution modules

    CLI Example:

        salt '*' sys.reload_modules
    ",
        ),
        _ => return None,
    };
    Some(Spec {
        name,
        pyname,
        sig,
        doc,
        out: None,
    })
}

fn strings(items: impl IntoIterator<Item = String>) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

/// Salt's `list_state_modules`/`list_runners`/`list_returners`: the modules of `funs`
/// (`mod.fun`), all of them, those a glob selects among the functions, or those named.
fn modules_of(funs: &[String], patterns: &[String]) -> Vec<String> {
    let module = |f: &String| f.split('.').next().unwrap_or_default().to_string();
    let mut out: Vec<String> = if patterns.is_empty() {
        funs.iter().map(module).collect()
    } else {
        funs.iter()
            .filter(|f| {
                patterns.iter().any(|p| {
                    if p.contains('*') {
                        fnmatch(p, f)
                    } else {
                        module(f) == *p
                    }
                })
            })
            .map(module)
            .collect()
    };
    out.sort();
    out.dedup();
    out
}

/// Salt's `list_state_functions`: all, those a glob or dotted name selects, or a module's.
fn functions_of(funs: &[String], patterns: &[String]) -> Vec<String> {
    let mut out: Vec<String> = funs
        .iter()
        .filter(|f| {
            patterns.is_empty()
                || patterns.iter().any(|p| {
                    if p.contains('*') || p.contains('.') {
                        fnmatch(p, f)
                    } else {
                        f.starts_with(&format!("{p}."))
                    }
                })
        })
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Salt's `argspec_report` over `(name, args, defaulted, varargs, kwargs)`: a glob or dotted
/// name as a glob, else a module's functions (`""` selects none).
fn argspec_report(
    funs: impl Iterator<Item = (String, Vec<String>, usize, bool, bool)>,
    module: &str,
) -> Value {
    let glob = module.contains('*') || module.contains('.');
    let entries = funs
        .filter(|(name, ..)| {
            if glob {
                fnmatch(module, name)
            } else {
                name.starts_with(&format!("{module}."))
            }
        })
        .map(|(name, args, defaulted, varargs, kwargs)| {
            let or_nil = |on: bool| if on { Value::Boolean(true) } else { Value::Nil };
            let spec = brine_protocol::payload::map(vec![
                (
                    "args",
                    if args.is_empty() {
                        Value::Nil
                    } else {
                        strings(args)
                    },
                ),
                (
                    "defaults",
                    if defaulted == 0 {
                        Value::Nil
                    } else {
                        Value::Array(vec![Value::Nil; defaulted])
                    },
                ),
                ("varargs", or_nil(varargs)),
                ("kwargs", or_nil(kwargs)),
            ]);
            (Value::from(name), spec)
        });
    Value::Map(entries.collect())
}

/// The generated docstring of a state function (Brine's state modules carry none).
fn state_fun_doc(full: &str) -> String {
    let spec = brine_state::states::lookup(full);
    let required = spec.map(|s| s.required.join(", ")).unwrap_or_default();
    format!(
        "\n    The state function {full}, as Salt 3007's (see its documentation).\n\n    Required arguments: {required}\n    "
    )
}

/// Run one of this file's functions; `None` for the others.
pub(super) fn run(fun: Fun, b: &Bound, patterns: &[String]) -> Option<Value> {
    let module_arg = || b.get("module").map(py_str).unwrap_or_default();
    let states = brine_state::states::list;
    let runners = || RUNNERS.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
    Some(match fun {
        Fun::ListStateModules => strings(modules_of(&states(), patterns)),
        Fun::ListStateFunctions => strings(functions_of(&states(), patterns)),
        Fun::ListRunners => strings(modules_of(&runners(), patterns)),
        // Brine's minion has no returners of its own: jobs return to the master.
        Fun::ListReturners => Value::Array(Vec::new()),
        Fun::ReturnerDoc => Value::Map(Vec::new()),
        // Salt's minion answers it with its `gen_modules`, which returns None.
        Fun::ReloadModules => Value::Nil,
        Fun::ListRenderers => {
            let mut names: Vec<String> = RENDERERS
                .iter()
                .map(|(n, _)| n.to_string())
                .filter(|n| patterns.is_empty() || patterns.iter().any(|p| fnmatch(p, n)))
                .collect();
            names.sort();
            strings(names)
        }
        Fun::RendererDoc => Value::Map(
            RENDERERS
                .iter()
                .filter(|(n, _)| {
                    patterns.is_empty()
                        || patterns.iter().any(|p| {
                            if p.contains('*') || p.contains('.') {
                                fnmatch(p, n)
                            } else {
                                n.starts_with(&format!("{p}."))
                            }
                        })
                })
                .map(|(n, d)| (Value::from(*n), Value::from(*d)))
                .collect(),
        ),
        Fun::StateDoc => {
            let mut docs: Vec<(Value, Value)> = Vec::new();
            for full in states() {
                let selected = patterns.is_empty()
                    || patterns.iter().any(|p| {
                        if p.contains('*') {
                            fnmatch(p, &full)
                        } else if p.is_empty() {
                            true
                        } else {
                            let prefix = if p.ends_with('.') { p.clone() } else { format!("{p}.") };
                            full == *p || full.starts_with(&prefix)
                        }
                    });
                if selected {
                    docs.push((Value::from(full.as_str()), Value::from(state_fun_doc(&full))));
                }
            }
            Value::Map(docs)
        }
        Fun::StateArgspec => argspec_report(
            states().into_iter().map(|full| {
                let args = brine_state::states::lookup(&full)
                    .map(|s| s.required.iter().map(|a| a.to_string()).collect())
                    .unwrap_or_default();
                (full, args, 0, false, true)
            }),
            &module_arg(),
        ),
        Fun::Argspec => argspec_report(
            all_specs().into_iter().map(|spec: Spec| {
                let sig = spec.sig;
                (
                    spec.name.to_string(),
                    sig.params.iter().map(|p| p.to_string()).collect(),
                    sig.params.len() - sig.required,
                    sig.varargs,
                    sig.kwargs,
                )
            }),
            &module_arg(),
        ),
        _ => return None,
    })
}
