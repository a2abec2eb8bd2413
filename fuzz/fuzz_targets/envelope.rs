//! A request on the master's port: msgpack, then the envelope (`enc`, `load`, `version`, `id`)
//! parsed into its typed form, as the master parses every request; and the request server's
//! look at a clear request's `cmd` (which sorts sign-ins from the rest) on the raw bytes.
#![no_main]
use brine_protocol::loads::RequestEnvelope;
use brine_protocol::payload::{clear_cmd, loads_bounded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = clear_cmd(data);
    if let Ok(v) = loads_bounded(data) {
        let _ = RequestEnvelope::parse(v);
    }
});
