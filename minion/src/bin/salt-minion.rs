//! salt-minion -c CONFIG_DIR [-l LEVEL]

use clap::Parser;

#[derive(Parser)]
#[command(name = "salt-minion", version, about = "Brine salt-minion")]
struct Cli {
    /// Directory holding the `minion` config file and `minion.d/`.
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
    let cli = Cli::parse();
    if let Some(l) = &cli.log_level {
        if brine_transport::logging::level(l).is_none() {
            eprintln!("salt-minion: unknown log level {l:?}");
            std::process::exit(2);
        }
    }
    if cli.daemon {
        eprintln!("salt-minion: running in the foreground (-d is not supported by Brine)");
    }
    std::process::exit(brine_minion::daemon::main_with(
        &cli.config_dir,
        cli.log_level.as_deref(),
    ));
}
