//! Typed values, rows, and their encoding into heap tuple bytes.
//!
//! A row is a `Vec<Value>` checked against its table's columns. On the page
//! it is the tuple's data part (the heap's 26-byte header comes before it):
//!
//! ```text
//!   0        2                 2 + ceil(n/8)
//!   +--------+-----------------+---------------------------------------------+
//!   | u16 n  | null bitmap     | column values in order, nulls omitted:       |
//!   | (LE)   | bit i = col i   |   I64       -> 8 bytes LE                    |
//!   |        | is NULL         |   F64       -> 8 bytes LE (IEEE bits as given)|
//!   |        |                 |   Timestamp -> 8 bytes LE (i64 microseconds  |
//!   |        |                 |                since the Unix epoch)         |
//!   |        |                 |   Bool      -> 1 byte, 0 or 1                |
//!   |        |                 |   Bytes     -> u32 LE length, then the bytes |
//!   |        |                 |   Text      -> u32 LE length, then UTF-8     |
//!   +--------+-----------------+---------------------------------------------+
//! ```
//!
//! `n` is the number of columns the table had when the row was written. A
//! table only grows ([`crate::Database::add_column`]), so `n` may be smaller
//! than the table's column count: columns `n..` were added later and read as
//! their column's [`Column::default`] (NULL when it has none), without the
//! row being rewritten (PostgreSQL keeps the attribute count in the tuple
//! header for the same reason).
//!
//! Invariants the decoder checks (bytes from disk are never trusted):
//! 1. the stored column count is at most the table's;
//! 2. a null bit is set only for a nullable column; bits past `n` are zero;
//! 3. every length fits in the remaining bytes (checked arithmetic);
//! 4. a Bool byte is 0 or 1, a Text value is valid UTF-8;
//! 5. nothing follows the last column.
//!
//! Any failure is [`EngineError::CorruptRow`] naming the table and row, never
//! a panic or a lossy conversion. Shortcut: no alignment, no varint lengths,
//! no compression.
//!
//! ## Equality and order of `F64`
//!
//! [`Value`] is `Eq`, `Ord` and `Hash` (rows go into sets and maps, keys into
//! indexes), so floating point needs a total order. It is the one the index
//! uses ([`f64_order_key`]), PostgreSQL's for `float8`:
//! - `-0.0` equals `0.0` (a unique index refuses the second of the two);
//! - every NaN equals every other NaN, and NaN sorts above `+inf`;
//! - otherwise numeric order: `-inf < -1.5 < 0.0 < 1.5 < +inf`.
//!
//! The row stores the exact bits written (a `-0.0` or a NaN payload reads
//! back as written); only comparisons and index keys canonicalise.
//!
//! Values of different types are never equal; they order by variant
//! (`Null` first), which only matters for sorting mixed collections.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

pub use crate::column_type::ColumnType;
use crate::error::{EngineError, Result};

impl ColumnType {
    /// Bytes the smallest non-NULL value takes in a row (an empty string
    /// takes its 4-byte length).
    pub(crate) fn min_width(self) -> usize {
        self.fixed_width().unwrap_or(LEN_PREFIX)
    }

    /// Whether `v` (not NULL) is a value of this type.
    pub fn accepts(self, v: &Value) -> bool {
        matches!(
            (self, v),
            (ColumnType::I64, Value::I64(_))
                | (ColumnType::Bytes, Value::Bytes(_))
                | (ColumnType::F64, Value::F64(_))
                | (ColumnType::Text, Value::Text(_))
                | (ColumnType::Bool, Value::Bool(_))
                | (ColumnType::Timestamp, Value::Timestamp(_))
        )
    }
}

/// One column of a table.
#[derive(Clone, PartialEq, Eq, Debug, Hash)]
pub struct Column {
    /// The column's name (unique in its table).
    pub name: String,
    /// The type of its values.
    pub ty: ColumnType,
    /// Whether it accepts NULL.
    pub nullable: bool,
    /// What rows stored before the column was added read in it
    /// ([`crate::Database::add_column`]); `None` reads NULL. Only
    /// `add_column` takes a default: rows inserted later carry their own
    /// value, and a table created with the column has no older rows.
    pub default: Option<Value>,
}

