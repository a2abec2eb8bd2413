//! The pillar compiler against Salt's own: every case of `master/tests/pillar_cases/` (a
//! master config, a pillar tree, minions with grains) compiled by Brine and by Salt 3007's
//! `salt.pillar.Pillar` in the real-Salt venv must give the same pillars, `_errors`
//! included. Then what the oracle cannot show: the cache, and a request's own data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use brine_protocol::config::MasterConfig;
use brine_protocol::payload::{from_json, to_json, Value};
use serde_json::json;

use super::{PillarRequest, Pillars};

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pillar_cases")
}

/// A master config for `case` with its `@DIR@` put in, in a temp root.
fn config(case: &Path, tmp: &Path, more: &str) -> MasterConfig {
    let conf = tmp.join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    let text = std::fs::read_to_string(case.join("master.conf"))
        .unwrap()
        .replace("@DIR@", &case.display().to_string());
    std::fs::write(
        conf.join("master"),
        format!("root_dir: {}\n{text}{more}", tmp.display()),
    )
    .unwrap();
    MasterConfig::load(&conf).unwrap()
}

/// What a minion sends: its grains, with its id (the master sets `id` as Salt's does).
fn request(id: &str, grains: &serde_json::Value) -> PillarRequest {
    let mut grains = from_json(grains);
    brine_protocol::payload::set(&mut grains, "id", Value::from(id));
    PillarRequest::new(id, grains)
}

/// The pillar as the oracle prints it (bytes as text).
fn as_json(pillar: &Value) -> serde_json::Value {
    to_json(pillar)
}

fn brine_pillars(case: &Path) -> BTreeMap<String, serde_json::Value> {
    let tmp = tempfile::tempdir().unwrap();
    let pillars = Pillars::new(&config(case, tmp.path(), ""));
    let minions: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(case.join("minions.json")).unwrap()).unwrap();
    minions
        .iter()
        .map(|(id, grains)| (id.clone(), as_json(&pillars.compile(&request(id, grains)))))
        .collect()
}

