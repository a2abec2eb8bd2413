//! The reactor's pieces (the map, the files, the order, the arguments) and one master reacting
//! in process, with the cases of Salt 3007's captures (`orchestration-spec.md` §9).

use super::*;
use brine_protocol::config::MasterConfig;

use std::sync::Mutex;
use std::time::Duration;

use brine_protocol::loads::{Fun, Tgt};
use brine_transport::eventbus::EventBus;

use crate::keys::KeyState;
use crate::master::PublishSink;

fn yaml(text: &str) -> Json {
    brine_protocol::yaml::load::load(text).expect("test YAML")
}

// ---- the map

#[test]
fn the_map_keeps_one_key_entries_in_order() {
    let v = yaml(
        "- 'brine/test/*': [/a.sls, /b.sls]\n\
         - 'brine/other': salt://reactor/other.sls\n\
         - not a map\n\
         - {two: /x.sls, keys: /y.sls}\n\
         - 'brine/none': 5\n\
         - 'brine/*': [/c.sls, 7]\n",
    );
    assert_eq!(
        entries(&v),
        vec![
            Entry {
                glob: "brine/test/*".into(),
                paths: vec!["/a.sls".into(), "/b.sls".into()]
            },
            Entry {
                glob: "brine/other".into(),
                paths: vec!["salt://reactor/other.sls".into()]
            },
            Entry {
                glob: "brine/none".into(),
                paths: vec![]
            },
            Entry {
                glob: "brine/*".into(),
                paths: vec!["/c.sls".into()]
            },
        ]
    );
    let map = ReactorMap::Inline(entries(&v));
    // Every matching entry, in the map's order; fnmatch's `*` crosses slashes.
    assert_eq!(
        map.paths_for("brine/test/one"),
        ["/a.sls", "/b.sls", "/c.sls"]
    );
    assert_eq!(
        map.paths_for("brine/other"),
        ["salt://reactor/other.sls", "/c.sls"]
    );
    assert_eq!(map.paths_for("brine/a/b/c"), ["/c.sls"]);
    assert!(map.paths_for("salt/job/1/new").is_empty());
}

#[test]
fn the_reactor_runs_only_for_a_list_or_a_path() {
    assert_eq!(ReactorMap::from_config(&Json::Null), None);
    assert_eq!(ReactorMap::from_config(&json!([])), None);
    assert_eq!(ReactorMap::from_config(&json!("")), None);
    assert_eq!(ReactorMap::from_config(&json!({"a": "b"})), None);
    assert_eq!(
        ReactorMap::from_config(&json!("/etc/salt/reactors.yaml")),
        Some(ReactorMap::File("/etc/salt/reactors.yaml".into()))
    );
    assert_eq!(
        ReactorMap::from_config(&json!([{"a/*": "/r.sls"}])),
        Some(ReactorMap::Inline(vec![Entry {
            glob: "a/*".into(),
            paths: vec!["/r.sls".into()]
        }]))
    );
}

#[test]
fn a_map_file_is_read_for_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("reactors.yaml");
    let map = ReactorMap::File(file.clone());
    // Missing, then unparsable: no reactions (logged).
    assert!(map.paths_for("a/b").is_empty());
    std::fs::write(&file, "- [unclosed\n").unwrap();
    assert!(map.paths_for("a/b").is_empty());
    std::fs::write(&file, "- 'a/*': /one.sls\n").unwrap();
    assert_eq!(map.paths_for("a/b"), ["/one.sls"]);
    std::fs::write(&file, "- 'a/*': [/two.sls, /three.sls]\n").unwrap();
    assert_eq!(map.paths_for("a/b"), ["/two.sls", "/three.sls"]);
}

#[test]
fn the_master_config_reads_the_reactor_keys() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("master"),
        "reactor:\n  - 'salt/minion/*/start':\n    - /srv/reactor/start.sls\n\
         reactor_worker_threads: 3\n",
    )
    .unwrap();
    let cfg = MasterConfig::load(dir.path()).unwrap();
    assert_eq!(
        cfg.reactor,
        json!([{"salt/minion/*/start": ["/srv/reactor/start.sls"]}])
    );
    assert_eq!(
        (cfg.reactor_worker_threads, cfg.reactor_worker_hwm),
        (3, 10000)
    );
    let default = MasterConfig::default();
    assert_eq!(default.reactor, Json::Null);
    assert_eq!(default.reactor_worker_threads, 10);
}

