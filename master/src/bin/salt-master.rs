//! salt-master -c CONFIG_DIR [-l LEVEL]

use clap::Parser;

#[derive(Parser)]
#[command(name = "salt-master", version, about = "Brine salt-master")]
struct Cli {
    /// Directory holding the `master` config file and `master.d/`.
    #[arg(short = 'c', long = "config-dir", default_value = "/etc/salt")]
    config_dir: std::path::PathBuf,
    /// Console log level (Salt's names: quiet, critical, error, warning, info, debug, trace).
    #[arg(short = 'l', long = "log-level")]
    log_level: Option<String>,
    /// Accepted for compatibility with Salt's service files; Brine stays in the foreground.
    #[arg(short = 'd', long = "daemon")]
    daemon: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(brine_master::daemon::PUBLISHER_FLAG) {
        std::process::exit(brine_master::daemon::publisher_main(&args[2..]));
    }
    let cli = Cli::parse();
    if cli.daemon {
        eprintln!("salt-master: running in the foreground (-d is not supported by Brine)");
    }
    if let Some(l) = &cli.log_level {
        if brine_transport::logging::level(l).is_none() {
            eprintln!("salt-master: unknown log level {l:?}");
            std::process::exit(2);
        }
    }
    if let Err(e) = brine_master::daemon::main_with(&cli.config_dir, cli.log_level.as_deref()) {
        eprintln!("salt-master: {e}");
        std::process::exit(1);
    }
}
