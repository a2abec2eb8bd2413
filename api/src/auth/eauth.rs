//! External authentication ("eauth") backends, configured as in Salt: a backend may be used only
//! when it appears under `external_auth` in the master config.
//!
//! * `pam`: system users through libpam, loaded at run time (service `auth.pam.service`, default
//!   `login`; see `pam`); the groups are the user's system groups.
//! * `file`: text, htpasswd or htdigest files (see `file_backend`).
//! * `sharedsecret`: the password must equal the master option `sharedsecret`.
//! * `auto`: everybody (a development backend; the ACL still applies).
//!
//! Failures take a randomised minimum time, like Salt's `LoadAuth.time_auth`, so a caller cannot
//! tell an unknown user from a wrong password by the response time.

use super::file_backend;
use super::pam::{self, PamError};
use brine_protocol::config::MasterConfig;
use brine_protocol::crypt::ct_eq;
use nix::unistd::{getgrouplist, Group, User};
use rand::Rng;
use serde_json::Value;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Why a login failed.
#[derive(Debug, thiserror::Error)]
pub enum EauthError {
    /// The backend is not configured under `external_auth` (or Brine does not implement it).
    #[error("the eauth system {0:?} is not enabled")]
    UnknownBackend(String),
    /// The user is unknown or the password is wrong.
    #[error("bad credentials")]
    BadCredentials,
    /// The backend could not decide (misconfiguration, unreadable file, PAM failure).
    #[error("eauth backend error: {0}")]
    Backend(String),
}

pub use brine_api_input::Identity;

/// Check credentials with the named backend. Blocking (PAM, file reads, the failure delay):
/// call it from `spawn_blocking` in async code.
pub fn authenticate(
    cfg: &MasterConfig,
    eauth: &str,
    username: &str,
    password: &str,
) -> Result<Identity, EauthError> {
    let Some(block) = cfg.external_auth.get(eauth) else {
        tracing::warn!(eauth, "the eauth system is not enabled");
        return Err(EauthError::UnknownBackend(eauth.to_string()));
    };
    if !matches!(eauth, "pam" | "file" | "sharedsecret" | "auto") {
        tracing::warn!(
            eauth,
            "the eauth system is configured but not available in Brine"
        );
        return Err(EauthError::UnknownBackend(eauth.to_string()));
    }
    let started = Instant::now();
    let result = check(cfg, eauth, block, username, password);
    match result {
        Ok(groups) => Ok(Identity {
            name: username.to_string(),
            eauth: eauth.to_string(),
            groups,
        }),
        Err(err) => {
            match &err {
                EauthError::Backend(msg) => {
                    tracing::warn!(eauth, user = username, error = %msg, "eauth backend error")
                }
                _ => tracing::warn!(
                    eauth,
                    user = username,
                    "Authentication failure of type \"eauth\" occurred."
                ),
            }
            equalise_failure_time(started);
            Err(err)
        }
    }
}

/// Run the backend; on success, the user's groups.
fn check(
    cfg: &MasterConfig,
    eauth: &str,
    block: &Value,
    username: &str,
    password: &str,
) -> Result<Vec<String>, EauthError> {
    match eauth {
        "auto" => Ok(Vec::new()),
        "sharedsecret" => {
            let secret = cfg.sharedsecret.as_deref();
            match secret {
                Some(s) if ct_eq(s.as_bytes(), password.as_bytes()) => Ok(Vec::new()),
                Some(_) => Err(EauthError::BadCredentials),
                None => Err(EauthError::Backend(
                    "the master option `sharedsecret` is not set".into(),
                )),
            }
        }
        "file" => {
            let empty = serde_json::Map::new();
            let block = block.as_object().unwrap_or(&empty);
            file_backend::authenticate(block, username, password).map(|()| Vec::new())
        }
        "pam" => {
            let service = cfg.auth_pam_service.as_str();
            pam_authenticate(service, username, password)?;
            Ok(system_groups(username))
        }
        other => Err(EauthError::UnknownBackend(other.to_string())),
    }
}

