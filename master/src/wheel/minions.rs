//! `minions.*`: which minions are connected.

use brine_protocol::payload::{get, Value};

use super::{ids, Wheel};
use crate::master::Master;

pub const FUNCTIONS: &[Wheel] = &[Wheel {
    name: "minions.connected",
    args: &[],
    doc: "Return the minions connected to the master now.\n\nCLI Example:\n\n    wheel minions.connected\n",
    run: |m, _| Ok(ids(m.connected_ids())),
}];

impl Master {
    /// Minions with a live connection to the publish port: accepted minions whose cached
    /// IP grains include the address of an established peer (Salt's `connected_ids`).
    pub fn connected_ids(&self) -> Vec<String> {
        let peers = crate::presence::publish_peers(self.cfg.publish_port);
        if peers.is_empty() {
            return vec![];
        }
        let mut out = Vec::new();
        for id in self.keys.accepted() {
            let Some(grains) = self.cache.grains(&id) else {
                continue;
            };
            let mut ips: Vec<String> = Vec::new();
            for k in ["ipv4", "ipv6"] {
                if let Some(Value::Array(a)) = get(&grains, k) {
                    ips.extend(a.iter().filter_map(Value::as_str).map(str::to_string));
                }
            }
            let hit = peers.iter().any(|p| {
                ips.iter().any(|ip| ip == p)
                    || (crate::presence::is_loopback(p)
                        && ips.iter().any(|ip| crate::presence::is_loopback(ip)))
            });
            if hit {
                out.push(id);
            }
        }
        out
    }
}
