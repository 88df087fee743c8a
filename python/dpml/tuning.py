"""Private hyperparameter search in scikit-learn's conventions (``dpml tune`` in Python).

:class:`DPSearchCV` draws a secret, random number of trials (Papernot & Steinke 2022: a
Poisson or truncated negative binomial number with mean ``trials_mean``), trains each trial
with DP-SGD on hyperparameters drawn at random from ``param_distributions``, scores it with a
noisy count of correct predictions on a keyed validation split of the training records, and
keeps the best. ``epsilon`` is the TOTAL: every trial's noise is calibrated so that the whole
search meets it (a search that cannot is refused before any training). The search runs in
dpml-core, the code ``dpml tune`` runs.

Fitted attributes mirror the command line's JSON: ``privacy_report_`` holds its fields
(``epsilon``, ``epsilon_per_trial``, ``epsilon_kept_run``, ``best``, ``tuning``, ...);
``best_estimator_`` is the kept model as a fitted estimator of the given kind; ``cv_results_``
lists every trial. The trials other than the kept one, their number and every exact accuracy
are NOT covered by ``epsilon``: they come from ``privacy_report_["diagnostics"]`` (diagnostics,
not private releases), and so does ``cv_results_``.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from . import _native
from .learn import DPLogisticRegression, DPMLPClassifier, _features, _Params, _ranges

__all__ = ["DPSearchCV", "tune"]

#: The hyperparameters a search may vary (the estimators' parameter names).
SEARCHABLE = ("learning_rate", "max_grad_norm", "batch_size", "epochs", "momentum")

SpaceLike = Mapping[str, Any]


def _space_json(param_distributions: Union[str, SpaceLike]) -> str:
    """The search space as the library reads it: ``--search`` text, or a mapping of names to
    ``"LO..HI"`` / ``"LO..HI log"`` text, a list of choices, or ``{"range": [lo, hi], "log":
    True}``."""
    if isinstance(param_distributions, str):
        entries = {}
        for entry in filter(None, (e.strip() for e in param_distributions.split(","))):
            name, sep, values = entry.partition("=")
            if not sep:
                raise ValueError(f"search space entry {entry!r} is not name=VALUES")
            entries[name.strip()] = values.strip()
        return json.dumps(entries)
    space = {}
    for name, values in param_distributions.items():
        if isinstance(values, np.ndarray):
            values = values.tolist()
        elif isinstance(values, tuple):
            values = list(values)
        space[name] = values
    return json.dumps(space)


class DPSearchCV(_Params):
    """A private randomized search over ``estimator``'s hyperparameters.

    ``estimator`` is an unfitted :class:`~dpml.learn.DPLogisticRegression` or
    :class:`~dpml.learn.DPMLPClassifier` whose parameters (bounds, classes, model shape and
    the values not searched) every trial starts from; its own ``epsilon`` is ignored: this
    search's ``epsilon`` is the total. ``param_distributions`` maps the names in
    :data:`SEARCHABLE` to ``"LO..HI"``, ``"LO..HI log"``, a list of choices or
    ``{"range": [LO, HI], "log": True}`` (or is ``dpml tune --search`` text).
    ``trials="truncated-negative-binomial"`` needs ``eta`` (0: logarithmic, 1: geometric).
    """

    def __init__(
        self,
        estimator: Any = None,
        param_distributions: Union[str, SpaceLike, None] = None,
        epsilon: Optional[float] = 3.0,
        noise_multiplier: Optional[float] = None,
        delta: Optional[float] = None,
        trials: str = "poisson",
        trials_mean: float = 10.0,
        eta: Optional[float] = None,
        validation_fraction: float = 0.1,
        score_epsilon: Optional[float] = None,
        random_state: Optional[int] = None,
    ) -> None:
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.epsilon = epsilon
        self.noise_multiplier = noise_multiplier
        self.delta = delta
        self.trials = trials
        self.trials_mean = trials_mean
        self.eta = eta
        self.validation_fraction = validation_fraction
        self.score_epsilon = score_epsilon
        self.random_state = random_state

    def _repetitions(self) -> str:
        law = self.trials.replace("-", "_")
        if law == "poisson":
            if self.eta is not None:
                raise ValueError("eta applies to trials='truncated-negative-binomial', not poisson")
            return json.dumps({"law": "poisson", "mean": float(self.trials_mean)})
        if law == "truncated_negative_binomial":
            if self.eta is None:
                raise ValueError("trials='truncated-negative-binomial' needs eta (0: logarithmic, 1: geometric)")
            return json.dumps({"law": law, "eta": float(self.eta), "mean": float(self.trials_mean)})
        raise ValueError(f"unknown trials law {self.trials!r}; known: poisson, truncated-negative-binomial")

    def fit(self, X: Any, y: Any) -> "DPSearchCV":
        """Searches on ``(X, y)``; returns self."""
        base = self.estimator if self.estimator is not None else DPLogisticRegression()
        if not isinstance(base, (DPLogisticRegression, DPMLPClassifier)):
            raise ValueError(
                f"estimator must be a DPLogisticRegression or DPMLPClassifier, got {type(base).__name__}"
            )
        if self.param_distributions is None:
            raise ValueError("param_distributions is required: the space to search")
        if (self.epsilon is None) == (self.noise_multiplier is None):
            raise ValueError("give exactly one of epsilon (the search's total) and noise_multiplier")
        x = _features(X)
        classes, labels = base._class_indices(x, y)
        privacy = (
            {"kind": "target_epsilon", "value": float(self.epsilon)}
            if self.epsilon is not None
            else {"kind": "noise_multiplier", "value": float(self.noise_multiplier)}
        )
        recipe: Dict[str, Any] = {
            "model": base._model,
            "privacy": privacy,
            "delta": float(self.delta if self.delta is not None else base.delta),
            "max_grad_norm": float(base.max_grad_norm),
            "epochs": float(base.epochs),
            "batch_size": int(base.batch_size),
            "learning_rate": float(base.learning_rate),
        }
        if isinstance(base, DPMLPClassifier):
            recipe["hidden"] = [int(h) for h in base.hidden_layer_sizes]
        model, report = _native.tune_fit(
            x,
            labels,
            len(classes),
            _ranges(base.bounds, x.shape[1]),
            json.dumps(recipe),
            _space_json(self.param_distributions),
            self._repetitions(),
            float(self.validation_fraction),
            None if self.score_epsilon is None else float(self.score_epsilon),
            self.random_state,
        )
        self.privacy_report_ = json.loads(report)
        self.epsilon_ = self.privacy_report_["epsilon"]
        self.delta_ = self.privacy_report_["delta"]
        self.cv_results_ = _cv_results(self.privacy_report_)
        best = self.privacy_report_.get("best")
        if best is None:
            # The law drew no trial (Poisson's K = 0): nothing was trained.
            self.best_estimator_ = None
            self.best_params_ = None
            self.best_score_ = None
            return self
        self.best_params_ = {k: _value(k, best[k]) for k in SEARCHABLE if k in best and k != "momentum"}
        self.best_score_ = best["noisy_score"]
        kept = copy.deepcopy(base)
        kept.set_params(**self.best_params_)
        kept._fitted(model, classes, x, report)
        kept.epsilon_ = self.epsilon_
        kept.delta_ = self.delta_
        self.best_estimator_ = kept
        return self

    def _kept(self) -> Any:
        if getattr(self, "best_estimator_", None) is None:
            raise ValueError("no fitted model: call fit first (a search that drew no trial keeps none)")
        return self.best_estimator_

    def predict(self, X: Any) -> np.ndarray:
        """The kept model's predictions (post-processing: no privacy cost)."""
        return self._kept().predict(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """The kept model's class probabilities."""
        return self._kept().predict_proba(X)

    def score(self, X: Any, y: Any) -> float:
        """The kept model's accuracy on ``(X, y)``."""
        return self._kept().score(X, y)


def _value(name: str, v: Any) -> Any:
    return int(v) if name in ("batch_size",) else float(v)


def _cv_results(report: Dict[str, Any]) -> Dict[str, Any]:
    """Every trial in scikit-learn's layout (``params``, ``param_<name>``, scores, ranks), from
    the report's diagnostics: empty when they were left out."""
    trials = report.get("diagnostics", {}).get("trials", [])
    params = [t["hyperparameters"] for t in trials]
    names = sorted({k for p in params for k in p})
    scores = np.array([t["noisy_score"] for t in trials], dtype=np.float64)
    order = (-scores).argsort(kind="stable")
    rank = np.empty(len(scores), dtype=np.int64)
    rank[order] = np.arange(1, len(scores) + 1)
    results: Dict[str, Any] = {"params": params}
    for n in names:
        results[f"param_{n}"] = np.array([p.get(n) for p in params], dtype=object)
    results["noisy_score"] = scores
    results["rank_noisy_score"] = rank
    results["validation_accuracy"] = np.array(
        [t["validation_accuracy"] for t in trials], dtype=np.float64
    )
    results["noise_multiplier"] = np.array([t["noise_multiplier"] for t in trials], dtype=np.float64)
    results["fit_time"] = np.array([t["wall_seconds"] for t in trials], dtype=np.float64)
    return results


def tune(X: Any, y: Any, estimator: Any, param_distributions: Union[str, SpaceLike], **kwargs: Any) -> DPSearchCV:
    """``DPSearchCV(estimator, param_distributions, **kwargs).fit(X, y)``."""
    return DPSearchCV(estimator, param_distributions, **kwargs).fit(X, y)
