//! `event.*`: fire events on the master's bus from salt-run and orchestrations.

use brine_protocol::payload::{py_truthy, to_json, Value};

use super::{ready, Call, Runner};

pub const FUNCTIONS: &[Runner] = &[Runner {
    name: "event.send",
    args: &["tag", "data=None"],
    doc: "Send an event with the given tag and data (a map; none is {}) on the master's bus. Tags are not namespaced: a reactor sees exactly the tag given.\n\nCLI Example:\n\n    salt-run event.send my/custom/event '{\"foo\": \"bar\"}'\n",
    run: |c| ready(send(&c)),
}];

/// Salt's `event.send` runner: `data or {}`, which must then be a map.
fn send(c: &Call) -> Result<Value, String> {
    let tag = c
        .args
        .get_str(0, "tag")
        .ok_or("event.send needs a tag")?;
    let data = match c.args.get(1, "data") {
        Some(v) if py_truthy(v) => v.clone(),
        _ => Value::Map(Vec::new()),
    };
    if tag.is_empty() {
        return Err("ValueError: Empty tag.".into());
    }
    if !matches!(data, Value::Map(_)) {
        return Err(format!(
            "ValueError: Dict object expected, not '{}'.",
            brine_protocol::nested::python_str(&to_json(&data))
        ));
    }
    c.master.bus.fire(&tag, data);
    Ok(Value::Boolean(true))
}
