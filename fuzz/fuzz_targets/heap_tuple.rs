#![no_main]
//! Heap tuple header decoding (heap::tuple::TupleHeader::decode).

use libfuzzer_sys::fuzz_target;


fuzz_target!(|data: &[u8]| {
    if let Some(h) = heap::tuple::TupleHeader::decode(data) {
        let mut out = vec![0u8; data.len()];
        h.encode_into(&mut out);
    }
});
