#![no_main]
//! B-tree redo (btree::redo): first byte the info code, second the block count, the rest the payload.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    let [info, blocks, payload @ ..] = data else {
        return;
    };
    exercise_btree_redo(*info, payload, u32::from(*blocks % 3) + 1);
});
