"""dpml.Ledger: one JSON name per concept with the CLI (old names as aliases), sealed rows."""

import os
import sqlite3
import stat

import numpy as np
import pytest

import dpml
from dpml import stats


def test_field_names_are_the_clis_and_the_old_ones_read_as_aliases(tmp_path):
    ledger = dpml.Ledger(tmp_path / "names.db", budget=2.0)
    stats.count(np.ones(10), epsilon=0.5, ledger=ledger, label="count")
    balance = ledger.balance()
    assert set(balance) == {
        "spent", "remaining", "spent_delta", "remaining_delta", "entries", "composition"
    }
    assert balance["spent_epsilon"] == balance["spent"] == pytest.approx(0.5)
    assert balance["remaining_epsilon"] == balance["remaining"]
    (entry,) = ledger.entries()
    assert entry["time"].endswith("Z")
    assert isinstance(entry["time_unix"], int) and entry["time_unix"] > 0
    (row,) = ledger.history()
    assert row["epsilon_at_ledger_delta"] == pytest.approx(0.5)


def test_a_stored_epsilon_edited_outside_dpml_is_refused(tmp_path):
    path = tmp_path / "sealed.db"
    ledger = dpml.Ledger(path, budget=1.0)
    stats.count(np.ones(10), epsilon=0.5, ledger=ledger)
    del ledger
    key = tmp_path / "sealed.db.key"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    conn = sqlite3.connect(path)
    conn.executescript(
        "DROP TRIGGER ledger_entries_append_only_update;"
        "UPDATE ledger_entries SET epsilon = 0.0;"
    )
    conn.close()
    with pytest.raises(ValueError, match="changed outside dpml"):
        dpml.Ledger(path)


def test_a_passphrase_ledger_opens_with_its_passphrase_only(tmp_path):
    path = tmp_path / "pass.db"
    dpml.Ledger(path, budget=1.0, passphrase="correct horse")
    assert not (tmp_path / "pass.db.key").exists()
    dpml.Ledger(path, passphrase="correct horse")
    with pytest.raises(ValueError, match="does not open this ledger"):
        dpml.Ledger(path, passphrase="battery staple")
