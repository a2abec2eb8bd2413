//! Brine's minion runs states as a real salt-minion 3007 does: both minions, connected to
//! Brine's master, apply the same tree (a formula with map.jinja, defaults.yaml,
//! `grains.filter_by`, `defaults.merge` and pillar; templates; requisites; two saltenvs;
//! `test=True`; bad input) through `salt`, and give the same per-state results, changes,
//! comments and run order, and the same files on disk; the second run changes nothing.
//!
//! Needs BRINE_SALT3007 (set by scripts/test).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use brine_e2e::masters::{events_until_quiet, write, Master};
use brine_e2e::real::{self, Fleet, RealMaster};
use brine_e2e::Stack;
use serde_json::{json, Value};

const REAL: &str = "real7";

/// Both masters' options: `state_events` reaches the minions' state runs through the
/// master's options (`_master_opts`).
const MASTER_CONF: &str = "timeout: 60\nfile_recv: True\nstate_events: True\n";
const BRINE: &str = "brine1";

fn write_tree(tree: &Path) {
    let base = tree.join("base");
    write(
        &base.join("top.sls"),
        "base:\n  '*':\n    - app\n    - checks\ndev:\n  '*':\n    - devtools\n",
    );
    write(
        &base.join("app/defaults.yaml"),
        "app:\n  port: 80\n  user: www-data\n  features: [base]\n",
    );
    write(
        &base.join("app/map.jinja"),
        "{% import_yaml 'app/defaults.yaml' as defaults %}\n\
         {% set os_map = salt['grains.filter_by']({\n\
         \x20   'Debian': {'service': 'apache2'},\n\
         \x20   'RedHat': {'service': 'httpd'},\n\
         \x20 }, grain='os_family', default='Debian') %}\n\
         {% set app = salt['defaults.merge'](defaults.app, os_map, in_place=False) %}\n\
         {% do app.update(salt['pillar.get']('app', {})) %}\n",
    );
    write(
        &base.join("app/init.sls"),
        "{% from 'app/map.jinja' import app with context %}\n\
         {% set dest = grains['stdest'] %}\n\
         app-dir:\n  file.directory:\n    - name: {{ dest }}/app\n    - makedirs: True\n    - mode: 755\n\n\
         app-settings:\n  file.managed:\n    - name: {{ dest }}/app/settings.ini\n\
         \x20   - source: salt://app/files/settings.ini.j2\n    - template: jinja\n\
         \x20   - mode: '0640'\n    - context:\n        app: {{ app | json }}\n\
         \x20   - require:\n      - file: app-dir\n\n\
         app-motd:\n  file.managed:\n    - name: {{ dest }}/app/motd\n\
         \x20   - contents_pillar: app:motd\n    - require:\n      - file: app-dir\n\n\
         app-static:\n  file.managed:\n    - name: {{ dest }}/app/static.txt\n\
         \x20   - source: salt://app/files/static.txt\n    - require:\n      - file: app-dir\n\n\
         app-prepare:\n  cmd.run:\n    - name: echo prepared >> {{ dest }}/app/prepared\n\
         \x20   - prereq:\n      - file: app-motd\n\n\
         app-reload:\n  cmd.wait:\n    - name: echo reloaded >> {{ dest }}/app/reloaded\n\
         \x20   - watch:\n      - file: app-settings\n\n\
         app-marker:\n  cmd.run:\n    - name: echo {{ app.service }} > {{ dest }}/app/marker\n\
         \x20   - creates: {{ dest }}/app/marker\n    - require:\n      - file: app-dir\n\n\
         app-old:\n  file.absent:\n    - name: {{ dest }}/app/old.conf\n\n\
         app-script:\n  cmd.script:\n    - name: setup {{ dest }}/app \"two words\"\n\
         \x20   - source: salt://app/files/setup.sh\n    - template: jinja\n    - context:\n        greeting: hi\n\
         \x20   - unless: test -e {{ dest }}/app/scripted\n    - require:\n      - file: app-dir\n",
    );
    write(
        &base.join("app/files/settings.ini.j2"),
        "[app]\nport = {{ app.port }}\nuser = {{ app.user }}\nservice = {{ app.service }}\n\
         role = {{ app.role }}\nfeatures = {{ app.features | join(',') }}\n\
         minion = {{ grains['id'] }} {{ '%s:%d' % (grains['stdest'] | length > 0, app.port) }}\n",
    );
    write(&base.join("app/files/static.txt"), "static\n");
    write(
        &base.join("app/files/setup.sh"),
        "#!/bin/sh\necho \"{{ greeting }} from {{ grains['id'] }}: $# arguments, $2\"\n\
         touch \"$1/scripted\"\n",
    );
    write(
        &base.join("checks.sls"),
        "always:\n  test.succeed_without_changes: []\n\
         changed:\n  test.succeed_with_changes: []\n\
         after-change:\n  test.nop:\n    - onchanges:\n      - test: changed\n\
         on-failure:\n  test.nop:\n    - onfail:\n      - test: always\n\
         {% set dest = grains['stdest'] %}\n\
         unless-present:\n  cmd.run:\n    - name: echo never\n    - unless: test -d {{ dest }}\n\
         only-if-present:\n  cmd.run:\n    - name: echo present\n    - onlyif: test -d {{ dest }}\n",
    );
    write(
        &base.join("bad.sls"),
        "unknown:\n  test.no_such_function: []\n\
         missing-req:\n  test.nop:\n    - require:\n      - test: not-there\n\
         fails:\n  cmd.run:\n    - name: exit 3\n\
         after-fail:\n  test.nop:\n    - require:\n      - cmd: fails\n\
         fine:\n  test.nop: []\n\
         missing-script:\n  cmd.script:\n    - source: salt://no/such/script.sh\n",
    );
    write(&base.join("broken.sls"), "oops: {{ undefined_thing.x }\n");
    // Grains set by states: written to the grains file beside each minion's configuration
    // and seen by the states after them. No grain is changed twice in one run: Salt's
    // `changes` hold the grain's own list or dict, which a later change in the same run
    // alters after the fact (Brine's show the value the state set).
    write(
        &base.join("roles.sls"),
        "roles:\n  grains.list_present:\n    - value: [web, db]\n\
         no-cache:\n  grains.list_absent:\n    - name: roles\n    - value: [cache]\n\
         color:\n  grains.present:\n    - value: red\n\
         app-port:\n  grains.present:\n    - name: app,port\n    - delimiter: ','\n    - value: 8080\n\
         site-opts:\n  grains.present:\n    - name: site:opts\n    - value: {debug: true}\n\
         port-set:\n  grains.exists:\n    - name: app:port\n    - require:\n      - grains: app-port\n\
         tier:\n  grains.append:\n    - value: gold\n    - convert: True\n\
         no-color:\n  grains.absent:\n    - name: color\n    - destructive: True\n\
         never:\n  grains.absent: []\n",
    );
    // A custom execution module: Python, which Brine's minion does not run.
    write(
        &base.join("_modules/custom.py"),
        "def hello():\n    return 'hi'\n",
    );
    let dev = tree.join("dev");
    write(
        &dev.join("devtools.sls"),
        "{% set dest = grains['stdest'] %}\ndev-tools:\n  file.managed:\n\
         \x20   - name: {{ dest }}/dev/tools.txt\n    - contents: dev tools\n    - makedirs: True\n\n\
         dev-built:\n  cmd.run:\n    - name: echo built > {{ dest }}/dev/built\n\
         \x20   - onchanges:\n      - file: dev-tools\n",
    );
    let pillar = tree.join("pillar");
    write(&pillar.join("top.sls"), "base:\n  '*':\n    - app\n");
    write(
        &pillar.join("app.sls"),
        "app:\n  motd: |\n    Welcome to {{ grains['id'] }}\n  role: web\n  port: 8081\n  features: [base, pillar]\n",
    );
}

