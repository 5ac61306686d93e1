//! Index sizes through the engine: a table of 1,000,000 rows with `k`, a
//! random `i64` in [0, rows) (as compare-sqlite's `accounts.k`), and `g`,
//! each of 100,000 values on exactly 10 rows; an index on each built by `create_index` after the
//! load (the sorted bottom-up build), then 100,000 more rows inserted one
//! by one, which the indexes take by inserts and splits. Prints each
//! index's pages (meta page included) and MiB after the build and after
//! the inserts.
//!
//! `cargo run --release -p engine --example index_sizes [ROWS]`

use engine::{Column, ColumnType, Database, Options, Value};

/// A fixed pseudo-random permutation of `u64` (splitmix64's finalizer):
/// the same keys every run.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn row(i: u64, rows: u64, groups: u64) -> Vec<Value> {
    vec![
        Value::I64((mix(i) % rows) as i64),
        Value::I64((i % groups) as i64),
    ]
}

fn sizes(db: &Database, when: &str) -> Result<(), Box<dyn std::error::Error>> {
    for ix in db.indexes() {
        let pages = db.pool().nblocks(bufmgr::RelFork::main(ix.rel))? as usize;
        println!(
            "{when}: index {}: {pages} pages, {:.1} MiB",
            ix.name,
            (pages * bufmgr::PAGE_SIZE) as f64 / f64::from(1 << 20)
        );
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows: u64 = match std::env::args().nth(1) {
        Some(s) => s.parse().map_err(|e| format!("ROWS {s:?}: {e}"))?,
        None => 1_000_000,
    };
    let groups = (rows / 10).max(1);
    let db = Database::open_temporary(Options::new().pool_mib(256))?;
    db.create_table(
        "t",
        vec![
            Column::new("k", ColumnType::I64),
            Column::new("g", ColumnType::I64),
        ],
    )?;
    db.bulk_load("t", (0..rows).map(|i| row(i, rows, groups)), |_| {})?;
    db.create_index("t_k", "t", "k", false)?;
    db.create_index("t_g", "t", "g", false)?;
    sizes(&db, "built")?;
    let more = rows / 10;
    for chunk in (rows..rows + more).collect::<Vec<_>>().chunks(1000) {
        db.transaction(|t| {
            for &i in chunk {
                t.insert("t", row(i, rows, groups))?;
            }
            Ok(())
        })?;
    }
    sizes(&db, &format!("after {more} inserts"))?;
    db.close()?;
    Ok(())
}
