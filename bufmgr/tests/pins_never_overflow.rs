//! A pin is a count in the buffer's state word (18 bits). Pinning one page
//! more often than the field can count must be refused (an error value), not
//! wrap around: a wrapped count makes a pinned page look unpinned, so it can
//! be evicted and its memory reused for another page while guards still read
//! (or write) it.

mod common;

use std::mem::ManuallyDrop;

use bufmgr::ErrorKind;
use common::{TestDb, rel, small_config, with_timeout};

/// One more than the state word's refcount field holds.
const LIMIT: u32 = 1 << 18;

#[test]
fn pinning_one_page_too_often_is_refused_not_wrapped() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(1), 4);
        let pool = db.pool(small_config(8));
        // Guards are kept in a ManuallyDrop: if the count wrapped, dropping
        // them would unpin a buffer that is no longer pinned.
        let mut pins = ManuallyDrop::new(Vec::with_capacity(LIMIT as usize + 1));
        let mut refused = None;
        for _ in 0..LIMIT {
            match pool.read_buffer(rel(1), 0, None) {
                Ok(p) => pins.push(p),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let id = pins[0].id();
        let row = pool.buffercache().into_iter().find(|r| r.id == id).unwrap();
        let evicted = pool.evict_buffer(id);
        let still_there = pool.buffercache().into_iter().find(|r| r.id == id).unwrap();
        let held = pins.len();
        let sound = row.pins as usize == held
            && matches!(evicted, Ok((false, _)))
            && still_there.tag.is_some();
        if sound {
            // The count is intact, so unpinning is fine.
            ManuallyDrop::into_inner(pins);
        }
        assert!(
            sound,
            "after {held} pins of one page the buffercache shows {} pins, evict_buffer \
             returned {evicted:?} and the buffer now holds {:?}: the refcount wrapped and a \
             pinned page was evicted",
            row.pins, still_there.tag
        );
        if let Some(e) = refused {
            assert_eq!(e.kind(), ErrorKind::ResourceExhausted, "{e}");
        }
        assert_eq!(pool.pinned_buffers(), 0);
    });
}
