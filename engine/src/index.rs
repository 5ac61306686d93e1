//! Indexes in the engine: keys from values, the unique check's view of the
//! heap, index maintenance, builds, and the heap side of vacuum and verify.
//!
//! ```text
//!   Transaction::insert ── heap.insert ──> TID ── for each index of the table:
//!                                                 btree.insert(key, TID, &UniqueCheck)
//!                                                   └─ unique index, equal key found:
//!                                                      UniqueCheck reads that entry's heap tuple
//!                                                      (leaf locked; heap page locked shared)
//!   Transaction::update ── unique pre-check ── heap.update ──> new TID ── entries for every index
//!   Transaction::delete ── heap.delete (entries stay; vacuum removes them once the tuple is dead)
//! ```
//!
//! Rules:
//! 1. **Keys** (see `keys`): an index over one column has single-column
//!    keys ([`value_key`]: an `I64` or `Timestamp` column gives
//!    `KeyType::I64` keys, the other types `KeyType::Bytes` keys with
//!    order-preserving bytes) and **does not index NULLs** (no entry;
//!    lookups of NULL find nothing; a unique index allows any number of
//!    NULLs, as in SQL); an index of 2 to 8 columns has tuple keys, indexes
//!    NULLs (first), and a unique one treats a key with a NULL as distinct
//!    from every other.
//! 2. **No HOT**: every new tuple version gets an entry in every index, even
//!    if its key did not change (PostgreSQL without heap-only tuples).
//! 3. **Liveness for unique checks** comes from the transaction manager's
//!    *current* state, never from the inserter's snapshot (PostgreSQL's
//!    `SnapshotDirty`): inserter aborted, or deleter committed, or deleted by
//!    the checking transaction itself = `Dead`; inserter and deleter (if any)
//!    finished in a way that leaves the row in place = `Live`; inserter or
//!    deleter still running = `InProgress`. The checking transaction's own
//!    insert counts as `Live`. An entry whose heap tuple has no storage, or
//!    holds another key (a reused line pointer), is `Dead`.
//! 4. **Readers re-check**: an entry may point to a version the reader cannot
//!    see, or (a stale entry over a reused line pointer) to a tuple with
//!    another key; reads fetch through the snapshot and compare the key.
//! 5. **Vacuum order** (PostgreSQL's lazy vacuum): the heap's first pass
//!    prunes and returns the TIDs whose line pointers are dead; the indexes
//!    drop the entries naming exactly those TIDs; the heap's second pass
//!    turns only those dead pointers unused. A tuple that dies during the
//!    vacuum (a rollback) keeps its pointer and its entries until the next
//!    one, so rollbacks never wait (see `Database::vacuum`).

use std::collections::HashSet;
use std::sync::Arc;

use btree::{BtreeError, HeapRow, HeapVisibility, Key, KeyType, Liveness};
use bufmgr::{RelFork, Ring, StreamConfig};
use heap::page::{HeapPage, LpState};
use heap::prune::dead_to_everyone;
use heap::tuple::{
    HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID,
    TUPLE_HEADER_SIZE, TupleHeader,
};
use heap::txn::{INVALID_XID, StatusError};
use heap::{Heap, HeapError, Tid, TransactionStatus, XidStatus};

use crate::catalog::{IndexHandle, TableHandle};
use crate::error::{EngineError, Result};
use crate::table_def::TableInfo;
use crate::txn::Xid;
use crate::value::{Column, ColumnType, Row, Value, decode_row, f64_order_key};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The B-tree key type of a column type. Until composite keys bring a key
/// type per column, the new types map onto the two the tree knows, with
/// order-preserving bytes (see [`value_key`]): `Timestamp` is an `I64` key,
/// `F64`, `Text` and `Bool` are `Bytes` keys.
pub(crate) fn key_type(ty: ColumnType) -> KeyType {
    match ty {
        ColumnType::I64 | ColumnType::Timestamp => KeyType::I64,
        ColumnType::Bytes | ColumnType::F64 | ColumnType::Text | ColumnType::Bool => KeyType::Bytes,
    }
}

