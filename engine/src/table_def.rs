//! A table's definition as rows read it: [`TableInfo`] (its name, relation
//! and columns), [`Col`] (one of its columns, resolved once for reading
//! rows by handle), [`RowColumn`] (a name or handle resolved against a
//! table) and `Shape` (which of a table's columns a read's rows hold).
//!
//! These are the types every module describing a table's rows imports
//! (`owned_row`, `schema`, `row`, `catalog`), so they sit below all of them
//! and import nothing of theirs: the imports among those modules run one way
//! (`table_def` <- `schema` <- `row` <- `owned_row`; `catalog`).

use std::sync::Arc;

use bufmgr::RelId;

use crate::error::{EngineError, Result};
use crate::value::{Column, ColumnType, RowPlan};

/// A table as the catalog knows it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TableInfo {
    /// The table's name (unique among tables and indexes).
    pub name: String,
    /// The relation id of its heap file.
    pub rel: RelId,
    /// Its columns, in order.
    pub columns: Vec<Column>,
    /// `false` for an unlogged table: no WAL, emptied after a crash.
    pub logged: bool,
}

impl TableInfo {
    /// The position of column `name`, or [`EngineError::UnknownColumn`].
    pub fn column_index(&self, name: &str) -> Result<usize> {
        self.columns
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| EngineError::UnknownColumn {
                table: self.name.clone(),
                column: name.to_string(),
            })
    }
}

/// One column of one table, resolved ([`Table::column`](crate::Table::column)).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Col {
    pub(crate) rel: RelId,
    pub(crate) idx: u32,
    pub(crate) ty: ColumnType,
    pub(crate) nullable: bool,
    /// Byte offset of the value past the row's null bitmap, when it does
    /// not depend on the row (every column before it is NOT NULL and of a
    /// fixed width); [`NO_OFFSET`] when it does ([`Col::fixed`]). A plain
    /// `u32` rather than an `Option`: the handle is then 16 bytes, passed
    /// and returned in two registers, where 20 bytes went through memory
    /// on every read of a column.
    offset: u32,
}

/// [`Col::offset`] of a column whose place depends on the row.
const NO_OFFSET: u32 = u32::MAX;

/// A handle stays two words (see `Col::offset`).
const _: () = assert!(std::mem::size_of::<Col>() == 16);

impl Col {
    /// Position in the table's columns.
    pub fn index(&self) -> usize {
        self.idx as usize
    }

    /// The column's type.
    pub fn ty(&self) -> ColumnType {
        self.ty
    }

    /// Whether the column accepts NULL.
    pub fn nullable(&self) -> bool {
        self.nullable
    }

    /// The value's byte offset past the row's null bitmap, if it does not
    /// depend on the row.
    #[inline(always)]
    pub(crate) fn fixed(&self) -> Option<u32> {
        (self.offset != NO_OFFSET).then_some(self.offset)
    }
}

/// Column `idx` of table `info` as a [`Col`] (`idx` must be in range).
#[inline]
pub(crate) fn col_of(info: &TableInfo, idx: usize) -> Col {
    let cols = &info.columns;
    // If every column before this one is NOT NULL and of a fixed width, its
    // value is always at the same offset past the null bitmap (whose length
    // depends on the row's own column count: `add_column`).
    let fixed = cols[..idx]
        .iter()
        .map(|c| c.ty.fixed_width().filter(|_| !c.nullable))
        .sum::<Option<usize>>()
        .and_then(|o| u32::try_from(o).ok())
        .filter(|&o| o != NO_OFFSET);
    Col {
        rel: info.rel,
        idx: idx as u32,
        ty: cols[idx].ty,
        nullable: cols[idx].nullable,
        offset: fixed.unwrap_or(NO_OFFSET),
    }
}

