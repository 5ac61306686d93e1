//! [`OwnedRow`]: a row copied out of its page, as the owned reads return
//! it (`get`, `get_by_key`, `index_lookup`, the scan and range iterators).
//!
//! It reads like its values (it dereferences to `[Value]`, so `row[0]`,
//! `row.len()` and comparisons with a `Vec<Value>` work as on the plain
//! vector) and carries the definition of its table, so a column can be read
//! by name (`row.value("name")`, `row.text("name")`) or by a resolved
//! [`Col`] (`row.text(col)`), with the typed accessors [`crate::RowRef`] has.
//!
//! A row of a table scan ([`crate::RowIter`]) is not decoded when it is
//! read: the scan checks each tuple it keeps from a page whole, as a full
//! decode would, noting its place in the page, then copies them, still
//! under the page's lock, into one buffer (reused for the next page when
//! no row holds it any more): the span from the first to the last in one
//! copy when they cover at least half of it, each on its own otherwise
//! ([`PageCopy::copy_from`]). The buffer has an entry per row (its id and
//! its tuple's range), and each row is a
//! reference-counted handle on that copy and its entry's number: two
//! words, moved out of `next` and dropped without a check of anything but
//! the count. The references of a page's rows are added to the count at
//! once when the page is read (`counted::Batch`), so handing a row out
//! touches no atomic; dropping it is one atomic decrement. A typed accessor decodes just its column from those bytes,
//! as `RowRef` does, without allocating. The values are built, once, only
//! when asked for: `row[i]`, `values()`, `value()`, `into_values()`,
//! comparing, hashing, printing, or changing the row in place (after which
//! the values are the row). They are kept in the copy beside the entry, so
//! a row's clones share them. A scanned row outlives its transaction, its
//! iterator and its page's eviction: the copy is its own.
//!
//! The copy is freed with the last row of its page: a row kept after the
//! scan holds its page's whole copy (up to a page, 8 KiB, however small the
//! row), and the values built for any row of that page. To keep a few rows
//! of many pages for long, keep their values (`into_values()`, or a change
//! in place), which hold no copy.
//!
//! ```text
//!   OwnedRow ─┬─ Values:  values [Value; n]  (n = the table's columns, or the projected ones)
//!             │           shape: Arc ── the table's definition (the version the row was read with)
//!             │                      └─ positions: the table column of each value, if projected
//!             └─ Scanned: page: Counted ── PageCopy: the kept tuples of one page, and the shape
//!                         slot: u32       rows[slot]: id, start..end (the row's tuple in the copy)
//!                                         values[slot]: built from the tuple when first needed
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
use std::sync::{Arc, OnceLock};

mod counted;
pub(crate) use counted::{Batch, Counted};

use crate::error::{EngineError, Result};
use crate::row::{RowId, RowRef};
use crate::table_def::{Resolved, RowColumn, Shape, TableInfo};
use crate::value::{ColumnType, Row, Value, check_row};

/// A row copied out of its page, readable by column name or handle (module
/// docs).
#[derive(Clone)]
pub struct OwnedRow {
    repr: Repr,
}

/// What an [`OwnedRow`] is made of.
#[derive(Clone)]
enum Repr {
    /// Its values (the reads other than a scan, and a scanned row once it
    /// has been changed in place), boxed: a scan's loop drops a row with
    /// an inlined decrement, and this variant's drop (every value's, then
    /// the vector's) stays behind one call instead of being inlined there
    /// beside it; a row is two words, not five.
    Values(BoxedValues),
    /// A scanned row: entry `slot` of its page's shared copy (its id, its
    /// tuple, checked whole when the page was read, and its values once
    /// built). Two words: a scan hands out a row by moving just these.
    Scanned { page: Counted<PageCopy>, slot: u32 },
}

/// Two words: a scan hands a row out by moving these (with its id).
const _: () = assert!(std::mem::size_of::<OwnedRow>() == 16);

/// The values of a row that is not (or no longer) a scan's.
#[derive(Clone)]
struct Values {
    values: Row,
    shape: Arc<Shape>,
}