/// The index key of a value; `None` for NULL (not indexed). The key's bytes
/// compare (memcmp) as the values do ([`Value`]'s order):
///
/// | value | key |
/// |---|---|
/// | `I64(v)`, `Timestamp(v)` | `Key::I64(v)` |
/// | `Bytes(b)` | `Key::Bytes(b)` |
/// | `Text(s)` | `Key::Bytes` of its UTF-8 bytes (byte order) |
/// | `F64(x)` | `Key::Bytes` of [`f64_order_key`]`(x)` big-endian (8 bytes): `-0.0` and `0.0` are one key, every NaN is one key above `+inf` |
/// | `Bool(b)` | `Key::Bytes([0])` for false, `[1]` for true |
pub(crate) fn value_key(v: &Value) -> Option<Key> {
    match v {
        Value::I64(i) | Value::Timestamp(i) => Some(Key::I64(*i)),
        Value::Bytes(b) => Some(Key::Bytes(b.clone())),
        Value::Text(s) => Some(Key::Bytes(s.as_bytes().to_vec())),
        Value::F64(x) => Some(Key::Bytes(f64_order_key(*x).to_be_bytes().to_vec())),
        Value::Bool(b) => Some(Key::Bytes(vec![u8::from(*b)])),
        Value::Null => None,
    }
}

/// A caller's search value as a key of the single-value index `ix`: a
/// value of another type than the column's is
/// [`EngineError::TypeMismatch`]; `None` if it matches nothing (NULL in a
/// single-column index), and an index of more columns is
/// [`EngineError::BadKey`].
pub(crate) fn search_key(ix: &IndexHandle, table: &TableInfo, v: &Value) -> Result<Option<Key>> {
    ix.full_key(table, std::slice::from_ref(v))
}

/// A key of a `ty` column as errors print it: `(value)`, the value read
/// back from the key's bytes ([`value_key`] inverted).
pub(crate) fn key_display(ty: ColumnType, key: &Key) -> String {
    let value = match (ty, key) {
        (ColumnType::F64, Key::Bytes(b)) => <[u8; 8]>::try_from(b.as_slice())
            .ok()
            .map(|b| f64_from_order_key(u64::from_be_bytes(b)).to_string()),
        (ColumnType::Text, Key::Bytes(b)) => std::str::from_utf8(b).ok().map(|s| format!("{s:?}")),
        (ColumnType::Bool, Key::Bytes(b)) => match b.as_slice() {
            [0] => Some("false".into()),
            [1] => Some("true".into()),
            _ => None,
        },
        (ColumnType::Timestamp, Key::I64(v)) => Some(format!("timestamp {v}")),
        _ => None,
    };
    value.map_or_else(|| key.to_string(), |v| format!("({v})"))
}

/// The float whose [`f64_order_key`] is `k` (NaN and `0.0` for the
/// canonical keys).
fn f64_from_order_key(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

/// Map a B-tree error of `op` on index `ix` to the engine's. The names
/// are copied only when an error is mapped (the closure is made on every
/// lookup: copying them there was three allocations a lookup).
pub(crate) fn map_btree<'a>(
    ix: &'a IndexHandle,
    op: &'a str,
) -> impl FnOnce(BtreeError) -> EngineError + 'a {
    move |e| {
        let (index, table) = (ix.info.name.clone(), ix.table.clone());
        let ty = ix.column_type;
        match e {
            BtreeError::UniqueViolation { key, .. } => EngineError::UniqueViolation {
                index,
                table,
                key: key_display(ty, &key),
            },
            BtreeError::UniqueInProgress { key, xid, .. } => EngineError::UniqueConflict {
                index,
                table,
                key: key_display(ty, &key),
                xid,
            },
            BtreeError::KeyTooLarge { size, max, .. } => {
                EngineError::KeyTooLarge { index, size, max }
            }
            source => EngineError::Index {
                what: format!("{op} in index {index:?} of table {table:?}"),
                source,
            },
        }
    }
}

