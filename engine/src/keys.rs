//! Index keys from values: which B-tree key form an index uses, the key of
//! a row, and [`KeyRange`], the ranges the range reads take.
//!
//! Two key forms (see `btree::key` for the bytes):
//!
//! - An index over **one column** uses the single-column form
//!   (`index::value_key`; for `I64` and `Bytes` the form every index had
//!   before composite keys: its on-disk bytes and speed are unchanged).
//!   **NULLs are not indexed**: a row whose column is NULL has no entry, a
//!   lookup of NULL finds nothing, and a unique index allows any number of
//!   NULLs.
//! - An index over **2 to 8 columns** uses the tuple form. **NULLs are indexed** and sort before every value
//!   of their column (a range over a prefix reaches them; `KeyRange::prefix`
//!   with a NULL finds the rows holding NULL there); a **unique** index
//!   treats a key with a NULL in any column as distinct from every other
//!   key (SQL's rule: two NULLs are not equal), so it never conflicts.
//!
//! Both forms compare as bytes in the B-tree (no key is decoded to be
//! compared). A tuple key's columns compare left to right, so the rows with
//! a given *prefix* (the first k columns' values) are one contiguous range:
//! that is what makes "the orders of a district, newest first" one
//! descending range read.

use std::ops::{Bound, RangeBounds};

use btree::key::{encode_parts, prefix_end};
use btree::{ColumnKind, Direction, Key, KeyPart, KeyType, MAX_KEY_COLUMNS, TupleType};

use crate::catalog::IndexHandle;
use crate::error::{EngineError, Result};
use crate::index::value_key;
use crate::row::RowRef;
use crate::table_def::TableInfo;
use crate::value::{ColumnType, Value};

/// A range's lower and upper bounds on stored keys.
pub(crate) type StoredBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The B-tree column type of a column type.
pub(crate) fn column_kind(ty: ColumnType) -> ColumnKind {
    match ty {
        ColumnType::I64 => ColumnKind::I64,
        ColumnType::Bytes => ColumnKind::Bytes,
        ColumnType::F64 => ColumnKind::F64,
        ColumnType::Text => ColumnKind::Text,
        ColumnType::Bool => ColumnKind::Bool,
        ColumnType::Timestamp => ColumnKind::Timestamp,
    }
}

/// The key type of an index over columns of `types` (see the module docs):
/// the single-column form for one column, else a tuple. `None` for 0 or
/// more than [`MAX_KEY_COLUMNS`] columns.
pub(crate) fn index_key_type(types: &[ColumnType]) -> Option<KeyType> {
    match types {
        [ty] => Some(crate::index::key_type(*ty)),
        _ => {
            let kinds: Vec<ColumnKind> = types.iter().map(|&t| column_kind(t)).collect();
            TupleType::new(&kinds).map(KeyType::Tuple)
        }
    }
}

/// A value as a part of a tuple key.
pub(crate) fn value_part(v: &Value) -> KeyPart {
    match v {
        Value::Null => KeyPart::Null,
        Value::I64(i) => KeyPart::I64(*i),
        Value::Bytes(b) => KeyPart::Bytes(b.clone()),
        Value::F64(x) => KeyPart::F64(*x),
        Value::Text(s) => KeyPart::Text(s.clone()),
        Value::Bool(b) => KeyPart::Bool(*b),
        Value::Timestamp(t) => KeyPart::Timestamp(*t),
    }
}

/// The key column type a value belongs to; `None` for NULL.
pub(crate) fn value_kind(v: &Value) -> Option<ColumnKind> {
    match v {
        Value::Null => None,
        Value::I64(_) => Some(ColumnKind::I64),
        Value::Bytes(_) => Some(ColumnKind::Bytes),
        Value::F64(_) => Some(ColumnKind::F64),
        Value::Text(_) => Some(ColumnKind::Text),
        Value::Bool(_) => Some(ColumnKind::Bool),
        Value::Timestamp(_) => Some(ColumnKind::Timestamp),
    }
}

