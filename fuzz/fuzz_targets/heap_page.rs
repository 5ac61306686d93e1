#![no_main]
//! Heap page parsing, every accessor and the edits redo makes (heap::page): patches to the seed page, or a whole page.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    let page = if data.len() == bufmgr::PAGE_SIZE {
        data.to_vec()
    } else {
        patched(&valid_heap_page(), data)
    };
    exercise_heap_page(&page);
});
