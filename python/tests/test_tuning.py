"""dpml.tuning: the private search dpml tune runs, in scikit-learn's conventions."""

import json
import pickle

import numpy as np
import pytest

from dpml.accounting import RepeatAndSelectDpEvent, dp_sgd_event, epsilon, event_from_dict
from dpml import learn
from dpml.learn import DPLogisticRegression, DPMLPClassifier
from dpml.tuning import DPSearchCV, tune

# Added by the command line to every result: the version and the command typed.
ENVELOPE = {"command", "dpml_version"}

SPACE = {"learning_rate": "0.5..4 log", "batch_size": [64, 128]}


def digits():
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def estimator():
    return DPLogisticRegression(bounds=(0, 16), classes=list(range(10)), epochs=2, batch_size=128)


def test_a_search_meets_its_total_and_mirrors_the_cli():
    X, y = digits()
    s = DPSearchCV(estimator(), SPACE, epsilon=2.0, trials_mean=3, random_state=4).fit(X, y)
    r = s.privacy_report_
    assert 1.99 < s.epsilon_ <= 2.0
    assert r["accountant"] == "rdp" and s.delta_ == 1e-5
    assert r["epsilon_per_trial"] < s.epsilon_
    assert r["tuning"]["repetitions"] == {"law": "poisson", "mean": 3.0}
    # The trials are diagnostics; cv_results_ lists them in scikit-learn's layout.
    trials = r["diagnostics"]["trials"]
    assert "trials" not in r
    assert len(s.cv_results_["params"]) == len(trials) == r["diagnostics"]["trials_run"]
    if not trials:
        assert s.best_estimator_ is None
        return
    assert s.cv_results_["rank_noisy_score"].min() == 1
    best = int(np.argmin(s.cv_results_["rank_noisy_score"]))
    assert s.cv_results_["noisy_score"][best] == s.best_score_ == r["best"]["noisy_score"]
    assert s.best_params_["batch_size"] in (64, 128)
    assert 0.5 <= s.best_params_["learning_rate"] <= 4.0
    # The kept model predicts; its report is the search's (with its run's epoch log).
    kept = s.best_estimator_
    assert kept.epsilon_ == s.epsilon_
    assert {k: v for k, v in kept.privacy_report_.items() if k != "diagnostics"} == {
        k: v for k, v in r.items() if k != "diagnostics"
    }
    assert len(kept.privacy_report_["diagnostics"]["epoch_log"]) == 2
    facts = json.loads(kept.model_.facts_json())
    assert facts["tuning"]["repetitions"] == {"law": "poisson", "mean": 3.0}
    assert facts["epsilon"] == pytest.approx(s.epsilon_, rel=1e-12)
    # It pickles, and its model file is the command line's.
    again = pickle.loads(pickle.dumps(s))
    assert (again.predict(X[:20]) == s.predict(X[:20])).all()
    assert kept.get_params()["learning_rate"] == s.best_params_["learning_rate"]
    assert s.predict(X[:5]).shape == (5,)
    assert 0.3 < s.score(X, y) <= 1.0
    assert r["epsilon_kept_run"] < s.epsilon_


def test_the_reported_event_accounts_to_the_same_epsilon():
    X, y = digits()
    s = tune(X, y, estimator(), "learning_rate=0.5..4 log, batch_size=64|128",
             epsilon=3.0, trials="truncated-negative-binomial", eta=0.0, trials_mean=3,
             random_state=2)
    event = event_from_dict(s.privacy_report_["event"])
    assert isinstance(event, RepeatAndSelectDpEvent) and event.shape == 0.0
    assert abs(epsilon(event, 1e-5, accountant="rdp") - s.epsilon_) < 1e-9


def test_repeat_and_select_events_follow_dp_accounting():
    run = dp_sgd_event(1.0, 0.01, 1000)
    one = epsilon(run, 1e-5, accountant="rdp")
    poisson = epsilon(RepeatAndSelectDpEvent(run, mean=10.0), 1e-5, accountant="rdp")
    geometric = epsilon(RepeatAndSelectDpEvent(run, mean=10.0, shape=1.0), 1e-5, accountant="rdp")
    assert one < poisson < 3 * one and one < geometric
    with pytest.raises(ValueError, match="RDP"):
        epsilon(RepeatAndSelectDpEvent(run, mean=10.0), 1e-5, accountant="pld")


