//! TPC-C consistency conditions 1 to 4 (clause 3.3.2), evaluated over the
//! numbers a backend read ([`WarehouseState`]):
//!
//! 1. W_YTD = sum(D_YTD) of the warehouse's districts;
//! 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) of the district;
//! 3. count(NEW-ORDER rows) = max(NO_O_ID) - min(NO_O_ID) + 1 per district;
//! 4. sum(O_OL_CNT) = count(ORDER-LINE rows) per district.
//!
//! A failure names the condition, the warehouse and district, and the
//! values that disagree.

use std::fmt;

use super::spec::{Cents, Scale};

/// A district's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DistrictState {
    pub district: u32,
    pub ytd: Cents,
    pub next_order_id: i64,
    /// max(O_ID), `None` without orders.
    pub max_order_id: Option<i64>,
    /// max and min NO_O_ID and the NEW-ORDER rows, `None` / 0 without any.
    pub max_new_order_id: Option<i64>,
    pub min_new_order_id: Option<i64>,
    pub new_orders: i64,
    /// sum(O_OL_CNT) and count(ORDER-LINE rows).
    pub order_line_count_sum: i64,
    pub order_lines: i64,
}

/// A warehouse's figures and its districts'.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WarehouseState {
    pub warehouse: u32,
    pub ytd: Cents,
    pub districts: Vec<DistrictState>,
}

/// One condition that did not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// 1 to 4.
    pub condition: u8,
    pub warehouse: u32,
    /// `None` for condition 1 (a warehouse-wide sum).
    pub district: Option<u32>,
    /// What was compared, with the values.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "condition {} fails for warehouse {}",
            self.condition, self.warehouse
        )?;
        if let Some(d) = self.district {
            write!(f, " district {d}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// What the check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub warehouses: u32,
    pub districts: u32,
    pub violations: Vec<Violation>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// Whether condition `n` failed anywhere.
    pub fn failed(&self, n: u8) -> bool {
        self.violations.iter().any(|v| v.condition == n)
    }

    /// Every failure on a line of its own, for an error message.
    pub fn describe(&self) -> String {
        if self.passed() {
            return format!(
                "conditions 1-4 hold for {} warehouses, {} districts",
                self.warehouses, self.districts
            );
        }
        self.violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "none".into(), |v| v.to_string())
}

/// Conditions 1 to 4 over `state`; a warehouse or district of `scale`
/// missing from it is a violation of the condition that needs it.
pub fn evaluate(scale: &Scale, state: &[WarehouseState]) -> CheckReport {
    let mut r = CheckReport::default();
    for w in 1..=scale.warehouses {
        let Some(ws) = state.iter().find(|s| s.warehouse == w) else {
            r.violations.push(Violation {
                condition: 1,
                warehouse: w,
                district: None,
                detail: "the warehouse row is missing".into(),
            });
            continue;
        };
        r.warehouses += 1;
        let sum: Cents = ws.districts.iter().map(|d| d.ytd).sum();
        if ws.districts.len() != scale.districts as usize {
            r.violations.push(Violation {
                condition: 1,
                warehouse: w,
                district: None,
                detail: format!(
                    "{} district rows, {} expected",
                    ws.districts.len(),
                    scale.districts
                ),
            });
        }
        if ws.ytd != sum {
            r.violations.push(Violation {
                condition: 1,
                warehouse: w,
                district: None,
                detail: format!("W_YTD {} != sum(D_YTD) {sum} (cents)", ws.ytd),
            });
        }
        for d in &ws.districts {
            r.districts += 1;
            let at = |condition, detail| Violation {
                condition,
                warehouse: w,
                district: Some(d.district),
                detail,
            };
            let last = d.next_order_id - 1;
            let c2 = Some(last) == d.max_order_id && d.max_new_order_id.is_none_or(|m| m == last);
            if !c2 {
                r.violations.push(at(
                    2,
                    format!(
                        "D_NEXT_O_ID - 1 = {last}, max(O_ID) = {}, max(NO_O_ID) = {}",
                        opt(d.max_order_id),
                        opt(d.max_new_order_id)
                    ),
                ));
            }
            let span = match (d.max_new_order_id, d.min_new_order_id) {
                (Some(max), Some(min)) => max - min + 1,
                _ => 0,
            };
            if d.new_orders != span {
                r.violations.push(at(
                    3,
                    format!(
                        "{} NEW-ORDER rows, max(NO_O_ID) - min(NO_O_ID) + 1 = {span} \
                         (max {}, min {})",
                        d.new_orders,
                        opt(d.max_new_order_id),
                        opt(d.min_new_order_id)
                    ),
                ));
            }
            if d.order_line_count_sum != d.order_lines {
                r.violations.push(at(
                    4,
                    format!(
                        "sum(O_OL_CNT) = {}, ORDER-LINE rows = {}",
                        d.order_line_count_sum, d.order_lines
                    ),
                ));
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good(scale: &Scale) -> Vec<WarehouseState> {
        (1..=scale.warehouses)
            .map(|w| WarehouseState {
                warehouse: w,
                ytd: 300 * i64::from(scale.districts),
                districts: (1..=scale.districts)
                    .map(|d| DistrictState {
                        district: d,
                        ytd: 300,
                        next_order_id: 11,
                        max_order_id: Some(10),
                        max_new_order_id: Some(10),
                        min_new_order_id: Some(8),
                        new_orders: 3,
                        order_line_count_sum: 50,
                        order_lines: 50,
                    })
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn consistent_figures_pass_every_condition() {
        let scale = Scale::tiny().with_warehouses(2).unwrap();
        let r = evaluate(&scale, &good(&scale));
        assert!(r.passed(), "{}", r.describe());
        assert_eq!((r.warehouses, r.districts), (2, 4));
    }

    #[test]
    fn each_broken_figure_fails_its_own_condition_and_names_where() {
        let scale = Scale::tiny();
        type Break = fn(&mut WarehouseState);
        let cases: [(u8, Break); 5] = [
            (1, |w| w.ytd += 1),
            (2, |w| w.districts[1].next_order_id = 12),
            (2, |w| w.districts[1].max_new_order_id = Some(9)),
            (3, |w| w.districts[1].new_orders = 2),
            (4, |w| w.districts[1].order_lines = 49),
        ];
        for (condition, breaks) in cases {
            let mut s = good(&scale);
            breaks(&mut s[0]);
            let r = evaluate(&scale, &s);
            assert!(r.failed(condition), "{condition}: {}", r.describe());
            let v = &r.violations[0];
            assert_eq!(v.warehouse, 1);
            if condition > 1 {
                assert_eq!(v.district, Some(2));
                assert!(r.describe().contains("district 2"), "{}", r.describe());
            }
        }
    }

    #[test]
    fn a_district_without_new_orders_passes_conditions_2_and_3() {
        let scale = Scale::tiny();
        let mut s = good(&scale);
        let d = &mut s[0].districts[0];
        (d.max_new_order_id, d.min_new_order_id, d.new_orders) = (None, None, 0);
        assert!(evaluate(&scale, &s).passed());
    }

    #[test]
    fn a_missing_warehouse_or_district_is_a_failure_not_a_pass() {
        let scale = Scale::tiny().with_warehouses(2).unwrap();
        let mut s = good(&scale);
        s.pop();
        assert!(evaluate(&scale, &s).failed(1));
        let mut s = good(&scale);
        s[0].districts.pop();
        s[0].ytd -= 300;
        assert!(evaluate(&scale, &s).failed(1));
    }
}
