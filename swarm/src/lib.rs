//! `brine-swarm`: many simulated Salt minions in one process, for master benchmarks.
//!
//! # Layout
//! * [`zmtp`]: a minimal ZMTP 3.x client (REQ and SUB, NULL mechanism) over tokio streams;
//!   libzmq's one-poller design does not scale to 20,000 sockets in one process.
//! * [`keys`]: per-minion RSA key pairs, generated once in parallel and cached on disk.
//! * [`sim`]: one simulated minion (sign-in, requests, publishes, jobs, returns).
//! * [`functions`]: the execution functions it answers (`test.ping`, `test.echo`, ...).
//! * [`swarm`]: launching at a connect rate, progress, shutdown, summary.
//! * [`stats`], [`config`].

pub mod config;
pub mod functions;
pub mod keys;
pub mod sim;
pub mod stats;
pub mod swarm;
pub mod zmtp;
