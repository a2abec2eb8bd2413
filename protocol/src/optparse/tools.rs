//! The options of Salt 3007's tools (`salt.utils.parsers`), in Salt's order, with Salt's
//! destinations: a command line that real Salt accepts parses to the same destinations and
//! arguments here. What each tool does with an option is up to the tool.

use super::{Action, Opt, Parser, Type};

/// The console and log-file levels Salt accepts, in the order its error message lists them.
pub const LOG_LEVELS: &[&str] = &[
    "all", "debug", "error", "critical", "garbage", "info", "profile", "quiet", "trace", "warning",
];
const LOGFILE_LEVELS: &[&str] = &[
    "all", "garbage", "trace", "debug", "profile", "info", "warning", "error", "critical", "quiet",
];

fn head() -> Vec<Opt> {
    vec![
        Opt::flag(
            &["--version"],
            "version",
            "show program's version number and exit",
        )
        .action(Action::Version),
        Opt::flag(
            &["-V", "--versions-report"],
            "versions_report",
            "Show program's dependencies version number and exit.",
        ),
        Opt::flag(&["-h", "--help"], "help", "show this help message and exit")
            .action(Action::Help),
    ]
}

const SALTFILE: Opt = Opt::store(&["--saltfile"], "saltfile", "Path to a Saltfile.");
const CONFIG_DIR: Opt = Opt::store(
    &["-c", "--config-dir"],
    "config_dir",
    "Pass in an alternative configuration directory. Default: '/etc/salt'.",
);
const HARD_CRASH: Opt = Opt::flag(
    &["--hard-crash"],
    "hard_crash",
    "Raise any original exception rather than exiting gracefully.",
);
const ARGS_STDIN: Opt = Opt::flag(
    &["--args-stdin"],
    "args_stdin",
    "Read additional options and/or arguments from stdin.",
);
const NO_PARSE: Opt = Opt::store(
    &["--no-parse"],
    "no_parse",
    "Comma-separated list of named CLI arguments not to parse.",
)
.metavar("argname1,argname2,...");
const EXECUTORS: [Opt; 2] = [
    Opt::store(
        &["--module-executors"],
        "module_executors",
        "Executors to run the function with.",
    )
    .metavar("EXECUTOR_LIST"),
    Opt::store(
        &["--executor-opts"],
        "executor_opts",
        "Options for the executors.",
    )
    .metavar("EXECUTOR_OPTS"),
];
const DOC: Opt = Opt::flag(
    &["-d", "--doc", "--documentation"],
    "doc",
    "Return the documentation for the specified function(s).",
);
const ASYNC: Opt = Opt::flag(
    &["--async"],
    "async",
    "Run the job asynchronously: print the job id and exit.",
);

fn eauth(short_a: bool) -> Vec<Opt> {
    let names: &'static [&'static str] = if short_a {
        &["-a", "--auth", "--eauth", "--external-auth"]
    } else {
        &["--auth", "--eauth", "--external-auth"]
    };
    vec![
        Opt::store(names, "eauth", "External authentication system to use."),
        Opt::flag(
            &["-T", "--make-token"],
            "mktoken",
            "Generate and save an authentication token for re-use.",
        ),
        Opt::store(
            &["--username"],
            "username",
            "Username for external authentication.",
        ),
        Opt::store(
            &["--password"],
            "password",
            "Password for external authentication.",
        ),
    ]
}

fn output() -> Vec<Opt> {
    vec![
        Opt::store(
            &["--out", "--output"],
            "output",
            "Print the output using the named outputter.",
        ),
        Opt::store(
            &["--out-indent", "--output-indent"],
            "output_indent",
            "Indentation of the outputters that indent; negative disables it.",
        )
        .ty(Type::Int),
        Opt::store(
            &["--out-file", "--output-file"],
            "output_file",
            "Write the output to the given file.",
        ),
        Opt::flag(
            &["--out-file-append", "--output-file-append"],
            "output_file_append",
            "Append the output to the output file.",
        ),
        Opt::flag(
            &["--no-color", "--no-colour"],
            "no_color",
            "Disable all colored output.",
        ),
        Opt::flag(
            &["--force-color", "--force-colour"],
            "force_color",
            "Force colored output.",
        ),
        Opt::store(
            &["--state-output", "--state_output"],
            "state_output",
            "Output mode of the highstate outputter.",
        ),
        Opt::store(
            &["--state-verbose", "--state_verbose"],
            "state_verbose",
            "Whether the highstate outputter shows successful states.",
        ),
    ]
}

