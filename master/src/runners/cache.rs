//! `cache.grains` and `cache.pillar`: what the master's minion data cache holds for the
//! minions a target matches.

use brine_protocol::payload::Value;

use super::{ready, Call, Runner};

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "cache.grains",
        args: &["tgt", "tgt_type='glob'", "**kwargs"],
        doc: "Return the cached grains of the targeted minions ({} for a minion the cache has nothing of).\n\nCLI Example:\n\n    salt-run cache.grains '*'\n    salt-run cache.grains 'G@os:Debian' tgt_type=compound\n",
        run: |c| ready(cached(&c, |d| d.grains)),
    },
    Runner {
        name: "cache.pillar",
        args: &["tgt=None", "tgt_type='glob'", "**kwargs"],
        doc: "Return the cached pillar of the targeted minions: the pillar the master last compiled for each ({} for a minion the cache has nothing of).\n\nCLI Example:\n\n    salt-run cache.pillar '*'\n    salt-run cache.pillar web1,web2 tgt_type=list\n",
        run: |c| ready(cached(&c, |d| d.pillar)),
    },
];

fn cached(
    c: &Call,
    pick: fn(crate::datacache::MinionData) -> Option<Value>,
) -> Result<Value, String> {
    let tgt = match c.args.get(0, "tgt") {
        None | Some(Value::Nil) => Value::from("*"),
        Some(t) => t.clone(),
    };
    let tgt_type = c
        .args
        .get_str(1, "tgt_type")
        .unwrap_or_else(|| "glob".into());
    let expected = c
        .master
        .check_minions(&tgt, &tgt_type, ":")
        .map_err(|e| e.to_string())?;
    Ok(Value::Map(
        expected
            .minions
            .into_iter()
            .map(|id| {
                let data = c
                    .master
                    .cache
                    .get(&id)
                    .and_then(pick)
                    .unwrap_or_else(|| Value::Map(vec![]));
                (Value::from(id), data)
            })
            .collect(),
    ))
}
