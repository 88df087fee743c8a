//! How a budget ledger's balance and entries read as JSON, the same for every front: the
//! `"ledger"` object of a charged command, `dpml ledger show`, and `dpml.Ledger` in Python.

use std::time::{Duration, UNIX_EPOCH};

use dpml_accounting::ledger::{Balance, Entry};
use serde_json::{Value, json};

/// A ledger's balance: `spent` and `remaining` ε, `spent_delta` and `remaining_delta`, the
/// number of `entries` and the `composition` that produced the totals.
pub fn balance(b: &Balance) -> Value {
    json!({"spent": b.spent_epsilon, "remaining": b.remaining_epsilon,
           "spent_delta": b.spent_delta, "remaining_delta": b.remaining_delta,
           "entries": b.entries, "composition": b.composition})
}

/// One entry: its id, its `time` in UTC as RFC 3339, label, ε, δ and privacy event.
pub fn entry(e: &Entry) -> Value {
    let secs = u64::try_from(e.time_unix).unwrap_or(0);
    let time = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs));
    json!({"id": e.id, "time": time.to_string(), "label": e.label,
           "epsilon": e.epsilon, "delta": e.delta, "event": e.event})
}
