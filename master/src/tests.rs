//! The request dispatch end to end, in process: a [`Master`] built by [`Master::new`] over a
//! temporary root, a local event bus and a publisher that records what it is given.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use brine_protocol::config::MasterConfig;
use brine_protocol::crypt::{Crypticle, PrivateKey};
use brine_protocol::loads::{
    Fun, PublishLoad, PublishRefused, PublishReply, PublishRequest, RequestEnvelope, Tgt,
};
use brine_protocol::payload::{dumps, get, get_str, loads, map, Value};
use brine_transport::eventbus::EventBus;

use crate::keys::KeyState;
use crate::master::{Master, PublishSink};

type Frames = Arc<Mutex<Vec<Vec<Vec<u8>>>>>;

/// Records every publish; panics on the first send when told to (a failing handler).
struct Recorder {
    frames: Frames,
    panic: AtomicBool,
}

impl PublishSink for Recorder {
    fn send(&self, frames: Vec<Vec<u8>>) {
        if self.panic.swap(false, Ordering::SeqCst) {
            panic!("publisher exploded");
        }
        self.frames.lock().unwrap().push(frames);
    }
}

struct Fixture {
    _root: tempfile::TempDir,
    master: Arc<Master>,
    frames: Frames,
    root_key: String,
}

fn fixture(panicking_publisher: bool) -> Fixture {
    fixture_with(panicking_publisher, |_| String::new())
}

/// A fixture whose config also holds `extra(root)`.
fn fixture_with(panicking_publisher: bool, extra: impl Fn(&std::path::Path) -> String) -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let conf = root.path().join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(
        conf.join("master"),
        format!(
            "root_dir: {}\nuser: root\nkeysize: 2048\n{}",
            root.path().display(),
            extra(root.path())
        ),
    )
    .unwrap();
    let cfg = MasterConfig::load(&conf).unwrap();
    let frames: Frames = Arc::default();
    let publisher = Recorder {
        frames: frames.clone(),
        panic: AtomicBool::new(panicking_publisher),
    };
    let root_key_path = cfg.cachedir.join(".root_key");
    let master = Master::new(cfg, Box::new(publisher), EventBus::local()).unwrap();
    let root_key = std::fs::read_to_string(root_key_path)
        .unwrap()
        .trim()
        .to_string();
    Fixture {
        _root: root,
        master,
        frames,
        root_key,
    }
}

/// A minion `id` whose key is accepted; returns its private key.
fn accepted_minion(m: &Master, id: &str) -> PrivateKey {
    let key = PrivateKey::generate(2048).unwrap();
    m.keys
        .write(KeyState::Accepted, id, &key.public().to_pem())
        .unwrap();
    key
}

fn clear(m: &Master, load: Value) -> Value {
    let body = dumps(&RequestEnvelope::clear(load).to_value());
    loads(&m.handle_request(&body)).unwrap()
}

fn publish_request(key: &str) -> Value {
    let mut req = PublishRequest::new(
        Tgt::Expr("*".into()),
        Fun::One("test.ping".into()),
        vec![],
        "glob",
    );
    req.key = Some(key.to_string());
    req.to_value()
}

/// An aes request from minion `id`, as a Salt 3007 minion sends one; returns the body and its
/// nonce (which the answer carries).
fn aes_request(
    m: &Master,
    id: &str,
    key: &PrivateKey,
    load: Vec<(&str, Value)>,
) -> (Vec<u8>, String) {
    let nonce = format!("{:032x}", rand::random::<u128>());
    let session = m.secrets.session(id).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut inner = map(load);
    if let Value::Map(pairs) = &mut inner {
        pairs.push((Value::from("id"), Value::from(id)));
        pairs.push((
            Value::from("tok"),
            Value::Binary(key.x931_encrypt(b"salt").unwrap()),
        ));
        pairs.push((Value::from("nonce"), Value::from(nonce.as_str())));
        pairs.push((Value::from("ts"), Value::from(now)));
    }
    let env = map(vec![
        ("enc", Value::from("aes")),
        ("load", Value::Binary(session.dumps(&inner, None))),
        ("version", Value::from(3)),
        ("id", Value::from(id)),
    ]);
    (dumps(&env), nonce)
}