/// [`Values`] boxed, with the drop of what the box holds out of line: a
/// row's drop glue is then small enough to be inlined into a scan's loop
/// (the page handle's decrement, and a call on this variant's side only).
/// The box is `None` only once taken (by `into_inner`, or the drop).
#[derive(Clone)]
struct BoxedValues(Option<Box<Values>>);

impl BoxedValues {
    fn new(values: Values) -> BoxedValues {
        BoxedValues(Some(Box::new(values)))
    }

    #[inline]
    fn get(&self) -> &Values {
        self.0
            .as_deref()
            .expect("a row's values are there until it is dropped")
    }

    #[inline]
    fn get_mut(&mut self) -> &mut Values {
        self.0
            .as_deref_mut()
            .expect("a row's values are there until it is dropped")
    }

    fn into_inner(mut self) -> Values {
        *self
            .0
            .take()
            .expect("a row's values are there until it is dropped")
    }
}

impl Drop for BoxedValues {
    #[inline(always)]
    fn drop(&mut self) {
        // `take` leaves `None` in place, which the field's own drop then
        // sees (inlined here) and skips: only the call below drops values.
        drop_values(self.0.take());
    }
}

#[inline(never)]
fn drop_values(values: Option<Box<Values>>) {
    drop(values);
}

/// A copy of one page's tuples is shorter than a page, so its offsets fit
/// the `u32`s its entries keep, and it holds fewer than `u32::MAX` rows.
const _: () = assert!(bufmgr::PAGE_SIZE <= u32::MAX as usize);

/// The tuples a scan kept from one page, copied once under the page's
/// lock and shared (reference-counted, [`Counted`]) by the rows made of
/// them, with an entry per row and the shape of those rows. One reference
/// count per row: a `bytes::Bytes` slice per row would be a second one
/// beside the shape's.
#[derive(Debug)]
pub(crate) struct PageCopy {
    data: Vec<u8>,
    rows: Vec<Entry>,
    /// The values of each row, built from its tuple the first time
    /// something needs them (kept here, not in the row, so that the row
    /// handed out per `next` is two words; clones of a row share them).
    /// Apart from `rows`, whose entries are written once per tuple under
    /// the page's lock. Made, a slot per row, only when the first of the
    /// page's rows needs its values: a loop that reads columns through the
    /// typed accessors never builds them, so a page costs it nothing here.
    values: OnceLock<Box<[OnceLock<Row>]>>,
    shape: Arc<Shape>,
    /// While the page is visited, the entries' ranges are positions in
    /// the page, not yet in `data`: the lowest start and the highest end
    /// of them, and the bytes they cover ([`PageCopy::copy_from`]).
    low: u32,
    high: u32,
    kept: u32,
}

/// One row of a [`PageCopy`]: its id and its tuple, bytes `start..end` of
/// the copy.
#[derive(Copy, Clone, Debug)]
struct Entry {
    /// The row's id, [`RowId::block`] and [`RowId::offset`] apart (so that
    /// `plain` fits beside them).
    block: u32,
    offset: u16,
    /// The table's plan accepted the tuple ([`PageCopy::keep_common`]): it
    /// stores every column of the table and no NULL, so a column of a
    /// fixed offset is at that offset past the plan's head, within the
    /// tuple ([`OwnedRow::plain_fixed`]).
    plain: bool,
    start: u32,
    end: u32,
}

impl Entry {
    #[inline(always)]
    fn id(&self) -> RowId {
        RowId {
            block: self.block,
            offset: self.offset,
        }
    }
}

/// An entry stays 16 bytes: `plain` sits where the id's padding was.
const _: () = assert!(std::mem::size_of::<Entry>() == 16);

impl PageCopy {
    /// An empty copy for rows of `shape`, without room yet (a scan's
    /// first copy, before its first page).
    pub fn empty(shape: Arc<Shape>) -> Counted<PageCopy> {
        Counted::new(PageCopy::over(Vec::new(), Vec::new(), shape))
    }