fn logging(short_l: bool, logfile_dest: &'static str) -> Vec<Opt> {
    let names: &'static [&'static str] = if short_l {
        &["-l", "--log-level"]
    } else {
        &["--log-level"]
    };
    vec![
        Opt::store(names, "log_level", "Console logging log level.").ty(Type::Choice(LOG_LEVELS)),
        Opt::store(&["--log-file"], logfile_dest, "Log file path.")
            .action(Action::LogFile)
            .metavar("LOG_FILE"),
        Opt::store(
            &["--log-file-level"],
            "log_level_logfile",
            "Logfile logging log level.",
        )
        .ty(Type::Choice(LOGFILE_LEVELS))
        .metavar("LOG_LEVEL_LOGFILE"),
    ]
}

fn daemon(user: bool, pidfile: &'static str) -> Vec<Opt> {
    let mut v = Vec::new();
    if user {
        v.push(Opt::store(
            &["-u", "--user"],
            "user",
            "Specify user to run as.",
        ));
    }
    v.push(Opt::flag(&["-d", "--daemon"], "daemon", "Run as a daemon."));
    v.push(Opt::store(&["--pid-file"], "pidfile", pidfile));
    v.push(Opt::flag(
        &["--disable-keepalive"],
        "disable_keepalive",
        "Disable the automatic restart mechanism.",
    ));
    v
}

/// `salt`: `SaltCMDOptionParser`.
pub fn salt() -> Parser {
    let mut o = head();
    o.push(SALTFILE);
    o.push(CONFIG_DIR);
    o.extend(EXECUTORS);
    o.extend([
        Opt::store(
            &["-t", "--timeout"],
            "timeout",
            "Seconds to wait for the minions to return. Default: 5.",
        )
        .ty(Type::Int),
        ARGS_STDIN,
        HARD_CRASH,
        NO_PARSE,
        Opt::flag(
            &["-s", "--static"],
            "static",
            "Return the data from the minions as a group.",
        ),
        Opt::flag(
            &["-p", "--progress"],
            "progress",
            "Display a progress graph.",
        ),
        Opt::flag(
            &["--failhard"],
            "failhard",
            "Stop the batch at the first failure.",
        ),
        ASYNC,
        Opt::store(
            &["--subset"],
            "subset",
            "Run on a random subset of the targets.",
        )
        .ty(Type::Int),
        Opt::flag(
            &["-v", "--verbose"],
            "verbose",
            "Show the job id and what is going on.",
        ),
        Opt::flag(
            &["--hide-timeout"],
            "show_timeout",
            "Hide the minions that timed out.",
        )
        .action(Action::StoreFalse),
        Opt::flag(&["--show-jid"], "show_jid", "Display the job id."),
        Opt::store(
            &["-b", "--batch", "--batch-size"],
            "batch",
            "Execute in batches of this many minions or this percentage.",
        ),
        Opt::store(
            &["--batch-wait"],
            "batch_wait",
            "Seconds to wait between batches.",
        )
        .ty(Type::Float),
        Opt::store(
            &["--batch-safe-limit"],
            "batch_safe_limit",
            "Use batch mode above this many targets.",
        )
        .ty(Type::Int),
        Opt::store(
            &["--batch-safe-size"],
            "batch_safe_size",
            "Batch size of the safe limit.",
        ),
        Opt::store(
            &["--return"],
            "return",
            "Returners the minions also send their returns to.",
        )
        .metavar("RETURNER"),
        Opt::store(
            &["--return_config"],
            "return_config",
            "Alternative returner configuration.",
        )
        .metavar("RETURNER_CONF"),
        Opt::store(
            &["--return_kwargs"],
            "return_kwargs",
            "Returner keyword arguments.",
        )
        .metavar("RETURNER_KWARGS"),
        DOC,
        Opt::store(
            &["--args-separator"],
            "args_separator",
            "Separator of the argument groups of a multi-function call. Default: ','.",
        ),
        Opt::flag(
            &["--summary"],
            "cli_summary",
            "Display a summary of the job.",
        ),
        Opt::store(&["--metadata"], "metadata", "Metadata for the job.").metavar("METADATA"),
        Opt::flag(
            &["--output-diff"],
            "state_output_diff",
            "Report only what changed.",
        ),
        Opt::flag(
            &["--config-dump"],
            "config_dump",
            "Dump the master configuration.",
        ),
        Opt::flag(
            &["--preview-target"],
            "preview_target",
            "Show the minions the target matches, without running anything.",
        ),
    ]);
    o.extend([
        Opt::flag(
            &["-H", "--hosts"],
            "list_hosts",
            "List the salt-ssh roster hosts.",
        ),
        Opt::flag(
            &["-E", "--pcre"],
            "pcre",
            "The target is a regular expression.",
        ),
        Opt::flag(
            &["-L", "--list"],
            "list",
            "The target is a comma-separated list of ids.",
        ),
        Opt::flag(
            &["-G", "--grain"],
            "grain",
            "The target is a grain, key:glob.",
        ),
        Opt::flag(
            &["-P", "--grain-pcre"],
            "grain_pcre",
            "The target is a grain, key:regex.",
        ),
        Opt::flag(
            &["-N", "--nodegroup"],
            "nodegroup",
            "The target is a nodegroup.",
        ),
        Opt::flag(
            &["-R", "--range"],
            "range",
            "The target is a range expression.",
        ),
        Opt::flag(
            &["-C", "--compound"],
            "compound",
            "The target is a compound expression.",
        ),
        Opt::flag(
            &["-I", "--pillar"],
            "pillar_target",
            "The target is a pillar, key:glob.",
        ),
        Opt::flag(
            &["-J", "--pillar-pcre"],
            "pillar_pcre",
            "The target is a pillar, key:regex.",
        ),
        Opt::flag(
            &["-S", "--ipcidr"],
            "ipcidr",
            "The target is an IP address or subnet.",
        ),
        Opt::store(
            &["--delimiter"],
            "delimiter",
            "Delimiter of nested grain and pillar keys. Default: ':'.",
        ),
    ]);
    o.extend(eauth(true));
    o.extend(output());
    o.extend(logging(true, "log_file"));
    Parser::new(
        "salt",
        "%prog [options] '<target>' <function> [arguments]",
        "Salt allows for commands to be executed across a swath of remote systems in \
         parallel, so they can be both controlled and queried with ease.",
        o,
    )
}

