//! Typed values, rows, and their encoding into heap tuple bytes.
//!
//! A row is a `Vec<Value>` checked against its table's columns. On the page
//! it is the tuple's data part (the heap's 26-byte header comes before it):
//!
//! ```text
//!   0        2                 2 + ceil(n/8)
//!   +--------+-----------------+------------------------------------------+
//!   | u16 n  | null bitmap     | column values in order, nulls omitted:    |
//!   | (LE)   | bit i = col i   |   I64   -> 8 bytes LE                     |
//!   |        | is NULL         |   Bytes -> u32 LE length, then the bytes  |
//!   +--------+-----------------+------------------------------------------+
//! ```
//!
//! Invariants the decoder checks (bytes from disk are never trusted):
//! 1. the column count equals the table's;
//! 2. a null bit is set only for a nullable column; bits past `n` are zero;
//! 3. every length fits in the remaining bytes (checked arithmetic);
//! 4. nothing follows the last column.
//!
//! Any failure is [`EngineError::CorruptRow`] naming the table and row, never
//! a panic. Shortcut: no alignment, no varint lengths, no compression.

use crate::error::{EngineError, Result};

/// A column's type.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash)]
pub enum ColumnType {
    /// A signed 64-bit integer.
    I64,
    /// A byte string (up to what fits on a page).
    Bytes,
}

impl ColumnType {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            ColumnType::I64 => 1,
            ColumnType::Bytes => 2,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Option<ColumnType> {
        match v {
            1 => Some(ColumnType::I64),
            2 => Some(ColumnType::Bytes),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ColumnType::I64 => "i64",
            ColumnType::Bytes => "bytes",
        }
    }
}

impl std::fmt::Display for ColumnType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One column of a table.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
}

impl Column {
    /// A NOT NULL column.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: false,
        }
    }

    /// A column that accepts NULL.
    pub fn nullable(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: true,
        }
    }
}

/// A value of one column.
#[derive(Clone, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub enum Value {
    Null,
    I64(i64),
    Bytes(Vec<u8>),
}

