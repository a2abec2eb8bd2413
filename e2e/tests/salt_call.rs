//! salt-call --local runs a function on the spot, with Salt's output and exit codes; without a
//! master to sign in to, salt-call stops as Salt's does.

use brine_e2e::{bin, stderr, stdout};

fn salt_call(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(bin("salt-call"))
        .arg("-c")
        .arg(dir)
        .arg("--local")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn salt_call_local() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("minion"),
        format!(
            "id: caller\nroot_dir: {0}\ngrains:\n  role: tester\n",
            d.path().display()
        ),
    )
    .unwrap();
    let o = salt_call(d.path(), &["test.ping"]);
    assert_eq!(stdout(&o), "local:\n    True\n", "{}", stderr(&o));
    assert!(o.status.success());

    let o = salt_call(d.path(), &["--out", "json", "grains.item", "role", "id"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"local": {"role": "tester", "id": "caller"}})
    );

    let o = salt_call(
        d.path(),
        &["--out", "json", "cmd.run_all", "echo hi; exit 4"],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["local"]["stdout"], "hi");
    assert_eq!(v["local"]["retcode"], 4);
    assert_eq!(o.status.code(), Some(1));
    let o = salt_call(
        d.path(),
        &["--retcode-passthrough", "cmd.retcode", "exit 5"],
    );
    assert_eq!(o.status.code(), Some(5));

    let o = salt_call(d.path(), &["nosuch.func"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("'nosuch.func' is not available."),
        "{}",
        stdout(&o)
    );

    // Without --local and with no master answering: Salt's one-line message and exit code 2
    // once the sign-in times out, not a hang.
    let conf = std::fs::read_to_string(d.path().join("minion")).unwrap();
    std::fs::write(
        d.path().join("minion"),
        format!(
            "{conf}master: 127.0.0.1\nmaster_port: {}\nauth_timeout: 1\n",
            brine_e2e::free_port()
        ),
    )
    .unwrap();
    let o = std::process::Command::new(bin("salt-call"))
        .arg("-c")
        .arg(d.path())
        .arg("test.ping")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        "Minion failed to authenticate with the master, has the minion key been accepted?"
    );
}

/// Grains Salt computes that Brine does not report, each for a reason: the Python interpreter
/// running Salt (`pythonexecutable`, `pythonpath`, `pythonversion`) and how Salt was packaged
/// (`package`) do not exist in Brine; `fqdns` needs reverse DNS lookups of every address.
const GRAINS_NOT_REPORTED: &[&str] = &[
    "fqdns",
    "package",
    "pythonexecutable",
    "pythonpath",
    "pythonversion",
];

#[test]
fn core_grains_are_those_salt_reports() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("minion"),
        format!(
            "id: caller\nroot_dir: {0}\nfile_client: local\n",
            d.path().display()
        ),
    )
    .unwrap();
    let real = std::process::Command::new(salt3007.join("bin/salt-call"))
        .arg("-c")
        .arg(d.path())
        .args(["--local", "--out", "json", "grains.items"])
        .output()
        .unwrap();
    let real: serde_json::Value = serde_json::from_slice(&real.stdout)
        .unwrap_or_else(|e| panic!("real salt-call: {e}: {}", stderr(&real)));
    let ours = salt_call(d.path(), &["--out", "json", "grains.items"]);
    let ours: serde_json::Value = serde_json::from_slice(&ours.stdout).unwrap();
    let (real, ours) = (
        real["local"].as_object().unwrap(),
        ours["local"].as_object().unwrap(),
    );
    let missing: Vec<&String> = real
        .keys()
        .filter(|k| !ours.contains_key(*k) && !GRAINS_NOT_REPORTED.contains(&k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "grains Salt reports and Brine does not: {missing:?}"
    );
    // Host facts read from the same machine agree.
    for k in [
        "disks",
        "ssds",
        "dns",
        "efi",
        "fibre_channel_host",
        "ip_gw",
        "ip4_gw",
        "ip6_gw",
        "num_gpus",
        "zfs_support",
        "transactional",
        "ps",
    ] {
        if real.contains_key(k) {
            assert_eq!(real[k], ours[k], "grain {k}");
        }
    }
}

/// A masterless minion (`salt-call --local`): the pillar compiled from its own pillar_roots,
/// `salt://` served from its own file_roots, states applied from them. Brine's salt-call and
/// Salt 3007's, each on its own copy of the same trees, give the same returns.
#[test]
fn masterless_pillar_and_states_are_salts() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let tree = |root: &std::path::Path| {
        let w = |rel: &str, text: &str| write_file(root, rel, text);
        w(
            "etc/minion",
            &format!(
                "id: solo\nroot_dir: {0}\nfile_client: local\nfile_roots:\n  base: [{0}/srv/salt]\npillar_roots:\n  base: [{0}/srv/pillar]\n",
                root.display()
            ),
        );
        w("srv/pillar/top.sls", "base:\n  '*':\n    - app\n");
        w(
            "srv/pillar/app.sls",
            "app:\n  name: shop\n  port: 8080\n  users: [ann, bob]\n",
        );
        w("srv/salt/top.sls", "base:\n  'solo':\n    - app\n");
        w(
            "srv/salt/app/init.sls",
            "{% set app = pillar['app'] %}\napp_dir:\n  file.directory:\n    - name: {{ grains['root_dir'] }}/out/{{ app.name }}\n    - makedirs: True\napp_conf:\n  file.managed:\n    - name: {{ grains['root_dir'] }}/out/{{ app.name }}/app.conf\n    - source: salt://app/app.conf.j2\n    - template: jinja\n    - require:\n      - file: app_dir\nnot_there:\n  file.managed:\n    - name: {{ grains['root_dir'] }}/out/none\n    - source: salt://app/missing\n",
        );
        w(
            "srv/salt/app/app.conf.j2",
            "port = {{ pillar['app']['port'] }}\n{% for u in salt['pillar.get']('app:users') %}user = {{ u }}\n{% endfor %}",
        );
        // The states see the root as a grain.
        w("etc/grains", &format!("root_dir: {}\n", root.display()));
    };
    let (b, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    tree(b.path());
    tree(s.path());
    let run = |exe: &std::path::Path, root: &std::path::Path, args: &[&str]| {
        let o = std::process::Command::new(exe)
            .arg("-c")
            .arg(root.join("etc"))
            .args(["--local", "--out", "json"])
            .args(args)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}{}", stdout(&o), stderr(&o)));
        let root = root.display().to_string();
        (
            brine_e2e::normalize(&v, &[(root, "ROOT".into())]),
            o.status.code(),
        )
    };
    let salt_call_3007 = salt3007.join("bin/salt-call");
    for args in [
        &["pillar.items"][..],
        &["pillar.get", "app:users"],
        &["cp.list_master"],
        &["state.show_top"],
        &["state.apply", "test=True"],
        &["state.apply"],
        &["state.apply"],
        &[
            "state.sls",
            "app",
            "pillar={\"app\": {\"name\": \"shop\", \"port\": 9090, \"users\": []}}",
        ],
    ] {
        let got = run(&bin("salt-call"), b.path(), args);
        let want = run(&salt_call_3007, s.path(), args);
        assert_eq!(got, want, "salt-call --local {args:?}");
    }
    let conf = "out/shop/app.conf";
    assert_eq!(
        std::fs::read_to_string(b.path().join(conf)).unwrap(),
        std::fs::read_to_string(s.path().join(conf)).unwrap(),
    );
}

