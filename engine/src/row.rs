//! [`RowRef`]: a visible row as a borrowed view of its pinned, share-locked
//! page. Nothing is copied; each accessor decodes only the column asked for.
//!
//! The encoding is drawn in `value`. An accessor finds its column by walking
//! the columns before it (NULLs take no bytes, strings carry a length), or,
//! when every column before it is NOT NULL and of a fixed width, at the
//! offset its [`Col`] precomputed. A row stored before a column was added
//! (`Database::add_column`) reads that column as its default or NULL. Bytes from disk are not trusted: every offset and
//! length is checked against the tuple, and a bad one is
//! [`EngineError::CorruptRow`] naming the table and the row, never a panic.
//! An accessor checks what it reads (the column count, the column's null bit,
//! its bytes); [`RowRef::to_row`] checks the whole row as a full decode does.
//!
//! A `RowRef` lives only inside the callback it is handed to, while the page
//! is share-locked: the callback must not call back into the database (it
//! could wait for a lock this thread holds). Copy out what you need.

use std::sync::Arc;

use heap::Tid;

use crate::error::{EngineError, Result};
use crate::schema::Schema;
use crate::table_def::{Col, Resolved, RowColumn, Shape, TableInfo, col_of};
use crate::value::{
    COUNT_LEN, ColumnType, LEN_PREFIX, Row, Value, bitmap_len, decode_row, unstored_column,
    unstored_detail,
};

/// The TID type rows are named by.
pub type RowId = Tid;

/// A visible row on a share-locked page (module docs).
#[derive(Copy, Clone, Debug)]
pub struct RowRef<'a> {
    id: RowId,
    data: &'a [u8],
    table: &'a TableInfo,
    /// `table` as owned rows share it.
    shape: &'a Arc<Shape>,
}

/// Where a column's value is.
enum Slot<'a> {
    /// The row stores NULL.
    Null,
    /// The value starts at this byte of the row.
    At(usize),
    /// The row was stored before the column was added: it reads the
    /// column's default (or NULL).
    Missing(&'a Value),
}

