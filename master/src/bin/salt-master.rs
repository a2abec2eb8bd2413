//! salt-master [options]: Salt's command line (`-c CONFIG_DIR`, `-l LEVEL`, `-d`).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use brine_protocol::optparse::tools;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(brine_master::daemon::PUBLISHER_FLAG) {
        std::process::exit(brine_master::daemon::publisher_main(&args[2..]));
    }
    let parser = tools::salt_master();
    let cli = parser.parse_or_exit();
    parser.refuse_unsupported(
        &cli,
        &[
            "saltfile",
            "user",
            "pidfile",
            "log_file",
            "log_level_logfile",
        ],
    );
    if cli.flag("daemon") {
        eprintln!("salt-master: running in the foreground (-d is not supported by Brine)");
    }
    let config_dir = cli.str("config_dir").unwrap_or("/etc/salt");
    if let Err(e) = brine_master::daemon::main_with(config_dir.as_ref(), cli.str("log_level")) {
        eprintln!("salt-master: {e}");
        std::process::exit(1);
    }
}
