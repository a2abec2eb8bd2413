//! The `locale` execution module as Salt's `localemod` on Linux: the system locale through
//! `localectl` where systemd runs (`/etc/locale.conf` written when `localectl set-locale`
//! fails), else the family's file (`/etc/default/locale` after `update-locale` on Debian,
//! `/etc/sysconfig/i18n`, `/etc/sysconfig/language`); locales listed with `locale -a`
//! and generated from `/etc/locale.gen` with `locale-gen` (or `localedef`).

use std::path::Path;

use rmpv::Value;

use super::args::{is_true, py_str, Bound, Signature};
use super::cmd::{run_argv, run_argv_merged, which};
use super::{call_kwargs, CallState, Context, FnError, Spec};
use brine_protocol::payload::get_str;

super::spec_table! {
    /// The functions of the `locale` module.
    ListAvail => ("locale.list_avail", "list_avail", [], 0, false, false, "
    The compiled locales (locale -a).

    CLI Example:

        salt '*' locale.list_avail
    "),
    Avail => ("locale.avail", "avail", ["locale"], 1, false, false, "
    Whether a locale is compiled (names compared normalized: en_US.utf8 is en_US.UTF-8).

    CLI Example:

        salt '*' locale.avail 'en_US.UTF-8'
    "),
    GetLocale => ("locale.get_locale", "get_locale", [], 0, false, false, "
    The system's LANG.

    CLI Example:

        salt '*' locale.get_locale
    "),
    SetLocale => ("locale.set_locale", "set_locale", ["locale"], 1, false, false, "
    Set the system's LANG.

    CLI Example:

        salt '*' locale.set_locale 'en_US.UTF-8'
    "),
    GenLocale => ("locale.gen_locale", "gen_locale", ["locale"], 1, false, true, "
    Generate a locale the system supports (uncommented or added in /etc/locale.gen,
    then locale-gen). verbose=True answers with the command's retcode, stdout and
    stderr.

    CLI Example:

        salt '*' locale.gen_locale en_US.UTF-8
    "),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
        let locale = b.get("locale").map(py_str).unwrap_or_default();
        // Salt's answers keep the exit code of the last command its `cmd` functions ran as
        // the job's; `rc` collects it.
        let mut rc = 0;
        let answer = match self {
            Fun::ListAvail => Ok(Value::Array(
                list_avail(&mut rc).await?.into_iter().map(Value::from).collect(),
            )),
            Fun::Avail => avail(&mut rc, &locale).await.map(Value::Boolean),
            Fun::GetLocale => get_locale(&mut rc, ctx).await.map(Value::from),
            Fun::SetLocale => set_locale(&mut rc, ctx, &locale).await,
            Fun::GenLocale => gen_locale(&mut rc, ctx, b, &locale).await,
        };
        st.retcode = rc;
        answer
    }
}

/// A locale's parts (Salt's `split_locale`): language, territory, codeset, modifier,
/// charmap.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Parts {
    language: String,
    territory: String,
    codeset: String,
    modifier: String,
    charmap: String,
}

fn split2(s: &str, c: char) -> (String, String) {
    match s.split_once(c) {
        Some((a, b)) => (a.into(), b.into()),
        None => (s.into(), String::new()),
    }
}

impl Parts {
    fn split(loc: &str) -> Parts {
        let (work, charmap) = split2(loc, ' ');
        let (work, modifier) = split2(&work, '@');
        let (work, codeset) = split2(&work, '.');
        let (language, territory) = split2(&work, '_');
        Parts {
            language,
            territory,
            codeset,
            modifier,
            charmap,
        }
    }

    /// Salt's `join_locale`.
    fn join(&self) -> String {
        let mut loc = self.language.clone();
        for (sep, part) in [
            ('_', &self.territory),
            ('.', &self.codeset),
            ('@', &self.modifier),
            (' ', &self.charmap),
        ] {
            if !part.is_empty() {
                loc.push(sep);
                loc.push_str(part);
            }
        }
        loc
    }

    /// Salt's `normalize_locale`.
    fn normalize(loc: &str) -> String {
        let mut p = Parts::split(loc);
        p.territory = p.territory.to_uppercase();
        p.codeset = p.codeset.to_lowercase().replace('-', "");
        p.charmap.clear();
        p.join()
    }
}

/// Salt's `cmd.run`: the output (standard error merged), its exit code kept in `rc`.
async fn cmd_run(rc: &mut i32, argv: &[&str]) -> Result<String, FnError> {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let out = run_argv_merged(&argv, &[]).await?;
    *rc = out.exit_code();
    Ok(out.stdout().to_string())
}

/// A command as Salt's `cmd.retcode`/`cmd.run_all` run it, its exit code kept in `rc`.
async fn cmd_all(rc: &mut i32, argv: &[String]) -> Result<super::cmd::RunOutput, FnError> {
    let out = run_argv(argv, &[]).await?;
    *rc = out.exit_code();
    Ok(out)
}

async fn list_avail(rc: &mut i32) -> Result<Vec<String>, FnError> {
    Ok(cmd_run(rc, &["locale", "-a"])
        .await?
        .split('\n')
        .map(str::to_string)
        .collect())
}

async fn avail(rc: &mut i32, locale: &str) -> Result<bool, FnError> {
    let want = Parts::normalize(locale);
    Ok(list_avail(rc)
        .await?
        .iter()
        .any(|l| Parts::normalize(brine_protocol::pystr::strip(l)) == want))
}

/// Whether systemd runs (Salt's `salt.utils.systemd.booted`).
fn booted() -> bool {
    Path::new("/run/systemd/system").exists()
}

/// Whether Salt asks localectl on this minion (not on SLE 12, whose localectl is broken).
fn use_localectl(ctx: &Context) -> bool {
    let grains = ctx.grains.as_ref();
    let sle12 = get_str(grains, "os_family") == Some("Suse")
        && brine_protocol::payload::get(grains, "osmajorrelease").and_then(Value::as_i64) == Some(12);
    booted() && !sle12
}

/// Salt's `_localectl_status`: `localectl status` by key (`system_locale`: its variables).
async fn localectl_status(rc: &mut i32) -> Result<Vec<(String, Vec<(String, String)>)>, FnError> {
    if which("localectl").is_none() {
        return Err(FnError::Execution("Unable to find \"localectl\"".into()));
    }
    let probe = run_argv(&["localectl".to_string()], &[]).await?;
    if probe
        .stderr()
        .contains("Failed to connect to bus: No such file or directory")
    {
        return Err(FnError::Execution(
            "Command \"localectl\" is in a degraded state.".into(),
        ));
    }
    let out = cmd_run(rc, &["localectl", "status"]).await?;
    let mut ret: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut key: Option<String> = None;
    for line in brine_protocol::pystr::strip(&out).lines() {
        let data = match line.split_once(": ") {
            Some((k, d)) => {
                key = Some(k.trim().to_lowercase().replace(' ', "_"));
                d.to_string()
            }
            None => line.trim().to_string(),
        };
        let (Some(k), false) = (&key, data.is_empty()) else {
            continue;
        };
        let slot = match ret.iter().position(|(name, _)| name == k) {
            Some(i) => i,
            None => {
                ret.push((k.clone(), Vec::new()));
                ret.len() - 1
            }
        };
        if let Some((var, value)) = data.split_once('=').filter(|(_, v)| !v.contains('=')) {
            ret[slot].1.push((var.to_string(), value.to_string()));
        }
    }
    if ret.is_empty() {
        return Err(FnError::Execution(
            "Unable to parse result of \"localectl\"".into(),
        ));
    }
    Ok(ret)
}

/// The `system_locale` variables `localectl status` shows.
async fn system_locale(rc: &mut i32) -> Result<Vec<(String, String)>, FnError> {
    Ok(localectl_status(rc)
        .await?
        .into_iter()
        .find(|(k, _)| k == "system_locale")
        .map(|(_, v)| v)
        .unwrap_or_default())
}

async fn get_locale(rc: &mut i32, ctx: &Context) -> Result<String, FnError> {
    if use_localectl(ctx) {
        let vars = system_locale(rc).await?;
        return Ok(vars
            .into_iter()
            .find(|(k, _)| k == "LANG")
            .map(|(_, v)| v)
            .unwrap_or_default());
    }
    let family = get_str(ctx.grains.as_ref(), "os_family").unwrap_or_default();
    let grep = |file: &'static str, key: &'static str| (file, key);
    let (file, key) = if family.contains("Suse") {
        grep("/etc/sysconfig/language", "^RC_LANG")
    } else if family.contains("RedHat") {
        grep("/etc/sysconfig/i18n", "^LANG=")
    } else if family.contains("Debian") {
        grep("/etc/default/locale", "^LANG=")
    } else if family.contains("Gentoo") {
        return Ok(brine_protocol::pystr::strip(&cmd_run(rc, &["eselect", "--brief", "locale", "show"]).await?).to_string());
    } else {
        let codename = get_str(ctx.grains.as_ref(), "oscodename").unwrap_or_default();
        return Err(FnError::Execution(format!(
            "Error: \"{codename}\" is unsupported!"
        )));
    };
    let out = cmd_run(rc, &["grep", key, file]).await?;
    match out.split('=').nth(1) {
        Some(value) => Ok(value.replace('"', "")),
        None => {
            tracing::error!("Error occurred while running \"grep \\\"{key}\\\" {file}\": list index out of range");
            Ok(String::new())
        }
    }
}

/// `file.replace` of `path` with `append_if_not_found`, as Salt's locale module calls it.
async fn replace_line(ctx: &Context, path: &str, pattern: &str, repl: &str) -> Result<(), FnError> {
    let kwargs = [
        ("path", Value::from(path)),
        ("pattern", Value::from(pattern)),
        ("repl", Value::from(repl)),
        ("append_if_not_found", Value::Boolean(true)),
    ];
    call_kwargs(ctx, "file.replace", &kwargs).await.map(|_| ())
}

/// The file made empty when missing (Salt's `file.touch` before a `file.replace`).
fn touch(path: &str) -> Result<(), FnError> {
    if !Path::new(path).is_file() {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| FnError::Exception(brine_protocol::pyrepr::os_exception(&e, Some(path))))?;
    }
    Ok(())
}

async fn set_locale(rc: &mut i32, ctx: &Context, locale: &str) -> Result<Value, FnError> {
    if use_localectl(ctx) {
        let mut vars = system_locale(rc).await?;
        match vars.iter_mut().find(|(k, _)| k == "LANG") {
            Some((_, v)) => *v = locale.to_string(),
            None => vars.push(("LANG".into(), locale.to_string())),
        }
        let args: Vec<String> = vars.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        let cmd = format!("localectl set-locale {}", args.join(" "));
        let argv = brine_protocol::pyrepr::shlex_split(&cmd).map_err(FnError::Invocation)?;
        if cmd_all(rc, &argv).await?.retcode() == 0 {
            return Ok(Value::Boolean(true));
        }
        tracing::debug!("localectl set-locale failed; writing /etc/locale.conf directly");
        touch("/etc/locale.conf")?;
        replace_line(ctx, "/etc/locale.conf", "^LANG=.*", &format!("LANG={locale}")).await?;
        return Ok(Value::Boolean(true));
    }
    let family = get_str(ctx.grains.as_ref(), "os_family").unwrap_or_default();
    if family.contains("Suse") {
        touch("/etc/sysconfig/language")?;
        replace_line(ctx, "/etc/sysconfig/language", "^RC_LANG=.*", &format!("RC_LANG=\"{locale}\"")).await?;
    } else if family.contains("RedHat") {
        touch("/etc/sysconfig/i18n")?;
        replace_line(ctx, "/etc/sysconfig/i18n", "^LANG=.*", &format!("LANG=\"{locale}\"")).await?;
    } else if family.contains("Debian") {
        let Some(update_locale) = which("update-locale") else {
            return Err(FnError::Execution(
                "Cannot set locale: \"update-locale\" was not found.".into(),
            ));
        };
        cmd_run(rc, &[&update_locale]).await?;
        replace_line(ctx, "/etc/default/locale", "^LANG=.*", &format!("LANG=\"{locale}\"")).await?;
    } else if family.contains("Gentoo") {
        let out = cmd_all(
            rc,
            &["eselect", "--brief", "locale", "set", locale].map(str::to_string),
        )
        .await?;
        return Ok(Value::Boolean(out.retcode() == 0));
    } else {
        return Err(FnError::Execution("Error: Unsupported platform!".into()));
    }
    Ok(Value::Boolean(true))
}

async fn gen_locale(rc: &mut i32, ctx: &Context, b: &Bound, locale: &str) -> Result<Value, FnError> {
    let grains = ctx.grains.as_ref();
    let os = get_str(grains, "os").unwrap_or_default();
    let family = get_str(grains, "os_family").unwrap_or_default();
    let (debian, ubuntu) = (os == "Debian", os == "Ubuntu");
    let (gentoo, suse) = (family == "Gentoo", family == "Suse");
    if family == "Solaris" {
        return Ok(Value::Boolean(list_avail(rc).await?.iter().any(|l| l == locale)));
    }
    let mut parts = Parts::split(locale);
    let search_str = format!("{}_{}", parts.language, parts.territory);
    let mut locale = locale.to_string();
    if parts.charmap.is_empty() && !ubuntu {
        parts.charmap = parts.codeset.clone();
        locale = parts.join();
    }
    let (search, valid) = if debian || gentoo {
        let search = "/usr/share/i18n/SUPPORTED";
        let text = std::fs::read_to_string(search).map_err(|e| {
            FnError::Execution(format!(
                "Unable to open file '{search}': {}",
                brine_protocol::pyrepr::os_error(&e, Some(search))
            ))
        })?;
        let re = regex::Regex::new(&format!("(?m)^{locale}$")).map_err(|e| FnError::Invocation(e.to_string()))?;
        (search, re.is_match(&text))
    } else {
        let search = if suse { "/usr/share/locale" } else { "/usr/share/i18n/locales" };
        let names = std::fs::read_dir(search).map_err(|e| {
            tracing::error!("{e}");
            FnError::Execution(format!("Locale \"{locale}\" is not available."))
        })?;
        let found = names
            .flatten()
            .any(|n| n.file_name().to_string_lossy() == search_str);
        (search, found)
    };
    if !valid {
        tracing::error!("The provided locale \"{locale}\" is not found in {search}");
        return Ok(Value::Boolean(false));
    }
    if Path::new("/etc/locale.gen").exists() {
        let pattern = format!(r"^\s*#\s*{locale}\s*$");
        replace_line(ctx, "/etc/locale.gen", &pattern, &format!("{locale}\n")).await?;
    } else if ubuntu {
        let file = format!("/var/lib/locales/supported.d/{}", parts.language);
        touch(&file)?;
        replace_line(ctx, &file, &locale, &locale).await?;
    }
    let cmd: Vec<String> = if which("locale-gen").is_some() {
        let mut cmd = vec!["locale-gen".to_string()];
        if gentoo {
            cmd.push("--generate".into());
        }
        cmd.push(if ubuntu { Parts::normalize(&locale) } else { locale.clone() });
        cmd
    } else if which("localedef").is_some() {
        let verbose = if is_true(b.kwarg("verbose")) { "--verbose" } else { "--quiet" };
        ["localedef", "--force", "-i", &search_str, "-f", &parts.codeset]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("{search_str}.{}", parts.codeset), verbose.to_string()])
            .collect()
    } else {
        return Err(FnError::Execution(
            "Command \"locale-gen\" or \"localedef\" was not found on this system.".into(),
        ));
    };
    let out = cmd_all(rc, &cmd).await?;
    if out.retcode() != 0 {
        tracing::error!("{}", out.stderr());
    }
    if is_true(b.kwarg("verbose")) {
        return Ok(out.into_map(false));
    }
    Ok(Value::Boolean(out.retcode() == 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locales_are_split_and_normalized_as_salt_does() {
        assert_eq!(Parts::normalize("en_us.UTF-8"), "en_US.utf8");
        assert_eq!(Parts::normalize("de_DE.ISO-8859-1@euro UTF-8"), "de_DE.iso88591@euro");
        assert_eq!(Parts::normalize("C"), "C");
        let p = Parts::split("en_US.UTF-8");
        assert_eq!((p.language.as_str(), p.territory.as_str(), p.codeset.as_str()), ("en", "US", "UTF-8"));
        assert_eq!(p.join(), "en_US.UTF-8");
    }
}
