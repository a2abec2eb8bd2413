//! Differential: every case of `tests/cases.json` compiled over `tests/tree/` by Brine and by
//! Salt 3007's own `HighState.render_highstate` + `State.verify_high` (the real-Salt venv)
//! must give the same high data, key order included, and the same errors (a render error's
//! cause, worded by the YAML or Jinja library, is compared up to its first words).

use std::path::{Path, PathBuf};
use std::sync::Arc;

mod common;

use brine_render::{Context, NoFunctions};
use brine_state::{verify_high, Compiler};
use common::Dir;
use serde_json::Value;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn brine(matches: &[(String, Vec<String>)]) -> Value {
    let tree = Arc::new(Dir(tests_dir().join("tree")));
    let ctx = Context {
        grains: serde_json::json!({"id": "m1", "os_family": "Debian"}),
        pillar: serde_json::json!({}),
        opts: serde_json::json!({"id": "m1"}),
        ..Context::default()
    };
    let envs = ["base".to_string(), "dev".to_string()];
    let mut compiler = Compiler::new(tree, &envs, Arc::new(NoFunctions), ctx);
    let (high, mut errors) = compiler.render_highstate(matches);
    errors.extend(verify_high(&high));
    serde_json::json!({"high": high, "errors": errors})
}

/// A render error's cause is the library's wording: keep Salt's part of the message.
fn errors_comparable(v: &Value) -> Vec<String> {
    v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let e = e.as_str().unwrap();
            match e.find("' failed: ") {
                Some(at) if e.starts_with("Rendering SLS '") => e[..at + 9].to_string(),
                _ => e.to_string(),
            }
        })
        .collect()
}

#[test]
fn cases_compile_as_salt_compiles_them() {
    let Some(out) = brine_render::oracle::run(&tests_dir().join("salt_high.py"), &tests_dir())
    else {
        return;
    };
    let salt: Vec<Value> = serde_json::from_slice(&out).expect("salt's json");
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(tests_dir().join("cases.json")).unwrap())
            .unwrap();
    assert_eq!(salt.len(), cases.len());
    let mut failures = Vec::new();
    for (case, expected) in cases.iter().zip(&salt) {
        let matches: Vec<(String, Vec<String>)> =
            serde_json::from_value(case["matches"].clone()).unwrap();
        let got = brine(&matches);
        let name = case["name"].as_str().unwrap();
        // Key order matters: compare the texts.
        let (got_text, expected_text) = (got["high"].to_string(), expected["high"].to_string());
        if got_text != expected_text {
            failures.push(format!(
                "{name}: high data\n  salt:  {}\n  brine: {}",
                expected["high"], got["high"]
            ));
        }
        if errors_comparable(&got) != errors_comparable(expected) {
            failures.push(format!(
                "{name}: errors\n  salt:  {:?}\n  brine: {:?}",
                errors_comparable(expected),
                errors_comparable(&got)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
