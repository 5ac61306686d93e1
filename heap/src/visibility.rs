//! MVCC visibility with hint bits (PostgreSQL's `heapam_visibility.c`).
//!
//! # Rules, for a reader with snapshot `S` (own xid `S.own`, command `S.cid`)
//! 1. xmin is `S.own`: the reader's own insert: visible (go to 6) only if
//!    made by a command before `S.cid` (`cmin < S.cid`), else invisible.
//!    Decided before any hint bit is read, so it holds after the owner
//!    committed too (an iterator keeps its snapshot).
//! 2. xmin aborted (hint XMIN_INVALID, or the oracle says so): invisible.
//! 3. xmin in progress: invisible.
//! 4. xmin committed (hint XMIN_COMMITTED, or the oracle says so) but in `S`
//!    as running or at/after `S.xmax`: invisible (committed after the snapshot).
//! 5. otherwise xmin is visible; go to 6.
//! 6. No xmax: visible.
//! 7. xmax is `S.own`: invisible if the delete came from a command before
//!    `S.cid` (`cmax < S.cid`), else visible (the reader's own later
//!    command deleted it). Also before any hint bit.
//! 8. xmax aborted (hint XMAX_INVALID or the oracle): visible.
//! 9. xmax in progress: visible (the deleter has not committed).
//! 10. xmax committed: visible only if `S` treats xmax as running (the
//!     delete committed after the snapshot), else invisible.
//!
//! With `S.cid = None` (no command ids) rules 1 and 7 see every own change.
//! A status the oracle cannot read is an error, never a guess.
//!
//! # Hint bits
//! The first reader that learns from the oracle that xmin or xmax committed
//! or aborted records it in the infomask, so later readers need not ask. An
//! INVALID hint is always allowed. A COMMITTED hint obeys the commit-LSN
//! rule (PostgreSQL's `SetHintBits`): it may be set only if
//! - the relation is unlogged (nothing to order against), or
//! - `commit_lsn <= oracle.flushed_lsn()` (the commit record is durable), or
//! - `commit_lsn <= page LSN` (WAL-before-data will flush the commit
//!   record before the page can reach disk).
//!
//! Otherwise a crash could leave the page on disk saying "committed" for a
//! transaction whose commit record was lost (asynchronous commit).
//!
//! How hints reach the page is the [`HintMode`]: never; one
//! [`bufmgr::PageRead::set_hints`] call (one header-lock round trip) per
//! tuple; or, for a whole page, visibility of every tuple first, then one
//! batched call (the batch proposed on pgsql-hackers). All three give the same answers.
//!
//! # Writers
//! [`update_verdict`] answers "may transaction `S.own` update or delete this
//! tuple?": yes if it sees the tuple and nobody else has set a live xmax; a
//! write conflict if a concurrent transaction (in progress, or committed
//! after the snapshot) has; "not visible" otherwise. Conflicts are errors to
//! the caller, who aborts: the first updater wins, no one waits (snapshot
//! isolation without PostgreSQL's wait-then-recheck of READ COMMITTED).

use std::fmt;
use std::str::FromStr;

use bufmgr::PageRead;
use wal::Lsn;

use crate::error::Result;
use crate::page::{HeapPage, PageId, TUPLE_ALIGN};
use crate::tuple::{
    HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID,
    INFOMASK_OFFSET, TupleHeader, XMIN_OFFSET,
};
use crate::txn::{INVALID_XID, Snapshot, StatusError, TransactionStatus, XidStatus};

/// How readers set hint bits.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash, Default)]
pub enum HintMode {
    /// Never set hints: every read asks the oracle.
    Never,
    /// One `set_hints` call per tuple that has a hint to set.
    PerTuple,
    /// Check a whole page, then one `set_hints` call with all its hints.
    #[default]
    PerPage,
}

impl HintMode {
    pub const ALL: [HintMode; 3] = [HintMode::Never, HintMode::PerTuple, HintMode::PerPage];

