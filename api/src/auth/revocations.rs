//! Token revocations in the PostgreSQL job store (`master_job_cache: pgjsonb`), where every
//! salt-api on that database reads them.

use std::io;

use brine_api_input::tokens::SharedRevocations;
use brine_master::jobstore::pgjsonb::PgStore;

pub struct PgRevocations(pub PgStore);

fn io_error(e: brine_master::jobstore::StoreError) -> io::Error {
    io::Error::other(e.to_string())
}

impl SharedRevocations for PgRevocations {
    fn revoke(&self, jti: &str, expire: u64) -> io::Result<()> {
        self.0.revoke_token(jti, expire).map_err(io_error)
    }

    fn all(&self) -> io::Result<Vec<(String, u64)>> {
        self.0.revoked_tokens().map_err(io_error)
    }

    fn prune(&self, now: u64) -> io::Result<usize> {
        self.0.prune_revoked_tokens(now).map_err(io_error)
    }
}
