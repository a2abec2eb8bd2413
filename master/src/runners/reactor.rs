//! `reactor.*`: look at and change the running reactor, with the answers Salt's reactor
//! gives. Salt's runners ask it with `salt/reactors/manage/<what>` events that carry the
//! master's root key on the event bus (where `salt-run` and any bus listener see it); these
//! ask it in-process, and the key stays in the master.

use brine_protocol::payload::from_json;
use serde_json::json;

use super::{ready, Call, Runner, RunnerFuture};

pub const FUNCTIONS: &[Runner] = &[
    Runner {
        name: "reactor.add",
        args: &["event", "reactors", "saltenv='base'", "test=None"],
        doc: "Add a reactor: the tag glob event runs the SLS files reactors (one path or a list) from now on, until the master restarts. Returns {status, comment}.\n\nCLI Example:\n\n    salt-run reactor.add 'salt/cloud/*/destroyed' reactors='/srv/reactor/destroy/*.sls'\n",
        run: add,
    },
    Runner {
        name: "reactor.delete",
        args: &["event", "saltenv='base'", "test=None"],
        doc: "Delete the reactor of the tag glob event, until the master restarts. Returns {status, comment}.\n\nCLI Example:\n\n    salt-run reactor.delete 'salt/cloud/*/destroyed'\n",
        run: delete,
    },
    Runner {
        name: "reactor.is_leader",
        args: &[],
        doc: "Return whether the reactor acts on events (True unless set_leader turned it off).\n\nCLI Example:\n\n    salt-run reactor.is_leader\n",
        run: is_leader,
    },
    Runner {
        name: "reactor.list",
        args: &["saltenv='base'", "test=None"],
        doc: "List the reactors: [{tag glob: [sls, ...]}, ...].\n\nCLI Example:\n\n    salt-run reactor.list\n",
        run: list,
    },
    Runner {
        name: "reactor.set_leader",
        args: &["value=True"],
        doc: "Make the reactor act on events (True) or not (False). Returns the new value.\n\nCLI Example:\n\n    salt-run reactor.set_leader False\n",
        run: set_leader,
    },
];

/// Ask the running reactor (Salt's `salt/reactors/manage/<what>` request, made
/// in-process): the `field` of its answer.
fn ask(c: Call, what: &'static str, data: serde_json::Value, field: &'static str) -> RunnerFuture {
    let answer = match c.master.reactor.get() {
        None => Err("Reactor system is not running.".to_string()),
        Some(reactor) => reactor
            .manage_call(what, &data)
            .map(|(_, answer)| from_json(&answer[field]))
            .ok_or_else(|| format!("the reactor does not know {what}")),
    };
    ready(answer)
}

fn list(c: Call) -> RunnerFuture {
    ask(c, "list", json!({}), "reactors")
}

fn add(c: Call) -> RunnerFuture {
    let event = c.args.get(0, "event").map(brine_protocol::payload::to_json);
    let reactors = match c.args.get(1, "reactors").map(brine_protocol::payload::to_json) {
        Some(serde_json::Value::String(one)) => json!([one]),
        Some(other) => other,
        None => serde_json::Value::Null,
    };
    ask(
        c,
        "add",
        json!({"event": event, "reactors": reactors}),
        "result",
    )
}

fn delete(c: Call) -> RunnerFuture {
    let event = c.args.get(0, "event").map(brine_protocol::payload::to_json);
    ask(c, "delete", json!({"event": event}), "result")
}

fn is_leader(c: Call) -> RunnerFuture {
    ask(c, "is_leader", json!({}), "result")
}

fn set_leader(c: Call) -> RunnerFuture {
    let value = c
        .args
        .get(0, "value")
        .map_or(json!(true), brine_protocol::payload::to_json);
    let id = c.master.cfg.id.clone();
    ask(
        c,
        "set_leader",
        json!({"id": id, "value": value}),
        "result",
    )
}
