//! The catalog: tables and indexes, stored as rows of a heap relation.
//!
//! The catalog is itself a heap, relation [`CATALOG_REL`] (2), so it is
//! WAL-logged, checkpointed and recovered exactly like a table, with no redo
//! code of its own. Every catalog row has the same four columns:
//!
//! ```text
//!   kind  i64    0 meta, 1 table, 2 index, 3 unlogged table
//!   rel   i64    meta: the next relation id to hand out; otherwise the relation's id
//!   name  bytes  the table or index name (UTF-8); meta: "next_rel"
//!   def   bytes  table: per column  u8 type (1 i64, 2 bytes, 3 f64, 4 text,
//!                                   5 bool, 6 timestamp), u8 flags (bit 0
//!                                   nullable, bit 1 has a default),
//!                                   u16 LE name length, name, and with a
//!                                   default: u32 LE length, the default
//!                                   encoded as a one-column row
//!                index over one column, not a primary key (7 bytes):
//!                       u32 LE table rel, u16 LE column number, u8 unique
//!                any other index (8 + 2 x (n - 1) bytes):
//!                       u32 LE table rel, u16 LE first column number,
//!                       u8 flags (1 unique, 2 primary key), u8 n (1 ..= 8),
//!                       u16 LE number of each further column
//!                meta:  empty
//! ```
//!
//! Rules:
//! 1. Catalog changes run in their own transaction, serialised by one mutex
//!    (the DDL lock), and commit before the call returns ("auto-commit DDL").
//!    A crash before that commit leaves no trace a reader can see.
//! 2. Relation ids are never reused. The meta row holds the next id; a
//!    CREATE updates it in the same transaction as it inserts the table row.
//!    At open the next id is also raised past every id in the catalog and
//!    every relation file in `base/`, so even a file left by a CREATE that
//!    crashed before committing is never handed out again.
//! 3. After recovery, a relation file `>= FIRST_USER_REL` that the catalog
//!    does not know (a CREATE that never committed, a DROP whose file removal
//!    was cut short, or a dropped table's pages rebuilt by redo) is removed,
//!    unless `RELSIZES` lists it (a committed CREATE that no DROP took out:
//!    the catalog lost its row, and the open fails with nothing removed).
//! 4. The in-memory copy (`CatalogState`) changes only after the catalog
//!    transaction committed, under its write lock.

use std::collections::HashMap;
use std::sync::Arc;

use bufmgr::RelId;
use heap::{Heap, Tid};
use parking_lot::{Mutex, RwLock};

use crate::drop_lock::DropLock;
use crate::error::{EngineError, Result, cut};
use crate::schema::Schema;
use crate::table_def::TableInfo;
use crate::value::{COUNT_LEN, Column, ColumnType, LEN_PREFIX, Row, Value, decode_row, encode_row};

pub use crate::reserved::CATALOG_REL;

mod load;

/// Longest table, index or column name in bytes (PostgreSQL's NAMEDATALEN - 1).
pub const MAX_NAME_LEN: usize = 63;
/// Most columns a table may have (PostgreSQL's MaxHeapAttributeNumber).
pub const MAX_COLUMNS: usize = 1600;

const KIND_META: i64 = 0;
const KIND_TABLE: i64 = 1;
const KIND_INDEX: i64 = 2;
/// A table whose contents are not WAL-logged (same `def` as a table).
const KIND_UNLOGGED_TABLE: i64 = 3;
const META_NAME: &str = "next_rel";

/// What kind of relation a relation id names.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash, PartialOrd, Ord)]
pub enum RelKind {
    /// The commit log.
    Clog,
    /// The catalog heap.
    Catalog,
    /// A table (relation 1000 or above).
    Table,
    /// A B-tree index of a table.
    Index,
    /// Not in the catalog (being created or dropped).
    Unknown,
}

/// An index as the catalog knows it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct IndexInfo {
    /// The index's name (unique among tables and indexes).
    pub name: String,
    /// The relation id of its B-tree file.
    pub rel: RelId,
    /// The relation id of the indexed table.
    pub table: RelId,
    /// Positions of the indexed columns in the table, in key order (1 to
    /// 8 of them).
    pub columns: Vec<usize>,
    /// Unique: no two live rows share a key.
    pub unique: bool,
    /// The table's primary key (unique, on NOT NULL columns, made with the
    /// table).
    pub primary: bool,
}

