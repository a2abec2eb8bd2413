//! salt-minion [options]: Salt's command line (`-c CONFIG_DIR`, `-l LEVEL`, `-d`).

use brine_protocol::optparse::tools;

fn main() {
    let parser = tools::salt_minion();
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
        eprintln!("salt-minion: running in the foreground (-d is not supported by Brine)");
    }
    let config_dir = cli.str("config_dir").unwrap_or("/etc/salt");
    std::process::exit(brine_minion::daemon::main_with(
        config_dir.as_ref(),
        cli.str("log_level"),
    ));
}
