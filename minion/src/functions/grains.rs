//! The `grains` execution module: read the minion's grains.

use rmpv::Value;

use super::{CallState};
use super::args::{is_true, py_int, py_str, yamlify_arg, Bound, Signature};
use super::{Context, FnError, Spec};

/// Salt's default target delimiter.
pub const DEFAULT_DELIMITER: &str = ":";

/// The functions of the `grains` module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fun {
    Get,
    Item,
    Items,
    Ls,
}

impl Fun {
    pub(crate) const ALL: &'static [Fun] = &[Fun::Get, Fun::Item, Fun::Items, Fun::Ls];

    pub(crate) fn spec(self) -> Spec {
        let (name, pyname, sig, doc, out) = match self {
            Fun::Get => (
                "grains.get",
                "get",
                Signature::new(&["key", "default", "delimiter", "ordered"], 1, false, false),
                "
    Return one grain; nested values are reached with the delimiter (default ':'),
    e.g. 'pkg:apache', and list items by index. Returns `default` (default '')
    when the key does not exist.

    CLI Example:

        salt '*' grains.get pkg:apache
    ",
                None,
            ),
            Fun::Item => (
                "grains.item",
                "item",
                Signature::new(&[], 0, true, true),
                "
    Return the named grains as a dict. Keys may be nested with ':' (or the
    `delimiter` kwarg); `default` is used for missing keys and `sanitize=True`
    masks host names.

    CLI Example:

        salt '*' grains.item os osrelease
    ",
                Some("nested"),
            ),
            Fun::Items => (
                "grains.items",
                "items",
                Signature::new(&["sanitize"], 0, false, false),
                "
    Return all of the minion's grains. `sanitize=True` masks host names.

    CLI Example:

        salt '*' grains.items
    ",
                Some("nested"),
            ),
            Fun::Ls => (
                "grains.ls",
                "ls",
                Signature::NONE,
                "
    Return the sorted list of grain names.

    CLI Example:

        salt '*' grains.ls
    ",
                None,
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
        let grains = ctx.grains.as_ref();
        Ok(match self {
            Fun::Get => {
                let key = b.get("key").unwrap_or(&Value::Nil);
                let default = b.get("default").cloned().unwrap_or_else(|| Value::from(""));
                let delimiter = b
                    .get("delimiter")
                    .map_or_else(|| DEFAULT_DELIMITER.to_string(), py_str);
                traverse(grains, key, default, &delimiter)
            }
            Fun::Item => {
                let default = b
                    .kwarg("default")
                    .cloned()
                    .unwrap_or_else(|| Value::from(""));
                let delimiter = b
                    .kwarg("delimiter")
                    .map_or_else(|| DEFAULT_DELIMITER.to_string(), py_str);
                let mut ret = item_map(grains, &b.varargs, &default, &delimiter);
                if is_true(b.kwarg("sanitize")) {
                    sanitize(&mut ret);
                }
                ret
            }
            Fun::Items => {
                let mut ret = match grains {
                    Value::Map(_) => grains.clone(),
                    _ => Value::Map(Vec::new()),
                };
                if is_true(b.get("sanitize")) {
                    sanitize(&mut ret);
                }
                ret
            }
            Fun::Ls => {
                let mut keys: Vec<Value> = grains
                    .as_map()
                    .map(|m| m.iter().map(|(k, _)| k.clone()).collect())
                    .unwrap_or_default();
                keys.sort_by_key(py_str);
                Value::Array(keys)
            }
        })
    }
}

/// `grains.item`/`pillar.item`: each key (nested with `delimiter`) mapped to its value, or
/// `default`; a key given twice appears once.
pub(crate) fn item_map(data: &Value, keys: &[Value], default: &Value, delimiter: &str) -> Value {
    let mut out: Vec<(Value, Value)> = Vec::new();
    for key in keys {
        let val = traverse(data, key, default.clone(), delimiter);
        match out.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = val,
            None => out.push((key.clone(), val)),
        }
    }
    Value::Map(out)
}

/// `grains.items sanitize=True`: hide names that identify the host.
fn sanitize(ret: &mut Value) {
    let Value::Map(entries) = ret else { return };
    for (k, v) in entries.iter_mut() {
        let replacement = match k.as_str() {
            Some("domain") => Value::from("DOMAINNAME"),
            Some("fqdn" | "id") => Value::from("MINION.DOMAINNAME"),
            Some("host" | "localhost" | "nodename") => Value::from("MINION"),
            Some("serialnumber") => {
                let s = py_str(v);
                let chars: Vec<char> = s.chars().collect();
                let keep = chars.len() * 3 / 4;
                let mut masked: String = chars[..keep].iter().collect();
                masked.push_str(&"X".repeat(chars.len() - keep));
                Value::from(masked)
            }
            _ => continue,
        };
        *v = replacement;
    }
}

fn map_lookup<'a>(entries: &'a [(Value, Value)], key: &Value) -> Option<&'a Value> {
    entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// `salt.utils.data.traverse_dict_and_list`: follow `key` (split on `delimiter`) through
