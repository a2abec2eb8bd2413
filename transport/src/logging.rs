//! Logging set-up shared by the daemons and tools: a console at one level and, optionally, a
//! log file at another, with Salt's level names.

use std::path::Path;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt;
use tracing_subscriber::prelude::*;

/// Salt's level names mapped onto tracing's (`garbage`, `trace` → trace; `all` → trace;
/// `quiet` → off; `critical`/`error` → error; `warning` → warn; `profile`/`debug` → debug).
pub fn level(name: &str) -> Option<LevelFilter> {
    Some(match name.to_ascii_lowercase().as_str() {
        "all" | "garbage" | "trace" => LevelFilter::TRACE,
        "debug" | "profile" => LevelFilter::DEBUG,
        "info" => LevelFilter::INFO,
        "warning" | "warn" => LevelFilter::WARN,
        "error" | "critical" => LevelFilter::ERROR,
        "quiet" => LevelFilter::OFF,
        _ => return None,
    })
}

/// Install the global subscriber. A log file that cannot be opened is reported on the console
/// and otherwise ignored, as Salt does.
pub fn init(console: LevelFilter, file: Option<(&Path, LevelFilter)>) {
    let console_layer = fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_filter(console);
    let file_layer = file.and_then(|(path, lvl)| {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(f) => Some(
                fmt::layer()
                    .with_writer(std::sync::Mutex::new(f))
                    .with_ansi(false)
                    .with_target(false)
                    .with_filter(lvl),
            ),
            Err(e) => {
                eprintln!("cannot open log file {}: {e}", path.display());
                None
            }
        }
    });
    // The NATS client's own messages only at debug: Brine logs connections, disconnections
    // and failures itself, once each, in its words.
    let quiet_nats = tracing_subscriber::filter::filter_fn(|meta| {
        !(meta.target().starts_with("async_nats") && *meta.level() <= tracing::Level::INFO)
    });
    let _ = tracing_subscriber::registry()
        .with(quiet_nats)
        .with(console_layer)
        .with(file_layer)
        .try_init();
}
