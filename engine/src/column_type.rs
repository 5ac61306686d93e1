//! [`ColumnType`]: a column's type, its code in the catalog and its name.
//! Its own module, below both `value` (the row codec) and `error` (a type
//! mismatch names the type it expected), so those two do not import each
//! other. What needs `Value` (`accepts`, `min_width`) is in `value`.

/// A column's type.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash)]
pub enum ColumnType {
    /// A signed 64-bit integer.
    I64,
    /// A byte string (up to what fits on a page).
    Bytes,
    /// A 64-bit IEEE float, ordered as documented on the module.
    F64,
    /// A UTF-8 string (up to what fits on a page), ordered by its bytes.
    Text,
    /// `true` or `false` (`false` sorts first).
    Bool,
    /// Microseconds since the Unix epoch (1970-01-01 00:00:00 UTC), as an
    /// `i64`; negative values are before the epoch.
    Timestamp,
}

impl ColumnType {
    /// Every type, in type-code order.
    pub const ALL: [ColumnType; 6] = [
        ColumnType::I64,
        ColumnType::Bytes,
        ColumnType::F64,
        ColumnType::Text,
        ColumnType::Bool,
        ColumnType::Timestamp,
    ];

    /// The type code stored in the catalog (`I64` 1 and `Bytes` 2 are the
    /// codes of format-2 data directories; the others are new codes).
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            ColumnType::I64 => 1,
            ColumnType::Bytes => 2,
            ColumnType::F64 => 3,
            ColumnType::Text => 4,
            ColumnType::Bool => 5,
            ColumnType::Timestamp => 6,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Option<ColumnType> {
        ColumnType::ALL.into_iter().find(|t| t.to_u8() == v)
    }

    /// The type's name, as errors print it.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::I64 => "i64",
            ColumnType::Bytes => "bytes",
            ColumnType::F64 => "f64",
            ColumnType::Text => "text",
            ColumnType::Bool => "bool",
            ColumnType::Timestamp => "timestamp",
        }
    }

    /// Bytes a non-NULL value takes in a row if the type has a fixed width
    /// (`None` for `Bytes` and `Text`, which carry a length).
    pub(crate) fn fixed_width(self) -> Option<usize> {
        match self {
            ColumnType::I64 | ColumnType::F64 | ColumnType::Timestamp => Some(8),
            ColumnType::Bool => Some(1),
            ColumnType::Bytes | ColumnType::Text => None,
        }
    }
}

impl std::fmt::Display for ColumnType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
