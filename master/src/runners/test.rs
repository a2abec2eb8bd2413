//! `test.*`: runners that exercise the runner machinery itself.

use std::time::Duration;

use brine_protocol::payload::{map, Value};

use super::{ready, Call, Runner, RunnerFuture};
use crate::wheel::Args;

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "test.arg",
        args: &["*args", "**kwargs"],
        doc: "Return the positional and keyword arguments given (keywords starting with __ left out).\n\nCLI Example:\n\n    salt-run test.arg foo bar=baz\n",
        // Salt's runner drops its private `__`-keys from the keyword arguments.
        run: |c| ready(Ok(args_and_kwargs(&c.args, |k| !k.starts_with("__")))),
    },
    Runner {
        name: "test.get_opts",
        args: &[],
        doc: "Return the master's configuration options (as wheel config.values gives them: Salt's defaults filled in, secrets left out).\n\nCLI Example:\n\n    salt-run test.get_opts\n",
        run: |c| ready(c.master.run_wheel("config.values", &Args::default())),
    },
    Runner {
        name: "test.metasyntactic",
        args: &["locality=us"],
        doc: "Return the common metasyntactic words of a locality (us or uk).\n\nCLI Example:\n\n    salt-run test.metasyntactic locality=uk\n",
        run: |c| ready(Ok(metasyntactic(&c))),
    },
    Runner {
        name: "test.raw_arg",
        args: &["*args", "**kwargs"],
        doc: "Return the positional and keyword arguments given, all of them.\n\nCLI Example:\n\n    salt-run test.raw_arg foo bar=baz\n",
        run: |c| ready(Ok(args_and_kwargs(&c.args, |_| true))),
    },
    Runner {
        name: "test.sleep",
        args: &["s_time=10"],
        doc: "Sleep s_time seconds (default 10), then return True.\n\nCLI Example:\n\n    salt-run test.sleep s_time=5\n",
        run: sleep,
    },
    Runner {
        name: "test.stdout_print",
        args: &[],
        doc: "Print 'foo' and return 'bar' (the printed text reaches salt-run's terminal).\n\nCLI Example:\n\n    salt-run test.stdout_print\n",
        run: |c| ready(Ok(stdout_print(&c))),
    },
    Runner {
        name: "test.stream",
        args: &[],
        doc: "Fire 99 progress events ('Runner is N% done'), one every 0.1 s, and return True.\n\nCLI Example:\n\n    salt-run test.stream\n",
        run: stream,
    },
];

/// `{"args": [...], "kwargs": {...}}`, the keyword arguments those `keep` accepts.
fn args_and_kwargs(a: &Args, keep: impl Fn(&str) -> bool) -> Value {
    let kwargs = a
        .kwargs
        .iter()
        .filter(|(k, _)| keep(k))
        .map(|(k, v)| (k.as_str(), v.clone()));
    map(vec![
        ("args", Value::Array(a.args.clone())),
        ("kwargs", map(kwargs)),
    ])
}

fn metasyntactic(c: &Call) -> Value {
    let locality = c.args.get_str(0, "locality").unwrap_or_else(|| "us".into());
    let words: &[&str] = match locality.as_str() {
        "us" => &[
            "foo", "bar", "baz", "qux", "quux", "quuz", "corge", "grault", "garply", "waldo",
            "fred", "plugh", "xyzzy", "thud",
        ],
        "uk" => &["wibble", "wobble", "wubble", "flob"],
        _ => return Value::Nil,
    };
    Value::Array(words.iter().map(|w| Value::from(*w)).collect())
}

/// Salt's runner prints in the process running it (salt-run's terminal): Brine runs runners
/// in the master, so the printed text goes to salt-run as an event.
fn stdout_print(c: &Call) -> Value {
    let jid = &c.jid;
    tracing::info!("runner test.stdout_print (jid {jid}) prints: foo");
    c.master.bus.fire(
        &format!("salt/run/{jid}/stdout"),
        map(vec![("text", Value::from("foo\n"))]),
    );
    Value::from("bar")
}

/// Salt's progress events: salt-run prints each as it comes.
fn stream(c: Call) -> RunnerFuture {
    Box::pin(async move {
        for i in 1..100 {
            c.master.bus.fire(
                &format!("salt/run/{}/progress", c.jid),
                map(vec![(
                    "message",
                    Value::from(format!("Runner is {i}% done")),
                )]),
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Value::from(true))
    })
}

fn sleep(c: Call) -> RunnerFuture {
    Box::pin(async move {
        let secs = match c.args.get(0, "s_time") {
            None => 10.0,
            Some(v) => v
                .as_f64()
                .or_else(|| v.as_i64().map(|i| i as f64))
                .or_else(|| v.as_str().and_then(|t| t.trim().parse().ok()))
                .filter(|f: &f64| f.is_finite() && (0.0..=86_400.0).contains(f))
                .ok_or("s_time must be a number of seconds from 0 to 86400")?,
        };
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        Ok(Value::Boolean(true))
    })
}