/// maps and lists; `default` when the path does not exist.
pub(crate) fn traverse(data: &Value, key: &Value, default: Value, delimiter: &str) -> Value {
    let parts: Vec<Value> = match key {
        Value::String(_) => py_str(key).split(delimiter).map(Value::from).collect(),
        other => vec![other.clone()],
    };
    let mut ptr = data;
    for each in &parts {
        match ptr {
            Value::Array(items) => {
                let embedded = items.iter().filter_map(Value::as_map);
                match py_int(each) {
                    Err(_) => match embedded.into_iter().find_map(|m| map_lookup(m, each)) {
                        Some(v) => ptr = v,
                        None => return default,
                    },
                    Ok(idx) => {
                        let idx_key = Value::from(idx);
                        if let Some(v) = embedded.into_iter().find_map(|m| map_lookup(m, &idx_key))
                        {
                            ptr = v;
                        } else {
                            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                            let pos = if idx < 0 { idx + len } else { idx };
                            match usize::try_from(pos).ok().and_then(|p| items.get(p)) {
                                Some(v) => ptr = v,
                                None => return default,
                            }
                        }
                    }
                }
            }
            Value::Map(entries) => match map_lookup(entries, each) {
                Some(v) => ptr = v,
                None => {
                    // Salt retries with the YAML-loaded key (e.g. "1" -> 1).
                    let loaded = match each {
                        Value::String(_) => yamlify_arg(&py_str(each)),
                        other => other.clone(),
                    };
                    if &loaded == each {
                        return default;
                    }
                    match map_lookup(entries, &loaded) {
                        Some(v) => ptr = v,
                        None => return default,
                    }
                }
            },
            _ => return default,
        }
    }
    ptr.clone()
}

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::super::testutil::*;
    use super::*;
    use brine_protocol::payload::map;

    #[tokio::test]
    async fn items_item_ls() {
        let c = ctx();
        let r = call(&c, "grains.items", &[]).await;
        assert_eq!(r.ret, *c.grains);
        assert_eq!(r.out.as_deref(), Some("nested"));
        let r = call(&c, "grains.item", &[s("os"), s("role"), s("nope")]).await;
        assert_eq!(
            r.ret,
            map([("os", s("Debian")), ("role", s("web")), ("nope", s(""))])
        );
        assert_eq!(r.out.as_deref(), Some("nested"));
        let r = call(
            &c,
            "grains.item",
            &[s("deep:a:b"), kw(&[("default", s("d"))])],
        )
        .await;
        assert_eq!(r.ret, map([("deep:a:b", Value::from(7))]));
        let r = call(&c, "grains.ls", &[]).await;
        let keys: Vec<&str> = r
            .ret
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            keys,
            ["deep", "domain", "fqdn", "host", "id", "kernel", "os", "role"]
        );
        assert_eq!(r.out, None);
    }

    #[tokio::test]
    async fn sanitize_masks_host_names() {
        let r = call(&ctx(), "grains.items", &[s("sanitize=True")]).await;
        assert_eq!(map_get_str(&r.ret, "id"), "MINION.DOMAINNAME");
        assert_eq!(map_get_str(&r.ret, "host"), "MINION");
        assert_eq!(map_get_str(&r.ret, "domain"), "DOMAINNAME");
        assert_eq!(map_get_str(&r.ret, "os"), "Debian");
    }

    fn map_get_str<'a>(v: &'a Value, k: &str) -> &'a str {
        super::super::get(v, k).and_then(Value::as_str).unwrap()
    }

    #[tokio::test]
    async fn get_nested_default_delimiter() {
        let c = ctx();
        assert_eq!(call(&c, "grains.get", &[s("os")]).await.ret, s("Debian"));
        assert_eq!(
            call(&c, "grains.get", &[s("deep:a:b")]).await.ret,
            Value::from(7)
        );
        assert_eq!(call(&c, "grains.get", &[s("deep:l:1")]).await.ret, s("y"));
        assert_eq!(call(&c, "grains.get", &[s("deep:l:5")]).await.ret, s(""));
        assert_eq!(call(&c, "grains.get", &[s("missing")]).await.ret, s(""));
        assert_eq!(
            call(&c, "grains.get", &[s("missing"), s("fallback")])
                .await
                .ret,
            s("fallback")
        );
        assert_eq!(
            call(
                &c,
                "grains.get",
                &[s("deep/a/b"), kw(&[("delimiter", s("/"))])]
            )
            .await
            .ret,
            Value::from(7)
        );
        assert_eq!(call(&c, "grains.get", &[s("os:x")]).await.ret, s(""));
        let r = call(&c, "grains.get", &[]).await;
        assert_eq!(r.retcode, 1);
    }

    #[test]
    fn traverse_lists_of_maps_and_int_keys() {
        let data = map([
            ("l", Value::Array(vec![map([("k", s("v"))])])),
            ("m", Value::Map(vec![(Value::from(1), s("one"))])),
        ]);
        assert_eq!(traverse(&data, &s("l:k"), Value::Nil, ":"), s("v"));
        assert_eq!(traverse(&data, &s("l:0:k"), Value::Nil, ":"), s("v"));
        assert_eq!(traverse(&data, &s("l:-1:k"), Value::Nil, ":"), s("v"));
        assert_eq!(traverse(&data, &s("m:1"), Value::Nil, ":"), s("one"));
        assert_eq!(traverse(&data, &s("l:z"), Value::Nil, ":"), Value::Nil);
    }
}
