//! Response content negotiation and serialisation, as rest_cherrypy does it: the `Accept` header
//! chooses between JSON (the default) and YAML; JSON is written the way Python's `json.dumps`
//! writes it (`", "` and `": "` separators, non-ASCII left as UTF-8, Python float spelling), YAML
//! in block style that YAML 1.1 readers (PyYAML) read back unchanged.

use std::io;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::clients::Returned;
use crate::error::{ApiError, UNSERIALIZABLE};

/// Content-Type of JSON answers (exactly this, no charset, like Salt).
pub const JSON: &str = "application/json";
/// Content-Type of YAML answers.
pub const YAML: &str = "application/x-yaml";

/// The two response formats salt-api emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/json`
    Json,
    /// `application/x-yaml`
    Yaml,
}

impl Format {
    /// The Content-Type this format is sent with.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => JSON,
            Format::Yaml => YAML,
        }
    }
}

/// One media range of an `Accept` header.
struct MediaRange<'a> {
    /// Media type without parameters, e.g. `application/json` or `*/*`.
    value: &'a str,
    /// The element as written (trimmed): CherryPy breaks ties between equal q-values on it.
    text: &'a str,
    q: f64,
}

/// Choose the response format from the `Accept` header as CherryPy's `accept()` does: ranges are
/// tried by descending q-value (ties: the element text compared in reverse order, CherryPy's
/// quirk, so `application/json, application/x-yaml` gives YAML); `*/*` and `application/*` give
/// JSON; q=0 ranges are skipped. No header or an empty one gives JSON. Nothing acceptable (e.g.
/// `text/yaml`, `text/plain`) → 406; a q-value that is not a number → 400, as CherryPy.
pub fn choose(accept: Option<&str>) -> Result<Format, ApiError> {
    let Some(header) = accept.filter(|h| !h.trim().is_empty()) else {
        return Ok(Format::Json);
    };
    for range in media_ranges(header)?.iter().filter(|r| r.q > 0.0) {
        let value = range.value.to_ascii_lowercase();
        match value.as_str() {
            "*/*" | "application/*" | JSON => return Ok(Format::Json),
            YAML => return Ok(Format::Yaml),
            _ => {}
        }
    }
    Err(ApiError::not_acceptable(format!(
        "Your client sent this Accept header: {header}. But this resource only emits these media \
         types: {JSON}, {YAML}."
    )))
}

/// rest_cherrypy's `html_override` test: does this request take `text/html` (CherryPy's
/// `accept("text/html")`: no `Accept` at all, `*/*`, `text/*` or `text/html` first among the
/// acceptable ranges), without its `Accept` being exactly `*/*`? Such a request gets the `app`
/// page.
pub fn wants_html(accept: Option<&str>) -> bool {
    let Some(header) = accept.filter(|h| !h.trim().is_empty()) else {
        return true;
    };
    if header == "*/*" {
        return false;
    }
    let Ok(ranges) = media_ranges(header) else {
        return false;
    };
    ranges.iter().filter(|r| r.q > 0.0).any(|r| {
        let value = r.value.to_ascii_lowercase();
        value == "*/*" || value == "text/*" || value == "text/html"
    })
}

/// The ranges of an `Accept` header, best first (by q-value, ties broken as CherryPy does).
fn media_ranges(header: &str) -> Result<Vec<MediaRange<'_>>, ApiError> {
    let mut ranges = Vec::new();
    for element in header.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let mut parts = element.split(';');
        let value = parts.next().unwrap_or_default().trim();
        let mut q = 1.0;
        for param in parts {
            let Some((name, raw)) = param.split_once('=') else {
                continue;
            };
            if name.trim().eq_ignore_ascii_case("q") {
                q = raw
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|q| q.is_finite())
                    .ok_or_else(|| {
                        ApiError::bad_request(format!("Malformed HTTP header: `{element}`"))
                    })?;
                break;
            }
        }
        ranges.push(MediaRange {
            value,
            text: element,
            q,
        });
    }
    ranges.sort_by(|a, b| b.q.total_cmp(&a.q).then_with(|| b.text.cmp(a.text)));
    Ok(ranges)
}

