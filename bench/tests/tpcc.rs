//! TPC-C at a tiny scale (one warehouse, reduced cardinalities): every
//! transaction type runs, the consistency conditions hold after a run and
//! after a crash, and a broken Delivery fails condition 3.

use bench::ScenarioKind;
use bench::common::{CommonArgs, EvictorChoice};
use bench::scenarios::tpcc;
use bench::scenarios::versus::tpcc::backend::{
    Backend, LastOrder, OrderStatusLine, OrderStatusResult, Outcome,
};
use bench::scenarios::versus::tpcc::driver::{Limit, drive};
use bench::scenarios::versus::tpcc::engine_side::{
    DeliveryFault, EngineBackend, TERMINAL_ATTEMPTS,
};
use bench::scenarios::versus::tpcc::spec::{
    self, CustomerSelector, DeliveryInput, NewOrderInput, OrderLineInput, OrderStatusInput,
    PaymentInput, Scale, StockLevelInput, TxnKind,
};
use engine::{Database, Options, Value};

fn loaded(scale: &Scale) -> EngineBackend {
    let db = Database::open_temporary(
        Options::new()
            .pool_buffers(512)
            .transaction_attempts(TERMINAL_ATTEMPTS),
    )
    .unwrap();
    let backend = EngineBackend::new(db);
    backend.load(scale, &mut |_, _| {}).unwrap();
    backend
}

fn next_order_ids(backend: &EngineBackend, scale: &Scale) -> i64 {
    let txn = backend.database().read().unwrap();
    let mut sum = 0;
    for d in 1..=i64::from(scale.districts) {
        let (_, row) = txn
            .get_by_primary_key("district", (1i64, d))
            .unwrap()
            .unwrap();
        sum += row.i64("d_next_o_id").unwrap();
    }
    sum
}

#[test]
fn the_loaded_tiny_scale_passes_every_consistency_condition() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let report = backend.check(&scale).unwrap();
    assert!(report.passed(), "{}", report.describe());
    assert_eq!((report.warehouses, report.districts), (1, scale.districts));
}

#[test]
fn every_transaction_type_runs_and_the_conditions_hold_after_the_run() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let before = next_order_ids(&backend, &scale);
    let r = drive(&backend, &scale, 2, Limit::Transactions(200), 7).unwrap();
    assert_eq!(r.total(), 400);
    for kind in TxnKind::ALL {
        assert!(r.of(kind).done > 0, "{kind:?} never ran: {:?}", r.counts);
        assert!(
            r.latencies.get(kind.name()).is_some(),
            "{kind:?} has no latency"
        );
    }
    let no = r.of(TxnKind::NewOrder);
    // Every committed New-Order took one order id; rolled back ones none.
    assert_eq!(
        next_order_ids(&backend, &scale) - before,
        (no.done - no.rolled_back) as i64
    );
    let report = backend.check(&scale).unwrap();
    assert!(report.passed(), "{}", report.describe());
}

#[test]
fn a_new_order_naming_the_unused_item_rolls_back_everything_it_did() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let before = next_order_ids(&backend, &scale);
    let mut t = backend.terminal(&scale, 1).unwrap();
    let line = |item| OrderLineInput {
        item,
        supply_warehouse: 1,
        quantity: 3,
    };
    let input = NewOrderInput {
        warehouse: 1,
        district: 1,
        customer: 5,
        lines: vec![line(1), line(2), line(scale.unused_item())],
    };
    assert_eq!(t.new_order(&input).unwrap(), Outcome::RolledBack);
    assert_eq!(next_order_ids(&backend, &scale), before);
    let txn = backend.database().read().unwrap();
    let (_, stock) = txn
        .get_by_primary_key("stock", (1i64, 1i64))
        .unwrap()
        .unwrap();
    assert_eq!(stock.value("s_ytd").unwrap(), &Value::I64(0));
    drop(txn);
    let ok = NewOrderInput {
        lines: vec![line(1), line(2)],
        ..input
    };
    assert_eq!(t.new_order(&ok).unwrap(), Outcome::Committed);
    assert_eq!(next_order_ids(&backend, &scale), before + 1);
}