/// What the values of a row are: the table's definition, and which of its
/// columns they are if the row is projected. Shared by the rows of one
/// read.
#[derive(Debug)]
pub(crate) struct Shape {
    pub(crate) table: Arc<TableInfo>,
    /// The table column of each value; `None`: every column, in order.
    pub(crate) positions: Option<Vec<usize>>,
    /// How the table's full rows are checked fast (a scan's copies).
    pub(crate) plan: RowPlan,
    /// The fixed offset of each table column ([`Col`]'s), computed once:
    /// checking a handle against its table compares it, where computing it
    /// walked the columns before it on every read of a column.
    fixed: Box<[Option<u32>]>,
}

impl Shape {
    /// Every column of `table`, in order.
    pub fn whole(table: Arc<TableInfo>) -> Arc<Shape> {
        Arc::new(Shape {
            plan: RowPlan::new(&table.columns),
            fixed: fixed_offsets(&table),
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
            plan: RowPlan::new(&table.columns),
            fixed: fixed_offsets(&table),
            table,
            positions: Some(cols.iter().map(Col::index).collect()),
        })
    }

    /// `c` as a column of this shape's table: a [`Col`] handle checked as
    /// [`RowColumn::col`] checks it, against the offsets computed once;
    /// anything else by its `col`.
    ///
    /// The column travels as a `Col` or an `Option<Col>` (two registers)
    /// until the error is known: built as a `Result<Col>` from a call that
    /// can fail, it went through memory (an `EngineError`'s size, the
    /// handle at an odd offset in it) on every read of a column, and its
    /// reloads stalled on the stores that wrote it piecewise.
    #[inline(always)]
    pub(crate) fn resolve<C: RowColumn>(&self, c: &C) -> Result<Col> {
        let found = match c.handle_ref() {
            Some(col) if self.accepts(col) => Some(*col),
            Some(_) => None,
            None => self.by_name(c),
        };
        match found {
            Some(col) => Ok(col),
            None => Err(self.unresolved(c)),
        }
    }

    /// A column that is not a handle (a name, or a column resolved
    /// already), resolved; `None` if it is not one of the table's
    /// ([`unresolved`](Self::unresolved) says why).
    #[inline(always)]
    fn by_name<C: RowColumn>(&self, c: &C) -> Option<Col> {
        c.col(&self.table).ok()
    }

    /// Why `c` is not a column of this shape's table: its `col`'s error,
    /// or, for a handle, [`refused`](Self::refused)'s.
    #[cold]
    #[inline(never)]
    fn unresolved<C: RowColumn>(&self, c: &C) -> EngineError {
        match c.handle() {
            Some(col) => self.refused(col),
            None => match c.col(&self.table) {
                Err(e) => e,
                // Resolved a moment ago, and a shape's table never changes:
                // were it ever to succeed now, the read still fails, naming
                // the column, rather than read it without the check.
                Ok(col) => col.of_another_database(&self.table),
            },
        }
    }

    /// Whether handle `col` passes [`Col::col`]'s checks, the offset
    /// compared with the one computed when the shape was made. A plain
    /// answer, so that the handle stays in registers on the way.
    #[inline(always)]
    pub(crate) fn accepts(&self, col: &Col) -> bool {
        let t = &*self.table;
        let i = col.index();
        match (t.columns.get(i), self.fixed.get(i)) {
            (Some(c), Some(&fixed)) => {
                col.rel == t.rel
                    && c.ty == col.ty
                    && c.nullable == col.nullable
                    && (col.fixed().is_none() || fixed == col.fixed())
            }
            _ => false,
        }
    }

    /// Why handle `col` was refused: [`Col::col`]'s error.
    #[cold]
    #[inline(never)]
    fn refused(&self, col: Col) -> EngineError {
        // The two checks are the same (the offsets are `col_of`'s), so
        // `col` fails `Col::col` too; were they ever to differ, the handle
        // is still refused, as one of another database.
        match col.col(&self.table) {
            Err(e) => e,
            Ok(_) => col.of_another_database(&self.table),
        }
    }
}

/// The fixed offset of each column of `table`, as [`col_of`] computes it.
fn fixed_offsets(table: &TableInfo) -> Box<[Option<u32>]> {
    (0..table.columns.len())
        .map(|i| col_of(table, i).fixed())
        .collect()
}

