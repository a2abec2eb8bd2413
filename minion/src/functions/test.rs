//! The `test` execution module: connectivity and argument-passing checks.

use std::time::{Duration, Instant};

use rmpv::Value;

use super::{Context};
use super::args::{py_int, py_repr, py_type, Bound, Signature};
use super::{CallState, FnError, Spec, SALT_VERSION};
use brine_protocol::payload::{get, map};

/// The functions of the `test` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Arg,
    ArgClean,
    ArgRepr,
    ArgType,
    Echo,
    Exception,
    False,
    Fib,
    Kwarg,
    Outputter,
    Ping,
    Provider,
    Providers,
    Retcode,
    Sleep,
    True,
    Version,
    Versions,
    VersionsInformation,
    VersionsReport,
}

const ARGS_KWARGS: Signature = Signature::new(&[], 0, true, true);

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Arg,
        Fun::ArgClean,
        Fun::ArgRepr,
        Fun::ArgType,
        Fun::Echo,
        Fun::Exception,
        Fun::False,
        Fun::Fib,
        Fun::Kwarg,
        Fun::Outputter,
        Fun::Ping,
        Fun::Provider,
        Fun::Providers,
        Fun::Retcode,
        Fun::Sleep,
        Fun::True,
        Fun::Version,
        Fun::Versions,
        Fun::VersionsInformation,
        Fun::VersionsReport,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc) = match self {
            Fun::Arg => (
                "test.arg",
                "arg",
                ARGS_KWARGS,
                "
    Return the positional and keyword arguments the function received, including
    the __pub_* keys describing the publication.

    CLI Example:

        salt '*' test.arg 1 two three=3
    ",
            ),
            Fun::ArgClean => (
                "test.arg_clean",
                "arg_clean",
                ARGS_KWARGS,
                "
    Like test.arg, but without the __pub_* (and other dunder) keyword arguments.

    CLI Example:

        salt '*' test.arg_clean 1 two three=3
    ",
            ),
            Fun::ArgRepr => (
                "test.arg_repr",
                "arg_repr",
                ARGS_KWARGS,
                "
    Return the Python-style repr of the positional and keyword arguments.

    CLI Example:

        salt '*' test.arg_repr 1 two three=3
    ",
            ),
            Fun::ArgType => (
                "test.arg_type",
                "arg_type",
                ARGS_KWARGS,
                "
    Return the Python type name of every positional and keyword argument.

    CLI Example:

        salt '*' test.arg_type 1 two 3.0
    ",
            ),
            Fun::Echo => (
                "test.echo",
                "echo",
                Signature::new(&["text"], 1, false, false),
                "
    Send back the given text; checks that arguments reach the minion.

    CLI Example:

        salt '*' test.echo 'some text'
    ",
            ),
            Fun::Provider => (
                "test.provider",
                "provider",
                Signature::new(&["module"], 1, false, false),
                "
    Return the name of the file that provides the given module ('' for a module
    this minion does not have), as Salt names its module files.

    CLI Example:

        salt '*' test.provider cmd
    ",
            ),
            Fun::Providers => (
                "test.providers",
                "providers",
                Signature::NONE,
                "
    Return every module this minion has, keyed by the file that provides it.

    CLI Example:

        salt '*' test.providers
    ",
            ),
            Fun::Exception => (
                "test.exception",
                "exception",
                Signature::new(&["message"], 0, false, false),
                "
    Fail on purpose with the given message (default 'Test Exception').

    CLI Example:

        salt '*' test.exception 'oops'
    ",
            ),
            Fun::False => (
                "test.false",
                "false_",
                Signature::NONE,
                "
    Always return False.

    CLI Example:

        salt '*' test.false
    ",
            ),
            Fun::Fib => (
                "test.fib",
                "fib",
                Signature::new(&["num"], 1, false, false),
                "
    Compute the num-th Fibonacci number; returns the number and the seconds it took.

    CLI Example:

        salt '*' test.fib 30
    ",
            ),
            Fun::Kwarg => (
                "test.kwarg",
                "kwarg",
                Signature::new(&[], 0, false, true),
                "
    Return the keyword arguments the function received.

    CLI Example:

        salt '*' test.kwarg num=1 txt=two
    ",
            ),
            Fun::Outputter => (
                "test.outputter",
                "outputter",
                Signature::new(&["data"], 1, false, false),
                "
    Return the given data unchanged, to try outputters on it.

    CLI Example:

        salt '*' test.outputter foobar
    ",
            ),
            Fun::Ping => (
                "test.ping",
                "ping",
                Signature::NONE,
                "
    Check that the minion is up and answering jobs (this is not an ICMP ping).
    Returns True.

    CLI Example:

        salt '*' test.ping
    ",
            ),
            Fun::Retcode => (
                "test.retcode",
                "retcode",
                Signature::new(&["code"], 0, false, false),
                "
    Return True and make the job's retcode the given code (default 42).

    CLI Example:

        salt '*' test.retcode 2
    ",
            ),
            Fun::Sleep => (
                "test.sleep",
                "sleep",
                Signature::new(&["length"], 1, false, false),
                "
    Wait for the given number of seconds, then return True.

    CLI Example:

        salt '*' test.sleep 20
    ",
            ),
            Fun::True => (
                "test.true",
                "true_",
                Signature::NONE,
                "
    Always return True.

    CLI Example:

        salt '*' test.true
    ",
            ),
            Fun::Version => (
                "test.version",
                "version",
                Signature::NONE,
                "
    Return the Salt version this minion speaks.

    CLI Example:

        salt '*' test.version
    ",
            ),
            Fun::Versions => (
                "test.versions",
                "versions",
                Signature::NONE,
                "
    Return a printable report of the versions of the minion and its platform
    (same as test.versions_report).

    CLI Example:

        salt '*' test.versions
    ",
            ),
            Fun::VersionsInformation => (
                "test.versions_information",
                "versions_information",
                Signature::NONE,
                "
    Return the versions of the minion and its platform as a nested dictionary.

    CLI Example:

        salt '*' test.versions_information
    ",
            ),
            Fun::VersionsReport => (
                "test.versions_report",
                "versions_report",
                Signature::NONE,
                "
    Return a printable report of the versions of the minion and its platform.

    CLI Example:

        salt '*' test.versions_report
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

    pub(crate) async fn run(self, ctx: &Context, b: &Bound, st: &mut CallState) -> Result<Value, FnError> {
        Ok(match self {
            Fun::Arg => args_and_kwargs(b, |_| true),
            Fun::ArgClean => args_and_kwargs(b, |k| !k.starts_with("__")),
            Fun::ArgRepr => map([
                ("args", Value::from(py_tuple_repr(&b.varargs))),
                ("kwargs", Value::from(py_repr(&b.kwargs_map()))),
            ]),
            Fun::ArgType => map([
                (
                    "args",
                    Value::Array(b.varargs.iter().map(|v| Value::from(py_type(v))).collect()),
                ),
                (
                    "kwargs",
                    map(b
                        .kwargs
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::from(py_type(v))))),
                ),
            ]),
            Fun::Echo => b.get("text").cloned().unwrap_or(Value::Nil),
            Fun::Provider => {
                let module = b.get("module").map(super::args::py_str).unwrap_or_default();
                Value::from(super::provider(&module, ctx).unwrap_or_default())
            }
            Fun::Providers => {
                let mut seen: Vec<(String, Value)> = Vec::new();
                for name in super::list_functions() {
                    let module = name.split('.').next().unwrap_or_default();
                    let file = super::provider(module, ctx).unwrap_or_default();
                    if !seen.iter().any(|(k, _)| *k == file) {
                        seen.push((file.to_string(), Value::from(module)));
                    }
                }
                map(seen)
            }
            Fun::Exception => {
                let msg = b
                    .get("message")
                    .map_or_else(|| "Test Exception".to_string(), super::args::py_str);
                return Err(FnError::Exception(format!("Exception: {msg}")));
            }
            Fun::False => Value::Boolean(false),
            Fun::True | Fun::Ping => Value::Boolean(true),
            Fun::Fib => fib(b.get("num").unwrap_or(&Value::Nil))?,
            Fun::Kwarg => b.kwargs_map(),
            Fun::Outputter => b.get("data").cloned().unwrap_or(Value::Nil),
            Fun::Retcode => {
                let code = match b.get("code") {
                    None => 42,
                    Some(v) => py_int(v).map_err(FnError::Exception)?,
                };
                st.retcode = i32::try_from(code).unwrap_or(1);
                Value::Boolean(true)
            }
            Fun::Sleep => {
                let length = py_int(b.get("length").unwrap_or(&Value::Nil))
                    .map_err(|e| FnError::Exception(format!("ValueError: {e}")))?;
                let secs = u64::try_from(length).map_err(|_| {
                    FnError::Exception("ValueError: sleep length must be non-negative".into())
                })?;
                tokio::time::sleep(Duration::from_secs(secs)).await;
                Value::Boolean(true)
            }
            Fun::Version => Value::from(SALT_VERSION),
            Fun::Versions | Fun::VersionsReport => Value::from(versions_report().join("\n")),
            Fun::VersionsInformation => versions_information(),
        })
    }
}

