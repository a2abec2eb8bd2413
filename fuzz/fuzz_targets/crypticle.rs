//! AES payloads (Salt's crypticle): HMAC check, decryption and the msgpack inside, with and
//! without a nonce, for bytes an attacker sends as a session's load.
#![no_main]
use std::sync::OnceLock;

use brine_protocol::crypt::Crypticle;
use libfuzzer_sys::fuzz_target;

fn crypticle() -> &'static Crypticle {
    static C: OnceLock<Crypticle> = OnceLock::new();
    C.get_or_init(|| Crypticle::new(&Crypticle::generate_key_string()).expect("a fresh key"))
}

fuzz_target!(|data: &[u8]| {
    let c = crypticle();
    let _ = c.decrypt(data);
    let _ = c.loads(data, None);
    let _ = c.loads(data, Some("0123456789abcdef0123456789abcdef"));
    // A valid encryption of the input decrypts back to it.
    let sealed = c.encrypt(data);
    assert_eq!(c.decrypt(&sealed).expect("own ciphertext"), data);
});