/// Decrypt an aes answer.
fn aes_answer(m: &Master, id: &str, nonce: &str, reply: &[u8]) -> Value {
    let session: Crypticle = m.secrets.session(id).unwrap();
    let Value::Binary(ct) = loads(reply).unwrap() else {
        panic!("aes answer is not bytes")
    };
    session.loads(&ct, Some(nonce)).unwrap().unwrap()
}

#[tokio::test]
async fn a_publish_with_a_bad_key_is_an_authentication_error() {
    let f = fixture(false);
    accepted_minion(&f.master, "m1");
    let mut events = f.master.bus.subscribe();
    let reply = clear(&f.master, publish_request("not the root key"));
    assert_eq!(reply, Master::auth_error("AuthenticationError"));
    assert!(matches!(
        PublishReply::parse(reply),
        Err(PublishRefused::Error { name, .. }) if name == "AuthenticationError"
    ));
    assert!(f.frames.lock().unwrap().is_empty(), "nothing published");
    let ev = events.try_recv().unwrap();
    assert_eq!(ev.tag, "salt/job/error");
    assert!(get(&ev.data, "key").is_none(), "the key is not announced");
}

#[tokio::test]
async fn a_publish_answers_the_job_and_sends_the_publish() {
    let f = fixture(false);
    accepted_minion(&f.master, "m1");
    let reply = clear(&f.master, publish_request(&f.root_key));
    let reply = PublishReply::parse(reply).unwrap();
    assert_eq!(reply.minions, ["m1"]);
    assert!(reply.missing.is_empty());
    let frames = f.frames.lock().unwrap();
    assert_eq!(frames.len(), 1, "one publish");
    let env = loads(frames[0].last().unwrap()).unwrap();
    assert_eq!(get_str(&env, "enc"), Some("aes"));
    let Some(Value::Binary(ct)) = get(&env, "load") else {
        panic!("publish load is not bytes")
    };
    let load = f.master.secrets.aes().loads(ct, None).unwrap().unwrap();
    let load = PublishLoad::parse(load).unwrap();
    assert_eq!(load.jid, reply.jid);
    assert_eq!(load.fun, Fun::One("test.ping".into()));
    assert_eq!(load.user.as_deref(), Some("root"));
    assert_eq!(load.serial, Some(1));
    // The job is stored under its jid.
    assert!(f.master.store.get_load(&reply.jid).unwrap().is_some());
}

#[tokio::test]
async fn a_return_is_fired_on_the_bus_and_stored() {
    let f = fixture(false);
    let key = accepted_minion(&f.master, "m1");
    let jid = "20261122101715645321";
    let mut events = f.master.bus.subscribe();
    let (body, nonce) = aes_request(
        &f.master,
        "m1",
        &key,
        vec![
            ("cmd", Value::from("_return")),
            ("success", Value::from(true)),
            ("return", Value::from(true)),
            ("retcode", Value::from(0)),
            ("jid", Value::from(jid)),
            ("fun", Value::from("test.ping")),
            ("fun_args", Value::Array(vec![])),
        ],
    );
    let reply = f.master.handle_request(&body);
    assert_eq!(aes_answer(&f.master, "m1", &nonce, &reply), Value::Nil);
    let ev = events.try_recv().unwrap();
    assert_eq!(ev.tag, format!("salt/job/{jid}/ret/m1"));
    assert_eq!(get_str(&ev.data, "id"), Some("m1"));
    assert_eq!(get(&ev.data, "return"), Some(&Value::from(true)));
    let stored = f.master.store.get_returns(jid).unwrap();
    assert_eq!(stored.len(), 1);
    // The same request again is a replay: refused.
    assert_eq!(
        loads(&f.master.handle_request(&body)).unwrap(),
        Value::from("bad load")
    );
}

