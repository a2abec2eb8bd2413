//! salt-key: manage minion keys in the master's pki_dir, as Salt's does (directly on disk,
//! with `salt/key` events on the bus and the AES drop file for a running master).

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use brine_cli::output::{outputter_named, render, OutputOptions, Outputter, NO_INDENT};
use brine_master::keys::{KeyState, KeyStore};
use brine_protocol::config::MasterConfig;
use brine_protocol::crypt::{pem_finger, HashType};
use brine_protocol::optparse::tools;
use brine_protocol::payload::{map, Value};
use serde_json::json;

/// What `salt-key` uses of its command line.
struct Cli {
    config_dir: PathBuf,
    list: Option<String>,
    accept: Option<String>,
    accept_all: bool,
    reject: Option<String>,
    reject_all: bool,
    delete: Option<String>,
    delete_all: bool,
    finger: Option<String>,
    finger_all: bool,
    print: Option<String>,
    print_all: bool,
    yes: bool,
    include_rejected: bool,
    include_accepted: bool,
    include_denied: bool,
    include_all: bool,
    out: Option<String>,
    out_indent: Option<i64>,
    no_color: bool,
    force_color: bool,
    quiet: bool,
    log_level: String,
}

/// Options of Salt's `salt-key` that Brine does not implement: refused rather than ignored.
const UNSUPPORTED: &[&str] = &[
    "saltfile",
    "user",
    "rotate_aes_key",
    "preserve_minions",
    "eauth",
    "mktoken",
    "username",
    "password",
    "output_file",
    "output_file_append",
    "state_output",
    "state_verbose",
    "gen_keys",
    "gen_keys_dir",
    "keysize",
    "gen_signature",
    "priv",
    "signature_path",
    "pub",
    "auto_create",
    "key_logfile",
    "log_level_logfile",
];

fn cli() -> Cli {
    let parser = tools::salt_key();
    let p = parser.parse_or_exit();
    parser.refuse_unsupported(&p, UNSUPPORTED);
    let s = |dest: &str| p.str(dest).map(str::to_string);
    Cli {
        config_dir: PathBuf::from(p.str("config_dir").unwrap_or("/etc/salt")),
        list: s("list"),
        accept: s("accept"),
        accept_all: p.flag("accept_all"),
        reject: s("reject"),
        reject_all: p.flag("reject_all"),
        delete: s("delete"),
        delete_all: p.flag("delete_all"),
        finger: s("finger"),
        finger_all: p.flag("finger_all"),
        print: s("print"),
        print_all: p.flag("print_all"),
        yes: p.flag("yes"),
        include_rejected: p.flag("include_rejected"),
        include_accepted: p.flag("include_accepted"),
        include_denied: p.flag("include_denied"),
        include_all: p.flag("include_all"),
        out: s("output"),
        out_indent: p.int("output_indent"),
        no_color: p.flag("no_color"),
        force_color: p.flag("force_color"),
        quiet: p.flag("quiet"),
        log_level: s("log_level").unwrap_or_else(|| "warning".into()),
    }
}

struct Ctx {
    cfg: MasterConfig,
    keys: KeyStore,
    out: Outputter,
    opts: OutputOptions,
}

fn main() {
    brine_cli::quiet_on_closed_pipe();
    let cli = cli();
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(msg) => {
            eprintln!("salt-key: {msg}");
            std::process::exit(1);
        }
    }
}

impl Ctx {
    fn print(&self, data: serde_json::Value) {
        let text = render(self.out, &data, &self.opts);
        if !text.is_empty() {
            println!("{text}");
        }
    }

    /// Announce a key change on the master's bus; false if the bus is not reachable.
    fn event(&self, act: &str, id: &str) -> bool {
        brine_transport::eventbus::fire_event(
            &self.cfg.sock_dir,
            "salt/key",
            map(vec![
                ("result", Value::from(true)),
                ("act", Value::from(act)),
                ("id", Value::from(id)),
            ]),
        )
        .is_ok()
    }

    fn status_json(&self, groups: &[(KeyState, Vec<String>)]) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (s, ids) in groups {
            m.insert(s.dir().to_string(), json!(ids));
        }
        serde_json::Value::Object(m)
    }
}

