//! The `pillar` execution module: read the minion's pillar, as the master compiled it for this
//! minion. The minion asks the master for a fresh pillar before a job that calls a `pillar.*`
//! function (Salt's `pillar.items` compiles a fresh one too).

use rmpv::Value;

use super::{CallState};
use super::args::{is_true, py_str, Bound, Signature, py_type_name};
use super::grains::{filter_by_in, item_map, lookup, traverse, DEFAULT_DELIMITER};
use super::{Context, FnError, Spec};

/// The functions of the `pillar` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Data,
    Fetch,
    FileExists,
    FilterBy,
    Get,
    Item,
    Items,
    Keys,
    Ls,
    Obfuscate,
    Raw,
}

const ITEMS_SIG: Signature = Signature::new(&[], 0, true, true);

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[
        Fun::Data,
        Fun::Fetch,
        Fun::FileExists,
        Fun::FilterBy,
        Fun::Get,
        Fun::Item,
        Fun::Items,
        Fun::Keys,
        Fun::Ls,
        Fun::Obfuscate,
        Fun::Raw,
    ];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc, out) = match self {
            Fun::Get | Fun::Fetch => (
                if self == Fun::Fetch {
                    "pillar.fetch"
                } else {
                    "pillar.get"
                },
                "get",
                Signature::new(&["key", "default", "merge", "delimiter"], 1, false, true),
                "
    Return one pillar value; nested values are reached with the delimiter
    (default ':'), e.g. 'pkg:apache', and list items by index. Returns `default`
    (default '') when the key does not exist; with merge=True a dict default is
    merged under the value found.

    CLI Example:

        salt '*' pillar.get pkg:apache
    ",
                None,
            ),
            Fun::Item => (
                "pillar.item",
                "item",
                ITEMS_SIG,
                "
    Return the named pillar keys as a dict (nested with ':' or the `delimiter`
    kwarg; `default` for missing keys).

    CLI Example:

        salt '*' pillar.item foo bar
    ",
                Some("nested"),
            ),
            Fun::Items => (
                "pillar.items",
                "items",
                ITEMS_SIG,
                "
    Return the minion's whole pillar; `pillar={...}` is merged over it.

    CLI Example:

        salt '*' pillar.items
    ",
                Some("nested"),
            ),
            Fun::Data => (
                "pillar.data",
                "data",
                ITEMS_SIG,
                "
    Calls the master for a fresh pillar (same as pillar.items).

    CLI Example:

        salt '*' pillar.data
    ",
                None,
            ),
            Fun::FileExists => (
                "pillar.file_exists",
                "file_exists",
                Signature::new(&["path", "saltenv"], 1, false, false),
                "
    Whether a file exists in the pillar roots (of one saltenv, or of any).

    CLI Example:

        salt '*' pillar.file_exists foo/bar.sls
    ",
                None,
            ),
            Fun::FilterBy => (
                "pillar.filter_by",
                "filter_by",
                Signature::new(&["lookup_dict", "pillar", "merge", "default", "base"], 2, false, false),
                "
    Look up the value of a pillar key in lookup_dict (its 'default' entry
    when there is none), optionally merged with base and merge, as
    grains.filter_by does with a grain.

    CLI Example:

        salt '*' pillar.filter_by '{web: Serve it up, db: I query, default: x_x}' role
    ",
                None,
            ),
            Fun::Keys => (
                "pillar.keys",
                "keys",
                Signature::new(&["key", "delimiter"], 1, false, false),
                "
    The keys of the dict found at a pillar key (nested with ':').

    CLI Example:

        salt '*' pillar.keys web:sites
    ",
                None,
            ),
            Fun::Ls => (
                "pillar.ls",
                "ls",
                ITEMS_SIG,
                "
    Return the top-level pillar keys.

    CLI Example:

        salt '*' pillar.ls
    ",
                None,
            ),
            Fun::Obfuscate => (
                "pillar.obfuscate",
                "obfuscate",
                ITEMS_SIG,
                "
    Same as pillar.items, with every value replaced by its type ('<str>',
    '<int>', ...); dict keys and the shape of lists are kept.

    CLI Example:

        salt '*' pillar.obfuscate
    ",
                Some("nested"),
            ),
            Fun::Raw => (
                "pillar.raw",
                "raw",
                Signature::new(&["key"], 0, false, false),
                "
    Return the pillar the minion holds, or the value of one top-level key ({}
    when absent).

    CLI Example:

        salt '*' pillar.raw key=roles
    ",
                Some("nested"),
            ),
        };
        Spec {
            name,
            pyname,
            sig,
            doc,
            out,
        }
    }

    pub(crate) async fn run(self, ctx: &Context, b: &Bound, _st: &mut CallState) -> Result<Value, FnError> {
        let pillar = ctx.pillar.as_ref();
        let delimiter = || {
            b.get("delimiter")
                .map_or_else(|| DEFAULT_DELIMITER.to_string(), py_str)
        };
        Ok(match self {
            Fun::Data => items(pillar, b),
            Fun::FileExists => file_exists(ctx, b),
            Fun::FilterBy => {
                let key = b.get("pillar").map(py_str).unwrap_or_default();
                filter_by_in(pillar, &key, b)?
            }
            Fun::Keys => {
                let key = b.get("key").unwrap_or(&Value::Nil);
                let text = py_str(key);
                match lookup(pillar, key, &delimiter()) {
                    None => {
                        return Err(FnError::Exception(format!(
                            "KeyError: 'Pillar key not found: {text}'"
                        )))
                    }
                    Some(Value::Map(entries)) => {
                        Value::Array(entries.iter().map(|(k, _)| k.clone()).collect())
                    }
                    Some(_) => {
                        return Err(FnError::Exception(format!(
                            "ValueError: Pillar value in key {text} is not a dict"
                        )))
                    }
                }
            }
            Fun::Get | Fun::Fetch => {
                let key = b.get("key").unwrap_or(&Value::Nil);
                let default = b.get("default").cloned().unwrap_or_else(|| Value::from(""));
                if is_true(b.get("merge")) {
                    match traverse(pillar, key, Value::Nil, &delimiter()) {
                        Value::Nil => default,
                        found @ Value::Map(_) if matches!(default, Value::Map(_)) => {
                            merged(default, &found)
                        }
                        found => found,
                    }
                } else {
                    traverse(pillar, key, default, &delimiter())
                }
            }
            Fun::Item => {
                let default = b
                    .kwarg("default")
                    .cloned()
                    .unwrap_or_else(|| Value::from(""));
                item_map(pillar, &b.varargs, &default, &delimiter())
            }
            Fun::Items => items(pillar, b),
            Fun::Ls => match items(pillar, b) {
                Value::Map(entries) => Value::Array(entries.into_iter().map(|(k, _)| k).collect()),
                _ => Value::Array(vec![]),
            },
            Fun::Obfuscate => obfuscate(&items(pillar, b)),
            Fun::Raw => match b.get("key") {
                None | Some(Value::Nil) => pillar.clone(),
                Some(key) => pillar
                    .as_map()
                    .and_then(|m| m.iter().find(|(k, _)| k == key))
                    .map_or_else(|| Value::Map(vec![]), |(_, v)| v.clone()),
            },
        })
    }
}

