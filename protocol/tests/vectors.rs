//! Reproduce the vectors generated with Salt 3007.15's own code
//! (`shared/reference/vectors/*.json`): payload encoding byte for byte,
//! Crypticle, RSA, a live master/minion exchange and the master's edge replies.
//!
//! The vectors directory defaults to `<repo>/../shared/reference/vectors/`;
//! `BRINE_VECTORS_DIR` overrides it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use brine_protocol::crypt::{
    clean_key, hash_hex, load_or_generate_keypair, pem_finger, x931_encode, CryptError, Crypticle,
    EncAlgo, HashType, PrivateKey, PublicKey, SerialGuard, SigAlgo,
};
use brine_protocol::payload::{self, PayloadError, Value};
use serde_json::{json, Value as J};

fn vectors_dir() -> PathBuf {
    std::env::var_os("BRINE_VECTORS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/reference/vectors/"
            ))
        })
}

fn load_json(name: &str) -> J {
    let path = vectors_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("vector file is JSON")
}

fn unhex(s: &J) -> Vec<u8> {
    hex::decode(s.as_str().expect("hex string")).expect("valid hex")
}

fn s(j: &J) -> &str {
    j.as_str().expect("string")
}

/// Bytes of a decoded raw (text or binary).
fn raw(v: &Value) -> Vec<u8> {
    match v {
        Value::String(t) => t.as_bytes().to_vec(),
        Value::Binary(b) => b.clone(),
        other => panic!("not a raw: {other:?}"),
    }
}

fn field(v: &Value, key: &str) -> Vec<u8> {
    raw(payload::get(v, key).unwrap_or_else(|| panic!("missing {key} in {v:?}")))
}

/// The tagged JSON form used by the vector files.
fn tagged(v: &Value) -> J {
    match v {
        Value::Nil => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Integer(i) => match i.as_u64() {
            Some(u) => json!(u),
            None => json!(i.as_i64().expect("integer")),
        },
        Value::F32(f) => json!({"$float": format!("{:?}", f64::from(*f))}),
        Value::F64(f) => json!({"$float": format!("{f:?}")}),
        Value::String(t) => match t.as_str() {
            Some(t) => J::String(t.to_string()),
            None => json!({"$bytes_hex": hex::encode(t.as_bytes())}),
        },
        Value::Binary(b) => json!({"$bytes_hex": hex::encode(b)}),
        Value::Array(items) => J::Array(items.iter().map(tagged).collect()),
        Value::Map(pairs) => {
            if pairs.iter().all(|(k, _)| k.as_str().is_some()) {
                J::Object(
                    pairs
                        .iter()
                        .map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), tagged(v)))
                        .collect(),
                )
            } else {
                json!({"$map": pairs.iter().map(|(k, v)| json!([tagged(k), tagged(v)])).collect::<Vec<_>>()})
            }
        }
        Value::Ext(78, data) => {
            let t = std::str::from_utf8(data).expect("datetime text");
            json!({"$datetime": format!("{}-{}-{}{}", &t[..4], &t[4..6], &t[6..8], &t[8..])})
        }
        Value::Ext(ty, data) => json!({"$ext": [ty, hex::encode(data)]}),
    }
}

/// Order-sensitive JSON equality.
fn assert_same(got: &J, want: &J, ctx: &str) {
    assert_eq!(
        serde_json::to_string(got).unwrap(),
        serde_json::to_string(want).unwrap(),
        "{ctx}"
    );
}

// ---------------------------------------------------------------------------
// payload.json