/// Two masterless minion roots (Brine's, Salt's) whose `minion` file holds `extra` after the
/// id, root and `file_client: local`.
fn two_roots(extra: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let (b, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for root in [b.path(), s.path()] {
        let text = format!(
            "id: solo\nroot_dir: {}\nfile_client: local\n{extra}",
            root.display()
        );
        std::fs::write(root.join("minion"), text).unwrap();
    }
    (b, s)
}

/// `text` written to `rel` under `root`, its directories made.
fn write_file(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The `minion` file of a masterless minion `m1` rooted at `root`, serving `root/srv`, with
/// `extra` options after.
fn m1_config(root: &std::path::Path, extra: &str) -> String {
    format!(
        "id: m1\nroot_dir: {0}\nfile_client: local\nfile_roots:\n  base: [{0}/srv]\n{extra}",
        root.display()
    )
}

/// `salt-call -c root --local args...`: exit code, stdout, and stderr without Python's own
/// warnings.
fn local_call(
    exe: &std::path::Path,
    root: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let o = std::process::Command::new(exe)
        .arg("-c")
        .arg(root)
        .arg("--local")
        .args(args)
        .output()
        .unwrap();
    let err: String = stderr(&o)
        .lines()
        .filter(|l| !l.contains("crypt"))
        .map(|l| format!("{l}\n"))
        .collect();
    (o.status.code(), stdout(&o), err)
}

/// Brine's answers are Salt's, call by call; an answer refusing the arguments prints the
/// function's documentation (Brine's own), so only its first line and exit code count.
fn same_answers(want: &[(String, Option<i32>, String)], got: &[(String, Option<i32>, String)]) {
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(got) {
        if w.2.contains("Passed invalid arguments") {
            assert_eq!((&g.1, g.2.lines().next()), (&w.1, w.2.lines().next()));
            continue;
        }
        assert_eq!(g, w);
    }
}

/// Whether the tests run as root (`/proc/self` is owned by the euid).
fn is_root() -> bool {
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0
}

/// A private root with a quiet masterless minion configuration in `etc/minion`.
fn quiet_masterless() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "etc/minion",
        &m1_config(dir.path(), "log_level: quiet\n"),
    );
    dir
}

/// Each call through `salt-call -c root --local --out json`: the call, its exit code and its
/// output.
fn json_calls(
    exe: &std::path::Path,
    root: &std::path::Path,
    calls: &[Vec<&str>],
) -> Vec<(String, Option<i32>, String)> {
    calls
        .iter()
        .map(|call| {
            let args = [&["--out", "json"][..], call].concat();
            let (rc, out, _) = local_call(exe, root, &args);
            (call.join(" "), rc, out)
        })
        .collect()
}

/// `--out` with each of Salt's general outputters (`pprint` with and without `--out-indent`,
/// `quiet`, `newline_values_only`, `table`) and with a name that is no outputter (Salt logs
/// an error and prints `nested`): Brine's salt-call prints what Salt 3007's prints, byte for
/// byte, with the same exit code. (The data comes from the minion's configuration: Salt's
/// own pillar and arguments are ordered dicts and tuples in a local call, which only
/// `--local` shows; through a master they are dicts and lists, as here.)
#[test]
fn outputters_print_what_salts_print() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let (b, s) = two_roots(
        "shop:\n  motd: \"Welcome to the shop server, which runs the storefront, the checkout and the warehouse jobs.\\nAsk the operations team before changing anything here.\\n\"\n  users: [ann, bob, carla, dmitri, eve, frank, gertrude, heinrich, ingrid, jules]\n  hosts:\n    - {name: web one, ip: 10.0.0.1, role: frontend}\n    - {name: db, ip: 10.0.0.2, role: database server of the shop}\n",
    );
    let salt_call_3007 = salt3007.join("bin/salt-call");
    for args in [
        &["--out", "pprint", "config.get", "shop"][..],
        &["--out", "pprint", "--out-indent", "4", "config.get", "shop"],
        &["config.get", "shop:hosts", "--out=pprint", "--out-indent=0"],
        &["--out", "quiet", "test.ping"],
        &["--out", "newline_values_only", "config.get", "shop:users"],
        &["--out", "newline_values_only", "test.ping"],
        &["--out", "table", "config.get", "shop"],
        &["--out", "nosuch", "config.get", "shop:users"],
    ] {
        let (got_rc, got, got_err) = local_call(&bin("salt-call"), b.path(), args);
        let (want_rc, want, _) = local_call(&salt_call_3007, s.path(), args);
        assert_eq!(
            (&got, got_rc),
            (&want, want_rc),
            "salt-call --local {args:?}"
        );
        if args.contains(&"nosuch") {
            assert!(
                got_err
                    .contains("[ERROR   ] Invalid outputter nosuch specified, fall back to nested"),
                "{got_err}"
            );
        }
    }
}

/// A function that does not return (wrong arguments, `SaltInvocationError`,
/// `CommandExecutionError`) is shown as Salt's salt-call shows it: its message on stderr, for
/// wrong arguments the function's documentation on stdout, no return, exit 1.
#[test]
fn failures_are_shown_as_salts_salt_call_shows_them() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let (b, s) = two_roots("");
    let salt_call_3007 = salt3007.join("bin/salt-call");
    for args in [
        &["test.echo", "a", "b"][..],
        &["user.info"],
        &["file.readdir", "/nonexistent"],
        &["file.get_mode", "/nonexistent/x"],
    ] {
        let args = [&["--out", "json"][..], args].concat();
        let (rc, out, err) = local_call(&bin("salt-call"), b.path(), &args);
        let (want_rc, want_out, want_err) = local_call(&salt_call_3007, s.path(), &args);
        assert_eq!(
            (rc, &err),
            (want_rc, &want_err),
            "salt-call --local {args:?}"
        );
        // The documentation is each implementation's own: both print it, or neither.
        assert_eq!(out.is_empty(), want_out.is_empty(), "{args:?}: {out}");
        assert!(!out.contains("\"local\""), "{args:?}: {out}");
    }
}

