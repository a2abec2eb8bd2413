//! The `file` eauth backend (Salt's `salt/auth/file.py`): text files with plain or digested
//! passwords, Apache htpasswd and htdigest files (passlib's `HtpasswdFile`/`HtdigestFile` rules).

use super::eauth::EauthError;
use super::pycompat::{py_int, py_str};
use base64::Engine as _;
use brine_protocol::crypt::ct_eq;
use md5::Md5;
use serde_json::{Map, Value};
use sha1::Sha1;
use sha2::{Digest, Sha224, Sha256, Sha384, Sha512};

fn backend(msg: impl Into<String>) -> EauthError {
    EauthError::Backend(msg.into())
}

fn verdict(ok: bool) -> Result<(), EauthError> {
    if ok {
        Ok(())
    } else {
        Err(EauthError::BadCredentials)
    }
}

/// The `^option` settings of `external_auth: {file: ...}` with Salt's defaults.
struct FileConfig {
    filename: String,
    filetype: String,
    hashtype: String,
    field_separator: String,
    username_field: i64,
    password_field: i64,
    realm: Option<String>,
}

fn string_opt(block: &Map<String, Value>, key: &str, default: &str) -> Result<String, EauthError> {
    match block.get(key) {
        None => Ok(default.to_string()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(backend(format!(
            "external_auth:file:{key} must be a string, not {}",
            py_str(other)
        ))),
    }
}

fn int_opt(block: &Map<String, Value>, key: &str, default: i64) -> Result<i64, EauthError> {
    match block.get(key) {
        None => Ok(default),
        Some(v) => py_int(v).ok_or_else(|| {
            backend(format!(
                "external_auth:file:{key} is not an integer: {}",
                py_str(v)
            ))
        }),
    }
}

impl FileConfig {
    fn from_block(block: &Map<String, Value>) -> Result<Self, EauthError> {
        let filename = match block.get("^filename") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => py_str(other),
            None => {
                return Err(backend(
                    "an authentication file must be specified via external_auth:file:^filename",
                ))
            }
        };
        if !std::path::Path::new(&filename).exists() {
            return Err(backend(format!(
                "external_auth:file:^filename ({filename}) does not exist"
            )));
        }
        let realm = match block.get("^realm") {
            None | Some(Value::Null) => None,
            Some(v) => Some(py_str(v)),
        };
        Ok(FileConfig {
            filename,
            filetype: string_opt(block, "^filetype", "text")?,
            hashtype: string_opt(block, "^hashtype", "plaintext")?,
            field_separator: string_opt(block, "^field_separator", ":")?,
            username_field: int_opt(block, "^username_field", 1)?,
            password_field: int_opt(block, "^password_field", 2)?,
            realm,
        })
    }
}

/// Check `username`/`password` against the file configured in `block` (`external_auth:file`).
pub(crate) fn authenticate(
    block: &Map<String, Value>,
    username: &str,
    password: &str,
) -> Result<(), EauthError> {
    let cfg = FileConfig::from_block(block)?;
    match cfg.filetype.as_str() {
        "text" => text(&cfg, username, password),
        "htpasswd" => htpasswd(&cfg, username, password),
        "htdigest" => htdigest(&cfg, username, password),
        other => Err(backend(format!(
            "unknown external_auth:file:^filetype {other:?}"
        ))),
    }
}

fn read(path: &str) -> Result<Vec<u8>, EauthError> {
    std::fs::read(path).map_err(|e| backend(format!("reading {path}: {e}")))
}

/// Python's `fields[i]` with negative indices counting from the end.
fn py_index<'a>(fields: &[&'a str], i: i64) -> Option<&'a str> {
    let len = i64::try_from(fields.len()).ok()?;
    let idx = if i < 0 { len + i } else { i };
    if idx < 0 || idx >= len {
        return None;
    }
    usize::try_from(idx).ok().map(|i| fields[i])
}

