//! The end-of-run data check every scenario reports: one type, whatever a
//! scenario checks.
//!
//! A scenario fills the parts it checked and leaves the others empty:
//! `tables` (each table's rows counted by a scan and its indexes verified
//! against the heap: the engine scenarios), `blocks` (every block read back
//! through a fresh pool: `sweep`, `ticks`), `runs` and `tuples_per_run`
//! (every scan's tuples checked: `hint-bits`). The JSON leaves an empty part
//! out (`bench/doc/json.md`).
//!
//! Rules:
//! 1. `ok` is true only when something was checked and nothing was wrong:
//!    a new check is not ok until a part is recorded ([`DataCheck::add`],
//!    [`DataCheck::blocks`], [`DataCheck::scans`]) with no error.
//! 2. `error` holds every failure found, in the order found, joined by
//!    "; " (one per table, row count and index violations each).

use engine::IndexViolation;
use serde::{Deserialize, Serialize};

/// One table's end-of-run check: its rows counted by a scan, its indexes
/// verified against the heap (`verify_indexes`; `tables::check_table`,
/// `dataset::check`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCheck {
    pub table: String,
    /// The rows it must hold; `None` where the scenario has no count to
    /// expect (only its indexes are checked).
    pub rows_expected: Option<u64>,
    pub rows_found: u64,
    pub index_violations: usize,
    pub first_violation: Option<String>,
}

impl TableCheck {
    /// `table`'s check from the rows a scan found and what
    /// `verify_indexes` reported.
    pub fn new(
        table: &str,
        rows_expected: Option<u64>,
        rows_found: u64,
        violations: &[IndexViolation],
    ) -> TableCheck {
        TableCheck {
            table: table.into(),
            rows_expected,
            rows_found,
            index_violations: violations.len(),
            first_violation: violations.first().map(|v| v.to_string()),
        }
    }

    /// What is wrong with the table: a row count off, index violations
    /// (both when both are), or `None`.
    pub fn error(&self) -> Option<String> {
        let mut errors = Vec::new();
        if let Some(e) = self.rows_expected
            && e != self.rows_found
        {
            errors.push(format!(
                "{} has {} rows, expected {e}",
                self.table, self.rows_found
            ));
        }
        if let Some(v) = &self.first_violation {
            errors.push(format!(
                "{}: {} index violations, first: {v}",
                self.table, self.index_violations
            ));
        }
        (!errors.is_empty()).then(|| errors.join("; "))
    }
}

/// The end-of-run check of a run's data (module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataCheck {
    /// The tables counted and verified, in the order checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<TableCheck>,
    /// Blocks read back and verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u64>,
    /// Scans whose tuples were checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u64>,
    /// The tuples each of those scans had to see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuples_per_run: Option<u64>,
    /// Something was checked and nothing was wrong (rule 1).
    pub ok: bool,
    /// Every failure found, joined by "; " (rule 2).
    pub error: Option<String>,
}

impl DataCheck {
    /// Nothing checked yet (not ok).
    pub fn new() -> DataCheck {
        DataCheck::default()
    }

    /// `blocks` blocks read back; `failure`, what was wrong, if anything.
    pub fn blocks(blocks: u64, failure: Option<String>) -> DataCheck {
        let mut c = DataCheck {
            blocks: Some(blocks),
            ..DataCheck::default()
        };
        c.settle(failure);
        c
    }

    /// `runs` scans of `tuples_per_run` tuples each checked; `failure`,
    /// what was wrong, if anything.
    pub fn scans(runs: u64, tuples_per_run: u64, failure: Option<String>) -> DataCheck {
        let mut c = DataCheck {
            runs: Some(runs),
            tuples_per_run: Some(tuples_per_run),
            ..DataCheck::default()
        };
        c.settle(failure);
        c
    }

    /// Record a table's check.
    pub fn add(&mut self, c: TableCheck) {
        let failure = c.error();
        self.tables.push(c);
        self.settle(failure);
    }

    /// Record a failure found outside the parts (a sum that does not add
    /// up, a check that could not run).
    pub fn fail(&mut self, e: String) {
        self.settle(Some(e));
    }

