//! The `test` execution module: connectivity and argument-passing checks.

use std::time::{Duration, Instant};

use rmpv::Value;

use super::args::{py_int, py_repr, py_type, Bound, Signature, py_type_name};
use super::Context;
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
    RandStr,
    RandomHash,
    Collatz,
    Assertion,
    AttrCall,
    ConfTest,
    CrossTest,
    GetOpts,
    ModuleReport,
    OptsPkg,
    RandSleep,
    Stack,
    Try,
    Tty,
    DeprecationWarning,
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
        Fun::RandStr,
        Fun::RandomHash,
        Fun::Collatz,
        Fun::Assertion,
        Fun::AttrCall,
        Fun::ConfTest,
        Fun::CrossTest,
        Fun::GetOpts,
        Fun::ModuleReport,
        Fun::OptsPkg,
        Fun::RandSleep,
        Fun::Stack,
        Fun::Try,
        Fun::Tty,
        Fun::DeprecationWarning,
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
            Fun::RandStr | Fun::RandomHash => (
                if self == Fun::RandStr {
                    "test.rand_str"
                } else {
                    "test.random_hash"
                },
                if self == Fun::RandStr {
                    "rand_str"
                } else {
                    "random_hash"
                },
                Signature::new(&["size", "hash_type"], 0, false, false),
                "
    Pick a random whole number from 0 to size (default 9999999999) and return the
    hex digest of its decimal text, hashed with hash_type (default: the minion's
    hash_type option). test.rand_str is the older name of test.random_hash.

    CLI Example:

        salt '*' test.random_hash
        salt '*' test.random_hash size=100 hash_type=sha512
    ",
            ),
            Fun::Collatz => (
                "test.collatz",
                "collatz",
                Signature::new(&["start"], 1, false, false),
                "
    Follow the Collatz sequence from the given number down to 1 (a load test);
    returns the numbers met before 1 and the seconds it took.

    CLI Example:

        salt '*' test.collatz 27
    ",
            ),
            Fun::Assertion => (
                "test.assertion",
                "assertion",
                Signature::new(&["assertion"], 1, false, false),
                "
    Fail with an AssertionError when the given value is false; return None
    otherwise.

    CLI Example:

        salt '*' test.assertion False
    ",
            ),
            Fun::AttrCall => (
                "test.attr_call",
                "attr_call",
                Signature::NONE,
                "
    Return the result of grains.items, called from inside this module.

    CLI Example:

        salt '*' test.attr_call
    ",
            ),
            Fun::ConfTest => (
                "test.conf_test",
                "conf_test",
                Signature::NONE,
                "
    Return config.option's value for test.foo ('unconfigured' unless set).

    CLI Example:

        salt '*' test.conf_test
    ",
            ),
            Fun::CrossTest => (
                "test.cross_test",
                "cross_test",
                Signature::new(&["func", "args"], 1, false, false),
                "
    Call another function of this minion with the given list of positional
    arguments and return what it returns.

    CLI Example:

        salt '*' test.cross_test test.echo '[hello]'
    ",
            ),
            Fun::GetOpts => (
                "test.get_opts",
                "get_opts",
                Signature::NONE,
                "
    Return the options this minion runs with (its grains and pillar included).

    CLI Example:

        salt '*' test.get_opts
    ",
            ),
            Fun::ModuleReport => (
                "test.module_report",
                "module_report",
                Signature::NONE,
                "
    Report the functions this minion offers, in the lists Salt's loader report
    uses.

    CLI Example:

        salt '*' test.module_report
    ",
            ),
            Fun::OptsPkg => (
                "test.opts_pkg",
                "opts_pkg",
                Signature::NONE,
                "
    Return the minion's options together with its grains, as used to compile
    states on the master's side.

    CLI Example:

        salt '*' test.opts_pkg
    ",
            ),
            Fun::RandSleep => (
                "test.rand_sleep",
                "rand_sleep",
                Signature::new(&["max"], 0, false, false),
                "
    Wait a random whole number of seconds from 0 to max (default 60), then return
    True.

    CLI Example:

        salt '*' test.rand_sleep 60
    ",
            ),
            Fun::Stack => (
                "test.stack",
                "stack",
                Signature::NONE,
                "
    Return the minion's current call stack as text.

    CLI Example:

        salt '*' test.stack
    ",
            ),
            Fun::Try => (
                "test.try",
                "try_",
                Signature::new(&["module", "return_try_exception"], 1, false, true),
                "
    Call the named function with the given keyword arguments; when it fails,
    return None, or a description of the error when return_try_exception is True.

    CLI Example:

        salt '*' test.try test.arg return_try_exception=True
    ",
            ),
            Fun::Tty => (
                "test.tty",
                "tty",
                ARGS_KWARGS,
                "
    Replaced by cmd.tty; always answers with an error text saying so.

    CLI Example:

        salt '*' test.tty tty0 'a message'
    ",
            ),
            Fun::DeprecationWarning => (
                "test.deprecation_warning",
                "deprecation_warning",
                Signature::NONE,
                "
    Log two test deprecation warnings and return True.

    CLI Example:

        salt '*' test.deprecation_warning
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
        ctx: &Context,
        b: &Bound,
        st: &mut CallState,
    ) -> Result<Value, FnError> {
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
            Fun::RandStr | Fun::RandomHash => random_hash(ctx, b)?,
            Fun::Collatz => collatz(b.get("start").unwrap_or(&Value::Nil)).await?,
            Fun::Assertion => {
                if !brine_protocol::payload::py_truthy(b.get("assertion").unwrap_or(&Value::Nil)) {
                    return Err(FnError::Exception("AssertionError".into()));
                }
                Value::Nil
            }
            Fun::AttrCall => {
                let (ret, retcode) = call_boxed(ctx, "grains.items", Vec::new(), Vec::new(), st.test)
                    .await
                    .unwrap_or_else(|| Ok((Value::Map(Vec::new()), 0)))?;
                st.retcode = retcode;
                ret
            }
            Fun::ConfTest => super::config::option(ctx, "test.foo")?,
            Fun::GetOpts | Fun::OptsPkg => super::config::opts(ctx),
            Fun::CrossTest => cross_test(ctx, b, st).await?,
            Fun::ModuleReport => module_report(),
            Fun::RandSleep => {
                let secs = py_randint(b.get("max").unwrap_or(&Value::from(60)))?;
                tokio::time::sleep(Duration::from_secs(secs)).await;
                Value::Boolean(true)
            }
            Fun::Stack => Value::from(std::backtrace::Backtrace::force_capture().to_string()),
            Fun::Try => try_call(ctx, b, st).await,
            Fun::Tty => Value::from("ERROR: This function has been moved to cmd.tty"),
            Fun::DeprecationWarning => {
                tracing::warn!("test.deprecation_warning: a test warning about a feature going away in Salt 3108");
                tracing::warn!("test.deprecation_warning: a test warning about a feature going away on 3000-01-01");
                Value::Boolean(true)
            }
        })
    }
}

