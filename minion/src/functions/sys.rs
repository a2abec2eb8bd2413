//! The `sys` execution module: what functions this minion has, and their docs.

use brine_protocol::catalog::RUNNERS;
use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::{CallState, Context};
use super::{FnError, Function, Spec};
use brine_protocol::payload::map;

/// The functions of the `sys` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Doc,
    ListFunctions,
    ListModules,
    ListRunnerFunctions,
    RunnerDoc,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Doc,
        Fun::ListFunctions,
        Fun::ListModules,
        Fun::ListRunnerFunctions,
        Fun::RunnerDoc,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::Doc => (
                "sys.doc",
                "doc",
                Signature::new(&[], 0, true, false),
                "
    Return the docstrings of functions: all of them, those of a module
    ('test'), one function ('test.ping') or a glob ('test.*').

    CLI Example:

        salt '*' sys.doc cmd
    ",
            ),
            Fun::ListFunctions => (
                "sys.list_functions",
                "list_functions",
                Signature::new(&[], 0, true, true),
                "
    List the functions available on the minion, optionally only those of the
    given modules or matching the given globs.

    CLI Example:

        salt '*' sys.list_functions test 'cmd.run*'
    ",
            ),
            Fun::ListModules => (
                "sys.list_modules",
                "list_modules",
                Signature::new(&[], 0, true, false),
                "
    List the execution modules available on the minion, optionally only those
    matching the given names or globs.

    CLI Example:

        salt '*' sys.list_modules 's*'
    ",
            ),
            Fun::ListRunnerFunctions => (
                "sys.list_runner_functions",
                "list_runner_functions",
                Signature::new(&[], 0, true, false),
                "
    List the runner functions of the master, optionally only those of the
    given modules or matching the given globs.

    CLI Example:

        salt '*' sys.list_runner_functions jobs 'test.*'
    ",
            ),
            Fun::RunnerDoc => (
                "sys.runner_doc",
                "runner_doc",
                Signature::new(&[], 0, true, false),
                "
    Return the docstrings of the master's runner functions: all of them, those
    of a module ('jobs'), one function or a glob.

    CLI Example:

        salt '*' sys.runner_doc jobs
    ",
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(
        self,
        _ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let patterns: Vec<String> = b.varargs.iter().map(py_str).collect();
        Ok(match self {
            Fun::Doc => docs(&patterns),
            Fun::ListFunctions => strings(list_functions(&patterns)),
            Fun::ListModules => strings(list_modules(&patterns)),
            Fun::ListRunnerFunctions => strings(list_runner_functions(&patterns)),
            Fun::RunnerDoc => runner_docs(&patterns),
        })
    }
}

fn strings(items: Vec<&'static str>) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

fn all_specs() -> Vec<Spec> {
    let mut specs: Vec<Spec> = Function::all().map(Function::spec).collect();
    specs.sort_by_key(|s| s.name);
    specs
}

/// `sys.doc`: `{"mod.fun": "docstring"}` for the functions the patterns select.
pub(crate) fn docs(patterns: &[String]) -> Value {
    let specs = all_specs();
    let selected = specs.iter().filter(|spec| doc_selects(patterns, spec.name));
    map(selected.map(|spec| (spec.name, Value::from(spec.doc))))
}

/// `sys.doc`'s rule: a glob, a module (`test`, `test.`), a function, or everything.
fn doc_selects(patterns: &[String], name: &str) -> bool {
    patterns.is_empty()
        || patterns.iter().any(|p| {
            if p.contains('*') {
                fnmatch(p, name)
            } else if p.is_empty() {
                true
            } else {
                let prefix = if p.ends_with('.') {
                    p.clone()
                } else {
                    format!("{p}.")
                };
                name == p || name.starts_with(&prefix)
            }
        })
}

/// `sys.list_functions`' rule: a glob or dotted name matched as a glob, else a module.
fn list_selects(patterns: &[String], name: &str) -> bool {
    patterns.is_empty()
        || patterns.iter().any(|p| {
            if p.contains('*') || p.contains('.') {
                fnmatch(p, name)
            } else {
                name.starts_with(&format!("{p}."))
            }
        })
}

/// `sys.list_functions`.
pub(crate) fn list_functions(patterns: &[String]) -> Vec<&'static str> {
    super::list_functions()
        .into_iter()
        .filter(|name| list_selects(patterns, name))
        .collect()
}

/// `sys.list_runner_functions`: the runner functions of the master this minion belongs to
/// (Brine's master runs the runners in [`brine_protocol::catalog::RUNNERS`]).
fn list_runner_functions(patterns: &[String]) -> Vec<&'static str> {
    RUNNERS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| list_selects(patterns, name))
        .collect()
}

