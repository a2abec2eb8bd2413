//! Brine's salt-master: request server and workers, publisher, keys and sign-in, event bus,
//! job store, runners and wheel functions.

pub mod daemon;
pub mod datacache;
pub mod jobstore;
pub mod keys;
pub mod master;
pub mod mine;
pub mod presence;
pub mod privileges;
pub mod replay;
pub mod runners;
pub mod secrets;
pub mod wheel;
