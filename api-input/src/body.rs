//! Request bodies as rest_cherrypy reads them (salt-api.md §3): the Content-Type picks the
//! parser (JSON, YAML, form, text/plain); form `arg`/`kwarg` values are YAML-ified like Salt's
//! CLI arguments; the result is normalised into a list of lowstate chunks.

use brine_protocol::yaml::load as yaml;

use serde_json::{Map, Value};

use crate::InputError;

/// One lowstate chunk: `{"client": ..., "tgt": ..., "fun": ..., "arg": [...], ...}`.
pub type Lowstate = Map<String, Value>;

/// The request's media type, lower-cased, without parameters (`; charset=...`).
fn media_type(content_type: Option<&str>) -> Option<String> {
    let media = content_type?.split(';').next()?.trim().to_ascii_lowercase();
    (!media.is_empty()).then_some(media)
}

/// Parse a request body according to its Content-Type:
/// * `application/json`: JSON, malformed → 400 "Invalid JSON document";
/// * `application/x-yaml`, `text/yaml`: YAML 1.1 as Salt loads it, malformed → 400 "Invalid YAML
///   document" (Salt answers 500 there);
/// * `application/x-www-form-urlencoded`: an object; repeated keys become lists, blank values are
///   dropped (Python's `parse_qsl`), `arg` values and `kwarg` are YAML-ified ([`yamlify_arg`]) and
///   `arg` is always a list;
/// * `text/plain`: JSON if it parses, else the text as a string;
/// * no Content-Type: JSON (400 if it is not JSON);
/// * anything else: 406 "Content type not supported".
///
/// An empty body is `Value::Null` whatever the Content-Type (Salt skips parsing for `Content-Length: 0`).
pub fn parse_body(content_type: Option<&str>, body: &[u8]) -> Result<Value, InputError> {
    if body.is_empty() {
        return Ok(Value::Null);
    }
    match media_type(content_type).as_deref() {
        None | Some("application/json") => {
            serde_json::from_slice(body).map_err(|_| InputError::invalid_json())
        }
        Some("application/x-yaml" | "text/yaml") => parse_yaml(body),
        Some("application/x-www-form-urlencoded") => Ok(yamlify_form(parse_form(body))),
        Some("text/plain") => Ok(serde_json::from_slice(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))),
        Some(_) => Err(InputError::unsupported_content_type()),
    }
}

fn parse_yaml(body: &[u8]) -> Result<Value, InputError> {
    let text = std::str::from_utf8(body).map_err(|_| InputError::invalid_yaml())?;
    yaml::load(text).map_err(|reason| {
        let mut error = InputError::invalid_yaml();
        error.message = format!("{}: {reason}", error.message);
        error
    })
}

/// `application/x-www-form-urlencoded` as CherryPy + Salt read it: pairs in order, blank values
/// dropped, a key seen once is a string, a key seen several times a list of strings.
fn parse_form(body: &[u8]) -> Map<String, Value> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(body).unwrap_or_default();
    let mut form = Map::new();
    for (key, value) in pairs.into_iter().filter(|(_, value)| !value.is_empty()) {
        match form.get_mut(&key) {
            None => {
                form.insert(key, Value::String(value));
            }
            Some(Value::Array(values)) => values.push(Value::String(value)),
            Some(first) => {
                let first = first.take();
                form.insert(key, Value::Array(vec![first, Value::String(value)]));
            }
        }
    }
    form
}

/// Salt's `urlencoded_processor` post-processing: `kwarg` YAML-ified, each `arg` YAML-ified and
/// `arg` made a list.
fn yamlify_form(mut form: Map<String, Value>) -> Value {
    if let Some(kwarg) = form.get_mut("kwarg") {
        *kwarg = yamlify_arg(kwarg.take());
    }
    if let Some(arg) = form.get_mut("arg") {
        *arg = match arg.take() {
            Value::Array(items) => Value::Array(items.into_iter().map(yamlify_arg).collect()),
            single => Value::Array(vec![yamlify_arg(single)]),
        };
    }
    Value::Object(form)
}

