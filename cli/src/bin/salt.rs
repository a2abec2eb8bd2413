//! salt [options] '<target>' <function> [arguments]

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use brine_cli::local::{parse_args, CliError, Local};
use brine_cli::output::{
    choose_outputter, no_response_message, render_with_retcode, OutputOptions, Outputter,
    NO_INDENT, NO_MINIONS_MATCHED,
};
use brine_protocol::optparse::{tools, Parsed};
use brine_protocol::payload::{get, get_str, map, to_json, Value};

/// What `salt` uses of its command line.
struct Cli {
    config_dir: PathBuf,
    timeout: Option<u64>,
    run_async: bool,
    static_: bool,
    out: Option<String>,
    out_indent: Option<i64>,
    no_color: bool,
    force_color: bool,
    tgt_type: &'static str,
    nodegroup: bool,
    verbose: bool,
    show_jid: bool,
    hide_timeout: bool,
    returner: String,
    args_separator: String,
    delimiter: String,
    log_level: String,
    target: String,
    function: String,
    args: Vec<String>,
}

/// Options of Salt's `salt` that Brine does not implement: refused rather than ignored.
const UNSUPPORTED: &[&str] = &[
    "saltfile",
    "module_executors",
    "executor_opts",
    "args_stdin",
    "no_parse",
    "failhard",
    "subset",
    "batch",
    "batch_wait",
    "batch_safe_limit",
    "batch_safe_size",
    "return_config",
    "return_kwargs",
    "cli_summary",
    "metadata",
    "state_output_diff",
    "config_dump",
    "preview_target",
    "list_hosts",
    "range",
    "eauth",
    "mktoken",
    "username",
    "password",
    "output_file",
    "output_file_append",
    "state_output",
    "state_verbose",
    "log_file",
    "log_level_logfile",
];

/// The target type Salt's `salt` derives from its targeting switches (the first one set, in
/// Salt's order).
fn target_type(p: &Parsed) -> &'static str {
    [
        ("pcre", "pcre"),
        ("list", "list"),
        ("grain", "grain"),
        ("grain_pcre", "grain_pcre"),
        ("nodegroup", "compound"),
        ("compound", "compound"),
        ("pillar_target", "pillar"),
        ("pillar_pcre", "pillar_pcre"),
        ("ipcidr", "ipcidr"),
    ]
    .iter()
    .find(|(dest, _)| p.flag(dest))
    .map(|(_, t)| *t)
    .unwrap_or("glob")
}

fn cli() -> Cli {
    let parser = tools::salt();
    let p = parser.parse_or_exit();
    parser.refuse_unsupported(&p, UNSUPPORTED);
    let mut args = p.args.clone();
    if p.flag("doc") {
        // As Salt: `salt -d` documents everything on every minion, `salt '*' -d test.ping`
        // one function.
        if args.is_empty() {
            args.push("*".into());
        }
        if args.len() < 2 {
            args.push("sys.doc".into());
        }
        if args[1] != "sys.doc" {
            args.insert(1, "sys.doc".into());
        }
    }
    if args.len() < 2 {
        let what = if args.is_empty() {
            "The target and the function to run are missing"
        } else {
            "The function to run is missing"
        };
        eprint!("{}", parser.error_text(what));
        std::process::exit(brine_protocol::optparse::EX_USAGE);
    }
    let mut rest = args.into_iter();
    let target = rest.next().expect("two arguments");
    let function = rest.next().expect("two arguments");
    Cli {
        config_dir: PathBuf::from(p.str("config_dir").unwrap_or("/etc/salt")),
        timeout: p.int("timeout").map(|t| t.max(0) as u64),
        run_async: p.flag("async"),
        static_: p.flag("static"),
        out: p.str("output").map(str::to_string),
        out_indent: p.int("output_indent"),
        no_color: p.flag("no_color"),
        force_color: p.flag("force_color"),
        tgt_type: target_type(&p),
        nodegroup: p.flag("nodegroup"),
        verbose: p.flag("verbose"),
        show_jid: p.flag("show_jid"),
        hide_timeout: !p.bool_or("show_timeout", true),
        returner: p.str("return").unwrap_or("").to_string(),
        args_separator: p.str("args_separator").unwrap_or(",").to_string(),
        delimiter: p.str("delimiter").unwrap_or(":").to_string(),
        log_level: p.str("log_level").unwrap_or("warning").to_string(),
        target,
        function,
        args: rest.collect(),
    }
}

