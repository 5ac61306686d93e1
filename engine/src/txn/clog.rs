//! The commit log (clog): what became of every transaction, two bits each,
//! plus the commit record's LSN per group of 32 xids.
//!
//! PostgreSQL keeps transaction status in `pg_xact`, an SLRU of 8 KiB pages
//! with two bits per xid, and beside it, in memory, one LSN per group of
//! `CLOG_XACTS_PER_LSN_GROUP` = 32 xids: the largest end LSN of a commit
//! record among the group. Here both live in the pages of one relation,
//! `reserved::CLOG_REL`, read and written through the
//! buffer pool like any other relation, so the pool's eviction, checksums and
//! WAL-before-data rule apply to them unchanged.
//!
//! # Page layout
//!
//! ```text
//!  byte 0         8        12       16                                  8192
//!       +---------+--------+--------+-------------------------------------+
//!       | LSN     | cksum  | unused | group 0 | group 1 | ... | group 510 |
//!       +---------+--------+--------+-------------------------------------+
//!        (owned by the pool)          each group: 16 bytes
//!
//!  group g (32 xids) at byte 16 + 16 * g:
//!       +-------------------------------+-------------------------------+
//!       | status bits: u64 LE           | group commit LSN: u64 LE      |
//!       | xid i of the group at bits    | max end LSN of the commit     |
//!       | 2i .. 2i+2                    | records of the group's xids   |
//!       +-------------------------------+-------------------------------+
//!
//!  status: 00 in progress (or never started, or crashed)
//!          01 committed
//!          10 aborted
//!          11 sub-committed (PostgreSQL's; unused here, read as in progress)
//! ```
//!
//! A page holds (8192 - 16) / 16 = 511 groups = [`XIDS_PER_PAGE`] = 16,352
//! xids. Xid `x` lives on block `x / XIDS_PER_PAGE`, group
//! `(x % XIDS_PER_PAGE) / 32`, bits `2 * (x % 32)`. Keeping the LSN beside the
//! bits of its group means one page access answers "status and commit LSN".
//!
//! # Rules
//!
//! 1. A clog page is created with `pool.extend` when the first xid on it is
//!    handed out, zeroed: every xid on it reads "in progress" until its
//!    commit or abort is recorded. Creation is WAL-logged first, a
//!    [`CLOG_ZEROPAGE`] record (PostgreSQL's `CLOG_ZEROPAGE`), which redo
//!    replays by making the page a zeroed page again, whatever the disk
//!    holds (blank, zeros from an extension lost with the power, or torn):
//!    every status of an xid on it is set by a record that follows (no xid
//!    on the page exists before it), so replay rebuilds the page. A page
//!    missing at the replay of a commit or abort is extended again (not
//!    logged: redo writes no WAL).
//! 2. Status bits change only under the page's exclusive content lock (a
//!    read-modify-write of a 64-bit word shared by 32 xids).
//! 3. Marking an xid committed raises both the group LSN and the **page LSN**
//!    to the commit record's end LSN. The page LSN is what makes the pool's
//!    WAL-before-data rule flush the commit record before this page is
//!    written: with asynchronous commit, a clog page saying "committed" must
//!    never reach disk ahead of the record that makes the commit true
//!    (PostgreSQL's reason for the group LSN in `SlruPhysicalWritePage`).
//! 4. Clog changes are not WAL-logged themselves: the Xact commit/abort
//!    record is the durable truth and redo replays it here (idempotently:
//!    setting the same bits twice changes nothing; LSNs only grow).
//! 5. A clog page that cannot be read is an error naming the xid and the
//!    page, which the heap passes up to the reader (`TransactionStatus`
//!    returns it); nothing answers "in progress" on a guess. A pool whose
//!    every buffer is pinned is waited out for up to [`STARVED_WAIT`] first:
//!    scans pin pages they read ahead, and a status lookup under a scan's
//!    page lock must not fail because other scans hold the pool.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bufmgr::{BlockNumber, BufferPool, PAGE_SIZE, PinnedBuffer, RelFork};
use parking_lot::Mutex;
use wal::{Lsn, Record, RmgrKind, Wal};

use crate::error::{EngineError, Result};
use crate::reserved::CLOG_REL;
use crate::txn::Xid;