/// Salt's `salt.utils.args.yamlify_arg`: turn a command-line style string into data with YAML 1.1
/// (`"2"` → 2, `"yes"` → true, `"[1, 2]"` → list, `"{x: 1}"` → dict), keeping the string when
/// YAML would lose or mangle it: blank strings and document markers, digits with underscores,
/// strings with tabs or newlines, dicts not written with `{`, lists not written with `[`, comments
/// that would swallow the text, and anything YAML cannot load. `"None"` is null. Non-strings pass
/// through unchanged.
pub fn yamlify_arg(value: Value) -> Value {
    let Value::String(original) = value else {
        return value;
    };
    let trimmed = original.trim();
    if matches!(trimmed, "" | "---" | "...")
        || (original.contains('_') && trimmed.chars().all(|c| c.is_ascii_digit() || c == '_'))
        || original.contains(['\t', '\r', '\n'])
    {
        return Value::String(original);
    }
    if original.contains('#') {
        return match yaml::load(&original) {
            Ok(Value::String(_) | Value::Null) | Err(_) => Value::String(original),
            Ok(parsed) => parsed,
        };
    }
    if original == "None" {
        return Value::Null;
    }
    match yaml::load(&original) {
        Ok(Value::Object(_)) if !original.starts_with('{') => Value::String(original),
        Ok(Value::Array(_)) if !original.starts_with('[') => Value::String(original),
        // PyYAML loads '|' as '' and '!' as '' or None: keep those characters.
        Ok(Value::String(parsed)) if parsed.is_empty() && (original == "|" || original == "!") => {
            Value::String(original)
        }
        Ok(Value::Null) if original == "!" => Value::String(original),
        Ok(parsed) => parsed,
        Err(_) => Value::String(original),
    }
}

/// Normalise a parsed body into lowstate chunks: an object is one chunk, a list is used as is
/// (every element must be an object), anything else (scalars, null, an empty object) → 400
/// "Lowstates must be a list", and so does a list of more than `max` chunks. In every chunk a non-list `arg` is wrapped in a list, and the
/// old `expr_form` key becomes `tgt_type` (when `tgt_type` is absent; otherwise it is dropped).
pub fn lowstates(body: Value, max: usize) -> Result<Vec<Lowstate>, InputError> {
    if let Value::Array(items) = &body {
        if items.len() > max {
            return Err(InputError::bad_request(format!(
                "{} lowstate chunks in one request; at most {max} are taken \
                 (brine_max_lowstate_chunks)",
                items.len()
            )));
        }
    }
    let chunks = match body {
        Value::Object(chunk) if !chunk.is_empty() => vec![chunk],
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::Object(chunk) => Ok(chunk),
                other => {
                    let mut error = InputError::lowstates_not_list();
                    error.message = format!(
                        "Lowstates must be a list of objects: element {index} is {}",
                        type_name(&other)
                    );
                    Err(error)
                }
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(InputError::lowstates_not_list()),
    };
    Ok(chunks.into_iter().map(normalise_chunk).collect())
}

