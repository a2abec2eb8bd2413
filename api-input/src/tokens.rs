//! API tokens: HS256 JWTs signed with a 64-byte secret kept in the master's pki dir
//! (`<pki_dir>/brine_api_token.key`, mode 0600), so tokens survive an API restart and every API
//! process on the host accepts them. Revocation is durable: `<cachedir>/brine_tokens_revoked/<jti>`
//! files holding the token's expiry epoch, removed by [`TokenKeeper::prune`] once expired.
//!
//! API replicas on several hosts share the key file (the same `brine_api_token.key` in each
//! pki dir) and keep revocations where all of them read them ([`SharedRevocations`]: the
//! PostgreSQL job store); each replica reads the whole list again every second
//! ([`TokenKeeper::refresh`]), so a `/logout` on one is honoured by the others within a second
//! and at once by itself.

use crate::Identity;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The file name of the signing secret inside the pki dir.
pub const KEY_FILE: &str = "brine_api_token.key";
/// The directory of revoked token ids inside the cachedir.
pub const REVOKED_DIR: &str = "brine_tokens_revoked";
const KEY_LEN: usize = 64;
/// Hex length of a token id (32 random bytes, like Salt's 64-hex eauth tokens).
const JTI_HEX_LEN: usize = 64;
/// Temporary files older than this are leftovers of a crash.
const STALE_TMP: Duration = Duration::from_secs(3600);

/// The claims of an API token. `start`/`expire` are Salt's epoch floats; `exp` is the JWT claim.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Claims {
    /// Random token id (64 hex characters), the key for revocation.
    pub jti: String,
    pub name: String,
    pub eauth: String,
    #[serde(default)]
    pub groups: Vec<String>,
    pub start: f64,
    pub expire: f64,
    pub exp: u64,
}

/// Why a token was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not a token we signed (malformed, tampered, other key or algorithm).
    #[error("invalid token")]
    Invalid,
    #[error("token expired")]
    Expired,
    #[error("token revoked")]
    Revoked,
    #[error("token store: {0}")]
    Io(#[from] io::Error),
}

/// Issues, verifies and revokes API tokens. Cheap to clone; blocking file I/O on verify/revoke.
#[derive(Clone)]
pub struct TokenKeeper {
    inner: Arc<Inner>,
}

struct Inner {
    encoding: EncodingKey,
    decoding: DecodingKey,
    revoked: Revoked,
}

/// Revocations kept where every API replica reads them (a database), beyond one host.
pub trait SharedRevocations: Send + Sync {
    /// Record that token `jti`, valid until `expire` (epoch seconds), is revoked.
    fn revoke(&self, jti: &str, expire: u64) -> io::Result<()>;
    /// Every revoked token id still recorded, with its expiry.
    fn all(&self) -> io::Result<Vec<(String, u64)>>;
    /// Forget the revocations of tokens expired before `now`; how many.
    fn prune(&self, now: u64) -> io::Result<usize>;
}

enum Revoked {
    /// One file per revoked token in this directory.
    Files(PathBuf),
    /// In a shared store, with what it held at the last refresh.
    Shared {
        store: Arc<dyn SharedRevocations>,
        known: RwLock<HashMap<String, u64>>,
    },
}

impl std::fmt::Debug for TokenKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let revoked = match &self.inner.revoked {
            Revoked::Files(dir) => dir.display().to_string(),
            Revoked::Shared { .. } => "shared".into(),
        };
        f.debug_struct("TokenKeeper")
            .field("revoked", &revoked)
            .finish_non_exhaustive()
    }
}

/// jsonwebtoken 10 picks its crypto backend from crate features and panics at first use when it
/// cannot; installing the RustCrypto provider explicitly keeps working if features get unified.
fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error only means a provider is installed already.
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    });
}

fn now_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn random_suffix() -> String {
    let mut b = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut b);
    hex::encode(b)
}

