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


@pytest.mark.parametrize("statistic", [stats.count, stats.sum, stats.mean, stats.histogram])
@pytest.mark.parametrize("seed", [-1, 2**64, 1.5])
def test_a_seed_out_of_range_is_a_value_error_naming_it(statistic, seed):
    kwargs = {} if statistic is stats.count else {"bounds": (0.0, 1.0)}
    with pytest.raises(ValueError, match=r"seed must be"):
        statistic([0.5], epsilon=1.0, seed=seed, **kwargs)


def test_records_of_several_columns_are_counted_not_flattened():
    # A matrix is 1000 records of 5 columns: a count counts 1000, and a sum (one number per
    # record, sensitivity max(|low|, |high|)) refuses it rather than sum 5000 values.
    x = np.ones((1000, 5))
    assert abs(stats.count(x, epsilon=10.0, seed=1).value - 1000) < 10
    for statistic in (stats.sum, stats.mean, stats.histogram):
        with pytest.raises(ValueError, match="one number per record"):
            statistic(x, 10.0, (0.0, 1.0))
    with pytest.raises(ValueError, match="pair"):
        stats.sum([1.0, 2.0], 1.0, (0.0,))
    with pytest.raises(ValueError, match="complex"):
        stats.sum(np.array([1 + 2j]), 1.0, (0.0, 1.0))
    with pytest.raises(ValueError, match="complex"):
        mechanisms.laplace(np.array([1 + 2j]), 1.0, 1.0)


def test_whole_number_arguments_are_checked_not_truncated():
    # int(1.9) is 1: half the noise a sensitivity of 1.9 needs.
    with pytest.raises(ValueError, match="sensitivity must be a whole number"):
        mechanisms.discrete_laplace([3], 1.9, 1.0)
    with pytest.raises(ValueError, match="categories must be a whole number"):
        mechanisms.randomized_response([0, 1], 1.0, 2.5)
    noisy, _ = mechanisms.discrete_laplace([3], 2.0, 1.0, seed=1)
    assert isinstance(noisy[0], (int, np.integer))
    with pytest.raises(ValueError, match="64-bit"):
        mechanisms.discrete_laplace(np.array([2**64 - 1], dtype=np.uint64), 1, 1.0)
    with pytest.raises(ValueError, match="count must be a whole number"):
        accounting.SelfComposedDpEvent(accounting.GaussianDpEvent(1.0), 2.9).to_dict()


def test_ledger_charges_and_refuses_over_budget(tmp_path):
    ledger = dpml.Ledger(tmp_path / "budget.db", budget=1.0)
    r = stats.count(np.ones(10), epsilon=0.6, ledger=ledger, label="first")
    # The command line's field names (dpml query --ledger's "ledger" object).
    assert r.ledger["spent"] == pytest.approx(0.6)
    with pytest.raises(ValueError, match="budget"):
        stats.count(np.ones(10), epsilon=0.6, ledger=ledger)
    entries = ledger.entries()
    assert [e["label"] for e in entries] == ["first"]
    assert set(entries[0]) == {
        "id", "time", "command", "dataset", "label", "epsilon", "delta", "event", "run",
        "neighbouring", "epsilon_at_ledger_delta",
    }
    assert (entries[0]["command"], entries[0]["dataset"]) == ("query", "array")
    assert entries[0]["neighbouring"] == "record"
    assert entries[0]["time"].endswith("Z")
    assert ledger.balance()["remaining"] == pytest.approx(0.4)
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
    # Ghazi et al.'s rule (the default, "information", may choose a unary encoding instead).
    released, likelihood, event = mechanisms.rr_with_prior(
        y, sharp, eps, rule="expected-accuracy", seed=1
    )
    assert released.shape == (n,) and likelihood.shape == (n, k)
    assert np.mean(released == y) > 0.99
    uniform = np.full((n, k), 1.0 / k)
    released, likelihood, _ = mechanisms.rr_with_prior(
        y, uniform, eps, rule="expected-accuracy", seed=2
    )
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
    # A class count from the priors' shape alone once built 4e9 randomizers before any label.
    with pytest.raises(ValueError, match="at most 1048576 classes, got 4000000000"):
        mechanisms.rr_with_prior(np.zeros(0, dtype=np.int64), np.zeros((0, 4_000_000_000)), 1.0)