/// `salt-run`: `SaltRunOptionParser`.
pub fn salt_run() -> Parser {
    let mut o = head();
    o.push(SALTFILE);
    o.push(CONFIG_DIR);
    o.extend([
        Opt::store(
            &["-t", "--timeout"],
            "timeout",
            "Seconds to wait for the runner to return.",
        )
        .ty(Type::Int),
        ARGS_STDIN,
        Opt::store(&["--jid"], "jid", "Pass a job id to the runner."),
        HARD_CRASH,
        NO_PARSE,
        DOC,
        ASYNC,
        Opt::flag(
            &["--skip-grains"],
            "skip_grains",
            "Do not load the minions' grains.",
        ),
    ]);
    o.extend(eauth(true));
    o.extend(output());
    o.extend([
        Opt::store(
            &["--profiling-path"],
            "profiling_path",
            "Where profiling data is written.",
        ),
        Opt::flag(
            &["--enable-profiling"],
            "profiling_enabled",
            "Enable profiling.",
        ),
        Opt::flag(
            &["--quiet"],
            "quiet",
            "Do not display the runner's progress events.",
        ),
    ]);
    o.extend(logging(true, "log_file"));
    Parser::new(
        "salt-run",
        "%prog [options] <function> [arguments]",
        "salt-run is the frontend command for executing Salt Runners. Salt Runners are \
         modules used to execute convenience functions on the Salt Master.",
        o,
    )
}

