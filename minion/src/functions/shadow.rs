//! The `shadow` execution module on Linux (Salt's `linux_shadow`): entries read from
//! `/etc/shadow` (or `<root>/etc/shadow`), changed with `chpasswd`, `usermod`, `chage` and
//! `passwd`, so that locking the file and telling nscd are the system tools' business.
//! Hashes are made by the system's crypt(3) (libxcrypt), in the formats Python's `crypt`
//! module gives Salt. Neither passwords nor hashes are ever logged.

use std::io::Read;

use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::cmd::run_argv;
use super::group::{same, which};
use super::{CallState, Context, FnError, Spec};
use brine_protocol::payload::map;

/// The functions of the `shadow` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    DefaultHash,
    Info,
    ListUsers,
    SetPassword,
    DelPassword,
    LockPassword,
    UnlockPassword,
    SetDate,
    SetMindays,
    SetMaxdays,
    SetInactdays,
    SetWarndays,
    SetExpire,
    GenPassword,
}

/// The most of a shadow file that is read.
const MAX_SHADOW_BYTES: u64 = 64 << 20;

/// The hash algorithms of Python's `crypt.methods` on a libxcrypt system, in its order:
/// name, the ident put between the first `$`s, the length of a random salt.
const METHODS: [(&str, &str, usize); 5] = [
    ("sha512", "6", 16),
    ("sha256", "5", 16),
    ("blowfish", "2b", 22),
    ("md5", "1", 8),
    ("crypt", "", 2),
];

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::DefaultHash,
        Fun::Info,
        Fun::ListUsers,
        Fun::SetPassword,
        Fun::DelPassword,
        Fun::LockPassword,
        Fun::UnlockPassword,
        Fun::SetDate,
        Fun::SetMindays,
        Fun::SetMaxdays,
        Fun::SetInactdays,
        Fun::SetWarndays,
        Fun::SetExpire,
        Fun::GenPassword,
    ];

    pub(crate) fn spec(self) -> Spec {
        let user = |params| Signature::new(params, 1, false, false);
        let attr = |params| Signature::new(params, 2, false, false);
        let (name, pyname, sig, doc) = match self {
            Fun::DefaultHash => (
                "shadow.default_hash",
                "default_hash",
                Signature::new(&[], 0, false, false),
                "
    Returns the default hash used for unset passwords

    CLI Example:

        salt '*' shadow.default_hash
    ",
            ),
            Fun::Info => (
                "shadow.info",
                "info",
                user(&["name", "root"]),
                "
    Return information for the specified user

    name
        User to get the information for

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.info root
    ",
            ),
            Fun::ListUsers => (
                "shadow.list_users",
                "list_users",
                Signature::new(&["root"], 0, false, false),
                "
    Return a list of all shadow users

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.list_users
    ",
            ),
            Fun::SetPassword => (
                "shadow.set_password",
                "set_password",
                attr(&["name", "password", "use_usermod", "root"]),
                "
    Set the password for a named user. The password must be a properly defined
    hash. A password hash can be generated with shadow.gen_password.

    name
        User to set the password

    password
        Password already hashed

    use_usermod
        Use usermod command to better compatibility

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.set_password root '$1$UYCIxa628.9qXjpQCjM4a..'
    ",
            ),
            Fun::DelPassword => (
                "shadow.del_password",
                "del_password",
                user(&["name", "root"]),
                "
    Delete the password from name user

    name
        User to delete

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.del_password username
    ",
            ),
            Fun::LockPassword => (
                "shadow.lock_password",
                "lock_password",
                user(&["name", "root"]),
                "
    Lock the password from specified user

    name
        User to lock

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.lock_password username
    ",
            ),
            Fun::UnlockPassword => (
                "shadow.unlock_password",
                "unlock_password",
                user(&["name", "root"]),
                "
    Unlock the password from name user

    name
        User to unlock

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.unlock_password username
    ",
            ),
            Fun::SetDate => (
                "shadow.set_date",
                "set_date",
                attr(&["name", "date", "root"]),
                "
    Sets the value for the date the password was last changed to days since the
    epoch (January 1, 1970). See man chage.

    name
        User to modify

    date
        Date the password was last changed

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.set_date username 0
    ",
            ),
            Fun::SetMindays => (
                "shadow.set_mindays",
                "set_mindays",
                attr(&["name", "mindays", "root"]),
                "
    Set the minimum number of days between password changes. See man chage.

    name
        User to modify

    mindays
        Minimum number of days between password changes

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.set_mindays username 7
    ",
            ),
            Fun::SetMaxdays => (
                "shadow.set_maxdays",
                "set_maxdays",
                attr(&["name", "maxdays", "root"]),
                "
    Set the maximum number of days during which a password is valid.
    See man chage.

    name
        User to modify

    maxdays
        Maximum number of days during which a password is valid

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.set_maxdays username 90
    ",
            ),
            Fun::SetInactdays => (
                "shadow.set_inactdays",
                "set_inactdays",
                attr(&["name", "inactdays", "root"]),
                "
    Set the number of days of inactivity after a password has expired before
    the account is locked. See man chage.

    name
        User to modify

    inactdays
        Set password inactive after this number of days

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.set_inactdays username 7
    ",
            ),
            Fun::SetWarndays => (
                "shadow.set_warndays",
                "set_warndays",
                attr(&["name", "warndays", "root"]),
                "
    Set the number of days of warning before a password change is required.
    See man chage.

    name
        User to modify

    warndays
        Number of days of warning before a password change is required

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.set_warndays username 7
    ",
            ),
            Fun::SetExpire => (
                "shadow.set_expire",
                "set_expire",
                attr(&["name", "expire", "root"]),
                "
    Sets the value for the date the account expires as days since the epoch
    (January 1, 1970). Using a value of -1 will clear expiration. See man
    chage.

    name
        User to modify

    date
        Date the account expires

    root
        Directory to chroot into

    CLI Example:

        salt '*' shadow.set_expire username -1
    ",
            ),
            Fun::GenPassword => (
                "shadow.gen_password",
                "gen_password",
                Signature::new(&["password", "crypt_salt", "algorithm"], 1, false, false),
                "
    Generate hashed password

    password
        Plaintext password to be hashed.

    crypt_salt
        Crpytographic salt. If not given, a random 8-character salt will be
        generated.

    algorithm
        The following hash algorithms are supported:

        * md5
        * blowfish (not in mainline glibc, only available in distros that add it)
        * sha256
        * sha512 (default)

    CLI Example:

        salt '*' shadow.gen_password 'I_am_password'
        salt '*' shadow.gen_password 'I_am_password' crypt_salt='I_am_salt' algorithm=sha256
    ",
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out: None,
        }
    }

    pub(crate) async fn run(
        self,
        _ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let name = b.get("name").map(py_str).unwrap_or_default();
        let root = b.opt("root").map(py_str);
        let root = root.as_deref();
        let given = |key| b.get(key).cloned().unwrap_or(Value::Nil);
        match self {
            Fun::DefaultHash => Ok(Value::from("!")),
            Fun::Info => Ok(info_value(find(&name, root).as_ref())),
            Fun::ListUsers => {
                let mut names: Vec<String> = read_shadow(root)
                    .map(|text| parse_shadow(&text).into_iter().map(|e| e.name).collect())
                    .unwrap_or_default();
                names.sort();
                Ok(Value::Array(names.into_iter().map(Value::from).collect()))
            }
            Fun::SetPassword => {
                let password = given("password");
                let password = if password.is_nil() {
                    String::new()
                } else {
                    py_str(&password)
                };
                set_password(&name, &password, is_true(&given("use_usermod")), root).await
            }
            Fun::DelPassword => {
                run_argv(&passwd_argv(&which("passwd")?, "-d", &name, root), &[]).await?;
                let after = find(&name, root);
                Ok(Value::Boolean(
                    after.is_some_and(|e| e.passwd.is_empty() && e.name == name),
                ))
            }
            Fun::LockPassword => lock(&name, root, true).await,
            Fun::UnlockPassword => lock(&name, root, false).await,
            Fun::SetDate => set_attrib(&name, Field::Lstchg, &given("date"), root, false).await,
            Fun::SetMindays => set_attrib(&name, Field::Min, &given("mindays"), root, true).await,
            Fun::SetMaxdays => set_attrib(&name, Field::Max, &given("maxdays"), root, true).await,
            Fun::SetInactdays => {
                set_attrib(&name, Field::Inact, &given("inactdays"), root, true).await
            }
            Fun::SetWarndays => {
                set_attrib(&name, Field::Warn, &given("warndays"), root, true).await
            }
            Fun::SetExpire => {
                set_attrib(&name, Field::Expire, &given("expire"), root, false).await
            }
            Fun::GenPassword => {
                let password = b.opt("password").map(py_str);
                let salt = b.opt("crypt_salt").map(py_str);
                let algorithm = match b.get("algorithm") {
                    None => Some("sha512".to_string()),
                    Some(v) => (!v.is_nil()).then(|| py_str(v)),
                };
                Ok(gen_hash(password, salt.as_deref(), algorithm.as_deref())?
                    .map_or(Value::Nil, Value::from))
            }
        }
    }
}