fn run(cli: Cli) -> Result<i32, String> {
    if let Some(l) = brine_transport::logging::level(&cli.log_level) {
        brine_transport::logging::init(l, None);
    }
    let cfg = MasterConfig::load(&cli.config_dir).map_err(|e| e.to_string())?;
    let keys =
        KeyStore::open(&cfg.pki_dir).map_err(|e| format!("{}: {e}", cfg.pki_dir.display()))?;
    let out: Outputter = match &cli.out {
        Some(o) => outputter_named(o, &cli.log_level),
        None => Outputter::Key,
    };
    let opts = OutputOptions {
        color: !cli.no_color && (cli.force_color || std::io::stdout().is_terminal()),
        indent: cli
            .out_indent
            .map(|i| if i < 0 { NO_INDENT } else { i as usize }),
        static_: false,
        state: Default::default(),
    };
    let ctx = Ctx {
        cfg,
        keys,
        out,
        opts,
    };
    let include = |flag: bool| cli.include_all || flag;
    if let Some(m) = cli
        .accept
        .clone()
        .or(cli.accept_all.then(|| "*".to_string()))
    {
        let mut from = vec![KeyState::Pending];
        if include(cli.include_rejected) {
            from.push(KeyState::Rejected);
        }
        if include(cli.include_denied) {
            from.push(KeyState::Denied);
        }
        return change(&ctx, &cli, "accept", &m, &from);
    }
    if let Some(m) = cli
        .reject
        .clone()
        .or(cli.reject_all.then(|| "*".to_string()))
    {
        let mut from = vec![KeyState::Pending];
        if include(cli.include_accepted) {
            from.push(KeyState::Accepted);
        }
        if include(cli.include_denied) {
            from.push(KeyState::Denied);
        }
        return change(&ctx, &cli, "reject", &m, &from);
    }
    if let Some(m) = cli
        .delete
        .clone()
        .or(cli.delete_all.then(|| "*".to_string()))
    {
        return change(&ctx, &cli, "delete", &m, &KeyState::ALL);
    }
    if cli.finger.is_some() || cli.finger_all {
        let pattern = cli.finger.clone().unwrap_or_else(|| "*".into());
        let hash_name = &ctx.cfg.hash_type;
        let hash =
            HashType::parse(hash_name).ok_or_else(|| format!("unknown hash type {hash_name}"))?;
        let mut m = serde_json::Map::new();
        for (state, ids) in ctx.keys.name_match(&pattern) {
            let mut f = serde_json::Map::new();
            for id in ids {
                if let Some(text) = ctx.keys.read(state, &id) {
                    f.insert(id, json!(pem_finger(&text, hash)));
                }
            }
            m.insert(state.dir().into(), serde_json::Value::Object(f));
        }
        let pats: Vec<&str> = pattern.split(',').collect();
        let mut local = serde_json::Map::new();
        for f in ctx.keys.local_keys() {
            if pats.iter().any(|p| brine_protocol::target::fnmatch(p, &f)) {
                if let Ok(text) = std::fs::read_to_string(ctx.keys.pki_dir().join(&f)) {
                    local.insert(f, json!(pem_finger(&text, hash)));
                }
            }
        }
        if !local.is_empty() {
            m.insert("local".into(), serde_json::Value::Object(local));
        }
        ctx.print(serde_json::Value::Object(m));
        return Ok(0);
    }
    if cli.print.is_some() || cli.print_all {
        let pattern = cli.print.clone().unwrap_or_else(|| "*".into());
        let mut m = serde_json::Map::new();
        for (state, ids) in ctx.keys.name_match(&pattern) {
            let mut keys = serde_json::Map::new();
            for id in ids {
                if let Some(text) = ctx.keys.read(state, &id) {
                    keys.insert(id, json!(text));
                }
            }
            m.insert(state.dir().into(), serde_json::Value::Object(keys));
        }
        ctx.print(serde_json::Value::Object(m));
        return Ok(0);
    }
    if let Some(which) = &cli.list {
        let groups: Vec<(KeyState, Vec<String>)> = if which.starts_with("all") {
            KeyState::ALL
                .iter()
                .map(|s| (*s, ctx.keys.list(*s)))
                .collect()
        } else {
            let state = ["acc", "pre", "un", "rej", "den"]
                .iter()
                .find(|p| which.starts_with(*p))
                .and_then(|p| KeyState::parse(p))
                .ok_or_else(|| {
                    format!("unknown key state {which:?}: use acc, pre, un, rej, den or all")
                })?;
            vec![(state, ctx.keys.list(state))]
        };
        ctx.print(ctx.status_json(&groups));
        return Ok(0);
    }
    // Default, and -L.
    let groups: Vec<(KeyState, Vec<String>)> = KeyState::ALL
        .iter()
        .map(|s| (*s, ctx.keys.list(*s)))
        .collect();
    ctx.print(ctx.status_json(&groups));
    Ok(0)
}

