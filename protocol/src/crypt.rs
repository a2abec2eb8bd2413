//! Salt's crypto (`salt.crypt`): RSA keys and operations, key files,
//! fingerprints, and the `Crypticle` symmetric envelope.
//!
//! All RSA use in the workspace goes through this module. The four algorithm
//! names Salt accepts are [`EncAlgo`] (OAEP, MGF1 with the same hash, empty
//! label) and [`SigAlgo`] (PKCS#1 v1.5). The request `tok` and the sign-in
//! reply `sig` use OpenSSL's raw X9.31 "private encrypt", implemented here on
//! top of the raw RSA primitive.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use aes::cipher::block_padding::{NoPadding, Pkcs7};
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::RngCore;
use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey, EncodeRsaPrivateKey, LineEnding};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use rsa::traits::PublicKeyParts;
use rsa::{BigUint, Oaep, Pkcs1v15Sign, RsaPrivateKey, RsaPublicKey};
use sha1::Sha1;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};

use crate::payload::{self, PayloadError, Value};

/// Smallest modulus accepted when loading a key (below this PKCS#1 v1.5
/// SHA-224 signatures and OAEP-SHA224 cannot be formed).
pub const MIN_KEY_BITS: usize = 512;
/// Smallest modulus [`PrivateKey::generate`] produces (as `cryptography` enforces).
pub const MIN_GENERATE_BITS: usize = 1024;
/// Largest modulus supported (the `rsa` crate refuses larger public keys).
pub const MAX_KEY_BITS: usize = 4096;
/// Prefix of every Crypticle plaintext.
pub const PICKLE_PAD: &[u8] = b"pickle::";

const AES_BLOCK: usize = 16;
const SIG_SIZE: usize = 32;
const AES_KEY_LEN: usize = 24;
const CRYPTICLE_KEY_LEN: usize = AES_KEY_LEN + SIG_SIZE;

/// Errors of the crypto layer.
#[derive(Debug, thiserror::Error)]
pub enum CryptError {
    /// PEM/DER text that is not a supported RSA key.
    #[error("invalid key: {0}")]
    InvalidKey(String),
    /// The modulus is too small (or too large) for Salt's operations.
    #[error("unsupported key size: {0} bits")]
    KeySize(usize),
    /// Key generation failed.
    #[error("key generation failed: {0}")]
    Generate(String),
    /// RSA encryption failed (message too long for the key).
    #[error("encryption failed: {0}")]
    Encrypt(String),
    /// RSA decryption failed (wrong key, corrupted ciphertext, bad padding).
    #[error("decryption failed")]
    Decrypt,
    /// X9.31 padding check or encoding failed.
    #[error("x9.31: {0}")]
    X931(&'static str),
    /// Crypticle HMAC mismatch or malformed ciphertext (Salt's AuthenticationError).
    #[error("message authentication failed")]
    Authentication,
    /// Crypticle key string is not base64 of 56 bytes.
    #[error("invalid crypticle key string")]
    InvalidKeyString,
    /// The nonce in a Crypticle reply does not match the one sent.
    #[error("nonce verification error: got {got:?}, expected {expected:?}")]
    NonceMismatch { got: String, expected: String },
    /// The decrypted plaintext is not a valid payload.
    #[error("payload: {0}")]
    Payload(#[from] PayloadError),
    /// Key file I/O.
    #[error("key file: {0}")]
    Io(#[from] std::io::Error),
}

/// Asymmetric encryption algorithms Salt accepts (`encryption_algorithm`, `enc_algo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncAlgo {
    OaepSha1,
    OaepSha224,
}

impl EncAlgo {
    /// Parse Salt's name (`OAEP-SHA1`, `OAEP-SHA224`); anything else is unsupported.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "OAEP-SHA1" => Some(Self::OaepSha1),
            "OAEP-SHA224" => Some(Self::OaepSha224),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::OaepSha1 => "OAEP-SHA1",
            Self::OaepSha224 => "OAEP-SHA224",
        }
    }

    fn padding(self) -> Oaep {
        match self {
            Self::OaepSha1 => Oaep::new::<Sha1>(),
            Self::OaepSha224 => Oaep::new::<Sha224>(),
        }
    }
}

/// Signature algorithms Salt accepts (`signing_algorithm`, `sig_algo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigAlgo {
    Pkcs1v15Sha1,
    Pkcs1v15Sha224,
}

impl SigAlgo {
    /// Parse Salt's name (`PKCS1v15-SHA1`, `PKCS1v15-SHA224`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "PKCS1v15-SHA1" => Some(Self::Pkcs1v15Sha1),
            "PKCS1v15-SHA224" => Some(Self::Pkcs1v15Sha224),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pkcs1v15Sha1 => "PKCS1v15-SHA1",
            Self::Pkcs1v15Sha224 => "PKCS1v15-SHA224",
        }
    }

    /// The padding scheme and the digest of `data`.
    fn scheme(self, data: &[u8]) -> (Pkcs1v15Sign, Vec<u8>) {
        match self {
            Self::Pkcs1v15Sha1 => (Pkcs1v15Sign::new::<Sha1>(), Sha1::digest(data).to_vec()),
            Self::Pkcs1v15Sha224 => (Pkcs1v15Sign::new::<Sha224>(), Sha224::digest(data).to_vec()),
        }
    }
}

// ---------------------------------------------------------------------------
// RSA keys

/// An RSA private key (master.pem / minion.pem).
///
/// With the `openssl` feature (the default) the private-key operations (signing, OAEP
/// decryption, X9.31) run in OpenSSL's libcrypto, about four times faster than the `rsa`
/// crate on the same CPU and constant-time; they produce the same bytes (PKCS#1 v1.5 and
/// X9.31 are deterministic; tests compare both backends). The public-key operations
/// ([`PublicKey::encrypt`], `verify`, `x931_decrypt`) use OpenSSL the same way. The `rsa`
/// crate remains the fallback and does everything else (parsing, generation).
///
/// The OpenSSL copy of the key is made at the first private-key operation, and never in a
/// process that called [`set_openssl(false)`](set_openssl): a minion makes a handful of these
/// operations in its life and is smaller without OpenSSL's code in memory.
#[derive(Clone)]
pub struct PrivateKey {
    key: RsaPrivateKey,
    #[cfg(feature = "openssl")]
    fast: std::sync::OnceLock<Option<ossl::Key>>,
}

#[cfg(feature = "openssl")]
static OPENSSL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether this process's private-key operations may use OpenSSL (default: yes, when the
/// `openssl` feature is built in). Without it they run in the `rsa` crate, with the same
/// results.
pub fn set_openssl(enabled: bool) {
    #[cfg(feature = "openssl")]
    OPENSSL.store(enabled, std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "openssl"))]
    let _ = enabled;
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey({} bits)", self.key.n().bits())
    }
}

