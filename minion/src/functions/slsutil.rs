//! The `slsutil` execution module: helpers formulas call from their templates (Salt's
//! `salt/modules/slsutil.py`): merging data (`update`, `merge`, `merge_all`), `boolstr`,
//! questions about the state tree (`file_exists`, `dir_exists`, `path_exists`, `findup`, asked
//! of the file server's lists as Salt asks `cp.list_master` and `cp.list_master_dirs`), the
//! `json` and `yaml` serializers (`serialize`, `deserialize`) and `banner`.
//!
//! Not here: `renderer` (it needs the whole render pipeline), the `aggregate` merge strategy
//! (Salt's yamlex aggregation) and the serializers other than `json` and `yaml`.

use rmpv::Value;

use super::args::{py_int, py_str, py_type_name, Bound, Signature};
use super::{CallState, Context, FnError, Spec};
use crate::fileclient::FileClient;
use brine_protocol::dictupdate::{self, NotDicts, Strategy};
use brine_render::{str_center as center, wrap_text as wrap};
use brine_protocol::payload::{from_json, py_truthy, to_json};
use brine_protocol::pyjson::{self, JsonStyle};
use brine_protocol::yaml::{self, DumpOptions, Style};

super::spec_table! {
    /// The functions of the `slsutil` module.
    Update => ("slsutil.update", "update", ["dest", "upd", "recursive_update", "merge_lists"], 2, false, false, r#"
    Merge the mapping ``upd`` into the mapping ``dest`` and return the result.

    With ``recursive_update=True`` (the default) nested mappings are merged key
    by key; otherwise the top-level keys of ``upd`` replace those of ``dest``.
    ``merge_lists=True`` joins lists found under the same key instead of
    replacing them (only when merging recursively).

    CLI Example:

    .. code-block:: shell

        salt '*' slsutil.update '{a: 1}' '{b: 2}'
    "#),
    Merge => ("slsutil.merge", "merge", ["obj_a", "obj_b", "strategy", "renderer", "merge_lists"], 2, false, false, r#"
    Merge the mapping ``obj_b`` into ``obj_a`` with a merge strategy.

    Strategies: ``recurse``, ``overwrite``, ``list``, ``none`` and ``smart``
    (the default, which is ``recurse`` here). ``merge_lists`` joins lists
    under the same key.

    CLI Example:

    .. code-block:: shell

        salt '*' slsutil.merge '{a: 1}' '{b: 2}'
    "#),
    MergeAll => ("slsutil.merge_all", "merge_all", ["lst", "strategy", "renderer", "merge_lists"], 1, false, false, r#"
    Merge every mapping of the list ``lst``, in order, into an empty mapping,
    with the strategy of ``slsutil.merge``.

    CLI Example:

    .. code-block:: shell

        salt '*' slsutil.merge_all '[{a: 1}, {a: 2}]'
    "#),
    Serialize => ("slsutil.serialize", "serialize", ["serializer", "obj"], 2, false, true, r#"
    Write ``obj`` as text with the serializer named ``serializer`` (``json``
    or ``yaml``); other keyword arguments are the serializer's options.

    CLI Example:

    .. code-block:: bash

        salt '*' slsutil.serialize json '{a: 1}'

    Jinja Example:

    .. code-block:: jinja

        {% set text = salt['slsutil.serialize']('json', {'a': 1}) %}
    "#),
    Deserialize => ("slsutil.deserialize", "deserialize", ["serializer", "stream_or_string"], 2, false, true, r#"
    Read the text ``stream_or_string`` with the serializer named
    ``serializer`` (``json`` or ``yaml``) and return its data.

    CLI Example:

    .. code-block:: bash

        salt '*' slsutil.deserialize json '{"a": 1}'

    Jinja Example:

    .. code-block:: jinja

        {% set data = salt['slsutil.deserialize']('json', '{"a": 1}') %}
    "#),
    Banner => ("slsutil.banner", "banner", ["width", "commentchar", "borderchar", "blockstart", "blockend", "title", "text", "newline"], 0, false, false, r#"
    Return a comment block warning that a file is managed by Salt, for a
    templated file.

    :param width: the width of the block (72).
    :param commentchar: what starts each line (``#``); several characters
        are allowed.
    :param borderchar: the character of the top and bottom borders.
    :param blockstart: a line put before the block (a block comment opener).
    :param blockend: a line put after the block (a block comment closer).
    :param title: the centred first field.
    :param text: the left-aligned second field.
    :param newline: end the block with a line break.

    .. code-block:: jinja

        {{ salt['slsutil.banner'](commentchar='//', width=60) }}
    "#),
    Boolstr => ("slsutil.boolstr", "boolstr", ["value", "true", "false"], 1, false, false, r#"
    Return ``true`` when ``value`` is true, else ``false`` (the strings
    ``"true"`` and ``"false"`` unless given): a boolean written as a file's
    syntax wants it.

    .. code-block:: jinja

        use_tls: {{ salt['slsutil.boolstr'](encrypted, 'yes', 'no') }}
    "#),
    FileExists => ("slsutil.file_exists", "file_exists", ["path", "saltenv"], 1, false, false, r#"
    Return ``True`` when the file ``path`` is in the state tree of
    ``saltenv`` (``base``).

    CLI Example:

    .. code-block:: bash

        salt '*' slsutil.file_exists nginx/defaults.yaml
    "#),
    DirExists => ("slsutil.dir_exists", "dir_exists", ["path", "saltenv"], 1, false, false, r#"
    Return ``True`` when the directory ``path`` is in the state tree of
    ``saltenv`` (``base``).

    CLI Example:

    .. code-block:: bash

        salt '*' slsutil.dir_exists nginx/files
    "#),
    PathExists => ("slsutil.path_exists", "path_exists", ["path", "saltenv"], 1, false, false, r#"
    Return ``True`` when ``path`` is a file or a directory of the state tree
    of ``saltenv`` (``base``).

    CLI Example:

    .. code-block:: bash

        salt '*' slsutil.path_exists nginx/files
    "#),
    Findup => ("slsutil.findup", "findup", ["startpath", "filenames", "saltenv"], 2, false, false, r#"
    Look for ``filenames`` (a name or a list of names, files or directories)
    in the state tree directory ``startpath``, then in each of its parents up
    to the root (an empty ``startpath``), and return the first path found.

    CLI Example:

    .. code-block:: bash

        salt '*' slsutil.findup formulas/shared/nginx map.jinja

    .. code-block:: jinja

        {% set defaults = salt['slsutil.findup'](tplfile, 'defaults.yaml') %}
    "#),
}

impl Fun {
    pub(crate) async fn run(
        self,
        ctx: &Context,
        b: &Bound,
        _st: &mut CallState,
    ) -> Result<Value, FnError> {
        match self {
            Fun::FileExists | Fun::DirExists | Fun::PathExists | Fun::Findup => {
                let client = ctx
                    .services
                    .file_source()
                    .map(|source| FileClient::new(source, &ctx.services.cachedir));
                let b = b.clone();
                tokio::task::spawn_blocking(move || self.run_tree(client.as_ref(), &b))
                    .await
                    .map_err(|e| FnError::Exception(e.to_string()))?
            }
            _ => self.run_data(b),
        }
    }

    /// The functions that work on their arguments alone.
    fn run_data(self, b: &Bound) -> Result<Value, FnError> {
        let nil = Value::Nil;
        let arg = |name: &str| b.get(name).unwrap_or(&nil);
        let flag = |name: &str, default: bool| b.get(name).map_or(default, py_truthy);
        match self {
            Fun::Update => {
                let recursive = flag("recursive_update", true);
                update(
                    arg("dest"),
                    arg("upd"),
                    recursive,
                    flag("merge_lists", false),
                )
                .map_err(type_error)
            }
            Fun::Merge => {
                let strategy = strategy_of(b)?;
                merge(
                    arg("obj_a").clone(),
                    arg("obj_b"),
                    strategy,
                    flag("merge_lists", false),
                )
            }
            Fun::MergeAll => {
                let strategy = strategy_of(b)?;
                let items: Vec<Value> = match arg("lst") {
                    Value::Array(items) => items.clone(),
                    Value::Map(items) => items.iter().map(|(k, _)| k.clone()).collect(),
                    Value::String(s) => s
                        .as_str()
                        .unwrap_or_default()
                        .chars()
                        .map(|c| Value::from(c.to_string()))
                        .collect(),
                    other => {
                        return Err(FnError::InvalidArgs(format!(
                            "'{}' object is not iterable",
                            py_type_name(other)
                        )))
                    }
                };
                let merge_lists = flag("merge_lists", false);
                items.iter().try_fold(Value::Map(vec![]), |acc, obj| {
                    merge(acc, obj, strategy, merge_lists)
                })
            }
            Fun::Boolstr => Ok(if py_truthy(arg("value")) {
                b.get("true")
                    .cloned()
                    .unwrap_or_else(|| Value::from("true"))
            } else {
                b.get("false")
                    .cloned()
                    .unwrap_or_else(|| Value::from("false"))
            }),
            Fun::Serialize => {
                let name = py_str(arg("serializer"));
                serialize(&name, arg("obj"), &options(b)).map(Value::from)
            }
            Fun::Deserialize => {
                let name = py_str(arg("serializer"));
                deserialize(&name, arg("stream_or_string"), &options(b))
            }
            Fun::Banner => banner(b).map(Value::from),
            Fun::FileExists | Fun::DirExists | Fun::PathExists | Fun::Findup => {
                unreachable!("answered by run_tree")
            }
        }
    }

    /// The functions that ask the file server.
    fn run_tree(self, client: Option<&FileClient>, b: &Bound) -> Result<Value, FnError> {
        let client = client.ok_or_else(|| {
            FnError::Execution(
                "slsutil needs the master's file server (this minion has no master)".into(),
            )
        })?;
        let saltenv = b.opt("saltenv").map_or_else(|| "base".to_string(), py_str);
        let tree = Tree {
            client,
            saltenv: &saltenv,
        };
        let path = b.get("path").map(py_str).unwrap_or_default();
        Ok(match self {
            Fun::FileExists => Value::Boolean(tree.file_exists(&path)?),
            Fun::DirExists => Value::Boolean(tree.dir_exists(&path)?),
            Fun::PathExists => Value::Boolean(tree.path_exists(&path)?),
            Fun::Findup => {
                let start = b.get("startpath").filter(|v| py_truthy(v)).map(py_str);
                let names = match b.get("filenames") {
                    Some(Value::String(s)) => vec![s.as_str().unwrap_or_default().to_string()],
                    Some(Value::Array(items)) => items.iter().map(py_str).collect(),
                    _ => {
                        return Err(FnError::Invocation(
                            "Filenames argument must be a string or list of strings".into(),
                        ))
                    }
                };
                Value::from(tree.findup(start, &names)?)
            }
            _ => unreachable!("answered by run_data"),
        })
    }
}

/// Salt's `TypeError` of `dictupdate.update`.
pub(crate) fn type_error(e: NotDicts) -> FnError {
    FnError::InvalidArgs(e.to_string())
}

/// Salt's `dictupdate.update(dest, upd, recursive_update, merge_lists)`.
pub(crate) fn update(
    dest: &Value,
    upd: &Value,
    recursive: bool,
    merge_lists: bool,
) -> Result<Value, NotDicts> {
    let (Value::Map(dest), Value::Map(upd)) = (dest, upd) else {
        return Err(NotDicts);
    };
    let mut dest = dest.clone();
    // Salt merges recursively only when the two share a key; without one both ways agree.
    if recursive {
        dictupdate::update(&mut dest, upd, merge_lists);
    } else {
        for (k, v) in upd {
            match dest
                .iter_mut()
                .find(|(key, _)| brine_protocol::pyeq::py_eq(key, k))
            {
                Some(slot) => slot.1 = v.clone(),
                None => dest.push((k.clone(), v.clone())),
            }
        }
    }
    Ok(Value::Map(dest))
}

/// The strategy of a `merge` call: `smart` is `recurse` unless the renderer is yamlex, an
/// unknown name is `recurse` (Salt logs a warning).
fn strategy_of(b: &Bound) -> Result<Strategy, FnError> {
    let name = b.opt("strategy").map_or_else(|| "smart".into(), py_str);
    let renderer = b.opt("renderer").map_or_else(|| "yaml".into(), py_str);
    let yamlex = renderer.rsplit('|').next() == Some("yamlex") || renderer.starts_with("yamlex_");
    Ok(match name.as_str() {
        "smart" if !yamlex => Strategy::Recurse,
        "smart" | "aggregate" => {
            return Err(FnError::Execution(
                "The aggregate merge strategy (yamlex) is not supported by Brine".into(),
            ))
        }
        "overwrite" => Strategy::Overwrite,
        "list" => Strategy::List,
        "none" => Strategy::None,
        "recurse" => Strategy::Recurse,
        other => {
            tracing::warn!("Unknown merging strategy '{other}', fallback to recurse");
            Strategy::Recurse
        }
    })
}

/// Salt's `dictupdate.merge`, with its errors for what is not a mapping.
fn merge(a: Value, b: &Value, strategy: Strategy, merge_lists: bool) -> Result<Value, FnError> {
    if strategy == Strategy::List && !matches!(a, Value::Map(_)) {
        return Err(FnError::Exception(format!(
            "AttributeError: '{}' object has no attribute 'items'",
            py_type_name(&a)
        )));
    }
    dictupdate::merge(a, b, strategy, merge_lists).map_err(type_error)
}

/// The serializer options: the call's keyword arguments without Salt's `__` keys.
fn options(b: &Bound) -> Vec<(String, Value)> {
    b.kwargs
        .iter()
        .filter(|(k, _)| !k.starts_with("__"))
        .cloned()
        .collect()
}

fn not_found(serializer: &str) -> FnError {
    FnError::Execution(format!("Serializer '{serializer}' not found."))
}

fn unsupported_option(serializer: &str, key: &str) -> FnError {
    FnError::Execution(format!(
        "The option '{key}' of the {serializer} serializer is not supported by Brine"
    ))
}

fn int_option(serializer: &str, key: &str, v: &Value) -> Result<i64, FnError> {
    py_int(v).map_err(|_| unsupported_option(serializer, key))
}

/// Salt's `json` and `yaml` serializers' `serialize(obj, **options)`.
fn serialize(serializer: &str, obj: &Value, opts: &[(String, Value)]) -> Result<String, FnError> {
    let data = to_json(obj);
    match serializer {
        "json" => {
            // salt.utils.json.dumps: json.dumps with ensure_ascii False unless given.
            let mut style = JsonStyle::new(None, false);
            for (key, v) in opts {
                match (key.as_str(), v) {
                    ("indent", Value::Nil) => style.indent = None,
                    ("indent", Value::String(s)) => {
                        style.indent = Some(s.as_str().unwrap_or_default().to_string());
                        style.item_separator = ",".into();
                    }
                    ("indent", v) => {
                        let n = int_option(serializer, key, v)?;
                        style.indent = Some(" ".repeat(usize::try_from(n).unwrap_or(0)));
                        style.item_separator = ",".into();
                    }
                    ("sort_keys", v) => style.sort_keys = py_truthy(v),
                    ("ensure_ascii", v) => style.ensure_ascii = py_truthy(v),
                    ("separators", Value::Array(seps)) if seps.len() == 2 => {
                        style.item_separator = py_str(&seps[0]);
                        style.key_separator = py_str(&seps[1]);
                    }
                    _ => return Err(unsupported_option(serializer, key)),
                }
            }
            Ok(pyjson::dumps(&data, &style))
        }
        "yaml" => {
            let mut o = DumpOptions::new(Style::Block(2));
            // default_flow_style None: PyYAML's mixed style.
            let mut flow: Option<bool> = None;
            let mut indent = None;
            for (key, v) in opts {
                match key.as_str() {
                    "default_flow_style" => flow = (!v.is_nil()).then(|| py_truthy(v)),
                    "indent" if !v.is_nil() => indent = Some(int_option(serializer, key, v)?),
                    "width" if !v.is_nil() => o.width = int_option(serializer, key, v)?,
                    "explicit_start" => o.explicit_start = py_truthy(v),
                    "explicit_end" => {}
                    "allow_unicode" => o.allow_unicode = py_truthy(v),
                    "sort_keys" => o.sort_keys = py_truthy(v),
                    _ => return Err(unsupported_option(serializer, key)),
                }
            }
            let block_indent = indent
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (2..10).contains(n))
                .unwrap_or(2);
            let text = match flow {
                Some(false) => {
                    o.style = Style::Block(block_indent);
                    yaml::dump(&data, &o)
                }
                Some(true) => {
                    o.style = Style::Flow;
                    yaml::dump(&data, &o)
                }
                None if yaml::is_flow_node(&data) => {
                    o.style = Style::Flow;
                    yaml::dump(&data, &o)
                }
                None => {
                    if block_indent != 2 || o.explicit_start {
                        return Err(FnError::Execution(
                            "Brine's yaml serializer writes the mixed flow style with the \
                             default indent and no explicit start only"
                                .into(),
                        ));
                    }
                    yaml::dump_mixed(&data, &o)
                }
            };
            let text = text
                .strip_suffix("\n...\n")
                .or_else(|| text.strip_suffix('\n'))
                .unwrap_or(&text);
            Ok(text.to_string())
        }
        other => Err(not_found(other)),
    }
}

/// Salt's `json` and `yaml` serializers' `deserialize(stream_or_string, **options)`.
fn deserialize(
    serializer: &str,
    input: &Value,
    opts: &[(String, Value)],
) -> Result<Value, FnError> {
    if !matches!(serializer, "json" | "yaml") {
        return Err(not_found(serializer));
    }
    if let Some((key, _)) = opts.first() {
        return Err(unsupported_option(serializer, key));
    }
    let text = match input {
        Value::String(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        Value::Binary(b) => String::from_utf8_lossy(b).into_owned(),
        other => {
            return Err(FnError::Exception(format!(
                "DeserializationError: '{}' object has no attribute 'read'",
                py_type_name(other)
            )))
        }
    };
    let data = if serializer == "json" {
        brine_protocol::payload::from_json_text(&text).map_err(|e| e.to_string())
    } else {
        yaml::load::load(&text).map(|v| from_json(&v))
    };
    data.map_err(|e| FnError::Exception(format!("DeserializationError: {e}")))
}



/// Salt's `slsutil.banner`.
fn banner(b: &Bound) -> Result<String, FnError> {
    let text_of = |name: &str, default: &str| b.opt(name).map_or_else(|| default.into(), py_str);
    let width = match b.opt("width") {
        Some(v) => py_int(v).map_err(FnError::InvalidArgs)?,
        None => 72,
    };
    let commentchar = text_of("commentchar", "#");
    let borderchar = text_of("borderchar", "#");
    let title = text_of("title", "THIS FILE IS MANAGED BY SALT - DO NOT EDIT");
    let text = text_of(
        "text",
        "The contents of this file are managed by Salt. Any changes to this file may be \
         overwritten automatically and without warning.",
    );
    let len = |s: &str| s.chars().count() as i64;
    let ledge = commentchar.trim_end().to_string();
    let redge = commentchar.trim().to_string();
    let lgutter = format!("{ledge} ");
    let rgutter = format!(" {redge}");
    let textwidth = width - len(&lgutter) - len(&rgutter);
    if textwidth <= 0 {
        // ArgumentValueError is a CommandExecutionError.
        return Err(FnError::Execution(
            "Width is too small to render banner".into(),
        ));
    }
    let repeat = |s: &str, n: i64| s.repeat(usize::try_from(n).unwrap_or(0));
    let border: String = borderchar.chars().take(1).collect();
    let border_line = format!(
        "{commentchar}{}{redge}",
        repeat(&border, width - len(&ledge) - len(&redge))
    );
    let spacer_line = format!(
        "{commentchar}{}{commentchar}",
        repeat(" ", width - len(&commentchar) * 2)
    );
    let tw = textwidth as usize;
    let mut block = Vec::new();
    if let Some(start) = b.opt("blockstart") {
        block.push(py_str(start));
    }
    block.push(border_line.clone());
    block.push(spacer_line.clone());
    for line in wrap(&title, tw) {
        block.push(format!("{lgutter}{}{rgutter}", center(&line, tw)));
    }
    block.push(spacer_line);
    for line in wrap(&text, tw) {
        let pad = repeat(" ", textwidth - len(&line));
        block.push(format!("{lgutter}{line}{pad}{rgutter}"));
    }
    block.push(border_line);
    if let Some(end) = b.opt("blockend") {
        block.push(py_str(end));
    }
    let mut result = block.join("\n");
    if b.get("newline").is_some_and(py_truthy) {
        result.push('\n');
    }
    Ok(result)
}

/// The state tree of one saltenv, as the file server lists it.
struct Tree<'a> {
    client: &'a FileClient,
    saltenv: &'a str,
}

impl Tree<'_> {
    fn file_exists(&self, path: &str) -> Result<bool, FnError> {
        let files = self.client.list(self.saltenv).map_err(FnError::Execution)?;
        Ok(files.iter().any(|f| f == path))
    }

    fn dir_exists(&self, path: &str) -> Result<bool, FnError> {
        let dirs = self
            .client
            .dir_list(self.saltenv, "")
            .map_err(FnError::Execution)?;
        Ok(dirs.iter().any(|d| d == path))
    }

    fn path_exists(&self, path: &str) -> Result<bool, FnError> {
        Ok(self.file_exists(path)? || self.dir_exists(path)?)
    }

    /// Salt's `findup`: `names` in `start`, then in each parent of it, the root last.
    fn findup(&self, start: Option<String>, names: &[String]) -> Result<String, FnError> {
        let mut start = start.map(|s| brine_protocol::posixpath::normpath(&s));
        if let Some(s) = &start {
            if !self.path_exists(s)? {
                return Err(FnError::Invocation(format!(
                    "Starting path not found in the state tree: {s}"
                )));
            }
        }
        loop {
            for name in names {
                let full = match start.as_deref() {
                    Some(s) if !s.is_empty() => brine_protocol::posixpath::join(s, name),
                    _ => name.clone(),
                };
                if self.path_exists(&full)? {
                    return Ok(full);
                }
            }
            match start.as_deref() {
                Some(s) if !s.is_empty() => {
                    start = Some(brine_protocol::posixpath::dirname(s));
                }
                _ => {
                    return Err(FnError::Execution(
                        "File pattern(s) not found in path ancestry".into(),
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{call, CallResult};
    use super::*;
    use brine_protocol::payload::to_json_text;

    fn yaml_arg(text: &str) -> Value {
        from_json(&yaml::load::load(text).unwrap())
    }

    async fn run(fun: &str, args: &[Value]) -> CallResult {
        call(&ctx(), fun, args).await
    }

    async fn json_of(fun: &str, args: &[Value]) -> String {
        let r = run(fun, args).await;
        assert_eq!(r.retcode, 0, "{fun}: {:?}", r.ret);
        to_json_text(&r.ret)
    }

    // Expected values are what Salt 3007's salt-call answered.
    #[tokio::test]
    async fn merges_as_salt() {
        let a = yaml_arg("{x: {a: 1, l: [1, 2]}, y: 1}");
        let b = yaml_arg("{x: {b: 2, l: [2, 3]}, z: 3}");
        assert_eq!(
            json_of("slsutil.merge", &[a.clone(), b.clone()]).await,
            r#"{"x":{"a":1,"l":[2,3],"b":2},"y":1,"z":3}"#
        );
        assert_eq!(
            json_of(
                "slsutil.merge",
                &[
                    a.clone(),
                    b.clone(),
                    kw(&[("merge_lists", Value::Boolean(true))])
                ]
            )
            .await,
            r#"{"x":{"a":1,"l":[1,2,3],"b":2},"y":1,"z":3}"#
        );
        assert_eq!(
            json_of("slsutil.merge", &[a.clone(), b.clone(), s("overwrite")]).await,
            r#"{"x":{"b":2,"l":[2,3]},"y":1,"z":3}"#
        );
        assert_eq!(
            json_of(
                "slsutil.update",
                &[a.clone(), b.clone(), Value::Boolean(false)]
            )
            .await,
            r#"{"x":{"b":2,"l":[2,3]},"y":1,"z":3}"#
        );
        assert_eq!(
            json_of("slsutil.merge_all", &[yaml_arg("[{a: 1}, {a: 2, b: 1}]")]).await,
            r#"{"a":2,"b":1}"#
        );
        let r = run("slsutil.update", &[a, Value::from(1)]).await;
        assert_eq!(r.retcode, 1);
        assert!(
            matches!(&r.failure, Some(super::super::Failure::InvalidArguments { message, .. })
                if message == "Cannot update using non-dict types in dictupdate.update()"),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn serializes_as_salt() {
        let data = yaml_arg("{a: [1, 2], b: {c: [x]}, d: [{e: 1, f: [2]}], g: []}");
        assert_eq!(
            run("slsutil.serialize", &[s("yaml"), data.clone()])
                .await
                .ret,
            s("a: [1, 2]\nb:\n  c: [x]\nd:\n- e: 1\n  f: [2]\ng: []")
        );
        assert_eq!(
            run("slsutil.serialize", &[s("yaml"), yaml_arg("{foo: Foo!}")])
                .await
                .ret,
            s("{foo: Foo!}")
        );
        assert_eq!(
            run("slsutil.serialize", &[s("json"), yaml_arg("{a: [1, é]}")])
                .await
                .ret,
            s(r#"{"a": [1, "é"]}"#)
        );
        let r = run("slsutil.serialize", &[s("toml"), data]).await;
        assert_eq!(
            r.failure,
            Some(super::super::Failure::Execution(
                "Serializer 'toml' not found.".into()
            ))
        );
        assert_eq!(
            json_of("slsutil.deserialize", &[s("yaml"), s("{a: [1, x]}")]).await,
            r#"{"a":[1,"x"]}"#
        );
        assert_eq!(
            json_of("slsutil.deserialize", &[s("json"), s(r#"{"a": 1}"#)]).await,
            r#"{"a":1}"#
        );
    }

    #[tokio::test]
    async fn banner_and_boolstr_as_salt() {
        let r = run("slsutil.banner", &[kw(&[("width", Value::from(10))])]).await;
        assert_eq!(
            r.ret,
            s("##########\n#        #\n#  THIS  #\n#  FILE  #\n# IS MAN #\n#  AGED  #\n#   BY   #\n# SALT - #\n# DO NOT #\n#  EDIT  #\n#        #\n# The co #\n# ntents #\n# of     #\n# this   #\n# file   #\n# are ma #\n# naged  #\n# by     #\n# Salt.  #\n# Any ch #\n# anges  #\n# to     #\n# this   #\n# file   #\n# may be #\n# overwr #\n# itten  #\n# automa #\n# ticall #\n# y and  #\n# withou #\n# t warn #\n# ing.   #\n##########")
        );
        let r = run("slsutil.banner", &[]).await;
        let text = r.ret.as_str().unwrap();
        assert!(
            text.contains(
                "#              THIS FILE IS MANAGED BY SALT - DO NOT EDIT              #"
            ),
            "{text}"
        );
        assert_eq!(
            run(
                "slsutil.boolstr",
                &[Value::Boolean(true), s("yes"), s("no")]
            )
            .await
            .ret,
            s("yes")
        );
        assert_eq!(
            run("slsutil.boolstr", &[Value::from(0)]).await.ret,
            s("false")
        );
    }

    #[test]
    fn wraps_as_textwrap() {
        assert_eq!(
            wrap("a well-known  thing", 6),
            ["a", "well-", "known", "thing"]
        );
        assert_eq!(wrap("SALT - DO", 6), ["SALT -", "DO"]);
        assert_eq!(center("ab", 5), "  ab ");
        assert_eq!(center("ab", 6), "  ab  ");
    }

    #[tokio::test]
    async fn tree_functions_need_a_file_server() {
        let r = run("slsutil.file_exists", &[s("top.sls")]).await;
        assert_eq!(r.retcode, 1);
    }
}