// ---- files to chunks

#[test]
fn reaction_files_are_padded_as_salts_compiler_pads_them() {
    let high = reaction_high(
        yaml(
            "react_ping:\n  local.test.ping:\n    - tgt: m1\n\
             short: runner.jobs.list_jobs\n\
             two:\n  wheel.key.list_all: []\n  __private: [x]\n",
        ),
        "/r/react.sls",
    )
    .unwrap();
    assert_eq!(
        Json::Object(high),
        json!({
            "react_ping": {"local": [{"tgt": "m1"}, "test.ping"], "__sls__": "/r/react.sls"},
            "short": {"runner": ["jobs.list_jobs"], "__sls__": "/r/react.sls"},
            "two": {"__private": ["x"], "wheel": ["key.list_all"], "__sls__": "/r/react.sls"},
        })
    );
    // An empty file declares nothing; other shapes fail the whole file.
    assert!(reaction_high(Json::Null, "/r/e.sls").unwrap().is_empty());
    assert!(reaction_high(json!(["a"]), "/r/l.sls").is_err());
    assert!(reaction_high(
        json!({"a": {"local.test.ping": []}, "b": "nodot"}),
        "/r/s.sls"
    )
    .is_err());
    assert!(reaction_high(json!({"a": 5}), "/r/i.sls").is_err());
}

fn high_of(files: &[(&str, &str)]) -> High {
    let mut high = High::new();
    for (path, text) in files {
        high.extend(reaction_high(yaml(text), path).unwrap());
    }
    high
}

const REACT: &str = "react_ping:\n  local.test.ping:\n    - tgt: m2\n\
                     react_runner:\n  runner.test.arg:\n    - args:\n      - tag: brine/test/one\n      - payload: p1\n\
                     react_wheel:\n  wheel.key.list_all: []\n\
                     react_legacy_local:\n  cmd.test.echo:\n    - tgt: m2\n    - arg:\n      - legacy brine/test/one\n";

fn order(chunks: &[Low]) -> Vec<(String, String, String)> {
    chunks
        .iter()
        .map(|c| (text(c, "state"), text(c, "__id__"), text(c, "fun")))
        .collect()
}

#[test]
fn chunks_run_in_state_name_function_order_not_file_order() {
    let paths = ["/r/react.sls".to_string()];
    let got = chunks(
        high_of(&[("/r/react.sls", REACT)]),
        "brine/test/one",
        &paths,
    );
    // Sorted as `cmd…`, `local…`, `runner…`, `wheel…`; `cmd` then becomes `local`.
    assert_eq!(
        order(&got),
        [
            (
                "local".into(),
                "react_legacy_local".into(),
                "test.echo".into()
            ),
            ("local".into(), "react_ping".into(), "test.ping".into()),
            ("runner".into(), "react_runner".into(), "test.arg".into()),
            ("wheel".into(), "react_wheel".into(), "key.list_all".into()),
        ]
    );
    // Two files: the second's ID sorts first; a later file wins on the same ID.
    let a = "zz_from_a:\n  local.test.echo:\n    - tgt: m1\n    - args:\n      - text: from_a\n\
             same:\n  local.test.echo:\n    - tgt: m1\n    - arg: [a]\n";
    let b = "aa_from_b:\n  local.test.echo:\n    - tgt: m1\n    - arg:\n      - from_b\n\
             same:\n  local.test.echo:\n    - tgt: m1\n    - arg: [b]\n";
    let paths = ["/r/a.sls".to_string(), "/r/b.sls".to_string()];
    let got = chunks(
        high_of(&[("/r/a.sls", a), ("/r/b.sls", b)]),
        "brine/multi",
        &paths,
    );
    let ids: Vec<String> = got.iter().map(|c| text(c, "__id__")).collect();
    assert_eq!(ids, ["aa_from_b", "same", "zz_from_a"]);
    assert_eq!(got[1]["arg"], json!(["b"]));
    assert_eq!(got[1]["__sls__"], json!("/r/b.sls"));
    // An explicit order comes before the shared cap of the others; `last` after them.
    let ordered = "z_first:\n  local.test.ping:\n    - tgt: m1\n    - order: 1\n\
                   a_last:\n  local.test.ping:\n    - tgt: m1\n    - order: last\n\
                   m_middle:\n  local.test.ping:\n    - tgt: m1\n";
    let got = chunks(high_of(&[("/r/o.sls", ordered)]), "t", &["/r/o.sls".into()]);
    let ids: Vec<String> = got.iter().map(|c| text(c, "__id__")).collect();
    assert_eq!(ids, ["z_first", "m_middle", "a_last"]);
}