/// An RSA public key (master.pub, minion.pub, minions/<id>, minion_master.pub).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PublicKey(RsaPublicKey);

/// Normalise PEM text for the parsers: clean_key form plus one trailing newline.
fn pem_normalise(text: &str) -> (String, String) {
    let clean = clean_key(text);
    let label = clean
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .trim_start_matches("-----BEGIN ")
        .trim_end_matches("-----")
        .to_string();
    (format!("{clean}\n"), label)
}

fn check_size(n: &BigUint) -> Result<(), CryptError> {
    let bits = n.bits();
    if bits < MIN_KEY_BITS {
        return Err(CryptError::KeySize(bits));
    }
    Ok(())
}

impl PrivateKey {
    /// Generate a key with public exponent 65537 (Salt's `gen_keys`);
    /// `bits` must be in `MIN_GENERATE_BITS..=MAX_KEY_BITS`.
    pub fn generate(bits: usize) -> Result<Self, CryptError> {
        if !(MIN_GENERATE_BITS..=MAX_KEY_BITS).contains(&bits) {
            return Err(CryptError::KeySize(bits));
        }
        let key = RsaPrivateKey::new(&mut rand::thread_rng(), bits)
            .map_err(|e| CryptError::Generate(e.to_string()))?;
        Ok(Self::wrap(key))
    }

    /// Load a PKCS#1 (`RSA PRIVATE KEY`) or PKCS#8 (`PRIVATE KEY`) PEM, unencrypted.
    pub fn from_pem(text: &str) -> Result<Self, CryptError> {
        let (pem, label) = pem_normalise(text);
        let key = match label.as_str() {
            "RSA PRIVATE KEY" => RsaPrivateKey::from_pkcs1_pem(&pem)
                .map_err(|e| CryptError::InvalidKey(e.to_string()))?,
            "PRIVATE KEY" => RsaPrivateKey::from_pkcs8_pem(&pem)
                .map_err(|e| CryptError::InvalidKey(e.to_string()))?,
            "ENCRYPTED PRIVATE KEY" => {
                return Err(CryptError::InvalidKey(
                    "passphrase-protected keys are not supported".into(),
                ))
            }
            other => {
                return Err(CryptError::InvalidKey(format!(
                    "expected an RSA private key PEM, found {other:?}"
                )))
            }
        };
        check_size(key.n())?;
        Ok(Self::wrap(key))
    }

    fn wrap(key: RsaPrivateKey) -> Self {
        Self {
            #[cfg(feature = "openssl")]
            fast: std::sync::OnceLock::new(),
            key,
        }
    }

    /// The OpenSSL copy of the key, made on first use; None when OpenSSL is off or refuses it.
    #[cfg(feature = "openssl")]
    fn fast(&self) -> Option<&ossl::Key> {
        if !OPENSSL.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        self.fast.get_or_init(|| ossl::Key::new(&self.key)).as_ref()
    }

    /// Make the OpenSSL copy of the key and its per-key tables (Montgomery contexts, the
    /// blinding factor) now, with one signature, instead of at the first private-key
    /// operation; for a process that loads many keys ahead of using them (the swarm). A
    /// no-op without OpenSSL.
    pub fn prepare(&self) {
        #[cfg(feature = "openssl")]
        if let Some(fast) = self.fast() {
            let _ = fast.sign(b"", SigAlgo::Pkcs1v15Sha1);
        }
    }

    /// [`PrivateKey::prepare`] for a key that only simulates a minion (the swarm's): its
    /// OpenSSL copy is made without RSA blinding, the defence of a private key against timing
    /// measurements, which a test key has no need of. OpenSSL ties a key's blinding to the
    /// thread that made it: a key prepared on one thread and used on others made a second
    /// one at its first use there (an RSA operation with the public exponent and a modular
    /// inverse, per key). A key whose OpenSSL copy exists already keeps its blinding.
    pub fn prepare_unblinded(&self) {
        // Turned off as the copy is made, before any other thread can reach it.
        #[cfg(feature = "openssl")]
        if OPENSSL.load(std::sync::atomic::Ordering::Relaxed) {
            self.fast
                .get_or_init(|| ossl::Key::new(&self.key).map(ossl::Key::unblinded));
        }
        self.prepare();
    }

    /// PKCS#1 PEM with LF line endings and a trailing newline, as Salt writes master.pem.
    pub fn to_pem(&self) -> String {
        self.key
            .to_pkcs1_pem(LineEnding::LF)
            .map(|s| s.to_string())
            .expect("PKCS#1 encoding of a valid RSA key cannot fail")
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.key.to_public_key())
    }

    /// Modulus size in bytes.
    pub fn size(&self) -> usize {
        self.key.size()
    }

    /// RSAES-OAEP decryption (MGF1 with the same hash, empty label).
    pub fn decrypt(&self, data: &[u8], algo: EncAlgo) -> Result<Vec<u8>, CryptError> {
        #[cfg(feature = "openssl")]
        if let Some(fast) = self.fast() {
            return fast.decrypt(data, algo);
        }
        self.decrypt_pure(data, algo)
    }

    fn decrypt_pure(&self, data: &[u8], algo: EncAlgo) -> Result<Vec<u8>, CryptError> {
        self.key
            .decrypt_blinded(&mut rand::thread_rng(), algo.padding(), data)
            .map_err(|_| CryptError::Decrypt)
    }

    /// RSASSA-PKCS1-v1_5 signature of `data` (deterministic).
    pub fn sign(&self, data: &[u8], algo: SigAlgo) -> Vec<u8> {
        #[cfg(feature = "openssl")]
        if let Some(sig) = self.fast().and_then(|fast| fast.sign(data, algo)) {
            return sig;
        }
        self.sign_pure(data, algo)
    }

    fn sign_pure(&self, data: &[u8], algo: SigAlgo) -> Vec<u8> {
        let (scheme, digest) = algo.scheme(data);
        // Cannot fail: loaded and generated keys are at least MIN_KEY_BITS, which fits the
        // DigestInfo of both hashes.
        self.key
            .sign_with_rng(&mut rand::thread_rng(), scheme, &digest)
            .expect("key size checked at load time fits PKCS#1 v1.5 DigestInfo")
    }

    /// OpenSSL `RSA_private_encrypt(..., RSA_X931_PADDING)`: pad with [`x931_encode`],
    /// s = EM^d mod n, output min(s, n - s) left-padded to the modulus size.
    pub fn x931_encrypt(&self, data: &[u8]) -> Result<Vec<u8>, CryptError> {
        #[cfg(feature = "openssl")]
        if let Some(fast) = self.fast() {
            // Same padding checks first, so both backends refuse the same inputs.
            x931_encode(data, self.size())?;
            return fast.x931_encrypt(data, self.size());
        }
        self.x931_encrypt_pure(data)
    }

    fn x931_encrypt_pure(&self, data: &[u8]) -> Result<Vec<u8>, CryptError> {
        let k = self.size();
        let em = x931_encode(data, k)?;
        let m = BigUint::from_bytes_be(&em);
        let n = self.key.n();
        if &m >= n {
            return Err(CryptError::X931("message block larger than modulus"));
        }
        let s = rsa::hazmat::rsa_decrypt_and_check(&self.key, Some(&mut rand::thread_rng()), &m)
            .map_err(|_| CryptError::X931("private key operation failed"))?;
        let alt = n - &s;
        let out = if alt < s { alt } else { s };
        Ok(left_pad(&out.to_bytes_be(), k))
    }
}