/// accept / reject / delete, with Salt's confirmation dialogue.
fn change(
    ctx: &Ctx,
    cli: &Cli,
    cmd: &str,
    pattern: &str,
    from: &[KeyState],
) -> Result<i32, String> {
    let candidates: Vec<(KeyState, Vec<String>)> = ctx
        .keys
        .name_match(pattern)
        .into_iter()
        .filter(|(s, _)| cmd == "delete" || from.contains(s))
        .filter(|(s, _)| !(cmd == "accept" && *s == KeyState::Accepted))
        .filter(|(s, _)| !(cmd == "reject" && *s == KeyState::Rejected))
        .collect();
    if candidates.is_empty() {
        let mut statuses = vec!["unaccepted"];
        if cli.include_all || cli.include_accepted {
            statuses.push("accepted");
        }
        if cli.include_all || cli.include_rejected {
            statuses.push("rejected");
        }
        if cli.include_all || cli.include_denied {
            statuses.push("denied");
        }
        let stat = if statuses.len() == 1 {
            statuses[0].to_string()
        } else {
            format!(
                "{} or {}",
                statuses[..statuses.len() - 1].join(", "),
                statuses[statuses.len() - 1]
            )
        };
        println!("The key glob '{pattern}' does not match any {stat} keys.");
        return Ok(0);
    }
    println!(
        "The following keys are going to be {}ed:",
        cmd.trim_end_matches('e')
    );
    ctx.print(ctx.status_json(&candidates));
    if !cli.yes {
        let (prompt, default_yes) = if cmd == "delete" {
            ("Proceed? [N/y] ", false)
        } else {
            ("Proceed? [n/Y] ", true)
        };
        print!("{prompt}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        let answer = line.trim().to_lowercase();
        let yes = if answer.is_empty() {
            default_yes
        } else {
            answer.starts_with('y')
        };
        if !yes {
            return Ok(0);
        }
    }
    let mut done: Vec<String> = Vec::new();
    let mut rotate = false;
    let mut announced = true;
    for (state, ids) in &candidates {
        for id in ids {
            let ok = match cmd {
                "accept" => !ctx.keys.accept(id, &[*state]).is_empty(),
                "reject" => {
                    let (d, acc) = ctx.keys.reject(id, &[*state]);
                    rotate |= acc;
                    !d.is_empty()
                }
                _ => {
                    let ok = ctx.keys.remove(*state, id).unwrap_or(false);
                    rotate |= ok && *state == KeyState::Accepted;
                    ok
                }
            };
            if ok {
                if cmd != "accept" {
                    let _ = std::fs::remove_file(ctx.cfg.cachedir.join("sessions").join(id));
                    let _ = std::fs::remove_dir_all(ctx.cfg.cachedir.join("minions").join(id));
                }
                announced &= ctx.event(cmd, id);
                done.push(id.clone());
            }
        }
    }
    // A running master rotates its AES key when it sees the event; the drop file is for a
    // master that did not hear it.
    if rotate && ctx.cfg.rotate_aes_key && !announced {
        if let Err(e) = KeyStore::write_dropfile(&ctx.cfg.cachedir, &ctx.cfg.id) {
            eprintln!("salt-key: could not ask the master to rotate its AES key: {e}");
        }
    }
    if !cli.quiet {
        for id in done {
            println!("Key for minion {id} {}ed.", cmd.trim_end_matches('e'));
        }
    }
    Ok(0)
}