    /// An empty copy for rows of `shape`, in `prev`'s buffers if no row
    /// holds `prev` any more (the common case of a loop that reads each row
    /// and drops it), in new ones otherwise.
    pub fn after(prev: &mut Counted<PageCopy>, shape: Arc<Shape>) -> PageCopy {
        match Counted::get_mut(prev) {
            Some(p) if p.data.capacity() > 0 => {
                let mut data = std::mem::take(&mut p.data);
                let mut rows = std::mem::take(&mut p.rows);
                data.clear();
                rows.clear();
                PageCopy::over(data, rows, shape)
            }
            _ => PageCopy::over(Vec::with_capacity(bufmgr::PAGE_SIZE), Vec::new(), shape),
        }
    }

    fn over(data: Vec<u8>, rows: Vec<Entry>, shape: Arc<Shape>) -> PageCopy {
        PageCopy {
            data,
            rows,
            values: OnceLock::new(),
            shape,
            low: u32::MAX,
            high: 0,
            kept: 0,
        }
    }

    /// Keep the encoded tuple of row `id` of the copy's table, bytes
    /// `at..at + tuple.len()` of the page being visited, checked whole as
    /// a full decode checks it (its entry is the next number), or
    /// [`EngineError::CorruptRow`] naming the table and the row (then
    /// nothing is kept). The common row (every column stored, no NULL) is
    /// checked by the table's [`RowPlan`](crate::value::RowPlan); any
    /// other, or one the plan does not accept, by `check_row`. The bytes
    /// are copied by [`copy_from`](Self::copy_from), with the page's other
    /// kept tuples, before the page's lock is released.
    #[inline]
    pub fn keep(&mut self, id: RowId, tuple: &[u8], at: usize) -> Result<()> {
        if self.keep_common(id, tuple, at) {
            return Ok(());
        }
        self.keep_checked(id, tuple, at)
    }

    /// [`keep`](Self::keep) of the common row, the one the table's plan
    /// accepts (`false`, nothing kept: any other, for
    /// [`keep_checked`](Self::keep_checked)). Small, so that it is inlined
    /// into the page's loop over its tuples; a `keep` inlined whole (the
    /// error's path with it) made that loop call out once per tuple.
    #[inline(always)]
    pub fn keep_common(&mut self, id: RowId, tuple: &[u8], at: usize) -> bool {
        if !self.shape.plan.accepts(tuple) {
            return false;
        }
        self.record(id, tuple.len(), at, true);
        true
    }

    /// [`keep`](Self::keep) of a row the plan does not accept: checked by
    /// `check_row`, which words the error if the bytes are bad.
    #[inline(never)]
    fn keep_checked(&mut self, id: RowId, tuple: &[u8], at: usize) -> Result<()> {
        let table = self.shape.table();
        check_row(&table.columns, tuple, |detail| EngineError::CorruptRow {
            table: table.name.clone(),
            row_id: id,
            detail,
        })?;
        self.record(id, tuple.len(), at, false);
        Ok(())
    }

    /// Note the entry of row `id`, a checked tuple of `len` bytes at `at`
    /// in the page being visited.
    #[inline(always)]
    fn record(&mut self, id: RowId, len: usize, at: usize, plain: bool) {
        // Positions in a page, and a page's number of tuples, fit a `u32`
        // (the assertion above `PageCopy`).
        let (start, end) = (at as u32, (at + len) as u32);
        self.low = self.low.min(start);
        self.high = self.high.max(end);
        self.kept += end - start;
        self.rows.push(Entry {
            block: id.block,
            offset: id.offset,
            plain,
            start,
            end,
        });
    }

