//! Salt's renderer pipeline (Jinja with Salt's dialect, then YAML) on any text, as an SLS file,
//! a pillar file or a managed file's template: it fails or renders, within its fuel, and never
//! panics. Every file it imports or includes is the input itself, so import cycles are tried too.
#![no_main]
use std::sync::{Arc, OnceLock};

use brine_render::{render_sls, render_template, Context, Loader, NoFunctions};
use libfuzzer_sys::fuzz_target;

struct Same(String);

impl Loader for Same {
    fn load(&self, _saltenv: &str, _path: &str) -> Result<Option<String>, String> {
        Ok(Some(self.0.clone()))
    }
}

fn context() -> &'static Context {
    static C: OnceLock<Context> = OnceLock::new();
    C.get_or_init(|| Context {
        grains: serde_json::json!({"id": "web1", "os": "Debian", "ipv4": ["10.0.0.5"],
            "roles": ["web", "db"], "num_cpus": 2}),
        pillar: serde_json::json!({"role": "web", "users": {"alice": {"uid": 1001}},
            "list": [1, 2, 3]}),
        // A small budget: one input runs in milliseconds and makes at most ~64 MB of data.
        opts: serde_json::json!({"id": "web1", "brine_jinja_fuel": 200_000}),
        // No DNS lookups (`dns_check`) and no `gpg` processes from fuzzed input.
        offline: true,
        saltenv: "base".into(),
        sls: "fuzz.init".into(),
        ..Context::default()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let loader = Arc::new(Same(text.to_string()));
    let _ = render_sls(
        text,
        "fuzz/init.sls",
        context(),
        loader.clone(),
        Arc::new(NoFunctions),
    );
    let _ = render_template(
        text,
        "fuzz/file.j2",
        context(),
        loader,
        Arc::new(NoFunctions),
    );
});