impl Column {
    /// A NOT NULL column.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: false,
            default: None,
        }
    }

    /// A column that accepts NULL.
    pub fn nullable(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: true,
            default: None,
        }
    }

    /// This column with `default` as what the rows stored before it read
    /// (for [`crate::Database::add_column`]).
    pub fn with_default(mut self, default: impl Into<Value>) -> Column {
        self.default = Some(default.into());
        self
    }

    /// What a row stored with fewer columns than this one's position reads
    /// here: the default, or NULL.
    pub(crate) fn missing(&self) -> &Value {
        self.default.as_ref().unwrap_or(&Value::Null)
    }

    /// Whether every row stores this column: a NOT NULL column without a
    /// default was there when the table was created (`add_column` refuses
    /// one), so a row storing fewer columns than its position is damaged,
    /// not older than the column.
    #[inline]
    pub(crate) fn always_stored(&self) -> bool {
        !self.nullable && self.default.is_none()
    }
}

/// The first column of `columns` past the `stored` a row holds that every
/// row stores ([`Column::always_stored`]): such a row is damaged.
#[inline]
pub(crate) fn unstored_column(columns: &[Column], stored: usize) -> Option<&Column> {
    columns.get(stored..)?.iter().find(|c| c.always_stored())
}

/// [`unstored_column`]'s error detail.
#[cold]
pub(crate) fn unstored_detail(stored: usize, c: &Column) -> String {
    format!(
        "{stored} columns stored, but NOT NULL column {:?} (without a default) is stored in \
         every row",
        c.name
    )
}

/// A value of one column.
///
/// Equality, order and hashing are total, so values go into sets, maps and
/// index keys. `F64` uses the order its index keys have (PostgreSQL's for
/// `float8`): `-0.0` equals `0.0` (a unique index refuses the second of
/// the two); every NaN equals every other NaN and sorts above `+inf`;
/// otherwise numeric order. A row keeps the exact bits written (a `-0.0` or
/// a NaN payload reads back as written); only comparisons and index keys
/// canonicalise. `Text` orders by its UTF-8 bytes. Values of different
/// types are never equal; they order by variant (`Null` first).
#[derive(Clone, Debug)]
pub enum Value {
    /// SQL NULL: no value.
    Null,
    /// A value of an `I64` column.
    I64(i64),
    /// A value of a `Bytes` column.
    Bytes(Vec<u8>),
    /// A value of an `F64` column.
    F64(f64),
    /// A value of a `Text` column.
    Text(String),
    /// A value of a `Bool` column.
    Bool(bool),
    /// A value of a `Timestamp` column: microseconds since the Unix epoch.
    Timestamp(i64),
}

