//! Redo past dropped relations: the drop record and the invalid-page table
//! (PostgreSQL's `xlogutils.c`: `log_invalid_page`, `forget_invalid_pages`,
//! `XLogCheckInvalidPages`).
//!
//! The WAL after the redo point may hold changes to a relation that was
//! dropped before the crash: its file is gone when redo reaches them. A
//! record with a page image, or one that initialises its page, rebuilds the
//! page from nothing; but a record that changes the old page (every change
//! with `full_page_writes(false)`, and later changes with it on) finds no
//! page, or the blank page an earlier record's extension left:
//!
//! ```text
//!   record needs the old page of (rel, block), and
//!     the file is missing, or the block is past its end, or the page is
//!     blank (zeros, but for a checksum)  -> remember (rel, block, LSN); skip
//!                                           the record
//!   drop record for rel                   -> remove rel's files, forget
//!                                           every remembered page of rel
//!   end of recovery, pages remembered     -> ERROR naming relation, block
//!                                           and the record's LSN
//! ```
//!
//! A page that is missing or blank for any other reason (a lost write, a
//! zeroed page) is never forgiven: no drop follows, and the open fails at
//! the end of recovery naming it, instead of redo applying a change to a
//! page that is not there.
//!
//! The drop record (kind `Catalog`, info [`DROP_RELATIONS`], the relation
//! ids as little-endian `u32`s) is inserted and flushed after the DDL's
//! catalog change commits and before the files are removed, so a file is
//! never gone without a durable record saying why.
//!
//! Skipping a record whose page is missing loses nothing: every block of
//! such a record belongs to the relation whose drop forgives it (a record
//! that also changes another relation is an error at once), and a dropped
//! relation's pages are never read again.

use std::collections::BTreeMap;
use std::error::Error as StdError;

use bufmgr::{BufferPool, BufferTag, RelId};
use wal::{Lsn, Record, RmgrKind, Wal};

use crate::error::{EngineError, Result};

/// `Catalog` record info: relations dropped (payload: their ids).
pub const DROP_RELATIONS: u8 = 1;

type RedoError = Box<dyn StdError + Send + Sync>;

/// Insert and flush the record saying `rels` are dropped.
pub(crate) fn log_drop(wal: &Wal, rels: &[RelId]) -> Result<()> {
    let payload: Vec<u8> = rels.iter().flat_map(|r| r.0.to_le_bytes()).collect();
    let what = || format!("could not log the drop of {rels:?}");
    let record = Record::builder(RmgrKind::Catalog, DROP_RELATIONS, 0)
        .payload(payload)
        .build()
        .map_err(EngineError::wal(what()))?;
    let (_, end) = wal.insert(&record).map_err(EngineError::wal(what()))?;
    wal.flush(end).map_err(EngineError::wal(what()))
}

/// The relations a drop record names.
fn dropped_relations(record: &Record) -> std::result::Result<Vec<RelId>, RedoError> {
    if record.info() != DROP_RELATIONS {
        return Err(format!("unknown catalog record info {:#x}", record.info()).into());
    }
    let payload = record.payload();
    if !payload.len().is_multiple_of(4) {
        return Err(format!(
            "drop record payload of {} bytes is not a list of relation ids",
            payload.len()
        )
        .into());
    }
    Ok(payload
        .chunks_exact(4)
        .map(|c| RelId(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect())
}

/// Why a page a record needed was not there.
#[derive(Copy, Clone, Debug)]
enum Absence {
    NoFile,
    PastEnd(u32),
    Blank,
}

impl std::fmt::Display for Absence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Absence::NoFile => write!(f, "its file does not exist"),
            Absence::PastEnd(n) => write!(f, "its file has only {n} blocks"),
            Absence::Blank => write!(f, "the page is blank (never initialised)"),
        }
    }
}

/// Pages redo needed and did not find, until their relation's drop.
#[derive(Debug, Default)]
pub(crate) struct InvalidPages {
    /// The first record that needed each page.
    pages: BTreeMap<BufferTag, (Lsn, RmgrKind, Absence)>,
    /// Pages forgiven by drops (for the recovery statistics).
    pub forgiven: u64,
}

impl InvalidPages {
    /// Before redoing `record` (at `lsn`): if a page it needs is missing or
    /// blank, remember it and return `true` (skip the record).
    pub fn skip(
        &mut self,
        pool: &BufferPool,
        lsn: Lsn,
        record: &Record,
    ) -> std::result::Result<bool, RedoError> {
        let mut missing = Vec::new();
        for b in record.blocks() {
            if b.image().is_some() || b.is_will_init() {
                continue;
            }
            if let Some(why) = absence(pool, b.tag())? {
                missing.push((b.tag(), why));
            }
        }
        if missing.is_empty() {
            return Ok(false);
        }
        if let Some(other) = record
            .blocks()
            .iter()
            .find(|b| missing.iter().all(|(t, _)| t.rel != b.tag().rel))
        {
            let (tag, why) = missing[0];
            return Err(format!(
                "{tag} is missing ({why}), and the record also changes {}",
                other.tag()
            )
            .into());
        }
        for (tag, why) in missing {
            self.pages.entry(tag).or_insert((lsn, record.kind(), why));
        }
        Ok(true)
    }

    /// Redo a `Catalog` record: a drop removes the relations' files and
    /// forgives their remembered pages.
    pub fn redo_catalog(
        &mut self,
        pool: &BufferPool,
        record: &Record,
    ) -> std::result::Result<(), RedoError> {
        for rel in dropped_relations(record)? {
            pool.drop_relation(rel)?;
            let before = self.pages.len();
            self.pages.retain(|tag, _| tag.rel != rel);
            self.forgiven += (before - self.pages.len()) as u64;
        }
        Ok(())
    }

    /// At the end of recovery: a page still remembered belongs to a
    /// relation that was never dropped, so redo could not apply a change to
    /// it: an error naming the first one and how many there are.
    pub fn check_none_left(&self) -> Result<()> {
        let Some((tag, (lsn, kind, why))) = self.pages.iter().next() else {
            return Ok(());
        };
        Err(EngineError::Redo {
            lsn: *lsn,
            kind: *kind,
            source: format!(
                "the record needs {tag}, but {why}, and no later drop of the relation explains it ({} such pages)",
                self.pages.len()
            )
            .into(),
        })
    }
}

/// Is the page at `tag` missing or blank, and why?
fn absence(pool: &BufferPool, tag: BufferTag) -> std::result::Result<Option<Absence>, RedoError> {
    let rf = tag.relfork();
    if !pool.storage().exists(rf)? {
        return Ok(Some(Absence::NoFile));
    }
    let nblocks = pool.nblocks(rf)?;
    if tag.block >= nblocks {
        return Ok(Some(Absence::PastEnd(nblocks)));
    }
    match pool.read_buffer(rf, tag.block, None) {
        Ok(buf) => {
            let page = buf.lock_shared();
            Ok(bufmgr::page::is_new(&page).then_some(Absence::Blank))
        }
        Err(bufmgr::Error::ZeroedPage { .. }) => Ok(Some(Absence::Blank)),
        Err(e) => Err(e.into()),
    }
}
