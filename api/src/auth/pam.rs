//! PAM through the system's libpam, opened at run time (`dlopen("libpam.so.0")`) rather than
//! linked: salt-api builds without PAM headers and starts on a machine without libpam, and only
//! a `pam` login there fails (with a logged reason, as any failed login).
//!
//! One login is what Salt's `salt.auth.pam.authenticate` does: `pam_start` with the user name and
//! a conversation that answers hidden prompts with the password and visible ones with the user
//! name, then `pam_authenticate`, then `pam_acct_mgmt`, then `pam_end`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

/// The soname of Linux-PAM's library (package `libpam0g` on Debian).
const LIBPAM: &str = "libpam.so.0";

// Values from Linux-PAM's <security/_pam_types.h>.
const PAM_SUCCESS: c_int = 0;
const PAM_BUF_ERR: c_int = 5;
const PAM_PERM_DENIED: c_int = 6;
const PAM_AUTH_ERR: c_int = 7;
const PAM_CRED_INSUFFICIENT: c_int = 8;
const PAM_USER_UNKNOWN: c_int = 10;
const PAM_MAXTRIES: c_int = 11;
const PAM_NEW_AUTHTOK_REQD: c_int = 12;
const PAM_ACCT_EXPIRED: c_int = 13;
const PAM_CONV_ERR: c_int = 19;
const PAM_AUTHTOK_EXPIRED: c_int = 27;

const PAM_PROMPT_ECHO_OFF: c_int = 1;
const PAM_PROMPT_ECHO_ON: c_int = 2;
const PAM_ERROR_MSG: c_int = 3;
const PAM_TEXT_INFO: c_int = 4;

/// Results that mean "these credentials are not good", as opposed to a broken PAM setup.
const CREDENTIAL_FAILURES: &[c_int] = &[
    PAM_AUTH_ERR,
    PAM_USER_UNKNOWN,
    PAM_PERM_DENIED,
    PAM_ACCT_EXPIRED,
    PAM_NEW_AUTHTOK_REQD,
    PAM_AUTHTOK_EXPIRED,
    PAM_MAXTRIES,
    PAM_CRED_INSUFFICIENT,
    PAM_CONV_ERR,
];

/// Why a PAM login did not succeed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PamError {
    /// PAM refused the credentials (unknown user, wrong password, expired account...).
    Denied(String),
    /// PAM could not decide: libpam is missing, the service is broken, a module failed.
    Unavailable(String),
}

/// `struct pam_message`.
#[repr(C)]
struct PamMessage {
    msg_style: c_int,
    msg: *const c_char,
}

/// `struct pam_response`: `resp` is malloc'd, and libpam frees it (and the array).
#[repr(C)]
struct PamResponse {
    resp: *mut c_char,
    resp_retcode: c_int,
}

type ConvFn = unsafe extern "C" fn(
    num_msg: c_int,
    msg: *mut *const PamMessage,
    resp: *mut *mut PamResponse,
    appdata_ptr: *mut c_void,
) -> c_int;

/// `struct pam_conv`.
#[repr(C)]
struct PamConv {
    conv: Option<ConvFn>,
    appdata_ptr: *mut c_void,
}

/// The opaque `pam_handle_t`.
#[repr(C)]
struct PamHandle {
    _private: [u8; 0],
}

type StartFn = unsafe extern "C" fn(
    service_name: *const c_char,
    user: *const c_char,
    pam_conversation: *const PamConv,
    pamh: *mut *mut PamHandle,
) -> c_int;
/// `pam_authenticate`, `pam_acct_mgmt` and `pam_end` (whose int is a status, not flags).
type HandleFn = unsafe extern "C" fn(pamh: *mut PamHandle, flags: c_int) -> c_int;
type StrerrorFn = unsafe extern "C" fn(pamh: *mut PamHandle, errnum: c_int) -> *const c_char;

/// The libpam functions Brine calls. The pointers stay valid as long as `_lib` is loaded, and
/// it is kept in a static, so for the life of the process.
struct Libpam {
    start: StartFn,
    authenticate: HandleFn,
    acct_mgmt: HandleFn,
    end: HandleFn,
    strerror: StrerrorFn,
    _lib: libloading::Library,
}

/// libpam, opened on the first PAM login; the error says why it could not be.
fn libpam() -> Result<&'static Libpam, String> {
    static LIBPAM_HANDLE: OnceLock<Result<Libpam, String>> = OnceLock::new();
    LIBPAM_HANDLE
        .get_or_init(load)
        .as_ref()
        .map_err(Clone::clone)
}

