//! salt-api tokens (HS256 JWTs in `X-Auth-Token`, the `session_id` cookie or `token` of a
//! lowstate): any string is refused as invalid, expired or revoked, or accepted only when it
//! is a token this keeper signed. Never a panic.
#![no_main]
use std::path::PathBuf;
use std::sync::OnceLock;

use brine_api_input::tokens::TokenKeeper;
use libfuzzer_sys::fuzz_target;

fn keeper() -> &'static TokenKeeper {
    static K: OnceLock<TokenKeeper> = OnceLock::new();
    K.get_or_init(|| {
        // Under fuzz/target/, which git ignores; the same key file every run.
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/jwt-keeper");
        TokenKeeper::open(&dir.join("pki"), &dir.join("cache")).expect("a token keeper")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(claims) = keeper().verify(token) {
        assert_eq!(claims.jti.len(), 64, "an accepted token has a 64-hex id");
    }
});