impl IndexHandle {
    /// Does this index use the tuple form?
    pub(crate) fn is_tuple(&self) -> bool {
        matches!(self.btree.key_type(), KeyType::Tuple(_))
    }

    /// The key of `row` (a whole row of the table) in this index; `None`
    /// if the row has no entry (a NULL in a single-column index).
    pub(crate) fn row_key(&self, row: &[Value]) -> Option<Key> {
        if self.is_tuple() {
            Some(Key::Tuple(
                self.info
                    .columns
                    .iter()
                    .map(|&c| value_part(&row[c]))
                    .collect(),
            ))
        } else {
            value_key(&row[self.info.columns[0]])
        }
    }

    /// Does `row` hold the stored key `key` in this index (the re-check of
    /// an entry against the row it leads to)?
    pub(crate) fn row_has_key(&self, row: &[Value], key: &[u8]) -> bool {
        if self.is_tuple() {
            let parts: Vec<KeyPart> = self
                .info
                .columns
                .iter()
                .map(|&c| value_part(&row[c]))
                .collect();
            return encode_parts(&parts) == key;
        }
        match &row[self.info.columns[0]] {
            Value::I64(v) => Key::encode_i64(*v) == key,
            Value::Bytes(b) => b.as_slice() == key,
            v => value_key(v).is_some_and(|k| k.encode() == key),
        }
    }

    /// [`IndexHandle::row_has_key`] for a row on its page.
    pub(crate) fn row_ref_has_key(&self, row: &RowRef<'_>, key: &[u8]) -> Result<bool> {
        let info = row.table();
        if self.is_tuple() {
            let mut parts = Vec::with_capacity(self.info.columns.len());
            for &c in &self.info.columns {
                parts.push(value_part(&row.value(crate::table_def::col_of(info, c))?));
            }
            return Ok(encode_parts(&parts) == key);
        }
        let col = crate::table_def::col_of(info, self.info.columns[0]);
        Ok(match info.columns[self.info.columns[0]].ty {
            ColumnType::I64 => row.i64_opt(col)?.is_some_and(|v| Key::encode_i64(v) == key),
            ColumnType::Bytes => row.bytes_opt(col)? == Some(key),
            _ => value_key(&row.value(col)?).is_some_and(|k| k.encode() == key),
        })
    }

    /// The error for a key value of the wrong type for key column `i`.
    fn mismatch(&self, table: &TableInfo, i: usize, got: &Value) -> EngineError {
        let col = &table.columns[self.info.columns[i]];
        EngineError::TypeMismatch {
            table: table.name.clone(),
            column: col.name.clone(),
            expected: col.ty,
            got: got.type_name(),
        }
    }

    /// Check that `v` fits key column `i` (NULL fits every column).
    fn check_value(&self, table: &TableInfo, i: usize, v: &Value) -> Result<()> {
        let ty = table.columns[self.info.columns[i]].ty;
        // By the key kinds, so that a new column type is covered once
        // `column_kind` and `value_kind` know it.
        let fits = value_kind(v).is_none_or(|k| k == column_kind(ty));
        if fits {
            Ok(())
        } else {
            Err(self.mismatch(table, i, v))
        }
    }

    /// The key of a full key given by the caller (one value per indexed
    /// column), checked against the columns' types; `None` if it can match
    /// nothing (a NULL in a single-column index).
    pub(crate) fn full_key(&self, table: &TableInfo, values: &[Value]) -> Result<Option<Key>> {
        let n = self.info.columns.len();
        if values.len() != n {
            return Err(EngineError::BadKey {
                index: self.info.name.clone(),
                detail: format!(
                    "a key of {} values for an index of {n} columns",
                    values.len()
                ),
            });
        }
        for (i, v) in values.iter().enumerate() {
            self.check_value(table, i, v)?;
        }
        Ok(if self.is_tuple() {
            Some(Key::Tuple(values.iter().map(value_part).collect()))
        } else {
            value_key(&values[0])
        })
    }