#[allow(unsafe_code)]
fn load() -> Result<Libpam, String> {
    let unavailable = |e: libloading::Error| {
        format!("cannot load {LIBPAM} ({e}): install the system's PAM library (libpam0g) to use the pam eauth")
    };
    // SAFETY: libpam is a system library whose initialisers have no preconditions, and it is
    // loaded once per process.
    let lib = unsafe { libloading::Library::new(LIBPAM) }.map_err(unavailable)?;
    // SAFETY: each symbol is read with the C prototype Linux-PAM declares for it in
    // <security/pam_appl.h>; the copied function pointers live as long as `lib`, which the
    // returned value owns.
    unsafe {
        Ok(Libpam {
            start: *lib.get::<StartFn>(b"pam_start\0").map_err(unavailable)?,
            authenticate: *lib
                .get::<HandleFn>(b"pam_authenticate\0")
                .map_err(unavailable)?,
            acct_mgmt: *lib
                .get::<HandleFn>(b"pam_acct_mgmt\0")
                .map_err(unavailable)?,
            end: *lib.get::<HandleFn>(b"pam_end\0").map_err(unavailable)?,
            strerror: *lib
                .get::<StrerrorFn>(b"pam_strerror\0")
                .map_err(unavailable)?,
            _lib: lib,
        })
    }
}

/// What the conversation answers with.
struct Credentials {
    user: CString,
    password: CString,
}

/// The conversation function, as Salt's: hidden prompts get the password, visible ones the user
/// name; error and information messages are logged at debug level and need no answer.
#[allow(unsafe_code)]
unsafe extern "C" fn converse(
    num_msg: c_int,
    msg: *mut *const PamMessage,
    resp: *mut *mut PamResponse,
    appdata_ptr: *mut c_void,
) -> c_int {
    let Ok(n) = usize::try_from(num_msg) else {
        return PAM_CONV_ERR;
    };
    if n == 0 || msg.is_null() || resp.is_null() || appdata_ptr.is_null() {
        return PAM_CONV_ERR;
    }
    // SAFETY: `appdata_ptr` is the `Credentials` that `login` passed to `pam_start`, alive and
    // not mutated until `pam_end` returns, and libpam calls the conversation only before that.
    let creds = unsafe { &*appdata_ptr.cast::<Credentials>() };
    // SAFETY: calloc returns zeroed memory (null `resp` pointers) or null; libpam frees the
    // array with free() when the conversation succeeds.
    let answers =
        unsafe { libc::calloc(n, std::mem::size_of::<PamResponse>()) }.cast::<PamResponse>();
    if answers.is_null() {
        return PAM_BUF_ERR;
    }
    for i in 0..n {
        // SAFETY: libpam passes `num_msg` message pointers (Linux-PAM's layout: an array of
        // pointers), each null or to a valid message with a NUL-terminated (or null) text.
        let Some(m) = (unsafe { (*msg.add(i)).as_ref() }) else {
            // SAFETY: `answers` is the calloc'd array of `n` entries filled so far.
            unsafe { free_answers(answers, n) };
            return PAM_CONV_ERR;
        };
        let text = || {
            if m.msg.is_null() {
                String::new()
            } else {
                // SAFETY: see above: a non-null `msg` is a C string owned by libpam.
                unsafe { CStr::from_ptr(m.msg) }
                    .to_string_lossy()
                    .into_owned()
            }
        };
        let answer = match m.msg_style {
            PAM_PROMPT_ECHO_OFF => Some(&creds.password),
            PAM_PROMPT_ECHO_ON => Some(&creds.user),
            PAM_ERROR_MSG => {
                tracing::debug!(message = %text(), "PAM error message");
                None
            }
            PAM_TEXT_INFO => {
                tracing::debug!(message = %text(), "PAM info");
                None
            }
            style => {
                tracing::debug!(style, message = %text(), "PAM message of an unknown style");
                None
            }
        };
        if let Some(answer) = answer {
            // SAFETY: strdup copies a valid C string into malloc'd memory (or returns null),
            // which libpam frees; `answers` has `n` zeroed entries and `i < n`.
            unsafe {
                let copy = libc::strdup(answer.as_ptr());
                if copy.is_null() {
                    free_answers(answers, n);
                    return PAM_BUF_ERR;
                }
                (*answers.add(i)).resp = copy;
            }
        }
    }
    // SAFETY: `resp` is non-null and points to libpam's slot for the answers.
    unsafe { *resp = answers };
    PAM_SUCCESS
}

/// Frees the answers on a failed conversation (libpam frees them only on success); the password
/// copies are wiped first.
#[allow(unsafe_code)]
unsafe fn free_answers(answers: *mut PamResponse, n: usize) {
    for i in 0..n {
        // SAFETY: the caller passes the calloc'd array of `n` entries, each `resp` null or
        // from strdup.
        unsafe {
            let r = (*answers.add(i)).resp;
            if !r.is_null() {
                libc::memset(r.cast(), 0, libc::strlen(r));
                libc::free(r.cast());
            }
        }
    }
    // SAFETY: `answers` came from calloc and is freed once.
    unsafe { libc::free(answers.cast()) };
}

