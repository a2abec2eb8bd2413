//! The API's error type. Every 4xx/5xx answer carries Salt's shape, `{"status": <code>, "return":
//! "<human message>"}` (what Salt clients look at), plus a machine-readable `"error"` object, and is
//! serialised in the negotiated format (JSON unless the client asked for YAML).
//!
//! Real rest_cherrypy answers most errors with an HTML page; we keep its status codes and message
//! texts but always answer with data (see `openapi.yaml`, schema `Error`).

use std::fmt;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::negotiate::{self, Format};

/// Salt's message for a missing, unknown or expired session.
pub const NO_PERMISSION: &str = "No permission -- see authorization schemes";
/// Salt's message for a failed `/login`.
pub const LOGIN_FAILED: &str = "Could not authenticate using provided credentials";
/// Salt's message for a `/run` chunk or `/keys` call without any credentials.
pub const NO_CREDENTIALS: &str = "No authentication credentials given";
/// Salt's message when the ACL refuses a published job.
pub const NOT_AUTHORIZED: &str = "Authorization error occurred.";
/// Salt's message when the master's socket is absent.
pub const MASTER_UNAVAILABLE: &str = "Salt Master is not available.";
/// Salt's message for any unexpected failure inside a handler.
pub const UNEXPECTED: &str = "An unexpected error occurred";
/// Salt's message when a return cannot be serialised.
pub const UNSERIALIZABLE: &str = "Could not serialize the return data from Salt.";

/// An error answer: HTTP status, a snake_case kind for machines and Salt's human message.
///
/// `IntoResponse` renders JSON and also stores a copy of the error in the response extensions, so
/// a layer that knows the negotiated format can re-render it with [`negotiate::rerender`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status of the answer (4xx or 5xx).
    pub status: StatusCode,
    /// Stable snake_case identifier of the failure (`bad_request`, `invalid_json`, ...).
    pub kind: &'static str,
    /// Human-readable message; Salt's own text where Salt has one.
    pub message: String,
    /// Seconds to wait before trying again (a `Retry-After` header), for 429 and 503.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with an explicit status and kind.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 429, kind `too_many_requests`, with a `Retry-After` of `seconds`.
    pub fn too_many(message: impl Into<String>, seconds: u64) -> Self {
        ApiError {
            retry_after: Some(seconds),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests", message)
        }
    }

    /// 408, kind `request_timeout`.
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", message)
    }

    /// 400, kind `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 401, kind `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 404, kind `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 405 "The method M is not allowed for 'P'.", kind `method_not_allowed`.
    pub fn method_not_allowed(method: &axum::http::Method, path: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("The method {method} is not allowed for '{path}'."),
        )
    }

    /// 406, kind `not_acceptable`.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_ACCEPTABLE, "not_acceptable", message)
    }

    /// 413, kind `payload_too_large`.
    pub fn payload_too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    /// 503, kind `unavailable`.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// 504, kind `timeout`.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GATEWAY_TIMEOUT, "timeout", message)
    }

    /// 500, kind `internal`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 401 "No permission -- see authorization schemes" (no valid session).
    pub fn no_permission() -> Self {
        Self::unauthorized(NO_PERMISSION)
    }

    /// 401 "Could not authenticate using provided credentials" (`/login`).
    pub fn login_failed() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_failed",
            LOGIN_FAILED,
        )
    }

    /// 401 "Authorization error occurred." (the ACL refuses a job on these minions).
    pub fn not_authorized() -> Self {
        Self::unauthorized(NOT_AUTHORIZED)
    }

    /// 401 "Authentication failure of type "<kind>" occurred for user <user>." (`eauth`
    /// credentials that do not authenticate, or a `token`/`eauth` caller the ACL refuses a
    /// runner or wheel function).
    pub fn auth_failure(kind: &str, user: &str) -> Self {
        Self::unauthorized(format!(
            "Authentication failure of type \"{kind}\" occurred for user {user}."
        ))
    }

    /// 401 "No authentication credentials given".
    pub fn no_credentials() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "no_credentials", NO_CREDENTIALS)
    }

    /// 400 "Invalid client specified: '<name>'" (`None` for a missing client, as Salt prints it).
    pub fn invalid_client(client: Option<&str>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_client",
            format!("Invalid client specified: '{}'", client.unwrap_or("None")),
        )
    }

    /// 400 "Client disabled: '<name>'. Add to 'netapi_enable_clients' master config option to enable."
    pub fn client_disabled(client: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "client_disabled",
            format!(
                "Client disabled: '{client}'. Add to 'netapi_enable_clients' master config option to enable."
            ),
        )
    }

    /// 400, kind `websocket_upgrade_required`: a plain request to a WebSocket endpoint.
    pub fn websocket_upgrade_required() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "websocket_upgrade_required",
            "This endpoint speaks WebSocket: send an Upgrade request",
        )
    }

    /// 503 "Salt Master is not available: <why>" (kind `unavailable`).
    pub fn master_unavailable(why: impl fmt::Display) -> Self {
        let salt = MASTER_UNAVAILABLE.trim_end_matches('.');
        Self::unavailable(format!("{salt}: {why}"))
    }

    /// 500 "An unexpected error occurred".
    pub fn unexpected() -> Self {
        Self::internal(UNEXPECTED)
    }

    /// The response body: Salt's `status`/`return` plus our `error` object.
    pub fn body(&self) -> Value {
        let code = self.status.as_u16();
        json!({
            "status": code,
            "return": self.message,
            "error": {"code": self.kind, "message": self.message, "status": code},
        })
    }

    /// Render in the given format. The response carries a copy of the error in its extensions.
    pub fn into_response_with(self, format: Format) -> Response {
        let mut response = negotiate::respond(format, self.status, &self.body());
        if let Some(s) = self.retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, s.into());
        }
        response.extensions_mut().insert(self);
        response
    }
}