    /// The stored-key bounds of `range` in this index; `None` if the range
    /// can hold no entry (a NULL in a single-column index).
    pub(crate) fn encode_range(
        &self,
        table: &TableInfo,
        range: &KeyRange,
    ) -> Result<Option<StoredBounds>> {
        let n = self.info.columns.len();
        let k = range.prefix.len();
        let bad = |detail: String| EngineError::BadKey {
            index: self.info.name.clone(),
            detail,
        };
        if k > n {
            return Err(bad(format!(
                "a key prefix of {k} values for an index of {n} columns"
            )));
        }
        let bounded = !matches!(
            (&range.lower, &range.upper),
            (Bound::Unbounded, Bound::Unbounded)
        );
        if k == n && bounded {
            return Err(bad(format!(
                "bounds on column {} after a key prefix of all {n} columns",
                k + 1
            )));
        }
        for (i, v) in range.prefix.iter().enumerate() {
            self.check_value(table, i, v)?;
        }
        for b in [&range.lower, &range.upper] {
            if let Bound::Included(v) | Bound::Excluded(v) = b {
                self.check_value(table, k, v)?;
            }
        }
        if !self.is_tuple() {
            if let [v] = range.prefix.as_slice() {
                let Some(key) = value_key(v) else {
                    return Ok(None);
                };
                let e = key.encode();
                return Ok(Some((Bound::Included(e.clone()), Bound::Included(e))));
            }
            let enc = |b: &Bound<Value>| -> Result<Bound<Vec<u8>>> {
                Ok(match b {
                    Bound::Unbounded => Bound::Unbounded,
                    Bound::Included(v) | Bound::Excluded(v) => {
                        let Some(key) = value_key(v) else {
                            let col = &table.columns[self.info.columns[0]];
                            return Err(EngineError::TypeMismatch {
                                table: table.name.clone(),
                                column: col.name.clone(),
                                expected: col.ty,
                                got: "null (NULLs are not indexed)",
                            });
                        };
                        match b {
                            Bound::Included(_) => Bound::Included(key.encode()),
                            _ => Bound::Excluded(key.encode()),
                        }
                    }
                })
            };
            return Ok(Some((enc(&range.lower)?, enc(&range.upper)?)));
        }
        let parts: Vec<KeyPart> = range.prefix.iter().map(value_part).collect();
        let prefix = encode_parts(&parts);
        let with = |v: &Value| {
            let mut p = prefix.clone();
            value_part(v).encode_into(&mut p);
            p
        };
        let lower = match &range.lower {
            Bound::Unbounded if prefix.is_empty() => Bound::Unbounded,
            Bound::Unbounded => Bound::Included(prefix.clone()),
            Bound::Included(v) => Bound::Included(with(v)),
            // Past every key whose column k is v.
            Bound::Excluded(v) => Bound::Included(prefix_end(&with(v))),
        };
        let upper = match &range.upper {
            Bound::Unbounded if prefix.is_empty() => Bound::Unbounded,
            Bound::Unbounded => Bound::Excluded(prefix_end(&prefix)),
            Bound::Included(v) => Bound::Excluded(prefix_end(&with(v))),
            Bound::Excluded(v) => Bound::Excluded(with(v)),
        };
        Ok(Some((lower, upper)))
    }
}

/// Values that make a key or a key prefix: one value (`i64`, `f64`,
/// `bool`, `&str` and `String` (text), `&[u8]` and `Vec<u8>` (bytes),
/// [`Value`]), a tuple of up to 8 of them, or a `Vec<Value>`.
pub trait IntoKey {
    /// The values, in key column order.
    fn into_key(self) -> Vec<Value>;
}

macro_rules! scalar_key {
    ($($t:ty),*) => {$(
        impl IntoKey for $t {
            fn into_key(self) -> Vec<Value> {
                vec![Value::from(self)]
            }
        }
    )*};
}
scalar_key!(i64, f64, bool, &str, String, &[u8], Vec<u8>);

impl IntoKey for Value {
    fn into_key(self) -> Vec<Value> {
        vec![self]
    }
}

impl IntoKey for Vec<Value> {
    fn into_key(self) -> Vec<Value> {
        self
    }
}