/// An open table: its definition, its heap and its indexes.
#[derive(Debug)]
pub(crate) struct TableHandle {
    /// Its definition (the newest version; `schema`), and where its
    /// catalog row is.
    pub info: Schema,
    pub heap: Heap,
    /// Operations hold it shared; DROP takes it exclusively and sets it, so a
    /// dropped table's heap is never touched again. CREATE / DROP INDEX take
    /// it exclusively too (PostgreSQL's ShareLock for CREATE INDEX, coarser:
    /// readers wait as well), so every operation sees one set of indexes.
    /// Sharded by thread (`crate::drop_lock`): a read writes no cache line
    /// that another thread's reads write.
    pub dropped: DropLock,
    /// The table's indexes; changed only under `dropped`'s write lock.
    pub indexes: RwLock<Vec<Arc<IndexHandle>>>,
    /// One vacuum of the table at a time (PostgreSQL's
    /// `ShareUpdateExclusiveLock`): a second vacuum's dead set could name a
    /// pointer the first one freed and an insert reused.
    pub vacuum: Mutex<()>,
    /// Dead tuples and the tuple estimate, for autovacuum.
    pub counters: crate::stats::TableCounters,
}

/// An open index.
#[derive(Debug)]
pub(crate) struct IndexHandle {
    pub info: IndexInfo,
    /// The table's name (for messages).
    pub table: String,
    /// The indexed column's type (to print its keys).
    pub column_type: ColumnType,
    pub btree: btree::Index,
    /// Where its catalog row is.
    pub catalog_tid: Tid,
    /// Set (under the table's write lock) when the index is dropped; range
    /// iterators check it before each batch.
    pub dropped: std::sync::atomic::AtomicBool,
}

/// An index whose file was missing or damaged at open (PostgreSQL's
/// `indisvalid = false`): reads do not use it and writes do not maintain it
/// (a unique one does not enforce uniqueness); `drop_index` removes it, and
/// creating it again rebuilds it.
#[derive(Clone, Debug)]
pub(crate) struct InvalidIndex {
    pub info: IndexInfo,
    /// The table's name.
    pub table: String,
    pub catalog_tid: Tid,
    /// Why it is invalid (names the file).
    pub reason: String,
}

/// The catalog in memory.
#[derive(Debug, Default)]
pub(crate) struct CatalogState {
    pub tables: HashMap<String, Arc<TableHandle>>,
    pub indexes: HashMap<String, Arc<IndexHandle>>,
    pub invalid_indexes: HashMap<String, InvalidIndex>,
    pub meta_tid: Option<Tid>,
    pub next_rel: u32,
}

/// The columns of a catalog row.
pub(crate) fn catalog_columns() -> Vec<Column> {
    vec![
        Column::new("kind", ColumnType::I64),
        Column::new("rel", ColumnType::I64),
        Column::new("name", ColumnType::Bytes),
        Column::new("def", ColumnType::Bytes),
    ]
}

/// One decoded catalog row.
#[derive(Clone, Debug)]
pub(crate) enum CatalogEntry {
    Meta { next_rel: u32 },
    Table(TableInfo),
    Index(IndexInfo),
}

fn corrupt(tid: Tid, detail: impl std::fmt::Display) -> EngineError {
    EngineError::CorruptCatalog {
        detail: format!("row {tid}: {detail}"),
    }
}

