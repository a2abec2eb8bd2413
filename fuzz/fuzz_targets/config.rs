//! Configuration files: any text as the master's and the minion's config file (YAML 1.1 as
//! Salt reads it, then every key typed and checked), and the effective options Brine shows
//! for what it accepts. Includes are not followed (they name files on this machine), and the
//! minion's id is given when the text has none (finding one asks DNS).
#![no_main]
use std::path::Path;

use brine_protocol::config::{parse_conf_text, MasterConfig, MinionConfig, RawConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/etc/salt/master");
    let Ok(mut values) = parse_conf_text(path, text) else {
        return;
    };
    values.remove("include");
    values.remove("default_include");
    // A minion without an id looks its host name up (DNS): give it one.
    if !values
        .get("id")
        .and_then(|v| v.as_str())
        .is_some_and(|id| !id.is_empty())
    {
        values.insert("id".into(), "fuzz".into());
    }
    let sources = values.keys().map(|k| (k.clone(), path.into())).collect();
    let raw = RawConfig {
        values,
        sources,
        ..RawConfig::default()
    };
    if let Ok(master) = MasterConfig::from_raw(raw.clone()) {
        let _ = master.effective_opts();
    }
    if let Ok(minion) = MinionConfig::from_raw(raw) {
        let _ = minion.effective_opts();
    }
});