/// Authenticate `user` with `password` under the PAM `service`, then check the account (expiry,
/// access rules), as Salt does.
#[allow(unsafe_code)]
pub(crate) fn login(service: &str, user: &str, password: &str) -> Result<(), PamError> {
    let denied = || PamError::Denied("the user name or password contains a NUL byte".into());
    let creds = Credentials {
        user: CString::new(user).map_err(|_| denied())?,
        password: CString::new(password).map_err(|_| denied())?,
    };
    let service_c = CString::new(service)
        .map_err(|_| PamError::Unavailable(format!("bad PAM service name {service:?}")))?;
    let pam = libpam().map_err(PamError::Unavailable)?;
    let conv = PamConv {
        conv: Some(converse),
        appdata_ptr: ptr::from_ref(&creds).cast_mut().cast(),
    };
    let mut handle: *mut PamHandle = ptr::null_mut();
    // SAFETY: the strings are NUL-terminated and outlive the call; libpam copies the
    // conversation struct, whose `appdata_ptr` (`creds`) outlives the handle (ended below).
    let code = unsafe { (pam.start)(service_c.as_ptr(), creds.user.as_ptr(), &conv, &mut handle) };
    if code != PAM_SUCCESS || handle.is_null() {
        return Err(PamError::Unavailable(format!(
            "pam_start for service {service:?} failed ({code})"
        )));
    }
    // SAFETY: `handle` is the live handle from a successful pam_start, used by this thread only.
    let mut code = unsafe { (pam.authenticate)(handle, 0) };
    if code == PAM_SUCCESS {
        // SAFETY: as above.
        code = unsafe { (pam.acct_mgmt)(handle, 0) };
    }
    let outcome = if code == PAM_SUCCESS {
        Ok(())
    } else {
        // SAFETY: as above; pam_strerror returns a static C string (or null).
        let reason = unsafe {
            let s = (pam.strerror)(handle, code);
            if s.is_null() {
                format!("PAM error {code}")
            } else {
                format!("{} ({code})", CStr::from_ptr(s).to_string_lossy())
            }
        };
        if CREDENTIAL_FAILURES.contains(&code) {
            Err(PamError::Denied(reason))
        } else {
            Err(PamError::Unavailable(reason))
        }
    };
    // SAFETY: ends the handle exactly once; nothing uses it afterwards.
    unsafe { (pam.end)(handle, code) };
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_users_and_bad_input_are_refused() {
        // Needs neither root nor a test account: this user cannot exist.
        let res = login("login", "brine-no-such-user-7f3a", "x");
        assert!(res.is_err(), "{res:?}");
        assert!(matches!(
            login("login", "bad\0name", "x"),
            Err(PamError::Denied(_))
        ));
        assert!(matches!(
            login("login", "user", "bad\0password"),
            Err(PamError::Denied(_))
        ));
    }

    #[test]
    #[allow(unsafe_code)]
    fn the_conversation_answers_like_salts() {
        let creds = Credentials {
            user: CString::new("alice").expect("name"),
            password: CString::new("s3cret").expect("password"),
        };
        let texts = [c"Password: ", c"login: ", c"Welcome", c"Oops"];
        let styles = [
            PAM_PROMPT_ECHO_OFF,
            PAM_PROMPT_ECHO_ON,
            PAM_TEXT_INFO,
            PAM_ERROR_MSG,
        ];
        let msgs: Vec<PamMessage> = texts
            .iter()
            .zip(styles)
            .map(|(t, msg_style)| PamMessage {
                msg_style,
                msg: t.as_ptr(),
            })
            .collect();
        let mut ptrs: Vec<*const PamMessage> = msgs.iter().map(ptr::from_ref).collect();
        let mut resp: *mut PamResponse = ptr::null_mut();
        let appdata = ptr::from_ref(&creds).cast_mut().cast();
        // SAFETY: the arguments are laid out as libpam passes them; the answers are read and
        // freed as libpam would.
        let answers = unsafe {
            let code = converse(4, ptrs.as_mut_ptr(), &mut resp, appdata);
            assert_eq!(code, PAM_SUCCESS);
            assert!(!resp.is_null());
            let answers: Vec<Option<String>> = (0..4)
                .map(|i| {
                    let r = (*resp.add(i)).resp;
                    (!r.is_null()).then(|| CStr::from_ptr(r).to_string_lossy().into_owned())
                })
                .collect();
            free_answers(resp, 4);
            answers
        };
        assert_eq!(
            answers,
            [
                Some("s3cret".to_string()),
                Some("alice".to_string()),
                None,
                None
            ]
        );
        // SAFETY: a null message pointer is refused without touching the answers slot.
        let code = unsafe {
            let mut nulls = [ptr::null::<PamMessage>()];
            converse(1, nulls.as_mut_ptr(), &mut resp, appdata)
        };
        assert_eq!(code, PAM_CONV_ERR);
    }

    #[test]
    fn the_library_loads_where_it_is_installed() {
        if !std::path::Path::new("/etc/pam.d").exists() {
            println!("skipped: no PAM on this machine");
            return;
        }
        assert!(libpam().is_ok(), "{:?}", libpam().err());
    }
}