    pub const fn name(self) -> &'static str {
        match self {
            HintMode::Never => "never",
            HintMode::PerTuple => "per-tuple",
            HintMode::PerPage => "per-page",
        }
    }
}

impl fmt::Display for HintMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HintMode {
    type Err = String;
    fn from_str(s: &str) -> Result<HintMode, String> {
        HintMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown hint mode {s:?} (never, per-tuple, per-page)"))
    }
}

/// What the commit-LSN rule needs to know about the page being read.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct HintContext {
    /// The relation is unlogged: commit hints need no ordering.
    pub unlogged: bool,
    /// The page's LSN.
    pub page_lsn: Lsn,
}

impl HintContext {
    /// May a COMMITTED hint for a commit ending at `commit_lsn` be set?
    pub fn commit_hint_allowed(&self, commit_lsn: Lsn, oracle: &dyn TransactionStatus) -> bool {
        self.unlogged || commit_lsn <= self.page_lsn || commit_lsn <= oracle.flushed_lsn()
    }
}

/// The answer for one tuple: visible or not, and the hint bits to add.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Verdict {
    pub visible: bool,
    pub hints: u16,
}

/// Status of xmin as far as the reader is concerned.
enum Xmin {
    Visible,
    Invisible,
}

fn check_xmin(
    h: &TupleHeader,
    snap: &Snapshot,
    oracle: &dyn TransactionStatus,
    ctx: HintContext,
    hints: &mut u16,
) -> Result<Xmin, StatusError> {
    if snap.is_own(h.xmin) {
        // Rule 1, before the hints: the owner's own insert.
        return Ok(if snap.sees_own_insert(h.cmin) {
            Xmin::Visible
        } else {
            Xmin::Invisible
        });
    }
    let frozen = h.has(HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID);
    if frozen {
        return Ok(Xmin::Visible);
    }
    if h.has(HEAP_XMIN_INVALID) {
        return Ok(Xmin::Invisible); // rule 2
    }
    if !h.has(HEAP_XMIN_COMMITTED) {
        match oracle.status(h.xmin)? {
            XidStatus::InProgress => return Ok(Xmin::Invisible), // rule 3
            XidStatus::Aborted => {
                *hints |= HEAP_XMIN_INVALID;
                return Ok(Xmin::Invisible); // rule 2
            }
            XidStatus::Committed { commit_lsn } => {
                if ctx.commit_hint_allowed(commit_lsn, oracle) {
                    *hints |= HEAP_XMIN_COMMITTED;
                }
            }
        }
    }
    Ok(if snap.others_running(h.xmin) {
        Xmin::Invisible // rule 4
    } else {
        Xmin::Visible // rule 5
    })
}

/// Is the tuple with header `h` visible to `snap`, and which hints may a
/// reader add (given `ctx`)? Reads existing hints first (after the owner's
/// own rules 1 and 7), asks `oracle` only for what they do not say; a
/// status the oracle cannot read is an error, never a guess.
pub fn tuple_visibility(
    h: &TupleHeader,
    snap: &Snapshot,
    oracle: &dyn TransactionStatus,
    ctx: HintContext,
) -> Result<Verdict, StatusError> {
    let mut hints = 0;
    if let Xmin::Invisible = check_xmin(h, snap, oracle, ctx, &mut hints)? {
        return Ok(Verdict {
            visible: false,
            hints,
        });
    }
    let visible = if h.xmax == INVALID_XID {
        true // rule 6
    } else if snap.is_own(h.xmax) {
        !snap.sees_own_delete(h.cmax) // rule 7
    } else if h.has(HEAP_XMAX_INVALID) {
        true // rule 8
    } else if h.has(HEAP_XMAX_COMMITTED) {
        snap.others_running(h.xmax) // rule 10
    } else {
        match oracle.status(h.xmax)? {
            XidStatus::InProgress => true, // rule 9
            XidStatus::Aborted => {
                hints |= HEAP_XMAX_INVALID;
                true // rule 8
            }
            XidStatus::Committed { commit_lsn } => {
                if ctx.commit_hint_allowed(commit_lsn, oracle) {
                    hints |= HEAP_XMAX_COMMITTED;
                }
                snap.others_running(h.xmax) // rule 10
            }
        }
    };
    Ok(Verdict { visible, hints })
}

