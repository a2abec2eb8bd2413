//! `pkg.info_installed` as Salt's aptpkg answers it, through its `dpkg_lowpkg.info`: the
//! fields dpkg-query knows of each installed package (with what `dpkg-query --print-avail`
//! adds when dselect is installed, and the licenses of the package's copyright file),
//! under Salt's common names (`name`, `vendor`, `group`, `packager`, `url`); and `pkg.show`,
//! apt-cache's records by name and version.

use rmpv::Value;

use super::super::args::{py_str, split_input, Bound};
use super::super::cmd::{run_argv, which, RunOutput};
use super::super::FnError;

/// dpkg-query's format: one `key:value` line per field, the description last, then a marker.
const FORMAT: &str = "-f=package:${Package}\\n\
    revision:${binary:Revision}\\n\
    architecture:${Architecture}\\n\
    maintainer:${Maintainer}\\n\
    summary:${Summary}\\n\
    source:${source:Package}\\n\
    version:${Version}\\n\
    section:${Section}\\n\
    installed_size:${Installed-size}\\n\
    size:${Size}\\n\
    MD5:${MD5sum}\\n\
    SHA1:${SHA1}\\n\
    SHA256:${SHA256}\\n\
    origin:${Origin}\\n\
    homepage:${Homepage}\\n\
    status:${db:Status-Abbrev}\\n\
    install_date:${db-fsys:Last-Modified}\\n\
    description:${Description}\\n\
    \\n*/~^\\\\*\\n";

/// The marker dpkg-query prints after each package (`\n*/~^\*`), as its output shows it.
const MARKER: &str = "\n*/~^\\*";

/// Fields `lowpkg.info` drops.
const TECHNICAL: &[&str] = &[
    "installed_size",
    "depends",
    "recommends",
    "provides",
    "replaces",
    "conflicts",
    "bugs",
    "description-md5",
    "task",
];

type Fields = Vec<(String, String)>;

/// `pkg.info_installed`: the answer and the exit code of the last command run.
pub(super) async fn info_installed(b: &Bound) -> Result<(Value, i32), FnError> {
    b.only_kwargs(&["failhard"])?;
    let failhard = b
        .kwarg("failhard")
        .is_none_or(brine_protocol::payload::py_truthy);
    let names: Vec<String> = b.varargs.iter().map(py_str).collect();
    let avail = dselect_avail().await?;
    let mut cmd = vec!["dpkg-query".to_string(), "-W".into(), FORMAT.into()];
    cmd.extend(names);
    let out = run_argv(&cmd, &[]).await?;
    let rc = exit_code(&out);
    if rc != 0 {
        if failhard {
            return Err(FnError::Execution(format!(
                "Error getting packages information: {}",
                out.stderr()
            )));
        }
        return Ok((Value::Map(Vec::new()), rc));
    }
    // `lowpkg.info`: by package name, a later entry (another architecture) in the first
    // one's place.
    let mut infos: Vec<(String, Fields)> = Vec::new();
    for mut pkg in parse(out.stdout()) {
        let name = field(&pkg, "package").unwrap_or_default().to_string();
        if let Some(extra) = avail.iter().find(|(n, _)| *n == name).map(|(_, f)| f) {
            for (k, v) in extra {
                if field(&pkg, k).is_none() {
                    pkg.push((k.clone(), v.clone()));
                }
            }
        }
        pkg.retain(|(k, _)| !TECHNICAL.contains(&k.as_str()));
        let license = licenses(&name);
        if !license.is_empty() {
            pkg.push(("license".into(), license));
        }
        match infos.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = pkg,
            None => infos.push((name, pkg)),
        }
    }
    // Only what is installed, under the common names.
    let mut ret = Vec::new();
    for (name, pkg) in infos {
        if field(&pkg, "status").unwrap_or("ii").chars().nth(1) != Some('i') {
            continue;
        }
        let common: Vec<(Value, Value)> = pkg
            .into_iter()
            .filter(|(k, _)| k != "status")
            .map(|(k, v)| {
                let key = match k.as_str() {
                    "package" => "name",
                    "origin" => "vendor",
                    "section" => "group",
                    "maintainer" => "packager",
                    "homepage" => "url",
                    other => other,
                };
                (Value::from(key), Value::from(v))
            })
            .collect();
        ret.push((Value::from(name), Value::Map(common)));
    }
    Ok((Value::Map(ret), rc))
}

