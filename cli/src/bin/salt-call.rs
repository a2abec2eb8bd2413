//! salt-call --local <function> [arguments]: run an execution function on this host.

use std::path::PathBuf;
use std::sync::Arc;

use brine_cli::local::parse_args;
use brine_cli::output::{
    choose_outputter, render_with_retcode, OutputOptions, Outputter, NO_INDENT,
};
use brine_minion::functions::{self, Context, RunningJobs};
use brine_protocol::config::MinionConfig;
use brine_protocol::payload::{from_json, map, to_json, Value};
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "salt-call",
    version,
    about = "Run an execution function on this host (Brine)",
    override_usage = "salt-call --local [options] <function> [arguments]"
)]
struct Cli {
    #[arg(short = 'c', long = "config-dir", default_value = "/etc/salt")]
    config_dir: PathBuf,
    /// Run without contacting a master (the only mode Brine's salt-call has).
    #[arg(long = "local")]
    local: bool,
    #[arg(long = "out", visible_alias = "output")]
    out: Option<String>,
    #[arg(
        long = "out-indent",
        visible_alias = "output-indent",
        allow_hyphen_values = true
    )]
    out_indent: Option<i64>,
    #[arg(long = "no-color", visible_alias = "no-colour")]
    no_color: bool,
    /// Exit with the function's own retcode.
    #[arg(long = "retcode-passthrough")]
    retcode_passthrough: bool,
    #[arg(short = 'l', long = "log-level", default_value = "warning")]
    log_level: String,
    function: String,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

fn main() {
    let cli = Cli::parse();
    if let Some(l) = brine_transport::logging::level(&cli.log_level) {
        brine_transport::logging::init(l, None);
    }
    if !cli.local {
        eprintln!(
            "salt-call: only --local is supported by Brine's salt-call (run the function through \
             the master with `salt <minion> {}` instead)",
            cli.function
        );
        std::process::exit(2);
    }
    let out: Option<Outputter> = match &cli.out {
        Some(o) => match o.parse() {
            Ok(o) => Some(o),
            Err(e) => {
                eprintln!("salt-call: {e}");
                std::process::exit(2);
            }
        },
        None => None,
    };
    let cfg = match MinionConfig::load(&cli.config_dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("salt-call: {e}");
            std::process::exit(1);
        }
    };
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
    let master = cfg.master.first().cloned().unwrap_or_default();
    let grains =
        brine_minion::grains_core::grains_collect(&cfg.id, &from_json(&cfg.grains), &master);
    let jid = brine_protocol::jid::gen_jid();
    let ctx = Context {
        id: cfg.id.clone(),
        grains: Arc::new(grains),
        running: Arc::new(RunningJobs::default()),
        // No master with --local, and Brine reads no local pillar_roots yet: an empty pillar.
        pillar: Arc::new(Value::Map(vec![])),
        pub_load: map(vec![
            ("fun", Value::from(cli.function.clone())),
            ("pid", Value::from(std::process::id())),
            ("jid", Value::from(jid)),
            ("tgt", Value::from("salt-call")),
        ]),
        services: Arc::new(functions::Services::from_config(
            &cfg,
            Some(&cli.config_dir),
            None,
        )),
    };
    let args = parse_args(&cli.args);
    let r = rt.block_on(functions::call(&ctx, &cli.function, &args));
    let opts = OutputOptions {
        color: !cli.no_color && std::io::IsTerminal::is_terminal(&std::io::stdout()),
        indent: cli
            .out_indent
            .map(|i| if i < 0 { NO_INDENT } else { i as usize }),
        static_: false,
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