#[test]
fn a_delivery_that_skips_a_district_s_oldest_order_fails_condition_3() {
    let scale = Scale::tiny();
    let db = Database::open_temporary(
        Options::new()
            .pool_buffers(512)
            .transaction_attempts(TERMINAL_ATTEMPTS),
    )
    .unwrap();
    let backend = EngineBackend::new(db).with_fault(DeliveryFault::SkipOldestIn(2));
    backend.load(&scale, &mut |_, _| {}).unwrap();
    let mut t = backend.terminal(&scale, 1).unwrap();
    let out = t
        .delivery(&DeliveryInput {
            warehouse: 1,
            carrier: 3,
        })
        .unwrap();
    assert_eq!(out, Outcome::Committed);
    drop(t);
    let report = backend.check(&scale).unwrap();
    assert!(report.failed(3), "{}", report.describe());
    assert_eq!(report.violations.len(), 1, "{}", report.describe());
    let v = &report.violations[0];
    assert_eq!((v.warehouse, v.district), (1, Some(2)));
    assert!(
        report.describe().contains("condition 3"),
        "{}",
        report.describe()
    );
}

#[test]
fn a_correct_delivery_keeps_condition_3() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let mut t = backend.terminal(&scale, 1).unwrap();
    for carrier in 1..=3 {
        t.delivery(&DeliveryInput {
            warehouse: 1,
            carrier,
        })
        .unwrap();
    }
    drop(t);
    let report = backend.check(&scale).unwrap();
    assert!(report.passed(), "{}", report.describe());
}

fn tiny_settings(kind: ScenarioKind, dir: &std::path::Path) -> bench::Settings {
    let args = CommonArgs {
        duration: Some(0.5),
        warmup: Some(0.2),
        evictor: Some(EvictorChoice::Clock),
        data_dir: dir.to_path_buf(),
        no_progress: true,
        ..CommonArgs::default()
    };
    kind.settings(&args).unwrap()
}

#[test]
fn bench_tpcc_at_tiny_scale_reports_every_type_with_ring_on_and_off_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        ..tpcc::Args::default()
    });
    let mut settings = tiny_settings(kind, dir.path());
    settings.json = Some(dir.path().join("t.json"));
    let report = kind.run(&settings).unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "ring on and off");
    for row in rows {
        assert!(row["tpmc"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["check_passed"], true);
        let kinds = row["kinds"].as_array().unwrap();
        assert_eq!(kinds.len(), 5);
        assert!(row["wal_bytes_per_txn"].as_f64().unwrap() > 0.0);
        // Every committed write flushes the WAL: at least one fdatasync.
        let fsyncs = row["wal_fsyncs"].as_u64().unwrap();
        assert!(fsyncs > 0, "{row}");
        let per_txn = row["wal_fsyncs_per_txn"].as_f64().unwrap();
        let txns = row["transactions"].as_u64().unwrap();
        assert!(
            (per_txn - fsyncs as f64 / txns as f64).abs() < 1e-9,
            "{row}"
        );
        assert!(!row["per_second"].as_array().unwrap().is_empty());
        let rels = row["relations"].as_array().unwrap();
        assert!(rels.len() >= 9 + 8);
        // Per table and index: the pool's lookups, hits and hit ratio.
        let mut looked_up = 0;
        for rel in rels {
            let (acc, hits) = (
                rel["accesses"].as_u64().unwrap(),
                rel["hits"].as_u64().unwrap(),
            );
            assert!(hits <= acc, "{rel}");
            if acc > 0 {
                let ratio = rel["hit_ratio"].as_f64().unwrap();
                assert!((ratio - hits as f64 / acc as f64).abs() < 1e-9, "{rel}");
            } else {
                assert!(rel["hit_ratio"].is_null(), "no lookup, no ratio: {rel}");
            }
            assert!(rel["evictions"].as_u64().is_some(), "{rel}");
            looked_up += acc;
        }
        assert!(looked_up <= row["accesses"].as_u64().unwrap());
        let named = |name: &str| {
            rels.iter()
                .find(|r| r["name"] == name)
                .unwrap_or_else(|| panic!("no relation {name} in {row}"))
        };
        // Every New-Order and Stock-Level reads stock and order_line, every
        // New-Order and Order-Status their primary keys.
        for name in ["stock", "order_line", "stock_pkey", "order_line_pkey"] {
            assert!(named(name)["accesses"].as_u64().unwrap() > 0, "{name}");
        }
        assert_eq!(named("stock")["kind"], "table");
        assert_eq!(named("stock_pkey")["kind"], "index");
    }
    // The pool was sized by the default fraction: a quarter of the data.
    let (pool, data) = (
        json["pool_buffers"].as_u64().unwrap(),
        json["data_pages"].as_u64().unwrap(),
    );
    assert!(
        pool >= 64 && (pool == 64 || pool.abs_diff(data / 4) <= 1),
        "{pool} of {data}"
    );
    let plots = report.svg_plots();
    assert_eq!(plots.len(), 1);
    assert!(plots[0].svg.contains("<svg"));
}

