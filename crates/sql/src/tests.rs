//! The privacy properties of DP SQL, tested on small tables with many rows per unit: every
//! released part moves by at most its calibrated sensitivity between neighbouring databases
//! (one unit's rows removed from every table; noise switched off here only), noise is drawn
//! once per released part, a result is materialised once, and refusals name their construct.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use dpml_data::table_decl::TableDecl;
use dpml_mechanisms::DpRng;

use crate::calibrate::{FINE_GRID_BITS, Part};
use crate::contribute::Totals;
use crate::engine::{Engine, Request};
use crate::error::SqlError;
use crate::release::Noise;
use crate::rowid::KeyedHash;

mod refusals;
mod release_once;

/// A database of CSV files in a temporary folder.
pub(crate) struct Db {
    _dir: tempfile::TempDir,
    pub tables: Vec<(String, PathBuf)>,
    pub decls: BTreeMap<String, TableDecl>,
}

pub(crate) fn db(tables: &[(&str, String)], schema: &str) -> Db {
    let dir = tempfile::tempdir().unwrap();
    let tables = tables
        .iter()
        .map(|(name, csv)| {
            let path = dir.path().join(format!("{name}.csv"));
            std::fs::write(&path, csv).unwrap();
            (name.to_string(), path)
        })
        .collect();
    Db {
        _dir: dir,
        tables,
        decls: decls(schema),
    }
}

/// The tables of a schema file's TOML text.
pub(crate) fn decls(schema: &str) -> BTreeMap<String, TableDecl> {
    #[derive(serde::Deserialize)]
    struct File {
        tables: BTreeMap<String, TableDecl>,
    }
    toml::from_str::<File>(schema).unwrap().tables
}

impl Db {
    pub(crate) fn engine(&self) -> Engine {
        Engine::new(&self.decls, &self.tables).unwrap()
    }

    /// Appends `bytes` (whole rows) to table `name`'s file.
    pub(crate) fn append(&self, name: &str, bytes: &[u8]) {
        let (_, path) = self.tables.iter().find(|(n, _)| n == name).unwrap();
        let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        std::io::Write::write_all(&mut file, bytes).unwrap();
    }
}

pub(crate) fn request(epsilon: f64, delta: f64) -> Request {
    Request {
        epsilon,
        delta,
        ..Request::default()
    }
}

/// A query answered with the noise switched off.
pub(crate) fn exact(engine: &Engine, sql: &str, delta: f64) -> crate::DpResult {
    let mut rng = DpRng::seeded(1);
    let mut noise = Noise::new(&mut rng);
    noise.off = true;
    engine
        .run_with(sql, &request(1.0, delta), &mut noise, None)
        .unwrap()
}

/// Column `n` of the first row `sql` releases with the noise off.
fn exact_n(engine: &Engine, sql: &str) -> serde_json::Value {
    exact(engine, sql, 0.0).rows_json().unwrap()[0]["n"].clone()
}

/// A shop: customers (the unit), their orders, the orders' items (unit through the order),
/// and a public table of item flags. Customer 7 is heavy (many orders and items).
pub(crate) const SHOP_SCHEMA: &str = r#"
[tables.customers]
privacy_unit = "cust_id"
[[tables.customers.columns]]
name = "cust_id"
type = "integer"
[[tables.customers.columns]]
name = "segment"
keys = ["a", "b", "c"]

[tables.orders]
max_groups_per_unit = 2
max_rows_per_unit_per_group = 3
[[tables.orders.columns]]
name = "order_id"
type = "integer"
[[tables.orders.columns]]
name = "o_cust"
references = "customers.cust_id"
type = "integer"
[[tables.orders.columns]]
name = "total"
bounds = [0, 500]
type = "integer"
[[tables.orders.columns]]
name = "priority"
keys = ["hi", "lo"]

[tables.items]
max_groups_per_unit = 2
max_rows_per_unit_per_group = 4
[[tables.items.columns]]
name = "i_order"
references = "orders.order_id"
type = "integer"
[[tables.items.columns]]
name = "price"
type = "real"
[[tables.items.columns]]
name = "qty"
bounds = [1, 10]
type = "integer"
[[tables.items.columns]]
name = "flag"
keys = ["x", "y"]

[tables.flags]
public = true
"#;

/// How many orders customer `c` of the shop has.
fn shop_orders(c: u64) -> u64 {
    if c == 7 { 9 } else { c % 4 }
}

/// The shop without customer `without` (all of its rows, in every table).
pub(crate) fn shop(without: Option<u64>) -> Db {
    let (mut customers, mut orders, mut items) = (
        "cust_id,segment\n".to_string(),
        "order_id,o_cust,total,priority\n".to_string(),
        "i_order,qty,flag,price\n".to_string(),
    );
    let mut order_id = 100u64;
    for c in 0..12u64 {
        let keep = Some(c) != without;
        if keep {
            let _ = writeln!(customers, "{c},{}", ["a", "b", "c"][(c % 3) as usize]);
        }
        let n_orders = shop_orders(c);
        for o in 0..n_orders {
            order_id += 1;
            let total = (c * 97 + o * 131) % 700; // some above the bound 500
            let priority = if (c + o) % 3 == 0 { "hi" } else { "lo" };
            if keep {
                let _ = writeln!(orders, "{order_id},{c},{total},{priority}");
            }
            for i in 0..(1 + (c + o) % 5) {
                let qty = 1 + (c * 3 + o + i) % 14; // some above the bound 10
                let flag = ["x", "y", "z"][((c + i) % 3) as usize];
                if keep {
                    let _ = writeln!(items, "{order_id},{qty},{flag},{}", 10 + i);
                }
            }
        }
    }
    let flags = "flag,label\nx,Express\ny,Standard\nz,Other\n".to_string();
    db(
        &[
            ("customers", customers),
            ("orders", orders),
            ("items", items),
            ("flags", flags),
        ],
        SHOP_SCHEMA,
    )
}

/// The exact bounded totals of every aggregate, and its parts and selection, under one key.
type Bounds = Vec<(u64, Option<u64>)>;