    /// The scans checked and the tuples each saw, when the check is ok and
    /// checked scans (for a scenario that words what its scans verified).
    pub fn ok_scans(&self) -> Option<(u64, u64)> {
        match (self.ok, self.runs, self.tuples_per_run) {
            (true, Some(r), Some(t)) => Some((r, t)),
            _ => None,
        }
    }

    /// Whether nothing has been found wrong so far (a check with no part
    /// recorded yet included).
    pub fn clean(&self) -> bool {
        self.error.is_none()
    }

    /// Every failure found, one entry per check (empty when none).
    pub fn failures(&self) -> Vec<String> {
        self.error.iter().cloned().collect()
    }

    fn settle(&mut self, failure: Option<String>) {
        if let Some(f) = failure {
            self.error = Some(match self.error.take() {
                Some(e) => format!("{e}; {f}"),
                None => f,
            });
        }
        self.ok = self.error.is_none();
    }

    /// The report's line: what was checked, or `FAILED` and what was wrong.
    pub fn render(&self) -> String {
        if !self.ok {
            return format!(
                "data check: FAILED: {}\n",
                self.error.as_deref().unwrap_or("nothing was checked")
            );
        }
        let mut parts = Vec::new();
        if let Some(b) = self.blocks {
            parts.push(format!("{b} blocks read back and verified"));
        }
        if let (Some(r), Some(t)) = (self.runs, self.tuples_per_run) {
            parts.push(format!("{r} scans each saw {t} tuples"));
        }
        if !self.tables.is_empty() {
            let t: Vec<String> = self
                .tables
                .iter()
                .map(|c| format!("{} {} rows", c.table, c.rows_found))
                .collect();
            parts.push(format!("{}; indexes verified clean", t.join(", ")));
        }
        format!("data check: ok ({})\n", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str, expected: Option<u64>, found: u64) -> TableCheck {
        TableCheck::new(name, expected, found, &[])
    }

    #[test]
    fn a_new_check_is_not_ok_until_a_part_is_recorded() {
        let mut c = DataCheck::new();
        assert!(!c.ok);
        assert!(c.clean());
        assert_eq!(c.render(), "data check: FAILED: nothing was checked\n");
        c.add(table("t", Some(5), 5));
        assert!(c.ok);
        assert_eq!(
            c.render(),
            "data check: ok (t 5 rows; indexes verified clean)\n"
        );
    }

    #[test]
    fn every_failure_is_kept_in_the_order_found() {
        let mut c = DataCheck::new();
        c.add(table("a", Some(3), 2));
        c.add(table("b", None, 9));
        c.fail("sums differ".into());
        assert!(!c.ok);
        assert_eq!(
            c.error.as_deref(),
            Some("a has 2 rows, expected 3; sums differ")
        );
        assert_eq!(c.failures().len(), 1);
        assert!(c.render().starts_with("data check: FAILED: a has 2 rows"));
    }

    #[test]
    fn a_table_with_no_count_to_expect_passes_and_one_with_both_faults_names_both() {
        assert_eq!(table("h", None, 7).error(), None);
        let mut t = table("h", Some(1), 7);
        t.index_violations = 2;
        t.first_violation = Some("heap row (0,1) missing from h_pkey".into());
        assert_eq!(
            t.error().as_deref(),
            Some(
                "h has 7 rows, expected 1; h: 2 index violations, first: heap row (0,1) \
                 missing from h_pkey"
            )
        );
    }

    #[test]
    fn the_json_leaves_out_the_parts_not_checked() {
        let blocks = serde_json::to_value(DataCheck::blocks(12, None)).unwrap();
        assert_eq!(
            blocks,
            serde_json::json!({ "blocks": 12, "ok": true, "error": null })
        );
        let scans = serde_json::to_value(DataCheck::scans(4, 100, Some("bad".into()))).unwrap();
        assert_eq!(
            scans,
            serde_json::json!({ "runs": 4, "tuples_per_run": 100, "ok": false, "error": "bad" })
        );
        let mut c = DataCheck::new();
        c.add(table("t", Some(1), 1));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["tables"][0]["rows_found"], 1);
        assert_eq!(v["tables"][0]["rows_expected"], 1);
        assert!(v.get("blocks").is_none() && v.get("runs").is_none());
        let back: DataCheck = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }
}