fn ensure_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Write `data` to a fresh temporary file next to `final_path` (mode 0600), synced.
fn write_tmp(final_path: &Path, data: &[u8]) -> io::Result<PathBuf> {
    let dir = final_path.parent().unwrap_or(Path::new("."));
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{}",
        std::process::id(),
        random_suffix()
    ));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = f.write_all(data).and_then(|()| f.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Read the signing secret, creating it atomically if missing: the complete key is written to a
/// temporary file and hard-linked into place, so concurrent API processes all end up with the
/// first key that landed and nobody ever reads a partial one.
fn load_or_create_key(path: &Path) -> io::Result<Vec<u8>> {
    if !path.exists() {
        let mut key = vec![0u8; KEY_LEN];
        rand::rngs::OsRng.fill_bytes(&mut key);
        let tmp = write_tmp(path, &key)?;
        let linked = fs::hard_link(&tmp, path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    let meta = fs::metadata(path)?;
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(path = %path.display(), "the API token key is readable by others; restricting it to 0600");
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    }
    let key = fs::read(path)?;
    if key.len() != KEY_LEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} holds {} bytes, expected {KEY_LEN}",
                path.display(),
                key.len()
            ),
        ));
    }
    Ok(key)
}

fn valid_jti(jti: &str) -> bool {
    jti.len() == JTI_HEX_LEN && jti.bytes().all(|b| b.is_ascii_hexdigit())
}

impl TokenKeeper {
    /// Open (creating if needed) the signing key in `pki_dir` and the revocation list in `cachedir`.
    pub fn open(pki_dir: &Path, cachedir: &Path) -> io::Result<Self> {
        let revoked_dir = cachedir.join(REVOKED_DIR);
        ensure_dir(&revoked_dir)?;
        Self::with(pki_dir, Revoked::Files(revoked_dir))
    }

    /// Open the signing key in `pki_dir`, with revocations in `store` (read once now).
    pub fn open_shared(pki_dir: &Path, store: Arc<dyn SharedRevocations>) -> io::Result<Self> {
        let known = RwLock::new(store.all()?.into_iter().collect());
        Self::with(pki_dir, Revoked::Shared { store, known })
    }

    fn with(pki_dir: &Path, revoked: Revoked) -> io::Result<Self> {
        install_crypto_provider();
        ensure_dir(pki_dir)?;
        let key = load_or_create_key(&pki_dir.join(KEY_FILE))?;
        Ok(TokenKeeper {
            inner: Arc::new(Inner {
                encoding: EncodingKey::from_secret(&key),
                decoding: DecodingKey::from_secret(&key),
                revoked,
            }),
        })
    }

    /// Whether revocations are kept in a shared store (see [`Self::refresh`]).
    pub fn is_shared(&self) -> bool {
        matches!(self.inner.revoked, Revoked::Shared { .. })
    }

    /// Learn the revocations other replicas recorded in the shared store (nothing to do with
    /// files, which are read at every check).
    pub fn refresh(&self) -> io::Result<()> {
        if let Revoked::Shared { store, known } = &self.inner.revoked {
            let all = store.all()?;
            known.write().expect("revoked lock").extend(all);
        }
        Ok(())
    }