/// May `snap.own` update or delete a tuple?
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum UpdateVerdict {
    /// Yes: visible and nobody else holds a live xmax on it.
    MayUpdate,
    /// The tuple is not visible to the transaction (including: it already
    /// deleted or updated it itself).
    Invisible,
    /// A concurrent transaction updated or deleted it (in progress, or
    /// committed after the snapshot): a write conflict.
    Conflict,
}

/// PostgreSQL's `HeapTupleSatisfiesUpdate`, for snapshot isolation.
pub fn update_verdict(
    h: &TupleHeader,
    snap: &Snapshot,
    oracle: &dyn TransactionStatus,
) -> Result<UpdateVerdict, StatusError> {
    let no_hints = HintContext {
        unlogged: false,
        page_lsn: Lsn::ZERO,
    };
    if let Xmin::Invisible = check_xmin(h, snap, oracle, no_hints, &mut 0)? {
        return Ok(UpdateVerdict::Invisible);
    }
    if h.xmax == INVALID_XID {
        return Ok(UpdateVerdict::MayUpdate);
    }
    if snap.is_own(h.xmax) {
        // Deleted or updated by the owner already (in whichever command).
        return Ok(UpdateVerdict::Invisible);
    }
    if h.has(HEAP_XMAX_INVALID) {
        return Ok(UpdateVerdict::MayUpdate);
    }
    if !h.has(HEAP_XMAX_COMMITTED) {
        match oracle.status(h.xmax)? {
            XidStatus::InProgress => return Ok(UpdateVerdict::Conflict),
            XidStatus::Aborted => return Ok(UpdateVerdict::MayUpdate),
            XidStatus::Committed { .. } => {}
        }
    }
    Ok(if snap.others_running(h.xmax) {
        UpdateVerdict::Conflict
    } else {
        UpdateVerdict::Invisible
    })
}

/// Counters of one page's (or one scan's) visibility checks.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct VisibilityStats {
    /// Tuples whose visibility was checked.
    pub tuples_checked: u64,
    /// Of those, visible.
    pub tuples_visible: u64,
    /// Tuples that had a hint to set.
    pub hints_wanted: u64,
    /// `set_hints` calls made (header-lock round trips).
    pub hint_calls: u64,
    /// Calls refused because a write of the page was in flight.
    pub hint_calls_refused: u64,
}

impl VisibilityStats {
    pub fn add(&mut self, o: &VisibilityStats) {
        self.tuples_checked += o.tuples_checked;
        self.tuples_visible += o.tuples_visible;
        self.hints_wanted += o.hints_wanted;
        self.hint_calls += o.hint_calls;
        self.hint_calls_refused += o.hint_calls_refused;
    }
}

fn record_call(stats: &mut VisibilityStats, applied: bool) {
    stats.hint_calls += 1;
    stats.hint_calls_refused += u64::from(!applied);
}

/// Read one byte of each cache line of the page's tuple space
/// (`upper..PAGE_SIZE`), all at once, before the tuples are visited: the
/// loads are independent, so the lines' misses overlap, where the visit
/// (each tuple's header, then its data) would meet them one after another.
/// A scan reads most of a page's tuples, so most of these lines are read
/// anyway.
#[inline]
fn touch_tuple_space(page: &[u8], upper: usize) {
    const LINE: usize = 64;
    let mut seen = 0u8;
    for line in page.get(upper..).unwrap_or_default().chunks(LINE) {
        seen ^= line[0];
    }
    std::hint::black_box(seen);
}

