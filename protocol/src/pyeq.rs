//! Python's `==` between values as Salt holds them: numbers by value across `bool`, `int`
//! and `float` (`1 == 1.0 == True`), lists item by item, dicts by content whatever their
//! order, text and bytes never equal to each other. One implementation for the msgpack
//! values of the wire ([`py_eq`]) and the JSON values of states ([`py_eq_json`]).

use rmpv::Value;

#[derive(Clone, Copy)]
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn eq(self, other: Number) -> bool {
        match (self, other) {
            (Number::Int(x), Number::Int(y)) => x == y,
            // Python compares an int with a float by value; i128 -> f64 rounds only past 2^53.
            (x, y) => x.float() == y.float(),
        }
    }

    fn float(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

fn number(v: &Value) -> Option<Number> {
    match v {
        Value::Boolean(b) => Some(Number::Int(i128::from(*b))),
        Value::Integer(i) => i
            .as_i64()
            .map(i128::from)
            .or_else(|| i.as_u64().map(i128::from))
            .map(Number::Int),
        Value::F32(f) => Some(Number::Float(f64::from(*f))),
        Value::F64(f) => Some(Number::Float(*f)),
        _ => None,
    }
}

fn json_number(v: &serde_json::Value) -> Option<Number> {
    match v {
        serde_json::Value::Bool(b) => Some(Number::Int(i128::from(*b))),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .map(Number::Int)
            .or_else(|| n.as_f64().map(Number::Float)),
        _ => None,
    }
}

/// Python's `a == b` for msgpack values.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.iter().any(|(k2, v2)| py_eq(k, k2) && py_eq(v, v2)))
        }
        (Value::String(x), Value::String(y)) => x.as_bytes() == y.as_bytes(),
        (Value::Binary(x), Value::Binary(y)) => x == y,
        (Value::Nil, Value::Nil) => true,
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x.eq(y),
            _ => false,
        },
    }
}

/// Python's `a == b` for JSON values.
pub fn py_eq_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq_json(p, q))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| py_eq_json(v, w)))
        }
        (J::String(x), J::String(y)) => x == y,
        (J::Null, J::Null) => true,
        _ => match (json_number(a), json_number(b)) {
            (Some(x), Some(y)) => x.eq(y),
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::from_json;
    use serde_json::json;

    #[test]
    fn as_python_compares() {
        let cases = [
            (json!(1), json!(1.0), true),
            (json!(true), json!(1), true),
            (json!(false), json!(0.0), true),
            (json!("1"), json!(1), false),
            (json!(null), json!(false), false),
            (json!(u64::MAX), json!(u64::MAX), true),
            (
                json!(9007199254740993u64),
                json!(9007199254740992u64),
                false,
            ),
            (json!([1, {"a": 2}]), json!([1.0, {"a": 2.0}]), true),
            (json!([1, 2]), json!([2, 1]), false),
            (json!({"a": 1, "b": 2}), json!({"b": 2, "a": true}), true),
            (json!({"a": 1}), json!({"a": 1, "b": 2}), false),
        ];
        for (a, b, want) in cases {
            assert_eq!(py_eq_json(&a, &b), want, "{a} == {b}");
            assert_eq!(py_eq(&from_json(&a), &from_json(&b)), want, "{a} == {b}");
        }
        assert!(!py_eq(&Value::from("a"), &Value::Binary(b"a".to_vec())));
        assert!(py_eq(
            &Value::Map(vec![(Value::from(1), Value::from("x"))]),
            &Value::Map(vec![(Value::from(1.0), Value::from("x"))])
        ));
    }
}