    /// Copy the kept tuples out of `page` (the page [`keep`](Self::keep)
    /// was told their positions in, still locked): when they cover at
    /// least half of the span from the first to the last (a scan without
    /// a filter keeps a page's every tuple, its headers between them),
    /// that span in one copy, the entries moved to it; otherwise each
    /// tuple on its own, packed, so that a selective filter's copy holds
    /// only what it kept. Under the shared lock a tuple's bytes do not
    /// change (hint bits in tuple headers do, and no entry covers a
    /// header), so what `keep` checked is what is copied.
    pub fn copy_from(&mut self, page: &[u8]) {
        if self.rows.is_empty() {
            return;
        }
        let (low, high) = (self.low, self.high);
        if high - low <= self.kept.saturating_mul(2) {
            self.data
                .extend_from_slice(&page[low as usize..high as usize]);
            for e in &mut self.rows {
                e.start -= low;
                e.end -= low;
            }
        } else {
            for e in &mut self.rows {
                let start = self.data.len() as u32;
                self.data
                    .extend_from_slice(&page[e.start as usize..e.end as usize]);
                e.end = start + (e.end - e.start);
                e.start = start;
            }
        }
    }

    /// The number of entries.
    #[inline]
    pub fn len(&self) -> u32 {
        // At most a page's tuples: the assertion above `PageCopy`.
        self.rows.len() as u32
    }

    /// The id of row `slot`.
    #[inline]
    pub fn id(&self, slot: u32) -> RowId {
        self.rows[slot as usize].id()
    }

    /// The shape of the copy's rows.
    pub fn shape(&self) -> &Arc<Shape> {
        &self.shape
    }

    /// The copy, shared by the rows to be made of it. The spare room of a
    /// copy that fills less than half of its buffer (a selective filter's)
    /// is given back first, so that the buffer is never twice the bytes
    /// copied or more, and rows kept long never hold a page's worth of
    /// memory each: a filter keeping one 2.5 KB row of a page's three held
    /// an 8 KiB buffer per row when only copies under a quarter full were
    /// shrunk. A scan without a filter over pages more than half full is
    /// not shrunk.
    pub fn share(mut self) -> Counted<PageCopy> {
        if self.data.len() < self.data.capacity() / 2 {
            self.data.shrink_to_fit();
            self.rows.shrink_to_fit();
        }
        Counted::new(self)
    }

    /// The tuple of row `slot`.
    #[inline]
    fn tuple(&self, slot: u32) -> (RowId, &[u8]) {
        let e = &self.rows[slot as usize];
        (e.id(), &self.data[e.start as usize..e.end as usize])
    }

    /// The slot of row `slot`'s values (the page's slots made if not yet).
    fn built(&self, slot: u32) -> &OnceLock<Row> {
        let slots = self
            .values
            .get_or_init(|| self.rows.iter().map(|_| OnceLock::new()).collect());
        &slots[slot as usize]
    }

    /// The values of row `slot` (the projected ones if projected).
    fn decode(&self, slot: u32) -> Row {
        let (id, data) = self.tuple(slot);
        let whole = match RowRef::over(id, data, &self.shape).to_row() {
            Ok(whole) => whole,
            // `PageCopy::keep` checked these bytes as `check_row` does, which
            // accepts exactly the bytes `decode_row` accepts (its unit test),
            // and the copy is never written once shared.
            Err(e) => unreachable!("a scanned row's tuple was checked when it was read: {e}"),
        };
        match &self.shape.positions {
            None => whole,
            Some(p) => p.iter().map(|&i| whole[i].clone()).collect(),
        }
    }
}

impl OwnedRow {
    pub(crate) fn new(values: Row, shape: Arc<Shape>) -> OwnedRow {
        OwnedRow {
            repr: Repr::Values(BoxedValues::new(Values { values, shape })),
        }
    }

    /// Row `slot` of a scan's `page` (kept there by [`PageCopy::keep`],
    /// which checked it).
    #[inline]
    pub(crate) fn scanned(page: Counted<PageCopy>, slot: u32) -> OwnedRow {
        OwnedRow {
            repr: Repr::Scanned { page, slot },
        }
    }

    #[inline]
    fn shape(&self) -> &Arc<Shape> {
        match &self.repr {
            Repr::Values(v) => &v.get().shape,
            Repr::Scanned { page, .. } => &page.shape,
        }
    }

    /// The values, one per column (per projected column if projected);
    /// built once if the row was scanned.
    pub fn values(&self) -> &[Value] {
        self.materialised()
    }

