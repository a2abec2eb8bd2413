//! The `gpg` renderer against real GnuPG and Salt's own renderer: a key made in a temporary
//! key directory, a pillar file with two encrypted values (one in a list, one in a longer
//! string), one value that does not decrypt; Brine's data must equal Salt's.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use brine_render::{render_sls, Context, Loader, NoFunctions};
use serde_json::json;

struct NoFiles;

impl Loader for NoFiles {
    fn load(&self, _saltenv: &str, _path: &str) -> Result<Option<String>, String> {
        Ok(None)
    }
}

fn gpg(home: &Path, args: &[&str], input: Option<&str>) -> String {
    let mut child = Command::new("gpg")
        .arg("--homedir")
        .arg(home)
        .args(["--batch", "--no-tty"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpg starts");
    if let Some(text) = input {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "gpg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Stops the key directory's gpg-agent when the test ends.
struct Agent<'a>(&'a Path);

impl Drop for Agent<'_> {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(self.0)
            .args(["--kill", "gpg-agent"])
            .status();
    }
}

#[test]
fn encrypted_pillar_values_decrypt_as_salts_gpg_renderer_does() {
    if brine_render::which("gpg").is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "gpg is missing"
        );
        eprintln!("skipped: no gpg");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keydir = dir.path().join("gpgkeys");
    std::fs::create_dir(&keydir).unwrap();
    std::fs::set_permissions(&keydir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let _agent = Agent(&keydir);
    let uid = "Brine Test <pillar@example.invalid>";
    gpg(
        &keydir,
        &[
            "--passphrase",
            "",
            "--quick-gen-key",
            uid,
            "ed25519",
            "cert",
            "never",
        ],
        None,
    );
    let listing = gpg(&keydir, &["--with-colons", "--list-keys", uid], None);
    let fpr = listing
        .lines()
        .find_map(|l| l.strip_prefix("fpr:"))
        .and_then(|l| l.trim_matches(':').split(':').next_back())
        .expect("a fingerprint")
        .to_string();
    gpg(
        &keydir,
        &[
            "--passphrase",
            "",
            "--quick-add-key",
            &fpr,
            "cv25519",
            "encr",
            "never",
        ],
        None,
    );
    let encrypt = |text: &str| {
        gpg(
            &keydir,
            &[
                "--trust-model",
                "always",
                "-ea",
                "-r",
                "pillar@example.invalid",
            ],
            Some(text),
        )
    };
    let indent = |block: &str| {
        block
            .lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let sls = format!(
        "#!yaml|gpg\ndb_password: |\n{}\nkeys:\n  - plain\n  - |\n{}\nbroken: |\n    -----BEGIN PGP MESSAGE-----\n    not a message\n    -----END PGP MESSAGE-----\n",
        indent(&encrypt("s3cret")),
        indent(&encrypt("second\nline\n")).replace("    ", "      "),
    );
    let path = dir.path().join("secrets.sls");
    std::fs::write(&path, &sls).unwrap();
    let keydir_text = keydir.display().to_string();
    let ctx = |must_succeed: bool| Context {
        opts: json!({"gpg_keydir": keydir_text, "gpg_decrypt_must_succeed": must_succeed}),
        saltenv: "base".into(),
        sls: "secrets".into(),
        ..Context::default()
    };
    let render = |must_succeed: bool| {
        render_sls(
            &sls,
            "secrets.sls",
            &ctx(must_succeed),
            Arc::new(NoFiles),
            Arc::new(NoFunctions),
        )
    };
    // A message that does not decrypt fails the render by default.
    let err = render(true).expect_err("the broken message");
    assert!(
        err.to_string().contains("Could not decrypt cipher"),
        "{err}"
    );
    let data = render(false).expect("renders");
    assert_eq!(data["db_password"], json!("s3cret"));
    assert_eq!(data["keys"], json!(["plain", "second\nline"]));
    assert!(data["broken"]
        .as_str()
        .unwrap()
        .starts_with("-----BEGIN PGP MESSAGE-----"));

    // Salt's own renderer, on the same file and key directory.
    let script = dir.path().join("salt_gpg.py");
    std::fs::write(
        &script,
        "import json, sys\nimport salt.config, salt.loader, salt.template\n\
         opts = salt.config.minion_config(None)\n\
         opts.update(file_client='local', gpg_keydir=sys.argv[2], gpg_decrypt_must_succeed=False, cachedir=sys.argv[3])\n\
         rend = salt.loader.render(opts, salt.loader.minion_mods(opts))\n\
         data = salt.template.compile_template(sys.argv[1], rend, 'jinja|yaml', [], [], saltenv='base', sls='secrets')\n\
         json.dump(data, sys.stdout)\n",
    )
    .unwrap();
    let cache = dir.path().join("cache");
    let Some(out) = brine_render::oracle::run_with(&script, &[&path, &keydir, &cache]) else {
        return;
    };
    let salt: serde_json::Value = serde_json::from_slice(&out).expect("salt's data");
    assert_eq!(data, salt);
}