/// Hand the tuple at `tid` (header, row bytes) to `f` under the page's
/// shared lock; `None` if the TID names no tuple with storage (unused or
/// dead line pointer, offset past the end, block past the end).
pub(crate) fn with_tuple<R>(
    heap: &Heap,
    tid: Tid,
    ring: Option<&mut Ring>,
    f: impl FnOnce(&TupleHeader, &[u8]) -> R,
) -> Result<Option<R>, HeapError> {
    if tid.offset == 0 {
        return Ok(None);
    }
    let pin = match heap
        .pool()
        .read_buffer(RelFork::main(heap.rel()), tid.block, ring)
    {
        Ok(p) => p,
        Err(bufmgr::Error::BlockOutOfRange { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let page = pin.lock_shared();
    let view = HeapPage::parse(
        &page,
        heap::page::PageId {
            rel: heap.rel(),
            block: tid.block,
        },
    )?;
    let Some((_, bytes)) = view.tuple(tid.offset)? else {
        return Ok(None);
    };
    let h = TupleHeader::decode(bytes).expect("tuple() checked the length");
    Ok(Some(f(&h, &bytes[TUPLE_HEADER_SIZE..])))
}

/// Did `xid` commit, as the transaction manager says now?
fn committed(tm: &dyn TransactionStatus, xid: Xid) -> Result<bool, StatusError> {
    Ok(matches!(tm.status(xid)?, XidStatus::Committed { .. }))
}

/// Rule 3 of the module docs, for the transaction `own`.
pub(crate) fn liveness(
    h: &TupleHeader,
    own: Xid,
    tm: &dyn TransactionStatus,
) -> Result<Liveness, StatusError> {
    let frozen = h.has(HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID);
    if !frozen {
        if h.has(HEAP_XMIN_INVALID) {
            return Ok(Liveness::Dead);
        }
        let own_insert = h.xmin == own && own != INVALID_XID;
        if !(h.has(HEAP_XMIN_COMMITTED) || own_insert) {
            match tm.status(h.xmin)? {
                XidStatus::Aborted => return Ok(Liveness::Dead),
                XidStatus::InProgress => return Ok(Liveness::InProgress(h.xmin)),
                XidStatus::Committed { .. } => {}
            }
        }
    }
    if h.xmax == INVALID_XID || h.has(HEAP_XMAX_INVALID) {
        return Ok(Liveness::Live);
    }
    if (h.xmax == own && own != INVALID_XID) || h.has(HEAP_XMAX_COMMITTED) {
        return Ok(Liveness::Dead);
    }
    Ok(match tm.status(h.xmax)? {
        XidStatus::Aborted => Liveness::Live,
        XidStatus::InProgress => Liveness::InProgress(h.xmax),
        XidStatus::Committed { .. } => Liveness::Dead,
    })
}

/// A row every snapshot from now on sees (inserter committed, no committed
/// deleter): what `verify` requires an entry for.
fn live_now(h: &TupleHeader, tm: &dyn TransactionStatus) -> Result<bool, StatusError> {
    let frozen = h.has(HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID);
    let xmin_ok = frozen
        || h.has(HEAP_XMIN_COMMITTED)
        || (!h.has(HEAP_XMIN_INVALID) && committed(tm, h.xmin)?);
    let xmax_done = h.xmax != INVALID_XID
        && !h.has(HEAP_XMAX_INVALID)
        && (h.has(HEAP_XMAX_COMMITTED) || committed(tm, h.xmax)?);
    Ok(xmin_ok && !xmax_done)
}

/// The heap as a unique check sees it (rule 3), for inserting `key` on
/// behalf of transaction `own`.
pub(crate) struct UniqueCheck<'a> {
    pub heap: &'a Heap,
    pub tm: &'a dyn TransactionStatus,
    pub own: Xid,
    pub columns: &'a [Column],
    pub index: &'a IndexHandle,
    pub key: &'a Key,
}

impl UniqueCheck<'_> {
    fn check(&self, tid: Tid) -> Result<Liveness, BoxError> {
        let got = with_tuple(self.heap, tid, None, |h, data| {
            let row = decode_row(self.columns, data, |d| EngineError::CorruptRow {
                table: format!("relation {}", self.heap.rel().0),
                row_id: tid,
                detail: d,
            })?;
            if self.index.row_key(&row).as_ref() != Some(self.key) {
                // A reused line pointer: the entry is stale.
                return Ok::<_, EngineError>(Liveness::Dead);
            }
            liveness(h, self.own, self.tm)
                .map_err(|e| EngineError::heap(format!("unique check of row {tid}"))(e.into()))
        })?;
        match got {
            None => Ok(Liveness::Dead),
            Some(r) => Ok(r?),
        }
    }
}

impl HeapVisibility for UniqueCheck<'_> {
    fn liveness(&self, tid: Tid) -> Result<Liveness, BoxError> {
        self.check(tid)
    }
}

