//! The file server with real minions: a real Salt 3007 and a real 3006 minion against Brine's
//! master use `cp.*` and the state system (`state.show_top`, `state.show_sls`, `state.apply`
//! with and without `test=True`, `state.sls` of another saltenv) on a tree written here; the
//! same minions against a real Salt 3007 master serving the same tree give the same results
//! (timings and the temp directory names left out). A minion that asks for files outside the
//! roots gets nothing from either master.
//!
//! Needs BRINE_SALT3007 and BRINE_SALT3006 (set by scripts/test).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use brine_e2e::real::{self, Fleet, RealMaster};
use brine_e2e::{stderr, stdout, Stack};
use serde_json::{json, Value};

const MINIONS: [&str; 2] = ["fs3007", "fs3006"];

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A state tree: two roots for `base` (the first wins), one for `dev`; with `leak`, a
/// symlink in base to a file outside the roots (Salt 3007 follows such links by default and
/// serves the file; Brine never does, so the comparison with Salt runs without it).
fn write_tree(tree: &Path, leak: bool) {
    let base = tree.join("base");
    write(
        &base.join("top.sls"),
        "base:\n  '*':\n    - web\n    - app\ndev:\n  '*':\n    - devtools\n",
    );
    write(
        &base.join("web/init.sls"),
        "{% set dest = grains['fsdest'] %}\ninclude:\n  - web.config\n\n\
         web-marker:\n  cmd.run:\n    - name: echo ready > {{ dest }}/marker\n\
         \x20   - creates: {{ dest }}/marker\n    - require:\n      - file: app-conf\n      - file: site-dir\n",
    );
    write(
        &base.join("web/config.sls"),
        "{% set dest = grains['fsdest'] %}\napp-conf:\n  file.managed:\n\
         \x20   - name: {{ dest }}/etc/app.conf\n    - source: salt://web/files/app.conf.j2\n\
         \x20   - template: jinja\n    - makedirs: True\n    - mode: '0640'\n\
         \x20   - context:\n        port: 8080\n        app: brine\n\n\
         site-dir:\n  file.recurse:\n    - name: {{ dest }}/site\n    - source: salt://web/files/site\n\
         \x20   - require:\n      - file: app-conf\n",
    );
    write(
        &base.join("web/files/app.conf.j2"),
        "# {{ app }}\nport = {{ port }}\nminion = {{ grains['id'] }}\n",
    );
    write(&base.join("web/files/site/index.html"), "<h1>Brine</h1>\n");
    write(
        &base.join("web/files/site/css/site.css"),
        "body { margin: 0 }\n",
    );
    // The second root of base: its top.sls is hidden by the first; its files join the tree.
    let base2 = tree.join("base2");
    write(&base2.join("top.sls"), "this: [is never served\n");
    write(
        &base2.join("web/files/site/extra.txt"),
        "from the second root\n",
    );
    let dev = tree.join("dev");
    write(
        &dev.join("devtools.sls"),
        "{% set dest = grains['fsdest'] %}\ndev-tools:\n  file.managed:\n\
         \x20   - name: {{ dest }}/dev/tools.txt\n    - contents: dev tools\n    - makedirs: True\n\n\
         dev-built:\n  cmd.run:\n    - name: echo built > {{ dest }}/dev/built\n\
         \x20   - onchanges:\n      - file: dev-tools\n",
    );
    // An orchestration, shown by salt-run state.orchestrate_show_sls on the master.
    write(
        &dev.join("orch.sls"),
        "include:\n  - notify\n{% for t in ['fs30*', 'nobody'] %}\n\
         apply-{{ loop.index }}:\n  salt.state:\n    - tgt: '{{ t }}'\n    - sls: web\n\
         \x20   - require:\n      - salt: ping\n{% endfor %}\n\
         ping:\n  salt.function:\n    - name: test.ping\n    - tgt: '*'\n",
    );
    write(
        &dev.join("notify.sls"),
        "notify:\n  test.succeed_with_changes:\n    - name: say hello\n",
    );
    // A formula in the style of public ones: map.jinja with defaults.yaml, grains.filter_by
    // and the pillar merged in; contents_pillar; prereq and watch; extend.
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
         \x20 }, default='Debian') %}\n\
         {% set app = salt['defaults.merge'](defaults.app, os_map, in_place=False) %}\n\
         {% do app.update(salt['pillar.get']('app', {})) %}\n",
    );
    write(
        &base.join("app/init.sls"),
        "{% from 'app/map.jinja' import app with context %}\n\
         {% set dest = grains['fsdest'] %}\n\
         include:\n  - web.config\n\n\
         app-settings:\n  file.managed:\n    - name: {{ dest }}/app/settings.ini\n\
         \x20   - source: salt://app/files/settings.ini.j2\n    - template: jinja\n\
         \x20   - makedirs: True\n    - context:\n        app: {{ app | json }}\n\n\
         app-motd:\n  file.managed:\n    - name: {{ dest }}/app/motd\n\
         \x20   - contents_pillar: app:motd\n    - makedirs: True\n\n\
         app-prepare:\n  cmd.run:\n    - name: echo prepared >> {{ dest }}/app/prepared\n\
         \x20   - prereq:\n      - file: app-motd\n\n\
         app-reload:\n  cmd.run:\n    - name: echo reloaded >> {{ dest }}/app/reloaded\n\
         \x20   - creates: {{ dest }}/app/reloaded\n    - watch:\n      - file: app-settings\n\n\
         extend:\n  site-dir:\n    file.recurse:\n      - file_mode: '0644'\n",
    );
    write(
        &base.join("app/files/settings.ini.j2"),
        "[app]\nport = {{ app.port }}\nuser = {{ app.user }}\nservice = {{ app.service }}\n\
         role = {{ app.role }}\nfeatures = {{ app.features | join(',') }}\n",
    );
    // The pillar: a top with grain and compound matches, so the two minions get different
    // data; an include.
    let pillar = tree.join("pillar");
    write(
        &pillar.join("top.sls"),
        "base:\n  '*':\n    - common\n  'fsrole:web':\n    - match: grain\n    - web\n\
         \x20 'G@fsrole:db or L@nobody':\n    - db\n",
    );
    write(
        &pillar.join("common.sls"),
        "include:\n  - shared\napp:\n  motd: |\n    Welcome to {{ grains['id'] }}\n\
         \x20 features: [base, pillar]\n",
    );
    write(&pillar.join("shared.sls"), "shared:\n  from: include\n");
    write(&pillar.join("web.sls"), "app:\n  port: 8081\n  role: web\n");
    write(&pillar.join("db.sls"), "app:\n  port: 5432\n  role: db\n");
    // Outside every root.
    write(&tree.join("secret.txt"), "TOP SECRET\n");
    if leak {
        std::os::unix::fs::symlink(tree.join("secret.txt"), base.join("leak")).unwrap();
    }
}

