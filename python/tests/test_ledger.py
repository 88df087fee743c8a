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


def test_an_empty_passphrase_is_refused_and_makes_no_ledger(tmp_path):
    path = tmp_path / "empty.db"
    with pytest.raises(ValueError, match="empty passphrase"):
        dpml.Ledger(path, budget=1.0, passphrase="")
    assert not path.exists()


# Every estimator, mechanism and statistic takes ledger= and is charged through dpml-core's
# budget module, as the command line's --ledger: over budget is refused before any private
# work, the spend is recorded before the result is returned, a failed call charges nothing.

from dpml import learn, mechanisms, tuning  # noqa: E402


def _blobs(n=300, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = np.clip(rng.normal(0.0, 0.7, (n, 2)) + np.where(y[:, None] == 1, 1.0, -1.0), -3, 3)
    return x, y


# Without a seed: a seeded call is refused a ledger (its noise is reproducible).
ESTIMATORS = [
    (lambda l: learn.DPMLPClassifier(epsilon=2.0, bounds=(-3, 3), classes=[0, 1], epochs=2,
                                     ledger=l), "train", 2.0),
    (lambda l: learn.DPLogisticRegression(epsilon=2.0, bounds=(-3, 3), classes=[0, 1], epochs=2,
                                          ledger=l), "train", 2.0),
    (lambda l: learn.LabelDPClassifier(epsilon=2.0, classes=[0, 1], epochs=2,
                                       ledger=l), "label-dp", 2.0),
    (lambda l: learn.DPKMeans(n_clusters=2, epsilon=2.0, bounds=(-3, 3),
                              ledger=l), "kmeans", 2.0),
    (lambda l: tuning.DPSearchCV(
        learn.DPLogisticRegression(bounds=(-3, 3), classes=[0, 1], epochs=2),
        {"learning_rate": "0.1..1 log", "batch_size": [32, 64]}, epsilon=2.0, trials_mean=2,
        ledger=l), "tune", 2.0),
]


@pytest.mark.parametrize("make, command, epsilon", ESTIMATORS)
def test_an_estimator_over_budget_is_refused_before_it_trains(tmp_path, make, command, epsilon):
    ledger = dpml.Ledger(tmp_path / "small.db", budget=1.0)
    est = make(ledger)
    x, y = _blobs()
    with pytest.raises(ValueError, match="over budget"):
        est.fit(x, y)
    # Nothing was released and nothing recorded: the refusal came before the private work.
    assert not hasattr(est, "privacy_report_")
    assert ledger.balance()["entries"] == 0


@pytest.mark.parametrize("make, command, epsilon", ESTIMATORS)
def test_a_fit_is_recorded_before_it_returns(tmp_path, make, command, epsilon):
    ledger = dpml.Ledger(tmp_path / "budget.db", budget=5.0)
    est = make(ledger)
    x, y = _blobs()
    est.fit(x, y)
    (entry,) = ledger.entries()
    assert (entry["command"], entry["dataset"]) == (command, "array")
    assert 0 < entry["epsilon"] <= epsilon + 1e-9
    assert entry["epsilon"] == pytest.approx(est.epsilon_, rel=0.05)
    # The release carries the ledger's balance after the charge, with the CLI's names.
    report = est.privacy_report_["ledger"]
    assert report == ledger.balance()
    assert report["entries"] == 1 and report["spent_epsilon"] == report["spent"]
    # A second fit is a second release: charged again.
    est.fit(x, y)
    assert ledger.balance()["entries"] == 2


def test_non_private_kmeans_cannot_be_charged(tmp_path):
    ledger = dpml.Ledger(tmp_path / "lloyd.db", budget=5.0)
    x, _ = _blobs()
    with pytest.raises(ValueError, match="lloyd is not differentially private"):
        learn.DPKMeans(n_clusters=2, algorithm="lloyd", bounds=(-3, 3), ledger=ledger).fit(x)
    assert ledger.balance()["entries"] == 0


def test_a_failed_fit_charges_nothing(tmp_path):
    ledger = dpml.Ledger(tmp_path / "fail.db", budget=5.0)
    x, y = _blobs()
    with pytest.raises(ValueError, match="batch_size"):
        learn.DPMLPClassifier(epsilon=1.0, bounds=(-3, 3), classes=[0, 1], batch_size=10**6,
                              ledger=ledger).fit(x, y)
    assert ledger.balance()["entries"] == 0


def test_a_cloned_or_pickled_estimator_charges_the_same_ledger(tmp_path):
    import pickle

    sklearn_base = pytest.importorskip("sklearn.base")
    ledger = dpml.Ledger(tmp_path / "shared.db", budget=5.0)
    est = ESTIMATORS[0][0](ledger)
    twin = sklearn_base.clone(est)
    assert twin.ledger is ledger
    back = pickle.loads(pickle.dumps(est))
    assert back.ledger == ledger and back.get_params() == est.get_params()
    x, y = _blobs()
    twin.fit(x, y)
    back.fit(x, y)
    assert ledger.balance()["entries"] == 2


def test_a_path_where_a_ledger_belongs_is_refused(tmp_path):
    x, y = _blobs()
    with pytest.raises(ValueError, match="ledger must be a dpml.Ledger"):
        learn.DPMLPClassifier(epsilon=1.0, bounds=(-3, 3), classes=[0, 1],
                              ledger=str(tmp_path / "l.db")).fit(x, y)
    with pytest.raises(ValueError, match="ledger must be a dpml.Ledger"):
        mechanisms.laplace(1.0, 1.0, 1.0, ledger=str(tmp_path / "l.db"))


MECHANISMS = [
    ("laplace", lambda l: mechanisms.laplace([1.0, 2.0], 1.0, 0.5, ledger=l), 0.5, 0.0),
    ("gaussian", lambda l: mechanisms.gaussian([1.0, 2.0], 1.0, 0.5, 1e-6, ledger=l), 0.5, 1e-6),
    ("discrete-laplace", lambda l: mechanisms.discrete_laplace([1, 2], 1, 0.5, ledger=l), 0.5, 0.0),
    ("discrete-gaussian",
     lambda l: mechanisms.discrete_gaussian([1, 2], 1, 0.5, 1e-6, ledger=l), 0.5, 1e-6),
    ("randomized-response",
     lambda l: mechanisms.randomized_response([0, 1, 1], 0.5, ledger=l), 0.5, 0.0),
    ("rr-with-prior",
     lambda l: mechanisms.rr_with_prior([0, 1], np.full((2, 2), 0.5), 0.5, ledger=l), 0.5, 0.0),
    ("query", lambda l: stats.mean([1.0, 2.0], 0.5, bounds=(0, 3), ledger=l), 0.5, 0.0),
]


@pytest.mark.parametrize("command, release, epsilon, delta", MECHANISMS)
def test_a_mechanism_is_charged_and_refused_over_budget(tmp_path, command, release, epsilon,
                                                        delta):
    ledger = dpml.Ledger(tmp_path / "mech.db", budget=0.55)
    release(ledger)
    (entry,) = ledger.entries()
    assert (entry["command"], entry["dataset"]) == (command, "array")
    assert entry["epsilon"] == pytest.approx(epsilon)
    assert entry["delta"] == pytest.approx(delta)
    # A second release of epsilon 0.5 would take the total past 0.55: refused, not recorded.
    with pytest.raises(ValueError, match="over budget"):
        release(ledger)
    assert ledger.balance()["entries"] == 1


def test_a_stated_epsilon_below_the_events_own_raises_and_records_nothing(tmp_path):
    # Basic composition adds the stated epsilon: a Laplace release of epsilon 1000 stated as
    # costing 0 would be charged nothing.
    ledger = dpml.Ledger(tmp_path / "stated.db", budget=2000.0)
    event = dpml.events.LaplaceDpEvent(noise_multiplier=0.001)
    with pytest.raises(ValueError, match="below what its event costs"):
        ledger.spend("understated", event, epsilon=0.0)
    assert ledger.entries() == []
    ledger.spend("honest", event, epsilon=1000.0)
    assert len(ledger.entries()) == 1
    # A text is not read as a number.
    with pytest.raises(ValueError, match="epsilon must be a real number, got '1000'"):
        ledger.spend("text", event, epsilon="1000")
    assert len(ledger.entries()) == 1


def test_a_label_or_event_of_the_wrong_type_is_refused_by_name(tmp_path):
    # The native call would raise a TypeError naming neither argument.
    ledger = dpml.Ledger(tmp_path / "types.db", budget=5.0)
    event = dpml.events.LaplaceDpEvent(noise_multiplier=1.0)
    with pytest.raises(ValueError, match="label must be a text"):
        ledger.spend(5, event, epsilon=1.0)
    with pytest.raises(ValueError, match="event must be a DpEvent"):
        ledger.spend("count", {"laplace": 1.0}, epsilon=1.0)
    with pytest.raises(ValueError, match="label must be a text .*b'x'"):
        stats.count([1, 2], 1.0, ledger=ledger, label=b"x")
    assert ledger.entries() == []


def test_a_release_under_another_relation_is_refused_and_records_nothing(tmp_path):
    # A ledger of whole-record releases cannot add up randomized response (each answer
    # private on its own) or RR-with-prior (labels only): their epsilons mean another thing.
    ledger = dpml.Ledger(tmp_path / "records.db", budget=5.0)
    stats.count([1, 2, 3], 0.5, ledger=ledger)
    with pytest.raises(ValueError, match="ledger of its own"):
        mechanisms.randomized_response([0, 1, 1], 0.5, ledger=ledger)
    with pytest.raises(ValueError, match="ledger of its own"):
        mechanisms.rr_with_prior([0, 1], np.full((2, 2), 0.5), 0.5, ledger=ledger)
    assert [e["neighbouring"] for e in ledger.entries()] == ["record"]
    answers = dpml.Ledger(tmp_path / "answers.db", budget=5.0)
    mechanisms.randomized_response([0, 1, 1], 0.5, ledger=answers)
    assert [e["neighbouring"] for e in answers.entries()] == ["answer"]