#[test]
fn analytic_threads_0_and_1_give_a_cell_each_and_only_the_second_runs_queries() {
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        analytic_threads: Some("0,1".parse().unwrap()),
        ..tpcc::Args::default()
    });
    let mut settings = tiny_settings(kind, dir.path());
    settings.rings = vec![true];
    settings.json = Some(dir.path().join("t.json"));
    let report = kind.run(&settings).unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "analytic 0 and 1");
    assert_eq!(rows[0]["analytic_threads"], 0);
    assert_eq!(rows[0]["analytic_queries"], 0);
    assert!(rows[0]["queries"].as_array().unwrap().is_empty());
    assert_eq!(rows[1]["analytic_threads"], 1);
    assert!(
        rows[1]["analytic_queries"].as_u64().unwrap() >= 1,
        "{}",
        rows[1]
    );
    assert!(rows[1]["analytic_per_hour"].as_f64().unwrap() > 0.0);
    let q = &rows[1]["queries"][0];
    assert_eq!(q["query"], "q1", "the rotation starts at Q1: {q}");
    assert!(q["latency"]["p50_us"].as_f64().unwrap() > 0.0, "{q}");
    assert!(report.render().contains("analytic queries (CH-benCHmark)"));
}

#[test]
fn a_pool_fraction_and_a_pool_size_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        pool_fraction: Some("30%".parse().unwrap()),
        ..tpcc::Args::default()
    });
    let args = CommonArgs {
        pool_pages: Some(100),
        data_dir: dir.path().to_path_buf(),
        ..CommonArgs::default()
    };
    let e = kind
        .run(&kind.settings(&args).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--pool-fraction"), "{e}");
    assert!("0".parse::<tpcc::Fraction>().is_err());
    assert!("abc".parse::<tpcc::Fraction>().is_err());
    assert_eq!("25%".parse::<tpcc::Fraction>(), "0.25".parse());
}

#[test]
fn the_consistency_conditions_hold_after_a_sigkill_of_a_child_running_tpcc_and_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let scale = Scale::tiny();
    let data = tpcc::ensure_data(dir.path(), &scale, false).unwrap();
    let run = dir.path().join("run");
    bench::dirs::copy_dir(&data.dir, &run, &["LOCK"]).unwrap();
    let report = tpcc::crash::crash_and_check(
        std::path::Path::new(env!("CARGO_BIN_EXE_bench")),
        &run,
        &scale,
        2,
        256,
        std::time::Duration::from_millis(2500),
        3,
    )
    .unwrap();
    assert!(report.check.passed(), "{}", report.check.describe());
    assert!(
        report.orders_after > report.orders_before,
        "the child committed no New-Order before the kill: {report:?}"
    );
    assert!(report.acknowledged > 0, "{report:?}");
    assert!(report.lost.is_empty(), "{:?}", report.lost);
}

#[test]
fn an_acknowledged_new_order_missing_after_recovery_is_reported_lost() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let db = backend.database();
    let next = {
        let txn = db.read().unwrap();
        txn.get_by_primary_key("district", (1i64, 2i64))
            .unwrap()
            .unwrap()
            .1
            .i64("d_next_o_id")
            .unwrap()
    };
    // Orders the load committed are found.
    let kept = [(1, 1, 1), (1, 2, next - 1)];
    assert_eq!(
        tpcc::crash::lost_new_orders(db, &kept).unwrap(),
        Vec::<String>::new()
    );
    // An order acknowledged but never in the database is lost, and named.
    let lost = tpcc::crash::lost_new_orders(db, &[(1, 1, 1), (1, 2, next)]).unwrap();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(lost[0].contains(&format!("(1, 2, {next})")), "{lost:?}");
    assert_eq!(
        tpcc::crash::parse_ack(&format!("{}1 2 {next}", tpcc::crash::ACK_PREFIX)),
        Some((1, 2, next))
    );
    assert_eq!(tpcc::crash::parse_ack("NEW-ORDER 1 2"), None);
    assert_eq!(tpcc::crash::parse_ack("READY"), None);
}