/// Each minion's own directory for what its states write.
fn dest(root: &Path) -> PathBuf {
    root.join("out")
}

fn normalize(v: &Value, root: &Path, id: &str) -> Value {
    brine_e2e::normalize(
        v,
        &[
            (root.display().to_string(), "<ROOT>".into()),
            (id.to_string(), "<ID>".into()),
        ],
    )
}

/// Per state: result, changes, comment, __run_num__, name, __sls__, __id__.
fn states(v: &Value) -> Value {
    match v.as_object() {
        Some(m) => Value::Object(
            m.iter()
                .map(|(k, s)| {
                    (
                        k.clone(),
                        json!({
                            "result": s["result"],
                            "changes": s["changes"],
                            "comment": s["comment"],
                            "__run_num__": s["__run_num__"],
                            "name": s["name"],
                            "__sls__": s["__sls__"],
                        }),
                    )
                })
                .collect(),
        ),
        None => v.clone(),
    }
}

/// The `state_events` progress events on `bus` (`salt/job/<jid>/prog/<id>/<n>`) until it has
/// been quiet for two seconds, per minion: the tag's run number, the keys of the load, `len`
/// and each state's `__id__`, `result` and `__run_num__`.
fn progress_events(bus: &mut UnixStream) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (tag, data) in events_until_quiet(bus, Duration::from_secs(2)) {
        let parts: Vec<&str> = tag.split('/').collect();
        if let ["salt", "job", _, "prog", id, n] = parts.as_slice() {
            let mut keys: Vec<&String> = data
                .as_object()
                .map(|m| m.keys().filter(|k| *k != "_stamp").collect())
                .unwrap_or_default();
            keys.sort();
            let ret = &data["data"]["ret"];
            out.entry(id.to_string()).or_default().push(json!({
                "n": n,
                "keys": keys,
                "len": data["data"]["len"],
                "__id__": ret["__id__"],
                "result": ret["result"],
                "__run_num__": ret["__run_num__"],
            }));
        }
    }
    out
}