/// `pillar.file_exists`: whether `path` is a file under a pillar root of `saltenv` (of any
/// saltenv without one; Salt's default roots when the minion's options name none).
fn file_exists(ctx: &Context, b: &Bound) -> Value {
    let path = b.get("path").map(py_str).unwrap_or_default();
    let saltenv = b.get("saltenv").filter(|v| !v.is_nil()).map(py_str);
    let default = serde_json::json!({"base": ["/srv/pillar", "/srv/spm/pillar"]});
    let roots = ctx
        .services
        .opts
        .get("pillar_roots")
        .filter(|r| r.as_object().is_some_and(|m| !m.is_empty()))
        .unwrap_or(&default);
    let found = roots.as_object().into_iter().flatten().any(|(env, dirs)| {
        saltenv.as_deref().is_none_or(|want| want == env)
            && dirs.as_array().into_iter().flatten().any(|dir| {
                let dir = dir.as_str().unwrap_or("");
                // os.path.join: an absolute path replaces the root.
                let full = if path.starts_with('/') {
                    path.clone()
                } else {
                    format!("{}/{path}", dir.trim_end_matches('/'))
                };
                std::path::Path::new(&full).is_file()
            })
    });
    Value::Boolean(found)
}

/// The pillar, with a `pillar={...}` keyword merged over it.
fn items(pillar: &Value, b: &Bound) -> Value {
    let base = match pillar {
        Value::Map(_) => pillar.clone(),
        _ => Value::Map(vec![]),
    };
    match b.kwarg("pillar") {
        Some(over @ Value::Map(_)) => merged(base, over),
        _ => base,
    }
}