fn totals(db: &Db, sql: &str, delta: f64) -> (Vec<Totals>, Vec<Vec<Part>>, Bounds) {
    totals_by(db, sql, delta, true, false)
}

/// [`totals`], pre-aggregated in DataFusion where possible or bounded row by row; with
/// `sorted`, under a memory limit (the rows sorted by unit, bounded one unit at a time).
fn totals_by(
    db: &Db,
    sql: &str,
    delta: f64,
    pre_aggregate: bool,
    sorted: bool,
) -> (Vec<Totals>, Vec<Vec<Part>>, Bounds) {
    let engine = match sorted {
        false => db.engine(),
        true => {
            let limits = crate::memory::Limits {
                memory: Some(1 << 30),
                spill_dir: None,
            };
            Engine::with_limits(&db.decls, &db.tables, limits).unwrap()
        }
    };
    let key = KeyedHash::draw(&mut DpRng::seeded(42));
    let prepared = engine.prepare(sql, &request(1.0, delta), key).unwrap();
    let totals = (0..prepared.aggregates.len())
        .map(|i| {
            engine
                .aggregate_totals(&prepared, i, key, pre_aggregate)
                .unwrap()
        })
        .collect();
    let parts = prepared
        .calibration
        .aggregates
        .iter()
        .map(|a| a.measures.iter().flat_map(|m| m.parts.clone()).collect())
        .collect();
    let bounds = prepared
        .calibration
        .aggregates
        .iter()
        .zip(&prepared.aggregates)
        .map(|(c, a)| (c.max_groups, a.max_rows))
        .collect();
    (totals, parts, bounds)
}

/// The change of one part between two totals, in the units its noise is calibrated to (the
/// noise grid for sums), summed over groups; and the number of groups that changed.
fn change(a: &Totals, b: &Totals, k: usize, part: &Part) -> (u128, usize) {
    let keys: BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    let empty = crate::contribute::GroupTotals::empty(&vec![part.clone(); k + 1]);
    let mut l1 = 0u128;
    let mut groups = 0;
    for key in keys {
        let (x, y) = (a.get(key).unwrap_or(&empty), b.get(key).unwrap_or(&empty));
        let d = match part {
            Part::Count { .. } => (x.totals[k] - y.totals[k]).unsigned_abs(),
            Part::Sum { .. } => {
                let grid =
                    |t: i128| (t + (1 << (FINE_GRID_BITS - 1))).div_euclid(1 << FINE_GRID_BITS);
                (grid(x.totals[k]) - grid(y.totals[k])).unsigned_abs()
            }
            Part::Quantile { .. } => x.histograms[k]
                .iter()
                .zip(&y.histograms[k])
                .map(|(p, q)| u128::from(p.abs_diff(*q)))
                .sum(),
        };
        l1 += d;
        groups += usize::from(d > 0);
    }
    (l1, groups)
}

/// For each unit: removing its rows changes every part of every released cell by at most the
/// sensitivity its noise is calibrated to, and the key selection's unit counts by at most L0.
/// Returns the largest change seen relative to the bound (so a test can check it is reached).
fn check_neighbours(make: &dyn Fn(Option<u64>) -> Db, units: &[u64], sql: &str, delta: f64) -> f64 {
    let (full, parts, selection) = totals(&make(None), sql, delta);
    let mut worst: f64 = 0.0;
    for &u in units {
        let (without, _, _) = totals(&make(Some(u)), sql, delta);
        for (a, (t_full, t_without)) in full.iter().zip(&without).enumerate() {
            for (k, part) in parts[a].iter().enumerate() {
                let (l1, groups) = change(t_full, t_without, k, part);
                let (bound, what) = match part {
                    Part::Count { mech, .. } | Part::Sum { mech, .. } => {
                        (u128::from(mech.sensitivity()), "noise sensitivity")
                    }
                    Part::Quantile { .. } => (
                        u128::from(selection[a].0 * selection[a].1.unwrap_or(1)),
                        "values kept (L0·L∞)",
                    ),
                };
                assert!(
                    l1 <= bound,
                    "{sql}: removing unit {u} moved part {k} by {l1} > {what} {bound}"
                );
                assert!(
                    groups as u64 <= selection[a].0,
                    "more than L0 groups changed"
                );
                worst = worst.max(l1 as f64 / bound as f64);
            }
            let units_l1: u64 = t_full
                .keys()
                .chain(t_without.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|key| {
                    let x = t_full.get(key).map_or(0, |t| t.units);
                    let y = t_without.get(key).map_or(0, |t| t.units);
                    x.abs_diff(y)
                })
                .sum();
            assert!(
                units_l1 <= selection[a].0,
                "{sql}: removing unit {u} moved the unit counts by {units_l1} > L0"
            );
        }
    }
    worst
}

const UNITS: [u64; 6] = [0, 3, 5, 7, 10, 11];

#[test]
fn sensitivity_holds_for_each_aggregate_on_one_table() {
    let worst = check_neighbours(
        &shop,
        &UNITS,
        "SELECT priority, COUNT(*), COUNT(total), SUM(total), AVG(total), VARIANCE(total), \
         STDDEV(total), MEDIAN(total), COUNT(DISTINCT o_cust), SUM(COALESCE(total, 0)), \
         COUNT(DISTINCT o_cust) FILTER (WHERE total > 100) FROM orders GROUP BY priority",
        0.0,
    );
    // The heavy customer reaches a bound: the check is not vacuous.
    assert!(worst > 0.5, "worst relative change {worst}");
}

