//! The scenarios that keep no `--report-interval` series refuse the option,
//! naming the scenario and why, before they build or load anything (they
//! accepted it and did nothing); the others take it.

use bench::ScenarioKind;
use bench::common::CommonArgs;

fn with_interval(dir: &std::path::Path) -> CommonArgs {
    CommonArgs {
        report_interval: Some(0.5),
        data_dir: dir.to_path_buf(),
        no_progress: true,
        quick: true,
        ..CommonArgs::default()
    }
}

#[test]
fn hint_bits_compare_sqlite_and_tpcc_refuse_report_interval_naming_themselves_before_any_work() {
    for kind in [
        ScenarioKind::HintBits(Default::default()),
        ScenarioKind::CompareSqlite(Default::default()),
        ScenarioKind::Tpcc(Default::default()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        assert!(kind.interval_refusal().is_some(), "{}", kind.name());
        let settings = kind.settings(&with_interval(dir.path())).unwrap();
        let e = match kind.run(&settings) {
            Ok(_) => panic!("{} ran with --report-interval", kind.name()),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("--report-interval") && e.contains(kind.name()),
            "{}: {e}",
            kind.name()
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{} built {left:?}", kind.name());
    }
}

#[test]
fn every_other_scenario_keeps_the_series() {
    for kind in ScenarioKind::all() {
        let refuses = matches!(
            kind,
            ScenarioKind::HintBits(_) | ScenarioKind::CompareSqlite(_) | ScenarioKind::Tpcc(_)
        );
        assert_eq!(
            kind.interval_refusal().is_some(),
            refuses,
            "{}",
            kind.name()
        );
    }
}
