//! Relation numbers the engine reserves for itself.
//!
//! User relations (tables, indexes, created by the catalog) start at
//! [`FIRST_USER_REL`]; everything below it is the engine's.

use bufmgr::RelId;

/// The commit log (`txn::clog`).
pub const CLOG_REL: RelId = RelId(1);
/// The first relation number the catalog may hand to a table or index.
pub const FIRST_USER_REL: RelId = RelId(1000);
/// The catalog: a heap of table and index definitions (`catalog`).
pub const CATALOG_REL: RelId = RelId(2);
