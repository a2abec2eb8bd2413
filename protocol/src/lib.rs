//! Salt's wire protocol, as spoken by Salt 3006/3007 over ZeroMQ.
//!
//! No sockets live here: only the codecs, the crypto, the identifiers and the
//! matching rules that the master, the minion and the tools share.

pub mod catalog;
pub mod config;
pub mod crypt;
pub mod dictupdate;
pub mod event;
pub mod jid;
pub mod loads;
pub mod nested;
pub mod optparse;
pub mod payload;
pub mod posixpath;
pub mod pprint;
pub mod pyeq;
pub mod pyjson;
pub mod pyrepr;
pub mod pystr;
pub mod target;
pub mod yaml;

/// The Salt release whose protocol and behaviour Brine reproduces; reported as the version of
/// Brine's master and minions (`test.version`, the `saltversion` grain, `manage.versions`).
pub const SALT_VERSION: &str = "3007.15";
