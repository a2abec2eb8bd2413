//! Brine's salt-minion: sign-in, request channel, publish subscription, job execution and the
//! execution modules.

pub mod beacons;
pub mod caller;
pub mod channel;
pub mod daemon;
pub mod fileclient;
pub mod functions;
pub mod grains_core;
pub mod grains_host;
pub mod outbox;
pub mod proc_dir;
pub mod resolve;
pub mod schedule;
