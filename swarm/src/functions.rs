//! The few execution functions a simulated minion answers.

use std::time::Duration;

use brine_protocol::payload::Value;

/// A function the swarm knows, parsed from the publish's `fun`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Function {
    Ping,
    Echo,
    Sleep,
    Version,
    FindJob,
    /// `test.blob [size]`: a string of `size` bytes (default `--return-size`).
    Blob,
    /// `saltutil.refresh_pillar`: a new `_pillar` request, answered once the master's reply is in.
    RefreshPillar,
    /// `swarm.fetch_file <salt://path> [saltenv]`: the file's bytes fetched from the master
    /// with `_serve_file` chunk by chunk (as a minion's file client does) and dropped; answers
    /// the byte count.
    FetchFile,
    /// `swarm.highstate_requests [prefix...] [saltenv=base]`: what a minion asks of the master
    /// for a highstate, without running states: its pillar, the saltenv's file list, then the
    /// hash and the content of every file under the prefixes (`file.recurse` and templates
    /// fetch them so), and the directory list. Answers `{"files": n, "bytes": total}`.
    HighstateRequests,
    Unknown(String),
}

impl Function {
    pub fn parse(name: &str) -> Function {
        match name {
            "test.ping" => Function::Ping,
            "test.echo" => Function::Echo,
            "test.sleep" => Function::Sleep,
            "test.version" => Function::Version,
            "saltutil.find_job" => Function::FindJob,
            "test.blob" => Function::Blob,
            "saltutil.refresh_pillar" => Function::RefreshPillar,
            "swarm.fetch_file" => Function::FetchFile,
            "swarm.highstate_requests" => Function::HighstateRequests,
            other => Function::Unknown(other.to_string()),
        }
    }
}

/// What a call gives: the `return` value and the `retcode`.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub ret: Value,
    pub retcode: i32,
}

impl Outcome {
    pub(crate) fn ok(ret: Value) -> Outcome {
        Outcome { ret, retcode: 0 }
    }

    pub(crate) fn fail(msg: String) -> Outcome {
        Outcome {
            ret: Value::from(msg),
            retcode: 1,
        }
    }
}

/// The `n`th positional argument, or the keyword `name` (Salt passes keywords as a trailing
/// map with `__kwarg__: True`).
pub fn arg<'a>(args: &'a [Value], n: usize, name: &str) -> Option<&'a Value> {
    let is_kwargs = |v: &Value| matches!(v, Value::Map(m) if m.iter().any(|(k, v)| k.as_str() == Some("__kwarg__") && *v == Value::Boolean(true)));
    let positional: Vec<&Value> = args.iter().filter(|a| !is_kwargs(a)).collect();
    if let Some(v) = positional.get(n) {
        return Some(v);
    }
    args.iter().filter(|a| is_kwargs(a)).find_map(|a| match a {
        Value::Map(m) => m
            .iter()
            .find(|(k, _)| k.as_str() == Some(name))
            .map(|(_, v)| v),
        _ => None,
    })
}

/// A number given as an int, a float or a numeric string.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => i.as_f64(),
        Value::F32(f) => Some(f64::from(*f)),
        Value::F64(f) => Some(*f),
        Value::String(s) => s.as_str().and_then(|s| s.trim().parse().ok()),
        _ => None,
    }
}

/// Largest `test.blob` answer, so a typo cannot exhaust memory on 10,000 minions.
pub const MAX_BLOB: usize = 64 * 1024 * 1024;

