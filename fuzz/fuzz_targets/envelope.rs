//! A request on the master's port: msgpack, then the envelope (`enc`, `load`, `version`, `id`)
//! parsed into its typed form, as the master parses every request.
#![no_main]
use brine_protocol::loads::RequestEnvelope;
use brine_protocol::payload::loads_bounded;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = loads_bounded(data) {
        let _ = RequestEnvelope::parse(v);
    }
});
