#![no_main]
//! The control file (wal::control): patches to a valid one, re-sealed when the first byte is odd; or raw bytes.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, patches)) = data.split_first() else {
        return;
    };
    let mut bytes = if mode & 2 != 0 {
        patches.to_vec()
    } else {
        patched(&valid_control(), patches)
    };
    if mode & 1 != 0 {
        reseal_control(&mut bytes);
    }
    exercise_control(&bytes);
});