/// The roots of both masters: file_roots (two for base, one for dev) and pillar_roots.
fn roots(tree: &Path) -> String {
    let t = tree.display();
    format!(
        "file_roots:\n  base:\n    - {t}/base\n    - {t}/base2\n  dev:\n    - {t}/dev\n\
         pillar_roots:\n  base:\n    - {t}/pillar\n"
    )
}

/// Each minion's grains: where its states write, and its role (the pillar top matches it).
fn minion_grains(id: &str, root: &Path) -> String {
    let role = if id == "fs3007" { "web" } else { "db" };
    format!(
        "grains:\n  fsdest: {}/out\n  fsrole: {role}\n",
        root.display()
    )
}

/// Replace the temp directory names in every string (keys too) and drop timings and pids.
/// `salt -L ... state.apply --state-output terse` as a user types it (options after the
/// function, plain text): the minions' blocks (printed as they return) sorted, with the timings
/// and the test's temp paths taken out; and the exit status.
fn highstate_text(out: &std::process::Output, root: &Path) -> (Vec<String>, Option<i32>) {
    let mut text = stdout(out);
    for id in MINIONS {
        let dir = root.join(format!("minion-{id}")).display().to_string();
        text = text.replace(&dir, "<MINION_ROOT>");
    }
    let mut blocks: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = match line.find(" - Started: ") {
            Some(at) => &line[..at],
            None if line.starts_with("Total run time:") => "Total run time:",
            None => line,
        };
        if MINIONS.iter().any(|id| line == format!("{id}:")) || blocks.is_empty() {
            blocks.push(String::new());
        }
        let last = blocks.last_mut().expect("a block");
        last.push_str(line);
        last.push('\n');
    }
    blocks.sort();
    (blocks, out.status.code())
}