/// Rows whose unit is NULL belong to no unit: adding one changes no released cell, also where
/// a query tests other rows against it (`NOT EXISTS`; `NOT IN` is refused).
#[test]
fn a_row_without_a_unit_changes_nothing() {
    let with_null = shop(None);
    with_null.append("orders", b"999,,50,hi\n");
    for sql in [
        "SELECT priority, COUNT(*), SUM(total) FROM orders GROUP BY priority",
        "SELECT priority, COUNT(*), SUM(total) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM \
         orders p WHERE p.o_cust = o.o_cust AND p.priority = 'hi') GROUP BY priority",
    ] {
        let (plain, _, _) = totals(&shop(None), sql, 0.0);
        let (nulled, _, _) = totals(&with_null, sql, 0.0);
        assert!(plain == nulled, "{sql}: a row without a unit moved a cell");
    }
    let refused = with_null
        .engine()
        .explain(
            "SELECT COUNT(*) FROM orders WHERE o_cust NOT IN (SELECT o_cust FROM orders WHERE \
             priority = 'hi')",
            &request(1.0, 0.0),
        )
        .unwrap_err();
    assert!(matches!(refused, SqlError::Refused { .. }), "{refused}");
}

#[test]
fn a_malformed_row_fails_no_query() {
    // One unit's row that does not fit the declared types, first or last in the file: a value
    // that is not a number, a row too wide, one too short, bytes that are not UTF-8. Its
    // presence is a neighbouring database, and must move the totals within the sensitivity,
    // not fail the query nor have it refused (either is an exact answer). Types told from the
    // first rows would make x text and refuse SUM(x) when the row is there: a private CSV
    // table's types come from the schema alone.
    let schema = r#"
[tables.t]
privacy_unit = "u"
max_rows_per_unit_per_group = 2
[[tables.t.columns]]
name = "x"
bounds = [0, 100]
[[tables.t.columns]]
name = "g"
keys = [1, 2]
"#;
    let mut clean = String::new();
    for i in 0..1500u64 {
        let _ = writeln!(clean, "{},{},{}", i % 400, 1 + i % 2, i % 97);
    }
    let bad_rows: [&[u8]; 4] = [
        b"5000,1,abc\n",
        b"5000,2,7,extra\n",
        b"5000\n",
        b"5000,\xff,7\n",
    ];
    for bad in bad_rows {
        for first in [true, false] {
            let make = |without: Option<u64>| {
                let d = db(&[("t", "u,g,x\n".to_string())], schema);
                let bad = if without.is_none() { bad } else { b"" };
                let (a, b) = if first {
                    (bad, clean.as_bytes())
                } else {
                    (clean.as_bytes(), bad)
                };
                d.append("t", a);
                d.append("t", b);
                d
            };
            check_neighbours(
                &make,
                &[5000],
                "SELECT g, COUNT(*), SUM(x), AVG(x) FROM t WHERE x < 50 GROUP BY g",
                0.0,
            );
        }
    }
}

#[test]
fn sensitivity_holds_along_foreign_keys() {
    // The unit joined in by the rewrite (items → orders).
    check_neighbours(
        &shop,
        &UNITS,
        "SELECT flag, COUNT(*), SUM(qty), SUM(COALESCE(qty, 1)) FROM items GROUP BY flag",
        0.0,
    );
    // The unit resolved by the query's own join along the foreign key.
    check_neighbours(
        &shop,
        &UNITS,
        "SELECT flag, SUM(qty), COUNT(DISTINCT o_cust) FROM items JOIN orders ON i_order = order_id \
         GROUP BY flag",
        0.0,
    );
    // Three tables, the groups from the unit's own table.
    check_neighbours(
        &shop,
        &UNITS,
        "SELECT segment, SUM(qty * total), AVG(qty) FROM customers, orders, items \
         WHERE cust_id = o_cust AND i_order = order_id GROUP BY segment",
        0.0,
    );
    // An outer join on the unit, its padded side's unit counted where it is not NULL.
    check_neighbours(
        &shop,
        &UNITS,
        "SELECT segment, COUNT(DISTINCT o_cust), COUNT(*) FROM customers LEFT JOIN orders \
         ON cust_id = o_cust GROUP BY segment",
        0.0,
    );
}

#[test]
fn sensitivity_holds_for_public_joins_subqueries_and_private_keys() {
    // A public table's column as the groups.
    check_neighbours(
        &shop,
        &UNITS,
        "SELECT label, COUNT(*) FROM items JOIN flags ON items.flag = flags.flag GROUP BY label",
        0.0,
    );
    // A per-unit aggregate (one row per customer), grouped by private keys.
    check_neighbours(
        &shop,
        &UNITS,
        "SELECT n, COUNT(*) FROM (SELECT cust_id, COUNT(order_id) AS n FROM customers \
         LEFT JOIN orders ON cust_id = o_cust GROUP BY cust_id) GROUP BY n",
        1e-6,
    );
    // A semi-join on the foreign key (an IN subquery aggregated per order).
    check_neighbours(
        &shop,
        &UNITS,
        "SELECT COUNT(DISTINCT o_cust), SUM(total) FROM orders WHERE order_id IN \
         (SELECT i_order FROM items GROUP BY i_order HAVING SUM(qty) > 12)",
        0.0,
    );
    // Histogram bins of a bounded column.
    check_neighbours(
        &shop,
        &UNITS,
        "SELECT FLOOR(total / 100) * 100 AS bucket, COUNT(*) FROM orders \
         GROUP BY FLOOR(total / 100) * 100",
        0.0,
    );
}