/// A line of `/etc/shadow`; a number field that is empty (or not a number) is -1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub passwd: String,
    pub lstchg: i64,
    pub min: i64,
    pub max: i64,
    pub warn: i64,
    pub inact: i64,
    pub expire: i64,
}

/// The number fields `chage` sets, with their key in `shadow.info` and `chage`'s option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Lstchg,
    Min,
    Max,
    Warn,
    Inact,
    Expire,
}

impl Field {
    fn option(self) -> &'static str {
        match self {
            Field::Lstchg => "-d",
            Field::Min => "-m",
            Field::Max => "-M",
            Field::Warn => "-W",
            Field::Inact => "-I",
            Field::Expire => "-E",
        }
    }

    fn of(self, e: &Entry) -> i64 {
        match self {
            Field::Lstchg => e.lstchg,
            Field::Min => e.min,
            Field::Max => e.max,
            Field::Warn => e.warn,
            Field::Inact => e.inact,
            Field::Expire => e.expire,
        }
    }
}

/// One shadow line (Salt's `_getspnam` on `line.strip().split(":")`); `None` without a
/// name. Missing fields count as empty rather than failing as in Salt.
fn parse_line(line: &str) -> Option<Entry> {
    let f: Vec<&str> = line.trim().split(':').collect();
    let name = f.first().filter(|n| !n.is_empty())?;
    let num = |i: usize| {
        f.get(i)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(-1)
    };
    Some(Entry {
        name: (*name).to_string(),
        passwd: f.get(1).copied().unwrap_or_default().to_string(),
        lstchg: num(2),
        min: num(3),
        max: num(4),
        warn: num(5),
        inact: num(6),
        expire: num(7),
    })
}