impl Value {
    /// The type name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::I64(_) => "i64",
            Value::Bytes(_) => "bytes",
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I64(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(v) => Some(v),
            _ => None,
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::I64(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Bytes(v)
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Value {
        Value::Bytes(v.to_vec())
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Bytes(v.as_bytes().to_vec())
    }
}

/// A row: one value per column, in column order.
pub type Row = Vec<Value>;

/// Bytes of the column-count field.
const COUNT_LEN: usize = 2;
/// Bytes of a `Bytes` value's length prefix.
const LEN_PREFIX: usize = 4;
/// Bytes of an `I64` value.
const I64_LEN: usize = 8;

fn bitmap_len(ncols: usize) -> usize {
    ncols.div_ceil(8)
}

/// Check `row` against `columns` of table `table` and encode it.
pub fn encode_row(table: &str, columns: &[Column], row: &[Value]) -> Result<Vec<u8>> {
    if row.len() != columns.len() {
        return Err(EngineError::WrongColumnCount {
            table: table.to_string(),
            expected: columns.len(),
            got: row.len(),
        });
    }
    let mut len = COUNT_LEN + bitmap_len(columns.len());
    for (c, v) in columns.iter().zip(row) {
        match (c.ty, v) {
            (_, Value::Null) if c.nullable => {}
            (_, Value::Null) => {
                return Err(EngineError::NullNotAllowed {
                    table: table.to_string(),
                    column: c.name.clone(),
                });
            }
            (ColumnType::I64, Value::I64(_)) => len += I64_LEN,
            (ColumnType::Bytes, Value::Bytes(b)) => len += LEN_PREFIX + b.len(),
            (ty, v) => {
                return Err(EngineError::TypeMismatch {
                    table: table.to_string(),
                    column: c.name.clone(),
                    expected: ty,
                    got: v.type_name(),
                });
            }
        }
    }
    if len > heap::page::MAX_ROW_LEN {
        return Err(EngineError::RowTooLarge {
            table: table.to_string(),
            len,
            max: heap::page::MAX_ROW_LEN,
        });
    }
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(columns.len() as u16).to_le_bytes());
    let bm_start = out.len();
    out.resize(bm_start + bitmap_len(columns.len()), 0);
    for (i, v) in row.iter().enumerate() {
        match v {
            Value::Null => out[bm_start + i / 8] |= 1 << (i % 8),
            Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
            Value::Bytes(b) => {
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    debug_assert_eq!(out.len(), len);
    Ok(out)
}

/// Decode a row of `columns`; `bad(detail)` builds the error for bad bytes.
pub fn decode_row(
    columns: &[Column],
    bytes: &[u8],
    bad: impl Fn(String) -> EngineError,
) -> Result<Row> {
    let mut r = Reader { bytes, pos: 0 };
    let n = u16::from_le_bytes(
        r.take(COUNT_LEN)
            .ok_or_else(|| bad(r.short()))?
            .try_into()
            .expect("2"),
    ) as usize;
    if n != columns.len() {
        return Err(bad(format!(
            "{n} columns stored, the table has {}",
            columns.len()
        )));
    }
    let bitmap = r.take(bitmap_len(n)).ok_or_else(|| bad(r.short()))?;
    let mut row = Vec::with_capacity(n);
    for (i, c) in columns.iter().enumerate() {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            if !c.nullable {
                return Err(bad(format!("NULL stored in NOT NULL column {:?}", c.name)));
            }
            row.push(Value::Null);
            continue;
        }
        match c.ty {
            ColumnType::I64 => {
                let b = r.take(I64_LEN).ok_or_else(|| bad(r.short()))?;
                row.push(Value::I64(i64::from_le_bytes(b.try_into().expect("8"))));
            }
            ColumnType::Bytes => {
                let l = r.take(LEN_PREFIX).ok_or_else(|| bad(r.short()))?;
                let len = u32::from_le_bytes(l.try_into().expect("4")) as usize;
                let b = r.take(len).ok_or_else(|| bad(r.short()))?;
                row.push(Value::Bytes(b.to_vec()));
            }
        }
    }
    let unused_bits = (bitmap_len(n) * 8 - n) as u32;
    if unused_bits > 0 && n > 0 && bitmap[bitmap.len() - 1] >> (8 - unused_bits) != 0 {
        return Err(bad("null bits set past the last column".into()));
    }
    if r.pos != bytes.len() {
        return Err(bad(format!(
            "{} bytes after the last column",
            bytes.len() - r.pos
        )));
    }
    Ok(row)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn short(&self) -> String {
        format!(
            "row ends early at byte {} of {}",
            self.pos,
            self.bytes.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols() -> Vec<Column> {
        vec![
            Column::new("id", ColumnType::I64),
            Column::nullable("name", ColumnType::Bytes),
            Column::nullable("n", ColumnType::I64),
        ]
    }

    fn bad(d: String) -> EngineError {
        EngineError::CorruptCatalog { detail: d }
    }

    #[test]
    fn round_trip() {
        let row = vec![Value::I64(-5), Value::Bytes(b"abc".to_vec()), Value::Null];
        let b = encode_row("t", &cols(), &row).unwrap();
        assert_eq!(b.len(), 2 + 1 + 8 + 4 + 3);
        assert_eq!(decode_row(&cols(), &b, bad).unwrap(), row);
    }

    #[test]
    fn every_truncation_and_extension_is_an_error() {
        let row = vec![Value::I64(7), Value::Bytes(vec![1; 20]), Value::I64(9)];
        let b = encode_row("t", &cols(), &row).unwrap();
        for cut in 0..b.len() {
            assert!(decode_row(&cols(), &b[..cut], bad).is_err(), "cut {cut}");
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode_row(&cols(), &longer, bad).is_err());
        // A huge length prefix never panics.
        let mut huge = b.clone();
        huge[11..15].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_row(&cols(), &huge, bad).is_err());
        // A null bit for the NOT NULL column.
        let mut null = b;
        null[2] |= 1;
        assert!(decode_row(&cols(), &null, bad).is_err());
    }

    #[test]
    fn input_errors_name_table_and_column() {
        let e = encode_row("t", &cols(), &[Value::Null, Value::Null, Value::Null]).unwrap_err();
        assert!(e.to_string().contains("\"id\""), "{e}");
        let e = encode_row("t", &cols(), &[Value::I64(1), Value::I64(1), Value::Null]).unwrap_err();
        assert!(
            e.to_string().contains("\"name\"") && e.to_string().contains("bytes"),
            "{e}"
        );
        let e = encode_row("t", &cols(), &[Value::I64(1)]).unwrap_err();
        assert!(e.to_string().contains("3"), "{e}");
        let big = vec![Value::I64(1), Value::Bytes(vec![0; 9000]), Value::Null];
        let e = encode_row("t", &cols(), &big).unwrap_err();
        assert!(matches!(e, EngineError::RowTooLarge { .. }), "{e}");
    }
}