/// Salt starts at one second and raises the floor to the slowest failure seen.
const INITIAL_FAIL_FLOOR_MICROS: u64 = 1_000_000;
/// A slow backend (a hung LDAP-backed PAM) must not make every later failure wait as long.
const MAX_FAIL_FLOOR_MICROS: u64 = 10_000_000;
static FAIL_FLOOR_MICROS: AtomicU64 = AtomicU64::new(INITIAL_FAIL_FLOOR_MICROS);

fn equalise_failure_time(started: Instant) {
    let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let floor = FAIL_FLOOR_MICROS
        .fetch_max(took.min(MAX_FAIL_FLOOR_MICROS), Ordering::Relaxed)
        .max(took.min(MAX_FAIL_FLOOR_MICROS));
    let deviation = floor / 4;
    let target = rand::thread_rng().gen_range(floor - deviation..=floor + deviation);
    let target = Duration::from_micros(target);
    let elapsed = started.elapsed();
    if target > elapsed {
        std::thread::sleep(target - elapsed);
    }
}

fn pam_authenticate(service: &str, username: &str, password: &str) -> Result<(), EauthError> {
    if username.is_empty() || username.contains('\0') || password.contains('\0') {
        return Err(EauthError::BadCredentials);
    }
    match pam::login(service, username, password) {
        Ok(()) => Ok(()),
        Err(PamError::Denied(reason)) => {
            tracing::debug!(service, user = username, %reason, "PAM refused the login");
            Err(EauthError::BadCredentials)
        }
        Err(PamError::Unavailable(reason)) => Err(EauthError::Backend(format!(
            "PAM (service {service:?}): {reason}"
        ))),
    }
}

