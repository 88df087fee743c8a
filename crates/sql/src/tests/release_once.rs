//! Noise is drawn once per released part, a result is materialised once and charged once, the
//! ledger keeps exactly what was charged, overspending releases nothing, sums never wrap, and a
//! one-run canary audit of a COUNT stays below its ε.

use std::fmt::Write as _;

use dpml_accounting::ledger::{Budget, Ledger};
use dpml_mechanisms::DpRng;

use super::{db, exact, request, shop};
use crate::error::SqlError;

#[test]
fn noise_is_drawn_once_per_released_part() {
    let shop = shop(None);
    let engine = shop.engine();
    let mut rng = DpRng::seeded(3);
    // Two public groups; COUNT (1 part), SUM (1), AVG (2), VARIANCE (3): 7 draws per group.
    let r = engine
        .run(
            "SELECT priority, COUNT(*), SUM(total), AVG(total), VARIANCE(total) FROM orders \
             GROUP BY priority",
            &request(1.0, 0.0),
            &mut rng,
            None,
        )
        .unwrap();
    assert_eq!(r.draws, 2 * 7);
    // Private keys: one draw per candidate group (its noisy unit count), then one per part of
    // each released group.
    let r = engine
        .run(
            "SELECT total > 250 AS big, COUNT(*) FROM orders GROUP BY total > 250",
            &request(1.0, 1e-6),
            &mut rng,
            None,
        )
        .unwrap();
    let released = r.batches().iter().map(|b| b.num_rows()).sum::<usize>() as u64;
    assert_eq!(r.draws, 2 + released);
}

#[test]
fn a_count_that_count_releases_is_reused_not_drawn_again() {
    // AVG and VARIANCE of a value that is never NULL count the rows COUNT(*) counts: they take
    // its noisy count (post-processing) and spend their whole share on their sums. AVG of a
    // column that can be NULL (CSV columns can) counts apart.
    let shop = shop(None);
    let engine = shop.engine();
    let sql = "SELECT priority, COUNT(*) AS n, AVG(COALESCE(total, 0)) AS a, \
               VARIANCE(COALESCE(total, 0)) AS v, AVG(total) AS b FROM orders GROUP BY priority";
    let r = engine
        .run(sql, &request(1.0, 0.0), &mut DpRng::seeded(3), None)
        .unwrap();
    // Per group: COUNT 1, AVG 1 (its sum), VARIANCE 2 (its sums), the other AVG 2.
    assert_eq!(r.draws, 2 * 6);
    let json = r.to_json().unwrap();
    let parts = |name: &str| parts_of(&json, name);
    let spent: f64 = ["n", "a", "v", "b"]
        .iter()
        .flat_map(|c| parts(c))
        .map(|(_, e)| e)
        .sum();
    assert!((spent - 1.0).abs() < 1e-12, "{spent}");
    let a = parts("a");
    assert_eq!(a[0].1, 0.25, "the AVG's sum spends its whole share: {a:?}");
    assert_eq!(a[1], ("count (that of n)".to_string(), 0.0));
    assert_eq!(parts("v")[2].1, 0.0);
    assert_eq!(parts("b")[1], ("count".to_string(), 0.125));
    // Without noise, the shared count gives the AVG it gives alone.
    let alone = exact_column(
        &engine,
        "SELECT priority, AVG(COALESCE(total, 0)) AS a FROM orders GROUP BY priority",
        "a",
    );
    assert_eq!(alone, exact_column(&engine, sql, "a"));
    // The COUNT may come after the AVG.
    let r = engine
        .run(
            "SELECT priority, AVG(COALESCE(total, 0)), COUNT(*) FROM orders GROUP BY priority",
            &request(1.0, 0.0),
            &mut DpRng::seeded(4),
            None,
        )
        .unwrap();
    assert_eq!(r.draws, 2 * 2);
}

/// Column `name` of the rows `sql` releases with the noise switched off.
fn exact_column(engine: &crate::Engine, sql: &str, name: &str) -> Vec<serde_json::Value> {
    let rows = exact(engine, sql, 0.0).rows_json().unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .map(|row| row[name].clone())
        .collect()
}