/// The roots of the tree written by `write_tree`, as master config.
fn roots(tree: &Path) -> String {
    let t = tree.display();
    format!(
        "file_roots:\n  base: [{t}/base]\n  dev: [{t}/dev]\npillar_roots:\n  base: [{t}/pillar]\n"
    )
}

#[test]
fn brines_minion_applies_states_as_salt_minion_does() {
    let Some((v7, _)) = real::venvs() else {
        return;
    };
    let mut st = Stack::new(MASTER_CONF);
    let tree = st.dir.path().join("tree");
    write_tree(&tree);
    let conf = st.master_conf_dir().join("master");
    let text = fs::read_to_string(&conf).unwrap();
    fs::write(&conf, format!("{text}{}", roots(&tree))).unwrap();
    st.start_master();
    let base_dir = st.dir.path().to_path_buf();
    let grains = |id: &str| stdest_grains(&base_dir, id);
    let fleet = Fleet(vec![st.start_real_minion(&v7, REAL, &grains(REAL))]);
    st.start_minion(BRINE, &grains(BRINE));
    st.accept(&[REAL, BRINE]);
    compare_minions(&Master::Brine(st), &v7);
    drop(fleet);
}

#[test]
fn brines_minion_applies_states_as_salt_minion_does_under_a_real_master() {
    let Some((v7, _)) = real::venvs() else {
        return;
    };
    let mut rm = RealMaster::new(&v7, MASTER_CONF);
    let tree = rm.dir.path().join("tree");
    write_tree(&tree);
    let conf = rm.conf_dir().join("master");
    let text = fs::read_to_string(&conf).unwrap();
    let r = rm.root().display().to_string();
    let own =
        format!("file_roots:\n  base: [{r}/srv/salt]\npillar_roots:\n  base: [{r}/srv/pillar]\n");
    assert!(text.contains(&own), "{text}");
    fs::write(&conf, text.replace(&own, &roots(&tree))).unwrap();
    rm.start();
    let base_dir = rm.dir.path().to_path_buf();
    rm.start_real_minion(&v7, REAL, &stdest_grains(&base_dir, REAL));
    rm.start_brine_minion(BRINE, &stdest_grains(&base_dir, BRINE));
    rm.accept(&[REAL, BRINE]);
    rm.wait_answering(&[REAL, BRINE]);
    compare_minions(&Master::Real(rm), &v7);
}

