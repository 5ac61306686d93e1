#![no_main]
//! VERSION (engine::datadir::parse_stamp): any bytes.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    exercise_version(data);
});
