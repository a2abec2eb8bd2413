//! salt-run <runner.function> [arguments]: run a runner next to the master.

use std::path::PathBuf;
use std::time::Duration;

use brine_cli::local::{parse_args, CliError, Local};
use brine_cli::output::{outputter_named, render, OutputOptions, Outputter, NO_INDENT};
use brine_protocol::optparse::tools;
use brine_protocol::payload::{get, get_str, map, to_json, Value};

/// What `salt-run` uses of its command line.
struct Cli {
    config_dir: PathBuf,
    timeout: u64,
    run_async: bool,
    quiet: bool,
    out: Option<String>,
    out_indent: Option<i64>,
    no_color: bool,
    force_color: bool,
    log_level: String,
    function: String,
    args: Vec<String>,
}

/// Options of Salt's `salt-run` that Brine does not implement: refused rather than ignored.
const UNSUPPORTED: &[&str] = &[
    "saltfile",
    "args_stdin",
    "jid",
    "no_parse",
    "doc",
    "eauth",
    "mktoken",
    "username",
    "password",
    "output_file",
    "output_file_append",
    "state_output",
    "state_verbose",
    "profiling_path",
    "profiling_enabled",
    "log_file",
    "log_level_logfile",
];

fn cli() -> Cli {
    let parser = tools::salt_run();
    let p = parser.parse_or_exit();
    parser.refuse_unsupported(&p, UNSUPPORTED);
    let mut args = p.args.clone().into_iter();
    let Some(function) = args.next() else {
        eprint!(
            "{}",
            parser.error_text("The runner function to run is missing")
        );
        std::process::exit(brine_protocol::optparse::EX_USAGE);
    };
    Cli {
        config_dir: PathBuf::from(p.str("config_dir").unwrap_or("/etc/salt")),
        timeout: p.int("timeout").map(|t| t.max(0) as u64).unwrap_or(300),
        run_async: p.flag("async"),
        quiet: p.flag("quiet"),
        out: p.str("output").map(str::to_string),
        out_indent: p.int("output_indent"),
        no_color: p.flag("no_color"),
        force_color: p.flag("force_color"),
        log_level: p.str("log_level").unwrap_or("warning").to_string(),
        function,
        args: args.collect(),
    }
}

fn main() {
    brine_cli::quiet_on_closed_pipe();
    let cli = cli();
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("{}", e.msg);
            std::process::exit(e.code);
        }
    }
}

fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(l) = brine_transport::logging::level(&cli.log_level) {
        brine_transport::logging::init(l, None);
    }
    let out: Outputter = match &cli.out {
        Some(o) => outputter_named(o, &cli.log_level),
        None => Outputter::Nested,
    };
    let opts = OutputOptions {
        color: !cli.no_color
            && (cli.force_color || std::io::IsTerminal::is_terminal(&std::io::stdout())),
        indent: cli
            .out_indent
            .map(|i| if i < 0 { NO_INDENT } else { i as usize }),
        static_: false,
        state: Default::default(),
    };
    let local = Local::open(&cli.config_dir)?;
    let mut args = parse_args(&cli.args);
    let mut kwarg = match args.last() {
        Some(Value::Map(m))
            if m.iter()
                .any(|(k, v)| k == &Value::from("__kwarg__") && v == &Value::from(true)) =>
        {
            let Some(Value::Map(m)) = args.pop() else {
                unreachable!("just matched a map")
            };
            Value::Map(
                m.into_iter()
                    .filter(|(k, _)| k != &Value::from("__kwarg__"))
                    .collect(),
            )
        }
        _ => Value::Map(vec![]),
    };
    let mut listener = if cli.run_async {
        None
    } else {
        Some(local.listen()?)
    };
    // As Salt's salt-run: the jid is chosen here, and an orchestration is told it is its own.
    let jid = brine_protocol::jid::gen_jid();
    if ORCHESTRATE.contains(&cli.function.as_str()) {
        if let Value::Map(m) = &mut kwarg {
            if !m
                .iter()
                .any(|(k, _)| k == &Value::from("orchestration_jid"))
            {
                m.push((Value::from("orchestration_jid"), Value::from(jid.clone())));
            }
        }
    }
    let mut load = vec![
        ("cmd", Value::from("runner")),
        ("jid", Value::from(jid.clone())),
        ("fun", Value::from(cli.function.clone())),
        (
            "kwarg",
            map(vec![("arg", Value::Array(args)), ("kwarg", kwarg)]),
        ),
    ];
    load.extend(local.auth_fields());
    let reply = local.clear(map(load), Duration::from_secs(30))?;
    let Some(jid) = get_str(&reply, "jid").map(str::to_string) else {
        return Err(CliError::new(
            format!("the master did not start the runner: {reply}"),
            1,
        ));
    };
    if cli.run_async {
        println!(
            "{}",
            render(
                out,
                &serde_json::json!({"jid": jid, "tag": format!("salt/run/{jid}")}),
                &opts
            )
        );
        return Ok(0);
    }
    let listener = listener.as_mut().expect("listening when not async");
    // Like Salt's salt-run: the runner's own events (progress, ...) are printed as they come,
    // `{suffix, event}`, unless --quiet; text the runner printed is written as it is.
    let prefix = format!("salt/run/{jid}/");
    let deadline = std::time::Instant::now() + Duration::from_secs(cli.timeout.max(1));
    let ev = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let next = if left.is_zero() {
            None
        } else {
            listener
                .next(left)
                .map_err(|e| CliError::new(format!("event bus: {e}"), 2))?
        };
        let Some(ev) = next else {
            return Err(CliError::new(
                format!(
                    "No answer from runner {} within {} s (jid {jid})",
                    cli.function, cli.timeout
                ),
                1,
            ));
        };
        let Some(suffix) = ev.tag.strip_prefix(&prefix) else {
            continue;
        };
        match suffix {
            "ret" => break ev,
            // Fired on the bus for others (an orchestration's `args`), not by the runner's
            // own event channel: Salt's salt-run does not print them.
            "new" | "args" => {}
            "stdout" => {
                if let Some(text) = get_str(&ev.data, "text") {
                    print!("{text}");
                }
            }
            _ if cli.quiet => {}
            _ => {
                let shown = serde_json::json!({"suffix": suffix, "event": to_json(&ev.data)});
                let text = render(out, &shown, &opts);
                if !text.is_empty() {
                    println!("{text}");
                }
            }
        }
    };
    let ret = get(&ev.data, "return").cloned().unwrap_or(Value::Nil);
    let (shown, out) = shown(&ret, cli.out.is_some().then_some(out));
    let text = render(out, &to_json(shown), &opts);
    if !text.is_empty() && !cli.quiet {
        println!("{text}");
    }
    let success = get(&ev.data, "success") != Some(&Value::from(false));
    Ok(exit_code(&ret).unwrap_or(if success { 0 } else { 1 }))
}

/// The runners an orchestration jid is given to.
const ORCHESTRATE: &[&str] = &["state.orchestrate", "state.orch", "state.sls"];

/// What Salt's salt-run prints of a return, and with which outputter (`--out`, else the one
/// the return names): `data` alone when the return is exactly `{data, outputter}`, else all
/// of it.
fn shown(ret: &Value, forced: Option<Outputter>) -> (&Value, Outputter) {
    let named = get_str(ret, "outputter").and_then(|o| o.parse::<Outputter>().ok());
    if let Value::Map(m) = ret {
        let keys: Vec<&str> = m.iter().filter_map(|(k, _)| k.as_str()).collect();
        if keys.len() == 2 && keys.contains(&"data") && keys.contains(&"outputter") {
            if let Some(data) = get(ret, "data") {
                return (data, forced.or(named).unwrap_or(Outputter::Nested));
            }
        }
    }
    (ret, forced.or(named).unwrap_or(Outputter::Nested))
}

/// Salt's exit code from a return that carries one: its `retcode`, or that of its `data`.
fn exit_code(ret: &Value) -> Option<i32> {
    let code = |v: &Value| get(v, "retcode").and_then(brine_protocol::loads::int);
    if !matches!(ret, Value::Map(_)) {
        return None;
    }
    code(ret)
        .or_else(|| get(ret, "data").and_then(code))
        .map(|c| c as i32)
}
