//! Small helpers for reading Salt loads.

use brine_protocol::payload::Value;

/// An integer field, also accepting its decimal string form.
pub fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Integer(i) => i.as_i64(),
        Value::String(s) => s.as_str()?.trim().parse().ok(),
        _ => None,
    }
}

pub fn text(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => s.as_str(),
        _ => None,
    }
}

pub use brine_protocol::payload::bytes_of as bytes;