/// What calling another function gives: `None` when there is no such function, else its
/// return and retcode or its failure.
type Called<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Option<Result<(Value, i32), FnError>>> + Send + 'a>,
>;

/// Run another function of this minion as Python code calls it (`__salt__[name](*args,
/// **kwargs)`). Boxed: a call can come back here.
fn call_boxed<'a>(
    ctx: &'a Context,
    name: &'a str,
    args: Vec<Value>,
    kwargs: Vec<(String, Value)>,
    test: bool,
) -> Called<'a> {
    Box::pin(async move {
        let function = super::Function::from_name(name)?;
        Some(super::invoke_bound(ctx, function, args, kwargs, test).await)
    })
}

/// The `KeyError` of `__salt__[name]` for a function this minion does not have.
fn no_such_function(name: &Value) -> FnError {
    FnError::Exception(format!("KeyError: {}", py_repr(name)))
}

/// `test.cross_test`: `__salt__[func](*args)`; the called function's retcode is the job's.
async fn cross_test(ctx: &Context, b: &Bound, st: &mut CallState) -> Result<Value, FnError> {
    let func = b.get("func").cloned().unwrap_or(Value::Nil);
    let name = func.as_str().unwrap_or_default().to_string();
    let Some(function) = super::Function::from_name(&name).filter(|_| func.is_str()) else {
        return Err(no_such_function(&func));
    };
    // Python's `*args` takes any iterable: a string gives its characters, a dict its keys.
    let args =
        match b.get("args") {
            None | Some(Value::Nil) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(Value::Map(entries)) => entries.iter().map(|(k, _)| k.clone()).collect(),
            Some(Value::String(s)) if s.as_str().is_some() => s
                .as_str()
                .unwrap_or_default()
                .chars()
                .map(|c| Value::from(c.to_string()))
                .collect(),
            Some(other) => {
                let spec = function.spec();
                let module = name.split('.').next().unwrap_or_default();
                let file = super::provider(module, ctx).unwrap_or(module);
                return Err(FnError::InvalidArgs(format!(
                "salt.loaded.int.module.{file}.{}() argument after * must be an iterable, not {}",
                spec.pyname,
                py_type_name(other)
            )));
            }
        };
    let (ret, retcode) = call_boxed(ctx, &name, args, Vec::new(), st.test)
        .await
        .ok_or_else(|| no_such_function(&func))??;
    st.retcode = retcode;
    Ok(ret)
}