#[test]
fn payload_vectors() {
    let doc = load_json("payload.json");
    let cases = doc["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 19);
    for case in cases {
        let name = s(&case["name"]);
        let wire = unhex(&case["dumps_hex"]);
        let binw = unhex(&case["dumps_use_bin_type_true_hex"]);

        // loads of both encodings gives what salt.payload.loads gives
        let v = payload::loads(&wire).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_same(&tagged(&v), &case["loads_result"], name);
        let vb = payload::loads(&binw).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_same(&tagged(&vb), &case["loads_result"], name);

        // what loads returns re-encodes to the same wire bytes
        assert_eq!(
            hex::encode(payload::dumps(&v)),
            s(&case["dumps_hex"]),
            "{name}"
        );

        // the typed input (str vs bytes kept, as a strict decoder of the
        // bin-type variant sees it) encodes byte for byte in both modes
        let typed = rmpv::decode::read_value(&mut binw.as_slice()).expect("strict decode");
        assert_eq!(
            hex::encode(payload::dumps(&typed)),
            s(&case["dumps_hex"]),
            "{name}"
        );
        assert_eq!(
            hex::encode(payload::dumps_bin(&typed)),
            s(&case["dumps_use_bin_type_true_hex"]),
            "{name}"
        );

        // streaming: every strict prefix is Incomplete, extra bytes are left alone
        assert_eq!(payload::loads_prefix(&wire), Ok((v.clone(), wire.len())));
        for cut in 0..wire.len() {
            assert_eq!(
                payload::loads_prefix(&wire[..cut]),
                Err(PayloadError::Incomplete),
                "{name} cut at {cut}"
            );
            assert!(payload::loads(&wire[..cut]).is_err(), "{name} cut at {cut}");
        }
        let mut longer = wire.clone();
        longer.extend_from_slice(&[0xc0, 0x01]);
        assert_eq!(payload::loads_prefix(&longer), Ok((v.clone(), wire.len())));
        assert_eq!(payload::loads(&longer), Err(PayloadError::TrailingBytes(2)));
    }
}

#[test]
fn payload_wire_never_uses_str8_or_bin() {
    for len in [0usize, 31, 32, 255, 256, 65535, 65536] {
        let text = Value::from("a".repeat(len).as_str());
        let bin = Value::Binary(vec![0xfe; len]);
        for v in [&text, &bin] {
            let b = payload::dumps(v);
            let want = match len {
                0..=31 => 0xa0 | len as u8,
                32..=65535 => 0xda,
                _ => 0xdb,
            };
            assert_eq!(b[0], want, "len {len}");
            assert_eq!(raw(&payload::loads(&b).unwrap()), raw(v), "len {len}");
        }
        let b = payload::dumps_bin(&bin);
        let want = match len {
            0..=255 => 0xc4,
            256..=65535 => 0xc5,
            _ => 0xc6,
        };
        assert_eq!(b[0], want, "len {len}");
    }
}

#[test]
fn payload_hostile_input_fails_fast() {
    let hostile: Vec<Vec<u8>> = vec![
        hex::decode("ddffffffff").unwrap(),
        hex::decode("dfffffffff").unwrap(),
        hex::decode("dbffffffff").unwrap(),
        hex::decode("c6ffffffff61").unwrap(),
        hex::decode("c9ffffffff01").unwrap(),
        hex::decode("dcffff").unwrap(),
        // an array of 2^32-1 nils with only a few present
        [hex::decode("ddffffffff").unwrap(), vec![0xc0; 1000]].concat(),
        // a map whose every value is another huge map header
        [vec![0x81, 0xa1, b'k'], hex::decode("dfffffffff").unwrap()].concat(),
        vec![0x91; 1_000_000],
        [0x81, 0xc0].repeat(100_000),
        [0xdd, 0x00, 0x00, 0x00, 0x01].repeat(50_000),
    ];
    for data in &hostile {
        let start = Instant::now();
        let r = payload::loads(data);
        assert!(r.is_err(), "{:?}", &data[..data.len().min(8)]);
        assert!(start.elapsed() < Duration::from_secs(2));
    }
    assert_eq!(payload::loads(&[0x91; 300]), Err(PayloadError::TooDeep));
    assert_eq!(payload::loads(&[0xc1]), Err(PayloadError::BadMarker(0xc1)));
    assert_eq!(payload::loads(&[]), Err(PayloadError::Empty));
}

#[test]
fn payload_mutated_vectors_never_panic() {
    let doc = load_json("payload.json");
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for case in doc["cases"].as_array().unwrap() {
        let wire = unhex(&case["dumps_hex"]);
        for _ in 0..300 {
            let mut m = wire.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() % m.len() as u64) as usize;
                m[i] = next() as u8;
            }
            // any result is fine as long as it returns; a success re-encodes and decodes equal
            if let Ok(v) = payload::loads(&m) {
                assert_eq!(payload::loads(&payload::dumps(&v)).unwrap(), v);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// crypticle.json

#[test]
fn crypticle_vectors() {
    let doc = load_json("crypticle.json");
    let key_string = s(&doc["key_string"]);
    let c = Crypticle::new(key_string).unwrap();
    assert_eq!(c.key_string(), key_string);
    let iv: [u8; 16] = unhex(&doc["iv_hex"]).try_into().unwrap();
    let mut seen = 0;
    for case in doc["cases"].as_array().unwrap() {
        let name = s(&case["name"]);
        let ct = unhex(&case["ciphertext_hex"]);
        match s(&case["kind"]) {
            "encrypt" => {
                let pt = unhex(&case["plaintext_hex"]);
                assert_eq!(c.encrypt_with_iv(&pt, &iv), ct, "{name}");
                assert_eq!(c.decrypt(&ct).unwrap(), pt, "{name}");
                assert_eq!(c.decrypt(&c.encrypt(&pt)).unwrap(), pt, "{name}");
            }
            "dumps" => {
                let obj = payload::from_json(&case["object"]);
                let nonce = case.get("nonce").and_then(J::as_str);
                let mut inner = b"pickle::".to_vec();
                inner.extend_from_slice(nonce.unwrap_or("").as_bytes());
                inner.extend_from_slice(&payload::dumps(&obj));
                if let Some(h) = case.get("inner_plaintext_hex") {
                    assert_eq!(inner, unhex(h), "{name}");
                }
                assert_eq!(c.encrypt_with_iv(&inner, &iv), ct, "{name}");
                assert_eq!(c.decrypt(&ct).unwrap(), inner, "{name}");
                let got = c.loads(&ct, nonce).unwrap().expect("pickle prefix");
                assert_eq!(got, obj, "{name}");
                // random-IV dumps round trip
                assert_eq!(
                    c.loads(&c.dumps(&obj, nonce), nonce).unwrap(),
                    Some(obj.clone())
                );
                if let Some(n) = nonce {
                    let wrong: String = n.chars().rev().collect();
                    assert!(matches!(
                        c.loads(&ct, Some(&wrong)),
                        Err(CryptError::NonceMismatch { .. })
                    ));
                }
                if payload::get(&obj, "serial").is_some() {
                    let mut first = got.clone();
                    let mut guard = SerialGuard::default();
                    assert!(guard.accept(&mut first), "{name}");
                    assert!(payload::get(&first, "serial").is_none());
                    let mut stripped = obj.clone();
                    payload::remove(&mut stripped, "serial");
                    assert_eq!(first, stripped);
                    // the same serial again is dropped
                    let mut replay = c.loads(&ct, None).unwrap().unwrap();
                    assert!(!guard.accept(&mut replay), "{name}");
                    assert_eq!(guard.last(), 5);
                }
            }
            "decrypt_must_fail" => {
                assert!(matches!(c.decrypt(&ct), Err(CryptError::Authentication)));
                assert!(c.loads(&ct, None).is_err());
            }
            "loads_returns_empty_map" => {
                assert_eq!(c.loads(&ct, None).unwrap(), None, "{name}");
            }
            other => panic!("unknown kind {other}"),
        }
        seen += 1;
    }
    assert_eq!(seen, 8);
}

#[test]
fn crypticle_rejects_tampering_anywhere() {
    let c = Crypticle::new(&Crypticle::generate_key_string()).unwrap();
    let ct = c.dumps(&payload::map(vec![("a", Value::from("b"))]), None);
    for i in 0..ct.len() {
        let mut bad = ct.clone();
        bad[i] ^= 0x80;
        assert!(c.decrypt(&bad).is_err(), "byte {i}");
    }
    assert!(c.decrypt(&ct[..ct.len() - 1]).is_err());
    assert!(c.decrypt(&ct[1..]).is_err());
}

// ---------------------------------------------------------------------------
// rsa.json

#[test]
fn rsa_vectors() {
    use rsa::pkcs1::EncodeRsaPublicKey;
    use rsa::pkcs8::EncodePrivateKey;

    let doc = load_json("rsa.json");
    let private_pem = s(&doc["private_pem"]);
    let public_pem = s(&doc["public_pem"]);
    let key = PrivateKey::from_pem(private_pem).unwrap();
    let public = PublicKey::from_pem(public_pem).unwrap();
    assert_eq!(key.to_pem(), private_pem);
    assert_eq!(public.to_pem(), public_pem);
    assert!(key.public() == public);
    assert_eq!(key.size(), 256);

    // clean_key form, CRLF form, PKCS#8 and PKCS#1 public forms
    assert_eq!(clean_key(public_pem), s(&doc["public_clean_key"]));
    assert!(PublicKey::from_pem(s(&doc["public_clean_key"])).unwrap() == public);
    assert!(PublicKey::from_pem(&public_pem.replace('\n', "\r\n")).unwrap() == public);
    let raw_key =
        <rsa::RsaPrivateKey as rsa::pkcs1::DecodeRsaPrivateKey>::from_pkcs1_pem(private_pem)
            .unwrap();
    let pkcs8 = raw_key.to_pkcs8_pem(rsa::pkcs8::LineEnding::LF).unwrap();
    assert!(pkcs8.starts_with("-----BEGIN PRIVATE KEY-----"));
    assert_eq!(PrivateKey::from_pem(&pkcs8).unwrap().to_pem(), private_pem);
    let pkcs1_pub = raw_key
        .to_public_key()
        .to_pkcs1_pem(rsa::pkcs8::LineEnding::LF)
        .unwrap();
    assert!(PublicKey::from_pem(&pkcs1_pub).unwrap() == public);
    assert!(PublicKey::from_pem(private_pem).is_err());
    assert!(PrivateKey::from_pem(public_pem).is_err());
    assert!(
        PublicKey::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----").is_err()
    );
    assert!(PrivateKey::from_pem("garbage").is_err());

    let mut n = 0;
    for case in doc["oaep_encryptions"].as_array().unwrap() {
        let algo = EncAlgo::parse(s(&case["algorithm"])).unwrap();
        let pt = unhex(&case["plaintext_hex"]);
        let ct = unhex(&case["ciphertext_hex"]);
        assert_eq!(key.decrypt(&ct, algo).unwrap(), pt);
        let other = match algo {
            EncAlgo::OaepSha1 => EncAlgo::OaepSha224,
            EncAlgo::OaepSha224 => EncAlgo::OaepSha1,
        };
        assert!(key.decrypt(&ct, other).is_err());
        let mut bad = ct.clone();
        bad[100] ^= 1;
        assert!(key.decrypt(&bad, algo).is_err());
        let fresh = public.encrypt(&pt, algo).unwrap();
        assert_eq!(fresh.len(), 256);
        assert_ne!(fresh, ct, "OAEP is randomised");
        assert_eq!(key.decrypt(&fresh, algo).unwrap(), pt);
        n += 1;
    }
    assert_eq!(n, 4);

    for case in doc["pkcs1v15_signatures"].as_array().unwrap() {
        let algo = SigAlgo::parse(s(&case["algorithm"])).unwrap();
        let msg = unhex(&case["message_hex"]);
        let sig = unhex(&case["signature_hex"]);
        assert_eq!(hex::encode(key.sign(&msg, algo)), s(&case["signature_hex"]));
        assert!(public.verify(&msg, &sig, algo));
        let other = match algo {
            SigAlgo::Pkcs1v15Sha1 => SigAlgo::Pkcs1v15Sha224,
            SigAlgo::Pkcs1v15Sha224 => SigAlgo::Pkcs1v15Sha1,
        };
        assert!(!public.verify(&msg, &sig, other));
        let mut bad = sig.clone();
        bad[0] ^= 1;
        assert!(!public.verify(&msg, &bad, algo));
        assert!(!public.verify(b"other message", &sig, algo));
        assert!(!public.verify(&msg, &sig[1..], algo));
        assert!(!public.verify(&msg, &[], algo));
    }

    for case in doc["x931_private_encrypt"].as_array().unwrap() {
        let label = s(&case["label"]);
        let msg = unhex(&case["message_hex"]);
        assert_eq!(
            hex::encode(x931_encode(&msg, 256).unwrap()),
            s(&case["encoded_message_hex"]),
            "{label}"
        );
        let sig = key.x931_encrypt(&msg).unwrap();
        assert_eq!(hex::encode(&sig), s(&case["signature_hex"]), "{label}");
        assert_eq!(public.x931_decrypt(&sig).unwrap(), msg, "{label}");
        let mut bad = sig.clone();
        bad[10] ^= 1;
        assert!(public.x931_decrypt(&bad).map_or(true, |m| m != msg));
        assert!(public.x931_decrypt(&[0xff; 257]).is_err());
        assert!(public.x931_decrypt(&[0xff; 256]).is_err());
    }
    assert!(key.x931_encrypt(&[0u8; 255]).is_err());

    assert_eq!(
        pem_finger(public_pem, HashType::Sha256),
        s(&doc["fingerprint_sha256"])
    );
    assert_eq!(
        pem_finger(public_pem, HashType::Md5),
        s(&doc["fingerprint_md5"])
    );
    assert_eq!(
        pem_finger(s(&doc["public_clean_key"]), HashType::Sha256),
        s(&doc["fingerprint_sha256"])
    );
    assert_eq!(
        pem_finger(&public_pem.replace('\n', "\r\n"), HashType::Sha256),
        s(&doc["fingerprint_sha256"])
    );
    assert_eq!(s(&doc["fingerprint_sha256"]).len(), 95);
}

#[test]
fn rsa_generated_keys_round_trip() {
    let key = PrivateKey::generate(1024).unwrap();
    let public = key.public();
    assert!(PrivateKey::from_pem(&key.to_pem()).unwrap().public() == public);
    assert!(PublicKey::from_pem(&public.to_pem()).unwrap() == public);
    assert!(PublicKey::from_pem(&clean_key(&public.to_pem())).unwrap() == public);
    for algo in [EncAlgo::OaepSha1, EncAlgo::OaepSha224] {
        let ct = public.encrypt(b"secret", algo).unwrap();
        assert_eq!(key.decrypt(&ct, algo).unwrap(), b"secret");
    }
    for algo in [SigAlgo::Pkcs1v15Sha1, SigAlgo::Pkcs1v15Sha224] {
        let sig = key.sign(b"data", algo);
        assert!(public.verify(b"data", &sig, algo));
        assert!(!public.verify(b"datb", &sig, algo));
    }
    // X9.31 over many messages exercises both the s and n - s branches
    for i in 0..16u8 {
        let msg = vec![i; usize::from(i) + 1];
        let sig = key.x931_encrypt(&msg).unwrap();
        assert_eq!(sig.len(), 128);
        assert_eq!(public.x931_decrypt(&sig).unwrap(), msg);
    }
    let other = PrivateKey::generate(1024).unwrap();
    let sig = other.x931_encrypt(b"salt").unwrap();
    assert!(public.x931_decrypt(&sig).map_or(true, |m| m != b"salt"));
    assert!(!public.verify(
        b"data",
        &other.sign(b"data", SigAlgo::Pkcs1v15Sha1),
        SigAlgo::Pkcs1v15Sha1
    ));
    assert!(PrivateKey::generate(512).is_err());
}

#[test]
fn keypair_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let (key, public) = load_or_generate_keypair(&pki, "master", 1024).unwrap();
    let pem = std::fs::read_to_string(pki.join("master.pem")).unwrap();
    let pubtext = std::fs::read_to_string(pki.join("master.pub")).unwrap();
    assert!(pem.starts_with("-----BEGIN RSA PRIVATE KEY-----\n") && pem.ends_with("-----\n"));
    assert_eq!(pubtext, public.to_pem());
    let mode = |p: &str| std::fs::metadata(pki.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("master.pem"), 0o400);
    assert_eq!(mode("master.pub"), 0o644);
    // second call loads the same pair; a missing .pub is rewritten
    std::fs::remove_file(pki.join("master.pub")).unwrap();
    let (key2, public2) = load_or_generate_keypair(&pki, "master", 1024).unwrap();
    assert_eq!(key2.to_pem(), key.to_pem());
    assert!(public2 == public);
    assert_eq!(
        std::fs::read_to_string(pki.join("master.pub")).unwrap(),
        pubtext
    );
    // a corrupt key file is an error, not a new key
    std::fs::write(pki.join("bad.pem"), "nope").unwrap();
    assert!(load_or_generate_keypair(&pki, "bad", 1024).is_err());
}

#[test]
fn hashes() {
    assert_eq!(
        hash_hex(b"", HashType::Sha256),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        hash_hex(b"abc", HashType::Sha1),
        "a9993e364706816aba3e25717850c26c9cd0d89d"
    );
    assert_eq!(
        hash_hex(b"abc", HashType::Sha224),
        "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"
    );
    assert_eq!(hash_hex(b"abc", HashType::Sha384).len(), 96);
    assert_eq!(hash_hex(b"abc", HashType::Sha512).len(), 128);
    assert_eq!(
        hash_hex(b"abc", HashType::Md5),
        "900150983cd24fb0d6963f7d28e17f72"
    );
}

// ---------------------------------------------------------------------------
// live_exchange.json

struct Keys {
    master: PrivateKey,
    master_pub: PublicKey,
    minion: PrivateKey,
    minion_pub: PublicKey,
    session: Crypticle,
}

fn live_keys(doc: &J) -> Keys {
    let k = &doc["keys"];
    let master = PrivateKey::from_pem(s(&k["master_pem"])).unwrap();
    let master_pub = PublicKey::from_pem(s(&k["master_pub"])).unwrap();
    let minion = PrivateKey::from_pem(s(&k["minion_pem"])).unwrap();
    let minion_pub = PublicKey::from_pem(s(&k["minion_pub"])).unwrap();
    assert!(master.public() == master_pub);
    assert!(minion.public() == minion_pub);
    assert_eq!(master.to_pem(), s(&k["master_pem"]));
    assert_eq!(master_pub.to_pem(), s(&k["master_pub"]));
    assert_eq!(minion.to_pem(), s(&k["minion_pem"]));
    assert_eq!(minion_pub.to_pem(), s(&k["minion_pub"]));
    assert_eq!(
        clean_key(s(&k["master_pub"])),
        s(&k["minion_master_pub_as_written_by_minion"])
    );
    let session = Crypticle::new(s(&k["session_key_for_minion"])).unwrap();
    assert_eq!(s(&k["root_key"]).len(), 76);
    Crypticle::new(s(&k["root_key"])).unwrap();
    Keys {
        master,
        master_pub,
        minion,
        minion_pub,
        session,
    }
}

#[derive(Default)]
struct Counts {
    frames: usize,
    signed_auth: usize,
    full_auth: usize,
    tokens: usize,
    aes_requests: usize,
    aes_replies: usize,
    pillars: usize,
    publishes: usize,
}

#[test]
fn live_exchange_vectors() {
    let doc = load_json("live_exchange.json");
    let keys = live_keys(&doc);
    let mut counts = Counts::default();

    for list in ["exchanges", "exchanges_after_master_restart"] {
        let mut aes: Option<Crypticle> = None;
        let mut serials = SerialGuard::default();
        let mut last_nonce: Option<String> = None;
        let mut last_auth_nonce: Option<String> = None;

        for (i, e) in doc[list].as_array().unwrap().iter().enumerate() {
            let ctx = format!("{list}[{i}]");
            let env = &e["envelope"];
            let Some(raw_hex) = e["raw_hex"].as_str() else {
                // grains were removed from this request: only its decoded form is kept
                if let Some(nonce) = e["decrypted_load"]["nonce"].as_str() {
                    last_nonce = Some(nonce.to_string());
                }
                continue;
            };
            counts.frames += 1;
            let frame = hex::decode(raw_hex).unwrap();
            let v = payload::loads(&frame).unwrap();
            assert_same(&tagged(&v), env, &ctx);
            assert_eq!(payload::dumps(&v), frame, "{ctx}: re-encoding differs");

            if let Some(load) = payload::get(&v, "load") {
                if payload::get_str(load, "cmd") == Some("_auth") {
                    last_auth_nonce = payload::get_str(load, "nonce").map(str::to_string);
                }
            }

            // sign-in replies: signed raw load
            if let Some(want) = e.get("signed_load_decoded") {
                let load = field(&v, "load");
                let sig = field(&v, "sig");
                assert!(
                    keys.master_pub.verify(&load, &sig, SigAlgo::Pkcs1v15Sha1),
                    "{ctx}"
                );
                assert_eq!(keys.master.sign(&load, SigAlgo::Pkcs1v15Sha1), sig, "{ctx}");
                assert!(!keys.minion_pub.verify(&load, &sig, SigAlgo::Pkcs1v15Sha1));
                let inner = payload::loads(&load).unwrap();
                assert_same(&tagged(&inner), want, &ctx);
                assert_eq!(payload::dumps(&inner), load, "{ctx}");
                assert_eq!(
                    payload::get_str(&inner, "nonce"),
                    last_auth_nonce.as_deref(),
                    "{ctx}"
                );
                counts.signed_auth += 1;

                if let Some(aes_text) = e.get("aes_decrypted") {
                    let aes_key = keys
                        .minion
                        .decrypt(&field(&inner, "aes"), EncAlgo::OaepSha1)
                        .unwrap();
                    assert_eq!(aes_key, s(aes_text).as_bytes(), "{ctx}");
                    let session = keys
                        .minion
                        .decrypt(&field(&inner, "session"), EncAlgo::OaepSha1)
                        .unwrap();
                    assert_eq!(session, s(&e["session_decrypted"]).as_bytes(), "{ctx}");
                    assert_eq!(session, keys.session.key_string().as_bytes());
                    // auth sig = X9.31(master.pem, sha256 hex of the aes key string)
                    let digest = hash_hex(&aes_key, HashType::Sha256);
                    let auth_sig = field(&inner, "sig");
                    assert_eq!(
                        keys.master_pub.x931_decrypt(&auth_sig).unwrap(),
                        digest.as_bytes()
                    );
                    assert_eq!(
                        keys.master.x931_encrypt(digest.as_bytes()).unwrap(),
                        auth_sig
                    );
                    assert_eq!(
                        payload::get_str(&inner, "pub_key"),
                        Some(clean_key(s(&doc["keys"]["master_pub"])).as_str())
                    );
                    aes = Some(Crypticle::new(s(aes_text)).unwrap());
                    serials = SerialGuard::default();
                    counts.full_auth += 1;
                }
                if let Some(token) = e.get("token_decrypted") {
                    let t = keys
                        .minion
                        .decrypt(&field(&inner, "token"), EncAlgo::OaepSha1)
                        .unwrap();
                    assert_eq!(t, s(token).as_bytes(), "{ctx}");
                    counts.tokens += 1;
                }
            }

            if let Some(token) = e.get("token_decrypted_with_master_priv") {
                let load = payload::get(&v, "load").unwrap();
                let t = keys
                    .master
                    .decrypt(&field(load, "token"), EncAlgo::OaepSha1)
                    .unwrap();
                assert_eq!(t, s(token).as_bytes(), "{ctx}");
                counts.tokens += 1;
            }

            // aes requests (minion -> master), session key, tok
            if let Some(prefix) = e.get("decrypted_with_session_key_plaintext_prefix_hex") {
                let ct = field(&v, "load");
                let plain = keys.session.decrypt(&ct).unwrap();
                assert!(plain.starts_with(&unhex(prefix)), "{ctx}");
                let inner = keys.session.loads(&ct, None).unwrap().expect("pickle");
                assert_same(&tagged(&inner), &e["decrypted_load"], &ctx);
                let tok = field(&inner, "tok");
                assert_eq!(
                    keys.minion_pub.x931_decrypt(&tok).unwrap(),
                    b"salt",
                    "{ctx}"
                );
                assert_eq!(keys.minion.x931_encrypt(b"salt").unwrap(), tok, "{ctx}");
                assert!(keys
                    .master_pub
                    .x931_decrypt(&tok)
                    .map_or(true, |m| m != b"salt"));
                assert_eq!(payload::get_str(&v, "id"), payload::get_str(&inner, "id"));
                last_nonce = payload::get_str(&inner, "nonce").map(str::to_string);
                counts.aes_requests += 1;
            }

            // encrypted replies: bare ciphertext with the request nonce inside
            if let Some(head) = e.get("plaintext_head_hex") {
                let ct = raw(&v);
                let plain = keys.session.decrypt(&ct).unwrap();
                assert!(plain.starts_with(&unhex(head)), "{ctx}");
                let nonce = last_nonce.as_deref().expect("a request came first");
                let got = keys
                    .session
                    .loads(&ct, Some(nonce))
                    .unwrap()
                    .expect("pickle");
                assert_same(&tagged(&got), &e["decrypted_with_session_key"], &ctx);
                assert!(matches!(
                    keys.session
                        .loads(&ct, Some("00000000000000000000000000000000")),
                    Err(CryptError::NonceMismatch { .. })
                ));
                counts.aes_replies += 1;
            }

            // send_private pillar reply
            if let Some(k) = e.get("private_key_decrypted") {
                let key_ct = field(&v, "key");
                let pk = keys.minion.decrypt(&key_ct, EncAlgo::OaepSha1).unwrap();
                assert_eq!(pk, s(k).as_bytes(), "{ctx}");
                let pc = Crypticle::new(s(k)).unwrap();
                let outer = pc
                    .loads(&field(&v, "pillar"), None)
                    .unwrap()
                    .expect("pickle");
                let data = field(&outer, "data");
                let sig = field(&outer, "sig");
                assert!(
                    keys.master_pub.verify(&data, &sig, SigAlgo::Pkcs1v15Sha1),
                    "{ctx}"
                );
                assert_eq!(keys.master.sign(&data, SigAlgo::Pkcs1v15Sha1), sig);
                let signed = payload::loads(&data).unwrap();
                assert_same(&tagged(&signed), &e["pillar_signed_data"], &ctx);
                assert_eq!(payload::dumps(&signed), data);
                assert_eq!(field(&signed, "key"), key_ct);
                assert_eq!(payload::get_str(&signed, "nonce"), last_nonce.as_deref());
                counts.pillars += 1;
            }

            // job publishes
            if e.get("sig_verified_with_master_pub").is_some() {
                let load = field(&v, "load");
                let sig = field(&v, "sig");
                let algo = SigAlgo::parse(payload::get_str(&v, "sig_algo").unwrap()).unwrap();
                assert!(keys.master_pub.verify(&load, &sig, algo), "{ctx}");
                assert_eq!(keys.master.sign(&load, algo), sig);
                let c = aes.as_ref().expect("signed in before the publish");
                assert_eq!(
                    c.decrypt(&load).unwrap(),
                    unhex(&e["decrypted_plaintext_hex"])
                );
                assert!(
                    keys.session.decrypt(&load).is_err(),
                    "publishes use the AES key"
                );
                let mut job = c.loads(&load, None).unwrap().expect("pickle");
                assert_same(&tagged(&job), &e["decrypted_load"], &ctx);
                let serial = payload::get(&job, "serial").cloned().expect("serial");
                assert!(serials.accept(&mut job), "{ctx}");
                assert!(payload::get(&job, "serial").is_none());
                assert_eq!(Some(serials.last()), serial.as_i64().map(i128::from));
                let mut replay = c.loads(&load, None).unwrap().unwrap();
                assert!(!serials.accept(&mut replay), "{ctx}: replay accepted");
                counts.publishes += 1;
            }
        }
    }
    assert_eq!(counts.frames, 68);
    assert!(counts.signed_auth >= 10);
    assert_eq!(counts.full_auth, 2);
    assert_eq!(counts.tokens, 2);
    assert!(counts.aes_requests >= 6);
    assert!(counts.aes_replies >= 6);
    assert_eq!(counts.pillars, 2);
    assert_eq!(counts.publishes, 4);
}

// ---------------------------------------------------------------------------
// master_edge_replies.json

#[test]
fn master_edge_replies() {
    let doc = load_json("master_edge_replies.json");
    let master_pub =
        PublicKey::from_pem(s(&load_json("live_exchange.json")["keys"]["master_pub"])).unwrap();
    let mut n = 0;
    for case in doc["cases"].as_array().unwrap() {
        let name = s(&case["name"]);
        let request = unhex(&case["request_hex"]);
        let reply = unhex(&case["reply_hex"]);
        let req = payload::loads(&request).unwrap();
        assert_eq!(payload::dumps(&req), request, "{name}");
        let rep = payload::loads(&reply).unwrap();
        assert_eq!(payload::dumps(&rep), reply, "{name}");
        let repr = s(&case["reply_repr"]);
        match repr {
            "'bad load'" => assert_eq!(rep, Value::from("bad load"), "{name}"),
            "{}" => assert_eq!(rep, Value::Map(vec![]), "{name}"),
            "{'enc': 'clear', 'load': {'ret': 'bad sig algo'}}" => assert_eq!(
                rep,
                payload::map(vec![
                    ("enc", Value::from("clear")),
                    (
                        "load",
                        payload::map(vec![("ret", Value::from("bad sig algo"))])
                    ),
                ]),
                "{name}"
            ),
            _ => {
                assert!(repr.starts_with("{'enc': 'clear', 'load': b'"), "{name}");
                let load = field(&rep, "load");
                let sig = field(&rep, "sig");
                assert!(
                    master_pub.verify(&load, &sig, SigAlgo::Pkcs1v15Sha1),
                    "{name}"
                );
                let inner = payload::loads(&load).unwrap();
                let want_ret = name.contains("pending");
                assert_eq!(
                    payload::get(&inner, "ret"),
                    Some(&Value::Boolean(want_ret)),
                    "{name}"
                );
                let req_load = payload::get(&req, "load").unwrap();
                assert_eq!(
                    payload::get_str(&inner, "nonce"),
                    payload::get_str(req_load, "nonce"),
                    "{name}"
                );
            }
        }
        n += 1;
    }
    assert_eq!(n, 12);
}
