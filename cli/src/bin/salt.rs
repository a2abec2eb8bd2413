//! salt [options] '<target>' <function> [arguments]

use std::io::Write;
use std::path::PathBuf;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use brine_cli::local::{parse_args, CliError, Local};
use brine_cli::output::{
    choose_outputter, no_response_message, outputter_named, render_with_retcode, OutputOptions,
    Outputter, NO_INDENT, NO_MINIONS_MATCHED,
};
use brine_client::batch::{batch_retcode, invalid_batch_text};
use brine_client::link::LinkPublisher;
use brine_client::{Batch, BatchEvent, BatchSize, LocalClient, Timeouts};
use brine_protocol::loads::{Fun, PublishRequest, Tgt};
use brine_protocol::optparse::{tools, Parsed};
use brine_protocol::payload::{get, get_str, to_json, Value};
use brine_protocol::pyrepr::str_repr;
use brine_transport::eventbus::Event;
use tokio::sync::mpsc;

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
    state_output: Option<String>,
    state_verbose: Option<String>,
    output_diff: bool,
    /// `-b`: the batch size as given.
    batch: Option<String>,
    batch_wait: f64,
    failhard: bool,
    /// `--subset`: run on this many of the targeted minions that have the function.
    subset: Option<usize>,
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
    "batch_safe_limit",
    "batch_safe_size",
    "return_config",
    "return_kwargs",
    "cli_summary",
    "metadata",
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
        state_output: p.str("state_output").map(str::to_string),
        state_verbose: p.str("state_verbose").map(str::to_string),
        output_diff: p.flag("state_output_diff"),
        batch: p.str("batch").filter(|b| !b.is_empty()).map(str::to_string),
        batch_wait: p.float("batch_wait").unwrap_or(0.0),
        failhard: p.flag("failhard"),
        subset: p
            .int("subset")
            .filter(|n| *n != 0)
            .map(|n| n.max(0) as usize),
        target,
        function,
        args: rest.collect(),
    }
}

