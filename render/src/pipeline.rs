//! The pipeline: the `#!` line (or the `renderer` option) names the renderers, applied left to
//! right: `jinja` to text, then `yaml` or `json` to data, then `gpg` to decrypt the PGP
//! messages in it. Salt 3007 has no `text` renderer, and neither has Brine: a file managed as
//! text is a template ([`render_template`]).

use std::sync::Arc;

use serde_json::Value;

use crate::{jinja, yaml, Context, Functions, Loader, RenderError};

/// One step of a pipeline.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Jinja,
    Yaml,
    Json,
    Gpg,
}

fn parse_pipeline(spec: &str, ctx: &Context) -> Result<Vec<Step>, RenderError> {
    spec.split('|')
        .map(|name| match name.trim() {
            "jinja" => Ok(Step::Jinja),
            "yaml" => Ok(Step::Yaml),
            "json" => Ok(Step::Json),
            "gpg" => Ok(Step::Gpg),
            other => Err(RenderError::Unsupported {
                saltenv: ctx.saltenv.clone(),
                sls: ctx.sls.clone(),
                renderer: other.to_string(),
            }),
        })
        .collect()
}

/// Render an SLS (state or pillar) file at `path` (under the saltenv root) to data.
pub fn render_sls(
    source: &str,
    path: &str,
    ctx: &Context,
    loader: Arc<dyn Loader>,
    functions: Arc<dyn Functions>,
) -> Result<Value, RenderError> {
    let (spec, body) = match source.strip_prefix("#!") {
        Some(rest) if !rest.starts_with('/') => {
            let (line, body) = rest.split_once('\n').unwrap_or((rest, ""));
            (line.trim().to_string(), format!("\n{body}"))
        }
        _ => {
            let default = if ctx.renderer.is_empty() {
                "jinja|yaml"
            } else {
                &ctx.renderer
            };
            (default.to_string(), source.to_string())
        }
    };
    let steps = parse_pipeline(&spec, ctx)?;
    let failed = |cause: String| RenderError::Failed {
        saltenv: ctx.saltenv.clone(),
        sls: ctx.sls.clone(),
        cause,
    };
    let mut text = body;
    let mut data = None;
    for step in steps {
        match step {
            Step::Jinja => {
                text = jinja_text(&text, path, ctx, loader.clone(), functions.clone())
                    .map_err(failed)?
            }
            Step::Yaml => {
                data = Some(
                    yaml::load(&text)
                        .map_err(|e| failed(format!("Could not render YAML of {path}: {e}")))?,
                );
            }
            Step::Gpg => {
                if ctx.offline {
                    return Err(failed("GPG unavailable in this render".into()));
                }
                let gpg = crate::gpg::Gpg::from_opts(&ctx.opts);
                let input = data
                    .take()
                    .unwrap_or(Value::String(std::mem::take(&mut text)));
                match gpg.decrypt(input, 0).map_err(failed)? {
                    Value::String(s) => text = s,
                    other => data = Some(other),
                }
            }
            Step::Json => {
                data = Some(
                    serde_json::from_str(&text)
                        .map_err(|e| failed(format!("Could not render JSON of {path}: {e}")))?,
                );
            }
        }
    }
    Ok(data.unwrap_or(Value::String(text)))
}

/// Render a Jinja template (a managed file's source) to text.
pub fn render_template(
    source: &str,
    path: &str,
    ctx: &Context,
    loader: Arc<dyn Loader>,
    functions: Arc<dyn Functions>,
) -> Result<String, RenderError> {
    jinja_text(source, path, ctx, loader, functions).map_err(|cause| RenderError::Failed {
        saltenv: ctx.saltenv.clone(),
        sls: ctx.sls.clone(),
        cause,
    })
}

fn jinja_text(
    source: &str,
    path: &str,
    ctx: &Context,
    loader: Arc<dyn Loader>,
    functions: Arc<dyn Functions>,
) -> Result<String, String> {
    jinja::render(source, path, ctx, loader, functions).map_err(|e| {
        // Jinja2's wording for a name that is not defined: 'name' is undefined.
        let undefined = e
            .detail()
            .and_then(|d| d.strip_suffix(" is undefined"))
            .and_then(|d| d.strip_prefix('`')?.strip_suffix('`'));
        let mut cause = match (e.kind(), undefined) {
            (minijinja::ErrorKind::UndefinedError, Some(name)) => {
                format!("Jinja variable '{name}' is undefined")
            }
            (minijinja::ErrorKind::UndefinedError, None) => format!("Jinja variable {e}"),
            (minijinja::ErrorKind::SyntaxError, _) => format!("Jinja syntax error: {e}"),
            (minijinja::ErrorKind::OutOfFuel, _) => format!(
                "Jinja stopped: the template used all of its budget of {} instructions \
                 (brine_jinja_fuel; an endless loop?)",
                jinja::fuel(&ctx.opts).unwrap_or_default()
            ),
            _ => format!("Jinja error: {e}"),
        };
        match (e.line(), e.name()) {
            // In the file itself: Salt's line and the lines around it, the failing one marked.
            (Some(line), name) if name.is_none_or(|n| n == path) => {
                cause.push_str(&format!("; line {line}\n\n{}", error_context(source, line)));
            }
            (Some(line), name) => {
                cause.push_str(&format!("; line {line} of {}", name.unwrap_or(path)));
            }
            (None, _) => {}
        }
        cause
    })
}

/// Salt's `get_context`: up to five lines either side of `line` (1-based) between `---`
/// lines, `[...]` where lines are left out, the failing line marked.
fn error_context(source: &str, line: usize) -> String {
    let lines: Vec<&str> = source.lines().collect();
    if line > lines.len() || line == 0 {
        return source.to_string();
    }
    let start = line.saturating_sub(6);
    let end = lines.len().min(line + 5);
    let mut buf: Vec<String> = Vec::new();
    if start > 0 {
        buf.push("[...]".into());
    }
    for (i, text) in lines[start..end].iter().enumerate() {
        if start + i + 1 == line {
            buf.push(format!("{text}    <======================"));
        } else {
            buf.push(text.to_string());
        }
    }
    if end < lines.len() {
        buf.push("[...]".into());
    }
    format!("---\n{}\n---", buf.join("\n"))
}