/// The clog's relation fork.
pub const CLOG_FORK: RelFork = RelFork::main(CLOG_REL);
/// First byte of the clog's own part of a page (after the pool's 12 bytes and
/// 4 unused bytes that keep the groups 8-aligned).
pub const CLOG_HEADER_LEN: usize = 16;
/// Xids per LSN group: PostgreSQL's `CLOG_XACTS_PER_LSN_GROUP`.
pub const XIDS_PER_GROUP: u64 = 32;
/// Bytes per group: 32 xids x 2 bits, then the group LSN.
pub const GROUP_LEN: usize = 16;
/// Groups per page.
pub const GROUPS_PER_PAGE: usize = (PAGE_SIZE - CLOG_HEADER_LEN) / GROUP_LEN;
/// Xids per page: 511 x 32 = 16,352.
pub const XIDS_PER_PAGE: u64 = GROUPS_PER_PAGE as u64 * XIDS_PER_GROUP;

/// `info` of the `Clog` record that creates a page (rule 1; PostgreSQL's
/// `CLOG_ZEROPAGE`). Payload: the block number, u32 LE; xid 0.
pub const CLOG_ZEROPAGE: u8 = 0x00;

// The groups fit in the page and leave the pool's 12 bytes alone.
const _: () = assert!(CLOG_HEADER_LEN + GROUPS_PER_PAGE * GROUP_LEN <= PAGE_SIZE);
const _: () = assert!(CLOG_HEADER_LEN >= 12);

/// Two bits of status, as stored.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ClogStatus {
    /// 00: running, never started, or crashed before finishing.
    InProgress,
    /// 01: committed; the group LSN covers the commit record.
    Committed,
    /// 10: aborted.
    Aborted,
}

impl ClogStatus {
    fn bits(self) -> u64 {
        match self {
            ClogStatus::InProgress => 0b00,
            ClogStatus::Committed => 0b01,
            ClogStatus::Aborted => 0b10,
        }
    }

    fn from_bits(b: u64) -> ClogStatus {
        match b & 0b11 {
            0b01 => ClogStatus::Committed,
            0b10 => ClogStatus::Aborted,
            // 0b11 (sub-committed) is never written here.
            _ => ClogStatus::InProgress,
        }
    }
}

/// Where an xid's bits live.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct ClogPosition {
    pub block: BlockNumber,
    /// Byte offset of the group's status word in the page.
    pub group_offset: usize,
    /// Bit shift of the xid's two bits in the status word.
    pub shift: u32,
}

/// The position of `xid`, or an error if the clog cannot address it.
pub fn position(xid: Xid) -> Result<ClogPosition> {
    let block = xid / XIDS_PER_PAGE;
    let block = BlockNumber::try_from(block)
        .ok()
        .filter(|b| *b < BlockNumber::MAX)
        .ok_or_else(|| EngineError::InvalidXid {
            xid,
            detail: format!("its commit-log page {block} is beyond the largest block number"),
        })?;
    let in_page = xid % XIDS_PER_PAGE;
    let group = (in_page / XIDS_PER_GROUP) as usize;
    Ok(ClogPosition {
        block,
        group_offset: CLOG_HEADER_LEN + group * GROUP_LEN,
        shift: 2 * (in_page % XIDS_PER_GROUP) as u32,
    })
}

fn read_u64(page: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(page[at..at + 8].try_into().expect("8 bytes"))
}