/// Serialise `body` in `format` with the given status and the exact Content-Type. A body that
/// cannot be serialised becomes Salt's 500 "Could not serialize the return data from Salt.".
pub fn respond(format: Format, status: StatusCode, body: &Value) -> Response {
    match serialize(format, body) {
        Ok(bytes) => typed(format, status, bytes),
        // Unreachable for a serde_json::Value written to memory; answer as Salt would anyway.
        Err(error) => (error.status, error.message).into_response(),
    }
}

/// `status` with `body`, already in `format`, and that format's exact Content-Type.
fn typed(format: Format, status: StatusCode, body: impl IntoResponse) -> Response {
    let content_type = HeaderValue::from_static(format.content_type());
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// `{"return": [...]}` in `format`: in JSON, each element written as it is held (a packed
/// runner return straight from its msgpack), in YAML from the decoded tree.
pub fn respond_returned(format: Format, status: StatusCode, rets: Vec<Returned>) -> Response {
    if format != Format::Json {
        let list = rets.into_iter().map(Returned::into_json).collect();
        return respond(
            format,
            status,
            &crate::extract::returned(Value::Array(list)),
        );
    }
    let style = python_style();
    // JSON text of packed data is a little longer than its msgpack: room for it at once.
    let packed: usize = rets
        .iter()
        .map(|r| match r {
            Returned::Packed(p) => p.bytes().len() + p.bytes().len() / 4,
            Returned::Json(_) => 0,
        })
        .sum();
    let mut out = String::with_capacity(64 + packed);
    out.push_str("{\"return\": [");
    for (i, ret) in rets.into_iter().enumerate() {
        if i > 0 {
            out.push_str(&style.item_separator);
        }
        match ret {
            Returned::Json(v) => brine_protocol::pyjson::dumps_into(&v, &style, &mut out),
            Returned::Packed(p) => {
                if brine_protocol::pyjson::dumps_packed(p.bytes(), &style, &mut out).is_err() {
                    brine_protocol::pyjson::dumps_into(&p.decode(), &style, &mut out);
                }
            }
        }
    }
    out.push_str("]}");
    typed(format, status, out)
}

/// Re-render an [`ApiError`] response (one made by `ApiError::into_response`) in `format`; any
/// other response is returned unchanged. For a layer that knows the negotiated format.
pub fn rerender(response: Response, format: Format) -> Response {
    match response.extensions().get::<ApiError>() {
        Some(error) if format != Format::Json => error.clone().into_response_with(format),
        _ => response,
    }
}

/// The bytes of `body` in `format`.
pub fn serialize(format: Format, body: &Value) -> Result<Vec<u8>, ApiError> {
    let failed = |_| ApiError::internal(UNSERIALIZABLE);
    match format {
        Format::Json => to_python_json(body).map_err(failed),
        // Salt's `salt.utils.yaml.safe_dump(default_flow_style=False)`: Brine's one emitter.
        Format::Yaml => Ok(brine_protocol::yaml::safe_dump(
            body,
            brine_protocol::yaml::Style::Block(2),
        )
        .into_bytes()),
    }
}

/// JSON as Python's `json.dumps(obj, ensure_ascii=False)` writes it.
pub fn to_python_json(body: &Value) -> io::Result<Vec<u8>> {
    Ok(brine_protocol::pyjson::dumps(body, &python_style()).into_bytes())
}

/// `json.dumps(obj, ensure_ascii=False)`'s style.
fn python_style() -> brine_protocol::pyjson::JsonStyle {
    brine_protocol::pyjson::JsonStyle::new(None, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;
    use serde_json::json;

    async fn body_text(response: Response) -> String {
        let bytes = to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    #[test]
    fn no_accept_or_wildcards_give_json() {
        for accept in [
            None,
            Some(""),
            Some("*/*"),
            Some("application/*"),
            Some("application/json"),
        ] {
            assert_eq!(
                choose(accept).expect("acceptable"),
                Format::Json,
                "{accept:?}"
            );
        }
        assert_eq!(
            choose(Some("application/x-yaml")).expect("yaml"),
            Format::Yaml
        );
        assert_eq!(
            choose(Some("Application/X-YAML")).expect("case"),
            Format::Yaml
        );
    }

    #[test]
    fn q_values_order_the_choice() {
        let yaml = "application/json;q=0.5, application/x-yaml";
        assert_eq!(choose(Some(yaml)).expect("yaml"), Format::Yaml);
        let json = "application/x-yaml;q=0.2, application/json;q=0.9";
        assert_eq!(choose(Some(json)).expect("json"), Format::Json);
        let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert_eq!(choose(Some(browser)).expect("browser"), Format::Json);
        let refused = "application/json;q=0, application/x-yaml;q=0.1";
        assert_eq!(choose(Some(refused)).expect("yaml"), Format::Yaml);
        // Equal q-values: CherryPy sorts the element texts in reverse, so YAML wins here.
        let tie = "application/json, application/x-yaml";
        assert_eq!(choose(Some(tie)).expect("tie"), Format::Yaml);
        let params = "application/json; charset=utf-8; q=0.7, application/x-yaml; q=0.6";
        assert_eq!(choose(Some(params)).expect("params"), Format::Json);
    }

    #[test]
    fn unacceptable_types_give_406_with_salt_message() {
        for accept in [
            "text/yaml",
            "text/plain",
            "text/html",
            "application/xml",
            "*/*;q=0",
        ] {
            let error = choose(Some(accept)).expect_err(accept);
            assert_eq!(error.status, StatusCode::NOT_ACCEPTABLE);
            assert_eq!(
                error.message,
                format!(
                    "Your client sent this Accept header: {accept}. But this resource only emits \
                     these media types: application/json, application/x-yaml."
                )
            );
        }
    }

    #[test]
    fn malformed_q_value_is_a_400() {
        let error = choose(Some("application/json;q=high")).expect_err("bad q");
        assert_eq!(error.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            error.message,
            "Malformed HTTP header: `application/json;q=high`"
        );
    }

    #[tokio::test]
    async fn json_uses_python_separators_and_exact_content_type() {
        let response = respond(
            Format::Json,
            StatusCode::OK,
            &json!({"return": [{"m1": true}]}),
        );
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(body_text(response).await, r#"{"return": [{"m1": true}]}"#);

        let nested = json!({"a": [1, "x", null, {}], "b": {"c": [], "d": "é\n\""}});
        let bytes = to_python_json(&nested).expect("json");
        assert_eq!(
            String::from_utf8(bytes).expect("utf-8"),
            r#"{"a": [1, "x", null, {}], "b": {"c": [], "d": "é\n\""}}"#
        );
    }

    #[test]
    fn floats_are_spelled_as_python_does() {
        let cases = [
            (1795386146.02, "1795386146.02"),
            (100.0, "100.0"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (-1.25e-7, "-1.25e-07"),
            (0.0, "0.0"),
        ];
        for (value, text) in cases {
            let bytes = to_python_json(&json!(value)).expect("json");
            assert_eq!(String::from_utf8_lossy(&bytes), text, "{value}");
        }
    }

    #[tokio::test]
    async fn yaml_is_block_style_with_its_content_type() {
        let body = json!({"return": [{"m1": true, "m2": [1, 2]}]});
        let response = respond(Format::Yaml, StatusCode::ACCEPTED, &body);
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        assert_eq!(response.headers()["content-type"], "application/x-yaml");
        assert_eq!(
            body_text(response).await,
            "return:\n- m1: true\n  m2:\n  - 1\n  - 2\n"
        );
        // What salt-api's `salt.utils.yaml.safe_dump(..., default_flow_style=False)` writes
        // (checked with Salt 3007.15): keys sorted, only what PyYAML would misread quoted.
        let body = json!({"return": [{"m2": [1, 2], "m1": true, "s": "y", "u": "é", "n": null,
                                      "d": "2024-01-01", "e": {}}]});
        let response = respond(Format::Yaml, StatusCode::OK, &body);
        assert_eq!(
            body_text(response).await,
            "return:\n- d: '2024-01-01'\n  e: {}\n  m1: true\n  m2:\n  - 1\n  - 2\n  n: null\n  s: y\n  u: é\n"
        );
    }

    #[tokio::test]
    async fn rerender_turns_error_responses_into_yaml_only() {
        let error = ApiError::from(brine_api_input::InputError::invalid_json()).into_response();
        let yaml = rerender(error, Format::Yaml);
        assert_eq!(yaml.headers()["content-type"], "application/x-yaml");
        assert!(body_text(yaml)
            .await
            .contains("return: Invalid JSON document"));

        let ok = respond(Format::Json, StatusCode::OK, &json!({"return": 1}));
        let unchanged = rerender(ok, Format::Yaml);
        assert_eq!(unchanged.headers()["content-type"], "application/json");
    }

    #[test]
    fn html_override_takes_what_cherrypy_accept_would_call_html() {
        let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8";
        assert!(wants_html(Some(browser)));
        assert!(wants_html(None));
        assert!(wants_html(Some("text/*")));
        assert!(wants_html(Some("application/json, */*;q=0.1")));
        assert!(!wants_html(Some("*/*")));
        assert!(!wants_html(Some("application/json")));
        assert!(!wants_html(Some("application/x-yaml, text/html;q=0")));
        assert!(!wants_html(Some("text/html;q=x")));
    }

    /// A runner's return passed on packed is written as its decoded tree would be, next to
    /// returns held as JSON; in YAML too; a field that cannot be written straight (a key twice)
    /// is decoded instead.
    #[tokio::test]
    async fn packed_returns_are_answered_as_their_trees_would_be() {
        use brine_protocol::payload::{dumps, Value as P};
        use std::sync::Arc;
        let data = P::Map(vec![
            (P::from("fun"), P::from("runner.jobs.list_jobs")),
            (
                P::from("return"),
                P::Map(vec![(
                    P::from("20261128110000000001"),
                    P::Map(vec![
                        (P::from("Function"), P::from("test.ping")),
                        (P::from("Arguments"), P::Array(vec![P::F64(0.5)])),
                        (P::from("Target"), P::from("caf\u{e9}")),
                    ]),
                )]),
            ),
            (P::from("success"), P::Boolean(true)),
        ]);
        let event = |data: &P| {
            let body = dumps(data);
            Arc::new(crate::link::BusEvent::packed(1, "salt/run/1/ret".into(), body, 0).unwrap())
        };
        let ev = event(&data);
        let tree = ev.data_owned()["return"].clone();
        for format in [Format::Json, Format::Yaml] {
            let rets = vec![
                Returned::Json(json!({"jid": "1"})),
                Returned::Packed(ev.packed_fields(["return"])[0].take().unwrap()),
            ];
            let want = respond(
                format,
                StatusCode::OK,
                &json!({"return": [{"jid": "1"}, tree]}),
            );
            let got = respond_returned(format, StatusCode::OK, rets);
            assert_eq!(got.headers()["content-type"], format.content_type());
            assert_eq!(body_text(got).await, body_text(want).await, "{format:?}");
        }
        let twice = P::Map(vec![(
            P::from("return"),
            P::Map(vec![(P::from("a"), P::from(1)), (P::from("a"), P::from(2))]),
        )]);
        let ev = event(&twice);
        let [ret] = ev.packed_fields(["return"]);
        let rets = vec![Returned::Packed(ret.unwrap())];
        let got = respond_returned(Format::Json, StatusCode::OK, rets);
        assert_eq!(body_text(got).await, r#"{"return": [{"a": 2}]}"#);
    }
}