#[test]
fn every_way_of_bounding_gives_the_same_totals() {
    // Values outside the bounds, negative, NULL and NaN; units with more rows than L∞ and
    // more groups than L0.
    let mut csv = "u,g,x\n".to_string();
    for u in 0..40u64 {
        for r in 0..(u % 9) {
            let x = match (u + r) % 7 {
                0 => String::new(),
                1 => "NaN".into(),
                2 => format!("-{}", u * 3 + r),
                _ => format!("{}.{}", (u * 37 + r * 11) % 130, r),
            };
            let _ = writeln!(
                csv,
                "{u},{},{x}",
                ["p", "q", "r", "s"][((u + r) % 4) as usize]
            );
        }
    }
    let schema = r#"
[tables.t]
privacy_unit = "u"
max_groups_per_unit = 2
max_rows_per_unit_per_group = 3
[[tables.t.columns]]
name = "x"
bounds = [-20, 100]
[[tables.t.columns]]
name = "g"
keys = ["p", "q", "r"]
"#;
    // Rows in group s are outside the public keys: they must not count towards L0.
    let t = db(&[("t", csv)], schema);
    let shop = shop(None);
    for (db, sql) in [
        (
            &t,
            "SELECT g, COUNT(*), COUNT(x), SUM(x), AVG(x), VARIANCE(x), STDDEV(x), \
             COUNT(*) FILTER (WHERE x > 50), COUNT(DISTINCT u), \
             SUM(COALESCE(TRY_CAST(x AS BIGINT), 0)) FROM t \
             GROUP BY g",
        ),
        (
            &t,
            "SELECT SUM(x * 3 - 1), AVG(x) FROM t WHERE x IS NOT NULL",
        ),
        (
            &shop,
            "SELECT segment, SUM(qty * total), AVG(qty) FROM customers, orders, items \
             WHERE cust_id = o_cust AND i_order = order_id GROUP BY segment",
        ),
    ] {
        let (pre, parts, _) = totals_by(db, sql, 0.0, true, false);
        let (raw, _, _) = totals_by(db, sql, 0.0, false, false);
        for (pre_aggregate, sorted) in [(true, true), (false, true)] {
            let (other, _, _) = totals_by(db, sql, 0.0, pre_aggregate, sorted);
            assert_eq!(pre, other, "{sql}: sorted, pre-aggregated {pre_aggregate}");
        }
        assert!(
            parts.iter().all(|p| crate::preaggregate::possible(p)),
            "{sql}"
        );
        assert!(
            pre.iter().all(|t| !t.is_empty()),
            "{sql}: nothing aggregated"
        );
        assert_eq!(pre, raw, "{sql}");
    }
}

#[test]
fn groups_that_arrive_batch_after_batch_are_bounded_as_sorted_rows_are() {
    // Unsorted rows find their pairs in a units × groups layout while there are at most 8
    // groups, widened as groups arrive, then in a hash map: the first 9000 rows have 2 groups
    // (and one outside the keys), the next 9000 five, the last 3000 twelve. Batches hold
    // 8192 rows, so each change happens between batches and within one.
    let mut csv = "u,g,x\n".to_string();
    for i in 0..21_000u64 {
        let groups = match i {
            0..9_000 => 3,
            9_000..18_000 => 5,
            _ => 12,
        };
        let g = match i % groups {
            2 if groups == 3 => "zz".to_string(),
            k => format!("g{k}"),
        };
        let _ = writeln!(csv, "{},{g},{}", (i * 7) % 601, i % 97);
    }
    let keys: Vec<String> = (0..12).map(|k| format!("\"g{k}\"")).collect();
    let schema = format!(
        "[tables.t]\nprivacy_unit = \"u\"\nmax_groups_per_unit = 3\n\
         max_rows_per_unit_per_group = 4\n[[tables.t.columns]]\nname = \"x\"\n\
         bounds = [0, 50]\n[[tables.t.columns]]\nname = \"g\"\nkeys = [{}]\n",
        keys.join(", ")
    );
    let t = db(&[("t", csv)], &schema);
    let sql = "SELECT g, COUNT(*), SUM(x), COUNT(DISTINCT u) FROM t GROUP BY g";
    let (raw, _, _) = totals_by(&t, sql, 0.0, false, false);
    let (sorted, _, _) = totals_by(&t, sql, 0.0, false, true);
    assert_eq!(raw, sorted);
    assert_eq!(raw[0].len(), 12, "every listed group, and not zz");
}

#[test]
fn joins_with_a_stored_public_side_answer_as_written() {
    // The engine builds each join's table from its stored side (see `held_joins`), whatever
    // side the query wrote it on; each form counts the items flagged x or y, with and without
    // a memory limit.
    let shop = shop(None);
    let engine = shop.engine();
    let expected = exact_n(
        &engine,
        "SELECT COUNT(*) AS n FROM items WHERE flag IN ('x', 'y')",
    );
    for sql in [
        "SELECT COUNT(*) AS n FROM items i JOIN flags f ON i.flag = f.flag WHERE f.label <> 'Other'",
        "SELECT COUNT(*) AS n FROM flags f JOIN items i ON i.flag = f.flag WHERE f.label <> 'Other'",
        "SELECT COUNT(f.label) AS n FROM items i LEFT JOIN (SELECT * FROM flags WHERE label <> \
         'Other') f ON i.flag = f.flag",
        "SELECT COUNT(*) AS n FROM items i WHERE EXISTS (SELECT 1 FROM flags f WHERE f.flag = \
         i.flag AND f.label <> 'Other')",
        "SELECT COUNT(*) AS n FROM items i WHERE NOT EXISTS (SELECT 1 FROM flags f WHERE f.flag \
         = i.flag AND f.label = 'Other')",
        "SELECT COUNT(*) AS n FROM items i WHERE i.qty > 100 OR EXISTS (SELECT 1 FROM flags f \
         WHERE f.flag = i.flag AND f.label <> 'Other')",
    ] {
        assert_eq!(exact_n(&engine, sql), expected, "{sql}");
        let (limited, _, _) = totals_by(&shop, sql, 0.0, true, true);
        let (unlimited, _, _) = totals_by(&shop, sql, 0.0, true, false);
        assert_eq!(limited, unlimited, "{sql}");
    }
}

#[test]
fn a_subquery_grouped_by_a_key_that_leads_to_the_unit_has_a_row_per_key() {
    // Items grouped by order: a customer has a row per order (at most L∞ = 4 of items'
    // bound count), not one; grouped by customer, one.
    let shop = shop(None);
    let engine = shop.engine();
    let count = |sql: &str| exact_n(&engine, sql);
    let per_order: u64 = (0..12).map(|c| shop_orders(c).min(4)).sum();
    assert_eq!(
        count("SELECT COUNT(*) AS n FROM (SELECT i_order, SUM(qty) FROM items GROUP BY i_order) t"),
        per_order
    );
    let customers_with_orders = (0..12).filter(|&c| shop_orders(c) > 0).count();
    assert_eq!(
        count("SELECT COUNT(*) AS n FROM (SELECT o_cust, COUNT(*) FROM orders GROUP BY o_cust) t"),
        customers_with_orders
    );
}

