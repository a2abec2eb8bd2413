//! A YAML loader with the semantics of Salt's `salt.utils.yaml.safe_load` (PyYAML's SafeLoader,
//! i.e. YAML 1.1): plain `yes`/`no`/`on`/`off` are booleans, `017` is octal, `1:30` is
//! sexagesimal, `1e5` (no dot) stays a string, timestamps stay strings (Salt's loader keeps them
//! as text), duplicate keys are an error, `<<` merge keys are honoured. The result is JSON data:
//! non-string keys become their JSON spelling (`1` → `"1"`), as Python's `json.dumps` would.
//!
//! Parsing is yaml-rust2's event parser; this module only builds values and resolves scalars.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

/// Upper bound on the nodes a document may expand to through aliases ("billion laughs").
const MAX_NODES: usize = 1_000_000;

/// Upper bound on nesting, aliases included (the same as serde_json's for JSON bodies): deeper
/// data would overflow the stack of whatever walks it next, dropping it included.
pub(crate) const MAX_DEPTH: usize = 128;

/// The handle yaml-rust2 gives `!!` tags.
const YAML_ORG: &str = "tag:yaml.org,2002:";

static INT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
    )
    .expect("static regex")
});

static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    )
    .expect("static regex")
});

/// Load one YAML document. An empty stream is `null`; several documents are an error.
pub fn load(text: &str) -> Result<Value, String> {
    let mut parser = Parser::new_from_str(text);
    let mut builder = Builder::default();
    let mut documents = 0;
    loop {
        let (event, mark) = parser.next_token().map_err(|e| e.to_string())?;
        let at = |msg: &str| format!("{msg} at line {} column {}", mark.line(), mark.col() + 1);
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err(at("expected a single document in the stream"));
                }
            }
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == TScalarStyle::Plain && tag.is_none();
                let merge = plain && text == "<<";
                let value = if merge {
                    Value::Null
                } else if plain && text == "=" && builder.key_position() {
                    // Salt's loader turns the YAML 1.1 `=` (value) key into a string.
                    Value::String(text)
                } else {
                    scalar(text, style, tag.as_ref()).map_err(|e| at(&e))?
                };
                builder.count(1)?;
                builder
                    .node(value, 1, 0, anchor, merge)
                    .map_err(|e| at(&e))?;
            }
            Event::SequenceStart(anchor, tag) => {
                collection_tag(tag.as_ref(), "seq").map_err(|e| at(&e))?;
                builder
                    .open(Frame::Seq {
                        items: Vec::new(),
                        anchor,
                        nodes: 1,
                        height: 1,
                    })
                    .map_err(|e| at(&e))?;
            }
            Event::MappingStart(anchor, tag) => {
                collection_tag(tag.as_ref(), "map").map_err(|e| at(&e))?;
                let frame = Frame::Map {
                    map: Map::new(),
                    anchor,
                    nodes: 1,
                    key: None,
                    merges: Vec::new(),
                    height: 1,
                };
                builder.open(frame).map_err(|e| at(&e))?;
            }
            Event::SequenceEnd | Event::MappingEnd => builder.close().map_err(|e| at(&e))?,
            Event::Alias(id) => {
                let (nodes, height) = builder
                    .anchors
                    .get(&id)
                    .map(|a| (a.nodes, a.height))
                    .ok_or_else(|| at("unknown alias"))?;
                builder.count(nodes)?;
                builder.check_depth(height).map_err(|e| at(&e))?;
                let value = builder
                    .anchors
                    .get(&id)
                    .map(|a| a.value.clone())
                    .unwrap_or_default();
                builder
                    .node(value, nodes, height, 0, false)
                    .map_err(|e| at(&e))?;
            }
        }
    }
    Ok(builder.root.unwrap_or(Value::Null))
}

/// A mapping key: a normal key, or the `<<` merge key.
enum Key {
    Plain(String),
    Merge,
}

