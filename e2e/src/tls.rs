//! Test certificates made with the `openssl` command: a CA of the test's own and
//! certificates it signs (EC P-256 keys, valid two days), written as `<name>.pem` and
//! `<name>.key` in a directory.

use std::path::Path;
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        crate::stderr(&out)
    );
}

const KEY: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];

/// A self-signed CA: `<name>.pem`, `<name>.key`.
pub fn make_ca(dir: &Path, name: &str) {
    let (pem, key) = (format!("{name}.pem"), format!("{name}.key"));
    let mut args = vec!["req", "-x509", "-nodes", "-days", "2"];
    args.extend(KEY);
    args.extend(["-subj", "/CN=Brine test CA", "-keyout", &key, "-out", &pem]);
    openssl(dir, &args);
}

/// A certificate for `host` (its common name, and its subject alternative name when it is
/// an IP address or `localhost`) signed by the CA `ca`, good for servers and clients.
pub fn make_signed(dir: &Path, ca: &str, name: &str, host: &str) {
    let (pem, key, csr, ext) = (
        format!("{name}.pem"),
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.ext"),
    );
    let san = if host.parse::<std::net::IpAddr>().is_ok() {
        format!("IP:{host}")
    } else {
        format!("DNS:{host}")
    };
    std::fs::write(
        dir.join(&ext),
        format!(
            "basicConstraints=CA:FALSE\nsubjectAltName={san}\n\
             extendedKeyUsage=serverAuth,clientAuth\n"
        ),
    )
    .unwrap();
    let subj = format!("/CN={host}");
    let mut args = vec!["req", "-nodes"];
    args.extend(KEY);
    args.extend(["-subj", &subj, "-keyout", &key, "-out", &csr]);
    openssl(dir, &args);
    let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &pem,
        ],
    );
}
