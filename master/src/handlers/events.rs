//! `_minion_event`: events a minion fires on the master's bus (one, or a batch from beacons).

use brine_protocol::loads::{MinionEventLoad, MinionEvents};
use brine_protocol::payload::Value;

use crate::master::Master;

/// Top-level `salt/<x>` tag families that only the master fires: sign-ins and keys, jobs
/// (but see [`minion_may_fire`]), runners, wheel calls, presence, cloud, cluster and stats.
const MASTER_TAGS: &[&str] = &[
    "auth", "key", "job", "run", "wheel", "presence", "cloud", "cluster", "stats",
];

/// May minion `id` fire `tag` on the master's bus through `_minion_event`? Not the master's own
/// families (a forged `salt/auth` could make a reactor accept a key; a forged
/// `salt/job/<jid>/ret/<id>` a return in another's name), not a bare jid, and events naming a
/// minion (`salt/minion/<id>/..`, `salt/beacon/<id>/..`, `minion/refresh/<id>`, a state run's
/// `salt/job/<jid>/prog/<id>/..`, a state's `salt/state_result/<jid>/<id>/..`) only in its own
/// name.
pub fn minion_may_fire(id: &str, tag: &str) -> bool {
    if brine_protocol::jid::is_jid(tag) {
        return false;
    }
    let parts: Vec<&str> = tag.split('/').collect();
    match parts.as_slice() {
        ["salt", "job", _jid, "prog", who, ..] | ["salt", "state_result", _jid, who, ..] => {
            *who == id
        }
        ["salt", "minion" | "beacon", who, ..] | ["minion", "refresh", who, ..] => *who == id,
        ["salt", family, ..] => !MASTER_TAGS.contains(family),
        _ => true,
    }
}

impl Master {
    /// Send a minion that has just started the jobs it missed while starting (see
    /// [`crate::late_publishes`]).
    fn send_missed(&self, id: &str) {
        for load in self.late.started(id) {
            tracing::info!(
                "job {} sent again to {id}, which started after it",
                load.jid
            );
            self.send_publish(load, &[id.to_string()]);
        }
    }

    /// Fire what the minion may fire; drop (and log) the rest. Salt answers nothing.
    pub(crate) fn on_minion_event(&self, load: MinionEventLoad) -> Value {
        let id = load.id.as_str();
        let allowed = |tag: &str| {
            let ok = minion_may_fire(id, tag);
            if !ok {
                tracing::warn!("minion {id} may not fire {tag:?}: event dropped");
            }
            ok
        };
        match load.events {
            MinionEvents::Single { tag, data } => {
                if allowed(&tag) {
                    let started = tag == format!("salt/minion/{id}/start");
                    self.bus.fire(&tag, data);
                    if started {
                        self.send_missed(id);
                    }
                }
            }
            MinionEvents::Batch { events, pretag } => {
                for (tag, data) in events {
                    let pretagged = pretag.as_ref().map(|p| format!("{p}/{tag}"));
                    if !allowed(&tag) || pretagged.as_deref().is_some_and(|t| !allowed(t)) {
                        continue;
                    }
                    self.bus.fire(&tag, data.clone());
                    if let Some(t) = &pretagged {
                        self.bus.fire(t, data);
                    }
                }
            }
        }
        Value::Nil
    }
}
