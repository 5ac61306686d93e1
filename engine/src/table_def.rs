//! A table's definition as rows read it: [`TableInfo`] (its name, relation
//! and columns) and [`Col`] (one of its columns, resolved once for reading
//! rows by handle).
//!
//! These are the types every module describing a table's rows imports
//! (`owned_row`, `schema`, `row`, `catalog`), so they sit below all of them
//! and import nothing of theirs: the imports among those modules run one way
//! (`table_def` <- `owned_row` <- `schema` <- `row`, `catalog`).

use bufmgr::RelId;

use crate::error::{EngineError, Result};
use crate::value::{Column, ColumnType};

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
    /// fixed width).
    pub(crate) fixed: Option<u32>,
}

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
}

/// Column `idx` of table `info` as a [`Col`] (`idx` must be in range).
pub(crate) fn col_of(info: &TableInfo, idx: usize) -> Col {
    let cols = &info.columns;
    // If every column before this one is NOT NULL and of a fixed width, its
    // value is always at the same offset past the null bitmap (whose length
    // depends on the row's own column count: `add_column`).
    let fixed = cols[..idx]
        .iter()
        .map(|c| c.ty.fixed_width().filter(|_| !c.nullable))
        .sum::<Option<usize>>()
        .and_then(|o| u32::try_from(o).ok());
    Col {
        rel: info.rel,
        idx: idx as u32,
        ty: cols[idx].ty,
        nullable: cols[idx].nullable,
        fixed,
    }
}