impl PublicKey {
    /// Load an SPKI `PUBLIC KEY` or PKCS#1 `RSA PUBLIC KEY` PEM (also the clean_key form).
    pub fn from_pem(text: &str) -> Result<Self, CryptError> {
        let (pem, label) = pem_normalise(text);
        let key = match label.as_str() {
            "PUBLIC KEY" => RsaPublicKey::from_public_key_pem(&pem)
                .map_err(|e| CryptError::InvalidKey(e.to_string()))?,
            "RSA PUBLIC KEY" => RsaPublicKey::from_pkcs1_pem(&pem)
                .map_err(|e| CryptError::InvalidKey(e.to_string()))?,
            other => {
                return Err(CryptError::InvalidKey(format!(
                    "expected an RSA public key PEM, found {other:?}"
                )))
            }
        };
        check_size(key.n())?;
        Ok(Self(key))
    }

    /// SPKI PEM, 64-character lines, trailing newline (master.pub / minion.pub on disk).
    pub fn to_pem(&self) -> String {
        self.0
            .to_public_key_pem(LineEnding::LF)
            .expect("SPKI encoding of a valid RSA key cannot fail")
    }

    /// Modulus size in bytes.
    pub fn size(&self) -> usize {
        self.0.size()
    }

    /// RSAES-OAEP encryption (randomised). In OpenSSL when this process may use it (a
    /// master encrypts three values to each minion that signs in: several times faster than
    /// the `rsa` crate), else in the `rsa` crate.
    pub fn encrypt(&self, data: &[u8], algo: EncAlgo) -> Result<Vec<u8>, CryptError> {
        #[cfg(feature = "openssl")]
        if OPENSSL.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(out) = ossl::encrypt(&self.0, data, algo) {
                return Ok(out);
            }
        }
        self.encrypt_pure(data, algo)
    }

    fn encrypt_pure(&self, data: &[u8], algo: EncAlgo) -> Result<Vec<u8>, CryptError> {
        self.0
            .encrypt(&mut rand::thread_rng(), algo.padding(), data)
            .map_err(|e| CryptError::Encrypt(e.to_string()))
    }

    /// Check an RSASSA-PKCS1-v1_5 signature over `data` (in OpenSSL when this process may
    /// use it, as [`PublicKey::encrypt`]).
    pub fn verify(&self, data: &[u8], sig: &[u8], algo: SigAlgo) -> bool {
        #[cfg(feature = "openssl")]
        if OPENSSL.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(ok) = ossl::verify(&self.0, data, sig, algo) {
                return ok;
            }
        }
        self.verify_pure(data, sig, algo)
    }

    fn verify_pure(&self, data: &[u8], sig: &[u8], algo: SigAlgo) -> bool {
        let (scheme, digest) = algo.scheme(data);
        self.0.verify(scheme, &digest, sig).is_ok()
    }

    /// OpenSSL `RSA_public_decrypt(..., RSA_X931_PADDING)`: m = c^e mod n, replaced by n - m
    /// unless its low nibble is 0xC, then the X9.31 padding is checked and removed.
    pub fn x931_decrypt(&self, data: &[u8]) -> Result<Vec<u8>, CryptError> {
        #[cfg(feature = "openssl")]
        if OPENSSL.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(out) = ossl::x931_decrypt(&self.0, data) {
                return Ok(out);
            }
        }
        self.x931_decrypt_pure(data)
    }

    fn x931_decrypt_pure(&self, data: &[u8]) -> Result<Vec<u8>, CryptError> {
        let k = self.size();
        if data.len() > k {
            return Err(CryptError::X931("data larger than modulus"));
        }
        let c = BigUint::from_bytes_be(data);
        let n = self.0.n();
        if &c >= n {
            return Err(CryptError::X931("data larger than modulus"));
        }
        let mut m = c.modpow(self.0.e(), n);
        let low = m.to_bytes_le().first().copied().unwrap_or(0);
        if low & 0x0f != 0x0c {
            m = n - &m;
        }
        x931_decode(&left_pad(&m.to_bytes_be(), k))
    }
}

/// The RSA operations in OpenSSL's libcrypto (see [`PrivateKey`] and [`PublicKey::encrypt`]).
#[cfg(feature = "openssl")]
mod ossl {
    use openssl::bn::BigNum;
    use openssl::encrypt::{Decrypter, Encrypter};
    use openssl::hash::MessageDigest;
    use openssl::pkey::{PKey, Private, Public};
    use openssl::rsa::{Padding, Rsa};
    use rsa::pkcs1::EncodeRsaPrivateKey;
    use rsa::traits::PublicKeyParts;
    use rsa::{RsaPrivateKey, RsaPublicKey};

    use super::{CryptError, EncAlgo, SigAlgo};

    /// OpenSSL's `RSA_X931_PADDING`.
    const X931_PADDING: i32 = 5;
    /// DER DigestInfo headers of PKCS#1 v1.5 signatures (RFC 8017, section 9.2).
    const SHA1_INFO: [u8; 15] = [
        0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14,
    ];
    const SHA224_INFO: [u8; 19] = [
        0x30, 0x2d, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x04,
        0x05, 0x00, 0x04, 0x1c,
    ];

    /// The public key in OpenSSL (a copy of two numbers: cheaper than one operation).
    fn public(key: &RsaPublicKey) -> Option<Rsa<Public>> {
        let n = BigNum::from_slice(&key.n().to_bytes_be()).ok()?;
        let e = BigNum::from_slice(&key.e().to_bytes_be()).ok()?;
        Rsa::from_public_components(n, e).ok()
    }

    /// The private key in OpenSSL from the numbers the `rsa` crate precomputed when it
    /// loaded it (its PKCS#1 encoding would compute the CRT coefficient once more); None for
    /// a key of more than two primes or without them.
    pub(super) fn from_parts(key: &RsaPrivateKey) -> Option<Rsa<Private>> {
        use rsa::traits::PrivateKeyParts;
        let [p, q] = key.primes() else {
            return None;
        };
        let num = |v: &rsa::BigUint| BigNum::from_slice(&v.to_bytes_be()).ok();
        let qinv = key.qinv()?.to_biguint()?;
        Rsa::from_private_components(
            num(key.n())?,
            num(key.e())?,
            num(key.d())?,
            num(p)?,
            num(q)?,
            num(key.dp()?)?,
            num(key.dq()?)?,
            num(&qinv)?,
        )
        .ok()
    }