/// The names of the user's system groups, primary group included (Salt's `get_group_list`).
pub(crate) fn system_groups(username: &str) -> Vec<String> {
    let Ok(name) = CString::new(username) else {
        return Vec::new();
    };
    let Ok(Some(user)) = User::from_name(username) else {
        return Vec::new();
    };
    let mut names: Vec<String> = getgrouplist(&name, user.gid)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|gid| Group::from_gid(gid).ok().flatten())
        .map(|g| g.name)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use brine_protocol::config::RawConfig;
    use serde_json::{json, Map};
    use std::process::{Command, Stdio};

    fn cfg(external_auth: Value, extra: Value) -> MasterConfig {
        let mut values = Map::new();
        values.insert("external_auth".into(), external_auth);
        if let Value::Object(m) = extra {
            values.extend(m);
        }
        MasterConfig::from_raw(RawConfig {
            values,
            ..RawConfig::default()
        })
        .expect("valid test config")
    }

    #[test]
    fn backend_must_be_configured() {
        let c = cfg(json!({"auto": {"alice": [".*"]}}), json!({}));
        assert!(matches!(
            authenticate(&c, "pam", "alice", "pw"),
            Err(EauthError::UnknownBackend(b)) if b == "pam"
        ));
        let ldap = cfg(json!({"ldap": {"alice": [".*"]}}), json!({}));
        assert!(matches!(
            authenticate(&ldap, "ldap", "alice", "pw"),
            Err(EauthError::UnknownBackend(_))
        ));
    }

    #[test]
    fn auto_accepts_everybody() {
        let c = cfg(json!({"auto": {"alice": [".*"]}}), json!({}));
        let id = authenticate(&c, "auto", "whoever", "anything").expect("auto accepts");
        assert_eq!(
            id,
            Identity {
                name: "whoever".into(),
                eauth: "auto".into(),
                groups: vec![]
            }
        );
    }

    #[test]
    fn sharedsecret_compares_with_the_master_option() {
        let c = cfg(
            json!({"sharedsecret": {"fred": [".*"]}}),
            json!({"sharedsecret": "OIUHF_CHANGE_THIS_12h88"}),
        );
        assert!(authenticate(&c, "sharedsecret", "fred", "OIUHF_CHANGE_THIS_12h88").is_ok());
        let started = Instant::now();
        assert!(matches!(
            authenticate(&c, "sharedsecret", "fred", "wrong"),
            Err(EauthError::BadCredentials)
        ));
        // Failures are slowed down to Salt's floor (0.75 s at least).
        assert!(started.elapsed() >= Duration::from_millis(700));
        let unset = cfg(json!({"sharedsecret": {"fred": [".*"]}}), json!({}));
        assert!(matches!(
            authenticate(&unset, "sharedsecret", "fred", ""),
            Err(EauthError::Backend(_))
        ));
    }

    #[test]
    fn file_backend_through_the_config() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("users.txt");
        std::fs::write(&path, "dean:goneFishing\n").expect("write");
        let c = cfg(
            json!({"file": {"^filename": path, "dean": ["test.*"]}}),
            json!({}),
        );
        let id = authenticate(&c, "file", "dean", "goneFishing").expect("file auth");
        assert_eq!(id.name, "dean");
        assert_eq!(id.eauth, "file");
        assert!(matches!(
            authenticate(&c, "file", "dean", "nope"),
            Err(EauthError::BadCredentials)
        ));
    }

    #[test]
    fn pam_refuses_unknown_users_and_bad_input() {
        // Needs neither root nor a test account: these users cannot exist.
        assert!(pam_authenticate("login", "brine-no-such-user-7f3a", "x").is_err());
        assert!(matches!(
            pam_authenticate("login", "bad\0name", "x"),
            Err(EauthError::BadCredentials)
        ));
        assert!(matches!(
            pam_authenticate("login", "", "x"),
            Err(EauthError::BadCredentials)
        ));
        assert!(system_groups("brine-no-such-user-7f3a").is_empty());
        assert!(system_groups("root").contains(&"root".to_string()));
    }

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    /// Run a command; on failure, its stderr.
    fn run(cmd: &str, args: &[&str], stdin: Option<&str>) -> Result<(), String> {
        let mut child = Command::new(cmd)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{cmd}: {e}"))?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            use std::io::Write;
            pipe.write_all(input.as_bytes())
                .map_err(|e| format!("{cmd} stdin: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("{cmd}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The user database is locked while another process edits it: retry a few times.
    fn run_retrying(cmd: &str, args: &[&str], stdin: Option<&str>) -> Result<(), String> {
        let mut last = Ok(());
        for _ in 0..10 {
            last = run(cmd, args, stdin);
            if last.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        last
    }

    /// Removes the test account even when an assertion fails.
    struct TestUser(&'static str);
    impl Drop for TestUser {
        fn drop(&mut self) {
            let _ = run_retrying("userdel", &[self.0], None);
        }
    }

    #[test]
    fn pam_with_a_real_local_user() {
        const USER: &str = "brinepamtest";
        if !is_root() {
            println!("skipped: creating a local user for the PAM test needs root");
            return;
        }
        let _ = run("userdel", &[USER], None);
        if let Err(e) = run_retrying("useradd", &["-M", USER], None) {
            println!("skipped: cannot create the PAM test user ({e})");
            return;
        }
        let _guard = TestUser(USER);
        let set = run_retrying("chpasswd", &[], Some(&format!("{USER}:Brine-Pam-Test-1\n")));
        assert_eq!(set, Ok(()));
        let c = cfg(json!({"pam": {USER: ["test.*"]}}), json!({}));
        let id = authenticate(&c, "pam", USER, "Brine-Pam-Test-1").expect("PAM accepts the user");
        assert_eq!(id.name, USER);
        assert_eq!(id.eauth, "pam");
        assert!(
            id.groups.contains(&USER.to_string()),
            "groups: {:?}",
            id.groups
        );
        assert!(matches!(
            authenticate(&c, "pam", USER, "wrong-password"),
            Err(EauthError::BadCredentials)
        ));
        // `auth.pam.service` picks the PAM policy: a service that denies everything.
        let service = "brine-pam-test-deny";
        let policy = std::path::Path::new("/etc/pam.d").join(service);
        if std::fs::write(
            &policy,
            "auth required pam_deny.so\naccount required pam_permit.so\n",
        )
        .is_ok()
        {
            let denying = cfg(
                json!({"pam": {USER: ["test.*"]}}),
                json!({"auth.pam.service": service}),
            );
            let res = authenticate(&denying, "pam", USER, "Brine-Pam-Test-1");
            let _ = std::fs::remove_file(&policy);
            assert!(matches!(res, Err(EauthError::BadCredentials)), "{res:?}");
        }
    }
}