fn main() {
    let cli = cli();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "{}",
                if e.msg.starts_with("ERROR") {
                    e.msg.clone()
                } else {
                    format!("ERROR: {}", e.msg)
                }
            );
            e.code
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(l) = brine_transport::logging::level(&cli.log_level) {
        brine_transport::logging::init(l, None);
    } else {
        return Err(CliError::new(
            format!("unknown log level {:?}", cli.log_level),
            2,
        ));
    }
    let out: Option<Outputter> = match &cli.out {
        Some(o) => Some(
            o.parse()
                .map_err(|e: brine_cli::output::UnknownOutputter| {
                    CliError::new(e.to_string(), 2)
                })?,
        ),
        None => None,
    };
    let opts = OutputOptions {
        color: !cli.no_color
            && (cli.force_color || std::io::IsTerminal::is_terminal(&std::io::stdout())),
        indent: cli
            .out_indent
            .map(|i| if i < 0 { NO_INDENT } else { i as usize }),
        static_: cli.static_,
    };
    let (fun, words) = (cli.function.clone(), cli.args.clone());
    let mut local = Local::open(&cli.config_dir)?;
    let tgt_type = cli.tgt_type;
    let tgt: Value = if tgt_type == "list" {
        Value::Array(
            cli.target
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(Value::from)
                .collect(),
        )
    } else if cli.nodegroup {
        match local.cfg.nodegroups.get(&cli.target) {
            Some(Value::Array(ids)) => Value::from(format!(
                "L@{}",
                ids.iter()
                    .filter_map(|v| match v {
                        Value::String(s) => s.as_str(),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            )),
            Some(v @ Value::String(_)) => v.clone(),
            _ => {
                return Err(CliError::new(
                    format!(
                        "Node group {} unavailable in {}",
                        cli.target,
                        cli.config_dir.display()
                    ),
                    2,
                ))
            }
        }
    } else {
        Value::from(cli.target.clone())
    };
    // Multi-function: "test.ping,test.echo" with arguments split by the separator.
    let (fun_value, arg_value) = if fun.contains(',') {
        let funs: Vec<&str> = fun.split(',').collect();
        let joined = words.join(" ");
        let groups: Vec<Vec<String>> = if words.is_empty() {
            vec![vec![]; funs.len()]
        } else {
            joined
                .split(cli.args_separator.as_str())
                .map(shell_words)
                .collect()
        };
        let mut arg_lists = Vec::new();
        for i in 0..funs.len() {
            arg_lists.push(Value::Array(parse_args(
                groups.get(i).map(Vec::as_slice).unwrap_or(&[]),
            )));
        }
        (
            Value::Array(funs.iter().map(|f| Value::from(*f)).collect()),
            Value::Array(arg_lists),
        )
    } else {
        (Value::from(fun.clone()), Value::Array(parse_args(&words)))
    };
    let timeout = Duration::from_secs(cli.timeout.unwrap_or(local.cfg.timeout).max(1));
    let mut listener = if cli.run_async {
        None
    } else {
        Some(local.listen()?)
    };
    let mut load = vec![
        ("cmd", Value::from("publish")),
        ("tgt", tgt),
        ("fun", fun_value.clone()),
        ("arg", arg_value),
        ("tgt_type", Value::from(tgt_type)),
        ("ret", Value::from(cli.returner.clone())),
        ("jid", Value::from("")),
        (
            "kwargs",
            map(vec![
                ("show_timeout", Value::from(!cli.hide_timeout)),
                ("show_jid", Value::from(cli.show_jid)),
                ("delimiter", Value::from(cli.delimiter.clone())),
            ]),
        ),
    ];
    load.extend(local.auth_fields());
    let reply = local.clear(map(load), Duration::from_secs(30))?;
    let inner = get(&reply, "load").cloned().unwrap_or(Value::Nil);
    let jid = get_str(&inner, "jid").map(str::to_string);
    let minions: Vec<String> = match get(&inner, "minions") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => s.as_str().map(str::to_string),
                _ => None,
            })
            .collect(),
        _ => vec![],
    };
    let Some(jid) = jid.filter(|_| !minions.is_empty()) else {
        println!("{NO_MINIONS_MATCHED}");
        let empty = render_with_retcode(
            out.unwrap_or(Outputter::Nested),
            &serde_json::json!({}),
            &opts,
            0,
        );
        if !empty.is_empty() {
            println!("{empty}");
        }
        eprintln!("ERROR: No return received");
        return Ok(2);
    };
    if cli.run_async {
        println!("Executed command with job ID: {jid}");
        return Ok(0);
    }
    if cli.verbose || cli.show_jid {
        println!("jid: {jid}");
    }
    let listener = listener.as_mut().expect("listening when not async");
    let expected: BTreeSet<String> = minions.iter().cloned().collect();
    let mut returned: Vec<(String, Value)> = Vec::new();
    let mut static_out: Vec<(String, serde_json::Value)> = Vec::new();
    let mut failed = false;
    let prefix = format!("salt/job/{jid}/ret/");
    let mut deadline = Instant::now() + timeout;
    let gather = Duration::from_secs(local.cfg.gather_job_timeout.max(1));
    let mut find_job: Option<(String, Instant, BTreeSet<String>, bool)> = None;
    let stdout = std::io::stdout();
    loop {
        if returned.len() >= expected.len() {
            break;
        }
        let now = Instant::now();
        if let Some((_, fj_deadline, waiting, running)) = &find_job {
            if waiting.is_empty() || now >= *fj_deadline {
                if *running {
                    deadline = now + timeout;
                    find_job = None;
                } else {
                    break;
                }
            }
        } else if now >= deadline {
            // Ask the missing minions whether they are still at it.
            let missing: Vec<Value> = expected
                .iter()
                .filter(|m| !returned.iter().any(|(r, _)| r == *m))
                .cloned()
                .map(Value::from)
                .collect();
            let waiting: BTreeSet<String> = missing
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => s.as_str().map(str::to_string),
                    _ => None,
                })
                .collect();
            let mut fl = vec![
                ("cmd", Value::from("publish")),
                ("tgt", Value::Array(missing)),
                ("fun", Value::from("saltutil.find_job")),
                ("arg", Value::Array(vec![Value::from(jid.clone())])),
                ("tgt_type", Value::from("list")),
                ("ret", Value::from("")),
                ("jid", Value::from("")),
                ("kwargs", map(vec![("delimiter", Value::from(":"))])),
            ];
            fl.extend(local.auth_fields());
            let fj = local
                .clear(map(fl), Duration::from_secs(30))
                .ok()
                .and_then(|r| {
                    get(&r, "load")
                        .and_then(|l| get_str(l, "jid"))
                        .map(str::to_string)
                });
            match fj {
                Some(fjid) => find_job = Some((fjid, Instant::now() + gather, waiting, false)),
                None => break,
            }
            continue;
        }
        let until = match &find_job {
            Some((_, d, _, _)) => *d,
            None => deadline,
        };
        let ev = match listener.next(until.saturating_duration_since(Instant::now())) {
            Ok(Some(ev)) => ev,
            Ok(None) => continue,
            Err(e) => return Err(CliError::new(format!("event bus: {e}"), 2)),
        };
        if let Some(id) = ev.tag.strip_prefix(&prefix) {
            if !expected.contains(id) || returned.iter().any(|(r, _)| r == id) {
                continue;
            }
            let retcode = brine_protocol::payload::get(&ev.data, "retcode")
                .map(retcode_of)
                .unwrap_or(0);
            if retcode != 0 {
                failed = true;
            }
            let ret = get(&ev.data, "return").cloned().unwrap_or(Value::Nil);
            let data = serde_json::json!({ id: to_json(&ret) });
            if cli.static_ {
                static_out.push((id.to_string(), to_json(&ret)));
            } else {
                let o = choose_outputter(out, get_str(&ev.data, "out"));
                let text = render_with_retcode(o, &data, &opts, retcode);
                if !text.is_empty() {
                    let _ = writeln!(stdout.lock(), "{text}");
                }
            }
            returned.push((id.to_string(), ev.data.clone()));
        } else if let Some((fjid, _, waiting, running)) = &mut find_job {
            if let Some(id) = ev.tag.strip_prefix(&format!("salt/job/{fjid}/ret/")) {
                waiting.remove(id);
                if matches!(get(&ev.data, "return"), Some(Value::Map(m)) if !m.is_empty()) {
                    *running = true;
                }
            }
        }
    }
    let missing: Vec<String> = expected
        .iter()
        .filter(|m| !returned.iter().any(|(r, _)| r == *m))
        .cloned()
        .collect();
    for id in &missing {
        failed = true;
        let msg = serde_json::Value::from(no_response_message(&jid));
        if cli.static_ {
            static_out.push((id.clone(), msg));
        } else if !cli.hide_timeout {
            let data = serde_json::json!({ id: msg });
            let text = render_with_retcode(out.unwrap_or(Outputter::NoReturn), &data, &opts, 1);
            if !text.is_empty() {
                println!("{text}");
            }
        }
    }
    if cli.static_ {
        let data = serde_json::Value::Object(static_out.into_iter().collect());
        let text = render_with_retcode(
            out.unwrap_or(Outputter::Nested),
            &data,
            &opts,
            i64::from(failed),
        );
        if !text.is_empty() {
            println!("{text}");
        }
    }
    if failed {
        eprintln!("ERROR: Minions returned with non-zero exit code");
        return Ok(1);
    }
    Ok(0)
}

fn retcode_of(v: &Value) -> i64 {
    match v {
        Value::Integer(i) => i.as_i64().unwrap_or(1),
        Value::Map(m) => m
            .iter()
            .map(|(_, v)| retcode_of(v))
            .find(|c| *c != 0)
            .unwrap_or(0),
        _ => 0,
    }
}

/// Split one multi-function argument group on whitespace (quotes were already handled by
/// the shell when the words reached us).
fn shell_words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}