/// `pkg.show`: `apt-cache show` of the names, `{name: {version: {field: value}}}`, the fields
/// limited to `filter` when given; the exit code of the last command run.
pub(super) async fn show(pkg: &super::Pkg<'_>, b: &Bound) -> Result<(Value, i32), FnError> {
    b.only_kwargs(&["refresh", "filter"])?;
    let refresh = b
        .kwarg("refresh")
        .is_some_and(brine_protocol::payload::py_truthy);
    let filter: Vec<String> = b.kwarg("filter").map_or_else(Vec::new, |v| {
        split_input(v).iter().map(|f| f.to_lowercase()).collect()
    });
    if refresh {
        pkg.refresh_db(0).await?;
    }
    if b.varargs.is_empty() {
        return Ok((Value::Map(Vec::new()), 0));
    }
    let mut cmd = vec!["apt-cache".to_string(), "show".into()];
    cmd.extend(b.varargs.iter().map(py_str));
    let out = pkg.run(cmd).await?;
    let rc = exit_code(&out);
    Ok((records_value(&records(out.stdout(), &filter)), rc))
}

/// A package's records by version, each a list of fields.
type Records = Vec<(String, Vec<(String, Fields)>)>;

/// apt-cache's records as Salt reads them: `key: value` lines (any line with a colon,
/// continuation lines too), a blank line between records, `Package` and `Version` taken out
/// as the keys; with a filter, only the fields it names.
fn records(stdout: &str, filter: &[String]) -> Records {
    let keep = |key: &str| {
        let key = key.to_lowercase();
        key == "package" || key == "version" || filter.is_empty() || filter.contains(&key)
    };
    let mut ret: Records = Vec::new();
    let mut add = |info: &mut Fields| {
        let take = |info: &mut Fields, key: &str| {
            let i = info.iter().position(|(k, _)| k == key)?;
            Some(info.remove(i).1)
        };
        let (name, version) = (take(info, "Package"), take(info, "Version"));
        if let (Some(name), Some(version)) = (name, version) {
            let versions = match ret.iter().position(|(n, _)| *n == name) {
                Some(i) => &mut ret[i].1,
                None => {
                    ret.push((name, Vec::new()));
                    &mut ret.last_mut().expect("just pushed").1
                }
            };
            let fields = match versions.iter().position(|(v, _)| *v == version) {
                Some(i) => &mut versions[i].1,
                None => {
                    versions.push((version, Vec::new()));
                    &mut versions.last_mut().expect("just pushed").1
                }
            };
            for (k, v) in info.drain(..) {
                match fields.iter_mut().find(|(k2, _)| *k2 == k) {
                    Some(slot) => slot.1 = v,
                    None => fields.push((k, v)),
                }
            }
        }
        info.clear();
    };
    let mut info: Fields = Vec::new();
    for line in stdout.split('\n') {
        let line = line.trim();
        if line.is_empty() {
            add(&mut info);
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            let key = key.trim();
            if keep(key) {
                match info.iter_mut().find(|(k, _)| k == key) {
                    Some(slot) => slot.1 = value.trim().to_string(),
                    None => info.push((key.to_string(), value.trim().to_string())),
                }
            }
        }
    }
    add(&mut info);
    ret
}

fn records_value(records: &Records) -> Value {
    let pairs = |fields: &Fields| {
        Value::Map(
            fields
                .iter()
                .map(|(k, v)| (Value::from(k.as_str()), Value::from(v.as_str())))
                .collect(),
        )
    };
    Value::Map(
        records
            .iter()
            .map(|(name, versions)| {
                let versions = versions
                    .iter()
                    .map(|(v, f)| (Value::from(v.as_str()), pairs(f)))
                    .collect();
                (Value::from(name.as_str()), Value::Map(versions))
            })
            .collect(),
    )
}

fn exit_code(out: &RunOutput) -> i32 {
    i32::try_from(out.retcode()).unwrap_or(1)
}

