//! A scan without hints asks the commit log about each tuple's xmin; a
//! page's tuples are mostly one transaction's, so the visit remembers the
//! last final answer (committed or aborted) and does not ask again. An
//! answer still in progress is never remembered, and nothing is remembered
//! from one visit to the next: a transaction that commits between two
//! scans is seen committed by the second.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use bufmgr::RelId;
use common::{db, row};
use heap::txn::{StatusError, TransactionStatus, Xid, XidStatus};
use heap::{Heap, HintMode, InMemoryTransactions, RingChoice, ScanOptions};
use parking_lot::Mutex;
use wal::Lsn;

const REL: RelId = RelId(11);

/// The transactions, counting the questions asked about each xid.
#[derive(Debug)]
struct Counting {
    txns: Arc<InMemoryTransactions>,
    asked: Mutex<HashMap<Xid, u64>>,
}

impl TransactionStatus for Counting {
    fn status(&self, xid: Xid) -> Result<XidStatus, StatusError> {
        *self.asked.lock().entry(xid).or_default() += 1;
        self.txns.status(xid)
    }

    fn flushed_lsn(&self) -> Lsn {
        self.txns.flushed_lsn()
    }
}

impl Counting {
    fn take(&self, xid: Xid) -> u64 {
        self.asked.lock().remove(&xid).unwrap_or(0)
    }
}

/// Scan without setting hints; the rows seen, and the pages read.
fn scan(heap: &Heap, oracle: &Counting) -> (Vec<Vec<u8>>, u64) {
    let snap = oracle.txns.snapshot(0);
    let mut rows = Vec::new();
    let stats = heap
        .scan_with(
            &snap,
            oracle,
            ScanOptions {
                ring: RingChoice::Never,
                hint_mode: HintMode::Never,
            },
            |_, r| rows.push(r.to_vec()),
        )
        .unwrap();
    (rows, stats.pages)
}

#[test]
fn committed_and_aborted_runs_are_asked_once_per_page_and_running_ones_every_time() {
    let db = db(64, None);
    let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
    let txns = Arc::new(InMemoryTransactions::new());
    let (good, bad, running, late) = (txns.begin(), txns.begin(), txns.begin(), txns.begin());
    let mut want = Vec::new();
    let mut count = HashMap::<Xid, u64>::new();
    let mut put = |xid: Xid, n: u64| {
        let r = row(n, 40);
        heap.insert(xid, &r).unwrap();
        *count.entry(xid).or_default() += 1;
        (xid, r)
    };
    // Runs of one transaction, then the two final ones alternating (each
    // answer replaces the other), then the running one, then a run that
    // commits only after the first scan.
    let mut rows = Vec::new();
    for n in 0..800 {
        rows.push(put(good, n));
    }
    for n in 800..1000 {
        rows.push(put(bad, n));
    }
    for n in 1000..1200 {
        rows.push(put(if n % 2 == 0 { good } else { bad }, n));
    }
    for n in 1200..1400 {
        rows.push(put(running, n));
    }
    for n in 1400..1600 {
        rows.push(put(late, n));
    }
    txns.commit(good, Lsn(10));
    txns.abort(bad);
    let oracle = Counting {
        txns: txns.clone(),
        asked: Mutex::new(HashMap::new()),
    };
    want.extend(
        rows.iter()
            .filter(|(x, _)| *x == good)
            .map(|(_, r)| r.clone()),
    );

    let (seen, pages) = scan(&heap, &oracle);
    assert_eq!(seen, want, "the first scan sees the committed rows only");
    assert!(pages > 5, "the rows span several pages: {pages}");
    // `good`: asked once per page of its first run and of each stretch it
    // follows `bad`: at most the pages, plus one per alternation (100).
    let asked_good = oracle.take(good);
    assert!(
        asked_good <= pages + 100,
        "{asked_good} questions about a committed transaction over {pages} pages (its {} tuples)",
        count[&good]
    );
    let asked_bad = oracle.take(bad);
    assert!(
        asked_bad <= pages + 100,
        "{asked_bad} questions about an aborted transaction over {pages} pages"
    );
    // A transaction in progress may commit at any moment: asked each time.
    assert_eq!(oracle.take(running), count[&running]);
    assert_eq!(oracle.take(late), count[&late]);

    // `late` commits: the next scan asks again and sees its rows.
    txns.commit(late, Lsn(20));
    let snap_rows = {
        let mut w = want.clone();
        w.extend(
            rows.iter()
                .filter(|(x, _)| *x == late)
                .map(|(_, r)| r.clone()),
        );
        // The scan is in TID order, and `late`'s rows come last.
        w
    };
    let (seen, _) = scan(&heap, &oracle);
    assert_eq!(
        seen, snap_rows,
        "a commit between two scans is seen by the second"
    );
    assert!(oracle.take(late) >= 1);
    assert_eq!(oracle.take(running), count[&running]);
}
