//! `key.*`: the minion keys (as salt-key manages them).

use brine_protocol::crypt::HashType;
use brine_protocol::payload::{map, Value};

use super::{Args, Wheel};
use crate::keys::KeyState;
use crate::master::Master;

pub const FUNCTIONS: &[Wheel] = &[
    Wheel {
        name: "key.accept",
        args: &["match", "include_rejected=False", "include_denied=False"],
        doc: "Accept the pending (or, with include_rejected/include_denied, rejected or denied) keys whose ids match a glob.\n\nCLI Example:\n\n    wheel key.accept match='minion1'\n",
        run: accept,
    },
    Wheel {
        name: "key.delete",
        args: &["match"],
        doc: "Delete the keys whose ids match a glob, in every state.\n\nCLI Example:\n\n    wheel key.delete match='minion1'\n",
        run: delete,
    },
    Wheel {
        name: "key.finger",
        args: &["match", "hash_type=None"],
        doc: "Return the fingerprints of the keys whose ids match a glob, by state.\n\nCLI Example:\n\n    wheel key.finger match='minion1'\n",
        run: finger,
    },
    Wheel {
        name: "key.gen_accept",
        args: &["id_", "keysize=2048", "force=False"],
        doc: "Make a key pair for an id, accept its public key and return both keys.\n\nCLI Example:\n\n    wheel key.gen_accept id_=minion1\n",
        run: gen_accept,
    },
    Wheel {
        name: "key.list",
        args: &["match"],
        doc: "Return the ids of the keys in one state (pre/unaccepted, acc/accepted, rej/rejected, den/denied, or all).\n\nCLI Example:\n\n    wheel key.list match='accepted'\n",
        run: list,
    },
    Wheel {
        name: "key.list_all",
        args: &[],
        doc: "Return the ids of every key, by state.\n\nCLI Example:\n\n    wheel key.list_all\n",
        run: list_all,
    },
    Wheel {
        name: "key.name_match",
        args: &["match"],
        doc: "Return the ids matching a glob, by key state.\n\nCLI Example:\n\n    wheel key.name_match 'minion*'\n",
        run: name_match,
    },
    Wheel {
        name: "key.reject",
        args: &["match", "include_accepted=False", "include_denied=False"],
        doc: "Reject the pending (or, with include_accepted/include_denied, accepted or denied) keys whose ids match a glob.\n\nCLI Example:\n\n    wheel key.reject match='minion1'\n",
        run: reject,
    },
];

/// The `match` argument those functions require.
fn need_match(a: &Args, fun: &str) -> Result<String, String> {
    a.get_str(0, "match")
        .ok_or_else(|| format!("{fun} requires a 'match' argument"))
}

fn accept(master: &Master, a: &Args) -> Result<Value, String> {
    let m = need_match(a, "key.accept")?;
    let mut from = vec![KeyState::Pending];
    if a.get_bool(1, "include_rejected") {
        from.push(KeyState::Rejected);
    }
    if a.get_bool(2, "include_denied") {
        from.push(KeyState::Denied);
    }
    for id in master.keys.accept(&m, &from) {
        master.key_event("accept", &id);
    }
    Ok(Master::status_map(master.name_match(&m, false)))
}

fn delete(master: &Master, a: &Args) -> Result<Value, String> {
    let m = need_match(a, "key.delete")?;
    let (done, was_accepted) = master.keys.delete(&m);
    master.forget_minions("delete", &done, was_accepted);
    Ok(Master::status_map(master.name_match(&m, false)))
}

fn finger(master: &Master, a: &Args) -> Result<Value, String> {
    let m = need_match(a, "key.finger")?;
    let hash = a
        .get_str(1, "hash_type")
        .unwrap_or_else(|| master.cfg.hash_type.clone());
    let hash = HashType::parse(&hash).ok_or_else(|| format!("unknown hash_type {hash}"))?;
    let mut out = Vec::new();
    for (dir, idl) in master.name_match(&m, true) {
        let mut fingers = Vec::new();
        for id in idl {
            let text = if dir == "local" {
                std::fs::read_to_string(master.keys.pki_dir().join(&id)).ok()
            } else {
                KeyState::parse(&dir).and_then(|s| master.keys.read(s, &id))
            };
            if let Some(t) = text {
                fingers.push((
                    Value::from(id),
                    Value::from(brine_protocol::crypt::pem_finger(&t, hash)),
                ));
            }
        }
        out.push((Value::from(dir), Value::Map(fingers)));
    }
    Ok(Value::Map(out))
}

fn gen_accept(master: &Master, a: &Args) -> Result<Value, String> {
    // A new key pair for a minion, accepted at once (the private half goes back to
    // the caller, e.g. salt-api's POST /keys tarball).
    let id = a
        .get_str(0, "id_")
        .or_else(|| a.get_str(0, "id"))
        .ok_or_else(|| "key.gen_accept requires an 'id_' argument".to_string())?;
    if let Some(why) = crate::keys::invalid_id_reason(&id) {
        return Err(format!("invalid minion id {id:?}: {why}"));
    }
    let bits = a
        .get(1, "keysize")
        .and_then(brine_protocol::loads::int)
        .unwrap_or(2048);
    if !(2048..=4096).contains(&bits) {
        return Err(format!("keysize {bits}: use 2048 to 4096 bits"));
    }
    let force = a.get_bool(2, "force");
    if !force && master.keys.state_of(&id).is_some() {
        return Err(format!(
            "a key for {id} already exists; pass force=True to replace it"
        ));
    }
    let key =
        brine_protocol::crypt::PrivateKey::generate(bits as usize).map_err(|e| e.to_string())?;
    let public = key.public().to_pem();
    for state in KeyState::ALL {
        let _ = master.keys.remove(state, &id);
    }
    master
        .keys
        .write(KeyState::Accepted, &id, &public)
        .map_err(|e| e.to_string())?;
    master.key_event("accept", &id);
    Ok(map(vec![
        ("priv", Value::from(key.to_pem())),
        ("pub", Value::from(public)),
    ]))
}

fn list(master: &Master, a: &Args) -> Result<Value, String> {
    let m = need_match(a, "key.list")?;
    if m.starts_with("all") {
        let mut all = master.list_keys();
        all.push(("local".into(), master.keys.local_keys()));
        return Ok(Master::status_map(all));
    }
    let state = ["acc", "pre", "un", "rej", "den"]
        .iter()
        .find(|p| m.starts_with(*p))
        .and_then(|p| KeyState::parse(p));
    Ok(match state {
        Some(s) => Master::status_map(vec![(s.dir().into(), master.keys.list(s))]),
        None => Value::Map(vec![]),
    })
}

fn list_all(master: &Master, _: &Args) -> Result<Value, String> {
    let mut all = master.list_keys();
    all.push(("local".into(), master.keys.local_keys()));
    Ok(Master::status_map(all))
}

fn name_match(master: &Master, a: &Args) -> Result<Value, String> {
    Ok(Master::status_map(
        master.name_match(&need_match(a, "key.name_match")?, false),
    ))
}

fn reject(master: &Master, a: &Args) -> Result<Value, String> {
    let m = need_match(a, "key.reject")?;
    let mut from = vec![KeyState::Pending];
    if a.get_bool(1, "include_accepted") {
        from.push(KeyState::Accepted);
    }
    if a.get_bool(2, "include_denied") {
        from.push(KeyState::Denied);
    }
    let (done, was_accepted) = master.keys.reject(&m, &from);
    master.forget_minions("reject", &done, was_accepted);
    Ok(Master::status_map(master.name_match(&m, false)))
}