/// `over` merged into `base`: maps recursively, anything else replaced.
fn merged(base: Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Map(mut entries), Value::Map(over)) => {
            for (k, v) in over {
                match entries.iter_mut().find(|(key, _)| key == k) {
                    Some(slot) => slot.1 = merged(std::mem::replace(&mut slot.1, Value::Nil), v),
                    None => entries.push((k.clone(), v.clone())),
                }
            }
            Value::Map(entries)
        }
        (_, over) => over.clone(),
    }
}

/// Salt's obfuscation: every leaf becomes `<type name>`; maps and lists keep their shape.
fn obfuscate(v: &Value) -> Value {
    match v {
        Value::Map(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), obfuscate(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(obfuscate).collect()),
        leaf => Value::from(format!("<{}>", py_type_name(leaf))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::{ctx, kw, s};
    use brine_protocol::payload::map;
    use rmpv::Value;
    use std::sync::Arc;

    fn with_pillar() -> super::super::Context {
        let mut c = ctx();
        c.pillar = Arc::new(map([
            (
                "app",
                map([("port", Value::from(80)), ("tls", Value::from(true))]),
            ),
            ("users", Value::Array(vec![s("ann"), Value::Nil])),
            ("secret", s("hunter2")),
        ]));
        c
    }

    #[tokio::test]
    async fn items_get_item_ls_raw_and_obfuscate() {
        let c = with_pillar();
        assert_eq!(
            call(&c, "pillar.get", &[s("app:port")]).await.ret,
            Value::from(80)
        );
        assert_eq!(call(&c, "pillar.get", &[s("nope")]).await.ret, s(""));
        assert_eq!(
            call(
                &c,
                "pillar.get",
                &[
                    s("app"),
                    kw(&[
                        ("default", map([("x", Value::from(1))])),
                        ("merge", Value::from(true))
                    ])
                ]
            )
            .await
            .ret,
            map([
                ("x", Value::from(1)),
                ("port", Value::from(80)),
                ("tls", Value::from(true))
            ])
        );
        assert_eq!(
            call(&c, "pillar.item", &[s("secret"), s("users:0")])
                .await
                .ret,
            map([("secret", s("hunter2")), ("users:0", s("ann"))])
        );
        assert_eq!(
            call(&c, "pillar.ls", &[]).await.ret,
            Value::Array(vec![s("app"), s("users"), s("secret")])
        );
        assert_eq!(
            call(&c, "pillar.raw", &[kw(&[("key", s("secret"))])])
                .await
                .ret,
            s("hunter2")
        );
        assert_eq!(
            call(&c, "pillar.obfuscate", &[]).await.ret,
            map([
                ("app", map([("port", s("<int>")), ("tls", s("<bool>"))])),
                ("users", Value::Array(vec![s("<str>"), s("<NoneType>")])),
                ("secret", s("<str>")),
            ])
        );
        let over = call(
            &c,
            "pillar.items",
            &[kw(&[(
                "pillar",
                map([("app", map([("port", Value::from(8080))]))]),
            )])],
        )
        .await
        .ret;
        assert_eq!(
            over,
            map([
                (
                    "app",
                    map([("port", Value::from(8080)), ("tls", Value::from(true))])
                ),
                ("users", Value::Array(vec![s("ann"), Value::Nil])),
                ("secret", s("hunter2")),
            ])
        );
    }
}
