#![no_main]
//! Page header and checksum (bufmgr::page): a whole page as given, or patches to the seed heap page.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    let page = if data.len() == bufmgr::PAGE_SIZE {
        data.to_vec()
    } else {
        patched(&valid_heap_page(), data)
    };
    exercise_page_header(&page);
});