#[test]
fn high_data_that_does_not_verify_runs_nothing() {
    let high = high_of(&[("/r/invalid.sls", "nofun:\n  local:\n    - tgt: m1\n")]);
    assert!(chunks(high, "brine/invalid", &["/r/invalid.sls".into()]).is_empty());
    assert!(brine_state::verify_high(&high_of(&[(
        "/r/invalid.sls",
        "nofun:\n  local:\n    - tgt: m1\n"
    )]))
    .contains(&"No function declared in state 'nofun' in SLS '/r/invalid.sls'".to_string()));
    assert_eq!(
        py_list(&["No function declared in state 'nofun'".into(), "b".into()]),
        "[\"No function declared in state 'nofun'\", 'b']"
    );
}

// ---- chunks to calls

fn prepared(sls: &str) -> Vec<Result<Call, String>> {
    let high = high_of(&[("/r/t.sls", sls)]);
    chunks(high, "t", &["/r/t.sls".into()])
        .iter()
        .map(prepare)
        .collect()
}

fn local(tgt: Tgt, fun: &str, arg: Vec<Value>, tgt_type: &str) -> PublishRequest {
    PublishRequest::new(tgt, Fun::One(fun.into()), arg, tgt_type)
}

fn kwargs_of(call: &Call) -> Vec<String> {
    match call {
        Call::Local(req) => req.kwargs.0.iter().map(|(k, _)| k.clone()).collect(),
        _ => vec![],
    }
}

