//! PyYAML's mixed style (`default_flow_style=None`, Salt's `yaml` serializer's default): a
//! scalar, or a collection of scalars only, in flow style; other collections in block style.

use serde_json::Value;

use super::{dump, sorted, DumpOptions, Style};

/// `data` in PyYAML's mixed style with the default indent (two) and no document markers.
pub fn dump_mixed(data: &Value, o: &DumpOptions) -> String {
    if is_flow_node(data) {
        return dump(
            data,
            &DumpOptions {
                style: Style::Flow,
                ..*o
            },
        );
    }
    let mut lines = Vec::new();
    mixed_block(data, o, &mut lines);
    lines.join("\n") + "\n"
}

/// In PyYAML's mixed style (`default_flow_style=None`), a scalar or a collection of scalars
/// only is written in flow style.
pub fn is_flow_node(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().all(is_scalar),
        Value::Object(m) => m.values().all(is_scalar),
        _ => true,
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// A node written alone in flow style, on one line.
fn flow_text(v: &Value, o: &DumpOptions) -> String {
    let text = dump(
        v,
        &DumpOptions {
            style: Style::Flow,
            explicit_start: false,
            ..*o
        },
    );
    let text = text.strip_suffix('\n').unwrap_or(&text);
    text.strip_suffix("\n...").unwrap_or(text).to_string()
}

/// The lines of a block collection (not a flow node) in PyYAML's mixed style, from column 0:
/// mappings indent their mapping values by two, sequences in a mapping are not indented.
fn mixed_block(v: &Value, o: &DumpOptions, lines: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let entries: Vec<(&String, &Value)> = if o.sort_keys {
                sorted(m)
            } else {
                m.iter().collect()
            };
            for (k, v) in entries {
                let key = flow_text(&Value::String(k.clone()), o);
                if is_flow_node(v) {
                    lines.push(format!("{key}: {}", flow_text(v, o)));
                    continue;
                }
                lines.push(format!("{key}:"));
                let mut sub = Vec::new();
                mixed_block(v, o, &mut sub);
                let pad = if v.is_object() { "  " } else { "" };
                lines.extend(sub.into_iter().map(|l| format!("{pad}{l}")));
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_flow_node(item) {
                    lines.push(format!("- {}", flow_text(item, o)));
                    continue;
                }
                let mut sub = Vec::new();
                mixed_block(item, o, &mut sub);
                for (i, l) in sub.into_iter().enumerate() {
                    lines.push(if i == 0 {
                        format!("- {l}")
                    } else {
                        format!("  {l}")
                    });
                }
            }
        }
        scalar => lines.push(flow_text(scalar, o)),
    }
}