/// `salt-key`: `SaltKeyOptionParser`.
pub fn salt_key() -> Parser {
    let mut o = head();
    o.push(SALTFILE);
    o.push(CONFIG_DIR);
    o.extend([
        Opt::store(
            &["-u", "--user"],
            "user",
            "Specify user to run salt-key as.",
        ),
        HARD_CRASH,
        Opt::flag(&["-q", "--quiet"], "quiet", "Suppress output."),
        Opt::flag(
            &["-y", "--yes"],
            "yes",
            "Answer 'Yes' to all questions presented.",
        ),
        Opt::store(
            &["--rotate-aes-key"],
            "rotate_aes_key",
            "Rotate the AES key when a key is deleted or rejected.",
        ),
        Opt::store(
            &["--preserve-minions"],
            "preserve_minions",
            "Keep the minions' cache when their keys are deleted.",
        ),
    ]);
    o.extend(eauth(false));
    o.extend(output());
    o.extend([
        Opt::store(
            &["-l", "--list"],
            "list",
            "List the keys in one state: pre, un, acc, rej, den or all.",
        )
        .metavar("ARG"),
        Opt::flag(&["-L", "--list-all"], "list_all", "List all public keys."),
        Opt::store(
            &["-a", "--accept"],
            "accept",
            "Accept the keys matching a glob.",
        ),
        Opt::flag(
            &["-A", "--accept-all"],
            "accept_all",
            "Accept all pending keys.",
        ),
        Opt::store(
            &["-r", "--reject"],
            "reject",
            "Reject the keys matching a glob.",
        ),
        Opt::flag(
            &["-R", "--reject-all"],
            "reject_all",
            "Reject all pending keys.",
        ),
        Opt::flag(
            &["--include-all"],
            "include_all",
            "Include keys in every state when accepting or rejecting.",
        ),
        Opt::flag(
            &["--include-accepted"],
            "include_accepted",
            "Include accepted keys when rejecting.",
        ),
        Opt::flag(
            &["--include-rejected"],
            "include_rejected",
            "Include rejected keys when accepting.",
        ),
        Opt::flag(
            &["--include-denied"],
            "include_denied",
            "Include denied keys when accepting or rejecting.",
        ),
        Opt::store(
            &["-p", "--print"],
            "print",
            "Print the keys matching a glob.",
        ),
        Opt::flag(
            &["-P", "--print-all"],
            "print_all",
            "Print all public keys.",
        ),
        Opt::store(
            &["-d", "--delete"],
            "delete",
            "Delete the keys matching a glob.",
        ),
        Opt::flag(&["-D", "--delete-all"], "delete_all", "Delete all keys."),
        Opt::store(
            &["-f", "--finger"],
            "finger",
            "Print the fingerprints of the keys matching a glob.",
        ),
        Opt::flag(
            &["-F", "--finger-all"],
            "finger_all",
            "Print all fingerprints.",
        ),
        Opt::store(
            &["--gen-keys"],
            "gen_keys",
            "Generate a key pair with this name.",
        ),
        Opt::store(
            &["--gen-keys-dir"],
            "gen_keys_dir",
            "Where --gen-keys writes.",
        ),
        Opt::store(
            &["--keysize"],
            "keysize",
            "Size of the generated key in bits.",
        )
        .ty(Type::Int),
        Opt::flag(
            &["--gen-signature"],
            "gen_signature",
            "Sign the master's public key.",
        ),
        Opt::store(&["--priv"], "priv", "The private key to sign with."),
        Opt::store(
            &["--signature-path"],
            "signature_path",
            "Where to write the signature.",
        ),
        Opt::store(&["--pub"], "pub", "The public key to sign."),
        Opt::flag(
            &["--auto-create"],
            "auto_create",
            "Create the signing key pair if it does not exist.",
        ),
    ]);
    o.extend(logging(false, "key_logfile"));
    Parser::new(
        "salt-key",
        "%prog [options]",
        "salt-key is used to manage Salt authentication keys",
        o,
    )
}