fn main() {
    brine_cli::quiet_on_closed_pipe();
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
        Some(o) => Some(outputter_named(o, &cli.log_level)),
        None => None,
    };
    let (fun, words) = (cli.function.clone(), cli.args.clone());
    let local = Local::open(&cli.config_dir)?;
    let opts = OutputOptions {
        color: !cli.no_color
            && (cli.force_color || std::io::IsTerminal::is_terminal(&std::io::stdout())),
        indent: cli
            .out_indent
            .map(|i| if i < 0 { NO_INDENT } else { i as usize }),
        static_: cli.static_,
        state: local.state_output(
            cli.state_output.as_deref(),
            cli.state_verbose.as_deref(),
            cli.output_diff,
        ),
    };
    let tgt_type = cli.tgt_type;
    let tgt = if tgt_type == "list" {
        Tgt::List(
            cli.target
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        )
    } else if cli.nodegroup {
        match local.cfg.nodegroups.get(&cli.target) {
            Some(Value::Array(ids)) => Tgt::Expr(format!(
                "L@{}",
                ids.iter()
                    .filter_map(|v| match v {
                        Value::String(s) => s.as_str(),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            )),
            Some(Value::String(s)) if s.as_str().is_some() => {
                Tgt::Expr(s.as_str().unwrap_or_default().to_string())
            }
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
        Tgt::Expr(cli.target.clone())
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
            Fun::Many(funs.iter().map(|f| f.to_string()).collect()),
            arg_lists,
        )
    } else {
        (Fun::One(fun.clone()), parse_args(&words))
    };
    let mut req = PublishRequest::new(tgt, fun_value, arg_value, tgt_type);
    req.ret = cli.returner.clone();
    req.kwargs
        .insert("show_timeout", Value::from(!cli.hide_timeout));
    req.kwargs.insert("show_jid", Value::from(cli.show_jid));
    req.kwargs
        .insert("delimiter", Value::from(cli.delimiter.clone()));
    let timeouts = local.timeouts(cli.timeout);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(format!("cannot start: {e}"), 2))?;
    let client = local.client();
    // `--static` is a quiet batch run, of all the minions at once unless `-b` says otherwise
    // (and it takes precedence over `--subset` and `--async`), as in Salt.
    if cli.static_ || cli.batch.is_some() {
        let spec = cli.batch.as_deref().unwrap_or("100%");
        let Some(size) = BatchSize::parse(spec) else {
            println!("{}", invalid_batch_text(spec));
            return Ok(1);
        };
        let batch = Batch {
            size,
            wait: Duration::try_from_secs_f64(cli.batch_wait).unwrap_or_default(),
        };
        let feed = local.feed()?;
        return rt.block_on(run_batch(
            &client, feed, &req, batch, timeouts, &cli, out, &opts,
        ));
    }
    if let (Some(n), false, Fun::One(fun)) = (cli.subset, cli.run_async, &req.fun) {
        // Salt's cmd_subset: ask the targets for their functions first.
        let probe = req.probe("sys.list_functions");
        let feed = local.feed()?;
        let having = rt.block_on(async {
            let job = client.publish(probe).await?;
            let mut having = Vec::new();
            if job.minions.is_empty() {
                return Ok(having);
            }
            let mut returns = client.returns(feed, &job, timeouts);
            while let Some((id, ev)) = returns.next().await {
                if let Some(Value::Array(funs)) = get(&ev.data, "return") {
                    if funs.iter().any(|f| f.as_str() == Some(fun)) {
                        having.push(id);
                    }
                }
            }
            Ok(having)
        });
        let having = having.map_err(brine_cli::local::request_error)?;
        req.tgt = Tgt::List(brine_client::batch::choose_subset(having, n));
        req.tgt_type = "list".into();
    }
    // Listen before publishing, so that no return is missed.
    let feed = if cli.run_async {
        None
    } else {
        Some(local.feed()?)
    };
    let job = rt
        .block_on(client.publish(req))
        .map_err(brine_cli::local::request_error)?;
    if job.minions.is_empty() || job.jid.is_empty() {
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
    }
    let jid = job.jid.clone();
    if cli.run_async {
        println!("Executed command with job ID: {jid}");
        return Ok(0);
    }
    if cli.verbose || cli.show_jid {
        println!("jid: {jid}");
    }
    let mut failed = false;
    let stdout = std::io::stdout();
    let feed = feed.expect("listening when not async");
    let missing = rt.block_on(async {
        let mut returns = client.returns(feed, &job, timeouts);
        while let Some((id, ev)) = returns.next().await {
            let retcode = get(&ev.data, "retcode").map(retcode_of).unwrap_or(0);
            if retcode != 0 {
                failed = true;
            }
            let ret = get(&ev.data, "return").cloned().unwrap_or(Value::Nil);
            let data = serde_json::json!({ id: to_json(&ret) });
            let o = choose_outputter(out, get_str(&ev.data, "out"));
            let text = render_with_retcode(o, &data, &opts, retcode);
            if !text.is_empty() {
                let _ = writeln!(stdout.lock(), "{text}");
            }
        }
        returns.missing()
    });
    for id in &missing {
        failed = true;
        if !cli.hide_timeout {
            let msg = serde_json::Value::from(no_response_message(&jid));
            let data = serde_json::json!({ id: msg });
            let text = render_with_retcode(out.unwrap_or(Outputter::NoReturn), &data, &opts, 1);
            if !text.is_empty() {
                println!("{text}");
            }
        }
    }
    if failed {
        eprintln!("ERROR: Minions returned with non-zero exit code");
        return Ok(1);
    }
    Ok(0)
}