impl std::fmt::Debug for UniqueCheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UniqueCheck")
            .field("own", &self.own)
            .field("key", &self.key)
            .finish()
    }
}

/// Check the keys `row` gives the indexes before anything changes (so a key
/// that is too long fails an update cleanly).
pub(crate) fn check_key_sizes(indexes: &[Arc<IndexHandle>], row: &Row) -> Result<()> {
    for ix in indexes {
        if let Some(k) = ix.row_key(row) {
            let size = k.encoded_len();
            if size > btree::MAX_KEY_SIZE {
                return Err(EngineError::KeyTooLarge {
                    index: ix.info.name.clone(),
                    size,
                    max: btree::MAX_KEY_SIZE,
                });
            }
        }
    }
    Ok(())
}

/// Add the entries of the tuple `tid` holding `row` to every index.
pub(crate) fn insert_entries(
    t: &TableHandle,
    indexes: &[Arc<IndexHandle>],
    row: &Row,
    tid: Tid,
    own: Xid,
    tm: &dyn TransactionStatus,
) -> Result<()> {
    for ix in indexes {
        insert_entry(t, ix, row, tid, own, tm)?;
    }
    Ok(())
}

/// Add the entry of the tuple `tid` holding `row` to index `ix`.
pub(crate) fn insert_entry(
    t: &TableHandle,
    ix: &IndexHandle,
    row: &Row,
    tid: Tid,
    own: Xid,
    tm: &dyn TransactionStatus,
) -> Result<()> {
    match ix.row_key(row) {
        Some(key) => insert_key(t, ix, &key, tid, own, tm),
        None => Ok(()),
    }
}

/// Add the entry `(key, tid)` to index `ix` (unique checks as rule 3 says).
fn insert_key(
    t: &TableHandle,
    ix: &IndexHandle,
    key: &Key,
    tid: Tid,
    own: Xid,
    tm: &dyn TransactionStatus,
) -> Result<()> {
    let check = UniqueCheck {
        heap: &t.heap,
        tm,
        own,
        columns: &t.info.columns,
        index: ix,
        key,
    };
    ix.btree
        .insert(key, tid, &check)
        .map_err(map_btree(ix, "insert"))
}

/// Fill the empty index `ix` with `entries` (in any order): sorted, then
/// built bottom-up (`btree::Index::build_sorted`: leaves packed to its
/// fillfactor, each page logged whole once) — unless `ix` is unique and two
/// entries share a key, which takes the liveness check of rule 3 (one may
/// be a dead version): then entry by entry, in key order. Returns the
/// number of entries.
pub(crate) fn build_from_entries(
    t: &TableHandle,
    ix: &IndexHandle,
    mut entries: Vec<(Key, Tid)>,
    own: Xid,
    tm: &dyn TransactionStatus,
) -> Result<u64> {
    // An index on one integer column sorts plain (i64, TID) pairs, a third
    // of the bytes, compared without going through `Key`; same order.
    let ints: Option<Vec<(i64, Tid)>> = entries
        .iter()
        .map(|(k, tid)| match k {
            Key::I64(v) => Some((*v, *tid)),
            _ => None,
        })
        .collect();
    if let Some(mut ints) = ints {
        ints.sort_unstable();
        entries.clear();
        entries.extend(ints.into_iter().map(|(v, tid)| (Key::I64(v), tid)));
    } else {
        entries.sort_unstable();
    }
    let n = entries.len() as u64;
    if ix.info.unique
        && entries
            .windows(2)
            .any(|w| w[0].0 == w[1].0 && !w[0].0.has_null())
    {
        for (key, tid) in &entries {
            // A version already dead to the unique check (deleted by a
            // committed transaction, kept for a snapshot that may still
            // see it) is indexed but is no duplicate of the live version,
            // whichever of the two comes first: only a version that may be
            // live is checked against the others.
            let what = || {
                format!(
                    "building index {:?} of table {:?}",
                    ix.info.name, t.info.name
                )
            };
            let dead = with_tuple(&t.heap, *tid, None, |h, _| liveness(h, own, tm))
                .map_err(EngineError::heap(what()))?
                .transpose()
                .map_err(|e| EngineError::heap(what())(e.into()))?
                .is_none_or(|l| l == Liveness::Dead);
            if dead {
                ix.btree
                    .insert(key, *tid, &|_: Tid| Liveness::Dead)
                    .map_err(map_btree(ix, "build"))?;
            } else {
                insert_key(t, ix, key, *tid, own, tm)?;
            }
        }
    } else {
        ix.btree
            .build_sorted(entries)
            .map_err(map_btree(ix, "build"))?;
    }
    Ok(n)
}