/// `test.try`: `__salt__[module](**kwargs)`, `None` (or the error's Python repr when
/// `return_try_exception` is true) when that fails. The `__pub_*` keywords are passed on too,
/// so a function without `**kwargs` fails on them, as in Salt.
async fn try_call(ctx: &Context, b: &Bound, st: &mut CallState) -> Value {
    let module = b.get("module").cloned().unwrap_or(Value::Nil);
    let outcome = match module.as_str() {
        Some(name) => call_boxed(ctx, name, Vec::new(), b.kwargs.clone(), st.test).await,
        None => None,
    }
    .unwrap_or_else(|| Err(no_such_function(&module)));
    match outcome {
        Ok((ret, retcode)) => {
            st.retcode = retcode;
            ret
        }
        Err(e)
            if b.get("return_try_exception")
                .is_some_and(brine_protocol::payload::py_truthy) =>
        {
            Value::from(exception_repr(&e))
        }
        Err(_) => Value::Nil,
    }
}

/// The Python `repr()` of the exception a failure stands for (`TypeError("...")`).
fn exception_repr(e: &FnError) -> String {
    let (class, msg) = match e {
        FnError::InvalidArgs(m) => ("TypeError", Some(m.as_str())),
        FnError::Invocation(m) => ("SaltInvocationError", Some(m.as_str())),
        FnError::Execution(m) => ("CommandExecutionError", Some(m.as_str())),
        FnError::Exception(m) => match m.split_once(": ") {
            Some((class, msg)) if !class.contains(' ') => (class, Some(msg)),
            _ if !m.contains(' ') => (m.as_str(), None),
            _ => ("Exception", Some(m.as_str())),
        },
    };
    match msg {
        Some(msg) => format!("{class}({})", py_repr(&Value::from(msg))),
        None => format!("{class}()"),
    }
}

/// `test.module_report`: Salt 3007's loader iterates only `module.function` names, so every
/// function is in `functions` and in both `missing_*` lists and the other lists are empty.
fn module_report() -> Value {
    let functions = Value::Array(
        super::list_functions()
            .into_iter()
            .map(Value::from)
            .collect(),
    );
    map([
        ("functions", functions.clone()),
        ("function_attrs", Value::Array(Vec::new())),
        ("function_subs", Value::Array(Vec::new())),
        ("modules", Value::Array(Vec::new())),
        ("module_attrs", Value::Array(Vec::new())),
        ("missing_attrs", functions.clone()),
        ("missing_subs", functions),
    ])
}

