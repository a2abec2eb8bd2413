//! salt-api -c CONFIG_DIR [-l LEVEL]

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "salt-api",
    version,
    about = "Brine salt-api (rest_cherrypy compatible)"
)]
struct Cli {
    /// Directory holding the `master` config file (with its rest_cherrypy block).
    #[arg(short = 'c', long = "config-dir", default_value = "/etc/salt")]
    config_dir: std::path::PathBuf,
    /// Console log level (Salt's names).
    #[arg(short = 'l', long = "log-level")]
    log_level: Option<String>,
    /// Accepted for compatibility with Salt's service files; Brine stays in the foreground.
    #[arg(short = 'd', long = "daemon")]
    daemon: bool,
}

fn main() {
    let cli = Cli::parse();
    if let Some(l) = &cli.log_level {
        if brine_transport::logging::level(l).is_none() {
            eprintln!("salt-api: unknown log level {l:?}");
            std::process::exit(2);
        }
    }
    if cli.daemon {
        eprintln!("salt-api: running in the foreground (-d is not supported by Brine)");
    }
    if let Err(e) = brine_api::daemon::main_with(&cli.config_dir, cli.log_level.as_deref()) {
        eprintln!("salt-api: {e}");
        std::process::exit(1);
    }
}