/// `sys.runner_doc`.
fn runner_docs(patterns: &[String]) -> Value {
    map(RUNNERS
        .iter()
        .filter(|(name, _)| doc_selects(patterns, name))
        .map(|(name, doc)| (*name, Value::from(*doc))))
}

/// `sys.list_modules`.
pub(crate) fn list_modules(patterns: &[String]) -> Vec<&'static str> {
    let mut modules: Vec<&'static str> = super::list_functions()
        .into_iter()
        .map(|name| name.split('.').next().unwrap_or(name))
        .filter(|module| {
            patterns.is_empty()
                || patterns.iter().any(|p| {
                    if p.contains('*') {
                        fnmatch(p, module)
                    } else {
                        p == module
                    }
                })
        })
        .collect();
    modules.dedup();
    modules
}

pub(crate) use brine_protocol::target::fnmatch;

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::get;

    #[test]
    fn fnmatch_globs() {
        assert!(fnmatch("test.*", "test.ping"));
        assert!(fnmatch("cmd.run*", "cmd.run_all"));
        assert!(!fnmatch("cmd.run*", "cmd.retcode"));
        assert!(fnmatch("t?st.[ep]ing", "test.ping"));
        assert!(fnmatch("[!c]*", "test"));
        assert!(!fnmatch("[!t]*", "test"));
        assert!(fnmatch("[a-z]est", "test"));
    }

    #[tokio::test]
    async fn list_functions_by_module_and_glob() {
        let r = call(&ctx(), "sys.list_functions", &[s("test")]).await;
        let names: Vec<&str> = r
            .ret
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(names.contains(&"test.ping") && names.contains(&"test.versions_report"));
        assert!(names.iter().all(|n| n.starts_with("test.")));
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        let r = call(&ctx(), "sys.list_functions", &[s("cmd.run*")]).await;
        assert_eq!(
            r.ret,
            Value::Array(
                ["cmd.run", "cmd.run_all", "cmd.run_stderr", "cmd.run_stdout"]
                    .map(Value::from)
                    .to_vec()
            )
        );
        let all = call(&ctx(), "sys.list_functions", &[]).await;
        assert_eq!(
            all.ret.as_array().unwrap().len(),
            crate::functions::list_functions().len()
        );
    }

    #[tokio::test]
    async fn runner_functions_and_docs_come_from_the_masters_table() {
        let r = call(&ctx(), "sys.list_runner_functions", &[s("jobs")]).await;
        let names: Vec<&str> = r
            .ret
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(names.contains(&"jobs.lookup_jid") && names.iter().all(|n| n.starts_with("jobs.")));
        let all = call(&ctx(), "sys.list_runner_functions", &[]).await;
        assert_eq!(all.ret.as_array().unwrap().len(), RUNNERS.len());
        let d = call(&ctx(), "sys.runner_doc", &[s("test.arg")]).await;
        assert_eq!(d.ret.as_map().unwrap().len(), 1);
        assert!(get(&d.ret, "test.arg")
            .unwrap()
            .as_str()
            .unwrap()
            .contains("CLI Example"));
    }

    #[tokio::test]
    async fn list_modules() {
        let r = call(&ctx(), "sys.list_modules", &[]).await;
        assert_eq!(
            r.ret,
            Value::Array(
                [
                    "archive", "beacons", "cmd", "config", "cp", "cron", "disk", "event", "file", "git",
                    "grains", "group", "hosts", "mine", "network", "pillar", "pkg", "saltutil",
                    "schedule", "service", "state", "status", "sys", "test", "user"
                ]
                .map(Value::from)
                .to_vec()
            )
        );
        let r = call(&ctx(), "sys.list_modules", &[s("s*")]).await;
        assert_eq!(
            r.ret,
            Value::Array(
                ["saltutil", "schedule", "service", "state", "status", "sys"]
                    .map(Value::from)
                    .to_vec()
            )
        );
    }

    #[tokio::test]
    async fn doc_for_module_function_and_all() {
        let r = call(&ctx(), "sys.doc", &[s("test.ping")]).await;
        let m = r.ret.as_map().unwrap();
        assert_eq!(m.len(), 1);
        assert!(get(&r.ret, "test.ping")
            .unwrap()
            .as_str()
            .unwrap()
            .contains("test.ping"));
        let r = call(&ctx(), "sys.doc", &[s("grains")]).await;
        assert_eq!(
            r.ret.as_map().unwrap().len(),
            super::super::grains::Fun::ALL.len()
        );
        let r = call(&ctx(), "sys.doc", &[]).await;
        assert_eq!(
            r.ret.as_map().unwrap().len(),
            crate::functions::list_functions().len()
        );
    }
}