#[tokio::test]
async fn unknown_commands_get_what_salt_answers() {
    let f = fixture(false);
    let reply = clear(&f.master, map(vec![("cmd", Value::from("_no_such_thing"))]));
    assert_eq!(reply, Value::Map(vec![]));
    let key = accepted_minion(&f.master, "m1");
    let (body, nonce) = aes_request(
        &f.master,
        "m1",
        &key,
        vec![("cmd", Value::from("_no_such_thing"))],
    );
    let reply = f.master.handle_request(&body);
    assert_eq!(
        aes_answer(&f.master, "m1", &nonce, &reply),
        Value::Map(vec![])
    );
    // Not a request at all.
    assert_eq!(
        loads(&f.master.handle_request(b"\xc1")).unwrap(),
        Value::from("bad load")
    );
    assert_eq!(
        loads(
            &f.master
                .handle_request(&dumps(&map(vec![("enc", Value::from("rot13"))])))
        )
        .unwrap(),
        Value::from("bad load")
    );
}

#[tokio::test]
async fn a_panicking_handler_is_answered_and_the_worker_lives_on() {
    let f = fixture(true);
    accepted_minion(&f.master, "m1");
    let reply = clear(&f.master, publish_request(&f.root_key));
    let Some(err) = get(&reply, "error") else {
        panic!("no error in {reply}")
    };
    assert_eq!(get_str(err, "name"), Some("SaltMasterError"));
    assert!(get_str(err, "message").unwrap().contains("publish"));
    // The same master (and worker) answers the next request.
    let ping = map(vec![("cmd", Value::from("ping")), ("x", Value::from(1))]);
    assert_eq!(clear(&f.master, ping.clone()), ping);
    // A publish after the failed one still gets its turn (the line did not stall).
    let reply = PublishReply::parse(clear(&f.master, publish_request(&f.root_key))).unwrap();
    assert_eq!(reply.minions, ["m1"]);
    assert_eq!(f.frames.lock().unwrap().len(), 1);
}

/// One aes request from minion `id` and its decrypted answer.
fn ask(m: &Master, id: &str, key: &PrivateKey, load: Vec<(&str, Value)>) -> Value {
    let (body, nonce) = aes_request(m, id, key, load);
    aes_answer(m, id, &nonce, &m.handle_request(&body))
}

