//! A heap page whose header says "never initialised" (lower, upper and
//! special all zero) is accepted only if every byte past the pool's own
//! header is zero: one non-zero byte anywhere, of any value, makes it a
//! corrupt page naming the relation and block; a page laid out by the
//! bulk writer's `init` is an empty page, not a new one.

use bufmgr::PAGE_SIZE;
use bufmgr::RelId;
use bufmgr::page::OWNER_HEADER_OFFSET;
use heap::HeapError;
use heap::page::{self, HeapPage, PageId};

const ID: PageId = PageId {
    rel: RelId(77),
    block: 12_345,
};

#[test]
fn a_blank_header_over_any_non_zero_byte_is_a_corrupt_page() {
    let blank = vec![0u8; PAGE_SIZE];
    assert!(HeapPage::parse(&blank, ID).unwrap().is_new());
    let mut page = blank.clone();
    for at in 0..PAGE_SIZE {
        for value in [1u8, 0x80, 0xff] {
            page[at] = value;
            let r = HeapPage::parse(&page, ID);
            if at < OWNER_HEADER_OFFSET {
                assert!(r.unwrap().is_new(), "byte {at} belongs to the pool");
            } else if (page::LOWER_OFFSET..page::LOWER_OFFSET + 6).contains(&at) {
                // A header field: not a blank header any more.
                assert!(!matches!(r, Ok(ref v) if v.is_new()), "byte {at}");
            } else {
                match r {
                    Err(HeapError::CorruptPage { rel, block, detail }) => {
                        assert_eq!((rel, block), (ID.rel, ID.block), "byte {at}");
                        assert!(detail.contains("header is zero"), "byte {at}: {detail}");
                    }
                    other => panic!("byte {at} = {value:#x}: {other:?}"),
                }
            }
        }
        page[at] = 0;
    }
    let mut laid_out = blank.clone();
    page::init(&mut laid_out);
    let v = HeapPage::parse(&laid_out, ID).unwrap();
    assert!(!v.is_new());
    assert_eq!(v.item_count(), 0);
}