fn write_u64(page: &mut [u8], at: usize, v: u64) {
    page[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// How long a commit-log read waits out a pool whose every buffer is pinned.
pub const STARVED_WAIT: Duration = Duration::from_secs(2);

/// Pin commit-log page `block` (checksum verified if `verify`). A pool with
/// every buffer pinned (other readers' scans holding pages they read ahead)
/// is waited out: the pin is tried again, with pauses growing from 50 us to
/// 10 ms, for up to [`STARVED_WAIT`]; only then is it an error (rule 5).
fn pin_page(
    pool: &BufferPool,
    block: BlockNumber,
    verify: bool,
) -> bufmgr::Result<PinnedBuffer<'_>> {
    let mut pause = Duration::from_micros(50);
    let mut waited = Duration::ZERO;
    loop {
        let pinned = if verify {
            pool.read_buffer(CLOG_FORK, block, None)
        } else {
            pool.read_buffer_unverified(CLOG_FORK, block)
        };
        match pinned {
            Err(e) if e.kind() == bufmgr::ErrorKind::ResourceExhausted && waited < STARVED_WAIT => {
                std::thread::sleep(pause);
                waited += pause;
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// The commit log over a buffer pool.
#[derive(Debug)]
pub struct Clog {
    /// Pages known to exist (a cache of `nblocks`, which only grows).
    pages: AtomicU32,
    /// Serialises extension of the clog relation.
    extend_lock: Mutex<()>,
}

impl Clog {
    /// Open the clog of `pool`, creating its (empty) relation if needed.
    pub fn open(pool: &BufferPool) -> Result<Clog> {
        pool.create_fork(CLOG_FORK).map_err(EngineError::buffer(
            "could not create the commit log relation",
        ))?;
        let n = pool.nblocks(CLOG_FORK).map_err(EngineError::buffer(
            "could not size the commit log relation",
        ))?;
        Ok(Clog {
            pages: AtomicU32::new(n),
            extend_lock: Mutex::new(()),
        })
    }

    /// Pages the clog has.
    pub fn pages(&self) -> BlockNumber {
        self.pages.load(Ordering::Acquire)
    }

    /// Make sure the page holding `xid` exists (rule 1), logging the creation
    /// of each page in `wal` (`None` during redo, which writes no WAL).
    pub fn ensure_page(&self, pool: &BufferPool, wal: Option<&Wal>, xid: Xid) -> Result<()> {
        let block = position(xid)?.block;
        if block < self.pages.load(Ordering::Acquire) {
            return Ok(());
        }
        let _g = self.extend_lock.lock();
        let mut n = pool.nblocks(CLOG_FORK).map_err(EngineError::buffer(
            "could not size the commit log relation",
        ))?;
        while n <= block {
            if let Some(wal) = wal {
                log_zero_page(wal, n, xid)?;
            }
            let mut page = pool.extend(CLOG_FORK, None).map_err(|e| {
                EngineError::buffer(format!(
                    "could not extend the commit log to page {n} (for xid {xid})"
                ))(e)
            })?;
            // A zeroed page is a valid clog page: every xid in progress.
            page.mark_dirty();
            n = page.block() + 1;
        }
        self.pages.store(n, Ordering::Release);
        Ok(())
    }

    /// The recorded status of `xid` and its group's commit LSN. An xid on a
    /// page that does not exist reads as in progress with LSN 0.
    pub fn get(&self, pool: &BufferPool, xid: Xid) -> Result<(ClogStatus, Lsn)> {
        let pos = position(xid)?;
        if pos.block >= self.pages.load(Ordering::Acquire) {
            return Ok((ClogStatus::InProgress, Lsn::ZERO));
        }
        let page = pin_page(pool, pos.block, true)
            .map_err(|e| {
                EngineError::buffer(format!(
                    "could not read commit-log page {} (for xid {xid})",
                    pos.block
                ))(e)
            })?
            .lock_shared();
        let word = read_u64(&page, pos.group_offset);
        let lsn = read_u64(&page, pos.group_offset + 8);
        Ok((ClogStatus::from_bits(word >> pos.shift), Lsn(lsn)))
    }

    /// Record `status` for `xid`. For `Committed`, `commit_end` is the end LSN
    /// of its commit record: the group LSN and the page LSN are raised to it
    /// (rule 3). For `Aborted`, `commit_end` is the end of the abort record
    /// (or zero if none was logged): only the page LSN is raised, so the page
    /// cannot reach disk saying "aborted" before the abort record does. (Were
    /// it to, a crash could hand the xid out again, whose stale "aborted" bits
    /// would then hide the new transaction's rows.) Creates the page if needed.
    pub fn set(
        &self,
        pool: &BufferPool,
        wal: &Wal,
        xid: Xid,
        status: ClogStatus,
        commit_end: Lsn,
    ) -> Result<()> {
        self.set_with(pool, Some(wal), xid, status, commit_end, true)
    }

    /// [`set`](Self::set) for redo: a page whose checksum fails (a torn
    /// write) is accepted and repaired by the replay, since every status set
    /// since the redo point is in the WAL and the older ones are the same in
    /// both halves of a torn page (a status bit pair is set once, from zero).
    pub fn set_for_redo(
        &self,
        pool: &BufferPool,
        xid: Xid,
        status: ClogStatus,
        commit_end: Lsn,
    ) -> Result<()> {
        self.set_with(pool, None, xid, status, commit_end, false)
    }

    /// Redo of a [`CLOG_ZEROPAGE`] record ending at `end`: page `block` is a
    /// zeroed page again (rule 1), extended if the file is shorter.
    pub fn redo_zero_page(&self, pool: &BufferPool, block: BlockNumber, end: Lsn) -> Result<()> {
        let _g = self.extend_lock.lock();
        let mut page = pool
            .read_buffer_for_redo(CLOG_FORK, block, true)
            .map_err(|e| {
                EngineError::buffer(format!("could not recreate commit-log page {block}"))(e)
            })?;
        page.fill(0);
        page.set_lsn(end.0);
        page.mark_dirty();
        drop(page);
        self.pages.fetch_max(block + 1, Ordering::AcqRel);
        Ok(())
    }

    fn set_with(
        &self,
        pool: &BufferPool,
        wal: Option<&Wal>,
        xid: Xid,
        status: ClogStatus,
        commit_end: Lsn,
        verify: bool,
    ) -> Result<()> {
        self.ensure_page(pool, wal, xid)?;
        let pos = position(xid)?;
        let mut page = pin_page(pool, pos.block, verify)
            .map_err(|e| {
                EngineError::buffer(format!(
                    "could not read commit-log page {} to record xid {xid} as {status:?}",
                    pos.block
                ))(e)
            })?
            .lock_exclusive();
        let word = read_u64(&page, pos.group_offset);
        let new = (word & !(0b11 << pos.shift)) | (status.bits() << pos.shift);
        write_u64(&mut page, pos.group_offset, new);
        if status == ClogStatus::Committed {
            let group_lsn = read_u64(&page, pos.group_offset + 8);
            if commit_end.0 > group_lsn {
                write_u64(&mut page, pos.group_offset + 8, commit_end.0);
            }
        }
        if commit_end.0 > page.lsn() {
            page.set_lsn(commit_end.0);
        }
        page.mark_dirty();
        Ok(())
    }
}

/// Log the creation of commit-log page `block` (for `xid`, named in errors).
fn log_zero_page(wal: &Wal, block: BlockNumber, xid: Xid) -> Result<()> {
    let failed = |e| {
        EngineError::wal(format!(
            "could not log the creation of commit-log page {block} (for xid {xid})"
        ))(e)
    };
    let record = Record::builder(RmgrKind::Clog, CLOG_ZEROPAGE, 0)
        .payload(block.to_le_bytes().to_vec())
        .build()
        .map_err(failed)?;
    wal.insert(&record).map_err(failed)?;
    Ok(())
}

/// Replay a `Clog` record ending at `end`.
pub fn redo_clog(record: &Record, end: Lsn, clog: &Clog, pool: &BufferPool) -> Result<()> {
    let bad = |detail: String| EngineError::MalformedXactRecord { lsn: end, detail };
    if record.kind() != RmgrKind::Clog || record.info() != CLOG_ZEROPAGE {
        return Err(bad(format!(
            "a {:?} record with info {:#04x}, not a commit-log page creation",
            record.kind(),
            record.info()
        )));
    }
    let block: [u8; 4] = record.payload().try_into().map_err(|_| {
        bad(format!(
            "commit-log page creation with a payload of {} bytes, expected 4",
            record.payload().len()
        ))
    })?;
    let block = BlockNumber::from_le_bytes(block);
    if block == BlockNumber::MAX {
        return Err(bad(format!("commit-log page {block} is out of range")));
    }
    clog.redo_zero_page(pool, block, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_follows_from_the_layout() {
        assert_eq!(GROUPS_PER_PAGE, 511);
        assert_eq!(XIDS_PER_PAGE, 16_352);
    }

    #[test]
    fn positions() {
        let p = position(0).unwrap();
        assert_eq!((p.block, p.group_offset, p.shift), (0, 16, 0));
        let p = position(33).unwrap();
        assert_eq!((p.block, p.group_offset, p.shift), (0, 32, 2));
        let p = position(XIDS_PER_PAGE - 1).unwrap();
        assert_eq!((p.block, p.group_offset, p.shift), (0, PAGE_SIZE - 16, 62));
        let p = position(XIDS_PER_PAGE).unwrap();
        assert_eq!((p.block, p.group_offset, p.shift), (1, 16, 0));
        assert!(position(u64::MAX).is_err());
    }

    #[test]
    fn status_bits_round_trip() {
        for s in [
            ClogStatus::InProgress,
            ClogStatus::Committed,
            ClogStatus::Aborted,
        ] {
            assert_eq!(ClogStatus::from_bits(s.bits()), s);
        }
        assert_eq!(ClogStatus::from_bits(0b11), ClogStatus::InProgress);
    }
}