/// Before an update: would `row` conflict in a unique index with a row
/// other than `replacing`? (The B-tree checks again, under the leaf lock,
/// when the entry goes in; this only keeps the common case clean.)
pub(crate) fn precheck_unique(
    t: &TableHandle,
    indexes: &[Arc<IndexHandle>],
    row: &Row,
    replacing: Tid,
    own: Xid,
    tm: &dyn TransactionStatus,
) -> Result<()> {
    for ix in indexes.iter().filter(|ix| ix.info.unique) {
        let Some(key) = ix.row_key(row).filter(|k| !k.has_null()) else {
            continue;
        };
        let check = UniqueCheck {
            heap: &t.heap,
            tm,
            own,
            columns: &t.info.columns,
            index: ix,
            key: &key,
        };
        for tid in ix
            .btree
            .lookup(&key)
            .map_err(map_btree(ix, "unique check"))?
        {
            if tid == replacing {
                continue;
            }
            let l = check.check(tid).map_err(|source| EngineError::Index {
                what: format!("unique check in index {:?}", ix.info.name),
                source: BtreeError::HeapCheck {
                    index: ix.info.name.clone(),
                    source,
                },
            })?;
            match l {
                Liveness::Dead => {}
                Liveness::Live => {
                    return Err(EngineError::UniqueViolation {
                        index: ix.info.name.clone(),
                        table: ix.table.clone(),
                        key: key.to_string(),
                    });
                }
                Liveness::InProgress(xid) => {
                    return Err(EngineError::UniqueConflict {
                        index: ix.info.name.clone(),
                        table: ix.table.clone(),
                        key: key.to_string(),
                        xid,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Visit every tuple with storage of the table, a page at a time: the
/// page's tuples are copied under its shared lock and handed to `f` after
/// it is released. The pages come from a read stream (read ahead in
/// combined reads, through `ring` if given).
pub(crate) fn for_each_tuple(
    t: &TableHandle,
    ring: Option<Ring>,
    mut f: impl FnMut(Tid, &TupleHeader, &[u8]) -> Result<()>,
) -> Result<()> {
    let what = || format!("reading table {:?}", t.info.name);
    let nblocks = t.heap.nblocks().map_err(EngineError::heap(what()))?;
    let rf = RelFork::main(t.heap.rel());
    let mut stream = t
        .heap
        .pool()
        .read_stream(rf, 0..nblocks, ring, StreamConfig::default());
    let mut batch: Vec<(Tid, TupleHeader, Vec<u8>)> = Vec::new();
    loop {
        batch.clear();
        {
            let Some(buf) = stream.next_buffer() else {
                break;
            };
            let page = buf
                .map_err(|e| EngineError::heap(what())(e.into()))?
                .lock_shared();
            let block = page.block();
            let view = HeapPage::parse(
                &page,
                heap::page::PageId {
                    rel: t.heap.rel(),
                    block,
                },
            )
            .map_err(EngineError::heap(what()))?;
            for item in view.tuples() {
                let (off, _, bytes) = item.map_err(EngineError::heap(what()))?;
                let h = TupleHeader::decode(bytes).expect("tuples() checked the length");
                batch.push((Tid::new(block, off), h, bytes[TUPLE_HEADER_SIZE..].to_vec()));
            }
        }
        for (tid, h, data) in &batch {
            f(*tid, h, data)?;
        }
    }
    Ok(())
}

/// Build index `ix` over the table's existing tuples: every tuple not yet
/// dead to every snapshot (`horizon`) gets its entry, so snapshots older
/// than the index still find what they see (PostgreSQL indexes
/// RECENTLY_DEAD tuples too). The entries are gathered, sorted and built
/// bottom-up (`build_from_entries`). Runs as transaction `own` with the
/// table locked exclusively; a unique index fails on a live duplicate.
pub(crate) fn build(
    t: &TableHandle,
    ix: &IndexHandle,
    own: Xid,
    horizon: Xid,
    tm: &dyn TransactionStatus,
    ring: Option<Ring>,
) -> Result<u64> {
    let columns = &t.info.columns;
    let mut entries = Vec::new();
    for_each_tuple(t, ring, |tid, h, data| {
        if dead_to_everyone(h, horizon, tm).map_err(|e| {
            EngineError::heap(format!(
                "building index {:?} of table {:?}",
                ix.info.name, t.info.name
            ))(e.into())
        })? {
            return Ok(());
        }
        let row = decode_row(columns, data, |d| EngineError::CorruptRow {
            table: t.info.name.clone(),
            row_id: tid,
            detail: d,
        })?;
        if let Some(key) = ix.row_key(&row) {
            entries.push((key, tid));
        }
        Ok(())
    })?;
    build_from_entries(t, ix, entries, own, tm)
}

/// The heap's rows as `btree::verify` wants them for index `ix`: every tuple
/// with storage and a non-NULL key; `live` if every snapshot from now on
/// sees it.
pub(crate) fn heap_rows(
    t: &TableHandle,
    ix: &IndexHandle,
    tm: &dyn TransactionStatus,
) -> Result<Vec<HeapRow>> {
    let mut rows = Vec::new();
    for_each_tuple(t, None, |tid, h, data| {
        let row = decode_row(&t.info.columns, data, |d| EngineError::CorruptRow {
            table: t.info.name.clone(),
            row_id: tid,
            detail: d,
        })?;
        if let Some(key) = ix.row_key(&row) {
            rows.push(HeapRow {
                key: Some(key),
                tid,
                live: live_now(h, tm).map_err(|e| {
                    EngineError::heap(format!("verifying row {tid} of table {:?}", t.info.name))(
                        e.into(),
                    )
                })?,
            });
        }
        Ok(())
    })?;
    Ok(rows)
}

/// The TIDs of the table's DEAD line pointers: tuples a vacuum's heap pass 1
/// removed whose pointers wait for its index pass and heap pass 2 (or for
/// the next vacuum, if a crash cut this one short).
pub(crate) fn dead_pointers(t: &TableHandle) -> Result<HashSet<Tid>> {
    let what = || format!("reading table {:?}", t.info.name);
    let nblocks = t.heap.nblocks().map_err(EngineError::heap(what()))?;
    let rf = RelFork::main(t.heap.rel());
    let mut dead = HashSet::new();
    for block in 0..nblocks {
        let page = t
            .heap
            .pool()
            .read_buffer(rf, block, None)
            .map_err(|e| EngineError::heap(what())(e.into()))?
            .lock_shared();
        let id = heap::page::PageId {
            rel: t.heap.rel(),
            block,
        };
        let view = HeapPage::parse(&page, id).map_err(EngineError::heap(what()))?;
        if view.is_new() {
            continue;
        }
        for off in 1..=view.item_count() {
            let item = view.item(off).map_err(EngineError::heap(what()))?;
            if item.state == LpState::Dead {
                dead.insert(Tid::new(block, off));
            }
        }
    }
    Ok(dead)
}
