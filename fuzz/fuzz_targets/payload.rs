//! msgpack decoding: bounded (what the request port uses for unauthenticated peers) and plain.
//! Neither panics; whatever decodes encodes again and decodes to the same shape.
#![no_main]
use brine_protocol::payload::{dumps, loads, loads_bounded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = loads_bounded(data) {
        let again = dumps(&v);
        let back = loads(&again).expect("Brine's own encoding decodes");
        assert_eq!(dumps(&back), again);
    }
    let _ = loads(data);
});