    /// A new token for `id`, valid for `ttl_secs`.
    pub fn issue(&self, id: &Identity, ttl_secs: u64) -> (String, Claims) {
        let mut raw = [0u8; JTI_HEX_LEN / 2];
        rand::rngs::OsRng.fill_bytes(&mut raw);
        // Microseconds, like Python's time.time(); JSON then carries the value without loss.
        let start = (now_f64() * 1e6).round() / 1e6;
        let expire = start + ttl_secs as f64;
        let claims = Claims {
            jti: hex::encode(raw),
            name: id.name.clone(),
            eauth: id.eauth.clone(),
            groups: id.groups.clone(),
            start,
            expire,
            exp: expire.ceil() as u64,
        };
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &self.inner.encoding,
        )
        .expect("HMAC signing of serialisable claims cannot fail");
        (token, claims)
    }

    /// Check the signature, the expiry (`exp` and the float `expire`) and the revocation list.
    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.validate_exp = true;
        validation.set_required_spec_claims(&["exp"]);
        let data = jsonwebtoken::decode::<Claims>(token, &self.inner.decoding, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => TokenError::Expired,
                _ => TokenError::Invalid,
            })?;
        let claims = data.claims;
        if !valid_jti(&claims.jti) {
            return Err(TokenError::Invalid);
        }
        if claims.expire.is_nan() || claims.expire <= now_f64() {
            return Err(TokenError::Expired);
        }
        let revoked_dir = match &self.inner.revoked {
            Revoked::Files(dir) => dir,
            Revoked::Shared { known, .. } => {
                return match known
                    .read()
                    .expect("revoked lock")
                    .contains_key(&claims.jti)
                {
                    true => Err(TokenError::Revoked),
                    false => Ok(claims),
                }
            }
        };
        match fs::symlink_metadata(revoked_dir.join(&claims.jti)) {
            Ok(_) => Err(TokenError::Revoked),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(claims),
            Err(e) => Err(TokenError::Io(e)),
        }
    }

    /// Revoke a token for good (until it would have expired anyway).
    pub fn revoke(&self, claims: &Claims) -> io::Result<()> {
        if !valid_jti(&claims.jti) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a token id is 64 hex characters",
            ));
        }
        let revoked_dir = match &self.inner.revoked {
            Revoked::Files(dir) => dir,
            Revoked::Shared { store, known } => {
                store.revoke(&claims.jti, claims.exp)?;
                known
                    .write()
                    .expect("revoked lock")
                    .insert(claims.jti.clone(), claims.exp);
                return Ok(());
            }
        };
        let path = revoked_dir.join(&claims.jti);
        let tmp = write_tmp(&path, claims.exp.to_string().as_bytes())?;
        let renamed = fs::rename(&tmp, &path);
        if renamed.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        renamed
    }

    /// Remove revocation entries of tokens that have expired anyway; the number removed.
    pub fn prune(&self) -> io::Result<usize> {
        let now = now_f64();
        let revoked_dir = match &self.inner.revoked {
            Revoked::Files(dir) => dir,
            Revoked::Shared { store, known } => {
                known
                    .write()
                    .expect("revoked lock")
                    .retain(|_, expire| *expire as f64 >= now);
                return store.prune(now as u64);
            }
        };
        let mut removed = 0;
        for entry in fs::read_dir(revoked_dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let path = entry.path();
            if name.starts_with('.') {
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_TMP);
                if stale {
                    let _ = fs::remove_file(&path);
                }
                continue;
            }
            let Ok(content) = fs::read_to_string(&path) else {
                continue;
            };
            // An unreadable expiry keeps the entry: forgetting a revocation is the worse mistake.
            let Ok(expiry) = content.trim().parse::<f64>() else {
                continue;
            };
            if expiry < now {
                match fs::remove_file(&path) {
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn alice() -> Identity {
        Identity {
            name: "alice".into(),
            eauth: "pam".into(),
            groups: vec!["ops".into()],
        }
    }

    /// Equal claims; the floats may differ in the last bit after a JSON round trip.
    fn assert_same(a: &Claims, b: &Claims) {
        assert_eq!(
            (&a.jti, &a.name, &a.eauth, &a.groups, a.exp),
            (&b.jti, &b.name, &b.eauth, &b.groups, b.exp)
        );
        assert!((a.start - b.start).abs() < 1e-5, "{a:?} vs {b:?}");
        assert!((a.expire - b.expire).abs() < 1e-5, "{a:?} vs {b:?}");
    }

    fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().expect("temp dir");
        let pki = t.path().join("pki/master");
        let cache = t.path().join("cache");
        (t, pki, cache)
    }

    /// A shared store in memory, as two replicas would see one database.
    #[derive(Default)]
    struct Memory(std::sync::Mutex<HashMap<String, u64>>);

    impl SharedRevocations for Memory {
        fn revoke(&self, jti: &str, expire: u64) -> io::Result<()> {
            self.0.lock().unwrap().insert(jti.into(), expire);
            Ok(())
        }
        fn all(&self) -> io::Result<Vec<(String, u64)>> {
            Ok(self.0.lock().unwrap().clone().into_iter().collect())
        }
        fn prune(&self, now: u64) -> io::Result<usize> {
            let mut m = self.0.lock().unwrap();
            let before = m.len();
            m.retain(|_, e| *e >= now);
            Ok(before - m.len())
        }
    }

    #[test]
    fn replicas_sharing_the_key_and_the_store_honour_each_others_revocations() {
        let (_t, pki, _) = dirs();
        let store = Arc::new(Memory::default());
        let a = TokenKeeper::open_shared(&pki, store.clone()).expect("a");
        let b = TokenKeeper::open_shared(&pki, store.clone()).expect("b");
        let (token, claims) = a.issue(&alice(), 60);
        assert!(b.verify(&token).is_ok(), "one key: either replica verifies");
        a.revoke(&claims).expect("revoke");
        assert!(matches!(a.verify(&token), Err(TokenError::Revoked)));
        assert!(b.verify(&token).is_ok(), "b has not read the store yet");
        b.refresh().expect("refresh");
        assert!(matches!(b.verify(&token), Err(TokenError::Revoked)));
        // A replica started later reads the list at once.
        let c = TokenKeeper::open_shared(&pki, store.clone()).expect("c");
        assert!(matches!(c.verify(&token), Err(TokenError::Revoked)));
        // Expired revocations are forgotten, in the store too.
        store.revoke(&"e".repeat(64), 1).expect("old");
        assert_eq!(a.prune().expect("prune"), 1);
        assert_eq!(store.all().expect("all").len(), 1);
    }

    #[test]
    fn round_trip() {
        let (_t, pki, cache) = dirs();
        let keeper = TokenKeeper::open(&pki, &cache).expect("open");
        let (token, claims) = keeper.issue(&alice(), 43200);
        assert_eq!(claims.name, "alice");
        assert_eq!(claims.eauth, "pam");
        assert_eq!(claims.groups, vec!["ops".to_string()]);
        assert_eq!(claims.jti.len(), 64);
        assert!((claims.expire - claims.start - 43200.0).abs() < 1e-6);
        let back = keeper.verify(&token).expect("valid");
        assert_same(&back, &claims);
        let (_, other) = keeper.issue(&alice(), 10);
        assert_ne!(other.jti, claims.jti);
    }

    #[test]
    fn a_restarted_keeper_accepts_old_tokens() {
        let (_t, pki, cache) = dirs();
        let first = TokenKeeper::open(&pki, &cache).expect("open");
        let (token, claims) = first.issue(&alice(), 600);
        drop(first);
        let second = TokenKeeper::open(&pki, &cache).expect("reopen");
        assert_same(&second.verify(&token).expect("still valid"), &claims);
    }

    #[test]
    fn other_keys_and_tampering_are_refused() {
        let (_t, pki, cache) = dirs();
        let keeper = TokenKeeper::open(&pki, &cache).expect("open");
        let (token, _) = keeper.issue(&alice(), 600);
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut payload: serde_json::Value =
            serde_json::from_slice(&b64.decode(parts[1]).expect("b64")).expect("json");
        payload["name"] = "root".into();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            b64.encode(serde_json::to_vec(&payload).expect("json")),
            parts[2]
        );
        assert!(matches!(keeper.verify(&forged), Err(TokenError::Invalid)));
        let mut sig = parts[2].to_string();
        let last = if sig.ends_with('A') { 'B' } else { 'A' };
        sig.pop();
        sig.push(last);
        let bad_sig = format!("{}.{}.{}", parts[0], parts[1], sig);
        assert!(matches!(keeper.verify(&bad_sig), Err(TokenError::Invalid)));
        assert!(matches!(
            keeper.verify("not-a-token"),
            Err(TokenError::Invalid)
        ));
        assert!(matches!(keeper.verify(""), Err(TokenError::Invalid)));
        // An unsigned ("alg": "none") token.
        let none = format!(
            "{}.{}.",
            b64.encode(br#"{"alg":"none","typ":"JWT"}"#),
            parts[1]
        );
        assert!(matches!(keeper.verify(&none), Err(TokenError::Invalid)));
        // A keeper with another key.
        let (_t2, pki2, cache2) = dirs();
        let stranger = TokenKeeper::open(&pki2, &cache2).expect("open");
        assert!(matches!(stranger.verify(&token), Err(TokenError::Invalid)));
    }

    #[test]
    fn expired_tokens_are_refused() {
        let (_t, pki, cache) = dirs();
        let keeper = TokenKeeper::open(&pki, &cache).expect("open");
        let (token, _) = keeper.issue(&alice(), 0);
        std::thread::sleep(Duration::from_millis(1100));
        assert!(matches!(keeper.verify(&token), Err(TokenError::Expired)));
        // A token whose float `expire` has passed, even though `exp` has not.
        let mut claims = keeper.issue(&alice(), 600).1;
        claims.expire = now_f64() - 1.0;
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &keeper.inner.encoding,
        )
        .expect("sign");
        assert!(matches!(keeper.verify(&token), Err(TokenError::Expired)));
    }

    #[test]
    fn revocation_is_durable() {
        let (_t, pki, cache) = dirs();
        let keeper = TokenKeeper::open(&pki, &cache).expect("open");
        let (token, claims) = keeper.issue(&alice(), 600);
        let (other_token, _) = keeper.issue(&alice(), 600);
        keeper.revoke(&claims).expect("revoke");
        assert!(matches!(keeper.verify(&token), Err(TokenError::Revoked)));
        assert!(keeper.verify(&other_token).is_ok());
        let restarted = TokenKeeper::open(&pki, &cache).expect("reopen");
        assert!(matches!(restarted.verify(&token), Err(TokenError::Revoked)));
        // Not expired yet: prune keeps it.
        assert_eq!(restarted.prune().expect("prune"), 0);
        assert!(matches!(restarted.verify(&token), Err(TokenError::Revoked)));
        let mut bad = claims.clone();
        bad.jti = "../escape".into();
        assert!(keeper.revoke(&bad).is_err());
    }

    #[test]
    fn prune_removes_expired_entries_only() {
        let (_t, pki, cache) = dirs();
        let keeper = TokenKeeper::open(&pki, &cache).expect("open");
        let (_, live) = keeper.issue(&alice(), 600);
        let (_, mut old) = keeper.issue(&alice(), 600);
        old.exp = 1_000;
        keeper.revoke(&live).expect("revoke");
        keeper.revoke(&old).expect("revoke");
        let dir = cache.join(REVOKED_DIR);
        assert_eq!(
            fs::read_to_string(dir.join(&old.jti)).expect("entry"),
            "1000"
        );
        assert_eq!(keeper.prune().expect("prune"), 1);
        assert!(!dir.join(&old.jti).exists());
        assert!(dir.join(&live.jti).exists());
    }

    #[test]
    fn key_file_is_private_and_shared() {
        let (_t, pki, cache) = dirs();
        let _keeper = TokenKeeper::open(&pki, &cache).expect("open");
        let path = pki.join(KEY_FILE);
        let meta = fs::metadata(&path).expect("key file");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.len(), KEY_LEN as u64);
        let before = fs::read(&path).expect("read");
        let _again = TokenKeeper::open(&pki, &cache).expect("reopen");
        assert_eq!(fs::read(&path).expect("read"), before);
        // No temporary files are left behind.
        let names: Vec<String> = fs::read_dir(&pki)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec![KEY_FILE.to_string()]);
    }

    #[test]
    fn concurrent_opens_agree_on_one_key() {
        let (_t, pki, cache) = dirs();
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (pki, cache) = (pki.clone(), cache.clone());
                std::thread::spawn(move || TokenKeeper::open(&pki, &cache).expect("open"))
            })
            .collect();
        let keepers: Vec<TokenKeeper> = handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect();
        let (token, _) = keepers[0].issue(&alice(), 600);
        for k in &keepers {
            assert!(k.verify(&token).is_ok());
        }
    }

    #[test]
    fn a_truncated_key_file_is_an_error() {
        let (_t, pki, cache) = dirs();
        fs::create_dir_all(&pki).expect("mkdir");
        fs::write(pki.join(KEY_FILE), b"short").expect("write");
        assert!(TokenKeeper::open(&pki, &cache).is_err());
    }
}
