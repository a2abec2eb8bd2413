//! Target matching tests: a table checked against Salt 3007.15 itself, then the
//! behaviours the table cannot show (errors, order, deliberate differences).

use std::collections::BTreeMap;

use rmpv::Value;

use super::*;

fn json(j: serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::from(b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => Value::F64(n.as_f64().unwrap_or(0.0)),
        },
        serde_json::Value::String(s) => Value::from(s),
        serde_json::Value::Array(a) => Value::Array(a.into_iter().map(json).collect()),
        serde_json::Value::Object(o) => Value::Map(
            o.into_iter()
                .map(|(k, v)| (Value::from(k), json(v)))
                .collect(),
        ),
    }
}

/// Grains and pillar of the test fleet; `nocache` has an accepted key but no cache entry.
fn fleet() -> Vec<(&'static str, Option<(Value, Value)>)> {
    let mut web1_grains = json(serde_json::json!({
        "id": "web1", "os": "Debian", "os_family": "Debian", "roles": ["web", "lb"], "num_cpus": 4,
        "ipv4": ["127.0.0.1", "10.0.0.11"], "ipv6": ["::1", "fe80::1"],
        "locale_info": {"defaultlanguage": "en_US"},
        "gpus": [{"model": "GeForce", "vendor": "nvidia"}],
        "selinux": {"enabled": false},
    }));
    if let Value::Map(pairs) = &mut web1_grains {
        pairs.push((
            Value::from("ports"),
            Value::Map(vec![(Value::from(8080), Value::from("http"))]),
        ));
    }
    vec![
        (
            "web1",
            Some((
                web1_grains,
                json(serde_json::json!({
                    "role": "frontend", "env": "prod", "apps": ["nginx", "redis"],
                    "nested": {"k": {"v": "deep"}},
                })),
            )),
        ),
        (
            "web2",
            Some((
                json(serde_json::json!({
                    "id": "web2", "os": "Ubuntu", "os_family": "Debian", "roles": ["web"],
                    "num_cpus": 2, "ipv4": ["127.0.0.1", "10.0.1.12"], "ipv6": ["::1"],
                    "selinux": {"enabled": true},
                })),
                json(serde_json::json!({"role": "frontend", "env": "dev", "apps": ["nginx"]})),
            )),
        ),
        (
            "db1",
            Some((
                json(serde_json::json!({
                    "id": "db1", "os": "CentOS", "os_family": "RedHat", "roles": ["db"],
                    "num_cpus": 16, "ipv4": ["127.0.0.1", "10.1.0.5"], "ipv6": ["::1"],
                })),
                json(serde_json::json!({"role": "database", "env": "prod"})),
            )),
        ),
        (
            "DB2",
            Some((
                json(serde_json::json!({
                    "id": "DB2", "os": "CentOS", "roles": ["db"], "ipv4": ["192.168.5.5"],
                })),
                json(serde_json::json!({"role": "database"})),
            )),
        ),
        ("nocache", None),
    ]
}

fn nodegroups() -> BTreeMap<String, Value> {
    let mut ng = BTreeMap::new();
    ng.insert("webs".to_owned(), Value::from("web1 web2"));
    ng.insert("prod".to_owned(), Value::from("I@env:prod"));
    ng.insert("mixed".to_owned(), Value::from("N@webs or db1"));
    ng.insert(
        "lst".to_owned(),
        Value::Array(vec![
            Value::from("db1"),
            Value::from("nocache"),
            Value::from("ghost"),
        ]),
    );
    ng
}

/// Runs `check_minions` over the fleet.
fn master(tgt: &Value, tgt_type: &str, delimiter: &str) -> Result<Expected, TargetError> {
    let fleet = fleet();
    let ids: Vec<String> = fleet.iter().map(|(id, _)| (*id).to_owned()).collect();
    let lookup = move |id: &str| -> Option<(Option<Value>, Option<Value>)> {
        fleet
            .iter()
            .find(|(fid, _)| *fid == id)
            .and_then(|(_, data)| data.clone())
            .map(|(g, p)| (Some(g), Some(p)))
    };
    check_minions(tgt, tgt_type, delimiter, &ids, &lookup, &nodegroups())
}

/// Runs `matches` on every minion of the fleet (a minion always knows its own grains and
/// pillar, empty for `nocache`); returns the ids that match, in fleet order.
fn minions(tgt: &Value, tgt_type: &str, delimiter: &str) -> Result<Vec<String>, TargetError> {
    let empty = Value::Map(Vec::new());
    let mut out = Vec::new();
    for (id, data) in fleet() {
        let (grains, pillar) = match &data {
            Some((g, p)) => (g, p),
            None => (&empty, &empty),
        };
        let me = MinionData {
            id,
            grains: Some(grains),
            pillar: Some(pillar),
        };
        if matches(tgt, tgt_type, delimiter, &me)? {
            out.push(id.to_owned());
        }
    }
    Ok(out)
}

