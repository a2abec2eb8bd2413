//! Authentication and authorisation: eauth backends, the ACL, tokens.

pub mod acl;
pub mod eauth;
mod file_backend;
mod pam;
mod pycompat;
pub mod revocations;
pub use brine_api_input::tokens;