def test_release_trials_releases_every_noisy_score_under_the_larger_bound():
    X, y = digits()
    kw = dict(epsilon=2.0, trials_mean=3, random_state=4)
    every = DPSearchCV(estimator(), SPACE, release_trials=True, **kw).fit(X, y)
    best = DPSearchCV(estimator(), SPACE, **kw).fit(X, y)
    r = every.privacy_report_
    assert 1.99 < every.epsilon_ <= 2.0
    assert r["tuning"]["released"].startswith("every trial")
    assert best.privacy_report_["tuning"]["released"].startswith("best trial only")
    assert "trials" not in best.privacy_report_ and "--release-trials" in best.privacy_report_["note"]
    assert r["event"]["type"] == "repeat_and_release_all"
    # At the same total each trial gets less: its noise is calibrated to the larger bound.
    assert r["epsilon_per_trial"] < best.privacy_report_["epsilon_per_trial"]
    trials = r["trials"]
    assert len(trials) == r["diagnostics"]["trials_run"] > 0
    assert all(set(t) == {"hyperparameters", "noise_multiplier", "noisy_score"} for t in trials)
    # cv_results_ lists the released scores; the exact accuracies stay diagnostics.
    assert list(every.cv_results_["noisy_score"]) == [t["noisy_score"] for t in trials]
    assert max(t["noisy_score"] for t in trials) == every.best_score_
    facts = json.loads(every.best_estimator_.model_.facts_json())
    assert facts["tuning"]["released"] == "every"
    # Without diagnostics the released list remains, and so does cv_results_ (without the
    # diagnostic columns).
    quiet = tune(X, y, estimator(), SPACE, release_trials=True, diagnostics=False, **kw)
    assert "diagnostics" not in quiet.privacy_report_
    assert quiet.privacy_report_["trials"] == trials
    assert len(quiet.cv_results_["params"]) == len(trials)
    assert "validation_accuracy" not in quiet.cv_results_
    with pytest.raises(ValueError, match="releasing every trial, cannot meet epsilon"):
        DPSearchCV(estimator(), SPACE, epsilon=1.5, trials_mean=30, release_trials=True).fit(X, y)


def test_bad_searches_raise_value_error_before_training():
    X, y = digits()
    for space, words in [
        ({"learning_rate": "2..0.5"}, "empty range"),
        ({"learning_rate": [-1, 0.5]}, "must be > 0"),
        ({"temperature": "1..2"}, "unknown hyperparameter"),
        ({"batch_size": [128]}, "one point only"),
    ]:
        with pytest.raises(ValueError, match=words):
            DPSearchCV(estimator(), space, trials_mean=3).fit(X, y)
    with pytest.raises(ValueError, match="cannot meet epsilon"):
        DPSearchCV(estimator(), SPACE, epsilon=0.05, trials_mean=100).fit(X, y)
    with pytest.raises(ValueError, match="needs eta"):
        DPSearchCV(estimator(), SPACE, trials="truncated-negative-binomial").fit(X, y)
    with pytest.raises(ValueError, match="trials_mean is required"):
        DPSearchCV(estimator(), SPACE).fit(X, y)
    with pytest.raises(ValueError, match="estimator must be"):
        DPSearchCV(learn.DPKMeans(), SPACE, trials_mean=3).fit(X, y)


def test_the_search_defaults_to_the_estimator_privacy_and_leaves_diagnostics_out_on_request():
    X, y = digits()
    base = DPLogisticRegression(epsilon=1.5, bounds=(0, 16), classes=list(range(10)), epochs=1)
    s = DPSearchCV(base, SPACE, trials_mean=2, random_state=3, diagnostics=False).fit(X, y)
    assert 1.49 < s.epsilon_ <= 1.5
    assert "diagnostics" not in s.privacy_report_ and s.cv_results_["params"] == []
    assert s.privacy_report_["score"]["validation_size"] > 0
    assert learn.DEFAULTS["tune"]["validation_fraction"] == 0.1


def test_python_and_the_command_line_release_the_same_fields(dpml_cli, tmp_path):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.0, 1.0, (400, 3))
    y = (x[:, 0] + x[:, 1] > 1.0).astype(int)
    csv = tmp_path / "table.csv"
    rows = "\n".join(f"{a},{b},{c},{label}" for (a, b, c), label in zip(x, y))
    csv.write_text("a,b,c,label\n" + rows + "\n")
    space = "learning-rate=0.1..1 log, batch-size=32|64"
    cli = dpml_cli("tune", "--dataset", f"csv:{csv}", "--bounds", "0,1", "--classes", "0,1",
                   "--search", space, "--trials-mean", 2, "--epochs", 1, "--epsilon", 2,
                   "--seed", 1)
    base = DPMLPClassifier(bounds=(0, 1), classes=[0, 1], epochs=1)
    py = DPSearchCV(base, space.replace("-", "_"), epsilon=2, trials_mean=2,
                    random_state=1).fit(x, y)
    r = py.privacy_report_
    assert set(r) - {"diagnostics"} == set(cli) - ENVELOPE - {"diagnostics", "model_file"}
    for key in ("accountant", "delta", "model", "tuning", "search_space", "public", "neighbouring"):
        assert r[key] == cli[key], key