fn s(v: &str) -> Value {
    Value::from(v)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

enum Tgt {
    Str(&'static str),
    List(&'static [&'static str]),
}

impl Tgt {
    fn value(&self) -> Value {
        match self {
            Tgt::Str(t) => Value::from(*t),
            Tgt::List(items) => Value::Array(items.iter().map(|i| Value::from(*i)).collect()),
        }
    }

    fn text(&self) -> String {
        match self {
            Tgt::Str(t) => (*t).to_owned(),
            Tgt::List(items) => items.join(" "),
        }
    }
}

struct SaltCase {
    tgt: Tgt,
    tgt_type: &'static str,
    delimiter: &'static str,
    /// `CkMinions.check_minions` result, sorted case-insensitively.
    master: &'static [&'static str],
    missing: &'static [&'static str],
    /// Minions whose own matcher accepted the publish, in fleet order.
    minion: &'static [&'static str],
}

/// Computed by running Salt 3007.15's `CkMinions` (with a localfs minion data cache) and
/// its loader matchers over the fleet above.
#[rustfmt::skip]
const SALT_CASES: &[SaltCase] = &[
    SaltCase { tgt: Tgt::Str("*"), tgt_type: "glob", delimiter: ":", master: &["db1", "DB2", "nocache", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1", "DB2", "nocache"] },
    SaltCase { tgt: Tgt::Str("web*"), tgt_type: "glob", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("WEB*"), tgt_type: "glob", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("db?"), tgt_type: "glob", delimiter: ":", master: &["db1"], missing: &[], minion: &["db1"] },
    SaltCase { tgt: Tgt::Str("[wd]*"), tgt_type: "glob", delimiter: ":", master: &["db1", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1"] },
    SaltCase { tgt: Tgt::Str("*1"), tgt_type: "glob", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("nomatch"), tgt_type: "glob", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("DB2"), tgt_type: "glob", delimiter: ":", master: &["DB2"], missing: &[], minion: &["DB2"] },
    SaltCase { tgt: Tgt::Str("db[!1]"), tgt_type: "glob", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("[!w]*"), tgt_type: "glob", delimiter: ":", master: &["db1", "DB2", "nocache"], missing: &[], minion: &["db1", "DB2", "nocache"] },
    SaltCase { tgt: Tgt::Str("web"), tgt_type: "pcre", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("web\\d"), tgt_type: "pcre", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("db1$"), tgt_type: "pcre", delimiter: ":", master: &["db1"], missing: &[], minion: &["db1"] },
    SaltCase { tgt: Tgt::Str("(web|db)1"), tgt_type: "pcre", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("D"), tgt_type: "pcre", delimiter: ":", master: &["DB2"], missing: &[], minion: &["DB2"] },
    SaltCase { tgt: Tgt::Str("db[12]"), tgt_type: "pcre", delimiter: ":", master: &["db1"], missing: &[], minion: &["db1"] },
    SaltCase { tgt: Tgt::Str("web1,db1"), tgt_type: "list", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("web1"), tgt_type: "list", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("web1,ghost,db1"), tgt_type: "list", delimiter: ":", master: &["db1", "web1"], missing: &["ghost"], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str(",web1,,"), tgt_type: "list", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("ghost"), tgt_type: "list", delimiter: ":", master: &[], missing: &["ghost"], minion: &[] },
    SaltCase { tgt: Tgt::List(&["web1", "ghost", "DB2"]), tgt_type: "list", delimiter: ":", master: &["DB2", "web1"], missing: &["ghost"], minion: &["web1", "DB2"] },
    SaltCase { tgt: Tgt::Str("os:Debian"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("os:debian"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("os:Deb*"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("roles:web"), tgt_type: "grain", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("roles:db"), tgt_type: "grain", delimiter: ":", master: &["db1", "DB2"], missing: &[], minion: &["db1", "DB2"] },
    SaltCase { tgt: Tgt::Str("num_cpus:4"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("num_cpus:1*"), tgt_type: "grain", delimiter: ":", master: &["db1"], missing: &[], minion: &["db1"] },
    SaltCase { tgt: Tgt::Str("locale_info:defaultlanguage:en_US"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("gpus:model:GeForce"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("gpus:vendor:nv*"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("gpus:0:vendor:nvidia"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("selinux:enabled:False"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("selinux:enabled:true"), tgt_type: "grain", delimiter: ":", master: &["web2"], missing: &[], minion: &["web2"] },
    SaltCase { tgt: Tgt::Str("ports:8080:http"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("os"), tgt_type: "grain", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("nosuch:x"), tgt_type: "grain", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("*:CentOS"), tgt_type: "grain", delimiter: ":", master: &["db1", "DB2"], missing: &[], minion: &["db1", "DB2"] },
    SaltCase { tgt: Tgt::Str("roles:*"), tgt_type: "grain", delimiter: ":", master: &["db1", "DB2", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1", "DB2"] },
    SaltCase { tgt: Tgt::Str("locale_info:*"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("os_family:RedHat"), tgt_type: "grain", delimiter: ":", master: &["db1"], missing: &[], minion: &["db1"] },
    SaltCase { tgt: Tgt::Str("id:web1"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("roles:1:lb"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("roles:-1:lb"), tgt_type: "grain", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("locale_info|defaultlanguage|en_US"), tgt_type: "grain", delimiter: "|", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("os|Debian"), tgt_type: "grain", delimiter: "|", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("os:Deb"), tgt_type: "grain_pcre", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("os:(debian|ubuntu)"), tgt_type: "grain_pcre", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("os:c.*s$"), tgt_type: "grain_pcre", delimiter: ":", master: &["db1", "DB2"], missing: &[], minion: &["db1", "DB2"] },
    SaltCase { tgt: Tgt::Str("roles:w"), tgt_type: "grain_pcre", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("num_cpus:[0-9]{2}"), tgt_type: "grain_pcre", delimiter: ":", master: &["db1"], missing: &[], minion: &["db1"] },
    SaltCase { tgt: Tgt::Str("os:ian"), tgt_type: "grain_pcre", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("role:frontend"), tgt_type: "pillar", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("role:front*"), tgt_type: "pillar", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("env:prod"), tgt_type: "pillar", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("apps:nginx"), tgt_type: "pillar", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("apps:redis"), tgt_type: "pillar", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("nested:k:v:deep"), tgt_type: "pillar", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("nested:k:v:d*"), tgt_type: "pillar", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("role"), tgt_type: "pillar", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("*:database"), tgt_type: "pillar", delimiter: ":", master: &["db1", "DB2"], missing: &[], minion: &["db1", "DB2"] },
    SaltCase { tgt: Tgt::Str("apps:*"), tgt_type: "pillar", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("role:front"), tgt_type: "pillar_pcre", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("env:p.*"), tgt_type: "pillar_pcre", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("apps:red"), tgt_type: "pillar_pcre", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("role:frontend"), tgt_type: "pillar_exact", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("role:front*"), tgt_type: "pillar_exact", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("apps:nginx"), tgt_type: "pillar_exact", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("env:PROD"), tgt_type: "pillar_exact", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("127.0.0.1"), tgt_type: "ipcidr", delimiter: ":", master: &["db1", "nocache", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1"] },
    SaltCase { tgt: Tgt::Str("10.0.0.0/8"), tgt_type: "ipcidr", delimiter: ":", master: &["db1", "nocache", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1"] },
    SaltCase { tgt: Tgt::Str("10.0.0.11"), tgt_type: "ipcidr", delimiter: ":", master: &["nocache", "web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("192.168.0.0/16"), tgt_type: "ipcidr", delimiter: ":", master: &["DB2", "nocache"], missing: &[], minion: &["DB2"] },
    SaltCase { tgt: Tgt::Str("10.0.0.0/24"), tgt_type: "ipcidr", delimiter: ":", master: &["nocache", "web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("::1"), tgt_type: "ipcidr", delimiter: ":", master: &["db1", "nocache", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1"] },
    SaltCase { tgt: Tgt::Str("fe80::/10"), tgt_type: "ipcidr", delimiter: ":", master: &["nocache", "web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("0.0.0.0/0"), tgt_type: "ipcidr", delimiter: ":", master: &["db1", "DB2", "nocache", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1", "DB2"] },
    SaltCase { tgt: Tgt::Str("10.0.0.1/8"), tgt_type: "ipcidr", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("G@os:Debian or db1"), tgt_type: "compound", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("web* and not G@os:Ubuntu"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("not web1"), tgt_type: "compound", delimiter: ":", master: &["db1", "DB2", "nocache", "web2"], missing: &[], minion: &["web2", "db1", "DB2", "nocache"] },
    SaltCase { tgt: Tgt::Str("web1 or web2 and G@os:Ubuntu"), tgt_type: "compound", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("( web1 or web2 ) and G@os:Ubuntu"), tgt_type: "compound", delimiter: ":", master: &["web2"], missing: &[], minion: &["web2"] },
    SaltCase { tgt: Tgt::Str("not ( web1 or db1 )"), tgt_type: "compound", delimiter: ":", master: &["DB2", "nocache", "web2"], missing: &[], minion: &["web2", "DB2", "nocache"] },
    SaltCase { tgt: Tgt::Str("L@web1,ghost and G@os:Debian"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &["ghost"], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("not L@web1,ghost"), tgt_type: "compound", delimiter: ":", master: &["db1", "DB2", "nocache", "web2"], missing: &[], minion: &["web2", "db1", "DB2", "nocache"] },
    SaltCase { tgt: Tgt::Str("E@web\\d and I@env:prod"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("J@role:data.* or S@10.0.0.0/8"), tgt_type: "compound", delimiter: ":", master: &["db1", "DB2", "nocache", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1", "DB2"] },
    SaltCase { tgt: Tgt::Str("P@os:(debian|ubuntu) and not I@env:dev"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("S@192.168.5.5"), tgt_type: "compound", delimiter: ":", master: &["DB2", "nocache"], missing: &[], minion: &["DB2"] },
    SaltCase { tgt: Tgt::Str("G@roles:db and not DB2"), tgt_type: "compound", delimiter: ":", master: &["db1"], missing: &[], minion: &["db1"] },
    SaltCase { tgt: Tgt::Str("web1 not web2"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("* and not G@os_family:Debian"), tgt_type: "compound", delimiter: ":", master: &["db1", "DB2", "nocache"], missing: &[], minion: &["db1", "DB2", "nocache"] },
    SaltCase { tgt: Tgt::Str("G|@locale_info|defaultlanguage|en_US"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("I@nested:k:v:deep"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("N@webs"), tgt_type: "compound", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &["web1", "web2"] },
    SaltCase { tgt: Tgt::Str("N@webs and not web2"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("N@prod or DB2"), tgt_type: "compound", delimiter: ":", master: &["db1", "DB2", "web1"], missing: &[], minion: &["web1", "db1", "DB2"] },
    SaltCase { tgt: Tgt::Str("N@mixed"), tgt_type: "compound", delimiter: ":", master: &["db1", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1"] },
    SaltCase { tgt: Tgt::Str("N@lst"), tgt_type: "compound", delimiter: ":", master: &["db1", "nocache"], missing: &["ghost"], minion: &["db1", "nocache"] },
    SaltCase { tgt: Tgt::Str("web1 or"), tgt_type: "compound", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("and web1"), tgt_type: "compound", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("web1 web2"), tgt_type: "compound", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("( web1"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("web1 )"), tgt_type: "compound", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("not not web1"), tgt_type: "compound", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str(""), tgt_type: "compound", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("G@os:Debian or ( L@db1 and not ( I@env:dev or web2 ) )"), tgt_type: "compound", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("G@os:Debian and not ( L@db1 )"), tgt_type: "compound", delimiter: ":", master: &["web1"], missing: &[], minion: &["web1"] },
    SaltCase { tgt: Tgt::Str("not L@ghost"), tgt_type: "compound", delimiter: ":", master: &["db1", "DB2", "nocache", "web1", "web2"], missing: &[], minion: &["web1", "web2", "db1", "DB2", "nocache"] },
    SaltCase { tgt: Tgt::Str("L@ghost"), tgt_type: "compound", delimiter: ":", master: &[], missing: &["ghost"], minion: &[] },
    SaltCase { tgt: Tgt::Str("* or N@lst"), tgt_type: "compound", delimiter: ":", master: &["db1", "DB2", "nocache", "web1", "web2"], missing: &["ghost"], minion: &["web1", "web2", "db1", "DB2", "nocache"] },
    SaltCase { tgt: Tgt::List(&["web1", "or", "db1"]), tgt_type: "compound", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &["web1", "db1"] },
    SaltCase { tgt: Tgt::Str("webs"), tgt_type: "nodegroup", delimiter: ":", master: &["web1", "web2"], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("prod"), tgt_type: "nodegroup", delimiter: ":", master: &["db1", "web1"], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("mixed"), tgt_type: "nodegroup", delimiter: ":", master: &["db1", "web1", "web2"], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("lst"), tgt_type: "nodegroup", delimiter: ":", master: &["db1", "nocache"], missing: &["ghost"], minion: &[] },
    SaltCase { tgt: Tgt::Str("nope"), tgt_type: "nodegroup", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("role:frontend"), tgt_type: "compound_pillar_exact", delimiter: ":", master: &[], missing: &[], minion: &[] },
    SaltCase { tgt: Tgt::Str("I@role:front* or I@role:database"), tgt_type: "compound_pillar_exact", delimiter: ":", master: &["db1", "DB2"], missing: &[], minion: &[] },
];

#[test]
fn agrees_with_salt_on_both_sides() {
    for case in SALT_CASES {
        let tgt = case.tgt.value();
        let text = case.tgt.text();
        let label = format!("{:?} ({})", text, case.tgt_type);

        // Master side. Errors stand for Salt's empty answer.
        let got = master(&tgt, case.tgt_type, case.delimiter).unwrap_or_default();
        let mut got_minions = got.minions.clone();
        got_minions.sort_by_key(|m| m.to_lowercase());
        let mut want = strings(case.master);
        if case.tgt_type == "ipcidr" || text.contains("S@") {
            // Deliberate: no cache entry, no ipcidr match (Salt keeps such minions).
            want.retain(|m| m != "nocache");
        }
        if text == "( web1" {
            // Deliberate: unbalanced parentheses are an error (Salt's master auto-closes).
            want.clear();
        }
        assert_eq!(got_minions, want, "master minions for {label}");
        assert_eq!(
            got.missing,
            strings(case.missing),
            "master missing for {label}"
        );

        // Minion side. N@ is refused on a minion (Salt's minion expands it only if it
        // happens to have the master's nodegroups in its own config).
        if text.contains("N@") {
            assert!(
                matches!(
                    minions(&tgt, case.tgt_type, case.delimiter),
                    Err(TargetError::NodegroupOnMinion)
                ),
                "{label}"
            );
            continue;
        }
        let got = minions(&tgt, case.tgt_type, case.delimiter).unwrap_or_default();
        assert_eq!(got, strings(case.minion), "minion side for {label}");
    }
}

#[test]
fn observed_publishes_from_the_samples() {
    // samples/03_targeting_and_args.json: two minions m1 (role webm1) and m2 (role webm2).
    let grains_m1 = json(serde_json::json!({"role": "webm1", "ipv4": ["127.0.0.1"]}));
    let grains_m2 = json(serde_json::json!({"role": "webm2", "ipv4": ["127.0.0.1"]}));
    let ids = strings(&["m2", "m1"]);
    let lookup = |id: &str| match id {
        "m1" => Some((Some(grains_m1.clone()), Some(Value::Map(vec![])))),
        "m2" => Some((Some(grains_m2.clone()), Some(Value::Map(vec![])))),
        _ => None,
    };
    let ng = BTreeMap::new();
    let check = |tgt: Value, tgt_type: &str| {
        check_minions(&tgt, tgt_type, ":", &ids, &lookup, &ng).unwrap()
    };
    assert_eq!(check(s("m1"), "glob").minions, strings(&["m1"]));
    assert_eq!(check(s("role:webm1"), "grain").minions, strings(&["m1"]));
    assert_eq!(
        check(Value::Array(vec![s("m1"), s("m2")]), "list").minions,
        strings(&["m1", "m2"])
    );
    assert_eq!(check(s("m[12]"), "pcre").minions, strings(&["m1", "m2"]));
    let compound = check(s("G@role:webm2 or m1"), "compound");
    assert_eq!(compound.minions.len(), 2);
    assert_eq!(check(s("L@m1"), "compound").minions, strings(&["m1"]));
    assert_eq!(
        check(s("127.0.0.1"), "ipcidr").minions,
        strings(&["m1", "m2"])
    );
    assert!(check(s("foo:bar"), "pillar").minions.is_empty());
    assert!(check(s("nomatch"), "glob").minions.is_empty());

    let m1 = MinionData {
        id: "m1",
        grains: Some(&grains_m1),
        pillar: None,
    };
    let m2 = MinionData {
        id: "m2",
        grains: Some(&grains_m2),
        pillar: None,
    };
    let on =
        |me: &MinionData, tgt: Value, tgt_type: &str| matches(&tgt, tgt_type, ":", me).unwrap();
    assert!(on(&m1, s("role:webm1"), "grain"));
    assert!(!on(&m2, s("role:webm1"), "grain"));
    assert!(on(&m1, s("G@role:webm2 or m1"), "compound"));
    assert!(on(&m2, s("G@role:webm2 or m1"), "compound"));
    assert!(!on(&m2, s("L@m1"), "compound"));
    assert!(
        !on(&m1, s("foo:bar"), "pillar"),
        "unknown pillar never matches"
    );
}

#[test]
fn master_order_is_case_insensitive_sort_and_list_order() {
    let ids = strings(&["b", "C", ".hidden", "a", "B2"]);
    let lookup = |_: &str| None;
    let ng = BTreeMap::new();
    let got = check_minions(&s("*"), "glob", ":", &ids, &lookup, &ng).unwrap();
    assert_eq!(
        got.minions,
        strings(&["a", "b", "B2", "C"]),
        "dot files skipped"
    );
    let dup = strings(&["a", "A", "a"]);
    let got = check_minions(&s("*"), "glob", ":", &dup, &lookup, &ng).unwrap();
    assert_eq!(got.minions, strings(&["a", "A"]));
    let got = check_minions(&s("C,a,zz,a"), "list", ":", &ids, &lookup, &ng).unwrap();
    assert_eq!(
        got.minions,
        strings(&["C", "a"]),
        "target order, duplicates dropped"
    );
    assert_eq!(got.missing, strings(&["zz"]));
    let got = check_minions(&s(""), "list", ":", &ids, &lookup, &ng).unwrap();
    assert_eq!(got, Expected::default());
}

#[test]
fn uncached_minions_never_match_data_targets() {
    for (tgt, tgt_type) in [
        ("*:*", "grain"),
        ("*:*", "pillar"),
        ("0.0.0.0/0", "ipcidr"),
        ("G@*:*", "compound"),
        ("S@0.0.0.0/0", "compound"),
    ] {
        let got = master(&s(tgt), tgt_type, ":").unwrap();
        assert!(
            !got.minions.contains(&"nocache".to_owned()),
            "{tgt} {tgt_type}"
        );
    }
    // ... but "not" of a data word includes them, as in Salt's set algebra.
    let got = master(&s("not G@os:Debian"), "compound", ":").unwrap();
    assert!(got.minions.contains(&"nocache".to_owned()));
}

#[test]
fn minion_without_known_data() {
    let me = MinionData {
        id: "m1",
        grains: None,
        pillar: None,
    };
    assert!(!matches(&s("os:*"), "grain", ":", &me).unwrap());
    assert!(!matches(&s("k:*"), "pillar", ":", &me).unwrap());
    assert!(!matches(&s("127.0.0.1"), "ipcidr", ":", &me).unwrap());
    assert!(matches(&s("not G@os:*"), "compound", ":", &me).unwrap());
    assert!(matches(&s("m1"), "glob", ":", &me).unwrap());
}

#[test]
fn compound_precedence_not_and_or() {
    // Minion web1: a=web1 true, b=web2 false, c=G@os:Debian true.
    let on = |tgt: &str| minions(&s(tgt), "compound", ":").unwrap();
    // or binds loosest: "web2 and db1 or web1" == "(web2 and db1) or web1".
    assert_eq!(on("web2 and db1 or web1"), strings(&["web1"]));
    assert_eq!(on("web1 or web2 and db1"), strings(&["web1"]));
    assert_eq!(on("( web1 or web2 ) and db1"), Vec::<String>::new());
    // not binds tightest.
    assert_eq!(on("not web1 and web*"), strings(&["web2"]));
    assert_eq!(
        on("not ( web1 and web* )"),
        strings(&["web2", "db1", "DB2", "nocache"])
    );
    assert_eq!(on("web* or not *"), strings(&["web1", "web2"]));
    // "a not b" is "a and not b".
    assert_eq!(on("web* not web1"), strings(&["web2"]));
    assert_eq!(on("( web* ) not ( web1 )"), strings(&["web2"]));
    // Glued parentheses (Brine extension).
    assert_eq!(on("(web1 or web2) and G@os:Ubuntu"), strings(&["web2"]));
    assert_eq!(
        on("not (web1 or db1)"),
        strings(&["web2", "DB2", "nocache"])
    );
    assert_eq!(on("((G@os:Debian))"), strings(&["web1"]));
    assert_eq!(on("E@(web|db)1"), strings(&["web1", "db1"]));
    assert_eq!(on("(E@(web|db)1)"), strings(&["web1", "db1"]));
    // Master side agrees.
    let m = |tgt: &str| {
        let mut got = master(&s(tgt), "compound", ":").unwrap().minions;
        got.sort();
        got
    };
    assert_eq!(m("web2 and db1 or web1"), strings(&["web1"]));
    assert_eq!(m("(web1 or web2) and G@os:Ubuntu"), strings(&["web2"]));
    assert_eq!(m("web* not web1"), strings(&["web2"]));
}

#[test]
fn compound_syntax_errors_on_both_sides() {
    for bad in [
        "",
        "and web1",
        "web1 or",
        "web1 web2",
        "( web1",
        "web1 )",
        "not not web1",
        "( )",
        "web1 and ( or web2 )",
        "(web1",
        "web1)",
    ] {
        assert!(
            matches!(
                master(&s(bad), "compound", ":"),
                Err(TargetError::Compound { .. })
            ),
            "master {bad:?}"
        );
        assert!(
            matches!(
                minions(&s(bad), "compound", ":"),
                Err(TargetError::Compound { .. })
            ),
            "minion {bad:?}"
        );
    }
}

#[test]
fn typed_errors() {
    let me = MinionData {
        id: "m1",
        grains: None,
        pillar: None,
    };
    let on = |tgt: Value, tgt_type: &str| matches(&tgt, tgt_type, ":", &me);
    assert!(matches!(
        on(s("x"), "nonsense"),
        Err(TargetError::UnknownTgtType(_))
    ));
    assert!(matches!(
        on(s("x"), "compound_pillar_exact"),
        Err(TargetError::UnknownTgtType(_))
    ));
    assert!(matches!(
        on(s("web["), "pcre"),
        Err(TargetError::BadRegex { .. })
    ));
    assert!(matches!(
        on(s("(?<=a)b"), "pcre"),
        Err(TargetError::BadRegex { .. })
    ));
    assert!(matches!(
        on(s("os:deb[ian"), "grain_pcre"),
        Err(TargetError::BadRegex { .. })
    ));
    assert!(matches!(
        on(s("10.0.0.1/8"), "ipcidr"),
        Err(TargetError::BadCidr(_))
    ));
    assert!(matches!(
        on(s("grp"), "nodegroup"),
        Err(TargetError::NodegroupOnMinion)
    ));
    assert!(matches!(
        on(s("N@grp"), "compound"),
        Err(TargetError::NodegroupOnMinion)
    ));
    assert!(matches!(
        on(s("R@%cluster"), "compound"),
        Err(TargetError::UnsupportedEngine('R'))
    ));
    assert!(matches!(
        on(Value::from(3), "glob"),
        Err(TargetError::BadTarget { .. })
    ));
    assert!(matches!(
        on(Value::from(3), "list"),
        Err(TargetError::BadTarget { .. })
    ));
    assert!(matches!(
        matches(&s("os:x"), "grain", "", &me),
        Err(TargetError::EmptyDelimiter)
    ));

    let m = |tgt: Value, tgt_type: &str| master(&tgt, tgt_type, ":");
    assert!(matches!(
        m(s("x"), "nonsense"),
        Err(TargetError::UnknownTgtType(_))
    ));
    assert!(matches!(
        m(s("web["), "pcre"),
        Err(TargetError::BadRegex { .. })
    ));
    assert!(matches!(
        m(s("nope"), "nodegroup"),
        Err(TargetError::UnknownNodegroup(_))
    ));
    assert!(matches!(
        m(s("N@nope or web1"), "compound"),
        Err(TargetError::UnknownNodegroup(_))
    ));
    assert!(matches!(
        m(s("R@%c"), "compound"),
        Err(TargetError::UnsupportedEngine('R'))
    ));
    assert!(matches!(
        m(s("S@nonsense"), "compound"),
        Err(TargetError::BadCidr(_))
    ));
    assert!(matches!(
        m(Value::Nil, "glob"),
        Err(TargetError::BadTarget { .. })
    ));
}

#[test]
fn minion_list_matching_like_salt() {
    let on = |tgt: Value| {
        let me = MinionData {
            id: "m1",
            grains: None,
            pillar: None,
        };
        matches(&tgt, "list", ":", &me).unwrap()
    };
    assert!(on(s("m1")));
    assert!(on(s("m1,m2")));
    assert!(on(s("m0,m1,m2")));
    assert!(on(s("m0,m1")));
    assert!(!on(s("m10,m2")));
    assert!(!on(s("m0, m1")), "no trimming, like Salt");
    assert!(on(Value::Array(vec![s("m2"), s("m1")])));
    assert!(!on(Value::Array(vec![s("m10")])));
}

#[test]
fn pcre_is_anchored_at_start_only() {
    let on = |tgt: &str| minions(&s(tgt), "pcre", ":").unwrap();
    assert_eq!(on("web"), strings(&["web1", "web2"]));
    assert_eq!(on("eb"), Vec::<String>::new());
    assert_eq!(on("web1$"), strings(&["web1"]));
    assert_eq!(on(r"db1\Z"), strings(&["db1"]), "Python's \\Z works");
    assert_eq!(on("(?i)db"), strings(&["db1", "DB2"]));
    assert_eq!(
        on("a|web2"),
        strings(&["web2"]),
        "alternation stays anchored"
    );
}

#[test]
fn grain_delimiter_is_used_by_every_data_type() {
    for tgt_type in ["grain", "grain_pcre"] {
        let got = minions(&s("locale_info/defaultlanguage/en_US"), tgt_type, "/").unwrap();
        assert_eq!(got, strings(&["web1"]), "{tgt_type}");
    }
    for tgt_type in ["pillar", "pillar_pcre", "pillar_exact"] {
        let got = minions(&s("nested/k/v/deep"), tgt_type, "/").unwrap();
        assert_eq!(got, strings(&["web1"]), "{tgt_type}");
        let got = master(&s("nested/k/v/deep"), tgt_type, "/").unwrap();
        assert_eq!(got.minions, strings(&["web1"]), "{tgt_type}");
    }
    // Compound words ignore the publish delimiter and use their own (default ':').
    let got = minions(&s("G@locale_info:defaultlanguage:en_US"), "compound", "/").unwrap();
    assert_eq!(got, strings(&["web1"]));
}

#[test]
fn compound_pillar_exact_on_master() {
    let got = master(
        &s("I@role:front* or J@env:PROD"),
        "compound_pillar_exact",
        ":",
    )
    .unwrap();
    let mut got = got.minions;
    got.sort();
    assert_eq!(got, strings(&["db1", "web1"]));
}

#[test]
fn nodegroups_on_master() {
    let m = |tgt: &str, tgt_type: &str| {
        let mut e = master(&s(tgt), tgt_type, ":").unwrap();
        e.minions.sort();
        e
    };
    assert_eq!(m("webs", "nodegroup").minions, strings(&["web1", "web2"]));
    let lst = m("lst", "nodegroup");
    assert_eq!(lst.minions, strings(&["db1", "nocache"]));
    assert_eq!(lst.missing, strings(&["ghost"]));
    assert_eq!(
        m("(N@webs) and not web2", "compound").minions,
        strings(&["web1"])
    );
    // As in Salt, an L@ word right after "not" (here from an expansion) reports no missing ids.
    assert_eq!(m("not N@lst", "compound").missing, Vec::<String>::new());
    assert_eq!(m("N@lst or web1", "compound").missing, strings(&["ghost"]));
    assert_eq!(m("not L@ghost", "compound").missing, Vec::<String>::new());
}

#[test]
fn resolve_nodegroups_like_local_client() {
    let ng = nodegroups();
    let (tgt, tt) = resolve_nodegroups(&s("webs"), "nodegroup", &ng).unwrap();
    assert_eq!((tgt, tt.as_str()), (s("L@web1,web2"), "compound"));
    let (tgt, tt) = resolve_nodegroups(&s("N@mixed and not web2"), "compound", &ng).unwrap();
    assert_eq!(tt, "compound");
    assert_eq!(tgt, s("( L@web1,web2 or db1 ) and not web2"));
    let (tgt, tt) = resolve_nodegroups(&s("web*"), "glob", &ng).unwrap();
    assert_eq!((tgt, tt.as_str()), (s("web*"), "glob"));
    assert!(matches!(
        resolve_nodegroups(&s("nope"), "nodegroup", &ng),
        Err(TargetError::UnknownNodegroup(_))
    ));
    // The resolved target needs no nodegroups on the minion.
    let (tgt, _) = resolve_nodegroups(&s("N@webs or db1"), "compound", &ng).unwrap();
    assert_eq!(
        minions(&tgt, "compound", ":").unwrap(),
        strings(&["web1", "web2", "db1"])
    );
}

#[test]
fn lookup_is_called_once_per_minion() {
    use std::cell::RefCell;
    let calls = RefCell::new(Vec::new());
    let ids = strings(&["a", "b"]);
    let lookup = |id: &str| {
        calls.borrow_mut().push(id.to_owned());
        Some((Some(json(serde_json::json!({"os": "x"}))), None))
    };
    let ng = BTreeMap::new();
    let tgt = s("G@os:x and G@os:y or G@os:z or P@os:.");
    check_minions(&tgt, "compound", ":", &ids, &lookup, &ng).unwrap();
    assert_eq!(*calls.borrow(), strings(&["a", "b"]));
    calls.borrow_mut().clear();
    check_minions(&s("*"), "glob", ":", &ids, &lookup, &ng).unwrap();
    assert!(calls.borrow().is_empty(), "glob needs no cache");
}
