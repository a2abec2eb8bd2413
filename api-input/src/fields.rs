//! Numeric fields of a lowstate chunk (`timeout`, `gather_job_timeout`, `batch_wait`,
//! `subset`...), checked into range before anything multiplies or sleeps with them.

use serde_json::{Map, Value};

use crate::InputError;

/// The longest wait a client may ask for (`timeout`, `gather_job_timeout`): one year.
pub const MAX_SECONDS: u64 = 365 * 24 * 3600;

/// A whole number of seconds (or a count such as `subset`) from a lowstate field: absent or
/// null is `None`; a number or a numeric string within `0..=max` is rounded up; anything else
/// (negative, NaN, infinite, too large, not a number) is a 400 naming the field.
pub fn bounded(low: &Map<String, Value>, k: &str, max: u64) -> Result<Option<u64>, InputError> {
    let value = match low.get(k) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    };
    match value {
        Some(f) if f.is_finite() && (0.0..=max as f64).contains(&f) => Ok(Some(f.ceil() as u64)),
        _ => Err(InputError::bad_request(format!(
            "'{k}' must be a number from 0 to {max}"
        ))),
    }
}