/// Python's `random.randint(0, upper)`, with its errors for a bad `upper`.
fn py_randint(upper: &Value) -> Result<u64, FnError> {
    let value_error = |m: String| FnError::Exception(format!("ValueError: {m}"));
    let n: i128 = match upper {
        Value::Boolean(b) => i128::from(*b),
        Value::Integer(i) => i
            .as_i64()
            .map(i128::from)
            .or_else(|| i.as_u64().map(i128::from))
            .unwrap_or_default(),
        Value::F32(_) | Value::F64(_) => {
            let f = upper.as_f64().unwrap_or_default();
            if f.is_nan() {
                return Err(value_error("cannot convert float NaN to integer".into()));
            }
            if f.is_infinite() {
                return Err(FnError::Exception(
                    "OverflowError: cannot convert float infinity to integer".into(),
                ));
            }
            if f.fract() != 0.0 {
                return Err(value_error("non-integer stop for randrange()".into()));
            }
            f as i128
        }
        Value::String(s) if s.as_str().is_some() => {
            return Err(FnError::InvalidArgs(
                "can only concatenate str (not \"int\") to str".into(),
            ))
        }
        Value::Array(_) => {
            return Err(FnError::InvalidArgs(
                "can only concatenate list (not \"int\") to list".into(),
            ))
        }
        Value::String(_) | Value::Binary(_) => {
            return Err(FnError::InvalidArgs("can't concat int to bytes".into()))
        }
        other => {
            return Err(FnError::InvalidArgs(format!(
                "unsupported operand type(s) for +: '{}' and 'int'",
                py_type_name(other)
            )))
        }
    };
    if n < 0 {
        return Err(value_error(format!(
            "empty range for randrange() (0, {}, {})",
            n + 1,
            n + 1
        )));
    }
    let top = u64::try_from(n).unwrap_or(u64::MAX);
    Ok(if top == u64::MAX {
        rand::random::<u64>()
    } else {
        rand::random::<u64>() % (top + 1)
    })
}

/// `test.random_hash`: the hex digest of a random number's decimal text. The hash is looked
/// up before the number is drawn, as in Salt.
fn random_hash(ctx: &Context, b: &Bound) -> Result<Value, FnError> {
    let hash_type = match b.get("hash_type") {
        Some(v) if brine_protocol::payload::py_truthy(v) => v.clone(),
        _ => ctx
            .services
            .opts
            .get("hash_type")
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(|| Value::from("sha256"), Value::from),
    };
    let Some(name) = hash_type.as_str() else {
        return Err(FnError::InvalidArgs(format!(
            "attribute name must be string, not '{}'",
            py_type_name(&hash_type)
        )));
    };
    // hashlib's attribute names are case-sensitive; HashType::parse is not.
    let kind = (name == name.to_ascii_lowercase())
        .then(|| brine_protocol::crypt::HashType::parse(name))
        .flatten();
    let Some(kind) = kind else {
        return Err(match name {
            "shake_128" | "shake_256" => FnError::InvalidArgs(
                "hexdigest() missing required argument 'length' (pos 1)".into(),
            ),
            // Python has these; Brine does not compute them.
            "sha3_224" | "sha3_256" | "sha3_384" | "sha3_512" | "blake2b" | "blake2s" => {
                FnError::Exception(format!("ValueError: unsupported hash type {name}"))
            }
            _ => FnError::Exception(format!(
                "AttributeError: module 'hashlib' has no attribute {}",
                py_repr(&hash_type)
            )),
        });
    };
    let size = b
        .get("size")
        .cloned()
        .unwrap_or(Value::from(9_999_999_999u64));
    let number = py_randint(&size)?;
    Ok(Value::from(brine_protocol::crypt::hash_hex(
        number.to_string().as_bytes(),
        kind,
    )))
}

/// A number of `test.collatz`: Python's `start / 2` makes it a float for good.
#[derive(Debug, Clone, Copy)]
enum CollatzNum {
    Int(i128),
    Float(f64),
}