#[tokio::test]
async fn the_file_server_answers_with_salts_shapes() {
    let f = fixture_with(false, |root| {
        let srv = root.join("srv");
        std::fs::create_dir_all(srv.join("web")).unwrap();
        std::fs::write(srv.join("top.sls"), "base:\n  '*': [web]\n").unwrap();
        std::fs::write(srv.join("web/init.sls"), "x").unwrap();
        std::fs::write(root.join("outside.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(root.join("outside.txt"), srv.join("out")).unwrap();
        format!(
            "file_roots:\n  base: [{}]\n  dev: []\nfile_buffer_size: 4\n",
            srv.display()
        )
    });
    let key = accepted_minion(&f.master, "m1");
    let m = &f.master;
    let s = |v: &str| Value::from(v);
    assert_eq!(
        ask(m, "m1", &key, vec![("cmd", s("_file_envs"))]),
        Value::Array(vec![s("base"), s("dev")])
    );
    assert_eq!(
        ask(
            m,
            "m1",
            &key,
            vec![
                ("cmd", s("_file_list")),
                ("saltenv", s("base")),
                ("prefix", s(""))
            ]
        ),
        Value::Array(vec![s("top.sls"), s("web/init.sls")])
    );
    assert_eq!(
        ask(
            m,
            "m1",
            &key,
            vec![
                ("cmd", s("_file_list")),
                ("saltenv", s("base")),
                ("prefix", s("/web/"))
            ]
        ),
        Value::Array(vec![s("web/init.sls")])
    );
    assert_eq!(
        ask(
            m,
            "m1",
            &key,
            vec![
                ("cmd", s("_dir_list")),
                ("saltenv", s("base")),
                ("prefix", s(""))
            ]
        ),
        Value::Array(vec![s("web")])
    );
    assert_eq!(
        ask(
            m,
            "m1",
            &key,
            vec![("cmd", s("_file_list")), ("saltenv", s("nope"))]
        ),
        Value::Array(vec![])
    );
    let chunk = ask(
        m,
        "m1",
        &key,
        vec![
            ("cmd", s("_serve_file")),
            ("path", s("top.sls")),
            ("saltenv", s("base")),
            ("loc", Value::from(4)),
        ],
    );
    // On the wire bytes and text share msgpack's raw family: a text chunk reads back as text.
    assert_eq!(
        get(&chunk, "data").and_then(brine_protocol::payload::bytes_of),
        Some(&b":\n  "[..])
    );
    assert_eq!(get_str(&chunk, "dest"), Some("top.sls"));
    let hash = ask(
        m,
        "m1",
        &key,
        vec![
            ("cmd", s("_file_hash")),
            ("path", s("web/init.sls")),
            ("saltenv", s("base")),
        ],
    );
    assert_eq!(get_str(&hash, "hash_type"), Some("sha256"));
    assert_eq!(
        get_str(&hash, "hsum"),
        Some("2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881")
    );
    let Value::Array(hs) = ask(
        m,
        "m1",
        &key,
        vec![
            ("cmd", s("_file_hash_and_stat")),
            ("path", s("web/init.sls")),
            ("saltenv", s("base")),
        ],
    ) else {
        panic!("not a list")
    };
    assert_eq!(hs[0], hash);
    assert!(matches!(&hs[1], Value::Array(st) if st.len() == 10 && st[6] == Value::from(1)));
    let find = ask(
        m,
        "m1",
        &key,
        vec![
            ("cmd", s("_file_find")),
            ("path", s("web/init.sls")),
            ("saltenv", s("base")),
        ],
    );
    assert_eq!(get_str(&find, "rel"), Some("web/init.sls"));
    assert_eq!(get_str(&find, "back"), Some("roots"));
    let opts = ask(
        m,
        "m1",
        &key,
        vec![("cmd", s("_master_opts")), ("env_only", Value::from(true))],
    );
    assert_eq!(
        get(&opts, "file_roots"),
        Some(&map(vec![
            ("base", Value::Array(vec![])),
            ("dev", Value::Array(vec![]))
        ]))
    );
    assert_eq!(get_str(&opts, "top_file_merging_strategy"), Some("merge"));
    assert_eq!(get_str(&opts, "default_top"), Some("base"));

    // Refusals: Salt's empty answers, and nothing outside the roots read.
    let outside = f._root.path().join("outside.txt").display().to_string();
    for bad in [
        "../outside.txt",
        "../../etc/passwd",
        "/etc/passwd",
        &outside,
        "%2e%2e/outside.txt",
        "out",
        "top.sls\0",
        "",
    ] {
        let served = ask(
            m,
            "m1",
            &key,
            vec![
                ("cmd", s("_serve_file")),
                ("path", s(bad)),
                ("saltenv", s("base")),
                ("loc", Value::from(0)),
            ],
        );
        assert_eq!(
            served,
            map(vec![("data", s("")), ("dest", s(""))]),
            "{bad:?}"
        );
        let hashed = ask(
            m,
            "m1",
            &key,
            vec![
                ("cmd", s("_file_hash")),
                ("path", s(bad)),
                ("saltenv", s("base")),
            ],
        );
        assert_eq!(hashed, s(""), "{bad:?}");
        let hs = ask(
            m,
            "m1",
            &key,
            vec![
                ("cmd", s("_file_hash_and_stat")),
                ("path", s(bad)),
                ("saltenv", s("base")),
            ],
        );
        assert_eq!(hs, Value::Array(vec![s(""), Value::Nil]), "{bad:?}");
        let find = ask(
            m,
            "m1",
            &key,
            vec![
                ("cmd", s("_file_find")),
                ("path", s(bad)),
                ("saltenv", s("base")),
            ],
        );
        assert_eq!(find, map(vec![("path", s("")), ("rel", s(""))]), "{bad:?}");
    }
    let dirs = ask(
        m,
        "m1",
        &key,
        vec![
            ("cmd", s("_dir_list")),
            ("saltenv", s("../..")),
            ("prefix", s("")),
        ],
    );
    assert_eq!(dirs, Value::Array(vec![]));
    let no_loc = ask(
        m,
        "m1",
        &key,
        vec![
            ("cmd", s("_serve_file")),
            ("path", s("top.sls")),
            ("saltenv", s("base")),
        ],
    );
    assert_eq!(no_loc, map(vec![("data", s("")), ("dest", s(""))]));
    let negative = ask(
        m,
        "m1",
        &key,
        vec![
            ("cmd", s("_serve_file")),
            ("path", s("top.sls")),
            ("saltenv", s("base")),
            ("loc", Value::from(-5)),
        ],
    );
    assert_eq!(negative, map(vec![("data", s("")), ("dest", s(""))]));
}

#[tokio::test]
async fn fileserver_runners_and_the_file_roots_wheel() {
    let f = fixture_with(false, |root| {
        let srv = root.join("srv");
        std::fs::create_dir_all(srv.join("web/empty")).unwrap();
        std::fs::write(srv.join("top.sls"), "base: {}\n").unwrap();
        std::fs::write(srv.join("web/init.sls"), "x").unwrap();
        std::os::unix::fs::symlink("web/init.sls", srv.join("link")).unwrap();
        format!("file_roots:\n  base: [{}]\n  dev: []\n", srv.display())
    });
    let m = &f.master;
    let srv = f._root.path().join("srv").display().to_string();
    let run = |name: &str, kwargs: Vec<(&str, &str)>| {
        let runner = crate::runners::find(name).unwrap();
        (runner.run)(crate::runners::Call {
            master: m.clone(),
            jid: "20250101000000000000".into(),
            fun: runner.name,
            args: crate::wheel::Args {
                args: vec![],
                kwargs: kwargs
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Value::from(v)))
                    .collect(),
            },
            timeout: std::time::Duration::from_secs(1),
            user: "root".into(),
        })
    };
    let s = |v: &str| Value::from(v);
    assert_eq!(
        run("fileserver.envs", vec![]).await,
        Ok(Value::Array(vec![s("base"), s("dev")]))
    );
    assert_eq!(
        run("fileserver.file_list", vec![]).await,
        Ok(Value::Array(vec![
            s("link"),
            s("top.sls"),
            s("web/init.sls")
        ]))
    );
    assert_eq!(
        run("fileserver.file_list", vec![("saltenv", "dev")]).await,
        Ok(Value::Array(vec![]))
    );
    assert_eq!(
        run("fileserver.file_list", vec![("backend", "git")]).await,
        Ok(Value::Array(vec![]))
    );
    assert_eq!(
        run("fileserver.dir_list", vec![]).await,
        Ok(Value::Array(vec![s("web"), s("web/empty")]))
    );
    assert_eq!(
        run("fileserver.empty_dir_list", vec![]).await,
        Ok(Value::Array(vec![s("web/empty")]))
    );
    assert_eq!(
        run("fileserver.symlink_list", vec![]).await,
        Ok(map(vec![("link", s("web/init.sls"))]))
    );
    assert_eq!(
        run("fileserver.update", vec![]).await,
        Ok(Value::from(true))
    );
    assert_eq!(
        run("fileserver.clear_cache", vec![]).await,
        Ok(s("No cache was cleared"))
    );

    let wheel = |name: &str, kwargs: Vec<(&str, Value)>| {
        m.run_wheel(
            name,
            &crate::wheel::Args {
                args: vec![],
                kwargs: kwargs
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            },
        )
    };
    let tree = map(vec![
        ("link", s("f")),
        ("top.sls", s("f")),
        (
            "web",
            map(vec![("empty", Value::Map(vec![])), ("init.sls", s("f"))]),
        ),
    ]);
    let got = wheel("file_roots.list_env", vec![]).unwrap();
    let Value::Map(roots) = &got else {
        panic!("{got}")
    };
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0].0, s(&srv));
    let sorted = |v: &Value| {
        let mut t = v.to_string().into_bytes();
        t.sort_unstable();
        t
    };
    assert_eq!(sorted(&roots[0].1), sorted(&tree));
    assert_eq!(
        wheel("file_roots.list_env", vec![("saltenv", s("nope"))]),
        Ok(Value::Map(vec![]))
    );
    let all = wheel("file_roots.list_roots", vec![]).unwrap();
    assert!(matches!(get(&all, "dev"), Some(Value::Array(a)) if a == &vec![Value::Map(vec![])]));
    let err = wheel(
        "file_roots.write",
        vec![("data", s("pwned")), ("path", s("evil.sls"))],
    )
    .unwrap_err();
    assert!(
        err.contains("refused") && err.contains("CVE-2021-25282"),
        "{err}"
    );
    assert!(!f._root.path().join("srv/evil.sls").exists());
}

