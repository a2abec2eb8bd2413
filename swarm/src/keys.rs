//! The swarm's RSA key pairs: one per simulated minion, generated once (in parallel threads)
//! and cached on disk as `minion-<index>.pem` / `.pub`, with the minion's request token
//! (`tok`, X9.31 of "salt", deterministic) next to them as `minion-<index>.tok`.
//!
//! Keys are named by index, not by minion id, so a different `--prefix` reuses them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use brine_protocol::crypt::{clean_key, load_or_generate_keypair, CryptError, PrivateKey};

/// One simulated minion's key material.
pub struct MinionKey {
    pub key: PrivateKey,
    /// The public key PEM as sent in `_auth` (`clean_key` form).
    pub pub_clean: String,
    /// The `tok` of every aes request.
    pub tok: Vec<u8>,
}

/// The default cache directory: `~/.cache/brine-swarm/keys-<bits>`.
pub fn default_dir(bits: usize) -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    base.join("brine-swarm").join(format!("keys-{bits}"))
}

/// Load (or generate and cache) the keys `start..start + count`, using `threads` threads.
/// `progress` is called with the number done so far, now and then.
pub fn load_all(
    dir: &Path,
    bits: usize,
    start: usize,
    count: usize,
    threads: usize,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<MinionKey>, CryptError> {
    std::fs::create_dir_all(dir)?;
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<MinionKey>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let failure: Mutex<Option<CryptError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count || failure.lock().expect("failure lock").is_some() {
                    return;
                }
                match load_one(dir, bits, start + i) {
                    Ok(k) => *slots[i].lock().expect("slot lock") = Some(k),
                    Err(e) => {
                        *failure.lock().expect("failure lock") = Some(e);
                        return;
                    }
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_multiple_of(500) {
                    progress(n);
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().expect("failure lock") {
        return Err(e);
    }
    Ok(slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .expect("slot lock")
                .expect("every index below count was filled")
        })
        .collect())
}

/// Load or create one key pair and its token.
pub fn load_one(dir: &Path, bits: usize, index: usize) -> Result<MinionKey, CryptError> {
    let name = format!("minion-{index}");
    let (key, public) = load_or_generate_keypair(dir, &name, bits)?;
    let tok_path = dir.join(format!("{name}.tok"));
    let tok = match std::fs::read(&tok_path) {
        Ok(t) if t.len() == key.size() => t,
        _ => {
            let t = key.x931_encrypt(b"salt")?;
            std::fs::write(&tok_path, &t)?;
            t
        }
    };
    // Each simulated minion's key tables are made here, before the swarm starts, as a real
    // minion's are on its own machine: the sign-ins then cost their RSA operations only.
    key.prepare_unblinded();
    Ok(MinionKey {
        pub_clean: clean_key(&public.to_pem()),
        key,
        tok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_generated_once_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_all(dir.path(), 1024, 3, 2, 2, &|_| {}).unwrap();
        assert_eq!(first.len(), 2);
        assert!(dir.path().join("minion-3.pem").exists());
        assert!(dir.path().join("minion-4.tok").exists());
        assert_ne!(first[0].pub_clean, first[1].pub_clean);
        let again = load_all(dir.path(), 1024, 3, 2, 1, &|_| {}).unwrap();
        assert_eq!(first[0].pub_clean, again[0].pub_clean);
        assert_eq!(first[1].tok, again[1].tok);
        // The token is the X9.31 signature of "salt" the master checks.
        let public = brine_protocol::crypt::PublicKey::from_pem(&again[0].pub_clean).unwrap();
        assert_eq!(public.x931_decrypt(&again[0].tok).unwrap(), b"salt");
    }

    #[test]
    fn bad_key_size_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_all(dir.path(), 100, 0, 1, 1, &|_| {}).is_err());
    }
}