/// The key `x` compares by, as an unsigned integer whose order is the total
/// order of the module docs: `-0.0` is mapped to `0.0` and every NaN to one
/// NaN above `+inf`, then the IEEE bits are made order-preserving (negative
/// numbers have every bit flipped, positive ones the sign bit set). Its
/// big-endian bytes are the `F64` index key.
pub fn f64_order_key(x: f64) -> u64 {
    let x = if x.is_nan() {
        f64::NAN
    } else if x == 0.0 {
        0.0
    } else {
        x
    };
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

impl Value {
    /// The type name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::I64(_) => "i64",
            Value::Bytes(_) => "bytes",
            Value::F64(_) => "f64",
            Value::Text(_) => "text",
            Value::Bool(_) => "bool",
            Value::Timestamp(_) => "timestamp",
        }
    }

    /// A `Text` value.
    pub fn text(s: impl Into<String>) -> Value {
        Value::Text(s.into())
    }

    /// Whether this is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The integer of an `I64` value.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I64(v) => Some(*v),
            _ => None,
        }
    }

    /// The bytes of a `Bytes` value.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(v) => Some(v),
            _ => None,
        }
    }

    /// The float of an `F64` value.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::F64(v) => Some(*v),
            _ => None,
        }
    }

    /// The string of a `Text` value.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(v) => Some(v),
            _ => None,
        }
    }

    /// The boolean of a `Bool` value.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }

    /// The microseconds of a `Timestamp` value.
    pub fn as_timestamp(&self) -> Option<i64> {
        match self {
            Value::Timestamp(v) => Some(*v),
            _ => None,
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::I64(_) => 1,
            Value::Bytes(_) => 2,
            Value::F64(_) => 3,
            Value::Text(_) => 4,
            Value::Bool(_) => 5,
            Value::Timestamp(_) => 6,
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::I64(a), Value::I64(b)) => a.cmp(b),
            (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
            (Value::F64(a), Value::F64(b)) => f64_order_key(*a).cmp(&f64_order_key(*b)),
            (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Timestamp(a), Value::Timestamp(b)) => a.cmp(b),
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }
}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Value::Null => {}
            Value::I64(v) | Value::Timestamp(v) => v.hash(state),
            Value::Bytes(b) => b.hash(state),
            Value::F64(x) => f64_order_key(*x).hash(state),
            Value::Text(s) => s.hash(state),
            Value::Bool(b) => b.hash(state),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::I64(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::F64(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
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

/// A string is a `Text` value (for a `Bytes` column, pass bytes:
/// `Value::from(s.as_bytes())`).
impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// A row: one value per column, in column order.
pub type Row = Vec<Value>;

/// Bytes of the column-count field.
pub(crate) const COUNT_LEN: usize = 2;
/// Bytes of a `Bytes` or `Text` value's length prefix.
pub(crate) const LEN_PREFIX: usize = 4;

pub(crate) fn bitmap_len(ncols: usize) -> usize {
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
        match v {
            Value::Null if c.nullable => {}
            Value::Null => {
                return Err(EngineError::NullNotAllowed {
                    table: table.to_string(),
                    column: c.name.clone(),
                });
            }
            v if !c.ty.accepts(v) => {
                return Err(EngineError::TypeMismatch {
                    table: table.to_string(),
                    column: c.name.clone(),
                    expected: c.ty,
                    got: v.type_name(),
                });
            }
            Value::Bytes(b) => len += LEN_PREFIX + b.len(),
            Value::Text(s) => len += LEN_PREFIX + s.len(),
            _ => len += c.ty.fixed_width().expect("fixed-width type"),
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
            Value::I64(x) | Value::Timestamp(x) => out.extend_from_slice(&x.to_le_bytes()),
            Value::F64(x) => out.extend_from_slice(&x.to_bits().to_le_bytes()),
            Value::Bool(b) => out.push(u8::from(*b)),
            Value::Bytes(b) => {
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
            Value::Text(s) => {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    debug_assert_eq!(out.len(), len);
    Ok(out)
}

/// Decode a row of `columns`; `bad(detail)` builds the error for bad bytes.
/// Columns past the stored count read as their [`Column::default`] (or
/// NULL).
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
    if n > columns.len() {
        return Err(bad(format!(
            "{n} columns stored, the table has {}",
            columns.len()
        )));
    }
    if let Some(c) = unstored_column(columns, n) {
        return Err(bad(unstored_detail(n, c)));
    }
    let bitmap = r.take(bitmap_len(n)).ok_or_else(|| bad(r.short()))?;
    let mut row = Vec::with_capacity(columns.len());
    for (i, c) in columns[..n].iter().enumerate() {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            if !c.nullable {
                return Err(bad(format!("NULL stored in NOT NULL column {:?}", c.name)));
            }
            row.push(Value::Null);
            continue;
        }
        // Each arm pushes its value itself: building it first and pushing
        // after costs a copy through the stack per value.
        match c.ty {
            ColumnType::I64 => {
                let b = r.array().ok_or_else(|| bad(r.short()))?;
                row.push(Value::I64(i64::from_le_bytes(b)));
            }
            ColumnType::Timestamp => {
                let b = r.array().ok_or_else(|| bad(r.short()))?;
                row.push(Value::Timestamp(i64::from_le_bytes(b)));
            }
            ColumnType::F64 => {
                let b = r.array().ok_or_else(|| bad(r.short()))?;
                row.push(Value::F64(f64::from_bits(u64::from_le_bytes(b))));
            }
            ColumnType::Bool => match r.array::<1>().ok_or_else(|| bad(r.short()))? {
                [0] => row.push(Value::Bool(false)),
                [1] => row.push(Value::Bool(true)),
                [b] => {
                    return Err(bad(format!(
                        "bool column {:?} holds byte {b}, not 0 or 1",
                        c.name
                    )));
                }
            },
            ColumnType::Bytes => {
                let b = r.len_prefixed().ok_or_else(|| bad(r.short()))?;
                row.push(Value::Bytes(b.to_vec()));
            }
            ColumnType::Text => {
                let b = r.len_prefixed().ok_or_else(|| bad(r.short()))?;
                let s = std::str::from_utf8(b).map_err(|e| {
                    bad(format!("text column {:?} is not valid UTF-8 ({e})", c.name))
                })?;
                row.push(Value::Text(s.to_string()));
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
    row.extend(columns[n..].iter().map(|c| c.missing().clone()));
    Ok(row)
}

/// Check a row of `columns` as [`decode_row`] does (column count, null
/// bits, every length, bool bytes, UTF-8 of text, no trailing bytes),
/// without building its values: after `Ok`, `decode_row` of the same bytes
/// succeeds, and so does every accessor of a `RowRef` over them.
pub fn check_row(
    columns: &[Column],
    bytes: &[u8],
    bad: impl Fn(String) -> EngineError,
) -> Result<()> {
    let mut r = Reader { bytes, pos: 0 };
    let n = u16::from_le_bytes(r.array::<COUNT_LEN>().ok_or_else(|| bad(r.short()))?) as usize;
    if n > columns.len() {
        return Err(bad(format!(
            "{n} columns stored, the table has {}",
            columns.len()
        )));
    }
    if let Some(c) = unstored_column(columns, n) {
        return Err(bad(unstored_detail(n, c)));
    }
    let bitmap = r.take(bitmap_len(n)).ok_or_else(|| bad(r.short()))?;
    for (i, c) in columns[..n].iter().enumerate() {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            if !c.nullable {
                return Err(bad(format!("NULL stored in NOT NULL column {:?}", c.name)));
            }
            continue;
        }
        match c.ty {
            ColumnType::I64 | ColumnType::Timestamp | ColumnType::F64 => {
                r.take(8).ok_or_else(|| bad(r.short()))?;
            }
            ColumnType::Bool => match r.array::<1>().ok_or_else(|| bad(r.short()))? {
                [0 | 1] => {}
                [b] => {
                    return Err(bad(format!(
                        "bool column {:?} holds byte {b}, not 0 or 1",
                        c.name
                    )));
                }
            },
            ColumnType::Bytes => {
                r.len_prefixed().ok_or_else(|| bad(r.short()))?;
            }
            ColumnType::Text => {
                let b = r.len_prefixed().ok_or_else(|| bad(r.short()))?;
                std::str::from_utf8(b).map_err(|e| {
                    bad(format!("text column {:?} is not valid UTF-8 ({e})", c.name))
                })?;
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
    Ok(())
}

/// [`check_row`]'s verdict on the common row, read off a plan made once
/// per table definition: a row storing every column and no NULL is checked
/// by walking its variable-length values only (the fixed-width runs
/// between them are skipped whole, their bounds following from the next
/// length read or the row's end), with no message built along the way.
///
/// [`RowPlan::accepts`] is `true` only for bytes `check_row` accepts; its
/// `false` means "ask `check_row`" (a NULL, a row stored before a column
/// was added, or bad bytes, whose error `check_row` then words).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RowPlan {
    /// The table's column count, as a full row stores it.
    count: usize,
    /// Bytes before the first value: the count and the null bitmap.
    head: usize,
    /// The values, in order.
    steps: Vec<Step>,
    /// The same steps in the two shapes most tables have, checked without
    /// walking them.
    form: Form,
}

/// A [`RowPlan`]'s steps, when they take one of the common shapes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Form {
    /// Fixed-width values only (no bool): this many bytes in all.
    Fixed { total: usize },
    /// `before` bytes of fixed-width values (no bool), one byte string,
    /// `after` bytes of fixed-width values.
    OneBytes { before: usize, after: usize },
    /// Anything else: the steps are walked.
    Steps,
}

impl Form {
    /// The form of `steps`.
    fn of(steps: &[Step]) -> Form {
        let skip = |s: Option<&Step>| match s {
            None => Some(0),
            Some(Step::Skip(w)) => Some(*w),
            Some(_) => None,
        };
        match steps {
            [] | [Step::Skip(_)] => Form::Fixed {
                total: skip(steps.first()).unwrap_or(0),
            },
            _ => {
                let at = steps
                    .iter()
                    .position(|s| *s == Step::Prefixed { text: false });
                let (before, after) = match at {
                    Some(0) if steps.len() <= 2 => (Some(0), skip(steps.get(1))),
                    Some(1) if steps.len() <= 3 => (skip(steps.first()), skip(steps.get(2))),
                    _ => (None, None),
                };
                match (before, after) {
                    (Some(before), Some(after)) => Form::OneBytes { before, after },
                    _ => Form::Steps,
                }
            }
        }
    }
}

/// One stretch of a row's values, for [`RowPlan`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Step {
    /// Fixed-width values of this many bytes in all, any bytes valid.
    Skip(usize),
    /// A bool: one byte, 0 or 1.
    Bool,
    /// A length-prefixed value; UTF-8 if `text`.
    Prefixed { text: bool },
}

impl RowPlan {
    /// Bytes before the first value of a full row (the column count and
    /// the null bitmap): a row the plan [accepts](Self::accepts) holds the
    /// value of a column at a fixed offset ([`crate::Col`]'s) this far in.
    #[inline(always)]
    pub fn head(&self) -> usize {
        self.head
    }

    /// The plan of full rows of `columns`.
    pub fn new(columns: &[Column]) -> RowPlan {
        let mut steps = Vec::new();
        for c in columns {
            let step = match c.ty {
                ColumnType::Bool => Step::Bool,
                ColumnType::Bytes => Step::Prefixed { text: false },
                ColumnType::Text => Step::Prefixed { text: true },
                ColumnType::I64 | ColumnType::F64 | ColumnType::Timestamp => Step::Skip(8),
            };
            match (steps.last_mut(), step) {
                (Some(Step::Skip(run)), Step::Skip(w)) => *run += w,
                _ => steps.push(step),
            }
        }
        RowPlan {
            count: columns.len(),
            head: COUNT_LEN + bitmap_len(columns.len()),
            form: Form::of(&steps),
            steps,
        }
    }

    /// Whether `bytes` are a full row without NULLs that [`check_row`]
    /// accepts (`false`: not known; ask `check_row`).
    ///
    /// Small, to be inlined into a scan's loop over a page's tuples, for
    /// the two common [`Form`]s; other plans walk their steps out of line.
    #[inline(always)]
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        let Some(head) = bytes.get(..self.head) else {
            return false;
        };
        // No null bit set: no NOT NULL column holds NULL, no bit is set
        // past the last column, and every column's bytes are there.
        if usize::from(u16::from_le_bytes([head[0], head[1]])) != self.count
            || head[COUNT_LEN..].iter().any(|&b| b != 0)
        {
            return false;
        }
        match self.form {
            // Any bytes are valid fixed-width values: the length decides.
            Form::Fixed { total } => bytes.len() == self.head + total,
            // The walk below, unrolled: the length prefix within the row,
            // and the byte string and the values after it ending exactly
            // at its end (so every value is within it).
            Form::OneBytes { before, after } => {
                let at = self.head + before;
                let Some(len) = bytes.get(at..at + LEN_PREFIX) else {
                    return false;
                };
                let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
                (at + LEN_PREFIX)
                    .checked_add(len)
                    .and_then(|end| end.checked_add(after))
                    == Some(bytes.len())
            }
            Form::Steps => self.walk(bytes),
        }
    }

    /// [`accepts`](Self::accepts) past the row's head, by walking the
    /// steps.
    #[inline(never)]
    fn walk(&self, bytes: &[u8]) -> bool {
        // Every value ends at or after the one before it, so a position
        // within the row at a read (and at the end) puts every value
        // skipped before it within the row too.
        let mut pos = self.head;
        for step in &self.steps {
            pos = match *step {
                Step::Skip(w) => pos + w,
                Step::Bool => match bytes.get(pos) {
                    Some(0 | 1) => pos + 1,
                    _ => return false,
                },
                Step::Prefixed { text } => {
                    let Some(len) = bytes.get(pos..pos + LEN_PREFIX) else {
                        return false;
                    };
                    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
                    let body = pos + LEN_PREFIX;
                    let Some(value) = body.checked_add(len).and_then(|end| bytes.get(body..end))
                    else {
                        return false;
                    };
                    if text && std::str::from_utf8(value).is_err() {
                        return false;
                    }
                    body + len
                }
            };
        }
        pos == bytes.len()
    }
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

    #[inline]
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).map(|b| b.try_into().expect("N bytes"))
    }

    /// A u32 LE length and that many bytes.
    #[inline]
    fn len_prefixed(&mut self) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(self.array()?) as usize;
        self.take(len)
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
    fn check_row_accepts_exactly_the_bytes_decode_row_accepts() {
        let columns = vec![
            Column::new("id", ColumnType::I64),
            Column::nullable("name", ColumnType::Text),
            Column::new("ok", ColumnType::Bool),
            Column::nullable("b", ColumnType::Bytes),
            Column::nullable("f", ColumnType::F64),
        ];
        let row = vec![
            Value::I64(-7),
            Value::text("h\u{e9}llo"),
            Value::Bool(true),
            Value::Null,
            Value::F64(2.5),
        ];
        let good = encode_row("t", &columns, &row).unwrap();
        assert!(check_row(&columns, &good, bad).is_ok());
        let (mut accepted, mut refused) = (0, 0);
        // Every single-byte change and every truncation of the encoding.
        for i in 0..good.len() {
            for x in [0u8, 1, 2, 0x80, 0xC3, 0xFF] {
                let mut b = good.clone();
                b[i] = x;
                let (c, d) = (check_row(&columns, &b, bad), decode_row(&columns, &b, bad));
                assert_eq!(c.is_ok(), d.is_ok(), "byte {i} = {x:#x}: {c:?} / {d:?}");
                if c.is_ok() {
                    accepted += 1
                } else {
                    refused += 1
                }
            }
            let (c, d) = (
                check_row(&columns, &good[..i], bad),
                decode_row(&columns, &good[..i], bad),
            );
            assert_eq!(c.is_ok(), d.is_ok(), "truncated to {i}: {c:?} / {d:?}");
        }
        assert!(
            accepted > 0 && refused > 0,
            "{accepted} accepted, {refused} refused"
        );
    }

    /// A row storing fewer columns than a NOT NULL column's position is
    /// damaged when that column has no default (it was there when the
    /// table was created), and older than the column when it has one.
    #[test]
    fn a_row_without_a_column_every_row_stores_is_refused_whole() {
        let mut columns = vec![
            Column::new("id", ColumnType::I64),
            Column::new("n", ColumnType::I64),
        ];
        let short = encode_row("t", &columns[..1], &[Value::I64(4)]).unwrap();
        let e = check_row(&columns, &short, bad).unwrap_err();
        assert!(e.to_string().contains("\"n\""), "{e}");
        assert!(decode_row(&columns, &short, bad).is_err());
        columns[1].default = Some(Value::I64(9));
        check_row(&columns, &short, bad).unwrap();
        assert_eq!(
            decode_row(&columns, &short, bad).unwrap(),
            vec![Value::I64(4), Value::I64(9)]
        );
    }

    #[test]
    fn row_plan_accepts_only_rows_check_row_accepts_and_every_full_row_without_nulls() {
        let every_kind = vec![
            Column::new("id", ColumnType::I64),
            Column::new("at", ColumnType::Timestamp),
            Column::nullable("name", ColumnType::Text),
            Column::new("ok", ColumnType::Bool),
            Column::new("f", ColumnType::F64),
            Column::nullable("b", ColumnType::Bytes),
            Column::new("n", ColumnType::I64),
        ];
        let every_value = vec![
            Value::I64(-7),
            Value::Timestamp(3),
            Value::text("h\u{e9}llo"),
            Value::Bool(true),
            Value::F64(2.5),
            Value::Bytes(vec![9; 20]),
            Value::I64(1),
        ];
        check_plan(&every_kind, &every_value, Form::Steps);
        // The forms checked without a walk: fixed-width values only, and
        // one byte string with fixed-width values before and after it.
        let fixed = vec![
            Column::new("a", ColumnType::I64),
            Column::new("f", ColumnType::F64),
            Column::nullable("t", ColumnType::Timestamp),
        ];
        let fixed_values = vec![Value::I64(5), Value::F64(-1.0), Value::Timestamp(9)];
        check_plan(&fixed, &fixed_values, Form::Fixed { total: 24 });
        let one_bytes = |before: usize, after: usize| {
            let mut cols = Vec::new();
            let mut vals = Vec::new();
            for i in 0..before {
                cols.push(Column::new(format!("x{i}"), ColumnType::I64));
                vals.push(Value::I64(i as i64 - 3));
            }
            cols.push(Column::nullable("b", ColumnType::Bytes));
            vals.push(Value::Bytes(b"filler".to_vec()));
            for i in 0..after {
                cols.push(Column::new(format!("y{i}"), ColumnType::F64));
                vals.push(Value::F64(i as f64));
            }
            (cols, vals)
        };
        for (before, after) in [(0, 0), (0, 2), (3, 0), (2, 1)] {
            let (cols, vals) = one_bytes(before, after);
            let form = Form::OneBytes {
                before: 8 * before,
                after: 8 * after,
            };
            check_plan(&cols, &vals, form);
        }
        // Byte strings and a bool elsewhere are walked.
        let (mut two, mut vals) = one_bytes(1, 1);
        two.push(Column::new("c", ColumnType::Bytes));
        vals.push(Value::Bytes(vec![1, 2]));
        check_plan(&two, &vals, Form::Steps);
        let (mut with_bool, mut vals) = one_bytes(0, 1);
        with_bool.push(Column::new("ok", ColumnType::Bool));
        vals.push(Value::Bool(false));
        check_plan(&with_bool, &vals, Form::Steps);
    }

    /// `columns`' plan has form `form`, accepts the full row `full`
    /// (without NULLs), leaves a row with NULLs and a row stored before the
    /// last column was added to `check_row`, and never accepts what
    /// `check_row` refuses, through every single-byte change and every
    /// truncation of those rows.
    fn check_plan(columns: &[Column], full: &[Value], form: Form) {
        // The last column as `add_column` takes it: NOT NULL only with a
        // default (rows stored before it read that).
        let mut columns = columns.to_vec();
        if let Some(last) = columns.last_mut()
            && last.always_stored()
        {
            last.default = full.last().cloned();
        }
        let columns = &columns[..];
        let plan = RowPlan::new(columns);
        assert_eq!(plan.form, form, "{columns:?}");
        let good = encode_row("t", columns, full).unwrap();
        assert!(plan.accepts(&good), "a full row without NULLs is accepted");
        let mut rows = vec![good];
        let with_nulls: Vec<Value> = full
            .iter()
            .zip(columns)
            .map(|(v, c)| if c.nullable { Value::Null } else { v.clone() })
            .collect();
        if with_nulls != full {
            let nulls = encode_row("t", columns, &with_nulls).unwrap();
            assert!(check_row(columns, &nulls, bad).is_ok());
            assert!(
                !plan.accepts(&nulls),
                "a row with NULLs is left to check_row"
            );
            rows.push(nulls);
        }
        // A row stored before the last column was added.
        let n = columns.len();
        let old = encode_row("t", &columns[..n - 1], &full[..n - 1]).unwrap();
        assert!(check_row(columns, &old, bad).is_ok());
        assert!(
            !plan.accepts(&old),
            "a row of fewer columns is left to check_row"
        );
        let (mut accepted, mut refused) = (0, 0);
        for row in &rows {
            // Every single-byte change and every truncation of the encoding,
            // and the row with a byte more.
            let mut longer = row.clone();
            longer.push(0);
            let mut changed = vec![longer];
            for i in 0..row.len() {
                changed.extend([0u8, 1, 2, 0x80, 0xC3, 0xFF].into_iter().map(|x| {
                    let mut b = row.clone();
                    b[i] = x;
                    b
                }));
                changed.push(row[..i].to_vec());
            }
            for b in changed {
                let fast = plan.accepts(&b);
                let full_check = check_row(columns, &b, bad);
                assert!(
                    !fast || full_check.is_ok(),
                    "{b:?}: the plan accepts what check_row refuses: {full_check:?}"
                );
                if fast {
                    accepted += 1;
                } else if full_check.is_err() {
                    refused += 1;
                }
            }
        }
        assert!(
            accepted > 0 && refused > 0,
            "{accepted} accepted, {refused} refused"
        );
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

    fn all_types() -> Vec<Column> {
        ColumnType::ALL
            .iter()
            .map(|t| Column::nullable(t.name(), *t))
            .collect()
    }

    #[test]
    fn every_type_round_trips_with_the_widths_of_the_drawing() {
        let row = vec![
            Value::I64(-3),
            Value::Bytes(vec![0, 255]),
            Value::F64(-0.0),
            Value::text("ü"),
            Value::Bool(true),
            Value::Timestamp(-1),
        ];
        let b = encode_row("t", &all_types(), &row).unwrap();
        assert_eq!(b.len(), 2 + 1 + 8 + (4 + 2) + 8 + (4 + 2) + 1 + 8);
        let back = decode_row(&all_types(), &b, bad).unwrap();
        assert_eq!(back, row);
        assert_eq!(back[2].as_f64().unwrap().to_bits(), (-0.0f64).to_bits());
        for cut in 0..b.len() {
            assert!(
                decode_row(&all_types(), &b[..cut], bad).is_err(),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn a_bool_byte_other_than_0_or_1_and_text_that_is_not_utf8_are_corrupt() {
        let cols = vec![
            Column::new("ok", ColumnType::Bool),
            Column::new("s", ColumnType::Text),
        ];
        let b = encode_row("t", &cols, &[Value::Bool(false), Value::text("ab")]).unwrap();
        let mut two = b.clone();
        two[3] = 2;
        let e = decode_row(&cols, &two, bad).unwrap_err();
        assert!(e.to_string().contains("byte 2"), "{e}");
        let mut utf = b;
        utf[8] = 0xC3; // a lead byte followed by ASCII
        let e = decode_row(&cols, &utf, bad).unwrap_err();
        assert!(e.to_string().contains("UTF-8"), "{e}");
    }

    #[test]
    fn a_row_stored_with_fewer_columns_reads_the_later_ones_as_default_or_null() {
        let old = cols();
        let b = encode_row("t", &old, &[Value::I64(1), Value::Null, Value::I64(2)]).unwrap();
        let mut grown = old.clone();
        grown.push(Column::nullable("x", ColumnType::Text));
        let mut with_default = Column::new("y", ColumnType::F64);
        with_default.default = Some(Value::F64(2.5));
        grown.push(with_default);
        assert_eq!(
            decode_row(&grown, &b, bad).unwrap(),
            vec![
                Value::I64(1),
                Value::Null,
                Value::I64(2),
                Value::Null,
                Value::F64(2.5)
            ]
        );
        // More columns stored than the table has is corrupt.
        assert!(decode_row(&old[..2], &b, bad).is_err());
    }

    #[test]
    fn float_order_is_total_with_one_zero_and_one_nan_above_infinity() {
        let asc = [
            f64::NEG_INFINITY,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            f64::INFINITY,
            f64::NAN,
        ];
        for w in asc.windows(2) {
            assert!(f64_order_key(w[0]) < f64_order_key(w[1]), "{w:?}");
            assert!(Value::F64(w[0]) < Value::F64(w[1]), "{w:?}");
        }
        assert_eq!(Value::F64(-0.0), Value::F64(0.0));
        let other_nan = f64::from_bits(0xfff0_0000_0000_0001);
        assert_eq!(Value::F64(other_nan), Value::F64(f64::NAN));
        // Equal values hash alike.
        let state = std::collections::hash_map::RandomState::new();
        use std::hash::BuildHasher;
        assert_eq!(
            state.hash_one(Value::F64(-0.0)),
            state.hash_one(Value::F64(0.0))
        );
        assert_eq!(
            state.hash_one(Value::F64(other_nan)),
            state.hash_one(Value::F64(f64::NAN))
        );
    }
}
