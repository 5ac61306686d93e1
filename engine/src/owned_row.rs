//! [`OwnedRow`]: a row copied out of its page, as the owned reads return
//! it (`get`, `get_by_key`, `index_lookup`, the scan and range iterators).
//!
//! It is its values (it dereferences to `[Value]`, so `row[0]`, `row.len()`
//! and comparisons with a `Vec<Value>` work as on the plain vector) and the
//! definition of its table, so a column can be read by name
//! (`row.value("name")`, `row.text("name")`) or by a resolved [`Col`]
//! (`row.text(col)`), with the typed accessors [`crate::RowRef`] has.
//!
//! ```text
//!   OwnedRow ── values: [Value; n]   (n = the table's columns, or the projected ones)
//!            └─ shape: Arc ── the table's definition (the version the row was read with)
//!                          └─ positions: the table column of each value, if projected
//! ```
//!
//! Rules:
//! 1. Equality, order and hashing are the values' alone: two rows with the
//!    same values are equal whatever they were read from.
//! 2. Reading a column is checked: a name the table lacks is
//!    [`EngineError::UnknownColumn`]; a column of another type than the
//!    accessor's, a NULL through an accessor without `_opt`, a [`Col`] of
//!    another table or a column the projection left out are
//!    [`EngineError::WrongColumn`] naming the column. Never a value of
//!    another column.
//! 3. Writes take plain values: `insert` and `update` take anything that is
//!    `Into<Vec<Value>>`, an `OwnedRow` included.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use crate::error::{EngineError, Result};
use crate::table_def::{Col, TableInfo, col_of};
use crate::value::{ColumnType, Row, Value};

/// What the values of a row are: the table's definition, and which of its
/// columns they are if the row is projected. Shared by the rows of one
/// read.
#[derive(Debug)]
pub(crate) struct Shape {
    table: Arc<TableInfo>,
    /// The table column of each value; `None`: every column, in order.
    positions: Option<Vec<usize>>,
}

impl Shape {
    /// Every column of `table`, in order.
    pub fn whole(table: Arc<TableInfo>) -> Arc<Shape> {
        Arc::new(Shape {
            table,
            positions: None,
        })
    }

    /// The table's definition.
    #[inline]
    pub fn table(&self) -> &TableInfo {
        &self.table
    }

    /// The table's definition, shared.
    pub fn table_shared(&self) -> Arc<TableInfo> {
        self.table.clone()
    }

    /// The columns `cols` of `table`, in that order.
    pub fn projected(table: Arc<TableInfo>, cols: &[Col]) -> Arc<Shape> {
        Arc::new(Shape {
            table,
            positions: Some(cols.iter().map(Col::index).collect()),
        })
    }
}

/// A row copied out of its page, readable by column name or handle (module
/// docs).
#[derive(Clone)]
pub struct OwnedRow {
    values: Row,
    shape: Arc<Shape>,
}

/// A column of a row ([`OwnedRow`], [`crate::RowRef`]): its name, or a
/// [`Col`] handle of its table (resolved once, the faster way in a loop).
pub trait RowColumn {
    /// The column as a handle of `table`: [`EngineError::UnknownColumn`]
    /// for a name the table lacks, [`EngineError::WrongColumn`] for a
    /// handle of another table (or of a table of another database that
    /// does not have this column at its position).
    fn col(&self, table: &TableInfo) -> Result<Col>;
}

impl RowColumn for &str {
    fn col(&self, table: &TableInfo) -> Result<Col> {
        Ok(col_of(table, table.column_index(self)?))
    }
}

impl RowColumn for Col {
    #[inline]
    fn col(&self, table: &TableInfo) -> Result<Col> {
        if self.rel != table.rel || self.index() >= table.columns.len() {
            return Err(EngineError::WrongColumn {
                table: table.name.clone(),
                detail: format!(
                    "column handle {} belongs to another table ({})",
                    self.index(),
                    self.rel
                ),
            });
        }
        // Relation ids are unique within a database only: a handle resolved
        // in another database may name a table with this one's id. It must
        // describe this table's column exactly (its type, nullability and
        // precomputed offset), or it would read another column's bytes. (A
        // handle without an offset finds its value by walking this table's
        // columns, so only an offset is recomputed.)
        let c = &table.columns[self.index()];
        if c.ty != self.ty
            || c.nullable != self.nullable
            || (self.fixed.is_some() && col_of(table, self.index()).fixed != self.fixed)
        {
            return Err(EngineError::WrongColumn {
                table: table.name.clone(),
                detail: format!(
                    "column handle {} (a {} column) does not describe column {:?} (a {} \
                     column) of this table: it was resolved in another database",
                    self.index(),
                    self.ty.name(),
                    c.name,
                    c.ty.name()
                ),
            });
        }
        Ok(*self)
    }
}