#[test]
fn released_values_are_the_bounded_totals_when_noise_is_off() {
    let shop = shop(None);
    let engine = shop.engine();
    let r = exact(
        &engine,
        "SELECT priority, COUNT(*) AS n FROM orders GROUP BY priority ORDER BY priority",
        0.0,
    );
    let rows = r.rows_json().unwrap();
    // Per customer and priority at most L∞ = 3 orders count; customer 7's 9 orders are capped.
    let mut expect: BTreeMap<&str, i64> = BTreeMap::new();
    for c in 0..12u64 {
        let n_orders = shop_orders(c);
        let mut per: BTreeMap<&str, i64> = BTreeMap::new();
        for o in 0..n_orders {
            *per.entry(if (c + o) % 3 == 0 { "hi" } else { "lo" })
                .or_default() += 1;
        }
        for (p, n) in per {
            *expect.entry(p).or_default() += n.min(3);
        }
    }
    assert_eq!(rows[0]["priority"], "hi");
    assert_eq!(rows[0]["n"], expect["hi"]);
    assert_eq!(rows[1]["n"], expect["lo"]);
    // Public keys: both groups, each drawn once.
    assert_eq!(r.draws, 2);
}

/// QUANTILE(x, 0.0) and (x, 1.0) are released as written (DataFusion would make them MIN and
/// MAX, which are refused), and PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x DESC) is the
/// (1 − q)-quantile, as DataFusion computes it.
#[test]
fn quantiles_at_the_ends_and_in_descending_order_are_the_ones_asked_for() {
    let shop = shop(None);
    let engine = shop.engine();
    let value = |sql: &str| {
        exact(&engine, &format!("SELECT {sql} AS v FROM orders"), 0.0)
            .rows_json()
            .unwrap()[0]["v"]
            .as_f64()
            .unwrap()
    };
    let pairs = [
        (
            "QUANTILE(total, 0.0)",
            "PERCENTILE_CONT(1.0) WITHIN GROUP (ORDER BY total DESC)",
        ),
        (
            "QUANTILE(total, 1)",
            "PERCENTILE_CONT(0) WITHIN GROUP (ORDER BY total DESC)",
        ),
        (
            "QUANTILE(total, 0.25)",
            "PERCENTILE_CONT(0.75) WITHIN GROUP (ORDER BY total DESC)",
        ),
        (
            "QUANTILE(total, 0.25)",
            "PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY total)",
        ),
    ];
    for (a, b) in pairs {
        assert_eq!(value(a), value(b), "{a} against {b}");
    }
    let (low, quarter, high) = (
        value("QUANTILE(total, 0.0)"),
        value("QUANTILE(total, 0.25)"),
        value("QUANTILE(total, 1.0)"),
    );
    assert!(low < quarter && quarter < high, "{low} {quarter} {high}");
    let err = engine
        .explain("SELECT MIN(total) FROM orders", &request(1.0, 0.0))
        .unwrap_err();
    assert!(err.to_string().contains("MIN or MAX"), "{err}");
}

/// Values that all fall between two candidate points (here every value is 250.2, in
/// [0, 500]) are found to one step: a score of the single rank #{x < c} ties every candidate
/// there, and the selection would be anywhere in the range.
#[test]
fn a_quantile_of_values_between_two_candidates_is_found_to_one_step() {
    let shop = shop(None);
    let engine = shop.engine();
    let step = 500.0 / 999.0;
    for q in ["0.1", "0.5", "0.9"] {
        let sql = format!(
            "SELECT QUANTILE(CASE WHEN total >= 0 THEN 250.2 ELSE total END, {q}) AS v FROM orders"
        );
        let v = exact(&engine, &sql, 0.0).rows_json().unwrap()[0]["v"]
            .as_f64()
            .unwrap();
        assert!((v - 250.2).abs() <= step, "q = {q}: {v}");
    }
}

#[test]
fn a_distinct_count_of_units_counts_only_rows_where_they_are_not_null() {
    let shop = shop(None);
    let engine = shop.engine();
    let n = |sql: &str| exact(&engine, sql, 0.0).rows_json().unwrap()[0]["n"].clone();
    // Customers 0, 4 and 8 have no order: the LEFT JOIN pads them with a NULL o_cust.
    let with_orders = (0..12).filter(|&c| shop_orders(c) > 0).count();
    assert_eq!(
        n("SELECT COUNT(DISTINCT o_cust) AS n FROM customers LEFT JOIN orders ON cust_id = o_cust"),
        with_orders
    );
    assert_eq!(
        n(
            "SELECT COUNT(DISTINCT cust_id) AS n FROM customers LEFT JOIN orders ON cust_id = o_cust"
        ),
        12
    );
    let with_hi = (0..12u64)
        .filter(|&c| (0..shop_orders(c)).any(|o| (c + o) % 3 == 0))
        .count();
    assert_eq!(
        n("SELECT COUNT(DISTINCT o_cust) FILTER (WHERE priority = 'hi') AS n FROM orders"),
        with_hi
    );
}

