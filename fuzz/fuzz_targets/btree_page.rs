#![no_main]
//! B-tree pages and items (btree::page): the first byte picks the seed (compact leaf, internal, meta, headed leaf, internal, fixed leaf) and the item layout, the rest patches it.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    let Some((&which, patches)) = data.split_first() else {
        return;
    };
    let page = patched(&valid_btree_pages()[usize::from(which) % 6], patches);
    exercise_btree_page(&page);
    let layout = if which & 8 != 0 {
        btree::page::Layout::Compact
    } else {
        btree::page::Layout::Headed
    };
    let _ = btree::page::decode_item(patches, which & 4 != 0, layout, btree_id());
});
