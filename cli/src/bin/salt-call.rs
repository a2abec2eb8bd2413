//! salt-call [--local] <function> [arguments]: run an execution function on this host, with
//! the master's file server and pillar behind it (or, with `--local`, without a master).

use std::path::PathBuf;
use std::sync::Arc;

use brine_cli::local::parse_args;
use brine_cli::output::{
    choose_outputter, outputter_named, render_with_retcode, OutputOptions, Outputter, NO_INDENT,
};
use brine_minion::caller;
use brine_minion::daemon::Minion;
use brine_minion::functions::{self, Context, Failure, RunningJobs};
use brine_protocol::config::MinionConfig;
use brine_protocol::optparse::tools;
use brine_protocol::payload::{map, to_json, Value};

/// Options of Salt's `salt-call` that Brine does not implement: refused rather than ignored.
const UNSUPPORTED: &[&str] = &[
    "saltfile",
    "proxyid",
    "module_executors",
    "executor_opts",
    "cachedir",
    "args_stdin",
    "no_parse",
    "module_dirs",
    "doc",
    "master",
    "return",
    "file_root",
    "pillar_root",
    "states_dir",
    "print_metadata",
    "metadata",
    "state_output_diff",
    "user",
    "output_file",
    "output_file_append",
    "state_output",
    "state_verbose",
    "profiling_path",
    "profiling_enabled",
    "log_file",
    "log_level_logfile",
];

/// What `salt-call` uses of its command line.
struct Cli {
    config_dir: PathBuf,
    local: bool,
    no_return_event: bool,
    id: Option<String>,
    out: Option<String>,
    out_indent: Option<i64>,
    no_color: bool,
    force_color: bool,
    retcode_passthrough: bool,
    /// `-l`; the configuration's `log_level` otherwise.
    log_level: Option<String>,
    function: String,
    args: Vec<String>,
}

fn cli() -> Cli {
    let parser = tools::salt_call();
    let p = parser.parse_or_exit();
    parser.refuse_unsupported(&p, UNSUPPORTED);
    let mut args = p.args.clone().into_iter();
    // `-g` is Salt's shorthand for the grains of this host.
    let function = if p.flag("grains_run") {
        Some("grains.items".to_string())
    } else {
        args.next()
    };
    let Some(function) = function else {
        eprint!(
            "{}",
            parser.error_text("Requires function, --grains or --doc")
        );
        std::process::exit(brine_protocol::optparse::EX_USAGE);
    };
    Cli {
        config_dir: PathBuf::from(p.str("config_dir").unwrap_or("/etc/salt")),
        local: p.flag("local"),
        no_return_event: p.flag("no_return_event"),
        id: p.str("id").filter(|s| !s.is_empty()).map(str::to_string),
        out: p.str("output").map(str::to_string),
        out_indent: p.int("output_indent"),
        no_color: p.flag("no_color"),
        force_color: p.flag("force_color"),
        retcode_passthrough: p.flag("retcode_passthrough"),
        log_level: p.str("log_level").map(str::to_string),
        function,
        args: args.collect(),
    }
}

fn main() {
    brine_cli::quiet_on_closed_pipe();
    let cli = cli();
    let mut cfg = match MinionConfig::load(&cli.config_dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("salt-call: {e}");
            std::process::exit(1);
        }
    };
    let log_level = cli.log_level.clone().unwrap_or(cfg.log_level.clone());
    if let Some(l) = brine_transport::logging::level(&log_level) {
        brine_transport::logging::init(l, None);
    }
    let out: Option<Outputter> = cli.out.as_ref().map(|o| outputter_named(o, &log_level));
    if let Some(id) = &cli.id {
        cfg.id = id.clone();
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("salt-call: {e}");
            std::process::exit(1);
        }
    };
    let args = parse_args(&cli.args);
    // Salt runs without a master with --local or `file_client: local`.
    let local = cli.local || cfg.file_client == "local";
    if local {
        // As Salt's salt-call does, which `config.get file_client` shows.
        cfg.file_client = "local".into();
    }
    let r = if local {
        // The grains: this host's, the config directory's grains file, the config's `grains`.
        // No master: the minion's own file_roots are its file server, as with Salt.
        let opts = cfg.effective_opts();
        let files = match brine_master::handlers::files::LocalFiles::new(&opts) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("salt-call: {e}");
                std::process::exit(1);
            }
        };
        let services = Arc::new(
            functions::Services::from_config(&cfg, Some(&cli.config_dir), None)
                .with_local_files(Arc::new(files)),
        );
        let jid = brine_protocol::jid::gen_jid();
        let grains = services.grains();
        // No master: the pillar is compiled here from the minion's own pillar_roots.
        let pillar = match brine_master::pillar::Pillars::masterless(&opts) {
            Ok(p) => p.compile(&brine_master::pillar::PillarRequest::new(
                &cfg.id,
                grains.as_ref().clone(),
            )),
            Err(e) => {
                eprintln!("salt-call: {e}");
                std::process::exit(1);
            }
        };
        let pillar = services.set_pillar(pillar);
        let ctx = Context {
            id: cfg.id.clone(),
            grains,
            running: Arc::new(RunningJobs::default()),
            pillar,
            pub_load: map(vec![
                ("fun", Value::from(cli.function.clone())),
                ("pid", Value::from(std::process::id())),
                ("jid", Value::from(jid)),
                ("tgt", Value::from("salt-call")),
            ]),
            services,
        };
        rt.block_on(functions::call(&ctx, &cli.function, &args))
    } else {
        let zmq = zmq::Context::new();
        let minion = match rt.block_on(Minion::of_first_master(cfg, &zmq, &cli.config_dir)) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("salt-call: {e}");
                std::process::exit(e.code());
            }
        };
        let called = rt.block_on(caller::call(
            &minion,
            &cli.function,
            &args,
            &cli.args,
            !cli.no_return_event,
        ));
        match called {
            Ok(r) => r,
            Err(refused) => {
                // Salt prints this on stdout.
                println!("{}", refused.message);
                std::process::exit(refused.code);
            }
        }
    };
    // As Salt's salt-call shows a function that did not return: no return printed.
    match &r.failure {
        Some(Failure::InvalidArguments { message, doc }) => {
            eprint!("\nPassed invalid arguments: {message}.\n\nUsage:\n");
            println!("{doc}");
            std::process::exit(1);
        }
        Some(Failure::Execution(message)) => {
            eprintln!("Error running '{}': {message}", cli.function);
            std::process::exit(1);
        }
        None => {}
    }
    let opts = OutputOptions {
        color: !cli.no_color
            && (cli.force_color || std::io::IsTerminal::is_terminal(&std::io::stdout())),
        indent: cli
            .out_indent
            .map(|i| if i < 0 { NO_INDENT } else { i as usize }),
        static_: false,
        state: Default::default(),
    };
    let o = choose_outputter(out, r.out.as_deref());
    let text = render_with_retcode(
        o,
        &serde_json::json!({ "local": to_json(&r.ret) }),
        &opts,
        i64::from(r.retcode),
    );
    if !text.is_empty() {
        println!("{text}");
    }
    let code = if cli.retcode_passthrough {
        r.retcode
    } else if r.retcode != 0 {
        1
    } else {
        0
    };
    std::process::exit(code);
}