/// Input refused before it reached a handler (bodies, lowstates, numeric fields).
impl From<brine_api_input::InputError> for ApiError {
    fn from(e: brine_api_input::InputError) -> Self {
        let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
        ApiError::new(status, e.kind, e.message)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.status.as_u16(),
            self.kind,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_response_with(Format::Json)
    }
}

/// What a local client's failure means to the caller: the master's refusals of the caller are
/// 401 (authentication) or 400 (anything else it refuses, such as a jid in use); a master that
/// does not answer is 503.
impl From<brine_client::ClientError> for ApiError {
    fn from(e: brine_client::ClientError) -> Self {
        use brine_client::ClientError;
        use brine_protocol::loads::PublishRefused;
        match e {
            ClientError::Unavailable(why) => Self::master_unavailable(why),
            ClientError::Undecodable(why) => {
                Self::unavailable(format!("undecodable answer from the master: {why}"))
            }
            ClientError::Refused(PublishRefused::Error { name, message }) => {
                if name == "SaltInvocationError" {
                    Self::bad_request(message)
                } else {
                    Self::unauthorized(message)
                }
            }
            ClientError::Refused(PublishRefused::NoJob(m)) => Self::bad_request(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::to_bytes;

    async fn body_text(response: Response) -> String {
        let bytes = to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    #[tokio::test]
    async fn error_renders_salt_shape_plus_error_object_as_json() {
        let response =
            ApiError::from(brine_api_input::InputError::lowstates_not_list()).into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(
            response.extensions().get::<ApiError>().map(|e| e.kind),
            Some("invalid_lowstate")
        );
        assert_eq!(
            body_text(response).await,
            r#"{"status": 400, "return": "Lowstates must be a list", "error": {"code": "invalid_lowstate", "message": "Lowstates must be a list", "status": 400}}"#
        );
    }

    #[tokio::test]
    async fn error_renders_as_yaml_when_asked() {
        let response = ApiError::no_permission().into_response_with(Format::Yaml);
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(response.headers()["content-type"], "application/x-yaml");
        let text = body_text(response).await;
        let value: Value = serde_yaml::from_str(&text).expect("yaml");
        assert_eq!(value["status"], 401);
        assert_eq!(value["return"], NO_PERMISSION);
        assert_eq!(value["error"]["code"], "unauthorized");
    }

    #[test]
    fn constructors_use_salt_messages_and_statuses() {
        let cases = [
            (ApiError::bad_request("x"), 400, "bad_request"),
            (ApiError::unauthorized("x"), 401, "unauthorized"),
            (ApiError::not_found("x"), 404, "not_found"),
            (ApiError::not_acceptable("x"), 406, "not_acceptable"),
            (ApiError::payload_too_large("x"), 413, "payload_too_large"),
            (ApiError::unavailable("x"), 503, "unavailable"),
            (ApiError::timeout("x"), 504, "timeout"),
            (ApiError::internal("x"), 500, "internal"),
        ];
        for (error, status, kind) in cases {
            assert_eq!((error.status.as_u16(), error.kind), (status, kind));
        }
        assert_eq!(
            ApiError::invalid_client(Some("x")).message,
            "Invalid client specified: 'x'"
        );
        assert_eq!(
            ApiError::invalid_client(None).message,
            "Invalid client specified: 'None'"
        );
        assert_eq!(
            ApiError::client_disabled("ssh").message,
            "Client disabled: 'ssh'. Add to 'netapi_enable_clients' master config option to enable."
        );
        assert_eq!(
            ApiError::auth_failure("token", "alice").message,
            "Authentication failure of type \"token\" occurred for user alice."
        );
        assert_eq!(
            ApiError::from(brine_api_input::InputError::unsupported_content_type()).status,
            StatusCode::NOT_ACCEPTABLE
        );
        assert_eq!(
            ApiError::unexpected().body()["return"],
            "An unexpected error occurred"
        );
        assert_eq!(
            ApiError::master_unavailable("timeout").to_string(),
            "503 (unavailable): Salt Master is not available: timeout"
        );
        assert_eq!(
            ApiError::method_not_allowed(&axum::http::Method::PUT, "/run").message,
            "The method PUT is not allowed for '/run'."
        );
    }
}