    /// The DigestInfo a PKCS#1 v1.5 signature of `data` carries.
    fn digest_info(data: &[u8], algo: SigAlgo) -> Vec<u8> {
        use sha1::Sha1;
        use sha2::{Digest, Sha224};
        let mut info = match algo {
            SigAlgo::Pkcs1v15Sha1 => SHA1_INFO.to_vec(),
            SigAlgo::Pkcs1v15Sha224 => SHA224_INFO.to_vec(),
        };
        match algo {
            SigAlgo::Pkcs1v15Sha1 => info.extend_from_slice(&Sha1::digest(data)),
            SigAlgo::Pkcs1v15Sha224 => info.extend_from_slice(&Sha224::digest(data)),
        }
        info
    }

    /// RSASSA-PKCS1-v1_5 verification: the signature, as long as the modulus, opened with
    /// the public key (type-1 padding checked by OpenSSL) must be the DigestInfo of `data`.
    /// None when OpenSSL will not take the key.
    pub(super) fn verify(
        key: &RsaPublicKey,
        data: &[u8],
        sig: &[u8],
        algo: SigAlgo,
    ) -> Option<bool> {
        let rsa = public(key)?;
        if sig.len() != rsa.size() as usize {
            return Some(false);
        }
        let mut out = vec![0u8; sig.len()];
        Some(match rsa.public_decrypt(sig, &mut out, Padding::PKCS1) {
            Ok(n) => out[..n] == digest_info(data, algo)[..],
            Err(_) => false,
        })
    }

    /// `RSA_public_decrypt` with X9.31 padding; None when OpenSSL refuses (the caller then
    /// runs the `rsa` crate's version, which names the reason).
    pub(super) fn x931_decrypt(key: &RsaPublicKey, data: &[u8]) -> Option<Vec<u8>> {
        let rsa = public(key)?;
        let mut out = vec![0u8; rsa.size() as usize];
        let n = rsa
            .public_decrypt(data, &mut out, Padding::from_raw(X931_PADDING))
            .ok()?;
        out.truncate(n);
        Some(out)
    }

    /// RSAES-OAEP encryption with a public key; None when OpenSSL refuses the key or the
    /// data (the caller then uses the `rsa` crate, which gives the error its words).
    pub(super) fn encrypt(key: &RsaPublicKey, data: &[u8], algo: EncAlgo) -> Option<Vec<u8>> {
        let rsa = public(key)?;
        let md = match algo {
            // OpenSSL's own OAEP padding is SHA-1 with MGF1-SHA-1 and an empty label: the
            // key's operation without an EVP context, fetched algorithms or a key export.
            EncAlgo::OaepSha1 => {
                let mut out = vec![0u8; rsa.size() as usize];
                let len = rsa
                    .public_encrypt(data, &mut out, Padding::PKCS1_OAEP)
                    .ok()?;
                out.truncate(len);
                return Some(out);
            }
            EncAlgo::OaepSha224 => MessageDigest::sha224(),
        };
        let pkey = PKey::from_rsa(rsa).ok()?;
        let mut enc = Encrypter::new(&pkey).ok()?;
        enc.set_rsa_padding(Padding::PKCS1_OAEP).ok()?;
        enc.set_rsa_oaep_md(md).ok()?;
        enc.set_rsa_mgf1_md(md).ok()?;
        let mut out = vec![0u8; enc.encrypt_len(data).ok()?];
        let len = enc.encrypt(data, &mut out).ok()?;
        out.truncate(len);
        Some(out)
    }

    #[derive(Clone)]
    pub(super) struct Key {
        rsa: Rsa<Private>,
        pkey: PKey<Private>,
    }

    impl Key {
        /// The same key in OpenSSL, or None when OpenSSL will not take it (the callers
        /// then use the `rsa` crate).
        pub(super) fn new(key: &RsaPrivateKey) -> Option<Self> {
            let rsa = match from_parts(key) {
                Some(rsa) => rsa,
                None => {
                    let der = key.to_pkcs1_der().ok()?;
                    Rsa::private_key_from_der(der.as_bytes()).ok()?
                }
            };
            let pkey = PKey::from_rsa(rsa.clone()).ok()?;
            Some(Self { rsa, pkey })
        }

        /// The key without RSA blinding (see `PrivateKey::prepare_unblinded`); called on a
        /// key no other thread holds yet.
        #[allow(unsafe_code)]
        pub(super) fn unblinded(self) -> Self {
            use foreign_types::ForeignType;
            extern "C" {
                // libcrypto: frees the key's blinding and sets RSA_FLAG_NO_BLINDING.
                fn RSA_blinding_off(rsa: *mut std::ffi::c_void);
            }
            // SAFETY: the pointer is the live RSA object `self.rsa` owns (its `pkey` holds a
            // reference to the same object); no operation runs on it meanwhile, since this
            // key has not been shared yet.
            unsafe { RSA_blinding_off(self.rsa.as_ptr().cast()) };
            self
        }

        /// PKCS#1 v1.5 signature: the DigestInfo of the digest, type-1 padded, through the
        /// raw private-key operation (no per-call algorithm fetch, unlike the EVP signer).
        pub(super) fn sign(&self, data: &[u8], algo: SigAlgo) -> Option<Vec<u8>> {
            let info = digest_info(data, algo);
            let mut out = vec![0u8; self.rsa.size() as usize];
            let n = self
                .rsa
                .private_encrypt(&info, &mut out, Padding::PKCS1)
                .ok()?;
            out.truncate(n);
            Some(out)
        }

        pub(super) fn decrypt(&self, data: &[u8], algo: EncAlgo) -> Result<Vec<u8>, CryptError> {
            let md = match algo {
                // As in `encrypt`: OpenSSL's OAEP padding is the SHA-1 variant.
                EncAlgo::OaepSha1 => {
                    let mut out = vec![0u8; self.rsa.size() as usize];
                    let n = self
                        .rsa
                        .private_decrypt(data, &mut out, Padding::PKCS1_OAEP)
                        .map_err(|_| CryptError::Decrypt)?;
                    out.truncate(n);
                    return Ok(out);
                }
                EncAlgo::OaepSha224 => MessageDigest::sha224(),
            };
            let run = || -> Result<Vec<u8>, openssl::error::ErrorStack> {
                let mut dec = Decrypter::new(&self.pkey)?;
                dec.set_rsa_padding(Padding::PKCS1_OAEP)?;
                dec.set_rsa_oaep_md(md)?;
                dec.set_rsa_mgf1_md(md)?;
                let mut out = vec![0u8; dec.decrypt_len(data)?];
                let n = dec.decrypt(data, &mut out)?;
                out.truncate(n);
                Ok(out)
            };
            run().map_err(|_| CryptError::Decrypt)
        }

