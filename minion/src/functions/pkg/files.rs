//! The files of installed packages and the packages of files, from dpkg (Salt's
//! `aptpkg.file_list`, `file_dict` and `owner`, through its `dpkg_lowpkg`). Each answers with
//! the exit code of the last command it ran, which Salt's `cmd` calls leave as the job's
//! retcode.

use rmpv::Value;

use super::super::args::{py_str, Bound};
use super::super::cmd::{run_argv, run_argv_merged};
use super::super::FnError;

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The installed packages among `packages` (every installed package when none is named), or
/// Salt's `Error:  <dpkg-query's message>` text.
async fn installed(packages: &[String]) -> Result<(Result<Vec<String>, String>, i32), FnError> {
    let mut cmd = argv(&[
        "dpkg-query",
        "-f=${db:Status-Status}\t${binary:Package}\n",
        "-W",
    ]);
    cmd.extend(packages.iter().cloned());
    let out = run_argv(&cmd, &[]).await?;
    let rc = retcode(&out);
    if rc != 0 {
        return Ok((Err(format!("Error:  {}", out.stderr())), rc));
    }
    let names = out
        .stdout()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(status, _)| *status == "installed")
        .map(|(_, name)| name.to_string())
        .collect();
    Ok((Ok(names), rc))
}

fn retcode(out: &super::super::cmd::RunOutput) -> i32 {
    i32::try_from(out.retcode()).unwrap_or(1)
}

/// `dpkg -L` of one package, as Salt's `cmd.run` gives it (errors merged in).
async fn files_of(pkg: &str) -> Result<(Vec<String>, i32), FnError> {
    let out = run_argv_merged(&argv(&["dpkg", "-L", pkg]), &[]).await?;
    Ok((
        out.stdout().lines().map(str::to_string).collect(),
        retcode(&out),
    ))
}

fn names(b: &Bound) -> Vec<String> {
    b.varargs.iter().map(py_str).collect()
}

fn strings(items: Vec<String>) -> Value {
    Value::Array(items.into_iter().map(Value::from).collect())
}

/// `pkg.file_list`: every file of the packages, sorted, once each.
pub(super) async fn file_list(b: &Bound) -> Result<(Value, i32), FnError> {
    let (pkgs, mut rc) = installed(&names(b)).await?;
    let pkgs = match pkgs {
        Ok(p) => p,
        Err(msg) => return Ok((Value::from(msg), rc)),
    };
    let mut all = std::collections::BTreeSet::new();
    for pkg in &pkgs {
        let (files, code) = files_of(pkg).await?;
        all.extend(files);
        rc = code;
    }
    let ret = brine_protocol::payload::map(vec![
        ("errors", Value::Array(vec![])),
        ("files", strings(all.into_iter().collect())),
    ]);
    Ok((ret, rc))
}

/// `pkg.file_dict`: the files of each package, in dpkg's order.
pub(super) async fn file_dict(b: &Bound) -> Result<(Value, i32), FnError> {
    let (pkgs, mut rc) = installed(&names(b)).await?;
    let pkgs = match pkgs {
        Ok(p) => p,
        Err(msg) => return Ok((Value::from(msg), rc)),
    };
    let mut by_pkg = Vec::new();
    for pkg in pkgs {
        let (files, code) = files_of(&pkg).await?;
        rc = code;
        by_pkg.push((Value::from(pkg), strings(files)));
    }
    let ret = brine_protocol::payload::map(vec![
        ("errors", Value::Array(vec![])),
        ("packages", Value::Map(by_pkg)),
    ]);
    Ok((ret, rc))
}

/// `pkg.owner`: the package each path belongs to ("" for none); one path gives the name
/// alone.
pub(super) async fn owner(b: &Bound) -> Result<(Value, i32), FnError> {
    let paths = names(b);
    if paths.is_empty() {
        return Ok((Value::from(""), 0));
    }
    let mut out: Vec<(Value, Value)> = Vec::new();
    let mut rc = 0;
    for path in &paths {
        let found = run_argv(&argv(&["dpkg", "-S", path]), &[]).await?;
        rc = retcode(&found);
        let first = found.stdout().split(':').next().unwrap_or_default();
        let name = if first.to_lowercase().contains("no path found") {
            ""
        } else {
            first
        };
        let key = Value::from(path.as_str());
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = Value::from(name),
            None => out.push((key, Value::from(name))),
        }
    }
    if out.len() == 1 {
        return Ok((out.remove(0).1, rc));
    }
    Ok((Value::Map(out), rc))
}

#[cfg(test)]
mod tests {
    use super::super::super::call;
    use super::super::super::testutil::*;
    use brine_protocol::payload::{get, map};

    // The answers are those Salt 3007's aptpkg gave on the same machine.
    #[tokio::test]
    async fn live_owner_and_file_lists() {
        if !std::path::Path::new("/usr/bin/dpkg").exists() {
            return;
        }
        let mut c = ctx();
        c.grains = std::sync::Arc::new(map([("os_family", s("Debian")), ("osarch", s("amd64"))]));
        let r = call(&c, "pkg.owner", &[s("/bin/bash")]).await;
        assert_eq!((r.ret, r.retcode), (s("bash"), 0));
        let r = call(&c, "pkg.owner", &[s("/bin/bash"), s("/no/such/file")]).await;
        assert_eq!(
            (r.ret, r.retcode),
            (map([("/bin/bash", s("bash")), ("/no/such/file", s(""))]), 1)
        );
        let r = call(&c, "pkg.file_list", &[s("bash")]).await;
        let files = get(&r.ret, "files").and_then(|f| f.as_array()).unwrap();
        assert!(files.contains(&s("/bin/bash")), "{files:?}");
        let r = call(&c, "pkg.file_dict", &[s("bash")]).await;
        assert!(get(get(&r.ret, "packages").unwrap(), "bash").is_some());
        let r = call(&c, "pkg.file_list", &[s("no-such-package-brine")]).await;
        assert_eq!(
            (r.ret, r.retcode),
            (
                s("Error:  dpkg-query: no packages found matching no-such-package-brine"),
                1
            )
        );
    }
}