fn args_and_kwargs(b: &Bound, keep: impl Fn(&str) -> bool) -> Value {
    map([
        ("args", Value::Array(b.varargs.clone())),
        (
            "kwargs",
            map(b
                .kwargs
                .iter()
                .filter(|(k, _)| keep(k))
                .map(|(k, v)| (k.clone(), v.clone()))),
        ),
    ])
}

fn py_tuple_repr(items: &[Value]) -> String {
    let inner: Vec<String> = items.iter().map(py_repr).collect();
    if inner.len() == 1 {
        format!("({},)", inner[0])
    } else {
        format!("({})", inner.join(", "))
    }
}

/// `test.fib`: `[fib(num), seconds]`; Python ints are unbounded, ours saturate at u64.
fn fib(num: &Value) -> Result<Value, FnError> {
    let start = Instant::now();
    let n = py_int(num).map_err(|e| FnError::Exception(format!("ValueError: {e}")))?;
    if n < 0 {
        return Err(FnError::Exception(
            "ValueError: Negative number is not allowed!".into(),
        ));
    }
    let value: u64 = if n < 2 {
        n.unsigned_abs()
    } else {
        let (mut prev, mut curr) = (0u64, 1u64);
        for _ in 1..n {
            let next = prev.saturating_add(curr);
            prev = curr;
            curr = next;
        }
        curr
    };
    Ok(Value::Array(vec![
        Value::from(value),
        Value::F64(start.elapsed().as_secs_f64()),
    ]))
}

