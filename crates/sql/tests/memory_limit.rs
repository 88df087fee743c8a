//! Out of core: TPC-H at scale factor 0.01 under a memory limit of 8 MiB spills (the
//! sort of the contribution rows by unit, the sort-merge join) and gives the same seeded answer
//! as without a limit; under a limit too small for one batch the query fails with the memory
//! limit's error, and it is charged: whether a query fits its limit depends on the private
//! rows, so a free failure would answer questions about them.

use dpml_accounting::ledger::{Budget, Ledger};
use dpml_mechanisms::DpRng;
use dpml_sql::{Engine, Limits, SqlError};

mod common;
use common::{query, request, tpch};

#[test]
fn a_small_limit_spills_and_answers_as_without_one() {
    let common::Tpch {
        dir: _dir,
        tables,
        schema,
    } = tpch();
    let unlimited = Engine::new(&schema.tables, &tables).unwrap();
    let spill = tempfile::tempdir().unwrap();
    let limits = Limits {
        spill_dir: Some(spill.path().to_path_buf()),
        ..Limits::memory(8 << 20).unwrap()
    };
    let limited = Engine::with_limits(&schema.tables, &tables, limits).unwrap();
    // Q1 (line items, unit through orders, public keys) and Q13-like private keys.
    for name in ["q1", "q1_private_keys", "q3"] {
        let sql = query(name);
        let free = unlimited
            .run(sql, &request(), &mut DpRng::seeded(5), None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(unlimited.progress().snapshot().spilled_bytes, 0, "{name}");
        let tight = limited
            .run(sql, &request(), &mut DpRng::seeded(5), None)
            .unwrap_or_else(|e| panic!("{name} under 8 MiB: {e}"));
        let counters = limited.progress().snapshot();
        assert!(
            counters.spilled_bytes > 0 && counters.spill_count > 0,
            "{name}: nothing spilled under 8 MiB: {counters:?}"
        );
        assert!(counters.rows_scanned > 50_000, "{name}: {counters:?}");
        assert_eq!(
            free.rows_json().unwrap(),
            tight.rows_json().unwrap(),
            "{name}: the seeded answers differ"
        );
    }
}

#[test]
fn a_limit_too_small_fails_by_name_and_is_charged() {
    let common::Tpch {
        dir,
        tables,
        schema,
    } = tpch();
    let engine = Engine::with_limits(
        &schema.tables,
        &tables,
        Limits::memory(dpml_sql::memory::MIN_LIMIT).unwrap(),
    )
    .unwrap();
    let ledger = Ledger::open(&dir.path().join("ledger"), Budget::new(3.0, 1e-5).unwrap()).unwrap();
    let e = engine
        .run(
            query("q1"),
            &request(),
            &mut DpRng::seeded(1),
            Some(&ledger),
        )
        .unwrap_err();
    assert_eq!(
        e,
        SqlError::OutOfMemory {
            limit: dpml_sql::memory::MIN_LIMIT as u64,
            charged: true
        }
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with("the query needs more than the memory limit 64.0 KiB:"),
        "{msg}"
    );
    assert!(
        !msg.contains('\n') && msg.contains("the query's spend was recorded in the ledger"),
        "{msg}"
    );
    assert!(e.is_input());
    let balance = ledger.balance().unwrap();
    assert!(
        balance.entries == 1 && balance.spent_epsilon > 0.0,
        "{balance:?}"
    );
    // Without a ledger nothing can be charged, and the message says so.
    let e = engine
        .run(query("q1"), &request(), &mut DpRng::seeded(1), None)
        .unwrap_err();
    assert!(
        e.to_string().contains("nothing was released or charged"),
        "{e}"
    );
}