    /// The values, taken out.
    pub fn into_values(self) -> Row {
        match self.repr {
            Repr::Values(v) => v.into_inner().values,
            // Shared with the row's clones (if any): copied, not taken.
            Repr::Scanned { page, slot } => match page.built(slot).get() {
                Some(v) => v.clone(),
                None => page.decode(slot),
            },
        }
    }

    /// The values, built from the tuple if not yet.
    #[inline]
    fn materialised(&self) -> &Row {
        match &self.repr {
            Repr::Values(v) => &v.get().values,
            Repr::Scanned { page, slot } => page.built(*slot).get_or_init(|| page.decode(*slot)),
        }
    }

    /// Column `col`: read straight from the tuple by `read` (a `RowRef`
    /// accessor, the projection checked first) if the row was scanned,
    /// from the values by `values` otherwise. Inlined whole into each
    /// accessor, itself small enough to be inlined into its caller's loop,
    /// where the row view and the resolved column stay in registers: a
    /// larger accessor, called, copied its whole `Result` (an
    /// `EngineError`'s size) through memory on every read.
    #[inline(always)]
    fn column<'a, C: RowColumn, T>(
        &'a self,
        col: C,
        read: impl FnOnce(&RowRef<'a>, Resolved) -> Result<T>,
        values: impl FnOnce(C) -> Result<T>,
    ) -> Result<T> {
        let Repr::Scanned { page, slot } = &self.repr else {
            return values(col);
        };
        let shape = &page.shape;
        let c = shape.resolve(&col)?;
        if let Some(p) = &shape.positions
            && !p.contains(&c.index())
        {
            return Err(self.not_projected(c.index()));
        }
        let (id, data) = page.tuple(*slot);
        let row = RowRef::over(id, data, shape);
        read(&row, Resolved(c))
    }

    /// The `N` bytes of column `col`, read straight from the copy, in the
    /// common case: a scanned row whose tuple the table's plan accepted
    /// (every column stored, no NULL), not projected, and a handle of its
    /// table for a column of type `ty` at a fixed offset. `None`: not that
    /// case (the full accessor then decides, and words any error).
    #[inline(always)]
    fn plain_fixed<const N: usize, C: RowColumn>(
        &self,
        col: &C,
        ty: ColumnType,
    ) -> Option<[u8; N]> {
        let Repr::Scanned { page, slot } = &self.repr else {
            return None;
        };
        let c = col.handle_ref()?;
        let off = c.fixed()?;
        let shape = &*page.shape;
        let e = page.rows.get(*slot as usize)?;
        if c.ty != ty || !e.plain || shape.positions.is_some() || !shape.accepts(c) {
            return None;
        }
        let at = e.start as usize + shape.plan.head() + off as usize;
        // Within the tuple (the plan checked every value's bytes); the
        // range is still checked, as everywhere.
        page.data.get(at..at + N)?.try_into().ok()
    }

    /// The definition of the row's table (as the row was read).
    pub fn table(&self) -> &TableInfo {
        &self.shape().table
    }

    /// Column `col` (a name or a [`Col`](crate::Col)). (`get(i)` is the slice's: the
    /// value at position `i`, if any.)
    pub fn value(&self, col: impl RowColumn) -> Result<&Value> {
        let i = self.slot(&col)?;
        Ok(&self.materialised()[i])
    }

    /// The non-NULL `I64` column `col`.
    #[inline]
    pub fn i64(&self, col: impl RowColumn) -> Result<i64> {
        if let Some(b) = self.plain_fixed::<8, _>(&col, ColumnType::I64) {
            return Ok(i64::from_le_bytes(b));
        }
        self.column(
            col,
            |r, c| r.i64_of(c.0),
            |col| self.typed(col, ColumnType::I64, "i64", Value::as_i64),
        )
    }

    /// The `I64` column `col`, `None` if NULL.
    #[inline]
    pub fn i64_opt(&self, col: impl RowColumn) -> Result<Option<i64>> {
        if let Some(b) = self.plain_fixed::<8, _>(&col, ColumnType::I64) {
            return Ok(Some(i64::from_le_bytes(b)));
        }
        self.column(
            col,
            |r, c| r.i64_opt_of(c.0),
            |col| self.typed_opt(col, ColumnType::I64, Value::as_i64),
        )
    }

