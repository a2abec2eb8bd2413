//! Salt's state compiler, shared by the master (orchestration) and the minion: SLS files
//! rendered into *high data* as Salt's `BaseHighState.render_highstate` does (includes,
//! relative and cross-saltenv; `extend` and `exclude` gathered; `state.fun` declarations
//! split; `__sls__`/`__env__`; Salt's automatic `order`), and checked as `State.verify_high`
//! checks it.
//!
//! - [`high`]: rendering and merging.
//! - [`verify`]: the checks and their error texts.
//! - [`low`]: high data prepared and compiled into ordered low chunks.
//! - [`engine`]: the chunks run with their requisites, as Salt's `State.call_high` runs them.
//! - [`states`]: the state modules, one file each.
//! - [`top`]: top files merged and matched against a minion (the state top and the pillar top).
//! - [`url`]: http:// and https:// sources fetched into the minion's cache.

pub mod apt_sources;
pub mod diff;
pub mod engine;
pub mod high;
pub mod low;
pub mod pkgver;
pub mod states;
pub mod top;
pub mod url;
pub mod verify;

pub use engine::{call_high, call_id, check_result, Job, Options, RunError};
pub use high::{Compiler, Tree};
pub use states::Host;
pub use verify::verify_high;

/// High data: state IDs (and `__extend__`/`__exclude__`) in order.
pub type High = serde_json::Map<String, serde_json::Value>;