fn args(args: Vec<Value>, kwargs: Vec<(&str, Value)>) -> Args {
    Args {
        args,
        kwargs: kwargs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

#[test]
fn new_style_args_become_keyword_arguments() {
    let got = prepared(REACT);
    let Ok(Call::Local(echo)) = &got[0] else {
        panic!("{:?}", got[0]);
    };
    assert_eq!(echo.tgt, Tgt::Expr("m2".into()));
    assert_eq!(echo.arg, [Value::from("legacy brine/test/one")]);
    assert_eq!((echo.tgt_type.as_str(), echo.ret.as_str()), ("glob", ""));
    // The chunk's other keys travel as the publish's kwargs, as with Salt's cmd_async.
    assert_eq!(
        kwargs_of(got[0].as_ref().unwrap()),
        ["state", "name", "__sls__", "__id__", "order"]
    );
    let Ok(Call::Local(ping)) = &got[1] else {
        panic!("{:?}", got[1]);
    };
    assert_eq!(
        (ping.fun.name(), ping.arg.len()),
        ("test.ping".to_string(), 0)
    );
    assert_eq!(
        got[2],
        Ok(Call::Runner {
            fun: "test.arg".into(),
            args: args(
                vec![],
                vec![
                    ("tag", Value::from("brine/test/one")),
                    ("payload", Value::from("p1"))
                ]
            )
        })
    );
    assert_eq!(
        got[3],
        Ok(Call::Wheel {
            fun: "key.list_all".into(),
            args: Args::default()
        })
    );
    // Local with args: packed at the end of arg, as Salt publishes it.
    let got = prepared("e:\n  local.test.echo:\n    - tgt: m1\n    - arg: [ignored]\n    - args:\n      - text: from_a\n");
    let Ok(Call::Local(req)) = &got[0] else {
        panic!("{:?}", got[0]);
    };
    assert_eq!(
        req.arg,
        [map(vec![
            ("__kwarg__", Value::from(true)),
            ("text", Value::from("from_a"))
        ])]
    );
}

#[test]
fn legacy_arguments_are_mapped_onto_the_function() {
    let legacy = "legacy_runner:\n  runner.test.arg:\n    - foo: bar\n    - tgt: ignored\n\
                  legacy_runner_lookup:\n  runner.jobs.list_jobs:\n    - search_function: test.nothing\n\
                  legacy_wheel:\n  wheel.key.finger:\n    - match: m2\n\
                  local_kwarg:\n  local.test.arg:\n    - tgt: m1\n    - arg: [a, b]\n    - kwarg:\n        k: v\n    - tgt_type: glob\n    - ret: ''\n\
                  local_list_tgt:\n  local.test.ping:\n    - tgt: [m1, m2]\n    - tgt_type: list\n";
    let got = prepared(legacy);
    // Order: local_kwarg, local_list_tgt, legacy_runner_lookup (`_` sorts before `t`),
    // legacy_runner, legacy_wheel.
    let mut want = local(
        Tgt::Expr("m1".into()),
        "test.arg",
        vec![
            Value::from("a"),
            Value::from("b"),
            map(vec![
                ("__kwarg__", Value::from(true)),
                ("k", Value::from("v")),
            ]),
        ],
        "glob",
    );
    let Ok(Call::Local(req)) = &got[0] else {
        panic!("{:?}", got[0]);
    };
    want.kwargs = req.kwargs.clone();
    assert_eq!(req, &want);
    let Ok(Call::Local(req)) = &got[1] else {
        panic!("{:?}", got[1]);
    };
    assert_eq!(req.tgt, Tgt::List(vec!["m1".into(), "m2".into()]));
    assert_eq!(req.tgt_type, "list");
    assert_eq!(
        got[3],
        Ok(Call::Runner {
            fun: "test.arg".into(),
            args: args(
                vec![],
                vec![("foo", Value::from("bar")), ("tgt", Value::from("ignored"))]
            )
        })
    );
    // Every parameter with its default, last parameter first, as Salt's arg_lookup has them.
    let Ok(Call::Runner { args: lookup, .. }) = &got[2] else {
        panic!("{:?}", got[2]);
    };
    let names: Vec<&str> = lookup.kwargs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "display_progress",
            "end_time",
            "start_time",
            "search_target",
            "search_function",
            "search_metadata",
            "outputter",
            "ext_source"
        ]
    );
    assert_eq!(lookup.kwargs[0].1, Value::from(false));
    assert_eq!(lookup.kwargs[4].1, Value::from("test.nothing"));
    assert_eq!(lookup.kwargs[7].1, Value::Nil);
    assert_eq!(
        got[4],
        Ok(Call::Wheel {
            fun: "key.finger".into(),
            args: args(vec![Value::from("m2")], vec![("hash_type", Value::Nil)])
        })
    );
}

#[test]
fn bad_chunks_are_refused_with_salts_reasons() {
    let got = prepared(
        "a_no_tgt:\n  local.test.ping: []\n\
         b_bad_args:\n  runner.test.arg:\n    - args: []\n\
         c_unknown:\n  runner.nosuch.fun:\n    - x: 1\n\
         d_extra:\n  wheel.key.list_all:\n    - bogus: 1\n\
         e_missing:\n  wheel.key.finger: []\n\
         f_caller:\n  caller.test.ping: []\n\
         g_args_map:\n  runner.test.arg:\n    - args: {k: v}\n\
         h_args_text:\n  runner.test.arg:\n    - args: '[x, {y: 1}]'\n\
         i_bad_list:\n  runner.test.arg:\n    - args: [{a: 1, b: 2}]\n",
    );
    // Order by state: caller, local, runner…, wheel….
    assert_eq!(got[0], Ok(Call::Caller));
    assert_eq!(
        got[1],
        Err("local takes at least 2 arguments (1 given)".into())
    );
    assert_eq!(got[2], Err(INCORRECT_FORMAT.into()));
    assert_eq!(got[3], Err("function not available".into()));
    assert_eq!(
        got[4],
        Ok(Call::Runner {
            fun: "test.arg".into(),
            args: args(vec![], vec![("k", Value::from("v"))])
        })
    );
    assert_eq!(
        got[5],
        Ok(Call::Runner {
            fun: "test.arg".into(),
            args: args(vec![], vec![("x", Value::Nil), ("y", Value::from(1))])
        })
    );
    assert_eq!(got[6], Err(INCORRECT_FORMAT.into()));
    assert_eq!(
        got[7],
        Err(
            "'bogus' is an invalid keyword argument for 'salt.loaded.int.wheel.key.list_all'"
                .into()
        )
    );
    assert_eq!(
        got[8],
        Err("finger takes at least 1 argument (0 given)".into())
    );
}