/// The `match` module: each function, with targets that match and that do not, another
/// `minion_id`, the minion's nodegroups, and wrong arguments, on a masterless minion with
/// static grains and a pillar. Brine's salt-call prints what Salt 3007's prints, with the
/// same exit code. A function that raises (`ifelse` with an even number of arguments, an
/// unknown `tgt_type`, ...) makes Salt's salt-call die with the traceback and no return:
/// Brine's returns the traceback's last line, with the same exit code.
#[test]
fn match_module_answers_as_salts() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let tree = |root: &std::path::Path| {
        let w = |rel: &str, text: &str| write_file(root, rel, text);
        w(
            "etc/minion",
            &format!(
                "id: web01\nroot_dir: {0}\nfile_client: local\npillar_roots:\n  base: [{0}/srv/pillar]\n\
                 nodegroups:\n  webs: 'web*'\n  listed: [web01, db01]\n  nested: 'N@webs and G@role:web'\n  broken: 'N@nope or db*'\n\
                 grains:\n  role: web\n  roles: [app, cache]\n  deep: {{a: {{b: c}}}}\n  ipv4: [10.1.2.3, 127.0.0.1]\n  ipv6: ['::1', 'fe80::1']\n",
                root.display()
            ),
        );
        w("srv/pillar/top.sls", "base:\n  '*':\n    - app\n");
        w(
            "srv/pillar/app.sls",
            "app:\n  name: shop\n  port: 8080\n  users: [ann, bob]\nenv: prod\n",
        );
    };
    let (b, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    tree(b.path());
    tree(s.path());
    let (b_etc, s_etc) = (b.path().join("etc"), s.path().join("etc"));
    let salt_call_3007 = salt3007.join("bin/salt-call");
    for args in [
        &["match.glob", "web*"][..],
        &["match.glob", "db*"],
        &["match.glob", "db*", "minion_id=db01"],
        &["match.pcre", "web\\d+"],
        &["match.pcre", "db.*"],
        &["match.pcre", "["],
        &["match.list", "db01,web01"],
        &["match.list", "db01,web02", "minion_id=web02"],
        &["match.list", "[db, x]"],
        &["match.grain", "role:web"],
        &["match.grain", "roles:cache"],
        &["match.grain", "role:db"],
        &["match.grain", "deep|a|b|c", "delimiter=|"],
        &["match.grain_pcre", "role:w.b"],
        &["match.grain_pcre", "role:["],
        &["match.pillar", "app:users:bob"],
        &["match.pillar", "env:dev"],
        &["match.pillar_pcre", "app:port:80[0-9]+"],
        &["match.data", "a:b"],
        &["match.ipcidr", "10.0.0.0/8"],
        &["match.ipcidr", "10.1.2.4"],
        &["match.ipcidr", "fe80::/10"],
        &["match.ipcidr", "bad"],
        &["match.compound", "web* and G@role:web and I@env:prod"],
        &["match.compound", "web* and not G@role:web"],
        &[
            "match.compound",
            "( G@role:db or S@10.0.0.0/8 ) and not L@x,y",
        ],
        &["match.compound", "db* or G@role:web", "minion_id=db01"],
        &["match.compound", "web*", "minion_id=db01"],
        &["match.compound", "S@bad and web01"],
        &["match.compound", "S@bad or web01"],
        &["match.compound", "E@[ or web01"],
        &["match.compound", "P@role:[ or web01"],
        &["match.compound", "(web01 or db)"],
        &["match.compound", "( )"],
        &["match.compound", "not not web01"],
        &["match.compound", "web01 or db ( x )"],
        &["match.compound", "N@listed and not db*"],
        &["match.compound", "N@nested"],
        &["match.compound", "N@nope or web*"],
        &["match.compound", "N@broken"],
        &["match.compound", "[web01, db]"],
        &["match.filter_by", "{web*: Web, db*: Db}"],
        &["match.filter_by", "{web*: Web, db*: Db}", "minion_id=db01"],
        &["match.filter_by", "{x*: X, default: Dflt}"],
        &["match.filter_by", "{x*: X, other: O}", "default=other"],
        &[
            "match.filter_by",
            "{role|web: 1}",
            "tgt_type=grain",
            "minion_id=|",
        ],
        &["match.filter_by", "{web01: 1}", "tgt_type=list_"],
        &[
            "match.filter_by",
            "{web*: {a: 1, l: [1]}}",
            "merge={b: 2, l: [2]}",
            "merge_lists=True",
        ],
        &["match.filter_by", "{web*: null}", "merge={b: 2}"],
        &["match.filter_by", "{web*: 1}", "merge={b: 2}"],
        &[
            "match.filter_by",
            "{web*: 1}",
            "tgt_type=ipcidr",
            "minion_id=x",
        ],
        &["match.filter_by", "web*"],
        &["match.search_by", "{a: [web*, w*], b: x*, c: [db*]}"],
        &[
            "match.search_by",
            "{web: [web01], db: [db01]}",
            "minion_id=db01",
        ],
        &["match.search_by", "{a: [db*]}"],
        &["match.ifelse", "web*", "A", "B"],
        &["match.ifelse", "web*", "A", "B", "minion_id=db01"],
        &["match.ifelse", "G@role:web", "A", "B", "tgt_type=glob"],
        &["match.ifelse", "False", "A", "True", "B", "C"],
        &["match.ifelse", "only"],
        &["match.ifelse", "G@role:web", "{a: 1}", "D", "merge={b: 2}"],
        &["match.compound"],
        &["match.glob", "a", "b", "c"],
    ] {
        let args = [&["--out", "json"][..], args].concat();
        let (rc, out, _) = local_call(&bin("salt-call"), &b_etc, &args);
        let (want_rc, want_out, _) = local_call(&salt_call_3007, &s_etc, &args);
        assert_eq!(
            (rc, &out),
            (want_rc, &want_out),
            "salt-call --local {args:?}"
        );
    }
    for args in [
        &["match.ifelse", "a", "b"][..],
        &["match.filter_by", "{web*: 1}", "merge=5"],
        &["match.filter_by", "{web*: 1}", "tgt_type=list"],
        &["match.filter_by", "xyz"],
        &["match.search_by", "[1]"],
    ] {
        let args = [&["--out", "json"][..], args].concat();
        let (rc, out, _) = local_call(&bin("salt-call"), &b_etc, &args);
        let (want_rc, want_out, want_err) = local_call(&salt_call_3007, &s_etc, &args);
        assert_eq!((rc, want_out.as_str()), (want_rc, ""), "{args:?}");
        let raised = want_err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap();
        assert!(out.contains(raised), "{args:?}: {out} / {raised}");
    }
}

