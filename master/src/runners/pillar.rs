//! `pillar.*`: a minion's pillar and pillar top as the master compiles them now.

use brine_protocol::payload::Value;

use super::{ready, Call, Runner};
use crate::pillar::PillarRequest;

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "pillar.show_pillar",
        args: &["minion='*'", "**kwargs"],
        doc: "Compile the pillar of a minion now, with its cached grains (a minion the master has no grains of gets {'fqdn': minion}). Keyword arguments set grains; saltenv and pillarenv choose the environments.\n\nCLI Example:\n\n    salt-run pillar.show_pillar web1\n    salt-run pillar.show_pillar web1 pillarenv=dev\n    salt-run pillar.show_pillar new-minion os=Debian\n",
        run: |c| ready(Ok(show_pillar(&c))),
    },
    Runner {
        name: "pillar.show_top",
        args: &["minion=None", "saltenv=base"],
        doc: "Return the merged pillar top for a minion ({saltenv: {target: [match, sls...]}}), with its cached grains; render errors are printed as progress.\n\nCLI Example:\n\n    salt-run pillar.show_top web1\n",
        run: |c| ready(Ok(show_top(&c))),
    },
];

/// The cached grains of `id`, if the master has them.
fn cached_grains(c: &Call, id: &str) -> Option<Value> {
    c.master.cache.grains(id)
}

fn show_pillar(c: &Call) -> Value {
    let minion = c.args.get_str(0, "minion").unwrap_or_else(|| "*".into());
    let mut grains = cached_grains(c, &minion)
        .unwrap_or_else(|| Value::Map(vec![(Value::from("fqdn"), Value::from(minion.as_str()))]));
    let mut saltenv = Some("base".to_string());
    let mut pillarenv = None;
    for (k, v) in &c.args.kwargs {
        match k.as_str() {
            "minion" => {}
            "saltenv" => saltenv = v.as_str().map(str::to_string),
            "pillarenv" => pillarenv = v.as_str().map(str::to_string),
            other if !other.starts_with("__") => {
                brine_protocol::payload::set(&mut grains, other, v.clone())
            }
            _ => {}
        }
    }
    let mut req = PillarRequest::new(&minion, grains);
    req.saltenv = saltenv;
    req.pillarenv = pillarenv;
    c.master.pillars.compile(&req)
}

fn show_top(c: &Call) -> Value {
    let minion = c.args.get_str(0, "minion");
    let grains = match &minion {
        Some(id) => cached_grains(c, id),
        // Salt takes the grains of the last minion in its cache.
        None => {
            let mut ids = c.master.keys.accepted();
            ids.sort();
            ids.iter().rev().find_map(|id| cached_grains(c, id))
        }
    }
    .unwrap_or_else(|| Value::Map(vec![]));
    let id = minion.unwrap_or_default();
    let mut req = PillarRequest::new(&id, grains);
    req.saltenv = Some(c.args.get_str(1, "saltenv").unwrap_or_else(|| "base".into()));
    let (top, errors) = c.master.pillars.top(&req);
    for e in errors {
        tracing::warn!("pillar.show_top {id}: {e}");
    }
    top
}