#[test]
fn publish_arguments_are_conditioned_as_salts_are() {
    assert_eq!(
        condition_input(&json!(["a", 12345678901234567890u64, 7]), &json!({})).unwrap(),
        [
            Value::from("a"),
            Value::from("12345678901234567890"),
            Value::from(7)
        ]
    );
    // Python iterates a string's characters.
    assert_eq!(
        condition_input(&json!("ab"), &json!({"k": 1})).unwrap(),
        [
            Value::from("a"),
            Value::from("b"),
            map(vec![
                ("__kwarg__", Value::from(true)),
                ("k", Value::from(1))
            ])
        ]
    );
    // A kwarg that is not a map is dropped; an arg that is not iterable fails.
    assert_eq!(
        condition_input(&json!([]), &json!(["x"])).unwrap(),
        Vec::<Value>::new()
    );
    assert!(condition_input(&Json::Null, &json!({})).is_err());
}

#[test]
fn signatures_are_read_from_the_registries() {
    let sig = Signature::of("wheel", "key.finger").unwrap();
    assert_eq!(sig.required, ["match"]);
    assert_eq!(sig.defaults, [("hash_type".to_string(), Json::Null)]);
    assert!(!sig.keywords);
    let sig = Signature::of("runner", "test.arg").unwrap();
    assert!(sig.keywords && sig.required.is_empty() && sig.defaults.is_empty());
    assert!(Signature::of("runner", "no.such").is_none());
    assert!(Signature::of("local", "test.ping").is_none());
    for (text, want) in [
        ("None", Json::Null),
        ("False", json!(false)),
        ("10", json!(10)),
        ("'base'", json!("base")),
        ("us", json!("us")),
        ("'*'", json!("*")),
    ] {
        assert_eq!(py_literal(text), want, "{text}");
    }
}

// ---- one master reacting, in process

/// A publisher that drops what it is given.
struct Nowhere;

impl PublishSink for Nowhere {
    fn send(&self, _frames: Vec<Vec<u8>>) {}
}