/// The `slsutil` and `defaults` modules on a masterless minion with a small state tree:
/// merges, serializers, the state tree questions, a formula's defaults file and the banner
/// answer as Salt 3007's do (same stdout and exit code); failures show the same message on
/// stderr with the same exit code (the documentation printed with wrong arguments is each
/// implementation's own).
#[test]
fn slsutil_and_defaults_answer_as_salts() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let tree = |root: &std::path::Path| {
        let w = |rel: &str, text: &str| write_file(root, rel, text);
        w("etc/minion", &m1_config(root, ""));
        w("srv/top.sls", "base: {}\n");
        w(
            "srv/core/defaults.yaml",
            "users:\n  root:\n    uid: 0\nname: core\n",
        );
        w("srv/core/sub/init.sls", "{}\n");
        w("srv/fmt/defaults.json", "{\"x\": {\"y\": 1}}\n");
    };
    let (b, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    tree(b.path());
    tree(s.path());
    let (b_etc, s_etc) = (b.path().join("etc"), s.path().join("etc"));
    let salt_call_3007 = salt3007.join("bin/salt-call");
    for args in [
        &["slsutil.merge", "{a: 1, l: [1]}", "{b: 2, l: [2]}"][..],
        &[
            "slsutil.merge",
            "{a: 1, l: [1]}",
            "{b: 2, l: [2]}",
            "merge_lists=True",
        ],
        &[
            "slsutil.merge",
            "{a: {b: 1}}",
            "{a: {c: 1}}",
            "strategy=overwrite",
        ],
        &["slsutil.merge", "{a: 1}", "{a: 2}", "strategy=list"],
        &["slsutil.merge", "{a: 1}", "{b: 2}", "strategy=bogus"],
        &["slsutil.merge_all", "[{a: 1}, {a: {b: 2}}]"],
        &["slsutil.update", "{a: {b: 1}}", "{a: {c: 1}}"],
        &[
            "slsutil.update",
            "{a: {b: 1}}",
            "{a: {c: 1}}",
            "recursive_update=False",
        ],
        &["slsutil.boolstr", "1", "yes", "no"],
        &["slsutil.boolstr", "0"],
        &["slsutil.serialize", "json", "{b: 1, a: [1, é]}"],
        &[
            "slsutil.serialize",
            "json",
            "{b: 1, a: 2}",
            "indent=2",
            "sort_keys=True",
        ],
        &[
            "slsutil.serialize",
            "yaml",
            "{a: [1, 2], b: {c: [x]}, d: [{e: 1, f: [2]}], g: []}",
        ],
        &[
            "slsutil.serialize",
            "yaml",
            "[[1, [2]], {a: {b: {c: 1}}}, x]",
        ],
        &[
            "slsutil.serialize",
            "yaml",
            "{a: 1}",
            "default_flow_style=False",
        ],
        &["slsutil.file_exists", "top.sls"],
        &["slsutil.file_exists", "core"],
        &["slsutil.dir_exists", "core/sub"],
        &["slsutil.path_exists", "core"],
        &["slsutil.path_exists", "nope"],
        &["slsutil.findup", "core/sub", "defaults.yaml"],
        &["slsutil.findup", "core/../core/sub", "top.sls"],
        &["slsutil.findup", "core/sub", "[zz, top.sls]"],
        &["slsutil.banner"],
        &["slsutil.banner", "width=10"],
        &[
            "slsutil.banner",
            "commentchar= *",
            "borderchar=*",
            "blockstart=/**",
            "blockend= */",
            "newline=True",
        ],
        &["defaults.get", "core:users:root"],
        &["defaults.get", "core:users:nobody", "default=7"],
        &["defaults.get", "fmt"],
        &["defaults.get", "nope"],
        &["defaults.merge", "{a: [1]}", "{a: [2]}", "merge_lists=True"],
        &["defaults.merge", "{a: 1}", "null"],
        &["defaults.update", "{n1: {a: 1}, n2: null}", "{b: [1]}"],
        &["defaults.deepcopy", "{a: [1]}"],
    ] {
        let args = [&["--out", "json"][..], args].concat();
        let (rc, out, _) = local_call(&bin("salt-call"), &b_etc, &args);
        let (want_rc, want_out, _) = local_call(&salt_call_3007, &s_etc, &args);
        assert_eq!(
            (rc, &out),
            (want_rc, &want_out),
            "salt-call --local {args:?}"
        );
    }
    for args in [
        &["slsutil.merge", "{a: 1}", "[1]"][..],
        &["slsutil.update", "{a: 1}", "1"],
        &["slsutil.serialize", "toml", "{a: 1}"],
        &["slsutil.deserialize", "toml", "a"],
        &["slsutil.findup", "nope", "x"],
        &["slsutil.findup", "core", "zz"],
        &["slsutil.findup", "core", "1"],
        &["slsutil.banner", "width=3"],
        &["defaults.merge", "null", "{a: 1}"],
        &["defaults.update", "null", "{}"],
    ] {
        let args = [&["--out", "json"][..], args].concat();
        let (rc, out, err) = local_call(&bin("salt-call"), &b_etc, &args);
        let (want_rc, want_out, want_err) = local_call(&salt_call_3007, &s_etc, &args);
        assert_eq!(
            (rc, &err),
            (want_rc, &want_err),
            "salt-call --local {args:?}"
        );
        assert_eq!(out.is_empty(), want_out.is_empty(), "{args:?}: {out}");
    }
}

/// The `ssh` module's authorized keys functions, called one after another on a key file of
/// each root's own (with comments, options, a key listed twice, a line that is no key), give
/// Salt's answers and leave the same file.
#[test]
fn ssh_keys_answer_as_salts() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let tree = |root: &std::path::Path| {
        let w = |rel: &str, text: &str| write_file(root, rel, text);
        w("etc/minion", &m1_config(root, "log_level: quiet\n"));
        w(
            "ak",
            "# comment\n\nssh-rsa AAAAB3NzaC1yc2Ex old@host\nno-pty,from=\"x\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 ed key\nssh-rsa notbase64! bad\ngarbage line\n  \nssh-dss QUJD dup1\nssh-dss QUJD dup2",
        );
        w(
            "src.pub",
            "ssh-rsa QUJDREVG src1\necdsa-sha2-nistp256 QUJDREVGR0g= src2\n",
        );
        w("empty.pub", "# nothing\n");
        w(
            "enc",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n",
        );
    };
    let (b, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    tree(b.path());
    tree(s.path());
    let salt_call_3007 = salt3007.join("bin/salt-call");
    let calls: &[&[&str]] = &[
        &["ssh.auth_keys", "root", "config={root}/ak"],
        &[
            "ssh.auth_keys",
            "root",
            "config={root}/ak",
            "fingerprint_hash_type=md5",
        ],
        &[
            "ssh.auth_keys",
            "root",
            "config={root}/ak",
            "fingerprint_hash_type=blah",
        ],
        &["ssh.auth_keys", "brine-no-such-user", "config={root}/ak"],
        &[
            "ssh.check_key",
            "root",
            "AAAAB3NzaC1yc2Ex",
            "ssh-rsa",
            "old@host",
            "[]",
            "config={root}/ak",
        ],
        &[
            "ssh.check_key",
            "root",
            "AAAAB3NzaC1yc2Ex",
            "rsa",
            "other",
            "[]",
            "config={root}/ak",
        ],
        &[
            "ssh.check_key",
            "root",
            "QUJD",
            "xyz",
            "x",
            "[]",
            "config={root}/ak",
        ],
        &[
            "ssh.set_auth_key",
            "root",
            "AAAAB3NzaC1yc2Ex",
            "comment=changed",
            "options=[\"no-pty\"]",
            "config={root}/ak",
        ],
        &["ssh.set_auth_key", "root", "QUJD REVG", "config={root}/ak"],
        &["ssh.set_auth_key", "root", "QUJ", "config={root}/ak"],
        &[
            "ssh.set_auth_key",
            "root",
            "QUJDREVG",
            "enc=ed25519",
            "comment=new",
            "config={root}/ak",
        ],
        &[
            "ssh.set_auth_key",
            "brine-no-such-user",
            "QUJDREVG",
            "config={root}/ak",
        ],
        &[
            "ssh.set_auth_key",
            "root",
            "QUJDREVH",
            "comment=sub",
            "config={root}/sub/dir/ak",
        ],
        &[
            "ssh.rm_auth_key",
            "root",
            "AAAAC3NzaC1lZDI1NTE5",
            "config={root}/ak",
        ],
        &["ssh.rm_auth_key", "root", "nothere", "config={root}/ak"],
        &[
            "ssh.set_auth_key_from_file",
            "root",
            "{root}/src.pub",
            "config={root}/ak",
        ],
        &[
            "ssh.set_auth_key_from_file",
            "root",
            "{root}/src.pub",
            "config={root}/ak",
        ],
        &[
            "ssh.set_auth_key_from_file",
            "root",
            "{root}/empty.pub",
            "config={root}/ak",
        ],
        &[
            "ssh.set_auth_key_from_file",
            "root",
            "{root}/missing.pub",
            "config={root}/ak",
        ],
        &[
            "ssh.check_key_file",
            "root",
            "{root}/src.pub",
            "config={root}/ak",
        ],
        &[
            "ssh.rm_auth_key_from_file",
            "root",
            "{root}/src.pub",
            "config={root}/ak",
        ],
        &[
            "ssh.check_key_file",
            "root",
            "{root}/src.pub",
            "config={root}/ak",
        ],
        &["ssh.auth_keys", "root", "config=%h/x%"],
        &["ssh.auth_keys", "user=[root]", "config={root}/ak"],
        &["ssh.key_is_encrypted", "{root}/enc"],
        &["ssh.key_is_encrypted", "{root}/ak"],
        &[
            "ssh.user_keys",
            "user=root",
            "pubfile={root}/src.pub",
            "prvfile={root}/enc",
        ],
    ];
    for call in calls {
        let run = |salt_call: &std::path::Path, root: &std::path::Path| {
            let args: Vec<String> = ["--out", "json"]
                .iter()
                .chain(call.iter())
                .map(|a| a.replace("{root}", &root.display().to_string()))
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (rc, out, err) = local_call(salt_call, &root.join("etc"), &args);
            let root = root.display().to_string();
            (rc, out.replace(&root, "ROOT"), err.replace(&root, "ROOT"))
        };
        let (rc, out, err) = run(&bin("salt-call"), b.path());
        let (want_rc, want_out, want_err) = run(&salt_call_3007, s.path());
        assert_eq!(
            (rc, &out),
            (want_rc, &want_out),
            "salt-call --local {call:?}"
        );
        assert_eq!(err.is_empty(), want_err.is_empty(), "{call:?}: {err}");
    }
    for file in ["ak", "sub/dir/ak"] {
        let read = |root: &std::path::Path| std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(read(b.path()), read(s.path()), "{file}");
    }
    use std::os::unix::fs::PermissionsExt as _;
    for (path, mode) in [("sub/dir", 0o700), ("sub/dir/ak", 0o600)] {
        let mode_of = |root: &std::path::Path| {
            std::fs::metadata(root.join(path))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(
            (mode_of(b.path()), mode_of(s.path())),
            (mode, mode),
            "{path}"
        );
    }
}

/// The `alternatives` module, called one after another on a link group of the test's own
/// (made and removed with `update-alternatives`), gives Salt's answers and exit codes: first
/// the calls through Salt's salt-call, then, on the group made anew, through Brine's.
#[test]
fn alternatives_answer_as_salts() {
    let _system = brine_e2e::system_files_lock();
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    // Changing the system's alternatives needs root.
    let root = is_root();
    if !root || !std::path::Path::new("/etc/alternatives").is_dir() {
        return;
    }
    const GROUP: &str = "brine-e2e-alt";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    write_file(
        dir.path(),
        "etc/minion",
        &m1_config(dir.path(), "log_level: quiet\n"),
    );
    for alt in ["a", "b"] {
        std::fs::write(dir.path().join(alt), "#!/bin/sh\n").unwrap();
    }
    let remove_all = || {
        let _ = std::process::Command::new("update-alternatives")
            .args(["--remove-all", GROUP])
            .output();
    };
    let (link, a, b) = (
        format!("{d}/bin/{GROUP}"),
        format!("{d}/a"),
        format!("{d}/b"),
    );
    let (zzz, missing) = (format!("{d}/zzz"), format!("{d}/missing"));
    let calls: Vec<Vec<&str>> = vec![
        vec!["alternatives.display", GROUP],
        vec!["alternatives.show_link", GROUP],
        vec!["alternatives.show_current", GROUP],
        vec!["alternatives.check_exists", GROUP, &a],
        vec!["alternatives.install", GROUP, &link, &a, "10"],
        vec!["alternatives.install", GROUP, &link, &b, "20"],
        vec!["alternatives.display", GROUP],
        vec!["alternatives.show_link", GROUP],
        vec!["alternatives.check_exists", GROUP, &a],
        vec!["alternatives.check_installed", GROUP, &b],
        vec!["alternatives.set", GROUP, &a],
        vec!["alternatives.show_current", GROUP],
        vec!["alternatives.set", GROUP, &zzz],
        vec!["alternatives.auto", GROUP],
        vec!["alternatives.remove", GROUP, &b],
        vec!["alternatives.remove", GROUP, &zzz],
        vec!["alternatives.install", GROUP, &link, &missing, "5"],
        vec!["alternatives.remove", GROUP, &a],
    ];
    let run_all = |salt_call: &std::path::Path| {
        remove_all();
        let answers = json_calls(salt_call, &dir.path().join("etc"), &calls);
        remove_all();
        answers
    };
    let want = run_all(&salt3007.join("bin/salt-call"));
    let got = run_all(&bin("salt-call"));
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w);
    }
}

