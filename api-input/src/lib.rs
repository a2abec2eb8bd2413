//! What salt-api reads from its clients, parsed and checked before anything acts on it:
//! request bodies ([`body`]), lowstate chunks and their numeric fields ([`fields`]), and
//! tokens ([`tokens`]). No server is in this crate: the fuzz targets build it alone.

pub mod body;
pub mod fields;
pub mod tokens;

/// Salt's message for a body that is not JSON.
pub const INVALID_JSON: &str = "Invalid JSON document";
/// Our message for a body that is not YAML (Salt answers 500 there).
pub const INVALID_YAML: &str = "Invalid YAML document";
/// Salt's message for a body that is not a lowstate object or list.
pub const LOWSTATES_NOT_LIST: &str = "Lowstates must be a list";
/// Salt's message for a request Content-Type it cannot parse.
pub const UNSUPPORTED_CONTENT_TYPE: &str = "Content type not supported";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    pub name: String,
    pub eauth: String,
    /// Group names, for `group%` ACL entries (only `pam` provides them).
    pub groups: Vec<String>,
}

/// Input refused: the HTTP status salt-api answers with (400 or 406), a snake_case kind for
/// machines and the message (Salt's text where Salt has one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InputError {
    pub status: u16,
    pub kind: &'static str,
    pub message: String,
}

impl InputError {
    fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        InputError {
            status,
            kind,
            message: message.into(),
        }
    }

    /// 400, kind `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "bad_request", message)
    }

    /// 400 "Invalid JSON document".
    pub fn invalid_json() -> Self {
        Self::new(400, "invalid_json", INVALID_JSON)
    }

    /// 400 "Invalid YAML document".
    pub fn invalid_yaml() -> Self {
        Self::new(400, "invalid_yaml", INVALID_YAML)
    }

    /// 400 "Lowstates must be a list".
    pub fn lowstates_not_list() -> Self {
        Self::new(400, "invalid_lowstate", LOWSTATES_NOT_LIST)
    }

    /// 406 "Content type not supported".
    pub fn unsupported_content_type() -> Self {
        Self::new(406, "unsupported_content_type", UNSUPPORTED_CONTENT_TYPE)
    }
}
