//! The CH queries on the engine at TPC-C's tiny scale: each answer equals a
//! direct computation over every row of ORDERS and ORDER-LINE (a nested
//! loop, no index), on the loaded data and after a run; a narrower window
//! selects fewer rows; analytic threads run beside the terminals without
//! breaking a consistency condition.

use std::collections::BTreeMap;

use bench::scenarios::versus::tpcc::analytic::{Answer, Q1Row, Q12Row, Query, Window};
use bench::scenarios::versus::tpcc::backend::Backend;
use bench::scenarios::versus::tpcc::driver::{Limit, drive, drive_with_analytics};
use bench::scenarios::versus::tpcc::engine_side::{EngineBackend, TERMINAL_ATTEMPTS, now_micros};
use bench::scenarios::versus::tpcc::spec::Scale;
use engine::{Database, Options, OwnedRow};

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

fn rows(backend: &EngineBackend, table: &str) -> Vec<OwnedRow> {
    let txn = backend.database().read().unwrap();
    let all = txn
        .scan(table)
        .unwrap()
        .map(|r| r.unwrap().1)
        .collect::<Vec<_>>();
    txn.commit().unwrap();
    all
}

struct Line {
    key: (i64, i64, i64),
    number: i64,
    quantity: i64,
    amount: i64,
    delivery: Option<i64>,
}

struct Order {
    key: (i64, i64, i64),
    entry: i64,
    carrier: Option<i64>,
    ol_cnt: i64,
}

fn data(backend: &EngineBackend) -> (Vec<Order>, Vec<Line>) {
    let orders = rows(backend, "orders")
        .iter()
        .map(|r| Order {
            key: (
                r.i64("o_w_id").unwrap(),
                r.i64("o_d_id").unwrap(),
                r.i64("o_id").unwrap(),
            ),
            entry: r.timestamp("o_entry_d").unwrap(),
            carrier: r.i64_opt("o_carrier_id").unwrap(),
            ol_cnt: r.i64("o_ol_cnt").unwrap(),
        })
        .collect();
    let lines = rows(backend, "order_line")
        .iter()
        .map(|r| Line {
            key: (
                r.i64("ol_w_id").unwrap(),
                r.i64("ol_d_id").unwrap(),
                r.i64("ol_o_id").unwrap(),
            ),
            number: r.i64("ol_number").unwrap(),
            quantity: r.i64("ol_quantity").unwrap(),
            amount: r.i64("ol_amount").unwrap(),
            delivery: r.timestamp_opt("ol_delivery_d").unwrap(),
        })
        .collect();
    (orders, lines)
}

/// Each query computed straight from the rows, as its SQL reads.
fn expected(query: Query, w: &Window, orders: &[Order], lines: &[Line]) -> Answer {
    match query {
        Query::Q1 => {
            let mut g: BTreeMap<i64, Q1Row> = BTreeMap::new();
            for l in lines
                .iter()
                .filter(|l| l.delivery.is_some_and(|t| t > w.from))
            {
                let r = g.entry(l.number).or_insert(Q1Row {
                    number: l.number,
                    sum_quantity: 0,
                    sum_amount: 0,
                    count: 0,
                });
                r.sum_quantity += l.quantity;
                r.sum_amount += l.amount;
                r.count += 1;
            }
            Answer::Q1(g.into_values().collect())
        }
        Query::Q4 => {
            let mut g: BTreeMap<i64, i64> = BTreeMap::new();
            for o in orders
                .iter()
                .filter(|o| o.entry >= w.from && o.entry < w.to)
            {
                if lines
                    .iter()
                    .any(|l| l.key == o.key && l.delivery.is_some_and(|t| t >= o.entry))
                {
                    *g.entry(o.ol_cnt).or_default() += 1;
                }
            }
            Answer::Q4(g.into_iter().collect())
        }
        Query::Q6 => {
            let hit = |l: &&Line| {
                l.delivery.is_some_and(|t| t >= w.from && t < w.to)
                    && (1..=100_000).contains(&l.quantity)
            };
            Answer::Q6 {
                revenue: lines.iter().filter(hit).map(|l| l.amount).sum(),
                lines: lines.iter().filter(hit).count() as i64,
            }
        }
        Query::Q12 => {
            let mut g: BTreeMap<i64, Q12Row> = BTreeMap::new();
            for o in orders {
                for l in lines.iter().filter(|l| l.key == o.key) {
                    if l.delivery.is_some_and(|t| o.entry <= t && t < w.to) {
                        let r = g.entry(o.ol_cnt).or_insert(Q12Row {
                            ol_cnt: o.ol_cnt,
                            high: 0,
                            low: 0,
                        });
                        match o.carrier {
                            Some(1 | 2) => r.high += 1,
                            Some(_) => r.low += 1,
                            None => {}
                        }
                    }
                }
            }
            Answer::Q12(g.into_values().collect())
        }
    }
}

