//! Every typed accessor of a row read at once, for the tests that compare
//! each with a model ([`accessors!`](crate::accessors)).

use engine::{EngineError, Value};

/// What an accessor returned: its value (`None` for NULL), or the kind
/// of its error.
pub type Out = Result<Option<Value>, String>;

/// The kind of an accessor's error, as the tests compare it.
pub fn err(e: EngineError) -> String {
    match e {
        EngineError::WrongColumn { .. } => "WRONG".into(),
        EngineError::UnknownColumn { .. } => "UNKNOWN".into(),
        e => format!("OTHER {e:?}"),
    }
}

/// Every typed accessor of row `$r` (a `RowRef` or an `OwnedRow`) on
/// column `$c` (a `Col` or a name): (type, `_opt`, what it returned).
#[macro_export]
macro_rules! accessors {
    ($r:expr, $c:expr) => {{
        let r = $r;
        let c = $c;
        let v: Vec<(::engine::ColumnType, bool, $crate::common::accessors::Out)> = vec![
            (
                ::engine::ColumnType::I64,
                false,
                r.i64(c)
                    .map(|v| Some(::engine::Value::I64(v)))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::I64,
                true,
                r.i64_opt(c)
                    .map(|v| v.map(::engine::Value::I64))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::F64,
                false,
                r.f64(c)
                    .map(|v| Some(::engine::Value::F64(v)))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::F64,
                true,
                r.f64_opt(c)
                    .map(|v| v.map(::engine::Value::F64))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::Timestamp,
                false,
                r.timestamp(c)
                    .map(|v| Some(::engine::Value::Timestamp(v)))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::Timestamp,
                true,
                r.timestamp_opt(c)
                    .map(|v| v.map(::engine::Value::Timestamp))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::Bool,
                false,
                r.bool(c)
                    .map(|v| Some(::engine::Value::Bool(v)))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::Bool,
                true,
                r.bool_opt(c)
                    .map(|v| v.map(::engine::Value::Bool))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::Text,
                false,
                r.text(c)
                    .map(|v| Some(::engine::Value::Text(v.to_string())))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::Text,
                true,
                r.text_opt(c)
                    .map(|v| v.map(|s| ::engine::Value::Text(s.to_string())))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::Bytes,
                false,
                r.bytes(c)
                    .map(|v| Some(::engine::Value::Bytes(v.to_vec())))
                    .map_err($crate::common::accessors::err),
            ),
            (
                ::engine::ColumnType::Bytes,
                true,
                r.bytes_opt(c)
                    .map(|v| v.map(|b| ::engine::Value::Bytes(b.to_vec())))
                    .map_err($crate::common::accessors::err),
            ),
        ];
        v
    }};
}
