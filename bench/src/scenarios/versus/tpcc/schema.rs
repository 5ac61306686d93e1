//! The nine TPC-C tables (clause 1.3), their primary keys, the secondary
//! indexes the transactions read through, and the initial population
//! (clause 4.3.3.1) as rows of [`engine::Value`]s, the same for every
//! backend: the population is drawn from seeds fixed per table, warehouse
//! and district, so two loads of one scale hold the same data (the load
//! time in the timestamp columns aside).
//!
//! Types: identifiers and counts are `I64`; money is `I64` in cents
//! ([`Cents`]); tax and discount rates are `F64`; dates are `Timestamp`;
//! everything else is `Text`.

use engine::{Column, ColumnType, Value};

use super::spec::{Cents, MAX_ORDER_LINES, MIN_ORDER_LINES, NuConstants, Scale, SpecRng};

/// A table: name, columns in the spec's order, primary key (none for
/// HISTORY, which the spec gives none).
#[derive(Clone, Debug)]
pub struct TableDef {
    pub name: &'static str,
    pub columns: Vec<Column>,
    pub primary_key: &'static [&'static str],
}

/// A secondary index.
#[derive(Clone, Debug)]
pub struct IndexDef {
    pub name: &'static str,
    pub table: &'static str,
    pub columns: &'static [&'static str],
    pub unique: bool,
}

pub const WAREHOUSE: &str = "warehouse";
pub const DISTRICT: &str = "district";
pub const CUSTOMER: &str = "customer";
pub const HISTORY: &str = "history";
pub const NEW_ORDER: &str = "new_order";
pub const ORDERS: &str = "orders";
pub const ORDER_LINE: &str = "order_line";
pub const ITEM: &str = "item";
pub const STOCK: &str = "stock";

/// The tables in load order.
pub const TABLES: [&str; 9] = [
    ITEM, WAREHOUSE, STOCK, DISTRICT, CUSTOMER, HISTORY, ORDERS, NEW_ORDER, ORDER_LINE,
];

/// Customers by name within a district (Payment and Order-Status by last
/// name, clause 2.5.2.2: sorted by C_FIRST).
pub const CUSTOMER_BY_NAME: &str = "customer_by_name";
/// A customer's orders (Order-Status reads the newest; clause 2.6.2.2).
pub const ORDERS_BY_CUSTOMER: &str = "orders_by_customer";

fn col(name: &str, ty: ColumnType) -> Column {
    Column::new(name, ty)
}

fn cols(names: &[&str], ty: ColumnType) -> Vec<Column> {
    names.iter().map(|n| col(n, ty)).collect()
}

/// The primary-key indexes the engine names after their tables (the
/// analytic queries read through them too).
pub const ORDERS_PKEY: &str = "orders_pkey";
pub const ORDER_LINE_PKEY: &str = "order_line_pkey";

