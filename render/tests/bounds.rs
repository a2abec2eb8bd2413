//! A template cannot run forever or recurse without end: every render is bounded in
//! instructions (`brine_jinja_fuel`) and in nested imports, and fails with an error that says so.

use std::collections::HashMap;
use std::sync::Arc;

use brine_render::{render_sls, render_template, Context, Loader, NoFunctions};

struct Files(HashMap<&'static str, &'static str>);

impl Loader for Files {
    fn load(&self, _saltenv: &str, path: &str) -> Result<Option<String>, String> {
        Ok(self.0.get(path).map(|s| s.to_string()))
    }
}

fn ctx(opts: serde_json::Value) -> Context {
    Context {
        opts,
        saltenv: "base".into(),
        sls: "top".into(),
        ..Context::default()
    }
}

fn files(entries: &[(&'static str, &'static str)]) -> Arc<Files> {
    Arc::new(Files(entries.iter().copied().collect()))
}

#[test]
fn an_endless_loop_runs_out_of_fuel() {
    let source = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    let err = render_template(
        source,
        "loop.j2",
        &ctx(serde_json::json!({"brine_jinja_fuel": 100000})),
        files(&[]),
        Arc::new(NoFunctions),
    )
    .expect_err("stopped");
    let text = err.to_string();
    assert!(text.contains("brine_jinja_fuel"), "{text}");
}

#[test]
fn the_default_fuel_is_plenty_for_ordinary_templates() {
    let source = "{% for i in range(1000) %}{{ i }} {% endfor %}";
    let out = render_template(
        source,
        "ok.j2",
        &ctx(serde_json::json!({})),
        files(&[]),
        Arc::new(NoFunctions),
    )
    .expect("renders");
    assert!(out.ends_with("999 "));
}

#[test]
fn a_template_importing_itself_fails_instead_of_overflowing_the_stack() {
    let loader = files(&[
        ("self.sls", "{% import_yaml 'self.sls' as me %}a: 1\n"),
        ("a.sls", "{% from 'b.sls' import x %}{% set x = 1 %}"),
        ("b.sls", "{% from 'a.sls' import y %}{% set x = 1 %}"),
    ]);
    // import_yaml is Brine's own; `from ... import` is MiniJinja's, bounded by its recursion limit.
    for (name, says) in [("self.sls", "nested more than 32 deep"), ("a.sls", "b.sls")] {
        let source = loader.0[name];
        let err = render_sls(
            source,
            name,
            &ctx(serde_json::json!({})),
            loader.clone(),
            Arc::new(NoFunctions),
        )
        .expect_err("refused");
        assert!(err.to_string().contains(says), "{name}: {err}");
    }
}

#[test]
fn an_include_cycle_fails() {
    let loader = files(&[("inc.j2", "x{% include 'inc.j2' %}")]);
    let err = render_template(
        loader.0["inc.j2"],
        "inc.j2",
        &ctx(serde_json::json!({})),
        loader.clone(),
        Arc::new(NoFunctions),
    )
    .expect_err("refused");
    assert!(!err.to_string().is_empty());
}
