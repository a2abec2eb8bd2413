//! Target expressions as a minion matches a publish: the first byte picks the `tgt_type`
//! (compound, pcre, ipcidr, grain, pillar, ...), the rest is the expression.
#![no_main]
use std::sync::OnceLock;

use brine_protocol::payload::{map, Value};
use brine_protocol::target::{matches, MinionData};
use libfuzzer_sys::fuzz_target;

const TYPES: &[&str] = &[
    "glob",
    "pcre",
    "list",
    "grain",
    "grain_pcre",
    "pillar",
    "pillar_pcre",
    "pillar_exact",
    "compound",
    "ipcidr",
    "nodegroup",
    "range",
    "data",
];

fn data() -> &'static (Value, Value) {
    static D: OnceLock<(Value, Value)> = OnceLock::new();
    D.get_or_init(|| {
        let grains = map(vec![
            ("os", Value::from("Debian")),
            (
                "ipv4",
                Value::Array(vec![Value::from("10.0.0.5"), Value::from("127.0.0.1")]),
            ),
            (
                "roles",
                Value::Array(vec![Value::from("web"), Value::from("db")]),
            ),
            ("nested", map(vec![("a", map(vec![("b", Value::from(1))]))])),
        ]);
        let pillar = map(vec![
            ("role", Value::from("web")),
            ("env", Value::from("prod")),
        ]);
        (grains, pillar)
    })
}

fuzz_target!(|input: &[u8]| {
    let Some((&pick, rest)) = input.split_first() else {
        return;
    };
    let Ok(expr) = std::str::from_utf8(rest) else {
        return;
    };
    let tgt_type = TYPES[pick as usize % TYPES.len()];
    let (grains, pillar) = data();
    let me = MinionData {
        id: "web1.example.com",
        grains: Some(grains),
        pillar: Some(pillar),
    };
    let _ = matches(&Value::from(expr), tgt_type, ":", &me);
    let list = Value::Array(expr.split(',').map(Value::from).collect());
    let _ = matches(&list, tgt_type, ":", &me);
});