/// Events seen on `rx` until `quiet` passes without one (or 30 s pass), as (tag, data).
async fn events_until_quiet(
    rx: &mut tokio::sync::broadcast::Receiver<Arc<brine_transport::eventbus::Event>>,
    quiet: Duration,
) -> Vec<(String, Json)> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(quiet, rx.recv()).await {
            Ok(Ok(ev)) => out.push((ev.tag.clone(), to_json(&ev.data))),
            _ => break,
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_reacts_to_events_with_jobs() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let srv = r.join("srv");
    std::fs::create_dir_all(srv.join("salt/reactor")).unwrap();
    std::fs::create_dir_all(srv.join("reactor")).unwrap();
    let write = |p: &str, t: &str| std::fs::write(srv.join(p), t).unwrap();
    write(
        "reactor/react.sls",
        "react_ping:\n  local.test.ping:\n    - tgt: {{ data.get('target', 'm1') }}\n\
         react_runner:\n  runner.test.arg:\n    - args:\n      - tag: {{ tag }}\n      - payload: {{ data.get('payload', 'none') }}\n      - grain: {{ grains.id }}\n\
         react_wheel:\n  wheel.key.list_all: []\n",
    );
    write(
        "salt/reactor/other.sls",
        "other:\n  local.test.echo:\n    - tgt: m1\n    - arg: [from salt url]\n",
    );
    write(
        "reactor/broken.sls",
        "x:\n  local.test.ping:\n    - tgt: {{ data['nope']['deeper'] }}\n",
    );
    let conf = r.join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("master"),
        format!(
            "root_dir: {r}\nuser: root\nid: brinetest_master\nkeysize: 2048\n\
             file_roots:\n  base: [{s}/salt]\n\
             reactor:\n  - 'brine/test/*': {s}/reactor/react.sls\n\
             \x20 - 'brine/other': [salt://reactor/other.sls]\n\
             \x20 - 'brine/broken': [{s}/reactor/broken.sls, {s}/reactor/missing.sls]\n",
            r = r.display(),
            s = srv.display()
        ),
    )
    .unwrap();
    let cfg = MasterConfig::load(&conf).unwrap();
    let master = Master::new(cfg, Box::new(Nowhere), EventBus::local()).unwrap();
    for id in ["m1", "m2"] {
        master.keys.write(KeyState::Accepted, id, "key").unwrap();
    }
    let mut rx = master.bus.subscribe();
    let task = spawn(&master).expect("the reactor starts");

    master.bus.fire(
        "brine/test/one",
        map(vec![
            ("target", Value::from("m2")),
            ("payload", Value::from("p1")),
        ]),
    );
    let seen = events_until_quiet(&mut rx, Duration::from_secs(3)).await;
    let tags: Vec<&str> = seen.iter().map(|(t, _)| t.as_str()).collect();
    let find = |suffix: &str| {
        seen.iter()
            .find(|(t, _)| t.starts_with("salt/") && t.ends_with(suffix))
            .unwrap_or_else(|| panic!("no {suffix} event in {tags:?}"))
            .1
            .clone()
    };
    let new = find("/new");
    assert_eq!(new["fun"], "test.ping", "{seen:?}");
    assert_eq!((&new["tgt"], &new["user"]), (&json!("m2"), &json!("root")));
    let run = seen
        .iter()
        .find(|(t, _)| t.starts_with("salt/run/") && t.ends_with("/ret"))
        .map(|(_, d)| d.clone())
        .unwrap_or_else(|| panic!("no runner return in {tags:?}"));
    assert_eq!(run["user"], "Reactor");
    assert_eq!(
        run["fun_args"],
        json!([{"tag": "brine/test/one", "payload": "p1", "grain": "brinetest_master"}])
    );
    assert_eq!(
        run["return"],
        json!({"args": [], "kwargs": {"tag": "brine/test/one", "payload": "p1", "grain": "brinetest_master"}})
    );
    let wheel = seen
        .iter()
        .find(|(t, _)| t.starts_with("salt/wheel/") && t.ends_with("/ret"))
        .map(|(_, d)| d.clone())
        .unwrap_or_else(|| panic!("no wheel return in {tags:?}"));
    assert_eq!(
        (&wheel["user"], &wheel["fun_args"], &wheel["success"]),
        (&json!("Reactor"), &json!([]), &json!(true))
    );
    assert_eq!(wheel["return"]["minions"], json!(["m1", "m2"]));
    assert!(wheel.get("tag").is_none());

    // A salt:// reaction file, from the file server.
    master
        .bus
        .fire("brine/other", map(vec![("x", Value::from(1))]));
    let seen = events_until_quiet(&mut rx, Duration::from_secs(2)).await;
    let new: Vec<&Json> = seen
        .iter()
        .filter(|(t, _)| t.starts_with("salt/job/") && t.ends_with("/new"))
        .map(|(_, d)| d)
        .collect();
    assert_eq!(new.len(), 1, "{seen:?}");
    assert_eq!(new[0]["arg"], json!(["from salt url"]));

    // Events of the reactor's own jobs, render errors and missing files: nothing runs.
    master.bus.fire(
        "brine/test/loop",
        map(vec![("user", Value::from("Reactor"))]),
    );
    master.bus.fire("brine/broken", Value::Map(vec![]));
    master.bus.fire("brine/unmatched", Value::Map(vec![]));
    let seen = events_until_quiet(&mut rx, Duration::from_secs(2)).await;
    let tags: Vec<&str> = seen.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(tags, ["brine/test/loop", "brine/broken", "brine/unmatched"]);

    // The reactor.* runners: Salt's answers, and the map changes for the next events.
    let runner = |fun: &'static str, args: Vec<Value>| {
        let master = master.clone();
        async move {
            let a = crate::wheel::Args {
                args,
                kwargs: vec![],
            };
            to_json(
                &master
                    .run_runner("20260101000000000000", fun, a, "root")
                    .await
                    .unwrap(),
            )
        }
    };
    let s = |t: &str| Value::from(t);
    assert_eq!(
        runner("reactor.list", vec![]).await[1],
        json!({"brine/other": ["salt://reactor/other.sls"]})
    );
    assert_eq!(
        runner(
            "reactor.add",
            vec![s("brine/new"), s("salt://reactor/other.sls")]
        )
        .await,
        json!({"status": true, "comment": "Reactor added."})
    );
    assert_eq!(
        runner(
            "reactor.add",
            vec![s("brine/new"), s("salt://reactor/other.sls")]
        )
        .await,
        json!({"status": false, "comment": "Reactor already exists."})
    );
    assert_eq!(
        runner("reactor.list", vec![])
            .await
            .as_array()
            .map(Vec::len),
        Some(4)
    );
    master.bus.fire("brine/new", Value::Map(vec![]));
    let seen = events_until_quiet(&mut rx, Duration::from_secs(2)).await;
    assert!(
        seen.iter()
            .any(|(t, _)| t.starts_with("salt/job/") && t.ends_with("/new")),
        "{seen:?}"
    );
    assert_eq!(
        runner("reactor.delete", vec![s("brine/none")]).await,
        json!({"status": false, "comment": "Reactor does not exists."})
    );
    assert_eq!(
        runner("reactor.delete", vec![s("brine/new")]).await,
        json!({"status": true, "comment": "Reactor deleted."})
    );
    assert_eq!(runner("reactor.is_leader", vec![]).await, json!(true));
    assert_eq!(
        runner("reactor.set_leader", vec![Value::from(false)]).await,
        json!(false)
    );
    master.bus.fire("brine/other", Value::Map(vec![]));
    let seen = events_until_quiet(&mut rx, Duration::from_secs(2)).await;
    assert_eq!(
        seen.len(),
        1,
        "a reactor that is not the leader does nothing: {seen:?}"
    );
    assert_eq!(runner("reactor.set_leader", vec![]).await, json!(true));

    // Salt's manage events: answered with the root key, refused without it.
    master.bus.fire(
        "salt/reactors/manage/is_leader",
        map(vec![("key", Value::from(master.secrets.root_key()))]),
    );
    master.bus.fire(
        "salt/reactors/manage/set_leader",
        map(vec![
            ("key", s("wrong")),
            ("id", s("brinetest_master")),
            ("value", Value::from(false)),
        ]),
    );
    let seen = events_until_quiet(&mut rx, Duration::from_secs(2)).await;
    let mut tags: Vec<&str> = seen.iter().map(|(t, _)| t.as_str()).collect();
    tags.sort();
    assert_eq!(
        tags,
        [
            "salt/reactors/manage/is_leader",
            "salt/reactors/manage/leader/value",
            "salt/reactors/manage/set_leader"
        ]
    );
    let value = seen
        .iter()
        .find(|(t, _)| t.ends_with("/leader/value"))
        .unwrap();
    assert_eq!(value.1["result"], json!(true));
    task.abort();
}

#[test]
fn the_pool_refuses_jobs_beyond_its_workers_and_queue() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pool = Pool::new(1, 1, rt.handle().clone());
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(rx));
    let blocker = |rx: Arc<Mutex<std::sync::mpsc::Receiver<()>>>| async move {
        let _ = tokio::task::spawn_blocking(move || rx.lock().unwrap().recv()).await;
    };
    assert!(pool.submit(blocker(rx.clone())));
    assert!(pool.submit(blocker(rx.clone())));
    assert!(!pool.submit(async {}));
    tx.send(()).unwrap();
    tx.send(()).unwrap();
    rt.block_on(async {
        while pool.taken.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    assert!(pool.submit(async {}));
}