        /// `RSA_private_encrypt` with X9.31 padding, left-padded to the modulus size `k`.
        pub(super) fn x931_encrypt(&self, data: &[u8], k: usize) -> Result<Vec<u8>, CryptError> {
            let mut out = vec![0u8; self.rsa.size() as usize];
            let n = self
                .rsa
                .private_encrypt(data, &mut out, Padding::from_raw(X931_PADDING))
                .map_err(|_| CryptError::X931("private key operation failed"))?;
            out.truncate(n);
            Ok(super::left_pad(&out, k))
        }
    }
}

fn left_pad(bytes: &[u8], k: usize) -> Vec<u8> {
    if bytes.len() >= k {
        return bytes.to_vec();
    }
    let mut out = vec![0u8; k - bytes.len()];
    out.extend_from_slice(bytes);
    out
}

/// X9.31 encoded message of `data` for a `k`-byte modulus, as OpenSSL builds it:
/// `6B BB.. BA data CC`, or `6A data CC` when there is room for no padding byte.
pub fn x931_encode(data: &[u8], k: usize) -> Result<Vec<u8>, CryptError> {
    let j = k
        .checked_sub(data.len() + 2)
        .ok_or(CryptError::X931("data too large for key size"))?;
    let mut em = Vec::with_capacity(k);
    if j == 0 {
        em.push(0x6a);
    } else {
        em.push(0x6b);
        em.resize(j, 0xbb);
        em.push(0xba);
    }
    em.extend_from_slice(data);
    em.push(0xcc);
    Ok(em)
}

/// OpenSSL `RSA_padding_check_X931` on a `k`-byte block.
fn x931_decode(em: &[u8]) -> Result<Vec<u8>, CryptError> {
    let flen = em.len();
    if flen < 2 {
        return Err(CryptError::X931("invalid header"));
    }
    let mut p = 1;
    let j = match em[0] {
        0x6b => {
            let limit = flen.saturating_sub(3);
            let mut i = 0;
            while i < limit {
                let c = em[p];
                p += 1;
                if c == 0xba {
                    break;
                }
                if c != 0xbb {
                    return Err(CryptError::X931("invalid padding"));
                }
                i += 1;
            }
            if i == 0 {
                return Err(CryptError::X931("invalid padding"));
            }
            limit - i
        }
        0x6a => flen - 2,
        _ => return Err(CryptError::X931("invalid header")),
    };
    if em.get(p + j) != Some(&0xcc) {
        return Err(CryptError::X931("invalid trailer"));
    }
    Ok(em[p..p + j].to_vec())
}

/// Equality of two secrets (keys, tokens, passwords, signatures) in time that depends on their
/// lengths only, not on where they differ.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// Salt's `clean_key`: strip, split lines (any line ending), join with `\n`.
pub fn clean_key(text: &str) -> String {
    let t = text.trim();
    // str::lines handles \n and \r\n; Python's splitlines also splits on lone \r.
    t.split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------
// Hashes and fingerprints

/// Hash functions usable as `hash_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashType {
    Md5,
    Sha1,
    Sha224,
    Sha256,
    Sha384,
    Sha512,
}

impl HashType {
    /// Parse a hashlib name (`md5`, `sha1`, `sha224`, `sha256`, `sha384`, `sha512`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "md5" => Some(Self::Md5),
            "sha1" => Some(Self::Sha1),
            "sha224" => Some(Self::Sha224),
            "sha256" => Some(Self::Sha256),
            "sha384" => Some(Self::Sha384),
            "sha512" => Some(Self::Sha512),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Md5 => "md5",
            Self::Sha1 => "sha1",
            Self::Sha224 => "sha224",
            Self::Sha256 => "sha256",
            Self::Sha384 => "sha384",
            Self::Sha512 => "sha512",
        }
    }
}

/// Lowercase hex digest of `data`.
pub fn hash_hex(data: &[u8], hash: HashType) -> String {
    match hash {
        HashType::Md5 => hex::encode(md5::Md5::digest(data)),
        HashType::Sha1 => hex::encode(Sha1::digest(data)),
        HashType::Sha224 => hex::encode(Sha224::digest(data)),
        HashType::Sha256 => hex::encode(Sha256::digest(data)),
        HashType::Sha384 => hex::encode(Sha384::digest(data)),
        HashType::Sha512 => hex::encode(Sha512::digest(data)),
    }
}