impl CatalogEntry {
    pub fn encode(&self) -> Result<Vec<u8>> {
        let row: Row = match self {
            CatalogEntry::Meta { next_rel } => vec![
                Value::I64(KIND_META),
                Value::I64(i64::from(*next_rel)),
                Value::Bytes(META_NAME.as_bytes().to_vec()),
                Value::Bytes(Vec::new()),
            ],
            CatalogEntry::Table(t) => {
                let mut def = Vec::new();
                for c in &t.columns {
                    def.push(c.ty.to_u8());
                    let flags = u8::from(c.nullable) | u8::from(c.default.is_some()) << 1;
                    def.push(flags);
                    def.extend_from_slice(&(c.name.len() as u16).to_le_bytes());
                    def.extend_from_slice(c.name.as_bytes());
                    if let Some(d) = &c.default {
                        let b = encode_default(&t.name, c, d)?;
                        def.extend_from_slice(&(b.len() as u32).to_le_bytes());
                        def.extend_from_slice(&b);
                    }
                }
                vec![
                    Value::I64(if t.logged {
                        KIND_TABLE
                    } else {
                        KIND_UNLOGGED_TABLE
                    }),
                    Value::I64(i64::from(t.rel.0)),
                    Value::Bytes(t.name.as_bytes().to_vec()),
                    Value::Bytes(def),
                ]
            }
            CatalogEntry::Index(i) => {
                let mut def = Vec::new();
                def.extend_from_slice(&i.table.0.to_le_bytes());
                let first = i.columns.first().copied().unwrap_or(0);
                def.extend_from_slice(&(first as u16).to_le_bytes());
                if i.columns.len() == 1 && !i.primary {
                    def.push(u8::from(i.unique));
                } else {
                    def.push(u8::from(i.unique) | (u8::from(i.primary) << 1));
                    def.push(i.columns.len() as u8);
                    for &c in &i.columns[1..] {
                        def.extend_from_slice(&(c as u16).to_le_bytes());
                    }
                }
                vec![
                    Value::I64(KIND_INDEX),
                    Value::I64(i64::from(i.rel.0)),
                    Value::Bytes(i.name.as_bytes().to_vec()),
                    Value::Bytes(def),
                ]
            }
        };
        encode_row("(catalog)", &catalog_columns(), &row)
    }

    pub fn decode(tid: Tid, bytes: &[u8]) -> Result<CatalogEntry> {
        let row = decode_row(&catalog_columns(), bytes, |d| corrupt(tid, d))?;
        let (Value::I64(kind), Value::I64(rel), Value::Bytes(name), Value::Bytes(def)) =
            (&row[0], &row[1], &row[2], &row[3])
        else {
            return Err(corrupt(tid, "column types"));
        };
        let rel = u32::try_from(*rel).map_err(|_| corrupt(tid, format!("relation id {rel}")))?;
        let name =
            String::from_utf8(name.clone()).map_err(|_| corrupt(tid, "name is not UTF-8"))?;
        match *kind {
            KIND_META => Ok(CatalogEntry::Meta { next_rel: rel }),
            KIND_TABLE | KIND_UNLOGGED_TABLE => {
                let mut columns = Vec::new();
                let mut p = 0usize;
                while p < def.len() {
                    let head = def
                        .get(p..p + 4)
                        .ok_or_else(|| corrupt(tid, "column definition ends early"))?;
                    let ty = ColumnType::from_u8(head[0])
                        .ok_or_else(|| corrupt(tid, format!("column type {}", head[0])))?;
                    let flags = head[1];
                    if flags > 3 {
                        return Err(corrupt(tid, format!("column flags {flags}")));
                    }
                    let nullable = flags & 1 != 0;
                    let len = u16::from_le_bytes([head[2], head[3]]) as usize;
                    let cname = def
                        .get(p + 4..p + 4 + len)
                        .ok_or_else(|| corrupt(tid, "column name ends early"))?;
                    let cname = String::from_utf8(cname.to_vec())
                        .map_err(|_| corrupt(tid, "column name is not UTF-8"))?;
                    p += 4 + len;
                    let mut column = Column {
                        name: cname,
                        ty,
                        nullable,
                        default: None,
                    };
                    if flags & 2 != 0 {
                        let l = def
                            .get(p..p + 4)
                            .ok_or_else(|| corrupt(tid, "column default ends early"))?;
                        let l = u32::from_le_bytes(l.try_into().expect("4")) as usize;
                        let b = p
                            .checked_add(4 + l)
                            .and_then(|end| def.get(p + 4..end))
                            .ok_or_else(|| corrupt(tid, "column default ends early"))?;
                        column.default = Some(decode_default(&column, b, |d| {
                            corrupt(tid, format!("default of column {:?}: {d}", column.name))
                        })?);
                        p += 4 + l;
                    }
                    columns.push(column);
                }
                Ok(CatalogEntry::Table(TableInfo {
                    name,
                    rel: RelId(rel),
                    columns,
                    logged: *kind == KIND_TABLE,
                }))
            }
            KIND_INDEX => {
                let bad_len = || corrupt(tid, format!("index definition of {} bytes", def.len()));
                if def.len() < 7 {
                    return Err(bad_len());
                }
                let table = u32::from_le_bytes(def[0..4].try_into().expect("4"));
                let first = u16::from_le_bytes(def[4..6].try_into().expect("2")) as usize;
                let (columns, unique, primary) = if def.len() == 7 {
                    (vec![first], def[6] != 0, false)
                } else {
                    let flags = def[6];
                    if flags > 3 {
                        return Err(corrupt(tid, format!("index flags {flags:#x}")));
                    }
                    let n = usize::from(def[7]);
                    if !(1..=btree::MAX_KEY_COLUMNS).contains(&n) {
                        return Err(corrupt(tid, format!("index of {n} columns")));
                    }
                    if def.len() != 8 + 2 * (n - 1) {
                        return Err(bad_len());
                    }
                    let mut columns = vec![first];
                    columns.extend(
                        def[8..]
                            .chunks_exact(2)
                            .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]]))),
                    );
                    (columns, flags & 1 != 0, flags & 2 != 0)
                };
                Ok(CatalogEntry::Index(IndexInfo {
                    name,
                    rel: RelId(rel),
                    table: RelId(table),
                    columns,
                    unique,
                    primary,
                }))
            }
            k => Err(corrupt(tid, format!("unknown entry kind {k}"))),
        }
    }
}

