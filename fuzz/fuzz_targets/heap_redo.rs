#![no_main]
//! Heap redo (heap::redo, heap::record): first byte the info code, second the block count, the rest the payload.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    let [info, blocks, payload @ ..] = data else {
        return;
    };
    exercise_heap_redo(*info, payload, blocks & 1 != 0);
});
