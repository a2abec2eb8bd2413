//! Brine's one YAML loader (Salt's `safe_load`: SLS and pillar files, config files, YAML
//! bodies): bounded in nodes (aliases expanded) and depth; what it loads, the one emitter
//! writes and the loader reads back.
#![no_main]
use brine_protocol::yaml::load::load;
use brine_protocol::yaml::{safe_dump, Style};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(v) = load(text) {
        let dumped = safe_dump(&v, Style::Block(2));
        let _ = load(&dumped);
    }
});