/// A column of a row ([`crate::OwnedRow`], [`crate::RowRef`]): its name, or a
/// [`Col`] handle of its table (resolved once, the faster way in a loop).
///
/// Sealed: a name and a [`Col`] are the only columns. The accessors read
/// at the index and offset the [`Col`] that [`col`](Self::col) returns
/// holds, so an implementation outside the engine returning another
/// table's handle unchecked would read another column's bytes, or panic
/// past the table's columns.
///
/// ```compile_fail
/// use engine::{Col, RowColumn, TableInfo};
///
/// struct Unchecked(Col);
///
/// impl RowColumn for Unchecked {
///     fn col(&self, _table: &TableInfo) -> engine::Result<Col> {
///         Ok(self.0)
///     }
/// }
/// ```
pub trait RowColumn: sealed::Sealed {
    /// The column as a handle of `table`: [`EngineError::UnknownColumn`]
    /// for a name the table lacks, [`EngineError::WrongColumn`] for a
    /// handle of another table (or of a table of another database that
    /// does not have this column at its position).
    fn col(&self, table: &TableInfo) -> Result<Col>;

    /// The handle itself if this is a [`Col`] (checked against the table's
    /// precomputed offsets by the row accessors); `None` otherwise.
    #[doc(hidden)]
    #[inline(always)]
    fn handle(&self) -> Option<Col> {
        None
    }

    /// [`handle`](Self::handle), borrowed: the accessors' checks read the
    /// caller's handle where it is, rather than a copy made for each read
    /// (a 16-byte copy whose fields were read back at once, a stall on
    /// every row of a scan).
    #[doc(hidden)]
    #[inline(always)]
    fn handle_ref(&self) -> Option<&Col> {
        None
    }
}

mod sealed {
    /// Implemented by the engine's [`RowColumn`](super::RowColumn)s only.
    pub trait Sealed {}

    impl Sealed for &str {}
    impl Sealed for super::Col {}
    impl Sealed for super::Resolved {}
}

/// A column already resolved against the table it is read from (by
/// [`RowColumn::col`] of a name or handle): an accessor handed it on does
/// not check it again. Made inside the engine only, right after the check.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Resolved(pub(crate) Col);

impl RowColumn for Resolved {
    #[inline]
    fn col(&self, _table: &TableInfo) -> Result<Col> {
        Ok(self.0)
    }
}

impl RowColumn for &str {
    fn col(&self, table: &TableInfo) -> Result<Col> {
        Ok(col_of(table, table.column_index(self)?))
    }
}

impl RowColumn for Col {
    #[inline(always)]
    fn handle(&self) -> Option<Col> {
        Some(*self)
    }

    #[inline(always)]
    fn handle_ref(&self) -> Option<&Col> {
        Some(self)
    }

    #[inline]
    fn col(&self, table: &TableInfo) -> Result<Col> {
        if self.rel != table.rel || self.index() >= table.columns.len() {
            return Err(self.of_another_table(table));
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
            || (self.fixed().is_some() && col_of(table, self.index()).fixed() != self.fixed())
        {
            return Err(self.of_another_database(table));
        }
        Ok(*self)
    }
}

/// The errors of [`Col::col`], out of line: the check itself is inlined
/// into every read of a column.
impl Col {
    #[cold]
    #[inline(never)]
    fn of_another_table(&self, table: &TableInfo) -> EngineError {
        EngineError::WrongColumn {
            table: table.name.clone(),
            detail: format!(
                "column handle {} belongs to another table ({})",
                self.index(),
                self.rel
            ),
        }
    }

    #[cold]
    #[inline(never)]
    fn of_another_database(&self, table: &TableInfo) -> EngineError {
        let c = &table.columns[self.index()];
        EngineError::WrongColumn {
            table: table.name.clone(),
            detail: format!(
                "column handle {} (a {} column) does not describe column {:?} (a {} \
                 column) of this table: it was resolved in another database",
                self.index(),
                self.ty.name(),
                c.name,
                c.ty.name()
            ),
        }
    }
}
