//! `ALTER TABLE ... ADD COLUMN`: a column appended to a table without
//! rewriting its rows.
//!
//! ```text
//!   add_column("t", c) ── DDL lock, table locked exclusively (operations wait)
//!                      ── catalog row of "t" updated: columns + c (+ its default)
//!                      ── commit (synchronous) ── the table's Schema gains the version
//!   a row stored before: count n < the table's ── columns n.. read c.default or NULL
//! ```
//!
//! Rules:
//! 1. The change is one catalog update, WAL-logged and replayed like every
//!    catalog change (the catalog is a heap): after a crash the table has
//!    the column if and only if the change committed.
//! 2. No row is rewritten: each row keeps the column count it was written
//!    with (`value` module docs), and the decoder and every [`crate::RowRef`]
//!    accessor read the columns past it as the column's default, or NULL.
//!    Rows written after the change carry the column like any other.
//! 3. The default is a constant, checked against the column's type when the
//!    column is added and stored in the catalog with it. A NOT NULL column
//!    needs one (rows already stored would have no value).
//! 4. Columns are never removed or reordered (rows find a column by its
//!    position): there is no `drop_column`, and column positions, [`crate::Col`]
//!    handles and indexes stay valid across `add_column`.

use crate::catalog::{CatalogEntry, check_definition};
use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::stats::Pending;
use crate::table_def::TableInfo;
use crate::txn::xact::CommitMode;
use crate::value::{Column, Value};

impl Database {
    /// Add `column` at the end of `table`'s columns (`ALTER TABLE ADD
    /// COLUMN`), without rewriting the rows already stored: they read the
    /// column as `column.default` ([`Column::with_default`]), or NULL if it
    /// has none. Rows written afterwards carry their own value (inserts and
    /// updates take one value per column, the new one included). The change
    /// commits before this returns and survives a crash like any other
    /// catalog change; operations on the table wait for it (module docs).
    ///
    /// Errors: a NOT NULL column without a default, or a default of another
    /// type than the column's ([`EngineError::TypeMismatch`]), a name the
    /// table already has, or a definition too large
    /// ([`EngineError::InvalidSchema`]); called from a backup's progress
    /// callback ([`EngineError::BackupInProgress`]) or from the row iterator
    /// or progress callback of a bulk load into this (empty) table
    /// ([`EngineError::TableBeingLoaded`]). Columns cannot be dropped or
    /// reordered.
    pub fn add_column(&self, table: &str, column: Column) -> Result<TableInfo> {
        // From a backup's progress callback the DDL lock is this thread's
        // own, and from a bulk load into the table its drop lock: refuse at
        // once instead of waiting for ourselves.
        crate::backup_label::refuse_inside(|| format!("add column to table {table:?}"))?;
        let c = self.core();
        let _ddl = c.ddl.lock();
        let t = c.table(table)?;
        crate::loading::check(&t)?;
        let dropped = t
            .dropped
            .write(table, || format!("add column to table {table:?}"))?;
        if *dropped {
            return Err(EngineError::UnknownTable { name: table.into() });
        }
        let column = checked_column(table, column)?;
        let mut info: TableInfo = (*t.info).clone();
        info.columns.push(column);
        check_definition(table, &info.columns)?;
        let row = CatalogEntry::Table(info.clone()).encode()?;
        let txn = c.tm.begin()?;
        let snap = txn.snapshot();
        let catalog_tid = c
            .catalog_heap
            .update(txn.xid(), &snap, &*c.tm, t.info.catalog_tid(), &row)
            .map_err(EngineError::heap(format!(
                "add column to table {table:?}: catalog"
            )))?;
        txn.commit_with(CommitMode::Synchronous)?;
        t.info.push(info.clone(), catalog_tid);
        drop(dropped);
        // The table's row has a new version; the old one is dead.
        c.catalog_changed(Pending {
            inserted: 0,
            updated: 1,
            deleted: 0,
        });
        Ok(info)
    }
}

/// `column` as `add_column` stores it: a NULL default is no default; a NOT
/// NULL column needs a default of its type.
fn checked_column(table: &str, mut column: Column) -> Result<Column> {
    if column.default == Some(Value::Null) {
        column.default = None;
    }
    match &column.default {
        None if !column.nullable => Err(EngineError::InvalidSchema {
            name: table.to_string(),
            detail: format!(
                "column {:?} is NOT NULL and has no default: the rows already stored would \
                 have no value in it (give it a default, or make it nullable)",
                column.name
            ),
        }),
        Some(v) if !column.ty.accepts(v) => Err(EngineError::TypeMismatch {
            table: table.to_string(),
            column: column.name.clone(),
            expected: column.ty,
            got: v.type_name(),
        }),
        _ => Ok(column),
    }
}
