"""dpml.mechanisms and dpml.stats: values with their events, ledger charging, CLI agreement."""

import numpy as np
import pytest

import dpml
from dpml import accounting, mechanisms, stats


def test_samplers_return_noisy_arrays_and_their_events():
    x = np.zeros(20000)
    noisy, event = mechanisms.laplace(x, sensitivity=1.0, epsilon=1.0, seed=1)
    assert noisy.shape == x.shape
    # Laplace of scale 1: variance 2 (on a fine grid).
    assert np.var(noisy) == pytest.approx(2.0, rel=0.1)
    assert isinstance(event, accounting.LaplaceDpEvent)
    assert accounting.epsilon(event, 1e-9, "pld") <= 1.0 + 1e-3
    g, gevent = mechanisms.gaussian(x.reshape(100, 200), 1.0, 1.0, 1e-5, seed=2)
    assert g.shape == (100, 200)
    assert accounting.epsilon(gevent, 1e-5, "pld") <= 1.0 + 1e-3
    ints, dl = mechanisms.discrete_laplace(np.arange(1000), 1, 1.0, seed=3)
    assert ints.dtype == np.int64 and not np.array_equal(ints, np.arange(1000))
    dg, _ = mechanisms.discrete_gaussian(np.zeros(1000, dtype=int), 1, 1.0, 1e-5, seed=3)
    assert dg.dtype == np.int64
    rr, rr_event = mechanisms.randomized_response(np.ones(10000, dtype=int), np.log(3), 2, seed=4)
    assert np.mean(rr == 1) == pytest.approx(0.75, abs=0.02)
    assert accounting.epsilon(rr_event, 1e-9, "pld") == pytest.approx(np.log(3), abs=1e-3)
    # Seeded calls are reproducible; unseeded ones are not.
    again, _ = mechanisms.laplace(x, 1.0, 1.0, seed=1)
    assert np.array_equal(noisy, again)
    fresh, _ = mechanisms.laplace(x, 1.0, 1.0)
    assert not np.array_equal(noisy, fresh)


def test_statistics_and_bounds():
    values = np.linspace(0.0, 10.0, 1001)
    m = stats.mean(values, epsilon=10.0, bounds=(0.0, 10.0), seed=5)
    assert m.value == pytest.approx(5.0, abs=0.1) and m.epsilon == 10.0
    c = stats.count(values, epsilon=1.0, seed=5)
    assert abs(c.value - 1001) < 30
    h = stats.histogram(values, epsilon=1.0, bounds=(0.0, 10.0), bins=5, seed=5)
    assert h.value.shape == (5,)
    s = stats.sum(values, epsilon=1.0, bounds=(0.0, 10.0), delta=1e-6, seed=5)
    assert s.delta == 1e-6 and abs(s.value - values.sum()) < 200
    with pytest.raises(ValueError, match="never from the data"):
        stats.sum(values, epsilon=1.0, bounds=None)
    with pytest.raises(ValueError, match="epsilon"):
        stats.count(values, epsilon=-1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        mechanisms.laplace(values, -1.0, 1.0)


def test_ledger_charges_and_refuses_over_budget(tmp_path):
    ledger = dpml.Ledger(tmp_path / "budget.db", budget=1.0)
    r = stats.count(np.ones(10), epsilon=0.6, ledger=ledger, label="first")
    assert r.ledger["spent_epsilon"] == pytest.approx(0.6)
    with pytest.raises(ValueError, match="budget"):
        stats.count(np.ones(10), epsilon=0.6, ledger=ledger)
    entries = ledger.entries()
    assert [e["label"] for e in entries] == ["first"]
    assert ledger.balance()["remaining_epsilon"] == pytest.approx(0.4)
    reopened = dpml.Ledger(tmp_path / "budget.db")
    assert reopened.balance()["entries"] == 1


def test_python_and_cli_agree_on_a_query(dpml_cli, tmp_path):
    col = np.round(np.linspace(0.0, 5.0, 200), 6)
    csv = tmp_path / "t.csv"
    csv.write_text("v,label\n" + "\n".join(f"{v},0" for v in col) + "\n")
    cli = dpml_cli("query", "--dataset", f"csv:{csv}", "--column", "v", "--aggregate", "mean",
                   "--bounds", "0,5", "--epsilon", 1.0, "--seed", 9)
    py = stats.mean(col, epsilon=1.0, bounds=(0.0, 5.0), seed=9)
    assert py.value == pytest.approx(cli["value"], rel=1e-12)


def test_rr_with_prior_keeps_labels_at_the_rate_its_candidate_sets_allow():
    from dpml import mechanisms

    n, k, eps = 20000, 10, 1.0
    rng = np.random.default_rng(0)
    y = rng.integers(0, k, n)
    # A confident, correct prior: the candidate set is the true label alone, which RR over one
    # class keeps always; a uniform prior gives plain k-ary RR.
    sharp = np.full((n, k), 1e-6)
    sharp[np.arange(n), y] = 1.0
    released, likelihood, event = mechanisms.rr_with_prior(y, sharp, eps, seed=1)
    assert released.shape == (n,) and likelihood.shape == (n, k)
    assert np.mean(released == y) > 0.99
    uniform = np.full((n, k), 1.0 / k)
    released, likelihood, _ = mechanisms.rr_with_prior(y, uniform, eps, seed=2)
    keep = np.exp(eps) / (np.exp(eps) + k - 1)
    assert abs(np.mean(released == y) - keep) < 4 * np.sqrt(keep * (1 - keep) / n)
    # The likelihood of each output under the true label is the keep or the switch probability.
    lik_true = likelihood[np.arange(n), y]
    assert np.allclose(np.where(released == y, keep, (1 - keep) / (k - 1)), lik_true, rtol=1e-3)
    assert event.to_dict()["type"] == "randomized_response"


def test_rr_with_prior_bad_input():
    from dpml import mechanisms

    with pytest.raises(ValueError, match="labels must be in 0..3"):
        mechanisms.rr_with_prior([0, 5], np.full((2, 3), 1 / 3), 1.0)
    with pytest.raises(ValueError, match="one row per label"):
        mechanisms.rr_with_prior([0, 1, 2], np.full((2, 3), 1 / 3), 1.0)
    with pytest.raises(ValueError, match="top-k rule"):
        mechanisms.rr_with_prior([0], np.full((1, 3), 1 / 3), 1.0, rule="best")