/// The released column `name`'s report in a result's JSON.
fn column_of<'j>(json: &'j serde_json::Value, name: &str) -> &'j serde_json::Value {
    json["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

/// The parts of column `name` (what each is, and its ε).
fn parts_of(json: &serde_json::Value, name: &str) -> Vec<(String, f64)> {
    column_of(json, name)["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["part"].as_str().unwrap().to_string(),
                p["epsilon"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_sum_is_centred_on_the_count_that_count_releases() {
    // SUM of a never-NULL value in [0, 500] next to COUNT(*): the sum of (x − 250) moves by
    // half as much per unit, and 250 × the released count restores the sum.
    let shop = shop(None);
    let engine = shop.engine();
    let sql = "SELECT priority, COUNT(*) AS n, SUM(COALESCE(total, 0)) AS s, SUM(total) AS t \
               FROM orders GROUP BY priority";
    let r = engine
        .run(sql, &request(1.0, 0.0), &mut DpRng::seeded(5), None)
        .unwrap();
    // Per group: the count, the centred sum, the plain sum (its value can be NULL).
    assert_eq!(r.draws, 2 * 3);
    let json = r.to_json().unwrap();
    let third = 1.0 / 3.0;
    assert_eq!(
        parts_of(&json, "s"),
        [
            ("centred sum".to_string(), third),
            ("count (that of n)".to_string(), 0.0)
        ]
    );
    assert_eq!(parts_of(&json, "t"), [("sum".to_string(), third)]);
    let (s, t) = (column_of(&json, "s"), column_of(&json, "t"));
    assert_eq!(s["centre"], 250.0);
    assert!(t.get("centre").is_none());
    // L0 = 2, L∞ = 3: 2·3·250 against 2·3·500.
    assert_eq!(s["sensitivity"], 1500.0);
    assert_eq!(t["sensitivity"], 3000.0);
    // The value's noise: the centred sum's and 250 × the count's, together below the plain
    // sum's (half its variance at equal shares, a little more for the count's integer noise).
    let (s_scale, t_scale) = (
        s["noise_scale"].as_f64().unwrap(),
        t["noise_scale"].as_f64().unwrap(),
    );
    assert!(
        s_scale < 0.75 * t_scale && s_scale > 0.65 * t_scale,
        "{s_scale} against {t_scale}"
    );
    assert!(s["half_width_95"].as_f64().unwrap() < t["half_width_95"].as_f64().unwrap());
    // Without noise, the centred sum gives the sum it gives alone.
    let alone = exact_column(
        &engine,
        "SELECT priority, SUM(COALESCE(total, 0)) AS s FROM orders GROUP BY priority",
        "s",
    );
    assert!(alone.iter().all(|s| s.as_f64() > Some(0.0)), "{alone:?}");
    assert_eq!(alone, exact_column(&engine, sql, "s"));
    // Bounds symmetric about 0 gain nothing: the sum stays plain.
    let r = engine
        .explain(
            "SELECT COUNT(*) AS n, SUM(COALESCE(total, 0) - 250) AS s FROM orders",
            &request(1.0, 0.0),
        )
        .unwrap()
        .to_json();
    assert_eq!(parts_of(&r, "s"), [("sum".to_string(), 0.5)]);
}

#[test]
fn a_result_read_twice_is_the_same_and_charged_once() {
    let shop = shop(None);
    let engine = shop.engine();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("budget.ledger");
    let ledger = Ledger::open(&path, Budget::new(3.0, 1e-5).unwrap()).unwrap();
    let mut rng = DpRng::seeded(9);
    let r = engine
        .run(
            "SELECT priority, SUM(total) AS s FROM orders GROUP BY priority",
            &request(0.7, 0.0),
            &mut rng,
            Some(&ledger),
        )
        .unwrap();
    let first = r.to_json().unwrap();
    assert_eq!(first, r.to_json().unwrap());
    assert_eq!(r.batches(), r.batches());
    assert_eq!(ledger.entries().unwrap().len(), 1);
    drop(ledger);
    // After a restart the ledger holds exactly the ε and δ charged.
    let reopened = Ledger::open_stored(&path).unwrap();
    let entries = reopened.entries().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!((entries[0].epsilon, entries[0].delta), (0.7, 0.0));
    assert!((reopened.balance().unwrap().spent_epsilon - 0.7).abs() < 1e-12);
}

#[test]
fn an_overspend_is_refused_and_releases_nothing() {
    let shop = shop(None);
    let engine = shop.engine();
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("l"), Budget::new(1.0, 0.0).unwrap()).unwrap();
    let mut rng = DpRng::seeded(1);
    let sql = "SELECT COUNT(*) FROM orders";
    engine
        .run(sql, &request(0.8, 0.0), &mut rng, Some(&ledger))
        .unwrap();
    let err = engine
        .run(sql, &request(0.8, 0.0), &mut rng, Some(&ledger))
        .unwrap_err();
    assert!(matches!(err, SqlError::Ledger { .. }), "{err}");
    assert!(err.is_input());
    assert_eq!(ledger.entries().unwrap().len(), 1);
}

#[test]
fn sums_near_i64_max_are_exact_or_refused_never_wrapped() {
    let big = i64::MAX - 10;
    let mut csv = "person,amount\n".to_string();
    for p in 0..4 {
        let _ = writeln!(csv, "{p},{big}");
    }
    let db = db(
        &[("ledger_rows", csv)],
        "[tables.ledger_rows]\nprivacy_unit = \"person\"\n\
         [[tables.ledger_rows.columns]]\nname = \"amount\"\nbounds = [0, 9.3e18]\ntype = \"integer\"\n",
    );
    let engine = db.engine();
    // As DOUBLE: the exact fixed-point sum of four values near 2^63.
    let r = exact(
        &engine,
        "SELECT SUM(CAST(amount AS DOUBLE)) AS s FROM ledger_rows",
        0.0,
    );
    let s = r.rows_json().unwrap()[0]["s"].as_f64().unwrap();
    let want = 4.0 * big as f64;
    // Rounded once to the noise grid (about 2^-20 of the noise scale, ~1e-7 here).
    assert!((s - want).abs() / want < 1e-6, "{s} vs {want}");
    // As BIGINT (SUM's type for a BIGINT column): the sum does not fit, and it is refused.
    let mut rng = DpRng::seeded(1);
    let err = engine
        .run(
            "SELECT SUM(amount) FROM ledger_rows",
            &request(1.0, 0.0),
            &mut rng,
            None,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not fit its type Int64"), "{err}");
}

#[test]
fn a_one_run_canary_audit_of_a_count_stays_below_epsilon() {
    // m canary units, each in its own group (public keys), each included with probability
    // 1/2; the score of a canary is its group's noisy count.
    let m = 1000;
    let epsilon = 1.0;
    let mut pick = DpRng::seeded(77);
    let included: Vec<bool> = (0..m).map(|_| pick.next_u64().is_multiple_of(2)).collect();
    let mut csv = "unit,canary\n".to_string();
    for (i, &inc) in included.iter().enumerate() {
        if inc {
            let _ = writeln!(csv, "{i},{i}");
        }
    }
    let keys = (0..m).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    let db = db(
        &[("canaries", csv)],
        &format!(
            "[tables.canaries]\nprivacy_unit = \"unit\"\nmax_rows_per_unit_per_group = 1\n\
             [[tables.canaries.columns]]\nname = \"canary\"\nkeys = [{keys}]\n"
        ),
    );
    let engine = db.engine();
    let mut rng = DpRng::seeded(5);
    let r = engine
        .run(
            "SELECT canary, COUNT(*) AS n FROM canaries GROUP BY canary ORDER BY canary",
            &request(epsilon, 0.0),
            &mut rng,
            None,
        )
        .unwrap();
    let rows = r.rows_json().unwrap();
    let scores: Vec<f64> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["n"].as_f64().unwrap())
        .collect();
    assert_eq!(scores.len(), m);
    let audit = dpml_audit::one_run::audit(&scores, &included, m / 10, m / 10, 0.0, 0.95).unwrap();
    assert!(
        audit.epsilon <= epsilon,
        "one-run lower bound {} exceeds ε = {epsilon}",
        audit.epsilon
    );
    // The audit sees the signal (the counts are not all noise).
    assert!(audit.epsilon > 0.0, "{audit:?}");
}

/// A release is not an explanation, and the prefix is stripped once: both refused before
/// anything is read or charged.
#[test]
fn an_explain_prefix_is_refused_by_a_release_and_given_twice() {
    let shop = shop(None);
    let engine = shop.engine();
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("l"), Budget::new(10.0, 0.0).unwrap()).unwrap();
    let mut rng = DpRng::seeded(1);
    let request = request(1.0, 0.0);
    let err = engine
        .run(
            "EXPLAIN DP SELECT COUNT(*) FROM orders",
            &request,
            &mut rng,
            Some(&ledger),
        )
        .unwrap_err();
    assert!(
        matches!(err, SqlError::Refused { .. }) && err.to_string().contains("--explain"),
        "{err}"
    );
    assert_eq!(ledger.entries().unwrap().len(), 0);
    let err = engine
        .explain(
            "EXPLAIN DP EXPLAIN DP SELECT COUNT(*) FROM orders",
            &request,
        )
        .unwrap_err();
    assert!(err.to_string().contains("given twice"), "{err}");
    engine
        .explain("EXPLAIN DP SELECT COUNT(*) FROM orders", &request)
        .unwrap();
}

/// A check that needs a released cell (a public side computed from it) refuses after the
/// charge: the refusal says that the spend was recorded.
#[test]
fn a_refusal_after_the_charge_says_it_was_charged() {
    let shop = shop(None);
    let engine = shop.engine();
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(&dir.path().join("l"), Budget::new(1000.0, 0.0).unwrap()).unwrap();
    let mut rng = DpRng::seeded(1);
    let sql = "SELECT COUNT(*) AS m FROM items i JOIN (SELECT f.flag, repeat(f.label, \
               CAST(c.n AS INT) * 100000) AS t FROM flags f CROSS JOIN (SELECT COUNT(*) AS n \
               FROM orders) c) p ON i.flag = p.flag WHERE length(p.t || i.flag) > 5";
    let err = engine
        .run(sql, &request(100.0, 0.0), &mut rng, Some(&ledger))
        .unwrap_err();
    assert!(matches!(err, SqlError::Refused { .. }), "{err}");
    assert!(err.to_string().contains("spend was recorded"), "{err}");
    assert_eq!(ledger.entries().unwrap().len(), 1);
}