/// A Python int as Salt sends it: msgpack has no room for one past 64 bits, so Salt's
/// serializer sends those as their decimal text.
fn big_int(i: i128) -> Value {
    if let Ok(v) = i64::try_from(i) {
        Value::from(v)
    } else if let Ok(v) = u64::try_from(i) {
        Value::from(v)
    } else {
        Value::from(i.to_string())
    }
}

/// `test.collatz`: `[steps, seconds]`. A start below 1 never reaches 1: Salt's loop runs
/// (and grows its list) until the minion's memory runs out; Brine refuses it instead.
async fn collatz(start: &Value) -> Result<Value, FnError> {
    let began = Instant::now();
    let n = py_int(start).map_err(|e| {
        if e.starts_with("int() argument must be") {
            FnError::InvalidArgs(e)
        } else if e.starts_with("cannot convert float infinity") {
            FnError::Exception(format!("OverflowError: {e}"))
        } else {
            FnError::Exception(format!("ValueError: {e}"))
        }
    })?;
    if n < 1 {
        return Err(FnError::Invocation(format!(
            "the Collatz sequence from {n} never reaches 1: give a start of 1 or more"
        )));
    }
    let mut steps = Vec::new();
    let mut cur = CollatzNum::Int(i128::from(n));
    loop {
        cur = match cur {
            CollatzNum::Int(1) => break,
            CollatzNum::Int(i) => {
                steps.push(big_int(i));
                if i % 2 == 0 {
                    CollatzNum::Float(i as f64 / 2.0)
                } else {
                    CollatzNum::Int(i * 3 + 1)
                }
            }
            CollatzNum::Float(1.0) => break,
            CollatzNum::Float(f) => {
                steps.push(Value::F64(f));
                if f % 2.0 == 0.0 {
                    CollatzNum::Float(f / 2.0)
                } else {
                    CollatzNum::Float(f * 3.0 + 1.0)
                }
            }
        };
    }
    Ok(Value::Array(vec![
        Value::Array(steps),
        Value::F64(began.elapsed().as_secs_f64()),
    ]))
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

    // Expected values below are what Salt 3007.15's salt-call returned for the same calls.
    #[tokio::test]
    async fn random_hash_hashes_the_number_with_salts_errors() {
        let c = ctx();
        let zero = |hash: &str| {
            let mut a = vec![kw(&[("size", Value::from(0))])];
            if !hash.is_empty() {
                a = vec![kw(&[("size", Value::from(0)), ("hash_type", s(hash))])];
            }
            a
        };
        // No hash_type and no hash_type option: sha256, Salt's default.
        let r = call(&c, "test.random_hash", &zero("")).await;
        assert_eq!(
            r.ret,
            s("5feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e9")
        );
        assert_eq!(
            call(&c, "test.rand_str", &zero("md5")).await.ret,
            s("cfcd208495d565ef66e7dff9f98764da")
        );
        assert_eq!(
            call(&c, "test.random_hash", &zero("sha1")).await.ret,
            s("b6589fc6ab0dc82cf12099d1c2d40ab994e8410c")
        );
        let r = call(&c, "test.random_hash", &[]).await;
        assert_eq!(r.ret.as_str().map(str::len), Some(64));
        let r = call(&c, "test.random_hash", &[kw(&[("size", Value::from(-5))])]).await;
        assert_eq!(
            (r.ret, r.retcode),
            (
                s("The minion function caused an exception: ValueError: empty range for randrange() (0, -4, -4)"),
                1
            )
        );
        let r = call(&c, "test.random_hash", &[kw(&[("size", Value::F64(3.5))])]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: ValueError: non-integer stop for randrange()")
        );
        let r = call(&c, "test.random_hash", &[kw(&[("size", s("abc"))])]).await;
        assert!(r.ret.as_str().unwrap().starts_with(
            "Passed invalid arguments to test.random_hash: can only concatenate str (not \"int\") to str\n"
        ));
        let r = call(&c, "test.random_hash", &[kw(&[("hash_type", s("MD5"))])]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: AttributeError: module 'hashlib' has no attribute 'MD5'")
        );
        let r = call(
            &c,
            "test.random_hash",
            &[kw(&[("hash_type", s("shake_128"))])],
        )
        .await;
        assert!(r.ret.as_str().unwrap().starts_with(
            "Passed invalid arguments to test.random_hash: hexdigest() missing required argument 'length' (pos 1)"
        ));
    }

    #[tokio::test]
    async fn collatz_steps_turn_to_floats_as_in_python() {
        let c = ctx();
        let r = call(&c, "test.collatz", &[Value::from(3)]).await;
        let items = r.ret.as_array().unwrap();
        let f = Value::F64;
        assert_eq!(
            items[0],
            Value::Array(vec![
                Value::from(3),
                Value::from(10),
                f(5.0),
                f(16.0),
                f(8.0),
                f(4.0),
                f(2.0)
            ])
        );
        assert!(items[1].is_f64());
        let r = call(&c, "test.collatz", &[Value::F64(6.5)]).await;
        assert_eq!(
            r.ret.as_array().unwrap()[0].as_array().unwrap()[..3],
            [Value::from(6), f(3.0), f(10.0)]
        );
        let r = call(&c, "test.collatz", &[Value::from(1)]).await;
        assert_eq!(r.ret.as_array().unwrap()[0], Value::Array(vec![]));
        let r = call(&c, "test.collatz", &[Value::from(27)]).await;
        let steps = r.ret.as_array().unwrap()[0].as_array().unwrap().clone();
        assert_eq!(steps.len(), 111);
        assert_eq!(steps[..3], [Value::from(27), Value::from(82), f(41.0)]);
        assert!(steps.contains(&f(9232.0)));
        let r = call(&c, "test.collatz", &[s("abc")]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: ValueError: invalid literal for int() with base 10: 'abc'")
        );
        let r = call(&c, "test.collatz", &[Value::Array(vec![Value::from(1)])]).await;
        assert!(r.ret.as_str().unwrap().starts_with(
            "Passed invalid arguments to test.collatz: int() argument must be a string, a bytes-like object or a real number, not 'list'"
        ));
    }

    #[tokio::test]
    async fn collatz_below_one_is_refused() {
        // Salt's loop never ends for these (until memory runs out); Brine answers at once.
        let r = call(&ctx(), "test.collatz", &[Value::from(0)]).await;
        assert_eq!(
            (r.ret, r.retcode),
            (
                s("ERROR executing 'test.collatz': the Collatz sequence from 0 never reaches 1: give a start of 1 or more"),
                1
            )
        );
    }

    #[tokio::test]
    async fn assertion_tty_conf_test_and_report() {
        let c = ctx();
        let r = call(&c, "test.assertion", &[Value::Boolean(false)]).await;
        assert_eq!(
            (r.ret, r.retcode),
            (
                s("The minion function caused an exception: AssertionError"),
                1
            )
        );
        let r = call(&c, "test.assertion", &[Value::Array(vec![])]).await;
        assert_eq!(r.retcode, 1);
        let r = call(&c, "test.assertion", &[Value::Boolean(true)]).await;
        assert_eq!((r.ret, r.retcode), (Value::Nil, 0));
        let r = call(&c, "test.tty", &[s("a"), kw(&[("c", Value::from(1))])]).await;
        assert_eq!(
            (r.ret, r.retcode),
            (s("ERROR: This function has been moved to cmd.tty"), 0)
        );
        assert_eq!(call(&c, "test.conf_test", &[]).await.ret, s("unconfigured"));
        assert_eq!(
            call(&c, "test.deprecation_warning", &[]).await.ret,
            Value::Boolean(true)
        );
        let report = call(&c, "test.module_report", &[]).await.ret;
        let keys: Vec<&str> = report
            .as_map()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "functions",
                "function_attrs",
                "function_subs",
                "modules",
                "module_attrs",
                "missing_attrs",
                "missing_subs"
            ]
        );
        let functions = get(&report, "functions").unwrap();
        assert!(functions
            .as_array()
            .unwrap()
            .contains(&s("test.module_report")));
        assert_eq!(get(&report, "missing_subs"), Some(functions));
        assert_eq!(get(&report, "modules"), Some(&Value::Array(vec![])));
        let opts = call(&c, "test.get_opts", &[]).await.ret;
        assert!(get(&opts, "grains").is_some_and(|g| get(g, "os") == Some(&s("Debian"))));
        assert!(get(&opts, "pillar").is_some());
        assert_eq!(call(&c, "test.opts_pkg", &[]).await.ret, opts);
        assert_eq!(call(&c, "test.attr_call", &[]).await.ret, *c.grains);
        let r = call(&c, "test.stack", &[]).await;
        assert!(r.ret.is_str() && r.retcode == 0);
        let r = call(&c, "test.rand_sleep", &[Value::from(0)]).await;
        assert_eq!(r.ret, Value::Boolean(true));
        let r = call(&c, "test.rand_sleep", &[Value::from(-1)]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: ValueError: empty range for randrange() (0, 0, 0)")
        );
    }

    #[tokio::test]
    async fn cross_test_calls_another_function() {
        let c = ctx();
        let r = call(
            &c,
            "test.cross_test",
            &[s("test.echo"), Value::Array(vec![s("hi")])],
        )
        .await;
        assert_eq!(r.ret, s("hi"));
        // A string is iterated: one argument per character.
        let r = call(&c, "test.cross_test", &[s("test.arg"), s("abc")]).await;
        assert_eq!(
            get(&r.ret, "args"),
            Some(&Value::Array(vec![s("a"), s("b"), s("c")]))
        );
        let r = call(
            &c,
            "test.cross_test",
            &[s("test.retcode"), Value::Array(vec![Value::from(3)])],
        )
        .await;
        assert_eq!((r.ret, r.retcode), (Value::Boolean(true), 3));
        let r = call(&c, "test.cross_test", &[s("nosuch.fn")]).await;
        assert_eq!(
            r.ret,
            s("The minion function caused an exception: KeyError: 'nosuch.fn'")
        );
        let r = call(&c, "test.cross_test", &[s("test.echo")]).await;
        assert!(r.ret.as_str().unwrap().starts_with(
            "Passed invalid arguments to test.cross_test: echo() missing 1 required positional argument: 'text'\n"
        ));
        let r = call(&c, "test.cross_test", &[s("test.echo"), Value::from(5)]).await;
        assert!(r.ret.as_str().unwrap().starts_with(
            "Passed invalid arguments to test.cross_test: salt.loaded.int.module.test.echo() argument after * must be an iterable, not int\n"
        ));
    }

    #[tokio::test]
    async fn try_returns_none_or_the_exception() {
        let c = ctx();
        let r = call(&c, "test.try", &[s("test.echo"), kw(&[("text", s("hi"))])]).await;
        assert_eq!(r.ret, s("hi"));
        let r = call(&c, "test.try", &[s("nosuch.fn")]).await;
        assert_eq!((r.ret, r.retcode), (Value::Nil, 0));
        // In a job the __pub_* keywords go along, and echo() takes none.
        let job = ctx_with_load(publish_load("test.try", vec![], "20260101000000000001"));
        let r = call(
            &job,
            "test.try",
            &[s("test.echo"), kw(&[("text", s("hi"))])],
        )
        .await;
        assert_eq!(r.ret, Value::Nil);
        let r = call(
            &job,
            "test.try",
            &[
                s("test.echo"),
                kw(&[("return_try_exception", Value::Boolean(true))]),
            ],
        )
        .await;
        assert_eq!(
            r.ret,
            s("TypeError(\"echo() got an unexpected keyword argument '__pub_fun'\")")
        );
        let r = call(
            &c,
            "test.try",
            &[
                s("test.exception"),
                kw(&[("return_try_exception", Value::Boolean(true))]),
            ],
        )
        .await;
        assert_eq!(r.ret, s("Exception('Test Exception')"));
        let r = call(
            &c,
            "test.try",
            &[s("test.retcode"), kw(&[("code", Value::from(3))])],
        )
        .await;
        assert_eq!((r.ret, r.retcode), (Value::Boolean(true), 3));
    }
}