/// The nine tables.
pub fn tables() -> Vec<TableDef> {
    use ColumnType::{F64, I64, Text, Timestamp};
    let address = |p: &str| {
        cols(
            &[
                &format!("{p}_street_1"),
                &format!("{p}_street_2"),
                &format!("{p}_city"),
                &format!("{p}_state"),
                &format!("{p}_zip"),
            ],
            Text,
        )
    };
    let mut warehouse = vec![col("w_id", I64), col("w_name", Text)];
    warehouse.extend(address("w"));
    warehouse.extend([col("w_tax", F64), col("w_ytd", I64)]);

    let mut district = vec![col("d_id", I64), col("d_w_id", I64), col("d_name", Text)];
    district.extend(address("d"));
    district.extend([
        col("d_tax", F64),
        col("d_ytd", I64),
        col("d_next_o_id", I64),
    ]);

    let mut customer = cols(&["c_id", "c_d_id", "c_w_id"], I64);
    customer.extend(cols(&["c_first", "c_middle", "c_last"], Text));
    customer.extend(address("c"));
    customer.extend([
        col("c_phone", Text),
        col("c_since", Timestamp),
        col("c_credit", Text),
        col("c_credit_lim", I64),
        col("c_discount", F64),
        col("c_balance", I64),
        col("c_ytd_payment", I64),
        col("c_payment_cnt", I64),
        col("c_delivery_cnt", I64),
        col("c_data", Text),
    ]);

    let mut history = cols(&["h_c_id", "h_c_d_id", "h_c_w_id", "h_d_id", "h_w_id"], I64);
    history.extend([
        col("h_date", Timestamp),
        col("h_amount", I64),
        col("h_data", Text),
    ]);

    let new_order = cols(&["no_o_id", "no_d_id", "no_w_id"], I64);

    let mut orders = cols(&["o_id", "o_d_id", "o_w_id", "o_c_id"], I64);
    orders.extend([
        col("o_entry_d", Timestamp),
        Column::nullable("o_carrier_id", I64),
        col("o_ol_cnt", I64),
        col("o_all_local", I64),
    ]);

    let mut order_line = cols(
        &[
            "ol_o_id",
            "ol_d_id",
            "ol_w_id",
            "ol_number",
            "ol_i_id",
            "ol_supply_w_id",
        ],
        I64,
    );
    order_line.extend([
        Column::nullable("ol_delivery_d", Timestamp),
        col("ol_quantity", I64),
        col("ol_amount", I64),
        col("ol_dist_info", Text),
    ]);

    let item = vec![
        col("i_id", I64),
        col("i_im_id", I64),
        col("i_name", Text),
        col("i_price", I64),
        col("i_data", Text),
    ];

    let mut stock = cols(&["s_i_id", "s_w_id", "s_quantity"], I64);
    stock.extend((1..=10).map(|d| col(&dist_column(d), Text)));
    stock.extend(cols(&["s_ytd", "s_order_cnt", "s_remote_cnt"], I64));
    stock.push(col("s_data", Text));

    vec![
        TableDef {
            name: ITEM,
            columns: item,
            primary_key: &["i_id"],
        },
        TableDef {
            name: WAREHOUSE,
            columns: warehouse,
            primary_key: &["w_id"],
        },
        TableDef {
            name: STOCK,
            columns: stock,
            primary_key: &["s_w_id", "s_i_id"],
        },
        TableDef {
            name: DISTRICT,
            columns: district,
            primary_key: &["d_w_id", "d_id"],
        },
        TableDef {
            name: CUSTOMER,
            columns: customer,
            primary_key: &["c_w_id", "c_d_id", "c_id"],
        },
        TableDef {
            name: HISTORY,
            columns: history,
            primary_key: &[],
        },
        TableDef {
            name: ORDERS,
            columns: orders,
            primary_key: &["o_w_id", "o_d_id", "o_id"],
        },
        TableDef {
            name: NEW_ORDER,
            columns: new_order,
            primary_key: &["no_w_id", "no_d_id", "no_o_id"],
        },
        TableDef {
            name: ORDER_LINE,
            columns: order_line,
            primary_key: &["ol_w_id", "ol_d_id", "ol_o_id", "ol_number"],
        },
    ]
}

/// The secondary indexes (clause 1.4.3 allows them).
pub fn indexes() -> Vec<IndexDef> {
    vec![
        IndexDef {
            name: CUSTOMER_BY_NAME,
            table: CUSTOMER,
            columns: &["c_w_id", "c_d_id", "c_last", "c_first"],
            unique: false,
        },
        IndexDef {
            name: ORDERS_BY_CUSTOMER,
            table: ORDERS,
            columns: &["o_w_id", "o_d_id", "o_c_id", "o_id"],
            unique: true,
        },
    ]
}

/// The name of STOCK's district-info column for district `d` (1..=10).
pub fn dist_column(d: u32) -> String {
    format!("s_dist_{d:02}")
}