/// `_pillar` as a Salt 3007 minion asks for it; the answer decrypted with the minion's key.
fn ask_pillar(m: &Master, id: &str, key: &PrivateKey, grains: Value) -> Option<Value> {
    let (body, nonce) = aes_request(
        m,
        id,
        key,
        vec![
            ("cmd", Value::from("_pillar")),
            ("grains", grains),
            ("saltenv", Value::Nil),
            ("pillarenv", Value::Nil),
            ("ver", Value::from("2")),
        ],
    );
    let reply = loads(&m.handle_request(&body)).ok()?;
    let Some(Value::Binary(enc_key)) = get(&reply, "key") else {
        return None;
    };
    let Some(Value::Binary(blob)) = get(&reply, "pillar") else {
        return None;
    };
    let aes = key
        .decrypt(enc_key, brine_protocol::crypt::EncAlgo::OaepSha1)
        .unwrap();
    let crypticle = Crypticle::new(std::str::from_utf8(&aes).unwrap()).unwrap();
    let signed = crypticle.loads(blob, None).unwrap().unwrap();
    let Some(Value::Binary(data)) = get(&signed, "data") else {
        panic!("{signed}")
    };
    let data = loads(data).unwrap();
    assert_eq!(get_str(&data, "nonce"), Some(nonce.as_str()));
    get(&data, "pillar").cloned()
}

