//! How a budget ledger's balance and entries read as JSON, the same for every front: the
//! `"ledger"` object of a charged release, `dpml ledger show`, and `dpml.Ledger` in Python.
//! Every writer goes through here; the names are the ledger types' own (their `Serialize`,
//! which cannot fail: numbers, strings and privacy events).

use dpml_accounting::ledger::{Balance, EntryReport};
use serde_json::Value;

/// A ledger's balance: `spent` and `remaining` ε, `spent_delta` and `remaining_delta`, the
/// number of `entries` and the `composition` that produced the totals.
pub fn balance(b: &Balance) -> Value {
    serde_json::to_value(b).unwrap_or(Value::Null)
}

/// One entry as a ledger lists it: `id`, `time` (UTC, RFC 3339), `command`, `dataset`,
/// `label`, `event`, `epsilon`, `delta`, `run`, `neighbouring` (the relation its ε is stated
/// under: `record`, `label`, `features` or `answer`), its ε at the ledger's δ
/// (`epsilon_at_ledger_delta`) and, when the spend over time was asked for, the total after it
/// (`spent_after`).
pub fn entry(e: &EntryReport) -> Value {
    serde_json::to_value(e).unwrap_or(Value::Null)
}
