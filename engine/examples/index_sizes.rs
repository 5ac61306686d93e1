//! Index sizes through the engine: a table of 1,000,000 rows with `k`, a
//! random `i64` in [0, rows) (as compare-sqlite's `accounts.k`), and `g`,
//! each of 100,000 values on exactly 10 rows; an index on each built by `create_index` after the
//! load (the sorted bottom-up build), then 100,000 more rows inserted one
//! by one, which the indexes take by inserts and splits. Prints each
//! index's pages (meta page included) and MiB after the build and after
//! the inserts. A second table `u` takes ROWS / 5 rows one by one (in
//! transactions of 1000) into an index created before them (built by
//! random inserts and splits): its `h` holds each of ROWS / 50 values on
//! exactly 10 rows, in a random order.
//!
//! Everything runs twice: with `Options::index_deduplication` on (the
//! default: the non-unique indexes store each value once with its rows'
//! TIDs, as posting lists) and off (one item per row, as before).
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

fn sizes(db: &Database, when: &str, dedup: bool) -> Result<(), Box<dyn std::error::Error>> {
    for ix in db.indexes() {
        let pages = db.pool().nblocks(bufmgr::RelFork::main(ix.rel))? as usize;
        println!(
            "dedup {}: {when}: index {}: {pages} pages, {:.1} MiB",
            if dedup { "on" } else { "off" },
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
    for dedup in [true, false] {
        run(rows, dedup)?;
    }
    Ok(())
}

fn run(rows: u64, dedup: bool) -> Result<(), Box<dyn std::error::Error>> {
    let groups = (rows / 10).max(1);
    let db = Database::open_temporary(Options::new().pool_mib(256).index_deduplication(dedup))?;
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
    sizes(&db, "built", dedup)?;
    let more = rows / 10;
    for chunk in (rows..rows + more).collect::<Vec<_>>().chunks(1000) {
        db.transaction(|t| {
            for &i in chunk {
                t.insert("t", row(i, rows, groups))?;
            }
            Ok(())
        })?;
    }
    sizes(&db, &format!("after {more} inserts"), dedup)?;
    // Table `u`: its index takes every row by an insert, in random key order.
    let urows = (rows / 5).max(10) / 10 * 10;
    db.create_table("u", vec![Column::new("h", ColumnType::I64)])?;
    db.create_index("u_h", "u", "h", false)?;
    // i -> i * P mod urows is a permutation (P is a prime that divides no
    // urows here): each h = perm / 10 is on exactly 10 rows.
    const P: u64 = 1_000_003;
    for chunk in (0..urows).collect::<Vec<_>>().chunks(1000) {
        db.transaction(|t| {
            for &i in chunk {
                let h = (i * P % urows / 10) as i64;
                t.insert("u", vec![Value::I64(h)])?;
            }
            Ok(())
        })?;
    }
    let ix = db
        .indexes()
        .into_iter()
        .find(|ix| ix.name == "u_h")
        .ok_or("index u_h is missing")?;
    let pages = db.pool().nblocks(bufmgr::RelFork::main(ix.rel))? as usize;
    println!(
        "dedup {}: {urows} rows inserted one by one: index u_h: {pages} pages, {:.1} MiB",
        if dedup { "on" } else { "off" },
        (pages * bufmgr::PAGE_SIZE) as f64 / f64::from(1 << 20)
    );
    db.close()?;
    Ok(())
}
