//! The `sys` execution module: what functions this minion has, and their docs.

use brine_protocol::catalog::RUNNERS;
use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::{CallState, Context};
use super::{FnError, Function, Spec};
use brine_protocol::payload::map;

mod more;

/// The functions of the `sys` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Doc,
    ListFunctions,
    ListModules,
    ListRunnerFunctions,
    RunnerDoc,
    ListStateModules,
    ListStateFunctions,
    StateDoc,
    StateArgspec,
    Argspec,
    ListRenderers,
    RendererDoc,
    ListReturners,
    ReturnerDoc,
    ListRunners,
    ReloadModules,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Doc,
        Fun::ListFunctions,
        Fun::ListModules,
        Fun::ListRunnerFunctions,
        Fun::RunnerDoc,
        Fun::ListStateModules,
        Fun::ListStateFunctions,
        Fun::StateDoc,
        Fun::StateArgspec,
        Fun::Argspec,
        Fun::ListRenderers,
        Fun::RendererDoc,
        Fun::ListReturners,
        Fun::ReturnerDoc,
        Fun::ListRunners,
        Fun::ReloadModules,
    ];

    pub(crate) fn spec(self) -> Spec {
        if let Some(spec) = more::spec(self) {
            return spec;
        }
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
            _ => unreachable!("the spec of {self:?} is in sys/more.rs"),
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
        if let Some(ret) = more::run(self, b, &patterns) {
            return Ok(ret);
        }
        Ok(match self {
            Fun::Doc => docs(&patterns),
            Fun::ListFunctions => strings(list_functions(&patterns)),
            Fun::ListModules => strings(list_modules(&patterns)),
            Fun::ListRunnerFunctions => strings(list_runner_functions(&patterns)),
            Fun::RunnerDoc => runner_docs(&patterns),
            _ => unreachable!("{self:?} runs in sys/more.rs"),
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
                ["cmd.run", "cmd.run_all", "cmd.run_bg", "cmd.run_stderr", "cmd.run_stdout"]
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
        // Other modules get registered over time: check the ones this test knows of, and the
        // order and uniqueness of the whole list.
        let r = call(&ctx(), "sys.list_modules", &[]).await;
        let all = names(&r.ret);
        for m in [
            "archive", "beacons", "cmd", "config", "cp", "cron", "disk", "event", "file", "git",
            "grains", "group", "hosts", "mine", "network", "pillar", "pkg", "saltutil", "schedule",
            "service", "state", "status", "sys", "test", "user",
        ] {
            assert!(all.contains(&m), "{m}");
        }
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(all, sorted);
        let r = call(&ctx(), "sys.list_modules", &[s("s*")]).await;
        let some = names(&r.ret);
        assert!(some.iter().all(|m| m.starts_with('s')));
        for m in ["saltutil", "schedule", "service", "state", "status", "sys"] {
            assert!(some.contains(&m), "{m}");
        }
        assert_eq!(some.len(), all.iter().filter(|m| m.starts_with('s')).count());
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

    // The answers below are those of Salt 3007's `salt-call --local` where the modules
    // agree (Salt's minion has many more state modules, runners and returners).

    fn names(v: &Value) -> Vec<&str> {
        v.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect()
    }

    #[tokio::test]
    async fn state_modules_and_functions() {
        let r = call(&ctx(), "sys.list_state_functions", &[s("test")]).await;
        let funs = names(&r.ret);
        assert!(funs.contains(&"test.nop") && funs.contains(&"test.mod_watch"));
        assert!(funs.iter().all(|f| f.starts_with("test.")));
        let r = call(&ctx(), "sys.list_state_functions", &[s("test.s*"), s("cmd.run")]).await;
        assert_eq!(
            names(&r.ret),
            [
                "cmd.run",
                "test.show_notification",
                "test.succeed_with_changes",
                "test.succeed_without_changes"
            ]
        );
        let r = call(&ctx(), "sys.list_state_modules", &[s("te*")]).await;
        assert_eq!(names(&r.ret), ["test"]);
        let r = call(&ctx(), "sys.list_state_modules", &[s("file"), s("nope")]).await;
        assert_eq!(names(&r.ret), ["file"]);
        let all = call(&ctx(), "sys.list_state_modules", &[]).await;
        assert!(names(&all.ret).contains(&"pkg"));
        let d = call(&ctx(), "sys.state_doc", &[s("test.nop")]).await;
        assert_eq!(d.ret.as_map().unwrap().len(), 1);
        let d = call(&ctx(), "sys.state_doc", &[s("test")]).await;
        assert_eq!(d.ret.as_map().unwrap().len(), funs.len());
    }

    #[tokio::test]
    async fn argspecs() {
        let spec = |args: Value, defaults: Value, varargs: Value, kwargs: Value| {
            map([
                ("args", args),
                ("defaults", defaults),
                ("varargs", varargs),
                ("kwargs", kwargs),
            ])
        };
        let r = call(&ctx(), "sys.state_argspec", &[s("test.nop")]).await;
        assert_eq!(
            r.ret,
            map([(
                "test.nop",
                spec(Value::Array(vec![s("name")]), Value::Nil, Value::Nil, Value::Boolean(true))
            )])
        );
        let r = call(&ctx(), "sys.argspec", &[s("test.echo")]).await;
        assert_eq!(
            r.ret,
            map([(
                "test.echo",
                spec(Value::Array(vec![s("text")]), Value::Nil, Value::Nil, Value::Nil)
            )])
        );
        let r = call(&ctx(), "sys.argspec", &[s("test.arg")]).await;
        assert_eq!(
            r.ret,
            map([(
                "test.arg",
                spec(Value::Nil, Value::Nil, Value::Boolean(true), Value::Boolean(true))
            )])
        );
        let r = call(&ctx(), "sys.argspec", &[s("state.show_top")]).await;
        assert_eq!(
            get(&get(&r.ret, "state.show_top").unwrap().clone(), "defaults"),
            Some(&Value::Array(vec![Value::Nil]))
        );
        // No module selects nothing, as in Salt.
        assert_eq!(call(&ctx(), "sys.argspec", &[]).await.ret, Value::Map(vec![]));
        let r = call(&ctx(), "sys.argspec", &[s("test")]).await;
        assert_eq!(r.ret.as_map().unwrap().len(), super::super::test::Fun::ALL.len());
    }

    #[tokio::test]
    async fn renderers_returners_runners() {
        let r = call(&ctx(), "sys.list_renderers", &[s("j*")]).await;
        assert_eq!(names(&r.ret), ["jinja", "json"]);
        let r = call(&ctx(), "sys.list_renderers", &[]).await;
        assert_eq!(names(&r.ret), ["gpg", "jinja", "json", "yaml"]);
        // A bare name selects `name.` functions, which renderers have none of (as in Salt).
        let r = call(&ctx(), "sys.renderer_doc", &[s("jinja")]).await;
        assert_eq!(r.ret, Value::Map(vec![]));
        let r = call(&ctx(), "sys.renderer_doc", &[s("y*")]).await;
        assert_eq!(r.ret.as_map().unwrap().len(), 1);
        assert_eq!(call(&ctx(), "sys.list_returners", &[]).await.ret, Value::Array(vec![]));
        assert_eq!(call(&ctx(), "sys.returner_doc", &[]).await.ret, Value::Map(vec![]));
        let r = call(&ctx(), "sys.list_runners", &[]).await;
        let runners = names(&r.ret);
        assert!(runners.contains(&"jobs") && runners.contains(&"test"));
        let r = call(&ctx(), "sys.list_runners", &[s("jobs")]).await;
        assert_eq!(names(&r.ret), ["jobs"]);
        let r = call(&ctx(), "sys.reload_modules", &[]).await;
        assert_eq!((r.ret, r.retcode), (Value::Nil, 0));
    }
}
