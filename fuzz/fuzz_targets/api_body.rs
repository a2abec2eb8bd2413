//! A salt-api request body as the server reads it: the first byte picks the Content-Type
//! (JSON, YAML, form, text/plain, none, other), the rest is the body. Parsing, the lowstate
//! chunks, the numeric fields checked into range, the `/hook` reading, and a chunk's way to
//! the master (JSON to msgpack and back) must answer or refuse, never panic.
#![no_main]
use brine_api_input::body::{hook_post, lowstates, parse_body};
use brine_api_input::fields::{bounded, MAX_SECONDS};
use brine_protocol::payload::{dumps, from_json, loads};
use libfuzzer_sys::fuzz_target;

const TYPES: &[Option<&str>] = &[
    Some("application/json"),
    Some("application/x-yaml"),
    Some("text/yaml; charset=utf-8"),
    Some("application/x-www-form-urlencoded"),
    Some("text/plain"),
    None,
    Some("application/octet-stream"),
];

const NUMBERS: &[&str] = &[
    "timeout",
    "gather_job_timeout",
    "batch_wait",
    "subset",
    "expire",
];

fuzz_target!(|input: &[u8]| {
    let Some((&pick, body)) = input.split_first() else {
        return;
    };
    let content_type = TYPES[pick as usize % TYPES.len()];
    let _ = hook_post(content_type, body);
    let Ok(value) = parse_body(content_type, body) else {
        return;
    };
    let Ok(chunks) = lowstates(value, 256) else {
        return;
    };
    for chunk in chunks {
        for key in NUMBERS {
            let _ = bounded(&chunk, key, MAX_SECONDS);
        }
        let packed = dumps(&from_json(&serde_json::Value::Object(chunk)));
        loads(&packed).expect("a chunk encoded by Brine decodes");
    }
});
