#![no_main]
//! WAL record decoding (wal::decode): the first byte picks the seed record and whether the damage is re-sealed (length and CRC fixed), the rest patches it; or raw bytes.

use libfuzzer_sys::fuzz_target;
use tests::decoders::*;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, patches)) = data.split_first() else {
        return;
    };
    let mut bytes = if mode & 8 != 0 {
        patches.to_vec()
    } else {
        patched(&wal_records()[usize::from(mode) % 3], patches)
    };
    if mode & 16 != 0 {
        reseal_record(&mut bytes);
    }
    exercise_wal_record(&bytes);
});
