//! The `defaults` execution module (Salt's `salt/modules/defaults.py`): a formula's
//! `defaults.yaml` or `defaults.json` read from the file server (`get`), and deep merges of
//! formula data (`merge`, `update`, `deepcopy`).

use rmpv::Value;

use super::args::{py_str, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use crate::fileclient::FileClient;
use super::slsutil::type_error;
use brine_protocol::payload::{from_json, py_truthy};

super::spec_table! {
    /// The functions of the `defaults` module.
    Get => ("defaults.get", "get", ["key", "default"], 1, false, false, r#"
    Read a value from a formula's defaults file, like ``pillar.get``.

    The first part of ``key`` (up to the first ``:``) names the formula: its
    ``salt://<formula>/defaults.yaml``, else ``defaults.json``, is loaded
    and the rest of ``key`` is looked up in it (``default`` when missing).

    CLI Example:

    .. code-block:: bash

        salt '*' defaults.get core:users:root
    "#),
    Merge => ("defaults.merge", "merge", ["dest", "src", "merge_lists", "in_place", "convert_none"], 2, false, false, r#"
    Merge the mapping ``src`` deeply into ``dest`` and return the result.

    merge_lists : False
        Join lists found under the same key instead of replacing them.

    in_place : True
        Merge into ``dest`` itself rather than into a copy of it.

    convert_none : True
        Take a ``None`` ``src`` (and ``dest``, when not in place) as an empty
        mapping.

    CLI Example:

    .. code-block:: bash

        salt '*' defaults.merge '{a: b}' '{d: e}'
    "#),
    Deepcopy => ("defaults.deepcopy", "deepcopy", ["source"], 1, false, false, r#"
    Return a deep copy of ``source``, so that a template can change it
    without changing the original.

    CLI Example:

    .. code-block:: bash

        salt '*' defaults.deepcopy '{a: [1]}'
    "#),
    Update => ("defaults.update", "update", ["dest", "defaults", "merge_lists", "in_place", "convert_none"], 2, false, false, r#"
    Give every node of the mapping ``dest`` the values of ``defaults`` it
    lacks: each node becomes ``defaults`` with the node merged into it.

    merge_lists : True
        Join lists found under the same key instead of replacing them.

    in_place : True
        Change ``dest`` itself rather than a copy of it.

    convert_none : True
        Take ``None`` for an empty mapping.

    .. code-block:: jinja

        {% do salt['defaults.update'](group.nodes, group.defaults) %}
    "#),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        let nil = Value::Nil;
        let arg = |name: &str| b.get(name).unwrap_or(&nil);
        let flag = |name: &str, default: bool| b.get(name).map_or(default, py_truthy);
        match self {
            Fun::Get => {
                let key = py_str(arg("key"));
                let default = b.get("default").cloned().unwrap_or_else(|| Value::from(""));
                let client = ctx
                    .services
                    .file_source()
                    .map(|source| FileClient::new(source, &ctx.services.cachedir));
                let (namespace, rest) = match key.split_once(':') {
                    Some((ns, rest)) => (ns.to_string(), Some(rest.to_string())),
                    None => (key.clone(), None),
                };
                let defaults =
                    tokio::task::spawn_blocking(move || load(client.as_ref(), &namespace))
                        .await
                        .map_err(|e| FnError::Exception(e.to_string()))??;
                Ok(match rest.filter(|r| !r.is_empty()) {
                    Some(rest) => {
                        super::grains::traverse(&defaults, &Value::from(rest), default, ":")
                    }
                    None => defaults,
                })
            }
            Fun::Merge => merge(
                arg("dest"),
                arg("src"),
                flag("merge_lists", false),
                flag("in_place", true),
                flag("convert_none", true),
            ),
            Fun::Deepcopy => Ok(arg("source").clone()),
            Fun::Update => update(
                arg("dest"),
                arg("defaults"),
                flag("merge_lists", true),
                flag("in_place", true),
                flag("convert_none", true),
            ),
        }
    }
}

/// Salt's `_load`: the first of `salt://<formula>/defaults.yaml` and `defaults.json` the file
/// server has, `{}` for an empty one, `None` when there is neither.
fn load(client: Option<&FileClient>, formula: &str) -> Result<Value, FnError> {
    let client = client.ok_or_else(|| {
        FnError::Execution(
            "defaults.get needs the master's file server (this minion has no master)".into(),
        )
    })?;
    for ext in ["yaml", "json"] {
        let url = format!("salt://{formula}/defaults.{ext}");
        let Some(text) = client.read_text(&url, "base").map_err(FnError::Execution)? else {
            continue;
        };
        let data = if ext == "yaml" {
            brine_protocol::yaml::load::load(&text).map(|v| from_json(&v))
        } else {
            brine_protocol::payload::from_json_text(&text).map_err(|e| e.to_string())
        }
        .map_err(|e| FnError::Exception(e.to_string()))?;
        return Ok(if py_truthy(&data) {
            data
        } else {
            Value::Map(vec![])
        });
    }
    Ok(Value::Nil)
}

/// Salt's `defaults.merge`.
fn merge(
    dest: &Value,
    src: &Value,
    merge_lists: bool,
    in_place: bool,
    convert_none: bool,
) -> Result<Value, FnError> {
    let empty = Value::Map(vec![]);
    let src = if src.is_nil() && convert_none {
        &empty
    } else {
        src
    };
    let dest = if dest.is_nil() && convert_none {
        if in_place {
            return Err(FnError::InvalidArgs(
                "Can't perform in-place merge into NoneType".into(),
            ));
        }
        &empty
    } else {
        dest
    };
    super::slsutil::update(dest, src, true, merge_lists).map_err(type_error)
}

/// Salt's `defaults.update`.
fn update(
    dest: &Value,
    defaults: &Value,
    merge_lists: bool,
    in_place: bool,
    convert_none: bool,
) -> Result<Value, FnError> {
    let empty = Value::Map(vec![]);
    let nodes = if in_place {
        if dest.is_nil() {
            return Err(FnError::InvalidArgs(
                "Can't perform in-place update into NoneType".into(),
            ));
        }
        dest
    } else if dest.is_nil() && convert_none {
        &empty
    } else {
        dest
    };
    let defaults = if defaults.is_nil() && convert_none {
        &empty
    } else {
        defaults
    };
    let Value::Map(nodes) = nodes else {
        return Err(FnError::Exception(format!(
            "AttributeError: '{}' object has no attribute 'items'",
            super::args::py_type_name(nodes)
        )));
    };
    let mut out = Vec::with_capacity(nodes.len());
    for (name, vars) in nodes {
        let merged = merge(defaults, vars, merge_lists, true, convert_none)?;
        out.push((name.clone(), merged));
    }
    Ok(Value::Map(out))
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use brine_protocol::payload::{from_json, to_json_text};
    use rmpv::Value;

    fn y(text: &str) -> Value {
        from_json(&brine_protocol::yaml::load::load(text).unwrap())
    }

    // Expected values are what Salt 3007's salt-call answered.
    #[tokio::test]
    async fn merges_and_updates_as_salt() {
        let r = call(&ctx(), "defaults.merge", &[y("{a: 1}"), Value::Nil]).await;
        assert_eq!(to_json_text(&r.ret), r#"{"a":1}"#);
        let r = call(
            &ctx(),
            "defaults.update",
            &[y("{n1: {a: 1}}"), y("{b: [1]}")],
        )
        .await;
        assert_eq!(to_json_text(&r.ret), r#"{"n1":{"b":[1],"a":1}}"#);
        let r = call(&ctx(), "defaults.merge", &[Value::Nil, y("{a: 1}")]).await;
        assert_eq!(r.retcode, 1);
        let r = call(&ctx(), "defaults.deepcopy", &[y("{a: [1]}")]).await;
        assert_eq!(to_json_text(&r.ret), r#"{"a":[1]}"#);
    }
}
