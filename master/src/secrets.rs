//! The master's secrets: its RSA key pair, the cluster AES key used for publishes, the
//! per-minion session keys used for requests, and the root key that local tools present.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, SystemTime};

use brine_protocol::crypt::{load_or_generate_keypair, Crypticle, PrivateKey, PublicKey};

pub struct Secrets {
    pub master_key: PrivateKey,
    pub master_pub: PublicKey,
    /// master.pub as a minion receives it (clean_key form).
    pub master_pub_clean: String,
    aes: RwLock<Crypticle>,
    /// The signature of the AES key's digest every sign-in answer carries, made once per key.
    aes_sig: Mutex<Option<(String, Vec<u8>)>>,
    serial: AtomicU64,
    root_key: String,
    sessions_dir: PathBuf,
    publish_session: Duration,
    sessions: Mutex<HashMap<String, (Crypticle, SystemTime)>>,
}

fn write_private(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text)?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))?;
    fs::rename(tmp, path)
}

impl Secrets {
    /// Load or create everything: `pki_dir/master.{pem,pub}`, `cachedir/.root_key`,
    /// `cachedir/sessions/`. The AES key is new at every start, as Salt's.
    pub fn load(
        pki_dir: &Path,
        cachedir: &Path,
        keysize: usize,
        publish_session: Duration,
        user: &str,
    ) -> anyhow::Result<Secrets> {
        fs::create_dir_all(pki_dir)?;
        brine_protocol::crypt::secure_pki_dir(pki_dir)?;
        fs::create_dir_all(cachedir)?;
        let (master_key, master_pub) = load_or_generate_keypair(pki_dir, "master", keysize)
            .map_err(|e| anyhow::anyhow!("master key pair in {}: {e}", pki_dir.display()))?;
        let master_pub_clean = brine_protocol::crypt::clean_key(&master_pub.to_pem());
        let sessions_dir = cachedir.join("sessions");
        fs::create_dir_all(&sessions_dir)?;
        let root_key = load_root_key(cachedir, user)?;
        Ok(Secrets {
            master_key,
            master_pub,
            master_pub_clean,
            aes: RwLock::new(Crypticle::new(&Crypticle::generate_key_string())?),
            aes_sig: Mutex::new(None),
            serial: AtomicU64::new(0),
            root_key,
            sessions_dir,
            publish_session,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    pub fn aes(&self) -> Crypticle {
        self.aes.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The master key's signature (X9.31) of `aes`'s SHA-256 digest, as a sign-in answer
    /// carries it: one RSA operation per AES key, not per sign-in.
    pub fn aes_signature(
        &self,
        aes: &Crypticle,
    ) -> Result<Vec<u8>, brine_protocol::crypt::CryptError> {
        let key = aes.key_string();
        let cached = |c: &Option<(String, Vec<u8>)>| {
            c.as_ref()
                .filter(|(k, _)| *k == key)
                .map(|(_, sig)| sig.clone())
        };
        if let Some(sig) = cached(&self.aes_sig.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(sig);
        }
        let digest = brine_protocol::crypt::hash_hex(
            key.as_bytes(),
            brine_protocol::crypt::HashType::Sha256,
        );
        let sig = self.master_key.x931_encrypt(digest.as_bytes())?;
        *self.aes_sig.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((key.to_string(), sig.clone()));
        Ok(sig)
    }

    /// A new AES key; the publish serial starts over.
    pub fn rotate_aes(&self) {
        let mut aes = self.aes.write().unwrap_or_else(|e| e.into_inner());
        *aes = Crypticle::new(&Crypticle::generate_key_string()).expect("fresh key string");
        self.serial.store(0, Ordering::SeqCst);
    }

    /// The next publish serial (strictly increasing under one AES key).
    pub fn next_serial(&self) -> u64 {
        self.serial.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn root_key(&self) -> &str {
        &self.root_key
    }

    /// Constant-time comparison of a presented root key.
    pub fn check_root_key(&self, presented: &str) -> bool {
        brine_protocol::crypt::ct_eq(presented.as_bytes(), self.root_key.as_bytes())
    }

    /// The session key of a minion: `cachedir/sessions/<id>`, created on first use and replaced
    /// once older than `publish_session`. Callers have validated `id`.
    pub fn session(&self, id: &str) -> io::Result<Crypticle> {
        let path = self.sessions_dir.join(id);
        self.session_at(id, &path, fs::metadata(&path).ok())
    }

    /// [`Secrets::session`] with the session file's metadata read already.
    fn session_at(
        &self,
        id: &str,
        path: &Path,
        meta: Option<fs::Metadata>,
    ) -> io::Result<Crypticle> {
        let mtime = meta.as_ref().and_then(|m| m.modified().ok());
        let expired = mtime
            .and_then(|t| t.elapsed().ok())
            .is_none_or(|age| age > self.publish_session);
        // The lock covers the map only: the session file is read and written without it.
        let lock = || self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if !expired {
            if let (Some((c, seen)), Some(t)) = (lock().get(id).cloned(), mtime) {
                if seen == t {
                    return Ok(c);
                }
            }
            if let Ok(text) = fs::read_to_string(path) {
                if let Ok(c) = Crypticle::new(text.trim()) {
                    lock().insert(
                        id.to_string(),
                        (c.clone(), mtime.unwrap_or(SystemTime::now())),
                    );
                    return Ok(c);
                }
            }
        }
        let key = Crypticle::generate_key_string();
        write_private(path, &key)?;
        let c = Crypticle::new(&key).expect("fresh key string");
        let t = fs::metadata(path)?.modified()?;
        lock().insert(id.to_string(), (c.clone(), t));
        Ok(c)
    }

    /// The session key if one exists (never creates one): for decrypting requests.
    pub fn existing_session(&self, id: &str) -> Option<Crypticle> {
        let path = self.sessions_dir.join(id);
        let meta = fs::metadata(&path).ok().filter(|m| m.is_file())?;
        self.session_at(id, &path, Some(meta)).ok()
    }

    /// Forget a minion's session (its key was deleted or rejected).
    pub fn drop_session(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        let _ = fs::remove_file(self.sessions_dir.join(id));
    }
}

/// `cachedir/.<user>_key`, created with a fresh key string if missing (mode 0600). Salt names
/// it after the user the master runs as; tools running as root read `.root_key`.
fn load_root_key(cachedir: &Path, user: &str) -> io::Result<String> {
    let user = user.replace('\\', "_");
    let path = cachedir.join(format!(".{user}_key"));
    if let Ok(text) = fs::read_to_string(&path) {
        let t = text.trim().to_string();
        if !t.is_empty() {
            if user != "root" {
                let _ = fs::write(cachedir.join(".root_key"), &t);
            }
            return Ok(t);
        }
    }
    let key = Crypticle::generate_key_string();
    write_private(&path, &key)?;
    if user != "root" {
        write_private(&cachedir.join(".root_key"), &key)?;
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(d: &tempfile::TempDir) -> Secrets {
        Secrets::load(
            &d.path().join("pki"),
            &d.path().join("cache"),
            2048,
            Duration::from_secs(3600),
            "root",
        )
        .unwrap()
    }

    #[test]
    fn sessions_are_stable_and_rotate_with_age() {
        let d = tempfile::tempdir().unwrap();
        let s = secrets(&d);
        let a = s.session("m1").unwrap();
        let b = s.session("m1").unwrap();
        assert_eq!(a.key_string(), b.key_string());
        assert!(s.existing_session("m2").is_none());
        s.drop_session("m1");
        assert!(s.existing_session("m1").is_none());
        assert!(s.check_root_key(&fs::read_to_string(d.path().join("cache/.root_key")).unwrap()));
        assert!(!s.check_root_key("nope"));
        assert_eq!(s.next_serial(), 1);
        assert_eq!(s.next_serial(), 2);
        s.rotate_aes();
        assert_eq!(s.next_serial(), 1);
    }

    /// The cached signature is the one a fresh signing gives, for the key in use.
    #[test]
    fn the_aes_signature_follows_the_key() {
        let d = tempfile::tempdir().unwrap();
        let s = secrets(&d);
        let fresh = |aes: &Crypticle| {
            let digest = brine_protocol::crypt::hash_hex(
                aes.key_string().as_bytes(),
                brine_protocol::crypt::HashType::Sha256,
            );
            s.master_key.x931_encrypt(digest.as_bytes()).unwrap()
        };
        let first = s.aes();
        assert_eq!(s.aes_signature(&first).unwrap(), fresh(&first));
        assert_eq!(s.aes_signature(&first).unwrap(), fresh(&first));
        s.rotate_aes();
        let second = s.aes();
        assert_eq!(s.aes_signature(&second).unwrap(), fresh(&second));
        assert_ne!(fresh(&first), fresh(&second));
    }
}