fn os_release_field(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .ok()?;
    crate::grains_core::parse_os_release(&text).remove(key)
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// `test.versions_information`: the nested map Salt's versions report is made of.
pub(crate) fn versions_information() -> Value {
    let id = os_release_field("ID").unwrap_or_default();
    let version_id = os_release_field("VERSION_ID").unwrap_or_default();
    let codename = os_release_field("VERSION_CODENAME").unwrap_or_default();
    let name = os_release_field("NAME").unwrap_or_default();
    let join = |parts: &[&str]| {
        parts
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    };
    map([
        ("Salt Version", map([("Salt", Value::from(SALT_VERSION))])),
        ("Python Version", map([("Python", Value::Nil)])),
        (
            "Dependency Versions",
            map([("Brine", Value::from(env!("CARGO_PKG_VERSION")))]),
        ),
        (
            "System Versions",
            map([
                ("system", Value::from(sysname())),
                ("dist", Value::from(join(&[&id, &version_id, &codename]))),
                (
                    "release",
                    Value::from(read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default()),
                ),
                ("machine", Value::from(std::env::consts::ARCH)),
                (
                    "version",
                    Value::from(join(&[&name, &version_id, &codename])),
                ),
                ("locale", Value::from("utf-8")),
            ]),
        ),
        (
            "Salt Package Information",
            map([("Package Type", Value::Nil)]),
        ),
    ])
}

fn sysname() -> String {
    read_trimmed("/proc/sys/kernel/ostype").unwrap_or_else(|| "Linux".into())
}

/// `salt.version.versions_report`: the lines of the printable report.
pub(crate) fn versions_report() -> Vec<String> {
    let info = versions_information();
    let section = |name: &str| -> Vec<(String, String)> {
        let mut rows: Vec<(String, String)> = get(&info, name)
            .and_then(Value::as_map)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        let val = match v {
                            Value::Nil => "Not Installed".to_string(),
                            other => super::args::py_str(other),
                        };
                        (super::args::py_str(k), val)
                    })
                    .collect()
            })
            .unwrap_or_default();
        rows.sort_by_key(|(k, _)| k.to_lowercase());
        rows
    };
    let pad = ["Dependency Versions", "System Versions"]
        .iter()
        .flat_map(|s| section(s))
        .map(|(k, _)| k.len())
        .chain(std::iter::once("Not Installed".len()))
        .max()
        .unwrap_or(0)
        + 1;
    let mut lines = Vec::new();
    for name in [
        "Salt Version",
        "Python Version",
        "Dependency Versions",
        "Salt Package Information",
        "System Versions",
    ] {
        lines.push(format!("{name}:"));
        for (k, v) in section(name) {
            lines.push(format!("{k:>pad$}: {v}"));
        }
        lines.push(" ".to_string());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::get;

    #[tokio::test]
    async fn ping_echo_version() {
        let c = ctx();
        assert_eq!(call(&c, "test.ping", &[]).await.ret, Value::Boolean(true));
        assert_eq!(call(&c, "test.echo", &[s("hi")]).await.ret, s("hi"));
        assert_eq!(
            call(&c, "test.echo", &[Value::from(5)]).await.ret,
            Value::from(5)
        );
        assert_eq!(call(&c, "test.version", &[]).await.ret, s("3007.15"));
        // Providers as Salt names them (checked against salt-call 3007.15 test.provider(s)).
        assert_eq!(
            call(&c, "test.provider", &[s("cmd")]).await.ret,
            s("cmdmod")
        );
        assert_eq!(call(&c, "test.provider", &[s("nope")]).await.ret, s(""));
        // On a Debian machine: apt, and init scripts unless systemd runs.
        let service = if std::path::Path::new("/run/systemd/system").is_dir() {
            "systemd_service"
        } else {
            "debian_service"
        };
        assert_eq!(
            call(&c, "test.provider", &[s("service")]).await.ret,
            s(service)
        );
        let mut debian = c.clone();
        if let Value::Map(g) = std::sync::Arc::make_mut(&mut debian.grains) {
            g.push((s("os_family"), s("Debian")));
        }
        assert_eq!(
            call(&debian, "test.provider", &[s("pkg")]).await.ret,
            s("aptpkg")
        );
        if let Value::Map(g) = std::sync::Arc::make_mut(&mut debian.grains) {
            g.retain(|(k, _)| k.as_str() != Some("os_family"));
            g.push((s("os_family"), s("RedHat")));
        }
        assert_eq!(
            call(&debian, "test.provider", &[s("pkg")]).await.ret,
            s("yumpkg")
        );
        let providers = call(&c, "test.providers", &[]).await.ret;
        for (file, module) in [("cmdmod", "cmd"), ("test", "test"), ("grains", "grains")] {
            assert_eq!(super::super::get(&providers, file), Some(&s(module)));
        }
        assert_eq!(call(&c, "test.true", &[]).await.ret, Value::Boolean(true));
        assert_eq!(call(&c, "test.false", &[]).await.ret, Value::Boolean(false));
    }

    #[tokio::test]
    async fn arg_shows_args_kwargs_and_pub_keys() {
        // The observed publish of `salt m1 test.arg a 1 foo=bar 'baz={"x": 1}'`.
        let arg = vec![
            s("a"),
            Value::from(1),
            kw(&[("foo", s("bar")), ("baz", map([("x", Value::from(1))]))]),
        ];
        let load = publish_load("test.arg", arg.clone(), "20261122101750787697");
        let c = ctx_with_load(load);
        let r = call(&c, "test.arg", &arg).await;
        assert_eq!(r.retcode, 0);
        let expected = map([
            ("args", Value::Array(vec![s("a"), Value::from(1)])),
            (
                "kwargs",
                map([
                    ("foo", s("bar")),
                    ("baz", map([("x", Value::from(1))])),
                    ("__pub_fun", s("test.arg")),
                    ("__pub_arg", Value::Array(arg.clone())),
                    ("__pub_tgt", s("m1")),
                    ("__pub_jid", s("20261122101750787697")),
                    ("__pub_ret", s("")),
                    ("__pub_tgt_type", s("glob")),
                    ("__pub_user", s("root")),
                ]),
            ),
        ]);
        assert_eq!(r.ret, expected);
    }

    #[tokio::test]
    async fn arg_parses_key_value_strings_with_yaml() {
        let arg = vec![s("x"), s("n=5"), s("flag=yes"), s("t=a b"), s("==no")];
        let r = call(&ctx(), "test.arg", &arg).await;
        assert_eq!(
            get(&r.ret, "args"),
            Some(&Value::Array(vec![s("x"), s("==no")]))
        );
        assert_eq!(
            get(&r.ret, "kwargs"),
            Some(&map([
                ("n", Value::from(5)),
                ("flag", Value::Boolean(true)),
                ("t", s("a b"))
            ]))
        );
    }

    #[tokio::test]
    async fn arg_clean_type_repr_kwarg() {
        let load = publish_load("test.arg_clean", vec![], "1");
        let c = ctx_with_load(load);
        let arg = [Value::from(1), s("two"), kw(&[("k", Value::F64(1.5))])];
        let r = call(&c, "test.arg_clean", &arg).await;
        assert_eq!(
            r.ret,
            map([
                ("args", Value::Array(vec![Value::from(1), s("two")])),
                ("kwargs", map([("k", Value::F64(1.5))])),
            ])
        );
        let r = call(&ctx(), "test.arg_type", &arg).await;
        assert_eq!(
            r.ret,
            map([
                (
                    "args",
                    Value::Array(vec![s("<class 'int'>"), s("<class 'str'>")])
                ),
                ("kwargs", map([("k", s("<class 'float'>"))])),
            ])
        );
        let r = call(&ctx(), "test.arg_repr", &arg).await;
        assert_eq!(
            r.ret,
            map([("args", s("(1, 'two')")), ("kwargs", s("{'k': 1.5}"))])
        );
        let r = call(&ctx(), "test.kwarg", &[kw(&[("a", Value::from(1))])]).await;
        assert_eq!(r.ret, map([("a", Value::from(1))]));
    }

    #[tokio::test]
    async fn sleep_returns_true_and_validates() {
        let r = call(&ctx(), "test.sleep", &[Value::from(0)]).await;
        assert_eq!((r.ret, r.retcode), (Value::Boolean(true), 0));
        let r = call(&ctx(), "test.sleep", &[s("0")]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&ctx(), "test.sleep", &[s("abc")]).await;
        assert_eq!(r.retcode, 1);
        assert!(r
            .ret
            .as_str()
            .unwrap()
            .starts_with("The minion function caused an exception: ValueError: invalid literal"));
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_waits_the_given_seconds() {
        let start = tokio::time::Instant::now();
        let r = call(&ctx(), "test.sleep", &[Value::from(30)]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        assert!(start.elapsed() >= Duration::from_secs(30));
    }

    #[tokio::test]
    async fn fib_returns_number_and_elapsed() {
        let r = call(&ctx(), "test.fib", &[Value::from(10)]).await;
        let items = r.ret.as_array().unwrap();
        assert_eq!(items[0], Value::from(55));
        assert!(items[1].as_f64().is_some());
        let r = call(&ctx(), "test.fib", &[Value::from(1)]).await;
        assert_eq!(r.ret.as_array().unwrap()[0], Value::from(1));
        let r = call(&ctx(), "test.fib", &[Value::from(-1)]).await;
        assert_eq!(r.retcode, 1);
    }

    #[tokio::test]
    async fn retcode_and_exception() {
        let r = call(&ctx(), "test.retcode", &[]).await;
        assert_eq!((r.ret, r.retcode), (Value::Boolean(true), 42));
        let r = call(&ctx(), "test.retcode", &[Value::from(3)]).await;
        assert_eq!(r.retcode, 3);
        let r = call(&ctx(), "test.exception", &[s("boom")]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: Exception: boom")
        );
        assert_eq!((r.retcode, r.out.as_deref()), (1, Some("nested")));
    }

    #[tokio::test]
    async fn versions_shapes() {
        let r = call(&ctx(), "test.versions_information", &[]).await;
        for key in [
            "Salt Version",
            "Python Version",
            "Dependency Versions",
            "System Versions",
        ] {
            assert!(get(&r.ret, key).is_some_and(Value::is_map), "{key}");
        }
        assert_eq!(
            get(get(&r.ret, "Salt Version").unwrap(), "Salt"),
            Some(&s("3007.15"))
        );
        let report = call(&ctx(), "test.versions_report", &[]).await.ret;
        let text = report.as_str().unwrap();
        assert!(text.starts_with("Salt Version:\n          Salt: 3007.15\n \nPython Version:\n        Python: Not Installed\n \n"), "{text}");
        assert!(text.contains("\nSystem Versions:\n"));
        assert!(text.ends_with("\n "));
        assert_eq!(call(&ctx(), "test.versions", &[]).await.ret, report);
    }
}