impl IntoKey for &[Value] {
    fn into_key(self) -> Vec<Value> {
        self.to_vec()
    }
}

macro_rules! tuple_key {
    ($($name:ident),+) => {
        impl<$($name: Into<Value>),+> IntoKey for ($($name,)+) {
            #[allow(non_snake_case)]
            fn into_key(self) -> Vec<Value> {
                let ($($name,)+) = self;
                vec![$($name.into()),+]
            }
        }
    };
}
tuple_key!(A);
tuple_key!(A, B);
tuple_key!(A, B, C);
tuple_key!(A, B, C, D);
tuple_key!(A, B, C, D, E);
tuple_key!(A, B, C, D, E, F);
tuple_key!(A, B, C, D, E, F, G);
tuple_key!(A, B, C, D, E, F, G, H);

const _: () = assert!(MAX_KEY_COLUMNS == 8, "IntoKey covers tuples of up to 8");

/// Which rows of an index a range read returns, in which order, how many:
/// the rows whose first key columns equal a *prefix*, optionally bounded on
/// the next column, ascending or descending in (key, row id) order, up to a
/// limit.
///
/// ```
/// use engine::KeyRange;
/// // The newest order of district (1, 7): ORDER BY o_id DESC LIMIT 1.
/// let newest = KeyRange::prefix((1, 7)).desc().limit(1);
/// // Orders 3000 to 3010 of district (1, 7).
/// let some = KeyRange::prefix((1, 7)).range(3000..=3010);
/// // Every entry with a key of at least 5 in a one-column index.
/// let tail = KeyRange::all().range(5..);
/// # let _ = (newest, some, tail);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRange {
    pub(crate) prefix: Vec<Value>,
    pub(crate) lower: Bound<Value>,
    pub(crate) upper: Bound<Value>,
    pub(crate) direction: Direction,
    pub(crate) limit: Option<usize>,
}

impl Default for KeyRange {
    fn default() -> KeyRange {
        KeyRange::all()
    }
}

impl KeyRange {
    /// Every entry of the index, ascending.
    pub fn all() -> KeyRange {
        KeyRange {
            prefix: Vec::new(),
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
            direction: Direction::Forward,
            limit: None,
        }
    }

    /// The entries whose first key columns equal `prefix` (all of them: a
    /// lookup of a full key).
    pub fn prefix(prefix: impl IntoKey) -> KeyRange {
        KeyRange {
            prefix: prefix.into_key(),
            ..KeyRange::all()
        }
    }

    /// Bound the key column after the prefix (the first column without a
    /// prefix) to `bounds`, e.g. `10..20`, `..=5`, `(Bound::Excluded(3),
    /// Bound::Unbounded)`.
    pub fn range<T: Into<Value> + Clone>(mut self, bounds: impl RangeBounds<T>) -> KeyRange {
        let conv = |b: Bound<&T>| match b {
            Bound::Included(v) => Bound::Included(v.clone().into()),
            Bound::Excluded(v) => Bound::Excluded(v.clone().into()),
            Bound::Unbounded => Bound::Unbounded,
        };
        self.lower = conv(bounds.start_bound());
        self.upper = conv(bounds.end_bound());
        self
    }

    /// [`KeyRange::range`] with [`Value`] bounds as they are.
    pub fn bounds(mut self, lower: Bound<Value>, upper: Bound<Value>) -> KeyRange {
        self.lower = lower;
        self.upper = upper;
        self
    }

    /// Descending (key, row id) order: the largest key first.
    pub fn desc(mut self) -> KeyRange {
        self.direction = Direction::Backward;
        self
    }

    /// Ascending (key, row id) order (the default).
    pub fn asc(mut self) -> KeyRange {
        self.direction = Direction::Forward;
        self
    }

    /// At most `n` rows (rows this transaction sees: entries of rows it
    /// does not see are not counted).
    pub fn limit(mut self, n: usize) -> KeyRange {
        self.limit = Some(n);
        self
    }

    /// Is the order descending?
    pub fn is_desc(&self) -> bool {
        self.direction == Direction::Backward
    }
}