#[test]
fn a_weight_names_the_result_column_or_the_aggregate() {
    let shop = shop(None);
    let engine = shop.engine();
    let sql = "SELECT COUNT(*) AS n, SUM(total) AS s FROM orders";
    let shares = |weights: &[(&str, f64)]| {
        let mut req = request(1.0, 0.0);
        req.split.weights = weights.iter().map(|(k, w)| (k.to_string(), *w)).collect();
        engine.explain(sql, &req).map(|e| {
            e.guarantee
                .columns
                .iter()
                .map(|c| (c.name.clone(), c.epsilon))
                .collect::<BTreeMap<_, _>>()
        })
    };
    let by_alias = shares(&[("s", 3.0)]).unwrap();
    assert!((by_alias["s"] - 0.75).abs() < 1e-12, "{by_alias:?}");
    assert!((by_alias["n"] - 0.25).abs() < 1e-12, "{by_alias:?}");
    assert_eq!(shares(&[("sum(orders.total)", 3.0)]).unwrap(), by_alias);
    let msg = shares(&[("total", 3.0)]).unwrap_err().to_string();
    assert!(msg.contains("(its aggregates: n, s)"), "{msg}");
    // Two aggregates computed alike in two subqueries: a weight cannot tell them apart.
    let mut req = request(1.0, 0.0);
    req.split.weights = [("count(Int64(1))".to_string(), 3.0)].into();
    let msg = engine
        .explain(
            "SELECT a.n AS x, b.n AS y FROM (SELECT COUNT(*) AS n FROM orders) a CROSS JOIN \
             (SELECT COUNT(*) AS n FROM orders WHERE total > 10) b",
            &req,
        )
        .unwrap_err()
        .to_string();
    assert!(msg.contains("cannot tell apart"), "{msg}");
}

#[test]
fn edge_budgets_and_bounds_get_an_answer_or_a_message_in_the_query_terms() {
    let shop = shop(None);
    let engine = shop.engine();
    // Bounds that collapse to a point: a negligible noise, not an error.
    let r = exact(&engine, "SELECT SUM(total * 0) AS s FROM orders", 0.0);
    assert_eq!(r.rows_json().unwrap()[0]["s"], 0);
    // An ε too small for the samplers names the aggregate and its share.
    let msg = engine
        .explain("SELECT COUNT(*) AS n FROM orders", &request(1e-15, 0.0))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("count(Int64(1)) cannot be released at its ε share 1e-15"),
        "{msg}"
    );
}

#[test]
fn histogram_bins_that_a_cast_makes_equal_are_one_cell() {
    let shop = shop(None);
    let engine = shop.engine();
    // Six bins of total / 100 over [0, 500], all 0 once scaled by 0.01 and cast to an integer:
    // released six times, the one cell would get six independent noises.
    let sql = "SELECT TRY_CAST(FLOOR(CAST(total AS DOUBLE) / 100) * 0.01 AS BIGINT) AS k, \
               COUNT(*) AS n FROM orders GROUP BY 1";
    let r = exact(&engine, sql, 0.0);
    let rows = r.rows_json().unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["k"], 0);
    assert_eq!(r.draws, 1);
    // Without the cast, six cells.
    let sql = "SELECT FLOOR(CAST(total AS DOUBLE) / 100) * 0.01 AS k, COUNT(*) AS n FROM orders \
               GROUP BY 1";
    assert_eq!(exact(&engine, sql, 0.0).draws, 6);
}

/// Every row in the declared range falls in a released bin, whatever steps and casts follow
/// FLOOR: the bins are computed by the engine's kernels, as the rows' groups are (computed in
/// f64 and cast once at the end, keys missed REAL rounding between steps and BIGINT sums
/// beyond 2^53, and the rows in those bins were dropped).
#[test]
fn histogram_bins_hold_every_row_whatever_follows_floor() {
    let rows: String = (0..20).map(|k| format!("{k},{k}.5\n")).collect();
    let db = db(
        &[("t", format!("uid,x\n{rows}"))],
        "[tables.t]\nprivacy_unit = \"uid\"\nmax_groups_per_unit = 100\n\
         max_rows_per_unit_per_group = 1\n[[tables.t.columns]]\nname = \"uid\"\n\
         type = \"integer\"\n[[tables.t.columns]]\nname = \"x\"\ntype = \"real\"\n\
         bounds = [0, 20]\n",
    );
    let engine = db.engine();
    for bin in [
        "FLOOR(x)",
        "(FLOOR(x) + CAST(0.1 AS REAL)) * CAST(0.3 AS REAL)",
        "CAST(FLOOR(x) + 0.1 AS REAL) * 3",
        "CAST(FLOOR(x) * 0.1 AS REAL) + 0.7",
        "TRY_CAST(FLOOR(x) * CAST(0.37 AS DECIMAL(3,2)) AS DECIMAL(10,1)) * 3",
        "TRY_CAST(FLOOR(x) * 0.37 AS BIGINT) * 0.5",
        "TRY_CAST(FLOOR(x) AS BIGINT) + 9007199254740993",
        "TRY_CAST(FLOOR(x) AS BIGINT) * 3 + 9007199254740993",
    ] {
        let sql = format!("SELECT {bin} AS b, COUNT(*) AS n FROM t GROUP BY 1");
        let r = exact(&engine, &sql, 0.0);
        let rows = r.rows_json().unwrap();
        let total: f64 = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["n"].as_f64().unwrap())
            .sum();
        assert_eq!(total, 20.0, "{bin}: {rows}");
    }
}

#[test]
fn a_float_unit_and_an_unsigned_sum_are_refused_before_any_row_is_read() {
    use datafusion::arrow::array::{Float64Array, UInt64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let schema = Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Float64, false),
        Field::new("n", DataType::UInt64, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Float64Array::from(vec![0.0, -0.0])),
            Arc::new(UInt64Array::from(vec![0, 0])),
        ],
    )
    .unwrap();
    let file = std::fs::File::create(&path).unwrap();
    let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let decls = |unit: &str| {
        decls(&format!(
            "[tables.t]\nprivacy_unit = \"{unit}\"\nmax_rows_per_unit_per_group = 1\n\
             [[tables.t.columns]]\nname = \"n\"\nbounds = [0, 10]\n"
        ))
    };
    let tables = vec![("t".to_string(), path)];
    // 0.0 and -0.0: one unit to SQL, two to the bounding.
    let engine = Engine::new(&decls("uid"), &tables).unwrap();
    let err = engine.explain("SELECT COUNT(*) FROM t", &request(1.0, 0.0));
    let msg = err.unwrap_err().to_string();
    assert!(msg.contains("privacy unit t.uid (Float64)"), "{msg}");
    // A noisy sum can be negative, which UInt64 cannot hold.
    let engine = Engine::new(&decls("n"), &tables).unwrap();
    let msg = engine
        .explain("SELECT SUM(n) FROM t", &request(1.0, 0.0))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("cannot hold a negative noisy sum"), "{msg}");
    engine
        .explain("SELECT SUM(CAST(n AS DOUBLE)) FROM t", &request(1.0, 0.0))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Writes `columns` (name, array) to a Parquet file at `path`.