/// The entries of shadow file text; lines without a name are skipped.
pub(crate) fn parse_shadow(text: &str) -> Vec<Entry> {
    text.lines().filter_map(parse_line).collect()
}

fn shadow_path(root: Option<&str>) -> std::path::PathBuf {
    std::path::Path::new(root.filter(|r| !r.is_empty()).unwrap_or("/")).join("etc/shadow")
}

/// The shadow file's text (its first [`MAX_SHADOW_BYTES`]), `None` when it cannot be read.
fn read_shadow(root: Option<&str>) -> Option<String> {
    let file = std::fs::File::open(shadow_path(root)).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_SHADOW_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// A user's shadow entry (the first line with its name).
pub(crate) fn find(name: &str, root: Option<&str>) -> Option<Entry> {
    let text = read_shadow(root)?;
    text.lines()
        .filter(|l| l.trim().split(':').next() == Some(name))
        .find_map(parse_line)
}

/// Salt's `shadow.info` map: all values `""` when there is no such entry.
fn info_value(e: Option<&Entry>) -> Value {
    let keys = [
        "name", "passwd", "lstchg", "min", "max", "warn", "inact", "expire",
    ];
    match e {
        None => map(keys.map(|k| (k, Value::from("")))),
        Some(e) => map([
            ("name", Value::from(e.name.as_str())),
            ("passwd", Value::from(e.passwd.as_str())),
            ("lstchg", Value::from(e.lstchg)),
            ("min", Value::from(e.min)),
            ("max", Value::from(e.max)),
            ("warn", Value::from(e.warn)),
            ("inact", Value::from(e.inact)),
            ("expire", Value::from(e.expire)),
        ]),
    }
}

/// `salt.utils.data.is_true`.
fn is_true(v: &Value) -> bool {
    match v {
        Value::Boolean(b) => *b,
        Value::Integer(i) => i.as_u64().is_some_and(|n| n > 0),
        Value::F64(f) => *f > 0.0,
        Value::F32(f) => *f > 0.0,
        Value::String(s) => {
            let s = s.as_str().unwrap_or_default();
            match s.trim().parse::<f64>() {
                Ok(n) => n > 0.0,
                Err(_) => s.eq_ignore_ascii_case("true"),
            }
        }
        Value::Nil => false,
        Value::Array(a) => !a.is_empty(),
        Value::Map(m) => !m.is_empty(),
        _ => true,
    }
}

fn with_root(mut argv: Vec<String>, root: Option<&str>) -> Vec<String> {
    if let Some(root) = root {
        argv.extend(["-R".to_string(), root.to_string()]);
    }
    argv
}

/// `passwd [-R root] <option> <name>`.
fn passwd_argv(passwd: &str, option: &str, name: &str, root: Option<&str>) -> Vec<String> {
    let mut argv = with_root(vec![passwd.to_string()], root);
    argv.extend([option.to_string(), name.to_string()]);
    argv
}

/// `chage [-R root] <option> <value> <name>`.
fn chage_argv(chage: &str, field: Field, value: &str, name: &str, root: Option<&str>) -> Vec<String> {
    let mut argv = with_root(vec![chage.to_string()], root);
    argv.extend([field.option().to_string(), value.to_string(), name.to_string()]);
    argv
}

/// `usermod [-R root] -p <hash> <name>`.
fn usermod_argv(usermod: &str, hash: &str, name: &str, root: Option<&str>) -> Vec<String> {
    let mut argv = with_root(vec![usermod.to_string()], root);
    argv.extend(["-p".to_string(), hash.to_string(), name.to_string()]);
    argv
}

/// `chpasswd [-R root] -e`, fed `name:hash` on its standard input.
fn chpasswd_argv(chpasswd: &str, root: Option<&str>) -> Vec<String> {
    let mut argv = with_root(vec![chpasswd.to_string()], root);
    argv.push("-e".into());
    argv
}

/// Salt's `_set_attrib`: `chage` unless the entry has the value already; with `validate`,
/// whether it has it afterwards, else whether `chage` succeeded.
async fn set_attrib(
    name: &str,
    field: Field,
    value: &Value,
    root: Option<&str>,
    validate: bool,
) -> Result<Value, FnError> {
    let Some(pre) = find(name, root) else {
        return Ok(Value::Boolean(false));
    };
    if same(value, field.of(&pre)) {
        return Ok(Value::Boolean(true));
    }
    let argv = chage_argv(&which("chage")?, field, &py_str(value), name, root);
    let mut ok = run_argv(&argv, &[]).await?.retcode() == 0;
    if validate {
        ok = find(name, root).is_some_and(|e| same(value, field.of(&e)));
    }
    Ok(Value::Boolean(ok))
}

/// Salt's `lock_password` / `unlock_password` with `passwd -l` / `passwd -u`.
async fn lock(name: &str, root: Option<&str>, lock: bool) -> Result<Value, FnError> {
    let Some(pre) = find(name, root) else {
        return Ok(Value::Boolean(false));
    };
    if pre.passwd.starts_with('!') == lock {
        return Ok(Value::Boolean(true));
    }
    let option = if lock { "-l" } else { "-u" };
    run_argv(&passwd_argv(&which("passwd")?, option, name, root), &[]).await?;
    let locked = find(name, root).is_some_and(|e| e.passwd.starts_with('!'));
    Ok(Value::Boolean(locked == lock))
}

/// Salt's `set_password`: `chpasswd -e` (the hash on its standard input, never on a command
/// line) where Salt rewrites the shadow file itself, `usermod -p` with `use_usermod`. Both
/// set the date of the last change to today, as Salt does. Whether the entry has the hash
/// afterwards.
async fn set_password(
    name: &str,
    password: &str,
    use_usermod: bool,
    root: Option<&str>,
) -> Result<Value, FnError> {
    let id = run_argv(&["id".to_string(), name.to_string()], &[]).await?;
    if id.retcode() != 0 {
        tracing::warn!("user {name} does not exist, cannot set password");
        return Ok(Value::Boolean(false));
    }
    // A field separator or a line break would make another entry of the file.
    if password.contains([':', '\n', '\r']) || name.contains([':', '\n', '\r']) {
        tracing::warn!("the password hash for {name} holds ':' or a line break: not set");
        return Ok(Value::Boolean(false));
    }
    if !use_usermod && !shadow_path(root).is_file() {
        return Ok(Value::Map(Vec::new()));
    }
    if use_usermod || password.is_empty() {
        let argv = usermod_argv(&which("usermod")?, password, name, root);
        run_argv(&argv, &[]).await?;
    } else {
        let argv = chpasswd_argv(&which("chpasswd")?, root);
        run_with_stdin(&argv, &format!("{name}:{password}\n")).await?;
    }
    Ok(Value::Boolean(
        find(name, root).is_some_and(|e| e.passwd == password),
    ))
}

/// Run a command with `input` on its standard input (its output is dropped); its exit code.
async fn run_with_stdin(argv: &[String], input: &str) -> Result<i32, FnError> {
    use tokio::io::AsyncWriteExt;
    let (cmd, args) = argv
        .split_first()
        .ok_or_else(|| FnError::Execution("empty command".into()))?;
    let mut child = tokio::process::Command::new(cmd)
        .args(args)
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| FnError::Execution(format!("Unable to run command '{cmd}': {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A failed write shows in the exit code.
        let _ = stdin.write_all(input.as_bytes()).await;
        let _ = stdin.shutdown().await;
    }
    let status = child
        .wait()
        .await
        .map_err(|e| FnError::Execution(format!("Unable to run command '{cmd}': {e}")))?;
    Ok(status.code().unwrap_or(-1))
}

#[link(name = "crypt")]
extern "C" {
    /// libxcrypt's `crypt_rn`: the hash of `phrase` for `setting`, in `data`; NULL on error.
    fn crypt_rn(
        phrase: *const libc::c_char,
        setting: *const libc::c_char,
        data: *mut libc::c_void,
        size: libc::c_int,
    ) -> *mut libc::c_char;
}

/// The size of libxcrypt's `struct crypt_data`.
const CRYPT_DATA_SIZE: usize = 32768;

/// crypt(3) as Python's `crypt.crypt` calls it (`crypt_r`): on an error, libxcrypt's
/// failure token (`*0`, or `*1` when the setting starts with `*0`).
#[allow(unsafe_code)]
fn crypt(phrase: &str, setting: &str) -> Result<String, FnError> {
    let nul = || FnError::Exception("ValueError: embedded null character".into());
    let phrase = std::ffi::CString::new(phrase).map_err(|_| nul())?;
    let c_setting = std::ffi::CString::new(setting).map_err(|_| nul())?;
    let mut data = vec![0u8; CRYPT_DATA_SIZE];
    // SAFETY: both strings are NUL-terminated and live across the call; `data` is a
    // zeroed buffer of the size given, which crypt_rn writes its result into.
    let out = unsafe {
        crypt_rn(
            phrase.as_ptr(),
            c_setting.as_ptr(),
            data.as_mut_ptr().cast(),
            CRYPT_DATA_SIZE as libc::c_int,
        )
    };
    if out.is_null() {
        return Ok(if setting.starts_with("*0") { "*1" } else { "*0" }.to_string());
    }
    // SAFETY: a non-NULL result is a NUL-terminated string inside `data`.
    let hash = unsafe { std::ffi::CStr::from_ptr(out) };
    Ok(hash.to_string_lossy().into_owned())
}

const SALT_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789./";

fn random_chars(n: usize, from: &[u8]) -> String {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    (0..n)
        .map(|_| char::from(from[rng.gen_range(0..from.len())]))
        .collect()
}

/// Python's `crypt.mksalt` for a method: `$<ident>$` (with `12$` for blowfish) and random
/// salt characters.
fn mksalt(ident: &str, len: usize) -> String {
    let mut s = String::new();
    if !ident.is_empty() {
        s = format!("${ident}$");
        if ident == "2b" {
            s.push_str("12$");
        }
    }
    s.push_str(&random_chars(len, SALT_CHARS));
    s
}

/// The setting crypt(3) gets for a salt given by the caller: `$<ident>$<salt>`, the salt
/// itself for the traditional `crypt`.
fn setting_for(ident: &str, salt: &str) -> String {
    if ident.is_empty() {
        salt.to_string()
    } else {
        format!("${ident}${salt}")
    }
}

/// `salt.utils.pycrypto.gen_hash`: a random password when none is given, sha512 when no
/// algorithm is; `None` where Python's crypt fails.
fn gen_hash(
    password: Option<String>,
    crypt_salt: Option<&str>,
    algorithm: Option<&str>,
) -> Result<Option<String>, FnError> {
    let password = password.unwrap_or_else(|| {
        random_chars(
            20,
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        )
    });
    let algorithm = algorithm.unwrap_or("sha512");
    let Some((_, ident, len)) = METHODS.iter().find(|(m, _, _)| *m == algorithm) else {
        let names: Vec<String> = METHODS.iter().map(|(m, _, _)| format!("'{m}'")).collect();
        let names = names.join(", ");
        return Err(FnError::Invocation(format!(
            "Cannot hash using '{algorithm}' hash algorithm. Natively supported algorithms are: [{names}]. If passlib is installed (False), the supported algorithms are: [{names}]."
        )));
    };
    let setting = match crypt_salt {
        None => mksalt(ident, *len),
        Some(salt) => setting_for(ident, salt),
    };
    crypt(&password, &setting).map(Some)
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::get;

    const SHADOW: &str = "root:*:19000:0:99999:7:::\n\
        alice:$6$abc$xyz:19500:1:90:7:30:20000:\n\
        short:!\n\
        \n\
        :nameless:1:2\n\
        odd:x:notanumber: 5 :::::extra:fields\n";

    #[test]
    fn parses_shadow_lines_without_failing() {
        let e = parse_shadow(SHADOW);
        assert_eq!(
            e.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["root", "alice", "short", "odd"]
        );
        assert_eq!(
            e[1],
            Entry {
                name: "alice".into(),
                passwd: "$6$abc$xyz".into(),
                lstchg: 19500,
                min: 1,
                max: 90,
                warn: 7,
                inact: 30,
                expire: 20000,
            }
        );
        assert_eq!((e[0].inact, e[0].expire, e[0].max), (-1, -1, 99999));
        assert_eq!((e[2].passwd.as_str(), e[2].lstchg), ("!", -1));
        assert_eq!((e[3].lstchg, e[3].min), (-1, 5));
        let v = info_value(Some(&e[1]));
        assert_eq!(get(&v, "passwd"), Some(&s("$6$abc$xyz")));
        assert_eq!(get(&v, "inact"), Some(&Value::from(30)));
        let keys: Vec<&str> = v
            .as_map()
            .unwrap()
            .iter()
            .filter_map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            keys,
            ["name", "passwd", "lstchg", "min", "max", "warn", "inact", "expire"]
        );
        assert_eq!(get(&info_value(None), "min"), Some(&s("")));
    }

    #[test]
    fn argv_like_salt() {
        assert_eq!(
            chage_argv("chage", Field::Max, "90", "u1", Some("/mnt")),
            ["chage", "-R", "/mnt", "-M", "90", "u1"]
        );
        assert_eq!(
            chage_argv("chage", Field::Lstchg, "0", "u1", None),
            ["chage", "-d", "0", "u1"]
        );
        assert_eq!(
            passwd_argv("passwd", "-l", "u1", None),
            ["passwd", "-l", "u1"]
        );
        assert_eq!(
            usermod_argv("usermod", "$1$x$y", "u1", Some("/r")),
            ["usermod", "-R", "/r", "-p", "$1$x$y", "u1"]
        );
        assert_eq!(chpasswd_argv("chpasswd", None), ["chpasswd", "-e"]);
        assert!(is_true(&s("True")) && is_true(&s("1")) && is_true(&Value::from(2)));
        assert!(!is_true(&s("0")) && !is_true(&s("no")) && !is_true(&Value::Nil));
        assert!(!is_true(&Value::from(0)) && !is_true(&Value::from(-3)));
    }

    #[test]
    fn hashes_like_python_crypt() {
        // Known vectors (the glibc/libxcrypt documentation's).
        let h = gen_hash(Some("Hello world!".into()), Some("saltstring"), Some("sha512"));
        assert_eq!(
            h.unwrap().unwrap(),
            "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1"
        );
        let h = gen_hash(Some("Hello world!".into()), Some("saltstring"), Some("sha256"));
        assert_eq!(
            h.unwrap().unwrap(),
            "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"
        );
        let h = gen_hash(Some("pw".into()), None, None).unwrap().unwrap();
        assert!(h.starts_with("$6$") && h.split('$').nth(2).unwrap().len() == 16, "{h}");
        let again = gen_hash(Some("pw".into()), Some(h.split('$').nth(2).unwrap()), None);
        assert_eq!(again.unwrap().unwrap(), h);
        let h = gen_hash(Some("pw".into()), None, Some("md5")).unwrap().unwrap();
        assert!(h.starts_with("$1$"), "{h}");
        let h = gen_hash(Some("pw".into()), None, Some("blowfish")).unwrap().unwrap();
        assert!(h.starts_with("$2b$12$"), "{h}");
        let h = gen_hash(Some("pw".into()), Some("ab"), Some("crypt")).unwrap().unwrap();
        assert_eq!(h, "abzlUXK5ed5rs");
        assert!(matches!(
            gen_hash(Some("pw".into()), None, Some("nope")),
            Err(FnError::Invocation(m)) if m.starts_with("Cannot hash using 'nope' hash algorithm. Natively supported algorithms are: ['sha512', 'sha256', 'blowfish', 'md5', 'crypt']")
        ));
        assert_eq!(
            gen_hash(Some("pw".into()), Some("x"), Some("blowfish")).unwrap().unwrap(),
            "*0"
        );
    }

    #[tokio::test]
    async fn info_of_root_and_missing_user() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let r = call(&ctx(), "shadow.info", &[s("root")]).await;
        assert_eq!(get(&r.ret, "name"), Some(&s("root")));
        let r = call(&ctx(), "shadow.info", &[s("brinetest_nobody_here")]).await;
        assert_eq!(get(&r.ret, "passwd"), Some(&s("")));
        let r = call(&ctx(), "shadow.set_mindays", &[s("brinetest_nobody_here"), Value::from(3)]).await;
        assert_eq!(r.ret, Value::Boolean(false));
        let r = call(&ctx(), "shadow.default_hash", &[]).await;
        assert_eq!(r.ret, s("!"));
    }

    struct Cleanup;
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::process::Command::new("userdel")
                .args(["-r", "brinetest_ms1"])
                .output();
        }
    }

    #[tokio::test]
    async fn live_shadow_lifecycle() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        drop(Cleanup);
        let _cleanup = Cleanup;
        assert!(std::process::Command::new("useradd")
            .args(["-M", "-N", "-u", "23481", "brinetest_ms1"])
            .status()
            .unwrap()
            .success());
        let u = || s("brinetest_ms1");
        let hash = "$6$abcdefgh$ltjgWl6579NluT/Vi1nwEvcil.G5Nbc4NiXZaNGStk8PSwGfQv72N2CKPPrVACtLtip/cZ/1GM/O6IND4WQhG.";
        let r = call(&ctx(), "shadow.set_password", &[u(), s(hash)]).await;
        assert_eq!(r.ret, Value::Boolean(true), "{:?}", r.ret);
        let i = call(&ctx(), "shadow.info", &[u()]).await.ret;
        assert_eq!(get(&i, "passwd"), Some(&s(hash)));
        let r = call(
            &ctx(),
            "shadow.set_password",
            &[u(), s("$1$xy$abc"), s("use_usermod=True")],
        )
        .await;
        assert_eq!(r.ret, Value::Boolean(true), "{:?}", r.ret);
        for (fun, v, key) in [
            ("shadow.set_mindays", 2, "min"),
            ("shadow.set_maxdays", 50, "max"),
            ("shadow.set_warndays", 4, "warn"),
            ("shadow.set_inactdays", 9, "inact"),
            ("shadow.set_expire", 30000, "expire"),
            ("shadow.set_date", 100, "lstchg"),
        ] {
            let r = call(&ctx(), fun, &[u(), Value::from(v)]).await;
            assert_eq!(r.ret, Value::Boolean(true), "{fun}: {:?}", r.ret);
            let i = call(&ctx(), "shadow.info", &[u()]).await.ret;
            assert_eq!(get(&i, key), Some(&Value::from(v)), "{fun}");
        }
        let r = call(&ctx(), "shadow.lock_password", &[u()]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let i = call(&ctx(), "shadow.info", &[u()]).await.ret;
        assert_eq!(get(&i, "passwd"), Some(&s("!$1$xy$abc")));
        let r = call(&ctx(), "shadow.unlock_password", &[u()]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&ctx(), "shadow.del_password", &[u()]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let i = call(&ctx(), "shadow.info", &[u()]).await.ret;
        assert_eq!(get(&i, "passwd"), Some(&s("")));
        let r = call(&ctx(), "shadow.set_password", &[s("brinetest_nobody_here"), s("x")]).await;
        assert_eq!(r.ret, Value::Boolean(false));
        let r = call(&ctx(), "shadow.set_password", &[u(), s("a:b")]).await;
        assert_eq!(r.ret, Value::Boolean(false));
    }
}