/// Run `fun`. `find_job` answers from `running` (the load of a running job with that jid).
pub async fn call(
    fun: &Function,
    args: &[Value],
    default_blob: usize,
    running: impl FnOnce(&str) -> Option<Value>,
) -> Outcome {
    match fun {
        Function::Ping => Outcome::ok(Value::Boolean(true)),
        Function::Echo => match arg(args, 0, "text") {
            Some(v) => Outcome::ok(v.clone()),
            None => Outcome::fail("test.echo needs the argument text".into()),
        },
        Function::Sleep => {
            let Some(secs) = arg(args, 0, "length").and_then(number) else {
                return Outcome::fail("test.sleep needs a numeric length".into());
            };
            if !(0.0..=86_400.0).contains(&secs) {
                return Outcome::fail(format!("test.sleep length {secs} is out of range"));
            }
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            Outcome::ok(Value::Boolean(true))
        }
        Function::Version => Outcome::ok(Value::from(brine_protocol::SALT_VERSION)),
        Function::FindJob => {
            let jid = arg(args, 0, "jid").and_then(|v| v.as_str()).unwrap_or("");
            Outcome::ok(running(jid).unwrap_or(Value::Map(vec![])))
        }
        Function::Blob => {
            let size = match arg(args, 0, "size") {
                None => default_blob as f64,
                Some(v) => match number(v) {
                    Some(n) => n,
                    None => return Outcome::fail("test.blob size must be a number".into()),
                },
            };
            if !(0.0..=MAX_BLOB as f64).contains(&size) {
                return Outcome::fail(format!("test.blob size must be 0..={MAX_BLOB}"));
            }
            Outcome::ok(Value::from("x".repeat(size as usize)))
        }
        Function::RefreshPillar | Function::FetchFile | Function::HighstateRequests => {
            Outcome::fail("this function talks to the master: the minion runs it".into())
        }
        Function::Unknown(name) => Outcome::fail(format!("'{name}' is not available.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kw(pairs: &[(&str, Value)]) -> Value {
        let mut m = vec![(Value::from("__kwarg__"), Value::Boolean(true))];
        m.extend(pairs.iter().map(|(k, v)| (Value::from(*k), v.clone())));
        Value::Map(m)
    }

    async fn run(fun: &str, args: &[Value]) -> Outcome {
        call(&Function::parse(fun), args, 16, |_| None).await
    }

    #[tokio::test]
    async fn the_known_functions() {
        assert_eq!(run("test.ping", &[]).await.ret, Value::Boolean(true));
        assert_eq!(
            run("test.echo", &[Value::from("hi")]).await.ret,
            Value::from("hi")
        );
        assert_eq!(
            run("test.echo", &[kw(&[("text", Value::from("kw"))])])
                .await
                .ret,
            Value::from("kw")
        );
        assert_eq!(
            run("test.version", &[]).await.ret,
            Value::from(brine_protocol::SALT_VERSION)
        );
        assert_eq!(run("test.blob", &[]).await.ret, Value::from("x".repeat(16)));
        assert_eq!(
            run("test.blob", &[Value::from("3")]).await.ret,
            Value::from("xxx")
        );
        assert_eq!(run("test.blob", &[Value::from(-1)]).await.retcode, 1);
        let miss = run("no.such", &[]).await;
        assert_eq!(miss.ret, Value::from("'no.such' is not available."));
        assert_eq!(miss.retcode, 1);
        assert_eq!(run("test.echo", &[]).await.retcode, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_waits_and_bad_lengths_fail() {
        let t0 = tokio::time::Instant::now();
        assert_eq!(run("test.sleep", &[Value::from(5)]).await.retcode, 0);
        assert!(t0.elapsed() >= Duration::from_secs(5));
        assert_eq!(run("test.sleep", &[Value::from("x")]).await.retcode, 1);
        assert_eq!(run("test.sleep", &[Value::from(-2)]).await.retcode, 1);
    }

    #[tokio::test]
    async fn find_job_reports_running_jobs_only() {
        let job = Value::Map(vec![(Value::from("jid"), Value::from("1"))]);
        let f = Function::FindJob;
        let got = call(&f, &[Value::from("1")], 0, |j| {
            (j == "1").then(|| job.clone())
        })
        .await;
        assert_eq!(got.ret, job);
        let none = call(&f, &[Value::from("2")], 0, |j| {
            (j == "1").then(|| job.clone())
        })
        .await;
        assert_eq!(none.ret, Value::Map(vec![]));
    }
}
