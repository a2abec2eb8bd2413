//! What the master answers on the ret port, one file per concern. [`crate::master`] parses the
//! envelope and the command and calls these.

pub mod auth;
pub mod events;
pub mod file_recv;
pub mod files;
pub mod master_opts;
pub mod mine;
pub mod pillar;
pub mod publish;
pub mod returns;
