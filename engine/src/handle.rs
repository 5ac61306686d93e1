//! Resolved handles for hot paths: a [`Table`], an [`Index`] and a [`Col`]
//! are looked up once, by name, and then name their object directly, so a
//! loop of lookups or scans takes no catalog lock and hashes no string.
//!
//! ```text
//!   db.table_handle("accounts") ── Table ── table.column("abalance") ── Col
//!   db.index_handle("accounts_k") ── Index
//!   txn.scan_each(&table, ..) / txn.lookup_each(&index, ..)  (names work too: "accounts")
//! ```
//!
//! Rules:
//! 1. A handle stays valid as long as its object exists. After a DROP every
//!    operation through an old handle is [`EngineError::UnknownTable`] (or
//!    `UnknownIndex`), exactly as for the name, also if a new object of the
//!    same name was created since: a handle names one relation, not a name.
//! 2. A [`Col`] belongs to one table; reading it from a row of another table
//!    is [`EngineError::WrongColumn`], never a silent read of whatever column
//!    sits at that position.
//! 3. Every call that takes a table or index accepts a handle or a name
//!    ([`TableRef`], [`IndexRef`]); names are resolved per call.

use std::borrow::Cow;
use std::sync::Arc;

use crate::catalog::{IndexHandle, IndexInfo, TableHandle};
use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::table_def::{Col, TableInfo, col_of};

/// A resolved table ([`Database::table_handle`]). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Table {
    pub(crate) h: Arc<TableHandle>,
}

impl Table {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.h.info.name
    }

    /// The table's definition.
    pub fn info(&self) -> &TableInfo {
        &self.h.info
    }

    /// The column called `name`, resolved for [`crate::RowRef`] accessors.
    pub fn column(&self, name: &str) -> Result<Col> {
        let idx = self.h.info.column_index(name)?;
        Ok(self.col(idx))
    }

    /// The table's primary key index (declared with
    /// [`crate::TableOptions::primary_key`]), if it has one.
    pub fn primary_key(&self) -> Option<Index> {
        self.h
            .indexes
            .read()
            .iter()
            .find(|ix| ix.info.primary)
            .map(|ix| Index {
                ix: ix.clone(),
                table: self.h.clone(),
            })
    }

    /// Every column, in order.
    pub fn columns(&self) -> Vec<Col> {
        (0..self.h.info.columns.len())
            .map(|i| self.col(i))
            .collect()
    }

    fn col(&self, idx: usize) -> Col {
        col_of(&self.h.info, idx)
    }
}

/// A resolved index ([`Database::index_handle`]). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Index {
    pub(crate) ix: Arc<IndexHandle>,
    pub(crate) table: Arc<TableHandle>,
}

impl Index {
    /// The index's name.
    pub fn name(&self) -> &str {
        &self.ix.info.name
    }

    /// The index's definition.
    pub fn info(&self) -> &IndexInfo {
        &self.ix.info
    }

    /// The indexed table.
    pub fn table(&self) -> Table {
        Table {
            h: self.table.clone(),
        }
    }
}

/// A table named by a handle or by its name (rule 3).
pub trait TableRef {
    /// The table, resolved if this is a name.
    fn resolve_table(&self, db: &Database) -> Result<Cow<'_, Table>>;
}

impl TableRef for Table {
    #[inline]
    fn resolve_table(&self, _db: &Database) -> Result<Cow<'_, Table>> {
        Ok(Cow::Borrowed(self))
    }
}

impl TableRef for str {
    fn resolve_table(&self, db: &Database) -> Result<Cow<'_, Table>> {
        Ok(Cow::Owned(Table {
            h: db.core().table(self)?,
        }))
    }
}

impl TableRef for String {
    fn resolve_table(&self, db: &Database) -> Result<Cow<'_, Table>> {
        self.as_str().resolve_table(db)
    }
}

impl<T: TableRef + ?Sized> TableRef for &T {
    #[inline]
    fn resolve_table(&self, db: &Database) -> Result<Cow<'_, Table>> {
        (**self).resolve_table(db)
    }
}

/// An index named by a handle, by its name, or by the name of a table with
/// exactly one index (rule 3).
pub trait IndexRef {
    /// The index, resolved if this is a name.
    fn resolve_index(&self, db: &Database) -> Result<Cow<'_, Index>>;
}

impl IndexRef for Index {
    #[inline]
    fn resolve_index(&self, _db: &Database) -> Result<Cow<'_, Index>> {
        Ok(Cow::Borrowed(self))
    }
}

impl IndexRef for str {
    fn resolve_index(&self, db: &Database) -> Result<Cow<'_, Index>> {
        let core = db.core();
        let ix = match core.index(self) {
            Ok(ix) => ix,
            Err(e) => {
                let Ok(t) = core.table(self) else {
                    return Err(e);
                };
                let ixs = t.indexes.read();
                match ixs.as_slice() {
                    [only] => only.clone(),
                    many => {
                        let names: Vec<&str> = many.iter().map(|i| i.info.name.as_str()).collect();
                        return Err(EngineError::UnknownIndex {
                            name: self.into(),
                            detail: format!(
                                " (table {self:?} has {} indexes {names:?}: name one)",
                                many.len()
                            ),
                        });
                    }
                }
            }
        };
        let table = core.table(&ix.table)?;
        Ok(Cow::Owned(Index { ix, table }))
    }
}

impl IndexRef for String {
    fn resolve_index(&self, db: &Database) -> Result<Cow<'_, Index>> {
        self.as_str().resolve_index(db)
    }
}

impl<T: IndexRef + ?Sized> IndexRef for &T {
    #[inline]
    fn resolve_index(&self, db: &Database) -> Result<Cow<'_, Index>> {
        (**self).resolve_index(db)
    }
}

impl Database {
    /// Resolve table `name` once, for loops that would otherwise look it up
    /// per call (module docs, rule 1).
    pub fn table_handle(&self, name: &str) -> Result<Table> {
        name.resolve_table(self).map(Cow::into_owned)
    }

    /// Resolve index `name` (or the only index of table `name`) once.
    pub fn index_handle(&self, name: &str) -> Result<Index> {
        name.resolve_index(self).map(Cow::into_owned)
    }
}