impl<'a> RowRef<'a> {
    #[inline]
    pub(crate) fn new(id: RowId, data: &'a [u8], schema: &'a Schema) -> RowRef<'a> {
        let shape = schema.shape();
        RowRef {
            id,
            data,
            table: shape.table(),
            shape,
        }
    }

    /// A view of `data`, a row of `shape`'s table (an [`OwnedRow`]'s
    /// bytes).
    #[inline]
    pub(crate) fn over(id: RowId, data: &'a [u8], shape: &'a Arc<Shape>) -> RowRef<'a> {
        RowRef {
            id,
            data,
            table: shape.table(),
            shape,
        }
    }

    /// The row's id (its heap TID).
    #[inline]
    pub fn id(&self) -> RowId {
        self.id
    }

    /// The encoded row (the tuple's data part).
    pub fn raw(&self) -> &'a [u8] {
        self.data
    }

    /// The definition of the row's table.
    pub fn table(&self) -> &'a TableInfo {
        self.table
    }

    /// The column called `name` of this row's table, for the accessors
    /// (resolve it once with [`crate::Table::column`] in a loop).
    pub fn column(&self, name: &str) -> Result<Col> {
        let idx = self.table.column_index(name)?;
        Ok(col_of(self.table, idx))
    }

    /// The non-NULL `I64` column `col`.
    #[inline(always)]
    pub fn i64(&self, col: impl RowColumn) -> Result<i64> {
        match self.handle_direct::<8, _>(&col, ColumnType::I64) {
            Some(b) => Ok(i64::from_le_bytes(b)),
            None => self.i64_resolving(col),
        }
    }

    /// [`i64`](Self::i64) beyond [`handle_direct`](Self::handle_direct)'s case.
    #[inline(never)]
    fn i64_resolving(&self, col: impl RowColumn) -> Result<i64> {
        let col = self.shape.resolve(&col)?;
        self.i64_of(col)
    }

    /// [`i64`](Self::i64) of a column already resolved against this
    /// row's table (an owned row's accessor, which resolved it).
    #[inline(always)]
    pub(crate) fn i64_of(&self, col: Col) -> Result<i64> {
        match self.direct::<8>(&col, ColumnType::I64) {
            Some(b) => Ok(i64::from_le_bytes(b)),
            None => self.i64_checked(col),
        }
    }

    /// [`i64`](Self::i64) beyond [`direct`](Self::direct)'s case.
    #[inline(never)]
    fn i64_checked(&self, col: Col) -> Result<i64> {
        match self.i64_located(col)? {
            Some(v) => Ok(v),
            None => Err(self.wrong(col, "is NULL (read it with i64_opt)")),
        }
    }

    /// The `I64` column `col`, `None` if NULL.
    #[inline(always)]
    pub fn i64_opt(&self, col: impl RowColumn) -> Result<Option<i64>> {
        match self.handle_direct::<8, _>(&col, ColumnType::I64) {
            Some(b) => Ok(Some(i64::from_le_bytes(b))),
            None => self.i64_opt_resolving(col),
        }
    }

    /// [`i64_opt`](Self::i64_opt) beyond [`handle_direct`](Self::handle_direct)'s case.
    #[inline(never)]
    fn i64_opt_resolving(&self, col: impl RowColumn) -> Result<Option<i64>> {
        let col = self.shape.resolve(&col)?;
        self.i64_opt_of(col)
    }

    /// [`i64_opt`](Self::i64_opt) of a column already resolved against this
    /// row's table (an owned row's accessor, which resolved it).
    #[inline(always)]
    pub(crate) fn i64_opt_of(&self, col: Col) -> Result<Option<i64>> {
        match self.direct::<8>(&col, ColumnType::I64) {
            Some(b) => Ok(Some(i64::from_le_bytes(b))),
            None => self.i64_located(col),
        }
    }

    #[inline(never)]
    fn i64_located(&self, col: Col) -> Result<Option<i64>> {
        match self.slot(col, ColumnType::I64)? {
            Slot::Null => Ok(None),
            Slot::At(p) => Ok(Some(i64::from_le_bytes(self.fixed(p)?))),
            Slot::Missing(v) => self.missing(col, v, Value::as_i64),
        }
    }

    /// The non-NULL `F64` column `col`.
    #[inline(always)]
    pub fn f64(&self, col: impl RowColumn) -> Result<f64> {
        match self.handle_direct::<8, _>(&col, ColumnType::F64) {
            Some(b) => Ok(f64::from_le_bytes(b)),
            None => self.f64_resolving(col),
        }
    }

    /// [`f64`](Self::f64) beyond [`handle_direct`](Self::handle_direct)'s case.
    #[inline(never)]
    fn f64_resolving(&self, col: impl RowColumn) -> Result<f64> {
        let col = self.shape.resolve(&col)?;
        self.f64_of(col)
    }

    /// [`f64`](Self::f64) of a column already resolved against this
    /// row's table (an owned row's accessor, which resolved it).
    #[inline(always)]
    pub(crate) fn f64_of(&self, col: Col) -> Result<f64> {
        match self.direct::<8>(&col, ColumnType::F64) {
            Some(b) => Ok(f64::from_le_bytes(b)),
            None => self.f64_checked(col),
        }
    }

    /// [`f64`](Self::f64) beyond [`direct`](Self::direct)'s case.
    #[inline(never)]
    fn f64_checked(&self, col: Col) -> Result<f64> {
        match self.f64_located(col)? {
            Some(v) => Ok(v),
            None => Err(self.wrong(col, "is NULL (read it with f64_opt)")),
        }
    }

    /// The `F64` column `col`, `None` if NULL.
    #[inline(always)]
    pub fn f64_opt(&self, col: impl RowColumn) -> Result<Option<f64>> {
        match self.handle_direct::<8, _>(&col, ColumnType::F64) {
            Some(b) => Ok(Some(f64::from_le_bytes(b))),
            None => self.f64_opt_resolving(col),
        }
    }

    /// [`f64_opt`](Self::f64_opt) beyond [`handle_direct`](Self::handle_direct)'s case.
    #[inline(never)]
    fn f64_opt_resolving(&self, col: impl RowColumn) -> Result<Option<f64>> {
        let col = self.shape.resolve(&col)?;
        self.f64_opt_of(col)
    }

    /// [`f64_opt`](Self::f64_opt) of a column already resolved against this
    /// row's table (an owned row's accessor, which resolved it).
    #[inline(always)]
    pub(crate) fn f64_opt_of(&self, col: Col) -> Result<Option<f64>> {
        match self.direct::<8>(&col, ColumnType::F64) {
            Some(b) => Ok(Some(f64::from_le_bytes(b))),
            None => self.f64_located(col),
        }
    }

    #[inline(never)]
    fn f64_located(&self, col: Col) -> Result<Option<f64>> {
        match self.slot(col, ColumnType::F64)? {
            Slot::Null => Ok(None),
            Slot::At(p) => Ok(Some(f64::from_bits(u64::from_le_bytes(self.fixed(p)?)))),
            Slot::Missing(v) => self.missing(col, v, Value::as_f64),
        }
    }

    /// The non-NULL `Timestamp` column `col` (microseconds since the epoch).
    #[inline(always)]
    pub fn timestamp(&self, col: impl RowColumn) -> Result<i64> {
        match self.handle_direct::<8, _>(&col, ColumnType::Timestamp) {
            Some(b) => Ok(i64::from_le_bytes(b)),
            None => self.timestamp_resolving(col),
        }
    }

    /// [`timestamp`](Self::timestamp) beyond [`handle_direct`](Self::handle_direct)'s case.
    #[inline(never)]
    fn timestamp_resolving(&self, col: impl RowColumn) -> Result<i64> {
        let col = self.shape.resolve(&col)?;
        self.timestamp_of(col)
    }

    /// [`timestamp`](Self::timestamp) of a column already resolved against this
    /// row's table (an owned row's accessor, which resolved it).
    #[inline(always)]
    pub(crate) fn timestamp_of(&self, col: Col) -> Result<i64> {
        match self.direct::<8>(&col, ColumnType::Timestamp) {
            Some(b) => Ok(i64::from_le_bytes(b)),
            None => self.timestamp_checked(col),
        }
    }

    /// [`timestamp`](Self::timestamp) beyond [`direct`](Self::direct)'s case.
    #[inline(never)]
    fn timestamp_checked(&self, col: Col) -> Result<i64> {
        match self.timestamp_located(col)? {
            Some(v) => Ok(v),
            None => Err(self.wrong(col, "is NULL (read it with timestamp_opt)")),
        }
    }

    /// The `Timestamp` column `col`, `None` if NULL.
    #[inline(always)]
    pub fn timestamp_opt(&self, col: impl RowColumn) -> Result<Option<i64>> {
        match self.handle_direct::<8, _>(&col, ColumnType::Timestamp) {
            Some(b) => Ok(Some(i64::from_le_bytes(b))),
            None => self.timestamp_opt_resolving(col),
        }
    }

    /// [`timestamp_opt`](Self::timestamp_opt) beyond [`handle_direct`](Self::handle_direct)'s case.
    #[inline(never)]
    fn timestamp_opt_resolving(&self, col: impl RowColumn) -> Result<Option<i64>> {
        let col = self.shape.resolve(&col)?;
        self.timestamp_opt_of(col)
    }

    /// [`timestamp_opt`](Self::timestamp_opt) of a column already resolved against this
    /// row's table (an owned row's accessor, which resolved it).
    #[inline(always)]
    pub(crate) fn timestamp_opt_of(&self, col: Col) -> Result<Option<i64>> {
        match self.direct::<8>(&col, ColumnType::Timestamp) {
            Some(b) => Ok(Some(i64::from_le_bytes(b))),
            None => self.timestamp_located(col),
        }
    }

    #[inline(never)]
    fn timestamp_located(&self, col: Col) -> Result<Option<i64>> {
        match self.slot(col, ColumnType::Timestamp)? {
            Slot::Null => Ok(None),
            Slot::At(p) => Ok(Some(i64::from_le_bytes(self.fixed(p)?))),
            Slot::Missing(v) => self.missing(col, v, Value::as_timestamp),
        }
    }

    /// The non-NULL `Bool` column `col`.
    #[inline(always)]
    pub fn bool(&self, col: impl RowColumn) -> Result<bool> {
        let col = self.shape.resolve(&col)?;
        self.bool_opt(Resolved(col))?
            .ok_or_else(|| self.wrong(col, "is NULL (read it with bool_opt)"))
    }

    /// The `Bool` column `col`, `None` if NULL.
    pub fn bool_opt(&self, col: impl RowColumn) -> Result<Option<bool>> {
        let col = self.shape.resolve(&col)?;
        match self.slot(col, ColumnType::Bool)? {
            Slot::Null => Ok(None),
            Slot::At(p) => match self.fixed::<1>(p)? {
                [0] => Ok(Some(false)),
                [1] => Ok(Some(true)),
                [b] => Err(self.corrupt(format!(
                    "bool column {:?} holds byte {b}, not 0 or 1",
                    self.name(col)
                ))),
            },
            Slot::Missing(v) => self.missing(col, v, Value::as_bool),
        }
    }

    /// The non-NULL `Bytes` column `col`, borrowed from the page.
    #[inline]
    pub fn bytes(&self, col: impl RowColumn) -> Result<&'a [u8]> {
        let col = self.shape.resolve(&col)?;
        self.bytes_opt(Resolved(col))?
            .ok_or_else(|| self.wrong(col, "is NULL (read it with bytes_opt)"))
    }

    /// The `Bytes` column `col`, `None` if NULL.
    pub fn bytes_opt(&self, col: impl RowColumn) -> Result<Option<&'a [u8]>> {
        let col = self.shape.resolve(&col)?;
        match self.slot(col, ColumnType::Bytes)? {
            Slot::Null => Ok(None),
            Slot::At(p) => {
                let (len, body) = self.len_prefixed(p)?;
                Ok(Some(&self.data[body..body + len]))
            }
            Slot::Missing(v) => self.missing(col, v, Value::as_bytes),
        }
    }

    /// The non-NULL `Text` column `col`, borrowed from the page.
    #[inline]
    pub fn text(&self, col: impl RowColumn) -> Result<&'a str> {
        let col = self.shape.resolve(&col)?;
        self.text_opt(Resolved(col))?
            .ok_or_else(|| self.wrong(col, "is NULL (read it with text_opt)"))
    }

    /// The `Text` column `col`, `None` if NULL. Bytes that are not UTF-8
    /// are [`EngineError::CorruptRow`].
    pub fn text_opt(&self, col: impl RowColumn) -> Result<Option<&'a str>> {
        let col = self.shape.resolve(&col)?;
        match self.slot(col, ColumnType::Text)? {
            Slot::Null => Ok(None),
            Slot::At(p) => {
                let (len, body) = self.len_prefixed(p)?;
                std::str::from_utf8(&self.data[body..body + len])
                    .map(Some)
                    .map_err(|e| {
                        self.corrupt(format!(
                            "text column {:?} is not valid UTF-8 ({e})",
                            self.name(col)
                        ))
                    })
            }
            Slot::Missing(v) => self.missing(col, v, Value::as_text),
        }
    }

    /// Column `col` (a name or a [`Col`]) as an owned [`Value`].
    pub fn value(&self, col: impl RowColumn) -> Result<Value> {
        let col = self.shape.resolve(&col)?;
        Ok(match col.ty {
            ColumnType::I64 => self.i64_opt(Resolved(col))?.map_or(Value::Null, Value::I64),
            ColumnType::F64 => self.f64_opt(Resolved(col))?.map_or(Value::Null, Value::F64),
            ColumnType::Timestamp => self
                .timestamp_opt(Resolved(col))?
                .map_or(Value::Null, Value::Timestamp),
            ColumnType::Bool => self
                .bool_opt(Resolved(col))?
                .map_or(Value::Null, Value::Bool),
            ColumnType::Bytes => self
                .bytes_opt(Resolved(col))?
                .map_or(Value::Null, |b| Value::Bytes(b.to_vec())),
            ColumnType::Text => self
                .text_opt(Resolved(col))?
                .map_or(Value::Null, |s| Value::Text(s.to_string())),
        })
    }

    /// The whole row's values, decoded and checked as every owned read is.
    pub fn to_row(&self) -> Result<Row> {
        decode_row(&self.table.columns, self.data, |d| self.corrupt(d))
    }

    /// The definition its owned copies share.
    pub(crate) fn shape(&self) -> &Arc<Shape> {
        self.shape
    }

    /// [`direct`](Self::direct) for a [`Col`] handle checked against this
    /// row's table, the accessors' path in a loop; `None` for anything
    /// else (a name, a handle of another table, or not `direct`'s case),
    /// which the accessor's resolving path then reads or refuses. The
    /// handle stays where the caller keeps it and nothing on the way is a
    /// `Result`: a resolved `Result<Col>` was built in memory (an error's
    /// size, the handle at an odd offset) on every read.
    #[inline(always)]
    fn handle_direct<const N: usize, C: RowColumn>(
        &self,
        col: &C,
        ty: ColumnType,
    ) -> Option<[u8; N]> {
        let c = col.handle_ref()?;
        if !self.shape.accepts(c) {
            return None;
        }
        self.direct::<N>(c, ty)
    }

    /// The `N` bytes of column `col` (a column of this table:
    /// `RowColumn::col`) in the common case, read straight from the row:
    /// the column is of type `ty` and at a fixed offset ([`Col`]), the row
    /// stores it (and no more columns than the table has), its null bit is
    /// clear and its bytes lie inside the row. `None` otherwise: the
    /// accessor's checked path then finds the value or words the error,
    /// so every check [`locate`](Self::locate) makes is made here too or
    /// there. Nothing is built on the way (no `Result`, no message), so
    /// it stays in registers in the caller's loop.
    #[inline(always)]
    fn direct<const N: usize>(&self, col: &Col, ty: ColumnType) -> Option<[u8; N]> {
        let off = col.fixed()? as usize;
        if col.ty != ty {
            return None;
        }
        let d = self.data;
        let idx = col.idx as usize;
        let count = d.get(..COUNT_LEN)?;
        let stored = usize::from(u16::from_le_bytes([count[0], count[1]]));
        if idx >= stored || stored > self.table.columns.len() {
            return None;
        }
        // `idx < stored`: its null bit is inside the bitmap.
        if d.get(COUNT_LEN + idx / 8)? & (1 << (idx % 8)) != 0 {
            return None;
        }
        let pos = COUNT_LEN + bitmap_len(stored) + off;
        d.get(pos..pos + N)?.try_into().ok()
    }

    /// Check that `col` (a column of this table: `RowColumn::col`) is of
    /// type `ty`, and find it.
    #[inline]
    fn slot(&self, col: Col, ty: ColumnType) -> Result<Slot<'a>> {
        if col.ty != ty {
            return Err(self.wrong(
                col,
                &format!("is a {} column, not {}", col.ty.name(), ty.name()),
            ));
        }
        self.locate(col)
    }

    /// Where column `col`'s value is.
    #[inline]
    fn locate(&self, col: Col) -> Result<Slot<'a>> {
        let cols = &self.table.columns;
        let idx = col.idx as usize;
        let n = cols.len();
        let stored = self
            .data
            .get(..COUNT_LEN)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .ok_or_else(|| self.corrupt("row shorter than its column count".into()))?;
        if stored > n {
            return Err(self.corrupt(format!("{stored} columns stored, the table has {n}")));
        }
        if idx >= stored {
            if let Some(c) = unstored_column(cols, stored) {
                return Err(self.corrupt(unstored_detail(stored, c)));
            }
            return Ok(Slot::Missing(cols[idx].missing()));
        }
        let bitmap = self
            .data
            .get(COUNT_LEN..COUNT_LEN + bitmap_len(stored))
            .ok_or_else(|| self.corrupt("row ends inside its null bitmap".into()))?;
        let is_null = |i: usize| bitmap[i / 8] & (1 << (i % 8)) != 0;
        if is_null(idx) {
            if !cols[idx].nullable {
                return Err(self.corrupt(format!(
                    "NULL stored in NOT NULL column {:?}",
                    cols[idx].name
                )));
            }
            return Ok(Slot::Null);
        }
        let mut pos = COUNT_LEN + bitmap.len();
        if let Some(off) = col.fixed() {
            return Ok(Slot::At(pos + off as usize));
        }
        for (i, c) in cols[..idx].iter().enumerate() {
            if is_null(i) {
                continue;
            }
            pos = match c.ty.fixed_width() {
                Some(w) => pos + w,
                None => {
                    let (len, body) = self.len_prefixed(pos)?;
                    body + len
                }
            };
        }
        Ok(Slot::At(pos))
    }

    /// The `N` bytes of a fixed-width value at `start`, checked to lie
    /// inside the row.
    #[inline]
    fn fixed<const N: usize>(&self, start: usize) -> Result<[u8; N]> {
        let b = start
            .checked_add(N)
            .and_then(|end| self.data.get(start..end))
            .ok_or_else(|| {
                self.corrupt(format!(
                    "a {N}-byte value at byte {start} runs past the row's {} bytes",
                    self.data.len()
                ))
            })?;
        Ok(b.try_into().expect("N bytes"))
    }

    /// A length-prefixed value at `start`: (length, offset of the bytes),
    /// checked to lie inside the row.
    fn len_prefixed(&self, start: usize) -> Result<(usize, usize)> {
        let len = u32::from_le_bytes(self.fixed::<LEN_PREFIX>(start)?) as usize;
        let body = start + LEN_PREFIX;
        if body
            .checked_add(len)
            .is_none_or(|end| end > self.data.len())
        {
            return Err(self.corrupt(format!(
                "a value of {len} bytes at byte {body} runs past the row's {} bytes",
                self.data.len()
            )));
        }
        Ok((len, body))
    }

    /// A missing column's default read through `as_t` (checked against the
    /// column's type when the column was added; a mismatch is a damaged
    /// catalog, reported rather than read as something else).
    fn missing<T>(
        &self,
        col: Col,
        v: &'a Value,
        as_t: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<T>> {
        if v.is_null() {
            return Ok(None);
        }
        as_t(v).map(Some).ok_or_else(|| {
            self.corrupt(format!(
                "the default of {} column {:?} is a {} value",
                col.ty.name(),
                self.name(col),
                v.type_name()
            ))
        })
    }

    fn name(&self, col: Col) -> &'a str {
        self.table
            .columns
            .get(col.idx as usize)
            .map_or("?", |c| c.name.as_str())
    }

    fn wrong(&self, col: Col, what: &str) -> EngineError {
        EngineError::WrongColumn {
            table: self.table.name.clone(),
            detail: format!("column {:?} {what}", self.name(col)),
        }
    }

    fn corrupt(&self, detail: String) -> EngineError {
        EngineError::CorruptRow {
            table: self.table.name.clone(),
            row_id: self.id,
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Column, encode_row};
    use bufmgr::RelId;

    /// A table whose `a`, `b` and `t` sit at fixed offsets (`a` and `b` NOT
    /// NULL `I64`/`F64`, `t` a nullable `Timestamp`), and `late`, added
    /// after some rows were stored, with a default.
    fn table() -> Arc<Shape> {
        Shape::whole(Arc::new(TableInfo {
            name: "t".into(),
            rel: RelId(7),
            columns: vec![
                Column::new("a", ColumnType::I64),
                Column::new("b", ColumnType::F64),
                Column::nullable("t", ColumnType::Timestamp),
                Column::new("late", ColumnType::I64).with_default(Value::I64(42)),
            ],
            logged: true,
        }))
    }

    fn encoded(shape: &Shape, row: &[Value]) -> Vec<u8> {
        encode_row("t", &shape.table.columns, row).expect("encode")
    }

    fn col(shape: &Shape, name: &str) -> Col {
        name.col(&shape.table).expect("a column of the table")
    }

    const ID: RowId = Tid::new(3, 4);

    #[test]
    fn fixed_offset_columns_read_their_values_and_nulls_without_the_walk() {
        let shape = table();
        let data = encoded(
            &shape,
            &[Value::I64(-5), Value::F64(2.5), Value::Null, Value::I64(9)],
        );
        let row = RowRef::over(ID, &data, &shape);
        assert_eq!(row.i64(col(&shape, "a")).unwrap(), -5);
        assert_eq!(row.i64_opt("a").unwrap(), Some(-5));
        assert_eq!(row.f64(col(&shape, "b")).unwrap(), 2.5);
        assert_eq!(row.f64_opt("b").unwrap(), Some(2.5));
        assert_eq!(row.timestamp_opt(col(&shape, "t")).unwrap(), None);
        assert_eq!(row.i64(col(&shape, "late")).unwrap(), 9);
        let null = row.timestamp(col(&shape, "t")).unwrap_err();
        assert!(
            matches!(&null, EngineError::WrongColumn { detail, .. } if detail.contains("is NULL")),
            "{null:?}"
        );
        let typed = row.i64(col(&shape, "b")).unwrap_err();
        assert!(
            matches!(&typed, EngineError::WrongColumn { detail, .. } if detail.contains("is a f64 column")),
            "{typed:?}"
        );
    }

    #[test]
    fn a_row_stored_before_a_column_was_added_reads_its_default_at_a_fixed_offset() {
        let shape = table();
        let three = Shape::whole(Arc::new(TableInfo {
            columns: shape.table.columns[..3].to_vec(),
            ..(*shape.table).clone()
        }));
        let data = encoded(
            &three,
            &[Value::I64(1), Value::F64(0.0), Value::Timestamp(8)],
        );
        let row = RowRef::over(ID, &data, &shape);
        assert_eq!(row.i64(col(&shape, "late")).unwrap(), 42);
        assert_eq!(row.timestamp(col(&shape, "t")).unwrap(), 8);
    }

    /// Each damage of a row's count, null bitmap or length, read through
    /// the fixed-offset path: a `CorruptRow` naming the table and the row.
    #[test]
    fn damaged_counts_null_bits_and_lengths_are_corrupt_rows_never_values() {
        let shape = table();
        let good = encoded(
            &shape,
            &[
                Value::I64(1),
                Value::F64(1.0),
                Value::Timestamp(2),
                Value::I64(3),
            ],
        );
        let a = col(&shape, "a");
        let late = col(&shape, "late");
        let mut more_columns = good.clone();
        more_columns[..2].copy_from_slice(&5u16.to_le_bytes());
        let mut null_in_not_null = good.clone();
        null_in_not_null[COUNT_LEN] |= 1;
        let cut = &good[..good.len() - 1];
        let head_only = &good[..COUNT_LEN];
        for (what, data, c) in [
            ("more columns than the table", &more_columns[..], a),
            ("NULL in a NOT NULL column", &null_in_not_null[..], a),
            ("cut inside the last value", cut, late),
            ("cut after the count", head_only, a),
            ("empty", &[][..], a),
        ] {
            let row = RowRef::over(ID, data, &shape);
            for e in [row.i64(c).unwrap_err(), row.i64_opt(c).unwrap_err()] {
                assert!(
                    matches!(&e, EngineError::CorruptRow { table, row_id, .. } if table == "t" && *row_id == ID),
                    "{what}: {e:?}"
                );
            }
        }
    }
}