/// `git.config_unset` on a repository of each run's own (made the same way) gives Salt's
/// answers and exit codes and leaves the same configuration.
#[test]
fn git_config_unset_answers_as_salts() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    write_file(
        dir.path(),
        "etc/minion",
        &m1_config(dir.path(), "log_level: quiet\n"),
    );
    let repo = format!("{d}/repo");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let cwd = format!("cwd={repo}");
    let calls: Vec<Vec<&str>> = vec![
        vec!["git.config_unset", "a.one", &cwd],
        vec!["git.config_unset", "a.one", &cwd],
        vec!["git.config_unset", "a.many", &cwd],
        vec!["git.config_unset", "a.many", "x.*", &cwd],
        vec!["git.config_unset", "a.many", "x1", &cwd],
        vec!["git.config_unset", "a.many", "(", &cwd],
        vec!["git.config_unset", "bad", &cwd],
        vec!["git.config_unset", "a.many", &cwd, "all=True"],
    ];
    let run_all = |salt_call: &std::path::Path| {
        let _ = std::fs::remove_dir_all(&repo);
        std::process::Command::new("git")
            .args(["init", "-q", &repo])
            .status()
            .unwrap();
        git(&["config", "a.one", "1"]);
        for v in ["x1", "x2", "y1"] {
            git(&["config", "--add", "a.many", v]);
        }
        let answers: Vec<_> = calls
            .iter()
            .map(|call| {
                let args = [&["--out", "json"][..], call].concat();
                let (rc, out, err) = local_call(salt_call, &dir.path().join("etc"), &args);
                (call.join(" "), rc, out, err)
            })
            .collect();
        (answers, git(&["config", "--list", "--local"]))
    };
    let (want, want_config) = run_all(&salt3007.join("bin/salt-call"));
    let (got, got_config) = run_all(&bin("salt-call"));
    for (w, g) in want.iter().zip(&got) {
        assert_eq!((&g.0, g.1, &g.2), (&w.0, w.1, &w.2));
        assert_eq!(g.3.is_empty(), w.3.is_empty(), "{}: {}", g.0, g.3);
    }
    assert_eq!(got_config, want_config);
}