#[test]
fn every_case_compiles_as_salt_compiles_it() {
    let dir = cases_dir();
    let Some(output) = brine_render::oracle::run(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/salt_pillar.py"),
        &dir,
    ) else {
        return;
    };
    let salt: BTreeMap<String, BTreeMap<String, serde_json::Value>> =
        serde_json::from_slice(&output).expect("salt's pillars");
    assert!(salt.len() >= 9, "cases: {:?}", salt.keys());
    let mut failures = Vec::new();
    for (case, minions) in &salt {
        let ours = brine_pillars(&dir.join(case));
        for (id, expected) in minions {
            let got = ours.get(id).cloned().unwrap_or_default();
            // Key order matters too (the minion sees Salt's order): compare the texts.
            let (got_text, expected_text) = (got.to_string(), expected.to_string());
            if got_text != expected_text {
                failures.push(format!("{case}/{id}:\n  salt:  {expected}\n  brine: {got}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A case under `tmp/tree` with one pillar root, `pillar/`, for the files a test writes.
fn one_root_tree(tmp: &Path) -> PathBuf {
    let tree = tmp.join("tree");
    std::fs::create_dir_all(tree.join("pillar")).unwrap();
    std::fs::write(
        tree.join("master.conf"),
        "pillar_roots:\n  base: [@DIR@/pillar]\n",
    )
    .unwrap();
    tree
}

fn case(name: &str) -> PathBuf {
    cases_dir().join(name)
}

#[test]
fn two_minions_never_see_each_others_pillar() {
    let tmp = tempfile::tempdir().unwrap();
    let pillars = Pillars::new(&config(&case("matchers"), tmp.path(), ""));
    let web = as_json(&pillars.compile(&request(
        "web2",
        &json!({"os": "Ubuntu", "os_family": "Debian", "role": "web", "roles": ["web"], "mem_total": 1}),
    )));
    let db = as_json(&pillars.compile(&request(
        "db1",
        &json!({"os": "Rocky", "os_family": "RedHat", "role": "db", "roles": ["db"], "mem_total": 1}),
    )));
    assert_eq!(web["common"]["id"], "web2");
    assert_eq!(db["common"]["id"], "db1");
    assert!(web.get("db").is_none() && web.get("nodegroup_dbs").is_none());
    assert!(db.get("web").is_none() && db.get("ubuntu_web").is_none());
    assert_eq!(web["pkgs"]["apache"], "apache2");
    assert_eq!(db["pkgs"]["apache"], "httpd");
}

#[test]
fn grains_claiming_another_id_do_not_change_who_is_compiled() {
    let tmp = tempfile::tempdir().unwrap();
    let pillars = Pillars::new(&config(&case("matchers"), tmp.path(), ""));
    let got = as_json(&pillars.compile(&request(
        "other",
        &json!({"id": "db1", "role": "none", "mem_total": 1}),
    )));
    assert_eq!(got["common"]["id"], "other");
    assert!(got.get("db").is_none());
}

#[test]
fn pillar_cache_keeps_a_pillar_until_cleaned() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = one_root_tree(tmp.path());
    std::fs::write(tree.join("pillar/top.sls"), "base:\n  '*':\n    - v\n").unwrap();
    std::fs::write(tree.join("pillar/v.sls"), "v: 1\n").unwrap();
    let cfg = config(&tree, &tmp.path().join("root"), "pillar_cache: True\n");
    let pillars = Pillars::new(&cfg);
    let mut req = request("m1", &json!({}));
    assert_eq!(as_json(&pillars.compile(&req)), json!({"v": 1}));
    std::fs::write(tree.join("pillar/v.sls"), "v: 2\n").unwrap();
    assert_eq!(as_json(&pillars.compile(&req)), json!({"v": 1}));
    req.clean_cache = true;
    assert_eq!(as_json(&pillars.compile(&req)), json!({"v": 2}));
    std::fs::write(tree.join("pillar/v.sls"), "v: 3\n").unwrap();
    assert_eq!(pillars.clear_cache(Some("m1")), 1);
    req.clean_cache = false;
    assert_eq!(as_json(&pillars.compile(&req)), json!({"v": 3}));
    // Without the cache every request compiles afresh.
    let fresh = Pillars::new(&config(&tree, &tmp.path().join("root2"), ""));
    std::fs::write(tree.join("pillar/v.sls"), "v: 4\n").unwrap();
    assert_eq!(as_json(&fresh.compile(&req)), json!({"v": 4}));
}

#[test]
fn pillar_override_is_merged_last() {
    let tmp = tempfile::tempdir().unwrap();
    let pillars = Pillars::new(&config(&case("overwrite"), tmp.path(), ""));
    let mut req = request("m1", &json!({}));
    req.pillar_override = from_json(&json!({"only_one": "cli", "new": 1}));
    let got = as_json(&pillars.compile(&req));
    assert_eq!(got["only_one"], "cli");
    assert_eq!(got["new"], 1);
}

#[test]
fn show_top_lists_the_merged_top() {
    let tmp = tempfile::tempdir().unwrap();
    let pillars = Pillars::new(&config(&case("envs"), tmp.path(), ""));
    let (top, errors) = pillars.top(&request("m1", &json!({"stage": "dev"})));
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        to_json(&top),
        json!({
            "base": {"*": ["common"], "m2": ["common"]},
            "dev": {"stage:dev": [{"match": "grain"}, "devstuff"], "*": ["shared"]},
            "prod": {"stage:prod": [{"match": "grain"}, "prodstuff"]},
        })
    );
}

#[test]
fn a_pillar_top_that_is_not_a_mapping_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = one_root_tree(tmp.path());
    std::fs::write(tree.join("pillar/top.sls"), "base:\n  '*': just-a-string\n").unwrap();
    let pillars = Pillars::new(&config(&tree, &tmp.path().join("root"), ""));
    assert_eq!(
        as_json(&pillars.compile(&request("m1", &json!({})))),
        json!({"_errors": ["Error encountered while rendering pillar top file."]})
    );
    std::fs::write(
        tree.join("pillar/top.sls"),
        "base:\n  '*':\n    - {{ oops\n",
    )
    .unwrap();
    let got = as_json(&pillars.compile(&request("m1", &json!({}))));
    let errors = got["_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .starts_with("Rendering Primary Top file failed, render error:\n"),
        "{errors:?}"
    );
}

#[test]
fn includes_that_loop_terminate() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = one_root_tree(tmp.path());
    std::fs::write(tree.join("pillar/top.sls"), "base:\n  '*':\n    - a\n").unwrap();
    std::fs::write(tree.join("pillar/a.sls"), "include: [b]\na: 1\n").unwrap();
    std::fs::write(tree.join("pillar/b.sls"), "include: [a]\nb: 1\n").unwrap();
    let pillars = Pillars::new(&config(&tree, &tmp.path().join("root"), ""));
    assert_eq!(
        as_json(&pillars.compile(&request("m1", &json!({})))),
        json!({"b": 1, "a": 1})
    );
}

#[test]
fn cmd_in_pillar_templates_runs_on_the_master_only_when_configured() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = one_root_tree(tmp.path());
    std::fs::write(tree.join("pillar/top.sls"), "base:\n  '*':\n    - host\n").unwrap();
    std::fs::write(
        tree.join("pillar/host.sls"),
        "out: {{ salt['cmd.run']('echo $((6 * 7)); echo err >&2') | yaml_encode }}\n\
         code: {{ salt['cmd.retcode']('exit 3', python_shell=True) }}\n",
    )
    .unwrap();
    let refused = Pillars::new(&config(
        &tree,
        &tmp.path().join("off"),
        "pillar_safe_render_error: False\n",
    ));
    let got = as_json(&refused.compile(&request("m1", &json!({}))));
    let errors = got["_errors"].as_array().expect("an error").clone();
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .contains("cmd.run is not offered to templates rendered on this master"),
        "{errors:?}"
    );
    let allowed = Pillars::new(&config(
        &tree,
        &tmp.path().join("on"),
        "brine_template_cmd: True\n",
    ));
    assert_eq!(
        as_json(&allowed.compile(&request("m1", &json!({})))),
        json!({"out": "42\nerr", "code": 3})
    );
}