/// The oracle of one page's visit: it remembers the last transaction it
/// learned a final status of (committed or aborted, which never changes
/// again) and answers for it again without asking. A page's tuples were
/// mostly written by one transaction, and every question of the commit
/// log pins and reads one of its pages (about 600 instructions a tuple on
/// the first scan after a bulk load, before hints are set): PostgreSQL's
/// `cachedFetchXid`. A status still in progress is asked again each time.
/// Used by one thread for one visit; the atomics only make it `Sync`, as
/// the trait requires, and are relaxed.
#[derive(Debug)]
struct LastFinal<'a> {
    oracle: &'a dyn TransactionStatus,
    /// The xid remembered (`INVALID_XID`: none, an xid no tuple names for
    /// a status).
    xid: std::sync::atomic::AtomicU64,
    /// Its commit LSN if it committed, `ABORTED` if it aborted.
    lsn: std::sync::atomic::AtomicU64,
}

/// [`LastFinal::lsn`] of an aborted transaction.
const ABORTED: u64 = u64::MAX;

impl<'a> LastFinal<'a> {
    fn new(oracle: &'a dyn TransactionStatus) -> LastFinal<'a> {
        LastFinal {
            oracle,
            xid: std::sync::atomic::AtomicU64::new(INVALID_XID),
            lsn: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl TransactionStatus for LastFinal<'_> {
    fn status(&self, xid: crate::txn::Xid) -> std::result::Result<XidStatus, StatusError> {
        use std::sync::atomic::Ordering::Relaxed;
        if xid != INVALID_XID && self.xid.load(Relaxed) == xid {
            return Ok(match self.lsn.load(Relaxed) {
                ABORTED => XidStatus::Aborted,
                lsn => XidStatus::Committed {
                    commit_lsn: Lsn(lsn),
                },
            });
        }
        let status = self.oracle.status(xid)?;
        let remembered = match status {
            XidStatus::Committed { commit_lsn } if commit_lsn.0 != ABORTED => Some(commit_lsn.0),
            XidStatus::Aborted => Some(ABORTED),
            _ => None,
        };
        if let Some(lsn) = remembered {
            self.xid.store(xid, Relaxed);
            self.lsn.store(lsn, Relaxed);
        }
        Ok(status)
    }

    fn flushed_lsn(&self) -> Lsn {
        self.oracle.flushed_lsn()
    }
}

/// Check every tuple of a share-locked page, set hints per `mode`, and call
/// `each(offset number, tuple bytes)` for each visible tuple (under the
/// lock: `each` must not touch the heap). `batch` is scratch space reused
/// across pages.
#[allow(clippy::too_many_arguments)]
pub fn visit_visible_tuples(
    page: &PageRead<'_>,
    id: PageId,
    snap: &Snapshot,
    oracle: &dyn TransactionStatus,
    mode: HintMode,
    unlogged: bool,
    batch: &mut Vec<(usize, u16)>,
    mut each: impl FnMut(u16, &[u8]),
) -> Result<VisibilityStats> {
    let view = HeapPage::parse(page, id)?;
    let ctx = HintContext {
        unlogged,
        page_lsn: Lsn(page.lsn()),
    };
    let mut stats = VisibilityStats::default();
    batch.clear();
    touch_tuple_space(page, view.upper());
    let last_final = LastFinal::new(oracle);
    let oracle: &dyn TransactionStatus = &last_final;
    let mut used = 0;
    for t in view.tuples() {
        let (off, start, bytes) = t?;
        used += (bytes.len() + TUPLE_ALIGN - 1) & !(TUPLE_ALIGN - 1);
        // The common case of a hinted page: xmin known committed, no
        // deleter. Visible unless the snapshot treats xmin as running; no
        // hint to add, so the header need not be decoded (same verdict as
        // `tuple_visibility`, rules 4 to 6). Not for the owner's own
        // inserts (a committed owner's iterator): rule 1 decides those.
        let infomask = u16::from_le_bytes([bytes[INFOMASK_OFFSET], bytes[INFOMASK_OFFSET + 1]]);
        if infomask & (HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID | HEAP_XMAX_INVALID)
            == HEAP_XMIN_COMMITTED | HEAP_XMAX_INVALID
        {
            let xmin = u64::from_le_bytes(
                bytes[XMIN_OFFSET..XMIN_OFFSET + 8]
                    .try_into()
                    .expect("tuple() checked the length"),
            );
            if xmin != snap.own {
                stats.tuples_checked += 1;
                if !snap.others_running(xmin) {
                    stats.tuples_visible += 1;
                    each(off, bytes);
                }
                continue;
            }
        }
        let h = TupleHeader::decode(bytes).expect("tuple() checked the length");
        let v = tuple_visibility(&h, snap, oracle, ctx)?;
        stats.tuples_checked += 1;
        if v.hints != 0 {
            stats.hints_wanted += 1;
            match mode {
                HintMode::Never => {}
                HintMode::PerTuple => {
                    record_call(
                        &mut stats,
                        page.set_hints(&[(start + INFOMASK_OFFSET, v.hints)])?,
                    );
                }
                HintMode::PerPage => batch.push((start + INFOMASK_OFFSET, v.hints)),
            }
        }
        if v.visible {
            stats.tuples_visible += 1;
            each(off, bytes);
        }
    }
    view.check_tuple_space(used)?;
    if !batch.is_empty() {
        record_call(&mut stats, page.set_hints(batch)?);
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple::Tid;
    use crate::txn::InMemoryTransactions;

    /// The five xid situations of the truth table, and "no xmax".
    #[derive(Copy, Clone, Debug, PartialEq)]
    enum X {
        None,
        OwnInProgress,
        OtherInProgress,
        CommittedVisible,
        CommittedAfterSnapshot,
        Aborted,
    }
    const STATES: [X; 5] = [
        X::OwnInProgress,
        X::OtherInProgress,
        X::CommittedVisible,
        X::CommittedAfterSnapshot,
        X::Aborted,
    ];

    struct World {
        txns: InMemoryTransactions,
        snap: Snapshot,
        own: u64,
        other: u64,
        committed_visible: u64,
        committed_after: u64,
        aborted: u64,
    }

    fn world() -> World {
        let txns = InMemoryTransactions::new();
        let committed_visible = txns.begin();
        let aborted = txns.begin();
        let other = txns.begin();
        let committed_after = txns.begin();
        let own = txns.begin();
        txns.commit(committed_visible, Lsn(10));
        txns.abort(aborted);
        let snap = txns.snapshot(own);
        txns.commit(committed_after, Lsn(20));
        World {
            txns,
            snap,
            own,
            other,
            committed_visible,
            committed_after,
            aborted,
        }
    }

    impl World {
        fn xid(&self, x: X) -> u64 {
            match x {
                X::None => 0,
                X::OwnInProgress => self.own,
                X::OtherInProgress => self.other,
                X::CommittedVisible => self.committed_visible,
                X::CommittedAfterSnapshot => self.committed_after,
                X::Aborted => self.aborted,
            }
        }
    }

    /// The hints a previous reader would have left for this xid situation.
    fn earlier_hints(xmin: X, xmax: X) -> u16 {
        let min = match xmin {
            X::CommittedVisible | X::CommittedAfterSnapshot => HEAP_XMIN_COMMITTED,
            X::Aborted => HEAP_XMIN_INVALID,
            _ => 0,
        };
        let max = match xmax {
            X::None | X::Aborted => HEAP_XMAX_INVALID,
            X::CommittedVisible | X::CommittedAfterSnapshot => HEAP_XMAX_COMMITTED,
            _ => 0,
        };
        min | max
    }

    /// Expected: visible iff xmin is "seen as done" (own or committed before
    /// the snapshot) and xmax is not.
    fn expected(xmin: X, xmax: X) -> bool {
        let seen = |x| matches!(x, X::OwnInProgress | X::CommittedVisible);
        seen(xmin) && !seen(xmax)
    }

    #[test]
    fn truth_table_with_and_without_hints() {
        let w = world();
        let ctx = HintContext {
            unlogged: false,
            page_lsn: Lsn::ZERO,
        };
        let mut xmaxes = vec![X::None];
        xmaxes.extend(STATES);
        for xmin in STATES {
            for &xmax in &xmaxes {
                let mut h = TupleHeader::new_insert(w.xid(xmin), Tid::new(0, 1), false);
                if xmax != X::None {
                    h.set_xmax(w.xid(xmax), Tid::new(0, 1));
                }
                let v = tuple_visibility(&h, &w.snap, &w.txns, ctx).unwrap();
                assert_eq!(
                    v.visible,
                    expected(xmin, xmax),
                    "xmin {xmin:?} xmax {xmax:?} unhinted"
                );
                // Hints learned now must be the ones a later reader trusts.
                let mut hinted = h;
                hinted.infomask |= earlier_hints(xmin, xmax);
                let v2 = tuple_visibility(&hinted, &w.snap, &w.txns, ctx).unwrap();
                assert_eq!(v2.visible, v.visible, "xmin {xmin:?} xmax {xmax:?} hinted");
                assert_eq!(
                    v2.hints & !hinted.infomask,
                    0,
                    "nothing new to learn once hinted"
                );
                // Hints found by the unhinted reader are a subset of the full set.
                assert_eq!(
                    v.hints & !earlier_hints(xmin, xmax),
                    0,
                    "xmin {xmin:?} xmax {xmax:?}"
                );
            }
        }
    }

    #[test]
    fn commit_hint_waits_for_the_commit_record_to_be_flushed() {
        let w = world();
        let h = TupleHeader::new_insert(w.committed_visible, Tid::new(0, 1), false);
        w.txns.set_flushed(Lsn(5)); // commit record ends at 10
        let old_page = HintContext {
            unlogged: false,
            page_lsn: Lsn(3),
        };
        let v = tuple_visibility(&h, &w.snap, &w.txns, old_page).unwrap();
        assert!(v.visible);
        assert_eq!(
            v.hints & HEAP_XMIN_COMMITTED,
            0,
            "commit not flushed, page LSN older"
        );
        let newer_page = HintContext {
            page_lsn: Lsn(10),
            ..old_page
        };
        assert_ne!(
            tuple_visibility(&h, &w.snap, &w.txns, newer_page)
                .unwrap()
                .hints
                & HEAP_XMIN_COMMITTED,
            0
        );
        let unlogged = HintContext {
            unlogged: true,
            ..old_page
        };
        assert_ne!(
            tuple_visibility(&h, &w.snap, &w.txns, unlogged)
                .unwrap()
                .hints
                & HEAP_XMIN_COMMITTED,
            0
        );
        w.txns.set_flushed(Lsn(10));
        assert_ne!(
            tuple_visibility(&h, &w.snap, &w.txns, old_page)
                .unwrap()
                .hints
                & HEAP_XMIN_COMMITTED,
            0
        );
        // Abort hints need no flush.
        w.txns.set_flushed(Lsn(0));
        let a = TupleHeader::new_insert(w.aborted, Tid::new(0, 1), false);
        assert_eq!(
            tuple_visibility(&a, &w.snap, &w.txns, old_page)
                .unwrap()
                .hints,
            HEAP_XMIN_INVALID
        );
    }

    #[test]
    fn update_verdicts() {
        let w = world();
        let tuple = |xmin: X, xmax: X| {
            let mut h = TupleHeader::new_insert(w.xid(xmin), Tid::new(0, 1), false);
            if xmax != X::None {
                h.set_xmax(w.xid(xmax), Tid::new(0, 1));
            }
            update_verdict(&h, &w.snap, &w.txns).unwrap()
        };
        use UpdateVerdict::*;
        assert_eq!(tuple(X::CommittedVisible, X::None), MayUpdate);
        assert_eq!(tuple(X::OwnInProgress, X::None), MayUpdate);
        assert_eq!(tuple(X::CommittedVisible, X::Aborted), MayUpdate);
        assert_eq!(tuple(X::CommittedVisible, X::OtherInProgress), Conflict);
        assert_eq!(
            tuple(X::CommittedVisible, X::CommittedAfterSnapshot),
            Conflict
        );
        assert_eq!(tuple(X::CommittedVisible, X::CommittedVisible), Invisible);
        assert_eq!(tuple(X::CommittedVisible, X::OwnInProgress), Invisible);
        assert_eq!(tuple(X::OtherInProgress, X::None), Invisible);
        assert_eq!(tuple(X::CommittedAfterSnapshot, X::None), Invisible);
        assert_eq!(tuple(X::Aborted, X::None), Invisible);
    }

    /// Rules 1 and 7: the owner sees its own inserts and deletes by
    /// command, whatever hints the tuple carries (a committed owner's
    /// iterator keeps its view when later readers hint its tuples).
    #[test]
    fn own_changes_are_seen_by_command_whatever_the_hints() {
        let w = world();
        let ctx = HintContext {
            unlogged: false,
            page_lsn: Lsn::ZERO,
        };
        let at = |cid: u32| Snapshot {
            cid: Some(cid),
            ..w.snap.clone()
        };
        for hints in [0, HEAP_XMIN_COMMITTED] {
            // Inserted by the owner in command 3.
            let mut ins = TupleHeader::new_insert(w.own, Tid::new(0, 1), false);
            ins.cmin = 3;
            ins.infomask |= hints;
            for (cid, seen) in [(3, false), (4, true), (9, true)] {
                let v = tuple_visibility(&ins, &at(cid), &w.txns, ctx).unwrap();
                assert_eq!(
                    v.visible, seen,
                    "insert in 3, read in {cid}, hints {hints:#x}"
                );
            }
            assert!(
                tuple_visibility(&ins, &w.snap, &w.txns, ctx)
                    .unwrap()
                    .visible
            );
            // Committed row deleted by the owner in command 5.
            let mut del = TupleHeader::new_insert(w.committed_visible, Tid::new(0, 1), false);
            del.set_xmax(w.own, Tid::new(0, 1));
            del.cmax = 5;
            del.infomask |= HEAP_XMIN_COMMITTED | if hints != 0 { HEAP_XMAX_COMMITTED } else { 0 };
            for (cid, visible) in [(2, true), (5, true), (6, false)] {
                let v = tuple_visibility(&del, &at(cid), &w.txns, ctx).unwrap();
                assert_eq!(
                    v.visible, visible,
                    "delete in 5, read in {cid}, hints {hints:#x}"
                );
            }
            assert!(
                !tuple_visibility(&del, &w.snap, &w.txns, ctx)
                    .unwrap()
                    .visible
            );
        }
        // A writer in command 3 cannot update what command 3 (or later)
        // inserted, nor what it deleted itself in any command.
        let mut ins = TupleHeader::new_insert(w.own, Tid::new(0, 1), false);
        ins.cmin = 3;
        assert_eq!(
            update_verdict(&ins, &at(3), &w.txns).unwrap(),
            UpdateVerdict::Invisible
        );
        assert_eq!(
            update_verdict(&ins, &at(4), &w.txns).unwrap(),
            UpdateVerdict::MayUpdate
        );
        ins.set_xmax(w.own, Tid::new(0, 2));
        ins.cmax = 7;
        assert_eq!(
            update_verdict(&ins, &at(4), &w.txns).unwrap(),
            UpdateVerdict::Invisible
        );
    }

    #[test]
    fn hint_modes_parse_and_print() {
        for m in HintMode::ALL {
            assert_eq!(m.name().parse::<HintMode>().unwrap(), m);
        }
        assert!("sometimes".parse::<HintMode>().is_err());
    }
}
