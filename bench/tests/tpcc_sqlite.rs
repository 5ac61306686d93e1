//! TPC-C on SQLite at the tiny scale (`--features sqlite`): the loaded data
//! and a run pass every consistency condition, a New-Order naming the
//! unused item rolls back, and the CH queries give the same answers on
//! SQLite as on the engine, over the same loaded data and over a window
//! that selects part of it.

use bench::scenarios::versus::tpcc::analytic::{Answer, Query, Window};
use bench::scenarios::versus::tpcc::backend::{Backend, Outcome};
use bench::scenarios::versus::tpcc::driver::{Limit, drive, drive_with_analytics};
use bench::scenarios::versus::tpcc::engine_side::{EngineBackend, TERMINAL_ATTEMPTS};
use bench::scenarios::versus::tpcc::spec::{NewOrderInput, OrderLineInput, Scale, TxnKind};
use bench::scenarios::versus::tpcc::sqlite_side::SqliteBackend;
use engine::{Database, Options};

fn sqlite(dir: &tempfile::TempDir, scale: &Scale) -> SqliteBackend {
    let backend = SqliteBackend::new(&dir.path().join("tpcc.db"), 64 * 1024);
    backend.load(scale, &mut |_, _| {}).unwrap();
    backend
}

fn engine(scale: &Scale) -> EngineBackend {
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

fn answers(backend: &dyn Backend, w: &Window) -> Vec<Answer> {
    let mut a = backend.analyst().unwrap();
    Query::ALL.iter().map(|&q| a.run(q, w).unwrap()).collect()
}

#[test]
fn the_loaded_tiny_scale_on_sqlite_passes_every_consistency_condition() {
    let dir = tempfile::tempdir().unwrap();
    let scale = Scale::tiny();
    let report = sqlite(&dir, &scale).check(&scale).unwrap();
    assert!(report.passed(), "{}", report.describe());
    assert_eq!((report.warehouses, report.districts), (1, scale.districts));
}

#[test]
fn a_tiny_run_on_sqlite_runs_every_type_and_passes_every_consistency_condition() {
    let dir = tempfile::tempdir().unwrap();
    let scale = Scale::tiny().with_warehouses(2).unwrap();
    let backend = sqlite(&dir, &scale);
    let r = drive_with_analytics(&backend, &scale, 2, 1, Limit::Transactions(300), 9).unwrap();
    assert_eq!(r.total(), 600);
    for kind in TxnKind::ALL {
        assert!(r.of(kind).done > 0, "{kind:?} never ran: {:?}", r.counts);
    }
    assert!(r.analytic.total() >= 1);
    let report = backend.check(&scale).unwrap();
    assert!(report.passed(), "{}", report.describe());
    assert_eq!(report.warehouses, 2);
}

#[test]
fn a_new_order_naming_the_unused_item_rolls_back_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let scale = Scale::tiny();
    let backend = sqlite(&dir, &scale);
    let before = backend.consistency_state(&scale).unwrap();
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
    drop(t);
    assert_eq!(backend.consistency_state(&scale).unwrap(), before);
}

#[test]
fn the_ch_queries_give_the_same_answers_on_sqlite_and_the_engine_over_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let scale = Scale::tiny();
    let s = sqlite(&dir, &scale);
    let e = engine(&scale);
    // The loads stamp their own time: a window from the epoch to the end
    // of time sees both the same.
    let everything = Window::everything();
    let (sa, ea) = (answers(&s, &everything), answers(&e, &everything));
    assert_eq!(sa, ea);
    assert!(sa.iter().all(|a| match a {
        Answer::Q1(r) => r.len() == 15,
        Answer::Q4(r) => !r.is_empty(),
        Answer::Q6 { lines, .. } => *lines > 0,
        Answer::Q12(r) => !r.is_empty(),
    }));
    // An empty window: both find nothing.
    let none = Window { from: 0, to: 0 };
    let (sn, en) = (answers(&s, &none), answers(&e, &none));
    assert_eq!(sn, en);
    assert_eq!(
        sn[2],
        Answer::Q6 {
            revenue: 0,
            lines: 0
        }
    );
    assert_ne!(sn, sa);
}

#[test]
fn sqlite_and_the_engine_driven_with_one_seed_reach_the_same_consistency_figures_and_ch_answers() {
    let dir = tempfile::tempdir().unwrap();
    let scale = Scale::tiny();
    let s = sqlite(&dir, &scale);
    let e = engine(&scale);
    // One terminal each, the same seed: the same inputs in the same order,
    // so the same orders, deliveries and payments.
    let rs = drive(&s, &scale, 1, Limit::Transactions(200), 21).unwrap();
    let re = drive(&e, &scale, 1, Limit::Transactions(200), 21).unwrap();
    assert_eq!(
        rs.counts.keys().collect::<Vec<_>>(),
        re.counts.keys().collect::<Vec<_>>()
    );
    for kind in TxnKind::ALL {
        assert_eq!(
            (rs.of(kind).done, rs.of(kind).rolled_back),
            (re.of(kind).done, re.of(kind).rolled_back),
            "{kind:?}"
        );
    }
    assert_eq!(
        s.consistency_state(&scale).unwrap(),
        e.consistency_state(&scale).unwrap()
    );
    // Dates differ (each ran at its own time), so the CH answers that
    // compare dates with one another are checked over everything.
    assert_eq!(
        answers(&s, &Window::everything()),
        answers(&e, &Window::everything())
    );
}

#[test]
fn bench_tpcc_versus_sqlite_reports_both_databases_at_1_and_2_threads_every_check_passing() {
    use bench::common::{CommonArgs, EvictorChoice};
    use bench::scenarios::ScenarioKind;
    use bench::scenarios::versus::tpcc;
    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Tpcc(tpcc::Args {
        tiny: true,
        versus_sqlite: true,
        ..tpcc::Args::default()
    });
    let args = CommonArgs {
        duration: Some(0.5),
        warmup: Some(0.2),
        evictor: Some(EvictorChoice::Clock),
        data_dir: dir.path().to_path_buf(),
        no_progress: true,
        ..CommonArgs::default()
    };
    let mut settings = kind.settings(&args).unwrap();
    settings.json = Some(dir.path().join("t.json"));
    let report = kind.run(&settings).unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("t.json")).unwrap()).unwrap();
    assert!(json["rows"].as_array().unwrap().is_empty(), "no matrix");
    let rows = json["versus_sqlite"].as_array().unwrap();
    let cells: Vec<(String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["database"].as_str().unwrap().to_string(),
                r["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = [("engine", 1), ("sqlite", 1), ("engine", 2), ("sqlite", 2)]
        .iter()
        .map(|(d, t)| (d.to_string(), *t))
        .collect();
    assert_eq!(cells, expected);
    for r in rows {
        assert_eq!(r["check_passed"], true, "{r}");
        assert!(r["tpmc"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["kinds"].as_array().unwrap().len(), 5);
    }
    let text = report.render();
    assert!(text.contains("engine beside SQLite"), "{text}");
    assert!(text.contains("engine tpmC / SQLite tpmC"), "{text}");
}
