//! Salt's `gpg` renderer (`#!yaml|gpg`, `#!jinja|yaml|gpg`): every PGP message block in the
//! rendered data's strings is decrypted with `gpg --homedir <gpg_keydir> -d`, the key
//! directory being the `gpg_keydir` option or `<config_dir>/gpgkeys`. A block that does not
//! decrypt fails the render (`gpg_decrypt_must_succeed`, True by default) or stays as it was.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use regex::bytes::Regex;
use serde_json::Value;

/// The options the renderer reads.
pub(crate) struct Gpg {
    keydir: String,
    must_succeed: bool,
    translate_newlines: bool,
}

fn ciphertext() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?s)-----BEGIN PGP MESSAGE-----.*?-----END PGP MESSAGE-----")
            .expect("a valid pattern")
    })
}

impl Gpg {
    /// From the daemon's options; `translate_newlines` is the renderer's keyword (Salt's
    /// `#!yaml|gpg` never sets it).
    pub(crate) fn from_opts(opts: &Value) -> Gpg {
        let text = |key: &str| {
            opts.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let keydir = match text("gpg_keydir") {
            Some(dir) => dir.to_string(),
            None => {
                let config_dir = text("config_dir")
                    .map(str::to_string)
                    .or_else(|| text("conf_file").map(brine_protocol::posixpath::dirname));
                brine_protocol::posixpath::join(
                    config_dir.as_deref().unwrap_or("/etc/salt"),
                    "gpgkeys",
                )
            }
        };
        let must_succeed = opts
            .get("gpg_decrypt_must_succeed")
            .is_none_or(brine_protocol::payload::json_truthy);
        Gpg {
            keydir,
            must_succeed,
            translate_newlines: false,
        }
    }

    /// The data with every PGP message decrypted, through mappings and lists.
    pub(crate) fn decrypt(&self, data: Value, depth: usize) -> Result<Value, String> {
        if depth > 256 {
            return Err("the data is nested too deeply to decrypt".into());
        }
        Ok(match data {
            Value::String(s) => Value::String(self.decrypt_text(&s)?),
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|v| self.decrypt(v, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| Ok((k, self.decrypt(v, depth + 1)?)))
                    .collect::<Result<_, String>>()?,
            ),
            other => other,
        })
    }

    /// Salt's `_decrypt_ciphertexts` of one string: each block replaced by its plain text,
    /// trailing newlines removed when any was.
    fn decrypt_text(&self, text: &str) -> Result<String, String> {
        let mut cipher = text.as_bytes().to_vec();
        if self.translate_newlines {
            cipher = String::from_utf8_lossy(&cipher)
                .replace("\\n", "\n")
                .into_bytes();
        }
        let re = ciphertext();
        if !re.is_match(&cipher) {
            return Ok(text.to_string());
        }
        let mut out = Vec::with_capacity(cipher.len());
        let mut last = 0;
        for m in re.find_iter(&cipher) {
            out.extend_from_slice(&cipher[last..m.start()]);
            out.extend_from_slice(&self.decrypt_block(m.as_bytes())?);
            last = m.end();
        }
        out.extend_from_slice(&cipher[last..]);
        while out.last() == Some(&b'\n') {
            out.pop();
        }
        // Decrypted bytes that are not UTF-8 are kept as Salt keeps them: not our problem,
        // but JSON data holds text only.
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn decrypt_block(&self, block: &[u8]) -> Result<Vec<u8>, String> {
        let block = String::from_utf8_lossy(block)
            .replace("\\n", "\n")
            .into_bytes();
        let gpg = crate::which("gpg").ok_or_else(|| "GPG unavailable".to_string())?;
        let child = Command::new(gpg)
            .args([
                "--homedir",
                &self.keydir,
                "--status-fd",
                "2",
                "--no-tty",
                "-d",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let (plain, err) = match child {
            Ok(mut child) => {
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(&block);
                }
                match child.wait_with_output() {
                    Ok(o) => (o.stdout, o.stderr),
                    Err(e) => (Vec::new(), e.to_string().into_bytes()),
                }
            }
            Err(e) => (Vec::new(), e.to_string().into_bytes()),
        };
        if !plain.is_empty() {
            return Ok(plain);
        }
        let (mut c, mut e) = (String::new(), String::new());
        brine_protocol::pyrepr::write_bytes_repr(&mut c, &block);
        brine_protocol::pyrepr::write_bytes_repr(&mut e, &err);
        if self.must_succeed {
            return Err(format!("Could not decrypt cipher {c}, received: {e}"));
        }
        tracing::warn!("Could not decrypt cipher {c}, received: {e}");
        Ok(block)
    }
}