    /// The non-NULL `F64` column `col`.
    #[inline]
    pub fn f64(&self, col: impl RowColumn) -> Result<f64> {
        if let Some(b) = self.plain_fixed::<8, _>(&col, ColumnType::F64) {
            return Ok(f64::from_le_bytes(b));
        }
        self.column(
            col,
            |r, c| r.f64_of(c.0),
            |col| self.typed(col, ColumnType::F64, "f64", Value::as_f64),
        )
    }

    /// The `F64` column `col`, `None` if NULL.
    #[inline]
    pub fn f64_opt(&self, col: impl RowColumn) -> Result<Option<f64>> {
        if let Some(b) = self.plain_fixed::<8, _>(&col, ColumnType::F64) {
            return Ok(Some(f64::from_le_bytes(b)));
        }
        self.column(
            col,
            |r, c| r.f64_opt_of(c.0),
            |col| self.typed_opt(col, ColumnType::F64, Value::as_f64),
        )
    }

    /// The non-NULL `Timestamp` column `col` (microseconds since the epoch).
    #[inline]
    pub fn timestamp(&self, col: impl RowColumn) -> Result<i64> {
        if let Some(b) = self.plain_fixed::<8, _>(&col, ColumnType::Timestamp) {
            return Ok(i64::from_le_bytes(b));
        }
        self.column(
            col,
            |r, c| r.timestamp_of(c.0),
            |col| self.typed(col, ColumnType::Timestamp, "timestamp", Value::as_timestamp),
        )
    }

    /// The `Timestamp` column `col`, `None` if NULL.
    #[inline]
    pub fn timestamp_opt(&self, col: impl RowColumn) -> Result<Option<i64>> {
        if let Some(b) = self.plain_fixed::<8, _>(&col, ColumnType::Timestamp) {
            return Ok(Some(i64::from_le_bytes(b)));
        }
        self.column(
            col,
            |r, c| r.timestamp_opt_of(c.0),
            |col| self.typed_opt(col, ColumnType::Timestamp, Value::as_timestamp),
        )
    }

    /// The non-NULL `Bool` column `col`.
    #[inline]
    pub fn bool(&self, col: impl RowColumn) -> Result<bool> {
        self.column(
            col,
            |r, c| r.bool(c),
            |col| self.typed(col, ColumnType::Bool, "bool", Value::as_bool),
        )
    }

    /// The `Bool` column `col`, `None` if NULL.
    #[inline]
    pub fn bool_opt(&self, col: impl RowColumn) -> Result<Option<bool>> {
        self.column(
            col,
            |r, c| r.bool_opt(c),
            |col| self.typed_opt(col, ColumnType::Bool, Value::as_bool),
        )
    }

    /// The non-NULL `Text` column `col`.
    #[inline]
    pub fn text(&self, col: impl RowColumn) -> Result<&str> {
        self.column(
            col,
            |r, c| r.text(c),
            |col| self.typed(col, ColumnType::Text, "text", Value::as_text),
        )
    }

    /// The `Text` column `col`, `None` if NULL.
    #[inline]
    pub fn text_opt(&self, col: impl RowColumn) -> Result<Option<&str>> {
        self.column(
            col,
            |r, c| r.text_opt(c),
            |col| self.typed_opt(col, ColumnType::Text, Value::as_text),
        )
    }

    /// The non-NULL `Bytes` column `col`.
    #[inline]
    pub fn bytes(&self, col: impl RowColumn) -> Result<&[u8]> {
        self.column(
            col,
            |r, c| r.bytes(c),
            |col| self.typed(col, ColumnType::Bytes, "bytes", Value::as_bytes),
        )
    }

    /// The `Bytes` column `col`, `None` if NULL.
    #[inline]
    pub fn bytes_opt(&self, col: impl RowColumn) -> Result<Option<&[u8]>> {
        self.column(
            col,
            |r, c| r.bytes_opt(c),
            |col| self.typed_opt(col, ColumnType::Bytes, Value::as_bytes),
        )
    }