/// Lowercase hex digest of everything `reader` yields, read in 64 KiB pieces (a file of any
/// size is hashed in constant memory).
pub fn hash_reader(reader: impl std::io::Read, hash: HashType) -> std::io::Result<String> {
    fn run<D: Digest>(mut reader: impl std::io::Read) -> std::io::Result<String> {
        let mut digest = D::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => return Ok(hex::encode(digest.finalize())),
                Ok(n) => digest.update(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    match hash {
        HashType::Md5 => run::<md5::Md5>(reader),
        HashType::Sha1 => run::<Sha1>(reader),
        HashType::Sha224 => run::<Sha224>(reader),
        HashType::Sha256 => run::<Sha256>(reader),
        HashType::Sha384 => run::<Sha384>(reader),
        HashType::Sha512 => run::<Sha512>(reader),
    }
}

/// `salt-key -f` fingerprint: hash of the PEM body lines (each followed by `\n`,
/// armour and blank lines dropped, CRLF as LF), hex with `:` between byte pairs.
/// Text that is not PEM is hashed as is.
pub fn pem_finger(pem_text: &str, hash: HashType) -> String {
    let normalised = pem_text.replace("\r\n", "\n");
    let lines: Vec<&str> = normalised
        .split('\n')
        .filter(|l| !l.trim().is_empty())
        .collect();
    let is_pem = lines.len() >= 2
        && lines[0].trim().starts_with("-----BEGIN")
        && lines[lines.len() - 1].trim().starts_with("-----END");
    let digest = if is_pem {
        let body: String = lines[1..lines.len() - 1]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        hash_hex(body.as_bytes(), hash)
    } else {
        hash_hex(pem_text.as_bytes(), hash)
    };
    let chars: Vec<char> = digest.chars().collect();
    chars
        .chunks(2)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(":")
}

// ---------------------------------------------------------------------------
// Key files

/// Load `<dir>/<name>.pem` (and write `<dir>/<name>.pub` if it is missing), or
/// generate both when the private key does not exist: `.pem` mode 0400 (PKCS#1),
/// `.pub` mode 0644 (SPKI), like Salt's `gen_keys`.
pub fn load_or_generate_keypair(
    dir: &Path,
    name: &str,
    bits: usize,
) -> Result<(PrivateKey, PublicKey), CryptError> {
    let priv_path = dir.join(format!("{name}.pem"));
    let pub_path = dir.join(format!("{name}.pub"));
    if !priv_path.exists() {
        fs::create_dir_all(dir)?;
        let key = PrivateKey::generate(bits)?;
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(&priv_path)
        {
            Ok(mut f) => {
                f.write_all(key.to_pem().as_bytes())?;
                f.sync_all()?;
                fs::set_permissions(&priv_path, fs::Permissions::from_mode(0o400))?;
                write_public(&pub_path, &key.public())?;
            }
            // Another process created the key meanwhile: use the winner's key.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
    }
    restrict(&priv_path, 0o400)?;
    let key = PrivateKey::from_pem(&fs::read_to_string(&priv_path)?)?;
    let public = key.public();
    if !pub_path.exists() {
        write_public(&pub_path, &public)?;
    }
    Ok((key, public))
}

/// A secret others may read or write is restricted to `mode` (a warning says so), as Salt
/// keeps its keys to their owner.
fn restrict(path: &Path, mode: u32) -> Result<(), std::io::Error> {
    let found = fs::metadata(path)?.permissions().mode() & 0o777;
    if found & 0o077 != 0 {
        tracing::warn!(
            "{} was mode {found:o}, readable by others: restricted to {mode:o}",
            path.display()
        );
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Salt's start-up rule for a pki directory: mode 0700 or 0750, any other mode is made 0700
/// (with a warning).
pub fn secure_pki_dir(dir: &Path) -> Result<(), std::io::Error> {
    let found = fs::metadata(dir)?.permissions().mode() & 0o777;
    if found != 0o700 && found != 0o750 {
        tracing::warn!(
            "the pki directory {} was mode {found:o}: made 0700",
            dir.display()
        );
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn write_public(path: &Path, key: &PublicKey) -> Result<(), CryptError> {
    fs::write(path, key.to_pem())?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644))?;
    Ok(())
}

// ---------------------------------------------------------------------------
// Crypticle

type Aes192CbcEnc = cbc::Encryptor<aes::Aes192>;
type Aes192CbcDec = cbc::Decryptor<aes::Aes192>;
type HmacSha256 = Hmac<Sha256>;

/// Salt's symmetric envelope: AES-192-CBC + PKCS#7, HMAC-SHA256 over IV‖C,
/// output IV‖C‖tag. Key string = base64 of 24 AES bytes + 32 HMAC bytes.
///
/// Unlike Salt's class this holds no serial counter: use [`SerialGuard`] on
/// what [`Crypticle::loads`] returns.
#[derive(Clone)]
pub struct Crypticle {
    key_string: String,
    aes_key: [u8; AES_KEY_LEN],
    hmac_key: [u8; SIG_SIZE],
}

impl std::fmt::Debug for Crypticle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Crypticle(..)")
    }
}

impl Crypticle {
    /// A fresh key string: base64 of 56 random bytes (76 characters).
    pub fn generate_key_string() -> String {
        let mut key = [0u8; CRYPTICLE_KEY_LEN];
        rand::rngs::OsRng.fill_bytes(&mut key);
        base64::engine::general_purpose::STANDARD.encode(key)
    }

    /// Build from a key string. Whitespace is ignored when decoding (Python's
    /// `b64decode` discards it); the string itself is kept as given.
    pub fn new(key_string: &str) -> Result<Self, CryptError> {
        let compact: String = key_string
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map_err(|_| CryptError::InvalidKeyString)?;
        if raw.len() != CRYPTICLE_KEY_LEN {
            return Err(CryptError::InvalidKeyString);
        }
        let mut aes_key = [0u8; AES_KEY_LEN];
        aes_key.copy_from_slice(&raw[..AES_KEY_LEN]);
        let mut hmac_key = [0u8; SIG_SIZE];
        hmac_key.copy_from_slice(&raw[AES_KEY_LEN..]);
        Ok(Self {
            key_string: key_string.to_string(),
            aes_key,
            hmac_key,
        })
    }

    pub fn key_string(&self) -> &str {
        &self.key_string
    }

    /// Encrypt with a random IV.
    pub fn encrypt(&self, plaintext: &[u8]) -> Vec<u8> {
        let mut iv = [0u8; AES_BLOCK];
        rand::rngs::OsRng.fill_bytes(&mut iv);
        self.encrypt_with_iv(plaintext, &iv)
    }

    /// Encrypt with the given IV (deterministic; for test vectors).
    pub fn encrypt_with_iv(&self, plaintext: &[u8], iv: &[u8; 16]) -> Vec<u8> {
        let ct = Aes192CbcEnc::new((&self.aes_key).into(), iv.into())
            .encrypt_padded_vec_mut::<Pkcs7>(plaintext);
        let mut out = Vec::with_capacity(AES_BLOCK + ct.len() + SIG_SIZE);
        out.extend_from_slice(iv);
        out.extend_from_slice(&ct);
        let tag = self.mac(&out);
        out.extend_from_slice(&tag);
        out
    }

    fn mac(&self, data: &[u8]) -> [u8; SIG_SIZE] {
        let mut m = HmacSha256::new_from_slice(&self.hmac_key).expect("HMAC accepts any key size");
        m.update(data);
        m.finalize().into_bytes().into()
    }

    /// Check the HMAC (constant time) and decrypt. Like Salt, the padding is only
    /// removed (last byte = count), not otherwise validated.
    pub fn decrypt(&self, data: &[u8]) -> Result<Vec<u8>, CryptError> {
        if data.len() < SIG_SIZE {
            return Err(CryptError::Authentication);
        }
        let (body, tag) = data.split_at(data.len() - SIG_SIZE);
        let mut m = HmacSha256::new_from_slice(&self.hmac_key).expect("HMAC accepts any key size");
        m.update(body);
        m.verify_slice(tag)
            .map_err(|_| CryptError::Authentication)?;
        if body.len() < AES_BLOCK {
            return Err(CryptError::Authentication);
        }
        let (iv, ct) = body.split_at(AES_BLOCK);
        let mut iv_arr = [0u8; AES_BLOCK];
        iv_arr.copy_from_slice(iv);
        let mut plain = Aes192CbcDec::new((&self.aes_key).into(), (&iv_arr).into())
            .decrypt_padded_vec_mut::<NoPadding>(ct)
            .map_err(|_| CryptError::Authentication)?;
        let pad = usize::from(*plain.last().ok_or(CryptError::Authentication)?);
        // Python's data[:-pad]: a pad of 0 or larger than the data leaves nothing.
        let keep = if pad == 0 {
            0
        } else {
            plain.len().saturating_sub(pad)
        };
        plain.truncate(keep);
        Ok(plain)
    }

    /// `encrypt(b"pickle::" + nonce + payload::dumps(v))`; an empty nonce counts as none.
    pub fn dumps(&self, v: &Value, nonce: Option<&str>) -> Vec<u8> {
        let mut plain = PICKLE_PAD.to_vec();
        if let Some(n) = nonce {
            plain.extend_from_slice(n.as_bytes());
        }
        plain.extend_from_slice(&payload::dumps(v));
        self.encrypt(&plain)
    }

    /// Decrypt and decode. `Ok(None)` when the plaintext lacks the `pickle::` prefix
    /// (Salt returns `{}` then). With a nonce, the 32 bytes after the prefix must equal it.
    /// A `serial` field is left in place: pass the result to [`SerialGuard::accept`].
    pub fn loads(&self, data: &[u8], nonce: Option<&str>) -> Result<Option<Value>, CryptError> {
        let plain = self.decrypt(data)?;
        let Some(mut rest) = plain.strip_prefix(PICKLE_PAD) else {
            return Ok(None);
        };
        if let Some(expected) = nonce.filter(|n| !n.is_empty()) {
            let got = &rest[..rest.len().min(32)];
            if got != expected.as_bytes() {
                return Err(CryptError::NonceMismatch {
                    got: String::from_utf8_lossy(got).into_owned(),
                    expected: expected.to_string(),
                });
            }
            rest = &rest[got.len()..];
        }
        Ok(Some(payload::loads(rest)?))
    }
}

/// Publish serial tracking (Salt keeps it inside each Crypticle object).
#[derive(Default, Debug, Clone)]
pub struct SerialGuard {
    last: i128,
}

impl SerialGuard {
    /// If `load` is a map with `serial`, remove it and return whether it is greater
    /// than the last accepted serial (remembering it if so). Loads without a serial
    /// are accepted. A non-integer serial is refused.
    pub fn accept(&mut self, load: &mut Value) -> bool {
        let Some(serial) = payload::remove(load, "serial") else {
            return true;
        };
        let n = match &serial {
            Value::Integer(i) => i
                .as_u64()
                .map(i128::from)
                .or_else(|| i.as_i64().map(i128::from)),
            _ => None,
        };
        match n {
            Some(n) if n > self.last => {
                self.last = n;
                true
            }
            _ => false,
        }
    }

    /// The last accepted serial (0 before any).
    pub fn last(&self) -> i128 {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    /// Keys and the pki directory left open to others are closed at load, as Salt does.
    #[test]
    fn ct_eq_is_plain_equality() {
        assert!(ct_eq(b"", b""));
        assert!(ct_eq(b"secret", b"secret"));
        assert!(!ct_eq(b"secret", b"secreT"));
        assert!(!ct_eq(b"secret", b"secret!"));
        assert!(!ct_eq(b"Secret", b"secret"));
    }

    #[test]
    fn open_keys_and_pki_dirs_are_restricted() {
        let dir = tempfile::tempdir().unwrap();
        let pki = dir.path().join("pki");
        let (key, _) = load_or_generate_keypair(&pki, "master", 1024).unwrap();
        assert_eq!(mode(&pki.join("master.pem")), 0o400);
        assert_eq!(mode(&pki.join("master.pub")), 0o644);
        fs::set_permissions(pki.join("master.pem"), fs::Permissions::from_mode(0o644)).unwrap();
        let (again, _) = load_or_generate_keypair(&pki, "master", 1024).unwrap();
        assert_eq!(again.to_pem(), key.to_pem());
        assert_eq!(mode(&pki.join("master.pem")), 0o400);
        for (set, want) in [
            (0o755, 0o700),
            (0o777, 0o700),
            (0o750, 0o750),
            (0o700, 0o700),
        ] {
            fs::set_permissions(&pki, fs::Permissions::from_mode(set)).unwrap();
            secure_pki_dir(&pki).unwrap();
            assert_eq!(mode(&pki), want, "{set:o}");
        }
    }

    /// Both backends of the private-key operations give the same bytes.
    #[cfg(feature = "openssl")]
    /// A key prepared without blinding gives the same signatures and decryptions, from any
    /// thread; a key whose OpenSSL copy exists already is left as it is.
    #[test]
    fn unblinded_keys_work_alike() {
        let key = PrivateKey::generate(1024).unwrap();
        let plain = PrivateKey::from_pem(&key.to_pem()).unwrap();
        let sim = PrivateKey::from_pem(&key.to_pem()).unwrap();
        sim.prepare_unblinded();
        let public = key.public();
        std::thread::scope(|s| {
            for t in 0..3u8 {
                let (plain, sim, public) = (&plain, &sim, &public);
                s.spawn(move || {
                    let msg = [t; 40];
                    for algo in [SigAlgo::Pkcs1v15Sha1, SigAlgo::Pkcs1v15Sha224] {
                        assert_eq!(sim.sign(&msg, algo), plain.sign(&msg, algo));
                    }
                    for algo in [EncAlgo::OaepSha1, EncAlgo::OaepSha224] {
                        let ct = public.encrypt(&msg, algo).unwrap();
                        assert_eq!(sim.decrypt(&ct, algo).unwrap(), msg);
                        let mut bad = ct.clone();
                        bad[3] ^= 1;
                        assert!(sim.decrypt(&bad, algo).is_err());
                    }
                });
            }
        });
        plain.prepare();
        plain.prepare_unblinded();
        assert_eq!(
            plain.sign(b"x", SigAlgo::Pkcs1v15Sha1),
            sim.sign(b"x", SigAlgo::Pkcs1v15Sha1)
        );
    }

    #[test]
    fn openssl_and_rsa_crate_agree() {
        let key = PrivateKey::generate(1024).unwrap();
        assert!(key.fast().is_some(), "OpenSSL must take a generated key");
        // OpenSSL's copy is made from the rsa crate's numbers: the same key, byte for byte.
        let loaded = PrivateKey::from_pem(&key.to_pem()).unwrap();
        let parts = ossl::from_parts(&loaded.key).expect("a two-prime key with its CRT values");
        assert_eq!(
            parts.private_key_to_der().unwrap(),
            loaded.key.to_pkcs1_der().unwrap().as_bytes()
        );
        let public = key.public();
        for msg in [&b""[..], b"a publish load", &[0u8; 3000][..]] {
            for algo in [SigAlgo::Pkcs1v15Sha1, SigAlgo::Pkcs1v15Sha224] {
                let sig = key.sign(msg, algo);
                assert_eq!(sig, key.sign_pure(msg, algo));
                assert!(public.verify(msg, &sig, algo));
                assert_eq!(ossl::verify(&public.0, msg, &sig, algo), Some(true));
                assert!(public.verify_pure(msg, &sig, algo));
                let mut bad = sig.clone();
                bad[5] ^= 0x40;
                let other = if algo == SigAlgo::Pkcs1v15Sha1 {
                    SigAlgo::Pkcs1v15Sha224
                } else {
                    SigAlgo::Pkcs1v15Sha1
                };
                for (m, s, a) in [
                    (msg, &bad[..], algo),
                    (b"another load", &sig[..], algo),
                    (msg, &sig[1..], algo),
                    (msg, &sig[..], other),
                ] {
                    assert_eq!(ossl::verify(&public.0, m, s, a), Some(false));
                    assert!(!public.verify_pure(m, s, a));
                }
            }
        }
        for len in [1usize, 20, 44, 100] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let fast = key.x931_encrypt(&data).unwrap();
            assert_eq!(
                fast,
                key.x931_encrypt_pure(&data).unwrap(),
                "x931 of {len} bytes"
            );
            assert_eq!(public.x931_decrypt(&fast).unwrap(), data);
            assert_eq!(ossl::x931_decrypt(&public.0, &fast).unwrap(), data);
            assert_eq!(public.x931_decrypt_pure(&fast).unwrap(), data);
        }
        // Blocks that are no X9.31 signature: both refuse them.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            let block: Vec<u8> = (0..key.size())
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            assert!(ossl::x931_decrypt(&public.0, &block).is_none());
            assert!(public.x931_decrypt_pure(&block).is_err());
        }
        // Too long for the padding: both refuse.
        assert!(key.x931_encrypt(&[1u8; 127]).is_err());
        assert!(key.x931_encrypt_pure(&[1u8; 127]).is_err());
        for algo in [EncAlgo::OaepSha1, EncAlgo::OaepSha224] {
            let ct = public.encrypt(b"session key", algo).unwrap();
            assert!(ossl::encrypt(&public.0, b"session key", algo).is_some());
            let pure = public.encrypt_pure(b"session key", algo).unwrap();
            assert_eq!(key.decrypt(&pure, algo).unwrap(), b"session key");
            assert_eq!(key.decrypt_pure(&ct, algo).unwrap(), b"session key");
            // Longer than OAEP allows for the key: OpenSSL refuses, the error is the rsa crate's.
            assert!(ossl::encrypt(&public.0, &[7u8; 100], algo).is_none());
            assert!(public.encrypt(&[7u8; 100], algo).is_err());
            let mut bad = ct.clone();
            bad[10] ^= 1;
            assert!(key.decrypt(&bad, algo).is_err());
            assert!(key.decrypt_pure(&bad, algo).is_err());
            assert!(key.decrypt(&ct[1..], algo).is_err());
        }
    }

    #[test]
    fn algo_names() {
        for a in [EncAlgo::OaepSha1, EncAlgo::OaepSha224] {
            assert_eq!(EncAlgo::parse(a.as_str()), Some(a));
        }
        for a in [SigAlgo::Pkcs1v15Sha1, SigAlgo::Pkcs1v15Sha224] {
            assert_eq!(SigAlgo::parse(a.as_str()), Some(a));
        }
        assert_eq!(EncAlgo::parse("OAEP-SHA256"), None);
        assert_eq!(SigAlgo::parse("pkcs1v15-sha1"), None);
        assert_eq!(HashType::parse("SHA256"), Some(HashType::Sha256));
        assert_eq!(HashType::parse("crc32"), None);
    }

    #[test]
    fn x931_padding_shapes() {
        let em = x931_encode(b"ab", 8).unwrap();
        assert_eq!(hex::encode(&em), "6bbbbbbbba6162cc");
        assert_eq!(em.len(), 8);
        assert_eq!(x931_decode(&em).unwrap(), b"ab");
        let em = x931_encode(b"abc", 5).unwrap();
        assert_eq!(hex::encode(&em), "6a616263cc");
        assert_eq!(x931_decode(&em).unwrap(), b"abc");
        assert!(x931_encode(b"abcd", 5).is_err());
        assert!(x931_decode(&hex::decode("6c6162cc").unwrap()).is_err());
        assert!(x931_decode(&hex::decode("6bbb6162cc").unwrap()).is_err());
        assert!(x931_decode(&hex::decode("6bba616263").unwrap()).is_err());
    }

    #[test]
    fn clean_key_forms() {
        assert_eq!(clean_key("  a\r\nb\rc\n\n"), "a\nb\nc");
        assert_eq!(clean_key("x"), "x");
    }

    #[test]
    fn crypticle_round_trip_and_tamper() {
        let ks = Crypticle::generate_key_string();
        assert_eq!(ks.len(), 76);
        let c = Crypticle::new(&ks).unwrap();
        for len in [0usize, 1, 15, 16, 17, 100] {
            let p = vec![7u8; len];
            let ct = c.encrypt(&p);
            assert_eq!(ct.len(), 16 + 16 * (len / 16 + 1) + 32);
            assert_eq!(c.decrypt(&ct).unwrap(), p);
            let mut bad = ct.clone();
            bad[20] ^= 1;
            assert!(matches!(c.decrypt(&bad), Err(CryptError::Authentication)));
        }
        assert!(c.decrypt(&[0u8; 10]).is_err());
        assert!(c.decrypt(&[]).is_err());
        let other = Crypticle::new(&Crypticle::generate_key_string()).unwrap();
        assert!(other.decrypt(&c.encrypt(b"x")).is_err());
        assert!(Crypticle::new("AAAA").is_err());
        assert!(Crypticle::new("not base64!").is_err());
    }

    #[test]
    fn crypticle_nonce() {
        let c = Crypticle::new(&Crypticle::generate_key_string()).unwrap();
        let v = payload::map(vec![("a", Value::from(1))]);
        let nonce = "0123456789abcdef0123456789abcdef";
        let ct = c.dumps(&v, Some(nonce));
        assert_eq!(c.loads(&ct, Some(nonce)).unwrap(), Some(v.clone()));
        assert!(matches!(
            c.loads(&ct, Some("ffffffffffffffffffffffffffffffff")),
            Err(CryptError::NonceMismatch { .. })
        ));
        let plain = c.dumps(&v, None);
        assert_eq!(c.loads(&plain, None).unwrap(), Some(v));
        assert_eq!(c.loads(&c.encrypt(b"junk"), None).unwrap(), None);
        assert!(matches!(
            c.loads(&c.encrypt(b"pickle::\xc1"), None),
            Err(CryptError::Payload(_))
        ));
    }

    #[test]
    fn serial_guard() {
        let mut g = SerialGuard::default();
        let mk = |s: Value| payload::map(vec![("fun", Value::from("x")), ("serial", s)]);
        let mut a = mk(Value::from(1));
        assert!(g.accept(&mut a));
        assert_eq!(a, payload::map(vec![("fun", Value::from("x"))]));
        assert!(!g.accept(&mut mk(Value::from(1))));
        assert!(g.accept(&mut mk(Value::from(3))));
        assert!(!g.accept(&mut mk(Value::from(2))));
        assert!(!g.accept(&mut mk(Value::from("9"))));
        assert!(g.accept(&mut Value::Map(vec![])));
        assert_eq!(g.last(), 3);
    }

    #[test]
    fn fingerprint_non_pem() {
        assert_eq!(
            pem_finger("abc", HashType::Md5),
            "90:01:50:98:3c:d2:4f:b0:d6:96:3f:7d:28:e1:7f:72"
        );
    }
}