#[tokio::test]
async fn each_minion_gets_its_own_pillar_and_an_unaccepted_one_nothing() {
    let f = fixture_with(false, |root| {
        let p = root.join("pillar");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("top.sls"),
            "base:\n  '*':\n    - common\n  'role:db':\n    - match: grain\n    - db\n",
        )
        .unwrap();
        std::fs::write(p.join("common.sls"), "me: {{ grains['id'] }}\n").unwrap();
        std::fs::write(p.join("db.sls"), "db_password: s3cret\n").unwrap();
        std::fs::write(root.join("srv.txt"), "x").unwrap();
        format!("pillar_roots:\n  base: [{}]\n", p.display())
    });
    let m = &f.master;
    let web = accepted_minion(m, "web1");
    let db = accepted_minion(m, "db1");
    let grains = |role: &str, claimed_id: &str| {
        map(vec![
            ("role", Value::from(role)),
            ("id", Value::from(claimed_id)),
        ])
    };
    // The grains' own id is not believed: the pillar is compiled for the signed-in minion.
    let got = ask_pillar(m, "web1", &web, grains("web", "db1")).unwrap();
    assert_eq!(got, map(vec![("me", Value::from("web1"))]));
    let got = ask_pillar(m, "db1", &db, grains("db", "db1")).unwrap();
    assert_eq!(
        got,
        map(vec![
            ("me", Value::from("db1")),
            ("db_password", Value::from("s3cret"))
        ])
    );
    // The minion data cache holds what was compiled, for the runners and targeting.
    let cached = m.cache.get("web1").unwrap();
    assert_eq!(cached.pillar, Some(map(vec![("me", Value::from("web1"))])));
    // A minion whose key is no longer accepted gets no pillar and no file.
    m.keys.delete("db1");
    m.keys
        .write(KeyState::Pending, "db1", &db.public().to_pem())
        .unwrap();
    assert_eq!(ask_pillar(m, "db1", &db, grains("db", "db1")), None);
    let (body, _) = aes_request(
        m,
        "db1",
        &db,
        vec![
            ("cmd", Value::from("_serve_file")),
            ("path", Value::from("top.sls")),
            ("saltenv", Value::from("base")),
            ("loc", Value::from(0)),
        ],
    );
    assert_eq!(
        loads(&m.handle_request(&body)).unwrap(),
        Value::from("bad load")
    );
}