fn normalise_chunk(mut chunk: Lowstate) -> Lowstate {
    if let Some(arg) = chunk.get_mut("arg") {
        if !arg.is_array() {
            *arg = Value::Array(vec![arg.take()]);
        }
    }
    if let Some(expr_form) = chunk.remove("expr_form") {
        if !chunk.contains_key("tgt_type") {
            chunk.insert("tgt_type".into(), expr_form);
        }
    }
    chunk
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The `post` field of a `/hook` event: the parsed body (JSON, YAML, or form with repeated keys
/// as lists and no YAML-ification); `{}` for an empty or falsy body (Salt: `if not data: data =
/// {}`). Never fails: a body that does not parse is kept as its text; callers that want Salt's
/// 400/406 answers run [`parse_body`] first.
pub fn hook_post(content_type: Option<&str>, body: &[u8]) -> Value {
    let parsed = match media_type(content_type).as_deref() {
        Some("application/x-www-form-urlencoded") => Ok(Value::Object(parse_form(body))),
        Some("application/x-yaml" | "text/yaml") => parse_yaml(body),
        _ => serde_json::from_slice(body).map_err(|_| InputError::invalid_json()),
    };
    let value =
        parsed.unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    if is_falsy(&value) {
        Value::Object(Map::new())
    } else {
        value
    }
}

/// Python truthiness of JSON data.
fn is_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FORM: Option<&str> = Some("application/x-www-form-urlencoded");

    fn parse(content_type: &str, body: &str) -> Value {
        parse_body(Some(content_type), body.as_bytes()).unwrap_or_else(|e| panic!("{body:?}: {e}"))
    }

    #[test]
    fn json_with_or_without_charset_and_without_content_type() {
        let expected = json!({"client": "local", "tgt": "*", "fun": "test.ping"});
        let body = r#"{"client": "local", "tgt": "*", "fun": "test.ping"}"#;
        assert_eq!(parse("application/json", body), expected);
        assert_eq!(parse("Application/JSON; charset=utf-8", body), expected);
        assert_eq!(
            parse_body(None, body.as_bytes()).expect("no content type"),
            expected
        );
    }

    #[test]
    fn malformed_json_is_400_invalid_json_document() {
        for content_type in [Some("application/json"), None] {
            let error = parse_body(content_type, b"{\"client\": ").expect_err("malformed");
            assert_eq!(error.status, 400);
            assert_eq!(error.message, "Invalid JSON document");
        }
    }

    #[test]
    fn yaml_in_both_media_types_with_yaml_1_1_booleans() {
        let body = "- client: local\n  tgt: '*'\n  fun: test.arg\n  arg: [1, yes, '2']\n  full_return: on\n";
        let expected = json!([{"client": "local", "tgt": "*", "fun": "test.arg", "arg": [1, true, "2"], "full_return": true}]);
        assert_eq!(parse("application/x-yaml", body), expected);
        assert_eq!(parse("text/yaml", body), expected);
        let error = parse_body(Some("application/x-yaml"), b"a: [1, 2").expect_err("malformed");
        assert_eq!(error.status, 400);
        assert_eq!(error.kind, "invalid_yaml");
        assert!(
            error.message.starts_with("Invalid YAML document"),
            "{}",
            error.message
        );
    }

    #[test]
    fn form_repeated_keys_become_lists_and_arg_kwarg_are_yamlified() {
        let body = "client=local&tgt=web*&fun=test.arg&arg=2&arg=%5B1%2C2%5D&arg=yes&arg=x%3D1\
                    &kwarg=%7B%22x%22%3A+1%7D&tgt_type=glob&extra=a&extra=b&blank=";
        assert_eq!(
            parse("application/x-www-form-urlencoded", body),
            json!({"client": "local", "tgt": "web*", "fun": "test.arg", "arg": [2, [1, 2], true, "x=1"],
                   "kwarg": {"x": 1}, "tgt_type": "glob", "extra": ["a", "b"]})
        );
        // A single arg is YAML-ified and wrapped; other keys stay strings.
        assert_eq!(
            parse(
                "application/x-www-form-urlencoded; charset=UTF-8",
                "fun=test.echo&arg=3.5&timeout=30"
            ),
            json!({"fun": "test.echo", "arg": [3.5], "timeout": "30"})
        );
    }

    #[test]
    fn text_plain_is_json_when_it_parses_else_a_string() {
        assert_eq!(
            parse("text/plain", r#"[{"client": "local"}]"#),
            json!([{"client": "local"}])
        );
        assert_eq!(
            parse("text/plain; charset=utf-8", "hello there"),
            json!("hello there")
        );
    }

    #[test]
    fn unsupported_content_types_are_406() {
        for content_type in [
            "application/xml",
            "multipart/form-data; boundary=x",
            "text/html",
        ] {
            let error = parse_body(Some(content_type), b"<x/>").expect_err(content_type);
            assert_eq!(error.status, 406);
            assert_eq!(error.message, "Content type not supported");
        }
    }

    #[test]
    fn empty_body_is_null_whatever_the_type() {
        for content_type in [None, Some("application/json"), Some("application/xml")] {
            assert_eq!(parse_body(content_type, b"").expect("empty"), Value::Null);
        }
    }

    #[test]
    fn yamlify_arg_follows_salt_rules() {
        let cases = [
            ("2", json!(2)),
            ("-7", json!(-7)),
            ("3.25", json!(3.25)),
            ("true", json!(true)),
            ("yes", json!(true)),
            ("off", json!(false)),
            ("None", json!(null)),
            ("null", json!(null)),
            ("~", json!(null)),
            ("[1, 2]", json!([1, 2])),
            ("{x: 1, y: [a]}", json!({"x": 1, "y": ["a"]})),
            ("'quoted'", json!("quoted")),
            ("010", json!(10)),
            // Kept as written:
            ("1_000", json!("1_000")),
            ("a: 1", json!("a: 1")),
            ("- a", json!("- a")),
            ("x=1", json!("x=1")),
            ("  ", json!("  ")),
            ("---", json!("---")),
            ("...", json!("...")),
            ("a\tb", json!("a\tb")),
            ("line\nbreak", json!("line\nbreak")),
            ("|", json!("|")),
            ("!", json!("!")),
            ("#", json!("#")),
            ("echo # not a comment", json!("echo # not a comment")),
            ("[1, 2] # list", json!([1, 2])),
            ("{a: 1", json!("{a: 1")),
            ("2024-01-02", json!("2024-01-02")),
            (".inf", json!(".inf")),
            ("=", json!("=")),
            ("*alias", json!("*alias")),
        ];
        for (text, expected) in cases {
            assert_eq!(yamlify_arg(json!(text)), expected, "{text:?}");
        }
        assert_eq!(yamlify_arg(json!(5)), json!(5));
        assert_eq!(yamlify_arg(json!(["2"])), json!(["2"]));
    }

    #[test]
    fn lowstates_from_object_list_and_invalid_shapes() {
        let one = lowstates(
            json!({"client": "local", "arg": "x", "expr_form": "list"}),
            8,
        )
        .expect("object");
        assert_eq!(
            one,
            vec![json!({"client": "local", "arg": ["x"], "tgt_type": "list"})
                .as_object()
                .cloned()
                .expect("map")]
        );

        let many = lowstates(json!([{"fun": "a", "arg": null}, {"fun": "b", "arg": [1], "tgt_type": "glob", "expr_form": "list"}]), 8)
            .expect("list");
        assert_eq!(
            Value::Array(many.into_iter().map(Value::Object).collect()),
            json!([{"fun": "a", "arg": [null]}, {"fun": "b", "arg": [1], "tgt_type": "glob"}])
        );

        assert_eq!(
            lowstates(json!([]), 8).expect("empty list"),
            Vec::<Lowstate>::new()
        );

        for bad in [json!(42), json!("s"), Value::Null, json!({}), json!(true)] {
            let error = lowstates(bad.clone(), 8).expect_err("scalar");
            assert_eq!(
                (error.status, error.message.as_str()),
                (400, "Lowstates must be a list"),
                "{bad}"
            );
        }
        let error = lowstates(json!([{"fun": "a"}, "oops"]), 8).expect_err("non-object element");
        let error_cap = lowstates(json!([{"fun": "a"}, {"fun": "b"}, {"fun": "c"}]), 2)
            .expect_err("over the cap");
        assert_eq!(error_cap.status, 400);
        assert!(error_cap
            .message
            .contains("3 lowstate chunks in one request; at most 2"));
        assert_eq!(error.status, 400);
        assert_eq!(
            error.message,
            "Lowstates must be a list of objects: element 1 is a string"
        );
    }

    #[test]
    fn hook_post_keeps_form_strings_and_defaults_to_empty_object() {
        assert_eq!(
            hook_post(FORM, b"a=1&a=2&b=3&arg=2"),
            json!({"a": ["1", "2"], "b": "3", "arg": "2"})
        );
        assert_eq!(
            hook_post(Some("application/json"), br#"{"x": [1]}"#),
            json!({"x": [1]})
        );
        assert_eq!(
            hook_post(Some("application/x-yaml"), b"x: yes"),
            json!({"x": true})
        );
        assert_eq!(hook_post(None, b""), json!({}));
        assert_eq!(hook_post(Some("application/json"), b"null"), json!({}));
        assert_eq!(hook_post(Some("application/json"), b"[]"), json!({}));
        assert_eq!(
            hook_post(Some("text/plain"), b"not json"),
            json!("not json")
        );
        assert_eq!(
            hook_post(Some("application/json"), b"{broken"),
            json!("{broken")
        );
    }
}