/// `salt -b`: Salt's batch output (each return with its `retcode` and `jid`, in the
/// outputter the return names) and exit code (the highest retcode).
///
/// `salt --static` is Salt's quiet batch run: nothing is printed along the way (not the
/// minions that do not answer the ping, who are left out), a minion whose job ends without
/// a return is `{}`, and all returns are printed at the end as one result in the outputter
/// asked for (the returns' own are not used); the exit code is 0 whatever the retcodes.
/// Both exit 2 when nothing returned.
#[allow(clippy::too_many_arguments)]
async fn run_batch(
    client: &LocalClient<LinkPublisher>,
    feed: mpsc::Receiver<Arc<Event>>,
    req: &PublishRequest,
    batch: Batch,
    timeouts: Timeouts,
    cli: &Cli,
    out: Option<Outputter>,
    opts: &OutputOptions,
) -> Result<i32, CliError> {
    let quiet = cli.static_;
    let stdout = std::io::stdout();
    let mut retcode = 0i64;
    let mut collected = serde_json::Map::new();
    // Salt reports the minions that did not answer the ping only once a batch starts.
    let mut down: Option<Vec<String>> = None;
    let show = |o: Outputter, data: &serde_json::Value, rc: i64| {
        let text = render_with_retcode(o, data, opts, rc);
        if !text.is_empty() {
            let _ = writeln!(stdout.lock(), "{text}");
        }
    };
    let used = client
        .batch(feed, req, batch, timeouts, |ev| match ev {
            BatchEvent::Down(ids) => {
                down = Some(ids);
                ControlFlow::Continue(())
            }
            BatchEvent::Started { minions, .. } => {
                if !quiet {
                    for id in down.iter_mut().flat_map(std::mem::take) {
                        println!("Minion {id} did not respond. No job will be sent.");
                    }
                    let list: Vec<String> = minions.iter().map(|m| str_repr(m)).collect();
                    println!("\nExecuting run on [{}]\n", list.join(", "));
                }
                ControlFlow::Continue(())
            }
            BatchEvent::Return { id, event, .. } => {
                let data = &event.data;
                let rc = get(data, "retcode").map(batch_retcode);
                let ret = get(data, "return").map(to_json).unwrap_or_default();
                if quiet {
                    collected.insert(id.clone(), ret);
                } else {
                    let mut shown = serde_json::Map::new();
                    if let Some(rc) = rc {
                        shown.insert("retcode".into(), serde_json::json!(rc));
                    }
                    if let Some(jid) = get(data, "jid") {
                        shown.insert("jid".into(), to_json(jid));
                    }
                    shown.insert(id.clone(), ret);
                    let o = choose_outputter(out, get_str(data, "out"));
                    show(o, &serde_json::Value::Object(shown), rc.unwrap_or(0));
                }
                let rc = rc.unwrap_or(0);
                retcode = retcode.max(rc);
                if cli.failhard && rc > 0 {
                    eprintln!(
                        "[ERROR   ] Minion {id} returned with non-zero exit code. \
                         Batch run stopped due to failhard"
                    );
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            }
            BatchEvent::NoReturn { id, .. } => {
                if quiet {
                    collected.insert(id.clone(), serde_json::json!({}));
                } else {
                    show(
                        out.unwrap_or(Outputter::Nested),
                        &serde_json::json!({ id: {} }),
                        0,
                    );
                }
                ControlFlow::Continue(())
            }
        })
        .await
        .map_err(brine_cli::local::request_error)?;
    // Salt's client says so when the ping matched no minion, even in a quiet run.
    let no_match = used.is_empty() && down.is_none();
    if quiet {
        if no_match {
            println!("{NO_MINIONS_MATCHED}");
        }
        let empty = collected.is_empty();
        show(
            out.unwrap_or(Outputter::Nested),
            &serde_json::Value::Object(collected),
            0,
        );
        if empty {
            eprintln!("ERROR: No return received");
            return Ok(2);
        }
        return Ok(0);
    }
    if used.is_empty() {
        if no_match {
            println!("{NO_MINIONS_MATCHED}");
            println!("No minions matched the target.");
        }
        eprintln!("ERROR: No return received");
        return Ok(2);
    }
    Ok(i32::try_from(retcode).unwrap_or(i32::MAX))
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