impl OwnedRow {
    pub(crate) fn new(values: Row, shape: Arc<Shape>) -> OwnedRow {
        OwnedRow { values, shape }
    }

    /// The values, one per column (per projected column if projected).
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// The values, taken out.
    pub fn into_values(self) -> Row {
        self.values
    }

    /// The definition of the row's table (as the row was read).
    pub fn table(&self) -> &TableInfo {
        &self.shape.table
    }

    /// Column `col` (a name or a [`Col`]). (`get(i)` is the slice's: the
    /// value at position `i`, if any.)
    pub fn value(&self, col: impl RowColumn) -> Result<&Value> {
        Ok(&self.values[self.slot(&col)?])
    }

    /// The non-NULL `I64` column `col`.
    pub fn i64(&self, col: impl RowColumn) -> Result<i64> {
        self.typed(col, ColumnType::I64, "i64", Value::as_i64)
    }

    /// The `I64` column `col`, `None` if NULL.
    pub fn i64_opt(&self, col: impl RowColumn) -> Result<Option<i64>> {
        self.typed_opt(col, ColumnType::I64, Value::as_i64)
    }

    /// The non-NULL `F64` column `col`.
    pub fn f64(&self, col: impl RowColumn) -> Result<f64> {
        self.typed(col, ColumnType::F64, "f64", Value::as_f64)
    }

    /// The `F64` column `col`, `None` if NULL.
    pub fn f64_opt(&self, col: impl RowColumn) -> Result<Option<f64>> {
        self.typed_opt(col, ColumnType::F64, Value::as_f64)
    }

    /// The non-NULL `Timestamp` column `col` (microseconds since the epoch).
    pub fn timestamp(&self, col: impl RowColumn) -> Result<i64> {
        self.typed(col, ColumnType::Timestamp, "timestamp", Value::as_timestamp)
    }

    /// The `Timestamp` column `col`, `None` if NULL.
    pub fn timestamp_opt(&self, col: impl RowColumn) -> Result<Option<i64>> {
        self.typed_opt(col, ColumnType::Timestamp, Value::as_timestamp)
    }

    /// The non-NULL `Bool` column `col`.
    pub fn bool(&self, col: impl RowColumn) -> Result<bool> {
        self.typed(col, ColumnType::Bool, "bool", Value::as_bool)
    }

    /// The `Bool` column `col`, `None` if NULL.
    pub fn bool_opt(&self, col: impl RowColumn) -> Result<Option<bool>> {
        self.typed_opt(col, ColumnType::Bool, Value::as_bool)
    }

    /// The non-NULL `Text` column `col`.
    pub fn text(&self, col: impl RowColumn) -> Result<&str> {
        self.typed(col, ColumnType::Text, "text", Value::as_text)
    }

    /// The `Text` column `col`, `None` if NULL.
    pub fn text_opt(&self, col: impl RowColumn) -> Result<Option<&str>> {
        self.typed_opt(col, ColumnType::Text, Value::as_text)
    }

    /// The non-NULL `Bytes` column `col`.
    pub fn bytes(&self, col: impl RowColumn) -> Result<&[u8]> {
        self.typed(col, ColumnType::Bytes, "bytes", Value::as_bytes)
    }

    /// The `Bytes` column `col`, `None` if NULL.
    pub fn bytes_opt(&self, col: impl RowColumn) -> Result<Option<&[u8]>> {
        self.typed_opt(col, ColumnType::Bytes, Value::as_bytes)
    }

    fn typed<'a, T>(
        &'a self,
        col: impl RowColumn,
        ty: ColumnType,
        accessor: &str,
        as_t: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<T> {
        let i = self.slot_of_type(&col, ty)?;
        self.read(i, &as_t)?.ok_or_else(|| {
            self.wrong(
                self.position(i),
                &format!("is NULL (read it with {accessor}_opt)"),
            )
        })
    }