#[cfg(not(feature = "sqlite"))]
#[test]
fn versus_sqlite_without_the_sqlite_feature_is_an_error_naming_the_feature() {
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        versus_sqlite: true,
        ..tpcc::Args::default()
    });
    let settings = tiny_settings(kind, dir.path());
    let e = kind.run(&settings).unwrap_err().to_string();
    assert!(e.contains("--features sqlite"), "{e}");
}

/// (c_id, c_first, c_payment_cnt) of every customer of (1, 1) named `last`.
fn customers_named(backend: &EngineBackend, last: &str) -> Vec<(i64, String, i64)> {
    let txn = backend.database().read().unwrap();
    let mut out = Vec::new();
    for row in txn.scan("customer").unwrap() {
        let (_, row) = row.unwrap();
        if row.i64("c_w_id").unwrap() == 1
            && row.i64("c_d_id").unwrap() == 1
            && row.text("c_last").unwrap() == last
        {
            out.push((
                row.i64("c_id").unwrap(),
                row.text("c_first").unwrap().to_string(),
                row.i64("c_payment_cnt").unwrap(),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn a_payment_by_last_name_charges_the_middle_customer_sorted_by_first_name() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    // The name most customers of district 1 share (at least 3, so the
    // middle differs from both ends).
    let (name, before) = (0..scale.last_names)
        .map(spec::last_name)
        .map(|n| {
            let c = customers_named(&backend, &n);
            (n, c)
        })
        .max_by_key(|(_, c)| c.len())
        .unwrap();
    assert!(before.len() >= 3, "{name}: only {} customers", before.len());
    let mut sorted = before.clone();
    sorted.sort_by(|a, b| a.1.cmp(&b.1));
    let middle = sorted[sorted.len().div_ceil(2) - 1].0;
    let mut t = backend.terminal(&scale, 1).unwrap();
    let out = t
        .payment(&PaymentInput {
            warehouse: 1,
            district: 1,
            customer_warehouse: 1,
            customer_district: 1,
            customer: CustomerSelector::LastName(name.clone()),
            amount: 1_000,
        })
        .unwrap();
    assert_eq!(out, Outcome::Committed);
    drop(t);
    let after = customers_named(&backend, &name);
    for ((c, _, was), (c2, _, now)) in before.iter().zip(&after) {
        assert_eq!(c, c2);
        let expected = was + i64::from(*c == middle);
        assert_eq!(*now, expected, "customer {c} (middle is {middle})");
    }
}

fn new_orders_per_district(backend: &EngineBackend, scale: &Scale) -> Vec<i64> {
    let state = backend.consistency_state(scale).unwrap();
    state[0].districts.iter().map(|d| d.new_orders).collect()
}

#[test]
fn a_delivery_skips_a_district_without_undelivered_orders_and_delivers_the_others() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let mut t = backend.terminal(&scale, 1).unwrap();
    let deliver = |t: &mut Box<dyn bench::scenarios::versus::tpcc::backend::Terminal + '_>| {
        t.delivery(&DeliveryInput {
            warehouse: 1,
            carrier: 4,
        })
        .unwrap()
    };
    // Every district starts with the same undelivered orders: drain them.
    for _ in 0..scale.new_orders {
        assert_eq!(deliver(&mut t), Outcome::Committed);
    }
    assert_eq!(new_orders_per_district(&backend, &scale), vec![0, 0]);
    // Nothing to deliver anywhere: still a clean commit.
    assert_eq!(deliver(&mut t), Outcome::Committed);
    // One new order in district 2 only: district 1 is skipped, district 2
    // is delivered.
    let order = NewOrderInput {
        warehouse: 1,
        district: 2,
        customer: 7,
        lines: vec![OrderLineInput {
            item: 1,
            supply_warehouse: 1,
            quantity: 2,
        }],
    };
    assert_eq!(t.new_order(&order).unwrap(), Outcome::Committed);
    assert_eq!(new_orders_per_district(&backend, &scale), vec![0, 1]);
    let carrier_before = |backend: &EngineBackend| {
        let txn = backend.database().read().unwrap();
        let next = txn
            .get_by_primary_key("district", (1i64, 2i64))
            .unwrap()
            .unwrap()
            .1
            .i64("d_next_o_id")
            .unwrap();
        txn.get_by_primary_key("orders", (1i64, 2i64, next - 1))
            .unwrap()
            .unwrap()
            .1
            .value("o_carrier_id")
            .unwrap()
            .clone()
    };
    assert_eq!(carrier_before(&backend), Value::Null);
    assert_eq!(deliver(&mut t), Outcome::Committed);
    assert_eq!(carrier_before(&backend), Value::I64(4));
    assert_eq!(new_orders_per_district(&backend, &scale), vec![0, 0]);
    drop(t);
    let report = backend.check(&scale).unwrap();
    assert!(report.passed(), "{}", report.describe());
}

#[test]
fn a_pool_fraction_finer_than_a_thousandth_is_refused_not_rounded() {
    for s in ["0.0001", "0.0004", "0.05%", "0.0016", "0.1234"] {
        let e = s.parse::<tpcc::Fraction>().unwrap_err();
        assert!(e.contains("thousandth"), "{s}: {e}");
    }
    assert_eq!("0.001".parse::<tpcc::Fraction>(), Ok(tpcc::Fraction(1)));
    assert_eq!("12.5%".parse::<tpcc::Fraction>(), Ok(tpcc::Fraction(125)));
    assert_eq!("1.5".parse::<tpcc::Fraction>(), Ok(tpcc::Fraction(1500)));
}

#[test]
fn more_analytic_or_terminal_threads_than_the_limit_are_refused_before_any_thread_starts() {
    let e = "1,30000".parse::<tpcc::ThreadCounts>().unwrap_err();
    assert!(e.contains("30000"), "{e}");
    let max = tpcc::MAX_THREADS;
    assert!(format!("0,{max}").parse::<tpcc::ThreadCounts>().is_ok());
    assert!(
        format!("{}", max + 1)
            .parse::<tpcc::ThreadCounts>()
            .is_err()
    );
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        ..tpcc::Args::default()
    });
    let args = CommonArgs {
        threads: Some(vec![2, max as usize + 1]),
        data_dir: dir.path().to_path_buf(),
        no_progress: true,
        ..CommonArgs::default()
    };
    let e = kind
        .run(&kind.settings(&args).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("--threads"), "{e}");
    // Refused before the data set is built.
    assert!(!dir.path().join("tpcc").exists());
}