fn normalize(v: &Value, roots: &[(PathBuf, &str)]) -> Value {
    let replace: Vec<(String, String)> = roots
        .iter()
        .map(|(p, name)| (p.display().to_string(), name.to_string()))
        .collect();
    brine_e2e::normalize(v, &replace)
}

/// A state comment made of `#### path ####` sections (file.recurse) with its sections
/// sorted: the minion orders them by iterating a Python set, which differs from run to run.
fn sections_sorted(comment: &Value) -> Value {
    match comment.as_str() {
        Some(c) if c.contains("#### ") => {
            let mut parts: Vec<&str> = c.split("#### ").map(str::trim).collect();
            parts.sort_unstable();
            Value::from(parts.join(" | "))
        }
        _ => comment.clone(),
    }
}

/// Per state: result, changes, comment, __run_num__.
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
                            "comment": sections_sorted(&s["comment"]),
                            "__run_num__": s["__run_num__"],
                        }),
                    )
                })
                .collect(),
        ),
        None => v.clone(),
    }
}

/// What one master gives the two minions, normalized.
struct Session {
    results: Vec<(String, Value)>,
}

/// Run the whole sequence through `salt` and `salt-run` (Brine's or the real ones) and
/// collect the answers. The pillar tree under `tree` is changed at the end (a broken SLS).
fn run_sequence(
    salt: &dyn Fn(&[&str]) -> Value,
    salt_run: &dyn Fn(&[&str]) -> Value,
    minion_root: &dyn Fn(&str) -> PathBuf,
    tree: &Path,
) -> Session {
    let results = std::cell::RefCell::new(Vec::new());
    let list = MINIONS.join(",");
    let record = |name: &str, args: &[&str], pick: fn(&Value) -> Value| {
        let mut a = vec!["-t", "120", "-L", list.as_str()];
        a.extend_from_slice(args);
        let v = salt(&a);
        for id in MINIONS {
            let roots = [(minion_root(id), "<MINION_ROOT>")];
            let got = normalize(&pick(&v[id]), &roots);
            results.borrow_mut().push((format!("{name} {id}"), got));
        }
        v
    };
    let same = |v: &Value| v.clone();
    // A master just started may not have walked its roots yet (real Salt updates its file
    // lists in a background process): wait until every minion sees a list before comparing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let all = MINIONS.join(",");
    while std::time::Instant::now() < deadline {
        let v = salt(&["-t", "120", "-L", all.as_str(), "cp.list_master"]);
        if MINIONS
            .iter()
            .all(|id| v[*id].as_array().is_some_and(|l| !l.is_empty()))
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    let listed = record("list_master", &["cp.list_master"], same);
    for id in MINIONS {
        // Brine's tree has a `leak` symlink out of the roots: never listed.
        let want = [
            "app/defaults.yaml",
            "app/files/settings.ini.j2",
            "app/init.sls",
            "app/map.jinja",
            "top.sls",
            "web/config.sls",
            "web/files/app.conf.j2",
            "web/files/site/css/site.css",
            "web/files/site/extra.txt",
            "web/files/site/index.html",
            "web/init.sls",
        ];
        assert_eq!(listed[id], json!(want), "{listed}");
    }
    record("list_master dev", &["cp.list_master", "saltenv=dev"], same);
    record(
        "list_master prefix",
        &["cp.list_master", "prefix=web/files"],
        same,
    );
    record("list_master_dirs", &["cp.list_master_dirs"], same);
    record(
        "hash_file",
        &["cp.hash_file", "salt://web/files/app.conf.j2"],
        same,
    );
    record(
        "hash_file dev",
        &["cp.hash_file", "salt://notify.sls", "saltenv=dev"],
        same,
    );
    record(
        "hash_file missing",
        &["cp.hash_file", "salt://nope.txt"],
        same,
    );
    record("cache_file", &["cp.cache_file", "salt://top.sls"], same);
    for id in MINIONS {
        let dest = minion_root(id).join("got/index.html");
        let v = salt(&[
            "-t",
            "60",
            id,
            "cp.get_file",
            "salt://web/files/site/index.html",
            &dest.display().to_string(),
            "makedirs=True",
        ]);
        results.borrow_mut().push((
            format!("get_file {id}"),
            normalize(&v[id], &[(minion_root(id), "<MINION_ROOT>")]),
        ));
        assert_eq!(
            fs::read_to_string(&dest).unwrap_or_default(),
            "<h1>Brine</h1>\n",
            "{v}"
        );
        // gzip: the chunks travel compressed and arrive whole.
        let gz = minion_root(id).join("got/app.conf.j2");
        let v = salt(&[
            "-t",
            "60",
            id,
            "cp.get_file",
            "salt://web/files/app.conf.j2",
            &gz.display().to_string(),
            "gzip=5",
        ]);
        results.borrow_mut().push((
            format!("get_file gzip {id}"),
            normalize(&v[id], &[(minion_root(id), "<MINION_ROOT>")]),
        ));
        assert_eq!(
            fs::read_to_string(&gz).unwrap_or_default(),
            "# {{ app }}\nport = {{ port }}\nminion = {{ grains['id'] }}\n",
            "{v}"
        );
        let dir = minion_root(id).join("gotdir");
        let v = salt(&[
            "-t",
            "60",
            id,
            "cp.get_dir",
            "salt://web/files/site",
            &dir.display().to_string(),
        ]);
        let mut got = v[id].as_array().cloned().unwrap_or_default();
        got.sort_by_key(|x| x.to_string());
        results.borrow_mut().push((
            format!("get_dir {id}"),
            normalize(&Value::Array(got), &[(minion_root(id), "<MINION_ROOT>")]),
        ));
        assert_eq!(
            fs::read_to_string(dir.join("site/extra.txt")).unwrap_or_default(),
            "from the second root\n",
            "{v}"
        );
        let v = salt(&[
            "-t",
            "60",
            id,
            "cp.get_file",
            "salt://leak",
            &minion_root(id).join("leak").display().to_string(),
        ]);
        results
            .borrow_mut()
            .push((format!("get_file leak {id}"), v[id].clone()));
        assert!(
            !minion_root(id).join("leak").exists(),
            "a file outside the roots was served"
        );
    }
    // The pillar: each minion its own.
    let pillars = record("pillar.items", &["pillar.items"], same);
    assert_eq!(pillars["fs3007"]["app"]["role"], json!("web"), "{pillars}");
    assert_eq!(pillars["fs3006"]["app"]["role"], json!("db"), "{pillars}");
    assert_eq!(
        pillars["fs3006"]["app"]["motd"],
        json!("Welcome to fs3006\n")
    );
    assert_eq!(pillars["fs3007"]["shared"], json!({"from": "include"}));
    record("pillar.get", &["pillar.get", "app:port"], same);
    record(
        "pillar.item",
        &["pillar.item", "shared", "app:features"],
        same,
    );
    for id in MINIONS {
        let name = format!("show_pillar {id}");
        let got = salt_run(&["pillar.show_pillar", id]);
        results.borrow_mut().push((name, got));
    }
    results.borrow_mut().push((
        "show_top runner".into(),
        salt_run(&["pillar.show_top", "fs3007"]),
    ));
    record("show_top", &["state.show_top"], same);
    record("show_sls", &["state.show_sls", "web"], same);
    record("show_sls app", &["state.show_sls", "app"], same);
    record("apply test", &["state.apply", "test=True"], states);
    record("apply", &["state.apply"], states);
    let again = record("apply again", &["state.apply"], states);
    for id in MINIONS {
        let m = again[id].as_object().unwrap_or_else(|| panic!("{again}"));
        assert!(!m.is_empty(), "{again}");
        for (k, s) in m {
            assert_eq!(s["result"], json!(true), "{k}: {s}");
            assert_eq!(s["changes"], json!({}), "a second apply changed {k}: {s}");
        }
        let conf = fs::read_to_string(minion_root(id).join("out/etc/app.conf")).unwrap_or_default();
        assert_eq!(conf, format!("# brine\nport = 8080\nminion = {id}\n"));
        // map.jinja's defaults, the OS map and this minion's pillar, merged.
        let (port, role) = if id == "fs3007" {
            (8081, "web")
        } else {
            (5432, "db")
        };
        let settings =
            fs::read_to_string(minion_root(id).join("out/app/settings.ini")).unwrap_or_default();
        assert_eq!(
            settings,
            format!(
                "[app]\nport = {port}\nuser = www-data\nservice = apache2\nrole = {role}\nfeatures = base,pillar\n"
            )
        );
        let motd = fs::read_to_string(minion_root(id).join("out/app/motd")).unwrap_or_default();
        assert_eq!(motd, format!("Welcome to {id}\n"));
    }
    record("sls dev", &["state.sls", "notify", "saltenv=dev"], states);
    // A pillar SLS that does not render, for fs3006 only: it gets Salt's error, fs3007
    // keeps its pillar, and fs3006's highstate is refused with the error.
    write(
        &tree.join("pillar/broken.sls"),
        "broken: {{ grains['fsrole'] \n",
    );
    let top = tree.join("pillar/top.sls");
    let text = fs::read_to_string(&top).unwrap();
    fs::write(&top, format!("{text}  'fs3006':\n    - broken\n")).unwrap();
    let broken = record("pillar.items broken", &["pillar.items"], same);
    assert_eq!(
        broken["fs3006"]["_errors"],
        json!(["Rendering SLS 'broken' failed. Please see master log for details."]),
        "{broken}"
    );
    assert!(broken["fs3007"].get("_errors").is_none(), "{broken}");
    record("apply broken pillar", &["state.apply", "test=True"], same);
    Session {
        results: results.into_inner(),
    }
}

/// Ask a master directly, through the minion's own request channel (Salt's client code), for
/// files outside the roots.
fn raw_requests(venv: &Path, minion_root: &Path) -> Value {
    let script = r#"
import json, sys
import salt.config, salt.channel.client, salt.minion
opts = salt.config.minion_config(sys.argv[1])
opts.update(salt.minion.resolve_dns(opts))
chan = salt.channel.client.ReqChannel.factory(opts, crypt="aes")
out = {}
paths = ["../../etc/passwd", "../secret.txt", "/etc/passwd", sys.argv[2], "%2e%2e/secret.txt",
         "%2e%2e%2fsecret.txt", "leak", "web/../../secret.txt", "top.sls\x00.txt"]
def text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, dict):
        return {text(k): text(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [text(x) for x in v]
    return v
for p in paths:
    for cmd in ("_serve_file", "_file_hash", "_file_find", "_file_hash_and_stat"):
        load = {"cmd": cmd, "path": p, "saltenv": "base", "loc": 0, "id": opts["id"]}
        out[cmd + " " + p] = text(chan.send(load, tries=1, timeout=30))
for env in ("../..", "/etc"):
    out["_dir_list " + env] = text(chan.send({"cmd": "_dir_list", "saltenv": env, "prefix": "", "id": opts["id"]}, tries=1, timeout=30))
chan.close()
print(json.dumps(out, sort_keys=True))
"#;
    let secret = minion_root
        .parent()
        .unwrap()
        .join("tree/secret.txt")
        .display()
        .to_string();
    let out = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .arg(minion_root.join("etc/minion"))
        .arg(&secret)
        .output()
        .expect("run python");
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    // The absolute path differs between the two setups: name it once.
    let Value::Object(m) = v else { panic!("{v}") };
    Value::Object(
        m.into_iter()
            .map(|(k, x)| (k.replace(&secret, "<SECRET>"), x))
            .collect(),
    )
}

fn check_refusals(v: &Value) {
    for (k, x) in v.as_object().unwrap() {
        let s = x.to_string();
        assert!(
            !s.contains("TOP SECRET") && !s.contains("root:"),
            "{k}: {s}"
        );
        let want = if k.starts_with("_serve_file") {
            json!({"data": "", "dest": ""})
        } else if k.starts_with("_file_hash_and_stat") {
            json!(["", null])
        } else if k.starts_with("_file_hash") {
            json!("")
        } else if k.starts_with("_file_find") {
            json!({"path": "", "rel": ""})
        } else {
            json!([])
        };
        assert_eq!(x, &want, "{k}");
    }
}

#[test]
fn real_minions_use_brines_file_server_as_they_use_salts() {
    let Some((v7, v6)) = real::venvs() else {
        return;
    };
    let venv_of = |id: &str| {
        if id == "fs3007" {
            v7.clone()
        } else {
            v6.clone()
        }
    };

    // ---- Brine's master ----
    let mut st = Stack::new("timeout: 30\n");
    let tree = st.dir.path().join("tree");
    write_tree(&tree, true);
    let conf = st.master_conf_dir().join("master");
    let text = fs::read_to_string(&conf).unwrap();
    fs::write(&conf, format!("{text}{}", roots(&tree))).unwrap();
    st.start_master();
    let mut fleet = Fleet::default();
    for id in MINIONS {
        let root = st.dir.path().join(format!("minion-{id}"));
        let extra = minion_grains(id, &root);
        real::write_minion_conf(&root, id, st.ret_port, st.publish_port, &extra);
        fleet.0.push(real::start_real_minion(&venv_of(id), &root));
    }
    st.wait_pending(&MINIONS);
    for id in MINIONS {
        assert!(st.tool("salt-key", &["-y", "-a", id]).status.success());
    }
    st.wait_answering(&MINIONS);
    let brine_root = st.dir.path().to_path_buf();
    let brine_run = |args: &[&str]| {
        let mut a = vec!["--out", "json"];
        a.extend_from_slice(args);
        let out = st.tool("salt-run", &a);
        serde_json::from_str::<Value>(stdout(&out).trim())
            .unwrap_or_else(|_| panic!("salt-run {args:?}: {}{}", stdout(&out), stderr(&out)))
    };
    let brine = run_sequence(
        &|args| st.salt_json(args).0,
        &brine_run,
        &|id| brine_root.join(format!("minion-{id}")),
        &tree,
    );
    // The runners see the same tree.
    let out = st.tool("salt-run", &["--out", "json", "fileserver.file_list"]);
    let files: Value = serde_json::from_str(stdout(&out).trim()).unwrap_or(Value::Null);
    assert!(
        files
            .as_array()
            .is_some_and(|f| f.contains(&json!("web/files/site/extra.txt"))),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(!files.to_string().contains("leak"), "{files}");
    let out = st.tool("salt-run", &["--out", "json", "fileserver.envs"]);
    assert_eq!(
        serde_json::from_str::<Value>(stdout(&out).trim()).ok(),
        Some(json!(["base", "dev"]))
    );
    let terse = [
        "-L",
        "fs3007,fs3006",
        "state.apply",
        "--state-output",
        "terse",
        "-t",
        "120",
    ];
    let brine_terse = highstate_text(&st.tool("salt", &terse), &brine_root);
    let brine_raw = raw_requests(&v7, &brine_root.join("minion-fs3007"));
    check_refusals(&brine_raw);
    drop(fleet);
    st.stop_master();

    // ---- a real Salt 3007 master, the same tree ----
    let mut rm = RealMaster::new(&v7, "timeout: 30\n");
    let tree = rm.dir.path().join("tree");
    write_tree(&tree, false);
    let conf = rm.conf_dir().join("master");
    let text = fs::read_to_string(&conf).unwrap();
    let r = rm.root().display().to_string();
    let default_roots =
        format!("file_roots:\n  base: [{r}/srv/salt]\npillar_roots:\n  base: [{r}/srv/pillar]\n");
    assert!(text.contains(&default_roots));
    fs::write(&conf, text.replace(&default_roots, &roots(&tree))).unwrap();
    rm.start();
    for id in MINIONS {
        let root = rm.dir.path().join(format!("minion-{id}"));
        let extra = minion_grains(id, &root);
        rm.start_real_minion(&venv_of(id), id, &extra);
    }
    rm.accept(&MINIONS);
    rm.wait_answering(&MINIONS);
    let real_root = rm.dir.path().to_path_buf();
    let real_run = |args: &[&str]| {
        let mut a = vec!["--out", "json"];
        a.extend_from_slice(args);
        let out = rm.tool("salt-run", &a);
        serde_json::from_str::<Value>(stdout(&out).trim())
            .unwrap_or_else(|_| panic!("real salt-run {args:?}: {}{}", stdout(&out), stderr(&out)))
    };
    let salt = run_sequence(
        &|args| rm.salt_json(args).0,
        &real_run,
        &|id| real_root.join(format!("minion-{id}")),
        &tree,
    );
    let salt_terse = highstate_text(&rm.tool("salt", &terse), &real_root);
    let real_raw = raw_requests(&v7, &real_root.join("minion-fs3007"));

    for ((name, b), (_, s)) in brine.results.iter().zip(&salt.results) {
        assert_eq!(
            b, s,
            "{name}: Brine's master (left) and Salt's (right) differ"
        );
    }
    assert_eq!(brine.results.len(), salt.results.len());
    // The highstate outputter prints what Salt's prints, and exits as it does.
    assert_eq!(brine_terse, salt_terse, "salt ... --state-output terse");
    assert!(
        brine_terse
            .0
            .iter()
            .any(|b| b.contains("Summary for fs3007")),
        "{brine_terse:?}"
    );
    // Both refuse alike (the real master's tree has no `leak` symlink: see write_tree).
    check_refusals(&real_raw);
    assert_eq!(real_raw, brine_raw);
    rm.stop();
}
