//! TPC-C at a tiny scale (one warehouse, reduced cardinalities): every
//! transaction type runs, the consistency conditions hold after a run and
//! after a crash, and a broken Delivery fails condition 3.

use bench::scenarios::versus::tpcc::backend::{Backend, Outcome};
use bench::scenarios::versus::tpcc::driver::{Limit, drive};
use bench::scenarios::versus::tpcc::engine_side::{DeliveryFault, EngineBackend};
use bench::scenarios::versus::tpcc::spec::{
    DeliveryInput, NewOrderInput, OrderLineInput, Scale, TxnKind,
};
use engine::{Database, Options, Value};

fn loaded(scale: &Scale) -> EngineBackend {
    let db = Database::open_temporary(Options::new().pool_buffers(512)).unwrap();
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
    let db = Database::open_temporary(Options::new().pool_buffers(512)).unwrap();
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