#[test]
fn a_cached_data_set_missing_a_file_fails_the_run_naming_the_cached_directory() {
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        ..tpcc::Args::default()
    });
    let settings = tiny_settings(kind, dir.path());
    let data = tpcc::ensure_data(dir.path(), &Scale::tiny(), false).unwrap();
    // The largest relation file of the cached set disappears.
    let largest = std::fs::read_dir(data.dir.join("base"))
        .unwrap()
        .map(|e| e.unwrap())
        .max_by_key(|e| e.metadata().unwrap().len())
        .unwrap()
        .path();
    std::fs::remove_file(&largest).unwrap();
    let e = kind.run(&settings).unwrap_err().to_string();
    assert!(e.contains("missing"), "{e}");
    assert!(e.contains(&data.dir.display().to_string()), "{e}");
    assert!(e.contains("delete that directory"), "{e}");
}

#[test]
fn eight_terminals_on_one_warehouse_conflict_yet_every_transaction_finishes_and_the_conditions_hold()
 {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let before = next_order_ids(&backend, &scale);
    let engine_retries = backend.database().txn_stats().retries;
    let r = drive(&backend, &scale, 8, Limit::Transactions(40), 11).unwrap();
    // Every transaction of every terminal finished: none gave up.
    assert_eq!(r.total(), 8 * 40);
    // The terminals' reruns are the engine's retries, each counted once.
    let retries: u64 = TxnKind::ALL.iter().map(|&k| r.of(k).retries).sum();
    assert!(
        retries > 0,
        "eight terminals on one warehouse never conflicted"
    );
    assert_eq!(
        retries,
        backend.database().txn_stats().retries - engine_retries
    );
    let no = r.of(TxnKind::NewOrder);
    assert_eq!(
        next_order_ids(&backend, &scale) - before,
        (no.done - no.rolled_back) as i64
    );
    let report = backend.check(&scale).unwrap();
    assert!(report.passed(), "{}", report.describe());
}