/// A job another master shared: published here once under its jid, stored; bodies that are
/// not a publish load are ignored with nothing published.
#[tokio::test]
async fn a_job_shared_by_another_master_is_published_once() {
    let f = fixture(false);
    accepted_minion(&f.master, "web1");
    for bad in [
        b"not msgpack".to_vec(),
        dumps(&Value::from("a string")),
        dumps(&map(vec![("fun", Value::from("test.ping"))])),
    ] {
        f.master.publish_peer_job("master-b", &bad);
    }
    let mut req = PublishRequest::new(
        Tgt::Expr("web*".into()),
        Fun::One("test.ping".into()),
        vec![],
        "glob",
    );
    req.user = Some("alice".into());
    let mut load = PublishLoad::from_request(&req, "not-a-jid");
    f.master
        .publish_peer_job("master-b", &dumps(&load.to_value()));
    assert!(f.frames.lock().unwrap().is_empty(), "nothing published");

    load.jid = "20261128101500123456".into();
    let body = dumps(&load.to_value());
    f.master.publish_peer_job("master-b", &body);
    f.master.publish_peer_job("master-b", &body);
    assert_eq!(f.frames.lock().unwrap().len(), 1, "published once");
    let (stored, minions) = f.master.store.get_load(&load.jid).unwrap().expect("stored");
    assert_eq!(minions, ["web1"]);
    assert_eq!(get_str(&stored, "user"), Some("alice"));
    // A jid published here already is not published again when a peer sends it back.
    let own = f.master.publish_job(req, vec!["web1".into()], vec![]);
    load.jid = own.jid;
    f.master
        .publish_peer_job("master-b", &dumps(&load.to_value()));
    assert_eq!(f.frames.lock().unwrap().len(), 2);
}

/// A runner job's return goes to the job store, unless `runner_returns: False` (Salt's
/// option) or `job_cache: False` says not; the caller gets it either way.
#[tokio::test]
async fn runner_jobs_are_stored_as_runner_returns_says() {
    for (extra, stored) in [
        ("", 1),
        ("runner_returns: False\n", 0),
        ("job_cache: False\n", 0),
    ] {
        let f = fixture_with(false, |_| extra.to_string());
        let jid = "20250101000000000001";
        let args = crate::wheel::Args {
            args: vec![Value::from("a")],
            kwargs: vec![],
        };
        let (ret, ok) = f.master.run_runner_job(jid, "test.arg", args, "root").await;
        assert!(ok, "{extra}: {ret}");
        assert_eq!(
            get(&ret, "args"),
            Some(&Value::Array(vec![Value::from("a")])),
            "{extra}: {ret}"
        );
        let rows = f.master.store.get_returns(jid).unwrap();
        assert_eq!(rows.len(), stored, "{extra}");
        if let Some(row) = rows.first() {
            // Salt's shape: the whole event data is the job's return.
            let data = get(&row.full_ret, "return").unwrap();
            assert_eq!(get_str(data, "fun"), Some("runner.test.arg"), "{data}");
            assert_eq!(get(data, "return"), Some(&ret), "{data}");
        }
    }
}
