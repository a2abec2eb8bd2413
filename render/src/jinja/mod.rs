//! Jinja with Salt's dialect on MiniJinja: Salt's context variables, the `salt` object, Salt's
//! filters, Python's methods with mutation, `import_yaml`/`import_json`/`import_text`, and
//! templates loaded through the caller's [`crate::Loader`].

mod builtins;
pub use builtins::{str_center, wrap_text};
mod filters;
mod filters_data;
pub use filters_data::{human_to_bytes_text as human_to_bytes, which};
mod filters_net;
mod methods;
mod objects;
mod preprocess;
mod printf;
mod pyargs;
pub(crate) mod pyfmt;
mod pyrandom;
mod salt_fns;

pub use salt_fns::filter_by_json;

use std::borrow::Cow;
use std::cell::Cell;
use std::sync::Arc;

use minijinja::value::Value;
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior};

use crate::{Context, Functions, Loader};

/// The work one render may do when `brine_jinja_fuel` is not set: MiniJinja's fuel, one per
/// instruction and one per 64 bytes of data the template makes. Ordinary states and pillar use
/// well under a million; an endless loop stops after a few seconds.
pub const DEFAULT_FUEL: u64 = 50_000_000;

/// How deep `import_yaml`/`import_json`/`import_text` may nest (a file importing itself stops
/// here instead of overflowing the stack).
const MAX_IMPORT_DEPTH: usize = 32;

/// The fuel of one render from the daemon's options: `brine_jinja_fuel`, 0 for no limit.
pub(crate) fn fuel(opts: &serde_json::Value) -> Option<u64> {
    match opts
        .get("brine_jinja_fuel")
        .and_then(serde_json::Value::as_u64)
    {
        Some(0) => None,
        Some(n) => Some(n),
        None => Some(DEFAULT_FUEL),
    }
}

