//! Differential fidelity: every `tests/corpus/*.sls` rendered by Brine and by Salt's own
//! renderer (the real-Salt venv) must give the same data, and every `tests/corpus/*.j2`, a
//! template as `file.managed` renders it, the same text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use brine_render::{render_sls, render_template, Context, Loader, NoFunctions};
use serde_json::Value;

struct Files(PathBuf);

impl Loader for Files {
    fn load(&self, _saltenv: &str, path: &str) -> Result<Option<String>, String> {
        match std::fs::read_to_string(self.0.join(path)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

#[test]
fn corpus_renders_as_salt_renders_it() {
    let dir = corpus();
    let Some(output) = brine_render::oracle::run(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/salt_render.py"),
        &dir,
    ) else {
        return;
    };
    let salt: BTreeMap<String, Value> = serde_json::from_slice(&output).expect("salt's results");
    let ctx_json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("_context.json")).expect("context"))
            .expect("context json");
    let mut failures = Vec::new();
    for (case, expected) in &salt {
        if case.ends_with(".j2") {
            let source = std::fs::read_to_string(dir.join(case)).expect("case");
            let ctx = Context {
                grains: ctx_json["grains"].clone(),
                pillar: ctx_json["pillar"].clone(),
                opts: serde_json::json!({"id": "minion1"}),
                saltenv: "base".into(),
                ..Context::default()
            };
            let got = render_template(
                &source,
                case,
                &ctx,
                Arc::new(Files(dir.clone())),
                Arc::new(NoFunctions),
            );
            match (got, expected.get("text").and_then(Value::as_str)) {
                (Ok(text), Some(want)) if text == want => {}
                (Err(_), None) => {}
                (Ok(text), _) => failures.push(format!(
                    "{case}: brine\n{text}\n  salt\n{}",
                    expected
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("(error)")
                )),
                (got, _) => failures.push(format!("{case}: brine {got:?}\n  salt {expected}")),
            }
            continue;
        }
        let sls = case;
        let source = std::fs::read_to_string(dir.join(format!("{sls}.sls"))).expect("case");
        let ctx = Context {
            grains: ctx_json["grains"].clone(),
            pillar: ctx_json["pillar"].clone(),
            opts: serde_json::json!({"id": "minion1"}),
            saltenv: "base".into(),
            sls: sls.clone(),
            ..Context::default()
        };
        let got = render_sls(
            &source,
            &format!("{sls}.sls"),
            &ctx,
            Arc::new(Files(dir.clone())),
            Arc::new(NoFunctions),
        );
        match (got, expected.get("data")) {
            (Ok(data), Some(want)) if &data == want => {}
            (Err(_), None) => {}
            (got, _) => failures.push(format!("{sls}: brine {got:?}\n  salt {expected}")),
        }
    }
    eprintln!(
        "corpus: {} of {} cases identical",
        salt.len() - failures.len(),
        salt.len()
    );
    assert!(
        failures.is_empty(),
        "{} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
