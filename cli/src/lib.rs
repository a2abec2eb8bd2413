//! The master-side tools `salt`, `salt-key` and `salt-run`: what they share.

pub mod local;
pub mod output;
