//! A null bit set on disk for a nullable column that stores a value, with
//! checksums off: the row's bytes no longer match its bitmap (8 bytes
//! too many). An owned read checks the row whole and refuses it; a
//! borrowed row's accessor of a column after the damaged one walks the
//! columns before it, skips the "NULL" one, and reads the bytes of the
//! column before it as its own.

mod common;

use std::time::Duration;

use common::{position_of, small_options, table_on_disk, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Value};

#[test]
#[ignore = "a borrowed row's accessor checks only what it reads (the row module's rule): \
            catching a wrong null bit before the column read needs the whole row checked \
            on every borrowed read, a design decision left open"]
fn a_null_bit_damaged_before_a_column_is_never_read_as_its_value() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let options = || small_options().checksums(false);
        let marker = 0x5EED_0009_ABCD_EF01i64;
        let (file, rids) = table_on_disk(
            dir.path(),
            options(),
            "nb",
            vec![
                Column::nullable("n", ColumnType::I64),
                Column::new("z", ColumnType::I64),
            ],
            |_| {},
            [vec![Value::I64(marker), Value::I64(9)]],
        );
        let rid = rids[0];
        let mut bytes = std::fs::read(&file).unwrap();
        let at = position_of(&bytes, &marker.to_le_bytes());
        // count (2), then the null bitmap: mark `n` NULL.
        assert_eq!(bytes[at - 3..at - 1], 2u16.to_le_bytes());
        bytes[at - 1] |= 1;
        std::fs::write(&file, &bytes).unwrap();

        let db = Database::open(dir.path(), options()).unwrap();
        let t = db.read().unwrap();
        assert!(matches!(
            t.get("nb", rid),
            Err(EngineError::CorruptRow { .. })
        ));
        t.scan_each("nb", |row| {
            match row.i64("z") {
                Ok(v) => assert_eq!(v, 9, "z read the bytes of n"),
                Err(e) => assert!(matches!(e, EngineError::CorruptRow { .. }), "{e}"),
            }
            Ok(())
        })
        .unwrap();
    });
}
