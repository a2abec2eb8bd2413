//! Brine's salt-api: the REST gateway, compatible with Salt's rest_cherrypy, with SSE,
//! WebSocket and hooks, in front of a Salt-compatible master on the same host.

pub mod auth;
pub use brine_api_input::body;
pub mod clients;
pub mod config;
pub mod daemon;
pub mod error;
pub mod extract;
pub mod limits;
pub mod link;
pub mod memory;
pub mod metrics;
pub mod middleware;
pub mod negotiate;
pub mod routes;
pub mod server;
pub mod state;
pub mod stream;