def test_a_missing_ledger_is_refused_in_python_terms(tmp_path):
    with pytest.raises(ValueError, match=r"dpml\.Ledger\(path, budget=") as e:
        dpml.Ledger(tmp_path / "nowhere.db")
    assert "dpml ledger create" not in str(e.value)


def test_python_and_cli_ledgers_show_the_same_fields(dpml_cli, tmp_path):
    path = tmp_path / "b.db"
    ledger = dpml.Ledger(path, budget=2.0)
    stats.count(np.ones(10), epsilon=0.5, ledger=ledger, label="py")
    shown = dpml_cli("ledger", "show", "--ledger", path)
    assert shown["entries"][0].keys() == ledger.entries()[0].keys()
    assert set(ledger.balance()) <= set(shown)
    assert ledger.balance()["spent"] == shown["spent"]


def test_array_mechanisms_account_the_rounding_of_every_entry():
    # Each entry is rounded to the noise grid; the mechanism must cover the rounding of all
    # d entries (sensitivity + d*g), not of one: for d = 10**6 a scalar mechanism's claimed
    # epsilon = 1 was 1.9. The covering noise is visibly larger than sensitivity/epsilon.
    d = 10**6
    noisy, event = mechanisms.laplace(np.zeros(d), sensitivity=1.0, epsilon=1.0, seed=1)
    scale = np.sqrt(np.var(noisy) / 2)
    assert scale > 1.5, scale
    assert accounting.epsilon(event, 1e-9, "pld") <= 1.0 + 1e-9
    one, _ = mechanisms.laplace(np.zeros(10_000), sensitivity=1.0, epsilon=1.0, seed=1)
    assert np.sqrt(np.var(one) / 2) == pytest.approx(1.0, rel=0.05)
    g, gevent = mechanisms.gaussian(np.zeros(d), 1.0, 1.0, 1e-5, seed=2)
    assert accounting.epsilon(gevent, 1e-5, "pld") <= 1.0 + 1e-3
    # sigma of the analytic Gaussian at (1, 1e-5) is 3.73 for one value; the grid slack of
    # a million entries adds sqrt(d)*g (g <= sigma / 2**14), about 6%.
    assert np.std(g) > 3.73 * 1.03


def test_a_scalar_in_gives_a_scalar_out_and_integer_mechanisms_give_integers():
    v, _ = mechanisms.discrete_laplace(3, 1, 1.0, seed=1)
    assert isinstance(v, int)
    v, _ = mechanisms.discrete_gaussian(np.int64(3), 1, 1.0, 1e-5, seed=1)
    assert isinstance(v, int)
    v, _ = mechanisms.laplace(3.0, 1.0, 1.0, seed=1)
    assert isinstance(v, float)
    a, _ = mechanisms.discrete_laplace([3, 4], 1, 1.0, seed=1)
    assert a.dtype == np.int64 and a.shape == (2,)


def test_rr_with_prior_defaults_to_the_command_lines_rule():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 10, 500)
    prior = np.full((500, 10), 0.1)
    default, _, _ = mechanisms.rr_with_prior(y, prior, 0.5, seed=4)
    information, _, _ = mechanisms.rr_with_prior(y, prior, 0.5, rule="information", seed=4)
    assert np.array_equal(default, information)
    assert dpml.learn.DEFAULTS["top_k_rule"] == "information"


def test_public_modules_list_only_their_names():
    for module in (accounting, mechanisms, stats, dpml.audit, dpml.events, dpml.learn):
        listed = dir(module)
        assert not {"Any", "np", "math", "json", "Optional"} & set(listed), listed
        assert set(module.__all__) <= set(listed)