/// Add `by` to the integer column `col` of the row `key` names in `table`.
fn bump(txn: &engine::Transaction, table: &str, key: impl engine::IntoKey, col: &str, by: i64) {
    let (id, row) = txn.get_by_primary_key(table, key).unwrap().unwrap();
    let mut v = row.values().to_vec();
    let i = row.table().column_index(col).unwrap();
    v[i] = Value::I64(row.i64(col).unwrap() + by);
    txn.update(table, id, v).unwrap();
}

#[test]
fn each_condition_fails_when_the_database_itself_breaks_it() {
    let scale = Scale::tiny();
    let first = i64::from(scale.first_new_order());
    type Break = fn(&engine::Transaction, i64);
    let cases: [(u8, Option<u32>, Break); 4] = [
        (1, None, |t, _| bump(t, "warehouse", 1i64, "w_ytd", 1)),
        (2, Some(2), |t, _| {
            bump(t, "district", (1i64, 2i64), "d_next_o_id", 1)
        }),
        (3, Some(1), |t, first| {
            let (id, _) = t
                .get_by_primary_key("new_order", (1i64, 1i64, first + 1))
                .unwrap()
                .unwrap();
            t.delete("new_order", id).unwrap();
        }),
        (4, Some(2), |t, _| {
            let (id, _) = t
                .get_by_primary_key("order_line", (1i64, 2i64, 5i64, 1i64))
                .unwrap()
                .unwrap();
            t.delete("order_line", id).unwrap();
        }),
    ];
    for (condition, district, breaks) in cases {
        let backend = loaded(&scale);
        let txn = backend.database().begin().unwrap();
        breaks(&txn, first);
        txn.commit().unwrap();
        let report = backend.check(&scale).unwrap();
        assert!(
            report.failed(condition),
            "{condition}: {}",
            report.describe()
        );
        assert_eq!(report.violations.len(), 1, "{}", report.describe());
        assert_eq!(report.violations[0].district, district);
    }
}

#[test]
fn a_terminal_on_a_database_allowing_too_few_attempts_is_refused_naming_the_option() {
    let db = Database::open_temporary(Options::new().pool_buffers(512)).unwrap();
    let backend = EngineBackend::new(db);
    let e = backend
        .terminal(&Scale::tiny(), 1)
        .err()
        .expect("a terminal with 10 attempts")
        .to_string();
    assert!(e.contains("transaction_attempts"), "{e}");
}

/// Stock-Level's count recomputed through the public API without the
/// order-line index: the items of the district's last 20 orders from a
/// scan of ORDER-LINE, each one's stock read by key.
fn recount_low_stock(backend: &EngineBackend, d: i64, threshold: i64) -> (u32, Vec<i64>) {
    let txn = backend.database().read().unwrap();
    let (_, district) = txn
        .get_by_primary_key("district", (1i64, d))
        .unwrap()
        .unwrap();
    let next = district.i64("d_next_o_id").unwrap();
    let mut items = std::collections::BTreeSet::new();
    for r in txn.scan("order_line").unwrap() {
        let (_, l) = r.unwrap();
        let o = l.i64("ol_o_id").unwrap();
        if l.i64("ol_w_id").unwrap() == 1
            && l.i64("ol_d_id").unwrap() == d
            && o >= next - 20
            && o < next
        {
            items.insert(l.i64("ol_i_id").unwrap());
        }
    }
    let mut low = 0;
    for &i in &items {
        let (_, s) = txn.get_by_primary_key("stock", (1i64, i)).unwrap().unwrap();
        low += u32::from(s.i64("s_quantity").unwrap() < threshold);
    }
    (low, items.into_iter().collect())
}

