//! Brine's salt-master: request server and workers, publisher, keys and sign-in, event bus,
//! job store, runners and wheel functions.
//!
//! Layout: [`master`] holds the master's state ([`master::Master`], built by
//! [`master::Master::new`]) and parses every request once, then hands it to its handler in
//! [`handlers`] (one file per concern); [`runners`] and [`wheel`] are registries of functions,
//! one file per Salt module; [`reactor`] runs Salt's reactor on the event bus; [`daemon`] wires
//! the processes, sockets and timers together.
//!
//! # Lock policy
//!
//! Shared state is guarded by `std::sync` locks (`Mutex`, `RwLock`, `Condvar`), never by
//! async locks, and:
//!
//! - a guard is held only for the few in-memory operations it protects: never across an
//!   `.await`, and never around blocking I/O (files, sqlite, sockets, the publisher) or an
//!   RSA operation. Copy what is needed out of the guard, drop it, then do the slow work.
//!   The one wait under a lock is [`master::PublishOrder`]'s condvar, which waits for the
//!   publishes ahead in line and nothing else.
//! - a poisoned lock (a handler panicked while holding it; the request worker catches the
//!   panic and lives on) is taken over with `into_inner()`: every guarded structure stays
//!   consistent at each step, so its data is still good.
//! - locks nest in one place only: [`master::PublishOrder`] reads the AES key
//!   ([`secrets::Secrets::aes`]) while it hands out a ticket, so that serials, keys and
//!   tickets follow one order. Nothing takes them the other way round.

pub mod daemon;
pub mod datacache;
pub mod fileserver;
pub mod handlers;
pub mod jobstore;
pub mod keys;
pub mod late_publishes;
pub mod lost_jobs;
pub mod master;
pub mod orchestrate;
pub mod pillar;
pub mod presence;
pub mod privileges;
pub mod reactor;
pub mod replay;
pub mod runners;
pub mod secrets;
pub mod wheel;

#[cfg(test)]
mod tests;
