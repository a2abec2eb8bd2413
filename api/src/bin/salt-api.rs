//! salt-api [options]: Salt's command line (`-c CONFIG_DIR`, `-l LEVEL`, `-d`).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use brine_protocol::optparse::tools;

fn main() {
    let parser = tools::salt_api();
    let cli = parser.parse_or_exit();
    parser.refuse_unsupported(&cli, &["pidfile", "api_logfile", "log_level_logfile"]);
    if cli.flag("daemon") {
        eprintln!("salt-api: running in the foreground (-d is not supported by Brine)");
    }
    let config_dir = cli.str("config_dir").unwrap_or("/etc/salt");
    if let Err(e) = brine_api::daemon::main_with(config_dir.as_ref(), cli.str("log_level")) {
        eprintln!("salt-api: {e}");
        std::process::exit(1);
    }
}
