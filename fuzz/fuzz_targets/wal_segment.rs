#![no_main]
//! The WAL reader and Wal::open over segment 0 (wal::reader): patches to a segment written by the real log.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    let (segment, used) = wal_segment();
    exercise_wal_segment(&patched(&segment[..*used], data));
});