/// A collection being built; `height` is its nesting so far (1 for an empty collection).
enum Frame {
    Seq {
        items: Vec<Value>,
        anchor: usize,
        nodes: usize,
        height: usize,
    },
    Map {
        map: Map<String, Value>,
        anchor: usize,
        nodes: usize,
        key: Option<Key>,
        merges: Vec<Value>,
        height: usize,
    },
}

/// An anchored node: its value, how many nodes it counts for and how deep it nests.
struct Anchored {
    value: Value,
    nodes: usize,
    height: usize,
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    root: Option<Value>,
    total: usize,
}

impl Builder {
    fn count(&mut self, nodes: usize) -> Result<(), String> {
        self.total = self.total.saturating_add(nodes);
        if self.total > MAX_NODES {
            return Err(format!("document expands to more than {MAX_NODES} nodes"));
        }
        Ok(())
    }

    /// Whether the next node is a mapping key.
    fn key_position(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    /// A node of nesting `height` may be attached where the builder stands.
    fn check_depth(&self, height: usize) -> Result<(), String> {
        if self.stack.len().saturating_add(height) > MAX_DEPTH {
            return Err(format!("document nests deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn open(&mut self, frame: Frame) -> Result<(), String> {
        self.count(1)?;
        self.check_depth(1)?;
        self.stack.push(frame);
        Ok(())
    }

    fn close(&mut self) -> Result<(), String> {
        let (value, nodes, height, anchor) = match self.stack.pop() {
            Some(Frame::Seq {
                items,
                anchor,
                nodes,
                height,
            }) => (Value::Array(items), nodes, height, anchor),
            Some(Frame::Map {
                mut map,
                anchor,
                nodes,
                key,
                merges,
                height,
            }) => {
                if key.is_some() {
                    return Err("mapping ended without a value".into());
                }
                if !merges.is_empty() {
                    map = merge_into(map, merges)?;
                }
                (Value::Object(map), nodes, height, anchor)
            }
            None => return Err("unbalanced collection end".into()),
        };
        self.node(value, nodes, height, anchor, false)
    }

    /// Attach a finished node of `nodes` nodes and nesting `height` (0 for a scalar) to its
    /// parent (or make it the document). Callers have counted it and checked its depth:
    /// scalars and aliases before the call, collections when opened.
    fn node(
        &mut self,
        value: Value,
        nodes: usize,
        height: usize,
        anchor: usize,
        merge: bool,
    ) -> Result<(), String> {
        if merge && !self.key_position() {
            return Err("could not construct a value from '<<' outside a mapping key".into());
        }
        if anchor != 0 {
            let anchored = Anchored {
                value: value.clone(),
                nodes,
                height,
            };
            self.anchors.insert(anchor, anchored);
        }
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq {
                items,
                nodes: total,
                height: own,
                ..
            }) => {
                items.push(value);
                *total += nodes;
                *own = (*own).max(height + 1);
            }
            Some(Frame::Map {
                map,
                nodes: total,
                key,
                merges,
                height: own,
                ..
            }) => {
                *total += nodes;
                *own = (*own).max(height + 1);
                match key.take() {
                    None if merge => *key = Some(Key::Merge),
                    None => *key = Some(Key::Plain(key_text(&value)?)),
                    Some(Key::Merge) => merges.push(value),
                    Some(Key::Plain(name)) => {
                        if map.contains_key(&name) {
                            return Err(format!("found conflicting key {name:?}"));
                        }
                        map.insert(name, value);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Salt's `flatten_mapping`: the merged entries go first, minus keys the mapping sets itself;
/// `<<: [a, b]` takes b's entries then a's; a key merged twice is a conflict (Salt's loader
/// refuses duplicate keys after flattening).
fn merge_into(own: Map<String, Value>, merges: Vec<Value>) -> Result<Map<String, Value>, String> {
    let mut merged = Map::new();
    for source in merges {
        let sources = match source {
            Value::Array(items) => items.into_iter().rev().collect(),
            other => vec![other],
        };
        for source in sources {
            let Value::Object(entries) = source else {
                return Err("expected a mapping or list of mappings for merging".into());
            };
            for (name, value) in entries
                .into_iter()
                .filter(|(name, _)| !own.contains_key(name))
            {
                if merged.contains_key(&name) {
                    return Err(format!("found conflicting key {name:?}"));
                }
                merged.insert(name, value);
            }
        }
    }
    merged.extend(own);
    Ok(merged)
}

/// A key as Python's `json.dumps` would write it; collections cannot be keys.
fn key_text(value: &Value) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Null => Ok("null".into()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Array(_) | Value::Object(_) => Err("found unacceptable (unhashable) key".into()),
    }
}

fn collection_tag(tag: Option<&Tag>, expected: &str) -> Result<(), String> {
    match tag {
        None => Ok(()),
        Some(tag) if tag.handle == YAML_ORG && tag.suffix == expected => Ok(()),
        Some(tag) if tag.handle.is_empty() && tag.suffix == "!" => Ok(()),
        Some(tag) => Err(format!(
            "could not determine a constructor for the tag '{}{}'",
            tag.handle, tag.suffix
        )),
    }
}

/// Resolve a scalar: explicit `!!` tags, then PyYAML's implicit resolvers for plain scalars.
fn scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let kind = match tag {
        None if style == TScalarStyle::Plain => implicit(&text),
        None => Kind::Str,
        // The non-specific `!` tag forces a string.
        Some(tag) if tag.handle.is_empty() && tag.suffix == "!" => Kind::Str,
        Some(tag) if tag.handle == YAML_ORG => match tag.suffix.as_str() {
            "str" | "timestamp" => Kind::Str,
            "null" => Kind::Null,
            "bool" => Kind::Bool,
            "int" => Kind::Int,
            "float" => Kind::Float,
            other => {
                return Err(format!(
                    "could not determine a constructor for the tag '!!{other}'"
                ))
            }
        },
        Some(tag) => {
            return Err(format!(
                "could not determine a constructor for the tag '{}{}'",
                tag.handle, tag.suffix
            ))
        }
    };
    match kind {
        Kind::Str => Ok(Value::String(text)),
        Kind::Null => Ok(Value::Null),
        Kind::Bool => match text.to_ascii_lowercase().as_str() {
            "yes" | "true" | "on" => Ok(Value::Bool(true)),
            "no" | "false" | "off" => Ok(Value::Bool(false)),
            _ => Err(format!("invalid boolean {text:?}")),
        },
        Kind::Int => int(&text),
        Kind::Float => float(&text),
        Kind::Unsupported => Err(format!("could not construct a value from {text:?}")),
    }
}

enum Kind {
    Str,
    Null,
    Bool,
    Int,
    Float,
    /// PyYAML's `=` (value) and a stray `<<` (merge): SafeLoader cannot construct them.
    Unsupported,
}

/// PyYAML's implicit resolvers (YAML 1.1), minus timestamps (Salt keeps them as strings).
fn implicit(text: &str) -> Kind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => Kind::Null,
        "yes" | "Yes" | "YES" | "no" | "No" | "NO" | "true" | "True" | "TRUE" | "false"
        | "False" | "FALSE" | "on" | "On" | "ON" | "off" | "Off" | "OFF" => Kind::Bool,
        "=" | "<<" => Kind::Unsupported,
        _ if INT.is_match(text) => Kind::Int,
        _ if FLOAT.is_match(text) => Kind::Float,
        _ => Kind::Str,
    }
}

/// PyYAML's `construct_yaml_int` (underscores ignored, `0b`, `0x`, leading-zero octal, base 60)
/// after Salt's leading-zero stripping.
fn int(text: &str) -> Result<Value, String> {
    let cleaned = text.replace('_', "");
    let (negative, digits) = match cleaned.as_bytes().first() {
        Some(b'-') => (true, &cleaned[1..]),
        Some(b'+') => (false, &cleaned[1..]),
        _ => (false, cleaned.as_str()),
    };
    let invalid = || format!("invalid integer {text:?}");
    // Salt's loader strips the leading zeros of an unsigned `0..` integer, so `010` is ten (a
    // signed `-010` still reaches PyYAML's octal rule).
    let stripped;
    let digits = if !negative && cleaned_unsigned_octal(text) {
        stripped = digits.trim_start_matches('0');
        if stripped.is_empty() {
            "0"
        } else {
            stripped
        }
    } else {
        digits
    };
    let magnitude: i128 = if digits == "0" {
        0
    } else if let Some(bin) = digits.strip_prefix("0b") {
        i128::from_str_radix(bin, 2).map_err(|_| invalid())?
    } else if let Some(hex) = digits.strip_prefix("0x") {
        i128::from_str_radix(hex, 16).map_err(|_| invalid())?
    } else if digits.contains(':') {
        let mut total: i128 = 0;
        for part in digits.split(':') {
            let part: i128 = part.parse().map_err(|_| invalid())?;
            total = total
                .checked_mul(60)
                .and_then(|t| t.checked_add(part))
                .ok_or_else(invalid)?;
        }
        total
    } else if digits.starts_with('0') {
        i128::from_str_radix(digits, 8).map_err(|_| invalid())?
    } else {
        digits.parse().map_err(|_| invalid())?
    };
    let value = if negative { -magnitude } else { magnitude };
    if let Ok(small) = i64::try_from(value) {
        Ok(Value::Number(small.into()))
    } else if let Ok(big) = u64::try_from(value) {
        Ok(Value::Number(big.into()))
    } else {
        Err(format!("integer {text:?} is out of range"))
    }
}

/// Salt's `construct_scalar` rule: the text as written starts with `0` but not `0b`/`0x`.
fn cleaned_unsigned_octal(text: &str) -> bool {
    text != "0" && text.starts_with('0') && !text.starts_with("0b") && !text.starts_with("0x")
}

/// PyYAML's `construct_yaml_float`; infinities and NaN have no JSON form and are refused.
fn float(text: &str) -> Result<Value, String> {
    let cleaned = text.replace('_', "").to_ascii_lowercase();
    let (negative, digits) = match cleaned.as_bytes().first() {
        Some(b'-') => (true, &cleaned[1..]),
        Some(b'+') => (false, &cleaned[1..]),
        _ => (false, cleaned.as_str()),
    };
    let invalid = || format!("invalid float {text:?}");
    let magnitude: f64 = if digits.contains(':') {
        let mut total = 0.0;
        for part in digits.split(':') {
            total = total * 60.0 + part.parse::<f64>().map_err(|_| invalid())?;
        }
        total
    } else {
        digits.parse().map_err(|_| invalid())?
    };
    let value = if negative { -magnitude } else { magnitude };
    Number::from_f64(value)
        .map(Value::Number)
        .ok_or_else(|| format!("{text:?} has no JSON representation"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(text: &str) -> Value {
        load(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    #[test]
    fn plain_scalars_resolve_as_yaml_1_1() {
        let cases = [
            ("yes", json!(true)),
            ("No", json!(false)),
            ("ON", json!(true)),
            ("off", json!(false)),
            ("y", json!("y")),
            ("~", json!(null)),
            ("", json!(null)),
            ("null", json!(null)),
            ("42", json!(42)),
            ("-17", json!(-17)),
            ("+5", json!(5)),
            ("017", json!(17)),
            ("-017", json!(-15)),
            ("0_7", json!(7)),
            ("0b101", json!(5)),
            ("0x1F", json!(31)),
            ("1_000", json!(1000)),
            ("1:30", json!(90)),
            ("-1:00:00", json!(-3600)),
            ("3.5", json!(3.5)),
            ("1.", json!(1.0)),
            (".5", json!(0.5)),
            ("1.5e+3", json!(1500.0)),
            ("1:30.5", json!(90.5)),
            ("1e5", json!("1e5")),
            ("2024-01-02", json!("2024-01-02")),
            ("0o17", json!("0o17")),
            ("hello world", json!("hello world")),
            ("18446744073709551615", json!(18446744073709551615u64)),
        ];
        for (text, expected) in cases {
            assert_eq!(ok(text), expected, "{text:?}");
        }
    }

    #[test]
    fn quoted_and_tagged_scalars() {
        assert_eq!(ok("'yes'"), json!("yes"));
        assert_eq!(ok("\"42\""), json!("42"));
        assert_eq!(ok("!!str 42"), json!("42"));
        assert_eq!(ok("! yes"), json!("yes"));
        assert_eq!(ok("!!int '12'"), json!(12));
        assert_eq!(ok("!!bool 'on'"), json!(true));
        assert!(load("!!python/object:os.system x").is_err());
        assert!(load("!custom x").is_err());
        assert!(load("!!binary aGk=").is_err());
    }

    #[test]
    fn collections_anchors_and_merges() {
        let text = "base: &b {x: 1, y: 2}\nlist: [a, 1, yes, ~]\nmerged:\n  <<: *b\n  y: 3\n1: one\ntrue: t\n";
        assert_eq!(
            ok(text),
            json!({"base": {"x": 1, "y": 2}, "list": ["a", 1, true, null], "merged": {"x": 1, "y": 3},
                   "1": "one", "true": "t"})
        );
        assert_eq!(
            ok("- client: local\n  arg: [1]\n"),
            json!([{"client": "local", "arg": [1]}])
        );
        assert_eq!(ok("'<<': 1"), json!({"<<": 1}));
        assert_eq!(ok("{=: 1}"), json!({"=": 1}));
        let text = "a: &a {k: 1, m: 1}\nb: &b {k: 2, n: 2}\nc: {<<: [*a, *b], m: 0}\n";
        assert!(load(text).is_err(), "k is merged twice");
        let text = "a: &a {k: 1}\nb: &b {n: 2}\nc: {<<: [*a, *b], m: 0}\n";
        assert_eq!(ok(text)["c"], json!({"n": 2, "k": 1, "m": 0}));
    }

    #[test]
    fn errors() {
        for text in [
            "a: 1\na: 2",
            "[a, b",
            "{a: 1",
            "*nowhere",
            "--- 1\n--- 2",
            "? [1, 2]\n: x",
            "a: .inf",
            "99999999999999999999999",
            "=",
            "x: <<",
            "<<: 5",
            "<<",
            "[<<]",
        ] {
            assert!(load(text).is_err(), "{text:?} should fail");
        }
    }

    #[test]
    fn alias_expansion_is_bounded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let prev = format!("*a{}", i - 1);
            text.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
        }
        let error = load(&text).expect_err("expansion must be refused");
        assert!(error.contains("more than"), "{error}");
    }

    #[test]
    fn nesting_is_bounded_in_block_flow_and_alias_form() {
        // 50,000 nested block sequences (`- - - ...`) and flow sequences.
        let error = load(&"- ".repeat(50_000)).expect_err("too deep");
        assert!(error.contains("deeper than 128"), "{error}");
        let error = load(&"[".repeat(50_000)).expect_err("too deep");
        assert!(
            error.contains("deeper than 128") || error.contains("recursion limit"),
            "{error}"
        );
        // Exactly the limit loads, one more level does not.
        let at_limit = format!("{}x", "- ".repeat(MAX_DEPTH));
        assert_eq!(
            load(&at_limit).unwrap().pointer(&"/0".repeat(MAX_DEPTH)),
            Some(&Value::from("x"))
        );
        assert!(load(&format!("- {at_limit}")).is_err());
        // Aliases of deep anchors nested in each other grow deeper than any one collection.
        let mut text = format!("a0: &a0 {}x{}\n", "[".repeat(100), "]".repeat(100));
        for i in 1..200 {
            text.push_str(&format!(
                "a{i}: &a{i} {}*a{}{}\n",
                "[".repeat(100),
                i - 1,
                "]".repeat(100)
            ));
        }
        let error = load(&text).expect_err("too deep through aliases");
        assert!(error.contains("deeper than 128"), "{error}");
    }
}