/// APT repositories: `pkg.list_repos/get_repo/mod_repo/del_repo` on source lists of the
/// test's own, and a key from the master dearmored into a `signed-by` keyring: answers, exit
/// codes, the lists and the keyring left compared with Salt's salt-call. (Refused definitions
/// print the function's documentation, Brine's own: `state/tests/run_cases/pkgrepo` compares
/// those refusals through the state.)
#[test]
fn apt_repos_answer_as_salts() {
    let _system = brine_e2e::system_files_lock();
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let root = is_root();
    let (lists, keyrings) = ("/etc/apt/sources.list.d", "/etc/apt/keyrings");
    let have_gpg = std::process::Command::new("gpg")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !root || !std::path::Path::new(lists).is_dir() || !have_gpg {
        return;
    }
    let dir = quiet_masterless();
    // An armored public key of the test's own (made in a private keyring).
    let home = dir.path().join("gnupg");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let gpg = |args: &[&str]| {
        let o = std::process::Command::new("gpg")
            .arg("--homedir")
            .arg(&home)
            .args(["--batch", "--quiet"])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        o.stdout
    };
    gpg(&[
        "--passphrase",
        "",
        "--quick-gen-key",
        "Brine Test <brine@example.invalid>",
        "ed25519",
        "sign",
        "never",
    ]);
    let key = gpg(&["--armor", "--export", "brine@example.invalid"]);
    let _ = std::process::Command::new("gpgconf")
        .arg("--homedir")
        .arg(&home)
        .args(["--kill", "all"])
        .output();
    write_file(dir.path(), "srv/repo.asc", &String::from_utf8(key).unwrap());
    let made_keyrings = !std::path::Path::new(keyrings).exists();
    std::fs::create_dir_all(keyrings).unwrap();
    let keyring = format!("{keyrings}/brine-e2e.gpg");
    let file = |n: &str| format!("file={lists}/brine-e2e-{n}.list");
    let (fa, fb) = (file("a"), file("b"));
    let signed = format!("deb [signed-by={keyring}] http://127.0.0.1:9/brine-e2e-k bookworm main");
    let calls: Vec<Vec<&str>> = vec![
        vec!["pkg.list_repos"],
        vec![
            "pkg.get_repo",
            "deb http://127.0.0.1:9/brine-e2e-a bookworm main",
        ],
        vec![
            "pkg.mod_repo",
            "deb http://127.0.0.1:9/brine-e2e-a bookworm main",
            &fa,
            "refresh=False",
            "comments=[one, two]",
        ],
        vec![
            "pkg.mod_repo",
            "deb [arch=amd64] http://127.0.0.1:9/brine-e2e-b/ stable main",
            &fb,
            "refresh=False",
        ],
        vec![
            "pkg.mod_repo",
            "deb http://127.0.0.1:9/brine-e2e-a bookworm main",
            "comps=main,contrib",
            "disabled=True",
            "refresh=False",
        ],
        vec![
            "pkg.get_repo",
            "deb http://127.0.0.1:9/brine-e2e-a bookworm contrib",
        ],
        vec!["pkg.get_repo", "deb http://127.0.0.1:9/brine-e2e-b stable"],
        vec!["pkg.list_repos"],
        vec![
            "pkg.mod_repo",
            "deb http://127.0.0.1:9/brine-e2e-c bookworm main",
            "keyid=0A1B2C3D",
            "refresh=False",
        ],
        vec![
            "pkg.mod_repo",
            &signed,
            "aptkey=False",
            "key_url=salt://repo.asc",
            "refresh=False",
            "file=/etc/apt/sources.list.d/brine-e2e-k.list",
        ],
        vec!["pkg.get_repo", &signed],
        vec![
            "pkg.del_repo",
            "deb http://127.0.0.1:9/brine-e2e-q bookworm main",
        ],
    ];
    let clean = || {
        for n in ["a", "b", "k"] {
            let _ = std::fs::remove_file(format!("{lists}/brine-e2e-{n}.list"));
        }
        let _ = std::fs::remove_file(&keyring);
        let _ = std::fs::remove_dir_all(dir.path().join("var"));
    };
    let left = || {
        let mut out = String::new();
        for n in ["a", "b", "k"] {
            let path = format!("{lists}/brine-e2e-{n}.list");
            out.push_str(&format!(
                "{path}: {:?}\n",
                std::fs::read_to_string(&path).ok()
            ));
        }
        out.push_str(&format!("keyring: {:?}\n", std::fs::read(&keyring).ok()));
        out
    };
    let run_all = |salt_call: &std::path::Path| {
        clean();
        let answers = json_calls(salt_call, &dir.path().join("etc"), &calls);
        let files = left();
        clean();
        (answers, files)
    };
    let want = run_all(&salt3007.join("bin/salt-call"));
    let got = run_all(&bin("salt-call"));
    if made_keyrings {
        let _ = std::fs::remove_dir(keyrings);
    }
    same_answers(&want.0, &got.0);
    assert!(want.1.contains("keyring: Some("), "{}", want.1);
    assert_eq!(got.1, want.1);
}

/// The `ssh` module's known_hosts functions on files of the test's own (no host is scanned):
/// answers, exit codes, the files left and their modes compared with Salt's salt-call
/// (hashed host names, salted at random, compared as `HASHED`).
#[test]
fn known_hosts_answer_as_salts() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let have_keygen = std::process::Command::new("ssh-keygen")
        .arg("-?")
        .output()
        .is_ok();
    if !have_keygen {
        return;
    }
    let dir = quiet_masterless();
    let d = dir.path().display().to_string();
    let (kh, sub) = (format!("{d}/kh"), format!("{d}/sshdir/kh"));
    let k1 = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
    let k2 = "AAAAC3NzaC1lZDI1NTE5AAAAIBv1VQHQ7k7nVjzQ0yM8gQZbbD7b2cLkG1s8W5b9RdZm";
    let (config, sub_config) = (format!("config={kh}"), format!("config={sub}"));
    let (key1, key2) = (format!("key={k1}"), format!("key={k2}"));
    let mut calls: Vec<Vec<&str>> = vec![
        vec![
            "ssh.get_known_host_entries",
            "root",
            "brine.example",
            &config,
        ],
        vec![
            "ssh.check_known_host",
            "hostname=brine.example",
            &key1,
            &config,
        ],
        vec![
            "ssh.check_known_host",
            "hostname=brine.example",
            &key2,
            &config,
        ],
        vec!["ssh.check_known_host", "hostname=none.example", &config],
    ];
    for host in [
        "hostname=brine.example",
        "hostname=brine.example",
        "hostname=n.example",
    ] {
        calls.push(vec![
            "ssh.set_known_host",
            host,
            &key1,
            "enc=ssh-ed25519",
            &config,
            "hash_known_hosts=False",
        ]);
    }
    calls.extend([
        vec![
            "ssh.set_known_host",
            "hostname=p.example",
            &key1,
            "enc=ssh-ed25519",
            "port=2222",
            &config,
            "hash_known_hosts=False",
        ],
        vec![
            "ssh.get_known_host_entries",
            "root",
            "p.example",
            &config,
            "port=2222",
        ],
        vec!["ssh.rm_known_host", "hostname=other.example", &config],
        vec!["ssh.rm_known_host", "hostname=other.example", &config],
        vec![
            "ssh.set_known_host",
            "hostname=h.example",
            &key1,
            "enc=ssh-ed25519",
            &config,
        ],
        vec!["ssh.check_known_host", "hostname=h.example", &config],
        vec![
            "ssh.set_known_host",
            "hostname=x.example",
            "port=2222",
            &config,
        ],
        vec![
            "ssh.set_known_host",
            "user=root",
            "hostname=u.example",
            &key1,
            &sub_config,
            "hash_known_hosts=False",
        ],
        vec!["ssh.hash_known_hosts", &config],
        vec![
            "ssh.rm_known_host",
            "hostname=x.example",
            "config=/nonexistent/kh",
        ],
        vec!["ssh.set_known_host"],
        vec![
            "ssh.get_known_host_entries",
            "",
            "brine.example",
            "config=relative/kh",
        ],
    ]);
    let hashed = regex::Regex::new(r"\|1\|[^ \x22]*").unwrap();
    let run_all = |salt_call: &std::path::Path| {
        let _ = std::fs::remove_dir_all(dir.path().join("sshdir"));
        let _ = std::fs::remove_file(format!("{kh}.old"));
        std::fs::write(
            &kh,
            format!("other.example ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7\nbrine.example ssh-ed25519 {k2}\n"),
        )
        .unwrap();
        let answers: Vec<_> = json_calls(salt_call, &dir.path().join("etc"), &calls)
            .into_iter()
            .map(|(call, rc, out)| (call, rc, hashed.replace_all(&out, "HASHED").into_owned()))
            .collect();
        let mut files = String::new();
        for path in [&kh, &format!("{kh}.old"), &sub] {
            let mode = std::fs::metadata(path)
                .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()));
            let text = std::fs::read_to_string(path).unwrap_or_default();
            files.push_str(&format!(
                "{path} {mode:?}\n{}",
                hashed.replace_all(&text, "HASHED")
            ));
        }
        (answers, files)
    };
    let want = run_all(&salt3007.join("bin/salt-call"));
    let got = run_all(&bin("salt-call"));
    same_answers(&want.0, &got.0);
    assert!(want.1.contains("u.example"), "{}", want.1);
    assert_eq!(got.1, want.1);
}

