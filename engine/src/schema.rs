//! A table's definition while the table is open: it only grows.
//!
//! [`Database::add_column`](crate::Database::add_column) appends a column
//! without rewriting rows, while readers hold `&TableInfo` borrowed from the
//! table's handle (a [`crate::RowRef`] does, for as long as its callback
//! runs). So the definition is a chain that is never shortened: each
//! version links the next one once, and [`Schema`] dereferences to the
//! newest. A borrowed version stays valid (and unchanged) for as long as
//! the handle lives; nothing is freed before the handle goes.
//!
//! ```text
//!   TableHandle.info: Schema ── v1 (id, name) ── next ──> v2 (id, name, note) ── next: unset
//!                                                          ^ what `*info` is
//! ```
//!
//! Rules:
//! 1. A new version is linked only by DDL holding the table exclusively
//!    (its `dropped` lock, written) and the DDL lock, after the catalog
//!    change committed, so an operation sees one version from start to
//!    end (it holds the table shared) and the chain never forks.
//! 2. Each version carries where its catalog row is: `add_column` updates
//!    the table's catalog row (a new version of it), and a later DDL must
//!    find the current one.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use heap::Tid;

use crate::table_def::{Shape, TableInfo};

/// A table's definition, newest version first to readers (module docs).
#[derive(Debug)]
pub(crate) struct Schema {
    /// The definition, as the owned rows read with this version share it.
    shape: Arc<Shape>,
    /// Where this version's catalog row is.
    catalog_tid: Tid,
    next: OnceLock<Box<Schema>>,
}

impl Schema {
    /// The first version: `info`, whose catalog row is at `catalog_tid`.
    pub fn new(info: TableInfo, catalog_tid: Tid) -> Schema {
        Schema {
            shape: Shape::whole(Arc::new(info)),
            catalog_tid,
            next: OnceLock::new(),
        }
    }

    /// The newest version.
    #[inline]
    fn newest(&self) -> &Schema {
        let mut s = self;
        while let Some(n) = s.next.get() {
            s = n;
        }
        s
    }

    /// The newest version as the shape of a whole row (owned rows keep
    /// the version they were read with).
    #[inline]
    pub fn shape(&self) -> &Arc<Shape> {
        &self.newest().shape
    }

    /// Where the newest version's catalog row is.
    pub fn catalog_tid(&self) -> Tid {
        self.newest().catalog_tid
    }

    /// Make `info` (catalog row at `catalog_tid`) the newest version
    /// (rule 1: the caller holds the table exclusively).
    pub fn push(&self, info: TableInfo, catalog_tid: Tid) {
        let linked = self
            .newest()
            .next
            .set(Box::new(Schema::new(info, catalog_tid)));
        // Only DDL holding the table exclusively links versions, so the
        // newest version has no successor yet.
        assert!(linked.is_ok(), "two table definitions linked at once");
    }
}

impl Deref for Schema {
    type Target = TableInfo;

    #[inline]
    fn deref(&self) -> &TableInfo {
        self.newest().shape.table()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Column, ColumnType};
    use bufmgr::RelId;

    #[test]
    fn a_borrowed_version_stays_while_newer_ones_are_linked() {
        let v1 = TableInfo {
            name: "t".into(),
            rel: RelId(1000),
            columns: vec![Column::new("id", ColumnType::I64)],
            logged: true,
        };
        let s = Schema::new(v1.clone(), Tid::new(0, 1));
        let old: &TableInfo = &s;
        let mut v2 = v1.clone();
        v2.columns.push(Column::nullable("x", ColumnType::Text));
        s.push(v2.clone(), Tid::new(0, 2));
        assert_eq!(old, &v1);
        assert_eq!(&*s, &v2);
        assert_eq!(s.catalog_tid(), Tid::new(0, 2));
        let mut v3 = v2;
        v3.columns.push(Column::nullable("y", ColumnType::Bool));
        s.push(v3.clone(), Tid::new(1, 1));
        assert_eq!(s.columns.len(), 3);
        assert_eq!(s.catalog_tid(), Tid::new(1, 1));
    }
}