#[test]
fn stock_level_returns_the_low_stock_count_a_direct_recount_gives() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    // Some orders of the run's own, so the last 20 are not only loaded ones.
    drive(&backend, &scale, 1, Limit::Transactions(60), 5).unwrap();
    let mut t = backend.terminal(&scale, 1).unwrap();
    let mut counted = 0;
    for d in 1..=scale.districts {
        for threshold in [10, 15, 20] {
            let got = t
                .stock_level(&StockLevelInput {
                    warehouse: 1,
                    district: d,
                    threshold,
                })
                .unwrap();
            let (want, _) = recount_low_stock(&backend, i64::from(d), i64::from(threshold));
            assert_eq!(got, want, "district {d} threshold {threshold}");
            counted += got;
        }
    }
    // One more item under the threshold: the count follows.
    let (before, items) = recount_low_stock(&backend, 1, 10);
    let db = backend.database();
    let raised = db
        .transaction(|txn| {
            for &i in &items {
                let (id, s) = txn.get_by_primary_key("stock", (1i64, i))?.unwrap();
                if s.i64("s_quantity")? >= 10 {
                    let mut v = s.values().to_vec();
                    v[s.table().column_index("s_quantity")?] = Value::I64(3);
                    txn.update("stock", id, v)?;
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .unwrap();
    assert!(raised, "every item of district 1 was already low");
    let input = StockLevelInput {
        warehouse: 1,
        district: 1,
        threshold: 10,
    };
    assert_eq!(t.stock_level(&input).unwrap(), before + 1);
    assert!(
        counted + before > 0,
        "no low stock anywhere: a vacuous check"
    );
}

#[test]
fn order_status_returns_the_customer_s_last_order_and_its_lines_as_a_direct_recount_gives() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    drive(&backend, &scale, 1, Limit::Transactions(60), 9).unwrap();
    let mut t = backend.terminal(&scale, 1).unwrap();
    let txn = backend.database().read().unwrap();
    let orders: Vec<_> = txn.scan("orders").unwrap().map(|r| r.unwrap().1).collect();
    let lines: Vec<_> = txn
        .scan("order_line")
        .unwrap()
        .map(|r| r.unwrap().1)
        .collect();
    drop(txn);
    let mut with_orders = 0;
    for d in 1..=scale.districts {
        for c in [1, 2, 17, scale.customers] {
            let (wi, di, ci) = (1i64, i64::from(d), i64::from(c));
            let got = t
                .order_status(&OrderStatusInput {
                    warehouse: 1,
                    district: d,
                    customer: CustomerSelector::Id(c),
                })
                .unwrap();
            let txn = backend.database().read().unwrap();
            let (_, cust) = txn
                .get_by_primary_key("customer", (wi, di, ci))
                .unwrap()
                .unwrap();
            drop(txn);
            let newest = orders
                .iter()
                .filter(|o| {
                    (
                        o.i64("o_w_id").unwrap(),
                        o.i64("o_d_id").unwrap(),
                        o.i64("o_c_id").unwrap(),
                    ) == (wi, di, ci)
                })
                .map(|o| o.i64("o_id").unwrap())
                .max();
            let last_order = newest.map(|o| {
                let mut ls: Vec<_> = lines
                    .iter()
                    .filter(|l| {
                        (
                            l.i64("ol_w_id").unwrap(),
                            l.i64("ol_d_id").unwrap(),
                            l.i64("ol_o_id").unwrap(),
                        ) == (wi, di, o)
                    })
                    .map(|l| {
                        (
                            l.i64("ol_number").unwrap(),
                            OrderStatusLine {
                                item: l.i64("ol_i_id").unwrap(),
                                supply_warehouse: l.i64("ol_supply_w_id").unwrap(),
                                quantity: l.i64("ol_quantity").unwrap(),
                                amount: l.i64("ol_amount").unwrap(),
                            },
                        )
                    })
                    .collect();
                ls.sort_by_key(|(n, _)| *n);
                LastOrder {
                    id: o,
                    lines: ls.into_iter().map(|(_, l)| l).collect(),
                }
            });
            with_orders += usize::from(last_order.is_some());
            let want = OrderStatusResult {
                customer: ci,
                balance: cust.i64("c_balance").unwrap(),
                last_order,
            };
            assert_eq!(got, want, "customer ({wi}, {di}, {ci})");
        }
    }
    assert!(with_orders > 0, "no customer had an order: a vacuous check");
}

#[test]
fn load_only_builds_the_data_set_reports_its_load_time_and_size_and_runs_no_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        load_only: true,
        ..tpcc::Args::default()
    });
    // No run options: `--load-only` refuses them.
    let args = CommonArgs {
        data_dir: dir.path().to_path_buf(),
        no_progress: true,
        json: Some(dir.path().join("load.json")),
        ..CommonArgs::default()
    };
    let settings = kind.settings(&args).unwrap();
    let report = kind.run(&settings).unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("load.json")).unwrap())
            .unwrap();
    assert_eq!(json["load_only"], true);
    assert_eq!(json["data_reused"], false);
    assert!(json["load_secs"].as_f64().unwrap() > 0.0, "{json}");
    let bytes = json["data_bytes"].as_u64().unwrap();
    assert!(
        bytes >= json["data_pages"].as_u64().unwrap() * 8192,
        "{json}"
    );
    assert!(
        json["rows"].as_array().unwrap().is_empty(),
        "no matrix cell ran"
    );
    // No terminal ran on the data: the loaded state, untouched.
    assert!(!dir.path().join("tpcc").join("run").exists());
    // A second run reuses the cached set, so it has no load time to report.
    let report = kind.run(&settings).unwrap();
    assert!(report.render().contains("reused"), "{}", report.render());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("load.json")).unwrap())
            .unwrap();
    assert_eq!(json["data_reused"], true);
    assert_eq!(json["load_secs"].as_f64().unwrap(), 0.0);
}