/// Lines as Python's text mode reads them (universal newlines).
fn universal_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            b'\r' => {
                out.push(&text[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < bytes.len() {
        out.push(&text[start..]);
    }
    out
}

/// `hashutil.digest`-style lowercase hex digest by hashlib name.
fn hex_digest(hashtype: &str, password: &str) -> Result<String, EauthError> {
    let data = password.as_bytes();
    Ok(match hashtype {
        "md5" => hex::encode(Md5::digest(data)),
        "sha1" => hex::encode(Sha1::digest(data)),
        "sha224" => hex::encode(Sha224::digest(data)),
        "sha256" => hex::encode(Sha256::digest(data)),
        "sha384" => hex::encode(Sha384::digest(data)),
        "sha512" => hex::encode(Sha512::digest(data)),
        other => return Err(backend(format!("hash func {other:?} is not supported"))),
    })
}

/// Salt's `_text`: the first line whose username field equals `username` decides; a line lacking
/// either field before that makes the whole check fail, as in Salt.
fn text(cfg: &FileConfig, username: &str, password: &str) -> Result<(), EauthError> {
    if cfg.field_separator.is_empty() {
        return Err(backend("external_auth:file:^field_separator is empty"));
    }
    let raw = read(&cfg.filename)?;
    let content = String::from_utf8(raw)
        .map_err(|_| backend(format!("{} is not valid UTF-8", cfg.filename)))?;
    for line in universal_lines(&content) {
        let fields: Vec<&str> = line.trim().split(cfg.field_separator.as_str()).collect();
        let Some(this_user) = py_index(&fields, cfg.username_field - 1) else {
            return Err(backend(format!(
                "username field ({}) does not exist in file {}",
                cfg.username_field, cfg.filename
            )));
        };
        let Some(this_password) = py_index(&fields, cfg.password_field - 1) else {
            return Err(backend(format!(
                "password field ({}) does not exist in file {}",
                cfg.password_field, cfg.filename
            )));
        };
        if this_user != username {
            continue;
        }
        let ok = if cfg.hashtype == "plaintext" {
            ct_eq(this_password.as_bytes(), password.as_bytes())
        } else {
            let digest = hex_digest(&cfg.hashtype, password)?;
            ct_eq(this_password.as_bytes(), digest.as_bytes())
        };
        return verdict(ok);
    }
    Err(EauthError::BadCredentials)
}

fn is_ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn trim_end(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., last] = s {
        if is_ascii_space(*last) {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// passlib's record parsing: blank and `#` lines are skipped, every other line must have exactly
/// `fields` colon-separated fields (else the whole file is rejected); the first record of a key wins.
fn records(path: &str, fields: usize) -> Result<Vec<Vec<Vec<u8>>>, EauthError> {
    let raw = read(path)?;
    let mut out = Vec::new();
    for (n, line) in raw.split(|b| *b == b'\n').enumerate() {
        let lead = line.iter().position(|b| !is_ascii_space(*b));
        match lead {
            None => continue,
            Some(i) if line[i] == b'#' => continue,
            _ => {}
        }
        let parts: Vec<Vec<u8>> = trim_end(line)
            .split(|b| *b == b':')
            .map(<[u8]>::to_vec)
            .collect();
        if parts.len() != fields {
            return Err(backend(format!(
                "malformed file {path} (error reading line {})",
                n + 1
            )));
        }
        out.push(parts);
    }
    Ok(out)
}

/// passlib refuses user names and realms it could not write back to the file.
fn valid_field(value: &str) -> bool {
    value.len() <= 255
        && !value
            .bytes()
            .any(|b| matches!(b, b':' | b'\n' | b'\r' | b'\t' | 0))
}

fn htpasswd(cfg: &FileConfig, username: &str, password: &str) -> Result<(), EauthError> {
    if !valid_field(username) {
        return Err(EauthError::BadCredentials);
    }
    let recs = records(&cfg.filename, 2)?;
    let Some(rec) = recs.iter().find(|r| r[0] == username.as_bytes()) else {
        return Err(EauthError::BadCredentials);
    };
    let hash = String::from_utf8(rec[1].clone())
        .map_err(|_| backend(format!("{}: a password hash is not UTF-8", cfg.filename)))?;
    verdict(htpasswd_verify(password, &hash)?)
}

fn is_des_crypt(hash: &str) -> bool {
    let ok = |b: u8| b == b'.' || b == b'/' || b.is_ascii_alphanumeric();
    hash.len() == 13 && hash.bytes().all(ok)
}

/// passlib's `htpasswd_context`: the scheme is the first that identifies the hash, in the order
/// apr_md5_crypt, bcrypt, sha256_crypt, sha512_crypt, des_crypt, ldap_sha1, plaintext.
pub(crate) fn htpasswd_verify(password: &str, hash: &str) -> Result<bool, EauthError> {
    if hash.starts_with("$apr1$") {
        return apr1_verify(password, hash);
    }
    if ["$2$", "$2a$", "$2b$", "$2x$", "$2y$"]
        .iter()
        .any(|p| hash.starts_with(p))
    {
        if password.contains('\0') {
            return Err(backend("bcrypt passwords cannot contain NUL"));
        }
        return bcrypt::verify(password, hash).map_err(|e| backend(format!("bcrypt hash: {e}")));
    }
    if hash.starts_with("$5$") {
        return Ok(pwhash::sha256_crypt::verify(password, hash));
    }
    if hash.starts_with("$6$") {
        return Ok(pwhash::sha512_crypt::verify(password, hash));
    }
    if is_des_crypt(hash) {
        if password.contains('\0') {
            return Err(backend("des_crypt passwords cannot contain NUL"));
        }
        return Ok(pwhash::unix_crypt::verify(password, hash));
    }
    if hash.len() == 2
        && hash
            .bytes()
            .all(|b| b == b'.' || b == b'/' || b.is_ascii_alphanumeric())
    {
        return Err(backend("des_crypt hash without a checksum"));
    }
    if let Some(b64) = hash.strip_prefix("{SHA}") {
        let expected = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .filter(|d| d.len() == 20 && b64.len() == 28)
            .ok_or_else(|| backend("malformed {SHA} hash"))?;
        return Ok(ct_eq(&Sha1::digest(password.as_bytes()), &expected));
    }
    Ok(ct_eq(password.as_bytes(), hash.as_bytes()))
}

const ITOA64: &[u8] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The MD5-crypt algorithm (`$1$`, Apache's `$apr1$` only changes the magic), as a full hash string.
pub(crate) fn md5_crypt(password: &[u8], salt: &[u8], magic: &[u8]) -> String {
    let mut ctx = Md5::new();
    ctx.update(password);
    ctx.update(magic);
    ctx.update(salt);
    let alt = {
        let mut a = Md5::new();
        a.update(password);
        a.update(salt);
        a.update(password);
        a.finalize()
    };
    let mut left = password.len();
    while left > 0 {
        let n = left.min(16);
        ctx.update(&alt[..n]);
        left -= n;
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            ctx.update([0u8]);
        } else {
            ctx.update(&password[..1]);
        }
        i >>= 1;
    }
    let mut fin = ctx.finalize();
    for round in 0..1000 {
        let mut c = Md5::new();
        if round & 1 == 1 {
            c.update(password);
        } else {
            c.update(fin);
        }
        if round % 3 != 0 {
            c.update(salt);
        }
        if round % 7 != 0 {
            c.update(password);
        }
        if round & 1 == 1 {
            c.update(fin);
        } else {
            c.update(password);
        }
        fin = c.finalize();
    }
    let mut out = String::with_capacity(magic.len() + salt.len() + 23);
    out.push_str(&String::from_utf8_lossy(magic));
    out.push_str(&String::from_utf8_lossy(salt));
    out.push('$');
    let mut push = |v: u32, n: usize| {
        let mut v = v;
        for _ in 0..n {
            out.push(ITOA64[(v & 0x3f) as usize] as char);
            v >>= 6;
        }
    };
    for (a, b, c) in [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)] {
        push(
            (u32::from(fin[a]) << 16) | (u32::from(fin[b]) << 8) | u32::from(fin[c]),
            4,
        );
    }
    push(u32::from(fin[11]), 2);
    out
}

fn apr1_verify(password: &str, hash: &str) -> Result<bool, EauthError> {
    let rest = &hash["$apr1$".len()..];
    let (salt, checksum) = rest
        .split_once('$')
        .ok_or_else(|| backend("malformed $apr1$ hash"))?;
    let salt_ok = salt.len() <= 8
        && salt
            .bytes()
            .all(|b| b == b'.' || b == b'/' || b.is_ascii_alphanumeric());
    if !salt_ok || checksum.len() != 22 {
        return Err(backend("malformed $apr1$ hash"));
    }
    let computed = md5_crypt(password.as_bytes(), salt.as_bytes(), b"$apr1$");
    Ok(ct_eq(computed.as_bytes(), hash.as_bytes()))
}

fn htdigest(cfg: &FileConfig, username: &str, password: &str) -> Result<(), EauthError> {
    let Some(realm) = cfg.realm.as_deref().filter(|r| !r.is_empty()) else {
        return Err(backend(
            "a ^realm must be defined in external_auth:file for the htdigest filetype",
        ));
    };
    if !valid_field(username) || !valid_field(realm) {
        return Err(EauthError::BadCredentials);
    }
    let recs = records(&cfg.filename, 3)?;
    let Some(rec) = recs
        .iter()
        .find(|r| r[0] == username.as_bytes() && r[1] == realm.as_bytes())
    else {
        return Err(EauthError::BadCredentials);
    };
    let stored = String::from_utf8_lossy(&rec[2]).to_lowercase();
    if stored.len() != 32 || !stored.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(backend("malformed htdigest hash"));
    }
    let computed = hex::encode(Md5::digest(format!("{username}:{realm}:{password}")));
    verdict(ct_eq(computed.as_bytes(), stored.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write;

    fn file_with(content: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(content.as_bytes()).expect("write");
        f
    }

    fn block(v: Value) -> Map<String, Value> {
        v.as_object().expect("a map").clone()
    }

    fn check(b: &Map<String, Value>, user: &str, pass: &str) -> bool {
        authenticate(b, user, pass).is_ok()
    }

    #[test]
    fn md5_crypt_matches_openssl() {
        assert_eq!(
            md5_crypt(b"password", b"abcdefgh", b"$apr1$"),
            "$apr1$abcdefgh$FBwExRW4dCc8aL.OvjpIE1"
        );
        assert_eq!(
            md5_crypt(b"password", b"abcdefgh", b"$1$"),
            "$1$abcdefgh$G//4keteveJp0qb8z2DxG/"
        );
    }

    #[test]
    fn plaintext_text_file() {
        let f = file_with("dean:goneFishing\ngene:OceanMan\n");
        let b = block(json!({"^filename": f.path(), "gene": [".*"]}));
        assert!(check(&b, "gene", "OceanMan"));
        assert!(check(&b, "dean", "goneFishing"));
        assert!(!check(&b, "gene", "goneFishing"));
        assert!(!check(&b, "nobody", "OceanMan"));
        assert!(matches!(
            authenticate(&b, "gene", "x"),
            Err(EauthError::BadCredentials)
        ));
    }

    #[test]
    fn legacy_text_file_with_md5_fields() {
        // md5("trey-pass") etc.
        let line = |id: &str, user: &str, pass: &str| {
            format!(
                "{id}|{user}|{}\n",
                hex::encode(Md5::digest(pass.as_bytes()))
            )
        };
        let content = line("46", "trey", "trey-pass") + &line("555", "mike", "mike-pass");
        let f = file_with(&content);
        let b = block(json!({
            "^filename": f.path(), "^filetype": "text", "^hashtype": "md5",
            "^username_field": 2, "^password_field": "3", "^field_separator": "|"
        }));
        assert!(check(&b, "trey", "trey-pass"));
        assert!(check(&b, "mike", "mike-pass"));
        assert!(!check(&b, "mike", "trey-pass"));
        let sha = file_with(&format!("bob:{}\n", hex::encode(Sha256::digest(b"pw"))));
        let b = block(json!({"^filename": sha.path(), "^hashtype": "sha256"}));
        assert!(check(&b, "bob", "pw"));
        let b = block(json!({"^filename": sha.path(), "^hashtype": "whirlpool"}));
        assert!(matches!(
            authenticate(&b, "bob", "pw"),
            Err(EauthError::Backend(_))
        ));
    }

    #[test]
    fn text_file_quirks_follow_salt() {
        // A line without the password field before the user's line stops the search.
        let f = file_with("broken\nbob:pw\n");
        let b = block(json!({"^filename": f.path()}));
        assert!(matches!(
            authenticate(&b, "bob", "pw"),
            Err(EauthError::Backend(_))
        ));
        // Whitespace around lines is stripped; CRLF files work.
        let f = file_with("  bob:pw  \r\nann:x\r\n");
        let b = block(json!({"^filename": f.path()}));
        assert!(check(&b, "bob", "pw"));
        assert!(check(&b, "ann", "x"));
        // The first line for a user decides.
        let f = file_with("bob:one\nbob:two\n");
        let b = block(json!({"^filename": f.path()}));
        assert!(check(&b, "bob", "one"));
        assert!(!check(&b, "bob", "two"));
    }

    #[test]
    fn configuration_errors_are_backend_errors() {
        let missing = block(json!({"^filename": "/nonexistent/brine/users"}));
        assert!(matches!(
            authenticate(&missing, "a", "b"),
            Err(EauthError::Backend(_))
        ));
        assert!(matches!(
            authenticate(&block(json!({})), "a", "b"),
            Err(EauthError::Backend(_))
        ));
        let f = file_with("a:b\n");
        let odd = block(json!({"^filename": f.path(), "^filetype": "HTPASSWD"}));
        assert!(matches!(
            authenticate(&odd, "a", "b"),
            Err(EauthError::Backend(_))
        ));
    }

    #[test]
    fn htpasswd_schemes() {
        let bcrypt_hash = bcrypt::hash("bc-pass", 4).expect("bcrypt");
        let bcrypt_2y = bcrypt::hash_with_result("bc-pass", 4)
            .expect("bcrypt")
            .format_for_version(bcrypt::Version::TwoY);
        let content = format!(
            "# comment\n\
             apr:$apr1$abcdefgh$FBwExRW4dCc8aL.OvjpIE1\n\
             bc:{bcrypt_hash}\n\
             bc2y:{bcrypt_2y}\n\
             des:abJnggxhB/yWI\n\
             sha:{{SHA}}5en6G6MezRroT3XKqkdPOmY/BfQ=\n\
             \n\
             s512:$6$saltsalt$qFmFH.bQmmtXzyBY0s9v7Oicd2z4XSIecDzlB5KiA2/jctKu9YterLp8wwnSq.qc.eoxqOmSuNp2xS0ktL3nh/\n\
             plain:letmein\n\
             md5:$1$abcdefgh$G//4keteveJp0qb8z2DxG/\n\
             apr:$apr1$first$wins\n"
        );
        let f = file_with(&content);
        let b = block(json!({"^filename": f.path(), "^filetype": "htpasswd"}));
        assert!(check(&b, "apr", "password"));
        assert!(!check(&b, "apr", "Password"));
        assert!(check(&b, "bc", "bc-pass"));
        assert!(!check(&b, "bc", "bc-pas"));
        assert!(check(&b, "bc2y", "bc-pass"));
        assert!(check(&b, "des", "password"));
        assert!(!check(&b, "des", "passwor"));
        assert!(check(&b, "sha", "secret"));
        assert!(!check(&b, "sha", "secret2"));
        assert!(check(&b, "s512", "password"));
        assert!(check(&b, "plain", "letmein"));
        assert!(!check(&b, "plain", "letmeout"));
        // `$1$` is not in passlib's htpasswd context: it is compared as plain text.
        assert!(!check(&b, "md5", "password"));
        assert!(check(&b, "md5", "$1$abcdefgh$G//4keteveJp0qb8z2DxG/"));
        assert!(!check(&b, "nobody", "x"));
        assert!(!check(&b, "apr:x", "password"));
    }

    #[test]
    fn malformed_htpasswd_file_is_rejected_whole() {
        let f = file_with("good:pw\nbad:line:extra\n");
        let b = block(json!({"^filename": f.path(), "^filetype": "htpasswd"}));
        assert!(matches!(
            authenticate(&b, "good", "pw"),
            Err(EauthError::Backend(_))
        ));
    }

    #[test]
    fn htdigest_file() {
        let f = file_with(
            "alice:realm1:7d97099674fa7503adc2add5d746b98c\nalice:other:00000000000000000000000000000000\n",
        );
        let with_realm = |realm: &str| {
            block(json!({"^filename": f.path(), "^filetype": "htdigest", "^realm": realm}))
        };
        assert!(check(&with_realm("realm1"), "alice", "secret"));
        assert!(!check(&with_realm("realm1"), "alice", "wrong"));
        assert!(!check(&with_realm("other"), "alice", "secret"));
        assert!(!check(&with_realm("realm1"), "bob", "secret"));
        let no_realm = block(json!({"^filename": f.path(), "^filetype": "htdigest"}));
        assert!(matches!(
            authenticate(&no_realm, "alice", "secret"),
            Err(EauthError::Backend(_))
        ));
    }
}