    #[inline(never)]
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

    #[inline(never)]
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
        let v = &self.materialised()[i];
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
        let have = self.shape().table.columns[pos].ty;
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
        let table = &self.shape().table;
        let pos = col.col(table)?.index();
        let i = match &self.shape().positions {
            None => Some(pos),
            Some(p) => p.iter().position(|&c| c == pos),
        };
        match i {
            Some(i) if i < self.materialised().len() => Ok(i),
            _ => Err(self.not_projected(pos)),
        }
    }

    /// The table column of value `i`.
    fn position(&self, i: usize) -> usize {
        self.shape().positions.as_ref().map_or(i, |p| p[i])
    }

    /// Table column `pos` read from a row projected without it.
    #[cold]
    #[inline(never)]
    fn not_projected(&self, pos: usize) -> EngineError {
        self.wrong(pos, "is not among the row's projected columns")
    }

    #[cold]
    fn wrong(&self, pos: usize, what: &str) -> EngineError {
        let table = &self.shape().table;
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
        self.materialised()
    }
}

/// The values can be changed in place (to write the row back with
/// `update`); their number cannot.
impl std::ops::DerefMut for OwnedRow {
    fn deref_mut(&mut self) -> &mut [Value] {
        if let Repr::Scanned { page, .. } = &self.repr {
            // From now on the values are the row.
            let shape = page.shape.clone();
            let values = BoxedValues::new(Values {
                values: Vec::new(),
                shape,
            });
            let scanned = std::mem::replace(&mut self.repr, Repr::Values(values));
            let values = OwnedRow { repr: scanned }.into_values();
            if let Repr::Values(v) = &mut self.repr {
                v.get_mut().values = values;
            }
        }
        match &mut self.repr {
            Repr::Values(v) => &mut v.get_mut().values,
            Repr::Scanned { .. } => unreachable!("a scanned row was made of values just above"),
        }
    }
}

impl AsRef<[Value]> for OwnedRow {
    fn as_ref(&self) -> &[Value] {
        self.materialised()
    }
}

/// Printed as its values are.
impl std::fmt::Debug for OwnedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.materialised().fmt(f)
    }
}

impl PartialEq for OwnedRow {
    fn eq(&self, other: &OwnedRow) -> bool {
        self.materialised() == other.materialised()
    }
}

impl Eq for OwnedRow {}

impl PartialEq<Row> for OwnedRow {
    fn eq(&self, other: &Row) -> bool {
        self.materialised() == other
    }
}

impl PartialEq<OwnedRow> for Row {
    fn eq(&self, other: &OwnedRow) -> bool {
        self == other.materialised()
    }
}

impl PartialEq<[Value]> for OwnedRow {
    fn eq(&self, other: &[Value]) -> bool {
        self.materialised().as_slice() == other
    }
}

impl PartialOrd for OwnedRow {
    fn partial_cmp(&self, other: &OwnedRow) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OwnedRow {
    fn cmp(&self, other: &OwnedRow) -> Ordering {
        self.materialised().cmp(other.materialised())
    }
}

impl Hash for OwnedRow {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.materialised().hash(state);
    }
}

impl From<OwnedRow> for Row {
    fn from(r: OwnedRow) -> Row {
        r.into_values()
    }
}

impl IntoIterator for OwnedRow {
    type Item = Value;
    type IntoIter = std::vec::IntoIter<Value>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_values().into_iter()
    }
}

impl<'a> IntoIterator for &'a OwnedRow {
    type Item = &'a Value;
    type IntoIter = std::slice::Iter<'a, Value>;

    fn into_iter(self) -> Self::IntoIter {
        self.materialised().iter()
    }
}

impl RowRef<'_> {
    /// The whole row as an [`OwnedRow`] (readable by column name).
    pub fn to_owned_row(&self) -> Result<OwnedRow> {
        Ok(OwnedRow::new(self.to_row()?, self.shape().clone()))
    }
}