/// `--pool-pages` below the engine's minimum pool is refused before the data
/// set is loaded, `--load-only` included (it reported the pool it could not
/// open, and a run failed only after the load).
#[test]
fn a_pool_below_the_engine_minimum_is_refused_before_any_load() {
    for load_only in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let kind = ScenarioKind::Tpcc(tpcc::Args {
            tiny: true,
            load_only,
            ..tpcc::Args::default()
        });
        let args = CommonArgs {
            pool_pages: Some(1),
            data_dir: dir.path().to_path_buf(),
            no_progress: true,
            ..CommonArgs::default()
        };
        let e = kind
            .run(&kind.settings(&args).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--pool-pages") && e.contains("minimum"), "{e}");
        assert!(
            !dir.path().join("tpcc").exists(),
            "nothing was loaded (load_only {load_only})"
        );
    }
}

/// `--load-only` runs no terminal, so options that shape only the run are
/// refused, each named, before anything is loaded (they were accepted and
/// silently did nothing); the pool, I/O and output options stay allowed.
#[test]
fn load_only_refuses_the_options_of_a_run_naming_each_before_any_load() {
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        load_only: true,
        ..tpcc::Args::default()
    });
    let args = CommonArgs {
        duration: Some(3.0),
        evictor: Some(EvictorChoice::Clock),
        report_interval: Some(0.5),
        data_dir: dir.path().to_path_buf(),
        no_progress: true,
        ..CommonArgs::default()
    };
    let e = kind.settings(&args).unwrap_err().to_string();
    for name in [
        "--duration",
        "--evictor",
        "--report-interval",
        "--load-only",
    ] {
        assert!(e.contains(name), "{name} not named: {e}");
    }
    assert!(
        !e.contains("--threads"),
        "an option not given is named: {e}"
    );
    assert!(!dir.path().join("tpcc").exists(), "nothing was loaded");

    // The same through the command line, where the options are parsed.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "tpcc",
            "--tiny",
            "--load-only",
            "--warmup",
            "1",
            "--no-progress",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {stderr}");
    assert!(stderr.contains("--warmup"), "{stderr}");
    assert!(!dir.path().join("tpcc").exists(), "nothing was loaded");

    // Options a load uses are still accepted.
    let allowed = CommonArgs {
        pool_pages: Some(256),
        data_dir: dir.path().to_path_buf(),
        no_progress: true,
        ..CommonArgs::default()
    };
    kind.settings(&allowed).unwrap();
}

#[test]
fn tpcc_under_mrc_carries_the_pools_live_curve_and_prints_p99_9_per_type() {
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        ..tpcc::Args::default()
    });
    let args = CommonArgs {
        duration: Some(0.5),
        warmup: Some(0.2),
        evictor: Some(EvictorChoice::Clock),
        ring: Some(bench::common::Toggle::On),
        data_dir: dir.path().to_path_buf(),
        no_progress: true,
        mrc: true,
        json: Some(dir.path().join("t.json")),
        ..CommonArgs::default()
    };
    let settings = kind.settings(&args).unwrap();
    let report = kind.run(&settings).unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let text = report.render();
    assert!(text.contains("miss-ratio curve (--mrc)"), "{text}");
    let header = text
        .lines()
        .find(|l| l.starts_with("config") && l.contains("rollbacks") && l.contains("type"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(header.contains("p99.9"), "{header}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let c = &rows[0]["mrc"];
    assert_eq!(c["points"].as_array().map(Vec::len), Some(5), "{c}");
    assert!(c["sampled_accesses"].as_u64().unwrap() > 0, "{c}");
}