thread_local! {
    static IMPORT_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// One level of nested imports on this thread, released when dropped.
struct ImportLevel;

impl ImportLevel {
    fn enter() -> Option<Self> {
        IMPORT_DEPTH.with(|depth| {
            (depth.get() < MAX_IMPORT_DEPTH).then(|| {
                depth.set(depth.get() + 1);
                ImportLevel
            })
        })
    }
}

impl Drop for ImportLevel {
    fn drop(&mut self) {
        IMPORT_DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
    }
}

/// Join a template name to the template that names it: `./x` and `../x` are relative to it,
/// anything else to the saltenv root.
fn join(name: &str, parent: &str) -> String {
    let name = name.strip_prefix("salt://").unwrap_or(name);
    if !(name.starts_with("./") || name.starts_with("../")) {
        return name.to_string();
    }
    let mut parts: Vec<&str> = parent.split('/').collect();
    parts.pop();
    for segment in name.split('/') {
        match segment {
            "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// Render `source` (named `name`, a path under the saltenv root) with Salt's context.
pub(crate) fn render(
    source: &str,
    name: &str,
    ctx: &Context,
    loader: Arc<dyn Loader>,
    functions: Arc<dyn Functions>,
) -> Result<String, Error> {
    let mut env = Environment::new();
    env.set_fuel(fuel(&ctx.opts));
    env.set_undefined_behavior(if ctx.allow_undefined {
        UndefinedBehavior::Lenient
    } else {
        UndefinedBehavior::Strict
    });
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_formatter(|out, _state, value| {
        out.write_str(&pyfmt::str(value))?;
        Ok(())
    });
    env.set_unknown_method_callback(methods::call);
    env.set_path_join_callback(|name, parent| Cow::Owned(join(name, parent)));
    let saltenv = ctx.saltenv.clone();
    let file_loader = loader.clone();
    env.set_loader(move |path| match file_loader.load(&saltenv, path) {
        Ok(Some(text)) => Ok(Some(preprocess::rewrite(&text))),
        Ok(None) => Ok(None),
        Err(e) => Err(Error::new(
            ErrorKind::TemplateNotFound,
            format!("{path}: {e}"),
        )),
    });
    filters::register(&mut env);
    if ctx.offline {
        env.add_filter("dns_check", |_: Value| -> Result<Value, Error> {
            Err(Error::new(
                ErrorKind::InvalidOperation,
                "dns_check: name resolution is off in this render",
            ))
        });
    }
    env.add_function(preprocess::MUT_FN, |v: Value| objects::shallow_mut(&v));
    env.add_function(
        preprocess::PERCENT_FN,
        |fmt: Value, args: Value| -> Result<String, Error> {
            printf::percent(&pyfmt::str(&fmt), &args)
                .map_err(|e| Error::new(ErrorKind::InvalidOperation, e))
        },
    );
    env.add_function("dict", |args: pyargs::Args| -> Result<Value, Error> {
        let args = args.into_values();
        let (positional, kwargs) = objects::split_kwargs(&args);
        let mut entries = indexmap::IndexMap::new();
        if let Some(first) = positional.first() {
            for (k, v) in objects::map_entries(first).ok_or_else(|| {
                Error::new(ErrorKind::InvalidOperation, "dict() expects a mapping")
            })? {
                entries.insert(k, v);
            }
        }
        entries.extend(kwargs);
        Ok(objects::Dict::value(entries))
    });
    env.add_function(
        preprocess::IMPORT_FN,
        |state: &State, kind: String, path: String| -> Result<Value, Error> {
            let joined = join(&path, state.name());
            let _level = ImportLevel::enter().ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidOperation,
                    format!(
                        "{joined}: imports nested more than {MAX_IMPORT_DEPTH} deep \
                         (does a file import itself?)"
                    ),
                )
            })?;
            let template = state.env().get_template(&joined)?;
            let captured = template.render_captured(())?;
            // The imported file's work counts against the file that imports it.
            if let Some((used, _)) = captured.state().fuel_levels() {
                state.consume_fuel(used)?;
            }
            let text = captured.into_output();
            let bad = |e: String| Error::new(ErrorKind::InvalidOperation, format!("{joined}: {e}"));
            match kind.as_str() {
                "yaml" => crate::yaml::load(&text)
                    .map(|j| pyfmt::from_json(&j))
                    .map_err(bad),
                "json" => serde_json::from_str(&text)
                    .map(|j| pyfmt::from_json(&j))
                    .map_err(|e| bad(e.to_string())),
                _ => Ok(Value::from(text)),
            }
        },
    );
    let data = salt_fns::Data {
        grains: pyfmt::from_json(&ctx.grains),
        pillar: pyfmt::from_json(&ctx.pillar),
        opts: pyfmt::from_json(&ctx.opts),
    };
    env.add_global("grains", data.grains.clone());
    env.add_global("pillar", data.pillar.clone());
    env.add_global("opts", data.opts.clone());
    let salt = Arc::new(salt_fns::Salt { data, functions });
    env.add_global("salt", Value::from_dyn_object(salt.clone()));
    // Salt's `ifelse` global is its `match.ifelse` function.
    env.add_function("ifelse", move |args: pyargs::Args| {
        salt.invoke("match.ifelse", &args.into_values())
    });
    env.add_global("saltenv", Value::from(ctx.saltenv.as_str()));
    for (key, value) in sls_context(name, &ctx.sls) {
        env.add_global(key, Value::from(value));
    }
    for (key, value) in &ctx.vars {
        env.add_global(key.clone(), pyfmt::from_json(value));
    }
    let rewritten = preprocess::rewrite(source);
    env.add_template_owned(name.to_string(), rewritten)?;
    let mut out = env.get_template(name)?.render(())?;
    if source.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// Salt's per-file variables (`slspath`, `tpldir`, …).
fn sls_context(tplfile: &str, sls: &str) -> Vec<(&'static str, String)> {
    let tpldir = tplfile.rsplit_once('/').map_or("", |(d, _)| d).to_string();
    let slspath = if sls.is_empty() {
        String::new()
    } else {
        tpldir.clone()
    };
    vec![
        ("sls", sls.to_string()),
        ("tplfile", tplfile.to_string()),
        ("tplpath", tplfile.to_string()),
        ("tpldot", tpldir.replace('/', ".")),
        (
            "tplroot",
            tpldir.split('/').next().unwrap_or("").to_string(),
        ),
        ("slsdotpath", slspath.replace('/', ".")),
        ("slscolonpath", slspath.replace('/', ":")),
        ("sls_path", slspath.replace('/', "_")),
        ("slspath", slspath),
        (
            "tpldir",
            if tpldir.is_empty() {
                ".".to_string()
            } else {
                tpldir
            },
        ),
    ]
}