fn write_parquet(path: &std::path::Path, columns: Vec<(&str, datafusion::arrow::array::ArrayRef)>) {
    use datafusion::arrow::datatypes::{Field, Schema};
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batch = datafusion::arrow::record_batch::RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_decode(text: &str) -> Vec<u8> {
    let (mut bits, mut held, mut out) = (0u32, 0, Vec::new());
    for c in text.bytes().filter(|&c| c != b'=') {
        bits = (bits << 6) | BASE64.iter().position(|&b| b == c).unwrap() as u32;
        held += 6;
        if held >= 8 {
            held -= 8;
            out.push((bits >> held) as u8);
        }
    }
    out
}

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let v =
            (chunk.iter().enumerate()).fold(0u32, |v, (i, &b)| v | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                BASE64[(v >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

#[test]
fn a_damaged_parquet_footer_is_refused_naming_its_file() {
    use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array};
    let dir = tempfile::tempdir().unwrap();
    let columns = || -> Vec<(&str, ArrayRef)> {
        vec![
            ("uid", Arc::new(Int64Array::from(vec![1, 2, 3]))),
            ("v", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0]))),
        ]
    };
    let folder = dir.path().join("parts");
    std::fs::create_dir_all(folder.join("p=1")).unwrap();
    write_parquet(&folder.join("good.parquet"), columns());
    // The footer's length past the file's start (the metadata decoder subtracted it from the
    // file's size and overflowed).
    let short = dir.path().join("short.parquet");
    std::fs::write(&short, b"PAR1garbagePAR1").unwrap();
    // The Arrow schema in the footer declares a 36-bit integer (arrow's IPC reader panicked).
    let int36 = folder.join("p=1").join("int36.parquet");
    write_parquet(&int36, columns());
    let bytes = std::fs::read(&int36).unwrap();
    use datafusion::arrow::datatypes::{Field, Schema};
    let encoded = datafusion::parquet::arrow::encode_arrow_schema(&Schema::new(
        columns()
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    ));
    let mut ipc = base64_decode(&encoded);
    // Int { bitWidth: 64, is_signed: true } of uid.
    let at = (ipc.windows(8))
        .rposition(|w| w == [64, 0, 0, 0, 0, 0, 0, 1])
        .unwrap();
    ipc[at] = 36;
    let patched = base64_encode(&ipc);
    assert_eq!(patched.len(), encoded.len());
    let at = (bytes.windows(encoded.len()))
        .position(|w| w == encoded.as_bytes())
        .unwrap();
    let mut damaged = bytes.clone();
    damaged[at..at + encoded.len()].copy_from_slice(patched.as_bytes());
    std::fs::write(&int36, damaged).unwrap();
    // Two columns of one name.
    let twice = dir.path().join("twice.parquet");
    write_parquet(
        &twice,
        vec![
            columns().remove(0),
            columns().remove(1),
            ("v", columns().remove(1).1),
        ],
    );
    let schema = decls(
        "[tables.t]\nprivacy_unit = \"uid\"\nmax_rows_per_unit_per_group = 1\n\
         [[tables.t.columns]]\nname = \"v\"\nbounds = [0, 10]\n",
    );
    for (path, needles) in [
        (&short, ["short.parquet", "footer's length"]),
        (&int36, ["int36.parquet", "bit width of 36"]),
        (&folder, ["int36.parquet", "bit width of 36"]),
        (&twice, ["twice.parquet", "two columns named \"v\""]),
    ] {
        let err = Engine::new(&schema, &[("t".to_string(), path.clone())])
            .err()
            .unwrap_or_else(|| panic!("{} accepted", path.display()));
        let msg = err.to_string();
        assert!(err.is_input(), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
        for needle in needles {
            assert!(msg.contains(needle), "{needle}: {msg}");
        }
    }
    // The folder's good file alone is a table.
    std::fs::remove_file(&int36).unwrap();
    Engine::new(&schema, &[("t".to_string(), folder)]).unwrap();
}

#[test]
fn a_median_of_a_null_typed_column_is_refused_before_the_charge() {
    use datafusion::arrow::array::{ArrayRef, Int64Array, NullArray};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("uid", Arc::new(Int64Array::from(vec![1, 2, 3]))),
        ("v", Arc::new(NullArray::new(3))),
    ];
    write_parquet(&path, columns);
    let schema = decls(
        "[tables.t]\nprivacy_unit = \"uid\"\nmax_rows_per_unit_per_group = 1\n\
         [[tables.t.columns]]\nname = \"v\"\nbounds = [0, 10]\n",
    );
    let engine = Engine::new(&schema, &[("t".to_string(), path)]).unwrap();
    // Planning refuses it (the release cast the noisy median to Null and failed after the
    // charge); the other aggregates of it release a value.
    let err = engine
        .explain("SELECT MEDIAN(v) FROM t", &request(1.0, 0.0))
        .unwrap_err();
    assert!(err.is_input(), "{err}");
    assert!(err.to_string().contains("type Null cannot hold"), "{err}");
    for q in [
        "AVG(v)",
        "MEDIAN(CAST(v AS DOUBLE))",
        "QUANTILE(v, 0.5)",
        "STDDEV(v)",
    ] {
        let mut rng = DpRng::seeded(1);
        engine
            .run(
                &format!("SELECT {q} FROM t"),
                &request(1.0, 0.0),
                &mut rng,
                None,
            )
            .unwrap_or_else(|e| panic!("{q}: {e}"));
    }
}

