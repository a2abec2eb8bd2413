//! Salt's renderer pipeline for `.sls` files, pillar and templates: Jinja with Salt's dialect,
//! then YAML (Salt's loader: YAML 1.1 scalars, ordered mappings, duplicate keys refused) or JSON
//! or plain text, chosen by the file's `#!` line or the `renderer` option.
//!
//! # Layout
//! - [`render_sls`]: the pipeline, errors named as Salt names them.
//! - `jinja/`: the Jinja environment (filters, methods, the `salt` object, imports).
//! - `yaml.rs`: the YAML loader.

mod error;
mod gpg;
mod jinja;
pub mod oracle;
mod pipeline;
use brine_protocol::yaml::load as yaml;

use std::collections::BTreeMap;

pub use error::RenderError;
pub use jinja::{filter_by_json, human_to_bytes, str_center, which, wrap_text, DEFAULT_FUEL};
pub use pipeline::{render_sls, render_template};

/// The files templates import and include: paths are relative to the saltenv's root (the file
/// server implements it).
pub trait Loader: Send + Sync {
    /// The text of `path` in `saltenv`, `None` when there is no such file.
    fn load(&self, saltenv: &str, path: &str) -> Result<Option<String>, String>;
}

/// Execution functions templates call that the renderer does not answer itself.
pub trait Functions: Send + Sync {
    /// Call `name` (`module.function`); `None` when the function does not exist.
    fn call(
        &self,
        name: &str,
        args: &[serde_json::Value],
        kwargs: &BTreeMap<String, serde_json::Value>,
    ) -> Option<Result<serde_json::Value, String>>;
}

/// No execution functions: every `salt['module.function']` is unknown to the template.
pub struct NoFunctions;

impl Functions for NoFunctions {
    fn call(
        &self,
        _: &str,
        _: &[serde_json::Value],
        _: &BTreeMap<String, serde_json::Value>,
    ) -> Option<Result<serde_json::Value, String>> {
        None
    }
}

/// What one render sees.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The minion's grains.
    pub grains: serde_json::Value,
    /// The minion's pillar.
    pub pillar: serde_json::Value,
    /// The daemon's options (`opts`).
    pub opts: serde_json::Value,
    /// The file server environment (`saltenv`).
    pub saltenv: String,
    /// The SLS name (`a.b`), empty for a plain template.
    pub sls: String,
    /// The default pipeline when the file has no `#!` line (Salt's `renderer` option;
    /// `jinja|yaml` when empty).
    pub renderer: String,
    /// Salt's `allow_undefined`: undefined variables render empty instead of failing.
    pub allow_undefined: bool,
    /// More variables of the template (a state's `context`/`defaults`, a pillar include's
    /// `defaults`); they hide the globals of the same name.
    pub vars: serde_json::Map<String, serde_json::Value>,
    /// Renders that must not reach beyond the process (the fuzz targets): the `dns_check`
    /// filter and the `gpg` renderer fail instead of resolving names or starting `gpg`.
    pub offline: bool,
}