/// Check a name for a table, index or column (`owner` is the table or
/// index being defined; the message names it once and cuts long names).
pub(crate) fn check_name(what: &str, owner: &str, name: &str) -> Result<()> {
    let bad = |detail: String| EngineError::InvalidSchema {
        name: owner.to_string(),
        detail,
    };
    if name.is_empty() {
        return Err(bad(format!("empty {what} name")));
    }
    if name.len() > MAX_NAME_LEN {
        let named = if name == owner {
            String::new()
        } else {
            format!(" {}", cut(name))
        };
        return Err(bad(format!(
            "{what} name{named} is {} bytes, at most {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

/// Bytes a table's catalog row takes beyond its column definitions: the
/// row's count and null bitmap, kind and rel (8 each), the name and the
/// definition (a 4-byte length each).
fn table_row_fixed_len(name: &str) -> usize {
    2 + 1 + 8 + 8 + 4 + name.len() + 4
}

/// Bytes one column takes in its table's catalog row: type, flags, name
/// length (u16), name, and a default's length (u32) and bytes.
fn column_def_len(c: &Column) -> usize {
    let default = c.default.as_ref().map_or(0, |d| {
        // A one-column row: count, bitmap, the value.
        4 + COUNT_LEN
            + 1
            + match d {
                Value::Null => 0,
                Value::Bytes(b) => LEN_PREFIX + b.len(),
                Value::Text(t) => LEN_PREFIX + t.len(),
                _ => c.ty.fixed_width().unwrap_or(0),
            }
    });
    4 + c.name.len() + default
}

/// A column's default as it is stored: a one-column row of the column's
/// type (a default of the wrong type is [`EngineError::TypeMismatch`]).
pub(crate) fn encode_default(table: &str, c: &Column, d: &Value) -> Result<Vec<u8>> {
    let one = Column {
        default: None,
        ..c.clone()
    };
    encode_row(table, std::slice::from_ref(&one), std::slice::from_ref(d))
}

fn decode_default(c: &Column, bytes: &[u8], bad: impl Fn(String) -> EngineError) -> Result<Value> {
    let one = Column {
        default: None,
        ..c.clone()
    };
    let mut row = decode_row(std::slice::from_ref(&one), bytes, &bad)?;
    match (row.pop(), row.is_empty()) {
        (Some(v), true) => Ok(v),
        _ => Err(bad("not one value".into())),
    }
}

/// Bytes of a row of `columns` with every column holding a value and byte
/// strings empty (the smallest row with no NULL): the column count, the
/// null bitmap, 8 bytes per i64 and a 4-byte length per byte string.
pub(crate) fn full_row_min_len(columns: &[Column]) -> usize {
    let values: usize = columns.iter().map(|c| c.ty.min_width()).sum();
    2 + columns.len().div_ceil(8) + values
}

/// Check a new table's definition: [`check_definition`], and no column
/// has a default (a default is what rows stored before its column was
/// added read: only `add_column` takes one).
pub(crate) fn check_table(name: &str, columns: &[Column]) -> Result<()> {
    if let Some(c) = columns.iter().find(|c| c.default.is_some()) {
        return Err(EngineError::InvalidSchema {
            name: name.to_string(),
            detail: format!(
                "column {} has a default: a default is what rows stored before a column \
                 was added read, so only add_column takes one (every row of a new table \
                 carries its own value)",
                cut(&c.name)
            ),
        });
    }
    check_definition(name, columns)
}

/// Check a table definition: its name and columns, that its definition
/// fits in one catalog row, and that a row with a value in every column
/// fits on a page.
pub(crate) fn check_definition(name: &str, columns: &[Column]) -> Result<()> {
    check_name("table", name, name)?;
    let bad = |detail: String| EngineError::InvalidSchema {
        name: name.to_string(),
        detail,
    };
    if columns.is_empty() || columns.len() > MAX_COLUMNS {
        return Err(bad(format!(
            "{} columns, expected 1 ..= {MAX_COLUMNS}",
            columns.len()
        )));
    }
    for (i, c) in columns.iter().enumerate() {
        check_name("column", name, &c.name)?;
        if columns[..i].iter().any(|o| o.name == c.name) {
            return Err(bad(format!("column {} appears twice", cut(&c.name))));
        }
    }
    let max = heap::page::MAX_ROW_LEN;
    let fixed = table_row_fixed_len(name);
    let defs: usize = columns.iter().map(column_def_len).sum();
    if fixed + defs > max {
        let names: usize = columns.iter().map(|c| c.name.len()).sum();
        let avg = names.div_ceil(columns.len());
        return Err(bad(format!(
            "the definition of {} columns takes {} bytes in the catalog, at most {} fit \
             (a catalog row holds {max} bytes; each column takes 4 bytes plus its name, here \
             {names} bytes of names): with names of {avg} bytes at most {} columns fit",
            columns.len(),
            fixed + defs,
            max - fixed,
            (max - fixed) / (4 + avg),
        )));
    }
    let row = full_row_min_len(columns);
    if row > max {
        return Err(bad(format!(
            "a row with a value in every column takes at least {row} bytes (8 per i64, f64 or \
             timestamp column, 1 per bool, 4 plus its length per byte or text string, and a \
             {}-byte header), at most {max} fit on a \
             page (there is no TOAST): use fewer columns",
            2 + columns.len().div_ceil(8)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_bad_bytes_are_errors() {
        let t = CatalogEntry::Table(TableInfo {
            name: "t".into(),
            rel: RelId(1000),
            columns: vec![
                Column::new("id", ColumnType::I64),
                Column::nullable("v", ColumnType::Bytes),
            ],
            logged: false,
        });
        let tid = Tid::new(0, 1);
        let b = t.encode().unwrap();
        match CatalogEntry::decode(tid, &b).unwrap() {
            CatalogEntry::Table(d) => assert!(d.columns.len() == 2 && !d.logged),
            other => panic!("{other:?}"),
        }
        for cut in 0..b.len() {
            assert!(CatalogEntry::decode(tid, &b[..cut]).is_err());
        }
        let i = CatalogEntry::Index(IndexInfo {
            name: "i".into(),
            rel: RelId(1001),
            table: RelId(1000),
            columns: vec![1],
            unique: true,
            primary: false,
        });
        let single = i.encode().unwrap();
        match CatalogEntry::decode(tid, &single).unwrap() {
            CatalogEntry::Index(d) => assert!(d.unique && d.columns == [1] && !d.primary),
            other => panic!("{other:?}"),
        }
        let pk = CatalogEntry::Index(IndexInfo {
            name: "t_pkey".into(),
            rel: RelId(1002),
            table: RelId(1000),
            columns: vec![1, 0, 3],
            unique: true,
            primary: true,
        });
        let b = pk.encode().unwrap();
        match CatalogEntry::decode(tid, &b).unwrap() {
            CatalogEntry::Index(d) => assert!(d.unique && d.primary && d.columns == [1, 0, 3]),
            other => panic!("{other:?}"),
        }
        // The one-column form is the one every older directory holds.
        assert_eq!(b.len(), single.len() + "t_pkey".len() - 1 + 1 + 2 * 2);
        for cut in 0..b.len() {
            assert!(CatalogEntry::decode(tid, &b[..cut]).is_err());
        }
    }

    #[test]
    fn column_types_and_defaults_round_trip_and_bad_defaults_are_errors() {
        let columns = vec![
            Column::new("id", ColumnType::I64),
            Column::nullable("f", ColumnType::F64).with_default(-0.5),
            Column::new("s", ColumnType::Text).with_default("dé"),
            Column::new("ok", ColumnType::Bool).with_default(true),
            Column::nullable("at", ColumnType::Timestamp),
            Column::new("b", ColumnType::Bytes).with_default(vec![0u8, 255]),
        ];
        let info = TableInfo {
            name: "t".into(),
            rel: RelId(1000),
            columns: columns.clone(),
            logged: true,
        };
        let tid = Tid::new(0, 1);
        let b = CatalogEntry::Table(info).encode().unwrap();
        match CatalogEntry::decode(tid, &b).unwrap() {
            CatalogEntry::Table(d) => assert_eq!(d.columns, columns),
            other => panic!("{other:?}"),
        }
        for cut in 0..b.len() {
            assert!(CatalogEntry::decode(tid, &b[..cut]).is_err(), "cut {cut}");
        }
        let computed = table_row_fixed_len("t") + columns.iter().map(column_def_len).sum::<usize>();
        assert_eq!(b.len(), computed);
        // A default of another type than its column's is refused.
        let bad = TableInfo {
            name: "t".into(),
            rel: RelId(1000),
            columns: vec![Column::new("n", ColumnType::I64).with_default("x")],
            logged: true,
        };
        let e = CatalogEntry::Table(bad).encode().unwrap_err();
        assert!(matches!(e, EngineError::TypeMismatch { .. }), "{e}");
        // Unknown type codes and flags are corrupt, not guessed.
        let one = TableInfo {
            name: "t".into(),
            rel: RelId(1000),
            columns: vec![Column::new("n", ColumnType::Bool)],
            logged: true,
        };
        let good = CatalogEntry::Table(one).encode().unwrap();
        let def = good.len() - 5; // type, flags, u16 name length, "n"
        for (at, byte) in [(def, 7u8), (def + 1, 4)] {
            let mut bad = good.clone();
            bad[at] = byte;
            assert!(
                CatalogEntry::decode(tid, &bad).is_err(),
                "byte {at} = {byte}"
            );
        }
    }

    /// `check_table`'s size arithmetic is the encoding's: a definition it
    /// accepts encodes to exactly the length it computed.
    #[test]
    fn table_row_length_matches_the_encoding() {
        for (n, name_len) in [(1, 1), (7, 12), (64, 63), (300, 20)] {
            let columns: Vec<Column> = (0..n)
                .map(|i| Column::new(format!("{i:0>name_len$}"), ColumnType::Bytes))
                .collect();
            let name = "t".repeat(name_len);
            let computed =
                table_row_fixed_len(&name) + columns.iter().map(column_def_len).sum::<usize>();
            let info = TableInfo {
                name,
                rel: RelId(1000),
                columns,
                logged: true,
            };
            match CatalogEntry::Table(info).encode() {
                Ok(bytes) => assert_eq!(bytes.len(), computed, "{n} columns"),
                Err(EngineError::RowTooLarge { len, .. }) => assert_eq!(len, computed),
                Err(e) => panic!("{e}"),
            }
        }
        let row: Vec<Value> = (0..9)
            .map(|i| {
                if i % 2 == 0 {
                    Value::I64(i)
                } else {
                    Value::Bytes(Vec::new())
                }
            })
            .collect();
        let columns: Vec<Column> = (0..9)
            .map(|i| {
                let ty = if i % 2 == 0 {
                    ColumnType::I64
                } else {
                    ColumnType::Bytes
                };
                Column::new(format!("c{i}"), ty)
            })
            .collect();
        let bytes = encode_row("t", &columns, &row).unwrap();
        assert_eq!(bytes.len(), full_row_min_len(&columns));
    }
}