/// `salt-call`: `SaltCallOptionParser`.
pub fn salt_call() -> Parser {
    let mut o = head();
    o.push(SALTFILE);
    o.push(CONFIG_DIR);
    o.push(Opt::store(
        &["--proxyid"],
        "proxyid",
        "Id of the proxy minion.",
    ));
    o.extend(EXECUTORS);
    o.extend([
        Opt::store(&["--cachedir"], "cachedir", "Cache directory."),
        ARGS_STDIN,
        HARD_CRASH,
        NO_PARSE,
        Opt::flag(
            &["-g", "--grains"],
            "grains_run",
            "Return the grains of this host.",
        ),
        Opt::store(
            &["-m", "--module-dirs"],
            "module_dirs",
            "Additional module directories; may be given more than once.",
        )
        .action(Action::Append),
        DOC,
        Opt::store(&["--master"], "master", "The master to connect to."),
        Opt::store(&["--return"], "return", "Returners to send the return to.").metavar("RETURNER"),
        Opt::flag(&["--local"], "local", "Run without contacting a master."),
        Opt::store(
            &["--file-root"],
            "file_root",
            "The file_roots directory with --local.",
        ),
        Opt::store(
            &["--pillar-root"],
            "pillar_root",
            "The pillar_roots directory with --local.",
        ),
        Opt::store(
            &["--states-dir"],
            "states_dir",
            "Additional state module directory.",
        ),
        Opt::flag(
            &["--retcode-passthrough"],
            "retcode_passthrough",
            "Exit with the function's own return code.",
        ),
        Opt::flag(
            &["--metadata"],
            "print_metadata",
            "Print the job's metadata too.",
        ),
        Opt::store(&["--set-metadata"], "metadata", "Metadata for the job.").metavar("METADATA"),
        Opt::store(&["--id"], "id", "The minion id to use."),
        Opt::flag(&["--skip-grains"], "skip_grains", "Do not load the grains."),
        Opt::flag(
            &["--refresh-grains-cache"],
            "refresh_grains_cache",
            "Refresh the grains cache first.",
        ),
        Opt::flag(
            &["--no-return-event"],
            "no_return_event",
            "Do not send a return event to the master.",
        ),
        Opt::store(
            &["-t", "--timeout"],
            "auth_timeout",
            "Seconds to wait for the master's authentication.",
        )
        .ty(Type::Int),
        Opt::flag(
            &["--output-diff"],
            "state_output_diff",
            "Report only what changed.",
        ),
        Opt::store(&["--priv"], "user", "The user to run as."),
    ]);
    o.extend(output());
    o.extend([
        Opt::store(
            &["--profiling-path"],
            "profiling_path",
            "Where profiling data is written.",
        ),
        Opt::flag(
            &["--enable-profiling"],
            "profiling_enabled",
            "Enable profiling.",
        ),
    ]);
    o.extend(logging(true, "log_file"));
    Parser::new(
        "salt-call",
        "%prog [options] <function> [arguments]",
        "salt-call runs an execution function on this host.",
        o,
    )
}

/// `salt-api`: `SaltAPIParser`.
pub fn salt_api() -> Parser {
    let mut o = head();
    o.push(CONFIG_DIR);
    o.extend(daemon(
        false,
        "Where to write the pid. Default: '/var/run/salt-api.pid'.",
    ));
    o.extend(logging(true, "api_logfile"));
    Parser::new(
        "salt-api",
        "%prog [options]",
        "The Salt API system manages network API connectors for the Salt Master",
        o,
    )
}

/// `salt-master`: `MasterOptionParser`.
pub fn salt_master() -> Parser {
    let mut o = head();
    o.push(SALTFILE);
    o.push(CONFIG_DIR);
    o.extend(daemon(
        true,
        "Where to write the pid. Default: '/var/run/salt-master.pid'.",
    ));
    o.extend(logging(true, "log_file"));
    Parser::new(
        "salt-master",
        "%prog [options]",
        "The Salt Master, used to control the Salt Minions",
        o,
    )
}

/// `salt-minion`: `MinionOptionParser`.
pub fn salt_minion() -> Parser {
    let mut o = head();
    o.push(SALTFILE);
    o.push(CONFIG_DIR);
    o.extend(daemon(
        true,
        "Where to write the pid. Default: '/var/run/salt-minion.pid'.",
    ));
    o.extend(logging(true, "log_file"));
    Parser::new(
        "salt-minion",
        "%prog [options]",
        "The Salt Minion, receives commands from a remote Salt Master",
        o,
    )
}

/// The parser of a tool by its name (`salt`, `salt-run`, …).
pub fn by_name(prog: &str) -> Option<Parser> {
    Some(match prog {
        "salt" => salt(),
        "salt-run" => salt_run(),
        "salt-key" => salt_key(),
        "salt-call" => salt_call(),
        "salt-api" => salt_api(),
        "salt-master" => salt_master(),
        "salt-minion" => salt_minion(),
        _ => return None,
    })
}
