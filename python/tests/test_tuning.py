"""dpml.tuning: the private search dpml tune runs, in scikit-learn's conventions."""

import numpy as np
import pytest

from dpml.accounting import RepeatAndSelectDpEvent, dp_sgd_event, epsilon, event_from_dict
from dpml.learn import DPLogisticRegression
from dpml.tuning import DPSearchCV, tune

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
    # The kept model predicts; its report is the search's.
    kept = s.best_estimator_
    assert kept.epsilon_ == s.epsilon_ and kept.privacy_report_ == r
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