/// `timezone.*` and `file.sed` answers, exit codes and the files left compared with Salt's
/// salt-call (`set_zone` sets the zone the machine has, which is put back afterwards).
#[test]
fn timezone_and_sed_answer_as_salts() {
    let _system = brine_e2e::system_files_lock();
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let root = is_root();
    let link = std::fs::read_link("/etc/localtime").ok();
    let zone = link.as_ref().and_then(|l| {
        l.to_str()?
            .strip_prefix("/usr/share/zoneinfo/")
            .map(str::to_string)
    });
    let (true, Some(link), Some(zone)) = (root, link, zone) else {
        return;
    };
    let etc_timezone = std::fs::read("/etc/timezone").ok();
    let dir = quiet_masterless();
    let sedf = dir.path().join("sed.conf").display().to_string();
    let calls: Vec<Vec<&str>> = vec![
        vec!["timezone.get_zone"],
        vec!["timezone.get_zonecode"],
        vec!["timezone.get_offset"],
        vec!["timezone.zone_compare", &zone],
        vec!["timezone.zone_compare", "Europe/Berlin"],
        vec!["timezone.get_hwclock"],
        vec!["timezone.set_zone", "Nowhere/Zone"],
        vec!["timezone.set_zone", &zone],
        vec!["timezone.zone_compare", &zone],
        vec!["file.sed", &sedf, "LogLevel warn", "LogLevel info"],
        vec!["file.sed", &sedf, "x/y", "a'b", "limit=it"],
        vec![
            "file.sed",
            &sedf,
            "L.g",
            "Z",
            "escape_all=True",
            "backup=False",
        ],
        vec![
            "file.sed",
            &sedf,
            "(one|two)",
            "[\\1]",
            "negate_match=True",
            "limit=keep",
        ],
        vec!["file.sed", "/nonexistent/file", "a", "b"],
    ];
    let run_all = |salt_call: &std::path::Path| {
        std::fs::write(&sedf, "LogLevel warn\nx/y it's\nkeep one\ntwo\nL.g L.g\n").unwrap();
        let _ = std::fs::remove_file(format!("{sedf}.bak"));
        let pid = regex::Regex::new(r#""pid": \d+"#).unwrap();
        let answers: Vec<_> = json_calls(salt_call, &dir.path().join("etc"), &calls)
            .into_iter()
            .map(|(call, rc, out)| (call, rc, pid.replace_all(&out, "PID").into_owned()))
            .collect();
        let files = format!(
            "{:?} {:?} {:?} {:?}",
            std::fs::read_to_string(&sedf).ok(),
            std::fs::read_to_string(format!("{sedf}.bak")).ok(),
            std::fs::read_link("/etc/localtime").ok(),
            std::fs::read("/etc/timezone").ok(),
        );
        (answers, files)
    };
    let want = run_all(&salt3007.join("bin/salt-call"));
    let got = run_all(&bin("salt-call"));
    let _ = std::fs::remove_file("/etc/localtime");
    std::os::unix::fs::symlink(&link, "/etc/localtime").unwrap();
    match &etc_timezone {
        Some(text) => std::fs::write("/etc/timezone", text).unwrap(),
        None => {
            let _ = std::fs::remove_file("/etc/timezone");
        }
    }
    same_answers(&want.0, &got.0);
    assert_eq!(got.1, want.1);
}

/// `file.contains_glob` (line ends kept, files larger than Salt's read window),
/// `file.sed_contains` (limits, sed's errors), `file.grep` (globs, options one per argument,
/// grep's exit code as the job's, a path that is not there, options packed into one string
/// refused), `pkg.autoremove list_only`,
/// `pkg.info_installed` (every package, some, unknown ones, `failhard=False`) and `pkg.show`
/// (filters): answers and exit codes compared with Salt's salt-call.
#[test]
fn searches_autoremove_and_package_info_answer_as_salts() {
    let _system = brine_e2e::system_files_lock();
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let dir = quiet_masterless();
    let g = dir.path().join("g");
    write_file(&g, "a.txt", "alpha\nBeta\nbeta\n");
    write_file(&g, "b.txt", "gamma\nbeta\n");
    write_file(&g, ".hidden.txt", "beta\n");
    write_file(&g, "c.txt", "alpha\r\nbackup.sh runs\nkeep one\n");
    let big: String = (0..600_000u32)
        .map(|i| char::from(b"abcdef\n"[(i.wrapping_mul(2_654_435_761) >> 7) as usize % 7]))
        .collect();
    write_file(&g, "big.txt", &format!("{big}NEEDLE{}", "x".repeat(100)));
    let a = g.join("a.txt").display().to_string();
    let c = g.join("c.txt").display().to_string();
    let big = g.join("big.txt").display().to_string();
    let all = g.join("*.txt").display().to_string();
    let none = g.join("none.txt").display().to_string();
    let dir_path = g.display().to_string();
    let mut calls: Vec<Vec<&str>> = vec![
        vec!["file.contains_glob", &c, "*backup*"],
        vec!["file.contains_glob", &c, "alpha?backup*"],
        vec!["file.contains_glob", &c, "alpha??backup*"],
        vec!["file.contains_glob", &none, "*"],
        vec!["file.contains_glob", &dir_path, "*"],
        vec!["file.contains_glob", &big, "*NEEDLE*"],
        vec!["file.contains_glob", &big, "*NEEDLEx"],
        vec!["file.contains_glob", &big, "a*"],
        vec!["file.sed_contains", &c, "backup\\.sh"],
        vec!["file.sed_contains", &c, "nothere"],
        vec!["file.sed_contains", &c, "one", "limit=keep"],
        vec!["file.sed_contains", &c, "one", "limit=alpha"],
        vec!["file.sed_contains", &c, "("],
        vec!["file.sed_contains", &none, "x"],
        vec!["file.sed_contains", &c, "a/b"],
        vec!["file.grep", &a, "beta"],
        vec!["file.grep", &a, "beta", " -i"],
        vec!["file.grep", &all, "beta"],
        vec!["file.grep", &all, "beta", " -l", " -i"],
        vec!["file.grep", &none, "beta"],
        vec!["file.grep", &a, "nomatch"],
        vec!["file.grep", &a, "beta", "-i -n"],
        vec!["file.grep", &a, "["],
    ];
    if std::path::Path::new("/usr/bin/apt-get").exists() {
        calls.push(vec!["pkg.autoremove", "list_only=True"]);
        calls.push(vec!["pkg.autoremove", "list_only=True", "purge=True"]);
        calls.push(vec!["pkg.info_installed"]);
        calls.push(vec!["pkg.info_installed", "bash", "coreutils", "libc6"]);
        calls.push(vec!["pkg.info_installed", "nosuchpackage"]);
        calls.push(vec![
            "pkg.info_installed",
            "bash",
            "nosuchpackage",
            "failhard=False",
        ]);
        calls.push(vec!["pkg.show", "bash", "coreutils"]);
        calls.push(vec!["pkg.show", "nosuchpackage"]);
        calls.push(vec!["pkg.show"]);
        calls.push(vec!["pkg.show", "bash", "filter=Description,section"]);
        calls.push(vec!["pkg.show", "libc6", "filter=['Version','SHA256']"]);
    }
    let pid = regex::Regex::new(r#""pid": \d+"#).unwrap();
    let run_all = |salt_call: &std::path::Path| -> Vec<_> {
        json_calls(salt_call, &dir.path().join("etc"), &calls)
            .into_iter()
            .map(|(call, rc, out)| (call, rc, pid.replace_all(&out, "PID").into_owned()))
            .collect()
    };
    let want = run_all(&salt3007.join("bin/salt-call"));
    let got = run_all(&bin("salt-call"));
    same_answers(&want, &got);
}

/// `file.list_backups` (limits, names that are no backup or no date), `list_backups_dir`
/// (the backups of a directory by name, Salt's grouping), `delete_backup` and
/// `remove_backup` (ids that are not numbers or not there), `restore_backup`: answers, exit
/// codes, the file restored and the backups left, compared with Salt's salt-call, each kind
/// with the same backups in its own cache.
#[test]
fn backups_answer_as_salts() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("app.conf").display().to_string();
    let folder = format!("{}/", work.path().display());
    let names = [
        "app.conf_Sun_Nov_29_16:44:13_012345_2026",
        "app.conf_Mon_Nov_30_09:00:01_5_2026",
        "APP.conf_Sat_Nov_28_1:2:3_000001_2026",
        "app.conf_Sun_Feb_30_16:44:13_012345_2026",
        "app.conf_junk",
        "other_Sun_Nov_29_16:44:13_012345_2026",
    ];
    let calls: Vec<Vec<&str>> = vec![
        vec!["file.list_backups", &target],
        vec!["file.list_backup", &target, "limit=2"],
        vec!["file.list_backups", &target, "limit=-1"],
        vec!["file.list_backups", "/nonexistent/app.conf"],
        vec!["file.list_backups_dir", &folder],
        vec!["file.list_backups_dir", &target, "limit=1"],
        vec!["file.list_backups_dir", "/nonexistent/"],
        vec!["file.delete_backup", &target, "01"],
        vec!["file.delete_backup", &target, "7"],
        vec!["file.delete_backup", &target, "x"],
        vec!["file.remove_backup", &target, "2"],
        vec!["file.restore_backup", &target, "0"],
    ];
    let run_all = |salt_call: &std::path::Path| {
        let dir = quiet_masterless();
        let cache = dir.path().join("var/cache/salt/minion");
        let bkdir = cache
            .join("file_backup")
            .join(work.path().strip_prefix("/").unwrap());
        for name in names {
            write_file(&bkdir, name, &format!("{name}\n"));
        }
        std::fs::write(&target, "current\n").unwrap();
        let root = format!("{}/", dir.path().display());
        let answers: Vec<_> = json_calls(salt_call, &dir.path().join("etc"), &calls)
            .into_iter()
            .map(|(call, rc, out)| (call, rc, out.replace(&root, "ROOT/")))
            .collect();
        let mut left: Vec<(String, String)> = std::fs::read_dir(&bkdir)
            .unwrap()
            .flatten()
            .map(|e| {
                let text = std::fs::read_to_string(e.path()).unwrap();
                // The backup taken before the restore is named with the time it was taken.
                let name = e.file_name().to_string_lossy().into_owned();
                let name = if text == "current\n" {
                    "NOW".into()
                } else {
                    name
                };
                (name, text)
            })
            .collect();
        left.sort();
        (answers, left, std::fs::read_to_string(&target).unwrap())
    };
    let want = run_all(&salt3007.join("bin/salt-call"));
    let got = run_all(&bin("salt-call"));
    same_answers(&want.0, &got.0);
    assert_eq!((got.1, got.2), (want.1, want.2));
}

/// `mount.fstab`, `set_fstab`, `rm_fstab` and `mount.mount` on an fstab of the test's own:
/// answers, exit codes and the file left compared with Salt's salt-call (the one mount asked
/// for is of a mount point no fstab has, which mount refuses).
#[test]
fn fstab_answers_as_salts() {
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let dir = quiet_masterless();
    let f = dir.path().join("fstab").display().to_string();
    let config = format!("config={f}");
    let calls: Vec<Vec<&str>> = vec![
        vec!["mount.fstab", &config],
        vec!["mount.fstab", "config=/nonexistent/fstab"],
        vec![
            "mount.set_fstab",
            "/data",
            "/dev/sdb1",
            "ext4",
            "opts=noatime,defaults",
            "pass_num=2",
            &config,
        ],
        vec![
            "mount.set_fstab",
            "/data",
            "/dev/sdb1",
            "ext4",
            &config,
            "test=True",
        ],
        vec!["mount.set_fstab", "/data", "/dev/sdb1", "ext4", &config],
        vec![
            "mount.set_fstab",
            "/srv/my data",
            "/dev/sdq1",
            "ext4",
            &config,
        ],
        vec![
            "mount.set_fstab",
            "/x",
            "/dev/sdx1",
            "xfs",
            &config,
            "match_on=[name, fstype]",
        ],
        vec![
            "mount.set_fstab",
            "/x",
            "/dev/sdx1",
            "xfs",
            &config,
            "match_on=5",
        ],
        vec![
            "mount.set_fstab",
            "/x",
            "/dev/sdx1",
            "xfs",
            "config=/nonexistent/fstab",
        ],
        vec!["mount.rm_fstab", "/old", "/dev/sdc1", &config],
        vec!["mount.rm_fstab", "/nothing", "/dev/sdz9", &config],
        vec![
            "mount.rm_fstab",
            "/x",
            "/dev/x",
            "config=/nonexistent/fstab",
        ],
        vec!["mount.fstab", &config],
        vec!["mount.mount", "/brine/test/nowhere"],
    ];
    let run_all = |salt_call: &std::path::Path| {
        std::fs::write(
            &f,
            "# static\nUUID=1111\t/\text4\terrors=remount-ro\t0 1\n/dev/sdb1 /data ext4 defaults,noatime 0 2\n/dev/sdc1 /old xfs defaults\n/dev/sdc1 /old xfs defaults\nbroken line\n",
        )
        .unwrap();
        let answers = json_calls(salt_call, &dir.path().join("etc"), &calls);
        (answers, std::fs::read_to_string(&f).unwrap())
    };
    let want = run_all(&salt3007.join("bin/salt-call"));
    let got = run_all(&bin("salt-call"));
    same_answers(&want.0, &got.0);
    assert_eq!(got.1, want.1);
}

/// `locale.*` answers that change nothing compared with Salt's salt-call (generating and
/// setting locales is compared through the states in `state/tests/run_cases/locales`).
#[test]
fn locale_answers_as_salts() {
    let _system = brine_e2e::system_files_lock();
    let Some((salt3007, _)) = brine_e2e::real::venvs() else {
        return;
    };
    let dir = quiet_masterless();
    let calls: Vec<Vec<&str>> = vec![
        vec!["locale.list_avail"],
        vec!["locale.avail", "C.UTF-8"],
        vec!["locale.avail", "c.utf8"],
        vec!["locale.avail", "xx_YY.UTF-8"],
        vec!["locale.get_locale"],
        vec!["locale.gen_locale", "xx_YY.UTF-8"],
    ];
    let want = json_calls(
        &salt3007.join("bin/salt-call"),
        &dir.path().join("etc"),
        &calls,
    );
    let got = json_calls(&bin("salt-call"), &dir.path().join("etc"), &calls);
    same_answers(&want, &got);
}