/// Initial W_YTD (300,000.00) and D_YTD (30,000.00), in cents. The spec's
/// D_YTD is W_YTD / 10 for its 10 districts; at a reduced district count
/// each district holds 30,000.00 and the warehouse their sum, so
/// consistency condition 1 holds from the start.
pub const DISTRICT_YTD: Cents = 3_000_000;
/// Initial C_BALANCE (-10.00), C_YTD_PAYMENT and H_AMOUNT (10.00).
pub const CUSTOMER_BALANCE: Cents = -1_000;
pub const HISTORY_AMOUNT: Cents = 1_000;

/// The initial W_YTD of a warehouse at this scale.
pub fn warehouse_ytd(scale: &Scale) -> Cents {
    DISTRICT_YTD * i64::from(scale.districts)
}

fn seed(table: u64, w: u32, d: u32) -> u64 {
    super::spec::LOAD_SEED
        ^ (table << 56)
        ^ (u64::from(w) << 24)
        ^ u64::from(d).wrapping_mul(0x9e37_79b9)
}

fn load_rng(table: u64, w: u32, d: u32) -> SpecRng {
    SpecRng::new(seed(table, w, d), NuConstants::load())
}

fn int(v: u32) -> Value {
    Value::I64(i64::from(v))
}

fn text(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

fn address(r: &mut SpecRng) -> [Value; 5] {
    [
        text(r.astring(10, 20)),
        text(r.astring(10, 20)),
        text(r.astring(10, 20)),
        text(r.astring(2, 2)),
        text(r.zip()),
    ]
}

/// One initial order of a district, drawn once and used for ORDERS,
/// ORDER-LINE and NEW-ORDER alike.
struct InitialOrder {
    id: u32,
    customer: u32,
    carrier: Option<u32>,
    lines: u32,
}

fn initial_orders(scale: &Scale, w: u32, d: u32) -> Vec<InitialOrder> {
    let mut r = load_rng(7, w, d);
    let customers = r.permutation(scale.customers);
    let delivered_below = scale.first_new_order();
    customers
        .into_iter()
        .enumerate()
        .map(|(i, customer)| {
            let id = i as u32 + 1;
            InitialOrder {
                id,
                customer,
                carrier: (id < delivered_below).then(|| r.uniform(1, 10)),
                lines: r.uniform(MIN_ORDER_LINES, MAX_ORDER_LINES),
            }
        })
        .collect()
}

/// The initial rows of `table` at `scale`, in primary-key order, with
/// `now` (microseconds since the epoch) in the date columns. Unknown
/// table names yield `None`.
pub fn population(
    table: &str,
    scale: Scale,
    now: i64,
) -> Option<Box<dyn Iterator<Item = Vec<Value>> + Send>> {
    let ws = 1..=scale.warehouses;
    let districts = move |w: u32| (1..=scale.districts).map(move |d| (w, d));
    let now_v = Value::Timestamp(now);
    Some(match table {
        ITEM => {
            let mut r = load_rng(1, 0, 0);
            Box::new((1..=scale.items).map(move |i| {
                vec![
                    int(i),
                    int(r.uniform(1, 10_000)),
                    text(r.astring(14, 24)),
                    Value::I64(r.uniform_i64(100, 10_000)),
                    text(r.data_with_original()),
                ]
            }))
        }
        WAREHOUSE => Box::new(ws.map(move |w| {
            let mut r = load_rng(2, w, 0);
            let mut row = vec![int(w), text(r.astring(6, 10))];
            row.extend(address(&mut r));
            row.extend([
                Value::F64(r.rate(0, 2_000)),
                Value::I64(warehouse_ytd(&scale)),
            ]);
            row
        })),
        STOCK => Box::new(ws.flat_map(move |w| {
            let mut r = load_rng(3, w, 0);
            (1..=scale.items).map(move |i| {
                let mut row = vec![int(i), int(w), int(r.uniform(10, 100))];
                row.extend((0..10).map(|_| text(r.astring(24, 24))));
                row.extend([Value::I64(0), Value::I64(0), Value::I64(0)]);
                row.push(text(r.data_with_original()));
                row
            })
        })),
        DISTRICT => Box::new(ws.flat_map(districts).map(move |(w, d)| {
            let mut r = load_rng(4, w, d);
            let mut row = vec![int(d), int(w), text(r.astring(6, 10))];
            row.extend(address(&mut r));
            row.extend([
                Value::F64(r.rate(0, 2_000)),
                Value::I64(DISTRICT_YTD),
                int(scale.customers + 1),
            ]);
            row
        })),
        CUSTOMER => Box::new(ws.flat_map(districts).flat_map(move |(w, d)| {
            let mut r = load_rng(5, w, d);
            let now_v = now_v.clone();
            (1..=scale.customers).map(move |c| {
                let last = if c <= scale.last_names {
                    c - 1
                } else {
                    r.last_name_number(&scale)
                };
                let mut row = vec![
                    int(c),
                    int(d),
                    int(w),
                    text(r.astring(8, 16)),
                    text("OE"),
                    text(super::spec::last_name(last)),
                ];
                row.extend(address(&mut r));
                row.extend([
                    text(r.nstring(16, 16)),
                    now_v.clone(),
                    text(if r.percent(10) { "BC" } else { "GC" }),
                    Value::I64(5_000_000),
                    Value::F64(r.rate(0, 5_000)),
                    Value::I64(CUSTOMER_BALANCE),
                    Value::I64(-CUSTOMER_BALANCE),
                    Value::I64(1),
                    Value::I64(0),
                    text(r.astring(300, 500)),
                ]);
                row
            })
        })),
        HISTORY => Box::new(ws.flat_map(districts).flat_map(move |(w, d)| {
            let mut r = load_rng(6, w, d);
            let now_v = now_v.clone();
            (1..=scale.customers).map(move |c| {
                vec![
                    int(c),
                    int(d),
                    int(w),
                    int(d),
                    int(w),
                    now_v.clone(),
                    Value::I64(HISTORY_AMOUNT),
                    text(r.astring(12, 24)),
                ]
            })
        })),
        ORDERS => Box::new(ws.flat_map(districts).flat_map(move |(w, d)| {
            let now_v = now_v.clone();
            initial_orders(&scale, w, d).into_iter().map(move |o| {
                vec![
                    int(o.id),
                    int(d),
                    int(w),
                    int(o.customer),
                    now_v.clone(),
                    o.carrier.map_or(Value::Null, int),
                    int(o.lines),
                    Value::I64(1),
                ]
            })
        })),
        NEW_ORDER => Box::new(ws.flat_map(districts).flat_map(move |(w, d)| {
            (scale.first_new_order()..=scale.customers).map(move |o| vec![int(o), int(d), int(w)])
        })),
        ORDER_LINE => Box::new(ws.flat_map(districts).flat_map(move |(w, d)| {
            let mut r = load_rng(8, w, d);
            let now_v = now_v.clone();
            initial_orders(&scale, w, d).into_iter().flat_map(move |o| {
                let delivered = o.carrier.is_some();
                (1..=o.lines)
                    .map(|n| {
                        vec![
                            int(o.id),
                            int(d),
                            int(w),
                            int(n),
                            int(r.uniform(1, scale.items)),
                            int(w),
                            if delivered {
                                now_v.clone()
                            } else {
                                Value::Null
                            },
                            Value::I64(5),
                            Value::I64(if delivered {
                                0
                            } else {
                                r.uniform_i64(1, 999_999)
                            }),
                            text(r.astring(24, 24)),
                        ]
                    })
                    .collect::<Vec<_>>()
            })
        })),
        _ => return None,
    })
}

/// The rows `population` yields for `table` at `scale`.
pub fn population_rows(table: &str, scale: &Scale) -> Option<u64> {
    let w = u64::from(scale.warehouses);
    let per_district = u64::from(scale.customers) * w * u64::from(scale.districts);
    Some(match table {
        ITEM => u64::from(scale.items),
        WAREHOUSE => w,
        STOCK => u64::from(scale.items) * w,
        DISTRICT => w * u64::from(scale.districts),
        CUSTOMER | HISTORY | ORDERS => per_district,
        NEW_ORDER => u64::from(scale.new_orders) * w * u64::from(scale.districts),
        // Order lines vary per order (5 to 15): not known in advance.
        ORDER_LINE => return None,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column_of(table: &str, name: &str) -> usize {
        let t = tables().into_iter().find(|t| t.name == table).unwrap();
        t.columns.iter().position(|c| c.name == name).unwrap()
    }

    #[test]
    fn every_population_row_matches_its_table_s_columns() {
        let scale = Scale::tiny().with_warehouses(2).unwrap();
        for t in tables() {
            let rows: Vec<_> = population(t.name, scale, 0).unwrap().collect();
            assert!(!rows.is_empty(), "{}", t.name);
            if let Some(n) = population_rows(t.name, &scale) {
                assert_eq!(rows.len() as u64, n, "{}", t.name);
            }
            for row in &rows {
                assert_eq!(row.len(), t.columns.len(), "{}", t.name);
                for (v, c) in row.iter().zip(&t.columns) {
                    let ok = matches!(
                        (v, c.ty),
                        (Value::Null, _) if c.nullable
                    ) || matches!(
                        (v, c.ty),
                        (Value::I64(_), ColumnType::I64)
                            | (Value::F64(_), ColumnType::F64)
                            | (Value::Text(_), ColumnType::Text)
                            | (Value::Timestamp(_), ColumnType::Timestamp)
                    );
                    assert!(ok, "{}.{}: {v:?}", t.name, c.name);
                }
            }
            for k in t.primary_key {
                assert!(t.columns.iter().any(|c| c.name == *k), "{}: {k}", t.name);
            }
        }
        assert!(population("nope", scale, 0).is_none());
    }

    #[test]
    fn order_lines_agree_with_their_orders_line_counts() {
        let scale = Scale::tiny();
        let cnt = column_of(ORDERS, "o_ol_cnt");
        let orders: Vec<_> = population(ORDERS, scale, 0).unwrap().collect();
        let lines: Vec<_> = population(ORDER_LINE, scale, 0).unwrap().collect();
        let expected: i64 = orders.iter().map(|o| o[cnt].as_i64().unwrap()).sum();
        assert_eq!(lines.len() as i64, expected);
        // Undelivered orders have no carrier and no delivery date.
        let carrier = column_of(ORDERS, "o_carrier_id");
        let undelivered = orders.iter().filter(|o| o[carrier] == Value::Null).count();
        assert_eq!(
            undelivered as u32,
            scale.new_orders * scale.districts * scale.warehouses
        );
    }

    #[test]
    fn the_first_customers_of_a_district_carry_every_last_name_once() {
        let scale = Scale::tiny();
        let last = column_of(CUSTOMER, "c_last");
        let names: Vec<String> = population(CUSTOMER, scale, 0)
            .unwrap()
            .take(scale.last_names as usize)
            .map(|r| match &r[last] {
                Value::Text(s) => s.clone(),
                v => panic!("{v:?}"),
            })
            .collect();
        let expected: Vec<String> = (0..scale.last_names)
            .map(super::super::spec::last_name)
            .collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn two_loads_draw_the_same_rows() {
        let scale = Scale::tiny();
        for t in TABLES {
            let a: Vec<_> = population(t, scale, 5).unwrap().collect();
            let b: Vec<_> = population(t, scale, 5).unwrap().collect();
            assert_eq!(a, b, "{t}");
        }
    }
}