/// The grains pointing a minion's states at its own output directory.
fn stdest_grains(base: &Path, id: &str) -> String {
    format!(
        "grains:\n  stdest: {}\n  os_family: Debian\n",
        dest(&base.join(format!("minion-{id}"))).display()
    )
}

/// Both minions, signed in to `st`, run the same calls: the same returns and files.
fn compare_minions(st: &Master, v7: &Path) {
    let base_dir = st.base();
    let root_of = |id: &str| base_dir.join(format!("minion-{id}"));
    for id in [REAL, BRINE] {
        // Something state.absent removes.
        write(&dest(&root_of(id)).join("app/old.conf"), "old\n");
    }

    let mut failures = Vec::new();
    let mut compare = |what: &str, args: &[&str], pick: fn(&Value) -> Value| {
        let mut a = vec!["-t", "120", "-L", "real7,brine1"];
        a.extend_from_slice(args);
        let (v, _) = st.salt_json(&a);
        let real = normalize(&pick(&v[REAL]), &root_of(REAL), REAL);
        let brine = normalize(&pick(&v[BRINE]), &root_of(BRINE), BRINE);
        if real != brine {
            failures.push(format!(
                "{what}:\n  salt-minion: {real}\n  brine:       {brine}"
            ));
        }
        v
    };
    let same = |v: &Value| v.clone();
    compare("list_master", &["cp.list_master"], same);
    compare("list_master dev", &["cp.list_master", "saltenv=dev"], same);
    compare(
        "list_master prefix",
        &["cp.list_master", "prefix=app/files"],
        same,
    );
    compare("list_master_dirs", &["cp.list_master_dirs"], same);
    compare("list_states", &["cp.list_states"], same);
    compare(
        "hash_file",
        &["cp.hash_file", "salt://app/files/static.txt"],
        same,
    );
    compare(
        "hash_file missing",
        &["cp.hash_file", "salt://nope.txt"],
        same,
    );
    compare(
        "is_cached before",
        &["cp.is_cached", "salt://app/files/static.txt"],
        same,
    );
    compare(
        "cache_file",
        &["cp.cache_file", "salt://app/files/static.txt"],
        same,
    );
    compare(
        "cache_file missing",
        &["cp.cache_file", "salt://nope.txt"],
        same,
    );
    compare(
        "is_cached after",
        &["cp.is_cached", "salt://app/files/static.txt"],
        same,
    );
    for id in [REAL, BRINE] {
        let got = dest(&root_of(id)).join("got");
        let (v, _) = st.salt_json(&[
            "-t",
            "60",
            id,
            "cp.get_file",
            "salt://app/files/static.txt",
            &got.join("static.txt").display().to_string(),
            "makedirs=True",
        ]);
        assert_eq!(
            fs::read_to_string(got.join("static.txt")).unwrap_or_default(),
            "static\n",
            "{v}"
        );
        let (v, _) = st.salt_json(&[
            "-t",
            "60",
            id,
            "cp.get_template",
            "salt://app/files/settings.ini.j2",
            &got.join("settings.ini").display().to_string(),
            "app={'port': 1, 'user': 'u', 'service': 's', 'role': 'r', 'features': ['f']}",
        ]);
        assert!(got.join("settings.ini").exists(), "{v}");
    }
    compare("show_sls", &["state.show_sls", "checks"], same);
    compare("apply test", &["state.apply", "test=True"], states);
    let applied = compare("apply", &["state.apply"], states);
    assert!(
        applied[BRINE].as_object().is_some_and(|m| m.len() >= 10),
        "{applied}"
    );
    let again = compare("apply again", &["state.apply"], states);
    for (k, s) in again[BRINE].as_object().cloned().unwrap_or_default() {
        // These change on every run, as they do with salt-minion.
        if k.starts_with("test_|-changed") || k.starts_with("cmd_|-only-if-present") {
            continue;
        }
        assert_eq!(s["changes"], json!({}), "a second apply changed {k}: {s}");
    }
    // Options after the function and its arguments, as users type them.
    compare(
        "sls dev",
        &["state.sls", "devtools", "saltenv=dev", "--timeout", "120"],
        states,
    );
    compare("sls bad", &["state.sls", "bad"], states);
    compare("grains test", &["state.sls", "roles", "test=True"], states);
    compare("grains", &["state.sls", "roles"], states);
    compare("grains again", &["state.sls", "roles"], states);
    compare(
        "grains set",
        &["grains.item", "roles", "app", "site", "tier", "color"],
        same,
    );
    compare("sls broken", &["state.sls", "broken"], |v| {
        // The render error's wording is the template library's: compare its shape.
        match v.as_array() {
            Some(errors) => json!(errors
                .iter()
                .map(|e| e
                    .as_str()
                    .unwrap_or("")
                    .split(':')
                    .next()
                    .unwrap_or("")
                    .to_string())
                .collect::<Vec<_>>()),
            None => v.clone(),
        }
    });
    compare(
        "single",
        &["state.single", "test.succeed_with_changes", "name=one"],
        states,
    );
    // Syncing: nothing to sync gives both the same empty list; a custom Python module is
    // run by salt-minion and refused by name by Brine's minion.
    compare("sync_states", &["saltutil.sync_states"], same);
    compare(
        "sync_grains dev",
        &["saltutil.sync_grains", "saltenv=dev"],
        same,
    );
    compare("refresh_pillar", &["saltutil.refresh_pillar"], same);
    let (v, _) = st.salt_json(&["-t", "60", BRINE, "saltutil.sync_modules"]);
    let refused = v[BRINE].as_str().unwrap_or_default();
    assert!(
        refused.contains("modules.custom (salt://_modules/custom.py?saltenv=base)"),
        "{v}"
    );
    // salt-minion synced it with its first highstate and runs it.
    let (v, _) = st.salt_json(&["-t", "60", REAL, "custom.hello"]);
    assert_eq!(v[REAL], json!("hi"));

    // cp.push: each minion's file lands in the master's cache under its own id.
    fs::write(base_dir.join("pushed.txt"), "pushed\n").unwrap();
    let pushed = base_dir.join("pushed.txt").display().to_string();
    compare("cp.push", &["cp.push", &pushed], same);
    compare(
        "cp.push upload_path",
        &["cp.push", &pushed, "upload_path=/up/loaded.txt"],
        same,
    );
    compare("cp.push relative", &["cp.push", "pushed.txt"], same);
    compare("cp.push missing", &["cp.push", "/no/such/file"], same);
    compare(
        "cp.push climbing",
        &["cp.push", &pushed, "upload_path=/a/../../x"],
        same,
    );
    for id in [REAL, BRINE] {
        let files = st.root().join("cache/minions").join(id).join("files");
        let rel = pushed.trim_start_matches('/');
        for got in [files.join(rel), files.join("up/loaded.txt")] {
            assert_eq!(
                fs::read_to_string(&got).unwrap_or_else(|e| format!("{}: {e}", got.display())),
                "pushed\n"
            );
        }
    }

    // The master's `state_events: True`: the same progress events from both minions.
    let mut bus = st.bus();
    st.salt_json(&["-t", "120", "-L", "real7,brine1", "state.sls", "checks"]);
    let events = progress_events(&mut bus);
    let (real, brine) = (&events.get(REAL), &events.get(BRINE));
    assert!(real.is_some_and(|e| e.len() >= 6), "{events:?}");
    if real != brine {
        failures.push(format!(
            "state_events:\n  salt-minion: {real:?}\n  brine:       {brine:?}"
        ));
    }

    // The files on disk are the same.
    for file in [
        "got/settings.ini",
        "app/settings.ini",
        "app/motd",
        "app/static.txt",
        "app/prepared",
        "app/reloaded",
        "app/marker",
        "dev/tools.txt",
        "dev/built",
    ] {
        let read = |id: &str| {
            fs::read_to_string(dest(&root_of(id)).join(file))
                .unwrap_or_else(|e| format!("<{e}>"))
                .replace(id, "<ID>")
                .replace(&root_of(id).display().to_string(), "<ROOT>")
        };
        if read(REAL) != read(BRINE) {
            failures.push(format!("{file}: {:?} vs {:?}", read(REAL), read(BRINE)));
        }
    }
    assert!(!dest(&root_of(BRINE)).join("app/old.conf").exists());

    // salt-call through the master, on each minion's own config: the same returns, the same
    // files, and each call recorded by the master as a job of that minion.
    let salt_call = |id: &str, args: &[&str]| {
        let program = if id == REAL {
            v7.join("bin/salt-call")
        } else {
            brine_e2e::bin("salt-call")
        };
        let o = std::process::Command::new(program)
            .arg("-c")
            .arg(root_of(id).join("etc"))
            .args(["--out", "json"])
            .args(args)
            .output()
            .expect("run salt-call");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| {
            json!({"unparsed": String::from_utf8_lossy(&o.stdout), "stderr": String::from_utf8_lossy(&o.stderr)})
        });
        (v, o.status.code())
    };
    let mut call_compare = |what: &str, args: &[&str], pick: fn(&Value) -> Value| {
        let (real, real_code) = salt_call(REAL, args);
        let (brine, brine_code) = salt_call(BRINE, args);
        let real = normalize(&pick(&real["local"]), &root_of(REAL), REAL);
        let brine = normalize(&pick(&brine["local"]), &root_of(BRINE), BRINE);
        if (real.clone(), real_code) != (brine.clone(), brine_code) {
            failures.push(format!(
                "salt-call {what}:\n  salt-call: {real} ({real_code:?})\n  brine:     {brine} ({brine_code:?})"
            ));
        }
    };
    call_compare("pillar.items", &["pillar.items"], same);
    call_compare("grains.item", &["grains.item", "stdest"], same);
    call_compare("state.apply test", &["state.apply", "test=True"], states);
    call_compare("state.apply", &["state.apply"], states);
    call_compare("state.sls bad", &["state.sls", "bad"], states);
    for id in [REAL, BRINE] {
        let got = dest(&root_of(id)).join("called/static.txt");
        let got_text = got.display().to_string();
        let (v, code) = salt_call(
            id,
            &[
                "cp.get_file",
                "salt://app/files/static.txt",
                &got_text,
                "makedirs=True",
            ],
        );
        assert_eq!(code, Some(0), "{id}: {v}");
        assert_eq!(v["local"], json!(got_text), "{id}");
        assert_eq!(
            fs::read_to_string(&got).unwrap_or_default(),
            "static\n",
            "{id}"
        );
    }
    let jobs = st.tool("salt-run", &["--out", "json", "jobs.list_jobs"]);
    let jobs: Value = serde_json::from_slice(&jobs.stdout).unwrap_or(Value::Null);
    for id in [REAL, BRINE] {
        let called = jobs.as_object().is_some_and(|m| {
            m.values()
                .any(|j| j["Function"] == "pillar.items" && j["Target"] == json!(id))
        });
        if !called {
            failures.push(format!("the master has no salt-call job of {id}: {jobs}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        st.logs()
    );
}