    fn typed_opt<'a, T>(
        &'a self,
        col: impl RowColumn,
        ty: ColumnType,
        as_t: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<T>> {
        let i = self.slot_of_type(&col, ty)?;
        self.read(i, &as_t)
    }

    /// Value `i` through `as_t`: `None` if NULL. A value of another type
    /// than its column's cannot come from a read (the row was decoded
    /// against the definition), so it is reported, not converted.
    fn read<'a, T>(
        &'a self,
        i: usize,
        as_t: &impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<T>> {
        let v = &self.values[i];
        if v.is_null() {
            return Ok(None);
        }
        as_t(v).map(Some).ok_or_else(|| {
            self.wrong(
                self.position(i),
                &format!("holds a {} value", v.type_name()),
            )
        })
    }

    /// The index into `values` of `col`, checked to be of type `ty`.
    fn slot_of_type(&self, col: &impl RowColumn, ty: ColumnType) -> Result<usize> {
        let i = self.slot(col)?;
        let pos = self.position(i);
        let have = self.shape.table.columns[pos].ty;
        if have != ty {
            return Err(self.wrong(
                pos,
                &format!("is a {} column, not {}", have.name(), ty.name()),
            ));
        }
        Ok(i)
    }

    /// The index into `values` of `col`.
    fn slot(&self, col: &impl RowColumn) -> Result<usize> {
        let table = &self.shape.table;
        let pos = col.col(table)?.index();
        let i = match &self.shape.positions {
            None => Some(pos),
            Some(p) => p.iter().position(|&c| c == pos),
        };
        match i {
            Some(i) if i < self.values.len() => Ok(i),
            _ => Err(self.wrong(pos, "is not among the row's projected columns")),
        }
    }

    /// The table column of value `i`.
    fn position(&self, i: usize) -> usize {
        self.shape.positions.as_ref().map_or(i, |p| p[i])
    }

    fn wrong(&self, pos: usize, what: &str) -> EngineError {
        let table = &self.shape.table;
        let name = table.columns.get(pos).map_or("?", |c| c.name.as_str());
        EngineError::WrongColumn {
            table: table.name.clone(),
            detail: format!("column {name:?} {what}"),
        }
    }
}

impl Deref for OwnedRow {
    type Target = [Value];

    fn deref(&self) -> &[Value] {
        &self.values
    }
}

/// The values can be changed in place (to write the row back with
/// `update`); their number cannot.
impl std::ops::DerefMut for OwnedRow {
    fn deref_mut(&mut self) -> &mut [Value] {
        &mut self.values
    }
}

impl AsRef<[Value]> for OwnedRow {
    fn as_ref(&self) -> &[Value] {
        &self.values
    }
}

/// Printed as its values are.
impl std::fmt::Debug for OwnedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.values.fmt(f)
    }
}

impl PartialEq for OwnedRow {
    fn eq(&self, other: &OwnedRow) -> bool {
        self.values == other.values
    }
}

impl Eq for OwnedRow {}

impl PartialEq<Row> for OwnedRow {
    fn eq(&self, other: &Row) -> bool {
        &self.values == other
    }
}

impl PartialEq<OwnedRow> for Row {
    fn eq(&self, other: &OwnedRow) -> bool {
        self == &other.values
    }
}

impl PartialEq<[Value]> for OwnedRow {
    fn eq(&self, other: &[Value]) -> bool {
        self.values == other
    }
}

impl PartialOrd for OwnedRow {
    fn partial_cmp(&self, other: &OwnedRow) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OwnedRow {
    fn cmp(&self, other: &OwnedRow) -> Ordering {
        self.values.cmp(&other.values)
    }
}

impl Hash for OwnedRow {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.values.hash(state);
    }
}

impl From<OwnedRow> for Row {
    fn from(r: OwnedRow) -> Row {
        r.values
    }
}

impl IntoIterator for OwnedRow {
    type Item = Value;
    type IntoIter = std::vec::IntoIter<Value>;

    fn into_iter(self) -> Self::IntoIter {
        self.values.into_iter()
    }
}

impl<'a> IntoIterator for &'a OwnedRow {
    type Item = &'a Value;
    type IntoIter = std::slice::Iter<'a, Value>;

    fn into_iter(self) -> Self::IntoIter {
        self.values.iter()
    }
}