#[test]
fn an_error_never_names_a_private_value() {
    let e = SqlError::data(
        "orders",
        &datafusion::error::DataFusionError::Execution("row 17: value 'alice' is bad".into()),
    );
    let msg = e.to_string();
    assert!(!msg.contains("17") && !msg.contains("alice"), "{msg}");
}

#[test]
fn a_units_huge_total_is_clamped_not_an_error() {
    // Row bounds 2^100 times wider than the per-unit sum bounds make the grid fine enough for
    // two huge values of one unit to pass 2^127; its total saturates and is clamped to 1.
    let schema = r#"
[tables.t]
privacy_unit = "u"
[[tables.t.columns]]
name = "x"
bounds = [0, 1e30]
sum_bounds = [0, 1]
"#;
    let t = db(&[("t", "u,x\n1,1e30\n1,1e30\n2,0.5\n".to_string())], schema);
    let r = exact(&t.engine(), "SELECT SUM(x) AS s FROM t", 0.0);
    let rows = r.rows_json().unwrap();
    let s = rows[0]["s"].as_f64().unwrap();
    assert!((s - 1.5).abs() < 1e-6, "{rows:?}");
}

#[test]
fn private_rows_join_the_released_cells_of_public_keys() {
    // Two priorities: the released cells repeat an order at most twice. Each order matches
    // one cell, so the count is that of the orders (the cells are released before the rows
    // joined to them are read: read before, the join found none).
    let db = shop(None);
    let engine = db.engine();
    let joined = exact(
        &engine,
        "SELECT COUNT(t.c) AS n FROM orders o JOIN (SELECT priority, COUNT(*) AS c FROM orders \
         GROUP BY priority) t ON o.priority = t.priority",
        0.0,
    );
    let plain = exact(&engine, "SELECT COUNT(*) AS n FROM orders", 0.0);
    let n = |r: &crate::DpResult| r.rows_json().unwrap()[0]["n"].as_f64().unwrap();
    assert!(n(&plain) > 0.0);
    assert_eq!(n(&joined), n(&plain));
}

/// Parquet does not enforce a decimal column's precision: one unit's rows can hold a
/// `DECIMAL(20, 0)` of 22 digits, or a `DECIMAL(38, 0)` of −2¹²⁷, on which decimal arithmetic
/// that the declared precisions allow would overflow and fail the query for that unit alone.
/// Such values are read as NULL, so both neighbours answer.
#[test]
fn a_decimal_beyond_its_precision_is_null_not_an_error() {
    use datafusion::arrow::array::{Decimal128Array, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Int64, false),
        Field::new("d", DataType::Decimal128(20, 0), false),
        Field::new("e", DataType::Decimal128(18, 0), false),
        Field::new("f", DataType::Decimal128(38, 0), false),
    ]));
    // A public table whose key 98 holds a 19-digit DECIMAL(18, 0).
    let public = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Decimal128(18, 0), false),
    ]));
    let public_batch = RecordBatch::try_new(
        public.clone(),
        vec![
            Arc::new(Int64Array::from(vec![5, 98])),
            Arc::new(
                Decimal128Array::from(vec![5, 9 * 10i128.pow(18)])
                    .with_precision_and_scale(18, 0)
                    .unwrap(),
            ),
        ],
    )
    .unwrap();
    let public_path = dir.path().join("p.parquet");
    let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&public_path).unwrap(),
        public,
        None,
    )
    .unwrap();
    w.write(&public_batch).unwrap();
    w.close().unwrap();
    let write = |name: &str, rows: &[(i64, i128, i128, i128)]| {
        let column = |f: fn(&(i64, i128, i128, i128)) -> i128, p: u8| {
            Arc::new(
                Decimal128Array::from(rows.iter().map(f).collect::<Vec<_>>())
                    .with_precision_and_scale(p, 0)
                    .unwrap(),
            )
        };
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                )),
                column(|r| r.1, 20),
                column(|r| r.2, 18),
                column(|r| r.3, 38),
            ],
        )
        .unwrap();
        let path = dir.path().join(format!("{name}.parquet"));
        let file = std::fs::File::create(&path).unwrap();
        let mut w =
            datafusion::parquet::arrow::ArrowWriter::try_new(file, schema.clone(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    };
    let others: Vec<_> = (0..5).map(|u| (u, 1, 1, 1)).collect();
    let mut with_99 = others.clone();
    with_99.push((99, 2 * 10i128.pow(21), 10i128.pow(18) - 1, i128::MIN));
    // Unit 98's 20 digits times the public 19 would overflow.
    with_99.push((98, 10i128.pow(20) - 1, 1, 1));
    let decls = decls(
        "[tables.t]\nprivacy_unit = \"uid\"\nmax_rows_per_unit_per_group = 1\n\
         [[tables.t.columns]]\nname = \"d\"\nbounds = [0, 10]\n[tables.p]\npublic = true\n",
    );
    for sql in [
        "SELECT COUNT(*) AS n FROM t WHERE uid = 99 AND d * e > 0",
        "SELECT COUNT(*) AS n FROM t WHERE uid = 99 AND -f > 0",
        "SELECT SUM(d) AS n FROM t WHERE uid = 99",
        "SELECT COUNT(*) AS n FROM t JOIN p ON t.uid = p.k WHERE t.d * p.v > 0",
    ] {
        let mut answers = Vec::new();
        for rows in [&others, &with_99] {
            let tables = vec![
                ("t".to_string(), write("t", rows)),
                ("p".to_string(), public_path.clone()),
            ];
            let engine = Engine::new(&decls, &tables).unwrap();
            let mut rng = DpRng::seeded(1);
            let mut noise = Noise::new(&mut rng);
            noise.off = true;
            let result = engine.run_with(sql, &request(1.0, 0.0), &mut noise, None);
            answers.push(result.map(|r| r.rows_json().unwrap()[0]["n"].clone()));
        }
        assert!(answers.iter().all(Result::is_ok), "{sql}: {answers:?}");
        assert_eq!(answers[0], answers[1], "{sql}");
    }
}