fn assert_every_query_matches(backend: &EngineBackend, w: &Window) -> Vec<Answer> {
    let (orders, lines) = data(backend);
    let mut analyst = backend.analyst().unwrap();
    Query::ALL
        .iter()
        .map(|&q| {
            let got = analyst.run(q, w).unwrap();
            assert_eq!(got, expected(q, w, &orders, &lines), "{q:?} over {w:?}");
            got
        })
        .collect()
}

fn not_empty(a: &Answer) -> bool {
    match a {
        Answer::Q1(r) => !r.is_empty(),
        Answer::Q4(r) => !r.is_empty(),
        Answer::Q6 { lines, .. } => *lines > 0,
        Answer::Q12(r) => r.iter().any(|g| g.high > 0) && r.iter().any(|g| g.low > 0),
    }
}

#[test]
fn each_query_on_the_loaded_data_equals_the_direct_computation() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let answers = assert_every_query_matches(&backend, &Window::everything());
    for a in &answers {
        assert!(not_empty(a), "{:?} selected nothing: {a}", a.query());
    }
    // Q1 counts every delivered initial line once.
    let Answer::Q1(q1) = &answers[0] else {
        panic!("{:?}", answers[0])
    };
    let (_, lines) = data(&backend);
    let delivered = lines.iter().filter(|l| l.delivery.is_some()).count() as i64;
    assert_eq!(q1.iter().map(|r| r.count).sum::<i64>(), delivered);
}

#[test]
fn after_a_run_each_query_still_equals_the_direct_computation_and_a_later_window_selects_less() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let mid = now_micros();
    drive(&backend, &scale, 2, Limit::Transactions(300), 11).unwrap();
    let all = assert_every_query_matches(&backend, &Window::everything());
    let later = Window {
        from: mid,
        to: i64::MAX,
    };
    let since = assert_every_query_matches(&backend, &later);
    // Lines delivered during the run only, and orders entered during it.
    let count = |a: &Answer| match a {
        Answer::Q1(r) => r.iter().map(|g| g.count).sum::<i64>(),
        Answer::Q4(r) => r.iter().map(|g| g.1).sum(),
        Answer::Q6 { lines, .. } => *lines,
        Answer::Q12(r) => r.iter().map(|g| g.high + g.low).sum(),
    };
    for (a, s) in all.iter().zip(&since).take(3) {
        assert!(
            0 < count(s) && count(s) < count(a),
            "{:?}: {} of {}",
            a.query(),
            count(s),
            count(a)
        );
    }
}

#[test]
fn analytic_threads_run_every_query_beside_the_terminals_and_the_conditions_still_hold() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let r = drive_with_analytics(&backend, &scale, 2, 1, Limit::Transactions(400), 3).unwrap();
    assert_eq!(r.total(), 800);
    assert_eq!(r.analytic.threads, 1);
    assert!(r.analytic.total() >= 1);
    assert!(r.analytic.queries_per_hour() > 0.0);
    let ran = r.analytic.counts.keys().copied().collect::<Vec<_>>();
    for q in &ran {
        let s = r.analytic.summary(*q).expect("a query that ran has times");
        assert_eq!(s.count, r.analytic.counts[q]);
    }
    // The first query of the first analytic thread is Q1.
    assert!(ran.contains(&Query::Q1), "{ran:?}");
    let report = backend.check(&scale).unwrap();
    assert!(report.passed(), "{}", report.describe());
}

#[test]
fn a_run_without_analytic_threads_reports_no_queries() {
    let scale = Scale::tiny();
    let backend = loaded(&scale);
    let r = drive(&backend, &scale, 1, Limit::Transactions(50), 5).unwrap();
    assert_eq!(r.analytic.total(), 0);
    assert_eq!(r.analytic.threads, 0);
    assert!(r.analytic.summary(Query::Q1).is_none());
}