fn field<'a>(fields: &'a Fields, key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Each package's fields from dpkg-query's output, empty values left out, `install_date` (a
/// Unix time) in ISO form.
fn parse(stdout: &str) -> Vec<Fields> {
    let mut out = Vec::new();
    for chunk in split_marked(stdout) {
        let Some((head, description)) = chunk.split_once("\ndescription:") else {
            continue;
        };
        let mut fields: Fields = Vec::new();
        for line in head.split('\n').map(str::trim).filter(|l| !l.is_empty()) {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = if key == "install_date" {
                value
                    .parse::<i64>()
                    .ok()
                    .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
                    .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                    .unwrap_or_default()
            } else {
                value.to_string()
            };
            if value.is_empty() {
                continue;
            }
            match fields.iter_mut().find(|(k, _)| k == key) {
                Some(slot) => slot.1 = value,
                None => fields.push((key.to_string(), value)),
            }
        }
        fields.push(("description".into(), description.to_string()));
        out.push(fields);
    }
    out
}

/// The text between markers (`re.split` on the marker and its line end), blank pieces left
/// out.
fn split_marked(stdout: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = stdout;
    loop {
        let (piece, after) = match rest.find(MARKER) {
            Some(i) => {
                let before = rest[..i].strip_suffix('\r').unwrap_or(&rest[..i]);
                let after = &rest[i + MARKER.len()..];
                let after = after
                    .strip_prefix("\r\n")
                    .or_else(|| after.strip_prefix('\n'))
                    .unwrap_or(after);
                (before, Some(after))
            }
            None => (rest, None),
        };
        if !piece.trim().is_empty() {
            pieces.push(piece);
        }
        match after {
            Some(a) => rest = a,
            None => break,
        }
    }
    pieces
}

/// What `dpkg-query --print-avail` knows of each package, when dselect (which keeps it up
/// to date) is installed: lowercased field names, empty values left out.
async fn dselect_avail() -> Result<Vec<(String, Fields)>, FnError> {
    if which("dselect").is_none() {
        return Ok(Vec::new());
    }
    let cmd = vec!["dpkg-query".to_string(), "--print-avail".into()];
    let out = run_argv(&cmd, &[]).await?;
    if out.retcode() != 0 {
        return Ok(Vec::new());
    }
    let mut ret: Vec<(String, Fields)> = Vec::new();
    for piece in out.stdout().split("Package:") {
        let block = format!("Package:{piece}");
        let mut nfo: Fields = Vec::new();
        for line in block.split('\n') {
            let Some((key, value)) = line.split_once(": ") else {
                continue;
            };
            if value.trim().is_empty() {
                continue;
            }
            let key = key.to_lowercase();
            match nfo.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value.to_string(),
                None => nfo.push((key, value.to_string())),
            }
        }
        if let Some(name) = field(&nfo, "package").map(str::to_string) {
            match ret.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = nfo,
                None => ret.push((name, nfo)),
            }
        }
    }
    Ok(ret)
}

/// The licenses `/usr/share/doc/<package>/copyright` names, sorted, joined with `, `.
fn licenses(package: &str) -> String {
    let Ok(bytes) = std::fs::read(format!("/usr/share/doc/{package}/copyright")) else {
        return String::new();
    };
    let text: String = String::from_utf8_lossy(&bytes).replace('\u{fffd}', "");
    let mut found: Vec<String> = text
        .split('\n')
        .filter_map(|l| l.strip_prefix("License:"))
        .map(|l| l.trim().to_string())
        .collect();
    found.sort();
    found.dedup();
    found.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_cache_records_read_as_salt_reads_them() {
        let out = "Package: gawk\nVersion: 1:5.2.1-2\nSection: interpreters\n\
                   Description-en: GNU awk\n Note: a continuation line with a colon\n\n\
                   Package: gawk\nVersion: 1:5.2.1-2\nSection: utils\n\n\
                   Package: gawk\nVersion: 1:5.1.0-1\nPriority: optional";
        let all = records_value(&records(out, &[]));
        assert_eq!(
            brine_protocol::payload::to_json(&all),
            serde_json::json!({"gawk": {
                "1:5.2.1-2": {"Section": "utils", "Description-en": "GNU awk",
                              "Note": "a continuation line with a colon"},
                "1:5.1.0-1": {"Priority": "optional"}}})
        );
        let some = records_value(&records(out, &["section".to_string()]));
        assert_eq!(
            brine_protocol::payload::to_json(&some),
            serde_json::json!({"gawk": {"1:5.2.1-2": {"Section": "utils"}, "1:5.1.0-1": {}}})
        );
    }

    #[test]
    fn dpkg_query_output_read_as_salt_reads_it() {
        let out = "package:hello\nrevision:\narchitecture:amd64\nmaintainer:Santiago <s@d.org>\n\
                   version:2.10-3\nstatus:ii \ninstall_date:1747699200\n\
                   description:example package\n GNU hello prints.\n .\n more\n\n*/~^\\*\n\
                   package:sl\nstatus:rc \ninstall_date:\ndescription:trains\n\n*/~^\\*";
        let pkgs = parse(out);
        assert_eq!(pkgs.len(), 2);
        assert_eq!(
            pkgs[0],
            [
                ("package", "hello"),
                ("architecture", "amd64"),
                ("maintainer", "Santiago <s@d.org>"),
                ("version", "2.10-3"),
                ("status", "ii"),
                ("install_date", "2025-05-20T00:00:00Z"),
                (
                    "description",
                    "example package\n GNU hello prints.\n .\n more\n"
                ),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        assert_eq!(field(&pkgs[1], "install_date"), None);
        assert_eq!(field(&pkgs[1], "description"), Some("trains\n"));
    }
}
