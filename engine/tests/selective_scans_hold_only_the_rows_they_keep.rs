//! Rows kept by a selective filter over an owned scan (`txn.scan(t)`) hold
//! copies of their own tuples, not a page-sized copy each: the bytes they
//! hold are counted by the test binary's allocator.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, Value};

/// Bytes allocated and not yet freed, by every thread of this test binary.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; the
// counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The count is of the whole binary: one test at a time measures.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn row(i: i64) -> Vec<Value> {
    vec![
        Value::I64(i),
        Value::text(format!("{i:08}{}", "p".repeat(60))),
    ]
}

/// A temporary database (a 32-buffer pool) with table `t` (id, pad) holding
/// `make(i)` for every `i` in `0..n`, committed.
fn table_of(n: i64, make: impl Fn(i64) -> Vec<Value>) -> Database {
    let db = Database::open_temporary(small_options().pool_buffers(32)).unwrap();
    db.create_table(
        "t",
        vec![
            Column::new("id", ColumnType::I64),
            Column::new("pad", ColumnType::Text),
        ],
    )
    .unwrap();
    let w = db.begin().unwrap();
    for i in 0..n {
        w.insert("t", make(i)).unwrap();
    }
    w.commit().unwrap();
    db
}

/// A filter keeping a few rows per page, at the page's two ends and in its
/// middle, then one keeping a single row per page: the rows hold about
/// their own bytes each (a tuple is under 100 bytes here), far from a
/// page (8 KiB) each.
#[test]
fn rows_kept_by_a_selective_filter_hold_about_their_own_bytes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    watchdog(Duration::from_secs(60), || {
        let db = table_of(6000, row);
        let r = db.read().unwrap();
        let per_page = {
            let ids: Vec<_> = r.scan("t").unwrap().map(|x| x.unwrap().0).collect();
            let pages = ids.last().unwrap().block as i64 + 1;
            assert!(pages > 40, "{pages} pages");
            6000 / pages
        };
        for (what, keep) in [
            ("first, middle and last of a page", 3usize),
            ("one per page", 1),
        ] {
            let before = LIVE.load(Ordering::Relaxed);
            let kept: Vec<_> = r
                .scan("t")
                .unwrap()
                .matching(move |x| {
                    let at = x.id().offset as i64;
                    Ok(match keep {
                        1 => at == per_page / 2,
                        _ => at == 1 || at == per_page / 2 || at == per_page - 1,
                    })
                })
                .map(|x| x.unwrap().1)
                .collect();
            let held = LIVE.load(Ordering::Relaxed) - before;
            assert!(kept.len() >= 40 * keep, "{what}: {} rows", kept.len());
            let per_row = held / kept.len() as isize;
            assert!(
                per_row < 1024,
                "{what}: {} rows hold {held} bytes, {per_row} each",
                kept.len()
            );
            for x in &kept {
                let i = x.i64("id").unwrap();
                assert_eq!(**x, row(i));
            }
        }
    });
}

/// Rows of about 2.5 KB, three to a page, and a filter keeping one of each
/// page's three: each kept row must hold less than twice its own bytes,
/// not the page-sized buffer its tuple was copied into.
#[test]
fn large_rows_kept_one_per_page_do_not_hold_a_page_each() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    watchdog(Duration::from_secs(60), || {
        let pad = "q".repeat(2500);
        let big = move |i: i64| vec![Value::I64(i), Value::text(format!("{i:08}{pad}"))];
        let db = table_of(300, &big);
        let r = db.read().unwrap();
        let before = LIVE.load(Ordering::Relaxed);
        let kept: Vec<_> = r
            .scan("t")
            .unwrap()
            .matching(|x| Ok(x.id().offset == 2))
            .map(|x| x.unwrap().1)
            .collect();
        let held = LIVE.load(Ordering::Relaxed) - before;
        assert!(kept.len() >= 90, "{} rows", kept.len());
        let per_row = held / kept.len() as isize;
        // A tuple: its 2,508-byte text, its length, the id, a few bytes of
        // row header; the handle and the page copy's bookkeeping beside it.
        assert!(
            per_row < 2 * 2600,
            "{} rows hold {held} bytes, {per_row} each",
            kept.len()
        );
        for x in &kept {
            let i = x.i64("id").unwrap();
            assert_eq!(**x, big(i));
        }
    });
}
